//! How a tool call looks in the editor: its ACP kind, a human title and the places it touches.
//!
//! - [`LockedTool`]: the locked tool ids. [`ToolRef::of`] sorts a call's tool id into a locked
//!   tool or an extension (MCP, project or global tool).
//! - [`acp_kind`]: the exhaustive table from a tool to its ACP kind. It is a `match` without a
//!   wildcard, so a new locked tool does not compile until it has a kind.
//! - [`title`]: "Read src/main.rs (1-40)", "`cargo test`", "Grep `fn main` in src/", ...
//!   computed from the call's arguments, paths shown relative to the workspace.
//! - [`locations`]: the (path, line) pairs the editor follows.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{ToolCallLocation, ToolKind as AcpKind};
use keel_core::tool::ToolKind;
use serde_json::Value;

/// The locked tool set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockedTool {
    Read,
    Write,
    Edit,
    Glob,
    Grep,
    Bash,
    Todo,
    Task,
    Question,
    WebSearch,
    WebFetch,
    Skill,
    ToolSearch,
}

impl LockedTool {
    pub const ALL: [LockedTool; 13] = [
        LockedTool::Read,
        LockedTool::Write,
        LockedTool::Edit,
        LockedTool::Glob,
        LockedTool::Grep,
        LockedTool::Bash,
        LockedTool::Todo,
        LockedTool::Task,
        LockedTool::Question,
        LockedTool::WebSearch,
        LockedTool::WebFetch,
        LockedTool::Skill,
        LockedTool::ToolSearch,
    ];

    pub fn id(self) -> &'static str {
        match self {
            LockedTool::Read => "read",
            LockedTool::Write => "write",
            LockedTool::Edit => "edit",
            LockedTool::Glob => "glob",
            LockedTool::Grep => "grep",
            LockedTool::Bash => "bash",
            LockedTool::Todo => "todo",
            LockedTool::Task => "task",
            LockedTool::Question => "question",
            LockedTool::WebSearch => "web_search",
            LockedTool::WebFetch => "web_fetch",
            LockedTool::Skill => "skill",
            LockedTool::ToolSearch => "tool_search",
        }
    }

    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.id() == id)
    }
}

/// The tool behind a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRef<'a> {
    Locked(LockedTool),
    /// An MCP, project or global tool; `hint` is the kind its spec declares (MCP tools declare
    /// `other`).
    Extension {
        id: &'a str,
        hint: ToolKind,
    },
}

impl<'a> ToolRef<'a> {
    pub fn of(id: &'a str, hint: ToolKind) -> Self {
        match LockedTool::from_id(id) {
            Some(tool) => ToolRef::Locked(tool),
            None => ToolRef::Extension { id, hint },
        }
    }
}

/// The ACP kind of a tool.
pub fn acp_kind(tool: ToolRef<'_>) -> AcpKind {
    match tool {
        ToolRef::Locked(LockedTool::Read) => AcpKind::Read,
        ToolRef::Locked(LockedTool::Write) => AcpKind::Edit,
        ToolRef::Locked(LockedTool::Edit) => AcpKind::Edit,
        ToolRef::Locked(LockedTool::Glob) => AcpKind::Search,
        ToolRef::Locked(LockedTool::Grep) => AcpKind::Search,
        ToolRef::Locked(LockedTool::Bash) => AcpKind::Execute,
        ToolRef::Locked(LockedTool::WebFetch) => AcpKind::Fetch,
        ToolRef::Locked(LockedTool::WebSearch) => AcpKind::Fetch,
        ToolRef::Locked(LockedTool::Task) => AcpKind::Think,
        ToolRef::Locked(LockedTool::Question) => AcpKind::Other,
        ToolRef::Locked(LockedTool::Skill) => AcpKind::Read,
        ToolRef::Locked(LockedTool::ToolSearch) => AcpKind::Search,
        // The todo list is drawn as the session's plan; the call itself is bookkeeping.
        ToolRef::Locked(LockedTool::Todo) => AcpKind::Think,
        ToolRef::Extension { hint, .. } => hinted_kind(hint),
    }
}

/// The ACP kind an extension tool's spec hints at.
fn hinted_kind(hint: ToolKind) -> AcpKind {
    match hint {
        ToolKind::Read => AcpKind::Read,
        ToolKind::Edit => AcpKind::Edit,
        ToolKind::Delete => AcpKind::Delete,
        ToolKind::Move => AcpKind::Move,
        ToolKind::Search => AcpKind::Search,
        ToolKind::Execute => AcpKind::Execute,
        ToolKind::Think => AcpKind::Think,
        ToolKind::Fetch => AcpKind::Fetch,
        ToolKind::SwitchMode => AcpKind::SwitchMode,
        ToolKind::Other => AcpKind::Other,
    }
}

/// The workspace roots, for showing paths the way a person reads them.
#[derive(Debug, Clone, Default)]
pub struct Roots(pub Vec<PathBuf>);

impl Roots {
    /// `path` relative to the root that contains it, else as given.
    pub fn display(&self, path: &str) -> String {
        let candidate = Path::new(path);
        if candidate.is_absolute() {
            for root in &self.0 {
                if let Ok(relative) = candidate.strip_prefix(root) {
                    let shown = relative.display().to_string();
                    return if shown.is_empty() { ".".into() } else { shown };
                }
            }
        }
        path.to_owned()
    }

    /// `path` made absolute against the primary root (ACP locations are absolute).
    pub fn absolute(&self, path: &str) -> PathBuf {
        let candidate = Path::new(path);
        match self.0.first() {
            Some(root) if path.is_empty() || path == "." => root.clone(),
            Some(root) if !candidate.is_absolute() => {
                root.join(candidate.strip_prefix("./").unwrap_or(candidate))
            }
            _ => candidate.to_path_buf(),
        }
    }
}

/// The first string argument among `names`.
fn text_arg<'v>(args: &'v Value, names: &[&str]) -> Option<&'v str> {
    names
        .iter()
        .find_map(|name| args.get(*name).and_then(Value::as_str))
        .filter(|value| !value.is_empty())
}

fn number_arg(args: &Value, names: &[&str]) -> Option<u64> {
    names
        .iter()
        .find_map(|name| args.get(*name).and_then(Value::as_u64))
}

const PATH_ARGS: &[&str] = &["file_path", "path", "filePath"];

/// One line, at most `limit` characters, with an ellipsis when cut.
fn one_line(text: &str, limit: usize) -> String {
    let first = text.lines().next().unwrap_or("").trim_end();
    let cut: String = first.chars().take(limit).collect();
    if cut.len() < first.len() || text.trim_end().contains('\n') {
        format!("{} …", cut.trim_end())
    } else {
        cut
    }
}

/// Inline code that survives backticks in the text.
fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// The host of a URL (no scheme, credentials, port or path), or the URL itself.
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let host = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    if host.is_empty() { url } else { host }
}

/// The title a person reads for a call.
pub fn title(tool: ToolRef<'_>, args: &Value, roots: &Roots) -> String {
    let path = || text_arg(args, PATH_ARGS).map(|p| roots.display(p));
    match tool {
        ToolRef::Locked(LockedTool::Read) => {
            let Some(path) = path() else {
                return "Read a file".into();
            };
            let offset = number_arg(args, &["offset", "start_line"]);
            let limit = number_arg(args, &["limit"]);
            match (offset, limit) {
                (Some(start), Some(count)) if count > 0 => {
                    format!("Read {path} ({start}-{})", start + count - 1)
                }
                (None, Some(count)) if count > 0 => format!("Read {path} (1-{count})"),
                (Some(start), _) => format!("Read {path} (from line {start})"),
                _ => format!("Read {path}"),
            }
        }
        ToolRef::Locked(LockedTool::Write) => match path() {
            Some(path) => format!("Write {path}"),
            None => "Write a file".into(),
        },
        ToolRef::Locked(LockedTool::Edit) => match path() {
            Some(path) => format!("Edit {path}"),
            None => "Edit a file".into(),
        },
        ToolRef::Locked(LockedTool::Glob) => {
            let pattern = text_arg(args, &["pattern", "glob"]).unwrap_or("*");
            match path() {
                Some(path) => format!("Glob {} in {path}", code(pattern)),
                None => format!("Glob {}", code(pattern)),
            }
        }
        ToolRef::Locked(LockedTool::Grep) => {
            let pattern = text_arg(args, &["pattern", "regex", "query"]).unwrap_or("");
            let mut shown = format!("Grep {}", code(&one_line(pattern, 60)));
            if let Some(path) = path() {
                shown.push_str(&format!(" in {path}"));
            }
            if let Some(filter) = text_arg(args, &["glob", "include"]) {
                shown.push_str(&format!(" ({filter})"));
            }
            shown
        }
        ToolRef::Locked(LockedTool::Bash) => match text_arg(args, &["command", "cmd"]) {
            Some(command) => code(&one_line(command, 120)),
            None => "Run a command".into(),
        },
        ToolRef::Locked(LockedTool::WebFetch) => match text_arg(args, &["url"]) {
            Some(url) => format!("Fetch {}", url_host(url)),
            None => "Fetch a page".into(),
        },
        ToolRef::Locked(LockedTool::WebSearch) => match text_arg(args, &["query"]) {
            Some(query) => format!("Search the web: {}", one_line(query, 100)),
            None => "Search the web".into(),
        },
        ToolRef::Locked(LockedTool::Task) if text_arg(args, &["wait"]).is_some() => {
            format!(
                "Wait for {}",
                code(text_arg(args, &["wait"]).unwrap_or_default())
            )
        }
        ToolRef::Locked(LockedTool::Task) if text_arg(args, &["cancel"]).is_some() => {
            format!(
                "Cancel {}",
                code(text_arg(args, &["cancel"]).unwrap_or_default())
            )
        }
        ToolRef::Locked(LockedTool::Task) => {
            match text_arg(args, &["description", "title", "prompt"]) {
                Some(description) => format!("Task: {}", one_line(description, 100)),
                None => "Run a subtask".into(),
            }
        }
        ToolRef::Locked(LockedTool::Question) => {
            let first = args
                .get("questions")
                .and_then(Value::as_array)
                .and_then(|questions| questions.first())
                .and_then(|question| question.get("question"))
                .and_then(Value::as_str);
            match first {
                Some(question) => format!("Ask: {}", one_line(question, 100)),
                None => "Ask the user".into(),
            }
        }
        ToolRef::Locked(LockedTool::Skill) => match text_arg(args, &["name", "skill"]) {
            Some(name) => format!("Load skill {}", code(name)),
            None => "Load a skill".into(),
        },
        ToolRef::Locked(LockedTool::ToolSearch) => match text_arg(args, &["query"]) {
            Some(query) => format!("Search tools: {}", one_line(query, 100)),
            None => "Search tools".into(),
        },
        ToolRef::Locked(LockedTool::Todo) => "Update the plan".into(),
        ToolRef::Extension { id, .. } => id.to_owned(),
    }
}

/// The places a call touches, for the editor's "follow the agent". Prefers the canonical
/// locations the engine reports; falls back to the call's path argument.
pub fn locations(
    tool: ToolRef<'_>,
    args: &Value,
    reported: &[(String, Option<u32>)],
    roots: &Roots,
) -> Vec<ToolCallLocation> {
    if !reported.is_empty() {
        return reported
            .iter()
            .map(|(path, line)| ToolCallLocation::new(PathBuf::from(path)).line(*line))
            .collect();
    }
    let line = match tool {
        ToolRef::Locked(LockedTool::Read) => number_arg(args, &["offset", "start_line"])
            .and_then(|line| u32::try_from(line.max(1)).ok()),
        _ => None,
    };
    let path_tool = matches!(
        tool,
        ToolRef::Locked(
            LockedTool::Read
                | LockedTool::Write
                | LockedTool::Edit
                | LockedTool::Glob
                | LockedTool::Grep
        )
    );
    match text_arg(args, PATH_ARGS) {
        Some(path) if path_tool => vec![ToolCallLocation::new(roots.absolute(path)).line(line)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roots() -> Roots {
        Roots(vec![
            PathBuf::from("/work/project"),
            PathBuf::from("/work/lib"),
        ])
    }

    fn locked(id: &str) -> ToolRef<'_> {
        ToolRef::of(id, ToolKind::Other)
    }

    #[test]
    fn every_locked_tool_has_a_kind() {
        let table: Vec<String> = LockedTool::ALL
            .into_iter()
            .map(|tool| {
                let kind = serde_json::to_value(acp_kind(ToolRef::Locked(tool))).unwrap();
                format!("{} -> {}", tool.id(), kind.as_str().unwrap())
            })
            .collect();
        insta::assert_snapshot!(table.join("\n"), @r"
        read -> read
        write -> edit
        edit -> edit
        glob -> search
        grep -> search
        bash -> execute
        todo -> think
        task -> think
        question -> other
        web_search -> fetch
        web_fetch -> fetch
        skill -> read
        tool_search -> search
        ");
    }

    #[test]
    fn extensions_follow_their_hint_and_mcp_tools_are_other() {
        assert_eq!(
            acp_kind(ToolRef::of("github__create_issue", ToolKind::Other)),
            AcpKind::Other
        );
        assert_eq!(
            acp_kind(ToolRef::of("deploy", ToolKind::Execute)),
            AcpKind::Execute
        );
        // A locked id keeps its table kind whatever the hint says.
        assert_eq!(
            acp_kind(ToolRef::of("bash", ToolKind::Other)),
            AcpKind::Execute
        );
    }

    #[test]
    fn titles() {
        let r = roots();
        let cases = [
            (
                "read",
                json!({"file_path": "/work/project/src/main.rs", "offset": 1, "limit": 40}),
            ),
            ("read", json!({"file_path": "src/lib.rs"})),
            (
                "read",
                json!({"file_path": "/work/lib/a.rs", "offset": 100}),
            ),
            ("read", json!({"file_path": "/etc/hosts", "limit": 10})),
            (
                "write",
                json!({"file_path": "/work/project/src/new.rs", "content": "x"}),
            ),
            (
                "edit",
                json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
            ),
            ("bash", json!({"command": "cargo test"})),
            ("bash", json!({"command": "echo `date`"})),
            (
                "bash",
                json!({"command": "set -e\ncargo build\ncargo test"}),
            ),
            ("grep", json!({"pattern": "fn main", "path": "src/"})),
            ("grep", json!({"pattern": "TODO", "glob": "*.rs"})),
            ("glob", json!({"pattern": "**/*.rs"})),
            (
                "glob",
                json!({"pattern": "*.toml", "path": "/work/project/crates"}),
            ),
            (
                "web_fetch",
                json!({"url": "https://docs.rs/tokio/latest/tokio/"}),
            ),
            ("web_fetch", json!({"url": "http://user@127.0.0.1:8080/x"})),
            ("web_search", json!({"query": "ACP tool kinds"})),
            (
                "task",
                json!({"description": "Find the flaky test", "prompt": "..."}),
            ),
            (
                "question",
                json!({"questions": [{"question": "Which database?"}]}),
            ),
            ("skill", json!({"name": "release"})),
            ("tool_search", json!({"query": "github issues"})),
            ("todo", json!({"todos": []})),
            ("github__create_issue", json!({"title": "x"})),
            ("read", json!("not an object")),
        ];
        let shown: Vec<String> = cases
            .iter()
            .map(|(id, args)| format!("{id}: {}", title(locked(id), args, &r)))
            .collect();
        insta::assert_snapshot!(shown.join("\n"), @r"
        read: Read src/main.rs (1-40)
        read: Read src/lib.rs
        read: Read a.rs (from line 100)
        read: Read /etc/hosts (1-10)
        write: Write src/new.rs
        edit: Edit src/lib.rs
        bash: `cargo test`
        bash: `` echo `date` ``
        bash: `set -e …`
        grep: Grep `fn main` in src/
        grep: Grep `TODO` (*.rs)
        glob: Glob `**/*.rs`
        glob: Glob `*.toml` in crates
        web_fetch: Fetch docs.rs
        web_fetch: Fetch 127.0.0.1
        web_search: Search the web: ACP tool kinds
        task: Task: Find the flaky test
        question: Ask: Which database?
        skill: Load skill `release`
        tool_search: Search tools: github issues
        todo: Update the plan
        github__create_issue: github__create_issue
        read: Read a file
        ");
    }

    #[test]
    fn locations_prefer_reported_paths_and_fall_back_to_arguments() {
        let r = roots();
        let reported = vec![("/work/project/src/main.rs".to_owned(), Some(3))];
        let located = locations(locked("read"), &json!({}), &reported, &r);
        assert_eq!(
            located,
            vec![ToolCallLocation::new("/work/project/src/main.rs").line(3)]
        );
        let located = locations(
            locked("read"),
            &json!({"file_path": "src/a.rs", "offset": 12}),
            &[],
            &r,
        );
        assert_eq!(
            located,
            vec![ToolCallLocation::new("/work/project/src/a.rs").line(12)]
        );
        let located = locations(
            locked("bash"),
            &json!({"command": "ls", "path": "x"}),
            &[],
            &r,
        );
        assert!(located.is_empty());
    }
}
