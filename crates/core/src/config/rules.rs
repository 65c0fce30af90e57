//! `[[permission]]` rules in the configuration files, and building the session's [`Policy`].
//!
//! The tables have the format of the permission engine's `permissions.toml` (see
//! docs/permissions.md). Rules from the user file join the manifest scope (after the bundled
//! defaults and `permissions.toml` of the same directory); rules from the project file join the
//! project scope. A pattern or prefix may begin with a path variable: `{workspace}` (replaced by
//! the workspace's canonical path) or `{session}` (the session's scratch directory, matched by
//! the engine). Any other `{name}` is an error naming the file and line.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};

use super::error::{FileText, did_you_mean};
use super::{Config, ConfigError, Effective, Source};
use crate::policy::layers::RuleSource;
use crate::policy::{Policy, PolicyError, PolicyLayers, RuleSet, Trust, TrustStore};

/// The path variables a rule's pattern or prefix may begin with.
pub const RULE_VARIABLES: &[&str] = &["workspace", "session"];

/// What a permission rule does to the calls it matches: the policy's [`crate::policy::Action`],
/// the one definition (serde and JSON Schema derived there).
pub use crate::policy::Action as RuleAction;

/// One `[[permission]]` table: which calls it covers and what happens to them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionRule {
    /// A tool id (`bash`), a capability (`fs.read`, `fs.write`, `shell.run`, `net.fetch`,
    /// `mcp.call`) or `*`.
    pub permission: String,
    /// A glob or exact subject: a path (`src/**`, `{workspace}/generated/**`), a command
    /// (`git status`), a host. At most one of pattern, prefix and class; none means every
    /// subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Leading whole words of a command (`cargo test`) or components of a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// `read-only`: commands that only read (bash and shell.run rules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// `allow`, `deny` or `ask` (`ask` when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<RuleAction>,
    /// Why the rule exists; shown in explanations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Subjects the pattern must match (checked when loaded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Subjects the pattern must not match (checked when loaded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counterexamples: Vec<String>,
    /// Where the rule was written (set by the loader; not part of the file format).
    #[serde(skip)]
    #[schemars(skip)]
    pub source: Option<Source>,
}

impl PermissionRule {
    /// The action, `ask` when the rule leaves it out.
    pub fn action(&self) -> RuleAction {
        self.action.unwrap_or(RuleAction::Ask)
    }

    /// How the rule names its subjects: `pattern X`, `prefix X`, `class X` or `*`.
    pub fn subject(&self) -> String {
        match (&self.pattern, &self.prefix, &self.class) {
            (Some(p), _, _) => format!("pattern {p}"),
            (_, Some(p), _) => format!("prefix {p}"),
            (_, _, Some(c)) => format!("class {c}"),
            _ => "*".to_owned(),
        }
    }
}

/// Checks the path variables of every rule of one file.
pub(super) fn check_variables(
    config: &Config,
    tree: &DeTable<'_>,
    file: &FileText<'_>,
) -> Result<(), ConfigError> {
    for (i, rule) in config.permissions.iter().enumerate() {
        for (key, text) in [("pattern", &rule.pattern), ("prefix", &rule.prefix)] {
            let Some(text) = text else { continue };
            for (offset, name) in variable_names(text) {
                let at = || file.source_at(value_offset(tree, i, key).unwrap_or(0));
                if !RULE_VARIABLES.contains(&name.as_str()) {
                    return Err(ConfigError::UnknownVariable {
                        suggestion: did_you_mean(&name, RULE_VARIABLES.iter().copied()),
                        variable: name,
                        pattern: text.clone(),
                        location: at(),
                        known: RULE_VARIABLES,
                    });
                }
                if offset != 0 {
                    return Err(ConfigError::BadValue {
                        key: format!("permission[{i}].{key}"),
                        location: at(),
                        expected: format!("`{{{name}}}` may only begin a {key}, found `{text}`"),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The `{name}` tokens of a pattern (with their byte offsets) that look like variables: `{a,b}`
/// (glob alternation) and text that is not a name (`{print $1}`) are left alone.
fn variable_names(pattern: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut searched = 0;
    while let Some(start) = pattern[searched..].find('{').map(|i| i + searched) {
        let after = &pattern[start + 1..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        let is_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if is_name {
            out.push((start, name.to_owned()));
        }
        searched = start + 1 + end + 1;
    }
    out
}

/// The byte offset of rule `index`'s `key` value (or of the rule itself).
fn value_offset(tree: &DeTable<'_>, index: usize, key: &str) -> Option<usize> {
    let (_, rules) = tree.iter().find(|(k, _)| k.get_ref() == "permission")?;
    let DeValue::Array(rules) = rules.get_ref() else {
        return None;
    };
    let rule = rules.get(index)?;
    if let DeValue::Table(fields) = rule.get_ref()
        && let Some((_, value)) = fields.iter().find(|(k, _)| k.get_ref() == key)
    {
        return Some(value.span().start);
    }
    Some(rule.span().start)
}

/// A rule's text with a leading `{workspace}` replaced by the workspace's path (escaped when
/// the text is a glob).
fn expand_workspace(text: &str, workspace: &Path, glob: bool) -> String {
    match text.strip_prefix("{workspace}") {
        Some(rest) => {
            let root = workspace.display().to_string();
            let root = if glob { globset::escape(&root) } else { root };
            format!("{root}{rest}")
        }
        None => text.to_owned(),
    }
}

/// The configuration's rules as the engine's rule sets: the user file's (manifest scope) and
/// the project file's (project scope), each `None` when it has no rules. Each set is validated
/// by the engine (patterns compiled, examples checked).
pub fn policy_rule_sets(
    effective: &Effective,
    workspace: &Path,
) -> Result<(Option<RuleSet>, Option<RuleSet>), PolicyError> {
    let workspace = crate::runtime::paths::resolve(workspace).unwrap_or_else(|_| workspace.into());
    let mut sets = (None, None);
    for file in effective.files.iter().filter(|f| f.found) {
        let rules: Vec<PermissionRule> = effective
            .config
            .permissions
            .iter()
            .filter(|rule| matches!(&rule.source, Some(Source::File(at)) if at.path == file.path))
            .map(|rule| PermissionRule {
                pattern: rule
                    .pattern
                    .as_deref()
                    .map(|p| expand_workspace(p, &workspace, true)),
                prefix: rule
                    .prefix
                    .as_deref()
                    .map(|p| expand_workspace(p, &workspace, false)),
                source: None,
                ..rule.clone()
            })
            .collect();
        if rules.is_empty() {
            continue;
        }
        #[derive(Serialize)]
        struct FileForm {
            permission: Vec<PermissionRule>,
        }
        let text =
            toml::to_string(&FileForm { permission: rules }).map_err(|e| PolicyError::Syntax {
                origin: file.path.display().to_string(),
                message: format!("cannot restate the rules: {e}"),
            })?;
        if file.layer == "user" {
            sets.0 = Some(RuleSet::parse(
                &text,
                RuleSource::Global(file.path.clone()),
            )?);
        } else {
            sets.1 = Some(RuleSet::parse(
                &text,
                RuleSource::Project(file.path.clone()),
            )?);
        }
    }
    Ok(sets)
}

/// Every `[[permission]]` rule of the configuration files, checked as the permission engine
/// will check it when a session opens (permission names, patterns, examples): the first invalid
/// rule as "FILE:LINE:COLUMN: message. Fix: ...".
// String error: "FILE:LINE:COLUMN: message. Fix: ...", printed as is.
pub fn check_permission_rules(effective: &Effective, workspace: &Path) -> Result<(), String> {
    let Err(error) = policy_rule_sets(effective, workspace) else {
        return Ok(());
    };
    let PolicyError::InvalidRule {
        origin,
        index,
        message,
        fix,
    } = &error
    else {
        return Err(error.to_string());
    };
    let at = effective
        .config
        .permissions
        .iter()
        .filter_map(|rule| match &rule.source {
            Some(Source::File(at)) if at.path.display().to_string() == *origin => Some(at),
            _ => None,
        })
        .nth(index.saturating_sub(1));
    match at {
        Some(at) => Err(format!(
            "invalid permission rule at {}:{}:{}: {message}. Fix: {fix}",
            at.shown, at.line, at.column
        )),
        None => Err(error.to_string()),
    }
}

/// The permission engine of a session in `workspace`: the bundled defaults, `permissions.toml`
/// beside the user file and in `<workspace>/.keel/`, the configuration's `[[permission]]`
/// rules, and the configured mode. Headless engines turn every ask into a denial.
pub fn build_policy(
    effective: &Effective,
    workspace: &Path,
    headless: bool,
    trust: Trust,
) -> Result<Policy, PolicyError> {
    let global_dir: Option<PathBuf> = effective
        .files
        .iter()
        .find(|f| f.layer == "user")
        .and_then(|f| f.path.parent().map(Path::to_path_buf));
    let mut layers = PolicyLayers::load(workspace, global_dir.as_deref(), trust)?;
    let (user, project) = policy_rule_sets(effective, workspace)?;
    layers.manifest.extend(user);
    if let Some(project) = project {
        match &mut layers.project {
            Some(existing) => existing.rules.extend(project.rules),
            None => layers.project = Some(project),
        }
    }
    Policy::new(layers, effective.config.mode, headless)
}

/// The store of trusted workspaces: `$XDG_DATA_HOME/keel/trusted.toml` (in
/// [`super::user_data_dir`], where the engine looks for it too).
pub fn default_trust_store() -> Option<TrustStore> {
    Some(TrustStore::new(
        super::user_data_dir()?.join("trusted.toml"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_names_in_braces_with_their_offsets() {
        assert_eq!(
            variable_names("{workspace}/a/{b,c}/{print $1}/{x}"),
            vec![(0, "workspace".to_owned()), (31, "x".to_owned())]
        );
    }

    #[test]
    fn workspace_expands_escaped_in_globs_only() {
        let ws = Path::new("/w/[x]");
        assert_eq!(
            expand_workspace("{workspace}/**", ws, true),
            "/w/[[]x[]]/**"
        );
        assert_eq!(expand_workspace("{workspace}/a", ws, false), "/w/[x]/a");
        assert_eq!(expand_workspace("{session}/a", ws, true), "{session}/a");
    }
}
