//! `keel permissions check|list`: the permission engine's view, as the engine explains it.

use keel_core::config::{self, Effective};
use keel_core::policy::{self, Call, Policy, Trust};
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::DynTool;

use super::tools_command::{find_tool, registry};
use super::{
    EXIT_OK, Failure, Outcome, Overrides, PermissionsCheckArgs, PermissionsListArgs, load_config,
    workspace_or_cwd, write_stdout,
};

/// The project's trust as recorded in the trust store (unknown when there is none).
pub fn project_trust(workspace: &std::path::Path) -> Trust {
    let Some(store) = config::default_trust_store() else {
        return Trust::Unknown;
    };
    store.trust_of(workspace).unwrap_or_else(|e| {
        tracing::warn!(
            "cannot read the trust store {}: {e}",
            store.path().display()
        );
        Trust::Unknown
    })
}

/// The session's permission engine, built from the configuration.
pub fn policy_for(
    effective: &Effective,
    workspace: &std::path::Path,
    headless: bool,
) -> Result<Policy, Failure> {
    let trust = project_trust(workspace);
    config::build_policy(effective, workspace, headless, trust).map_err(Failure::usage)
}

/// A runtime over `workspace` whose scope is `tool`'s requirements, with a scratch directory
/// under `scratch`.
pub fn runtime_for(
    tool: &dyn DynTool,
    workspace: &std::path::Path,
    scratch: &std::path::Path,
) -> Result<Runtime, Failure> {
    Runtime::new(RuntimeConfig {
        roots: vec![workspace.to_path_buf()],
        requirements: tool.spec().requires.clone(),
        ad_hoc: Vec::new(),
        user_data: None,
        scratch_dir: scratch.to_path_buf(),
    })
    .map_err(|e| Failure::usage(format!("cannot set up the workspace: {e}")))
}

/// What the engine decides for one call, and why.
pub fn check(args: PermissionsCheckArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace.clone()), &args.overrides)?;
    let registry = registry()?;
    let tool = find_tool(&registry, &args.tool)?;
    let call_args: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| Failure::usage(format!("--args is not valid JSON: {e}")))?;
    tool.validate(&call_args).map_err(Failure::usage)?;
    let policy = policy_for(&effective, &workspace, args.headless)?;
    let scratch = tempfile::tempdir()
        .map_err(|e| Failure::failed(format!("cannot create a scratch directory: {e}")))?;
    let runtime = runtime_for(tool.as_ref(), &workspace, &scratch.path().join("session"))?;
    let decision = policy.decide(&Call {
        spec: tool.spec(),
        args: &call_args,
        runtime: &runtime,
    });
    write_stdout(&policy::render_check(&decision))?;
    Ok(EXIT_OK)
}

/// The rules in effect, by scope, with where each was written.
pub fn list(args: PermissionsListArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace.clone()), &Overrides::default())?;
    let policy = policy_for(&effective, &workspace, false)?;
    write_stdout(&policy::render_rules(&policy))?;
    Ok(EXIT_OK)
}
