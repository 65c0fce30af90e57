//! Logging through `tracing`: to stderr, or to a file; never to stdout.
//!
//! The level comes from `RUST_LOG` when it is set, otherwise from `-v` (none: warnings, `-v`
//! info, `-vv` debug, `-vvv` trace). `keel acp` logs to `~/.local/state/keel/keel.log` unless
//! `--log-file` says otherwise, so the editor's capture of stderr stays clean; every other command
//! logs to stderr.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use super::{Cli, Command, Failure};

/// Installs the global subscriber. File logging is synchronous: a line logged just before exit
/// (a signal, an error) is on disk when the process is gone.
pub fn init(cli: &Cli) -> Result<(), Failure> {
    let is_acp = matches!(cli.command, Command::Acp(_));
    let default_level = match (cli.verbose, is_acp) {
        (0, true) => "info",
        (0, false) => "warn",
        (1, _) => "info",
        (2, _) => "debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::try_new(&spec)
            .map_err(|e| Failure::usage(format!("bad RUST_LOG `{spec}`: {e}")))?,
        _ => EnvFilter::new(default_level),
    };
    let file = match &cli.log_file {
        Some(path) => Some(path.clone()),
        None if is_acp => keel_core::config::default_log_file(),
        None => None,
    };
    match file {
        Some(path) => {
            let layer = tracing_subscriber::fmt::layer()
                .with_writer(open_appender(&path)?)
                .with_ansi(false);
            tracing_subscriber::registry()
                .with(filter)
                .with(layer)
                .try_init()
                .map_err(|e| Failure::failed(format!("cannot set up logging: {e}")))?;
            Ok(())
        }
        None => {
            let layer = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal());
            tracing_subscriber::registry()
                .with(filter)
                .with(layer)
                .try_init()
                .map_err(|e| Failure::failed(format!("cannot set up logging: {e}")))?;
            Ok(())
        }
    }
}

/// An appending writer for `path` (its directory is created when missing).
#[expect(
    clippy::disallowed_methods,
    reason = "the user's `--log-file`, opened by the logging layer before anything else runs"
)]
fn open_appender(path: &Path) -> Result<tracing_appender::rolling::RollingFileAppender, Failure> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let directory = absolute
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let name = absolute
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Failure::usage(format!("--log-file {} names no file", path.display())))?;
    tracing_appender::rolling::RollingFileAppender::builder()
        .rotation(tracing_appender::rolling::Rotation::NEVER)
        .filename_prefix(name)
        .build(&directory)
        .map_err(|e| Failure::usage(format!("cannot open the log file {}: {e}", path.display())))
}
