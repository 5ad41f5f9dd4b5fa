//! The offset index of a `messages.jsonl`: where to start reading to reach message N without
//! reading the N before it.
//!
//! A *mark* is a line start with the number of messages before it (counted as a full read
//! counts them: lines that do not parse are not messages) and its line number. Marks are taken
//! about every [`STRIDE`] bytes while the log is read once; a page from message N reads from the
//! last mark at or before N, so it costs a stride and the page, whatever N is.
//!
//! The index is derived and never the source of truth: it lives in
//! `state/offsets/<session id>` (0600, written atomically, never through a link), is checked
//! against the log on every use and rebuilt when it does not match, and deleting it changes no
//! answer. It matches when the log is the same file (device and inode), at least as long as
//! the bytes the index covers, and its first and last [`PROBE`] covered bytes hash as they did
//! (SHA-256): an append keeps it, and the log's growth is indexed from the last mark on, so a
//! read pays only the new bytes; a compaction (a new file), a truncation or a rewrite in place
//! is found and the index rebuilt from the start. The file is versioned ([`MAGIC`]) and
//! checksummed; one that is short, of another version or corrupt is ignored and replaced.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use freecode_core::{SessionId, StoredMessage};
use sha2::{Digest, Sha256};

use crate::error::{IoContext, Result};
use crate::fsutil;
use crate::home::Home;
use crate::jsonl;

/// The file's first bytes: the format and its version.
pub const MAGIC: &[u8; 8] = b"FCOFFS01";
/// Bytes read between two marks (the block size of the indexing read).
pub const STRIDE: usize = 64 << 10;
/// Bytes hashed at each end of the covered part of the log.
pub const PROBE: u64 = 4096;
/// The most marks a file may hold (a 16 GiB log at one mark a stride): a bigger count is a
/// corrupt file, never an allocation.
const MAX_MARKS: u64 = 1 << 18;

/// A line start: its byte offset, its line number (from 1) and the messages before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Byte offset of the line start.
    pub offset: u64,
    /// Its line number, from 1.
    pub line: u64,
    /// Messages (parsed lines) before it.
    pub ordinal: u64,
}

impl Mark {
    /// The start of the log.
    pub const START: Mark = Mark {
        offset: 0,
        line: 1,
        ordinal: 0,
    };
}

/// The offset index of one log, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetIndex {
    dev: u64,
    ino: u64,
    head: [u8; 32],
    tail: [u8; 32],
    /// Increasing by offset; the first is [`Mark::START`]; the last is where the index ends.
    marks: Vec<Mark>,
}

/// Where the index of session `id` lives.
pub fn index_path(home: &Home, id: &SessionId) -> PathBuf {
    home.state_dir().join("offsets").join(id.as_str())
}

impl OffsetIndex {
    /// The marks, increasing.
    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    /// The last mark at or before message `ordinal`.
    pub fn seek(&self, ordinal: u64) -> Mark {
        let i = self.marks.partition_point(|m| m.ordinal <= ordinal);
        i.checked_sub(1)
            .and_then(|i| self.marks.get(i))
            .copied()
            .unwrap_or(Mark::START)
    }

    /// The bytes of the file.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 8 * 3 + 64 + self.marks.len() * 24 + 32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.dev.to_le_bytes());
        out.extend_from_slice(&self.ino.to_le_bytes());
        out.extend_from_slice(&(self.marks.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.tail);
        for m in &self.marks {
            out.extend_from_slice(&m.offset.to_le_bytes());
            out.extend_from_slice(&m.line.to_le_bytes());
            out.extend_from_slice(&m.ordinal.to_le_bytes());
        }
        let sum = Sha256::digest(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Reads the bytes of a file; `None` for anything but a whole, current, consistent one.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
        if Sha256::digest(body).as_slice() != sum {
            return None;
        }
        let r = body.strip_prefix(MAGIC.as_slice())?;
        let (dev, r) = take_u64(r)?;
        let (ino, r) = take_u64(r)?;
        let (n, r) = take_u64(r)?;
        if n == 0 || n > MAX_MARKS {
            return None;
        }
        let (head, rest) = r.split_first_chunk::<32>()?;
        let (tail, rest) = rest.split_first_chunk::<32>()?;
        let (head, tail) = (*head, *tail);
        if rest.len() as u64 != n * 24 {
            return None;
        }
        let marks: Vec<Mark> = rest
            .chunks_exact(24)
            .filter_map(|c| {
                let (offset, c) = take_u64(c)?;
                let (line, c) = take_u64(c)?;
                let (ordinal, _) = take_u64(c)?;
                Some(Mark {
                    offset,
                    line,
                    ordinal,
                })
            })
            .collect();
        let increasing = marks.windows(2).all(|w| {
            w[0].offset < w[1].offset && w[0].line < w[1].line && w[0].ordinal <= w[1].ordinal
        });
        (marks.first() == Some(&Mark::START) && increasing).then_some(Self {
            dev,
            ino,
            head,
            tail,
            marks,
        })
    }

    /// Where the index ends (the last mark's offset).
    pub fn covered(&self) -> u64 {
        self.marks.last().map_or(0, |m| m.offset)
    }

    /// Whether this index describes `file` (of metadata `meta`) as it is now: the same file,
    /// no shorter than the index covers, the covered bytes' ends unchanged.
    fn matches(&self, file: &File, meta: &std::fs::Metadata) -> std::io::Result<bool> {
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) || meta.len() < self.covered() {
            return Ok(false);
        }
        let (head, tail) = probes(file, self.covered())?;
        Ok(head == self.head && tail == self.tail)
    }
}

/// A little-endian `u64` off the front of `r`, and the rest.
fn take_u64(r: &[u8]) -> Option<(u64, &[u8])> {
    let (n, rest) = r.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*n), rest))
}

/// SHA-256 of the first and of the last [`PROBE`] bytes of `file`'s first `len` bytes.
fn probes(file: &File, len: u64) -> std::io::Result<([u8; 32], [u8; 32])> {
    let n = len.min(PROBE);
    let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
    file.read_exact_at(&mut buf, 0)?;
    let head: [u8; 32] = Sha256::digest(&buf).into();
    file.read_exact_at(&mut buf, len - n)?;
    let tail: [u8; 32] = Sha256::digest(&buf).into();
    Ok((head, tail))
}

/// The index of the log `file` (at `path`, of metadata `meta`), brought up to date: the stored
/// one when it matches, extended over what was appended since; else built from the start.
/// Saved when it changed (a failure to save is logged and changes nothing: the next read
/// indexes again). Its cost is a read of the bytes past the stored index's end.
pub(crate) fn current(
    home: &Home,
    id: &SessionId,
    path: &Path,
    file: &File,
    meta: &std::fs::Metadata,
    decode: jsonl::Decode<StoredMessage>,
) -> Result<OffsetIndex> {
    let at = index_path(home, id);
    let stored = fsutil::read_bounded(&at, 8 + 24 + 64 + MAX_MARKS * 24 + 32, "offset index")
        .ok()
        .flatten()
        .and_then(|b| OffsetIndex::decode(&b));
    let had_file = stored.is_some();
    let kept = match stored {
        Some(ix) if ix.matches(file, meta).ctx("read", path)? => Some(ix),
        Some(_) => {
            tracing::debug!(path = %path.display(), "the offset index does not match the log: rebuilt");
            None
        }
        None => None,
    };
    let fresh = kept.is_none();
    let mut marks = kept.map_or_else(|| vec![Mark::START], |ix| ix.marks);
    let before = marks.len();
    let from = *marks.last().unwrap_or(&Mark::START);
    // Only a log that grew by a stride or more can gain a mark.
    if fresh || meta.len().saturating_sub(from.offset) >= STRIDE as u64 {
        extend(&mut marks, file, path, meta.len(), decode)?;
    }
    let covered = marks.last().map_or(0, |m| m.offset);
    let (head, tail) = probes(file, covered).ctx("read", path)?;
    let ix = OffsetIndex {
        dev: meta.dev(),
        ino: meta.ino(),
        head,
        tail,
        marks,
    };
    if ix.marks.len() > 1 && (fresh || ix.marks.len() != before) {
        save(&at, &ix);
    } else if ix.marks.len() == 1 && had_file {
        // A log now shorter than a stride needs none; a stale file is not kept.
        let _ = fsutil::remove_file(&at);
    }
    Ok(ix)
}

/// What `doctor` finds of a stored offset index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// It describes its log as the log is now.
    Good,
    /// It does not read: cut, corrupt, or of another version.
    Unreadable,
    /// It reads but describes another file or other bytes (the log was replaced, cut or
    /// rewritten since; the next page read rebuilds it).
    Stale,
    /// Its session's log does not exist.
    Orphan,
}

/// The health of the index at `at` for the log at `log`. Reads only the index and the log's
/// probes.
pub fn health(at: &Path, log: &Path) -> Health {
    let Some(ix) = fsutil::read_bounded(at, 8 + 24 + 64 + MAX_MARKS * 24 + 32, "offset index")
        .ok()
        .flatten()
        .and_then(|b| OffsetIndex::decode(&b))
    else {
        return Health::Unreadable;
    };
    let Ok(file) = fsutil::open_read(log) else {
        return Health::Orphan;
    };
    match file.metadata().and_then(|m| ix.matches(&file, &m)) {
        Ok(true) => Health::Good,
        _ => Health::Stale,
    }
}

/// Reads `file` from the last mark on, a stride at a time, adding a mark after each stride
/// that ends at a line start before the end of the file. The read stops at `len` (what the
/// file held when it was looked at), so a writer appending meanwhile cannot make a mark of a
/// line it has not finished.
fn extend(
    marks: &mut Vec<Mark>,
    file: &File,
    path: &Path,
    len: u64,
    decode: jsonl::Decode<StoredMessage>,
) -> Result<()> {
    let from = *marks.last().unwrap_or(&Mark::START);
    let mut reader = file.try_clone().ctx("open", path)?;
    reader
        .seek(SeekFrom::Start(from.offset))
        .ctx("seek", path)?;
    let bounded = std::io::Read::take(reader, len - from.offset);
    let mut blocks = jsonl::Blocks::part(bounded, STRIDE, from.line, from.offset);
    let mut ordinal = from.ordinal;
    let mut items = Vec::new();
    while blocks
        .next_block_into(decode, &mut items)
        .ctx("read", path)?
        .is_some()
    {
        ordinal += items.len() as u64;
        items.clear();
        // The block that ends the file may end inside a torn line: no mark there.
        if blocks.at_end() {
            break;
        }
        marks.push(Mark {
            offset: blocks.offset(),
            line: blocks.next_line(),
            ordinal,
        });
    }
    Ok(())
}

/// Writes the index (0600, atomically; creating `state/offsets/`); a failure is only logged.
fn save(at: &Path, ix: &OffsetIndex) {
    let res = at
        .parent()
        .map_or(Ok(()), fsutil::create_dir_private)
        .and_then(|()| fsutil::write_atomic(at, &ix.encode(), false));
    if let Err(e) = res {
        tracing::debug!("the offset index was not saved: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> OffsetIndex {
        OffsetIndex {
            dev: 1,
            ino: 2,
            head: [3; 32],
            tail: [4; 32],
            marks: vec![
                Mark::START,
                Mark {
                    offset: 70_000,
                    line: 120,
                    ordinal: 118,
                },
                Mark {
                    offset: 140_000,
                    line: 260,
                    ordinal: 250,
                },
            ],
        }
    }

    #[test]
    fn encodes_and_decodes() {
        let ix = sample();
        assert_eq!(OffsetIndex::decode(&ix.encode()), Some(ix));
    }

    #[test]
    fn any_changed_byte_or_cut_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert_eq!(OffsetIndex::decode(&b), None, "byte {i} flipped");
        }
        for n in 0..bytes.len() {
            assert_eq!(OffsetIndex::decode(&bytes[..n]), None, "cut at {n}");
        }
    }

    #[test]
    fn seek_takes_the_last_mark_at_or_before() {
        let ix = sample();
        assert_eq!(ix.seek(0), Mark::START);
        assert_eq!(ix.seek(117), Mark::START);
        assert_eq!(ix.seek(118).offset, 70_000);
        assert_eq!(ix.seek(249).offset, 70_000);
        assert_eq!(ix.seek(10_000).offset, 140_000);
    }
}
