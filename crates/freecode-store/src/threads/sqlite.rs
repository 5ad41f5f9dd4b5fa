//! The SQLite backend over `state/freecode.db` (SPEC §14.4) with the §19.39 bugs fixed.
//!
//! - Opening sets `busy_timeout`, WAL and `foreign_keys = ON`, checks the file
//!   (`PRAGMA quick_check`) and applies the migrations ([`super::migrate`]). The original's
//!   database, which has the same tables and no `schema_migrations`, is adopted as it is.
//! - [`SqliteThreadStore::open_or_recover`] moves a corrupt file (not SQLite, truncated, failing
//!   the check) aside to `freecode.db.corrupt-<ms>` with its `-wal`/`-shm`/`-journal`, and
//!   starts a fresh one.
//! - Every mutation is one `BEGIN IMMEDIATE` transaction; every value is a bound parameter
//!   (`LIMIT`/`OFFSET` included, `LIMIT -1` meaning none).
//! - Values are stored as given (an empty response or a zero duration stays so); the original's
//!   NULLs read back as absent.
//! - Search selects the threads in list order and filters them in Rust with the predicate the
//!   JSON backend uses ([`search_matches`]), since SQLite's `lower()`/`LIKE` fold ASCII only.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, Transaction, TransactionBehavior};
use serde_json::{Map, Value};

use super::types::{
    GoalStatus, NewThread, NewToolCall, NewTurn, StoredThread, StoredToolCall, StoredTurn,
    StoredTurnItemsView, ThreadFilter, ThreadStatus, ThreadUpdate, search_matches,
};
use super::{BackendKind, ThreadStore, migrate, unique_id};
use crate::error::{Result, StoreError};

/// How long a statement waits for another connection's lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

const THREAD_COLS: &str = "id, title, createdAt, updatedAt, lastTurnAt, status, projectPath, \
                           provider, turnCount, iterationCount, goal, goalStatus, goalUpdatedAt";
const TURN_COLS: &str =
    "id, threadId, turnNumber, prompt, response, createdAt, durationMs, toolCallCount";
/// Databases up to this size get a full `PRAGMA quick_check` when opened.
const QUICK_CHECK_MAX_BYTES: u64 = 64 * 1024 * 1024;

const CALL_COLS: &str = "id, turnId, toolName, args, result, error, durationMs, sequence";
const THREAD_ORDER: &str = "ORDER BY lastTurnAt DESC, createdAt DESC, id ASC";
const TURN_ORDER: &str = "ORDER BY turnNumber ASC, createdAt ASC, id ASC";

/// The thread store in a SQLite database.
#[derive(Debug)]
pub struct SqliteThreadStore {
    conn: Connection,
    path: PathBuf,
}

/// Why opening failed: the file is damaged (move it aside) or something else (report it).
enum OpenError {
    Corrupt(String),
    Other(StoreError),
}

/// An error inside a transaction: SQLite's, or the store's own (not found).
enum TxError {
    Db(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Db(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

type TxResult<T> = std::result::Result<T, TxError>;

fn db_error(op: &'static str, path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Io {
        op,
        path: path.to_owned(),
        source: std::io::Error::other(e),
    }
}

fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

impl SqliteThreadStore {
    /// Opens (creating if missing, 0600) the database at `path`. A damaged file is an error
    /// here; see [`open_or_recover`](Self::open_or_recover).
    pub fn open(path: &Path) -> Result<Self> {
        match Self::try_open(path) {
            Ok(s) => Ok(s),
            Err(OpenError::Other(e)) => Err(e),
            Err(OpenError::Corrupt(why)) => Err(StoreError::Io {
                op: "open database",
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
            }),
        }
    }

    /// Opens the database at `path`; if the file is damaged, moves it (and its `-wal`, `-shm`,
    /// `-journal`) aside to `<name>.corrupt-<ms>` and creates a fresh one. Returns what was
    /// done, if anything.
    pub fn open_or_recover(path: &Path) -> Result<(Self, Option<String>)> {
        match Self::try_open(path) {
            Ok(s) => Ok((s, None)),
            Err(OpenError::Other(e)) => Err(e),
            Err(OpenError::Corrupt(why)) => {
                let aside = move_aside(path)?;
                tracing::warn!(
                    db = %path.display(),
                    moved_to = %aside.display(),
                    why = %why,
                    "thread store database is corrupt; moved aside, starting a fresh one"
                );
                let store = Self::open(path)?;
                Ok((
                    store,
                    Some(format!(
                        "moved the corrupt database aside to {} ({why}) and created a fresh one",
                        aside.display()
                    )),
                ))
            }
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection (foreign keys on, WAL, busy timeout set), for code that shares the
    /// database, such as the session index.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn try_open(path: &Path) -> std::result::Result<Self, OpenError> {
        // SQLite opens by path: refuse a link at the database or at any of its side files
        // (the database itself is also opened with SQLITE_OPEN_NOFOLLOW).
        for side in ["", "-wal", "-shm", "-journal"] {
            crate::fsutil::refuse_link(&side_file(path, side)).map_err(OpenError::Other)?;
        }
        check_header(path)?;
        if !path.exists() {
            // Created here so that it gets the store's 0600 (SQLite gives -wal/-shm the same).
            match crate::fsutil::create_new(path) {
                Ok(_) => {}
                Err(_) if path.exists() => {}
                Err(e) => return Err(OpenError::Other(e)),
            }
        }
        let classify = |op: &'static str| {
            move |e: rusqlite::Error| {
                if is_corruption(&e) {
                    OpenError::Corrupt(e.to_string())
                } else {
                    OpenError::Other(db_error(op, path, e))
                }
            }
        };
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(classify("open database"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(classify("configure database"))?;
        // A full quick_check reads every page: affordable on a small database, seconds on a
        // large index. Past the limit only the schema is read; damage deeper in surfaces as a
        // corruption error when a query reaches it.
        let small = std::fs::metadata(path).map_or(true, |m| m.len() <= QUICK_CHECK_MAX_BYTES);
        let probe = if small {
            "PRAGMA quick_check"
        } else {
            "SELECT 'ok' FROM (SELECT count(*) FROM sqlite_master)"
        };
        let check: Vec<String> = conn
            .prepare(probe)
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()
            })
            .map_err(classify("check database"))?;
        if check.len() != 1 || check.first().map(String::as_str) != Some("ok") {
            return Err(OpenError::Corrupt(format!(
                "quick_check: {}",
                check.into_iter().take(3).collect::<Vec<_>>().join("; ")
            )));
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(classify("set WAL on"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(db = %path.display(), mode, "database is not in WAL mode");
        }
        conn.pragma_update(None, "foreign_keys", true)
            .and_then(|()| conn.pragma_update(None, "synchronous", "NORMAL"))
            .map_err(classify("configure database"))?;
        migrate::apply(&conn, migrate::THREAD_STORE).map_err(classify("migrate database"))?;
        Ok(Self {
            conn,
            path: path.to_owned(),
        })
    }

    fn fail(&self, op: &'static str) -> impl Fn(TxError) -> StoreError + '_ {
        move |e| match e {
            TxError::Db(e) => db_error(op, &self.path, e),
            TxError::Store(e) => e,
        }
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction, committed when it returns `Ok`.
    fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Transaction<'_>) -> TxResult<T>,
    ) -> Result<T> {
        let run = || -> TxResult<T> {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            let v = f(&tx)?;
            tx.commit()?;
            Ok(v)
        };
        run().map_err(self.fail(op))
    }

    /// Runs `f` in a read transaction (one snapshot for several statements).
    fn read<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Transaction<'_>) -> TxResult<T>,
    ) -> Result<T> {
        let run = || -> TxResult<T> {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)?;
            let v = f(&tx)?;
            tx.commit()?;
            Ok(v)
        };
        run().map_err(self.fail(op))
    }
}

/// A file that exists, is not empty and does not start with SQLite's header is not a database.
fn check_header(path: &Path) -> std::result::Result<(), OpenError> {
    let io = |e: std::io::Error| {
        OpenError::Other(StoreError::Io {
            op: "read",
            path: path.to_owned(),
            source: e,
        })
    };
    let f = match crate::fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let mut head = Vec::with_capacity(MAGIC.len());
    f.take(16).read_to_end(&mut head).map_err(io)?;
    if head.is_empty() || head.as_slice() == MAGIC {
        Ok(())
    } else {
        Err(OpenError::Corrupt(
            "not a SQLite database (bad header)".to_owned(),
        ))
    }
}

/// Renames `path` and its side files to `<name>.corrupt-<ms>[-wal|-shm|-journal]`.
fn move_aside(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ms = crate::now_ms();
    let mut n = 0u32;
    let target = loop {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!(".{n}")
        };
        let t = path.with_file_name(format!("{name}.corrupt-{ms}{suffix}"));
        if !t.exists() {
            break t;
        }
        n += 1;
    };
    if path.exists() {
        crate::fsutil::rename(path, &target)?;
    }
    for side in ["-wal", "-shm", "-journal"] {
        let from = side_file(path, side);
        if from.exists() {
            let to = side_file(&target, side);
            crate::fsutil::rename(&from, &to)?;
        }
    }
    Ok(target)
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

// ---- rows ------------------------------------------------------------------------------------

/// An integer column read leniently: NULL → `None`, a real or numeric text → its value.
fn int(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null | ValueRef::Blob(_) => None,
        ValueRef::Integer(n) => Some(n),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse().ok()),
    })
}

/// A text column read leniently: NULL → `None`, anything else as text.
fn text(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Null => None,
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    })
}

fn thread_row(r: &Row<'_>) -> rusqlite::Result<StoredThread> {
    Ok(StoredThread {
        id: text(r, 0)?.unwrap_or_default(),
        title: text(r, 1)?.unwrap_or_default(),
        created_at: int(r, 2)?.unwrap_or_default(),
        updated_at: int(r, 3)?.unwrap_or_default(),
        last_turn_at: int(r, 4)?.unwrap_or_default(),
        status: text(r, 5)?.map_or(ThreadStatus::Active, |s| ThreadStatus::parse(&s)),
        project_path: text(r, 6)?.unwrap_or_default(),
        provider: text(r, 7)?.unwrap_or_default(),
        turn_count: int(r, 8)?.unwrap_or_default(),
        iteration_count: int(r, 9)?.unwrap_or_default(),
        goal: text(r, 10)?,
        goal_status: text(r, 11)?.map(|s| GoalStatus::parse(&s)),
        goal_updated_at: int(r, 12)?,
        extra: Map::new(),
    })
}

fn turn_row(r: &Row<'_>) -> rusqlite::Result<StoredTurn> {
    Ok(StoredTurn {
        id: text(r, 0)?.unwrap_or_default(),
        thread_id: text(r, 1)?.unwrap_or_default(),
        turn_number: int(r, 2)?.unwrap_or_default(),
        prompt: text(r, 3)?.unwrap_or_default(),
        response: text(r, 4)?,
        created_at: int(r, 5)?.unwrap_or_default(),
        duration_ms: int(r, 6)?,
        tool_call_count: int(r, 7)?.unwrap_or_default(),
        tool_calls: Some(Vec::new()),
        extra: Map::new(),
    })
}

fn call_row(r: &Row<'_>) -> rusqlite::Result<StoredToolCall> {
    let args = match text(r, 3)? {
        None => Value::Object(Map::new()),
        Some(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
    };
    Ok(StoredToolCall {
        id: text(r, 0)?.unwrap_or_default(),
        tool_name: text(r, 2)?.unwrap_or_default(),
        args,
        result: text(r, 4)?,
        error: text(r, 5)?,
        duration_ms: int(r, 6)?,
        sequence: int(r, 7)?.unwrap_or_default(),
        extra: Map::new(),
    })
}

fn get_thread(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<Option<StoredThread>> {
    tx.prepare_cached(&format!("SELECT {THREAD_COLS} FROM threads WHERE id = ?1"))?
        .query_row([id], thread_row)
        .optional()
}

fn exists(tx: &Transaction<'_>, table: &str, id: &str) -> rusqlite::Result<bool> {
    tx.prepare_cached(&format!(
        "SELECT EXISTS (SELECT 1 FROM {table} WHERE id = ?1)"
    ))?
    .query_row([id], |r| r.get(0))
}

/// Inserts or updates every column of a thread row.
fn write_thread(tx: &Transaction<'_>, t: &StoredThread) -> rusqlite::Result<()> {
    tx.prepare_cached(&format!(
        "INSERT INTO threads ({THREAD_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (id) DO UPDATE SET
           title = excluded.title, createdAt = excluded.createdAt,
           updatedAt = excluded.updatedAt, lastTurnAt = excluded.lastTurnAt,
           status = excluded.status, projectPath = excluded.projectPath,
           provider = excluded.provider, turnCount = excluded.turnCount,
           iterationCount = excluded.iterationCount, goal = excluded.goal,
           goalStatus = excluded.goalStatus, goalUpdatedAt = excluded.goalUpdatedAt"
    ))?
    .execute(rusqlite::params![
        t.id,
        t.title,
        t.created_at,
        t.updated_at,
        t.last_turn_at,
        t.status.as_str(),
        t.project_path,
        t.provider,
        t.turn_count,
        t.iteration_count,
        t.goal,
        t.goal_status.as_ref().map(GoalStatus::as_str),
        t.goal_updated_at,
    ])?;
    Ok(())
}

/// Inserts or updates every column of a turn row (not its calls).
fn write_turn(tx: &Transaction<'_>, t: &StoredTurn) -> rusqlite::Result<()> {
    tx.prepare_cached(&format!(
        "INSERT INTO turns ({TURN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET
           threadId = excluded.threadId, turnNumber = excluded.turnNumber,
           prompt = excluded.prompt, response = excluded.response,
           createdAt = excluded.createdAt, durationMs = excluded.durationMs,
           toolCallCount = excluded.toolCallCount"
    ))?
    .execute(rusqlite::params![
        t.id,
        t.thread_id,
        t.turn_number,
        t.prompt,
        t.response,
        t.created_at,
        t.duration_ms,
        t.tool_call_count,
    ])?;
    Ok(())
}

/// Inserts or updates a tool call row (an id used by another turn moves to `turn_id`).
fn write_call(tx: &Transaction<'_>, turn_id: &str, c: &StoredToolCall) -> TxResult<()> {
    let args = serde_json::to_string(&c.args).map_err(|source| StoreError::BadJson {
        path: PathBuf::from(format!("tool call {}", c.id)),
        source,
    })?;
    tx.prepare_cached(&format!(
        "INSERT INTO tool_calls ({CALL_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET
           turnId = excluded.turnId, toolName = excluded.toolName, args = excluded.args,
           result = excluded.result, error = excluded.error,
           durationMs = excluded.durationMs, sequence = excluded.sequence"
    ))?
    .execute(rusqlite::params![
        c.id,
        turn_id,
        c.tool_name,
        args,
        c.result,
        c.error,
        c.duration_ms,
        c.sequence,
    ])?;
    Ok(())
}

fn calls_of(tx: &Transaction<'_>, turn_id: &str) -> rusqlite::Result<Vec<StoredToolCall>> {
    tx.prepare_cached(&format!(
        "SELECT {CALL_COLS} FROM tool_calls WHERE turnId = ?1 ORDER BY sequence ASC, id ASC"
    ))?
    .query_map([turn_id], call_row)?
    .collect()
}

/// The thread's turns (with calls) in turn order, at most `limit` (`-1`: all).
fn turns_of(
    tx: &Transaction<'_>,
    thread_id: &str,
    limit: i64,
) -> rusqlite::Result<Vec<StoredTurn>> {
    let mut turns: Vec<StoredTurn> = tx
        .prepare_cached(&format!(
            "SELECT {TURN_COLS} FROM turns WHERE threadId = ?1 {TURN_ORDER} LIMIT ?2"
        ))?
        .query_map(rusqlite::params![thread_id, limit], turn_row)?
        .collect::<rusqlite::Result<_>>()?;
    for t in &mut turns {
        t.tool_calls = Some(calls_of(tx, &t.id)?);
    }
    Ok(turns)
}

fn not_found(id: &str) -> TxError {
    TxError::Store(StoreError::NotFound { id: id.to_owned() })
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Keeps the last call of each id, in the order of those last occurrences.
pub(crate) fn dedupe_calls(calls: &[StoredToolCall]) -> Vec<StoredToolCall> {
    let mut out: Vec<StoredToolCall> = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        if !calls[i + 1..].iter().any(|later| later.id == c.id) {
            out.push(c.clone());
        }
    }
    out
}

impl ThreadStore for SqliteThreadStore {
    fn kind(&self) -> BackendKind {
        BackendKind::Sqlite
    }

    fn create_thread(&self, thread: NewThread) -> Result<String> {
        self.write("create thread in", |tx| {
            let now = crate::now_ms();
            let id = unique_id("thread", now, |id| {
                exists(tx, "threads", id).map_err(|e| db_error("create thread in", &self.path, e))
            })?;
            write_thread(tx, &thread.into_thread(id.clone(), now))?;
            Ok(id)
        })
    }

    fn get_thread(&self, id: &str) -> Result<Option<StoredThread>> {
        self.read("read thread from", |tx| Ok(get_thread(tx, id)?))
    }

    fn update_thread(&self, id: &str, update: &ThreadUpdate) -> Result<bool> {
        self.write("update thread in", |tx| {
            let Some(mut t) = get_thread(tx, id)? else {
                return Ok(false);
            };
            update.apply(&mut t, crate::now_ms());
            write_thread(tx, &t)?;
            Ok(true)
        })
    }

    fn delete_thread(&self, id: &str) -> Result<bool> {
        self.write("delete thread from", |tx| {
            let calls = tx.execute(
                "DELETE FROM tool_calls WHERE turnId IN (SELECT id FROM turns WHERE threadId = ?1)",
                [id],
            )?;
            let turns = tx.execute("DELETE FROM turns WHERE threadId = ?1", [id])?;
            let threads = tx.execute("DELETE FROM threads WHERE id = ?1", [id])?;
            Ok(calls + turns + threads > 0)
        })
    }

    fn list_threads(&self, filter: &ThreadFilter) -> Result<Vec<StoredThread>> {
        let mut sql = format!("SELECT {THREAD_COLS} FROM threads WHERE 1 = 1");
        let mut args: Vec<SqlValue> = Vec::new();
        if let Some(s) = &filter.status {
            args.push(SqlValue::Text(s.as_str().to_owned()));
            sql.push_str(&format!(" AND status = ?{}", args.len()));
        }
        for (col, v) in [
            ("projectPath", &filter.project_path),
            ("provider", &filter.provider),
        ] {
            match v.as_deref() {
                None => {}
                // A NULL (the original's) reads as "" and must match "" as it does in JSON.
                Some("") => sql.push_str(&format!(" AND COALESCE({col}, '') = ''")),
                Some(v) => {
                    args.push(SqlValue::Text(v.to_owned()));
                    sql.push_str(&format!(" AND {col} = ?{}", args.len()));
                }
            }
        }
        args.push(SqlValue::Integer(
            filter.effective_limit().map_or(-1, to_i64),
        ));
        args.push(SqlValue::Integer(filter.offset.map_or(0, to_i64)));
        sql.push_str(&format!(
            " {THREAD_ORDER} LIMIT ?{} OFFSET ?{}",
            args.len() - 1,
            args.len()
        ));
        self.read("list threads in", |tx| {
            Ok(tx
                .prepare_cached(&sql)?
                .query_map(rusqlite::params_from_iter(args.iter()), thread_row)?
                .collect::<rusqlite::Result<_>>()?)
        })
    }

    fn search_threads(&self, query: &str) -> Result<Vec<StoredThread>> {
        let q = query.to_lowercase();
        let all: Vec<StoredThread> = self.read("search threads in", |tx| {
            Ok(tx
                .prepare_cached(&format!("SELECT {THREAD_COLS} FROM threads {THREAD_ORDER}"))?
                .query_map([], thread_row)?
                .collect::<rusqlite::Result<_>>()?)
        })?;
        Ok(all.into_iter().filter(|t| search_matches(t, &q)).collect())
    }

    fn create_turn(&self, turn: NewTurn) -> Result<String> {
        self.write("create turn in", |tx| {
            if !exists(tx, "threads", &turn.thread_id)? {
                return Err(not_found(&turn.thread_id));
            }
            let now = crate::now_ms();
            let id = unique_id("turn", now, |id| {
                exists(tx, "turns", id).map_err(|e| db_error("create turn in", &self.path, e))
            })?;
            let thread_id = turn.thread_id.clone();
            write_turn(tx, &turn.into_turn(id.clone(), now))?;
            tx.prepare_cached(
                "UPDATE threads SET
                   turnCount = (SELECT COUNT(*) FROM turns WHERE threadId = ?1),
                   lastTurnAt = ?2, updatedAt = ?2
                 WHERE id = ?1",
            )?
            .execute(rusqlite::params![thread_id, now])?;
            Ok(id)
        })
    }

    fn get_turn(&self, id: &str) -> Result<Option<StoredTurn>> {
        self.read("read turn from", |tx| {
            let turn = tx
                .prepare_cached(&format!("SELECT {TURN_COLS} FROM turns WHERE id = ?1"))?
                .query_row([id], turn_row)
                .optional()?;
            let Some(mut turn) = turn else {
                return Ok(None);
            };
            turn.tool_calls = Some(calls_of(tx, id)?);
            Ok(Some(turn))
        })
    }

    fn get_turns_for_thread(&self, thread_id: &str) -> Result<Vec<StoredTurn>> {
        self.read("read turns from", |tx| Ok(turns_of(tx, thread_id, -1)?))
    }

    fn get_turn_items_view(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<Vec<StoredTurnItemsView>> {
        let limit = limit.map_or(-1, to_i64);
        let turns = self.read("read turns from", |tx| Ok(turns_of(tx, thread_id, limit)?))?;
        Ok(turns.iter().map(StoredTurnItemsView::of).collect())
    }

    fn add_tool_call(&self, turn_id: &str, call: NewToolCall) -> Result<String> {
        self.write("add tool call to", |tx| {
            if !exists(tx, "turns", turn_id)? {
                return Err(not_found(turn_id));
            }
            let now = crate::now_ms();
            let id = unique_id("tc", now, |id| {
                exists(tx, "tool_calls", id)
                    .map_err(|e| db_error("add tool call to", &self.path, e))
            })?;
            let sequence: i64 = tx
                .prepare_cached(
                    "SELECT COALESCE(MAX(sequence), 0) + 1 FROM tool_calls WHERE turnId = ?1",
                )?
                .query_row([turn_id], |r| r.get(0))?;
            write_call(tx, turn_id, &call.into_call(id.clone(), sequence))?;
            tx.prepare_cached(
                "UPDATE turns SET toolCallCount = MAX(COALESCE(toolCallCount, 0) + 1,
                   (SELECT COUNT(*) FROM tool_calls WHERE turnId = ?1))
                 WHERE id = ?1",
            )?
            .execute([turn_id])?;
            Ok(id)
        })
    }

    fn put_thread(&self, thread: &StoredThread) -> Result<()> {
        self.write("write thread to", |tx| Ok(write_thread(tx, thread)?))
    }

    fn put_turn(&self, turn: &StoredTurn) -> Result<()> {
        self.write("write turn to", |tx| {
            if !exists(tx, "threads", &turn.thread_id)? {
                return Err(not_found(&turn.thread_id));
            }
            write_turn(tx, turn)?;
            if let Some(calls) = &turn.tool_calls {
                tx.prepare_cached("DELETE FROM tool_calls WHERE turnId = ?1")?
                    .execute([&turn.id])?;
                for c in dedupe_calls(calls) {
                    write_call(tx, &turn.id, &c)?;
                }
            }
            Ok(())
        })
    }
}
