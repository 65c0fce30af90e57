//! The `write` tool: create a file or replace its whole content.
//!
//! - [`WriteTool`] / [`WriteParams`]: the tool and its arguments (`file_path`, `content`).
//! - `WritePlan`: the bytes a call will write and the diff against what is there, prepared
//!   once and carried to the run, which refuses the write if the file changed since (the user
//!   may have changed it while deciding).
//!
//! Overwriting an existing file needs a fresh read ([`text::require_fresh_read`]). A CRLF file
//! stays CRLF when the model sends LF text, and a UTF-8 byte-order mark stays. The write itself
//! is the runtime's: scope-checked, atomic, mode kept, parents created.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, FileChange};
use crate::capability::{Access, RequirementSet};
use crate::tool::{
    Artifact, CallTarget, CallView, Describe, FileStamp, Prepared, Preview, Subject, Tool,
    ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Write.id();

/// Existing files larger than this are overwritten without a diff (only their head is read, to
/// keep their line endings and byte-order mark).
const MAX_DIFF_BYTES: u64 = 64 * 1024 * 1024;

/// Arguments of `write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// Absolute or workspace-relative path.
    pub file_path: String,
    /// The whole new content.
    pub content: String,
}

/// The `write` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

const DESCRIPTION: &str = "\
Creates a file or replaces all its content; missing parent directories are created.
- An existing file must have been read in this session and unchanged since; to change part of \
it, use `edit`.
- CRLF line endings and a byte-order mark are kept. Returns the diff of an existing file.";

impl Tool for WriteTool {
    type Params = WriteParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<WriteParams>(ID, DESCRIPTION)
            .kind(ToolKind::Edit)
            .title("Write a file")
            .subject(Subject::Path(Some("file_path".into())))
            .requires(RequirementSet::fs_read_write(
                &["{workspace}/**"],
                &["{workspace}/**"],
            ))
    }

    fn target(&self, params: &WriteParams) -> CallTarget {
        CallTarget::Path(params.file_path.clone())
    }

    fn describe(&self, params: &WriteParams, how: Describe<'_>) -> CallView {
        CallView {
            title: format!("Write {}", how.shown(&params.file_path)),
            locations: vec![how.location(&params.file_path, None)],
        }
    }

    async fn prepare(
        &self,
        params: &WriteParams,
        subject: Option<&Path>,
        ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        let plan = WritePlan::new(params, subject, ctx).await?;
        let preview = plan.change.acp.clone().map(Preview::Diff);
        Ok(Some(Prepared::new(preview, plan)))
    }

    async fn run_prepared(
        &self,
        _params: WriteParams,
        prepared: Prepared,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let plan: WritePlan = prepared.plan()?;
        let unchanged = plan.unchanged;
        text::commit_prepared(
            ctx,
            &plan.canonical,
            plan.stamp.as_ref(),
            &plan.shown,
            (ID, "overwrite"),
            (!unchanged).then_some(plan.new.as_slice()),
        )
        .await?;
        plan.output(ctx, unchanged).await
    }

    async fn run(&self, params: WriteParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let canonical = ctx
            .runtime
            .resolve_checked(&params.file_path, Access::Write)?;
        let plan = WritePlan::new(&params, Some(&canonical), ctx).await?;
        self.run_prepared(params, Prepared::new(None, plan), ctx)
            .await
    }
}

/// What one `write` call will do, prepared once and carried to the run.
#[derive(Debug)]
struct WritePlan {
    canonical: PathBuf,
    shown: String,
    created: bool,
    /// What the disk said of the file when it was read (`None`: it did not exist).
    stamp: Option<FileStamp>,
    /// The old content was small enough to diff.
    diffed: bool,
    /// The file already has exactly this content.
    unchanged: bool,
    new: Vec<u8>,
    notes: Vec<&'static str>,
    /// The diff, computed once.
    change: FileChange,
}

impl WritePlan {
    async fn new(
        params: &WriteParams,
        subject: Option<&Path>,
        ctx: &ToolContext,
    ) -> Result<Self, ToolError> {
        let canonical =
            ctx.runtime
                .subject_or_resolve(subject, &params.file_path, Access::Write)?;
        let shown = ctx.runtime.display_path(&canonical);
        let Some((meta, stamp)) = text::inspect(ctx, &canonical).await? else {
            let new = params.content.clone().into_bytes();
            let change = FileChange::compute(&shown, &canonical, None, &display(&new));
            return Ok(Self {
                canonical,
                shown,
                created: true,
                stamp: None,
                diffed: false,
                unchanged: false,
                new,
                notes: Vec::new(),
                change,
            });
        };
        if meta.is_dir() {
            return Err(ToolError::BadArgument(format!(
                "{shown} is a directory; give write the path of a file"
            )));
        }
        if !meta.is_file() {
            return Err(ToolError::BadArgument(format!(
                "{shown} is not a regular file (a device, socket or pipe); write replaces files only"
            )));
        }
        text::require_fresh_read(ctx, &canonical, &shown, &stamp, "overwrite")?;
        let old = if meta.len() <= MAX_DIFF_BYTES {
            Some(text::current_bytes(ctx, &canonical).await?.0)
        } else {
            None
        };
        let (new, notes) = match &old {
            Some(bytes) => keep_conventions(bytes, &params.content),
            None => {
                let head = ctx
                    .runtime
                    .read_range(&canonical, 0, text::SNIFF_BYTES)
                    .await?;
                keep_conventions(&head, &params.content)
            }
        };
        let unchanged = old.as_deref() == Some(new.as_slice());
        let change = match &old {
            Some(old) => {
                FileChange::compute(&shown, &canonical, Some(&display(old)), &display(&new))
            }
            None => FileChange {
                unified: String::new(),
                added: 0,
                removed: 0,
                first_line: None,
                acp: None,
            },
        };
        Ok(Self {
            canonical,
            shown,
            created: false,
            stamp: Some(stamp),
            diffed: old.is_some(),
            unchanged,
            new,
            notes,
            change,
        })
    }

    async fn output(self, ctx: &ToolContext, unchanged: bool) -> Result<ToolOutput, ToolError> {
        let lines = text::line_count(&self.new);
        let bytes = self.new.len();
        let change = self.change;
        let mut message = if self.created {
            format!(
                "Created {} ({}, {bytes} bytes).",
                self.shown,
                text::lines_phrase(lines)
            )
        } else if unchanged {
            format!(
                "{} already had exactly this content; nothing was written.",
                self.shown
            )
        } else {
            format!(
                "Overwrote {} ({}, {bytes} bytes; {}).",
                self.shown,
                text::lines_phrase(lines),
                change.counts()
            )
        };
        for note in &self.notes {
            message.push(' ');
            message.push_str(note);
        }
        if !self.created && !unchanged {
            if !self.diffed {
                message.push_str(" The old content was too large to diff.");
            } else if !change.unified.is_empty() {
                message.push_str("\n\n");
                message.push_str(&change.unified);
            }
        }
        let (text, output_path) = ctx
            .cap_bytes(ID, message, ctx.session.limits.read_bytes)
            .await?;
        let path = self.canonical.display().to_string();
        let mut output = ToolOutput {
            text,
            output_path,
            ..ToolOutput::default()
        }
        .with("path", self.shown.as_str())
        .with("created", self.created)
        .with("lines", lines)
        .with("added", change.added)
        .with("removed", change.removed);
        if !unchanged && let Some(diff) = change.acp {
            output = output.artifact(Artifact::Diff(diff));
        }
        let line = change.first_line.unwrap_or(1);
        Ok(output.artifact(Artifact::Location {
            path,
            line: u32::try_from(line).ok(),
        }))
    }
}

/// Bytes as an editor shows them: without the byte-order mark, decoded lossily.
fn display(bytes: &[u8]) -> Vec<u8> {
    text::display_text(bytes).into_bytes()
}

/// The bytes to write for `content` over a file whose content (or head) is `old`: LF text into
/// a CRLF file becomes CRLF, and a UTF-8 byte-order mark is kept. Returns notes for the model.
fn keep_conventions(old: &[u8], content: &str) -> (Vec<u8>, Vec<&'static str>) {
    let mut notes = Vec::new();
    let mut bytes = Vec::with_capacity(content.len() + content.len() / 16 + 3);
    if old.starts_with(text::UTF8_BOM) && !content.starts_with('\u{FEFF}') {
        bytes.extend_from_slice(text::UTF8_BOM);
        notes.push("Kept the file's UTF-8 byte-order mark.");
    }
    let crlf_file = text::LineEndings::of(old).mostly_crlf();
    if crlf_file && content.contains('\n') && !content.contains("\r\n") {
        bytes.extend_from_slice(text::lf_to_crlf(content).as_bytes());
        notes.push("Kept the file's CRLF line endings.");
    } else {
        bytes.extend_from_slice(content.as_bytes());
    }
    (bytes, notes)
}

#[cfg(test)]
mod tests {
    use super::keep_conventions;

    #[test]
    fn conventions_of_the_old_file_are_kept() {
        let (bytes, notes) = keep_conventions(b"a\r\nb\r\n", "x\ny\n");
        assert_eq!(bytes, b"x\r\ny\r\n");
        assert_eq!(notes.len(), 1);
        let (bytes, _) = keep_conventions(b"\xEF\xBB\xBFa\n", "x\n");
        assert_eq!(bytes, b"\xEF\xBB\xBFx\n");
        // The model's own CRLF, or an LF file, are left alone.
        assert_eq!(keep_conventions(b"a\r\n", "x\r\ny\n").0, b"x\r\ny\n");
        assert_eq!(keep_conventions(b"a\n", "x\n").0, b"x\n");
        assert!(keep_conventions(b"", "x\n").1.is_empty());
    }
}
