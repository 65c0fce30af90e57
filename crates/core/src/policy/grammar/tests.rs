use super::*;

fn argv(s: &str) -> Vec<String> {
    shell_words::split(s).unwrap()
}

fn accepted_paths(s: &str) -> Vec<String> {
    match fit(&argv(s)) {
        Fit::Accepted { paths, .. } => paths,
        other => panic!("{s}: {other:?}"),
    }
}

#[test]
fn the_bundled_table_loads() {
    let table = Grammars::parse(BUNDLED_GRAMMARS).unwrap();
    assert!(table.get("ls").is_some());
    assert!(table.get("git log").is_some());
    assert!(table.iter().count() >= 60);
}

#[test]
fn short_clusters_attached_values_and_long_forms() {
    assert_eq!(accepted_paths("ls -la src"), vec!["src"]);
    assert_eq!(accepted_paths("head -n5 a b"), vec!["a", "b"]);
    assert_eq!(accepted_paths("head -n 5 a"), vec!["a"]);
    assert_eq!(accepted_paths("head -5 a"), vec!["a"]);
    assert_eq!(accepted_paths("head --lines=5 a"), vec!["a"]);
    assert_eq!(accepted_paths("head --lines 5 a"), vec!["a"]);
    assert_eq!(accepted_paths("ls --color=auto -- -x"), vec!["-x"]);
    assert_eq!(accepted_paths("grep -rn foo src"), vec!["src"]);
    assert_eq!(accepted_paths("grep -e foo src lib"), vec!["src", "lib"]);
    assert_eq!(
        accepted_paths("grep -f pats.txt src"),
        vec!["pats.txt", "src"]
    );
    assert_eq!(
        accepted_paths("grep -fpats.txt src"),
        vec!["pats.txt", "src"]
    );
    assert_eq!(accepted_paths("sort --random-source=r x"), vec!["r", "x"]);
    assert_eq!(
        accepted_paths("git blame --contents=c.txt f"),
        vec!["c.txt", "f"]
    );
    assert_eq!(accepted_paths("git diff -Oorder.txt"), vec!["order.txt"]);
    assert_eq!(
        accepted_paths("find src -newer ref -name x"),
        vec!["src", "ref"]
    );
    assert_eq!(
        accepted_paths("jq -r .name package.json"),
        vec!["package.json"]
    );
    assert_eq!(accepted_paths("jq --arg a b '$a' f.json"), vec!["f.json"]);
}

#[test]
fn abbreviations_resolve_like_getopt() {
    // Unique prefixes of allowed options are accepted...
    assert!(fit(&argv("sort --rev x")).accepted());
    assert!(fit(&argv("ls --almost x")).accepted());
    // ...prefixes of options that are not allowed, or of several, are not.
    for no in [
        "sort --out=x in",
        "sort --o x in",
        "sort --comp=sh in",
        "sort --compress-p=sh in",
        "sort --files0=list",
        "wc --files0-f=l",
        "ls --de",
        "ls --dereference",
        "grep --dereference-r x .",
        "sort --s x",
    ] {
        assert!(fit(&argv(no)).rejected(), "{no}");
    }
    // Without a complete option list, only full spellings count.
    assert!(fit(&argv("rg --fil x")).rejected());
    assert!(fit(&argv("git diff --out=x")).rejected());
    assert!(fit(&argv("git diff --stat")).accepted());
}

#[test]
fn programs_outputs_and_unknowns_are_rejected() {
    for no in [
        "sort -o out in",
        "sort -uo out in",
        "sort --output=out in",
        "sort --compress-program=sh in",
        "sort -T /tmp in",
        "rg --pre ./x y",
        "rg --pre=./x y",
        "rg --hostname-bin=./x y",
        "rg -z x",
        "rg -L x",
        "rg --hidden x",
        "fd -x rm",
        "fd --exec rm",
        "fd -X rm",
        "find . -exec rm {} ;",
        "find . -execdir rm {} ;",
        "find . -ok rm {} ;",
        "find . -delete",
        "find . -fprint out",
        "find . -fls out",
        "find -L .",
        "find . -follow",
        "git log --output=x",
        "git log --ext-diff",
        "git log --textconv",
        "git log --show-signature",
        "git diff --no-index a b",
        "git grep -O x",
        "git grep --open-files-in-pager x",
        "git -C .. status",
        "git --git-dir=x status",
        "git --work-tree=x status",
        "git --exec-path=x status",
        "git -p log",
        "git branch newbranch",
        "git branch -D main",
        "git tag v1",
        "git config core.pager x",
        "git config --global core.pager x",
        "git config --file=x --list",
        "git cat-file --textconv HEAD:x",
        "file -C",
        "file -z x",
        "date -s 2020-01-01",
        "date 0101",
        "tree -o out",
        "uniq in out",
        "hostname newname",
        "diff -r a b",
        "du -L .",
        "grep -R x .",
        "md5sum -c sums",
        "command git",
        "cargo build",
        "cargo --config x build",
        "python3 -I",
        "jq -f prog.jq",
        "jq --rawfile a /etc/passwd .",
        "jq -L lib .",
        "ls -I",
    ] {
        let result = fit(&argv(no));
        assert!(
            !result.accepted(),
            "{no} should not be read-only: {result:?}"
        );
    }
    // An unknown subcommand is another command, not a rejection.
    assert_eq!(fit(&argv("cargo test")), Fit::Ungoverned);
    assert_eq!(fit(&argv("git push")), Fit::Ungoverned);
    assert_eq!(fit(&argv("python3 x.py")), Fit::Ungoverned);
    assert_eq!(fit(&argv("mytool x")), Fit::Ungoverned);
}

#[test]
fn jq_filters_that_read_more_than_their_input() {
    for no in [
        "env",
        "$ENV",
        "$ ENV.HOME",
        "\"\\(env)\"",
        ". | env",
        "..env",
        "input_filename",
        "import \"x\" as x; .",
        "include \"x\"; .",
        "$__loc__",
        "get_search_list",
    ] {
        assert!(jq_filter_problem(no).is_some(), "{no}");
    }
    for yes in [".env", ".environment", ".a.env.b", ".[] | .name", "map(.x)"] {
        assert_eq!(jq_filter_problem(yes), None, "{yes}");
    }
}

#[test]
fn option_values_and_operands_where_none_are_allowed() {
    assert!(fit(&argv("pwd x")).rejected());
    assert!(fit(&argv("ls --color=always --all=x")).rejected());
    assert!(fit(&argv("git status extra")).accepted());
    assert!(fit(&argv("git branch --list 'feat*'")).accepted());
    assert!(fit(&argv("git tag -l 'v*'")).accepted());
    assert!(fit(&argv("command -v git")).accepted());
    assert!(fit(&argv("date +%s")).accepted());
    assert!(fit(&argv("echo -x --anything")).accepted());
    assert!(fit(&argv("head -n")).rejected());
}

#[test]
fn invalid_tables_are_refused() {
    for text in [
        "[command.x]\nsummary = \"\"\noptions = \"a\"\n",
        "[command.x]\nsummary = \"\"\noptions = \"-ab\"\n",
        "[command.x]\nsummary = \"\"\noptions = \"-a=nope\"\n",
        "[command.x]\nsummary = \"\"\noptions = \"@missing\"\n",
        "[command.x]\nsummary = \"\"\noperands = \"files\"\n",
        "[command.x]\nsummary = \"\"\noptions = \"--a\"\nknown = \"--a\"\n",
        "[command.x]\nsummary = \"\"\nunknown = 1\n",
    ] {
        assert!(Grammars::parse(text).is_err(), "{text}");
    }
}
