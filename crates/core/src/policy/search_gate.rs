//! [`PolicySearchGate`]: the policy's answer to "may this search read the file it found?".
//!
//! `grep` and `glob` are decided once, on the path the call names (usually a directory). The
//! files their walk finds below it are decided here, one by one, exactly as a read of that
//! file by the same tool would be: a file whose read would be allowed is searched, one whose
//! read would be asked (a `.env` file, a credential the watchdog knows, a hard-linked file) is
//! shown by name only, one whose read is denied is left out. Whatever the call's glob or type
//! filters re-include, a search therefore never shows content the read tool would have asked
//! for.
//!
//! The gate decides on the name alone and touches no file: the path is the one the search's
//! walk reached (not resolved again), and a hard-linked file, which a read would ask for, is
//! told apart by the search itself from the descriptor it reads (`grep` names it instead of
//! searching it; `glob` lists names, which links do not hide).
//!
//! The decision is the policy's own ([`Policy::decide`]'s, for a read of the file by the same
//! tool), but a search asks it of every file, so the gate compiles what decides a read for the
//! call once (`Reader`: the mode, the trust, the rules that name the tool or its capability,
//! the home directory), and decides each file in two parts: what holds for every file of a
//! directory (which spelling of the directory each rule sees, how far each glob's DFA gets
//! through it, which credential stores it lies in) once per directory, per thread; what
//! depends on the file's name per file (the rules' names and the rest of their DFAs, the
//! credential names), without building a string. Paths that are not plain ASCII, names that
//! equal a root, the home or scratch directory, a policy that changed since (a mode switch,
//! an answer) and tools that are not plain readers are decided in full, as before.

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::evaluate::pick;
use super::pattern::{InDir, PathForm};
use super::subject::capability_of;
use super::watchdog::FilesIn;
use super::{Action, Call, Capability, Cause, Mode, Policy, Rule};
use crate::runtime::{PathsOf, Runtime, SearchAccess, SearchGate};
use crate::tool::{CallTarget, Subject, ToolSpec};

/// The gate the engine installs for each call ([`Runtime::with_search_gate`]).
#[derive(Debug, Clone)]
pub struct PolicySearchGate {
    policy: Arc<Policy>,
    spec: ToolSpec,
    /// The reads of this call's files, compiled on first use (`None`: decided in full).
    reader: OnceLock<Option<Reader>>,
}

impl PolicySearchGate {
    /// The gate for calls of the tool `spec` under `policy`.
    pub fn new(policy: Arc<Policy>, spec: ToolSpec) -> Self {
        Self {
            policy,
            spec,
            reader: OnceLock::new(),
        }
    }

    /// The full decision of a read of `canonical` ([`Policy::decide`]'s path), which the
    /// compiled reader answers exactly as.
    pub(crate) fn decided_in_full(&self, runtime: &Runtime, canonical: &Path) -> SearchAccess {
        let Subject::Path(Some(_)) = &self.spec.subject else {
            // A tool without a path argument cannot be asked about one path: name only.
            return SearchAccess::NameOnly;
        };
        // A path that is not UTF-8 is decided on its lossy spelling (each invalid sequence a
        // U+FFFD, which the rules' `*` and prefixes match like any character): a rule that
        // denies its directory hides it. No rule can name its exact bytes and the read tool
        // cannot name it at all, so it is never read, at most named.
        let lossy = canonical.to_string_lossy();
        let exact = matches!(lossy, std::borrow::Cow::Borrowed(_));
        let target = CallTarget::Path(lossy.as_ref().to_owned());
        let decision = self.policy.decide_found(
            &Call {
                spec: &self.spec,
                target: &target,
                runtime,
            },
            Path::new(lossy.as_ref()),
        );
        match decision.action {
            Action::Allow if exact => SearchAccess::Read,
            Action::Allow | Action::Ask => SearchAccess::NameOnly,
            // Headless turns every prompt into a denial; the name is still harmless.
            Action::Deny if matches!(decision.explanation.cause, Cause::Headless { .. }) => {
                SearchAccess::NameOnly
            }
            Action::Deny => SearchAccess::Hidden,
        }
    }

    /// The compiled reader, when it decides for `runtime` and the policy as it is now.
    fn reader(&self, runtime: &Runtime) -> Option<&Reader> {
        let reader = self
            .reader
            .get_or_init(|| Reader::compile(&self.policy, &self.spec, runtime))
            .as_ref()?;
        (runtime.same_paths(&reader.paths) && self.policy.changes() == reader.changes)
            .then_some(reader)
    }
}

impl SearchGate for PolicySearchGate {
    fn access(&self, runtime: &Runtime, canonical: &Path) -> SearchAccess {
        self.reader(runtime)
            .and_then(|reader| reader.access(canonical))
            .unwrap_or_else(|| self.decided_in_full(runtime, canonical))
    }
}

/// Tells readers apart in the per-thread directory cache.
static READERS: AtomicU64 = AtomicU64::new(0);

/// The reads of one call's files, compiled: what [`Policy::decide`] consults for a read of a
/// found file by a tool that only reads (the rules, the mode, the watchdog's credential
/// check; the scope was checked by [`Runtime::search_access`]).
#[derive(Debug, Clone)]
struct Reader {
    id: u64,
    /// The runtime whose roots and scratch directory the forms below were taken from.
    paths: PathsOf,
    /// The policy's change counter when compiled.
    changes: u64,
    roots: Vec<String>,
    home: Option<String>,
    home_path: Option<std::path::PathBuf>,
    scratch: String,
    rules: Vec<ReadRule>,
    trusted: bool,
    /// Mode `yolo`: a prompt becomes an allow (the only mode that changes a plain read).
    yolo: bool,
}

/// One rule, with what matching a path needs of it.
#[derive(Debug, Clone)]
struct ReadRule {
    rule: Rule,
    form: PathForm,
    /// Deny and ask rules match folded spellings.
    restrictive: bool,
    /// [`super::Pattern::path_text`].
    text: String,
}

/// A directory's text as the reader takes it: absolute, not `/`, without a trailing `/` or
/// empty, `.` or `..` components, UTF-8.
fn plain_dir(text: &str) -> bool {
    text.len() > 1
        && text.starts_with('/')
        && text[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

impl Reader {
    fn compile(policy: &Policy, spec: &ToolSpec, runtime: &Runtime) -> Option<Reader> {
        let capability = capability_of(spec);
        if capability != Some(Capability::FsRead)
            || spec.mutating
            || !matches!(spec.subject, Subject::Path(Some(_)))
        {
            return None;
        }
        let snapshot = policy.read_snapshot(spec.policy_id(), capability);
        let text = |path: &Path| path.to_str().filter(|t| plain_dir(t)).map(str::to_owned);
        let roots = runtime
            .roots()
            .iter()
            .map(|root| text(root))
            .collect::<Option<Vec<_>>>()?;
        let home = match &snapshot.home {
            Some(home) => Some(text(home)?),
            None => None,
        };
        let scratch = text(runtime.scratch_dir())?;
        let rules = snapshot
            .rules
            .into_iter()
            .map(|rule| {
                let restrictive = rule.action != Action::Allow;
                ReadRule {
                    form: rule.pattern.path_form(),
                    text: rule.pattern.path_text(restrictive),
                    restrictive,
                    rule,
                }
            })
            .collect();
        Some(Reader {
            id: READERS.fetch_add(1, Ordering::Relaxed),
            paths: runtime.paths_of(),
            changes: snapshot.changes,
            roots,
            home,
            home_path: snapshot.home,
            scratch,
            rules,
            trusted: snapshot.trusted,
            yolo: snapshot.mode == Mode::Yolo,
        })
    }

    /// The access to `canonical`, or `None` when it is to be decided in full.
    fn access(&self, canonical: &Path) -> Option<SearchAccess> {
        use std::os::unix::ffi::OsStrExt as _;
        let bytes = canonical.as_os_str().as_bytes();
        if !bytes.is_ascii() {
            return None;
        }
        let slash = bytes.iter().rposition(|&b| b == b'/')?;
        let (dir, name) = (&bytes[..slash], &bytes[slash + 1..]);
        // Control characters are the only confusable ones in ASCII (denied by the watchdog).
        if name.is_empty()
            || name == b"."
            || name == b".."
            || name.len() > NAME_MAX
            || name.iter().any(|&b| confusable_byte(b))
        {
            return None;
        }
        DIRS.with(|cache| {
            let mut cache = cache.borrow_mut();
            let cache = &mut *cache;
            if cache.reader != Some(self.id) || cache.dir.as_bytes() != dir {
                let dir = std::str::from_utf8(dir).ok()?;
                cache.files = Files::of(self, dir);
                cache.dir.clear();
                cache.dir.push_str(dir);
                cache.reader = Some(self.id);
            }
            let name = std::str::from_utf8(name).ok()?;
            cache.folded.clear();
            cache.folded.push_str(name);
            cache.folded.make_ascii_lowercase();
            let files = cache.files.as_ref()?;
            if files.special.iter().any(|special| special == name) {
                return None;
            }
            Some(self.decide(files, canonical, name, &cache.folded))
        })
    }

    /// The access to the file `name` (`folded`) of the directory `files` describes.
    fn decide(&self, files: &Files, canonical: &Path, name: &str, folded: &str) -> SearchAccess {
        let matching = self
            .rules
            .iter()
            .zip(&files.rules)
            .filter(|(read, in_dir)| {
                let (prefix, name) = if read.restrictive {
                    (files.prefix(read.form, true), folded)
                } else {
                    (files.prefix(read.form, false), name)
                };
                read.rule
                    .pattern
                    .matches_in_dir(in_dir, prefix, name, read.restrictive)
            })
            .map(|(read, _)| &read.rule);
        // `allow`: the path has no confusable character (checked before).
        let mut action = pick(matching, self.trusted, true).action();
        if self.yolo && action == Action::Ask {
            action = Action::Allow;
        }
        if action != Action::Deny && files.secrets.holds_credentials(folded, canonical) {
            action = Action::Ask;
        }
        match action {
            Action::Allow => SearchAccess::Read,
            Action::Ask => SearchAccess::NameOnly,
            Action::Deny => SearchAccess::Hidden,
        }
    }
}

/// Longest file name (Linux's `NAME_MAX`); longer ones are decided in full.
const NAME_MAX: usize = 255;

/// An ASCII byte [`super::shell::confusable_char`] reports.
fn confusable_byte(b: u8) -> bool {
    b.is_ascii_control() && !matches!(b, b'\n' | b'\t' | b'\r')
}

/// The last directory one thread decided files of.
struct DirCache {
    reader: Option<u64>,
    dir: String,
    /// `None`: its files are decided in full.
    files: Option<Files>,
    /// The current file's name in lower case (a buffer kept from file to file).
    folded: String,
}

thread_local! {
    static DIRS: RefCell<DirCache> = const {
        RefCell::new(DirCache {
            reader: None,
            dir: String::new(),
            files: None,
            folded: String::new(),
        })
    };
}

/// What holds for every file of one directory.
#[derive(Debug)]
struct Files {
    /// The directory's spelling in each form, as a prefix of its files' (`None`: not in that
    /// form), as it is and folded: relative, absolute, home, session.
    forms: [Option<(String, String)>; 4],
    /// How each rule matches the directory's files.
    rules: Vec<InDir>,
    secrets: FilesIn,
    /// Names whose path is a root, the home or the scratch directory itself (decided in full).
    special: Vec<String>,
}

impl Files {
    fn of(reader: &Reader, dir: &str) -> Option<Files> {
        if !plain_dir(dir) || dir.bytes().any(confusable_byte) {
            return None;
        }
        let below = |base: &str| -> Option<String> {
            if dir == base {
                Some(String::new())
            } else {
                dir.strip_prefix(base)
                    .and_then(|rest| rest.strip_prefix('/'))
                    .map(|rest| format!("{rest}/"))
            }
        };
        let spelled = |form: Option<String>| form.map(|f| (f.clone(), f.to_ascii_lowercase()));
        let relative = reader.roots.iter().find_map(|root| below(root));
        let home = reader
            .home
            .as_deref()
            .and_then(below)
            .map(|rest| format!("~/{rest}"));
        let session =
            below(&reader.scratch).map(|rest| format!("{}/{rest}", super::pattern::SESSION));
        let forms = [
            spelled(relative),
            spelled(Some(format!("{dir}/"))),
            spelled(home),
            spelled(session),
        ];
        let special = reader
            .roots
            .iter()
            .chain(&reader.home)
            .chain(std::iter::once(&reader.scratch))
            .filter_map(|path| path.rsplit_once('/'))
            .filter(|(parent, _)| *parent == dir)
            .map(|(_, name)| name.to_owned())
            .collect();
        let folded = dir.to_ascii_lowercase();
        let secrets = FilesIn::of(reader.home_path.as_deref(), &folded)?;
        let mut files = Files {
            forms,
            rules: Vec::with_capacity(reader.rules.len()),
            secrets,
            special,
        };
        files.rules = reader
            .rules
            .iter()
            .map(|read| match read.form {
                PathForm::Every => InDir::Every,
                PathForm::Never => InDir::None,
                form => match files.forms[Files::slot(form)].as_ref() {
                    None => InDir::None,
                    Some((plain, folded)) => {
                        let prefix = if read.restrictive { folded } else { plain };
                        read.rule
                            .pattern
                            .in_dir(&read.text, prefix, read.restrictive)
                    }
                },
            })
            .collect();
        Some(files)
    }

    fn slot(form: PathForm) -> usize {
        match form {
            PathForm::Relative | PathForm::Every | PathForm::Never => 0,
            PathForm::Absolute => 1,
            PathForm::Home => 2,
            PathForm::Session => 3,
        }
    }

    /// The directory's spelling in `form` (empty when it has none: its rules match nothing).
    fn prefix(&self, form: PathForm, folded: bool) -> &str {
        self.forms[Files::slot(form)]
            .as_ref()
            .map_or("", |(plain, lower)| if folded { lower } else { plain })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::capability::RequirementSet;
    use crate::policy::{Answer, PolicyLayers, RuleSet, RuleSource, Trust};
    use crate::runtime::RuntimeConfig;
    use crate::tool::Tool as _;

    /// A temporary world: a home directory holding the workspace, a second root beside it, the
    /// session's scratch directory, and a directory outside every root (all readable).
    struct World {
        _tmp: tempfile::TempDir,
        tmp: PathBuf,
        home: PathBuf,
        root: PathBuf,
        second: PathBuf,
        scratch: PathBuf,
        runtime: Runtime,
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the test lays its world out on disk"
    )]
    fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(dir.path()).unwrap();
        let home = tmp.join("Home");
        let root = home.join("Work/proj");
        let second = tmp.join("second");
        let scratch = tmp.join("scratch");
        for dir in [&root, &second, &scratch, &tmp.join("outside")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let everything = format!("{}/**", tmp.display());
        let runtime = Runtime::new(RuntimeConfig {
            roots: vec![root.clone(), second.clone()],
            requirements: RequirementSet::fs_read(&["{workspace}/**", "{session}/**", &everything]),
            scratch_dir: scratch.clone(),
            ..RuntimeConfig::default()
        })
        .unwrap();
        World {
            _tmp: dir,
            tmp,
            home,
            root,
            second,
            scratch,
            runtime,
        }
    }

    /// Rules of every shape, for `grep` and `glob` by id, capability and `*`, in the global
    /// layer (manifest) and the project's.
    fn layers(world: &World, trust: Trust) -> PolicyLayers {
        let outside = world.tmp.join("outside");
        let global = format!(
            r#"
[[permission]]
permission = "fs.read"
pattern = "**/*.PEM"
action = "deny"

[[permission]]
permission = "grep"
pattern = "src/*/[a-c]*.rs"
action = "ask"

[[permission]]
permission = "fs.read"
pattern = "docs/*.md"
action = "allow"

[[permission]]
permission = "fs.read"
prefix = "Vendor"
action = "deny"

[[permission]]
permission = "grep"
pattern = "notes/Todo.txt"
action = "ask"

[[permission]]
permission = "fs.read"
pattern = "~/Keys/**"
action = "deny"

[[permission]]
permission = "fs.read"
prefix = "~/.cache"
action = "ask"

[[permission]]
permission = "fs.read"
pattern = "~/**"
action = "allow"

[[permission]]
permission = "fs.read"
pattern = "{outside}/*.txt"
action = "allow"

[[permission]]
permission = "fs.read"
prefix = "{outside}/Deep"
action = "ask"

[[permission]]
permission = "fs.read"
pattern = "{{session}}/*.log"
action = "deny"

[[permission]]
permission = "*"
pattern = "**/.hidden*"
action = "ask"

[[permission]]
permission = "grep"
pattern = "**/{{x,yy}}?.rs"
action = "deny"

[[permission]]
permission = "fs.read"
pattern = "./build/"
action = "deny"

[[permission]]
permission = "glob"
pattern = "**/*.rs"
action = "deny"

[[permission]]
permission = "bash"
pattern = "**"
action = "deny"
"#,
            outside = outside.display()
        );
        let project = r#"
[[permission]]
permission = "grep"
pattern = "**"
action = "allow"

[[permission]]
permission = "fs.read"
prefix = "src"
action = "ask"

[[permission]]
permission = "fs.read"
pattern = "lib/*.rs"
action = "allow"
"#;
        let mut layers = PolicyLayers::bundled()
            .unwrap()
            .with_home(Some(world.home.clone()));
        layers.manifest.push(
            RuleSet::parse(&global, RuleSource::Global(world.tmp.join("global.toml"))).unwrap(),
        );
        layers.project = Some(
            RuleSet::parse(
                project,
                RuleSource::Project(world.root.join(".keel/p.toml")),
            )
            .unwrap(),
        );
        layers.trust = trust;
        layers
    }

    const PARTS: &[&str] = &[
        "src",
        "SRC",
        "lib",
        "docs",
        "Vendor",
        "vendor",
        ".git",
        ".ssh",
        ".aws",
        ".config",
        "gcloud",
        "git",
        ".envs",
        "notes",
        "build",
        "Keys",
        ".cache",
        "a b",
        "Deep",
        "x",
        "caf\u{e9}",
        "proj",
        "Work",
    ];

    const NAMES: &[&str] = &[
        "main.rs",
        "a.rs",
        "B.rs",
        "c.RS",
        "xa.rs",
        "yyb.rs",
        ".env",
        ".ENV",
        ".env.local",
        ".envrc",
        "id_rsa",
        "id_rsa.pub",
        "KEY.PEM",
        "server.pem",
        "config",
        "config.worktree",
        ".gitconfig",
        "known_hosts",
        "Todo.txt",
        "todo.txt",
        "README.md",
        "x.md",
        ".hiddenfile",
        ".netrc",
        "credentials",
        "config.json",
        "build",
        "proj",
        "Work",
        "second",
        "scratch",
        "x.log",
        "x.txt",
        "a\u{301}.rs",
        "tab\tname",
        "ctl\u{1}x",
        ".",
        "Home",
    ];

    /// Paths below every base of the world (and the bases' parents), up to two components of
    /// [`PARTS`] deep, each with every name of [`NAMES`].
    fn paths(world: &World) -> Vec<PathBuf> {
        let bases = [
            world.root.clone(),
            world.second.clone(),
            world.scratch.clone(),
            world.home.clone(),
            world.home.join("Work"),
            world.tmp.join("outside"),
            world.tmp.clone(),
            PathBuf::from("/"),
        ];
        let mut dirs = Vec::new();
        for base in &bases {
            dirs.push(base.clone());
            for a in PARTS {
                dirs.push(base.join(a));
                for b in PARTS.iter().take(12) {
                    dirs.push(base.join(a).join(b));
                }
            }
        }
        dirs.iter()
            .flat_map(|dir| NAMES.iter().map(move |name| dir.join(name)))
            .collect()
    }

    /// The gate through [`Runtime::search_access`] (the scope checked first), and the full
    /// decision behind the same scope check.
    fn compare(world: &World, policy: &Arc<Policy>, spec: &ToolSpec, paths: &[PathBuf]) {
        let gate = Arc::new(PolicySearchGate::new(policy.clone(), spec.clone()));
        let runtime = world.runtime.with_search_gate(gate.clone());
        // Most of them are decided by the compiled reader (the test compares something).
        let reader = gate.reader(&runtime).expect("a reader for a plain read");
        let compiled = paths.iter().filter(|p| reader.access(p).is_some()).count();
        assert!(
            compiled * 10 > paths.len() * 8,
            "{compiled} of {}",
            paths.len()
        );
        for path in paths {
            let fast = runtime.search_access(path);
            let full = if runtime
                .check(path, crate::capability::Access::Read)
                .is_err()
            {
                SearchAccess::Hidden
            } else {
                gate.decided_in_full(&runtime, path)
            };
            assert_eq!(
                fast,
                full,
                "{} ({} in mode {}, trust {:?})",
                path.display(),
                spec.id,
                policy.mode(),
                policy.trust()
            );
        }
    }

    #[test]
    fn the_compiled_reader_decides_every_file_as_the_full_decision() {
        let world = world();
        let paths = paths(&world);
        assert!(paths.len() > 50_000, "{}", paths.len());
        let specs = [
            crate::tools::grep::GrepTool.spec(),
            crate::tools::glob::GlobTool.spec(),
        ];
        let mut compared = 0;
        for (mode, headless, trust) in [
            (Mode::Allowlist, false, Trust::Trusted),
            (Mode::Allowlist, true, Trust::Untrusted),
            (Mode::Ask, false, Trust::Trusted),
            (Mode::Yolo, false, Trust::Untrusted),
            (Mode::ReadOnly, true, Trust::Trusted),
        ] {
            let policy = Arc::new(Policy::new(layers(&world, trust), mode, headless).unwrap());
            for spec in &specs {
                compare(&world, &policy, spec, &paths);
                compared += paths.len();
            }
        }
        assert!(compared > 500_000, "{compared}");
        // Every kind of answer was given.
        let policy =
            Arc::new(Policy::new(layers(&world, Trust::Trusted), Mode::Allowlist, false).unwrap());
        let gate = Arc::new(PolicySearchGate::new(policy, specs[0].clone()));
        let runtime = world.runtime.with_search_gate(gate);
        let answers: Vec<SearchAccess> = paths.iter().map(|p| runtime.search_access(p)).collect();
        for access in [
            SearchAccess::Read,
            SearchAccess::NameOnly,
            SearchAccess::Hidden,
        ] {
            assert!(answers.contains(&access), "{access:?}");
        }
    }

    #[test]
    fn a_policy_changed_during_a_search_decides_the_files_after_it() {
        let world = world();
        // Untrusted: the project's `src` prefix asks, its allow rules do not apply.
        let policy = Arc::new(
            Policy::new(layers(&world, Trust::Untrusted), Mode::Allowlist, false).unwrap(),
        );
        let spec = crate::tools::grep::GrepTool.spec();
        let gate = Arc::new(PolicySearchGate::new(policy.clone(), spec.clone()));
        let runtime = world.runtime.with_search_gate(gate);
        let asked = world.root.join("src/y.rs");
        assert_eq!(runtime.search_access(&asked), SearchAccess::NameOnly);
        // An "always" answer for a read of that file, given while the search runs.
        let target = CallTarget::Path(asked.to_string_lossy().into_owned());
        let decision = policy.decide(&Call {
            spec: &spec,
            target: &target,
            runtime: &world.runtime,
        });
        assert_eq!(decision.action, Action::Ask);
        policy.remember(&decision, Answer::AllowAlways);
        assert_eq!(runtime.search_access(&asked), SearchAccess::Read);
        // A mode switch, and a subagent's policy bound to this one.
        policy.set_mode(Mode::Yolo);
        let todo = world.root.join("notes/Todo.txt");
        assert_eq!(runtime.search_access(&todo), SearchAccess::Read);
        policy.set_mode(Mode::Allowlist);
        assert_eq!(runtime.search_access(&todo), SearchAccess::NameOnly);
        policy.set_mode(Mode::Yolo);
        let child = Arc::new(policy.child(None));
        let paths = paths(&world);
        compare(&world, &child, &spec, &paths);
        policy.set_mode(Mode::Allowlist);
        compare(&world, &child, &spec, &paths);
        compare(&world, &policy, &spec, &paths);
    }

    /// A xorshift generator: the random test is the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[(self.next() % items.len() as u64) as usize]
        }
    }

    /// Path components: case, credential stores, glob characters, a backslash, a newline, a
    /// leading `-`, a trailing dot, a space.
    const ATOMS: &[&str] = &[
        "a",
        "B",
        "src",
        "SRC",
        ".git",
        ".ssh",
        ".env",
        "config",
        "x.rs",
        "X.RS",
        "k.pem",
        ".aws",
        "[x]",
        "{a}",
        "a b",
        "-r",
        "a\\b",
        "\n",
        "id_rsa",
        ".envs",
        "tok.",
        "Keys",
        ".config",
        "gcloud",
        "git",
        "credentials",
        ".netrc",
        "c.txt",
    ];

    /// Glob pieces, escaped and not.
    const GLOB_ATOMS: &[&str] = &[
        "*", "**", "?", "[a-c]", "[!a]", "{a,src}", "*.rs", "*.RS", "\\[x]", ".*", "[.]git", "a",
        "src", ".ssh", "SRC", "x.rs", "config",
    ];

    /// Random rules (exact, prefix and glob patterns of those pieces, relative, `./`, `~/`,
    /// `{session}/` and absolute, with and without a trailing `/`, every action, for `grep`,
    /// `fs.read` and `*`) over random paths up to six components deep: the compiled reader
    /// answers each path as the full decision does.
    #[test]
    fn the_compiled_reader_decides_random_rules_over_random_paths_as_the_full_decision() {
        let world = world();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let bases = [
            world.root.clone(),
            world.home.clone(),
            world.tmp.join("outside"),
            world.scratch.clone(),
        ];
        let spec = crate::tools::grep::GrepTool.spec();
        let (mut compared, mut compiled) = (0, 0);
        for _ in 0..60 {
            let mut text = String::new();
            for _ in 0..6 {
                let glob = rng.next() % 3 == 2;
                let parts: Vec<&str> = (0..1 + rng.next() % 3)
                    .map(|_| rng.pick(if glob { GLOB_ATOMS } else { ATOMS }))
                    .collect();
                let anchor = match rng.next() % 6 {
                    0 => "~/".to_owned(),
                    1 => "{session}/".to_owned(),
                    2 => "./".to_owned(),
                    3 => format!("{}/", world.root.display()),
                    _ => String::new(),
                };
                let trailing = if rng.next().is_multiple_of(5) {
                    "/"
                } else {
                    ""
                };
                let key = if !glob && rng.next().is_multiple_of(2) {
                    "prefix"
                } else {
                    "pattern"
                };
                let value = toml::Value::String(format!("{anchor}{}{trailing}", parts.join("/")));
                text.push_str(&format!(
                    "[[permission]]\npermission = \"{}\"\n{key} = {value}\naction = \"{}\"\n\n",
                    rng.pick(&["fs.read", "grep", "*"]),
                    rng.pick(&["allow", "deny", "ask"]),
                ));
            }
            // A glob that does not parse (`[!a]` halves) is refused when the rule loads.
            let Ok(set) = RuleSet::parse(&text, RuleSource::Global(world.tmp.join("g.toml")))
            else {
                continue;
            };
            let mut layers = PolicyLayers::bundled()
                .unwrap()
                .with_home(Some(world.home.clone()));
            layers.manifest.push(set);
            layers.trust = Trust::Trusted;
            let policy = Arc::new(Policy::new(layers, Mode::Allowlist, false).unwrap());
            let gate = Arc::new(PolicySearchGate::new(policy, spec.clone()));
            let runtime = world.runtime.with_search_gate(gate.clone());
            for _ in 0..3000 {
                let mut path = bases[(rng.next() % bases.len() as u64) as usize].clone();
                for _ in 0..=rng.next() % 5 {
                    path.push(rng.pick(ATOMS));
                }
                let fast = runtime.search_access(&path);
                let full = if runtime
                    .check(&path, crate::capability::Access::Read)
                    .is_err()
                {
                    SearchAccess::Hidden
                } else {
                    gate.decided_in_full(&runtime, &path)
                };
                assert_eq!(fast, full, "{}\n{text}", path.display());
                compared += 1;
                let reader = gate.reader(&runtime).expect("a reader for a plain read");
                compiled += usize::from(reader.access(&path).is_some());
            }
        }
        assert!(compared > 150_000, "{compared}");
        // Most of them were the compiled reader's (the test compares something).
        assert!(compiled * 10 > compared * 8, "{compiled} of {compared}");
    }
}
