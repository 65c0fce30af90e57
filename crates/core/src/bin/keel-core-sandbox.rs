//! `keel-core-sandbox run --profile FILE -- PROGRAM ARGS...`: the sandbox helper on its own,
//! for keel-core's tests (Keel ships the same helper as `keel-sandbox`, next to `keel`).

fn main() -> std::process::ExitCode {
    keel_core::runtime::sandbox::helper::standalone()
}
