//! The `task` tool: [`TaskTool`] with [`TaskParams`]. It hands a self-contained job to a
//! subagent, a child session on the same engine with its own conversation, and returns the
//! child's final answer.
//!
//! The child is never looser than its parent: same workspace scope, the parent's rules and
//! session answers, a mode at least as strict, a subset of the tools, a depth limit, and the
//! parent's cancel token. The run itself is the session's [`Subagents`](crate::tool::Subagents),
//! which the turn loop installs; `background: true` returns a handle at once, and the answer
//! joins a later model request (or `wait` / `cancel` takes the handle).

use schemars::JsonSchema;
use serde::Deserialize;

use crate::tool::view::{code, given, one_line};
use crate::tool::{
    CallView, Describe, SubagentRequest, Subject, Tool, ToolContext, ToolError, ToolKind,
    ToolOutput, ToolSpec,
};

/// The tool's id.
pub const ID: &str = crate::tool::BundledTool::Task.id();

/// The model's copy of a child's answer is cut here (the whole answer goes to a sidecar file).
pub const TASK_RESULT_BYTES: usize = 64 * 1024;

const DESCRIPTION: &str = "Delegates a self-contained job to a subagent: a fresh conversation \
with your tools (or the named agent's) and permissions, which returns only its final answer; \
say in `prompt` all it needs and what to report. For broad searches or independent work; \
calls in one response run in parallel. `background: true` returns a handle at once (the answer \
comes in a later message) for `wait` or `cancel`.";

/// Arguments of `task`: `prompt` starts a subagent; `wait` or `cancel` acts on a handle.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskParams {
    /// The whole task.
    #[serde(default)]
    pub prompt: Option<String>,
    /// 3-6 words shown to the user.
    #[serde(default)]
    pub description: Option<String>,
    /// An agent named below; default a general-purpose one.
    #[serde(default)]
    pub agent: Option<String>,
    /// Return a handle at once.
    #[serde(default)]
    pub background: bool,
    /// A handle: wait for its answer.
    #[serde(default)]
    pub wait: Option<String>,
    /// A handle: stop it.
    #[serde(default)]
    pub cancel: Option<String>,
}

/// The `task` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskTool;

impl Tool for TaskTool {
    type Params = TaskParams;

    fn spec(&self) -> ToolSpec {
        // Read-only itself: every call of the child is checked and gated on its own.
        ToolSpec::new::<TaskParams>(ID, DESCRIPTION)
            .kind(ToolKind::Think)
            .title("Run a subtask")
            .read_only()
            .subject(Subject::None)
    }

    fn describe(&self, params: &TaskParams, _how: Describe<'_>) -> CallView {
        let title = if let Some(handle) = given(params.wait.as_deref()) {
            format!("Wait for {}", code(handle))
        } else if let Some(handle) = given(params.cancel.as_deref()) {
            format!("Cancel {}", code(handle))
        } else {
            match given(params.description.as_deref()).or(given(params.prompt.as_deref())) {
                Some(description) => format!("Task: {}", one_line(description, 100)),
                None => "Run a subtask".into(),
            }
        };
        CallView {
            title,
            locations: Vec::new(),
        }
    }

    async fn run(&self, params: TaskParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let subagents = ctx.session.subagents().ok_or_else(|| {
            ToolError::Unavailable("subagents are not available in this session".into())
        })?;
        let invalid = |message: &str| ToolError::InvalidArguments {
            tool: ID.into(),
            message: message.into(),
        };
        let text = match (params.prompt, params.wait, params.cancel) {
            (Some(prompt), None, None) => {
                if prompt.trim().is_empty() {
                    return Err(invalid("`prompt` is empty"));
                }
                let description = params
                    .description
                    .filter(|d| !d.trim().is_empty())
                    .unwrap_or_else(|| first_words(&prompt));
                let request = SubagentRequest {
                    agent: params.agent,
                    description,
                    prompt,
                    background: params.background,
                };
                subagents.run(request, ctx).await?
            }
            (None, Some(handle), None) => subagents.wait(&handle, ctx).await?,
            (None, None, Some(handle)) => subagents.cancel(&handle)?,
            _ => {
                return Err(invalid(
                    "give exactly one of `prompt` (start a subagent), `wait` or `cancel` (a \
                     background handle)",
                ));
            }
        };
        let (text, sidecar) = ctx.cap_bytes(ID, text, TASK_RESULT_BYTES).await?;
        let mut output = ToolOutput::text(text);
        output.output_path = sidecar;
        Ok(output)
    }
}

/// The first few words of a prompt, for the user when the model gave no description.
fn first_words(prompt: &str) -> String {
    let words: Vec<&str> = prompt.split_whitespace().take(6).collect();
    words.join(" ")
}
