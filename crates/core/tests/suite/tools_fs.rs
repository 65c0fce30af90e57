//! `read`, `write` and `edit` through the full tool path (`Typed::wrap(..).execute(json, ctx)`,
//! so the schema check runs) on real files in a temporary workspace.
//!
//! Layout of every fixture: `<tmp>/ws` is the workspace, `<tmp>/outside` a directory outside
//! it (holding `secret.txt`), `<tmp>/scratch` the session scratch directory.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::tool_support::{tool_context, workspace_scope};
use serde_json::{Value, json};

use keel_core::tool::{
    Artifact, DynTool, Envelope, Limits, Preview, Subject, Tool, ToolContext, ToolError, ToolKind,
    ToolOutput, Typed,
};
use keel_core::tools::edit::EditTool;
use keel_core::tools::read::ReadTool;
use keel_core::tools::write::WriteTool;

mod edit;
mod read;
mod write;

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
        let ctx = tool_context(&ws, scratch, workspace_scope(), limits);
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
        // A failure the model can act on, with its message.
        Err(
            error @ (ToolError::BadArgument(_)
            | ToolError::NotFound(_)
            | ToolError::Stale(_)
            | ToolError::Unavailable(_)
            | ToolError::Io { .. }),
        ) => error.to_string(),
        other => panic!("expected a model-facing failure, got {other:?}"),
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
            Artifact::Diff(diff) => Some((diff.old_text.clone(), diff.new_text.clone())),
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
        assert!(description.contains("workspace-relative"), "{description}");
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
            envelope.for_model().starts_with("invalid arguments for `"),
            "{}",
            envelope.for_model()
        );
    }
    assert!(!fx.ws.join("b.txt").exists());
    assert_eq!(fs::read_to_string(fx.ws.join("a.txt")).unwrap(), "a\n");
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
