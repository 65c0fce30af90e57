//! Which repository a git command would open, and whether its configuration names a program.
//!
//! A repository's own configuration (`.git/config`) is project content: a cloned repository,
//! or anything that wrote into the workspace, can set `core.fsmonitor`, `core.pager`,
//! `diff.external`, a `textconv` or a `filter` driver, and then `git status` or `git diff`
//! runs that program. So a git command is read-only only when:
//!
//! - the repository git finds from the command's directory is the workspace's own (or one
//!   above it), never a repository embedded in the workspace (a nested `.git`, a bare
//!   repository, a path operand that leads into one), and has no submodules;
//! - every key of its configuration files is on a short allowlist of keys that name no program
//!   ([`config_problem`]); an `include`, an unknown section or a line that does not parse
//!   counts as a program.
//!
//! Everything else asks. The user's own `~/.gitconfig` and the system configuration are the
//! user's, and are not inspected.

use std::path::{Path, PathBuf};

use crate::runtime::probe;
use crate::tool::view::code;

/// Configuration files larger than this are not read (and count as unsafe).
pub const MAX_CONFIG_BYTES: u64 = 256 * 1024;

/// How many directories are looked at when walking up from a path.
const MAX_WALK: usize = 256;

/// Why a git command run in `cwd` (with `operands` resolved) may run configured programs or
/// open a repository other than the workspace's own; `None` when it cannot.
pub fn git_problem(cwd: &Path, roots: &[PathBuf], operands: &[PathBuf]) -> Option<String> {
    let (top, kind) = find_repository(cwd)?;
    let in_root = roots.iter().any(|r| top.starts_with(r) && top != *r);
    if in_root {
        return Some(format!(
            "{} holds a repository embedded in the workspace; git would use its configuration",
            code(&top.display().to_string())
        ));
    }
    let gitdir = match kind {
        RepoKind::Bare => {
            return Some(format!(
                "{} is a bare repository; git would use its configuration",
                code(&top.display().to_string())
            ));
        }
        RepoKind::DotGitDir => top.join(".git"),
        RepoKind::DotGitFile => match read_small(&top.join(".git")) {
            Some(text) => match text.trim().strip_prefix("gitdir:") {
                Some(dir) => top.join(dir.trim()),
                None => return Some("the `.git` file does not name a repository".to_owned()),
            },
            None => return Some("the `.git` file cannot be read".to_owned()),
        },
    };
    if kind == RepoKind::DotGitFile
        && let Some(problem) = foreign_gitdir(&top, &gitdir, roots)
    {
        return Some(problem);
    }
    if kind == RepoKind::DotGitDir
        && roots.iter().any(|r| top.starts_with(r))
        && let Some(problem) = linked_out(&gitdir, roots)
    {
        return Some(problem);
    }
    if is_present(&gitdir.join("modules")) {
        return Some(
            "the repository has submodules, whose own configuration git would use".to_owned(),
        );
    }
    // A gitlink in the index (a repository committed inside this one, `.gitmodules` or not):
    // `git status` and `git diff` run `git status` inside it, under its own configuration
    // (`core.fsmonitor`).
    if index_has_gitlink(&gitdir) {
        return Some(
            "the index holds a submodule (a gitlink), whose own configuration git would use"
                .to_owned(),
        );
    }
    let mut configs = vec![gitdir.join("config"), gitdir.join("config.worktree")];
    let mut hooks = vec![gitdir.join("hooks")];
    if let Some(common) = read_small(&gitdir.join("commondir")) {
        let common = gitdir.join(common.trim());
        if inside_roots(&gitdir, roots) && !inside_roots(&common, roots) {
            return Some(format!(
                "{} names a repository outside the workspace",
                code(&gitdir.join("commondir").display().to_string())
            ));
        }
        configs.push(common.join("config"));
        configs.push(common.join("config.worktree"));
        hooks.push(common.join("hooks"));
    }
    // `objects/info/alternates` lends git the object store of another repository: a read-only
    // command could then print that repository's files.
    if inside_roots(&gitdir, roots) && is_present(&gitdir.join("objects/info/alternates")) {
        return Some(format!(
            "{} borrows objects from another repository",
            code(&gitdir.display().to_string())
        ));
    }
    for dir in hooks {
        if let Some(hook) = installed_hook(&dir) {
            return Some(format!(
                "{} is a hook; git runs hooks even for reads (`post-index-change` on `git status`)",
                code(&hook.display().to_string())
            ));
        }
    }
    for config in configs {
        if !is_present(&config) {
            continue;
        }
        let Some(text) = read_small(&config) else {
            return Some(format!(
                "{} cannot be read",
                code(&config.display().to_string())
            ));
        };
        if let Some(problem) = config_problem(&text) {
            return Some(format!(
                "{}: {problem}",
                code(&config.display().to_string())
            ));
        }
    }
    for operand in operands {
        if let Some(nested) = embedded_below(operand, roots) {
            return Some(format!(
                "{} leads into the repository embedded at {}",
                code(&operand.display().to_string()),
                code(&nested.display().to_string())
            ));
        }
    }
    None
}

/// Whether `path` (resolved through symlinks where it exists) lies inside a workspace root.
fn inside_roots(path: &Path, roots: &[PathBuf]) -> bool {
    let path = probe::canonical_or_same(path);
    roots.iter().any(|r| path.starts_with(r))
}

/// A `.git` file may name a repository directory outside the workspace only when that
/// directory is a linked worktree's administrative directory that names this `.git` file back
/// (what `git worktree add` writes). Otherwise a planted `gitdir:` line would let read-only git
/// commands print another repository's history and files.
fn foreign_gitdir(top: &Path, gitdir: &Path, roots: &[PathBuf]) -> Option<String> {
    if inside_roots(gitdir, roots) {
        return None;
    }
    let own = probe::canonicalize(&top.join(".git")).ok();
    let back = read_small(&gitdir.join("gitdir"))
        .and_then(|text| probe::canonicalize(Path::new(text.trim())).ok());
    match (own, back) {
        (Some(own), Some(back)) if own == back => None,
        _ => Some(format!(
            "the `.git` file names {}, a repository outside the workspace that is not this \
             worktree's",
            code(&gitdir.display().to_string())
        )),
    }
}

/// How many entries of a repository directory are looked at for symlinks out of the
/// workspace; more counts as one.
const MAX_GITDIR_ENTRIES: usize = 4096;

/// A workspace repository's `.git` directory, or one of its parts (`objects`, `refs`,
/// `objects/pack/*`, ...), that is a symlink resolving outside the workspace: read-only git
/// commands would print another repository's history and files.
fn linked_out(gitdir: &Path, roots: &[PathBuf]) -> Option<String> {
    let out = |path: &Path| {
        Some(format!(
            "{} leads to a repository outside the workspace",
            code(&path.display().to_string())
        ))
    };
    if !inside_roots(gitdir, roots) {
        return out(gitdir);
    }
    let mut dirs = vec![gitdir.to_path_buf()];
    let mut budget = MAX_GITDIR_ENTRIES;
    dirs.extend(["objects", "objects/pack", "objects/info"].map(|d| gitdir.join(d)));
    for dir in dirs {
        let Ok(entries) = probe::dir_entries(&dir, budget) else {
            continue;
        };
        let Some(entries) = entries else {
            return out(&dir);
        };
        budget = budget.saturating_sub(entries.len());
        for entry in entries {
            let linked = probe::symlink_metadata(&entry).is_ok_and(|m| m.file_type().is_symlink());
            let resolved_inside = probe::canonicalize(&entry)
                .is_ok_and(|target| roots.iter().any(|r| target.starts_with(r)));
            if linked && !resolved_inside {
                return out(&entry);
            }
        }
    }
    None
}

/// The first hook installed in `dir` (anything but git's `*.sample` files).
fn installed_hook(dir: &Path) -> Option<PathBuf> {
    let entries = probe::dir_entries(dir, usize::MAX).ok()??;
    entries.into_iter().find(|entry| {
        !entry
            .file_name()
            .is_some_and(|name| name.to_string_lossy().ends_with(".sample"))
    })
}

/// Index files larger than this are not read (and count as tracking a credential).
const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// Whether the index of the repository git finds from `cwd` tracks a credential file (by name,
/// [`super::commands::is_secret_name`]): then a patch or a blob a git command prints may show
/// it. An index that cannot be read as a version 2 or 3 index counts as tracking one.
pub fn tracks_secret(cwd: &Path) -> bool {
    let Some((top, kind)) = find_repository(cwd) else {
        return false;
    };
    let gitdir = match kind {
        RepoKind::Bare => top.clone(),
        RepoKind::DotGitDir => top.join(".git"),
        RepoKind::DotGitFile => match read_small(&top.join(".git")) {
            Some(text) => match text.trim().strip_prefix("gitdir:") {
                Some(dir) => top.join(dir.trim()),
                None => return true,
            },
            None => return true,
        },
    };
    let index = gitdir.join("index");
    if !is_present(&index) {
        return false;
    }
    let Some(bytes) = read_index(&index) else {
        return true;
    };
    match index_paths(&bytes, 20).or_else(|| index_paths(&bytes, 32)) {
        Some(paths) => paths.iter().any(|path| {
            path.rsplit(|b| *b == b'/')
                .next()
                .is_some_and(|name| super::commands::is_secret_name(&String::from_utf8_lossy(name)))
        }),
        None => true,
    }
}

/// Whether the index in `gitdir` has a gitlink entry (mode 160000); an index that cannot be
/// read as a version 2 or 3 index counts as having one.
fn index_has_gitlink(gitdir: &Path) -> bool {
    let index = gitdir.join("index");
    if !is_present(&index) {
        return false;
    }
    read_index(&index).is_none_or(|bytes| holds_gitlink(&bytes))
}

/// Whether index bytes hold a gitlink entry, or cannot be read as a version 2 or 3 index.
fn holds_gitlink(bytes: &[u8]) -> bool {
    match index_entries(bytes, 20).or_else(|| index_entries(bytes, 32)) {
        Some(entries) => entries.iter().any(|(mode, _)| mode & 0o170000 == 0o160000),
        None => true,
    }
}

/// Git's index (bounded, read-only), for the names of tracked credential files.
fn read_index(path: &Path) -> Option<Vec<u8>> {
    probe::read_bounded(path, MAX_INDEX_BYTES)
}

/// The paths of a version 2 or 3 index whose object names are `hash` bytes long; `None` when
/// the bytes are not such an index.
fn index_paths(bytes: &[u8], hash: usize) -> Option<Vec<&[u8]>> {
    Some(
        index_entries(bytes, hash)?
            .into_iter()
            .map(|(_, path)| path)
            .collect(),
    )
}

/// The (mode, path) entries of a version 2 or 3 index whose object names are `hash` bytes
/// long; `None` when the bytes are not such an index.
fn index_entries(bytes: &[u8], hash: usize) -> Option<Vec<(u32, &[u8])>> {
    let word = |at: usize| -> Option<u32> {
        let b = bytes.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if bytes.get(0..4)? != b"DIRC" {
        return None;
    }
    let version = word(4)?;
    if version != 2 && version != 3 {
        return None;
    }
    let count = word(8)?;
    let mut at = 12usize;
    let mut paths = Vec::new();
    for _ in 0..count {
        let flags_at = at.checked_add(40 + hash)?;
        let f = bytes.get(flags_at..flags_at + 2)?;
        let flags = u16::from_be_bytes([f[0], f[1]]);
        let mut path_at = flags_at + 2;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return None;
            }
            path_at += 2;
        }
        let rest = bytes.get(path_at..)?;
        let len = rest.iter().position(|b| *b == 0)?;
        let named = usize::from(flags & 0x0fff);
        if named != 0x0fff && named != len {
            return None;
        }
        let mode = word(at.checked_add(24)?)?;
        paths.push((mode, &rest[..len]));
        // Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
        let size = (path_at - at + len + 8) & !7;
        at = at.checked_add(size)?;
    }
    Some(paths)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepoKind {
    DotGitDir,
    DotGitFile,
    Bare,
}

fn is_present(path: &Path) -> bool {
    probe::is_present(path)
}

/// The directory git would treat as the top of the repository, walking up from `cwd`.
fn find_repository(cwd: &Path) -> Option<(PathBuf, RepoKind)> {
    for dir in cwd.ancestors().take(MAX_WALK) {
        let dot_git = dir.join(".git");
        if let Ok(meta) = probe::metadata(&dot_git) {
            let kind = if meta.is_dir() {
                RepoKind::DotGitDir
            } else {
                RepoKind::DotGitFile
            };
            return Some((dir.to_path_buf(), kind));
        }
        if is_present(&dot_git) {
            // A dangling `.git` symlink: git would fail, but do not guess.
            return Some((dir.to_path_buf(), RepoKind::DotGitFile));
        }
        if looks_bare(dir) {
            return Some((dir.to_path_buf(), RepoKind::Bare));
        }
    }
    None
}

/// git's test for a repository directory: `HEAD`, `objects/` and `refs/`.
fn looks_bare(dir: &Path) -> bool {
    probe::is_file(&dir.join("HEAD"))
        && probe::is_dir(&dir.join("objects"))
        && probe::is_dir(&dir.join("refs"))
}

/// The first directory from `path` up to (not including) its workspace root that holds
/// repository metadata.
fn embedded_below(path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let root = roots.iter().find(|r| path.starts_with(r))?;
    for dir in path.ancestors().take(MAX_WALK) {
        if dir == root.as_path() {
            break;
        }
        if is_present(&dir.join(".git")) || looks_bare(dir) {
            return Some(dir.to_path_buf());
        }
    }
    None
}

/// A small repository file (bounded, read-only, UTF-8): its configuration, a `.git` file.
fn read_small(path: &Path) -> Option<String> {
    String::from_utf8(probe::read_bounded(path, MAX_CONFIG_BYTES)?).ok()
}

/// Keys that name no program, by section (`*` for a subsection of any name).
const SAFE_KEYS: &[(&str, &[&str])] = &[
    (
        "core",
        &[
            "repositoryformatversion",
            "filemode",
            "bare",
            "logallrefupdates",
            "ignorecase",
            "precomposeunicode",
            "symlinks",
            "autocrlf",
            "eol",
            "safecrlf",
            "quotepath",
            "abbrev",
            "checkstat",
            "trustctime",
            "sharedrepository",
            "commentchar",
            "commentstring",
            "whitespace",
            "untrackedcache",
            "splitindex",
            "preloadindex",
            "compression",
            "bigfilethreshold",
            "warnambiguousrefs",
        ],
    ),
    (
        "remote.*",
        &[
            "url",
            "pushurl",
            "fetch",
            "push",
            "tagopt",
            "prune",
            "prunetags",
            "mirror",
            "skipdefaultupdate",
            "skipfetchall",
        ],
    ),
    (
        "branch.*",
        &["remote", "merge", "rebase", "pushremote", "description"],
    ),
    ("user", &["name", "email", "signingkey", "useconfigonly"]),
    ("author", &["name", "email"]),
    ("committer", &["name", "email"]),
    ("init", &["defaultbranch"]),
    ("pull", &["rebase", "ff"]),
    ("push", &["default", "autosetupremote", "followtags"]),
    ("fetch", &["prune", "prunetags"]),
    ("merge", &["ff", "conflictstyle"]),
    ("rebase", &["autostash", "autosquash", "updaterefs"]),
    ("status", &["showuntrackedfiles", "branch", "short"]),
    (
        "extensions",
        &[
            "worktreeconfig",
            "objectformat",
            "refstorage",
            "preciousobjects",
        ],
    ),
    ("lfs", &["repositoryformatversion"]),
    ("gc", &["auto", "autodetach"]),
    ("index", &["version"]),
    ("advice", &["*"]),
    ("column", &["*"]),
    ("color", &["*"]),
    ("color.*", &["*"]),
    (
        "diff",
        &[
            "renames",
            "algorithm",
            "mnemonicprefix",
            "noprefix",
            "context",
            "colormoved",
            "indentheuristic",
            "interhunkcontext",
            "statgraphwidth",
            "relative",
            "wserrorhighlight",
            "dirstat",
            "suppressblankempty",
        ],
    ),
    (
        "log",
        &[
            "date",
            "decorate",
            "abbrevcommit",
            "follow",
            "mailmap",
            "showroot",
        ],
    ),
    ("feature", &["manyfiles", "experimental"]),
];

fn key_is_safe(section: &str, subsection: Option<&str>, key: &str) -> bool {
    let wanted = match subsection {
        Some(_) => format!("{section}.*"),
        None => section.to_owned(),
    };
    SAFE_KEYS
        .iter()
        .find(|(s, _)| *s == wanted)
        .is_some_and(|(_, keys)| keys.iter().any(|k| *k == "*" || *k == key))
}

/// Why a git configuration text may make git run a program (or cannot be vouched for).
pub fn config_problem(text: &str) -> Option<String> {
    let mut section: Option<(String, Option<String>)> = None;
    for raw in text.lines() {
        if raw.trim_end().ends_with('\\') {
            return Some("a continued line".to_owned());
        }
        let mut line = raw.trim_start();
        if line.starts_with('[') {
            // git allows `]` inside a quoted subsection (`[remote "]"]`): find the `]` that
            // closes the header, and refuse any header that cannot be read, so that no later
            // line escapes the check.
            let Some(close) = header_end(line) else {
                return Some(format!("the section header {}", code(raw.trim())));
            };
            let header = &line[1..close];
            let Some(parsed) = parse_header(header) else {
                return Some(format!("the section header {}", code(raw.trim())));
            };
            section = Some(parsed);
            line = line[close + 1..].trim_start();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let name = line
            .split(['=', ' ', '\t', '#', ';'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        let Some((sec, sub)) = &section else {
            return Some(format!("the line {} outside a section", code(raw.trim())));
        };
        if !valid || !key_is_safe(sec, sub.as_deref(), &name) {
            let shown = match sub {
                Some(sub) => format!("{sec}.{sub}.{name}"),
                None => format!("{sec}.{name}"),
            };
            return Some(format!(
                "{shown} is not among the settings known to name no program",
                shown = code(&shown),
            ));
        }
    }
    None
}

/// The byte offset of the `]` that closes the section header starting `line` (outside quotes;
/// a backslash escapes the next character inside them).
fn header_end(line: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == ']' && !quoted {
            return Some(at);
        }
    }
    None
}

fn parse_header(header: &str) -> Option<(String, Option<String>)> {
    let header = header.trim();
    if let Some((name, rest)) = header.split_once(char::is_whitespace) {
        let sub = rest.trim().strip_prefix('"')?.strip_suffix('"')?;
        if sub.contains(['"', '\\']) {
            return None;
        }
        return Some((name.to_ascii_lowercase(), Some(sub.to_owned())));
    }
    match header.split_once('.') {
        Some((name, sub)) => Some((name.to_ascii_lowercase(), Some(sub.to_owned()))),
        None => Some((header.to_ascii_lowercase(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 2 index of one entry with `mode` at `path` (SHA-1 names).
    fn one_entry_index(mode: u32, path: &str) -> Vec<u8> {
        let mut bytes = b"DIRC".to_vec();
        bytes.extend(2u32.to_be_bytes());
        bytes.extend(1u32.to_be_bytes());
        let start = bytes.len();
        bytes.extend([0u8; 24]);
        bytes.extend(mode.to_be_bytes());
        bytes.extend([0u8; 12]);
        bytes.extend([7u8; 20]);
        bytes.extend(u16::try_from(path.len()).unwrap_or(0).to_be_bytes());
        bytes.extend(path.as_bytes());
        let size = (bytes.len() - start + 8) & !7;
        bytes.resize(start + size, 0);
        bytes
    }

    #[test]
    fn index_entries_read_modes_and_paths() {
        let index = one_entry_index(0o160000, "vendor/lib");
        assert_eq!(
            index_entries(&index, 20),
            Some(vec![(0o160000, b"vendor/lib".as_slice())])
        );
        assert_eq!(
            index_paths(&index, 20),
            Some(vec![b"vendor/lib".as_slice()])
        );
    }

    #[test]
    fn a_gitlink_in_the_index_is_found() {
        assert!(!holds_gitlink(&one_entry_index(0o100644, "a.txt")));
        assert!(holds_gitlink(&one_entry_index(0o160000, "sub")));
        assert!(holds_gitlink(b"not an index"));
    }

    #[test]
    fn plain_configurations_are_safe() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                    \tlogallrefupdates = true\n[remote \"origin\"]\n\turl = git@x:y.git\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
                    \tremote = origin\n\tmerge = refs/heads/main\n# comment\n";
        assert_eq!(config_problem(text), None);
    }

    #[test]
    fn programs_and_includes_are_problems() {
        for text in [
            "[core]\n\tfsmonitor = ./x.sh\n",
            "[core]\n\tpager = sh -c id\n",
            "[core] pager = less\n",
            "[diff]\n\texternal = ./d\n",
            "[diff \"x\"]\n\ttextconv = ./t\n",
            "[filter \"lfs\"]\n\tclean = ./c\n",
            "[include]\n\tpath = ../x\n",
            "[includeIf \"gitdir:/\"]\n\tpath = x\n",
            "[core]\n\tbare = false \\\n",
            "[alias]\n\tst = !sh\n",
            "[CORE]\n\tFSMONITOR = x\n",
            "[remote \"o\"]\n\tuploadpack = ./x\n",
            "[submodule \"s\"]\n\tupdate = !sh\n",
            "pager = x\n",
            "[core\n",
            "[remote \"]\"]\n\turl = x\n[core]\n\tfsmonitor = ./x.sh\n",
            "[remote \"a\\\"]\"]\n[core]\n\tpager = x\n",
            "[core x]\n[core]\n\tpager = x\n",
            "[core]\n\tworktree = /home\n",
        ] {
            assert!(config_problem(text).is_some(), "{text}");
        }
    }
}
