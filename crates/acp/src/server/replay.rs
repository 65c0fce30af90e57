//! `session/load`'s replay: a stored session's history as the `session/update`s a client would
//! have seen, sent before the load is answered.
//!
//! Replayed events go through the same [`AcpTurnHost`] mapping as live ones, so a replayed tool
//! call has the kind, title, locations and final content (diffs included) it had live. What a
//! replay never carries: a terminal id (the terminal belonged to another client, or another
//! process; command output is replayed as text), live progress, or a permission prompt. A call
//! the log shows started but never finished (the process died mid-call) is closed as failed.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, EmbeddedResource, EmbeddedResourceResource, ImageContent,
    MessageId, SessionUpdate, TextResourceContents, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields,
};
use keel_core::agent::{AgentEvent, TurnHost, UserContent};
use keel_core::store::StoredEvent;
use keel_core::tool::{CallView, Describe, Location, Registry};
use tokio_util::sync::CancellationToken;

use super::host::{AcpTurnHost, HostShared};

/// A prompt block as the client sent it.
fn user_block(content: UserContent) -> ContentBlock {
    match content {
        UserContent::Text { text } => ContentBlock::from(text),
        UserContent::Image { media_type, data } => {
            ContentBlock::Image(ImageContent::new(data, media_type))
        }
        UserContent::Resource { uri, text } => ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(text, uri)),
        )),
    }
}

/// The title of a call recorded before titles were stored: what the bundled tool of that id
/// makes of the arguments, else the id.
fn recorded_title(
    shared: &HostShared,
    bundled: &mut Option<Option<Registry>>,
    tool_id: &str,
    args: &serde_json::Value,
) -> String {
    let registry = bundled.get_or_insert_with(|| keel_core::tools::bundled(&|_| None).ok());
    let Some(tool) = registry.as_ref().and_then(|registry| registry.get(tool_id)) else {
        return tool_id.to_owned();
    };
    let how = Describe {
        roots: &shared.roots.0,
    };
    tool.parse(args, how)
        .map_or_else(|_| tool.spec().title.clone(), |parsed| parsed.view.title)
}

/// Sends `events` as updates of the session `shared` describes.
pub fn replay(shared: &HostShared, events: Vec<StoredEvent>) {
    let host = Arc::new(AcpTurnHost::new(shared.clone(), CancellationToken::new()));
    let mut open_calls: Vec<String> = Vec::new();
    // The bundled tools, built once if an old log needs them for its titles.
    let mut bundled = None;
    let mut usage = None;
    let mut prompts = 0usize;
    for event in events {
        match event {
            StoredEvent::User { content } => {
                // A message id per prompt (the same on every load): a client never merges two
                // prompts with nothing between them into one.
                prompts += 1;
                let message_id = MessageId::new(format!("keel-user-{prompts}"));
                for block in content {
                    shared.send(SessionUpdate::UserMessageChunk(
                        ContentChunk::new(user_block(block)).message_id(message_id.clone()),
                    ));
                }
            }
            StoredEvent::Text { message_id, text } => {
                host.event(AgentEvent::Text { message_id, text });
            }
            StoredEvent::Thinking { message_id, text } => {
                host.event(AgentEvent::Thinking { message_id, text });
            }
            StoredEvent::ToolCall {
                call_id,
                tool_id,
                kind,
                args,
                title,
                locations,
            } => {
                open_calls.push(call_id.clone());
                let title =
                    title.unwrap_or_else(|| recorded_title(shared, &mut bundled, &tool_id, &args));
                let view = CallView {
                    title,
                    locations: locations
                        .into_iter()
                        .map(|(path, line)| Location { path, line })
                        .collect(),
                };
                host.event(AgentEvent::ToolCall {
                    call_id,
                    tool_id,
                    kind,
                    args,
                    view,
                });
            }
            StoredEvent::ToolResult {
                call_id,
                status,
                mut envelope,
                artifacts,
            } => {
                open_calls.retain(|open| *open != call_id);
                envelope.artifacts = artifacts;
                host.event(AgentEvent::ToolResult {
                    call_id,
                    status,
                    envelope,
                });
            }
            StoredEvent::Plan { entries } => host.event(AgentEvent::Plan { entries }),
            StoredEvent::Usage { used, size, cost } => usage = Some((used, size, cost)),
            StoredEvent::Permission { .. }
            | StoredEvent::Mode { .. }
            | StoredEvent::Model { .. }
            | StoredEvent::ThinkingBudget { .. }
            | StoredEvent::Message { .. }
            | StoredEvent::Compaction { .. }
            | StoredEvent::TurnEnd { .. } => {}
        }
    }
    for call_id in open_calls {
        shared.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            call_id,
            ToolCallUpdateFields::new().status(ToolCallStatus::Failed),
        )));
    }
    if let Some((used, size, cost)) = usage {
        host.event(AgentEvent::Usage { used, size, cost });
    }
}
