//! Bounded, paged answers for an agent that reads its memory (what `freecode mcp`'s tools
//! answer): the session list, a search, one session's messages, a trace and stats, each a page.
//!
//! **Bounded and paged.** Every list takes `offset`/`limit` (at most [`MAX_LIMIT`] items) and
//! answers `hasMore`/`nextOffset`; every text field is cut to [`FIELD_CAP`] bytes with a
//! `truncated` flag; a message keeps parts up to [`MESSAGE_CAP`]; a page stops before
//! [`RESULT_CAP`] bytes of JSON (`cutBySize`), with at least one item so paging always moves.
//! A trace page is folded with its spans spooled as they close and only the page's spans read
//! back (`rollout::trace_page`): a page of a 1M-event log costs its spans, not the trace.
//!
//! **Data, not instructions.** Transcripts are what past sessions held, including whatever a
//! web page or a file told the agent then: each page says so in `notice` ([`UNTRUSTED`]).
//!
//! **Read-only.** Sessions are read with the store's readers (messages with
//! [`MessageBlocks`], which repairs nothing, from the log's offset index, so page N of a long
//! session costs a page); the only files written are derived: the search index, refreshed the
//! way `search` refreshes it, and the logs' offset indexes (`state/offsets/`). Bad ids, unknown sessions and unusable filters are
//! errors, never a crash.

use freecode_core::SessionId;
use freecode_core::message::Part;
use freecode_store::index::{SearchMode, SearchQuery, StatsScope};
use freecode_store::session::MessageBlocks;
use freecode_store::{Home, SessionStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::progress::Silent;
use crate::scope::{parse_since, project_scope};
use crate::sessions::{ListRequest, open, parse_status};

use crate::types::StatsReport;
use crate::types::page::{
    HitsPage, Message, MessagePart, MessagesPage, PageInfo, SessionSummary, SessionsPage, ToolCall,
    UNTRUSTED, cap_text,
};

/// Items per page when the client names no `limit`.
pub const DEFAULT_LIMIT: usize = 20;
/// The most items a page holds, whatever `limit` says.
pub const MAX_LIMIT: usize = 100;
/// The most bytes of one text field (a part's content or output, a tool call's arguments as
/// JSON, a title, a snippet); its whole size is said beside it.
pub const FIELD_CAP: usize = 4 * 1024;
/// The most bytes of JSON one message's parts take; later parts are left out (`partsOmitted`).
pub const MESSAGE_CAP: usize = 12 * 1024;
/// The most bytes of JSON one result takes (its text block repeats it): sized for an agent's
/// context. Claude Code passes a tool's result to its model inline up to about 50,000
/// characters and saves a larger one to a file the model sees 2 KB of; memory tools built for
/// agents answer about 16,000.
pub const RESULT_CAP: usize = 16_000;
/// The furthest a search pages: past it, narrow the query.
pub const MAX_SEARCH_OFFSET: usize = 10_000;
/// The most tools `session_stats` lists (most time first).
pub const MAX_STATS_TOOLS: usize = 100;

/// `search_sessions`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchParams {
    /// Words to find in messages and tool output (each must begin a word of the message).
    pub query: String,
    /// Only sessions of this project directory or one below it (relative: from the server's
    /// working directory).
    pub project: Option<String>,
    /// Only sessions this agent wrote: `freecode`, `claude-code`, `codex`, `gemini-cli`,
    /// `opencode` or `goose`.
    pub agent: Option<String>,
    /// Only messages written since (each message's own time): `2026-01-15`, an RFC 3339 time,
    /// `today`, `yesterday`, or `3d` / `12h` / `30m` ago.
    pub since: Option<String>,
    /// Only messages written before (each message's own time), in the words `since` takes; a
    /// date counts the whole day.
    pub until: Option<String>,
    /// Archived and deleted sessions too.
    #[serde(default)]
    pub all: bool,
    /// Hits to skip: the previous page's `nextOffset`.
    #[serde(default)]
    pub offset: usize,
    /// Hits per page (default 20, at most 100): sessions, or messages with `perMessage`.
    pub limit: Option<usize>,
    /// Every matching message, several of one session as they rank; by default each session
    /// once, its best message standing for it with its other matches counted
    /// (`otherMatches`, `otherMessageIds`).
    #[serde(default)]
    pub per_message: bool,
    /// `words` (every word begins a word of the message), `meaning` (the turns nearest the
    /// query's sense, with the configured embedder) or `both`, fused; default: both when an
    /// embedder is configured, else words.
    pub mode: Option<SearchMode>,
}

/// How long a page's search embeds what is pending: the server's own filler does the rest.
const PAGE_EMBED_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// `list_sessions`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    /// Only sessions of this project directory or one below it (relative: from the server's
    /// working directory).
    pub project: Option<String>,
    /// Only sessions this agent wrote: `freecode`, `claude-code`, `codex`, `gemini-cli`,
    /// `opencode` or `goose`.
    pub agent: Option<String>,
    /// Only sessions with this status: `active`, `interrupted`, `archived` or `deleted`
    /// (deleted ones are listed only when asked for).
    pub status: Option<String>,
    /// Only sessions whose last activity is since: `2026-01-15`, an RFC 3339 time, `today`,
    /// `yesterday`, or `3d` / `12h` / `30m` ago.
    pub since: Option<String>,
    /// Sessions to skip: the previous page's `nextOffset`.
    #[serde(default)]
    pub offset: usize,
    /// Sessions per page (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `get_session`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetParams {
    /// The session's id (or a unique prefix of one).
    pub session_id: String,
    /// Messages to skip: the previous page's `nextOffset`.
    #[serde(default)]
    pub offset: usize,
    /// Messages per page (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `session_trace`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceParams {
    /// The session's id (or a unique prefix of one).
    pub session_id: String,
    /// Spans to skip in each of `modelSpans`, `toolSpans` and `deniedSpans`: the previous
    /// page's `nextOffset`.
    #[serde(default)]
    pub offset: usize,
    /// Spans per list and page (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `session_stats`'s arguments: one session, one project, or everything.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsParams {
    /// One session (its id or a unique prefix of one).
    pub session_id: Option<String>,
    /// Sessions of this project directory or one below it (relative: from the server's working
    /// directory).
    pub project: Option<String>,
}

/// The page size a `limit` asks for: the default when absent, at least 1, at most
/// [`MAX_LIMIT`].
fn page_size(limit: Option<usize>) -> usize {
    limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
}

/// The bytes of `v`'s JSON.
fn json_len(v: &impl Serialize) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// Takes items from `items` (the ones from `offset` on) while fewer than `limit` are taken and
/// their JSON stays under `budget` bytes (the first is always taken, so paging moves); then
/// looks one further to say whether more follow.
fn fill<T: Serialize>(
    items: impl Iterator<Item = Result<T>>,
    offset: usize,
    limit: usize,
    budget: usize,
) -> Result<(Vec<T>, PageInfo)> {
    let mut out = Vec::new();
    let mut used = 0usize;
    let mut cut_by_size = false;
    let mut has_more = false;
    for item in items {
        let item = item?;
        if out.len() == limit {
            has_more = true;
            break;
        }
        let n = json_len(&item).saturating_add(1);
        if !out.is_empty() && used.saturating_add(n) > budget {
            cut_by_size = true;
            has_more = true;
            break;
        }
        used = used.saturating_add(n);
        out.push(item);
    }
    let count = out.len();
    Ok((
        out,
        PageInfo {
            offset,
            count,
            has_more,
            next_offset: has_more.then_some(offset + count),
            cut_by_size,
        },
    ))
}

/// A `since` argument as a time, ms.
fn since_of(since: Option<&str>) -> Result<Option<i64>> {
    since
        .map(|s| parse_since(s, freecode_store::now_ms()).map_err(|e| e.context("since")))
        .transpose()
}

/// A `project` argument as the readers take it.
fn project_of(project: Option<&str>) -> Result<Option<String>> {
    project
        .map(|p| project_scope(p).map_err(|e| e.context("project")))
        .transpose()
}

/// A session id argument: a whole id or a unique prefix of one, in this home (the source
/// agent's id of an imported session too: [`crate::sessions::resolve_id`]).
fn session_of(store: &SessionStore, s: &str) -> Result<SessionId> {
    let s = s.trim();
    if s.is_empty() {
        return Err(Error::Invalid(
            "sessionId: give a session id (list_sessions lists them)".into(),
        ));
    }
    crate::sessions::resolve_id(store, s).map_err(|e| e.context(format!("sessionId {s:?}")))
}

/// `search_sessions`: the hits of a page, best first, text fields capped.
pub fn search(home: &Home, p: SearchParams) -> Result<HitsPage> {
    if p.offset > MAX_SEARCH_OFFSET {
        return Err(Error::Invalid(format!(
            "offset {} is past the last page searched ({MAX_SEARCH_OFFSET}): narrow the query \
             (project, agent, since)",
            p.offset
        )));
    }
    let limit = page_size(p.limit);
    let q = SearchQuery {
        text: p.query,
        project: project_of(p.project.as_deref())?,
        since: since_of(p.since.as_deref())?,
        until: p
            .until
            .as_deref()
            .map(|s| {
                crate::scope::parse_until(s, freecode_store::now_ms())
                    .map_err(|e| e.context("until"))
            })
            .transpose()?,
        // One more than the page, to know whether another follows.
        limit: p.offset + limit + 1,
        all: p.all,
        agent: p.agent,
    };
    // One hit per session, as `search` answers (unless every message is asked for).
    let hits = if p.per_message {
        crate::meaning::search(home, &q, p.mode, PAGE_EMBED_BUDGET, &mut Silent)?
    } else {
        crate::meaning::search_by_session(home, &q, p.mode, PAGE_EMBED_BUDGET, &mut Silent)?
    };
    let items = hits.into_iter().skip(p.offset).map(|mut h| {
        let (title, _) = cap_text(&h.title, FIELD_CAP);
        let (project, _) = cap_text(&h.project_path, FIELD_CAP);
        h.title = title;
        h.project_path = project;
        // Snippets are short (a few words around the match); the cap only guards the scan's.
        let (snippet, cut) = cap_text(&h.snippet, FIELD_CAP);
        if cut {
            let chars = snippet.chars().count();
            h.matches.retain(|m| m.end <= chars);
        }
        h.snippet = snippet;
        Ok(h)
    });
    let (hits, page) = fill(items, p.offset, limit, RESULT_CAP)?;
    Ok(HitsPage {
        notice: UNTRUSTED,
        hits,
        page,
    })
}

/// `list_sessions`: a page of sessions, newest activity first.
pub fn list(home: &Home, p: ListParams) -> Result<SessionsPage> {
    let status = p.status.as_deref().map(parse_status).transpose()?;
    let req = ListRequest {
        status,
        within: project_of(p.project.as_deref())?,
        since: since_of(p.since.as_deref())?,
        agent: p.agent,
        ..ListRequest::default()
    };
    let selected = crate::sessions::list(home, &req)?.sessions;
    let total = selected.len();
    let items = selected
        .iter()
        .skip(p.offset)
        .map(|m| Ok(SessionSummary::of(m, FIELD_CAP)));
    let (sessions, page) = fill(items, p.offset, page_size(p.limit), RESULT_CAP)?;
    Ok(SessionsPage {
        notice: UNTRUSTED,
        sessions,
        total,
        page,
    })
}

/// A stored part as `get_session` returns it: each text field capped, image data left out.
fn part_of(part: &Part) -> MessagePart {
    let mut truncated = false;
    let mut cap = |s: &Option<String>| {
        s.as_deref().map(|s| {
            let (s, cut) = cap_text(s, FIELD_CAP);
            truncated |= cut;
            s
        })
    };
    let language = cap(&part.language);
    let content = cap(&part.content);
    let result = cap(&part.result);
    let media_type = cap(&part.media_type);
    let alt_text = cap(&part.alt_text);
    let name = part.tool.as_deref().and_then(|t| cap(&t.name));
    let args = part.tool.as_deref().and_then(|t| t.args.as_ref()).map(|a| {
        let text = a.to_string();
        if text.len() <= FIELD_CAP {
            (a.clone(), false)
        } else {
            (
                serde_json::Value::String(cap_text(&text, FIELD_CAP).0),
                true,
            )
        }
    });
    truncated |= args.as_ref().is_some_and(|(_, cut)| *cut);
    let tool = part.tool.as_ref().map(|_| ToolCall {
        name,
        args: args.map(|(a, _)| a),
    });
    let data_bytes = part.data.as_ref().map(String::len);
    MessagePart {
        kind: part.kind.as_str().to_owned(),
        language,
        content,
        tool,
        result,
        media_type,
        alt_text,
        data_bytes,
        truncated: truncated || data_bytes.is_some(),
    }
}

/// A stored message as `get_session` returns it: its parts up to [`MESSAGE_CAP`].
fn message_of(index: usize, m: &freecode_core::StoredMessage) -> Message {
    let mut parts = Vec::new();
    let mut used = 0usize;
    let mut truncated = false;
    for part in &m.parts {
        let part = part_of(part);
        let n = json_len(&part);
        if !parts.is_empty() && used.saturating_add(n) > MESSAGE_CAP {
            break;
        }
        used = used.saturating_add(n);
        truncated |= part.truncated;
        parts.push(part);
    }
    let parts_omitted = m.parts.len() - parts.len();
    Message {
        index,
        id: cap_text(&m.id, FIELD_CAP).0,
        role: m.role.as_str().to_owned(),
        timestamp: m.timestamp,
        parts,
        parts_omitted,
        truncated: truncated || parts_omitted > 0,
        interrupted: m.interrupted,
    }
}

/// `get_session`: the session and one page of its messages, in order.
pub fn messages(home: &Home, p: GetParams) -> Result<MessagesPage> {
    let store = open(home)?;
    let id = session_of(&store, &p.session_id)?;
    let meta = store.meta(&id)?;
    // Read as the file is, without the repairs a writer makes (the server never writes a
    // session), from the log's offset index: page N costs a page, not N.
    let (blocks, first) = store.message_blocks_from(&id, p.offset)?;
    let mut items = block_items(blocks)
        .enumerate()
        .map(|(i, m)| (i + first, m))
        .skip(p.offset.saturating_sub(first))
        .map(|(i, m)| m.map(|m| message_of(i, &m)));
    let (messages, page) = fill(&mut items, p.offset, page_size(p.limit), RESULT_CAP)?;
    Ok(MessagesPage {
        notice: UNTRUSTED,
        session: SessionSummary::of(&meta, FIELD_CAP),
        messages,
        page,
    })
}

/// The messages of `blocks`, one at a time.
fn block_items(
    mut blocks: MessageBlocks,
) -> impl Iterator<Item = Result<freecode_core::StoredMessage>> {
    let mut current = Vec::new().into_iter();
    let mut done = false;
    std::iter::from_fn(move || {
        loop {
            if let Some(m) = current.next() {
                return Some(Ok(m));
            }
            if done {
                return None;
            }
            match blocks.next_block() {
                Ok(Some(b)) => current = b.items.into_iter(),
                Ok(None) => {
                    done = true;
                    return None;
                }
                Err(e) => {
                    done = true;
                    return Some(Err(e.into()));
                }
            }
        }
    })
}

/// A span of a trace page with its arguments (and error text) capped.
fn capped_span(mut span: serde_json::Value) -> serde_json::Value {
    if let Some(obj) = span.as_object_mut() {
        let mut truncated = false;
        for key in ["args", "error", "reason"] {
            if let Some(v) = obj.get_mut(key) {
                let text = match &*v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if text.len() > FIELD_CAP {
                    *v = serde_json::Value::String(cap_text(&text, FIELD_CAP).0);
                    truncated = true;
                }
            }
        }
        if truncated {
            obj.insert("truncated".into(), serde_json::Value::Bool(true));
        }
    }
    span
}

/// `session_trace`: a page of the trace: `offset`, at most `limit` spans of each list, each
/// capped. Folded with spans spooled as they close and only the page's read back, so a page
/// of a long log costs its spans, not the trace.
pub fn trace(home: &Home, p: TraceParams) -> Result<serde_json::Value> {
    let store = open(home)?;
    let id = match SessionId::new(p.session_id.trim()) {
        Ok(id) if crate::trace::events_path(home, &id).is_file() => id,
        _ => session_of(&store, &p.session_id)?,
    };
    let Some((builder, now)) =
        crate::trace::fold_trace_json::<crate::trace::CompactJson>(home, &id)?
    else {
        return Err(Error::NotFound(format!(
            "session {id} has no rollout log: nothing was recorded for it"
        )));
    };
    let limit = page_size(p.limit);
    let page = crate::trace::trace_page(builder, now, p.offset as u64, limit as u64)?;
    let mut v = serde_json::to_value(&page.trace)?;
    let mut more = false;
    let mut counts = serde_json::Map::new();
    if let Some(obj) = v.as_object_mut() {
        for (key, count_key, list) in [
            ("modelSpans", "modelSpanCount", page.model),
            ("toolSpans", "toolSpanCount", page.tool),
            ("deniedSpans", "deniedSpanCount", page.denied),
        ] {
            let spans = list.spans.into_iter().map(capped_span).collect();
            obj.insert(key.into(), serde_json::Value::Array(spans));
            more |= (p.offset as u64).saturating_add(limit as u64) < list.total;
            counts.insert(count_key.into(), list.total.into());
        }
        obj.extend(counts);
        obj.insert("notice".into(), UNTRUSTED.into());
        obj.insert("offset".into(), p.offset.into());
        obj.insert("hasMore".into(), more.into());
        if more {
            obj.insert("nextOffset".into(), (p.offset + limit).into());
        }
    }
    // Spans are small once their arguments are capped; a page of the largest still fits.
    if json_len(&v) > RESULT_CAP * 2 {
        return Err(Error::Invalid(
            "this trace's page is too large: ask for a smaller limit".into(),
        ));
    }
    Ok(v)
}

/// `session_stats`: the figures of one session, a project or everything, the tools and
/// problems listed bounded.
pub fn stats(home: &Home, p: StatsParams) -> Result<StatsReport> {
    let scope = match (p.session_id.as_deref(), p.project.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(Error::Invalid("give sessionId or project, not both".into()));
        }
        (Some(s), None) => StatsScope::Session(session_of(&open(home)?, s)?),
        (None, Some(_)) => {
            StatsScope::Project(project_of(p.project.as_deref())?.unwrap_or_default())
        }
        (None, None) => StatsScope::All,
    };
    let mut report = crate::search::stats(home, &scope, &mut Silent)?;
    report.stats.tools.truncate(MAX_STATS_TOOLS);
    for t in &mut report.stats.tools {
        t.tool = cap_text(&t.tool, FIELD_CAP).0;
    }
    report.problems.truncate(MAX_LIMIT);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        let s = "é".repeat(10);
        let (cut, flag) = cap_text(&s, 5);
        assert!(flag);
        assert_eq!(cut, "éé");
        assert_eq!(cap_text("abc", 3), ("abc".to_owned(), false));
    }

    #[test]
    fn a_page_stops_at_the_limit_or_the_size_cap_and_says_where_the_next_starts() {
        let items = || (0..10).map(|i| Ok("x".repeat(i * 10)));
        let (page, info) = fill(items().skip(2), 2, 3, usize::MAX).unwrap();
        assert_eq!(page.len(), 3);
        assert_eq!(
            (info.has_more, info.next_offset, info.cut_by_size),
            (true, Some(5), false)
        );
        let (page, info) = fill(items().skip(7), 7, 5, usize::MAX).unwrap();
        assert_eq!(page.len(), 3);
        assert_eq!((info.has_more, info.next_offset), (false, None));
        // Past the budget: at least one item, then a cut.
        let (page, info) = fill(items().skip(8), 8, 5, 10).unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(
            (info.has_more, info.next_offset, info.cut_by_size),
            (true, Some(9), true)
        );
    }

    #[test]
    fn a_big_part_is_capped_and_flagged_and_image_data_is_left_out() {
        let big = Part::text("y".repeat(FIELD_CAP * 3));
        let p = part_of(&big);
        assert!(p.truncated);
        assert_eq!(p.content.as_deref().map(str::len), Some(FIELD_CAP));
        let small = part_of(&Part::text("hello"));
        assert!(!small.truncated);
        let image = part_of(&Part::image("QUJD".repeat(1000), "image/png", None));
        assert_eq!((image.data_bytes, image.truncated), (Some(4000), true));
        assert_eq!(image.media_type.as_deref(), Some("image/png"));
        let args = serde_json::json!({"content": "z".repeat(FIELD_CAP)});
        let tool = part_of(&Part::tool("write_file", args, "ok"));
        assert!(tool.truncated);
        let shown = tool.tool.and_then(|t| t.args).unwrap();
        assert!(
            shown
                .as_str()
                .is_some_and(|s| s.len() == FIELD_CAP && s.starts_with("{"))
        );
        let m = freecode_core::StoredMessage::new(
            "m",
            freecode_core::message::Role::User,
            vec![big; 20],
            1,
        );
        let msg = message_of(0, &m);
        assert!(msg.truncated && msg.parts_omitted > 0);
        assert!(json_len(&msg) <= MESSAGE_CAP + FIELD_CAP + 256);
    }
}
