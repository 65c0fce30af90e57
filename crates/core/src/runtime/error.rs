//! [`AccessError`], the runtime's own error: why it refused or failed an access to a file, a process or the
//! network. A tool's `?` turns it into its [`ToolError`](crate::tool::ToolError), variant for
//! variant and word for word, which is what the model reads.

use std::time::Duration;

use crate::capability::Refusal;
use crate::contract::{ErrorSource, InternalError};

/// A refused or failed access, by audience: every variant but [`AccessError::Internal`] is a
/// message the model can act on; [`AccessError::Internal`] is a failure of Keel itself.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AccessError {
    /// The request asks for what cannot be done (a NUL byte in a path, a directory where a
    /// file is needed, a URL that does not parse).
    #[error("{0}")]
    BadArgument(String),
    /// What was named is not there (a file, a background command).
    #[error("{0}")]
    NotFound(String),
    /// The file is not what the model last saw (changed since it was read, or while the call
    /// ran).
    #[error("{0}")]
    Stale(String),
    /// The capability check refused the access.
    #[error("{0}")]
    Refused(Refusal),
    /// The access waits for the user's word (a hard-linked file).
    #[error("{0}")]
    Denied(String),
    /// This session cannot do it (no terminal, no sandbox helper where one is required).
    #[error("{0}")]
    Unavailable(String),
    /// The operating system refused or failed the operation; the source is the OS error.
    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    /// Something outside Keel failed: a web server, the editor.
    #[error("{message}")]
    External {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    /// The access outlived its timeout.
    #[error("timed out after {}s", .0.as_secs_f32())]
    Timeout(Duration),
    /// The call was cancelled.
    #[error("cancelled by the user")]
    Cancelled,
    /// A failure of Keel itself: for the user and the log, never for the model.
    #[error("{}", InternalError::FOR_MODEL)]
    Internal(InternalError),
}

impl AccessError {
    /// An OS failure, the OS error kept as the source.
    pub fn io(message: impl Into<String>, source: std::io::Error) -> Self {
        AccessError::Io {
            message: message.into(),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    /// An outside failure with no source error (an HTTP status, the editor's own message).
    pub fn external(message: impl Into<String>) -> Self {
        AccessError::External {
            message: message.into(),
            source: None,
        }
    }

    /// An outside failure with the error that caused it.
    pub fn external_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        AccessError::External {
            message: message.into(),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    /// A failure of Keel itself while doing `context` (a short phrase, no paths).
    pub fn internal(
        context: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        AccessError::Internal(InternalError::new(context, source))
    }

    /// A broken invariant while doing `context`.
    pub fn invariant(context: &'static str, what: impl Into<String>) -> Self {
        AccessError::Internal(InternalError::invariant(context, what))
    }
}

impl From<Refusal> for AccessError {
    fn from(refusal: Refusal) -> Self {
        AccessError::Refused(refusal)
    }
}

impl From<InternalError> for AccessError {
    fn from(error: InternalError) -> Self {
        AccessError::Internal(error)
    }
}

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
