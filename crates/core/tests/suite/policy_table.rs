//! The decision table: `fixtures/policy/cases.toml`, one row per call, run against a fresh
//! temporary world each (real files, real symlinks).

use std::collections::BTreeMap;

use keel_core::policy::{Action, Answer, Call, Mode, Trust, render_check};
use serde::Deserialize;
use serde_json::Value;

use super::policy_support::{World, fixture, spec};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Prior {
    tool: String,
    args: toml::Table,
    answer: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    tool: String,
    args: toml::Table,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    headless: bool,
    #[serde(default)]
    trust: Option<String>,
    /// `wide` (default), `workspace-writes`, `git-only`.
    #[serde(default)]
    scope: Option<String>,
    /// Text of `<ws>/.keel/permissions.toml`.
    #[serde(default)]
    project: Option<String>,
    /// Text of the global `permissions.toml`.
    #[serde(default)]
    global: Option<String>,
    /// Extra files, relative to the temporary directory (`ws/...`, `home/...`).
    #[serde(default)]
    files: BTreeMap<String, String>,
    /// Extra directories, relative to the temporary directory.
    #[serde(default)]
    dirs: Vec<String>,
    /// Extra symlinks: path (relative to the temporary directory) → target as written.
    #[serde(default)]
    links: BTreeMap<String, String>,
    /// Calls decided and answered before this one, in order.
    #[serde(default)]
    answers: Vec<Prior>,
    expect: String,
    /// A fragment of what `keel permissions check` prints.
    because: String,
    #[serde(default)]
    keys: Option<Vec<String>>,
    /// A fragment of `always_scope`, or `none`.
    #[serde(default)]
    always: Option<String>,
}

fn to_json(world: &World, table: &toml::Table) -> Value {
    fn convert(world: &World, value: &toml::Value) -> Value {
        match value {
            toml::Value::String(s) => Value::String(world.expand(s)),
            toml::Value::Integer(i) => Value::from(*i),
            toml::Value::Boolean(b) => Value::Bool(*b),
            toml::Value::Array(items) => {
                Value::Array(items.iter().map(|v| convert(world, v)).collect())
            }
            toml::Value::Table(t) => Value::Object(
                t.iter()
                    .map(|(k, v)| (k.clone(), convert(world, v)))
                    .collect(),
            ),
            other => Value::String(other.to_string()),
        }
    }
    convert(world, &toml::Value::Table(table.clone()))
}

fn trust(text: Option<&str>) -> Trust {
    match text.unwrap_or("unknown") {
        "trusted" => Trust::Trusted,
        "untrusted" => Trust::Untrusted,
        "unknown" => Trust::Unknown,
        other => panic!("unknown trust `{other}`"),
    }
}

fn action(text: &str) -> Action {
    match text {
        "allow" => Action::Allow,
        "deny" => Action::Deny,
        "ask" => Action::Ask,
        other => panic!("unknown action `{other}`"),
    }
}

/// Runs one case; `Err` describes the mismatch.
fn run(case: &Case) -> Result<(), String> {
    let world = World::new();
    if let Some(text) = &case.project {
        world.write_project_rules(text);
    }
    if let Some(text) = &case.global {
        world.write_global_rules(text);
    }
    for dir in &case.dirs {
        world.make_dir(dir);
    }
    for (path, text) in &case.files {
        world.write_file(path, text);
    }
    for (path, target) in &case.links {
        world.make_link(path, target);
    }
    let mode: Mode = case
        .mode
        .as_deref()
        .unwrap_or("allowlist")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let policy = world.policy(mode, case.headless, trust(case.trust.as_deref()));
    let runtime = world.runtime(case.scope.as_deref().unwrap_or("wide"));
    for prior in &case.answers {
        let spec = spec(&prior.tool);
        let args = to_json(&world, &prior.args);
        let decision = policy.decide(&Call {
            spec: &spec,
            target: &super::policy_support::target(&spec, &args),
            runtime: &runtime,
        });
        let answer: Answer = prior.answer.parse()?;
        policy.remember(&decision, answer);
    }
    let spec = spec(&case.tool);
    let args = to_json(&world, &case.args);
    let decision = policy.decide(&Call {
        spec: &spec,
        target: &super::policy_support::target(&spec, &args),
        runtime: &runtime,
    });
    let report = render_check(&decision);
    let mut problems = Vec::new();
    if decision.action != action(&case.expect) {
        problems.push(format!("expected {}, got {}", case.expect, decision.action));
    }
    let because = world.expand(&case.because);
    if !report.contains(&because) {
        problems.push(format!("the report lacks `{because}`"));
    }
    if let Some(keys) = &case.keys {
        let expected: Vec<String> = keys.iter().map(|k| world.expand(k)).collect();
        let actual: Vec<String> = decision.keys.iter().map(|k| k.key.clone()).collect();
        if expected != actual {
            problems.push(format!("keys {actual:?}, expected {expected:?}"));
        }
    }
    match (case.always.as_deref(), &decision.always_scope) {
        (None, _) => {}
        (Some("none"), None) => {}
        (Some("none"), Some(scope)) => {
            problems.push(format!("always_scope is `{scope}`, expected none"))
        }
        (Some(fragment), Some(scope)) if scope.contains(&world.expand(fragment)) => {}
        (Some(fragment), other) => {
            problems.push(format!("always_scope {other:?} lacks `{fragment}`"))
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n--- report ---\n{report}", problems.join("; ")))
    }
}

#[test]
fn decision_table() {
    let text = std::fs::read_to_string(fixture("cases.toml")).unwrap();
    let table: Table = toml::from_str(&text).unwrap();
    assert!(
        table.case.len() >= 260,
        "the table holds {} cases",
        table.case.len()
    );
    let mut names = BTreeMap::new();
    for case in &table.case {
        assert!(
            names.insert(case.name.clone(), ()).is_none(),
            "duplicate case name `{}`",
            case.name
        );
    }
    let failures: Vec<String> = table
        .case
        .iter()
        .filter_map(|case| run(case).err().map(|e| format!("[{}] {e}", case.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        table.case.len(),
        failures.join("\n\n")
    );
}
