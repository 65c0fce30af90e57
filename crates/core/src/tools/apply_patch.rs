//! The `apply_patch` tool: a multi-hunk, multi-file change in one call, applied whole or not
//! at all. An extension beside the locked set (the seeds' "common extensions"): the locked ids
//! keep their shape.
//!
//! - [`ApplyPatchTool`] / [`ApplyPatchParams`]: the tool (a [`DynTool`] of its own, since its
//!   subjects are the files named inside the patch, [`Subject::Paths`]) and its one argument,
//!   `input`, the patch text in either format [`super::patch`] reads.
//! - `PatchPlan`: every file's new bytes, diff and stamp, computed before anything is written
//!   ([`DynTool::prepare`]); the policy's prompt shows every diff ([`Preview::Diffs`]), and the
//!   run writes the files one by one with the runtime's atomic writes, putting back the ones
//!   already written if a later one fails.
//!
//! Each file is checked as `write` and `edit` check theirs: the engine resolves and
//! scope-checks every path and the policy decides each as a write (rules, mode, watchdog), the
//! strictest decision deciding the call; an updated or deleted file must have been read in the
//! session and be unchanged since; line endings (CRLF), the byte-order mark and the file's mode
//! are kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::edit::MAX_EDIT_BYTES;
use super::patch::{self, FileOp, Hunk, Patch};
use super::text::{self, FileChange, TextFile};
use crate::capability::{Access, RequirementSet};
use crate::tool::{
    Artifact, CallView, Describe, DynTool, FileStamp, ParsedCall, Prepared, Preview, Subject,
    ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec, validate_with,
};

/// The tool's id.
pub const ID: &str = crate::tool::BundledTool::ApplyPatch.id();

/// Arguments of `apply_patch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchParams {
    pub input: String,
}

const DESCRIPTION: &str = "\
Edits files with one patch, applied whole or not at all: a unified diff, or `*** Begin Patch`, \
`*** Update File: PATH` with `@@` hunks of ` `/`-`/`+` lines, `*** Add File: PATH` with `+` \
lines, `*** Delete File: PATH`, `*** End Patch`. Read files before changing them.";

/// The `apply_patch` tool.
pub struct ApplyPatchTool {
    spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ApplyPatchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApplyPatchTool").finish_non_exhaustive()
    }
}

impl ApplyPatchTool {
    /// The tool, ready to register.
    pub fn wrap() -> Result<Arc<dyn DynTool>, ToolError> {
        let spec = ToolSpec::new::<ApplyPatchParams>(ID, DESCRIPTION)
            .kind(ToolKind::Edit)
            .title("Apply a patch")
            .subject(Subject::Paths)
            .requires(RequirementSet::fs_read_write(
                &["{workspace}/**"],
                &["{workspace}/**"],
            ));
        let validator = jsonschema::validator_for(&spec.parameters).map_err(|e| {
            ToolError::invariant(
                "registering a tool",
                format!("tool `{ID}` has an invalid parameter schema: {e}"),
            )
        })?;
        Ok(Arc::new(Self { spec, validator }))
    }
}

/// The files a patch names, in order (a move's destination after its source).
fn named_paths(patch: &Patch) -> Vec<String> {
    let mut paths = Vec::new();
    for op in &patch.files {
        paths.push(op.path().to_owned());
        if let FileOp::Update {
            move_to: Some(to), ..
        } = op
        {
            paths.push(to.clone());
        }
    }
    paths
}

fn describe(patch: &Patch, how: Describe<'_>) -> CallView {
    let paths = named_paths(patch);
    let shown: Vec<String> = paths.iter().map(|p| how.shown(p)).collect();
    let title = match shown.as_slice() {
        [one] => format!("Patch {one}"),
        many if many.len() <= 4 => format!("Patch {}", many.join(", ")),
        many => format!("Patch {} files: {}, …", many.len(), many[..3].join(", ")),
    };
    CallView {
        title,
        locations: paths.iter().map(|p| how.location(p, None)).collect(),
    }
}

impl DynTool for ApplyPatchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn parse(&self, args: &Value, how: Describe<'_>) -> Result<ParsedCall, ToolError> {
        validate_with(&self.validator, ID, args)?;
        let params =
            ApplyPatchParams::deserialize(args).map_err(|e| ToolError::InvalidArguments {
                tool: ID.to_owned(),
                message: e.to_string(),
            })?;
        let patch = patch::parse(&params.input).map_err(|e| {
            ToolError::BadArgument(format!(
                "the patch does not parse: {e}. Nothing was written."
            ))
        })?;
        let view = describe(&patch, how);
        let paths = named_paths(&patch);
        Ok(ParsedCall::with_params(patch, view, paths))
    }

    fn prepare<'a>(
        &'a self,
        call: &'a mut ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            let plan = PatchPlan::new(call, ctx).await?;
            let diffs: Vec<_> = plan
                .files
                .iter()
                .filter_map(|file| file.change.acp.clone())
                .collect();
            call.prepared = Some(Prepared::new(Some(Preview::Diffs(diffs)), plan));
            Ok(())
        })
    }

    fn run<'a>(
        &'a self,
        mut call: ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let prepared = match call.prepared.take() {
                Some(prepared) => prepared,
                None => Prepared::new(None, PatchPlan::new(&call, ctx).await?),
            };
            let plan: PatchPlan = prepared.plan()?;
            plan.commit(ctx).await?;
            plan.output(ctx).await
        })
    }
}

/// What happens to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Add,
    Update,
    Delete,
    /// The destination of a move (its source is a `Delete` of the same section).
    MovedHere,
}

/// One file's part of a patch, computed before anything is written.
#[derive(Debug)]
struct FilePlan {
    action: Action,
    canonical: PathBuf,
    shown: String,
    /// What the disk said when the file was read (`None`: it does not exist yet).
    stamp: Option<FileStamp>,
    /// The content before the patch, to put back if a later file fails (`None`: remove).
    original: Option<Vec<u8>>,
    /// The bytes to write (`None`: the file is deleted).
    bytes: Option<Vec<u8>>,
    crlf: bool,
    change: FileChange,
}

/// A whole patch, prepared: every file's plan, in the patch's order.
#[derive(Debug)]
struct PatchPlan {
    files: Vec<FilePlan>,
}

/// The current text of an existing file to update, decoded; its stamp and bytes.
struct Current {
    stamp: FileStamp,
    bytes: Vec<u8>,
    file: TextFile,
}

/// A file's new text after its hunks, and its encoded bytes.
struct Updated {
    new_text: String,
    bytes: Vec<u8>,
    crlf: bool,
}

impl Updated {
    /// The file updated in place.
    fn plan(self, target: PathBuf, shown: String, current: Current) -> FilePlan {
        let change = FileChange::compute(
            &shown,
            &target,
            Some(current.file.text.as_bytes()),
            self.new_text.as_bytes(),
        );
        FilePlan {
            action: Action::Update,
            canonical: target,
            shown,
            stamp: Some(current.stamp),
            original: Some(current.bytes),
            bytes: Some(self.bytes),
            crlf: self.crlf,
            change,
        }
    }

    /// The file's new text at the place it moves to.
    fn moved_here(self, destination: PathBuf, shown: String, current: &Current) -> FilePlan {
        let change = FileChange::compute(
            &shown,
            &destination,
            Some(current.file.text.as_bytes()),
            self.new_text.as_bytes(),
        );
        FilePlan {
            action: Action::MovedHere,
            canonical: destination,
            shown,
            stamp: None,
            original: None,
            bytes: Some(self.bytes),
            crlf: self.crlf,
            change,
        }
    }
}

fn not_written(message: String) -> ToolError {
    ToolError::BadArgument(format!(
        "{message}. Nothing was written (a patch is applied whole or not at all)."
    ))
}

impl PatchPlan {
    async fn new(call: &ParsedCall, ctx: &ToolContext) -> Result<Self, ToolError> {
        let patch: &Patch = call.params()?;
        // The engine resolved and checked every path; outside it (the command line, tests)
        // they are resolved here.
        let mut canonical = Vec::with_capacity(call.paths.len());
        for path in &call.paths {
            canonical.push(match &path.canonical {
                Some(resolved) => {
                    ctx.runtime.check(resolved, Access::Write)?;
                    resolved.clone()
                }
                None => ctx.runtime.resolve_checked(&path.user, Access::Write)?,
            });
        }
        let mut seen: Vec<&Path> = Vec::new();
        for (path, user) in canonical.iter().zip(&call.paths) {
            if seen.contains(&path.as_path()) {
                return Err(not_written(format!(
                    "`{}` appears twice in the patch; put all of a file's hunks in one section",
                    user.user
                )));
            }
            seen.push(path);
        }
        let mut next = canonical.into_iter();
        let mut files = Vec::new();
        for op in &patch.files {
            let Some(target) = next.next() else {
                return Err(ToolError::invariant(
                    "preparing a patch",
                    "fewer resolved paths than the patch names",
                ));
            };
            let shown = ctx.runtime.display_path(&target);
            match op {
                FileOp::Add { content, .. } => {
                    files.push(Self::add(ctx, target, shown, content).await?);
                }
                FileOp::Delete { .. } => {
                    let current = Self::current(ctx, &target, &shown, "delete").await?;
                    files.push(Self::delete(target, shown, current));
                }
                FileOp::Update { move_to, hunks, .. } => {
                    let current = Self::current(ctx, &target, &shown, "change").await?;
                    let updated = Self::update(&current, &shown, hunks)?;
                    if move_to.is_none() {
                        files.push(updated.plan(target, shown, current));
                        continue;
                    }
                    let Some(destination) = next.next() else {
                        return Err(ToolError::invariant(
                            "preparing a patch",
                            "a move without its resolved destination",
                        ));
                    };
                    let dest_shown = ctx.runtime.display_path(&destination);
                    if text::inspect(ctx, &destination).await?.is_some() {
                        return Err(not_written(format!(
                            "{shown} cannot move to {dest_shown}: it already exists"
                        )));
                    }
                    files.push(updated.moved_here(destination, dest_shown, &current));
                    files.push(Self::delete(target, shown, current));
                }
            }
        }
        Ok(Self { files })
    }

    /// A file the patch adds; it must not exist yet.
    async fn add(
        ctx: &ToolContext,
        target: PathBuf,
        shown: String,
        content: &str,
    ) -> Result<FilePlan, ToolError> {
        if text::inspect(ctx, &target).await?.is_some() {
            return Err(not_written(format!(
                "{shown} already exists; change it with `*** Update File: {shown}` \
                 (or delete it in the same patch first)"
            )));
        }
        let change = FileChange::compute(&shown, &target, None, content.as_bytes());
        Ok(FilePlan {
            action: Action::Add,
            canonical: target,
            shown,
            stamp: None,
            original: None,
            bytes: Some(content.as_bytes().to_vec()),
            crlf: false,
            change,
        })
    }

    /// A file the patch deletes (or moves away).
    fn delete(target: PathBuf, shown: String, current: Current) -> FilePlan {
        let change = FileChange::compute(&shown, &target, Some(current.file.text.as_bytes()), b"");
        FilePlan {
            action: Action::Delete,
            canonical: target,
            shown,
            stamp: Some(current.stamp),
            original: Some(current.bytes),
            bytes: None,
            crlf: false,
            change,
        }
    }

    /// The hunks applied to a file's text, its line endings kept.
    fn update(current: &Current, shown: &str, hunks: &[Hunk]) -> Result<Updated, ToolError> {
        let crlf = current.file.endings.is_crlf();
        let old_text = &current.file.text;
        let lf = if crlf {
            text::crlf_to_lf(old_text)
        } else {
            std::borrow::Cow::Borrowed(old_text.as_str())
        };
        let new_lf =
            patch::apply_hunks(&lf, hunks).map_err(|e| not_written(format!("{shown}: {e}")))?;
        let new_text = if crlf {
            text::lf_to_crlf(&new_lf)
        } else {
            new_lf
        };
        let bytes = current.file.encode(&new_text);
        Ok(Updated {
            new_text,
            bytes,
            crlf,
        })
    }

    /// An existing regular text file the patch changes or deletes: read in this session and
    /// unchanged since (the read-before-write guard), within the size `edit` handles, decoded.
    async fn current(
        ctx: &ToolContext,
        canonical: &Path,
        shown: &str,
        action: &str,
    ) -> Result<Current, ToolError> {
        let Some((meta, stamp)) = text::inspect(ctx, canonical).await? else {
            return Err(ToolError::NotFound(format!(
                "{shown} does not exist, so the patch cannot {action} it; to create it use \
                 `*** Add File: {shown}`. Nothing was written."
            )));
        };
        if !meta.is_file() {
            return Err(not_written(format!("{shown} is not a regular file")));
        }
        text::require_fresh_read(ctx, canonical, shown, &stamp, action)?;
        if stamp.len > MAX_EDIT_BYTES {
            return Err(not_written(format!(
                "{shown} is {} bytes, more than a patch handles ({MAX_EDIT_BYTES})",
                stamp.len
            )));
        }
        let (bytes, source) = text::current_bytes(ctx, canonical).await?;
        if source == text::ContentSource::Disk && bytes.len() as u64 != stamp.len {
            return Err(text::changed(shown, "it changed while being read", action));
        }
        let file = TextFile::decode(bytes.clone())
            .map_err(|e| not_written(format!("cannot patch {shown}: {e}")))?;
        Ok(Current { stamp, bytes, file })
    }

    /// Writes every file (new and changed ones first, deletions last), after checking that none
    /// changed since it was prepared. If one fails, the files already written are put back as
    /// they were and the error says so.
    async fn commit(&self, ctx: &ToolContext) -> Result<(), ToolError> {
        for file in &self.files {
            if ctx.runtime.stamp(&file.canonical).await.as_ref() != file.stamp.as_ref() {
                return Err(text::changed(
                    &file.shown,
                    "it changed after the patch was prepared",
                    "patch",
                ));
            }
        }
        let order = self
            .files
            .iter()
            .filter(|f| f.bytes.is_some())
            .chain(self.files.iter().filter(|f| f.bytes.is_none()));
        let mut done: Vec<&FilePlan> = Vec::new();
        for file in order {
            let result = match &file.bytes {
                Some(bytes) => ctx.runtime.write(&file.canonical, bytes).await,
                None => ctx.runtime.remove(&file.canonical).await,
            };
            if let Err(error) = result {
                let unrestored = Self::restore(ctx, &done).await;
                let restored = done.len() - unrestored.len();
                let mut message = format!("the patch failed at {}: {error}. ", file.shown);
                if unrestored.is_empty() {
                    message.push_str(&format!(
                        "Nothing was changed ({restored} file{} already written {} put back).",
                        if restored == 1 { "" } else { "s" },
                        if restored == 1 { "was" } else { "were" },
                    ));
                } else {
                    message.push_str(&format!(
                        "These files could not be put back as they were: {}.",
                        unrestored.join("; ")
                    ));
                }
                tracing::warn!(file = %file.shown, %error, restored, "apply_patch rolled back");
                return Err(match error {
                    crate::runtime::AccessError::Refused(refusal) => ToolError::Refused(refusal),
                    other => ToolError::Io {
                        message,
                        source: Some(Arc::new(other)),
                    },
                });
            }
            done.push(file);
        }
        for file in &self.files {
            if file.bytes.is_some()
                && let Some(stamp) = ctx.runtime.stamp(&file.canonical).await
            {
                ctx.session.record_read(&file.canonical, stamp);
            }
        }
        Ok(())
    }

    /// Puts the written files back as they were, latest first; returns the ones that could not
    /// be ("path: why").
    async fn restore(ctx: &ToolContext, done: &[&FilePlan]) -> Vec<String> {
        let mut failed = Vec::new();
        for file in done.iter().rev() {
            let result = match &file.original {
                Some(bytes) => ctx.runtime.write(&file.canonical, bytes).await,
                None => ctx.runtime.remove(&file.canonical).await,
            };
            if let Err(error) = result {
                tracing::error!(file = %file.shown, %error, "apply_patch could not restore a file");
                failed.push(format!("{}: {error}", file.shown));
            }
        }
        failed
    }

    async fn output(self, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (mut added, mut removed) = (0, 0);
        let mut summary = Vec::new();
        let mut diffs = String::new();
        for file in &self.files {
            added += file.change.added;
            removed += file.change.removed;
            let letter = match file.action {
                Action::Add | Action::MovedHere => "A",
                Action::Update => "M",
                Action::Delete => "D",
            };
            let mut line = format!("{letter} {} ({})", file.shown, file.change.counts());
            if file.crlf {
                line.push_str(", CRLF kept");
            }
            summary.push(line);
            if file.action == Action::Update && !file.change.unified.is_empty() {
                diffs.push('\n');
                diffs.push_str(&file.change.unified);
            }
        }
        let count = self.files.len();
        let message = format!(
            "Applied the patch to {count} file{}:\n{}\n{diffs}",
            if count == 1 { "" } else { "s" },
            summary.join("\n")
        );
        let (text, output_path) = ctx
            .cap_bytes(ID, message, ctx.session.limits.read_bytes)
            .await?;
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| Value::String(f.shown.clone()))
            .collect();
        let mut output = ToolOutput {
            text,
            output_path,
            ..ToolOutput::default()
        }
        .with("files", files)
        .with("added", added)
        .with("removed", removed);
        for file in self.files {
            let line = file.change.first_line.and_then(|l| u32::try_from(l).ok());
            let path = file.canonical.display().to_string();
            if let Some(diff) = file.change.acp {
                output = output.artifact(Artifact::Diff(diff));
            }
            output = output.artifact(Artifact::Location { path, line });
        }
        Ok(output)
    }
}
