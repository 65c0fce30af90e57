//! The helper's failures. Each keeps what the kernel said (an [`Errno`], an [`std::io::Error`], a
//! Landlock or seccomp error) as its source; the helper prints the whole chain on its standard
//! error (`keel sandbox: ...`) and exits with [`crate::EXIT_HELPER_FAILED`], and Keel shows that
//! line to the model and the user as it is.

use std::path::PathBuf;
use std::sync::Arc;

use nix::errno::Errno;

/// Why the helper cannot confine or run a program. Nothing of the program ran.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line does not start with a stage.
    #[error("expected `run`")]
    NoStage,
    /// A stage this helper does not know.
    #[error("unknown stage `{0}`")]
    UnknownStage(String),
    /// The command line ends before `--`.
    #[error("expected `-- PROGRAM ARGS...`")]
    NoSeparator,
    /// An argument before `--` the helper does not know.
    #[error("unexpected argument {0}")]
    UnexpectedArgument(String),
    /// Nothing after `--`.
    #[error("no program to run")]
    NoProgram,
    /// Neither `--profile FILE` nor [`crate::PROFILE_ENV`].
    #[error("missing --profile FILE (or {})", crate::PROFILE_ENV)]
    NoProfile,
    /// [`crate::PROFILE_ENV`] is set but is not UTF-8 (so it is no JSON profile).
    #[error("bad profile in {}: not UTF-8", crate::PROFILE_ENV)]
    ProfileNotUnicode,
    /// `--profile FILE` cannot be read.
    #[error("cannot read the profile {}: {source}", path.display())]
    ReadProfile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The profile is not one this helper can read (`origin`: `in KEEL_SANDBOX_PROFILE`, or the
    /// file's path).
    #[error("bad profile {origin}: {source}")]
    BadProfile {
        origin: String,
        source: serde_json::Error,
    },
    /// The profile was written by another build ([`crate::profile::HELPER_BUILD`]).
    #[error(
        "the profile comes from another build of Keel ({profile}) than this helper ({helper}): \
         `keel` and `keel-sandbox` come from different builds; install or build them together \
         (`cargo install --path crates/acp`, `cargo build`)"
    )]
    OtherBuild {
        /// The profile's build (`an older one` when it has none).
        profile: String,
        helper: &'static str,
    },
    /// Whoever started the helper exited before it ran (it would outlive them).
    #[error("the process that started the sandbox helper is gone")]
    Orphaned,
    /// No mechanism could confine the program, and the profile requires one (`notes`: why
    /// each one could not, as the status line lists them).
    #[error("refusing to run unconfined ([sandbox] mode = \"required\"): {}", notes.join("; "))]
    Required { notes: Vec<String> },
    /// The status file cannot be opened (before confinement, which may hide it).
    #[error("cannot open the status file: {0}")]
    OpenStatus(#[source] std::io::Error),
    /// The status line cannot be written.
    #[error("cannot write the status file: {0}")]
    WriteStatus(#[source] std::io::Error),
    /// The status line cannot be serialized.
    #[error("the status line: {0}")]
    StatusJson(#[source] serde_json::Error),
    /// A file system call while building the sandbox (`what`: the path or the step).
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// A system call while building the sandbox (`what`: the step).
    #[error("{what}: {source}")]
    Sys { what: String, source: Errno },
    /// `/proc/self/mountinfo` cannot be read (shared: the table is read once).
    #[error("reading /proc/self/mountinfo: {0}")]
    MountInfo(#[source] Arc<std::io::Error>),
    /// This kernel has no Landlock.
    #[error("Landlock is not supported")]
    NoLandlock,
    /// Landlock refused a rule or the ruleset.
    #[error(transparent)]
    Landlock(#[from] landlock::RulesetError),
    /// The seccomp filter cannot be built.
    #[error("seccomp: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
    /// The fallback's confinement cannot be applied to this process.
    #[error("{0}")]
    Apply(#[source] std::io::Error),
    /// Namespaces failed after the point where the fallback is the only way left, and the
    /// profile forbids it (`mechanism = "namespaces"`) or it failed too (`fallback`, shown
    /// after `why`).
    #[error("cannot confine: {why}{}", fallback.as_ref().map(|e| format!("; {e}")).unwrap_or_default())]
    CannotConfine {
        #[source]
        why: NamespaceFailure,
        fallback: Option<Box<Error>>,
    },
    /// The program cannot be executed.
    #[error("cannot run {program}: {source}")]
    Exec {
        program: String,
        source: std::io::Error,
    },
}

/// Why namespaces failed once stage 1 had entered them (the fallback then confines stage 1
/// itself, since no more children can be started there).
#[derive(Debug, thiserror::Error)]
pub enum NamespaceFailure {
    /// The PID namespace could not be made.
    #[error("PID namespace: {0}")]
    PidNamespace(#[source] Errno),
    /// Stage 2 exited without confirming (it said why on its own standard error).
    #[error("namespace set-up failed")]
    SetUp,
}

impl Error {
    /// A failed file system call on `path`.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            what: path.display().to_string(),
            source,
        }
    }

    /// A failed file system call in step `what`.
    pub(crate) fn io_in(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// A failed system call in step `what`.
    pub(crate) fn sys(what: impl Into<String>, source: Errno) -> Error {
        Error::Sys {
            what: what.into(),
            source,
        }
    }
}

/// The helper's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::Error;

    #[test]
    fn an_os_error_stays_the_source() {
        let error = Error::sys("unshare", nix::errno::Errno::EPERM);
        assert_eq!(error.to_string(), "unshare: EPERM: Operation not permitted");
        let source = error.source().unwrap();
        assert_eq!(
            source.downcast_ref::<nix::errno::Errno>(),
            Some(&nix::errno::Errno::EPERM)
        );

        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let error = Error::io(std::path::Path::new("/x"), io);
        let source = error.source().unwrap().downcast_ref::<std::io::Error>();
        assert_eq!(
            source.and_then(std::io::Error::raw_os_error),
            Some(libc::ENOENT)
        );
    }

    #[test]
    fn a_namespace_failure_keeps_its_errno_and_names_the_fallbacks_failure() {
        let error = Error::CannotConfine {
            why: super::NamespaceFailure::PidNamespace(nix::errno::Errno::EPERM),
            fallback: Some(Box::new(Error::NoLandlock)),
        };
        assert_eq!(
            error.to_string(),
            "cannot confine: PID namespace: EPERM: Operation not permitted; Landlock is not \
             supported"
        );
        let why = error.source().unwrap();
        assert_eq!(
            why.to_string(),
            "PID namespace: EPERM: Operation not permitted"
        );
        assert_eq!(
            why.source().unwrap().downcast_ref::<nix::errno::Errno>(),
            Some(&nix::errno::Errno::EPERM)
        );
    }
}
