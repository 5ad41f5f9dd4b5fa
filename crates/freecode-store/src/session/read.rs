//! Reading sessions: metas, the listing (by project, status and time), messages whole or a
//! block at a time ([`MessageBlocks`]), the history a model sees, the context cache, the
//! compaction memory, and the session an interrupt left.

use std::fs;
use std::path::{Path, PathBuf};

use freecode_core::context_cache::ContextCache;
use freecode_core::history::{HistoryMessage, load_history};
use freecode_core::memory::CompactionMemory;
use freecode_core::project_key::{candidate_dir_names, is_project_dir_name};
use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self};
use crate::jsonl::{self, LineIssue};

use super::offsets;
use super::{
    CONTEXT_CACHE_MAX_BYTES, ListFilter, Listing, MEMORY_MAX_BYTES, MESSAGE_DECODE, META_FILE,
    MessageLog, PAGE_BLOCK, RENDER_BLOCK, RENDER_DECODE, STREAM_BLOCK, SessionStore, log_issues,
    meta_id_mismatch, open_log, read_messages_at, read_meta_file, sort_newest_first, worker_gone,
};

impl SessionStore {
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
    pub(super) fn walk(
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
}

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
