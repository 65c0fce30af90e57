//! `read`, `write` and `edit` through the full tool path (`Typed::wrap(..).execute(json, ctx)`,
//! so the schema check runs) on real files in a temporary workspace.
//!
//! Layout of every fixture: `<tmp>/ws` is the workspace, `<tmp>/outside` a directory outside
//! it (holding `secret.txt`), `<tmp>/scratch` the session scratch directory.

#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "fixture helpers outside #[test] functions fail loudly too"
)]

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use keel_core::capability::RequirementSet;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{
    Artifact, DynTool, Envelope, Limits, Preview, ProgressSink, SessionState, Subject, Tool,
    ToolContext, ToolError, ToolKind, ToolOutput, Typed,
};
use keel_core::tools::edit::EditTool;
use keel_core::tools::read::ReadTool;
use keel_core::tools::write::WriteTool;

const SECRET: &str = "outside secret\n";

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    ctx: ToolContext,
    read: Arc<dyn DynTool>,
    write: Arc<dyn DynTool>,
    edit: Arc<dyn DynTool>,
}

impl Fixture {
    fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    fn with_limits(limits: Limits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        let scratch = base.join("scratch");
        fs::create_dir_all(&ws).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), SECRET).unwrap();
        let runtime = Runtime::new(RuntimeConfig {
            roots: vec![ws.clone()],
            requirements: RequirementSet::fs_read_write(
                &["{workspace}/**", "{session}/**"],
                &["{workspace}/**"],
            ),
            scratch_dir: scratch.clone(),
            ..RuntimeConfig::default()
        })
        .unwrap();
        let ctx = ToolContext {
            runtime,
            session: Arc::new(SessionState::new("s1", scratch, limits, false)),
            call_id: "call-1".into(),
            cancel: CancellationToken::new(),
            progress: ProgressSink::default(),
        };
        Self {
            _dir: dir,
            ws,
            outside,
            ctx,
            read: Typed::wrap(ReadTool).unwrap(),
            write: Typed::wrap(WriteTool).unwrap(),
            edit: Typed::wrap(EditTool).unwrap(),
        }
    }

    fn put(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.ws.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, content).unwrap();
        path
    }

    async fn read(&self, args: Value) -> Result<ToolOutput, ToolError> {
        self.read.execute(args, &self.ctx).await
    }

    async fn write(&self, args: Value) -> Result<ToolOutput, ToolError> {
        self.write.execute(args, &self.ctx).await
    }

    async fn edit(&self, args: Value) -> Result<ToolOutput, ToolError> {
        self.edit.execute(args, &self.ctx).await
    }

    async fn read_ok(&self, path: &str) -> ToolOutput {
        self.read(json!({ "file_path": path })).await.unwrap()
    }

    fn secret_untouched(&self) {
        assert_eq!(
            fs::read_to_string(self.outside.join("secret.txt")).unwrap(),
            SECRET
        );
        let entries: Vec<_> = fs::read_dir(&self.outside).unwrap().collect();
        assert_eq!(entries.len(), 1, "nothing new outside the workspace");
    }
}

fn failed(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Failed(message)) => message,
        other => panic!("expected ToolError::Failed, got {other:?}"),
    }
}

fn refused(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Refused(refusal)) => {
            assert!(
                refusal.reason.contains("outside the allowed scope"),
                "{refusal}"
            );
            refusal.reason
        }
        other => panic!("expected a capability refusal, got {other:?}"),
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn diff_artifact(output: &ToolOutput) -> (Option<String>, String) {
    output
        .artifacts
        .iter()
        .find_map(|a| match a {
            Artifact::Diff {
                old_text, new_text, ..
            } => Some((old_text.clone(), new_text.clone())),
            _ => None,
        })
        .expect("a diff artifact")
}

fn location(output: &ToolOutput) -> (String, Option<u32>) {
    output
        .artifacts
        .iter()
        .find_map(|a| match a {
            Artifact::Location { path, line } => Some((path.clone(), *line)),
            _ => None,
        })
        .expect("a location artifact")
}

// ---- specs and schemas ----

#[test]
fn specs_declare_kind_subject_requirements_and_mutability() {
    let read = ReadTool.spec();
    assert_eq!(read.kind, ToolKind::Read);
    assert!(!read.mutating);
    assert_eq!(read.requires.fs.read, ["{workspace}/**", "{session}/**"]);
    assert!(read.requires.fs.write.is_empty());
    for spec in [WriteTool.spec(), EditTool.spec()] {
        assert_eq!(spec.kind, ToolKind::Edit);
        assert!(spec.mutating);
        assert_eq!(spec.requires.fs.read, ["{workspace}/**"]);
        assert_eq!(spec.requires.fs.write, ["{workspace}/**"]);
    }
    for spec in [read, WriteTool.spec(), EditTool.spec()] {
        assert_eq!(spec.subject, Subject::Path(Some("file_path".into())));
        assert_eq!(spec.parameters["additionalProperties"], json!(false));
        assert_eq!(spec.parameters["required"][0], json!("file_path"));
        let description = spec.parameters["properties"]["file_path"]["description"]
            .as_str()
            .unwrap()
            .replace('\n', " ");
        assert!(
            description.contains("relative to the workspace root"),
            "{description}"
        );
    }
    let read = ReadTool.spec();
    assert_eq!(read.parameters["properties"]["limit"]["minimum"], json!(1));
    assert_eq!(
        EditTool.spec().parameters["properties"]["replace_all"]["default"],
        json!(false)
    );
}

#[tokio::test]
async fn schema_violations_are_invalid_argument_envelopes() {
    let fx = Fixture::new();
    fx.put("a.txt", "a\n");
    let cases: [(&Arc<dyn DynTool>, Value); 13] = [
        (&fx.read, json!({})),
        (&fx.read, json!({ "file_path": 5 })),
        (&fx.read, json!({ "file_path": "a.txt", "offset": "2" })),
        (&fx.read, json!({ "file_path": "a.txt", "limit": 0 })),
        (&fx.read, json!({ "file_path": "a.txt", "offset": 0 })),
        (&fx.read, json!({ "file_path": "a.txt", "path": "a.txt" })),
        (&fx.write, json!({ "file_path": "b.txt" })),
        (&fx.write, json!({ "file_path": "b.txt", "content": 1 })),
        (
            &fx.write,
            json!({ "file_path": "b.txt", "content": "x", "mode": 420 }),
        ),
        (&fx.edit, json!({ "file_path": "a.txt", "new_string": "b" })),
        (
            &fx.edit,
            json!({ "file_path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": "yes" }),
        ),
        (
            &fx.edit,
            json!({ "file_path": "a.txt", "old_string": "a", "new_string": "b", "extra": 1 }),
        ),
        (&fx.edit, json!(["a.txt", "a", "b"])),
    ];
    for (tool, args) in cases {
        let result = tool.execute(args.clone(), &fx.ctx).await;
        assert!(
            matches!(&result, Err(ToolError::InvalidArguments { tool: id, .. }) if *id == tool.spec().id),
            "{args}: {result:?}"
        );
        let envelope = Envelope::from_result(result, std::time::Duration::ZERO);
        assert!(envelope.is_error());
        assert!(
            envelope
                .for_model()
                .starts_with("Error: invalid arguments for `"),
            "{}",
            envelope.for_model()
        );
    }
    assert!(!fx.ws.join("b.txt").exists());
    assert_eq!(fs::read_to_string(fx.ws.join("a.txt")).unwrap(), "a\n");
}

// ---- read ----

#[tokio::test]
async fn read_numbers_lines_and_honours_offset_and_limit() {
    let fx = Fixture::new();
    let body: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    let path = fx.put("src/lines.txt", &body);

    let all = fx.read_ok("src/lines.txt").await;
    assert!(
        all.text.starts_with("     1\tline 1\n     2\tline 2\n"),
        "{}",
        all.text
    );
    assert!(all.text.ends_with("    12\tline 12"), "{}", all.text);
    assert_eq!(all.data["total_lines"], json!(12));
    assert_eq!(
        (all.data["start_line"].clone(), all.data["end_line"].clone()),
        (json!(1), json!(12))
    );
    assert_eq!(location(&all), (path.display().to_string(), Some(1)));

    let window = fx
        .read(json!({ "file_path": path.display().to_string(), "offset": 10, "limit": 2 }))
        .await
        .unwrap();
    assert_eq!(
        window.text,
        "    10\tline 10\n    11\tline 11\n\n[Showing lines 10-11 of 12. Call read with offset=12 to read more.]"
    );
    assert_eq!(window.data["end_line"], json!(11));
    assert_eq!(location(&window).1, Some(10));

    let past = failed(
        fx.read(json!({ "file_path": "src/lines.txt", "offset": 13 }))
            .await,
    );
    assert!(
        past.contains("past the end") && past.contains("12 lines"),
        "{past}"
    );
}

#[tokio::test]
async fn read_reports_missing_files_directories_and_empty_files() {
    let fx = Fixture::new();
    let missing = failed(fx.read(json!({ "file_path": "nope.rs" })).await);
    assert!(missing.contains("nope.rs does not exist"), "{missing}");

    fs::create_dir_all(fx.ws.join("src")).unwrap();
    let dir = failed(fx.read(json!({ "file_path": "src" })).await);
    assert!(
        dir.contains("is a directory") && dir.contains("glob"),
        "{dir}"
    );

    fx.put("empty.txt", "");
    let empty = fx.read_ok("empty.txt").await;
    assert!(empty.text.contains("empty.txt is empty"), "{}", empty.text);
    assert_eq!(empty.data["total_lines"], json!(0));
}

#[tokio::test]
async fn read_refuses_binary_and_cuts_long_lines() {
    let fx = Fixture::new();
    fx.put("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0");
    let binary = failed(fx.read(json!({ "file_path": "image.png" })).await);
    assert!(
        binary.contains("binary file") && binary.contains("NUL"),
        "{binary}"
    );

    fx.put("long.txt", format!("short\n{}\nend\n", "x".repeat(5000)));
    let long = fx.read_ok("long.txt").await;
    let second = long.text.lines().nth(1).unwrap();
    assert!(second.starts_with("     2\txxxx"), "{second}");
    assert!(second.contains("[line cut: 5000 bytes in full"), "{second}");
    assert_eq!(second.matches('x').count(), 2000);
    assert!(long.text.contains("     3\tend"));
}

#[tokio::test]
async fn read_past_the_byte_cap_returns_the_head_and_says_how_to_continue() {
    let fx = Fixture::new();
    // 3000 lines of 100 bytes: the 200 KB cap stops the output before the 2000-line default
    // limit does (at about 1900 numbered lines).
    let body: String = (1..=3000).map(|i| format!("{i:0>99}\n")).collect();
    fx.put("big.txt", &body);
    let out = fx.read_ok("big.txt").await;
    assert_eq!(out.data["truncated"], json!(true));
    let end = out.data["end_line"].as_u64().unwrap();
    assert!((1800..2000).contains(&end), "{end}");
    let (head, notice) = out.text.split_once("\n\n[").unwrap();
    assert!(head.len() <= 200 * 1024);
    assert_eq!(head.lines().count() as u64, end);
    assert!(notice.contains("Output capped at 200 KB"), "{notice}");
    assert!(notice.contains(&format!("offset={}", end + 1)), "{notice}");
    assert_eq!(out.data["total_lines"], json!(3000));
    let envelope = Envelope::from_result(Ok(out), std::time::Duration::ZERO);
    assert!(envelope.for_model().contains("truncated: true"));
}

#[tokio::test]
async fn read_of_a_large_file_goes_by_ranges() {
    let fx = Fixture::with_limits(Limits {
        read_bytes: 4096,
        ..Limits::default()
    });
    // 10 MB: past the whole-file threshold, so the file is streamed in chunks.
    let body: String = (1..=200_000).map(|i| format!("{i:0>49}\n")).collect();
    fx.put("huge.log", &body);
    let out = fx
        .read(json!({ "file_path": "huge.log", "offset": 150_000, "limit": 3 }))
        .await
        .unwrap();
    assert!(
        out.text
            .starts_with(&format!("150000\t{:0>49}\n150001\t", 150_000)),
        "{}",
        out.text
    );
    assert_eq!(out.data["end_line"], json!(150_002));
    assert_eq!(out.data["total_lines"], json!(200_000));
    let capped = fx.read_ok("huge.log").await;
    assert_eq!(capped.data["truncated"], json!(true));
    assert!(capped.text.len() < 4096 + 300);
}

#[tokio::test]
async fn read_shows_sidecar_files() {
    let fx = Fixture::new();
    let sidecar = fx
        .ctx
        .spill("grep", b"first match\nsecond match\n")
        .await
        .unwrap();
    let out = fx.read_ok(&sidecar.display().to_string()).await;
    assert_eq!(out.text, "     1\tfirst match\n     2\tsecond match");
}

// ---- scope ----

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_every_way() {
    let fx = Fixture::new();
    symlink(fx.outside.join("secret.txt"), fx.ws.join("file-link")).unwrap();
    symlink(&fx.outside, fx.ws.join("dir-link")).unwrap();
    let absolute = fx.outside.join("secret.txt").display().to_string();
    let paths = [
        "../outside/secret.txt",
        absolute.as_str(),
        "file-link",
        "dir-link/secret.txt",
        "dir-link/../outside/secret.txt",
    ];
    for path in paths {
        let reason = refused(fx.read(json!({ "file_path": path })).await);
        assert!(reason.starts_with("fs.read denied"), "{reason}");
        let reason = refused(
            fx.write(json!({ "file_path": path, "content": "pwned\n" }))
                .await,
        );
        assert!(reason.starts_with("fs.write denied"), "{reason}");
        let reason = refused(
            fx.edit(json!({ "file_path": path, "old_string": "outside", "new_string": "pwned" }))
                .await,
        );
        assert!(reason.starts_with("fs.write denied"), "{reason}");
    }
    // A new file under a symlinked directory that points outside, and a new nested directory.
    let reason = refused(
        fx.write(json!({ "file_path": "dir-link/new/planted.txt", "content": "x" }))
            .await,
    );
    assert!(
        reason.contains(&fx.outside.display().to_string()),
        "{reason}"
    );
    refused(
        fx.edit(
            json!({ "file_path": "dir-link/planted.txt", "old_string": "", "new_string": "x" }),
        )
        .await,
    );
    fx.secret_untouched();
}

// ---- write ----

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
        Some(Preview::Diff {
            path: path.display().to_string(),
            old_text: Some("old\n".into()),
            new_text: "new\n".into(),
        })
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
        Some(Preview::Diff { old_text: None, .. })
    ));
    assert!(!fx.ws.join("q").exists());
}

// ---- edit ----

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
        Some(Preview::Diff {
            path: path.display().to_string(),
            old_text: Some("a\nb\n".into()),
            new_text: "a\nc\n".into(),
        })
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
