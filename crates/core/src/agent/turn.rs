//! The turn loop: model request → streamed answer → tool calls → results → next request.

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::provider::{
    History, Message, ModelEvent, ModelRequest, Part, Provider, ProviderError, RetryNotice, Role,
    StopReason, ToolDefinition, Usage, observe_retries,
};
use crate::tools::skill::SessionSkills;
use crate::tools::tool_search::SessionToolIndex;

use super::call::Verdict;
use super::compact::estimate_history_tokens;
use super::record::RecordingHost;
use super::session::Session;
use super::{AgentError, AgentEvent, TurnHost, TurnOutcome, TurnStop, UserContent};
use crate::store::StoredEvent;

/// A tool call the model asked for.
#[derive(Debug, Clone)]
pub(super) struct RequestedCall {
    /// Keel's id of the call: unique in the session ([`Session::keel_call_id`]); what every
    /// event, prompt and log line names.
    pub(super) id: String,
    /// The id the model chose, kept only for the provider round-trip (the tool use in the
    /// history and its result). Models repeat ids; Keel never looks a call up by it.
    pub(super) model_id: String,
    pub(super) name: String,
    pub(super) input: Value,
    /// Set when the arguments were not a JSON object.
    pub(super) invalid: Option<String>,
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
        if self.registry.get(crate::tools::skill::ID).is_none() {
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
        let skills = SessionSkills::of(&self.state);
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
        let skills = SessionSkills::of(&self.state);
        if !skills.is_empty() && self.registry.get(crate::tools::skill::ID).is_some() {
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
                .find(|tool| tool.name == crate::tools::task::ID)
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
            self.state.private::<SessionToolIndex>().set_index(None);
            tools.extend(offered);
            return tools;
        }
        let current = self.state.private::<SessionToolIndex>().index();
        let same = current.as_ref().is_some_and(|index| {
            index.len() == extensions.len()
                && index
                    .ids()
                    .zip(extensions.iter())
                    .all(|(id, tool)| id == tool.spec().id)
        });
        if !same {
            self.state
                .private::<SessionToolIndex>()
                .set_index(Some(Arc::new(crate::tools::tool_search::index_of(
                    &extensions,
                ))));
        }
        if let Some(search) = self.registry.get(TOOL_SEARCH) {
            tools.push(ToolDefinition::of(search.spec()));
        }
        let selected = self.state.private::<SessionToolIndex>().selected();
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
        SessionSkills::set(&self.state, self.discover_skills());
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

    pub(super) fn tool_names(&self) -> String {
        self.tools()
            .iter()
            .map(|t| t.spec().id.clone())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The id of the locked tool that finds the extension tools a request left out.
const TOOL_SEARCH: &str = crate::tools::tool_search::ID;

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
    let (year, month, day) = crate::store::civil_from_days(i64::try_from(days).unwrap_or(0));
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(crate::store::civil_from_days(0), (1970, 1, 1));
        assert_eq!(crate::store::civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(crate::store::civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn user_content_merges_after_an_interrupted_turn() {
        let mut history = vec![Message::user_text("a")];
        crate::provider::push_merged(&mut history, Message::user_text("b"));
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].content.len(), 2);
        history.push(Message::assistant_text("x"));
        crate::provider::push_merged(&mut history, Message::user_text("c"));
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
