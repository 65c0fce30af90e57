//! [`Policy`]: the layered rules, the mode, the trust and the session's answers, and
//! [`Policy::decide`], which runs the decision order:
//!
//! 1. the capability check (the runtime's scope: paths, hosts, commands);
//! 2. the rules (most specific match wins; a manifest deny is final; untrusted project allow
//!    rules are ignored), then the mode (`ask`, `allowlist`, `yolo`, `read-only`);
//! 3. the watchdog (deny, or escalate an allow to a prompt);
//! 4. headless: a prompt becomes a denial with [`HEADLESS_DENIAL`](super::HEADLESS_DENIAL).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::draft::{Draft, checked_subject};
use super::evaluate::evaluate_call;
use super::explain::{Cause, Explanation};
use super::layers::{Layer, PROJECT_DIR, PolicyLayers, RULE_FILE, RuleSource};
use super::mode::Mode;
use super::pattern::Pattern;
use super::read_only::is_read_only;
use super::rule::{Action, Capability, Permission, PolicyError, Rule, RuleSet};
use super::shell::ShellContext;
use super::subject::{ApprovalKey, CallSubject, Proposal, capability_of, join_wordings, proposals};
use super::trust::Trust;
use super::watchdog::Watchdog;
use super::{Answer, Call, Decision};
use crate::runtime::config_files;

/// The permission engine of one session. `Send + Sync`; the mode, trust and session answers
/// sit behind a mutex.
#[derive(Debug)]
pub struct Policy {
    manifest: Vec<RuleSet>,
    project: Option<RuleSet>,
    home: Option<PathBuf>,
    protected: Vec<PathBuf>,
    headless: bool,
    state: Mutex<State>,
    /// A subagent's policy: the session's live policy, consulted on every decision (its mode,
    /// trust and answers as they are now; the stricter of the two applies).
    parent: Option<std::sync::Arc<Policy>>,
    /// Counts the changes of `state` (bumped while it is locked), so that what was compiled
    /// from a snapshot of it ([`super::PolicySearchGate`]) can tell it is still current.
    changes: AtomicU64,
}

#[derive(Debug)]
struct State {
    mode: Mode,
    trust: Trust,
    session: Vec<Rule>,
    /// Keys the user answered "always allow without the sandbox" for (this session only).
    unconfined: Vec<ApprovalKey>,
}

/// The rules of one layer, for `keel permissions list` and `/permissions`.
#[derive(Debug, Clone)]
pub struct LayerRules {
    pub layer: Layer,
    pub rules: Vec<ListedRule>,
}

/// One listed rule.
#[derive(Debug, Clone)]
pub struct ListedRule {
    pub rule: Rule,
    /// A project allow rule while the project is not trusted.
    pub ignored: bool,
}

impl Policy {
    /// Builds the engine. Headless hosts treat a project whose trust is unknown as untrusted.
    pub fn new(layers: PolicyLayers, mode: Mode, headless: bool) -> Result<Self, PolicyError> {
        for set in &layers.manifest {
            if set.source.layer() != Layer::Manifest {
                return Err(PolicyError::Syntax {
                    origin: set.source.to_string(),
                    message: "manifest rules must come from the bundled defaults or the global \
                              file"
                        .to_owned(),
                });
            }
        }
        if let Some(set) = &layers.project
            && set.source.layer() != Layer::Project
        {
            return Err(PolicyError::Syntax {
                origin: set.source.to_string(),
                message: "project rules must come from the project's file".to_owned(),
            });
        }
        let trust = if headless && layers.trust == Trust::Unknown {
            Trust::Untrusted
        } else {
            layers.trust
        };
        Ok(Self {
            manifest: layers.manifest,
            project: layers.project,
            // Where the home directory finally points: the paths decided are canonical, so
            // `~/` rules and the watchdog's home checks see them from the canonical home (a
            // `$HOME` through a symlink, `/home` -> `/var/home`, would match none of them).
            home: layers
                .home
                .map(|home| crate::runtime::paths::resolve(&home).unwrap_or(home)),
            protected: layers.protected,
            headless,
            state: Mutex::new(State {
                mode,
                trust,
                session: Vec::new(),
                unconfined: Vec::new(),
            }),
            parent: None,
            changes: AtomicU64::new(0),
        })
    }

    /// The bundled defaults plus `<global_config_dir>/permissions.toml` and
    /// `<workspace>/.keel/permissions.toml` when they exist.
    pub fn load(
        workspace: &Path,
        global_config_dir: Option<&Path>,
        mode: Mode,
        headless: bool,
        trust: Trust,
    ) -> Result<Self, PolicyError> {
        Self::new(
            PolicyLayers::load(workspace, global_config_dir, trust)?,
            mode,
            headless,
        )
    }

    /// The policy of a subagent: the same layers and headless flag, bound to this (the
    /// session's) policy for as long as the child lives: every decision reads the session's
    /// mode, trust and answers as they are then and applies the stricter mode and trust of the
    /// two, so a mode change or a "reject always" given after the child started reaches it
    /// (a background child included). `mode` (an agent definition's) only makes the child
    /// stricter. Answers given in the child stay in the child.
    pub fn child(self: &std::sync::Arc<Self>, mode: Option<Mode>) -> Policy {
        let state = self.lock();
        Policy {
            manifest: self.manifest.clone(),
            project: self.project.clone(),
            home: self.home.clone(),
            protected: self.protected.clone(),
            headless: self.headless,
            state: Mutex::new(State {
                mode: mode.unwrap_or(Mode::Yolo),
                trust: Trust::Trusted,
                session: Vec::new(),
                unconfined: state.unconfined.clone(),
            }),
            parent: Some(self.clone()),
            changes: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, locked for a change: the change counter moves before the lock is released.
    fn lock_to_change(&self) -> MutexGuard<'_, State> {
        let state = self.lock();
        self.changes.fetch_add(1, Ordering::AcqRel);
        state
    }

    /// A number that changes whenever the mode, trust or answers that decide
    /// ([`Policy::live`]) may have changed: this policy's and its session's.
    pub(crate) fn changes(&self) -> u64 {
        let own = self.changes.load(Ordering::Acquire);
        self.parent
            .as_ref()
            .map_or(own, |parent| own.wrapping_add(parent.changes()))
    }

    /// The mode, trust and answers that decide now: this policy's own, and for a subagent's
    /// the stricter mode and trust of its own and its session's (live), with the session's
    /// answers before its own.
    pub(super) fn live(&self) -> (Mode, Trust, Vec<Rule>, Vec<ApprovalKey>) {
        let (mode, trust, session, unconfined) = {
            let state = self.lock();
            (
                state.mode,
                state.trust,
                state.session.clone(),
                state.unconfined.clone(),
            )
        };
        let Some(parent) = &self.parent else {
            return (mode, trust, session, unconfined);
        };
        let (parent_mode, parent_trust, mut rules, _) = parent.live();
        rules.extend(session);
        let trust = if trust.is_trusted() {
            parent_trust
        } else {
            trust
        };
        (mode.within(parent_mode), trust, rules, unconfined)
    }

    pub fn mode(&self) -> Mode {
        self.live().0
    }

    pub fn set_mode(&self, mode: Mode) {
        self.lock_to_change().mode = mode;
    }

    pub fn trust(&self) -> Trust {
        self.live().1
    }

    /// Changes the project's trust (after the user answered the trust prompt).
    pub fn set_trust(&self, trust: Trust) {
        self.lock_to_change().trust = trust;
    }

    pub fn headless(&self) -> bool {
        self.headless
    }

    /// The rules added by "always" answers, oldest first.
    pub fn session_rules(&self) -> Vec<Rule> {
        self.lock().session.clone()
    }

    /// Forgets every answer of the session.
    pub fn clear_session(&self) {
        let mut state = self.lock_to_change();
        state.session.clear();
        state.unconfined.clear();
    }

    /// Every rule by layer: session, project, manifest.
    pub fn rules_by_layer(&self) -> Vec<LayerRules> {
        let state = self.lock();
        let trusted = state.trust.is_trusted();
        let list = |rules: &mut dyn Iterator<Item = &Rule>| -> Vec<ListedRule> {
            rules
                .map(|rule| ListedRule {
                    ignored: rule.source.layer() == Layer::Project
                        && rule.action == Action::Allow
                        && !trusted,
                    rule: rule.clone(),
                })
                .collect()
        };
        vec![
            LayerRules {
                layer: Layer::Session,
                rules: list(&mut state.session.iter()),
            },
            LayerRules {
                layer: Layer::Project,
                rules: list(&mut self.project.iter().flat_map(|s| s.rules.iter())),
            },
            LayerRules {
                layer: Layer::Manifest,
                rules: list(&mut self.manifest.iter().flat_map(|s| s.rules.iter())),
            },
        ]
    }

    /// The project's allow rules that do not apply because the project is not trusted, each as
    /// "allows …" (what trusting the project would change).
    pub fn ignored_project_allows(&self) -> Vec<String> {
        self.rules_by_layer()
            .into_iter()
            .filter(|layer| layer.layer == Layer::Project)
            .flat_map(|layer| layer.rules)
            .filter(|listed| listed.ignored)
            .map(|listed| {
                use crate::tool::view::quoted;
                let rule = &listed.rule;
                let pattern = &rule.pattern;
                let what = match pattern.kind() {
                    super::pattern::PatternKind::Any => "everything".to_owned(),
                    super::pattern::PatternKind::Exact | super::pattern::PatternKind::Glob => {
                        format!("pattern {}", quoted(pattern.text()))
                    }
                    super::pattern::PatternKind::Prefix => {
                        format!("prefix {}", quoted(pattern.text()))
                    }
                    super::pattern::PatternKind::Class => {
                        format!("class {}", quoted(pattern.text()))
                    }
                };
                format!("allows {} {what}", quoted(&rule.permission.to_string()))
            })
            .collect()
    }

    /// Decides one call.
    pub fn decide(&self, call: &Call<'_>) -> Decision {
        self.decide_with(call, true, Target::Subject(None), true)
    }

    /// Decides one call whose subject path the engine already resolved (`canonical`), so the
    /// path is not resolved again.
    pub fn decide_resolved(
        &self,
        call: &Call<'_>,
        canonical: Option<&std::path::Path>,
    ) -> Decision {
        self.decide_with(call, true, Target::Subject(canonical), true)
    }

    /// Decides a call acting on several files ([`crate::tool::Subject::Paths`], a patch): each
    /// file is decided as the subject of a write by this tool (`user` as written, `canonical`
    /// as the engine resolved it), and the call gets the strictest decision: a denial of any
    /// file denies it; otherwise a prompt for any file asks (about all of them: every file's
    /// approval keys, "always" offered only when no file is asked about every time); otherwise
    /// it is allowed.
    pub fn decide_paths(&self, call: &Call<'_>, files: &[(&str, &std::path::Path)]) -> Decision {
        let decisions: Vec<Decision> = files
            .iter()
            .map(|(user, canonical)| {
                self.decide_with(call, true, Target::File { user, canonical }, true)
            })
            .collect();
        strictest(decisions).unwrap_or_else(|| self.decide(call))
    }

    /// Decides a read of a file a search found (`canonical`, reached by the search's walk, so
    /// not resolved again), without its approval keys and "always" scope (compiling those costs
    /// more than the decision itself) and without counting its hard links, which the search
    /// takes from the descriptor it reads ([`super::PolicySearchGate`]). Touches no file.
    pub(crate) fn decide_found(&self, call: &Call<'_>, canonical: &std::path::Path) -> Decision {
        self.decide_with(call, false, Target::Subject(Some(canonical)), false)
    }

    /// What decides a read by `tool` (of `capability`) now, for [`super::PolicySearchGate`]'s
    /// compiled reader: the change counter first (so a change made while the snapshot is
    /// taken leaves it stale, never wrong), the mode, the trust, every rule whose permission
    /// names the tool or capability (in the order [`Policy::decide`] sees them) and the home
    /// directory.
    pub(super) fn read_snapshot(&self, tool: &str, capability: Option<Capability>) -> ReadSnapshot {
        let changes = self.changes();
        let (mode, trust, session, _) = self.live();
        let rules = self
            .manifest
            .iter()
            .flat_map(|s| s.rules.iter())
            .chain(self.project.iter().flat_map(|s| s.rules.iter()))
            .chain(session.iter())
            .filter(|rule| rule.permission.matches(tool, capability))
            .cloned()
            .collect();
        ReadSnapshot {
            changes,
            mode,
            trusted: trust.is_trusted(),
            rules,
            home: self.home.clone(),
        }
    }

    /// The decision order (the module's overview): the capability check, the rules and the
    /// mode, the watchdog, hard links, running unconfined, headless. Each step is a function of
    /// its own, working on one [`Draft`].
    fn decide_with(
        &self,
        call: &Call<'_>,
        cacheable: bool,
        target: Target<'_>,
        count_links: bool,
    ) -> Decision {
        // A snapshot: resolving paths touches the file system, which is no place to hold a lock.
        // A subagent's reads its session's policy as it is now.
        let (mode, trust, session, unconfined_keys) = self.live();
        // A tool decided as another (`bg_start` as `bash`) gets that tool's rules and keys.
        let tool = call.spec.policy_id().to_owned();
        let capability = capability_of(call.spec);
        let context = ShellContext {
            roots: call.runtime.roots(),
            home: self.home.as_deref(),
            runtime: Some(call.runtime),
            scratch: Some(call.runtime.scratch_dir()),
        };
        let watchdog = Watchdog {
            context,
            protected: &self.protected,
        };
        let mut decision = self.denied(&tool, capability);

        // 1. The capability check.
        let subject = match checked_subject(call, &context, target, capability) {
            Ok(subject) => subject,
            Err(cause) => {
                decision.explanation.cause = *cause;
                return decision;
            }
        };
        if cacheable {
            decision.proposals = proposals(&tool, capability, &subject);
        }
        decision.keys = decision
            .proposals
            .iter()
            .map(|p| ApprovalKey {
                tool: tool.clone(),
                key: p.key.clone(),
            })
            .collect();
        if let CallSubject::Command { raw, .. } = &subject {
            decision.raw_command = Some(raw.clone());
        }

        // 2. Rules, then the mode.
        let rules: Vec<&Rule> = self
            .manifest
            .iter()
            .flat_map(|s| s.rules.iter())
            .chain(self.project.iter().flat_map(|s| s.rules.iter()))
            .chain(session.iter())
            .collect();
        let outcome = evaluate_call(
            &rules,
            trust.is_trusted(),
            &tool,
            capability,
            &subject,
            &watchdog,
        );
        let session_only = outcome.session_only;
        let mut draft = Draft {
            action: outcome.action,
            cause: outcome.cause,
            notes: outcome.notes,
            classifier_only: outcome.classifier_only,
            escalated: false,
            rendered: None,
        };
        decision.pending = outcome.pending;
        draft.render(&subject, &mut decision.pending);
        let gated = !matches!(capability, Some(Capability::FsRead) | None) || call.spec.mutating;
        let mutating = match &subject {
            CallSubject::Command { analysis, .. } => {
                !analysis.is_plain()
                    || analysis
                        .commands()
                        .filter(|c| !c.container)
                        .any(|c| !is_read_only(c, &context, &watchdog))
            }
            _ => call.spec.mutating,
        };
        draft.apply_mode(mode, gated && !session_only, mutating, &tool, &subject);

        // 3. The watchdog.
        draft.watch(&watchdog, capability, &subject);
        // 3b. Hard links.
        if count_links {
            decision.hard_links = draft.hard_links(call, &subject);
        }
        // 3c. Running outside the kernel sandbox.
        decision.unconfined =
            draft.unconfined(call, mode, &subject, &decision.keys, &unconfined_keys);

        // 4. Headless.
        self.finish(decision, draft, &subject)
    }

    /// A denial for want of a rule: where every decision starts.
    fn denied(&self, tool: &str, capability: Option<Capability>) -> Decision {
        Decision {
            action: Action::Deny,
            explanation: Explanation {
                action: Action::Deny,
                cause: Cause::NoRule {
                    subject: tool.to_owned(),
                },
                notes: Vec::new(),
            },
            keys: Vec::new(),
            always_scope: None,
            tool: tool.to_owned(),
            capability,
            proposals: Vec::new(),
            pending: Vec::new(),
            raw_command: None,
            headless: self.headless,
            hard_links: None,
            unconfined: false,
            contained: false,
            rendered: None,
        }
    }

    /// The last step: headless turns a prompt into a denial; the "always" scope of a plain
    /// prompt; a call allowed without anyone's word for it runs contained.
    fn finish(&self, mut decision: Decision, draft: Draft, subject: &CallSubject) -> Decision {
        let Draft {
            mut action,
            mut cause,
            notes,
            classifier_only,
            escalated,
            rendered,
        } = draft;
        if action == Action::Ask && self.headless {
            cause = Cause::Headless {
                asked_because: Box::new(cause),
            };
            action = Action::Deny;
        }
        if action == Action::Ask && !escalated {
            decision.always_scope = join_wordings(&decision.proposals);
        }
        // Allowed without anyone's word for it: contained (a yolo allow is the user's mode,
        // an escalated or remembered call was answered by them).
        decision.contained = action == Action::Allow
            && classifier_only
            && !escalated
            && !decision.unconfined
            && matches!(subject, CallSubject::Command { .. })
            && matches!(cause, Cause::Rule { .. });
        if decision.contained {
            decision.rendered = rendered;
        }
        decision.action = action;
        decision.explanation = Explanation {
            action,
            cause,
            notes,
        };
        decision
    }

    /// Every rule that may decide a command's host, whether the project is trusted, the mode
    /// ([`super::host_gate`]).
    pub(super) fn host_rules(&self) -> (Vec<Rule>, bool, Mode) {
        let state = self.lock();
        let rules = self
            .manifest
            .iter()
            .flat_map(|s| s.rules.iter())
            .chain(self.project.iter().flat_map(|s| s.rules.iter()))
            .chain(state.session.iter())
            .cloned()
            .collect();
        (rules, state.trust.is_trusted(), state.mode)
    }

    /// Records the user's answer. "Always" answers add session rules: allow rules for the
    /// decision's keys (only when it could be cached), deny rules for the keys that were asked
    /// about (or, for a line without keys, for its exact text).
    pub fn remember(&self, decision: &Decision, answer: Answer) {
        let mut state = self.lock_to_change();
        let additions: Vec<(Pattern, Action)> = match answer {
            Answer::AllowOnce | Answer::RejectOnce => Vec::new(),
            Answer::AllowAlways => {
                if decision.always_scope.is_none() {
                    Vec::new()
                } else {
                    decision
                        .proposals
                        .iter()
                        .map(|p| (p.pattern.clone(), Action::Allow))
                        .collect()
                }
            }
            Answer::RejectAlways => {
                let pending: Vec<&Proposal> = decision
                    .proposals
                    .iter()
                    .filter(|p| decision.pending.contains(&p.key))
                    .collect();
                let chosen: Vec<&Proposal> = if pending.is_empty() {
                    decision.proposals.iter().collect()
                } else {
                    pending
                };
                if chosen.is_empty() {
                    decision
                        .raw_command
                        .iter()
                        // A line too long to analyse is matched by its first part (as
                        // `evaluate` matches it), so the rule stays bounded.
                        .map(|raw| {
                            let raw = super::shell::clip(raw, super::shell::MAX_SCRIPT_BYTES);
                            (Pattern::exact(raw), Action::Deny)
                        })
                        .collect()
                } else {
                    chosen
                        .into_iter()
                        .map(|p| (p.pattern.clone(), Action::Deny))
                        .collect()
                }
            }
        };
        if decision.unconfined && answer == Answer::AllowAlways && decision.always_scope.is_some() {
            for key in &decision.keys {
                if !state.unconfined.contains(key) {
                    state.unconfined.push(key.clone());
                }
            }
        }
        for (pattern, action) in additions {
            let permission = Permission::Tool(decision.tool.clone());
            state
                .session
                .retain(|r| !(r.permission == permission && r.pattern == pattern));
            let mut rule = Rule::new(permission, pattern, action, RuleSource::Session);
            rule.reason = Some(format!(
                "answered \"{} always\"",
                if action == Action::Allow {
                    "allow"
                } else {
                    "reject"
                }
            ));
            state.session.push(rule);
        }
    }

    /// Appends the decision's rules to `<workspace>/.keel/permissions.toml` (created if
    /// missing; existing content kept). The action is the session's answer for that key when
    /// there is one, else allow. Returns the file's path. The rules take effect in later
    /// sessions, and allow rules only while the project is trusted.
    pub fn persist_to_project(
        &self,
        decision: &Decision,
        workspace: &Path,
    ) -> Result<PathBuf, PolicyError> {
        if decision.proposals.is_empty() {
            return Err(PolicyError::NotCacheable(format!(
                "the `{}` call has no approval key (it is asked every time)",
                decision.tool
            )));
        }
        let state = self.lock();
        let permission = Permission::Tool(decision.tool.clone());
        let mut text = String::new();
        for proposal in &decision.proposals {
            let action = state
                .session
                .iter()
                .rev()
                .find(|r| r.permission == permission && r.pattern == proposal.pattern)
                .map_or(Action::Allow, |r| r.action);
            let mut rule = Rule::new(
                permission.clone(),
                proposal.pattern.clone(),
                action,
                RuleSource::Session,
            );
            rule.reason = Some(format!("saved from a session answer: {}", proposal.wording));
            text.push('\n');
            text.push_str(&rule.to_toml());
        }
        drop(state);
        let path = workspace.join(PROJECT_DIR).join(RULE_FILE);
        let existing = config_files::read_if_exists(&path).map_err(|source| PolicyError::Read {
            path: path.clone(),
            source,
        })?;
        let mut content = existing.unwrap_or_else(|| {
            "# Keel permission rules for this project (see docs/permissions.md).\n".to_owned()
        });
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&text);
        // Never write a file that would not load.
        RuleSet::parse(&content, RuleSource::Project(path.clone()))?;
        config_files::write_atomically(&path, &content).map_err(|source| PolicyError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

/// [`Policy::read_snapshot`].
#[derive(Debug, Clone)]
pub(super) struct ReadSnapshot {
    pub(super) changes: u64,
    pub(super) mode: Mode,
    pub(super) trusted: bool,
    pub(super) rules: Vec<Rule>,
    pub(super) home: Option<PathBuf>,
}

/// What a decision is about: the call's subject (its path resolved by the engine, when it has
/// one), or one file of a multi-file call.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target<'a> {
    Subject(Option<&'a std::path::Path>),
    File {
        user: &'a str,
        canonical: &'a std::path::Path,
    },
}

/// The strictest of per-file decisions (see [`Policy::decide_paths`]); `None` for no file.
fn strictest(decisions: Vec<Decision>) -> Option<Decision> {
    let files = decisions.len();
    let headline = decisions
        .iter()
        .position(|d| d.action == Action::Deny)
        .or_else(|| {
            // A file asked every time (the watchdog, hard links) says more than a plain ask.
            decisions
                .iter()
                .position(|d| d.action == Action::Ask && d.always_scope.is_none())
        })
        .or_else(|| decisions.iter().position(|d| d.action == Action::Ask))
        .unwrap_or(0);
    let asked = decisions.iter().filter(|d| d.action == Action::Ask).count();
    let every_asked_cacheable = decisions
        .iter()
        .filter(|d| d.action == Action::Ask)
        .all(|d| d.always_scope.is_some());
    let mut proposals: Vec<Proposal> = Vec::new();
    let mut keys: Vec<ApprovalKey> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut hard_links: Option<u64> = None;
    for decision in &decisions {
        for proposal in &decision.proposals {
            if !proposals.iter().any(|p| p.key == proposal.key) {
                proposals.push(proposal.clone());
            }
        }
        for key in &decision.keys {
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
        pending.extend(decision.pending.iter().cloned());
        hard_links = hard_links.max(decision.hard_links);
    }
    let mut decision = decisions.into_iter().nth(headline)?;
    if files > 1 {
        let note = match decision.action {
            Action::Deny => format!("the call changes {files} files; this one decides it"),
            Action::Ask if asked > 1 => {
                format!("{asked} of the {files} files the call changes are asked about")
            }
            _ => format!("the call changes {files} files"),
        };
        decision.explanation.notes.push(note);
    }
    if decision.action != Action::Deny {
        decision.always_scope = (decision.action == Action::Ask && every_asked_cacheable)
            .then(|| join_wordings(&proposals))
            .flatten();
        decision.proposals = proposals;
        decision.keys = keys;
        decision.pending = pending;
        decision.hard_links = hard_links;
    }
    Some(decision)
}
