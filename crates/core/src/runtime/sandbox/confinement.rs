//! The helper's answer, read back by Keel: whether a command ran confined (the status line with
//! the command's nonce), what the guard put back, and whether a killed command is gone (the
//! guard process the helper names: the namespace's init, or the fallback's reaper).

use std::path::PathBuf;
use std::time::Duration;

use super::{GuardSnapshot, Status};

/// How a command ran, as far as Keel can confirm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// The helper confirmed (with the nonce) that it confined the program before it started.
    Confined {
        mechanism: String,
        notes: Vec<String>,
        /// Guarded files the command created or changed, and what Keel did ([`super::guard`]).
        restored: Vec<String>,
    },
    /// Not confined, or not confirmed.
    Unconfined { reason: String },
}

impl Confinement {
    pub fn is_confined(&self) -> bool {
        matches!(self, Confinement::Confined { .. })
    }

    /// `namespaces`, `landlock` or `unconfined`.
    pub fn label(&self) -> &str {
        match self {
            Confinement::Confined { mechanism, .. } => mechanism,
            Confinement::Unconfined { .. } => "unconfined",
        }
    }
}

/// The files of one confined command; [`ConfinementCheck::finish`] reads the status back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinementCheck {
    pub nonce: String,
    /// The profile's file, when it did not travel in [`super::PROFILE_ENV`].
    pub profile_file: Option<PathBuf>,
    pub status_file: PathBuf,
    /// The files other programs run, as they were before the command ([`super::guard`]): what it
    /// created or changed is put back once it is gone.
    pub guarded: GuardSnapshot,
    /// The FIFO the namespace's init says the command is done on ([`super::Profile::done_fifo`]),
    /// for a command Keel spawns itself.
    pub done_fifo: Option<PathBuf>,
}

impl ConfinementCheck {
    /// What the helper reported; removes the command's profile and status files.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub fn finish(&self) -> Confinement {
        let status = std::fs::read_to_string(&self.status_file);
        for file in self.profile_file.iter().chain(&self.done_fifo) {
            let _ = std::fs::remove_file(file);
        }
        let _ = std::fs::remove_file(&self.status_file);
        // The status is the JSON line; the helper adds lines of its own (the guard, `empty`, the
        // program's signal).
        let status: Option<Status> = status
            .ok()
            .and_then(|t| status_line(&t).and_then(|l| serde_json::from_str(l).ok()));
        let confinement = self.confirmed(status);
        self.guarded.release();
        confinement
    }

    fn confirmed(&self, status: Option<Status>) -> Confinement {
        match status {
            Some(status) if status.nonce == self.nonce && status.mechanism != "none" => {
                super::mask::saw_mechanism(&status.mechanism);
                Confinement::Confined {
                    restored: self.guarded.restore(status.mechanism == "namespaces"),
                    mechanism: status.mechanism,
                    notes: status.notes,
                }
            }
            Some(status) if status.nonce == self.nonce => Confinement::Unconfined {
                reason: format!(
                    "no confinement is available on this machine ({})",
                    status.notes.join("; ")
                ),
            },
            _ => Confinement::Unconfined {
                reason: "the sandbox helper did not confirm that it confined the command".into(),
            },
        }
    }
}

impl ConfinementCheck {
    /// How the program ended, from the line the namespace's init wrote to [`Self::done_fifo`]
    /// once it had ended and reaped every other process of its namespace: `Ok(exit code)` or
    /// `Err(signal)`. Taken only with this command's nonce, and only when the status file says
    /// the command ran under namespaces (where the FIFO is outside the command's view and init's
    /// descriptor out of its reach); `None` otherwise, and Keel waits for the helper's exit.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub fn done_ending(&self, line: &str) -> Option<Result<i32, i32>> {
        let ending = super::profile::parse_done_line(line, &self.nonce)?;
        let text = std::fs::read_to_string(&self.status_file).ok()?;
        let status: Status = serde_json::from_str(status_line(&text)?).ok()?;
        (status.nonce == self.nonce && status.mechanism == "namespaces").then_some(ending)
    }
}

/// The JSON status line of a helper's status file (the helper adds other lines: `guard PID`,
/// `empty`, `signal N`, in any order around it).
pub fn status_line(text: &str) -> Option<&str> {
    text.lines().find(|line| line.starts_with('{'))
}

/// What a helper's status file says about the end of a command's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GuardState {
    /// The process whose end means nothing of the command is left.
    pub(crate) guard: i32,
    /// The reaper checked that it has no descendant left (the fallback's proof).
    pub(crate) empty: bool,
    /// Under namespaces the guard is the namespace's init: its end is the proof.
    pub(crate) namespace: bool,
}

pub(crate) fn guard_state(text: &str, nonce: &str) -> Option<GuardState> {
    let status: Status = serde_json::from_str(status_line(text)?).ok()?;
    if status.nonce != nonce {
        return None;
    }
    let guard = text
        .lines()
        .find_map(|line| line.strip_prefix("guard "))
        .and_then(|pid| pid.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 1)?;
    Some(GuardState {
        guard,
        empty: text.lines().any(|line| line == "empty"),
        namespace: status.mechanism == "namespaces",
    })
}

/// Whether process `pid` is alive (not a zombie): `/proc/PID/stat`.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| {
            let state = rest.trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
    })
}

impl ConfinementCheck {
    /// Waits (up to `within`, or until `exited` says the command ended) until the helper has
    /// written its status line. Under the fallback the reaper writes it once the program's
    /// spawn has returned, so a program may already have answered (an MCP server its
    /// handshake) before it is there: read too early, the command would be reported unconfined.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn status_written(&self, within: Duration, mut exited: impl FnMut() -> bool) {
        let until = tokio::time::Instant::now() + within;
        let mut pause = Duration::from_millis(1);
        while !std::fs::read_to_string(&self.status_file)
            .is_ok_and(|text| status_line(&text).is_some())
            && !exited()
            && tokio::time::Instant::now() < until
        {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// Waits (up to `within`) until the helper's guard has ended, and returns whether Keel can
    /// confirm that nothing the command started is left: under namespaces the namespace's init
    /// has exited (the kernel lets it exit only once every other process of its namespace is
    /// gone); under the fallback the reaper has exited after writing `empty` (it found no
    /// descendant left, daemons that left the command's session included, this being a
    /// subreaper). `false` when the helper did not say (it was killed before it could, or a
    /// client ran something else): Keel then does not claim it.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub async fn wait_gone(&self, within: Duration) -> bool {
        let until = tokio::time::Instant::now() + within;
        let mut pause = Duration::from_millis(1);
        loop {
            let text = std::fs::read_to_string(&self.status_file).unwrap_or_default();
            match guard_state(&text, &self.nonce) {
                None => return false,
                Some(state) if !alive(state.guard) => {
                    if state.namespace {
                        return true;
                    }
                    // The reaper wrote `empty` before it exited, if it did: read once more.
                    let text = std::fs::read_to_string(&self.status_file).unwrap_or_default();
                    return guard_state(&text, &self.nonce).is_some_and(|state| state.empty);
                }
                Some(_) => {}
            }
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}
