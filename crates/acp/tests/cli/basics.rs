//! Help, version, exit codes, and logs that never reach stdout.

use super::common::{Sandbox, run};

#[test]
fn help_lists_the_commands_examples_and_exit_codes() {
    let sandbox = Sandbox::new();
    let out = run(sandbox.keel(&["--help"]));
    assert_eq!(out.code, 0);
    for needle in [
        "acp",
        "exec",
        "demo",
        "tools",
        "tool",
        "permissions",
        "config",
        "Examples:",
        "Exit codes:",
        "--log-file",
        "--verbose",
    ] {
        assert!(
            out.stdout.contains(needle),
            "--help lacks {needle}:\n{}",
            out.stdout
        );
    }
    let out = run(sandbox.keel(&["exec", "--help"]));
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("turn_finished"), "{}", out.stdout);
    assert!(out.stdout.contains("--mode"), "{}", out.stdout);
}

#[test]
fn version_prints_the_crate_version() {
    let out = run(Sandbox::new().keel(&["--version"]));
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout, format!("keel {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn usage_errors_exit_2_on_stderr_only() {
    let sandbox = Sandbox::new();
    let out = run(sandbox.keel(&["frobnicate"]));
    assert_eq!(out.code, 2);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("frobnicate"), "{}", out.stderr);
    let out = run(sandbox.keel(&["config", "show", "--mode", "sometimes"]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("read-only"), "{}", out.stderr);
}

#[test]
fn logs_go_to_stderr_never_stdout() {
    let sandbox = Sandbox::new();
    let quiet = run(sandbox.keel(&["config", "show"]));
    assert_eq!(quiet.code, 0);
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);

    let loud = run(sandbox.keel(&["-vv", "config", "show"]));
    assert_eq!(loud.code, 0);
    assert_eq!(loud.stdout, quiet.stdout, "-vv changed stdout");
    assert!(
        loud.stderr.contains("configuration loaded"),
        "{}",
        loud.stderr
    );

    let mut command = sandbox.keel(&["config", "show"]);
    command.env("RUST_LOG", "trace");
    let traced = run(command);
    assert_eq!(traced.stdout, quiet.stdout, "RUST_LOG changed stdout");
    assert!(traced.stderr.contains("DEBUG"), "{}", traced.stderr);
}

#[test]
fn verbose_runs_of_every_kind_keep_stdout_to_the_result() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.workspace.join("a.txt"), "alpha\n");
    let quiet = run(sandbox.keel(&["tools", "--json"]));
    let loud = run(sandbox.keel(&["-vvv", "tools", "--json"]));
    assert_eq!(loud.stdout, quiet.stdout);

    let call = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["tool", "call", "read", r#"{"file_path":"a.txt"}"#]);
        let mut command = sandbox.keel(&args);
        command.env("RUST_LOG", "debug");
        run(command)
    };
    let out = call(&["-vv"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let envelope: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not just the envelope ({e}):\n{}", out.stdout));
    assert_eq!(envelope["type"], "output");
    assert!(
        out.stderr.contains("DEBUG") || out.stderr.contains("INFO"),
        "{}",
        out.stderr
    );
}

#[test]
fn log_file_takes_the_logs() {
    let sandbox = Sandbox::new();
    let log = sandbox.home.join("logs/keel.log");
    let out = run(sandbox.keel(&["-vv", "--log-file", log.to_str().unwrap(), "config", "show"]));
    assert_eq!(out.code, 0);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("configuration loaded"), "{logged}");
}

#[test]
fn acp_logs_to_the_state_dir_by_default_and_ends_cleanly_on_eof() {
    let sandbox = Sandbox::new();
    let mut command = sandbox.keel(&["-v", "acp"]);
    command.write_stdin("");
    let out = run(command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.is_empty(),
        "stdout is the protocol: {}",
        out.stdout
    );
    assert!(
        out.stderr.is_empty(),
        "the editor's stderr stays clean: {}",
        out.stderr
    );
    let log = std::fs::read_to_string(sandbox.home.join(".local/state/keel/keel.log")).unwrap();
    assert!(log.contains("serving on stdio"), "{log}");
}

/// An editor that stops reading Keel's output (it closed its end of the pipe: a restart, a
/// crash) has ended the connection as surely as one that closed Keel's input: Keel ends serving
/// cleanly, exit status 0 and nothing on stderr, instead of failing on its next write.
#[test]
fn acp_ends_cleanly_when_the_editor_stops_reading() {
    use std::io::Write as _;
    let sandbox = Sandbox::new();
    let log = sandbox.home.join("acp.log");
    let mut child = sandbox
        .keel_process(&["--log-file", log.to_str().unwrap(), "acp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    // Every answer now meets a closed pipe; stdin stays open, so only the failed write can end
    // the server.
    for id in 0..3 {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":1}}}}"#
        )
        .unwrap();
    }
    stdin.flush().unwrap();
    let ended = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        child.try_wait().unwrap().is_some()
    });
    if !ended {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert!(
        ended,
        "keel acp kept running with nobody reading its output"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "the editor's stderr stays clean: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn acp_stopped_by_sigterm_exits_cleanly_and_removes_its_scratch() {
    let sandbox = Sandbox::new();
    let tmp = sandbox.home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let log = sandbox.home.join("acp.log");
    let mut command = sandbox.keel_process(&["--log-file", log.to_str().unwrap(), "acp"]);
    let mut child = command
        .env("TMPDIR", &tmp)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it serves (its scratch directory exists by then).
    let serving = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("serving on stdio"))
    });
    assert!(serving, "keel acp did not start");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        1,
        "one scratch directory"
    );
    // `Child::wait` closes stdin first; keep it open so the signal, not EOF, ends the server.
    let stdin = child.stdin.take();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    drop(stdin);
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "scratch left behind"
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("SIGTERM: shutting down")
    );
}
