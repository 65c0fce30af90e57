//! The `read-only` class of a simple command: inside its grammar, writing nothing, reading
//! only workspace paths that name no credential (globs expanded as bash expands them, walks
//! checked for secrets), running no program the workspace supplied; what `git` would print
//! or run from its configuration.

use std::path::Path;

use super::gitrepo::git_problem;
use super::grammar::Fit;
use super::pattern::base_name;
use super::shell::{Cwd, Place, ShellContext, SimpleCommand, is_harmless_device};
use super::watchdog::Watchdog;
use super::wrappers::PRIVILEGE_WRAPPERS;

/// Whether a simple command belongs to the `read-only` class: its argv is inside its
/// command's allowlisted grammar ([`Fit::Accepted`]) and no glob word can turn into an option
/// ([`option_glob`]), it sets no environment variable, no
/// privilege wrapper or `xargs` (which adds operands nobody has seen) runs it, it writes no
/// file, it runs inside the workspace, every path word (operands and path-valued options,
/// globs expanded against the file system) resolves inside the workspace and names no
/// credential file, and, for git, the repository it would open is the workspace's own and
/// names no program in its configuration ([`git_problem`]).
pub(crate) fn is_read_only(
    command: &SimpleCommand,
    context: &ShellContext<'_>,
    watchdog: &Watchdog<'_>,
) -> bool {
    option_glob(command, context).is_none() && reads_only(command, context, watchdog)
}

/// Whether every program `command` starts (its wrappers and the program itself) is one the
/// workspace did not supply: a grammar speaks for the system's `git`, not for a `bin/git` the
/// repository ships, nor for a `git` that a workspace directory on `PATH` puts first. A name
/// with a `/` is resolved from the command's directory; a bare name as bash finds it on `PATH`
/// (a builtin, or a name not on `PATH`, runs nothing of the workspace's).
fn runs_a_program_from_outside(
    command: &SimpleCommand,
    directory: &Path,
    context: &ShellContext<'_>,
) -> bool {
    command
        .wrappers
        .iter()
        .chain(command.argv.first())
        .all(|program| {
            let found = if program.contains('/') {
                let path = directory.join(program);
                Some(crate::runtime::probe::canonical_or_same(&path))
            } else {
                crate::runtime::probe::find_on_path(program)
            };
            found.is_none_or(|found| matches!(context.classify(found), Place::Outside(_)))
        })
}

/// The first word of `command` that the shell may expand into an option
/// ([`glob_may_expand_to_option`]): `rg foo *` beside a file named `--pre=x`.
pub(super) fn option_glob<'c>(
    command: &'c SimpleCommand,
    context: &ShellContext<'_>,
) -> Option<&'c str> {
    command
        .original
        .iter()
        .find(|word| glob_may_expand_to_option(word, &command.cwd, context))
        .map(String::as_str)
}

/// [`is_read_only`] once [`option_glob`] found no glob that turns into an option.
pub(super) fn reads_only(
    command: &SimpleCommand,
    context: &ShellContext<'_>,
    watchdog: &Watchdog<'_>,
) -> bool {
    let Fit::Accepted { paths, .. } = &command.fit else {
        return false;
    };
    if command.dynamic || command.container || !command.assignments.is_empty() {
        return false;
    }
    if command.wrappers.iter().any(|w| {
        let name = base_name(w);
        PRIVILEGE_WRAPPERS.contains(&name) || name == "xargs"
    }) {
        return false;
    }
    let Cwd::Known(directory) = &command.cwd else {
        return false;
    };
    if !matches!(
        context.classify(directory.clone()),
        Place::Inside(_) | Place::Root(_)
    ) {
        return false;
    }
    if !runs_a_program_from_outside(command, directory, context) {
        return false;
    }
    for redirect in &command.redirects {
        if redirect.duplicate || is_harmless_device(&redirect.target) {
            continue;
        }
        if redirect.writes() || !path_is_safe(&redirect.target, &command.cwd, context, watchdog) {
            return false;
        }
    }
    let mut resolved = Vec::new();
    for word in paths {
        if !path_is_safe(word, &command.cwd, context, watchdog) {
            return false;
        }
        if let Some(path) = context.place(word, &command.cwd).path() {
            resolved.push(path.to_path_buf());
        }
    }
    if names_workspace_toolchain(command.program(), directory, context.roots) {
        return false;
    }
    if command.program() == "git" && git_problem(directory, context.roots, &resolved).is_some() {
        return false;
    }
    // `git show HEAD:.env`: a credential file read out of the repository's history.
    if command.program() == "git"
        && command.argv.iter().skip(2).any(|word| {
            // The path follows the last `:` (a revision may hold one: `HEAD^{/fix: x}:.env`).
            word.contains(':')
                && word
                    .rsplit(['/', ':'])
                    .next()
                    .is_some_and(super::commands::is_secret_name)
        })
    {
        return false;
    }
    // `git log --format=%G?`, `git for-each-ref --format='%(signature)'`: verifying a
    // signature runs gpg (or ssh-keygen), as `--show-signature` does. `%(raw)` prints the
    // object a reference names, which may be a blob (a credential's, from any commit).
    if command.program() == "git"
        && command.argv.iter().skip(1).any(|word| {
            word.contains("%G") || word.contains("%(signature") || word.contains("%(raw")
        })
    {
        return false;
    }
    // `git config --get sendemail.smtppass`: without `--local`, git reads the user's own
    // configuration too, where passwords and tokens live.
    if command.program() == "git"
        && command.argv.get(1).is_some_and(|s| s == "config")
        && command
            .argv
            .iter()
            .skip(2)
            .any(|word| is_credential_config_key(word))
    {
        return false;
    }
    // `git log -p`, `git show`: a credential committed to the repository, printed by a patch.
    if command.program() == "git"
        && git_prints_contents(command)
        && super::gitrepo::tracks_secret(directory)
    {
        return false;
    }
    if let Some(walk) = recursive_walk(command)
        && tree_holds_secret(walk, directory, &resolved, watchdog)
    {
        return false;
    }
    true
}

/// Whether a word of a `git config` call may name a configuration key that holds a credential
/// (`sendemail.smtpPass`, `http.<url>.extraHeader`, `github.token`, any `credential.*` key);
/// an over-estimate: every word is looked at, options included.
fn is_credential_config_key(word: &str) -> bool {
    let word = word.to_ascii_lowercase();
    [
        "pass",
        "token",
        "secret",
        "extraheader",
        "cookie",
        "auth",
        "credential",
        "apikey",
        "api-key",
        "api_key",
        "privatekey",
    ]
    .iter()
    .any(|needle| word.contains(needle))
}

/// Files in which a project picks the toolchain a version manager's shim runs, by program:
/// `rust-toolchain.toml` may name a toolchain by `path` (rustup then runs `<path>/bin/cargo`
/// for `cargo --version`) or a channel to install; `.tool-versions` (asdf, mise) may say
/// `path:` or `ref:`; `go.mod`'s `go`/`toolchain` lines make `go` download and run another
/// toolchain.
fn toolchain_files(program: &str) -> &'static [&'static str] {
    match program {
        "cargo" | "rustc" | "rustup" => &["rust-toolchain", "rust-toolchain.toml"],
        "python" | "python3" => &[".python-version"],
        "node" | "npm" => &[".nvmrc", ".node-version"],
        "go" => &["go.mod", "go.work"],
        _ => &[],
    }
}

/// Version-manager files that speak for every toolchain.
const TOOL_VERSION_FILES: &[&str] = &[".tool-versions", "mise.toml", ".mise.toml", ".rtx.toml"];

/// Whether a toolchain command (`cargo --version`) runs in a directory of the workspace where
/// a project file picks the toolchain its version manager runs: then the command may run a
/// program of the project's choosing, or install one.
fn names_workspace_toolchain(
    program: &str,
    directory: &std::path::Path,
    roots: &[std::path::PathBuf],
) -> bool {
    let own = toolchain_files(program);
    if own.is_empty() {
        return false;
    }
    directory
        .ancestors()
        .take_while(|dir| roots.iter().any(|root| dir.starts_with(root)))
        .any(|dir| {
            own.iter()
                .chain(TOOL_VERSION_FILES)
                .any(|name| crate::runtime::probe::is_present(&dir.join(name)))
        })
}

/// How a command reads whole directory trees (their files' contents).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Walk {
    /// Every file (`grep -r`).
    All,
    /// What ripgrep reads: not hidden, not ignored, unless its globs, types or ignore files
    /// whitelist a file (a whitelisted file is read even when hidden).
    Ripgrep(RgFilters),
}

/// ripgrep's options that change which files its walk reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RgFilters {
    /// `-g`/`--glob` and `--iglob` (case-insensitive) globs, in order.
    globs: Vec<(String, bool)>,
    /// `-t`/`--type` names.
    types: Vec<String>,
    /// `-T`/`--type-not` names.
    types_not: Vec<String>,
    /// `--ignore-file` paths.
    ignore_files: Vec<String>,
}

/// The walk filters of a ripgrep argv (after `rg`); `None` when an argument cannot be
/// placed (then every file counts). Short options that take a value are the grammar's.
fn rg_filters(args: &[String]) -> Option<RgFilters> {
    const VALUED: &str = "efABCmgtTjrdM";
    let mut filters = RgFilters::default();
    let record = |option: &str, value: &str, filters: &mut RgFilters| match option {
        "g" | "glob" => filters.globs.push((value.to_owned(), false)),
        "iglob" => filters.globs.push((value.to_owned(), true)),
        "t" | "type" => filters.types.push(value.to_owned()),
        "T" | "type-not" => filters.types_not.push(value.to_owned()),
        "ignore-file" => filters.ignore_files.push(value.to_owned()),
        _ => {}
    };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if arg == "--" {
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            if matches!(name, "glob" | "iglob" | "type" | "type-not" | "ignore-file") {
                let value = match value {
                    Some(value) => value,
                    None => {
                        let value = args.get(i)?.clone();
                        i += 1;
                        value
                    }
                };
                record(name, &value, &mut filters);
            }
            continue;
        }
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            continue;
        };
        for (at, c) in cluster.char_indices() {
            if !VALUED.contains(c) {
                continue;
            }
            let rest = &cluster[at + c.len_utf8()..];
            let value = if rest.is_empty() {
                let value = args.get(i)?.clone();
                i += 1;
                value
            } else {
                rest.to_owned()
            };
            record(&c.to_string(), &value, &mut filters);
            break;
        }
    }
    Some(filters)
}

/// Whether the command reads the contents of directory trees, and how (an over-estimate:
/// any option that could mean recursion counts).
fn recursive_walk(command: &SimpleCommand) -> Option<Walk> {
    let args = command.argv.iter().skip(1).take_while(|a| *a != "--");
    match command.program() {
        "rg" => Some(rg_filters(&command.argv[1..]).map_or(Walk::All, Walk::Ripgrep)),
        "grep" | "egrep" | "fgrep" => {
            let args: Vec<&String> = args.collect();
            grep_recurses(&args).then_some(Walk::All)
        }
        "git" if command.argv.get(1).is_some_and(|s| s == "grep") => Some(Walk::All),
        _ => None,
    }
}

/// Whether a git command prints file contents out of the repository's objects (a commit's
/// patch, a blob): then a credential file the index tracks would be shown.
fn git_prints_contents(command: &SimpleCommand) -> bool {
    let args: Vec<&String> = command
        .argv
        .iter()
        .skip(2)
        .take_while(|a| *a != "--")
        .collect();
    match command.argv.get(1).map(String::as_str) {
        Some("diff" | "stash") => true,
        Some("show") => git_show_prints_patches(&args),
        // `git cat-file blob <id>` prints as much as `-p`; only `-t`, `-s`, `-e` do not.
        Some("cat-file") => !args
            .iter()
            .any(|a| matches!(a.as_str(), "-t" | "-s" | "-e")),
        // `git grep --cached`, `git grep PATTERN REV`: the index's or a commit's files, which
        // the walk of the working tree does not see (a tracked `.env` deleted from the tree).
        Some("grep") => true,
        Some("log" | "whatchanged" | "reflog") => git_log_prints_patches(&args),
        _ => false,
    }
}

/// Whether `git show` may print a patch: not with `-s`/`--no-patch`, nor when every operand
/// names a blob (`rev:path`, whose name the caller checks).
fn git_show_prints_patches(args: &[&String]) -> bool {
    if args.iter().any(|a| *a == "-s" || *a == "--no-patch") {
        return false;
    }
    let operands: Vec<&&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    operands.is_empty() || operands.iter().any(|a| !a.contains(':'))
}

/// Whether `git log`'s options may print patches (an over-estimate: any short cluster with a
/// patch letter, any long option that names a patch or word diff).
fn git_log_prints_patches(args: &[&String]) -> bool {
    const LONG: &[&str] = &[
        "--patch",
        "--unified",
        "--function-context",
        "--word-diff",
        "--color-words",
        "--cc",
        "--dd",
        "--remerge-diff",
        "--diff-merges",
        "--binary",
        "--full-diff",
        "--text",
        "--check",
    ];
    args.iter().any(|arg| match arg.strip_prefix("--") {
        Some(_) => LONG.iter().any(|l| arg.starts_with(l)),
        None => arg
            .strip_prefix('-')
            .is_some_and(|cluster| cluster.contains(['p', 'u', 'U', 'W', 'c', 'm', 'a', 'L'])),
    })
}

/// Whether grep's options ask for recursion: `-r` in a cluster, `--recursive` (or an
/// abbreviation), `-d recurse`/`--directories=recurse`.
fn grep_recurses(args: &[&String]) -> bool {
    let recurse = |value: Option<&str>| value.is_some_and(|v| v.starts_with("rec"));
    args.iter().enumerate().any(|(i, arg)| {
        let next = args.get(i + 1).map(|a| a.as_str());
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, next),
            };
            let abbreviates = |full: &str| name.len() >= 2 && full.starts_with(name);
            return abbreviates("recursive") || (abbreviates("directories") && recurse(value));
        }
        let Some(cluster) = arg.strip_prefix('-') else {
            return false;
        };
        if let Some(at) = cluster.find('d') {
            let rest = &cluster[at + 1..];
            let value = if rest.is_empty() { next } else { Some(rest) };
            if recurse(value) {
                return true;
            }
        }
        cluster.contains('r')
    })
}

/// Whether a recursive read from the command's directories (its directory operands, or its
/// working directory) would reach a credential file; a tree too large to look through counts.
fn tree_holds_secret(
    walk: Walk,
    cwd: &std::path::Path,
    resolved: &[std::path::PathBuf],
    watchdog: &Watchdog<'_>,
) -> bool {
    let mut starts: Vec<&std::path::Path> = resolved
        .iter()
        .filter(|p| crate::runtime::probe::is_dir(p))
        .map(|p| p.as_path())
        .collect();
    if starts.is_empty() {
        starts.push(cwd);
    }
    let mut budget = MAX_GLOB_ENTRIES;
    for start in starts {
        let mut builder = crate::runtime::probe::tree_walker(start);
        builder.follow_links(false);
        match &walk {
            Walk::All => {
                builder.standard_filters(false);
            }
            Walk::Ripgrep(filters) => {
                // The same filters as ripgrep's: its `.rgignore` files, `--ignore-file`s, globs
                // and types, each of which may whitelist a hidden file (`-t sh` lists `.env`).
                builder
                    .hidden(true)
                    .git_ignore(true)
                    .git_global(true)
                    .git_exclude(true)
                    .parents(true)
                    .add_custom_ignore_filename(".rgignore");
                // A filter that does not build (a type this version does not know): every
                // file counts.
                if !ripgrep_filters(&mut builder, filters, cwd) {
                    builder = crate::runtime::probe::tree_walker(start);
                    builder.follow_links(false).standard_filters(false);
                }
            }
        }
        builder.filter_entry(|entry| entry.file_name() != ".git");
        for entry in builder.build() {
            let Some(left) = budget.checked_sub(1) else {
                return true;
            };
            budget = left;
            let Ok(entry) = entry else { continue };
            if watchdog.is_secret(entry.path()) || is_hard_linked(entry.path()) {
                return true;
            }
        }
    }
    false
}

/// Adds ripgrep's globs, types and ignore files to a walk; `false` when one does not build
/// (ripgrep may know a type this version does not).
fn ripgrep_filters(
    builder: &mut ignore::WalkBuilder,
    filters: &RgFilters,
    cwd: &std::path::Path,
) -> bool {
    for file in &filters.ignore_files {
        if builder.add_ignore(cwd.join(file)).is_some() {
            return false;
        }
    }
    if !filters.globs.is_empty() {
        let mut overrides = ignore::overrides::OverrideBuilder::new(cwd);
        for (glob, case_insensitive) in &filters.globs {
            if overrides.case_insensitive(*case_insensitive).is_err()
                || overrides.add(glob).is_err()
            {
                return false;
            }
        }
        match overrides.build() {
            Ok(overrides) => {
                builder.overrides(overrides);
            }
            Err(_) => return false,
        }
    }
    if !filters.types.is_empty() || !filters.types_not.is_empty() {
        let mut types = ignore::types::TypesBuilder::new();
        types.add_defaults();
        for name in &filters.types {
            types.select(name);
        }
        for name in &filters.types_not {
            types.negate(name);
        }
        match types.build() {
            Ok(types) => {
                builder.types(types);
            }
            Err(_) => return false,
        }
    }
    true
}

/// Whether a path word stays inside the workspace and names no credential file, after `~`,
/// symlinks and `..` are resolved and globs are expanded against the file system.
pub(crate) fn path_is_safe(
    word: &str,
    cwd: &Cwd,
    context: &ShellContext<'_>,
    watchdog: &Watchdog<'_>,
) -> bool {
    let placed_safe = |place: Place| match place {
        Place::Inside(path) | Place::Root(path) => {
            !watchdog.is_secret(&path) && !is_hard_linked(&path)
        }
        _ => false,
    };
    if !placed_safe(context.place(word, cwd)) {
        return false;
    }
    if !has_glob(word) {
        return true;
    }
    match glob_matches(word, cwd, context) {
        Some(matches) => matches.iter().all(|m| {
            m.to_str()
                .is_some_and(|text| placed_safe(context.place(text, cwd)))
        }),
        None => false,
    }
}

/// Whether `path` is a regular file with several hard links: another of its names may lie
/// outside the workspace (`ln ~/.ssh/id_rsa notes`), so its content is not provably the
/// workspace's, as for the read tool.
fn is_hard_linked(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    crate::runtime::probe::symlink_metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.nlink() > 1)
}

/// What a glob word could match on the file system (`~/` and `$HOME/` expanded, relative to
/// the command's directory); `None` when it cannot be expanded within bounds.
pub(crate) fn glob_matches(
    word: &str,
    cwd: &Cwd,
    context: &ShellContext<'_>,
) -> Option<Vec<std::path::PathBuf>> {
    let home_rest = word
        .strip_prefix("~/")
        .or_else(|| word.strip_prefix("$HOME/"))
        .or_else(|| word.strip_prefix("${HOME}/"));
    match (home_rest, cwd) {
        (Some(rest), _) => expand_glob(rest, context.home?),
        (None, Cwd::Known(base)) => expand_glob(word, base),
        (None, Cwd::Unknown) => None,
    }
}

/// Whether the shell could expand `word` into words that begin with `-`: a glob whose first
/// character is a wildcard, in a directory holding (or that cannot be shown not to hold) a
/// name that begins with `-`, which the program then reads as an option.
fn glob_may_expand_to_option(word: &str, cwd: &Cwd, context: &ShellContext<'_>) -> bool {
    if !word.starts_with(['*', '?', '[']) {
        return false;
    }
    let first = word.split('/').next().unwrap_or(word);
    match glob_matches(first, cwd, context) {
        Some(matches) => matches.iter().any(|path| {
            path.file_name()
                .is_some_and(|name| name.as_encoded_bytes().starts_with(b"-"))
        }),
        None => true,
    }
}

pub(crate) fn has_glob(word: &str) -> bool {
    word.contains(['*', '?', '['])
}

/// How many directory entries a glob expansion may look at.
pub const MAX_GLOB_ENTRIES: usize = 20_000;

/// A glob under both readings of `[^...]`.
struct GlobEither(globset::GlobMatcher, Option<globset::GlobMatcher>);

impl GlobEither {
    fn is_match(&self, name: impl AsRef<std::path::Path>) -> bool {
        let name = name.as_ref();
        self.0.is_match(name) || self.1.as_ref().is_some_and(|m| m.is_match(name))
    }
}

/// `part` with every `[^X` written `[X^` (a caret that is not first is literal), the way dash
/// reads it; `None` when it has no `[^`.
fn caret_as_literal(part: &str) -> Option<String> {
    if !part.contains("[^") {
        return None;
    }
    let mut out = String::with_capacity(part.len());
    let mut rest = part;
    while let Some(at) = rest.find("[^") {
        out.push_str(&rest[..at]);
        out.push('[');
        let after = &rest[at + 2..];
        let mut chars = after.chars();
        match chars.next() {
            Some(first) => {
                out.push(first);
                out.push('^');
                rest = chars.as_str();
            }
            None => {
                out.push('^');
                rest = "";
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// The paths a shell glob could match (dot files included, which is stricter than the
/// shell); `None` when the expansion is too large or a component is not a valid glob.
pub(crate) fn expand_glob(word: &str, base: &std::path::Path) -> Option<Vec<std::path::PathBuf>> {
    use std::path::{Component, PathBuf};
    let path = std::path::Path::new(word);
    let start = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    let mut current = vec![start];
    let mut budget = MAX_GLOB_ENTRIES;
    for component in path.components() {
        let part = match component {
            Component::Normal(part) => part.to_str()?,
            Component::ParentDir => "..",
            Component::CurDir | Component::RootDir | Component::Prefix(_) => continue,
        };
        if !has_glob(part) {
            current = current.into_iter().map(|dir| dir.join(part)).collect();
            continue;
        }
        let compile = |pattern: &str| {
            globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .ok()
                .map(|glob| glob.compile_matcher())
        };
        // `[^x]` negates in bash, but in dash (`sh`) it is the class of `^` and `x`: a name
        // either shell could match counts.
        let negating = compile(part)?;
        let literal_caret = match caret_as_literal(part) {
            Some(pattern) => Some(compile(&pattern)?),
            None => None,
        };
        let matcher = GlobEither(negating, literal_caret);
        // dash (`sh`) and bash before 5.2 let a pattern that begins with a dot match `.` and
        // `..`: `sh -c 'cat .*/x'` reads `../x`.
        let dots: Vec<&str> = if part.starts_with('.') || part.starts_with("\\.") {
            [".", ".."]
                .into_iter()
                .filter(|name| matcher.is_match(name))
                .collect()
        } else {
            Vec::new()
        };
        let mut next = Vec::new();
        for dir in &current {
            next.extend(dots.iter().map(|name| dir.join(name)));
            let Ok(entries) = crate::runtime::probe::dir_entries(dir, budget) else {
                continue;
            };
            let entries = entries?;
            budget -= entries.len();
            for entry in entries {
                if entry.file_name().is_some_and(|name| matcher.is_match(name)) {
                    next.push(entry);
                }
            }
        }
        current = next;
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caret_class_is_also_read_as_dash_reads_it() {
        assert_eq!(caret_as_literal("[^x]*").as_deref(), Some("[x^]*"));
        assert_eq!(caret_as_literal("a[^]b]c").as_deref(), Some("a[]^b]c"));
        assert_eq!(caret_as_literal("[!x]*"), None);
        assert_eq!(caret_as_literal("x[^"), Some("x[^".to_owned()));
    }

    #[test]
    fn ripgrep_filters_are_read_in_every_spelling() {
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let filters = rg_filters(&words("-n -tsh -g.env --iglob X --type=rust -T md foo"));
        assert_eq!(
            filters,
            Some(RgFilters {
                globs: vec![(".env".to_owned(), false), ("X".to_owned(), true)],
                types: vec!["sh".to_owned(), "rust".to_owned()],
                types_not: vec!["md".to_owned()],
                ignore_files: vec![],
            })
        );
        assert_eq!(rg_filters(&words("foo -g")), None);
        assert_eq!(
            rg_filters(&words("-e -g foo")).map(|f| f.globs.len()),
            Some(0)
        );
    }
}
