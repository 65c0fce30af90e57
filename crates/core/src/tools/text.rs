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

use keel_diff::{AcpDiff, FileDiff, LineKind};

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
        let newlines = count_newlines(bytes);
        let crlf = count_crlf(bytes);
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

/// Bytes compared per step by the counters below; a lane counts at most 255 hits per block.
const LANES: usize = 64;
const BLOCK: usize = LANES * 255;

/// Number of `\n` bytes. Counts in byte lanes so the compiler vectorises it: a 5 MB file takes
/// a fraction of a millisecond, several times faster than `filter(..).count()`.
pub fn count_newlines(bytes: &[u8]) -> usize {
    let mut total = 0;
    for block in bytes.chunks(BLOCK) {
        let mut lanes = [0u8; LANES];
        let chunks = block.chunks_exact(LANES);
        let rest = chunks.remainder();
        for chunk in chunks {
            for (lane, &byte) in lanes.iter_mut().zip(chunk) {
                *lane += u8::from(byte == b'\n');
            }
        }
        total += lanes.iter().map(|&n| usize::from(n)).sum::<usize>();
        total += rest.iter().filter(|&&b| b == b'\n').count();
    }
    total
}

/// Number of `\r\n` pairs, counted like [`count_newlines`].
pub fn count_crlf(bytes: &[u8]) -> usize {
    let Some(last) = bytes.len().checked_sub(1) else {
        return 0;
    };
    let (before, after) = (&bytes[..last], &bytes[1..]);
    let mut total = 0;
    for (first, second) in before.chunks(BLOCK).zip(after.chunks(BLOCK)) {
        let mut lanes = [0u8; LANES];
        let firsts = first.chunks_exact(LANES);
        let seconds = second.chunks_exact(LANES);
        let rest = firsts.remainder().iter().zip(seconds.remainder());
        for (a, b) in firsts.zip(seconds) {
            for ((lane, &x), &y) in lanes.iter_mut().zip(a).zip(b) {
                *lane += u8::from(x == b'\r') & u8::from(y == b'\n');
            }
        }
        total += lanes.iter().map(|&n| usize::from(n)).sum::<usize>();
        total += rest.filter(|&(&x, &y)| x == b'\r' && y == b'\n').count();
    }
    total
}

/// Whether `bytes` contains `needle`; a vectorised scan (the standard `contains` is a
/// word-at-a-time loop, several times slower on megabytes).
pub fn contains_byte(bytes: &[u8], needle: u8) -> bool {
    bytes
        .chunks(4096)
        .any(|chunk| chunk.iter().fold(false, |found, &b| found | (b == needle)))
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

/// A text file decoded for a change. The default is an empty file without a byte-order mark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    pub fn decode(bytes: Vec<u8>) -> Result<Self, TextError> {
        sniff(&bytes)?;
        if contains_byte(&bytes, 0) {
            return Err(TextError::Binary {
                reason: "it contains NUL bytes",
            });
        }
        let bom = bytes.starts_with(UTF8_BOM);
        let mut bytes = bytes;
        if bom {
            bytes.drain(..UTF8_BOM.len());
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            TextError::NotUtf8 {
                line: 1 + valid.iter().filter(|&&b| b == b'\n').count(),
            }
        })?;
        Ok(Self::from_text(text, bom))
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

    /// The bytes of `text` in this file's encoding, borrowed when there is no mark to add.
    pub fn encoded<'a>(&self, text: &'a str) -> Cow<'a, [u8]> {
        if self.bom {
            Cow::Owned(self.encode(text))
        } else {
            Cow::Borrowed(text.as_bytes())
        }
    }
}

/// 1-based line number of byte `offset` in `text`.
pub fn line_at(text: &str, offset: usize) -> usize {
    1 + count_newlines(&text.as_bytes()[..offset.min(text.len())])
}

/// Number of lines as an editor counts them (a final line break does not start a new line).
pub fn line_count(bytes: &[u8]) -> usize {
    let newlines = count_newlines(bytes);
    newlines + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// The read-before-write guard. `write` (on an existing file) and `edit` call it with the
/// file's stamp now: the session must have read the file, and the disk must still show what it
/// read.
pub fn require_fresh_read(
    ctx: &ToolContext,
    canonical: &Path,
    shown: &str,
    now: &FileStamp,
    action: &str,
) -> Result<(), ToolError> {
    match ctx.session.last_read(canonical) {
        None => Err(ToolError::Stale(format!(
            "{shown} has not been read in this session. Call `read` on it first, so you {action} \
             it knowing its current content. Nothing was written."
        ))),
        Some(seen) if seen != *now => {
            let how = if seen.len == now.len {
                String::from("it was modified")
            } else {
                format!("its size went from {} to {} bytes", seen.len, now.len)
            };
            Err(changed(shown, &how, action))
        }
        Some(_) => Ok(()),
    }
}

/// The guard's refusal of a file that changed since the session read it.
pub fn changed(shown: &str, how: &str, action: &str) -> ToolError {
    ToolError::Stale(format!(
        "{shown} has changed on disk since you last read it ({how}). Read it again before you \
         {action} it. Nothing was written."
    ))
}

/// Carries out a prepared change of `canonical`: the file as it was read and previewed is the one
/// replaced, so one changed (or created) since its `stamp` was taken is refused with
/// [`changed`], never overwritten; `bytes` is written unless `None` (nothing to change); the
/// file's new stamp is recorded as read, so the next edit needs no re-read.
pub async fn commit_prepared(
    ctx: &ToolContext,
    canonical: &Path,
    stamp: Option<&FileStamp>,
    shown: &str,
    (tool, action): (&str, &str),
    bytes: Option<&[u8]>,
) -> Result<(), ToolError> {
    if ctx.runtime.stamp(canonical).await.as_ref() != stamp {
        return Err(changed(
            shown,
            &format!("it changed after the {tool} was prepared"),
            action,
        ));
    }
    if let Some(bytes) = bytes {
        ctx.runtime.write(canonical, bytes).await?;
    }
    if let Some(stamp) = ctx.runtime.stamp(canonical).await {
        ctx.session.record_read(canonical, stamp);
    }
    Ok(())
}

/// What is at a canonical, in-scope path: its metadata and stamp, or `None` when nothing is
/// there. One blocking call when the path exists.
pub async fn inspect(
    ctx: &ToolContext,
    canonical: &Path,
) -> Result<Option<(std::fs::Metadata, FileStamp)>, ToolError> {
    match ctx.runtime.metadata(canonical).await {
        Ok(meta) => {
            let stamp = FileStamp {
                modified: meta.modified().ok(),
                len: meta.len(),
            };
            Ok(Some((meta, stamp)))
        }
        Err(error) => match ctx.runtime.stamp(canonical).await {
            None => Ok(None),
            Some(_) => Err(error),
        },
    }
}

/// Where [`current_bytes`] found a file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentSource {
    /// The editor's buffer (it may hold unsaved changes).
    Editor,
    Disk,
}

/// The current content of an existing file: the editor's buffer when it serves files (unsaved
/// changes included), else the disk.
pub async fn current_bytes(
    ctx: &ToolContext,
    canonical: &Path,
) -> Result<(Vec<u8>, ContentSource), ToolError> {
    match ctx.runtime.read_editor_text(canonical).await {
        Some(Ok(text)) => return Ok((text.into_bytes(), ContentSource::Editor)),
        // The path changed around the editor's read: the call fails, nothing is used.
        Some(Err(error @ crate::runtime::AccessError::Stale(_))) => return Err(error),
        Some(Err(error)) => {
            tracing::warn!(%error, "the editor could not serve the file; reading the disk");
        }
        None => {}
    }
    Ok((ctx.runtime.read(canonical).await?, ContentSource::Disk))
}

/// A change's diff, computed once: as the model reads it (unified text and counts) and as the
/// editor draws it (the diff crate's bounded ACP form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Git-style unified diff; empty when nothing changed or the content is binary.
    pub unified: String,
    pub added: usize,
    pub removed: usize,
    /// The first line (1-based, in the new text) the change touches.
    pub first_line: Option<usize>,
    /// The diff for the editor (`path` absolute); `None` when the content could not be diffed.
    pub acp: Option<AcpDiff>,
}

impl FileChange {
    /// Diffs the old bytes (`None` for a new file) against the new ones. `shown` is the path as
    /// the diff header names it, `path` the absolute path the editor gets.
    pub fn compute(shown: &str, path: &Path, old: Option<&[u8]>, new: &[u8]) -> Self {
        crate::runtime::tally::count(crate::runtime::tally::Event::Diff);
        match FileDiff::compute(shown, old, Some(new)) {
            Ok(diff) => {
                let first_line = diff
                    .hunks
                    .iter()
                    .flat_map(|hunk| &hunk.lines)
                    .find(|line| line.kind != LineKind::Context)
                    .and_then(|line| line.new_number.or(line.old_number));
                let mut acp = diff.acp();
                acp.path = path.display().to_string();
                Self {
                    unified: diff.unified(),
                    added: diff.added,
                    removed: diff.removed,
                    first_line,
                    acp: Some(acp),
                }
            }
            Err(error) => {
                tracing::debug!(%error, "no diff");
                Self {
                    unified: String::new(),
                    added: 0,
                    removed: 0,
                    first_line: None,
                    acp: None,
                }
            }
        }
    }

    /// `+3 −1 lines`.
    pub fn counts(&self) -> String {
        format!("+{} −{} lines", self.added, self.removed)
    }
}

/// `1 line`, `2 lines`.
pub fn lines_phrase(count: usize) -> String {
    if count == 1 {
        "1 line".to_owned()
    } else {
        format!("{count} lines")
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
        assert!(matches!(
            sniff(b"\x89PNG\r\n\x1a\n\0\0"),
            Err(TextError::Binary { .. })
        ));
        assert!(matches!(
            sniff(&[1, 2, 3, 4, 5, 6, b'a']),
            Err(TextError::Binary { .. })
        ));
        assert_eq!(sniff(b"\xFF\xFEa\0b\0"), Err(TextError::Utf16));
        // Latin-1 prose: mostly valid, a few bad bytes: shown lossily, not refused.
        assert_eq!(sniff(b"caf\xE9 au lait\n"), Ok(()));
        assert!(matches!(
            sniff(&[0xC3u8, 0x28, 0xA0, 0xA1, 0xE2, 0x28]),
            Err(TextError::Binary { .. })
        ));
    }

    #[test]
    fn decode_keeps_bom_and_finds_endings() {
        let file = TextFile::decode(b"\xEF\xBB\xBFa\r\nb\r\n".to_vec()).unwrap();
        assert!(file.bom);
        assert_eq!(file.text, "a\r\nb\r\n");
        assert!(file.endings.is_crlf());
        assert_eq!(file.encode("x\r\n"), b"\xEF\xBB\xBFx\r\n");
        assert_eq!(&*file.encoded("a\n"), b"\xEF\xBB\xBFa\n");

        let mixed = TextFile::decode(b"a\r\nb\nc\r\n".to_vec()).unwrap();
        assert_eq!(mixed.endings, LineEndings { crlf: 2, lf: 1 });
        assert!(!mixed.endings.is_crlf());
        assert!(mixed.endings.mostly_crlf());
    }

    #[test]
    fn decode_refuses_what_it_would_corrupt() {
        assert_eq!(
            TextFile::decode(b"ok\nfa\xE7ade\n".to_vec()),
            Err(TextError::NotUtf8 { line: 2 })
        );
        assert!(matches!(
            TextFile::decode(b"text\0more".to_vec()),
            Err(TextError::Binary { .. })
        ));
        let mut late_nul = vec![b'a'; SNIFF_BYTES + 10];
        late_nul.push(0);
        assert!(matches!(
            TextFile::decode(late_nul),
            Err(TextError::Binary { .. })
        ));
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
    fn lane_counters_agree_with_the_obvious_count() {
        let mut text = Vec::new();
        for i in 0..40_000usize {
            text.extend_from_slice(if i % 7 == 0 { b"ab\r\n" } else { b"x\n\r" });
        }
        text.push(0);
        for end in [0, 1, 2, 63, 64, 65, BLOCK - 1, BLOCK, BLOCK + 1, text.len()] {
            let slice = &text[..end];
            assert_eq!(contains_byte(slice, 0), end == text.len());
            assert_eq!(contains_byte(slice, b'\r'), end >= 3, "{end}");
            let newlines = slice.iter().filter(|&&b| b == b'\n').count();
            let pairs = slice.windows(2).filter(|w| w == b"\r\n").count();
            assert_eq!(count_newlines(slice), newlines, "{end}");
            assert_eq!(count_crlf(slice), pairs, "{end}");
        }
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
        let change = FileChange::compute(
            "f.txt",
            Path::new("/f.txt"),
            Some(b"a\nb\nc\n"),
            b"a\nB\nc\nd\n",
        );
        assert_eq!((change.added, change.removed), (2, 1));
        assert_eq!(change.first_line, Some(2));
        assert!(change.unified.contains("-b\n+B\n"), "{}", change.unified);
        let created = FileChange::compute("g.txt", Path::new("/g.txt"), None, b"x\n");
        assert_eq!((created.added, created.first_line), (1, Some(1)));
        let binary = FileChange::compute("h.bin", Path::new("/h.bin"), Some(b"\0"), b"x");
        assert!(binary.unified.is_empty());
    }
}
