//! The session store: `sessions/<project-dir>/<id>/{meta.json, messages.jsonl,
//! context-cache.json}` (SPEC §8), with the bugs of SPEC §19 fixed.
//!
//! Readers need no lock and never fail on a bad line. Every mutation of a session goes through a
//! [`SessionWriter`], which holds the session's advisory lock, so one process writes a session at
//! a time and appends, rewrites and meta updates cannot lose each other's work.

use std::fs::File;
use std::path::{Path, PathBuf};

use freecode_core::history::{HistoryMessage, load_history};
use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};
use serde::Serialize;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self};
use crate::home::Home;
use crate::jsonl::{self, LineIssue};
use crate::lock::LockWait;
use crate::settings::RecorderConfig;

mod create;
mod locate;
pub mod offsets;
mod read;
mod update;
mod writer;

pub use crate::settings::Durability;
pub use read::MessageBlocks;
pub use writer::SessionWriter;
pub(crate) use writer::read_journal;

/// `meta.json`.
pub const META_FILE: &str = "meta.json";
/// `messages.jsonl`.
pub const MESSAGES_FILE: &str = "messages.jsonl";
/// `context-cache.json`.
pub const CONTEXT_CACHE_FILE: &str = "context-cache.json";
/// Bytes cut off a torn tail are kept here for inspection, never glued onto.
pub const TORN_FILE: &str = "messages.jsonl.torn";
/// The compaction journal: present only between a compaction's commit and its completion.
pub const COMPACTION_JOURNAL: &str = "compaction.pending";
/// In a hashed project directory (`h-…`), the full project path.
pub const PROJECT_PATH_FILE: &str = ".project-path";

/// Store settings.
#[derive(Debug, Clone, Copy)]
pub struct StoreConfig {
    /// When appends are fsynced.
    pub durability: Durability,
    /// Whether a writer waits for a held session lock.
    pub lock_wait: LockWait,
    /// The clock, ms since the epoch (tests pin it).
    pub clock: fn() -> i64,
    /// Rollout recording of what the store itself does (`compact.occurred`).
    pub rollout: RecorderConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            durability: Durability::default(),
            lock_wait: LockWait::Fail,
            clock: crate::now_ms,
            rollout: RecorderConfig::default(),
        }
    }
}

/// What a new session starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    /// Title, may be empty.
    pub title: String,
    /// The project path (any non-empty string; it is keyed safely).
    pub project_path: String,
    /// Provider id.
    pub provider: String,
    /// The model to pin, if known.
    pub model: Option<String>,
}

/// Files written with an imported session, from its new id: (path in the home, bytes).
pub type ExtraFiles<'a> = dyn Fn(&SessionId) -> Vec<(PathBuf, Vec<u8>)> + 'a;

/// Filters of [`SessionStore::list`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only this status (a `deleted` filter is the way to see deleted sessions).
    pub status: Option<SessionStatus>,
    /// Only sessions whose `projectPath` equals this.
    pub project_path: Option<String>,
    /// Without a status filter, include deleted sessions too.
    pub include_deleted: bool,
    /// Only sessions this agent wrote ([`SessionMeta::agent`]: `freecode`, or the agent an
    /// import read them from, such as `codex`). A name no session has selects nothing.
    pub agent: Option<String>,
    /// Only sessions of this project path or one below it (by whole path components:
    /// [`freecode_core::project_key::within_project`]).
    pub within: Option<String>,
    /// Only sessions active (`lastTurnAt`) at or after this time, ms.
    pub since: Option<i64>,
    /// At most this many: the newest activity first.
    pub limit: Option<usize>,
}

impl ListFilter {
    /// Whether `m` is one this filter lists (everything but `limit`).
    pub fn keeps(&self, m: &SessionMeta) -> bool {
        let status_ok = match &self.status {
            Some(s) => &m.status == s,
            None => self.include_deleted || !m.is_deleted(),
        };
        let project_ok = match &self.project_path {
            Some(p) if !p.is_empty() => &m.project_path == p,
            _ => true,
        };
        let agent_ok = self.agent.as_deref().is_none_or(|a| m.agent() == a);
        let within_ok = self
            .within
            .as_deref()
            .is_none_or(|p| freecode_core::project_key::within_project(&m.project_path, p));
        let since_ok = self.since.is_none_or(|t| m.last_turn_at >= t);
        status_ok && project_ok && agent_ok && within_ok && since_ok
    }
}

/// The result of a listing.
#[derive(Debug, Default)]
pub struct Listing {
    /// Matching sessions, newest activity (`lastTurnAt`) first.
    pub sessions: Vec<SessionMeta>,
    /// Session directories that could not be read, with the reason.
    pub problems: Vec<(PathBuf, String)>,
}

/// A session's messages with the lines that were skipped.
#[derive(Debug, Default)]
pub struct MessageLog {
    /// Messages in file order.
    pub messages: Vec<StoredMessage>,
    /// Lines skipped, with line numbers and byte offsets.
    pub issues: Vec<LineIssue>,
}

/// What a resumed session hands the agent loop.
#[derive(Debug)]
pub struct SessionContext {
    /// The meta after resuming (status back to active after an interrupt).
    pub meta: SessionMeta,
    /// The stored messages, including the persisted "Continue…" message after an interrupt.
    pub messages: Vec<StoredMessage>,
    /// Lines skipped while reading.
    pub issues: Vec<LineIssue>,
    /// The latest compaction summary, to put in the system prompt.
    pub summary: Option<String>,
}

impl SessionContext {
    /// The model the session is pinned to.
    pub fn model(&self) -> Option<&str> {
        self.meta.model.as_deref()
    }

    /// The loop's in-memory history.
    pub fn history(&self) -> Vec<HistoryMessage> {
        load_history(&self.messages)
    }
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionOutcome {
    /// Whether the log was trimmed.
    pub compacted: bool,
    /// Estimated tokens before.
    pub tokens_before: u64,
    /// Estimated tokens after (summary plus kept messages).
    pub tokens_after: u64,
    /// Messages before.
    pub messages_before: usize,
    /// Messages after.
    pub messages_after: usize,
    /// Why nothing was done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Paths of one session on disk.
#[derive(Debug, Clone)]
pub struct SessionPaths {
    /// `sessions/<project-dir>/<id>`.
    pub dir: PathBuf,
}

impl SessionPaths {
    /// `meta.json`.
    pub fn meta(&self) -> PathBuf {
        self.dir.join(META_FILE)
    }
    /// `messages.jsonl`.
    pub fn messages(&self) -> PathBuf {
        self.dir.join(MESSAGES_FILE)
    }
    /// `context-cache.json`.
    pub fn context_cache(&self) -> PathBuf {
        self.dir.join(CONTEXT_CACHE_FILE)
    }
    fn journal(&self) -> PathBuf {
        self.dir.join(COMPACTION_JOURNAL)
    }
}

/// The session store over one home directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SessionStore {
    home: Home,
    config: StoreConfig,
}

fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The most a `meta.json` may hold (the original's are a few hundred bytes; a title or an
/// unknown field may be long, a 2 GB one is not a meta).
pub const META_MAX_BYTES: u64 = 4 << 20;
/// The most a compaction memory (`memory/<id>/memory.json`) may hold.
pub const MEMORY_MAX_BYTES: u64 = 64 << 20;
/// The most a `context-cache.json` may hold.
pub const CONTEXT_CACHE_MAX_BYTES: u64 = 64 << 20;

fn read_meta_file(path: &Path) -> Result<SessionMeta> {
    let bytes =
        fsutil::read_bounded(path, META_MAX_BYTES, "meta.json")?.ok_or_else(|| StoreError::Io {
            op: "read",
            path: path.to_owned(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
    let read = freecode_core::json::from_slice_lossy::<SessionMeta>(&bytes).map_err(|source| {
        StoreError::BadJson {
            path: path.to_owned(),
            source,
        }
    })?;
    if read.replaced > 0 {
        let n = read.replaced;
        let s = if n == 1 { "" } else { "s" };
        tracing::warn!(path = %path.display(), "{n} lone UTF-16 surrogate{s} read as U+FFFD");
    }
    Ok(read.value)
}

fn sort_newest_first(v: &mut [SessionMeta]) {
    v.sort_by(|a, b| {
        b.last_turn_at
            .cmp(&a.last_turn_at)
            .then(b.created_at.cmp(&a.created_at))
            .then(a.id.cmp(&b.id))
    });
}

impl SessionStore {
    /// A store over `home`; nothing is created until a write needs it.
    pub fn open(home: Home) -> Result<Self> {
        Self::with_config(home, StoreConfig::default())
    }

    /// A store with explicit settings.
    pub fn with_config(home: Home, config: StoreConfig) -> Result<Self> {
        // Nothing is created here: reading a home never changes it. The directories a write
        // needs are made by that write (`create`, `fork`, `import` make their project's).
        home.check()?;
        Ok(Self { home, config })
    }

    /// The home directory.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The settings.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    fn now(&self) -> i64 {
        (self.config.clock)()
    }

    fn sync_rewrites(&self) -> bool {
        self.config.durability != Durability::Never
    }
}

/// Why a `meta.json` cannot be its session's: its `id` is not its directory's name (SPEC §3:
/// they are equal). `None` when they agree.
pub(crate) fn meta_id_mismatch(meta_id: &str, dir_id: &str) -> Option<String> {
    (meta_id != dir_id)
        .then(|| format!("its id {meta_id:?} is not its directory's name {dir_id:?}"))
}

/// Bytes parsed at a time when loading a log: bounds the transient memory of a load (the block
/// and its records being parsed). At 8 MiB a fresh-process load of 100,000 messages (53 MB)
/// peaked 8 MiB higher and was no faster; at 1 MiB the result's size estimate overshoots.
const LOAD_BLOCK: usize = 2 * 1024 * 1024;

/// Bytes parsed at a time by [`SessionStore::message_blocks`]: a streaming consumer holds about
/// three blocks' messages (the one it writes, one queued, the next one parsed), well inside
/// 64 MiB; below 2 MiB the per-block thread start-ups begin to show.
pub const STREAM_BLOCK: usize = 2 * 1024 * 1024;

/// Bytes parsed at a time by [`MessageBlocks::render`] (or the block size it was opened with,
/// when smaller). Its blocks are handed between threads, none started per block, so they can be
/// smaller than [`STREAM_BLOCK`]: a 100,000-message session printed by `session show --json`
/// peaks at 35 MiB with these, 75-83 MiB with blocks of 2 MiB, for about the same time.
const RENDER_BLOCK: usize = 512 * 1024;

/// A render worker that stopped without its answer: it panicked (the scope re-raises that).
fn worker_gone(path: &Path) -> StoreError {
    StoreError::Io {
        op: "render",
        path: path.to_owned(),
        source: std::io::Error::other("a render worker stopped"),
    }
}

/// A parsed message shrunk to what it holds, on the thread that parsed it: parts are collected
/// with room to grow, and so are the maps of tool arguments (a one-key object kept room for
/// three entries of 112 bytes and their hash table: about 9 MB of a 100,000-message load).
fn compact_message(m: &mut StoredMessage) {
    m.parts.shrink_to_fit();
    for p in &mut m.parts {
        if let Some(args) = p.tool.as_mut().and_then(|t| t.args.as_mut()) {
            compact_value(args);
        }
    }
}

/// Rebuilds every object of `v` at its exact size (key order kept) and shrinks every array.
/// Depth is bounded by the JSON parser's nesting limit.
fn compact_value(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            let old = std::mem::take(map);
            let mut exact = serde_json::Map::with_capacity(old.len());
            for (k, mut x) in old {
                compact_value(&mut x);
                exact.insert(k, x);
            }
            *map = exact;
        }
        serde_json::Value::Array(items) => {
            items.shrink_to_fit();
            items.iter_mut().for_each(compact_value);
        }
        _ => {}
    }
}

/// How a line of `messages.jsonl` is read: the scanner first, `serde_json` for the rest, each
/// message shrunk where it was parsed.
const MESSAGE_DECODE: jsonl::Decode<StoredMessage> = jsonl::Decode {
    scan: StoredMessage::scan,
    finish: compact_message,
};

/// [`MESSAGE_DECODE`] for messages rendered and dropped at once ([`MessageBlocks::render`]):
/// not shrunk first.
const RENDER_DECODE: jsonl::Decode<StoredMessage> = jsonl::Decode {
    scan: StoredMessage::scan,
    finish: |_| {},
};

/// Bytes read at a time by a page read ([`SessionStore::message_blocks_from`]): a stride and
/// a page of ordinary messages.
const PAGE_BLOCK: usize = 2 * offsets::STRIDE;

/// Logs from this size on are loaded as two halves on two threads ([`read_messages_at`]).
const SPLIT_LOAD_BYTES: u64 = 2 * LOAD_BLOCK as u64;

/// A log opened for reading, `None` when it does not exist (an empty log).
fn open_log(path: &Path) -> Result<Option<File>> {
    match fsutil::open_read(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx("open", path),
    }
}

/// Logs the skipped or repaired lines of a read.
fn log_issues(path: &Path, issues: &[LineIssue]) {
    for i in issues {
        if i.kind.skipped() {
            tracing::warn!(path = %path.display(), "skipped {i}");
        } else {
            tracing::warn!(path = %path.display(), "{i}");
        }
    }
}

/// Reads a whole `messages.jsonl`; a missing file is an empty log. Peak memory is the messages
/// plus one block of the file per thread. From [`SPLIT_LOAD_BYTES`] on, the file is read as two
/// halves (cut at the first line start past the middle) on two threads, each a block at a
/// time: the same messages and issues, with the same line numbers, as one read.
pub fn read_messages_at(path: &Path) -> Result<MessageLog> {
    let Some(file) = open_log(path)? else {
        return Ok(MessageLog {
            messages: Vec::new(),
            issues: Vec::new(),
        });
    };
    let size = file.metadata().ctx("stat", path)?.len();
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    let mid = if two && size >= SPLIT_LOAD_BYTES {
        jsonl::line_start(&file, size / 2, size).ctx("read", path)?
    } else {
        size
    };
    if mid >= size {
        let (messages, issues, _) = read_part(&file, (0, u64::MAX), 1, size).ctx("read", path)?;
        log_issues(path, &issues);
        return Ok(MessageLog { messages, issues });
    }
    // The second half on the helper thread (`crate::helper`), through a handle of its own.
    let tail_file = file.try_clone().ctx("open", path)?;
    let tail = crate::helper::run(move || read_part(&tail_file, (mid, size), 1, size - mid));
    let head = read_part(&file, (0, mid), 1, size);
    let tail = tail
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the tail read panicked")));
    let (mut messages, mut issues, next_line) = head.ctx("read", path)?;
    let (mut tail, tail_issues, _) = tail.ctx("read", path)?;
    messages.append(&mut tail);
    drop(tail);
    issues.extend(tail_issues.into_iter().map(|mut i| {
        i.line += next_line - 1;
        i
    }));
    log_issues(path, &issues);
    Ok(MessageLog { messages, issues })
}

/// Reads bytes `from..to` of a log (`to` may be past its end) on this thread, a block at a time,
/// straight into one vector, numbering lines from `line`. After the first block the vector is
/// sized from that block's density for `reserve_for` bytes (the whole log's for the part that
/// the other appends to). Returns the messages, the issues and the next line's number.
fn read_part(
    file: &File,
    (from, to): (u64, u64),
    line: u64,
    reserve_for: u64,
) -> std::io::Result<(Vec<StoredMessage>, Vec<LineIssue>, u64)> {
    let reader = fsutil::RangeReader::new(file, from, to);
    let mut blocks = jsonl::Blocks::part(reader, LOAD_BLOCK, line, from);
    let mut messages: Vec<StoredMessage> = Vec::new();
    let mut issues = Vec::new();
    let mut sized = false;
    while let Some(mut block_issues) = blocks.next_block_into(MESSAGE_DECODE, &mut messages)? {
        if !sized && !messages.is_empty() {
            sized = true;
            // Once, from the first block's density, instead of doubling.
            let per_byte = messages.len() as f64 / LOAD_BLOCK as f64;
            let want = (per_byte * reserve_for as f64 * 1.125) as usize + messages.len();
            messages.reserve_exact(want.saturating_sub(messages.len()));
        }
        issues.append(&mut block_issues);
    }
    Ok((messages, issues, blocks.next_line()))
}

/// Copies `src` to a new file `dst` (0600) with the kernel's copy, then cuts any torn tail.
fn copy_complete_lines(src: &Path, dst: &Path) -> Result<()> {
    let mut out = fsutil::create_new(dst)?;
    match fsutil::open_read(src) {
        Ok(mut input) => {
            fsutil::copy_into(&mut input, &mut out, dst).ctx("copy into", dst)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx("open", src),
    }
    if let Some(cut) = torn_tail_start(&mut out, dst)? {
        fsutil::set_len(&out, dst, cut).ctx("truncate", dst)?;
    }
    Ok(())
}

/// If the file does not end in `\n`, the offset just after its last `\n` (0 if none).
fn torn_tail_start(file: &mut File, path: &Path) -> Result<Option<u64>> {
    let len = file.metadata().ctx("stat", path)?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    read_at(file, len - 1, &mut last).ctx("read", path)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    let mut end = len;
    let mut chunk = vec![0u8; 1 << 20];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        read_at(file, start, &mut chunk[..n]).ctx("read", path)?;
        if let Some(i) = memchr::memrchr(b'\n', &chunk[..n]) {
            return Ok(Some(start + i as u64 + 1));
        }
        end = start;
    }
    Ok(Some(0))
}

fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Shrinking a loaded message changes no byte it writes back: key order, nesting, numbers
    /// and unknown keys are kept.
    #[test]
    fn a_compacted_message_writes_the_same_line() {
        let line = r#"{"id":"m","role":"assistant","parts":[{"type":"tool","tool":{"name":"sh","args":{"z":1,"a":{"y":[1,{"q":null,"b":0.5}],"c":"x"},"m":[],"big":9007199254740993}},"result":"r"},{"type":"text","content":"t","later":{"k":2,"a":1}}],"timestamp":1,"usage":{"inputTokens":1}}"#;
        let mut m: StoredMessage = serde_json::from_str(line).unwrap();
        compact_message(&mut m);
        assert_eq!(serde_json::to_string(&m).unwrap(), line);
        assert_eq!(m.parts.capacity(), 2);
    }
}
