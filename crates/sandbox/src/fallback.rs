//! The fallback mechanism, for machines without unprivileged user namespaces: Landlock for the
//! file system (and `/proc` without any process's directory, `/dev` without raw devices) and
//! seccomp for sockets, with every capability dropped. Built by the helper, applied in the
//! program's process before it runs ([`Prepared::apply`]). `PR_SET_NO_NEW_PRIVS` first: both
//! need it, and setuid programs lose their power.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible as _, NetPort, Ruleset,
    RulesetAttr as _, RulesetCreated, RulesetCreatedAttr as _, Scope, path_beneath_rules,
};
use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule,
};

use crate::error::{Error, Result};
use crate::profile::{Profile, SYSTEM_DIRS};

/// The newest Landlock ABI Keel asks for; older kernels get what they support.
const ABI_WANTED: ABI = ABI::V6;

/// What `/proc` shows a command under the fallback: the system's own entries, never a process's
/// directory. Landlock cannot tell one pid from another, so no `/proc/PID` is granted, the
/// command's own included (`/proc/self` is one of them); `ps` and `/proc/self/status` fail.
const PROC_ENTRIES: [&str; 22] = [
    "buddyinfo",
    "cgroups",
    "cpuinfo",
    "crypto",
    "devices",
    "diskstats",
    "filesystems",
    "interrupts",
    "loadavg",
    "meminfo",
    "misc",
    "partitions",
    "pressure",
    "schedstat",
    "softirqs",
    "stat",
    "swaps",
    "sys",
    "uptime",
    "version",
    "vmstat",
    "zoneinfo",
];

/// The device nodes a command may read and write under the fallback (no raw disk, memory or
/// kernel log; `/dev/fd`, `/dev/stdin`, ... are links to the command's own descriptors, whose
/// targets are checked on their own). Of `/dev/pts` only the multiplexer (where `/dev/ptmx`
/// leads on some systems): the other entries are the terminals of the user's other sessions,
/// which the command could read keystrokes from and write to (under namespaces `/dev/pts` is an
/// instance of the command's own).
const DEV_READ_WRITE: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts/ptmx",
];
/// The device nodes a command may only read.
const DEV_READ: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// The fallback's confinement, built by the helper before the program starts and applied in the
/// program's own process between `fork` and `exec` ([`Prepared::apply`]): the helper that
/// supervises the program stays outside it, so the program can neither signal nor trace it
/// (Landlock confines both to the program's own domain), and the helper can still read `/proc`
/// to find what the program left behind.
pub struct Prepared {
    ruleset: Option<RulesetCreated>,
    /// The inherited ruleset that takes the masked paths away ([`Profile::mask_ruleset`]).
    mask: Option<i32>,
    seccomp: Option<BpfProgram>,
    /// What is not enforced.
    pub notes: Vec<String>,
    /// The filtering proxy's port, when the program may use it (the network is off, the profile
    /// has a proxy, and Landlock can restrict TCP connections to that one port: ABI 4 or later).
    pub proxy_port: Option<u16>,
}

/// Builds the confinement (nothing is applied yet); an error when Landlock is not available.
pub fn prepare(profile: &Profile) -> Result<Prepared> {
    let mut notes = Vec::new();
    let abi = landlock_abi().ok_or(Error::NoLandlock)?;
    if abi < 6 {
        notes.push(format!(
            "Landlock is only partly supported by this kernel (ABI {abi} < 6: a command may \
             signal processes outside the sandbox)"
        ));
    }
    let proxy_port = match (&profile.proxy, profile.network) {
        (Some(endpoint), false) if abi >= 4 => {
            notes.push("network: only the hosts the rules allow, through Keel's proxy".into());
            Some(endpoint.port)
        }
        (Some(_), false) => {
            notes.push(
                "no filtering proxy: this kernel's Landlock cannot restrict TCP ports (ABI < 4), \
                 so the network stays off"
                    .into(),
            );
            None
        }
        _ => None,
    };
    let mut read: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    read.extend(
        PROC_ENTRIES
            .iter()
            .map(|entry| Path::new("/proc").join(entry)),
    );
    read.extend(DEV_READ.map(PathBuf::from));
    read.extend(profile.home_readable.iter().cloned());
    read.extend(profile.readable.iter().cloned());
    let mut write: Vec<PathBuf> = profile.writable.clone();
    write.extend(profile.home_writable.iter().cloned());
    write.push(profile.tmp_dir.clone());
    write.extend(DEV_READ_WRITE.map(PathBuf::from));
    // Credential files inside what may be read are left out of the rules: their directories
    // may be listed, their other entries read, they themselves not. Keel's prebuilt ruleset
    // does that as a second layer; without one, the rules are split here.
    let mask = profile
        .mask_ruleset
        .filter(|fd| !profile.masked.is_empty() && is_landlock_ruleset(*fd));
    if profile.mask_ruleset.is_some() && mask.is_none() {
        notes.push("the credential masks Keel built could not be used; split here".into());
    }
    let (mut listed, read) = match mask {
        Some(_) => (Vec::new(), read),
        None => around_masked(&read, &profile.masked),
    };
    listed.push(PathBuf::from("/dev"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_WANTED))?;
    if !profile.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI_WANTED))?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(ABI_WANTED))?
        .create()?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(ABI_WANTED)))?
        .add_rules(path_beneath_rules(&listed, AccessFs::ReadDir))?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(ABI_WANTED)))?;
    if let Some(port) = proxy_port {
        // The one TCP connection the program may make: to Keel's proxy on the loopback.
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    // Always a filter: the kernel objects no namespace separates under the fallback (keyrings,
    // SysV IPC, terminal injection); sockets too when the network is off.
    let sockets = match (profile.network, proxy_port) {
        (true, _) => Sockets::Any,
        (false, Some(_)) => Sockets::ProxyOnly,
        (false, None) => Sockets::None,
    };
    let seccomp = Some(fallback_filter(sockets)?);
    Ok(Prepared {
        ruleset: Some(created),
        mask,
        seccomp,
        notes,
        proxy_port,
    })
}

impl Prepared {
    /// Confines this process: no new privileges, every capability dropped
    /// ([`drop_capabilities`]), Landlock, then the seccomp filter. Only system calls: it runs
    /// between `fork` and `exec`.
    pub fn apply(&mut self) -> std::io::Result<()> {
        nix::sys::prctl::set_no_new_privs()?;
        drop_capabilities()?;
        if let Some(ruleset) = self.ruleset.take() {
            ruleset.restrict_self().map_err(std::io::Error::other)?;
        }
        if let Some(mask) = self.mask.take() {
            restrict_self_with(mask)?;
        }
        if let Some(program) = &self.seccomp {
            seccompiler::apply_filter(program).map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    /// What a program under namespaces gets besides them: the seccomp filter for what no
    /// namespace separates ([`kernel_object_rules`]: the user's keyrings, terminal injection),
    /// and with [`Profile::no_connect`] no socket reached by path ([`no_connect_rules`]), with
    /// every capability dropped and no new privileges ([`Prepared::apply`]).
    pub fn for_namespaces(profile: &Profile) -> Result<Prepared> {
        let mut rules = kernel_object_rules()?;
        if profile.no_connect {
            no_connect_rules(&mut rules)?;
        }
        Ok(Prepared {
            ruleset: None,
            mask: None,
            seccomp: Some(seccomp_program(rules)?),
            notes: Vec::new(),
            proxy_port: None,
        })
    }
}

/// Confines this very process ([`prepare`], then [`Prepared::apply`]). Returns notes on what is
/// not enforced and the filtering proxy's port (see [`Prepared::proxy_port`]).
pub fn confine(profile: &Profile) -> Result<(Vec<String>, Option<u16>)> {
    let mut prepared = prepare(profile)?;
    prepared.apply().map_err(Error::Apply)?;
    Ok((std::mem::take(&mut prepared.notes), prepared.proxy_port))
}

/// How long the helper waits for Keel's answer on [`Profile::mask_socket`] before it splits the
/// rules itself.
const MASK_ANSWER_WITHIN: Duration = Duration::from_millis(500);

/// Asks Keel for its prebuilt mask ruleset ([`Profile::mask_socket`], with the key in
/// [`crate::MASK_KEY_ENV`]) when this helper inherited none and has paths to mask, and names it
/// in the profile ([`Profile::mask_ruleset`]). The descriptor (close-on-exec) must stay open
/// until the program has started. Nothing, or a note when Keel did not answer: the rules are
/// split here, as without a socket.
#[expect(
    clippy::disallowed_methods,
    reason = "the sandbox helper is part of the runtime, where ambient authority lives"
)]
pub fn fetch_mask(profile: &mut Profile, notes: &mut Vec<String>) -> Option<OwnedFd> {
    if profile.mask_ruleset.is_some() || profile.masked.is_empty() {
        return None;
    }
    let socket = profile.mask_socket.as_ref()?;
    let key = std::env::var(crate::MASK_KEY_ENV).ok()?;
    let asked = || -> std::io::Result<Option<OwnedFd>> {
        let mut stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(MASK_ANSWER_WITHIN))?;
        stream.set_write_timeout(Some(MASK_ANSWER_WITHIN))?;
        stream.write_all(format!("{key}\n").as_bytes())?;
        let answer = crate::fds::recv_with_fds(stream.as_fd(), &mut [0u8; 1], false)?;
        Ok(answer
            .and_then(|(_, fds)| <[OwnedFd; 1]>::try_from(fds).ok())
            .map(|[fd]| fd))
    };
    match asked() {
        Ok(Some(fd)) => {
            profile.mask_ruleset = Some(fd.as_raw_fd());
            Some(fd)
        }
        Ok(None) => {
            notes.push("Keel had no credential masks for this command; split here".into());
            None
        }
        Err(error) => {
            notes.push(format!(
                "the credential masks Keel built could not be fetched ({error}); split here"
            ));
            None
        }
    }
}

/// Sets close-on-exec on the descriptor [`Profile::mask_ruleset`] names, whatever it is and
/// whichever mechanism runs: no program the helper starts inherits it (one that could add
/// rules to Keel's ruleset would weaken the masks of the commands after it).
pub fn close_mask_on_exec(profile: &Profile) {
    if let Some(fd) = profile.mask_ruleset {
        // SAFETY: `fcntl` with integer arguments only; on a descriptor that is not open it
        // fails with EBADF, which changes nothing.
        #[expect(
            unsafe_code,
            reason = "fcntl(F_SETFD) on a numbered descriptor (see SAFETY)"
        )]
        unsafe {
            let _ = libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// Whether descriptor `fd` of this process is a Landlock ruleset.
#[expect(
    clippy::disallowed_methods,
    reason = "the sandbox helper is part of the runtime, where ambient authority lives"
)]
fn is_landlock_ruleset(fd: i32) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .is_ok_and(|target| target.as_os_str() == "anon_inode:[landlock-ruleset]")
}

/// Adds the ruleset `fd` as a layer of this process's Landlock domain (`landlock_restrict_self`;
/// the crate has no way to use a ruleset built by another process). Only a system call: it runs
/// between `fork` and `exec`, after `PR_SET_NO_NEW_PRIVS`.
#[expect(
    unsafe_code,
    reason = "landlock_restrict_self on an inherited descriptor (see SAFETY)"
)]
fn restrict_self_with(fd: i32) -> std::io::Result<()> {
    // SAFETY: integer arguments only (a descriptor and no flags); the kernel reads no memory.
    let result = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `struct __user_cap_header_struct` of `capset(2)`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct` of `capset(2)`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops every capability of this process and of what it executes, also when it runs as root:
/// the ambient set cleared; where the process may (`CAP_SETPCAP`), the bounding set emptied and
/// the securebits set and locked so that uid 0 gains nothing at `exec`; then the effective,
/// permitted and inheritable sets emptied. Without `CAP_SETPCAP` (an ordinary user) the
/// bounding set stays as it is: `PR_SET_NO_NEW_PRIVS` already makes setuid and file
/// capabilities grant nothing. Only system calls (it runs between `fork` and `exec`).
#[expect(
    unsafe_code,
    reason = "prctl and capset have no wrapper in nix for these operations (see SAFETY)"
)]
pub fn drop_capabilities() -> std::io::Result<()> {
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    // NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each locked; KEEP_CAPS locked off.
    const SECUREBITS: libc::c_ulong = 0xEF;
    // SAFETY: prctl with integer arguments only; the kernel reads no memory of ours.
    unsafe {
        let _ = libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
        // Capability 0 first: without CAP_SETPCAP every drop fails the same way.
        if libc::prctl(libc::PR_CAPBSET_DROP, 0 as libc::c_ulong, 0, 0, 0) == 0 {
            let mut cap: libc::c_ulong = 1;
            // EINVAL past the last capability this kernel knows.
            while libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 {
                cap += 1;
            }
            if libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: `header` and `data` are live values of the layout `capset` expects (version 3:
    // two data structs); the kernel only reads them during the call.
    let result = unsafe { libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The read rules for `entries` with every `masked` path left out: an entry holding no masked
/// path stays whole; one that holds some becomes a directory that may only be listed (the
/// first list) and each of its entries is taken again, down to the masked paths themselves,
/// which get no rule. Symlinks below a split entry get no rule either (Landlock would grant
/// their target); what they point to inside the entries is reachable through its own rule.
fn around_masked(entries: &[PathBuf], masked: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let Ok((listed, whole)) = split_around_masked(entries, masked, |_| {
        Ok::<_, std::convert::Infallible>(Some(()))
    });
    (listed.into_iter().map(|(dir, ())| dir).collect(), whole)
}

/// The directories that may only be listed (each with its caller's token) and the entries
/// granted whole.
pub type Split<T> = (Vec<(PathBuf, T)>, Vec<PathBuf>);

/// The fallback's own walk (`around_masked`), shared with Keel, which builds the same rules once
/// for many commands: `before_listing` is called on each directory to be split before it is
/// read (Keel watches it there, so an entry made after the read is seen); `Ok(None)` leaves the
/// directory out (nothing below it is granted), an error ends the walk. The listed directories
/// come back with what `before_listing` gave for each.
#[expect(
    clippy::disallowed_methods,
    reason = "the sandbox helper is part of the runtime, where ambient authority lives"
)]
pub fn split_around_masked<T, E>(
    entries: &[PathBuf],
    masked: &[PathBuf],
    mut before_listing: impl FnMut(&Path) -> std::result::Result<Option<T>, E>,
) -> std::result::Result<Split<T>, E> {
    let mut listed = Vec::new();
    let mut whole = Vec::new();
    let mut todo: Vec<PathBuf> = entries.to_vec();
    while let Some(entry) = todo.pop() {
        if !masked.iter().any(|m| m.starts_with(&entry)) {
            whole.push(entry);
            continue;
        }
        if masked.contains(&entry) {
            continue;
        }
        let Some(token) = before_listing(&entry)? else {
            continue;
        };
        let Ok(children) = std::fs::read_dir(&entry) else {
            // Not a directory we can list: nothing below it is granted.
            continue;
        };
        listed.push((entry, token));
        for child in children.flatten() {
            let is_link = child.file_type().is_ok_and(|t| t.is_symlink());
            if !is_link {
                todo.push(child.path());
            }
        }
    }
    Ok((listed, whole))
}

/// Which sockets the fallback's filter lets a program make.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sockets {
    /// The network is on: any.
    Any,
    /// The network is off, but the filtering proxy is the way out: Unix and plain TCP sockets.
    ProxyOnly,
    /// The network is off: Unix sockets only, and no `connect`.
    None,
}

/// What no namespace separates and no path names, refused (`EPERM`) under both mechanisms:
/// - the kernel keyrings (`keyctl`, `add_key`, `request_key`): a program inherits the session
///   keyring of whoever started it (the user's login session: Kerberos tickets, ecryptfs and
///   other secrets), and the user and persistent keyrings are the user's under the fallback;
///   keyrings have no namespace of their own. Docker's default profile refuses the same three.
/// - `TIOCSTI` and `TIOCLINUX` on a terminal: typing into the terminal of whoever started the
///   helper (its shell runs what was typed once the command ends).
fn kernel_object_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, BackendError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key] {
        rules.insert(call, Vec::new());
    }
    // `TIOCSTI` and `TIOCLINUX` on x86, Arm and RISC-V (the `libc` constants' type differs
    // between targets).
    let ioctls = [0x5412u64, 0x541C]
        .into_iter()
        .map(|request| {
            // The request is an `unsigned int`: its low 32 bits are all the kernel reads.
            SeccompRule::new(vec![dword(1, SeccompCmpOp::Eq, request)?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctls);
    Ok(rules)
}

/// System V IPC (shared memory, message queues, semaphores), refused under the fallback: without
/// an IPC namespace a program could attach any segment of the user's other processes by its id
/// (`shmat` needs no key) and read or change it. Under namespaces the program has an IPC
/// namespace of its own instead, where these work.
const SYSV_IPC: [i64; 11] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// Under the fallback, the settings of processes outside that a program of the same user may
/// change by pid, which Landlock does not see (its scoping covers signals and `ptrace`, not
/// these): their resource limits (`prlimit64`: an open-files limit of 3 or a CPU-time limit of 0
/// kills Keel or the editor), their priority, CPU affinity, scheduling policy and I/O priority
/// (`setpriority`, `sched_set*`, `ioprio_set`: `SCHED_IDLE`, which the user cannot undo without
/// a privilege). So each is allowed on the caller only (pid 0), and never on every process of
/// the user (`PRIO_USER`, `IOPRIO_WHO_USER`). Under namespaces the PID namespace does this:
/// no process outside has a pid there, and the by-user forms skip them.
fn other_process_rules(rules: &mut BTreeMap<i64, Vec<SeccompRule>>) -> Result<(), BackendError> {
    const PRIO_USER: u64 = 2;
    const IOPRIO_WHO_USER: u64 = 3;
    // A pid argument (`pid_t`, 32 bits) that is not 0: another process or thread.
    let not_self = |arg: u8| SeccompRule::new(vec![dword(arg, SeccompCmpOp::Ne, 0)?]);
    // A new limit (a pointer: all 64 bits) for a process that is not the caller; reading
    // another's limits (no new limit) stays allowed.
    rules.insert(
        libc::SYS_prlimit64,
        vec![SeccompRule::new(vec![
            dword(0, SeccompCmpOp::Ne, 0)?,
            SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)?,
        ])?],
    );
    rules.insert(
        libc::SYS_setpriority,
        vec![
            SeccompRule::new(vec![dword(0, SeccompCmpOp::Eq, PRIO_USER)?])?,
            not_self(1)?,
        ],
    );
    rules.insert(
        libc::SYS_ioprio_set,
        vec![
            SeccompRule::new(vec![dword(0, SeccompCmpOp::Eq, IOPRIO_WHO_USER)?])?,
            not_self(1)?,
        ],
    );
    for call in [
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        rules.insert(call, vec![not_self(0)?]);
    }
    Ok(())
}

/// A condition on the low 32 bits of argument `arg` (an `int`, a `pid_t`, a flag word).
fn dword(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

fn seccomp_program(rules: BTreeMap<i64, Vec<SeccompRule>>) -> Result<BpfProgram, BackendError> {
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    filter.try_into()
}

/// The fallback's seccomp filter: [`kernel_object_rules`], [`SYSV_IPC`] and
/// [`other_process_rules`] always; with the network off, `socket(domain != AF_UNIX)`, Unix
/// datagram sockets (and socket pairs), `connect` and `io_uring_setup` fail with `EPERM` too.
/// With [`Sockets::ProxyOnly`] (the proxy's way out), `connect` is allowed and plain TCP
/// sockets are the only ones (Landlock decides where they may connect; no Unix socket, which
/// could connect by path): only `SOCK_STREAM` with protocol 0 or TCP, so no UDP, raw or SCTP
/// socket escapes Landlock's TCP rules; and TCP Fast Open, which connects from
/// `sendto`/`sendmsg`, is refused.
fn fallback_filter(sockets: Sockets) -> Result<BpfProgram, BackendError> {
    let mut rules = kernel_object_rules()?;
    for call in SYSV_IPC {
        rules.insert(call, Vec::new());
    }
    other_process_rules(&mut rules)?;
    if sockets == Sockets::Any {
        return seccomp_program(rules);
    }
    let tcp = sockets == Sockets::ProxyOnly;
    let rule = |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions);
    let unix = libc::AF_UNIX as u64;
    let mut socket_rules = Vec::new();
    if tcp {
        let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
        // No Unix socket at all: `connect` must stay allowed for the proxy's TCP connection,
        // and a Unix one could reach any socket by path (the session bus, the Docker socket).
        socket_rules.push(rule(vec![
            dword(0, SeccompCmpOp::Ne, inet)?,
            dword(0, SeccompCmpOp::Ne, inet6)?,
        ])?);
        for domain in [inet, inet6] {
            // The socket type is the low 4 bits (the rest are SOCK_NONBLOCK and SOCK_CLOEXEC).
            for kind in (0..16u64).filter(|k| *k != libc::SOCK_STREAM as u64) {
                socket_rules.push(rule(vec![
                    dword(0, SeccompCmpOp::Eq, domain)?,
                    dword(1, SeccompCmpOp::MaskedEq(0xf), kind)?,
                ])?);
            }
            socket_rules.push(rule(vec![
                dword(0, SeccompCmpOp::Eq, domain)?,
                dword(2, SeccompCmpOp::Ne, 0)?,
                dword(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
            ])?);
        }
        let fast_open = libc::MSG_FASTOPEN as u64;
        rules.insert(
            libc::SYS_sendto,
            vec![rule(vec![dword(
                3,
                SeccompCmpOp::MaskedEq(fast_open),
                fast_open,
            )?])?],
        );
        rules.insert(
            libc::SYS_sendmsg,
            vec![rule(vec![dword(
                2,
                SeccompCmpOp::MaskedEq(fast_open),
                fast_open,
            )?])?],
        );
        rules.insert(
            libc::SYS_sendmmsg,
            vec![rule(vec![dword(
                3,
                SeccompCmpOp::MaskedEq(fast_open),
                fast_open,
            )?])?],
        );
        // TCP_FASTOPEN_CONNECT (30): connect() would defer to the first write.
        rules.insert(
            libc::SYS_setsockopt,
            vec![rule(vec![
                dword(1, SeccompCmpOp::Eq, libc::IPPROTO_TCP as u64)?,
                dword(2, SeccompCmpOp::Eq, 30)?,
            ])?],
        );
    } else {
        socket_rules.push(rule(vec![dword(0, SeccompCmpOp::Ne, unix)?])?);
        // Without a network every socket is a Unix one, and Landlock (before ABI 9) cannot say
        // where one may connect by path: the session bus (`systemd-run --user` starts anything
        // outside every layer), the Docker socket, an agent. So no `connect` at all;
        // `socketpair` and inherited sockets still work, and abstract names are scoped anyway.
        rules.insert(libc::SYS_connect, Vec::new());
    }
    // No Unix datagram socket (with or without the proxy): `sendto` and `sendmsg` name their
    // destination by path without any `connect` (the system log, `systemd`'s notification
    // sockets, any datagram socket of the user's), and a socket pair's may too.
    let datagram = libc::SOCK_DGRAM as u64;
    if !tcp {
        socket_rules.push(rule(vec![
            dword(0, SeccompCmpOp::Eq, unix)?,
            dword(1, SeccompCmpOp::MaskedEq(0xf), datagram)?,
        ])?);
    }
    rules.insert(
        libc::SYS_socketpair,
        vec![rule(vec![
            dword(0, SeccompCmpOp::Eq, unix)?,
            dword(1, SeccompCmpOp::MaskedEq(0xf), datagram)?,
        ])?],
    );
    rules.insert(libc::SYS_socket, socket_rules);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    seccomp_program(rules)
}

/// [`Profile::no_connect`] under namespaces: a namespace's own sockets stay usable (its
/// loopback, socket pairs), but a socket by path is the same file inside as outside, and the
/// session's `/tmp` and the workspace are shared with the session's other commands. So no
/// `connect`, no Unix datagram socket (`sendto` names its destination by path) and no
/// `io_uring` (which connects without the system call), as under the fallback without a
/// network.
fn no_connect_rules(rules: &mut BTreeMap<i64, Vec<SeccompRule>>) -> Result<(), BackendError> {
    let unix = libc::AF_UNIX as u64;
    let datagram = libc::SOCK_DGRAM as u64;
    let unix_datagram = || {
        SeccompRule::new(vec![
            dword(0, SeccompCmpOp::Eq, unix)?,
            dword(1, SeccompCmpOp::MaskedEq(0xf), datagram)?,
        ])
    };
    rules.insert(libc::SYS_connect, Vec::new());
    rules.insert(libc::SYS_socket, vec![unix_datagram()?]);
    rules.insert(libc::SYS_socketpair, vec![unix_datagram()?]);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    Ok(())
}

/// The newest Landlock ABI (up to the one Keel uses) this kernel supports, by probing.
pub fn landlock_abi() -> Option<i32> {
    let probe = |abi: ABI| -> Result<(), landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))?;
        if abi >= ABI::V4 {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        if abi >= ABI::V6 {
            ruleset = ruleset.scope(Scope::from_all(abi))?;
        }
        ruleset.create().map(drop)
    };
    [
        (ABI::V6, 6),
        (ABI::V5, 5),
        (ABI::V4, 4),
        (ABI::V3, 3),
        (ABI::V2, 2),
        (ABI::V1, 1),
    ]
    .into_iter()
    .find(|(abi, _)| probe(*abi).is_ok())
    .map(|(_, number)| number)
}
