//! What a tool call's card shows: its final content (the diff, the output fenced, the exit
//! code, where the whole output is), a todo's plan, and text cut on character boundaries.

use agent_client_protocol::v1::schema::{
    PlanEntry, PlanEntryPriority, PlanEntryStatus, Terminal, ToolCallContent,
};
use keel_core::tool::{Artifact, Envelope, TodoPriority, TodoStatus};

use super::super::kinds::{self, ToolRef};
use super::{CallState, FINAL_OUTPUT};
use keel_core::tool::BundledTool;

/// `text` in a fenced block whose fence no line of `text` can close.
pub fn fenced(text: &str, language: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let newline = if text.ends_with('\n') || text.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("{fence}{language}\n{text}{newline}{fence}")
}

/// The last `limit` bytes of `text`, cut on a char boundary.
pub(super) fn tail(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The first `limit` bytes of `text`, cut on a char boundary.
pub(super) fn head(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A todo call's plan as a Markdown checklist (`- [x] Write the test`), from its plan artifact.
pub(super) fn plan_text(artifacts: &[Artifact]) -> Option<String> {
    let entries = artifacts.iter().find_map(|artifact| match artifact {
        Artifact::Plan { entries } => Some(entries),
        _ => None,
    })?;
    if entries.is_empty() {
        return Some("The plan is empty.".to_owned());
    }
    let mut text = String::new();
    for entry in entries {
        let mark = match entry.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Completed => "[x]",
        };
        let doing = if entry.status == TodoStatus::InProgress {
            " (in progress)"
        } else {
            ""
        };
        text.push_str(&format!("- {mark} {}{doing}\n", entry.content.trim()));
    }
    Some(text.trim_end().to_owned())
}

/// A plan entry of the engine as ACP's.
pub(super) fn plan_entry(entry: &keel_core::tool::PlanEntry) -> PlanEntry {
    let status = match entry.status {
        TodoStatus::Pending => PlanEntryStatus::Pending,
        TodoStatus::InProgress => PlanEntryStatus::InProgress,
        TodoStatus::Completed => PlanEntryStatus::Completed,
    };
    let priority = match entry.priority {
        TodoPriority::High => PlanEntryPriority::High,
        TodoPriority::Medium => PlanEntryPriority::Medium,
        TodoPriority::Low => PlanEntryPriority::Low,
    };
    PlanEntry::new(entry.content.clone(), priority, status)
}

/// The content of a finished call.
pub(super) fn final_content(call: &CallState, envelope: &Envelope) -> Vec<ToolCallContent> {
    let mut content = Vec::new();
    if let Some(terminal_id) = &call.terminal {
        content.push(ToolCallContent::Terminal(Terminal::new(
            terminal_id.clone(),
        )));
    }
    for artifact in &envelope.artifacts {
        if let Artifact::Diff(diff) = artifact {
            content.extend(kinds::diff_content(diff));
        }
    }
    // A call failed by Keel itself: the user sees the details the model was not given.
    if envelope.error_text.is_some()
        && let Some(report) = envelope.internal_error()
    {
        content.push(ToolCallContent::from(internal_error_text(report)));
        return content;
    }
    if let Some(error) = &envelope.error_text {
        content.push(ToolCallContent::from(error.clone()));
        return content;
    }
    if !content.is_empty() {
        return content;
    }
    let text = if call.output.is_empty() {
        envelope.text()
    } else {
        call.output.as_str()
    };
    if text.is_empty() {
        return content;
    }
    let mut shown = head(text, FINAL_OUTPUT).to_owned();
    let elided = text.len() - shown.len();
    match call.tool() {
        ToolRef::Locked(BundledTool::Todo) => {
            // The plan as text: a card with no content shows its raw output instead.
            if let Some(plan) = plan_text(&envelope.artifacts) {
                content.push(ToolCallContent::from(plan));
            }
            return content;
        }
        ToolRef::Locked(
            BundledTool::Bash | BundledTool::Read | BundledTool::Glob | BundledTool::Grep,
        ) => {
            let language = if matches!(call.tool(), ToolRef::Locked(BundledTool::Bash)) {
                "console"
            } else {
                ""
            };
            shown = fenced(&shown, language);
        }
        _ => {}
    }
    let exit_code = envelope
        .artifacts
        .iter()
        .find_map(|artifact| match artifact {
            Artifact::Exit { code } => *code,
            _ => None,
        })
        .filter(|code| *code != 0);
    if let Some(code) = exit_code {
        shown.push_str(&format!("\n\nExit code {code}"));
    }
    if elided > 0 || envelope.metadata.output_path.is_some() {
        let whole = envelope
            .metadata
            .output_path
            .as_deref()
            .map_or(String::new(), |path| {
                format!("; the whole output is in `{path}`")
            });
        shown.push_str(&format!("\n\n(output truncated{whole})"));
    }
    content.push(ToolCallContent::from(shown));
    content
}

/// What the user reads in a tool call's content when Keel itself failed during it.
pub(super) fn internal_error_text(report: &str) -> String {
    format!("Keel failed (not the model's call): {report}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agent_client_protocol::v1::schema::{Plan, ToolKind as AcpKind};

    use super::*;

    #[test]
    fn fences_outlast_backticks() {
        assert_eq!(fenced("ls", "console"), "```console\nls\n```");
        assert_eq!(fenced("a ``` b\n", ""), "````\na ``` b\n````");
    }

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(head("héllo", 2), "h");
    }

    fn call(tool_id: &str, output: &str) -> CallState {
        CallState {
            tool_id: tool_id.into(),
            title: String::new(),
            kind: AcpKind::Other,
            locations: Vec::new(),
            terminal: None,
            output: output.into(),
            last_flush: None,
            flush_scheduled: false,
        }
    }

    #[test]
    fn finished_calls_show_streamed_output_exit_codes_and_sidecars() {
        let output = keel_core::tool::ToolOutput {
            text: "head".into(),
            output_path: Some("/s/bash-output-0001.txt".into()),
            ..Default::default()
        }
        .with("exit_code", 2)
        .artifact(Artifact::Exit { code: Some(2) });
        let envelope = Envelope::from_result(Ok(output), Duration::ZERO);
        let content = final_content(&call("bash", "all of it\n"), &envelope);
        let wire = serde_json::to_value(&content).unwrap();
        assert_eq!(
            wire[0]["content"]["text"],
            "```console\nall of it\n```\n\nExit code 2\n\n(output truncated; the whole output is in `/s/bash-output-0001.txt`)"
        );
        // Nothing streamed: the envelope's text; tools other than the fenced ones as Markdown.
        let envelope = Envelope::from_result(
            Ok(keel_core::tool::ToolOutput::text("**done**")),
            Duration::ZERO,
        );
        let content = final_content(&call("task", ""), &envelope);
        assert_eq!(
            serde_json::to_value(&content).unwrap()[0]["content"]["text"],
            "**done**"
        );
        let content = final_content(&call("todo", ""), &envelope);
        assert!(content.is_empty());
    }

    #[test]
    fn todo_entries_become_plan_entries() {
        let entry = |content: &str, status, priority| keel_core::tool::PlanEntry {
            content: content.into(),
            status,
            priority,
            id: None,
        };
        let entries = [
            entry("Write the test", TodoStatus::Completed, TodoPriority::High),
            entry("Fix the bug", TodoStatus::InProgress, TodoPriority::Medium),
            entry("Ship", TodoStatus::Completed, TodoPriority::Low),
        ];
        let plan = Plan::new(entries.iter().map(plan_entry).collect());
        insta::assert_json_snapshot!(plan, @r#"
        {
          "entries": [
            {
              "content": "Write the test",
              "priority": "high",
              "status": "completed"
            },
            {
              "content": "Fix the bug",
              "priority": "medium",
              "status": "in_progress"
            },
            {
              "content": "Ship",
              "priority": "low",
              "status": "completed"
            }
          ]
        }
        "#);
    }
}
