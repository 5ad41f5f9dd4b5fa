//! A spool: records written out as a fold produces them and read back once, in order, so a
//! streamed output (`trace --json`, the rendered waterfall, `replay --json`) holds none of them.
//!
//! A record is a key (`i64`, e.g. a start time), an index (`u64`, e.g. a span's place in its
//! list) and bytes (the record's finished output). Records go into a 1 MiB buffer that spills
//! to an anonymous temp file (`tempfile::tempfile`: unlinked at creation, never a path in the
//! home, gone with the process), so a small trace never touches the disk and a large one costs
//! page cache, not heap. A split fold's tail spool is spliced onto the head's from a mark
//! ([`Spool::splice`]) without copying: the result reads the head's bytes, then the tail's.
//!
//! Records are read back in the order they were written when that is the order asked for, and
//! the spool knows whether it is ([`Order`]): it keeps the last position where a key or an index
//! went down. Only when the order asked for was broken (requests that overlap, tools whose
//! outputs come back in another order than their calls) are the records loaded and sorted —
//! stably, so ties keep their written order.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;

/// Bytes held in memory before the spool spills to its temp file.
const SPILL_BYTES: usize = 1 << 20;

/// A record's header: key, index, length.
const HEADER: usize = 8 + 8 + 4;

/// One run of records: a temp file's first `file_len` bytes, then `buf`.
#[derive(Debug, Default)]
struct Stream {
    file: Option<File>,
    file_len: u64,
    buf: Vec<u8>,
}

impl Stream {
    fn len(&self) -> u64 {
        self.file_len + self.buf.len() as u64
    }

    fn spill(&mut self) -> io::Result<()> {
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(tempfile::tempfile()?),
        };
        file.write_all_at(&self.buf, self.file_len)?;
        self.file_len += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Reads bytes at `pos` into `out` (short reads at the end of the file part).
    fn read_at(&self, pos: u64, out: &mut [u8]) -> io::Result<usize> {
        if pos < self.file_len {
            let n = usize::try_from(self.file_len - pos)
                .unwrap_or(usize::MAX)
                .min(out.len());
            return match &self.file {
                Some(f) => f.read_at(&mut out[..n], pos),
                None => Ok(0),
            };
        }
        let from = usize::try_from(pos - self.file_len).unwrap_or(usize::MAX);
        let rest = self.buf.get(from..).unwrap_or(&[]);
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
}

/// A part of the spool: bytes `start..` of a stream, indices shifted by `shift` (wrapping).
#[derive(Debug)]
struct Seg {
    stream: Stream,
    start: u64,
    shift: u64,
    /// Whether new records may be appended to this stream (the spool's own last one).
    own: bool,
}

/// The order to read records in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// By key, ties in written order.
    Key,
    /// By index, ties in written order.
    Index,
    /// As written.
    Written,
}

/// Records written out and read back in order (see the module docs).
#[derive(Debug, Default)]
pub struct Spool {
    segs: Vec<Seg>,
    /// Bytes in the spool (the position of the next record).
    len: u64,
    /// Key and index of the last record.
    last: Option<(i64, u64)>,
    /// The last position of a record whose key is below its predecessor's.
    key_down: Option<u64>,
    /// The last position of a record whose index is not above its predecessor's.
    index_down: Option<u64>,
    /// The first write error; reported when the records are read.
    err: Option<io::Error>,
    /// Whether the first stream is a file of the caller's ([`Spool::on_file`]).
    backed: bool,
}

/// What a spool on a file is besides the file's bytes ([`Spool::on_file`], [`Spool::persist`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpoolState {
    /// Bytes of records.
    pub len: u64,
    /// Key and index of the last record.
    pub last: Option<(i64, u64)>,
    /// The last position where a key went down.
    pub key_down: Option<u64>,
    /// The last position where an index did not go up.
    pub index_down: Option<u64>,
}

impl Spool {
    /// An empty spool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A spool whose records are the first `state.len` bytes of `file` (a checkpoint's spool,
    /// written by [`Spool::persist`]) and which appends new records to it. Bytes past
    /// `state.len` (a save that did not finish) are written over.
    pub fn on_file(file: File, state: &SpoolState) -> Self {
        Self {
            segs: vec![Seg {
                stream: Stream {
                    file: Some(file),
                    file_len: state.len,
                    buf: Vec::new(),
                },
                start: 0,
                shift: 0,
                own: true,
            }],
            len: state.len,
            last: state.last,
            key_down: state.key_down,
            index_down: state.index_down,
            err: None,
            backed: true,
        }
    }

    /// Writes every record not yet in the spool's file (those in memory, those spliced from a
    /// tail's temp file) into it, in order with their indices shifted, so that the spool is
    /// exactly the file's first [`SpoolState::len`] bytes, and returns the state that
    /// [`Spool::on_file`] takes. Costs the bytes not yet in the file. Fails for a spool made
    /// without a file, and with the first write error.
    pub fn persist(&mut self) -> io::Result<SpoolState> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        let not_backed = || io::Error::other("a spool without a file of its own");
        if !self.backed {
            return Err(not_backed());
        }
        let mut segs = std::mem::take(&mut self.segs).into_iter();
        let mut base = segs.next().ok_or_else(not_backed)?;
        if base.start != 0 || base.shift != 0 || base.stream.file.is_none() {
            return Err(not_backed());
        }
        base.stream.spill()?;
        let mut out = Vec::with_capacity(SPILL_BYTES);
        for seg in segs {
            let mut r = BufReader::with_capacity(
                256 << 10,
                SegRead {
                    stream: &seg.stream,
                    pos: seg.start,
                },
            );
            loop {
                let mut h = [0u8; HEADER];
                match read_full(&mut r, &mut h)? {
                    0 => break,
                    HEADER => {}
                    _ => return Err(io::ErrorKind::UnexpectedEof.into()),
                }
                let mut index = [0u8; 8];
                index.copy_from_slice(&h[8..16]);
                let index = u64::from_le_bytes(index).wrapping_add(seg.shift);
                h[8..16].copy_from_slice(&index.to_le_bytes());
                let mut len = [0u8; 4];
                len.copy_from_slice(&h[16..20]);
                let len = u32::from_le_bytes(len) as usize;
                out.extend_from_slice(&h);
                let at = out.len();
                out.resize(at + len, 0);
                r.read_exact(&mut out[at..])?;
                if out.len() >= SPILL_BYTES {
                    base.stream.buf.append(&mut out);
                    base.stream.spill()?;
                }
            }
        }
        base.stream.buf.append(&mut out);
        base.stream.spill()?;
        base.own = true;
        let len = base.stream.len();
        self.segs = vec![base];
        if len != self.len {
            return Err(io::Error::other(format!(
                "spool of {} bytes persisted as {len}",
                self.len
            )));
        }
        Ok(self.state())
    }

    /// Where the spool stands: what [`Spool::on_file`] needs besides the file.
    pub fn state(&self) -> SpoolState {
        SpoolState {
            len: self.len,
            last: self.last,
            key_down: self.key_down,
            index_down: self.index_down,
        }
    }

    /// Bytes written so far: the position of the next record (a mark for [`Spool::splice`]).
    pub fn pos(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn note_order(&mut self, at: u64, key: i64, index: u64) {
        if let Some((k, i)) = self.last {
            if key < k {
                self.key_down = Some(at);
            }
            if index <= i {
                self.index_down = Some(at);
            }
        }
        self.last = Some((key, index));
    }

    /// Appends a record. A write error is kept and returned by [`Spool::records`].
    pub fn push(&mut self, key: i64, index: u64, bytes: &[u8]) {
        let at = self.len;
        self.note_order(at, key, index);
        if !self.segs.last().is_some_and(|s| s.own) {
            self.segs.push(Seg {
                stream: Stream::default(),
                start: 0,
                shift: 0,
                own: true,
            });
        }
        let Some(seg) = self.segs.last_mut() else {
            return;
        };
        let s = &mut seg.stream;
        s.buf.extend_from_slice(&key.to_le_bytes());
        s.buf.extend_from_slice(&index.to_le_bytes());
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        s.buf.extend_from_slice(&len.to_le_bytes());
        s.buf.extend_from_slice(&bytes[..len as usize]);
        self.len += (HEADER + len as usize) as u64;
        if s.buf.len() >= SPILL_BYTES
            && let Err(e) = s.spill()
            && self.err.is_none()
        {
            self.err = Some(e);
        }
    }

    /// The key and index of the record at `pos` (a record boundary), shifts applied.
    fn peek(&self, mut pos: u64) -> Option<(i64, u64)> {
        for seg in &self.segs {
            let n = seg.stream.len() - seg.start;
            if pos < n {
                let mut h = [0u8; 16];
                let mut got = 0;
                while got < h.len() {
                    match seg
                        .stream
                        .read_at(seg.start + pos + got as u64, &mut h[got..])
                    {
                        Ok(0) | Err(_) => return None,
                        Ok(k) => got += k,
                    }
                }
                let (k, i) = h.split_at(8);
                let key = i64::from_le_bytes(k.try_into().ok()?);
                let index = u64::from_le_bytes(i.try_into().ok()?);
                return Some((key, index.wrapping_add(seg.shift)));
            }
            pos -= n;
        }
        None
    }

    /// Appends `tail`'s records from its position `from` on (a mark taken with
    /// [`Spool::pos`]), indices shifted by `shift` (wrapping: `i + shift`).
    pub fn splice(&mut self, mut tail: Spool, from: u64, shift: u64) {
        if self.err.is_none() {
            self.err = tail.err.take();
        }
        if from >= tail.len {
            return;
        }
        let at = self.len;
        if let Some((key, index)) = tail.peek(from) {
            self.note_order(at, key, index.wrapping_add(shift));
        }
        if tail.key_down.is_some_and(|d| d > from) {
            self.key_down = tail.key_down.map(|d| at + (d - from));
        }
        if tail.index_down.is_some_and(|d| d > from) {
            self.index_down = tail.index_down.map(|d| at + (d - from));
        }
        self.last = tail.last.map(|(k, i)| (k, i.wrapping_add(shift)));
        let mut skip = from;
        for mut seg in tail.segs {
            let n = seg.stream.len() - seg.start;
            if skip >= n {
                skip -= n;
                continue;
            }
            seg.start += skip;
            skip = 0;
            seg.shift = seg.shift.wrapping_add(shift);
            seg.own = false;
            self.len += seg.stream.len() - seg.start;
            self.segs.push(seg);
        }
    }

    /// The key of the last record written.
    pub fn last_key(&self) -> Option<i64> {
        self.last.map(|(k, _)| k)
    }

    /// The greatest key (the last one when the spool is in key order; else a read of all).
    pub fn max_key(&self) -> io::Result<Option<i64>> {
        if self.in_order(Order::Key) {
            return Ok(self.last_key());
        }
        let mut r = self.records(Order::Written)?;
        let mut max = None;
        while r.advance()? {
            max = Some(max.map_or(r.key, |m: i64| m.max(r.key)));
        }
        Ok(max)
    }

    /// Whether the records are already in `order` as written.
    pub fn in_order(&self, order: Order) -> bool {
        match order {
            Order::Key => self.key_down.is_none(),
            Order::Index => self.index_down.is_none(),
            Order::Written => true,
        }
    }

    /// A reader of the records in `order` (as written when they are in it; else loaded and
    /// sorted stably). Fails with the first write error, if any.
    pub fn records(&self, order: Order) -> io::Result<Records<'_>> {
        if let Some(e) = &self.err {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "spool (an unlinked temp file in {}): {e}",
                    std::env::temp_dir().display()
                ),
            ));
        }
        let mut r = Records {
            spool: self,
            seg: 0,
            reader: None,
            sorted: None,
            key: 0,
            index: 0,
            bytes: Vec::new(),
        };
        if !self.in_order(order) {
            let mut all = Vec::new();
            while r.advance()? {
                all.push((r.key, r.index, std::mem::take(&mut r.bytes)));
            }
            match order {
                Order::Key => all.sort_by_key(|(k, _, _)| *k),
                Order::Index | Order::Written => all.sort_by_key(|(_, i, _)| *i),
            }
            r.sorted = Some(all.into_iter());
        }
        Ok(r)
    }
}

/// Bytes `pos..` of a stream as a reader.
struct SegRead<'a> {
    stream: &'a Stream,
    pos: u64,
}

impl Read for SegRead<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.stream.read_at(self.pos, out)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Reads a spool's records one at a time ([`Records::advance`]); the current one is in `key`,
/// `index` and `bytes`.
pub struct Records<'a> {
    spool: &'a Spool,
    seg: usize,
    reader: Option<(BufReader<SegRead<'a>>, u64)>,
    sorted: Option<std::vec::IntoIter<(i64, u64, Vec<u8>)>>,
    /// The current record's key.
    pub key: i64,
    /// The current record's index.
    pub index: u64,
    /// The current record's bytes.
    pub bytes: Vec<u8>,
}

impl Records<'_> {
    /// Moves to the next record; `false` at the end.
    pub fn advance(&mut self) -> io::Result<bool> {
        if let Some(sorted) = &mut self.sorted {
            return Ok(match sorted.next() {
                Some((k, i, b)) => {
                    (self.key, self.index, self.bytes) = (k, i, b);
                    true
                }
                None => false,
            });
        }
        loop {
            if self.reader.is_none() {
                let Some(seg) = self.spool.segs.get(self.seg) else {
                    return Ok(false);
                };
                self.seg += 1;
                let read = SegRead {
                    stream: &seg.stream,
                    pos: seg.start,
                };
                self.reader = Some((BufReader::with_capacity(256 << 10, read), seg.shift));
            }
            let Some((reader, shift)) = &mut self.reader else {
                continue;
            };
            let mut h = [0u8; HEADER];
            match read_full(reader, &mut h)? {
                0 => {
                    self.reader = None;
                    continue;
                }
                HEADER => {}
                _ => return Err(io::ErrorKind::UnexpectedEof.into()),
            }
            let word = |r: std::ops::Range<usize>| {
                let mut w = [0u8; 8];
                w[..r.len()].copy_from_slice(&h[r]);
                u64::from_le_bytes(w)
            };
            self.key = word(0..8) as i64;
            self.index = word(8..16).wrapping_add(*shift);
            let len = usize::try_from(word(16..20)).unwrap_or(usize::MAX);
            self.bytes.resize(len, 0);
            reader.read_exact(&mut self.bytes)?;
            return Ok(true);
        }
    }
}

/// Reads until `buf` is full or the reader ends; how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &Spool, order: Order) -> Vec<(i64, u64, Vec<u8>)> {
        let mut r = s.records(order).unwrap();
        let mut out = Vec::new();
        while r.advance().unwrap() {
            out.push((r.key, r.index, r.bytes.clone()));
        }
        out
    }

    #[test]
    fn records_come_back_in_order_across_spills_and_splices() {
        let mut head = Spool::new();
        let big = vec![b'x'; 300 << 10];
        for i in 0..8u64 {
            head.push(i as i64, i, &big[..(i as usize * 1000)]);
        }
        let mut tail = Spool::new();
        tail.push(100, 50, b"dropped");
        let mark = tail.pos();
        for i in 0..6u64 {
            tail.push(10 + i as i64, 51 + i, &big);
        }
        head.splice(tail, mark, 8u64.wrapping_sub(51));
        head.push(99, 100, b"after");
        let got = all(&head, Order::Index);
        assert_eq!(got.len(), 15);
        assert!(head.in_order(Order::Index) && head.in_order(Order::Key));
        let idx: Vec<u64> = got.iter().map(|r| r.1).collect();
        assert_eq!(idx, (0..14).chain([100]).collect::<Vec<_>>());
        assert_eq!(got[3].2.len(), 3000);
        assert_eq!(got[8].2.len(), big.len());
        assert_eq!(got[14].2, b"after");
    }

    #[test]
    fn out_of_order_records_are_sorted_stably_and_a_boundary_counts() {
        let mut s = Spool::new();
        for (k, i) in [(5, 0), (3, 1), (3, 2), (9, 3)] {
            s.push(k, i, format!("{k}-{i}").as_bytes());
        }
        assert!(!s.in_order(Order::Key) && s.in_order(Order::Index));
        let keys: Vec<_> = all(&s, Order::Key)
            .into_iter()
            .map(|r| (r.0, r.1))
            .collect();
        assert_eq!(keys, [(3, 1), (3, 2), (5, 0), (9, 3)]);

        // A tail whose disorder lies before the mark is in order from there; the boundary
        // between head and tail is checked.
        let mut head = Spool::new();
        head.push(10, 0, b"a");
        let mut tail = Spool::new();
        tail.push(50, 0, b"x");
        tail.push(1, 1, b"y");
        let mark = tail.pos();
        tail.push(20, 2, b"z");
        head.splice(tail, mark, 0u64.wrapping_sub(1));
        assert!(head.in_order(Order::Key));
        let mut later = Spool::new();
        later.push(5, 0, b"w");
        head.splice(later, 0, 2);
        assert!(!head.in_order(Order::Key));
        let keys: Vec<_> = all(&head, Order::Key).into_iter().map(|r| r.0).collect();
        assert_eq!(keys, [5, 10, 20]);
    }
}
