//! The Landlock fallback's warm holder (decision 0039): contained commands forked from one
//! per-session Landlock domain instead of building their own. Real processes under the forced
//! fallback: a command from the holder cannot read a masked credential, write, or connect; a
//! cancel ends it and everything it started (a `setsid` daemon included); a command that kills
//! its starter or its holder leaves nothing alive and is reported as killed, and the next one
//! gets a new holder; a credential created between two commands is masked for the second, and
//! a command running under the old holder finishes there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::runtime::process::{OutputCapture, ShellEnding, ShellOutput};
use keel_core::runtime::sandbox::Confinement;
use keel_core::runtime::sandbox::profile::Mechanism;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::ProgressSink;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "WARM-SECRET-3f9e21";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: PathBuf,
    runtime: Runtime,
}

/// A workspace with credentials, its session's commands under the fallback, forced.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    let scratch = base.join("scratch");
    write(&root.join(".env"), &format!("TOKEN={SECRET}-env\n"));
    write(&root.join("README.md"), "# warm\n");
    write(&root.join("src/lib.rs"), "pub fn plain() {}\n");
    write(
        &root.join("deploy/.ssh/id_ed25519"),
        &format!("{SECRET}-ssh\n"),
    );
    std::fs::create_dir_all(&scratch).unwrap();
    let mut sandbox = super::tool_support::sandbox_spec();
    sandbox.settings.mechanism = Mechanism::Landlock;
    sandbox.credentials = Some(keel_core::policy::watchdog::credential_rules(None));
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![root.clone()],
        requirements: RequirementSet::fs_read_write(
            &["{workspace}/**", "{session}/**"],
            &["{workspace}/**"],
        )
        .with_shell(ShellRunRequirement::any_args("bash")),
        scratch_dir: scratch.clone(),
        sandbox,
        ..RuntimeConfig::default()
    })
    .unwrap();
    Fixture {
        _dir: dir,
        root,
        scratch,
        runtime,
    }
}

impl Fixture {
    /// Starts `command` contained (nobody approved it) and waits for it, cancelled by `cancel`.
    async fn run_with(&self, command: &str, cancel: &CancellationToken) -> ShellOutput {
        let runtime = self.runtime.contained(command, command);
        let mut process = runtime.spawn_shell(command, &self.root).unwrap();
        process
            .wait_with_output(
                OutputCapture {
                    limit: 64 * 1024,
                    sidecar: self.scratch.join(format!("out-{}", uuid())),
                },
                Duration::from_secs(60),
                cancel,
                &ProgressSink::default(),
            )
            .await
            .unwrap()
    }

    async fn run(&self, command: &str) -> ShellOutput {
        self.run_with(command, &CancellationToken::new()).await
    }

    /// The session's private temporary directory (`TMPDIR` of its commands).
    fn tmp(&self) -> PathBuf {
        self.scratch.join("tmp")
    }
}

fn uuid() -> String {
    format!(
        "{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Ran confined by the fallback, from the warm holder (its note says so).
fn assert_warm(output: &ShellOutput) {
    match &output.confinement {
        Confinement::Confined {
            mechanism, notes, ..
        } => {
            assert_eq!(mechanism, "landlock", "{output:?}");
            assert!(
                notes.iter().any(|note| note.contains("warm holder")),
                "not from the warm holder: {notes:?}"
            );
        }
        other => panic!("not confined: {other:?}"),
    }
}

/// Whether a live (not zombie) process has `arg` among its arguments.
fn running_with(arg: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            return false;
        };
        cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes())
            && std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
    })
}

/// A `sleep` argument unique to this test process and `n`, so the test can find the process.
fn sleep_arg(n: u32) -> String {
    format!("600.{}0{n}", std::process::id())
}

#[tokio::test]
async fn a_command_from_the_warm_holder_reads_no_secret_writes_nothing_and_reaches_no_host() {
    let f = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    let read = f
        .run("cat .env deploy/.ssh/id_ed25519 2>&1; cat README.md src/lib.rs")
        .await;
    assert_warm(&read);
    assert!(!read.text.contains(SECRET), "{}", read.text);
    assert!(
        read.text.contains("# warm\npub fn plain() {}"),
        "{}",
        read.text
    );

    let wrote = f
        .run("echo planted > planted.txt; echo more >> README.md; mkdir made; echo done")
        .await;
    assert_warm(&wrote);
    assert!(wrote.text.contains("done"), "{}", wrote.text);
    assert!(!f.root.join("planted.txt").exists());
    assert!(!f.root.join("made").exists());
    assert_eq!(
        std::fs::read_to_string(f.root.join("README.md")).unwrap(),
        "# warm\n"
    );

    let connected = f
        .run(&format!(
            "(exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED) 2>&1; echo tried"
        ))
        .await;
    assert_warm(&connected);
    assert!(connected.text.contains("tried"), "{}", connected.text);
    assert!(!connected.text.contains("CONNECTED"), "{}", connected.text);
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "a command connected");

    // The environment is the allowlist, and exit codes come back as they were.
    let status = f.run("exit 7").await;
    assert_warm(&status);
    assert_eq!(status.exit_code, Some(7));
}

#[tokio::test]
async fn a_cancel_ends_a_warm_command_and_the_daemon_it_started() {
    let f = fixture();
    let (daemon, main) = (sleep_arg(1), sleep_arg(2));
    let command = format!("(setsid sleep {daemon} &); exec sleep {main}");
    let cancel = CancellationToken::new();
    let waiting = {
        let cancel = cancel.clone();
        let (daemon, main) = (daemon.clone(), main.clone());
        tokio::spawn(async move {
            while !(running_with(&daemon) && running_with(&main)) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cancel.cancel();
        })
    };
    let output = f.run_with(&command, &cancel).await;
    waiting.await.unwrap();
    assert_warm(&output);
    assert_eq!(output.ending, ShellEnding::Cancelled);
    assert!(output.gone_verified, "{output:?}");
    assert!(!running_with(&daemon), "the daemon outlived the cancel");
    assert!(!running_with(&main));
    // The holder lives on for the next command.
    let next = f.run("echo next").await;
    assert_warm(&next);
    assert_eq!(next.text, "next\n");
}

#[tokio::test]
async fn a_command_that_kills_its_starter_or_its_holder_leaves_nothing_alive() {
    let f = fixture();
    let daemon = sleep_arg(3);
    // The daemon says it is up (in the session's private /tmp) before the starter is killed.
    let command = format!(
        "setsid sh -c 'echo up > \"$TMPDIR/up\"; exec sleep {daemon}' & \
         while [ ! -e \"$TMPDIR/up\" ]; do :; done; kill -9 $PPID; exec sleep {}",
        sleep_arg(4)
    );
    let output = f.run(&command).await;
    assert!(f.tmp().join("up").exists());
    assert_eq!(output.signal.as_deref(), Some("SIGKILL"), "{output:?}");
    assert!(!running_with(&daemon), "the daemon outlived its starter");
    assert!(!running_with(&sleep_arg(4)));

    // Everything in the domain, the holder included: `kill -9 -1` reaches only the domain
    // with Landlock's signal scope (ABI 6), which this test needs (else it would reach every
    // process of the user).
    assert!(
        keel_core::runtime::sandbox::landlock_abi().is_some_and(|abi| abi >= 6),
        "this kernel's Landlock cannot scope signals"
    );
    let daemon = sleep_arg(5);
    let holder_pid = f.runtime.warm_holders().pid().unwrap();
    let command = format!(
        "setsid sh -c 'echo up > \"$TMPDIR/up2\"; exec sleep {daemon}' & \
         while [ ! -e \"$TMPDIR/up2\" ]; do :; done; kill -9 -1; exec sleep {}",
        sleep_arg(6)
    );
    let output = f.run(&command).await;
    // `kill -1` spares its sender: the zygote ends it once it sees the holder gone.
    assert_eq!(output.signal.as_deref(), Some("SIGKILL"), "{output:?}");
    assert!(!running_with(&daemon));
    assert!(!running_with(&sleep_arg(6)));
    // The zygote (outside the domain) was not reachable; it ended itself with its holder, and
    // the next command gets a new one.
    let next = f.run("cat README.md").await;
    assert_warm(&next);
    assert!(next.text.contains("# warm"), "{}", next.text);
    assert!(f.runtime.warm_holders().started() >= 2);
    assert_ne!(f.runtime.warm_holders().pid(), Some(holder_pid));
}

#[tokio::test]
async fn a_credential_created_between_two_commands_is_masked_for_the_second() {
    let f = fixture();
    let first = f.run("cat src/lib.rs").await;
    assert_warm(&first);
    let first_holder = f.runtime.warm_holders().pid();

    // A command that runs on under the first holder while the list changes.
    let go = f.tmp().join("go");
    let slow_command = "while [ ! -e \"$TMPDIR/go\" ]; do sleep 0.01; done; cat README.md";
    let slow = {
        let runtime = f.runtime.contained(slow_command, slow_command);
        let mut process = runtime.spawn_shell(slow_command, &f.root).unwrap();
        let sidecar = f.scratch.join("slow-out");
        tokio::spawn(async move {
            process
                .wait_with_output(
                    OutputCapture {
                        limit: 64 * 1024,
                        sidecar,
                    },
                    Duration::from_secs(60),
                    &CancellationToken::new(),
                    &ProgressSink::default(),
                )
                .await
                .unwrap()
        })
    };

    // In a directory the first holder's masks granted whole.
    write(&f.root.join("src/.env"), &format!("{SECRET}-new\n"));
    let second = f.run("cat src/.env 2>&1; cat src/lib.rs").await;
    assert_warm(&second);
    assert!(!second.text.contains(SECRET), "{}", second.text);
    assert!(second.text.contains("pub fn plain()"), "{}", second.text);
    let second_holder = f.runtime.warm_holders().pid();
    assert_ne!(
        second_holder, first_holder,
        "the masked list changed, the holder did not"
    );

    // A plain file beside a masked one (a rule added to the same ruleset): readable from the
    // next command on, through another holder.
    write(&f.root.join("CHANGES.md"), "changes\n");
    let third = f.run("cat CHANGES.md").await;
    assert_warm(&third);
    assert_eq!(third.text, "changes\n");
    assert_ne!(f.runtime.warm_holders().pid(), second_holder);

    std::fs::write(&go, "").unwrap();
    let slow = slow.await.unwrap();
    assert_warm(&slow);
    assert_eq!(slow.exit_code, Some(0), "{slow:?}");
    assert_eq!(slow.text, "# warm\n");
}
