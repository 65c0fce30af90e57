//! Scratch directories of a front-end run (`keel acp`, `keel exec`, `keel demo`, the CLI's
//! one-off checks): a private temporary directory, removed when the handle is dropped, under
//! which sessions keep their sidecar files. Created by the host, never by a tool call.

use std::io;

/// A new temporary directory named `PREFIX…` in the system's temporary directory.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
#[expect(
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub fn temp_dir(prefix: &str) -> io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(prefix).tempdir()
}
