//! `keel doctor`: checks what a user must get right for Keel to work (the configuration, a model
//! with credentials, the providers' endpoints, the sandbox, project trust, where logs go) and
//! prints the Zed `agent_servers` settings for this binary. Exit 1 when something must be fixed.

use keel_core::config::{self, Effective};
use keel_core::policy::TrustStatus;
use keel_core::policy::watchdog::guard_rules;
use keel_core::provider::{ProviderError, usable_providers};
use keel_core::runtime::sandbox::check::self_test;
use keel_core::runtime::sandbox::{Mechanism, SandboxMode};

use super::models_command::{answering_line, process_env};
use super::{
    DoctorArgs, EXIT_FAILED, EXIT_OK, Outcome, load_config, workspace_or_cwd, write_stdout,
};

/// How long a provider may take to answer the doctor.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

#[derive(Default)]
struct Report {
    out: String,
    problems: usize,
}

impl Report {
    fn ok(&mut self, text: &str) {
        self.out.push_str(&format!("  ok    {text}\n"));
    }
    fn warn(&mut self, text: &str) {
        self.out.push_str(&format!("  note  {text}\n"));
    }
    fn fix(&mut self, text: &str, advice: &str) {
        self.problems += 1;
        self.out.push_str(&format!("  FIX   {text}\n"));
        if !advice.is_empty() {
            self.out.push_str(&format!("        → {advice}\n"));
        }
    }
    fn section(&mut self, title: &str) {
        self.out.push_str(&format!("\n{title}\n"));
    }
}

/// `keel doctor`.
pub async fn run(args: DoctorArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let mut report = Report::default();
    report.out.push_str(&format!(
        "Keel {} checking {}\n",
        env!("CARGO_PKG_VERSION"),
        workspace.display()
    ));

    report.section("Configuration");
    let effective = match load_config(Some(workspace.clone()), &Default::default()) {
        Ok(effective) => {
            for file in &effective.files {
                let state = if file.found {
                    "found"
                } else {
                    "not found (optional)"
                };
                report.ok(&format!("{} file {}: {state}", file.layer, file.shown));
            }
            match config::check_permission_rules(&effective, &workspace) {
                Ok(()) => report.ok("the permission rules are valid"),
                Err(error) => {
                    report.fix(&error, "correct the rule (`keel config show` checks again)")
                }
            }
            if let Ok((registry, _)) =
                super::tools_command::workspace_registry(&effective, &workspace)
            {
                for id in effective
                    .config
                    .disabled_tools_matching_nothing(&|id| registry.get(id).is_some())
                {
                    report.warn(&keel_core::config::disabled_matching_nothing_note(&id));
                }
            }
            Some(effective)
        }
        Err(failure) => {
            report.fix(
                &failure.message,
                "correct the file; `keel config show` checks it again",
            );
            None
        }
    };

    report.section("Model and providers");
    match &effective {
        Some(effective) => providers(&mut report, effective).await,
        None => report.warn("not checked: the configuration does not load"),
    }

    report.section("Sandbox");
    sandbox(&mut report, effective.as_ref());

    report.section("Project trust");
    trust(&mut report, &workspace, effective.as_ref());

    report.section("Logs");
    match config::default_log_file() {
        Some(path) => report.ok(&format!(
            "`keel acp` logs to {} (more with -v, -vv; or --log-file PATH)",
            path.display()
        )),
        None => report.warn("no home directory: `keel acp` logs nowhere unless given --log-file"),
    }

    report.section("Zed");
    report.out.push_str(&zed_snippet());

    report.out.push_str(&match report.problems {
        0 => "\nNothing to fix.\n".to_owned(),
        1 => "\n1 thing to fix (marked FIX above).\n".to_owned(),
        n => format!("\n{n} things to fix (marked FIX above).\n"),
    });
    write_stdout(&report.out)?;
    Ok(if report.problems == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

async fn providers(report: &mut Report, effective: &Effective) {
    let (answers, line) = answering_line(effective);
    if answers {
        report.ok(&line);
    } else {
        report.fix(
            "no model can answer",
            line.trim_start_matches("no model can answer: "),
        );
    }
    let configured = config::located_providers(effective, &process_env);
    for provider in &configured {
        if !provider.has_credentials() && provider.api_key.is_none() {
            let var = provider.key_env();
            if process_env(var).is_none() {
                report.warn(&format!(
                    "provider `{}` has no key: set {var} to use it",
                    provider.name
                ));
            }
        }
    }
    for provider in usable_providers(&process_env, &configured) {
        let name = provider.name.clone();
        let listed = match provider.build() {
            Ok(built) => tokio::time::timeout(PROBE_TIMEOUT, built.list_models())
                .await
                .unwrap_or(Err(ProviderError::Timeout {
                    provider: name.clone(),
                    idle: PROBE_TIMEOUT,
                    after: Default::default(),
                })),
            Err(error) => Err(error),
        };
        match listed {
            Ok(models) => report.ok(&format!(
                "provider `{name}` answers ({} models listed)",
                models.len()
            )),
            Err(error @ (ProviderError::Unreachable { .. } | ProviderError::NotAnApi { .. })) => {
                report.fix(
                    &error.to_string(),
                    "start the server, or correct its base URL",
                )
            }
            Err(error @ ProviderError::Auth { .. }) => {
                report.fix(&error.to_string(), "set a valid key")
            }
            Err(error) => report.warn(&format!(
                "provider `{name}` did not list its models: {error}"
            )),
        }
    }
}

fn sandbox(report: &mut Report, effective: Option<&Effective>) {
    let settings = effective
        .map(|e| e.config.sandbox.clone())
        .unwrap_or_default();
    let keel = match std::env::current_exe() {
        Ok(keel) => keel,
        Err(error) => {
            report.fix(&format!("cannot find Keel's own executable: {error}"), "");
            return;
        }
    };
    let (helper, prefix) = super::sandbox_command::sessions_helper(keel);
    let namespaces = self_test(&helper, &prefix, Mechanism::Namespaces, guard_rules()).passed();
    let landlock = self_test(&helper, &prefix, Mechanism::Landlock, guard_rules()).passed();
    let enforced = match settings.mechanism {
        Mechanism::Namespaces => namespaces,
        Mechanism::Landlock => landlock,
        Mechanism::Auto => namespaces || landlock,
    };
    let how = if namespaces {
        "namespaces"
    } else {
        "Landlock + seccomp"
    };
    match (settings.mode, enforced) {
        (SandboxMode::Off, _) => report.warn("the sandbox is off ([sandbox] mode = \"off\"): commands run unconfined"),
        (_, true) => report.ok(&format!("shell commands run confined ({how})")),
        (SandboxMode::Required, false) => report.fix(
            "the sandbox is required but cannot be enforced here: every command will be refused",
            "run `keel sandbox check` for the details (user namespaces or Landlock are needed)",
        ),
        (SandboxMode::Auto, false) => report.warn(
            "commands cannot be confined here: they run unconfined, and say so (`keel sandbox check`)",
        ),
    }
}

fn trust(report: &mut Report, workspace: &std::path::Path, effective: Option<&Effective>) {
    let Some(store) = config::default_trust_store() else {
        report.warn("no home directory: projects cannot be trusted");
        return;
    };
    let canonical =
        keel_core::runtime::paths::resolve(workspace).unwrap_or_else(|_| workspace.into());
    let waiting = effective.map_or(0, |e| e.ignored.len());
    match store.status(&canonical) {
        Ok(TrustStatus::Trusted) => report.ok("this project is trusted: its own settings apply"),
        Ok(TrustStatus::Changed) => report.warn(
            "this project's .keel files changed since you trusted it: its loosening settings wait (`keel trust`)",
        ),
        Ok(TrustStatus::NotTrusted) if waiting > 0 => report.warn(&format!(
            "this project is not trusted: {waiting} of its settings wait (`keel trust` lists them)"
        )),
        Ok(TrustStatus::NotTrusted) => {
            report.ok("this project is not trusted, and nothing in it waits for trust")
        }
        Err(error) => report.fix(
            &format!("the trust store cannot be read: {error}"),
            &format!("repair or remove {}", store.path().display()),
        ),
    }
}

/// The Zed `settings.json` entry that starts this binary.
fn zed_snippet() -> String {
    let path = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "keel".to_owned());
    let path = serde_json::to_string(&path).unwrap_or_else(|_| "\"keel\"".to_owned());
    format!(
        "  Add to Zed's settings.json:\n\n  \"agent_servers\": {{\n    \"Keel\": {{\n      \
         \"command\": {path},\n      \"args\": [\"acp\"],\n      \"env\": {{}}\n    }}\n  }}\n"
    )
}
