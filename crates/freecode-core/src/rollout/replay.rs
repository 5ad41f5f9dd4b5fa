//! The replay fold (SPEC §13.1): turns with their tool calls, outputs and durations, compaction
//! totals, denied calls, redirects and parse errors.
//!
//! Pure and streaming: the fold holds the latest [`WINDOW`] turns and hands older ones to a
//! [`TurnSink`] (in memory: [`Turns`]; `replay --json` writes them out), keeping a later event
//! for a turn handed out as a [`TurnPatch`] applied when the turns are written. Fixes over the original: a repeated turn id (the original restarts at
//! `turn-0` for every loop) starts a new turn instead of replacing the earlier one and listing the
//! later twice (SPEC §19.29); outputs pair with calls on `callId` when present (§19.33); denied
//! calls are listed per turn, never as calls.

use std::collections::HashMap;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::event::{DenySource, Event};
use super::split::{MAX_MARKS, SplitFold, find_mark};
use super::view::{EventType, EventView};
use crate::jsonw::{Emit, Layout, emit_object};

/// One tool call in a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[allow(missing_docs)]
pub struct ReplayDenied {
    pub tool: String,
    pub args: Value,
    pub source: DenySource,
    pub reason: String,
}

/// One turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ReplayTurn {
    pub turn_id: String,
    pub started_at: i64,
    pub calls: Vec<ReplayCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<ReplayDenied>,
}

// The turns written by hand (`jsonw`), as their `Serialize` writes them: `replay --json` prints
// every call's args and output (`tests/line_writer.rs` holds the two to the same bytes).

impl Emit for ReplayCall {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_object!(l;
            always "tool" => &self.tool,
            always "args" => &self.args,
            some "output" => &self.output,
            some "durationMs" => &self.duration_ms,
            some "failed" => &self.failed,
            some "callId" => &self.call_id,
        )
    }
}

impl Emit for ReplayDenied {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_object!(l;
            always "tool" => &self.tool,
            always "args" => &self.args,
            always "source" => &self.source,
            always "reason" => &self.reason,
        )
    }
}

impl Emit for ReplayTurn {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_object!(l;
            always "turnId" => &self.turn_id,
            always "startedAt" => &self.started_at,
            always "calls" => &self.calls,
            nonempty "denied" => &self.denied,
        )
    }
}

/// A line of the log that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[allow(missing_docs)]
pub struct SkippedLine {
    pub line: u64,
    pub offset: u64,
    pub reason: String,
}

/// The replay of one log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// What an event does to a turn: applied at once to a turn the fold still holds, or kept and
/// applied when the turns are written (to a turn already handed to the sink).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TurnPatch {
    /// A call made.
    Call(ReplayCall),
    /// An output for the first call without one that matches (`callId`, else the tool).
    Output {
        /// The output's `callId`.
        call_id: Option<String>,
        /// The output's tool.
        tool: String,
        /// The output.
        output: String,
        /// Its duration.
        duration_ms: i64,
        /// Whether it failed.
        failed: Option<bool>,
    },
    /// A call refused.
    Denied(ReplayDenied),
}

impl TurnPatch {
    /// Applies the change to `t`.
    pub fn apply(self, t: &mut ReplayTurn) {
        match self {
            TurnPatch::Call(c) => {
                // Most turns make one call: room for one first, not the four a push allots
                // (with 100,000 turns that was 38 MB more to fault in and free).
                if t.calls.capacity() == 0 {
                    t.calls.reserve_exact(1);
                }
                t.calls.push(c);
            }
            TurnPatch::Output {
                call_id,
                tool,
                output,
                duration_ms,
                failed,
            } => {
                let call = t.calls.iter_mut().find(|c| {
                    c.output.is_none()
                        && match &call_id {
                            Some(id) => c.call_id.as_deref() == Some(id),
                            None => c.tool == tool,
                        }
                });
                if let Some(c) = call {
                    c.output = Some(output);
                    c.duration_ms = Some(duration_ms);
                    c.failed = failed;
                }
            }
            TurnPatch::Denied(d) => t.denied.push(d),
        }
    }
}

/// Where a replay fold puts turns it no longer holds: once [`WINDOW`] newer turns have
/// started (a later event for one becomes a [`TurnPatch`]), and all of them at the end, in
/// index order.
pub trait TurnSink: Sized {
    /// A position in what the sink has taken in (a split fold's mark).
    type Pos: Copy + std::fmt::Debug;
    /// The turn at `index` (indices come in order, without gaps).
    fn turn(&mut self, index: u64, turn: ReplayTurn);
    /// Where the sink stands.
    fn pos(&self) -> Self::Pos;
    /// An empty sink of the same kind (for a split fold's tail).
    fn tail(&self) -> Self;
    /// Appends what `tail` took in after `from`, its indices plus `shift` (wrapping).
    fn splice(&mut self, tail: Self, from: Self::Pos, shift: u64);
    /// Keeps turn ids and their newest turns (`ids`, by turn index) where the sink keeps its
    /// turns, to be read back by [`TurnSink::kept_ids`], and says whether it did. A sink that
    /// keeps them (a fold checkpoint's) spares the fold's saved state a map that grows with
    /// every turn of the log; the default keeps none, and the state holds the map.
    fn keep_ids(&mut self, _ids: &[(&str, u64)]) -> bool {
        false
    }
    /// Every id [`TurnSink::keep_ids`] kept, in the order kept (a later entry of an id wins).
    fn kept_ids(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// Turns kept in memory (the default sink; index = position).
#[derive(Debug, Clone, Default)]
pub struct Turns(pub Vec<ReplayTurn>);

impl TurnSink for Turns {
    type Pos = usize;

    fn turn(&mut self, _index: u64, turn: ReplayTurn) {
        self.0.push(turn);
    }

    fn pos(&self) -> usize {
        self.0.len()
    }

    fn tail(&self) -> Self {
        Self::default()
    }

    fn splice(&mut self, tail: Self, from: usize, _shift: u64) {
        self.0.extend(tail.0.into_iter().skip(from));
    }
}

/// Turns a fold holds (the latest ones): a later event for an older turn is kept as a patch.
pub const WINDOW: usize = 64;

/// Folds events into a [`Replay`], handing turns to a [`TurnSink`] as newer ones start.
#[derive(Debug, Clone)]
pub struct ReplayBuilder<S: TurnSink = Turns> {
    /// Everything but the turns (`r.turns` stays empty).
    r: Replay,
    /// The turns held, from index `first` on.
    window: VecDeque<ReplayTurn>,
    first: u64,
    /// The index the next turn gets.
    next: u64,
    /// Changes to turns already handed out, in fold order.
    patches: Vec<(u64, TurnPatch)>,
    sink: S,
    /// Each turn id's newest turn (read with `older` under it: [`ReplayBuilder::newest`]).
    latest: HashMap<String, u64>,
    /// Each turn id's newest turn as earlier reads saved it, not read yet: JSON arrays of
    /// `[id, index]`, later entries winning, `latest` winning over all. A read taken up from
    /// a checkpoint looks into them only when an event refers to a turn it has not seen
    /// (rare: most refer to the newest turn), so taking up a fold of 100,000 turns does not
    /// build a map of 100,000 ids.
    older: Vec<Box<RawValue>>,
    /// Whether the ids of turns before `saved` are kept by the sink ([`TurnSink::keep_ids`])
    /// and not read yet; a save keeps there those of turns from `saved` on.
    ids_in_sink: bool,
    /// Turns before this index had their ids saved: in `older`, or by the sink when `older`
    /// is empty (0 once `older` was read into `latest`, which then holds them all).
    saved: u64,
    /// A tail fold's marks (`turn.started` lines no later event looks behind), by offset.
    marks: Option<Vec<(u64, ReplayMark<S>)>>,
    /// A tail fold: the offset of the line being folded.
    line: u64,
    /// How many turns are held ([`WINDOW`]).
    window_len: usize,
}

/// What a tail replay fold had produced at a mark.
#[derive(Debug)]
struct ReplayMark<S: TurnSink> {
    turns: u64,
    sink: S::Pos,
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

impl<S: TurnSink> Clone for ReplayMark<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: TurnSink> Copy for ReplayMark<S> {}

/// Everything a replay fold holds but its sink and a tail's marks: saved at the end of a read
/// so that a later read of the same log goes on from there ([`ReplayBuilder::state`],
/// [`ReplayBuilder::resume`]). `latest` (each turn id's newest turn) grows with the turns.
#[derive(Serialize, Deserialize)]
struct ReplayState {
    v: u32,
    r: Replay,
    window: VecDeque<ReplayTurn>,
    first: u64,
    next: u64,
    patches: Vec<(u64, TurnPatch)>,
    /// Each turn id's newest turn: arrays of `[id, index]`, later entries winning.
    latest: Vec<Box<RawValue>>,
    /// Whether the sink keeps the ids instead (`latest` is then empty).
    #[serde(default)]
    ids_in_sink: bool,
    window_len: usize,
}

/// Saved `latest` arrays kept unread up to this many; past it they are read and merged into one.
const OLDER_CHUNKS: usize = 8;

/// The `[id, index]` entries of saved arrays, newest first (so the first of an id wins).
fn read_older(chunks: &[Box<RawValue>]) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for c in chunks.iter().rev() {
        let Ok(mut v) = serde_json::from_str::<Vec<(String, u64)>>(c.get()) else {
            continue;
        };
        v.reverse();
        out.extend(v);
    }
    out
}

/// The version of [`ReplayState`]: a saved state of another version is not taken up.
const REPLAY_STATE_VERSION: u32 = 3;

impl ReplayBuilder {
    /// A fold for the log of `session_id`, turns kept in memory.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self::with_sink(session_id, Turns::default())
    }

    /// The result.
    pub fn finish(self) -> Replay {
        let (mut r, patches, Turns(mut turns)) = self.finish_parts();
        for (i, p) in patches {
            if let Some(t) = usize::try_from(i).ok().and_then(|i| turns.get_mut(i)) {
                p.apply(t);
            }
        }
        r.turns = turns;
        r
    }
}

impl<S: TurnSink> ReplayBuilder<S> {
    /// A fold for the log of `session_id` that hands turns to `sink`.
    pub fn with_sink(session_id: impl Into<String>, sink: S) -> Self {
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
            window: VecDeque::new(),
            first: 0,
            next: 0,
            patches: Vec::new(),
            sink,
            latest: HashMap::new(),
            older: Vec::new(),
            ids_in_sink: false,
            saved: 0,
            marks: None,
            line: 0,
            window_len: WINDOW,
        }
    }

    /// Holds `n` turns instead of [`WINDOW`] (0: every turn handed out as it starts, each
    /// later event a patch): the answer is the same, only memory and work differ.
    pub fn with_window(mut self, n: usize) -> Self {
        self.window_len = n;
        self
    }

    /// The index of the turn an event of `turn_id` refers to.
    fn turn(&mut self, turn_id: &str) -> Option<u64> {
        // Most events are for the newest turn, which is the latest with its id: no hashing.
        let i = match self.window.back() {
            Some(t) if t.turn_id == turn_id => Some(self.next - 1),
            _ => self.newest(turn_id),
        };
        if let Some(marks) = &mut self.marks {
            // A mark after the turn this event refers to (or all, for none) is not one.
            while marks
                .last()
                .is_some_and(|(_, m)| i.is_none_or(|i| m.turns > i))
            {
                marks.pop();
            }
        }
        i
    }

    /// The newest turn of id `turn_id`, from `latest`, else from `older` (read into `latest`
    /// once, the first time it is needed).
    fn newest(&mut self, turn_id: &str) -> Option<u64> {
        if let Some(i) = self.latest.get(turn_id) {
            return Some(*i);
        }
        if self.ids_in_sink {
            self.ids_in_sink = false;
            // Later entries win; `latest` (newer than all of them) over all.
            for (id, i) in self.sink.kept_ids() {
                if i < self.saved {
                    let e = self.latest.entry(id).or_insert(i);
                    if *e < self.saved {
                        *e = i;
                    }
                }
            }
            return self.latest.get(turn_id).copied();
        }
        if self.older.is_empty() {
            return None;
        }
        for (id, i) in read_older(&std::mem::take(&mut self.older)) {
            self.latest.entry(id).or_insert(i);
        }
        // `latest` now holds every id, none of them kept by the sink: a save gives it all.
        self.saved = 0;
        self.latest.get(turn_id).copied()
    }

    /// Applies `p` to turn `i` (held), or keeps it (handed out).
    fn patch(&mut self, i: u64, p: TurnPatch) {
        match i
            .checked_sub(self.first)
            .and_then(|k| usize::try_from(k).ok())
            .and_then(|k| self.window.get_mut(k))
        {
            Some(t) => p.apply(t),
            None => self.patches.push((i, p)),
        }
    }

    /// Hands every turn held to the sink.
    fn flush(&mut self) {
        while let Some(t) = self.window.pop_front() {
            self.sink.turn(self.first, t);
            self.first += 1;
        }
    }

    fn mark(&self) -> ReplayMark<S> {
        let r = &self.r;
        ReplayMark {
            turns: self.next,
            sink: self.sink.pos(),
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
                let line = self.line;
                if self
                    .marks
                    .as_ref()
                    .is_some_and(|m| m.len() < MAX_MARKS && m.last().is_none_or(|(o, _)| *o < line))
                {
                    // A mark's sink position is the boundary: every turn before it handed out.
                    self.flush();
                    let mark = self.mark();
                    if let Some(marks) = &mut self.marks {
                        marks.push((line, mark));
                    }
                }
                self.latest.insert(ev.turn_id.to_owned(), self.next);
                self.window.push_back(ReplayTurn {
                    turn_id: ev.turn_id.to_owned(),
                    started_at: ev.timestamp,
                    calls: Vec::new(),
                    denied: Vec::new(),
                });
                self.next += 1;
                self.r.total_turns += 1;
                while self.window.len() > self.window_len {
                    if let Some(t) = self.window.pop_front() {
                        self.sink.turn(self.first, t);
                        self.first += 1;
                    }
                }
            }
            EventType::FunctionCall => {
                if let Some(i) = self.turn(ev.turn_id) {
                    self.patch(
                        i,
                        TurnPatch::Call(ReplayCall {
                            tool: ev.tool.to_owned(),
                            args: args(),
                            output: None,
                            duration_ms: None,
                            failed: None,
                            call_id: ev.call_id.map(str::to_owned),
                        }),
                    );
                    self.r.total_calls += 1;
                }
            }
            EventType::FunctionOutput => {
                if let Some(i) = self.turn(ev.turn_id) {
                    self.patch(
                        i,
                        TurnPatch::Output {
                            call_id: ev.call_id.map(str::to_owned),
                            tool: ev.tool.to_owned(),
                            output: ev.output.map(|o| o.to_owned_string()).unwrap_or_default(),
                            duration_ms: ev.duration_ms,
                            failed: ev.failed,
                        },
                    );
                }
            }
            EventType::FunctionDenied => {
                self.r.total_denied += 1;
                if let Some(i) = self.turn(ev.turn_id) {
                    self.patch(
                        i,
                        TurnPatch::Denied(ReplayDenied {
                            tool: ev.tool.to_owned(),
                            args: args(),
                            source: ev.deny_source(),
                            reason: ev.reason.to_owned(),
                        }),
                    );
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

    /// The fold's state without its sink, as bytes (JSON): what [`ReplayBuilder::resume`]
    /// takes up. A tail fold (of a split read) has none: `None`. Unknown events and skipped
    /// lines are the read's to add at the end, so a fold that was given some has none either.
    ///
    /// A sink that keeps turn ids ([`TurnSink::keep_ids`]) is given those of the turns since
    /// the last save, so the state stays the size of what is open, however many turns the
    /// log holds; the ids are then the sink's to keep with its turns.
    pub fn state(&mut self) -> Option<Vec<u8>> {
        if self.marks.is_some() || self.r.unknown_events > 0 || !self.r.skipped_lines.is_empty() {
            return None;
        }
        if self.older.is_empty() {
            // The ids before `saved` are the sink's already (or there are none, or `latest`
            // holds them): give it those since.
            let mut newer: Vec<(&str, u64)> = self
                .latest
                .iter()
                .filter(|(_, v)| **v >= self.saved)
                .map(|(k, v)| (k.as_str(), *v))
                .collect();
            newer.sort_unstable_by_key(|(_, v)| *v);
            if self.sink.keep_ids(&newer) {
                self.saved = self.next;
                return self.encode(Vec::new(), true);
            }
        }
        let mut newer: Vec<(&String, u64)> = self.latest.iter().map(|(k, v)| (k, *v)).collect();
        newer.sort_unstable_by_key(|(_, v)| *v);
        let mut latest = self.older.clone();
        if latest.len() >= OLDER_CHUNKS {
            // Read and merged into one array (first of an id wins, newest first).
            let mut seen = std::collections::HashSet::new();
            let mut all: Vec<(String, u64)> = newer
                .iter()
                .rev()
                .map(|(k, v)| ((*k).clone(), *v))
                .chain(read_older(&latest))
                .filter(|(k, _)| seen.insert(k.clone()))
                .collect();
            all.reverse();
            latest = vec![serde_json::value::to_raw_value(&all).ok()?];
        } else if !newer.is_empty() {
            latest.push(serde_json::value::to_raw_value(&newer).ok()?);
        }
        self.encode(latest, false)
    }

    fn encode(&self, latest: Vec<Box<RawValue>>, ids_in_sink: bool) -> Option<Vec<u8>> {
        serde_json::to_vec(&ReplayState {
            v: REPLAY_STATE_VERSION,
            r: self.r.clone(),
            window: self.window.clone(),
            first: self.first,
            next: self.next,
            patches: self.patches.clone(),
            latest,
            ids_in_sink,
            window_len: self.window_len,
        })
        .ok()
    }

    /// The fold of session `session_id` as it stood when [`ReplayBuilder::state`] saved
    /// `state`, the turns it had handed out in `sink`: folding the rest of the log gives the
    /// answer of one read. `None` when `state` does not read, is of another version or of
    /// another session.
    pub fn resume(session_id: &str, state: &[u8], sink: S) -> Option<Self> {
        let st: ReplayState = serde_json::from_slice(state).ok()?;
        if st.v != REPLAY_STATE_VERSION || st.r.session_id != session_id {
            return None;
        }
        Some(Self {
            r: st.r,
            window: st.window,
            first: st.first,
            next: st.next,
            patches: st.patches,
            sink,
            latest: HashMap::new(),
            older: st.latest,
            ids_in_sink: st.ids_in_sink,
            saved: st.next,
            marks: None,
            line: 0,
            window_len: st.window_len,
        })
    }

    /// The sink, to bring what it holds up to date where it lives (a checkpoint's spool).
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
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

    /// Ends the fold: the replay without its turns, the patches for turns handed out (by
    /// index, in fold order within one), and the sink, which now holds every turn.
    pub fn finish_parts(mut self) -> (Replay, Vec<(u64, TurnPatch)>, S) {
        self.flush();
        let mut patches = self.patches;
        patches.sort_by_key(|(i, _)| *i);
        (self.r, patches, self.sink)
    }
}

impl<S: TurnSink> SplitFold for ReplayBuilder<S> {
    fn tail(&self) -> Self {
        let mut t = Self::with_sink(self.r.session_id.clone(), self.sink.tail());
        t.marks = Some(Vec::new());
        t.window_len = self.window_len;
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
        self.flush();
        let base = self.next;
        let shift = base.wrapping_sub(m.turns);
        for (id, i) in tail.latest {
            if i >= m.turns {
                self.latest.insert(id, i.wrapping_add(shift));
            }
        }
        self.sink.splice(tail.sink, m.sink, shift);
        self.window = tail.window;
        self.first = tail.first.wrapping_add(shift);
        self.next = tail.next.wrapping_add(shift);
        self.patches.extend(
            tail.patches
                .into_iter()
                .filter(|(i, _)| *i >= m.turns)
                .map(|(i, p)| (i.wrapping_add(shift), p)),
        );
        let (r, t) = (&mut self.r, tail.r);
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
