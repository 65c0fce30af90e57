//! The tool context the tool suites share: a runtime over one workspace root, the usual scope
//! (read and write the workspace, read the session's scratch directory), a session state.
#![allow(
    clippy::unwrap_used,
    reason = "test support: a broken fixture should fail the test loudly"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_core::capability::RequirementSet;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{Limits, ProgressSink, SessionState, ToolContext};
use tokio_util::sync::CancellationToken;

/// The scope a workspace agent usually has.
pub fn workspace_scope() -> RequirementSet {
    RequirementSet::fs_read_write(&["{workspace}/**", "{session}/**"], &["{workspace}/**"])
}

/// A headless tool context over `root`, sidecars under `scratch`.
pub fn tool_context(
    root: &Path,
    scratch: PathBuf,
    requirements: RequirementSet,
    limits: Limits,
) -> ToolContext {
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![root.to_path_buf()],
        requirements,
        scratch_dir: scratch.clone(),
        ..RuntimeConfig::default()
    })
    .unwrap();
    ToolContext {
        runtime,
        session: Arc::new(SessionState::new("s1", scratch, limits, false)),
        call_id: "call-1".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    }
}
