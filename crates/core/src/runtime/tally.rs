//! A test hook that counts the work one tool call costs: path resolutions, argument parses,
//! file reads and diffs. Installed for a future with [`scope`] (a task-local, so tests running
//! side by side never see each other's counts); without one, counting is a no-op.
//!
//! The engine's promise it checks: a call is prepared once. Its arguments are validated and
//! deserialized once, its subject path resolved once, the file read once and diffed once,
//! however many hops (capability check, policy, preview for approval, run) the call goes
//! through.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A user path resolved on the disk ([`super::Runtime::resolve`]).
    Resolve,
    /// A tool call's arguments validated and deserialized.
    Parse,
    /// A file's content read (from the disk or the editor; attempts that found no file are
    /// not counted).
    Read,
    /// A file change diffed.
    Diff,
}

/// The counts of one [`scope`].
#[derive(Debug, Default)]
pub struct Tally {
    resolve: AtomicUsize,
    parse: AtomicUsize,
    read: AtomicUsize,
    diff: AtomicUsize,
}

/// A snapshot of a [`Tally`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub resolve: usize,
    pub parse: usize,
    pub read: usize,
    pub diff: usize,
}

impl Tally {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn counter(&self, event: Event) -> &AtomicUsize {
        match event {
            Event::Resolve => &self.resolve,
            Event::Parse => &self.parse,
            Event::Read => &self.read,
            Event::Diff => &self.diff,
        }
    }

    pub fn counts(&self) -> Counts {
        Counts {
            resolve: self.resolve.load(Ordering::Relaxed),
            parse: self.parse.load(Ordering::Relaxed),
            read: self.read.load(Ordering::Relaxed),
            diff: self.diff.load(Ordering::Relaxed),
        }
    }
}

tokio::task_local! {
    static TALLY: Arc<Tally>;
}

/// Runs `future` with `probe` counting what it does (on its own task; work it spawns onto
/// other tasks is counted where it is started, before the spawn).
pub async fn scope<F: Future>(probe: Arc<Tally>, future: F) -> F::Output {
    TALLY.scope(probe, future).await
}

/// Counts one `event` in the current scope, if any.
pub fn count(event: Event) {
    let _ = TALLY.try_with(|probe| probe.counter(event).fetch_add(1, Ordering::Relaxed));
}
