//! The `glob` tool: lists files whose path matches a glob pattern.
//!
//! - [`GlobTool`] / [`GlobParams`]: `pattern` (globset syntax: `*` stays within one path
//!   component, `**` crosses directories, `{a,b}` alternates, `[abc]` classes) matched against
//!   each file's path relative to `path` (default: the workspace root).
//!
//! The walk is [`Runtime::walk_files`](crate::runtime::Runtime::walk_files)'s, run in parallel: it honours
//! `.gitignore`/`.ignore` (with or without a `.git`), skips hidden files and never follows or
//! lists symlinks. Results are shown workspace-relative, sorted by that path (byte order, as
//! `LC_ALL=C sort` does), and capped at `limits.glob_entries`; past the cap the whole list goes
//! to a sidecar file.
//!
//! Files whose read the policy denies are left out; names of files whose read would be asked
//! (`.env`) are listed, since a name is not the content
//! ([`Runtime::search_access`](crate::runtime::Runtime::search_access)).
//!
//! Why path order rather than Claude Code's newest-first: it is stable across checkouts (a fresh
//! clone gives every file the same mtime) and between calls, keeps a directory's files together,
//! and needs no `stat` per file.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::{GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::capability::{Access, RequirementSet};
use crate::runtime::walk::{Filters, Flow, FoundFile};
use crate::runtime::{Runtime, SearchAccess, tally};
use crate::tool::view::{code, given};
use crate::tool::{
    CallTarget, CallView, Describe, Prepared, Subject, Tool, ToolContext, ToolError, ToolKind,
    ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Glob.id();

const DESCRIPTION: &str = "\
Finds files by glob pattern; returns workspace-relative paths, sorted.
- `pattern` matches paths relative to `path`: `*` within a directory, `**` across directories, \
`{ts,tsx}` alternatives, e.g. `src/**/*.{ts,tsx}`.
- Skips ignored (.gitignore) and hidden files; lists files only.";

/// Arguments of `glob`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobParams {
    /// E.g. `**/*.rs`.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// The directory to search; default the workspace root.
    pub path: Option<String>,
}

/// `glob`: list files by pattern.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

impl Tool for GlobTool {
    type Params = GlobParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<GlobParams>(ID, DESCRIPTION)
            .kind(ToolKind::Search)
            .subject(Subject::Path(Some("path".into())))
            .requires(RequirementSet::fs_read(&["{workspace}/**"]))
            .read_only()
    }

    fn target(&self, params: &GlobParams) -> CallTarget {
        params
            .path
            .clone()
            .map_or(CallTarget::None, CallTarget::Path)
    }

    fn describe(&self, params: &GlobParams, how: Describe<'_>) -> CallView {
        let pattern = given(Some(&params.pattern)).unwrap_or("*");
        match given(params.path.as_deref()) {
            Some(path) => CallView {
                title: format!("Glob {} in {}", code(pattern), how.shown(path)),
                locations: vec![how.location(path, None)],
            },
            None => CallView {
                title: format!("Glob {}", code(pattern)),
                locations: Vec::new(),
            },
        }
    }

    /// Nothing to preview; the plan is the path the engine resolved and decided on, which the
    /// run searches (resolving `path` again could reach another place: a symlink swapped in
    /// since the decision, and a file given as `path` is searched on the call's decision).
    async fn prepare(
        &self,
        _params: &GlobParams,
        subject: Option<&Path>,
        _ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        Ok(Prepared::decided_path(subject))
    }

    async fn run_prepared(
        &self,
        params: GlobParams,
        prepared: Prepared,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let base: PathBuf = prepared.plan()?;
        ctx.runtime.check(&base, Access::Read)?;
        glob_at(params, base, ctx).await
    }

    async fn run(&self, params: GlobParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let base = ctx
            .runtime
            .resolve_checked(params.path.as_deref().unwrap_or("."), Access::Read)?;
        glob_at(params, base, ctx).await
    }
}

/// Runs the call `params` on `base` (resolved and checked).
async fn glob_at(
    params: GlobParams,
    base: PathBuf,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let meta = ctx.runtime.metadata(&base).await?;
    if !meta.is_dir() {
        return Err(ToolError::BadArgument(format!(
            "{} is not a directory; `path` names the directory to search",
            ctx.runtime.display_path(&base)
        )));
    }
    let pattern = relative_pattern(&params.pattern, &base)?;
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| {
            ToolError::BadArgument(format!(
                "invalid glob pattern `{}`: {}",
                params.pattern,
                e.kind()
            ))
        })?
        .compile_matcher();
    let runtime = ctx.runtime.clone();
    let cancel = ctx.cancel.clone();
    let walk_base = base.clone();
    let probe = tally::current();
    let mut entries = tokio::task::spawn_blocking(move || {
        tally::within(probe, || {
            find_files(&runtime, &walk_base, &matcher, &cancel)
        })
    })
    .await
    .map_err(|e| ToolError::internal("listing files (the task failed)", e))??;
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    if entries.is_empty() {
        return Ok(ToolOutput::text(format!(
            "No files match `{}` under {}.",
            params.pattern,
            ctx.runtime.display_path(&base)
        ))
        .with("count", 0));
    }
    entries.sort_unstable();
    let total = entries.len();
    let limit = ctx.session.limits.glob_entries;
    let (shown, output_path) = ctx.cap_entries(ID, entries, limit).await?;
    let mut text = shown.join("\n");
    if output_path.is_some() {
        text.push_str(&format!(
            "\n[{total} files match; showing the first {}]",
            shown.len()
        ));
    }
    let mut output = ToolOutput::text(text).with("count", total);
    output.output_path = output_path;
    Ok(output)
}

/// The pattern relative to the search base: a leading `./` is dropped, and an absolute pattern
/// is accepted when it lies under the base.
fn relative_pattern<'a>(pattern: &'a str, base: &Path) -> Result<&'a str, ToolError> {
    let mut pattern = pattern;
    while let Some(rest) = pattern.strip_prefix("./") {
        pattern = rest;
    }
    if !pattern.starts_with('/') {
        return Ok(pattern);
    }
    let base = base.to_string_lossy();
    pattern
        .strip_prefix(base.as_ref())
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty())
        .ok_or_else(|| {
            ToolError::BadArgument(format!(
                "the pattern `{pattern}` is absolute and not under the search directory {base}; \
                 give a pattern relative to `path`"
            ))
        })
}

/// Walks `base` in parallel and returns the files whose base-relative path matches, as the
/// user reads them (workspace-relative), unsorted. No file is opened or stat'ed: the listing
/// says what is a file, and the rules decide on the name.
fn find_files(
    runtime: &Runtime,
    base: &Path,
    matcher: &GlobMatcher,
    cancel: &CancellationToken,
) -> Result<Vec<String>, ToolError> {
    let found = Mutex::new(Vec::new());
    // How `base` itself is shown; an entry is shown as that prefix and its base-relative path.
    let shown_base = runtime.display_path(base);
    let prefix = match shown_base.as_str() {
        "." => String::new(),
        shown if shown.ends_with('/') => shown.to_owned(),
        shown => format!("{shown}/"),
    };
    runtime.walk_files(base, &Filters::default(), || {
        let mut visitor = Visitor {
            runtime,
            base,
            prefix: &prefix,
            matcher,
            cancel,
            found: &found,
            local: Vec::new(),
        };
        move |file: &FoundFile<'_>| visitor.visit(file)
    })?;
    Ok(found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// One walk thread's matches; handed over when the thread is done.
struct Visitor<'a> {
    runtime: &'a Runtime,
    base: &'a Path,
    prefix: &'a str,
    matcher: &'a GlobMatcher,
    cancel: &'a CancellationToken,
    found: &'a Mutex<Vec<String>>,
    local: Vec<String>,
}

impl Visitor<'_> {
    fn visit(&mut self, file: &FoundFile<'_>) -> Flow {
        if self.cancel.is_cancelled() {
            return Flow::Quit;
        }
        let Ok(relative) = file.path().strip_prefix(self.base) else {
            return Flow::Continue;
        };
        // Names of files whose read would be asked (`.env`) are listed: a name is not the
        // content. Files whose read is denied (or outside the scope) are left out.
        if self.matcher.is_match(relative)
            && self.runtime.search_access(file.path()) != SearchAccess::Hidden
        {
            let relative = relative.to_string_lossy();
            let mut shown = String::with_capacity(self.prefix.len() + relative.len());
            shown.push_str(self.prefix);
            shown.push_str(&relative);
            self.local.push(shown);
        }
        Flow::Continue
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        let mut found = self
            .found
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        found.append(&mut self.local);
    }
}
