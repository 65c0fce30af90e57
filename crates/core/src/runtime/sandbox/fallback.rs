//! The fallback mechanism, for machines without unprivileged user namespaces: Landlock for the
//! file system and seccomp for sockets, applied to the helper itself (and so inherited by the
//! program). `PR_SET_NO_NEW_PRIVS` first: both need it, and setuid programs lose their power.

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible as _, Ruleset, RulesetAttr as _,
    RulesetCreatedAttr as _, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::profile::{Profile, SYSTEM_DIRS};

/// The newest Landlock ABI Keel asks for; older kernels get what they support.
const ABI_WANTED: ABI = ABI::V6;

/// Confines this process. Returns notes on what is not enforced; an error when nothing could be.
pub fn confine(profile: &Profile) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
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
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(|e| e.to_string())?;
    if !profile.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_WANTED))
            .map_err(|e| e.to_string())?;
    }
    let status = ruleset
        .scope(Scope::from_all(ABI_WANTED))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(ABI_WANTED)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(ABI_WANTED)))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => {}
        RulesetStatus::PartiallyEnforced => {
            notes.push("Landlock is only partly supported by this kernel".into());
        }
        RulesetStatus::NotEnforced => return Err("Landlock is not supported".into()),
    }
    if !profile.network {
        deny_sockets().map_err(|e| format!("seccomp: {e}"))?;
    }
    Ok(notes)
}

/// `socket(domain != AF_UNIX)` and `io_uring_setup` fail with `EPERM`.
fn deny_sockets() -> Result<(), String> {
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        (
            libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?],
        ),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]
    .into();
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
