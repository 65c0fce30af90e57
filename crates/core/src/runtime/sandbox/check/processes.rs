//! The processes of `keel sandbox check`: the helper running the probe, watched from outside
//! (its capabilities, what it left behind), the allowed upstream, and the helper killed with
//! `SIGKILL` mid-command.

#![expect(
    clippy::disallowed_methods,
    reason = "the sandbox check is part of the runtime, where ambient authority lives"
)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::{CheckError, SECRET};

/// What the self-test's allowed host answers.
pub(super) const UPSTREAM_REPLY: &str = "keel-check-upstream-reached";

/// A one-answer HTTP server on the host's loopback: the allowed host of the self-test (the
/// proxy's test hook lets it through). Counts the connections it got.
pub(super) struct Upstream {
    pub(super) port: u16,
    pub(super) connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Upstream {
    pub(super) fn start() -> std::io::Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done) = (connections.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let Ok((mut stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                count.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut chunk = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = format!("{UPSTREAM_REPLY}\n");
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Ok(Upstream {
            port,
            connections,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The live (not zombie) processes with `arg` among their arguments.
pub(super) fn pids_with_arg(arg: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path: PathBuf = entry.path();
        let Ok(cmdline) = std::fs::read(path.join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            let zombie = std::fs::read_to_string(path.join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            });
            if let (false, Some(pid)) = (
                zombie,
                entry.file_name().to_str().and_then(|n| n.parse().ok()),
            ) {
                found.push(pid);
            }
        }
    }
    found
}

/// Tries to `ptrace(PTRACE_ATTACH)` PID 1 where a Python is there to ask (the probe's shell
/// cannot); prints `TRACED-INIT` when it could.
pub(super) const TRACE_INIT: &str = "command -v python3 > /dev/null && python3 -c 'import ctypes; \
    libc = ctypes.CDLL(None, use_errno=True); \
    print(\"TRACED-INIT\" if libc.ptrace(16, 1, 0, 0) == 0 else \"ptrace refused\")' 2>/dev/null";

/// A child process killed and reaped when dropped.
pub(super) struct Spawned(pub(super) std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Spawned {
    pub(super) fn id(&self) -> u32 {
        self.0.id()
    }
}

/// Whether `child` is still running.
pub(super) fn running(child: &mut Spawned) -> bool {
    matches!(child.0.try_wait(), Ok(None))
}

/// A raw block device of this machine (the first in `/sys/block`), else `/dev/mem`.
pub(super) fn raw_device() -> PathBuf {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| Path::new("/dev").join(entry.file_name()))
        .find(|path| std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_block_device()))
        .unwrap_or_else(|| PathBuf::from("/dev/mem"))
}

/// What one run of the probe printed, and what was seen of it from outside.
pub(super) struct ProbeRun {
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// The program's capabilities, read from outside while it waited: none, and no way to gain
    /// one.
    pub(super) capabilities_dropped: bool,
}

/// Runs the probe through the helper in the sentinel's process group; while the probe waits
/// (`caps-ready`) reads its capabilities from outside, then lets it finish.
pub(super) fn run_helper(
    helper: &Path,
    prefix: &[String],
    profile_file: &Path,
    script: &str,
    sentinel: u32,
    caps_marker: &str,
) -> Result<ProbeRun, CheckError> {
    use std::io::BufRead as _;
    let group = i32::try_from(sentinel).map_err(|e| CheckError::Setup {
        what: "the sentinel's process id",
        source: std::io::Error::other(e),
    })?;
    let mut child = Command::new(helper)
        .args(prefix)
        .arg("run")
        .arg("--profile")
        .arg(profile_file)
        .args(["--", "bash", "-c", script])
        // A variable outside the allowlist: it must not reach the command.
        .env("KEEL_CHECK_TOKEN", SECRET)
        .process_group(group)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CheckError::Helper {
            helper: helper.to_path_buf(),
            source,
        })?;
    let mut stderr_pipe = child.stderr.take();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(pipe) = stderr_pipe.as_mut() {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    });
    let mut stdout = String::new();
    let mut capabilities_dropped = false;
    if let Some(pipe) = child.stdout.take() {
        let mut reader = std::io::BufReader::new(pipe);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            stdout.push_str(&line);
            if line.trim_end() == "caps-ready" {
                // `sleep` is started in the background: it may not have been executed yet.
                let pid = (0..500).find_map(|_| {
                    let pid = pids_with_arg(caps_marker).first().copied();
                    if pid.is_none() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    pid
                });
                capabilities_dropped = pid.is_some_and(no_capabilities);
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(b"go\n");
                }
            }
        }
    }
    drop(child.stdin.take());
    let _ = child.wait();
    Ok(ProbeRun {
        stdout,
        stderr: stderr.join().unwrap_or_default(),
        capabilities_dropped,
    })
}

/// Whether process `pid` has no capability and `no_new_privs` (its `/proc/PID/status`); the
/// bounding set must be empty too when it runs as root.
fn no_capabilities(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .map(str::to_owned)
    };
    let zero = |name: &str| {
        field(name)
            .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
            .is_some_and(|caps| caps == 0)
    };
    let root = field("Uid:").is_some_and(|uids| uids.split_whitespace().any(|uid| uid == "0"));
    zero("CapEff:")
        && zero("CapPrm:")
        && zero("CapAmb:")
        && zero("CapInh:")
        && (!root || zero("CapBnd:"))
        && field("NoNewPrivs:").as_deref() == Some("1")
}

/// Runs a command that leaves a daemon (its own session) through the helper, kills the helper
/// with `SIGKILL` once the daemon runs, and returns whether the helper's status lets Keel verify
/// that nothing is left, and nothing is.
pub(super) fn kill_probe(
    helper: &Path,
    prefix: &[String],
    profile_file: &Path,
    status_file: &Path,
    nonce: &str,
) -> Result<bool, CheckError> {
    use std::io::BufRead as _;
    let daemon = format!("86395.{}", std::process::id());
    let main = format!("86394.{}", std::process::id());
    let script =
        format!("(setsid sleep {daemon} > /dev/null 2>&1 &); echo ready; exec sleep {main}");
    let mut child = Spawned(
        Command::new(helper)
            .args(prefix)
            .arg("run")
            .arg("--profile")
            .arg(profile_file)
            .args(["--", "bash", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| CheckError::Helper {
                helper: helper.to_path_buf(),
                source,
            })?,
    );
    if let Some(pipe) = child.0.stdout.take() {
        let mut line = String::new();
        let _ = std::io::BufReader::new(pipe).read_line(&mut line);
    }
    let started = (0..500).any(|_| {
        let up = !pids_with_arg(&daemon).is_empty() && !pids_with_arg(&main).is_empty();
        if !up {
            std::thread::sleep(Duration::from_millis(10));
        }
        up
    });
    let _ = child.0.kill();
    let _ = child.0.wait();
    let verified = (0..500).any(|_| {
        let text = std::fs::read_to_string(status_file).unwrap_or_default();
        let done = super::super::guard_state(&text, nonce).is_some_and(|state| {
            !super::super::alive(state.guard) && (state.namespace || state.empty)
        });
        if !done {
            std::thread::sleep(Duration::from_millis(10));
        }
        done
    });
    let gone = pids_with_arg(&daemon).is_empty() && pids_with_arg(&main).is_empty();
    for pid in pids_with_arg(&daemon)
        .into_iter()
        .chain(pids_with_arg(&main))
    {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
    Ok(started && verified && gone)
}
