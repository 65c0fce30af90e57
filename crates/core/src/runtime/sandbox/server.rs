//! MCP stdio servers start like commands: through the sandbox helper, with a profile of their
//! own (docs/sandbox.md, "MCP servers").
//!
//! A server is a long-lived program that the user, the editor or a trusted project configured,
//! usually started by a launcher (`npx`, `uvx`, `python3 -m`) and talking to a remote API. Its
//! profile ([`super::super::Runtime::server_invocation`]):
//!
//! - **network**: on, the whole of it, without the filtering proxy: a server exists to reach its
//!   API, and its hosts are not the commands' `shell.net` rules' business. `network = false` in
//!   its table takes it away (no proxy either).
//! - **workspace**: readable, never writable unless its table names paths in `writable`
//!   (`.git/hooks`, `.git/config`, `.keel` stay read-only inside them, as for commands).
//! - **home**: hidden, but for the commands' allowlist plus the launchers' homes
//!   ([`SERVER_HOME_READABLE`]), all read-only: a server never writes a cache the user's own
//!   `npx` or another server would run from (`~/.npm/_npx` holds installed packages that npx
//!   runs without checking them again). Its packages go to caches of its own
//!   ([`ServerLaunch::caches`]: `npm_config_cache`, `UV_CACHE_DIR`), writable, kept across
//!   sessions. Every home credential inside what it sees is masked, unless its table names that
//!   credential (`read = ["~/.aws"]`); the values of its own `env` reach it.
//! - **working directory**: an empty directory of its own (`<scratch>/mcp/NAME`, writable), so
//!   the launchers' project-local resolution (`node_modules/.bin`, `.npmrc`, `./pkg`,
//!   `uv.toml`) finds nothing of the repository; under namespaces its parents are empty too. A
//!   trusted project's own server starts in the workspace (its arguments name the project's
//!   files), read-only.
//! - **environment**: exactly [`ServerInvocation::env`]: a few of Keel's variables
//!   ([`crate::runtime::mcp::INHERITED_ENV`]), `PYTHONSAFEPATH=1` for a server the project did
//!   not configure, then its configured `env`.
//!
//! With `[sandbox] mode = "off"` a server starts as before the sandbox covered servers (the
//! same working directory and environment, unconfined). With `required` and no helper it is not
//! started; with `required` and no mechanism the helper refuses it, and its message is the last
//! line of the server's stderr that the failure shows.

use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ConfinementCheck, DEFAULT_HOME_READABLE, MAX_PROFILE_ENV_BYTES, PROFILE_ENV, SYSTEM_DIRS,
    SandboxMode, home_entry, profile,
};

/// Home paths a server sees besides the commands' allowlist (read-only), relative to `$HOME`:
/// where uv keeps the Pythons it installs and nvm the Node versions.
pub const SERVER_HOME_READABLE: &[&str] = &[".local/share/uv", ".nvm"];

/// The package caches a server gets of its own (variable, subdirectory of
/// [`ServerLaunch::caches`]): where `npx -y` and `uvx` install the server's package.
pub const SERVER_CACHES: &[(&str, &str)] = &[("npm_config_cache", "npm"), ("UV_CACHE_DIR", "uv")];

/// What one server may reach besides its profile's defaults: `read`, `writable` and `network`
/// of its `[mcp_servers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServerAccess {
    /// More paths it may read (absolute, `~/...`, or relative to the workspace root).
    pub read: Vec<String>,
    /// Paths it may write (the same forms; `"."` is the workspace).
    pub writable: Vec<String>,
    /// Whether it has the network (all of it). Default: `true`.
    pub network: bool,
}

impl Default for ServerAccess {
    fn default() -> Self {
        Self {
            read: Vec::new(),
            writable: Vec::new(),
            network: true,
        }
    }
}

/// One server to start.
#[derive(Debug, Clone, Copy)]
pub struct ServerLaunch<'a> {
    /// Its name (its working directory is named after it).
    pub name: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    /// Its configured environment (applied last).
    pub env: &'a [(String, String)],
    /// A trusted project configured it: it starts in the workspace, with Python's own
    /// resolution as the project left it.
    pub project: bool,
    pub access: &'a ServerAccess,
    /// The session's directory of servers' working directories: a server the project did not
    /// configure starts in an empty one of its own below it ([`server_dir`]).
    pub neutral: &'a Path,
    /// Where its own package caches go in the sandbox ([`SERVER_CACHES`], below
    /// [`server_dir`]`(caches, name)`): Keel's cache directory, kept across sessions; `None`:
    /// the session's scratch directory.
    pub caches: Option<&'a Path>,
}

/// The working directory of the server `name` below `neutral`: one per server, so a server
/// cannot leave a `node_modules` or `.npmrc` where another one's launcher would find it.
/// Characters outside `[A-Za-z0-9_-]` become `_`, and the name's bytes in hex are added then,
/// so two names never share a directory.
pub fn server_dir(neutral: &Path, name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Unchanged by the mapping: every character was already allowed.
    if !name.is_empty() && safe == name {
        return neutral.join(name);
    }
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    neutral.join(format!("{safe}-{hex}"))
}

/// A server ready to start: the program (the helper, or the server itself), its arguments, its
/// whole environment and working directory, and how to check its confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInvocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The process's whole environment (nothing else of Keel's is passed).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// `Some` when the helper runs the server: read once it answered (or failed) the handshake.
    pub check: Option<ConfinementCheck>,
    /// Why the server runs unconfined without asking the helper.
    pub unconfined: Option<String>,
}

/// Why a server cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum ServerLaunchError {
    #[error("{0}")]
    NotFound(String),
    #[error(
        "[sandbox] mode = \"required\", but no sandbox helper is configured; the server was not \
         started"
    )]
    NoHelper,
    #[error("cannot prepare the sandbox: {0}")]
    Io(String),
}

/// `text` as a path: absolute, `~/...` (against `home`), or relative to `workspace`; `..` is
/// refused. Canonical; `None` when it does not exist.
fn expand(text: &str, home: Option<&Path>, workspace: &Path) -> Option<PathBuf> {
    let path = match (text.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        (Some(_), None) => return None,
        (None, _) if text == "~" => home?.to_path_buf(),
        (None, _) if Path::new(text).is_absolute() => PathBuf::from(text),
        (None, _) => workspace.join(text),
    };
    if path.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    crate::runtime::probe::canonicalize(&path).ok()
}

/// Where the server's program is: `command` itself when it holds a `/` (relative to `cwd`),
/// else the first executable of that name on `path` (relative entries against `cwd`).
fn find_program(command: &str, path: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    use crate::runtime::probe::is_executable_file;
    if command.contains('/') {
        let found = cwd.join(command);
        return is_executable_file(&found).then_some(found);
    }
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| cwd.join(dir).join(command))
        .find(|candidate| is_executable_file(candidate))
}

/// A server's working directory, environment and program, before the sandbox is decided.
struct ServerStart {
    program: PathBuf,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

impl ServerStart {
    /// The server started as it is, unconfined for `reason`.
    fn direct(self, launch: &ServerLaunch<'_>, reason: &str) -> ServerInvocation {
        ServerInvocation {
            // A path is the one found against the server's working directory.
            program: if launch.command.contains('/') {
                self.program
            } else {
                PathBuf::from(launch.command)
            },
            args: launch.args.to_vec(),
            env: self.env,
            cwd: self.cwd,
            check: None,
            unconfined: Some(reason.to_owned()),
        }
    }
}

fn io_error(what: &Path, e: std::io::Error) -> ServerLaunchError {
    ServerLaunchError::Io(format!("{}: {e}", what.display()))
}

/// Hands the helper its profile `text`: in the environment when it is small enough, else
/// written to `file`, named in `args`, and returned.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
fn pass_profile(
    text: String,
    file: &Path,
    env: &mut Vec<(String, String)>,
    args: &mut Vec<String>,
) -> Result<Option<PathBuf>, ServerLaunchError> {
    if text.len() <= MAX_PROFILE_ENV_BYTES {
        env.push((PROFILE_ENV.to_owned(), text));
        return Ok(None);
    }
    std::fs::write(file, &text).map_err(|e| io_error(file, e))?;
    let utf8 = file
        .to_str()
        .ok_or_else(|| ServerLaunchError::Io(format!("{} is not UTF-8", file.display())))?;
    args.extend(["--profile".to_owned(), utf8.to_owned()]);
    Ok(Some(file.to_path_buf()))
}

impl crate::runtime::Runtime {
    /// The environment a server gets: Keel's [`crate::runtime::mcp::INHERITED_ENV`] (never a
    /// credential), the launchers' settings, then its configured `env`.
    fn server_env(launch: &ServerLaunch<'_>) -> Vec<(String, String)> {
        let secrets = crate::runtime::secrets::scrub_list();
        let mut env: Vec<(String, String)> = crate::runtime::mcp::INHERITED_ENV
            .iter()
            .filter(|key| !secrets.iter().any(|s| s == *key))
            .filter_map(|key| Some(((*key).to_owned(), std::env::var(key).ok()?)))
            .collect();
        if !launch.project {
            // Python's own project-local resolution: no `sys.path[0]` from the working
            // directory or the script's (3.11+). npm and uv have no such variable: their
            // project lookup starts from the working directory, which is empty.
            env.push(("PYTHONSAFEPATH".to_owned(), "1".to_owned()));
        }
        for (key, value) in launch.env {
            env.retain(|(k, _)| k != key);
            env.push((key.clone(), value.clone()));
        }
        env
    }

    /// What starts the MCP stdio server `launch`: the sandbox helper with the profile for
    /// servers (see the module's documentation), or the server itself when the sandbox is off
    /// or (in `auto`) has no helper.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub fn server_invocation(
        &self,
        launch: &ServerLaunch<'_>,
    ) -> Result<ServerInvocation, ServerLaunchError> {
        let spec = &self.inner.sandbox;
        let start = self.server_start(launch)?;
        if spec.settings.mode == SandboxMode::Off {
            return Ok(start.direct(launch, "the sandbox is off ([sandbox] mode = \"off\")"));
        }
        let Some((helper, helper_prefix)) = spec.helper_command() else {
            if spec.settings.mode == SandboxMode::Required {
                return Err(ServerLaunchError::NoHelper);
            }
            return Ok(start.direct(launch, "no sandbox helper is configured"));
        };
        let ServerStart {
            program,
            mut env,
            cwd,
        } = start;
        let dir = self.inner.scratch_dir.join("sandbox");
        let tmp_dir = self.inner.scratch_dir.join("mcp-tmp");
        let staging_dir = dir.join("root");
        for path in [&dir, &tmp_dir, &staging_dir] {
            std::fs::create_dir_all(path).map_err(|e| io_error(path, e))?;
        }
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let status_file = dir.join(format!("{nonce}.status"));
        let own_caches = self.server_caches(launch, &mut env)?;
        let (mut profile, guarded) = self.profile(&cwd, &nonce, &status_file, tmp_dir, staging_dir);
        self.server_profile(&mut profile, launch, &program, &env, own_caches, &guarded);
        let text = serde_json::to_string(&profile)
            .map_err(|e| ServerLaunchError::Io(format!("profile: {e}")))?;
        let mut args = helper_prefix.to_vec();
        args.push("run".to_owned());
        let profile_file = pass_profile(
            text,
            &dir.join(format!("{nonce}.json")),
            &mut env,
            &mut args,
        )?;
        args.push("--".to_owned());
        args.push(launch.command.to_owned());
        args.extend(launch.args.iter().cloned());
        Ok(ServerInvocation {
            program: helper.to_path_buf(),
            args,
            env,
            cwd,
            check: Some(ConfinementCheck {
                nonce,
                profile_file,
                status_file,
                // Nothing is put back: the server outlives the point where the status is read.
                // What the guard lists at the top of a writable path is bound read-only.
                guarded: super::GuardSnapshot::default(),
                done_fifo: None,
            }),
            unconfined: None,
        })
    }

    /// The server's working directory (created), environment and program, found on that
    /// environment's `PATH` against that directory.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn server_start(&self, launch: &ServerLaunch<'_>) -> Result<ServerStart, ServerLaunchError> {
        let cwd = if launch.project {
            self.inner.roots.first().cloned().unwrap_or_default()
        } else {
            let dir = server_dir(launch.neutral, launch.name);
            std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
            crate::runtime::probe::canonical_or_same(&dir)
        };
        let env = Self::server_env(launch);
        let path = env
            .iter()
            .find(|(key, _)| key == "PATH")
            .map(|(_, value)| value.as_str());
        let Some(program) = find_program(launch.command, path, &cwd) else {
            return Err(ServerLaunchError::NotFound(format!(
                "cannot start `{}`: {}",
                launch.command,
                if launch.command.contains('/') {
                    "no such executable file"
                } else {
                    "not found on PATH"
                }
            )));
        };
        Ok(ServerStart { program, env, cwd })
    }

    /// The server's own package caches ([`SERVER_CACHES`]), created, unless its `env` names
    /// others: each is added to `env`, and the directories are returned.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn server_caches(
        &self,
        launch: &ServerLaunch<'_>,
        env: &mut Vec<(String, String)>,
    ) -> Result<Vec<PathBuf>, ServerLaunchError> {
        let caches = server_dir(
            &launch.caches.map_or_else(
                || self.inner.scratch_dir.join("mcp-cache"),
                Path::to_path_buf,
            ),
            launch.name,
        );
        let mut own_caches = Vec::new();
        for (key, sub) in SERVER_CACHES {
            if launch.env.iter().any(|(k, _)| k == key) {
                continue;
            }
            let dir = caches.join(sub);
            std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
            let dir = crate::runtime::probe::canonical_or_same(&dir);
            env.push(((*key).to_owned(), dir.display().to_string()));
            own_caches.push(dir);
        }
        Ok(own_caches)
    }

    /// Turns a command's profile (`profile`, built for the server's working directory) into the
    /// profile for servers.
    fn server_profile(
        &self,
        profile: &mut profile::Profile,
        launch: &ServerLaunch<'_>,
        program: &Path,
        env: &[(String, String)],
        own_caches: Vec<PathBuf>,
        guarded: &super::GuardSnapshot,
    ) {
        let spec = &self.inner.sandbox;
        let settings = &spec.settings;
        let home = profile.home.clone();
        let workspace = self.inner.roots.first().cloned().unwrap_or_default();
        let named = |list: &[String]| -> Vec<PathBuf> {
            list.iter()
                .filter_map(|text| {
                    let found = expand(text, home.as_deref(), &workspace);
                    if found.is_none() {
                        tracing::warn!(path = %text, "an MCP server's path does not exist (or has `..`); left out");
                    }
                    found
                })
                .collect()
        };
        let mut writable = named(&launch.access.writable);
        let mut readable: Vec<PathBuf> = self.inner.roots.clone();
        readable.extend(named(&launch.access.read));
        if !launch.project {
            writable.push(profile.cwd.clone());
        }
        writable.extend(own_caches);
        let home_list =
            |list: &Option<Vec<String>>, default: &[&str], more: &[&str]| -> Vec<PathBuf> {
                let Some(home) = &home else {
                    return Vec::new();
                };
                let base: Vec<&str> = match list {
                    Some(list) => list.iter().map(String::as_str).collect(),
                    None => default.to_vec(),
                };
                base.into_iter()
                    .chain(more.iter().copied())
                    .filter_map(|r| home_entry(home, r))
                    .collect::<Vec<PathBuf>>()
            };
        let home_readable = home_list(
            &settings.home_readable,
            DEFAULT_HOME_READABLE,
            SERVER_HOME_READABLE,
        );
        // Nothing of the home is writable: no cache another program runs from.
        let home_writable: Vec<PathBuf> = Vec::new();
        // The program itself, when named by a path outside what the server sees (a program
        // found on `PATH` is found again inside, among what it sees).
        let visible = |path: &Path| {
            SYSTEM_DIRS
                .iter()
                .map(Path::new)
                .chain(readable.iter().map(PathBuf::as_path))
                .chain(writable.iter().map(PathBuf::as_path))
                .chain(home_readable.iter().map(PathBuf::as_path))
                .chain(home_writable.iter().map(PathBuf::as_path))
                .any(|dir| path.starts_with(dir))
        };
        if launch.command.contains('/') {
            let real = crate::runtime::probe::canonical_or_same(program);
            let hidden: Vec<PathBuf> = [program.to_path_buf(), real]
                .into_iter()
                .filter(|path| !visible(path))
                .collect();
            readable.extend(hidden);
        }
        // Home credentials inside anything it sees are masked, but for those its table names
        // (`read = ["~/.aws"]`: the user passed them on purpose).
        let mut seen_in_home: Vec<PathBuf> = home_readable.clone();
        if let Some(home) = &home {
            seen_in_home.extend(
                readable
                    .iter()
                    .chain(writable.iter())
                    .filter(|path| path.starts_with(home))
                    .cloned(),
            );
        }
        let passed: Vec<PathBuf> = named(&launch.access.read)
            .into_iter()
            .chain(named(&launch.access.writable))
            .collect();
        profile.masked = self
            .masked(&seen_in_home, &home_writable)
            .into_iter()
            .filter(|credential| !passed.iter().any(|path| path.starts_with(credential)))
            .collect();
        let (protected, pinned) = super::protected_paths(&writable, &guarded.top_level());
        profile.writable = writable;
        profile.readable = readable;
        profile.protected = protected;
        profile.pinned = pinned;
        profile.home_readable = home_readable;
        profile.home_writable = home_writable;
        profile.network = launch.access.network;
        profile.proxy = None;
        // Exactly the environment Keel built for it.
        profile.env_allow = env.iter().map(|(key, _)| key.clone()).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_absolute_home_or_workspace_relative_and_never_climb() {
        let home = crate::runtime::probe::canonical_or_same(Path::new("/tmp"));
        let workspace = crate::runtime::probe::canonical_or_same(Path::new("/usr"));
        assert_eq!(
            expand("bin", Some(&home), &workspace),
            Some(workspace.join("bin"))
        );
        assert_eq!(
            expand(".", Some(&home), &workspace),
            Some(workspace.clone())
        );
        assert_eq!(expand("~", Some(&home), &workspace), Some(home.clone()));
        assert_eq!(expand("/usr/../etc", Some(&home), &workspace), None);
        assert_eq!(expand("~/x", None, &workspace), None);
        assert_eq!(
            expand("/no/such/path/at/all", Some(&home), &workspace),
            None
        );
    }

    #[test]
    fn each_server_has_a_directory_of_its_own() {
        let neutral = Path::new("/s/mcp");
        assert_eq!(server_dir(neutral, "github"), neutral.join("github"));
        assert_eq!(server_dir(neutral, "a.b"), neutral.join("a_b-612e62"));
        assert_eq!(server_dir(neutral, "../x"), neutral.join("___x-2e2e2f78"));
        assert_ne!(server_dir(neutral, "a_b"), server_dir(neutral, "a.b"));
        assert_eq!(server_dir(neutral, ""), neutral.join("-"));
    }

    #[test]
    fn a_program_is_found_by_path_or_on_path() {
        let cwd = Path::new("/");
        assert!(find_program("sh", Some("/nonexistent:/bin:/usr/bin"), cwd).is_some());
        assert!(find_program("sh", Some("/nonexistent"), cwd).is_none());
        assert!(find_program("sh", None, cwd).is_none());
        assert!(find_program("/bin/sh", None, cwd).is_some());
        assert!(find_program("/nonexistent/server", None, cwd).is_none());
    }
}
