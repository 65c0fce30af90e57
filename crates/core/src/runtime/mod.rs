//! The runtime surface: the only way a tool reaches files, processes and the network.
//!
//! [`Runtime`] owns the session's compiled capability [`Scope`] and runs the check at this
//! boundary, on canonical paths ([`paths::resolve`]: symlinks followed, `..` applied). Everything
//! else in the workspace is barred from `std::fs`, `std::process` and raw HTTP clients by
//! `clippy.toml`'s `disallowed-methods`; this module (and its submodules) is the one place allowed
//! to use them.
//!
//! Front-ends plug in through two seams: a [`FileBackend`] (the editor's buffers, ACP
//! `fs/*_text_file`) and a [`TerminalBackend`] (the editor's terminal pane, ACP `terminal/*`).
//! Without them the runtime uses the disk and local processes.
//!
//! Outbound HTTP goes through [`Runtime::fetch`] (see [`net`]): scheme, scope and resolved-address
//! checks on every redirect hop, under the session's [`NetPolicy`] (private hosts refused unless
//! [`Runtime::with_net_policy`] allows them).

pub mod config_files;
pub mod net;
pub mod paths;
pub mod process;
pub mod sandbox;

pub use net::{FetchOptions, FetchResponse, NetPolicy};

use std::fmt::Debug;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::capability::{Access, CapabilityError, Refusal, RequirementSet, Scope, Vars};
use crate::tool::{FileStamp, ProgressSink, ToolError};

/// The editor's view of files. `None` from a method means "not handled here; use the disk".
pub trait FileBackend: Send + Sync + Debug {
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Option<Result<String, String>>>;
    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Option<Result<(), String>>>;
}

/// A shell command to run in the host's terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalRequest {
    /// The command as the model wrote it (for display).
    pub command: String,
    /// What the terminal runs: the sandbox helper wrapping `bash -c COMMAND`, or `bash` itself
    /// ([`Runtime::shell_invocation`]).
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Bytes of output the host keeps (the bash cap).
    pub output_limit: usize,
}

/// How a terminal run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalOutcome {
    pub terminal_id: String,
    pub output: String,
    /// The host dropped output from the start to stay under the limit.
    pub truncated: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub timed_out: bool,
}

/// The editor's terminal pane. The backend creates the terminal, reports its id through
/// `progress` ([`crate::tool::ToolProgress::Terminal`]), waits with the timeout, kills on timeout
/// or cancel, and returns the output. Releasing the terminal is the front-end's job, after its
/// final update for the call.
pub trait TerminalBackend: Send + Sync + Debug {
    fn run<'a>(
        &'a self,
        request: TerminalRequest,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalOutcome, ToolError>>;
}

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

#[derive(Debug)]
struct Inner {
    roots: Vec<PathBuf>,
    scope: Scope,
    scratch_dir: PathBuf,
    files: Option<Arc<dyn FileBackend>>,
    terminals: Option<Arc<dyn TerminalBackend>>,
    sandbox: sandbox::SandboxSpec,
    /// The network policy and its HTTP client ([`Runtime::with_net_policy`]).
    net: Arc<net::NetState>,
}

/// The capability-checked surface handed to every tool. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl Runtime {
    /// Canonicalises the roots, creates the scratch directory and compiles the scope.
    #[allow(
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
        Ok(Self {
            inner: Arc::new(Inner {
                roots,
                scope,
                scratch_dir,
                files: None,
                terminals: None,
                sandbox: config.sandbox.clone(),
                net: Arc::new(net::NetState::new(NetPolicy::default())),
            }),
        })
    }

    /// The same runtime with the editor's file and terminal backends plugged in.
    pub fn with_backends(
        &self,
        files: Option<Arc<dyn FileBackend>>,
        terminals: Option<Arc<dyn TerminalBackend>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                roots: self.inner.roots.clone(),
                scope: self.inner.scope.clone(),
                scratch_dir: self.inner.scratch_dir.clone(),
                files,
                terminals,
                sandbox: self.inner.sandbox.clone(),
                net: self.inner.net.clone(),
            }),
        }
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
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, ToolError> {
        if user_path.contains('\0') {
            return Err(ToolError::Failed("path contains a NUL byte".into()));
        }
        if self.inner.roots.is_empty() && !Path::new(user_path).is_absolute() {
            return Err(ToolError::Failed(format!(
                "relative path `{user_path}` but no workspace is open; use an absolute path"
            )));
        }
        let joined = paths::absolutize(self.root(), user_path);
        paths::resolve(&joined)
            .map_err(|e| ToolError::Failed(format!("cannot resolve {user_path}: {e}")))
    }

    /// Resolves a user-supplied path and checks it against the scope.
    pub fn resolve_checked(&self, user_path: &str, access: Access) -> Result<PathBuf, ToolError> {
        let canonical = self.resolve(user_path)?;
        self.check(&canonical, access)?;
        Ok(canonical)
    }

    /// The capability check for a canonical path.
    pub fn check(&self, canonical: &Path, access: Access) -> Result<(), Refusal> {
        self.inner.scope.check_path(canonical, access)
    }

    /// A path as a person reads it: relative to the workspace root that contains it, else as is.
    pub fn display_path(&self, path: &Path) -> String {
        for root in &self.inner.roots {
            if let Ok(rel) = path.strip_prefix(root) {
                let rel = rel.display().to_string();
                return if rel.is_empty() { ".".to_owned() } else { rel };
            }
        }
        path.display().to_string()
    }

    /// Metadata of a canonical, in-scope path (not following a final symlink: it was resolved).
    #[allow(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn metadata(&self, canonical: &Path) -> Result<std::fs::Metadata, ToolError> {
        self.check(canonical, Access::Read)?;
        tokio::fs::symlink_metadata(canonical)
            .await
            .map_err(|e| io_error(self, canonical, e))
    }

    /// What the disk says of a file now, for the read-before-write guard.
    #[allow(
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

    /// Reads a whole file from the disk after the scope check. The opened file is verified to be
    /// the checked one (a path swapped for a symlink between check and open is refused).
    #[allow(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn read(&self, canonical: &Path) -> Result<Vec<u8>, ToolError> {
        self.check(canonical, Access::Read)?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || -> Result<Vec<u8>, ToolError> {
            use std::io::Read as _;
            let mut file = std::fs::File::open(&path).map_err(|e| io_error(&runtime, &path, e))?;
            verify_open(&file, &path)?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| io_error(&runtime, &path, e))?;
            Ok(bytes)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("read task failed: {e}")))?
    }

    /// Reads a byte range of a file (for large files).
    #[allow(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn read_range(
        &self,
        canonical: &Path,
        start: u64,
        len: usize,
    ) -> Result<Vec<u8>, ToolError> {
        self.check(canonical, Access::Read)?;
        let path = canonical.to_path_buf();
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || -> Result<Vec<u8>, ToolError> {
            use std::io::{Read as _, Seek as _, SeekFrom};
            let mut file = std::fs::File::open(&path).map_err(|e| io_error(&runtime, &path, e))?;
            verify_open(&file, &path)?;
            file.seek(SeekFrom::Start(start))
                .map_err(|e| io_error(&runtime, &path, e))?;
            let mut bytes = Vec::with_capacity(len.min(1 << 24));
            file.take(len as u64)
                .read_to_end(&mut bytes)
                .map_err(|e| io_error(&runtime, &path, e))?;
            Ok(bytes)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("read task failed: {e}")))?
    }

    /// The editor's text of a file when the editor serves files (unsaved changes included);
    /// `None` when it does not, and the disk is the truth.
    pub async fn read_editor_text(&self, canonical: &Path) -> Option<Result<String, ToolError>> {
        if let Err(refusal) = self.check(canonical, Access::Read) {
            return Some(Err(refusal.into()));
        }
        let files = self.inner.files.as_ref()?;
        files.read_text(canonical).await.map(|r| {
            r.map_err(|e| {
                ToolError::Failed(format!(
                    "the editor could not read {}: {e}",
                    self.display_path(canonical)
                ))
            })
        })
    }

    /// Writes a whole file after the scope check: through the editor when it serves files and
    /// the content is text, otherwise atomically on the disk (temp file in the same directory,
    /// fsync, rename; the file's permissions are kept). Missing parent directories inside the
    /// scope are created.
    #[allow(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn write(&self, canonical: &Path, bytes: &[u8]) -> Result<(), ToolError> {
        self.check(canonical, Access::Write)?;
        if let (Some(files), Ok(text)) = (self.inner.files.as_ref(), std::str::from_utf8(bytes))
            && let Some(result) = files.write_text(canonical, text).await
        {
            return result.map_err(|e| {
                ToolError::Failed(format!(
                    "the editor could not write {}: {e}",
                    self.display_path(canonical)
                ))
            });
        }
        let path = canonical.to_path_buf();
        let bytes = bytes.to_vec();
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || -> Result<(), ToolError> {
            if let Some(parent) = path.parent() {
                if !parent.exists() {
                    runtime.check(parent, Access::Write)?;
                    std::fs::create_dir_all(parent).map_err(|e| io_error(&runtime, parent, e))?;
                }
                // The parent must still be where the check said (no symlink swapped in).
                let now =
                    std::fs::canonicalize(parent).map_err(|e| io_error(&runtime, parent, e))?;
                if now != parent {
                    return Err(ToolError::Failed(format!(
                        "{} changed while writing (now points to {}); not written",
                        parent.display(),
                        now.display()
                    )));
                }
            }
            atomic_write(&path, &bytes).map_err(|e| io_error(&runtime, &path, e))
        })
        .await
        .map_err(|e| ToolError::Failed(format!("write task failed: {e}")))?
    }

    /// Writes a file under the session's scratch directory (sidecar outputs).
    #[allow(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn write_scratch(&self, path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
        if !path.starts_with(&self.inner.scratch_dir) {
            return Err(ToolError::Failed(format!(
                "{} is not in the session's scratch directory",
                path.display()
            )));
        }
        let path = path.to_path_buf();
        let bytes = bytes.to_vec();
        tokio::task::spawn_blocking(move || atomic_write(&path, &bytes))
            .await
            .map_err(|e| ToolError::Failed(format!("write task failed: {e}")))?
            .map_err(|e| ToolError::Failed(format!("cannot write sidecar file: {e}")))
    }

    /// A directory walker rooted at a canonical, in-scope directory. It honours .gitignore,
    /// .ignore and hidden files, and never follows symlinks, so everything it yields is inside
    /// `base` (callers skip symlink entries).
    ///
    /// Inside a git repository, ignore files above the repository's root do not apply (as with
    /// git, ripgrep and fd); outside any repository, .gitignore files apply all the same.
    pub fn walker(&self, base: &Path) -> Result<ignore::WalkBuilder, ToolError> {
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

/// Removes a session's scratch directory (sidecars) when the session closes.
#[allow(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn remove_scratch(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = atomic_write_file::AtomicWriteFile::options().open(path)?;
    file.write_all(bytes)?;
    file.commit()
}

/// Checks that an open file is the path that was checked (Linux: through /proc/self/fd).
#[allow(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
fn verify_open(file: &std::fs::File, expected: &Path) -> Result<(), ToolError> {
    use std::os::fd::AsRawFd as _;
    let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    match std::fs::read_link(&link) {
        Ok(actual) if actual != expected => Err(ToolError::Failed(format!(
            "{} changed while it was being opened (it now points to {}); refused",
            expected.display(),
            actual.display()
        ))),
        _ => Ok(()),
    }
}

fn io_error(runtime: &Runtime, path: &Path, e: std::io::Error) -> ToolError {
    let shown = runtime.display_path(path);
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            ToolError::Failed(format!("{shown}: no such file or directory"))
        }
        std::io::ErrorKind::PermissionDenied => {
            ToolError::Failed(format!("{shown}: permission denied"))
        }
        std::io::ErrorKind::IsADirectory => ToolError::Failed(format!("{shown} is a directory")),
        _ => ToolError::Failed(format!("{shown}: {e}")),
    }
}
