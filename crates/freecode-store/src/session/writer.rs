//! [`SessionWriter`]: a session held for writing — the lock, the log open for appending, and
//! every mutation (append, end of turn, meta update, interrupt mark, resume, compaction).

use std::fs::{self, File};
use std::path::Path;

use freecode_core::compaction::keep_last_n_user_turns;
use freecode_core::memory::{CompactionMemory, Summary, estimate_tokens};
use freecode_core::message::{Part, Role};
use freecode_core::project_key::{ProjectKey, is_private_dir_name, project_key};
use freecode_core::{CONTINUE_MESSAGE, SessionId, SessionMeta, SessionStatus, StoredMessage};

use super::{
    COMPACTION_JOURNAL, CompactionOutcome, Durability, MESSAGES_FILE, SessionContext, SessionPaths,
    SessionStore, TORN_FILE, new_uuid, read_messages_at, read_meta_file, torn_tail_start,
};
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, create_dir_private, read_optional, write_atomic, write_temp};
use crate::jsonl::MAX_LINE_BYTES;
use crate::lock::SessionLock;
use crate::rollout::Recorder;

/// The compaction journal's contents: the temp files to move into place.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Journal {
    messages: String,
    memory: String,
}

/// Of a torn last line past [`MAX_LINE_BYTES`], the bytes kept in `messages.jsonl.torn` (its
/// start, enough to see what it was).
const TORN_KEEP_PAST_CAP: u64 = 64 << 10;

/// Reads the compaction journal at `path`: `None` when there is none, `Some(Err(why))` when it
/// is garbage (too large, or not a journal), which the writer sets aside and `doctor` reports
/// (one parser, so they cannot disagree).
pub(crate) fn read_journal(path: &Path) -> Result<Option<std::result::Result<Journal, String>>> {
    match fsutil::read_bounded(path, 1 << 20, "a compaction journal") {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => Ok(Some(
            serde_json::from_slice::<Journal>(&bytes).map_err(|e| e.to_string()),
        )),
        Err(e @ StoreError::TooLarge { .. }) => Ok(Some(Err(e.to_string()))),
        Err(e) => Err(e),
    }
}

/// A session held for writing: the lock plus the log open for appending.
#[derive(Debug)]
pub struct SessionWriter {
    store: SessionStore,
    id: SessionId,
    pub(super) paths: SessionPaths,
    _lock: SessionLock,
    log: File,
    unsynced: bool,
    /// Bytes cut off a torn tail when the writer opened, if any: (offset, length).
    pub repaired_tail: Option<(u64, u64)>,
    /// Its notes in the change journal ([`crate::changes`]).
    noter: crate::changes::Noter,
}

/// Removes a project directory its last session left (a hashed one keeps its path file until
/// then); anything else in it keeps it.
fn remove_if_left_empty(project_dir: &Path) {
    let side = project_dir.join(super::PROJECT_PATH_FILE);
    let only_side = fs::read_dir(project_dir).is_ok_and(|rd| {
        rd.filter_map(|e| e.ok())
            .all(|e| e.file_name() == super::PROJECT_PATH_FILE)
    });
    if only_side {
        if fs::symlink_metadata(&side).is_ok() {
            let _ = fsutil::remove_file(&side);
        }
        let _ = fsutil::remove_empty_dir(project_dir);
    }
}

impl SessionWriter {
    pub(super) fn open(store: SessionStore, id: SessionId, paths: SessionPaths) -> Result<Self> {
        let lock = SessionLock::acquire(&paths.dir, id.as_str(), store.config.lock_wait)?;
        let mut w = Self {
            log: fsutil::open_append(&paths.messages())?,
            store,
            id,
            paths,
            _lock: lock,
            unsynced: false,
            repaired_tail: None,
            noter: crate::changes::Noter::default(),
        };
        w.recover_compaction(true)?;
        w.repair_torn_tail()?;
        Ok(w)
    }

    /// The writer of a session this process has just made ([`SessionStore::create_writer`]):
    /// the lock taken when its directory was created and the log it created, kept. Nothing to
    /// recover: no other process could write in a directory created exclusively and locked
    /// before anything was put in it, so there is no journal, torn tail or leftover to look for.
    pub(super) fn from_created(
        store: SessionStore,
        id: SessionId,
        paths: SessionPaths,
        lock: SessionLock,
        log: File,
    ) -> Self {
        Self {
            log,
            store,
            id,
            paths,
            _lock: lock,
            unsynced: false,
            repaired_tail: None,
            noter: crate::changes::Noter::default(),
        }
    }

    /// Moves a session out of a directory an earlier version of ours named (`esc-…`/`h-…`,
    /// used then for every path whose original name does not round-trip) into the directory
    /// the original finds it in, so that a shared home works both ways. Done under the lock,
    /// by one `rename` of the session directory (the lock and the open log move with it), the
    /// destination's and source's parents fsynced; never over an existing directory. Readers
    /// that located the old path find it again ([`SessionStore::writer`] and reads retry once).
    pub(super) fn move_to_current_dir(&mut self) -> Result<()> {
        let Some(old_parent) = self.paths.dir.parent().map(Path::to_path_buf) else {
            return Ok(());
        };
        let Some(old_name) = old_parent.file_name().and_then(|n| n.to_str()) else {
            return Ok(());
        };
        if !is_private_dir_name(old_name) {
            return Ok(());
        }
        let meta = self.meta()?;
        let key = project_key(&meta.project_path);
        if key.dir_name() == old_name || !matches!(key, ProjectKey::Original(_)) {
            return Ok(());
        }
        let new_parent = self.store.project_dir_for(&meta.project_path)?;
        let dst = new_parent.join(self.id.as_str());
        if fs::symlink_metadata(&dst).is_ok() {
            tracing::warn!(from = %self.paths.dir.display(), to = %dst.display(), "left a session where an earlier version wrote it: its new directory exists");
            return Ok(());
        }
        let _busy = fsutil::busy();
        fsutil::rename(&self.paths.dir, &dst)?;
        if self.store.sync_rewrites() {
            fsutil::sync_dir(&new_parent)?;
            fsutil::sync_dir(&old_parent)?;
        }
        tracing::info!(from = %self.paths.dir.display(), to = %dst.display(), "moved a session to the directory the original reads");
        self.paths.dir = dst;
        remove_if_left_empty(&old_parent);
        Ok(())
    }

    /// Moves the session to project `project_path` (absolute and in normal form: the caller
    /// checks), keeping its id and everything else: one `rename` of its directory into the
    /// project's (under the lock, which moves with it; both parents fsynced; never over an
    /// existing directory), then `projectPath` in the meta. A move a crash cut between the two
    /// is finished by moving again.
    pub fn move_to_project(&mut self, project_path: &str) -> Result<SessionMeta> {
        self.move_dir_to_project(project_path)?;
        self.update_meta(|m| m.project_path = project_path.to_owned())
    }

    /// The directory move of [`SessionWriter::move_to_project`] alone, the meta untouched:
    /// home sync, after it wrote a meta another machine moved, puts the directory where the
    /// meta says.
    pub fn move_dir_to_project(&mut self, project_path: &str) -> Result<()> {
        let new_parent = self.store.project_dir_for(project_path)?;
        let dst = new_parent.join(self.id.as_str());
        if dst != self.paths.dir {
            if fs::symlink_metadata(&dst).is_ok() {
                return Err(StoreError::AlreadyExists {
                    id: self.id.to_string(),
                    path: dst,
                });
            }
            let old_parent = self.paths.dir.parent().map(Path::to_path_buf);
            let _busy = fsutil::busy();
            fsutil::rename(&self.paths.dir, &dst)?;
            if self.store.sync_rewrites() {
                fsutil::sync_dir(&new_parent)?;
                if let Some(old) = &old_parent {
                    fsutil::sync_dir(old)?;
                }
            }
            self.paths.dir = dst;
            if let Some(old) = &old_parent {
                remove_if_left_empty(old);
            }
        }
        Ok(())
    }

    /// Notes in the change journal that this session changed (throttled, see
    /// [`crate::changes::Noter`]).
    fn changed(&mut self) {
        let dir = project_dir_name(&self.paths.dir);
        self.noter.changed(&self.store.home, self.id.as_str(), &dir);
    }

    /// The session id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The session's paths.
    pub fn paths(&self) -> &SessionPaths {
        &self.paths
    }

    /// The current meta.
    pub fn meta(&self) -> Result<SessionMeta> {
        read_meta_file(&self.paths.meta())
    }

    fn repair_torn_tail(&mut self) -> Result<()> {
        let path = self.paths.messages();
        let Some(cut) = torn_tail_start(&mut self.log, &path)? else {
            return Ok(());
        };
        let len = self.log.metadata().ctx("stat", &path)?.len();
        // Keep the cut bytes for inspection, each fragment on its own line: a fragment a line
        // could hold whole; of one past the cap (which no reader would take, and which may be
        // gigabytes), only its start. The log itself is cut by truncation, never copied.
        let torn = len - cut;
        let kept = if torn <= MAX_LINE_BYTES as u64 {
            torn
        } else {
            TORN_KEEP_PAST_CAP
        };
        let torn_path = self.paths.dir.join(TORN_FILE);
        let mut keep = fsutil::open_append(&torn_path)?;
        let mut reader = &self.log;
        std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(cut)).ctx("seek", &path)?;
        fsutil::copy_into(
            &mut std::io::Read::take(reader, kept),
            &mut keep,
            &torn_path,
        )
        .and_then(|_| fsutil::append_bytes(&mut keep, &torn_path, b"\n"))
        .and_then(|()| fsutil::sync_file(&keep, &torn_path, true))
        .ctx("write", &torn_path)?;
        fsutil::set_len(&self.log, &path, cut)
            .and_then(|()| fsutil::sync_file(&self.log, &path, true))
            .ctx("truncate", &path)?;
        if kept < torn {
            tracing::warn!(path = %path.display(), offset = cut, bytes = torn, kept, torn = %torn_path.display(), "cut a torn last line past the line cap before appending; its start is kept");
        } else {
            tracing::warn!(path = %path.display(), offset = cut, bytes = torn, "cut a torn last line before appending");
        }
        self.repaired_tail = Some((cut, len - cut));
        self.changed();
        Ok(())
    }

    /// Rolls a committed compaction journal forward (or sets a garbage one aside) and drops
    /// stale temps. `on_open`: found when the writer opened, so a crash interrupted that
    /// compaction (warned about); otherwise this is the compaction's own last step.
    fn recover_compaction(&mut self, on_open: bool) -> Result<()> {
        let journal_path = self.paths.journal();
        let Some(parsed) = read_journal(&journal_path)? else {
            self.remove_stale_temps();
            return Ok(());
        };
        // The journal was written atomically, so it parses unless someone edited it: a garbage
        // one is set aside (not a commit point of ours), never left to block every write.
        let j: Journal = match parsed {
            Ok(j) => j,
            Err(e) => {
                let aside = self
                    .paths
                    .dir
                    .join(format!("{COMPACTION_JOURNAL}.bad-{}", crate::now_ms()));
                fsutil::rename(&journal_path, &aside)?;
                fsutil::sync_dir(&self.paths.dir)?;
                tracing::warn!(
                    path = %journal_path.display(),
                    aside = %aside.display(),
                    error = %e,
                    "set aside a compaction journal that does not parse"
                );
                self.remove_stale_temps();
                return Ok(());
            }
        };
        let memory_dir = self.store.home.memory_dir(&self.id);
        for (dir, tmp, target) in [
            (&self.paths.dir, &j.messages, MESSAGES_FILE),
            (&memory_dir, &j.memory, "memory.json"),
        ] {
            let tmp = dir.join(Path::new(tmp).file_name().unwrap_or_default());
            if tmp.exists() {
                fsutil::rename(&tmp, &dir.join(target))?;
                fsutil::sync_dir(dir)?;
            }
        }
        fsutil::remove_file(&journal_path)?;
        fsutil::sync_dir(&self.paths.dir)?;
        self.log = fsutil::open_append(&self.paths.messages())?;
        self.changed();
        if on_open {
            tracing::warn!(session = %self.id, "completed a compaction interrupted by a crash");
        } else {
            tracing::debug!(session = %self.id, "compaction committed");
        }
        Ok(())
    }

    fn remove_stale_temps(&self) {
        // We hold the lock: no other writer has a temp file in flight here.
        for dir in [self.paths.dir.clone(), self.store.home.memory_dir(&self.id)] {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.filter_map(|e| e.ok()) {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') && name.ends_with(".tmp") {
                    let _ = fsutil::remove_file(&e.path());
                }
            }
        }
    }

    /// Appends one message as one `write` of one whole line.
    /// A message whose line would be past [`crate::jsonl::MAX_LINE_BYTES`] is refused
    /// ([`StoreError::LineTooLong`]): no reader would take it back.
    pub fn append(&mut self, msg: &StoredMessage) -> Result<()> {
        let line = msg.to_line();
        let path = self.paths.messages();
        crate::jsonl::check_line(&path, &line)?;
        let _busy = crate::fsutil::busy();
        fsutil::append_bytes(&mut self.log, &path, &line).ctx("append to", &path)?;
        self.changed();
        if self.store.config.durability == Durability::EveryAppend {
            fsutil::sync_file(&self.log, &path, false).ctx("fsync", &path)?;
        } else {
            self.unsynced = true;
        }
        Ok(())
    }

    /// Makes every append so far durable.
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced {
            let path = self.paths.messages();
            fsutil::sync_file(&self.log, &path, false).ctx("fsync", &path)?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Marks the end of a turn: the turn-boundary fsync point, and `lastTurnAt`, `turnCount`
    /// and `aggregatedTokenCount` (plus `tokens`) are updated.
    pub fn end_turn(&mut self, tokens: u64) -> Result<SessionMeta> {
        if self.store.config.durability != Durability::Never {
            self.sync()?;
        }
        let now = self.store.now();
        // The log fsync above is the durability point; the counters are rewritten atomically
        // but without a directory fsync (old or new after a power loss, never torn).
        self.update_meta_with(
            |m| {
                m.last_turn_at = now;
                // Counters saturate: at u64::MAX they stay there, never wrap to 0.
                m.turn_count = m.turn_count.saturating_add(1);
                m.aggregated_token_count =
                    Some(m.aggregated_token_count.unwrap_or(0).saturating_add(tokens));
            },
            true,
        )
    }

    /// Read-modify-write of the meta under the lock; `id` and `createdAt` are immutable and
    /// `updatedAt` becomes now.
    pub fn update_meta(&mut self, f: impl FnOnce(&mut SessionMeta)) -> Result<SessionMeta> {
        self.update_meta_with(f, false)
    }

    fn update_meta_with(
        &mut self,
        f: impl FnOnce(&mut SessionMeta),
        relaxed: bool,
    ) -> Result<SessionMeta> {
        let mut meta = self.meta()?;
        let (id, created) = (meta.id.clone(), meta.created_at);
        f(&mut meta);
        meta.id = id;
        meta.created_at = created;
        meta.updated_at = self.store.now();
        let bytes = meta.to_pretty_json();
        if relaxed && self.store.sync_rewrites() {
            fsutil::write_atomic_relaxed(&self.paths.meta(), &bytes)?;
        } else {
            write_atomic(&self.paths.meta(), &bytes, self.store.sync_rewrites())?;
        }
        self.changed();
        Ok(meta)
    }

    /// Rewrites the log atomically with `bytes` and reopens it for appending.
    fn replace_log(&mut self, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.paths.messages(), bytes, true)?;
        self.changed();
        self.log = fsutil::open_append(&self.paths.messages())?;
        self.unsynced = false;
        Ok(())
    }

    /// Home sync: appends `bytes`, whole lines as another machine's log holds them, in one
    /// write, then fsyncs (unless the store's durability is [`Durability::Never`]: a pull
    /// syncs the file system once before it saves its progress). Each line is checked as
    /// [`SessionWriter::append`] checks it; bytes that do not end in a newline are refused.
    pub fn append_lines(&mut self, bytes: &[u8]) -> Result<()> {
        let path = self.paths.messages();
        if bytes.is_empty() {
            return Ok(());
        }
        if !bytes.ends_with(b"\n") {
            return Err(StoreError::Io {
                op: "append to",
                path,
                source: std::io::Error::other("the lines to append end in a torn line"),
            });
        }
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            crate::jsonl::check_line(&path, line)?;
        }
        let _busy = crate::fsutil::busy();
        fsutil::append_bytes(&mut self.log, &path, bytes).ctx("append to", &path)?;
        self.changed();
        if self.store.config.durability != Durability::Never {
            fsutil::sync_file(&self.log, &path, false).ctx("fsync", &path)?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Home sync: the log's bytes in full (for a comparison or a fork).
    pub fn log_len(&self) -> Result<u64> {
        let path = self.paths.messages();
        self.log.metadata().map(|m| m.len()).ctx("stat", &path)
    }

    /// Home sync: cuts the log back to `len` bytes (this machine's changes that another
    /// machine's won over, kept first in a fork).
    pub fn truncate_log(&mut self, len: u64) -> Result<()> {
        let path = self.paths.messages();
        let _busy = crate::fsutil::busy();
        fsutil::set_len(&self.log, &path, len).ctx("truncate", &path)?;
        self.changed();
        if self.store.config.durability == Durability::Never {
            return Ok(());
        }
        fsutil::sync_file(&self.log, &path, false).ctx("fsync", &path)
    }

    /// Home sync: replaces the log with `bytes` (a compaction made on another machine, or a
    /// session's first sync), durable as the store's durability says (a pull with
    /// [`Durability::Never`] syncs the file system once before it saves its progress).
    pub fn replace_log_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let _busy = crate::fsutil::busy();
        write_atomic(&self.paths.messages(), bytes, self.store.sync_rewrites())?;
        self.changed();
        self.log = fsutil::open_append(&self.paths.messages())?;
        self.unsynced = self.store.config.durability == Durability::Never;
        Ok(())
    }

    /// Home sync: writes `meta.json` as another machine wrote it. Refused unless it parses as
    /// a meta of this session.
    pub fn put_meta_bytes(&mut self, bytes: &[u8]) -> Result<SessionMeta> {
        let path = self.paths.meta();
        let meta = freecode_core::json::from_slice_lossy::<SessionMeta>(bytes)
            .map_err(|source| StoreError::BadJson {
                path: path.clone(),
                source,
            })?
            .value;
        if meta.id != self.id.as_str() {
            return Err(StoreError::Io {
                op: "replace",
                path,
                source: std::io::Error::other(format!(
                    "the meta is session {}'s, not {}'s",
                    meta.id, self.id
                )),
            });
        }
        write_atomic(&path, bytes, self.store.sync_rewrites())?;
        self.changed();
        Ok(meta)
    }

    /// Marks message `message_id` (if given and found) `interrupted: true` with an atomic
    /// rewrite and sets the status to `interrupted`. Holding the lock, no append can be lost.
    /// Returns whether a message was marked.
    pub fn mark_interrupted(&mut self, message_id: Option<&str>) -> Result<bool> {
        // The marked line and the status land together before a forced exit.
        let _busy = crate::fsutil::busy();
        let mut marked = false;
        if let Some(target) = message_id {
            let path = self.paths.messages();
            let buf = read_optional(&path)?.unwrap_or_default();
            // Search from the end: the target is the message being written, near the tail.
            let mut end = buf.len();
            while end > 0 {
                let start = buf[..end - 1]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let line = &buf[start..end];
                if let Ok(mut msg) =
                    freecode_core::json::from_slice_lossy::<StoredMessage>(line).map(|l| l.value)
                    && msg.id == target
                {
                    if !msg.is_interrupted() {
                        msg.interrupted = Some(true);
                        let mut out = Vec::with_capacity(buf.len() + 20);
                        out.extend_from_slice(&buf[..start]);
                        out.extend_from_slice(&msg.to_line());
                        out.extend_from_slice(&buf[end..]);
                        self.replace_log(&out)?;
                    }
                    marked = true;
                    break;
                }
                end = start;
            }
        }
        self.update_meta(|m| m.status = SessionStatus::Interrupted)?;
        Ok(marked)
    }

    /// Resumes the session for the agent loop. A deleted session is not found. After an
    /// interrupt, the synthetic user message "Continue from where you left off." is appended
    /// (persisted, so the model sees it and a reload shows the same) and the status goes back
    /// to `active` (SPEC §19.21–22).
    pub fn resume(mut self) -> Result<SessionContext> {
        let mut meta = self.meta()?;
        if meta.is_deleted() {
            return Err(StoreError::NotFound {
                id: self.id.to_string(),
            });
        }
        let mut log = read_messages_at(&self.paths.messages())?;
        if meta.status == SessionStatus::Interrupted {
            let msg = StoredMessage::new(
                new_uuid(),
                Role::User,
                vec![Part::text(CONTINUE_MESSAGE)],
                self.store.now(),
            );
            self.append(&msg)?;
            self.sync()?;
            log.messages.push(msg);
            meta = self.update_meta(|m| m.status = SessionStatus::Active)?;
        }
        let summary = self
            .store
            .compaction_memory(&self.id)?
            .and_then(|m| m.latest_summary().map(|s| s.content.clone()));
        Ok(SessionContext {
            meta,
            messages: log.messages,
            issues: log.issues,
            summary,
        })
    }

    /// Compaction: keeps the last `keep_user_turns` user turns (slicing at a user message;
    /// `0` is refused), records `summary` in `memory/<id>/memory.json`, and rewrites the log.
    /// The summary and the trim commit together through a journal: after a crash the session
    /// has both or neither. `compact.occurred` goes to `recorder`, or to the session's rollout
    /// log opened for the purpose (the rollout log is never trimmed).
    pub fn compact(
        &mut self,
        keep_user_turns: usize,
        summary: &str,
        recorder: Option<&mut Recorder>,
    ) -> Result<CompactionOutcome> {
        // The journal, the summary and the trim finish together before a forced exit.
        let _busy = crate::fsutil::busy();
        let path = self.paths.messages();
        let buf = read_optional(&path)?.unwrap_or_default();
        // Parse line by line, remembering where each message starts, so kept lines are copied
        // byte for byte.
        let mut starts = Vec::new();
        let mut messages = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            let end = buf[pos..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(buf.len(), |i| pos + i + 1);
            if let Ok(m) = freecode_core::json::from_slice_lossy::<StoredMessage>(&buf[pos..end])
                .map(|l| l.value)
            {
                starts.push(pos);
                messages.push(m);
            }
            pos = end;
        }
        let text_tokens =
            |ms: &[StoredMessage]| ms.iter().map(|m| estimate_tokens(&m.text())).sum::<u64>();
        let tokens_before = text_tokens(&messages);
        let cut = keep_last_n_user_turns(&messages, keep_user_turns)?;
        if cut == 0 {
            return Ok(CompactionOutcome {
                compacted: false,
                tokens_before,
                tokens_after: tokens_before,
                messages_before: messages.len(),
                messages_after: messages.len(),
                reason: Some("nothing to compact".to_owned()),
            });
        }
        let now = self.store.now();
        let kept_tokens = text_tokens(&messages[cut..]);
        let summary_tokens = estimate_tokens(summary);
        let memory_path = self.store.home.memory_file(&self.id);
        let mut memory = self
            .store
            .compaction_memory(&self.id)?
            .unwrap_or_else(|| CompactionMemory::new(self.id.as_str()));
        memory.summaries.push(Summary {
            id: format!("summary-{}-{now}", self.id),
            created_at: now,
            original_message_count: cut as u64,
            original_token_count: text_tokens(&messages[..cut]),
            summary_token_count: summary_tokens,
            content: summary.to_owned(),
            extra: freecode_core::Extra::new(),
        });
        memory.total_compactions = memory.total_compactions.saturating_add(1);
        memory.last_compaction_at = Some(now);
        memory.token_count = summary_tokens + kept_tokens;

        create_dir_private(&self.store.home.memory_dir(&self.id))?;
        let messages_tmp = write_temp(&path, &buf[starts[cut]..], true)?;
        let memory_tmp = write_temp(
            &memory_path,
            &serde_json::to_vec_pretty(&memory).unwrap_or_default(),
            true,
        )?;
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let journal = Journal {
            messages: name(&messages_tmp),
            memory: name(&memory_tmp),
        };
        // Both temps' entries are durable before the commit point: a journal that survives a
        // power cut always finds the files it names (the memory directory is another
        // directory than the journal's, so the journal's own fsync does not cover it).
        fsutil::sync_dir(&self.store.home.memory_dir(&self.id))?;
        fsutil::sync_dir(&self.paths.dir)?;
        // The commit point: once the journal exists, recovery moves both files into place.
        write_atomic(
            &self.paths.journal(),
            &serde_json::to_vec(&journal).unwrap_or_default(),
            true,
        )?;
        self.recover_compaction(false)?;
        let tokens_after = summary_tokens + kept_tokens;
        match recorder {
            Some(rec) => rec.compact_occurred(tokens_before, tokens_after)?,
            None => {
                let mut rec =
                    Recorder::open(&self.store.home, &self.id, self.store.config.rollout)?;
                rec.compact_occurred(tokens_before, tokens_after)?;
            }
        }
        Ok(CompactionOutcome {
            compacted: true,
            tokens_before,
            tokens_after,
            messages_before: messages.len(),
            messages_after: messages.len() - cut,
            reason: None,
        })
    }
}

impl Drop for SessionWriter {
    fn drop(&mut self) {
        let dir = project_dir_name(&self.paths.dir);
        self.noter.finish(&self.store.home, self.id.as_str(), &dir);
        // Best effort: the durability setting decides; an error here has nowhere to go.
        if self.unsynced && self.store.config.durability != Durability::Never {
            let _ = fsutil::sync_file(&self.log, &self.paths.messages(), false);
        }
    }
}

/// The project directory's name of a session directory (empty when it has none).
pub(crate) fn project_dir_name(session_dir: &Path) -> String {
    session_dir
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
