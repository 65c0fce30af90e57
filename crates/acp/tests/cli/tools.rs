//! `keel tools` and `keel tool call`.
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use super::common::{Sandbox, run};

#[test]
fn tools_json_parses_as_a_list_of_specs() {
    let out = run(Sandbox::new().keel(&["tools", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let tools: Vec<serde_json::Value> = serde_json::from_str(&out.stdout).unwrap();
    for tool in &tools {
        assert!(tool["id"].is_string() && tool["kind"].is_string(), "{tool}");
        assert!(
            tool["parameters"].is_object() && tool["enabled"].is_boolean(),
            "{tool}"
        );
    }
}

#[test]
fn unknown_tool_and_bad_json_are_usage_errors() {
    let sandbox = Sandbox::new();
    let out = run(sandbox.keel(&["tool", "call", "nope", "{}"]));
    assert_eq!(out.code, 2);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("unknown tool `nope`"), "{}", out.stderr);
}
