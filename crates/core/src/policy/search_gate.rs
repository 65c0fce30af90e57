//! [`PolicySearchGate`]: the policy's answer to "may this search read the file it found?".
//!
//! `grep` and `glob` are decided once, on the path the call names (usually a directory). The
//! files their walk finds below it are decided here, one by one, exactly as a read of that
//! file by the same tool would be: a file whose read would be allowed is searched, one whose
//! read would be asked (a `.env` file, a credential the watchdog knows, a hard-linked file) is
//! shown by name only, one whose read is denied is left out. Whatever the call's glob or type
//! filters re-include, a search therefore never shows content the read tool would have asked
//! for.
//!
//! The gate decides on the name alone and touches no file: the path is the one the search's
//! walk reached (not resolved again), and a hard-linked file, which a read would ask for, is
//! told apart by the search itself from the descriptor it reads (`grep` names it instead of
//! searching it; `glob` lists names, which links do not hide).

use std::path::Path;
use std::sync::Arc;

use super::{Action, Call, Cause, Policy};
use crate::runtime::{Runtime, SearchAccess, SearchGate};
use crate::tool::{CallTarget, Subject, ToolSpec};

/// The gate the engine installs for each call ([`Runtime::with_search_gate`]).
#[derive(Debug, Clone)]
pub struct PolicySearchGate {
    policy: Arc<Policy>,
    spec: ToolSpec,
}

impl PolicySearchGate {
    /// The gate for calls of the tool `spec` under `policy`.
    pub fn new(policy: Arc<Policy>, spec: ToolSpec) -> Self {
        Self { policy, spec }
    }
}

impl SearchGate for PolicySearchGate {
    fn access(&self, runtime: &Runtime, canonical: &Path) -> SearchAccess {
        let Subject::Path(Some(_)) = &self.spec.subject else {
            // A tool without a path argument cannot be asked about one path: name only.
            return SearchAccess::NameOnly;
        };
        let Some(path) = canonical.to_str() else {
            // Not UTF-8: the policy could only see a lossy spelling of it.
            return SearchAccess::NameOnly;
        };
        let target = CallTarget::Path(path.to_owned());
        let decision = self.policy.decide_found(
            &Call {
                spec: &self.spec,
                target: &target,
                runtime,
            },
            canonical,
        );
        match decision.action {
            Action::Allow => SearchAccess::Read,
            Action::Ask => SearchAccess::NameOnly,
            // Headless turns every prompt into a denial; the name is still harmless.
            Action::Deny if matches!(decision.explanation.cause, Cause::Headless { .. }) => {
                SearchAccess::NameOnly
            }
            Action::Deny => SearchAccess::Hidden,
        }
    }
}
