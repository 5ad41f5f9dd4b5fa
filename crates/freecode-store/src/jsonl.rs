//! Tolerant reading of line logs (`messages.jsonl`, later `events.jsonl`).
//!
//! A bad line — malformed JSON, invalid UTF-8, NUL bytes, a wrong shape — is skipped and reported
//! with its 1-based line number and byte offset; it never fails the read (SPEC §19.11). An
//! unterminated last line is a *torn tail* (a crash mid-append): every acknowledged append ends
//! in `\n`, so it is reported and skipped, and the next writer cuts it off before appending.
//! Blank lines are ignored. A line holding lone UTF-16 surrogate escapes (the original's
//! `JSON.stringify` writes them for a string cut inside an emoji) is read with each as U+FFFD
//! and reported as [`IssueKind::LoneSurrogates`], but kept.

use std::io::{BufRead, Read};

use serde::de::DeserializeOwned;

/// Lines longer than this are reported as [`IssueKind::TooLong`] (or, at the end of the file
/// without a newline, [`IssueKind::Torn`]) and not parsed; no reader holds more of one than
/// this (the one cap of [`freecode_core::limits`]).
pub use freecode_core::limits::MAX_LINE_BYTES;

/// Refuses a line (its newline included) that no reader would take back.
pub(crate) fn check_line(path: &std::path::Path, line: &[u8]) -> crate::error::Result<()> {
    let len = line.strip_suffix(b"\n").unwrap_or(line).len();
    if len > MAX_LINE_BYTES {
        return Err(crate::error::StoreError::LineTooLong {
            path: path.to_owned(),
            len: len as u64,
        });
    }
    Ok(())
}

/// Below this size a log is parsed on one thread.
const PARALLEL_THRESHOLD: usize = 4 * 1024 * 1024;

/// What was wrong with a skipped line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IssueKind {
    /// The last line has no terminating newline: a crash mid-append.
    Torn,
    /// The line is not a valid record; the parser's message.
    Malformed(String),
    /// The line exceeds [`MAX_LINE_BYTES`].
    TooLong,
    /// Not skipped: the line held this many lone UTF-16 surrogate escapes, read as U+FFFD.
    LoneSurrogates(usize),
}

impl IssueKind {
    /// Whether the line was skipped (every kind but [`IssueKind::LoneSurrogates`]).
    pub fn skipped(&self) -> bool {
        !matches!(self, Self::LoneSurrogates(_))
    }
}

/// A skipped line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineIssue {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Length of the line in bytes, without the newline.
    pub len: u64,
    /// What was wrong.
    pub kind: IssueKind,
}

impl std::fmt::Display for LineIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.kind {
            IssueKind::Torn => "torn (unterminated) last line".to_owned(),
            IssueKind::Malformed(m) => format!("malformed line: {m}"),
            IssueKind::TooLong => format!("line longer than {MAX_LINE_BYTES} bytes"),
            IssueKind::LoneSurrogates(n) => format!(
                "{n} lone UTF-16 surrogate{} read as U+FFFD (the line is kept)",
                if *n == 1 { "" } else { "s" }
            ),
        };
        write!(
            f,
            "line {} (byte offset {}, {} bytes): {what}",
            self.line, self.offset, self.len
        )
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Parses one line: the record, if it is one, and what to report about the line.
fn parse_one<T: DeserializeOwned>(
    no: u64,
    offset: u64,
    line: &[u8],
    scan: fn(&str) -> Option<T>,
) -> (Option<T>, Option<LineIssue>) {
    let issue = |kind| LineIssue {
        line: no,
        offset,
        len: line.len() as u64,
        kind,
    };
    if line.len() > MAX_LINE_BYTES {
        return (None, Some(issue(IssueKind::TooLong)));
    }
    if let Some(v) = std::str::from_utf8(line).ok().and_then(scan) {
        return (Some(v), None);
    }
    match freecode_core::json::from_slice_lossy(line) {
        Ok(v) if v.replaced == 0 => (Some(v.value), None),
        Ok(v) => (
            Some(v.value),
            Some(issue(IssueKind::LoneSurrogates(v.replaced))),
        ),
        Err(e) => (None, Some(issue(IssueKind::Malformed(e.to_string())))),
    }
}

/// Parses the lines of `buf[start..end]` (which begins at a line start), numbering from
/// `first_line`; `base` is the file offset of `buf[0]`, and an unterminated last line is torn
/// only when `buf` ends at the end of the file (`eof`).
fn parse_range<T: DeserializeOwned>(
    buf: &[u8],
    range: (usize, usize),
    first_line: u64,
    base: u64,
    eof: bool,
    decode: Decode<T>,
) -> (Vec<T>, Vec<LineIssue>, u64) {
    let mut items = Vec::new();
    let (issues, lines) = parse_range_into(buf, range, first_line, base, eof, decode, &mut items);
    (items, issues, lines)
}

/// [`parse_range`], pushing the records onto `items`.
fn parse_range_into<T: DeserializeOwned>(
    buf: &[u8],
    (start, end): (usize, usize),
    first_line: u64,
    base: u64,
    eof: bool,
    decode: Decode<T>,
    items: &mut Vec<T>,
) -> (Vec<LineIssue>, u64) {
    let mut issues = Vec::new();
    let mut no = first_line;
    let mut pos = start;
    while pos < end {
        let nl = memchr::memchr(b'\n', &buf[pos..end]);
        let (line, next) = match nl {
            Some(i) => (&buf[pos..pos + i], pos + i + 1),
            None => (&buf[pos..end], end),
        };
        let offset = base + pos as u64;
        if nl.is_none() && end == buf.len() && eof {
            if !is_blank(line) {
                let len = line.len() as u64;
                issues.push(LineIssue {
                    line: no,
                    offset,
                    len,
                    kind: IssueKind::Torn,
                });
            }
        } else if !is_blank(line) {
            let (item, issue) = parse_one(no, offset, line, decode.scan);
            if let Some(mut item) = item {
                (decode.finish)(&mut item);
                items.push(item);
            }
            issues.extend(issue);
        }
        no += 1;
        pos = next;
    }
    (issues, no - first_line)
}

/// Parses a block of lines starting at line `first_line` and file offset `base`, on several
/// threads when it is large; `eof` says whether the block ends the file. Returns the items, the
/// issues and the number of lines.
pub fn parse_block<T: DeserializeOwned + Send>(
    buf: &[u8],
    first_line: u64,
    base: u64,
    eof: bool,
) -> (Vec<T>, Vec<LineIssue>, u64) {
    parse_block_with(buf, first_line, base, eof, Decode::PLAIN)
}

/// What a block reader does besides `serde_json`, on the thread that parses each line.
pub struct Decode<T> {
    /// Tried first on each line that is UTF-8: the record, or `None` to hand the line to
    /// `serde_json` (a fast reader that gives the same record, such as
    /// [`StoredMessage::scan`](freecode_core::StoredMessage::scan)).
    pub scan: fn(&str) -> Option<T>,
    /// Applied to each record (a `shrink_to_fit` there runs on all cores instead of after the
    /// parse, on one).
    pub finish: fn(&mut T),
}

impl<T> Clone for Decode<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Decode<T> {}

impl<T> Decode<T> {
    /// `serde_json` alone, records as parsed.
    pub const PLAIN: Self = Self {
        scan: |_| None,
        finish: |_| {},
    };
}

/// [`parse_block`], with `decode`'s reader and finishing step.
pub fn parse_block_with<T: DeserializeOwned + Send>(
    buf: &[u8],
    first_line: u64,
    base: u64,
    eof: bool,
    decode: Decode<T>,
) -> (Vec<T>, Vec<LineIssue>, u64) {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(8);
    if buf.len() < PARALLEL_THRESHOLD || threads < 2 {
        return parse_range(buf, (0, buf.len()), first_line, base, eof, decode);
    }
    // Chunk boundaries just after a newline, so every chunk starts at a line start.
    let mut bounds = vec![0];
    for k in 1..threads {
        let from = (buf.len() * k / threads).max(*bounds.last().unwrap_or(&0));
        if let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
            bounds.push(from + i + 1);
        }
    }
    bounds.push(buf.len());
    bounds.dedup();
    let parts: Vec<(Vec<T>, Vec<LineIssue>, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|w| {
                let range = (w[0], w[1]);
                s.spawn(move || parse_range::<T>(buf, range, 0, base, eof, decode))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let total: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut items = Vec::with_capacity(total);
    let mut issues = Vec::new();
    let mut next_line = first_line;
    for (mut it, iss, lines) in parts {
        items.append(&mut it);
        issues.extend(iss.into_iter().map(|mut i| {
            i.line += next_line;
            i
        }));
        next_line += lines;
    }
    (items, issues, next_line - first_line)
}

/// One block of a log read by [`Blocks`]: its records and what was wrong with its lines.
#[derive(Debug)]
pub struct Block<T> {
    /// The records, in file order.
    pub items: Vec<T>,
    /// The block's skipped (or repaired) lines, with file-wide line numbers and offsets.
    pub issues: Vec<LineIssue>,
}

/// Pulls a log a block at a time (about `block` bytes, cut after a newline), each block parsed
/// by [`parse_block`] (on several threads when it is large). Memory: one block of the file plus
/// the records of the block the caller holds, so a consumer that writes each block out as it
/// arrives runs in bounded memory whatever the size of the log. A line past
/// [`MAX_LINE_BYTES`] is read on to its end a block at a time, never held, and reported with
/// the next block ([`IssueKind::TooLong`], or [`IssueKind::Torn`] at the end of the file).
pub struct Blocks<R> {
    reader: R,
    buf: Vec<u8>,
    line: u64,
    base: u64,
    block: usize,
    done: bool,
    /// Whether a large block is parsed on several threads.
    parallel: bool,
    /// Lines past the cap, skipped while filling, reported with the next block.
    skipped: Vec<LineIssue>,
}

impl<R: Read> Blocks<R> {
    /// Reads `reader` from its start (line 1, offset 0) in blocks of about `block` bytes.
    pub fn new(reader: R, block: usize) -> Self {
        Self {
            reader,
            buf: Vec::new(),
            line: 1,
            base: 0,
            block: block.max(1),
            done: false,
            parallel: true,
            skipped: Vec::new(),
        }
    }

    /// Reads `reader` as the part of a log from line `line` at file offset `base` on (a line
    /// start), each block parsed on this thread alone: what a reader of one part of a log on
    /// its own thread uses.
    pub fn part(reader: R, block: usize, line: u64, base: u64) -> Self {
        Self {
            line,
            base,
            parallel: false,
            ..Self::new(reader, block)
        }
    }

    /// Reads blocks of at most about `max` bytes from here on.
    pub fn cap_block(&mut self, max: usize) {
        self.block = self.block.min(max.max(1));
    }

    /// The number of the next line to be read (1 + the lines read so far, from the start).
    pub fn next_line(&self) -> u64 {
        self.line
    }

    /// The file offset of the next line to be read (after the last block handed out).
    pub fn offset(&self) -> u64 {
        self.base
    }

    /// Whether the last block handed out was the file's last.
    pub fn at_end(&self) -> bool {
        self.done
    }

    /// The next block, or `None` after the last one.
    pub fn next_block<T: DeserializeOwned + Send>(&mut self) -> std::io::Result<Option<Block<T>>> {
        self.next_block_with(Decode::PLAIN)
    }

    /// The next block's records pushed onto `items`, parsed on this thread; its issues, or
    /// `None` after the last block. What a reader of one part of a log uses: no vector per
    /// block (a load of 100,000 messages allotted and freed a few MB of them).
    pub fn next_block_into<T: DeserializeOwned>(
        &mut self,
        decode: Decode<T>,
        items: &mut Vec<T>,
    ) -> std::io::Result<Option<Vec<LineIssue>>> {
        let Some((cut, eof)) = self.fill()? else {
            return Ok(None);
        };
        let buf = &self.buf[..cut];
        let (issues, lines) = parse_range_into(
            buf,
            (0, buf.len()),
            self.line,
            self.base,
            eof,
            decode,
            items,
        );
        self.advance(cut, lines, eof);
        Ok(Some(self.with_skipped(issues)))
    }

    /// Reads up to the next block's end: the length of its complete lines and whether it ends
    /// the file; `None` when done.
    fn fill(&mut self) -> std::io::Result<Option<(usize, bool)>> {
        if self.done {
            return Ok(None);
        }
        let mut target = self.block;
        loop {
            // Into the spare capacity, without zeroing it first; a short read is the end.
            let want = target.saturating_sub(self.buf.len());
            self.buf.reserve(want);
            (&mut self.reader)
                .take(want as u64)
                .read_to_end(&mut self.buf)?;
            let eof = self.buf.len() < target;
            if eof {
                return Ok(Some((self.buf.len(), true)));
            }
            match memchr::memrchr(b'\n', &self.buf) {
                Some(i) => return Ok(Some((i + 1, false))),
                // A line past the cap: measured to its end, not kept.
                None if self.buf.len() > MAX_LINE_BYTES => {
                    self.skip_long_line()?;
                    target = self.block;
                }
                // A line longer than the block: read on.
                None => target = self.buf.len() + self.block,
            }
        }
    }

    /// The buffer holds the start of a line past [`MAX_LINE_BYTES`] and no newline: reads on a
    /// block at a time (into the same buffer) to the line's end, and records it as skipped.
    /// The buffer is left holding what follows the line's newline.
    fn skip_long_line(&mut self) -> std::io::Result<()> {
        let (line, offset) = (self.line, self.base);
        let mut len = self.buf.len() as u64;
        loop {
            self.buf.clear();
            (&mut self.reader)
                .take(self.block as u64)
                .read_to_end(&mut self.buf)?;
            if self.buf.is_empty() {
                // The end of the file: a torn tail.
                self.base += len;
                self.skipped.push(LineIssue {
                    line,
                    offset,
                    len,
                    kind: IssueKind::Torn,
                });
                break;
            }
            if let Some(i) = memchr::memchr(b'\n', &self.buf) {
                len += i as u64;
                self.buf.drain(..=i);
                self.line += 1;
                self.base += len + 1;
                self.skipped.push(LineIssue {
                    line,
                    offset,
                    len,
                    kind: IssueKind::TooLong,
                });
                break;
            }
            len += self.buf.len() as u64;
        }
        self.buf.shrink_to(self.block);
        Ok(())
    }

    /// `issues` after the lines skipped while filling (which come before them in the file).
    fn with_skipped(&mut self, issues: Vec<LineIssue>) -> Vec<LineIssue> {
        if self.skipped.is_empty() {
            return issues;
        }
        let mut all = std::mem::take(&mut self.skipped);
        all.extend(issues);
        all
    }

    /// Moves past a parsed block of `cut` bytes and `lines` lines.
    fn advance(&mut self, cut: usize, lines: u64, eof: bool) {
        self.line += lines;
        self.base += cut as u64;
        // Only the start of the next block's first line moves.
        self.buf.copy_within(cut.., 0);
        self.buf.truncate(self.buf.len() - cut);
        self.done = eof;
    }

    /// [`Blocks::next_block`], each line read with `decode` ([`parse_block_with`]).
    pub fn next_block_with<T: DeserializeOwned + Send>(
        &mut self,
        decode: Decode<T>,
    ) -> std::io::Result<Option<Block<T>>> {
        let Some((cut, eof)) = self.fill()? else {
            return Ok(None);
        };
        let buf = &self.buf[..cut];
        let (items, issues, lines) = if self.parallel {
            parse_block_with::<T>(buf, self.line, self.base, eof, decode)
        } else {
            parse_range::<T>(buf, (0, buf.len()), self.line, self.base, eof, decode)
        };
        self.advance(cut, lines, eof);
        let issues = self.with_skipped(issues);
        Ok(Some(Block { items, issues }))
    }

    /// The next block's bytes, unparsed, with where it starts: what a reader that parses blocks
    /// on other threads uses ([`RawBlock::parse_with`]). `spare` becomes the reader's buffer for
    /// the blocks after (a buffer handed back by a consumer, so none is allotted afresh).
    pub fn next_raw(&mut self, spare: Vec<u8>) -> std::io::Result<Option<RawBlock>> {
        let Some((cut, eof)) = self.fill()? else {
            return Ok(None);
        };
        let mut next = spare;
        next.clear();
        // Only the start of the next block's first line moves.
        next.extend_from_slice(&self.buf[cut..]);
        let mut bytes = std::mem::replace(&mut self.buf, next);
        bytes.truncate(cut);
        let block = RawBlock {
            line: self.line,
            base: self.base,
            eof,
            bytes,
            skipped: std::mem::take(&mut self.skipped),
        };
        // Every line but an unterminated last one ends in a newline, and nothing follows that.
        self.line += memchr::memchr_iter(b'\n', &block.bytes).count() as u64;
        self.base += cut as u64;
        self.done = eof;
        Ok(Some(block))
    }
}

/// A block of whole lines read by [`Blocks::next_raw`], to be parsed elsewhere.
#[derive(Debug)]
pub struct RawBlock {
    /// The number of its first line.
    pub line: u64,
    /// The file offset of its first byte.
    pub base: u64,
    /// Whether it ends the file (so an unterminated last line is torn).
    pub eof: bool,
    /// Its bytes: whole lines.
    pub bytes: Vec<u8>,
    /// Lines past [`MAX_LINE_BYTES`] skipped just before it, never held.
    pub skipped: Vec<LineIssue>,
}

impl RawBlock {
    /// Its records and issues, parsed on this thread as [`Blocks`] parses a block, with
    /// file-wide line numbers and offsets.
    pub fn parse_with<T: DeserializeOwned>(&self, decode: Decode<T>) -> Block<T> {
        let (items, mut issues, _) = parse_range(
            &self.bytes,
            (0, self.bytes.len()),
            self.line,
            self.base,
            self.eof,
            decode,
        );
        if !self.skipped.is_empty() {
            issues.splice(0..0, self.skipped.iter().cloned());
        }
        Block { items, issues }
    }
}

/// Reads a whole log from `reader` a block at a time (about `block` bytes, cut at a newline),
/// handing each block's items to `on_items`. Memory: one block plus what the caller keeps.
pub fn read_blocks<T: DeserializeOwned + Send, R: Read>(
    reader: R,
    block: usize,
    mut on_items: impl FnMut(Vec<T>),
) -> std::io::Result<Vec<LineIssue>> {
    let mut blocks = Blocks::new(reader, block);
    let mut issues = Vec::new();
    while let Some(b) = blocks.next_block::<T>()? {
        on_items(b.items);
        issues.extend(b.issues);
    }
    Ok(issues)
}

/// One line read by a [`LineReader`].
#[derive(Debug)]
pub struct Line {
    /// 1-based line number.
    pub no: u64,
    /// Byte offset of its first byte.
    pub offset: u64,
    /// Its bytes without the newline (empty when it was too long).
    pub bytes: Vec<u8>,
    /// Its full length.
    pub len: u64,
    /// Whether it ended in a newline.
    pub terminated: bool,
}

/// Streams lines from a reader in constant memory (bounded by the longest line it keeps).
pub struct LineReader<R> {
    inner: R,
    no: u64,
    offset: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Reads lines from `inner`, which is positioned at a line start at byte `offset`.
    pub fn new(inner: R, offset: u64) -> Self {
        Self {
            inner,
            no: 0,
            offset,
        }
    }

    /// The next line, or `None` at the end.
    pub fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        let mut len = 0u64;
        let mut terminated = false;
        let mut too_long = false;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            let content = if done { &buf[..take - 1] } else { &buf[..take] };
            if !too_long && bytes.len() + content.len() <= MAX_LINE_BYTES {
                bytes.extend_from_slice(content);
            } else {
                // Past the limit the line is only measured, never kept.
                too_long = true;
                bytes = Vec::new();
            }
            len += content.len() as u64;
            self.inner.consume(take);
            if done {
                terminated = true;
                break;
            }
        }
        if len == 0 && !terminated {
            return Ok(None);
        }
        self.no += 1;
        let line = Line {
            no: self.no,
            offset: self.offset,
            bytes,
            len,
            terminated,
        };
        self.offset += len + u64::from(terminated);
        Ok(Some(line))
    }
}

/// Streams parsed records, reporting each skipped line to `on_issue`.
pub fn stream<T: DeserializeOwned, R: Read>(
    reader: R,
    mut on_item: impl FnMut(T),
    mut on_issue: impl FnMut(LineIssue),
) -> std::io::Result<()> {
    let mut lines = LineReader::new(std::io::BufReader::with_capacity(256 * 1024, reader), 0);
    while let Some(line) = lines.next_line()? {
        let issue = |kind| LineIssue {
            line: line.no,
            offset: line.offset,
            len: line.len,
            kind,
        };
        if !line.terminated {
            if !is_blank(&line.bytes) {
                on_issue(issue(IssueKind::Torn));
            }
        } else if line.len as usize > MAX_LINE_BYTES {
            on_issue(issue(IssueKind::TooLong));
        } else if !is_blank(&line.bytes) {
            let (item, issue) = parse_one(line.no, line.offset, &line.bytes, Decode::PLAIN.scan);
            if let Some(v) = item {
                on_item(v);
            }
            if let Some(i) = issue {
                on_issue(i);
            }
        }
    }
    Ok(())
}

/// The offset of the first line start at or after `at` in the first `len` bytes of `file`
/// (`len` when no line starts there).
pub fn line_start(file: &std::fs::File, at: u64, len: u64) -> std::io::Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    line_start_in(crate::fsutil::RangeReader::new(file, at - 1, len), at, len)
}

/// [`line_start`] for `at > 0`, reading from `r`, which starts at byte `at - 1` of a log of
/// `len` bytes.
pub(crate) fn line_start_in(mut r: impl Read, at: u64, len: u64) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 64 << 10];
    let mut pos = at - 1;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(len),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(pos + i as u64 + 1);
        }
        pos += n as u64;
    }
}

#[cfg(test)]
mod tests;
