//! The fallback mechanism, for machines without unprivileged user namespaces: Landlock for the
//! file system and seccomp for sockets, applied to the helper itself (and so inherited by the
//! program). `PR_SET_NO_NEW_PRIVS` first: both need it, and setuid programs lose their power.

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible as _, NetPort, Ruleset,
    RulesetAttr as _, RulesetCreatedAttr as _, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::profile::{Profile, SYSTEM_DIRS};

/// The newest Landlock ABI Keel asks for; older kernels get what they support.
const ABI_WANTED: ABI = ABI::V6;

/// Confines this process. Returns notes on what is not enforced, and the filtering proxy's port
/// when the program may use it (the network is off, the profile has a proxy, and Landlock can
/// restrict TCP connections to that one port: ABI 4 or later); an error when nothing could be
/// confined.
pub fn confine(profile: &Profile) -> Result<(Vec<String>, Option<u16>), String> {
    let mut notes = Vec::new();
    let proxy_port = match (&profile.proxy, profile.network) {
        (Some(endpoint), false) if landlock_abi().is_some_and(|abi| abi >= 4) => {
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
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    let mut read: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    read.extend(["/proc", "/dev"].map(PathBuf::from));
    read.extend(profile.home_readable.iter().cloned());
    read.extend(profile.readable.iter().cloned());
    let mut write: Vec<PathBuf> = profile.writable.clone();
    write.extend(profile.home_writable.iter().cloned());
    write.push(profile.tmp_dir.clone());
    write.extend(
        [
            "/dev/null",
            "/dev/zero",
            "/dev/full",
            "/dev/tty",
            "/dev/pts",
        ]
        .map(PathBuf::from),
    );
    // Credential files inside what may be read are left out of the rules: their directories
    // may be listed, their other entries read, they themselves not.
    let (listed, read) = around_masked(&read, &profile.masked);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(|e| e.to_string())?;
    if !profile.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_WANTED))
            .map_err(|e| e.to_string())?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(ABI_WANTED))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(ABI_WANTED)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&listed, AccessFs::ReadDir))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(ABI_WANTED)))
        .map_err(|e| e.to_string())?;
    if let Some(port) = proxy_port {
        // The one TCP connection the program may make: to Keel's proxy on the loopback.
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| e.to_string())?;
    }
    let status = created.restrict_self().map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => {}
        RulesetStatus::PartiallyEnforced => {
            notes.push("Landlock is only partly supported by this kernel".into());
        }
        RulesetStatus::NotEnforced => return Err("Landlock is not supported".into()),
    }
    if !profile.network {
        deny_sockets(proxy_port.is_some()).map_err(|e| format!("seccomp: {e}"))?;
    }
    Ok((notes, proxy_port))
}

/// The read rules for `entries` with every `masked` path left out: an entry holding no masked
/// path stays whole; one that holds some becomes a directory that may only be listed (the
/// first list) and each of its entries is taken again, down to the masked paths themselves,
/// which get no rule. Symlinks below a split entry get no rule either (Landlock would grant
/// their target); what they point to inside the entries is reachable through its own rule.
#[expect(
    clippy::disallowed_methods,
    reason = "the sandbox helper is part of the runtime, where ambient authority lives"
)]
fn around_masked(entries: &[PathBuf], masked: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut listed = Vec::new();
    let mut whole = Vec::new();
    let mut todo: Vec<PathBuf> = entries.to_vec();
    while let Some(entry) = todo.pop() {
        let inside: Vec<&PathBuf> = masked.iter().filter(|m| m.starts_with(&entry)).collect();
        if inside.is_empty() {
            whole.push(entry);
            continue;
        }
        if inside.iter().any(|m| **m == entry) {
            continue;
        }
        let Ok(children) = std::fs::read_dir(&entry) else {
            // Not a directory we can list: nothing below it is granted.
            continue;
        };
        listed.push(entry);
        for child in children.flatten() {
            let is_link = child.file_type().is_ok_and(|t| t.is_symlink());
            if !is_link {
                todo.push(child.path());
            }
        }
    }
    (listed, whole)
}

/// `socket(domain != AF_UNIX)` and `io_uring_setup` fail with `EPERM`. With `tcp` (the proxy's
/// way out), plain TCP sockets are allowed too (Landlock decides where they may connect): only
/// `SOCK_STREAM` with protocol 0 or TCP, so no UDP, raw or SCTP socket escapes Landlock's TCP
/// rules; and TCP Fast Open, which connects from `sendto`/`sendmsg`, is refused.
fn deny_sockets(tcp: bool) -> Result<(), String> {
    let condition = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    };
    let rule =
        |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(|e| e.to_string());
    let unix = libc::AF_UNIX as u64;
    let mut socket_rules = Vec::new();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    if tcp {
        let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
        socket_rules.push(rule(vec![
            condition(0, SeccompCmpOp::Ne, unix)?,
            condition(0, SeccompCmpOp::Ne, inet)?,
            condition(0, SeccompCmpOp::Ne, inet6)?,
        ])?);
        for domain in [inet, inet6] {
            // The socket type is the low 4 bits (the rest are SOCK_NONBLOCK and SOCK_CLOEXEC).
            for kind in (0..16u64).filter(|k| *k != libc::SOCK_STREAM as u64) {
                socket_rules.push(rule(vec![
                    condition(0, SeccompCmpOp::Eq, domain)?,
                    condition(1, SeccompCmpOp::MaskedEq(0xf), kind)?,
                ])?);
            }
            socket_rules.push(rule(vec![
                condition(0, SeccompCmpOp::Eq, domain)?,
                condition(2, SeccompCmpOp::Ne, 0)?,
                condition(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
            ])?);
        }
        let fast_open = libc::MSG_FASTOPEN as u64;
        rules.insert(
            libc::SYS_sendto,
            vec![rule(vec![condition(
                3,
                SeccompCmpOp::MaskedEq(fast_open),
                fast_open,
            )?])?],
        );
        rules.insert(
            libc::SYS_sendmsg,
            vec![rule(vec![condition(
                2,
                SeccompCmpOp::MaskedEq(fast_open),
                fast_open,
            )?])?],
        );
        rules.insert(
            libc::SYS_sendmmsg,
            vec![rule(vec![condition(
                3,
                SeccompCmpOp::MaskedEq(fast_open),
                fast_open,
            )?])?],
        );
        // TCP_FASTOPEN_CONNECT (30): connect() would defer to the first write.
        rules.insert(
            libc::SYS_setsockopt,
            vec![rule(vec![
                condition(1, SeccompCmpOp::Eq, libc::IPPROTO_TCP as u64)?,
                condition(2, SeccompCmpOp::Eq, 30)?,
            ])?],
        );
    } else {
        socket_rules.push(rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?);
    }
    rules.insert(libc::SYS_socket, socket_rules);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
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
