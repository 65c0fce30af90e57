//! The `keel` binary: everything lives in [`keel_acp::cli`].

fn main() -> std::process::ExitCode {
    // The sandbox helper runs before anything else (no threads, no logging set-up): it may
    // unshare a user namespace, which a multi-threaded process cannot, and it is on the path of
    // every shell command.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "sandbox")
        && args
            .get(1)
            .is_some_and(|a| a == "run" || a == "init" || a == "zygote")
    {
        let prefix = [std::ffi::OsString::from("sandbox")];
        let code = keel_sandbox::main(&prefix, args[1..].to_vec());
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX));
    }
    keel_acp::cli::main()
}
