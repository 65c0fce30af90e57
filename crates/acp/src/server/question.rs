//! The `question` tool in an ACP editor: each multiple-choice question becomes a permission
//! prompt whose options are the answers (plus "Skip"), so every client can show it and the turn
//! never hangs on a question the editor cannot draw.

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
};
use keel_core::agent::QuestionItem;

use super::host::AcpTurnHost;

const SKIP: &str = "skip";

fn option_id(index: usize) -> String {
    format!("answer-{index}")
}

/// The prompt for one question.
fn request(host: &AcpTurnHost, call_id: &str, item: &QuestionItem) -> RequestPermissionRequest {
    let mut text = item.question.clone();
    for option in &item.options {
        if let Some(description) = &option.description {
            text.push_str(&format!("\n- **{}**: {description}", option.label));
        }
    }
    let title = match &item.header {
        Some(header) => format!("{header}: {}", item.question),
        None => item.question.clone(),
    };
    let mut options: Vec<PermissionOption> = item
        .options
        .iter()
        .enumerate()
        .map(|(index, option)| {
            PermissionOption::new(
                option_id(index),
                option.label.clone(),
                PermissionOptionKind::AllowOnce,
            )
        })
        .collect();
    options.push(PermissionOption::new(
        SKIP,
        "Skip",
        PermissionOptionKind::RejectOnce,
    ));
    let fields = ToolCallUpdateFields::new()
        .title(title)
        .content(vec![ToolCallContent::from(text)]);
    RequestPermissionRequest::new(
        host.shared().session_id.clone(),
        ToolCallUpdate::new(call_id.to_owned(), fields),
        options,
    )
}

/// Asks one multiple-choice question; the answer is the chosen label.
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
            error.message
        )),
    }
}
