//! Slash commands the server answers itself, without calling the model.
//!
//! - [`available`]: the list sent in `available_commands_update` after `session/new`.
//! - [`SlashCommand::parse`]: recognises a prompt that starts with one of them. Any other
//!   prompt, including an unknown `/word`, goes to the model.
//! - [`render_tools`]: the `/tools` answer.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, ContentBlock, UnstructuredCommandInput,
};

use keel_core::runtime::jobs::{JobInfo, Place};

use super::session_traits::ToolInfo;

/// A recognised command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    /// `/tools`: the loaded tools with their origin.
    Tools,
    /// `/permissions`: the effective rules by scope.
    Permissions,
    /// `/mode [name]`: show or switch the security mode.
    Mode(Option<String>),
    /// `/model [id]`: show or switch the model.
    Model(Option<String>),
    /// `/compact [focus]`: summarize the conversation so far to free the context window.
    Compact(Option<String>),
    /// `/help`: what the commands do.
    Help,
    /// `/clear`: a new conversation in the same session.
    Clear,
    /// `/init [focus]`: a model turn that writes `AGENTS.md` for the project (its write goes
    /// through the normal edit approval).
    Init(Option<String>),
    /// `/mcp`: each MCP server's state.
    Mcp,
    /// `/jobs`: the session's background commands.
    Jobs,
    /// `/server:prompt [arguments]`: an MCP server's prompt, sent to the model.
    McpPrompt { command: String, arguments: String },
}

/// The prompt `/init` sends to the model in place of the command.
pub const INIT_PROMPT: &str = "Write an AGENTS.md file at the root of this workspace: the \
instructions a coding agent needs to work in this project. Look around first (the README, the \
build and test files, the layout of the source). Then write, concisely: what the project is; how \
to build, test and lint it (the exact commands); the code layout; the conventions the code \
follows; anything surprising an agent must know. If an AGENTS.md already exists, read it and \
improve it rather than starting over. Use the write or edit tool for the file.";

struct CommandRow {
    name: &'static str,
    description: &'static str,
    hint: Option<&'static str>,
    /// Offered only when models are configured.
    needs_models: bool,
}

const COMMANDS: [CommandRow; 10] = [
    CommandRow {
        name: "tools",
        description: "List the loaded tools and where each comes from",
        hint: None,
        needs_models: false,
    },
    CommandRow {
        name: "permissions",
        description: "Show the effective permission rules by scope",
        hint: None,
        needs_models: false,
    },
    CommandRow {
        name: "mode",
        description: "Show or switch the security mode (ask, allowlist, yolo, read-only)",
        hint: Some("mode name"),
        needs_models: false,
    },
    CommandRow {
        name: "model",
        description: "Show or switch the model",
        hint: Some("model id"),
        needs_models: true,
    },
    CommandRow {
        name: "compact",
        description: "Summarize the conversation so far to free the model's context window",
        hint: Some("what to focus on"),
        needs_models: false,
    },
    CommandRow {
        name: "mcp",
        description: "Show each MCP server's state and tools",
        hint: None,
        needs_models: false,
    },
    CommandRow {
        name: "jobs",
        description: "List the background commands (id, command, state, runtime)",
        hint: None,
        needs_models: false,
    },
    CommandRow {
        name: "help",
        description: "Explain Keel's commands",
        hint: None,
        needs_models: false,
    },
    CommandRow {
        name: "clear",
        description: "Start a new conversation in this session (the model forgets what was said)",
        hint: None,
        needs_models: false,
    },
    CommandRow {
        name: "init",
        description: "Have the model write an AGENTS.md for this project (you approve the write)",
        hint: Some("what to focus on"),
        needs_models: false,
    },
];

/// The commands to advertise.
pub fn available(has_models: bool) -> Vec<AvailableCommand> {
    COMMANDS
        .iter()
        .filter(|row| has_models || !row.needs_models)
        .map(|row| {
            AvailableCommand::new(row.name, row.description).input(row.hint.map(|hint| {
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint))
            }))
        })
        .collect()
}

/// The commands with the skills after them (a skill named like a command is left out: the
/// command wins). Each skill runs as `/name [arguments]`.
pub fn available_with_skills(
    has_models: bool,
    skills: &[(String, String)],
) -> Vec<AvailableCommand> {
    let mut commands = available(has_models);
    for (name, description) in skills {
        if COMMANDS.iter().any(|row| row.name == name) {
            continue;
        }
        commands.push(
            AvailableCommand::new(name.clone(), format!("Skill: {description}")).input(
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("arguments")),
            ),
        );
    }
    commands
}

impl SlashCommand {
    /// The command a prompt invokes: its first block is text starting with `/name`.
    pub fn parse(prompt: &[ContentBlock]) -> Option<SlashCommand> {
        let Some(ContentBlock::Text(first)) = prompt.first() else {
            return None;
        };
        let text = first.text.trim_start().strip_prefix('/')?;
        let (name, rest) = text
            .split_once(char::is_whitespace)
            .map_or((text, ""), |(name, rest)| (name, rest.trim()));
        let argument = (!rest.is_empty()).then(|| rest.to_owned());
        match name {
            "tools" => Some(SlashCommand::Tools),
            "permissions" => Some(SlashCommand::Permissions),
            "mode" => Some(SlashCommand::Mode(argument)),
            "model" => Some(SlashCommand::Model(argument)),
            "compact" => Some(SlashCommand::Compact(argument)),
            "help" => Some(SlashCommand::Help),
            "clear" => Some(SlashCommand::Clear),
            "init" => Some(SlashCommand::Init(argument)),
            "mcp" => Some(SlashCommand::Mcp),
            "jobs" => Some(SlashCommand::Jobs),
            name if is_prompt_command(name) => Some(SlashCommand::McpPrompt {
                command: name.to_owned(),
                arguments: rest.to_owned(),
            }),
            _ => None,
        }
    }
}

/// `server:prompt`: two non-empty names of `[A-Za-z0-9_.-]` around one colon.
fn is_prompt_command(name: &str) -> bool {
    let word = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    name.split_once(':')
        .is_some_and(|(server, prompt)| word(server) && word(prompt))
}

/// The slash command of an MCP prompt: `/server:prompt`, its arguments as the hint.
pub fn prompt_command(prompt: &keel_core::mcp::McpPrompt) -> AvailableCommand {
    let description = if prompt.description.is_empty() {
        format!(
            "The `{}` prompt of the MCP server `{}`",
            prompt.name, prompt.server
        )
    } else {
        prompt.description.clone()
    };
    let hint = (!prompt.arguments.is_empty()).then(|| {
        prompt
            .arguments
            .iter()
            .map(|(name, _)| format!("{name}=..."))
            .collect::<Vec<_>>()
            .join(" ")
    });
    AvailableCommand::new(prompt.command(), description).input(
        hint.map(|hint| AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint))),
    )
}

/// The `/tools` answer: one line per tool, with its origin.
pub fn render_tools(tools: &[ToolInfo]) -> String {
    if tools.is_empty() {
        return "No tools are loaded.".into();
    }
    let mut out = format!("{} tools loaded:\n\n", tools.len());
    for tool in tools {
        out.push_str(&format!("- `{}` ({})", tool.id, tool.origin));
        if !tool.summary.is_empty() {
            out.push_str(&format!(": {}", tool.summary));
        }
        out.push('\n');
    }
    out
}

/// The `/jobs` answer: one line per background command.
pub fn render_jobs(jobs: &[JobInfo]) -> String {
    if jobs.is_empty() {
        return "No background commands.".into();
    }
    let mut out = String::from("Background commands:\n\n");
    for job in jobs {
        let place = match job.place {
            Place::Local => job
                .pid
                .map(|pid| format!(", pid {pid}"))
                .unwrap_or_default(),
            Place::Pane => ", in the terminal pane".to_owned(),
        };
        out.push_str(&format!(
            "- `{}` `{}`: {} for {}{place}\n",
            job.id,
            job.command.lines().next().unwrap_or_default(),
            job.state,
            runtime(job.runtime),
        ));
    }
    out
}

/// A duration as `4s`, `2m 05s`, `1h 02m`.
fn runtime(duration: std::time::Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// The `/help` answer.
pub fn render_help(has_models: bool) -> String {
    let mut out = String::from("Commands Keel answers itself:\n\n");
    for row in COMMANDS
        .iter()
        .filter(|row| has_models || !row.needs_models)
    {
        match row.hint {
            Some(hint) => out.push_str(&format!(
                "- `/{} <{hint}>`: {}\n",
                row.name, row.description
            )),
            None => out.push_str(&format!("- `/{}`: {}\n", row.name, row.description)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::TextContent;

    fn text(s: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::Text(TextContent::new(s))]
    }

    #[test]
    fn parses_known_commands_only() {
        assert_eq!(
            SlashCommand::parse(&text("/tools")),
            Some(SlashCommand::Tools)
        );
        assert_eq!(
            SlashCommand::parse(&text("  /mode yolo ")),
            Some(SlashCommand::Mode(Some("yolo".into())))
        );
        assert_eq!(
            SlashCommand::parse(&text("/mode")),
            Some(SlashCommand::Mode(None))
        );
        assert_eq!(SlashCommand::parse(&text("/review this")), None);
        assert_eq!(
            SlashCommand::parse(&text("/notes:review file=a.rs")),
            Some(SlashCommand::McpPrompt {
                command: "notes:review".into(),
                arguments: "file=a.rs".into()
            })
        );
        assert_eq!(SlashCommand::parse(&text("/usr/bin:x")), None);
        assert_eq!(SlashCommand::parse(&text("tools")), None);
        assert_eq!(SlashCommand::parse(&[]), None);
    }

    #[test]
    fn jobs_are_listed_with_id_command_state_and_runtime() {
        use keel_core::runtime::jobs::JobState;
        use std::time::Duration;
        let jobs = [
            JobInfo {
                id: "bg-1".into(),
                command: "npm run dev\nsecond line".into(),
                state: JobState::Running,
                runtime: Duration::from_secs(125),
                place: Place::Local,
                pid: Some(42),
            },
            JobInfo {
                id: "bg-2".into(),
                command: "cargo watch".into(),
                state: JobState::Exited {
                    code: Some(1),
                    signal: None,
                },
                runtime: Duration::from_secs(3),
                place: Place::Pane,
                pid: None,
            },
        ];
        assert_eq!(
            render_jobs(&jobs),
            "Background commands:\n\n\
             - `bg-1` `npm run dev`: running for 2m 05s, pid 42\n\
             - `bg-2` `cargo watch`: exited with code 1 for 3s, in the terminal pane\n"
        );
        assert_eq!(render_jobs(&[]), "No background commands.");
    }

    #[test]
    fn advertised_list() {
        let names: Vec<String> = available(false).into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "tools",
                "permissions",
                "mode",
                "compact",
                "mcp",
                "jobs",
                "help",
                "clear",
                "init"
            ]
        );
        assert_eq!(available(true).len(), 10);
        let tools = vec![ToolInfo {
            id: "read".into(),
            origin: "bundled".into(),
            summary: "Read a file".into(),
        }];
        insta::assert_snapshot!(render_tools(&tools), @r"
        1 tools loaded:

        - `read` (bundled): Read a file
        ");
    }
}
