//! The `question` tool in an ACP editor, by what the client can draw:
//!
//! 1. a client that renders elicitation forms (`clientCapabilities.elicitation.form`) gets one
//!    `elicitation/create` form for all the questions: single choice (an enum), multiple choice
//!    (an array of the choices) or free text;
//! 2. otherwise each multiple-choice question becomes a permission prompt whose options are the
//!    answers (plus "Skip"), which every client can show;
//! 3. a free-text question without forms is an error the model reads.
//!
//! Every route ends when the turn is cancelled or the client goes away: a question never hangs.

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, ElicitationFormMode, ElicitationSchema, ElicitationSessionScope,
};
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
};
use keel_core::agent::QuestionItem;
use keel_core::tool::view::{escaped, quoted};
use serde_json::{Value, json};

use super::host::AcpTurnHost;

const SKIP: &str = "skip";

fn option_id(index: usize) -> String {
    format!("answer-{index}")
}

/// What every question prompt starts with, so it is visibly the model's and never looks like
/// one of Keel's own permission or trust prompts.
pub const FROM_MODEL: &str = "The model asks";

/// The prompt's title: one line, the model's words escaped and quoted after [`FROM_MODEL`].
fn title(item: &QuestionItem) -> String {
    let asked = match &item.header {
        Some(header) => format!("{header}: {}", item.question),
        None => item.question.clone(),
    };
    format!("{FROM_MODEL}: {}", quoted(&asked))
}

/// The prompt for one question. Its options are the answers, all of a reject kind: a question
/// allows nothing, and a client that answers allow options by itself must not pick one of the
/// model's answers for the user.
fn request(host: &AcpTurnHost, call_id: &str, item: &QuestionItem) -> RequestPermissionRequest {
    let mut text = format!(
        "{FROM_MODEL} (a question from the model, not a permission Keel asks for):\n\n> {}",
        escaped(&item.question)
    );
    for option in &item.options {
        if let Some(description) = &option.description {
            text.push_str(&format!(
                "\n- {}: {}",
                quoted(&option.label),
                escaped(description)
            ));
        }
    }
    let mut options: Vec<PermissionOption> = item
        .options
        .iter()
        .enumerate()
        .map(|(index, option)| {
            PermissionOption::new(
                option_id(index),
                quoted(&option.label),
                PermissionOptionKind::RejectOnce,
            )
        })
        .collect();
    options.push(PermissionOption::new(
        SKIP,
        "Skip",
        PermissionOptionKind::RejectOnce,
    ));
    let fields = ToolCallUpdateFields::new()
        .title(title(item))
        .content(vec![ToolCallContent::from(text)]);
    RequestPermissionRequest::new(
        host.shared().session_id.clone(),
        ToolCallUpdate::new(call_id.to_owned(), fields),
        options,
    )
}

/// Asks one multiple-choice question; the answer is the chosen label.
// String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
pub async fn ask_one(
    host: &AcpTurnHost,
    call_id: &str,
    item: &QuestionItem,
) -> Result<Vec<String>, String> {
    let cancel = host.cancel_token().clone();
    let shared = host.shared();
    let _turn = tokio::select! {
        guard = shared.prompts.lock() => guard,
        () = cancel.cancelled() => return Err("cancelled by the user".into()),
    };
    let sent = shared
        .connection
        .send_request(request(host, call_id, item))
        .block_task();
    let reply = tokio::select! {
        reply = sent => reply,
        () = cancel.cancelled() => return Err("cancelled by the user".into()),
    };
    match reply.map(|response| response.outcome) {
        Ok(RequestPermissionOutcome::Selected(selected)) => item
            .options
            .iter()
            .enumerate()
            .find(|(index, _)| *selected.option_id.0 == *option_id(*index))
            .map(|(_, option)| vec![option.label.clone()])
            .ok_or_else(|| {
                format!(
                    "The user skipped the question \"{}\"; proceed with your best judgement.",
                    item.question
                )
            }),
        Ok(_) => Err("cancelled by the user".into()),
        Err(error) => Err(format!(
            "The editor could not ask the question: {}",
            super::errors::client_error_text(&error)
        )),
    }
}

/// The form field of question `index`.
fn field(index: usize) -> String {
    format!("q{index}")
}

/// One form for all the questions.
// String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
fn form(
    host: &AcpTurnHost,
    questions: &[QuestionItem],
) -> Result<CreateElicitationRequest, String> {
    let mut properties = serde_json::Map::new();
    for (index, item) in questions.iter().enumerate() {
        let title = item.header.clone().unwrap_or_else(|| item.question.clone());
        let mut description = item.question.clone();
        for option in &item.options {
            if let Some(text) = &option.description {
                description.push_str(&format!("\n- {}: {text}", option.label));
            }
        }
        let labels: Vec<&str> = item.options.iter().map(|o| o.label.as_str()).collect();
        let schema = if labels.is_empty() {
            json!({"type": "string", "title": title, "description": description})
        } else if item.multi_select {
            json!({"type": "array", "title": title, "description": description,
                   "items": {"type": "string", "enum": labels}})
        } else {
            json!({"type": "string", "title": title, "description": description, "enum": labels})
        };
        properties.insert(field(index), schema);
    }
    let required: Vec<String> = (0..questions.len()).map(field).collect();
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": properties,
        "required": required,
    }))
    .map_err(|e| format!("the questions do not make a form: {e}"))?;
    let message = match questions {
        [one] => title(one),
        _ => format!("{FROM_MODEL} {} questions.", questions.len()),
    };
    Ok(CreateElicitationRequest::new(
        ElicitationFormMode::new(
            ElicitationSessionScope::new(host.shared().session_id.clone()),
            schema,
        ),
        message,
    ))
}

/// The answer lists from an accepted form's content.
fn answers(questions: &[QuestionItem], content: &Value) -> Vec<Vec<String>> {
    (0..questions.len())
        .map(|index| match content.get(field(index)) {
            Some(Value::String(text)) if !text.is_empty() => vec![text.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::Bool(flag)) => vec![flag.to_string()],
            Some(Value::Number(number)) => vec![number.to_string()],
            _ => Vec::new(),
        })
        .collect()
}

/// Asks all the questions in one elicitation form.
// String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
pub async fn ask_form(
    host: &AcpTurnHost,
    call_id: &str,
    questions: &[QuestionItem],
) -> Result<Vec<Vec<String>>, String> {
    let cancel = host.cancel_token().clone();
    let shared = host.shared();
    let _turn = tokio::select! {
        guard = shared.prompts.lock() => guard,
        () = cancel.cancelled() => return Err("cancelled by the user".into()),
    };
    let request = form(host, questions)?;
    tracing::debug!(call_id, "question asked through an elicitation form");
    let sent = shared.connection.send_request(request).block_task();
    let reply = tokio::select! {
        reply = sent => reply,
        () = cancel.cancelled() => return Err("cancelled by the user".into()),
    };
    let response = reply.map_err(|error| {
        format!(
            "The editor could not ask the question: {}",
            super::errors::client_error_text(&error)
        )
    })?;
    let wire = serde_json::to_value(&response).unwrap_or(Value::Null);
    match wire.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(answers(
            questions,
            wire.get("content").unwrap_or(&Value::Null),
        )),
        Some("decline") => Err(
            "The user declined to answer; proceed with your best judgement and say what you \
             assumed."
                .into(),
        ),
        _ => Err("cancelled by the user".into()),
    }
}
