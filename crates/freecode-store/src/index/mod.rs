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
//! Everything here can be dropped and rebuilt ([`SessionIndex::rebuild`]).

mod derive;
mod query;

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use freecode_core::project_key::is_project_dir_name;
use freecode_core::{SessionId, SessionMeta};
use rusqlite::{Connection, params};

pub use query::{
    RANK_LIMIT, SearchHit, SearchQuery, Stats, StatsScope, ToolStats, search_scan, stats_scan,
    words,
};

use crate::error::{IoContext, Result, StoreError};
use crate::home::Home;
use crate::session::{ListFilter, Listing, MESSAGES_FILE, META_FILE};
use crate::threads::migrate::{self, Migration};
use crate::threads::{DB_FILE, SqliteThreadStore};

/// The index's migrations, named by their timestamps; never edited once shipped. They share
/// `schema_migrations` with the thread store's.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 20261130120000,
    name: "session_index",
    sql: include_str!("../../migrations/20261130120000_session_index.sql"),
}];

/// What a refresh did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RefreshReport {
    /// Sessions seen on disk.
    pub sessions: usize,
    /// Sessions whose meta was (re)read.
    pub metas_read: usize,
    /// Sessions removed from the index (gone from disk).
    pub removed: usize,
    /// Message lines indexed.
    pub messages: u64,
    /// Rollout events indexed.
    pub events: u64,
}

/// Identity and version of a file, from one `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp {
    pub mtime_ns: i64,
    pub size: i64,
    pub ino: i64,
}

impl Stamp {
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let m = fs::metadata(path).ok()?;
        Some(Self {
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            size: i64::try_from(m.len()).unwrap_or(i64::MAX),
            ino: i64::try_from(m.ino()).unwrap_or(i64::MAX),
        })
    }
}

/// A session directory found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub id: String,
    pub project_dir: String,
    pub dir: PathBuf,
    pub meta: Stamp,
}

/// The index over one home.
pub struct SessionIndex {
    pub(crate) conn: Connection,
    pub(crate) home: Home,
    path: PathBuf,
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
        crate::fsutil::create_dir_private(&state)?;
        let path = state.join(DB_FILE);
        // Creates or adopts the database, applies the thread store's migrations, recovers from
        // corruption.
        drop(SqliteThreadStore::open_or_recover(&path)?);
        let conn = Connection::open(&path).map_err(db_err(&path))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db_err(&path))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;",
        )
        .map_err(db_err(&path))?;
        migrate::apply(&conn, migrate::THREAD_STORE).map_err(db_err(&path))?;
        migrate::apply(&conn, MIGRATIONS).map_err(db_err(&path))?;
        Ok(Self {
            conn,
            home: home.clone(),
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every session directory with a `meta.json`, with its stamp: one `readdir` per project
    /// directory and one `stat` per session, no file opened.
    pub(crate) fn scan(&self, project_dirs: Option<&[String]>) -> Result<Vec<Found>> {
        let sessions = self.home.sessions_dir();
        let dirs: Vec<String> = match project_dirs {
            Some(d) => d.to_vec(),
            None => match fs::read_dir(&sessions) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| is_project_dir_name(n))
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e).ctx("list", &sessions),
            },
        };
        let mut found = Vec::new();
        for pd in dirs {
            let Ok(rd) = fs::read_dir(sessions.join(&pd)) else {
                continue;
            };
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
        Ok(found)
    }

    /// Brings the metas of `found` up to date (reading only changed `meta.json` files) and
    /// removes indexed sessions that are gone, when `found` covers the whole home.
    fn sync_metas(
        &mut self,
        found: &[Found],
        whole_home: bool,
        report: &mut RefreshReport,
    ) -> Result<()> {
        let mut known: HashMap<String, (Stamp, String)> = HashMap::new();
        {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT id, metaMtimeNs, metaSize, metaIno, projectDir FROM idx_sessions",
                )
                .map_err(db_err(&self.path))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        Stamp {
                            mtime_ns: r.get(1)?,
                            size: r.get(2)?,
                            ino: r.get(3)?,
                        },
                        r.get(4)?,
                    ))
                })
                .map_err(db_err(&self.path))?;
            for row in rows {
                let (id, stamp, pd) = row.map_err(db_err(&self.path))?;
                known.insert(id, (stamp, pd));
            }
        }
        let tx = self.conn.transaction().map_err(db_err(&self.path))?;
        for f in found {
            if known
                .remove(&f.id)
                .is_some_and(|(stamp, pd)| stamp == f.meta && pd == f.project_dir)
            {
                continue;
            }
            let path = f.dir.join(META_FILE);
            let Ok(Some(bytes)) =
                crate::fsutil::read_bounded(&path, crate::session::META_MAX_BYTES, "meta.json")
            else {
                continue;
            };
            let meta: SessionMeta = match serde_json::from_slice(&bytes) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(path = %path.display(), "index: skipped an unreadable meta.json: {e}");
                    continue;
                }
            };
            report.metas_read += 1;
            tx.execute(
                "INSERT INTO idx_sessions (id, projectDir, projectPath, status, lastTurnAt, createdAt, metaJson,
                   metaMtimeNs, metaSize, metaIno)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT(id) DO UPDATE SET projectDir = ?2, projectPath = ?3, status = ?4,
                   lastTurnAt = ?5, createdAt = ?6, metaJson = ?7, metaMtimeNs = ?8, metaSize = ?9,
                   metaIno = ?10",
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
                    f.meta.ino
                ],
            )
            .map_err(db_err(&self.path))?;
            derive::put_thread(&tx, &meta).map_err(db_err(&self.path))?;
        }
        if whole_home {
            for id in known.keys() {
                derive::forget_session(&tx, id).map_err(db_err(&self.path))?;
                report.removed += 1;
            }
        }
        tx.commit().map_err(db_err(&self.path))?;
        Ok(())
    }

    /// Updates the index from the files: metas, message logs and rollout logs, each from its
    /// watermark. `progress(done, total)` is called per session.
    pub fn refresh(&mut self, mut progress: impl FnMut(usize, usize)) -> Result<RefreshReport> {
        let mut report = RefreshReport::default();
        let found = self.scan(None)?;
        report.sessions = found.len();
        self.sync_metas(&found, true, &mut report)?;
        let mut marks = self.all_watermarks()?;
        for (i, f) in found.iter().enumerate() {
            // A session whose meta could not be read has no row, and no logs to index.
            let Some(w) = marks.remove(&f.id) else {
                continue;
            };
            let (m, e) = derive::index_logs(self, f, w)?;
            report.messages += m;
            report.events += e;
            progress(i + 1, found.len());
        }
        Ok(report)
    }

    /// Drops everything derived and indexes the home from scratch.
    pub fn rebuild(&mut self, progress: impl FnMut(usize, usize)) -> Result<RefreshReport> {
        derive::clear(&self.conn).map_err(db_err(&self.path))?;
        self.refresh(progress)
    }

    /// Lists sessions from the index: one `stat` per session to check freshness, and only
    /// changed `meta.json` files are read. Same answer as [`crate::SessionStore::list`].
    pub fn list(&mut self, filter: &ListFilter) -> Result<Listing> {
        let scope = filter
            .project_path
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(project_dirs_of);
        let found = self.scan(scope.as_deref())?;
        let mut report = RefreshReport::default();
        self.sync_metas(&found, scope.is_none(), &mut report)?;
        let ids: std::collections::HashSet<&str> = found.iter().map(|f| f.id.as_str()).collect();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, metaJson FROM idx_sessions ORDER BY lastTurnAt DESC, createdAt DESC, id")
            .map_err(db_err(&self.path))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(db_err(&self.path))?;
        let mut listing = Listing::default();
        for row in rows {
            let (id, json) = row.map_err(db_err(&self.path))?;
            if !ids.contains(id.as_str()) {
                continue;
            }
            let meta: SessionMeta = match serde_json::from_str(&json) {
                Ok(m) => m,
                Err(e) => {
                    listing.problems.push((PathBuf::from(&id), e.to_string()));
                    continue;
                }
            };
            let status_ok = match &filter.status {
                Some(s) => &meta.status == s,
                None => filter.include_deleted || !meta.is_deleted(),
            };
            let project_ok = filter
                .project_path
                .as_deref()
                .is_none_or(|p| p.is_empty() || meta.project_path == p);
            if status_ok && project_ok {
                listing.sessions.push(meta);
            }
        }
        Ok(listing)
    }

    /// The path of a session's message log, from the index.
    pub(crate) fn messages_path(&self, f: &Found) -> PathBuf {
        f.dir.join(MESSAGES_FILE)
    }

    /// Opens a file for indexing; `None` when it is gone.
    pub(crate) fn open_log(path: &Path) -> Result<Option<File>> {
        match crate::fsutil::open_read(path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).ctx("open", path),
        }
    }

    /// The watermarks of every indexed session, in one query.
    pub(crate) fn all_watermarks(&self) -> Result<HashMap<String, derive::Watermarks>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, logOffset, logIno, logLine, turnNumber, toolSeq, evOffset, evIno, logSeen, evSeen
                 FROM idx_sessions",
            )
            .map_err(db_err(&self.path))?;
        let rows = stmt
            .query_map([], |r| {
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
            })
            .map_err(db_err(&self.path))?;
        rows.collect::<rusqlite::Result<HashMap<_, _>>>()
            .map_err(db_err(&self.path))
    }
}

/// The directories sessions of `project_path` can be in: ours and the original's.
pub(crate) fn project_dirs_of(project_path: &str) -> Vec<String> {
    let mut v = vec![freecode_core::project_key::project_dir_name(project_path)];
    let orig = freecode_core::project_key::format_original(project_path);
    if is_project_dir_name(&orig) && !v.contains(&orig) {
        v.push(orig);
    }
    v
}
