//! What is known about individual commands: their approval key and whether they only read.
//!
//! - [`approval_key`]: the leading words of a simple command that name *what* it does
//!   (`cargo test`, `git status`, `npm run build`), never its per-call arguments.
//! - [`READ_ONLY_COMMANDS`]: the commands the bundled `read-only` class allows, each with the
//!   argument condition that keeps it read-only; [`read_only_words`] checks one argv against it.
//!   (Where the arguments point is checked by the caller, which knows the workspace.)

use super::pattern::base_name;

/// How many subcommand words follow the program in a key. Commands not listed get
/// [`DEFAULT_DEPTH`].
const SUBCOMMAND_DEPTH: &[(&str, usize)] = &[
    // Single-purpose tools: the program is the key.
    ("ls", 0),
    ("pwd", 0),
    ("cat", 0),
    ("head", 0),
    ("tail", 0),
    ("wc", 0),
    ("echo", 0),
    ("printf", 0),
    ("which", 0),
    ("whereis", 0),
    ("type", 0),
    ("file", 0),
    ("stat", 0),
    ("du", 0),
    ("df", 0),
    ("tree", 0),
    ("basename", 0),
    ("dirname", 0),
    ("realpath", 0),
    ("readlink", 0),
    ("date", 0),
    ("sleep", 0),
    ("true", 0),
    ("false", 0),
    ("cut", 0),
    ("tr", 0),
    ("diff", 0),
    ("cmp", 0),
    ("comm", 0),
    ("sort", 0),
    ("uniq", 0),
    ("grep", 0),
    ("egrep", 0),
    ("fgrep", 0),
    ("rg", 0),
    ("ag", 0),
    ("find", 0),
    ("fd", 0),
    ("jq", 0),
    ("sed", 0),
    ("awk", 0),
    ("rm", 0),
    ("rmdir", 0),
    ("cp", 0),
    ("mv", 0),
    ("ln", 0),
    ("mkdir", 0),
    ("touch", 0),
    ("chmod", 0),
    ("chown", 0),
    ("tee", 0),
    ("tar", 0),
    ("zip", 0),
    ("unzip", 0),
    ("curl", 0),
    ("wget", 0),
    ("ssh", 0),
    ("scp", 0),
    ("rsync", 0),
    ("kill", 0),
    ("pkill", 0),
    ("cd", 0),
    ("command", 0),
    ("env", 0),
    ("pytest", 0),
    ("rustc", 0),
    ("tsc", 0),
    ("eslint", 0),
    ("prettier", 0),
    // One subcommand: `git status`, `cargo test`, `make check`.
    ("git", 1),
    ("cargo", 1),
    ("go", 1),
    ("make", 1),
    ("just", 1),
    ("pip", 1),
    ("pip3", 1),
    ("rustup", 1),
    ("gradle", 1),
    ("gradlew", 1),
    ("mvn", 1),
    ("dotnet", 1),
    ("swift", 1),
    ("bazel", 1),
    ("terraform", 1),
    ("helm", 1),
    ("systemctl", 1),
    ("brew", 1),
    ("apt", 1),
    ("apt-get", 1),
    ("dnf", 1),
    ("deno", 1),
    ("nix", 1),
    // Two: `npm run build`, `docker compose up`, `gh pr list`.
    ("npm", 2),
    ("pnpm", 2),
    ("yarn", 2),
    ("bun", 2),
    ("uv", 2),
    ("poetry", 2),
    ("docker", 2),
    ("podman", 2),
    ("kubectl", 2),
    ("gh", 2),
];

/// Depth for programs the table does not know.
pub const DEFAULT_DEPTH: usize = 2;

/// Interpreters: their key includes the script they run (`python3 tools/gen.py`).
pub const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "node", "nodejs", "ruby", "perl", "php", "lua", "bash", "sh",
    "zsh", "dash", "ksh", "mksh", "fish", "deno", "bun", "Rscript",
];

pub fn is_interpreter(name: &str) -> bool {
    INTERPRETERS.contains(&name) || is_versioned_python(name)
}

fn is_versioned_python(name: &str) -> bool {
    name.strip_prefix("python")
        .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn subcommand_depth(name: &str) -> usize {
    SUBCOMMAND_DEPTH
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
        .unwrap_or(DEFAULT_DEPTH)
}

/// A word that reads as a subcommand name: a letter or digit, then letters, digits, `_`, `-`
/// or `:`, at most 40 characters. Flags, paths, globs, `=` and dots end the key.
pub fn is_subcommand_word(word: &str) -> bool {
    let mut chars = word.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && word.len() <= 40
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':'))
}

/// The approval key of one peeled simple command:
/// 1. the program as written (`git`, `./gradlew`, `/usr/bin/env`);
/// 2. for an interpreter, the script it runs (`python3 gen.py`, `python3 -m pip`);
/// 3. otherwise up to N subcommand words (N from the table: 0 for single-purpose tools such as
///    `ls` or `rm`, 1 for `git`/`cargo`/`make`, 2 for `npm`/`docker`/`gh`, 2 for unknown
///    programs), stopping at the first word that is a flag, a path, a glob or has a `.` or `=`.
///
/// A `cargo +toolchain` selector is skipped (`cargo +nightly test` keys as `cargo test`).
pub fn approval_key(argv: &[String]) -> Option<String> {
    let program = argv.first()?;
    let name = base_name(program);
    let mut key = vec![program.as_str()];
    let rest = &argv[1..];
    if is_interpreter(name) {
        let mut iter = rest.iter();
        while let Some(arg) = iter.next() {
            if arg == "-m" {
                key.push("-m");
                if let Some(module) = iter.next() {
                    key.push(module);
                }
                break;
            }
            if arg.starts_with('-') {
                continue;
            }
            key.push(arg);
            break;
        }
        return Some(key.join(" "));
    }
    let depth = subcommand_depth(name);
    let mut taken = 0;
    for word in rest {
        if taken >= depth {
            break;
        }
        if matches!(name, "cargo" | "rustup") && word.starts_with('+') && taken == 0 {
            continue;
        }
        if !is_subcommand_word(word) {
            break;
        }
        key.push(word);
        taken += 1;
    }
    Some(key.join(" "))
}

/// One entry of the read-only class.
#[derive(Debug, Clone, Copy)]
pub struct ReadOnlyCommand {
    pub name: &'static str,
    /// When the command stays read-only (documented in docs/permissions.md).
    pub condition: &'static str,
    /// Whether positional arguments are paths that must stay inside the workspace.
    pub paths: bool,
}

const fn entry(name: &'static str, condition: &'static str, paths: bool) -> ReadOnlyCommand {
    ReadOnlyCommand {
        name,
        condition,
        paths,
    }
}

/// The commands the bundled `read-only` class allows.
pub const READ_ONLY_COMMANDS: &[ReadOnlyCommand] = &[
    entry("ls", "any flags", true),
    entry("pwd", "always", false),
    entry("cat", "any flags", true),
    entry("head", "any flags", true),
    entry("tail", "any flags", true),
    entry("wc", "any flags", true),
    entry("nl", "any flags", true),
    entry(
        "echo",
        "always (a redirection to a file makes it a write)",
        false,
    ),
    entry(
        "printf",
        "always (a redirection to a file makes it a write)",
        false,
    ),
    entry("which", "always", false),
    entry("whereis", "always", false),
    entry("type", "always", false),
    entry("command", "only `-v` or `-V` (a lookup)", false),
    entry("file", "without `-C`/`--compile`", true),
    entry("stat", "any flags", true),
    entry("du", "any flags", true),
    entry("tree", "without `-o`", true),
    entry("basename", "always", false),
    entry("dirname", "always", false),
    entry("realpath", "any flags", true),
    entry("readlink", "any flags", true),
    entry("date", "without `-s`/`--set`", false),
    entry("whoami", "always", false),
    entry("uname", "always", false),
    entry("id", "always", false),
    entry("hostname", "without arguments that set the name", false),
    entry("true", "always", false),
    entry("false", "always", false),
    entry("cut", "any flags", true),
    entry("tr", "always", false),
    entry("diff", "any flags", true),
    entry("cmp", "any flags", true),
    entry("comm", "any flags", true),
    entry("sort", "without `-o`/`--output`", true),
    entry(
        "uniq",
        "at most one file (a second one is an output file)",
        true,
    ),
    entry("grep", "any flags", true),
    entry("egrep", "any flags", true),
    entry("fgrep", "any flags", true),
    entry(
        "rg",
        "without `--pre` or `--hostname-bin` (they run programs)",
        true,
    ),
    entry(
        "find",
        "without `-exec`, `-execdir`, `-ok`, `-okdir`, `-delete`, `-fprint*`, `-fls`",
        true,
    ),
    entry("fd", "without `-x`/`--exec`/`-X`/`--exec-batch`", true),
    entry("jq", "any flags", true),
    entry("md5sum", "any flags", true),
    entry("sha1sum", "any flags", true),
    entry("sha256sum", "any flags", true),
    entry("cd", "inside the workspace", true),
    entry(
        "git",
        "status, diff, log, show, blame, grep, describe, shortlog, rev-parse, rev-list, ls-files, \
         ls-tree, cat-file, show-ref, for-each-ref, merge-base, name-rev, count-objects, \
         check-ignore, help, version; branch/tag when listing; remote with no arguments, -v, show, \
         get-url; stash list/show; worktree list; config --get/--list; never --output",
        false,
    ),
    entry("cargo", "only `--version`, `-V` or `version`", false),
    entry("rustc", "only `--version` or `-V`", false),
    entry("rustup", "only `--version` or `-V`", false),
    entry("node", "only `--version`", false),
    entry("npm", "only `--version`", false),
    entry("python", "only `--version`", false),
    entry("python3", "only `--version`", false),
    entry("go", "only `version`", false),
];

pub fn read_only_entry(name: &str) -> Option<&'static ReadOnlyCommand> {
    READ_ONLY_COMMANDS.iter().find(|c| c.name == name)
}

/// Whether the flags and subcommands of `argv` keep it read-only (paths not considered).
pub fn read_only_words(argv: &[String]) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let name = base_name(program);
    if read_only_entry(name).is_none() {
        return false;
    }
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let has = |flags: &[&str]| {
        args.iter().any(|a| {
            flags
                .iter()
                .any(|f| a == f || (f.starts_with("--") && a.starts_with(&format!("{f}="))))
        })
    };
    let short_cluster_has = |letter: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letter))
    };
    let positionals = || args.iter().filter(|a| !a.starts_with('-')).count();
    match name {
        "command" => has(&["-v", "-V"]),
        "file" => !has(&["-C", "--compile"]),
        "tree" => !has(&["-o"]),
        "date" => !has(&["-s", "--set"]) && !short_cluster_has('s'),
        "hostname" => positionals() == 0 && !has(&["-F", "--file", "-b", "--boot"]),
        "sort" => !has(&["--output"]) && !short_cluster_has('o'),
        "uniq" => positionals() <= 1,
        "rg" => !args
            .iter()
            .any(|a| a.starts_with("--pre") || a.starts_with("--hostname-bin")),
        "find" => !args.iter().any(|a| {
            matches!(
                *a,
                "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete" | "-fls"
            ) || a.starts_with("-fprint")
        }),
        "fd" => {
            !has(&["-x", "--exec", "-X", "--exec-batch"])
                && !args
                    .iter()
                    .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(['x', 'X']))
        }
        "git" => git_read_only(&args),
        "cargo" => matches!(args.as_slice(), ["--version"] | ["-V"] | ["version"]),
        "rustc" | "rustup" => matches!(args.as_slice(), ["--version"] | ["-V"]),
        "node" | "npm" | "python" | "python3" => matches!(args.as_slice(), ["--version"]),
        "go" => matches!(args.as_slice(), ["version"]),
        _ => true,
    }
}

fn git_read_only(args: &[&str]) -> bool {
    let Some((sub, rest)) = args.split_first() else {
        return false;
    };
    if rest
        .iter()
        .any(|a| a.starts_with("--output") || *a == "-o" || a.starts_with("--ext-diff"))
    {
        return false;
    }
    let positional = rest.iter().any(|a| !a.starts_with('-'));
    match *sub {
        "status" | "diff" | "log" | "show" | "blame" | "grep" | "describe" | "shortlog"
        | "rev-parse" | "rev-list" | "ls-files" | "ls-tree" | "cat-file" | "show-ref"
        | "for-each-ref" | "merge-base" | "name-rev" | "count-objects" | "check-ignore"
        | "help" | "version" | "whatchanged" => true,
        "branch" => {
            let changing = [
                "-d",
                "-D",
                "--delete",
                "-m",
                "-M",
                "--move",
                "-c",
                "-C",
                "--copy",
                "-u",
                "--set-upstream-to",
                "--unset-upstream",
                "--edit-description",
                "-f",
                "--force",
                "-t",
                "--track",
                "--no-track",
            ];
            let lists = [
                "-l",
                "--list",
                "--merged",
                "--no-merged",
                "--contains",
                "--no-contains",
                "--points-at",
            ];
            !rest.iter().any(|a| {
                changing
                    .iter()
                    .any(|c| a == c || a.starts_with(&format!("{c}=")))
            }) && (!positional || rest.iter().any(|a| lists.contains(a)))
        }
        "tag" => rest.is_empty() || matches!(rest.first(), Some(&"-l") | Some(&"--list")),
        "remote" => matches!(
            rest,
            [] | ["-v"] | ["--verbose"] | ["show", ..] | ["get-url", ..]
        ),
        "stash" => matches!(rest.first(), Some(&"list") | Some(&"show")),
        "worktree" => matches!(rest.first(), Some(&"list")),
        "reflog" => rest.is_empty() || matches!(rest.first(), Some(&"show")),
        "config" => matches!(
            rest.first(),
            Some(&"--get")
                | Some(&"--get-all")
                | Some(&"--get-regexp")
                | Some(&"--list")
                | Some(&"-l")
                | Some(&"get")
                | Some(&"list")
        ),
        _ => false,
    }
}

/// File names that hold credentials: reading them is never part of the read-only class, and
/// the watchdog asks before a command reads one.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_lowercase();
    name == ".env"
        || name.starts_with(".env.")
        || name.starts_with("id_rsa")
        || name.starts_with("id_ed25519")
        || name.starts_with("id_ecdsa")
        || name.starts_with("id_dsa")
        || name.ends_with(".pem")
        || name.ends_with(".key")
        || matches!(
            name.as_str(),
            "credentials" | ".netrc" | ".pgpass" | ".git-credentials" | ".pypirc" | ".npmrc"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn keys_stop_at_flags_and_paths() {
        for (command, key) in [
            ("cargo test -p core -- --nocapture", "cargo test"),
            ("cargo +nightly test", "cargo test"),
            ("git status --short", "git status"),
            ("git checkout main", "git checkout"),
            ("npm run build", "npm run build"),
            ("npm run build -- --watch", "npm run build"),
            ("ls -la src", "ls"),
            ("rm -rf target", "rm"),
            ("cat README.md", "cat"),
            ("python3 scripts/gen.py --out x", "python3 scripts/gen.py"),
            ("python3 -m pip install x", "python3 -m pip"),
            ("terraform plan", "terraform plan"),
            ("mytool sub cmd more", "mytool sub cmd"),
            ("mytool ./path", "mytool"),
            ("./gradlew build --info", "./gradlew build"),
            ("docker compose up -d", "docker compose up"),
            ("make", "make"),
        ] {
            assert_eq!(
                approval_key(&argv(command)).as_deref(),
                Some(key),
                "{command}"
            );
        }
    }

    #[test]
    fn read_only_words_check_arguments() {
        for yes in [
            "ls -la",
            "git status",
            "git diff HEAD~1",
            "git branch",
            "git branch -a",
            "git log --oneline",
            "find . -name x",
            "cargo --version",
            "sort -u",
            "command -v git",
        ] {
            assert!(read_only_words(&argv(yes)), "{yes}");
        }
        for no in [
            "git branch -D main",
            "git branch newname",
            "git diff --output=x",
            "git push",
            "git tag v1",
            "find . -delete",
            "find . -exec rm {} ;",
            "sort -o out in",
            "uniq in out",
            "rg --pre sh x",
            "cargo build",
            "rm x",
            "date -s 2020",
            "command git",
            "fd -x rm",
        ] {
            assert!(!read_only_words(&argv(no)), "{no}");
        }
    }
}
