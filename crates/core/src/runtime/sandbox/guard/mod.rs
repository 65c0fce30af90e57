//! Files that other programs run, guarded around each confined command that may write the
//! workspace.
//!
//! Keel's project configuration (`.keel/`), git's metadata that runs code (a repository's
//! `config`, `config.worktree`, `commondir` and `hooks/`, the same under `.git/modules/`, and
//! any nested `.git`), and the files editors, CI and hook managers run on their own (the
//! watchdog's list: `.vscode/`, `.envrc`, `.github/workflows/`, ...) must not be created or
//! changed by a command, even one the user approved: they run later, outside the sandbox.
//!
//! Under namespaces the ones that exist at the workspace's top are bound read-only
//! ([`super::Profile::protected`]). What a bind mount cannot cover (a path that does not exist
//! yet, one deeper in the tree, anything under the Landlock fallback, which cannot take a right
//! back inside a granted tree) is compared before and after the command and put back:
//! [`GuardSnapshot::take`] stats the guarded entries the session's [`CredentialIndex`] already
//! knows (kept current by inotify: no walk per command) and keeps a copy of each file's content
//! (read once per version, from a session cache); [`GuardSnapshot::restore`] asks the index
//! again once the command is gone, removes what was created and rewrites what changed, and
//! says so in the tool result. A new nested repository is kept when nothing in it runs code
//! (`git init`, a clone), and removed when its configuration or hooks would (`core.fsmonitor`:
//! the user's next `git status` in the parent runs it through a gitlink).
//!
//! Commands that may write the workspace can overlap (a background job and a `bash` call). A
//! snapshot taken while another such command runs would hold what that one planted as the
//! "before", and put it back once the planter's own guard had removed it: so the session's
//! [`GuardLedger`] keeps the entries as they were before the first of the running writers
//! started, and every snapshot taken while one runs starts from those.

#![expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::CredentialIndex;
use crate::runtime::fsat;

mod ledger;
mod restore;

pub use ledger::GuardLedger;
use ledger::Writer;
use restore::{Outcome, put_back, remove_entry};

/// What a guarded entry is, for the line the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Guarded {
    /// `.keel/` at a workspace root.
    KeelConfig,
    /// A `.git` entry (a repository's directory, or a file naming one).
    GitDir,
    /// A file of a repository's own directory that makes git run programs.
    GitCode,
    /// A file another program runs or loads on its own (an editor's, CI's, a hook manager's).
    AutoRun,
}

impl Guarded {
    fn what(self) -> &'static str {
        match self {
            Guarded::KeelConfig => "Keel's project configuration",
            Guarded::GitDir => "a git repository",
            Guarded::GitCode => "git metadata that can make git run programs",
            Guarded::AutoRun => {
                "a file other programs run on their own (an editor, CI, a hook manager)"
            }
        }
    }
}

/// Which workspace entries are guarded (a path relative to its root), from the policy
/// ([`crate::policy::watchdog::guarded_entry`]).
pub type GuardClassify = Arc<dyn Fn(&Path) -> Option<Guarded> + Send + Sync>;

/// Why a git configuration text may make git run a program (`None`: it cannot), from the policy
/// ([`crate::policy::gitrepo::config_problem`]).
pub type ConfigJudge = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The policy's definitions the guard works with.
#[derive(Clone)]
pub struct GuardRules {
    pub classify: GuardClassify,
    pub config_runs_code: ConfigJudge,
}

impl std::fmt::Debug for GuardRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GuardRules")
    }
}

impl PartialEq for GuardRules {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.classify, &other.classify)
            && Arc::ptr_eq(&self.config_runs_code, &other.config_runs_code)
    }
}

impl Eq for GuardRules {}

/// The largest guarded file Keel keeps a copy of; a larger one that changes is reported, not
/// put back.
const MAX_KEPT_BYTES: u64 = 1024 * 1024;

/// The most guarded entries looked at per command (the list is bounded: a workspace with more
/// has the first ones guarded and a note).
pub const MAX_GUARDED: usize = 4096;

/// What identifies one version of an entry: a change of content, mode, type or identity
/// changes it (`ctime` cannot be set back by the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            mode: meta.mode(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// An entry as it was before the command.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Before {
    /// A regular file: its content when it was small enough to keep.
    File {
        stamp: Stamp,
        bytes: Option<Arc<Vec<u8>>>,
    },
    Dir {
        mode: u32,
    },
    Symlink {
        stamp: Stamp,
        target: PathBuf,
    },
    /// Something else (a FIFO, a socket): only reported when it changes.
    Other {
        stamp: Stamp,
    },
}

/// A kept copy of a file, and the version it is of.
type Kept = (Stamp, Arc<Vec<u8>>);

/// The session's copies of guarded files, by path, valid while the file's `Stamp` holds: a
/// file is read once per version, not once per command.
#[derive(Debug, Default)]
pub struct GuardCache {
    files: Mutex<HashMap<PathBuf, Kept>>,
}

impl GuardCache {
    fn content(&self, path: &Path, stamp: Stamp) -> Option<Arc<Vec<u8>>> {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((known, bytes)) = files.get(path)
            && *known == stamp
        {
            return Some(bytes.clone());
        }
        if stamp.size > MAX_KEPT_BYTES {
            files.remove(path);
            return None;
        }
        let bytes = Arc::new(read_no_follow(path)?);
        files.insert(path.to_path_buf(), (stamp, bytes.clone()));
        Some(bytes)
    }
}

/// What the entry at `path` is now (`None`: nothing is there); a file's content from `cache`.
fn state_of(path: &Path, cache: &GuardCache) -> Option<Before> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let stamp = Stamp::of(&meta);
    Some(if meta.is_file() {
        Before::File {
            stamp,
            bytes: cache.content(path, stamp),
        }
    } else if meta.is_dir() {
        Before::Dir { mode: meta.mode() }
    } else if meta.file_type().is_symlink() {
        match std::fs::read_link(path) {
            Ok(target) => Before::Symlink { stamp, target },
            Err(_) => Before::Other { stamp },
        }
    } else {
        Before::Other { stamp }
    })
}

/// A file's content, reached without following any symlink.
fn read_no_follow(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let (file, meta) = fsat::open_read(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_KEPT_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_KEPT_BYTES + 1).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Where the guarded entries come from.
#[derive(Clone)]
enum Source {
    /// Nothing is guarded (a read-only command, or no writable root).
    Nothing,
    /// The session's index (the policy's full list).
    Index(Arc<CredentialIndex>),
    /// Without the policy's rules (the mechanism's own tests): `.keel` and git's redirect files
    /// at each root.
    Fixed,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Nothing => "Nothing",
            Source::Index(_) => "Index",
            Source::Fixed => "Fixed",
        })
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Source::Index(a), Source::Index(b)) => Arc::ptr_eq(a, b),
            (Source::Nothing, Source::Nothing) | (Source::Fixed, Source::Fixed) => true,
            _ => false,
        }
    }
}

impl Eq for Source {}

/// The fixed list of [`Source::Fixed`], relative to a root.
const FIXED: [(&str, Guarded); 3] = [
    (".keel", Guarded::KeelConfig),
    (".git/commondir", Guarded::GitCode),
    (".git/config.worktree", Guarded::GitCode),
];

/// The guarded entries of one command's writable roots before it ran.
#[derive(Clone)]
pub struct GuardSnapshot {
    source: Source,
    roots: Vec<PathBuf>,
    before: BTreeMap<PathBuf, (Guarded, Before)>,
    config_runs_code: Option<ConfigJudge>,
    /// More entries than [`MAX_GUARDED`]: the rest are not guarded.
    clipped: bool,
    /// The paths bound read-only under namespaces ([`super::Profile::protected`]): what is at
    /// or below them is not compared after a command the kernel confined that way, so a change
    /// the user's own editor made meanwhile is not taken back.
    bound: Vec<PathBuf>,
    /// The command's place in the session's [`GuardLedger`] until its guard has ended.
    writer: Option<Arc<Writer>>,
}

impl Default for GuardSnapshot {
    fn default() -> Self {
        GuardSnapshot {
            source: Source::Nothing,
            roots: Vec::new(),
            before: BTreeMap::new(),
            config_runs_code: None,
            clipped: false,
            bound: Vec::new(),
            writer: None,
        }
    }
}

impl std::fmt::Debug for GuardSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardSnapshot")
            .field("source", &self.source)
            .field("roots", &self.roots)
            .field("before", &self.before)
            .field("clipped", &self.clipped)
            .finish_non_exhaustive()
    }
}

/// Equal when they guard the same entries from the same source (the judge is the session's).
impl PartialEq for GuardSnapshot {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
            && self.roots == other.roots
            && self.before == other.before
            && self.clipped == other.clipped
            && self.bound == other.bound
    }
}

impl Eq for GuardSnapshot {}

impl GuardSnapshot {
    /// The guarded entries of `roots` (the writable workspace roots) now: from `index` when the
    /// session has the policy's rules, else the fixed list. One `lstat` per entry, and a read of
    /// a file only when its version is new to the index's cache.
    pub fn take(roots: &[PathBuf], index: Option<&Arc<CredentialIndex>>) -> GuardSnapshot {
        if roots.is_empty() {
            return GuardSnapshot::default();
        }
        let (source, judge) = match index {
            Some(index) if index.guard_rules().is_some() => (
                Source::Index(index.clone()),
                index
                    .guard_rules()
                    .map(|rules| rules.config_runs_code.clone()),
            ),
            _ => (Source::Fixed, None),
        };
        let (listed, clipped) = list(&source, roots);
        let fresh = GuardCache::default();
        let cache = match &source {
            Source::Index(index) => &index.guard_cache,
            _ => &fresh,
        };
        let mut before = BTreeMap::new();
        for (path, class) in listed {
            if let Some(state) = state_of(&path, cache) {
                before.insert(path, (class, state));
            }
        }
        // Another command that may write the workspace runs: start from what was there before
        // it (or the first of them) started, not from what it may have planted.
        let writer = matches!(source, Source::Index(_)).then(|| {
            GuardLedger::global().begin(roots, &mut before);
            Arc::new(Writer {
                roots: roots.to_vec(),
                ended: std::sync::atomic::AtomicBool::new(false),
            })
        });
        GuardSnapshot {
            source,
            roots: roots.to_vec(),
            before,
            config_runs_code: judge,
            clipped,
            bound: Vec::new(),
            writer,
        }
    }

    /// The guarded entries that exist now at the top of a root (direct children), which a
    /// bind mount can keep read-only.
    pub fn top_level(&self) -> Vec<PathBuf> {
        self.before
            .iter()
            .filter(|(path, (class, state))| {
                *class != Guarded::GitDir
                    && !matches!(state, Before::Symlink { .. } | Before::Other { .. })
                    && path
                        .parent()
                        .is_some_and(|parent| self.roots.iter().any(|root| root == parent))
            })
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Records the paths the command's profile binds read-only (under namespaces).
    pub fn set_bound(&mut self, protected: &[PathBuf]) {
        self.bound = protected.to_vec();
    }

    /// Puts every guarded entry back as it was before the command and removes the ones it
    /// created; one line for the model per change. `bound_held`: the command ran under
    /// namespaces, so what [`Self::set_bound`] named could not change through it.
    pub fn restore(&self, bound_held: bool) -> Vec<String> {
        let lines = self.restore_entries(bound_held);
        self.release();
        lines
    }

    /// The command is over for the guard (put back, or not confirmed confined, so nothing to
    /// compare): it leaves the session's [`GuardLedger`], whatever still holds a copy of this
    /// snapshot (a background job keeps its invocation).
    pub fn release(&self) {
        if let Some(writer) = &self.writer {
            writer.end();
        }
    }

    fn restore_entries(&self, bound_held: bool) -> Vec<String> {
        if self.source == Source::Nothing {
            return Vec::new();
        }
        // While other commands that may write run, the session's entries as they are to be
        // (the first one's "before", with Keel's own writes since).
        let before = match &self.writer {
            Some(_) => GuardLedger::global().current(&self.roots, &self.before),
            None => self.before.clone(),
        };
        let held = |path: &Path| bound_held && self.bound.iter().any(|b| path.starts_with(b));
        let mut lines = Vec::new();
        if self.clipped {
            lines.push(format!(
                "the workspace holds more than {MAX_GUARDED} files that other programs run; \
                 Keel guarded the first {MAX_GUARDED} only"
            ));
        }
        let shown = |path: &Path| -> String {
            self.roots
                .iter()
                .find_map(|root| path.strip_prefix(root).ok())
                .map_or_else(|| path.display().to_string(), |p| p.display().to_string())
        };
        // Changed or removed, parents first (a path sorts before what is below it).
        let mut gone: Vec<PathBuf> = Vec::new();
        for (path, (class, before)) in &before {
            if held(path) || gone.iter().any(|g| path.starts_with(g)) {
                continue;
            }
            match put_back(path, before) {
                Ok(Outcome::Same) => {}
                Ok(Outcome::PutBack) => lines.push(format!(
                    "the command changed {} ({}); Keel put it back",
                    shown(path),
                    class.what()
                )),
                Ok(Outcome::TooLarge) => lines.push(format!(
                    "the command changed {} ({}), too large for Keel to keep a copy of; check \
                     it before running anything",
                    shown(path),
                    class.what()
                )),
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "cannot put a guarded file back");
                    gone.push(path.clone());
                    lines.push(format!(
                        "the command changed {} ({}) and Keel could not put it back: {error}; \
                         check it before running anything",
                        shown(path),
                        class.what()
                    ));
                }
            }
        }
        // Created.
        let (now, _) = list(&self.source, &self.roots);
        let mut kept: Vec<PathBuf> = Vec::new();
        let mut removed: Vec<PathBuf> = Vec::new();
        let mut created: Vec<(PathBuf, Guarded)> = now
            .into_iter()
            .filter(|(path, _)| !before.contains_key(path))
            .collect();
        created.sort();
        for (path, class) in created {
            if held(&path) || kept.iter().chain(&removed).any(|k| path.starts_with(k)) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let why = match class {
                Guarded::GitDir => match self.git_dir_runs_code(&path, &meta) {
                    None => {
                        // A repository whose configuration and hooks run nothing: kept.
                        kept.push(path);
                        continue;
                    }
                    Some(why) => why,
                },
                Guarded::GitCode => match self.new_git_file_runs_code(&path, &meta) {
                    None => continue,
                    Some(why) => why,
                },
                Guarded::KeelConfig | Guarded::AutoRun => class.what().to_owned(),
            };
            match remove_entry(&path) {
                Ok(()) => lines.push(format!(
                    "the command created {} ({why}); Keel removed it",
                    shown(&path)
                )),
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "cannot remove a planted file");
                    lines.push(format!(
                        "the command created {} ({why}) and Keel could not remove it: {error}; \
                         remove it before running anything",
                        shown(&path)
                    ));
                }
            }
            removed.push(path);
        }
        lines
    }

    /// Why a new `.git` entry runs code: its repository's configuration names a program, it
    /// has hooks, or it takes its configuration from elsewhere (`commondir`); a `.git` file
    /// counts for the repository it names. `None`: nothing in it runs.
    fn git_dir_runs_code(&self, path: &Path, meta: &std::fs::Metadata) -> Option<String> {
        let gitdir = if meta.is_dir() {
            path.to_path_buf()
        } else if meta.is_file() {
            let text = String::from_utf8(read_no_follow(path)?).ok()?;
            let Some(named) = text.trim().strip_prefix("gitdir:") else {
                return Some("a `.git` file that names no repository".into());
            };
            path.parent()?.join(named.trim())
        } else {
            return Some("a `.git` that is neither a directory nor a file".into());
        };
        if let Some(why) = self.config_problem(&gitdir.join("config")) {
            return Some(why);
        }
        if let Some(why) = self.config_problem(&gitdir.join("config.worktree")) {
            return Some(why);
        }
        if std::fs::symlink_metadata(gitdir.join("commondir")).is_ok() {
            return Some("its `commondir` takes git's configuration from elsewhere".into());
        }
        installed_hook(&gitdir.join("hooks"))
            .map(|hook| format!("it holds the hook {hook}, which git runs"))
    }

    /// Why a new file among git's own runs code (`None`: it is kept): a hook that is not a
    /// `.sample`, a redirect (`commondir`, `config.worktree`), or a configuration that names a
    /// program.
    fn new_git_file_runs_code(&self, path: &Path, meta: &std::fs::Metadata) -> Option<String> {
        let name = path.file_name()?.to_string_lossy().to_lowercase();
        let in_hooks = path
            .components()
            .any(|part| part.as_os_str().eq_ignore_ascii_case("hooks"));
        if in_hooks {
            return (!meta.is_dir() && !name.ends_with(".sample"))
                .then(|| "a hook, which git runs".to_owned());
        }
        match name.as_str() {
            "commondir" | "config.worktree" => {
                Some("it tells git where to read its configuration".into())
            }
            "config" => self.config_problem(path),
            _ => None,
        }
    }

    /// Why the git configuration at `path` runs code (`None` when it is absent or runs none).
    fn config_problem(&self, path: &Path) -> Option<String> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.is_file() {
            return Some(format!(
                "{} is not a plain file",
                path.file_name()?.to_string_lossy()
            ));
        }
        let judge = self.config_runs_code.as_ref()?;
        let Some(text) = read_no_follow(path).and_then(|b| String::from_utf8(b).ok()) else {
            return Some("its configuration cannot be read".into());
        };
        judge(&text).map(|problem| format!("its configuration runs a program: {problem}"))
    }
}

/// The guarded entries of `roots` now, and whether the list was cut at [`MAX_GUARDED`].
fn list(source: &Source, roots: &[PathBuf]) -> (Vec<(PathBuf, Guarded)>, bool) {
    let mut listed: Vec<(PathBuf, Guarded)> = match source {
        Source::Nothing => Vec::new(),
        Source::Index(index) => match index.guarded_if_watched() {
            Some(listed) => listed
                .into_iter()
                .filter(|(path, _)| roots.iter().any(|root| path.starts_with(root)))
                .collect(),
            None => index
                .guard_rules()
                .map(|rules| shallow(roots, rules))
                .unwrap_or_default(),
        },
        Source::Fixed => roots
            .iter()
            .flat_map(|root| FIXED.iter().map(|(rel, class)| (root.join(rel), *class)))
            .collect(),
    };
    let clipped = listed.len() > MAX_GUARDED;
    listed.truncate(MAX_GUARDED);
    (listed, clipped)
}

/// The guarded entries near the top of each root, without the index (inotify cannot cover the
/// workspace): the root's own entries and one level below the guarded directories among them
/// (`.keel/`, `.vscode/`, `.git/`'s config, redirects and hooks), and `.github/workflows/`.
fn shallow(roots: &[PathBuf], rules: &GuardRules) -> Vec<(PathBuf, Guarded)> {
    const MAX_ENTRIES: usize = 1024;
    let mut listed = Vec::new();
    let mut todo: Vec<(PathBuf, usize)> = roots.iter().map(|root| (root.clone(), 0)).collect();
    for root in roots {
        todo.push((root.join(".github/workflows"), 1));
    }
    while let Some((dir, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_ENTRIES) {
            let path = entry.path();
            let Some(relative) = roots.iter().find_map(|root| path.strip_prefix(root).ok()) else {
                continue;
            };
            let class = (rules.classify)(relative);
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if let Some(class) = class {
                listed.push((path.clone(), class));
            }
            let git = relative.as_os_str().eq_ignore_ascii_case(".git")
                || relative.starts_with(".git/hooks");
            if is_dir && depth < 2 && (class.is_some_and(|c| c != Guarded::GitDir) || git) {
                todo.push((path, depth + 1));
            }
        }
    }
    listed.sort();
    listed
}

/// The first hook of `dir` that is not a `.sample`.
fn installed_hook(dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .flatten()
        .take(1024)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .find(|name| !name.ends_with(".sample"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::disallowed_methods, reason = "the test lays files out on disk")]
    fn a_fixed_snapshot_puts_back_what_changed_and_removes_what_was_made() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".git/config.worktree"), "[core]\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let snapshot = GuardSnapshot::take(std::slice::from_ref(&root), None);
        std::fs::write(
            root.join(".git/config.worktree"),
            "[core]\n\tfsmonitor = x\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".git/commondir"), "/elsewhere\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join(".keel/sub")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".keel/sub/config.toml"), "x").unwrap_or_else(|e| panic!("{e}"));
        let lines = snapshot.restore(false);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config.worktree")).unwrap_or_default(),
            "[core]\n"
        );
        assert!(!root.join(".git/commondir").exists());
        assert!(!root.join(".keel").exists());
        // Nothing changed: nothing to say.
        let again = GuardSnapshot::take(std::slice::from_ref(&root), None);
        assert!(again.restore(false).is_empty());
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "the test lays files out on disk")]
    fn what_a_bind_kept_read_only_is_not_compared() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".git/commondir"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        let mut snapshot = GuardSnapshot::take(std::slice::from_ref(&root), None);
        snapshot.set_bound(&[root.join(".git/commondir")]);
        // Changed by someone else while the command ran (the command could not: it was bound).
        std::fs::write(root.join(".git/commondir"), "b\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(snapshot.restore(true).is_empty());
        assert_eq!(
            std::fs::read_to_string(root.join(".git/commondir")).unwrap_or_default(),
            "b\n"
        );
        // Under the fallback the bind did not exist: put back.
        assert_eq!(snapshot.restore(false).len(), 1);
        assert_eq!(
            std::fs::read_to_string(root.join(".git/commondir")).unwrap_or_default(),
            "a\n"
        );
    }
}
