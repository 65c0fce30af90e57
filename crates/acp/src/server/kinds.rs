//! How a tool call looks in the editor. The engine says it all in types: each tool gives its
//! call's title and locations ([`keel_core::tool::CallView`], from its typed arguments) and its
//! spec's [`ToolKind`]; this module only maps those types to ACP, in one place each.
//!
//! - [`acp_kind`]: a tool's kind (from its spec, nothing else) as ACP's. Extension and MCP tools
//!   declare theirs in their spec too (MCP: from the server's annotations, `other` by default).
//! - [`locations`]: the engine's locations as ACP's.
//! - [`diff_content`]: the engine's one diff type ([`keel_diff::AcpDiff`], already bounded) as
//!   ACP diff content, with a note when only the changed parts of a large file are shown.
//! - [`ToolRef`]: a call's tool, the locked ones typed ([`BundledTool`], the engine's one list of
//!   the bundled ids), for what the front-end draws differently (a fenced output, the plan of
//!   `todo`, the `question` prompt).

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    Diff, ToolCallContent, ToolCallLocation, ToolKind as AcpKind,
};
use keel_core::tool::{BundledTool, Location, ToolKind};

/// The tool behind a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRef<'a> {
    Locked(BundledTool),
    /// An MCP, project or global tool.
    Extension {
        id: &'a str,
    },
}

impl<'a> ToolRef<'a> {
    pub fn of(id: &'a str) -> Self {
        match BundledTool::from_id(id).filter(|tool| tool.is_locked()) {
            Some(tool) => ToolRef::Locked(tool),
            None => ToolRef::Extension { id },
        }
    }
}

/// The ACP kind of a tool: its spec's kind, mapped.
pub fn acp_kind(kind: ToolKind) -> AcpKind {
    match kind {
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

/// The engine's locations of a call as ACP's.
pub fn locations(locations: &[Location]) -> Vec<ToolCallLocation> {
    locations
        .iter()
        .map(|location| ToolCallLocation::new(PathBuf::from(&location.path)).line(location.line))
        .collect()
}

/// The note shown under a diff of which only the changed parts were sent.
pub const BOUNDED_NOTE: &str = "(The file is large: the diff shows only the changed parts, not \
the whole file.)";

/// A diff as ACP content: the diff itself and, when it was cut to its changed parts, a note
/// saying so (and `_meta.keel.bounded` on the diff).
pub fn diff_content(diff: &keel_diff::AcpDiff) -> Vec<ToolCallContent> {
    let mut content =
        Diff::new(PathBuf::from(&diff.path), diff.new_text.clone()).old_text(diff.old_text.clone());
    if !diff.bounded {
        return vec![ToolCallContent::Diff(content)];
    }
    let mut keel = serde_json::Map::new();
    keel.insert("bounded".into(), serde_json::Value::Bool(true));
    let mut meta = serde_json::Map::new();
    meta.insert("keel".into(), serde_json::Value::Object(keel));
    content = content.meta(meta);
    vec![
        ToolCallContent::Diff(content),
        ToolCallContent::from(BOUNDED_NOTE.to_owned()),
    ]
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

    /// What a call of a bundled tool is titled, through the tool's own `describe`.
    fn title(id: &str, args: &serde_json::Value, roots: &Roots) -> String {
        let registry = keel_core::tools::bundled(&|_| None).unwrap();
        let tool = registry.get(id).unwrap();
        let how = keel_core::tool::Describe { roots: &roots.0 };
        match tool.parse(args, how) {
            Ok(parsed) => parsed.view.title,
            Err(_) => tool.spec().title.clone(),
        }
    }

    #[test]
    fn every_locked_tool_has_a_kind() {
        let registry = keel_core::tools::bundled(&|_| None).unwrap();
        let table: Vec<String> = BundledTool::ALL
            .into_iter()
            .filter(|tool| tool.is_locked())
            .map(|tool| {
                let spec = registry.get(tool.id()).unwrap().spec();
                let kind = serde_json::to_value(acp_kind(spec.kind)).unwrap();
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
        web_fetch -> fetch
        web_search -> fetch
        skill -> read
        tool_search -> search
        ");
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
                json!({"questions": [{"question": "Which database?", "options": []}]}),
            ),
            ("skill", json!({"name": "release"})),
            ("tool_search", json!({"query": "github issues"})),
            ("todo", json!({"todos": []})),
            ("read", json!("not an object")),
        ];
        let shown: Vec<String> = cases
            .iter()
            .map(|(id, args)| format!("{id}: {}", title(id, args, &r)))
            .collect();
        insta::assert_snapshot!(shown.join("\n"), @r#"
        read: Read src/main.rs (1-40)
        read: Read src/lib.rs
        read: Read a.rs (from line 100)
        read: Read /etc/hosts (1-10)
        write: Write src/new.rs
        edit: Edit src/lib.rs
        bash: cargo test
        bash: echo `date`
        bash: set -e …
        grep: Grep `fn main` in src/
        grep: Grep `TODO` (*.rs)
        glob: Glob `**/*.rs`
        glob: Glob `*.toml` in crates
        web_fetch: Fetch docs.rs
        web_fetch: Fetch 127.0.0.1
        web_search: Search the web: ACP tool kinds
        task: Task: Find the flaky test
        question: The model asks: "Which database?"
        skill: Load skill `release`
        tool_search: Search tools: github issues
        todo: Update the plan
        read: Read a file
        "#);
    }

    #[test]
    fn large_diffs_say_they_were_cut() {
        let small = keel_diff::AcpDiff {
            path: "/w/a".into(),
            old_text: Some("a\n".into()),
            new_text: "b\n".into(),
            bounded: false,
        };
        assert_eq!(diff_content(&small).len(), 1);
        let large = keel_diff::AcpDiff {
            bounded: true,
            ..small
        };
        let wire = serde_json::to_value(diff_content(&large)).unwrap();
        assert_eq!(wire[0]["_meta"]["keel"]["bounded"], true, "{wire}");
        assert_eq!(wire[1]["content"]["text"], BOUNDED_NOTE);
    }
}
