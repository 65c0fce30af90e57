//! `keel permissions check|list`.

use super::{
    EXIT_OK, Failure, Outcome, Overrides, PermissionsCheckArgs, PermissionsListArgs, load_config,
    workspace_or_cwd, write_stdout,
};

/// What the permission engine decides for one call.
pub fn check(args: PermissionsCheckArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let _effective = load_config(Some(workspace), &args.overrides)?;
    let _call: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| Failure::usage(format!("--args is not valid JSON: {e}")))?;
    Err(Failure::usage(format!(
        "cannot check `{}`: the permission engine is not part of this build yet",
        args.tool
    )))
}

/// The configured rules, in evaluation order, with where each was written.
pub fn list(args: PermissionsListArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace), &Overrides::default())?;
    let mut out = format!(
        "mode: {} ({})\n",
        effective.config.mode,
        effective.sources.get("mode")
    );
    if effective.config.permissions.is_empty() {
        out.push_str("no [[permission]] rules configured\n");
    }
    for rule in &effective.config.permissions {
        let source = rule
            .source
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<5}  {:<10}  {}  # {source}\n",
            rule.action.as_str(),
            rule.permission,
            rule.pattern
        ));
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}
