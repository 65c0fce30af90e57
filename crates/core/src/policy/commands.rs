//! What is known about individual commands: their approval key and whether they only read.
//!
//! - [`approval_key`]: the leading words of a simple command that name *what* it does
//!   (`cargo test`, `git status`, `npm run build`), never its per-call arguments.
//! - [`read_only_words`]: whether an argv stays inside its command's allowlisted grammar
//!   ([`super::grammar`]); where its path words point is checked by the caller.

use super::grammar::fit;
use super::pattern::base_name;

/// Longest approval key; a command whose key would be longer has none (it asks each time).
pub const MAX_KEY_BYTES: usize = 1024;

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
        // Options alone (`python3 --version`): the key is the whole call, so that approving it
        // covers no script.
        if rest.iter().all(|a| a.starts_with('-')) {
            return whole(argv);
        }
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
    // Options before the subcommand (`cargo --config x run`, `npm --prefix x run`) can change
    // what runs: the key is the whole call.
    let first = rest
        .iter()
        .find(|w| !(matches!(name, "cargo" | "rustup") && w.starts_with('+')));
    if depth > 0 && first.is_some_and(|w| w.starts_with('-')) {
        return whole(argv);
    }
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

fn whole(argv: &[String]) -> Option<String> {
    let key = argv.join(" ");
    (key.len() <= MAX_KEY_BYTES).then_some(key)
}

/// Whether `argv` stays inside its command's allowlisted grammar (paths not considered; the
/// caller, which knows the workspace, checks the path words of [`fit`]).
pub fn read_only_words(argv: &[String]) -> bool {
    fit(argv).accepted()
}

/// File names that hold credentials: reading them is never part of the read-only class, and
/// the watchdog asks before a command reads one. Compared in lower case, without trailing dots
/// and spaces (`.env.`, `.env ` are other files on Linux, but hold the same secrets).
pub fn is_secret_name(name: &str) -> bool {
    is_secret_lowered(&name.to_lowercase())
}

/// [`is_secret_name`] of a name already in lower case (`name.to_lowercase()`).
pub(crate) fn is_secret_lowered(lowered: &str) -> bool {
    let name = lowered.trim_end_matches(['.', ' ']);
    const PREFIXES: &[&str] = &[
        "id_rsa",
        "id_ed25519",
        "id_ecdsa",
        "id_dsa",
        "client_secret",
        "service-account",
        "service_account",
    ];
    const SUFFIXES: &[&str] = &[
        ".pem",
        ".key",
        ".p12",
        ".pfx",
        ".jks",
        ".keystore",
        ".ppk",
        ".tfstate",
        ".tfvars",
        ".tfvars.json",
        ".kdbx",
    ];
    const NAMES: &[&str] = &[
        "credentials",
        "credentials.json",
        ".netrc",
        "_netrc",
        ".pgpass",
        ".git-credentials",
        ".pypirc",
        ".npmrc",
        ".envrc",
        ".my.cnf",
        ".vault-token",
        ".htpasswd",
        ".s3cfg",
        ".boto",
        ".dockercfg",
        "secrets.json",
        "secrets.yaml",
        "secrets.yml",
        "secrets.toml",
        "terraform.tfstate.backup",
        ".dev.vars",
        ".secrets",
        "secrets.env",
    ];
    // `.env`, `.env.local`, `.env-prod`, `.env_test`, `.env~`, `.envrc` (direnv), `prod.env` (not
    // a jq path such as `.scripts.env`, nor a `rev:path` word, which its path's check covers).
    let dotenv = name.strip_prefix(".env").is_some_and(|rest| {
        rest.is_empty() || rest == "rc" || !rest.starts_with(|c: char| c.is_ascii_alphanumeric())
    }) || (name.ends_with(".env")
        && name.len() > 4
        && !name.starts_with('.')
        && !name.contains(':'));
    dotenv
        || PREFIXES.iter().any(|p| name.starts_with(p))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || NAMES.contains(&name)
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
            ("python3 --version", "python3 --version"),
            ("cargo --config x run", "cargo --config x run"),
            ("git -C sub status", "git -C sub status"),
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
            "ls -la --color=auto src",
            "head -5 x",
            "sort --rev x",
            "grep -rn -e foo -- src",
            "jq -r .env.name package.json",
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
            "sort --out=x in",
            "sort --compress-prog=sh in",
            "sort --co=sh in",
            "git diff --out=x",
            "git log --ext-diff",
            "git -C sub status",
            "git --git-dir=x log",
            "jq -n env",
            "jq -n $ENV",
            "grep -R x .",
            "rg --pre=sh x",
            "rg --pre sh x",
            "ls --unknown",
            "git grep -Oless x",
            "git grep --open-files-in-pager=less x",
        ] {
            assert!(!read_only_words(&argv(no)), "{no}");
        }
    }
}
