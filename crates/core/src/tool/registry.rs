//! The tools of a session.

use std::sync::Arc;

use super::{DynTool, ToolSpec};

/// Why a registration failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    #[error("tool id `{0}` is not valid: use 1-64 characters of [a-zA-Z0-9_-]")]
    InvalidId(String),
}

/// Registered tools in registration order (which is the documentation order).
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn DynTool>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| &t.spec().id))
            .finish()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool. Duplicate ids are rejected.
    pub fn register(&mut self, tool: Arc<dyn DynTool>) -> Result<(), RegistryError> {
        let id = &tool.spec().id;
        let valid = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(RegistryError::InvalidId(id.clone()));
        }
        if self.get(id).is_some() {
            return Err(RegistryError::Duplicate(id.clone()));
        }
        self.tools.push(tool);
        Ok(())
    }

    /// Registers a tool that may shadow an earlier one of the same id (project over global over
    /// bundled). Returns the shadowed tool.
    pub fn register_shadowing(&mut self, tool: Arc<dyn DynTool>) -> Option<Arc<dyn DynTool>> {
        let id = tool.spec().id.clone();
        match self.tools.iter().position(|t| t.spec().id == id) {
            Some(i) => Some(std::mem::replace(&mut self.tools[i], tool)),
            None => {
                self.tools.push(tool);
                None
            }
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<Arc<dyn DynTool>> {
        let i = self.tools.iter().position(|t| t.spec().id == id)?;
        Some(self.tools.remove(i))
    }

    pub fn get(&self, id: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.iter().find(|t| t.spec().id == id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn DynTool>> {
        self.tools.iter()
    }

    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().map(|t| t.spec())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The bundled tools: the one place their ids are spelled. Everything else (the tools' own
/// specs, the rules, the turn, the front-ends) names a bundled tool through this type, so no
/// id is written twice and none names a tool Keel does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BundledTool {
    Read,
    Write,
    Edit,
    Glob,
    Grep,
    Bash,
    Todo,
    Task,
    Question,
    WebFetch,
    WebSearch,
    Skill,
    ToolSearch,
    ApplyPatch,
    BgStart,
    BgRead,
    BgWrite,
    BgStop,
}

impl BundledTool {
    /// Every bundled tool: the locked set, then the extensions beside it.
    pub const ALL: [BundledTool; 18] = [
        BundledTool::Read,
        BundledTool::Write,
        BundledTool::Edit,
        BundledTool::Glob,
        BundledTool::Grep,
        BundledTool::Bash,
        BundledTool::Todo,
        BundledTool::Task,
        BundledTool::Question,
        BundledTool::WebFetch,
        BundledTool::WebSearch,
        BundledTool::Skill,
        BundledTool::ToolSearch,
        BundledTool::ApplyPatch,
        BundledTool::BgStart,
        BundledTool::BgRead,
        BundledTool::BgWrite,
        BundledTool::BgStop,
    ];

    /// The tool's id, as the model calls it.
    pub const fn id(self) -> &'static str {
        match self {
            BundledTool::Read => "read",
            BundledTool::Write => "write",
            BundledTool::Edit => "edit",
            BundledTool::Glob => "glob",
            BundledTool::Grep => "grep",
            BundledTool::Bash => "bash",
            BundledTool::Todo => "todo",
            BundledTool::Task => "task",
            BundledTool::Question => "question",
            BundledTool::WebSearch => "web_search",
            BundledTool::WebFetch => "web_fetch",
            BundledTool::Skill => "skill",
            BundledTool::ToolSearch => "tool_search",
            BundledTool::ApplyPatch => "apply_patch",
            BundledTool::BgStart => "bg_start",
            BundledTool::BgRead => "bg_read",
            BundledTool::BgWrite => "bg_write",
            BundledTool::BgStop => "bg_stop",
        }
    }

    /// The bundled tool with this id, if any.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.id() == id)
    }

    /// One of the locked set (the seeds' thirteen tools), not an extension beside it.
    pub fn is_locked(self) -> bool {
        !matches!(
            self,
            BundledTool::ApplyPatch
                | BundledTool::BgStart
                | BundledTool::BgRead
                | BundledTool::BgWrite
                | BundledTool::BgStop
        )
    }
}
