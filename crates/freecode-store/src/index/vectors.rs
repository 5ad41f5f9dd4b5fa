//! Search by meaning over the index: the conversation cut into chunks, their vectors, and the
//! search that fuses them with the words' ranking.
//!
//! **Chunks follow the conversation.** A chunk opens at a user message and takes the messages
//! after it (the answer, each tool step) until the next user message; a turn longer than the
//! embedder's window goes on in a next chunk that starts at the message which did not fit. A
//! user message gives up to a window of text, any other message up to [`STEP_CHARS`] (the
//! start of an answer, a tool's name and the start of its result): enough to say what the
//! step was about without letting one long output fill the window. Each chunk points at its
//! session and first message (id and line), with that message's time.
//!
//! **Derived, incremental, rebuildable.** Chunks are made from the index's own message rows
//! (`idx_messages` and their full text), never from the files, after a refresh. Each session
//! remembers the `messages.jsonl` watermark its chunks were made from (`idx_chunk_state`): an
//! appended log re-chunks from its last (open) chunk on, a replaced or shrunk one from the
//! start, an unchanged one not at all. A vector is kept for a chunk whose text (by its hash) is
//! unchanged, and reused for the same text anywhere (forks, imports of the same history).
//! Chunks and vectors belong to one embedder (`idx_embed_model`: its id and window): another
//! starts over. A session that goes from the index takes its chunks with it.
//!
//! **Vectors** are unit length, stored one signed byte a dimension (`round(x × 127)`); a query
//! scores every stored vector of its scope by dot product (a scan: tens of thousands of chunks
//! a query, in milliseconds). Missing vectors are only missing hits: word search answers
//! without them. A front end may read the scope's vectors before it has the query's vector
//! ([`SessionIndex::vectors_ahead`], while its model loads) and hand them to the search
//! ([`Meaning::vectors_ahead`]): the same hits, without reading them again.
//!
//! **Fusion** is reciprocal rank fusion (`Σ weight / (60 + rank)`) of the words' ranking (BM25,
//! as [`SessionIndex::search`] orders it) and the vectors' (by similarity), per chunk: a word
//! hit counts for the chunk that holds its message, weighted by the share of the query's words
//! it holds (a hit by most of the words, as a question or a paraphrase sharing a few common
//! words gets, is weaker evidence than the turn nearest in meaning; a hit by every word counts
//! whole), and a chunk's hit shows the best word hit in it when there is one (its snippet and
//! matches), else the chunk's first message.
//!
//! **Weak is not nothing.** No chunk is left out for being far in meaning: a query whose answer
//! the model reads poorly still finds it among the nearest. A hit found by meaning alone and
//! less similar than [`Meaning::strong_similarity`] (`embed.minSimilarity`) is marked weak
//! ([`Strength::Weak`]), so that nonsense comes back as "nothing strong; the nearest", never as
//! an answer; such a similarity adds nothing to a word hit's score, and the weak come after
//! every strong hit ([`fused_order`]).

use std::collections::HashMap;

use freecode_core::project_key::trim_separators;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use super::query::{Strength, WordHit, cut, in_project_sql, lead_snippet, title_of};
use super::{SearchHit, SearchQuery, SessionIndex, db_err};
use crate::error::Result;

/// The most characters a message after the first of a chunk gives it.
pub const STEP_CHARS: usize = 300;
/// Reciprocal rank fusion's constant (the value its authors and most systems use).
const RRF_K: f64 = 60.0;

/// How `search` finds messages.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// The words (FTS5, BM25): every query word begins a word of the message.
    #[default]
    Words,
    /// The meaning: chunks nearest the query's vector.
    Meaning,
    /// Both, fused.
    Both,
}

impl SearchMode {
    /// Its name on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Words => "words",
            SearchMode::Meaning => "meaning",
            SearchMode::Both => "both",
        }
    }
}

impl std::str::FromStr for SearchMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "words" => Ok(SearchMode::Words),
            "meaning" => Ok(SearchMode::Meaning),
            "both" => Ok(SearchMode::Both),
            other => Err(format!(
                "unknown search mode {other:?}: words, meaning or both"
            )),
        }
    }
}

/// Which rankings found a hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FoundBy {
    /// Its words only.
    Words,
    /// Its meaning only.
    Meaning,
    /// Both.
    Both,
    /// The query is the session's id (freecode's or its source agent's, or a unique prefix).
    Id,
}

/// The query's vector, and the embedder that made it.
#[derive(Debug, Clone, Copy)]
pub struct Meaning<'a> {
    /// The embedder's id: vectors of another are not compared.
    pub model: &'a str,
    /// The query, unit length.
    pub vector: &'a [f32],
    /// The floor of a strong hit: a chunk found by meaning alone and less similar than this to
    /// the query is a weak hit ([`Strength::Weak`]: a query about nothing in the history finds
    /// nothing strong), never left out (a real answer may be that far).
    pub strong_similarity: f32,
    /// The scope's vectors read before the query's vector was known
    /// ([`SessionIndex::vectors_ahead`]), scored instead of reading them again when they are
    /// this embedder's.
    pub vectors_ahead: Option<&'a VectorsAhead>,
    /// The words' hits found before the query's vector was known
    /// ([`SessionIndex::words_ahead`]), fused instead of searching again.
    pub words_ahead: Option<&'a WordsAhead>,
}

/// The words' hits of a search by both, found before the query's vector is known, so that a
/// front end can search while the model loads ([`SessionIndex::words_ahead`]).
#[derive(Debug, Clone, Default)]
pub struct WordsAhead {
    query: SearchQuery,
    hits: Vec<WordHit>,
}

impl VectorsAhead {
    /// Whether they were read for `q`'s scope (project, times, agent, statuses).
    fn in_scope_of(&self, q: &SearchQuery) -> bool {
        let a = &self.query;
        (&a.project, a.since, a.until, &a.agent, a.all)
            == (&q.project, q.since, q.until, &q.agent, q.all)
    }
}

/// How many word hits and chunks by meaning a search by both fuses for a page of `limit`:
/// deeper than the page, since fusion reorders.
fn fusion_depth(limit: usize) -> usize {
    (limit * 3).max(30)
}

/// The stored vectors of a search's scope, read before the query's vector is known, so that a
/// front end can read them while the model loads ([`SessionIndex::vectors_ahead`]).
#[derive(Debug, Clone, Default)]
pub struct VectorsAhead {
    model: String,
    /// The search they were read for (its scope is what counts).
    query: SearchQuery,
    ids: Vec<i64>,
    bytes: Vec<u8>,
    dim: usize,
}

/// Fewer distinct words than this that carry meaning ([`says_little`]), and a chunk ranks
/// after every chunk that says more.
pub const NEAR_EMPTY_WORDS: usize = 4;

/// Whether `text` says too little to be judged by meaning: fewer than [`NEAR_EMPTY_WORDS`]
/// distinct words once stop words and redaction markers (`[REDACTED…]`, any case of
/// brackets' content starting so) are left out: "Please continue.", "[REDACTED_PROMPT]".
/// Such a text's vector sits near every query's, so it would float above real answers.
pub fn says_little<'a>(texts: impl IntoIterator<Item = &'a str>) -> bool {
    let stop = super::query::stop_word_set();
    let mut seen = std::collections::HashSet::new();
    for text in texts {
        let mut rest = text;
        let mut plain = String::new();
        while let Some(at) = rest.find("[REDACTED") {
            plain.push_str(&rest[..at]);
            plain.push(' ');
            rest = rest[at..].find(']').map_or("", |end| &rest[at + end + 1..]);
        }
        plain.push_str(rest);
        for w in super::query::words(&plain) {
            if w.chars().count() > 1 && !stop.contains(w.as_str()) {
                seen.insert(w);
                if seen.len() >= NEAR_EMPTY_WORDS {
                    return false;
                }
            }
        }
    }
    true
}

/// What [`SessionIndex::sync_chunks`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkSync {
    /// Sessions whose chunks were made again (whole or from their open chunk).
    pub sessions: usize,
    /// Chunks written.
    pub chunks: usize,
    /// Of them, how many kept or reused a vector.
    pub reused: usize,
}

/// How far the vectors are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChunkStatus {
    /// The embedder the chunks are for, if any.
    pub model: Option<String>,
    /// Chunks.
    pub chunks: u64,
    /// Of them, with a vector.
    pub embedded: u64,
}

/// A chunk without its vector, with the text to embed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingChunk {
    /// Its row.
    pub id: i64,
    /// The hash of `text` (a vector is stored only while the chunk still has this text).
    pub hash: i64,
    /// What to embed.
    pub text: String,
}

/// A session whose chunks are behind: its id, its log's inode and offset now, and what its
/// chunks were made from (inode, offset, open chunk's line), if anything.
type ChangedSession = (String, i64, i64, Option<(i64, i64, i64)>);

/// A chunk being made.
struct Building {
    line: i64,
    end_line: i64,
    msg_id: String,
    at: i64,
    text: String,
    chars: usize,
}

/// 64-bit FNV-1a: stable across runs and builds (the hashes are stored).
fn text_hash(text: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// A unit vector as stored: one signed byte a dimension.
pub fn quantize(v: &[f32]) -> Vec<u8> {
    v.iter()
        .map(|x| (x * 127.0).round().clamp(-127.0, 127.0) as i8 as u8)
        .collect()
}

/// The dot product of a stored vector and a quantized query, scaled back to `[-1, 1]`.
fn score(stored: &[u8], query: &[i8]) -> f32 {
    let dot: i32 = stored
        .iter()
        .zip(query)
        .map(|(&a, &b)| i32::from(a as i8) * i32::from(b))
        .sum();
    dot as f32 / (127.0 * 127.0)
}

/// Cuts a session's messages (from the index, in line order) into chunks of at most `window`
/// characters.
struct Chunker {
    window: usize,
    current: Option<Building>,
    done: Vec<Building>,
}

impl Chunker {
    fn new(window: usize) -> Self {
        Self {
            window: window.max(STEP_CHARS * 2),
            current: None,
            done: Vec::new(),
        }
    }

    fn flush(&mut self) {
        if let Some(b) = self.current.take()
            && !b.text.is_empty()
        {
            self.done.push(b);
        }
    }

    fn message(&mut self, line: i64, msg_id: &str, role: &str, at: i64, text: &str) {
        let user = role == "user";
        if user {
            self.flush();
        }
        let piece = cut(text, if user { self.window } else { STEP_CHARS });
        let n = piece.chars().count();
        if let Some(b) = &self.current
            && !b.text.is_empty()
            && b.chars + 1 + n > self.window
        {
            self.flush();
        }
        let b = self.current.get_or_insert_with(|| Building {
            line,
            end_line: line,
            msg_id: msg_id.to_owned(),
            at,
            text: String::new(),
            chars: 0,
        });
        b.end_line = line;
        if !piece.is_empty() {
            if !b.text.is_empty() {
                b.text.push('\n');
                b.chars += 1;
            }
            b.text.push_str(piece);
            b.chars += n;
        }
    }

    fn finish(mut self) -> Vec<Building> {
        self.flush();
        self.done
    }
}

/// The messages of `session` from `from_line` on, chunked.
fn chunks_of(
    conn: &rusqlite::Connection,
    session: &str,
    from_line: i64,
    window: usize,
) -> rusqlite::Result<Vec<Building>> {
    let mut stmt = conn.prepare_cached(
        "SELECT m.line, m.msgId, m.role, m.timestamp, f.text
         FROM idx_messages m JOIN idx_messages_fts f ON f.rowid = m.rowid
         WHERE m.sessionId = ?1 AND m.line >= ?2 ORDER BY m.line",
    )?;
    let mut rows = stmt.query(params![session, from_line])?;
    let mut chunker = Chunker::new(window);
    while let Some(r) = rows.next()? {
        let text: Option<String> = r.get(4)?;
        chunker.message(
            r.get(0)?,
            &r.get::<_, String>(1)?,
            &r.get::<_, String>(2)?,
            r.get(3)?,
            text.as_deref().unwrap_or(""),
        );
    }
    Ok(chunker.finish())
}

impl SessionIndex {
    /// Brings the chunks up to date with the indexed messages, for the embedder `model` with
    /// a window of `window` characters (call it after a refresh). One write transaction; none
    /// when nothing changed.
    pub fn sync_chunks(&mut self, model: &str, window: usize) -> Result<ChunkSync> {
        let db = self.path().to_owned();
        let mut report = ChunkSync::default();
        let window_i = i64::try_from(window).unwrap_or(i64::MAX);
        let current: Option<(String, i64)> = self
            .conn
            .query_row(
                "SELECT model, windowSize FROM idx_embed_model WHERE only = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_err(&db))?;
        let same_model = current
            .as_ref()
            .is_some_and(|(m, w)| m == model && *w == window_i);
        if same_model && !self.chunks_stale()? {
            return Ok(report);
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err(&db))?;
        let model_now: Option<(String, i64)> = tx
            .query_row(
                "SELECT model, windowSize FROM idx_embed_model WHERE only = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_err(&db))?;
        if model_now
            .as_ref()
            .is_none_or(|(m, w)| m != model || *w != window_i)
        {
            tx.execute_batch("DELETE FROM idx_chunks; DELETE FROM idx_chunk_state;")
                .map_err(db_err(&db))?;
            tx.execute(
                "INSERT INTO idx_embed_model (only, model, windowSize) VALUES (1, ?1, ?2)
                 ON CONFLICT(only) DO UPDATE SET model = ?1, windowSize = ?2",
                params![model, window_i],
            )
            .map_err(db_err(&db))?;
        }
        tx.execute_batch(
            "DELETE FROM idx_chunks WHERE sessionId NOT IN (SELECT id FROM idx_sessions);
             DELETE FROM idx_chunk_state WHERE sessionId NOT IN (SELECT id FROM idx_sessions);",
        )
        .map_err(db_err(&db))?;
        let changed: Vec<ChangedSession> = {
            let mut stmt = tx
                .prepare(
                    "SELECT s.id, s.logIno, s.logOffset, st.logIno, st.logOffset, st.openLine
                     FROM idx_sessions s LEFT JOIN idx_chunk_state st ON st.sessionId = s.id
                     WHERE st.sessionId IS NULL OR st.logIno != s.logIno OR st.logOffset != s.logOffset",
                )
                .map_err(db_err(&db))?;
            let rows = stmt
                .query_map([], |r| {
                    let prior = match r.get::<_, Option<i64>>(3)? {
                        Some(ino) => Some((ino, r.get(4)?, r.get(5)?)),
                        None => None,
                    };
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, prior))
                })
                .map_err(db_err(&db))?;
            rows.collect::<rusqlite::Result<_>>().map_err(db_err(&db))?
        };
        for (id, ino, offset, prior) in changed {
            // Appended: the chunks before the open one stand; else all go.
            let from_line = match prior {
                Some((p_ino, p_off, open)) if p_ino == ino && offset >= p_off => open,
                _ => 0,
            };
            let mut kept: HashMap<i64, Vec<u8>> = HashMap::new();
            {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT hash, vec FROM idx_chunks
                         WHERE sessionId = ?1 AND line >= ?2 AND vec IS NOT NULL",
                    )
                    .map_err(db_err(&db))?;
                let rows = stmt
                    .query_map(params![id, from_line], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(db_err(&db))?;
                for row in rows {
                    let (h, v) = row.map_err(db_err(&db))?;
                    kept.insert(h, v);
                }
            }
            tx.execute(
                "DELETE FROM idx_chunks WHERE sessionId = ?1 AND line >= ?2",
                params![id, from_line],
            )
            .map_err(db_err(&db))?;
            let chunks = chunks_of(&tx, &id, from_line, window).map_err(db_err(&db))?;
            let mut open_line = from_line;
            for c in &chunks {
                let hash = text_hash(&c.text);
                let vec = match kept.get(&hash) {
                    Some(v) => Some(v.clone()),
                    None => tx
                        .prepare_cached(
                            "SELECT vec FROM idx_chunks WHERE hash = ?1 AND vec IS NOT NULL LIMIT 1",
                        )
                        .and_then(|mut st| st.query_row([hash], |r| r.get(0)).optional())
                        .map_err(db_err(&db))?,
                };
                report.reused += usize::from(vec.is_some());
                tx.prepare_cached(
                    "INSERT INTO idx_chunks (sessionId, line, endLine, msgId, at, hash, vec)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .and_then(|mut st| {
                    st.execute(params![id, c.line, c.end_line, c.msg_id, c.at, hash, vec])
                })
                .map_err(db_err(&db))?;
                open_line = c.line;
            }
            report.chunks += chunks.len();
            report.sessions += 1;
            tx.execute(
                "INSERT INTO idx_chunk_state (sessionId, logIno, logOffset, openLine) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(sessionId) DO UPDATE SET logIno = ?2, logOffset = ?3, openLine = ?4",
                params![id, ino, offset, open_line],
            )
            .map_err(db_err(&db))?;
        }
        tx.commit().map_err(db_err(&db))?;
        Ok(report)
    }

    /// Whether any session's chunks are behind its messages (or gone with it): two counts.
    fn chunks_stale(&self) -> Result<bool> {
        let db = self.path();
        let behind: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM idx_sessions s LEFT JOIN idx_chunk_state st ON st.sessionId = s.id
                 WHERE st.sessionId IS NULL OR st.logIno != s.logIno OR st.logOffset != s.logOffset",
                [],
                |r| r.get(0),
            )
            .map_err(db_err(db))?;
        let orphans: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM idx_chunk_state WHERE sessionId NOT IN (SELECT id FROM idx_sessions)",
                [],
                |r| r.get(0),
            )
            .map_err(db_err(db))?;
        Ok(behind > 0 || orphans > 0)
    }

    /// The embedder the chunks are for, if any.
    fn embed_model(&self) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT model FROM idx_embed_model WHERE only = 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err(self.path()))
    }

    /// How many chunks there are and how many have vectors.
    pub fn chunk_status(&self) -> Result<ChunkStatus> {
        let db = self.path();
        let model = self.embed_model()?;
        // Both counts from indexes (the smallest one, and the partial index of the chunks
        // without a vector), not by reading every chunk's row and vector.
        let (chunks, pending): (i64, i64) = self
            .conn
            .query_row(
                "SELECT (SELECT count(*) FROM idx_chunks),
                        (SELECT count(*) FROM idx_chunks WHERE vec IS NULL)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db_err(db))?;
        let chunks = u64::try_from(chunks).unwrap_or(0);
        Ok(ChunkStatus {
            model,
            chunks,
            embedded: chunks.saturating_sub(u64::try_from(pending).unwrap_or(0)),
        })
    }

    /// Up to `limit` chunks without a vector, oldest first, with their texts.
    pub fn pending_chunks(&self, limit: usize) -> Result<Vec<PendingChunk>> {
        let db = self.path().to_owned();
        let window: i64 = self
            .conn
            .query_row(
                "SELECT windowSize FROM idx_embed_model WHERE only = 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err(&db))?
            .unwrap_or(0);
        let rows: Vec<(i64, String, i64, i64, i64)> = {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT id, sessionId, line, endLine, hash FROM idx_chunks WHERE vec IS NULL
                     ORDER BY id LIMIT ?1",
                )
                .map_err(db_err(&db))?;
            let rows = stmt
                .query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .map_err(db_err(&db))?;
            rows.collect::<rusqlite::Result<_>>().map_err(db_err(&db))?
        };
        let mut out = Vec::with_capacity(rows.len());
        for (id, session, line, end_line, hash) in rows {
            // The chunk's text is made again from its messages, as `sync_chunks` made it.
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT m.line, m.msgId, m.role, m.timestamp, f.text
                     FROM idx_messages m JOIN idx_messages_fts f ON f.rowid = m.rowid
                     WHERE m.sessionId = ?1 AND m.line >= ?2 AND m.line <= ?3 ORDER BY m.line",
                )
                .map_err(db_err(&db))?;
            let mut rows = stmt
                .query(params![session, line, end_line])
                .map_err(db_err(&db))?;
            // Only its first message can be a user's (a user message opens a chunk), and its
            // messages fitted the window: the chunker gives this one chunk again.
            let mut chunker = Chunker::new(usize::try_from(window).unwrap_or(usize::MAX));
            while let Some(r) = rows.next().map_err(db_err(&db))? {
                let text: Option<String> = r.get(4).map_err(db_err(&db))?;
                chunker.message(
                    r.get(0).map_err(db_err(&db))?,
                    &r.get::<_, String>(1).map_err(db_err(&db))?,
                    &r.get::<_, String>(2).map_err(db_err(&db))?,
                    r.get(3).map_err(db_err(&db))?,
                    text.as_deref().unwrap_or(""),
                );
            }
            let text = chunker
                .finish()
                .into_iter()
                .map(|b| b.text)
                .collect::<Vec<_>>()
                .join("\n");
            out.push(PendingChunk { id, hash, text });
        }
        Ok(out)
    }

    /// Stores vectors for chunks that still have the text they were made from; returns how
    /// many were stored.
    pub fn put_vectors(&mut self, vectors: &[(i64, i64, Vec<f32>)]) -> Result<usize> {
        let db = self.path().to_owned();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err(&db))?;
        let mut stored = 0;
        for (id, hash, v) in vectors {
            stored += tx
                .prepare_cached("UPDATE idx_chunks SET vec = ?3 WHERE id = ?1 AND hash = ?2")
                .and_then(|mut st| st.execute(params![id, hash, quantize(v)]))
                .map_err(db_err(&db))?;
        }
        tx.commit().map_err(db_err(&db))?;
        Ok(stored)
    }

    /// The `k` chunks nearest `meaning` in `q`'s scope (project, agent, status, since), with
    /// their similarity: best first, except that
    /// chunks that say little ([`says_little`]) come after all the others. None when the
    /// vectors are another embedder's.
    fn nearest(&self, q: &SearchQuery, meaning: Meaning<'_>, k: usize) -> Result<Vec<(i64, f32)>> {
        // Deeper than k, so that what says little can make way for what says more.
        let near = self.nearest_by_score(q, meaning, k.saturating_mul(2).saturating_add(10))?;
        let mut full = Vec::with_capacity(near.len());
        let mut little = Vec::new();
        for (chunk, s) in near {
            if says_little(self.chunk_texts(chunk)?.iter().map(String::as_str)) {
                little.push((chunk, s));
            } else {
                full.push((chunk, s));
            }
        }
        full.extend(little);
        full.truncate(k);
        Ok(full)
    }

    /// The texts of a chunk's messages, in order.
    fn chunk_texts(&self, chunk: i64) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT f.text FROM idx_chunks c
                 JOIN idx_messages m ON m.sessionId = c.sessionId
                      AND m.line >= c.line AND m.line <= c.endLine
                 JOIN idx_messages_fts f ON f.rowid = m.rowid
                 WHERE c.id = ?1 ORDER BY m.line",
            )
            .map_err(db_err(self.path()))?;
        let rows = stmt
            .query_map([chunk], |r| r.get::<_, Option<String>>(0))
            .map_err(db_err(self.path()))?;
        let mut texts = Vec::new();
        for r in rows {
            texts.extend(r.map_err(db_err(self.path()))?);
        }
        Ok(texts)
    }

    /// Each stored vector of `q`'s scope, as `each(chunk id, its bytes)`, until `each` says
    /// no more (`false`).
    fn each_vector(&self, q: &SearchQuery, mut each: impl FnMut(i64, &[u8]) -> bool) -> Result<()> {
        let db = self.path();
        let sql = format!(
            "SELECT c.id, c.vec FROM idx_chunks c JOIN idx_sessions s ON s.id = c.sessionId
             WHERE c.vec IS NOT NULL
               AND (?4 OR s.status NOT IN ('deleted', 'archived'))
               AND (?1 IS NULL OR {in_project})
               AND (?2 IS NULL OR c.at >= ?2)
               AND (?5 IS NULL OR c.at < ?5)
               AND (?3 IS NULL OR s.agent = ?3)",
            in_project = in_project_sql(1),
        );
        let project = q.project.as_deref().map(trim_separators);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(db_err(db))?;
        let mut rows = stmt
            .query(params![project, q.since, q.agent, q.all, q.until])
            .map_err(db_err(db))?;
        while let Some(r) = rows.next().map_err(db_err(db))? {
            let id: i64 = r.get(0).map_err(db_err(db))?;
            if let Ok(bytes) = r.get_ref(1).map_err(db_err(db))?.as_blob()
                && !each(id, bytes)
            {
                break;
            }
        }
        Ok(())
    }

    /// The vectors of `q`'s scope, read now so that scoring them later costs no reading (a front
    /// end reads them while its model loads: [`Meaning::vectors_ahead`]); `None` when the scope holds
    /// more than `max` chunks with a vector (they are read as the search scores them, so that
    /// memory stays bounded) or no embedder's vectors at all.
    pub fn vectors_ahead(&self, q: &SearchQuery, max: usize) -> Result<Option<VectorsAhead>> {
        let Some(model) = self.embed_model()? else {
            return Ok(None);
        };
        let mut ahead = VectorsAhead {
            model,
            query: q.clone(),
            ..VectorsAhead::default()
        };
        let mut fits = true;
        self.each_vector(q, |id, bytes| {
            fits = ahead.ids.len() < max && (ahead.dim == 0 || bytes.len() == ahead.dim);
            if fits {
                ahead.dim = bytes.len();
                ahead.ids.push(id);
                ahead.bytes.extend_from_slice(bytes);
            }
            fits
        })?;
        Ok(fits.then_some(ahead))
    }

    /// The words' hits a search by both of `q` fuses ([`Meaning::words_ahead`]), found now in an
    /// index the caller has brought up to date.
    pub fn words_ahead(&self, q: &SearchQuery) -> Result<WordsAhead> {
        let hits = if q.limit == 0 || q.text.trim().is_empty() {
            Vec::new()
        } else {
            self.word_hits(&SearchQuery {
                limit: fusion_depth(q.limit),
                ..q.clone()
            })?
        };
        Ok(WordsAhead {
            query: q.clone(),
            hits,
        })
    }

    /// The `k` chunks most similar to `meaning` in `q`'s scope, best first.
    fn nearest_by_score(
        &self,
        q: &SearchQuery,
        meaning: Meaning<'_>,
        k: usize,
    ) -> Result<Vec<(i64, f32)>> {
        let model = self.embed_model()?;
        if model.as_deref() != Some(meaning.model) || k == 0 {
            return Ok(Vec::new());
        }
        let query: Vec<i8> = quantize(meaning.vector)
            .into_iter()
            .map(|b| b as i8)
            .collect();
        // The best k so far, worst first (k is small: a sorted vector beats a heap of floats).
        let mut best: Vec<(i64, f32)> = Vec::with_capacity(k + 1);
        let mut consider = |id: i64, bytes: &[u8]| {
            if bytes.len() != query.len() {
                return true;
            }
            let s = score(bytes, &query);
            if best.len() == k && best.first().is_some_and(|&(_, worst)| s <= worst) {
                return true;
            }
            let at = best.partition_point(|&(_, x)| x < s);
            best.insert(at, (id, s));
            if best.len() > k {
                best.remove(0);
            }
            true
        };
        match meaning.vectors_ahead {
            Some(a) if a.model == meaning.model && a.dim == query.len() && a.in_scope_of(q) => {
                for (id, bytes) in a.ids.iter().zip(a.bytes.chunks_exact(a.dim)) {
                    consider(*id, bytes);
                }
            }
            _ => self.each_vector(q, consider)?,
        }
        best.reverse();
        Ok(best)
    }

    /// The chunk that holds message `line` of `session`.
    fn chunk_at(&self, session: &str, line: i64) -> Result<Option<i64>> {
        self.conn
            .prepare_cached(
                "SELECT id FROM idx_chunks WHERE sessionId = ?1 AND line <= ?2
                 ORDER BY line DESC LIMIT 1",
            )
            .and_then(|mut st| {
                st.query_row(params![session, line], |r| r.get(0))
                    .optional()
            })
            .map_err(db_err(self.path()))
    }

    /// A chunk shown as a hit: its first message, with the start of its text as the snippet.
    fn chunk_hit(&self, chunk: i64) -> Result<Option<SearchHit>> {
        self.conn
            .prepare_cached(
                "SELECT c.sessionId, s.metaJson, s.projectPath, c.msgId, m.role, c.at, f.text,
                        s.agent
                 FROM idx_chunks c JOIN idx_sessions s ON s.id = c.sessionId
                 LEFT JOIN idx_messages m ON m.sessionId = c.sessionId AND m.line = c.line
                 LEFT JOIN idx_messages_fts f ON f.rowid = m.rowid
                 WHERE c.id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([chunk], |r| {
                    let meta: String = r.get(1)?;
                    let text: Option<String> = r.get(6)?;
                    let snippet = lead_snippet(&text.unwrap_or_default());
                    Ok(SearchHit {
                        session_id: r.get(0)?,
                        title: title_of(&meta),
                        project_path: r.get(2)?,
                        agent: r.get(7)?,
                        message_id: r.get(3)?,
                        role: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                        timestamp: r.get(5)?,
                        snippet,
                        matches: Vec::new(),
                        missing: Vec::new(),
                        rank: 0.0,
                        found_by: FoundBy::Meaning,
                        similarity: None,
                        strength: Strength::Weak,
                        other_matches: 0,
                        other_message_ids: Vec::new(),
                    })
                })
                .optional()
            })
            .map_err(db_err(self.path()))
    }

    /// Searches by `mode`: the words as [`SessionIndex::search`] does, the meaning (the chunks
    /// nearest `meaning`), or both fused. `meaning` is needed for the last two (without it, or
    /// with vectors of another embedder, they find by words alone). Brings the index up to date
    /// first; the chunks are as the last [`SessionIndex::sync_chunks`] left them.
    pub fn search_mode(
        &mut self,
        q: &SearchQuery,
        mode: SearchMode,
        meaning: Option<Meaning<'_>>,
    ) -> Result<Vec<SearchHit>> {
        let meaning = match (mode, meaning) {
            (SearchMode::Words, _) | (_, None) => return self.search(q),
            (_, Some(m)) => m,
        };
        self.refresh(|_, _| {})?;
        self.search_mode_looked(q, mode, meaning)
    }

    /// [`SessionIndex::search_mode`] by meaning or both, in an index the caller has just brought
    /// up to date (one look a search, not one for each step of it).
    pub fn search_mode_looked(
        &mut self,
        q: &SearchQuery,
        mode: SearchMode,
        meaning: Meaning<'_>,
    ) -> Result<Vec<SearchHit>> {
        if mode == SearchMode::Words {
            return self.search(q);
        }
        if q.limit == 0 || q.text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let depth = fusion_depth(q.limit);
        let near = self.nearest(
            q,
            meaning,
            if mode == SearchMode::Meaning {
                q.limit
            } else {
                depth
            },
        )?;
        if mode == SearchMode::Meaning {
            let mut hits = Vec::with_capacity(near.len());
            for (chunk, s) in near {
                if let Some(mut h) = self.chunk_hit(chunk)? {
                    h.rank = -f64::from(s);
                    h.similarity = Some(f64::from(s));
                    h.strength = strength(false, Some(s), meaning);
                    hits.push(h);
                }
            }
            return Ok(hits);
        }
        let words = match meaning.words_ahead {
            Some(w) if w.query == *q => w.hits.clone(),
            _ => self.word_hits(&SearchQuery {
                limit: depth,
                ..q.clone()
            })?,
        };
        let mut fused: HashMap<(i64, String), Fused> = HashMap::new();
        let mut order = 0;
        let mut word_rank = 0usize;
        // A word hit counts as much as the share of the query's words it holds: one that lacks
        // some (a question, a paraphrase sharing a few common words) is weaker evidence than
        // the nearest turn in meaning.
        let query_words = super::query::terms(&q.text).words.len().max(1);
        for WordHit { hit, line } in words {
            // A message not chunked (yet) stands for itself.
            let key = match self.chunk_at(&hit.session_id, line)? {
                Some(c) => (c, String::new()),
                None => (-1, format!("{}\u{0}{}", hit.session_id, hit.message_id)),
            };
            if let Some(f) = fused.get_mut(&key) {
                // A later word hit in a chunk already ranked adds nothing.
                let _ = f;
                continue;
            }
            word_rank += 1;
            order += 1;
            fused.insert(
                key,
                Fused {
                    score: (query_words - hit.missing.len().min(query_words)) as f64
                        / query_words as f64
                        / (RRF_K + word_rank as f64),
                    word: Some(hit),
                    by_words: true,
                    by_meaning: false,
                    similarity: None,
                    strong: true,
                    order,
                },
            );
        }
        for (rank, (chunk, s)) in near.iter().enumerate() {
            order += 1;
            let f = fused.entry((*chunk, String::new())).or_insert(Fused {
                score: 0.0,
                word: None,
                by_words: false,
                by_meaning: false,
                similarity: None,
                strong: false,
                order,
            });
            f.similarity = Some(*s);
            f.strong |= *s >= meaning.strong_similarity;
            // Less near than the floor of a strong hit, meaning orders what the words did not
            // find (the nearest there is, weak) but is no evidence for what they did.
            if f.by_words && *s < meaning.strong_similarity {
                continue;
            }
            f.score += 1.0 / (RRF_K + (rank + 1) as f64);
            f.by_meaning = true;
        }
        let mut ranked: Vec<((i64, String), Fused)> = fused.into_iter().collect();
        ranked.sort_by(|a, b| fused_order(&a.1, &b.1));
        let mut hits = Vec::new();
        for ((chunk, _), f) in ranked.into_iter().take(q.limit) {
            let found_by = match (f.by_words, f.by_meaning) {
                (true, true) => FoundBy::Both,
                (true, false) => FoundBy::Words,
                _ => FoundBy::Meaning,
            };
            let hit = match f.word {
                Some(h) => Some(h),
                None => self.chunk_hit(chunk)?,
            };
            if let Some(mut h) = hit {
                h.rank = -f.score;
                h.found_by = found_by;
                h.similarity = f.similarity.map(f64::from);
                h.strength = strength(f.by_words, f.similarity, meaning);
                hits.push(h);
            }
        }
        Ok(hits)
    }
}

/// How strong a hit is: strong when the words found it (`by_words`: every word or most of
/// them, as a search by words finds) or its similarity reaches the floor of a strong hit.
fn strength(by_words: bool, similarity: Option<f32>, meaning: Meaning<'_>) -> Strength {
    if by_words || similarity.is_some_and(|s| s >= meaning.strong_similarity) {
        Strength::Strong
    } else {
        Strength::Weak
    }
}

/// A chunk (or a message not chunked yet) as the fusion of words and meaning ranks it: its
/// fused score, and the best word hit in it.
pub(super) struct Fused {
    pub(super) score: f64,
    pub(super) word: Option<SearchHit>,
    pub(super) by_words: bool,
    pub(super) by_meaning: bool,
    pub(super) similarity: Option<f32>,
    /// Found by the words or at least [`Meaning::strong_similarity`] near in meaning.
    pub(super) strong: bool,
    pub(super) order: usize,
}

/// The fusion's order. Exact first: a message holding every word of the query ranks above
/// one that lacks a word or was found by meaning alone, whatever the meaning score; then the
/// strong above the weak (the nearest by meaning that nothing else found come after every hit
/// with evidence); within each, the fused score, then the order found.
pub(super) fn fused_order(a: &Fused, b: &Fused) -> std::cmp::Ordering {
    let complete = |f: &Fused| f.word.as_ref().is_some_and(|w| w.missing.is_empty());
    complete(b)
        .cmp(&complete(a))
        .then(b.strong.cmp(&a.strong))
        .then(b.score.total_cmp(&a.score))
        .then(a.order.cmp(&b.order))
}

#[cfg(test)]
mod tests;
