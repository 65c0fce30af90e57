//! The first-use question about a project's own permission rules.
//!
//! Project rules that allow something take effect only in a trusted project. When an
//! interactive session's project has such rules and the user has never said whether to trust
//! it, the first turn asks once, through the host's approval prompt: "always" records the
//! project in the trust store, "once" trusts it for this session, a rejection keeps its allow
//! rules ignored (its deny and ask rules apply either way).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::policy::{Scope, Trust};
use crate::tool::ToolKind;

use super::session::Session;
use super::{ApprovalAnswer, ApprovalRequest, TurnHost};

/// The pseudo tool id of the trust question (what the host shows as the call's name).
pub const TRUST_QUESTION_ID: &str = "trust_project";

impl Session {
    /// Asks about the project's rules if that is still open. Returns false when the question
    /// was cancelled (the turn ends as cancelled).
    pub(super) async fn settle_project_trust(
        &self,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> bool {
        if self.trust_settled.swap(true, Ordering::SeqCst)
            || !self.state.interactive
            || self.policy.trust() != Trust::Unknown
        {
            return true;
        }
        let ignored: Vec<String> = self
            .policy
            .rules_by_scope()
            .into_iter()
            .filter(|scope| scope.scope == Scope::Project)
            .flat_map(|scope| scope.rules)
            .filter(|listed| listed.ignored)
            .map(|listed| listed.rule.summary())
            .collect();
        if ignored.is_empty() {
            return true;
        }
        let workspace = self.runtime.root().display().to_string();
        let request = ApprovalRequest {
            call_id: format!("{TRUST_QUESTION_ID}-{}", self.id),
            tool_id: TRUST_QUESTION_ID.to_owned(),
            kind: ToolKind::Other,
            args: json!({ "workspace": workspace, "rules": ignored }),
            preview: None,
            reason: format!(
                "This project's .keel/permissions.toml allows more than Keel's defaults ({}). \
                 Trust the project so that these rules apply? Until then they are ignored.",
                ignored.join("; ")
            ),
            always_scope: Some("this project, remembered across sessions".to_owned()),
        };
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => ApprovalAnswer::Cancelled,
            answer = host.approve(request) => answer,
        };
        match answer {
            ApprovalAnswer::AllowAlways => {
                if let Some(store) = &self.trust_store
                    && let Err(error) = store.trust(self.runtime.root())
                {
                    tracing::warn!(%error, "cannot record the project as trusted");
                }
                self.policy.set_trust(Trust::Trusted);
            }
            ApprovalAnswer::AllowOnce => self.policy.set_trust(Trust::Trusted),
            ApprovalAnswer::RejectOnce | ApprovalAnswer::RejectAlways => {
                self.policy.set_trust(Trust::Untrusted);
            }
            ApprovalAnswer::Cancelled => {
                self.trust_settled.store(false, Ordering::SeqCst);
                return false;
            }
        }
        true
    }
}
