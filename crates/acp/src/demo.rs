//! `keel demo`: an offline session on a scripted model.

use crate::cli::{DemoArgs, Failure, Outcome};

/// Runs the demo.
pub async fn run(_args: DemoArgs) -> Outcome {
    Err(Failure::usage(
        "`keel demo` needs the ACP server and the scripted provider, which are not part of this build yet",
    ))
}
