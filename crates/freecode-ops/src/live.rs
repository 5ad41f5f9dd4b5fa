//! A session's trace kept up to date by tailing its rollout log: the web viewer's live waterfall
//! and its server-sent events fold only the bytes appended since the last look, never the whole
//! log again ([`crate::trace::Tail`] follows a log for `trace --follow` the same way).
//!
//! [`LiveTrace`] holds the open log, the byte offset of the end of the last complete line it
//! folded, and the [`TraceBuilder`] fed every event up to there. The first look folds the log
//! up to its last complete line with the split fold (two halves on two threads from 8 MiB on,
//! [`freecode_store::rollout::fold_file_views`]); each later look reads the complete lines
//! appended since, through the same view reader, so the fold is the one `trace --json` makes of
//! the same bytes. A line still being written waits for its newline. A log replaced under the
//! same path (a compaction rewrites it: another inode, or shorter than what was folded) is
//! folded again from the start.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::rollout::trace::{Trace, TraceBuilder};
use freecode_store::StoreError;
use freecode_store::rollout::{BLOCK_BYTES, fold_file_views, read_views_from};

/// How far back a look searches for the last line end at a time.
const SCAN_BYTES: u64 = 64 << 10;

/// The offset just past the last `\n` in bytes `from..len` of `file`; `from` when there is none
/// (no complete line yet).
fn last_line_end(file: &File, from: u64, len: u64) -> std::io::Result<u64> {
    let mut hi = len;
    let mut buf = vec![0u8; usize::try_from(SCAN_BYTES).unwrap_or(1 << 16)];
    while hi > from {
        let lo = hi.saturating_sub(SCAN_BYTES).max(from);
        let chunk = &mut buf[..usize::try_from(hi - lo).unwrap_or(0)];
        file.read_exact_at(chunk, lo)?;
        if let Some(i) = memchr::memrchr(b'\n', chunk) {
            return Ok(lo + i as u64 + 1);
        }
        hi = lo;
    }
    Ok(from)
}

/// A session's trace fold, kept at the end of its log's complete lines.
pub struct LiveTrace {
    id: SessionId,
    path: PathBuf,
    file: File,
    ino: u64,
    /// Bytes folded: always at a line end.
    offset: u64,
    builder: TraceBuilder,
    /// Bytes read by the last look (what a look costs; tests read it).
    last_read: u64,
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_owned();
    move |source| StoreError::Io { op, path, source }
}

impl LiveTrace {
    /// Session `id`'s log at `path`, nothing folded yet; `None` when there is no log.
    pub fn open(id: &SessionId, path: &Path) -> Result<Option<Self>, StoreError> {
        let file = match freecode_store::fsutil::open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("open", path)(e)),
        };
        let ino = file.metadata().map_err(io_err("stat", path))?.ino();
        Ok(Some(Self {
            id: id.clone(),
            path: path.to_owned(),
            file,
            ino,
            offset: 0,
            builder: TraceBuilder::new(id.as_str()),
            last_read: 0,
        }))
    }

    /// The session.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Folds the complete lines written since the last look; whether any were. A log replaced
    /// since (another inode, or shorter) is folded again from its start.
    pub fn advance(&mut self) -> Result<bool, StoreError> {
        self.last_read = 0;
        let path = self.path.clone();
        let now = std::fs::symlink_metadata(&path).map_err(io_err("stat", &path))?;
        if now.ino() != self.ino || now.len() < self.offset {
            let Some(fresh) = Self::open(&self.id, &path)? else {
                return Ok(false);
            };
            *self = fresh;
        }
        let len = self.file.metadata().map_err(io_err("stat", &path))?.len();
        if len <= self.offset {
            return Ok(false);
        }
        let end = last_line_end(&self.file, self.offset, len).map_err(io_err("read", &path))?;
        if end == self.offset {
            return Ok(false);
        }
        if self.offset == 0 {
            let empty = TraceBuilder::new(self.id.as_str());
            let (builder, report) =
                fold_file_views(&self.file, end, empty).map_err(io_err("read", &path))?;
            self.builder = builder;
            warn_skipped(&path, report.issues.len() as u64 + report.unknown);
        } else {
            let range = freecode_store::fsutil::RangeReader::new(&self.file, self.offset, end);
            let builder = &mut self.builder;
            let report = read_views_from(range, BLOCK_BYTES, |v| builder.apply_view(v))
                .map_err(io_err("read", &path))?;
            warn_skipped(&path, report.issues.len() as u64 + report.unknown);
        }
        self.last_read = end - self.offset;
        self.offset = end;
        Ok(true)
    }

    /// The trace as `trace --json` prints it now: open requests aged against the clock (never
    /// before the log's last event), a log with nothing open ending at its last event.
    pub fn trace(&self) -> Trace {
        let now = self.builder.has_open().then(|| {
            let clock = freecode_store::now_ms();
            self.builder
                .last_timestamp()
                .map_or(clock, |l| clock.max(l))
        });
        self.builder.snapshot(now)
    }

    /// The trace, consuming the fold (no copy of its spans); as [`LiveTrace::trace`].
    pub fn into_trace(self) -> Trace {
        let now = self.builder.has_open().then(|| {
            let clock = freecode_store::now_ms();
            self.builder
                .last_timestamp()
                .map_or(clock, |l| clock.max(l))
        });
        self.builder.finish(now)
    }

    /// Whether a request is open (the trace changes with the clock).
    pub fn has_open(&self) -> bool {
        self.builder.has_open()
    }
}

fn warn_skipped(path: &Path, n: u64) {
    if n > 0 {
        tracing::warn!(
            "{}: {n} lines skipped or read with repairs (see `freecode trace`)",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;

    fn line(seq: u64, ts: i64, kind: &str, extra: &str) -> String {
        format!(
            "{{\"type\":\"{kind}\",\"id\":\"01KF0G{seq:014}\",\"seq\":{seq},\"aggregateID\":\"s1\",\"timestamp\":{ts}{extra}}}\n"
        )
    }

    fn call(seq: u64, ts: i64) -> String {
        line(
            seq,
            ts,
            "function.call",
            ",\"turnId\":\"t\",\"tool\":\"bash\",\"args\":{}",
        )
    }

    fn output(seq: u64, ts: i64) -> String {
        line(
            seq,
            ts,
            "function.output",
            ",\"turnId\":\"t\",\"tool\":\"bash\",\"output\":\"ok\",\"duration_ms\":5",
        )
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn cli_trace(path: &Path) -> Trace {
        let (b, _) = freecode_store::rollout::fold_event_views(path, TraceBuilder::new("s1"))
            .unwrap()
            .unwrap();
        b.finish(None)
    }

    #[test]
    fn appended_lines_are_folded_once_and_a_torn_line_waits_for_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let id = SessionId::new("s1").unwrap();
        assert!(LiveTrace::open(&id, &path).unwrap().is_none());
        let first = format!(
            "{}{}{}",
            line(1, 1000, "turn.started", ",\"turnId\":\"t\""),
            call(2, 1010),
            output(3, 1015)
        );
        append(&path, &first);
        let mut live = LiveTrace::open(&id, &path).unwrap().unwrap();
        assert!(live.advance().unwrap());
        assert_eq!(live.last_read, first.len() as u64);
        assert_eq!(live.trace(), cli_trace(&path));
        assert!(!live.advance().unwrap(), "nothing new: nothing read");
        assert_eq!(live.last_read, 0);
        // Half a line: not folded until its newline arrives.
        let next = format!("{}{}", call(4, 1020), output(5, 1030));
        let (a, b) = next.split_at(next.len() - 10);
        append(&path, a);
        assert!(live.advance().unwrap(), "the complete call");
        assert_eq!(live.trace().tool_spans.len(), 1);
        append(&path, b);
        assert!(live.advance().unwrap());
        assert_eq!(live.last_read, output(5, 1030).len() as u64);
        assert_eq!(live.offset, (first.len() + next.len()) as u64);
        let t = live.trace();
        assert_eq!(t.tool_spans.len(), 2);
        assert_eq!(t, cli_trace(&path));
    }

    #[test]
    fn a_replaced_log_is_folded_again_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let id = SessionId::new("s1").unwrap();
        append(&path, &format!("{}{}", call(1, 1000), output(2, 1005)));
        let mut live = LiveTrace::open(&id, &path).unwrap().unwrap();
        live.advance().unwrap();
        assert_eq!(live.trace().tool_spans.len(), 1);
        // A rewrite (compaction): a new file renamed over the old one, shorter.
        let tmp = dir.path().join("new");
        append(&tmp, &call(1, 2000));
        std::fs::rename(&tmp, &path).unwrap();
        assert!(live.advance().unwrap());
        assert_eq!(live.trace(), cli_trace(&path));
        assert!(live.trace().tool_spans.is_empty());
    }

    #[test]
    fn the_last_line_end_is_found_across_scan_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut text = "x".repeat(SCAN_BYTES as usize * 2);
        text.insert(10, '\n');
        append(&path, &text);
        let f = File::open(&path).unwrap();
        let len = text.len() as u64;
        assert_eq!(last_line_end(&f, 0, len).unwrap(), 11);
        assert_eq!(last_line_end(&f, 11, len).unwrap(), 11);
    }
}
