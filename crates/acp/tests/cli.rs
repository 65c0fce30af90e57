//! The `keel` binary, run as a user runs it: real processes, temporary homes and workspaces.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail loudly on purpose"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "tests set up homes and workspaces directly on disk"
)]

mod cli {
    pub mod basics;
    pub mod common;
    pub mod config;
    pub mod demo;
    pub mod doctor;
    pub mod errors;
    pub mod exec;
    pub mod sessions;
    pub mod tools;
    pub mod trust;
}
