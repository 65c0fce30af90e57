//! Text files as `read`, `write` and `edit` see them.
//!
//! - [`TextFile`]: a file decoded for a change: its text (without a byte-order mark), whether it
//!   had a UTF-8 byte-order mark, and its [`LineEndings`]. [`TextFile::encode`] turns new text
//!   back into bytes with the same mark, so an edit keeps the file's encoding.
//! - [`TextError`]: why bytes are not text the tools show or change (binary, UTF-16, not UTF-8).
//!   [`sniff`] is the cheap check `read` runs on the head of a file.
//! - [`LineEndings`]: how many lines end in `\r\n` and how many in a bare `\n`; with
//!   [`lf_to_crlf`] and [`crlf_to_lf`] the tools match on LF text and write CRLF files back as
//!   CRLF.
//! - [`require_fresh_read`]: the read-before-write guard: a file may be changed only if the
//!   session read it and it has not changed on disk since.
//! - [`FileChange`]: the diff of a change (computed with keel-diff) as the model reads it.

use std::borrow::Cow;
use std::path::Path;

use keel_diff::{FileDiff, LineKind};

use crate::tool::{FileStamp, ToolContext, ToolError};

/// The UTF-8 byte-order mark.
pub const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// How many bytes of a file's head [`sniff`] looks at.
pub const SNIFF_BYTES: usize = 8 * 1024;

/// Why a file's bytes are not text the tools can show or change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// NUL bytes or mostly control bytes: an image, an archive, an object file.
    #[error("it is a binary file ({reason})")]
    Binary { reason: &'static str },
    /// UTF-16 text (it starts with a UTF-16 byte-order mark).
    #[error("it is encoded as UTF-16 (it starts with a UTF-16 byte-order mark)")]
    Utf16,
    /// Text in a legacy encoding (Latin-1, Windows-1252, ...).
    #[error(
        "it is not valid UTF-8 (the first invalid byte is on line {line}); it is probably in a legacy encoding such as Latin-1"
    )]
    NotUtf8 { line: usize },
}

/// Checks the head of a file (up to [`SNIFF_BYTES`]) for signs that it is not text.
/// Invalid UTF-8 alone is not refused here: `read` shows it lossily.
pub fn sniff(head: &[u8]) -> Result<(), TextError> {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        return Err(TextError::Utf16);
    }
    if head.contains(&0) {
        return Err(TextError::Binary {
            reason: "it contains NUL bytes",
        });
    }
    let control = head
        .iter()
        .filter(|&&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b)) || b == 0x7f)
        .count();
    if control * 10 > head.len() {
        return Err(TextError::Binary {
            reason: "it is mostly control bytes",
        });
    }
    if std::str::from_utf8(head).is_err() {
        let decoded = String::from_utf8_lossy(head);
        let invalid = decoded.chars().filter(|&c| c == '\u{FFFD}').count();
        if invalid * 3 > decoded.chars().count() {
            return Err(TextError::Binary {
                reason: "most of its bytes are not text",
            });
        }
    }
    Ok(())
}

/// The line-ending style of a text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineEndings {
    /// Lines ending in `\r\n`.
    pub crlf: usize,
    /// Lines ending in a bare `\n`.
    pub lf: usize,
}

impl LineEndings {
    pub fn of(bytes: &[u8]) -> Self {
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        if !bytes.contains(&b'\r') {
            return Self {
                crlf: 0,
                lf: newlines,
            };
        }
        let crlf = bytes.windows(2).filter(|pair| pair[0] == b'\r' && pair[1] == b'\n').count();
        Self {
            crlf,
            lf: newlines - crlf,
        }
    }

    /// Every line break is `\r\n` (and there is at least one).
    pub fn is_crlf(&self) -> bool {
        self.crlf > 0 && self.lf == 0
    }

    /// Most line breaks are `\r\n`.
    pub fn mostly_crlf(&self) -> bool {
        self.crlf > self.lf
    }
}

/// `\r\n` → `\n`. Borrows when there is nothing to change.
pub fn crlf_to_lf(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Every `\n` → `\r\n`. Meant for LF-only text (the output of [`crlf_to_lf`], or text with no
/// `\r\n` in it).
pub fn lf_to_crlf(text: &str) -> String {
    text.replace('\n', "\r\n")
}

/// A text file decoded for a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFile {
    /// The text, without the byte-order mark, with its original line endings.
    pub text: String,
    /// The file started with a UTF-8 byte-order mark.
    pub bom: bool,
    pub endings: LineEndings,
}

impl TextFile {
    /// Decodes a file's bytes. Refuses binary, UTF-16 and non-UTF-8 content: changing it as
    /// UTF-8 text would corrupt it.
    pub fn decode(bytes: &[u8]) -> Result<Self, TextError> {
        sniff(bytes)?;
        if bytes.contains(&0) {
            return Err(TextError::Binary {
                reason: "it contains NUL bytes",
            });
        }
        let bom = bytes.starts_with(UTF8_BOM);
        let body = if bom { &bytes[UTF8_BOM.len()..] } else { bytes };
        let text = std::str::from_utf8(body).map_err(|e| TextError::NotUtf8 {
            line: 1 + body[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count(),
        })?;
        Ok(Self::from_text(text.to_owned(), bom))
    }

    /// Wraps text the editor gave (a leading U+FEFF counts as the byte-order mark).
    pub fn from_editor(text: String) -> Self {
        match text.strip_prefix('\u{FEFF}') {
            Some(rest) => Self::from_text(rest.to_owned(), true),
            None => Self::from_text(text, false),
        }
    }

    fn from_text(text: String, bom: bool) -> Self {
        let endings = LineEndings::of(text.as_bytes());
        Self { text, bom, endings }
    }

    /// The bytes of `text` in this file's encoding (the byte-order mark put back if it had one).
    pub fn encode(&self, text: &str) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(text.len() + UTF8_BOM.len());
        if self.bom && !text.starts_with('\u{FEFF}') {
            bytes.extend_from_slice(UTF8_BOM);
        }
        bytes.extend_from_slice(text.as_bytes());
        bytes
    }

    /// This file's bytes as they are.
    pub fn bytes(&self) -> Vec<u8> {
        self.encode(&self.text)
    }
}

/// 1-based line number of byte `offset` in `text`.
pub fn line_at(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Number of lines as an editor counts them (a final line break does not start a new line).
pub fn line_count(bytes: &[u8]) -> usize {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// The read-before-write guard. `write` (on an existing file) and `edit` call it: the session
/// must have read the file, and the disk must still show what it read. Returns the stamp now.
pub async fn require_fresh_read(
    ctx: &ToolContext,
    canonical: &Path,
    shown: &str,
    action: &str,
) -> Result<FileStamp, ToolError> {
    let now = ctx
        .runtime
        .stamp(canonical)
        .await
        .ok_or_else(|| ToolError::Failed(format!("{shown}: no such file")))?;
    match ctx.session.last_read(canonical) {
        None => Err(ToolError::Failed(format!(
            "{shown} has not been read in this session. Call `read` on it first, so you {action} \
             it knowing its current content. Nothing was written."
        ))),
        Some(seen) if seen != now => {
            let how = if seen.len == now.len {
                String::from("it was modified")
            } else {
                format!("its size went from {} to {} bytes", seen.len, now.len)
            };
            Err(ToolError::Failed(format!(
                "{shown} has changed on disk since you last read it ({how}). Read it again \
                 before you {action} it. Nothing was written."
            )))
        }
        Some(_) => Ok(now),
    }
}

/// The current content of an existing file: the editor's buffer when it serves files (unsaved
/// changes included), else the disk.
pub async fn current_bytes(ctx: &ToolContext, canonical: &Path) -> Result<Vec<u8>, ToolError> {
    match ctx.runtime.read_editor_text(canonical).await {
        Some(Ok(text)) => Ok(text.into_bytes()),
        Some(Err(error)) => {
            tracing::warn!(%error, "the editor could not serve the file; reading the disk");
            ctx.runtime.read(canonical).await
        }
        None => ctx.runtime.read(canonical).await,
    }
}

/// A change's diff, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Git-style unified diff; empty when nothing changed or the content is binary.
    pub unified: String,
    pub added: usize,
    pub removed: usize,
    /// The first line (1-based, in the new text) the change touches.
    pub first_line: Option<usize>,
}

impl FileChange {
    /// Diffs the old bytes (`None` for a new file) against the new ones. `shown` is the path as
    /// the diff header names it.
    pub fn compute(shown: &str, old: Option<&[u8]>, new: &[u8]) -> Self {
        match FileDiff::compute(shown, old, Some(new)) {
            Ok(diff) => {
                let first_line = diff
                    .hunks
                    .iter()
                    .flat_map(|hunk| &hunk.lines)
                    .find(|line| line.kind != LineKind::Context)
                    .and_then(|line| line.new_number.or(line.old_number));
                Self {
                    unified: diff.unified(),
                    added: diff.added,
                    removed: diff.removed,
                    first_line,
                }
            }
            Err(error) => {
                tracing::debug!(%error, "no diff");
                Self {
                    unified: String::new(),
                    added: 0,
                    removed: 0,
                    first_line: None,
                }
            }
        }
    }

    /// `+3 −1 lines`.
    pub fn counts(&self) -> String {
        format!("+{} −{} lines", self.added, self.removed)
    }
}

/// Text for an editor's diff view: lossily decoded, without the byte-order mark.
pub fn display_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_tells_text_from_binary() {
        assert_eq!(sniff(b"fn main() {}\n"), Ok(()));
        assert_eq!(sniff("caf\u{e9} \u{2014}\n".as_bytes()), Ok(()));
        assert!(matches!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), Err(TextError::Binary { .. })));
        assert!(matches!(sniff(&[1, 2, 3, 4, 5, 6, b'a']), Err(TextError::Binary { .. })));
        assert_eq!(sniff(b"\xFF\xFEa\0b\0"), Err(TextError::Utf16));
        // Latin-1 prose: mostly valid, a few bad bytes: shown lossily, not refused.
        assert_eq!(sniff(b"caf\xE9 au lait\n"), Ok(()));
        assert!(matches!(sniff(&[0xC3u8, 0x28, 0xA0, 0xA1, 0xE2, 0x28]), Err(TextError::Binary { .. })));
    }

    #[test]
    fn decode_keeps_bom_and_finds_endings() {
        let file = TextFile::decode(b"\xEF\xBB\xBFa\r\nb\r\n").unwrap();
        assert!(file.bom);
        assert_eq!(file.text, "a\r\nb\r\n");
        assert!(file.endings.is_crlf());
        assert_eq!(file.encode("x\r\n"), b"\xEF\xBB\xBFx\r\n");
        assert_eq!(file.bytes(), b"\xEF\xBB\xBFa\r\nb\r\n");

        let mixed = TextFile::decode(b"a\r\nb\nc\r\n").unwrap();
        assert_eq!(mixed.endings, LineEndings { crlf: 2, lf: 1 });
        assert!(!mixed.endings.is_crlf());
        assert!(mixed.endings.mostly_crlf());
    }

    #[test]
    fn decode_refuses_what_it_would_corrupt() {
        assert_eq!(
            TextFile::decode(b"ok\nfa\xE7ade\n"),
            Err(TextError::NotUtf8 { line: 2 })
        );
        assert!(matches!(
            TextFile::decode(b"text\0more"),
            Err(TextError::Binary { .. })
        ));
        let mut late_nul = vec![b'a'; SNIFF_BYTES + 10];
        late_nul.push(0);
        assert!(matches!(TextFile::decode(&late_nul), Err(TextError::Binary { .. })));
    }

    #[test]
    fn editor_text_bom() {
        let file = TextFile::from_editor("\u{FEFF}x\n".to_owned());
        assert!(file.bom);
        assert_eq!(file.text, "x\n");
    }

    #[test]
    fn endings_round_trip() {
        assert_eq!(crlf_to_lf("a\r\nb\r\n"), "a\nb\n");
        assert!(matches!(crlf_to_lf("a\nb"), Cow::Borrowed(_)));
        assert_eq!(lf_to_crlf("a\nb\n"), "a\r\nb\r\n");
        assert_eq!(lf_to_crlf(&crlf_to_lf("x\r\r\ny\r\n")), "x\r\r\ny\r\n");
    }

    #[test]
    fn lines() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a"), 1);
        assert_eq!(line_count(b"a\n"), 1);
        assert_eq!(line_count(b"a\nb"), 2);
        assert_eq!(line_count(b"\n\n"), 2);
        assert_eq!(line_at("a\nb\nc", 0), 1);
        assert_eq!(line_at("a\nb\nc", 4), 3);
    }

    #[test]
    fn change_counts_and_first_line() {
        let change = FileChange::compute("f.txt", Some(b"a\nb\nc\n"), b"a\nB\nc\nd\n");
        assert_eq!((change.added, change.removed), (2, 1));
        assert_eq!(change.first_line, Some(2));
        assert!(change.unified.contains("-b\n+B\n"), "{}", change.unified);
        let created = FileChange::compute("g.txt", None, b"x\n");
        assert_eq!((created.added, created.first_line), (1, Some(1)));
        let binary = FileChange::compute("h.bin", Some(b"\0"), b"x");
        assert!(binary.unified.is_empty());
    }
}
