//! `bash` and `todo` through the full tool path, with real processes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::tool_support::tool_context;
use futures::future::BoxFuture;
use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::runtime::{TerminalBackend, TerminalOutcome, TerminalRequest};
use keel_core::tool::{
    Artifact, DynTool, Limits, Preview, ProgressSink, Subject, ToolContext, ToolError, ToolKind,
    ToolOutput, ToolProgress, Typed,
};
use keel_core::tools::bash::BashTool;
use keel_core::tools::todo::TodoTool;
use keel_testkit::measure::running_with;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    ctx: ToolContext,
}

impl Workspace {
    fn new() -> Self {
        Self::with(
            RequirementSet::fs_read_write(&["{workspace}/**", "{session}/**"], &["{workspace}/**"])
                .with_shell(ShellRunRequirement::any_args("bash")),
        )
    }

    fn with(requirements: RequirementSet) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let scratch = base.join("scratch");
        let ctx = tool_context(&root, scratch, requirements, Limits::default());
        Self {
            _dir: dir,
            root,
            outside,
            ctx,
        }
    }

    async fn bash(&self, args: Value) -> Result<ToolOutput, ToolError> {
        bash_tool().execute(args, &self.ctx).await
    }
}

fn bash_tool() -> Arc<dyn DynTool> {
    Typed::wrap(BashTool).unwrap()
}

fn assert_invalid(result: Result<ToolOutput, ToolError>, needle: &str) {
    match result {
        Err(ToolError::InvalidArguments { message, .. }) => {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}")
        }
        other => panic!("expected a schema error mentioning {needle:?}, got {other:?}"),
    }
}

#[test]
fn specs() {
    let bash = bash_tool();
    let spec = bash.spec();
    assert_eq!(spec.kind, ToolKind::Execute);
    assert!(spec.mutating);
    assert_eq!(spec.subject, Subject::Command("command".into()));
    assert_eq!(
        spec.requires.shell,
        vec![ShellRunRequirement::any_args("bash")]
    );
    let todo = Typed::wrap(TodoTool).unwrap();
    let spec = todo.spec();
    assert_eq!(spec.kind, ToolKind::Think);
    assert!(!spec.mutating);
    assert_eq!(spec.subject, Subject::None);
    assert_eq!(spec.requires, RequirementSet::default());
}

#[tokio::test]
async fn bash_schema_violations() {
    let ws = Workspace::new();
    assert_invalid(ws.bash(json!({})).await, "command");
    assert_invalid(ws.bash(json!({"command": ""})).await, "command");
    assert_invalid(
        ws.bash(json!({"command": "true", "timeout": 600001})).await,
        "timeout",
    );
    assert_invalid(
        ws.bash(json!({"command": "true", "timeout": "5s"})).await,
        "timeout",
    );
    assert_invalid(
        ws.bash(json!({"command": "true", "shell": "zsh"})).await,
        "shell",
    );
}

#[tokio::test]
async fn exit_codes_are_outputs_and_failures_are_marked() {
    let ws = Workspace::new();
    let out = ws.bash(json!({"command": "echo fine"})).await.unwrap();
    assert_eq!(out.text, "fine\n");
    assert_eq!(out.data["exit_code"], json!(0));
    assert!(out.data.get("signal").is_none());
    let out = ws
        .bash(json!({"command": "echo bad; exit 3"}))
        .await
        .unwrap();
    assert_eq!(out.text, "bad\n[command failed with exit code 3]");
    assert_eq!(out.data["exit_code"], json!(3));
    let out = ws.bash(json!({"command": "kill -KILL $$"})).await.unwrap();
    assert_eq!(out.data["signal"], json!("SIGKILL"));
    assert!(out.text.contains("killed by SIGKILL"), "{}", out.text);
    let out = ws.bash(json!({"command": "true"})).await.unwrap();
    assert_eq!(out.text, "(no output)");
}

#[tokio::test]
async fn stdout_and_stderr_interleave_in_arrival_order() {
    let ws = Workspace::new();
    let out = ws
        .bash(json!({"command": "echo one; echo two >&2; echo three; echo four >&2"}))
        .await
        .unwrap();
    assert_eq!(out.text, "one\ntwo\nthree\nfour\n");
    let out = ws
        .bash(
            json!({"command": "echo $TERM $PAGER $GIT_PAGER $NO_COLOR; read x; echo \"stdin:$x\""}),
        )
        .await
        .unwrap();
    assert_eq!(out.text, "dumb cat cat 1\nstdin:\n");
}

#[tokio::test]
async fn working_directory_is_the_workspace_or_a_directory_inside_it() {
    let ws = Workspace::new();
    let out = ws.bash(json!({"command": "pwd"})).await.unwrap();
    assert_eq!(out.text.trim(), ws.root.display().to_string());
    let out = ws
        .bash(json!({"command": "pwd", "cwd": "sub"}))
        .await
        .unwrap();
    assert_eq!(out.text.trim(), ws.root.join("sub").display().to_string());
    std::os::unix::fs::symlink(&ws.outside, ws.root.join("escape")).unwrap();
    let outside = ws.outside.display().to_string();
    for cwd in ["..", "../outside", outside.as_str(), "escape", "/"] {
        match ws.bash(json!({"command": "touch pwned", "cwd": cwd})).await {
            Err(ToolError::Refused(refusal)) => assert_eq!(refusal.capability, "fs.read"),
            other => panic!("cwd {cwd}: expected a refusal, got {other:?}"),
        }
    }
    assert!(!ws.outside.join("pwned").exists());
    let err = ws
        .bash(json!({"command": "pwd", "cwd": "missing"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
    let preview = bash_tool()
        .preview(&json!({"command": "ls", "cwd": "sub"}), &ws.ctx)
        .await
        .unwrap();
    assert_eq!(
        preview,
        Some(Preview::Command {
            command: "ls".into(),
            cwd: "sub".into()
        })
    );
}

#[tokio::test]
async fn without_the_shell_capability_nothing_runs() {
    let ws = Workspace::with(RequirementSet::fs_read(&["{workspace}/**"]));
    match ws.bash(json!({"command": "touch ran"})).await {
        Err(ToolError::Refused(refusal)) => assert_eq!(refusal.capability, "shell.run"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!ws.root.join("ran").exists());
}

#[tokio::test]
async fn output_past_the_cap_goes_to_a_sidecar_and_the_command_keeps_running() {
    let ws = Workspace::new();
    let out = ws.bash(json!({"command": "seq 1 200000"})).await.unwrap();
    // Not killed by SIGPIPE: the pipe was drained to the end.
    assert_eq!(out.data["exit_code"], json!(0));
    assert!(
        out.text.len() <= Limits::default().bash_bytes,
        "{}",
        out.text.len()
    );
    assert!(out.text.starts_with("1\n2\n3\n"), "{}", &out.text[..20]);
    assert!(out.text.ends_with("199999\n200000\n"));
    assert!(out.text.contains("bytes omitted"));
    let sidecar = out.output_path.clone().unwrap();
    assert!(sidecar.starts_with(ws.ctx.session.scratch_dir.as_path()));
    let spilled = std::fs::read_to_string(sidecar).unwrap();
    let expected: String = (1..=200000).map(|i| format!("{i}\n")).collect();
    assert!(spilled == expected, "the sidecar differs from seq's output");
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let ws = Workspace::new();
    let result = ws
        .bash(json!({
            "command": "sleep 30.0101 & echo child=$!; (sleep 30.0102; echo never) & echo pgid=$$; sleep 30.0103",
            "timeout": 1000
        }))
        .await;
    let Err(ToolError::External { message, .. }) = result else {
        panic!("expected a timeout failure, got {result:?}");
    };
    assert!(
        message.contains("did not finish within 1s and was killed"),
        "{message}"
    );
    assert!(message.contains("Output so far:\nchild="), "{message}");
    assert!(!message.contains("never"));
    for marker in ["30.0101", "30.0102", "30.0103"] {
        assert!(!running_with(marker), "`sleep {marker}` still runs");
    }
}

#[tokio::test]
async fn background_leftovers_are_ended_when_the_command_exits() {
    let ws = Workspace::new();
    let out = ws
        .bash(json!({"command": "sleep 60.0201 & setsid sleep 60.0202 & echo started"}))
        .await
        .unwrap();
    assert_eq!(out.data["exit_code"], json!(0));
    // Even the one that left the process group and session.
    assert!(!running_with("60.0201"));
    assert!(!running_with("60.0202"));
}

/// The pids of the live processes with `arg` among their arguments whose parent is `parent`.
fn children_with(parent: u32, arg: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_ascii_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Under namespaces a command is done once the namespace's init says so (its namespace
/// emptied, daemons included), not once the helper has exited: with the helper's first stage
/// stopped, so that it cannot exit, the result still comes, with the program's exit code,
/// everything it printed, and nothing it started left running.
#[tokio::test]
async fn a_command_is_done_when_init_has_emptied_its_namespace_not_when_the_helper_exits() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let ws = Workspace::new();
    let command = "setsid sleep 60.0301 & seq 1 3000; echo > started; \
                   while [ ! -e go ]; do sleep 0.01; done; exit 3";
    let run = ws.bash(json!({ "command": command }));
    let stop = async {
        // Once the program runs, the helper's first stage (the child of this process that runs
        // the command) only waits for init.
        while !ws.root.join("started").exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let [helper] = children_with(std::process::id(), command)[..] else {
            panic!("no single helper runs the command");
        };
        let helper = Pid::from_raw(helper);
        kill(helper, Signal::SIGSTOP).unwrap();
        std::fs::write(ws.root.join("go"), "").unwrap();
        helper
    };
    let (out, helper) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        tokio::join!(run, stop)
    })
    .await
    .expect("the command was not reported done while its helper could not exit");
    let out = out.unwrap();
    assert_eq!(out.data["sandbox"], json!("namespaces"), "{}", out.text);
    assert_eq!(out.data["exit_code"], json!(3), "{}", out.text);
    let printed: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    assert!(out.text.starts_with(&printed), "{}", out.text);
    assert!(!running_with("60.0301"), "the daemon outlived its command");
    // The helper was still there (stopped) when the result came; let it go and it ends.
    assert!(!children_with(std::process::id(), command).is_empty());
    kill(helper, Signal::SIGCONT).unwrap();
    while std::fs::read_to_string(format!("/proc/{helper}/stat"))
        .is_ok_and(|stat| !stat.contains(") Z"))
    {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The session's namespace keeper holds each command's network namespace ready: a command gets
/// the one the keeper made ahead, its own (the next command's is another) and offline (only its
/// loopback). A keeper killed mid-session is replaced; the command that finds it gone makes its
/// own namespace, offline too.
#[tokio::test]
async fn the_namespace_keeper_gives_each_command_its_own_offline_network() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let ws = Workspace::new();
    let network = async || {
        let out = ws
            .bash(json!({"command": "readlink /proc/self/ns/net; \
                          tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"}))
            .await
            .unwrap();
        assert_eq!(out.data["sandbox"], json!("namespaces"), "{}", out.text);
        let mut lines = out.text.lines().map(str::to_owned);
        let namespace = lines.next().unwrap();
        let interfaces: Vec<String> = lines.collect();
        assert_eq!(interfaces, ["lo"], "{}", out.text);
        namespace
    };
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let host = host.to_str().unwrap().to_owned();
    // This session's keeper (other tests run theirs), by its socket.
    let socket = ws.ctx.session.scratch_dir.join("sandbox/keeper.sock");
    let socket = socket.to_str().unwrap();
    // The keeper, ready: a child of this process, in a network namespace it made ahead.
    let ready = async || loop {
        if let [pid] = children_with(std::process::id(), socket)[..] {
            let spare = std::fs::read_link(format!("/proc/{pid}/ns/net"))
                .map(|link| link.to_string_lossy().into_owned());
            if let Ok(spare) = spare
                && spare != host
            {
                break (Pid::from_raw(pid), spare);
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };

    let first = network().await;
    assert_ne!(first, host);
    let (keeper, spare) = ready().await;
    let second = network().await;
    assert_eq!(
        second, spare,
        "the command did not get the keeper's namespace"
    );
    let (_, spare) = ready().await;
    assert_ne!(spare, second);
    let third = network().await;
    assert_eq!(third, spare);

    kill(keeper, Signal::SIGKILL).unwrap();
    while children_with(std::process::id(), socket).contains(&keeper.as_raw()) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let fourth = network().await;
    assert_ne!(fourth, host);
    let (replaced, spare) = ready().await;
    assert_ne!(replaced, keeper);
    assert_eq!(network().await, spare);
}

#[tokio::test]
async fn cancellation_kills_the_group_and_progress_streams() {
    let mut ws = Workspace::new();
    let (sender, mut receiver) = mpsc::unbounded_channel();
    ws.ctx.progress = ProgressSink::new(sender);
    let ctx = ws.ctx.clone();
    let call = tokio::spawn(async move {
        bash_tool()
            .execute(
                json!({"command": "echo pgid=$$; sleep 0.1; echo ready; setsid sleep 30.0301 & sleep 30.0302"}),
                &ctx,
            )
            .await
    });
    let mut seen = String::new();
    while !seen.contains("ready\n") {
        match receiver.recv().await {
            Some(ToolProgress::Output(chunk)) => seen.push_str(&chunk),
            Some(other) => panic!("unexpected progress {other:?}"),
            None => panic!("progress closed early; saw {seen:?}"),
        }
    }
    assert!(seen.starts_with("pgid="), "{seen}");
    ws.ctx.cancel.cancel();
    assert_eq!(call.await.unwrap(), Err(ToolError::Cancelled));
    assert!(!running_with("30.0301"));
    assert!(!running_with("30.0302"));
}

#[tokio::test]
async fn progress_chunks_add_up_to_the_output() {
    let mut ws = Workspace::new();
    let (sender, mut receiver) = mpsc::unbounded_channel();
    ws.ctx.progress = ProgressSink::new(sender);
    let out = ws
        .bash(json!({"command": "echo one; sleep 0.2; echo two"}))
        .await
        .unwrap();
    drop(ws);
    let mut chunks = Vec::new();
    while let Some(ToolProgress::Output(chunk)) = receiver.recv().await {
        chunks.push(chunk);
    }
    assert!(chunks.len() >= 2, "{chunks:?}");
    assert_eq!(chunks.concat(), out.text);
}

/// A terminal pane that records requests and answers from a script.
#[derive(Debug)]
struct FakeTerminal {
    requests: Mutex<Vec<TerminalRequest>>,
    outcome: TerminalOutcome,
}

impl TerminalBackend for FakeTerminal {
    fn run<'a>(
        &'a self,
        request: TerminalRequest,
        progress: ProgressSink,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalOutcome, keel_core::runtime::AccessError>> {
        self.requests.lock().unwrap().push(request);
        progress.send(ToolProgress::Terminal(self.outcome.terminal_id.clone()));
        let outcome = self.outcome.clone();
        Box::pin(async move { Ok(outcome) })
    }
}

#[tokio::test]
async fn the_editor_terminal_runs_the_command_when_present() {
    let mut ws = Workspace::new();
    let outcome = TerminalOutcome {
        terminal_id: "term-7".into(),
        output: "built\n".into(),
        truncated: false,
        exit_code: Some(2),
        signal: None,
        timed_out: false,
    };
    let terminal = Arc::new(FakeTerminal {
        requests: Mutex::new(Vec::new()),
        outcome: outcome.clone(),
    });
    ws.ctx.runtime = ws.ctx.runtime.with_backends(None, Some(terminal.clone()));
    let out = ws
        .bash(json!({"command": "make", "cwd": "sub", "timeout": 5000}))
        .await
        .unwrap();
    // The fake pane never runs the helper, so confinement is unconfirmed and said so.
    assert_eq!(
        out.text,
        "built\n[command failed with exit code 2]\n[ran without the kernel sandbox: the sandbox \
         helper did not confirm that it confined the command]"
    );
    assert_eq!(out.data["sandbox"], json!("unconfined"));
    assert_eq!(out.data["exit_code"], json!(2));
    assert_eq!(
        out.artifacts,
        vec![
            Artifact::Exit { code: Some(2) },
            Artifact::Terminal {
                terminal_id: "term-7".into()
            }
        ]
    );
    {
        let requests = terminal.requests.lock().unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].command, "make");
        assert_eq!(requests[0].cwd, ws.root.join("sub"));
        assert_eq!(requests[0].timeout.as_millis(), 5000);
        assert_eq!(requests[0].output_limit, Limits::default().bash_bytes);
        // The pane runs the helper wrapping `bash -c make`, what the editor shows as the
        // terminal's label; the profile travels in the environment.
        assert_eq!(
            requests[0].program,
            PathBuf::from(env!("CARGO_BIN_EXE_keel-core-sandbox"))
        );
        assert_eq!(requests[0].args, ["run", "--", "bash", "-c", "make"]);
        assert!(
            requests[0]
                .env
                .iter()
                .any(|(name, _)| name == keel_core::runtime::sandbox::PROFILE_ENV),
            "{:?}",
            requests[0].env
        );
    }
    let timed_out = Arc::new(FakeTerminal {
        requests: Mutex::new(Vec::new()),
        outcome: TerminalOutcome {
            timed_out: true,
            output: "partial\n".into(),
            exit_code: None,
            signal: Some("SIGKILL".into()),
            ..outcome
        },
    });
    ws.ctx.runtime = ws.ctx.runtime.with_backends(None, Some(timed_out));
    let err = ws
        .bash(json!({"command": "make", "timeout": 2000}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("within 2s and was killed"),
        "{err}"
    );
    assert!(err.to_string().contains("partial"), "{err}");
    // The capability check still applies.
    let err = ws
        .bash(json!({"command": "make", "cwd": ".."}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Refused(_)), "{err:?}");
}

#[tokio::test]
async fn todo_round_trip() {
    let ws = Workspace::new();
    let todo = Typed::wrap(TodoTool).unwrap();
    let out = todo
        .execute(
            json!({"todos": [
                {"content": "Read the code", "status": "completed", "id": "1"},
                {"content": "Write the tests", "status": "in_progress", "priority": "high",
                 "activeForm": "Writing the tests"},
                {"content": "Run clippy", "status": "pending", "priority": "low"}
            ]}),
            &ws.ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "Todo list updated:\n[x] Read the code\n[~] Write the tests (high priority)\n\
         [ ] Run clippy (low priority)\n"
    );
    assert_eq!(
        (
            &out.data["completed"],
            &out.data["in_progress"],
            &out.data["pending"]
        ),
        (&json!(1), &json!(1), &json!(1))
    );
    assert_eq!(
        ws.ctx.session.todos(),
        vec![
            json!({"content": "Read the code", "status": "completed", "id": "1"}),
            json!({"content": "Write the tests", "status": "in_progress", "priority": "high",
                   "activeForm": "Writing the tests"}),
            json!({"content": "Run clippy", "status": "pending", "priority": "low"}),
        ]
    );
    let Some(Artifact::Plan { entries }) = out.artifacts.first() else {
        panic!("no plan artifact: {:?}", out.artifacts);
    };
    assert_eq!(
        serde_json::to_value(&entries[0]).unwrap(),
        json!({"content": "Read the code", "priority": "medium", "status": "completed", "id": "1"})
    );
    assert_eq!(entries.len(), 3);

    // Two in progress: allowed, noted.
    let out = todo
        .execute(
            json!({"todos": [
                {"content": "a", "status": "in_progress"},
                {"content": "b", "status": "in_progress"}
            ]}),
            &ws.ctx,
        )
        .await
        .unwrap();
    assert!(out.text.contains("2 items are in progress"), "{}", out.text);
    assert_eq!(ws.ctx.session.todos().len(), 2);

    // An empty list clears it.
    let out = todo.execute(json!({"todos": []}), &ws.ctx).await.unwrap();
    assert_eq!(out.text, "The todo list is now empty.");
    assert!(ws.ctx.session.todos().is_empty());

    // Schema violations leave the list alone.
    todo.execute(
        json!({"todos": [{"content": "keep", "status": "pending"}]}),
        &ws.ctx,
    )
    .await
    .unwrap();
    for bad in [
        json!({}),
        json!({"todos": [{"content": "x", "status": "done"}]}),
        json!({"todos": [{"status": "pending"}]}),
        json!({"todos": [{"content": "", "status": "pending"}]}),
        json!({"todos": [{"content": "x", "status": "pending", "priority": "urgent"}]}),
    ] {
        let result = todo.execute(bad.clone(), &ws.ctx).await;
        assert!(
            matches!(result, Err(ToolError::InvalidArguments { .. })),
            "{bad}: {result:?}"
        );
    }
    assert_eq!(ws.ctx.session.todos().len(), 1);
}

#[tokio::test]
async fn commands_run_confined_and_a_denial_says_so() {
    let ws = Workspace::new();
    std::fs::write(ws.outside.join("secret"), "outside-secret").unwrap();
    let command = format!(
        "echo ok > inside; cat {outside}/secret; echo x > {outside}/new",
        outside = ws.outside.display()
    );
    let out = ws.bash(json!({ "command": command })).await.unwrap();
    assert_eq!(out.data["sandbox"], json!("namespaces"), "{}", out.text);
    assert_eq!(
        std::fs::read_to_string(ws.root.join("inside")).unwrap(),
        "ok\n"
    );
    assert!(!out.text.contains("outside-secret"), "{}", out.text);
    assert!(!ws.outside.join("new").exists());
    assert!(
        out.text.contains("the command ran in Keel's sandbox"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn read_only_sandbox_and_the_switches() {
    use keel_core::runtime::sandbox::{Mechanism, SandboxMode, SandboxSpec};
    let mut ws = Workspace::new();
    let base = super::tool_support::sandbox_spec();
    // Read-only mode: the workspace is visible but not writable.
    ws.ctx.runtime = ws.ctx.runtime.with_sandbox(SandboxSpec {
        read_only: true,
        ..base.clone()
    });
    let out = ws
        .bash(json!({"command": "ls > /dev/null && echo listed; echo x > made"}))
        .await
        .unwrap();
    assert!(out.text.starts_with("listed\n"), "{}", out.text);
    assert!(!ws.root.join("made").exists());
    // The fallback, forced.
    let mut forced = base.clone();
    forced.settings.mechanism = Mechanism::Landlock;
    ws.ctx.runtime = ws.ctx.runtime.with_sandbox(forced);
    let out = ws.bash(json!({"command": "echo hi"})).await.unwrap();
    assert_eq!(out.data["sandbox"], json!("landlock"));
    // Off: unconfined, and said so.
    let mut off = base.clone();
    off.settings.mode = SandboxMode::Off;
    ws.ctx.runtime = ws.ctx.runtime.with_sandbox(off);
    let out = ws.bash(json!({"command": "echo hi"})).await.unwrap();
    assert_eq!(out.data["sandbox"], json!("unconfined"));
    assert!(
        out.text
            .contains("[ran without the kernel sandbox: the sandbox is off")
    );
    // Required without a helper: refused, nothing runs.
    let mut required = base;
    required.settings.mode = SandboxMode::Required;
    required.helper = None;
    ws.ctx.runtime = ws.ctx.runtime.with_sandbox(required);
    let result = ws.bash(json!({"command": "echo x > refused"})).await;
    assert!(
        matches!(&result, Err(ToolError::Unavailable(m)) if m.contains("required")),
        "{result:?}"
    );
    assert!(!ws.root.join("refused").exists());
}

/// Keel's scratch directory fails while a command's long output is saved: the command's result
/// stands, the model reads a neutral note, the user gets the failure with its source.
#[tokio::test]
async fn a_sidecar_keel_cannot_write_is_neutral_for_the_model_and_whole_for_the_user() {
    let ws = Workspace::new();
    // The sidecar's path is taken by a directory (the session's first `bash` sidecar).
    let scratch = ws.ctx.session.scratch_dir.clone();
    std::fs::create_dir_all(scratch.join("bash-output-0001.txt")).unwrap();
    let out = ws.bash(json!({"command": "seq 1 200000"})).await.unwrap();
    assert_eq!(out.data["exit_code"], 0);
    assert_eq!(out.output_path, None);
    let note = out.data["note"].as_str().unwrap();
    assert_eq!(
        note,
        "the whole output could not be saved (internal error in Keel; the user has been shown \
         the details)"
    );
    let envelope = keel_core::tool::Envelope::from_result(Ok(out), std::time::Duration::ZERO);
    let for_model = envelope.for_model();
    assert!(!for_model.contains(&scratch.display().to_string()));
    assert!(!for_model.contains("os error"), "{for_model}");
    let report = envelope
        .internal_error()
        .expect("the user is shown the details");
    assert!(
        report.starts_with("internal error in Keel while saving a command's whole output: "),
        "{report}"
    );
    assert!(report.contains("os error"), "{report}");
}
