//! `keel exec`: one headless turn.

use crate::cli::{ExecArgs, Failure, Outcome};

/// Runs one prompt headless.
pub async fn run(_args: ExecArgs) -> Outcome {
    Err(Failure::usage(
        "`keel exec` needs the turn loop, which is not part of this build yet",
    ))
}
