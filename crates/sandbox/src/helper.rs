//! The helper: `keel-sandbox run [--profile FILE] -- PROGRAM ARGS...` (also `keel sandbox run`).
//!
//! Runs outside Keel's process (a fresh exec of a small binary, single-threaded, so
//! `unshare(CLONE_NEWUSER)` is allowed, and so is `fork`). Two stages under namespaces, in one
//! exec:
//!
//! 1. `run`: unshares user, mount (and network, when it is off) namespaces, maps the caller to
//!    root there, builds the new root on a tmpfs mounted on the profile's staging directory (the
//!    system directories read-only, the home allowlist, the private `/tmp`, the workspace roots
//!    read-write with `.git/hooks`, `.git/config` and `.keel` read-only again, a minimal `/dev`:
//!    `namespaces`), then unshares the PID namespace and forks stage 2, forwarding
//!    signals and its exit status.
//! 2. `init` (the forked child, module `init`): PID 1 of the new PID namespace. Mounts
//!    `/proc`, pivots into the new root, drops every capability by entering a nested user
//!    namespace mapped back to the caller's uid (which also locks every mount), sets
//!    `PR_SET_NO_NEW_PRIVS`, writes the nonce to the status file and starts the program. It
//!    reaps orphans and forwards signals to the whole namespace; when the program exits, init
//!    kills and reaps everything left in the namespace, writes the program's end to Keel's FIFO
//!    when the profile names one (`Profile::done_fifo`: Keel reports the command done from it,
//!    before the namespaces' teardown), and exits.
//!
//! With the network off and a keeper named (`Profile::keeper`, `keel-sandbox keep SOCKET`, module
//! `keeper`), stage 1 joins the keeper's user namespace and a network namespace it made ahead
//! instead of creating them.
//!
//! When namespaces are not available, the fallback is Landlock (file system) + seccomp (no
//! sockets but Unix ones when the network is off), with a child subreaper
//! (`reaper`) that kills every descendant once the program exits. With neither,
//! `required` refuses to run; else the program runs unconfined and the status says `none`.

#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the helper is the layer that confines processes: it opens the status file and \
              starts the program itself, outside Keel's runtime"
)]

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getgid, getuid};

use crate::error::{Error, Result};
use crate::profile::{HELPER_BUILD, Mechanism, Profile, Status};
use crate::{EXIT_HELPER_FAILED, PROFILE_ENV, fallback, init, namespaces, reaper};

/// The signals the helper forwards; `SIGCHLD` is waited for with them.
const FORWARDED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

struct Parsed {
    stage: String,
    /// `None`: the profile is in [`PROFILE_ENV`].
    profile: Option<PathBuf>,
    program: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Parsed> {
    let mut args = args.into_iter();
    let stage = args
        .next()
        .and_then(|s| s.into_string().ok())
        .ok_or(Error::NoStage)?;
    let mut profile = None;
    loop {
        let Some(arg) = args.next() else {
            return Err(Error::NoSeparator);
        };
        match arg.to_str() {
            Some("--") => break,
            Some("--profile") => profile = args.next().map(PathBuf::from),
            _ => {
                return Err(Error::UnexpectedArgument(
                    arg.to_string_lossy().into_owned(),
                ));
            }
        }
    }
    let program: Vec<OsString> = args.collect();
    if program.is_empty() {
        return Err(Error::NoProgram);
    }
    Ok(Parsed {
        stage,
        profile,
        program,
    })
}

/// Says on the helper's standard error why nothing ran (Keel shows the line as it is), and
/// returns the exit code that says so.
pub(crate) fn fail(error: &Error) -> i32 {
    let _ = writeln!(std::io::stderr(), "keel sandbox: {error}");
    EXIT_HELPER_FAILED
}

/// The helper's entry point. `prefix` is how the binary is asked for the helper (`["sandbox"]`
/// for `keel`), `args` what follows it (`run --profile FILE -- PROGRAM ARGS...`). Returns the
/// exit code. Must run before any thread is started. (`_prefix` is no longer needed: the PID
/// namespace's init is a fork of the helper, not a second run of the binary.)
pub fn main(_prefix: &[OsString], args: Vec<OsString>) -> i32 {
    // `build`: which build of this crate the helper is (Keel asks its `keel-sandbox` once).
    if args.len() == 1 && args[0] == "build" {
        let _ = writeln!(std::io::stdout(), "{HELPER_BUILD}");
        return 0;
    }
    // `keep SOCKET`: the session's namespace keeper (module `keeper`).
    if let [keep, socket] = &args[..]
        && keep == "keep"
    {
        return crate::keeper::keep(Path::new(socket));
    }
    // `zygote --control FD`: the warm holder of one contained profile (module `zygote`).
    if args.first().is_some_and(|stage| stage == "zygote") {
        return crate::zygote::main(&args[1..]);
    }
    let parsed = match parse(args) {
        Ok(parsed) => parsed,
        Err(error) => return fail(&error),
    };
    let profile = match parsed.profile.as_deref().map_or_else(load_from_env, load) {
        Ok(profile) => profile,
        Err(error) => return fail(&error),
    };
    fallback::close_mask_on_exec(&profile);
    match parsed.stage.as_str() {
        "run" => run(profile, &parsed.program),
        other => fail(&Error::UnknownStage(other.to_owned())),
    }
}

/// The profile from [`PROFILE_ENV`] (no `--profile FILE`).
pub(crate) fn load_from_env() -> Result<Profile> {
    let text = std::env::var(PROFILE_ENV).map_err(|e| match e {
        std::env::VarError::NotPresent => Error::NoProfile,
        std::env::VarError::NotUnicode(_) => Error::ProfileNotUnicode,
    })?;
    let profile: Profile = serde_json::from_str(&text).map_err(|source| Error::BadProfile {
        origin: format!("in {PROFILE_ENV}"),
        source,
    })?;
    check_build(&profile)?;
    Ok(profile)
}

fn load(path: &Path) -> Result<Profile> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadProfile {
        path: path.to_path_buf(),
        source,
    })?;
    let profile: Profile = serde_json::from_str(&text).map_err(|source| Error::BadProfile {
        origin: path.display().to_string(),
        source,
    })?;
    check_build(&profile)?;
    Ok(profile)
}

/// Refuses a profile written by another build: its fields could mean something else, and this
/// helper's code could be older than the Keel that expects it.
fn check_build(profile: &Profile) -> Result<()> {
    if profile.build == HELPER_BUILD {
        return Ok(());
    }
    Err(Error::OtherBuild {
        profile: if profile.build.is_empty() {
            "an older one".to_owned()
        } else {
            profile.build.clone()
        },
        helper: HELPER_BUILD,
    })
}

/// The helper on its own, with the process's arguments, from a `main` that Rust's runtime
/// started. Returns the exit code.
pub fn standalone() -> std::process::ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = main(&[], args);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

/// The helper binaries' `main` (`keel-sandbox`, `keel-sandbox-standalone`), which are built
/// without Rust's runtime start-up (`#![no_main]`): of it, the helper keeps what it relies on,
/// standard descriptors that are open (a closed one is opened on `/dev/null`, so that no file
/// the helper opens takes its number) and `SIGPIPE` ignored (a reader gone is an error, not the
/// helper's death; the program gets the default back, as `Command` resets it), and leaves out
/// the guard page set-up for the main thread's stack (reading and parsing `/proc/self/maps`, an
/// alternate signal stack and its handlers: 20 system calls and a few page faults, on every
/// command's path). Exits with the helper's code, clamped as [`standalone`] does.
pub fn start() -> ! {
    open_standard_descriptors();
    // SAFETY: `SIG_IGN` installs no handler (no code runs on the signal); this runs before
    // any thread is started.
    #[expect(
        unsafe_code,
        reason = "setting a signal's disposition to ignored (see SAFETY)"
    )]
    let _ =
        unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn) };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = main(&[], args);
    // `exit` flushes standard output first (`build` prints the build there).
    std::process::exit(i32::from(u8::try_from(code).unwrap_or(u8::MAX)))
}

/// Opens `/dev/null` on each closed standard descriptor (one `poll` when none is).
fn open_standard_descriptors() {
    let mut polled = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `polled` is a live array of `pollfd` of the length given; the kernel writes only
    // its `revents` fields during the call.
    #[expect(unsafe_code, reason = "poll on a live array (see SAFETY)")]
    let result = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 0) };
    if result <= 0 {
        return;
    }
    for entry in polled {
        if entry.revents & libc::POLLNVAL != 0 {
            // The lowest free number: the closed one, kept open for the process's life and
            // inherited (no `O_CLOEXEC`), as a standard descriptor is.
            if let Ok(null) = nix::fcntl::open(
                "/dev/null",
                nix::fcntl::OFlag::O_RDWR,
                nix::sys::stat::Mode::empty(),
            ) {
                let _ = std::os::fd::IntoRawFd::into_raw_fd(null);
            }
        }
    }
}

/// Opens (and empties) the status file; done before confinement, which may hide it.
fn open_status(profile: &Profile) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&profile.status_file)
        .map_err(Error::OpenStatus)
}

/// Opens Keel's FIFO ([`Profile::done_fifo`]) for writing without waiting (Keel holds its read
/// end open before the helper starts). `None` when the profile names none, or it is not a FIFO
/// or cannot be opened: Keel then waits for the helper's exit, as it would anyway.
fn open_done(profile: &Profile) -> Option<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let path = profile.done_fifo.as_ref()?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let fifo = file.metadata().is_ok_and(|meta| meta.file_type().is_fifo());
    fifo.then_some(file)
}

/// Writes the status line: the program is confined by `mechanism` (`namespaces`, `landlock`, or
/// `none`), with `notes` on what is not enforced. Written once confinement is in place and
/// before the program starts.
pub(crate) fn write_status(
    file: &mut std::fs::File,
    profile: &Profile,
    mechanism: &str,
    notes: Vec<String>,
) -> Result<()> {
    let status = Status {
        nonce: profile.nonce.clone(),
        mechanism: mechanism.to_owned(),
        notes,
    };
    let text = serde_json::to_string(&status).map_err(Error::StatusJson)?;
    file.write_all(text.as_bytes()).map_err(Error::WriteStatus)
}

/// The signal the program ended by, which init or the reaper leaves in the status file
/// (`signal N`): they cannot die by it themselves. Read through `status` (after a pivot, the
/// path may no longer lead to it).
pub(crate) fn signalled(status: &mut std::fs::File) -> (String, Option<Signal>) {
    let mut text = String::new();
    let _ = std::io::Seek::rewind(status);
    let _ = std::io::Read::read_to_string(status, &mut text);
    let signal = text
        .lines()
        .find_map(|line| line.strip_prefix("signal "))
        .and_then(|n| n.trim().parse::<i32>().ok())
        .and_then(|n| Signal::try_from(n).ok());
    (text, signal)
}

/// Stage 1.
fn run(mut profile: Profile, program: &[OsString]) -> i32 {
    // Whoever started the helper (Keel, or the editor's terminal) going away, by exit, crash or
    // SIGKILL, takes the command with it: the kernel kills stage 1, whose death kills stage 2
    // and with it the PID namespace. (The fallback turns this into a SIGTERM it handles.)
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if nix::unistd::getppid().as_raw() == 1 {
        return fail(&Error::Orphaned);
    }
    let mut notes = Vec::new();
    let ids = (getuid().as_raw(), getgid().as_raw());
    let status = match open_status(&profile) {
        Ok(file) => file,
        Err(error) => return fail(&error),
    };
    if profile.mechanism != Mechanism::Landlock {
        // Opened here, on the host's file system: init writes to it from inside the new root.
        let done = open_done(&profile);
        match namespaces::enter(&profile, ids) {
            Ok(proxy) => return init::start(&profile, ids, program, status, done, proxy),
            Err(e) => notes.push(format!("namespaces unavailable: {e}")),
        }
    }
    if profile.mechanism != Mechanism::Namespaces {
        // Keel's prebuilt masks, when this helper could not inherit them (the editor's
        // terminal started it); held until the program has started.
        let _mask = fallback::fetch_mask(&mut profile, &mut notes);
        match fallback::prepare(&profile) {
            Ok(prepared) => {
                return reaper::start(&profile, program, status, Some(prepared), notes);
            }
            Err(e) => notes.push(format!("Landlock/seccomp unavailable: {e}")),
        }
    }
    if profile.required {
        return fail(&Error::Required { notes });
    }
    reaper::start(&profile, program, status, None, notes)
}

/// The proxy variables a confined program gets when Keel's filtering proxy is its way out.
pub(crate) fn proxy_env(command: &mut Command, port: u16) {
    let url = format!("http://127.0.0.1:{port}");
    for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        command.env(key, &url);
    }
    for key in ["NO_PROXY", "no_proxy"] {
        command.env(key, "localhost,127.0.0.1,::1");
    }
}

/// The program's command: `program` with only the profile's allowed environment
/// ([`Profile::env_allow`]) of what the helper was given.
pub(crate) fn program_command(profile: &Profile, first: &OsString, rest: &[OsString]) -> Command {
    let mut command = Command::new(first);
    command
        .args(rest)
        .env_clear()
        .envs(crate::profile::allowed_environment(&profile.env_allow));
    command
}

/// Blocks the forwarded signals and `SIGCHLD` (they are taken with `sigwait`). Called after the
/// child is spawned, since children inherit the mask; [`supervise`] reaps before it waits, so an
/// exit in between is not missed.
pub(crate) fn block_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    for signal in FORWARDED {
        set.add(signal);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
    set
}

/// How the supervised process ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending {
    Code(i32),
    Signal(Signal),
}

impl Ending {
    pub(crate) fn code(self) -> i32 {
        match self {
            Ending::Code(code) => code,
            Ending::Signal(signal) => 128 + signal as i32,
        }
    }
}

/// Ends this process the way the program ended: by the same signal when there was one (so Keel
/// sees "killed by SIGKILL", not exit code 137), else with its exit code.
pub(crate) fn finish_like(ending: Ending) -> i32 {
    if let Ending::Signal(signal) = ending {
        let mut set = SigSet::empty();
        set.add(signal);
        let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
        let _ = nix::sys::signal::raise(signal);
    }
    ending.code()
}

/// Reaps children until `main` exits, forwarding signals; returns how `main` ended.
pub(crate) fn supervise(main: Pid, signals: &SigSet, forward: impl Fn(Signal)) -> Ending {
    loop {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == main => return Ending::Code(code),
                Ok(WaitStatus::Signaled(pid, signal, _)) if pid == main => {
                    return Ending::Signal(signal);
                }
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => return Ending::Code(EXIT_HELPER_FAILED),
            }
        }
        match signals.wait() {
            Ok(Signal::SIGCHLD) | Err(_) => {}
            Ok(signal) => forward(signal),
        }
    }
}

/// Runs `command` in a session and process group of its own (so `kill 0`, `kill -9 0` from the
/// command reach only the command's own group, never its helper, Keel or the editor), with every
/// capability dropped ([`fallback::drop_capabilities`]; under the fallback `confinement` does that
/// with the rest), applied between `fork` and `exec`.
pub(crate) fn own_session(command: &mut Command, confinement: Option<fallback::Prepared>) {
    let mut confinement = confinement;
    // SAFETY: the closure runs in the child between `fork` and `exec` and makes system calls
    // only (setsid, close_range, prctl, capset, landlock_restrict_self, seccomp); the helper is
    // single-threaded, so no lock can be held in the child.
    #[expect(
        unsafe_code,
        reason = "pre_exec with async-signal-safe system calls only (see SAFETY)"
    )]
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid()?;
            crate::fds::close_inherited_on_exec();
            match confinement.as_mut() {
                Some(confinement) => confinement.apply(),
                None => {
                    nix::sys::prctl::set_no_new_privs()?;
                    fallback::drop_capabilities()
                }
            }
        });
    }
}

/// Records the guard in the status file: the process whose end means nothing of the command is
/// left (the namespace's init; under the fallback the reaper, which also writes `empty` once it
/// checked). Keel reads it back to verify a kill (keel-core's `ConfinementCheck::wait_gone`).
pub(crate) fn write_guard(status: &mut std::fs::File, guard: Pid) {
    // One `write` (`write!` would make one per piece): init writes its status line to the same
    // file at the same time, and must not land in the middle of this one.
    let _ = status.write_all(format!("\nguard {guard}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::{Error, parse};

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_line_is_a_stage_options_and_the_program() {
        let parsed = parse(args(&[
            "run",
            "--profile",
            "/p.json",
            "--",
            "bash",
            "-c",
            "x",
        ]))
        .unwrap();
        assert_eq!(parsed.stage, "run");
        assert_eq!(
            parsed.profile.as_deref(),
            Some(std::path::Path::new("/p.json"))
        );
        assert_eq!(parsed.program, args(&["bash", "-c", "x"]));
        // Everything after `--` is the program's, `--profile` included.
        let parsed = parse(args(&["run", "--", "echo", "--profile"])).unwrap();
        assert_eq!(
            (parsed.profile, parsed.program),
            (None, args(&["echo", "--profile"]))
        );

        assert!(matches!(parse(args(&[])), Err(Error::NoStage)));
        assert!(matches!(parse(args(&["run"])), Err(Error::NoSeparator)));
        assert!(matches!(parse(args(&["run", "--"])), Err(Error::NoProgram)));
        assert!(matches!(
            parse(args(&["run", "-x", "--", "true"])),
            Err(Error::UnexpectedArgument(arg)) if arg == "-x"
        ));
    }
}
