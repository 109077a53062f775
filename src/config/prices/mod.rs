//! Prices of model tokens: a built-in table for the presets' common models and `[prices."provider/model"]`
//! overrides in the user's config file, in USD per million tokens.
//!
//! ```toml
//! [prices."openai/gpt-4.1"]
//! input = 2.00          # per million input tokens not read from the provider's cache
//! cached_input = 0.50   # per million input tokens read from the cache (default: the input price)
//! output = 8.00         # per million output tokens (reasoning tokens included)
//! ```
//!
//! A model with no price is "unknown": no cost is ever made up for it (issue 28). Prices live in the user's
//! file only: a repository that could lower them could also defeat `--max-cost`.

use toml_edit::{Item, Value};

use super::error::ConfigError;
use super::syntax::{span_of, Ctx, KeyType, Scope, Span};
use crate::protocol::Usage;

/// What a model's tokens cost, in USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
}

impl Price {
    const fn new(input: f64, cached_input: f64, output: f64) -> Price {
        Price {
            input,
            cached_input,
            output,
        }
    }

    /// The cost in USD of one request's `usage`. Providers count cached tokens inside the input tokens, so
    /// they are taken out of the input before pricing them at the cache's rate.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// Local servers charge nothing per token, which is a known price, not an unknown one.
const FREE_PROVIDERS: &[&str] = &["ollama", "llamacpp", "vllm"];

/// The built-in table (`provider`, `model`, price), taken from the providers' pricing pages in 2025-11. Anthropic's cache writes cost 1.25x
/// the input price; they are counted as input here, so a session that writes a large cache costs a little more
/// than shown.
const TABLE: &[(&str, &str, Price)] = &[
    ("openai", "gpt-5", Price::new(1.25, 0.125, 10.0)),
    ("openai", "gpt-5-mini", Price::new(0.25, 0.025, 2.0)),
    ("openai", "gpt-5-nano", Price::new(0.05, 0.005, 0.40)),
    ("openai", "gpt-4.1", Price::new(2.0, 0.50, 8.0)),
    ("openai", "gpt-4.1-mini", Price::new(0.40, 0.10, 1.60)),
    ("openai", "gpt-4.1-nano", Price::new(0.10, 0.025, 0.40)),
    ("openai", "gpt-4o", Price::new(2.50, 1.25, 10.0)),
    ("openai", "gpt-4o-mini", Price::new(0.15, 0.075, 0.60)),
    ("openai", "o3", Price::new(2.0, 0.50, 8.0)),
    ("openai", "o4-mini", Price::new(1.10, 0.275, 4.40)),
    ("anthropic", "claude-opus-4-5", Price::new(5.0, 0.50, 25.0)),
    ("anthropic", "claude-opus-4-1", Price::new(15.0, 1.50, 75.0)),
    ("anthropic", "claude-opus-4-0", Price::new(15.0, 1.50, 75.0)),
    (
        "anthropic",
        "claude-sonnet-4-5",
        Price::new(3.0, 0.30, 15.0),
    ),
    (
        "anthropic",
        "claude-sonnet-4-0",
        Price::new(3.0, 0.30, 15.0),
    ),
    ("anthropic", "claude-haiku-4-5", Price::new(1.0, 0.10, 5.0)),
    ("anthropic", "claude-3-5-haiku", Price::new(0.80, 0.08, 4.0)),
    ("deepseek", "deepseek-chat", Price::new(0.28, 0.028, 0.42)),
    (
        "deepseek",
        "deepseek-reasoner",
        Price::new(0.28, 0.028, 0.42),
    ),
];

/// The built-in price of `provider/model`, if the table has one. A dated snapshot id
/// (`claude-sonnet-4-5-20250929`, `gpt-4.1-2025-04-14`) costs what its model costs; nothing else is guessed
/// (`gpt-5-pro` is not `gpt-5`).
pub fn builtin(provider: &str, model: &str) -> Option<Price> {
    if FREE_PROVIDERS.contains(&provider) {
        return Some(Price::new(0.0, 0.0, 0.0));
    }
    let model = without_date(model);
    let model = match (provider, model) {
        // Anthropic's short aliases of the 4.0 models.
        ("anthropic", "claude-opus-4") => "claude-opus-4-0",
        ("anthropic", "claude-sonnet-4") => "claude-sonnet-4-0",
        _ => model,
    };
    TABLE
        .iter()
        .find(|(p, m, _)| *p == provider && *m == model)
        .map(|(_, _, price)| *price)
}

/// `model` without a trailing `-YYYYMMDD` or `-YYYY-MM-DD` snapshot date.
fn without_date(model: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = model.rsplit_once('-') {
        if tail.len() == 8 && digits(tail) {
            return head;
        }
    }
    let parts: Vec<&str> = model.rsplitn(4, '-').collect();
    if let [day, month, year, head] = parts[..] {
        let sizes = day.len() == 2 && month.len() == 2 && year.len() == 4;
        if sizes && digits(day) && digits(month) && digits(year) {
            return head;
        }
    }
    model
}

/// The type of `prices.<model>.<key>`, for `config set`.
pub fn key_type(key: &str) -> Option<KeyType> {
    match key {
        "input" | "cached_input" | "output" => Some(KeyType::Share),
        _ => None,
    }
}

const KEYS: &str = "input, cached_input, output";

/// Reads and validates a `[prices]` table: `"provider/model"` to a price.
pub(super) fn parse(
    ctx: &Ctx<'_>,
    item: &Item,
    span: Span,
) -> Result<Vec<(String, Price)>, ConfigError> {
    if ctx.scope == Scope::Repo {
        return Err(ctx.error(
            span,
            "prices",
            "prices decide what --max-cost allows: set them in your own config file",
        ));
    }
    let table = ctx.table(item, "prices", span)?;
    let mut prices = Vec::new();
    for (model, item) in table.iter() {
        let span = span_of(table, model, item);
        let full = format!("prices.\"{model}\"");
        if !model.contains('/') {
            return Err(ctx.error(span, &full, "expected a \"provider/model\" name"));
        }
        let entry = ctx.table(item, &full, span.clone())?;
        let (mut input, mut cached_input, mut output) = (None, None, None);
        for (key, item) in entry.iter() {
            let span = span_of(entry, key, item);
            let name = format!("{full}.{key}");
            let slot = match key {
                "input" => &mut input,
                "cached_input" => &mut cached_input,
                "output" => &mut output,
                _ => return Err(ctx.unknown(&name, span, KEYS)),
            };
            *slot = Some(usd(ctx, item, &name, span)?);
        }
        let (Some(input), Some(output)) = (input, output) else {
            return Err(ctx.error(span, &full, "expected both input and output prices"));
        };
        // Without a cache price the full input price is the one that never under-reports.
        let price = Price::new(input, cached_input.unwrap_or(input), output);
        prices.push((model.to_string(), price));
    }
    Ok(prices)
}

/// A price in USD per million tokens: a number, zero or more.
fn usd(ctx: &Ctx<'_>, item: &Item, key: &str, span: Span) -> Result<f64, ConfigError> {
    let number = match ctx.value(item, key, span.clone())? {
        Value::Integer(n) => *n.value() as f64,
        Value::Float(f) => *f.value(),
        _ => f64::NAN,
    };
    if number.is_finite() && number >= 0.0 {
        Ok(number)
    } else {
        Err(ctx.error(
            span,
            key,
            "expected USD per million tokens, zero or more (e.g. 2.5)",
        ))
    }
}

/// The price of `provider/model`: the entry of `user` (the user's `[prices]`), else the built-in table; `None`
/// when neither knows it.
pub fn lookup(user: &[(String, Price)], provider: &str, model: &str) -> Option<Price> {
    let name = format!("{provider}/{model}");
    user.iter()
        .find(|(key, _)| *key == name)
        .map(|(_, price)| *price)
        .or_else(|| builtin(provider, model))
}

#[cfg(test)]
mod tests;
