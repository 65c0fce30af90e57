//! `keel models`: the model that will answer and why, the configured models, and the models
//! each usable provider lists at its models endpoint.

use keel_core::config::{self, Effective};
use keel_core::provider::{LIST_TIMEOUT, usable_providers};

use super::{EXIT_FAILED, EXIT_OK, ModelsArgs, Outcome, load_config, write_stdout};

/// The process environment, empty values as unset, then the keys `keel login` stored.
pub fn process_env(name: &str) -> Option<String> {
    keel_core::config::credentials::lookup()(name)
}

/// "The model that answers: X (why)" or what to set.
pub fn answering_line(effective: &Effective) -> (bool, String) {
    match config::answering_model(effective, &process_env) {
        Ok((model, why)) => (true, format!("the model that answers: {model} ({why})")),
        Err(advice) => (false, advice),
    }
}

/// `keel models`.
pub async fn run(args: ModelsArgs) -> Outcome {
    let workspace = super::workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace), &args.overrides)?;
    let (answers, line) = answering_line(&effective);
    let mut out = if answers {
        format!("{}\n", line.replacen("the model", "The model", 1))
    } else {
        format!("No model: {line}\n")
    };
    let configured: Vec<String> = effective
        .config
        .providers
        .iter()
        .flat_map(|(name, table)| table.models.iter().map(move |m| format!("{name}/{m}")))
        .collect();
    if !configured.is_empty() {
        out.push_str("\nConfigured models:\n");
        for model in &configured {
            out.push_str(&format!("  {model}\n"));
        }
    }
    let providers = usable_providers(
        &process_env,
        &config::located_providers(&effective, &process_env),
    );
    if providers.is_empty() {
        out.push_str("\nNo provider has credentials, so none was asked for its models.\n");
    }
    for provider in providers {
        let listed = match provider.build() {
            Ok(built) => tokio::time::timeout(LIST_TIMEOUT, built.list_models())
                .await
                .map_err(|_| format!("no answer within {} s", LIST_TIMEOUT.as_secs()))
                .and_then(|listed| listed.map_err(|error| error.to_string())),
            Err(error) => Err(error.to_string()),
        };
        match listed {
            Ok(models) if models.is_empty() => {
                out.push_str(&format!("\n{} lists no models.\n", provider.name));
            }
            Ok(models) => {
                out.push_str(&format!("\nModels {} lists:\n", provider.name));
                for model in models {
                    out.push_str(&format!("  {}/{model}\n", provider.name));
                }
            }
            Err(error) => {
                out.push_str(&format!(
                    "\n{}: its models could not be listed: {error}\n",
                    provider.name
                ));
            }
        }
    }
    write_stdout(&out)?;
    Ok(if answers { EXIT_OK } else { EXIT_FAILED })
}
