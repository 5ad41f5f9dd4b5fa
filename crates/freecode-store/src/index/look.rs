//! What changed since the index's last look, found without a `stat` per session: the cost of a
//! look is the cost of what changed, not of how many sessions the home holds.
//!
//! A look gathers the sessions that may have changed, and only those are checked (their
//! `meta.json` and logs stat'ed against the index):
//!
//! 1. **The change journal** (`state/changes.log`, [`crate::changes`]): every session our
//!    writers touched since the journal position the index recorded.
//! 2. **Directory mtimes**: `sessions/` and each project directory, against the mtimes recorded
//!    at the last look. A session made, moved or removed by anyone — the original included —
//!    changes its project directory's mtime; only a changed directory is listed again.
//! 3. **Recently changed sessions**: every session seen changed (or noted) in the last
//!    [`RECENT_WINDOW_MS`] is checked again at each look, at most [`RECENT_MAX`] of them. This
//!    catches a writer that is not ours appending to a session it keeps writing (the original
//!    rewrites `meta.json` and appends to the logs in place, which changes no directory).
//! 4. **Sessions skipped as damaged**, so that they are reported every time and taken in once
//!    mended.
//!
//! Everything else is checked by a **full check** (every session stat'ed, as every look did
//! before): on a schedule ([`FULL_CHECK_EVERY_MS`] after the last one), on request
//! ([`super::SessionIndex::check_everything`], `--fresh`), when the journal was replaced or is too
//! far ahead, and when more sessions changed than a look re-checks one by one. So a change a
//! writer that is not ours makes to a session that was quiet is seen at the latest at the next
//! scheduled full check; everything else at the next look.
//!
//! `list` checks metas only and `refresh` metas and logs: each keeps its own schedule, and a
//! session `list` saw change stays "recent" so that the next `refresh` reads its logs.
//!
//! **Racy mtimes.** A file system stamps a directory's mtime from a coarse clock, so a change
//! made in the same tick as the look that recorded the mtime would go unseen: an mtime less
//! than [`RACY_NS`] old is recorded as unknown, and that directory is listed again next time.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use freecode_core::SessionId;
use freecode_core::project_key::is_project_dir_name;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Found, Stamp, db_err};
use crate::changes;
use crate::error::{IoContext, Result};
use crate::session::META_FILE;

/// How long a session seen changed keeps being re-checked at every look.
pub(crate) const RECENT_WINDOW_MS: i64 = 10 * 60 * 1000;
/// At most this many recent sessions are re-checked one by one; more, and the look is a full
/// check.
pub(crate) const RECENT_MAX: usize = 256;
/// A full check is due this long after the last one (shorter than [`RECENT_WINDOW_MS`], so a
/// session noted by a `list` has its logs read by a `refresh` within the window or by a full
/// check).
pub(crate) const FULL_CHECK_EVERY_MS: i64 = 5 * 60 * 1000;
/// A full check that finds the journal past this size removes it (the next note starts a new
/// one).
const JOURNAL_ROTATE_BYTES: u64 = 4 << 20;
/// A journal further ahead than this is not read: a full check instead.
const JOURNAL_READ_MAX: u64 = 8 << 20;
/// At most this many damaged sessions are re-checked at each look.
const SKIPPED_MAX: i64 = 1024;
/// An mtime this close to now may be followed by a change with the same mtime (see the module
/// doc).
const RACY_NS: i64 = 2_000_000_000;

/// Directory names (`""`: `sessions/` itself) with the mtimes to record for them.
pub(crate) type DirStamps = Vec<(String, i64)>;

/// The keys of `idx_look`.
const FULL_LOGS_AT: &str = "fullLogsAtMs";
const FULL_METAS_AT: &str = "fullMetasAtMs";
/// The journal's identity and the position read to, kept apart for `refresh` and `list`: each
/// reads every note (a note of appended messages changes no meta, but `refresh` must see it).
fn journal_keys(logs: bool) -> (&'static str, &'static str) {
    if logs {
        ("journalInoLogs", "journalOffsetLogs")
    } else {
        ("journalInoMetas", "journalOffsetMetas")
    }
}

/// What a look decided.
pub(crate) enum Look {
    /// Check every session.
    Full(FullLook),
    /// Check these only.
    Partial(PartialLook),
}

/// A full check, and what to record once it is written.
pub(crate) struct FullLook {
    /// Why (for the debug log).
    pub why: &'static str,
    /// The journal's identity and the position the check covers.
    journal: (i64, i64),
    /// A `refresh`'s check (metas and logs), else a `list`'s.
    logs: bool,
}

/// The sessions that may have changed, and what to record once they are checked.
#[derive(Default)]
pub(crate) struct PartialLook {
    /// Sessions to check, with their meta's stamp.
    pub found: Vec<Found>,
    /// Indexed sessions gone from disk.
    pub gone: Vec<String>,
    /// Sessions noted in the journal: they stay recent.
    noted: Vec<(String, String)>,
    /// The journal's identity and the position read to.
    journal: (i64, i64),
    /// A `refresh`'s look, else a `list`'s.
    logs: bool,
    /// Directory mtimes to record (`""`: `sessions/` itself).
    dirs: Vec<(String, i64)>,
    /// Project directories gone.
    gone_dirs: Vec<String>,
    /// Whether anything is to be recorded besides what the check writes.
    moved: bool,
}

impl PartialLook {
    /// Whether the look itself has something to record (a journal read, a directory listed).
    pub(crate) fn has_news(&self) -> bool {
        self.moved
    }
}

/// What a check found, to be recorded with the look.
#[derive(Default)]
pub(crate) struct Seen {
    /// Sessions whose meta or logs changed (or new ones), with their project directory.
    pub changed: Vec<(String, String)>,
    /// Sessions checked (damaged ones among them are in `troubled`).
    pub checked: Vec<String>,
    /// Sessions with a damaged file, with their project directory.
    pub troubled: Vec<(String, String)>,
}

impl Seen {
    /// From the sessions checked and the problems the check reported.
    pub(crate) fn of(
        found: &[Found],
        changed: &HashSet<String>,
        problems: &[super::Problem],
    ) -> Self {
        let by_id: HashMap<&str, &str> = found
            .iter()
            .map(|f| (f.id.as_str(), f.project_dir.as_str()))
            .collect();
        let mut troubled = Vec::new();
        let mut seen = HashSet::new();
        for (path, _) in problems {
            // `sessions/<dir>/<id>/<file>` or `rollout/sessions/<id>/events.jsonl`.
            let id = path
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if let Some(dir) = by_id.get(id)
                && seen.insert(id)
            {
                troubled.push((id.to_owned(), (*dir).to_owned()));
            }
        }
        Self {
            changed: found
                .iter()
                .filter(|f| changed.contains(&f.id))
                .map(|f| (f.id.clone(), f.project_dir.clone()))
                .collect(),
            checked: found.iter().map(|f| f.id.clone()).collect(),
            troubled,
        }
    }
}

/// A directory's mtime, in nanoseconds; `None` when it is not there.
fn dir_mtime(path: &Path) -> Option<i64> {
    let m = fs::metadata(path).ok().filter(fs::Metadata::is_dir)?;
    Some(
        m.mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(m.mtime_nsec()),
    )
}

/// The mtime to record: unknown (0) when it is too recent to trust.
fn trusted(mtime: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    if mtime != MISSING && now.saturating_sub(mtime) < RACY_NS {
        0
    } else {
        mtime
    }
}

fn get(conn: &Connection, db: &Path, key: &str) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT value FROM idx_look WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
        .map_err(db_err(db))
}

fn set(conn: &Connection, db: &Path, key: &str, value: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO idx_look (key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = ?2",
    )
    .and_then(|mut s| s.execute(params![key, value]))
    .map(drop)
    .map_err(db_err(db))
}

/// The journal's inode and size; `(0, 0)` when there is none.
fn journal_stamp(path: &Path) -> (i64, i64) {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => (
            i64::try_from(m.ino()).unwrap_or(i64::MAX),
            i64::try_from(m.len()).unwrap_or(i64::MAX),
        ),
        _ => (0, 0),
    }
}

/// The project directories `sessions/` holds (names only: nothing is stat'ed).
pub(crate) fn project_dirs(sessions: &Path) -> Result<Vec<String>> {
    match fs::read_dir(sessions) {
        Ok(rd) => Ok(rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_project_dir_name(n))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).ctx("list", sessions),
    }
}

/// The session ids a project directory holds (names only: nothing is stat'ed).
fn session_names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| SessionId::new(n.as_str()).is_ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Ids of the indexed sessions in project directory `dir`.
fn indexed_in(conn: &Connection, db: &Path, dir: &str) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare_cached("SELECT id FROM idx_sessions WHERE projectDir = ?1")
        .map_err(db_err(db))?;
    let rows = stmt
        .query_map([dir], |r| r.get::<_, String>(0))
        .map_err(db_err(db))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err(db))
}

/// Decides what to check: everything, or the sessions that may have changed (see the module
/// doc). `logs`: the caller checks logs too (`refresh`), not only metas (`list`). Reads the
/// database in the caller's snapshot; writes nothing but may remove a journal being rotated.
pub(crate) fn look(
    conn: &Connection,
    db: &Path,
    home: &crate::home::Home,
    logs: bool,
    force: bool,
) -> Result<Look> {
    let journal_path = changes::journal_path(home);
    let now = crate::now_ms();
    let full_at = get(conn, db, if logs { FULL_LOGS_AT } else { FULL_METAS_AT })?;
    let full = |why: &'static str| -> Look {
        let mut journal = journal_stamp(&journal_path);
        if u64::try_from(journal.1).unwrap_or(0) > JOURNAL_ROTATE_BYTES
            && crate::fsutil::remove_file(&journal_path).is_ok()
        {
            // The check that follows sees every change noted there (and any noted in it
            // after this): the next note starts a new journal, read from its start.
            journal = (0, 0);
        }
        Look::Full(FullLook { why, journal, logs })
    };
    if force {
        return Ok(full("asked for"));
    }
    let Some(full_at) = full_at else {
        return Ok(full("first look"));
    };
    if now.saturating_sub(full_at) > FULL_CHECK_EVERY_MS || full_at > now {
        return Ok(full("scheduled"));
    }
    let mut p = PartialLook {
        logs,
        ..PartialLook::default()
    };
    let (ino_key, offset_key) = journal_keys(logs);

    // 1. The journal.
    let (ino, size) = journal_stamp(&journal_path);
    let seen_ino = get(conn, db, ino_key)?.unwrap_or(0);
    let seen_offset = get(conn, db, offset_key)?.unwrap_or(0);
    let mut noted: Vec<(String, Option<String>)> = Vec::new();
    if ino == 0 {
        if seen_ino != 0 {
            return Ok(full("the change journal is gone"));
        }
        p.journal = (0, 0);
    } else {
        let from = if ino == seen_ino {
            seen_offset
        } else if seen_ino == 0 {
            0
        } else {
            return Ok(full("the change journal was replaced"));
        };
        if size < from {
            return Ok(full("the change journal shrank"));
        }
        if u64::try_from(size - from).unwrap_or(u64::MAX) > JOURNAL_READ_MAX {
            return Ok(full("the change journal is far ahead"));
        }
        let mut to = from;
        if size > from {
            let mut buf = Vec::new();
            let read = crate::fsutil::open_read(&journal_path).and_then(|mut f| {
                f.seek(SeekFrom::Start(u64::try_from(from).unwrap_or(0)))?;
                f.take(u64::try_from(size - from).unwrap_or(0))
                    .read_to_end(&mut buf)
            });
            if read.is_err() {
                return Ok(full("the change journal cannot be read"));
            }
            // Whole lines only: a note being written is read next time.
            let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            for line in buf[..whole].split(|&b| b == b'\n') {
                if let Some(note) = changes::parse_line(line) {
                    noted.push(note);
                }
            }
            to = from + i64::try_from(whole).unwrap_or(0);
        }
        p.journal = (ino, to);
        p.moved |= (ino, to) != (seen_ino, seen_offset);
    }

    // Candidates: id → the project directories it may be in.
    let mut cands: HashMap<String, Vec<String>> = HashMap::new();
    let add = |cands: &mut HashMap<String, Vec<String>>, id: String, dir: String| {
        let dirs = cands.entry(id).or_default();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    };
    let indexed_dir = |id: &str| -> Result<Option<String>> {
        conn.prepare_cached("SELECT projectDir FROM idx_sessions WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
            .map_err(db_err(db))
    };
    for (id, dir) in noted {
        let known = indexed_dir(&id)?;
        // A rollout log names no directory: its session's, when the session is indexed.
        let Some(dir) = dir.or_else(|| known.clone()) else {
            continue;
        };
        // Moved: it may be in either.
        if let Some(known) = known.filter(|k| *k != dir) {
            add(&mut cands, id.clone(), known);
        }
        p.noted.push((id.clone(), dir.clone()));
        add(&mut cands, id, dir);
    }

    // 2. Directory mtimes.
    let sessions = home.sessions_dir();
    let known_dirs: HashMap<String, i64> = {
        let mut stmt = conn
            .prepare_cached("SELECT name, mtimeNs FROM idx_dirs")
            .map_err(db_err(db))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db_err(db))?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err(db))?
    };
    let root_now = mtime_of(&sessions);
    let mut listed: Vec<(String, i64)> = Vec::new();
    let project_list: Vec<String> =
        if known_dirs.get("").copied() == Some(root_now) && root_now != 0 {
            known_dirs
                .keys()
                .filter(|k| !k.is_empty())
                .cloned()
                .collect()
        } else {
            let on_disk = project_dirs(&sessions)?;
            let set: HashSet<&String> = on_disk.iter().collect();
            for gone in known_dirs
                .keys()
                .filter(|k| !k.is_empty() && !set.contains(k))
            {
                p.gone_dirs.push(gone.clone());
            }
            p.dirs.push((String::new(), trusted(root_now)));
            p.moved = true;
            on_disk
        };
    for dir in project_list {
        let path = sessions.join(&dir);
        match dir_mtime(&path) {
            None => p.gone_dirs.push(dir),
            Some(m) if known_dirs.get(&dir).copied() == Some(m) && m != 0 => {}
            Some(m) => listed.push((dir, m)),
        }
    }
    let mut gone: HashSet<String> = HashSet::new();
    for dir in &p.gone_dirs {
        gone.extend(indexed_in(conn, db, dir)?);
        p.moved = true;
    }
    let mut found: HashMap<String, Found> = HashMap::new();
    for (dir, mtime) in listed {
        let path = sessions.join(&dir);
        let names = session_names(&path);
        let indexed: HashSet<String> = indexed_in(conn, db, &dir)?.into_iter().collect();
        let on_disk: HashSet<&String> = names.iter().collect();
        gone.extend(indexed.iter().filter(|id| !on_disk.contains(id)).cloned());
        let mut complete = true;
        for name in names.iter().filter(|n| !indexed.contains(*n)) {
            let sdir = path.join(name);
            match Stamp::of(&sdir.join(META_FILE)) {
                Some(meta) => {
                    found.insert(
                        name.clone(),
                        Found {
                            id: name.clone(),
                            project_dir: dir.clone(),
                            dir: sdir,
                            meta,
                        },
                    );
                }
                // Being made (its meta comes last): listed again next time.
                None => complete = false,
            }
        }
        p.dirs
            .push((dir, if complete { trusted(mtime) } else { 0 }));
        p.moved = true;
    }

    // 3. Recent sessions, 4. damaged ones.
    {
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, projectDir FROM idx_recent WHERE atMs >= ?1 ORDER BY atMs DESC LIMIT ?2",
            )
            .map_err(db_err(db))?;
        let rows = stmt
            .query_map(
                params![
                    now - RECENT_WINDOW_MS,
                    i64::try_from(RECENT_MAX + 1).unwrap_or(i64::MAX)
                ],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .map_err(db_err(db))?;
        for row in rows {
            let (id, dir) = row.map_err(db_err(db))?;
            add(&mut cands, id, dir);
        }
        let mut stmt = conn
            .prepare_cached("SELECT id, projectDir FROM idx_skipped LIMIT ?1")
            .map_err(db_err(db))?;
        let rows = stmt
            .query_map([SKIPPED_MAX], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(db_err(db))?;
        for row in rows {
            let (id, dir) = row.map_err(db_err(db))?;
            add(&mut cands, id, dir);
        }
    }
    if cands.len() + found.len() > RECENT_MAX + usize::try_from(SKIPPED_MAX).unwrap_or(0) {
        return Ok(full("many sessions changed"));
    }
    for (id, dirs) in cands {
        if found.contains_key(&id) {
            continue;
        }
        let hit = dirs.iter().find_map(|dir| {
            if !is_project_dir_name(dir) || SessionId::new(id.as_str()).is_err() {
                return None;
            }
            let sdir = sessions.join(dir).join(&id);
            Stamp::of(&sdir.join(META_FILE)).map(|meta| Found {
                id: id.clone(),
                project_dir: dir.clone(),
                dir: sdir,
                meta,
            })
        });
        match hit {
            Some(f) => {
                found.insert(id, f);
            }
            None => {
                gone.insert(id);
            }
        }
    }
    gone.retain(|id| !found.contains_key(id));
    // Only indexed sessions can go.
    let mut gone_indexed = Vec::new();
    for id in gone {
        if indexed_dir(&id)?.is_some() {
            gone_indexed.push(id);
        }
    }
    p.gone = gone_indexed;
    p.found = found.into_values().collect();
    Ok(Look::Partial(p))
}

/// Records a full check: its journal position, the directories' mtimes (replacing all), the
/// sessions it found changed as recent, the damaged ones. `logs`: a `refresh`'s check (metas
/// and logs), else a `list`'s (metas only).
pub(crate) fn save_full(
    conn: &Connection,
    db: &Path,
    look: &FullLook,
    dirs: &[(String, i64)],
    seen: &Seen,
    started_ms: i64,
) -> Result<()> {
    let logs = look.logs;
    tracing::debug!(why = look.why, logs, "index: full check");
    set(conn, db, FULL_METAS_AT, started_ms)?;
    if logs {
        set(conn, db, FULL_LOGS_AT, started_ms)?;
        // Every session's logs were checked: what is recent now is what changed.
        conn.execute("DELETE FROM idx_recent", [])
            .map_err(db_err(db))?;
    }
    save_journal(conn, db, look.journal, logs, true)?;
    if logs {
        // It checked every meta too.
        save_journal(conn, db, look.journal, false, true)?;
    }
    conn.execute("DELETE FROM idx_dirs", [])
        .map_err(db_err(db))?;
    for (name, m) in dirs {
        put_dir(conn, db, name, *m)?;
    }
    conn.execute("DELETE FROM idx_skipped", [])
        .map_err(db_err(db))?;
    save_seen(conn, db, &[], seen, logs)
}

/// Records a partial look and what its check found.
pub(crate) fn save_partial(
    conn: &Connection,
    db: &Path,
    look: &PartialLook,
    seen: &Seen,
) -> Result<()> {
    save_journal(conn, db, look.journal, look.logs, false)?;
    for (name, m) in &look.dirs {
        put_dir(conn, db, name, *m)?;
    }
    for name in &look.gone_dirs {
        conn.execute("DELETE FROM idx_dirs WHERE name = ?1", [name])
            .map_err(db_err(db))?;
    }
    for id in &look.gone {
        conn.execute("DELETE FROM idx_recent WHERE id = ?1", [id])
            .map_err(db_err(db))?;
        conn.execute("DELETE FROM idx_skipped WHERE id = ?1", [id])
            .map_err(db_err(db))?;
    }
    save_seen(conn, db, &look.noted, seen, look.logs)
}

fn put_dir(conn: &Connection, db: &Path, name: &str, mtime: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO idx_dirs (name, mtimeNs) VALUES (?1, ?2)
         ON CONFLICT(name) DO UPDATE SET mtimeNs = ?2",
    )
    .and_then(|mut s| s.execute(params![name, mtime]))
    .map(drop)
    .map_err(db_err(db))
}

/// Records the journal position read to, unless another process recorded one further on in
/// the same journal (`full`: this check covers everything before its position whatever was
/// recorded).
fn save_journal(
    conn: &Connection,
    db: &Path,
    (ino, offset): (i64, i64),
    logs: bool,
    full: bool,
) -> Result<()> {
    let (ino_key, offset_key) = journal_keys(logs);
    let seen_ino = get(conn, db, ino_key)?.unwrap_or(0);
    let seen_offset = get(conn, db, offset_key)?.unwrap_or(0);
    if !full && ino == seen_ino && offset <= seen_offset {
        return Ok(());
    }
    if full && ino != 0 && ino == seen_ino && offset < seen_offset {
        return Ok(());
    }
    set(conn, db, ino_key, ino)?;
    set(conn, db, offset_key, offset)
}

/// Records the sessions seen changed (and `noted`) as recent and the damaged ones as skipped.
/// `logs`: every one of them had its logs checked too (a `refresh`); otherwise (a `list`) the
/// recent ones must have their logs read by the next `refresh`, so a recent set too large to keep
/// makes that one a full check.
fn save_seen(
    conn: &Connection,
    db: &Path,
    noted: &[(String, String)],
    seen: &Seen,
    logs: bool,
) -> Result<()> {
    let now = crate::now_ms();
    {
        let mut put = conn
            .prepare_cached(
                "INSERT INTO idx_recent (id, projectDir, atMs) VALUES (?1, ?2, ?3)
                 ON CONFLICT(id) DO UPDATE SET projectDir = ?2, atMs = ?3",
            )
            .map_err(db_err(db))?;
        for (id, dir) in noted.iter().chain(&seen.changed) {
            put.execute(params![id, dir, now]).map_err(db_err(db))?;
        }
        let mut clear = conn
            .prepare_cached("DELETE FROM idx_skipped WHERE id = ?1")
            .map_err(db_err(db))?;
        for id in &seen.checked {
            clear.execute([id]).map_err(db_err(db))?;
        }
        let mut skip = conn
            .prepare_cached(
                "INSERT INTO idx_skipped (id, projectDir) VALUES (?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET projectDir = ?2",
            )
            .map_err(db_err(db))?;
        for (id, dir) in &seen.troubled {
            skip.execute(params![id, dir]).map_err(db_err(db))?;
        }
    }
    conn.execute(
        "DELETE FROM idx_recent WHERE atMs < ?1",
        [now - RECENT_WINDOW_MS],
    )
    .map_err(db_err(db))?;
    // Keep the newest only: more would make every look a full check.
    let count: i64 = conn
        .query_row("SELECT COUNT(*) FROM idx_recent", [], |r| r.get(0))
        .map_err(db_err(db))?;
    if !logs && usize::try_from(count).unwrap_or(usize::MAX) > RECENT_MAX {
        set(conn, db, FULL_LOGS_AT, 0)?;
    }
    conn.execute(
        "DELETE FROM idx_recent WHERE id NOT IN
           (SELECT id FROM idx_recent ORDER BY atMs DESC LIMIT ?1)",
        [i64::try_from(RECENT_MAX).unwrap_or(i64::MAX)],
    )
    .map_err(db_err(db))?;
    Ok(())
}

/// A directory's mtime, taken before it is listed: [`MISSING`] when it is not there (stable, unlike
/// 0, which is recorded for an mtime too recent to trust).
pub(crate) fn mtime_of(path: &Path) -> i64 {
    dir_mtime(path).unwrap_or(MISSING)
}

/// The mtime recorded for a directory that is not there.
const MISSING: i64 = -1;

/// The mtime to record for a directory a full check listed.
pub(crate) fn to_record(mtime: i64) -> i64 {
    trusted(mtime)
}
