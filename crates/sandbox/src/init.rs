//! Stage 2 under namespaces: the PID namespace's init (a fork of stage 1), which pivots into
//! the new root, drops every capability, starts the program and reaps what it leaves; and the
//! forwarder that makes Keel's filtering proxy `127.0.0.1:PORT` inside the command's network
//! namespace. When the PID namespace cannot be used, stage 1 confines itself with the fallback
//! and becomes the program ([`fallback_exec`]).

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: init starts the program and the \
              forwarder listens on the namespace's own loopback, outside Keel's runtime"
)]

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{ForkResult, Gid, Pid, Uid, chdir, pivot_root};

use crate::error::{Error, NamespaceFailure, Result};
use crate::helper::{
    Ending, block_signals, fail, finish_like, own_session, program_command, proxy_env, signalled,
    supervise, write_guard, write_status,
};
use crate::namespaces::write_file;
use crate::profile::{Mechanism, Profile, done_line};
use crate::{EXIT_HELPER_FAILED, fallback};

/// Stage 1, namespaces in place: a new PID namespace whose init is stage 2, a fork of this
/// process (no second exec of Keel's binary: that exec was most of the sandbox's cost).
pub(crate) fn start(
    profile: &Profile,
    ids: (u32, u32),
    program: &[OsString],
    mut status_file: std::fs::File,
    done: Option<std::fs::File>,
    proxy: bool,
) -> i32 {
    if let Err(e) = unshare(CloneFlags::CLONE_NEWPID) {
        // The view is built but nothing can be spawned into a PID namespace: fall back.
        let why = NamespaceFailure::PidNamespace(e);
        return fail(&fallback_exec(profile, program, why, &mut status_file));
    }
    // SAFETY: `fork` is sound when the process has a single thread (no lock can be held by a
    // thread that does not exist in the child). This process has exactly one: the kernel let it
    // `unshare(CLONE_NEWUSER)` above, which fails with EINVAL in a multi-threaded process.
    #[expect(
        unsafe_code,
        reason = "fork in a process the kernel has proven single-threaded (see SAFETY)"
    )]
    let forked = unsafe { nix::unistd::fork() };
    let init_pid = match forked {
        Ok(ForkResult::Child) => {
            std::process::exit(init(profile, ids, program, proxy, &mut status_file, done))
        }
        Ok(ForkResult::Parent { child }) => {
            // Init's to write: this process's copy would only outlive the message.
            drop(done);
            child
        }
        Err(e) => return fail(&Error::sys("starting the namespace init", e)),
    };
    // Keel's proof that the namespace is empty: init has exited (the kernel lets init finish
    // only once every other process of its namespace is gone).
    write_guard(&mut status_file, init_pid);
    let signals = block_signals();
    let ending = supervise(init_pid, &signals, |signal| {
        let _ = kill(init_pid, signal);
    });
    // Read through the handle: init's pivot_root changed this process's root too.
    let (status, signalled) = signalled(&mut status_file);
    let confirmed = status.contains(&profile.nonce);
    // Init cannot die by a signal of its own; it leaves the program's signal in the status file.
    if let Some(signal) = signalled {
        return finish_like(Ending::Signal(signal));
    }
    let code = ending.code();
    if code == EXIT_HELPER_FAILED && !confirmed {
        // Stage 2 could not confine (and ran nothing): the fallback, in this process.
        let _ = status_file.set_len(0);
        let _ = std::io::Seek::rewind(&mut status_file);
        return fail(&fallback_exec(
            profile,
            program,
            NamespaceFailure::SetUp,
            &mut status_file,
        ));
    }
    code
}

/// Landlock + seccomp applied to this very process, then `exec` (used once a PID namespace
/// exists but cannot be used: no more children can be started here). Returns only on failure.
fn fallback_exec(
    profile: &Profile,
    program: &[OsString],
    why: NamespaceFailure,
    status: &mut std::fs::File,
) -> Error {
    let mut notes = vec![format!("namespaces unavailable: {why}")];
    let cannot = |fallback: Option<Error>| Error::CannotConfine {
        why,
        fallback: fallback.map(Box::new),
    };
    if profile.mechanism == Mechanism::Namespaces {
        return cannot(None);
    }
    let mut proxy_port = None;
    let mechanism = match fallback::confine(profile) {
        Ok((more, port)) => {
            notes.extend(more);
            notes.push("background processes are ended by process group only".into());
            proxy_port = port;
            "landlock"
        }
        Err(e) if profile.required => return cannot(Some(e)),
        Err(e) => {
            notes.push(format!("Landlock/seccomp unavailable: {e}"));
            "none"
        }
    };
    if let Err(e) = write_status(status, profile, mechanism, notes) {
        return e;
    }
    let Some((first, rest)) = program.split_first() else {
        return Error::NoProgram;
    };
    let mut command = program_command(profile, first, rest);
    command
        .env("TMPDIR", &profile.tmp_dir)
        .current_dir(&profile.cwd);
    if let Some(port) = proxy_port {
        proxy_env(&mut command, port);
    }
    crate::fds::close_inherited_on_exec();
    Error::Exec {
        program: first.to_string_lossy().into_owned(),
        source: command.exec(),
    }
}

/// Stage 2: PID 1 of the new namespace.
fn init(
    profile: &Profile,
    (uid, gid): (u32, u32),
    program: &[OsString],
    proxy: bool,
    status_file: &mut std::fs::File,
    done: Option<std::fs::File>,
) -> i32 {
    // If stage 1 dies (SIGKILL from Keel), so does this namespace.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let mut notes = match confine_init(profile, uid, gid) {
        Ok(notes) => notes,
        Err(error) => return fail(&error),
    };
    // What no namespace separates (the keyrings, terminal injection), by seccomp; built before
    // the status says `namespaces`, so a failure here still leaves the fallback.
    let filter = match fallback::Prepared::for_namespaces(profile) {
        Ok(filter) => filter,
        Err(error) => return fail(&error),
    };
    let forwarder = if proxy { start_forwarder() } else { None };
    if profile.proxy.is_some() && !profile.network {
        notes.push(match forwarder {
            Some(_) => "network: only the hosts the rules allow, through Keel's proxy".into(),
            None => "the filtering proxy could not be reached: the network is off".into(),
        });
    }
    if let Err(error) = write_status(status_file, profile, "namespaces", notes) {
        return fail(&error);
    }
    let Some((first, rest)) = program.split_first() else {
        return EXIT_HELPER_FAILED;
    };
    let mut command = program_command(profile, first, rest);
    command.env("TMPDIR", "/tmp");
    if let Some(port) = forwarder {
        proxy_env(&mut command, port);
    }
    own_session(&mut command, Some(filter));
    let child = command.spawn();
    let child = match child {
        Ok(child) => child,
        Err(source) => {
            fail(&Error::Exec {
                program: first.to_string_lossy().into_owned(),
                source,
            });
            return 127;
        }
    };
    let Ok(pid) = i32::try_from(child.id()) else {
        return EXIT_HELPER_FAILED;
    };
    let signals = block_signals();
    // `kill(-1, sig)` from init reaches every other process of the namespace.
    let ending = supervise(Pid::from_raw(pid), &signals, |signal| {
        let _ = kill(Pid::from_raw(-1), signal);
    });
    if let Ending::Signal(signal) = ending {
        let _ = status_file.write_all(format!("\nsignal {}\n", signal as i32).as_bytes());
    }
    if let Some(mut done) = done {
        // Keel reports the command done from this line, before this process and stage 1 exit
        // (their exits tear the namespaces down, each waiting for an RCU grace period): so
        // first make the namespace as empty as init's own exit would.
        empty_namespace();
        let (code, signal) = match ending {
            Ending::Code(code) => (Some(code), None),
            Ending::Signal(signal) => (None, Some(signal as i32)),
        };
        let _ = done.write_all(done_line(&profile.nonce, code, signal).as_bytes());
    }
    ending.code()
}

/// Kills every other process of the namespace and reaps it: on return, init is the namespace's
/// only process. Every process of a PID namespace descends from its init (orphans are
/// reparented to it), so as long as one is left, init has a child to wait for; `ECHILD` means
/// none is left. Each round kills again, in case a process forked before it was killed.
pub(crate) fn empty_namespace() {
    loop {
        // `kill(-1, sig)` from init reaches every other process of the namespace.
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::__WALL)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// Inside the command's network namespace: a listener on its own `127.0.0.1` whose connections
/// are copied to the proxy's socket, served by a fork of init (a process of the namespace, gone
/// with it). Returns the port.
fn start_forwarder() -> Option<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).ok()?;
    let port = listener.local_addr().ok()?.port();
    // SAFETY: as in [`start`]: init is a fork of a process the kernel proved
    // single-threaded, and has started no thread.
    #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
    let forked = unsafe { nix::unistd::fork() };
    match forked {
        Ok(ForkResult::Child) => {
            for client in listener.incoming().flatten() {
                let _ = std::thread::Builder::new().spawn(move || relay_to_proxy(client));
            }
            std::process::exit(0)
        }
        Ok(ForkResult::Parent { .. }) => Some(port),
        Err(_) => None,
    }
}

/// Copies one connection to the proxy's socket and back.
fn relay_to_proxy(client: std::net::TcpStream) {
    use std::net::Shutdown;
    let Ok(upstream) = std::os::unix::net::UnixStream::connect(crate::SOCKET_IN_ROOT) else {
        return;
    };
    let (Ok(mut client_in), Ok(mut upstream_out)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut upstream_out);
        let _ = upstream_out.shutdown(Shutdown::Write);
    });
    let (mut client, mut upstream) = (client, upstream);
    let _ = std::io::copy(&mut upstream, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// Stage 2 set-up (stage 1's status file, inherited through the fork, stays open across the
/// pivot); returns notes on what is not enforced.
fn confine_init(profile: &Profile, uid: u32, gid: u32) -> Result<Vec<String>> {
    let notes = Vec::new();
    // Stage 1 made the mount point (`namespaces::build_root`).
    chdir(&profile.staging_dir).map_err(|e| Error::sys("chdir to the new root", e))?;
    mount_proc(std::path::Path::new("proc"))?;
    pivot_into_cwd()?;
    drop_privileges(&profile.cwd, uid, gid)?;
    Ok(notes)
}

/// Mounts the `/proc` of this process's PID namespace on `proc` (a path whose mount point
/// exists), its host entries read-only ([`PROC_READ_ONLY`]).
pub(crate) fn mount_proc(proc: &std::path::Path) -> Result<()> {
    mount(
        Some("proc"),
        proc,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| Error::sys("mounting /proc", e))?;
    proc_read_only(proc)
}

/// Makes the working directory (the top of the new root) the root, detaches the old one and
/// makes the new root's top read-only.
pub(crate) fn pivot_into_cwd() -> Result<()> {
    pivot_root(".", ".").map_err(|e| Error::sys("pivot_root", e))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| Error::sys("detaching the old root", e))?;
    chdir("/").map_err(|e| Error::sys("chdir /", e))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(|e| Error::sys("remounting / read-only", e))
}

/// Drops every capability (a nested user namespace mapped back to the caller, with a new
/// mount namespace, so every mount above is locked: it cannot be unmounted or made writable),
/// sets `no_new_privs`, makes this process not dumpable, and changes to `cwd`.
pub(crate) fn drop_privileges(cwd: &std::path::Path, uid: u32, gid: u32) -> Result<()> {
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(|e| Error::sys("nested user namespace", e))?;
    let _ = write_file("/proc/self/setgroups", "deny");
    write_file("/proc/self/uid_map", &format!("{uid} 0 1"))?;
    write_file("/proc/self/gid_map", &format!("{gid} 0 1"))?;
    nix::unistd::setresgid(Gid::from_raw(gid), Gid::from_raw(gid), Gid::from_raw(gid))
        .map_err(|e| Error::sys("setresgid", e))?;
    nix::unistd::setresuid(Uid::from_raw(uid), Uid::from_raw(uid), Uid::from_raw(uid))
        .map_err(|e| Error::sys("setresuid", e))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| Error::sys("no_new_privs", e))?;
    // Not dumpable: the program (same uid, root of its own user namespace) cannot ptrace init
    // or read its memory and descriptors (that takes CAP_SYS_PTRACE where init was executed,
    // outside). The forwarder, a fork of init, inherits it.
    nix::sys::prctl::set_dumpable(false).map_err(|e| Error::sys("dumpable", e))?;
    chdir(cwd).map_err(|e| Error::sys(format!("chdir {}", cwd.display()), e))
}

/// The entries of the new `/proc` that are the host's, not the namespace's, and that a program
/// run by root (Keel in a container, on a CI machine) could change through plain file
/// permissions, with no capability: most sysctls (`kernel.core_pattern` runs a program as root
/// outside on the next crash; `kernel.hostname` and `kernel.domainname` are the host's, since
/// the command shares its UTS namespace), interrupt affinities, the PCI bus.
const PROC_READ_ONLY: [&str; 4] = ["sys", "irq", "bus", "sysrq-trigger"];

/// Makes each of [`PROC_READ_ONLY`] in the new `/proc` a read-only bind mount of itself (locked
/// by the nested user namespace, so the program cannot make it writable again).
fn proc_read_only(proc: &std::path::Path) -> Result<()> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    for entry in PROC_READ_ONLY {
        let path = proc.join(entry);
        let what = || format!("making /proc/{entry} read-only");
        // Not looked at first: one this kernel's `/proc` lacks fails the bind with `ENOENT`.
        match mount(
            Some(&path),
            &path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ) {
            Ok(()) => {}
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(Error::sys(what(), e)),
        }
        mount(
            None::<&str>,
            &path,
            None::<&str>,
            flags | MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .map_err(|e| Error::sys(what(), e))?;
    }
    Ok(())
}
