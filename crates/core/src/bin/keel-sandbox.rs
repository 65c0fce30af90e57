//! `keel-sandbox run --profile FILE -- PROGRAM ARGS...`: the sandbox helper on its own (the
//! `keel` binary has it as `keel sandbox run`). keel-core's tests use it as the helper.

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = keel_core::runtime::sandbox::helper::main(&[], args);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}
