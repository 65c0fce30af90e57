//! The session's namespace keeper: `keel-sandbox keep SOCKET` (`keel_sandbox`'s `keeper`), a
//! child of Keel that holds a user namespace and makes each command's empty network namespace
//! ahead of time, so that creating one (about half a millisecond of the kernel's time) is off
//! the command's path. Started at a session's first command that has the network off, and again
//! at the next command when it was killed; one that exits on its own cannot serve here and is
//! not started again. A command that finds no keeper answering makes its own namespaces, as
//! before. Killed with the session; it exits when Keel does (its standard input, a pipe whose
//! other end Keel holds, ends).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The keeper's socket, in the session's sandbox directory (outside every command's root).
const SOCKET: &str = "keeper.sock";

#[derive(Debug, Default)]
pub(crate) struct Keeper {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    child: Option<std::process::Child>,
    /// A keeper exited on its own: it cannot serve on this machine (no user namespaces), and
    /// none is started again in this session.
    unavailable: bool,
}

impl Keeper {
    /// The keeper's socket for the next command, when one is running; otherwise starts one
    /// (with `helper` and its `prefix`, in `dir`) for the commands after this one, and returns
    /// `None`.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub(crate) fn socket(&self, helper: &Path, prefix: &[String], dir: &Path) -> Option<PathBuf> {
        use std::os::unix::process::CommandExt as _;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.unavailable {
            return None;
        }
        if let Some(running) = state.child.as_mut() {
            match running.try_wait() {
                Ok(None) => return Some(dir.join(SOCKET)),
                Ok(Some(status)) if status.code().is_some() => {
                    tracing::debug!(%status, "the namespace keeper cannot serve here");
                    state.unavailable = true;
                    return None;
                }
                _ => tracing::debug!("the namespace keeper is gone; starting another"),
            }
        }
        let socket = dir.join(SOCKET);
        let started = std::process::Command::new(helper)
            .args(prefix)
            .arg("keep")
            .arg(&socket)
            .env_clear()
            // Its end of file is Keel's end (the keeper then exits), however Keel ends.
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn();
        match started {
            Ok(started) => state.child = Some(started),
            Err(e) => tracing::debug!(error = %e, "the namespace keeper could not start"),
        }
        None
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(child) = state.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
