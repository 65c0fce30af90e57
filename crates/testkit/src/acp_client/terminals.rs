//! The test client's terminal pane: `terminal/create` runs the command as a real process, with
//! stdout and stderr merged into one buffer that keeps at most `outputByteLimit` bytes (oldest
//! output dropped first, on a character boundary), as an editor would.

#![expect(
    clippy::disallowed_methods,
    reason = "the test client plays the editor, which runs terminal commands itself"
)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalResponse, ReleaseTerminalResponse,
    TerminalExitStatus, TerminalOutputResponse, WaitForTerminalExitResponse,
};
use tokio::io::AsyncReadExt as _;
use tokio::sync::{oneshot, watch};

use super::lock;

/// One `terminal/*` call the agent made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "call")]
pub enum TerminalRecord {
    Create {
        terminal_id: String,
        command: String,
        args: Vec<String>,
        cwd: Option<PathBuf>,
        /// Variables the agent set, as (name, value).
        env: Vec<(String, String)>,
        output_byte_limit: Option<u64>,
        /// The process id of the command (to check it is gone after a kill).
        pid: Option<u32>,
    },
    Output {
        terminal_id: String,
    },
    Wait {
        terminal_id: String,
    },
    Kill {
        terminal_id: String,
    },
    Release {
        terminal_id: String,
    },
}

struct Buffer {
    text: String,
    truncated: bool,
    limit: Option<usize>,
}

impl Buffer {
    fn push(&mut self, bytes: &[u8]) {
        self.text.push_str(&String::from_utf8_lossy(bytes));
        if let Some(limit) = self.limit
            && self.text.len() > limit
        {
            let mut start = self.text.len() - limit;
            while !self.text.is_char_boundary(start) {
                start += 1;
            }
            self.text.drain(..start);
            self.truncated = true;
        }
    }
}

struct Terminal {
    buffer: Arc<Mutex<Buffer>>,
    exit: watch::Receiver<Option<TerminalExitStatus>>,
    kill: Mutex<Option<oneshot::Sender<()>>>,
}

/// The emulated terminals of one client.
#[derive(Default)]
pub struct Terminals {
    next: AtomicU64,
    open: Mutex<HashMap<String, Arc<Terminal>>>,
}

fn not_found(terminal_id: &str) -> Error {
    agent_client_protocol::v1::schema::Error::resource_not_found(Some(terminal_id.to_owned()))
        .into()
}

fn exit_status(status: std::process::ExitStatus) -> TerminalExitStatus {
    use std::os::unix::process::ExitStatusExt as _;
    let code = status.code().and_then(|code| u32::try_from(code).ok());
    let signal = status.signal().map(|signal| format!("signal {signal}"));
    TerminalExitStatus::new().exit_code(code).signal(signal)
}

async fn pump(mut stream: impl tokio::io::AsyncRead + Unpin, buffer: Arc<Mutex<Buffer>>) {
    let mut chunk = [0_u8; 8192];
    while let Ok(read) = stream.read(&mut chunk).await {
        if read == 0 {
            break;
        }
        lock(&buffer).push(&chunk[..read]);
    }
}

impl Terminals {
    fn get(&self, terminal_id: &str) -> Result<Arc<Terminal>, Error> {
        lock(&self.open)
            .get(terminal_id)
            .cloned()
            .ok_or_else(|| not_found(terminal_id))
    }

    /// Starts the command; returns the response and the record of the call.
    pub fn create(
        &self,
        request: &CreateTerminalRequest,
    ) -> Result<(CreateTerminalResponse, TerminalRecord), Error> {
        let terminal_id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let mut command = tokio::process::Command::new(&request.command);
        command
            .args(&request.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for variable in &request.env {
            command.env(&variable.name, &variable.value);
        }
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|error| {
            Error::internal_error().data(format!("cannot run {}: {error}", request.command))
        })?;
        let pid = child.id();
        let buffer = Arc::new(Mutex::new(Buffer {
            text: String::new(),
            truncated: false,
            limit: request
                .output_byte_limit
                .and_then(|limit| usize::try_from(limit).ok()),
        }));
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (exit_sender, exit) = watch::channel(None);
        let (kill, killed) = oneshot::channel::<()>();
        let pumped = buffer.clone();
        tokio::spawn(async move {
            let out = async {
                if let Some(stdout) = stdout {
                    pump(stdout, pumped.clone()).await;
                }
            };
            let err = async {
                if let Some(stderr) = stderr {
                    pump(stderr, pumped.clone()).await;
                }
            };
            let waited = async {
                tokio::select! {
                    status = child.wait() => status,
                    _ = killed => {
                        let _ = child.start_kill();
                        child.wait().await
                    }
                }
            };
            let (status, (), ()) = tokio::join!(waited, out, err);
            let status = status.map_or_else(|_| TerminalExitStatus::new(), exit_status);
            let _ = exit_sender.send(Some(status));
        });
        lock(&self.open).insert(
            terminal_id.clone(),
            Arc::new(Terminal {
                buffer,
                exit,
                kill: Mutex::new(Some(kill)),
            }),
        );
        let record = TerminalRecord::Create {
            terminal_id: terminal_id.clone(),
            command: request.command.clone(),
            args: request.args.clone(),
            cwd: request.cwd.clone(),
            env: request
                .env
                .iter()
                .map(|variable| (variable.name.clone(), variable.value.clone()))
                .collect(),
            output_byte_limit: request.output_byte_limit,
            pid,
        };
        Ok((CreateTerminalResponse::new(terminal_id), record))
    }

    pub fn output(&self, terminal_id: &str) -> Result<TerminalOutputResponse, Error> {
        let terminal = self.get(terminal_id)?;
        let (text, truncated) = {
            let buffer = lock(&terminal.buffer);
            (buffer.text.clone(), buffer.truncated)
        };
        let exit = terminal.exit.borrow().clone();
        Ok(TerminalOutputResponse::new(text, truncated).exit_status(exit))
    }

    /// Waits for the command to exit (run it in a spawned task: it can take long).
    pub async fn wait(&self, terminal_id: &str) -> Result<WaitForTerminalExitResponse, Error> {
        let mut exit = self.get(terminal_id)?.exit.clone();
        let status = exit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::internal_error().data("the terminal's process watcher ended"))?
            .clone()
            .unwrap_or_default();
        Ok(WaitForTerminalExitResponse::new(status))
    }

    pub fn kill(&self, terminal_id: &str) -> Result<KillTerminalResponse, Error> {
        let terminal = self.get(terminal_id)?;
        if let Some(kill) = lock(&terminal.kill).take() {
            let _ = kill.send(());
        }
        Ok(KillTerminalResponse::new())
    }

    pub fn release(&self, terminal_id: &str) -> Result<ReleaseTerminalResponse, Error> {
        let terminal = lock(&self.open)
            .remove(terminal_id)
            .ok_or_else(|| not_found(terminal_id))?;
        if let Some(kill) = lock(&terminal.kill).take() {
            let _ = kill.send(());
        }
        Ok(ReleaseTerminalResponse::new())
    }
}
