//! Keel's third layer on its own: the sandbox helper every shell command (and every MCP stdio
//! server) runs through, `keel-sandbox run [--profile FILE] -- PROGRAM ARGS...` (docs/sandbox.md).
//!
//! Keel (keel-core's `runtime::sandbox`) decides what a command may see and writes it as a
//! [`Profile`]; this crate reads the profile and applies it, before the program starts, in a
//! process of its own. It depends on no part of Keel, only on the system crates it calls, so
//! the layer can be read and tested apart.
//!
//! - [`profile`]: the profile, the status line the helper writes back, the defaults.
//! - [`helper`]: the entry point and stage 1 (which mechanism, signals, the status file).
//! - `namespaces`: the user, mount and network namespaces and the new root.
//! - `init`: the PID namespace's init (stage 2) and the forwarder to Keel's filtering proxy.
//! - `keeper`: the session's namespace keeper (a user namespace, network namespaces made ahead).
//! - `reaper`: the fallback's supervisor (a subreaper that leaves nothing behind).
//! - `fallback`: Landlock + seccomp, with every capability dropped.
//! - [`zygote`]: the warm holder: one per session and contained profile, each contained command
//!   forked from it (under the fallback one Landlock domain, under namespaces one new root).
//! - [`Error`]: why the helper refuses (nothing of the program ran).

mod error;
mod fallback;
pub mod fds;
pub mod helper;
mod init;
mod keeper;
mod namespaces;
pub mod profile;
mod reaper;
pub mod zygote;

pub use error::{Error, NamespaceFailure, Result};
pub use fallback::{landlock_abi, split_around_masked};
pub use helper::{main, standalone, start};
pub use profile::{
    DEFAULT_ENV_ALLOW, DEFAULT_HOME_READABLE, DEFAULT_HOME_WRITABLE, HELPER_BUILD, Mechanism,
    Profile, ProxyEndpoint, SYSTEM_DIRS, Status,
};

/// The variable that carries a command's [`Profile`] (JSON) to the helper, instead of
/// `--profile FILE`.
pub const PROFILE_ENV: &str = "KEEL_SANDBOX_PROFILE";

/// The variable that carries the key to Keel's prebuilt credential masks
/// ([`Profile::mask_socket`]) to a helper another process starts: in the environment, which no
/// other program may read, not in the arguments or the profile.
pub const MASK_KEY_ENV: &str = "KEEL_SANDBOX_MASK_KEY";

/// The helper's own failures (bad arguments, a profile it cannot read, a refusal, a setup error
/// after the point of no return): nothing of the program ran.
pub const EXIT_HELPER_FAILED: i32 = 125;

/// Where the namespace helper shows the filtering proxy's socket inside the command's root.
pub const SOCKET_IN_ROOT: &str = "/run/keel-proxy.sock";

/// The C `main` of a helper binary (`keel-sandbox`, `keel-sandbox-standalone`), built without
/// Rust's runtime start-up: the binary's root says `#![no_main]` and then `keel_sandbox::helper_main!();`.
/// The arguments are read from the process ([`start`] with `std::env::args_os`).
#[macro_export]
macro_rules! helper_main {
    () => {
        #[expect(
            unsafe_code,
            reason = "the process's entry point, without Rust's runtime start-up (keel_sandbox::start)"
        )]
        #[unsafe(no_mangle)]
        extern "C" fn main(
            _argc: ::std::ffi::c_int,
            _argv: *const *const ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $crate::start()
        }
    };
}
