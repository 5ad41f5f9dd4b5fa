//! The trace fold (SPEC §13.2): model spans, tool spans and denied spans, with the time
//! attribution and hang detection `freecode trace` renders.
//!
//! Pure and streaming: [`TraceBuilder::apply`] takes events one at a time (memory grows with the
//! number of spans, never with the log), and [`TraceBuilder::snapshot`] ages open requests
//! against any `now` without re-reading anything — what `--follow` needs.
//!
//! Differences from the original, all deliberate: tool calls pair on `callId` when the log has
//! it (parallel calls of one tool no longer overwrite each other, SPEC §19.33); spans carry
//! `cacheWriteTokens`, tool `args` and `failed`, and denied spans and redirect counts exist (the
//! 19-event schema).

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::event::{DenySource, Event};
use super::split::{MAX_MARKS, SplitFold, find_mark};
use super::view::{EventType, EventView};

/// A request open this long (ms) with no response and no error is hung.
pub const HANG_THRESHOLD_MS: i64 = 300_000;

/// A log silent this long (ms) past its last event, with requests still open, was left by a
/// process that is gone: those requests never closed, and nothing is timed past the last event
/// (an old crashed session would otherwise show months of "hung" time counted to now).
pub const ABANDONED_AFTER_MS: i64 = 86_400_000;

/// Where a span stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
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
}

/// Folds events into a [`Trace`].
#[derive(Debug, Clone, Default)]
pub struct TraceBuilder {
    session_id: String,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    model_spans: Vec<ModelSpan>,
    /// Indices into `model_spans` of unterminated requests, oldest first.
    open: Vec<usize>,
    /// Pending tool calls by call id (or by tool name when the log has no call ids).
    pending: HashMap<String, (i64, Value)>,
    tool_spans: Vec<ToolSpan>,
    denied_spans: Vec<DeniedSpan>,
    redirects: u64,
    redirects_skipped: u64,
    /// Events folded.
    seen: u64,
    /// A tail fold's marks (line starts with nothing open or pending), by offset.
    marks: Option<Vec<(u64, TraceMark)>>,
}

/// What a tail trace fold had produced at a mark.
#[derive(Debug, Clone, Copy)]
struct TraceMark {
    model_spans: usize,
    tool_spans: usize,
    denied_spans: usize,
    redirects: u64,
    redirects_skipped: u64,
    seen: u64,
}

fn pending_key(call_id: Option<&str>, tool: &str) -> String {
    match call_id {
        Some(c) => format!("id:{c}"),
        None => format!("tool:{tool}"),
    }
}

impl TraceBuilder {
    /// A fold for the log of `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            ..Self::default()
        }
    }

    /// The open span a terminating event belongs to: same turn id first, else the oldest.
    fn take_open(&mut self, turn_id: &str, remove: bool) -> Option<usize> {
        let pos = self
            .open
            .iter()
            .position(|&i| self.model_spans[i].turn_id == turn_id)
            .or(if self.open.is_empty() { None } else { Some(0) })?;
        Some(if remove {
            self.open.remove(pos)
        } else {
            self.open[pos]
        })
    }

    /// Folds one event.
    pub fn apply(&mut self, ev: &Event) {
        self.apply_view(&EventView::of(ev));
    }

    /// Folds one event read as a borrowed view (what the log reader gives).
    pub fn apply_view(&mut self, ev: &EventView<'_>) {
        self.seen += 1;
        self.first_ts.get_or_insert(ev.timestamp);
        self.last_ts = Some(ev.timestamp);
        match ev.ty {
            EventType::ModelRequest => {
                self.open.push(self.model_spans.len());
                self.model_spans.push(ModelSpan {
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
                });
            }
            EventType::ModelFirstToken => {
                if let Some(i) = self.take_open(ev.turn_id, false) {
                    self.model_spans[i].ttft_ms = Some(ev.ttft_ms.unwrap_or(0));
                }
            }
            EventType::ModelResponse => {
                if let Some(i) = self.take_open(ev.turn_id, true) {
                    let s = &mut self.model_spans[i];
                    s.status = SpanStatus::Ok;
                    s.duration_ms = ev.duration_ms;
                    s.ttft_ms = ev.ttft_ms.or(s.ttft_ms);
                    s.input_tokens = ev.input_tokens;
                    s.output_tokens = ev.output_tokens;
                    s.cache_read_tokens = ev.cache_read_tokens;
                    s.cache_write_tokens = ev.cache_write_tokens;
                    s.tool_calls = ev.tool_calls.to_vec();
                }
            }
            EventType::ModelError => {
                if let Some(i) = self.take_open(ev.turn_id, true) {
                    let s = &mut self.model_spans[i];
                    s.status = SpanStatus::Error;
                    s.duration_ms = ev.duration_ms;
                    s.error_kind = Some(ev.model_error_kind().as_str().to_owned());
                    s.error = Some(ev.error.to_owned());
                }
            }
            EventType::FunctionCall => {
                let args = ev.args.map_or(Value::Null, |a| a.to_value());
                self.pending
                    .insert(pending_key(ev.call_id, ev.tool), (ev.timestamp, args));
            }
            EventType::FunctionOutput => {
                let pending = self.pending.remove(&pending_key(ev.call_id, ev.tool));
                self.tool_spans.push(ToolSpan {
                    tool: ev.tool.to_owned(),
                    started_at: pending.as_ref().map_or(ev.timestamp, |p| p.0),
                    duration_ms: ev.duration_ms,
                    args: pending.map(|p| p.1),
                    failed: ev.failed,
                });
            }
            EventType::FunctionDenied => self.denied_spans.push(DeniedSpan {
                tool: ev.tool.to_owned(),
                at: ev.timestamp,
                args: Some(ev.args.map_or(Value::Null, |a| a.to_value())),
                source: ev.deny_source(),
                reason: ev.reason.to_owned(),
            }),
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

    /// The trace as of `now` (ms); `None` ages open requests against the last event, as the
    /// original does. Open requests are `hung` once open for [`HANG_THRESHOLD_MS`].
    pub fn snapshot(&self, now: Option<i64>) -> Trace {
        self.clone().finish(now)
    }

    /// Consumes the fold (no copy of the spans); see [`TraceBuilder::snapshot`].
    pub fn finish(self, now: Option<i64>) -> Trace {
        let started_at = self.first_ts.unwrap_or(0);
        let ended_at = self.last_ts.unwrap_or(started_at);
        let abandoned = !self.open.is_empty()
            && now.is_some_and(|n| n.saturating_sub(ended_at) >= ABANDONED_AFTER_MS);
        let as_of = if abandoned {
            ended_at
        } else {
            now.unwrap_or(ended_at)
        };
        let mut spans = self.model_spans;
        let (mut hung, mut in_flight) = (false, false);
        for &i in &self.open {
            let s = &mut spans[i];
            s.duration_ms = (as_of - s.started_at).max(0);
            if abandoned || s.duration_ms >= HANG_THRESHOLD_MS {
                s.status = SpanStatus::Hung;
                hung = true;
            } else {
                s.status = SpanStatus::InFlight;
                in_flight = true;
            }
        }
        let sum =
            |f: fn(&ModelSpan) -> Option<u64>| spans.iter().map(|s| f(s).unwrap_or(0)).sum::<u64>();
        Trace {
            session_id: self.session_id,
            started_at,
            ended_at,
            wall_ms: (as_of - started_at).max(0),
            model_ms: spans.iter().map(|s| s.duration_ms).sum(),
            tool_ms: self.tool_spans.iter().map(|s| s.duration_ms).sum(),
            input_tokens: sum(|s| s.input_tokens),
            output_tokens: sum(|s| s.output_tokens),
            cache_read_tokens: sum(|s| s.cache_read_tokens),
            model_spans: spans,
            tool_spans: self.tool_spans,
            denied_spans: self.denied_spans,
            hung,
            in_flight,
            abandoned,
            redirects: self.redirects,
            redirects_skipped: self.redirects_skipped,
        }
    }
}

impl SplitFold for TraceBuilder {
    fn tail(&self) -> Self {
        Self {
            session_id: self.session_id.clone(),
            marks: Some(Vec::new()),
            ..Self::default()
        }
    }

    fn apply_view(&mut self, ev: &EventView<'_>) {
        TraceBuilder::apply_view(self, ev);
    }

    fn boundary(&mut self, offset: u64) {
        let clean = self.is_clean();
        let mark = TraceMark {
            model_spans: self.model_spans.len(),
            tool_spans: self.tool_spans.len(),
            denied_spans: self.denied_spans.len(),
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
        let base = self.model_spans.len();
        if tail.seen > m.seen {
            self.last_ts = tail.last_ts;
        }
        self.seen += tail.seen.saturating_sub(m.seen);
        self.model_spans
            .extend(tail.model_spans.into_iter().skip(m.model_spans));
        self.open.extend(
            tail.open
                .iter()
                .map(|&i| i.saturating_sub(m.model_spans) + base),
        );
        self.pending.extend(tail.pending);
        self.tool_spans
            .extend(tail.tool_spans.into_iter().skip(m.tool_spans));
        self.denied_spans
            .extend(tail.denied_spans.into_iter().skip(m.denied_spans));
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
