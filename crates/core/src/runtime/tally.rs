//! A test hook that counts the work one tool call costs: path resolutions, argument parses,
//! file reads and diffs, and the opens and stats the runtime makes for it. Installed for a
//! future with [`scope`] (a task-local, so tests running side by side never see each other's
//! counts); without one, counting is a no-op. Work a call hands to other threads (a search's
//! walk) is counted there through [`current`] and [`within`].
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
    /// A file or directory opened by the runtime (`open`/`openat`, failed attempts included).
    Open,
    /// A `stat` of any kind (`fstat`, `fstatat`, `statx`, `lstat`) made by the runtime.
    Stat,
}

/// The counts of one [`scope`].
#[derive(Debug, Default)]
pub struct Tally {
    resolve: AtomicUsize,
    parse: AtomicUsize,
    read: AtomicUsize,
    diff: AtomicUsize,
    open: AtomicUsize,
    stat: AtomicUsize,
}

/// A snapshot of a [`Tally`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub resolve: usize,
    pub parse: usize,
    pub read: usize,
    pub diff: usize,
    pub open: usize,
    pub stat: usize,
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
            Event::Open => &self.open,
            Event::Stat => &self.stat,
        }
    }

    pub fn counts(&self) -> Counts {
        Counts {
            resolve: self.resolve.load(Ordering::Relaxed),
            parse: self.parse.load(Ordering::Relaxed),
            read: self.read.load(Ordering::Relaxed),
            diff: self.diff.load(Ordering::Relaxed),
            open: self.open.load(Ordering::Relaxed),
            stat: self.stat.load(Ordering::Relaxed),
        }
    }
}

tokio::task_local! {
    static TALLY: Arc<Tally>;
}

std::thread_local! {
    /// The tally of the call this thread works for ([`within`]).
    static THREAD_TALLY: std::cell::RefCell<Option<Arc<Tally>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `future` with `probe` counting what it does (on its own task; work it spawns onto
/// other tasks is counted where it is started, before the spawn).
pub async fn scope<F: Future>(probe: Arc<Tally>, future: F) -> F::Output {
    TALLY.scope(probe, future).await
}

/// The tally counting here (the task's scope, else the thread's [`within`]), to hand to
/// threads that work for the same call.
pub fn current() -> Option<Arc<Tally>> {
    TALLY
        .try_with(Arc::clone)
        .ok()
        .or_else(|| THREAD_TALLY.with(|slot| slot.borrow().clone()))
}

/// Runs `work` on this thread with `probe` counting what it does (a blocking task or a worker
/// thread of the call that took `probe` from [`current`]).
pub fn within<R>(probe: Option<Arc<Tally>>, work: impl FnOnce() -> R) -> R {
    let previous = THREAD_TALLY.with(|slot| slot.replace(probe));
    let result = work();
    THREAD_TALLY.with(|slot| *slot.borrow_mut() = previous);
    result
}

/// Counts one `event` in the current scope, if any.
pub fn count(event: Event) {
    if TALLY
        .try_with(|probe| probe.counter(event).fetch_add(1, Ordering::Relaxed))
        .is_err()
    {
        THREAD_TALLY.with(|slot| {
            if let Some(probe) = slot.borrow().as_ref() {
                probe.counter(event).fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}
