//! The steps of [`Policy::decide`](super::Policy::decide) after the rules are read: the call's
//! subject checked against the capability scope ([`checked_subject`]), and a [`Draft`] of the
//! decision each later step works on (Keel's rendering of a classified command, the mode, the
//! watchdog, hard links, running unconfined).

use super::Call;
use super::decide::Target;
use super::evaluate::{capability_refusal, subject_text};
use super::explain::Cause;
use super::mode::Mode;
use super::rule::{Action, Capability};
use super::shell::ShellContext;
use super::subject::{ApprovalKey, CallSubject, path_subject, subject_of};
use super::watchdog::{Verdict, Watchdog};
use crate::runtime::sandbox::SandboxMode;
use crate::tool::CallTarget;

/// The call's subject, resolved and checked against the capability scope; the cause of a
/// denial when it cannot be.
pub(super) fn checked_subject(
    call: &Call<'_>,
    context: &ShellContext<'_>,
    target: Target<'_>,
    capability: Option<Capability>,
) -> Result<CallSubject, Box<Cause>> {
    let subject = match target {
        Target::Subject(canonical) => subject_of(call, context, canonical),
        Target::File { user, canonical } => path_subject(call, context, user, Some(canonical)),
    };
    let subject = subject.map_err(|reason| {
        Box::new(Cause::Capability {
            capability: capability.map_or("arguments".to_owned(), |c| c.to_string()),
            reason,
        })
    })?;
    if let Some((capability, reason)) = capability_refusal(call, capability, &subject) {
        return Err(Box::new(Cause::Capability { capability, reason }));
    }
    Ok(subject)
}

/// A decision being made, step by step: the action so far and why, the notes, and what the
/// later steps need to know.
#[derive(Debug)]
pub(super) struct Draft {
    pub(super) action: Action,
    pub(super) cause: Cause,
    pub(super) notes: Vec<String>,
    /// Allowed by Keel's own read-only classification alone.
    pub(super) classifier_only: bool,
    /// Asked every time (the watchdog, hard links): no "always".
    pub(super) escalated: bool,
    /// Keel's rendering of a command the classification alone allows.
    pub(super) rendered: Option<String>,
}

impl Draft {
    /// Keeps what the rules said as a note before a later step overrides it.
    fn note_rules(&mut self) {
        if let Cause::Rule { rule, .. } = &self.cause {
            self.notes.push(format!(
                "the rules alone would say {} ({rule})",
                self.action
            ));
        }
    }

    /// What the classification alone allows runs from Keel's rendering of what it analysed; a
    /// line it cannot render is asked about (and, approved, runs as written).
    pub(super) fn render(&mut self, subject: &CallSubject, pending: &mut Vec<String>) {
        if !(self.classifier_only && self.action == Action::Allow) {
            return;
        }
        let CallSubject::Command { raw, analysis } = subject else {
            return;
        };
        match super::shell::render(analysis) {
            Ok(script) => self.rendered = Some(script),
            Err(reason) => {
                if let Cause::Rule { rule, .. } = &self.cause {
                    self.notes
                        .push(format!("the rules alone would say allow ({rule})"));
                }
                self.cause = Cause::NotRendered {
                    subject: raw.clone(),
                    reason,
                };
                self.action = Action::Ask;
                self.classifier_only = false;
                *pending = analysis.keys();
            }
        }
    }

    /// The mode: `ask` asks before every gated call a session answer does not cover, `yolo`
    /// allows what would be asked, `read-only` denies what changes anything.
    pub(super) fn apply_mode(
        &mut self,
        mode: Mode,
        ask_gated: bool,
        mutating: bool,
        tool: &str,
        subject: &CallSubject,
    ) {
        match mode {
            Mode::Allowlist => {}
            Mode::Ask => {
                if self.action == Action::Allow && ask_gated {
                    let rule = match &self.cause {
                        Cause::Rule { rule, .. } => Some(rule.clone()),
                        _ => None,
                    };
                    self.cause = Cause::AskMode {
                        subject: subject_text(tool, subject),
                        rule,
                    };
                    self.action = Action::Ask;
                }
            }
            Mode::Yolo => {
                if self.action == Action::Ask {
                    let instead_of = std::mem::replace(
                        &mut self.cause,
                        Cause::NoRule {
                            subject: String::new(),
                        },
                    );
                    self.cause = Cause::Yolo {
                        instead_of: Box::new(instead_of),
                    };
                    self.action = Action::Allow;
                }
            }
            Mode::ReadOnly => {
                if mutating && self.action != Action::Deny {
                    self.cause = Cause::ReadOnlyMode {
                        subject: subject_text(tool, subject),
                    };
                    self.action = Action::Deny;
                }
            }
        }
    }

    /// The watchdog: denies, or escalates an allow to a prompt asked every time.
    pub(super) fn watch(
        &mut self,
        watchdog: &Watchdog<'_>,
        capability: Option<Capability>,
        subject: &CallSubject,
    ) {
        let verdict = match subject {
            CallSubject::Path(path) => watchdog.check_path(
                &path.user,
                &path.canonical,
                capability == Some(Capability::FsWrite),
            ),
            CallSubject::Command { raw, analysis } => watchdog.check_shell(raw, analysis),
            _ => Verdict::Pass,
        };
        match verdict {
            Verdict::Pass => {}
            Verdict::Deny(finding) => {
                self.note_rules();
                self.cause = Cause::Watchdog {
                    category: finding.category,
                    reason: finding.reason,
                    escalated: false,
                };
                self.action = Action::Deny;
            }
            Verdict::Escalate(finding) => {
                if self.action != Action::Deny {
                    self.note_rules();
                    self.escalated = true;
                    self.cause = Cause::Watchdog {
                        category: finding.category,
                        reason: finding.reason,
                        escalated: true,
                    };
                    self.action = Action::Ask;
                }
            }
        }
    }

    /// A regular file with several hard links: another of its names may lie outside the
    /// workspace, so the path check proves nothing about its content. Asked every time (the
    /// runtime refuses to read it unless the call was approved: `allowing_linked_reads`).
    /// The number of links, when that is why.
    pub(super) fn hard_links(&mut self, call: &Call<'_>, subject: &CallSubject) -> Option<u64> {
        if self.action == Action::Deny {
            return None;
        }
        let CallSubject::Path(path) = subject else {
            return None;
        };
        let links = call
            .runtime
            .link_count(&path.canonical)
            .filter(|l| *l > 1)?;
        let linked = Cause::HardLinked {
            subject: path.key().to_owned(),
            links,
        };
        if self.escalated {
            // The watchdog's reason stays the headline; the links are one more fact.
            self.notes.push(format!("also: {}", linked.clause()));
        } else {
            self.note_rules();
            self.escalated = true;
            self.cause = linked;
        }
        self.action = Action::Ask;
        Some(links)
    }

    /// Running outside the kernel sandbox (`unsandboxed: true` on a shell call) is an
    /// escalation of its own: allowing the command does not lift the sandbox, so it is asked
    /// (in every mode, `yolo` included) unless the user answered "always allow without the
    /// sandbox" for these keys in this session. Whether the call asks to run unconfined.
    pub(super) fn unconfined(
        &mut self,
        call: &Call<'_>,
        mode: Mode,
        subject: &CallSubject,
        keys: &[ApprovalKey],
        unconfined_keys: &[ApprovalKey],
    ) -> bool {
        let sandbox = call.runtime.sandbox();
        let CallSubject::Command { raw, .. } = subject else {
            return false;
        };
        if self.action == Action::Deny
            || !matches!(call.target, CallTarget::Command(command) if command.unsandboxed)
            || sandbox.settings.mode == SandboxMode::Off
        {
            return false;
        }
        let refused = if mode == Mode::ReadOnly || sandbox.read_only {
            Some("mode `read-only` runs every command in a read-only sandbox")
        } else if sandbox.settings.mode == SandboxMode::Required {
            Some("`[sandbox] mode = \"required\"` refuses to run commands unconfined")
        } else {
            None
        };
        let remembered = !keys.is_empty() && keys.iter().all(|k| unconfined_keys.contains(k));
        let lifted = Cause::Unconfined {
            subject: raw.clone(),
            refused: refused.map(str::to_owned),
        };
        if refused.is_some() {
            self.cause = lifted;
            self.action = Action::Deny;
        } else if self.escalated {
            // Asked every time already; the prompt says what it would lift.
            self.notes.push(format!("also: {}", lifted.clause()));
        } else if !(remembered && self.action == Action::Allow) {
            self.note_rules();
            self.cause = lifted;
            self.action = Action::Ask;
        }
        true
    }
}
