//! `keel-sandbox-standalone run [--profile FILE] -- PROGRAM ARGS...`: the helper on its own, for
//! this crate's tests. Keel ships the same `main` as `keel-sandbox`, next to `keel`.

fn main() -> std::process::ExitCode {
    keel_sandbox::standalone()
}
