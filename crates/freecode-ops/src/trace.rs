//! The rollout log read back: the recorded sessions (`trace --list`), the trace fold (`trace`,
//! `session.trace`, MCP's `session_trace`, the web viewer's waterfall) and the replay fold
//! (`replay`), each streamed through the store's view reader (two halves on two threads past
//! 8 MiB) into the pure folds of [`freecode_core::rollout`]; a log followed as it grows
//! ([`Tail`]). What a read skipped is logged, with the file's path.
//!
//! One rule for time, the same for every front end: open requests are aged against the current
//! time, not the last event, so a request that never terminated shows as hung in a post-mortem
//! (SPEC §19.32); a log with nothing open ends at its last event, as in the original.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::rollout::replay::{Replay, ReplayBuilder, TurnSink};
use freecode_core::rollout::trace::{SpanSink, Spans, Trace, TraceBuilder};
use freecode_core::rollout::{Event, RawEvent};
use freecode_store::jsonl::MAX_LINE_BYTES;
use freecode_store::rollout::{
    EVENTS_FILE, ReadReport, SpooledTurns, TurnRecords, fold_event_views, fold_replay_checkpointed,
    fold_trace_checkpointed, read_event_views,
};
use freecode_store::{Home, IssueKind, LineIssue};

use crate::error::{Error, Result};
use crate::human::plural;
use crate::types::Recorded;

pub use freecode_store::rollout::{
    CompactJson, CompactSpans, JsonForm, OtlpSpans, PrettyJson, Spooled, StreamedReplay, TracePage,
    events_path, trace_page, write_replay_json, write_trace_json,
};

/// A session with no rollout log: [`crate::ErrorKind::NotFound`], whatever the output format.
pub fn no_events(id: &SessionId) -> Error {
    Error::NotFound(format!(
        "No recorded events for session {id} (`freecode trace --list` shows the recorded ones)"
    ))
}

/// Why a line of a log was skipped (or kept with repairs), for a person.
pub fn issue_reason(kind: &IssueKind) -> String {
    match kind {
        IssueKind::Torn => "torn (unterminated) last line".to_owned(),
        IssueKind::Malformed(m) => format!("malformed line: {m}"),
        IssueKind::TooLong => "line too long".to_owned(),
        IssueKind::LoneSurrogates(n) => format!(
            "{n} lone UTF-16 surrogate{} read as U+FFFD",
            if *n == 1 { "" } else { "s" }
        ),
    }
}

/// Logs what a read skipped: a few lines individually, then a count.
pub fn warn_skipped(path: &Path, report: &ReadReport) {
    const SHOWN: usize = 5;
    let (skipped, kept): (Vec<&LineIssue>, Vec<&LineIssue>) =
        report.issues.iter().partition(|i| i.kind.skipped());
    for issue in skipped.iter().take(SHOWN) {
        tracing::warn!("{}: skipped {issue}", path.display());
    }
    if skipped.len() > SHOWN {
        let more = skipped.len() - SHOWN;
        tracing::warn!(
            "{}: skipped {} more",
            path.display(),
            plural(more as u64, "unreadable line", "unreadable lines")
        );
    }
    if let Some(first) = kept.first() {
        tracing::warn!(
            "{}: {} held lone UTF-16 surrogates, read as U+FFFD (first: {first})",
            path.display(),
            plural(kept.len() as u64, "line", "lines")
        );
    }
    if report.unknown > 0 {
        tracing::warn!(
            "{}: skipped {} of a type this version does not know",
            path.display(),
            plural(report.unknown, "event", "events")
        );
    }
}

/// The recorded sessions: every `rollout/sessions/<id>/events.jsonl` with a valid id.
fn recorded_sessions(home: &Home) -> Result<Vec<(SessionId, PathBuf)>> {
    let dir = home.root().join("rollout").join("sessions");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read", &dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io("read", &dir))?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| SessionId::new(n).ok()) else {
            tracing::debug!("ignoring {}: not a session id", entry.path().display());
            continue;
        };
        let path = entry.path().join(EVENTS_FILE);
        if path.is_file() {
            out.push((id, path));
        }
    }
    Ok(out)
}

/// The session whose log was modified last (ties: the greater id); a home with none is
/// [`crate::ErrorKind::NotFound`].
pub fn latest(home: &Home) -> Result<SessionId> {
    let mut best: Option<(std::time::SystemTime, SessionId)> = None;
    for (id, path) in recorded_sessions(home)? {
        let Ok(modified) = path.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(t, b)| (modified, id.as_str()) > (*t, b.as_str()))
        {
            best = Some((modified, id));
        }
    }
    best.map(|(_, id)| id).ok_or_else(|| {
        Error::NotFound(format!(
            "No recorded sessions found under {}.",
            home.root().join("rollout").display()
        ))
    })
}

/// The recorded sessions with their first and last event times and event counts (`trace
/// --list`): newest first, sessions without events last, ties by id.
pub fn recorded(home: &Home) -> Result<Vec<Recorded>> {
    let sessions = recorded_sessions(home)?;
    let mut rows = Vec::with_capacity(sessions.len());
    for (id, path) in sessions {
        let (mut first, mut last) = (None, None);
        let report = read_event_views(&path, |e| {
            first.get_or_insert(e.timestamp);
            last = Some(e.timestamp);
        })?;
        let Some(report) = report else { continue };
        warn_skipped(&path, &report);
        rows.push(Recorded {
            session_id: id.to_string(),
            started_at: first,
            ended_at: last,
            events: report.events + report.unknown,
        });
    }
    rows.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    Ok(rows)
}

/// The current time, but never before the log's last event (a clock behind the log would
/// otherwise shorten open spans).
pub fn now_after(last_event: Option<i64>) -> i64 {
    let now = freecode_store::now_ms();
    last_event.map_or(now, |l| now.max(l))
}

/// The `now` a finished fold is aged against: open requests end as hung or in flight, and only
/// then does the clock matter.
pub fn now_if_open<S: SpanSink>(builder: &TraceBuilder<S>) -> Option<i64> {
    builder
        .has_open()
        .then(|| now_after(builder.last_timestamp()))
}

/// A finished trace fold and the `now` it is to be aged against ([`now_if_open`]).
pub type Folded<S> = (TraceBuilder<S>, Option<i64>);

/// The trace fold of session `id`'s log, each span handed to `sink` as it closes (a spool of
/// JSON or OTLP, the CLI's rows), with the `now` it is to be aged against; `None` when it has
/// no log.
pub fn fold_trace<S>(home: &Home, id: &SessionId, sink: S) -> Result<Option<Folded<S>>>
where
    S: SpanSink,
    TraceBuilder<S>: Send + 'static,
{
    let path = events_path(home, id);
    let Some((builder, report)) =
        fold_event_views(&path, TraceBuilder::with_sink(id.as_str(), sink))?
    else {
        return Ok(None);
    };
    warn_skipped(&path, &report);
    let now = now_if_open(&builder);
    Ok(Some((builder, now)))
}

/// The fold of session `id`'s log with spans spooled as JSON of form `F` as they close, to be
/// written by [`write_trace_json`] (`trace --json`, `session.trace`) or paged by
/// [`trace_page`] (MCP); `None` when it has no log. From the log's fold checkpoint
/// (`state/folds/<id>/`): a log read before costs the bytes appended since.
pub fn fold_trace_json<F: JsonForm + Default + Send + 'static>(
    home: &Home,
    id: &SessionId,
) -> Result<Option<Folded<Spooled<F>>>> {
    let path = events_path(home, id);
    let Some((builder, report)) = fold_trace_checkpointed::<F>(home, id)? else {
        return Ok(None);
    };
    warn_skipped(&path, &report);
    let now = now_if_open(&builder);
    Ok(Some((builder, now)))
}

/// The fold of session `id`'s log with spans spooled as OTLP as they close (the document
/// written by [`crate::otlp`] without the trace in memory); `None` when it has no log.
pub fn fold_trace_otlp(home: &Home, id: &SessionId) -> Result<Option<Folded<OtlpSpans>>> {
    fold_trace(home, id, OtlpSpans::new(id.as_str()))
}

/// Session `id`'s trace, whole (what `trace --json` prints); `None` when it has no log.
pub fn trace(home: &Home, id: &SessionId) -> Result<Option<Trace>> {
    Ok(fold_trace(home, id, Spans::default())?.map(|(builder, now)| builder.finish(now)))
}

/// Adds what the read skipped to the replay (unknown events, skipped lines), and logs it.
fn with_report<S: TurnSink>(path: &Path, report: &ReadReport, builder: &mut ReplayBuilder<S>) {
    warn_skipped(path, report);
    for _ in 0..report.unknown {
        builder.unknown_event();
    }
    for LineIssue {
        line, offset, kind, ..
    } in report.issues.iter().filter(|i| i.kind.skipped())
    {
        builder.skipped_line(*line, *offset, issue_reason(kind));
    }
}

/// The replay fold of session `id`'s log with turns spooled as records `R` once newer ones
/// start, what the read skipped added: to be written by [`write_replay_json`] (`replay
/// --json`) or read back a turn at a time ([`StreamedReplay`]); `None` when it has no log.
/// From the log's fold checkpoint (`state/folds/<id>/`): a log read before costs the bytes
/// appended since.
pub fn fold_replay<R: TurnRecords>(
    home: &Home,
    id: &SessionId,
) -> Result<Option<ReplayBuilder<SpooledTurns<R>>>> {
    let path = events_path(home, id);
    let Some((mut builder, report)) = fold_replay_checkpointed::<R>(home, id)? else {
        return Ok(None);
    };
    with_report(&path, &report, &mut builder);
    Ok(Some(builder))
}

/// Session `id`'s replay, whole (what `replay --json` prints); `None` when it has no log.
pub fn replay(home: &Home, id: &SessionId) -> Result<Option<Replay>> {
    let path = events_path(home, id);
    let Some((mut builder, report)) = fold_event_views(&path, ReplayBuilder::new(id.as_str()))?
    else {
        return Ok(None);
    };
    with_report(&path, &report, &mut builder);
    Ok(Some(builder.finish()))
}

/// Session `id`'s replay with only the turns whose id `turns` holds (`None`: every turn), read
/// back one at a time from a spooled fold so the rest are never held; `None` without a log.
pub fn replay_of(
    home: &Home,
    id: &SessionId,
    turns: Option<&HashSet<String>>,
) -> Result<Option<Replay>> {
    let Some(builder) = fold_replay::<CompactJson>(home, id)? else {
        return Ok(None);
    };
    let mut kept = Vec::new();
    let mut replay = StreamedReplay::new(builder)
        .each_turn(|t| {
            if turns.is_none_or(|w| w.contains(&t.turn_id)) {
                kept.push(t);
            }
            Ok(())
        })
        .map_err(Error::Stream)?;
    replay.turns = kept;
    Ok(Some(replay))
}

/// Reads the complete lines appended to a log since the last call, never re-reading
/// (`trace --follow`).
pub struct Tail {
    reader: BufReader<File>,
    /// Bytes of a line whose newline has not arrived yet.
    partial: Vec<u8>,
    /// A line past [`MAX_LINE_BYTES`] being passed over: its length so far (never held).
    overlong: Option<u64>,
    /// 1-based number of the next line.
    line: u64,
    /// Byte offset of the next line.
    offset: u64,
}

impl Tail {
    /// Session `id`'s log at `path`, from its start; no log is [`no_events`].
    pub fn open(id: &SessionId, path: &Path) -> Result<Self> {
        match File::open(path) {
            Ok(f) => Ok(Self::new(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(no_events(id)),
            Err(e) => Err(Error::io("open", path)(e)),
        }
    }

    fn new(file: File) -> Self {
        Self {
            reader: BufReader::new(file),
            partial: Vec::new(),
            overlong: None,
            line: 1,
            offset: 0,
        }
    }

    /// Feeds every complete line now in the file to `on_event`; returns how many lines were
    /// not events (logged).
    pub fn read_new(&mut self, path: &Path, mut on_event: impl FnMut(Event)) -> Result<u64> {
        let mut skipped = 0;
        loop {
            if let Some(so_far) = self.overlong {
                let buf = self.reader.fill_buf().map_err(Error::io("read", path))?;
                if buf.is_empty() {
                    // The rest of the line comes later.
                    return Ok(skipped);
                }
                let Some(i) = memchr::memchr(b'\n', buf) else {
                    let n = buf.len();
                    self.reader.consume(n);
                    self.overlong = Some(so_far + n as u64);
                    continue;
                };
                self.reader.consume(i + 1);
                let len = so_far + i as u64;
                tracing::warn!(
                    "{}: skipped line {} (byte offset {}, {len} bytes): longer than {MAX_LINE_BYTES} bytes",
                    path.display(),
                    self.line,
                    self.offset
                );
                skipped += 1;
                self.overlong = None;
                self.line += 1;
                self.offset += len + 1;
                continue;
            }
            // Room for a line of the cap and its newline, no more.
            let room = (MAX_LINE_BYTES + 1).saturating_sub(self.partial.len()) as u64;
            (&mut self.reader)
                .take(room)
                .read_until(b'\n', &mut self.partial)
                .map_err(Error::io("read", path))?;
            if self.partial.last() != Some(&b'\n') {
                if self.partial.len() > MAX_LINE_BYTES {
                    // Past the cap: measured to its end from here on, not kept.
                    self.overlong = Some(self.partial.len() as u64);
                    self.partial = Vec::new();
                    continue;
                }
                // End of file, possibly mid-line: the rest of the line comes later.
                return Ok(skipped);
            }
            let len = self.partial.len() as u64;
            let line = &self.partial[..self.partial.len() - 1];
            if !line.iter().all(u8::is_ascii_whitespace) {
                match freecode_core::json::from_slice_lossy::<RawEvent>(line) {
                    Ok(raw) => match Event::from_raw(raw.value) {
                        Ok(e) => on_event(e),
                        Err(_) => {
                            skipped += 1;
                            tracing::warn!(
                                "{}: skipped line {}: an event of a type this version does not know",
                                path.display(),
                                self.line
                            );
                        }
                    },
                    Err(e) => {
                        skipped += 1;
                        tracing::warn!(
                            "{}: skipped line {} (byte offset {}): malformed line: {e}",
                            path.display(),
                            self.line,
                            self.offset
                        );
                    }
                }
            }
            self.partial.clear();
            self.line += 1;
            self.offset += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn line(seq: u64, ts: i64, extra: &str) -> String {
        format!(
            "{{\"type\":\"model.request\",\"id\":\"e{seq}\",\"seq\":{seq},\"aggregateID\":\"s\",\
             \"timestamp\":{ts},\"turnId\":\"turn-0\",\"provider\":\"p\",\"model\":\"m\"{extra}}}\n"
        )
    }

    #[test]
    fn tail_reads_appended_complete_lines_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut w = File::create(&path).unwrap();
        w.write_all(line(1, 1000, "").as_bytes()).unwrap();
        let mut tail = Tail::new(File::open(&path).unwrap());
        let mut seen = Vec::new();
        assert_eq!(tail.read_new(&path, |e| seen.push(e.seq)).unwrap(), 0);
        assert_eq!(seen, [1]);

        // Half a line: held back until its newline arrives.
        let second = line(2, 2000, "");
        let (a, b) = second.split_at(40);
        w.write_all(a.as_bytes()).unwrap();
        tail.read_new(&path, |e| seen.push(e.seq)).unwrap();
        assert_eq!(seen, [1]);
        w.write_all(b.as_bytes()).unwrap();
        w.write_all(b"not json\n\n").unwrap();
        w.write_all(line(3, 3000, "").as_bytes()).unwrap();
        assert_eq!(tail.read_new(&path, |e| seen.push(e.seq)).unwrap(), 1);
        assert_eq!(seen, [1, 2, 3]);
        assert_eq!(tail.line, 6);
        assert_eq!(
            tail.offset,
            std::fs::metadata(&path).unwrap().len(),
            "offsets count every byte"
        );
        // Nothing new: nothing read again.
        tail.read_new(&path, |e| seen.push(e.seq)).unwrap();
        assert_eq!(seen, [1, 2, 3]);
    }
}
