//! The process's ledger of guarded entries per workspace root, shared by the commands that
//! may write it while they overlap (the module above explains why).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::{Before, GuardCache, Guarded, state_of};

/// The guarded entries of a root as they were before the first of its running commands that
/// may write it started (an "epoch": from one such command's start until none runs), whichever
/// session of this process runs them (two sessions of one Keel on the same workspace share
/// it). A snapshot taken during an epoch starts from these, not from what another running
/// command may have planted meanwhile; Keel's own writes meanwhile go into them
/// ([`GuardLedger::keel_wrote`]).
#[derive(Debug)]
pub struct GuardLedger {
    epochs: Mutex<BTreeMap<PathBuf, Epoch>>,
}

#[derive(Debug, Default)]
struct Epoch {
    /// Commands of the epoch whose guard has not ended.
    writers: usize,
    before: BTreeMap<PathBuf, (Guarded, Before)>,
}

/// This process's ledger.
static LEDGER: GuardLedger = GuardLedger {
    epochs: Mutex::new(BTreeMap::new()),
};

impl GuardLedger {
    /// The process's ledger.
    pub fn global() -> &'static GuardLedger {
        &LEDGER
    }

    fn epochs(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Epoch>> {
        self.epochs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A command starts with `before` (its own view of `roots`): replaced, for each root with
    /// an epoch running, by the epoch's entries; a root without one starts an epoch with it.
    pub(super) fn begin(
        &self,
        roots: &[PathBuf],
        before: &mut BTreeMap<PathBuf, (Guarded, Before)>,
    ) {
        let mut epochs = self.epochs();
        for root in roots {
            let epoch = epochs.entry(root.clone()).or_default();
            if epoch.writers == 0 {
                epoch.before = under(before, root);
            } else {
                before.retain(|path, _| !path.starts_with(root));
                before.extend(under(&epoch.before, root));
            }
            epoch.writers += 1;
        }
    }

    /// `before` with the epochs' entries, as they are now, for the roots that have one.
    pub(super) fn current(
        &self,
        roots: &[PathBuf],
        before: &BTreeMap<PathBuf, (Guarded, Before)>,
    ) -> BTreeMap<PathBuf, (Guarded, Before)> {
        let epochs = self.epochs();
        let mut now = before.clone();
        for root in roots {
            if let Some(epoch) = epochs.get(root) {
                now.retain(|path, _| !path.starts_with(root));
                now.extend(under(&epoch.before, root));
            }
        }
        now
    }

    /// Keel itself wrote or removed `path` (a file tool, which asks about these files): while
    /// commands that may write its root run, that is the entry's state to put back, not what it
    /// was before them. `class`: what the entry is, when the policy guards it.
    pub fn keel_wrote(&self, path: &Path, class: Option<Guarded>, cache: &GuardCache) {
        let mut epochs = self.epochs();
        for (_, epoch) in epochs
            .iter_mut()
            .filter(|(root, epoch)| epoch.writers > 0 && path.starts_with(root))
        {
            let Some(class) = epoch.before.get(path).map(|(class, _)| *class).or(class) else {
                continue;
            };
            match state_of(path, cache) {
                Some(state) => {
                    epoch.before.insert(path.to_path_buf(), (class, state));
                }
                None => {
                    epoch.before.remove(path);
                }
            }
        }
    }

    fn end(&self, roots: &[PathBuf]) {
        let mut epochs = self.epochs();
        for root in roots {
            if let Some(epoch) = epochs.get_mut(root) {
                epoch.writers = epoch.writers.saturating_sub(1);
                if epoch.writers == 0 {
                    epochs.remove(root);
                }
            }
        }
    }
}

/// The entries of `entries` at or below `root`.
fn under(
    entries: &BTreeMap<PathBuf, (Guarded, Before)>,
    root: &Path,
) -> BTreeMap<PathBuf, (Guarded, Before)> {
    entries
        .iter()
        .filter(|(path, _)| path.starts_with(root))
        .map(|(path, entry)| (path.clone(), entry.clone()))
        .collect()
}

/// One command's place in the [`GuardLedger`]: ended once its guard has put back what changed,
/// or its status was read without that (not confirmed confined), or the snapshot is dropped
/// (the command never ran).
pub(super) struct Writer {
    pub(super) roots: Vec<PathBuf>,
    pub(super) ended: std::sync::atomic::AtomicBool,
}

impl Writer {
    pub(super) fn end(&self) {
        if !self.ended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            GuardLedger::global().end(&self.roots);
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.end();
    }
}
