//! Peeling: from a simple command as written to the command that does the work.
//!
//! [`peel`] strips wrappers that only change how a command runs (`env`, `timeout`, `nice`,
//! `nohup`, `time`, `command`, `builtin`, `exec`, `stdbuf`, `ionice`, `xargs`, and the
//! privilege wrappers `sudo`, `doas`, `pkexec`, `run0`, which the watchdog refuses), hands a
//! `bash|sh|dash -c 'script'` script back for analysis in place (zsh and ksh scripts are not
//! plain: they expand words differently), drops harmless `git` global
//! options, and flags what cannot be keyed: inline interpreter code, `find -exec`, `git -c`,
//! `eval`, `source`, `env -S`, dangerous environment assignments, `xargs` of a command that is
//! not read-only.

use super::commands::{is_interpreter, read_only_words};
use super::pattern::base_name;
use crate::tool::view::code;

/// A simple command after peeling.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peeled {
    /// The command that does the work (empty when the whole command was a `sh -c` container).
    pub argv: Vec<String>,
    /// Wrapper programs removed, outermost first.
    pub wrappers: Vec<String>,
    /// `NAME=value` pairs set through `env`.
    pub assignments: Vec<(String, String)>,
    /// Scripts handed to a shell with `-c`, to analyse in place.
    pub nested: Vec<String>,
    /// Why the command cannot have a cacheable key (empty: it can).
    pub not_plain: Vec<String>,
    /// Code handed to an interpreter or to `eval`, for the watchdog's text scan.
    pub inline_code: Vec<String>,
}

/// The shells whose `-c` scripts are analysed in place.
pub const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh", "mksh"];

/// Privilege wrappers: peeled for keying, refused by the watchdog.
pub const PRIVILEGE_WRAPPERS: &[&str] = &["sudo", "doas", "pkexec", "run0"];

/// Environment variables whose value changes which code runs; setting one makes a command
/// not plain.
pub fn is_dangerous_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("LD_")
        || upper.starts_with("DYLD_")
        || upper.starts_with("BASH_FUNC_")
        || upper.starts_with("GIT_CONFIG")
        || upper.ends_with("_OPTIONS")
        || matches!(
            upper.as_str(),
            "PATH"
                | "HOME"
                | "BASH_ENV"
                | "ENV"
                | "PS4"
                | "PROMPT_COMMAND"
                | "IFS"
                | "SHELLOPTS"
                | "BASHOPTS"
                | "PAGER"
                | "EDITOR"
                | "VISUAL"
                | "MANPAGER"
                | "LESSOPEN"
                | "LESSCLOSE"
                | "PYTHONPATH"
                | "PYTHONSTARTUP"
                | "PYTHONHOME"
                | "PERL5OPT"
                | "PERL5LIB"
                | "PERLLIB"
                | "RUBYOPT"
                | "RUBYLIB"
                | "NODE_PATH"
                | "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "RUSTC"
                | "SSH_ASKPASS"
                | "SUDO_ASKPASS"
                | "GIT_SSH"
                | "GIT_SSH_COMMAND"
                | "GIT_PAGER"
                | "GIT_EDITOR"
                | "GIT_EXTERNAL_DIFF"
                | "GIT_ASKPASS"
                | "GIT_EXEC_PATH"
                | "GIT_PROXY_COMMAND"
                | "GIT_TEMPLATE_DIR"
                | "GIT_DIR"
                | "GIT_WORK_TREE"
        )
}

/// Whether a word is a `NAME=value` assignment.
pub fn split_assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, value))
}

enum Step {
    /// Not a wrapper: peeling is done.
    Done,
    /// A wrapper whose command starts at this index.
    Inner(usize),
    /// A shell running a `-c` script.
    Script(String),
    /// Not plain, for this reason.
    NotPlain(String),
}

/// Peels `words`. `inside` says whether a literal path argument stays in the workspace (used
/// for `git -C`).
pub fn peel(words: &[String], inside: &dyn Fn(&str) -> bool) -> Peeled {
    let mut out = Peeled::default();
    let mut argv: Vec<String> = words.to_vec();
    for _ in 0..16 {
        let Some(first) = argv.first() else { break };
        let name = base_name(first).to_owned();
        let step = match name.as_str() {
            "env" => env(&argv, &mut out),
            "timeout" => timeout(&argv),
            "nice" => nice(&argv),
            "nohup" | "builtin" => Step::Inner(1),
            // GNU time's `-o FILE`/`--output=FILE` (and `-a`, append) write its report to a
            // file: that is a write, never a transparent wrapper.
            "time" if time_writes(&argv) => {
                Step::NotPlain("`time -o`/`--output` writes its report to a file".to_owned())
            }
            "time" => skip_options(
                &argv,
                &["-p", "-v", "-q", "--portability", "--verbose", "--quiet"],
                &["-f"],
            ),
            "command" => {
                if argv.iter().skip(1).any(|a| a == "-v" || a == "-V") {
                    Step::Done
                } else {
                    skip_options(&argv, &["-p"], &[])
                }
            }
            "exec" => skip_options(&argv, &["-c", "-l"], &["-a"]),
            "stdbuf" => stdbuf(&argv),
            "ionice" => {
                if argv.iter().any(|a| a == "-p" || a == "-P" || a == "-u") {
                    Step::Done
                } else {
                    skip_options(&argv, &["-t"], &["-c", "-n"])
                }
            }
            "xargs" => xargs(&argv),
            "sudo" => skip_options(
                &argv,
                &["-E", "-H", "-n", "-S", "-i", "-s", "-k", "-b", "-P", "-e"],
                &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U"],
            ),
            "doas" => skip_options(&argv, &["-n", "-s"], &["-u", "-C"]),
            "pkexec" => skip_options(&argv, &["--disable-internal-agent"], &["--user"]),
            "run0" => skip_options(&argv, &[], &["-u", "--user"]),
            n if SHELLS.contains(&n) => shell(&argv),
            "eval" => {
                out.inline_code.push(argv[1..].join(" "));
                Step::NotPlain("`eval` runs a string as code".to_owned())
            }
            "source" | "." => Step::NotPlain(format!(
                "{name} runs another file's commands in this shell",
                name = code(&name),
            )),
            _ => Step::Done,
        };
        match step {
            Step::Done => break,
            Step::Inner(index) => {
                if index >= argv.len() {
                    break;
                }
                out.wrappers.push(name);
                argv.drain(..index);
            }
            Step::Script(script) => {
                out.wrappers.push(name);
                out.nested.push(script);
                argv.clear();
                break;
            }
            Step::NotPlain(reason) => {
                out.not_plain.push(reason);
                break;
            }
        }
    }
    if let Some(first) = argv.first() {
        let name = base_name(first).to_owned();
        inspect(&name, &mut argv, inside, &mut out);
    }
    out.argv = argv;
    out
}

/// Skips options (`flags` take no value, `valued` take one, attached or separate) and `--`,
/// returning where the wrapped command starts.
/// Whether `time`'s options (before its command) name an output file: `-o`, `-a`, a cluster
/// holding either, or a long option that abbreviates `--output` or `--append`.
fn time_writes(argv: &[String]) -> bool {
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        if !arg.starts_with('-') || arg == "--" || arg == "-" {
            return false;
        }
        let writes = match arg.strip_prefix("--") {
            Some(long) => {
                let name = long.split('=').next().unwrap_or("");
                "output".starts_with(name) || "append".starts_with(name)
            }
            None => arg.contains(['o', 'a']),
        };
        if writes {
            return true;
        }
        // `-f FORMAT` / `--format FORMAT`: skip the value.
        if arg == "-f" || arg == "--format" {
            args.next();
        }
    }
    false
}

fn skip_options(argv: &[String], flags: &[&str], valued: &[&str]) -> Step {
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].as_str();
        if arg == "--" {
            i += 1;
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            break;
        }
        let attached = valued
            .iter()
            .any(|v| v.len() == 2 && arg.starts_with(v) && arg.len() > 2);
        let cluster = arg.len() > 2
            && !arg.starts_with("--")
            && arg[1..]
                .chars()
                .all(|c| flags.contains(&format!("-{c}").as_str()));
        if valued.contains(&arg) {
            i += 2;
        } else if flags.contains(&arg)
            || (arg.starts_with("--") && arg.contains('='))
            || attached
            || cluster
        {
            i += 1;
        } else {
            return Step::NotPlain(format!(
                "{} with the unknown option {arg}",
                code(&argv[0]),
                arg = code(arg)
            ));
        }
    }
    Step::Inner(i)
}

fn env(argv: &[String], out: &mut Peeled) -> Step {
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].as_str();
        if arg == "-S"
            || arg.starts_with("--split-string")
            || (arg.starts_with("-S") && arg.len() > 2)
        {
            return Step::NotPlain("`env -S` splits a string into a command".to_owned());
        }
        if arg == "-C" || arg.starts_with("--chdir") {
            return Step::NotPlain("`env -C` runs the command in another directory".to_owned());
        }
        if arg == "--" {
            i += 1;
            break;
        }
        if arg == "-u" || arg == "--unset" {
            i += 2;
        } else if matches!(
            arg,
            "-i" | "--ignore-environment" | "-0" | "--null" | "-v" | "--debug" | "-"
        ) || arg.starts_with("--unset=")
            || (arg.starts_with("-u") && arg.len() > 2)
        {
            i += 1;
        } else if let Some((name, value)) = split_assignment(arg) {
            if is_dangerous_variable(name) {
                return Step::NotPlain(format!(
                    "setting {name} changes which code runs",
                    name = code(name)
                ));
            }
            out.assignments.push((name.to_owned(), value.to_owned()));
            i += 1;
        } else if arg.starts_with('-') {
            return Step::NotPlain(format!(
                "`env` with the unknown option {arg}",
                arg = code(arg)
            ));
        } else {
            break;
        }
    }
    Step::Inner(i)
}

fn timeout(argv: &[String]) -> Step {
    match skip_options(
        argv,
        &["--preserve-status", "--foreground", "-v", "--verbose"],
        &["-s", "--signal", "-k", "--kill-after"],
    ) {
        // The duration comes before the command.
        Step::Inner(i) => Step::Inner(i + 1),
        other => other,
    }
}

fn nice(argv: &[String]) -> Step {
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].as_str();
        if arg == "-n" || arg == "--adjustment" {
            i += 2;
        } else if arg.starts_with("--adjustment=")
            || (arg.starts_with('-') && arg[1..].parse::<i32>().is_ok())
            || (arg.starts_with("-n") && arg[2..].parse::<i32>().is_ok())
        {
            i += 1;
        } else if arg == "--" {
            i += 1;
            break;
        } else if arg.starts_with('-') {
            return Step::NotPlain(format!(
                "`nice` with the unknown option {arg}",
                arg = code(arg)
            ));
        } else {
            break;
        }
    }
    Step::Inner(i)
}

fn stdbuf(argv: &[String]) -> Step {
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].as_str();
        if matches!(arg, "-i" | "-o" | "-e") {
            i += 2;
        } else if arg.starts_with("--input=")
            || arg.starts_with("--output=")
            || arg.starts_with("--error=")
            || ((arg.starts_with("-i") || arg.starts_with("-o") || arg.starts_with("-e"))
                && arg.len() > 2)
        {
            i += 1;
        } else if arg.starts_with('-') {
            return Step::NotPlain(format!(
                "`stdbuf` with the unknown option {arg}",
                arg = code(arg)
            ));
        } else {
            break;
        }
    }
    Step::Inner(i)
}

fn xargs(argv: &[String]) -> Step {
    let flags = [
        "-0",
        "-r",
        "-t",
        "-x",
        "-p",
        "--null",
        "--no-run-if-empty",
        "--verbose",
        "--exit",
        "--interactive",
        "-o",
        "--open-tty",
    ];
    let valued = [
        "-n",
        "-P",
        "-L",
        "-d",
        "-s",
        "-E",
        "-a",
        "--max-args",
        "--max-procs",
        "--max-lines",
        "--delimiter",
        "--max-chars",
        "--eof",
        "--arg-file",
    ];
    let step = skip_options(argv, &flags, &valued);
    let Step::Inner(i) = step else {
        return step;
    };
    if argv[1..i]
        .iter()
        .any(|a| a == "-I" || a == "-i" || a.starts_with("--replace"))
    {
        return Step::NotPlain("`xargs -I` splices its input into a command".to_owned());
    }
    let inner = &argv[i..];
    if inner.is_empty() {
        return Step::Done;
    }
    if !read_only_words(inner) {
        return Step::NotPlain(format!(
            "{} runs a command that may change files on input it does not show",
            code(&format!("xargs {}", inner[0]))
        ));
    }
    Step::Inner(i)
}

fn shell(argv: &[String]) -> Step {
    // zsh and the Korn shells expand words bash leaves alone (`=cmd` is a program's path in
    // zsh, `*(e:cmd:)` runs code, ksh's `${ cmd; }`): their scripts are not analysed as bash.
    let name = base_name(&argv[0]);
    if !matches!(name, "bash" | "sh" | "dash") {
        return Step::NotPlain(format!(
            "{name} scripts follow expansion rules other than bash's",
            name = code(name),
        ));
    }
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].as_str();
        match arg {
            "--norc" | "--noprofile" | "--login" | "--posix" | "--noediting" | "-l" | "-e"
            | "-u" | "-x" | "-v" => i += 1,
            "-o" | "+o" => {
                let option = argv.get(i + 1).map(String::as_str).unwrap_or("");
                if !matches!(option, "pipefail" | "errexit" | "nounset" | "xtrace") {
                    return Step::NotPlain(code(&format!("{} -o {option}", argv[0])).to_string());
                }
                i += 2;
            }
            "--" => {
                i += 1;
                break;
            }
            _ if arg.starts_with('-')
                && arg.len() > 1
                && arg[1..].chars().all(|c| "celuxv".contains(c)) =>
            {
                if arg.contains('c') {
                    return match argv.get(i + 1) {
                        Some(script) => Step::Script(script.clone()),
                        None => Step::NotPlain(format!(
                            "{} without a script",
                            code(&format!("{} -c", argv[0]))
                        )),
                    };
                }
                i += 1;
            }
            _ if arg.starts_with('-') || arg.starts_with('+') => {
                return Step::NotPlain(format!(
                    "{} with the option {arg}",
                    code(&argv[0]),
                    arg = code(arg)
                ));
            }
            _ => return Step::Done,
        }
    }
    if i >= argv.len() {
        return Step::NotPlain(format!(
            "{} without a script runs the commands it reads from its input",
            code(&argv[0]),
        ));
    }
    Step::Done
}

/// Command-specific checks on the peeled argv.
fn inspect(name: &str, argv: &mut Vec<String>, inside: &dyn Fn(&str) -> bool, out: &mut Peeled) {
    if is_interpreter(name) && !SHELLS.contains(&name) {
        if let Some(inline) = interpreter_inline_code(name, argv) {
            out.inline_code.push(inline);
            out.not_plain.push(format!(
                "{name} runs inline code given on the command line",
                name = code(name),
            ));
        }
        return;
    }
    match name {
        "find" => {
            if let Some(action) = argv.iter().find(|a| {
                matches!(
                    a.as_str(),
                    "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete"
                )
            }) {
                out.not_plain.push(format!(
                    "{} acts on every match",
                    code(&format!("find {action}"))
                ));
            }
        }
        "git" => git(argv, inside, out),
        "awk" | "gawk" | "mawk" | "nawk" => awk(name, argv, out),
        "sed" => {
            out.inline_code.extend(
                argv[1..]
                    .iter()
                    .filter(|a| !a.starts_with('-'))
                    .take(1)
                    .cloned(),
            );
        }
        _ => {}
    }
}

/// The code an interpreter is given inline (`python -c`, `node -e`, `perl -e`, ...).
fn interpreter_inline_code(name: &str, argv: &[String]) -> Option<String> {
    let flags: &[&str] = if name.starts_with("python") {
        &["-c"]
    } else {
        match name {
            "node" | "nodejs" | "bun" => &["-e", "--eval", "-p", "--print", "-pe"],
            "deno" => &["eval"],
            "perl" | "ruby" => &["-e", "-E"],
            "php" => &["-r", "-R", "-B", "-E"],
            "lua" | "Rscript" => &["-e"],
            _ => &[],
        }
    };
    for (i, arg) in argv.iter().enumerate().skip(1) {
        let clustered = matches!(name, "perl" | "ruby")
            && arg.starts_with('-')
            && !arg.starts_with("--")
            && arg[1..].contains(['e', 'E']);
        let python_cluster = name.starts_with("python")
            && arg.starts_with('-')
            && !arg.starts_with("--")
            && arg.ends_with('c');
        if flags.contains(&arg.as_str()) || clustered || python_cluster {
            return Some(argv.get(i + 1).cloned().unwrap_or_default());
        }
        if let Some(code) = arg.strip_prefix("--eval=") {
            return Some(code.to_owned());
        }
        if !arg.starts_with('-') {
            // The script file: what follows are its arguments.
            return None;
        }
    }
    None
}

/// `git`'s global options: the ones that change nothing but output are dropped (`--no-pager`,
/// `-P`, `--no-optional-locks`, `--literal-pathspecs`, `--no-replace-objects`); configuration
/// overrides (`-c`, `--config-env`, `--exec-path`) make the command not plain; every other
/// global option (`-C`, `--git-dir`, `--work-tree`, `-p`/`--paginate`, ...) stays in the argv,
/// where no read-only grammar accepts it (the call asks, without a key).
fn git(argv: &mut Vec<String>, _inside: &dyn Fn(&str) -> bool, out: &mut Peeled) {
    let i = 1;
    while i < argv.len() {
        let arg = argv[i].clone();
        match arg.as_str() {
            "--no-pager"
            | "-P"
            | "--no-optional-locks"
            | "--literal-pathspecs"
            | "--no-replace-objects" => {
                argv.remove(i);
            }
            "-c" => {
                out.not_plain
                    .push("`git -c` overrides configuration for one command".to_owned());
                return;
            }
            _ if arg.starts_with("--config-env") => {
                out.not_plain
                    .push("`git --config-env` overrides configuration".to_owned());
                return;
            }
            _ if arg.starts_with("--exec-path") => {
                out.not_plain
                    .push("`git --exec-path` changes where git finds its programs".to_owned());
                return;
            }
            _ if arg.starts_with("-c") && arg.len() > 2 => {
                out.not_plain
                    .push("`git -c` overrides configuration for one command".to_owned());
                return;
            }
            _ => break,
        }
    }
    let sub = argv.get(1).map(String::as_str).unwrap_or("");
    let runs_commands = match sub {
        "submodule" => argv.get(2).is_some_and(|a| a == "foreach"),
        "bisect" => argv.get(2).is_some_and(|a| a == "run"),
        "rebase" => argv.iter().any(|a| a == "-x" || a.starts_with("--exec")),
        _ => false,
    };
    if runs_commands {
        out.inline_code.push(argv[2..].join(" "));
        out.not_plain.push(format!(
            "{} runs commands given on the command line",
            code(&format!("git {sub}"))
        ));
    }
}

fn awk(name: &str, argv: &[String], out: &mut Peeled) {
    let mut i = 1;
    let mut program = None;
    while i < argv.len() {
        let arg = argv[i].as_str();
        if arg == "-f" || arg.starts_with("--file") || arg.starts_with("-f") && arg.len() > 2 {
            out.not_plain.push(format!(
                "{} runs a program file",
                code(&format!("{name} -f"))
            ));
            return;
        }
        if matches!(arg, "-F" | "-v" | "--assign" | "--field-separator") {
            i += 2;
            continue;
        }
        if arg.starts_with('-') && arg != "-" {
            i += 1;
            continue;
        }
        program = Some(arg.to_owned());
        break;
    }
    let Some(program) = program else { return };
    let risky = program.contains("system")
        || program.contains("getline")
        || program.contains('|')
        || prints_to_file(&program);
    out.inline_code.push(program);
    if risky {
        out.not_plain.push(format!(
            "the {name} program runs commands or writes files",
            name = code(name),
        ));
    }
}

/// Whether an awk program has a `print > file` / `printf >> file` statement.
fn prints_to_file(program: &str) -> bool {
    program.match_indices("print").any(|(at, _)| {
        program[at..]
            .split([';', '}', '\n'])
            .next()
            .is_some_and(|statement| statement.contains('>'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        shell_words::split(s).unwrap()
    }

    fn peeled(s: &str) -> Peeled {
        peel(&words(s), &|p: &str| {
            !p.starts_with('/') && !p.starts_with("..")
        })
    }

    #[test]
    fn wrappers_are_peeled() {
        for (command, argv, wrappers) in [
            ("env FOO=1 rm -rf x", "rm -rf x", "env"),
            ("timeout 5 cargo test", "cargo test", "timeout"),
            (
                "timeout -s KILL 5m nice -n 10 cargo build",
                "cargo build",
                "timeout nice",
            ),
            ("nohup make", "make", "nohup"),
            ("time -p ls", "ls", "time"),
            ("command ls", "ls", "command"),
            ("stdbuf -oL -eL cargo test", "cargo test", "stdbuf"),
            ("ionice -c 3 du -sh", "du -sh", "ionice"),
            ("xargs grep foo", "grep foo", "xargs"),
            ("sudo -u root apt install x", "apt install x", "sudo"),
            ("git --no-pager -P log", "git log", ""),
            ("git --no-pager -C src log", "git -C src log", ""),
        ] {
            let p = peeled(command);
            assert_eq!(p.argv.join(" "), argv, "{command}");
            assert_eq!(p.wrappers.join(" "), wrappers, "{command}");
            assert!(p.not_plain.is_empty(), "{command}: {:?}", p.not_plain);
        }
    }

    #[test]
    fn shell_scripts_are_handed_back() {
        let p = peeled("bash -lc 'git status && ls'");
        assert_eq!(p.nested, vec!["git status && ls".to_owned()]);
        assert!(p.argv.is_empty());
        let p = peeled("timeout 5 sh -c 'cargo test'");
        assert_eq!(p.wrappers, vec!["timeout", "sh"]);
        assert_eq!(p.nested, vec!["cargo test".to_owned()]);
        assert!(!peeled("bash").not_plain.is_empty());
        assert!(peeled("bash scripts/x.sh").not_plain.is_empty());
    }

    #[test]
    fn not_plain_shapes() {
        for command in [
            "python -c 'import os'",
            "python3 -Sc 'x'",
            "node -e 'x'",
            "perl -ne 'print'",
            "ruby -e 'x'",
            "php -r 'x'",
            "find . -exec rm {} ;",
            "find . -delete",
            "git -c core.pager=less log",
            "git --config-env=core.pager=X log",
            "xargs rm",
            "xargs -I{} cp {} x",
            "env -S 'rm -rf x'",
            "env LD_PRELOAD=x ls",
            "eval ls",
            "source x.sh",
            ". x.sh",
            "awk '{ system(\"id\") }'",
            "awk '{ print > \"out\" }'",
            "bash -i",
        ] {
            assert!(!peeled(command).not_plain.is_empty(), "{command}");
        }
        assert!(peeled("awk '$3 > 100 { n++ }'").not_plain.is_empty());
        assert!(peeled("python3 script.py -c x").not_plain.is_empty());
    }
}
