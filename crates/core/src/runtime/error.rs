//! [`AccessError`], what the runtime's accesses to a file, a process or the network fail with:
//! the contract's [`ToolError`](crate::contract::ToolError), the failures a tool reports, under
//! the runtime's name. A tool's `?` passes it on as it is, which is what the model reads.

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
