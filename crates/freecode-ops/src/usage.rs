//! `freecode usage`: what the agents' answers cost, grouped as asked.
//!
//! Each billed request the index holds ([`SessionIndex::usage_requests`]: a model call that
//! answered, from the session's rollout log, whatever agent wrote it) is counted once, with its
//! tokens split the way they are billed: `inputTokens` only what is billed at the full input
//! rate (the request's input less its cache reads and writes, as ccusage counts it), cache reads
//! and writes apart, output. Its cost is the price table's ([`freecode_core::prices`]: LiteLLM's,
//! embedded, with the user's `prices.json` in the home on top) applied to those tokens; a model
//! no table prices costs `null` and is listed under `unpriced`, never guessed, and a group that
//! holds one has no cost either. Rows are grouped by the `--by` keys in order (a day, week or
//! month is the local calendar's), sorted by those keys.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use freecode_core::prices::{PriceTable, Tokens};
use freecode_store::Home;
use freecode_store::index::{UsageRequest, UsageScope};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::index::open_index;
use crate::progress::Progress;

/// What a row is grouped by (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum UsageKey {
    /// The local day, `YYYY-MM-DD`.
    Day,
    /// The ISO week, `YYYY-Www`.
    Week,
    /// The local month, `YYYY-MM`.
    Month,
    /// The session.
    Session,
    /// The session's project.
    Project,
    /// The agent that wrote the session.
    Agent,
    /// The model the request named.
    Model,
}

impl UsageKey {
    /// Every key, in the words `--by` takes.
    pub const ALL: [(UsageKey, &'static str); 7] = [
        (Self::Day, "day"),
        (Self::Week, "week"),
        (Self::Month, "month"),
        (Self::Session, "session"),
        (Self::Project, "project"),
        (Self::Agent, "agent"),
        (Self::Model, "model"),
    ];

    /// Its name: the `--by` word and the JSON field of a row.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("", |(_, s)| s)
    }

    /// `--by`'s comma list; an unknown word is an error naming the ones there are.
    pub fn parse_list(s: &str) -> std::result::Result<Vec<UsageKey>, String> {
        let mut out = Vec::new();
        for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let key = Self::ALL
                .iter()
                .find(|(_, n)| n.eq_ignore_ascii_case(word))
                .map(|(k, _)| *k)
                .ok_or_else(|| {
                    let names: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
                    format!("{word:?} is not one of {}", names.join(", "))
                })?;
            if !out.contains(&key) {
                out.push(key);
            }
        }
        Ok(out)
    }

    /// This key's value for `r`.
    fn of(self, r: &UsageRequest) -> String {
        match self {
            Self::Session => r.session_id.clone(),
            Self::Project => r.project_path.clone(),
            Self::Agent => r.agent.clone(),
            Self::Model => r.model.clone(),
            Self::Day | Self::Week | Self::Month => calendar(self, r.at),
        }
    }
}

/// The local day, ISO week or month of `at_ms`.
fn calendar(key: UsageKey, at_ms: i64) -> String {
    let Ok(t) = jiff::Timestamp::from_millisecond(at_ms) else {
        return String::new();
    };
    let date = t.to_zoned(jiff::tz::TimeZone::system()).date();
    match key {
        UsageKey::Week => {
            let w = date.iso_week_date();
            format!("{:04}-W{:02}", w.year(), w.week())
        }
        UsageKey::Month => format!("{:04}-{:02}", date.year(), date.month()),
        _ => date.to_string(),
    }
}

/// What `usage` is asked.
#[derive(Debug, Clone, Default)]
pub struct UsageAsk {
    /// The keys rows are grouped by, in order; none: one row, the total.
    pub by: Vec<UsageKey>,
    /// The requests counted.
    pub scope: UsageScope,
}

/// Tokens and cost of a group of requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageFigures {
    /// Billed requests.
    pub requests: u64,
    /// Input billed at the full rate (cache reads and writes not included).
    pub input_tokens: u64,
    /// Output, reasoning included.
    pub output_tokens: u64,
    /// Reasoning, a part of the output, where the agent says it.
    pub reasoning_tokens: u64,
    /// Input read from the cache.
    pub cache_read_tokens: u64,
    /// Input written to the cache.
    pub cache_write_tokens: u64,
    /// What it cost, USD; `null` when a request of it has a model no price table knows.
    pub cost_usd: Option<f64>,
}

impl UsageFigures {
    /// These and `other` together (a cost unknown in either is unknown).
    fn merge(&mut self, other: &UsageFigures) {
        if self.requests == 0 {
            self.cost_usd = Some(0.0);
        }
        self.requests += other.requests;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }

    fn add(&mut self, t: &Tokens, cost: Option<f64>) {
        if self.requests == 0 {
            self.cost_usd = Some(0.0);
        }
        self.requests += 1;
        self.input_tokens += t.input;
        self.output_tokens += t.output;
        self.reasoning_tokens += t.reasoning;
        self.cache_read_tokens += t.cache_read;
        self.cache_write_tokens += t.cache_write_5m + t.cache_write_1h;
        self.cost_usd = match (self.cost_usd, cost) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
}

/// One row: its keys' values and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct UsageRow {
    /// The `--by` keys and their values (`day`, `week`, `month`, `session`, `project`,
    /// `agent`, `model`).
    #[serde(flatten)]
    pub keys: BTreeMap<String, String>,
    /// The figures.
    #[serde(flatten)]
    pub figures: UsageFigures,
}

/// What `usage --json` answers.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// One row a group, sorted by the keys.
    pub rows: Vec<UsageRow>,
    /// Every request counted.
    pub total: UsageFigures,
    /// Models no price table knows (their requests have no cost).
    pub unpriced: Vec<String>,
}

impl UsageReport {
    /// Its rows folded by one of their keys (which must be among them), sorted by its value:
    /// a report by day and model gives the figures by model without asking the index again.
    pub fn folded_by(&self, key: UsageKey) -> Vec<(String, UsageFigures)> {
        let mut out: BTreeMap<String, UsageFigures> = BTreeMap::new();
        for row in &self.rows {
            let value = row.keys.get(key.as_str()).cloned().unwrap_or_default();
            out.entry(value).or_default().merge(&row.figures);
        }
        out.into_iter().collect()
    }
}

/// The file of a user's prices in the home: `{"models": {"NAME": {"input": …}}}`, USD per
/// token, added to the embedded table (a model of the same name replaced whole).
pub const PRICES_FILE: &str = "prices.json";

/// The price table: the embedded one (borrowed), with `home`'s [`PRICES_FILE`] on top; a file
/// that does not parse is a warning naming its line, and the embedded table is used.
pub fn price_table(home: &Home) -> Cow<'static, PriceTable> {
    let path = home.root().join(PRICES_FILE);
    let embedded = PriceTable::embedded();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Cow::Borrowed(embedded);
    };
    match PriceTable::parse(&text) {
        Ok(mine) => Cow::Owned(embedded.with(&mine)),
        Err(e) => {
            tracing::warn!(
                "{}: {e}; using the embedded prices (LiteLLM's)",
                path.display()
            );
            Cow::Borrowed(embedded)
        }
    }
}

/// The figures `ask` wants, from the index brought up to date.
pub fn usage(home: &Home, ask: &UsageAsk, progress: &mut dyn Progress) -> Result<UsageReport> {
    let Some(mut ix) = open_index(home)? else {
        return Err(Error::Failed(
            "usage needs the SQLite session index, which is not available here (see \
             FREECODE_LOG=info)"
                .into(),
        ));
    };
    let table = price_table(home);
    let mut prices: HashMap<String, Option<freecode_core::prices::Price>> = HashMap::new();
    let mut groups: BTreeMap<Vec<String>, UsageFigures> = BTreeMap::new();
    let mut total = UsageFigures {
        cost_usd: Some(0.0),
        ..UsageFigures::default()
    };
    let mut unpriced = std::collections::BTreeSet::new();
    ix.usage_requests(
        &ask.scope,
        |done, all| progress.sessions(done, all),
        |r| {
            let tokens = billed(&r);
            let price = prices
                .entry(r.model.clone())
                .or_insert_with(|| table.lookup(&r.model).map(|(_, p)| p.clone()));
            let cost = price.as_ref().map(|p| p.cost(&tokens));
            if cost.is_none() {
                unpriced.insert(r.model.clone());
            }
            let key: Vec<String> = ask.by.iter().map(|k| k.of(&r)).collect();
            groups.entry(key).or_default().add(&tokens, cost);
            total.add(&tokens, cost);
        },
    )?;
    Ok(UsageReport {
        rows: groups
            .into_iter()
            .map(|(values, figures)| UsageRow {
                keys: ask
                    .by
                    .iter()
                    .map(|k| k.as_str().to_owned())
                    .zip(values)
                    .collect(),
                figures,
            })
            .collect(),
        total,
        unpriced: unpriced.into_iter().collect(),
    })
}

/// A request's tokens the way they are billed: the input at the full rate is what is left of
/// the (inclusive) input once the cache reads and writes are taken out.
fn billed(r: &UsageRequest) -> Tokens {
    Tokens {
        input: r
            .input_tokens
            .saturating_sub(r.cache_read_tokens)
            .saturating_sub(r.cache_write_tokens),
        output: r.output_tokens,
        reasoning: r.reasoning_tokens.min(r.output_tokens),
        cache_read: r.cache_read_tokens,
        cache_write_5m: r.cache_write_tokens.saturating_sub(r.cache_write_1h_tokens),
        cache_write_1h: r.cache_write_1h_tokens.min(r.cache_write_tokens),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn row(day: &str, model: &str, requests: u64, cost: Option<f64>) -> UsageRow {
        UsageRow {
            keys: [("day", day), ("model", model)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            figures: UsageFigures {
                requests,
                input_tokens: requests * 10,
                cost_usd: cost,
                ..UsageFigures::default()
            },
        }
    }

    /// Folded by one key, the figures add up, and a cost unknown in one row is unknown for
    /// the group.
    #[test]
    fn a_report_folds_by_one_of_its_keys() {
        let report = UsageReport {
            rows: vec![
                row("2026-03-01", "a", 1, Some(0.5)),
                row("2026-03-01", "b", 2, None),
                row("2026-03-02", "a", 3, Some(0.25)),
            ],
            total: UsageFigures::default(),
            unpriced: vec!["b".into()],
        };
        let by_model = report.folded_by(UsageKey::Model);
        assert_eq!(by_model.len(), 2);
        assert_eq!(by_model[0].0, "a");
        assert_eq!(
            (
                by_model[0].1.requests,
                by_model[0].1.input_tokens,
                by_model[0].1.cost_usd
            ),
            (4, 40, Some(0.75))
        );
        let by_day = report.folded_by(UsageKey::Day);
        assert_eq!((by_day[0].1.requests, by_day[0].1.cost_usd), (3, None));
        assert_eq!(
            (by_day[1].1.requests, by_day[1].1.cost_usd),
            (3, Some(0.25))
        );
    }
}
