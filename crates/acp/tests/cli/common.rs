//! A sandbox for running `keel`: a temporary home (XDG dirs inside it) and a workspace, and a
//! command builder that sees only those.

use std::path::{Path, PathBuf};

/// Temporary home and workspace; removed on drop.
pub struct Sandbox {
    _root: tempfile::TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
}

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let home = base.join("home");
        let workspace = base.join("workspace");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        Self {
            _root: root,
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

    pub fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `keel ARGS…` with HOME and the XDG dirs in the sandbox, no KEEL_*/RUST_LOG from the
    /// outside, run from the workspace.
    pub fn keel(&self, args: &[&str]) -> assert_cmd::Command {
        assert_cmd::Command::from_std(self.keel_process(args))
    }

    /// The same, as a plain process (for tests that signal it).
    pub fn keel_process(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("keel"));
        command
            .args(args)
            .current_dir(&self.workspace)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env_remove("KEEL_CONFIG")
            .env_remove("KEEL_MODEL")
            .env_remove("KEEL_MODE")
            .env_remove("KEEL_SCRIPT")
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("OPENAI_BASE_URL");
        command
    }
}

/// stdout and stderr of a finished run, as text.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(mut command: assert_cmd::Command) -> Output {
    let output = command.output().unwrap();
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}
