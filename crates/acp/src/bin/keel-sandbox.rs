//! `keel-sandbox run [--profile FILE] -- PROGRAM ARGS...`: the sandbox helper every shell command
//! runs through, as a small binary installed next to `keel` (which finds it there). It is the
//! crate `keel-sandbox` alone (no part of keel-core or of this crate is linked in), so starting
//! it costs far less than starting `keel` itself (`keel sandbox run`, the fallback). It starts
//! without Rust's runtime start-up ([`keel_sandbox::start`] says what it keeps of it).

#![no_main]

keel_sandbox::helper_main!();
