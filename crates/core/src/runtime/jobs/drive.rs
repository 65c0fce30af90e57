//! A job's driver: reads a local command's output or polls the editor's pane until the
//! command ends, writes the sidecar, and records how it ended.

use std::path::PathBuf;
use std::sync::Arc;

use super::super::TerminalBackend;
use super::super::process::{
    CappedFile, DRAIN_GRACE, KILL_GRACE, READ_CHUNK, ShellProcess, Written, read_before,
    read_chunk, signal_name,
};
use super::super::sandbox::{self, Confinement, ConfinementCheck, ShellInvocation};
use super::{HELPER_WAIT, Job, JobState, lock};

/// How the sandbox helper says it confined a command that has just started: its status file,
/// read (not removed: [`ShellInvocation::confinement`] does that, with the put-back of git's
/// files, once the command is gone) when the helper has written it, within [`HELPER_WAIT`] or
/// until `exited` says the command ended.
pub(super) async fn started_confinement(
    invocation: &ShellInvocation,
    exited: impl FnMut() -> bool,
) -> Confinement {
    let Some(check) = &invocation.check else {
        // No helper runs it: the reason is known without one.
        return invocation.confinement();
    };
    check.status_written(HELPER_WAIT, exited).await;
    peek_status(check)
        .await
        .unwrap_or_else(|| Confinement::Unconfined {
            reason: "the sandbox helper did not confirm that it confined the command".into(),
        })
}

/// The helper's status line, once written: confined (with the nonce) or not.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub(super) async fn peek_status(check: &ConfinementCheck) -> Option<Confinement> {
    let text = tokio::fs::read_to_string(&check.status_file).await.ok()?;
    let status: serde_json::Value = serde_json::from_str(sandbox::status_line(&text)?).ok()?;
    if status.get("nonce").and_then(serde_json::Value::as_str) != Some(check.nonce.as_str()) {
        return Some(Confinement::Unconfined {
            reason: "the sandbox helper did not confirm that it confined the command".into(),
        });
    }
    let mechanism = status.get("mechanism")?.as_str()?.to_owned();
    let notes: Vec<String> = status
        .get("notes")
        .and_then(serde_json::Value::as_array)
        .map(|notes| {
            notes
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Some(if mechanism == "none" {
        Confinement::Unconfined {
            reason: format!(
                "no confinement is available on this machine ({})",
                notes.join("; ")
            ),
        }
    } else {
        Confinement::Confined {
            mechanism,
            notes,
            restored: Vec::new(),
        }
    })
}

/// Runs a local job to its end: output to the ring and the sidecar, until the command's process
/// exits or a stop; then the group is killed (what the command left running too) and checked.
pub(super) async fn drive_local(job: Arc<Job>, mut process: ShellProcess) {
    let mut sidecar = job.file.lock().await;
    let mut output = process.take_output();
    let mut buffer = vec![0_u8; READ_CHUNK];
    let mut stopped = false;
    loop {
        tokio::select! {
            biased;
            () = job.stop.cancelled() => {
                stopped = true;
                break;
            }
            read = read_chunk(&mut output, &mut buffer) => match read {
                Ok(0) => output = None,
                Ok(n) => {
                    // The sidecar first: a byte a read can see is already in the file.
                    sidecar.write(&job, &buffer[..n]).await;
                    job.push(&buffer[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(job = %job.id, error = %e, "reading a background command's output failed");
                    output = None;
                }
            },
            status = process.wait_leader() => {
                if let Err(e) = status {
                    tracing::warn!(job = %job.id, error = %e, "waiting for a background command failed");
                }
                break;
            }
        }
    }
    // Closing stdin first lets a well-behaved command end on its own (a write stuck on a full
    // pipe holds it: the kill ends that write).
    if let Ok(mut stdin) = job.stdin.try_lock() {
        *stdin = None;
    }
    process.kill_group().await;
    if process.status().is_none() {
        let _ = tokio::time::timeout(KILL_GRACE, process.wait_leader()).await;
    }
    if let Some(reader) = output.as_mut() {
        let until = tokio::time::Instant::now() + DRAIN_GRACE;
        while let Some(n) = read_before(reader, &mut buffer, until).await {
            sidecar.write(&job, &buffer[..n]).await;
            job.push(&buffer[..n]);
        }
    }
    sidecar.flush(&job).await;
    drop(sidecar);
    // Verified before the helper's files go.
    let gone = process.tree_gone().await;
    // Now that nothing of it runs: git's redirect files put back, the helper's files removed.
    job.restored(&process.confinement());
    if process.group_gone() {
        process.mark_finished();
    } else {
        tracing::warn!(job = %job.id, "a background command's process group outlived SIGKILL");
    }
    if !gone {
        tracing::warn!(job = %job.id, "Keel could not confirm that a background command's processes are gone");
    }
    let state = if stopped {
        JobState::Stopped { verified: gone }
    } else {
        use std::os::unix::process::ExitStatusExt as _;
        let status = process.status();
        JobState::Exited {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()).map(signal_name),
        }
    };
    tracing::debug!(job = %job.id, %state, "background command ended");
    job.finish(state);
}

/// Runs a pane job to its end: waits for the editor to report the exit, or kills it on a stop;
/// then takes the pane's last output and releases the terminal.
pub(super) async fn drive_pane(
    job: Arc<Job>,
    backend: Arc<dyn TerminalBackend>,
    terminal_id: String,
    invocation: ShellInvocation,
) {
    let mut stopped = false;
    let mut exit = None;
    tokio::select! {
        biased;
        () = job.stop.cancelled() => stopped = true,
        waited = backend.wait_exit(&terminal_id) => match waited {
            Ok(status) => exit = Some(status),
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "terminal/wait_for_exit failed");
                stopped = true;
            }
        },
    }
    let mut verified = true;
    if stopped {
        match backend.kill(&terminal_id).await {
            Ok(status) => exit = status,
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "terminal/kill failed");
                verified = false;
            }
        }
        verified = verified
            && exit.is_some()
            && match &invocation.check {
                Some(check) => check.wait_gone(KILL_GRACE).await,
                None => false,
            };
    }
    // What it printed last (the snapshot's exit status, if the kill's wait did not say).
    let last_exit = job.take_pane_output(backend.as_ref()).await;
    if exit.is_none() {
        exit = last_exit;
    }
    job.file.lock().await.flush(&job).await;
    backend.release(&terminal_id);
    job.restored(&invocation.confinement());
    let state = if stopped {
        JobState::Stopped { verified }
    } else {
        let exit = exit.unwrap_or_default();
        JobState::Exited {
            code: exit.code,
            signal: exit.signal,
        }
    };
    tracing::debug!(job = %job.id, %state, "background command in the pane ended");
    job.finish(state);
}

/// A job's sidecar file: created on the first byte, capped at [`SIDECAR_MAX_BYTES`]
/// (its faults and its cut noted in the job's output).
#[derive(Debug)]
pub(super) struct Sidecar {
    file: CappedFile,
    failed: bool,
}

impl Sidecar {
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            file: CappedFile::new(path),
            failed: false,
        }
    }

    pub(super) async fn write(&mut self, job: &Job, bytes: &[u8]) {
        if self.failed || bytes.is_empty() {
            return;
        }
        match self.file.write(bytes).await {
            Ok(written) => {
                let mut output = lock(&job.output);
                output.sidecar_written = true;
                if written == Written::Cut {
                    self.failed = true;
                    output.fault = Some(CappedFile::cut_note());
                }
            }
            Err(e) => self.fail(job, e),
        }
    }

    pub(super) async fn flush(&mut self, job: &Job) {
        if let Err(e) = self.file.flush().await {
            self.fail(job, e);
        }
    }

    fn fail(&mut self, job: &Job, error: std::io::Error) {
        self.failed = true;
        tracing::error!(job = %job.id, path = %self.file.path().display(), error = %error, "cannot keep a background command's whole output");
        lock(&job.output).fault = Some(
            "the whole output could not be saved (internal error in Keel; see the log)".to_owned(),
        );
    }
}
