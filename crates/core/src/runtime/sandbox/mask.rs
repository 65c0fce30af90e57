//! The Landlock fallback's credential masks, built by Keel once instead of by the helper for
//! every command (decision 0033).
//!
//! Landlock only grants, so a credential file inside a readable tree is made unreadable by
//! granting everything around it: each directory from `/` down to a masked path may only be
//! listed, and each of its other entries is granted whole (the masked ones get no rule). That is
//! a `read_dir` of each such directory and a rule per sibling; done by the helper per command,
//! it cost 40 ms in a workspace of 100,000 files holding 50 credential files.
//!
//! [`MaskRulesets`] builds those rules once per list of masked paths, into a Landlock ruleset
//! that handles read access only (and `Refer`, which every ruleset denies unless granted), and
//! keeps its descriptor. A command Keel spawns itself inherits it ([`MaskFd::inherit`]) and the
//! helper applies it as a second layer over the profile's own ruleset: Landlock layers
//! intersect, so this one only takes the masked paths away and the profile's ruleset stays in
//! charge of everything else. Commands in the editor's terminal cannot inherit a descriptor;
//! their helper splits the rules itself, as before.
//!
//! The ruleset is kept current without a walk per command:
//!
//! - the list of masked paths changed (the credential index found or lost one, a home
//!   credential appeared): a new ruleset;
//! - a listed directory gained an entry (inotify on each listed directory): the entry is granted
//!   on its own, unless it is masked, holds a masked path, is a credential by the policy's
//!   rules, is a symlink or a regular file with several links; those stay unreadable (fail
//!   closed) until the index lists them and the ruleset is rebuilt;
//! - a listed directory went or moved, the event queue overflowed, or more than `MAX_GONE`
//!   entries went (their rules hold the inodes): a new ruleset.
//!
//! Rules hold inodes, not names, so a masked file renamed inside a listed directory or a new
//! file under a masked name has no rule until the ruleset is rebuilt: unreadable either way.

#![expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]

use std::collections::HashMap;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use landlock::{
    ABI, AccessFs, BitFlags, CompatLevel, Compatible as _, Ruleset, RulesetAttr as _,
    RulesetCreated, RulesetCreatedAttr as _, path_beneath_rules,
};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::Classify;
use super::profile::Mechanism;

/// The newest Landlock ABI asked for (as the helper's own ruleset).
const ABI_WANTED: ABI = ABI::V6;

/// How many rulesets a session keeps (one per list of masked paths: contained commands, and
/// approved ones, which mask the home directory's credentials only).
const MAX_KEPT: usize = 2;

/// How many entries of listed directories may go before the ruleset is rebuilt (each one's rule
/// keeps its inode, and the space of a deleted file, until then).
const MAX_GONE: usize = 1024;

/// Whether a command of this process was confined by the fallback (under
/// [`Mechanism::Auto`], whether the fallback is what this machine uses).
static FALLBACK_SEEN: AtomicBool = AtomicBool::new(false);

/// Notes the mechanism a helper reported: once one command ran under the fallback, commands of
/// [`Mechanism::Auto`] get a prebuilt ruleset too.
pub(crate) fn saw_mechanism(mechanism: &str) {
    if mechanism == "landlock" {
        FALLBACK_SEEN.store(true, Ordering::Relaxed);
    }
}

/// Whether commands of `mechanism` should be given a prebuilt ruleset: the fallback is forced,
/// or it is what this machine has used.
pub fn wanted(mechanism: Mechanism) -> bool {
    match mechanism {
        Mechanism::Landlock => true,
        Mechanism::Namespaces => false,
        Mechanism::Auto => FALLBACK_SEEN.load(Ordering::Relaxed),
    }
}

/// The rights the mask ruleset handles: reading (files, directories, executing) and `Refer`.
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_read(ABI_WANTED) | AccessFs::Refer
}

/// A prebuilt ruleset's descriptor (close-on-exec in Keel; [`MaskFd::inherit`] hands it to one
/// child). Shared: a command holds it until it has started. Two are equal when they are the same
/// ruleset with the same rules (a rule added since, for an entry that appeared, makes another
/// generation: a domain built before lacks it, see [`super::zygote`]).
#[derive(Debug, Clone)]
pub struct MaskFd(Arc<OwnedFd>, u64);

impl PartialEq for MaskFd {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) && self.1 == other.1
    }
}

impl Eq for MaskFd {}

impl MaskFd {
    /// The descriptor's number (what [`super::Profile::mask_ruleset`] names).
    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Lets the program `command` starts inherit the descriptor at its number: close-on-exec is
    /// cleared in the child only, between `fork` and `exec`, so no other program Keel starts
    /// meanwhile gets it (one that could add rules to it). The helper sets it again at once.
    pub fn inherit(&self, command: &mut std::process::Command) {
        inherit_fd(command, self.raw());
    }
}

/// Lets the program `command` starts inherit descriptor `fd` (close-on-exec in Keel) at its
/// number: the flag is cleared in the child only, between `fork` and `exec`.
pub(crate) fn inherit_fd(command: &mut std::process::Command, fd: RawFd) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the child between `fork` and `exec` and makes one system
    // call (`fcntl`), which is async-signal-safe; the descriptor is open in the child (the
    // caller holds it until the spawn returns).
    #[expect(
        unsafe_code,
        reason = "pre_exec with one async-signal-safe system call (see SAFETY)"
    )]
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// Why a ruleset could not be built (the helper then splits the rules itself).
#[derive(Debug, thiserror::Error)]
enum BuildError {
    #[error("inotify: {0}")]
    Inotify(#[source] Errno),
    #[error("watching {}: {source}", path.display())]
    Watch {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("building the Landlock ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("duplicating the ruleset's descriptor: {0}")]
    Duplicate(#[source] std::io::Error),
    #[error("Landlock is not supported by this kernel")]
    Unsupported,
}

/// What the rulesets cost so far (for tests and the benchmark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaskStats {
    /// Rulesets built (each a `read_dir` of every listed directory and a rule per entry).
    pub built: u64,
    /// Entries granted one by one since, as they appeared in listed directories.
    pub added: u64,
}

/// A session's prebuilt mask rulesets ([`MaskRulesets::ruleset_for`]).
#[derive(Default)]
pub struct MaskRulesets {
    state: Mutex<State>,
}

impl std::fmt::Debug for MaskRulesets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaskRulesets").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    kept: Vec<Built>,
    stats: MaskStats,
}

/// One ruleset and what keeps it current.
struct Built {
    /// The masked paths it was built for, sorted.
    masked: Vec<PathBuf>,
    /// The same with their directories resolved as the kernel walks them, and as given.
    covered: Vec<PathBuf>,
    ruleset: RulesetCreated,
    fd: MaskFd,
    /// Watches on the listed directories (entries created, removed, moved; the directory
    /// itself gone or moved).
    inotify: Inotify,
    listed: HashMap<WatchDescriptor, PathBuf>,
    gone: usize,
}

const WATCHED: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR)
    .union(AddWatchFlags::IN_DONT_FOLLOW);

impl MaskRulesets {
    /// The ruleset that takes read access to `masked` away, current: the kept one brought up
    /// to date, or a new one. `classify` is the policy's credential rule (an entry it names is
    /// not granted until the index lists it). `None` when `masked` is empty or no ruleset can be
    /// built here (no Landlock, no inotify): the helper then splits the rules itself.
    pub fn ruleset_for(&self, masked: &[PathBuf], classify: Option<&Classify>) -> Option<MaskFd> {
        if masked.is_empty() {
            return None;
        }
        let mut key = masked.to_vec();
        key.sort();
        key.dedup();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { kept, stats } = &mut *state;
        if let Some(at) = kept.iter().position(|built| built.masked == key) {
            if let Some(added) = kept[at].refresh(classify) {
                stats.added += added;
                if added > 0 {
                    kept[at].fd.1 += 1;
                }
                return Some(kept[at].fd.clone());
            }
            kept.remove(at);
        }
        match Built::new(key) {
            Ok(built) => {
                stats.built += 1;
                let fd = built.fd.clone();
                if kept.len() >= MAX_KEPT {
                    kept.remove(0);
                }
                kept.push(built);
                Some(fd)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot prebuild the credential masks; the helper splits them per command");
                None
            }
        }
    }

    /// What the rulesets cost so far.
    pub fn stats(&self) -> MaskStats {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stats
    }
}

impl Built {
    fn new(masked: Vec<PathBuf>) -> Result<Self, BuildError> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(BuildError::Inotify)?;
        // The paths as the kernel walks them (a masked path given through a symlink would
        // otherwise be granted through its real directory).
        let covered: Vec<PathBuf> = masked
            .iter()
            .map(|path| match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) => std::fs::canonicalize(parent)
                    .map(|parent| parent.join(name))
                    .unwrap_or_else(|_| path.clone()),
                _ => path.clone(),
            })
            .chain(masked.iter().cloned())
            .collect();
        // Each split directory is watched before it is read: an entry made after the read is
        // seen by the watch.
        let (listed_dirs, whole) = keel_sandbox::split_around_masked(
            &[PathBuf::from("/")],
            &covered,
            |dir| match inotify.add_watch(dir, WATCHED) {
                Ok(wd) => Ok(Some(wd)),
                // Not a directory (or gone): nothing below it is granted.
                Err(Errno::ENOTDIR | Errno::ENOENT) => Ok(None),
                Err(source) => Err(BuildError::Watch {
                    path: dir.to_path_buf(),
                    source,
                }),
            },
        )?;
        let listed: Vec<&PathBuf> = listed_dirs.iter().map(|(dir, _)| dir).collect();
        let ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(handled())?
            .create()?
            .add_rules(path_beneath_rules(&whole, handled()))?
            .add_rules(path_beneath_rules(
                &listed,
                AccessFs::ReadDir | AccessFs::Refer,
            ))?;
        let fd: Option<OwnedFd> = ruleset.try_clone().map_err(BuildError::Duplicate)?.into();
        let fd = fd.ok_or(BuildError::Unsupported)?;
        Ok(Self {
            masked,
            covered,
            ruleset,
            fd: MaskFd(Arc::new(fd), 0),
            inotify,
            listed: listed_dirs.into_iter().map(|(dir, wd)| (wd, dir)).collect(),
            gone: 0,
        })
    }

    /// Applies the queued events: `Some(n)` with the number of entries granted, `None` when
    /// the ruleset must be built again.
    fn refresh(&mut self, classify: Option<&Classify>) -> Option<u64> {
        let mut new = Vec::new();
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(Errno::EAGAIN) => break,
                Err(_) => return None,
            };
            for event in events {
                if event.mask.intersects(
                    AddWatchFlags::IN_Q_OVERFLOW
                        | AddWatchFlags::IN_IGNORED
                        | AddWatchFlags::IN_DELETE_SELF
                        | AddWatchFlags::IN_MOVE_SELF,
                ) {
                    return None;
                }
                if event
                    .mask
                    .intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM)
                {
                    self.gone += 1;
                }
                if event
                    .mask
                    .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                    && let (Some(dir), Some(name)) = (self.listed.get(&event.wd), &event.name)
                {
                    new.push(dir.join(name));
                }
            }
        }
        if self.gone > MAX_GONE {
            return None;
        }
        new.sort();
        new.dedup();
        let grant: Vec<PathBuf> = new
            .into_iter()
            .filter(|path| self.grantable(path, classify))
            .collect();
        if grant.is_empty() {
            return Some(0);
        }
        let count = grant.len() as u64;
        (&mut self.ruleset)
            .add_rules(path_beneath_rules(&grant, handled()))
            .ok()?;
        Some(count)
    }

    /// Whether a new entry of a listed directory may be granted whole: not masked, holding no
    /// masked path, not a symlink, not a credential by the policy's rules, not a regular file
    /// with several links (the index decides those: once it lists them, the ruleset is rebuilt
    /// anyway).
    fn grantable(&self, path: &Path, classify: Option<&Classify>) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        if self.covered.iter().any(|masked| masked.starts_with(path)) {
            return false;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false;
        };
        !(meta.file_type().is_symlink()
            || (meta.is_file() && meta.nlink() > 1)
            || classify.is_some_and(|classify| classify(path, &meta)))
    }
}
