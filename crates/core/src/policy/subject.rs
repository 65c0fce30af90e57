//! From a tool call to what rules match and what approvals are keyed by.
//!
//! - [`capability_of`]: the capability a [`ToolSpec`] exercises (from its subject, kind and
//!   origin): read-only file tools `fs.read`, file-changing tools `fs.write`, commands
//!   `shell.run`, URLs and searches `net.fetch`, MCP tools `mcp.call`.
//! - [`CallSubject`]: the call's subject, resolved: a canonical path (workspace-relative when
//!   inside), an analysed command line, a host, an MCP `server/tool`.
//! - [`ApprovalKey`]: `(tool, key)`, deterministic and readable: the workspace-relative path,
//!   one key per simple command, the host, `server/tool`.

use crate::tool::view::code;
use std::fmt;
use std::path::{Path, PathBuf};

use super::Call;
use super::pattern::{Pattern, SESSION, escape_glob};
use super::rule::Capability;
use super::shell::{Cwd, ShellAnalysis, ShellContext, analyze_from, confusable_char};
use crate::capability::Access;
use crate::tool::{CallTarget, Origin, Subject, ToolKind, ToolSpec};

/// The identity an approval is cached under: the tool and a key derived from the arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApprovalKey {
    pub tool: String,
    pub key: String,
}

impl fmt::Display for ApprovalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.tool, self.key)
    }
}

/// The capability a tool exercises.
pub fn capability_of(spec: &ToolSpec) -> Option<Capability> {
    if matches!(spec.origin, Origin::Mcp(_)) {
        return Some(Capability::McpCall);
    }
    match &spec.subject {
        Subject::Command(_) => Some(Capability::ShellRun),
        Subject::Url(_) | Subject::Query(_) => Some(Capability::NetFetch),
        Subject::Path(_) if spec.mutating => Some(Capability::FsWrite),
        Subject::Paths => Some(Capability::FsWrite),
        Subject::Path(_) => Some(Capability::FsRead),
        Subject::None => match spec.kind {
            ToolKind::Read | ToolKind::Search if !spec.mutating => Some(Capability::FsRead),
            ToolKind::Edit | ToolKind::Delete | ToolKind::Move => Some(Capability::FsWrite),
            ToolKind::Execute => Some(Capability::ShellRun),
            ToolKind::Fetch => Some(Capability::NetFetch),
            _ => None,
        },
    }
}

/// A file subject.
#[derive(Debug, Clone)]
pub struct PathSubject {
    /// The path as the model wrote it.
    pub user: String,
    pub canonical: PathBuf,
    /// Workspace-relative (`.` for a root) when inside a root.
    pub relative: Option<String>,
    pub absolute: String,
    /// `~/...` when under the home directory.
    pub home: Option<String>,
    /// `{session}/...` when under the session's scratch directory.
    pub session: Option<String>,
}

impl PathSubject {
    /// The approval key: relative inside the workspace, absolute outside.
    pub fn key(&self) -> &str {
        self.relative.as_deref().unwrap_or(&self.absolute)
    }
}

/// What a call acts on.
#[derive(Debug, Clone)]
pub enum CallSubject {
    Path(PathSubject),
    Command {
        raw: String,
        analysis: ShellAnalysis,
    },
    Host(String),
    Name(String),
    Nothing,
}

/// Resolves the call's subject. An error is a reason to deny (the call cannot be checked).
/// `canonical`: the subject path as the engine already resolved it (not resolved again).
// String error: the reason of the denial, shown to the model and the user as it is.
pub fn subject_of(
    call: &Call<'_>,
    context: &ShellContext<'_>,
    canonical: Option<&Path>,
) -> Result<CallSubject, String> {
    let spec = call.spec;
    if let Origin::Mcp(server) = &spec.origin {
        return Ok(CallSubject::Name(mcp_name(server, &spec.id)));
    }
    match (&spec.subject, call.target) {
        (Subject::None, _) => Ok(CallSubject::Nothing),
        (Subject::Path(_), target) => {
            let user = target.path().unwrap_or(".");
            path_subject(call, context, user, canonical)
        }
        (Subject::Paths, _) => Err(format!(
            "the files of a `{}` call are decided one by one (Policy::decide_paths)",
            spec.id
        )),
        (Subject::Command(_), CallTarget::Command(command)) => {
            // The command starts where the tool starts it: its `cwd`, resolved as the tool
            // resolves it (a directory it cannot resolve leaves relative paths unplaced).
            let start = match &command.cwd {
                Some(cwd) => match call.runtime.resolve_checked(cwd, Access::Read) {
                    Ok(dir) => Cwd::Known(dir),
                    Err(_) => Cwd::Unknown,
                },
                None => context.start(),
            };
            Ok(CallSubject::Command {
                raw: command.line.clone(),
                analysis: analyze_from(&command.line, context, start),
            })
        }
        (Subject::Command(_), _) => Err(format!("the `{}` call names no command", spec.id)),
        (Subject::Url(_), CallTarget::Url(url)) => normalize_host(url).map(CallSubject::Host),
        (Subject::Url(_), _) => Err(format!("the `{}` call names no URL", spec.id)),
        (Subject::Query(_), _) => {
            let hosts = &spec.requires.net.hosts;
            match hosts.as_slice() {
                [host] if !host.contains('*') => Ok(CallSubject::Host(host.to_ascii_lowercase())),
                _ => Ok(CallSubject::Name(spec.id.clone())),
            }
        }
    }
}

/// A path's text, checked as UTF-8 first (faster than the lossy conversion, with the same
/// result for the paths that are UTF-8): the search gate builds a subject for every file found.
fn text_of(path: &Path) -> std::borrow::Cow<'_, str> {
    path.to_str()
        .map_or_else(|| path.to_string_lossy(), std::borrow::Cow::Borrowed)
}

/// The subject of a call acting on the file `user` (`canonical`: already resolved by the
/// engine, not resolved again).
// String error: the reason of the denial, shown to the model and the user as it is.
pub fn path_subject(
    call: &Call<'_>,
    context: &ShellContext<'_>,
    user: &str,
    canonical: Option<&Path>,
) -> Result<CallSubject, String> {
    let user = if user.is_empty() { "." } else { user };
    let canonical = match canonical {
        Some(canonical) => canonical.to_path_buf(),
        None => call.runtime.resolve(user).map_err(|e| e.to_string())?,
    };
    let relative = call
        .runtime
        .roots()
        .iter()
        .find(|r| canonical.starts_with(r))
        .map(|_| call.runtime.display_path(&canonical));
    let home = context.home.and_then(|h| {
        canonical
            .strip_prefix(h)
            .ok()
            .map(|rest| format!("~/{}", text_of(rest)))
    });
    let session = canonical
        .strip_prefix(call.runtime.scratch_dir())
        .ok()
        .map(|rest| {
            if rest.as_os_str().is_empty() {
                SESSION.to_owned()
            } else {
                format!("{SESSION}/{}", text_of(rest))
            }
        });
    Ok(CallSubject::Path(PathSubject {
        user: user.to_owned(),
        absolute: text_of(&canonical).into_owned(),
        canonical,
        relative,
        home,
        session,
    }))
}

/// `server/tool` for an MCP tool (a `server__` / `mcp__server__` prefix on the id is dropped).
pub fn mcp_name(server: &str, id: &str) -> String {
    let tool = id
        .strip_prefix(&format!("mcp__{server}__"))
        .or_else(|| id.strip_prefix(&format!("{server}__")))
        .or_else(|| id.strip_prefix(&format!("{server}/")))
        .or_else(|| id.strip_prefix(&format!("{server}.")))
        .unwrap_or(id);
    format!("{server}/{tool}")
}

/// The host of a URL: lower-cased, IDNA (punycode), without port, user info or trailing dot.
///
/// An `http`/`https` URL is read exactly as the fetch reads it (the WHATWG parser of the `url`
/// crate, which takes `http:/host`, `http:host` and backslashes as `http://host`), so the host
/// the policy decides on is the host the request goes to. Anything else (a URL without a
/// scheme, which the fetch refuses) is read as `https://`.
// String error: the reason of the denial, shown to the model and the user as it is.
pub fn normalize_host(url: &str) -> Result<String, String> {
    let url = url.trim();
    let parsed = match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => parsed,
        _ => {
            let with_scheme = if url.contains("://") {
                url.to_owned()
            } else {
                format!("https://{url}")
            };
            url::Url::parse(&with_scheme).map_err(|e| format!("`{url}` is not a valid URL: {e}"))?
        }
    };
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("`{url}` has no host"))?;
    Ok(host.trim_end_matches('.').to_ascii_lowercase())
}

/// What an "always" answer turns into: a session rule's pattern, described in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub key: String,
    pub pattern: Pattern,
    pub wording: String,
}

/// The keys and "always" proposals of a subject. Empty when nothing can be cached.
pub fn proposals(
    tool: &str,
    capability: Option<Capability>,
    subject: &CallSubject,
) -> Vec<Proposal> {
    match subject {
        CallSubject::Path(path) => {
            if confusable_char(&path.user).is_some() {
                return Vec::new();
            }
            let verb = if capability == Some(Capability::FsWrite) {
                "edits to"
            } else {
                "reads of"
            };
            let key = path.key().to_owned();
            let directory = match &path.relative {
                Some(relative) => Path::new(relative)
                    .parent()
                    .map(|p| p.display().to_string())
                    .filter(|p| !p.is_empty()),
                None => path
                    .canonical
                    .parent()
                    .filter(|p| p.parent().is_some())
                    .map(|p| p.display().to_string()),
            };
            let (pattern, shown) = match directory {
                Some(dir) => {
                    let glob = format!("{}/**", escape_glob(&dir));
                    match Pattern::glob(&glob) {
                        Ok(pattern) => (pattern, format!("{dir}/**")),
                        Err(_) => (Pattern::exact(&key), key.clone()),
                    }
                }
                None => (Pattern::exact(&key), key.clone()),
            };
            vec![Proposal {
                key,
                pattern,
                wording: format!("{verb} {}", code(&shown)),
            }]
        }
        CallSubject::Command { analysis, .. } => analysis
            .keys()
            .into_iter()
            .filter_map(|key| {
                let pattern = Pattern::prefix(&key).ok()?;
                Some(Proposal {
                    wording: format!("commands starting with {}", code(&key)),
                    key,
                    pattern,
                })
            })
            .collect(),
        CallSubject::Host(host) => vec![Proposal {
            key: host.clone(),
            pattern: Pattern::exact(host),
            // The answer opens `web_fetch`'s door only: the words say so.
            wording: format!(
                "`{tool}` fetches from {} (not shell commands' connections)",
                code(host)
            ),
        }],
        CallSubject::Name(name) => vec![Proposal {
            key: name.clone(),
            pattern: Pattern::exact(name),
            wording: format!("calls to {}", code(name)),
        }],
        CallSubject::Nothing => vec![Proposal {
            key: tool.to_owned(),
            pattern: Pattern::any(),
            wording: format!("every `{tool}` call"),
        }],
    }
}

/// "commands starting with `a` and `b`" from several proposals.
pub fn join_wordings(proposals: &[Proposal]) -> Option<String> {
    let first = proposals.first()?;
    if proposals.len() == 1 {
        return Some(first.wording.clone());
    }
    if proposals
        .iter()
        .all(|p| p.wording.starts_with("commands starting with"))
    {
        let keys: Vec<String> = proposals.iter().map(|p| code(&p.key)).collect();
        let (last, rest) = keys.split_last()?;
        return Some(format!(
            "commands starting with {} and {last}",
            rest.join(", ")
        ));
    }
    Some(
        proposals
            .iter()
            .map(|p| p.wording.clone())
            .collect::<Vec<_>>()
            .join(" and "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_normalised() {
        for (url, host) in [
            ("https://Docs.RS/serde", "docs.rs"),
            ("https://user:pw@example.com:8443/x", "example.com"),
            ("docs.rs/x", "docs.rs"),
            ("http://bücher.example/", "xn--bcher-kva.example"),
            ("https://example.com./", "example.com"),
            ("http://[::1]:8080/", "[::1]"),
            // Spellings the fetch reads as `http://evil.example` are that host, not `http`.
            ("http:/evil.example/x", "evil.example"),
            ("http:evil.example/x", "evil.example"),
            ("https:\\\\evil.example\\x", "evil.example"),
            ("HTTP://evil.example\\@docs.rs/", "evil.example"),
        ] {
            assert_eq!(normalize_host(url).unwrap(), host, "{url}");
        }
        assert!(normalize_host("https://").is_err());
    }

    #[test]
    fn mcp_names() {
        assert_eq!(mcp_name("github", "create_issue"), "github/create_issue");
        assert_eq!(
            mcp_name("github", "mcp__github__create_issue"),
            "github/create_issue"
        );
        assert_eq!(
            mcp_name("github", "github__create_issue"),
            "github/create_issue"
        );
    }
}
