//! What a model's tokens cost: LiteLLM's price table (MIT; `prices/litellm.json`, trimmed from
//! LiteLLM's own file by `scripts/prices-snapshot` and embedded), a user's table on top, and
//! the names agents write matched to the table's as LiteLLM and ccusage match them.
//!
//! **Matching** ([`PriceTable::lookup`]) tries, in order, and stops at the first that names a
//! model of the table: the name as written, lower-cased, or without a provider's prefix
//! (`anthropic/claude-sonnet-4-5`); the same without a date at its end
//! (`claude-sonnet-4-5-20991231` is priced as `claude-sonnet-4-5`); then a provider's name for
//! it, with a path, a dotted provider and region or a version around it
//! (`gemini/gemini-2.5-pro`, `anthropic.claude-sonnet-4-20250514-v1:0`; the shortest, then the
//! first in order, when several are), and the same for the name without its date. Nothing
//! else: a name that only looks like a priced one is unpriced ([`None`]), never a guess.
//!
//! **Cost** ([`Price::cost`]): each kind of token at its own price: input at the full rate,
//! cache reads, five-minute and one-hour cache writes (the one-hour rate when the table has one,
//! else the five-minute rate), output, reasoning (inside the output, at the reasoning rate when
//! the table has one, else the output rate). Where the table prices tokens past 200,000 (the
//! `...Above200k` prices), the tokens of a kind past 200,000 in one request are priced at that
//! rate, as ccusage prices them. A kind the table has no price for costs nothing but a cache
//! kind, which falls back to the input rate.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The embedded table (see the module's head).
const EMBEDDED: &str = include_str!("../prices/litellm.json");

/// Tokens past which the `...Above200k` prices apply, in one request.
pub const TIER_TOKENS: u64 = 200_000;

/// One model's prices, USD per token; `None` where the table has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    /// Input at the full rate.
    #[serde(default)]
    pub input: Option<f64>,
    /// Output (reasoning included, unless [`Price::reasoning`] prices it apart).
    #[serde(default)]
    pub output: Option<f64>,
    /// Input read from the provider's cache.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input written to the cache for five minutes.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Input written to the cache for an hour (Anthropic).
    #[serde(default, rename = "cacheWrite1h")]
    pub cache_write_1h: Option<f64>,
    /// Reasoning output, where it is priced apart from the rest of the output.
    #[serde(default)]
    pub reasoning: Option<f64>,
    /// Input past [`TIER_TOKENS`] in a request.
    #[serde(default, rename = "inputAbove200k")]
    pub input_above_200k: Option<f64>,
    /// Output past [`TIER_TOKENS`] in a request.
    #[serde(default, rename = "outputAbove200k")]
    pub output_above_200k: Option<f64>,
    /// Cache reads past [`TIER_TOKENS`] in a request.
    #[serde(default, rename = "cacheReadAbove200k")]
    pub cache_read_above_200k: Option<f64>,
    /// Five-minute cache writes past [`TIER_TOKENS`] in a request.
    #[serde(default, rename = "cacheWriteAbove200k")]
    pub cache_write_above_200k: Option<f64>,
    /// One-hour cache writes past [`TIER_TOKENS`] in a request.
    #[serde(default, rename = "cacheWrite1hAbove200k")]
    pub cache_write_1h_above_200k: Option<f64>,
}

/// One request's tokens, each kind apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input billed at the full rate (cache reads and writes not included).
    pub input: u64,
    /// Output, reasoning included.
    pub output: u64,
    /// Reasoning: a part of [`Tokens::output`].
    pub reasoning: u64,
    /// Input read from the cache.
    pub cache_read: u64,
    /// Input written to the cache for five minutes.
    pub cache_write_5m: u64,
    /// Input written to the cache for an hour.
    pub cache_write_1h: u64,
}

/// `n` tokens at `base`, those past [`TIER_TOKENS`] at `above` when there is such a price.
fn tiered(n: u64, base: f64, above: Option<f64>) -> f64 {
    match above {
        Some(above) if n > TIER_TOKENS => {
            TIER_TOKENS as f64 * base + (n - TIER_TOKENS) as f64 * above
        }
        _ => n as f64 * base,
    }
}

impl Price {
    /// What `t` cost, USD (see the module's head).
    pub fn cost(&self, t: &Tokens) -> f64 {
        let input = self.input.unwrap_or(0.0);
        let output = self.output.unwrap_or(0.0);
        let write_5m = self.cache_write.unwrap_or(input);
        let (reasoning, plain_output) = match self.reasoning {
            Some(r) => (
                t.reasoning.min(t.output) as f64 * r,
                t.output.saturating_sub(t.reasoning),
            ),
            None => (0.0, t.output),
        };
        tiered(t.input, input, self.input_above_200k)
            + tiered(plain_output, output, self.output_above_200k)
            + reasoning
            + tiered(
                t.cache_read,
                self.cache_read.unwrap_or(input),
                self.cache_read_above_200k,
            )
            + tiered(t.cache_write_5m, write_5m, self.cache_write_above_200k)
            + tiered(
                t.cache_write_1h,
                self.cache_write_1h.unwrap_or(write_5m),
                self.cache_write_1h_above_200k
                    .or(self.cache_write_above_200k),
            )
    }
}

/// A table file that cannot be read as one.
#[derive(Debug, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct TableError {
    /// Where, 1-based.
    pub line: usize,
    /// Where, 1-based.
    pub column: usize,
    /// What.
    pub message: String,
}

/// A price table: model name → [`Price`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    /// The models, by the names the table gives them.
    pub models: BTreeMap<String, Price>,
}

/// The file's shape: `{"models": {...}}` with anything else beside it (a source, a unit).
#[derive(Deserialize)]
struct File {
    models: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The embedded table, parsed once.
    pub fn embedded() -> &'static PriceTable {
        static TABLE: OnceLock<PriceTable> = OnceLock::new();
        TABLE.get_or_init(|| Self::parse(EMBEDDED).unwrap_or_default())
    }

    /// A table from JSON: `{"models": {"NAME": {"input": 3e-6, "output": 1.5e-5, …}}}`, the
    /// prices in USD per token ([`Price`]'s fields).
    pub fn parse(text: &str) -> Result<Self, TableError> {
        serde_json::from_str::<File>(text)
            .map(|f| Self { models: f.models })
            .map_err(|e| TableError {
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })
    }

    /// This table with `over`'s models added, each replacing one of the same name whole.
    pub fn with(&self, over: &PriceTable) -> PriceTable {
        let mut models = self.models.clone();
        models.extend(over.models.iter().map(|(k, v)| (k.clone(), v.clone())));
        PriceTable { models }
    }

    /// The table's name and price for `model` as an agent wrote it (see the module's head);
    /// `None` when nothing names it.
    pub fn lookup(&self, model: &str) -> Option<(&str, &Price)> {
        let model = model.trim();
        if model.is_empty() {
            return None;
        }
        let undated = without_date(model);
        let names = || std::iter::once(model).chain(undated);
        names()
            .find_map(|n| self.lookup_as_written(n))
            .or_else(|| names().find_map(|n| self.lookup_provider_form(n)))
            .map(|(k, v)| (k.as_str(), v))
    }

    /// `model` as written, lower-cased, or without a provider prefix.
    fn lookup_as_written(&self, model: &str) -> Option<(&String, &Price)> {
        let lower = model.to_lowercase();
        let bare = lower.rsplit('/').next().unwrap_or(&lower);
        [model, lower.as_str(), bare]
            .into_iter()
            .find_map(|n| self.models.get_key_value(n))
    }

    /// A provider's name for `model` ([`provider_form`]): the shortest, then the first.
    fn lookup_provider_form(&self, model: &str) -> Option<(&String, &Price)> {
        let lower = model.to_lowercase();
        let bare = lower.rsplit('/').next().unwrap_or(&lower);
        self.models
            .iter()
            .filter(|(k, _)| provider_form(k) == bare)
            .min_by_key(|(k, _)| k.len())
    }
}

/// The model a provider's name for it names: lower-cased, without the path before its last
/// `/` (`vertex_ai/`, `openrouter/anthropic/`), the dotted provider and region before it
/// (`us.anthropic.`: words of letters, so `gpt-4.1` keeps its dot) and Bedrock's version
/// after a dated name (`-20250514-v1:0`).
fn provider_form(key: &str) -> String {
    let lower = key.to_lowercase();
    let mut name = lower.rsplit('/').next().unwrap_or(&lower);
    while let Some((head, rest)) = name.split_once('.') {
        if head.is_empty() || !head.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
            break;
        }
        name = rest;
    }
    // Bedrock's version after a dated name, `-20250514-v1:0` (in `claude-v2:1`, Claude 2.1,
    // the `v` is the model's own).
    if let Some((head, version)) = name.rsplit_once("-v")
        && let Some((major, minor)) = version.split_once(':')
    {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let dated = head
            .rsplit_once('-')
            .is_some_and(|(_, d)| d.len() == 8 && digits(d));
        if dated && digits(major) && digits(minor) {
            name = head;
        }
    }
    name.to_owned()
}

/// `model` without a date at its end (`-20250929`, `-2025-09-29`, `@20250929`), if it has one.
fn without_date(model: &str) -> Option<&str> {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let (head, tail) = model.rsplit_once(['-', '@'])?;
    if tail.len() == 8 && digits(tail) {
        return Some(head);
    }
    // `-YYYY-MM-DD`: three parts.
    let (head2, month) = head.rsplit_once('-')?;
    let (head3, year) = head2.rsplit_once('-')?;
    (year.len() == 4
        && month.len() == 2
        && tail.len() == 2
        && digits(year)
        && digits(month)
        && digits(tail))
    .then_some(head3)
}

#[cfg(test)]
mod tests;
