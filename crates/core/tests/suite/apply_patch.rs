//! `apply_patch` on real files (all or nothing, even when a write fails midway; CRLF, BOM and
//! mode kept; the read-before-write guard) and through the policy (each file decided as a
//! write to it, the strictest decision deciding the call).

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_core::policy::{Action, Call, Mode, Trust};
use keel_core::tool::{DynTool, Limits, Preview, ToolContext, ToolError, Typed};
use keel_core::tools::read::ReadTool;
use serde_json::json;

use super::policy_support::{World, spec};
use super::tool_support::{tool_context, workspace_scope};

fn apply_patch() -> Arc<dyn DynTool> {
    let registry = keel_core::tools::bundled(&|_| None).unwrap();
    registry.get("apply_patch").unwrap().clone()
}

struct Files {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    ctx: ToolContext,
}

impl Files {
    fn new(files: &[(&str, &[u8])]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        for (path, bytes) in files {
            let path = ws.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
        fs::create_dir_all(&ws).unwrap();
        let ctx = tool_context(
            &ws,
            base.join("scratch"),
            workspace_scope(),
            Limits::default(),
        );
        Self { _dir: dir, ws, ctx }
    }

    async fn read(&self, path: &str) {
        Typed::wrap(ReadTool)
            .unwrap()
            .execute(json!({ "file_path": path }), &self.ctx)
            .await
            .unwrap();
    }

    fn bytes(&self, path: &str) -> Option<Vec<u8>> {
        fs::read(self.ws.join(path)).ok()
    }
}

#[tokio::test]
async fn a_write_failing_midway_puts_back_the_files_already_written() {
    let files = Files::new(&[("a.txt", b"one\ntwo\n"), ("gone.txt", b"bye\n")]);
    files.read("a.txt").await;
    files.read("gone.txt").await;
    let tool = apply_patch();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+TWO\n*** Add File: sub/b.txt\n+new\n*** Delete File: gone.txt\n*** End Patch\n";
    let mut call = tool
        .parse_checked(&json!({ "input": patch }), &files.ctx)
        .unwrap();
    tool.prepare(&mut call, &files.ctx).await.unwrap();
    let Some(Preview::Diffs(diffs)) = call.preview() else {
        panic!("no diffs: {:?}", call.preview());
    };
    assert_eq!(diffs.len(), 3);
    // After the preview, `sub` becomes a file: `a.txt` is written first, then `sub/b.txt`
    // cannot be.
    fs::write(files.ws.join("sub"), "in the way\n").unwrap();
    let error = tool.run(call, &files.ctx).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, ToolError::Io { .. }), "{error:?}");
    assert!(
        message.contains("the patch failed at sub/b.txt"),
        "{message}"
    );
    assert!(
        message.contains("Nothing was changed (1 file already written was put back)"),
        "{message}"
    );
    assert_eq!(files.bytes("a.txt").unwrap(), b"one\ntwo\n");
    assert_eq!(files.bytes("gone.txt").unwrap(), b"bye\n");
}

#[tokio::test]
async fn line_endings_byte_order_mark_and_mode_are_kept() {
    let files = Files::new(&[("win.txt", b"\xEF\xBB\xBFalpha\r\nbeta\r\ngamma\r\n")]);
    fs::set_permissions(files.ws.join("win.txt"), fs::Permissions::from_mode(0o750)).unwrap();
    files.read("win.txt").await;
    let output = apply_patch()
        .execute(
            json!({"input": "--- a/win.txt\n+++ b/win.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"}),
            &files.ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        files.bytes("win.txt").unwrap(),
        b"\xEF\xBB\xBFalpha\r\nBETA\r\ngamma\r\n"
    );
    let mode = fs::metadata(files.ws.join("win.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    assert!(output.text.contains("CRLF kept"), "{}", output.text);
    // The session knows the new content: a second patch needs no new read.
    apply_patch()
        .execute(
            json!({"input": "*** Begin Patch\n*** Update File: win.txt\n@@\n-gamma\n+GAMMA\n*** End Patch"}),
            &files.ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        files.bytes("win.txt").unwrap(),
        b"\xEF\xBB\xBFalpha\r\nBETA\r\nGAMMA\r\n"
    );
}

#[tokio::test]
async fn files_not_read_or_already_there_are_refused_before_anything_is_written() {
    let files = Files::new(&[("a.txt", b"a\n"), ("b.txt", b"b\n")]);
    files.read("a.txt").await;
    let unread = apply_patch()
        .execute(
            json!({"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Delete File: b.txt\n*** End Patch"}),
            &files.ctx,
        )
        .await
        .unwrap_err();
    assert!(matches!(unread, ToolError::Stale(_)), "{unread:?}");
    assert!(
        unread.to_string().contains("b.txt has not been read"),
        "{unread}"
    );
    let exists = apply_patch()
        .execute(
            json!({"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: b.txt\n+x\n*** End Patch"}),
            &files.ctx,
        )
        .await
        .unwrap_err();
    assert!(
        exists.to_string().contains("b.txt already exists"),
        "{exists}"
    );
    let outside = apply_patch()
        .execute(
            json!({"input": "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch"}),
            &files.ctx,
        )
        .await
        .unwrap_err();
    assert!(matches!(outside, ToolError::Refused(_)), "{outside:?}");
    assert_eq!(files.bytes("a.txt").unwrap(), b"a\n");
    assert_eq!(files.bytes("b.txt").unwrap(), b"b\n");
    assert!(!files.ws.parent().unwrap().join("escape.txt").exists());
}

/// The decision for a patch of one file is the decision for a write to that file, in every
/// mode, headless or not; for several files it is the strictest.
#[test]
fn each_file_is_decided_as_a_write_to_it() {
    let world = World::new();
    let runtime = world.runtime("wide");
    let tool = apply_patch();
    let patch = tool.spec().clone();
    let write = spec("write");
    let files = [
        "src/main.rs",
        "README.md",
        ".env",
        ".envrc",
        ".github/workflows/ci.yml",
        ".git/config",
        ".keel/config.toml",
        "{outside}/secret.txt",
    ];
    let canonical = |file: &str| -> PathBuf { runtime.resolve(&world.expand(file)).unwrap() };
    for mode in [Mode::Ask, Mode::Allowlist, Mode::Yolo, Mode::ReadOnly] {
        for headless in [false, true] {
            let policy = world.policy(mode, headless, Trust::Trusted);
            for file in files {
                let user = world.expand(file);
                let args = json!({ "file_path": user, "content": "x" });
                let as_write = policy.decide(&Call {
                    spec: &write,
                    target: &super::policy_support::target(&write, &args),
                    runtime: &runtime,
                });
                let path = canonical(file);
                let as_patch = policy.decide_paths(
                    &Call {
                        spec: &patch,
                        target: &keel_core::tool::CallTarget::None,
                        runtime: &runtime,
                    },
                    &[(user.as_str(), path.as_path())],
                );
                assert_eq!(
                    as_patch.action, as_write.action,
                    "{file} in {mode:?} (headless: {headless}): write {} / patch {}",
                    as_write.explanation, as_patch.explanation
                );
                assert_eq!(
                    as_patch.always_scope.is_some(),
                    as_write.always_scope.is_some(),
                    "{file} in {mode:?}"
                );
            }
        }
    }
    // Several files: the strictest.
    let several = |mode: Mode, headless: bool, names: &[&str]| {
        let policy = world.policy(mode, headless, Trust::Trusted);
        let paths: Vec<(String, PathBuf)> = names
            .iter()
            .map(|n| (n.to_string(), canonical(n)))
            .collect();
        let files: Vec<(&str, &Path)> = paths
            .iter()
            .map(|(u, c)| (u.as_str(), c.as_path()))
            .collect();
        policy.decide_paths(
            &Call {
                spec: &patch,
                target: &keel_core::tool::CallTarget::None,
                runtime: &runtime,
            },
            &files,
        )
    };
    let yolo = several(Mode::Yolo, false, &["src/main.rs", "README.md"]);
    assert_eq!(yolo.action, Action::Allow);
    let workflow = several(
        Mode::Yolo,
        false,
        &["src/main.rs", ".github/workflows/ci.yml"],
    );
    assert_eq!(workflow.action, Action::Ask, "{}", workflow.explanation);
    assert!(workflow.always_scope.is_none(), "asked every time");
    assert!(
        workflow.explanation.to_string().contains("ci.yml"),
        "{}",
        workflow.explanation
    );
    let headless = several(
        Mode::Yolo,
        true,
        &["src/main.rs", ".github/workflows/ci.yml"],
    );
    assert_eq!(headless.action, Action::Deny);
    let git = several(Mode::Yolo, false, &["src/main.rs", ".git/config"]);
    assert_eq!(git.action, Action::Deny, "{}", git.explanation);
    let asked = several(Mode::Ask, false, &["src/main.rs", "README.md"]);
    assert_eq!(asked.action, Action::Ask);
    assert_eq!(asked.keys.len(), 2, "{:?}", asked.keys);
    assert!(
        asked.keys.iter().all(|k| k.tool == "apply_patch"),
        "{:?}",
        asked.keys
    );
    let scope = asked.always_scope.unwrap();
    assert!(
        scope.contains("src/**") && scope.contains("README.md"),
        "{scope}"
    );
}
