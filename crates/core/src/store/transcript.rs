//! A stored session as Markdown (`keel sessions show`, `keel sessions export --format markdown`).

use std::fmt::Write as _;

use super::UserContent;
use super::{SessionMeta, StoredEvent};

/// Tool output shown per call, at most (characters).
const OUTPUT_CHARS: usize = 4_000;

fn fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

fn cut(text: &str) -> String {
    if text.chars().count() <= OUTPUT_CHARS {
        return text.to_owned();
    }
    let head: String = text.chars().take(OUTPUT_CHARS).collect();
    format!("{head}\n[... cut ...]")
}

/// What the user saw of the session, as Markdown: prompts, answers, tool calls with their
/// outcome and output, plans, mode and model changes. Thoughts and the model's own view are
/// left out.
pub fn markdown(meta: &SessionMeta, events: &[StoredEvent]) -> String {
    let mut out = String::new();
    let title = meta.title.as_deref().unwrap_or(&meta.id);
    let _ = writeln!(out, "# {title}\n");
    let _ = writeln!(out, "- session: `{}`", meta.id);
    let _ = writeln!(out, "- workspace: `{}`", meta.cwd.display());
    let _ = writeln!(out, "- created: {}", meta.created_at);
    if let Some(from) = &meta.forked_from {
        let _ = writeln!(out, "- forked from: `{from}`");
    }
    let mut speaker = "";
    let mut calls: Vec<(String, String)> = Vec::new();
    for event in events {
        match event {
            StoredEvent::User { content } => {
                let _ = write!(out, "\n## User\n\n");
                speaker = "user";
                for part in content {
                    match part {
                        UserContent::Text { text } => {
                            let _ = writeln!(out, "{text}");
                        }
                        UserContent::Image { media_type, .. } => {
                            let _ = writeln!(out, "[image, {media_type}]");
                        }
                        UserContent::Resource { uri, .. } => {
                            let _ = writeln!(out, "[attached {uri}]");
                        }
                    }
                }
            }
            StoredEvent::Text { text, .. } => {
                if speaker != "assistant" {
                    let _ = write!(out, "\n## Assistant\n\n");
                    speaker = "assistant";
                }
                out.push_str(text);
            }
            StoredEvent::ToolCall {
                call_id,
                tool_id,
                args,
                ..
            } => {
                calls.push((call_id.clone(), tool_id.clone()));
                let _ = write!(out, "\n\n**Tool `{tool_id}`** `{args}`\n");
                speaker = "tool";
            }
            StoredEvent::ToolResult {
                call_id,
                status,
                envelope,
                ..
            } => {
                let tool = calls
                    .iter()
                    .find(|(id, _)| id == call_id)
                    .map_or("tool", |(_, tool)| tool.as_str());
                let text = envelope.text().to_owned();
                let status = serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let _ = writeln!(out, "\n`{tool}` {status}:");
                if !text.is_empty() {
                    let text = cut(&text);
                    let fence = fence(&text);
                    let newline = if text.ends_with('\n') { "" } else { "\n" };
                    let _ = writeln!(out, "\n{fence}\n{text}{newline}{fence}");
                }
                speaker = "tool";
            }
            StoredEvent::Plan { entries } => {
                let _ = writeln!(out, "\n**Plan**\n");
                for entry in entries {
                    let status = match entry.status {
                        crate::tool::TodoStatus::Pending => "pending",
                        crate::tool::TodoStatus::InProgress => "in_progress",
                        crate::tool::TodoStatus::Completed => "completed",
                    };
                    let _ = writeln!(out, "- [{status}] {}", entry.content);
                }
                speaker = "plan";
            }
            StoredEvent::Mode { mode } => {
                let _ = writeln!(out, "\n*(mode: {mode})*");
            }
            StoredEvent::Model { model } => {
                let _ = writeln!(out, "\n*(model: {model})*");
            }
            StoredEvent::Compaction { before, after, .. } => {
                let _ = writeln!(
                    out,
                    "\n*(the conversation was compacted for the model: about {before} tokens became {after})*"
                );
            }
            StoredEvent::Thinking { .. }
            | StoredEvent::ThinkingBudget { .. }
            | StoredEvent::Permission { .. }
            | StoredEvent::Usage { .. }
            | StoredEvent::Message { .. }
            | StoredEvent::TurnEnd { .. } => {}
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}
