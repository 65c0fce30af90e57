//! The holder (confined once, one per zygote) and the starter it forks per command.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: the starter spawns the command, \
              outside Keel's runtime"
)]

use super::*;

/// Tells the zygote `message` on the holder's socket (a message lost is the zygote's to notice:
/// the socket's peer is gone).
pub(super) fn tell(socket: &OwnedFd, message: &FromHolder) {
    if let Ok(text) = serde_json::to_vec(message) {
        let _ = send_with_fds(socket.as_fd(), &text, &[]);
    }
}

/// How the holder is confined, and what its starters need of it.
pub(super) enum Held {
    /// Landlock and seccomp on the holder itself; its commands inherit the domain by `fork`.
    Landlock { proxy_port: Option<u16> },
    /// Namespaces: the holder's root built once ([`super::ns`]); `ids` are the caller's user
    /// and group outside, `mounts` the holder's `/proc/self/mountinfo` (readable with
    /// `POLLPRI` once its mount table changed), `filter` the namespaces' seccomp filter, built
    /// once (each command's init takes its copy of it, made by `fork`).
    Namespaces {
        ids: (u32, u32),
        mounts: std::fs::File,
        filter: Option<fallback::Prepared>,
    },
}

/// The holder: confines itself once, then forks a starter per command. Returns its exit code.
pub(super) fn hold(profile: &Profile, socket: &OwnedFd, retired: &OwnedFd, zygote: Pid) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if getppid() != zygote {
        return EXIT_HELPER_FAILED;
    }
    let _ = nix::sys::prctl::set_dumpable(false);
    let confined = if super::ns::wanted(profile) {
        super::ns::hold(profile)
    } else {
        hold_landlock(profile)
    };
    let (mut held, mechanism, notes) = match confined {
        Ok(confined) => confined,
        Err(reason) => {
            tell(socket, &FromHolder::Failed { reason });
            return EXIT_HELPER_FAILED;
        }
    };
    tell(socket, &FromHolder::Ready { mechanism, notes });
    serve(profile, socket, retired, &mut held)
}

/// Confines the holder with Landlock and seccomp (the fallback); what it holds, the mechanism
/// and the notes of its commands.
// String error: the reason is what the holder tells the zygote (`FromHolder::Failed`).
fn hold_landlock(profile: &Profile) -> Result<(Held, String, Vec<String>), String> {
    let mut prepared =
        fallback::prepare(profile).map_err(|e| format!("Landlock/seccomp unavailable: {e}"))?;
    prepared
        .apply()
        .map_err(|e| format!("applying Landlock/seccomp: {e}"))?;
    if let Some(fd) = profile.mask_ruleset {
        // SAFETY: closing a numbered descriptor this process inherited; applied above.
        #[expect(unsafe_code, reason = "close of the inherited ruleset (see SAFETY)")]
        unsafe {
            let _ = libc::close(fd);
        }
    }
    let mut notes = std::mem::take(&mut prepared.notes);
    notes.push(reaper::FALLBACK_NOTE.into());
    notes.push(WARM_NOTE.into());
    let held = Held::Landlock {
        proxy_port: prepared.proxy_port,
    };
    Ok((held, "landlock".into(), notes))
}

/// Forks a starter per command the zygote sends, until the zygote is gone.
fn serve(profile: &Profile, socket: &OwnedFd, retired: &OwnedFd, held: &mut Held) -> i32 {
    let mut buffer = vec![0u8; MAX_MESSAGE];
    loop {
        reaper::reap_ended();
        let (n, fds) = match recv_with_fds(socket.as_fd(), &mut buffer, false) {
            Ok(Some(message)) => message,
            // The zygote is gone or retired the holder.
            Ok(None) | Err(_) => return 0,
        };
        let Ok(request) = serde_json::from_slice::<HolderRequest>(&buffer[..n]) else {
            continue;
        };
        let id = request.id;
        let not_started = |reason: String| tell(socket, &FromHolder::NotStarted { id, reason });
        let Ok(stdio): Result<[OwnedFd; 3], _> = fds.try_into() else {
            not_started("no standard descriptors".into());
            continue;
        };
        if let Held::Namespaces { mounts, .. } = &*held
            && super::ns::changed(mounts)
        {
            let reason = "the warm holder's mounts changed".into();
            tell(socket, &FromHolder::Stale { id, reason });
            continue;
        }
        // SAFETY: the holder is single-threaded (a fork of the single-threaded zygote that
        // starts no thread).
        #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
        let forked = unsafe { nix::unistd::fork() };
        match forked {
            // The zygote retired the holder (it was stopped, and continued since): the zygote
            // answered this command already, so nothing of it runs.
            Ok(ForkResult::Child) if poll_in(&[retired.as_raw_fd()], Some(Duration::ZERO))[0] => {
                std::process::exit(0)
            }
            Ok(ForkResult::Child) => std::process::exit(match held {
                Held::Landlock { proxy_port } => {
                    start(profile, socket, request, stdio, *proxy_port)
                }
                Held::Namespaces { ids, filter, .. } => {
                    // This process's copy: the holder keeps its own.
                    let filter = filter.take();
                    super::ns::start(profile, socket, request, stdio, (*ids, filter))
                }
            }),
            Ok(ForkResult::Parent { .. }) => drop(stdio),
            Err(e) => not_started(format!("fork: {e}")),
        }
    }
}

/// The note every command through the holder carries.
const WARM_NOTE: &str = "Landlock fallback, warm holder: contained commands of this session \
                         share one Landlock domain, so one may signal another running at the \
                         same time (never Keel, an approved command or anything else)";

/// A starter: a subreaper in the holder's domain that starts one command and reaps everything
/// it leaves until the zygote has ended it all.
fn start(
    profile: &Profile,
    socket: &OwnedFd,
    request: HolderRequest,
    stdio: [OwnedFd; 3],
    proxy_port: Option<u16>,
) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let id = request.id;
    let not_started = |reason: String| {
        tell(socket, &FromHolder::NotStarted { id, reason });
        EXIT_HELPER_FAILED
    };
    let Some(mut command) = request_command(profile, &request, stdio, &profile.tmp_dir) else {
        return not_started("no program".into());
    };
    let first = request.argv.first().cloned().unwrap_or_default();
    if let Some(port) = proxy_port {
        proxy_env(&mut command, port);
    }
    // SAFETY: the closure runs in the child between `fork` and `exec` and makes system calls
    // only (setsid, close_range); the starter is single-threaded.
    #[expect(
        unsafe_code,
        reason = "pre_exec with async-signal-safe system calls only (see SAFETY)"
    )]
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()?;
            crate::fds::close_inherited_on_exec();
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return not_started(format!("cannot run {first}: {e}")),
    };
    drop(command);
    let Ok(pid) = i32::try_from(child.id()) else {
        return EXIT_HELPER_FAILED;
    };
    let main = Pid::from_raw(pid);
    tell(
        socket,
        &FromHolder::Started {
            id,
            starter: getpid().as_raw(),
            command: pid,
            guard: getpid().as_raw(),
        },
    );
    let mut main_done = false;
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(status) if status.pid() == Some(main) => {
                if let Some(raw) = raw_status(status) {
                    main_done = true;
                    tell(socket, &FromHolder::Exited { id, status: raw });
                }
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) if main_done => return 0,
            Err(_) => return EXIT_HELPER_FAILED,
        }
    }
}

/// The command `request` asks for, with its standard descriptors: its arguments, its
/// environment within the profile's allowlist and `TMPDIR` (`tmp`), its working directory.
/// `None` without a program.
pub(super) fn request_command(
    profile: &Profile,
    request: &HolderRequest,
    [stdin, stdout, stderr]: [OwnedFd; 3],
    tmp: &std::path::Path,
) -> Option<Command> {
    let (first, rest) = request.argv.split_first()?;
    let mut command = Command::new(first);
    let allowed = request
        .env
        .iter()
        .filter(|(name, _)| crate::profile::env_allowed(&profile.env_allow, name));
    command
        .args(rest)
        .env_clear()
        .envs(allowed.map(|(name, value)| (name, value)))
        .env("TMPDIR", tmp)
        .current_dir(&request.cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    Some(command)
}
