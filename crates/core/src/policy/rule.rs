//! Rules: `(permission, pattern, action)` and their file form, validated when loaded.
//!
//! - [`Permission`]: a tool id (`bash`), a [`Capability`] (`fs.write`) or `*`.
//! - [`Pattern`]: how a rule names its subjects (see [`super::pattern`]).
//! - [`Action`]: allow / deny / ask.
//! - [`Rule`]: the three together, with an optional reason and the [`RuleSource`] it came from.
//! - [`RuleSet`]: the rules of one file (or of the bundled defaults, or of the session).

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use super::layers::RuleSource;
use super::pattern::{CommandClass, Pattern, PatternKind, SESSION, Target, command_words};
use crate::tool::BundledTool;
use crate::tool::view::code;

/// What a rule (or a decision) does with a call. Also the configuration's
/// `[[permission]] action` (`allow`, `deny`, `ask`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Deny,
    Ask,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Ask => "ask",
        }
    }

    /// deny > ask > allow: the order ties and combinations are resolved in.
    pub fn strictness(self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Ask => 1,
            Action::Deny => 2,
        }
    }

    /// The stricter of two actions.
    pub fn max(self, other: Action) -> Action {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The capabilities rules may name instead of a tool id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Read-only file tools (read, glob, grep).
    FsRead,
    /// File-changing tools (write, edit, delete, move).
    FsWrite,
    /// Shell commands (bash).
    ShellRun,
    /// Network fetches (web_fetch, web_search).
    NetFetch,
    /// Tools served by an MCP server.
    McpCall,
    /// The hosts a confined shell command's connections may reach through the sandbox's
    /// filtering proxy. No tool call has it: only rules naming it open the proxy, so an answer
    /// about `web_fetch` never lets commands through.
    ShellNet,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Capability::FsRead,
        Capability::FsWrite,
        Capability::ShellRun,
        Capability::NetFetch,
        Capability::McpCall,
        Capability::ShellNet,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::FsRead => "fs.read",
            Capability::FsWrite => "fs.write",
            Capability::ShellRun => "shell.run",
            Capability::NetFetch => "net.fetch",
            Capability::McpCall => "mcp.call",
            Capability::ShellNet => "shell.net",
        }
    }

    pub fn parse(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which calls a rule is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    Tool(String),
    Capability(Capability),
    Any,
}

impl Permission {
    /// tool id (2) > capability (1) > `*` (0).
    pub fn specificity(&self) -> u8 {
        match self {
            Permission::Tool(_) => 2,
            Permission::Capability(_) => 1,
            Permission::Any => 0,
        }
    }

    pub fn matches(&self, tool: &str, capability: Option<Capability>) -> bool {
        match self {
            Permission::Tool(id) => id == tool,
            Permission::Capability(c) => Some(*c) == capability,
            Permission::Any => true,
        }
    }

    fn parse(text: &str) -> Result<Permission, (String, String)> {
        let text = text.trim();
        if text == "*" {
            return Ok(Permission::Any);
        }
        if let Some(capability) = Capability::parse(text) {
            return Ok(Permission::Capability(capability));
        }
        let names: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        if text.contains('.') {
            let suggestion = closest(text, &names)
                .map(|n| format!("did you mean {n}? ", n = code(n)))
                .unwrap_or_default();
            return Err((
                format!("unknown capability {text}", text = code(text)),
                format!(
                    "{suggestion}use a tool id (`bash`), a capability ({}) or `*`",
                    names.join(", ")
                ),
            ));
        }
        let valid = !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '/'));
        if !valid {
            return Err((
                format!("{text} is not a tool id", text = code(text)),
                "tool ids use letters, digits, `_`, `-`, `:` and `/`; or use a capability or `*`"
                    .to_owned(),
            ));
        }
        Ok(Permission::Tool(text.to_owned()))
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Permission::Tool(id) => f.write_str(id),
            Permission::Capability(c) => f.write_str(c.as_str()),
            Permission::Any => f.write_str("*"),
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub permission: Permission,
    pub pattern: Pattern,
    pub action: Action,
    /// Why the rule exists, shown in explanations.
    pub reason: Option<String>,
    pub source: RuleSource,
}

impl Rule {
    pub fn new(
        permission: Permission,
        pattern: Pattern,
        action: Action,
        source: RuleSource,
    ) -> Self {
        Self {
            permission,
            pattern,
            action,
            reason: None,
            source,
        }
    }

    /// `bash prefix `cargo test` → allow`
    pub fn summary(&self) -> String {
        format!("{} {} → {}", self.permission, self.pattern, self.action)
    }

    /// The rule in the file format, one `[[permission]]` table.
    pub fn to_toml(&self) -> String {
        let mut out = String::from("[[permission]]\n");
        out.push_str(&format!(
            "permission = {}\n",
            toml_string(&self.permission.to_string())
        ));
        match self.pattern.kind() {
            PatternKind::Any => out.push_str("pattern = \"*\"\n"),
            PatternKind::Exact | PatternKind::Glob => {
                out.push_str(&format!("pattern = {}\n", toml_string(self.pattern.text())));
            }
            PatternKind::Prefix => {
                out.push_str(&format!("prefix = {}\n", toml_string(self.pattern.text())));
            }
            PatternKind::Class => {
                out.push_str(&format!("class = {}\n", toml_string(self.pattern.text())));
            }
        }
        out.push_str(&format!("action = \"{}\"\n", self.action));
        if let Some(reason) = &self.reason {
            out.push_str(&format!("reason = {}\n", toml_string(reason)));
        }
        out
    }
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The rules of one source, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    pub source: RuleSource,
    pub rules: Vec<Rule>,
}

/// Why rules could not be loaded, persisted or trusted.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A rule file or the trust store exists but cannot be read. The host reports it and stops.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A rule file or the trust store cannot be written; nothing was changed.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file is not valid TOML, or has keys the format does not know.
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    /// One rule is invalid. `index` counts `[[permission]]` tables from 1.
    #[error("{origin}, rule #{index}: {message}. Fix: {fix}")]
    InvalidRule {
        origin: String,
        index: usize,
        message: String,
        fix: String,
    },
    /// The decision cannot be remembered or persisted as a rule.
    #[error("nothing to persist: {0}")]
    NotCacheable(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    #[serde(default)]
    permission: Vec<RuleForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleForm {
    permission: String,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    class: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    /// Subjects the pattern must match, checked when the file is loaded.
    #[serde(default)]
    examples: Vec<String>,
    /// Subjects the pattern must not match.
    #[serde(default)]
    counterexamples: Vec<String>,
}

impl RuleSet {
    pub fn empty(source: RuleSource) -> Self {
        Self {
            source,
            rules: Vec::new(),
        }
    }

    /// Parses and validates a rule file's text: every pattern is compiled and every example
    /// checked now, so a mistake surfaces at start-up with the file and a fix.
    pub fn parse(text: &str, source: RuleSource) -> Result<Self, PolicyError> {
        let origin = source.to_string();
        let form: FileForm = toml::from_str(text).map_err(|e| PolicyError::Syntax {
            origin: origin.clone(),
            message: format!(
                "{}; the file holds `[[permission]]` tables with keys permission, pattern or \
                 prefix or class, action, reason, examples, counterexamples",
                e.to_string().trim_end()
            ),
        })?;
        let mut rules = Vec::with_capacity(form.permission.len());
        for (i, raw) in form.permission.into_iter().enumerate() {
            let index = i + 1;
            let invalid = |message: String, fix: String| PolicyError::InvalidRule {
                origin: origin.clone(),
                index,
                message,
                fix,
            };
            let permission =
                Permission::parse(&raw.permission).map_err(|(m, fix)| invalid(m, fix))?;
            let action = match raw.action.as_deref().map(str::trim) {
                None => Action::Ask,
                Some("allow") => Action::Allow,
                Some("deny") => Action::Deny,
                Some("ask") => Action::Ask,
                Some(other) => {
                    let hint = closest(&other.to_ascii_lowercase(), &["allow", "deny", "ask"])
                        .map(|n| format!("did you mean \"{n}\"? "))
                        .unwrap_or_default();
                    return Err(invalid(
                        format!("unknown action {other}", other = code(other)),
                        format!("{hint}write action = \"allow\", \"deny\" or \"ask\""),
                    ));
                }
            };
            let given = [&raw.pattern, &raw.prefix, &raw.class]
                .iter()
                .filter(|p| p.is_some())
                .count();
            if given > 1 {
                return Err(invalid(
                    "a rule has at most one of pattern, prefix and class".to_owned(),
                    "keep one of them (split the rule in two if you need both)".to_owned(),
                ));
            }
            let pattern = if let Some(text) = &raw.pattern {
                Pattern::glob(text).map_err(|e| {
                    invalid(
                        format!("invalid pattern {text}: {e}", text = code(text)),
                        "globs use `*`, `**`, `?`, `[...]` and `{a,b}`; escape a literal one \
                         with `\\`"
                            .to_owned(),
                    )
                })?
            } else if let Some(text) = &raw.prefix {
                Pattern::prefix(text).map_err(|e| {
                    invalid(e, "write the leading words or path components".to_owned())
                })?
            } else if let Some(class) = &raw.class {
                if class.trim() != CommandClass::ReadOnly.as_str() {
                    return Err(invalid(
                        format!("unknown class {class}", class = code(class)),
                        "the only class is \"read-only\"".to_owned(),
                    ));
                }
                let for_commands = matches!(
                    &permission,
                    Permission::Any | Permission::Capability(Capability::ShellRun)
                ) || permission
                    == Permission::Tool(BundledTool::Bash.id().to_owned());
                if !for_commands {
                    return Err(invalid(
                        format!(
                            "class {class} applies to shell commands only",
                            class = code(class)
                        ),
                        "use permission = \"bash\" or \"shell.run\"".to_owned(),
                    ));
                }
                Pattern::class(CommandClass::ReadOnly)
            } else {
                Pattern::any()
            };
            let rule = Rule {
                permission,
                pattern,
                action,
                reason: raw.reason.filter(|r| !r.trim().is_empty()),
                source: source.clone(),
            };
            check_examples(&rule, &raw.examples, &raw.counterexamples)
                .map_err(|(m, fix)| invalid(m, fix))?;
            rules.push(rule);
        }
        Ok(Self { source, rules })
    }
}

/// What kind of subject a rule's examples describe, from its permission.
fn example_target_kind(permission: &Permission) -> &'static str {
    match permission {
        Permission::Capability(Capability::ShellRun) => "command",
        Permission::Capability(Capability::FsRead | Capability::FsWrite) => "path",
        Permission::Capability(Capability::NetFetch | Capability::ShellNet) => "host",
        Permission::Tool(id) => match BundledTool::from_id(id) {
            Some(BundledTool::Bash) => "command",
            Some(
                BundledTool::Read
                | BundledTool::Write
                | BundledTool::Edit
                | BundledTool::Glob
                | BundledTool::Grep
                | BundledTool::ApplyPatch,
            ) => "path",
            Some(BundledTool::WebFetch | BundledTool::WebSearch) => "host",
            _ => "name",
        },
        _ => "name",
    }
}

fn check_examples(
    rule: &Rule,
    examples: &[String],
    counterexamples: &[String],
) -> Result<(), (String, String)> {
    if (!examples.is_empty() || !counterexamples.is_empty())
        && rule.pattern.kind() == PatternKind::Class
    {
        return Err((
            "examples cannot be checked for a class rule".to_owned(),
            "remove examples/counterexamples from this rule".to_owned(),
        ));
    }
    let kind = example_target_kind(&rule.permission);
    let restrictive = rule.action != Action::Allow;
    let matches = |example: &str| -> bool {
        match kind {
            "command" => {
                let words = command_words(example);
                let text = words.join(" ");
                rule.pattern.matches(
                    &Target::Command {
                        words: &words,
                        text: &text,
                        read_only: false,
                        outside_grammar: false,
                    },
                    restrictive,
                )
            }
            "path" => {
                let absolute = example.starts_with('/');
                let home = example.starts_with("~/");
                let session = example.starts_with(SESSION);
                rule.pattern.matches(
                    &Target::Path {
                        relative: (!absolute && !home && !session).then_some(example),
                        absolute: example,
                        home: home.then_some(example),
                        session: session.then_some(example),
                    },
                    restrictive,
                )
            }
            "host" => rule
                .pattern
                .matches(&Target::Host(&example.to_ascii_lowercase()), restrictive),
            _ => rule.pattern.matches(&Target::Name(example), restrictive),
        }
    };
    for example in examples {
        if !matches(example) {
            return Err((
                format!(
                    "{} does not match its example {example}",
                    rule.pattern,
                    example = code(example)
                ),
                "correct the pattern or the example".to_owned(),
            ));
        }
    }
    for counter in counterexamples {
        if matches(counter) {
            return Err((
                format!(
                    "{} matches its counterexample {counter}",
                    rule.pattern,
                    counter = code(counter)
                ),
                "narrow the pattern or correct the counterexample".to_owned(),
            ));
        }
    }
    Ok(())
}

/// The known name nearest to `text` (edit distance at most 2).
fn closest<'a>(text: &str, names: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .map(|n| (levenshtein(text, n), *n))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RuleSet, PolicyError> {
        RuleSet::parse(
            text,
            RuleSource::Project(PathBuf::from("/w/.keel/permissions.toml")),
        )
    }

    #[test]
    fn unknown_action_names_the_file_and_a_fix() {
        let err =
            parse("[[permission]]\npermission = \"bash\"\nprefix = \"ls\"\naction = \"alow\"\n")
                .unwrap_err()
                .to_string();
        assert!(err.contains("/w/.keel/permissions.toml"), "{err}");
        assert!(err.contains("rule #1"), "{err}");
        assert!(err.contains("unknown action `alow`"), "{err}");
        assert!(err.contains("did you mean \"allow\""), "{err}");
    }

    #[test]
    fn unknown_capability_and_keys_are_errors() {
        let err = parse("[[permission]]\npermission = \"fs.raed\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `fs.read`"), "{err}");
        let err = parse("[[permission]]\npermission = \"bash\"\npatern = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("patern"), "{err}");
        let err = parse("[[permission]]\npermission = \"bash\"\npattern = \"[x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid pattern"), "{err}");
    }

    #[test]
    fn examples_are_checked_at_load() {
        let ok = "[[permission]]\npermission = \"bash\"\nprefix = \"cargo test\"\naction = \"allow\"\n\
                  examples = [\"cargo test -p core\"]\ncounterexamples = [\"cargo testx\", \"cargo build\"]\n";
        assert_eq!(parse(ok).unwrap().rules.len(), 1);
        let bad = "[[permission]]\npermission = \"fs.write\"\npattern = \"src/*\"\n\
                   examples = [\"src/a/b.rs\"]\n";
        let err = parse(bad).unwrap_err().to_string();
        assert!(err.contains("does not match its example"), "{err}");
    }
}
