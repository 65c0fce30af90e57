//! The third layer: every shell command runs confined by the kernel (see `docs/sandbox.md`).
//!
//! - [`SandboxSettings`]: the `[sandbox]` table (mode, mechanism, extra paths, network).
//! - [`SandboxSpec`]: what a [`super::Runtime`] needs to confine commands: the settings, the
//!   helper executable (Keel's own binary), the home directory, read-only mode.
//! - [`Runtime::shell_invocation`](super::Runtime::shell_invocation): turns `bash -c COMMAND`
//!   into the helper wrapping it, with a fresh [`Profile`] in [`PROFILE_ENV`] (a file in the
//!   session's scratch directory past 96 KiB), and a [`ConfinementCheck`] that later reads the
//!   helper's status back.
//! - [`server`]: the same helper around an MCP stdio server, with a profile for servers.
//! - `confinement`: the helper's status read back (confined or not, and whether a killed
//!   command is gone).
//! - The helper itself (`keel-sandbox run [--profile FILE] -- PROGRAM ARGS...`) is the crate
//!   `keel-sandbox`, which depends on no part of Keel; [`helper`] and [`profile`] are its
//!   modules, re-exported here.

pub mod check;
mod confinement;
pub mod credentials;
pub mod guard;
pub(crate) mod keeper;
pub mod mask;
pub mod mask_server;
pub mod proxy;
pub mod server;
mod small_helper;
mod status;
pub mod zygote;

pub use keel_sandbox::{PROFILE_ENV, helper, landlock_abi, profile};

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use confinement::{Confinement, ConfinementCheck, status_line};
pub(crate) use confinement::{alive, guard_state};
pub use credentials::{Classify, CredentialIndex};
pub use guard::{GuardRules, GuardSnapshot, Guarded};
pub use profile::{
    DEFAULT_ENV_ALLOW, DEFAULT_HOME_READABLE, DEFAULT_HOME_WRITABLE, Mechanism, Profile,
    SYSTEM_DIRS, Status,
};
pub use small_helper::{HELPER_BINARY, SmallHelper};
pub(crate) use status::StatusDir;
use status::make_fifo;

/// `[sandbox] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Refuse to run a command that cannot be confined.
    Required,
    /// Confine with the best mechanism available; say plainly when there is none.
    #[default]
    Auto,
    /// Run commands unconfined (a user choice only: ignored in a project file).
    Off,
}

impl SandboxMode {
    /// How strict the mode is (higher is stricter).
    pub fn strictness(self) -> u8 {
        match self {
            SandboxMode::Off => 0,
            SandboxMode::Auto => 1,
            SandboxMode::Required => 2,
        }
    }
}

/// The `[sandbox]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// `required`, `auto` (default) or `off`.
    pub mode: SandboxMode,
    /// `auto` (namespaces, else Landlock + seccomp), `namespaces` or `landlock` (forces the
    /// fallback).
    pub mechanism: Mechanism,
    /// More paths commands may read (absolute, or `~/...`).
    pub readable: Vec<String>,
    /// More paths commands may write (absolute, or `~/...`).
    pub writable: Vec<String>,
    /// Home paths that stay visible, read-only (relative to the home directory). Default:
    /// `.cargo`, `.rustup`, `.npm`, `.cache`, `.gitconfig`, `.config/git`, `.local/bin`.
    pub home_readable: Option<Vec<String>>,
    /// Home paths that stay writable. Default: none (package caches and toolchains are
    /// read-only: code in them runs later, outside the sandbox).
    pub home_writable: Option<Vec<String>>,
    /// Let commands use the network (all of it). Off by default.
    pub network: bool,
    /// More environment variables commands keep (names, or prefixes ending in `*`), besides
    /// [`DEFAULT_ENV_ALLOW`]; every other variable is removed.
    pub env: Vec<String>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            mode: SandboxMode::Auto,
            mechanism: Mechanism::Auto,
            readable: Vec::new(),
            writable: Vec::new(),
            home_readable: None,
            home_writable: None,
            network: false,
            env: Vec::new(),
        }
    }
}

impl SandboxSettings {
    /// The settings with a project layer's values applied only where they are stricter: a
    /// project may require the sandbox or force the fallback, never loosen anything.
    pub fn tightened_by(&self, project: &SandboxSettings) -> SandboxSettings {
        let mut out = self.clone();
        if project.mode.strictness() > self.mode.strictness() {
            out.mode = project.mode;
        }
        out
    }
}

/// What a runtime needs to confine commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSpec {
    pub settings: SandboxSettings,
    /// The helper executable (`keel`, or a binary calling [`keel_sandbox::main`]); `None`: commands
    /// run unconfined (refused under `required`).
    pub helper: Option<PathBuf>,
    /// The arguments before `run` (`["sandbox"]` for `keel`).
    pub helper_prefix: Vec<String>,
    /// The small `keel-sandbox` beside `keel`, used instead of [`SandboxSpec::helper`] once it
    /// has said it is from this build (see [`SandboxSpec::helper_command`]).
    pub small_helper: Option<Arc<SmallHelper>>,
    /// The user's home directory (hidden but for the allowlist).
    pub home: Option<PathBuf>,
    /// Read-only mode: the workspace is not writable either.
    pub read_only: bool,
    /// What a credential file is (the policy's rules): masked in every command's view of the
    /// home directory, and of the workspace for commands nobody approved. `None`: nothing is
    /// masked (tests of the mechanism alone).
    pub credentials: Option<CredentialRules>,
    /// Credential files and directories of the home directory (absolute): each one that
    /// exists inside a visible home path, and that [`SandboxSpec::credentials`] calls a
    /// credential, is masked.
    pub home_credentials: Vec<PathBuf>,
    /// What the guard keeps commands from creating or changing in a writable workspace (files
    /// other programs run: [`guard`]). `None`: only `.keel` and git's redirect files (tests of
    /// the mechanism alone).
    pub guards: Option<GuardRules>,
    /// Test hook of the filtering proxy: `127.0.0.1` at this one port passes its address
    /// check, so a test can stand a local server in for an allowed host. Set only by tests and
    /// by `keel sandbox check`'s self-test; no configuration key or environment variable
    /// reaches it.
    pub loopback_upstream_for_tests: Option<u16>,
}

/// The policy's definition of a credential file, as the sandbox uses it.
#[derive(Clone)]
pub struct CredentialRules(pub Classify);

impl std::fmt::Debug for CredentialRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialRules")
    }
}

impl PartialEq for CredentialRules {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CredentialRules {}

/// The largest profile sent in [`PROFILE_ENV`] (the kernel takes up to 128 KiB per variable).
const MAX_PROFILE_ENV_BYTES: usize = 96 * 1024;

/// The private `TMPDIR` of the session's contained commands, in its scratch directory (the
/// approved commands' is `tmp`, which contained commands cannot write).
pub const CONTAINED_TMP: &str = "tmp-contained";

/// A shell command ready to start: the program, its arguments, and how to check confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellInvocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables the program needs besides the command's own environment (the profile, in
    /// [`PROFILE_ENV`]); the helper removes them before the command starts.
    pub env: Vec<(String, String)>,
    /// `Some` when the helper runs the command.
    pub check: Option<ConfinementCheck>,
    /// The prebuilt credential masks the command must inherit ([`mask::MaskFd::inherit`]), when
    /// the profile names them ([`Profile::mask_ruleset`]).
    pub mask: Option<mask::MaskFd>,
    /// The prebuilt credential masks offered to a helper another process starts (the editor's
    /// terminal), withdrawn when this invocation is dropped ([`mask_server`]).
    pub mask_offer: Option<mask_server::MaskOffer>,
    /// A contained command under the fallback: how to run it from the session's warm holder
    /// instead of a helper of its own ([`zygote`]; Keel's own spawns with stdin `/dev/null`).
    pub warm: Option<zygote::WarmStart>,
    /// Why the command runs unconfined without asking the helper (`off`, no helper).
    pub unconfined: Option<String>,
}

impl ShellInvocation {
    /// The confinement once the command has run.
    pub fn confinement(&self) -> Confinement {
        match (&self.check, &self.unconfined) {
            (Some(check), _) => check.finish(),
            (None, Some(reason)) => Confinement::Unconfined {
                reason: reason.clone(),
            },
            (None, None) => Confinement::Unconfined {
                reason: "unknown".into(),
            },
        }
    }
}

/// Why a command cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "[sandbox] mode = \"required\", but no sandbox helper is configured; the command was not run"
    )]
    NoHelper,
    /// The session's sandbox files (its directories, a profile too large for the environment)
    /// cannot be written.
    #[error("cannot prepare the sandbox: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot prepare the sandbox: the profile: {0}")]
    Profile(#[source] serde_json::Error),
    #[error("cannot prepare the sandbox: {} is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    #[error(
        "a command allowed without asking runs only from Keel's rendering of it, and this one has none"
    )]
    NotRendered,
}

/// What a command gets read-only again inside its `writable` paths (`.git/hooks`,
/// `.git/config`, `.keel`, and `top_level`: the guarded entries at a root's top,
/// [`GuardSnapshot::top_level`]), each that exists, canonical; and the directories between a
/// writable path and a protected one ([`Profile::pinned`], outermost first).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn protected_paths(
    writable: &[PathBuf],
    top_level: &[PathBuf],
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut protected: Vec<PathBuf> = Vec::new();
    let mut pinned: Vec<PathBuf> = Vec::new();
    for root in writable {
        let fixed = [".git/hooks", ".git/config", ".keel"].map(|rel| root.join(rel));
        let more = top_level
            .iter()
            .filter(|path| path.starts_with(root))
            .cloned();
        for candidate in fixed.into_iter().chain(more) {
            let Ok(path) = std::fs::canonicalize(&candidate) else {
                continue;
            };
            let Some(owner) = writable.iter().find(|w| path.starts_with(w)) else {
                continue;
            };
            if protected.contains(&path) {
                continue;
            }
            // Every directory between the writable root and the protected path.
            let mut parent = path.parent();
            while let Some(dir) = parent {
                if dir == owner.as_path() || !dir.starts_with(owner) {
                    break;
                }
                if !pinned.iter().any(|p| p == dir) {
                    pinned.push(dir.to_path_buf());
                }
                parent = dir.parent();
            }
            protected.push(path);
        }
    }
    // Outermost first, so an inner pin is not hidden by an outer one.
    pinned.sort_by_key(|p| p.components().count());
    (protected, pinned)
}

/// `~/x` against the home directory; relative paths (and `..`) are refused.
pub fn expand_path(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    let path = match (text.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        (Some(_), None) => return None,
        (None, _) => PathBuf::from(text),
    };
    let clean = path.is_absolute() && !path.components().any(|c| c == Component::ParentDir);
    clean.then_some(path)
}

/// A home-relative allowlist entry, if it is a plain relative path.
pub fn home_entry(home: &Path, relative: &str) -> Option<PathBuf> {
    let rel = Path::new(relative);
    let clean = !rel.is_absolute() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    clean.then(|| home.join(rel))
}

impl super::Runtime {
    /// How shell commands are confined in this session.
    pub fn sandbox(&self) -> &SandboxSpec {
        &self.inner.sandbox
    }

    /// The same runtime with the session's [`proxy::HostGate`]: confined commands reach the
    /// hosts it allows through the filtering proxy (when the network is off).
    pub fn with_host_gate(&self, gate: std::sync::Arc<dyn proxy::HostGate>) -> Self {
        self.derive(|inner| {
            inner.proxy = std::sync::Arc::new(proxy::ProxyState::new(Some(gate)));
        })
    }

    /// What the prebuilt credential masks of this session have cost so far ([`mask`]).
    pub fn mask_stats(&self) -> mask::MaskStats {
        self.inner.masks.stats()
    }

    /// The fallback's warm holder of this session's contained commands ([`zygote`]).
    pub fn warm_holders(&self) -> &zygote::Zygotes {
        &self.inner.zygotes
    }

    /// The environment variables commands keep: [`DEFAULT_ENV_ALLOW`] and `[sandbox] env`.
    pub fn command_env_allow(&self) -> Vec<String> {
        let mut allow = profile::default_env_allow();
        allow.extend(self.inner.sandbox.settings.env.iter().cloned());
        allow
    }

    /// The same runtime with another sandbox spec.
    pub fn with_sandbox(&self, sandbox: SandboxSpec) -> Self {
        self.derive(|inner| inner.sandbox = sandbox)
    }

    /// What runs `bash -c command` in `cwd` (canonical, already checked): the sandbox helper
    /// with a fresh profile, or `bash` itself when the sandbox is off or has no helper. For a
    /// program another process starts (the editor's terminal): it inherits nothing from Keel.
    pub fn shell_invocation(
        &self,
        command: &str,
        cwd: &Path,
    ) -> Result<ShellInvocation, SandboxError> {
        self.shell_invocation_with(command, cwd, false)
    }

    /// [`Self::shell_invocation`] for a command Keel spawns itself, which can inherit Keel's
    /// prebuilt credential masks ([`ShellInvocation::mask`]).
    pub fn local_shell_invocation(
        &self,
        command: &str,
        cwd: &Path,
    ) -> Result<ShellInvocation, SandboxError> {
        self.shell_invocation_with(command, cwd, true)
    }

    /// A contained command runs as Keel rendered it, and only the command it rendered.
    fn command_to_run<'a>(&'a self, command: &'a str) -> Result<&'a str, SandboxError> {
        if !self.contained {
            return Ok(command);
        }
        match &self.rendering {
            Some(rendering) if rendering.0 == command && !rendering.1.is_empty() => {
                Ok(rendering.1.as_str())
            }
            _ => Err(SandboxError::NotRendered),
        }
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn shell_invocation_with(
        &self,
        command: &str,
        cwd: &Path,
        local: bool,
    ) -> Result<ShellInvocation, SandboxError> {
        let command = self.command_to_run(command)?;
        let spec = &self.inner.sandbox;
        let direct = |reason: &str| ShellInvocation {
            program: PathBuf::from("bash"),
            args: vec!["-c".into(), command.to_owned()],
            env: Vec::new(),
            check: None,
            mask: None,
            mask_offer: None,
            warm: None,
            unconfined: Some(reason.to_owned()),
        };
        if spec.settings.mode == SandboxMode::Off {
            return Ok(direct("the sandbox is off ([sandbox] mode = \"off\")"));
        }
        if self.unconfined() {
            return Ok(direct(
                "the user allowed this command to run without the sandbox",
            ));
        }
        let Some((helper, helper_prefix)) = spec.helper_command() else {
            if spec.settings.mode == SandboxMode::Required {
                return Err(SandboxError::NoHelper);
            }
            return Ok(direct("no sandbox helper is configured"));
        };
        let io = |path: &Path, source: std::io::Error| SandboxError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = self.inner.scratch_dir.join("sandbox");
        // A contained command's `TMPDIR` is not an approved one's: what nobody approved must
        // not plant what approved commands run later (a test runner's cache of transformed
        // code under `$TMPDIR`). One per session, so the warm holder's profile stays the same.
        let tmp_dir =
            self.inner
                .scratch_dir
                .join(if self.contained { CONTAINED_TMP } else { "tmp" });
        let staging_dir = dir.join("root");
        for path in [&dir, &tmp_dir, &staging_dir] {
            std::fs::create_dir_all(path).map_err(|e| io(path, e))?;
        }
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        // A name of its own, not the nonce: under the fallback a command may list `/dev`.
        let status_file = self
            .inner
            .status_dir
            .get(&dir)
            .unwrap_or(&dir)
            .join(format!("{}.status", uuid::Uuid::new_v4().simple()));
        let (mut profile, guarded) = self.profile(cwd, &nonce, &status_file, tmp_dir, staging_dir);
        // A command Keel waits on itself is reported done from init's line on this FIFO, before
        // the helper's exit (`runtime::process`); the editor's terminal waits for the exit.
        // (Only under namespaces: the fallback has no init to write it.)
        let done_fifo = (local && profile.mechanism != Mechanism::Landlock)
            .then(|| status_file.with_extension("done"))
            .filter(|fifo| make_fifo(fifo));
        profile.done_fifo.clone_from(&done_fifo);
        self.attach_network(&mut profile, local, (helper, helper_prefix), &dir);
        // Under the Landlock fallback, the masks as one ruleset built beforehand.
        let mask = if local && mask::wanted(profile.mechanism) {
            let classify = spec.credentials.as_ref().map(|rules| &rules.0);
            self.inner.masks.ruleset_for(&profile.masked, classify)
        } else {
            None
        };
        profile.mask_ruleset = mask.as_ref().map(mask::MaskFd::raw);
        let offered = (!local)
            .then(|| self.offer_masks(&mut profile, &dir))
            .flatten();
        let text = serde_json::to_string(&profile).map_err(SandboxError::Profile)?;
        let warm = local
            .then(|| self.warm_start(&profile, mask.as_ref(), (helper, helper_prefix), command))
            .flatten();
        let HelperArgs {
            args,
            mut env,
            profile_file,
        } = helper_args(helper_prefix, text, &dir, &nonce, command)?;
        let mask_offer = offered.map(|(key, offer)| {
            env.push((keel_sandbox::MASK_KEY_ENV.to_owned(), key));
            offer
        });
        Ok(ShellInvocation {
            program: helper.to_path_buf(),
            args,
            env,
            check: Some(ConfinementCheck {
                nonce,
                profile_file,
                status_file,
                guarded,
                done_fifo,
            }),
            mask,
            mask_offer,
            warm,
            unconfined: None,
        })
    }

    /// Under the Landlock fallback, for a helper another process starts (the editor's
    /// terminal): offers the session's prebuilt mask ruleset on the session's socket and names
    /// the socket in `profile`. The key for the helper's environment and the offer to hold.
    fn offer_masks(
        &self,
        profile: &mut Profile,
        dir: &Path,
    ) -> Option<(String, mask_server::MaskOffer)> {
        if !mask::wanted(profile.mechanism) || profile.masked.is_empty() {
            return None;
        }
        let classify = self
            .inner
            .sandbox
            .credentials
            .as_ref()
            .map(|rules| &rules.0);
        let ruleset = self.inner.masks.ruleset_for(&profile.masked, classify)?;
        let (socket, key, offer) = self.inner.mask_server.offer(dir, ruleset)?;
        profile.mask_socket = Some(socket);
        Some((key, offer))
    }

    /// Where a confined command's network goes: the session's keeper holds each command's
    /// network namespace ready (the editor's terminal is not Keel's child, which is all the
    /// keeper serves); an approved command with allowed hosts reaches them through the proxy.
    fn attach_network(
        &self,
        profile: &mut Profile,
        local: bool,
        (helper, helper_prefix): (&Path, &[String]),
        dir: &Path,
    ) {
        let spec = &self.inner.sandbox;
        if local && !profile.network && profile.mechanism != Mechanism::Landlock {
            profile.keeper = self.inner.keeper.socket(helper, helper_prefix, dir);
        }
        if !spec.settings.network
            && !self.contained
            && let Some(gate) = &self.inner.proxy.gate
            && gate.any_allowed()
        {
            // Without the proxy (it could not start) the command simply has no network.
            profile.proxy = self
                .inner
                .proxy
                .endpoint(dir, &self.inner.scope, spec.loopback_upstream_for_tests)
                .ok();
        }
    }

    /// A contained command, Keel's own: forked from the session's warm holder of this profile
    /// (the same for every contained command but for what the request carries: the nonce, the
    /// status file, the working directory; and what the holder does not use: the done FIFO,
    /// the keeper). Under namespaces or the fallback, as the holder finds (decisions 0039,
    /// 0048).
    fn warm_start(
        &self,
        profile: &Profile,
        mask: Option<&mask::MaskFd>,
        (helper, helper_prefix): (&Path, &[String]),
        command: &str,
    ) -> Option<zygote::WarmStart> {
        if !self.contained || profile.proxy.is_some() || profile.network {
            return None;
        }
        let mut domain = profile.clone();
        domain.nonce = String::new();
        domain.status_file = PathBuf::new();
        domain.cwd = PathBuf::new();
        domain.done_fifo = None;
        domain.keeper = None;
        let domain = serde_json::to_string(&domain)
            .ok()
            .filter(|domain| domain.len() <= MAX_PROFILE_ENV_BYTES)?;
        Some(zygote::WarmStart {
            helper: helper.to_path_buf(),
            prefix: helper_prefix.to_vec(),
            profile: domain,
            mask: mask.cloned(),
            argv: vec!["bash".to_owned(), "-c".to_owned(), command.to_owned()],
            nonce: profile.nonce.clone(),
            status_file: profile.status_file.clone(),
        })
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn profile(
        &self,
        cwd: &Path,
        nonce: &str,
        status_file: &Path,
        tmp_dir: PathBuf,
        staging_dir: PathBuf,
    ) -> (Profile, GuardSnapshot) {
        let spec = &self.inner.sandbox;
        let settings = &spec.settings;
        let home = spec
            .home
            .as_deref()
            .and_then(|h| std::fs::canonicalize(h).ok());
        let canonical = |text: &String| {
            expand_path(text, home.as_deref()).and_then(|p| std::fs::canonicalize(p).ok())
        };
        let roots = &self.inner.roots;
        let read_only = spec.read_only || self.read_only_commands || self.contained;
        let mut writable: Vec<PathBuf> = Vec::new();
        let mut readable: Vec<PathBuf> = settings.readable.iter().filter_map(canonical).collect();
        if read_only {
            readable.extend(roots.iter().cloned());
        } else {
            writable.extend(roots.iter().cloned());
            writable.extend(settings.writable.iter().filter_map(canonical));
        }
        let visible = |path: &Path| {
            writable
                .iter()
                .chain(readable.iter())
                .any(|root| path.starts_with(root))
        };
        if !visible(cwd) {
            readable.push(cwd.to_path_buf());
        }
        // The files other programs run, as they are now: put back after the command; the ones
        // at the top of a root are bound read-only too (under namespaces).
        let guarded_roots: Vec<PathBuf> = roots
            .iter()
            .filter(|root| writable.contains(root))
            .cloned()
            .collect();
        let guarded = GuardSnapshot::take(&guarded_roots, self.inner.credentials.as_ref());
        let (protected, pinned) = protected_paths(&writable, &guarded.top_level());
        let mut guarded = guarded;
        guarded.set_bound(&protected);
        let home_list = |list: &Option<Vec<String>>, default: &[&str]| -> Vec<PathBuf> {
            let Some(home) = &home else {
                return Vec::new();
            };
            match list {
                Some(list) => list.iter().filter_map(|r| home_entry(home, r)).collect(),
                None => default.iter().filter_map(|r| home_entry(home, r)).collect(),
            }
        };
        let home_readable = home_list(&settings.home_readable, DEFAULT_HOME_READABLE);
        let home_writable = if read_only {
            Vec::new()
        } else {
            home_list(&settings.home_writable, DEFAULT_HOME_WRITABLE)
        };
        let masked = self.masked(&home_readable, &home_writable);
        let env_allow = self.command_env_allow();
        let profile = Profile {
            build: profile::HELPER_BUILD.to_owned(),
            nonce: nonce.to_owned(),
            status_file: status_file.to_path_buf(),
            required: settings.mode == SandboxMode::Required,
            mechanism: settings.mechanism,
            cwd: cwd.to_path_buf(),
            writable,
            readable,
            protected,
            pinned,
            home,
            home_readable,
            home_writable,
            tmp_dir,
            staging_dir,
            network: settings.network && !self.contained,
            proxy: None,
            masked,
            mask_ruleset: None,
            mask_socket: None,
            done_fifo: None,
            keeper: None,
            env_allow,
            // Nobody approved it: no socket of another command by path (the workspace is
            // shared with approved ones, and with the other contained commands their `TMPDIR`),
            // as under the fallback.
            no_connect: self.contained,
        };
        (profile, guarded)
    }

    /// What a command must not see: the home directory's credentials (inside its visible
    /// paths), and for a command nobody approved ([`super::Runtime::contained`]) the
    /// workspace's too, from the session's [`CredentialIndex`].
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn masked(&self, home_readable: &[PathBuf], home_writable: &[PathBuf]) -> Vec<PathBuf> {
        let spec = &self.inner.sandbox;
        let Some(CredentialRules(classify)) = &spec.credentials else {
            return Vec::new();
        };
        let visible = |path: &Path| {
            home_readable
                .iter()
                .chain(home_writable)
                .any(|entry| path.starts_with(entry))
        };
        let mut masked: Vec<PathBuf> = spec
            .home_credentials
            .iter()
            .filter(|path| visible(path))
            .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|meta| classify(path, &meta)))
            .cloned()
            .collect();
        if self.contained
            && let Some(index) = &self.inner.credentials
        {
            masked.extend(index.current());
        }
        masked
    }
}

/// The helper's arguments and environment for `bash -c command`. The profile travels in the
/// environment, so what the editor's terminal shows (and runs) reads `keel-sandbox run -- bash
/// -c COMMAND`; one larger than a variable may hold goes through a file in `dir` (returned, for
/// its removal).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
fn helper_args(
    helper_prefix: &[String],
    profile: String,
    dir: &Path,
    nonce: &str,
    command: &str,
) -> Result<HelperArgs, SandboxError> {
    let mut args = helper_prefix.to_vec();
    args.push("run".to_owned());
    let mut env = Vec::new();
    let mut profile_file = None;
    if profile.len() <= MAX_PROFILE_ENV_BYTES {
        env.push((PROFILE_ENV.to_owned(), profile));
    } else {
        let file = dir.join(format!("{nonce}.json"));
        std::fs::write(&file, profile).map_err(|source| SandboxError::Io {
            path: file.clone(),
            source,
        })?;
        let text = file
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| SandboxError::NotUtf8(file.clone()))?;
        args.extend(["--profile".to_owned(), text]);
        profile_file = Some(file);
    }
    args.extend([
        "--".to_owned(),
        "bash".to_owned(),
        "-c".to_owned(),
        command.to_owned(),
    ]);
    Ok(HelperArgs {
        args,
        env,
        profile_file,
    })
}

/// What [`helper_args`] gives: the helper's arguments, its environment, and the profile's file
/// when the profile went through one.
struct HelperArgs {
    args: Vec<String>,
    env: Vec<(String, String)>,
    profile_file: Option<PathBuf>,
}
