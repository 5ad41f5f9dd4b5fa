//! The trace fold (SPEC §13.2): model spans, tool spans and denied spans, with the time
//! attribution and hang detection `freecode trace` renders.
//!
//! Pure and streaming: [`TraceBuilder::apply`] takes events one at a time and hands each span
//! to a [`SpanSink`] as it closes, keeping only open requests and pending tool calls (with the
//! default [`Spans`] sink memory grows with the number of spans; a sink that writes spans out
//! keeps it flat), and [`TraceBuilder::snapshot`] ages open requests against any `now` without
//! re-reading anything — what `--follow` needs.
//!
//! Differences from the original, all deliberate: tool calls pair on `callId` when the log has
//! it (parallel calls of one tool no longer overwrite each other, SPEC §19.33); spans carry
//! `cacheWriteTokens`, tool `args` and `failed`, and denied spans and redirect counts exist (the
//! 19-event schema).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{DenySource, Event};
use super::split::{MAX_MARKS, SplitFold, find_mark};
use super::view::{EventType, EventView};
use crate::jsonw::{Emit, Layout, emit_object};

/// A request open this long (ms) with no response and no error is hung.
pub const HANG_THRESHOLD_MS: i64 = 300_000;

/// A log silent this long (ms) past its last event, with requests still open, was left by a
/// process that is gone: those requests never closed, and nothing is timed past the last event
/// (an old crashed session would otherwise show months of "hung" time counted to now).
pub const ABANDONED_AFTER_MS: i64 = 86_400_000;

/// Where a span stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SpanStatus {
    /// Answered.
    Ok,
    /// Failed (`model.error`).
    Error,
    /// Open, younger than the threshold.
    InFlight,
    /// Open for at least the threshold.
    Hung,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ModelSpan {
    pub turn_id: String,
    pub provider: String,
    pub model: String,
    pub started_at: i64,
    pub status: SpanStatus,
    pub duration_ms: i64,
    pub message_count: u64,
    pub tool_count: u64,
    pub prompt_chars: u64,
    pub tool_calls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tool that ran.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ToolSpan {
    pub tool: String,
    pub started_at: i64,
    pub duration_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,
}

/// One refused tool call: it never ran, so it is not a tool span.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[allow(missing_docs)]
pub struct DeniedSpan {
    pub tool: String,
    pub at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    pub source: DenySource,
    pub reason: String,
}

// The spans written by hand (`jsonw`), as their `Serialize` writes them: `trace --json` prints
// one for every model call and tool run (`tests/line_writer.rs` holds the two to the same
// bytes). Members in declaration order, `None`s skipped, as the derives above do.

impl SpanStatus {
    /// The status as the JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SpanStatus::Ok => "ok",
            SpanStatus::Error => "error",
            SpanStatus::InFlight => "in_flight",
            SpanStatus::Hung => "hung",
        }
    }
}

impl Emit for SpanStatus {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        self.as_str().emit(l)
    }
}

impl Emit for ModelSpan {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_object!(l;
            always "turnId" => &self.turn_id,
            always "provider" => &self.provider,
            always "model" => &self.model,
            always "startedAt" => &self.started_at,
            always "status" => &self.status,
            always "durationMs" => &self.duration_ms,
            always "messageCount" => &self.message_count,
            always "toolCount" => &self.tool_count,
            always "promptChars" => &self.prompt_chars,
            always "toolCalls" => &self.tool_calls,
            some "ttftMs" => &self.ttft_ms,
            some "inputTokens" => &self.input_tokens,
            some "outputTokens" => &self.output_tokens,
            some "cacheReadTokens" => &self.cache_read_tokens,
            some "cacheWriteTokens" => &self.cache_write_tokens,
            some "errorKind" => &self.error_kind,
            some "error" => &self.error,
        )
    }
}

impl Emit for ToolSpan {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_object!(l;
            always "tool" => &self.tool,
            always "startedAt" => &self.started_at,
            always "durationMs" => &self.duration_ms,
            some "args" => &self.args,
            some "failed" => &self.failed,
        )
    }
}

impl Emit for DeniedSpan {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_object!(l;
            always "tool" => &self.tool,
            always "at" => &self.at,
            some "args" => &self.args,
            always "source" => &self.source,
            always "reason" => &self.reason,
        )
    }
}

/// The folded trace of one log.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Trace {
    pub session_id: String,
    pub started_at: i64,
    pub ended_at: i64,
    pub wall_ms: i64,
    pub model_spans: Vec<ModelSpan>,
    pub tool_spans: Vec<ToolSpan>,
    pub denied_spans: Vec<DeniedSpan>,
    pub model_ms: i64,
    pub tool_ms: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub hung: bool,
    pub in_flight: bool,
    /// Requests are open but the log has been silent for [`ABANDONED_AFTER_MS`]: they never
    /// closed (their spans are `hung`, open since their `startedAt`), and durations and
    /// `wallMs` end at the last event instead of now.
    pub abandoned: bool,
    pub redirects: u64,
    pub redirects_skipped: u64,
    /// Where the wall time went: its four parts add up to `wallMs` (`modelMs` and `toolMs`
    /// sum every span, so overlapping ones count twice there, never here).
    pub time: TimeShares,
}

/// `wallMs` cut into parts that add up to it: model calls (a moment two calls overlap counts
/// once), tools while no model call runs, idle between turns (from the last event before a
/// turn to its start, nothing open: the user reading and typing), and the rest (the agent's
/// own work, waiting on an approval).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeShares {
    /// Covered by a model call.
    pub model_ms: i64,
    /// Covered by a tool and by no model call.
    pub tools_ms: i64,
    /// Between turns.
    pub idle_ms: i64,
    /// The rest of the wall time.
    pub other_ms: i64,
}

impl TimeShares {
    /// The parts of `wall` from the fold's unions (each clamped into what is left of it).
    fn of(wall: i64, model_union: i64, busy: i64, idle: i64) -> Self {
        let wall = wall.max(0);
        let model_ms = model_union.clamp(0, wall);
        let tools_ms = (busy - model_union).clamp(0, wall - model_ms);
        let idle_ms = idle.clamp(0, wall - model_ms - tools_ms);
        Self {
            model_ms,
            tools_ms,
            idle_ms,
            other_ms: wall - model_ms - tools_ms - idle_ms,
        }
    }

    /// Each part's share of the wall time in whole percent, adding up to 100 (the largest
    /// remainders rounded up); all zero for no wall time.
    pub fn percents(&self) -> [u64; 4] {
        let parts = [self.model_ms, self.tools_ms, self.idle_ms, self.other_ms];
        let wall: i64 = parts.iter().sum();
        if wall <= 0 {
            return [0; 4];
        }
        let exact: Vec<(u64, i64)> = parts
            .iter()
            .map(|&p| {
                let scaled = i128::from(p.max(0)) * 100;
                (
                    (scaled / i128::from(wall)) as u64,
                    (scaled % i128::from(wall)) as i64,
                )
            })
            .collect();
        let mut out = [exact[0].0, exact[1].0, exact[2].0, exact[3].0];
        let short = 100u64.saturating_sub(out.iter().sum());
        let mut order: Vec<usize> = (0..4).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(exact[i].1));
        for &i in order.iter().take(short as usize) {
            out[i] += 1;
        }
        out
    }
}

/// Adds to `total` the part of `[start, end)` after `until` (time already covered counts once),
/// and moves `until` to the end.
fn cover(total: &mut i64, until: &mut i64, start: i64, end: i64) {
    let from = start.max(*until);
    if end > from {
        *total = total.wrapping_add(end - from);
    }
    *until = (*until).max(end);
}

/// Where a trace fold puts spans as they close (a model span when its response or error
/// arrives, a tool span at its output, a denial at once), so a fold keeps only what is open.
///
/// [`Spans`] keeps them in memory (what [`TraceBuilder::finish`] returns as a [`Trace`]); a
/// streaming consumer writes each one out (`trace --json`, the rendered waterfall) and holds
/// nothing that grows with the log. A model span's `index` is its place in
/// [`Trace::model_spans`] (spans close out of order when requests overlap).
pub trait SpanSink: Sized {
    /// A position in what the sink has taken in (a split fold's mark).
    type Pos: Copy + std::fmt::Debug;
    /// A model span, closed (status `ok` or `error`: its row and JSON are final).
    fn model(&mut self, index: u64, span: ModelSpan);
    /// A tool span.
    fn tool(&mut self, span: ToolSpan);
    /// A denied span.
    fn denied(&mut self, span: DeniedSpan);
    /// Where the sink stands.
    fn pos(&self) -> Self::Pos;
    /// An empty sink of the same kind (for a split fold's tail).
    fn tail(&self) -> Self;
    /// Appends what `tail` took in after `from`; its model indices `i >= first` become
    /// `base + (i - first)`.
    fn splice(&mut self, tail: Self, from: Self::Pos, first: u64, base: u64);
}

/// Spans kept in memory: the default sink, what [`Trace`] is built from.
#[derive(Debug, Clone, Default)]
pub struct Spans {
    /// Closed model spans with their indices, in the order they closed.
    model: Vec<(u64, ModelSpan)>,
    tool: Vec<ToolSpan>,
    denied: Vec<DeniedSpan>,
}

impl SpanSink for Spans {
    type Pos = (usize, usize, usize);

    fn model(&mut self, index: u64, span: ModelSpan) {
        self.model.push((index, span));
    }

    fn tool(&mut self, span: ToolSpan) {
        self.tool.push(span);
    }

    fn denied(&mut self, span: DeniedSpan) {
        self.denied.push(span);
    }

    fn pos(&self) -> Self::Pos {
        (self.model.len(), self.tool.len(), self.denied.len())
    }

    fn tail(&self) -> Self {
        Self::default()
    }

    fn splice(&mut self, tail: Self, from: Self::Pos, first: u64, base: u64) {
        self.model.extend(
            tail.model
                .into_iter()
                .skip(from.0)
                .map(|(i, s)| (base + i.saturating_sub(first), s)),
        );
        self.tool.extend(tail.tool.into_iter().skip(from.1));
        self.denied.extend(tail.denied.into_iter().skip(from.2));
    }
}

/// What closed spans add up to (kept by the fold, so no sink has to).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Totals {
    model_ms: i64,
    tool_ms: i64,
    /// The model calls' time, overlaps once ([`cover`]); `model_until` its end so far.
    #[serde(default)]
    model_union_ms: i64,
    #[serde(default)]
    model_until: i64,
    /// The model calls' and tools' time, overlaps once; `busy_until` its end so far.
    #[serde(default)]
    busy_ms: i64,
    #[serde(default)]
    busy_until: i64,
    /// Time between turns.
    #[serde(default)]
    idle_ms: i64,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    tool_spans: u64,
    denied_spans: u64,
    failed: u64,
}

impl Totals {
    /// `self + (tail - mark)`: what a tail added after its mark, on top of this.
    fn plus_since(self, tail: Totals, mark: Totals) -> Totals {
        let d = |a: u64, b: u64, c: u64| a.wrapping_add(b.wrapping_sub(c));
        Totals {
            model_ms: self
                .model_ms
                .wrapping_add(tail.model_ms.wrapping_sub(mark.model_ms)),
            tool_ms: self
                .tool_ms
                .wrapping_add(tail.tool_ms.wrapping_sub(mark.tool_ms)),
            // A span across the split counts in both parts: the unions are sums of parts.
            model_union_ms: self
                .model_union_ms
                .wrapping_add(tail.model_union_ms.wrapping_sub(mark.model_union_ms)),
            model_until: self.model_until.max(tail.model_until),
            busy_ms: self
                .busy_ms
                .wrapping_add(tail.busy_ms.wrapping_sub(mark.busy_ms)),
            busy_until: self.busy_until.max(tail.busy_until),
            idle_ms: self
                .idle_ms
                .wrapping_add(tail.idle_ms.wrapping_sub(mark.idle_ms)),
            input_tokens: d(self.input_tokens, tail.input_tokens, mark.input_tokens),
            output_tokens: d(self.output_tokens, tail.output_tokens, mark.output_tokens),
            cache_read_tokens: d(
                self.cache_read_tokens,
                tail.cache_read_tokens,
                mark.cache_read_tokens,
            ),
            tool_spans: d(self.tool_spans, tail.tool_spans, mark.tool_spans),
            denied_spans: d(self.denied_spans, tail.denied_spans, mark.denied_spans),
            failed: d(self.failed, tail.failed, mark.failed),
        }
    }
}

/// Folds events into a [`Trace`], handing each span to a [`SpanSink`] as it closes.
#[derive(Debug, Clone)]
pub struct TraceBuilder<S: SpanSink = Spans> {
    session_id: String,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    /// The index the next model span gets.
    next_model: u64,
    /// Unterminated requests with their indices, oldest first.
    open: Vec<(u64, ModelSpan)>,
    /// Pending tool calls by call id (or by tool name when the log has no call ids).
    pending: HashMap<String, (i64, Value)>,
    sink: S,
    totals: Totals,
    /// Provider and model of the first model span (the waterfall's header).
    first_model: Option<(String, String)>,
    redirects: u64,
    redirects_skipped: u64,
    /// Events folded.
    seen: u64,
    /// A tail fold's marks (line starts with nothing open or pending), by offset.
    marks: Option<Vec<(u64, TraceMark<S>)>>,
    /// A tail fold: provider and model of the first span opened after a mark, by its index.
    firsts: Vec<(u64, String, String)>,
    /// A turn started as the fold's first event, nothing before it: when (a tail fold's
    /// idle time before it is the head's to count, at the splice).
    lead_turn: Option<i64>,
}

/// What a tail trace fold had produced at a mark.
#[derive(Debug)]
struct TraceMark<S: SpanSink> {
    next_model: u64,
    sink: S::Pos,
    totals: Totals,
    redirects: u64,
    redirects_skipped: u64,
    seen: u64,
}

impl<S: SpanSink> Clone for TraceMark<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: SpanSink> Copy for TraceMark<S> {}

/// Everything a trace fold holds but its sink and a tail's marks: saved at the end of a read so
/// that a later read of the same log goes on from there ([`TraceBuilder::state`],
/// [`TraceBuilder::resume`]). Open requests and pending calls are the only parts that grow,
/// and only with what is open at once.
#[derive(Serialize, Deserialize)]
struct TraceState {
    v: u32,
    session_id: String,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    next_model: u64,
    open: Vec<(u64, ModelSpan)>,
    pending: Vec<(String, i64, Value)>,
    totals: Totals,
    first_model: Option<(String, String)>,
    redirects: u64,
    redirects_skipped: u64,
    seen: u64,
}

/// The version of [`TraceState`]: a saved state of another version is not taken up (2: the
/// totals hold the unions behind [`TimeShares`]).
const TRACE_STATE_VERSION: u32 = 2;

/// A finished fold without its closed spans (those are in the sink): the [`Trace`] with empty
/// span lists, and what is needed to write the spans and the waterfall's summary.
#[derive(Debug, Clone)]
pub struct TraceParts {
    /// Every scalar of the trace; `model_spans`, `tool_spans` and `denied_spans` are empty.
    pub trace: Trace,
    /// The spans still open at the end (aged: `hung` or `in_flight`), with their indices in
    /// index order.
    pub open: Vec<(u64, ModelSpan)>,
    /// How many model, tool and denied spans the trace has.
    pub model_spans: u64,
    /// See `model_spans`.
    pub tool_spans: u64,
    /// See `model_spans`.
    pub denied_spans: u64,
    /// Model spans with status `error`.
    pub failed: u64,
    /// Provider and model of the first model span.
    pub first_model: Option<(String, String)>,
}

fn pending_key(call_id: Option<&str>, tool: &str) -> String {
    match call_id {
        Some(c) => format!("id:{c}"),
        None => format!("tool:{tool}"),
    }
}

impl TraceBuilder {
    /// A fold for the log of `session_id`, spans kept in memory.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self::with_sink(session_id, Spans::default())
    }

    /// The trace as of `now` (ms); `None` ages open requests against the last event, as the
    /// original does. Open requests are `hung` once open for [`HANG_THRESHOLD_MS`].
    pub fn snapshot(&self, now: Option<i64>) -> Trace {
        self.clone().finish(now)
    }

    /// Consumes the fold (no copy of the spans); see [`TraceBuilder::snapshot`].
    pub fn finish(self, now: Option<i64>) -> Trace {
        let (parts, spans) = self.finish_parts(now);
        let mut trace = parts.trace;
        let mut model = spans.model;
        model.extend(parts.open);
        if !model.is_sorted_by_key(|(i, _)| *i) {
            model.sort_by_key(|(i, _)| *i);
        }
        trace.model_spans = model.into_iter().map(|(_, s)| s).collect();
        trace.tool_spans = spans.tool;
        trace.denied_spans = spans.denied;
        trace
    }
}

impl<S: SpanSink> TraceBuilder<S> {
    /// A fold for the log of `session_id` that hands closed spans to `sink`.
    pub fn with_sink(session_id: impl Into<String>, sink: S) -> Self {
        Self {
            session_id: session_id.into(),
            first_ts: None,
            last_ts: None,
            next_model: 0,
            open: Vec::new(),
            pending: HashMap::new(),
            sink,
            totals: Totals {
                model_until: i64::MIN,
                busy_until: i64::MIN,
                ..Totals::default()
            },
            lead_turn: None,
            first_model: None,
            redirects: 0,
            redirects_skipped: 0,
            seen: 0,
            marks: None,
            firsts: Vec::new(),
        }
    }

    /// The open span a terminating event belongs to: same turn id first, else the oldest.
    fn take_open(&mut self, turn_id: &str) -> Option<usize> {
        self.open
            .iter()
            .position(|(_, s)| s.turn_id == turn_id)
            .or(if self.open.is_empty() { None } else { Some(0) })
    }

    /// Closes the open span at `pos` into the sink.
    fn close(&mut self, pos: usize, update: impl FnOnce(&mut ModelSpan)) {
        let (index, mut s) = self.open.remove(pos);
        update(&mut s);
        let t = &mut self.totals;
        t.model_ms = t.model_ms.wrapping_add(s.duration_ms);
        let end = s.started_at.saturating_add(s.duration_ms.max(0));
        cover(&mut t.model_union_ms, &mut t.model_until, s.started_at, end);
        cover(&mut t.busy_ms, &mut t.busy_until, s.started_at, end);
        t.input_tokens = t.input_tokens.wrapping_add(s.input_tokens.unwrap_or(0));
        t.output_tokens = t.output_tokens.wrapping_add(s.output_tokens.unwrap_or(0));
        t.cache_read_tokens = t
            .cache_read_tokens
            .wrapping_add(s.cache_read_tokens.unwrap_or(0));
        if s.status == SpanStatus::Error {
            t.failed += 1;
        }
        self.sink.model(index, s);
    }

    /// Folds one event.
    pub fn apply(&mut self, ev: &Event) {
        self.apply_view(&EventView::of(ev));
    }

    /// Folds one event read as a borrowed view (what the log reader gives).
    pub fn apply_view(&mut self, ev: &EventView<'_>) {
        self.seen += 1;
        self.first_ts.get_or_insert(ev.timestamp);
        // A turn starting with nothing open: the time since the last event was the user's.
        if ev.ty == EventType::TurnStarted && self.open.is_empty() && self.pending.is_empty() {
            match self.last_ts {
                Some(prev) => {
                    let t = &mut self.totals;
                    let from = prev.max(t.busy_until);
                    if ev.timestamp > from {
                        t.idle_ms = t.idle_ms.wrapping_add(ev.timestamp - from);
                    }
                }
                None => self.lead_turn = Some(ev.timestamp),
            }
        }
        self.last_ts = Some(ev.timestamp);
        match ev.ty {
            EventType::ModelRequest => {
                let index = self.next_model;
                self.next_model += 1;
                if index == 0 {
                    self.first_model = Some((ev.provider.to_owned(), ev.model.to_owned()));
                }
                if let Some(marks) = &self.marks
                    && marks.last().is_some_and(|(_, m)| m.next_model == index)
                    && self.firsts.last().is_none_or(|f| f.0 < index)
                {
                    self.firsts
                        .push((index, ev.provider.to_owned(), ev.model.to_owned()));
                }
                self.open.push((
                    index,
                    ModelSpan {
                        turn_id: ev.turn_id.to_owned(),
                        provider: ev.provider.to_owned(),
                        model: ev.model.to_owned(),
                        started_at: ev.timestamp,
                        status: SpanStatus::InFlight,
                        duration_ms: 0,
                        message_count: ev.message_count,
                        tool_count: ev.tool_count,
                        prompt_chars: ev.prompt_chars,
                        tool_calls: Vec::new(),
                        ttft_ms: None,
                        input_tokens: None,
                        output_tokens: None,
                        cache_read_tokens: None,
                        cache_write_tokens: None,
                        error_kind: None,
                        error: None,
                    },
                ));
            }
            EventType::ModelFirstToken => {
                if let Some(pos) = self.take_open(ev.turn_id) {
                    self.open[pos].1.ttft_ms = Some(ev.ttft_ms.unwrap_or(0));
                }
            }
            EventType::ModelResponse => {
                if let Some(pos) = self.take_open(ev.turn_id) {
                    self.close(pos, |s| {
                        s.status = SpanStatus::Ok;
                        s.duration_ms = ev.duration_ms;
                        s.ttft_ms = ev.ttft_ms.or(s.ttft_ms);
                        s.input_tokens = ev.input_tokens;
                        s.output_tokens = ev.output_tokens;
                        s.cache_read_tokens = ev.cache_read_tokens;
                        s.cache_write_tokens = ev.cache_write_tokens;
                        s.tool_calls = ev.tool_calls.to_vec();
                    });
                }
            }
            EventType::ModelError => {
                if let Some(pos) = self.take_open(ev.turn_id) {
                    self.close(pos, |s| {
                        s.status = SpanStatus::Error;
                        s.duration_ms = ev.duration_ms;
                        s.error_kind = Some(ev.model_error_kind().as_str().to_owned());
                        s.error = Some(ev.error.to_owned());
                    });
                }
            }
            EventType::FunctionCall => {
                let args = ev.args.map_or(Value::Null, |a| a.to_value());
                self.pending
                    .insert(pending_key(ev.call_id, ev.tool), (ev.timestamp, args));
            }
            EventType::FunctionOutput => {
                let pending = self.pending.remove(&pending_key(ev.call_id, ev.tool));
                self.totals.tool_ms = self.totals.tool_ms.wrapping_add(ev.duration_ms);
                self.totals.tool_spans += 1;
                let started_at = pending.as_ref().map_or(ev.timestamp, |p| p.0);
                let t = &mut self.totals;
                cover(
                    &mut t.busy_ms,
                    &mut t.busy_until,
                    started_at,
                    started_at.saturating_add(ev.duration_ms.max(0)),
                );
                self.sink.tool(ToolSpan {
                    tool: ev.tool.to_owned(),
                    started_at,
                    duration_ms: ev.duration_ms,
                    args: pending.map(|p| p.1),
                    failed: ev.failed,
                });
            }
            EventType::FunctionDenied => {
                self.totals.denied_spans += 1;
                self.sink.denied(DeniedSpan {
                    tool: ev.tool.to_owned(),
                    at: ev.timestamp,
                    args: Some(ev.args.map_or(Value::Null, |a| a.to_value())),
                    source: ev.deny_source(),
                    reason: ev.reason.to_owned(),
                });
            }
            EventType::RedirectTriggered => self.redirects += 1,
            EventType::RedirectSkipped => self.redirects_skipped += 1,
            EventType::TurnStarted
            | EventType::TurnAborted
            | EventType::CompactOccurred
            | EventType::SubagentStart
            | EventType::SubagentStop
            | EventType::SkillInvoked
            | EventType::HookTriggered
            | EventType::HookBlocked
            | EventType::ContextOverflow
            | EventType::ParseError => {}
        }
        // Nothing open or pending: what came before overlaps nothing after it. The unions
        // start over here, so a fold split at such a line (a mark) counts as one read does.
        if self.open.is_empty() && self.pending.is_empty() {
            self.totals.model_until = i64::MIN;
            self.totals.busy_until = i64::MIN;
        }
    }

    /// The last event's timestamp, if any.
    pub fn last_timestamp(&self) -> Option<i64> {
        self.last_ts
    }

    /// Whether nothing is open or pending: a fold started empty here goes on as this one.
    fn is_clean(&self) -> bool {
        self.open.is_empty() && self.pending.is_empty()
    }

    /// Whether a request is open (its span ends as in flight or hung).
    pub fn has_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// The fold's state without its sink, as bytes (JSON): what [`TraceBuilder::resume`]
    /// takes up. A tail fold (of a split read) has no state worth saving: `None`.
    pub fn state(&self) -> Option<Vec<u8>> {
        if self.marks.is_some() {
            return None;
        }
        let mut pending: Vec<(String, i64, Value)> = self
            .pending
            .iter()
            .map(|(k, (t, v))| (k.clone(), *t, v.clone()))
            .collect();
        pending.sort_by(|a, b| a.0.cmp(&b.0));
        let state = TraceState {
            v: TRACE_STATE_VERSION,
            session_id: self.session_id.clone(),
            first_ts: self.first_ts,
            last_ts: self.last_ts,
            next_model: self.next_model,
            open: self.open.clone(),
            pending,
            totals: self.totals,
            first_model: self.first_model.clone(),
            redirects: self.redirects,
            redirects_skipped: self.redirects_skipped,
            seen: self.seen,
        };
        serde_json::to_vec(&state).ok()
    }

    /// The fold of session `session_id` as it stood when [`TraceBuilder::state`] saved
    /// `state`, its closed spans in `sink` (which must hold exactly those the saved fold had
    /// handed out): the same fold, so folding the rest of the log gives the answer of one
    /// read. `None` when `state` does not read, is of another version or of another session.
    pub fn resume(session_id: &str, state: &[u8], sink: S) -> Option<Self> {
        let st: TraceState = serde_json::from_slice(state).ok()?;
        if st.v != TRACE_STATE_VERSION || st.session_id != session_id {
            return None;
        }
        Some(Self {
            session_id: st.session_id,
            first_ts: st.first_ts,
            last_ts: st.last_ts,
            next_model: st.next_model,
            open: st.open,
            pending: st
                .pending
                .into_iter()
                .map(|(k, t, v)| (k, (t, v)))
                .collect(),
            sink,
            totals: st.totals,
            first_model: st.first_model,
            redirects: st.redirects,
            redirects_skipped: st.redirects_skipped,
            seen: st.seen,
            marks: None,
            firsts: Vec::new(),
            lead_turn: None,
        })
    }

    /// The sink, to bring what it holds up to date where it lives (a checkpoint's spools).
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Ends the fold as of `now` (see [`TraceBuilder::snapshot`]): the trace without its
    /// closed spans, and the sink that holds them.
    pub fn finish_parts(self, now: Option<i64>) -> (TraceParts, S) {
        let started_at = self.first_ts.unwrap_or(0);
        let ended_at = self.last_ts.unwrap_or(started_at);
        let abandoned = !self.open.is_empty()
            && now.is_some_and(|n| n.saturating_sub(ended_at) >= ABANDONED_AFTER_MS);
        let as_of = if abandoned {
            ended_at
        } else {
            now.unwrap_or(ended_at)
        };
        let mut open = self.open;
        let (mut hung, mut in_flight) = (false, false);
        let mut model_ms = self.totals.model_ms;
        let mut unions = self.totals;
        for (_, s) in &mut open {
            s.duration_ms = (as_of - s.started_at).max(0);
            model_ms = model_ms.wrapping_add(s.duration_ms);
            let u = &mut unions;
            cover(
                &mut u.model_union_ms,
                &mut u.model_until,
                s.started_at,
                as_of,
            );
            cover(&mut u.busy_ms, &mut u.busy_until, s.started_at, as_of);
            if abandoned || s.duration_ms >= HANG_THRESHOLD_MS {
                s.status = SpanStatus::Hung;
                hung = true;
            } else {
                s.status = SpanStatus::InFlight;
                in_flight = true;
            }
        }
        open.sort_by_key(|(i, _)| *i);
        let t = self.totals;
        let wall_ms = (as_of - started_at).max(0);
        let trace = Trace {
            session_id: self.session_id,
            started_at,
            ended_at,
            wall_ms,
            time: TimeShares::of(
                wall_ms,
                unions.model_union_ms,
                unions.busy_ms,
                unions.idle_ms,
            ),
            model_ms,
            tool_ms: t.tool_ms,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cache_read_tokens: t.cache_read_tokens,
            model_spans: Vec::new(),
            tool_spans: Vec::new(),
            denied_spans: Vec::new(),
            hung,
            in_flight,
            abandoned,
            redirects: self.redirects,
            redirects_skipped: self.redirects_skipped,
        };
        let parts = TraceParts {
            trace,
            open,
            model_spans: self.next_model,
            tool_spans: t.tool_spans,
            denied_spans: t.denied_spans,
            failed: t.failed,
            first_model: self.first_model,
        };
        (parts, self.sink)
    }
}

impl<S: SpanSink> SplitFold for TraceBuilder<S> {
    fn tail(&self) -> Self {
        let mut t = Self::with_sink(self.session_id.clone(), self.sink.tail());
        t.marks = Some(Vec::new());
        t
    }

    fn apply_view(&mut self, ev: &EventView<'_>) {
        TraceBuilder::apply_view(self, ev);
    }

    fn boundary(&mut self, offset: u64) {
        let clean = self.is_clean();
        let mark = TraceMark::<S> {
            next_model: self.next_model,
            sink: self.sink.pos(),
            totals: self.totals,
            redirects: self.redirects,
            redirects_skipped: self.redirects_skipped,
            seen: self.seen,
        };
        if let Some(marks) = &mut self.marks
            && clean
            && marks.len() < MAX_MARKS
            && marks.last().is_none_or(|(o, _)| *o < offset)
        {
            marks.push((offset, mark));
        }
    }

    fn can_splice(&self, tail: &Self, offset: u64) -> bool {
        self.is_clean()
            && self.first_ts.is_some()
            && tail
                .marks
                .as_deref()
                .and_then(|m| find_mark(m, offset))
                .is_some()
    }

    fn splice(&mut self, tail: Self, offset: u64) {
        let Some(m) = tail
            .marks
            .as_deref()
            .and_then(|m| find_mark(m, offset))
            .copied()
        else {
            return;
        };
        let base = self.next_model;
        // A tail whose first event starts a turn: the pause before it, which only the head
        // can see (nothing is open at a mark, so the head's unions are over too).
        if m.seen == 0
            && let (Some(lead), Some(prev)) = (tail.lead_turn, self.last_ts)
            && lead > prev
        {
            self.totals.idle_ms = self.totals.idle_ms.wrapping_add(lead - prev);
        }
        if tail.seen > m.seen {
            self.last_ts = tail.last_ts;
        }
        self.seen += tail.seen.saturating_sub(m.seen);
        if self.first_model.is_none()
            && let Ok(i) = tail.firsts.binary_search_by_key(&m.next_model, |f| f.0)
            && let Some((_, provider, model)) = tail.firsts.get(i)
        {
            self.first_model = Some((provider.clone(), model.clone()));
        }
        self.next_model = base + tail.next_model.saturating_sub(m.next_model);
        self.open.extend(
            tail.open
                .into_iter()
                .map(|(i, s)| (base + i.saturating_sub(m.next_model), s)),
        );
        self.pending.extend(tail.pending);
        self.totals = self.totals.plus_since(tail.totals, m.totals);
        self.sink.splice(tail.sink, m.sink, m.next_model, base);
        self.redirects += tail.redirects.saturating_sub(m.redirects);
        self.redirects_skipped += tail.redirects_skipped.saturating_sub(m.redirects_skipped);
    }
}

/// Folds a whole event list.
pub fn build_trace<'a>(
    session_id: &str,
    events: impl IntoIterator<Item = &'a Event>,
    now: Option<i64>,
) -> Trace {
    let mut b = TraceBuilder::new(session_id);
    for e in events {
        b.apply(e);
    }
    b.finish(now)
}

#[cfg(test)]
mod tests;
