//! The helper on its own: the real binary (`keel-sandbox-standalone`, the same `main` Keel ships
//! as `keel-sandbox`) run with profiles written here, under each mechanism, and checked from
//! outside. Keel's side (which helper, the profile it writes, the guards) is tested in keel-core
//! and over `keel acp`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail loudly on purpose"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "tests set up and inspect their fixtures directly on disk and run the helper"
)]

use std::path::PathBuf;
use std::process::{Command, Output};

use keel_sandbox::{EXIT_HELPER_FAILED, HELPER_BUILD, Mechanism, PROFILE_ENV, Profile, Status};

const HELPER: &str = env!("CARGO_BIN_EXE_keel-sandbox-standalone");

/// A throw-away layout: a workspace, a home with a secret beside an allowed directory, a
/// directory outside both, and the scratch files of one command.
struct Layout {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    outside: PathBuf,
}

impl Layout {
    fn new() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (workspace, home, outside) = (root.join("ws"), root.join("home"), root.join("outside"));
        for path in [
            &workspace,
            &home.join(".ssh"),
            &home.join(".cargo"),
            &outside,
            &root.join("tmp"),
            &root.join("stage"),
        ] {
            std::fs::create_dir_all(path).unwrap();
        }
        std::fs::write(home.join(".ssh/id_test"), "SECRET-KEY").unwrap();
        std::fs::write(home.join(".cargo/config.toml"), "VISIBLE").unwrap();
        std::fs::write(home.join(".cargo/credentials.toml"), "SECRET-TOKEN").unwrap();
        Layout {
            _dir: dir,
            root,
            workspace,
            home,
            outside,
        }
    }

    fn profile(&self, mechanism: Mechanism) -> Profile {
        Profile {
            build: HELPER_BUILD.to_owned(),
            nonce: "nonce-1".into(),
            status_file: self.root.join("status"),
            required: true,
            mechanism,
            cwd: self.workspace.clone(),
            writable: vec![self.workspace.clone()],
            readable: Vec::new(),
            protected: Vec::new(),
            pinned: Vec::new(),
            home: Some(self.home.clone()),
            home_readable: vec![self.home.join(".cargo")],
            home_writable: Vec::new(),
            tmp_dir: self.root.join("tmp"),
            staging_dir: self.root.join("stage"),
            network: false,
            proxy: None,
            masked: vec![self.home.join(".cargo/credentials.toml")],
            env_allow: vec!["PATH".into()],
            mask_ruleset: None,
            mask_socket: None,
            done_fifo: None,
            keeper: None,
            no_connect: false,
        }
    }

    /// Runs `script` under `profile` (in a file), with `KEEL_TEST_TOKEN` set.
    fn run(&self, profile: &Profile, script: &str) -> Output {
        let file = self.root.join("profile.json");
        std::fs::write(&file, serde_json::to_string(profile).unwrap()).unwrap();
        Command::new(HELPER)
            .args(["run", "--profile"])
            .arg(&file)
            .args(["--", "/bin/sh", "-c", script])
            .env("KEEL_TEST_TOKEN", "SECRET-ENV")
            .output()
            .unwrap()
    }

    fn status(&self) -> Option<Status> {
        let text = std::fs::read_to_string(self.root.join("status")).ok()?;
        let line = text.lines().find(|line| line.starts_with('{'))?;
        serde_json::from_str(line).ok()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_helper_says_its_build() {
    let output = Command::new(HELPER).arg("build").output().unwrap();
    assert!(output.status.success());
    assert_eq!(text(&output.stdout).trim(), HELPER_BUILD);
}

#[test]
fn a_helper_from_another_build_refuses_the_profile() {
    let layout = Layout::new();
    let marker = layout.workspace.join("ran");
    let script = format!("echo > {}", marker.display());
    let mut profile = layout.profile(Mechanism::Auto);
    profile.build = "0123456789abcdef".into();
    let refused = layout.run(&profile, &script);
    assert_eq!(refused.status.code(), Some(EXIT_HELPER_FAILED));
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("different builds"), "{stderr}");
    assert!(
        !marker.exists(),
        "the program ran under a profile it could not read"
    );

    // The same profile from this build is applied, and the program runs.
    profile.build = HELPER_BUILD.to_owned();
    let ran = layout.run(&profile, &script);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert!(marker.exists());
}

#[test]
fn bad_invocations_are_refused_with_the_reason_and_run_nothing() {
    let layout = Layout::new();
    let marker = layout.workspace.join("ran");
    let touch = format!("echo > {}", marker.display());
    let missing = layout.root.join("no-such-profile.json");
    let cases: [(Vec<&str>, String); 5] = [
        (
            vec!["run", "--profile", "p.json"],
            "expected `-- PROGRAM ARGS...`".into(),
        ),
        (vec!["run", "/bin/sh"], "unexpected argument /bin/sh".into()),
        (vec!["run", "--"], "no program to run".into()),
        (
            vec!["run", "--verbose", "--", "/bin/sh", "-c", &touch],
            "unexpected argument --verbose".into(),
        ),
        (
            vec![
                "run",
                "--profile",
                missing.to_str().unwrap(),
                "--",
                "/bin/sh",
                "-c",
                &touch,
            ],
            // The OS's own reason is kept.
            format!(
                "cannot read the profile {}: No such file or directory",
                missing.display()
            ),
        ),
    ];
    for (args, reason) in cases {
        let output = Command::new(HELPER)
            .args(&args)
            .env_remove(PROFILE_ENV)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(EXIT_HELPER_FAILED), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with(&format!("keel sandbox: {reason}")),
            "{args:?}: {stderr}"
        );
    }
    // Without `--profile` and without the variable.
    let output = Command::new(HELPER)
        .args(["run", "--", "/bin/sh", "-c", &touch])
        .env_remove(PROFILE_ENV)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(EXIT_HELPER_FAILED));
    assert!(text(&output.stderr).contains(&format!("missing --profile FILE (or {PROFILE_ENV})")));
    assert!(!marker.exists());
}

#[test]
fn a_profile_travels_in_the_environment() {
    let layout = Layout::new();
    let profile = layout.profile(Mechanism::Auto);
    let marker = layout.workspace.join("ran");
    let output = Command::new(HELPER)
        .args(["run", "--", "/bin/sh", "-c"])
        .arg(format!("echo > {}", marker.display()))
        .env(PROFILE_ENV, serde_json::to_string(&profile).unwrap())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(marker.exists());
    assert_eq!(layout.status().unwrap().nonce, "nonce-1");

    let output = Command::new(HELPER)
        .args(["run", "--", "/bin/true"])
        .env(PROFILE_ENV, "{not json")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(EXIT_HELPER_FAILED));
    assert!(text(&output.stderr).contains(&format!("bad profile in {PROFILE_ENV}: ")));

    use std::os::unix::ffi::OsStrExt as _;
    let output = Command::new(HELPER)
        .args(["run", "--", "/bin/true"])
        .env(PROFILE_ENV, std::ffi::OsStr::from_bytes(b"{\xff}"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(EXIT_HELPER_FAILED));
    assert!(
        text(&output.stderr).contains(&format!("bad profile in {PROFILE_ENV}: not UTF-8")),
        "{}",
        text(&output.stderr)
    );
}

/// What a confined program must not do, the same under each mechanism: read a hidden home file
/// or a masked credential, see a variable outside the allowlist, write outside the workspace.
fn confines(mechanism: Mechanism, label: &str) {
    let layout = Layout::new();
    let profile = layout.profile(mechanism);
    let script = format!(
        "cat {home}/.ssh/id_test 2>/dev/null; cat {home}/.cargo/credentials.toml 2>/dev/null; \
         cat {home}/.cargo/config.toml; echo \"token=$KEEL_TEST_TOKEN\"; \
         echo x 2>/dev/null > {outside}/escaped; echo x > {ws}/inside; echo done",
        home = layout.home.display(),
        outside = layout.outside.display(),
        ws = layout.workspace.display(),
    );
    let output = layout.run(&profile, &script);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(stdout.contains("done"), "{stdout}");
    assert!(
        stdout.contains("VISIBLE"),
        "an allowed home path is readable: {stdout}"
    );
    assert!(!stdout.contains("SECRET"), "{stdout}");
    assert!(stdout.contains("token=\n"), "{stdout}");
    assert!(!layout.outside.join("escaped").exists());
    assert!(layout.workspace.join("inside").exists());
    let status = layout.status().unwrap();
    assert_eq!(
        (status.nonce.as_str(), status.mechanism.as_str()),
        ("nonce-1", label)
    );
}

#[test]
fn namespaces_confine_the_program() {
    confines(Mechanism::Namespaces, "namespaces");
}

#[test]
fn the_fallback_confines_the_program() {
    confines(Mechanism::Landlock, "landlock");
}

/// A descriptor the helper's starter leaked into it (no close-on-exec: an editor's terminal, a
/// build tool's jobserver) does not reach the program, which could write through it where no path
/// of its profile lets it.
fn leaked_descriptors_stay_out(mechanism: Mechanism) {
    use std::os::fd::AsRawFd as _;
    let layout = Layout::new();
    let leaked = std::fs::File::create(layout.outside.join("leaked")).unwrap();
    nix::fcntl::fcntl(
        &leaked,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    // Through bash: `sh` (dash) reads `>&10` and above as a syntax error, and with the other
    // tests running beside this one the descriptor's number may be that high.
    let script = format!(
        "bash -c 'echo through 2>/dev/null >&{fd}' && echo WROTE; echo done",
        fd = leaked.as_raw_fd()
    );
    let output = layout.run(&layout.profile(mechanism), &script);
    let stdout = text(&output.stdout);
    assert_eq!(stdout, "done\n", "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read_to_string(layout.outside.join("leaked")).unwrap(),
        ""
    );
}

#[test]
fn namespaces_keep_leaked_descriptors_out() {
    leaked_descriptors_stay_out(Mechanism::Namespaces);
}

#[test]
fn the_fallback_keeps_leaked_descriptors_out() {
    leaked_descriptors_stay_out(Mechanism::Landlock);
}

/// A Unix socket outside everything the program may read (the session bus, the Docker socket,
/// an agent's): under namespaces it is not in the program's root; under the fallback, where
/// Landlock cannot confine a connection by path, a program without the network connects to
/// nothing. A socket pair the program makes itself still works (the shell's pipes, here).
fn sockets_outside_stay_out(mechanism: Mechanism) {
    let layout = Layout::new();
    let socket = layout.outside.join("bus");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let probe = PathBuf::from(env!("CARGO_BIN_EXE_keel-sandbox-test-kernel"));
    let mut profile = layout.profile(mechanism);
    profile.readable.push(probe.parent().unwrap().to_path_buf());
    let script = format!(
        "{probe} connect {socket} | cat; echo done",
        probe = probe.display(),
        socket = socket.display()
    );
    let output = layout.run(&profile, &script);
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("refused: "),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(stdout.ends_with("done\n"), "{stdout}");

    // The same probe outside the sandbox connects: the socket is live.
    let direct = Command::new(&probe)
        .arg("connect")
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(text(&direct.stdout), "connected\n");
}

#[test]
fn namespaces_keep_sockets_outside_out_of_reach() {
    sockets_outside_stay_out(Mechanism::Namespaces);
}

#[test]
fn the_fallback_connects_to_no_socket_without_a_network() {
    sockets_outside_stay_out(Mechanism::Landlock);
}

/// The program's end is the helper's: its exit code, or the signal that killed it.
#[test]
fn the_helper_ends_as_the_program_did() {
    use std::os::unix::process::ExitStatusExt as _;
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let layout = Layout::new();
        let profile = layout.profile(mechanism);
        let output = layout.run(&profile, "exit 7");
        assert_eq!(output.status.code(), Some(7), "{mechanism:?}");
        let output = layout.run(&profile, "kill -TERM $$");
        assert_eq!(output.status.signal(), Some(15), "{mechanism:?}");
    }
}

/// Under namespaces, init says the program is done on Keel's FIFO (`Profile::done_fifo`) only
/// once its namespace is empty: a daemon the program left running, in a session of its own behind
/// a double fork, is gone when the line arrives, though the helper itself may not have exited
/// yet. The line carries the program's end: its exit code or its signal.
#[test]
fn init_says_done_only_once_its_namespace_is_empty() {
    use std::io::Read as _;
    use std::os::unix::process::ExitStatusExt as _;
    let layout = Layout::new();
    let fifo = layout.root.join("done");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut profile = layout.profile(Mechanism::Namespaces);
    profile.done_fifo = Some(fifo.clone());
    // Read and write, as Keel opens it: the helper's open does not wait, and no end of file.
    #[expect(
        clippy::disallowed_types,
        reason = "the test holds the FIFO's read end as Keel does"
    )]
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = [0u8; 256];
        while let Ok(n) = reader.read(&mut line) {
            let _ = lines.send(String::from_utf8_lossy(&line[..n]).into_owned());
        }
    });
    // The daemon's name is put together by the script, so the helper's own command line (which
    // holds the script) does not carry it; the program waits until the daemon runs.
    let daemon = "keel-done-daemon";
    let script = "d=keel-done; (setsid sh -c 'echo > started; sleep 30; true' \"$d-daemon\" &); \
                  while [ ! -e started ]; do sleep 0.01; done; exit 7";
    let file = layout.root.join("profile.json");
    std::fs::write(&file, serde_json::to_string(&profile).unwrap()).unwrap();
    let helper = |script: &str| {
        Command::new(HELPER)
            .args(["run", "--profile"])
            .arg(&file)
            .args(["--", "/bin/sh", "-c", script])
            .spawn()
            .unwrap()
    };
    let mut child = helper(script);
    let line = received
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap();
    assert_eq!(line, "done nonce-1 code 7\n");
    assert!(layout.workspace.join("started").exists());
    let alive: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| text(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(daemon))
        .collect();
    assert!(alive.is_empty(), "left running after done: {alive:?}");
    assert_eq!(child.wait().unwrap().code(), Some(7));

    let mut child = helper("kill -KILL $$");
    let line = received
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap();
    assert_eq!(line, "done nonce-1 signal 9\n");
    assert_eq!(child.wait().unwrap().signal(), Some(9));
}

/// The namespace keeper (`keel-sandbox keep SOCKET`) hands each command a network namespace it
/// made ahead, offline but for the loopback, and one command's only: the next gets another. It
/// serves its parent's children only: a helper started by another process makes its own.
#[test]
fn the_keeper_hands_each_child_of_its_parent_a_network_namespace_of_its_own() {
    let layout = Layout::new();
    let socket = layout.root.join("keeper.sock");
    let mut keeper = Command::new(HELPER)
        .arg("keep")
        .arg(&socket)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    // The keeper's spare namespace, once it has made it.
    let spare = || loop {
        let spare = std::fs::read_link(format!("/proc/{}/ns/net", keeper.id())).unwrap();
        if spare != host && socket.exists() {
            return text(spare.as_os_str().as_encoded_bytes());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let mut profile = layout.profile(Mechanism::Namespaces);
    profile.keeper = Some(socket.clone());
    let script = "readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '";
    let network = |output: Output| {
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let first = spare();
    assert_eq!(
        network(layout.run(&profile, script)),
        format!("{first}\nlo\n")
    );
    let second = spare();
    assert_ne!(first, second);
    assert_eq!(
        network(layout.run(&profile, script)),
        format!("{second}\nlo\n")
    );

    // Started by another process (a shell), the helper is refused and makes its own namespace.
    let third = spare();
    let file = layout.root.join("profile.json");
    let nested = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "{HELPER} run --profile {} -- /bin/sh -c \"$0\"; true",
            file.display()
        ))
        .arg(script)
        .output()
        .unwrap();
    let own = network(nested);
    assert!(own.ends_with("\nlo\n"), "{own}");
    assert_ne!(own, format!("{third}\nlo\n"));
    assert_eq!(
        spare(),
        third,
        "the keeper handed its namespace to a stranger"
    );
    // Its parent gone (its standard input closed), it exits.
    drop(keeper.stdin.take());
    assert!(keeper.wait().unwrap().success());
}

/// The helper starts without Rust's runtime start-up (`keel_sandbox::start`) but keeps what it
/// did: started with its standard input closed, the helper opens `/dev/null` there (so no file
/// of its own takes that number, and the program gets an open standard input), and the program
/// starts with `SIGPIPE` at its default (the helper itself ignores it).
#[test]
fn the_program_gets_open_standard_descriptors_and_the_default_sigpipe() {
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let layout = Layout::new();
        let profile = layout.profile(mechanism);
        let file = layout.root.join("profile.json");
        std::fs::write(&file, serde_json::to_string(&profile).unwrap()).unwrap();
        // `yes` into a reader that leaves: killed by SIGPIPE without a word, unless it is
        // ignored (then `yes` says "Broken pipe").
        let script = "if { true <&0; } 2>/dev/null; then echo stdin-open; fi; \
                      said=$({ yes | head -n 1 >/dev/null; } 2>&1); \
                      if [ -z \"$said\" ]; then echo sigpipe-default; else echo \"$said\"; fi";
        let output = Command::new("/bin/sh")
            .args([
                "-c",
                "exec \"$0\" run --profile \"$1\" -- /bin/sh -c \"$2\" 0<&-",
            ])
            .arg(HELPER)
            .arg(&file)
            .arg(script)
            .output()
            .unwrap();
        let stdout = text(&output.stdout);
        assert!(output.status.success(), "{mechanism:?}: {output:?}");
        assert!(stdout.contains("stdin-open"), "{mechanism:?}: {stdout}");
        assert!(
            stdout.contains("sigpipe-default"),
            "{mechanism:?}: {stdout}"
        );
    }
}
