//! Shared fixtures for the policy tests: a real temporary world (home, workspace, outside
//! directory, symlinks), tool specs shaped like the locked tools, and a runtime over them.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::policy::{Mode, Policy, PolicyLayers, Trust};
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{CallTarget, Origin, Subject, ToolKind, ToolSpec};

/// A temporary world:
/// ```text
/// <tmp>/home/{.bashrc, .ssh/id_rsa, .aws/credentials, .config/keel/}
/// <tmp>/ws/{src/main.rs, src/up -> .., docs/café/readme.md, .keel/, .env, README.md,
///           link_out -> ../outside, link_keel -> .keel, link_bashrc -> ../home/.bashrc}
/// <tmp>/outside/secret.txt
/// ```
pub struct World {
    _dir: tempfile::TempDir,
    pub tmp: PathBuf,
    pub home: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub global: PathBuf,
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(dir.path()).unwrap();
        let home = tmp.join("home");
        let ws = tmp.join("ws");
        let outside = tmp.join("outside");
        let global = home.join(".config/keel");
        for d in [
            home.join(".ssh"),
            home.join(".aws"),
            global.clone(),
            ws.join("src"),
            ws.join("docs/caf\u{e9}"),
            ws.join(".keel"),
            ws.join(".git/hooks"),
            outside.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        for (path, text) in [
            (home.join(".bashrc"), "alias ll='ls -l'\n"),
            (home.join(".ssh/id_rsa"), "KEY\n"),
            (home.join(".aws/credentials"), "[default]\n"),
            (ws.join("src/main.rs"), "fn main() {}\n"),
            (ws.join("docs/caf\u{e9}/readme.md"), "# café\n"),
            (ws.join(".env"), "TOKEN=1\n"),
            (ws.join("README.md"), "# ws\n"),
            (ws.join(".git/config"), "[core]\n"),
            (outside.join("secret.txt"), "secret\n"),
        ] {
            std::fs::write(path, text).unwrap();
        }
        symlink("..", ws.join("src/up")).unwrap();
        symlink("../outside", ws.join("link_out")).unwrap();
        symlink(".keel", ws.join("link_keel")).unwrap();
        symlink("../home/.bashrc", ws.join("link_bashrc")).unwrap();
        Self {
            _dir: dir,
            tmp,
            home,
            ws,
            outside,
            global,
        }
    }

    /// Replaces `{ws}`, `{home}`, `{outside}`, `{tmp}` in a string.
    pub fn expand(&self, text: &str) -> String {
        text.replace("{ws}", &self.ws.display().to_string())
            .replace("{home}", &self.home.display().to_string())
            .replace("{outside}", &self.outside.display().to_string())
            .replace("{tmp}", &self.tmp.display().to_string())
    }

    /// Writes a file under the temporary directory (`path` relative to it; parents created).
    pub fn write_file(&self, path: &str, text: &str) {
        let path = self.tmp.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, self.expand(text)).unwrap();
    }

    /// Creates a directory under the temporary directory.
    pub fn make_dir(&self, path: &str) {
        std::fs::create_dir_all(self.tmp.join(path)).unwrap();
    }

    /// Creates a symlink under the temporary directory pointing at `target` (as written).
    pub fn make_link(&self, path: &str, target: &str) {
        let path = self.tmp.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(self.expand(target), path).unwrap();
    }

    pub fn write_project_rules(&self, text: &str) {
        std::fs::write(self.ws.join(".keel/permissions.toml"), text).unwrap();
    }

    pub fn write_global_rules(&self, text: &str) {
        std::fs::write(self.global.join("permissions.toml"), text).unwrap();
    }

    /// A runtime over the workspace. `scope`: `wide` (reads and writes anywhere under the
    /// temporary directory, any command, any host), `workspace-writes` (writes only in the
    /// workspace), `git-only` (the only program is git).
    pub fn runtime(&self, scope: &str) -> Runtime {
        let writes: &[&str] = match scope {
            "workspace-writes" => &["{workspace}/**"],
            _ => &["{workspace}/**", "{user-data}/**"],
        };
        let command = if scope == "git-only" { "git" } else { "*" };
        let requirements = RequirementSet::fs_read_write(
            &["{workspace}/**", "{session}/**", "{user-data}/**"],
            writes,
        )
        .union(&RequirementSet::net_hosts(&["*"]))
        .with_shell(ShellRunRequirement::any_args(command));
        Runtime::new(RuntimeConfig {
            roots: vec![self.ws.clone()],
            requirements,
            ad_hoc: Vec::new(),
            user_data: Some(self.tmp.clone()),
            scratch_dir: self.tmp.join("scratch"),
            sandbox: super::tool_support::sandbox_spec(),
        })
        .unwrap()
    }

    pub fn policy(&self, mode: Mode, headless: bool, trust: Trust) -> Policy {
        let layers = PolicyLayers::load(&self.ws, Some(&self.global), trust)
            .unwrap()
            .with_home(Some(self.home.clone()));
        Policy::new(layers, mode, headless).unwrap()
    }
}

/// Specs shaped like the locked tools (and one MCP tool).
pub fn spec(tool: &str) -> ToolSpec {
    type Params = serde_json::Value;
    match tool {
        "read" => ToolSpec::new::<Params>("read", "read a file")
            .kind(ToolKind::Read)
            .read_only()
            .subject(Subject::Path(Some("file_path".into()))),
        "write" | "edit" => ToolSpec::new::<Params>(tool, "change a file")
            .kind(ToolKind::Edit)
            .subject(Subject::Path(Some("file_path".into()))),
        "glob" | "grep" => ToolSpec::new::<Params>(tool, "search")
            .kind(ToolKind::Search)
            .read_only()
            .subject(Subject::Path(Some("path".into()))),
        "bash" => ToolSpec::new::<Params>("bash", "run a command")
            .kind(ToolKind::Execute)
            .subject(Subject::Command("command".into())),
        "web_fetch" => ToolSpec::new::<Params>("web_fetch", "fetch a URL")
            .kind(ToolKind::Fetch)
            .read_only()
            .subject(Subject::Url("url".into())),
        "web_search" => ToolSpec::new::<Params>("web_search", "search the web")
            .kind(ToolKind::Fetch)
            .read_only()
            .subject(Subject::Query("query".into()))
            .requires(RequirementSet::net_hosts(&["api.search.example"])),
        "todo" => ToolSpec::new::<Params>("todo", "todo list")
            .kind(ToolKind::Think)
            .read_only(),
        "github/create_issue" => ToolSpec::new::<Params>("create_issue", "open an issue")
            .origin(Origin::Mcp("github".into())),
        other => panic!("no spec for tool `{other}` in the policy tests"),
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/policy")
        .join(name)
}

/// What a call with these JSON arguments acts on, read as the bundled tools read theirs from
/// their typed arguments (a shell call's `cwd` and `unsandboxed` included).
pub fn target(spec: &ToolSpec, args: &serde_json::Value) -> CallTarget {
    match CallTarget::from_json(&spec.subject, args) {
        CallTarget::Command(mut command) => {
            command.cwd = args
                .get("cwd")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
            command.unsandboxed =
                args.get("unsandboxed").and_then(serde_json::Value::as_bool) == Some(true);
            CallTarget::Command(command)
        }
        other => other,
    }
}
