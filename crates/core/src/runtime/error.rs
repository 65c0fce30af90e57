//! [`AccessError`], what the runtime's accesses to a file, a process or the network fail with:
//! the contract's [`ToolError`](crate::contract::ToolError), the failures a tool reports, under
//! the runtime's name. A tool's `?` passes it on as it is, which is what the model reads.
//! [`FileError`]: why a file could not be opened for reading, before it becomes one.

use std::sync::Arc;

use crate::capability::Refusal;

pub use crate::contract::ToolError as AccessError;

/// No helper where one is required is the user's setting (the model tells the user); a sandbox
/// that cannot be prepared is a failure of Keel.
impl From<super::sandbox::SandboxError> for AccessError {
    fn from(error: super::sandbox::SandboxError) -> Self {
        match error {
            super::sandbox::SandboxError::NoHelper => AccessError::Unavailable(error.to_string()),
            super::sandbox::SandboxError::Io { .. }
            | super::sandbox::SandboxError::Profile(_)
            | super::sandbox::SandboxError::NotUtf8(_)
            | super::sandbox::SandboxError::NotRendered => {
                AccessError::internal("preparing the sandbox", error)
            }
        }
    }
}

/// Why a file could not be opened for reading.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The capability check refused the path.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// A regular file with several hard links: another name of it may lie outside the
    /// workspace, so its content is not provably the workspace's.
    #[error(
        "{shown} has {links} hard links, so Keel cannot prove that its content belongs to the \
         workspace (another of its names may lie outside). Reading it needs the user's approval: \
         call `read` on it to ask."
    )]
    HardLinked { shown: String, links: u64 },
    /// A symlink appeared on the checked path between the check and the open.
    #[error("{shown} changed while it was being opened (a symlink appeared on its path); refused")]
    Changed { shown: String },
    /// Not a regular file (a device, socket or pipe swapped in).
    #[error("{shown} is not a regular file")]
    NotAFile { shown: String },
    /// The operating system failed the open (the message names the path; the source is the OS
    /// error), or the path is a directory (no source).
    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: Option<std::io::Error>,
    },
}

impl From<FileError> for AccessError {
    fn from(error: FileError) -> Self {
        match error {
            FileError::Refused(refusal) => refusal.into(),
            FileError::Io { message, source } => AccessError::Io {
                message,
                source: source.map(|source| -> crate::contract::ErrorSource { Arc::new(source) }),
            },
            // A hard-linked file waits for the user's say (through `read`, which asks).
            other @ FileError::HardLinked { .. } => AccessError::Denied(other.to_string()),
            other @ FileError::Changed { .. } => AccessError::Stale(other.to_string()),
            other @ FileError::NotAFile { .. } => AccessError::BadArgument(other.to_string()),
        }
    }
}
