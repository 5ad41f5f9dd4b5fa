//! Reading a log as borrowed event views ([`EventView`]): what replay and trace use.
//!
//! The file is read in large blocks (4 MiB) into one buffer that is reused: a line is a slice of
//! it (found with `memchr`), parsed in place into a view of `&str`s, numbers and raw JSON text,
//! so no line is copied and no `serde_json::Value` is built. Only a line that is longer than the
//! buffer makes it grow (up to [`MAX_LINE_BYTES`]).
//!
//! Tolerance is the typed reader's ([`read_events`](super::read_events)), line for line: the
//! fast path takes a line only when it is valid UTF-8 without lone surrogate escapes and parses
//! as a view; any other line goes through the same path as before (`from_slice_lossy` into a
//! `RawEvent`), so a bad line is reported with the same line number, offset and message, a line
//! with lone surrogates is kept with U+FFFD and reported, and a torn tail is reported, never
//! fatal. `tests/it/rollout_views.rs` checks both readers agree on generated logs.

use std::io::Read;
use std::path::Path;

use freecode_core::rollout::split::SplitFold;
use freecode_core::rollout::view::{EventView, ParsedLine};
use freecode_core::rollout::{Event, RawEvent};

use super::ReadReport;
use crate::error::{IoContext, Result};
use crate::fsutil;
use crate::jsonl::{IssueKind, LineIssue, MAX_LINE_BYTES};

/// The read size.
pub const BLOCK_BYTES: usize = 4 << 20;

/// Streams the events of the log at `path` in order as borrowed views, in constant memory (one
/// block, or the longest line). `Ok(None)` when it does not exist.
pub fn read_event_views(
    path: &Path,
    on_event: impl FnMut(&EventView<'_>),
) -> Result<Option<ReadReport>> {
    let file = match fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", path),
    };
    read_views_from(file, BLOCK_BYTES, on_event)
        .ctx("read", path)
        .map(Some)
}

/// [`read_event_views`] over any reader, reading `block` bytes at a time (tests vary it).
pub fn read_views_from<R: Read>(
    reader: R,
    block: usize,
    on_event: impl FnMut(&EventView<'_>),
) -> std::io::Result<ReadReport> {
    let mut report = ReadReport::default();
    read_lines(
        reader,
        block,
        Cursor::default(),
        &mut report,
        &mut Events(on_event),
    )?;
    Ok(report)
}

/// Logs from this size on are folded in two halves on two threads ([`fold_event_views`]).
pub const SPLIT_BYTES: u64 = 8 << 20;

/// Folds the log at `path` into `fold` and returns it with the read's report; `Ok(None)` when
/// it does not exist. From [`SPLIT_BYTES`] on, the log is split at the first line start past
/// its middle and each half is folded on its own thread, then spliced
/// ([`freecode_core::rollout::split`]): the fold and the report are those of one sequential
/// read, line for line.
pub fn fold_event_views<F: SplitFold + Send + 'static>(
    path: &Path,
    mut fold: F,
) -> Result<Option<(F, ReadReport)>> {
    let file = match fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", path),
    };
    let len = file.metadata().ctx("stat", path)?.len();
    if len < SPLIT_BYTES {
        let report =
            read_views_from(file, BLOCK_BYTES, |v| fold.apply_view(v)).ctx("read", path)?;
        return Ok(Some((fold, report)));
    }
    fold_split(
        &FileSource(&file),
        Cursor::default(),
        len,
        len / 2,
        BLOCK_BYTES,
        fold,
    )
    .ctx("read", path)
    .map(|(fold, report, _, _)| Some((fold, report)))
}

/// [`fold_file_views`] from the line at `start` (a checkpoint's end, with the number of lines
/// before it) to `end`: the fold goes on from there as one sequential read would, and the read
/// ends where the returned cursor says (the start of the first line it did not take in whole:
/// a torn tail, an unterminated line past the limit, or `end`). Two halves on two threads from
/// [`SPLIT_BYTES`] of new bytes on.
pub(crate) fn fold_file_from<F: SplitFold + Send + 'static>(
    file: &std::fs::File,
    start: Cursor,
    end: u64,
    mut fold: F,
) -> std::io::Result<(F, ReadReport, Cursor)> {
    if end.saturating_sub(start.offset) < SPLIT_BYTES {
        let range = fsutil::RangeReader::new(file, start.offset, end);
        let mut report = ReadReport::default();
        let stop = read_lines(
            range,
            BLOCK_BYTES,
            start,
            &mut report,
            &mut Events(|v: &EventView<'_>| fold.apply_view(v)),
        )?;
        return Ok((fold, report, stop.cursor()));
    }
    let at = start.offset + (end - start.offset) / 2;
    fold_split(&FileSource(file), start, end, at, BLOCK_BYTES, fold).map(|(f, r, _, c)| (f, r, c))
}

/// [`fold_event_views`] over the first `end` bytes of an open log `file` (a tailer folds up to
/// the last complete line it saw, then reads on from there): as two halves on two threads
/// from [`SPLIT_BYTES`] on, the same fold and report as one sequential read of those bytes.
pub fn fold_file_views<F: SplitFold + Send + 'static>(
    file: &std::fs::File,
    end: u64,
    mut fold: F,
) -> std::io::Result<(F, ReadReport)> {
    if end < SPLIT_BYTES {
        let range = fsutil::RangeReader::new(file, 0, end);
        let report = read_views_from(range, BLOCK_BYTES, |v| fold.apply_view(v))?;
        return Ok((fold, report));
    }
    fold_split(
        &FileSource(file),
        Cursor::default(),
        end,
        end / 2,
        BLOCK_BYTES,
        fold,
    )
    .map(|(f, r, _, _)| (f, r))
}

/// [`fold_event_views`] over bytes, split at the first line start at or past `at` (tests
/// split everywhere), reading `block` bytes at a time. Also returns the offset where the
/// tail's results were taken (`None`: the head read to the end).
pub fn fold_views_split<F: SplitFold + Send + 'static>(
    bytes: &[u8],
    at: u64,
    block: usize,
    fold: F,
) -> std::io::Result<(F, ReadReport, Option<u64>)> {
    fold_split(
        &bytes,
        Cursor::default(),
        bytes.len() as u64,
        at,
        block,
        fold,
    )
    .map(|(f, r, at, _)| (f, r, at))
}

/// Where the two halves are read from.
trait Source: Sync {
    /// A reader of bytes `from..to`.
    fn range(&self, from: u64, to: u64) -> impl Read + '_;
    /// A reader of bytes `from..to` that owns what it reads (for the helper thread).
    fn owned_range(&self, from: u64, to: u64) -> std::io::Result<impl Read + Send + 'static>;
}

impl Source for &[u8] {
    fn range(&self, from: u64, to: u64) -> impl Read + '_ {
        let (from, to) = (
            usize::try_from(from).unwrap_or(usize::MAX).min(self.len()),
            usize::try_from(to).unwrap_or(usize::MAX).min(self.len()),
        );
        self.get(from..to).unwrap_or_default()
    }

    fn owned_range(&self, from: u64, to: u64) -> std::io::Result<impl Read + Send + 'static> {
        // Tests split bytes in memory: a copy of the tail.
        let mut r = self.range(from, to);
        let mut copy = Vec::new();
        r.read_to_end(&mut copy)?;
        Ok(std::io::Cursor::new(copy))
    }
}

/// A file read at offsets (`pread`), so both threads read one descriptor.
struct FileSource<'a>(&'a std::fs::File);

impl Source for FileSource<'_> {
    fn range(&self, from: u64, to: u64) -> impl Read + '_ {
        fsutil::RangeReader::new(self.0, from, to)
    }

    fn owned_range(&self, from: u64, to: u64) -> std::io::Result<impl Read + Send + 'static> {
        Ok(fsutil::RangeReader::new(self.0.try_clone()?, from, to))
    }
}

/// The first line start at or past `at` (`len` when there is none).
fn line_start<S: Source>(src: &S, len: u64, at: u64) -> std::io::Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    crate::jsonl::line_start_in(src.range(at - 1, len), at, len)
}

/// Folds `src` from `start` to `len`, split at the first line start at or past `at`: the fold,
/// the report, where the tail's results were taken (`None`: the head read to the end) and
/// where the read ended.
fn fold_split<S: Source, F: SplitFold + Send + 'static>(
    src: &S,
    start: Cursor,
    len: u64,
    at: u64,
    block: usize,
    mut fold: F,
) -> std::io::Result<(F, ReadReport, Option<u64>, Cursor)> {
    let split = line_start(src, len, at.clamp(start.offset, len))?;
    let mut report = ReadReport::default();
    if split >= len || split <= start.offset {
        let stop = read_lines(
            src.range(start.offset, len),
            block,
            start,
            &mut report,
            &mut Events(|v: &EventView<'_>| fold.apply_view(v)),
        )?;
        return Ok((fold, report, None, stop.cursor()));
    }
    // The tail on the helper thread (`crate::helper`), through a reader of its own.
    let tail_reader = src.owned_range(split, len)?;
    let tail = fold.tail();
    let pending = crate::helper::run(move || {
        let mut tail = tail;
        let mut report = ReadReport::default();
        let start = Cursor {
            line_no: 0,
            offset: split,
        };
        let read = read_lines(tail_reader, block, start, &mut report, &mut Tail(&mut tail));
        (tail, read.map(|stop| (report, stop)))
    });
    let head = read_lines(
        src.range(start.offset, split),
        block,
        start,
        &mut report,
        &mut Events(|v: &EventView<'_>| fold.apply_view(v)),
    );
    let (tail, tail_read) = pending
        .join()
        .map_err(|_| std::io::Error::other("the tail fold panicked"))?;
    let (at_split, (tail_report, tail_stop)) = (head?, tail_read?);
    // Read on past the split until the head can take the tail's results.
    let (events, unknown) = (report.events, report.unknown);
    let stop = read_lines(
        src.range(split, len),
        block,
        Cursor {
            line_no: at_split.line_no,
            offset: at_split.offset,
        },
        &mut report,
        &mut Resume {
            fold: &mut fold,
            tail: &tail,
        },
    )?;
    if stop.stopped {
        let from = stop.offset;
        fold.splice(tail, from);
        // The tail read [split, from) as the head just did: count only what follows.
        report.events += tail_report.events.saturating_sub(report.events - events);
        report.unknown += tail_report.unknown.saturating_sub(report.unknown - unknown);
        report.issues.extend(
            tail_report
                .issues
                .into_iter()
                .filter(|i| i.offset >= from)
                .map(|mut i| {
                    i.line += at_split.line_no;
                    i
                }),
        );
        let end = Cursor {
            line_no: at_split.line_no + tail_stop.line_no,
            offset: tail_stop.offset,
        };
        return Ok((fold, report, Some(from), end));
    }
    Ok((fold, report, None, stop.cursor()))
}

/// Where a read stands: lines read before, and the offset of the next line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) line_no: u64,
    pub(crate) offset: u64,
}

/// Where a read ended.
#[derive(Debug, Clone, Copy)]
struct Stop {
    line_no: u64,
    offset: u64,
    /// `before_line` asked to stop before the line at `offset`.
    stopped: bool,
}

impl Stop {
    fn cursor(self) -> Cursor {
        Cursor {
            line_no: self.line_no,
            offset: self.offset,
        }
    }
}

/// What a read feeds.
trait Lines {
    /// The line at `offset` is next; `true` stops the read before it.
    fn before_line(&mut self, offset: u64) -> bool;
    fn event(&mut self, v: &EventView<'_>);
}

struct Events<E>(E);

impl<E: FnMut(&EventView<'_>)> Lines for Events<E> {
    fn before_line(&mut self, _: u64) -> bool {
        false
    }
    fn event(&mut self, v: &EventView<'_>) {
        (self.0)(v);
    }
}

/// A tail fold: marks recorded at line starts.
struct Tail<'a, F>(&'a mut F);

impl<F: SplitFold> Lines for Tail<'_, F> {
    fn before_line(&mut self, offset: u64) -> bool {
        self.0.boundary(offset);
        false
    }
    fn event(&mut self, v: &EventView<'_>) {
        self.0.apply_view(v);
    }
}

/// The head read on past the split, until it can take the tail.
struct Resume<'a, F> {
    fold: &'a mut F,
    tail: &'a F,
}

impl<F: SplitFold> Lines for Resume<'_, F> {
    fn before_line(&mut self, offset: u64) -> bool {
        self.fold.can_splice(self.tail, offset)
    }
    fn event(&mut self, v: &EventView<'_>) {
        self.fold.apply_view(v);
    }
}

/// Reads lines from `start` into `sink`, adding to `report`.
fn read_lines<R: Read>(
    mut reader: R,
    block: usize,
    start_at: Cursor,
    report: &mut ReadReport,
    sink: &mut impl Lines,
) -> std::io::Result<Stop> {
    let block = block.max(1);
    let mut buf = vec![0u8; block];
    // buf[start..filled] is unread; `offset` is the file offset of buf[start].
    let (mut start, mut filled) = (0usize, 0usize);
    let Cursor {
        mut line_no,
        mut offset,
    } = start_at;
    let done = |line_no, offset, stopped| Stop {
        line_no,
        offset,
        stopped,
    };
    // A line past the limit: (its number, offset, length so far), skipped to its newline.
    let mut too_long: Option<(u64, u64, u64)> = None;
    loop {
        if start > 0 {
            buf.copy_within(start..filled, 0);
            filled -= start;
            start = 0;
        }
        if filled == buf.len() {
            if buf.len() > MAX_LINE_BYTES {
                // The line in the buffer is too long to keep: measure it to its end.
                let (no, off) = (line_no + 1, offset);
                too_long = Some((no, off, filled as u64));
                filled = 0;
            } else {
                let grown = (buf.len() * 2).min(MAX_LINE_BYTES + 1).max(buf.len() + 1);
                buf.resize(grown, 0);
            }
        }
        let n = match reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let eof = n == 0;
        filled += n;
        if let Some((no, off, len)) = too_long {
            match memchr::memchr(b'\n', &buf[..filled]) {
                Some(i) => {
                    let len = len + i as u64;
                    report.issues.push(LineIssue {
                        line: no,
                        offset: off,
                        len,
                        kind: IssueKind::TooLong,
                    });
                    line_no = no;
                    offset = off + len + 1;
                    start = i + 1;
                    too_long = None;
                }
                None if eof => {
                    // An unterminated line past the limit is not kept, so not reported (as
                    // the typed reader).
                    return Ok(done(line_no, offset, false));
                }
                None => {
                    too_long = Some((no, off, len + filled as u64));
                    filled = 0;
                    continue;
                }
            }
        }
        while let Some(i) = memchr::memchr(b'\n', &buf[start..filled]) {
            if sink.before_line(offset) {
                return Ok(done(line_no, offset, true));
            }
            line_no += 1;
            line(report, line_no, offset, &buf[start..start + i], sink);
            offset += i as u64 + 1;
            start += i + 1;
        }
        if eof {
            let rest = &buf[start..filled];
            if !rest.is_empty() && !is_blank(rest) {
                if sink.before_line(offset) {
                    return Ok(done(line_no, offset, true));
                }
                report.issues.push(LineIssue {
                    line: line_no + 1,
                    offset,
                    len: rest.len() as u64,
                    kind: IssueKind::Torn,
                });
            }
            return Ok(done(line_no, offset, false));
        }
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Whether the line has no lone surrogate escape (the view path's condition besides UTF-8).
fn no_lone_surrogates(line: &[u8]) -> bool {
    // One finder for every line: building it per line was 3% of a trace.
    static ESCAPE_U: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\\u"));
    ESCAPE_U.find(line).is_none() || freecode_core::json::replace_lone_surrogates(line).is_none()
}

fn line(report: &mut ReadReport, no: u64, offset: u64, bytes: &[u8], sink: &mut impl Lines) {
    if is_blank(bytes) {
        return;
    }
    // The scanner first (it gives up on any surrogate escape), then serde_json's view of a
    // line without lone surrogates, then the typed reader's path.
    if let Ok(text) = std::str::from_utf8(bytes) {
        let viewed = |report: &mut ReadReport, v: Result<EventView<'_>, _>, sink: &mut _| match v {
            Ok(v) => {
                report.events += 1;
                Lines::event(sink, &v);
            }
            Err(_) => report.unknown += 1,
        };
        if let Some(v) = ParsedLine::scan_view(text) {
            viewed(report, v, sink);
            return;
        }
        if no_lone_surrogates(bytes)
            && let Ok(parsed) = ParsedLine::parse_full(text)
        {
            viewed(report, parsed.view(), sink);
            return;
        }
    }
    // Everything else reads exactly as the typed reader reads it.
    let issue = |kind| LineIssue {
        line: no,
        offset,
        len: bytes.len() as u64,
        kind,
    };
    match freecode_core::json::from_slice_lossy::<RawEvent>(bytes) {
        Ok(raw) => {
            match Event::from_raw(raw.value) {
                Ok(e) => {
                    report.events += 1;
                    sink.event(&EventView::of(&e));
                }
                Err(_) => report.unknown += 1,
            }
            if raw.replaced > 0 {
                report
                    .issues
                    .push(issue(IssueKind::LoneSurrogates(raw.replaced)));
            }
        }
        Err(e) => report
            .issues
            .push(issue(IssueKind::Malformed(e.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(bytes: &[u8], block: usize) -> (ReadReport, Vec<i64>) {
        let mut ts = Vec::new();
        let r = read_views_from(bytes, block, |v| ts.push(v.timestamp)).unwrap();
        (r, ts)
    }

    fn typed(bytes: &[u8]) -> (ReadReport, Vec<i64>) {
        let mut ts = Vec::new();
        let r = super::super::read_events_from(bytes, |e| ts.push(e.timestamp)).unwrap();
        (r, ts)
    }

    #[test]
    fn lines_across_blocks_torn_tails_and_bad_lines_read_as_the_typed_reader_reads_them() {
        let log = b"{\"type\":\"turn.started\",\"timestamp\":1,\"turnId\":\"t\"}\n\n  \nnot json\n{\"type\":\"cache.warm\"}\n{\"timestamp\":2}\n{\"type\":\"turn.started\",\"timestamp\":\"3\"}\n{\"type\":\"turn.aborted\",\"timestamp\":4,\"reason\":\"\\ud83d\"}\n\xff\n{\"type\":\"turn";
        let want = typed(log);
        assert_eq!(want.1, [1, 4]);
        assert_eq!(want.0.unknown, 2);
        assert_eq!(want.0.issues.len(), 5, "{:?}", want.0.issues);
        assert_eq!(want.0.issues[4].kind, IssueKind::Torn);
        for block in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(views(log, block), want, "block {block}");
        }
    }
}
