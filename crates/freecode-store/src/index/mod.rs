//! The session index: a SQLite view derived from the files, which stay the source of truth.
//!
//! It answers the readers people feel — `session list` without opening a session file, full-text
//! `search` over every message and tool output, and `stats` — and it wires the thread store to
//! real data: every session is a thread (`threads`), every user turn a turn (`turns`), every tool
//! part a tool call (`tool_calls`), in the original's schema.
//!
//! **Incremental.** Each file has a watermark: `meta.json` by (mtime, size, inode), the logs by
//! (inode, byte offset of the last indexed line end). A log that grew is read from its
//! watermark; one that shrank or was replaced (compaction) is re-read whole. Sessions written by
//! another process — the TypeScript original included — appear at the next call, without a
//! rebuild. **Fresh** means every `meta.json` still has its indexed (mtime, size, inode): a
//! `stat` each, never an open.
//!
//! **Many processes at once.** A fresh index is read without taking a lock. Anything to write
//! (a refresh that found changes, a rebuild) is one `BEGIN IMMEDIATE` transaction that reads the
//! stamps and watermarks again under the lock, so other processes see the whole old index or the
//! whole new one, and never index a log from a stale watermark.
//!
//! **Damage is skipped.** A `meta.json` that cannot be used (unreadable, not a meta, another
//! id) leaves its session out; a log that cannot be read leaves that log out. Each is a
//! [`Problem`], never an error.
//!
//! Everything here can be dropped and rebuilt ([`SessionIndex::rebuild`]).

mod derive;
mod look;
mod query;
mod usage;
mod vectors;

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use freecode_core::{SessionId, SessionMeta};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

pub use query::{
    DayStats, MatchSpan, ModelStats, RANK_LIMIT, SearchHit, SearchQuery, Stats, StatsScope,
    Strength, ToolStats, match_spans, search_scan, session_hit, stats_scan, words,
};
pub use usage::{UsageRequest, UsageScope};
pub use vectors::{
    ChunkStatus, ChunkSync, FoundBy, Meaning, PendingChunk, SearchMode, VectorsAhead, WordsAhead,
};

use crate::error::{IoContext, Result, StoreError};
use crate::home::Home;
use crate::session::{ListFilter, Listing, META_FILE};
use crate::threads::migrate::{self, Migration};
use crate::threads::{BUSY_TIMEOUT, DB_FILE, SqliteThreadStore};

/// The index's migrations, named by their timestamps; never edited once shipped. They share
/// `schema_migrations` with the thread store's.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 20261130120000,
        name: "session_index",
        sql: include_str!("../../migrations/20261130120000_session_index.sql"),
    },
    Migration {
        version: 20261201130000,
        name: "session_agent",
        sql: include_str!("../../migrations/20261201130000_session_agent.sql"),
    },
    Migration {
        version: 20261201150000,
        name: "span_model_day",
        sql: include_str!("../../migrations/20261201150000_span_model_day.sql"),
    },
    Migration {
        version: 20261202120000,
        name: "chunks",
        sql: include_str!("../../migrations/20261202120000_chunks.sql"),
    },
    Migration {
        version: 20261206120000,
        name: "look",
        sql: include_str!("../../migrations/20261206120000_look.sql"),
    },
    Migration {
        version: 20261206130000,
        name: "list_order",
        sql: include_str!("../../migrations/20261206130000_list_order.sql"),
    },
    Migration {
        version: 20261207120000,
        name: "chunk_counts",
        sql: include_str!("../../migrations/20261207120000_chunk_counts.sql"),
    },
    Migration {
        version: 20261208120000,
        name: "usage_kinds",
        sql: include_str!("../../migrations/20261208120000_usage_kinds.sql"),
    },
];

/// A session file that was skipped, and why: the home is answered for without it.
pub type Problem = (PathBuf, String);

/// What a refresh did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RefreshReport {
    /// Sessions on disk with a usable `meta.json` (the ones indexed).
    pub sessions: usize,
    /// Sessions whose meta was (re)read.
    pub metas_read: usize,
    /// Sessions removed from the index (gone from disk, or their meta no longer usable).
    pub removed: usize,
    /// Message lines indexed.
    pub messages: u64,
    /// Rollout events indexed.
    pub events: u64,
    /// Damaged session files skipped: a `meta.json` that cannot be read or parsed or names
    /// another id (the session is left out), a log that is not a regular file or cannot be read
    /// (the log is left out).
    pub problems: Vec<Problem>,
}

/// Identity and version of a file, from one `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp {
    pub mtime_ns: i64,
    pub size: i64,
    pub ino: i64,
}

impl Stamp {
    fn from_metadata(m: &fs::Metadata) -> Self {
        Self {
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            size: i64::try_from(m.len()).unwrap_or(i64::MAX),
            ino: i64::try_from(m.ino()).unwrap_or(i64::MAX),
        }
    }

    pub(crate) fn of(path: &Path) -> Option<Self> {
        let m = fs::metadata(path).ok()?;
        Some(Self::from_metadata(&m))
    }

    /// The stamp of a log: `None` when there is none, why it cannot be read when it is there
    /// but is not a regular file (or cannot be stat'ed).
    pub(crate) fn of_log(path: &Path) -> std::result::Result<Option<Self>, String> {
        match fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(Some(Self::from_metadata(&m))),
            Ok(m) if m.is_dir() => Err("not a regular file (a directory)".to_owned()),
            Ok(_) => Err("not a regular file".to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot stat it: {e}")),
        }
    }
}

/// Why a session's log cannot be read, when it is there but is not a regular file: the scan
/// readers skip it as the index does, with the same reason.
pub(crate) fn log_problem(path: &Path) -> Option<String> {
    Stamp::of_log(path).err()
}

/// A session directory found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub id: String,
    pub project_dir: String,
    pub dir: PathBuf,
    pub meta: Stamp,
}

/// A `meta.json` as read for the index.
enum MetaRead {
    /// Removed since the directory was listed (a session being purged).
    Gone,
    /// Unusable: the session is left out, with this reason.
    Bad(String),
    /// Its bytes (stored as they are) and what they say.
    Good(Vec<u8>, Box<SessionMeta>),
}

fn read_meta(f: &Found) -> MetaRead {
    let path = f.dir.join(META_FILE);
    let bytes =
        match crate::fsutil::read_bounded(&path, crate::session::META_MAX_BYTES, "meta.json") {
            Ok(Some(b)) => b,
            Ok(None) => return MetaRead::Gone,
            Err(e) => return MetaRead::Bad(format!("cannot read it: {e}")),
        };
    let meta: SessionMeta = match freecode_core::json::from_slice_lossy(&bytes) {
        Ok(m) => m.value,
        Err(e) => return MetaRead::Bad(format!("not a session meta: {e}")),
    };
    match crate::session::meta_id_mismatch(&meta.id, &f.id) {
        Some(why) => MetaRead::Bad(why),
        None => MetaRead::Good(bytes, Box::new(meta)),
    }
}

/// The indexed stamp and project directory of every session.
type Known = HashMap<String, (Stamp, String)>;

/// The sessions a read of the index is about: all of them (a full check), or these ids only (a
/// look's: the rows are read one by one, never the whole table).
type Only<'a> = Option<&'a [&'a str]>;

/// The ids of `found` and `gone`, for [`Only`].
fn ids_of<'a>(found: &'a [Found], gone: &'a [String]) -> Vec<&'a str> {
    found
        .iter()
        .map(|f| f.id.as_str())
        .chain(gone.iter().map(String::as_str))
        .collect()
}

/// Runs `sql` (whose last clause is `FROM idx_sessions`) over every row, or over the rows of
/// `only` (`WHERE id = ?1` added, one lookup each), and collects what `row` makes of each.
fn rows_of<T>(
    conn: &Connection,
    db: &Path,
    sql: &str,
    only: Only<'_>,
    row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<(String, T)>,
) -> Result<HashMap<String, T>> {
    match only {
        None => {
            let mut stmt = conn.prepare_cached(sql).map_err(db_err(db))?;
            let rows = stmt.query_map([], |r| row(r)).map_err(db_err(db))?;
            rows.collect::<rusqlite::Result<HashMap<_, _>>>()
                .map_err(db_err(db))
        }
        Some(ids) => {
            let mut stmt = conn
                .prepare_cached(&format!("{sql} WHERE id = ?1"))
                .map_err(db_err(db))?;
            let mut out = HashMap::new();
            for id in ids {
                if let Some((k, v)) = stmt
                    .query_row([id], |r| row(r))
                    .optional()
                    .map_err(db_err(db))?
                {
                    out.insert(k, v);
                }
            }
            Ok(out)
        }
    }
}

fn known_metas(conn: &Connection, db: &Path, only: Only<'_>) -> Result<Known> {
    rows_of(
        conn,
        db,
        "SELECT id, metaMtimeNs, metaSize, metaIno, projectDir FROM idx_sessions",
        only,
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                (
                    Stamp {
                        mtime_ns: r.get(1)?,
                        size: r.get(2)?,
                        ino: r.get(3)?,
                    },
                    r.get(4)?,
                ),
            ))
        },
    )
}

/// Whether `f`'s indexed row is current: same stamp, same directory.
fn is_fresh(known: &Known, f: &Found) -> bool {
    known
        .get(&f.id)
        .is_some_and(|(stamp, pd)| *stamp == f.meta && *pd == f.project_dir)
}

/// The metas read while checking freshness, by session id with the stamp they were read at,
/// so that the write that follows does not read them again.
type MetaCache = HashMap<String, (Stamp, MetaRead)>;

/// The logs' stats a refresh's check took, with the watermarks it compared them to, by session
/// id: the write reuses them when the watermarks under the lock are still those.
type LogCache = HashMap<String, (derive::Watermarks, derive::LogStamps)>;

/// What a check read, for the write that follows it.
#[derive(Default)]
struct Checked {
    metas: MetaCache,
    logs: LogCache,
    /// Sessions whose meta or logs changed since they were indexed (or new ones).
    changed: std::collections::HashSet<String>,
}

/// How long `rebuild` waits for another process's write to finish: a rebuild of a large home
/// holds the write lock for as long as it runs.
const REBUILD_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The index over one home.
pub struct SessionIndex {
    pub(crate) conn: Connection,
    pub(crate) home: Home,
    path: PathBuf,
    problems: Vec<Problem>,
    /// The next look checks every session ([`SessionIndex::check_everything`]).
    everything: bool,
}

impl std::fmt::Debug for SessionIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionIndex")
            .field("path", &self.path)
            .finish()
    }
}

pub(crate) fn db_err(path: &Path) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Db {
        path: path.to_owned(),
        source,
    }
}

impl SessionIndex {
    /// Opens (creating) `state/freecode.db` and the index in it, with the thread store's
    /// tables. A corrupt database is moved aside and started afresh (the index is derived: a
    /// refresh fills it again).
    pub fn open(home: &Home) -> Result<Self> {
        let state = home.state_dir();
        // The index goes only into an existing home: a mistyped path is not a new home.
        if !home.root().is_dir() {
            return Err(StoreError::Io {
                op: "open the index in",
                path: home.root().to_owned(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        crate::fsutil::create_dir_private(&state)?;
        let path = state.join(DB_FILE);
        // Creates or adopts the database, applies the thread store's migrations, recovers from
        // corruption.
        drop(SqliteThreadStore::open_or_recover(&path)?);
        let conn = Connection::open(&path).map_err(db_err(&path))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_err(&path))?;
        // A rebuild is one transaction: with SQLite's default 2 MiB page cache its dirty pages
        // spill into the WAL again and again (`--bench index` 2a: 3.4 s, against 3.0 s with up
        // to 64 MiB, which is only allocated as it is used). Reads of the first 256 MiB go
        // through SQLite's memory map rather than a `pread` copy a page: a search by meaning
        // reads every chunk's vector, and on 54,000 chunks that copy was a third of a fresh
        // process's time (0.20 s against 0.15 s whole). Only SQLite maps the file; it stays
        // within its locking.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;
             PRAGMA cache_size = -65536; PRAGMA mmap_size = 268435456;",
        )
        .map_err(db_err(&path))?;
        migrate::apply(&conn, migrate::THREAD_STORE).map_err(db_err(&path))?;
        migrate::apply(&conn, MIGRATIONS).map_err(db_err(&path))?;
        Ok(Self {
            conn,
            home: home.clone(),
            path,
            problems: Vec::new(),
            everything: false,
        })
    }

    /// Makes the next `refresh`, `list`, `search` or `stats` check every session against the
    /// index (`--fresh`), not only those that may have changed since the last look
    /// ([`look`](self::look)): what a writer that is not ours changed in a quiet session is
    /// otherwise seen at the next scheduled full check.
    pub fn check_everything(&mut self) {
        self.everything = true;
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The damaged session files the last refresh, list, search or stats skipped.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// How many sessions and message lines the index holds.
    pub fn counts(&self) -> Result<(u64, u64)> {
        let db = self.path();
        let count = |sql: &str| -> Result<u64> {
            let n: i64 = self
                .conn
                .query_row(sql, [], |r| r.get(0))
                .map_err(db_err(db))?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok((
            count("SELECT count(*) FROM idx_sessions")?,
            count("SELECT count(*) FROM idx_messages")?,
        ))
    }

    /// Every session directory with a `meta.json`, with its stamp: one `readdir` per project
    /// directory and one `stat` per session, no file opened. With it, the mtimes of
    /// `sessions/` (named `""`) and of each project directory, each taken before it was listed,
    /// for the next look ([`look`](self::look)).
    pub(crate) fn scan(&self) -> Result<(Vec<Found>, look::DirStamps)> {
        let sessions = self.home.sessions_dir();
        let mut dirs_seen = vec![(String::new(), look::to_record(look::mtime_of(&sessions)))];
        let dirs = look::project_dirs(&sessions)?;
        let mut found = Vec::new();
        for pd in dirs {
            let path = sessions.join(&pd);
            let mtime = look::mtime_of(&path);
            let Ok(rd) = fs::read_dir(&path) else {
                continue;
            };
            dirs_seen.push((pd.clone(), look::to_record(mtime)));
            for e in rd.filter_map(|e| e.ok()) {
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                if SessionId::new(name.as_str()).is_err() {
                    continue;
                }
                let dir = e.path();
                if let Some(meta) = Stamp::of(&dir.join(META_FILE)) {
                    found.push(Found {
                        id: name,
                        project_dir: pd.clone(),
                        dir,
                        meta,
                    });
                }
            }
        }
        Ok((found, dirs_seen))
    }

    /// Checks the metas of `found` against the index without taking the write lock: reads the
    /// changed ones into `cache`, reports the unusable ones, and says whether anything needs
    /// writing. Indexed sessions missing from `found` need removing when `found` covers the
    /// whole home.
    fn check_metas(
        &self,
        found: &[Found],
        whole_home: bool,
        cache: &mut Checked,
        problems: &mut Vec<Problem>,
    ) -> Result<bool> {
        let ids = ids_of(found, &[]);
        let only = (!whole_home).then_some(ids.as_slice());
        let known = known_metas(&self.conn, &self.path, only)?;
        let mut dirty = false;
        for f in found {
            if is_fresh(&known, f) {
                continue;
            }
            cache.changed.insert(f.id.clone());
            let cache = &mut cache.metas;
            let read = read_meta(f);
            match &read {
                MetaRead::Gone => {}
                MetaRead::Bad(why) => {
                    problems.push((f.dir.join(META_FILE), why.clone()));
                    dirty |= known.contains_key(&f.id);
                }
                MetaRead::Good(..) => dirty = true,
            }
            cache.insert(f.id.clone(), (f.meta, read));
        }
        if whole_home && !dirty {
            let on_disk: std::collections::HashSet<&str> =
                found.iter().map(|f| f.id.as_str()).collect();
            dirty = known.keys().any(|id| !on_disk.contains(id.as_str()));
        }
        Ok(dirty)
    }

    /// Starts the one write transaction of a refresh or rebuild: `BEGIN IMMEDIATE`, so that it
    /// takes the write lock first (waiting for it up to the busy timeout) and never has to
    /// upgrade a read snapshot that another writer made stale.
    fn begin_write<'c>(conn: &'c mut Connection, db: &Path) -> Result<Transaction<'c>> {
        conn.transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err(db))
    }

    /// Refresh and rebuild share this: in one write transaction, so that another process sees
    /// the index before or after it, never half-way. `found`: the sessions to bring up to date
    /// (the whole home when `whole_home`: then every other indexed session is removed); `gone`:
    /// indexed sessions to remove. `save(tx, problems)` records the look, in the same
    /// transaction.
    #[allow(clippy::too_many_arguments)]
    fn write_index(
        &mut self,
        found: &[Found],
        whole_home: bool,
        gone: &[String],
        logs: bool,
        rebuild: bool,
        mut cache: Checked,
        mut progress: impl FnMut(usize, usize),
        save: impl FnOnce(&Connection, &[Problem]) -> Result<()>,
    ) -> Result<RefreshReport> {
        let mut report = RefreshReport::default();
        let db = self.path.clone();
        let home = self.home.clone();
        let mut tx = Self::begin_write(&mut self.conn, &db)?;
        if rebuild {
            derive::clear(&tx).map_err(db_err(&db))?;
            cache.metas.clear();
        }
        // Read again under the lock: another process may have written since the check.
        let ids = ids_of(found, gone);
        let only = (!whole_home).then_some(ids.as_slice());
        let known = known_metas(&tx, &db, only)?;
        let mut usable: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for f in found {
            if is_fresh(&known, f) {
                usable.insert(&f.id);
                continue;
            }
            let read = match cache.metas.remove(&f.id) {
                Some((stamp, read)) if stamp == f.meta => read,
                _ => read_meta(f),
            };
            let (bytes, meta) = match read {
                MetaRead::Good(bytes, meta) => (bytes, meta),
                MetaRead::Gone => continue,
                MetaRead::Bad(why) => {
                    report.problems.push((f.dir.join(META_FILE), why));
                    if known.contains_key(&f.id) {
                        derive::forget_session(&tx, &f.id).map_err(db_err(&db))?;
                        report.removed += 1;
                    }
                    continue;
                }
            };
            report.metas_read += 1;
            usable.insert(&f.id);
            tx.execute(
                "INSERT INTO idx_sessions (id, projectDir, projectPath, status, lastTurnAt, createdAt, metaJson,
                   metaMtimeNs, metaSize, metaIno, agent)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT(id) DO UPDATE SET projectDir = ?2, projectPath = ?3, status = ?4,
                   lastTurnAt = ?5, createdAt = ?6, metaJson = ?7, metaMtimeNs = ?8, metaSize = ?9,
                   metaIno = ?10, agent = ?11",
                params![
                    f.id,
                    f.project_dir,
                    meta.project_path,
                    meta.status.as_str(),
                    meta.last_turn_at,
                    meta.created_at,
                    String::from_utf8_lossy(&bytes),
                    f.meta.mtime_ns,
                    f.meta.size,
                    f.meta.ino,
                    meta.agent()
                ],
            )
            .map_err(db_err(&db))?;
            derive::put_thread(&tx, &meta).map_err(db_err(&db))?;
        }
        if whole_home {
            let on_disk: std::collections::HashSet<&str> =
                found.iter().map(|f| f.id.as_str()).collect();
            for id in known.keys().filter(|id| !on_disk.contains(id.as_str())) {
                derive::forget_session(&tx, id).map_err(db_err(&db))?;
                report.removed += 1;
            }
            report.sessions = usable.len();
        } else {
            for id in gone.iter().filter(|id| known.contains_key(id.as_str())) {
                derive::forget_session(&tx, id).map_err(db_err(&db))?;
                report.removed += 1;
            }
            report.sessions = session_count(&tx, &db)?;
        }
        if logs {
            let mut marks = all_watermarks(&tx, &db, only)?;
            for (i, f) in found.iter().enumerate() {
                // A session whose meta could not be used has no row, and no logs to index.
                if let Some(w) = marks.remove(&f.id) {
                    // Another process may have indexed this session since the check: then its
                    // logs are stat'ed again.
                    let stamps = cache
                        .logs
                        .remove(&f.id)
                        .filter(|(seen, _)| *seen == w)
                        .map(|(_, stamps)| stamps);
                    let (m, e) = derive::index_logs(
                        &mut tx,
                        &db,
                        &home,
                        f,
                        w,
                        stamps,
                        &mut report.problems,
                    )?;
                    report.messages += m;
                    report.events += e;
                }
                progress(i + 1, found.len());
            }
        }
        save(&tx, &report.problems)?;
        tx.commit().map_err(db_err(&db))?;
        Ok(report)
    }

    /// Records a look that found nothing to write: its own small write transaction.
    fn save_look(&mut self, save: impl FnOnce(&Connection) -> Result<()>) -> Result<()> {
        let db = self.path.clone();
        let tx = Self::begin_write(&mut self.conn, &db)?;
        save(&tx)?;
        tx.commit().map_err(db_err(&db))
    }

    /// Decides what the next check covers ([`look::look`]), in one read snapshot.
    fn look(&mut self, logs: bool) -> Result<look::Look> {
        let force = std::mem::take(&mut self.everything);
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)
            .map_err(db_err(&self.path))?;
        let l = look::look(&tx, &self.path, &self.home, logs, force)?;
        tx.commit().map_err(db_err(&self.path))?;
        Ok(l)
    }

    /// Updates the index from the files: metas, message logs and rollout logs, each from its
    /// watermark, for the sessions that may have changed since the last look ([`look`](self::look):
    /// the change journal, directory mtimes, recently changed sessions) or, on a full check,
    /// every session. `progress(done, total)` is called per session. When nothing changed no
    /// write is made (and no lock taken) beyond recording the look; otherwise the whole update
    /// is one `BEGIN IMMEDIATE` transaction.
    pub fn refresh(&mut self, progress: impl FnMut(usize, usize)) -> Result<RefreshReport> {
        let report = self.update(true, progress)?;
        self.note_problems(&report.problems);
        Ok(report)
    }

    /// What `refresh` (`logs`: metas and logs) and `list` (metas only) share: a look, the
    /// check of what it found, and one write when something changed (else the look alone is
    /// recorded, when it has something to record).
    fn update(&mut self, logs: bool, progress: impl FnMut(usize, usize)) -> Result<RefreshReport> {
        let started = crate::now_ms();
        let db = self.path.clone();
        match self.look(logs)? {
            look::Look::Full(full) => {
                let (found, dirs) = self.scan()?;
                let (dirty, cache, problems) = self.check(&found, true, logs, &[])?;
                let changed = recently_written(&found, &cache);
                let found_ref = &found;
                let save = |tx: &Connection, problems: &[Problem]| {
                    let seen = look::Seen::of(found_ref, &changed, problems);
                    look::save_full(tx, &db, &full, &dirs, &seen, started)
                };
                if dirty {
                    return self.write_index(
                        found_ref,
                        true,
                        &[],
                        logs,
                        false,
                        cache,
                        progress,
                        save,
                    );
                }
                self.save_look(|tx| save(tx, &problems))?;
                Ok(RefreshReport {
                    sessions: found.len().saturating_sub(bad_metas(&problems)),
                    problems,
                    ..RefreshReport::default()
                })
            }
            look::Look::Partial(p) => {
                let (dirty, cache, problems) = self.check(&p.found, false, logs, &p.gone)?;
                let changed = cache.changed.clone();
                let save = |tx: &Connection, problems: &[Problem]| {
                    let seen = look::Seen::of(&p.found, &changed, problems);
                    look::save_partial(tx, &db, &p, &seen)
                };
                if dirty {
                    return self
                        .write_index(&p.found, false, &p.gone, logs, false, cache, progress, save);
                }
                if p.has_news() {
                    self.save_look(|tx| save(tx, &problems))?;
                }
                Ok(RefreshReport {
                    sessions: session_count(&self.conn, &db)?,
                    problems,
                    ..RefreshReport::default()
                })
            }
        }
    }

    /// Checks `found` against the index in one read snapshot, without the write lock: their
    /// metas, and their logs when `logs`. Returns whether anything needs writing (also when
    /// `gone` names an indexed session), what was read, and the damaged files.
    fn check(
        &self,
        found: &[Found],
        whole_home: bool,
        logs: bool,
        gone: &[String],
    ) -> Result<(bool, Checked, Vec<Problem>)> {
        let mut cache = Checked::default();
        let mut problems = Vec::new();
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)
            .map_err(db_err(&self.path))?;
        let mut dirty = self.check_metas(found, whole_home, &mut cache, &mut problems)?;
        if logs {
            dirty |= self.logs_changed(&tx, found, whole_home, &mut cache, &mut problems)?;
        }
        dirty |= !gone.is_empty();
        tx.commit().map_err(db_err(&self.path))?;
        Ok((dirty, cache, problems))
    }

    /// Whether any indexed session's logs changed since they were indexed (stats only); logs
    /// that cannot be read are reported. The stats taken go into `cache`, for the write.
    fn logs_changed(
        &self,
        conn: &Connection,
        found: &[Found],
        whole_home: bool,
        cache: &mut Checked,
        problems: &mut Vec<Problem>,
    ) -> Result<bool> {
        let ids = ids_of(found, &[]);
        let only = (!whole_home).then_some(ids.as_slice());
        let marks = all_watermarks(conn, &self.path, only)?;
        let mut changed = false;
        for f in found {
            if let Some(w) = marks.get(&f.id) {
                let stamps = derive::stamp_logs(&self.home, f);
                problems.extend_from_slice(stamps.problems());
                if derive::plan_logs(&stamps, w).changed() {
                    changed = true;
                    cache.changed.insert(f.id.clone());
                }
                cache.logs.insert(f.id.clone(), (*w, stamps));
            }
        }
        Ok(changed)
    }

    fn note_problems(&mut self, problems: &[Problem]) {
        for (path, why) in problems {
            tracing::debug!(path = %path.display(), "index: skipped: {why}");
        }
        self.problems = problems.to_vec();
    }

    /// Drops everything derived and indexes the home from scratch, in one transaction: another
    /// process reads the old index until the new one is complete. Waits for another process's
    /// write (another rebuild) to finish first.
    pub fn rebuild(&mut self, progress: impl FnMut(usize, usize)) -> Result<RefreshReport> {
        let started = crate::now_ms();
        let full = match look::look(&self.conn, &self.path, &self.home, true, true)? {
            look::Look::Full(full) => full,
            look::Look::Partial(_) => unreachable!("a forced look is a full one"),
        };
        let (found, dirs) = self.scan()?;
        self.conn
            .busy_timeout(REBUILD_WAIT)
            .map_err(db_err(&self.path))?;
        let db = self.path.clone();
        let all = recently_written(
            &found,
            &Checked {
                changed: found.iter().map(|f| f.id.clone()).collect(),
                ..Checked::default()
            },
        );
        let found_ref = &found;
        let report = self.write_index(
            found_ref,
            true,
            &[],
            true,
            true,
            Checked::default(),
            progress,
            |tx, problems| {
                let seen = look::Seen::of(found_ref, &all, problems);
                look::save_full(tx, &db, &full, &dirs, &seen, started)
            },
        );
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(db_err(&self.path))?;
        let report = report?;
        self.note_problems(&report.problems);
        Ok(report)
    }

    /// Lists sessions from the index, after checking the metas of the sessions that may have
    /// changed since the last look ([`look`](self::look)); only changed `meta.json` files are
    /// read. Same answer as [`crate::SessionStore::list`].
    pub fn list(&mut self, filter: &ListFilter) -> Result<Listing> {
        let problems = self.update(false, |_, _| {})?.problems;
        self.note_problems(&problems);
        self.listed(filter, problems)
    }

    /// The listing of the indexed sessions `filter` selects, newest activity first.
    fn listed(&self, filter: &ListFilter, problems: Vec<Problem>) -> Result<Listing> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, metaJson FROM idx_sessions ORDER BY lastTurnAt DESC, createdAt DESC, id")
            .map_err(db_err(&self.path))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(db_err(&self.path))?;
        let mut listing = Listing {
            problems,
            ..Listing::default()
        };
        for row in rows {
            if filter.limit.is_some_and(|n| listing.sessions.len() >= n) {
                break;
            }
            let (id, json) = row.map_err(db_err(&self.path))?;
            // The meta's bytes as on disk: lone surrogates (the original's) read as U+FFFD.
            let meta: SessionMeta = match freecode_core::json::from_slice_lossy(json.as_bytes()) {
                Ok(m) => m.value,
                Err(e) => {
                    listing.problems.push((PathBuf::from(&id), e.to_string()));
                    continue;
                }
            };
            // Newest activity first: none after this one is recent enough either.
            if filter.since.is_some_and(|t| meta.last_turn_at < t) {
                break;
            }
            if filter.keeps(&meta) {
                listing.sessions.push(meta);
            }
        }
        Ok(listing)
    }

    /// Opens a file for indexing; `None` when it is gone.
    pub(crate) fn open_log(path: &Path) -> Result<Option<File>> {
        match crate::fsutil::open_read(path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).ctx("open", path),
        }
    }
}

/// The watermarks of every indexed session (or of `only`).
fn all_watermarks(
    conn: &Connection,
    db: &Path,
    only: Only<'_>,
) -> Result<HashMap<String, derive::Watermarks>> {
    rows_of(
        conn,
        db,
        "SELECT id, logOffset, logIno, logLine, turnNumber, toolSeq, evOffset, evIno, logSeen, evSeen
             FROM idx_sessions",
        only,
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                derive::Watermarks {
                    log_offset: r.get(1)?,
                    log_ino: r.get(2)?,
                    log_line: r.get(3)?,
                    turn_number: r.get(4)?,
                    tool_seq: r.get(5)?,
                    ev_offset: r.get(6)?,
                    ev_ino: r.get(7)?,
                    log_seen: r.get(8)?,
                    ev_seen: r.get(9)?,
                },
            ))
        },
    )
}

/// The sessions a full check saw change that were written in the last
/// [`look::RECENT_WINDOW_MS`] (their meta's or logs' mtime): only those are kept re-checking at
/// each look; the others changed while nobody looked, and are indexed now.
fn recently_written(found: &[Found], cache: &Checked) -> std::collections::HashSet<String> {
    let cutoff = (crate::now_ms() - look::RECENT_WINDOW_MS).saturating_mul(1_000_000);
    found
        .iter()
        .filter(|f| cache.changed.contains(&f.id))
        .filter(|f| {
            f.meta.mtime_ns >= cutoff
                || cache
                    .logs
                    .get(&f.id)
                    .is_some_and(|(_, st)| st.newest_mtime() >= cutoff)
        })
        .map(|f| f.id.clone())
        .collect()
}

/// How many sessions the index holds.
fn session_count(conn: &Connection, db: &Path) -> Result<usize> {
    conn.query_row("SELECT COUNT(*) FROM idx_sessions", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| usize::try_from(n).unwrap_or(0))
    .map_err(db_err(db))
}

/// How many of `problems` are unusable metas (their sessions are not indexed).
fn bad_metas(problems: &[Problem]) -> usize {
    problems
        .iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n == META_FILE))
        .count()
}
