//! `edit`: replacement, failures that write nothing, encodings, preview, temp files.

use super::*;

#[tokio::test]
async fn edit_replaces_and_returns_the_diff() {
    let fx = Fixture::new();
    let path = fx.put("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    fx.read_ok("src/lib.rs").await;
    let out = fx
        .edit(json!({ "file_path": "src/lib.rs", "old_string": "fn b() {}", "new_string": "fn b() { a(); }" }))
        .await
        .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "fn a() {}\nfn b() { a(); }\nfn c() {}\n"
    );
    assert!(
        out.text
            .starts_with("Edited src/lib.rs: replaced 1 occurrence (+1 −1 lines)."),
        "{}",
        out.text
    );
    assert!(
        out.text
            .contains("@@ -1,3 +1,3 @@\n fn a() {}\n-fn b() {}\n+fn b() { a(); }\n fn c() {}\n"),
        "{}",
        out.text
    );
    assert_eq!(out.data["replacements"], json!(1));
    let (old, new) = diff_artifact(&out);
    assert_eq!(old.as_deref(), Some("fn a() {}\nfn b() {}\nfn c() {}\n"));
    assert_eq!(new, "fn a() {}\nfn b() { a(); }\nfn c() {}\n");
    assert_eq!(location(&out), (path.display().to_string(), Some(2)));

    // The edit recorded the new state: a second edit needs no new read.
    fx.edit(json!({ "file_path": "src/lib.rs", "old_string": "fn c() {}", "new_string": "" }))
        .await
        .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "fn a() {}\nfn b() { a(); }\n\n"
    );
}

#[tokio::test]
async fn edit_failures_explain_and_write_nothing() {
    let fx = Fixture::new();
    let body = "let x = 1;\nlet y = 2;\nlet x = 1;\n    if ready {\n        go();\n    }\n";
    let path = fx.put("m.rs", body);
    let edit =
        |old: &str, new: &str| json!({ "file_path": "m.rs", "old_string": old, "new_string": new });

    let unread = failed(fx.edit(edit("let y = 2;", "let y = 3;")).await);
    assert!(
        unread.contains("has not been read in this session"),
        "{unread}"
    );
    fx.read_ok("m.rs").await;

    let ambiguous = failed(fx.edit(edit("let x = 1;", "let x = 9;")).await);
    assert!(
        ambiguous.contains("occurs 2 times") && ambiguous.contains("lines 1, 3"),
        "{ambiguous}"
    );
    assert!(ambiguous.contains("replace_all"), "{ambiguous}");

    let absent = failed(fx.edit(edit("let z = 0;", "let z = 1;")).await);
    assert!(
        absent.contains("old_string was not found in m.rs"),
        "{absent}"
    );
    let near = failed(
        fx.edit(edit("if ready {\n  go();\n}", "if ready { stop(); }"))
            .await,
    );
    assert!(
        near.contains("whitespace and indentation are ignored starts at line 4"),
        "{near}"
    );
    let numbered = failed(fx.edit(edit("     2\tlet y = 2;", "let y = 3;")).await);
    assert!(numbered.contains("line numbers"), "{numbered}");

    let same = failed(fx.edit(edit("let y = 2;", "let y = 2;")).await);
    assert!(same.contains("identical"), "{same}");
    let empty = failed(fx.edit(edit("", "prefix")).await);
    assert!(
        empty.contains("old_string is empty") && empty.contains("`write`"),
        "{empty}"
    );
    let missing = failed(
        fx.edit(json!({ "file_path": "gone.rs", "old_string": "a", "new_string": "b" }))
            .await,
    );
    assert!(missing.contains("gone.rs does not exist"), "{missing}");
    fs::create_dir(fx.ws.join("dir")).unwrap();
    let dir = failed(
        fx.edit(json!({ "file_path": "dir", "old_string": "a", "new_string": "b" }))
            .await,
    );
    assert!(dir.contains("is a directory"), "{dir}");

    assert_eq!(fs::read_to_string(&path).unwrap(), body);
}

#[tokio::test]
async fn stale_edit_is_refused_and_nothing_is_written() {
    let fx = Fixture::new();
    let path = fx.put("s.txt", "alpha\nbeta\n");
    fx.read_ok("s.txt").await;
    fs::write(&path, "alpha\nbeta\ngamma\n").unwrap();
    let stale = failed(
        fx.edit(json!({ "file_path": "s.txt", "old_string": "beta", "new_string": "BETA" }))
            .await,
    );
    assert!(
        stale.contains("changed on disk since you last read it"),
        "{stale}"
    );
    assert!(stale.contains("Nothing was written"), "{stale}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "alpha\nbeta\ngamma\n");
}

#[tokio::test]
async fn replace_all_counts_occurrences() {
    let fx = Fixture::new();
    let path = fx.put(
        "r.py",
        "old_name = 1\nprint(old_name)\nold_name += old_name\n",
    );
    fx.read_ok("r.py").await;
    let out = fx
        .edit(json!({ "file_path": "r.py", "old_string": "old_name", "new_string": "new_name", "replace_all": true }))
        .await
        .unwrap();
    assert_eq!(out.data["replacements"], json!(4));
    assert!(
        out.text.contains("replaced 4 occurrences (+3 −3 lines)"),
        "{}",
        out.text
    );
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "new_name = 1\nprint(new_name)\nnew_name += new_name\n"
    );
}

#[tokio::test]
async fn edit_keeps_crlf_bom_and_mode() {
    let fx = Fixture::new();
    let path = fx.put(
        "run.sh",
        b"\xEF\xBB\xBF#!/bin/sh\r\necho one\r\necho two\r\n",
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    fx.read_ok("run.sh").await;
    let out = fx
        .edit(json!({ "file_path": "run.sh", "old_string": "echo one\necho two\n", "new_string": "echo 1\necho 2\necho 3\n" }))
        .await
        .unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        b"\xEF\xBB\xBF#!/bin/sh\r\necho 1\r\necho 2\r\necho 3\r\n"
    );
    assert_eq!(mode(&path), 0o755);
    assert!(out.text.contains("CRLF line endings kept"), "{}", out.text);
    assert_eq!(location(&out).1, Some(2));
}

#[tokio::test]
async fn edit_refuses_binary_and_non_utf8_files() {
    let fx = Fixture::new();
    let binary = fx.put("blob.bin", b"abc\0def\n");
    let latin1 = fx.put("latin1.txt", b"caf\xE9\nna\xEFve\n");
    // read refuses the binary file but records that the session looked at it.
    failed(fx.read(json!({ "file_path": "blob.bin" })).await);
    let out = failed(
        fx.edit(json!({ "file_path": "blob.bin", "old_string": "abc", "new_string": "xyz" }))
            .await,
    );
    assert!(out.contains("binary file"), "{out}");
    let shown = fx.read_ok("latin1.txt").await;
    assert!(shown.text.contains("caf\u{FFFD}") && shown.text.contains("not valid UTF-8"));
    let out = failed(
        fx.edit(json!({ "file_path": "latin1.txt", "old_string": "na", "new_string": "NA" }))
            .await,
    );
    assert!(
        out.contains("not valid UTF-8") && out.contains("line 1"),
        "{out}"
    );
    assert_eq!(fs::read(&binary).unwrap(), b"abc\0def\n");
    assert_eq!(fs::read(&latin1).unwrap(), b"caf\xE9\nna\xEFve\n");
}

#[tokio::test]
async fn edit_with_empty_old_string_creates_a_file() {
    let fx = Fixture::new();
    let out = fx
        .edit(json!({ "file_path": "new/dir/x.txt", "old_string": "", "new_string": "hello\n" }))
        .await
        .unwrap();
    assert_eq!(
        fs::read_to_string(fx.ws.join("new/dir/x.txt")).unwrap(),
        "hello\n"
    );
    assert!(
        out.text.starts_with("Created new/dir/x.txt"),
        "{}",
        out.text
    );
    assert_eq!(diff_artifact(&out).0, None);
}

#[tokio::test]
async fn edit_preview_is_the_diff_and_writes_nothing() {
    let fx = Fixture::new();
    let path = fx.put("v.txt", "a\nb\n");
    fx.read_ok("v.txt").await;
    let args = json!({ "file_path": "v.txt", "old_string": "b", "new_string": "c" });
    let preview = fx.edit.preview(&args, &fx.ctx).await.unwrap();
    assert_eq!(
        preview,
        Some(Preview::Diff(keel_diff::AcpDiff {
            path: path.display().to_string(),
            old_text: Some("a\nb\n".into()),
            new_text: "a\nc\n".into(),
            bounded: false,
        }))
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "a\nb\n");
    let ambiguous = json!({ "file_path": "v.txt", "old_string": "\n", "new_string": "" });
    assert!(fx.edit.preview(&ambiguous, &fx.ctx).await.is_err());
}

#[tokio::test]
async fn writes_leave_no_temporary_files() {
    let fx = Fixture::new();
    fx.put("keep.txt", "k\n");
    fx.write(json!({ "file_path": "one.txt", "content": "v1\n" }))
        .await
        .unwrap();
    for i in 1..5 {
        fx.edit(json!({ "file_path": "one.txt", "old_string": format!("v{i}"), "new_string": format!("v{}", i + 1) }))
            .await
            .unwrap();
    }
    assert_eq!(fs::read_to_string(fx.ws.join("one.txt")).unwrap(), "v5\n");
    fx.write(json!({ "file_path": "one.txt", "content": "final\n" }))
        .await
        .unwrap();
    let mut names: Vec<String> = fs::read_dir(&fx.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["keep.txt", "one.txt"]);
    assert_eq!(
        fs::read_to_string(fx.ws.join("one.txt")).unwrap(),
        "final\n"
    );
}
