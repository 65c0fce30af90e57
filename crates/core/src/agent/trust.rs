//! The first-use question about a project's own settings.
//!
//! Until the user trusts a project, its files may only make Keel stricter: allow rules, a
//! looser mode, providers, models and every other loosening setting are left out. When an
//! interactive session's project has such settings and the user has never said whether to
//! trust it (or its files changed since), the first turn asks once, through the host's approval
//! prompt, listing exactly what the project would change: "always" records the project with the
//! fingerprint of the files the user was shown, "once" trusts it for this session, a rejection
//! keeps the settings out. When the settings stay out (rejected, or a headless run), the session
//! says so once, as a [`AgentEvent::Notice`] the user sees.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::policy::Trust;
use crate::tool::ToolKind;

use super::session::Session;
use super::{AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, TurnHost};

/// The pseudo tool id of the trust question (what the host shows as the call's name).
pub const TRUST_QUESTION_ID: &str = "trust_project";

impl Session {
    /// What the project's files would change that does not apply now, one line each: the
    /// configuration's held-back settings and the ignored allow rules of both project files.
    pub fn ignored_project_settings(&self) -> Vec<String> {
        if self.policy.trust().is_trusted() {
            return Vec::new();
        }
        let mut lines: Vec<String> = self
            .project
            .ignored
            .iter()
            .filter(|line| !line.key.starts_with("permission["))
            .map(|line| line.text.clone())
            .collect();
        lines.extend(self.policy.ignored_project_allows());
        lines.extend(files_waiting_for_trust(self.runtime.root()));
        lines.into_iter().map(|line| one_item(&line)).collect()
    }

    /// Asks about the project's settings if that is still open, then tells the user once what
    /// stays ignored. Returns false when the question was cancelled (the turn ends as
    /// cancelled).
    pub(super) async fn settle_project_trust(
        &self,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
    ) -> bool {
        if self.trust_settled.swap(true, Ordering::SeqCst) {
            return true;
        }
        let ignored = self.ignored_project_settings();
        if ignored.is_empty() {
            return true;
        }
        if self.state.interactive && self.policy.trust() == Trust::Unknown {
            match self.ask_trust(host, cancel, &ignored).await {
                None => {
                    self.trust_settled.store(false, Ordering::SeqCst);
                    return false;
                }
                Some(true) => return true,
                Some(false) => {}
            }
        }
        host.event(AgentEvent::Notice {
            text: notice(&self.runtime.root().display().to_string(), &ignored),
        });
        true
    }

    /// The question itself: `Some(true)` when the user trusts the project, `Some(false)` when
    /// not, `None` when cancelled.
    async fn ask_trust(
        &self,
        host: &Arc<dyn TurnHost>,
        cancel: &CancellationToken,
        ignored: &[String],
    ) -> Option<bool> {
        let workspace = self.runtime.root().display().to_string();
        let request = ApprovalRequest {
            call_id: format!("{TRUST_QUESTION_ID}-{}", self.id),
            tool_id: TRUST_QUESTION_ID.to_owned(),
            kind: ToolKind::Other,
            args: json!({ "workspace": workspace, "changes": ignored }),
            view: crate::tool::CallView {
                title: "Trust this project's settings?".into(),
                locations: Vec::new(),
            },
            preview: None,
            reason: format!(
                "This project's .keel files would change Keel's settings:\n- {}\n\
                 Trust the project so that they apply? Until then Keel ignores them (settings \
                 that only make Keel stricter apply either way).",
                ignored.join("\n- ")
            ),
            why: String::new(),
            always_scope: Some(
                "this project while its .keel files stay as they are, remembered across sessions"
                    .to_owned(),
            ),
            unconfined: false,
        };
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => ApprovalAnswer::Cancelled,
            answer = host.approve(request) => answer,
        };
        match answer {
            ApprovalAnswer::Answered(Answer::AllowAlways) => {
                if let Some(store) = &self.trust_store {
                    let recorded = match &self.project.fingerprint {
                        Some(fingerprint) => {
                            store.trust_fingerprint(self.runtime.root(), fingerprint)
                        }
                        None => store.trust(self.runtime.root()),
                    };
                    if let Err(error) = recorded {
                        tracing::warn!(%error, "cannot record the project as trusted");
                    }
                }
                Some(self.apply_trust(host))
            }
            ApprovalAnswer::Answered(Answer::AllowOnce) => Some(self.apply_trust(host)),
            ApprovalAnswer::Answered(Answer::RejectOnce)
            | ApprovalAnswer::Answered(Answer::RejectAlways) => {
                self.policy.set_trust(Trust::Untrusted);
                Some(false)
            }
            ApprovalAnswer::Cancelled => None,
        }
    }

    /// Trusts the project for this session: its allow rules apply, and, read again trusted,
    /// its mode (unless the front-end chose one) and its model and providers. Only when its
    /// files are still those the session read and the question listed (the session's
    /// fingerprint): settings read again after a change (a checkout while the question was
    /// open) were never shown, so nothing applies, the user is told, and the next session asks
    /// again. False then.
    fn apply_trust(&self, host: &Arc<dyn TurnHost>) -> bool {
        // Read again first, then compared: what was read is what the fingerprint covers.
        let loaded = self
            .config
            .config_rules
            .as_ref()
            .map(|config_rules| config_rules(self.runtime.root(), true));
        let now = crate::policy::project_fingerprint(self.runtime.root()).ok();
        if now.is_none() || now != self.project.fingerprint {
            self.policy.set_trust(Trust::Untrusted);
            host.event(AgentEvent::Notice {
                text: format!(
                    "The project's .keel files (or the files trust covers) changed while Keel \
                     asked whether to trust them, so none of their settings apply to this \
                     session: what changed was never shown. A new session asks again about \
                     the files as they are then ({}).\n",
                    self.runtime.root().display()
                ),
            });
            return false;
        }
        self.policy.set_trust(Trust::Trusted);
        let Some(loaded) = loaded else {
            return true;
        };
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::warn!(%error, "cannot re-read the trusted project's settings");
                return true;
            }
        };
        if !self.project.mode_overridden
            && let Some(mode) = loaded.mode
        {
            self.policy.set_mode(mode);
        }
        let project_model = self
            .project
            .ignored
            .iter()
            .any(|line| line.key == "model" || line.key.starts_with("providers."));
        if !project_model
            || self.config.provider_override.is_some()
            || self.model_chosen.load(Ordering::SeqCst)
        {
            return true;
        }
        crate::runtime::secrets::register_credential_vars(
            loaded
                .providers
                .iter()
                .filter_map(|p| p.api_key_env.clone()),
        );
        let env = self.config.env.clone();
        let lookup = move |key: &str| env(key);
        match crate::provider::resolve_model(loaded.model.as_deref(), &lookup, &loaded.providers) {
            Ok((provider, model)) => {
                let name = loaded
                    .model
                    .clone()
                    .unwrap_or_else(|| format!("{}/{model}", provider.id()));
                tracing::info!(model = %name, "the trusted project's model applies to this session");
                self.replace_model(super::ModelSlot::ready(name, provider, model));
            }
            Err(error) => {
                tracing::warn!(%error, "the trusted project's model does not resolve");
            }
        }
        true
    }
}

/// A line of the trust question as exactly one item: project strings are quoted and escaped
/// where they are put in; a line that still holds a newline, a control or a bidi character
/// (a string that reached it unquoted) is escaped whole.
fn one_item(line: &str) -> String {
    if line.chars().any(crate::tool::view::is_display_control) {
        crate::tool::view::escaped(line)
    } else {
        line.to_owned()
    }
}

/// The message telling the user what an untrusted project's files ask for and did not get.
pub fn notice(workspace: &str, ignored: &[String]) -> String {
    format!(
        "Keel ignored these settings of the untrusted project {workspace}:\n- {}\n\
         Run `keel trust grant` in the project to apply them.\n",
        ignored.join("\n- ")
    )
}

/// The project files besides its settings that wait for trust, one line each: its skills, its
/// agent definitions and its tool files (which name programs to run). What the trust question
/// and `keel trust` list.
pub fn files_waiting_for_trust(workspace: &Path) -> Vec<String> {
    let mut lines = crate::skills::waiting_for_trust(workspace);
    lines.extend(super::subagent::agents_waiting_for_trust(workspace));
    lines.extend(crate::tools::extension::waiting_for_trust(workspace));
    lines
}
