//! [`Policy`]: the layered rules, the mode, the trust and the session's answers, and
//! [`Policy::decide`], which runs the decision order:
//!
//! 1. the capability check (the runtime's scope: paths, hosts, commands);
//! 2. the rules (most specific match wins; a manifest deny is final; untrusted project allow
//!    rules are ignored), then the mode (`ask`, `allowlist`, `yolo`, `read-only`);
//! 3. the watchdog (deny, or escalate an allow to a prompt);
//! 4. headless: a prompt becomes a denial with [`HEADLESS_DENIAL`](super::HEADLESS_DENIAL).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::commands::{read_only_entry, read_only_words};
use super::explain::{Cause, Explanation, RuleRef};
use super::layers::{PROJECT_DIR, PolicyLayers, RULE_FILE, Scope, Source};
use super::mode::Mode;
use super::rule::{Action, Capability, Permission, PolicyError, Rule, RuleSet, Target, base_name};
use super::shell::{Cwd, Place, ShellContext, SimpleCommand, is_harmless_device};
use super::subject::{
    ApprovalKey, CallSubject, Proposal, capability_of, join_wordings, proposals, subject_of,
};
use super::trust::Trust;
use super::watchdog::{Verdict, Watchdog};
use super::wrappers::PRIVILEGE_WRAPPERS;
use super::{Answer, Call, Decision};
use crate::capability::Access;
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
}

#[derive(Debug)]
struct State {
    mode: Mode,
    trust: Trust,
    session: Vec<Rule>,
}

/// The rules of one scope, for `keel permissions list` and `/permissions`.
#[derive(Debug, Clone)]
pub struct ScopeRules {
    pub scope: Scope,
    pub rules: Vec<ListedRule>,
}

/// One listed rule.
#[derive(Debug, Clone)]
pub struct ListedRule {
    pub rule: Rule,
    /// A project allow rule while the project is not trusted.
    pub ignored: bool,
}

/// The winner of one rule evaluation.
struct Evaluation<'r> {
    winner: Option<&'r Rule>,
    manifest_final: bool,
    ignored: Vec<&'r Rule>,
}

impl Evaluation<'_> {
    fn action(&self) -> Action {
        self.winner.map_or(Action::Ask, |r| r.action)
    }
}

/// What the rules say about a whole call.
struct Outcome {
    action: Action,
    cause: Cause,
    notes: Vec<String>,
    /// Keys the rules did not allow (what a "reject always" answer is about).
    pending: Vec<String>,
    /// Every allowing rule is a session answer (mode `ask` keeps those).
    session_only: bool,
}

impl Policy {
    /// Builds the engine. Headless hosts treat a project whose trust is unknown as untrusted.
    pub fn new(layers: PolicyLayers, mode: Mode, headless: bool) -> Result<Self, PolicyError> {
        for set in &layers.manifest {
            if set.source.scope() != Scope::Manifest {
                return Err(PolicyError::Syntax {
                    origin: set.source.to_string(),
                    message: "manifest rules must come from the bundled defaults or the global \
                              file"
                        .to_owned(),
                });
            }
        }
        if let Some(set) = &layers.project
            && set.source.scope() != Scope::Project
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
            home: layers.home,
            protected: layers.protected,
            headless,
            state: Mutex::new(State {
                mode,
                trust,
                session: Vec::new(),
            }),
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

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn mode(&self) -> Mode {
        self.lock().mode
    }

    pub fn set_mode(&self, mode: Mode) {
        self.lock().mode = mode;
    }

    pub fn trust(&self) -> Trust {
        self.lock().trust
    }

    /// Changes the project's trust (after the user answered the trust prompt).
    pub fn set_trust(&self, trust: Trust) {
        self.lock().trust = trust;
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
        self.lock().session.clear();
    }

    /// Every rule by scope: session, project, manifest.
    pub fn rules_by_scope(&self) -> Vec<ScopeRules> {
        let state = self.lock();
        let trusted = state.trust.is_trusted();
        let list = |rules: &mut dyn Iterator<Item = &Rule>| -> Vec<ListedRule> {
            rules
                .map(|rule| ListedRule {
                    ignored: rule.source.scope() == Scope::Project
                        && rule.action == Action::Allow
                        && !trusted,
                    rule: rule.clone(),
                })
                .collect()
        };
        vec![
            ScopeRules {
                scope: Scope::Session,
                rules: list(&mut state.session.iter()),
            },
            ScopeRules {
                scope: Scope::Project,
                rules: list(&mut self.project.iter().flat_map(|s| s.rules.iter())),
            },
            ScopeRules {
                scope: Scope::Manifest,
                rules: list(&mut self.manifest.iter().flat_map(|s| s.rules.iter())),
            },
        ]
    }

    /// Decides one call.
    pub fn decide(&self, call: &Call<'_>) -> Decision {
        let state = self.lock();
        let spec = call.spec;
        let tool = spec.id.clone();
        let capability = capability_of(spec);
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
        let mut decision = Decision {
            action: Action::Deny,
            explanation: Explanation {
                action: Action::Deny,
                cause: Cause::NoRule {
                    subject: tool.clone(),
                },
                notes: Vec::new(),
            },
            keys: Vec::new(),
            always_scope: None,
            tool: tool.clone(),
            capability,
            proposals: Vec::new(),
            pending: Vec::new(),
            raw_command: None,
            headless: self.headless,
        };

        // 1. The capability check.
        let subject = match subject_of(call, &context) {
            Ok(subject) => subject,
            Err(reason) => {
                decision.explanation.cause = Cause::Capability {
                    capability: capability.map_or("arguments".to_owned(), |c| c.to_string()),
                    reason,
                };
                return decision;
            }
        };
        if let Some((capability, reason)) = capability_refusal(call, capability, &subject) {
            decision.explanation.cause = Cause::Capability { capability, reason };
            return decision;
        }
        decision.proposals = proposals(&tool, capability, &subject);
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
        let outcome = self.evaluate(&state, &tool, capability, &subject, &watchdog);
        let mut action = outcome.action;
        let mut cause = outcome.cause;
        let mut notes = outcome.notes;
        decision.pending = outcome.pending;
        let gated = !matches!(capability, Some(Capability::FsRead) | None) || spec.mutating;
        let mutating = match &subject {
            CallSubject::Command { analysis, .. } => {
                !analysis.is_plain()
                    || analysis
                        .commands()
                        .filter(|c| !c.container)
                        .any(|c| !is_read_only(c, &context, &watchdog))
            }
            _ => spec.mutating,
        };
        match state.mode {
            Mode::Allowlist => {}
            Mode::Ask => {
                if action == Action::Allow && gated && !outcome.session_only {
                    let rule = match &cause {
                        Cause::Rule { rule, .. } => Some(rule.clone()),
                        _ => None,
                    };
                    cause = Cause::AskMode {
                        subject: subject_text(&tool, &subject),
                        rule,
                    };
                    action = Action::Ask;
                }
            }
            Mode::Yolo => {
                if action == Action::Ask {
                    cause = Cause::Yolo {
                        instead_of: Box::new(cause),
                    };
                    action = Action::Allow;
                }
            }
            Mode::ReadOnly => {
                if mutating && action != Action::Deny {
                    cause = Cause::ReadOnlyMode {
                        subject: subject_text(&tool, &subject),
                    };
                    action = Action::Deny;
                }
            }
        }

        // 3. The watchdog.
        let verdict = match &subject {
            CallSubject::Path(path) => watchdog.check_path(
                &path.user,
                &path.canonical,
                capability == Some(Capability::FsWrite),
            ),
            CallSubject::Command { raw, analysis } => watchdog.check_shell(raw, analysis),
            _ => Verdict::Pass,
        };
        let mut escalated = false;
        match verdict {
            Verdict::Pass => {}
            Verdict::Deny(finding) => {
                if let Cause::Rule { rule, .. } = &cause {
                    notes.push(format!("the rules alone would say {} ({rule})", action));
                }
                cause = Cause::Watchdog {
                    category: finding.category,
                    reason: finding.reason,
                    escalated: false,
                };
                action = Action::Deny;
            }
            Verdict::Escalate(finding) => {
                if action != Action::Deny {
                    if let Cause::Rule { rule, .. } = &cause {
                        notes.push(format!("the rules alone would say {} ({rule})", action));
                    }
                    escalated = true;
                    cause = Cause::Watchdog {
                        category: finding.category,
                        reason: finding.reason,
                        escalated: true,
                    };
                    action = Action::Ask;
                }
            }
        }

        // 4. Headless.
        if action == Action::Ask && self.headless {
            cause = Cause::Headless {
                asked_because: Box::new(cause),
            };
            action = Action::Deny;
        }
        if action == Action::Ask && !escalated {
            decision.always_scope = join_wordings(&decision.proposals);
        }
        decision.action = action;
        decision.explanation = Explanation {
            action,
            cause,
            notes,
        };
        decision
    }

    fn evaluate(
        &self,
        state: &State,
        tool: &str,
        capability: Option<Capability>,
        subject: &CallSubject,
        watchdog: &Watchdog<'_>,
    ) -> Outcome {
        let rules: Vec<&Rule> = self
            .manifest
            .iter()
            .flat_map(|s| s.rules.iter())
            .chain(self.project.iter().flat_map(|s| s.rules.iter()))
            .chain(state.session.iter())
            .collect();
        let trusted = state.trust.is_trusted();
        let run = |target: &Target<'_>, allow: bool| {
            evaluate(&rules, tool, capability, target, trusted, allow)
        };
        let text = subject_text(tool, subject);
        let single = |evaluation: Evaluation<'_>, text: String, keys: Vec<String>| {
            let action = evaluation.action();
            let mut notes = Vec::new();
            ignored_notes(&evaluation, &mut notes);
            Outcome {
                action,
                session_only: evaluation
                    .winner
                    .is_some_and(|r| r.source.scope() == Scope::Session),
                pending: if action == Action::Allow {
                    Vec::new()
                } else {
                    keys
                },
                cause: rule_cause(&evaluation, text),
                notes,
            }
        };
        match subject {
            CallSubject::Path(path) => {
                let plain = super::shell::confusable_char(&path.user).is_none();
                let target = Target::Path {
                    relative: path.relative.as_deref(),
                    absolute: &path.absolute,
                    home: path.home.as_deref(),
                };
                single(run(&target, plain), text, vec![path.key().to_owned()])
            }
            CallSubject::Host(host) => {
                single(run(&Target::Host(host), true), text, vec![host.clone()])
            }
            CallSubject::Name(name) => {
                single(run(&Target::Name(name), true), text, vec![name.clone()])
            }
            CallSubject::Nothing => {
                single(run(&Target::Nothing, true), text, vec![tool.to_owned()])
            }
            CallSubject::Command { raw, analysis } => {
                let commands: Vec<&SimpleCommand> = analysis
                    .commands()
                    .filter(|c| !c.container && !c.argv.is_empty())
                    .collect();
                if !analysis.is_plain() || commands.is_empty() {
                    return self.evaluate_opaque(raw, &commands, &analysis.not_plain, &run);
                }
                let mut action = Action::Allow;
                let mut decisive: Option<(Evaluation<'_>, String)> = None;
                let mut notes = Vec::new();
                let mut pending = Vec::new();
                let mut session_only = true;
                let mut per_command = Vec::new();
                for command in &commands {
                    let text = command.text();
                    let read_only = is_read_only(command, &watchdog.context, watchdog);
                    let evaluation = run(
                        &Target::Command {
                            words: &command.argv,
                            text: &text,
                            read_only,
                        },
                        true,
                    );
                    let this = evaluation.action();
                    per_command.push(format!(
                        "`{text}`: {this} ({})",
                        evaluation
                            .winner
                            .map(|r| RuleRef::from(r).to_string())
                            .unwrap_or_else(|| "no rule matches: default ask".to_owned())
                    ));
                    ignored_notes(&evaluation, &mut notes);
                    if this != Action::Allow {
                        pending.extend(command.key.clone());
                    } else if evaluation
                        .winner
                        .is_some_and(|r| r.source.scope() != Scope::Session)
                    {
                        session_only = false;
                    }
                    // The first command with the strictest action decides.
                    if decisive.is_none() || this.strictness() > action.strictness() {
                        action = this;
                        decisive = Some((evaluation, text));
                    }
                }
                if commands.len() > 1 {
                    notes.splice(0..0, per_command);
                }
                let cause = match decisive {
                    Some((evaluation, text)) => rule_cause(&evaluation, text),
                    None => Cause::NoRule {
                        subject: raw.clone(),
                    },
                };
                Outcome {
                    action,
                    cause,
                    notes,
                    pending,
                    session_only: session_only && action == Action::Allow,
                }
            }
        }
    }

    /// A command line that is not plain: deny and ask rules still apply (to every command
    /// found and to the raw text), allow rules do not; otherwise it is asked.
    fn evaluate_opaque<'r>(
        &self,
        raw: &str,
        commands: &[&SimpleCommand],
        reasons: &[String],
        run: &dyn Fn(&Target<'_>, bool) -> Evaluation<'r>,
    ) -> Outcome {
        let mut notes = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        for command in commands {
            let text = command.text();
            if !texts.contains(&text) {
                texts.push(text);
            }
        }
        let words: Vec<Vec<String>> = texts
            .iter()
            .map(|t| {
                commands
                    .iter()
                    .find(|c| c.text() == *t)
                    .map(|c| c.argv.clone())
                    .unwrap_or_default()
            })
            .collect();
        let mut targets: Vec<(Target<'_>, &str)> = words
            .iter()
            .zip(&texts)
            .map(|(words, text)| {
                (
                    Target::Command {
                        words,
                        text,
                        read_only: false,
                    },
                    text.as_str(),
                )
            })
            .collect();
        if !texts.iter().any(|t| t == raw.trim()) {
            targets.push((Target::Raw(raw), raw));
        }
        for (target, text) in &targets {
            let evaluation = run(target, false);
            ignored_notes(&evaluation, &mut notes);
            if evaluation.action() == Action::Deny {
                return Outcome {
                    action: Action::Deny,
                    cause: rule_cause(&evaluation, (*text).to_owned()),
                    notes,
                    pending: Vec::new(),
                    session_only: false,
                };
            }
            if let Some(rule) = evaluation.winner
                && rule.action == Action::Ask
                && rule.pattern.kind() != super::rule::PatternKind::Any
            {
                let note = format!("`{text}` also matches the {}", RuleRef::from(rule));
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
        Outcome {
            action: Action::Ask,
            cause: Cause::NotPlain {
                reasons: reasons.to_vec(),
            },
            notes,
            pending: Vec::new(),
            session_only: false,
        }
    }

    /// Records the user's answer. "Always" answers add session rules: allow rules for the
    /// decision's keys (only when it was cacheable), deny rules for the keys that were asked
    /// about (or, for a line without keys, for its exact text).
    pub fn remember(&self, decision: &Decision, answer: Answer) {
        let mut state = self.lock();
        let additions: Vec<(super::rule::Pattern, Action)> = match answer {
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
                        .map(|raw| (super::rule::Pattern::exact(raw), Action::Deny))
                        .collect()
                } else {
                    chosen
                        .into_iter()
                        .map(|p| (p.pattern.clone(), Action::Deny))
                        .collect()
                }
            }
        };
        for (pattern, action) in additions {
            let permission = Permission::Tool(decision.tool.clone());
            state
                .session
                .retain(|r| !(r.permission == permission && r.pattern == pattern));
            let mut rule = Rule::new(permission, pattern, action, Source::Session);
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
                Source::Session,
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
        RuleSet::parse(&content, Source::Project(path.clone()))?;
        config_files::write_atomically(&path, &content).map_err(|source| PolicyError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

/// The most specific matching rule, with the manifest-deny and trust rules applied.
fn evaluate<'r>(
    rules: &[&'r Rule],
    tool: &str,
    capability: Option<Capability>,
    target: &Target<'_>,
    trusted: bool,
    allow: bool,
) -> Evaluation<'r> {
    let rank = |rule: &Rule| {
        (
            rule.permission.specificity(),
            rule.pattern.specificity(),
            rule.source.scope().rank(),
            rule.action.strictness(),
        )
    };
    let mut best: Option<&Rule> = None;
    let mut best_manifest: Option<&Rule> = None;
    let mut ignored = Vec::new();
    for rule in rules.iter().copied() {
        if !rule.permission.matches(tool, capability)
            || !rule.pattern.matches(target, rule.action != Action::Allow)
        {
            continue;
        }
        if rule.action == Action::Allow {
            if rule.source.scope() == Scope::Project && !trusted {
                ignored.push(rule);
                continue;
            }
            if !allow {
                continue;
            }
        }
        if best.is_none_or(|b| rank(rule) > rank(b)) {
            best = Some(rule);
        }
        if rule.source.scope() == Scope::Manifest
            && best_manifest.is_none_or(|b| rank(rule) > rank(b))
        {
            best_manifest = Some(rule);
        }
    }
    if let Some(manifest) = best_manifest
        && manifest.action == Action::Deny
    {
        let overridden = best.is_some_and(|b| !std::ptr::eq(b, manifest));
        return Evaluation {
            winner: Some(manifest),
            manifest_final: overridden,
            ignored,
        };
    }
    Evaluation {
        winner: best,
        manifest_final: false,
        ignored,
    }
}

fn rule_cause(evaluation: &Evaluation<'_>, subject: String) -> Cause {
    match evaluation.winner {
        Some(rule) => Cause::Rule {
            rule: RuleRef::from(rule),
            subject,
            manifest_final: evaluation.manifest_final,
        },
        None => Cause::NoRule { subject },
    }
}

fn ignored_notes(evaluation: &Evaluation<'_>, notes: &mut Vec<String>) {
    for rule in &evaluation.ignored {
        let note = format!(
            "the {} is ignored: the project is not trusted",
            RuleRef::from(*rule)
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}

fn subject_text(tool: &str, subject: &CallSubject) -> String {
    match subject {
        CallSubject::Path(path) => path.key().to_owned(),
        CallSubject::Command { raw, .. } => raw.clone(),
        CallSubject::Host(host) => host.clone(),
        CallSubject::Name(name) => name.clone(),
        CallSubject::Nothing => tool.to_owned(),
    }
}

/// The capability check: the runtime's scope for paths, hosts and commands.
fn capability_refusal(
    call: &Call<'_>,
    capability: Option<Capability>,
    subject: &CallSubject,
) -> Option<(String, String)> {
    let scope = call.runtime.scope();
    match subject {
        CallSubject::Path(path) => {
            let access = if capability == Some(Capability::FsWrite) {
                Access::Write
            } else {
                Access::Read
            };
            call.runtime
                .check(&path.canonical, access)
                .err()
                .map(|r| (r.capability.to_owned(), r.reason))
        }
        CallSubject::Host(host) => scope
            .check_host(host)
            .err()
            .map(|r| (r.capability.to_owned(), r.reason)),
        CallSubject::Command { analysis, .. } => {
            // A scope that admits any program admits every line.
            if scope.check_command("\u{1}any", &[]).is_ok() {
                return None;
            }
            if !analysis.is_plain() {
                return Some((
                    "shell.run".to_owned(),
                    "this agent may run only some programs, and a command line that is not plain \
                     cannot be checked against them"
                        .to_owned(),
                ));
            }
            for command in analysis.commands().filter(|c| !c.container) {
                for argv in [&command.original, &command.argv] {
                    if let Some((program, rest)) = argv.split_first()
                        && let Err(refusal) = scope.check_command(program, rest)
                    {
                        return Some((refusal.capability.to_owned(), refusal.reason));
                    }
                }
            }
            None
        }
        CallSubject::Name(_) | CallSubject::Nothing => None,
    }
}

/// Whether a simple command belongs to the `read-only` class: its words pass
/// [`read_only_words`], it writes no file, it runs inside the workspace, its path operands stay
/// inside the workspace and name no credential file, and no privilege wrapper runs it.
pub(crate) fn is_read_only(
    command: &SimpleCommand,
    context: &ShellContext<'_>,
    watchdog: &Watchdog<'_>,
) -> bool {
    if command.dynamic || command.container || !read_only_words(&command.argv) {
        return false;
    }
    if command
        .wrappers
        .iter()
        .any(|w| PRIVILEGE_WRAPPERS.contains(&base_name(w)))
    {
        return false;
    }
    let Cwd::Known(directory) = &command.cwd else {
        return false;
    };
    if !matches!(
        context.classify(directory.clone()),
        Place::Inside(_) | Place::Root(_)
    ) {
        return false;
    }
    let safe = |word: &str| match context.place(word, &command.cwd) {
        Place::Inside(path) | Place::Root(path) => !watchdog.is_secret(&path),
        _ => false,
    };
    for redirect in &command.redirects {
        if redirect.duplicate || is_harmless_device(&redirect.target) {
            continue;
        }
        if redirect.writes() || !safe(&redirect.target) {
            return false;
        }
    }
    let paths = read_only_entry(command.program()).is_some_and(|e| e.paths);
    if paths {
        let mut rest = false;
        for arg in command.argv.iter().skip(1) {
            if !rest && arg == "--" {
                rest = true;
                continue;
            }
            if !rest && arg.starts_with('-') {
                continue;
            }
            if !safe(arg) {
                return false;
            }
        }
    }
    true
}
