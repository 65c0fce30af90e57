//! `keel permissions check|list`: the permission engine's view, as the engine explains it.

use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::config::{self, Effective};
use keel_core::policy::{self, Call, Policy, Trust};
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{Describe, Registry};

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

/// What the command line's one-call sessions may reach: every registered tool's requirements,
/// plus any program for the shell (the permission rules and the watchdog decide which commands
/// run, as in an editor session).
pub fn session_requirements(registry: &Registry) -> RequirementSet {
    registry.specs().fold(
        RequirementSet::default().with_shell(ShellRunRequirement::any_args("*")),
        |set, spec| set.union(&spec.requires),
    )
}

/// A runtime over `workspace` with the session's requirements, its scratch directory at
/// `scratch`.
pub fn runtime_for(
    registry: &Registry,
    workspace: &std::path::Path,
    scratch: &std::path::Path,
) -> Result<Runtime, Failure> {
    Runtime::new(RuntimeConfig {
        roots: vec![workspace.to_path_buf()],
        requirements: session_requirements(registry),
        ad_hoc: Vec::new(),
        user_data: None,
        scratch_dir: scratch.to_path_buf(),
        // `keel tool call bash` runs confined like a session's commands.
        sandbox: keel_core::runtime::sandbox::SandboxSpec::keel(
            keel_core::runtime::sandbox::SandboxSettings::default(),
            std::env::current_exe().ok(),
            std::env::var_os("HOME").map(std::path::PathBuf::from),
        ),
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
    let parsed = tool
        .parse(&call_args, Describe { roots: &[] })
        .map_err(Failure::usage)?;
    let policy = policy_for(&effective, &workspace, args.headless)?;
    let scratch = keel_core::runtime::scratch::temp_dir("keel-check-")
        .map_err(|e| Failure::failed(format!("cannot create a scratch directory: {e}")))?;
    let runtime = runtime_for(&registry, &workspace, &scratch.path().join("session"))?;
    let decision = policy.decide(&Call {
        spec: tool.spec(),
        target: &parsed.target,
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
