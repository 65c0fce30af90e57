//! `keel sandbox check`: what this machine can enforce, proven by running the real helper.
//!
//! For each mechanism (namespaces, the Landlock + seccomp fallback) the helper is forced to it
//! and runs a probe in a throw-away layout: a secret in a hidden home, a directory outside the
//! workspace, a loopback listener of this process, and a daemon that double-forks into its own
//! session. Each claim is checked from outside the sandbox.

#![expect(
    clippy::disallowed_methods,
    reason = "the sandbox check is part of the runtime, where ambient authority lives"
)]

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::profile::{DEFAULT_HOME_READABLE, DEFAULT_HOME_WRITABLE, Mechanism, Profile, Status};
use super::proxy::{self, Filter, HostGate};

const SECRET: &str = "keel-sandbox-check-secret";

/// One self-test claim and whether it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub what: &'static str,
    pub held: bool,
}

/// The self-test of one mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MechanismReport {
    pub mechanism: Mechanism,
    /// `Some(notes)` when the helper confirmed this mechanism; `None` with the reason otherwise.
    pub available: Result<Vec<String>, String>,
    pub claims: Vec<Claim>,
    /// Whether commands could use the filtering proxy under this mechanism (its claims are
    /// among [`MechanismReport::claims`] then); otherwise why not.
    pub proxy: Result<(), String>,
}

impl MechanismReport {
    /// Available and every claim held.
    pub fn passed(&self) -> bool {
        self.available.is_ok() && self.claims.iter().all(|c| c.held)
    }
}

/// The self-test's rules: the hosts `127.0.0.1` and `10.0.0.1` are allowed by name, so the
/// proxy's address check is what must refuse a loopback port and a private address.
#[derive(Debug)]
struct CheckGate;

impl HostGate for CheckGate {
    fn any_allowed(&self) -> bool {
        true
    }

    fn check(&self, host: &str) -> Result<(), String> {
        match host {
            "127.0.0.1" | "10.0.0.1" => Ok(()),
            _ => Err(format!("no rule allows {host}")),
        }
    }
}

/// What the self-test's allowed host answers.
const UPSTREAM_REPLY: &str = "keel-check-upstream-reached";

/// A one-answer HTTP server on the host's loopback: the allowed host of the self-test (the
/// proxy's test hook lets it through). Counts the connections it got.
struct Upstream {
    port: u16,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Upstream {
    fn start() -> std::io::Result<Upstream> {
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

/// Runs the self-test of `mechanism` with `helper` (`prefix` before `run`). Inside a tokio
/// runtime (a multi-threaded one: this call blocks its thread) the filtering proxy is tested
/// too.
pub fn self_test(helper: &Path, prefix: &[String], mechanism: Mechanism) -> MechanismReport {
    let base = std::env::temp_dir().join(format!(
        "keel-sandbox-check-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let report = run_probe(&base, helper, prefix, mechanism);
    let _ = std::fs::remove_dir_all(&base);
    report.unwrap_or_else(|error| MechanismReport {
        mechanism,
        available: Err(error),
        claims: Vec::new(),
        proxy: Err("not tested".into()),
    })
}

fn run_probe(
    base: &Path,
    helper: &Path,
    prefix: &[String],
    mechanism: Mechanism,
) -> Result<MechanismReport, String> {
    let io = |e: std::io::Error| e.to_string();
    let ws = base.join("workspace");
    let home = base.join("home");
    let outside = base.join("outside");
    let scratch = base.join("scratch");
    for dir in [
        &ws,
        &home.join(".ssh"),
        &home.join(".cargo"),
        &outside,
        &scratch.join("tmp"),
    ] {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let base = std::fs::canonicalize(base).map_err(io)?;
    let (ws, home, outside, scratch) = (
        base.join("workspace"),
        base.join("home"),
        base.join("outside"),
        base.join("scratch"),
    );
    std::fs::write(home.join(".ssh/secret"), SECRET).map_err(io)?;
    // Credential files inside what commands see: masked.
    let home_credential = home.join(".cargo/credentials.toml");
    // As a contained command sees the workspace: read-only.
    let read_only_root = base.join("read-only");
    std::fs::create_dir_all(&read_only_root).map_err(io)?;
    let workspace_credential = read_only_root.join(".env");
    std::fs::write(&home_credential, SECRET).map_err(io)?;
    std::fs::write(&workspace_credential, SECRET).map_err(io)?;
    // Files other programs run: a repository's, an editor's, and a package cache's.
    const KEPT: &str = "keel-sandbox-check-original\n";
    let cache_file = home.join(".cargo/registry/src/probe-1.0.0/build.rs");
    let editor_file = ws.join(".vscode/settings.json");
    for file in [&cache_file, &editor_file, &ws.join(".git/hooks/README")] {
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(file, KEPT).map_err(io)?;
    }
    std::fs::write(
        ws.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n",
    )
    .map_err(io)?;
    let index = Arc::new(
        super::CredentialIndex::new(
            vec![ws.clone()],
            Arc::new(|_: &Path, _: &std::fs::Metadata| false),
        )
        .with_guard(Some(crate::policy::watchdog::guard_rules())),
    );
    let mut guarded = super::GuardSnapshot::take(std::slice::from_ref(&ws), Some(&index));
    let (protected, pinned) =
        super::protected_paths(std::slice::from_ref(&ws), &guarded.top_level());
    guarded.set_bound(&protected);
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
    listener.set_nonblocking(true).map_err(io)?;
    let port = listener.local_addr().map_err(io)?.port();
    let marker = format!("86399.{}", std::process::id());
    let caps_marker = format!("86398.{}", std::process::id());
    // A process outside the command (its command line must stay unreadable), and one in the
    // helper's process group (a `kill -9 0` from the command must not reach it).
    let outsider_marker = format!("86397.{}", std::process::id());
    let mut outsider = Spawned(
        Command::new("sleep")
            .arg(&outsider_marker)
            .stdin(Stdio::null())
            .spawn()
            .map_err(io)?,
    );
    let mut sentinel = Spawned(
        Command::new("sleep")
            .arg("86396")
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(io)?,
    );
    let device = raw_device();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    // The filtering proxy, when this thread is in a tokio runtime that can serve it.
    let upstream = Upstream::start().map_err(io)?;
    let cancel = CancellationToken::new();
    let _stop_proxy = cancel.clone().drop_guard();
    let proxy = tokio::runtime::Handle::try_current()
        .ok()
        .filter(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        .map(|_| {
            proxy::start(
                &scratch.join(proxy::SOCKET_NAME),
                Filter {
                    scope: None,
                    gate: Arc::new(CheckGate),
                    upstream_for_tests: Some(upstream.port),
                },
                cancel.clone(),
            )
        });
    let profile = Profile {
        build: super::profile::HELPER_BUILD.to_owned(),
        nonce: nonce.clone(),
        status_file: scratch.join("status"),
        required: true,
        mechanism,
        cwd: ws.clone(),
        writable: vec![ws.clone()],
        readable: vec![read_only_root.clone()],
        protected,
        pinned,
        home: Some(home.clone()),
        home_readable: DEFAULT_HOME_READABLE.iter().map(|r| home.join(r)).collect(),
        home_writable: DEFAULT_HOME_WRITABLE.iter().map(|r| home.join(r)).collect(),
        tmp_dir: scratch.join("tmp"),
        staging_dir: scratch.join("root"),
        network: false,
        proxy: proxy.clone().and_then(Result::ok),
        masked: vec![home_credential.clone(), workspace_credential.clone()],
        env_allow: super::profile::default_env_allow(),
        mask_ruleset: None,
    };
    let profile_file = scratch.join("profile.json");
    let text = serde_json::to_string(&profile).map_err(|e| e.to_string())?;
    std::fs::write(&profile_file, text).map_err(io)?;
    let script = format!(
        "cat {secret} 2>/dev/null && echo READ-SECRET\n\
         grep -q {SECRET} {home_credential} 2>/dev/null && echo READ-HOME-CREDENTIAL\n\
         grep -q {SECRET} {workspace_credential} 2>/dev/null && echo READ-WORKSPACE-CREDENTIAL\n\
         [ -n \"$KEEL_CHECK_TOKEN\" ] && echo ENV-PASSED\n\
         echo x 2>/dev/null > {outside}/escaped && echo WROTE-OUTSIDE\n\
         (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo CONNECTED\n\
         (setsid sleep {marker} > /dev/null 2>&1 &)\n\
         ask() {{ (exec 3<>\"/dev/tcp/127.0.0.1/${{HTTP_PROXY##*:}}\" && printf \"$1\" >&3 && cat <&3) 2>/dev/null; }}\n\
         if [ -n \"$HTTP_PROXY\" ]; then\n\
         echo PROXY-OFFERED\n\
         ask 'GET http://127.0.0.1:{up}/ HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' | grep -q {UPSTREAM_REPLY} && echo PROXY-ALLOWED\n\
         ask 'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n' | grep -q 'HTTP/1.1 403' && echo PROXY-LOOPBACK-REFUSED\n\
         ask 'CONNECT 10.0.0.1:80 HTTP/1.1\\r\\n\\r\\n' | grep -q 'HTTP/1.1 403' && echo PROXY-PRIVATE-REFUSED\n\
         ask 'CONNECT not-allowed.invalid:443 HTTP/1.1\\r\\n\\r\\n' | grep -q 'refused not-allowed.invalid' && echo PROXY-HOST-REFUSED\n\
         fi\n\
         (exec 3<>/dev/tcp/127.0.0.1/{up}) 2>/dev/null && echo DIRECT-CONNECTED\n\
         mkdir -p .keel 2>/dev/null; echo planted 2>/dev/null > .keel/config.toml\n\
         echo planted 2>/dev/null > .vscode/settings.json\n\
         echo planted 2>/dev/null > .envrc\n\
         mkdir -p sub/.git 2>/dev/null; printf '[core]\\n\\tfsmonitor = ./payload\\n' 2>/dev/null > sub/.git/config\n\
         echo planted 2>/dev/null >> {cache_file}\n\
         grep -q {outsider} /proc/{outsider_pid}/cmdline 2>/dev/null && echo READ-OTHER-PROC\n\
         head -c 1 {device} > /dev/null 2>&1 && echo READ-RAW-DEVICE\n\
         cat /proc/1/environ > /dev/null 2>&1 && echo READ-INIT\n\
         {trace_init}\n\
         sleep {caps_marker} &\n\
         echo caps-ready\n\
         read -r _\n\
         kill $! 2>/dev/null\n\
         echo probe-done\n\
         kill -9 0",
        outsider = outsider_marker,
        trace_init = TRACE_INIT,
        secret = home.join(".ssh/secret").display(),
        home_credential = home_credential.display(),
        workspace_credential = workspace_credential.display(),
        outside = outside.display(),
        up = upstream.port,
        outsider_pid = outsider.id(),
        device = device.display(),
        cache_file = cache_file.display(),
    );
    let run = run_helper(
        helper,
        prefix,
        &profile_file,
        &script,
        sentinel.id(),
        &caps_marker,
    )?;
    let outsider_seen = running(&mut outsider);
    let sentinel_alive = running(&mut sentinel);
    let stdout = run.stdout;
    let status_text = std::fs::read_to_string(&profile.status_file).unwrap_or_default();
    let status: Option<Status> =
        super::status_line(&status_text).and_then(|line| serde_json::from_str(line).ok());
    let wanted = match mechanism {
        Mechanism::Landlock => "landlock",
        _ => "namespaces",
    };
    let available = match status {
        Some(status) if status.nonce == nonce && status.mechanism == wanted => Ok(status.notes),
        _ => Err(run.stderr.trim().to_owned()),
    };
    let daemon_gone = (0..100).any(|_| {
        let gone = pids_with_arg(&marker).is_empty();
        if !gone {
            std::thread::sleep(Duration::from_millis(10));
        }
        gone
    });
    // A failed check leaves nothing behind either.
    for pid in pids_with_arg(&marker) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
    let ran = stdout.contains("probe-done");
    let restored = guarded
        .restore(available.is_ok() && wanted == "namespaces")
        .join("\n");
    let kept = |path: &Path| std::fs::read_to_string(path).is_ok_and(|text| text == KEPT);
    let mut claims = vec![
        Claim {
            what: "a hidden home file cannot be read",
            held: ran && !stdout.contains("READ-SECRET") && !stdout.contains(SECRET),
        },
        Claim {
            what: "a credential file inside a visible home directory cannot be read",
            held: ran && !stdout.contains("READ-HOME-CREDENTIAL"),
        },
        Claim {
            what: "a masked workspace credential file cannot be read",
            held: ran && !stdout.contains("READ-WORKSPACE-CREDENTIAL"),
        },
        Claim {
            what: "a variable outside the environment allowlist does not reach the command",
            held: ran && !stdout.contains("ENV-PASSED"),
        },
        Claim {
            what: "a file outside the workspace cannot be written",
            held: ran && !stdout.contains("WROTE-OUTSIDE") && !outside.join("escaped").exists(),
        },
        Claim {
            what: "a loopback port cannot be reached",
            held: ran
                && !stdout.contains("CONNECTED")
                && matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        },
        Claim {
            what: "a double-forked daemon dies with the command",
            held: ran && daemon_gone,
        },
        Claim {
            what: "`kill -9 0` from the command stays inside it (a session and process group of \
                   its own)",
            held: ran && sentinel_alive,
        },
        Claim {
            what: "another process's /proc (its command line) cannot be read",
            held: ran && outsider_seen && !stdout.contains("READ-OTHER-PROC"),
        },
        Claim {
            what: "a raw device cannot be read",
            held: ran && !stdout.contains("READ-RAW-DEVICE"),
        },
        Claim {
            what: "the sandbox's PID 1 cannot be traced or read (not dumpable; the host's init \
                   under the fallback)",
            held: ran && !stdout.contains("READ-INIT") && !stdout.contains("TRACED-INIT"),
        },
        Claim {
            what: "the command has no capability (effective, permitted, ambient; the bounding \
                   set too when run as root) and cannot gain one (no_new_privs)",
            held: ran && run.capabilities_dropped,
        },
        Claim {
            what: "Keel's project configuration (.keel/) cannot be created: it is removed, and \
                   the result says so",
            held: ran && !ws.join(".keel").exists() && restored.contains(".keel"),
        },
        Claim {
            what: "an editor's file (.vscode/) cannot be changed, and a new .envrc is removed",
            held: ran
                && kept(&editor_file)
                && !ws.join(".envrc").exists()
                && restored.contains(".envrc"),
        },
        Claim {
            what: "a nested repository whose configuration runs a program (core.fsmonitor) is \
                   removed",
            held: ran && !ws.join("sub/.git").exists() && restored.contains("sub/.git"),
        },
        Claim {
            what: "a package cache (~/.cargo/registry) cannot be changed",
            held: ran && kept(&cache_file),
        },
    ];
    let killed = kill_probe(helper, prefix, &profile_file, &profile.status_file, &nonce);
    claims.push(Claim {
        what: "a daemon dies when the helper is killed with SIGKILL (as an editor's kill \
               does), and Keel can verify that nothing is left",
        held: killed.is_ok_and(|verified| verified),
    });
    let proxy_status = match &proxy {
        None => Err("not tested: no multi-threaded tokio runtime".to_owned()),
        Some(Err(e)) => Err(format!("cannot start: {e}")),
        Some(Ok(_)) if ran && !stdout.contains("PROXY-OFFERED") => {
            Err("not offered to commands here (the network stays off)".to_owned())
        }
        Some(Ok(_)) => Ok(()),
    };
    if proxy_status.is_ok() {
        let upstream_connections = upstream.connections.load(Ordering::Relaxed);
        claims.extend([
            Claim {
                what: "an allowed host is reached through the filtering proxy",
                held: ran && stdout.contains("PROXY-ALLOWED"),
            },
            Claim {
                what: "the proxy refuses a loopback port, even one a rule names",
                held: ran && stdout.contains("PROXY-LOOPBACK-REFUSED"),
            },
            Claim {
                what: "the proxy refuses a private address, even one a rule names",
                held: ran && stdout.contains("PROXY-PRIVATE-REFUSED"),
            },
            Claim {
                what: "the proxy refuses a host no rule allows (403 naming it)",
                held: ran && stdout.contains("PROXY-HOST-REFUSED"),
            },
            Claim {
                what: "a connection that bypasses the proxy fails",
                held: ran && !stdout.contains("DIRECT-CONNECTED") && upstream_connections <= 1,
            },
        ]);
    }
    Ok(MechanismReport {
        mechanism,
        available,
        claims,
        proxy: proxy_status,
    })
}

/// The live (not zombie) processes with `arg` among their arguments.
fn pids_with_arg(arg: &str) -> Vec<i32> {
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
const TRACE_INIT: &str = "command -v python3 > /dev/null && python3 -c 'import ctypes; \
    libc = ctypes.CDLL(None, use_errno=True); \
    print(\"TRACED-INIT\" if libc.ptrace(16, 1, 0, 0) == 0 else \"ptrace refused\")' 2>/dev/null";

/// A child process killed and reaped when dropped.
struct Spawned(std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Spawned {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

/// Whether `child` is still running.
fn running(child: &mut Spawned) -> bool {
    matches!(child.0.try_wait(), Ok(None))
}

/// A raw block device of this machine (the first in `/sys/block`), else `/dev/mem`.
fn raw_device() -> PathBuf {
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
struct ProbeRun {
    stdout: String,
    stderr: String,
    /// The program's capabilities, read from outside while it waited: none, and no way to gain
    /// one.
    capabilities_dropped: bool,
}

/// Runs the probe through the helper in the sentinel's process group; while the probe waits
/// (`caps-ready`) reads its capabilities from outside, then lets it finish.
fn run_helper(
    helper: &Path,
    prefix: &[String],
    profile_file: &Path,
    script: &str,
    sentinel: u32,
    caps_marker: &str,
) -> Result<ProbeRun, String> {
    use std::io::BufRead as _;
    let mut child = Command::new(helper)
        .args(prefix)
        .arg("run")
        .arg("--profile")
        .arg(profile_file)
        .args(["--", "bash", "-c", script])
        // A variable outside the allowlist: it must not reach the command.
        .env("KEEL_CHECK_TOKEN", SECRET)
        .process_group(i32::try_from(sentinel).map_err(|e| e.to_string())?)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the helper {}: {e}", helper.display()))?;
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
fn kill_probe(
    helper: &Path,
    prefix: &[String],
    profile_file: &Path,
    status_file: &Path,
    nonce: &str,
) -> Result<bool, String> {
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
            .map_err(|e| format!("cannot run the helper {}: {e}", helper.display()))?,
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
        let done = super::guard_state(&text, nonce)
            .is_some_and(|state| !super::alive(state.guard) && (state.namespace || state.empty));
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
