//! The `keel` binary: everything lives in [`keel_acp::cli`].

fn main() -> std::process::ExitCode {
    keel_acp::cli::main()
}
