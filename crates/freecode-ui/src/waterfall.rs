//! A trace as a waterfall: one row per model, tool or denied span on a shared time axis (an SVG
//! bar whose `x` and `width` are the span's start and duration as percentages of the axis), the
//! time to first token inside each model bar, hung and in-flight requests marked, and each
//! span's details (tokens, arguments, errors) in a `<title>` and a panel the row opens. A trace
//! with more spans than [`AGGREGATE_ABOVE`] is drawn one bar per turn (per group of turns past
//! [`MAX_BARS`]); a bar's link zooms in.
//! Bars are SVG geometry, not inline styles, so the page needs no `style-src 'unsafe-inline'`.

use std::collections::HashMap;

use freecode_core::rollout::replay::{Replay, ReplayTurn};
use freecode_core::rollout::trace::{SpanStatus, Trace};
use maud::{Markup, html};

use freecode_ops::human::format_duration;

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
    /// The turns a `turn` row zooms into (1-based, inclusive).
    pub turn: Option<(usize, usize)>,
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

/// Where a span comes from: its index in the trace's model, tool or denied spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    Model(usize),
    Tool(usize),
    Denied(usize),
}

/// A span reduced to what placing it needs: no strings, so a million-event log is sorted
/// and grouped cheaply; rows with their texts are made only for the spans drawn.
#[derive(Debug, Clone, Copy)]
struct Lite {
    /// 0-based turn.
    turn: usize,
    src: Src,
    start: i64,
    dur: i64,
}

/// Every span of `trace` with the (0-based) turn it belongs to, in start order: model spans by
/// their `turnId` (numbered in order of appearance), tools and refusals by time (the last turn
/// that started before them). Returns the number of turns too.
fn lite_spans(trace: &Trace) -> (Vec<Lite>, usize, Vec<&str>) {
    let mut turn_of: HashMap<&str, usize> = HashMap::new();
    let mut turn_starts: Vec<i64> = Vec::new();
    let mut out = Vec::with_capacity(
        trace.model_spans.len() + trace.tool_spans.len() + trace.denied_spans.len(),
    );
    for (i, m) in trace.model_spans.iter().enumerate() {
        let next = turn_of.len();
        let turn = *turn_of.entry(m.turn_id.as_str()).or_insert_with(|| {
            turn_starts.push(m.started_at);
            next
        });
        out.push(Lite {
            turn,
            src: Src::Model(i),
            start: m.started_at,
            dur: m.duration_ms.max(0),
        });
    }
    let turn_at = |t: i64| turn_starts.partition_point(|s| *s <= t).saturating_sub(1);
    for (i, t) in trace.tool_spans.iter().enumerate() {
        out.push(Lite {
            turn: turn_at(t.started_at),
            src: Src::Tool(i),
            start: t.started_at,
            dur: t.duration_ms.max(0),
        });
    }
    for (i, d) in trace.denied_spans.iter().enumerate() {
        out.push(Lite {
            turn: turn_at(d.at),
            src: Src::Denied(i),
            start: d.at,
            dur: 0,
        });
    }
    out.sort_by_key(|l| l.start);
    let turns = turn_of.len().max(usize::from(!out.is_empty()));
    let mut ids = vec![""; turn_of.len()];
    for (id, n) in turn_of {
        ids[n] = id;
    }
    (out, turns, ids)
}

/// The mark of a span, without making its row.
fn lite_flag(trace: &Trace, l: &Lite) -> Option<&'static str> {
    match l.src {
        Src::Model(i) => trace.model_spans.get(i).and_then(|m| flag_of(m.status)),
        Src::Tool(i) => trace
            .tool_spans
            .get(i)
            .and_then(|t| (t.failed == Some(true)).then_some("failed")),
        Src::Denied(_) => Some("denied"),
    }
}

/// The row of a span, with its label and details.
fn row_of(trace: &Trace, l: &Lite, outputs: &HashMap<usize, String>) -> Option<Row> {
    Some(match l.src {
        Src::Model(i) => {
            let m = trace.model_spans.get(i)?;
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
            Row {
                kind: "model",
                label: m.model.clone(),
                start: m.started_at,
                dur: m.duration_ms.max(0),
                flag: flag_of(m.status),
                ttft: m.ttft_ms,
                details,
                turn: None,
            }
        }
        Src::Tool(i) => {
            let t = trace.tool_spans.get(i)?;
            let mut details = vec![("duration", format_duration(t.duration_ms as f64))];
            if let Some(a) = &t.args {
                details.push(("args", clip(&a.to_string())));
            }
            if t.failed == Some(true) {
                details.push(("result", "failed".to_owned()));
            }
            if let Some(o) = outputs.get(&i) {
                details.push(("output", clip(o)));
            }
            Row {
                kind: "tool",
                label: t.tool.clone(),
                start: t.started_at,
                dur: t.duration_ms.max(0),
                flag: (t.failed == Some(true)).then_some("failed"),
                ttft: None,
                details,
                turn: None,
            }
        }
        Src::Denied(i) => {
            let d = trace.denied_spans.get(i)?;
            let mut details = vec![
                ("denied by", d.source.to_string()),
                ("reason", clip(&d.reason)),
            ];
            if let Some(a) = &d.args {
                details.push(("args", clip(&a.to_string())));
            }
            Row {
                kind: "denied",
                label: d.tool.clone(),
                start: d.at,
                dur: 0,
                flag: Some("denied"),
                ttft: None,
                details,
                turn: None,
            }
        }
    })
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

/// What a waterfall shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The whole trace: every span, or bars of turns past [`AGGREGATE_ABOVE`] spans.
    All,
    /// Turns `a..=b` (1-based), one bar per turn or per group of turns.
    Turns(usize, usize),
    /// One turn's spans (1-based).
    Turn(usize),
}

/// The spans of a trace, each with its turn (0-based): placed once, drawn many ways.
pub struct Spans<'a> {
    trace: &'a Trace,
    lite: Vec<Lite>,
    /// Each turn's `turnId` (index: 0-based turn).
    turn_ids: Vec<&'a str>,
    /// Tool outputs by tool span index ([`Spans::with_outputs`]).
    outputs: HashMap<usize, String>,
    /// How many turns.
    pub turns: usize,
}

impl<'a> Spans<'a> {
    /// The spans of `trace`.
    pub fn of(trace: &'a Trace) -> Self {
        let (lite, turns, turn_ids) = lite_spans(trace);
        Self {
            trace,
            lite,
            turn_ids,
            outputs: HashMap::new(),
            turns,
        }
    }

    /// How many spans.
    pub fn len(&self) -> usize {
        self.lite.len()
    }

    /// Tool rows show their output's start (from the replay of the same log), for the spans
    /// `keep` selects: the n-th span of a tool in a turn is that turn's n-th call of the tool.
    pub fn with_outputs(mut self, replay: &Replay, keep: impl Fn(usize) -> bool) -> Self {
        let turns: HashMap<&str, &ReplayTurn> = replay
            .turns
            .iter()
            .map(|t| (t.turn_id.as_str(), t))
            .collect();
        let mut seen: HashMap<(usize, &str), usize> = HashMap::new();
        for l in &self.lite {
            let Src::Tool(i) = l.src else { continue };
            let Some(span) = self.trace.tool_spans.get(i) else {
                continue;
            };
            let n = seen.entry((l.turn, span.tool.as_str())).or_insert(0);
            let nth = *n;
            *n += 1;
            if !keep(l.turn + 1) {
                continue;
            }
            let output = self
                .turn_ids
                .get(l.turn)
                .and_then(|id| turns.get(id))
                .and_then(|t| t.calls.iter().filter(|c| c.tool == span.tool).nth(nth))
                .and_then(|c| c.output.as_deref());
            if let Some(o) = output {
                self.outputs
                    .insert(i, o.chars().take(DETAIL_CHARS + 1).collect());
            }
        }
        self
    }

    /// Whether the whole trace is drawn one bar per turn ([`AGGREGATE_ABOVE`]).
    pub fn aggregated(&self) -> bool {
        self.lite.len() > AGGREGATE_ABOVE
    }

    /// How many rows each turn has (index: turn - 1).
    pub fn turn_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![0; self.turns];
        for l in &self.lite {
            if let Some(n) = sizes.get_mut(l.turn) {
                *n += 1;
            }
        }
        sizes
    }

    /// The `turnId` of turn `turn` (0-based).
    pub fn turn_id(&self, turn: usize) -> Option<&'a str> {
        self.turn_ids.get(turn).copied()
    }

    /// The rows of the turns `keep` selects (index: turn - 1), in start order; the others'
    /// lists are empty, their rows never built.
    pub fn by_turn_where(&self, keep: &[bool]) -> Vec<Vec<Row>> {
        let mut out: Vec<Vec<Row>> = (0..self.turns).map(|_| Vec::new()).collect();
        for l in &self.lite {
            if !keep.get(l.turn).copied().unwrap_or(false) {
                continue;
            }
            if let (Some(v), Some(r)) = (out.get_mut(l.turn), row_of(self.trace, l, &self.outputs))
            {
                v.push(r);
            }
        }
        out
    }

    fn rows(&self, keep: impl Fn(&Lite) -> bool) -> Vec<Row> {
        self.lite
            .iter()
            .filter(|l| keep(l))
            .filter_map(|l| row_of(self.trace, l, &self.outputs))
            .collect()
    }
}

/// Most bars a chart of turns draws: past it, consecutive turns share a bar.
pub const MAX_BARS: usize = 300;

/// The waterfall of `trace` as `sel` says.
#[cfg(test)]
pub fn build(trace: &Trace, sel: Select) -> Waterfall {
    build_from(&Spans::of(trace), trace, sel)
}

/// A waterfall of spans already folded ([`Spans::of`]).
pub fn build_from(spans: &Spans<'_>, trace: &Trace, sel: Select) -> Waterfall {
    let turns = spans.turns;
    let (a, b) = match sel {
        Select::Turn(n) => {
            return of_turn(spans.rows(|l| l.turn + 1 == n), trace, turns);
        }
        Select::All if !spans.aggregated() => {
            let rows = spans.rows(|_| true);
            let (t0, span_ms) = axis(&rows, trace, true);
            return Waterfall {
                t0,
                span_ms,
                rows,
                aggregated: false,
                turns,
            };
        }
        Select::All => (1, turns),
        Select::Turns(a, b) => (a.max(1), b.min(turns)),
    };
    let rows = turn_bars(spans, a, b);
    let (t0, span_ms) = axis(&rows, trace, sel == Select::All);
    Waterfall {
        t0,
        span_ms,
        rows,
        aggregated: true,
        turns,
    }
}

/// The waterfall of one turn's `rows` (of a trace of `turns` turns), on the turn's own axis.
pub fn of_turn(rows: Vec<Row>, trace: &Trace, turns: usize) -> Waterfall {
    let (t0, span_ms) = axis(&rows, trace, false);
    Waterfall {
        t0,
        span_ms,
        rows,
        aggregated: false,
        turns,
    }
}

/// Bars for turns `a..=b`: one per turn, or per group of consecutive turns past
/// [`MAX_BARS`]; each from its first span's start to its last span's end.
fn turn_bars(spans: &Spans<'_>, a: usize, b: usize) -> Vec<Row> {
    #[derive(Default)]
    struct Acc {
        seen: bool,
        start: i64,
        end: i64,
        model: u64,
        tools: u64,
        denied: u64,
        model_ms: i64,
        tool_ms: i64,
        flag: Option<&'static str>,
    }
    if a > b {
        return Vec::new();
    }
    let group = (b - a + 1).div_ceil(MAX_BARS).max(1);
    let bars = (b - a + 1).div_ceil(group);
    let mut accs: Vec<Acc> = (0..bars).map(|_| Acc::default()).collect();
    // The worst mark wins: hung, then in flight, then an error.
    let rank = |f: Option<&str>| match f {
        Some("hung") => 3,
        Some("in-flight") => 2,
        Some("error") => 1,
        _ => 0,
    };
    for l in &spans.lite {
        let turn = l.turn + 1;
        if turn < a || turn > b {
            continue;
        }
        let Some(acc) = accs.get_mut((turn - a) / group) else {
            continue;
        };
        if !acc.seen {
            acc.seen = true;
            acc.start = l.start;
            acc.end = l.start;
        }
        acc.start = acc.start.min(l.start);
        acc.end = acc.end.max(l.start + l.dur);
        match l.src {
            Src::Model(_) => {
                acc.model += 1;
                acc.model_ms += l.dur;
                let flag = lite_flag(spans.trace, l);
                if rank(flag) > rank(acc.flag) {
                    acc.flag = flag;
                }
            }
            Src::Tool(_) => {
                acc.tools += 1;
                acc.tool_ms += l.dur;
            }
            Src::Denied(_) => acc.denied += 1,
        }
    }
    accs.into_iter()
        .enumerate()
        .filter(|(_, acc)| acc.seen)
        .map(|(i, acc)| {
            let first = a + i * group;
            let last = (first + group - 1).min(b);
            Row {
                kind: "turn",
                label: if first == last {
                    format!("turn {first}")
                } else {
                    format!("turns {first}–{last}")
                },
                start: acc.start,
                dur: acc.end - acc.start,
                flag: acc.flag,
                ttft: None,
                details: vec![
                    (
                        "spans",
                        format!(
                            "{} model, {} tool, {} denied",
                            acc.model, acc.tools, acc.denied
                        ),
                    ),
                    ("model time", format_duration(acc.model_ms as f64)),
                    ("tool time", format_duration(acc.tool_ms as f64)),
                ],
                turn: Some((first, last)),
            }
        })
        .collect()
}

/// A percentage of the axis, for an SVG attribute.
fn pct(v: i64, of: i64) -> String {
    let p = (v as f64 / of.max(1) as f64 * 100.0).clamp(0.0, 100.0);
    format!("{p:.4}%")
}

/// The waterfall's markup. `zoom_href(a, b)` is the link of the bar of turns `a..=b` (`None`:
/// bars are not links, as in an offline file).
pub fn markup(w: &Waterfall, zoom_href: &dyn Fn((usize, usize)) -> Option<String>) -> Markup {
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

#[cfg(test)]
mod tests {
    use super::*;
    use freecode_core::rollout::trace::{ModelSpan, ToolSpan};

    fn trace(turns: usize, calls: usize) -> Trace {
        let mut model_spans = Vec::new();
        let mut tool_spans = Vec::new();
        let mut t = 1_000;
        for turn in 0..turns {
            for _ in 0..calls {
                model_spans.push(ModelSpan {
                    turn_id: format!("turn-{turn}"),
                    provider: "p".into(),
                    model: "m".into(),
                    started_at: t,
                    status: if turn == turns - 1 {
                        SpanStatus::Hung
                    } else {
                        SpanStatus::Ok
                    },
                    duration_ms: 100,
                    message_count: 1,
                    tool_count: 1,
                    prompt_chars: 1,
                    tool_calls: vec![],
                    ttft_ms: Some(10),
                    input_tokens: None,
                    output_tokens: None,
                    cache_read_tokens: None,
                    cache_write_tokens: None,
                    error_kind: None,
                    error: None,
                });
                tool_spans.push(ToolSpan {
                    tool: "bash".into(),
                    started_at: t + 100,
                    duration_ms: 50,
                    args: None,
                    failed: None,
                });
                t += 200;
            }
        }
        Trace {
            session_id: "s".into(),
            started_at: 1_000,
            ended_at: t,
            wall_ms: t - 1_000,
            model_spans,
            tool_spans,
            denied_spans: vec![],
            model_ms: 0,
            tool_ms: 0,
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            hung: true,
            in_flight: false,
            abandoned: false,
            redirects: 0,
            redirects_skipped: 0,
            time: Default::default(),
        }
    }

    fn spans_in(rows: &[Row]) -> u64 {
        rows.iter()
            .map(|r| {
                r.details[0]
                    .1
                    .split(", ")
                    .filter_map(|p| p.split(' ').next()?.parse::<u64>().ok())
                    .sum::<u64>()
            })
            .sum()
    }

    #[test]
    fn small_traces_show_every_span_and_big_ones_bars_of_turns() {
        let t = trace(3, 2);
        let w = build(&t, Select::All);
        assert!(!w.aggregated);
        assert_eq!(w.rows.len(), 12);
        assert_eq!(w.rows.iter().filter(|r| r.flag == Some("hung")).count(), 2);

        // 1,000 turns of 10 calls: 20,000 spans, at most MAX_BARS bars, every span in one.
        let t = trace(1_000, 10);
        let w = build(&t, Select::All);
        assert!(w.aggregated);
        assert_eq!(w.turns, 1_000);
        assert!(w.rows.len() <= MAX_BARS, "{}", w.rows.len());
        assert_eq!(spans_in(&w.rows), 20_000);
        assert_eq!(w.rows[0].turn, Some((1, 4)));
        assert_eq!(w.rows.last().and_then(|r| r.flag), Some("hung"));
        // A group zooms into bars of single turns, a turn into its spans.
        let z = build(&t, Select::Turns(1, 4));
        assert_eq!(z.rows.len(), 4);
        assert_eq!(z.rows[1].turn, Some((2, 2)));
        assert_eq!(spans_in(&z.rows), 80);
        let one = build(&t, Select::Turn(2));
        assert_eq!(one.rows.len(), 20);
        assert_eq!(one.t0, 1_000 + 10 * 200);
        assert_eq!(one.span_ms, 10 * 200 - 50);
    }
}
