//! The turn loop: model request → streamed answer → tool calls → results → next request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::capability::Access;
use crate::policy::{Action, Answer, Call, PolicySearchGate};
use crate::provider::{
    History, Message, ModelEvent, ModelRequest, Part, Provider, ProviderError, RetryNotice, Role,
    StopReason, ToolDefinition, Usage, observe_retries,
};
use crate::tool::{
    Artifact, CallView, Describe, Envelope, ParsedCall, ProgressBudget, ProgressSink, Subject,
    ToolContext, ToolError, ToolKind,
};

use super::compact::estimate_history_tokens;
use super::record::RecordingHost;
use super::session::Session;
use super::{
    AgentError, AgentEvent, ApprovalAnswer, ApprovalRequest, CallStatus, TurnHost, TurnOutcome,
    TurnStop, UserContent,
};
use crate::store::StoredEvent;

/// How long a cancelled tool gets to wind down (kill its processes, answer) before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// A tool call the model asked for.
#[derive(Debug, Clone)]
struct RequestedCall {
    /// Keel's id of the call: unique in the session ([`Session::keel_call_id`]); what every
    /// event, prompt and log line names.
    id: String,
    /// The id the model chose, kept only for the provider round-trip (the tool use in the
    /// history and its result). Models repeat ids; Keel never looks a call up by it.
    model_id: String,
    name: String,
    input: Value,
    /// Set when the arguments were not a JSON object.
    invalid: Option<String>,
}

/// One streamed model response.
#[derive(Debug, Default)]
struct Response {
    parts: Vec<Part>,
    calls: Vec<RequestedCall>,
    text: String,
    usage: Option<Usage>,
    stop: Option<StopReason>,
    thinking: String,
}

impl Response {
    fn flush_thinking(&mut self, signature: Option<String>) {
        if !self.thinking.is_empty() || signature.is_some() {
            let text = std::mem::take(&mut self.thinking);
            self.parts.push(Part::Thinking { text, signature });
        }
    }

    fn push_text(&mut self, delta: &str) {
        self.flush_thinking(None);
        self.text.push_str(delta);
        if let Some(Part::Text(text)) = self.parts.last_mut() {
            text.push_str(delta);
        } else {
            self.parts.push(Part::Text(delta.to_owned()));
        }
    }

    /// Records a complete tool call in the message and in the calls to run.
    fn push_call(&mut self, id: String, name: String, input: Value, invalid: Option<String>) {
        self.flush_thinking(None);
        self.parts.push(Part::ToolUse {
            id: id.clone(),
            name: name.clone(),
            input: input.clone(),
        });
        self.calls.push(RequestedCall {
            model_id: id.clone(),
            id,
            name,
            input,
            invalid,
        });
    }

    fn message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.parts.clone(),
        }
    }
}

enum StreamEnd {
    Cancelled(Response),
    Failed(ProviderError),
}

/// The text of a prompt (its text blocks, joined).
fn prompt_text(prompt: &[UserContent]) -> String {
    prompt
        .iter()
        .filter_map(|content| match content {
            UserContent::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn user_parts(prompt: Vec<UserContent>) -> Vec<Part> {
    prompt
        .into_iter()
        .map(|content| match content {
            UserContent::Text { text } => Part::Text(text),
            UserContent::Image { media_type, data } => Part::Image { media_type, data },
            UserContent::Resource { uri, text } => {
                Part::Text(format!("<file uri=\"{uri}\">\n{text}\n</file>"))
            }
        })
        .collect()
}

impl Session {
    /// Adds a message to the model's view of the conversation (and to the store), merging a
    /// user message into a trailing one (after an interrupted turn) so roles keep alternating.
    fn remember(&self, history: &mut History, message: Message) {
        self.record(&StoredEvent::Message {
            message: message.clone(),
        });
        history.push_merged(message);
    }

    /// The skills this session may use: the user's, and the project's once it is trusted.
    pub fn discover_skills(&self) -> Vec<crate::skills::Skill> {
        if self
            .registry
            .get(crate::tools::skill::SKILL_TOOL_ID)
            .is_none()
        {
            return Vec::new();
        }
        crate::skills::discover(
            self.config.global_config_dir.as_deref(),
            self.runtime.root(),
            self.policy.trust().is_trusted(),
        )
    }

    /// A prompt whose first text is `/skill-name args` gets the skill's body in its place.
    async fn expand_skill_command(&self, mut prompt: Vec<UserContent>) -> Vec<UserContent> {
        let Some(UserContent::Text { text }) = prompt.first_mut() else {
            return prompt;
        };
        let skills = self.state.skills();
        match crate::skills::expand_command(text, &skills, &self.runtime).await {
            Some(Ok(expanded)) => *text = expanded,
            Some(Err(error)) => {
                *text = format!("{text}\n\n(The skill could not be loaded: {error})");
            }
            None => {}
        }
        prompt
    }

    /// The system prompt and the tool definitions of a request.
    async fn request_frame(&self, window: u64) -> (String, Vec<ToolDefinition>) {
        (self.system_text().await, self.request_tools(window))
    }

    /// The system prompt: Keel's, the instruction files, and the skills (one line each).
    async fn system_text(&self) -> String {
        let mut system = super::prompt::system_prompt(
            &self.runtime,
            &self.registry,
            &today(),
            self.config.global_config_dir.as_deref(),
        )
        .await;
        let skills = self.state.skills();
        if !skills.is_empty()
            && self
                .registry
                .get(crate::tools::skill::SKILL_TOOL_ID)
                .is_some()
        {
            system.push_str(&crate::skills::listing(&skills));
        }
        system
    }

    /// The agent definitions, read once per session and again only when the project's trust
    /// changed (it decides whether the project's definitions count).
    fn agents(&self) -> Arc<Vec<super::AgentDef>> {
        let trusted = self.policy.trust().is_trusted();
        let mut slot = self
            .agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*slot {
            Some((read_trusted, agents)) if *read_trusted == trusted => agents.clone(),
            _ => {
                let agents = Arc::new(super::load_agents(
                    self.config.global_config_dir.as_deref(),
                    self.runtime.root(),
                    trusted,
                ));
                *slot = Some((trusted, agents.clone()));
                agents
            }
        }
    }

    /// The tools a request offers. The bundled ones always; the extension (MCP) tools too while
    /// they fit their budget (at most `tool_search_max_tools`, and at most `tool_search_budget`
    /// of the window at 4 bytes a token). Past it they are indexed for `tool_search`, which is
    /// offered instead, and only the ones it found so far are sent.
    pub(super) fn request_tools(&self, window: u64) -> Vec<ToolDefinition> {
        let agents = self.agents();
        let mut tools = self
            .bundled_definitions
            .get_or_init(|| {
                self.registry
                    .specs()
                    .filter(|spec| !spec.unavailable && spec.id != TOOL_SEARCH)
                    .map(ToolDefinition::of)
                    .collect()
            })
            .clone();
        // The agents a `task` call may name, one line each.
        if !agents.is_empty()
            && let Some(task) = tools
                .iter_mut()
                .find(|tool| tool.name == crate::tools::task::TASK_TOOL_ID)
        {
            task.description.push_str(&super::agents_listing(&agents));
        }
        let extensions: Vec<_> = self
            .mcp
            .tools()
            .into_iter()
            .filter(|tool| !tool.spec().unavailable)
            .collect();
        let offered: Vec<ToolDefinition> = extensions
            .iter()
            .map(|tool| ToolDefinition::of(tool.spec()))
            .collect();
        let bytes: usize = offered
            .iter()
            .map(|d| {
                d.name.len() + d.description.len() + super::compact::json_len(&*d.input_schema)
            })
            .sum();
        let budget = (window as f64 * 4.0 * self.config.tool_search_budget) as usize;
        if offered.len() <= self.config.tool_search_max_tools && bytes <= budget {
            self.state.set_tool_index(None);
            tools.extend(offered);
            return tools;
        }
        let current = self.state.tool_index();
        let same = current.as_ref().is_some_and(|index| {
            index.len() == extensions.len()
                && index
                    .ids()
                    .zip(extensions.iter())
                    .all(|(id, tool)| id == tool.spec().id)
        });
        if !same {
            self.state
                .set_tool_index(Some(Arc::new(crate::tools::tool_search::index_of(
                    &extensions,
                ))));
        }
        if let Some(search) = self.registry.get(TOOL_SEARCH) {
            tools.push(ToolDefinition::of(search.spec()));
        }
        let selected = self.state.selected_tools();
        tools.extend(
            offered
                .into_iter()
                .filter(|definition| selected.contains(&definition.name)),
        );
        tools
    }

    /// `/compact [focus]`: summarizes the whole conversation so far into one message (waits
    /// for a running turn). `Ok(None)` when there is nothing to compact.
    pub async fn compact(
        &self,
        focus: Option<&str>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Result<Option<super::Compaction>, AgentError> {
        let slot = self.model_slot();
        let (provider, model) = slot.provider()?;
        let mut history = self.history.lock().await;
        let (system, tools) = self.request_frame(provider.context_window(&model)).await;
        self.compact_history(
            &mut history,
            0,
            focus,
            &provider,
            &model,
            &system,
            &tools,
            &host,
            &cancel,
        )
        .await
    }

    /// Runs one prompt turn to its end. Cancellation (the token) ends it promptly with
    /// [`TurnStop::Cancelled`], every tool call answered. Errors are the model's or the setup's;
    /// tool failures go back to the model and never end the turn.
    pub async fn run_turn(
        &self,
        prompt: Vec<UserContent>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let host: Arc<dyn TurnHost> = match &self.log {
            Some(log) => Arc::new(RecordingHost {
                inner: host,
                log: log.clone(),
            }),
            None => host,
        };
        self.tell_store_failure(host.as_ref());
        let first = self
            .log
            .as_ref()
            .is_some_and(|log| log.meta().title.is_none());
        let prompt_text = prompt_text(&prompt);
        // Background work belongs to the session: cancelling this turn also stops the
        // subagents earlier turns left running in the background.
        let watched = cancel.clone();
        let background = self.background.clone();
        let inner = self.run_turn_inner(prompt, host.clone(), cancel);
        tokio::pin!(inner);
        let outcome = tokio::select! {
            biased;
            outcome = &mut inner => outcome,
            () = watched.cancelled() => {
                background.cancel_all();
                inner.await
            }
        };
        // The turn may have ended on the cancel before the branch above saw it.
        if watched.is_cancelled() {
            background.cancel_all();
        }
        if let Ok(outcome) = &outcome {
            self.record(&StoredEvent::TurnEnd { stop: outcome.stop });
            // The first turn of a kept session: its model writes the title, in the background.
            if first
                && self.config.model_titles
                && self.depth == 0
                && outcome.stop == TurnStop::EndTurn
                && let Some(log) = &self.log
                && let Ok((provider, model)) = self.model_slot().resolved
            {
                super::title::spawn(
                    provider,
                    model,
                    prompt_text,
                    outcome.final_text.clone(),
                    log.clone(),
                    host,
                );
            }
        }
        outcome
    }

    async fn run_turn_inner(
        &self,
        prompt: Vec<UserContent>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let slot = self.model_slot();
        let (provider, _) = slot.provider()?;
        let mut history = self.history.lock().await;
        self.state
            .set_asker(Some(Arc::new(HostAsker(host.clone()))));
        if !self.settle_project_trust(&host, &cancel).await {
            return Ok(TurnOutcome {
                stop: TurnStop::Cancelled,
                final_text: String::new(),
                denied_calls: 0,
                failed_calls: 0,
            });
        }
        // Trusting the project may have switched the model to the project's.
        drop(provider);
        let (provider, model) = self.model_slot().provider()?;
        self.state
            .set_subagents(Some(Arc::new(super::subagent::Runner {
                session_id: self.id.clone(),
                runtime: self.runtime.clone(),
                registry: self.registry.clone(),
                policy: self.policy.clone(),
                config: self.config.clone(),
                model: self.model_slot(),
                interactive: self.state.interactive,
                depth: self.depth,
                background: self.background.clone(),
                children: self.children.clone(),
                host: host.clone(),
            })));
        self.record(&StoredEvent::User {
            content: prompt.clone(),
        });
        if let Some(title) = self
            .log
            .as_ref()
            .and_then(|log| log.title_from_prompt(&prompt))
        {
            host.event(AgentEvent::SessionTitle { title });
        }
        // The skills as trust now stands; `/name args` loads a skill into the prompt.
        self.state.set_skills(self.discover_skills());
        let prompt = self.expand_skill_command(prompt).await;
        self.remember(
            &mut history,
            Message {
                role: Role::User,
                content: user_parts(prompt),
            },
        );
        let system = self.system_text().await;
        let mut outcome = TurnOutcome {
            stop: TurnStop::EndTurn,
            final_text: String::new(),
            denied_calls: 0,
            failed_calls: 0,
        };
        for _ in 0..self.config.max_requests_per_turn {
            if cancel.is_cancelled() {
                outcome.stop = TurnStop::Cancelled;
                return Ok(outcome);
            }
            // Answers of background subagents join the next request.
            let finished = self.background.take_finished();
            if !finished.is_empty() {
                self.remember(
                    &mut history,
                    Message {
                        role: Role::User,
                        content: finished.into_iter().map(Part::Text).collect(),
                    },
                );
            }
            let window = provider.context_window(&model);
            // Tools `tool_search` found (or servers that became ready) join the next request.
            let tools = self.request_tools(window);
            // What the request weighs, estimated once (one counting pass over the history).
            let mut estimate = estimate_history_tokens(&system, &history, &tools);
            let ratio = *self
                .token_ratio
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut needed = (estimate as f64 * ratio).ceil() as u64;
            if needed as f64 > window as f64 * self.config.compact_at {
                let compacted = self
                    .compact_history(
                        &mut history,
                        1,
                        None,
                        &provider,
                        &model,
                        &system,
                        &tools,
                        &host,
                        &cancel,
                    )
                    .await;
                match compacted {
                    Ok(Some(compaction)) => {
                        estimate = compaction.after;
                        needed = (estimate as f64 * ratio).ceil() as u64;
                    }
                    Ok(None) => {}
                    Err(_) if cancel.is_cancelled() => {
                        outcome.stop = TurnStop::Cancelled;
                        return Ok(outcome);
                    }
                    Err(error) => return Err(error),
                }
            }
            if needed > window {
                return Err(AgentError::ContextOverflow { needed, window });
            }
            let request = ModelRequest {
                model: model.clone(),
                system: system.clone(),
                // The session's history, shared: the request holds it until its body is built.
                messages: History::clone(&history),
                tools,
                max_tokens: self.config.max_tokens,
                thinking_budget: self.thinking_budget(),
            };
            let message_id = uuid::Uuid::new_v4().to_string();
            let mut response = match stream_response(
                provider.as_ref(),
                request,
                &message_id,
                host.as_ref(),
                &cancel,
            )
            .await
            {
                Ok(response) => response,
                Err(StreamEnd::Cancelled(partial)) => {
                    if !partial.text.is_empty() {
                        self.remember(&mut history, Message::assistant_text(partial.text));
                    }
                    outcome.stop = TurnStop::Cancelled;
                    return Ok(outcome);
                }
                Err(StreamEnd::Failed(error)) => return Err(AgentError::Provider(error)),
            };
            if let Some(usage) = response.usage {
                let sent = estimate.max(1);
                *self
                    .token_ratio
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    (usage.input_tokens as f64 / sent as f64).clamp(1.0, 4.0);
                let cost = crate::provider::pricing::cost(provider.id(), &model, &usage);
                let cost = self
                    .spent
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .add(cost);
                host.event(AgentEvent::Usage {
                    used: usage.input_tokens + usage.output_tokens,
                    size: provider.context_window(&model),
                    cost,
                });
            }
            self.remember(&mut history, response.message());
            for call in &mut response.calls {
                call.id = self.keel_call_id(&call.model_id);
            }
            outcome.final_text = response.text.clone();
            if response.calls.is_empty() {
                outcome.stop = match response.stop {
                    Some(StopReason::MaxTokens) => TurnStop::MaxTokens,
                    Some(StopReason::Refusal) => TurnStop::Refusal,
                    _ => TurnStop::EndTurn,
                };
                return Ok(outcome);
            }
            let results = self
                .dispatch(&response.calls, &host, &cancel, &mut outcome)
                .await;
            self.remember(
                &mut history,
                Message {
                    role: Role::User,
                    content: results,
                },
            );
            if cancel.is_cancelled() {
                outcome.stop = TurnStop::Cancelled;
                return Ok(outcome);
            }
        }
        outcome.stop = TurnStop::MaxRequests;
        Ok(outcome)
    }

    /// Runs the calls of one response: read-only ones in parallel, mutating ones alone and in
    /// order (a fair read/write lock taken in the order the model asked). Results come back in
    /// call order, one per call.
    /// Keel's id for a call the model named `model_id`: the model's own id when it is a plain
    /// one (`[A-Za-z0-9_.:-]`, at most 64 bytes) this session has not used yet, else a fresh
    /// `call-N`, so no two calls of a session share an id whatever the model sends.
    fn keel_call_id(&self, model_id: &str) -> String {
        let plain = !model_id.is_empty()
            && model_id.len() <= 64
            && model_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
        let mut used = self
            .call_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if plain && used.insert(model_id.to_owned()) {
            return model_id.to_owned();
        }
        loop {
            let id = format!("call-{}", used.len() + 1);
            if used.insert(id.clone()) {
                return id;
            }
        }
    }

    async fn dispatch(
        &self,
        calls: &[RequestedCall],
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
        outcome: &mut TurnOutcome,
    ) -> Vec<Part> {
        let runs = calls.iter().map(|call| self.run_call(call, host, cancel));
        let finished = futures::future::join_all(runs).await;
        let mut parts = Vec::with_capacity(calls.len());
        for (call, (envelope, verdict)) in calls.iter().zip(finished) {
            match verdict {
                Verdict::Denied => outcome.denied_calls += 1,
                Verdict::Failed => outcome.failed_calls += 1,
                Verdict::Ran => {}
            }
            parts.push(Part::ToolResult {
                tool_use_id: call.model_id.clone(),
                content: envelope.for_model(),
                is_error: envelope.is_error(),
            });
        }
        parts
    }

    async fn run_call(
        &self,
        call: &RequestedCall,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> (Envelope, Verdict) {
        let started = Instant::now();
        // Another agent's name for a tool (`Read`, `shell`, opencode's `read {filePath}`): the
        // call runs as the canonical tool's, whose name and arguments everything below sees.
        let alias = self.alias_of(call);
        let call = alias.as_ref().map_or(call, |(aliased, _)| aliased);
        let tool = self.tool(&call.name);
        let spec = tool.as_ref().map(|t| t.spec());
        // The arguments are validated and deserialized once, here: the call's title and
        // locations come from the typed arguments, and the gates and the run use the same parse.
        let parsed = match (&tool, &call.invalid) {
            (Some(tool), None) => Some(tool.parse(
                &call.input,
                Describe {
                    roots: self.runtime.roots(),
                },
            )),
            _ => None,
        };
        let view = match &parsed {
            Some(Ok(parsed)) => parsed.view.clone(),
            _ => CallView {
                title: spec.map_or_else(|| call.name.clone(), |s| s.title.clone()),
                locations: Vec::new(),
            },
        };
        host.event(AgentEvent::ToolCall {
            call_id: call.id.clone(),
            tool_id: call.name.clone(),
            kind: spec.map_or(ToolKind::Other, |s| s.kind),
            args: call.input.clone(),
            view: view.clone(),
        });
        // Mutating calls (and unknown ones) run alone; read-only calls share the lock.
        let mutating = spec.is_none_or(|s| s.mutating);
        let _read_guard;
        let _write_guard;
        if mutating {
            _write_guard = self.tool_lock.write().await;
        } else {
            _read_guard = self.tool_lock.read().await;
        }
        let (result, verdict) = match tool {
            None => (
                Err(ToolError::NotFound(format!(
                    "unknown tool `{}`; the available tools are: {}",
                    call.name,
                    self.tool_names()
                ))),
                Verdict::Failed,
            ),
            Some(tool) => {
                self.gate_and_run(call, tool.as_ref(), parsed, view, host, cancel)
                    .await
            }
        };
        let failed = result.is_err();
        let mut envelope = Envelope::from_result(result, started.elapsed());
        if let Some((_, deprecation)) = &alias {
            envelope.metadata.deprecation = Some(deprecation.clone());
        }
        if let Some(report) = envelope.internal_error() {
            // A failure of Keel itself (the call failed, or its output could not be kept whole):
            // the log and the user get the whole chain (the user through the envelope's
            // artifact), the model a neutral message.
            tracing::error!(
                call_id = %call.id,
                tool = %call.name,
                error = %report,
                "internal error during a tool call"
            );
        }
        for artifact in &envelope.artifacts {
            if let Artifact::Plan { entries } = artifact {
                host.event(AgentEvent::Plan {
                    entries: entries.clone(),
                });
            }
        }
        let status = if failed {
            CallStatus::Failed
        } else {
            CallStatus::Completed
        };
        host.event(AgentEvent::ToolResult {
            call_id: call.id.clone(),
            status,
            envelope: envelope.clone(),
        });
        host.call_finished(&call.id, &envelope.artifacts);
        let verdict = match verdict {
            Verdict::Ran if failed => Verdict::Failed,
            other => other,
        };
        (envelope, verdict)
    }

    /// Schema check (the parse), capability check on the subject resolved once, policy (with
    /// the watchdog), the call prepared once (its reads and preview), host approval, the run.
    async fn gate_and_run(
        &self,
        call: &RequestedCall,
        tool: &dyn crate::tool::DynTool,
        parsed: Option<Result<ParsedCall, ToolError>>,
        view: CallView,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> (Result<crate::tool::ToolOutput, ToolError>, Verdict) {
        if cancel.is_cancelled() {
            return (Err(ToolError::Cancelled), Verdict::Failed);
        }
        if let Some(error) = &call.invalid {
            return (
                Err(ToolError::InvalidArguments {
                    tool: call.name.clone(),
                    message: error.clone(),
                }),
                Verdict::Failed,
            );
        }
        let spec = tool.spec();
        let mut parsed = match parsed {
            Some(Ok(parsed)) => parsed,
            Some(Err(error)) => return (Err(error), Verdict::Failed),
            None => {
                return (
                    Err(ToolError::invariant(
                        "running a tool call",
                        format!("the arguments of `{}` were not parsed", call.name),
                    )),
                    Verdict::Failed,
                );
            }
        };
        if let Err(error) = self.check_subject(spec, &mut parsed, &call.input) {
            return (Err(error), Verdict::Denied);
        }
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let progress_budget = ProgressBudget::new(PROGRESS_BUDGET);
        let mut ctx = ToolContext {
            runtime: self.runtime.clone(),
            session: self.state.clone(),
            call_id: call.id.clone(),
            cancel: cancel.child_token(),
            progress: ProgressSink::bounded(progress_tx, progress_budget.clone()),
        };
        let policy_call = Call {
            spec,
            args: &call.input,
            runtime: &self.runtime,
        };
        let decision = if spec.subject == Subject::Paths {
            let files: Vec<(&str, &std::path::Path)> = parsed
                .paths
                .iter()
                .filter_map(|p| Some((p.user.as_str(), p.canonical.as_deref()?)))
                .collect();
            self.policy.decide_paths(&policy_call, &files)
        } else {
            self.policy
                .decide_resolved(&policy_call, parsed.subject.as_deref())
        };
        let asked = match decision.action {
            Action::Allow => false,
            Action::Deny => {
                let message = decision
                    .message_for_model()
                    .unwrap_or_else(|| decision.explanation.to_string());
                return (Err(ToolError::Denied(message)), Verdict::Denied);
            }
            Action::Ask => true,
        };
        if asked {
            if decision.hard_links.is_some() {
                // The prompt's preview (an edit's diff) is for the user, who is being asked
                // about exactly this file; the run gets the same permission once approved.
                ctx.runtime = ctx.runtime.allowing_linked_reads();
            }
            match tool.prepare(&mut parsed, &ctx).await {
                Ok(()) => {}
                // The model has not been allowed to see a hard-linked file: an error
                // built from its content must not reach it.
                Err(_) if decision.hard_links.is_some() => {
                    return (
                        Err(ToolError::Denied(format!(
                            "{} The change could not be prepared, so nothing was asked or \
                             written; `read` the file first (which asks).",
                            decision.explanation
                        ))),
                        Verdict::Failed,
                    );
                }
                // A call that would fail anyway (an edit whose old text is absent) is not
                // worth the user's attention: the model gets the error at once.
                Err(error) => return (Err(error), Verdict::Failed),
            }
            // The preview goes to the prompt; the prepared plan stays for the run.
            let preview = parsed
                .prepared
                .as_mut()
                .and_then(|prepared| prepared.preview.take());
            let request = ApprovalRequest {
                call_id: call.id.clone(),
                tool_id: call.name.clone(),
                kind: spec.kind,
                args: call.input.clone(),
                view,
                preview,
                reason: decision.explanation.to_string(),
                why: decision.explanation.cause.plain(),
                always_scope: decision.always_scope.clone(),
                unconfined: decision.unconfined,
            };
            let answer = tokio::select! {
                biased;
                _ = cancel.cancelled() => ApprovalAnswer::Cancelled,
                answer = host.approve(request) => answer,
            };
            let remembered = match answer {
                ApprovalAnswer::Answered(answer) => answer,
                ApprovalAnswer::Cancelled => {
                    cancel.cancel();
                    return (Err(ToolError::Cancelled), Verdict::Denied);
                }
            };
            self.policy.remember(&decision, remembered);
            if matches!(remembered, Answer::RejectOnce | Answer::RejectAlways) {
                return (
                    Err(ToolError::Denied(
                        "The user rejected this tool call. Do not retry it as is; ask the user \
                         how to proceed or take another approach."
                            .into(),
                    )),
                    Verdict::Denied,
                );
            }
        }
        if decision.unconfined {
            // Allowed (by the user, or by an "always allow without the sandbox" answer for its
            // keys): this call's shell commands run unconfined, and only this call's.
            ctx.runtime = ctx.runtime.allowing_unconfined();
        }
        if decision.contained {
            // Nobody approved it: it runs where a misclassification costs nothing, from Keel's
            // rendering of what it analysed.
            let command = decision.raw_command.clone().unwrap_or_default();
            let script = decision.rendered.clone().unwrap_or_default();
            tracing::info!(%command, %script, "runs contained, as Keel rendered it");
            ctx.runtime = ctx.runtime.contained(&command, &script);
        }
        if self.policy.mode() == crate::policy::Mode::ReadOnly {
            // The mode now, not the mode the session opened with.
            ctx.runtime = ctx.runtime.with_read_only_commands();
        }
        // What the files a search finds may show is decided file by file, as reads.
        ctx.runtime = ctx.runtime.with_search_gate(Arc::new(PolicySearchGate::new(
            self.policy.clone(),
            spec.clone(),
        )));
        host.event(AgentEvent::ToolStatus {
            call_id: call.id.clone(),
            status: CallStatus::InProgress,
        });
        let forward = {
            let host = host.clone();
            let call_id = call.id.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                while let Some(progress) = progress_rx.recv().await {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => break,
                        () = host.ready() => {}
                    }
                    progress_budget.taken(&progress);
                    host.event(AgentEvent::ToolProgress {
                        call_id: call_id.clone(),
                        progress,
                    });
                }
            })
        };
        let timeout = self.config.tool_timeouts.get(&call.name).copied();
        // A call allowed without a prompt is prepared here, as part of its run.
        let result =
            run_with_cancel(tool, parsed, !asked, &ctx, cancel, timeout, spec.mutating).await;
        drop(ctx);
        let _ = forward.await;
        (result, Verdict::Ran)
    }

    /// The capability check on the call's subject, before the policy sees it. A path subject
    /// is resolved here, once; the policy and the tool use `parsed.subject`.
    fn check_subject(
        &self,
        spec: &crate::tool::ToolSpec,
        parsed: &mut ParsedCall,
        args: &Value,
    ) -> Result<(), ToolError> {
        match &spec.subject {
            Subject::Path(Some(_)) => {
                if let Some(path) = &parsed.subject_arg {
                    let access = if spec.mutating {
                        Access::Write
                    } else {
                        Access::Read
                    };
                    let canonical = self.runtime.resolve(path)?;
                    self.runtime.check(&canonical, access)?;
                    parsed.subject = Some(canonical);
                }
                Ok(())
            }
            Subject::Url(field) => {
                if let Some(url) = args.get(field).and_then(Value::as_str) {
                    let host = url::Url::parse(url)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_owned))
                        .ok_or_else(|| {
                            ToolError::BadArgument(format!(
                                "`{url}` is not an absolute http(s) URL"
                            ))
                        })?;
                    self.runtime.scope().check_host(&host)?;
                }
                Ok(())
            }
            Subject::Command(field) => {
                if let Some(command) = args.get(field).and_then(Value::as_str) {
                    self.runtime
                        .scope()
                        .check_command("bash", &["-c".to_owned(), command.to_owned()])?;
                }
                Ok(())
            }
            Subject::Paths => {
                for path in &mut parsed.paths {
                    let canonical = self.runtime.resolve(&path.user)?;
                    self.runtime.check(&canonical, Access::Write)?;
                    path.canonical = Some(canonical);
                }
                Ok(())
            }
            Subject::Path(None) | Subject::None | Subject::Query(_) => Ok(()),
        }
    }

    /// The call as the canonical tool's when it names another agent's tool (or uses another
    /// agent's argument names), with the `_deprecation` block its result carries.
    fn alias_of(&self, call: &RequestedCall) -> Option<(RequestedCall, crate::tool::Deprecation)> {
        if call.invalid.is_some() {
            return None;
        }
        let properties = |id: &str| -> Option<Vec<String>> {
            let tool = self.tool(id)?;
            Some(
                tool.spec()
                    .parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
            )
        };
        let resolved = crate::tools::aliases::resolve(&call.name, &call.input, &properties)?;
        let deprecation = resolved.deprecation();
        tracing::warn!(
            call_id = %call.id,
            alias = %call.name,
            tool = %resolved.alias.tool,
            agent = resolved.alias.agent.name(),
            "the model called another agent's tool name; ran the canonical tool"
        );
        let (input, invalid) = match resolved.input {
            Ok(input) => (input, None),
            Err(why) => (call.input.clone(), Some(why)),
        };
        Some((
            RequestedCall {
                id: call.id.clone(),
                model_id: call.model_id.clone(),
                name: resolved.alias.tool.to_owned(),
                input,
                invalid,
            },
            deprecation,
        ))
    }

    fn tool_names(&self) -> String {
        self.tools()
            .iter()
            .map(|t| t.spec().id.clone())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The id of the locked tool that finds the extension tools a request left out.
const TOOL_SEARCH: &str = "tool_search";

/// Lets the `question` tool reach the turn's host.
struct HostAsker(Arc<dyn TurnHost>);

impl crate::tool::Asker for HostAsker {
    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(
        &self,
        questions: Vec<super::QuestionItem>,
    ) -> futures::future::BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        self.0.ask(questions)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ran,
    Denied,
    Failed,
}

/// Runs a tool until it answers; on cancel the tool sees the token and gets a grace period to
/// stop its processes, then it is dropped (dropping kills what it spawned). A mutating tool that
/// finishes its work within the grace period reports what it did: the change happened, and the
/// model and the editor must see it (a read-only one that finished anyway is cancelled).
async fn run_with_cancel(
    tool: &dyn crate::tool::DynTool,
    mut call: ParsedCall,
    prepare: bool,
    ctx: &ToolContext,
    cancel: &CancellationToken,
    timeout: Option<Duration>,
    mutating: bool,
) -> Result<crate::tool::ToolOutput, ToolError> {
    let run = async move {
        if prepare {
            tool.prepare(&mut call, ctx).await?;
        }
        tool.run(call, ctx).await
    };
    let run = async {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, run)
                .await
                .unwrap_or(Err(ToolError::Timeout(limit))),
            None => run.await,
        }
    };
    tokio::pin!(run);
    tokio::select! {
        result = &mut run => result,
        _ = cancel.cancelled() => {
            match tokio::time::timeout(CANCEL_GRACE, &mut run).await {
                Ok(Ok(output)) if mutating => Ok(output),
                Ok(Ok(_)) | Err(_) => Err(ToolError::Cancelled),
                Ok(Err(error)) => Err(error),
            }
        }
    }
}

/// Live output of one tool call waiting for the front-end beyond which chunks are dropped from
/// the live view (never from the result or the sidecar).
const PROGRESS_BUDGET: usize = 4 * 1024 * 1024;

/// Streams one model response, forwarding text and thinking to the host as they come.
async fn stream_response(
    provider: &dyn Provider,
    request: ModelRequest,
    message_id: &str,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Response, StreamEnd> {
    let mut response = Response::default();
    // Retries inside the provider are said to the user while Keel waits.
    let (retries, mut retry_notices) = tokio::sync::mpsc::unbounded_channel();
    let observer: Arc<dyn Fn(RetryNotice) + Send + Sync> = Arc::new(move |notice| {
        let _ = retries.send(notice);
    });
    let opening = observe_retries(observer, provider.stream(request));
    tokio::pin!(opening);
    let mut stream = loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(StreamEnd::Cancelled(response)),
            Some(notice) = retry_notices.recv() => host.event(AgentEvent::Waiting {
                text: waiting_text(&notice),
            }),
            stream = &mut opening => break stream.map_err(StreamEnd::Failed)?,
        }
    };
    loop {
        // A front-end that cannot take more holds the stream here (see `TurnHost::ready`).
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(StreamEnd::Cancelled(response)),
            () = host.ready() => {}
        }
        let event = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(StreamEnd::Cancelled(response)),
            event = stream.next() => event,
        };
        let Some(event) = event else { break };
        match event.map_err(StreamEnd::Failed)? {
            ModelEvent::TextDelta(text) => {
                response.push_text(&text);
                host.event(AgentEvent::Text {
                    message_id: message_id.to_owned(),
                    text,
                });
            }
            ModelEvent::ThinkingDelta { text } => {
                response.thinking.push_str(&text);
                host.event(AgentEvent::Thinking {
                    message_id: message_id.to_owned(),
                    text,
                });
            }
            ModelEvent::ThinkingSignature(signature) => response.flush_thinking(Some(signature)),
            ModelEvent::RedactedThinking(data) => {
                response.flush_thinking(None);
                response.parts.push(Part::RedactedThinking { data });
            }
            ModelEvent::ToolCallStart { .. } | ModelEvent::ToolCallDelta { .. } => {}
            ModelEvent::ToolCallEnd {
                id, name, input, ..
            } => response.push_call(id, name, input, None),
            ModelEvent::ToolCallInvalid {
                id, name, error, ..
            } => response.push_call(id, name, Value::Object(serde_json::Map::new()), Some(error)),
            ModelEvent::Usage(usage) => response.usage = Some(usage),
            ModelEvent::Stop(stop) => response.stop = Some(stop),
        }
    }
    response.flush_thinking(None);
    Ok(response)
}

/// The status line for a retry: what failed, how long Keel waits, which attempt comes next.
pub(crate) fn waiting_text(notice: &RetryNotice) -> String {
    let why = match &notice.error {
        ProviderError::RateLimited { provider, .. } => {
            format!("{provider} is rate limiting requests (HTTP 429)")
        }
        ProviderError::Overloaded { provider, .. } => format!("{provider} is overloaded"),
        ProviderError::Unreachable {
            provider, base_url, ..
        } => format!("{provider} cannot be reached at {base_url}"),
        ProviderError::Http {
            provider, status, ..
        } => format!("{provider} answered HTTP {status}"),
        ProviderError::Timeout { provider, .. } => format!("{provider} stopped answering"),
        other => other.to_string(),
    };
    let seconds = notice.delay.as_secs_f64();
    let wait = if seconds < 1.0 {
        "a moment".to_owned()
    } else {
        format!("{} s", seconds.round())
    };
    format!(
        "{why}; waiting {wait} before trying again (attempt {} of {}).\n\n",
        notice.failed_attempt + 1,
        notice.max_attempts
    )
}

/// Today's date (UTC), for the system prompt.
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!("{year:04}-{month:02}-{day:02}")
}

/// Days since 1970-01-01 to a (year, month, day) in the proleptic Gregorian calendar.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn user_content_merges_after_an_interrupted_turn() {
        let mut history = vec![Message::user_text("a")];
        crate::store::push_merged(&mut history, Message::user_text("b"));
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].content.len(), 2);
        history.push(Message::assistant_text("x"));
        crate::store::push_merged(&mut history, Message::user_text("c"));
        assert_eq!(history.len(), 3);
    }

    #[test]
    fn thinking_is_flushed_before_text_and_tool_use() {
        let mut response = Response::default();
        response.thinking.push_str("hmm");
        response.push_text("hi");
        assert_eq!(
            response.parts,
            vec![
                Part::Thinking {
                    text: "hmm".into(),
                    signature: None
                },
                Part::Text("hi".into())
            ]
        );
    }
}
