//! The `read` tool: a text file's lines, numbered like `cat -n`.
//!
//! - [`ReadTool`] / [`ReadParams`]: the tool and its arguments (`file_path`, `offset`, `limit`).
//! - `Window`: the lines a call shows, filled from a stream of chunks, so a large file is read
//!   in byte ranges up to the lines asked for and never loaded whole.
//!
//! Output is capped at the session's `read_bytes` limit. Past the cap the call returns the head
//! and says which `offset` to continue from: for `read`, the file itself is the "sidecar", so
//! nothing is spilled. A successful read (and a refusal of a binary file) is recorded for the
//! read-before-write guard of `write` and `edit`.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, TextError};
use crate::capability::{Access, RequirementSet};
use crate::tool::view::given;
use crate::tool::{
    Artifact, CallTarget, CallView, Describe, Prepared, Subject, Tool, ToolContext, ToolError,
    ToolKind, ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Read.id();

/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Characters of one line shown; the rest is cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Files up to this size are read in one piece; larger ones in chunks of [`CHUNK_BYTES`].
const WHOLE_READ_BYTES: u64 = 8 * 1024 * 1024;
const CHUNK_BYTES: usize = 1024 * 1024;
/// After the window is full, a large file is scanned on to count its lines only this far.
const COUNT_BYTES: u64 = 64 * 1024 * 1024;
/// Bytes of one line kept while it streams in (enough for [`MAX_LINE_CHARS`] characters).
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 8;

/// Arguments of `read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// Absolute or workspace-relative path.
    pub file_path: String,
    /// The first line to read (1-based).
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Lines to read (default 2000).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// The `read` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

const DESCRIPTION: &str = "\
Reads a text file; lines come numbered like `cat -n` (number, tab, line).
- Up to 2000 lines; for more pass `offset` (1-based) and `limit`. Long lines and outputs over \
about 200 KB are cut, with the `offset` to continue from.
- Binary files are refused; list a directory with `glob`. Also reads saved truncated outputs.";

impl Tool for ReadTool {
    type Params = ReadParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<ReadParams>(ID, DESCRIPTION)
            .kind(ToolKind::Read)
            .title("Read a file")
            .read_only()
            .subject(Subject::Path(Some("file_path".into())))
            .requires(RequirementSet::fs_read(&["{workspace}/**", "{session}/**"]))
    }

    fn target(&self, params: &ReadParams) -> CallTarget {
        CallTarget::Path(params.file_path.clone())
    }

    fn describe(&self, params: &ReadParams, how: Describe<'_>) -> CallView {
        let Some(file) = given(Some(&params.file_path)) else {
            return CallView::default();
        };
        let path = how.shown(file);
        let title = match (params.offset, params.limit) {
            (Some(start), Some(count)) if count > 0 => {
                format!("Read {path} ({start}-{})", start + count - 1)
            }
            (None, Some(count)) if count > 0 => format!("Read {path} (1-{count})"),
            (Some(start), _) => format!("Read {path} (from line {start})"),
            _ => format!("Read {path}"),
        };
        let line = params.offset.and_then(|n| u32::try_from(n).ok());
        CallView {
            title,
            locations: vec![how.location(file, line)],
        }
    }

    /// Nothing to preview; the plan is the path the engine resolved and decided on, which the
    /// run reads (resolving `file_path` again could reach another file: a symlink swapped in
    /// since the decision).
    async fn prepare(
        &self,
        _params: &ReadParams,
        subject: Option<&Path>,
        _ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        Ok(Prepared::decided_path(subject))
    }

    async fn run_prepared(
        &self,
        params: ReadParams,
        prepared: Prepared,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let canonical: std::path::PathBuf = prepared.plan()?;
        ctx.runtime.check(&canonical, Access::Read)?;
        read_file(params, canonical, ctx).await
    }

    async fn run(&self, params: ReadParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let canonical = ctx
            .runtime
            .resolve_checked(&params.file_path, Access::Read)?;
        read_file(params, canonical, ctx).await
    }
}

/// Reads the file at `canonical` (resolved and checked) for the call `params`.
async fn read_file(
    params: ReadParams,
    canonical: std::path::PathBuf,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let shown = ctx.runtime.display_path(&canonical);
    let Some((meta, stamp)) = text::inspect(ctx, &canonical).await? else {
        return Err(ToolError::NotFound(format!(
            "{shown} does not exist (looked for {}). Check the path; relative paths start at \
             the workspace root.",
            canonical.display()
        )));
    };
    if meta.is_dir() {
        return Err(ToolError::BadArgument(format!(
            "{shown} is a directory, not a file; use `glob` to list its contents"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::BadArgument(format!(
            "{shown} is not a regular file (a device, socket or pipe); read shows files only"
        )));
    }
    // The stamp was taken before the content: a change after it makes a later edit refuse.
    ctx.session.record_read(&canonical, stamp);
    let location = Artifact::Location {
        path: canonical.display().to_string(),
        line: None,
    };

    let first = params.offset.unwrap_or(1).max(1);
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    let cap = ctx.session.limits.read_bytes;
    let mut window = Window::new(first, limit, cap);
    let eof = match editor_text(ctx, &canonical).await? {
        Some(editor) => {
            window.feed(editor.as_bytes());
            true
        }
        None if meta.len() == 0 => true,
        None => read_into(ctx, &canonical, &shown, meta.len(), &mut window).await?,
    };
    let view = window.finish(eof);
    if view.binary {
        return Err(refuse(
            &shown,
            &TextError::Binary {
                reason: "it contains NUL bytes",
            },
        ));
    }
    if view.total == Some(0) {
        return Ok(ToolOutput::text(format!("{shown} is empty (0 lines)."))
            .with("total_lines", 0)
            .artifact(location));
    }
    if let Some(total) = view.total
        && first > total
    {
        return Err(ToolError::BadArgument(format!(
            "offset {first} is past the end of {shown}, which has {total} lines; use an \
             offset from 1 to {total}"
        )));
    }
    Ok(render(view, &shown, meta.len(), cap, canonical.as_path()))
}

/// The editor's text of the file, when the editor serves files. An editor error falls back to
/// the disk; a path that changed around the editor's read fails the call.
async fn editor_text(ctx: &ToolContext, canonical: &Path) -> Result<Option<String>, ToolError> {
    match ctx.runtime.read_editor_text(canonical).await {
        None => Ok(None),
        Some(Ok(text)) => Ok(Some(text)),
        Some(Err(error @ crate::runtime::AccessError::Stale(_))) => Err(error),
        Some(Err(error)) => {
            tracing::warn!(%error, "the editor could not serve the file; reading the disk");
            Ok(None)
        }
    }
}

/// Streams the file into the window: in one piece when small, else in chunks until the window
/// is full (and the line count known, within [`COUNT_BYTES`]). The head is sniffed for binary
/// content first. Returns whether the end of the file was reached.
async fn read_into(
    ctx: &ToolContext,
    canonical: &Path,
    shown: &str,
    size: u64,
    window: &mut Window,
) -> Result<bool, ToolError> {
    if size <= WHOLE_READ_BYTES {
        let bytes = ctx.runtime.read(canonical).await?;
        text::sniff(&bytes).map_err(|e| refuse(shown, &e))?;
        window.feed(&bytes);
        return Ok(true);
    }
    let mut position = 0u64;
    loop {
        if window.is_full() && position >= COUNT_BYTES {
            return Ok(false);
        }
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let chunk = ctx
            .runtime
            .read_range(canonical, position, CHUNK_BYTES)
            .await?;
        if position == 0 {
            text::sniff(&chunk).map_err(|e| refuse(shown, &e))?;
        }
        position += chunk.len() as u64;
        window.feed(&chunk);
        if chunk.len() < CHUNK_BYTES {
            return Ok(true);
        }
    }
}

fn refuse(shown: &str, error: &TextError) -> ToolError {
    ToolError::BadArgument(format!(
        "cannot show {shown}: {error}. read shows UTF-8 text files only."
    ))
}

fn render(view: View, shown: &str, size: u64, cap: usize, canonical: &Path) -> ToolOutput {
    let View {
        mut text,
        first,
        last_shown,
        total,
        capped,
        lossy,
        ..
    } = view;
    let of_total = match total {
        Some(total) => format!(" of {total}"),
        None => format!(" (the file has {size} bytes)"),
    };
    let more = total.is_none_or(|total| last_shown < total);
    if text.ends_with('\n') {
        text.pop();
    }
    if lossy {
        text.push_str(
            "\n\n[The file is not valid UTF-8: invalid bytes are shown as \u{FFFD}; edit will refuse it.]",
        );
    }
    if capped {
        text.push_str(&format!(
            "\n\n[Output capped at {} KB: showing lines {first}-{last_shown}{of_total} of {shown}. \
             Call read with offset={} (and a smaller limit) to continue.]",
            cap / 1024,
            last_shown + 1
        ));
    } else if more {
        text.push_str(&format!(
            "\n\n[Showing lines {first}-{last_shown}{of_total}. Call read with offset={} to read \
             more.]",
            last_shown + 1
        ));
    }
    let mut output = ToolOutput::text(text)
        .with("start_line", first)
        .with("end_line", last_shown);
    output = match total {
        Some(total) => output.with("total_lines", total),
        None => output.with("file_bytes", size),
    };
    if capped {
        output = output.with("truncated", true);
    }
    output.artifact(Artifact::Location {
        path: canonical.display().to_string(),
        line: u32::try_from(first).ok(),
    })
}

/// The lines one call shows, filled chunk by chunk.
#[derive(Debug)]
struct Window {
    first: u64,
    last: u64,
    cap: usize,
    /// Number of the line being scanned (1-based).
    line: u64,
    /// Bytes seen after the last line break (a final line without one still counts).
    partial: bool,
    /// The shown line being assembled (at most [`MAX_LINE_BYTES`]), and its full length.
    current: Vec<u8>,
    current_len: usize,
    out: String,
    last_shown: u64,
    capped: bool,
    lossy: bool,
    binary: bool,
}

/// What a window ended with.
#[derive(Debug)]
struct View {
    text: String,
    first: u64,
    last_shown: u64,
    /// Lines in the file, when the scan reached its end.
    total: Option<u64>,
    capped: bool,
    lossy: bool,
    binary: bool,
}

impl Window {
    fn new(first: u64, limit: u64, cap: usize) -> Self {
        Self {
            first,
            last: first.saturating_add(limit - 1),
            cap,
            line: 1,
            partial: false,
            current: Vec::new(),
            current_len: 0,
            out: String::new(),
            last_shown: first.saturating_sub(1),
            capped: false,
            lossy: false,
            binary: false,
        }
    }

    /// No more lines will be shown: the limit or the cap was reached.
    fn is_full(&self) -> bool {
        self.capped || self.line > self.last
    }

    fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.is_full() {
                // Only counting from here on.
                let newlines = text::count_newlines(rest) as u64;
                self.line += newlines;
                self.partial = rest.last() != Some(&b'\n');
                return;
            }
            let shown = self.line >= self.first;
            match rest.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    if shown {
                        self.take(&rest[..end]);
                        self.finish_line();
                    }
                    self.line += 1;
                    self.partial = false;
                    rest = &rest[end + 1..];
                }
                None => {
                    if shown {
                        self.take(rest);
                    }
                    self.partial = true;
                    return;
                }
            }
        }
    }

    fn take(&mut self, bytes: &[u8]) {
        self.current_len += bytes.len();
        let room = MAX_LINE_BYTES.saturating_sub(self.current.len());
        self.current
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish_line(&mut self) {
        let mut bytes = std::mem::take(&mut self.current);
        let full_len = std::mem::take(&mut self.current_len);
        let was_cut = full_len > bytes.len();
        if !was_cut && bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        if self.line == 1 && bytes.starts_with(text::UTF8_BOM) {
            bytes.drain(..text::UTF8_BOM.len());
        }
        if bytes.contains(&0) {
            self.binary = true;
        }
        let decoded = match std::str::from_utf8(&bytes) {
            Ok(text) => text.to_owned(),
            // Cut inside a character by the byte bound: drop the partial character.
            Err(e) if was_cut && e.error_len().is_none() => {
                String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
            }
            Err(_) => {
                self.lossy = true;
                String::from_utf8_lossy(&bytes).into_owned()
            }
        };
        let shown = match decoded.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!(
                "{}… [line cut: {full_len} bytes in full, first {MAX_LINE_CHARS} characters shown]",
                &decoded[..cut]
            ),
            None if was_cut => format!("{decoded}… [line cut: {full_len} bytes in full]"),
            None => decoded,
        };
        let entry = format!("{:>6}\t{shown}\n", self.line);
        if !self.out.is_empty() && self.out.len() + entry.len() > self.cap {
            self.capped = true;
            return;
        }
        self.out.push_str(&entry);
        self.last_shown = self.line;
    }

    fn finish(mut self, eof: bool) -> View {
        if eof && self.partial && !self.is_full() && self.line >= self.first {
            self.finish_line();
        }
        let total = eof.then(|| self.line - 1 + u64::from(self.partial));
        View {
            text: self.out,
            first: self.first,
            last_shown: self.last_shown,
            total,
            capped: self.capped,
            lossy: self.lossy,
            binary: self.binary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(chunks: &[&[u8]], first: u64, limit: u64, cap: usize) -> View {
        let mut window = Window::new(first, limit, cap);
        for chunk in chunks {
            window.feed(chunk);
        }
        window.finish(true)
    }

    #[test]
    fn numbers_lines_like_cat_n() {
        let v = view(&[b"a\r\nb\nc"], 1, 10, 1000);
        assert_eq!(v.text, "     1\ta\n     2\tb\n     3\tc\n");
        assert_eq!(v.total, Some(3));
        assert_eq!(v.last_shown, 3);
    }

    #[test]
    fn chunks_split_anywhere_give_the_same_window() {
        let data = b"one\ntwo\nthree\nfour\nfive\n";
        let whole = view(&[data], 2, 3, 1000);
        for split in 0..data.len() {
            let (a, b) = data.split_at(split);
            let parts = view(&[a, b], 2, 3, 1000);
            assert_eq!(parts.text, whole.text, "split at {split}");
            assert_eq!(parts.total, Some(5));
        }
        assert_eq!(whole.text, "     2\ttwo\n     3\tthree\n     4\tfour\n");
    }

    #[test]
    fn cap_stops_at_a_whole_line() {
        let data = "x\n".repeat(100);
        let v = view(&[data.as_bytes()], 1, 2000, 30);
        assert!(v.capped);
        assert_eq!(v.last_shown, 3);
        assert_eq!(v.total, Some(100));
    }

    #[test]
    fn long_lines_are_cut_on_a_character() {
        let line = "é".repeat(MAX_LINE_CHARS * 3);
        let v = view(&[line.as_bytes()], 1, 10, 1 << 20);
        assert!(!v.lossy);
        assert!(
            v.text.contains("… [line cut:"),
            "{}",
            &v.text[v.text.len() - 80..]
        );
        assert_eq!(v.text.matches('é').count(), MAX_LINE_CHARS);
    }

    #[test]
    fn empty_and_bom() {
        assert_eq!(view(&[], 1, 10, 100).total, Some(0));
        let v = view(&[b"\xEF\xBB\xBFhi\n"], 1, 10, 100);
        assert_eq!(v.text, "     1\thi\n");
    }
}
