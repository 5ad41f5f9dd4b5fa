//! The rollout log on disk: `rollout/sessions/<id>/events.jsonl` (SPEC §6), written by a
//! [`Recorder`] and read back by [`read_events`] (typed events, for follow mode, OTLP and tests)
//! or [`read_event_views`] (borrowed views, large reads: what replay and trace use).
//!
//! - **One writer per log across processes.** A recorder holds an advisory lock on the log for
//!   its lifetime, so `seq` is unique and increasing; a second recorder fails naming the holder,
//!   or waits ([`LockWait::Block`]).
//! - **O(1) open.** `seq` resumes from the last complete line, read from the end of the file, not
//!   by counting lines.
//! - **One `write` per event**, append-only. A torn tail left by a crash is fenced with a newline
//!   before the next append (the log is never cut or rewritten); readers report it by offset.
//! - **Ordering rules in the API.** A model call is a [`ModelCall`] opened by writing
//!   `model.request` (before the provider is called) and closed by exactly one of
//!   [`ModelCall::response`] / [`ModelCall::error`], which consume it; a dropped, unclosed call
//!   stays in the log as a hang. Every refusal goes through [`Recorder::deny`].
//! - **Switchable.** `FREECODE_ROLLOUT=off` (or [`RecorderConfig::enabled`]) turns recording off
//!   wholesale; a disabled recorder writes nothing and opens no file.

use std::fs::File;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::rollout::event::NotAnEvent;
use freecode_core::rollout::ulid::UlidGenerator;
use freecode_core::rollout::{DenySource, Event, EventKind, ModelErrorKind, RawEvent};
use serde_json::Value;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil;
use crate::home::Home;
use crate::jsonl::{self, LineIssue};
use crate::lock::LockWait;
use crate::session::Durability;

mod views;
pub use views::{BLOCK_BYTES, read_event_views, read_views_from};

/// `events.jsonl`.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Environment switch: `off`, `0`, `false` or `no` disable recording.
pub const ROLLOUT_ENV: &str = "FREECODE_ROLLOUT";

/// Recorder settings.
#[derive(Debug, Clone, Copy)]
pub struct RecorderConfig {
    /// Whether anything is written.
    pub enabled: bool,
    /// When events reach the disk: every event, turn boundaries ([`Recorder::sync`]), or never.
    pub durability: Durability,
    /// Whether to wait for another recorder of the same log.
    pub lock_wait: LockWait,
    /// The clock, ms since the epoch.
    pub clock: fn() -> i64,
}

impl Default for RecorderConfig {
    /// Enabled unless `FREECODE_ROLLOUT` says off; turn-boundary durability.
    fn default() -> Self {
        let off = std::env::var(ROLLOUT_ENV)
            .map(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "off" | "0" | "false" | "no"
                )
            })
            .unwrap_or(false);
        Self {
            enabled: !off,
            durability: Durability::TurnBoundary,
            lock_wait: LockWait::Fail,
            clock: crate::now_ms,
        }
    }
}

impl RecorderConfig {
    /// A configuration that records nothing.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }
}

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

/// Appends events to one aggregate's log.
#[derive(Debug)]
pub struct Recorder {
    config: RecorderConfig,
    aggregate_id: String,
    path: PathBuf,
    file: Option<File>,
    seq: u64,
    ulid: UlidGenerator,
    unsynced: bool,
    /// A write failed part-way: the log may end in a fragment, fenced before the next event.
    torn: bool,
}

impl Recorder {
    /// Opens (creating) the log of `aggregate` under `home` and takes its lock.
    pub fn open(home: &Home, aggregate: &SessionId, config: RecorderConfig) -> Result<Self> {
        let path = events_path(home, aggregate);
        let mut rec = Self {
            config,
            aggregate_id: aggregate.to_string(),
            path,
            file: None,
            seq: 0,
            ulid: UlidGenerator::default(),
            unsynced: false,
            torn: false,
        };
        if !config.enabled {
            return Ok(rec);
        }
        let dir = home.rollout_dir(aggregate);
        fsutil::create_dir_private(&dir)?;
        let file = fsutil::open_append(&rec.path)?;
        match config.lock_wait {
            LockWait::Block => file.lock().ctx("lock", &rec.path)?,
            LockWait::Fail => match file.try_lock() {
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
        rec.file = Some(file);
        if torn {
            // Fence the torn tail: the fragment stays as its own (unreadable) line.
            rec.write_raw(b"\n")?;
            tracing::warn!(path = %rec.path.display(), "fenced a torn last line of the rollout log");
        }
        Ok(rec)
    }

    /// A recorder that writes nothing.
    pub fn disabled(aggregate: &SessionId) -> Self {
        Self {
            config: RecorderConfig::disabled(),
            aggregate_id: aggregate.to_string(),
            path: PathBuf::new(),
            file: None,
            seq: 0,
            ulid: UlidGenerator::default(),
            unsynced: false,
            torn: false,
        }
    }

    /// Whether events are written.
    pub fn is_enabled(&self) -> bool {
        self.file.is_some()
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last sequence number written.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    fn now(&self) -> i64 {
        (self.config.clock)()
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        if let Some(f) = self.file.as_mut() {
            if self.torn {
                // A failed write may have left a fragment: never glue an event onto it.
                fsutil::append_bytes(f, &self.path, b"\n").ctx("append to", &self.path)?;
                self.torn = false;
            }
            if let Err(e) = fsutil::append_bytes(f, &self.path, bytes) {
                self.torn = true;
                return Err(e).ctx("append to", &self.path);
            }
            if self.config.durability == Durability::EveryAppend {
                fsutil::sync_file(f, &self.path, false).ctx("fsync", &self.path)?;
            } else {
                self.unsynced = true;
            }
        }
        Ok(())
    }

    /// Records one event: one `write` of one line. Returns `None` when recording is off.
    pub fn record(&mut self, kind: EventKind) -> Result<Option<Recorded>> {
        if self.file.is_none() {
            return Ok(None);
        }
        // Neither counter wraps: past the largest value the log refuses new events.
        let seq = self
            .seq
            .checked_add(1)
            .ok_or_else(|| StoreError::Exhausted {
                what: "seq",
                last: self.seq.to_string(),
                path: self.path.clone(),
            })?;
        let timestamp = self.now();
        let id = self
            .ulid
            .next(u64::try_from(timestamp).unwrap_or(0), random_u128)
            .map_err(|e| StoreError::Exhausted {
                what: "event id",
                last: e.last,
                path: self.path.clone(),
            })?;
        let event = Event {
            id,
            seq,
            aggregate_id: self.aggregate_id.clone(),
            timestamp,
            kind,
            extra: freecode_core::Extra::new(),
        };
        let busy = crate::fsutil::busy();
        self.write_raw(&event.to_line())?;
        drop(busy);
        self.seq = seq;
        Ok(Some(Recorded {
            id: event.id,
            seq: event.seq,
            timestamp,
        }))
    }

    /// Makes every event so far durable (the turn-boundary point).
    pub fn sync(&mut self) -> Result<()> {
        if let (Some(f), true) = (self.file.as_ref(), self.unsynced) {
            fsutil::sync_file(f, &self.path, false).ctx("fsync", &self.path)?;
            self.unsynced = false;
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
        self.record(EventKind::ModelRequest {
            turn_id: turn_id.to_owned(),
            provider: req.provider.clone(),
            model: req.model.clone(),
            message_count: req.message_count,
            tool_count: req.tool_count,
            prompt_chars: req.prompt_chars,
            streamed: req.streamed,
        })?;
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
        self.record(EventKind::FunctionCall {
            turn_id: turn_id.to_owned(),
            tool: tool.to_owned(),
            args,
            call_id: Some(call_id.clone()),
            parent_call_id: None,
        })?;
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
    fn drop(&mut self) {
        if self.config.durability != Durability::Never {
            let _ = self.sync();
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
        let ttft = (rec.now() - self.started).max(0);
        self.ttft_ms = Some(ttft);
        rec.record(EventKind::ModelFirstToken {
            turn_id: self.turn_id.clone(),
            ttft_ms: ttft,
        })
        .map(drop)
    }

    /// Whether a first token was seen.
    pub fn has_first_token(&self) -> bool {
        self.ttft_ms.is_some()
    }

    /// Closes the call with `model.response`.
    pub fn response(self, rec: &mut Recorder, r: ModelResponse) -> Result<()> {
        let duration_ms = (rec.now() - self.started).max(0);
        rec.record(EventKind::ModelResponse {
            turn_id: self.turn_id,
            provider: self.provider,
            model: self.model,
            duration_ms,
            ttft_ms: self.ttft_ms,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cache_read_tokens: r.cache_read_tokens,
            cache_write_tokens: r.cache_write_tokens,
            reasoning_tokens: r.reasoning_tokens,
            tool_calls: r.tool_calls,
            text_chars: r.text_chars,
            thinking_chars: r.thinking_chars,
            echoed_model: r.echoed_model,
        })
        .map(drop)
    }

    /// Closes the call with `model.error` of `kind` (`stall`, `abort`, `provider`).
    pub fn error(self, rec: &mut Recorder, kind: ModelErrorKind, error: &str) -> Result<()> {
        let duration_ms = (rec.now() - self.started).max(0);
        rec.record(EventKind::ModelError {
            turn_id: self.turn_id,
            provider: self.provider,
            model: self.model,
            duration_ms,
            kind,
            error: error.to_owned(),
        })
        .map(drop)
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
        let duration_ms = (rec.now() - self.started).max(0);
        rec.record(EventKind::FunctionOutput {
            turn_id: self.turn_id,
            tool: self.tool,
            output: output.to_owned(),
            duration_ms,
            failed: failed.then_some(true),
            call_id: Some(self.call_id),
        })
        .map(drop)
    }
}

/// The last `seq` in the log (0 when empty), the last event's id, and whether the log ends in
/// a torn (unterminated) line. Reads backwards from the end: the cost is the length of the last
/// few lines, never of the log.
///
/// A torn fragment that is nevertheless a whole event (a write cut just before its newline) is
/// the last event: the fence makes it readable, so the next `seq` must follow it.
fn tail_state(file: &File, path: &Path) -> Result<(u64, String, bool)> {
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
/// newlines), reading back a chunk at a time, until `visit` returns `true`. Returns whether the
/// file ends in a torn line.
fn scan_back(file: &File, path: &Path, mut visit: impl FnMut(&[u8]) -> bool) -> Result<bool> {
    use std::os::unix::fs::FileExt;
    const CHUNK: u64 = 64 * 1024;
    let len = file.metadata().ctx("stat", path)?.len();
    if len == 0 {
        return Ok(false);
    }
    let read = |from: u64, to: u64| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(to - from).unwrap_or(0)];
        file.read_exact_at(&mut buf, from).ctx("read", path)?;
        Ok(buf)
    };
    // The offset just after the last newline before `end`, scanning back a chunk at a time.
    let line_start = |end: u64| -> Result<u64> {
        let mut pos = end;
        while pos > 0 {
            let from = pos.saturating_sub(CHUNK);
            if let Some(i) = read(from, pos)?.iter().rposition(|&b| b == b'\n') {
                return Ok(from + i as u64 + 1);
            }
            pos = from;
        }
        Ok(0)
    };
    let torn = read(len - 1, len)?[0] != b'\n';
    // Lines from the end: [start, end) without the newline.
    let mut end = if torn { len } else { len - 1 };
    loop {
        let start = line_start(end)?;
        let line = read(start, end)?;
        if !line.iter().all(u8::is_ascii_whitespace) && visit(&line) {
            return Ok(torn);
        }
        if start == 0 {
            return Ok(torn);
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
#[derive(Debug, Default, Clone, PartialEq, Eq)]
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
