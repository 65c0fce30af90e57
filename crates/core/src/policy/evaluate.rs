//! Rule evaluation: the most specific matching rule for each subject of a call, combined over
//! the simple commands of a line; and the capability check and the read-only class it relies
//! on.

use super::Call;
use super::explain::{Cause, RuleRef};
use super::grammar::Fit;
use super::layers::Layer;
use super::pattern::{PatternKind, Target};
use super::read_only::{option_glob, reads_only};
use super::rule::{Action, Capability, Rule};
use super::shell::{MAX_SCRIPT_BYTES, SimpleCommand, clip, confusable_char};
use super::subject::CallSubject;
use super::watchdog::Watchdog;
use crate::capability::Access;
use crate::tool::view::code;

/// The winner of one rule evaluation.
pub(super) struct Evaluation<'r> {
    winner: Option<&'r Rule>,
    manifest_final: bool,
    ignored: Vec<&'r Rule>,
}

impl Evaluation<'_> {
    pub(super) fn action(&self) -> Action {
        self.winner.map_or(Action::Ask, |r| r.action)
    }
}

/// What the rules say about a whole call.
pub(super) struct Outcome {
    pub(super) action: Action,
    pub(super) cause: Cause,
    pub(super) notes: Vec<String>,
    /// Keys the rules did not allow (what a "reject always" answer is about).
    pub(super) pending: Vec<String>,
    /// Every allowing rule is a session answer (mode `ask` keeps those).
    pub(super) session_only: bool,
    /// A shell line allowed by the bundled read-only class alone: no rule of the user's, no
    /// answer of theirs names any of its commands ([`super::Decision::contained`]).
    pub(super) classifier_only: bool,
}

/// What the rules say about a call (before the mode).
pub(super) fn evaluate_call(
    rules: &[&Rule],
    trusted: bool,
    tool: &str,
    capability: Option<Capability>,
    subject: &CallSubject,
    watchdog: &Watchdog<'_>,
) -> Outcome {
    let run = |target: &Target<'_>, allow: bool| {
        evaluate(rules, tool, capability, target, trusted, allow)
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
                .is_some_and(|r| r.source.layer() == Layer::Session),
            classifier_only: false,
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
            let plain = confusable_char(&path.user).is_none();
            let target = Target::Path {
                relative: path.relative.as_deref(),
                absolute: &path.absolute,
                home: path.home.as_deref(),
                session: path.session.as_deref(),
            };
            single(run(&target, plain), text, vec![path.key().to_owned()])
        }
        CallSubject::Host(host) => single(run(&Target::Host(host), true), text, vec![host.clone()]),
        CallSubject::Name(name) => single(run(&Target::Name(name), true), text, vec![name.clone()]),
        CallSubject::Nothing => single(run(&Target::Nothing, true), text, vec![tool.to_owned()]),
        CallSubject::Command { raw, analysis } => {
            let commands: Vec<&SimpleCommand> = analysis
                .commands()
                .filter(|c| !c.container && !c.argv.is_empty())
                .collect();
            if !analysis.is_plain() || commands.is_empty() {
                return evaluate_opaque(raw, &commands, &analysis.not_plain, &run);
            }
            evaluate_commands(raw, &commands, watchdog, &run)
        }
    }
}

/// A plain command line: each simple command evaluated on its own (its grammar, its
/// read-only class, its approval key), the strictest action deciding, the first command with it
/// named as the cause.
fn evaluate_commands<'r>(
    raw: &str,
    commands: &[&SimpleCommand],
    watchdog: &Watchdog<'_>,
    run: &dyn Fn(&Target<'_>, bool) -> Evaluation<'r>,
) -> Outcome {
    let mut action = Action::Allow;
    let mut decisive: Option<(Evaluation<'_>, String)> = None;
    let mut notes = Vec::new();
    let mut pending = Vec::new();
    let mut session_only = true;
    let mut classifier_only = true;
    let mut per_command = Vec::new();
    for command in commands {
        let text = command.text();
        // A glob the shell may turn into an option: the words the program gets are not
        // the ones the grammar and the approval key speak for.
        let option_glob = option_glob(command, &watchdog.context);
        let read_only = option_glob.is_none() && reads_only(command, &watchdog.context, watchdog);
        let evaluation = run(
            &Target::Command {
                words: &command.argv,
                text: &text,
                read_only,
                outside_grammar: command.fit.rejected() || option_glob.is_some(),
            },
            true,
        );
        let this = evaluation.action();
        classifier_only &= this == Action::Allow
            && evaluation
                .winner
                .is_some_and(|rule| rule.source == super::RuleSource::Bundled);
        per_command.push(format!(
            "{}: {this} ({})",
            code(&text),
            evaluation
                .winner
                .map(|r| RuleRef::from(r).to_string())
                .unwrap_or_else(|| "no rule matches: default ask".to_owned())
        ));
        ignored_notes(&evaluation, &mut notes);
        if let Fit::Rejected { name, reason } = &command.fit {
            notes.push(format!(
                "{} is outside the read-only grammar of `{name}` ({reason}): it \
                 has no approval key",
                code(&text)
            ));
        }
        if let Some(word) = option_glob {
            notes.push(format!(
                "{}: the shell may expand {} into a name that begins with `-`, \
                 which the program reads as an option: it has no approval key",
                code(&text),
                code(word)
            ));
        }
        if this != Action::Allow && option_glob.is_none() {
            pending.extend(command.key.clone());
        } else if evaluation
            .winner
            .is_some_and(|r| r.source.layer() != Layer::Session)
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
            subject: raw.to_owned(),
        },
    };
    Outcome {
        action,
        cause,
        notes,
        pending,
        session_only: session_only && action == Action::Allow,
        classifier_only: classifier_only && action == Action::Allow,
    }
}

/// A command line that is not plain: deny and ask rules still apply (to every command
/// found and to the raw text), allow rules do not; otherwise it is asked.
fn evaluate_opaque<'r>(
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
                    outside_grammar: false,
                },
                text.as_str(),
            )
        })
        .collect();
    // A line too long to analyse is matched by its first part only (it is asked anyway).
    let raw = clip(raw, MAX_SCRIPT_BYTES);
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
                classifier_only: false,
            };
        }
        if let Some(rule) = evaluation.winner
            && rule.action == Action::Ask
            && rule.pattern.kind() != PatternKind::Any
        {
            let note = format!("{} also matches the {}", code(text), RuleRef::from(rule));
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
        classifier_only: false,
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
    pick(
        rules.iter().copied().filter(|rule| {
            rule.permission.matches(tool, capability)
                && rule.pattern.matches(target, rule.action != Action::Allow)
        }),
        trusted,
        allow,
    )
}

/// The winner among the rules that match a subject (in the rules' order, ties going to the
/// first): the most specific, with the manifest-deny and trust rules applied. `allow`: whether
/// allow rules may win at all.
pub(super) fn pick<'r>(
    matching: impl Iterator<Item = &'r Rule>,
    trusted: bool,
    allow: bool,
) -> Evaluation<'r> {
    let rank = |rule: &Rule| {
        (
            rule.permission.specificity(),
            rule.pattern.specificity(),
            rule.source.layer().rank(),
            rule.action.strictness(),
        )
    };
    let mut best: Option<&Rule> = None;
    let mut best_manifest: Option<&Rule> = None;
    let mut ignored = Vec::new();
    for rule in matching {
        if rule.action == Action::Allow {
            if rule.source.layer() == Layer::Project && !trusted {
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
        if rule.source.layer() == Layer::Manifest
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

pub(super) fn subject_text(tool: &str, subject: &CallSubject) -> String {
    match subject {
        CallSubject::Path(path) => path.key().to_owned(),
        CallSubject::Command { raw, .. } => raw.clone(),
        CallSubject::Host(host) => host.clone(),
        CallSubject::Name(name) => name.clone(),
        CallSubject::Nothing => tool.to_owned(),
    }
}

/// The capability check: the runtime's scope for paths, hosts and commands.
pub(super) fn capability_refusal(
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
