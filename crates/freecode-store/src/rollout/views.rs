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
    mut reader: R,
    block: usize,
    mut on_event: impl FnMut(&EventView<'_>),
) -> std::io::Result<ReadReport> {
    let block = block.max(1);
    let mut report = ReadReport::default();
    let mut buf = vec![0u8; block];
    // buf[start..filled] is unread; `offset` is the file offset of buf[start].
    let (mut start, mut filled) = (0usize, 0usize);
    let (mut line_no, mut offset) = (0u64, 0u64);
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
                    return Ok(report);
                }
                None => {
                    too_long = Some((no, off, len + filled as u64));
                    filled = 0;
                    continue;
                }
            }
        }
        while let Some(i) = memchr::memchr(b'\n', &buf[start..filled]) {
            line_no += 1;
            line(
                &mut report,
                line_no,
                offset,
                &buf[start..start + i],
                &mut on_event,
            );
            offset += i as u64 + 1;
            start += i + 1;
        }
        if eof {
            let rest = &buf[start..filled];
            if !rest.is_empty() && !is_blank(rest) {
                report.issues.push(LineIssue {
                    line: line_no + 1,
                    offset,
                    len: rest.len() as u64,
                    kind: IssueKind::Torn,
                });
            }
            return Ok(report);
        }
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Whether the fast path may take the line: UTF-8 with no lone surrogate escape.
fn fast_text(line: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(line).ok()?;
    if memchr::memmem::find(line, b"\\u").is_some()
        && freecode_core::json::replace_lone_surrogates(line).is_some()
    {
        return None;
    }
    Some(text)
}

fn line(
    report: &mut ReadReport,
    no: u64,
    offset: u64,
    bytes: &[u8],
    on_event: &mut impl FnMut(&EventView<'_>),
) {
    if is_blank(bytes) {
        return;
    }
    if let Some(parsed) = fast_text(bytes).and_then(|t| ParsedLine::parse(t).ok()) {
        match parsed.view() {
            Ok(v) => {
                report.events += 1;
                on_event(&v);
            }
            Err(_) => report.unknown += 1,
        }
        return;
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
                    on_event(&EventView::of(&e));
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
