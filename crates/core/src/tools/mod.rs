//! The locked tools, and the extensions beside them. Each file is one tool: its parameters
//! type, its spec and its handler (`patch` is `apply_patch`'s parser, `aliases` the table of
//! other agents' tool names, `background` the four background-command tools).

pub mod aliases;
pub mod apply_patch;
pub mod background;
pub mod bash;
pub mod edit;
pub mod extension;
pub mod glob;
pub mod grep;
pub mod patch;
pub mod question;
pub mod read;
pub mod skill;
pub mod task;
pub mod text;
pub mod todo;
pub mod tool_search;
pub mod web_fetch;
pub mod web_search;
pub mod write;

use crate::tool::{Registry, RegistryError, ToolError, Typed};

/// Why the bundled tools could not be registered (a broken invariant of Keel's own).
#[derive(Debug, thiserror::Error)]
pub enum BundledError {
    /// A tool's schema did not compile.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// Two tools share an id, or an id is invalid.
    #[error(transparent)]
    Register(#[from] RegistryError),
}

/// The bundled tools, in documentation order. `env` supplies the web search settings
/// (`KEEL_SEARXNG_URL`, `BRAVE_API_KEY`); without them `web_search` answers with what to set.
pub fn bundled(env: &dyn Fn(&str) -> Option<String>) -> Result<Registry, BundledError> {
    let tools = [
        Typed::wrap(read::ReadTool),
        Typed::wrap(write::WriteTool),
        Typed::wrap(edit::EditTool),
        Typed::wrap(glob::GlobTool),
        Typed::wrap(grep::GrepTool),
        Typed::wrap(bash::BashTool),
        Typed::wrap(todo::TodoTool),
        Typed::wrap(task::TaskTool),
        Typed::wrap(question::QuestionTool),
        Typed::wrap(web_fetch::WebFetchTool),
        Typed::wrap(web_search::WebSearchTool::from_vars(
            env,
            web_search::SearchLimits::default(),
        )),
        Typed::wrap(skill::SkillTool),
        // Offered only when extension tools are left out of the request (see `tool_search`).
        Typed::wrap(tool_search::ToolSearchTool),
    ];
    // Extensions beside the locked set (the seeds' common extensions); the locked ids keep
    // their shape.
    let extensions = [
        apply_patch::ApplyPatchTool::wrap(),
        Typed::wrap(background::BgStartTool),
        Typed::wrap(background::BgReadTool),
        Typed::wrap(background::BgWriteTool),
        Typed::wrap(background::BgStopTool),
    ];
    let mut registry = Registry::new();
    for tool in tools.into_iter().chain(extensions) {
        registry.register(tool?)?;
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use crate::tool::{BundledTool, Subject, ToolKind};

    #[test]
    fn the_registry_holds_exactly_the_bundled_ids_in_their_order() {
        let registry = super::bundled(&|_| None).unwrap();
        let ids: Vec<&str> = registry.specs().map(|s| s.id.as_str()).collect();
        let bundled: Vec<&str> = BundledTool::ALL.iter().map(|t| t.id()).collect();
        assert_eq!(ids, bundled);
        let locked = BundledTool::ALL.iter().filter(|t| t.is_locked()).count();
        assert_eq!(locked, 13);
    }

    #[test]
    fn bundled_tools_are_the_locked_set_then_the_extensions_with_their_shapes() {
        let registry = super::bundled(&|_| None).unwrap();
        let shapes: Vec<(String, ToolKind, bool, Subject)> = registry
            .specs()
            .map(|s| (s.id.clone(), s.kind, s.mutating, s.subject.clone()))
            .collect();
        let path = |f: &str| Subject::Path(Some(f.to_owned()));
        assert_eq!(
            shapes,
            vec![
                ("read".into(), ToolKind::Read, false, path("file_path")),
                ("write".into(), ToolKind::Edit, true, path("file_path")),
                ("edit".into(), ToolKind::Edit, true, path("file_path")),
                ("glob".into(), ToolKind::Search, false, path("path")),
                ("grep".into(), ToolKind::Search, false, path("path")),
                (
                    "bash".into(),
                    ToolKind::Execute,
                    true,
                    Subject::Command("command".into())
                ),
                ("todo".into(), ToolKind::Think, false, Subject::None),
                ("task".into(), ToolKind::Think, false, Subject::None),
                ("question".into(), ToolKind::Other, false, Subject::None),
                (
                    "web_fetch".into(),
                    ToolKind::Fetch,
                    false,
                    Subject::Url("url".into())
                ),
                (
                    "web_search".into(),
                    ToolKind::Fetch,
                    false,
                    Subject::Query("query".into())
                ),
                ("skill".into(), ToolKind::Read, false, Subject::None),
                ("tool_search".into(), ToolKind::Search, false, Subject::None),
                ("apply_patch".into(), ToolKind::Edit, true, Subject::Paths),
                (
                    "bg_start".into(),
                    ToolKind::Execute,
                    true,
                    Subject::Command("command".into())
                ),
                ("bg_read".into(), ToolKind::Read, false, Subject::None),
                ("bg_write".into(), ToolKind::Execute, true, Subject::None),
                ("bg_stop".into(), ToolKind::Execute, false, Subject::None),
            ]
        );
    }
}
