//! The `question` tool: [`QuestionTool`] with [`QuestionParams`]. It pauses the call on the human
//! and returns `{answers: string[][]}`, one list per question.
//!
//! It reaches the human through the session's [`Asker`](crate::tool::Asker)
//! ([`SessionState::set_asker`](crate::tool::SessionState::set_asker)). A headless session (not
//! interactive, or no asker installed) gets the fixed [`HEADLESS_MESSAGE`] as a tool error, so
//! the model falls back to its own judgement instead of waiting for an answer that cannot come.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::tool::view::{one_line, quoted};
use crate::tool::{
    CallView, Describe, QuestionItem, QuestionOption, Subject, Tool, ToolContext, ToolError,
    ToolKind, ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Question.id();

/// The error every headless session returns for `question`.
pub const HEADLESS_MESSAGE: &str = "The question tool is not available: no user is present \
(headless run). Make your best judgement and say what you assumed.";

const DESCRIPTION: &str = "Asks the user and waits for the answers, when a decision is theirs \
(a preference, an ambiguous requirement, a trade-off), not for what you can find out. Offer \
options when the likely answers are known. Returns one answer list per question. Headless runs \
fail the call: then decide and state your assumption.";

/// Arguments of `question`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionParams {
    /// Asked together.
    #[schemars(length(min = 1, max = 8))]
    pub questions: Vec<QuestionEntry>,
}

/// One question.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionEntry {
    /// A full sentence.
    #[schemars(length(min = 1))]
    pub question: String,
    /// A few words.
    #[serde(default)]
    pub header: Option<String>,
    /// Omit for a free-text answer.
    #[serde(default)]
    pub options: Vec<ChoiceEntry>,
    /// The user may pick several.
    #[serde(default)]
    pub multi_select: bool,
}

/// One choice of a question.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChoiceEntry {
    /// Shown, and returned when picked.
    #[schemars(length(min = 1))]
    pub label: String,
    /// What it means.
    #[serde(default)]
    pub description: Option<String>,
}

impl From<QuestionEntry> for QuestionItem {
    fn from(entry: QuestionEntry) -> Self {
        QuestionItem {
            question: entry.question,
            header: entry.header,
            options: entry
                .options
                .into_iter()
                .map(|choice| QuestionOption {
                    label: choice.label,
                    description: choice.description,
                })
                .collect(),
            multi_select: entry.multi_select,
        }
    }
}

/// The `question` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuestionTool;

impl Tool for QuestionTool {
    type Params = QuestionParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<QuestionParams>(ID, DESCRIPTION)
            .kind(ToolKind::Other)
            .title("Ask the user")
            .read_only()
            .subject(Subject::None)
    }

    fn describe(&self, params: &QuestionParams, _how: Describe<'_>) -> CallView {
        let title = match params.questions.first() {
            Some(first) if !first.question.is_empty() => {
                format!(
                    "The model asks: {}",
                    quoted(&one_line(&first.question, 100))
                )
            }
            _ => "Ask the user".into(),
        };
        CallView {
            title,
            locations: Vec::new(),
        }
    }

    async fn run(
        &self,
        params: QuestionParams,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let asker = match ctx.session.asker() {
            Some(asker) if ctx.session.interactive => asker,
            _ => return Err(ToolError::Unavailable(HEADLESS_MESSAGE.to_owned())),
        };
        let items: Vec<QuestionItem> = params.questions.into_iter().map(Into::into).collect();
        let asked = items.clone();
        let answers = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            answers = asker.ask(items) => answers.map_err(ToolError::external)?,
        };
        if answers.len() != asked.len() {
            return Err(ToolError::external(format!(
                "the host returned {} answer lists for {} questions",
                answers.len(),
                asked.len()
            )));
        }
        let text = render(&asked, &answers);
        let answers_json = Value::from(
            answers
                .iter()
                .map(|list| Value::from(list.clone()))
                .collect::<Vec<_>>(),
        );
        Ok(ToolOutput::text(text).with("answers", answers_json))
    }
}

/// Each question followed by its answers, for the model to read.
fn render(questions: &[QuestionItem], answers: &[Vec<String>]) -> String {
    let mut text = String::new();
    for (item, answer) in questions.iter().zip(answers) {
        text.push_str("Q: ");
        text.push_str(&item.question);
        text.push_str("\nA: ");
        if answer.is_empty() {
            text.push_str("(no answer)");
        } else {
            text.push_str(&answer.join("; "));
        }
        text.push('\n');
    }
    text
}
