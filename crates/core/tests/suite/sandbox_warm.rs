//! The Landlock fallback's warm holder (decision 0039): contained commands forked from one
//! per-session Landlock domain instead of building their own. Real processes under the forced
//! fallback: a command from the holder cannot read a masked credential, write, or connect; a
//! cancel ends it and everything it started (a `setsid` daemon included); a command that kills
//! its starter or its holder leaves nothing alive and is reported as killed, and the next one
//! gets a new holder; a credential created between two commands is masked for the second, and
//! a command running under the old holder finishes there; a zygote that does not answer holds
//! no runtime worker and is replaced.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::runtime::process::{OutputCapture, ShellEnding, ShellOutput};
use keel_core::runtime::sandbox::Confinement;
use keel_core::runtime::sandbox::profile::Mechanism;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::ProgressSink;
use keel_testkit::measure::running_with;
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

/// A workspace with credentials, its session's commands under `mechanism`, forced.
fn fixture(mechanism: Mechanism) -> Fixture {
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
    sandbox.settings.mechanism = mechanism;
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
        self.scratch
            .join(keel_core::runtime::sandbox::CONTAINED_TMP)
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

/// Ran confined by `label` (`landlock`, `namespaces`), from the warm holder (its note says
/// so). A machine without the mechanism fails here, with the confinement it got.
fn assert_warm_by(output: &ShellOutput, label: &str) {
    match &output.confinement {
        Confinement::Confined {
            mechanism, notes, ..
        } => {
            assert_eq!(mechanism, label, "not confined by {label}: {output:?}");
            assert!(
                notes.iter().any(|note| note.contains("warm holder")),
                "not from the warm holder: {notes:?}"
            );
        }
        other => panic!("not confined: {other:?}"),
    }
}

/// Ran confined by the fallback, from the warm holder.
fn assert_warm(output: &ShellOutput) {
    assert_warm_by(output, "landlock");
}

/// The status line's label of `mechanism`.
fn label(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::Namespaces => "namespaces",
        _ => "landlock",
    }
}

/// A `sleep` argument unique to this test process and `n`, so the test can find the process.
fn sleep_arg(n: u32) -> String {
    format!("600.{}0{n}", std::process::id())
}

#[tokio::test]
async fn a_command_from_the_warm_holder_reads_no_secret_writes_nothing_and_reaches_no_host() {
    reads_no_secret_writes_nothing_and_reaches_no_host(Mechanism::Landlock).await;
}

#[tokio::test]
async fn under_namespaces_a_warm_command_reads_no_secret_writes_nothing_and_reaches_no_host() {
    reads_no_secret_writes_nothing_and_reaches_no_host(Mechanism::Namespaces).await;
}

async fn reads_no_secret_writes_nothing_and_reaches_no_host(mechanism: Mechanism) {
    let f = fixture(mechanism);
    let assert_warm = |output: &ShellOutput| assert_warm_by(output, label(mechanism));
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
    cancel_ends_the_command_and_its_daemon(Mechanism::Landlock).await;
}

#[tokio::test]
async fn under_namespaces_a_cancel_ends_a_warm_command_and_the_daemon_it_started() {
    cancel_ends_the_command_and_its_daemon(Mechanism::Namespaces).await;
}

async fn cancel_ends_the_command_and_its_daemon(mechanism: Mechanism) {
    let f = fixture(mechanism);
    let assert_warm = |output: &ShellOutput| assert_warm_by(output, label(mechanism));
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
    let f = fixture(Mechanism::Landlock);
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
    created_credential_is_masked_for_the_next_command(Mechanism::Landlock).await;
}

#[tokio::test]
async fn under_namespaces_a_credential_created_between_two_commands_is_masked_for_the_second() {
    created_credential_is_masked_for_the_next_command(Mechanism::Namespaces).await;
}

async fn created_credential_is_masked_for_the_next_command(mechanism: Mechanism) {
    let f = fixture(mechanism);
    let assert_warm = |output: &ShellOutput| assert_warm_by(output, label(mechanism));
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

    // A plain file beside a masked one: readable from the next command on. Under the
    // fallback a rule added to the same ruleset, through another holder; under namespaces the
    // holder's bind of the workspace shows it (the masked list is the same).
    write(&f.root.join("CHANGES.md"), "changes\n");
    let third = f.run("cat CHANGES.md").await;
    assert_warm(&third);
    assert_eq!(third.text, "changes\n");
    if mechanism == Mechanism::Namespaces {
        assert_eq!(f.runtime.warm_holders().pid(), second_holder);
    } else {
        assert_ne!(f.runtime.warm_holders().pid(), second_holder);
    }

    std::fs::write(&go, "").unwrap();
    let slow = slow.await.unwrap();
    assert_warm(&slow);
    assert_eq!(slow.exit_code, Some(0), "{slow:?}");
    assert_eq!(slow.text, "# warm\n");
}

/// The children of process `pid` (`/proc/PID/task/PID/children`).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// The parent of process `pid`.
fn parent(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits until `path` exists (a command says it is ready there).
async fn until_exists(path: &Path) {
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

impl Fixture {
    /// Starts `command` contained, and a task that waits for it.
    fn start(&self, command: &str) -> (i32, tokio::task::JoinHandle<ShellOutput>) {
        let runtime = self.runtime.contained(command, command);
        let mut process = runtime.spawn_shell(command, &self.root).unwrap();
        let group = process.process_group();
        let sidecar = self.scratch.join(format!("out-{}", uuid()));
        let task = tokio::spawn(async move {
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
        });
        (group, task)
    }
}

/// Under namespaces a command sees only its own PID namespace: the holder and its starter have
/// no pid there, `kill -9` of its init is ignored by the kernel, and a `kill` of init reaches
/// the whole namespace (init forwards it): the command and its daemon end, reported killed by
/// that signal, and the holder serves the next command.
#[tokio::test]
async fn under_namespaces_a_command_cannot_reach_its_starter_or_holder_and_a_kill_of_init_ends_it_all()
 {
    let f = fixture(Mechanism::Namespaces);
    let first = f.run("true").await;
    assert_warm_by(&first, "namespaces");
    let zygote = f.runtime.warm_holders().pid().unwrap();
    let holder = children(zygote)[0];
    let daemon = sleep_arg(7);
    let command = format!(
        "setsid sh -c 'echo up > \"$TMPDIR/up\"; exec sleep {daemon}' & \
         while [ ! -e \"$TMPDIR/up\" ]; do :; done; \
         kill -9 {holder} {zygote} 2>&1; kill -9 1; echo after-kill-9; kill -TERM 1; exec sleep {}",
        sleep_arg(8)
    );
    let output = f.run(&command).await;
    assert_warm_by(&output, "namespaces");
    assert!(output.text.contains("after-kill-9"), "{}", output.text);
    assert_eq!(
        output.text.matches("No such process").count(),
        2,
        "{}",
        output.text
    );
    assert_eq!(output.signal.as_deref(), Some("SIGTERM"), "{output:?}");
    assert!(!running_with(&daemon), "the daemon outlived its init");
    assert!(!running_with(&sleep_arg(8)));
    let next = f.run("cat README.md").await;
    assert_warm_by(&next, "namespaces");
    assert_eq!(next.text, "# warm\n");
    assert_eq!(f.runtime.warm_holders().pid(), Some(zygote));
    assert_eq!(f.runtime.warm_holders().started(), 1);
}

/// Under namespaces, a command's init, its starter, or the holder killed (from outside: the
/// command cannot reach them) leaves nothing of the command alive, and it is reported killed;
/// after the holder, the next command gets a new one.
#[tokio::test]
async fn under_namespaces_a_killed_init_starter_or_holder_leaves_nothing_alive() {
    let f = fixture(Mechanism::Namespaces);
    for (n, victim) in ["init", "starter", "holder"].into_iter().enumerate() {
        let (daemon, main) = (sleep_arg(10 + 2 * n as u32), sleep_arg(11 + 2 * n as u32));
        let up = f.tmp().join(format!("up-{victim}"));
        let command = format!(
            "setsid sh -c 'echo up > \"$TMPDIR/up-{victim}\"; exec sleep {daemon}' & \
             exec sleep {main}"
        );
        let (init, task) = f.start(&command);
        until_exists(&up).await;
        let init = init.unsigned_abs();
        let pid = match victim {
            "init" => init,
            "starter" => parent(init),
            _ => parent(parent(init)),
        };
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let output = task.await.unwrap();
        assert_warm_by(&output, "namespaces");
        assert_eq!(
            output.signal.as_deref(),
            Some("SIGKILL"),
            "{victim}: {output:?}"
        );
        assert!(!running_with(&daemon), "the daemon outlived its {victim}");
        assert!(!running_with(&main), "the command outlived its {victim}");
    }
    let next = f.run("cat README.md").await;
    assert_warm_by(&next, "namespaces");
    assert_eq!(next.text, "# warm\n");
    assert_eq!(f.runtime.warm_holders().started(), 2);
}

/// Under namespaces each command has a mount namespace of its own, a copy of the holder's: the
/// `/proc` of one command's PID namespace is not in another's mount table, which is the same for
/// every command, and a command running beside another does not see its processes.
#[tokio::test]
async fn under_namespaces_two_commands_mounts_and_processes_stay_apart() {
    let f = fixture(Mechanism::Namespaces);
    let table = "cut -d' ' -f5 /proc/self/mountinfo";
    let first = f.run(table).await;
    assert_warm_by(&first, "namespaces");
    let marker = sleep_arg(20);
    let go = f.tmp().join("go-mounts");
    let (_, running) = f.start(&format!(
        "sleep {marker} & while [ ! -e \"$TMPDIR/go-mounts\" ]; do sleep 0.01; done; kill $!"
    ));
    while !running_with(&marker) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let beside = f
        .run(&format!("{table}; cat /proc/[0-9]*/cmdline | tr '\\0' ' '"))
        .await;
    assert_warm_by(&beside, "namespaces");
    assert!(!beside.text.contains(&marker), "{}", beside.text);
    assert!(beside.text.starts_with(&first.text), "{}", beside.text);
    std::fs::write(&go, "").unwrap();
    assert_eq!(running.await.unwrap().exit_code, Some(0));
    let last = f.run(table).await;
    assert_eq!(last.text, first.text);
    // The holder's bind of the host's `/proc`, and over it the command's own (the kernel
    // mounts a `/proc` only where one is fully visible; the nested user namespace locks the
    // command's over it): no other command's.
    assert_eq!(
        first.text.lines().filter(|point| *point == "/proc").count(),
        2,
        "{}",
        first.text
    );
    assert_eq!(f.runtime.warm_holders().started(), 1);
}

/// Under namespaces a masked credential replaced on the host by a rename (an editor's save)
/// takes the holder's mask of it along (the kernel detaches a mount whose mount point is gone):
/// the holder sees its mount table change and a fresh one, with the mask on the new file, runs
/// the next command.
#[tokio::test]
async fn under_namespaces_a_credential_replaced_by_a_rename_stays_masked() {
    let f = fixture(Mechanism::Namespaces);
    let first = f.run("cat .env; cat README.md").await;
    assert_warm_by(&first, "namespaces");
    assert_eq!(first.text, "# warm\n");
    let zygote = f.runtime.warm_holders().pid();
    let saved = f.root.join(".env.saving");
    std::fs::write(&saved, format!("TOKEN={SECRET}-renamed\n")).unwrap();
    std::fs::rename(&saved, f.root.join(".env")).unwrap();
    let second = f.run("cat .env; cat README.md").await;
    assert_warm_by(&second, "namespaces");
    assert!(!second.text.contains(SECRET), "{}", second.text);
    assert_eq!(second.text, "# warm\n");
    assert_ne!(f.runtime.warm_holders().pid(), zygote);
}

/// A zygote that does not answer (stopped here from outside; before Landlock ABI 6 a command
/// could stop it too): the command waiting for it holds no runtime worker meanwhile (a task
/// spawned after it runs on the runtime's only worker before its wait ends), fails without
/// running twice, and the zygote is killed, not asked again: the next command gets a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_zygote_that_does_not_answer_holds_no_worker_and_is_replaced() {
    let f = std::sync::Arc::new(fixture(Mechanism::Landlock));
    // A new entry on the way to a masked file (the home, where other tests and programs drop
    // files) is a new mask generation, so a new zygote: the stuck command must go to the one
    // stopped. When a new one served it instead, the stopped one is let go and the try repeated.
    let mut tries = 0;
    let zygote = loop {
        tries += 1;
        assert!(tries <= 5, "every try met a new mask generation");
        assert_warm(&f.run("echo first").await);
        let zygote = f.runtime.warm_holders().pid().unwrap();
        let zygote_pid = nix::unistd::Pid::from_raw(i32::try_from(zygote).unwrap());
        let started = f.runtime.warm_holders().started();
        nix::sys::signal::kill(zygote_pid, nix::sys::signal::Signal::SIGSTOP).unwrap();

        let ready = std::sync::Arc::new(tokio::sync::Notify::new());
        let waiting = tokio::spawn({
            let (f, ready) = (f.clone(), ready.clone());
            async move {
                ready.notify_one();
                // Synchronous: it waits for the stopped zygote's answer (10 s) on this worker.
                let runtime = f.runtime.contained("echo stuck", "echo stuck");
                runtime
                    .spawn_shell("echo stuck", &f.root)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        });
        ready.notified().await;
        let other = tokio::spawn(async { "ran" }).await.unwrap();
        assert_eq!(other, "ran");
        let finished_early = waiting.is_finished();
        let stuck = waiting.await.unwrap();
        if f.runtime.warm_holders().started() > started {
            nix::sys::signal::kill(zygote_pid, nix::sys::signal::Signal::SIGCONT).unwrap();
            continue;
        }
        assert!(
            !finished_early,
            "a task spawned later ran only once the wait for the zygote had ended"
        );
        assert!(
            stuck.as_ref().is_err_and(|e| e.contains("did not answer")),
            "{stuck:?}"
        );
        break zygote;
    };

    let next = f.run("echo next").await;
    assert_warm(&next);
    assert_eq!(next.text, "next\n");
    assert_ne!(f.runtime.warm_holders().pid(), Some(zygote));
    // Killed (and reaped by Keel's thread): it takes no command again.
    let mut polls = 0;
    while std::path::Path::new(&format!("/proc/{zygote}")).exists() {
        polls += 1;
        assert!(polls < 3000, "the zygote that did not answer lives on");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
