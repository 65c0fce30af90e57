//! Nothing outlives a kill, end to end (issue 27, items 1 and 5): every prompt allowed, the real
//! helper, under namespaces and under the forced Landlock fallback, locally and in the editor's
//! terminal pane. A command that escapes every way it can (its own session, a double fork, a
//! `ptrace` of the sandbox's PID 1) is gone after a cancel and after its timeout, with nothing
//! left of its tree or namespace; `kill -9 0` from a command reaches neither Keel nor the editor;
//! and under the fallback a command reads no other process's `/proc`, no raw device, and has no
//! capability.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use keel_core::runtime::sandbox::Mechanism;
use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::Turn;
use serde_json::json;

use super::sandbox::{Outside, finished, harness};
use super::support::{gone_with, pid_gone, running_with};
use super::turns::allow;

/// Tries `ptrace(PTRACE_ATTACH)` on the sandbox's PID 1 (the namespace's init; the host's init
/// under the fallback) and on the command's parent (the init again; the fallback's reaper):
/// outside the command's tree either way.
const TRACE_INIT: &str = "/usr/bin/python3 -c 'import ctypes, sys; \
    libc = ctypes.CDLL(None, use_errno=True); \
    print(\"TRACED-INIT\" if libc.ptrace(16, 1, 0, 0) == 0 else \"ptrace-refused\"); \
    print(\"TRACED-PARENT\" if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0 \
    else \"parent-ptrace-refused\")' $PPID";

/// Whether a live process has `text` anywhere in its command line: the helper (`keel-sandbox
/// run -- bash -c COMMAND`), its forks (the namespace's init, the fallback's reaper) and the
/// command's own processes all carry the command's unique tag.
fn any_process_with(text: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            return false;
        };
        cmdline.windows(text.len()).any(|w| w == text.as_bytes())
            && std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
    })
}

/// Waits (up to ten seconds) until no live process carries `text` in its command line.
async fn tree_gone(text: &str) -> bool {
    for _ in 0..200 {
        if !any_process_with(text) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits (up to ten seconds) for the command's marker processes to run.
async fn started(markers: &[&str]) -> bool {
    for _ in 0..400 {
        if markers.iter().all(|marker| running_with(marker)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// How the escaping command is ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Cancel,
    Timeout,
}

/// The escape: a daemon in a session of its own behind a double fork (its pid in a file), a
/// `ptrace` of PID 1, then the command itself sleeps. Every process carries `tag`.
fn escaping_command(tag: &str) -> (String, [String; 3]) {
    let daemon = format!("{tag}.1");
    let inner = format!("{tag}.2");
    let main = format!("{tag}.3");
    let command = format!(
        "(setsid sh -c 'sleep {daemon} & echo $! > daemon.pid; exec sleep {inner}' \
         > /dev/null 2>&1 &); {TRACE_INIT}; echo escape-started; exec sleep {main}"
    );
    (command, [daemon, inner, main])
}

async fn escape_is_gone(options: ClientOptions, mechanism: Mechanism, end: End, tag: &str) {
    let outside = Outside::new();
    // A number (`sleep` takes it) unique to this test and process.
    let tag = format!("{tag}{}", std::process::id());
    let (command, markers) = escaping_command(&tag);
    let mut args = json!({ "command": command });
    if end == End::Timeout {
        // Long enough for the escape to be in place (the test waits for it below).
        args["timeout"] = json!(4000);
    }
    let harness = harness(
        options.permissions(allow(4)),
        mechanism,
        &outside,
        vec![
            Turn::new().tool_call("t1", "bash", args),
            Turn::text_only("done"),
        ],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "escape");
    let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
    assert!(
        started(&markers).await,
        "the command and its daemon never ran"
    );
    let daemon_pid: Option<u32> = std::fs::read_to_string(harness.root.join("daemon.pid"))
        .ok()
        .and_then(|pid| pid.trim().parse().ok());
    match end {
        End::Cancel => {
            harness.client.cancel(&harness.session).unwrap();
            assert_eq!(
                prompt.await.unwrap().unwrap().stop_reason,
                StopReason::Cancelled
            );
        }
        End::Timeout => {
            assert_eq!(
                prompt.await.unwrap().unwrap().stop_reason,
                StopReason::EndTurn
            );
            let update = finished(&harness, "t1");
            let text = update.to_string();
            // Keel says the tree is gone only once the helper's guard said so.
            assert!(
                text.contains("with every process it started: checked, none is left"),
                "{update:#}"
            );
            assert!(text.contains("escape-started"), "{update:#}");
            assert!(
                text.contains("ptrace-refused"),
                "the ptrace of PID 1 was not tried (is /usr/bin/python3 there?): {update:#}"
            );
            assert!(text.contains("parent-ptrace-refused"), "{update:#}");
            assert!(!text.contains("TRACED-INIT"), "{update:#}");
            assert!(!text.contains("TRACED-PARENT"), "{update:#}");
        }
    }
    for marker in &markers {
        assert!(gone_with(marker).await, "{marker} outlived the {end:?}");
    }
    // Nothing of it is left: no helper, no init or reaper, no process of the command.
    assert!(
        tree_gone(&tag).await,
        "a process of the command outlived the {end:?}"
    );
    // Under the fallback the daemon's pid is this machine's: it is gone too.
    if mechanism == Mechanism::Landlock {
        let pid = daemon_pid.expect("the daemon wrote its pid");
        assert!(pid_gone(pid).await, "the daemon {pid} outlived the {end:?}");
    }
}

#[tokio::test]
async fn an_escaping_local_command_is_gone_after_cancel_under_namespaces() {
    escape_is_gone(
        ClientOptions::default(),
        Mechanism::Auto,
        End::Cancel,
        "6111",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_local_command_is_gone_after_cancel_under_the_fallback() {
    escape_is_gone(
        ClientOptions::default(),
        Mechanism::Landlock,
        End::Cancel,
        "6112",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_terminal_command_is_gone_after_cancel_under_namespaces() {
    escape_is_gone(
        ClientOptions::editor(),
        Mechanism::Auto,
        End::Cancel,
        "6113",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_terminal_command_is_gone_after_cancel_under_the_fallback() {
    escape_is_gone(
        ClientOptions::editor(),
        Mechanism::Landlock,
        End::Cancel,
        "6114",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_local_command_is_gone_after_its_timeout_under_namespaces() {
    escape_is_gone(
        ClientOptions::default(),
        Mechanism::Auto,
        End::Timeout,
        "6115",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_local_command_is_gone_after_its_timeout_under_the_fallback() {
    escape_is_gone(
        ClientOptions::default(),
        Mechanism::Landlock,
        End::Timeout,
        "6116",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_terminal_command_is_gone_after_its_timeout_under_namespaces() {
    escape_is_gone(
        ClientOptions::editor(),
        Mechanism::Auto,
        End::Timeout,
        "6117",
    )
    .await;
}

#[tokio::test]
async fn an_escaping_terminal_command_is_gone_after_its_timeout_under_the_fallback() {
    escape_is_gone(
        ClientOptions::editor(),
        Mechanism::Landlock,
        End::Timeout,
        "6118",
    )
    .await;
}

/// `kill -9 0` from a command ends the command's own group only: the turn answers, and the next
/// turn runs a command as usual. (In the pane the test client runs the helper in this test's own
/// process group, as an editor that does not make one would: an escape would kill this test.)
async fn kill_zero_stays_inside(options: ClientOptions, mechanism: Mechanism) {
    let outside = Outside::new();
    let harness = harness(
        options.permissions(allow(4)),
        mechanism,
        &outside,
        vec![
            Turn::new().tool_call(
                "t1",
                "bash",
                json!({ "command": "kill -9 0; echo unreachable" }),
            ),
            Turn::text_only("first done"),
            Turn::new().tool_call("t2", "bash", json!({ "command": "echo second-ok" })),
            Turn::text_only("second done"),
        ],
    )
    .await;
    assert_eq!(
        harness.prompt("kill zero").await.stop_reason,
        StopReason::EndTurn
    );
    let first = finished(&harness, "t1").to_string();
    // By its own signal (the pane says it by number).
    assert!(
        first.contains("killed by SIGKILL") || first.contains("killed by signal 9"),
        "{first}"
    );
    assert!(!first.contains("unreachable"), "{first}");
    assert_eq!(
        harness.prompt("again").await.stop_reason,
        StopReason::EndTurn
    );
    let second = finished(&harness, "t2").to_string();
    assert!(second.contains("second-ok"), "{second}");
}

#[tokio::test]
async fn kill_zero_from_a_local_command_stays_inside_under_namespaces() {
    kill_zero_stays_inside(ClientOptions::default(), Mechanism::Auto).await;
}

#[tokio::test]
async fn kill_zero_from_a_local_command_stays_inside_under_the_fallback() {
    kill_zero_stays_inside(ClientOptions::default(), Mechanism::Landlock).await;
}

#[tokio::test]
async fn kill_zero_from_a_terminal_command_stays_inside_under_namespaces() {
    kill_zero_stays_inside(ClientOptions::editor(), Mechanism::Auto).await;
}

#[tokio::test]
async fn kill_zero_from_a_terminal_command_stays_inside_under_the_fallback() {
    kill_zero_stays_inside(ClientOptions::editor(), Mechanism::Landlock).await;
}

/// A raw block device of this machine that this test can read (it runs as root, or with the
/// disk group): without one the claim cannot be shown here, and the test says so.
fn readable_raw_device() -> PathBuf {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .map(|entry| Path::new("/dev").join(entry.file_name()))
        .find(|path| {
            std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_block_device())
                && std::fs::File::open(path).is_ok()
        })
        .expect("no raw block device this test can read: the claim cannot be shown on this machine")
}

/// The command cannot read this test's command line in `/proc` nor a raw device, and (read from
/// outside while it runs) has no capability and `no_new_privs`.
async fn contained(options: ClientOptions, mechanism: Mechanism, tag: &str) {
    let outside = Outside::new();
    let device = readable_raw_device();
    let marker = format!("{tag}{}.5", std::process::id());
    let me = std::process::id();
    let harness = harness(
        options.permissions(allow(4)),
        mechanism,
        &outside,
        vec![
            Turn::new()
                .tool_call(
                    "t1",
                    "bash",
                    json!({ "command": format!(
                        "cat /proc/{me}/cmdline; echo proc-exit=$?; \
                         head -c 1 {device} > /dev/null; echo device-exit=$?",
                        device = device.display()
                    ) }),
                )
                .tool_call(
                    "t2",
                    "bash",
                    json!({ "command": format!("exec sleep {marker}") }),
                ),
            Turn::text_only("done"),
        ],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "contained");
    assert!(started(&[&marker]).await, "the second command never ran");
    let first = finished(&harness, "t1").to_string();
    assert!(first.contains("proc-exit=1"), "{first}");
    let exe = std::fs::read(format!("/proc/{me}/cmdline")).unwrap();
    let exe = String::from_utf8_lossy(exe.split(|b| *b == 0).next().unwrap()).into_owned();
    assert!(
        !first.contains(&exe),
        "the test's command line was read: {first}"
    );
    assert!(first.contains("device-exit=1"), "{first}");
    // The capabilities of the running command, read from outside.
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == marker.as_bytes()))
        })
        .map(|entry| entry.path())
        .expect("the command's process");
    let status = std::fs::read_to_string(pid.join("status")).unwrap();
    for field in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        let value = status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .unwrap()
            .trim();
        assert_eq!(
            u64::from_str_radix(value, 16).unwrap(),
            0,
            "{field} {status}"
        );
    }
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(gone_with(&marker).await);
}

#[tokio::test]
async fn a_local_fallback_command_reads_no_other_proc_no_raw_device_and_has_no_capability() {
    contained(ClientOptions::default(), Mechanism::Landlock, "6121").await;
}

#[tokio::test]
async fn a_terminal_fallback_command_reads_no_other_proc_no_raw_device_and_has_no_capability() {
    contained(ClientOptions::editor(), Mechanism::Landlock, "6122").await;
}

#[tokio::test]
async fn a_namespaced_command_reads_no_other_proc_no_raw_device_and_has_no_capability() {
    contained(ClientOptions::default(), Mechanism::Auto, "6123").await;
}
