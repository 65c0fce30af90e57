//! Keel's own rendering of an analysed command line: what a command allowed without asking
//! runs ([`crate::policy::Decision::contained`]).
//!
//! Every word is written single-quoted, as the analysis read it after quote removal and after
//! Keel's own tilde and pathname expansion ([`super::glob`]); comments and line continuations
//! are gone; `cd` moves to the absolute directory the analysis computed (bash's logical `cd`)
//! and the line ends there when it fails or was skipped. Bash then has nothing left to
//! interpret but the operators Keel wrote, so a disagreement between Keel's parser and bash
//! (a `#` after a backslash-newline, a carriage return, an escaped tab) or between their glob
//! dialects can only make a command fail, never run a word Keel did not see.
//!
//! Rendered: simple commands whose words are literal, pipelines (`|`, `|&`), lists (`&&`,
//! `||`, `;`, newlines), redirections that duplicate a descriptor, read a file, or write to a
//! device that holds no file (`/dev/null`, ...), and `cd DIR`. Anything else (a nested shell,
//! an assignment, a negation, a builtin that changes the shell's state, `cd` in a pipeline or
//! after `||`, a pattern Keel does not expand, ...) is not: the line is then asked about, and
//! an approved line runs as the user wrote it.

use super::{Cwd, Pipeline, Redirect, ShellAnalysis, SimpleCommand, is_harmless_device};
use crate::tool::view::code;

/// Builtins that change the state of the shell that runs the later commands (which program a
/// name runs, how words are expanded, what the environment holds, where output goes): the
/// analysis does not follow them, so a line that uses one is not rendered. `cd` is followed.
const STATEFUL_BUILTINS: &[&str] = &[
    ".",
    "alias",
    "bind",
    "builtin",
    "declare",
    "enable",
    "eval",
    "exec",
    "export",
    "fc",
    "getopts",
    "hash",
    "let",
    "local",
    "mapfile",
    "popd",
    "pushd",
    "read",
    "readarray",
    "readonly",
    "set",
    "shift",
    "shopt",
    "source",
    "trap",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
];

/// The script that runs `analysis` exactly as analysed, or why it cannot be written.
// String error: the reason the command cannot be rendered, shown in the decision.
pub fn render(analysis: &ShellAnalysis) -> Result<String, String> {
    if !analysis.is_plain() {
        return Err(format!(
            "the line is not plain ({})",
            analysis.not_plain.join("; ")
        ));
    }
    if let Some(reason) = analysis.unrenderable.first() {
        return Err(reason.clone());
    }
    render_pipelines(analysis.pipelines.iter().filter(|p| p.depth == 0), false)
}

/// The pipelines of one script, rendered; `posix`: for `sh`, without bash's own operators
/// (`|&`, `&>`).
// String error: the reason the command cannot be rendered, shown in the decision.
pub(super) fn render_pipelines<'p>(
    pipelines: impl Iterator<Item = &'p Pipeline>,
    posix: bool,
) -> Result<String, String> {
    let mut out = String::new();
    let mut empty = true;
    for (index, pipeline) in pipelines.enumerate() {
        empty = false;
        let joiner = pipeline.joiner.as_str();
        if index > 0 {
            out.push_str(match joiner {
                "&&" => " && ",
                "||" => " || ",
                _ => "; ",
            });
        }
        if pipeline.stages.is_empty() || pipeline.pipes.len() + 1 != pipeline.stages.len() {
            return Err("a pipeline Keel did not read whole".to_owned());
        }
        if let [only] = pipeline.stages.as_slice()
            && only.program() == "cd"
        {
            if joiner == "||" {
                return Err("`cd` after `||` (it may be skipped)".to_owned());
            }
            out.push_str(&change_directory(only)?);
            continue;
        }
        for (stage, command) in pipeline.stages.iter().enumerate() {
            if stage > 0 {
                let pipe = &pipeline.pipes[stage - 1];
                if posix && pipe != "|" {
                    return Err(format!("{pipe} in a script for `sh`", pipe = code(pipe)));
                }
                out.push(' ');
                out.push_str(pipe);
                out.push(' ');
            }
            out.push_str(&simple_command(command, posix)?);
        }
    }
    if empty {
        return Err("the line runs no command".to_owned());
    }
    Ok(out)
}

/// A word as a literal bash reads back unchanged.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

// String error: the reason the command cannot be rendered, shown in the decision.
fn simple_command(command: &SimpleCommand, posix: bool) -> Result<String, String> {
    if command.container {
        return nested_shell(command, posix);
    }
    checked(command)?;
    let program = command.program();
    if program == "cd" {
        return Err("`cd` inside a pipeline (it runs in a subshell)".to_owned());
    }
    for name in command.wrappers.iter().chain(command.argv.first()) {
        let name = super::base_name(name);
        if STATEFUL_BUILTINS.contains(&name) {
            return Err(format!(
                "the builtin {name}, which changes the shell's state",
                name = code(name),
            ));
        }
    }
    let mut parts: Vec<String> = command.original.iter().map(|w| quote(w)).collect();
    for redirect in &command.redirects {
        parts.push(redirection(redirect, posix)?);
    }
    Ok(parts.join(" "))
}

/// `sh -c SCRIPT` or `bash -c SCRIPT`, exactly, with the script as Keel rendered it.
// String error: the reason the command cannot be rendered, shown in the decision.
fn nested_shell(command: &SimpleCommand, posix: bool) -> Result<String, String> {
    let script = command
        .nested_script
        .as_deref()
        .ok_or_else(|| "a nested shell script Keel did not render".to_owned())?;
    let words: Vec<&str> = command.original.iter().map(String::as_str).collect();
    let shell = match words.as_slice() {
        [shell, "-c", _] if command.wrappers.len() == 1 => super::base_name(shell),
        _ => return Err("a nested shell with options, arguments or a wrapper".to_owned()),
    };
    if !matches!(shell, "sh" | "bash") || !command.assignments.is_empty() || command.dynamic {
        return Err(format!("the nested shell {shell}", shell = code(shell)));
    }
    let mut parts = vec![quote(words[0]), quote("-c"), quote(script)];
    for redirect in &command.redirects {
        parts.push(redirection(redirect, posix)?);
    }
    Ok(parts.join(" "))
}

// String error: the reason the command cannot be rendered, shown in the decision.
fn checked(command: &SimpleCommand) -> Result<(), String> {
    if command.dynamic {
        return Err("an expansion".to_owned());
    }
    if !command.assignments.is_empty() {
        return Err("a variable assignment".to_owned());
    }
    if command.original.is_empty() {
        return Err("a redirection without a command".to_owned());
    }
    if command.cwd == Cwd::Unknown {
        return Err("a command whose working directory is not known".to_owned());
    }
    Ok(())
}

/// `cd DIR` (or `cd`, `cd -- DIR`) as `cd -- '/abs/dir' || exit`: the directory the analysis
/// computed, and the end of the line when it cannot be entered (or an `&&` before it failed),
/// since every later command was analysed as running there.
// String error: the reason the command cannot be rendered, shown in the decision.
fn change_directory(command: &SimpleCommand) -> Result<String, String> {
    checked(command)?;
    let words: Vec<&str> = command.original.iter().map(String::as_str).collect();
    let plain = match words.as_slice() {
        ["cd"] => true,
        ["cd", dir] => !dir.starts_with('-'),
        ["cd", "--", _] => true,
        _ => false,
    };
    if !plain || !command.wrappers.is_empty() || !command.redirects.is_empty() {
        return Err("`cd` with options, several operands, a wrapper or a redirection".to_owned());
    }
    let directory = command
        .directory
        .as_ref()
        .and_then(|d| d.to_str())
        .ok_or_else(|| "`cd` to a directory Keel cannot name".to_owned())?;
    Ok(format!("cd -- {} || exit", quote(directory)))
}

// String error: the reason the command cannot be rendered, shown in the decision.
fn redirection(redirect: &Redirect, posix: bool) -> Result<String, String> {
    if redirect.dynamic {
        return Err("a redirection to an expansion".to_owned());
    }
    let fd = redirect.descriptor.as_deref().unwrap_or("");
    if !fd.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("the redirection descriptor {fd}", fd = code(fd)));
    }
    let operator = redirect.operator.as_str();
    if redirect.duplicate {
        // The target is digits or `-`, checked by the analysis.
        return Ok(format!("{fd}{operator}{}", redirect.target));
    }
    if redirect.target.is_empty() {
        return Err("a redirection without a target".to_owned());
    }
    match operator {
        "<" => Ok(format!("{fd}<{}", quote(&redirect.target))),
        ">" | ">>" | ">|" if is_harmless_device(&redirect.target) => {
            Ok(format!("{fd}{operator}{}", quote(&redirect.target)))
        }
        "&>" | "&>>" | ">&" if !posix && fd.is_empty() && is_harmless_device(&redirect.target) => {
            Ok(format!("{operator}{}", quote(&redirect.target)))
        }
        _ => Err(format!(
            "the redirection {}",
            code(&format!("{fd}{operator} {}", redirect.target))
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::{ShellContext, analyze};
    use super::*;

    // String error: the test compares the reason's text.
    fn rendered(script: &str) -> Result<String, String> {
        let roots = [PathBuf::from("/w")];
        let context = ShellContext {
            roots: &roots,
            home: Some(Path::new("/home/u")),
            runtime: None,
            scratch: None,
        };
        render(&analyze(script, &context))
    }

    #[test]
    fn lines_render_as_literal_words() {
        assert_eq!(
            rendered("git status && ls -la src | head -n 3; echo \"it's\" 2>/dev/null").unwrap(),
            "'git' 'status' && 'ls' '-la' 'src' | 'head' '-n' '3'; 'echo' 'it'\\''s' 2>'/dev/null'"
        );
        assert_eq!(
            rendered("cargo test 2>&1 |& tail -n 5").unwrap(),
            "'cargo' 'test' 2>&1 |& 'tail' '-n' '5'"
        );
        assert_eq!(
            rendered("echo ok\\\n  done # note").unwrap(),
            "'echo' 'ok' 'done'"
        );
        assert_eq!(rendered("cat ~/x").unwrap(), "'cat' '/home/u/x'");
        assert_eq!(
            rendered("cd src && cat main.rs").unwrap(),
            "cd -- '/w/src' || exit && 'cat' 'main.rs'"
        );
        assert_eq!(rendered("cd").unwrap(), "cd -- '/home/u' || exit");
        assert_eq!(
            rendered("cd 'a[1]' && ls").unwrap(),
            "cd -- '/w/a[1]' || exit && 'ls'"
        );
        let roots = [PathBuf::from("/w")];
        let context = ShellContext {
            roots: &roots,
            home: None,
            runtime: None,
            scratch: None,
        };
        let analysis = analyze("cd 'a[1]' && ls", &context);
        assert_eq!(
            analysis.commands().nth(1).map(|c| c.cwd.clone()),
            Some(Cwd::Known(PathBuf::from("/w/a[1]")))
        );
        assert_eq!(
            rendered("ls && sh -c 'cat a.rs; echo x\\\n#; id' && bash -c \"sh -c 'ls'\" | wc")
                .unwrap(),
            "'ls' && 'sh' '-c' ''\\''cat'\\'' '\\''a.rs'\\''; '\\''echo'\\'' '\\''x'\\''' && \
             'bash' '-c' ''\\''sh'\\'' '\\''-c'\\'' '\\'''\\''\\'\\'''\\''ls'\\''\\'\\'''\\'''\\''' | 'wc'"
        );
    }

    #[test]
    fn what_is_not_rendered() {
        for (script, fragment) in [
            ("! ls", "negated"),
            ("true || cd src; ls", "after `||`"),
            ("cd src | ls", "pipeline"),
            ("cd -P src", "options"),
            ("cd -", "options"),
            ("ls ~root", "~user"),
            ("echo a=~/x", "assignment"),
            ("hash -p /bin/sh ls", "hash"),
            ("sh -c 'ls' x", "nested shell with options"),
            ("sh -c 'ls |& cat'", "`|&` in a script for `sh`"),
            ("bash -c 'ls $HOME'", "not plain"),
            ("sh -c 'ls *.rs'", "a pattern in a script for `sh`"),
            ("ls > out.txt", "redirection"),
            ("ls $HOME", "not plain"),
        ] {
            let reason = rendered(script).expect_err(script);
            assert!(reason.contains(fragment), "{script}: {reason}");
        }
    }
}
