//! `keel-core-sandbox run [--profile FILE] -- PROGRAM ARGS...`: the sandbox helper (the crate
//! `keel-sandbox`) for keel-core's tests; Keel ships the same `main` as `keel-sandbox`, next to
//! `keel`.

fn main() -> std::process::ExitCode {
    keel_sandbox::standalone()
}
