//! The `todo` tool: the session's task list, replaced whole on every call.
//!
//! - [`TodoTool`] / [`TodoParams`]: `todos`, a list of [`TodoItem`] (`content`, `status`,
//!   optional `priority`, `id`, `activeForm`), the shape of Claude Code's TodoWrite.
//!
//! The list is stored in the session ([`SessionState::set_todos`](crate::tool::SessionState)),
//! returned to the model as text, and to the front-end as an [`Artifact::Plan`]. More than one
//! item in progress is allowed but noted in the output.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::{
    Artifact, PlanEntry, Subject, Tool, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

const DESCRIPTION: &str = "\
Writes the session's todo list, replacing it whole (empty clears it). For work of several \
steps: mark one item `in_progress` before starting it and `completed` when done; add and drop \
steps as you go.";

pub use crate::tool::{TodoPriority, TodoStatus};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Todo.id();

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// In the imperative ("Run the tests").
    #[schemars(length(min = 1))]
    pub content: String,
    pub status: TodoStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<TodoPriority>,
    /// A stable id, if you keep one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Shown while in progress ("Running the tests").
    #[serde(
        rename = "activeForm",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub active_form: Option<String>,
}

/// Arguments of `todo`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoParams {
    /// The whole list.
    pub todos: Vec<TodoItem>,
}

/// `todo`: replace the session's todo list.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoTool;

impl Tool for TodoTool {
    type Params = TodoParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<TodoParams>(ID, DESCRIPTION)
            .kind(ToolKind::Think)
            .title("Update the plan")
            .subject(Subject::None)
            .read_only()
    }

    async fn run(&self, params: TodoParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let stored: Vec<Value> = params
            .todos
            .iter()
            .map(|item| {
                serde_json::to_value(item)
                    .map_err(|e| ToolError::internal("recording the todo list", e))
            })
            .collect::<Result<_, _>>()?;
        ctx.session.set_todos(stored);
        let entries = params.todos.iter().map(plan_entry).collect();
        let count = |status| params.todos.iter().filter(|t| t.status == status).count();
        let (pending, in_progress, completed) = (
            count(TodoStatus::Pending),
            count(TodoStatus::InProgress),
            count(TodoStatus::Completed),
        );
        Ok(ToolOutput::text(render(&params.todos, in_progress))
            .with("pending", pending)
            .with("in_progress", in_progress)
            .with("completed", completed)
            .artifact(Artifact::Plan { entries }))
    }
}

/// An entry as the front-end draws it (ACP's plan entry: content, priority, status).
fn plan_entry(item: &TodoItem) -> PlanEntry {
    PlanEntry {
        content: item.content.clone(),
        priority: item.priority.unwrap_or(TodoPriority::Medium),
        status: item.status,
        id: item.id.clone(),
    }
}

fn render(todos: &[TodoItem], in_progress: usize) -> String {
    if todos.is_empty() {
        return "The todo list is now empty.".to_owned();
    }
    let mut text = String::from("Todo list updated:\n");
    for item in todos {
        let mark = match item.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Completed => "[x]",
        };
        text.push_str(mark);
        text.push(' ');
        text.push_str(&item.content);
        if let Some(priority) = item.priority
            && priority != TodoPriority::Medium
        {
            let label = if priority == TodoPriority::High {
                "high"
            } else {
                "low"
            };
            text.push_str(&format!(" ({label} priority)"));
        }
        text.push('\n');
    }
    if in_progress > 1 {
        text.push_str(&format!(
            "Note: {in_progress} items are in progress; keep one in progress at a time.\n"
        ));
    }
    text
}
