//! The runtime surface: the only way a tool reaches files, processes and the network.
//!
//! [`Runtime`] owns the session's compiled capability [`Scope`] and runs the check at this
//! boundary, on canonical paths ([`paths::resolve`]: symlinks followed, `..` applied). Everything
//! else in the workspace is barred from `std::fs`, `std::process` and raw HTTP clients by
//! `clippy.toml`'s `disallowed-methods`; this module (and its submodules) is the one place allowed
//! to use them.
//!
//! File operations are race-free ([`fsat`]): the checked path is walked again without following
//! any symlink (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, else `O_NOFOLLOW` per
//! component), and writes rename a temporary file within the already-open parent directory. A
//! regular file with several hard links is read only by a call the user approved
//! ([`Runtime::allowing_linked_reads`]) and never written through the editor. Search tools ask
//! [`Runtime::search_access`] what they may do with each file they find ([`SearchGate`]).
//!
//! Front-ends plug in through two seams: a [`FileBackend`] (the editor's buffers, ACP
//! `fs/*_text_file`) and a [`TerminalBackend`] (the editor's terminal pane, ACP `terminal/*`).
//! Without them the runtime uses the disk and local processes.
//!
//! Outbound HTTP goes through [`Runtime::fetch`] (see [`net`]): scheme, scope and resolved-address
//! checks on every redirect hop, under the session's [`NetPolicy`] (private hosts refused unless
//! [`Runtime::with_net_policy`] allows them).

mod backends;
pub mod config_files;
mod error;
pub mod fsat;
mod handed_over;
mod io;
pub mod jobs;
pub mod mcp;
pub mod net;
pub mod paths;
pub mod probe;
pub mod process;
pub mod protected;
pub mod sandbox;
pub mod scratch;
pub mod secrets;
pub mod store_files;
pub mod tally;
pub mod walk;

pub use backends::{
    FileBackend, TerminalBackend, TerminalExit, TerminalOutcome, TerminalRequest, TerminalSnapshot,
};
pub use error::{AccessError, FileError};
use handed_over::{HandedOver, same_handed_over};
pub use io::remove_scratch;
use io::{atomic_write, io_error, io_message, write_error, write_whole_unsynced};
pub use net::{FetchOptions, FetchResponse, NetPolicy};

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::capability::{Access, CapabilityError, Refusal, RequirementSet, Scope, Vars};
use crate::contract::FileStamp;

/// How to build a [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Workspace roots; the first is the primary one (relative paths resolve against it).
    pub roots: Vec<PathBuf>,
    /// The effective requirement set (manifest ∪ every tool's).
    pub requirements: RequirementSet,
    pub ad_hoc: Vec<PathBuf>,
    pub user_data: Option<PathBuf>,
    /// The session's scratch directory (created if missing).
    pub scratch_dir: PathBuf,
    /// How shell commands are confined ([`sandbox`]).
    pub sandbox: sandbox::SandboxSpec,
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("workspace root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("scratch directory {path}: {source}")]
    Scratch {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Capability(#[from] CapabilityError),
}

/// What a runtime and the runtimes derived from it share; a `with_*` copy changes a field.
#[derive(Debug, Clone)]
struct Inner {
    roots: Vec<PathBuf>,
    scope: Scope,
    scratch_dir: PathBuf,
    files: Option<Arc<dyn FileBackend>>,
    terminals: Option<Arc<dyn TerminalBackend>>,
    sandbox: sandbox::SandboxSpec,
    /// The network policy and its HTTP client ([`Runtime::with_net_policy`]).
    net: Arc<net::NetState>,
    /// Keel's own state: refused to every write ([`protected::Protected`]).
    protected: protected::Protected,
    /// The sandbox's filtering proxy (started on first use; [`Runtime::with_host_gate`]).
    proxy: Arc<sandbox::proxy::ProxyState>,
    /// The workspace's credential files, for commands nobody approved (built on first use).
    credentials: Option<Arc<sandbox::CredentialIndex>>,
    /// Where commands' status files go (made on first use; [`sandbox::StatusDir`]).
    status_dir: Arc<sandbox::StatusDir>,
    /// The credential masks as Landlock rulesets, for the fallback ([`sandbox::mask`]).
    masks: Arc<sandbox::mask::MaskRulesets>,
    /// The same masks offered to helpers the editor's terminal starts ([`sandbox::mask_server`]).
    mask_server: Arc<sandbox::mask_server::MaskServer>,
    /// The session's namespace keeper (started on first use; [`sandbox::keeper`]).
    keeper: Arc<sandbox::keeper::Keeper>,
    /// The fallback's warm holder of contained commands ([`sandbox::zygote`]).
    zygotes: Arc<sandbox::zygote::Zygotes>,
}

/// The capability-checked surface handed to every tool. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
    /// Reading a regular file with more than one hard link is allowed: the user approved this
    /// call knowing it ([`Runtime::allowing_linked_reads`]).
    linked_reads: bool,
    /// The permission policy's view of files a search finds ([`Runtime::with_search_gate`]).
    search_gate: Option<Arc<dyn SearchGate>>,
    /// Shell commands run without the kernel sandbox: the user approved this call's escalation
    /// ([`Runtime::allowing_unconfined`]).
    unconfined: bool,
    /// Shell commands run with the workspace read-only (the session's mode is `read-only`
    /// now; [`Runtime::with_read_only_commands`]).
    read_only_commands: bool,
    /// Shell commands run contained: nobody approved them ([`Runtime::contained`]).
    contained: bool,
    /// For contained commands: the command as written and the script that runs for it.
    rendering: Option<Arc<(String, String)>>,
}

/// What a search tool (grep, glob) may do with a file its walk found (not the path the call
/// named, which the policy decided before the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchAccess {
    /// Read the content: reading it would be allowed without a prompt.
    Read,
    /// Show the name only: reading it would be asked (a `.env` file, a hard-linked file).
    NameOnly,
    /// Leave it out: reading it is denied.
    Hidden,
}

/// Identifies the shared state of a runtime ([`Runtime::paths_of`]): its address stays taken
/// while this lives.
#[derive(Debug, Clone)]
pub(crate) struct PathsOf(std::sync::Weak<Inner>);

/// Decides [`SearchAccess`] for a canonical path, as the permission policy would decide a read
/// of it by the same tool, on the name alone: hard links are the search's to check, on the
/// descriptor it reads. The engine installs one per call; without one every file in the scope
/// is readable.
pub trait SearchGate: Send + Sync + Debug {
    /// Asked by [`Runtime::search_access`] of paths its scope check admitted (a gate need not
    /// check the scope again).
    fn access(&self, runtime: &Runtime, canonical: &Path) -> SearchAccess;
}

/// The session's index of the workspace's credential files and guarded entries, when the
/// sandbox has rules for either.
fn credential_index(
    spec: &sandbox::SandboxSpec,
    roots: &[PathBuf],
) -> Option<Arc<sandbox::CredentialIndex>> {
    if spec.credentials.is_none() && spec.guards.is_none() {
        return None;
    }
    let classify: sandbox::Classify = match &spec.credentials {
        Some(rules) => rules.0.clone(),
        None => Arc::new(|_: &Path, _: &std::fs::Metadata| false),
    };
    Some(Arc::new(
        sandbox::CredentialIndex::new(roots.to_vec(), classify).with_guard(spec.guards.clone()),
    ))
}

impl Runtime {
    /// [`HandedOver`] of `canonical` now (on a blocking thread).
    async fn handed_over(&self, canonical: &Path, times: bool) -> std::io::Result<HandedOver> {
        let path = canonical.to_path_buf();
        let roots = self.inner.roots.clone();
        tokio::task::spawn_blocking(move || HandedOver::of(&path, &roots, times))
            .await
            .map_err(std::io::Error::other)?
    }

    /// Canonicalises the roots, creates the scratch directory and compiles the scope.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let mut roots = Vec::new();
        for root in &config.roots {
            let canonical = std::fs::canonicalize(root).map_err(|source| RuntimeError::Root {
                path: root.clone(),
                source,
            })?;
            if !roots.contains(&canonical) {
                roots.push(canonical);
            }
        }
        std::fs::create_dir_all(&config.scratch_dir).map_err(|source| RuntimeError::Scratch {
            path: config.scratch_dir.clone(),
            source,
        })?;
        let scratch_dir =
            std::fs::canonicalize(&config.scratch_dir).map_err(|source| RuntimeError::Scratch {
                path: config.scratch_dir.clone(),
                source,
            })?;
        let vars = Vars {
            workspace: roots.clone(),
            ad_hoc: config.ad_hoc.clone(),
            user_data: config.user_data.clone(),
            session: Some(scratch_dir.clone()),
        };
        let scope = Scope::compile(&config.requirements, &vars)?;
        let protected = protected::Protected::for_roots(&roots, config.user_data.as_deref());
        Ok(Self {
            inner: Arc::new(Inner {
                protected,
                scope,
                scratch_dir,
                files: None,
                terminals: None,
                sandbox: config.sandbox.clone(),
                net: Arc::new(net::NetState::new(NetPolicy::default())),
                proxy: Arc::new(sandbox::proxy::ProxyState::default()),
                credentials: credential_index(&config.sandbox, &roots),
                status_dir: Arc::default(),
                masks: Arc::default(),
                mask_server: Arc::default(),
                keeper: Arc::default(),
                zygotes: Arc::default(),
                roots,
            }),
            linked_reads: false,
            search_gate: None,
            unconfined: false,
            read_only_commands: false,
            contained: false,
            rendering: None,
        })
    }

    /// The same runtime with the editor's file and terminal backends plugged in.
    pub fn with_backends(
        &self,
        files: Option<Arc<dyn FileBackend>>,
        terminals: Option<Arc<dyn TerminalBackend>>,
    ) -> Self {
        self.derive(|inner| {
            inner.files = files;
            inner.terminals = terminals;
        })
    }

    /// The same runtime with more directories no tool may write (the user's configuration
    /// directory, the trust store's).
    pub fn with_protected(&self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.derive(|inner| inner.protected.extend(dirs))
    }

    /// The same runtime with `change` made to a copy of the shared state.
    fn derive(&self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner::clone(&self.inner);
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
            ..self.clone()
        }
    }

    /// The same runtime with a search gate: what grep and glob may do with the files they find.
    pub fn with_search_gate(&self, gate: Arc<dyn SearchGate>) -> Self {
        Self {
            search_gate: Some(gate),
            ..self.clone()
        }
    }

    /// What a search may do with a file it found: [`SearchAccess::Hidden`] outside the read
    /// scope ([`Runtime::check`]), else the gate's answer, [`SearchAccess::Read`] when no gate
    /// is installed.
    pub fn search_access(&self, canonical: &Path) -> SearchAccess {
        if self.check(canonical, Access::Read).is_err() {
            return SearchAccess::Hidden;
        }
        match &self.search_gate {
            Some(gate) => gate.access(self, canonical),
            None => SearchAccess::Read,
        }
    }

    /// Whether `other` checks and spells paths as this runtime does: the same roots, scope,
    /// scratch directory (the same shared state).
    pub(crate) fn same_paths(&self, other: &PathsOf) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.inner), other.0.as_ptr())
    }

    /// What [`Runtime::same_paths`] compares with (holding no runtime alive).
    pub(crate) fn paths_of(&self) -> PathsOf {
        PathsOf(Arc::downgrade(&self.inner))
    }

    /// The same runtime, allowed to read regular files that have several hard links. The
    /// engine hands it to a call the user approved after being told of the links.
    pub fn allowing_linked_reads(&self) -> Self {
        Self {
            linked_reads: true,
            ..self.clone()
        }
    }

    /// The same runtime, running shell commands without the kernel sandbox. The engine hands it
    /// only to a call whose escalation the user approved ("Allow once without the sandbox", or
    /// the same remembered for its approval keys).
    pub fn allowing_unconfined(&self) -> Self {
        Self {
            unconfined: true,
            ..self.clone()
        }
    }

    /// Whether this runtime reads regular files with several hard links
    /// ([`Runtime::allowing_linked_reads`]).
    pub fn reads_linked_files(&self) -> bool {
        self.linked_reads
    }

    /// Whether shell commands of this call run without the sandbox (an approved escalation).
    pub fn unconfined(&self) -> bool {
        self.unconfined
    }

    /// The same runtime, running shell commands with the workspace and home read-only: the
    /// session's mode is `read-only`, whatever it was when the session opened.
    pub fn with_read_only_commands(&self) -> Self {
        Self {
            read_only_commands: true,
            ..self.clone()
        }
    }

    /// The same runtime, running shell commands contained: the policy allowed this call by
    /// its own classification alone (no answer, rule or mode of the user's names it). Its
    /// commands run read-only, offline, with the workspace's credential files masked, so
    /// whatever the classification missed costs nothing.
    /// `command` runs as `script`, Keel's rendering of what it analysed
    /// ([`crate::policy::shell::render`]); no other command runs through this runtime.
    pub fn contained(&self, command: &str, script: &str) -> Self {
        Self {
            contained: true,
            rendering: Some(Arc::new((command.to_owned(), script.to_owned()))),
            ..self.clone()
        }
    }

    /// Starts listing the workspace's credential files now (a walk, then inotify), so the
    /// first contained command does not wait for it. Blocking: call from a blocking thread.
    pub fn warm_credentials(&self) {
        if let Some(index) = &self.inner.credentials {
            let _ = index.current();
        }
    }

    /// The number of hard links of the regular file at a canonical path, reached without
    /// following any symlink; `None` when it is not a regular file or cannot be reached.
    pub fn link_count(&self, canonical: &Path) -> Option<u64> {
        use std::os::unix::fs::MetadataExt as _;
        fsat::metadata(canonical)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|meta| meta.nlink())
    }

    /// Opens a regular file for reading after the scope check: reached without following any
    /// symlink (so one swapped in after the check is refused), and refused when it has several
    /// hard links unless this runtime allows linked reads. Blocking.
    pub fn open_read(&self, canonical: &Path) -> Result<std::fs::File, FileError> {
        use std::os::unix::fs::MetadataExt as _;
        self.check(canonical, Access::Read)?;
        let shown = || self.display_path(canonical);
        let (file, meta) = fsat::open_read(canonical).map_err(|e| {
            if fsat::is_swap(&e) {
                FileError::Changed { shown: shown() }
            } else {
                FileError::Io {
                    message: io_message(self, canonical, &e),
                    source: Some(e),
                }
            }
        })?;
        if meta.is_dir() {
            return Err(FileError::Io {
                message: format!("{} is a directory", shown()),
                source: None,
            });
        }
        if !meta.is_file() {
            return Err(FileError::NotAFile { shown: shown() });
        }
        if meta.nlink() > 1 && !self.linked_reads {
            return Err(FileError::HardLinked {
                shown: shown(),
                links: meta.nlink(),
            });
        }
        Ok(file)
    }
    /// The primary workspace root (canonical). Empty when no workspace is open.
    pub fn root(&self) -> &Path {
        self.inner
            .roots
            .first()
            .map(PathBuf::as_path)
            .unwrap_or(Path::new(""))
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.inner.roots
    }

    pub fn scope(&self) -> &Scope {
        &self.inner.scope
    }

    pub fn scratch_dir(&self) -> &Path {
        &self.inner.scratch_dir
    }

    pub fn terminals(&self) -> Option<&Arc<dyn TerminalBackend>> {
        self.inner.terminals.as_ref()
    }

    /// Where a user-supplied path (absolute, or relative to the primary root) finally points.
    /// Does not check the scope.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, AccessError> {
        tally::count(tally::Event::Resolve);
        if user_path.contains('\0') {
            return Err(AccessError::BadArgument("path contains a NUL byte".into()));
        }
        if self.inner.roots.is_empty() && !Path::new(user_path).is_absolute() {
            return Err(AccessError::BadArgument(format!(
                "relative path `{user_path}` but no workspace is open; use an absolute path"
            )));
        }
        let joined = paths::absolutize(self.root(), user_path);
        paths::resolve(&joined)
            .map_err(|e| AccessError::io(format!("cannot resolve {user_path}: {e}"), e))
    }

    /// Resolves a user-supplied path and checks it against the scope.
    pub fn resolve_checked(&self, user_path: &str, access: Access) -> Result<PathBuf, AccessError> {
        let canonical = self.resolve(user_path)?;
        self.check(&canonical, access)?;
        Ok(canonical)
    }

    /// A call's subject for `access`: the path the engine already resolved (checked again, which
    /// costs no disk access), or `user_path` resolved and checked when there is none (the call
    /// runs outside the engine: the command line, tests).
    pub fn subject_or_resolve(
        &self,
        subject: Option<&Path>,
        user_path: &str,
        access: Access,
    ) -> Result<PathBuf, AccessError> {
        match subject {
            Some(canonical) => {
                self.check(canonical, access)?;
                Ok(canonical.to_path_buf())
            }
            None => self.resolve_checked(user_path, access),
        }
    }

    /// The capability check for a canonical path.
    pub fn check(&self, canonical: &Path, access: Access) -> Result<(), Refusal> {
        self.inner.scope.check_path(canonical, access)?;
        if access == Access::Write {
            self.inner.protected.check_write(canonical)?;
        }
        Ok(())
    }

    /// A path as a person reads it: relative to the workspace root that contains it, else as is.
    pub fn display_path(&self, path: &Path) -> String {
        for root in &self.inner.roots {
            if let Ok(rel) = path.strip_prefix(root) {
                let rel = rel
                    .to_str()
                    .map_or_else(|| rel.to_string_lossy().into_owned(), str::to_owned);
                return if rel.is_empty() { ".".to_owned() } else { rel };
            }
        }
        path.to_str()
            .map_or_else(|| path.to_string_lossy().into_owned(), str::to_owned)
    }

    /// Metadata of a canonical, in-scope path (not following a final symlink: it was resolved).
    pub async fn metadata(&self, canonical: &Path) -> Result<std::fs::Metadata, AccessError> {
        self.check(canonical, Access::Read)?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || {
            fsat::metadata(&path).map_err(|e| io_error(&runtime, &path, e))
        })
        .await
        .map_err(|e| AccessError::internal("reading a file's metadata (the task failed)", e))?
    }

    /// What the disk says of a file now, for the read-before-write guard.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn stamp(&self, canonical: &Path) -> Option<FileStamp> {
        let meta = tokio::fs::metadata(canonical).await.ok()?;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
        })
    }

    /// Reads a whole file from the disk after the scope check, through [`Runtime::open_read`]
    /// (no symlink followed, hard links refused unless allowed).
    pub async fn read(&self, canonical: &Path) -> Result<Vec<u8>, AccessError> {
        self.check(canonical, Access::Read)?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, AccessError> {
            use std::io::Read as _;
            let mut file = runtime.open_read(&path)?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| io_error(&runtime, &path, e))?;
            Ok(bytes)
        })
        .await
        .map_err(|e| AccessError::internal("reading a file (the task failed)", e))??;
        tally::count(tally::Event::Read);
        Ok(bytes)
    }

    /// Reads a byte range of a file (for large files), opened as [`Runtime::read`] opens it.
    pub async fn read_range(
        &self,
        canonical: &Path,
        start: u64,
        len: usize,
    ) -> Result<Vec<u8>, AccessError> {
        self.check(canonical, Access::Read)?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, AccessError> {
            use std::io::{Read as _, Seek as _, SeekFrom};
            let mut file = runtime.open_read(&path)?;
            file.seek(SeekFrom::Start(start))
                .map_err(|e| io_error(&runtime, &path, e))?;
            let mut bytes = Vec::with_capacity(len.min(1 << 24));
            file.take(len as u64)
                .read_to_end(&mut bytes)
                .map_err(|e| io_error(&runtime, &path, e))?;
            Ok(bytes)
        })
        .await
        .map_err(|e| AccessError::internal("reading a file (the task failed)", e))??;
        tally::count(tally::Event::Read);
        Ok(bytes)
    }

    /// The editor's text of a file when the editor serves files (unsaved changes included);
    /// `None` when it does not, and the disk is the truth.
    /// The disk's file must pass the same checks as for [`Runtime::read`] first (no symlink
    /// swapped onto the path, no unapproved hard links), since the editor reads the path too.
    pub async fn read_editor_text(&self, canonical: &Path) -> Option<Result<String, AccessError>> {
        if let Err(refusal) = self.check(canonical, Access::Read) {
            return Some(Err(refusal.into()));
        }
        let files = self.inner.files.as_ref()?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        let opened = tokio::task::spawn_blocking(move || runtime.open_read(&path).map(drop)).await;
        match opened {
            Ok(Ok(())) => {}
            // A buffer the editor has not saved yet: the editor alone knows it.
            Ok(Err(FileError::Io { .. })) if self.link_count(canonical).is_none() => {}
            Ok(Err(error)) => return Some(Err(error.into())),
            Err(e) => {
                return Some(Err(AccessError::internal(
                    "opening a file (the task failed)",
                    e,
                )));
            }
        }
        // What the editor is handed is what was checked: the same file (device, inode) and the
        // same directories, reached without a symlink, before and after its read. Otherwise a
        // process swapping a symlink in between could have the editor read any file.
        let before = self.handed_over(canonical, true).await;
        let text = files.read_text(canonical).await;
        let after = self.handed_over(canonical, true).await;
        if let Err(error) = same_handed_over(self, canonical, before, after, "read") {
            return Some(Err(error));
        }
        if matches!(text, Some(Ok(_))) {
            tally::count(tally::Event::Read);
        }
        text.map(|r| {
            r.map_err(|e| AccessError::External {
                message: format!(
                    "the editor could not read {}: {e}",
                    self.display_path(canonical)
                ),
                source: None,
            })
        })
    }

    /// Writes a whole file after the scope check: through the editor when it serves files, the
    /// content is text and the file is not hard-linked (a linked file is replaced on the disk,
    /// never written through); otherwise atomically on the disk ([`fsat::replace_in`]: a
    /// temporary file in the already-open parent directory, fsync, `renameat` in that
    /// directory; the file's permissions are kept). Missing parent directories inside the scope
    /// are created one by one, each checked. A symlink swapped onto the path after the check
    /// makes the write fail; it never lands elsewhere.
    pub async fn write(&self, canonical: &Path, bytes: &[u8]) -> Result<(), AccessError> {
        let written = self.write_file(canonical, bytes).await;
        if written.is_ok() {
            self.keel_wrote(canonical).await;
        }
        written
    }

    /// What Keel itself wrote is the state the sandbox's guard keeps while commands that may
    /// write the workspace run ([`sandbox::guard::GuardLedger`]).
    async fn keel_wrote(&self, canonical: &Path) {
        if let Some(index) = self.inner.credentials.clone() {
            let path = canonical.to_path_buf();
            let _ = tokio::task::spawn_blocking(move || index.keel_wrote(&path)).await;
        }
    }

    async fn write_file(&self, canonical: &Path, bytes: &[u8]) -> Result<(), AccessError> {
        use std::os::unix::fs::MetadataExt as _;
        self.check(canonical, Access::Write)?;
        if let (Some(files), Ok(text)) = (self.inner.files.as_ref(), std::str::from_utf8(bytes)) {
            let path = canonical.to_path_buf();
            let target = tokio::task::spawn_blocking(move || fsat::metadata(&path))
                .await
                .map_err(|e| AccessError::internal("writing a file (the task failed)", e))?;
            // The editor resolves the path again and follows symlinks; while a background
            // command runs, a process exists that could swap one in between the check and the
            // editor's write (which nothing could undo), so Keel writes the disk itself.
            let editor_may_write = match &target {
                Ok(meta) => meta.is_file() && meta.nlink() == 1,
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            } && !jobs::any_running_in(&self.inner.roots);
            let before = self.handed_over(canonical, false).await;
            if editor_may_write && let Some(result) = files.write_text(canonical, text).await {
                // The editor may replace the file (a new inode): its directories must be the
                // ones checked, and no symlink may stand on the path now.
                let after = self.handed_over(canonical, false).await;
                same_handed_over(self, canonical, before, after, "wrote")?;
                return result.map_err(|e| AccessError::External {
                    message: format!(
                        "the editor could not write {}: {e}",
                        self.display_path(canonical)
                    ),
                    source: None,
                });
            }
        }
        let path = canonical.to_path_buf();
        let bytes = bytes.to_vec();
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || -> Result<(), AccessError> {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(AccessError::BadArgument(format!(
                    "{} is not a file path",
                    path.display()
                )));
            };
            let refused = std::sync::Mutex::new(None);
            let allow = |dir: &Path| -> std::io::Result<()> {
                runtime.check(dir, Access::Write).map_err(|refusal| {
                    let reason = refusal.reason.clone();
                    if let Ok(mut slot) = refused.lock() {
                        *slot = Some(refusal);
                    }
                    std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason)
                })
            };
            let dir = fsat::open_dir_creating(parent, &allow).map_err(|e| {
                match refused.lock().ok().and_then(|mut slot| slot.take()) {
                    Some(refusal) => AccessError::Refused(refusal),
                    None => write_error(&runtime, &path, e),
                }
            })?;
            fsat::replace_in(&dir, name, &bytes).map_err(|e| write_error(&runtime, &path, e))
        })
        .await
        .map_err(|e| AccessError::internal("writing a file (the task failed)", e))?
    }

    /// Deletes a file after the scope check (write access), on the disk: unlinked inside its
    /// parent directory reached without following a symlink ([`fsat::remove_file`]); a
    /// directory is refused.
    pub async fn remove(&self, canonical: &Path) -> Result<(), AccessError> {
        self.check(canonical, Access::Write)?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        let removed = tokio::task::spawn_blocking(move || {
            fsat::remove_file(&path).map_err(|e| write_error(&runtime, &path, e))
        })
        .await
        .map_err(|e| AccessError::internal("deleting a file (the task failed)", e))?;
        if removed.is_ok() {
            self.keel_wrote(canonical).await;
        }
        removed
    }

    /// Writes a file under the session's scratch directory (sidecar outputs).
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn write_scratch(&self, path: &Path, bytes: &[u8]) -> Result<(), AccessError> {
        if !path.starts_with(&self.inner.scratch_dir) {
            return Err(AccessError::invariant(
                "writing a sidecar file",
                format!(
                    "{} is not in the session's scratch directory",
                    path.display()
                ),
            ));
        }
        let path = path.to_path_buf();
        let bytes = bytes.to_vec();
        // A subagent's sidecars go to its own directory under the parent's.
        tokio::task::spawn_blocking(move || {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            write_whole_unsynced(&path, &bytes)
        })
        .await
        .map_err(|e| AccessError::internal("writing a sidecar file (the task failed)", e))?
        .map_err(|e| AccessError::internal("writing a sidecar file", e))
    }

    /// Walks a canonical, in-scope directory (or one file) for a search, calling a visitor
    /// (one per thread, built by `visitor`) for each regular file the ignore rules and
    /// `filters` keep ([`walk`]: directory descriptors all the way down, no symlink followed,
    /// one open and one stat per file the visitor opens). Blocking.
    pub fn walk_files<F, V>(
        &self,
        base: &Path,
        filters: &walk::Filters,
        visitor: F,
    ) -> Result<walk::WalkErrors, AccessError>
    where
        F: Fn() -> V + Sync,
        V: FnMut(&walk::FoundFile<'_>) -> walk::Flow,
    {
        self.check(base, Access::Read)?;
        walk::walk(base, filters, visitor).map_err(|e| io_error(self, base, e))
    }

    /// A directory walker rooted at a canonical, in-scope directory. It honours .gitignore,
    /// .ignore and hidden files, and never follows symlinks, so everything it yields is inside
    /// `base` (callers skip symlink entries).
    ///
    /// Inside a git repository, ignore files above the repository's root do not apply (as with
    /// git, ripgrep and fd); outside any repository, .gitignore files apply all the same.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub fn walker(&self, base: &Path) -> Result<ignore::WalkBuilder, AccessError> {
        self.check(base, Access::Read)?;
        let in_repository = base.ancestors().any(|dir| dir.join(".git").exists());
        let mut builder = ignore::WalkBuilder::new(base);
        builder
            .follow_links(false)
            .hidden(true)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(true)
            .require_git(in_repository)
            .parents(true);
        Ok(builder)
    }
}
