//! The diff model: [`FileDiff`], its [`Hunk`]s and [`Line`]s.

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::DiffError;
use crate::acp::ACP_FULL_TEXT_LIMIT;
use crate::align::{Lines, Op, align};
use crate::lines::{CONTEXT, Region};

/// What happened to the file as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Change {
    /// The file is new: there was no old version.
    Create,
    /// The file changed in place (or not at all: see [`FileDiff::is_empty`]).
    Modify,
    /// The file is gone: there is no new version.
    Delete,
    /// The file moved from `from` to [`FileDiff::path`], its content maybe changed too.
    Rename {
        /// The old path.
        from: String,
    },
}

/// Which side of the diff a [`Line`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    /// Unchanged, shown for context; on both sides.
    Context,
    /// Only in the new version.
    Added,
    /// Only in the old version.
    Removed,
}

/// One line of a [`Hunk`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// Context, added or removed.
    pub kind: LineKind,
    /// 1-based line number in the old version (`None` for an added line).
    pub old_number: Option<usize>,
    /// 1-based line number in the new version (`None` for a removed line).
    pub new_number: Option<usize>,
    /// The line's text without its line ending (`\n` or `\r\n`). Decoded lossily when the
    /// file is not valid UTF-8 (see [`FileDiff::lossy`]).
    pub text: String,
    /// The line is the file's last and has no line ending (git's
    /// `\ No newline at end of file`).
    pub no_newline_at_end: bool,
    /// The line ended with `\r\n`, not `\n`. The `\r` is never part of [`Line::text`].
    pub crlf: bool,
}

impl Line {
    /// The line's ending as it was in the file: `"\r\n"`, `"\n"` or `""`.
    pub fn ending(&self) -> &'static str {
        match (self.no_newline_at_end, self.crlf) {
            (true, _) => "",
            (false, true) => "\r\n",
            (false, false) => "\n",
        }
    }
}

/// A run of changed lines with the unchanged lines around them, like a unified diff's hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hunk {
    /// The first old line of the hunk, 1-based. When `old_len` is 0 it is the line *after
    /// which* the hunk applies (0: before the first line), as in a unified diff header.
    pub old_start: usize,
    /// Number of old lines (context and removed) in the hunk.
    pub old_len: usize,
    /// The first new line of the hunk, numbered like `old_start`.
    pub new_start: usize,
    /// Number of new lines (context and added) in the hunk.
    pub new_len: usize,
    /// The lines in order: for each change, removed lines come before added ones.
    pub lines: Vec<Line>,
}

/// The full old and new texts, kept at compute time when both fit the ACP limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FullTexts {
    pub(crate) old: Option<String>,
    pub(crate) new: Option<String>,
}

/// The difference between two versions of one file: the model every rendering is made from.
///
/// Built by [`FileDiff::compute`]; rendered by [`FileDiff::unified`], [`FileDiff::summary`],
/// [`FileDiff::acp`] and [`FileDiff::render_terminal`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    /// The file's path (its new path for a rename), as given to [`FileDiff::compute`].
    pub path: String,
    /// Create, modify, delete or rename.
    pub change: Change,
    /// The changes with [3 lines of context](FileDiff::compute); hunks closer than that merge.
    pub hunks: Vec<Hunk>,
    /// Number of added lines.
    pub added: usize,
    /// Number of removed lines.
    pub removed: usize,
    /// At least one side was not valid UTF-8 and its text was decoded lossily (invalid bytes
    /// shown as U+FFFD). The comparison itself is always on the raw bytes.
    pub lossy: bool,
    #[serde(skip)]
    pub(crate) full_texts: Option<FullTexts>,
}

impl FileDiff {
    /// Computes the diff of one file from its old and new bytes.
    ///
    /// `old = None` means a new file, `new = None` a deletion. Lines are compared by their raw
    /// bytes, ending included, so a CRLF file with one changed line shows one changed line,
    /// and a line whose ending alone changed shows as removed and added. Hunks carry 3 lines
    /// of context and merge when their contexts would touch, as git's do.
    ///
    /// The line alignment is Myers-based but not always minimal: on highly repetitive text
    /// (a handful of distinct lines repeated) it can show a few more changed lines than plain
    /// Myers would, and after [`crate::ALIGNMENT_TIME_LIMIT`] it gets coarser. It is always
    /// correct: applying the hunks to the old text gives the new text.
    ///
    /// # Errors
    ///
    /// [`DiffError::Binary`] when either side contains a NUL byte, and
    /// [`DiffError::NothingToCompare`] when both sides are `None`. Text that is not valid
    /// UTF-8 is not an error: it is decoded lossily and [`FileDiff::lossy`] is set.
    pub fn compute(
        path: &str,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<FileDiff, DiffError> {
        let change = match (old, new) {
            (None, None) => {
                return Err(DiffError::NothingToCompare {
                    path: path.to_owned(),
                });
            }
            (None, Some(_)) => Change::Create,
            (Some(_), None) => Change::Delete,
            (Some(_), Some(_)) => Change::Modify,
        };
        let sides = [old, new];
        if sides.iter().flatten().any(|bytes| contains_nul(bytes)) {
            return Err(DiffError::Binary {
                path: path.to_owned(),
            });
        }
        let lossy = sides
            .iter()
            .flatten()
            .any(|bytes| std::str::from_utf8(bytes).is_err());
        let old_bytes = old.unwrap_or_default();
        let new_bytes = new.unwrap_or_default();

        let hunks = match Region::find(old_bytes, new_bytes) {
            None => Vec::new(),
            Some(region) => {
                let alignment = align(old_bytes, new_bytes, &region);
                build_hunks(
                    &alignment.ops,
                    &alignment.old,
                    &alignment.new,
                    region.lines_before,
                )
            }
        };
        let (added, removed) = count_changes(&hunks);
        let fits = |side: Option<&[u8]>| side.is_none_or(|b| b.len() <= ACP_FULL_TEXT_LIMIT);
        let full_texts = (fits(old) && fits(new)).then(|| FullTexts {
            old: old.map(decode_owned),
            new: new.map(decode_owned),
        });
        Ok(FileDiff {
            path: path.to_owned(),
            change,
            hunks,
            added,
            removed,
            lossy,
            full_texts,
        })
    }

    /// Marks the diff as a rename from `from` to [`FileDiff::path`].
    ///
    /// Only a modification can be a rename: a creation or deletion (one side missing) is
    /// returned unchanged, and so is a "rename" to the same path.
    #[must_use]
    pub fn renamed(mut self, from: &str) -> FileDiff {
        if matches!(self.change, Change::Modify | Change::Rename { .. }) && from != self.path {
            self.change = Change::Rename {
                from: from.to_owned(),
            };
        }
        self
    }

    /// True when nothing changed at all: same path, same bytes. A rename, or the creation or
    /// deletion of an empty file, is a change.
    pub fn is_empty(&self) -> bool {
        self.change == Change::Modify && self.hunks.is_empty()
    }

    /// The old path: `from` for a rename, otherwise [`FileDiff::path`].
    pub fn old_path(&self) -> &str {
        match &self.change {
            Change::Rename { from } => from,
            _ => &self.path,
        }
    }
}

/// Whether `bytes` has a NUL byte. Scans whole blocks without early exit inside them, which
/// vectorizes and runs about three times faster than `contains(&0)`.
fn contains_nul(bytes: &[u8]) -> bool {
    bytes
        .chunks(4096)
        .any(|block| block.iter().fold(false, |found, &byte| found | (byte == 0)))
}

fn decode_owned(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn count_changes(hunks: &[Hunk]) -> (usize, usize) {
    hunks
        .iter()
        .flat_map(|hunk| &hunk.lines)
        .fold((0, 0), |(added, removed), line| match line.kind {
            LineKind::Added => (added + 1, removed),
            LineKind::Removed => (added, removed + 1),
            LineKind::Context => (added, removed),
        })
}

/// Decodes one raw line (ending included) into a [`Line`].
fn make_line(
    raw: &[u8],
    kind: LineKind,
    old_number: Option<usize>,
    new_number: Option<usize>,
) -> Line {
    let (body, no_newline_at_end, crlf) = match raw {
        [body @ .., b'\r', b'\n'] => (body, false, true),
        [body @ .., b'\n'] => (body, false, false),
        body => (body, true, false),
    };
    let text = match String::from_utf8_lossy(body) {
        Cow::Borrowed(text) => text.to_owned(),
        Cow::Owned(text) => text,
    };
    Line {
        kind,
        old_number,
        new_number,
        text,
        no_newline_at_end,
        crlf,
    }
}

/// Groups the changes of an edit script into hunks with [`CONTEXT`] lines around them.
///
/// `lines_before` is the number of lines before the region the script covers, the same on
/// both sides; it turns region indices into file line numbers.
fn build_hunks(ops: &[Op], old: &Lines<'_>, new: &Lines<'_>, lines_before: usize) -> Vec<Hunk> {
    let changes: Vec<(Range<usize>, Range<usize>)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Change { old, new } => Some((old.clone(), new.clone())),
            Op::Equal { .. } => None,
        })
        .collect();
    let mut hunks = Vec::new();
    let mut first = 0;
    while first < changes.len() {
        // Extend the group while the unchanged gap to the next change is at most 2 * CONTEXT.
        let mut last = first;
        while let Some(next) = changes.get(last + 1) {
            if next.0.start - changes[last].0.end > 2 * CONTEXT {
                break;
            }
            last += 1;
        }
        let previous_end = if first == 0 {
            0
        } else {
            changes[first - 1].0.end
        };
        let following_start = changes.get(last + 1).map_or(old.len(), |next| next.0.start);
        let before = CONTEXT.min(changes[first].0.start - previous_end);
        let after = CONTEXT.min(following_start - changes[last].0.end);
        let mut builder = HunkBuilder::new(old, new, lines_before);
        let (old_start, new_start) = (changes[first].0.start, changes[first].1.start);
        builder.context(old_start - before, new_start - before, before);
        for (index, (old_range, new_range)) in changes[first..=last].iter().enumerate() {
            builder.change(old_range.clone(), new_range.clone());
            let gap_end = changes
                .get(first + index + 1)
                .filter(|_| first + index < last)
                .map_or(old_range.end + after, |next| next.0.start);
            builder.context(old_range.end, new_range.end, gap_end - old_range.end);
        }
        hunks.push(builder.finish(
            lines_before + old_start - before,
            lines_before + new_start - before,
        ));
        first = last + 1;
    }
    hunks
}

struct HunkBuilder<'i, 'a> {
    old: &'i Lines<'a>,
    new: &'i Lines<'a>,
    lines_before: usize,
    lines: Vec<Line>,
    old_len: usize,
    new_len: usize,
}

impl<'i, 'a> HunkBuilder<'i, 'a> {
    fn new(old: &'i Lines<'a>, new: &'i Lines<'a>, lines_before: usize) -> Self {
        HunkBuilder {
            old,
            new,
            lines_before,
            lines: Vec::new(),
            old_len: 0,
            new_len: 0,
        }
    }

    fn context(&mut self, old_start: usize, new_start: usize, count: usize) {
        for offset in 0..count {
            let (o, n) = (old_start + offset, new_start + offset);
            self.lines.push(make_line(
                self.old.line(o),
                LineKind::Context,
                Some(self.lines_before + o + 1),
                Some(self.lines_before + n + 1),
            ));
        }
        self.old_len += count;
        self.new_len += count;
    }

    fn change(&mut self, old_range: Range<usize>, new_range: Range<usize>) {
        self.old_len += old_range.len();
        self.new_len += new_range.len();
        for o in old_range {
            let number = Some(self.lines_before + o + 1);
            self.lines
                .push(make_line(self.old.line(o), LineKind::Removed, number, None));
        }
        for n in new_range {
            let number = Some(self.lines_before + n + 1);
            self.lines
                .push(make_line(self.new.line(n), LineKind::Added, None, number));
        }
    }

    /// `old_first` / `new_first`: 0-based file index of the hunk's first line on each side.
    fn finish(self, old_first: usize, new_first: usize) -> Hunk {
        // A side with no lines is numbered by the line before it, as unified diffs do.
        let start = |first: usize, len: usize| if len == 0 { first } else { first + 1 };
        Hunk {
            old_start: start(old_first, self.old_len),
            old_len: self.old_len,
            new_start: start(new_first, self.new_len),
            new_len: self.new_len,
            lines: self.lines,
        }
    }
}

/// For each line of `lines`, whether its `\r\n` ending should be made visible.
///
/// Within one run of changed lines, if CRLF endings mix with other endings the CRLF lines are
/// marked, so that a change of line ending alone (which leaves [`Line::text`] equal) can be
/// seen. Context lines and uniform runs are never marked.
pub(crate) fn visible_crlf(lines: &[Line]) -> Vec<bool> {
    let mut marks = vec![false; lines.len()];
    let mut start = 0;
    while start < lines.len() {
        if lines[start].kind == LineKind::Context {
            start += 1;
            continue;
        }
        let end = lines[start..]
            .iter()
            .position(|line| line.kind == LineKind::Context)
            .map_or(lines.len(), |offset| start + offset);
        let run = &lines[start..end];
        if run.iter().any(|line| line.crlf) && run.iter().any(|line| !line.crlf) {
            for (mark, line) in marks[start..end].iter_mut().zip(run) {
                *mark = line.crlf;
            }
        }
        start = end;
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn diff(old: &str, new: &str) -> FileDiff {
        FileDiff::compute("f", Some(old.as_bytes()), Some(new.as_bytes())).unwrap()
    }

    fn numbered(count: usize) -> String {
        (1..=count).map(|n| format!("line {n}\n")).collect()
    }

    /// (kind, old, new, text) of every line, for compact assertions.
    fn shape(hunk: &Hunk) -> Vec<(char, Option<usize>, Option<usize>, &str)> {
        hunk.lines
            .iter()
            .map(|line| {
                let kind = match line.kind {
                    LineKind::Context => ' ',
                    LineKind::Added => '+',
                    LineKind::Removed => '-',
                };
                (kind, line.old_number, line.new_number, line.text.as_str())
            })
            .collect()
    }

    #[test]
    fn one_changed_line_in_the_middle() {
        let old = numbered(20);
        let new = old.replace("line 10\n", "line ten\n");
        let d = diff(&old, &new);
        assert_eq!((d.added, d.removed), (1, 1));
        assert_eq!(d.hunks.len(), 1);
        let hunk = &d.hunks[0];
        assert_eq!(
            (hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len),
            (7, 7, 7, 7)
        );
        assert_eq!(
            shape(hunk),
            [
                (' ', Some(7), Some(7), "line 7"),
                (' ', Some(8), Some(8), "line 8"),
                (' ', Some(9), Some(9), "line 9"),
                ('-', Some(10), None, "line 10"),
                ('+', None, Some(10), "line ten"),
                (' ', Some(11), Some(11), "line 11"),
                (' ', Some(12), Some(12), "line 12"),
                (' ', Some(13), Some(13), "line 13"),
            ]
        );
    }

    #[test]
    fn numbers_shift_after_an_insertion() {
        let old = numbered(30);
        let new = old
            .replace("line 3\n", "line 3\nnew a\nnew b\n")
            .replace("line 25\n", "");
        let d = diff(&old, &new);
        assert_eq!((d.added, d.removed), (2, 1));
        assert_eq!(d.hunks.len(), 2);
        let second = &d.hunks[1];
        assert_eq!(
            (
                second.old_start,
                second.old_len,
                second.new_start,
                second.new_len
            ),
            (22, 7, 24, 6)
        );
        assert_eq!(
            second.lines[3],
            make_line(b"line 25\n", LineKind::Removed, Some(25), None)
        );
    }

    #[test]
    fn hunks_merge_when_the_gap_is_at_most_six_lines() {
        let old = numbered(40);
        // Changes at 10 and 17: six unchanged lines between, so one hunk.
        let merged = diff(
            &old,
            &old.replace("line 10\n", "x\n").replace("line 17\n", "y\n"),
        );
        assert_eq!(merged.hunks.len(), 1);
        assert_eq!(merged.hunks[0].old_len, 3 + 1 + 6 + 1 + 3);
        // Changes at 10 and 18: seven between, so two hunks.
        let split = diff(
            &old,
            &old.replace("line 10\n", "x\n").replace("line 18\n", "y\n"),
        );
        assert_eq!(split.hunks.len(), 2);
        assert_eq!(split.hunks[0].old_start, 7);
        assert_eq!(split.hunks[1].old_start, 15);
    }

    #[test]
    fn context_is_clipped_at_the_file_edges() {
        let old = numbered(4);
        let d = diff(
            &old,
            &old.replace("line 1\n", "one\n")
                .replace("line 4\n", "four\n"),
        );
        assert_eq!(d.hunks.len(), 1);
        let hunk = &d.hunks[0];
        assert_eq!(
            (hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len),
            (1, 4, 1, 4)
        );
    }

    #[test]
    fn create_delete_and_empty_sides() {
        let created = FileDiff::compute("n", None, Some(b"a\nb\n")).unwrap();
        assert_eq!(created.change, Change::Create);
        assert_eq!(
            (
                created.hunks[0].old_start,
                created.hunks[0].old_len,
                created.hunks[0].new_start
            ),
            (0, 0, 1)
        );
        let deleted = FileDiff::compute("n", Some(b"a\n"), None).unwrap();
        assert_eq!(deleted.change, Change::Delete);
        assert_eq!((deleted.added, deleted.removed), (0, 1));
        assert_eq!(
            (deleted.hunks[0].new_start, deleted.hunks[0].new_len),
            (0, 0)
        );
        let empty_created = FileDiff::compute("n", None, Some(b"")).unwrap();
        assert!(empty_created.hunks.is_empty() && !empty_created.is_empty());
        assert!(diff("", "").is_empty());
        assert_eq!(
            FileDiff::compute("n", None, None),
            Err(DiffError::NothingToCompare { path: "n".into() })
        );
    }

    #[test]
    fn insertion_at_the_top_numbers_the_empty_side_by_the_line_before() {
        let d = diff("a\n", "new\na\n");
        let hunk = &d.hunks[0];
        assert_eq!(
            (hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len),
            (1, 1, 1, 2)
        );
        let d = diff("", "a\n");
        assert_eq!((d.hunks[0].old_start, d.hunks[0].old_len), (0, 0));
    }

    #[test]
    fn crlf_file_with_one_change_shows_one_change() {
        let old = "a\r\nb\r\nc\r\nd\r\ne\r\n";
        let d = diff(old, &old.replace("c\r\n", "C\r\n"));
        assert_eq!((d.added, d.removed), (1, 1));
        assert!(
            d.hunks[0]
                .lines
                .iter()
                .all(|line| line.crlf && !line.text.contains('\r'))
        );
        assert_eq!(visible_crlf(&d.hunks[0].lines), vec![false; 6]);
    }

    #[test]
    fn ending_only_change_is_a_change_and_is_marked() {
        let d = diff("a\r\nb\r\nc\r\n", "a\r\nb\nc\r\n");
        assert_eq!((d.added, d.removed), (1, 1));
        let lines = &d.hunks[0].lines;
        assert_eq!(
            shape(&d.hunks[0])[1..3],
            [('-', Some(2), None, "b"), ('+', None, Some(2), "b")]
        );
        assert_eq!(visible_crlf(lines), [false, true, false, false]);
    }

    #[test]
    fn missing_final_newline() {
        let d = diff("a\nb", "a\nb\n");
        let lines = &d.hunks[0].lines;
        assert_eq!(lines.len(), 3);
        assert!(lines[1].no_newline_at_end && lines[1].kind == LineKind::Removed);
        assert!(!lines[2].no_newline_at_end && lines[2].kind == LineKind::Added);
        assert_eq!(lines[1].ending(), "");
    }

    #[test]
    fn binary_and_lossy() {
        let err = FileDiff::compute("src/x.png", Some(b"a"), Some(b"\x89PNG\0")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "refusing to diff binary file src/x.png: it contains NUL bytes"
        );
        let d = FileDiff::compute("l1.txt", Some(b"caf\xe9\n"), Some(b"caf\xe8\n")).unwrap();
        assert!(d.lossy);
        // Different invalid bytes are still a change, though both decode to U+FFFD.
        assert_eq!((d.added, d.removed), (1, 1));
        assert_eq!(d.hunks[0].lines[0].text, "caf\u{fffd}");
    }

    #[test]
    fn renamed() {
        let d = diff("a\n", "a\n").renamed("old/f");
        assert_eq!(
            d.change,
            Change::Rename {
                from: "old/f".into()
            }
        );
        assert!(!d.is_empty());
        assert_eq!(d.old_path(), "old/f");
        assert_eq!(diff("a\n", "a\n").renamed("f").change, Change::Modify);
        let created = FileDiff::compute("f", None, Some(b"a"))
            .unwrap()
            .renamed("g");
        assert_eq!(created.change, Change::Create);
    }

    #[test]
    fn whitespace_only_change_is_shown() {
        let d = diff("fn a() {\n    x;\n}\n", "fn a() {\n\tx;\n}\n");
        assert_eq!((d.added, d.removed), (1, 1));
    }
}
