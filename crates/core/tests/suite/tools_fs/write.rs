//! `write`: creation, the read-before-write guard, kept conventions, preview.

use super::*;

#[tokio::test]
async fn write_creates_files_and_nested_directories() {
    let fx = Fixture::new();
    let out = fx
        .write(json!({ "file_path": "a/b/c/new.rs", "content": "fn main() {}\n" }))
        .await
        .unwrap();
    let path = fx.ws.join("a/b/c/new.rs");
    assert_eq!(fs::read_to_string(&path).unwrap(), "fn main() {}\n");
    assert!(
        out.text
            .starts_with("Created a/b/c/new.rs (1 line, 13 bytes)."),
        "{}",
        out.text
    );
    assert_eq!(out.data["created"], json!(true));
    assert_eq!(diff_artifact(&out), (None, "fn main() {}\n".to_owned()));
    assert_eq!(location(&out), (path.display().to_string(), Some(1)));
    // Written by this session: an immediate overwrite needs no read.
    let again = fx
        .write(json!({ "file_path": "a/b/c/new.rs", "content": "fn main() { run(); }\n" }))
        .await
        .unwrap();
    assert!(
        again
            .text
            .contains("-fn main() {}\n+fn main() { run(); }\n"),
        "{}",
        again.text
    );
    let dir = failed(
        fx.write(json!({ "file_path": "a/b", "content": "x" }))
            .await,
    );
    assert!(dir.contains("is a directory"), "{dir}");
}

#[tokio::test]
async fn write_over_an_unread_or_changed_file_is_refused() {
    let fx = Fixture::new();
    let path = fx.put("notes.md", "original\n");
    let unread = failed(
        fx.write(json!({ "file_path": "notes.md", "content": "new\n" }))
            .await,
    );
    assert!(
        unread.contains("has not been read in this session"),
        "{unread}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "original\n");

    fx.read_ok("notes.md").await;
    fs::write(&path, "changed by someone else\n").unwrap();
    let stale = failed(
        fx.write(json!({ "file_path": "notes.md", "content": "new\n" }))
            .await,
    );
    assert!(
        stale.contains("changed on disk since you last read it"),
        "{stale}"
    );
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "changed by someone else\n"
    );

    fx.read_ok("notes.md").await;
    let out = fx
        .write(json!({ "file_path": "notes.md", "content": "new\n" }))
        .await
        .unwrap();
    assert!(out.text.starts_with("Overwrote notes.md"), "{}", out.text);
    assert!(
        out.text.contains(
            "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-changed by someone else\n+new\n"
        ),
        "{}",
        out.text
    );
    assert_eq!(
        diff_artifact(&out),
        (Some("changed by someone else\n".into()), "new\n".into())
    );
}

#[tokio::test]
async fn write_keeps_crlf_bom_and_mode() {
    let fx = Fixture::new();
    let path = fx.put("win.txt", b"\xEF\xBB\xBFone\r\ntwo\r\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    fx.read_ok("win.txt").await;
    let out = fx
        .write(json!({ "file_path": "win.txt", "content": "uno\ndos\ntres\n" }))
        .await
        .unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        b"\xEF\xBB\xBFuno\r\ndos\r\ntres\r\n"
    );
    assert_eq!(mode(&path), 0o755);
    assert!(
        out.text.contains("Kept the file's CRLF line endings"),
        "{}",
        out.text
    );
    assert!(out.text.contains("byte-order mark"), "{}", out.text);
}

#[tokio::test]
async fn write_preview_is_the_diff_and_writes_nothing() {
    let fx = Fixture::new();
    let path = fx.put("p.txt", "old\n");
    fx.read_ok("p.txt").await;
    let args = json!({ "file_path": "p.txt", "content": "new\n" });
    let preview = fx.write.preview(&args, &fx.ctx).await.unwrap();
    assert_eq!(
        preview,
        Some(Preview::Diff(keel_diff::AcpDiff {
            path: path.display().to_string(),
            old_text: Some("old\n".into()),
            new_text: "new\n".into(),
            bounded: false,
        }))
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
    let created = fx
        .write
        .preview(
            &json!({ "file_path": "q/new.txt", "content": "x\n" }),
            &fx.ctx,
        )
        .await
        .unwrap();
    assert!(matches!(
        created,
        Some(Preview::Diff(keel_diff::AcpDiff { old_text: None, .. }))
    ));
    assert!(!fx.ws.join("q").exists());
}
