//! Streaming a JSON Lines source file line by line, as the agent may be writing it right now.
//!
//! [`for_each_line`] reads with a bounded buffer (a line is read, never the whole file),
//! strips a UTF-8 byte-order mark and `\r\n`, skips blank and NUL-filled lines (torn writes of
//! older builds) and stops at the last complete line: a tail without its newline is still being
//! written, so it is reported and left for the next import. A line past
//! [`MAX_LINE_BYTES`] (the one cap of every log line) is measured to its end and skipped, never
//! held, whether it is complete or the torn tail. Every skip becomes a [`SourceIssue`] with its
//! line number.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use freecode_core::limits::MAX_LINE_BYTES;

use crate::source::{ReadError, SourceIssue};

/// One complete line of a source file.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// Its 1-based number.
    pub number: u64,
    /// The byte offset of its start.
    pub offset: u64,
    /// Its bytes, without the newline (and without a BOM on line 1).
    pub bytes: &'a [u8],
}

/// What [`for_each_line`] saw of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extent {
    /// Bytes up to and including the last complete line's newline: what was read.
    pub complete_len: u64,
    /// Complete lines delivered.
    pub lines: u64,
    /// Whether a tail without a newline was left unread.
    pub torn_tail: bool,
}

/// Calls `each` for every complete, non-blank line of `path`, in order. Skips are pushed to
/// `issues`; only failing to open or read the file is an error.
pub fn for_each_line(
    path: &Path,
    issues: &mut Vec<SourceIssue>,
    each: impl FnMut(Line<'_>),
) -> Result<Extent, ReadError> {
    let file = File::open(path).map_err(|e| ReadError::io(path, e))?;
    let reader = BufReader::with_capacity(256 * 1024, file);
    for_each_line_in(path, reader, issues, each).map_err(|e| ReadError::io(path, e.source))
}

/// A read that failed part-way through a stream, after `line` lines.
#[derive(Debug)]
pub struct StreamError {
    /// Lines read (complete or skipped) before the failure.
    pub line: u64,
    /// What the reader said.
    pub source: std::io::Error,
}

/// [`for_each_line`]'s rules over any stream (a decompressed `.jsonl.zst`, say); `path` names
/// it in issues. On a failed read, the lines before it have been delivered.
pub fn for_each_line_in(
    path: &Path,
    mut reader: impl BufRead,
    issues: &mut Vec<SourceIssue>,
    mut each: impl FnMut(Line<'_>),
) -> Result<Extent, StreamError> {
    let mut buf = Vec::new();
    let mut extent = Extent::default();
    let mut number = 0u64;
    loop {
        let read = read_line(&mut reader, &mut buf).map_err(|source| StreamError {
            line: number,
            source,
        })?;
        let n = read.len;
        if n == 0 {
            break;
        }
        number += 1;
        let offset = extent.complete_len;
        if read.overlong && read.terminated {
            extent.complete_len += n;
            issues.push(SourceIssue::at_line(
                path,
                number,
                format!(
                    "line of {} bytes at offset {offset} skipped: longer than {MAX_LINE_BYTES} \
                     bytes, the most a line may hold",
                    n - 1
                ),
            ));
            continue;
        }
        if !read.terminated {
            if !read.blank {
                extent.torn_tail = true;
                issues.push(SourceIssue::at_line(
                    path,
                    number,
                    format!(
                        "incomplete last line ({n} bytes without a newline at offset {offset}): \
                         left for the next import"
                    ),
                ));
            }
            break;
        }
        extent.complete_len += n;
        let mut bytes = &buf[..buf.len() - 1];
        if let Some(rest) = bytes.strip_suffix(b"\r") {
            bytes = rest;
        }
        if number == 1
            && let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF")
        {
            issues.push(SourceIssue::at_line(path, 1, "byte-order mark skipped"));
            bytes = rest;
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if bytes.contains(&0) && bytes.iter().all(|b| *b == 0 || b.is_ascii_whitespace()) {
            issues.push(SourceIssue::at_line(
                path,
                number,
                "NUL-filled line skipped",
            ));
            continue;
        }
        extent.lines += 1;
        each(Line {
            number,
            offset,
            bytes,
        });
    }
    Ok(extent)
}

/// What [`read_line`] read.
pub(crate) struct Read {
    /// Bytes consumed, the newline included.
    pub len: u64,
    /// Whether the line ended in a newline (not the end of the stream).
    pub terminated: bool,
    /// Whether it was past [`MAX_LINE_BYTES`] (and so not kept).
    pub overlong: bool,
    /// Whether every byte was whitespace or NUL.
    pub blank: bool,
}

/// Reads one line into `buf` (cleared first; with its newline), keeping at most
/// [`MAX_LINE_BYTES`] of it: past that the line is only measured, and `buf` is left empty.
pub(crate) fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Read> {
    buf.clear();
    let mut read = Read {
        len: 0,
        terminated: false,
        overlong: false,
        blank: true,
    };
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(read);
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let part = &chunk[..take];
        if read.blank {
            read.blank = part.iter().all(|b| b.is_ascii_whitespace() || *b == 0);
        }
        let content = part.len() - usize::from(done);
        if !read.overlong && buf.len() + content <= MAX_LINE_BYTES {
            buf.extend_from_slice(part);
        } else if !read.overlong {
            read.overlong = true;
            *buf = Vec::new();
        }
        read.len += take as u64;
        reader.consume(take);
        if done {
            read.terminated = true;
            return Ok(read);
        }
    }
}

/// Parses a line as JSON (lone UTF-16 surrogates read as U+FFFD); a line that isn't JSON is
/// reported and `None`.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    line: &Line<'_>,
    issues: &mut Vec<SourceIssue>,
) -> Option<T> {
    match freecode_core::json::from_slice_lossy(line.bytes) {
        Ok(lossy) => Some(lossy.value),
        Err(e) => {
            issues.push(SourceIssue::at_line(
                path,
                line.number,
                format!("not JSON, skipped: {e}"),
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Seen = Vec<(u64, Vec<u8>)>;

    fn lines_of(bytes: &[u8]) -> (Seen, Extent, Vec<SourceIssue>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let mut issues = Vec::new();
        let mut seen = Vec::new();
        let extent = for_each_line(&path, &mut issues, |line| {
            seen.push((line.number, line.bytes.to_vec()))
        })
        .unwrap();
        (seen, extent, issues)
    }

    #[test]
    fn bom_crlf_blank_nul_and_torn_tail() {
        let (seen, extent, issues) =
            lines_of(b"\xEF\xBB\xBF{\"a\":1}\r\n\n\0\0\0\n{\"b\":2}\n{\"c\":");
        assert_eq!(
            seen,
            vec![(1, b"{\"a\":1}".to_vec()), (4, b"{\"b\":2}".to_vec())]
        );
        assert_eq!(extent.lines, 2);
        assert!(extent.torn_tail);
        assert_eq!(extent.complete_len, 25);
        let lines: Vec<_> = issues.iter().map(|i| i.line).collect();
        assert_eq!(lines, vec![Some(1), Some(3), Some(5)]);
    }

    #[test]
    fn a_file_ending_in_a_newline_is_whole() {
        let (seen, extent, issues) = lines_of(b"{}\n{}\n");
        assert_eq!(seen.len(), 2);
        assert!(!extent.torn_tail);
        assert_eq!(extent.complete_len, 6);
        assert!(issues.is_empty());
    }
}
