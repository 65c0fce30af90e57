//! The permission engine: pure data and functions deciding whether a tool call runs.
//!
//! Principal types:
//! - [`Policy`]: the layered rules (manifest, project, session), the [`Mode`], the project's
//!   [`Trust`] and the session's answers; [`Policy::decide`] turns a [`Call`] into a
//!   [`Decision`], [`Policy::remember`] records an [`Answer`].
//! - [`Rule`] = ([`Permission`], [`Pattern`], [`Action`]), loaded from TOML files
//!   ([`RuleSet::parse`]) and validated when loaded; [`PolicyLayers`] gathers them with their
//!   [`RuleSource`].
//! - [`ApprovalKey`]: `(tool, key)` under which "always" answers are cached; keys of shell
//!   commands come from a real parse ([`shell::analyze`]).
//! - [`Watchdog`]: refusals rules cannot express (destruction outside the workspace,
//!   exfiltration, download-and-execute, privilege escalation, tampering with start-up files,
//!   Keel's configuration or git's executing configuration).
//! - [`Explanation`]: why, in one sentence, with the rule, its scope and file; [`render_check`]
//!   and [`render_rules`] are what `keel permissions check|list` print.
//!
//! The engine knows nothing of ACP. docs/permissions.md describes the rule format, the
//! decision order and the bundled defaults.

pub mod commands;
mod decide;
mod draft;
mod evaluate;
mod explain;
pub mod gitrepo;
pub mod grammar;
mod host_gate;
pub mod layers;
pub mod mode;
pub mod pattern;
mod read_only;
pub mod rule;
pub mod search_gate;
pub mod shell;
pub mod subject;
pub mod trust;
pub mod watchdog;
pub mod wrappers;

pub use decide::{LayerRules, ListedRule, Policy};
pub use explain::{Cause, Explanation, PRECEDENCE, RuleRef, render_check, render_rules};
pub use host_gate::PolicyHostGate;
pub use layers::{BUNDLED_POLICY, Layer, PROJECT_DIR, PolicyLayers, RULE_FILE, RuleSource};
pub use mode::{Mode, UnknownMode};
pub use pattern::{CommandClass, Pattern, PatternKind};
pub use rule::{Action, Capability, Permission, PolicyError, Rule, RuleSet};
pub use search_gate::PolicySearchGate;
pub use subject::ApprovalKey;
pub use trust::{
    PROJECT_CONFIG_FILES, Trust, TrustStatus, TrustStore, TrustedProject, project_fingerprint,
};
pub use watchdog::{Finding, Verdict, Watchdog, WatchdogCategory};

use crate::runtime::Runtime;
use crate::tool::view::code;
use crate::tool::{CallTarget, ToolSpec};

/// What the model is told when a call would need approval and no user is present.
pub const HEADLESS_DENIAL: &str = "Denied: this action needs the user's approval, and no user \
is present (headless run). Do not retry it; continue without it or explain what approval is \
needed.";

/// One tool call to decide: the tool's spec, what the call acts on (read by the tool from its
/// typed arguments, [`crate::tool::ParsedCall::target`]), the session's runtime.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub spec: &'a ToolSpec,
    pub target: &'a CallTarget,
    pub runtime: &'a Runtime,
}

/// The user's answer to a prompt: the one definition (the agent's [`crate::agent::ApprovalAnswer`]
/// is this or a cancelled prompt). Serialized as `allow_once` ... (session logs); typed as
/// `allow-once` ... ([`std::str::FromStr`], rule fixtures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    AllowOnce,
    /// Allow, and add session rules covering the decision's keys ([`Decision::always_scope`]).
    AllowAlways,
    RejectOnce,
    /// Reject, and add session deny rules for the keys that were asked about.
    RejectAlways,
}

impl std::str::FromStr for Answer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "allow-once" => Ok(Answer::AllowOnce),
            "allow-always" => Ok(Answer::AllowAlways),
            "reject-once" => Ok(Answer::RejectOnce),
            "reject-always" => Ok(Answer::RejectAlways),
            other => Err(format!(
                "unknown answer {other}: use allow-once, allow-always, reject-once or \
                 reject-always",
                other = code(other),
            )),
        }
    }
}

/// The engine's answer for one call.
#[derive(Debug, Clone)]
pub struct Decision {
    pub action: Action,
    pub explanation: Explanation,
    /// The call's approval keys (none when it cannot be cached).
    pub keys: Vec<ApprovalKey>,
    /// What an "allow always" answer would cover, in words ("commands starting with
    /// `cargo test`"); `None` unless the decision asks and the call can be cached.
    pub always_scope: Option<String>,
    pub tool: String,
    pub capability: Option<Capability>,
    pub(crate) proposals: Vec<subject::Proposal>,
    pub(crate) pending: Vec<String>,
    pub(crate) raw_command: Option<String>,
    pub(crate) headless: bool,
    /// The subject is a regular file with this many hard links (more than one): an approval
    /// also lets the call read it ([`crate::runtime::Runtime::allowing_linked_reads`]).
    pub hard_links: Option<u64>,
    /// The call asks to run outside the kernel sandbox (`unsandboxed: true`), and the sandbox
    /// is on: a prompt offers "Allow once without the sandbox"; an approval lets the call run
    /// unconfined ([`crate::runtime::Runtime::allowing_unconfined`]).
    pub unconfined: bool,
    /// A shell command allowed by Keel's own read-only classification alone: no answer, rule
    /// or mode of the user's names it. It runs contained (read-only, offline, credential files
    /// masked: [`crate::runtime::Runtime::contained`]), so a misclassified command can do no
    /// more than the `read` tool does without asking.
    pub contained: bool,
    /// For a contained call: the script that runs instead of the command as written, Keel's
    /// rendering of what it analysed ([`shell::render`]).
    pub rendered: Option<String>,
}

impl Decision {
    /// What the model is told when the call is denied: [`HEADLESS_DENIAL`] on a headless
    /// host, else the explanation. `None` when the call is not denied.
    pub fn message_for_model(&self) -> Option<String> {
        if self.action != Action::Deny {
            return None;
        }
        if self.headless && matches!(self.explanation.cause, Cause::Headless { .. }) {
            return Some(HEADLESS_DENIAL.to_owned());
        }
        Some(self.explanation.to_string())
    }
}
