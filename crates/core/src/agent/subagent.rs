//! Subagents: what the `task` tool runs.
//!
//! A subagent is a child [`Session`] on the same engine with its own conversation. It is built
//! from its parent and can never be looser than it:
//!
//! - the parent's runtime (the same workspace scope, backends and sandbox);
//! - [`Policy::child`]: the parent's rules and headless flag, bound to the parent's live policy:
//!   every decision reads the parent's mode, trust and answers as they are then (a mode change or
//!   a "reject always" given after the child started reaches it, background children included)
//!   and applies the stricter of the two with the agent definition's own mode;
//! - a subset of the parent's tools (the definition's `tools`), and no `task` at
//!   [`MAX_DEPTH`];
//! - the parent call's cancel token, so the parent's cancel stops the child and what it runs; a
//!   background child is also stopped by the cancel of any later turn of the session
//!   (`Session::run_turn`), since background work belongs to the session.
//!
//! The child's events reach the parent's host as [`AgentEvent::Subagent`], its approvals and
//! questions go through the parent's host (named after the agent), so an editor shows them on
//! the parent's session and nothing waits on a channel nobody answers.
//!
//! Agent definitions are Markdown files with a front matter (`name`, `description`, `tools`,
//! `model`, `mode`) in `<config>/agents/`, and, once the project is trusted, in the project's
//! `.keel/agents/` and `.claude/agents/`. The body is the agent's instructions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::policy::{Mode, Policy};
use crate::runtime::{Runtime, config_files};
use crate::tool::view::{escaped, quoted};
use crate::tool::{
    Artifact, Envelope, Registry, SessionState, SubagentRequest, Subagents, ToolContext, ToolError,
    ToolOutput, head_of,
};
use crate::tools::task::{ID as TASK_TOOL_ID, TASK_RESULT_BYTES};

use super::session::{ModelSlot, Session};
use super::{
    AgentEvent, ApprovalAnswer, ApprovalRequest, CallStatus, QuestionItem, TurnHost, TurnStop,
    UserContent,
};
use crate::config::EngineConfig;
use crate::front_matter::front_matter;

/// How deep subagents nest: the top session is depth 0; a session at this depth has no `task`.
pub const MAX_DEPTH: u32 = 2;

/// The name a subagent without a definition goes by.
pub const GENERAL_AGENT: &str = "general";

// The project directories agent definitions are read from (after trust); defined beside the
// trust fingerprint that covers them.
use crate::policy::trust::PROJECT_AGENT_DIRS;

/// One agent definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    pub name: String,
    pub description: String,
    /// The tools it may use (a subset of its parent's); `None` for all of the parent's.
    pub tools: Option<Vec<String>>,
    /// `provider/model`; `None` (or `inherit`) for the parent's model.
    pub model: Option<String>,
    /// A mode; the child runs in the stricter of this and its parent's.
    pub mode: Option<Mode>,
    /// The agent's instructions (the file's body), given to the child before its task.
    pub instructions: String,
    /// Where it was read from.
    pub path: PathBuf,
}

fn one(fields: &HashMap<String, Vec<String>>, key: &str) -> Option<String> {
    fields
        .get(key)
        .map(|values| values.join(", "))
        .filter(|value| !value.is_empty())
}

/// Parses one agent definition; the name defaults to the file's stem.
// String error: the message names the file and what to fix, listed as is.
pub fn parse_agent(path: &Path, text: &str) -> Result<AgentDef, String> {
    let shown = path.display();
    let (fields, body) = front_matter(text).ok_or_else(|| {
        format!("{shown}: an agent definition starts with a `---` front matter block")
    })?;
    let name = one(&fields, "name")
        .or_else(|| {
            path.file_stem()
                .and_then(|stem| stem.to_str())
                .map(str::to_owned)
        })
        .ok_or_else(|| format!("{shown}: no `name`"))?;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "{shown}: the name `{name}` may only hold letters, digits, `-`, `_` and `.`"
        ));
    }
    let description =
        one(&fields, "description").ok_or_else(|| format!("{shown}: no `description`"))?;
    let tools = fields.get("tools").map(|values| {
        values
            .iter()
            .flat_map(|value| value.split(','))
            .map(|tool| tool.trim().to_owned())
            .filter(|tool| !tool.is_empty())
            .collect::<Vec<_>>()
    });
    let model = one(&fields, "model").filter(|model| model != "inherit");
    let mode = match one(&fields, "mode") {
        None => None,
        Some(mode) => Some(
            mode.parse::<Mode>()
                .map_err(|e| format!("{shown}: `mode`: {e}"))?,
        ),
    };
    Ok(AgentDef {
        name,
        description,
        tools,
        model,
        mode,
        instructions: body,
        path: path.to_path_buf(),
    })
}

/// The agent definitions of a workspace: the user's (`<config>/agents`), then the project's
/// when `trusted`. The first of a name wins; files that do not parse are logged and left out.
pub fn load_agents(config_dir: Option<&Path>, workspace: &Path, trusted: bool) -> Vec<AgentDef> {
    // Each directory with the project root when it is one of the project's.
    let mut dirs: Vec<(PathBuf, Option<&Path>)> = config_dir
        .map(|dir| (dir.join("agents"), None))
        .into_iter()
        .collect();
    if trusted {
        dirs.extend(
            PROJECT_AGENT_DIRS
                .iter()
                .map(|dir| (workspace.join(dir), Some(workspace))),
        );
    }
    let mut agents: Vec<AgentDef> = Vec::new();
    for (dir, project) in dirs {
        let files = match config_files::list_dir(&dir) {
            Ok(files) => files,
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot list agent definitions");
                continue;
            }
        };
        for path in files {
            if path.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            let read = match project {
                Some(root) => config_files::read_project_file(root, &path),
                None => config_files::read_if_exists(&path),
            };
            let text = match read {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot read an agent definition");
                    continue;
                }
            };
            match parse_agent(&path, &text) {
                Ok(agent) if agents.iter().all(|a| a.name != agent.name) => agents.push(agent),
                Ok(_) => {}
                Err(error) => tracing::warn!("{error}"),
            }
        }
    }
    agents
}

/// The project's agent definitions as the trust question lists them.
pub fn agents_waiting_for_trust(workspace: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for dir in PROJECT_AGENT_DIRS {
        for path in config_files::list_dir(&workspace.join(dir)).unwrap_or_default() {
            if path.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            let relative = path
                .strip_prefix(workspace)
                .unwrap_or(&path)
                .display()
                .to_string();
            let line = match config_files::read_project_file(workspace, &path) {
                Ok(text) => {
                    let name = text
                        .and_then(|text| parse_agent(&path, &text).ok())
                        .map_or_else(|| relative.clone(), |agent| agent.name);
                    format!("defines agent {} ({})", quoted(&name), quoted(&relative))
                }
                Err(error) => escaped(&format!("refuses the agent definition {relative}: {error}")),
            };
            lines.push(line);
        }
    }
    lines
}

/// The agents, one line each, for the `task` tool's description.
pub fn agents_listing(agents: &[AgentDef]) -> String {
    let mut out = String::from("\nAgents (`agent`):");
    for agent in agents {
        out.push_str(&format!("\n- {}: {}", agent.name, agent.description));
    }
    out
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One background run.
#[derive(Debug)]
struct BackgroundRun {
    agent: String,
    description: String,
    cancel: CancellationToken,
    result: Option<Result<String, ToolError>>,
    /// Its answer reached the model (by `wait`, by injection, or it was cancelled by `cancel`).
    delivered: bool,
}

/// A session's background subagents, by handle.
#[derive(Debug, Default)]
pub(super) struct Background {
    runs: Mutex<HashMap<String, BackgroundRun>>,
    next: AtomicU64,
    finished: tokio::sync::Notify,
}

impl Background {
    fn start(&self, agent: &str, description: &str, cancel: CancellationToken) -> String {
        let handle = format!("task-{}", self.next.fetch_add(1, Ordering::SeqCst) + 1);
        lock(&self.runs).insert(
            handle.clone(),
            BackgroundRun {
                agent: agent.to_owned(),
                description: description.to_owned(),
                cancel,
                result: None,
                delivered: false,
            },
        );
        handle
    }

    fn finish(&self, handle: &str, result: Result<String, ToolError>) {
        if let Some(run) = lock(&self.runs).get_mut(handle) {
            run.result = Some(result);
        }
        self.finished.notify_waiters();
    }

    fn unknown(&self, handle: &str) -> ToolError {
        let known: Vec<String> = lock(&self.runs).keys().cloned().collect();
        ToolError::NotFound(format!(
            "no background task `{handle}`{}",
            if known.is_empty() {
                String::new()
            } else {
                format!(" (known: {})", known.join(", "))
            }
        ))
    }

    async fn wait(&self, handle: &str, cancel: &CancellationToken) -> Result<String, ToolError> {
        loop {
            let notified = self.finished.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let known = {
                let mut runs = lock(&self.runs);
                match runs.get_mut(handle) {
                    Some(run) => {
                        if let Some(result) = &run.result {
                            run.delivered = true;
                            // Waited for, the run's failure is an outside one (its cause kept).
                            return result.clone().map_err(|error| {
                                ToolError::external_from(error.to_string(), error)
                            });
                        }
                        true
                    }
                    None => false,
                }
            };
            if !known {
                return Err(self.unknown(handle));
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ToolError::Cancelled),
                () = &mut notified => {}
            }
        }
    }

    fn cancel(&self, handle: &str) -> Result<String, ToolError> {
        let mut runs = lock(&self.runs);
        let Some(run) = runs.get_mut(handle) else {
            drop(runs);
            return Err(self.unknown(handle));
        };
        run.delivered = true;
        if run.result.is_some() {
            return Ok(format!("Background task `{handle}` had already finished."));
        }
        run.cancel.cancel();
        Ok(format!("Background task `{handle}` was cancelled."))
    }

    /// The answers of finished runs that have not reached the model yet, one text each.
    pub(super) fn take_finished(&self) -> Vec<String> {
        let mut runs = lock(&self.runs);
        let mut handles: Vec<&String> = runs
            .iter()
            .filter(|(_, run)| run.result.is_some() && !run.delivered)
            .map(|(handle, _)| handle)
            .collect();
        handles.sort();
        let handles: Vec<String> = handles.into_iter().cloned().collect();
        let mut texts = Vec::new();
        for handle in handles {
            let Some(run) = runs.get_mut(&handle) else {
                continue;
            };
            run.delivered = true;
            let body = match &run.result {
                Some(Ok(text)) => capped(text),
                Some(Err(error)) => format!("(failed) {error}"),
                None => continue,
            };
            texts.push(format!(
                "<task-result handle=\"{handle}\" agent=\"{}\" description=\"{}\">\n{body}\n\
                 </task-result>",
                run.agent, run.description
            ));
        }
        texts
    }

    /// Stops every run still going (the session closes).
    pub(super) fn cancel_all(&self) {
        for run in lock(&self.runs).values() {
            run.cancel.cancel();
        }
    }
}

/// A background answer as the model gets it: cut like any output.
fn capped(text: &str) -> String {
    let head = head_of(text, TASK_RESULT_BYTES);
    if head.len() == text.len() {
        text.to_owned()
    } else {
        format!(
            "{head}\n(answer truncated: {} of {} bytes shown)",
            head.len(),
            text.len()
        )
    }
}

/// The parent's host as a child sees it: events wrapped as [`AgentEvent::Subagent`], call ids
/// prefixed, approvals and questions asked on the parent's session naming the agent.
struct SubagentHost {
    parent: Arc<dyn TurnHost>,
    call_id: String,
    agent: String,
    /// The child's calls announced and not yet answered (unprefixed ids).
    open: std::sync::Mutex<Vec<String>>,
}

impl Drop for SubagentHost {
    /// A child dropped mid-call (its parent's cancel outlived the grace period) never answers
    /// its open calls: they are closed as failed here, so the editor shows none still running.
    fn drop(&mut self) {
        let open = std::mem::take(
            &mut *self
                .open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for call_id in open {
            self.event(AgentEvent::ToolStatus {
                call_id,
                status: CallStatus::Failed,
            });
        }
    }
}

impl SubagentHost {
    fn prefix(&self, id: &str) -> String {
        format!("{}/{id}", self.call_id)
    }

    fn prefixed(&self, event: AgentEvent) -> AgentEvent {
        match event {
            AgentEvent::ToolCall {
                call_id,
                tool_id,
                kind,
                args,
                view,
            } => AgentEvent::ToolCall {
                call_id: self.prefix(&call_id),
                tool_id,
                kind,
                args,
                view,
            },
            AgentEvent::ToolStatus { call_id, status } => AgentEvent::ToolStatus {
                call_id: self.prefix(&call_id),
                status,
            },
            AgentEvent::ToolProgress { call_id, progress } => AgentEvent::ToolProgress {
                call_id: self.prefix(&call_id),
                progress,
            },
            AgentEvent::ToolResult {
                call_id,
                status,
                envelope,
            } => AgentEvent::ToolResult {
                call_id: self.prefix(&call_id),
                status,
                envelope,
            },
            AgentEvent::Subagent {
                parent_call_id,
                agent,
                event,
            } => AgentEvent::Subagent {
                parent_call_id: self.prefix(&parent_call_id),
                agent,
                event: Box::new(self.prefixed(*event)),
            },
            other => other,
        }
    }
}

impl TurnHost for SubagentHost {
    fn event(&self, event: AgentEvent) {
        {
            let mut open = self
                .open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match &event {
                AgentEvent::ToolCall { call_id, .. } => open.push(call_id.clone()),
                AgentEvent::ToolResult { call_id, .. } => open.retain(|id| id != call_id),
                _ => {}
            }
        }
        self.parent.event(AgentEvent::Subagent {
            parent_call_id: self.call_id.clone(),
            agent: self.agent.clone(),
            event: Box::new(self.prefixed(event)),
        });
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        let mut request = request;
        request.call_id = self.prefix(&request.call_id);
        request.reason = format!("Subagent `{}`: {}", self.agent, request.reason);
        if !request.why.is_empty() {
            request.why = format!(
                "The subagent `{}` made this call. {}",
                self.agent, request.why
            );
        }
        self.parent.approve(request)
    }

    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        self.parent.ask(questions)
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        self.parent.ready()
    }

    fn call_finished(&self, call_id: &str, artifacts: &[Artifact]) {
        self.parent.call_finished(&self.prefix(call_id), artifacts);
    }
}

/// What a turn installs as its session's [`Subagents`]: everything needed to build children of
/// this session, and the turn's host.
pub(super) struct Runner {
    pub(super) session_id: String,
    pub(super) runtime: Runtime,
    pub(super) registry: Arc<Registry>,
    pub(super) policy: Arc<Policy>,
    pub(super) config: EngineConfig,
    pub(super) model: ModelSlot,
    pub(super) interactive: bool,
    pub(super) depth: u32,
    pub(super) background: Arc<Background>,
    pub(super) children: Arc<AtomicU64>,
    pub(super) host: Arc<dyn TurnHost>,
}

impl Runner {
    fn agents(&self) -> Vec<AgentDef> {
        load_agents(
            self.config.global_config_dir.as_deref(),
            self.runtime.root(),
            self.policy.trust().is_trusted(),
        )
    }

    /// Builds the child session for `agent` (`None`: general purpose).
    fn child(&self, agent: Option<&AgentDef>) -> Result<Session, ToolError> {
        let depth = self.depth + 1;
        let mut registry = Registry::new();
        for tool in self.registry.iter() {
            let id = tool.spec().id.as_str();
            if id == TASK_TOOL_ID && depth >= MAX_DEPTH {
                continue;
            }
            if let Some(allowed) = agent.and_then(|a| a.tools.as_ref())
                && !allowed.iter().any(|t| t == id)
            {
                continue;
            }
            registry
                .register(tool.clone())
                .map_err(|e| ToolError::internal("building a subagent's tools", e))?;
        }
        let policy = Arc::new(self.policy.child(agent.and_then(|a| a.mode)));
        let model = match agent.and_then(|a| a.model.as_deref()) {
            None => self.model.clone(),
            Some(name) => {
                let env = self.config.env.clone();
                let lookup = move |key: &str| env(key);
                let (provider, model) =
                    crate::provider::resolve_model(Some(name), &lookup, &self.config.providers)
                        .map_err(|e| {
                            ToolError::Unavailable(format!(
                                "the agent's model `{name}` is not available: {e}"
                            ))
                        })?;
                ModelSlot::ready(name.to_owned(), provider, model)
            }
        };
        let number = self.children.fetch_add(1, Ordering::SeqCst) + 1;
        let id = format!("{}.task-{number}", self.session_id);
        let state = SessionState::new(
            id.clone(),
            self.runtime.scratch_dir().join(format!("task-{number}")),
            self.config.limits.clone(),
            self.interactive,
        );
        let mut session = Session::new(
            id,
            None,
            self.runtime.clone(),
            Arc::new(state),
            Arc::new(registry),
            policy,
            Mutex::new(model),
            self.config.clone(),
        );
        session.depth = depth;
        session.trust_settled = AtomicBool::new(true);
        Ok(session)
    }
}

/// The child's first message: the agent's instructions, then the task.
fn child_prompt(agent: Option<&AgentDef>, prompt: &str) -> String {
    match agent {
        Some(agent) if !agent.instructions.is_empty() => format!(
            "<agent-instructions name=\"{}\">\n{}\n</agent-instructions>\n\n{prompt}",
            agent.name, agent.instructions
        ),
        _ => prompt.to_owned(),
    }
}

/// Runs a child's one turn to its final answer.
async fn run_child(
    session: Session,
    prompt: String,
    host: Arc<dyn TurnHost>,
    cancel: CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let outcome = session
        .run_turn(vec![UserContent::Text { text: prompt }], host, cancel)
        .await
        .map_err(|e| ToolError::external_from(format!("the subagent stopped: {e}"), e))?;
    session.background.cancel_all();
    let mut text = outcome.final_text.trim().to_owned();
    match outcome.stop {
        TurnStop::Cancelled => return Err(ToolError::Cancelled),
        TurnStop::MaxRequests => {
            text.push_str("\n(the subagent reached its request limit before finishing)");
        }
        TurnStop::MaxTokens => text.push_str("\n(the subagent's answer was cut at max tokens)"),
        TurnStop::Refusal => text.push_str("\n(the model refused)"),
        TurnStop::EndTurn => {}
    }
    if text.trim().is_empty() {
        text = "(the subagent finished without an answer)".into();
    }
    Ok(ToolOutput::text(text))
}

impl Subagents for Runner {
    fn run<'a>(
        &'a self,
        request: SubagentRequest,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            if self.depth >= MAX_DEPTH {
                return Err(ToolError::Unavailable(format!(
                    "subagent depth limit reached ({MAX_DEPTH}): do this task yourself"
                )));
            }
            let agents = self.agents();
            let agent = match &request.agent {
                None => None,
                Some(name) if name == GENERAL_AGENT => None,
                Some(name) => Some(agents.iter().find(|a| &a.name == name).ok_or_else(|| {
                    let known: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
                    ToolError::NotFound(format!(
                        "no agent `{name}`; the agents are: {}",
                        if known.is_empty() {
                            "(none defined; omit `agent`)".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ))
                })?),
            };
            let name = agent.map_or(GENERAL_AGENT, |a| a.name.as_str()).to_owned();
            let child = self.child(agent)?;
            let prompt = child_prompt(agent, &request.prompt);
            let host: Arc<dyn TurnHost> = Arc::new(SubagentHost {
                parent: self.host.clone(),
                call_id: ctx.call_id.clone(),
                agent: name.clone(),
                open: std::sync::Mutex::default(),
            });
            if !request.background {
                return run_child(child, prompt, host, ctx.cancel.clone())
                    .await
                    .map(|output| output.text);
            }
            // Stopped by the parent's cancel (its turn's token) or by `cancel`.
            let cancel = ctx.cancel.child_token();
            let handle = self
                .background
                .start(&name, &request.description, cancel.clone());
            let background = self.background.clone();
            let finished = handle.clone();
            let parent = self.host.clone();
            let call_id = ctx.call_id.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let result = run_child(child, prompt, host, cancel).await;
                let envelope = Envelope::from_result(result.clone(), started.elapsed());
                background.finish(&finished, result.map(|output| output.text));
                // The `task` call shows the answer once it is in (after it can be delivered).
                parent.event(AgentEvent::ToolResult {
                    call_id,
                    status: if envelope.is_error() {
                        CallStatus::Failed
                    } else {
                        CallStatus::Completed
                    },
                    envelope,
                });
            });
            Ok(format!(
                "Started subagent `{name}` in the background as `{handle}`. Its answer arrives \
                 in a later message; `task` with `wait: \"{handle}\"` waits for it."
            ))
        })
    }

    fn wait<'a>(
        &'a self,
        handle: &'a str,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move { self.background.wait(handle, &ctx.cancel).await })
    }

    fn cancel(&self, handle: &str) -> Result<String, ToolError> {
        self.background.cancel(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_definitions_parse_lists_and_defaults() {
        let text = "---\nname: explorer\ndescription: Finds code\ntools: [read, grep]\n\
                    mode: read-only\nmodel: inherit\n---\nSearch well.\n";
        let agent = parse_agent(Path::new("/a/explorer.md"), text).unwrap();
        assert_eq!(agent.name, "explorer");
        assert_eq!(agent.tools, Some(vec!["read".into(), "grep".into()]));
        assert_eq!(agent.mode, Some(Mode::ReadOnly));
        assert_eq!(agent.model, None);
        assert_eq!(agent.instructions, "Search well.");
        let text = "---\ndescription: \"Edits\"\ntools:\n  - read\n  - edit\n---\n";
        let agent = parse_agent(Path::new("/a/fixer.md"), text).unwrap();
        assert_eq!(agent.name, "fixer");
        assert_eq!(agent.description, "Edits");
        assert_eq!(agent.tools, Some(vec!["read".into(), "edit".into()]));
        let text = "---\nname: x\ndescription: d\ntools: read, bash\n---\n";
        let agent = parse_agent(Path::new("/a/x.md"), text).unwrap();
        assert_eq!(agent.tools, Some(vec!["read".into(), "bash".into()]));
    }

    #[test]
    fn bad_definitions_say_what_is_wrong() {
        let no_front = parse_agent(Path::new("/a/x.md"), "just text").unwrap_err();
        assert!(no_front.contains("front matter"), "{no_front}");
        let no_description =
            parse_agent(Path::new("/a/x.md"), "---\nname: x\n---\nbody").unwrap_err();
        assert!(no_description.contains("description"), "{no_description}");
        let bad_mode = parse_agent(
            Path::new("/a/x.md"),
            "---\nname: x\ndescription: d\nmode: loose\n---\n",
        )
        .unwrap_err();
        assert!(bad_mode.contains("mode"), "{bad_mode}");
        let bad_name = parse_agent(
            Path::new("/a/x.md"),
            "---\nname: ../x\ndescription: d\n---\n",
        )
        .unwrap_err();
        assert!(bad_name.contains("name"), "{bad_name}");
    }

    #[test]
    fn a_child_mode_is_never_looser() {
        assert_eq!(Mode::Allowlist.within(Mode::Yolo), Mode::Allowlist);
        assert_eq!(Mode::Allowlist.within(Mode::ReadOnly), Mode::ReadOnly);
        assert_eq!(Mode::Yolo.within(Mode::Ask), Mode::Ask);
        assert_eq!(Mode::ReadOnly.within(Mode::Yolo), Mode::ReadOnly);
        assert_eq!(Mode::ReadOnly.within(Mode::Allowlist), Mode::ReadOnly);
        // Neither is stricter: `read-only` would run reads `ask` asks about, `ask` changes
        // `read-only` refuses. The session's mode holds.
        assert_eq!(Mode::ReadOnly.within(Mode::Ask), Mode::Ask);
        assert_eq!(Mode::Ask.within(Mode::ReadOnly), Mode::ReadOnly);
    }
}
