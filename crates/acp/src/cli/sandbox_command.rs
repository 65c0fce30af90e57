//! `keel sandbox check` (and the help text of `keel sandbox run`, which `main` dispatches before
//! anything else starts).

use keel_core::policy::watchdog::guard_rules;
use keel_core::runtime::sandbox::SandboxSpec;
use keel_core::runtime::sandbox::check::{MechanismReport, self_test};
use keel_core::runtime::sandbox::{Mechanism, SandboxMode, landlock_abi};

use super::{
    EXIT_OK, Failure, Outcome, SandboxCheckArgs, load_config, workspace_or_cwd, write_stdout,
};

/// Exit code when the sandbox the configuration asks for cannot be enforced here.
const EXIT_UNENFORCED: u8 = 1;

/// The helper sessions confine commands with, for the `keel` at `keel`: `keel-sandbox` beside
/// it when it is from this build, else `keel sandbox`.
pub(super) fn sessions_helper(keel: std::path::PathBuf) -> (std::path::PathBuf, Vec<String>) {
    let spec = SandboxSpec::keel(Default::default(), Some(keel.clone()), None);
    match spec.helper_command() {
        Some((helper, prefix)) => (helper.to_path_buf(), prefix.to_vec()),
        None => (keel, vec!["sandbox".to_owned()]),
    }
}

/// What this machine can enforce, and the self-test of each mechanism.
pub fn check(args: SandboxCheckArgs) -> Outcome {
    let workspace = workspace_or_cwd(args.workspace.as_ref())?;
    let effective = load_config(Some(workspace), &args.overrides)?;
    let settings = effective.config.sandbox;
    let keel = std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find Keel's own executable: {e}")))?;
    let (helper, prefix) = sessions_helper(keel);
    let namespaces = self_test(&helper, &prefix, Mechanism::Namespaces, guard_rules());
    let landlock = self_test(&helper, &prefix, Mechanism::Landlock, guard_rules());
    let mut out = String::new();
    out.push_str(&format!("mode: {}\n", mode_name(settings.mode)));
    out.push_str(&format!(
        "helper: {}{}\n",
        helper.display(),
        prefix
            .first()
            .map_or(String::new(), |word| format!(" {word}"))
    ));
    out.push_str(&format!(
        "mechanism: {}\n",
        match settings.mechanism {
            Mechanism::Auto => "auto (namespaces, else Landlock + seccomp)",
            Mechanism::Namespaces => "namespaces",
            Mechanism::Landlock => "landlock (the fallback, forced)",
        }
    ));
    out.push_str(&format!(
        "namespaces (user, mount, PID, network): {}\n",
        availability(&namespaces)
    ));
    out.push_str(&format!(
        "Landlock: {}\n",
        landlock_abi().map_or("not supported".to_owned(), |abi| format!(
            "ABI {abi} (the newest Keel asks for)"
        ))
    ));
    out.push_str(&format!(
        "Landlock + seccomp fallback: {}\n",
        availability(&landlock)
    ));
    out.push_str(&format!(
        "network: {}\n",
        if settings.network {
            "fully allowed ([sandbox] network = true)"
        } else {
            "off inside the sandbox, but for the hosts the shell.net rules allow without asking, \
             through Keel's filtering proxy"
        }
    ));
    for report in [&namespaces, &landlock] {
        out.push_str(&format!(
            "filtering proxy under {}: {}\n",
            label(report.mechanism),
            match &report.proxy {
                Ok(()) if report.passed() => "available".to_owned(),
                Ok(()) => "offered, but the self-test failed".to_owned(),
                Err(reason) => format!("unavailable ({reason}); the network stays off"),
            }
        ));
    }
    for report in [&namespaces, &landlock] {
        out.push_str(&format!("\nself-test, {}:\n", label(report.mechanism)));
        if report.claims.is_empty() {
            out.push_str("  (not run: the mechanism is unavailable)\n");
        }
        for claim in &report.claims {
            let mark = if claim.held { "ok  " } else { "FAIL" };
            out.push_str(&format!("  {mark} {}\n", claim.what));
        }
        if let Ok(notes) = &report.available {
            for note in notes {
                out.push_str(&format!("  note: {note}\n"));
            }
        }
    }
    let enforced = match settings.mechanism {
        Mechanism::Namespaces => namespaces.passed(),
        Mechanism::Landlock => landlock.passed(),
        // What `auto` runs commands under: namespaces where they are available, else the
        // fallback; a claim that fails under that one fails the check.
        Mechanism::Auto if namespaces.available.is_ok() => namespaces.passed(),
        Mechanism::Auto => landlock.passed(),
    };
    out.push_str(&format!(
        "\n{}\n",
        match (enforced, settings.mode) {
            (_, SandboxMode::Off) => "the sandbox is off: commands run unconfined",
            (true, _) => "commands run confined",
            (false, SandboxMode::Required) =>
                "commands cannot be confined here: with mode = \"required\" they are refused",
            (false, SandboxMode::Auto) =>
                "commands cannot be confined here: they run unconfined, and say so",
        }
    ));
    write_stdout(&out)?;
    Ok(if enforced || settings.mode == SandboxMode::Off {
        EXIT_OK
    } else {
        EXIT_UNENFORCED
    })
}

fn availability(report: &MechanismReport) -> String {
    match &report.available {
        Ok(_) if report.passed() => "available".to_owned(),
        Ok(_) => "available, but the self-test failed".to_owned(),
        Err(reason) if reason.is_empty() => "unavailable".to_owned(),
        Err(reason) => format!("unavailable ({reason})"),
    }
}

fn label(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::Landlock => "Landlock + seccomp",
        _ => "namespaces",
    }
}

fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Required => "required",
        SandboxMode::Auto => "auto",
        SandboxMode::Off => "off",
    }
}
