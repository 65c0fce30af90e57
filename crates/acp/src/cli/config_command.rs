//! `keel config show|schema|path`.

use keel_core::config::{self, LoadOptions};

use super::{
    ConfigPathArgs, ConfigShowArgs, EXIT_OK, Failure, Outcome, load_config, workspace_or_cwd,
    write_stdout,
};

/// The effective configuration with the source of each value.
pub fn show(args: ConfigShowArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace.clone()), &args.overrides)?;
    // Rules the permission engine would refuse when a session opens are this command's error.
    config::check_permission_rules(&effective, &workspace).map_err(Failure::usage)?;
    if args.json {
        let files: Vec<serde_json::Value> = effective
            .files
            .iter()
            .map(|f| {
                serde_json::json!({
                    "layer": f.layer,
                    "path": f.path,
                    "found": f.found,
                })
            })
            .collect();
        let value = serde_json::json!({
            "config": effective.config,
            "sources": effective.sources,
            "files": files,
            "project_trusted": effective.project_trusted,
            "ignored": effective.ignored,
            "answering_model": match config::answering_model(&effective, &super::models_command::process_env) {
                Ok((model, why)) => serde_json::json!({"model": model, "why": why}),
                Err(advice) => serde_json::json!({"model": null, "why": advice}),
            },
        });
        write_stdout(&format!("{}\n", pretty(&value)?))?;
    } else {
        let (_, line) = super::models_command::answering_line(&effective);
        write_stdout(&format!(
            "# {line}\n{}",
            config::render_annotated(&effective)
        ))?;
    }
    Ok(EXIT_OK)
}

/// The JSON Schema of a configuration file.
pub fn schema() -> Outcome {
    write_stdout(&format!("{}\n", pretty(&config::json_schema())?))?;
    Ok(EXIT_OK)
}

/// Where the user and project files are (whether or not they exist).
pub fn path(args: ConfigPathArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let options = LoadOptions::from_env(Some(workspace));
    let mut out = String::new();
    let layers = [
        ("user", options.user_file.clone()),
        ("project", options.project_file()),
    ];
    for (layer, path) in layers {
        match path {
            Some(path) => {
                let state = if keel_core::runtime::probe::is_file(&path) {
                    ""
                } else {
                    "  (not found)"
                };
                out.push_str(&format!("{layer:<8} {}{state}\n", path.display()));
            }
            None => out.push_str(&format!("{layer:<8} (no home directory)\n")),
        }
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}

fn pretty(value: &serde_json::Value) -> Result<String, Failure> {
    serde_json::to_string_pretty(value)
        .map_err(|e| Failure::failed(format!("cannot encode JSON: {e}")))
}
