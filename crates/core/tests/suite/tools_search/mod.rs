//! `glob` and `grep` through the full tool path (`Typed::wrap(..).execute(json, ctx)`), over real
//! files in temporary trees.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::tool_support::{tool_context, workspace_scope};
use keel_core::tool::{
    DynTool, Envelope, Limits, Subject, ToolContext, ToolError, ToolKind, ToolOutput, Typed,
};
use keel_core::tools::glob::GlobTool;
use keel_core::tools::grep::GrepTool;
use serde_json::{Value, json};

/// A workspace `ws/`, a scratch dir and a directory `outside/` next to it.
pub(super) struct Workspace {
    _dir: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) outside: PathBuf,
    pub(super) ctx: ToolContext,
}

impl Workspace {
    pub(super) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let scratch = base.join("scratch");
        let ctx = tool_context(&root, scratch, workspace_scope(), Limits::default());
        Self {
            _dir: dir,
            root,
            outside,
            ctx,
        }
    }

    pub(super) fn file(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub(super) async fn glob(&self, args: Value) -> Result<ToolOutput, ToolError> {
        run(Typed::wrap(GlobTool).unwrap(), args, &self.ctx).await
    }

    pub(super) async fn grep(&self, args: Value) -> Result<ToolOutput, ToolError> {
        run(Typed::wrap(GrepTool).unwrap(), args, &self.ctx).await
    }
}

pub(super) async fn run(
    tool: Arc<dyn DynTool>,
    args: Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    tool.execute(args, ctx).await
}

pub(super) fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

pub(super) fn assert_invalid(result: Result<ToolOutput, ToolError>, needle: &str) {
    match result {
        Err(ToolError::InvalidArguments { message, .. }) => {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}")
        }
        other => panic!("expected a schema error mentioning {needle:?}, got {other:?}"),
    }
}

pub(super) fn assert_refused(result: Result<ToolOutput, ToolError>) {
    match result {
        Err(ToolError::Refused(refusal)) => assert_eq!(refusal.capability, "fs.read"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn specs_are_read_only_searches_on_a_path() {
    for tool in [
        Typed::wrap(GlobTool).unwrap(),
        Typed::wrap(GrepTool).unwrap(),
    ] {
        let spec = tool.spec();
        assert_eq!(spec.kind, ToolKind::Search);
        assert!(!spec.mutating);
        assert_eq!(spec.subject, Subject::Path(Some("path".into())));
        assert_eq!(spec.requires.fs.read, vec!["{workspace}/**".to_owned()]);
        assert_eq!(spec.parameters["additionalProperties"], json!(false));
    }
    let grep = Typed::wrap(GrepTool).unwrap();
    let properties = grep.spec().parameters["properties"].clone();
    for name in [
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-i",
        "-n",
        "-A",
        "-B",
        "-C",
        "multiline",
        "head_limit",
        "case_insensitive",
    ] {
        assert!(properties.get(name).is_some(), "grep lacks `{name}`");
    }
}

#[tokio::test]
async fn schema_violations_are_tool_errors() {
    let ws = Workspace::new();
    assert_invalid(ws.glob(json!({})).await, "pattern");
    assert_invalid(ws.glob(json!({"pattern": 3})).await, "pattern");
    assert_invalid(
        ws.glob(json!({"pattern": "*", "sort": "mtime"})).await,
        "sort",
    );
    assert_invalid(ws.grep(json!({"path": "."})).await, "pattern");
    assert_invalid(
        ws.grep(json!({"pattern": "a", "output_mode": "lines"}))
            .await,
        "output_mode",
    );
    assert_invalid(ws.grep(json!({"pattern": "a", "-A": "two"})).await, "-A");
    assert_invalid(ws.grep(json!({"pattern": "a", "-A": -1})).await, "-A");
    assert_invalid(
        ws.grep(json!({"pattern": "a", "recursive": true})).await,
        "recursive",
    );
}

#[tokio::test]
async fn glob_matches_double_star_in_path_order() {
    let ws = Workspace::new();
    for path in [
        "top.rs",
        "b/x.rs",
        "a/deep/er/c.rs",
        "a/y.rs",
        "a/notes.md",
        "a-b.rs",
    ] {
        ws.file(path, "x");
    }
    let out = ws.glob(json!({"pattern": "**/*.rs"})).await.unwrap();
    assert_eq!(
        lines(&out.text),
        ["a-b.rs", "a/deep/er/c.rs", "a/y.rs", "b/x.rs", "top.rs"]
    );
    assert_eq!(out.data["count"], json!(5));
    // `*` does not cross directories.
    let out = ws.glob(json!({"pattern": "*.rs"})).await.unwrap();
    assert_eq!(lines(&out.text), ["a-b.rs", "top.rs"]);
    // Relative to `path`, shown relative to the workspace.
    let out = ws
        .glob(json!({"pattern": "*.{rs,md}", "path": "a"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["a/notes.md", "a/y.rs"]);
    let out = ws.glob(json!({"pattern": "./a/**/c.rs"})).await.unwrap();
    assert_eq!(lines(&out.text), ["a/deep/er/c.rs"]);
}

#[tokio::test]
async fn glob_honours_gitignore_without_git_and_skips_hidden_files() {
    let ws = Workspace::new();
    ws.file(".gitignore", "target/\n*.log\n");
    ws.file("src/lib.rs", "x");
    ws.file("target/debug/gen.rs", "x");
    ws.file("build.log", "x");
    ws.file(".hidden.rs", "x");
    ws.file("sub/.gitignore", "local.rs\n");
    ws.file("sub/local.rs", "x");
    ws.file("sub/kept.rs", "x");
    let out = ws.glob(json!({"pattern": "**/*"})).await.unwrap();
    assert_eq!(lines(&out.text), ["src/lib.rs", "sub/kept.rs"]);
}

#[tokio::test]
async fn glob_without_matches_says_so() {
    let ws = Workspace::new();
    ws.file("a.txt", "x");
    let out = ws.glob(json!({"pattern": "**/*.py"})).await.unwrap();
    assert!(
        out.text.starts_with("No files match `**/*.py`"),
        "{}",
        out.text
    );
    assert_eq!(out.data["count"], json!(0));
    let err = ws.glob(json!({"pattern": "a[b"})).await.unwrap_err();
    assert!(err.to_string().contains("invalid glob pattern"), "{err}");
    let err = ws
        .glob(json!({"pattern": "*", "path": "a.txt"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[tokio::test]
async fn glob_caps_at_the_limit_and_spills_the_whole_list() {
    let ws = Workspace::new();
    for i in 0..1050 {
        ws.file(&format!("many/f{i:04}.txt"), "");
    }
    let result = ws.glob(json!({"pattern": "many/*.txt"})).await;
    let out = result.clone().unwrap();
    let shown = lines(&out.text);
    assert_eq!(shown.len(), 1001, "1000 entries and a note");
    assert_eq!(shown[0], "many/f0000.txt");
    assert_eq!(shown[999], "many/f0999.txt");
    assert!(shown[1000].contains("1050 files match"), "{}", shown[1000]);
    assert_eq!(out.data["count"], json!(1050));
    let sidecar = out.output_path.clone().unwrap();
    assert!(sidecar.starts_with(ws.ctx.session.scratch_dir.as_path()));
    let spilled = std::fs::read_to_string(&sidecar).unwrap();
    assert_eq!(spilled.lines().count(), 1050);
    assert_eq!(spilled.lines().last(), Some("many/f1049.txt"));
    let envelope = Envelope::from_result(result, Duration::ZERO);
    assert_eq!(envelope.metadata.truncated, Some(true));
    assert!(
        envelope
            .for_model()
            .contains(&sidecar.display().to_string())
    );
    // Exactly at the cap: no truncation.
    for i in 0..1000 {
        ws.file(&format!("exact/f{i:04}.txt"), "");
    }
    let out = ws.glob(json!({"pattern": "exact/*"})).await.unwrap();
    assert_eq!(out.output_path, None);
    assert_eq!(lines(&out.text).len(), 1000);
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let ws = Workspace::new();
    std::fs::write(ws.outside.join("secret.txt"), "password=hunter2\n").unwrap();
    std::os::unix::fs::symlink(&ws.outside, ws.root.join("escape")).unwrap();
    let outside = ws.outside.display().to_string();
    for path in [
        "../outside",
        outside.as_str(),
        "escape",
        "escape/secret.txt",
    ] {
        assert_refused(ws.glob(json!({"pattern": "*", "path": path})).await);
        assert_refused(ws.grep(json!({"pattern": "password", "path": path})).await);
    }
    // The walk itself does not follow the symlink either.
    let out = ws.grep(json!({"pattern": "password"})).await.unwrap();
    assert_eq!(out.text, "No matches found.");
    let out = ws.glob(json!({"pattern": "**/*.txt"})).await.unwrap();
    assert!(out.text.starts_with("No files match"), "{}", out.text);
}

pub(super) fn sample_tree(ws: &Workspace) {
    ws.file(
        "src/main.rs",
        "fn main() {\n    let x = 1;\n    helper(x);\n}\n",
    );
    ws.file(
        "src/lib.rs",
        "pub fn helper(x: u32) {\n    // TODO: check\n    println!(\"{x}\");\n}\n",
    );
    ws.file("docs/guide.md", "Call helper() to help.\nNothing else.\n");
    ws.file("app.py", "def helper():\n    pass\n");
}

#[tokio::test]
async fn grep_files_mode_is_the_default_and_sorted() {
    let ws = Workspace::new();
    sample_tree(&ws);
    let out = ws.grep(json!({"pattern": "helper"})).await.unwrap();
    assert_eq!(
        lines(&out.text),
        ["app.py", "docs/guide.md", "src/lib.rs", "src/main.rs"]
    );
    assert_eq!(out.data["files"], json!(4));
    let out = ws.grep(json!({"pattern": "nothing here"})).await.unwrap();
    assert_eq!(out.text, "No matches found.");
}

#[tokio::test]
async fn grep_content_and_count_modes() {
    let ws = Workspace::new();
    sample_tree(&ws);
    let out = ws
        .grep(json!({"pattern": "helper|x", "output_mode": "content", "path": "src"}))
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "src/lib.rs:1:pub fn helper(x: u32) {\n\
         src/lib.rs:3:    println!(\"{x}\");\n\
         src/main.rs:2:    let x = 1;\n\
         src/main.rs:3:    helper(x);\n"
    );
    assert_eq!(out.data["matches"], json!(4));
    let out = ws
        .grep(json!({"pattern": "x", "output_mode": "content", "path": "src/main.rs", "-n": false}))
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "src/main.rs:    let x = 1;\nsrc/main.rs:    helper(x);\n"
    );
    let out = ws
        .grep(json!({"pattern": "x", "output_mode": "count"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["src/lib.rs:2", "src/main.rs:2"]);
    assert_eq!(out.data["matches"], json!(4));
    assert_eq!(out.data["files"], json!(2));
}

#[tokio::test]
async fn grep_context_lines() {
    let ws = Workspace::new();
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    ws.file("f.txt", &body);
    let out = ws
        .grep(json!({"pattern": "^line (5|15)$", "output_mode": "content", "-C": 1}))
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "f.txt-4-line 4\nf.txt:5:line 5\nf.txt-6-line 6\n--\n\
         f.txt-14-line 14\nf.txt:15:line 15\nf.txt-16-line 16\n"
    );
    let out = ws
        .grep(json!({"pattern": "^line 10$", "output_mode": "content", "-B": 2, "-A": 1}))
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "f.txt-8-line 8\nf.txt-9-line 9\nf.txt:10:line 10\nf.txt-11-line 11\n"
    );
    // Context is only for content mode; -A overrides -C on its side.
    let out = ws
        .grep(json!({"pattern": "^line 3$", "output_mode": "content", "-C": 2, "-A": 0}))
        .await
        .unwrap();
    assert_eq!(out.text, "f.txt-1-line 1\nf.txt-2-line 2\nf.txt:3:line 3\n");
}

#[tokio::test]
async fn grep_glob_and_type_filters() {
    let ws = Workspace::new();
    sample_tree(&ws);
    let out = ws
        .grep(json!({"pattern": "helper", "glob": "*.rs"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["src/lib.rs", "src/main.rs"]);
    let out = ws
        .grep(json!({"pattern": "helper", "glob": "!*.rs"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["app.py", "docs/guide.md"]);
    let out = ws
        .grep(json!({"pattern": "helper", "glob": "docs/**"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["docs/guide.md"]);
    let out = ws
        .grep(json!({"pattern": "helper", "type": "py"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["app.py"]);
    let out = ws
        .grep(json!({"pattern": "helper", "type": "rust"}))
        .await
        .unwrap();
    assert_eq!(lines(&out.text), ["src/lib.rs", "src/main.rs"]);
    let err = ws
        .grep(json!({"pattern": "helper", "type": "klingon"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown file type `klingon`"),
        "{err}"
    );
}

#[tokio::test]
async fn grep_case_and_multiline() {
    let ws = Workspace::new();
    ws.file("a.txt", "Hello World\nhello world\nstart\nmiddle\nend\n");
    let count = |out: ToolOutput| out.data["matches"].clone();
    let args = |extra: Value| {
        let mut args = json!({"pattern": "hello", "output_mode": "count"});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    assert_eq!(count(ws.grep(args(json!({}))).await.unwrap()), json!(1));
    assert_eq!(
        count(ws.grep(args(json!({"-i": true}))).await.unwrap()),
        json!(2)
    );
    assert_eq!(
        count(
            ws.grep(args(json!({"case_insensitive": true})))
                .await
                .unwrap()
        ),
        json!(2)
    );
    let err = ws
        .grep(json!({"pattern": "start\\nmiddle"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("multiline"), "{err}");
    let out = ws
        .grep(json!({"pattern": "start.middle", "multiline": true, "output_mode": "content"}))
        .await
        .unwrap();
    assert_eq!(out.text, "a.txt:3:start\na.txt:4:middle\n");
}

#[tokio::test]
async fn grep_invalid_regex_is_a_clear_error() {
    let ws = Workspace::new();
    ws.file("a.txt", "x");
    match ws.grep(json!({"pattern": "fn(("})).await {
        Err(ToolError::BadArgument(message)) => {
            assert!(message.starts_with("invalid regex `fn((`"), "{message}");
            assert!(message.contains("unclosed group"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn grep_skips_binary_files() {
    let ws = Workspace::new();
    ws.file("text.txt", "needle here\n");
    ws.file("blob.bin", b"needle\x00\x01\x02 needle\n");
    let out = ws.grep(json!({"pattern": "needle"})).await.unwrap();
    assert_eq!(out.text, "text.txt");
    assert_eq!(out.data["binary_files_skipped"], json!(1));
    let out = ws
        .grep(json!({"pattern": "needle", "output_mode": "content"}))
        .await
        .unwrap();
    assert_eq!(out.text, "text.txt:1:needle here\n");
}

#[tokio::test]
async fn grep_reads_small_and_large_files_alike() {
    // Files up to 64 KiB are read whole and searched as a slice, larger ones streamed: the
    // same lines, counts, binary verdicts and UTF-16 transcoding either way.
    let ws = Workspace::new();
    let filler = |size: usize| {
        let line = "filler line without the word\n";
        let mut text = line.repeat((size - "needle end\n".len()) / line.len());
        text.push_str(&"x".repeat(size - text.len() - "needle end\n".len()));
        text.push_str("needle end\n");
        assert_eq!(text.len(), size);
        text
    };
    for size in [65_535, 65_536, 65_537, 200_000] {
        ws.file(&format!("text_{size}.txt"), filler(size));
        let mut blob = format!("needle first\n{}", filler(size - 13)).into_bytes();
        blob[size - 20] = 0;
        ws.file(&format!("blob_{size}.bin"), &blob);
    }
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend(
        "a needle in utf-16\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes),
    );
    ws.file("utf16.txt", &utf16);
    ws.file("empty.txt", "");
    let out = ws
        .grep(json!({"pattern": "needle", "output_mode": "count"}))
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "text_200000.txt:1\ntext_65535.txt:1\ntext_65536.txt:1\ntext_65537.txt:1\nutf16.txt:1"
    );
    assert_eq!(out.data["binary_files_skipped"], json!(4));
    let out = ws
        .grep(json!({"pattern": "needle", "output_mode": "content"}))
        .await
        .unwrap();
    assert!(
        out.text
            .contains("text_65536.txt:2260:xxxxxxxxxxxxxxneedle end\n"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains("utf16.txt:1:a needle in utf-16\n"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn grep_caps_matches_and_spills_the_whole_output() {
    let ws = Workspace::new();
    let body: String = (1..=300).map(|i| format!("match {i}\n")).collect();
    ws.file("big.txt", &body);
    ws.file("small.txt", "match small\n");
    let result = ws
        .grep(json!({"pattern": "match", "output_mode": "content"}))
        .await;
    let out = result.clone().unwrap();
    let shown = lines(&out.text);
    assert_eq!(shown.len(), 201, "200 matches and a note");
    assert_eq!(shown[0], "big.txt:1:match 1");
    assert_eq!(shown[199], "big.txt:200:match 200");
    assert!(shown[200].contains("first 200 of 301"), "{}", shown[200]);
    assert_eq!(out.data["matches"], json!(301));
    let spilled = std::fs::read_to_string(out.output_path.clone().unwrap()).unwrap();
    assert_eq!(spilled.lines().count(), 301);
    assert_eq!(spilled.lines().last(), Some("small.txt:1:match small"));
    assert_eq!(
        Envelope::from_result(result, Duration::ZERO)
            .metadata
            .truncated,
        Some(true)
    );
    // head_limit narrows what is shown without a sidecar.
    let out = ws
        .grep(json!({"pattern": "match", "output_mode": "content", "path": "big.txt", "head_limit": 3}))
        .await
        .unwrap();
    assert_eq!(
        shown_lines(&out.text),
        [
            "big.txt:1:match 1",
            "big.txt:2:match 2",
            "big.txt:3:match 3"
        ]
    );
    let out = ws
        .grep(json!({"pattern": "match", "head_limit": 1}))
        .await
        .unwrap();
    assert_eq!(shown_lines(&out.text), ["big.txt"]);
    assert_eq!(out.output_path, None);
}

/// The lines of a result without the bracketed notes.
pub(super) fn shown_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('[')).collect()
}

#[tokio::test]
async fn grep_cuts_very_long_lines_for_the_model_only() {
    let ws = Workspace::new();
    let long = format!("needle {}\n", "x".repeat(5000));
    ws.file("min.js", &long);
    let out = ws
        .grep(json!({"pattern": "needle", "output_mode": "content"}))
        .await
        .unwrap();
    assert!(out.text.len() < 1200, "{}", out.text.len());
    assert!(out.text.contains("line cut"), "{}", out.text);
}

#[tokio::test]
async fn search_honours_cancellation() {
    let ws = Workspace::new();
    sample_tree(&ws);
    ws.ctx.cancel.cancel();
    assert_eq!(
        ws.grep(json!({"pattern": "helper"})).await,
        Err(ToolError::Cancelled)
    );
    assert_eq!(
        ws.glob(json!({"pattern": "**"})).await,
        Err(ToolError::Cancelled)
    );
}

#[tokio::test]
async fn grep_accepts_a_single_file_path() {
    let ws = Workspace::new();
    sample_tree(&ws);
    let file: &Path = &ws.root.join("src/lib.rs");
    let out = ws
        .grep(json!({"pattern": "TODO", "path": file, "output_mode": "content"}))
        .await
        .unwrap();
    assert_eq!(out.text, "src/lib.rs:2:    // TODO: check\n");
}

mod walk;
