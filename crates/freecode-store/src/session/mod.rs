//! The session store: `sessions/<project-dir>/<id>/{meta.json, messages.jsonl,
//! context-cache.json}` (SPEC §8), with the bugs of SPEC §19 fixed.
//!
//! Readers need no lock and never fail on a bad line. Every mutation of a session goes through a
//! [`SessionWriter`], which holds the session's advisory lock, so one process writes a session at
//! a time and appends, rewrites and meta updates cannot lose each other's work.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use freecode_core::context_cache::ContextCache;
use freecode_core::history::{HistoryMessage, load_history};
use freecode_core::memory::CompactionMemory;
use freecode_core::meta::IMPORTED_FROM;
use freecode_core::project_key::{
    ProjectKey, candidate_dir_names, is_project_dir_name, project_key,
};
use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};
use serde::Serialize;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, create_dir_exclusive, create_dir_private, write_atomic};
use crate::home::Home;
use crate::jsonl::{self, LineIssue};
use crate::lock::{LockWait, SessionLock};
use crate::settings::RecorderConfig;

pub mod offsets;
mod writer;

pub use crate::settings::Durability;
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

    // ----- locating -------------------------------------------------------------------------

    /// Finds a session's directory by id, scanning project directories (one `stat` each).
    pub fn locate(&self, id: &SessionId) -> Result<SessionPaths> {
        let sessions = self.home.sessions_dir();
        let entries = match fs::read_dir(&sessions) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound { id: id.to_string() });
            }
            Err(e) => return Err(e).ctx("list", &sessions),
        };
        for entry in entries {
            let entry = entry.ctx("list", &sessions)?;
            if !entry.file_name().to_str().is_some_and(is_project_dir_name)
                || entry.file_type().is_ok_and(|t| t.is_symlink())
            {
                continue;
            }
            let dir = entry.path().join(id.as_str());
            if dir.join(META_FILE).is_file() {
                return Ok(SessionPaths { dir });
            }
        }
        Err(StoreError::NotFound { id: id.to_string() })
    }

    /// The session a user's id or unique id prefix names, as git resolves a short hash: an
    /// existing id is itself; otherwise the one session (of any status) or recorded rollout log
    /// whose id starts with `prefix`. None is [`StoreError::NotFound`], several is
    /// [`StoreError::AmbiguousId`] with the candidates, sorted.
    pub fn resolve_prefix(&self, prefix: &str) -> Result<SessionId> {
        let wanted = SessionId::new(prefix)?;
        if self.locate(&wanted).is_ok()
            || self
                .home
                .rollout_dir(&wanted)
                .join(crate::rollout::EVENTS_FILE)
                .is_file()
        {
            return Ok(wanted);
        }
        let mut found = std::collections::BTreeSet::new();
        let mut collect = |dir: &Path, is_session: bool| {
            let Ok(rd) = fs::read_dir(dir) else { return };
            for e in rd.filter_map(|e| e.ok()) {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                if !name.starts_with(prefix) || e.file_type().is_ok_and(|t| t.is_symlink()) {
                    continue;
                }
                let Ok(id) = SessionId::new(name) else {
                    continue;
                };
                let marker = if is_session {
                    META_FILE
                } else {
                    crate::rollout::EVENTS_FILE
                };
                if e.path().join(marker).is_file() {
                    found.insert(id);
                }
            }
        };
        let sessions = self.home.sessions_dir();
        if let Ok(rd) = fs::read_dir(&sessions) {
            for e in rd.filter_map(|e| e.ok()) {
                if e.file_name().to_str().is_some_and(is_project_dir_name)
                    && !e.file_type().is_ok_and(|t| t.is_symlink())
                {
                    collect(&e.path(), true);
                }
            }
        }
        collect(&self.home.root().join("rollout").join("sessions"), false);
        let mut found = found.into_iter();
        match (found.next(), found.next()) {
            (None, _) => Err(StoreError::NotFound {
                id: prefix.to_owned(),
            }),
            (Some(id), None) => Ok(id),
            (Some(a), Some(b)) => Err(StoreError::AmbiguousId {
                prefix: prefix.to_owned(),
                candidates: [a, b]
                    .into_iter()
                    .chain(found)
                    .map(|id| id.to_string())
                    .collect(),
            }),
        }
    }

    /// The directory new sessions of `project_path` go to.
    fn project_dir_for(&self, project_path: &str) -> Result<PathBuf> {
        if project_path.is_empty() {
            return Err(StoreError::InvalidProjectPath {
                path: String::new(),
                why: "it is empty",
            });
        }
        let key = project_key(project_path);
        let dir = self.home.sessions_dir().join(key.dir_name());
        create_dir_private(&dir)?;
        if let ProjectKey::Hashed(_) = key {
            let side = dir.join(PROJECT_PATH_FILE);
            if !side.exists() {
                write_atomic(&side, project_path.as_bytes(), self.sync_rewrites())?;
            }
        }
        Ok(dir)
    }

    // ----- reading --------------------------------------------------------------------------

    /// Reads a session's meta (any status).
    pub fn meta(&self, id: &SessionId) -> Result<SessionMeta> {
        self.read_located(id, |p| read_meta_file(&p.meta()))
    }

    /// Every session directory with its id, complete or not (a directory being created has
    /// no `meta.json` yet): one `readdir` per project directory, nothing opened. Links where a
    /// project or session directory should be are skipped, never followed.
    pub fn session_dirs(&self) -> Result<Vec<(SessionId, PathBuf)>> {
        self.walk(None, &mut Vec::new())
    }

    /// The session directories of `only` those project directories (or of every one), with
    /// their ids; links where a project or session directory should be are named in
    /// `problems`.
    fn walk(
        &self,
        only: Option<&[PathBuf]>,
        problems: &mut Vec<(PathBuf, String)>,
    ) -> Result<Vec<(SessionId, PathBuf)>> {
        let sessions_dir = self.home.sessions_dir();
        let project_dirs: Vec<PathBuf> = match only {
            Some(dirs) => dirs.to_vec(),
            None => match fs::read_dir(&sessions_dir) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_str().is_some_and(is_project_dir_name))
                    .filter(|e| !e.file_type().is_ok_and(|t| t.is_symlink()))
                    .map(|e| e.path())
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e).ctx("list", &sessions_dir),
            },
        };
        let mut found = Vec::new();
        for pd in &project_dirs {
            // A link where a project directory should be is named, never followed.
            if fs::symlink_metadata(pd).is_ok_and(|m| m.file_type().is_symlink()) {
                problems.push((
                    pd.clone(),
                    StoreError::Symlink { path: pd.clone() }.to_string(),
                ));
                continue;
            }
            let Ok(rd) = fs::read_dir(pd) else { continue };
            for e in rd.filter_map(|e| e.ok()) {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                if let Ok(id) = SessionId::new(name) {
                    if e.file_type().is_ok_and(|t| t.is_symlink()) {
                        let path = e.path();
                        problems.push((path.clone(), StoreError::Symlink { path }.to_string()));
                        continue;
                    }
                    found.push((id, e.path()));
                }
            }
        }
        Ok(found)
    }

    /// Lists sessions, newest activity first. Unreadable session directories, and those whose
    /// `meta.json` names another id, are reported in [`Listing::problems`] and skipped.
    pub fn list(&self, filter: &ListFilter) -> Result<Listing> {
        let mut problems = Vec::new();
        let only: Option<Vec<PathBuf>> = match &filter.project_path {
            // Only the directories this project's sessions can be in: ours, the original's and
            // earlier versions'. Any may hold other projects too; `projectPath` tells them apart.
            Some(p) if !p.is_empty() => Some(
                candidate_dir_names(p)
                    .into_iter()
                    .map(|n| self.home.sessions_dir().join(n))
                    .collect(),
            ),
            _ => None,
        };
        let candidates: Vec<PathBuf> = self
            .walk(only.as_deref(), &mut problems)?
            .into_iter()
            .map(|(_, dir)| dir.join(META_FILE))
            .collect();
        let read = |paths: &[PathBuf]| {
            let mut ok = Vec::new();
            let mut bad = Vec::new();
            for p in paths {
                match read_meta_file(p) {
                    Ok(m) => {
                        let dir_id = p
                            .parent()
                            .and_then(Path::file_name)
                            .and_then(|n| n.to_str())
                            .unwrap_or_default();
                        match meta_id_mismatch(&m.id, dir_id) {
                            None => ok.push(m),
                            Some(why) => bad.push((p.clone(), why)),
                        }
                    }
                    // A directory without meta.json is a session being created (or not one).
                    Err(StoreError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound => {}
                    Err(StoreError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotADirectory => {}
                    Err(e) => bad.push((p.clone(), crate::error::chain(&e))),
                }
            }
            (ok, bad)
        };
        let (mut metas, read_problems) = if candidates.len() >= 512 {
            let mid = candidates.len() / 2;
            let (a, b) = candidates.split_at(mid);
            std::thread::scope(|s| {
                let h = s.spawn(|| read(b));
                let (mut ok, mut bad) = read(a);
                let (ok2, bad2) = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                ok.extend(ok2);
                bad.extend(bad2);
                (ok, bad)
            })
        } else {
            read(&candidates)
        };
        metas.retain(|m| filter.keeps(m));
        sort_newest_first(&mut metas);
        if let Some(n) = filter.limit {
            metas.truncate(n);
        }
        problems.extend(read_problems);
        Ok(Listing {
            sessions: metas,
            problems,
        })
    }

    /// Reads every message, skipping and reporting bad lines. Memory: the file plus the messages.
    pub fn messages(&self, id: &SessionId) -> Result<MessageLog> {
        self.read_located(id, |paths| {
            self.recover_if_needed(id, paths);
            read_messages_at(&paths.messages())
        })
    }

    /// Reads the messages a block at a time ([`MessageBlocks`]): what a consumer that writes
    /// them out as it goes (`session show --json`) reads, in memory bounded by two blocks.
    pub fn message_blocks(&self, id: &SessionId) -> Result<MessageBlocks> {
        self.read_located(id, |paths| {
            self.recover_if_needed(id, paths);
            MessageBlocks::open(&paths.messages(), STREAM_BLOCK)
        })
    }

    /// Session `id`'s messages from about message `first` on (counted from 0 as a full read
    /// counts them), read as the file is (no repair), and the number of the first message
    /// the blocks hold: at most `first`, within a stride ([`offsets::STRIDE`]) of it. The log's
    /// offset index ([`offsets`]) is brought up to date first, which reads only what was
    /// appended since it was last saved, so page N of a long session costs a page, not N.
    pub fn message_blocks_from(
        &self,
        id: &SessionId,
        first: usize,
    ) -> Result<(MessageBlocks, usize)> {
        self.read_located(id, |paths| {
            let path = paths.messages();
            let Some(mut file) = open_log(&path)? else {
                return Ok((
                    MessageBlocks {
                        path,
                        blocks: None,
                        size: 0,
                    },
                    0,
                ));
            };
            let meta = file.metadata().ctx("stat", &path)?;
            let mark = if first == 0 || meta.len() < offsets::STRIDE as u64 {
                offsets::Mark::START
            } else {
                offsets::current(&self.home, id, &path, &file, &meta, MESSAGE_DECODE)?
                    .seek(first as u64)
            };
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(mark.offset))
                .ctx("seek", &path)?;
            let blocks = jsonl::Blocks::part(file, PAGE_BLOCK, mark.line, mark.offset);
            Ok((
                MessageBlocks {
                    path,
                    blocks: Some(blocks),
                    size: meta.len(),
                },
                usize::try_from(mark.ordinal).unwrap_or(usize::MAX),
            ))
        })
    }

    /// Whether a writer holds session `id` now (its [`crate::lock::LOCK_FILE`] is locked): a
    /// run or an import is adding to it. Probed with a shared lock taken and dropped at once
    /// (a writer arriving meanwhile waits out its grace, [`crate::lock::try_lock_graced`]);
    /// the lock file is never created, and never opened through a link.
    pub fn is_being_written(&self, id: &SessionId) -> Result<bool> {
        let dir = self.locate(id)?.dir;
        let path = dir.join(crate::lock::LOCK_FILE);
        let file = match crate::fsutil::open_read(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).ctx("open", &path),
        };
        match file.try_lock_shared() {
            Ok(()) => Ok(false),
            Err(std::fs::TryLockError::WouldBlock) => Ok(true),
            Err(std::fs::TryLockError::Error(e)) => Err(e).ctx("lock", &path),
        }
    }

    /// How many messages session `id`'s log holds, counted as a full read counts them (lines
    /// that do not parse are not messages). The offset index is brought up to date as for a
    /// page ([`Self::message_blocks_from`]), and only what lies past its last mark (about a
    /// stride) is read: a pager's page count costs what a page does.
    pub fn message_count(&self, id: &SessionId) -> Result<u64> {
        self.read_located(id, |paths| {
            let path = paths.messages();
            let Some(mut file) = open_log(&path)? else {
                return Ok(0);
            };
            let meta = file.metadata().ctx("stat", &path)?;
            let mark = if meta.len() < offsets::STRIDE as u64 {
                offsets::Mark::START
            } else {
                let ix = offsets::current(&self.home, id, &path, &file, &meta, MESSAGE_DECODE)?;
                ix.marks().last().copied().unwrap_or(offsets::Mark::START)
            };
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(mark.offset))
                .ctx("seek", &path)?;
            let mut blocks = jsonl::Blocks::part(file, PAGE_BLOCK, mark.line, mark.offset);
            let mut items = Vec::new();
            let mut n = mark.ordinal;
            while blocks
                .next_block_into(MESSAGE_DECODE, &mut items)
                .ctx("read", &path)?
                .is_some()
            {
                n += items.len() as u64;
                items.clear();
            }
            Ok(n)
        })
    }

    /// Streams messages in constant memory, calling `on_issue` for each skipped line.
    pub fn stream_messages(
        &self,
        id: &SessionId,
        on_message: impl FnMut(StoredMessage),
        on_issue: impl FnMut(LineIssue),
    ) -> Result<()> {
        let path = self.locate(id)?.messages();
        let Some(file) = open_log(&path)? else {
            return Ok(());
        };
        jsonl::stream(file, on_message, on_issue).ctx("read", &path)
    }

    /// The loop's in-memory history of a session (SPEC §10).
    pub fn history(&self, id: &SessionId) -> Result<Vec<HistoryMessage>> {
        Ok(load_history(&self.messages(id)?.messages))
    }

    /// The context cache, or `None` when absent, empty or unparsable (as the original).
    pub fn context_cache(&self, id: &SessionId) -> Result<Option<ContextCache>> {
        let path = self.locate(id)?.context_cache();
        let bytes = fsutil::read_bounded(&path, CONTEXT_CACHE_MAX_BYTES, "context-cache.json")?;
        Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// The compaction memory (`memory/<id>/memory.json`), if any.
    pub fn compaction_memory(&self, id: &SessionId) -> Result<Option<CompactionMemory>> {
        let path = self.home.memory_file(id);
        match fsutil::read_bounded(&path, MEMORY_MAX_BYTES, "memory.json")? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|source| StoreError::BadJson { path, source }),
        }
    }

    /// The most recently active interrupted session and the id of its interrupted message (the
    /// marked one, not merely the last line; SPEC §19.21).
    pub fn interrupted_session(&self) -> Result<Option<(SessionMeta, Option<String>)>> {
        let listing = self.list(&ListFilter {
            status: Some(SessionStatus::Interrupted),
            ..Default::default()
        })?;
        let Some(meta) = listing.sessions.into_iter().next() else {
            return Ok(None);
        };
        let id = SessionId::new(meta.id.clone())?;
        let log = self.messages(&id)?;
        let marked = log
            .messages
            .iter()
            .rev()
            .find(|m| m.is_interrupted())
            .or(log.messages.last());
        Ok(Some((meta, marked.map(|m| m.id.clone()))))
    }

    // ----- creating -------------------------------------------------------------------------

    /// Creates a session with a fresh UUID.
    pub fn create(&self, new: NewSession) -> Result<SessionId> {
        let id = SessionId::new(new_uuid())?;
        // A fresh random UUID cannot exist elsewhere: skip the scan; the exclusive mkdir still
        // refuses a clash in the project directory.
        self.create_at(new, &id)?;
        Ok(id)
    }

    /// Creates a session with a fresh UUID that already holds `messages` (an import). The
    /// session is built in a hidden staging directory (`.import-<id>`, which listings skip):
    /// the log written whole, `meta.json` as `edit` shapes it, and `extra_files` (paths in the
    /// home, each written atomically); then one rename makes it visible. On any error everything
    /// written so far is removed; after a crash only the hidden directory can remain.
    pub fn create_populated(
        &self,
        new: NewSession,
        messages: &[StoredMessage],
        extra_files: &ExtraFiles<'_>,
        edit: impl FnOnce(&mut SessionMeta),
    ) -> Result<SessionId> {
        let id = SessionId::new(new_uuid())?;
        let project_dir = self.project_dir_for(&new.project_path)?;
        let staging = project_dir.join(format!(".import-{id}"));
        let paths = SessionPaths {
            dir: project_dir.join(id.as_str()),
        };
        let staged = SessionPaths {
            dir: staging.clone(),
        };
        create_dir_exclusive(&staging).ctx("create directory", &staging)?;
        // Held while the session is made: `freecode doctor` clears a staging directory only
        // when no process holds it. The lock file moves with the directory's rename.
        let _making = SessionLock::acquire(&staging, id.as_str(), LockWait::Fail)?;
        let extras = extra_files(&id);
        let _busy = fsutil::busy();
        let result = (|| {
            self.stage(&staged, &id, new, messages, edit, true)?;
            for (path, bytes) in &extras {
                if let Some(dir) = path.parent() {
                    fsutil::create_dir_private(dir)?;
                }
                write_atomic(path, bytes, true)?;
            }
            fsutil::rename(&staging, &paths.dir)?;
            fsutil::sync_dir(&project_dir)
        })();
        if result.is_err() {
            let _ = fsutil::remove_tree(&staging);
            for (path, _) in &extras {
                let _ = fsutil::remove_file(path);
                if let Some(dir) = path.parent() {
                    // Only if empty: the directories are this session's own.
                    let _ = fsutil::remove_empty_dir(dir);
                }
            }
        }
        if result.is_ok() {
            self.note_change(&id, &paths.dir);
        }
        result.map(|()| id)
    }

    /// Writes a staged session's log (`messages`, whole) and its `meta.json` as `edit` shapes
    /// it (its id kept `id`): the common part of [`SessionStore::create_populated`] and
    /// [`SessionStore::put_populated`].
    fn stage(
        &self,
        staged: &SessionPaths,
        id: &SessionId,
        new: NewSession,
        messages: &[StoredMessage],
        edit: impl FnOnce(&mut SessionMeta),
        sync: bool,
    ) -> Result<()> {
        let mut log = Vec::new();
        for m in messages {
            let line = m.to_line();
            crate::jsonl::check_line(&staged.messages(), &line)?;
            log.extend_from_slice(&line);
        }
        write_atomic(&staged.messages(), &log, sync)?;
        let mut meta = SessionMeta::new(
            id,
            new.title,
            new.project_path,
            new.provider,
            new.model,
            self.now(),
        );
        edit(&mut meta);
        meta.id = id.as_str().to_owned();
        write_atomic(&staged.meta(), &meta.to_pretty_json(), sync)
    }

    /// Writes the session `id` whole, holding `messages`: created when it does not exist,
    /// replaced all or nothing when it does (an import from another agent, whose id is
    /// derived from the source's, read again after the source changed). The new session is
    /// built in a hidden staging directory (`.import-<id>-<uuid>`, which listings skip and
    /// `freecode doctor --fix` clears when nobody holds it): the log written whole, then
    /// `meta.json` as `edit` shapes it. An existing session is locked (its writer), renamed
    /// out of sight (`.purge-<id>-<uuid>`, as [`SessionStore::purge`] does), the staging
    /// directory renamed into place, and the old one removed. `extra_files` (paths in the
    /// home, e.g. the rollout log) are written atomically after the session is in place; a
    /// crash in between leaves the session with its previous extras, which the next import
    /// rewrites. On an error before the rename nothing changes. Files and directories are
    /// fsynced unless the store's durability is [`Durability::Never`] (a bulk import syncs the
    /// file system once at its end instead).
    pub fn put_populated(
        &self,
        id: &SessionId,
        new: NewSession,
        messages: &[StoredMessage],
        extra_files: &ExtraFiles<'_>,
        edit: impl FnOnce(&mut SessionMeta),
    ) -> Result<()> {
        let sync = self.sync_rewrites();
        let existing = match self.writer(id) {
            Ok(w) => Some(w),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let project_dir = self.project_dir_for(&new.project_path)?;
        let staging = project_dir.join(format!(".import-{id}-{}", new_uuid()));
        let target = project_dir.join(id.as_str());
        let staged = SessionPaths {
            dir: staging.clone(),
        };
        create_dir_exclusive(&staging).ctx("create directory", &staging)?;
        let making = SessionLock::acquire(&staging, id.as_str(), LockWait::Fail)?;
        let _busy = fsutil::busy();
        let staged_ok = self.stage(&staged, id, new, messages, edit, sync);
        if let Err(e) = staged_ok {
            let _ = fsutil::remove_tree(&staging);
            return Err(e);
        }
        let swapped = (|| {
            let mut doomed = None;
            if let Some(w) = &existing {
                let dir = w.paths.dir.clone();
                let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                let out = parent.join(format!(".purge-{id}-{}", new_uuid()));
                fsutil::rename(&dir, &out)?;
                if sync {
                    fsutil::sync_dir(&parent)?;
                }
                doomed = Some(out);
            }
            fsutil::rename(&staging, &target)?;
            if sync {
                fsutil::sync_dir(&project_dir)?;
            }
            Ok::<_, StoreError>(doomed)
        })();
        drop(making);
        let doomed = match swapped {
            Ok(d) => d,
            Err(e) => {
                let _ = fsutil::remove_tree(&staging);
                return Err(e);
            }
        };
        drop(existing);
        if let Some(d) = doomed {
            fsutil::remove_tree(&d)?;
        }
        for (path, bytes) in extra_files(id) {
            if let Some(dir) = path.parent() {
                fsutil::create_dir_private(dir)?;
            }
            write_atomic(&path, &bytes, sync)?;
        }
        self.note_change(id, &target);
        Ok(())
    }

    /// Notes in the change journal ([`crate::changes`]) that the session in `dir` changed.
    pub(crate) fn note_change(&self, id: &SessionId, dir: &Path) {
        crate::changes::note(&self.home, id.as_str(), &writer::project_dir_name(dir));
    }

    /// Creates a session with the given id; fails if any session has it (never overwrites).
    pub fn create_with_id(&self, new: NewSession, id: &SessionId) -> Result<SessionPaths> {
        match self.locate(id) {
            Ok(p) => {
                return Err(StoreError::AlreadyExists {
                    id: id.to_string(),
                    path: p.dir,
                });
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        self.create_at(new, id)
    }

    /// Creates a session with a fresh UUID and returns its writer, holding the lock the
    /// creation took: what [`SessionStore::create`] then [`SessionStore::writer`] do, without
    /// locating the new session again, re-taking its lock, re-opening its log or looking for
    /// recovery work in a directory nobody else has written (about 50 syscalls a session).
    /// The files and their durability are those of `create`.
    pub fn create_writer(&self, new: NewSession) -> Result<SessionWriter> {
        let id = SessionId::new(new_uuid())?;
        let (paths, lock, log) = self.create_locked(new, &id)?;
        Ok(SessionWriter::from_created(
            self.clone(),
            id,
            paths,
            lock,
            log,
        ))
    }

    fn create_at(&self, new: NewSession, id: &SessionId) -> Result<SessionPaths> {
        self.create_locked(new, id).map(|(paths, _, _)| paths)
    }

    /// Creates the session `id` (directory, lock, empty log, then `meta.json` last) and returns
    /// its paths, the lock (held since before anything was written in the directory) and the
    /// log, open for appending.
    fn create_locked(
        &self,
        new: NewSession,
        id: &SessionId,
    ) -> Result<(SessionPaths, SessionLock, File)> {
        let project_dir = self.project_dir_for(&new.project_path)?;
        let paths = SessionPaths {
            dir: project_dir.join(id.as_str()),
        };
        create_dir_exclusive(&paths.dir).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StoreError::AlreadyExists {
                    id: id.to_string(),
                    path: paths.dir.clone(),
                }
            } else {
                StoreError::Io {
                    op: "create directory",
                    path: paths.dir.clone(),
                    source: e,
                }
            }
        })?;
        // Held until meta.json is written (see `fork`), and by `create_writer`'s writer after.
        let making = SessionLock::acquire(&paths.dir, id.as_str(), LockWait::Fail)?;
        let now = self.now();
        let meta = SessionMeta::new(
            id,
            new.title,
            new.project_path,
            new.provider,
            new.model,
            now,
        );
        let log = fsutil::create_new_append(&paths.messages())?;
        // meta.json last: a session is visible to listings only once it is complete.
        write_atomic(&paths.meta(), &meta.to_pretty_json(), self.sync_rewrites())?;
        if self.sync_rewrites() {
            fsutil::sync_dir(&project_dir)?;
        }
        self.note_change(id, &paths.dir);
        Ok((paths, making, log))
    }

    // ----- writing --------------------------------------------------------------------------

    /// Takes the session's write lock and opens it for appending. A session still in a
    /// directory an earlier version named (`esc-…`/`h-…`) where the original can find it under
    /// its own name is moved there first, under the lock ([`SessionWriter::move_to_current_dir`]).
    pub fn writer(&self, id: &SessionId) -> Result<SessionWriter> {
        let mut tries = 0;
        loop {
            let paths = self.locate(id)?;
            match SessionWriter::open(self.clone(), id.clone(), paths) {
                Ok(mut w) => {
                    w.move_to_current_dir()?;
                    return Ok(w);
                }
                // Another writer moved the session while this one waited for its lock: the
                // directory found is gone; find it again.
                Err(e) if tries < 3 && e.is_not_found() => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs a read on a located session, locating it again once if it was moved in between
    /// (a writer moving it to its current directory).
    fn read_located<T>(
        &self,
        id: &SessionId,
        read: impl Fn(&SessionPaths) -> Result<T>,
    ) -> Result<T> {
        let paths = self.locate(id)?;
        match read(&paths) {
            Err(e) if e.is_not_found() && !paths.dir.exists() => read(&self.locate(id)?),
            r => r,
        }
    }

    /// Appends one message (taking and releasing the lock).
    pub fn append(&self, id: &SessionId, msg: &StoredMessage) -> Result<()> {
        self.writer(id)?.append(msg)
    }

    /// Updates the meta; `id` and `createdAt` cannot change, `updatedAt` is set to now.
    pub fn update_meta(
        &self,
        id: &SessionId,
        f: impl FnOnce(&mut SessionMeta),
    ) -> Result<SessionMeta> {
        self.writer(id)?.update_meta(f)
    }

    /// Moves a session to another project, keeping its id (see
    /// [`SessionWriter::move_to_project`]); `project_path` must be absolute and in normal form.
    pub fn move_to_project(&self, id: &SessionId, project_path: &str) -> Result<SessionMeta> {
        self.writer(id)?.move_to_project(project_path)
    }

    /// Sets the status.
    pub fn set_status(&self, id: &SessionId, status: SessionStatus) -> Result<SessionMeta> {
        self.update_meta(id, |m| m.status = status)
    }

    /// Soft delete: status `deleted`, files stay (SPEC §8.8).
    pub fn delete(&self, id: &SessionId) -> Result<SessionMeta> {
        self.set_status(id, SessionStatus::Deleted)
    }

    /// Archive.
    pub fn archive(&self, id: &SessionId) -> Result<SessionMeta> {
        self.set_status(id, SessionStatus::Archived)
    }

    /// Undo a soft delete or an archive: status back to `active`.
    pub fn restore(&self, id: &SessionId) -> Result<SessionMeta> {
        self.set_status(id, SessionStatus::Active)
    }

    /// Erases a session: its directory, its rollout log and its compaction memory — nothing
    /// else. Returns the paths removed. A purge interrupted by a crash (the directory already
    /// renamed to `.purge-<id>-…`) is finished by purging again.
    pub fn purge(&self, id: &SessionId) -> Result<Vec<PathBuf>> {
        let leftovers = self.purge_leftovers(id)?;
        let mut removed = Vec::new();
        let mut parents = Vec::new();
        match self.writer(id) {
            Ok(writer) => {
                let dir = writer.paths.dir.clone();
                let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                // Take the directory out of sight first: a crash mid-removal leaves no half
                // session, and the next purge finds the renamed directory.
                let doomed = parent.join(format!(".purge-{id}-{}", new_uuid()));
                fsutil::rename(&dir, &doomed)?;
                fsutil::sync_dir(&parent)?;
                drop(writer);
                fsutil::remove_tree(&doomed)?;
                self.note_change(id, &dir);
                removed.push(dir);
                parents.push(parent);
            }
            Err(StoreError::NotFound { .. }) if !leftovers.is_empty() => {}
            Err(e) => return Err(e),
        }
        for doomed in leftovers {
            fsutil::remove_tree(&doomed)?;
            parents.extend(doomed.parent().map(Path::to_path_buf));
            removed.push(doomed);
        }
        for extra in [self.home.rollout_dir(id), self.home.memory_dir(id)] {
            if fsutil::remove_tree(&extra)? {
                removed.push(extra);
            }
        }
        // Derived, but it hashes some of the log's bytes: it goes with the session.
        let offsets = offsets::index_path(&self.home, id);
        if fsutil::remove_file(&offsets)? {
            removed.push(offsets);
        }
        // The same for the rollout log's fold checkpoints (they hold the trace's spans).
        let folds = crate::rollout::checkpoint::dir(&self.home, id);
        if fsutil::remove_tree(&folds)? {
            removed.push(folds);
        }
        for parent in parents {
            fsutil::sync_dir(&parent)?;
        }
        Ok(removed)
    }

    /// Directories `sessions/*/.purge-<id>-*` left by a purge that did not finish.
    fn purge_leftovers(&self, id: &SessionId) -> Result<Vec<PathBuf>> {
        let sessions = self.home.sessions_dir();
        let prefix = format!(".purge-{id}-");
        let mut found = Vec::new();
        let Ok(projects) = fs::read_dir(&sessions) else {
            return Ok(found);
        };
        for project in projects.filter_map(|e| e.ok()) {
            if project.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let Ok(children) = fs::read_dir(project.path()) else {
                continue;
            };
            for child in children.filter_map(|e| e.ok()) {
                let name = child.file_name();
                // The suffix is a UUID; the id before it is validated, so the prefix is exact.
                if name
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix) && n.len() == prefix.len() + 36)
                {
                    found.push(child.path());
                }
            }
        }
        Ok(found)
    }

    /// Forks a session: a full copy under a new id, with `parentId`, the parent's `turnCount`,
    /// its context cache and its compaction summary. The log is copied as a file, not
    /// re-appended; a torn tail of the parent is not copied.
    pub fn fork(&self, id: &SessionId, new_project_path: Option<&str>) -> Result<SessionId> {
        let src = self.locate(id)?;
        let parent = read_meta_file(&src.meta())?;
        if parent.is_deleted() {
            return Err(StoreError::NotFound { id: id.to_string() });
        }
        let project_path = new_project_path
            .filter(|p| !p.is_empty())
            .unwrap_or(&parent.project_path)
            .to_owned();
        let new_id = SessionId::new(new_uuid())?;
        let project_dir = self.project_dir_for(&project_path)?;
        let dst = SessionPaths {
            dir: project_dir.join(new_id.as_str()),
        };
        create_dir_exclusive(&dst.dir).ctx("create directory", &dst.dir)?;
        // Held until the fork's meta.json is written: a fork cut short by a crash is a
        // directory without meta.json that no process holds, which `freecode doctor` clears.
        let _making = SessionLock::acquire(&dst.dir, new_id.as_str(), LockWait::Fail)?;
        copy_complete_lines(&src.messages(), &dst.messages())?;
        if let Some(cache) = fsutil::read_bounded(
            &src.context_cache(),
            CONTEXT_CACHE_MAX_BYTES,
            "context-cache.json",
        )? {
            write_atomic(&dst.context_cache(), &cache, false)?;
        }
        if let Some(memory) = self.compaction_memory(id)? {
            let path = self.home.memory_file(&new_id);
            create_dir_private(&self.home.memory_dir(&new_id))?;
            let bytes =
                serde_json::to_vec_pretty(&memory.for_session(new_id.as_str())).unwrap_or_default();
            write_atomic(&path, &bytes, self.sync_rewrites())?;
        }
        let now = self.now();
        let mut meta = SessionMeta::new(
            &new_id,
            format!("{} (fork)", parent.title),
            project_path,
            parent.provider.clone(),
            parent.model.clone(),
            now,
        );
        meta.parent_id = Some(id.to_string());
        meta.turn_count = parent.turn_count;
        if parent.project_path_from_bundle()
            && meta.project_path == parent.project_path
            && let Some(from) = parent.imported_from()
        {
            // The path is still an older import's bundle path: the fork keeps the mark, so it
            // never becomes the tools' root either.
            meta.extra.insert(IMPORTED_FROM.to_owned(), from.clone());
        }
        if self.sync_rewrites() {
            fsutil::open_read(&dst.messages())
                .and_then(|f| fsutil::sync_file(&f, &dst.messages(), true))
                .ctx("fsync", dst.messages())?;
        }
        write_atomic(&dst.meta(), &meta.to_pretty_json(), self.sync_rewrites())?;
        if self.sync_rewrites() {
            fsutil::sync_dir(&project_dir)?;
        }
        self.note_change(&new_id, &dst.dir);
        Ok(new_id)
    }

    /// Resumes a session (not a deleted one): see [`SessionWriter::resume`].
    pub fn resume(&self, id: &SessionId) -> Result<SessionContext> {
        self.writer(id)?.resume()
    }

    /// Compaction: see [`SessionWriter::compact`].
    pub fn compact(
        &self,
        id: &SessionId,
        keep_user_turns: usize,
        summary: &str,
    ) -> Result<CompactionOutcome> {
        self.writer(id)?.compact(keep_user_turns, summary, None)
    }

    /// Writes the context cache (pretty, atomic).
    pub fn set_context_cache(&self, id: &SessionId, cache: &ContextCache) -> Result<()> {
        let w = self.writer(id)?;
        let bytes = serde_json::to_vec_pretty(cache).unwrap_or_default();
        write_atomic(&w.paths.context_cache(), &bytes, self.sync_rewrites())
    }

    /// Removes the context cache.
    pub fn clear_context_cache(&self, id: &SessionId) -> Result<()> {
        let w = self.writer(id)?;
        let path = w.paths.context_cache();
        fsutil::remove_file(&path).map(drop)
    }

    /// Completes a compaction interrupted by a crash, if one is pending and nobody holds the
    /// session (a writer does this itself when it opens).
    fn recover_if_needed(&self, id: &SessionId, paths: &SessionPaths) {
        if paths.journal().exists()
            && let Ok(w) = SessionWriter::open(self.clone(), id.clone(), paths.clone())
        {
            drop(w);
        }
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

/// A session's `messages.jsonl` read a block at a time ([`jsonl::Blocks`], each block parsed on
/// all cores when large), every skipped or repaired line logged as [`read_messages_at`] logs
/// it. A missing file is an empty log.
pub struct MessageBlocks {
    path: PathBuf,
    blocks: Option<jsonl::Blocks<fs::File>>,
    size: u64,
}

impl MessageBlocks {
    /// Opens `path` to be read in blocks of about `block` bytes.
    pub fn open(path: &Path, block: usize) -> Result<Self> {
        let file = open_log(path)?;
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        Ok(Self {
            path: path.to_owned(),
            blocks: file.map(|f| jsonl::Blocks::new(f, block)),
            size,
        })
    }

    /// The file's size when it was opened (0 when missing).
    pub fn file_size(&self) -> u64 {
        self.size
    }

    /// The next block's messages and issues, or `None` at the end.
    pub fn next_block(&mut self) -> Result<Option<jsonl::Block<StoredMessage>>> {
        let Some(blocks) = &mut self.blocks else {
            return Ok(None);
        };
        let block = blocks
            .next_block_with(MESSAGE_DECODE)
            .ctx("read", &self.path)?;
        if let Some(b) = &block {
            log_issues(&self.path, &b.issues);
        }
        Ok(block)
    }

    /// Every message rendered to bytes by `render`, a block at a time, and the bytes handed to
    /// `write` in file order: what prints a session as it is read. Two worker threads parse and
    /// render alternate blocks while this thread reads the next block and writes the last, so
    /// a session is printed on both cores in the memory of a few blocks (their bytes, messages
    /// and rendering), whatever its size. Issues are logged in file order, as
    /// [`MessageBlocks::next_block`] logs them. The first error of the read or of `write` ends
    /// it: nothing after it is written, and the workers stop.
    pub fn render<E: From<StoreError>>(
        mut self,
        render: impl Fn(&[StoredMessage], &mut Vec<u8>) -> std::io::Result<()> + Sync,
        mut write: impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        use std::collections::VecDeque;
        use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
        /// A block to render and the buffer to render it into.
        type Job = (jsonl::RawBlock, Vec<u8>);
        /// The rendered bytes (or why they could not be), the block's issues, and its buffer
        /// back.
        type Done = (std::io::Result<Vec<u8>>, Vec<LineIssue>, Vec<u8>);
        /// Blocks in flight: one being rendered by each worker, one waiting.
        const IN_FLIGHT: usize = 3;

        let Some(mut blocks) = self.blocks.take() else {
            return Ok(());
        };
        blocks.cap_block(RENDER_BLOCK);
        let path = self.path;
        let render = &render;
        std::thread::scope(|s| {
            let workers: Vec<(SyncSender<Job>, Receiver<Done>)> = (0..2)
                .map(|_| {
                    let (job_tx, job_rx) = sync_channel::<Job>(1);
                    let (done_tx, done_rx) = sync_channel::<Done>(1);
                    s.spawn(move || {
                        for (raw, mut out) in job_rx {
                            let block = raw.parse_with(RENDER_DECODE);
                            out.clear();
                            // Rendered JSON is about the size of the lines, more when indented.
                            out.reserve(raw.bytes.len() + raw.bytes.len() / 2);
                            let out = render(&block.items, &mut out).map(|()| out);
                            drop(block.items);
                            // A closed channel: the printer stopped; so do we.
                            if done_tx.send((out, block.issues, raw.bytes)).is_err() {
                                return;
                            }
                        }
                    });
                    (job_tx, done_rx)
                })
                .collect();
            // Which worker holds each block in flight, oldest first.
            let mut pending = VecDeque::with_capacity(IN_FLIGHT);
            let (mut spare_raw, mut spare_out) = (Vec::new(), Vec::new());
            let mut next = 0;
            let mut drain = |pending: &mut VecDeque<usize>,
                             spare_raw: &mut Vec<Vec<u8>>,
                             spare_out: &mut Vec<Vec<u8>>|
             -> std::result::Result<(), E> {
                let Some(w) = pending.pop_front() else {
                    return Ok(());
                };
                let (out, issues, raw) = workers[w].1.recv().map_err(|_| worker_gone(&path))?;
                log_issues(&path, &issues);
                let out = out.ctx("render", &path)?;
                write(&out)?;
                spare_raw.push(raw);
                spare_out.push(out);
                Ok(())
            };
            loop {
                let raw = blocks
                    .next_raw(spare_raw.pop().unwrap_or_default())
                    .ctx("read", &path)?;
                let Some(raw) = raw else { break };
                let w = next % 2;
                next += 1;
                let out = spare_out.pop().unwrap_or_default();
                workers[w]
                    .0
                    .send((raw, out))
                    .map_err(|_| worker_gone(&path))?;
                pending.push_back(w);
                if pending.len() >= IN_FLIGHT {
                    drain(&mut pending, &mut spare_raw, &mut spare_out)?;
                }
            }
            while !pending.is_empty() {
                drain(&mut pending, &mut spare_raw, &mut spare_out)?;
            }
            Ok(())
        })
    }
}

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
