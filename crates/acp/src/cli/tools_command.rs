//! `keel tools` and `keel tool call`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_core::capability::RequirementSet;
use keel_core::config::{Config, Effective};
use keel_core::policy::{Call, PolicySearchGate};
use keel_core::tool::{
    Describe, DynTool, Envelope, ProgressSink, Registry, SessionState, ToolContext, ToolError,
};
use tokio_util::sync::CancellationToken;

use super::permissions_command::{policy_for, runtime_for};
use super::{
    EXIT_FAILED, EXIT_OK, Failure, Outcome, ToolCallArgs, ToolsArgs, load_config, workspace_or_cwd,
    write_stdout,
};

/// The tools a session offers: the bundled ones (web search configured from the environment).
pub fn registry() -> Result<Registry, Failure> {
    let env = keel_core::config::credentials::lookup();
    keel_core::tools::bundled(&|name: &str| env(name))
        .map_err(|e| Failure::failed(format!("cannot register the bundled tools: {e}")))
}

/// The tools a session in `workspace` has before its MCP servers start: the bundled ones and
/// the tool files (the user's, and the project's once the project is trusted), with the notes
/// about tool files left out.
pub fn workspace_registry(
    effective: &keel_core::config::Effective,
    workspace: &Path,
) -> Result<(Registry, Vec<String>), Failure> {
    let mut registry = registry()?;
    let user_dir = effective
        .files
        .iter()
        .find(|f| f.layer == "user")
        .and_then(|f| f.path.parent().map(Path::to_path_buf));
    let trusted = keel_core::config::trusted_in_default_store(workspace);
    let notes = keel_core::tools::extension::extend_registry(
        &mut registry,
        user_dir.as_deref(),
        workspace,
        trusted,
    );
    Ok((registry, notes))
}

/// Warns about `[tools.ID]` tables that name no registered tool (usually a typo).
pub fn warn_unknown_tool_settings(config: &Config, registry: &Registry) {
    for id in config.tools.keys() {
        if registry.get(id).is_none() {
            let known: Vec<&str> = registry.specs().map(|s| s.id.as_str()).collect();
            tracing::warn!(
                "configuration has settings for `[tools.{id}]`, but no tool `{id}` is registered (tools: {})",
                known.join(", ")
            );
        }
    }
}

/// `keel tools`: an aligned table, or the full specs as JSON.
pub fn list(args: ToolsArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace.clone()), &super::Overrides::default())?;
    let (registry, notes) = workspace_registry(&effective, &workspace)?;
    for note in &notes {
        tracing::warn!("{note}");
    }
    warn_unknown_tool_settings(&effective.config, &registry);
    if args.json {
        let specs: Vec<serde_json::Value> = registry
            .specs()
            .map(|spec| {
                let mut value = serde_json::to_value(spec).unwrap_or_default();
                if let serde_json::Value::Object(map) = &mut value {
                    map.insert(
                        "enabled".into(),
                        effective.config.tool(&spec.id).enabled.into(),
                    );
                }
                value
            })
            .collect();
        let text = serde_json::to_string_pretty(&specs)
            .map_err(|e| Failure::failed(format!("cannot encode JSON: {e}")))?;
        write_stdout(&format!("{text}\n"))?;
        return Ok(EXIT_OK);
    }
    let mut rows = vec![[
        "ID".to_owned(),
        "KIND".to_owned(),
        "MUTATING".to_owned(),
        "ENABLED".to_owned(),
        "ORIGIN".to_owned(),
        "REQUIRES".to_owned(),
    ]];
    for spec in registry.specs() {
        rows.push([
            spec.id.clone(),
            spec.kind.as_str().to_owned(),
            yes_no(spec.mutating),
            yes_no(effective.config.tool(&spec.id).enabled),
            spec.origin.to_string(),
            requires_summary(&spec.requires),
        ]);
    }
    let mut out = align(&rows);
    for spec in registry.specs().filter(|spec| spec.unavailable) {
        let why = if spec.id == keel_core::tools::web_search::ID {
            format!(
                "no search service is set (set {} to a SearXNG instance, or {})",
                keel_core::tools::web_search::ENV_SEARXNG_URL,
                keel_core::tools::web_search::ENV_BRAVE_API_KEY
            )
        } else {
            "it cannot work here".to_owned()
        };
        out.push_str(&format!(
            "\n`{}` is not offered to the model: {why}.\n",
            spec.id
        ));
    }
    // Tool files left out, waiting for trust, or shadowing another tool.
    for note in &notes {
        out.push_str(&format!("note: {note}\n"));
    }
    for id in effective
        .config
        .disabled_tools_matching_nothing(&|id| registry.get(id).is_some())
    {
        out.push_str(&format!(
            "warning: {}\n",
            keel_core::config::disabled_matching_nothing_note(&id)
        ));
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}

fn yes_no(value: bool) -> String {
    if value { "yes" } else { "no" }.to_owned()
}

/// One line per requirement kind: `read {workspace}/**, write {workspace}/**, run git`.
pub fn requires_summary(requires: &RequirementSet) -> String {
    let mut parts = Vec::new();
    parts.extend(requires.fs.read.iter().map(|p| format!("read {p}")));
    parts.extend(requires.fs.write.iter().map(|p| format!("write {p}")));
    parts.extend(requires.net.hosts.iter().map(|h| format!("net {h}")));
    parts.extend(requires.shell.iter().map(|s| format!("run {}", s.cmd)));
    parts.extend(requires.capabilities.iter().cloned());
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Rows as columns padded to their widest cell (the last column is not padded).
fn align<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `keel tool call ID JSON`: one call through the schema and capability checks; the envelope as
/// JSON on stdout; exit 1 on an error envelope.
pub async fn call(args: ToolCallArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    if !keel_core::runtime::probe::is_dir(&workspace) {
        return Err(Failure::usage(format!(
            "the workspace {} is not a directory",
            workspace.display()
        )));
    }
    let effective = load_config(Some(workspace.clone()), &args.overrides)?;
    let registry = registry()?;
    let tool = find_tool(&registry, &args.id)?;
    let settings = effective.config.tool(&args.id);
    if !settings.enabled {
        return Err(Failure::usage(format!(
            "tool `{}` is disabled by the configuration ({})",
            args.id,
            effective.sources.get(&format!("tools.{}.enabled", args.id))
        )));
    }
    let call_args: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| Failure::usage(format!("JSON-ARGS is not valid JSON: {e}")))?;

    let scratch = std::env::temp_dir().join(format!("keel-tool-{}", uuid::Uuid::new_v4()));
    let envelope = run_one(
        &registry,
        tool.as_ref(),
        call_args,
        &workspace,
        &scratch,
        &effective,
        settings.timeout_ms.map(Duration::from_millis),
    )
    .await;
    let keep_scratch = envelope.metadata.output_path.is_some();
    if !keep_scratch && let Err(e) = keel_core::runtime::remove_scratch(&scratch) {
        tracing::warn!("cannot remove {}: {e}", scratch.display());
    }
    let text = serde_json::to_string_pretty(&envelope)
        .map_err(|e| Failure::failed(format!("cannot encode JSON: {e}")))?;
    write_stdout(&format!("{text}\n"))?;
    Ok(if envelope.is_error() {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
}

pub fn find_tool(registry: &Registry, id: &str) -> Result<Arc<dyn DynTool>, Failure> {
    registry.get(id).cloned().ok_or_else(|| {
        let known: Vec<&str> = registry.specs().map(|s| s.id.as_str()).collect();
        if known.is_empty() {
            Failure::usage(format!("unknown tool `{id}`: no tools are registered"))
        } else {
            Failure::usage(format!(
                "unknown tool `{id}`; the tools are: {}",
                known.join(", ")
            ))
        }
    })
}

/// Runs one call in a fresh headless session over `workspace`: the schema check, the
/// permission engine (asks become denials), then the tool (whose runtime checks the capability
/// scope). Every failure becomes an error envelope.
async fn run_one(
    registry: &Registry,
    tool: &dyn DynTool,
    args: serde_json::Value,
    workspace: &Path,
    scratch: &Path,
    effective: &Effective,
    timeout: Option<Duration>,
) -> Envelope {
    let started = Instant::now();
    let fail = |error: ToolError| Envelope::from_result(Err(error), started.elapsed());
    let runtime = match runtime_for(registry, workspace, scratch) {
        Ok(runtime) => runtime,
        Err(failure) => return fail(ToolError::Unavailable(failure.message)),
    };
    // The schema check, and what the call acts on as the tool reads it.
    let target = match tool.parse(&args, Describe { roots: &[] }) {
        Ok(parsed) => parsed.target,
        Err(error) => return fail(error),
    };
    let policy = match policy_for(effective, workspace, true) {
        Ok(policy) => policy,
        Err(failure) => return fail(ToolError::Unavailable(failure.message)),
    };
    let decision = policy.decide(&Call {
        spec: tool.spec(),
        target: &target,
        runtime: &runtime,
    });
    tracing::info!(tool = %tool.spec().id, action = %decision.action, "{}", decision.explanation);
    if let Some(message) = decision.message_for_model() {
        return fail(ToolError::Denied(message));
    }
    // As in a turn: what the files a search finds may show is decided file by file, as reads
    // (a `.env` a `glob` filter re-includes is named, never searched).
    let runtime = runtime.with_search_gate(Arc::new(PolicySearchGate::new(
        Arc::new(policy),
        tool.spec().clone(),
    )));
    let session = Arc::new(SessionState::new(
        "keel-tool-call",
        runtime.scratch_dir().to_path_buf(),
        effective.config.limits.clone(),
        false,
    ));
    let cancel = CancellationToken::new();
    let context = ToolContext {
        runtime,
        session,
        call_id: "call-1".into(),
        cancel: cancel.clone(),
        progress: ProgressSink::default(),
    };
    let run = async {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, tool.execute(args, &context))
                .await
                .unwrap_or(Err(ToolError::Timeout(limit))),
            None => tool.execute(args, &context).await,
        }
    };
    let result = tokio::select! {
        result = run => result,
        _ = tokio::signal::ctrl_c() => {
            cancel.cancel();
            Err(ToolError::Cancelled)
        }
    };
    Envelope::from_result(result, started.elapsed())
}
