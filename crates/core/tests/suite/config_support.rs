//! Shared fixture of the configuration tests: a temporary home and workspace, and the load
//! options the binary would use with them.

use std::path::PathBuf;

use keel_core::config::LoadOptions;

/// A temporary home (with the user file under `.config/keel/`) and a workspace (with its
/// `.keel/`), both under one canonical `base`.
pub struct Dirs {
    _root: tempfile::TempDir,
    pub base: PathBuf,
    pub home: PathBuf,
    pub workspace: PathBuf,
}

impl Dirs {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let home = base.join("home");
        let workspace = base.join("work/project");
        std::fs::create_dir_all(home.join(".config/keel")).unwrap();
        std::fs::create_dir_all(workspace.join(".keel")).unwrap();
        Self {
            _root: root,
            base,
            home,
            workspace,
        }
    }

    pub fn user_file(&self) -> PathBuf {
        self.home.join(".config/keel/config.toml")
    }

    pub fn project_file(&self) -> PathBuf {
        self.workspace.join(".keel/config.toml")
    }

    pub fn write_user(&self, text: &str) {
        std::fs::write(self.user_file(), text).unwrap();
    }

    pub fn write_project(&self, text: &str) {
        std::fs::write(self.project_file(), text).unwrap();
    }

    /// As the binary would see it with this home, run from inside the workspace, the project
    /// trusted or not.
    pub fn options(&self, project_trusted: bool) -> LoadOptions {
        LoadOptions {
            user_file: Some(self.user_file()),
            workspace: Some(self.workspace.clone()),
            home: Some(self.home.clone()),
            cwd: Some(self.workspace.clone()),
            project_trusted,
            ..LoadOptions::default()
        }
    }
}
