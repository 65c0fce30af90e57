//! [`ClientTerminals`]: a [`TerminalBackend`] that runs shell commands in the editor's terminal
//! pane (`terminal/*`), so the user watches the output live.
//!
//! A run creates the terminal (Keel's sandbox helper wrapping `bash -c COMMAND`, see
//! `keel_core::runtime::sandbox`, in the call's working directory, with the same
//! quiet environment as local runs, keeping at most the bash output cap), reports its id as progress (the tool call then embeds the terminal),
//! waits for the exit raced against the timeout and the cancel token, kills on either, and reads
//! the final output for the model. Releasing is left to the session's [`TerminalLedger`]: the
//! host releases a call's terminal after the call's final `tool_call_update`, and whatever is
//! left when the turn ends.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, EnvVariable, KillTerminalRequest, ReleaseTerminalRequest, SessionId,
    TerminalExitStatus, TerminalOutputRequest, WaitForTerminalExitRequest,
};
use futures::future::BoxFuture;
use keel_core::runtime::AccessError;
use keel_core::runtime::process::QUIET_ENV;
use keel_core::runtime::{
    TerminalBackend, TerminalExit, TerminalOutcome, TerminalRequest, TerminalSnapshot,
};
use keel_core::tool::{ProgressSink, ToolProgress};
use tokio_util::sync::CancellationToken;

/// How long to wait for the exit status after a kill before reading the output anyway.
const AFTER_KILL: Duration = Duration::from_secs(2);

/// The command's environment: [`QUIET_ENV`], and Keel's own model credentials blanked (ACP can
/// set variables but not remove them), as local runs drop them; then what the request itself
/// sets (`extra`, which wins over a quiet variable of the same name).
fn environment(extra: &[(String, String)]) -> Vec<EnvVariable> {
    let set = |name: &str| extra.iter().any(|(set, _)| set == name);
    QUIET_ENV
        .iter()
        .filter(|(name, _)| !set(name))
        .map(|(name, value)| EnvVariable::new(*name, *value))
        .chain(
            keel_core::runtime::secrets::scrub_list()
                .into_iter()
                .filter(|name| !set(name))
                .map(|name| EnvVariable::new(name, "")),
        )
        .chain(
            extra
                .iter()
                .map(|(name, value)| EnvVariable::new(name.clone(), value.clone())),
        )
        .collect()
}

/// The terminals a session created and has not released yet.
#[derive(Debug, Clone, Default)]
pub struct TerminalLedger {
    open: Arc<Mutex<BTreeSet<String>>>,
}

impl TerminalLedger {
    fn open(&self, terminal_id: &str) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(terminal_id.to_owned());
    }

    /// Releases a terminal (once; later calls for the same id do nothing). The release is
    /// queued after everything already sent on the connection.
    pub fn release(
        &self,
        connection: &ConnectionTo<Client>,
        session_id: &SessionId,
        terminal_id: &str,
    ) {
        let was_open = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(terminal_id);
        if was_open {
            connection
                .send_request(ReleaseTerminalRequest::new(
                    session_id.clone(),
                    terminal_id.to_owned(),
                ))
                .detach();
        }
    }

    /// Releases every terminal still open.
    pub fn release_all(&self, connection: &ConnectionTo<Client>, session_id: &SessionId) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(PoisonError::into_inner));
        for terminal_id in open {
            connection
                .send_request(ReleaseTerminalRequest::new(session_id.clone(), terminal_id))
                .detach();
        }
    }
}

/// The editor's terminal pane for one session.
pub struct ClientTerminals {
    connection: ConnectionTo<Client>,
    session_id: SessionId,
    ledger: TerminalLedger,
}

impl std::fmt::Debug for ClientTerminals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTerminals")
            .field("session_id", &self.session_id)
            .finish()
    }
}

impl ClientTerminals {
    pub fn new(
        connection: ConnectionTo<Client>,
        session_id: SessionId,
        ledger: TerminalLedger,
    ) -> Self {
        Self {
            connection,
            session_id,
            ledger,
        }
    }

    fn failed(&self, what: &str, error: agent_client_protocol::Error) -> AccessError {
        AccessError::External {
            message: format!(
                "the editor's terminal {what} failed: {}",
                super::errors::client_error_text(&error)
            ),
            source: Some(std::sync::Arc::new(error)),
        }
    }

    async fn kill_and_wait(&self, terminal_id: &str) {
        let kill = KillTerminalRequest::new(self.session_id.clone(), terminal_id.to_owned());
        if let Err(error) = self.connection.send_request(kill).block_task().await {
            tracing::warn!(terminal_id, error = %error.message, "terminal/kill failed");
        }
        let wait = WaitForTerminalExitRequest::new(self.session_id.clone(), terminal_id.to_owned());
        let waited = self.connection.send_request(wait).block_task();
        let _ = tokio::time::timeout(AFTER_KILL, waited).await;
    }

    /// Creates the terminal a command runs in: the sandbox helper wrapping `bash -c COMMAND`
    /// (or bash itself when the sandbox is off), so the pane shows the real output and the
    /// kernel still confines the command.
    async fn create(&self, request: &TerminalRequest) -> Result<String, AccessError> {
        let program = request.program.to_string_lossy().into_owned();
        let create = CreateTerminalRequest::new(self.session_id.clone(), program)
            .args(request.args.clone())
            .env(environment(&request.env))
            .cwd(request.cwd.clone())
            .output_byte_limit(u64::try_from(request.output_limit).unwrap_or(u64::MAX));
        let created = self
            .connection
            .send_request(create)
            .block_task()
            .await
            .map_err(|error| self.failed("create", error))?;
        Ok(created.terminal_id.to_string())
    }

    async fn output(&self, terminal_id: &str) -> Result<TerminalSnapshot, AccessError> {
        let output = TerminalOutputRequest::new(self.session_id.clone(), terminal_id.to_owned());
        let output = self
            .connection
            .send_request(output)
            .block_task()
            .await
            .map_err(|error| self.failed("output", error))?;
        Ok(TerminalSnapshot {
            output: output.output,
            truncated: output.truncated,
            exit: output.exit_status.map(exit),
        })
    }

    async fn wait(&self, terminal_id: &str) -> Result<TerminalExit, AccessError> {
        let wait = WaitForTerminalExitRequest::new(self.session_id.clone(), terminal_id.to_owned());
        let waited = self
            .connection
            .send_request(wait)
            .block_task()
            .await
            .map_err(|error| self.failed("wait", error))?;
        Ok(exit(waited.exit_status))
    }

    /// `terminal/kill`, then the exit the editor reports (bounded by [`AFTER_KILL`]).
    async fn kill_checked(&self, terminal_id: &str) -> Result<Option<TerminalExit>, AccessError> {
        let kill = KillTerminalRequest::new(self.session_id.clone(), terminal_id.to_owned());
        self.connection
            .send_request(kill)
            .block_task()
            .await
            .map_err(|error| self.failed("kill", error))?;
        match tokio::time::timeout(AFTER_KILL, self.wait(terminal_id)).await {
            Ok(Ok(status)) => Ok(Some(status)),
            Ok(Err(error)) => Err(error),
            Err(_) => Ok(None),
        }
    }

    async fn run_inner(
        &self,
        request: TerminalRequest,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> Result<TerminalOutcome, AccessError> {
        if cancel.is_cancelled() {
            return Err(AccessError::Cancelled);
        }
        let terminal_id = self.create(&request).await?;
        self.ledger.open(&terminal_id);
        progress.send(ToolProgress::Terminal(terminal_id.clone()));

        let wait = WaitForTerminalExitRequest::new(self.session_id.clone(), terminal_id.clone());
        let waited = self.connection.send_request(wait).block_task();
        let mut timed_out = false;
        let mut exit: Option<TerminalExitStatus> = None;
        tokio::select! {
            result = waited => match result {
                Ok(response) => exit = Some(response.exit_status),
                Err(error) => return Err(self.failed("wait", error)),
            },
            () = tokio::time::sleep(request.timeout) => {
                timed_out = true;
                self.kill_and_wait(&terminal_id).await;
            }
            () = cancel.cancelled() => {
                // Answer the cancel at once: the kill is queued (the helper's PID namespace takes
                // everything the command started with it) and the release follows it when the
                // turn ends, without waiting for a client that may never report the exit.
                let kill = KillTerminalRequest::new(self.session_id.clone(), terminal_id.clone());
                self.connection.send_request(kill).detach();
                return Err(AccessError::Cancelled);
            }
        }

        let output = TerminalOutputRequest::new(self.session_id.clone(), terminal_id.clone());
        let output = self
            .connection
            .send_request(output)
            .block_task()
            .await
            .map_err(|error| self.failed("output", error))?;
        let status = exit.or(output.exit_status).unwrap_or_default();
        Ok(TerminalOutcome {
            terminal_id,
            output: output.output,
            truncated: output.truncated,
            exit_code: status
                .exit_code
                .map(|code| i32::try_from(code).unwrap_or(i32::MAX)),
            signal: status.signal,
            timed_out,
        })
    }
}

fn exit(status: TerminalExitStatus) -> TerminalExit {
    TerminalExit {
        code: status
            .exit_code
            .map(|code| i32::try_from(code).unwrap_or(i32::MAX)),
        signal: status.signal,
    }
}

impl TerminalBackend for ClientTerminals {
    fn run<'a>(
        &'a self,
        request: TerminalRequest,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalOutcome, AccessError>> {
        Box::pin(self.run_inner(request, progress, cancel))
    }

    /// A background command's terminal: not in the ledger (a turn's end does not release it);
    /// the job releases it when it ends.
    fn start<'a>(&'a self, request: TerminalRequest) -> BoxFuture<'a, Result<String, AccessError>> {
        Box::pin(async move { self.create(&request).await })
    }

    fn snapshot<'a>(
        &'a self,
        terminal_id: &'a str,
    ) -> BoxFuture<'a, Result<TerminalSnapshot, AccessError>> {
        Box::pin(self.output(terminal_id))
    }

    fn wait_exit<'a>(
        &'a self,
        terminal_id: &'a str,
    ) -> BoxFuture<'a, Result<TerminalExit, AccessError>> {
        Box::pin(self.wait(terminal_id))
    }

    fn kill<'a>(
        &'a self,
        terminal_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TerminalExit>, AccessError>> {
        Box::pin(self.kill_checked(terminal_id))
    }

    fn release(&self, terminal_id: &str) {
        self.connection
            .send_request(ReleaseTerminalRequest::new(
                self.session_id.clone(),
                terminal_id.to_owned(),
            ))
            .detach();
    }
}
