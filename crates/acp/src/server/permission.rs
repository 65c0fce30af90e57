//! Approval prompts: one table of permission options, mapped both ways.
//!
//! - [`OPTIONS`]: each row ties an [`ApprovalAnswer`] to its ACP option id and kind. The options
//!   a request offers ([`options`]) and the answer a reply means ([`answer`]) both read it.
//! - [`request`]: builds `session/request_permission` for an [`ApprovalRequest`]: the tool call
//!   with its kind, title, raw input and the full preview (the diff of an edit or write, the
//!   command and working directory of a shell run). The engine's project-trust question comes
//!   the same way and gets its own wording ([`trust_options`]).
//!
//! Failing closed: an option id the table does not know, or a request that failed, is
//! [`ApprovalAnswer::Answered(Answer::RejectOnce)`].

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind as AcpKind,
};
use keel_core::agent::{Answer, ApprovalAnswer, ApprovalRequest, TRUST_QUESTION_ID};
use keel_core::tool::Preview;
use keel_core::tool::view::{code, code_block};

use super::kinds::Roots;

/// One permission option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionRow {
    pub answer: ApprovalAnswer,
    pub id: &'static str,
    pub kind: PermissionOptionKind,
    /// Whether the answer is remembered (offered only when the call has an "always" scope).
    pub remembered: bool,
    /// Which requests offer it: `None` every one, `Some(true)` only a call asking to run
    /// outside the kernel sandbox, `Some(false)` only the others.
    pub unconfined: Option<bool>,
}

/// The permission options, in the order they are offered. A call asking to run outside the
/// kernel sandbox gets its own allow options (the escalation), never the plain ones.
pub const OPTIONS: [OptionRow; 6] = [
    OptionRow {
        answer: ApprovalAnswer::Answered(Answer::AllowOnce),
        id: "allow-once",
        kind: PermissionOptionKind::AllowOnce,
        remembered: false,
        unconfined: Some(false),
    },
    OptionRow {
        answer: ApprovalAnswer::Answered(Answer::AllowAlways),
        id: "allow-always",
        kind: PermissionOptionKind::AllowAlways,
        remembered: true,
        unconfined: Some(false),
    },
    OptionRow {
        answer: ApprovalAnswer::Answered(Answer::AllowOnce),
        id: "allow-once-unsandboxed",
        kind: PermissionOptionKind::AllowOnce,
        remembered: false,
        unconfined: Some(true),
    },
    OptionRow {
        answer: ApprovalAnswer::Answered(Answer::AllowAlways),
        id: "allow-always-unsandboxed",
        kind: PermissionOptionKind::AllowAlways,
        remembered: true,
        unconfined: Some(true),
    },
    OptionRow {
        answer: ApprovalAnswer::Answered(Answer::RejectOnce),
        id: "reject-once",
        kind: PermissionOptionKind::RejectOnce,
        remembered: false,
        unconfined: None,
    },
    OptionRow {
        answer: ApprovalAnswer::Answered(Answer::RejectAlways),
        id: "reject-always",
        kind: PermissionOptionKind::RejectAlways,
        remembered: true,
        unconfined: None,
    },
];

impl OptionRow {
    fn offered(&self, unconfined: bool) -> bool {
        self.unconfined.is_none_or(|u| u == unconfined)
    }
}

fn label(row: &OptionRow, scope: Option<&str>) -> String {
    if row.unconfined == Some(true) {
        return match scope.filter(|_| row.remembered) {
            Some(scope) => format!("Always allow {scope} without the sandbox in this session"),
            None if row.remembered => "Always allow without the sandbox".into(),
            None => "Allow once without the sandbox".into(),
        };
    }
    match (row.answer, scope) {
        (ApprovalAnswer::Answered(Answer::AllowOnce), _) => "Allow once".into(),
        (ApprovalAnswer::Answered(Answer::RejectOnce), _) => "Reject".into(),
        (ApprovalAnswer::Answered(Answer::AllowAlways), Some(scope)) => {
            format!("Always allow {scope} in this session")
        }
        (ApprovalAnswer::Answered(Answer::RejectAlways), Some(scope)) => {
            format!("Always reject {scope} in this session")
        }
        (ApprovalAnswer::Answered(Answer::AllowAlways), None) => "Always allow".into(),
        (ApprovalAnswer::Answered(Answer::RejectAlways), None) => "Always reject".into(),
        (ApprovalAnswer::Cancelled, _) => "Cancel".into(),
    }
}

/// The options a request offers: the once options always, the remembered ones only when the
/// call has an "always" scope, each labelled with that scope (the policy remembers "always"
/// answers as session rules). `unconfined`: the call asks to run outside the kernel sandbox,
/// so the allow options are the escalation's ("Allow once without the sandbox").
pub fn options(always_scope: Option<&str>, unconfined: bool) -> Vec<PermissionOption> {
    OPTIONS
        .iter()
        .filter(|row| row.offered(unconfined))
        .filter(|row| !row.remembered || always_scope.is_some())
        .map(|row| PermissionOption::new(row.id, label(row, always_scope), row.kind))
        .collect()
}

/// The options of the project-trust question: the same ids, its own words. "Always reject"
/// would do what rejecting does (the project stays untrusted), so it is not offered.
pub fn trust_options() -> Vec<PermissionOption> {
    OPTIONS
        .iter()
        .filter(|row| row.offered(false))
        .filter_map(|row| {
            let label = match row.answer {
                ApprovalAnswer::Answered(Answer::AllowAlways) => {
                    "Trust this project (remembered across sessions)"
                }
                ApprovalAnswer::Answered(Answer::AllowOnce) => "Trust it for this session",
                ApprovalAnswer::Answered(Answer::RejectOnce) => {
                    "Don't trust it (its settings stay ignored)"
                }
                ApprovalAnswer::Answered(Answer::RejectAlways) | ApprovalAnswer::Cancelled => {
                    return None;
                }
            };
            Some(PermissionOption::new(row.id, label, row.kind))
        })
        .collect()
}

/// What the client's reply means. Unknown option ids, and ids the request did not offer (a
/// plain "allow-once" to a call asking to run outside the sandbox), fail closed.
pub fn answer(outcome: &RequestPermissionOutcome, unconfined: bool) -> ApprovalAnswer {
    match outcome {
        RequestPermissionOutcome::Selected(selected) => OPTIONS
            .iter()
            .filter(|row| row.offered(unconfined))
            .find(|row| *row.id == *selected.option_id.0)
            .map_or(ApprovalAnswer::Answered(Answer::RejectOnce), |row| {
                row.answer
            }),
        RequestPermissionOutcome::Cancelled => ApprovalAnswer::Cancelled,
        _ => ApprovalAnswer::Answered(Answer::RejectOnce),
    }
}

/// The preview as tool-call content (a diff through the one diff mapping,
/// [`super::kinds::diff_content`]).
pub fn preview_content(preview: &Preview) -> Vec<ToolCallContent> {
    match preview {
        Preview::Diff(diff) => super::kinds::diff_content(diff),
        // A patch: every file's diff, in the patch's order, in the one request.
        Preview::Diffs(diffs) => diffs.iter().flat_map(super::kinds::diff_content).collect(),
        Preview::Command { command, .. } => {
            vec![ToolCallContent::from(code_block("sh", command))]
        }
    }
}

/// What approving will do, in plain words.
fn what_happens(approval: &ApprovalRequest, title: &str, roots: &Roots) -> String {
    match &approval.preview {
        Some(Preview::Command { cwd, .. }) => {
            format!("Keel will run this command in {}.", code(cwd))
        }
        Some(Preview::Diff(diff)) if diff.old_text.is_none() => {
            format!(
                "Keel will create {} with this text.",
                code(&roots.display(&diff.path))
            )
        }
        Some(Preview::Diff(diff)) => format!(
            "Keel will apply this change to {}.",
            code(&roots.display(&diff.path))
        ),
        Some(Preview::Diffs(diffs)) => {
            let files: Vec<String> = diffs
                .iter()
                .map(|diff| code(&roots.display(&diff.path)))
                .collect();
            format!(
                "Keel will apply this patch to {} file{}: {}.",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                files.join(", ")
            )
        }
        None => format!("Keel will run the `{}` tool: {title}.", approval.tool_id),
    }
}

/// The prompt's text: what approving does and why Keel asks, in plain words, then the deciding
/// rule as a detail line.
fn explanation(approval: &ApprovalRequest, title: &str, roots: &Roots) -> String {
    if approval.tool_id == TRUST_QUESTION_ID {
        return approval.reason.clone();
    }
    if approval.why.is_empty() {
        let what = what_happens(approval, title, roots);
        return match approval.reason.trim() {
            "" => what,
            reason => format!("{what}\n\n{reason}"),
        };
    }
    let mut text = format!("{} {}", what_happens(approval, title, roots), approval.why);
    let detail = approval.reason.trim();
    if !detail.is_empty() {
        let detail = match detail.split_once("Needs approval: ") {
            // A subagent's request keeps its "Subagent `name`:" lead.
            Some((lead, rest)) => format!("{lead}{rest}"),
            None => detail.to_owned(),
        };
        text.push_str(&format!("\n\nRule: {detail}"));
    }
    text
}

/// What the call shows in the prompt besides its title.
#[derive(Debug, Clone)]
pub struct PermissionView {
    pub title: String,
    pub kind: AcpKind,
    pub locations: Vec<ToolCallLocation>,
}

/// Builds the `session/request_permission` request of an approval.
pub fn request(
    session_id: &SessionId,
    approval: &ApprovalRequest,
    view: PermissionView,
    roots: &Roots,
) -> RequestPermissionRequest {
    let mut content: Vec<ToolCallContent> =
        approval.preview.iter().flat_map(preview_content).collect();
    let text = explanation(approval, &view.title, roots);
    if !text.is_empty() {
        content.push(ToolCallContent::from(text));
    }
    let mut fields = ToolCallUpdateFields::new()
        .kind(view.kind)
        .status(ToolCallStatus::Pending)
        .title(view.title)
        .name(approval.tool_id.clone())
        .raw_input(approval.args.clone())
        .content(content);
    if !view.locations.is_empty() {
        fields = fields.locations(view.locations);
    }
    let options = if approval.tool_id == TRUST_QUESTION_ID {
        trust_options()
    } else {
        options(approval.always_scope.as_deref(), approval.unconfined)
    };
    RequestPermissionRequest::new(
        session_id.clone(),
        ToolCallUpdate::new(approval.call_id.clone(), fields),
        options,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;
    use keel_core::tool::ToolKind;
    use serde_json::json;

    #[test]
    fn table_maps_both_ways() {
        for unconfined in [false, true] {
            for row in OPTIONS.iter().filter(|row| row.offered(unconfined)) {
                let outcome =
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(row.id));
                assert_eq!(answer(&outcome, unconfined), row.answer);
                let same = OPTIONS
                    .iter()
                    .filter(|r| r.offered(unconfined) && r.answer == row.answer);
                assert_eq!(same.count(), 1);
            }
            assert_eq!(
                answer(&RequestPermissionOutcome::Cancelled, unconfined),
                ApprovalAnswer::Cancelled
            );
            let unknown = RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("yes"));
            assert_eq!(
                answer(&unknown, unconfined),
                ApprovalAnswer::Answered(Answer::RejectOnce)
            );
        }
        // A plain allow is no answer to the escalation, and the reverse.
        for (id, unconfined) in [("allow-once", true), ("allow-once-unsandboxed", false)] {
            let outcome = RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id));
            assert_eq!(
                answer(&outcome, unconfined),
                ApprovalAnswer::Answered(Answer::RejectOnce)
            );
        }
        assert!(
            OPTIONS
                .iter()
                .all(|r| r.answer != ApprovalAnswer::Cancelled)
        );
    }

    #[test]
    fn options_name_their_scope_and_once_only_without_one() {
        let scoped = options(Some("commands starting with `cargo test`"), false);
        insta::assert_json_snapshot!(scoped, @r#"
        [
          {
            "optionId": "allow-once",
            "name": "Allow once",
            "kind": "allow_once"
          },
          {
            "optionId": "allow-always",
            "name": "Always allow commands starting with `cargo test` in this session",
            "kind": "allow_always"
          },
          {
            "optionId": "reject-once",
            "name": "Reject",
            "kind": "reject_once"
          },
          {
            "optionId": "reject-always",
            "name": "Always reject commands starting with `cargo test` in this session",
            "kind": "reject_always"
          }
        ]
        "#);
        let once: Vec<String> = options(None, false)
            .into_iter()
            .map(|option| option.option_id.to_string())
            .collect();
        assert_eq!(once, ["allow-once", "reject-once"]);
        let escalation: Vec<(String, String)> =
            options(Some("commands starting with `make`"), true)
                .into_iter()
                .map(|option| (option.option_id.to_string(), option.name))
                .collect();
        assert_eq!(
            escalation,
            [
                ("allow-once-unsandboxed", "Allow once without the sandbox"),
                (
                    "allow-always-unsandboxed",
                    "Always allow commands starting with `make` without the sandbox in this \
                     session"
                ),
                ("reject-once", "Reject"),
                (
                    "reject-always",
                    "Always reject commands starting with `make` in this session"
                ),
            ]
            .map(|(id, name)| (id.to_owned(), name.to_owned()))
        );
    }

    #[test]
    fn request_carries_the_diff_and_the_command() {
        let approval = ApprovalRequest {
            call_id: "c1".into(),
            tool_id: "edit".into(),
            kind: ToolKind::Edit,
            args: json!({"file_path": "src/lib.rs"}),
            view: keel_core::tool::CallView::default(),
            preview: Some(Preview::Diff(keel_diff::AcpDiff {
                path: "/w/src/lib.rs".into(),
                old_text: Some("a\n".into()),
                new_text: "b\n".into(),
                bounded: false,
            })),
            reason: String::new(),
            why: String::new(),
            always_scope: None,
            unconfined: false,
        };
        let view = PermissionView {
            title: "Edit src/lib.rs".into(),
            kind: AcpKind::Edit,
            locations: vec![ToolCallLocation::new("/w/src/lib.rs")],
        };
        let wire = serde_json::to_value(request(
            &SessionId::new("s1"),
            &approval,
            view,
            &Roots::default(),
        ))
        .unwrap();
        insta::assert_json_snapshot!(wire["toolCall"], @r#"
        {
          "toolCallId": "c1",
          "kind": "edit",
          "status": "pending",
          "title": "Edit src/lib.rs",
          "name": "edit",
          "content": [
            {
              "type": "diff",
              "path": "/w/src/lib.rs",
              "oldText": "a\n",
              "newText": "b\n"
            },
            {
              "type": "content",
              "content": {
                "type": "text",
                "text": "Keel will apply this change to `/w/src/lib.rs`."
              }
            }
          ],
          "locations": [
            {
              "path": "/w/src/lib.rs"
            }
          ],
          "rawInput": {
            "file_path": "src/lib.rs"
          }
        }
        "#);
        let command = preview_content(&Preview::Command {
            command: "cargo test".into(),
            cwd: "/w".into(),
        });
        let wire = serde_json::to_value(command).unwrap();
        assert_eq!(wire[0]["content"]["text"], "```sh\ncargo test\n```");
    }

    #[test]
    fn the_prompt_says_what_happens_and_why_then_the_rule() {
        let approval = ApprovalRequest {
            call_id: "c1".into(),
            tool_id: "bash".into(),
            kind: ToolKind::Execute,
            args: json!({"command": "cargo test"}),
            view: keel_core::tool::CallView {
                title: "cargo test".into(),
                locations: Vec::new(),
            },
            preview: Some(Preview::Command {
                command: "cargo test".into(),
                cwd: "/w".into(),
            }),
            reason: "Needs approval: no rule matches `cargo test`, and the default is ask.".into(),
            why: "No permission rule allows this yet, so Keel asks first.".into(),
            always_scope: None,
            unconfined: false,
        };
        assert_eq!(
            explanation(&approval, "cargo test", &Roots::default()),
            "Keel will run this command in `/w`. No permission rule allows this yet, so Keel \
             asks first.\n\nRule: no rule matches `cargo test`, and the default is ask."
        );
    }
}
