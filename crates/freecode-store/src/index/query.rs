//! The index's readers: full-text search (FTS5, ranked, with snippets) and stats — and the same
//! answers computed by scanning the files, for when SQLite cannot be used.
//!
//! Matching is the same on both paths: the query is split into words (Unicode letters and digits,
//! lower-cased); a message matches when every query word begins some word of its text (an FTS5
//! prefix query). So is the order: BM25 as FTS5 computes it (`k1` 1.2, `b` 0.75, over every
//! indexed message), then newest first, then session and message id; past [`RANK_LIMIT`]
//! matches, newest first without ranking. Snippets are plain text with the matching words'
//! character offsets ([`SearchHit::matches`]): markers inside the text would collide with code
//! (`vec![1, 2]`).

use std::collections::BTreeMap;
use std::path::Path;

use freecode_core::SessionId;
use freecode_core::project_key::{trim_separators, within_project};
use freecode_core::rollout::EventKind;
use rusqlite::{Transaction, TransactionBehavior, params};
use serde::Serialize;

use super::derive::message_text;
use super::{Problem, SessionIndex, db_err, log_problem};
use crate::error::{Result, StoreError};
use crate::rollout::{events_path, read_events};
use crate::session::{ListFilter, SessionStore};

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    /// The words to find.
    pub text: String,
    /// Only sessions of this project path or below it ([`within_project`]).
    pub project: Option<String>,
    /// Only messages at or after this time, ms.
    pub since: Option<i64>,
    /// At most this many hits.
    pub limit: usize,
    /// Archived and deleted sessions too (`search --all`); by default they are left out.
    pub all: bool,
    /// Only sessions this agent wrote ([`freecode_core::SessionMeta::agent`]); a name no
    /// session has matches nothing.
    pub agent: Option<String>,
}

/// One matching message.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// The session.
    pub session_id: String,
    /// The session's title.
    pub title: String,
    /// The session's project.
    pub project_path: String,
    /// The agent that wrote the session ([`freecode_core::SessionMeta::agent`]: `freecode`,
    /// `claude-code`, `codex`, …).
    pub agent: String,
    /// The message.
    pub message_id: String,
    /// `user` or `assistant`.
    pub role: String,
    /// When it was written, ms.
    pub timestamp: i64,
    /// The text around the match, plain, on one line (newlines and tabs are spaces), `…` where
    /// it was cut.
    pub snippet: String,
    /// The matching words in [`snippet`](Self::snippet), in order, as offsets in characters
    /// (Unicode scalar values, not bytes or UTF-16 units).
    pub matches: Vec<MatchSpan>,
    /// Relevance: lower is better (BM25 in the index — 0 when more than [`RANK_LIMIT`] messages
    /// match and the newest are returned; minus the words hit in a scan; minus the similarity
    /// by meaning, minus the fused score for both).
    pub rank: f64,
    /// Which rankings found it, when the search was by meaning or both (absent for words).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<super::FoundBy>,
}

/// A word hit with its message's line (fusion finds its chunk by it).
pub(super) struct WordHit {
    pub hit: SearchHit,
    pub line: i64,
}

/// The title in a meta's JSON (empty when it has none).
pub(super) fn title_of(meta: &str) -> String {
    freecode_core::json::from_slice_lossy::<serde_json::Value>(meta.as_bytes())
        .map(|l| l.value)
        .ok()
        .and_then(|v| v.get("title").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_default()
}

/// SQL for [`within_project`] on `s.projectPath`, with parameter `?n` holding the project
/// passed through [`trim_separators`].
pub(super) fn in_project_sql(n: u8) -> String {
    format!(
        "(s.projectPath = ?{n} OR substr(s.projectPath, 1, length(?{n}) + 1) IN (?{n} || '/', ?{n} || '\\'))"
    )
}

/// One highlighted word of a snippet: characters `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MatchSpan {
    /// The first character of the word.
    pub start: usize,
    /// One past its last character.
    pub end: usize,
}

/// The words of `snippet` that a query word begins, as character spans.
pub fn match_spans(snippet: &str, query: &[String]) -> Vec<MatchSpan> {
    let mut spans = Vec::new();
    let mut word = String::new();
    let mut start = 0;
    let mut n = 0;
    let mut close = |word: &mut String, start: usize, end: usize| {
        if !word.is_empty() {
            let w = word.to_lowercase();
            if query.iter().any(|q| w.starts_with(q.as_str())) {
                spans.push(MatchSpan { start, end });
            }
            word.clear();
        }
    };
    for c in snippet.chars() {
        if c.is_alphanumeric() {
            if word.is_empty() {
                start = n;
            }
            word.push(c);
        } else {
            close(&mut word, start, n);
        }
        n += 1;
    }
    close(&mut word, start, n);
    spans
}

/// A snippet on one line: newlines, carriage returns and tabs become spaces (one for one, so
/// that character offsets hold).
pub(super) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// BM25's `k1` and `b`, FTS5's defaults.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// The words of a text, as both search paths see them.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Past this many matches, search returns the newest instead of ranking them all.
pub const RANK_LIMIT: i64 = 20_000;

fn fts_query(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"*", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl SessionIndex {
    /// Searches every message and tool output, after bringing the index up to date.
    pub fn search(&mut self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        self.refresh(|_, _| {})?;
        Ok(self.word_hits(q)?.into_iter().map(|w| w.hit).collect())
    }

    /// The word search of an index already refreshed, with each hit's line.
    pub(super) fn word_hits(&self, q: &SearchQuery) -> Result<Vec<WordHit>> {
        let ws = words(&q.text);
        if ws.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        let fts = fts_query(&ws);
        let project = q.project.as_deref().map(trim_separators);
        // Ranking scores every match: fine for thousands, seconds for a word in most messages.
        // Past RANK_LIMIT matches, the newest come first instead (rank 0).
        let matches: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM idx_messages_fts WHERE idx_messages_fts MATCH ?1")
            .and_then(|mut st| st.query_row([&fts], |r| r.get(0)))
            .map_err(db_err(self.path()))?;
        let (rank, order) = if matches > RANK_LIMIT {
            ("0.0", "m.timestamp DESC, m.sessionId, m.msgId")
        } else {
            (
                "bm25(idx_messages_fts)",
                "bm25(idx_messages_fts), m.timestamp DESC, m.sessionId, m.msgId",
            )
        };
        let sql = format!(
            "SELECT m.sessionId, s.metaJson, s.projectPath, m.msgId, m.role, m.timestamp,
                    snippet(idx_messages_fts, 0, '', '', '…', 16), {rank}, m.line, s.agent
             FROM idx_messages_fts
             JOIN idx_messages m ON m.rowid = idx_messages_fts.rowid
             JOIN idx_sessions s ON s.id = m.sessionId
             WHERE idx_messages_fts MATCH ?1
               AND (?5 OR s.status NOT IN ('deleted', 'archived'))
               AND (?2 IS NULL OR {in_project2})
               AND (?3 IS NULL OR m.timestamp >= ?3)
               AND (?6 IS NULL OR s.agent = ?6)
             ORDER BY {order}
             LIMIT ?4",
            in_project2 = in_project_sql(2),
        );
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(db_err(self.path()))?;
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![fts, project, q.since, limit, q.all, q.agent], |r| {
                let meta: String = r.get(1)?;
                Ok(WordHit {
                    hit: SearchHit {
                        session_id: r.get(0)?,
                        title: title_of(&meta),
                        project_path: r.get(2)?,
                        agent: r.get(9)?,
                        message_id: r.get(3)?,
                        role: r.get(4)?,
                        timestamp: r.get(5)?,
                        snippet: one_line(&r.get::<_, String>(6)?),
                        matches: Vec::new(),
                        rank: r.get(7)?,
                        found_by: None,
                    },
                    line: r.get(8)?,
                })
            })
            .map_err(db_err(self.path()))?;
        let mut hits = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(self.path()))?;
        for h in &mut hits {
            h.hit.matches = match_spans(&h.hit.snippet, &ws);
        }
        Ok(hits)
    }

    /// Stats of one session, a project, or everything, from the index (brought up to date).
    pub fn stats(&mut self, scope: &StatsScope) -> Result<Stats> {
        self.refresh(|_, _| {})?;
        // One snapshot for every query, so that a rebuild committed meanwhile cannot mix in.
        let snapshot = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)
            .map_err(db_err(self.path()))?;
        let in_project1 = in_project_sql(1);
        let (clause, arg): (&str, Option<String>) = match scope {
            StatsScope::Session(id) => ("s.id = ?1", Some(id.to_string())),
            StatsScope::Project(p) => (in_project1.as_str(), Some(trim_separators(p).to_owned())),
            StatsScope::All => ("?1 IS NULL", None),
        };
        let path = self.path().to_owned();
        let one = |sql: &str| -> Result<i64> {
            self.conn
                .query_row(&sql.replace("{scope}", clause), [&arg], |r| {
                    r.get::<_, Option<i64>>(0)
                })
                .map(Option::unwrap_or_default)
                .map_err(db_err(&path))
        };
        let sessions = one("SELECT count(*) FROM idx_sessions s WHERE {scope}")?;
        let turns = one(
            "SELECT count(*) FROM turns t JOIN idx_sessions s ON s.id = t.threadId WHERE {scope}",
        )?;
        let messages = one(
            "SELECT count(*) FROM idx_messages m JOIN idx_sessions s ON s.id = m.sessionId WHERE {scope}",
        )?;
        let mut acc = StatsAcc {
            sessions: sessions as u64,
            turns: turns as u64,
            messages: messages as u64,
            ..StatsAcc::default()
        };
        {
            let sql = "SELECT t.tool, t.durationMs, t.at FROM idx_tool_spans t JOIN idx_sessions s ON s.id = t.sessionId WHERE {scope}"
                .replace("{scope}", clause);
            let mut stmt = self.conn.prepare(&sql).map_err(db_err(&path))?;
            let rows = stmt
                .query_map([&arg], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .map_err(db_err(&path))?;
            for row in rows {
                let (tool, d, at) = row.map_err(db_err(&path))?;
                acc.tool(tool, d, at);
            }
        }
        {
            let sql = "SELECT m.durationMs, m.ok, m.inputTokens, m.outputTokens, m.cacheRead, m.cacheWrite, m.model, m.at
                       FROM idx_model_spans m JOIN idx_sessions s ON s.id = m.sessionId WHERE {scope}"
                .replace("{scope}", clause);
            let mut stmt = self.conn.prepare(&sql).map_err(db_err(&path))?;
            let rows = stmt
                .query_map([&arg], |r| {
                    Ok(ModelRow {
                        duration_ms: r.get(0)?,
                        ok: r.get(1)?,
                        tokens: [r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?],
                        model: r.get(6)?,
                        at: r.get(7)?,
                    })
                })
                .map_err(db_err(&path))?;
            for row in rows {
                acc.model(row.map_err(db_err(&path))?);
            }
        }
        if acc.model_calls == 0 {
            let sql = "SELECT sum(m.inputTokens), sum(m.outputTokens), sum(m.cacheRead), sum(m.cacheWrite)
                       FROM idx_messages m JOIN idx_sessions s ON s.id = m.sessionId WHERE {scope}"
                .replace("{scope}", clause);
            let t: [Option<i64>; 4] = self
                .conn
                .query_row(&sql, [&arg], |r| {
                    Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?])
                })
                .map_err(db_err(&path))?;
            acc.usage = t.map(|v| v.unwrap_or(0));
        }
        snapshot.commit().map_err(db_err(&path))?;
        Ok(acc.finish())
    }
}

/// What [`SessionIndex::stats`] covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsScope {
    /// One session.
    Session(SessionId),
    /// Sessions of this project path or below it ([`within_project`]).
    Project(String),
    /// Every session.
    All,
}

/// Tool calls of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolStats {
    /// Tool name.
    pub tool: String,
    /// Calls that ran.
    pub calls: u64,
    /// Total duration, ms.
    pub total_ms: i64,
    /// 95th percentile duration, ms (nearest rank).
    pub p95_ms: i64,
}

/// Model calls of one model, from the rollout logs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStats {
    /// The model the calls named (`model.response`/`model.error`'s `model`).
    pub model: String,
    /// Calls answered or failed.
    pub calls: u64,
    /// Time in these calls, ms (request to response or error).
    pub total_ms: i64,
    /// Input tokens (inclusive of cache reads).
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
}

/// One local calendar day's model calls and tool calls, from the rollout logs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DayStats {
    /// The day, `YYYY-MM-DD`, in the local time zone, of each call's end.
    pub day: String,
    /// Model calls that ended that day.
    pub model_calls: u64,
    /// Their time, ms.
    pub model_ms: i64,
    /// Tool calls that ended that day.
    pub tool_calls: u64,
    /// Their time, ms.
    pub tool_ms: i64,
    /// Input tokens of the model calls (inclusive of cache reads).
    pub input_tokens: i64,
    /// Output tokens of the model calls.
    pub output_tokens: i64,
}

/// Turns, tool calls, model time and tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// Sessions covered.
    pub sessions: u64,
    /// User turns.
    pub turns: u64,
    /// Messages.
    pub messages: u64,
    /// Tool calls that ran, by tool (most time first), from the rollout logs.
    pub tools: Vec<ToolStats>,
    /// Model calls.
    pub model_calls: u64,
    /// Model calls that failed.
    pub model_errors: u64,
    /// Time spent in model calls, ms.
    pub model_ms: i64,
    /// Input tokens (inclusive of cache reads).
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Cache-read input tokens.
    pub cache_read_tokens: i64,
    /// Cache-write input tokens.
    pub cache_write_tokens: i64,
    /// Model calls by model (most time first), from the rollout logs.
    pub models: Vec<ModelStats>,
    /// Model and tool calls by local day (oldest first), from the rollout logs.
    pub days: Vec<DayStats>,
}

struct ModelRow {
    duration_ms: i64,
    ok: bool,
    tokens: [i64; 4],
    model: String,
    /// When the call ended (the event's timestamp), ms.
    at: i64,
}

/// The local calendar day of `ms` in `tz`, `YYYY-MM-DD`.
fn local_day(tz: &jiff::tz::TimeZone, ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts.to_zoned(tz.clone()).date().to_string(),
        Err(_) => "unknown".to_owned(),
    }
}

#[derive(Default)]
struct StatsAcc {
    sessions: u64,
    turns: u64,
    messages: u64,
    tools: BTreeMap<String, Vec<i64>>,
    model_calls: u64,
    model_errors: u64,
    model_ms: i64,
    /// From model spans, or (no rollout) from message usage.
    usage: [i64; 4],
    models: BTreeMap<String, ModelStats>,
    days: BTreeMap<String, DayStats>,
    /// The time zone the days are counted in (the system's, once).
    tz: Option<jiff::tz::TimeZone>,
}

impl StatsAcc {
    fn day(&mut self, at: i64) -> &mut DayStats {
        let tz = self.tz.get_or_insert_with(jiff::tz::TimeZone::system);
        let day = local_day(tz, at);
        self.days.entry(day.clone()).or_insert_with(|| DayStats {
            day,
            ..DayStats::default()
        })
    }

    fn tool(&mut self, tool: String, duration_ms: i64, at: i64) {
        self.tools.entry(tool).or_default().push(duration_ms);
        let d = self.day(at);
        d.tool_calls += 1;
        d.tool_ms += duration_ms;
    }

    fn model(&mut self, r: ModelRow) {
        self.model_calls += 1;
        self.model_errors += u64::from(!r.ok);
        self.model_ms += r.duration_ms;
        for (a, b) in self.usage.iter_mut().zip(r.tokens) {
            *a += b;
        }
        let m = self
            .models
            .entry(r.model.clone())
            .or_insert_with(|| ModelStats {
                model: r.model,
                ..ModelStats::default()
            });
        m.calls += 1;
        m.total_ms += r.duration_ms;
        m.input_tokens += r.tokens[0];
        m.output_tokens += r.tokens[1];
        let d = self.day(r.at);
        d.model_calls += 1;
        d.model_ms += r.duration_ms;
        d.input_tokens += r.tokens[0];
        d.output_tokens += r.tokens[1];
    }

    fn finish(self) -> Stats {
        let mut tools: Vec<ToolStats> = self
            .tools
            .into_iter()
            .map(|(tool, mut d)| {
                d.sort_unstable();
                let rank = (d.len() * 95).div_ceil(100).max(1);
                ToolStats {
                    tool,
                    calls: d.len() as u64,
                    total_ms: d.iter().sum(),
                    p95_ms: d[rank - 1],
                }
            })
            .collect();
        tools.sort_by(|a, b| b.total_ms.cmp(&a.total_ms).then(a.tool.cmp(&b.tool)));
        let mut models: Vec<ModelStats> = self.models.into_values().collect();
        models.sort_by(|a, b| b.total_ms.cmp(&a.total_ms).then(a.model.cmp(&b.model)));
        Stats {
            sessions: self.sessions,
            turns: self.turns,
            messages: self.messages,
            tools,
            model_calls: self.model_calls,
            model_errors: self.model_errors,
            model_ms: self.model_ms,
            input_tokens: self.usage[0],
            output_tokens: self.usage[1],
            cache_read_tokens: self.usage[2],
            cache_write_tokens: self.usage[3],
            models,
            days: self.days.into_values().collect(),
        }
    }
}

/// The plain snippet of the scan: about 60 characters before the first word a query word
/// begins and 120 after it, `…` where cut, on one line.
fn snippet_of(text: &str, query: &[String]) -> String {
    let mut first_hit = None;
    let mut word_start = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (i, &(pos, c)) in chars.iter().enumerate() {
        if c.is_alphanumeric() {
            word_start.get_or_insert(pos);
        }
        let at_end = i + 1 == chars.len() || !chars[i + 1].1.is_alphanumeric();
        if let (Some(start), true, true) = (word_start, c.is_alphanumeric(), at_end) {
            let end = pos + c.len_utf8();
            let w = text[start..end].to_lowercase();
            if query.iter().any(|q| w.starts_with(q.as_str())) {
                first_hit = Some(start);
                break;
            }
            word_start = None;
        }
    }
    let Some(hit) = first_hit else {
        return String::new();
    };
    let from = text[..hit]
        .char_indices()
        .rev()
        .nth(60)
        .map_or(0, |(i, _)| i);
    let to = text[hit..]
        .char_indices()
        .nth(120)
        .map_or(text.len(), |(i, _)| hit + i);
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    out.push_str(&text[from..to]);
    if to < text.len() {
        out.push('…');
    }
    one_line(&out)
}

/// Streams a session's messages for a scan: the session located once, its log opened once. A
/// log that cannot be read (not a regular file, an I/O error) is returned as a problem rather
/// than failing the scan.
fn scan_messages(
    store: &SessionStore,
    id: &SessionId,
    on_message: impl FnMut(freecode_core::StoredMessage),
) -> Result<Option<Problem>> {
    let path = store.locate(id)?.messages();
    let file = match crate::fsutil::open_read(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            let why = unreadable(
                &path,
                &StoreError::Io {
                    op: "open",
                    path: path.clone(),
                    source: e,
                },
            );
            return Ok(Some((path, why)));
        }
    };
    match crate::jsonl::stream(file, on_message, |_| {}) {
        Ok(()) => Ok(None),
        Err(e) => {
            let e = StoreError::Io {
                op: "read",
                path: path.clone(),
                source: e,
            };
            Ok(Some((path, crate::error::chain(&e))))
        }
    }
}

/// Why the log at `path` could not be read (`e`): the index's reason for a log that is there but
/// is not a regular file (so a scan and the index say the same), else the error. Asked only
/// after a failure: a readable log costs no extra `stat`.
fn unreadable(path: &Path, e: &StoreError) -> String {
    log_problem(path).unwrap_or_else(|| crate::error::chain(e))
}

/// A match of the scan, waiting for the collection's statistics to be ranked.
struct Candidate {
    hit: SearchHit,
    /// Per query word: the words of the message it begins.
    freq: Vec<u64>,
    /// Words in the message.
    len: u64,
}

/// Search without the index: reads every session's log (the JSON-backend fallback), in the
/// index's order — BM25 over every message as FTS5 computes it, then newest first. Damaged
/// sessions are skipped and returned with the reason, like the index's
/// [`SessionIndex::problems`].
pub fn search_scan(
    store: &SessionStore,
    q: &SearchQuery,
) -> Result<(Vec<SearchHit>, Vec<Problem>)> {
    let ws = words(&q.text);
    if ws.is_empty() || q.limit == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    // Every session counts in the statistics (as every row of the index does); only those the
    // query selects give hits.
    let listing = store.list(&ListFilter {
        include_deleted: true,
        ..ListFilter::default()
    })?;
    let mut problems = listing.problems;
    let mut candidates = Vec::new();
    let (mut rows, mut tokens, mut all_matches) = (0u64, 0u64, 0u64);
    let mut rows_hit = vec![0u64; ws.len()];
    for meta in listing.sessions {
        let selected = (q.all || !matches!(meta.status.as_str(), "deleted" | "archived"))
            && q.project
                .as_deref()
                .is_none_or(|p| within_project(&meta.project_path, p))
            && q.agent.as_deref().is_none_or(|a| meta.agent() == a);
        let Ok(id) = SessionId::new(meta.id.as_str()) else {
            continue;
        };
        let problem = scan_messages(store, &id, |m| {
            let text = message_text(&m);
            let message_words = words(&text);
            rows += 1;
            tokens += message_words.len() as u64;
            let freq: Vec<u64> = ws
                .iter()
                .map(|w| {
                    message_words
                        .iter()
                        .filter(|t| t.starts_with(w.as_str()))
                        .count() as u64
                })
                .collect();
            for (n, f) in rows_hit.iter_mut().zip(&freq) {
                *n += u64::from(*f > 0);
            }
            if freq.contains(&0) {
                return;
            }
            all_matches += 1;
            if !selected || q.since.is_some_and(|s| m.timestamp < s) {
                return;
            }
            let snippet = snippet_of(&text, &ws);
            candidates.push(Candidate {
                hit: SearchHit {
                    session_id: meta.id.clone(),
                    title: meta.title.clone(),
                    project_path: meta.project_path.clone(),
                    agent: meta.agent().to_owned(),
                    message_id: m.id.clone(),
                    role: m.role.as_str().to_owned(),
                    timestamp: m.timestamp,
                    matches: match_spans(&snippet, &ws),
                    snippet,
                    rank: 0.0,
                    found_by: None,
                },
                freq,
                len: message_words.len() as u64,
            });
        })?;
        problems.extend(problem);
    }
    let ranked = i64::try_from(all_matches).unwrap_or(i64::MAX) <= RANK_LIMIT;
    let avgdl = tokens as f64 / rows.max(1) as f64;
    let idf: Vec<f64> = rows_hit
        .iter()
        .map(|&n| {
            let idf = ((rows as f64 - n as f64 + 0.5) / (n as f64 + 0.5)).ln();
            if idf <= 0.0 { 1e-6 } else { idf }
        })
        .collect();
    let mut hits: Vec<SearchHit> = candidates
        .into_iter()
        .map(|c| {
            let mut hit = c.hit;
            if ranked {
                let d = c.len as f64;
                let mut score = 0.0;
                for (f, idf) in c.freq.iter().zip(&idf) {
                    let f = *f as f64;
                    score += idf * (f * (BM25_K1 + 1.0))
                        / (f + BM25_K1 * (1.0 - BM25_B + BM25_B * d / avgdl));
                }
                hit.rank = -score;
            }
            hit
        })
        .collect();
    hits.sort_by(|a, b| {
        a.rank
            .total_cmp(&b.rank)
            .then(b.timestamp.cmp(&a.timestamp))
            .then_with(|| a.session_id.cmp(&b.session_id))
            .then_with(|| a.message_id.cmp(&b.message_id))
    });
    hits.truncate(q.limit);
    Ok((hits, problems))
}

/// Stats without the index: reads the logs of the sessions in scope. Damaged sessions are
/// skipped and returned with the reason.
pub fn stats_scan(store: &SessionStore, scope: &StatsScope) -> Result<(Stats, Vec<Problem>)> {
    let listing = store.list(&ListFilter {
        include_deleted: true,
        ..ListFilter::default()
    })?;
    let mut problems = listing.problems;
    let mut acc = StatsAcc::default();
    let mut msg_usage = [0i64; 4];
    for meta in listing.sessions {
        let keep = match scope {
            StatsScope::Session(id) => meta.id == id.as_str(),
            StatsScope::Project(p) => within_project(&meta.project_path, p),
            StatsScope::All => true,
        };
        let Ok(id) = SessionId::new(meta.id.as_str()) else {
            continue;
        };
        if !keep {
            continue;
        }
        acc.sessions += 1;
        let problem = scan_messages(store, &id, |m| {
            acc.messages += 1;
            acc.turns += u64::from(freecode_core::compaction::is_user_turn(&m));
            if let Some(u) = &m.usage {
                let v = [
                    u.input_tokens,
                    u.output_tokens,
                    u.cache_read_input_tokens,
                    u.cache_write_input_tokens.or(u.cache_creation_input_tokens),
                ];
                for (a, b) in msg_usage.iter_mut().zip(v) {
                    *a += b.map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX));
                }
            }
        })?;
        problems.extend(problem);
        let tok = |v: Option<u64>| v.map_or(0, |v| i64::try_from(v).unwrap_or(i64::MAX));
        let ev_path = events_path(store.home(), &id);
        let read = read_events(&ev_path, |e| match e.kind {
            EventKind::FunctionOutput {
                tool, duration_ms, ..
            } => acc.tool(tool, duration_ms, e.timestamp),
            EventKind::ModelResponse {
                model,
                duration_ms,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                ..
            } => acc.model(ModelRow {
                duration_ms,
                ok: true,
                tokens: [
                    tok(input_tokens),
                    tok(output_tokens),
                    tok(cache_read_tokens),
                    tok(cache_write_tokens),
                ],
                model,
                at: e.timestamp,
            }),
            EventKind::ModelError {
                model, duration_ms, ..
            } => acc.model(ModelRow {
                duration_ms,
                ok: false,
                tokens: [0; 4],
                model,
                at: e.timestamp,
            }),
            _ => {}
        });
        match read {
            Ok(_) => {}
            Err(e @ StoreError::Io { .. }) => {
                let why = unreadable(&ev_path, &e);
                problems.push((ev_path, why));
            }
            Err(e) => return Err(e),
        }
    }
    if acc.model_calls == 0 {
        acc.usage = msg_usage;
    }
    Ok((acc.finish(), problems))
}
