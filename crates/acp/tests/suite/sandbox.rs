//! The kernel sandbox end to end: the real engine over ACP, every prompt answered "allow", the
//! command run by the real `keel` binary as the helper, locally and in the editor's terminal
//! pane (the test client runs it as a real subprocess), with namespaces and with the forced
//! Landlock + seccomp fallback.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_core::runtime::sandbox::Mechanism;
use keel_testkit::acp_client::{ClientOptions, Event, PermissionReply, TerminalRecord};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{EngineHarness, engine_config, gone_with};
use super::turns::allow;

const CANARY: &str = "canary-7d41c0e9-secret";

/// A home directory with a secret and an allowlisted tool directory, and a directory outside
/// the workspace; both outside every path the sandbox shows.
pub(super) struct Outside {
    _dir: tempfile::TempDir,
    pub(super) home: PathBuf,
    pub(super) elsewhere: PathBuf,
}

impl Outside {
    pub(super) fn new() -> Outside {
        // Not under /tmp, so hiding is the sandbox's doing, not an accident of the private /tmp.
        let base = std::env::var_os("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(base).unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_canary"), CANARY).unwrap();
        std::fs::create_dir_all(home.join(".cargo")).unwrap();
        std::fs::write(home.join(".cargo/visible.txt"), "tool-config-visible").unwrap();
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        Outside {
            _dir: dir,
            home,
            elsewhere,
        }
    }
}

/// Cargo, rustup and git's configuration as installed for this test run (the test's home is a
/// fake one).
pub(super) fn toolchain_dirs() -> Vec<String> {
    let home = std::env::var("HOME").unwrap_or_default();
    let cargo = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{home}/.cargo"));
    let rustup = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{home}/.rustup"));
    // git reads the user's configuration; under the fallback an unreadable file is an error.
    vec![
        cargo,
        rustup,
        format!("{home}/.gitconfig"),
        format!("{home}/.config/git"),
    ]
}

pub(super) fn git_init(root: &Path) {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success());
}

pub(super) async fn harness(
    options: ClientOptions,
    mechanism: Mechanism,
    outside: &Outside,
    turns: Vec<Turn>,
) -> EngineHarness {
    let mock = MockModel::start().await;
    for turn in turns {
        mock.push_anthropic(turn);
    }
    let mut config = engine_config(Some(&mock), Path::new("/nonexistent"));
    config.sandbox.home = Some(outside.home.clone());
    config.sandbox.settings.mechanism = mechanism;
    config.sandbox.settings.readable = toolchain_dirs();
    EngineHarness::with_config(
        options,
        &[
            ("Cargo.toml", "[package]\nname = \"probe\"\n"),
            ("src/lib.rs", ""),
        ],
        mock,
        config,
    )
    .await
}

/// The final update of a call (raw, not redacted).
pub(super) fn finished(harness: &EngineHarness, call_id: &str) -> Value {
    harness
        .client
        .events()
        .iter()
        .map(Event::to_json)
        .rfind(|event| {
            event["update"]["toolCallId"] == call_id
                && matches!(
                    event["update"]["status"].as_str(),
                    Some("completed" | "failed")
                )
        })
        .map(|event| event["update"].clone())
        .unwrap_or_else(|| panic!("no final update for {call_id}"))
}

/// Runs the probe script through the bash tool and checks every confinement claim.
async fn probe(options: ClientOptions, mechanism: Mechanism, expected: &str) {
    let outside = Outside::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let daemon = format!("600.{}", std::process::id());
    // The attacks go through `eval` of a printf'd string: a command the classifier cannot
    // read (as if it misread it), so the kernel is the only thing in the way.
    let hidden = |command: String| {
        let encoded: String = command.bytes().map(|b| format!("\\x{b:02x}")).collect();
        format!("eval \"$(printf '{encoded}')\"")
    };
    let script = [
        hidden(format!(
            "cat {}; echo canary-exit=$?",
            outside.home.join(".ssh/id_canary").display()
        )),
        hidden(format!(
            "cat {}; echo",
            outside.home.join(".cargo/visible.txt").display()
        )),
        hidden(format!(
            "echo escaped > {}/escaped; echo outside-exit=$?",
            outside.elsewhere.display()
        )),
        hidden("echo evil > .git/hooks/pre-commit; echo hook-exit=$?".to_owned()),
        // Moving the protected directory's parent away and making a fresh one fails too (not
        // under the fallback, which does not protect .git: docs/sandbox.md).
        if mechanism == Mechanism::Landlock {
            String::new()
        } else {
            hidden(
                "mv .git .git-moved; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit"
                    .to_owned(),
            )
        },
        hidden(format!(
            "(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED; echo connect-done"
        )),
        "cargo --version && echo CARGO-OK".to_owned(),
        "git status --short && echo GIT-OK".to_owned(),
        "ls && echo LS-OK".to_owned(),
        "echo tmp > \"$TMPDIR/mine\" && cat \"$TMPDIR/mine\" && echo TMP-OK".to_owned(),
        hidden(format!(
            "(setsid sleep {daemon} > /dev/null 2>&1 &); echo daemon-started"
        )),
        // A file that redirects git's configuration elsewhere: no bind mount can cover a file
        // that does not exist yet, so Keel puts it back after the command
        // (last: git fails in this command once it is there).
        hidden("echo /tmp/elsewhere > .git/commondir; echo commondir-exit=$?".to_owned()),
    ]
    .join("\n");
    let harness = harness(
        // Every prompt allowed (the script asks more than once: eval, redirections outside).
        options.permissions(allow(8)),
        mechanism,
        &outside,
        vec![
            Turn::new().tool_call("t1", "bash", json!({ "command": script })),
            Turn::text_only("done"),
        ],
    )
    .await;
    git_init(&harness.root);
    assert_eq!(
        harness.prompt("probe").await.stop_reason,
        StopReason::EndTurn
    );
    let update = finished(&harness, "t1");
    let data = &update["rawOutput"]["data"];
    let output = data["output"].as_str().unwrap_or_default().to_owned();
    assert_eq!(data["sandbox"], json!(expected), "{update:#}");
    // The secret in the hidden home is not there; the allowlisted tool directory is.
    assert!(!output.contains(CANARY), "{output}");
    assert!(!output.contains("canary-exit=0"), "{output}");
    assert!(output.contains("tool-config-visible"), "{output}");
    // Nothing outside the workspace can be written.
    assert!(!output.contains("outside-exit=0"), "{output}");
    assert!(!outside.elsewhere.join("escaped").exists());
    // The loopback listener was not reached.
    assert!(output.contains("connect-done"), "{output}");
    assert!(!output.contains("CONNECTED"), "{output}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "a connection reached the listener"
    );
    // Everyday tools still work, and the private /tmp.
    for ok in ["CARGO-OK", "GIT-OK", "LS-OK", "TMP-OK", "daemon-started"] {
        assert!(output.contains(ok), "{ok} missing from {output}");
    }
    if mechanism == Mechanism::Landlock {
        // The fallback cannot keep .git/hooks read-only: Keel removes the planted hook after
        // the command, and says so.
        assert!(!harness.root.join(".git/hooks/pre-commit").exists());
        assert!(
            update
                .to_string()
                .contains("the command created .git/hooks/pre-commit (a hook, which git runs)"),
            "{update:#}"
        );
    } else {
        assert!(!output.contains("hook-exit=0"), "{output}");
        assert!(!harness.root.join(".git/hooks/pre-commit").exists());
        assert!(!harness.root.join(".git-moved").exists(), "{output}");
    }
    // Under either mechanism the redirect is gone again, and the user is told.
    assert!(!harness.root.join(".git/commondir").exists(), "{output}");
    assert!(
        update.to_string().contains(
            "the command created .git/commondir (it tells git where to read its configuration); \
             Keel removed it"
        ),
        "{update:#}"
    );
    // The daemon left the process group and the session; it is gone all the same.
    assert!(gone_with(&daemon).await, "the daemon outlived its command");
}

#[tokio::test]
async fn local_commands_are_confined_by_namespaces() {
    probe(ClientOptions::default(), Mechanism::Auto, "namespaces").await;
}

#[tokio::test]
async fn terminal_commands_are_confined_by_namespaces() {
    probe(ClientOptions::editor(), Mechanism::Auto, "namespaces").await;
}

#[tokio::test]
async fn local_commands_are_confined_by_the_landlock_fallback() {
    probe(ClientOptions::default(), Mechanism::Landlock, "landlock").await;
}

#[tokio::test]
async fn terminal_commands_are_confined_by_the_landlock_fallback() {
    probe(ClientOptions::editor(), Mechanism::Landlock, "landlock").await;
}

/// Cancelling a command that started a daemon ends both, locally and in the terminal pane.
async fn cancel_kills_the_tree(options: ClientOptions, mechanism: Mechanism, tag: u32) {
    let outside = Outside::new();
    let daemon = format!("600.{}{tag}1", std::process::id());
    let main = format!("600.{}{tag}2", std::process::id());
    let harness = harness(
        options.permissions(allow(1)),
        mechanism,
        &outside,
        vec![Turn::new().tool_call(
            "t1",
            "bash",
            json!({ "command": format!("(setsid sleep {daemon} &); echo started; exec sleep {main}") }),
        )],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "wait");
    let mut started = false;
    for _ in 0..400 {
        if super::support::running_with(&daemon) && super::support::running_with(&main) {
            started = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(started, "the command and its daemon never ran");
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(gone_with(&main).await, "the command outlived the cancel");
    assert!(gone_with(&daemon).await, "the daemon outlived the cancel");
}

#[tokio::test]
async fn cancel_ends_a_local_command_and_its_daemon() {
    cancel_kills_the_tree(ClientOptions::default(), Mechanism::Auto, 1).await;
}

#[tokio::test]
async fn cancel_ends_a_terminal_command_and_its_daemon() {
    cancel_kills_the_tree(ClientOptions::editor(), Mechanism::Auto, 2).await;
}

#[tokio::test]
async fn cancel_ends_a_fallback_command_and_its_daemon() {
    cancel_kills_the_tree(ClientOptions::default(), Mechanism::Landlock, 3).await;
}

#[tokio::test]
async fn the_terminal_runs_the_helper_and_releases_after_cancel() {
    let outside = Outside::new();
    let harness = harness(
        ClientOptions::editor().permissions(allow(1)),
        Mechanism::Auto,
        &outside,
        vec![Turn::new().tool_call("t1", "bash", json!({"command": "exec sleep 600.999"}))],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "wait");
    harness
        .client
        .wait_for("the terminal", |events| {
            events
                .iter()
                .any(|event| matches!(event, Event::Terminal(TerminalRecord::Create { .. })))
        })
        .await;
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    let records = harness.client.terminal_records();
    let Some(TerminalRecord::Create { command, args, .. }) = records.first() else {
        panic!("{records:?}");
    };
    // The small helper installed beside `keel`.
    assert_eq!(command, env!("CARGO_BIN_EXE_keel-sandbox"));
    assert_eq!(args[..1], ["run".to_owned()]);
    assert!(
        records
            .iter()
            .any(|r| matches!(r, TerminalRecord::Kill { .. })),
        "{records:?}"
    );
    harness
        .client
        .wait_for("the release", |events| {
            events
                .iter()
                .any(|event| matches!(event, Event::Terminal(TerminalRecord::Release { .. })))
        })
        .await;
    assert!(gone_with("600.999").await);
}

/// `keel sandbox check` runs the real helper through every claim, under both mechanisms.
#[test]
fn sandbox_check_proves_both_mechanisms() {
    let config = tempfile::tempdir().unwrap();
    for (mechanism, available) in [
        ("auto", "namespaces (user, mount, PID, network): available"),
        ("landlock", "Landlock + seccomp fallback: available"),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["sandbox", "check", "--workspace"])
            .arg(config.path())
            .env("XDG_CONFIG_HOME", config.path())
            .env("KEEL_SANDBOX_MECHANISM", mechanism)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains(available), "{stdout}");
        // Thirteen claims for each mechanism, four of the guard, and five of the filtering
        // proxy.
        assert_eq!(stdout.matches("\n  ok   ").count(), 44, "{stdout}");
        for claim in [
            "`kill -9 0` from the command stays inside it",
            "another process's /proc (its command line) cannot be read",
            "a raw device cannot be read",
            "the sandbox's PID 1 cannot be traced or read",
            "the command has no capability",
            "a daemon dies when the helper is killed with SIGKILL",
            "a nested repository whose configuration runs a program",
        ] {
            assert_eq!(stdout.matches(claim).count(), 2, "{claim}: {stdout}");
        }
        assert_eq!(
            stdout
                .matches("an allowed host is reached through the filtering proxy")
                .count(),
            2,
            "{stdout}"
        );
        assert!(!stdout.contains("FAIL"), "{stdout}");
        assert!(stdout.contains("commands run confined"), "{stdout}");
        // Under namespaces the claims are proved through a namespace keeper, as commands run.
        assert_eq!(
            stdout
                .matches("the probe ran in a network namespace from the session's namespace keeper")
                .count(),
            1,
            "{stdout}"
        );
    }
}

/// "Allow once without the sandbox": a call asking for `unsandboxed: true` gets its own prompt
/// (its own option ids) even when the command itself is allowed for the session; once is once,
/// "always" is remembered for the approval key; the plain command stays confined throughout.
async fn escalation(options: ClientOptions) {
    let outside = Outside::new();
    let data = outside.elsewhere.join("data.txt");
    std::fs::write(&data, "outside-data-5b1e").unwrap();
    let bash = |id: &str, unsandboxed: bool| {
        let mut args = json!({ "command": "sh probe.sh" });
        if unsandboxed {
            args["unsandboxed"] = json!(true);
        }
        Turn::new().tool_call(id, "bash", args)
    };
    let harness = harness(
        options.permissions([
            PermissionReply::Choose(PermissionOptionKind::AllowAlways),
            PermissionReply::Choose(PermissionOptionKind::AllowOnce),
            PermissionReply::Choose(PermissionOptionKind::AllowAlways),
        ]),
        Mechanism::Auto,
        &outside,
        vec![
            bash("t1", false),
            bash("t2", true),
            bash("t3", true),
            bash("t4", true),
            bash("t5", false),
            Turn::text_only("done"),
        ],
    )
    .await;
    std::fs::write(
        harness.root.join("probe.sh"),
        format!("cat {}; echo probe-done\n", data.display()),
    )
    .unwrap();
    assert_eq!(
        harness.prompt("probe").await.stop_reason,
        StopReason::EndTurn
    );
    let ran = |id: &str| {
        let update = finished(&harness, id);
        let data = &update["rawOutput"]["data"];
        let output = data["output"].as_str().unwrap_or_default().to_owned();
        assert!(output.contains("probe-done"), "{update:#}");
        (
            data["sandbox"].as_str().unwrap_or_default().to_owned(),
            output,
        )
    };
    for (id, sandbox, sees) in [
        ("t1", "namespaces", false),
        ("t2", "unconfined", true),
        ("t3", "unconfined", true),
        ("t4", "unconfined", true),
        ("t5", "namespaces", false),
    ] {
        let (label, output) = ran(id);
        assert_eq!(label, sandbox, "{id}: {output}");
        assert_eq!(output.contains("outside-data-5b1e"), sees, "{id}: {output}");
    }
    // t1 (the command), t2 (escalation, once), t3 (escalation, always); t4 and t5 not asked.
    let requests = harness.client.permission_requests();
    let ids = |i: usize| -> Vec<String> {
        requests[i]
            .options
            .iter()
            .map(|o| o.option_id.to_string())
            .collect()
    };
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert!(ids(0).contains(&"allow-once".to_owned()), "{:?}", ids(0));
    for i in [1, 2] {
        assert_eq!(
            ids(i),
            [
                "allow-once-unsandboxed",
                "allow-always-unsandboxed",
                "reject-once",
                "reject-always"
            ],
        );
        assert_eq!(
            requests[i].options[0].name,
            "Allow once without the sandbox"
        );
    }
}

#[tokio::test]
async fn running_unsandboxed_is_a_separate_escalation_locally() {
    escalation(ClientOptions::default()).await;
}

#[tokio::test]
async fn running_unsandboxed_is_a_separate_escalation_in_the_terminal() {
    escalation(ClientOptions::editor()).await;
}

/// A test runner in the workspace still works in the sandbox: it reads the toolchain (cargo,
/// rustc from the readable toolchain directories), writes its results into the workspace and
/// uses the private /tmp, with every prompt allowed.
async fn test_runner(mechanism: Mechanism, expected: &str) {
    let outside = Outside::new();
    let harness = harness(
        ClientOptions::default().permissions(allow(4)),
        mechanism,
        &outside,
        vec![
            Turn::new().tool_call("t1", "bash", json!({ "command": "sh run-tests.sh" })),
            Turn::text_only("done"),
        ],
    )
    .await;
    std::fs::create_dir_all(harness.root.join("tests")).unwrap();
    std::fs::write(
        harness.root.join("tests/add.sh"),
        "[ \"$(expr 2 + 3)\" = 5 ] && echo 'add: ok'\n",
    )
    .unwrap();
    std::fs::write(
        harness.root.join("tests/toolchain.sh"),
        "cargo --version >/dev/null && rustc --version >/dev/null && echo 'toolchain: ok'\n",
    )
    .unwrap();
    std::fs::write(
        harness.root.join("run-tests.sh"),
        "set -e\nmkdir -p results\nfor t in tests/*.sh; do\n  sh \"$t\" > \"$TMPDIR/out\"\n  \
         cat \"$TMPDIR/out\" >> results/report.txt\ndone\necho \"passed: $(wc -l < \
         results/report.txt)\"\n",
    )
    .unwrap();
    assert_eq!(
        harness.prompt("run the tests").await.stop_reason,
        StopReason::EndTurn
    );
    let update = finished(&harness, "t1");
    let data = &update["rawOutput"]["data"];
    assert_eq!(data["sandbox"], json!(expected), "{update:#}");
    assert_eq!(data["exit_code"], json!(0), "{update:#}");
    assert!(
        data["output"]
            .as_str()
            .unwrap_or_default()
            .contains("passed: 2"),
        "{update:#}"
    );
    let report = std::fs::read_to_string(harness.root.join("results/report.txt")).unwrap();
    assert_eq!(report, "add: ok\ntoolchain: ok\n");
}

#[tokio::test]
async fn a_test_runner_in_the_workspace_works_under_namespaces() {
    test_runner(Mechanism::Auto, "namespaces").await;
}

#[tokio::test]
async fn a_test_runner_in_the_workspace_works_under_the_fallback() {
    test_runner(Mechanism::Landlock, "landlock").await;
}
