//! `keel trust [status] | grant [DIR] | revoke [DIR] | list`: the project trust store.

use std::path::{Path, PathBuf};

use keel_core::config::{self, Effective, LoadOptions};
use keel_core::policy::{Trust, TrustStatus, TrustStore, project_fingerprint};

use super::{EXIT_OK, Failure, Outcome, TrustAction, TrustArgs, workspace_or_cwd, write_stdout};

/// Runs `keel trust`.
pub fn run(args: TrustArgs) -> Outcome {
    match args.action {
        None => status(args.workspace.as_ref()),
        Some(TrustAction::Status { dir }) => status(dir.as_ref().or(args.workspace.as_ref())),
        Some(TrustAction::Grant { dir }) => grant(dir.as_ref().or(args.workspace.as_ref())),
        Some(TrustAction::Revoke { dir }) => revoke(dir.as_ref().or(args.workspace.as_ref())),
        Some(TrustAction::List) => list(),
    }
}

fn store() -> Result<TrustStore, Failure> {
    config::default_trust_store()
        .ok_or_else(|| Failure::usage("no home directory: there is no trust store"))
}

fn canonical(dir: Option<&PathBuf>) -> Result<PathBuf, Failure> {
    let workspace = workspace_or_cwd(dir)?;
    keel_core::runtime::probe::canonicalize(&workspace)
        .map_err(|e| Failure::usage(format!("{}: {e}", workspace.display())))
}

/// The project as it loads untrusted: what its files would change.
fn untrusted(workspace: &Path) -> Result<(Effective, Vec<String>), Failure> {
    let mut options = LoadOptions::from_env(Some(workspace.to_path_buf()));
    options.project_trusted = false;
    let effective = config::load(&options)?;
    let mut lines: Vec<String> = effective
        .ignored
        .iter()
        .filter(|s| !s.key.starts_with("permission["))
        .map(ToString::to_string)
        .collect();
    let policy = config::build_policy(&effective, workspace, true, Trust::Untrusted)
        .map_err(Failure::usage)?;
    lines.extend(policy.ignored_project_allows());
    // Files beside the settings that trust also covers: skills, agents, tool files.
    lines.extend(keel_core::agent::files_waiting_for_trust(workspace));
    Ok((effective, lines))
}

fn status(dir: Option<&PathBuf>) -> Outcome {
    let workspace = canonical(dir)?;
    let store = store()?;
    let state = store.status(&workspace).map_err(Failure::usage)?;
    let (_, changes) = untrusted(&workspace)?;
    let mut out = format!("workspace: {}\n", workspace.display());
    out.push_str(&format!(
        "trust: {}\n",
        match state {
            TrustStatus::Trusted => "trusted",
            TrustStatus::Changed =>
                "not trusted: its .keel files changed since it was trusted (`keel trust grant` to trust them as they are)",
            TrustStatus::NotTrusted => "not trusted",
        }
    ));
    out.push_str(&format!("trust store: {}\n", store.path().display()));
    if changes.is_empty() {
        out.push_str("the project's settings only make Keel stricter: nothing waits for trust\n");
    } else {
        let verb = if state == TrustStatus::Trusted {
            "changes (applied)"
        } else {
            "would change (ignored until trusted)"
        };
        out.push_str(&format!("the project {verb}:\n"));
        for line in &changes {
            out.push_str(&format!("  - {line}\n"));
        }
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}

fn grant(dir: Option<&PathBuf>) -> Outcome {
    let workspace = canonical(dir)?;
    let store = store()?;
    // A project whose trusted settings are refused anyway (credentials sent elsewhere) is not
    // recorded: the user sees why first.
    let mut options = LoadOptions::from_env(Some(workspace.clone()));
    options.project_trusted = true;
    config::load(&options)?;
    let (_, changes) = untrusted(&workspace)?;
    let fingerprint = project_fingerprint(&workspace).map_err(Failure::usage)?;
    store
        .trust_fingerprint(&workspace, &fingerprint)
        .map_err(Failure::usage)?;
    let mut out = format!(
        "trusted {} (its .keel files as they are now, sha256 {}); recorded in {}\n",
        workspace.display(),
        &fingerprint[..12.min(fingerprint.len())],
        store.path().display()
    );
    for line in &changes {
        out.push_str(&format!("  applies: {line}\n"));
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}

fn revoke(dir: Option<&PathBuf>) -> Outcome {
    let workspace = workspace_or_cwd(dir)?;
    let workspace = keel_core::runtime::probe::canonical_or_same(&workspace);
    let store = store()?;
    let removed = store.revoke(&workspace).map_err(Failure::usage)?;
    let out = if removed {
        format!("revoked trust in {}\n", workspace.display())
    } else {
        format!("{} was not trusted\n", workspace.display())
    };
    write_stdout(&out)?;
    Ok(EXIT_OK)
}

fn list() -> Outcome {
    let store = store()?;
    let entries = store.list().map_err(Failure::usage)?;
    let mut out = String::new();
    if entries.is_empty() {
        out.push_str(&format!(
            "no trusted projects (trust store: {})\n",
            store.path().display()
        ));
    }
    for entry in entries {
        let state = match store.status(&entry.path) {
            Ok(TrustStatus::Trusted) => "trusted",
            Ok(_) => "changed since trusted (asks again)",
            Err(_) => "missing",
        };
        out.push_str(&format!("{}  {state}\n", entry.path.display()));
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}
