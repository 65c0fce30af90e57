//! The session's title, written by its model after the first turn: one small request in the
//! background (`[sessions] model_titles`), which never holds a turn up. Until it answers, and
//! whenever it fails, the title is the first line of the first prompt.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::provider::{Message, ModelRequest, Provider};
use crate::store::SessionLog;

use super::{AgentEvent, TurnHost};

/// The title request's system prompt (the mock model recognizes title requests by its first
/// words, `keel_testkit::mock_model::TITLE_MARKER`).
pub const TITLE_SYSTEM: &str = "You write the title of a coding session: at most six words \
that say what the user wants done, in the user's language, without quotes or a final period. \
Answer with the title only.";

/// How long the title request may take.
const TITLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Characters of the prompt and of the answer the model is shown.
const SHOWN_CHARS: usize = 2_000;
/// The longest title kept (characters).
const TITLE_CHARS: usize = 80;

fn cut(text: &str) -> String {
    text.chars().take(SHOWN_CHARS).collect()
}

/// The title in the model's answer: its first non-empty line, without quotes, Markdown marks
/// or a final period; `None` when nothing is left.
pub fn clean_title(answer: &str) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let line = line
        .trim_start_matches(['#', '*', '-', ' '])
        .trim_start_matches("Title:")
        .trim()
        .trim_matches(['"', '\'', '`', '*', '“', '”'])
        .trim_end_matches('.')
        .trim();
    if line.is_empty() {
        return None;
    }
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

/// Asks `provider` for a title of the conversation that began with `prompt` and was answered
/// with `answer`, on a task of its own; records it in `log` and tells `host` when it comes.
pub(super) fn spawn(
    provider: Arc<dyn Provider>,
    model: String,
    prompt: String,
    answer: String,
    log: Arc<SessionLog>,
    host: Arc<dyn TurnHost>,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let request = ModelRequest {
            model,
            system: TITLE_SYSTEM.to_owned(),
            messages: vec![Message::user_text(format!(
                "The user asked:\n{}\n\nThe assistant answered:\n{}",
                cut(&prompt),
                cut(&answer)
            ))]
            .into(),
            tools: Vec::new(),
            max_tokens: 60,
            thinking_budget: None,
        };
        let cancel = CancellationToken::new();
        let asked = tokio::time::timeout(
            TITLE_TIMEOUT,
            super::compact::collect_text(provider.as_ref(), request, &cancel),
        )
        .await;
        let answer = match asked {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                tracing::info!(%error, "the model wrote no session title; the prompt's stays");
                return;
            }
            Err(_) => {
                tracing::info!("the session title request timed out; the prompt's title stays");
                return;
            }
        };
        if let Some(title) = clean_title(&answer) {
            log.set_title(&title);
            host.event(AgentEvent::SessionTitle { title });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_cleaned_of_quotes_marks_and_periods() {
        assert_eq!(
            clean_title("\n\"Fix the greeting typo.\"\nmore").as_deref(),
            Some("Fix the greeting typo")
        );
        assert_eq!(
            clean_title("**Title:** Add a parser").as_deref(),
            Some("Add a parser")
        );
        assert_eq!(clean_title("  \n \"\" "), None);
        let long = "word ".repeat(40);
        assert_eq!(clean_title(&long).unwrap().chars().count(), TITLE_CHARS + 1);
    }
}
