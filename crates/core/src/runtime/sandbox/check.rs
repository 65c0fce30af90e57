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

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::profile::{DEFAULT_HOME_READABLE, DEFAULT_HOME_WRITABLE, Mechanism, Profile, Status};
use super::proxy::{self, Filter, HostGate};

mod processes;

use processes::{
    ProbeRun, Spawned, TRACE_INIT, UPSTREAM_REPLY, Upstream, kill_probe, pids_with_arg, raw_device,
    run_helper, running,
};

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
    /// `Ok(notes)` when the helper confirmed this mechanism; otherwise what the helper said
    /// (its standard error, shown to the user as it is).
    // String error: the helper's own standard error, shown as it is.
    pub available: Result<Vec<String>, String>,
    pub claims: Vec<Claim>,
    /// Whether commands could use the filtering proxy under this mechanism (its claims are
    /// among [`MechanismReport::claims`] then); otherwise why not, a line shown as it is.
    // String error: a report line shown as it is.
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

    // String error: the reason the proxy puts as it is in its `403`.
    fn check(&self, host: &str) -> Result<(), String> {
        match host {
            "127.0.0.1" | "10.0.0.1" => Ok(()),
            _ => Err(format!("no rule allows {host}")),
        }
    }
}

/// Runs the self-test of `mechanism` with `helper` (`prefix` before `run`), the guards told
/// apart by `guard` (the watchdog's, `policy::watchdog::guard_rules`). Inside a tokio runtime
/// (a multi-threaded one: this call blocks its thread) the filtering proxy is tested too.
pub fn self_test(
    helper: &Path,
    prefix: &[String],
    mechanism: Mechanism,
    guard: super::GuardRules,
) -> MechanismReport {
    let base = std::env::temp_dir().join(format!(
        "keel-sandbox-check-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let report = run_probe(&base, helper, prefix, mechanism, guard);
    let _ = std::fs::remove_dir_all(&base);
    report.unwrap_or_else(|error| MechanismReport {
        mechanism,
        available: Err(error.to_string()),
        claims: Vec::new(),
        proxy: Err("not tested".into()),
    })
}

/// Why the self-test could not run at all (its layout, or a process it needs, could not be made).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Setup {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("cannot run the helper {}: {source}", helper.display())]
    Helper {
        helper: PathBuf,
        source: std::io::Error,
    },
    #[error("the probe's profile: {0}")]
    Profile(#[source] serde_json::Error),
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> CheckError + '_ {
    move |source| CheckError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn setup(what: &'static str) -> impl FnOnce(std::io::Error) -> CheckError {
    move |source| CheckError::Setup { what, source }
}

/// What a guarded file holds before the probe (it must still hold it after).
const KEPT: &str = "keel-sandbox-check-original\n";

/// The probe's throw-away layout, canonical.
struct Layout {
    ws: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    scratch: PathBuf,
    /// As a contained command sees the workspace: read-only.
    read_only_root: PathBuf,
    /// Credential files inside what commands see: masked.
    home_credential: PathBuf,
    workspace_credential: PathBuf,
    /// Files other programs run: a package cache's and an editor's.
    cache_file: PathBuf,
    editor_file: PathBuf,
}

impl Layout {
    fn create(base: &Path) -> Result<Layout, CheckError> {
        for dir in [
            base.join("workspace"),
            base.join("home/.ssh"),
            base.join("home/.cargo"),
            base.join("outside"),
            base.join("scratch/tmp"),
            base.join("read-only"),
        ] {
            std::fs::create_dir_all(&dir).map_err(at(&dir))?;
        }
        let base = std::fs::canonicalize(base).map_err(at(base))?;
        let (ws, home) = (base.join("workspace"), base.join("home"));
        let layout = Layout {
            home_credential: home.join(".cargo/credentials.toml"),
            workspace_credential: base.join("read-only/.env"),
            cache_file: home.join(".cargo/registry/src/probe-1.0.0/build.rs"),
            editor_file: ws.join(".vscode/settings.json"),
            outside: base.join("outside"),
            scratch: base.join("scratch"),
            read_only_root: base.join("read-only"),
            ws,
            home,
        };
        let write = |path: &Path, text: &str| std::fs::write(path, text).map_err(at(path));
        write(&layout.home.join(".ssh/secret"), SECRET)?;
        write(&layout.home_credential, SECRET)?;
        write(&layout.workspace_credential, SECRET)?;
        for file in [
            &layout.cache_file,
            &layout.editor_file,
            &layout.ws.join(".git/hooks/README"),
        ] {
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(at(parent))?;
            }
            write(file, KEPT)?;
        }
        write(
            &layout.ws.join(".git/config"),
            "[core]\n\trepositoryformatversion = 0\n",
        )?;
        Ok(layout)
    }

    /// The profile the probe runs under: `required`, the network off, the credentials masked.
    fn profile(
        &self,
        mechanism: Mechanism,
        nonce: &str,
        (protected, pinned): (Vec<PathBuf>, Vec<PathBuf>),
        proxy: Option<proxy::ProxyEndpoint>,
    ) -> Profile {
        let home = &self.home;
        Profile {
            build: super::profile::HELPER_BUILD.to_owned(),
            nonce: nonce.to_owned(),
            status_file: self.scratch.join("status"),
            required: true,
            mechanism,
            cwd: self.ws.clone(),
            writable: vec![self.ws.clone()],
            readable: vec![self.read_only_root.clone()],
            protected,
            pinned,
            home: Some(home.clone()),
            home_readable: DEFAULT_HOME_READABLE.iter().map(|r| home.join(r)).collect(),
            home_writable: DEFAULT_HOME_WRITABLE.iter().map(|r| home.join(r)).collect(),
            tmp_dir: self.scratch.join("tmp"),
            staging_dir: self.scratch.join("root"),
            network: false,
            proxy,
            masked: vec![
                self.home_credential.clone(),
                self.workspace_credential.clone(),
            ],
            env_allow: super::profile::default_env_allow(),
            mask_ruleset: None,
            mask_socket: None,
            done_fifo: None,
            keeper: None,
            no_connect: false,
        }
    }
}

/// What the probe must not reach, outside the sandbox: a loopback listener of this process, a
/// process whose command line must stay unreadable, and one in the helper's process group (a
/// `kill -9 0` from the command must not reach it).
struct Outside {
    listener: TcpListener,
    port: u16,
    outsider: Spawned,
    outsider_marker: String,
    sentinel: Spawned,
    /// The argument of the daemon the probe leaves (it must die with the command).
    daemon_marker: String,
    /// The argument of the process whose capabilities are read while it runs.
    caps_marker: String,
}

impl Outside {
    fn start() -> Result<Outside, CheckError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(setup("a loopback listener"))?;
        listener
            .set_nonblocking(true)
            .map_err(setup("a loopback listener"))?;
        let port = listener
            .local_addr()
            .map_err(setup("a loopback listener"))?
            .port();
        let pid = std::process::id();
        let outsider_marker = format!("86397.{pid}");
        let outsider = Spawned(
            Command::new("sleep")
                .arg(&outsider_marker)
                .stdin(Stdio::null())
                .spawn()
                .map_err(setup("starting `sleep`"))?,
        );
        let sentinel = Spawned(
            Command::new("sleep")
                .arg("86396")
                .stdin(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(setup("starting `sleep`"))?,
        );
        Ok(Outside {
            listener,
            port,
            outsider,
            outsider_marker,
            sentinel,
            daemon_marker: format!("86399.{pid}"),
            caps_marker: format!("86398.{pid}"),
        })
    }
}

/// The self-test's filtering proxy, when this thread is in a tokio runtime that can serve it.
fn start_proxy(
    scratch: &Path,
    upstream: u16,
    cancel: &CancellationToken,
) -> Option<Result<proxy::ProxyEndpoint, proxy::ProxyError>> {
    tokio::runtime::Handle::try_current()
        .ok()
        .filter(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        .map(|_| {
            proxy::start(
                &scratch.join(proxy::SOCKET_NAME),
                Filter {
                    scope: None,
                    gate: Arc::new(CheckGate),
                    upstream_for_tests: Some(upstream),
                },
                cancel.clone(),
            )
        })
}

/// The probe: each line prints a word when the sandbox let it do what it must not.
fn probe_script(layout: &Layout, outside: &Outside, device: &Path, upstream: u16) -> String {
    format!(
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
        port = outside.port,
        marker = outside.daemon_marker,
        caps_marker = outside.caps_marker,
        outsider = outside.outsider_marker,
        trace_init = TRACE_INIT,
        secret = layout.home.join(".ssh/secret").display(),
        home_credential = layout.home_credential.display(),
        workspace_credential = layout.workspace_credential.display(),
        outside = layout.outside.display(),
        up = upstream,
        outsider_pid = outside.outsider.id(),
        device = device.display(),
        cache_file = layout.cache_file.display(),
    )
}

fn run_probe(
    base: &Path,
    helper: &Path,
    prefix: &[String],
    mechanism: Mechanism,
    guard: super::GuardRules,
) -> Result<MechanismReport, CheckError> {
    let layout = Layout::create(base)?;
    let ws = &layout.ws;
    let index = Arc::new(
        super::CredentialIndex::new(
            vec![ws.clone()],
            Arc::new(|_: &Path, _: &std::fs::Metadata| false),
        )
        .with_guard(Some(guard)),
    );
    let mut guarded = super::GuardSnapshot::take(std::slice::from_ref(ws), Some(&index));
    let (protected, pinned) =
        super::protected_paths(std::slice::from_ref(ws), &guarded.top_level());
    guarded.set_bound(&protected);
    let mut outside = Outside::start()?;
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let upstream = Upstream::start().map_err(setup("the self-test's upstream"))?;
    let cancel = CancellationToken::new();
    let _stop_proxy = cancel.clone().drop_guard();
    let proxy = start_proxy(&layout.scratch, upstream.port, &cancel);
    let endpoint = proxy.as_ref().and_then(|p| p.as_ref().ok()).cloned();
    let mut profile = layout.profile(mechanism, &nonce, (protected, pinned), endpoint);
    // Under namespaces, through a namespace keeper, as Keel's own commands run.
    let keeper = (mechanism != Mechanism::Landlock)
        .then(|| ProbeKeeper::start(helper, prefix, &layout.scratch))
        .flatten();
    profile.keeper = keeper.as_ref().map(|keeper| keeper.socket.clone());
    let profile_file = layout.scratch.join("profile.json");
    let text = serde_json::to_string(&profile).map_err(CheckError::Profile)?;
    std::fs::write(&profile_file, text).map_err(at(&profile_file))?;
    let script = probe_script(&layout, &outside, &raw_device(), upstream.port);
    let run = run_helper(
        helper,
        prefix,
        &profile_file,
        &script,
        outside.sentinel.id(),
        &outside.caps_marker,
    )?;
    let wanted = match mechanism {
        Mechanism::Landlock => "landlock",
        _ => "namespaces",
    };
    let status_text = std::fs::read_to_string(&profile.status_file).unwrap_or_default();
    let mut available = match super::status_line(&status_text)
        .and_then(|line| serde_json::from_str::<Status>(line).ok())
    {
        Some(status) if status.nonce == nonce && status.mechanism == wanted => Ok(status.notes),
        _ => Err(run.stderr.trim().to_owned()),
    };
    if let (Some(keeper), Ok(notes)) = (&keeper, &mut available) {
        notes.push(if keeper.served() {
            "the probe ran in a network namespace from the session's namespace keeper, as \
             commands do"
                .to_owned()
        } else {
            "the namespace keeper did not serve the probe: it made its own namespaces".to_owned()
        });
    }
    let seen = Seen {
        ran: run.stdout.contains("probe-done"),
        outsider_seen: running(&mut outside.outsider),
        sentinel_alive: running(&mut outside.sentinel),
        daemon_gone: daemon_gone(&outside.daemon_marker),
        loopback_untouched: matches!(
            outside.listener.accept(),
            Err(e) if e.kind() == ErrorKind::WouldBlock
        ),
        restored: guarded
            .restore(available.is_ok() && wanted == "namespaces")
            .join("\n"),
        run,
    };
    let mut claims = confinement_claims(&seen, &layout);
    claims.extend(guard_claims(&seen, &layout));
    let killed = kill_probe(helper, prefix, &profile_file, &profile.status_file, &nonce);
    claims.push(Claim {
        what: "a daemon dies when the helper is killed with SIGKILL (as an editor's kill \
               does), and Keel can verify that nothing is left",
        held: killed.is_ok_and(|verified| verified),
    });
    let proxy_status = match &proxy {
        None => Err("not tested: no multi-threaded tokio runtime".to_owned()),
        Some(Err(e)) => Err(format!("cannot start: {e}")),
        Some(Ok(_)) if seen.ran && !seen.run.stdout.contains("PROXY-OFFERED") => {
            Err("not offered to commands here (the network stays off)".to_owned())
        }
        Some(Ok(_)) => Ok(()),
    };
    if proxy_status.is_ok() {
        let connections = upstream.connections.load(Ordering::Relaxed);
        claims.extend(proxy_claims(&seen, connections));
    }
    Ok(MechanismReport {
        mechanism,
        available,
        claims,
        proxy: proxy_status,
    })
}

/// A namespace keeper for the probe (`keel-sandbox keep`, as a session has one), holding a
/// network namespace ready.
struct ProbeKeeper {
    child: Spawned,
    socket: PathBuf,
    /// The network namespace it held before the probe.
    spare: PathBuf,
}

impl ProbeKeeper {
    /// Starts one and waits (up to two seconds) until it holds a namespace; `None` when it does
    /// not (the probe then makes its own namespaces, as a command would).
    fn start(helper: &Path, prefix: &[String], scratch: &Path) -> Option<ProbeKeeper> {
        let socket = scratch.join("keeper.sock");
        let child = Spawned(
            Command::new(helper)
                .args(prefix)
                .arg("keep")
                .arg(&socket)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .ok()?,
        );
        let own = std::fs::read_link("/proc/self/ns/net").ok()?;
        for _ in 0..200 {
            if let Ok(spare) = std::fs::read_link(format!("/proc/{}/ns/net", child.id()))
                && spare != own
                && socket.exists()
            {
                return Some(ProbeKeeper {
                    child,
                    socket,
                    spare,
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Whether it handed its namespace out (it holds another now).
    fn served(&self) -> bool {
        std::fs::read_link(format!("/proc/{}/ns/net", self.child.id()))
            .is_ok_and(|now| now != self.spare)
    }
}

/// What was seen of one run of the probe, from inside (its output) and from outside.
struct Seen {
    run: ProbeRun,
    /// The probe ran to its end.
    ran: bool,
    /// The outsider was running while the probe looked at it.
    outsider_seen: bool,
    /// The sentinel in the helper's group survived the probe's `kill -9 0`.
    sentinel_alive: bool,
    /// The probe's daemon died with it.
    daemon_gone: bool,
    /// The loopback listener got no connection.
    loopback_untouched: bool,
    /// What the guard put back, one line each.
    restored: String,
}

/// Whether the daemon started with `marker` is gone (waits up to a second); kills what is left
/// either way, so a failed check leaves nothing behind.
fn daemon_gone(marker: &str) -> bool {
    let gone = (0..100).any(|_| {
        let gone = pids_with_arg(marker).is_empty();
        if !gone {
            std::thread::sleep(Duration::from_millis(10));
        }
        gone
    });
    for pid in pids_with_arg(marker) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
    gone
}

/// The claims about what the command can reach: files, variables, the network, processes.
fn confinement_claims(seen: &Seen, layout: &Layout) -> Vec<Claim> {
    let (ran, stdout) = (seen.ran, seen.run.stdout.as_str());
    vec![
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
            held: ran
                && !stdout.contains("WROTE-OUTSIDE")
                && !layout.outside.join("escaped").exists(),
        },
        Claim {
            what: "a loopback port cannot be reached",
            held: ran && !stdout.contains("CONNECTED") && seen.loopback_untouched,
        },
        Claim {
            what: "a double-forked daemon dies with the command",
            held: ran && seen.daemon_gone,
        },
        Claim {
            what: "`kill -9 0` from the command stays inside it (a session and process group of \
                   its own)",
            held: ran && seen.sentinel_alive,
        },
        Claim {
            what: "another process's /proc (its command line) cannot be read",
            held: ran && seen.outsider_seen && !stdout.contains("READ-OTHER-PROC"),
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
            held: ran && seen.run.capabilities_dropped,
        },
    ]
}

/// The claims about files other programs run (the guards).
fn guard_claims(seen: &Seen, layout: &Layout) -> Vec<Claim> {
    let (ran, restored, ws) = (seen.ran, seen.restored.as_str(), &layout.ws);
    let kept = |path: &Path| std::fs::read_to_string(path).is_ok_and(|text| text == KEPT);
    vec![
        Claim {
            what: "Keel's project configuration (.keel/) cannot be created: it is removed, and \
                   the result says so",
            held: ran && !ws.join(".keel").exists() && restored.contains(".keel"),
        },
        Claim {
            what: "an editor's file (.vscode/) cannot be changed, and a new .envrc is removed",
            held: ran
                && kept(&layout.editor_file)
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
            held: ran && kept(&layout.cache_file),
        },
    ]
}

/// The claims about the filtering proxy (when commands could use it); `connections`: how many
/// the allowed upstream got.
fn proxy_claims(seen: &Seen, connections: usize) -> [Claim; 5] {
    let (ran, stdout) = (seen.ran, seen.run.stdout.as_str());
    [
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
            held: ran && !stdout.contains("DIRECT-CONNECTED") && connections <= 1,
        },
    ]
}
