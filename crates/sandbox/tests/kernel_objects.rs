//! Kernel objects of the user's that a confined program reaches by number, without any path
//! (the System V IPC of the user's other processes, POSIX message queues, the session keyring,
//! the terminal of whoever started the helper): out of its reach under each mechanism, while the
//! same probe run outside reaches each one (so each object is live). The probe is
//! `keel-sandbox-test-kernel`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail loudly on purpose"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "tests set up and inspect their fixtures directly on disk and run the helper"
)]
#![expect(
    unsafe_code,
    reason = "the tests make the kernel objects the probe reaches (System V IPC, keys, queues)"
)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use keel_sandbox::{HELPER_BUILD, Mechanism, Profile};

const HELPER: &str = env!("CARGO_BIN_EXE_keel-sandbox-standalone");
const PROBE: &str = env!("CARGO_BIN_EXE_keel-sandbox-test-kernel");

/// A throw-away layout (as in `helper.rs`): a workspace and the scratch files of one command.
struct Layout {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Layout {
    fn new() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for name in ["ws", "home", "tmp", "stage"] {
            std::fs::create_dir_all(root.join(name)).unwrap();
        }
        Layout { _dir: dir, root }
    }

    fn profile(&self, mechanism: Mechanism) -> Profile {
        let probe_dir = PathBuf::from(PROBE).parent().unwrap().to_path_buf();
        Profile {
            build: HELPER_BUILD.to_owned(),
            nonce: "nonce-1".into(),
            status_file: self.root.join("status"),
            required: true,
            mechanism,
            cwd: self.root.join("ws"),
            writable: vec![self.root.join("ws")],
            readable: vec![probe_dir],
            protected: Vec::new(),
            pinned: Vec::new(),
            home: Some(self.root.join("home")),
            home_readable: Vec::new(),
            home_writable: Vec::new(),
            tmp_dir: self.root.join("tmp"),
            staging_dir: self.root.join("stage"),
            network: false,
            proxy: None,
            masked: Vec::new(),
            env_allow: vec!["PATH".into()],
            mask_ruleset: None,
            mask_socket: None,
            done_fifo: None,
            keeper: None,
            no_connect: false,
        }
    }

    /// The helper's command running `script` (`/bin/sh -c`) under `profile`.
    fn command(&self, profile: &Profile, script: &str) -> Command {
        let file = self.root.join("profile.json");
        std::fs::write(&file, serde_json::to_string(profile).unwrap()).unwrap();
        let mut command = Command::new(HELPER);
        command
            .args(["run", "--profile"])
            .arg(&file)
            .args(["--", "/bin/sh", "-c", script]);
        command
    }

    /// The probe's answer to `what ARG` under `profile`.
    fn probe(&self, profile: &Profile, what: &str, arg: &str) -> String {
        let output = self
            .command(profile, &format!("{PROBE} {what} {arg}"))
            .output()
            .unwrap();
        answer(&output)
    }
}

fn answer(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The same probe outside the sandbox.
fn probe_outside(what: &str, arg: &str) -> String {
    answer(&Command::new(PROBE).args([what, arg]).output().unwrap())
}

/// A System V shared memory segment of the user's (another process's, mode 0600) holding a
/// secret, removed on drop.
struct Segment {
    id: i32,
}

impl Segment {
    fn new(text: &str) -> Segment {
        // SAFETY: a private segment of 4 KiB, mapped to write `text` into it, then unmapped.
        unsafe {
            let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
            assert!(id >= 0, "{}", std::io::Error::last_os_error());
            let address = libc::shmat(id, std::ptr::null(), 0);
            assert_ne!(address as isize, -1);
            std::ptr::copy_nonoverlapping(text.as_ptr(), address.cast::<u8>(), text.len());
            libc::shmdt(address);
            Segment { id }
        }
    }

    fn text(&self) -> String {
        // SAFETY: the segment is mapped read-only, its first 16 bytes read, and unmapped.
        unsafe {
            let address = libc::shmat(self.id, std::ptr::null(), libc::SHM_RDONLY);
            assert_ne!(address as isize, -1);
            let bytes = std::slice::from_raw_parts(address.cast::<u8>(), 16).to_vec();
            libc::shmdt(address);
            String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .to_owned()
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: IPC_RMID takes no buffer.
        unsafe {
            libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

/// Another process's shared memory cannot be attached by its id (under namespaces the program
/// has an IPC namespace of its own; under the fallback System V IPC is refused); the probe run
/// outside reads and changes it.
fn the_users_shared_memory_stays_out(mechanism: Mechanism) {
    let layout = Layout::new();
    let segment = Segment::new("USER-SECRET");
    let id = segment.id.to_string();
    let inside = layout.probe(&layout.profile(mechanism), "shm", &id);
    assert!(inside.starts_with("refused: "), "{inside}");
    assert_eq!(segment.text(), "USER-SECRET");
    assert_eq!(probe_outside("shm", &id), "read: USER-SECRET\n");
    assert_eq!(segment.text(), "CHANGEDCRET");
}

#[test]
fn namespaces_keep_the_users_shared_memory_out() {
    the_users_shared_memory_stays_out(Mechanism::Namespaces);
}

#[test]
fn the_fallback_keeps_the_users_shared_memory_out() {
    the_users_shared_memory_stays_out(Mechanism::Landlock);
}

/// Under namespaces the program's own System V IPC works (in its own namespace, gone with it);
/// under the fallback it is refused, the price of having no IPC namespace.
#[test]
fn system_v_ipc_works_inside_namespaces_only() {
    let layout = Layout::new();
    // Removed again: without an IPC namespace the segment would outlive the command.
    let script = "id=$(ipcmk -M 4096 2>/dev/null) && ipcrm -m \"${id##* }\" && echo made \
                  || echo refused";
    for (mechanism, expected) in [
        (Mechanism::Namespaces, "made\n"),
        (Mechanism::Landlock, "refused\n"),
    ] {
        let output = layout
            .command(&layout.profile(mechanism), script)
            .output()
            .unwrap();
        assert_eq!(answer(&output), expected, "{mechanism:?}");
    }
}

/// A POSIX message queue of the user's (looked up in the IPC namespace, not by path) cannot be
/// opened; the probe run outside reads its message.
#[test]
fn the_users_message_queues_stay_out() {
    let layout = Layout::new();
    let name = format!("/keel-test-{}", std::process::id());
    let c_name = std::ffi::CString::new(name.clone()).unwrap();
    // SAFETY: a queue with default attributes and one message of 11 bytes.
    unsafe {
        let queue = libc::mq_open(
            c_name.as_ptr(),
            libc::O_CREAT | libc::O_RDWR,
            0o600,
            std::ptr::null_mut::<libc::mq_attr>(),
        );
        assert_ne!(queue, -1, "{}", std::io::Error::last_os_error());
        assert_eq!(libc::mq_send(queue, c"USER-SECRET".as_ptr(), 11, 0), 0);
        libc::mq_close(queue);
    }
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let inside = layout.probe(&layout.profile(mechanism), "mq", &name);
        assert!(inside.starts_with("refused: "), "{mechanism:?}: {inside}");
    }
    let outside = probe_outside("mq", &name);
    // SAFETY: a NUL-terminated name.
    unsafe {
        libc::mq_unlink(c_name.as_ptr());
    }
    assert_eq!(outside, "read: USER-SECRET\n");
}

/// A key in the session keyring of whoever started the helper (a login session's: Kerberos
/// tickets, ecryptfs keys) cannot be read: keyrings have no namespace, and the program inherits
/// the session keyring. The probe run outside reads it.
fn the_session_keyring_stays_out(mechanism: Mechanism) {
    let layout = Layout::new();
    // This test's thread joins a session keyring of its own (as a login does) and keeps a key
    // there; the helper, started from this thread, inherits it.
    // SAFETY: KEYCTL_JOIN_SESSION_KEYRING (1) with no name; add_key with NUL-terminated type
    // and description and a payload of the length given.
    let serial = unsafe {
        let keyring = libc::syscall(libc::SYS_keyctl, 1, std::ptr::null::<libc::c_char>());
        assert!(keyring > 0, "{}", std::io::Error::last_os_error());
        libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            c"keel-test".as_ptr(),
            c"KEY-SECRET".as_ptr(),
            10usize,
            libc::KEY_SPEC_SESSION_KEYRING,
        )
    };
    assert!(serial > 0, "{}", std::io::Error::last_os_error());
    let serial = serial.to_string();
    let inside = layout.probe(&layout.profile(mechanism), "key", &serial);
    assert!(inside.starts_with("refused: "), "{inside}");
    assert_eq!(probe_outside("key", &serial), "read: KEY-SECRET\n");
}

#[test]
fn namespaces_keep_the_session_keyring_out() {
    the_session_keyring_stays_out(Mechanism::Namespaces);
}

#[test]
fn the_fallback_keeps_the_session_keyring_out() {
    the_session_keyring_stays_out(Mechanism::Landlock);
}

/// A terminal the helper was given (a pseudo-terminal no session holds, here) cannot be typed
/// into (`TIOCSTI`): what is typed would run in the shell that reads it once the command ends,
/// outside the sandbox. The program can make it its controlling terminal; typing is refused.
fn the_terminal_cannot_be_typed_into(mechanism: Mechanism) {
    let layout = Layout::new();
    let pty = nix::pty::openpty(None, None).unwrap();
    let stdin = || Stdio::from(std::fs::File::from(pty.slave.try_clone().unwrap()));
    let mut command = layout.command(
        &layout.profile(mechanism),
        &format!("{PROBE} tty 'echo typed'"),
    );
    let inside = answer(&command.stdin(stdin()).output().unwrap());
    assert_eq!(inside, "refused: Operation not permitted (os error 1)\n");
    // Outside, in a session of its own, the probe types into it where the kernel allows any
    // program to (`dev.tty.legacy_tiocsti`).
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").unwrap_or_default();
    let mut outside = Command::new(PROBE);
    outside.args(["tty", "echo typed"]).stdin(stdin());
    // SAFETY: setsid only, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut outside, || {
            nix::unistd::setsid().map(drop).map_err(Into::into)
        });
    }
    let outside = answer(&outside.output().unwrap());
    if legacy.trim() == "1" {
        assert_eq!(outside, "injected\n");
    } else {
        assert!(outside.starts_with("refused: "), "{outside}");
    }
}

#[test]
fn namespaces_refuse_typing_into_a_terminal() {
    the_terminal_cannot_be_typed_into(Mechanism::Namespaces);
}

#[test]
fn the_fallback_refuses_typing_into_a_terminal() {
    the_terminal_cannot_be_typed_into(Mechanism::Landlock);
}

/// The sysctls in `/proc/sys` cannot be written, under either mechanism: a program run by root
/// could otherwise change the host's (`kernel.domainname` here: the command shares the host's
/// UTS namespace; `kernel.core_pattern` would run a program as root outside); any program could
/// write those of its own network namespace (`net.ipv4.ip_default_ttl`: harmless, but it shows
/// `/proc/sys` read-only for any user). Each is rewritten with the value it has, so nothing
/// changes even where a write went through.
#[test]
fn sysctls_cannot_be_written() {
    let layout = Layout::new();
    let script = "for f in /proc/sys/kernel/domainname /proc/sys/net/ipv4/ip_default_ttl; do \
                  v=$(cat $f) && (echo \"$v\" > $f) 2>/dev/null && echo \"wrote $f\"; done; \
                  echo done";
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let output = layout
            .command(&layout.profile(mechanism), script)
            .output()
            .unwrap();
        assert_eq!(answer(&output), "done\n", "{mechanism:?}");
    }
}

/// A process of the user's outside (here a `sleep` without capabilities, as an ordinary user's
/// are: a capability it had and the program not would refuse the scheduling changes anyway)
/// cannot have its limits or scheduling changed by pid: under namespaces it has no pid there,
/// under the fallback the filter allows these calls on the caller only. The program's own still
/// work (`ulimit`, `nice`). The probe run outside changes them.
/// Process `pid`'s open-files limit, nice value, scheduling policy and allowed CPUs, from
/// `/proc`.
fn settings(pid: &str) -> String {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/{pid}/{name}")).unwrap();
    let limits = read("limits");
    let stat = read("stat");
    let status = read("status");
    // The fields after the command's name (which ends with the last `)`): nice is the 17th,
    // the policy the 39th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    format!(
        "{} nice {} policy {} {}",
        limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap(),
        fields[16],
        fields[38],
        status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap(),
    )
}

fn processes_outside_keep_their_settings(mechanism: Mechanism) {
    let layout = Layout::new();
    let mut target = Command::new("sleep");
    target.arg("60");
    // SAFETY: prctl with integer arguments only, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut target, || {
            // An empty bounding set: run by root, the `sleep` gains no capability at exec.
            for cap in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            Ok(())
        });
    }
    let mut target = target.spawn().unwrap();
    let pid = target.id().to_string();
    let before = settings(&pid);
    let inside = layout.probe(&layout.profile(mechanism), "process", &pid);
    let changed: Vec<&str> = inside.lines().filter(|l| !l.contains("refused")).collect();
    assert!(changed.is_empty(), "{mechanism:?}: {inside}");
    assert_eq!(settings(&pid), before);

    let own = layout
        .command(
            &layout.profile(mechanism),
            "ulimit -n 64 && [ \"$(ulimit -n)\" = 64 ] && nice -n 5 sh -c 'echo own'",
        )
        .output()
        .unwrap();
    assert_eq!(answer(&own), "own\n", "{mechanism:?}");

    let outside = probe_outside("process", &pid);
    let _ = target.kill();
    let _ = target.wait();
    assert!(
        outside.lines().any(|l| l == "prlimit: changed")
            && outside.lines().any(|l| l == "setpriority: changed"),
        "{outside}"
    );
}

#[test]
fn namespaces_leave_processes_outside_alone() {
    processes_outside_keep_their_settings(Mechanism::Namespaces);
}

#[test]
fn the_fallback_leaves_processes_outside_alone() {
    processes_outside_keep_their_settings(Mechanism::Landlock);
}

/// A Unix datagram socket outside (the system log, `systemd`'s notification sockets): under
/// the fallback without the network, `sendto` names it by path with no `connect`, from a
/// socket of the program's or one of a socket pair; both are refused (under namespaces the
/// socket is not in the root). The probe run outside delivers.
fn datagrams_stay_in(mechanism: Mechanism) {
    let layout = Layout::new();
    let path = layout.root.join("outside.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let path = path.to_str().unwrap();
    for what in ["dgram", "dgram-pair"] {
        let inside = layout.probe(&layout.profile(mechanism), what, path);
        assert!(
            inside.starts_with("refused: "),
            "{mechanism:?} {what}: {inside}"
        );
        let mut buffer = [0u8; 64];
        assert!(listener.recv(&mut buffer).is_err(), "{mechanism:?} {what}");
    }
    assert_eq!(probe_outside("dgram", path), "sent\n");
    let mut buffer = [0u8; 64];
    let n = listener.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"FROM-SANDBOX");
}

#[test]
fn namespaces_send_no_datagram_outside() {
    datagrams_stay_in(Mechanism::Namespaces);
}

#[test]
fn the_fallback_sends_no_datagram_outside() {
    datagrams_stay_in(Mechanism::Landlock);
}

/// With the filtering proxy the fallback must allow `connect` (the proxy's TCP port), so it
/// allows no Unix socket: one could connect by path to anything (the session bus runs any
/// program outside, the Docker socket is root). The proxy's own TCP connection still works
/// (keel-core's and keel-acp's proxy tests).
#[test]
fn the_fallback_with_the_proxy_connects_to_no_unix_socket() {
    let layout = Layout::new();
    let path = layout.root.join("bus");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut profile = layout.profile(Mechanism::Landlock);
    profile.proxy = Some(keel_sandbox::ProxyEndpoint {
        socket: layout.root.join("proxy.sock"),
        port: 9,
    });
    let output = layout
        .command(&profile, &format!("{PROBE} connect {}", path.display()))
        .output()
        .unwrap();
    let inside = answer(&output);
    assert!(inside.starts_with("refused: "), "{inside}");
    let status = std::fs::read_to_string(layout.root.join("status")).unwrap();
    assert!(status.contains("through Keel's proxy"), "{status}");
    assert_eq!(
        probe_outside("connect", &path.to_string_lossy()),
        "connected\n"
    );
}

/// Another terminal of the user's (a pseudo-terminal the command was not given: another
/// session's, where the user types) cannot be opened by its name: under namespaces `/dev/pts`
/// is an instance of the command's own, under the fallback only its multiplexer is granted.
/// The probe run outside writes to it.
fn other_terminals_stay_out(mechanism: Mechanism) {
    use std::io::Read as _;
    let layout = Layout::new();
    let pty = nix::pty::openpty(None, None).unwrap();
    let name = nix::unistd::ttyname(&pty.slave).unwrap();
    let name = name.to_str().unwrap();
    let mut master = std::fs::File::from(pty.master);
    nix::fcntl::fcntl(
        &master,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let inside = layout.probe(&layout.profile(mechanism), "write-tty", name);
    assert!(inside.starts_with("refused: "), "{mechanism:?}: {inside}");
    let mut buffer = [0u8; 64];
    assert!(master.read(&mut buffer).is_err(), "{mechanism:?}");
    assert_eq!(probe_outside("write-tty", name), "wrote\n");
    let n = master.read(&mut buffer).unwrap();
    assert!(text_of(&buffer[..n]).contains("FROM-SANDBOX"));
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn namespaces_open_no_terminal_of_another_session() {
    other_terminals_stay_out(Mechanism::Namespaces);
}

#[test]
fn the_fallback_opens_no_terminal_of_another_session() {
    other_terminals_stay_out(Mechanism::Landlock);
}
