//! `keel exec`: one headless turn on the same engine the editor uses.
//!
//! - [`ExecHost`]: the [`TurnHost`] of a run without a human. Every `ask` was already turned into
//!   a denial by the headless policy; `question` is answered with [`HEADLESS_QUESTION`] as a tool
//!   error. Progress (tool calls with their kind, diffs, command output, intermediate text) goes to
//!   stderr; the final answer to stdout. With `--json`, stdout carries one [`ExecEvent`] per line
//!   instead.
//! - [`exit_code`]: 0 when the turn ended normally and nothing was denied; 1 when a call was
//!   denied or the turn was cut short (max tokens, max requests, refusal, cancel); 2 for a
//!   configuration or model error (reported before or instead of the turn).

use std::io::{IsTerminal as _, Write as _};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_core::agent::{
    AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, CallStatus, QuestionItem, TurnHost,
    TurnOutcome, TurnStop,
};
use keel_core::tool::{Artifact, Envelope, PlanEntry, TodoStatus, ToolKind, ToolProgress};
use serde::Serialize;
use serde_json::Value;

use keel_core::agent::{AgentError, Engine, EnvLookup, Persistence, SessionOptions, UserContent};
use keel_core::config;
use tokio_util::sync::CancellationToken;

use crate::cli::style::Style;
use crate::cli::{EXIT_FAILED, EXIT_OK, ExecArgs, Failure, Outcome, load_config, workspace_or_cwd};

/// What the `question` tool gets in a headless run.
pub const HEADLESS_QUESTION: &str = "No one can answer questions in this headless run (keel \
     exec). Do not wait for an answer: proceed with your best judgement and state the \
     assumptions you made.";

/// One line of `keel exec --json` output. The schema is stable: fields are only ever added.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecEvent {
    /// Project settings left out because the project is not trusted (before `turn_started`;
    /// only when there are any): each "sets mode = yolo (.keel/config.toml:1:1)".
    IgnoredSettings {
        workspace: String,
        settings: Vec<String>,
    },
    /// The turn began.
    TurnStarted {
        model: String,
        mode: String,
        workspace: String,
    },
    /// A chunk of the assistant's text, as it streams.
    Text { text: String },
    /// A chunk of the model's reasoning, as it streams (when the model shows it).
    Thinking { text: String },
    /// Keel waits before asking the model again (a rate limit, an overloaded service): the
    /// status line also written to stderr.
    Waiting { text: String },
    /// The model called a tool.
    ToolCall {
        call_id: String,
        tool: String,
        kind: ToolKind,
        title: String,
        args: Value,
    },
    /// A call finished: `status` is `completed` or `failed`; `envelope` is what the model got.
    ToolResult {
        call_id: String,
        status: CallStatus,
        envelope: Envelope,
    },
    /// The todo list changed.
    Plan { entries: Vec<PlanEntry> },
    /// Context used by the latest model request, and the model's window.
    Usage { used: u64, size: u64 },
    /// The turn could not run or was cut off by an error (model, configuration).
    Error { message: String },
    /// The last line of every run.
    TurnFinished {
        stop_reason: Option<TurnStop>,
        exit_code: u8,
        denied_calls: usize,
        failed_calls: usize,
    },
}

/// The exit code of a finished turn.
pub fn exit_code(outcome: &TurnOutcome) -> u8 {
    if outcome.stop == TurnStop::EndTurn && outcome.denied_calls == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

#[derive(Debug, Default)]
struct HostState {
    /// Text since the last tool call: intermediate when a call follows, else the answer.
    pending_text: String,
    /// Calls whose output was streamed already (not repeated at the end).
    streamed: Vec<String>,
    /// Kinds of the calls seen, by call id.
    kinds: Vec<(String, ToolKind)>,
    /// Paths inside it are shown relative to it.
    workspace: Option<std::path::PathBuf>,
}

/// The headless host: progress to stderr (or JSON lines to stdout).
#[derive(Debug)]
pub struct ExecHost {
    json: bool,
    style: Style,
    state: Mutex<HostState>,
}

impl ExecHost {
    pub fn new(json: bool) -> Self {
        Self {
            json,
            style: Style::for_stream(std::io::stderr().is_terminal()),
            state: Mutex::new(HostState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes one JSON event line to stdout (`--json` only).
    pub fn emit(&self, event: &ExecEvent) {
        if !self.json {
            return;
        }
        match serde_json::to_string(event) {
            Ok(line) => {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
            Err(e) => tracing::error!("cannot encode an exec event: {e}"),
        }
    }

    /// Writes progress for a person to stderr (not in `--json` mode).
    fn progress(&self, text: &str) {
        if self.json || text.is_empty() {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }

    /// Flushes the text seen since the last call to stderr: a call follows, so it was not the
    /// answer.
    fn flush_intermediate_text(&self) {
        let text = std::mem::take(&mut self.state().pending_text);
        let text = text.trim();
        if !text.is_empty() {
            self.progress(&format!("{}\n", self.style.dim(text)));
        }
    }

    /// Ends the run: the answer to stdout (text mode) and the final JSON event.
    pub fn finish(&self, outcome: &TurnOutcome) -> u8 {
        let code = exit_code(outcome);
        if self.json {
            self.emit(&ExecEvent::TurnFinished {
                stop_reason: Some(outcome.stop),
                exit_code: code,
                denied_calls: outcome.denied_calls,
                failed_calls: outcome.failed_calls,
            });
        } else {
            let mut answer = outcome.final_text.trim_end().to_owned();
            if !answer.is_empty() {
                answer.push('\n');
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(answer.as_bytes());
                let _ = stdout.flush();
            }
            let mut summary = format!("stop reason: {}", stop_name(outcome.stop));
            if outcome.denied_calls > 0 {
                summary.push_str(&format!(", {} call(s) denied", outcome.denied_calls));
            }
            if outcome.failed_calls > 0 {
                summary.push_str(&format!(", {} call(s) failed", outcome.failed_calls));
            }
            self.progress(&format!("{}\n", self.style.dim(&summary)));
        }
        code
    }

    /// Reports an error that ends the run (exit code 2 unless told otherwise).
    pub fn fail(&self, message: &str, code: u8) {
        if self.json {
            self.emit(&ExecEvent::Error {
                message: message.to_owned(),
            });
            self.emit(&ExecEvent::TurnFinished {
                stop_reason: None,
                exit_code: code,
                denied_calls: 0,
                failed_calls: 0,
            });
        }
    }

    /// Shows paths inside the workspace relative to it.
    pub fn set_workspace(&self, workspace: &std::path::Path) {
        self.state().workspace = Some(workspace.to_path_buf());
    }

    fn shown_path(&self, path: &str) -> String {
        let state = self.state();
        state
            .workspace
            .as_ref()
            .and_then(|w| std::path::Path::new(path).strip_prefix(w).ok())
            .map_or_else(|| path.to_owned(), |rel| rel.display().to_string())
    }

    fn kind_of(&self, call_id: &str) -> Option<ToolKind> {
        self.state()
            .kinds
            .iter()
            .find(|(id, _)| id == call_id)
            .map(|(_, k)| *k)
    }

    fn show_result(&self, call_id: &str, status: CallStatus, envelope: &Envelope) {
        // A failure of Keel itself goes to stderr whole, even in `--json` mode (the model got a
        // neutral message; the events on stdout carry only that).
        if let Some(report) = envelope.internal_error() {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(
                stderr,
                "  {} Keel failed (not the model's call): {report}",
                self.style.red("✗")
            );
            let _ = stderr.flush();
            if envelope.error_text.is_some() {
                return;
            }
        }
        if let Some(error) = &envelope.error_text {
            let first = error.lines().next().unwrap_or_default();
            self.progress(&format!("  {} {first}\n", self.style.red("✗")));
            return;
        }
        let mut out = String::new();
        for artifact in &envelope.artifacts {
            if let Artifact::Diff(diff) = artifact {
                let shown = self.shown_path(&diff.path);
                out.push_str(&indent(&self.style.diff(
                    &shown,
                    diff.old_text.as_deref(),
                    &diff.new_text,
                )));
            }
        }
        let streamed = self.state().streamed.iter().any(|id| id == call_id);
        if self.kind_of(call_id) == Some(ToolKind::Execute) && !streamed {
            let text = envelope.text();
            let lines: Vec<&str> = text.lines().collect();
            for line in lines.iter().take(40) {
                out.push_str(&format!("  {}\n", self.style.dim(line)));
            }
            if lines.len() > 40 {
                out.push_str(&format!("  … {} more lines\n", lines.len() - 40));
            }
        }
        let mark = match status {
            CallStatus::Failed => self.style.red("✗"),
            _ => self.style.green("✓"),
        };
        out.push_str(&format!("  {mark}\n"));
        self.progress(&out);
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// The wire name of a stop reason (`end_turn`, `max_requests`, ...).
pub fn stop_name(stop: TurnStop) -> String {
    serde_json::to_value(stop)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{stop:?}"))
}

/// A plan entry as a line: `[x] write the tests`.
pub fn plan_line(entry: &PlanEntry) -> String {
    let mark = match entry.status {
        TodoStatus::Completed => "[x]",
        TodoStatus::InProgress => "[~]",
        TodoStatus::Pending => "[ ]",
    };
    format!("{mark} {}", entry.content)
}

impl TurnHost for ExecHost {
    fn event(&self, event: AgentEvent) {
        match event {
            AgentEvent::Text { text, .. } => {
                self.state().pending_text.push_str(&text);
                self.emit(&ExecEvent::Text { text });
            }
            AgentEvent::Thinking { text, .. } => self.emit(&ExecEvent::Thinking { text }),
            AgentEvent::Waiting { text } => {
                self.progress(&format!("{}\n", self.style.dim(text.trim_end())));
                self.emit(&ExecEvent::Waiting { text });
            }
            AgentEvent::ToolStatus { .. } | AgentEvent::SessionTitle { .. } => {}
            AgentEvent::Compacted { before, after, .. } => {
                tracing::info!(before, after, "the conversation was compacted");
            }
            AgentEvent::ToolCall {
                call_id,
                tool_id,
                kind,
                args,
                view,
            } => {
                self.flush_intermediate_text();
                let title = view.title;
                self.state().kinds.push((call_id.clone(), kind));
                self.progress(&format!(
                    "{} {} {}\n",
                    self.style.cyan("●"),
                    self.style.bold(&title),
                    self.style.dim(&format!("({})", kind.as_str()))
                ));
                self.emit(&ExecEvent::ToolCall {
                    call_id,
                    tool: tool_id,
                    kind,
                    title,
                    args,
                });
            }
            AgentEvent::ToolProgress { call_id, progress } => {
                if let ToolProgress::Output(chunk) = progress {
                    let mut state = self.state();
                    if !state.streamed.contains(&call_id) {
                        state.streamed.push(call_id);
                    }
                    drop(state);
                    self.progress(&self.style.dim(&chunk));
                }
            }
            AgentEvent::ToolResult {
                call_id,
                status,
                envelope,
            } => {
                self.show_result(&call_id, status, &envelope);
                self.emit(&ExecEvent::ToolResult {
                    call_id,
                    status,
                    envelope,
                });
            }
            AgentEvent::Plan { entries } => {
                let lines: String = entries
                    .iter()
                    .map(|e| format!("  {}\n", plan_line(e)))
                    .collect();
                self.progress(&format!("{}\n{lines}", self.style.bold("plan:")));
                self.emit(&ExecEvent::Plan { entries });
            }
            AgentEvent::Usage { used, size, .. } => {
                tracing::debug!(used, size, "context usage");
                self.emit(&ExecEvent::Usage { used, size });
            }
            // The ignored project settings were reported before the turn started.
            AgentEvent::Notice { text } => tracing::info!("{text}"),
            // A subagent's calls, one progress line each (its answer is the task's result).
            AgentEvent::Subagent { agent, event, .. } => {
                if let AgentEvent::ToolCall { view, .. } = *event {
                    let title = view.title;
                    self.progress(&format!("  {} {agent}: {title}\n", self.style.dim("↳")));
                }
            }
        }
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        // The headless policy never asks; if something does, nobody is there to say yes.
        tracing::warn!(
            tool = %request.tool_id,
            "a headless run was asked for approval; rejecting"
        );
        Box::pin(async { ApprovalAnswer::Answered(Answer::RejectOnce) })
    }

    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(
        &self,
        _questions: Vec<QuestionItem>,
    ) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(async { Err(HEADLESS_QUESTION.to_owned()) })
    }
}

/// Runs one prompt headless.
pub async fn run(args: ExecArgs) -> Outcome {
    let host = Arc::new(ExecHost::new(args.json));
    match run_turn(&args, host.clone()).await {
        Ok(code) => Ok(code),
        Err(failure) => {
            host.fail(&failure.message, failure.code);
            Err(failure)
        }
    }
}

async fn run_turn(args: &ExecArgs, host: Arc<ExecHost>) -> Outcome {
    let prompt = read_prompt(&args.prompt).await?;
    // A resumed session works in its stored workspace unless told otherwise.
    let stored_workspace = match (&args.resume, &args.workspace) {
        (Some(id), None) => {
            let (meta, _) = crate::cli::sessions_store()?
                .read(id)
                .map_err(Failure::usage)?;
            Some(meta.cwd)
        }
        _ => None,
    };
    let workspace = match stored_workspace {
        Some(workspace) => workspace,
        None => workspace_or_cwd(args.workspace.as_ref())?,
    };
    if !keel_core::runtime::probe::is_dir(&workspace) {
        return Err(Failure::usage(format!(
            "the workspace {} is not a directory",
            workspace.display()
        )));
    }
    let effective = load_config(Some(workspace.clone()), &args.overrides)?;
    let scratch = keel_core::runtime::scratch::temp_dir("keel-exec-")
        .map_err(|e| Failure::failed(format!("cannot create a scratch directory: {e}")))?;
    let env: EnvLookup = keel_core::config::credentials::lookup();
    let engine_config = config::engine_config(
        &effective,
        env,
        scratch.path().to_path_buf(),
        Some(&workspace),
    )
    .map_err(Failure::usage)?;
    let mut engine_config = engine_config;
    // Keel's own helper (`keel-sandbox` beside it, else itself) confines every command.
    engine_config.sandbox.set_keel(std::env::current_exe().ok());
    let engine = Engine::new(engine_config);
    let session = engine
        .open_session(SessionOptions {
            id: args.resume.clone(),
            roots: vec![workspace.clone()],
            interactive: false,
            persistence: match (&args.resume, engine.store()) {
                (Some(_), _) => Persistence::Reopen,
                (None, Some(_)) => Persistence::Create,
                (None, None) => Persistence::Off,
            },
            ..SessionOptions::default()
        })
        .map_err(Failure::usage)?;
    host.set_workspace(session.runtime().root());
    // The MCP servers start in the background; a headless run has one turn, whose first
    // request should offer their tools: wait until each is ready or has failed.
    let _ = tokio::time::timeout(
        keel_core::mcp::START_TIMEOUT + std::time::Duration::from_secs(1),
        session.mcp().settled(),
    )
    .await;
    let ignored = session.ignored_project_settings();
    if !ignored.is_empty() {
        host.progress(&keel_core::agent::trust_notice(
            &workspace.display().to_string(),
            &ignored,
        ));
        host.emit(&ExecEvent::IgnoredSettings {
            workspace: workspace.display().to_string(),
            settings: ignored,
        });
    }
    host.emit(&ExecEvent::TurnStarted {
        model: session.model_name(),
        mode: session.policy().mode().to_string(),
        workspace: workspace.display().to_string(),
    });
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let result = session
        .run_turn(
            vec![UserContent::Text { text: prompt }],
            host.clone(),
            cancel,
        )
        .await;
    interrupt.abort();
    session.close();
    // A background command the model started ends with the run, checked gone.
    keel_core::runtime::jobs::stop_everywhere().await;
    let outcome = result.map_err(|e| match e {
        AgentError::Provider(_)
        | AgentError::NoModel(_)
        | AgentError::NoCredentials(_)
        | AgentError::Setup(_)
        | AgentError::Config(_)
        | AgentError::Store(_)
        | AgentError::ContextOverflow { .. }
        | AgentError::Compaction(_) => Failure::usage(e),
    })?;
    Ok(host.finish(&outcome))
}

/// The prompt: the argument, or stdin when it is `-`.
async fn read_prompt(argument: &str) -> Result<String, Failure> {
    let prompt = if argument == "-" {
        tokio::task::spawn_blocking(|| {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map(|_| text)
        })
        .await
        .map_err(|e| Failure::failed(format!("cannot read the prompt: {e}")))?
        .map_err(|e| Failure::usage(format!("cannot read the prompt from stdin: {e}")))?
    } else {
        argument.to_owned()
    };
    if prompt.trim().is_empty() {
        return Err(Failure::usage("the prompt is empty"));
    }
    Ok(prompt)
}
