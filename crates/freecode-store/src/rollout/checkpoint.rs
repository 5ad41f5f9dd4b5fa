//! Fold checkpoints: a read of a log that was read before costs only the bytes appended since.
//!
//! A fold that writes its output into spools as it goes (`trace --json`, `session.trace`,
//! `replay --json`) is saved at the end of each read: its state (what is open and pending, the
//! totals: [`Checkpointed::save`]) and its spools, kept as files that only grow. The next read
//! of the same log takes the state up, reopens the spools where they ended and folds only the
//! lines past the saved end, so the answer is that of one read from the start while the cost
//! is the new bytes plus writing the output.
//!
//! Where they live: `state/folds/<session id>/<kind>.state` and one `<kind>.<spool>` file per
//! spool (0700 directory, 0600 files, created and opened never through a link). The state file
//! is versioned ([`MAGIC`]) and checksummed (SHA-256), written atomically after the spools.
//!
//! When one is taken up: the log is the same file (device and inode), and either it is the
//! size it was when saved with the same modification and change times (nothing was written to
//! it: a same-size edit in the middle changes its change time, which no user can set back), or
//! it grew (an append) and the first and last [`PROBE`] bytes before the saved end hash as they
//! did. A checkpoint saved within [`RACY`] of the log's last change is *racy* (an edit in the
//! same timestamp tick would leave the times as recorded) and is not trusted at the same size:
//! that read folds from the start. What is not found: an edit in the middle of the covered
//! bytes made together with an append, which keeps the probes (the log is append-only by
//! contract, and `doctor` reads it in full); and, on a file system whose timestamps are coarser
//! than [`RACY`] (FAT, some network mounts), a same-size edit within one of its ticks. Each spool
//! file is the one saved (device and inode), at least as long as saved, and its last [`PROBE`]
//! bytes hash as they did. A log that was compacted, replaced, cut or rewritten, a state file
//! that does not read, and a spool cut, replaced or rewritten at its end are all found, and the
//! fold runs from the start and replaces the checkpoint. A spool longer than saved (a save that
//! did not finish) is cut back to the saved length. `doctor` reads every spool in full against
//! its saved checksum (a byte changed in the middle is found there, not on every read).
//!
//! Checkpoints are never the source of truth: deleting them changes no answer. One process
//! folds with a checkpoint at a time (an advisory lock on the first spool, held until the fold's
//! output is written); another that finds it locked folds from the start without one. Logs
//! under [`MIN_BYTES`] fold in a few milliseconds and get none.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::rollout::split::SplitFold;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::spool::{Spool, SpoolState};
use super::views::{Cursor, fold_event_views, fold_file_from};
use super::{ReadReport, events_path};
use crate::error::{IoContext, Result};
use crate::fsutil;
use crate::home::Home;

/// The state file's first bytes: the format and its version.
pub const MAGIC: &[u8; 8] = b"FCFOLD02";
/// Bytes hashed at each end of the log's covered part, and at the end of each spool.
pub const PROBE: u64 = 4096;
/// A checkpoint saved this soon after its log's last change is racy (see the module docs):
/// above the coarse clock's tick on Linux (at most 10 ms) with room to spare.
pub const RACY: std::time::Duration = std::time::Duration::from_millis(100);
/// Logs shorter than this are folded without a checkpoint.
pub const MIN_BYTES: u64 = 1 << 20;
/// The largest state file read (what is open at once is small; a bigger file is corrupt).
const MAX_STATE_BYTES: u64 = 256 << 20;

/// A fold that can be saved at the end of a read and taken up by the next one.
pub trait Checkpointed: SplitFold + Send + 'static {
    /// The checkpoint's file stem (`trace-pretty`): one per fold and output form.
    fn kind() -> String;
    /// The suffixes of its spool files, in the order [`Checkpointed::fresh`] takes them.
    const SPOOLS: &'static [&'static str];
    /// An empty fold of session `session_id` whose spools are `spools`.
    fn fresh(session_id: &str, spools: Vec<Spool>) -> Self;
    /// The fold [`Checkpointed::save`] saved as `state` and `counts`, its spools reopened;
    /// `None` when the state does not read as this fold's.
    fn resume(
        session_id: &str,
        state: &RawValue,
        counts: &[u64],
        spools: Vec<Spool>,
    ) -> Option<Self>;
    /// Writes what the spools hold in memory or in temp files into their files, and returns
    /// the fold's state, its sink's counts and the spools' states.
    fn save(&mut self) -> std::io::Result<Saved>;
}

/// What [`Checkpointed::save`] returns.
#[derive(Debug)]
pub struct Saved {
    /// The fold's state (JSON).
    pub state: Vec<u8>,
    /// The sink's counters.
    pub counts: Vec<u64>,
    /// Each spool's state, in [`Checkpointed::SPOOLS`] order.
    pub spools: Vec<SpoolState>,
}

/// Where session `id`'s checkpoints live.
pub fn dir(home: &Home, id: &SessionId) -> PathBuf {
    home.state_dir().join("folds").join(id.as_str())
}

/// The state file as stored (after [`MAGIC`], before the checksum).
#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    kind: String,
    session: String,
    log: LogId,
    /// Lines before the covered end (line numbers go on from here).
    lines: u64,
    report: ReadReport,
    spools: Vec<SpoolFile>,
    counts: Vec<u64>,
    #[serde(borrow)]
    fold: &'a RawValue,
}

/// The log a checkpoint covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct LogId {
    dev: u64,
    ino: u64,
    /// Bytes covered: the start of the first line not folded.
    covered: u64,
    head: [u8; 32],
    tail: [u8; 32],
    /// The log's size when saved (past `covered` by a torn tail).
    len: u64,
    /// Its modification and change times then (seconds, nanoseconds).
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// Saved within [`RACY`] of its change time: not trusted at the same size.
    racy: bool,
}

impl LogId {
    /// Whether `file` (whose metadata is `meta`) is the log this describes, as it was or
    /// appended to; a racy checkpoint at the same size only when `racy_too` (`doctor`'s
    /// question: does it describe the log as far as can be told).
    fn matches(
        &self,
        file: &File,
        meta: &std::fs::Metadata,
        racy_too: bool,
    ) -> std::io::Result<bool> {
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) || meta.len() < self.covered {
            return Ok(false);
        }
        if meta.len() == self.len {
            return Ok((racy_too || !self.racy) && times(meta) == (self.mtime, self.ctime));
        }
        if meta.len() < self.len {
            return Ok(false);
        }
        let now = log_id(file, meta, self.covered)?;
        Ok((now.head, now.tail) == (self.head, self.tail))
    }
}

/// A file's modification and change times.
fn times(meta: &std::fs::Metadata) -> ((i64, i64), (i64, i64)) {
    (
        (meta.mtime(), meta.mtime_nsec()),
        (meta.ctime(), meta.ctime_nsec()),
    )
}

/// A spool file as saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct SpoolFile {
    dev: u64,
    ino: u64,
    state: SpoolState,
    /// SHA-256 of its last [`PROBE`] bytes.
    tail: [u8; 32],
    /// CRC-32 of all its bytes (checked by `doctor`).
    crc: u32,
}

fn encode(stored: &Stored<'_>) -> serde_json::Result<Vec<u8>> {
    let mut out = MAGIC.to_vec();
    serde_json::to_writer(&mut out, stored)?;
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    Ok(out)
}

fn decode(bytes: &[u8]) -> Option<Stored<'_>> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if Sha256::digest(body).as_slice() != sum {
        return None;
    }
    serde_json::from_slice(body.strip_prefix(MAGIC.as_slice())?).ok()
}

/// SHA-256 of bytes `from..to` of `file` (at most [`PROBE`] of them).
fn hash_range(file: &File, from: u64, to: u64) -> std::io::Result<[u8; 32]> {
    let mut buf = vec![0u8; usize::try_from(to - from).unwrap_or(0)];
    file.read_exact_at(&mut buf, from)?;
    Ok(Sha256::digest(&buf).into())
}

/// The log's identity and the probes of its first `covered` bytes.
fn log_id(file: &File, meta: &std::fs::Metadata, covered: u64) -> std::io::Result<LogId> {
    let n = covered.min(PROBE);
    let (mtime, ctime) = times(meta);
    let changed = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(ctime.0).unwrap_or(0),
            u32::try_from(ctime.1).unwrap_or(0),
        );
    let racy = std::time::SystemTime::now()
        .duration_since(changed)
        .is_ok_and(|d| d < RACY)
        || changed > std::time::SystemTime::now();
    Ok(LogId {
        dev: meta.dev(),
        ino: meta.ino(),
        covered,
        head: hash_range(file, 0, n)?,
        tail: hash_range(file, covered - n, covered)?,
        len: meta.len(),
        mtime,
        ctime,
        racy,
    })
}

/// The probe and checksum of a spool file's first `len` bytes (`crc` carried from `from`).
fn spool_file(file: &File, state: SpoolState, from: u64, crc: u32) -> std::io::Result<SpoolFile> {
    let meta = file.metadata()?;
    let mut h = crc32fast::Hasher::new_with_initial_len(crc, from);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = from;
    while at < state.len {
        let n = usize::try_from(state.len - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        file.read_exact_at(&mut buf[..n], at)?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(SpoolFile {
        dev: meta.dev(),
        ino: meta.ino(),
        state,
        tail: hash_range(file, state.len - state.len.min(PROBE), state.len)?,
        crc: h.finalize(),
    })
}

/// Whether `file` is the spool file `saved` describes (its tail as saved).
fn spool_matches(file: &File, saved: &SpoolFile) -> std::io::Result<bool> {
    let meta = file.metadata()?;
    let len = saved.state.len;
    if (meta.dev(), meta.ino()) != (saved.dev, saved.ino) || meta.len() < len {
        return Ok(false);
    }
    Ok(hash_range(file, len - len.min(PROBE), len)? == saved.tail)
}

/// Session `id`'s log folded into `C`, from its checkpoint when one matches, the checkpoint
/// then brought up to the log's end; `None` when the log does not exist. The answer is that of
/// [`fold_event_views`] on the log, always. A checkpoint that cannot be made or read (a
/// read-only home, another process folding with it) only costs the read from the start.
pub fn fold_checkpointed<C: Checkpointed>(
    home: &Home,
    id: &SessionId,
) -> Result<Option<(C, ReadReport)>> {
    fold_checkpointed_from(home, id, MIN_BYTES)
}

/// [`fold_checkpointed`] with logs from `min_bytes` on checkpointed (tests checkpoint every
/// log).
pub fn fold_checkpointed_from<C: Checkpointed>(
    home: &Home,
    id: &SessionId,
    min_bytes: u64,
) -> Result<Option<(C, ReadReport)>> {
    let path = events_path(home, id);
    let plain = || fold_event_views(&path, C::fresh(id.as_str(), fresh_spools::<C>()));
    let file = match fsutil::open_read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", &path),
    };
    let meta = file.metadata().ctx("stat", &path)?;
    if meta.len() < min_bytes {
        return plain();
    }
    match with_checkpoint::<C>(home, id, &path, &file, &meta) {
        Ok(Some(done)) => Ok(Some(done)),
        Ok(None) => plain(),
        Err(e) => {
            tracing::debug!(path = %path.display(), "folded without a checkpoint: {e}");
            plain()
        }
    }
}

fn fresh_spools<C: Checkpointed>() -> Vec<Spool> {
    C::SPOOLS.iter().map(|_| Spool::new()).collect()
}

/// The fold with the checkpoint; `Ok(None)` when another process holds it.
fn with_checkpoint<C: Checkpointed>(
    home: &Home,
    id: &SessionId,
    path: &Path,
    file: &File,
    meta: &std::fs::Metadata,
) -> Result<Option<(C, ReadReport)>> {
    let dir = dir(home, id);
    fsutil::create_dir_private(&dir)?;
    let kind = C::kind();
    let state_path = dir.join(format!("{kind}.state"));
    let mut files = Vec::with_capacity(C::SPOOLS.len());
    for suffix in C::SPOOLS {
        files.push(fsutil::open_rw(&dir.join(format!("{kind}.{suffix}")))?);
    }
    // The lock lives in the first spool's descriptor, which the fold keeps until its output
    // is written (the spools are read then).
    match files.first().map(File::try_lock) {
        Some(Ok(())) => {}
        Some(Err(std::fs::TryLockError::WouldBlock)) => return Ok(None),
        Some(Err(std::fs::TryLockError::Error(e))) => return Err(e).ctx("lock", &state_path),
        None => {}
    }
    let bytes = fsutil::read_bounded(&state_path, MAX_STATE_BYTES, "fold checkpoint")
        .ok()
        .flatten();
    let stored = bytes.as_deref().and_then(decode);
    let taken = match stored {
        Some(st) => take_up::<C>(id, &st, file, meta, &files, &state_path)?,
        None => None,
    };
    let (fold, start, prefix, from) = match taken {
        Some(t) => t,
        None => {
            // From the start: the old state goes first, so no state ever describes spools
            // that were cut under it.
            if bytes.is_some() {
                fsutil::remove_file(&state_path)?;
            }
            let mut spools = Vec::with_capacity(files.len());
            for (f, suffix) in files.iter().zip(C::SPOOLS) {
                let at = dir.join(format!("{kind}.{suffix}"));
                fsutil::set_len(f, &at, 0).ctx("truncate", &at)?;
                spools.push(Spool::on_file(
                    f.try_clone().ctx("open", &at)?,
                    &SpoolState::default(),
                ));
            }
            let from = vec![(0u64, 0u32); files.len()];
            (
                C::fresh(id.as_str(), spools),
                Cursor::default(),
                ReadReport::default(),
                from,
            )
        }
    };
    let resumed = start != Cursor::default();
    let (mut fold, new, end) = if start.offset < meta.len() {
        fold_file_from(file, start, meta.len(), fold).ctx("read", path)?
    } else {
        (fold, ReadReport::default(), start)
    };
    let mut report = prefix;
    report.events += new.events;
    report.unknown += new.unknown;
    let mut kept = report.clone();
    kept.issues
        .extend(new.issues.iter().filter(|i| i.offset < end.offset).cloned());
    report.issues.extend(new.issues);
    if resumed && end == start {
        return Ok(Some((fold, report)));
    }
    // What the next read takes up: everything before `end` (a torn tail is read again).
    let saved = match fold.save() {
        Ok(s) => s,
        Err(e) => {
            // The spools may be half written: this fold is not trusted, nor the files.
            let _ = fsutil::remove_file(&state_path);
            return Err(e).ctx("write", &dir);
        }
    };
    let mut spools = Vec::with_capacity(files.len());
    for ((f, st), (from, crc)) in files.iter().zip(saved.spools).zip(from) {
        spools.push(spool_file(f, st, from.min(st.len), crc).ctx("read", &dir)?);
    }
    let fold_state = RawValue::from_string(String::from_utf8_lossy(&saved.state).into_owned())
        .map_err(std::io::Error::other)
        .ctx("write", &state_path)?;
    let stored = Stored {
        kind,
        session: id.as_str().to_owned(),
        log: log_id(file, meta, end.offset).ctx("read", path)?,
        lines: end.line_no,
        report: kept,
        spools,
        counts: saved.counts,
        fold: &fold_state,
    };
    let bytes = encode(&stored)
        .map_err(std::io::Error::other)
        .ctx("write", &state_path)?;
    fsutil::write_atomic(&state_path, &bytes, false)?;
    Ok(Some((fold, report)))
}

/// A taken-up fold: the fold, where its read goes on, what the read before reported, and each
/// spool's saved length and checksum.
type TakenUp<C> = (C, Cursor, ReadReport, Vec<(u64, u32)>);

/// The fold saved in `st`, when it describes this log and these spool files.
fn take_up<C: Checkpointed>(
    id: &SessionId,
    st: &Stored<'_>,
    file: &File,
    meta: &std::fs::Metadata,
    files: &[File],
    state_path: &Path,
) -> Result<Option<TakenUp<C>>> {
    let log = st.log;
    let same_log = st.kind == C::kind()
        && st.session == id.as_str()
        && st.spools.len() == files.len()
        && log.matches(file, meta, false).ctx("read", state_path)?;
    if !same_log {
        tracing::debug!(path = %state_path.display(), "the fold checkpoint does not match the log: rebuilt");
        return Ok(None);
    }
    for (f, saved) in files.iter().zip(&st.spools) {
        if !spool_matches(f, saved).ctx("read", state_path)? {
            tracing::debug!(path = %state_path.display(), "a spool of the fold checkpoint changed: rebuilt");
            return Ok(None);
        }
    }
    let mut spools = Vec::with_capacity(files.len());
    for (f, saved) in files.iter().zip(&st.spools) {
        // Bytes past the saved length are a save that did not finish.
        fsutil::set_len(f, state_path, saved.state.len).ctx("truncate", state_path)?;
        spools.push(Spool::on_file(
            f.try_clone().ctx("open", state_path)?,
            &saved.state,
        ));
    }
    let Some(fold) = C::resume(id.as_str(), st.fold, &st.counts, spools) else {
        return Ok(None);
    };
    let from = st
        .spools
        .iter()
        .map(|s| (s.state.len, s.crc))
        .collect::<Vec<_>>();
    let start = Cursor {
        line_no: st.lines,
        offset: log.covered,
    };
    Ok(Some((fold, start, st.report.clone(), from)))
}

/// What `doctor` finds of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// It describes its log as the log is now, and its spools read as saved.
    Good,
    /// Its state file does not read (cut, corrupt, of another version).
    Unreadable,
    /// It describes the log as it was (replaced, cut or rewritten since): the next read
    /// rebuilds it.
    Stale,
    /// A spool file does not hold what was saved (its checksum differs).
    Corrupt(String),
    /// Its session's log does not exist.
    Orphan,
}

/// The health of the checkpoint whose state file is `state_path`, for session `id`'s log.
/// Reads every spool in full.
pub fn health(home: &Home, id: &SessionId, state_path: &Path) -> Health {
    let Ok(Some(bytes)) = fsutil::read_bounded(state_path, MAX_STATE_BYTES, "fold checkpoint")
    else {
        return Health::Unreadable;
    };
    let Some(st) = decode(&bytes) else {
        return Health::Unreadable;
    };
    let Ok(file) = fsutil::open_read(&events_path(home, id)) else {
        return Health::Orphan;
    };
    let same = file
        .metadata()
        .and_then(|m| st.log.matches(&file, &m, true))
        .unwrap_or(false);
    if !same || st.session != id.as_str() {
        return Health::Stale;
    }
    let Some(stem) = state_path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".state"))
    else {
        return Health::Unreadable;
    };
    let Some(dir) = state_path.parent() else {
        return Health::Unreadable;
    };
    let suffixes = spool_suffixes(&st.kind);
    if stem != st.kind || suffixes.len() != st.spools.len() {
        return Health::Unreadable;
    }
    for (suffix, saved) in suffixes.iter().zip(&st.spools) {
        let at = dir.join(format!("{stem}.{suffix}"));
        let ok = fsutil::open_read(&at)
            .and_then(|f| {
                let now = spool_file(&f, saved.state, 0, 0)?;
                Ok(now == *saved)
            })
            .unwrap_or(false);
        if !ok {
            return Health::Corrupt(format!("{} does not hold what was saved", at.display()));
        }
    }
    Health::Good
}

/// The spool suffixes of a checkpoint kind (`trace-…`: three span spools; `replay-…`: turns).
pub fn spool_suffixes(kind: &str) -> &'static [&'static str] {
    if kind.starts_with("trace-") {
        TRACE_SPOOLS
    } else if kind.starts_with("replay-") {
        REPLAY_SPOOLS
    } else {
        &[]
    }
}

/// A trace checkpoint's spools: model, tool and denied spans.
pub const TRACE_SPOOLS: &[&str] = &["model", "tool", "denied"];
/// A replay checkpoint's spool: the turns.
pub const REPLAY_SPOOLS: &[&str] = &["turns", "ids"];
