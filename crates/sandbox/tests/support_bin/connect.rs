//! `keel-sandbox-test-connect PATH`: connects to the Unix socket at `PATH` and says whether it
//! could (`connected`, or `refused: ERROR`). A program for the crate's tests: the shells they
//! run cannot reach a Unix socket by path themselves.

#![expect(
    clippy::disallowed_methods,
    reason = "a test program outside Keel: connecting by path is all it does"
)]

use std::io::Write as _;

fn main() {
    let answer = match std::env::args_os().nth(1) {
        Some(path) => match std::os::unix::net::UnixStream::connect(&path) {
            Ok(_) => "connected".to_owned(),
            Err(error) => format!("refused: {error}"),
        },
        None => "usage: keel-sandbox-test-connect PATH".to_owned(),
    };
    let _ = writeln!(std::io::stdout(), "{answer}");
}
