//! [`ClientSession`]: one ACP session as the client knows it: the engine's [`AgentSession`], its
//! roots, its prompt lock and its terminals; runs prompt turns one at a time, cancels them,
//! switches modes and models, and answers slash commands.
//!
//! A turn runs on its own tokio task (so the engine never shares a poll with the connection's
//! dispatch loop); the spawned connection task that owns the prompt's responder waits for it and
//! answers after every update of the turn has been queued. Prompts of one session queue behind
//! each other. Each prompt gets its cancel token when it arrives (in the handler, before anything
//! is spawned), so a `session/cancel` right behind a prompt is never lost; it fires the tokens of
//! the running prompt and of any queued behind it, and a cancelled prompt always answers
//! `cancelled`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, ContentBlock, ContentChunk, CurrentModeUpdate, EmbeddedResourceResource,
    PromptResponse, SessionConfigOption, SessionUpdate, StopReason,
};
use keel_core::agent::{TurnOutcome, TurnStop, UserContent};
use keel_core::policy::{Mode, UnknownMode};
use tokio_util::sync::CancellationToken;

use super::commands::{self, SlashCommand};
use super::errors::ServerError;
use super::host::{AcpTurnHost, HostShared};
use super::modes;
use super::session_traits::{AgentSession, EngineError};

/// One session of the connection.
pub struct ClientSession {
    agent: Arc<dyn AgentSession>,
    shared: HostShared,
    /// The models offered: the configured ones, then those the providers list (added when they
    /// arrive).
    models: Mutex<Vec<String>>,
    /// The model a session answers with when none is chosen (marked as the default).
    default_model: Option<String>,
    /// Held for the length of a turn: prompts of a session run one after another.
    turns: tokio::sync::Mutex<()>,
    /// The tokens of the prompts received and not answered yet, by arrival number.
    prompts: Mutex<BTreeMap<u64, CancellationToken>>,
    next_prompt: AtomicU64,
    /// The slash commands: built in one place, sent whole.
    commands: Arc<CommandBoard>,
}

/// What the session's slash-command list is built from besides the engine session: the MCP
/// servers' prompts, and what was sent last. Every list is built and sent under its lock, so
/// two updates never race (the last one sent is built from the latest state), and none is sent
/// before the engine session is open (its skills are in the first list).
#[derive(Debug, Default)]
pub struct CommandBoard {
    state: Mutex<BoardState>,
    /// The session, once it exists (the MCP servers may report prompts before).
    session: std::sync::OnceLock<std::sync::Weak<ClientSession>>,
}

#[derive(Debug, Default)]
struct BoardState {
    /// The engine session finished opening (well or not): lists may be sent.
    open: bool,
    prompts: Vec<keel_core::mcp::McpPrompt>,
    sent: Option<Vec<agent_client_protocol::v1::schema::AvailableCommand>>,
}

impl CommandBoard {
    /// The MCP servers' prompts changed: the list is sent again (once the session is open).
    pub fn set_prompts(&self, prompts: Vec<keel_core::mcp::McpPrompt>) {
        lock(&self.state).prompts = prompts;
        if let Some(session) = self.session.get().and_then(std::sync::Weak::upgrade) {
            session.send_commands();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for ClientSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("id", &self.shared.session_id)
            .finish()
    }
}

/// The ACP stop reason of a turn.
pub fn stop_reason(stop: TurnStop) -> StopReason {
    match stop {
        TurnStop::EndTurn => StopReason::EndTurn,
        TurnStop::MaxTokens => StopReason::MaxTokens,
        TurnStop::MaxRequests => StopReason::MaxTurnRequests,
        TurnStop::Refusal => StopReason::Refusal,
        TurnStop::Cancelled => StopReason::Cancelled,
    }
}

/// The prompt as the engine reads it.
pub fn user_content(prompt: Vec<ContentBlock>) -> Result<Vec<UserContent>, ServerError> {
    let mut content = Vec::with_capacity(prompt.len());
    for block in prompt {
        match block {
            ContentBlock::Text(text) => content.push(UserContent::Text { text: text.text }),
            ContentBlock::Image(image) => content.push(UserContent::Image {
                media_type: image.mime_type,
                data: image.data,
            }),
            ContentBlock::Resource(resource) => match resource.resource {
                EmbeddedResourceResource::TextResourceContents(text) => {
                    content.push(UserContent::Resource {
                        uri: text.uri,
                        text: text.text,
                    });
                }
                EmbeddedResourceResource::BlobResourceContents(blob) => {
                    match blob.mime_type.filter(|mime| mime.starts_with("image/")) {
                        Some(mime) => content.push(UserContent::Image {
                            media_type: mime,
                            data: blob.blob,
                        }),
                        None => content.push(UserContent::Text {
                            text: format!("[attached binary file {} (not shown)]", blob.uri),
                        }),
                    }
                }
                _ => {
                    return Err(ServerError::InvalidParams(
                        "unsupported embedded resource".into(),
                    ));
                }
            },
            ContentBlock::ResourceLink(link) => content.push(UserContent::Text {
                text: format!("[{}]({})", link.name, link.uri),
            }),
            ContentBlock::Audio(_) => {
                return Err(ServerError::InvalidParams(
                    "audio prompts are not supported".into(),
                ));
            }
            _ => {
                return Err(ServerError::InvalidParams(
                    "unsupported prompt content".into(),
                ));
            }
        }
    }
    Ok(content)
}

impl ClientSession {
    pub fn new(
        agent: Arc<dyn AgentSession>,
        shared: HostShared,
        models: Vec<String>,
        default_model: Option<String>,
        commands: Arc<CommandBoard>,
    ) -> Arc<Self> {
        // A reopened session answers with its kept model; the default is still the default.
        let default_model = default_model.or_else(|| agent.model());
        let session = Arc::new(Self {
            agent,
            shared,
            models: Mutex::new(models),
            default_model,
            turns: tokio::sync::Mutex::new(()),
            prompts: Mutex::new(BTreeMap::new()),
            next_prompt: AtomicU64::new(0),
            commands,
        });
        let _ = session.commands.session.set(Arc::downgrade(&session));
        session
    }

    /// The whole slash-command list as it stands: Keel's commands (`/model` once there are
    /// models), the session's skills, the MCP servers' prompts.
    fn command_list(
        &self,
        prompts: &[keel_core::mcp::McpPrompt],
    ) -> Vec<agent_client_protocol::v1::schema::AvailableCommand> {
        let mut list = commands::available_with_skills(self.has_models(), &self.agent.skills());
        list.extend(prompts.iter().map(commands::prompt_command));
        list
    }

    /// Sends the slash-command list when the session is open and the list changed since it
    /// was last sent (built and sent under the board's lock: never two lists racing).
    pub fn send_commands(&self) {
        let mut board = lock(&self.commands.state);
        if !board.open {
            return;
        }
        let list = self.command_list(&board.prompts);
        if board.sent.as_ref() == Some(&list) {
            return;
        }
        board.sent = Some(list.clone());
        self.send(SessionUpdate::AvailableCommandsUpdate(
            agent_client_protocol::v1::schema::AvailableCommandsUpdate::new(list),
        ));
    }

    /// The engine session is open (or failed to open): the first list goes out.
    fn opened(&self) {
        lock(&self.commands.state).open = true;
        self.send_commands();
    }

    fn send(&self, update: SessionUpdate) {
        self.shared.send(update);
    }

    /// The complete config option list as it stands.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        let current = self.agent.model();
        let mut models = self.models();
        // The model that answers is always one of the choices.
        if let Some(current) = &current
            && !models.is_empty()
            && !models.contains(current)
        {
            models.insert(0, current.clone());
        }
        let mut options = modes::config_options_with_default(
            self.agent.mode(),
            current.as_deref(),
            &models,
            self.default_model.as_deref(),
        );
        if let Some(budget) = self.agent.thinking_budget() {
            options.push(modes::thinking_option(
                keel_core::config::Thinking::of_budget(budget),
            ));
        }
        options
    }

    /// Sets the thinking level (`off`, `low`, `medium`, `high`).
    pub fn set_thinking(&self, level: &str) -> Result<(), ServerError> {
        let level: keel_core::config::Thinking =
            level.parse().map_err(ServerError::InvalidParams)?;
        self.agent
            .set_thinking_budget(level.budget())
            .map_err(ServerError::from)
    }

    /// The models offered, as they stand.
    pub fn models(&self) -> Vec<String> {
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn has_models(&self) -> bool {
        !self
            .models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Adds the models a provider listed; when the list changed, tells the client (the model
    /// option, and the commands when `/model` just became available).
    pub fn add_models(&self, discovered: Vec<String>) {
        let (added, was_empty) = {
            let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
            let was_empty = models.is_empty();
            let mut added = false;
            if was_empty
                && !discovered.is_empty()
                && let Some(current) = self.agent.model()
            {
                models.push(current);
            }
            for model in discovered {
                if !models.contains(&model) {
                    models.push(model);
                    added = true;
                }
            }
            (added, was_empty)
        };
        if added {
            self.config_changed();
            if was_empty {
                self.send_commands();
            }
        }
    }

    pub fn mode(&self) -> Mode {
        self.agent.mode()
    }

    pub fn id(&self) -> &agent_client_protocol::v1::schema::SessionId {
        &self.shared.session_id
    }

    /// The stored history of a reopened session (taken once).
    pub fn take_history(&self) -> Vec<keel_core::store::StoredEvent> {
        self.agent.take_history()
    }

    /// Starts whatever the session does in the background (after `session/new` was answered).
    pub fn start(&self) {
        self.agent.start();
    }

    /// `session/load`: sends the stored history as updates, then the current mode, config
    /// options and title (all before the load is answered).
    pub fn replay(&self) {
        super::replay::replay(&self.shared, self.take_history());
        self.mode_changed(true);
        self.announce_title();
    }

    /// Sends the session's title, if it has one.
    pub fn announce_title(&self) {
        if let Some(title) = self.agent.title() {
            self.send(SessionUpdate::SessionInfoUpdate(
                agent_client_protocol::v1::schema::SessionInfoUpdate::new().title(title),
            ));
        }
    }

    /// Sends the slash commands as soon as the engine session is open: at once for a session
    /// reopened from the store (open before it is answered), when it opens for a new one.
    pub fn announce(self: &Arc<Self>) {
        if futures::FutureExt::now_or_never(self.agent.ready()).is_some() {
            self.opened();
            return;
        }
        let session = Arc::downgrade(self);
        let agent = self.agent.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // A session that cannot open still offers Keel's own commands.
                let _ = agent.ready().await;
                if let Some(session) = session.upgrade() {
                    session.opened();
                }
            });
        }
    }

    /// Switches the security mode (validated against the mode table first).
    pub fn set_mode(&self, mode: &str) -> Result<(), ServerError> {
        let mode: Mode = mode
            .parse()
            .map_err(|error: UnknownMode| ServerError::InvalidParams(error.to_string()))?;
        self.agent.set_mode(mode).map_err(ServerError::from)
    }

    /// Switches the model (one of the configured ones).
    pub fn set_model(&self, model: &str) -> Result<(), ServerError> {
        let models = self.models();
        if !models.iter().any(|known| known == model) {
            return Err(ServerError::InvalidParams(format!(
                "unknown model `{model}`; the models are {}",
                models.join(", ")
            )));
        }
        self.agent.set_model(model).map_err(ServerError::from)
    }

    /// Tells the client the mode changed (both the mode and the config option views).
    pub fn mode_changed(&self, config_too: bool) {
        self.send(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            self.agent.mode().as_str(),
        )));
        if config_too {
            self.config_changed();
        }
    }

    pub fn config_changed(&self) {
        self.send(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            self.config_options(),
        )));
    }

    /// Cancels the running turn and lets the engine clean up.
    pub fn close(&self) {
        self.cancel();
        self.agent.close();
    }

    /// Fires the cancel tokens of the running prompt and of the prompts queued behind it.
    pub fn cancel(&self) {
        for token in self
            .prompts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            token.cancel();
        }
    }

    /// Registers a prompt that just arrived; call from the request handler, before spawning.
    pub fn admit(self: &Arc<Self>) -> AdmittedPrompt {
        let number = self.next_prompt.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        self.prompts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(number, cancel.clone());
        AdmittedPrompt {
            session: self.clone(),
            number,
            cancel,
        }
    }

    /// A cancel stops the turn, not the background commands: says which keep running.
    fn say_jobs_survive(&self) {
        let running: Vec<String> = self
            .agent
            .jobs()
            .into_iter()
            .filter(|job| job.state.is_running())
            .map(|job| {
                format!(
                    "`{}` (`{}`)",
                    job.id,
                    job.command.lines().next().unwrap_or_default()
                )
            })
            .collect();
        if !running.is_empty() {
            self.say(format!(
                "Cancelled. The background commands keep running: {}. `/jobs` lists them; they \
                 stop when the session closes.",
                running.join(", ")
            ));
        }
    }

    fn say(&self, text: String) {
        self.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(text),
        )));
    }

    /// Answers a slash command locally.
    fn command(&self, command: SlashCommand) {
        let reply = match command {
            SlashCommand::Tools => commands::render_tools(&self.agent.tools()),
            SlashCommand::Permissions => self.agent.permissions(),
            SlashCommand::Mcp => self.agent.mcp_status(),
            SlashCommand::Jobs => commands::render_jobs(&self.agent.jobs()),
            SlashCommand::Help => commands::render_help(self.has_models()),
            // Answered in `run` (they call the model or wait for the turn).
            SlashCommand::Compact(_)
            | SlashCommand::Clear
            | SlashCommand::Init(_)
            | SlashCommand::McpPrompt { .. } => return,
            SlashCommand::Mode(None) => format!("The mode is `{}`.", self.agent.mode()),
            SlashCommand::Mode(Some(mode)) => match self.set_mode(&mode) {
                Ok(()) => {
                    self.mode_changed(true);
                    format!("Mode switched to `{}`.", self.agent.mode())
                }
                Err(error) => error.to_string(),
            },
            SlashCommand::Model(None) => match self.agent.model() {
                Some(model) => format!("The model is `{model}`."),
                None => "No model is selected.".into(),
            },
            SlashCommand::Model(Some(model)) => match self.set_model(&model) {
                Ok(()) => {
                    self.config_changed();
                    format!("Model switched to `{model}`.")
                }
                Err(error) => error.to_string(),
            },
        };
        self.say(reply);
    }

    async fn run_admitted(
        &self,
        prompt: Vec<ContentBlock>,
        cancel: CancellationToken,
    ) -> Result<StopReason, ServerError> {
        let _turn = self.turns.lock().await;
        if cancel.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
        self.run(prompt, cancel).await
    }
}

/// A prompt the session has registered; [`AdmittedPrompt::answer`] runs it and answers.
pub struct AdmittedPrompt {
    session: Arc<ClientSession>,
    number: u64,
    cancel: CancellationToken,
}

impl Drop for AdmittedPrompt {
    fn drop(&mut self) {
        self.session
            .prompts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.number);
    }
}

impl AdmittedPrompt {
    /// Runs the prompt to its end (after the prompts before it) and answers it. Meant to run in
    /// a spawned task; never fails the connection (a failed turn is a JSON-RPC error on the
    /// prompt).
    pub async fn answer(
        self,
        prompt: Vec<ContentBlock>,
        responder: Responder<PromptResponse>,
    ) -> Result<(), agent_client_protocol::Error> {
        let answer = self.session.run_admitted(prompt, self.cancel.clone()).await;
        let sent = match answer {
            Ok(stop) => responder.respond(PromptResponse::new(stop)),
            Err(error) => responder.respond_with_error(error.to_rpc()),
        };
        if let Err(error) = sent {
            tracing::debug!(error = %error.message, "prompt response not sent (connection closed)");
        }
        Ok(())
    }
}

impl ClientSession {
    async fn run(
        &self,
        prompt: Vec<ContentBlock>,
        cancel: CancellationToken,
    ) -> Result<StopReason, ServerError> {
        // The engine session may still be opening (session/new does not wait for it).
        let ready = tokio::select! {
            ready = self.agent.ready() => ready,
            () = cancel.cancelled() => return Ok(StopReason::Cancelled),
        };
        // The command list precedes the turn's updates.
        self.opened();
        if let Err(error) = ready {
            return Err(match error {
                EngineError::NoCredentials { message, .. } => ServerError::NoCredentials(message),
                EngineError::Config { message, data } => ServerError::Config {
                    message: format!("the session could not open: {message}"),
                    data,
                },
                EngineError::NotFound(id) => {
                    ServerError::Internal(format!("the session could not open: {id}"))
                }
                error @ (EngineError::InvalidInput(_) | EngineError::Failed(_)) => {
                    ServerError::Internal(format!("the session could not open: {error}"))
                }
            });
        }
        if let Some(SlashCommand::Compact(focus)) = SlashCommand::parse(&prompt) {
            let host = Arc::new(AcpTurnHost::new(self.shared.clone(), cancel.clone()));
            let reply = match self.agent.compact(focus, host, cancel.clone()).await {
                _ if cancel.is_cancelled() => return Ok(StopReason::Cancelled),
                Ok(Some((before, after))) => format!(
                    "Compacted the conversation: about {before} tokens of context became {after}."
                ),
                Ok(None) => "There is nothing to compact yet.".to_owned(),
                Err(error) => error.to_string(),
            };
            self.say(reply);
            return Ok(StopReason::EndTurn);
        }
        if let Some(SlashCommand::Clear) = SlashCommand::parse(&prompt) {
            let reply = match self.agent.clear().await {
                Ok(_) => "Started a new conversation: the model no longer sees what was said \
                          before. The mode, the model and the approvals of this session stay."
                    .to_owned(),
                Err(error) => error.to_string(),
            };
            self.say(reply);
            return Ok(StopReason::EndTurn);
        }
        // `/init` is a model turn with Keel's instruction prompt in place of the command; an MCP
        // prompt's text goes to the model in place of its command.
        let content = match SlashCommand::parse(&prompt) {
            Some(SlashCommand::Init(focus)) => {
                let mut text = commands::INIT_PROMPT.to_owned();
                if let Some(focus) = focus {
                    text.push_str(&format!("\n\nThe user adds: {focus}"));
                }
                user_content(vec![ContentBlock::from(text)])?
            }
            Some(SlashCommand::McpPrompt { command, arguments }) => {
                match self.agent.mcp_prompt(command, arguments).await {
                    Ok(text) => vec![UserContent::Text { text }],
                    Err(error) => {
                        self.say(error.to_string());
                        return Ok(StopReason::EndTurn);
                    }
                }
            }
            Some(command) => {
                self.command(command);
                return Ok(StopReason::EndTurn);
            }
            None => user_content(prompt)?,
        };
        let host = Arc::new(AcpTurnHost::new(self.shared.clone(), cancel.clone()));
        let agent = self.agent.clone();
        let turn_cancel = cancel.clone();
        // Trusting the project during the turn may change the mode or the model.
        let (mode_before, model_before) = (self.agent.mode(), self.agent.model());
        let joined =
            tokio::spawn(async move { agent.run_turn(content, host, turn_cancel).await }).await;
        if self.agent.mode() != mode_before {
            self.mode_changed(true);
        } else if self.agent.model() != model_before {
            self.config_changed();
        }
        // Trusting the project during the turn may have brought its skills.
        self.send_commands();
        self.shared
            .terminals
            .release_all(&self.shared.connection, &self.shared.session_id);
        let result: Result<TurnOutcome, EngineError> = joined.unwrap_or_else(|join| {
            Err(EngineError::failed(format!(
                "the turn stopped unexpectedly: {join}"
            )))
        });
        match result {
            _ if cancel.is_cancelled() => {
                self.say_jobs_survive();
                Ok(StopReason::Cancelled)
            }
            Ok(outcome) => Ok(stop_reason(outcome.stop)),
            Err(error) => {
                tracing::warn!(session = %self.shared.session_id, %error, "turn failed");
                Err(error.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        AudioContent, BlobResourceContents, EmbeddedResource, ImageContent, ResourceLink,
        TextContent, TextResourceContents,
    };

    #[test]
    fn prompt_blocks_become_user_content() {
        let prompt = vec![
            ContentBlock::Text(TextContent::new("look at this")),
            ContentBlock::Image(ImageContent::new("aGk=", "image/png")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///w/src/main.rs",
                )),
            )),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::BlobResourceContents(
                    BlobResourceContents::new("AAAA", "file:///w/a.bin")
                        .mime_type("application/octet-stream".to_owned()),
                ),
            )),
            ContentBlock::ResourceLink(ResourceLink::new("lib.rs", "file:///w/src/lib.rs")),
        ];
        let content = user_content(prompt).unwrap();
        assert_eq!(
            content,
            vec![
                UserContent::Text {
                    text: "look at this".into()
                },
                UserContent::Image {
                    media_type: "image/png".into(),
                    data: "aGk=".into()
                },
                UserContent::Resource {
                    uri: "file:///w/src/main.rs".into(),
                    text: "fn main() {}".into()
                },
                UserContent::Text {
                    text: "[attached binary file file:///w/a.bin (not shown)]".into()
                },
                UserContent::Text {
                    text: "[lib.rs](file:///w/src/lib.rs)".into()
                },
            ]
        );
        let audio = vec![ContentBlock::Audio(AudioContent::new("AAAA", "audio/wav"))];
        assert!(matches!(
            user_content(audio),
            Err(ServerError::InvalidParams(_))
        ));
    }
}
