//! The serialized sandbox profile: what Keel writes for one command and the helper applies.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which mechanism the helper may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Namespaces where they work, else Landlock + seccomp.
    #[default]
    Auto,
    /// User, mount, PID and network namespaces (falls back only when they fail).
    Namespaces,
    /// Landlock (file system) + seccomp (no new sockets): the fallback, forced.
    Landlock,
}

/// The build of this crate the binary holds (a hash of its sources, from `build.rs`). Keel
/// writes it into every profile, and the helper refuses a profile from another build: a
/// `keel-sandbox` left over from an older build would read it with other code.
pub const HELPER_BUILD: &str = env!("KEEL_SANDBOX_BUILD_ID");

/// One command's confinement. Every path is absolute and canonical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// [`HELPER_BUILD`] of the Keel that wrote it (empty when missing: a build older than the
    /// field).
    #[serde(default)]
    pub build: String,
    /// A one-time value the helper writes back to [`Profile::status_file`] once the program is
    /// confined (and before it starts), so Keel can tell a confined run from anything else.
    pub nonce: String,
    pub status_file: PathBuf,
    /// Refuse to run the program when no mechanism can confine it.
    pub required: bool,
    pub mechanism: Mechanism,
    /// The program's working directory.
    pub cwd: PathBuf,
    /// Visible and writable: the workspace roots (unless read-only) and extra writable paths.
    pub writable: Vec<PathBuf>,
    /// Visible, read-only: extra readable paths (and the roots in read-only mode).
    pub readable: Vec<PathBuf>,
    /// Read-only again inside a writable path: `.git/hooks`, `.git/config`, `.keel`.
    pub protected: Vec<PathBuf>,
    /// Directories between a writable root and a protected path (`.git`): bound onto
    /// themselves, writable, so they are mount points that cannot be renamed or removed (which
    /// would take the protected path along and let a fresh one be made).
    #[serde(default)]
    pub pinned: Vec<PathBuf>,
    /// The home directory (an empty directory in the new root, but for the allowlist).
    pub home: Option<PathBuf>,
    /// Home-directory paths that stay visible read-only (the rest of the home is hidden).
    pub home_readable: Vec<PathBuf>,
    /// Home-directory paths that stay visible and writable (tool caches).
    pub home_writable: Vec<PathBuf>,
    /// The private temporary directory (seen as `/tmp` under namespaces; `TMPDIR` always).
    pub tmp_dir: PathBuf,
    /// An empty directory the namespace helper mounts the new root on.
    pub staging_dir: PathBuf,
    /// Whether the program may use the network (`false`: no sockets but Unix ones).
    pub network: bool,
    /// With the network off: Keel's filtering proxy, the one way out (to the hosts the
    /// session's rules allow). `None`: no network at all.
    #[serde(default)]
    pub proxy: Option<ProxyEndpoint>,
    /// Credential files and directories inside what the program sees: each one that exists
    /// when the command starts looks empty and cannot be changed (a file: empty; a directory:
    /// an empty directory). Under the Landlock fallback they are left out of the read rules.
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    /// Under the Landlock fallback: the number of an inherited descriptor of the Landlock
    /// ruleset Keel built for [`Profile::masked`] (`keel_core::runtime::sandbox::mask`). The helper applies it as a
    /// second layer instead of splitting its read rules around each masked path; it is closed
    /// before the program starts. `None`: the helper splits the rules itself.
    #[serde(default)]
    pub mask_ruleset: Option<i32>,
    /// Under the Landlock fallback, for a helper another process starts (the editor's
    /// terminal), which inherits nothing from Keel: the Unix socket where Keel offers the same
    /// ruleset (`keel_core::runtime::sandbox::mask_server`) to the holder of the key in
    /// [`crate::MASK_KEY_ENV`]. No answer at once: the helper splits the rules itself.
    #[serde(default)]
    pub mask_socket: Option<PathBuf>,
    /// The environment variables the program keeps, by name (`LC_*`: a prefix); every other
    /// one is removed before the program starts, whoever started the helper.
    #[serde(default)]
    pub env_allow: Vec<String>,
    /// A FIFO Keel reads (keel-core's `runtime::process`), under namespaces: once the program
    /// has exited, init ends and reaps every other process of its namespace and only then
    /// writes [`done_line`] to it, before init's and the helper's own exits (which tear the
    /// namespaces down, waiting for RCU grace periods). Keel reports the command done from it
    /// and reaps the helper afterwards. `None` (the editor's terminal, the fallback): Keel waits
    /// for the helper's exit.
    #[serde(default)]
    pub done_fifo: Option<PathBuf>,
    /// The session's namespace keeper (`keel-sandbox keep SOCKET`), with the network off: the
    /// helper joins its user namespace and takes a fresh network namespace it made ahead of
    /// time, instead of creating one on the command's path. `None`, or a keeper that is gone
    /// or does not answer at once: the helper creates its own.
    #[serde(default)]
    pub keeper: Option<PathBuf>,
    /// No `connect` at all, no Unix datagram socket and no `io_uring`, under namespaces too (the
    /// fallback refuses them whenever the network is off): the program reaches no socket by
    /// path, such as a server another command of the session listens with in the session's
    /// `/tmp` or in the workspace, which would act for it with that command's rights. Keel sets
    /// it for the commands nobody approved.
    #[serde(default)]
    pub no_connect: bool,
}

/// The line init writes to [`Profile::done_fifo`] once its namespace is empty: the profile's
/// nonce and how the program ended (`code N` or `signal N`).
pub fn done_line(nonce: &str, code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (_, Some(signal)) => format!("done {nonce} signal {signal}\n"),
        (code, None) => format!("done {nonce} code {}\n", code.unwrap_or(-1)),
    }
}

/// How the program ended, from a [`done_line`] with this `nonce`: `Ok(exit code)` or
/// `Err(signal)`. `None` for anything else (another nonce, a partial line).
pub fn parse_done_line(text: &str, nonce: &str) -> Option<Result<i32, i32>> {
    let line = text.strip_suffix('\n')?;
    let mut words = line.split(' ');
    if words.next()? != "done" || words.next()? != nonce {
        return None;
    }
    let kind = words.next()?;
    let number: i32 = words.next()?.parse().ok()?;
    if words.next().is_some() {
        return None;
    }
    match kind {
        "code" if (0..=255).contains(&number) => Some(Ok(number)),
        "signal" if number > 0 => Some(Err(number)),
        _ => None,
    }
}

/// How a confined command reaches Keel's filtering proxy (keel-core's `runtime::sandbox::proxy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyEndpoint {
    /// The proxy's Unix socket (the namespace helper binds it into the command's root, at
    /// [`crate::SOCKET_IN_ROOT`]).
    pub socket: PathBuf,
    /// The proxy's port on the host's loopback (the Landlock fallback allows connecting to
    /// it, and to nothing else).
    pub port: u16,
}

/// [`DEFAULT_ENV_ALLOW`] as a profile holds it.
pub fn default_env_allow() -> Vec<String> {
    DEFAULT_ENV_ALLOW
        .iter()
        .map(|name| (*name).to_owned())
        .collect()
}

/// The variables of this process's environment that `allow` keeps: what a command gets.
pub fn allowed_environment(allow: &[String]) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_some_and(|name| env_allowed(allow, name)))
        .collect()
}

/// Whether the variable `name` is kept under `allow` ([`Profile::env_allow`]).
pub fn env_allowed(allow: &[String], name: &str) -> bool {
    allow.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    })
}

/// What the helper reports through the status file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub nonce: String,
    /// `namespaces`, `landlock` or `none`.
    pub mechanism: String,
    /// What is not enforced (a missing /proc, a partial Landlock ABI, ...).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The directories of the system outside the workspace that stay visible (read-only).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// Home paths visible by default (read-only), relative to `$HOME`.
pub const DEFAULT_HOME_READABLE: &[&str] = &[
    ".cargo",
    ".rustup",
    ".npm",
    ".cache",
    ".gitconfig",
    ".config/git",
    ".local/bin",
];

/// Home paths writable by default, relative to `$HOME`: none. Package caches and toolchains
/// (`~/.cargo/registry`, `~/.cargo/git`, `~/.rustup`, `~/.npm`, `~/.cache/pip`) stay read-only:
/// a crate's `build.rs` rewritten in `~/.cargo/registry/src` would run in the user's next
/// `cargo build` of any project, outside the sandbox. `[sandbox] home_writable` (the user's
/// file only) opens one.
pub const DEFAULT_HOME_WRITABLE: &[&str] = &[];

/// The environment every command keeps ([`Profile::env_allow`]); `[sandbox] env` adds to it.
/// Everything else (tokens, database URLs, cloud keys, whatever their names) stays with Keel.
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "TZ",
    "TMPDIR",
    "PWD",
    "HOSTNAME",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "GIT_PAGER",
    "GIT_TERMINAL_PROMPT",
    "LESS",
    "MANPAGER",
    "CI",
    "CARGO_HOME",
    "CARGO_TARGET_DIR",
    "CARGO_TERM_COLOR",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "GOPATH",
    "GOROOT",
    "GOFLAGS",
    "GOCACHE",
    "GOMODCACHE",
    "JAVA_HOME",
    "NVM_DIR",
    "NODE_ENV",
    "PYENV_ROOT",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

#[cfg(test)]
mod tests {
    use super::env_allowed;

    #[test]
    fn a_done_line_reads_back_only_with_its_nonce() {
        use super::{done_line, parse_done_line};
        assert_eq!(
            parse_done_line(&done_line("n1", Some(3), None), "n1"),
            Some(Ok(3))
        );
        assert_eq!(
            parse_done_line(&done_line("n1", None, Some(9)), "n1"),
            Some(Err(9))
        );
        assert_eq!(parse_done_line(&done_line("n1", Some(0), None), "n2"), None);
        assert_eq!(parse_done_line("done n1 code 0", "n1"), None);
        assert_eq!(parse_done_line("done n1 code 0 x\n", "n1"), None);
        assert_eq!(parse_done_line("done n1 code 300\n", "n1"), None);
        assert_eq!(parse_done_line("done n1 signal 0\n", "n1"), None);
    }

    #[test]
    fn the_environment_allowlist_takes_names_and_prefixes() {
        let allow = vec!["PATH".to_owned(), "LC_*".to_owned()];
        assert!(env_allowed(&allow, "PATH"));
        assert!(env_allowed(&allow, "LC_ALL"));
        assert!(!env_allowed(&allow, "PATHX"));
        assert!(!env_allowed(&allow, "AWS_SECRET_ACCESS_KEY"));
    }
}
