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
