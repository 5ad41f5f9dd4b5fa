//! opencode's sessions (OTHER-AGENTS.md A.3): the SQLite `opencode*.db` of 1.2+ and the older
//! JSON `storage/` tree, read together and de-duplicated by id (the database wins), plus the
//! `{info, messages: [{info, parts}]}` file `opencode export` writes.
//!
//! One unit is a whole data directory (`~/.local/share/opencode`): its databases (with their
//! `-wal`/`-shm`) and every session, message and part file of `storage/`, because the one-time
//! JSON→SQLite migration may have stopped part-way and left either half. A root may also be one
//! `.db` file, one `storage/` directory or one export file.
//!
//! Databases are opened read-only through a `file:…?mode=ro` URI, which is safe while opencode
//! writes beside it in WAL mode; the optional columns are found with `PRAGMA table_info`, and the
//! `event` table (the sync log, often tens of GB) is never touched.
//!
//! Mapping: messages in `(time_created, id)` order, parts by id. A user message is a
//! [`Item::User`] (text, file and subtask parts), unless it only marks a compaction; an
//! assistant message is one [`Item::Response`]: text and file parts, and each `tool` part one
//! [`ToolCall`] with its `state` (completed/error/pending/running) and `state.time` as the call's
//! start and end. Reasoning parts are left out (they are not a part type of ours); step, patch,
//! snapshot and agent parts carry nothing a message holds. `tokens` is the response's usage, with
//! the input counted inclusive of the cache (opencode keeps the three disjoint). An assistant
//! `error` follows it as an [`Item::Error`] (`MessageAbortedError` is an abort), a `retry` part
//! precedes it as one. A `compaction` part and the assistant `summary: true` message after it are
//! one [`Item::Compaction`]. An assistant message that finishes other than with `tool-calls`
//! (or is aborted) ends the turn ([`Item::TurnEnd`], timed from the user's message). A session
//! with a `parentID` is a child (a task-tool subagent), and a `task` tool call naming its
//! session is an [`Item::Subagent`] in the parent.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use freecode_core::{Part, Usage};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::model::{
    Compaction, Content, ErrorNote, ImportedSession, Item, ParentKind, ParentLink, Read, Response,
    SubagentRun, ToolCall, ToolOutcome, TurnEnd, UserTurn,
};
use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// How deep [`discover`] looks below a root for data directories.
const MAX_DEPTH: usize = 4;

/// The largest JSON file of the storage tree or export read (a part holds one tool output).
const MAX_JSON_FILE: u64 = 512 * 1024 * 1024;

/// The data directory: `$XDG_DATA_HOME` (absolute) else `$HOME/.local/share`, then `opencode/`.
pub fn default_roots(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    xdg_data_home(var)
        .map(|data| vec![data.join("opencode")])
        .unwrap_or_default()
}

/// The XDG data directory: `$XDG_DATA_HOME` when set to an absolute path, else
/// `$HOME/.local/share`.
pub(crate) fn xdg_data_home(var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(dir) = var("XDG_DATA_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Some(dir);
    }
    let home = var("HOME").map(PathBuf::from)?;
    (!home.as_os_str().is_empty()).then(|| home.join(".local").join("share"))
}

/// The units under `root`: a data directory (databases and `storage/`), a `storage/` tree, a
/// `.db` file or an export `.json` file; a directory that is none of these is searched a few
/// levels down. Symlinks below the root are not followed.
pub fn discover(root: &Path, issues: &mut Vec<SourceIssue>) -> Vec<SourceUnit> {
    discover_root(
        root,
        issues,
        Agent::Opencode,
        "json",
        "not an opencode database (.db) or export (.json): skipped",
        discover_dir,
    )
}

/// The units under `root` for the two database agents (opencode, goose): a `.db` file is one
/// unit, a file ending in `.ext` (opencode's export, goose's legacy session) another, a
/// directory is walked by `walk`; anything else is reported with `what`. Sorted by path.
pub(crate) fn discover_root(
    root: &Path,
    issues: &mut Vec<SourceIssue>,
    agent: Agent,
    ext: &str,
    what: &str,
    walk: fn(&Path, usize, &mut Vec<SourceUnit>, &mut Vec<SourceIssue>),
) -> Vec<SourceUnit> {
    let mut units = Vec::new();
    match fs::metadata(root) {
        Ok(meta) if meta.is_file() => {
            if has_extension(root, "db") {
                units.push(db_unit(agent, root));
            } else if has_extension(root, ext) {
                units.push(SourceUnit::file(agent, root));
            } else {
                issues.push(SourceIssue::in_file(root, what));
            }
        }
        Ok(meta) if meta.is_dir() => walk(root, 0, &mut units, issues),
        Ok(_) => issues.push(SourceIssue::in_file(
            root,
            "not a file or directory: skipped",
        )),
        Err(e) => issues.push(SourceIssue::in_file(root, format!("cannot read: {e}"))),
    }
    units.sort_by(|a, b| a.path.cmp(&b.path));
    units
}

fn discover_dir(
    dir: &Path,
    depth: usize,
    units: &mut Vec<SourceUnit>,
    issues: &mut Vec<SourceIssue>,
) {
    let entries = list_dir(dir, issues);
    let mut dbs: Vec<PathBuf> = entries
        .iter()
        .filter(|(_, kind)| *kind == EntryKind::File)
        .map(|(path, _)| path.clone())
        .filter(|path| is_opencode_db(path))
        .collect();
    let storage = dir.join("storage");
    let has_storage = entries
        .iter()
        .any(|(path, kind)| *kind == EntryKind::Dir && *path == storage)
        && is_storage_dir(&storage);
    if !dbs.is_empty() || has_storage {
        // `opencode.db` (the latest channel) is the unit's main file, other channels beside it.
        dbs.sort_by_key(|path| (file_name(path) != "opencode.db", path.clone()));
        let mut side_files = Vec::new();
        let main = match dbs.split_first() {
            Some((main, rest)) => {
                side_files.extend(db_side_files(main));
                for db in rest {
                    side_files.push(db.clone());
                    side_files.extend(db_side_files(db));
                }
                main.clone()
            }
            None => storage.clone(),
        };
        if has_storage {
            storage_files(&storage, &mut side_files, issues);
        }
        units.push(SourceUnit {
            agent: Agent::Opencode,
            path: main,
            side_files,
        });
        return;
    }
    if is_storage_dir(dir) {
        let mut side_files = Vec::new();
        storage_files(dir, &mut side_files, issues);
        units.push(SourceUnit {
            agent: Agent::Opencode,
            path: dir.to_owned(),
            side_files,
        });
        return;
    }
    if depth < MAX_DEPTH {
        for (path, kind) in entries {
            if kind == EntryKind::Dir {
                discover_dir(&path, depth + 1, units, issues);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    File,
    Dir,
}

/// A directory's regular files and directories, sorted; symlinks and others are left out.
pub(crate) fn list_dir(dir: &Path, issues: &mut Vec<SourceIssue>) -> Vec<(PathBuf, EntryKind)> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) => {
            issues.push(SourceIssue::in_file(dir, format!("cannot list: {e}")));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for entry in read.flatten() {
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_file() {
            out.push((entry.path(), EntryKind::File));
        } else if file_type.is_dir() {
            out.push((entry.path(), EntryKind::Dir));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub(crate) fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

pub(crate) fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension().is_some_and(|e| e == ext)
}

/// `opencode.db` or `opencode-<channel>.db`.
fn is_opencode_db(path: &Path) -> bool {
    let name = file_name(path);
    name.starts_with("opencode") && name.ends_with(".db")
}

/// A directory holding opencode's `session/` or `message/` tree.
fn is_storage_dir(dir: &Path) -> bool {
    ["session", "message"]
        .iter()
        .any(|sub| fs::symlink_metadata(dir.join(sub)).is_ok_and(|meta| meta.is_dir()))
}

/// A database's unit: the file and the `-wal`/`-shm` beside it.
pub(crate) fn db_unit(agent: Agent, path: &Path) -> SourceUnit {
    SourceUnit {
        agent,
        path: path.to_owned(),
        side_files: db_side_files(path),
    }
}

/// The `-wal` and `-shm` files beside a database that exist now.
pub(crate) fn db_side_files(db: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .filter(|path| fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file()))
        .collect()
}

/// Every `.json` file below `storage/{session,message,part}`, sorted.
fn storage_files(storage: &Path, out: &mut Vec<PathBuf>, issues: &mut Vec<SourceIssue>) {
    for kind in ["session", "message", "part"] {
        let dir = storage.join(kind);
        if fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir()) {
            json_files_below(&dir, 0, out, issues);
        }
    }
}

fn json_files_below(
    dir: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
    issues: &mut Vec<SourceIssue>,
) {
    for (path, kind) in list_dir(dir, issues) {
        match kind {
            EntryKind::File if has_extension(&path, "json") => out.push(path),
            EntryKind::Dir if depth < 3 => json_files_below(&path, depth + 1, out, issues),
            _ => {}
        }
    }
}

/// The sessions of one unit.
pub fn read(unit: &SourceUnit) -> Result<Read, ReadError> {
    let mut issues = Vec::new();
    let mut collected = Collected::default();
    let main = unit.path.as_path();
    let is_dir = fs::metadata(main)
        .map_err(|e| ReadError::io(main, e))?
        .is_dir();
    if !is_dir && has_extension(main, "json") && unit.side_files.is_empty() {
        read_export(main, &mut collected, &mut issues)?;
    } else {
        let has_json = unit.side_files.iter().any(|p| has_extension(p, "json"));
        if !is_dir {
            match read_db(main, &mut collected, &mut issues) {
                Ok(()) => {}
                // The JSON tree still reads when the database cannot be.
                Err(e) if has_json => issues.push(SourceIssue::in_file(
                    main,
                    format!("database skipped, the storage/ tree beside it read alone: {e}"),
                )),
                Err(e) => return Err(e),
            }
        }
        for db in unit
            .side_files
            .iter()
            .filter(|path| has_extension(path, "db"))
        {
            if let Err(e) = read_db(db, &mut collected, &mut issues) {
                issues.push(SourceIssue::in_file(db, format!("database skipped: {e}")));
            }
        }
        let storage = if is_dir {
            main.to_owned()
        } else {
            main.parent().unwrap_or(Path::new(".")).join("storage")
        };
        for file in unit
            .side_files
            .iter()
            .filter(|path| has_extension(path, "json"))
        {
            if let Ok(relative) = file.strip_prefix(&storage) {
                read_storage_file(file, relative, &mut collected, &mut issues);
            }
        }
    }
    let sessions = collected.into_sessions(main, &mut issues);
    Ok(Read { sessions, issues })
}

/// A session's record: its `info` JSON (from a file, or rebuilt from the database's columns).
#[derive(Debug)]
struct RawSession {
    id: String,
    info: Value,
}

/// A message's record; `data` is its JSON (the id columns removed, in the database).
#[derive(Debug)]
struct RawMessage {
    id: String,
    session_id: String,
    time_created: i64,
    data: Value,
}

/// A part's record.
#[derive(Debug)]
struct RawPart {
    id: String,
    message_id: String,
    data: Value,
}

/// Records gathered from every source of a unit, the first of each id kept: databases are read
/// before the JSON files, so the database wins.
#[derive(Debug, Default)]
struct Collected {
    sessions: BTreeMap<String, RawSession>,
    messages: HashMap<String, RawMessage>,
    parts: HashMap<String, RawPart>,
}

impl Collected {
    fn add_session(&mut self, session: RawSession) {
        self.sessions.entry(session.id.clone()).or_insert(session);
    }

    fn add_message(&mut self, message: RawMessage) {
        self.messages.entry(message.id.clone()).or_insert(message);
    }

    fn add_part(&mut self, part: RawPart) {
        self.parts.entry(part.id.clone()).or_insert(part);
    }

    fn into_sessions(self, source: &Path, issues: &mut Vec<SourceIssue>) -> Vec<ImportedSession> {
        let Collected {
            mut sessions,
            messages,
            parts,
        } = self;
        let mut parts_of: HashMap<String, Vec<RawPart>> = HashMap::new();
        for part in parts.into_values() {
            parts_of
                .entry(part.message_id.clone())
                .or_default()
                .push(part);
        }
        for list in parts_of.values_mut() {
            list.sort_by(|a, b| a.id.cmp(&b.id));
        }
        let mut messages_of: HashMap<String, Vec<RawMessage>> = HashMap::new();
        for message in messages.into_values() {
            messages_of
                .entry(message.session_id.clone())
                .or_default()
                .push(message);
        }
        for (session_id, list) in &mut messages_of {
            list.sort_by(|a, b| (a.time_created, &a.id).cmp(&(b.time_created, &b.id)));
            if !sessions.contains_key(session_id) {
                issues.push(SourceIssue::in_file(
                    source,
                    format!(
                        "messages of session {session_id} without its session record: imported \
                         without a title or project"
                    ),
                ));
                sessions.insert(
                    session_id.clone(),
                    RawSession {
                        id: session_id.clone(),
                        info: Value::Null,
                    },
                );
            }
        }
        let mut unknown = Unknown::default();
        let mut out: Vec<ImportedSession> = sessions
            .into_values()
            .map(|raw| {
                let messages = messages_of.remove(&raw.id).unwrap_or_default();
                build_session(source, &raw, &messages, &mut parts_of, &mut unknown)
            })
            .collect();
        out.sort_by(|a, b| (a.created_ms, &a.source_id).cmp(&(b.created_ms, &b.source_id)));
        for (what, first) in unknown.seen {
            issues.push(SourceIssue::in_file(
                source,
                format!("unknown {what} skipped (first in message {first})"),
            ));
        }
        out
    }
}

/// Unknown roles and part types met, each reported once per unit with the first message that
/// had it.
#[derive(Debug, Default)]
struct Unknown {
    seen: BTreeMap<String, String>,
}

impl Unknown {
    fn note(&mut self, what: String, message_id: &str) {
        self.seen
            .entry(what)
            .or_insert_with(|| message_id.to_owned());
    }
}

/// Part types opencode writes (message-v2.ts); others are reported.
const KNOWN_PARTS: [&str; 12] = [
    "text",
    "reasoning",
    "tool",
    "file",
    "step-start",
    "step-finish",
    "snapshot",
    "patch",
    "agent",
    "subtask",
    "retry",
    "compaction",
];

/// Opens a database read-only: a `file:…?mode=ro` URI, never creating or writing anything.
///
/// A WAL database whose directory we cannot write (a read-only copy, another user's files)
/// cannot be opened so when its `-shm` is missing, since SQLite would have to create it; with
/// no `-wal` beside it either, every commit is in the main file, which is then read as
/// `immutable=1`.
pub(crate) fn open_read_only(path: &Path) -> Result<Connection, ReadError> {
    match open_uri(path, "") {
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen) => {
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            let wal_is_empty =
                fs::symlink_metadata(PathBuf::from(wal)).map_or(true, |meta| meta.len() == 0);
            if path.is_file() && wal_is_empty {
                open_uri(path, "&immutable=1").map_err(|e| db_error(path, &e))
            } else {
                Err(db_error(path, &e))
            }
        }
        other => other.map_err(|e| db_error(path, &e)),
    }
}

/// Opens `path` through its read-only URI (plus `extra` parameters) and checks it is readable.
fn open_uri(path: &Path, extra: &str) -> Result<Connection, rusqlite::Error> {
    let uri = format!("{}{extra}", sqlite_uri(path));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&uri, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
        row.get::<_, i64>(0)
    })?;
    Ok(conn)
}

/// `file:<percent-encoded path>?mode=ro`.
fn sqlite_uri(path: &Path) -> String {
    use std::fmt::Write as _;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/._~-".contains(byte) {
            uri.push(char::from(*byte));
        } else {
            let _ = write!(uri, "%{byte:02X}");
        }
    }
    uri.push_str("?mode=ro");
    uri
}

pub(crate) fn db_error(path: &Path, e: &rusqlite::Error) -> ReadError {
    ReadError::Database {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// The columns a table has (empty when it does not exist).
pub(crate) fn table_columns(
    conn: &Connection,
    path: &Path,
    table: &str,
) -> Result<Vec<String>, ReadError> {
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .map_err(|e| db_error(path, &e))?;
    let rows = stmt
        .query_map([table], |row| row.get::<_, String>(0))
        .map_err(|e| db_error(path, &e))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| db_error(path, &e))
}

/// A `SELECT` of `wanted` columns from `table`, `NULL` for those it lacks.
pub(crate) fn select_columns(table: &str, have: &[String], wanted: &[&str], tail: &str) -> String {
    let list: Vec<String> = wanted
        .iter()
        .map(|col| {
            if have.iter().any(|c| c == col) {
                format!("\"{col}\"")
            } else {
                "NULL".to_owned()
            }
        })
        .collect();
    format!("SELECT {} FROM \"{table}\" {tail}", list.join(", "))
}

/// A column read as text whatever SQLite holds (numbers printed).
pub(crate) fn col_text(row: &rusqlite::Row<'_>, index: usize) -> Option<String> {
    match row.get_ref(index).ok()? {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            Some(String::from_utf8_lossy(bytes).into_owned())
        }
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(x) => Some(x.to_string()),
        ValueRef::Null => None,
    }
}

/// A column read as an integer whatever SQLite holds (text parsed, reals truncated).
pub(crate) fn col_int(row: &rusqlite::Row<'_>, index: usize) -> Option<i64> {
    match row.get_ref(index).ok()? {
        ValueRef::Integer(n) => Some(n),
        ValueRef::Real(x) => Some(x as i64),
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn parse_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    freecode_core::json::from_slice_lossy::<Value>(bytes).map(|lossy| lossy.value)
}

fn read_db(
    path: &Path,
    out: &mut Collected,
    issues: &mut Vec<SourceIssue>,
) -> Result<(), ReadError> {
    let conn = open_read_only(path)?;
    let session_cols = table_columns(&conn, path, "session")?;
    let message_cols = table_columns(&conn, path, "message")?;
    let part_cols = table_columns(&conn, path, "part")?;
    for (table, cols, needed) in [
        ("session", &session_cols, &["id"][..]),
        ("message", &message_cols, &["id", "session_id", "data"][..]),
        ("part", &part_cols, &["id", "message_id", "data"][..]),
    ] {
        if let Some(missing) = needed.iter().find(|col| !cols.iter().any(|c| c == *col)) {
            return Err(ReadError::NotThisAgent {
                path: path.to_owned(),
                agent: Agent::Opencode,
                message: format!("no column {table}.{missing}"),
            });
        }
    }
    let sql = select_columns(
        "session",
        &session_cols,
        &[
            "id",
            "parent_id",
            "directory",
            "title",
            "version",
            "time_created",
            "time_updated",
            "slug",
        ],
        "",
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| db_error(path, &e))?;
    let mut rows = stmt.query([]).map_err(|e| db_error(path, &e))?;
    while let Some(row) = rows.next().map_err(|e| db_error(path, &e))? {
        let Some(id) = col_text(row, 0) else { continue };
        let mut info = serde_json::Map::new();
        info.insert("id".into(), Value::String(id.clone()));
        for (index, key) in [
            (1, "parentID"),
            (2, "directory"),
            (3, "title"),
            (4, "version"),
            (7, "slug"),
        ] {
            if let Some(text) = col_text(row, index) {
                info.insert(key.into(), Value::String(text));
            }
        }
        let mut time = serde_json::Map::new();
        for (index, key) in [(5, "created"), (6, "updated")] {
            if let Some(ms) = col_int(row, index) {
                time.insert(key.into(), Value::from(ms));
            }
        }
        info.insert("time".into(), Value::Object(time));
        out.add_session(RawSession {
            id,
            info: Value::Object(info),
        });
    }
    drop(rows);
    drop(stmt);

    let sql = select_columns(
        "message",
        &message_cols,
        &["id", "session_id", "time_created", "data"],
        "",
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| db_error(path, &e))?;
    let mut rows = stmt.query([]).map_err(|e| db_error(path, &e))?;
    while let Some(row) = rows.next().map_err(|e| db_error(path, &e))? {
        let (Some(id), Some(session_id)) = (col_text(row, 0), col_text(row, 1)) else {
            continue;
        };
        let data = match row_json(row, 3) {
            Ok(data) => data,
            Err(e) => {
                issues.push(SourceIssue::in_file(
                    path,
                    format!("message {id}: data is not JSON, skipped: {e}"),
                ));
                continue;
            }
        };
        let time_created = col_int(row, 2)
            .or_else(|| data.pointer("/time/created").and_then(Value::as_i64))
            .unwrap_or(0);
        out.add_message(RawMessage {
            id,
            session_id,
            time_created,
            data,
        });
    }
    drop(rows);
    drop(stmt);

    let sql = select_columns("part", &part_cols, &["id", "message_id", "data"], "");
    let mut stmt = conn.prepare(&sql).map_err(|e| db_error(path, &e))?;
    let mut rows = stmt.query([]).map_err(|e| db_error(path, &e))?;
    while let Some(row) = rows.next().map_err(|e| db_error(path, &e))? {
        let (Some(id), Some(message_id)) = (col_text(row, 0), col_text(row, 1)) else {
            continue;
        };
        match row_json(row, 2) {
            Ok(data) => out.add_part(RawPart {
                id,
                message_id,
                data,
            }),
            Err(e) => issues.push(SourceIssue::in_file(
                path,
                format!("part {id}: data is not JSON, skipped: {e}"),
            )),
        }
    }
    Ok(())
}

fn row_json(row: &rusqlite::Row<'_>, index: usize) -> Result<Value, String> {
    match row.get_ref(index).map_err(|e| e.to_string())? {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            parse_value(bytes).map_err(|e| e.to_string())
        }
        _ => Err("not text".to_owned()),
    }
}

/// Reads a whole JSON file (bounded).
fn read_json_file(path: &Path) -> Result<Value, String> {
    let len = fs::metadata(path).map_err(|e| e.to_string())?.len();
    if len > MAX_JSON_FILE {
        return Err(format!("{len} bytes, over the {MAX_JSON_FILE}-byte limit"));
    }
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    parse_value(bytes).map_err(|e| format!("not JSON: {e}"))
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn stem(path: &Path) -> Option<String> {
    path.file_stem().and_then(|s| s.to_str()).map(str::to_owned)
}

/// The name of a file's directory, unless it is the kind's own directory (`part/`, `message/`).
fn parent_name(path: &Path, kind: &str) -> Option<String> {
    let name = path.parent()?.file_name()?.to_str()?;
    (name != kind).then(|| name.to_owned())
}

/// One file of the storage tree, by where it sits: `session/…`, `message/<ses>/…`,
/// `part/<msg>/…` (ids from the file's content, else from its names).
fn read_storage_file(
    path: &Path,
    relative: &Path,
    out: &mut Collected,
    issues: &mut Vec<SourceIssue>,
) {
    let Some(kind) = relative
        .components()
        .next()
        .and_then(|c| c.as_os_str().to_str())
    else {
        return;
    };
    let data = match read_json_file(path) {
        Ok(data) if data.is_object() => data,
        Ok(_) => {
            issues.push(SourceIssue::in_file(path, "not a JSON object, skipped"));
            return;
        }
        Err(e) => {
            issues.push(SourceIssue::in_file(path, format!("skipped: {e}")));
            return;
        }
    };
    let id = str_of(&data, "id")
        .map(str::to_owned)
        .or_else(|| stem(path));
    let Some(id) = id else { return };
    match kind {
        "session" => out.add_session(RawSession { id, info: data }),
        "message" => {
            let session_id = str_of(&data, "sessionID")
                .map(str::to_owned)
                .or_else(|| parent_name(path, "message"));
            let Some(session_id) = session_id else {
                issues.push(SourceIssue::in_file(
                    path,
                    "message without a session id, skipped",
                ));
                return;
            };
            let time_created = data
                .pointer("/time/created")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            out.add_message(RawMessage {
                id,
                session_id,
                time_created,
                data,
            });
        }
        "part" => {
            let message_id = str_of(&data, "messageID")
                .map(str::to_owned)
                .or_else(|| parent_name(path, "part"));
            let Some(message_id) = message_id else {
                issues.push(SourceIssue::in_file(
                    path,
                    "part without a message id, skipped",
                ));
                return;
            };
            out.add_part(RawPart {
                id,
                message_id,
                data,
            });
        }
        _ => {}
    }
}

/// `opencode export` output: `{info, messages: [{info, parts}]}`.
fn read_export(
    path: &Path,
    out: &mut Collected,
    issues: &mut Vec<SourceIssue>,
) -> Result<(), ReadError> {
    let data = read_json_file(path).map_err(|message| ReadError::NotThisAgent {
        path: path.to_owned(),
        agent: Agent::Opencode,
        message,
    })?;
    let (Some(info), Some(messages)) = (
        data.get("info").filter(|info| str_of(info, "id").is_some()),
        data.get("messages").and_then(Value::as_array),
    ) else {
        return Err(ReadError::NotThisAgent {
            path: path.to_owned(),
            agent: Agent::Opencode,
            message: "not an opencode export: no `info.id` and `messages`".to_owned(),
        });
    };
    let session_id = str_of(info, "id").unwrap_or_default().to_owned();
    out.add_session(RawSession {
        id: session_id.clone(),
        info: info.clone(),
    });
    for (index, entry) in messages.iter().enumerate() {
        let Some(message) = entry.get("info").filter(|m| str_of(m, "id").is_some()) else {
            issues.push(SourceIssue::in_file(
                path,
                format!("messages[{index}] has no `info.id`, skipped"),
            ));
            continue;
        };
        let id = str_of(message, "id").unwrap_or_default().to_owned();
        for (part_index, part) in entry
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let part_id = str_of(part, "id")
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{id}#{part_index:06}"));
            out.add_part(RawPart {
                id: part_id,
                message_id: id.clone(),
                data: part.clone(),
            });
        }
        out.add_message(RawMessage {
            id,
            session_id: str_of(message, "sessionID")
                .map(str::to_owned)
                .unwrap_or_else(|| session_id.clone()),
            time_created: message
                .pointer("/time/created")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            data: message.clone(),
        });
    }
    Ok(())
}

fn time_at(value: &Value, pointer: &str) -> Option<i64> {
    value.pointer(pointer).and_then(Value::as_i64)
}

/// A message's provider and model: `providerID`/`modelID`, or inside `model{}`.
fn provider_model(data: &Value) -> (Option<String>, Option<String>) {
    let model_obj = data.get("model").filter(|m| m.is_object());
    let provider = str_of(data, "providerID")
        .or_else(|| model_obj.and_then(|m| str_of(m, "providerID")))
        .map(str::to_owned);
    let model = str_of(data, "modelID")
        .or_else(|| model_obj.and_then(|m| str_of(m, "modelID")))
        .map(str::to_owned);
    (provider, model)
}

/// `tokens{total?, input, output, reasoning, cache{read, write}}` in our convention: opencode
/// keeps input and the cache counters disjoint, so our input is their sum; builds that write
/// `total` (AI SDK 6) also take reasoning out of `output`, so it is added back (ours is
/// inclusive), while older ones kept the SDK's inclusive output.
fn usage_of(tokens: &Value) -> Option<Usage> {
    let tokens = tokens.as_object()?;
    let count = |v: Option<&Value>| v.and_then(Value::as_u64);
    let input = count(tokens.get("input"));
    let output = count(tokens.get("output"));
    let cache = tokens.get("cache");
    let read = count(cache.and_then(|c| c.get("read")));
    let write = count(cache.and_then(|c| c.get("write")));
    let reasoning = count(tokens.get("reasoning"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let output_has_reasoning = !tokens.contains_key("total");
    let mut usage = Usage::new(
        input.unwrap_or(0) + read.unwrap_or(0) + write.unwrap_or(0),
        output.unwrap_or(0)
            + if output_has_reasoning {
                0
            } else {
                reasoning.unwrap_or(0)
            },
    );
    usage.cache_read_input_tokens = read;
    usage.cache_write_input_tokens = write;
    usage.reasoning_tokens = reasoning;
    Some(usage)
}

/// A tool part's text result: strings as they are, anything else as JSON.
fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// opencode's permission refusals: the user's (`RejectedError`, with or without feedback) and a
/// rule's (`DeniedError`, older and newer wording).
fn is_refusal(error: &str) -> bool {
    error.starts_with("The user rejected permission")
        || error.starts_with("The user has specified a rule which prevents")
        || error.starts_with("Permission denied by ruleset")
}

fn tool_call(part: &Value) -> ToolCall {
    let state = part.get("state").unwrap_or(&Value::Null);
    let status = str_of(state, "status").unwrap_or("");
    let (result, outcome) = match status {
        "completed" | "success" => (text_of(state.get("output")), ToolOutcome::Ok),
        "error" => {
            let error = text_of(state.get("error")).unwrap_or_default();
            if is_refusal(&error) {
                (Some(error.clone()), ToolOutcome::Denied(Some(error)))
            } else {
                (Some(error), ToolOutcome::Error)
            }
        }
        _ => (None, ToolOutcome::Missing),
    };
    ToolCall {
        call_id: str_of(part, "callID")
            .or_else(|| str_of(part, "id"))
            .unwrap_or_default()
            .to_owned(),
        name: str_of(part, "tool").unwrap_or("unknown").to_owned(),
        args: state.get("input").cloned().unwrap_or(Value::Null),
        result,
        outcome,
        started_ms: time_at(state, "/time/start"),
        finished_ms: match status {
            "completed" | "success" | "error" => time_at(state, "/time/end"),
            _ => None,
        },
    }
}

/// A `file` part: an image inline, anything else named.
fn file_part(part: &Value) -> Part {
    let mime = str_of(part, "mime").unwrap_or("application/octet-stream");
    let url = str_of(part, "url").unwrap_or("");
    let name = str_of(part, "filename")
        .map(str::to_owned)
        .unwrap_or_else(|| {
            if url.starts_with("data:") {
                "attachment".to_owned()
            } else {
                url.to_owned()
            }
        });
    if mime.starts_with("image/")
        && let Some(rest) = url.strip_prefix("data:")
        && let Some((_, data)) = rest.split_once(";base64,")
    {
        return Part::image(data, mime, Some(name));
    }
    if url.starts_with("data:") || url.is_empty() {
        Part::text(format!("[file {name} ({mime})]"))
    } else {
        Part::text(format!("[file {name} ({mime}): {url}]"))
    }
}

/// An `error{name, data{message}}` or a retry's error as its text.
fn error_text(error: &Value) -> String {
    let message = error
        .pointer("/data/message")
        .and_then(Value::as_str)
        .or_else(|| str_of(error, "message"));
    let name = str_of(error, "name");
    match (name, message) {
        (Some(name), Some(message)) => format!("{name}: {message}"),
        (None, Some(message)) => message.to_owned(),
        (Some(name), None) => name.to_owned(),
        (None, None) => error.to_string(),
    }
}

fn is_text_kept(part: &Value) -> bool {
    part.get("ignored").and_then(Value::as_bool) != Some(true)
}

fn build_session(
    source: &Path,
    raw: &RawSession,
    messages: &[RawMessage],
    parts_of: &mut HashMap<String, Vec<RawPart>>,
    unknown: &mut Unknown,
) -> ImportedSession {
    let info = &raw.info;
    let mut session = ImportedSession::new(Agent::Opencode, raw.id.clone(), source);
    session.version = str_of(info, "version").map(str::to_owned);
    session.project_path = str_of(info, "directory").map(str::to_owned);
    session.title = str_of(info, "title").map(str::to_owned);
    session.created_ms = time_at(info, "/time/created");
    session.updated_ms = time_at(info, "/time/updated");
    session.parent = str_of(info, "parentID").map(|parent| ParentLink {
        source_id: parent.to_owned(),
        kind: ParentKind::Subagent,
    });
    // A compaction marker waiting for the `summary: true` message that carries its text.
    let mut pending_compaction: Option<Option<i64>> = None;
    // When the user's turn in progress started.
    let mut turn_started: Option<i64> = None;
    for message in messages {
        let data = &message.data;
        let parts = parts_of.remove(&message.id).unwrap_or_default();
        for part in &parts {
            let kind = str_of(&part.data, "type").unwrap_or("");
            if !KNOWN_PARTS.contains(&kind) {
                unknown.note(format!("part type {kind:?}"), &message.id);
            }
        }
        let at = time_at(data, "/time/created").or(Some(message.time_created));
        let role = str_of(data, "role").unwrap_or("");
        let is_summary = data.get("summary").and_then(Value::as_bool) == Some(true);
        if role == "assistant" && is_summary {
            let summary: Vec<&str> = parts
                .iter()
                .filter(|p| str_of(&p.data, "type") == Some("text") && is_text_kept(&p.data))
                .filter_map(|p| str_of(&p.data, "text"))
                .collect();
            pending_compaction = None;
            session.items.push(Item::Compaction(Compaction {
                at_ms: time_at(data, "/time/completed").or(at),
                summary: summary.join("\n"),
                before_tokens: None,
                after_tokens: None,
            }));
            continue;
        }
        if let Some(marker_at) = pending_compaction.take() {
            session.items.push(Item::Compaction(Compaction {
                at_ms: marker_at,
                summary: String::new(),
                before_tokens: None,
                after_tokens: None,
            }));
        }
        let compaction_marked = parts
            .iter()
            .any(|p| str_of(&p.data, "type") == Some("compaction"));
        match role {
            "user" => {
                let mut user_parts = Vec::new();
                for part in &parts {
                    let data = &part.data;
                    match str_of(data, "type").unwrap_or("") {
                        "text" if is_text_kept(data) => {
                            if let Some(text) = str_of(data, "text") {
                                user_parts.push(Part::text(text));
                            }
                        }
                        "file" => user_parts.push(file_part(data)),
                        "subtask" => {
                            if let Some(prompt) =
                                str_of(data, "prompt").or_else(|| str_of(data, "description"))
                            {
                                user_parts.push(Part::text(prompt));
                            }
                        }
                        _ => {}
                    }
                }
                let only_marks_compaction = compaction_marked
                    && parts.iter().all(|p| {
                        matches!(str_of(&p.data, "type"), Some("compaction"))
                            || p.data.get("synthetic").and_then(Value::as_bool) == Some(true)
                    });
                if only_marks_compaction {
                    pending_compaction = Some(at);
                    continue;
                }
                session.items.push(Item::User(UserTurn {
                    id: Some(message.id.clone()),
                    at_ms: at,
                    parts: user_parts,
                }));
                turn_started = at;
                if compaction_marked {
                    pending_compaction = Some(at);
                }
            }
            "assistant" => {
                let (provider, model) = provider_model(data);
                if provider.is_some() {
                    session.provider = provider;
                }
                if model.is_some() {
                    session.model = model.clone();
                }
                if session.project_path.is_none() {
                    session.project_path = data
                        .pointer("/path/cwd")
                        .and_then(Value::as_str)
                        .filter(|cwd| !cwd.is_empty())
                        .map(str::to_owned);
                }
                let mut content = Vec::new();
                let mut subagents = Vec::new();
                let mut first_token: Option<i64> = None;
                let mut last_end: Option<i64> = None;
                let mut step_usage: Option<Usage> = None;
                for part in &parts {
                    let data = &part.data;
                    if let Some(start) =
                        time_at(data, "/time/start").or_else(|| time_at(data, "/state/time/start"))
                    {
                        first_token = Some(first_token.map_or(start, |t| t.min(start)));
                    }
                    if let Some(end) =
                        time_at(data, "/time/end").or_else(|| time_at(data, "/state/time/end"))
                    {
                        last_end = Some(last_end.map_or(end, |t| t.max(end)));
                    }
                    match str_of(data, "type").unwrap_or("") {
                        "text" if is_text_kept(data) => {
                            if let Some(text) = str_of(data, "text") {
                                content.push(Content::Part(Part::text(text)));
                            }
                        }
                        "file" => content.push(Content::Part(file_part(data))),
                        "tool" => {
                            let call = tool_call(data);
                            if call.name == "task"
                                && let Some(child) = data
                                    .pointer("/state/metadata/sessionId")
                                    .and_then(Value::as_str)
                            {
                                let task = call
                                    .args
                                    .get("prompt")
                                    .or_else(|| call.args.get("description"))
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                subagents.push(SubagentRun {
                                    subagent_id: child.to_owned(),
                                    task: task.to_owned(),
                                    started_ms: call.started_ms,
                                    stopped_ms: call.finished_ms,
                                    result: call.result.clone(),
                                });
                            }
                            content.push(Content::Tool(call));
                        }
                        "step-finish" => {
                            if let Some(step) = data.get("tokens").and_then(usage_of) {
                                step_usage = Some(match step_usage {
                                    None => step,
                                    Some(sum) => add_usage(&sum, &step),
                                });
                            }
                        }
                        "retry" => {
                            let error = data.get("error").unwrap_or(&Value::Null);
                            session.items.push(Item::Error(ErrorNote {
                                at_ms: time_at(data, "/time/created").or(at),
                                message: format!(
                                    "retry {}: {}",
                                    data.get("attempt").and_then(Value::as_u64).unwrap_or(0),
                                    error_text(error)
                                ),
                                aborted: false,
                            }));
                        }
                        _ => {}
                    }
                }
                let completed = time_at(data, "/time/completed").or(last_end);
                session.items.push(Item::Response(Response {
                    id: Some(message.id.clone()),
                    model,
                    requested_ms: at,
                    first_token_ms: first_token,
                    completed_ms: completed,
                    content,
                    usage: data.get("tokens").and_then(usage_of).or(step_usage),
                }));
                let error = data.get("error").filter(|e| !e.is_null());
                let aborted =
                    error.is_some_and(|e| str_of(e, "name") == Some("MessageAbortedError"));
                if let Some(error) = error {
                    session.items.push(Item::Error(ErrorNote {
                        at_ms: completed.or(at),
                        message: error_text(error),
                        aborted,
                    }));
                }
                session
                    .items
                    .extend(subagents.into_iter().map(Item::Subagent));
                // The last step of a turn finishes with anything but `tool-calls` (opencode
                // loops while the model calls tools); an abort ends the turn too.
                let finish = str_of(data, "finish");
                if aborted || finish.is_some_and(|f| f != "tool-calls" && f != "unknown") {
                    let end = completed.or(at);
                    session.items.push(Item::TurnEnd(TurnEnd {
                        at_ms: end,
                        duration_ms: end.zip(turn_started).map(|(end, start)| end - start),
                        aborted: aborted.then(|| "MessageAbortedError".to_owned()),
                    }));
                    turn_started = None;
                }
                if compaction_marked {
                    pending_compaction = Some(completed.or(at));
                }
            }
            other => unknown.note(format!("message role {other:?}"), &message.id),
        }
    }
    if let Some(marker_at) = pending_compaction {
        session.items.push(Item::Compaction(Compaction {
            at_ms: marker_at,
            summary: String::new(),
            before_tokens: None,
            after_tokens: None,
        }));
    }
    session
}

fn add_usage(a: &Usage, b: &Usage) -> Usage {
    let sum = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    let mut usage = Usage::new(0, 0);
    usage.input_tokens = sum(a.input_tokens, b.input_tokens);
    usage.output_tokens = sum(a.output_tokens, b.output_tokens);
    usage.cache_read_input_tokens = sum(a.cache_read_input_tokens, b.cache_read_input_tokens);
    usage.cache_write_input_tokens = sum(a.cache_write_input_tokens, b.cache_write_input_tokens);
    usage.reasoning_tokens = sum(a.reasoning_tokens, b.reasoning_tokens);
    usage
}

#[cfg(test)]
mod tests;
