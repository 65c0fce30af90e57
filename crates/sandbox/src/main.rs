//! `keel-sandbox-standalone run [--profile FILE] -- PROGRAM ARGS...`: the helper on its own, for
//! this crate's tests. Keel ships the same `main` as `keel-sandbox`, next to `keel`: started
//! without Rust's runtime start-up ([`keel_sandbox::start`] says what it keeps of it).

#![no_main]

/// The C `main`: the helper's arguments are read from the process (`std::env::args_os`).
#[expect(
    unsafe_code,
    reason = "the process's entry point, without Rust's runtime start-up (keel_sandbox::start)"
)]
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    keel_sandbox::start()
}
