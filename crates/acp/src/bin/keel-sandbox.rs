//! `keel-sandbox run --profile FILE -- PROGRAM ARGS...`: the sandbox helper every shell command
//! runs through, as a small binary installed next to `keel` (which finds it there). Starting
//! it costs far less than starting `keel` itself (`keel sandbox run`, the fallback): a fraction
//! of the code to map and relocate.

fn main() -> std::process::ExitCode {
    keel_core::runtime::sandbox::helper::standalone()
}
