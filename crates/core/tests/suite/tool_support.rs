//! The tool context the tool suites share: a runtime over one workspace root, the usual scope
//! (read and write the workspace, read the session's scratch directory), a session state.

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
/// Shell commands run confined, through keel-core's own helper binary (`keel-sandbox`).
pub fn sandbox_spec() -> keel_core::runtime::sandbox::SandboxSpec {
    keel_core::runtime::sandbox::SandboxSpec {
        helper: Some(PathBuf::from(env!("CARGO_BIN_EXE_keel-core-sandbox"))),
        ..Default::default()
    }
}

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
        sandbox: sandbox_spec(),
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
