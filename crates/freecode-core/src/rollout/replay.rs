//! The replay fold (SPEC §13.1): turns with their tool calls, outputs and durations, compaction
//! totals, denied calls, redirects and parse errors.
//!
//! Pure and streaming. Fixes over the original: a repeated turn id (the original restarts at
//! `turn-0` for every loop) starts a new turn instead of replacing the earlier one and listing the
//! later twice (SPEC §19.29); outputs pair with calls on `callId` when present (§19.33); denied
//! calls are listed per turn, never as calls.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::event::{DenySource, Event};
use super::split::{MAX_MARKS, SplitFold, find_mark};
use super::view::{EventType, EventView};

/// One tool call in a turn.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ReplayCall {
    pub tool: String,
    pub args: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// A refused call.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[allow(missing_docs)]
pub struct ReplayDenied {
    pub tool: String,
    pub args: Value,
    pub source: DenySource,
    pub reason: String,
}

/// One turn.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ReplayTurn {
    pub turn_id: String,
    pub started_at: i64,
    pub calls: Vec<ReplayCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<ReplayDenied>,
}

/// A line of the log that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[allow(missing_docs)]
pub struct SkippedLine {
    pub line: u64,
    pub offset: u64,
    pub reason: String,
}

/// The replay of one log.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Replay {
    pub session_id: String,
    pub total_turns: u64,
    pub total_calls: u64,
    pub total_tokens_before: u64,
    pub total_tokens_after: u64,
    pub turns: Vec<ReplayTurn>,
    pub compact_count: u64,
    /// `"<parser>: <error>"` of every `parse.error`.
    pub errors: Vec<String>,
    pub total_denied: u64,
    pub redirects: u64,
    pub redirects_skipped: u64,
    /// Events of types this version does not know.
    pub unknown_events: u64,
    /// Lines that were not events, with line numbers.
    pub skipped_lines: Vec<SkippedLine>,
}

/// Folds events into a [`Replay`].
#[derive(Debug, Clone)]
pub struct ReplayBuilder {
    r: Replay,
    latest: HashMap<String, usize>,
    /// A tail fold's marks (`turn.started` lines no later event looks behind), by offset.
    marks: Option<Vec<(u64, ReplayMark)>>,
    /// A tail fold: the offset of the line being folded.
    line: u64,
}

/// What a tail replay fold had produced at a mark.
#[derive(Debug, Clone, Copy)]
struct ReplayMark {
    turns: usize,
    total_turns: u64,
    total_calls: u64,
    total_tokens_before: u64,
    total_tokens_after: u64,
    compact_count: u64,
    errors: usize,
    total_denied: u64,
    redirects: u64,
    redirects_skipped: u64,
}

impl ReplayBuilder {
    /// A fold for the log of `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            r: Replay {
                session_id: session_id.into(),
                total_turns: 0,
                total_calls: 0,
                total_tokens_before: 0,
                total_tokens_after: 0,
                turns: Vec::new(),
                compact_count: 0,
                errors: Vec::new(),
                total_denied: 0,
                redirects: 0,
                redirects_skipped: 0,
                unknown_events: 0,
                skipped_lines: Vec::new(),
            },
            latest: HashMap::new(),
            marks: None,
            line: 0,
        }
    }

    fn turn(&mut self, turn_id: &str) -> Option<&mut ReplayTurn> {
        let i = self.latest.get(turn_id).copied();
        if let Some(marks) = &mut self.marks {
            // A mark after the turn this event refers to (or all, for none) is not one.
            while marks
                .last()
                .is_some_and(|(_, m)| i.is_none_or(|i| m.turns > i))
            {
                marks.pop();
            }
        }
        self.r.turns.get_mut(i?)
    }

    fn mark(&self) -> ReplayMark {
        let r = &self.r;
        ReplayMark {
            turns: r.turns.len(),
            total_turns: r.total_turns,
            total_calls: r.total_calls,
            total_tokens_before: r.total_tokens_before,
            total_tokens_after: r.total_tokens_after,
            compact_count: r.compact_count,
            errors: r.errors.len(),
            total_denied: r.total_denied,
            redirects: r.redirects,
            redirects_skipped: r.redirects_skipped,
        }
    }

    /// Folds one event.
    pub fn apply(&mut self, ev: &Event) {
        self.apply_view(&EventView::of(ev));
    }

    /// Folds one event read as a borrowed view (what the log reader gives).
    pub fn apply_view(&mut self, ev: &EventView<'_>) {
        let args = || ev.args.map_or(Value::Null, |a| a.to_value());
        match ev.ty {
            EventType::TurnStarted => {
                let (line, mark) = (self.line, self.mark());
                if let Some(marks) = &mut self.marks
                    && marks.len() < MAX_MARKS
                    && marks.last().is_none_or(|(o, _)| *o < line)
                {
                    marks.push((line, mark));
                }
                self.latest
                    .insert(ev.turn_id.to_owned(), self.r.turns.len());
                self.r.turns.push(ReplayTurn {
                    turn_id: ev.turn_id.to_owned(),
                    started_at: ev.timestamp,
                    calls: Vec::new(),
                    denied: Vec::new(),
                });
                self.r.total_turns += 1;
            }
            EventType::FunctionCall => {
                if let Some(t) = self.turn(ev.turn_id) {
                    t.calls.push(ReplayCall {
                        tool: ev.tool.to_owned(),
                        args: args(),
                        output: None,
                        duration_ms: None,
                        failed: None,
                        call_id: ev.call_id.map(str::to_owned),
                    });
                    self.r.total_calls += 1;
                }
            }
            EventType::FunctionOutput => {
                if let Some(t) = self.turn(ev.turn_id) {
                    let call = t.calls.iter_mut().find(|c| {
                        c.output.is_none()
                            && match ev.call_id {
                                Some(id) => c.call_id.as_deref() == Some(id),
                                None => c.tool == ev.tool,
                            }
                    });
                    if let Some(c) = call {
                        c.output = Some(ev.output.map(|o| o.to_owned_string()).unwrap_or_default());
                        c.duration_ms = Some(ev.duration_ms);
                        c.failed = ev.failed;
                    }
                }
            }
            EventType::FunctionDenied => {
                self.r.total_denied += 1;
                if let Some(t) = self.turn(ev.turn_id) {
                    t.denied.push(ReplayDenied {
                        tool: ev.tool.to_owned(),
                        args: args(),
                        source: ev.deny_source(),
                        reason: ev.reason.to_owned(),
                    });
                }
            }
            EventType::CompactOccurred => {
                self.r.total_tokens_before += ev.before_tokens;
                self.r.total_tokens_after += ev.after_tokens;
                self.r.compact_count += 1;
            }
            EventType::ParseError => self.r.errors.push(format!("{}: {}", ev.parser, ev.error)),
            EventType::RedirectTriggered => self.r.redirects += 1,
            EventType::RedirectSkipped => self.r.redirects_skipped += 1,
            EventType::TurnAborted
            | EventType::SubagentStart
            | EventType::SubagentStop
            | EventType::SkillInvoked
            | EventType::HookTriggered
            | EventType::HookBlocked
            | EventType::ContextOverflow
            | EventType::ModelRequest
            | EventType::ModelFirstToken
            | EventType::ModelResponse
            | EventType::ModelError => {}
        }
    }

    /// Counts an event of an unknown type.
    pub fn unknown_event(&mut self) {
        self.r.unknown_events += 1;
    }

    /// Records a line that could not be read.
    pub fn skipped_line(&mut self, line: u64, offset: u64, reason: impl Into<String>) {
        self.r.skipped_lines.push(SkippedLine {
            line,
            offset,
            reason: reason.into(),
        });
    }

    /// The result.
    pub fn finish(self) -> Replay {
        self.r
    }
}

impl SplitFold for ReplayBuilder {
    fn tail(&self) -> Self {
        let mut t = Self::new(self.r.session_id.clone());
        t.marks = Some(Vec::new());
        t
    }

    fn apply_view(&mut self, ev: &EventView<'_>) {
        ReplayBuilder::apply_view(self, ev);
    }

    fn boundary(&mut self, offset: u64) {
        self.line = offset;
    }

    fn can_splice(&self, tail: &Self, offset: u64) -> bool {
        tail.marks
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
        let base = self.r.turns.len();
        for (id, i) in tail.latest {
            if i >= m.turns {
                self.latest.insert(id, i - m.turns + base);
            }
        }
        let (r, t) = (&mut self.r, tail.r);
        r.turns.extend(t.turns.into_iter().skip(m.turns));
        r.errors.extend(t.errors.into_iter().skip(m.errors));
        r.total_turns += t.total_turns.saturating_sub(m.total_turns);
        r.total_calls += t.total_calls.saturating_sub(m.total_calls);
        r.total_tokens_before += t.total_tokens_before.saturating_sub(m.total_tokens_before);
        r.total_tokens_after += t.total_tokens_after.saturating_sub(m.total_tokens_after);
        r.compact_count += t.compact_count.saturating_sub(m.compact_count);
        r.total_denied += t.total_denied.saturating_sub(m.total_denied);
        r.redirects += t.redirects.saturating_sub(m.redirects);
        r.redirects_skipped += t.redirects_skipped.saturating_sub(m.redirects_skipped);
    }
}

impl Replay {
    /// The original's `getSessionSummary` text (lines joined by `\n`).
    pub fn summary_text(&self) -> String {
        let mut lines = vec![
            format!("Session: {}", self.session_id),
            format!("Turns: {}", self.total_turns),
            format!("Tool Calls: {}", self.total_calls),
            format!("Compactions: {}", self.compact_count),
            String::new(),
        ];
        if !self.errors.is_empty() {
            lines.push(format!("Errors ({}):", self.errors.len()));
            lines.extend(self.errors.iter().take(5).map(|e| format!("  - {e}")));
            if self.errors.len() > 5 {
                lines.push(format!("  ... and {} more", self.errors.len() - 5));
            }
            lines.push(String::new());
        }
        if let Some(last) = self.turns.last() {
            lines.push("Last turn tools:".to_owned());
            lines.extend(last.calls.iter().take(5).map(|c| format!("  - {}", c.tool)));
        }
        lines.join("\n")
    }
}
