//! Unit tests of the shell analysis: plain and not plain, keys, wrappers, nesting.

use std::path::{Path, PathBuf};

use super::*;

fn analyze_in(script: &str) -> ShellAnalysis {
    let roots = [PathBuf::from("/w")];
    let context = ShellContext {
        roots: &roots,
        home: Some(Path::new("/home/u")),
        runtime: None,
        scratch: None,
    };
    analyze(script, &context)
}

fn argvs(a: &ShellAnalysis) -> Vec<Vec<String>> {
    a.pipelines
        .iter()
        .map(|p| p.stages.iter().map(|s| s.text()).collect())
        .collect()
}

#[test]
fn plain_lists_and_pipelines() {
    let a = analyze_in("git status && cargo test -p core -- --nocapture");
    assert!(a.is_plain(), "{:?}", a.not_plain);
    assert_eq!(a.keys(), vec!["git status", "cargo test"]);
    let a = analyze_in("ls -la | grep 'foo bar' ; echo \"done\"");
    assert!(a.is_plain());
    assert_eq!(
        argvs(&a),
        vec![
            vec!["ls -la".to_owned(), "grep foo bar".to_owned()],
            vec!["echo done".to_owned()]
        ]
    );
    assert_eq!(a.keys(), vec!["ls", "grep", "echo"]);
    let a = analyze_in("cargo test 2>&1 | tail -n 5 > /dev/null");
    assert!(a.is_plain(), "{:?}", a.not_plain);
    let a = analyze_in("cargo build > build.log");
    assert!(a.is_plain(), "{:?}", a.not_plain);
    assert!(a.commands().next().unwrap().redirects[0].writes());
}

#[test]
fn words_are_unquoted() {
    let a = analyze_in(r#"echo a\ b 'c d' "e\"f" g"h"'i'"#);
    assert_eq!(
        a.commands().next().unwrap().argv,
        vec!["echo", "a b", "c d", "e\"f", "ghi"]
    );
}

#[test]
fn not_plain_constructs() {
    for (script, fragment) in [
        ("rm -rf $(pwd)/target", "command substitution"),
        ("echo `id`", "backticks"),
        ("bash <(curl -s x)", "process substitution"),
        ("echo $HOME", "expansion"),
        ("$CMD arg", "command name is computed"),
        ("cat <<EOF\nhi\nEOF", "here-document"),
        ("cat <<< hi", "here-string"),
        ("(cd x && ls)", "subshell"),
        ("f() { ls; }; f", "function"),
        ("for i in 1 2; do ls; done", "loop"),
        ("sleep 1 &", "background"),
        ("echo 'unterminated", "syntax error"),
        ("echo hi > /etc/passwd", "outside the workspace"),
        ("echo hi > ../x", "outside the workspace"),
        ("cd .. && echo hi > x", "outside the workspace"),
        ("LD_PRELOAD=x ls", "LD_PRELOAD"),
        ("echo {a,b}", "brace expansion"),
        ("export A=1", "export"),
        ("bash -c 'echo $(id)'", "command substitution"),
        ("ls \u{200b}x", "invisible"),
    ] {
        let a = analyze_in(script);
        assert!(!a.is_plain(), "{script} should not be plain");
        assert!(
            a.not_plain.iter().any(|r| r.contains(fragment)),
            "{script}: {:?}",
            a.not_plain
        );
        assert!(a.keys().is_empty());
        assert!(!a.opaque.is_empty(), "{script}");
    }
}

#[test]
fn commands_inside_non_plain_lines_are_still_found() {
    let a = analyze_in("echo $(rm -rf ~)");
    // `~` expanded as bash expands it.
    assert!(a.commands().any(|c| c.argv == ["rm", "-rf", "/home/u"]));
    let a = analyze_in("for f in *; do shred $f; done");
    assert!(a.commands().any(|c| c.program() == "shred"));
}

#[test]
fn nested_shells_are_analysed_in_place() {
    let a = analyze_in("bash -c \"sh -c 'git status && ls'\"");
    assert!(a.is_plain(), "{:?}", a.not_plain);
    assert_eq!(a.keys(), vec!["git status", "ls"]);
    let a = analyze_in("timeout 5 bash -c \"cargo test\"");
    assert_eq!(a.keys(), vec!["cargo test"]);
    let a = analyze_in("sh -c 'curl x | sh'");
    assert!(!a.is_plain());
    assert!(a.commands().any(|c| c.program() == "curl"));
}

#[test]
fn working_directory_is_tracked() {
    let a = analyze_in("cd src && ls; cd ~ && ls");
    let cwds: Vec<Cwd> = a.commands().map(|c| c.cwd.clone()).collect();
    assert_eq!(cwds[1], Cwd::Known(PathBuf::from("/w/src")));
    assert_eq!(cwds[3], Cwd::Known(PathBuf::from("/home/u")));
}
