//! A trace as a waterfall: one row per model, tool or denied span on a shared time axis (an SVG
//! bar whose `x` and `width` are the span's start and duration as percentages of the axis), the
//! time to first token inside each model bar, hung and in-flight requests marked, and each
//! span's details (tokens, arguments, errors) in a `<title>` and a panel the row opens. A trace
//! with more spans than [`AGGREGATE_ABOVE`] is drawn one bar per turn; a turn's page zooms in.
//! Bars are SVG geometry, not inline styles, so the page needs no `style-src 'unsafe-inline'`.

use freecode_core::rollout::trace::{SpanStatus, Trace};
use maud::{Markup, html};

use crate::trace_render::format_duration;

/// Past this many spans a waterfall shows one bar per turn.
pub const AGGREGATE_ABOVE: usize = 400;

/// Longest text of a detail (tool arguments, errors) kept in a row.
const DETAIL_CHARS: usize = 2_000;

/// One bar.
#[derive(Debug, Clone)]
pub struct Row {
    /// `model`, `tool`, `denied` or `turn`.
    pub kind: &'static str,
    /// What the bar is (model name, tool name, turn number).
    pub label: String,
    /// Start, ms since the epoch.
    pub start: i64,
    /// Duration, ms.
    pub dur: i64,
    /// `hung`, `in-flight`, `error` or `failed`: a class and a visible flag.
    pub flag: Option<&'static str>,
    /// Time to first token, ms (model rows).
    pub ttft: Option<i64>,
    /// Label and value pairs for the details panel.
    pub details: Vec<(&'static str, String)>,
    /// The turn a `turn` row zooms into (1-based).
    pub turn: Option<usize>,
}

/// The rows of a trace (or of one of its turns) and their time axis.
#[derive(Debug, Clone)]
pub struct Waterfall {
    /// The axis' start, ms since the epoch.
    pub t0: i64,
    /// The axis' length, ms (at least 1).
    pub span_ms: i64,
    /// The bars, in start order.
    pub rows: Vec<Row>,
    /// Whether rows are turns.
    pub aggregated: bool,
    /// How many turns the trace has.
    pub turns: usize,
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(DETAIL_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

fn flag_of(status: SpanStatus) -> Option<&'static str> {
    match status {
        SpanStatus::Ok => None,
        SpanStatus::Error => Some("error"),
        SpanStatus::InFlight => Some("in-flight"),
        SpanStatus::Hung => Some("hung"),
    }
}

/// Every span of `trace` as a row, with the (0-based) turn it belongs to: model spans by their
/// `turnId` (numbered in order of appearance), tools and refusals by time (the last turn that
/// started before them).
fn span_rows(trace: &Trace) -> (Vec<(usize, Row)>, usize) {
    let mut turn_ids: Vec<&str> = Vec::new();
    let mut turn_starts: Vec<i64> = Vec::new();
    let mut rows = Vec::with_capacity(
        trace.model_spans.len() + trace.tool_spans.len() + trace.denied_spans.len(),
    );
    for m in &trace.model_spans {
        let turn = match turn_ids.iter().rposition(|t| *t == m.turn_id) {
            Some(i) => i,
            None => {
                turn_ids.push(&m.turn_id);
                turn_starts.push(m.started_at);
                turn_ids.len() - 1
            }
        };
        let mut details = vec![
            ("model", format!("{} / {}", m.provider, m.model)),
            ("turn", m.turn_id.clone()),
            ("duration", format_duration(m.duration_ms as f64)),
        ];
        if let Some(t) = m.ttft_ms {
            details.push(("first token", format_duration(t as f64)));
        }
        let tokens = [
            ("in", m.input_tokens),
            ("out", m.output_tokens),
            ("cache read", m.cache_read_tokens),
            ("cache write", m.cache_write_tokens),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {v}")))
        .collect::<Vec<_>>();
        if !tokens.is_empty() {
            details.push(("tokens", tokens.join(", ")));
        }
        details.push((
            "request",
            format!(
                "{} messages, {} tools, {} prompt chars",
                m.message_count, m.tool_count, m.prompt_chars
            ),
        ));
        if !m.tool_calls.is_empty() {
            details.push(("tool calls", m.tool_calls.join(", ")));
        }
        if let Some(e) = &m.error {
            let kind = m.error_kind.as_deref().unwrap_or("error");
            details.push(("error", clip(&format!("{kind}: {e}"))));
        }
        rows.push((
            turn,
            Row {
                kind: "model",
                label: m.model.clone(),
                start: m.started_at,
                dur: m.duration_ms.max(0),
                flag: flag_of(m.status),
                ttft: m.ttft_ms,
                details,
                turn: None,
            },
        ));
    }
    let turn_at = |t: i64| turn_starts.partition_point(|s| *s <= t).saturating_sub(1);
    for t in &trace.tool_spans {
        let mut details = vec![("duration", format_duration(t.duration_ms as f64))];
        if let Some(a) = &t.args {
            details.push(("args", clip(&a.to_string())));
        }
        if t.failed == Some(true) {
            details.push(("result", "failed".to_owned()));
        }
        rows.push((
            turn_at(t.started_at),
            Row {
                kind: "tool",
                label: t.tool.clone(),
                start: t.started_at,
                dur: t.duration_ms.max(0),
                flag: (t.failed == Some(true)).then_some("failed"),
                ttft: None,
                details,
                turn: None,
            },
        ));
    }
    for d in &trace.denied_spans {
        let mut details = vec![
            ("denied by", d.source.to_string()),
            ("reason", clip(&d.reason)),
        ];
        if let Some(a) = &d.args {
            details.push(("args", clip(&a.to_string())));
        }
        rows.push((
            turn_at(d.at),
            Row {
                kind: "denied",
                label: d.tool.clone(),
                start: d.at,
                dur: 0,
                flag: Some("denied"),
                ttft: None,
                details,
                turn: None,
            },
        ));
    }
    rows.sort_by_key(|(_, r)| r.start);
    let turns = turn_ids.len().max(usize::from(!rows.is_empty()));
    (rows, turns)
}

fn axis(rows: &[Row], trace: &Trace, whole: bool) -> (i64, i64) {
    if whole {
        let end = trace.ended_at.max(trace.started_at + trace.wall_ms);
        let end = rows.iter().map(|r| r.start + r.dur).fold(end, i64::max);
        return (trace.started_at, (end - trace.started_at).max(1));
    }
    let t0 = rows
        .iter()
        .map(|r| r.start)
        .min()
        .unwrap_or(trace.started_at);
    let end = rows.iter().map(|r| r.start + r.dur).max().unwrap_or(t0);
    (t0, (end - t0).max(1))
}

/// The waterfall of `trace`: every span, or one bar per turn past [`AGGREGATE_ABOVE`] spans;
/// with `turn` (1-based), that turn's spans on its own axis.
pub fn build(trace: &Trace, turn: Option<usize>) -> Waterfall {
    let (rows, turns) = span_rows(trace);
    if let Some(n) = turn {
        let rows: Vec<Row> = rows
            .into_iter()
            .filter(|(t, _)| t + 1 == n)
            .map(|(_, r)| r)
            .collect();
        let (t0, span_ms) = axis(&rows, trace, false);
        return Waterfall {
            t0,
            span_ms,
            rows,
            aggregated: false,
            turns,
        };
    }
    if rows.len() <= AGGREGATE_ABOVE {
        let rows: Vec<Row> = rows.into_iter().map(|(_, r)| r).collect();
        let (t0, span_ms) = axis(&rows, trace, true);
        return Waterfall {
            t0,
            span_ms,
            rows,
            aggregated: false,
            turns,
        };
    }
    // One bar per turn: from its first span's start to its last span's end.
    struct Acc {
        start: i64,
        end: i64,
        model: u64,
        tools: u64,
        denied: u64,
        model_ms: i64,
        tool_ms: i64,
        flag: Option<&'static str>,
    }
    let mut accs: Vec<Option<Acc>> = (0..turns).map(|_| None).collect();
    for (t, r) in &rows {
        let Some(slot) = accs.get_mut(*t) else {
            continue;
        };
        let a = slot.get_or_insert(Acc {
            start: r.start,
            end: r.start,
            model: 0,
            tools: 0,
            denied: 0,
            model_ms: 0,
            tool_ms: 0,
            flag: None,
        });
        a.start = a.start.min(r.start);
        a.end = a.end.max(r.start + r.dur);
        match r.kind {
            "model" => {
                a.model += 1;
                a.model_ms += r.dur;
            }
            "tool" => {
                a.tools += 1;
                a.tool_ms += r.dur;
            }
            _ => a.denied += 1,
        }
        // The worst mark wins: hung, then in flight, then an error.
        let rank = |f: Option<&str>| match f {
            Some("hung") => 3,
            Some("in-flight") => 2,
            Some("error") => 1,
            _ => 0,
        };
        if r.kind == "model" && rank(r.flag) > rank(a.flag) {
            a.flag = r.flag;
        }
    }
    let rows: Vec<Row> = accs
        .into_iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let a = a?;
            Some(Row {
                kind: "turn",
                label: format!("turn {}", i + 1),
                start: a.start,
                dur: a.end - a.start,
                flag: a.flag,
                ttft: None,
                details: vec![
                    (
                        "spans",
                        format!("{} model, {} tool, {} denied", a.model, a.tools, a.denied),
                    ),
                    ("model time", format_duration(a.model_ms as f64)),
                    ("tool time", format_duration(a.tool_ms as f64)),
                ],
                turn: Some(i + 1),
            })
        })
        .collect();
    let (t0, span_ms) = axis(&rows, trace, true);
    Waterfall {
        t0,
        span_ms,
        rows,
        aggregated: true,
        turns,
    }
}

/// A percentage of the axis, for an SVG attribute.
fn pct(v: i64, of: i64) -> String {
    let p = (v as f64 / of.max(1) as f64 * 100.0).clamp(0.0, 100.0);
    format!("{p:.4}%")
}

/// The waterfall's markup. `zoom_href(n)` is the link of turn `n`'s bar (`None`: turns are not
/// links, as in an offline file).
pub fn markup(w: &Waterfall, zoom_href: &dyn Fn(usize) -> Option<String>) -> Markup {
    html! {
        div.waterfall data-t0=(w.t0) data-span=(w.span_ms) data-aggregated=(w.aggregated) {
            div.wf-axis {
                span {}
                div.wf-ticks {
                    span { "0" }
                    span { (format_duration(w.span_ms as f64 / 2.0)) }
                    span { (format_duration(w.span_ms as f64)) }
                }
                span {}
                span {}
            }
            @if w.rows.is_empty() {
                p.empty { "No spans recorded." }
            }
            @for r in &w.rows {
                @let classes = format!("wf-row {}{}", r.kind, r.flag.map(|f| format!(" {f}")).unwrap_or_default());
                div class=(classes) data-kind=(r.kind) data-start=(r.start) data-dur=(r.dur) tabindex="0" {
                    span.wf-label {
                        @match (r.turn, r.turn.and_then(zoom_href)) {
                            (Some(_), Some(href)) => a href=(href) { (r.label) },
                            _ => { span.wf-kind { (r.kind) } " " (r.label) }
                        }
                    }
                    svg.wf-track xmlns="http://www.w3.org/2000/svg" {
                        rect.wf-bar x=(pct(r.start - w.t0, w.span_ms)) y="2" height="14"
                            width=(pct(r.dur, w.span_ms)) {
                            title {
                                (r.kind) " " (r.label) " — " (format_duration(r.dur as f64))
                                @for (k, v) in &r.details { "\n" (k) ": " (v) }
                            }
                        }
                        @if r.kind == "denied" {
                            line.wf-tick x1=(pct(r.start - w.t0, w.span_ms)) x2=(pct(r.start - w.t0, w.span_ms)) y1="1" y2="17" {}
                        }
                        @if let Some(t) = r.ttft {
                            rect.wf-ttft x=(pct(r.start - w.t0, w.span_ms)) y="6" height="6"
                                width=(pct(t.min(r.dur), w.span_ms)) {}
                        }
                    }
                    span.wf-dur { (format_duration(r.dur as f64)) }
                    span.wf-flag { @if let Some(f) = r.flag { (f.replace('-', " ")) } }
                    dl.wf-details hidden {
                        @for (k, v) in &r.details { dt { (k) } dd { (v) } }
                    }
                }
            }
        }
    }
}
