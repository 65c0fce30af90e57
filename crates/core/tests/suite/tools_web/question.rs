//! `question`: headless refusal, answers through the session's asker.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_core::agent::QuestionItem;
use keel_core::capability::RequirementSet;
use keel_core::runtime::NetPolicy;
use keel_core::tool::{Asker, Envelope, Limits, ToolError, Typed};
use keel_core::tools::question::{HEADLESS_MESSAGE, QuestionTool};
use serde_json::{Value, json};

use super::{Session, error_text};

/// Answers every question with its first option (or "yes"), and records what it was asked.
#[derive(Default)]
struct FakeUser {
    asked: Mutex<Vec<QuestionItem>>,
    refuse: bool,
    short: bool,
}

impl Asker for FakeUser {
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(async move {
            if self.refuse {
                return Err("the user dismissed the questions".to_owned());
            }
            let mut answers: Vec<Vec<String>> = questions
                .iter()
                .map(|q| match q.options.first() {
                    Some(_) if q.multi_select => {
                        q.options.iter().map(|o| o.label.clone()).collect()
                    }
                    Some(option) => vec![option.label.clone()],
                    None => vec!["yes".to_owned()],
                })
                .collect();
            if self.short {
                answers.pop();
            }
            self.asked.lock().unwrap().extend(questions);
            Ok(answers)
        })
    }
}

fn questions() -> Value {
    json!({"questions": [
        {"question": "Which database should the service use?", "header": "Database",
         "options": [{"label": "Postgres", "description": "the team knows it"}, {"label": "SQLite"}]},
        {"question": "Which targets?", "options": [{"label": "linux"}, {"label": "macos"}],
         "multi_select": true},
        {"question": "Keep the old API?"}
    ]})
}

fn interactive_session() -> Session {
    Session::with(&[], NetPolicy::default(), Limits::default(), "s1", true)
}

#[tokio::test]
async fn question_in_a_headless_session_is_the_fixed_error() {
    let tool = Typed::wrap(QuestionTool).unwrap();
    // Not interactive, even with an asker installed.
    let headless = Session::new(&[], NetPolicy::default());
    headless
        .ctx
        .session
        .set_asker(Some(Arc::new(FakeUser::default())));
    let envelope = Envelope::from_result(headless.call(&tool, questions()).await, Duration::ZERO);
    assert_eq!(envelope.error_text.as_deref(), Some(HEADLESS_MESSAGE));

    // Interactive but nobody to ask.
    let nobody = interactive_session();
    let envelope = Envelope::from_result(nobody.call(&tool, questions()).await, Duration::ZERO);
    assert_eq!(envelope.error_text.as_deref(), Some(HEADLESS_MESSAGE));
}

#[tokio::test]
async fn question_returns_the_answers() {
    let tool = Typed::wrap(QuestionTool).unwrap();
    let session = interactive_session();
    let user = Arc::new(FakeUser::default());
    session.ctx.session.set_asker(Some(user.clone()));
    let output = session.call(&tool, questions()).await.unwrap();
    assert_eq!(
        output.data["answers"],
        json!([["Postgres"], ["linux", "macos"], ["yes"]])
    );
    assert!(
        output.text.contains("Q: Which targets?\nA: linux; macos\n"),
        "{}",
        output.text
    );

    let asked = user.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3);
    assert_eq!(asked[0].header.as_deref(), Some("Database"));
    assert_eq!(
        asked[0].options[0].description.as_deref(),
        Some("the team knows it")
    );
    assert!(!asked[0].multi_select && asked[1].multi_select);
    assert!(asked[2].options.is_empty());
}

#[tokio::test]
async fn question_reports_a_refusal_or_a_bad_host_answer() {
    let tool = Typed::wrap(QuestionTool).unwrap();
    let session = interactive_session();
    session.ctx.session.set_asker(Some(Arc::new(FakeUser {
        refuse: true,
        ..FakeUser::default()
    })));
    let error = error_text(session.call(&tool, questions()).await);
    assert_eq!(error, "the user dismissed the questions");

    session.ctx.session.set_asker(Some(Arc::new(FakeUser {
        short: true,
        ..FakeUser::default()
    })));
    let error = error_text(session.call(&tool, questions()).await);
    assert!(error.contains("2 answer lists for 3 questions"), "{error}");
}

#[tokio::test]
async fn question_rejects_bad_arguments() {
    let tool = Typed::wrap(QuestionTool).unwrap();
    let session = interactive_session();
    session
        .ctx
        .session
        .set_asker(Some(Arc::new(FakeUser::default())));
    for args in [
        json!({}),
        json!({"questions": []}),
        json!({"questions": [{"header": "no question"}]}),
        json!({"questions": [{"question": ""}]}),
        json!({"questions": [{"question": "q", "options": [{"description": "no label"}]}]}),
        json!({"questions": [{"question": "q", "multi_select": "yes"}]}),
        json!({"questions": [{"question": "q", "default": "a"}]}),
        json!({"questions": "what?"}),
    ] {
        let result = session.call(&tool, args.clone()).await;
        assert!(
            matches!(result, Err(ToolError::InvalidArguments { .. })),
            "{args}: {result:?}"
        );
    }
    let spec = tool.spec();
    assert!(!spec.mutating);
    assert!(spec.requires == RequirementSet::default());
}
