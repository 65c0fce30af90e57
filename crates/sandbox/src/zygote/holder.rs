//! The holder (confined once, one per zygote) and the starter it forks per command.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: the starter spawns the command, \
              outside Keel's runtime"
)]

use super::*;

/// Tells the zygote `message` on the holder's socket (a message lost is the zygote's to notice:
/// the socket's peer is gone).
fn tell(socket: &OwnedFd, message: &FromHolder) {
    if let Ok(text) = serde_json::to_vec(message) {
        let _ = send_with_fds(socket.as_fd(), &text, &[]);
    }
}

/// The holder: confines itself once, then forks a starter per command. Returns its exit code.
pub(super) fn hold(profile: &Profile, socket: &OwnedFd, zygote: Pid) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if getppid() != zygote {
        return EXIT_HELPER_FAILED;
    }
    let _ = nix::sys::prctl::set_dumpable(false);
    let mut prepared = match fallback::prepare(profile) {
        Ok(prepared) => prepared,
        Err(e) => {
            tell(
                socket,
                &FromHolder::Failed {
                    reason: format!("Landlock/seccomp unavailable: {e}"),
                },
            );
            return EXIT_HELPER_FAILED;
        }
    };
    if let Err(e) = prepared.apply() {
        tell(
            socket,
            &FromHolder::Failed {
                reason: format!("applying Landlock/seccomp: {e}"),
            },
        );
        return EXIT_HELPER_FAILED;
    }
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
    tell(socket, &FromHolder::Ready { notes });
    let proxy_port = prepared.proxy_port;
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
        let Ok(stdio): Result<[OwnedFd; 3], _> = fds.try_into() else {
            tell(
                socket,
                &FromHolder::NotStarted {
                    id: request.id,
                    reason: "no standard descriptors".into(),
                },
            );
            continue;
        };
        // SAFETY: the holder is single-threaded (a fork of the single-threaded zygote that
        // starts no thread).
        #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
        let forked = unsafe { nix::unistd::fork() };
        match forked {
            Ok(ForkResult::Child) => {
                std::process::exit(start(profile, socket, request, stdio, proxy_port));
            }
            Ok(ForkResult::Parent { .. }) => drop(stdio),
            Err(e) => tell(
                socket,
                &FromHolder::NotStarted {
                    id: request.id,
                    reason: format!("fork: {e}"),
                },
            ),
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
    let Some((first, rest)) = request.argv.split_first() else {
        return not_started("no program".into());
    };
    let [stdin, stdout, stderr] = stdio;
    let mut command = Command::new(first);
    command
        .args(rest)
        .env_clear()
        .envs(
            request
                .env
                .iter()
                .filter(|(name, _)| crate::profile::env_allowed(&profile.env_allow, name))
                .map(|(name, value)| (name, value)),
        )
        .env("TMPDIR", &profile.tmp_dir)
        .current_dir(&request.cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
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
