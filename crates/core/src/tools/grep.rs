//! The `grep` tool: regex search over file contents, built on ripgrep's own crates.
//!
//! - [`GrepTool`] / [`GrepParams`]: `pattern` (Rust regex syntax), `path` (a directory or one
//!   file; default the workspace root), `glob` and `type` filters, `output_mode`
//!   ([`OutputMode`]: `files_with_matches` (default), `content`, `count`), `-i`, `-n`, `-A`/`-B`/`-C`
//!   context, `multiline`, `head_limit`: the parameters of Claude Code's Grep.
//!
//! The walk is [`Runtime::walk_files`](crate::runtime::Runtime::walk_files)'s (gitignore-aware,
//! no symlinks, directory descriptors all the way down), run in parallel with one [`Searcher`]
//! per thread; binary files (a NUL byte) are
//! skipped. Per-thread results are collected, then sorted by path (byte order), so the output
//! is deterministic. `limits.grep_matches` caps the result entries (matching lines in `content`
//! mode, files otherwise); past it the whole output goes to a sidecar file.
//!
//! `glob` has ripgrep's `--glob` meaning: a pattern without `/` matches file names at any depth,
//! one with `/` matches paths relative to `path`, and a leading `!` excludes.
//!
//! Each file the walk finds is decided as a read of it would be
//! ([`Runtime::search_access`](crate::runtime::Runtime::search_access)): searched when that
//! read would be allowed, named in a note when it would be asked (`.env`, keys, hard links),
//! left out when denied; so a glob that re-includes hidden files cannot show a secret's
//! content. Each file is opened once, relative to its directory's descriptor (no symlink
//! followed), and its type, link count and size are taken from that descriptor: one open and one
//! stat per file searched. A file of at most 64 KiB (most of them) is then read whole with one
//! `read` and searched as a slice; a larger one is streamed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::capability::{Access, RequirementSet};
use crate::runtime::walk::{Filters, Flow, FoundFile};
use crate::runtime::{Runtime, SearchAccess, tally};
use crate::tool::view::{code, given, one_line};
use crate::tool::{
    CallTarget, CallView, Describe, Prepared, Subject, Tool, ToolContext, ToolError, ToolKind,
    ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Grep.id();

/// Lines longer than this are cut in the text the model reads (the sidecar keeps them whole).
pub const MAX_LINE_BYTES: usize = 1000;
/// The search stops collecting past this much matched text (a runaway pattern over a huge tree).
pub const MAX_COLLECTED_BYTES: usize = 64 * 1024 * 1024;
/// Files up to this size are read whole, in one `read`, and searched as a slice. It is the part
/// of a slice `grep-searcher` looks through for a NUL before searching (its buffer capacity), so
/// a file read whole is judged binary exactly when the streaming search would have met the NUL.
const WHOLE_READ_BYTES: usize = 64 * 1024;

const DESCRIPTION: &str = "\
Searches file contents with a regex (ripgrep syntax), respecting .gitignore.
- `pattern`: e.g. `fn\\s+main`, `TODO|FIXME`; escape literal braces and parentheses (`foo\\(`).
- `output_mode`: `files_with_matches` (default), `content` (path:line:text, `-A`/`-B`/`-C` \
context) or `count`.
- Large results are cut and saved whole to a file you can `read`. Files needing approval (.env, \
keys) are skipped with a note; `read` one to ask.";

// What `grep` returns (a plain comment: the tool's description tells the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    // The matching lines, `path:line:text`, with optional context.
    Content,
    // The paths of the files that match.
    #[default]
    FilesWithMatches,
    // The number of matching lines per file.
    Count,
}

/// Arguments of `grep`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepParams {
    /// The regex to search for.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// A directory or one file; default the workspace root.
    pub path: Option<String>,
    /// Only files matching this glob, e.g. `*.rs`, `!**/vendor/**`.
    pub glob: Option<String>,
    /// Only files of this type, e.g. `rust`, `py`, `js`.
    #[serde(rename = "type")]
    pub file_type: Option<String>,
    pub output_mode: Option<OutputMode>,
    /// Case-insensitive.
    #[serde(rename = "-i")]
    pub dash_i: Option<bool>,
    /// Same as `-i`.
    pub case_insensitive: Option<bool>,
    /// Line numbers (default true).
    #[serde(rename = "-n")]
    pub line_numbers: Option<bool>,
    /// Lines after each match.
    #[serde(rename = "-A")]
    pub after: Option<u32>,
    /// Lines before each match.
    #[serde(rename = "-B")]
    pub before: Option<u32>,
    /// Lines before and after each match.
    #[serde(rename = "-C")]
    pub context: Option<u32>,
    /// Patterns may span lines.
    pub multiline: Option<bool>,
    /// Only the first N lines or entries.
    #[schemars(range(min = 1))]
    pub head_limit: Option<u64>,
}

/// `grep`: search file contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

impl Tool for GrepTool {
    type Params = GrepParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<GrepParams>(ID, DESCRIPTION)
            .kind(ToolKind::Search)
            .subject(Subject::Path(Some("path".into())))
            .requires(RequirementSet::fs_read(&["{workspace}/**"]))
            .read_only()
    }

    fn target(&self, params: &GrepParams) -> CallTarget {
        params
            .path
            .clone()
            .map_or(CallTarget::None, CallTarget::Path)
    }

    fn describe(&self, params: &GrepParams, how: Describe<'_>) -> CallView {
        let mut title = format!("Grep {}", code(&one_line(&params.pattern, 60)));
        let mut locations = Vec::new();
        if let Some(path) = given(params.path.as_deref()) {
            title.push_str(&format!(" in {}", how.shown(path)));
            locations.push(how.location(path, None));
        }
        if let Some(filter) = given(params.glob.as_deref()) {
            title.push_str(&format!(" ({filter})"));
        }
        CallView { title, locations }
    }

    /// Nothing to preview; the plan is the path the engine resolved and decided on, which the
    /// run searches (resolving `path` again could reach another place: a symlink swapped in
    /// since the decision, and a file given as `path` is searched on the call's decision).
    async fn prepare(
        &self,
        _params: &GrepParams,
        subject: Option<&Path>,
        _ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        Ok(Prepared::decided_path(subject))
    }

    async fn run_prepared(
        &self,
        params: GrepParams,
        prepared: Prepared,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let base: PathBuf = prepared.plan()?;
        ctx.runtime.check(&base, Access::Read)?;
        grep_at(params, base, ctx).await
    }

    async fn run(&self, params: GrepParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let base = ctx
            .runtime
            .resolve_checked(params.path.as_deref().unwrap_or("."), Access::Read)?;
        grep_at(params, base, ctx).await
    }
}

/// Runs the call `params` on `base` (resolved and checked).
async fn grep_at(
    params: GrepParams,
    base: PathBuf,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let is_dir = ctx.runtime.metadata(&base).await?.is_dir();
    let search = Search::new(&params, &base, is_dir)?;
    let runtime = ctx.runtime.clone();
    let cancel = ctx.cancel.clone();
    let probe = tally::current();
    let found = tokio::task::spawn_blocking(move || {
        tally::within(probe, || search.run(&runtime, &base, &cancel))
    })
    .await
    .map_err(|e| ToolError::internal("searching files (the task failed)", e))??;
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    report(&params, found, ctx).await
}

/// A compiled search: matcher, searcher settings and walk filters.
struct Search {
    matcher: RegexMatcher,
    searcher: SearcherBuilder,
    mode: OutputMode,
    overrides: Option<ignore::overrides::Override>,
    types: Option<ignore::types::Types>,
}

impl Search {
    fn new(params: &GrepParams, base: &Path, is_dir: bool) -> Result<Self, ToolError> {
        let mode = params.output_mode.unwrap_or_default();
        let multiline = params.multiline.unwrap_or(false);
        let case_insensitive =
            params.dash_i.unwrap_or(false) || params.case_insensitive.unwrap_or(false);
        let mut builder = RegexMatcherBuilder::new();
        builder
            .case_insensitive(case_insensitive)
            .multi_line(true)
            .dot_matches_new_line(multiline);
        if !multiline {
            builder.line_terminator(Some(b'\n'));
        }
        let matcher = builder.build(&params.pattern).map_err(|e| {
            let hint = if !multiline && e.to_string().contains("not allowed") {
                " (set `multiline` to true to match across lines)"
            } else {
                ""
            };
            ToolError::BadArgument(format!("invalid regex `{}`: {e}{hint}", params.pattern))
        })?;
        let mut searcher = SearcherBuilder::new();
        searcher
            .binary_detection(BinaryDetection::quit(0))
            .multi_line(multiline)
            .line_number(mode == OutputMode::Content);
        if mode == OutputMode::Content {
            let context = params.context.unwrap_or(0) as usize;
            searcher
                .before_context(params.before.map_or(context, |b| b as usize))
                .after_context(params.after.map_or(context, |a| a as usize));
        }
        let overrides =
            match (&params.glob, is_dir) {
                (Some(glob), true) => {
                    let mut overrides = OverrideBuilder::new(base);
                    overrides.add(glob).map_err(|e| {
                        ToolError::BadArgument(format!("invalid glob `{glob}`: {e}"))
                    })?;
                    Some(overrides.build().map_err(|e| {
                        ToolError::BadArgument(format!("invalid glob `{glob}`: {e}"))
                    })?)
                }
                _ => None,
            };
        let types = match (&params.file_type, is_dir) {
            (Some(name), true) => {
                let mut types = TypesBuilder::new();
                types.add_defaults().select(name);
                Some(types.build().map_err(|e| {
                    ToolError::BadArgument(format!(
                        "unknown file type `{name}`: {e} (types are rg's: rust, py, js, ts, go, ...)"
                    ))
                })?)
            }
            _ => None,
        };
        Ok(Self {
            matcher,
            searcher,
            mode,
            overrides,
            types,
        })
    }

    /// Searches `base` (a file, or a directory walked in parallel) and returns the hits sorted
    /// by path.
    fn run(
        &self,
        runtime: &Runtime,
        base: &Path,
        cancel: &CancellationToken,
    ) -> Result<Found, ToolError> {
        let shared = Shared::default();
        let filters = Filters {
            overrides: self.overrides.clone(),
            types: self.types.clone(),
        };
        let errors = runtime.walk_files(base, &filters, || {
            let mut searcher = self.searcher.build();
            // One buffer per thread for the files read whole (zeroed once, then overwritten).
            let mut buffer = vec![0u8; WHOLE_READ_BYTES + 1];
            let shared = &shared;
            move |found: &FoundFile<'_>| {
                if cancel.is_cancelled() || shared.full.load(Ordering::Relaxed) {
                    return Flow::Quit;
                }
                // The path the call named was decided with the call; what the walk finds is
                // decided file by file, as a read of it would be (the scope checked first; its
                // links are counted on the descriptor the search reads).
                let access = if !found.is_base() {
                    runtime.search_access(found.path())
                } else if runtime.check(found.path(), Access::Read).is_ok() {
                    SearchAccess::Read
                } else {
                    SearchAccess::Hidden
                };
                match access {
                    SearchAccess::Read => {
                        self.search_file(
                            (&mut searcher, &mut buffer),
                            runtime,
                            found,
                            shared,
                            cancel,
                        );
                    }
                    SearchAccess::NameOnly => shared.withheld(found.path().to_path_buf()),
                    SearchAccess::Hidden => {}
                }
                Flow::Continue
            }
        })?;
        shared
            .unreadable
            .fetch_add(errors.unreadable_dirs, Ordering::Relaxed);
        let mut files = shared
            .files
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Byte order of the path, as `glob` sorts (and `LC_ALL=C sort`).
        files.sort_unstable_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
        let mut withheld = shared
            .withheld
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        withheld.sort_unstable();
        Ok(Found {
            files,
            withheld,
            binary_skipped: shared.binary.into_inner(),
            unreadable: shared.unreadable.into_inner(),
            stopped_early: shared.full.into_inner(),
        })
    }

    fn search_file(
        &self,
        (searcher, buffer): (&mut Searcher, &mut [u8]),
        runtime: &Runtime,
        found: &FoundFile<'_>,
        shared: &Shared,
        cancel: &CancellationToken,
    ) {
        let mut sink = Collector {
            mode: self.mode,
            lines: Vec::new(),
            matches: 0,
            bytes: 0,
            binary: false,
            cancel,
        };
        // Opened relative to its directory, no symlink followed; a file swapped for something
        // else than a regular file is not read, and a hard-linked one only when the call was
        // approved for it.
        let (file, len) = match found.open() {
            Ok(opened) if opened.regular => {
                if opened.links > 1 && !runtime.reads_linked_files() {
                    shared.withheld(found.path().to_path_buf());
                    return;
                }
                (opened.file, opened.len)
            }
            Ok(_) | Err(_) => {
                shared.unreadable.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let searched = match usize::try_from(len) {
            // Most files: read whole and searched as a slice (one `read` where the streaming
            // search makes three: the byte-order mark's, the content's and the end's).
            Ok(len) if len <= WHOLE_READ_BYTES => match read_whole(&file, &mut buffer[..=len]) {
                Ok(read) if read <= len => {
                    searcher.search_slice(&self.matcher, &buffer[..read], &mut sink)
                }
                // Grown since the `fstat`: the rest streamed after what was read.
                Ok(read) => searcher.search_reader(
                    &self.matcher,
                    std::io::Read::chain(&buffer[..read], &file),
                    &mut sink,
                ),
                Err(e) => Err(e),
            },
            _ => searcher.search_file(&self.matcher, &file, &mut sink),
        };
        match searched {
            Err(_) => {
                shared.unreadable.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) if sink.binary => {
                shared.binary.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) if sink.matches > 0 => {
                let total = shared.bytes.fetch_add(sink.bytes, Ordering::Relaxed) + sink.bytes;
                if total > MAX_COLLECTED_BYTES {
                    shared.full.store(true, Ordering::Relaxed);
                }
                let hits = FileHits {
                    path: found.path().to_path_buf(),
                    matches: sink.matches,
                    lines: sink.lines,
                };
                shared
                    .files
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(hits);
            }
            Ok(()) => {}
        }
    }
}

/// Reads a regular file into `buffer` (its size as the `fstat` saw it, plus one byte): the bytes
/// read. A regular file's `read` returns less than asked only at its end, so the file is read
/// once when it has not grown; a read that fills the buffer means it grew.
fn read_whole(mut file: &std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read as _;
    let expected = buffer.len() - 1;
    let mut read = 0;
    loop {
        match file.read(&mut buffer[read..]) {
            Ok(0) => return Ok(read),
            Ok(n) => {
                read += n;
                if read >= expected {
                    return Ok(read);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// What the walker threads share.
#[derive(Default)]
struct Shared {
    files: Mutex<Vec<FileHits>>,
    /// Files not searched because reading them needs the user's approval.
    withheld: Mutex<Vec<PathBuf>>,
    binary: AtomicUsize,
    unreadable: AtomicUsize,
    bytes: AtomicUsize,
    full: AtomicBool,
}

impl Shared {
    fn withheld(&self, path: PathBuf) {
        self.withheld
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(path);
    }
}

/// The result of a search.
struct Found {
    files: Vec<FileHits>,
    /// Files found but not searched: reading them would be asked (sorted).
    withheld: Vec<PathBuf>,
    binary_skipped: usize,
    unreadable: usize,
    stopped_early: bool,
}

/// The hits of one file.
struct FileHits {
    path: PathBuf,
    /// Matching lines.
    matches: u64,
    /// Matching and context lines (`content` mode only), in file order.
    lines: Vec<Line>,
}

enum Line {
    Match {
        number: u64,
        text: String,
    },
    Context {
        number: u64,
        text: String,
    },
    /// A gap between non-adjacent groups of lines.
    Break,
}

/// The sink of one file's search.
struct Collector<'a> {
    mode: OutputMode,
    lines: Vec<Line>,
    matches: u64,
    bytes: usize,
    binary: bool,
    cancel: &'a CancellationToken,
}

fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

impl Sink for Collector<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        match self.mode {
            OutputMode::FilesWithMatches => {
                self.matches = 1;
                return Ok(false);
            }
            OutputMode::Count => self.matches += found.lines().count() as u64,
            OutputMode::Content => {
                let first = found.line_number().unwrap_or(0);
                for (offset, line) in found.lines().enumerate() {
                    self.matches += 1;
                    self.bytes += line.len();
                    self.lines.push(Line::Match {
                        number: first + offset as u64,
                        text: line_text(line),
                    });
                }
            }
        }
        Ok(!self.cancel.is_cancelled())
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        if matches!(
            context.kind(),
            SinkContextKind::Before | SinkContextKind::After
        ) {
            self.bytes += context.bytes().len();
            self.lines.push(Line::Context {
                number: context.line_number().unwrap_or(0),
                text: line_text(context.bytes()),
            });
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        self.lines.push(Line::Break);
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, std::io::Error> {
        self.binary = true;
        self.lines.clear();
        self.matches = 0;
        Ok(false)
    }
}

/// Turns the hits into the model's text (capped, with a sidecar past the cap) and data.
async fn report(
    params: &GrepParams,
    found: Found,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let mode = params.output_mode.unwrap_or_default();
    let total_matches: u64 = found.files.iter().map(|f| f.matches).sum();
    let mut notes = Vec::new();
    let withheld = withheld_note(&found.withheld, ctx);
    if found.files.is_empty() {
        let mut text = "No matches found.".to_owned();
        if let Some(note) = &withheld {
            text.push_str(&format!("\n[{note}]"));
        }
        let mut output = ToolOutput::text(text).with("files", 0);
        if found.binary_skipped > 0 {
            output = output.with("binary_files_skipped", found.binary_skipped);
        }
        if !found.withheld.is_empty() {
            output = output.with("not_searched", found.withheld.len());
        }
        return Ok(output);
    }
    notes.extend(withheld);
    let limit = ctx.session.limits.grep_matches;
    let head_limit = params
        .head_limit
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(usize::MAX);
    let (text, output_path) = match mode {
        OutputMode::Content => {
            report_content(params, &found, ctx, (limit, head_limit), &mut notes).await?
        }
        OutputMode::FilesWithMatches | OutputMode::Count => {
            report_files(mode, &found, ctx, (limit, head_limit), &mut notes).await?
        }
    };
    if found.stopped_early {
        notes.push(format!(
            "the search stopped after collecting {} MiB of matches; narrow the pattern",
            MAX_COLLECTED_BYTES / (1024 * 1024)
        ));
    }
    let mut text = text;
    for note in notes {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[{note}]"));
    }
    let mut output = ToolOutput::text(text).with("files", found.files.len());
    if mode != OutputMode::FilesWithMatches {
        output = output.with("matches", total_matches);
    }
    if found.binary_skipped > 0 {
        output = output.with("binary_files_skipped", found.binary_skipped);
    }
    if found.unreadable > 0 {
        output = output.with("unreadable_files", found.unreadable);
    }
    if !found.withheld.is_empty() {
        output = output.with("not_searched", found.withheld.len());
    }
    output.output_path = output_path;
    Ok(output)
}

/// Content mode: the matching lines (and their context), the first `limit` shown, all of
/// them in a sidecar past it; then `head_limit` lines at most.
async fn report_content(
    params: &GrepParams,
    found: &Found,
    ctx: &ToolContext,
    (limit, head_limit): (usize, usize),
    notes: &mut Vec<String>,
) -> Result<(String, Option<PathBuf>), ToolError> {
    let total_matches: u64 = found.files.iter().map(|f| f.matches).sum();
    let line_numbers = params.line_numbers.unwrap_or(true);
    let context = params
        .context
        .or(params.before)
        .or(params.after)
        .unwrap_or(0)
        > 0;
    let render = |cap, cut| render_content(&found.files, ctx, line_numbers, context, cap, cut);
    let (mut head, shown) = render(limit, Some(MAX_LINE_BYTES));
    let mut output_path = None;
    if (shown as u64) < total_matches {
        let (full, _) = render(usize::MAX, None);
        output_path = Some(ctx.spill(ID, full.as_bytes()).await?);
        notes.push(format!(
            "showing the first {shown} of {total_matches} matching lines"
        ));
    }
    let line_count = head.lines().count();
    if head_limit < line_count {
        head = head
            .lines()
            .take(head_limit)
            .fold(String::new(), |mut acc, l| {
                acc.push_str(l);
                acc.push('\n');
                acc
            });
        notes.push(format!(
            "head_limit: showing {head_limit} of {line_count} lines"
        ));
    }
    Ok((head, output_path))
}

/// Files and count modes: one line per file (with its count), `head_limit` files at most, the
/// first `limit` shown and all of them in a sidecar past it.
async fn report_files(
    mode: OutputMode,
    found: &Found,
    ctx: &ToolContext,
    (limit, head_limit): (usize, usize),
    notes: &mut Vec<String>,
) -> Result<(String, Option<PathBuf>), ToolError> {
    let mut entries: Vec<String> = found
        .files
        .iter()
        .map(|file| {
            let shown = ctx.runtime.display_path(&file.path);
            if mode == OutputMode::Count {
                format!("{shown}:{}", file.matches)
            } else {
                shown
            }
        })
        .collect();
    let total = entries.len();
    if head_limit < total {
        entries.truncate(head_limit);
        notes.push(format!("head_limit: showing {head_limit} of {total} files"));
    }
    let (shown, output_path) = ctx.cap_entries(ID, entries, limit).await?;
    if output_path.is_some() {
        notes.push(format!(
            "showing the first {} of {total} files",
            shown.len()
        ));
    }
    Ok((shown.join("\n"), output_path))
}

/// Names listed in the note on files not searched.
const WITHHELD_NAMES: usize = 10;

/// The note on files the search found but did not read, because reading them needs approval.
fn withheld_note(withheld: &[PathBuf], ctx: &ToolContext) -> Option<String> {
    if withheld.is_empty() {
        return None;
    }
    let mut names: Vec<String> = withheld
        .iter()
        .take(WITHHELD_NAMES)
        .map(|path| ctx.runtime.display_path(path))
        .collect();
    if withheld.len() > WITHHELD_NAMES {
        names.push(format!("and {} more", withheld.len() - WITHHELD_NAMES));
    }
    Some(format!(
        "{} file(s) not searched because reading them needs the user's approval (secrets such \
         as .env files, keys, hard-linked files): {}. To search one, `read` it, which asks",
        withheld.len(),
        names.join(", ")
    ))
}

/// Renders `content` mode: `path:line:text` for matches, `path-line-text` for context, `--`
/// between groups. Stops before the match past `max_matches`; cuts lines at `cut` bytes.
/// Returns the text and the number of matching lines in it.
fn render_content(
    files: &[FileHits],
    ctx: &ToolContext,
    line_numbers: bool,
    context: bool,
    max_matches: usize,
    cut: Option<usize>,
) -> (String, usize) {
    let mut out = String::new();
    let mut shown = 0usize;
    for (index, file) in files.iter().enumerate() {
        let path = ctx.runtime.display_path(&file.path);
        if context && index > 0 {
            out.push_str("--\n");
        }
        for line in &file.lines {
            let (separator, number, text) = match line {
                Line::Break => {
                    out.push_str("--\n");
                    continue;
                }
                Line::Match { number, text } => {
                    if shown == max_matches {
                        return (out, shown);
                    }
                    shown += 1;
                    (':', number, text)
                }
                Line::Context { number, text } => ('-', number, text),
            };
            out.push_str(&path);
            out.push(separator);
            if line_numbers {
                out.push_str(&number.to_string());
                out.push(separator);
            }
            match cut {
                Some(max) if text.len() > max => {
                    let mut end = max;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    out.push_str(&text[..end]);
                    out.push_str(&format!(" [... line cut, {} more bytes]", text.len() - end));
                }
                _ => out.push_str(text),
            }
            out.push('\n');
        }
    }
    (out, shown)
}
