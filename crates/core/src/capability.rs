//! Capability requirements and the compiled scope the runtime checks every access against.
//!
//! A tool declares a [`RequirementSet`]: the file paths it may read and write, the hosts it may
//! reach, the commands it may run. The agent's effective set is the manifest's requirements united
//! with every registered tool's ([`RequirementSet::union`]). [`Scope::compile`] expands the path
//! variables (`{workspace}`, `{ad-hoc}`, `{user-data}`, `{session}`) against [`Vars`] and builds glob
//! matchers; an unknown variable is an error at compile time, an empty expansion yields no pattern
//! (so the check fails closed).
//!
//! The check itself ([`Scope::check_path`] and friends) works on canonical paths: the runtime
//! resolves symlinks and `..` before it asks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a tool (or the agent manifest) needs from the runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequirementSet {
    /// File-system access, as path patterns (globs, with variables).
    #[serde(default, skip_serializing_if = "FsRequirement::is_empty")]
    pub fs: FsRequirement,
    /// Outbound network access.
    #[serde(default, skip_serializing_if = "NetRequirement::is_empty")]
    pub net: NetRequirement,
    /// Commands the tool may run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shell: Vec<ShellRunRequirement>,
    /// Any other named capability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
}

/// Path patterns for reading and writing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsRequirement {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

impl FsRequirement {
    fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }
}

/// Host patterns (`example.com`, `*.example.com`, `*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetRequirement {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

impl NetRequirement {
    fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

/// A command a tool may run: the executable and, optionally, patterns over `argv[1..]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellRunRequirement {
    /// Executable name (`git`), or `*` for any.
    pub cmd: String,
    /// Ordered patterns over `argv[1..]`; absent means any arguments. A trailing
    /// [`ArgPattern::Rest`] accepts any further arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<ArgPattern>>,
}

/// One pattern over one positional argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ArgPattern {
    /// Matches the argument exactly.
    Exact(String),
    /// `{ "wildcard": true }`: matches any one argument.
    Wildcard { wildcard: bool },
    /// `{ "prefix": "--format=" }`: matches an argument starting with the prefix.
    Prefix { prefix: String },
    /// `{ "rest": true }`: matches all remaining arguments (only meaningful last).
    Rest { rest: bool },
}

impl ArgPattern {
    fn matches(&self, arg: &str) -> bool {
        match self {
            ArgPattern::Exact(s) => s == arg,
            ArgPattern::Wildcard { wildcard } => *wildcard,
            ArgPattern::Prefix { prefix } => arg.starts_with(prefix.as_str()),
            ArgPattern::Rest { rest } => *rest,
        }
    }
}

impl ShellRunRequirement {
    /// Any invocation of `cmd`.
    pub fn any_args(cmd: &str) -> Self {
        Self {
            cmd: cmd.to_owned(),
            args: None,
        }
    }

    /// Whether this requirement covers `program argv…`.
    pub fn matches(&self, program: &str, argv: &[String]) -> bool {
        let name = Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(program);
        if self.cmd != "*" && self.cmd != name && self.cmd != program {
            return false;
        }
        let Some(patterns) = &self.args else {
            return true;
        };
        let mut args = argv.iter();
        for pattern in patterns {
            if matches!(pattern, ArgPattern::Rest { rest: true }) {
                return true;
            }
            match args.next() {
                Some(arg) if pattern.matches(arg) => {}
                _ => return false,
            }
        }
        args.next().is_none()
    }
}

impl RequirementSet {
    /// The union of two sets (duplicates removed, order kept).
    pub fn union(&self, other: &RequirementSet) -> RequirementSet {
        fn merge<T: Clone + PartialEq>(a: &[T], b: &[T]) -> Vec<T> {
            let mut out = a.to_vec();
            for item in b {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            out
        }
        RequirementSet {
            fs: FsRequirement {
                read: merge(&self.fs.read, &other.fs.read),
                write: merge(&self.fs.write, &other.fs.write),
            },
            net: NetRequirement {
                hosts: merge(&self.net.hosts, &other.net.hosts),
            },
            shell: merge(&self.shell, &other.shell),
            capabilities: merge(&self.capabilities, &other.capabilities),
        }
    }

    /// Builder helpers for tool declarations.
    pub fn fs_read(patterns: &[&str]) -> Self {
        Self {
            fs: FsRequirement {
                read: to_strings(patterns),
                write: Vec::new(),
            },
            ..Self::default()
        }
    }

    pub fn fs_read_write(read: &[&str], write: &[&str]) -> Self {
        Self {
            fs: FsRequirement {
                read: to_strings(read),
                write: to_strings(write),
            },
            ..Self::default()
        }
    }

    pub fn net_hosts(hosts: &[&str]) -> Self {
        Self {
            net: NetRequirement {
                hosts: to_strings(hosts),
            },
            ..Self::default()
        }
    }

    pub fn with_shell(mut self, shell: ShellRunRequirement) -> Self {
        self.shell.push(shell);
        self
    }

    /// Every variable name the set's patterns mention, for validation.
    pub fn variables(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for pattern in self
            .fs
            .read
            .iter()
            .chain(&self.fs.write)
            .chain(&self.net.hosts)
        {
            out.extend(variable_names(pattern));
        }
        out
    }
}

fn to_strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Values of the path variables.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    /// `{workspace}`: the workspace roots (canonical). Several roots expand to several patterns.
    pub workspace: Vec<PathBuf>,
    /// `{ad-hoc}`: directories of files the host opened outside the workspace.
    pub ad_hoc: Vec<PathBuf>,
    /// `{user-data}`: the host's per-user data directory.
    pub user_data: Option<PathBuf>,
    /// `{session}`: the session's scratch directory (sidecar files live there).
    pub session: Option<PathBuf>,
}

/// The variables a pattern may use.
pub const VARIABLES: &[&str] = &["workspace", "ad-hoc", "user-data", "session"];

impl Vars {
    fn values(&self, name: &str) -> Option<Vec<PathBuf>> {
        match name {
            "workspace" => Some(self.workspace.clone()),
            "ad-hoc" => Some(self.ad_hoc.clone()),
            "user-data" => Some(self.user_data.iter().cloned().collect()),
            "session" => Some(self.session.iter().cloned().collect()),
            _ => None,
        }
    }
}

/// Errors raised while compiling requirements.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CapabilityError {
    /// A pattern names a variable that does not exist: a typo in a manifest or rule file.
    #[error("unknown variable `{{{name}}}` in pattern `{pattern}` (known: {known})")]
    UnknownVariable {
        name: String,
        pattern: String,
        known: String,
    },
    /// A pattern is not a valid glob.
    #[error("invalid pattern `{pattern}`: {reason}")]
    InvalidPattern { pattern: String, reason: String },
}

fn variable_names(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        // `{a,b}` is glob alternation, not a variable.
        if !name.contains(',') && !name.is_empty() {
            out.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    out
}

/// Expands the variables of one pattern. Unknown names are errors; a variable with no value
/// yields no expansion at all (fail closed).
pub fn expand(pattern: &str, vars: &Vars) -> Result<Vec<String>, CapabilityError> {
    let mut expansions = vec![pattern.to_owned()];
    for name in variable_names(pattern) {
        let values = vars
            .values(&name)
            .ok_or_else(|| CapabilityError::UnknownVariable {
                name: name.clone(),
                pattern: pattern.to_owned(),
                known: VARIABLES
                    .iter()
                    .map(|v| format!("{{{v}}}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let token = format!("{{{name}}}");
        let mut next = Vec::new();
        for expansion in &expansions {
            for value in &values {
                let value = escape_glob(&value.to_string_lossy());
                next.push(expansion.replacen(&token, &value, 1));
            }
        }
        expansions = next;
    }
    Ok(expansions)
}

fn escape_glob(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

fn path_glob(pattern: &str) -> Result<Glob, CapabilityError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| CapabilityError::InvalidPattern {
            pattern: pattern.to_owned(),
            reason: e.kind().to_string(),
        })
}

/// A compiled set of path patterns. A pattern `X/**` also matches `X` itself.
#[derive(Debug, Clone)]
pub struct PathMatcher {
    patterns: Vec<String>,
    set: GlobSet,
}

impl PathMatcher {
    pub fn compile(patterns: &[String], vars: &Vars) -> Result<Self, CapabilityError> {
        let mut expanded = Vec::new();
        for pattern in patterns {
            for p in expand(pattern, vars)? {
                if let Some(base) = p.strip_suffix("/**")
                    && !base.is_empty()
                    && !expanded.contains(&base.to_owned())
                {
                    expanded.push(base.to_owned());
                }
                if !expanded.contains(&p) {
                    expanded.push(p);
                }
            }
        }
        let mut builder = GlobSetBuilder::new();
        for p in &expanded {
            builder.add(path_glob(p)?);
        }
        let set = builder
            .build()
            .map_err(|e| CapabilityError::InvalidPattern {
                pattern: expanded.join(", "),
                reason: e.to_string(),
            })?;
        Ok(Self {
            patterns: expanded,
            set,
        })
    }

    pub fn is_match(&self, path: &Path) -> bool {
        self.set.is_match(path)
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The expanded patterns, for explanations.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// The kind of access being checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
}

impl Access {
    /// The capability name used in rules and messages.
    pub fn capability(self) -> &'static str {
        match self {
            Access::Read => "fs.read",
            Access::Write => "fs.write",
        }
    }
}

/// A refusal by the capability check, with the reason the model sees: part of the contract, so
/// that a [`ToolError`](crate::contract::ToolError) can carry it.
pub use crate::contract::Refusal;

/// The effective capability scope of an agent: compiled once per session.
#[derive(Debug, Clone)]
pub struct Scope {
    read: PathMatcher,
    write: PathMatcher,
    hosts: GlobSet,
    host_patterns: Vec<String>,
    shell: Vec<ShellRunRequirement>,
    capabilities: BTreeSet<String>,
}

impl Scope {
    /// Compiles a requirement set against the variables.
    pub fn compile(set: &RequirementSet, vars: &Vars) -> Result<Self, CapabilityError> {
        let read = PathMatcher::compile(&set.fs.read, vars)?;
        let write = PathMatcher::compile(&set.fs.write, vars)?;
        let mut host_patterns = Vec::new();
        let mut hosts = GlobSetBuilder::new();
        for host in &set.net.hosts {
            let lowered = host.to_ascii_lowercase();
            let glob = GlobBuilder::new(&lowered)
                .literal_separator(false)
                .build()
                .map_err(|e| CapabilityError::InvalidPattern {
                    pattern: host.clone(),
                    reason: e.to_string(),
                })?;
            hosts.add(glob);
            host_patterns.push(lowered);
        }
        let hosts = hosts.build().map_err(|e| CapabilityError::InvalidPattern {
            pattern: host_patterns.join(", "),
            reason: e.to_string(),
        })?;
        Ok(Self {
            read,
            write,
            hosts,
            host_patterns,
            shell: set.shell.clone(),
            capabilities: set.capabilities.iter().cloned().collect(),
        })
    }

    /// Checks a canonical path. Writing implies the write patterns; reading accepts either.
    pub fn check_path(&self, canonical: &Path, access: Access) -> Result<(), Refusal> {
        let allowed = match access {
            Access::Read => self.read.is_match(canonical) || self.write.is_match(canonical),
            Access::Write => self.write.is_match(canonical),
        };
        if allowed {
            return Ok(());
        }
        let matcher = match access {
            Access::Read => &self.read,
            Access::Write => &self.write,
        };
        let reason = if matcher.is_empty() {
            format!(
                "{} denied for {}: the agent has no {} scope (no workspace open?)",
                access.capability(),
                canonical.display(),
                access.capability()
            )
        } else {
            format!(
                "{} denied: {} is outside the allowed scope ({})",
                access.capability(),
                canonical.display(),
                matcher.patterns().join(", ")
            )
        };
        Err(Refusal {
            capability: access.capability(),
            subject: canonical.display().to_string(),
            reason,
        })
    }

    /// Checks an outbound host (already lower-cased and IDNA-normalised by the caller).
    pub fn check_host(&self, host: &str) -> Result<(), Refusal> {
        let host = host.to_ascii_lowercase();
        if self.hosts.is_match(&host) {
            return Ok(());
        }
        Err(Refusal {
            capability: "net.fetch",
            subject: host.clone(),
            reason: if self.host_patterns.is_empty() {
                format!("net.fetch denied for {host}: the agent has no network scope")
            } else {
                format!(
                    "net.fetch denied: {host} is not among the allowed hosts ({})",
                    self.host_patterns.join(", ")
                )
            },
        })
    }

    /// Checks a command about to be spawned.
    pub fn check_command(&self, program: &str, argv: &[String]) -> Result<(), Refusal> {
        if self.shell.iter().any(|r| r.matches(program, argv)) {
            return Ok(());
        }
        Err(Refusal {
            capability: "shell.run",
            subject: program.to_owned(),
            reason: format!(
                "shell.run denied: `{program}` is not among the commands this agent may run"
            ),
        })
    }

    /// Checks a named capability.
    pub fn check_capability(&self, name: &str) -> Result<(), Refusal> {
        if self.capabilities.contains(name) {
            return Ok(());
        }
        Err(Refusal {
            capability: "capability",
            subject: name.to_owned(),
            reason: format!("capability `{name}` is not granted to this agent"),
        })
    }

    /// The expanded read patterns (for `keel tools` and explanations).
    pub fn read_patterns(&self) -> &[String] {
        self.read.patterns()
    }

    /// The expanded write patterns.
    pub fn write_patterns(&self) -> &[String] {
        self.write.patterns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars {
            workspace: vec![PathBuf::from("/w/proj")],
            user_data: Some(PathBuf::from("/home/u/.local/share/keel")),
            ..Vars::default()
        }
    }

    #[test]
    fn unknown_variable_is_a_compile_error() {
        let set = RequirementSet::fs_read(&["{workspce}/**"]);
        let err = Scope::compile(&set, &vars()).unwrap_err();
        assert!(
            matches!(err, CapabilityError::UnknownVariable { ref name, .. } if name == "workspce")
        );
        assert!(err.to_string().contains("{workspace}"));
    }

    #[test]
    fn empty_expansion_fails_closed() {
        let set = RequirementSet::fs_read(&["{ad-hoc}/**"]);
        let scope = Scope::compile(&set, &vars()).unwrap();
        let refusal = scope
            .check_path(Path::new("/w/proj/a"), Access::Read)
            .unwrap_err();
        assert!(refusal.reason.contains("no fs.read scope"), "{refusal}");
    }

    #[test]
    fn workspace_glob_covers_root_and_descendants_only() {
        let set = RequirementSet::fs_read_write(&["{workspace}/**"], &["{workspace}/**"]);
        let scope = Scope::compile(&set, &vars()).unwrap();
        assert!(scope.check_path(Path::new("/w/proj"), Access::Read).is_ok());
        assert!(
            scope
                .check_path(Path::new("/w/proj/src/a.rs"), Access::Write)
                .is_ok()
        );
        assert!(
            scope
                .check_path(Path::new("/w/project2/a.rs"), Access::Read)
                .is_err()
        );
        assert!(
            scope
                .check_path(Path::new("/w/proj2"), Access::Read)
                .is_err()
        );
        assert!(
            scope
                .check_path(Path::new("/etc/passwd"), Access::Read)
                .is_err()
        );
    }

    #[test]
    fn glob_metacharacters_in_roots_are_literal() {
        let vars = Vars {
            workspace: vec![PathBuf::from("/w/[x]*")],
            ..Vars::default()
        };
        let scope = Scope::compile(&RequirementSet::fs_read(&["{workspace}/**"]), &vars).unwrap();
        assert!(
            scope
                .check_path(Path::new("/w/[x]*/a"), Access::Read)
                .is_ok()
        );
        assert!(
            scope
                .check_path(Path::new("/w/xyz/a"), Access::Read)
                .is_err()
        );
    }

    #[test]
    fn several_roots_expand_to_several_patterns() {
        let vars = Vars {
            workspace: vec![PathBuf::from("/a"), PathBuf::from("/b")],
            ..Vars::default()
        };
        let scope = Scope::compile(&RequirementSet::fs_read(&["{workspace}/**"]), &vars).unwrap();
        assert!(scope.check_path(Path::new("/a/x"), Access::Read).is_ok());
        assert!(scope.check_path(Path::new("/b/y"), Access::Read).is_ok());
        assert!(scope.check_path(Path::new("/c/z"), Access::Read).is_err());
    }

    #[test]
    fn argv_patterns() {
        let req = ShellRunRequirement {
            cmd: "git".into(),
            args: Some(vec![
                ArgPattern::Exact("log".into()),
                ArgPattern::Prefix {
                    prefix: "--format=".into(),
                },
                ArgPattern::Wildcard { wildcard: true },
            ]),
        };
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(req.matches("git", &argv(&["log", "--format=%H", "HEAD"])));
        assert!(req.matches("/usr/bin/git", &argv(&["log", "--format=%H", "HEAD"])));
        assert!(!req.matches("git", &argv(&["log", "--oneline", "HEAD"])));
        assert!(!req.matches("git", &argv(&["log", "--format=%H"])));
        assert!(!req.matches("git", &argv(&["log", "--format=%H", "HEAD", "extra"])));
        assert!(!req.matches("gitx", &argv(&["log", "--format=%H", "HEAD"])));
        let rest = ShellRunRequirement {
            cmd: "cargo".into(),
            args: Some(vec![
                ArgPattern::Exact("test".into()),
                ArgPattern::Rest { rest: true },
            ]),
        };
        assert!(rest.matches("cargo", &argv(&["test", "-p", "x"])));
        assert!(!rest.matches("cargo", &argv(&["build"])));
    }

    #[test]
    fn arg_patterns_deserialize_from_the_seed_shape() {
        let req: ShellRunRequirement = serde_json::from_value(serde_json::json!({
            "cmd": "ls", "args": ["-la", {"wildcard": true}, {"prefix": "--color="}]
        }))
        .unwrap();
        assert_eq!(req.args.as_ref().map(Vec::len), Some(3));
    }

    #[test]
    fn hosts_match_case_insensitively_and_by_wildcard() {
        let scope =
            Scope::compile(&RequirementSet::net_hosts(&["*.example.com"]), &vars()).unwrap();
        assert!(scope.check_host("API.example.com").is_ok());
        assert!(scope.check_host("example.com.evil.net").is_err());
    }

    #[test]
    fn union_dedups() {
        let a = RequirementSet::fs_read(&["{workspace}/**"]);
        let b = RequirementSet::fs_read_write(&["{workspace}/**"], &["{workspace}/**"]);
        let u = a.union(&b);
        assert_eq!(u.fs.read.len(), 1);
        assert_eq!(u.fs.write.len(), 1);
    }
}
