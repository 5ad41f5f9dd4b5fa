//! `freecode usage`: tokens and cost of every agent's billed requests, grouped as asked.

use std::io::Write;

use clap::Args;
use freecode_ops::scope::{parse_since, parse_until, project_scope};
use freecode_ops::usage::{UsageAsk, UsageKey, UsageReport};
use freecode_store::Home;
use freecode_store::index::UsageScope;

use crate::progress::Feedback;
use crate::render::{Style, print_json, thousands};
use freecode_ops::human::clean_line;

/// `freecode usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Group rows by these, a comma list in order: day, week, month (the local calendar's),
    /// session, project, agent, model. Default: day.
    #[arg(long, value_name = "KEYS", value_parser = keys, default_value = "day")]
    by: Keys,
    /// Only requests answered since DATE: `2026-01-15`, an RFC 3339 time, `today`,
    /// `yesterday`, or `1w` / `3d` / `12h` / `30m` ago.
    #[arg(long, value_name = "DATE", value_parser = since)]
    since: Option<i64>,
    /// Only requests answered before DATE, in the words --since takes; a date counts its
    /// whole day.
    #[arg(long, value_name = "DATE", value_parser = until)]
    until: Option<i64>,
    /// Only sessions this agent wrote: `freecode`, `claude-code`, `codex`, `gemini-cli`, …
    #[arg(long, value_name = "A")]
    agent: Option<String>,
    /// Only sessions of this project directory or one below it (relative: from the current
    /// directory).
    #[arg(long, value_name = "P")]
    project: Option<String>,
    /// Archived and deleted sessions too.
    #[arg(long)]
    all: bool,
    /// Print JSON: `{"rows": [{<the --by keys>, "requests", "inputTokens", "outputTokens",
    /// "reasoningTokens", "cacheReadTokens", "cacheWriteTokens", "costUsd"}], "total": {…},
    /// "unpriced": [models]}`; `inputTokens` counts only what is billed at the full input rate.
    #[arg(long)]
    json: bool,
}

/// `--by`'s keys.
#[derive(Debug, Clone)]
pub struct Keys(Vec<UsageKey>);

fn keys(s: &str) -> Result<Keys, String> {
    UsageKey::parse_list(s).map(Keys)
}

// The times are parsed with the arguments, so that a bad one is a usage error (exit 2) as a
// bad `--by` is.
fn since(s: &str) -> Result<i64, String> {
    parse_since(s, freecode_store::now_ms()).map_err(|e| e.to_string())
}

fn until(s: &str) -> Result<i64, String> {
    parse_until(s, freecode_store::now_ms()).map_err(|e| e.to_string())
}

/// Runs `freecode usage`.
pub fn usage(home: &Home, a: UsageArgs) -> anyhow::Result<()> {
    let ask = UsageAsk {
        by: a.by.0,
        scope: UsageScope {
            since: a.since,
            until: a.until,
            agent: a.agent,
            project: a.project.as_deref().map(project_scope).transpose()?,
            all: a.all,
        },
    };
    let mut feedback = Feedback::new("indexing");
    let report = freecode_ops::usage::usage(home, &ask, &mut feedback);
    feedback.finish();
    let report = report?;
    if a.json {
        return print_json(&report);
    }
    render(&ask.by, &report)
}

/// A cost for a person: dollars and cents, `—` when unknown.
fn dollars(cost: Option<f64>) -> String {
    cost.map_or_else(|| "—".to_owned(), |c| format!("${c:.2}"))
}

fn render(by: &[UsageKey], r: &UsageReport) -> anyhow::Result<()> {
    let st = Style::stdout();
    let mut head: Vec<String> = by.iter().map(|k| k.as_str().to_uppercase()).collect();
    head.extend(
        [
            "REQUESTS",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
            "COST",
        ]
        .map(str::to_owned),
    );
    let figures = |f: &freecode_ops::usage::UsageFigures| {
        vec![
            thousands(f.requests),
            thousands(f.input_tokens),
            thousands(f.output_tokens),
            thousands(f.cache_read_tokens),
            thousands(f.cache_write_tokens),
            dollars(f.cost_usd),
        ]
    };
    let mut rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let mut cells: Vec<String> = by
                .iter()
                .map(|k| {
                    clean_line(row.keys.get(k.as_str()).map_or("", String::as_str)).into_owned()
                })
                .collect();
            cells.extend(figures(&row.figures));
            cells
        })
        .collect();
    let mut total: Vec<String> = vec![String::new(); by.len()];
    if let Some(first) = total.first_mut() {
        *first = "TOTAL".to_owned();
    }
    total.extend(figures(&r.total));
    rows.push(total);
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|c| c[i].chars().count())
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let keys = by.len();
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < keys {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", st.dim(&line(&head)))?;
    let n = rows.len();
    for (i, cells) in rows.iter().enumerate() {
        let text = line(cells);
        if i + 1 == n {
            writeln!(out, "{}", st.bold(&text))?;
        } else {
            writeln!(out, "{text}")?;
        }
    }
    if !r.unpriced.is_empty() {
        tracing::warn!(
            "no price for {} (their requests are counted, their cost is not): add them to \
             prices.json in the home",
            r.unpriced.join(", ")
        );
    }
    Ok(())
}
