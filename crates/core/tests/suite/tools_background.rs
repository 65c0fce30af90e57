//! The background tools through the full tool path, with real processes: the ring and the
//! sidecar, the limit, and a limit of zero.

use std::path::PathBuf;
use std::sync::Arc;

use super::tool_support::tool_context;
use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::tool::{DynTool, Limits, ToolContext, ToolError, ToolOutput, Typed};
use keel_core::tools::background::{BgReadTool, BgStartTool, BgStopTool};
use serde_json::{Value, json};

struct Workspace {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Workspace {
    fn new(limits: Limits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let requirements =
            RequirementSet::fs_read_write(&["{workspace}/**", "{session}/**"], &["{workspace}/**"])
                .with_shell(ShellRunRequirement::any_args("bash"));
        let ctx = tool_context(&root, base.join("scratch"), requirements, limits);
        Self { _dir: dir, ctx }
    }

    async fn call(&self, tool: Arc<dyn DynTool>, args: Value) -> Result<ToolOutput, ToolError> {
        tool.execute(args, &self.ctx).await
    }
}

fn start() -> Arc<dyn DynTool> {
    Typed::wrap(BgStartTool).unwrap()
}

fn read() -> Arc<dyn DynTool> {
    Typed::wrap(BgReadTool).unwrap()
}

fn stop() -> Arc<dyn DynTool> {
    Typed::wrap(BgStopTool).unwrap()
}

/// Output past the ring is dropped from memory, said so with the sidecar's path, and the sidecar
/// holds all of it.
#[tokio::test]
async fn output_past_the_ring_is_in_the_sidecar_and_the_read_says_so() {
    let ws = Workspace::new(Limits {
        background_bytes: 1024,
        ..Limits::default()
    });
    // Waits for a line on stdin before printing, so the whole output comes after the start.
    let started = ws
        .call(
            start(),
            json!({"command": "read -r go; seq 1 3000", "stdin": true}),
        )
        .await
        .unwrap();
    assert!(started.text.contains("Started bg-1"), "{}", started.text);
    let job = ws.ctx.session.jobs().get("bg-1").unwrap();
    job.write("go\n").await.unwrap();
    // Until the end is read: the first reads may come while it still prints.
    let mut text = String::new();
    for _ in 0..50 {
        let out = ws
            .call(read(), json!({"id": "bg-1", "wait": 10000}))
            .await
            .unwrap();
        text.push_str(&out.text);
        if !out.text.contains("[bg-1 is running]") {
            break;
        }
    }
    assert!(
        text.contains("bytes of output were dropped from memory"),
        "{text}"
    );
    assert!(
        text.contains("[bg-1 exited with code 0; it is no longer listed]"),
        "{text}"
    );
    assert!(text.contains("3000\n"), "{text}");
    let path = text
        .split("the whole output is in ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no sidecar in {text}"));
    let whole = std::fs::read_to_string(&path).unwrap();
    let expected: String = (1..=3000).map(|n| format!("{n}\n")).collect();
    assert_eq!(whole, expected);
}

/// `backgroundJobs = 0` turns background commands off, and says so.
#[tokio::test]
async fn a_limit_of_zero_turns_background_commands_off() {
    let ws = Workspace::new(Limits {
        background_jobs: 0,
        ..Limits::default()
    });
    let refused = ws
        .call(start(), json!({"command": "sleep 100"}))
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "background commands are turned off in this session ([limits] backgroundJobs = 0)"
    );
}

/// Stopping an unknown id is a clear error naming what exists.
#[tokio::test]
async fn an_unknown_id_is_named_with_the_known_ones() {
    let ws = Workspace::new(Limits::default());
    ws.call(start(), json!({"command": "while :; do sleep 1; done"}))
        .await
        .unwrap();
    let unknown = ws.call(stop(), json!({"id": "bg-7"})).await.unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "no background command `bg-7`; there are: bg-1"
    );
    let stopped = ws.call(stop(), json!({"id": "bg-1"})).await.unwrap();
    assert_eq!(stopped.data["verified"], json!(true), "{}", stopped.text);
}

/// A write stuck on a command that does not read its stdin does not keep a stop from killing it;
/// the write then fails.
#[tokio::test]
async fn a_stop_ends_a_command_whose_stdin_is_full() {
    let ws = Workspace::new(Limits::default());
    ws.call(
        start(),
        json!({"command": "while :; do sleep 1; done", "stdin": true}),
    )
    .await
    .unwrap();
    let job = ws.ctx.session.jobs().get("bg-1").unwrap();
    // More than a pipe holds: the write waits for a reader that never comes.
    let input = "x".repeat(1024 * 1024);
    let mut writer = {
        let job = job.clone();
        tokio::spawn(async move { job.write(&input).await })
    };
    // Nobody reads the pipe: the write cannot finish (it holds the stdin while it waits).
    let pending = tokio::time::timeout(std::time::Duration::from_millis(300), &mut writer).await;
    assert!(pending.is_err(), "the write finished: {pending:?}");
    let stopped = ws.call(stop(), json!({"id": "bg-1"})).await.unwrap();
    assert_eq!(stopped.data["verified"], json!(true), "{}", stopped.text);
    let written = writer.await.unwrap();
    assert!(written.is_err(), "{written:?}");
}
