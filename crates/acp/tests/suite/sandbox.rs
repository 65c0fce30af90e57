//! The kernel sandbox end to end: the real engine over ACP, every prompt answered "allow", the
//! command run by the real `keel` binary as the helper, locally and in the editor's terminal
//! pane (the test client runs it as a real subprocess), with namespaces and with the forced
//! Landlock + seccomp fallback.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::StopReason;
use keel_core::runtime::sandbox::Mechanism;
use keel_testkit::acp_client::{ClientOptions, Event, TerminalRecord};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{EngineHarness, engine_config, gone_with};
use super::turns::allow;

const CANARY: &str = "canary-7d41c0e9-secret";

/// A home directory with a secret and an allowlisted tool directory, and a directory outside
/// the workspace; both outside every path the sandbox shows.
struct Outside {
    _dir: tempfile::TempDir,
    home: PathBuf,
    elsewhere: PathBuf,
}

impl Outside {
    fn new() -> Outside {
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
fn toolchain_dirs() -> Vec<String> {
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

fn git_init(root: &Path) {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success());
}

async fn harness(
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
fn finished(harness: &EngineHarness, call_id: &str) -> Value {
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
        // Documented gap of the fallback: .git/hooks inside the workspace stays writable.
        let _ = std::fs::remove_file(harness.root.join(".git/hooks/pre-commit"));
    } else {
        assert!(!output.contains("hook-exit=0"), "{output}");
        assert!(!harness.root.join(".git/hooks/pre-commit").exists());
        assert!(!harness.root.join(".git-moved").exists(), "{output}");
    }
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
    assert_eq!(command, env!("CARGO_BIN_EXE_keel"));
    assert_eq!(args[..2], ["sandbox".to_owned(), "run".to_owned()]);
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
        assert_eq!(stdout.matches("\n  ok   ").count(), 8, "{stdout}");
        assert!(!stdout.contains("FAIL"), "{stdout}");
        assert!(stdout.contains("commands run confined"), "{stdout}");
    }
}
