//! What the providers document about the requests they accept, in one place: each model's
//! output limit and how it thinks, the thinking budget rules, the tool-name pattern and the
//! counts the APIs cap. The request builders ([`super::AnthropicProvider::request_body`],
//! [`super::OpenAiProvider::request_body`]) plan every request from here, so a setting can never
//! produce a body the provider answers with a 400.
//!
//! The model table is dated: **2026-11-28**, from Anthropic's models overview and extended /
//! adaptive thinking pages (platform.claude.com/docs) and OpenAI's model pages
//! (platform.openai.com/docs/models). A model not in the table gets a conservative row: an output
//! limit every current model of the family accepts.

/// Anthropic: the smallest `thinking.budget_tokens` accepted.
pub const MIN_THINKING_BUDGET: u32 = 1024;
/// Anthropic: the most `cache_control` breakpoints one request may carry.
pub const MAX_CACHE_BREAKPOINTS: usize = 4;
/// Both APIs: the longest tool (function) name.
pub const MAX_TOOL_NAME: usize = 64;
/// OpenAI Chat Completions: the most tools one request may offer (`array_above_max_length`).
pub const OPENAI_MAX_TOOLS: usize = 128;

/// How a model is asked to think.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingStyle {
    /// It cannot: no thinking field is sent.
    None,
    /// Anthropic extended thinking: `{"type": "enabled", "budget_tokens": N}`, with
    /// `1024 <= N < max_tokens`.
    Budget,
    /// Anthropic adaptive thinking: `{"type": "adaptive"}` with `output_config.effort`; the
    /// budget form is refused (Claude Opus 4.7 and later) or deprecated (the 4.6 models).
    Adaptive,
    /// OpenAI reasoning models: `reasoning_effort`; reasoning tokens count against
    /// `max_completion_tokens`.
    Effort,
}

/// One model's documented limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// The largest `max_tokens` (`max_completion_tokens`) the model accepts.
    pub max_output: u32,
    /// How it thinks.
    pub thinking: ThinkingStyle,
}

const fn row(max_output: u32, thinking: ThinkingStyle) -> ModelLimits {
    ModelLimits {
        max_output,
        thinking,
    }
}

/// Anthropic models by name prefix, most specific first (dated in the module docs).
const ANTHROPIC: &[(&str, ModelLimits)] = &[
    ("claude-3-haiku", row(4096, ThinkingStyle::None)),
    ("claude-3-opus", row(4096, ThinkingStyle::None)),
    ("claude-3-5-haiku", row(8192, ThinkingStyle::None)),
    ("claude-3-5-sonnet", row(8192, ThinkingStyle::None)),
    ("claude-3-7-sonnet", row(64_000, ThinkingStyle::Budget)),
    ("claude-haiku-4-5", row(64_000, ThinkingStyle::Budget)),
    ("claude-sonnet-4-5", row(64_000, ThinkingStyle::Budget)),
    ("claude-sonnet-4-6", row(64_000, ThinkingStyle::Adaptive)),
    ("claude-sonnet-4", row(64_000, ThinkingStyle::Budget)),
    ("claude-opus-4-1", row(32_000, ThinkingStyle::Budget)),
    ("claude-opus-4-5", row(64_000, ThinkingStyle::Budget)),
    ("claude-opus-4-6", row(128_000, ThinkingStyle::Adaptive)),
    ("claude-opus-4-7", row(128_000, ThinkingStyle::Adaptive)),
    ("claude-opus-4-8", row(128_000, ThinkingStyle::Adaptive)),
    ("claude-opus-4", row(32_000, ThinkingStyle::Budget)),
    ("claude-haiku-5", row(64_000, ThinkingStyle::Adaptive)),
    ("claude-sonnet-5", row(128_000, ThinkingStyle::Adaptive)),
    ("claude-opus-5", row(128_000, ThinkingStyle::Adaptive)),
    ("claude-fable-5", row(128_000, ThinkingStyle::Adaptive)),
];

/// An Anthropic model Keel does not know: the smallest limit of the current 4.x models, with
/// budget thinking (accepted by every model that takes a budget).
const ANTHROPIC_UNKNOWN: ModelLimits = row(32_000, ThinkingStyle::Budget);

/// OpenAI models by name prefix, most specific first (dated in the module docs).
const OPENAI: &[(&str, ModelLimits)] = &[
    ("gpt-5-chat", row(16_384, ThinkingStyle::None)),
    ("gpt-5", row(128_000, ThinkingStyle::Effort)),
    ("gpt-4.1", row(32_768, ThinkingStyle::None)),
    ("gpt-4o", row(16_384, ThinkingStyle::None)),
    ("gpt-4", row(8192, ThinkingStyle::None)),
    ("gpt-3.5", row(4096, ThinkingStyle::None)),
    ("o1-mini", row(65_536, ThinkingStyle::Effort)),
    ("o1", row(100_000, ThinkingStyle::Effort)),
    ("o3", row(100_000, ThinkingStyle::Effort)),
    ("o4-mini", row(100_000, ThinkingStyle::Effort)),
];

/// The limits of Anthropic `model` (a conservative row for one not in the table).
pub fn anthropic_model(model: &str) -> ModelLimits {
    lookup(ANTHROPIC, model).unwrap_or(ANTHROPIC_UNKNOWN)
}

/// The limits of OpenAI `model`; `None` for a model OpenAI does not publish (a local or
/// third-party server's), which is sent what the user asked for, unchanged.
pub fn openai_model(model: &str) -> Option<ModelLimits> {
    // OpenRouter and similar name models `openai/gpt-5`.
    let model = model.rsplit('/').next().unwrap_or(model);
    lookup(OPENAI, model)
}

fn lookup(table: &[(&str, ModelLimits)], model: &str) -> Option<ModelLimits> {
    table
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map(|(_, limits)| *limits)
}

/// The effort level of a thinking budget, for APIs that take a level (OpenAI `reasoning_effort`,
/// Anthropic adaptive `effort`): `low` ≤ 4096 < `medium` ≤ 16384 < `high`.
pub fn effort(budget: u32) -> &'static str {
    match budget {
        0..=4096 => "low",
        4097..=16_384 => "medium",
        _ => "high",
    }
}

/// What one request asks for: the output limit, and the thinking budget within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputPlan {
    /// `max_tokens` (`max_completion_tokens`): the answer's allowance plus the thinking room,
    /// never above the model's limit.
    pub max_tokens: u32,
    /// The thinking budget sent, when thinking is on and the model can think.
    pub budget: Option<u32>,
}

/// Plans the output of a request: the answer keeps its own allowance (`answer`, the configured
/// `max_tokens`) and thinking gets `budget` on top, both within `limits.max_output`. When the
/// model's limit cannot hold both, the budget shrinks first (to [`MIN_THINKING_BUDGET`] at the
/// least for a budget model), then the answer; a model that cannot think gets no budget.
pub fn plan_output(answer: u32, budget: Option<u32>, limits: ModelLimits) -> OutputPlan {
    let limit = limits.max_output.max(1);
    let answer = answer.clamp(1, limit);
    let Some(budget) = budget.filter(|budget| *budget > 0) else {
        return OutputPlan {
            max_tokens: answer,
            budget: None,
        };
    };
    match limits.thinking {
        ThinkingStyle::None => OutputPlan {
            max_tokens: answer,
            budget: None,
        },
        ThinkingStyle::Budget => {
            // budget_tokens >= 1024 and < max_tokens: room for at least one answer token.
            if limit <= MIN_THINKING_BUDGET {
                return OutputPlan {
                    max_tokens: answer,
                    budget: None,
                };
            }
            let budget = budget.max(MIN_THINKING_BUDGET);
            let max_tokens = answer.saturating_add(budget).min(limit);
            let budget = budget
                .min(max_tokens - answer.min(max_tokens - MIN_THINKING_BUDGET))
                .clamp(MIN_THINKING_BUDGET, max_tokens - 1);
            OutputPlan {
                max_tokens,
                budget: Some(budget),
            }
        }
        ThinkingStyle::Adaptive | ThinkingStyle::Effort => OutputPlan {
            max_tokens: answer.saturating_add(budget).min(limit),
            budget: Some(budget),
        },
    }
}

/// Whether `name` is a tool name both APIs accept: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_levels_stay_distinct_and_leave_the_answer_its_allowance() {
        let sonnet = anthropic_model("claude-sonnet-4-5-20250929");
        let plans: Vec<OutputPlan> = [4096, 16_384, 32_000]
            .into_iter()
            .map(|budget| plan_output(8192, Some(budget), sonnet))
            .collect();
        assert_eq!(
            plans,
            [
                OutputPlan {
                    max_tokens: 12_288,
                    budget: Some(4096)
                },
                OutputPlan {
                    max_tokens: 24_576,
                    budget: Some(16_384)
                },
                OutputPlan {
                    max_tokens: 40_192,
                    budget: Some(32_000)
                },
            ]
        );
        // Opus 4.1 stops at 32000: high shrinks its budget, the answer keeps 8192.
        let opus = anthropic_model("claude-opus-4-1");
        assert_eq!(
            plan_output(8192, Some(32_000), opus),
            OutputPlan {
                max_tokens: 32_000,
                budget: Some(23_808)
            }
        );
        // An answer as large as the limit leaves the minimum budget.
        assert_eq!(
            plan_output(64_000, Some(4096), sonnet),
            OutputPlan {
                max_tokens: 64_000,
                budget: Some(1024)
            }
        );
        // A model that cannot think gets no budget.
        assert_eq!(
            plan_output(8192, Some(4096), anthropic_model("claude-3-5-haiku-latest")),
            OutputPlan {
                max_tokens: 8192,
                budget: None
            }
        );
    }

    #[test]
    fn prefixes_pick_the_most_specific_row() {
        assert_eq!(anthropic_model("claude-opus-4-20250514").max_output, 32_000);
        assert_eq!(anthropic_model("claude-opus-4-5").max_output, 64_000);
        assert_eq!(
            anthropic_model("claude-sonnet-4-6").thinking,
            ThinkingStyle::Adaptive
        );
        assert_eq!(anthropic_model("claude-next").max_output, 32_000);
        assert_eq!(
            openai_model("gpt-5-mini").map(|l| l.thinking),
            Some(ThinkingStyle::Effort)
        );
        assert_eq!(
            openai_model("gpt-4.1-mini").map(|l| l.thinking),
            Some(ThinkingStyle::None)
        );
        assert_eq!(openai_model("qwen3"), None);
    }

    #[test]
    fn tool_names() {
        assert!(valid_tool_name("mcp__github__create_issue"));
        assert!(!valid_tool_name("mcp__srv__tool.with.dots"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name(&"a".repeat(65)));
    }
}
