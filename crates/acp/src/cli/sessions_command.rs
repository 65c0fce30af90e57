//! `keel sessions list|show|export|rm`: the session store from the command line.

use std::fmt::Write as _;

use keel_core::agent::SESSIONS_DIR;
use keel_core::store::{SessionStore, markdown};

use super::{
    EXIT_OK, ExportFormat, Failure, Outcome, SessionsExportArgs, SessionsIdArgs, SessionsListArgs,
    write_stdout,
};

/// The store of this user (`~/.local/share/keel/sessions`).
pub fn store() -> Result<SessionStore, Failure> {
    let dir = keel_core::config::user_data_dir()
        .ok_or_else(|| Failure::usage("there is no user data directory (set HOME)"))?;
    Ok(SessionStore::new(dir.join(SESSIONS_DIR)))
}

/// `keel sessions list`: most recent first; a table, or JSON.
pub fn list(args: SessionsListArgs) -> Outcome {
    let store = store()?;
    let cwd = args
        .workspace
        .as_ref()
        .map(|dir| keel_core::runtime::probe::canonical_or_same(dir));
    let sessions = store.list(cwd.as_deref()).map_err(Failure::failed)?;
    if args.json {
        let rows: Vec<serde_json::Value> = sessions
            .iter()
            .map(|session| {
                serde_json::json!({
                    "id": session.meta.id,
                    "cwd": session.meta.cwd,
                    "title": session.meta.title,
                    "createdAt": session.meta.created_at,
                    "updatedAt": session.updated_at,
                    "forkedFrom": session.meta.forked_from,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&rows).map_err(Failure::failed)?;
        write_stdout(&format!("{text}\n"))?;
        return Ok(EXIT_OK);
    }
    if sessions.is_empty() {
        write_stdout("No stored sessions.\n")?;
        return Ok(EXIT_OK);
    }
    let width = sessions
        .iter()
        .map(|session| session.meta.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut out = format!(
        "{:<width$}  {:<20}  {:<40}  TITLE\n",
        "ID", "UPDATED", "WORKSPACE"
    );
    for session in &sessions {
        let _ = writeln!(
            out,
            "{:<width$}  {:<20}  {:<40}  {}",
            session.meta.id,
            session.updated_at,
            session.meta.cwd.display(),
            session.meta.title.as_deref().unwrap_or("")
        );
    }
    write_stdout(&out)?;
    Ok(EXIT_OK)
}

/// `keel sessions show ID`: the transcript as Markdown.
pub fn show(args: SessionsIdArgs) -> Outcome {
    let (meta, events) = store()?.read(&args.id).map_err(Failure::failed)?;
    write_stdout(&markdown(&meta, &events))?;
    Ok(EXIT_OK)
}

/// `keel sessions export ID --format json|markdown`.
pub fn export(args: SessionsExportArgs) -> Outcome {
    let (meta, events) = store()?.read(&args.id).map_err(Failure::failed)?;
    let text = match args.format {
        ExportFormat::Markdown => markdown(&meta, &events),
        ExportFormat::Json => {
            let value = serde_json::json!({ "meta": meta, "events": events });
            let mut text = serde_json::to_string_pretty(&value).map_err(Failure::failed)?;
            text.push('\n');
            text
        }
    };
    write_stdout(&text)?;
    Ok(EXIT_OK)
}

/// `keel sessions rm ID`: refused while a Keel process has the session open.
pub fn remove(args: SessionsIdArgs) -> Outcome {
    store()?.delete(&args.id).map_err(Failure::failed)?;
    write_stdout(&format!("Removed session {}.\n", args.id))?;
    Ok(EXIT_OK)
}
