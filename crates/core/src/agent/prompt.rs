//! The system prompt: who the agent is, where it runs, and the tools' hints.

use crate::runtime::Runtime;
use crate::tool::Registry;

/// Instruction files read into the prompt, first found wins (in the workspace root, and in the
/// user configuration directory).
pub const INSTRUCTION_FILES: &[&str] = &["AGENTS.md", "KEEL.md", "CLAUDE.md"];
/// At most this much of an instruction file goes into the prompt (the rest is cut, and the
/// model is told so).
pub const INSTRUCTION_LIMIT: usize = 16 * 1024;

/// Builds the system prompt for a session. Stable across the turns of a session (so the
/// provider's prompt cache keeps hitting): no clock, no counters.
pub async fn system_prompt(
    runtime: &Runtime,
    registry: &Registry,
    date: &str,
    user_config_dir: Option<&std::path::Path>,
) -> String {
    let mut out = String::from(
        "You are Keel, a coding agent working inside the user's editor. You help with software \
         engineering tasks in the user's workspace using the tools provided.\n\n\
         Guidelines:\n\
         - Read a file before you edit it; make the smallest change that does the job.\n\
         - Relative paths are relative to the primary workspace root.\n\
         - A tool call may be denied by the user or by policy: do not retry the same call; adjust or ask.\n\
         - Keep the user informed briefly; when done, summarise what changed.\n",
    );
    out.push_str("\nEnvironment:\n");
    let roots = runtime.roots();
    match roots.first() {
        Some(primary) => out.push_str(&format!(
            "- Primary workspace root: {}\n",
            primary.display()
        )),
        None => out.push_str("- No workspace is open.\n"),
    }
    for root in roots.iter().skip(1) {
        out.push_str(&format!(
            "- Additional workspace root: {}\n",
            root.display()
        ));
    }
    out.push_str(&format!(
        "- Platform: {} ({})\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    out.push_str(&format!("- Date: {date}\n"));
    let hints: Vec<String> = registry
        .specs()
        .filter(|spec| !spec.unavailable)
        .filter_map(|spec| {
            spec.prompt_hint
                .as_ref()
                .map(|hint| format!("- {}: {hint}", spec.id))
        })
        .collect();
    if !hints.is_empty() {
        out.push_str("\nTool notes:\n");
        out.push_str(&hints.join("\n"));
        out.push('\n');
    }
    if let Some((name, text)) = user_config_dir.and_then(user_instructions) {
        out.push_str(&format!(
            "\nThe user's own instructions (from {name} in Keel's configuration directory):\n{text}\n"
        ));
    }
    if let Some((name, text)) = instructions(runtime).await {
        out.push_str(&format!("\nProject instructions from {name}:\n{text}\n"));
    }
    out
}

/// The first 16 KiB of `text`, with a note when the file (`size` bytes) held more.
fn capped(text: &str, size: u64) -> String {
    let head = crate::tool::head_of(text, INSTRUCTION_LIMIT);
    if head.len() < text.len() || (head.len() as u64) < size {
        format!(
            "{head}\n[... cut: the file is {size} bytes; only the first {INSTRUCTION_LIMIT} are shown]"
        )
    } else {
        head.to_owned()
    }
}

/// The workspace's instruction file, read through the runtime (the session's capability
/// check). The repository chose it, and it is read at every session's start: only as much as
/// the prompt shows is read (and a few bytes more, to end on a whole character), never the
/// whole file.
async fn instructions(runtime: &Runtime) -> Option<(&'static str, String)> {
    let root = runtime.roots().first()?;
    for name in INSTRUCTION_FILES {
        let path = root.join(name);
        if let Ok(bytes) = runtime.read_range(&path, 0, INSTRUCTION_LIMIT + 4).await {
            let size = match runtime.metadata(&path).await {
                Ok(meta) => meta.len(),
                Err(_) => bytes.len() as u64,
            };
            return Some((name, capped(&String::from_utf8_lossy(&bytes), size)));
        }
    }
    None
}

/// The user's instruction file in Keel's configuration directory (`~/.config/keel/AGENTS.md`),
/// read as Keel reads its own configuration files.
fn user_instructions(dir: &std::path::Path) -> Option<(&'static str, String)> {
    for name in INSTRUCTION_FILES {
        match crate::runtime::config_files::read_if_exists(&dir.join(name)) {
            Ok(Some(text)) => return Some((name, capped(&text, text.len() as u64))),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(file = %dir.join(name).display(), %error, "instruction file unreadable");
            }
        }
    }
    None
}
