//! The search walk: which files it lists (against ripgrep's own walker) and what one call costs
//! the file system (the runtime's tally).

use super::*;

#[tokio::test]
async fn ignore_files_above_a_repository_root_do_not_apply() {
    // The temp dir above the workspace ignores `*.rs` (a home directory kept in git often
    // ignores `*`); the workspace is its own repository, so that rule is not its business.
    let ws = Workspace::new();
    std::fs::write(ws.root.parent().unwrap().join(".gitignore"), "*.rs\n").unwrap();
    ws.file("src/lib.rs", "fn needle() {}\n");
    let out = ws.glob(json!({"pattern": "**/*.rs"})).await.unwrap();
    assert!(out.text.starts_with("No files match"), "{}", out.text);
    std::fs::create_dir(ws.root.join(".git")).unwrap();
    ws.file(".gitignore", "/ignored/\n");
    ws.file("ignored/x.rs", "fn needle() {}\n");
    let out = ws.glob(json!({"pattern": "**/*.rs"})).await.unwrap();
    assert_eq!(out.text, "src/lib.rs");
    let out = ws
        .grep(json!({"pattern": "needle", "path": "src"}))
        .await
        .unwrap();
    assert_eq!(out.text, "src/lib.rs");
}

/// Every file under the workspace, as ripgrep's own walker (the `ignore` crate, with the
/// settings Keel's searches used before their walk was their own) lists them.
fn ignore_crate_files(
    ws: &Workspace,
    filters: impl FnOnce(&mut ignore::WalkBuilder),
) -> Vec<String> {
    let mut builder = ws.ctx.runtime.walker(&ws.root).unwrap();
    filters(&mut builder);
    let mut files: Vec<String> = builder
        .build()
        .flatten()
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .map(|entry| {
            entry
                .path()
                .strip_prefix(&ws.root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    files
}

/// A tree that exercises the ignore rules: negations, directory-only and rooted patterns,
/// `.ignore` over `.gitignore`, a nested `.gitignore`, hidden names re-included by a rule,
/// `.git/info/exclude`, a nested repository, files and directories by symlink.
fn ignore_tree(ws: &Workspace, repository: bool) {
    for (path, text) in [
        (
            ".gitignore",
            "*.log\n!keep.log\nbuild/\n/rooted.txt\n!.shown\n",
        ),
        ("a.log", "x"),
        ("keep.log", "x"),
        ("build/x.rs", "x"),
        ("sub/build/y.rs", "x"),
        ("rooted.txt", "x"),
        ("sub/rooted.txt", "x"),
        (".shown", "x"),
        (".hidden", "x"),
        (".hiddendir/z.rs", "x"),
        ("sub/.gitignore", "!a.log\n*.tmp\n!by_ignore.rs\n"),
        ("sub/.ignore", "by_ignore.rs\n"),
        ("sub/a.log", "x"),
        ("sub/t.tmp", "x"),
        ("sub/by_ignore.rs", "x"),
        ("excluded.rs", "x"),
        ("nested/a.log", "x"),
        ("nested/b.rs", "x"),
        ("deep/er/est/file.rs", "x"),
        ("deep/er/notes.md", "x"),
        ("src/main.rs", "x"),
    ] {
        ws.file(path, text);
    }
    std::os::unix::fs::symlink(ws.root.join("src"), ws.root.join("linked_dir")).unwrap();
    std::os::unix::fs::symlink(ws.root.join("src/main.rs"), ws.root.join("linked.rs")).unwrap();
    if repository {
        ws.file(".git/info/exclude", "excluded.rs\n");
        ws.file("nested/.git/HEAD", "ref: refs/heads/main\n");
    }
}

/// The search walk keeps ripgrep's ignore semantics: `glob` lists, and `grep` searches, exactly
/// the files the `ignore` crate's walker yields, inside a repository and outside one, with and
/// without the call's own glob and type filters.
#[tokio::test]
async fn the_search_walk_lists_what_ripgreps_walker_lists() {
    for repository in [true, false] {
        let ws = Workspace::new();
        ignore_tree(&ws, repository);
        let expected = ignore_crate_files(&ws, |_| {});
        assert!(expected.contains(&"sub/a.log".to_owned()), "{expected:?}");
        assert!(expected.contains(&".shown".to_owned()), "{expected:?}");
        assert!(
            !expected.contains(&"sub/by_ignore.rs".to_owned()),
            "{expected:?}"
        );
        assert_eq!(
            expected.contains(&"excluded.rs".to_owned()),
            !repository,
            "{expected:?}"
        );
        assert_eq!(
            expected.contains(&"nested/a.log".to_owned()),
            repository,
            "{expected:?}"
        );
        let listed = ws.glob(json!({"pattern": "**"})).await.unwrap();
        assert_eq!(lines(&listed.text), expected, "repository: {repository}");
        let searched = ws.grep(json!({"pattern": "x"})).await.unwrap();
        assert_eq!(lines(&searched.text), expected, "repository: {repository}");

        for glob in ["*.log", "!sub/**", ".hid*"] {
            let expected = ignore_crate_files(&ws, |walk| {
                let mut builder = ignore::overrides::OverrideBuilder::new(&ws.root);
                builder.add(glob).unwrap();
                walk.overrides(builder.build().unwrap());
            });
            let searched = ws
                .grep(json!({"pattern": "x", "glob": glob}))
                .await
                .unwrap();
            let shown = if searched.text.starts_with("No matches") {
                Vec::new()
            } else {
                lines(&searched.text)
            };
            assert_eq!(shown, expected, "repository: {repository}, glob {glob}");
        }
        let types = {
            let mut builder = ignore::types::TypesBuilder::new();
            builder.add_defaults().select("rust");
            builder.build().unwrap()
        };
        let expected = ignore_crate_files(&ws, |walk| {
            walk.types(types);
        });
        let searched = ws
            .grep(json!({"pattern": "x", "type": "rust"}))
            .await
            .unwrap();
        assert_eq!(lines(&searched.text), expected, "repository: {repository}");
        assert!(
            !expected.iter().any(|f| f.starts_with("linked")),
            "{expected:?}"
        );
    }
}

/// Counts the opens and stats of one grep call over the workspace.
async fn grep_costs(ws: &Workspace) -> (usize, usize, usize) {
    use keel_core::runtime::tally::{self, Tally};
    let counter = Tally::new();
    let out = tally::scope(
        counter.clone(),
        ws.grep(json!({"pattern": "needle", "output_mode": "count"})),
    )
    .await
    .unwrap();
    let counts = counter.counts();
    let files: usize = out.data["files"].as_u64().unwrap() as usize;
    (counts.open, counts.stat, files)
}

/// grep costs one open and one stat per file it searches (ripgrep's cost): each file is opened
/// once relative to its directory's descriptor, and its type and links come from that
/// descriptor. Directories cost one open each and no stat; an ignore file one open.
#[tokio::test]
async fn grep_opens_and_stats_each_file_once() {
    let ws = Workspace::new();
    ws.file(".gitignore", "*.skip\n");
    let dirs = ["a", "a/b", "c", "c/d/e"];
    for dir in dirs {
        for i in 0..10 {
            ws.file(&format!("{dir}/f{i}.txt"), "one needle\n");
        }
        ws.file(&format!("{dir}/ignored.skip"), "needle\n");
    }
    let (opens, stats, files) = grep_costs(&ws).await;
    assert_eq!(files, 40);
    // The workspace root's directories and ignore file, and the path of the call resolved:
    // a handful per call, whatever the number of files.
    let depth = ws.root.components().count();
    let per_call = 2 * depth + 8;
    let directories = dirs.len() + 3;
    assert!(
        opens <= files + directories + 1 + per_call,
        "{opens} opens for {files} files in {directories} directories"
    );
    assert!(stats <= files + per_call, "{stats} stats for {files} files");
    // Forty more files in the same directories cost forty opens and forty stats more.
    for dir in dirs {
        for i in 10..20 {
            ws.file(&format!("{dir}/f{i}.txt"), "one needle\n");
        }
    }
    let (more_opens, more_stats, more_files) = grep_costs(&ws).await;
    assert_eq!(more_files, 80);
    eprintln!(
        "grep: {opens} opens, {stats} stats for {files} files; {more_opens}, {more_stats} for {more_files}"
    );
    assert!(
        more_opens - opens <= 40,
        "40 more files cost {} more opens",
        more_opens - opens
    );
    assert!(
        more_stats - stats <= 40,
        "40 more files cost {} more stats",
        more_stats - stats
    );
}
