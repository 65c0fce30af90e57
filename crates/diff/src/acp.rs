//! The ACP rendering: old and new text for the editor's inline diff.

use serde::{Deserialize, Serialize};

use crate::model::{Change, FileDiff, Hunk, Line, LineKind};

/// Largest file, in bytes, whose full old and new text go into [`AcpDiff`]: 1 MiB.
///
/// [`FileDiff::compute`] keeps a copy of both texts when neither side is larger than this, so
/// that [`FileDiff::acp`] can hand the editor the whole file. Past it (either side), the diff
/// keeps only its hunks and [`FileDiff::acp`] returns the bounded form, itself capped at this
/// many bytes per side.
pub const ACP_FULL_TEXT_LIMIT: usize = 1024 * 1024;

/// The line put between hunks in the bounded form, identical on both sides so an editor shows
/// it as unchanged.
pub const ACP_GAP_LINE: &str = "⋮\n";

/// Diff content for an ACP client: the file's old and new text, which the editor diffs itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcpDiff {
    /// The file's path (its new path for a rename).
    pub path: String,
    /// The old text; `None` for a new file.
    pub old_text: Option<String>,
    /// The new text; empty for a deleted file.
    pub new_text: String,
    /// True when the texts are not the whole file but only the hunks (see
    /// [`ACP_FULL_TEXT_LIMIT`]).
    #[serde(default)]
    pub bounded: bool,
}

impl FileDiff {
    /// The diff as ACP diff content.
    ///
    /// For files up to [`ACP_FULL_TEXT_LIMIT`] these are the full texts, kept by
    /// [`FileDiff::compute`] (this is why `acp` takes no texts: they cannot be mismatched).
    /// Larger files get the bounded form: each side is the hunks' lines (context included, line
    /// endings restored) with [`ACP_GAP_LINE`] between hunks, whole hunks only, until a side
    /// would pass the limit; a first hunk that alone is too big is cut at a line boundary.
    pub fn acp(&self) -> AcpDiff {
        let path = self.path.clone();
        if let Some(texts) = &self.full_texts {
            return AcpDiff {
                path,
                old_text: texts.old.clone(),
                new_text: texts.new.clone().unwrap_or_default(),
                bounded: false,
            };
        }
        let (old_text, new_text) = bounded_texts(&self.hunks, ACP_FULL_TEXT_LIMIT);
        AcpDiff {
            path,
            old_text: (self.change != Change::Create).then_some(old_text),
            new_text,
            bounded: true,
        }
    }
}

fn side_len(hunk: &Hunk, keep: LineKind) -> usize {
    hunk.lines
        .iter()
        .filter(|line| line.kind == LineKind::Context || line.kind == keep)
        .map(|line| line.text.len() + line.ending().len())
        .sum()
}

fn push_line(out: &mut String, line: &Line) {
    out.push_str(&line.text);
    out.push_str(line.ending());
}

/// Old and new text made of whole hunks, each side at most `limit` bytes.
fn bounded_texts(hunks: &[Hunk], limit: usize) -> (String, String) {
    let mut old = String::new();
    let mut new = String::new();
    for (index, hunk) in hunks.iter().enumerate() {
        let gap = if index == 0 { 0 } else { ACP_GAP_LINE.len() };
        let fits = |text: &String, keep| text.len() + gap + side_len(hunk, keep) <= limit;
        if fits(&old, LineKind::Removed) && fits(&new, LineKind::Added) {
            if index > 0 {
                old.push_str(ACP_GAP_LINE);
                new.push_str(ACP_GAP_LINE);
            }
            for line in &hunk.lines {
                if line.kind != LineKind::Added {
                    push_line(&mut old, line);
                }
                if line.kind != LineKind::Removed {
                    push_line(&mut new, line);
                }
            }
            continue;
        }
        if index == 0 {
            push_partial_hunk(&mut old, &mut new, hunk, limit);
        }
        break;
    }
    (old, new)
}

/// The leading lines of a hunk too big for `limit`, stopping before a side would pass it.
fn push_partial_hunk(old: &mut String, new: &mut String, hunk: &Hunk, limit: usize) {
    for line in &hunk.lines {
        let size = line.text.len() + line.ending().len();
        let to_old = line.kind != LineKind::Added;
        let to_new = line.kind != LineKind::Removed;
        if (to_old && old.len() + size > limit) || (to_new && new.len() + size > limit) {
            break;
        }
        if to_old {
            push_line(old, line);
        }
        if to_new {
            push_line(new, line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn numbered(count: usize) -> String {
        (1..=count).map(|n| format!("line {n}\r\n")).collect()
    }

    #[test]
    fn small_files_get_full_texts() {
        let d = FileDiff::compute("a", Some(b"x\ny\n"), Some(b"x\nz\n")).unwrap();
        assert_eq!(
            d.acp(),
            AcpDiff {
                path: "a".into(),
                old_text: Some("x\ny\n".into()),
                new_text: "x\nz\n".into(),
                bounded: false
            }
        );
        let created = FileDiff::compute("a", None, Some(b"new\n")).unwrap().acp();
        assert_eq!(
            (created.old_text, created.new_text.as_str()),
            (None, "new\n")
        );
        let deleted = FileDiff::compute("a", Some(b"old\n"), None).unwrap().acp();
        assert_eq!(
            (deleted.old_text.as_deref(), deleted.new_text.as_str()),
            (Some("old\n"), "")
        );
    }

    #[test]
    fn large_files_get_whole_hunks_with_gap_lines() {
        // Pad lines so the file passes the limit.
        let pad = "x".repeat(200);
        let old: String = (1..=6000).map(|n| format!("{n} {pad}\r\n")).collect();
        assert!(old.len() > ACP_FULL_TEXT_LIMIT);
        let new = old
            .replace(
                &format!("\r\n100 {pad}\r\n"),
                &format!("\r\nhundred {pad}\r\n"),
            )
            .replace(
                &format!("\r\n5000 {pad}\r\n"),
                &format!("\r\n5000 {pad}\r\nadded\r\n"),
            );
        let d = FileDiff::compute("big", Some(old.as_bytes()), Some(new.as_bytes())).unwrap();
        assert_eq!(d.hunks.len(), 2);
        let acp = d.acp();
        assert!(acp.bounded);
        let old_text = acp.old_text.unwrap();
        let expected_old: String = (97..=103)
            .chain(4998..=5003)
            .map(|n| format!("{n} {pad}\r\n"))
            .collect::<Vec<_>>()
            .join("")
            .replacen(&format!("103 {pad}\r\n"), &format!("103 {pad}\r\n⋮\n"), 1);
        assert_eq!(old_text, expected_old);
        assert!(acp.new_text.contains(&format!("hundred {pad}\r\n")));
        assert!(
            acp.new_text
                .contains(&format!("5000 {pad}\r\nadded\r\n5001"))
        );
        assert_eq!(acp.new_text.matches('⋮').count(), 1);
    }

    #[test]
    fn bounded_form_stops_at_the_limit() {
        let d = FileDiff::compute(
            "a",
            Some(numbered(40).as_bytes()),
            Some(
                numbered(40)
                    .replace("line 5\r", "five\r")
                    .replace("line 30\r", "thirty\r")
                    .as_bytes(),
            ),
        )
        .unwrap();
        assert_eq!(d.hunks.len(), 2);
        // Room for the first hunk (7 lines of ~8 bytes) but not the second.
        let (old, new) = bounded_texts(&d.hunks, 70);
        assert_eq!(
            old,
            "line 2\r\nline 3\r\nline 4\r\nline 5\r\nline 6\r\nline 7\r\nline 8\r\n"
        );
        assert_eq!(
            new,
            "line 2\r\nline 3\r\nline 4\r\nfive\r\nline 6\r\nline 7\r\nline 8\r\n"
        );
        // A first hunk bigger than the limit is cut at a line boundary.
        let (old, new) = bounded_texts(&d.hunks, 20);
        assert_eq!(
            (old.as_str(), new.as_str()),
            ("line 2\r\nline 3\r\n", "line 2\r\nline 3\r\n")
        );
    }

    #[test]
    fn created_large_file_has_no_old_text() {
        let new = "y".repeat(ACP_FULL_TEXT_LIMIT + 1);
        let acp = FileDiff::compute("a", None, Some(new.as_bytes()))
            .unwrap()
            .acp();
        assert!(acp.bounded && acp.old_text.is_none());
        assert!(
            acp.new_text.is_empty(),
            "a single line over the limit does not fit"
        );
    }
}
