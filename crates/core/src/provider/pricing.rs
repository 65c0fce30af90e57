//! What a response cost, for the models whose prices Keel knows: one dated table, USD per
//! million tokens (input, output, cache read, cache write).
//!
//! Prices as published on **2026-11-28**: Anthropic's pricing page (platform.claude.com, prompt
//! caching table: 5-minute cache writes at 1.25× input, cache hits at 0.1×) and OpenAI's
//! (platform.openai.com/docs/pricing: cached input; OpenAI charges no cache write, so a write
//! costs the input price). A model is priced only under its own name, an 8-digit dated snapshot
//! of it (`claude-sonnet-4-5-20250929`, `gpt-4.1-2025-04-14`) or `-latest`; any other name
//! (another provider's, a newer variant) has no price, and no cost is reported for it.

use super::Usage;

/// The day the prices were read.
pub const PRICES_AS_OF: &str = "2026-11-28";

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output, reasoning included.
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache.
    pub cache_write: f64,
}

const fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
    Price {
        input,
        output,
        cache_read,
        cache_write,
    }
}

/// Anthropic models (the Messages API).
const ANTHROPIC: &[(&str, Price)] = &[
    ("claude-opus-4-1", price(15.0, 75.0, 1.5, 18.75)),
    ("claude-opus-4", price(15.0, 75.0, 1.5, 18.75)),
    ("claude-opus-4-5", price(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4-6", price(5.0, 25.0, 0.5, 6.25)),
    ("claude-sonnet-4-5", price(3.0, 15.0, 0.3, 3.75)),
    ("claude-sonnet-4-6", price(3.0, 15.0, 0.3, 3.75)),
    ("claude-sonnet-4", price(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-7-sonnet", price(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", price(1.0, 5.0, 0.1, 1.25)),
    ("claude-3-5-haiku", price(0.8, 4.0, 0.08, 1.0)),
    ("claude-sonnet-5", price(2.0, 10.0, 0.2, 2.5)),
];

/// OpenAI models (Chat Completions).
const OPENAI: &[(&str, Price)] = &[
    ("gpt-5", price(1.25, 10.0, 0.125, 1.25)),
    ("gpt-5.1", price(1.25, 10.0, 0.125, 1.25)),
    ("gpt-5-mini", price(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5-nano", price(0.05, 0.4, 0.005, 0.05)),
    ("gpt-4.1", price(2.0, 8.0, 0.5, 2.0)),
    ("gpt-4.1-mini", price(0.4, 1.6, 0.1, 0.4)),
    ("gpt-4.1-nano", price(0.1, 0.4, 0.025, 0.1)),
    ("gpt-4o", price(2.5, 10.0, 1.25, 2.5)),
    ("gpt-4o-mini", price(0.15, 0.6, 0.075, 0.15)),
    ("o3", price(2.0, 8.0, 0.5, 2.0)),
    ("o4-mini", price(1.1, 4.4, 0.275, 1.1)),
];

/// The price of `model` on the API `api` (`anthropic`, `openai`: [`super::Provider::id`]).
pub fn price_of(api: &str, model: &str) -> Option<Price> {
    let table = match api {
        "anthropic" => ANTHROPIC,
        "openai" => OPENAI,
        _ => return None,
    };
    table
        .iter()
        .find(|(name, _)| same_model(model, name))
        .map(|(_, price)| *price)
}

/// Whether `model` is `name`, a dated snapshot of it or its `-latest` alias.
fn same_model(model: &str, name: &str) -> bool {
    let Some(rest) = model.strip_prefix(name) else {
        return false;
    };
    let digits: String = rest.chars().filter(char::is_ascii_digit).collect();
    rest.is_empty()
        || rest == "-latest"
        // -20250929 or -2025-04-14
        || (rest.starts_with('-')
            && digits.len() == 8
            && rest[1..].chars().all(|c| c.is_ascii_digit() || c == '-'))
}

/// What `usage` cost on `model` in USD, when the price is known.
pub fn cost(api: &str, model: &str, usage: &Usage) -> Option<f64> {
    let price = price_of(api, model)?;
    let uncached = usage
        .input_tokens
        .saturating_sub(usage.cache_read_tokens)
        .saturating_sub(usage.cache_write_tokens);
    let per_million = |tokens: u64, rate: f64| tokens as f64 * rate / 1_000_000.0;
    Some(
        per_million(uncached, price.input)
            + per_million(usage.output_tokens, price.output)
            + per_million(usage.cache_read_tokens, price.cache_read)
            + per_million(usage.cache_write_tokens, price.cache_write),
    )
}

/// A session's running cost: reported only while every response so far had a known price
/// (a sum that leaves some responses out would understate it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunningCost {
    usd: f64,
    priced: bool,
    unpriced: bool,
}

impl RunningCost {
    /// Continues from a cost reported before (a reopened session's last one).
    pub fn resumed(usd: Option<f64>) -> Self {
        Self {
            usd: usd.unwrap_or(0.0),
            priced: usd.is_some(),
            unpriced: false,
        }
    }

    /// Adds one response's cost (`None`: its price is unknown); the session's total so far, when
    /// it is known.
    pub fn add(&mut self, cost: Option<f64>) -> Option<f64> {
        match cost {
            Some(cost) => {
                self.usd += cost;
                self.priced = true;
            }
            None => self.unpriced = true,
        }
        self.total()
    }

    /// The total, when every response so far was priced.
    pub fn total(&self) -> Option<f64> {
        (self.priced && !self.unpriced).then_some(self.usd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_split_input_by_cache_and_know_only_listed_models() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 600_000,
            cache_write_tokens: 200_000,
        };
        // 200k uncached × $3 + 100k × $15 + 600k × $0.30 + 200k × $3.75
        let sonnet = cost("anthropic", "claude-sonnet-4-5-20250929", &usage).unwrap();
        assert!(
            (sonnet - (0.6 + 1.5 + 0.18 + 0.75)).abs() < 1e-9,
            "{sonnet}"
        );
        assert_eq!(
            price_of("anthropic", "claude-opus-4-1-20250805").map(|p| p.input),
            Some(15.0)
        );
        assert_eq!(
            price_of("openai", "gpt-4.1-2025-04-14").map(|p| p.input),
            Some(2.0)
        );
        assert_eq!(
            price_of("openai", "gpt-5-mini").map(|p| p.output),
            Some(2.0)
        );
        // A newer variant, another provider's model, a scripted model: unknown.
        assert_eq!(price_of("openai", "gpt-5.2"), None);
        assert_eq!(price_of("openai", "qwen3"), None);
        assert_eq!(price_of("scripted", "gpt-5"), None);
        assert_eq!(price_of("anthropic", "claude-sonnet-4-5-fast"), None);
    }
}
