//! The index's readers: full-text search (FTS5, ranked, with snippets) and stats — and the same
//! answers computed by scanning the files, for when SQLite cannot be used.
//!
//! Matching is the same on both paths: the query is split into words (Unicode letters and digits,
//! lower-cased), stop words left out ([`terms`]: "why did the server not start" asks for
//! `server` and `start`); a message matches when every query word begins some word of its text
//! (an FTS5 prefix query). When fewer messages than the limit hold them all and the query has
//! three words or more, messages holding more than half of them follow ([`Terms::need`]),
//! each naming the words it lacks ([`SearchHit::missing`]). So is the order: the messages with
//! every word first, then BM25 as FTS5 computes it (`k1` 1.2, `b` 0.75, over every indexed
//! message), then newest first, then session and message id; past [`RANK_LIMIT`] matches,
//! newest first without ranking. Snippets are plain text with the matching words' character
//! offsets ([`SearchHit::matches`]): markers inside the text would collide with code
//! (`vec![1, 2]`).

use std::collections::BTreeMap;
use std::path::Path;

use freecode_core::SessionId;
use freecode_core::project_key::{trim_separators, within_project};
use freecode_core::rollout::EventKind;
use rusqlite::{Transaction, TransactionBehavior, params};
use serde::Serialize;

use super::derive::message_text;
use super::{FoundBy, Problem, SessionIndex, db_err, log_problem};
use crate::error::{Result, StoreError};
use crate::rollout::{events_path, read_events};
use crate::session::{ListFilter, SessionStore};

/// A search request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// The words to find.
    pub text: String,
    /// Only sessions of this project path or below it ([`within_project`]).
    pub project: Option<String>,
    /// Only messages at or after this time, ms (each message's own time).
    pub since: Option<i64>,
    /// Only messages before this time, ms (each message's own time).
    pub until: Option<i64>,
    /// At most this many hits.
    pub limit: usize,
    /// Archived and deleted sessions too (`search --all`); by default they are left out.
    pub all: bool,
    /// Only sessions this agent wrote ([`freecode_core::SessionMeta::agent`]); a name no
    /// session has matches nothing.
    pub agent: Option<String>,
}

impl SearchQuery {
    /// Whether `meta`'s session is in the query's scope (status, project, agent; the times
    /// are each message's).
    pub fn selects(&self, meta: &freecode_core::SessionMeta) -> bool {
        (self.all || !matches!(meta.status.as_str(), "deleted" | "archived"))
            && self
                .project
                .as_deref()
                .is_none_or(|p| within_project(&meta.project_path, p))
            && self.agent.as_deref().is_none_or(|a| meta.agent() == a)
    }
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
    /// The query's words (stop words left out) that the message lacks: a hit of most of the
    /// words, when too few messages hold them all. Absent when it holds every one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Relevance: lower is better (minus BM25 over the words the message holds, as FTS5
    /// computes it — 0 when more than [`RANK_LIMIT`] messages match and the newest are
    /// returned; minus the similarity by meaning, minus the fused score for both).
    pub rank: f64,
    /// Which ranking found it: `words`, `meaning`, or `both` (a search of both that each found).
    pub found_by: FoundBy,
    /// How near the query it is in meaning: the cosine similarity of the query's vector and
    /// the turn's (about 0 for unrelated text, 1 for the same), when meaning found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// How strong a hit it is: `strong` when it holds the query's words (every one, or most
    /// of them) or is at least `embed.minSimilarity` near in meaning; `weak` when it was found
    /// by meaning alone and is less near than that: the nearest there is, shown so that no real
    /// answer is hidden, and marked so that nothing is taken for an answer it is not.
    pub strength: Strength,
    /// A search by session: how many other messages of this session matched (among those
    /// the search looked at), and their ids, best first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other_matches: usize,
    /// Their ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_message_ids: Vec<String>,
}

/// How strong a hit is ([`SearchHit::strength`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strength {
    /// It holds the query's words, or is near it in meaning.
    Strong,
    /// Found by meaning alone, less near than the floor (`embed.minSimilarity`).
    Weak,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl SearchHit {
    /// A strong hit on message `m` of `meta`'s session, found by `found_by`, with `snippet`
    /// and nothing yet marked in it.
    fn on_message(
        meta: &freecode_core::SessionMeta,
        m: &freecode_core::StoredMessage,
        snippet: String,
        found_by: FoundBy,
    ) -> Self {
        Self {
            session_id: meta.id.clone(),
            title: meta.title.clone(),
            project_path: meta.project_path.clone(),
            agent: meta.agent().to_owned(),
            message_id: m.id.clone(),
            role: m.role.as_str().to_owned(),
            timestamp: m.timestamp,
            snippet,
            matches: Vec::new(),
            missing: Vec::new(),
            rank: 0.0,
            found_by,
            similarity: None,
            strength: Strength::Strong,
            other_matches: 0,
            other_message_ids: Vec::new(),
        }
    }

    /// Whether it is a strong hit.
    pub fn is_strong(&self) -> bool {
        self.strength == Strength::Strong
    }

    /// `hits` (ranked) one per session: each session's best hit, in the order of the bests,
    /// with its other matching messages (`other_matches`, `other_message_ids`); at most
    /// `limit` sessions. A session is strong when any of its messages is.
    pub fn by_session(hits: Vec<SearchHit>, limit: usize) -> Vec<SearchHit> {
        let mut out: Vec<SearchHit> = Vec::new();
        let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for h in hits {
            match at.get(&h.session_id) {
                Some(&i) => {
                    // A session is as strong as its strongest matching message.
                    if h.is_strong() {
                        out[i].strength = Strength::Strong;
                    }
                    out[i].other_matches += 1;
                    out[i].other_message_ids.push(h.message_id);
                }
                None => {
                    at.insert(h.session_id.clone(), out.len());
                    out.push(h);
                }
            }
        }
        out.truncate(limit);
        out
    }

    /// Why it matched, for a person, when the highlighted words do not say it all: `weak` for
    /// a weak hit, `by meaning 0.47` (the similarity), `by words and meaning 0.52`, and
    /// `missing: a, b` for a hit of most of the words; `None` for a hit of every word.
    pub fn why(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.is_strong() {
            parts.push("weak".to_owned());
        }
        match (self.found_by, self.similarity) {
            (FoundBy::Meaning, Some(s)) => parts.push(format!("by meaning {s:.2}")),
            (FoundBy::Both, Some(s)) => parts.push(format!("by words and meaning {s:.2}")),
            (FoundBy::Meaning, None) => parts.push("by meaning".to_owned()),
            (FoundBy::Id, _) => parts.push("by its id".to_owned()),
            _ => {}
        }
        if !self.missing.is_empty() {
            parts.push(format!("missing: {}", self.missing.join(", ")));
        }
        (!parts.is_empty()).then(|| parts.join(" · "))
    }
}

/// A word hit with its message's line (fusion finds its chunk by it).
#[derive(Debug, Clone)]
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

/// Session `id` as a hit of a search for its id (freecode's, or the one its source agent gave
/// it): its first user message (else its first message), [`FoundBy::Id`], strong; `None` when
/// it has no message or `q`'s scope leaves it out.
pub fn session_hit(
    store: &SessionStore,
    id: &SessionId,
    q: &SearchQuery,
) -> Result<Option<SearchHit>> {
    let meta = store.meta(id)?;
    if !q.selects(&meta) {
        return Ok(None);
    }
    // Read as the file is (a search writes nothing).
    let (mut blocks, _) = store.message_blocks_from(id, 0)?;
    let mut first = None;
    'read: while let Some(block) = blocks.next_block()? {
        for m in block.items {
            if m.role == freecode_core::message::Role::User {
                first = Some(m);
                break 'read;
            }
            first.get_or_insert(m);
        }
    }
    Ok(first.map(|m| {
        let snippet = lead_snippet(&message_text(&m));
        SearchHit::on_message(&meta, &m, snippet, FoundBy::Id)
    }))
}

/// Characters of a snippet made from a message's start ([`lead_snippet`]: a hit by meaning or
/// by id; about what FTS5's 16-token snippets hold).
const SNIPPET_CHARS: usize = 120;

/// `text`'s start as a hit's snippet: its first [`SNIPPET_CHARS`] characters on one line, `…`
/// where it was cut.
pub(super) fn lead_snippet(text: &str) -> String {
    let mut snippet = one_line(cut(text, SNIPPET_CHARS));
    if text.trim().chars().count() > SNIPPET_CHARS {
        snippet.push('…');
    }
    snippet
}

/// The first `max` characters of `s`, trimmed.
pub(super) fn cut(s: &str, max: usize) -> &str {
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
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

/// The most query words that "most of the words" is counted over: past it, the first this
/// many (the groups of words a hit may hold grow as `C(n, n/2 + 1)`: 56 at eight).
pub const MOST_WORDS_MAX: usize = 8;

/// What a query asks the words to find ([`terms`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Terms {
    /// The query's words, lower-cased, each once, stop words left out (all of them kept when
    /// the query is nothing but stop words).
    pub words: Vec<String>,
    /// How many of the first [`MOST_WORDS_MAX`] words a message that lacks some of them
    /// must hold: more than half. A message holding every word always matches; with one or two
    /// words, that is the only match.
    pub need: usize,
}

impl Terms {
    /// The words a message lacking some of them is matched on.
    pub fn most(&self) -> &[String] {
        &self.words[..self.words.len().min(MOST_WORDS_MAX)]
    }

    /// Whether a message lacking some words can match at all.
    pub fn relaxed(&self) -> bool {
        self.need < self.most().len()
    }
}

/// The stop words dropped from queries: English (NLTK's list), and the language of the
/// locale (`LC_ALL`, `LC_MESSAGES`, `LANG`) when NLTK has a list for it.
pub(super) fn stop_word_set() -> &'static std::collections::HashSet<&'static str> {
    static STOP: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    STOP.get_or_init(|| {
        let mut set: std::collections::HashSet<&'static str> = stop_words::lookup("en")
            .unwrap_or_default()
            .iter()
            .copied()
            .collect();
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
        if let Some(locale) = locale {
            let lang: String = locale
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect::<String>()
                .to_ascii_lowercase();
            if lang.len() == 2 && lang != "en" {
                set.extend(
                    stop_words::lookup(&lang)
                        .unwrap_or_default()
                        .iter()
                        .copied(),
                );
            }
        }
        set
    })
}

/// What `text` asks the words to find: its words ([`words`]) less stop words ("why did the
/// server not start" asks for `server` and `start`), and how many of them a hit needs.
pub fn terms(text: &str) -> Terms {
    let mut all = words(text);
    let mut seen = std::collections::HashSet::new();
    all.retain(|w| seen.insert(w.clone()));
    let stop = stop_word_set();
    let content: Vec<String> = all
        .iter()
        .filter(|w| !stop.contains(w.as_str()))
        .cloned()
        .collect();
    let words = if content.is_empty() { all } else { content };
    let need = words.len().min(MOST_WORDS_MAX) / 2 + 1;
    Terms { words, need }
}

fn fts_phrase(w: &str) -> String {
    format!("\"{}\"*", w.replace('"', "\"\""))
}

fn fts_query(words: &[String]) -> String {
    words
        .iter()
        .map(|w| fts_phrase(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every `k`-word group of `words`, in order.
fn groups(words: &[String], k: usize) -> Vec<Vec<&String>> {
    fn go<'a>(
        words: &'a [String],
        k: usize,
        from: usize,
        cur: &mut Vec<&'a String>,
        out: &mut Vec<Vec<&'a String>>,
    ) {
        if cur.len() == k {
            out.push(cur.clone());
            return;
        }
        for i in from..words.len() {
            if words.len() - i < k - cur.len() {
                break;
            }
            cur.push(&words[i]);
            go(words, k, i + 1, cur, out);
            cur.pop();
        }
    }
    let mut out = Vec::new();
    go(words, k, 0, &mut Vec::new(), &mut out);
    out
}

/// The FTS5 query for "most of the words": every group of [`Terms::need`] of them, `(a b) OR
/// (a c) OR (b c)`. FTS5's BM25 of a message sums over the phrases of the groups it matches,
/// so a message holding `h` of the words scores [`group_weight`]`(h)` times its BM25 over
/// them: more words held, a higher score.
fn fts_most_query(t: &Terms) -> String {
    let most = t.most();
    groups(most, t.need)
        .iter()
        .map(|g| {
            format!(
                "({})",
                g.iter()
                    .map(|w| fts_phrase(w))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// How many of the groups of [`fts_most_query`] that a message holding `held` of the words
/// matches hold each of them: `C(held - 1, need - 1)`.
fn group_weight(held: usize, need: usize) -> f64 {
    let (n, k) = (held.saturating_sub(1), need.saturating_sub(1));
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// The words of `t` that no word of `text` begins (a hit of "most of the words" lacks them).
pub fn missing_words(text: &str, t: &Terms) -> Vec<String> {
    let ws = words(text);
    t.words
        .iter()
        .filter(|q| !ws.iter().any(|w| w.starts_with(q.as_str())))
        .cloned()
        .collect()
}

impl SessionIndex {
    /// Searches every message and tool output, after bringing the index up to date.
    pub fn search(&mut self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        self.refresh(|_, _| {})?;
        Ok(self.word_hits(q)?.into_iter().map(|w| w.hit).collect())
    }

    /// The word search of an index already refreshed, with each hit's line: the messages
    /// holding every word of the query ([`terms`]) first, then, when fewer than the limit do
    /// and the query has three words or more, those holding most of them.
    pub(super) fn word_hits(&self, q: &SearchQuery) -> Result<Vec<WordHit>> {
        let t = terms(&q.text);
        if t.words.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        let mut hits = self.word_tier(q, &fts_query(&t.words), q.limit, None)?;
        if hits.len() < q.limit && t.relaxed() {
            let fts = fts_most_query(&t);
            let have: std::collections::HashSet<(String, String)> = hits
                .iter()
                .map(|h| (h.hit.session_id.clone(), h.hit.message_id.clone()))
                .collect();
            // Every message of the first tier is among these too (it holds most words): ask
            // for as many more as it gave.
            let more = self.word_tier(q, &fts, q.limit, Some(&t))?;
            let room = q.limit - hits.len();
            hits.extend(
                more.into_iter()
                    .filter(|h| {
                        !have.contains(&(h.hit.session_id.clone(), h.hit.message_id.clone()))
                    })
                    .take(room),
            );
        }
        for h in &mut hits {
            h.hit.matches = match_spans(&h.hit.snippet, &t.words);
        }
        Ok(hits)
    }

    /// The messages `fts` matches in `q`'s scope, best first, at most `limit`. With `missing`,
    /// each hit names the words of those terms its message lacks.
    fn word_tier(
        &self,
        q: &SearchQuery,
        fts: &str,
        limit: usize,
        missing: Option<&Terms>,
    ) -> Result<Vec<WordHit>> {
        let project = q.project.as_deref().map(trim_separators);
        // Ranking scores every match: fine for thousands, seconds for a word in most messages.
        // Past RANK_LIMIT matches, the newest come first instead (rank 0).
        let matches: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM idx_messages_fts WHERE idx_messages_fts MATCH ?1")
            .and_then(|mut st| st.query_row([fts], |r| r.get(0)))
            .map_err(db_err(self.path()))?;
        let (rank, order) = if matches > RANK_LIMIT {
            ("0.0", "m.timestamp DESC, m.sessionId, m.msgId")
        } else {
            (
                "bm25(idx_messages_fts)",
                "bm25(idx_messages_fts), m.timestamp DESC, m.sessionId, m.msgId",
            )
        };
        let text = if missing.is_some() {
            "idx_messages_fts.text"
        } else {
            "NULL"
        };
        let sql = format!(
            "SELECT m.sessionId, s.metaJson, s.projectPath, m.msgId, m.role, m.timestamp,
                    snippet(idx_messages_fts, 0, '', '', '…', 16), {rank}, m.line, s.agent,
                    {text}
             FROM idx_messages_fts
             JOIN idx_messages m ON m.rowid = idx_messages_fts.rowid
             JOIN idx_sessions s ON s.id = m.sessionId
             WHERE idx_messages_fts MATCH ?1
               AND (?5 OR s.status NOT IN ('deleted', 'archived'))
               AND (?2 IS NULL OR {in_project2})
               AND (?3 IS NULL OR m.timestamp >= ?3)
               AND (?7 IS NULL OR m.timestamp < ?7)
               AND (?6 IS NULL OR s.agent = ?6)
             ORDER BY {order}
             LIMIT ?4",
            in_project2 = in_project_sql(2),
        );
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(db_err(self.path()))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(
                params![fts, project, q.since, limit, q.all, q.agent, q.until],
                |r| {
                    let meta: String = r.get(1)?;
                    let text: Option<String> = r.get(10)?;
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
                            missing: match (missing, text) {
                                (Some(t), Some(text)) => missing_words(&text, t),
                                _ => Vec::new(),
                            },
                            rank: r.get(7)?,
                            found_by: FoundBy::Words,
                            similarity: None,
                            strength: Strength::Strong,
                            other_matches: 0,
                            other_message_ids: Vec::new(),
                        },
                        line: r.get(8)?,
                    })
                },
            )
            .map_err(db_err(self.path()))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(self.path()))
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
    /// Whether it holds most of the words but not all.
    partial: bool,
    /// How many of the words "most" counts it holds.
    held: usize,
}

/// Search without the index: reads every session's log (the JSON-backend fallback), with the
/// index's matches in the index's order — the messages holding every word, then those holding
/// most (see the module's head), each by BM25 over every message as FTS5 computes it, then
/// newest first. Damaged sessions are skipped and returned with the reason, like the index's
/// [`SessionIndex::problems`].
pub fn search_scan(
    store: &SessionStore,
    q: &SearchQuery,
) -> Result<(Vec<SearchHit>, Vec<Problem>)> {
    let t = terms(&q.text);
    let ws = &t.words;
    if ws.is_empty() || q.limit == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let most = t.most().len();
    // Every session counts in the statistics (as every row of the index does); only those the
    // query selects give hits.
    let listing = store.list(&ListFilter {
        include_deleted: true,
        ..ListFilter::default()
    })?;
    let mut problems = listing.problems;
    let mut candidates = Vec::new();
    let (mut rows, mut tokens, mut all_matches, mut most_matches) = (0u64, 0u64, 0u64, 0u64);
    let mut rows_hit = vec![0u64; ws.len()];
    for meta in listing.sessions {
        let selected = q.selects(&meta);
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
            let full = !freq.contains(&0);
            let held = freq[..most].iter().filter(|&&f| f > 0).count();
            if held >= t.need && t.relaxed() {
                most_matches += 1;
            }
            let partial = !full && t.relaxed() && held >= t.need;
            if !full && !partial {
                return;
            }
            all_matches += u64::from(full);
            if !selected
                || q.since.is_some_and(|s| m.timestamp < s)
                || q.until.is_some_and(|u| m.timestamp >= u)
            {
                return;
            }
            let snippet = snippet_of(&text, ws);
            let mut hit = SearchHit::on_message(&meta, &m, snippet, FoundBy::Words);
            hit.matches = match_spans(&hit.snippet, ws);
            hit.missing = ws
                .iter()
                .zip(&freq)
                .filter(|(_, f)| **f == 0)
                .map(|(w, _)| w.clone())
                .collect();
            candidates.push(Candidate {
                hit,
                freq,
                len: message_words.len() as u64,
                partial,
                held,
            });
        })?;
        problems.extend(problem);
    }
    let ranked = |n: u64| i64::try_from(n).unwrap_or(i64::MAX) <= RANK_LIMIT;
    let (ranked_all, ranked_most) = (ranked(all_matches), ranked(most_matches));
    let avgdl = tokens as f64 / rows.max(1) as f64;
    let idf: Vec<f64> = rows_hit
        .iter()
        .map(|&n| {
            let idf = ((rows as f64 - n as f64 + 0.5) / (n as f64 + 0.5)).ln();
            if idf <= 0.0 { 1e-6 } else { idf }
        })
        .collect();
    let mut hits: Vec<(bool, SearchHit)> = candidates
        .into_iter()
        .map(|c| {
            let mut hit = c.hit;
            // A message of most words is ranked over the words "most" counts, weighted as the
            // index's query of word groups ranks it.
            let (counted, weight) = if c.partial {
                (most, group_weight(c.held, t.need))
            } else {
                (ws.len(), 1.0)
            };
            if (c.partial && ranked_most) || (!c.partial && ranked_all) {
                let d = c.len as f64;
                let mut score = 0.0;
                for (f, idf) in c.freq.iter().zip(&idf).take(counted) {
                    let f = *f as f64;
                    score += idf * (f * (BM25_K1 + 1.0))
                        / (f + BM25_K1 * (1.0 - BM25_B + BM25_B * d / avgdl));
                }
                hit.rank = -score * weight;
            }
            (c.partial, hit)
        })
        .collect();
    hits.sort_by(|(pa, a), (pb, b)| {
        pa.cmp(pb)
            .then(a.rank.total_cmp(&b.rank))
            .then(b.timestamp.cmp(&a.timestamp))
            .then_with(|| a.session_id.cmp(&b.session_id))
            .then_with(|| a.message_id.cmp(&b.message_id))
    });
    let hits = hits.into_iter().map(|(_, h)| h).take(q.limit).collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_asks_for_its_words_less_stop_words_and_more_than_half_of_them() {
        let t = terms("Why did the Phoenix server not start? the SERVER");
        assert_eq!(t.words, ["phoenix", "server", "start"]);
        assert_eq!(t.need, 2);
        assert!(t.relaxed());
        let t = terms("phoenix server");
        assert_eq!((t.need, t.relaxed()), (2, false));
        // Nothing but stop words: they are the words.
        assert_eq!(terms("to be or not").words, ["to", "be", "or", "not"]);
        assert!(terms(" … ").words.is_empty());
        // Past MOST_WORDS_MAX, "most" counts over the first ones.
        let long = terms("a1 b2 c3 d4 e5 f6 g7 h8 i9 j10");
        assert_eq!(long.words.len(), 10);
        assert_eq!(long.most().len(), MOST_WORDS_MAX);
        assert_eq!(long.need, MOST_WORDS_MAX / 2 + 1);
    }

    #[test]
    fn the_groups_of_most_words_and_their_weight() {
        let w: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let g = groups(&w, 3);
        assert_eq!(g.len(), 4);
        // Each word is in C(3, 2) = 3 of them, as group_weight says of a message holding all.
        for x in &w {
            assert_eq!(g.iter().filter(|g| g.contains(&x)).count(), 3);
        }
        assert_eq!(group_weight(4, 3), 3.0);
        assert_eq!(group_weight(3, 3), 1.0);
        assert_eq!(group_weight(8, 5), 35.0);
        let t = terms("alpha beta gamma");
        assert_eq!(
            fts_most_query(&t),
            "(\"alpha\"* \"beta\"*) OR (\"alpha\"* \"gamma\"*) OR (\"beta\"* \"gamma\"*)"
        );
        assert_eq!(missing_words("Alpha and Gammas", &t), ["beta"]);
    }
}
