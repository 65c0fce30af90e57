//! The providers' documented request limits, checked the way the real APIs check them: a body
//! that breaks one is answered `400 invalid_request_error` naming the rule
//! ([`super::MockModel::check_limits`]).
//!
//! Written from the providers' documentation (2026-11-28), independently of Keel's own
//! `provider::limits`, so a test compares Keel's request builder with the rules, not with
//! itself:
//!
//! - Anthropic Messages: `max_tokens` ≥ 1 and within the model's output limit; extended thinking
//!   `budget_tokens` ≥ 1024 and < `max_tokens`, only on models that take it (adaptive-only models
//!   refuse it, older models have no thinking); adaptive thinking only on models that have it;
//!   tool names `^[a-zA-Z0-9_-]{1,64}$`, unique; at most 4 `cache_control` blocks.
//! - OpenAI Chat Completions: tool (function) names `^[a-zA-Z0-9_-]{1,64}$`, unique; at most 128
//!   tools; `reasoning_effort` only on reasoning models; `max_completion_tokens` within the
//!   model's output limit.

use serde_json::Value;

/// Anthropic models: name prefix, output limit, thinking (`budget`, `adaptive`, `none`).
const ANTHROPIC: &[(&str, u64, &str)] = &[
    ("claude-3-5-haiku", 8192, "none"),
    ("claude-3-7-sonnet", 64_000, "budget"),
    ("claude-haiku-4-5", 64_000, "budget"),
    ("claude-sonnet-4-5", 64_000, "budget"),
    ("claude-sonnet-4-6", 64_000, "both"),
    ("claude-sonnet-4", 64_000, "budget"),
    ("claude-opus-4-1", 32_000, "budget"),
    ("claude-opus-4-5", 64_000, "budget"),
    ("claude-opus-4-6", 128_000, "both"),
    ("claude-opus-4-7", 128_000, "adaptive"),
    ("claude-opus-4", 32_000, "budget"),
    ("claude-opus-5", 128_000, "adaptive"),
    ("claude-sonnet-5", 128_000, "adaptive"),
];

/// OpenAI models: name prefix, output limit, whether they reason.
const OPENAI: &[(&str, u64, bool)] = &[
    ("gpt-5-chat", 16_384, false),
    ("gpt-5", 128_000, true),
    ("gpt-4.1", 32_768, false),
    ("gpt-4o", 16_384, false),
    ("o3", 100_000, true),
    ("o4-mini", 100_000, true),
];

fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// Tool names: valid and unique.
fn check_names<'a>(names: impl Iterator<Item = Option<&'a str>>, errors: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    for (index, name) in names.enumerate() {
        let name = name.unwrap_or_default();
        if !valid_tool_name(name) {
            errors.push(format!(
                "tools.{index}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$' (got `{name}`)"
            ));
        }
        if !seen.insert(name) {
            errors.push(format!("tools: Tool names must be unique (`{name}`)"));
        }
    }
}

/// How many `cache_control` objects `value` holds, at any depth.
fn cache_controls(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(cache_controls).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(cache_controls).sum(),
        _ => 0,
    }
}

/// The rules an Anthropic Messages body breaks (none: the API would take it).
pub fn anthropic(body: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let model = body["model"].as_str().unwrap_or_default();
    let row = ANTHROPIC
        .iter()
        .find(|(prefix, _, _)| model.starts_with(prefix));
    let max_tokens = body["max_tokens"].as_u64().unwrap_or(0);
    if max_tokens < 1 {
        errors.push("max_tokens: Field required (an integer of at least 1)".to_owned());
    }
    if let Some((_, limit, _)) = row
        && max_tokens > *limit
    {
        errors.push(format!(
            "max_tokens: {max_tokens} > {limit}, which is the maximum allowed number of output tokens for {model}"
        ));
    }
    let thinking = &body["thinking"];
    let style = row.map_or("budget", |(_, _, style)| *style);
    match thinking["type"].as_str() {
        None | Some("disabled") => {}
        Some("enabled") => {
            if !matches!(style, "budget" | "both") {
                errors.push(format!(
                    "thinking.type.enabled: not supported for {model}; use thinking.type.adaptive"
                ));
            }
            let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
            if budget < 1024 {
                errors.push(format!(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024 (got {budget})"
                ));
            }
            if budget >= max_tokens {
                errors.push(format!(
                    "`max_tokens` must be greater than `thinking.budget_tokens` ({max_tokens} <= {budget})"
                ));
            }
        }
        Some("adaptive") => {
            if !matches!(style, "adaptive" | "both") {
                errors.push(format!("thinking.type.adaptive: not supported for {model}"));
            }
            if let Some(effort) = body["output_config"]["effort"].as_str()
                && !matches!(effort, "low" | "medium" | "high")
            {
                errors.push(format!("output_config.effort: unknown level `{effort}`"));
            }
        }
        Some(other) => errors.push(format!("thinking.type: unknown `{other}`")),
    }
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    check_names(tools.iter().map(|tool| tool["name"].as_str()), &mut errors);
    let breakpoints = cache_controls(body);
    if breakpoints > 4 {
        errors.push(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    errors
}

/// The rules an OpenAI Chat Completions body breaks (none: the API would take it).
pub fn openai(body: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let model = body["model"].as_str().unwrap_or_default();
    let row = OPENAI
        .iter()
        .find(|(prefix, _, _)| model.starts_with(prefix));
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if tools.len() > 128 {
        errors.push(format!(
            "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length {} instead.",
            tools.len()
        ));
    }
    check_names(
        tools.iter().map(|tool| tool["function"]["name"].as_str()),
        &mut errors,
    );
    if let Some((_, limit, reasons)) = row {
        if body.get("reasoning_effort").is_some() && !reasons {
            errors.push(format!(
                "Unsupported parameter: 'reasoning_effort' is not supported with {model}."
            ));
        }
        let output = body["max_completion_tokens"]
            .as_u64()
            .or_else(|| body["max_tokens"].as_u64())
            .unwrap_or(0);
        if output > *limit {
            errors.push(format!(
                "max_completion_tokens is too large: {output}. This model supports at most {limit} completion tokens."
            ));
        }
    }
    if let Some(effort) = body["reasoning_effort"].as_str()
        && !matches!(effort, "minimal" | "low" | "medium" | "high")
    {
        errors.push(format!("reasoning_effort: unknown level `{effort}`"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn anthropic_rules() {
        let ok = json!({"model": "claude-sonnet-4-5", "max_tokens": 12288,
            "thinking": {"type": "enabled", "budget_tokens": 4096}, "messages": []});
        assert!(anthropic(&ok).is_empty(), "{:?}", anthropic(&ok));
        let bad = json!({"model": "claude-sonnet-4-5", "max_tokens": 8192,
            "thinking": {"type": "enabled", "budget_tokens": 8191},
            "tools": [{"name": "a.b"}, {"name": "x", "cache_control": {}}],
            "system": [{"cache_control": {}}, {"cache_control": {}}, {"cache_control": {}},
                       {"cache_control": {}}]});
        let errors = anthropic(&bad);
        assert_eq!(errors.len(), 2, "{errors:?}");
        let over = json!({"model": "claude-opus-4-1", "max_tokens": 40192,
            "thinking": {"type": "enabled", "budget_tokens": 32000}});
        assert_eq!(anthropic(&over).len(), 1);
        let adaptive_only = json!({"model": "claude-opus-4-7", "max_tokens": 20000,
            "thinking": {"type": "enabled", "budget_tokens": 4096}});
        assert_eq!(anthropic(&adaptive_only).len(), 1);
    }

    #[test]
    fn openai_rules() {
        let tools: Vec<Value> = (0..129)
            .map(|i| json!({"type": "function", "function": {"name": format!("t{i}")}}))
            .collect();
        let body = json!({"model": "gpt-4.1", "reasoning_effort": "low", "tools": tools});
        assert_eq!(openai(&body).len(), 2, "{:?}", openai(&body));
        let ok =
            json!({"model": "gpt-5", "reasoning_effort": "high", "max_completion_tokens": 40192});
        assert!(openai(&ok).is_empty());
    }
}
