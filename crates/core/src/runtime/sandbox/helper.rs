//! The helper: `keel sandbox run --profile FILE -- PROGRAM ARGS...`.
//!
//! Runs outside Keel's process (a fresh exec of Keel's own binary, single-threaded, so
//! `unshare(CLONE_NEWUSER)` is allowed, and so is `fork`). Two stages under namespaces, in one
//! exec:
//!
//! 1. `run`: unshares user, mount (and network, when it is off) namespaces, maps the caller to
//!    root there, builds the new root on a tmpfs mounted on the profile's staging directory (the
//!    system directories read-only, the home allowlist, the private `/tmp`, the workspace roots
//!    read-write with `.git/hooks`, `.git/config` and `.keel` read-only again, a minimal `/dev`),
//!    then unshares the PID namespace and forks stage 2, forwarding signals and its exit status.
//! 2. `init` (the forked child): PID 1 of the new PID namespace. Mounts `/proc`, pivots into the new root, drops
//!    every capability by entering a nested user namespace mapped back to the caller's uid
//!    (which also locks every mount), sets `PR_SET_NO_NEW_PRIVS`, writes the nonce to the status
//!    file and starts the program. It reaps orphans and forwards signals to the whole namespace;
//!    when the program exits, init exits and the kernel kills everything left in the namespace.
//!
//! When namespaces are not available, the fallback is Landlock (file system) + seccomp (no
//! sockets but Unix ones when the network is off), with the helper as a child subreaper that
//! kills every descendant once the program exits. With neither, `required` refuses to run; else
//! the program runs unconfined and the status says `none`.

#![expect(
    clippy::disallowed_methods,
    reason = "the sandbox helper is part of the runtime, where ambient authority lives"
)]
#![expect(
    clippy::disallowed_types,
    reason = "the sandbox helper is part of the runtime, where ambient authority lives"
)]

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Pid, Uid, chdir, getgid, getpid, getuid, pivot_root};

use super::fallback;
use super::profile::{Mechanism, Profile, SYSTEM_DIRS, Status};

/// The helper's own failures (bad arguments, a profile it cannot read, a refusal, a setup error
/// after the point of no return): nothing of the program ran.
pub const EXIT_HELPER_FAILED: i32 = 125;

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
    /// `None`: the profile is in [`super::PROFILE_ENV`].
    profile: Option<PathBuf>,
    program: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Parsed, String> {
    let mut args = args.into_iter();
    let stage = args
        .next()
        .and_then(|s| s.into_string().ok())
        .ok_or("expected `run`")?;
    let mut profile = None;
    loop {
        let Some(arg) = args.next() else {
            return Err("expected `-- PROGRAM ARGS...`".into());
        };
        match arg.to_str() {
            Some("--") => break,
            Some("--profile") => profile = args.next().map(PathBuf::from),
            _ => return Err(format!("unexpected argument {}", arg.to_string_lossy())),
        }
    }
    let program: Vec<OsString> = args.collect();
    if program.is_empty() {
        return Err("no program to run".into());
    }
    Ok(Parsed {
        stage,
        profile,
        program,
    })
}

fn complain(message: &str) {
    let _ = writeln!(std::io::stderr(), "keel sandbox: {message}");
}

/// The helper's entry point. `prefix` is how the binary is asked for the helper (`["sandbox"]`
/// for `keel`), `args` what follows it (`run --profile FILE -- PROGRAM ARGS...`). Returns the
/// exit code. Must run before any thread is started. (`_prefix` is no longer needed: the PID
/// namespace's init is a fork of the helper, not a second run of the binary.)
pub fn main(_prefix: &[OsString], args: Vec<OsString>) -> i32 {
    // `build`: which build of keel-core this helper is (Keel asks its `keel-sandbox` once).
    if args.len() == 1 && args[0] == "build" {
        let _ = writeln!(std::io::stdout(), "{}", super::profile::HELPER_BUILD);
        return 0;
    }
    let parsed = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => {
            complain(&message);
            return EXIT_HELPER_FAILED;
        }
    };
    let profile = match parsed.profile.as_deref().map_or_else(load_from_env, load) {
        Ok(profile) => profile,
        Err(message) => {
            complain(&message);
            return EXIT_HELPER_FAILED;
        }
    };
    fallback::close_mask_on_exec(&profile);
    match parsed.stage.as_str() {
        "run" => run(&profile, &parsed.program),
        other => {
            complain(&format!("unknown stage `{other}`"));
            EXIT_HELPER_FAILED
        }
    }
}

/// The profile from [`super::PROFILE_ENV`] (no `--profile FILE`).
fn load_from_env() -> Result<Profile, String> {
    let text = std::env::var(super::PROFILE_ENV)
        .map_err(|_| format!("missing --profile FILE (or {})", super::PROFILE_ENV))?;
    let profile: Profile = serde_json::from_str(&text)
        .map_err(|e| format!("bad profile in {}: {e}", super::PROFILE_ENV))?;
    check_build(&profile)?;
    Ok(profile)
}

fn load(path: &Path) -> Result<Profile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the profile {}: {e}", path.display()))?;
    let profile: Profile =
        serde_json::from_str(&text).map_err(|e| format!("bad profile {}: {e}", path.display()))?;
    check_build(&profile)?;
    Ok(profile)
}

/// Refuses a profile written by another build: its fields could mean something else, and this
/// helper's code could be older than the Keel that expects it.
fn check_build(profile: &Profile) -> Result<(), String> {
    if profile.build == super::profile::HELPER_BUILD {
        return Ok(());
    }
    Err(format!(
        "the profile comes from another build of Keel ({}) than this helper ({}): `keel` and \
         `keel-sandbox` come from different builds; install or build them together \
         (`cargo install --path crates/acp`, `cargo build`)",
        if profile.build.is_empty() {
            "an older one"
        } else {
            &profile.build
        },
        super::profile::HELPER_BUILD
    ))
}

/// `keel-sandbox`'s `main`: the helper on its own, with the process's arguments.
pub fn standalone() -> std::process::ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = main(&[], args);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

/// Opens (and empties) the status file; done before confinement, which may hide it.
fn open_status(profile: &Profile) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&profile.status_file)
        .map_err(|e| format!("cannot open the status file: {e}"))
}

fn write_status(
    file: &mut std::fs::File,
    profile: &Profile,
    mechanism: &str,
    notes: Vec<String>,
) -> Result<(), String> {
    let status = Status {
        nonce: profile.nonce.clone(),
        mechanism: mechanism.to_owned(),
        notes,
    };
    let text = serde_json::to_string(&status).map_err(|e| e.to_string())?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the status file: {e}"))
}

/// Stage 1.
fn run(profile: &Profile, program: &[OsString]) -> i32 {
    // Whoever started the helper (Keel, or the editor's terminal) going away, by exit, crash or
    // SIGKILL, takes the command with it: the kernel kills stage 1, whose death kills stage 2
    // and with it the PID namespace. (The fallback turns this into a SIGTERM it handles.)
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if nix::unistd::getppid().as_raw() == 1 {
        complain("the process that started the sandbox helper is gone");
        return EXIT_HELPER_FAILED;
    }
    let mut notes = Vec::new();
    let ids = (getuid().as_raw(), getgid().as_raw());
    let status = match open_status(profile) {
        Ok(file) => file,
        Err(message) => {
            complain(&message);
            return EXIT_HELPER_FAILED;
        }
    };
    if profile.mechanism != Mechanism::Landlock {
        match enter_namespaces(profile, ids) {
            Ok(proxy) => return start_init(profile, ids, program, status, proxy),
            Err(e) => notes.push(format!("namespaces unavailable: {e}")),
        }
    }
    if profile.mechanism != Mechanism::Namespaces {
        match fallback::prepare(profile) {
            Ok(prepared) => return start_reaper(profile, program, status, Some(prepared), notes),
            Err(e) => notes.push(format!("Landlock/seccomp unavailable: {e}")),
        }
    }
    if profile.required {
        complain(&format!(
            "refusing to run unconfined ([sandbox] mode = \"required\"): {}",
            notes.join("; ")
        ));
        return EXIT_HELPER_FAILED;
    }
    start_reaper(profile, program, status, None, notes)
}

fn write_file(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))
}

/// The proxy variables a confined program gets when Keel's filtering proxy is its way out.
fn proxy_env(command: &mut Command, port: u16) {
    let url = format!("http://127.0.0.1:{port}");
    for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        command.env(key, &url);
    }
    for key in ["NO_PROXY", "no_proxy"] {
        command.env(key, "localhost,127.0.0.1,::1");
    }
}

/// Stage 1 set-up: the user, mount and network namespaces and the new root's file system.
/// Returns whether the filtering proxy's socket is in the new root (and the namespace's
/// loopback up, for the forwarder).
fn enter_namespaces(profile: &Profile, (uid, gid): (u32, u32)) -> Result<bool, String> {
    std::fs::create_dir_all(&profile.staging_dir)
        .map_err(|e| format!("{}: {e}", profile.staging_dir.display()))?;
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    if !profile.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| format!("unshare: {e}"))?;
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("0 {uid} 1"))?;
    write_file("/proc/self/gid_map", &format!("0 {gid} 1"))?;
    let mut proxy = false;
    if !profile.network {
        // The new network namespace's own loopback (not the host's): test servers inside the
        // command work; nothing outside is reachable. Optional (without it, no proxy either).
        proxy = loopback_up().is_ok() && profile.proxy.is_some();
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    build_root(profile)?;
    if let (true, Some(endpoint)) = (proxy, &profile.proxy) {
        let root = profile.staging_dir.as_path();
        let target = in_root(root, Path::new(super::proxy::SOCKET_IN_ROOT));
        proxy = bind_socket(&endpoint.socket, &target).is_ok();
    }
    Ok(proxy)
}

/// Shows the proxy's Unix socket at `target` in the new root (a bind mount of the socket).
fn bind_socket(socket: &Path, target: &Path) -> Result<(), String> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::File::create(target).map_err(|e| e.to_string())?;
    mount(
        Some(socket),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| e.to_string())
}

/// Sets `lo` (interface 1 in a new network namespace) up with one `RTM_NEWLINK` netlink request.
fn loopback_up() -> Result<(), Errno> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, recv, send, socket,
    };
    use std::os::fd::AsRawFd as _;
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    let mut message = Vec::with_capacity(32);
    message.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    message.extend_from_slice(&RTM_NEWLINK.to_ne_bytes()); // nlmsg_type
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes()); // nlmsg_flags
    message.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
    message.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid
    message.extend_from_slice(&[0u8, 0u8]); // ifi_family (AF_UNSPEC), padding
    message.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    message.extend_from_slice(&1i32.to_ne_bytes()); // ifi_index: lo
    message.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    message.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    send(fd.as_raw_fd(), &message, MsgFlags::empty())?;
    // The acknowledgement: an NLMSG_ERROR whose error field is 0 on success.
    let mut reply = [0u8; 64];
    let n = recv(fd.as_raw_fd(), &mut reply, MsgFlags::empty())?;
    let code = reply
        .get(16..20)
        .filter(|_| n >= 20)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_ne_bytes)
        .unwrap_or(-1);
    if code == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw(-code))
    }
}

fn in_root(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn build_root(profile: &Profile) -> Result<(), String> {
    let root = profile.staging_dir.as_path();
    let mounts = Mounts {
        points: std::cell::OnceCell::new(),
        staging: root.to_path_buf(),
    };
    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| format!("tmpfs on the new root: {e}"))?;
    for dir in SYSTEM_DIRS {
        let dir = Path::new(dir);
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(dir).map_err(|e| format!("{dir:?}: {e}"))?;
                symlink(&target, in_root(root, dir)).map_err(|e| format!("{dir:?}: {e}"))?;
            }
            Ok(meta) if meta.is_dir() => bind(root, dir, true, &mounts)?,
            _ => {}
        }
    }
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("/tmp: {e}"))?;
    bind_at(&profile.tmp_dir, &tmp, false, &mounts)?;
    // The home directory itself is an empty directory on the tmpfs: only the allowlist shows.
    if let Some(home) = &profile.home {
        let _ = std::fs::create_dir_all(in_root(root, home));
    }
    for path in &profile.home_readable {
        if path.exists() {
            bind(root, path, true, &mounts)?;
        }
    }
    for path in &profile.home_writable {
        if path.exists() {
            bind(root, path, false, &mounts)?;
        }
    }
    for path in &profile.readable {
        bind(root, path, true, &mounts)?;
    }
    for path in &profile.writable {
        bind(root, path, false, &mounts)?;
    }
    for path in &profile.pinned {
        bind(root, path, false, &mounts)?;
    }
    for path in &profile.protected {
        bind(root, path, true, &mounts)?;
    }
    mask(profile, root, &mounts)?;
    build_dev(root, &mounts)
}

/// Covers each [`Profile::masked`] path that exists in the new root: a directory with an
/// empty read-only tmpfs, anything else with an empty read-only file. The path is looked at
/// without following a final symlink (Keel lists real files and directories only; a link there
/// now is left alone, its target being checked on its own).
fn mask(profile: &Profile, root: &Path, mounts: &Mounts) -> Result<(), String> {
    let mut empty: Option<PathBuf> = None;
    for path in &profile.masked {
        let target = in_root(root, path);
        let Ok(meta) = std::fs::symlink_metadata(&target) else {
            continue;
        };
        if meta.is_dir() {
            mount(
                Some("tmpfs"),
                &target,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
                Some("mode=0555,size=4k"),
            )
            .map_err(|e| format!("masking {}: {e}", path.display()))?;
        } else if !meta.file_type().is_symlink() {
            let source = match &empty {
                Some(source) => source.clone(),
                None => {
                    let source = profile.staging_dir.with_extension("empty");
                    std::fs::write(&source, b"")
                        .map_err(|e| format!("{}: {e}", source.display()))?;
                    empty.insert(source).clone()
                }
            };
            bind_at(&source, &target, true, mounts)
                .map_err(|e| format!("masking {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The program's command: `program` with only the profile's allowed environment
/// ([`Profile::env_allow`]) of what the helper was given.
fn program_command(profile: &Profile, first: &OsString, rest: &[OsString]) -> Command {
    let mut command = Command::new(first);
    command
        .args(rest)
        .env_clear()
        .envs(super::profile::allowed_environment(&profile.env_allow));
    command
}

fn bind(root: &Path, path: &Path, read_only: bool, mounts: &Mounts) -> Result<(), String> {
    bind_at(path, &in_root(root, path), read_only, mounts)
}

fn bind_at(source: &Path, target: &Path, read_only: bool, mounts: &Mounts) -> Result<(), String> {
    let context = |e: &dyn std::fmt::Display| format!("binding {}: {e}", source.display());
    let meta = std::fs::metadata(source).map_err(|e| context(&e))?;
    if meta.is_dir() {
        std::fs::create_dir_all(target).map_err(|e| context(&e))?;
    } else {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| context(&e))?;
        }
        if !target.exists() {
            std::fs::File::create(target).map_err(|e| context(&e))?;
        }
    }
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| context(&e))?;
    if read_only {
        remount_read_only(target, source, mounts).map_err(|e| context(&e))?;
    }
    Ok(())
}

/// The mount points of the tree the new root is built from, read at most once from
/// `/proc/self/mountinfo`, and only on kernels without `mount_setattr` (before 5.12).
struct Mounts {
    points: std::cell::OnceCell<Result<Vec<PathBuf>, String>>,
    staging: PathBuf,
}

impl Mounts {
    fn points(&self) -> Result<&[PathBuf], String> {
        match self.points.get_or_init(read_mount_points) {
            Ok(points) => Ok(points),
            Err(e) => Err(e.clone()),
        }
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Makes `target` and every mount below it read-only in one system call (`mount_setattr` with
/// `AT_RECURSIVE`; Linux 5.12). It changes only the read-only flag, so the flags the kernel
/// locks in a user namespace stay as they are. `Err(ENOSYS)` on older kernels.
fn set_read_only_recursive(target: &Path) -> Result<(), Errno> {
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let path = std::ffi::CString::new(target.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is a NUL-terminated string and `attr` a live `mount_attr` of the size
    // passed; the kernel only reads both during the call.
    #[expect(
        unsafe_code,
        reason = "mount_setattr has no wrapper in nix (see SAFETY)"
    )]
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

fn read_mount_points() -> Result<Vec<PathBuf>, String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect();
    points.dedup();
    Ok(points)
}

/// Remounts `target` and every mount below it read-only, keeping the flags the kernel locks
/// (`nosuid`, `nodev`, `noexec`, atime) so the remount is allowed in a user namespace.
fn remount_read_only(target: &Path, source: &Path, mounts: &Mounts) -> Result<(), String> {
    match set_read_only_recursive(target) {
        Ok(()) => return Ok(()),
        Err(Errno::ENOSYS) => {}
        Err(e) => return Err(format!("remounting {} read-only: {e}", target.display())),
    }
    let points: Vec<PathBuf> = if mounts.staging.starts_with(source) {
        // The new root itself lies below the source, so the recursive bind copied mounts made
        // since the snapshot: read the table again (rare: a scratch directory inside a
        // readable path).
        read_mount_points()?
            .into_iter()
            .filter(|point| point.starts_with(target))
            .collect()
    } else {
        // The bind copied the source's mount and every mount below it: the same points,
        // moved from the source to the target.
        std::iter::once(target.to_path_buf())
            .chain(mounts.points()?.iter().filter_map(|point| {
                let rest = point.strip_prefix(source).ok()?;
                (!rest.as_os_str().is_empty()).then(|| target.join(rest))
            }))
            .collect()
    };
    for point in points {
        let flags = statvfs(&point).map_err(|e| e.to_string())?.flags();
        let mut ms = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        for (fs, m) in [
            (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
            (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if flags.contains(fs) {
                ms |= m;
            }
        }
        mount(None::<&str>, &point, None::<&str>, ms, None::<&str>)
            .map_err(|e| format!("remounting {} read-only: {e}", point.display()))?;
    }
    Ok(())
}

/// `/proc/self/mountinfo` escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len() + 1
            && let Some(code) = field
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    std::ffi::OsStr::from_bytes(&out).to_os_string()
}

fn build_dev(root: &Path, mounts: &Mounts) -> Result<(), String> {
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| format!("/dev: {e}"))?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755"),
    )
    .map_err(|e| format!("tmpfs on /dev: {e}"))?;
    let _ = mounts;
    for name in ["null", "zero", "full", "random", "urandom", "tty"] {
        // The node to bind onto, in the fresh tmpfs: one `openat`, no checks (a missing
        // source fails the bind, and is skipped).
        let source = Path::new("/dev").join(name);
        let target = dev.join(name);
        std::fs::File::create(&target).map_err(|e| format!("/dev/{name}: {e}"))?;
        match mount(
            Some(&source),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ) {
            Ok(()) => {}
            Err(Errno::ENOENT) => {
                let _ = std::fs::remove_file(&target);
            }
            Err(e) => return Err(format!("binding {}: {e}", source.display())),
        }
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        symlink(target, dev.join(link)).map_err(|e| format!("/dev/{link}: {e}"))?;
    }
    let pts = dev.join("pts");
    let shm = dev.join("shm");
    let _ = std::fs::create_dir_all(&pts);
    let _ = std::fs::create_dir_all(&shm);
    // Optional: a private pty instance and shared memory (programs that need them still run).
    let _ = mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    );
    let _ = mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    );
    Ok(())
}

/// Stage 1, namespaces in place: a new PID namespace whose init is stage 2, a fork of this
/// process (no second exec of Keel's binary: that exec was most of the sandbox's cost).
fn start_init(
    profile: &Profile,
    ids: (u32, u32),
    program: &[OsString],
    mut status_file: std::fs::File,
    proxy: bool,
) -> i32 {
    let fail = |message: String| {
        complain(&message);
        EXIT_HELPER_FAILED
    };
    if let Err(e) = unshare(CloneFlags::CLONE_NEWPID) {
        // The view is built but nothing can be spawned into a PID namespace: fall back.
        let why = format!("PID namespace: {e}");
        return match fallback_exec(profile, program, &why, &mut status_file) {
            Ok(never) => never,
            Err(message) => fail(message),
        };
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
            std::process::exit(init(profile, ids, program, proxy, &mut status_file))
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return fail(format!("starting the namespace init: {e}")),
    };
    // Keel's proof that the namespace is empty: init has exited (the kernel lets init finish
    // only once every other process of its namespace is gone).
    write_guard(&mut status_file, init_pid);
    let signals = block_signals();
    let ending = supervise(init_pid, &signals, |signal| {
        let _ = kill(init_pid, signal);
    });
    // Read through the handle: init's pivot_root changed this process's root too.
    let mut status = String::new();
    let _ = std::io::Seek::rewind(&mut status_file);
    let _ = std::io::Read::read_to_string(&mut status_file, &mut status);
    let confirmed = status.contains(&profile.nonce);
    // Init cannot die by a signal of its own; it leaves the program's signal in the status file.
    let signalled = status
        .lines()
        .find_map(|line| line.strip_prefix("signal "))
        .and_then(|n| n.trim().parse::<i32>().ok())
        .and_then(|n| Signal::try_from(n).ok());
    if let Some(signal) = signalled {
        return finish_like(Ending::Signal(signal));
    }
    let code = ending.code();
    if code == EXIT_HELPER_FAILED && !confirmed {
        // Stage 2 could not confine (and ran nothing): the fallback, in this process.
        let _ = status_file.set_len(0);
        let _ = std::io::Seek::rewind(&mut status_file);
        return match fallback_exec(
            profile,
            program,
            "namespace set-up failed",
            &mut status_file,
        ) {
            Ok(never) => never,
            Err(message) => fail(message),
        };
    }
    code
}

/// Landlock + seccomp applied to this very process, then `exec` (used once a PID namespace
/// exists but cannot be used: no more children can be started here).
fn fallback_exec(
    profile: &Profile,
    program: &[OsString],
    why: &str,
    status: &mut std::fs::File,
) -> Result<i32, String> {
    let mut notes = vec![format!("namespaces unavailable: {why}")];
    if profile.mechanism == Mechanism::Namespaces {
        return Err(format!("cannot confine: {why}"));
    }
    let mut proxy_port = None;
    let mechanism = match fallback::confine(profile) {
        Ok((more, port)) => {
            notes.extend(more);
            notes.push("background processes are ended by process group only".into());
            proxy_port = port;
            "landlock"
        }
        Err(e) if profile.required => return Err(format!("cannot confine: {why}; {e}")),
        Err(e) => {
            notes.push(format!("Landlock/seccomp unavailable: {e}"));
            "none"
        }
    };
    write_status(status, profile, mechanism, notes)?;
    let (first, rest) = program.split_first().ok_or("no program")?;
    let mut command = program_command(profile, first, rest);
    command
        .env("TMPDIR", &profile.tmp_dir)
        .current_dir(&profile.cwd);
    if let Some(port) = proxy_port {
        proxy_env(&mut command, port);
    }
    let error = command.exec();
    Err(format!("cannot run {}: {error}", first.to_string_lossy()))
}

/// Stage 2: PID 1 of the new namespace.
fn init(
    profile: &Profile,
    (uid, gid): (u32, u32),
    program: &[OsString],
    proxy: bool,
    status_file: &mut std::fs::File,
) -> i32 {
    // If stage 1 dies (SIGKILL from Keel), so does this namespace.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let mut notes = match confine_init(profile, uid, gid) {
        Ok(notes) => notes,
        Err(message) => {
            complain(&message);
            return EXIT_HELPER_FAILED;
        }
    };
    let forwarder = if proxy { start_forwarder() } else { None };
    if profile.proxy.is_some() && !profile.network {
        notes.push(match forwarder {
            Some(_) => "network: only the hosts the rules allow, through Keel's proxy".into(),
            None => "the filtering proxy could not be reached: the network is off".into(),
        });
    }
    if let Err(e) = write_status_fd(status_file, profile, notes) {
        complain(&e);
        return EXIT_HELPER_FAILED;
    }
    let Some((first, rest)) = program.split_first() else {
        return EXIT_HELPER_FAILED;
    };
    let mut command = program_command(profile, first, rest);
    command.env("TMPDIR", "/tmp");
    if let Some(port) = forwarder {
        proxy_env(&mut command, port);
    }
    own_session(&mut command, None);
    let child = command.spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) => {
            complain(&format!("cannot run {}: {e}", first.to_string_lossy()));
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
    ending.code()
}

/// Inside the command's network namespace: a listener on its own `127.0.0.1` whose connections
/// are copied to the proxy's socket, served by a fork of init (a process of the namespace, gone
/// with it). Returns the port.
fn start_forwarder() -> Option<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).ok()?;
    let port = listener.local_addr().ok()?.port();
    // SAFETY: as in `start_init`: init is a fork of a process the kernel proved
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
    let Ok(upstream) = std::os::unix::net::UnixStream::connect(super::proxy::SOCKET_IN_ROOT) else {
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

fn write_status_fd(
    file: &mut std::fs::File,
    profile: &Profile,
    notes: Vec<String>,
) -> Result<(), String> {
    let status = Status {
        nonce: profile.nonce.clone(),
        mechanism: "namespaces".into(),
        notes,
    };
    let text = serde_json::to_string(&status).map_err(|e| e.to_string())?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the status file: {e}"))
}

/// Stage 2 set-up (stage 1's status file, inherited through the fork, stays open across the
/// pivot); returns notes on what is not enforced.
fn confine_init(profile: &Profile, uid: u32, gid: u32) -> Result<Vec<String>, String> {
    let notes = Vec::new();
    let root = profile.staging_dir.as_path();
    let proc = root.join("proc");
    std::fs::create_dir_all(&proc).map_err(|e| format!("/proc: {e}"))?;
    mount(
        Some("proc"),
        &proc,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("mounting /proc: {e}"))?;
    chdir(root).map_err(|e| format!("chdir to the new root: {e}"))?;
    pivot_root(".", ".").map_err(|e| format!("pivot_root: {e}"))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| format!("detaching the old root: {e}"))?;
    chdir("/").map_err(|e| format!("chdir /: {e}"))?;
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
    .map_err(|e| format!("remounting / read-only: {e}"))?;
    // Drop every capability: a nested user namespace mapped back to the caller, with a new
    // mount namespace, so every mount above is locked (cannot be unmounted or made writable).
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("nested user namespace: {e}"))?;
    let _ = write_file("/proc/self/setgroups", "deny");
    write_file("/proc/self/uid_map", &format!("{uid} 0 1"))?;
    write_file("/proc/self/gid_map", &format!("{gid} 0 1"))?;
    nix::unistd::setresgid(Gid::from_raw(gid), Gid::from_raw(gid), Gid::from_raw(gid))
        .map_err(|e| format!("setresgid: {e}"))?;
    nix::unistd::setresuid(Uid::from_raw(uid), Uid::from_raw(uid), Uid::from_raw(uid))
        .map_err(|e| format!("setresuid: {e}"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    // Not dumpable: the program (same uid, root of its own user namespace) cannot ptrace init
    // or read its memory and descriptors (that takes CAP_SYS_PTRACE where init was executed,
    // outside). The forwarder, a fork of init, inherits it.
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("dumpable: {e}"))?;
    chdir(&profile.cwd).map_err(|e| format!("chdir {}: {e}", profile.cwd.display()))?;
    Ok(notes)
}

/// Blocks the forwarded signals and `SIGCHLD` (they are taken with `sigwait`). Called after the
/// child is spawned, since children inherit the mask; [`supervise`] reaps before it waits, so an
/// exit in between is not missed.
fn block_signals() -> SigSet {
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
enum Ending {
    Code(i32),
    Signal(Signal),
}

impl Ending {
    fn code(self) -> i32 {
        match self {
            Ending::Code(code) => code,
            Ending::Signal(signal) => 128 + signal as i32,
        }
    }
}

/// Ends this process the way the program ended: by the same signal when there was one (so Keel
/// sees "killed by SIGKILL", not exit code 137), else with its exit code.
fn finish_like(ending: Ending) -> i32 {
    if let Ending::Signal(signal) = ending {
        let mut set = SigSet::empty();
        set.add(signal);
        let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
        let _ = nix::sys::signal::raise(signal);
    }
    ending.code()
}

/// Reaps children until `main` exits, forwarding signals; returns how `main` ended.
fn supervise(main: Pid, signals: &SigSet, forward: impl Fn(Signal)) -> Ending {
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
fn own_session(command: &mut Command, confinement: Option<fallback::Prepared>) {
    let mut confinement = confinement;
    // SAFETY: the closure runs in the child between `fork` and `exec` and makes system calls
    // only (setsid, prctl, capset, landlock_restrict_self, seccomp); the helper is
    // single-threaded, so no lock can be held in the child.
    #[expect(
        unsafe_code,
        reason = "pre_exec with async-signal-safe system calls only (see SAFETY)"
    )]
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid()?;
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
/// checked). Keel reads it back to verify a kill ([`super::ConfinementCheck::wait_gone`]).
fn write_guard(status: &mut std::fs::File, guard: Pid) {
    // One `write` (`write!` would make one per piece): init writes its status line to the same
    // file at the same time, and must not land in the middle of this one.
    let _ = status.write_all(format!("\nguard {guard}\n").as_bytes());
}

/// Stage 1 under the fallback (or with no confinement at all): forks the reaper, which runs the
/// program, and forwards signals to it, as stage 1 does to the namespace's init.
fn start_reaper(
    profile: &Profile,
    program: &[OsString],
    mut status_file: std::fs::File,
    confinement: Option<fallback::Prepared>,
    notes: Vec<String>,
) -> i32 {
    let helper = getpid();
    // SAFETY: `fork` is sound in a single-threaded process, and the helper is one: its `main`
    // runs before any thread is started (see `main`), and nothing here starts one.
    #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
    let forked = unsafe { nix::unistd::fork() };
    let reaper_pid = match forked {
        Ok(ForkResult::Child) => std::process::exit(reaper(
            profile,
            program,
            &mut status_file,
            confinement,
            notes,
            helper,
        )),
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => {
            complain(&format!("starting the reaper: {e}"));
            return EXIT_HELPER_FAILED;
        }
    };
    write_guard(&mut status_file, reaper_pid);
    let _ = nix::sys::prctl::set_dumpable(false);
    let signals = block_signals();
    let ending = supervise(reaper_pid, &signals, |signal| {
        let _ = kill(reaper_pid, signal);
    });
    let mut status = String::new();
    let _ = std::io::Seek::rewind(&mut status_file);
    let _ = std::io::Read::read_to_string(&mut status_file, &mut status);
    let signalled = status
        .lines()
        .find_map(|line| line.strip_prefix("signal "))
        .and_then(|n| n.trim().parse::<i32>().ok())
        .and_then(|n| Signal::try_from(n).ok());
    match signalled {
        Some(signal) => finish_like(Ending::Signal(signal)),
        None => ending.code(),
    }
}

/// The reaper (no PID namespace): in a session of its own (the group kills Keel and the editor
/// send to the helper do not reach it; the helper forwards them), not dumpable and outside the
/// program's Landlock domain (the program can neither trace nor, from Landlock ABI 6, signal
/// it), a child subreaper (everything the program leaves behind, daemons that left its session
/// included, becomes its child). It runs the program confined, forwards signals to the
/// program's group, kills the program when the helper goes (a `SIGKILL` from the editor's
/// `terminal/kill` included: its parent-death signal), and once the program has exited kills
/// every descendant until none is left, then writes `empty`.
fn reaper(
    profile: &Profile,
    program: &[OsString],
    status_file: &mut std::fs::File,
    confinement: Option<fallback::Prepared>,
    mut notes: Vec<String>,
    helper: Pid,
) -> i32 {
    let _ = nix::unistd::setsid();
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
    let _ = nix::sys::prctl::set_dumpable(false);
    if nix::unistd::getppid() != helper {
        // The helper is already gone: run nothing.
        return EXIT_HELPER_FAILED;
    }
    let Some((first, rest)) = program.split_first() else {
        return EXIT_HELPER_FAILED;
    };
    let mechanism = if confinement.is_some() {
        "landlock"
    } else {
        "none"
    };
    let proxy_port = confinement.as_ref().and_then(|c| c.proxy_port);
    if let Some(confinement) = &confinement {
        notes.extend(confinement.notes.iter().cloned());
        notes.push(
            "Landlock fallback: .git/hooks, .git/config, .keel and the other files other \
             programs run are writable while the command runs (Keel puts them back after it); \
             Unix sockets by path are reachable; no process's /proc (the command's own \
             included)"
                .into(),
        );
    }
    let mut command = program_command(profile, first, rest);
    command
        .env("TMPDIR", &profile.tmp_dir)
        .current_dir(&profile.cwd);
    if let Some(port) = proxy_port {
        proxy_env(&mut command, port);
    }
    own_session(&mut command, confinement);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            complain(&format!("cannot run {}: {e}", first.to_string_lossy()));
            return 127;
        }
    };
    // Confined (the confinement is applied before `exec`, so a started program is a confined
    // one): only now say so.
    if let Err(e) = write_status(status_file, profile, mechanism, notes) {
        complain(&e);
    }
    let Ok(pid) = i32::try_from(child.id()) else {
        return EXIT_HELPER_FAILED;
    };
    let main = Pid::from_raw(pid);
    let signals = block_signals();
    let ending = supervise(main, &signals, |signal| {
        // The helper gone (the parent-death signal, or any signal after it): end the program
        // now; the sweep below ends the rest.
        let orphaned = nix::unistd::getppid() != helper;
        let _ = nix::sys::signal::killpg(main, if orphaned { Signal::SIGKILL } else { signal });
        if orphaned {
            let _ = kill(main, Signal::SIGKILL);
        }
    });
    if kill_descendants() {
        let _ = status_file.write_all(b"\nempty\n");
    }
    if let Ending::Signal(signal) = ending {
        let _ = status_file.write_all(format!("\nsignal {}\n", signal as i32).as_bytes());
    }
    ending.code()
}

/// Kills every child of this process (orphans included, this being a subreaper) until none is
/// left; returns whether none is (`waitpid` says so).
fn kill_descendants() -> bool {
    let me = getpid().as_raw();
    for _ in 0..1000 {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                // No child at all (the usual case): nothing to look for.
                Err(Errno::ECHILD) => return true,
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let children = children_of(me);
        for child in children {
            let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    false
}

/// The children of this single-threaded process (called only while it has some):
/// `/proc/self/task/PID/children` where the kernel has it, else (or when that list came back
/// empty, which it may while children are being created) a scan of `/proc`.
fn children_of(parent: i32) -> Vec<i32> {
    if let Ok(list) = std::fs::read_to_string(format!("/proc/self/task/{parent}/children")) {
        let pids: Vec<i32> = list
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
        if !pids.is_empty() {
            return pids;
        }
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent)
        })
        .collect()
}
