//! `keel-sandbox-standalone run [--profile FILE] -- PROGRAM ARGS...`: the helper on its own, for
//! this crate's tests. Keel ships the same `main` as `keel-sandbox`, next to `keel`: started
//! without Rust's runtime start-up ([`keel_sandbox::start`] says what it keeps of it).

#![no_main]

keel_sandbox::helper_main!();
