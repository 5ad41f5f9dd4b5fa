//! Deriving index rows from the files: messages (full-text), the thread store's threads, turns
//! and tool calls, and rollout spans — each log read from its watermark.

use std::io::{BufReader, Seek, SeekFrom};

use freecode_core::compaction::is_user_turn;
use freecode_core::message::{PartType, Role};
use freecode_core::rollout::{Event, EventKind, RawEvent};
use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};
use rusqlite::{Connection, Transaction, params};

use crate::error::StoreError;
use crate::home::Home;

use super::{Found, Problem, SessionIndex, Stamp, db_err};
use crate::error::{IoContext, Result};
use crate::jsonl::LineReader;

/// Where indexing of a session's logs stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Watermarks {
    pub log_offset: i64,
    pub log_ino: i64,
    pub log_line: i64,
    pub log_seen: i64,
    pub ev_seen: i64,
    pub turn_number: i64,
    pub tool_seq: i64,
    pub ev_offset: i64,
    pub ev_ino: i64,
}

/// The thread a session is: same id, the meta's fields. `interrupted` is an active thread.
pub(crate) fn put_thread(tx: &Connection, meta: &SessionMeta) -> rusqlite::Result<()> {
    let status = match meta.status {
        SessionStatus::Archived => "archived",
        SessionStatus::Deleted => "deleted",
        _ => "active",
    };
    tx.execute(
        "INSERT INTO threads (id, title, createdAt, updatedAt, lastTurnAt, status, projectPath, provider,
           turnCount, iterationCount)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0)
         ON CONFLICT(id) DO UPDATE SET title = ?2, createdAt = ?3, updatedAt = ?4, lastTurnAt = ?5,
           status = ?6, projectPath = ?7, provider = ?8, turnCount = ?9",
        params![
            meta.id,
            meta.title,
            meta.created_at,
            meta.updated_at,
            meta.last_turn_at,
            status,
            meta.project_path,
            meta.provider,
            i64::try_from(meta.turn_count).unwrap_or(i64::MAX)
        ],
    )?;
    Ok(())
}

/// Drops a session's derived message rows and turns (before re-reading its log whole).
fn forget_messages(tx: &Connection, id: &str) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM idx_messages_fts WHERE rowid IN (SELECT rowid FROM idx_messages WHERE sessionId = ?1)",
        [id],
    )?;
    tx.execute("DELETE FROM idx_messages WHERE sessionId = ?1", [id])?;
    tx.execute(
        "DELETE FROM tool_calls WHERE turnId IN (SELECT id FROM turns WHERE threadId = ?1)",
        [id],
    )?;
    tx.execute("DELETE FROM turns WHERE threadId = ?1", [id])?;
    Ok(())
}

fn forget_events(tx: &Connection, id: &str) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM idx_tool_spans WHERE sessionId = ?1", [id])?;
    tx.execute("DELETE FROM idx_model_spans WHERE sessionId = ?1", [id])?;
    Ok(())
}

/// Removes everything derived from a session that is gone.
pub(crate) fn forget_session(tx: &Connection, id: &str) -> rusqlite::Result<()> {
    forget_messages(tx, id)?;
    forget_events(tx, id)?;
    // What was derived from its text goes with it (a purge leaves no vector behind).
    tx.execute("DELETE FROM idx_chunks WHERE sessionId = ?1", [id])?;
    tx.execute("DELETE FROM idx_chunk_state WHERE sessionId = ?1", [id])?;
    tx.execute("DELETE FROM threads WHERE id = ?1", [id])?;
    tx.execute("DELETE FROM idx_sessions WHERE id = ?1", [id])?;
    Ok(())
}

/// The full-text table's definition, exactly as the index migration creates it (checked by a
/// test): `clear` drops and recreates the table, far faster than deleting its rows one by one.
pub(crate) const FTS_DDL: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS idx_messages_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 0');";

/// Drops every derived row (the thread store's own threads, made by its API, stay), inside
/// the caller's transaction.
pub(crate) fn clear(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "DELETE FROM tool_calls WHERE turnId IN (SELECT t.id FROM turns t JOIN idx_sessions s ON s.id = t.threadId);
         DELETE FROM turns WHERE threadId IN (SELECT id FROM idx_sessions);
         DELETE FROM threads WHERE id IN (SELECT id FROM idx_sessions);
         DROP TABLE idx_messages_fts;
         {FTS_DDL}
         DELETE FROM idx_messages;
         DELETE FROM idx_tool_spans;
         DELETE FROM idx_model_spans;
         DELETE FROM idx_sessions;"
    ))
}

/// The searchable text of a message: text and code, and each tool's name and result.
pub(crate) fn message_text(m: &StoredMessage) -> String {
    let mut out = String::new();
    let mut push = |s: &str| {
        if !s.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        }
    };
    for p in &m.parts {
        match p.kind {
            PartType::Text | PartType::Code => push(p.content.as_deref().unwrap_or("")),
            PartType::Tool => {
                push(
                    p.tool
                        .as_ref()
                        .and_then(|t| t.name.as_deref())
                        .unwrap_or(""),
                );
                push(p.result.as_deref().unwrap_or(""));
            }
            PartType::Image | PartType::Other(_) => {}
        }
    }
    out
}

fn to_i64(v: Option<u64>) -> i64 {
    v.map_or(0, |v| i64::try_from(v).unwrap_or(i64::MAX))
}

/// Indexes one message: its row, its text, and its place in the derived thread.
fn index_message(
    tx: &Connection,
    id: &str,
    line: i64,
    m: &StoredMessage,
    w: &mut Watermarks,
    fts: &mut Vec<(i64, String)>,
) -> rusqlite::Result<()> {
    let usage = m.usage.as_ref();
    tx.prepare_cached("INSERT INTO idx_messages (sessionId, line, msgId, role, timestamp, inputTokens, outputTokens, cacheRead, cacheWrite)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?.execute(
        params![
            id,
            line,
            m.id,
            m.role.as_str(),
            m.timestamp,
            to_i64(usage.and_then(|u| u.input_tokens)),
            to_i64(usage.and_then(|u| u.output_tokens)),
            to_i64(usage.and_then(|u| u.cache_read_input_tokens)),
            to_i64(usage.and_then(|u| u.cache_write_input_tokens.or(u.cache_creation_input_tokens))),
        ],
    )?;
    // Full-text rows are written at the end of the transaction: a statement savepoint (foreign
    // keys) makes FTS5 flush its pending terms, and one segment per message is slow to write.
    fts.push((tx.last_insert_rowid(), message_text(m)));

    // The derived thread: a user turn opens a turn; assistant text is its response; each tool
    // part is one of its tool calls.
    let turn_id = |n: i64| format!("{id}:{n}");
    if is_user_turn(m) {
        w.turn_number += 1;
        w.tool_seq = 0;
        tx.prepare_cached("INSERT OR REPLACE INTO turns (id, threadId, turnNumber, prompt, createdAt, toolCallCount)
             VALUES (?1, ?2, ?3, ?4, ?5, 0)")?.execute(
            params![turn_id(w.turn_number), id, w.turn_number, m.text(), m.timestamp],
        )?;
        return Ok(());
    }
    if m.role != Role::Assistant {
        return Ok(());
    }
    if w.turn_number == 0 {
        // A log that starts with the assistant (an old or trimmed log): an implicit first turn.
        w.turn_number = 1;
        tx.prepare_cached("INSERT OR REPLACE INTO turns (id, threadId, turnNumber, prompt, createdAt, toolCallCount)
             VALUES (?1, ?2, 1, '', ?3, 0)")?.execute(
            params![turn_id(1), id, m.timestamp],
        )?;
    }
    let tid = turn_id(w.turn_number);
    for p in &m.parts {
        match p.kind {
            PartType::Text | PartType::Code => {
                let text = p.content.as_deref().unwrap_or("");
                if !text.is_empty() {
                    tx.prepare_cached("UPDATE turns SET response = CASE WHEN response IS NULL OR response = '' THEN ?2
                           ELSE response || char(10) || ?2 END WHERE id = ?1")?.execute(
                        params![tid, text],
                    )?;
                }
            }
            PartType::Tool | PartType::Other(_) => {
                w.tool_seq += 1;
                let tool = p.tool.as_ref();
                let args = tool.and_then(|t| t.args.as_ref()).map(|a| a.to_string());
                tx.prepare_cached("INSERT OR REPLACE INTO tool_calls (id, turnId, toolName, args, result, sequence)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?.execute(
                    params![
                        format!("{tid}:{}", w.tool_seq),
                        tid,
                        tool.and_then(|t| t.name.as_deref()).unwrap_or(""),
                        args,
                        p.result,
                        w.tool_seq
                    ],
                )?;
                tx.prepare_cached(
                    "UPDATE turns SET toolCallCount = toolCallCount + 1 WHERE id = ?1",
                )?
                .execute([&tid])?;
            }
            PartType::Image => {}
        }
    }
    Ok(())
}

fn index_event(tx: &Connection, id: &str, e: &Event) -> rusqlite::Result<()> {
    match &e.kind {
        EventKind::FunctionOutput {
            tool,
            duration_ms,
            failed,
            ..
        } => {
            tx.prepare_cached("INSERT INTO idx_tool_spans (sessionId, tool, durationMs, failed, at) VALUES (?1, ?2, ?3, ?4, ?5)")?.execute(
                params![id, tool, duration_ms, failed.unwrap_or(false), e.timestamp],
            )?;
        }
        EventKind::ModelResponse {
            model,
            duration_ms,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            cache_write_1h_tokens,
            reasoning_tokens,
            ..
        } => {
            tx.prepare_cached("INSERT INTO idx_model_spans (sessionId, durationMs, ok, inputTokens, outputTokens, cacheRead, cacheWrite, model, at, reasoning, cacheWrite1h)
                 VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")?.execute(
                params![
                    id,
                    duration_ms,
                    to_i64(*input_tokens),
                    to_i64(*output_tokens),
                    to_i64(*cache_read_tokens),
                    to_i64(*cache_write_tokens),
                    model,
                    e.timestamp,
                    to_i64(*reasoning_tokens),
                    to_i64(*cache_write_1h_tokens)
                ],
            )?;
        }
        EventKind::ModelError {
            model, duration_ms, ..
        } => {
            tx.prepare_cached(
                "INSERT INTO idx_model_spans (sessionId, durationMs, ok, model, at) VALUES (?1, ?2, 0, ?3, ?4)",
            )?
            .execute(params![id, duration_ms, model, e.timestamp])?;
        }
        EventKind::TurnStarted { .. }
        | EventKind::TurnAborted { .. }
        | EventKind::FunctionCall { .. }
        | EventKind::FunctionDenied { .. }
        | EventKind::CompactOccurred { .. }
        | EventKind::SubagentStart { .. }
        | EventKind::SubagentStop { .. }
        | EventKind::SkillInvoked { .. }
        | EventKind::HookTriggered { .. }
        | EventKind::HookBlocked { .. }
        | EventKind::ContextOverflow { .. }
        | EventKind::ParseError { .. }
        | EventKind::ModelRequest { .. }
        | EventKind::ModelFirstToken { .. }
        | EventKind::RedirectTriggered { .. }
        | EventKind::RedirectSkipped { .. } => {}
    }
    Ok(())
}

/// Reads the complete lines of `path` from `offset`, handing each to `on_line(line_no, bytes)`.
/// Returns the offset after the last complete line and the last line number.
fn read_from(
    path: &std::path::Path,
    offset: i64,
    first_line: i64,
    mut on_line: impl FnMut(i64, &[u8]) -> rusqlite::Result<()>,
) -> Result<Option<(i64, i64)>> {
    let Some(mut file) = SessionIndex::open_log(path)? else {
        return Ok(None);
    };
    let start = u64::try_from(offset).unwrap_or(0);
    file.seek(SeekFrom::Start(start)).ctx("seek", path)?;
    let mut lines = LineReader::new(BufReader::with_capacity(256 * 1024, file), start);
    let (mut end, mut no) = (offset, first_line);
    while let Some(line) = lines.next_line().ctx("read", path)? {
        if !line.terminated {
            break; // a line being written (or torn): index it once it is complete
        }
        no += 1;
        end = i64::try_from(line.offset + line.len + 1).unwrap_or(i64::MAX);
        on_line(no, &line.bytes).map_err(db_err(path))?;
    }
    Ok(Some((end, no)))
}

/// What indexing a session's logs has to do, from one `stat` of each log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogPlan {
    log: Option<Stamp>,
    ev: Option<Stamp>,
    log_restart: bool,
    ev_restart: bool,
    log_changed: bool,
    ev_changed: bool,
}

impl LogPlan {
    pub(crate) fn changed(&self) -> bool {
        self.log_changed || self.ev_changed
    }
}

/// The session's rollout log.
fn events_path(home: &Home, f: &Found) -> std::path::PathBuf {
    SessionId::new(f.id.as_str())
        .map(|sid| crate::rollout::events_path(home, &sid))
        .unwrap_or_default()
}

/// A session's logs as one `stat` of each found them, and the problems those reported (a log
/// that is there but is not a regular file).
#[derive(Debug, Clone, Default)]
pub(crate) struct LogStamps {
    log: Option<Stamp>,
    ev: Option<Stamp>,
    problems: Vec<Problem>,
}

impl LogStamps {
    /// The newest mtime of the logs, ns (`i64::MIN` when there is none).
    pub(crate) fn newest_mtime(&self) -> i64 {
        [self.log, self.ev]
            .into_iter()
            .flatten()
            .map(|s| s.mtime_ns)
            .max()
            .unwrap_or(i64::MIN)
    }

    /// The problems the stats found.
    pub(crate) fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

/// Stats a session's message and rollout logs. A log that is there but is not a regular file is
/// reported and left out, like one that is missing.
pub(crate) fn stamp_logs(home: &Home, f: &Found) -> LogStamps {
    let mut problems = Vec::new();
    let mut stamp = |path: std::path::PathBuf| match Stamp::of_log(&path) {
        Ok(s) => s,
        Err(why) => {
            problems.push((path, why));
            None
        }
    };
    let log = stamp(f.dir.join(crate::session::MESSAGES_FILE));
    let ev = stamp(events_path(home, f));
    LogStamps { log, ev, problems }
}

/// Compares a session's log stamps with its watermarks `w`. A file whose size is what it was
/// when last read needs nothing — even when it ends in a torn line, which is read again only
/// once it changes.
pub(crate) fn plan_logs(stamps: &LogStamps, w: &Watermarks) -> LogPlan {
    let (log, ev) = (stamps.log, stamps.ev);
    let log_restart = log.is_some_and(|s| s.ino != w.log_ino || s.size < w.log_offset);
    let ev_restart = ev.is_some_and(|s| s.ino != w.ev_ino || s.size < w.ev_offset);
    LogPlan {
        log,
        ev,
        log_restart,
        ev_restart,
        log_changed: log.is_some_and(|s| log_restart || s.size != w.log_seen),
        ev_changed: ev.is_some_and(|s| ev_restart || s.size != w.ev_seen),
    }
}

/// Brings one session's message and rollout logs up to date from their watermarks `w` (the
/// session's indexed row), inside the caller's write transaction `tx`. A log that cannot be
/// read is reported in `problems` and the session's rows are left as they were (a savepoint
/// per session); database errors are returned. `stamps`: the logs' stats when the caller has
/// them already (else they are taken here).
pub(crate) fn index_logs(
    tx: &mut Transaction<'_>,
    db_path: &std::path::Path,
    home: &Home,
    f: &Found,
    w: Watermarks,
    stamps: Option<LogStamps>,
    problems: &mut Vec<Problem>,
) -> Result<(u64, u64)> {
    let stamps = stamps.unwrap_or_else(|| stamp_logs(home, f));
    problems.extend_from_slice(stamps.problems());
    let plan = plan_logs(&stamps, &w);
    if !plan.changed() {
        return Ok((0, 0));
    }
    let sp = tx.savepoint().map_err(db_err(db_path))?;
    match index_changed_logs(&sp, db_path, home, f, w, plan) {
        Ok(counts) => {
            sp.commit().map_err(db_err(db_path))?;
            Ok(counts)
        }
        Err(e @ StoreError::Db { .. }) => Err(e),
        Err(e) => {
            // Dropping the savepoint rolls this session's rows back.
            let path = match &e {
                StoreError::Io { path, .. } => path.clone(),
                _ => f.dir.clone(),
            };
            problems.push((path, crate::error::chain(&e)));
            Ok((0, 0))
        }
    }
}

fn index_changed_logs(
    tx: &Connection,
    db_path: &std::path::Path,
    home: &Home,
    f: &Found,
    mut w: Watermarks,
    plan: LogPlan,
) -> Result<(u64, u64)> {
    let before = w;
    let (mut messages, mut events) = (0u64, 0u64);
    let log = f.dir.join(crate::session::MESSAGES_FILE);
    let ev_path = events_path(home, f);
    let mut fts: Vec<(i64, String)> = Vec::new();
    if let (true, Some(s)) = (plan.log_changed, plan.log) {
        if plan.log_restart {
            forget_messages(tx, &f.id).map_err(db_err(db_path))?;
            w = Watermarks {
                log_ino: s.ino,
                log_offset: 0,
                log_line: 0,
                turn_number: 0,
                tool_seq: 0,
                log_seen: 0,
                ..w
            };
        }
        let id = f.id.as_str();
        let res = read_from(&log, w.log_offset, w.log_line, |no, bytes| {
            if let Ok(m) =
                freecode_core::json::from_slice_lossy::<StoredMessage>(bytes).map(|l| l.value)
            {
                messages += 1;
                index_message(tx, id, no, &m, &mut w, &mut fts)?;
            }
            Ok(())
        })?;
        if let Some((end, no)) = res {
            w.log_offset = end;
            w.log_line = no;
        }
        w.log_seen = s.size;
    }
    if let (true, Some(s)) = (plan.ev_changed, plan.ev) {
        if plan.ev_restart {
            forget_events(tx, &f.id).map_err(db_err(db_path))?;
            w.ev_offset = 0;
            w.ev_ino = s.ino;
        }
        let id = f.id.as_str();
        let res = read_from(&ev_path, w.ev_offset, 0, |_, bytes| {
            if let Ok(Ok(e)) = freecode_core::json::from_slice_lossy::<RawEvent>(bytes)
                .map(|l| Event::from_raw(l.value))
            {
                events += 1;
                index_event(tx, id, &e)?;
            }
            Ok(())
        })?;
        if let Some((end, _)) = res {
            w.ev_offset = end;
        }
        w.ev_seen = s.size;
    }
    {
        let mut ins = tx
            .prepare_cached("INSERT INTO idx_messages_fts (rowid, text) VALUES (?1, ?2)")
            .map_err(db_err(db_path))?;
        for (rowid, text) in &fts {
            ins.execute(params![rowid, text]).map_err(db_err(db_path))?;
        }
    }
    let moved = (w.log_offset, w.ev_offset, w.log_seen, w.ev_seen)
        != (
            before.log_offset,
            before.ev_offset,
            before.log_seen,
            before.ev_seen,
        );
    if moved || plan.log_restart || plan.ev_restart {
        tx.prepare_cached(
            "UPDATE idx_sessions SET logOffset = ?2, logIno = ?3, logLine = ?4, turnNumber = ?5, toolSeq = ?6,
               evOffset = ?7, evIno = ?8, logSeen = ?9, evSeen = ?10 WHERE id = ?1",
        )
        .and_then(|mut st| {
            st.execute(params![
                f.id,
                w.log_offset,
                w.log_ino,
                w.log_line,
                w.turn_number,
                w.tool_seq,
                w.ev_offset,
                w.ev_ino,
                w.log_seen,
                w.ev_seen
            ])
        })
        .map_err(db_err(db_path))?;
    }
    Ok((messages, events))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fts_definition_is_the_migrations() {
        assert!(super::super::MIGRATIONS[0].sql.contains(super::FTS_DDL));
    }
}
