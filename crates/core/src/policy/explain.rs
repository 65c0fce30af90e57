//! Why a decision came out the way it did, and the text `keel permissions check|list` print.
//!
//! - [`Explanation`]: the decision's action, its [`Cause`] (the deciding rule with its scope and
//!   file, the watchdog category, the mode, the capability refusal, headless), and notes (other
//!   commands of the line, ignored project rules). `Display` gives one readable sentence.
//! - [`render_check`] / [`render_rules`]: the command-line reports.

use std::fmt;

use super::layers::Layer;
use super::mode::Mode;
use super::rule::{Action, Rule};
use super::watchdog::WatchdogCategory;
use super::{Decision, Policy};
use crate::tool::view::{code, escaped, quoted};

/// A rule as an explanation cites it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub permission: String,
    pub pattern: String,
    pub action: Action,
    pub layer: Layer,
    /// `the bundled defaults`, a file path, or `an answer given in this session`.
    pub source: String,
    pub reason: Option<String>,
}

impl From<&Rule> for RuleRef {
    /// A project rule's strings are the repository's words, not the user's: its pattern and
    /// source are [`escaped`] and its reason [`quoted`], so that in a prompt they stay one item
    /// on one line, in their own order, and cannot pose as Keel's explanation.
    fn from(rule: &Rule) -> Self {
        let layer = rule.source.layer();
        let (pattern, source) = (rule.pattern.to_string(), rule.source.to_string());
        if layer == Layer::Project {
            return Self {
                permission: escaped(&rule.permission.to_string()),
                pattern: escaped(&pattern),
                action: rule.action,
                layer,
                source: escaped(&source),
                reason: rule.reason.as_deref().map(quoted),
            };
        }
        Self {
            permission: rule.permission.to_string(),
            pattern,
            action: rule.action,
            layer,
            source,
            reason: rule.reason.clone(),
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rule `{}` {} → {} (from {})",
            self.layer, self.permission, self.pattern, self.action, self.source
        )
    }
}

/// What decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The runtime's capability check refused the call (first line of defence).
    Capability { capability: String, reason: String },
    /// A rule matched. `manifest_final`: a manifest deny overrode a more specific project or
    /// session rule.
    Rule {
        rule: RuleRef,
        subject: String,
        manifest_final: bool,
    },
    /// No rule matched; the default is ask.
    NoRule { subject: String },
    /// The command line is not plain: no key, asked every time.
    NotPlain { reasons: Vec<String> },
    /// Mode `ask` turned a rule's allow into a prompt.
    AskMode {
        subject: String,
        rule: Option<RuleRef>,
    },
    /// Mode `read-only` refused a call that may change something.
    ReadOnlyMode { subject: String },
    /// Mode `yolo` answered yes instead of asking.
    Yolo { instead_of: Box<Cause> },
    /// The watchdog denied, or escalated to a prompt.
    Watchdog {
        category: WatchdogCategory,
        reason: String,
        escalated: bool,
    },
    /// No user is present: what would have been asked is denied.
    Headless { asked_because: Box<Cause> },
    /// The file has several hard links, so its content is not provably the workspace's: asked
    /// every time, whatever the rules and the mode say.
    HardLinked { subject: String, links: u64 },
    /// The read-only classification alone would allow the command, but Keel cannot run it
    /// from its own rendering of what it analysed ([`super::shell::render`]): asked.
    NotRendered { subject: String, reason: String },
    /// The command asks to run outside the kernel sandbox: asked separately (unless remembered
    /// for its keys), or refused by the mode or `[sandbox] mode = "required"`.
    Unconfined {
        subject: String,
        refused: Option<String>,
    },
}

/// A decision's explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub action: Action,
    pub cause: Cause,
    /// Further facts: other commands of the line, ignored project rules, a final manifest deny.
    pub notes: Vec<String>,
}

fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Allow => "Allowed",
        Action::Deny => "Denied",
        Action::Ask => "Needs approval",
    }
}

impl Cause {
    /// Why the user is asked, in plain words (the approval prompt's sentence; `Cause::clause`
    /// names the rule).
    pub fn plain(&self) -> String {
        match self {
            Cause::Rule { rule, .. } if rule.action == Action::Ask => {
                if rule.layer == Layer::Project {
                    // The repository's rule, its reason already quoted.
                    let who = format!(
                        "The project's permission rule in {} asks before this",
                        rule.source
                    );
                    return match &rule.reason {
                        Some(reason) => format!("{who}, saying {reason}."),
                        None => format!("{who}."),
                    };
                }
                let who = if rule.source == "the bundled defaults" {
                    "Keel asks before this by default".to_owned()
                } else {
                    format!("Your permission rule in {} asks before this", rule.source)
                };
                match &rule.reason {
                    Some(reason) => format!("{who}: {reason}."),
                    None => format!("{who}."),
                }
            }
            Cause::Rule { .. } | Cause::NoRule { .. } => {
                "No permission rule allows this yet, so Keel asks first.".to_owned()
            }
            Cause::NotPlain { .. } => "The command is more than a plain list of commands, so \
                 Keel cannot remember an answer for it and asks every time."
                .to_owned(),
            Cause::AskMode { .. } => "The session is in ask mode: Keel asks before each new \
                 command, edit or fetch."
                .to_owned(),
            Cause::Watchdog { reason, .. } => {
                format!("This can be risky ({reason}), so Keel asks every time.")
            }
            Cause::NotRendered { reason, .. } => format!(
                "Keel runs a command without asking only as it read it, and cannot write this \
                 one back that way ({reason}), so it asks first."
            ),
            Cause::HardLinked { .. } => "The file has other names (hard links) that may lie \
                 outside the workspace, so Keel asks every time."
                .to_owned(),
            Cause::Unconfined { .. } => "The command asks to run without the sandbox, which \
                 Keel never does without asking."
                .to_owned(),
            Cause::Yolo { instead_of }
            | Cause::Headless {
                asked_because: instead_of,
            } => instead_of.plain(),
            Cause::Capability { .. } | Cause::ReadOnlyMode { .. } => {
                format!("{}.", upper_first(&self.clause()))
            }
        }
    }

    pub(crate) fn clause(&self) -> String {
        match self {
            Cause::Capability { capability, reason } => {
                format!("the capability check ({capability}) refuses it: {reason}")
            }
            Cause::Rule {
                rule,
                subject,
                manifest_final,
            } => {
                let mut text = format!("the {rule} matches {}", code(subject));
                if let Some(reason) = &rule.reason {
                    text.push_str(&format!(" ({reason})"));
                }
                if *manifest_final {
                    text.push_str(
                        "; a manifest deny is final, no project or session rule overrides it",
                    );
                }
                text
            }
            Cause::NoRule { subject } => {
                format!("no rule matches {}, and the default is ask", code(subject))
            }
            Cause::NotPlain { reasons } => format!(
                "the command is not a plain command list ({}), so it has no approval key and is \
                 asked every time",
                reasons.join("; ")
            ),
            Cause::AskMode { subject, rule } => {
                let mut text = format!(
                    "mode `ask` asks before each new command, edit or fetch ({})",
                    code(subject)
                );
                if let Some(rule) = rule {
                    text.push_str(&format!("; the {rule} would allow it in mode `allowlist`"));
                }
                text
            }
            Cause::ReadOnlyMode { subject } => {
                format!(
                    "mode `read-only` is for planning, and {} may change something",
                    code(subject)
                )
            }
            Cause::Yolo { instead_of } => format!(
                "mode `yolo` answers yes where the rules would ask ({})",
                instead_of.clause()
            ),
            Cause::Watchdog {
                category,
                reason,
                escalated,
            } => {
                if *escalated {
                    format!("the watchdog ({category}) asks every time: {reason}")
                } else {
                    format!("the watchdog ({category}) refuses it: {reason}")
                }
            }
            Cause::NotRendered { subject, reason } => format!(
                "{} is read-only by Keel's classification, but Keel runs a command \
                 without asking only from its own rendering of what it analysed, and this one \
                 has no rendering ({reason})",
                code(subject)
            ),
            Cause::HardLinked { subject, links } => format!(
                "{} has {links} hard links, so Keel cannot prove that its content belongs \
                 to the workspace (another of its names may lie outside); asked every time",
                code(subject)
            ),
            Cause::Unconfined { subject, refused } => match refused {
                Some(why) => {
                    format!(
                        "{} asks to run without the kernel sandbox, and {why}",
                        code(subject)
                    )
                }
                None => format!(
                    "{} asks to run without the kernel sandbox, an escalation of its own \
                     (allowing a command does not lift the sandbox)",
                    code(subject)
                ),
            },
            Cause::Headless { asked_because } => format!(
                "it needs the user's approval and no user is present (headless run); it would \
                 have been asked because {}",
                asked_because.clause()
            ),
        }
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}.", verb(self.action), self.cause.clause())
    }
}

/// What `keel permissions check` prints for one decision.
pub fn render_check(decision: &Decision) -> String {
    let mut out = String::new();
    out.push_str(&format!("action: {}\n", decision.action));
    out.push_str(&format!("why: {}\n", decision.explanation));
    let capability = decision
        .capability
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    out.push_str(&format!("tool: {}{capability}\n", decision.tool));
    if decision.keys.is_empty() {
        out.push_str("approval keys: none (not cacheable: asked every time)\n");
    } else {
        let keys: Vec<String> = decision.keys.iter().map(|k| code(&k.key)).collect();
        out.push_str(&format!("approval keys: {}\n", keys.join(", ")));
    }
    if let Some(scope) = &decision.always_scope {
        out.push_str(&format!("\"always\" would cover: {scope}\n"));
    }
    for note in &decision.explanation.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    if let Some(message) = decision.message_for_model() {
        out.push_str(&format!("the model is told: {message}\n"));
    }
    out
}

/// The decision order and specificity, as `keel permissions list` prints it.
pub const PRECEDENCE: &str = "Decision order: capability check, then rules and mode, then the \
watchdog, then the user's answer. The most specific matching rule wins: a tool id beats a \
capability beats `*`; then an exact pattern beats a longer prefix or glob, which beats a shorter \
one, then the read-only class, then `*`; ties go to session over project over manifest, then to \
deny over ask over allow. A manifest deny is final.";

/// What `keel permissions list` prints.
pub fn render_rules(policy: &Policy) -> String {
    let mode = policy.mode();
    let trust = policy.trust();
    let mut out = format!("mode: {mode} ({})\n", mode.description());
    out.push_str(&format!(
        "project: {trust}{}{}\n",
        if trust.is_trusted() {
            ""
        } else {
            " (project allow rules are ignored until you trust it)"
        },
        if policy.headless() {
            "; headless: every ask is denied"
        } else {
            ""
        }
    ));
    if mode == Mode::Yolo {
        out.push_str("yolo: what the rules would ask about is allowed; deny rules and the watchdog still refuse\n");
    }
    for listing in policy.rules_by_layer() {
        out.push('\n');
        out.push_str(&format!("{} rules:\n", listing.layer));
        if listing.rules.is_empty() {
            out.push_str("  (none)\n");
            continue;
        }
        let rows: Vec<[String; 4]> = listing
            .rules
            .iter()
            .map(|listed| {
                let mut note = format!("from {}", listed.rule.source);
                if let Some(reason) = &listed.rule.reason {
                    note.push_str(&format!(": {reason}"));
                }
                if listed.ignored {
                    note.push_str(" [ignored: the project is not trusted]");
                }
                [
                    listed.rule.permission.to_string(),
                    listed.rule.pattern.to_string(),
                    listed.rule.action.to_string(),
                    note,
                ]
            })
            .collect();
        let widths: Vec<usize> = (0..3)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        for row in rows {
            out.push_str(&format!(
                "  {:w0$}  {:w1$}  {:w2$}  {}\n",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2]
            ));
        }
    }
    out.push('\n');
    out.push_str(PRECEDENCE);
    out.push('\n');
    out
}
