//! The rollout log on disk: `rollout/sessions/<id>/events.jsonl` (SPEC §6), written by a
//! [`Recorder`] and read back by [`read_events`] (typed events, for follow mode, OTLP and tests)
//! or [`read_event_views`] (borrowed views, large reads: what replay and trace use).
//!
//! - **One writer per log across processes.** A recorder holds an advisory lock on the log for
//!   its lifetime, so `seq` is unique and increasing; a second recorder fails naming the holder,
//!   or waits ([`LockWait::Block`]).
//! - **O(1) open.** `seq` resumes from the last complete line, read from the end of the file, not
//!   by counting lines.
//! - **Buffered, never past the ordering rules.** Events are serialised into one reused buffer
//!   and written with one `write` when nobody may miss them any more: before `model.request` or
//!   `function.call` returns (the provider is called, the tool runs, only after), at
//!   [`Recorder::sync`] and drop, and at most [`FLUSH_WINDOW`] after an event by a background
//!   thread. Append-only: a torn tail left by a crash is fenced with a newline before the next
//!   append (the log is never cut or rewritten); readers report it by offset.
//! - **Ordering rules in the API.** A model call is a [`ModelCall`] opened by writing
//!   `model.request` (before the provider is called) and closed by exactly one of
//!   [`ModelCall::response`] / [`ModelCall::error`], which consume it; a dropped, unclosed call
//!   stays in the log as a hang. Every refusal goes through [`Recorder::deny`].
//! - **Switchable.** `FREECODE_ROLLOUT=off` (or [`RecorderConfig::enabled`]) turns recording off
//!   wholesale; a disabled recorder writes nothing and opens no file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use freecode_core::SessionId;
use freecode_core::rollout::event::NotAnEvent;
use freecode_core::rollout::ulid::UlidGenerator;
use freecode_core::rollout::{DenySource, Event, EventKind, EventLine, ModelErrorKind, RawEvent};
use serde_json::Value;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil;
use crate::home::Home;
use crate::jsonl::{self, LineIssue};
use crate::lock::LockWait;
use crate::settings::Durability;

pub mod checkpoint;
mod held;
pub mod spool;
mod stream;
mod views;
pub use crate::settings::{FLUSH_WINDOW, ROLLOUT_ENV, RecorderConfig};
pub use held::HeldLog;
pub use stream::{
    CompactJson, CompactSpans, CompactTurns, JsonForm, JsonSpans, JsonTurns, OtlpSpans, PrettyJson,
    SpanPage, SpanRecords, Spooled, SpooledTurns, StreamedReplay, TracePage, TurnRecords,
    fold_otlp_streamed, fold_replay_checkpointed, fold_replay_streamed, fold_trace_checkpointed,
    fold_trace_streamed, rebuild_checkpoint, trace_page, write_otlp_streamed, write_replay_json,
    write_trace_json,
};
pub use views::{
    BLOCK_BYTES, SPLIT_BYTES, fold_event_views, fold_file_views, fold_views_split,
    read_event_views, read_views_from,
};

/// `events.jsonl`.
pub const EVENTS_FILE: &str = "events.jsonl";
/// The path of a session's log.
pub fn events_path(home: &Home, id: &SessionId) -> PathBuf {
    home.rollout_dir(id).join(EVENTS_FILE)
}

/// Where an event was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Its id.
    pub id: String,
    /// Its sequence number.
    pub seq: u64,
    /// Its timestamp, ms.
    pub timestamp: i64,
}

/// A buffer this large is written at once, whatever the window.
const FLUSH_BYTES: usize = 256 * 1024;

/// Appends events to one aggregate's log.
///
/// Events are serialised into a buffer and written (`write(2)`, then fsynced as
/// [`RecorderConfig::durability`] says) when nobody may miss them any more: `model.request`
/// and `function.call` before the call returns (so before the provider is called or the tool
/// runs), [`Recorder::sync`] (a turn's end), [`Recorder::flush`], drop, a full buffer, and at
/// the latest [`RecorderConfig::flush_window`] after the oldest buffered event, by a background
/// thread (started with the first buffered event, stopped on drop). A reader sees every event
/// within that window; a SIGKILL loses at most the events of the window, never a request or a
/// tool call that was returned. With a zero window or [`Durability::EveryAppend`] every event is
/// written (and fsynced) before `record` returns.
///
/// A write that fails loses the events buffered with it: the error is returned by the call that
/// wrote (the next call, when the background thread did), `seq` goes back to the last event
/// before them, and the log is fenced with a newline before the next write.
#[derive(Debug)]
pub struct Recorder {
    config: RecorderConfig,
    aggregate_id: String,
    path: PathBuf,
    shared: Option<Arc<Shared>>,
    flusher: Option<std::thread::JoinHandle<()>>,
    seq: u64,
    ulid: UlidGenerator,
    /// Reused for each event id.
    extra: freecode_core::Extra,
}

/// What the recorder and its background flusher share.
#[derive(Debug)]
struct Shared {
    log: Mutex<Log>,
    /// Wakes the flusher: an event was buffered while it waited idle, or the recorder stops.
    wake: Condvar,
}

/// The log file and the events not yet written to it.
#[derive(Debug)]
struct Log {
    file: File,
    path: PathBuf,
    durability: Durability,
    /// Whole lines, oldest first.
    buf: Vec<u8>,
    /// The `seq` of the first buffered line.
    buf_first_seq: u64,
    /// The `seq` of the last buffered line.
    last_seq: u64,
    /// When the oldest buffered line was buffered (`None`: the buffer is empty).
    oldest: Option<Instant>,
    /// Written but not fsynced.
    unsynced: bool,
    /// A write failed part-way: the log may end in a fragment, fenced before the next write.
    torn: bool,
    /// A background write failed: the error and the `seq` to go back to, for the next call.
    failed: Option<(StoreError, u64)>,
    /// The flusher waits with no deadline: buffering an event must wake it.
    idle: bool,
    /// The recorder is being dropped: the flusher ends.
    stop: bool,
    /// The home and the aggregate, for the change journal ([`crate::changes`]).
    home: Home,
    aggregate: String,
    /// Its notes in the change journal.
    noter: crate::changes::Noter,
}

fn lock(m: &Mutex<Log>) -> MutexGuard<'_, Log> {
    // A panic while holding the lock leaves the buffer whole (lines are added with one push).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Log {
    /// Writes the buffer as one `write` (fsyncing under `EveryAppend`). On an error the buffered
    /// events are dropped and the `seq` before them is returned with the error.
    fn write_out(&mut self) -> std::result::Result<(), (StoreError, u64)> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let back_to = self.buf_first_seq.saturating_sub(1);
        let path = &self.path;
        let fail = |e: std::io::Error, op: &'static str, buf: &mut Vec<u8>, back_to: u64| {
            buf.clear();
            (
                StoreError::Io {
                    op,
                    path: path.clone(),
                    source: e,
                },
                back_to,
            )
        };
        if self.torn {
            // A failed write may have left a fragment: never glue an event onto it.
            if let Err(e) = fsutil::append_bytes(&mut self.file, path, b"\n") {
                self.oldest = None;
                return Err(fail(e, "append to", &mut self.buf, back_to));
            }
            self.torn = false;
        }
        if let Err(e) = fsutil::append_bytes(&mut self.file, path, &self.buf) {
            self.torn = true;
            self.oldest = None;
            return Err(fail(e, "append to", &mut self.buf, back_to));
        }
        self.buf.clear();
        self.oldest = None;
        self.noter.changed(&self.home, &self.aggregate, "");
        if self.durability == Durability::EveryAppend {
            // Written, not durable: `seq` stays after the written events.
            let last = self.last_seq;
            fsutil::sync_file(&self.file, path, false)
                .map_err(|e| fail(e, "fsync", &mut Vec::new(), last))?;
        } else {
            self.unsynced = true;
        }
        Ok(())
    }

    /// The error a background write left, if any.
    fn take_failed(&mut self, seq: &mut u64) -> Result<()> {
        match self.failed.take() {
            Some((e, back_to)) => {
                *seq = back_to;
                Err(e)
            }
            None => Ok(()),
        }
    }
}

/// The background flusher: writes the buffer once its oldest line is `window` old, sleeping on
/// the condvar (with no deadline while the buffer is empty). Ends when the recorder stops.
fn flush_loop(shared: &Shared, window: Duration) {
    let mut log = lock(&shared.log);
    loop {
        if log.stop {
            return;
        }
        let Some(oldest) = log.oldest else {
            log.idle = true;
            log = shared
                .wake
                .wait(log)
                .unwrap_or_else(PoisonError::into_inner);
            log.idle = false;
            continue;
        };
        let due = oldest + window;
        let now = Instant::now();
        if now < due {
            log = shared
                .wake
                .wait_timeout(log, due - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            continue;
        }
        // `busy` before the lock: a forced exit parks here, never while holding the log.
        drop(log);
        let busy = fsutil::busy();
        log = lock(&shared.log);
        if log.oldest.is_some()
            && let Err(failed) = log.write_out()
        {
            tracing::warn!(path = %log.path.display(), error = %failed.0, "rollout log write failed");
            log.failed = Some(failed);
        }
        drop(busy);
    }
}

impl Recorder {
    /// Opens (creating) the log of `aggregate` under `home` and takes its lock.
    pub fn open(home: &Home, aggregate: &SessionId, config: RecorderConfig) -> Result<Self> {
        let path = events_path(home, aggregate);
        let mut rec = Self {
            config,
            aggregate_id: aggregate.to_string(),
            path,
            shared: None,
            flusher: None,
            seq: 0,
            ulid: UlidGenerator::default(),
            extra: freecode_core::Extra::new(),
        };
        if !config.enabled {
            return Ok(rec);
        }
        let dir = home.rollout_dir(aggregate);
        fsutil::create_dir_private(&dir)?;
        let mut file = fsutil::open_append(&rec.path)?;
        match config.lock_wait {
            LockWait::Block => file.lock().ctx("lock", &rec.path)?,
            LockWait::Fail => match crate::lock::try_lock_graced(&file) {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::Locked {
                        id: format!("rollout log of {aggregate}"),
                        pid: None,
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(e).ctx("lock", &rec.path),
            },
        }
        let (seq, last_id, torn) = tail_state(&file, &rec.path)?;
        rec.seq = seq;
        rec.ulid = UlidGenerator::after(&last_id);
        let mut unsynced = false;
        let len = file.metadata().ctx("stat", &rec.path)?.len();
        if let Some(at) = torn
            && len - at > crate::jsonl::MAX_LINE_BYTES as u64
        {
            // A fragment past the cap no reader takes: cut off in place, never copied.
            fsutil::set_len(&file, &rec.path, at)
                .and_then(|()| fsutil::sync_file(&file, &rec.path, true))
                .ctx("truncate", &rec.path)?;
            tracing::warn!(path = %rec.path.display(), offset = at, bytes = len - at, "cut a torn last line of the rollout log past the line cap");
        } else if torn.is_some() {
            // Fence the torn tail: the fragment stays as its own (unreadable) line.
            fsutil::append_bytes(&mut file, &rec.path, b"\n").ctx("append to", &rec.path)?;
            if config.durability == Durability::EveryAppend {
                fsutil::sync_file(&file, &rec.path, false).ctx("fsync", &rec.path)?;
            } else {
                unsynced = true;
            }
            tracing::warn!(path = %rec.path.display(), "fenced a torn last line of the rollout log");
        }
        rec.shared = Some(Arc::new(Shared {
            log: Mutex::new(Log {
                file,
                path: rec.path.clone(),
                durability: config.durability,
                buf: Vec::new(),
                buf_first_seq: 0,
                last_seq: seq,
                oldest: None,
                unsynced,
                torn: false,
                failed: None,
                idle: false,
                stop: false,
                home: home.clone(),
                aggregate: aggregate.to_string(),
                noter: crate::changes::Noter::default(),
            }),
            wake: Condvar::new(),
        }));
        Ok(rec)
    }

    /// A recorder that writes nothing.
    pub fn disabled(aggregate: &SessionId) -> Self {
        Self {
            config: RecorderConfig::disabled(),
            aggregate_id: aggregate.to_string(),
            path: PathBuf::new(),
            shared: None,
            flusher: None,
            seq: 0,
            ulid: UlidGenerator::default(),
            extra: freecode_core::Extra::new(),
        }
    }

    /// Whether events are written.
    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last sequence number recorded (written, or buffered to be written).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    fn now(&self) -> i64 {
        (self.config.clock)()
    }

    /// Whether events wait in the buffer at all.
    fn buffers(&self) -> bool {
        !self.config.flush_window.is_zero() && self.config.durability != Durability::EveryAppend
    }

    /// Starts the background flusher if it is not running. `false` when it cannot be started
    /// (the caller then writes at once).
    fn ensure_flusher(&mut self) -> bool {
        if self.flusher.is_some() {
            return true;
        }
        let Some(shared) = self.shared.clone() else {
            return false;
        };
        let window = self.config.flush_window;
        match std::thread::Builder::new()
            .name("rollout-flush".to_owned())
            .spawn(move || flush_loop(&shared, window))
        {
            Ok(h) => {
                self.flusher = Some(h);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "no rollout flusher thread: writing every event");
                false
            }
        }
    }

    /// Records one event: serialised into the buffer, written when the type says it must be
    /// (see [`Recorder`]). Returns `None` when recording is off.
    pub fn record(&mut self, kind: EventKind) -> Result<Option<Recorded>> {
        let must_write = matches!(
            kind,
            EventKind::ModelRequest { .. } | EventKind::FunctionCall { .. }
        );
        let timestamp = self.now();
        self.record_at(timestamp, &kind, must_write)
    }

    /// [`Recorder::record`] with the clock already read (one reading per event: a call's
    /// start or end is its event's timestamp).
    fn record_at(
        &mut self,
        timestamp: i64,
        kind: &EventKind,
        must_write: bool,
    ) -> Result<Option<Recorded>> {
        let mut flusher = self.buffers() && !must_write;
        if flusher && self.flusher.is_none() {
            flusher = self.ensure_flusher();
        }
        let Some(shared) = self.shared.as_ref() else {
            return Ok(None);
        };
        let busy = fsutil::busy();
        let mut log = lock(&shared.log);
        log.take_failed(&mut self.seq)?;
        // Neither counter wraps: past the largest value the log refuses new events.
        let seq = self
            .seq
            .checked_add(1)
            .ok_or_else(|| StoreError::Exhausted {
                what: "seq",
                last: self.seq.to_string(),
                path: self.path.clone(),
            })?;
        let id = self
            .ulid
            .next(u64::try_from(timestamp).unwrap_or(0), random_u128)
            .map_err(|e| StoreError::Exhausted {
                what: "event id",
                last: e.last,
                path: self.path.clone(),
            })?;
        let line = EventLine {
            id: &id,
            seq,
            aggregate_id: &self.aggregate_id,
            timestamp,
            kind,
            extra: &self.extra,
        };
        let before = log.buf.len();
        line.write_to(&mut log.buf)
            .map_err(|source| StoreError::BadJson {
                path: self.path.clone(),
                source,
            })?;
        // An event no reader would take back is not written (the seq is not used).
        if let Err(e) = crate::jsonl::check_line(&self.path, &log.buf[before..]) {
            log.buf.truncate(before);
            return Err(e);
        }
        log.last_seq = seq;
        if log.oldest.is_none() {
            log.buf_first_seq = seq;
            log.oldest = Some(Instant::now());
            if log.idle {
                log.idle = false;
                shared.wake.notify_one();
            }
        }
        if (!flusher || log.buf.len() >= FLUSH_BYTES)
            && let Err((e, back_to)) = log.write_out()
        {
            self.seq = back_to;
            return Err(e);
        }
        drop(log);
        drop(busy);
        self.seq = seq;
        Ok(Some(Recorded { id, seq, timestamp }))
    }

    /// Writes the buffered events now (no fsync): a reader sees them from here on.
    pub fn flush(&mut self) -> Result<()> {
        let Some(shared) = self.shared.as_ref() else {
            return Ok(());
        };
        let _busy = fsutil::busy();
        let mut log = lock(&shared.log);
        log.take_failed(&mut self.seq)?;
        log.write_out().map_err(|(e, back_to)| {
            self.seq = back_to;
            e
        })
    }

    /// Writes the buffered events and makes every event so far durable (the turn-boundary
    /// point).
    pub fn sync(&mut self) -> Result<()> {
        let Some(shared) = self.shared.as_ref() else {
            return Ok(());
        };
        let _busy = fsutil::busy();
        let mut log = lock(&shared.log);
        log.take_failed(&mut self.seq)?;
        log.write_out().map_err(|(e, back_to)| {
            self.seq = back_to;
            e
        })?;
        if log.unsynced {
            fsutil::sync_file(&log.file, &self.path, false).ctx("fsync", &self.path)?;
            log.unsynced = false;
        }
        Ok(())
    }

    /// `turn.started`.
    pub fn turn_started(&mut self, turn_id: &str) -> Result<()> {
        self.record(EventKind::TurnStarted {
            turn_id: turn_id.to_owned(),
        })
        .map(drop)
    }

    /// `turn.aborted`.
    pub fn turn_aborted(&mut self, turn_id: &str, reason: &str) -> Result<()> {
        self.record(EventKind::TurnAborted {
            turn_id: turn_id.to_owned(),
            reason: reason.to_owned(),
        })
        .map(drop)
    }

    /// Opens a model call by writing `model.request` — call this *before* the provider.
    pub fn model_request(&mut self, turn_id: &str, req: ModelRequest) -> Result<ModelCall> {
        let started = self.now();
        let kind = EventKind::ModelRequest {
            turn_id: turn_id.to_owned(),
            provider: req.provider.clone(),
            model: req.model.clone(),
            message_count: req.message_count,
            tool_count: req.tool_count,
            prompt_chars: req.prompt_chars,
            streamed: req.streamed,
        };
        self.record_at(started, &kind, true)?;
        Ok(ModelCall {
            turn_id: turn_id.to_owned(),
            provider: req.provider,
            model: req.model,
            started,
            ttft_ms: None,
        })
    }

    /// A tool is about to run: writes `function.call` with a fresh call id.
    pub fn function_call(&mut self, turn_id: &str, tool: &str, args: Value) -> Result<ToolCall> {
        let started = self.now();
        let call_id = format!("call-{}", self.seq.saturating_add(1));
        let kind = EventKind::FunctionCall {
            turn_id: turn_id.to_owned(),
            tool: tool.to_owned(),
            args,
            call_id: Some(call_id.clone()),
            parent_call_id: None,
        };
        self.record_at(started, &kind, true)?;
        Ok(ToolCall {
            turn_id: turn_id.to_owned(),
            tool: tool.to_owned(),
            call_id,
            started,
        })
    }

    /// The one exit for a refused tool call: `function.denied`, never a call/output pair.
    pub fn deny(
        &mut self,
        turn_id: &str,
        tool: &str,
        args: Value,
        source: DenySource,
        reason: &str,
    ) -> Result<()> {
        self.record(EventKind::FunctionDenied {
            turn_id: turn_id.to_owned(),
            tool: tool.to_owned(),
            args,
            reason: reason.to_owned(),
            source,
        })
        .map(drop)
    }

    /// `compact.occurred` with the token counts before and after.
    pub fn compact_occurred(&mut self, before_tokens: u64, after_tokens: u64) -> Result<()> {
        self.record(EventKind::CompactOccurred {
            before_tokens,
            after_tokens,
        })
        .map(drop)
    }
}

impl Drop for Recorder {
    /// Stops the flusher, then writes what is buffered (and fsyncs unless `Never`).
    fn drop(&mut self) {
        if let Some(shared) = self.shared.as_ref() {
            lock(&shared.log).stop = true;
            shared.wake.notify_all();
        }
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        let done = if self.config.durability == Durability::Never {
            self.flush()
        } else {
            self.sync()
        };
        if let Err(e) = done {
            tracing::warn!(path = %self.path.display(), error = %e, "rollout log: last events not written");
        }
        if let Some(shared) = self.shared.as_ref() {
            let mut log = lock(&shared.log);
            let Log {
                noter,
                home,
                aggregate,
                ..
            } = &mut *log;
            noter.finish(home, aggregate, "");
        }
    }
}

fn random_u128() -> u128 {
    uuid::Uuid::new_v4().as_u128()
}

/// What a model call is about.
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// Provider id.
    pub provider: String,
    /// Model id (`"(provider default)"` when none is pinned).
    pub model: String,
    /// Messages sent.
    pub message_count: u64,
    /// Tool definitions offered.
    pub tool_count: u64,
    /// Prompt size proxy, characters.
    pub prompt_chars: u64,
    /// Whether the call streams.
    pub streamed: bool,
}

/// What a successful model call returned.
#[derive(Debug, Clone, Default)]
pub struct ModelResponse {
    /// Input tokens.
    pub input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Cache-read tokens.
    pub cache_read_tokens: Option<u64>,
    /// Cache-write tokens.
    pub cache_write_tokens: Option<u64>,
    /// Of the cache writes, those made for an hour.
    pub cache_write_1h_tokens: Option<u64>,
    /// Reasoning tokens.
    pub reasoning_tokens: Option<u64>,
    /// Tool names the response called.
    pub tool_calls: Vec<String>,
    /// Response text length.
    pub text_chars: u64,
    /// Thinking text length.
    pub thinking_chars: u64,
    /// The model the provider said it served.
    pub echoed_model: Option<String>,
}

/// An open model call: closed by exactly one of [`ModelCall::response`] or [`ModelCall::error`].
/// Dropping it unclosed leaves the request open in the log — which is what a hang looks like.
#[derive(Debug)]
#[must_use = "a model call must be closed with response() or error()"]
pub struct ModelCall {
    turn_id: String,
    provider: String,
    model: String,
    started: i64,
    ttft_ms: Option<i64>,
}

impl ModelCall {
    /// The first streamed chunk arrived: `model.first_token` (once).
    pub fn first_token(&mut self, rec: &mut Recorder) -> Result<()> {
        if self.ttft_ms.is_some() {
            return Ok(());
        }
        let now = rec.now();
        let ttft = (now - self.started).max(0);
        self.ttft_ms = Some(ttft);
        let kind = EventKind::ModelFirstToken {
            turn_id: self.turn_id.clone(),
            ttft_ms: ttft,
        };
        rec.record_at(now, &kind, false).map(drop)
    }

    /// Whether a first token was seen.
    pub fn has_first_token(&self) -> bool {
        self.ttft_ms.is_some()
    }

    /// Closes the call with `model.response`.
    pub fn response(self, rec: &mut Recorder, r: ModelResponse) -> Result<()> {
        let now = rec.now();
        let duration_ms = (now - self.started).max(0);
        let kind = EventKind::ModelResponse {
            turn_id: self.turn_id,
            provider: self.provider,
            model: self.model,
            duration_ms,
            ttft_ms: self.ttft_ms,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cache_read_tokens: r.cache_read_tokens,
            cache_write_tokens: r.cache_write_tokens,
            cache_write_1h_tokens: r.cache_write_1h_tokens,
            reasoning_tokens: r.reasoning_tokens,
            tool_calls: r.tool_calls,
            text_chars: r.text_chars,
            thinking_chars: r.thinking_chars,
            echoed_model: r.echoed_model,
        };
        rec.record_at(now, &kind, false).map(drop)
    }

    /// Closes the call with `model.error` of `kind` (`stall`, `abort`, `provider`).
    pub fn error(self, rec: &mut Recorder, kind: ModelErrorKind, error: &str) -> Result<()> {
        let now = rec.now();
        let duration_ms = (now - self.started).max(0);
        let kind = EventKind::ModelError {
            turn_id: self.turn_id,
            provider: self.provider,
            model: self.model,
            duration_ms,
            kind,
            error: error.to_owned(),
        };
        rec.record_at(now, &kind, false).map(drop)
    }
}

/// A running tool call, closed by [`ToolCall::output`].
#[derive(Debug)]
#[must_use = "a tool call must be closed with output()"]
pub struct ToolCall {
    turn_id: String,
    tool: String,
    call_id: String,
    started: i64,
}

impl ToolCall {
    /// The call id pairing this call with its output.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The tool returned (or threw: `failed`): writes `function.output`.
    pub fn output(self, rec: &mut Recorder, output: &str, failed: bool) -> Result<()> {
        let now = rec.now();
        let duration_ms = (now - self.started).max(0);
        let kind = EventKind::FunctionOutput {
            turn_id: self.turn_id,
            tool: self.tool,
            output: output.to_owned(),
            duration_ms,
            failed: failed.then_some(true),
            call_id: Some(self.call_id),
        };
        rec.record_at(now, &kind, false).map(drop)
    }
}

/// The last `seq` in the log (0 when empty), the last event's id, and where the torn
/// (unterminated) last line starts, if the log ends in one. Reads backwards from the end: the cost is the length of the last
/// few lines, never of the log.
///
/// A torn fragment that is nevertheless a whole event (a write cut just before its newline) is
/// the last event: the fence makes it readable, so the next `seq` must follow it.
fn tail_state(file: &File, path: &Path) -> Result<(u64, String, Option<u64>)> {
    let mut found = None;
    let torn = scan_back(file, path, |line| {
        let raw = freecode_core::json::from_slice_lossy::<RawEvent>(line)
            .ok()
            .map(|l| l.value);
        found = raw.and_then(|r| Some((r.seq?, r.id.unwrap_or_default())));
        found.is_some()
    })?;
    let (seq, id) = found.unwrap_or_default();
    Ok((seq, id, torn))
}

/// Visits the log's non-blank lines from the last to the first (a torn tail included, without
/// newlines), reading back a chunk at a time, until `visit` returns `true`; a line past
/// [`crate::jsonl::MAX_LINE_BYTES`] is passed over unread. Returns where the torn last line
/// starts, if the file ends in one.
fn scan_back(
    file: &File,
    path: &Path,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<Option<u64>> {
    use std::os::unix::fs::FileExt;
    const CHUNK: u64 = 1 << 20;
    let len = file.metadata().ctx("stat", path)?.len();
    if len == 0 {
        return Ok(None);
    }
    let read = |from: u64, to: u64| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(to - from).unwrap_or(0)];
        file.read_exact_at(&mut buf, from).ctx("read", path)?;
        Ok(buf)
    };
    // The offset just after the last newline before `end`, scanning back a chunk at a time
    // (into one buffer: a torn tail may be gigabytes).
    let mut chunk = Vec::new();
    let mut line_start = |end: u64| -> Result<u64> {
        let mut pos = end;
        while pos > 0 {
            let from = pos.saturating_sub(CHUNK);
            chunk.resize((pos - from) as usize, 0);
            file.read_exact_at(&mut chunk, from).ctx("read", path)?;
            if let Some(i) = memchr::memrchr(b'\n', &chunk) {
                return Ok(from + i as u64 + 1);
            }
            pos = from;
        }
        Ok(0)
    };
    let torn = read(len - 1, len)?[0] != b'\n';
    // Lines from the end: [start, end) without the newline.
    let mut end = if torn { len } else { len - 1 };
    let mut torn_at = None;
    loop {
        let start = line_start(end)?;
        if torn && torn_at.is_none() {
            torn_at = Some(start);
        }
        // A line past the cap is no event: passed over, never read into memory.
        if end - start <= crate::jsonl::MAX_LINE_BYTES as u64 {
            let line = read(start, end)?;
            if !line.iter().all(u8::is_ascii_whitespace) && visit(&line) {
                return Ok(torn_at);
            }
        }
        if start == 0 {
            return Ok(torn_at);
        }
        end = start - 1;
    }
}

/// The last event of the log at `path` that `pick` accepts, read from the end of the file: the
/// cost is the tail after it, not the whole log. `None` without a log or a match.
pub fn last_event_where(
    path: &Path,
    mut pick: impl FnMut(&Event) -> bool,
) -> Result<Option<Event>> {
    let file = match fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", path),
    };
    let mut found = None;
    scan_back(&file, path, |line| {
        let event = freecode_core::json::from_slice_lossy::<RawEvent>(line)
            .ok()
            .and_then(|r| Event::from_raw(r.value).ok());
        match event {
            Some(e) if pick(&e) => {
                found = Some(e);
                true
            }
            _ => false,
        }
    })?;
    Ok(found)
}

/// What reading a log found besides events.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadReport {
    /// Events read.
    pub events: u64,
    /// Events of types this version does not know, skipped.
    pub unknown: u64,
    /// Lines that are not events (malformed, torn), with line numbers and offsets.
    pub issues: Vec<LineIssue>,
}

/// Streams the events of the log at `path` in order, in constant memory (one line at a time).
/// `Ok(None)` when it does not exist.
///
/// Parsing blocks on several threads was measured slower here: an untyped `RawEvent` is large,
/// and materialising a block of them costs more than the parse it parallelises.
pub fn read_events(path: &Path, on_event: impl FnMut(Event)) -> Result<Option<ReadReport>> {
    let file = match fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", path),
    };
    read_events_from(file, on_event).ctx("read", path).map(Some)
}

/// [`read_events`] over any reader.
pub fn read_events_from<R: std::io::Read>(
    reader: R,
    mut on_event: impl FnMut(Event),
) -> std::io::Result<ReadReport> {
    let mut report = ReadReport::default();
    let mut issues = Vec::new();
    jsonl::stream(
        reader,
        |raw: RawEvent| match Event::from_raw(raw) {
            Ok(e) => {
                report.events += 1;
                on_event(e);
            }
            Err(NotAnEvent::UnknownType(_) | NotAnEvent::MissingType) => report.unknown += 1,
        },
        |i| issues.push(i),
    )?;
    report.issues = issues;
    Ok(report)
}
