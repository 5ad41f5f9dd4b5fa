//! The UI's data: what the pages show, read the way the CLI reads it, and the JSON endpoints
//! under `/api/`, which answer exactly the `--json` types (`session list`, `session show`,
//! `trace`, `search`, `stats`) — one vocabulary — plus `/api/events/{id}`, server-sent events
//! carrying the trace each time the log grows (as `trace --follow` re-renders), and
//! `/api/progress`, server-sent events saying how far an index refresh a search or the stats
//! wait on has got (the UI's [`freecode_ops::Progress`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use freecode_core::rollout::replay::Replay;
use freecode_core::rollout::trace::Trace;
use freecode_core::{SessionId, SessionMeta};
use freecode_ops::live::LiveTrace;
use freecode_ops::scope::project_scope;
use freecode_ops::sessions::{self, ListRequest, TranscriptPage, resolve_recorded_id};
use freecode_ops::types::{SessionDetail, StatsReport};
use freecode_ops::{Error, Home, Progress};
use freecode_store::SessionStore;
use freecode_store::index::{SearchHit, SearchQuery, StatsScope};
use serde::Deserialize;

use super::{ApiError, Ui, UiError, blocking};

/// Messages per page of a transcript: a 100,000-message session is never rendered whole.
pub const PAGE_MESSAGES: usize = 200;
/// Sessions per page of the list.
pub const PAGE_SESSIONS: usize = 50;

/// The list's filters, as `session list` takes them.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ListQuery {
    /// `--project`: this directory or one below it.
    #[serde(default)]
    pub project: Option<String>,
    /// `--status`.
    #[serde(default)]
    pub status: Option<String>,
    /// `--agent`: only sessions this agent wrote (`freecode`, or an import's agent).
    #[serde(default)]
    pub agent: Option<String>,
    /// `--all`: deleted sessions too.
    #[serde(default)]
    pub all: Option<String>,
    /// 1-based page (pages only).
    #[serde(default)]
    pub page: Option<usize>,
}

/// `session list --json`'s answer for `q`: newest activity first; titles redacted unless the
/// viewer runs with `--no-redact`.
pub fn list_sessions(ui: &Ui, q: &ListQuery) -> freecode_ops::Result<Vec<SessionMeta>> {
    let status = q
        .status
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(sessions::parse_status)
        .transpose()?;
    let within = q
        .project
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(project_scope)
        .transpose()?;
    let req = ListRequest {
        status,
        within,
        include_deleted: q.all.as_deref().is_some_and(|a| !a.is_empty()),
        agent: q.agent.clone().filter(|a| !a.is_empty()),
        ..ListRequest::default()
    };
    let list = sessions::list(&ui.home, &req)?.sessions;
    let r = ui.redactor()?;
    if !r.redacts() {
        return Ok(list);
    }
    let store = sessions::open(&ui.home)?;
    list.into_iter().map(|m| r.listed_meta(&store, m)).collect()
}

/// What a search asks, as `search` takes it: the words, and the `--project` and `--agent`
/// filters (empty strings are no filter).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct SearchParams {
    /// The words.
    #[serde(default)]
    pub q: String,
    /// `--project`: this directory or one below it.
    #[serde(default)]
    pub project: Option<String>,
    /// `--agent`: only sessions this agent wrote.
    #[serde(default)]
    pub agent: Option<String>,
    /// `--limit`.
    #[serde(default)]
    pub limit: Option<usize>,
    /// `--mode`: `words`, `meaning` or `both`; empty or absent: both when an embedder is
    /// configured, else words.
    #[serde(default)]
    pub mode: Option<String>,
}

/// How long a page's search embeds what is pending: the server's filler does the rest.
const SEARCH_EMBED_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

/// How far the index refresh a request waits on has got: sessions done of all, or `None` while
/// nothing is being indexed (what `/api/progress` streams).
#[derive(Debug, Default)]
pub struct Indexing(std::sync::Mutex<Option<(usize, usize)>>);

impl Indexing {
    fn get(&self) -> Option<(usize, usize)> {
        self.0.lock().map_or(None, |g| *g)
    }

    fn set(&self, v: Option<(usize, usize)>) {
        if let Ok(mut g) = self.0.lock() {
            *g = v;
        }
    }
}

/// The UI's feedback for an operation: the sessions it has indexed so far, in [`Indexing`];
/// cleared when the operation is over.
struct Feedback<'a>(&'a Indexing);

impl Progress for Feedback<'_> {
    fn sessions(&mut self, done: usize, total: usize) {
        self.0.set((done < total).then_some((done, total)));
    }
}

impl Drop for Feedback<'_> {
    fn drop(&mut self) {
        self.0.set(None);
    }
}

/// `search --json`'s answer for `p` (at most `limit` hits).
pub fn search(ui: &Ui, p: &SearchParams, limit: usize) -> freecode_ops::Result<Vec<SearchHit>> {
    let q = SearchQuery {
        text: p.q.clone(),
        project: p
            .project
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(project_scope)
            .transpose()?,
        since: None,
        until: None,
        limit,
        all: false,
        agent: p.agent.clone().filter(|a| !a.is_empty()),
    };
    let mode = p
        .mode
        .as_deref()
        .filter(|m| !m.is_empty())
        .map(str::parse)
        .transpose()
        .map_err(freecode_ops::Error::Invalid)?;
    let mut hits = freecode_ops::meaning::search_by_session(
        &ui.home,
        &q,
        mode,
        SEARCH_EMBED_BUDGET,
        &mut Feedback(&ui.indexing),
    )?;
    let r = ui.redactor()?;
    let store = if r.redacts() {
        Some(sessions::open(&ui.home)?)
    } else {
        None
    };
    for h in &mut hits {
        if let Some(store) = &store
            && h.title.ends_with('…')
        {
            let meta = SessionMeta::new(
                &SessionId::new(&h.session_id)?,
                std::mem::take(&mut h.title),
                String::new(),
                String::new(),
                None,
                0,
            );
            h.title = r.listed_meta(store, meta)?.title;
        }
        r.text(&mut h.title);
        if r.text(&mut h.snippet) {
            // The marks' offsets were the text's before: none rather than wrong ones.
            h.matches.clear();
        }
    }
    Ok(hits)
}

/// `stats --json`'s answer for the whole home.
pub fn stats(ui: &Ui) -> freecode_ops::Result<StatsReport> {
    freecode_ops::search::stats(&ui.home, &StatsScope::All, &mut Feedback(&ui.indexing))
}

/// What `usage` asks here: `by`, the comma list `usage --by` takes (default `day`).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct UsageParams {
    /// The keys rows are grouped by.
    #[serde(default)]
    pub by: Option<String>,
}

/// `usage --by … --json`'s answer for every session but the archived and deleted.
pub fn usage(ui: &Ui, p: &UsageParams) -> freecode_ops::Result<freecode_ops::usage::UsageReport> {
    let by = freecode_ops::usage::UsageKey::parse_list(p.by.as_deref().unwrap_or("day"))
        .map_err(|e| freecode_ops::Error::Invalid(format!("by: {e}")))?;
    freecode_ops::usage::usage(
        &ui.home,
        &freecode_ops::usage::UsageAsk {
            by,
            ..Default::default()
        },
        &mut Feedback(&ui.indexing),
    )
}

/// The session `id` names (a unique prefix too).
pub fn resolve(home: &Home, id: &str) -> freecode_ops::Result<(SessionStore, SessionId)> {
    let store = sessions::open(home)?;
    let id = sessions::resolve_id(&store, id)?;
    Ok((store, id))
}

/// Whether session `id` is being written now (a run or an import holds it); false for a trace
/// without a session, or when the probe fails.
pub fn being_written(home: &Home, id: &SessionId) -> bool {
    sessions::open(home)
        .ok()
        .and_then(|store| store.is_being_written(id).ok())
        .unwrap_or(false)
}

/// Page `page` (1-based) of session `id`.
/// Redacted unless the viewer runs with `--no-redact`.
pub fn transcript_page(ui: &Ui, id: &str, page: usize) -> freecode_ops::Result<TranscriptPage> {
    let (store, id) = resolve(&ui.home, id)?;
    let first = page.saturating_sub(1).saturating_mul(PAGE_MESSAGES);
    let mut t = sessions::transcript_page(&store, &id, first, PAGE_MESSAGES)?;
    let r = ui.redactor()?;
    if r.redacts() {
        // A title cut from the prompt is cut again from it: the first page holds the prompt.
        let head = if first == 0 || !t.meta.title.ends_with('…') {
            Vec::new()
        } else {
            sessions::transcript_page(&store, &id, 0, PAGE_MESSAGES)?.messages
        };
        let head = if first == 0 { &t.messages } else { &head };
        t.meta = r.meta(t.meta.clone(), head)?;
        t.messages = r.messages(std::mem::take(&mut t.messages))?;
    }
    Ok(t)
}

/// A log's identity and size: unchanged stamps, unchanged log.
type Stamp = (u64, u64, std::time::SystemTime);

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// The last trace folded, kept while its log is unchanged and nothing in it is open (an open
/// request's age depends on the clock): zooming into a million-event log's turns folds it once.
#[derive(Default)]
pub struct TraceCache(std::sync::Mutex<Option<(SessionId, Stamp, Arc<Trace>)>>);

/// The traces of live sessions (something open: in flight or hung), kept with their logs'
/// ends so that each look folds only what was appended ([`LiveTrace`]); the last few looked at.
#[derive(Default)]
pub struct LiveTraces(std::sync::Mutex<Vec<LiveTrace>>);

/// Live sessions kept at once.
const LIVE_KEPT: usize = 4;

/// `trace --json`'s answer for `id`; `None` when it has no rollout log. A session with an
/// open request is tailed from then on ([`LiveTraces`]); one with nothing open is folded whole
/// and kept in the [`TraceCache`] while its log is unchanged. Its free text is redacted
/// unless the viewer runs with `--no-redact`.
pub fn trace(ui: &Ui, id: &str) -> freecode_ops::Result<(SessionId, Option<Arc<Trace>>)> {
    let home = &ui.home;
    let id = resolve_recorded_id(home, id)?;
    let path = freecode_ops::trace::events_path(home, &id);
    let before = stamp(&path);
    if let (Some(st), Ok(cache)) = (before, ui.traces.0.lock())
        && let Some((cid, cst, t)) = cache.as_ref()
        && *cid == id
        && *cst == st
    {
        return Ok((id, Some(t.clone())));
    }
    let mut live = ui
        .live
        .0
        .lock()
        .map_err(|_| Error::Internal("ui: the live traces' lock is poisoned".into()))?;
    let kept = live.iter().position(|l| *l.id() == id);
    let mut tail = match kept {
        Some(i) => live.remove(i),
        None => match LiveTrace::open(&id, &path)? {
            Some(t) => t,
            None => return Ok((id, None)),
        },
    };
    tail.advance()?;
    let redactor = ui.redactor()?;
    if tail.has_open() || kept.is_some() {
        // Live: kept (newest last) for the next look, which reads only what was appended.
        let mut trace = tail.trace();
        redactor.trace(&mut trace);
        let trace = Arc::new(trace);
        live.push(tail);
        if live.len() > LIVE_KEPT {
            live.remove(0);
        }
        return Ok((id, Some(trace)));
    }
    drop(live);
    let mut trace = tail.into_trace();
    redactor.trace(&mut trace);
    let trace = Arc::new(trace);
    let after = stamp(&path);
    if let (Some(st), Ok(mut cache)) = (after, ui.traces.0.lock())
        && before == after
    {
        *cache = Some((id.clone(), st, trace.clone()));
    }
    Ok((id, Some(trace)))
}

/// The last replay folded (tool outputs for the waterfall), kept while its log is unchanged:
/// a replay does not depend on the clock.
#[derive(Default)]
pub struct ReplayCache(std::sync::Mutex<Option<(SessionId, Stamp, Arc<Replay>)>>);

/// `replay --json`'s fold of session `id`'s log; `None` without one.
pub fn replay(ui: &Ui, id: &SessionId) -> freecode_ops::Result<Option<Arc<Replay>>> {
    let path = freecode_ops::trace::events_path(&ui.home, id);
    let before = stamp(&path);
    if let (Some(st), Ok(cache)) = (before, ui.replays.0.lock())
        && let Some((cid, cst, r)) = cache.as_ref()
        && cid == id
        && *cst == st
    {
        return Ok(Some(r.clone()));
    }
    let redactor = ui.redactor()?;
    let replay = freecode_ops::trace::replay(&ui.home, id)?
        .map(|r| redactor.replay(r))
        .transpose()?
        .map(Arc::new);
    if let (Some(r), Some(st), Ok(mut cache)) = (&replay, stamp(&path), ui.replays.0.lock())
        && before == Some(st)
    {
        *cache = Some((id.clone(), st, r.clone()));
    }
    Ok(replay)
}

pub(super) fn routes() -> Router<Arc<Ui>> {
    use axum::routing::get;
    Router::new()
        .route("/api/sessions", get(api_sessions))
        .route("/api/sessions/{id}", get(api_session))
        .route("/api/trace/{id}", get(api_trace))
        .route("/api/search", get(api_search))
        .route("/api/stats", get(api_stats))
        .route("/api/usage", get(api_usage))
        .route("/api/events/{id}", get(api_events))
        .route("/api/progress", get(api_progress))
}

async fn api_sessions(
    State(ui): State<Arc<Ui>>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<SessionMeta>>, ApiError> {
    blocking(move || Ok(Json(list_sessions(&ui, &q)?)))
        .await
        .map_err(ApiError)
}

async fn api_session(
    State(ui): State<Arc<Ui>>,
    Path(id): Path<String>,
) -> Result<Json<SessionDetail>, ApiError> {
    blocking(move || {
        let (store, id) = resolve(&ui.home, &id)?;
        let mut d = sessions::detail(&store, &id)?;
        let r = ui.redactor()?;
        d.meta = r.meta(d.meta, &d.messages)?;
        d.messages = r.messages(std::mem::take(&mut d.messages))?;
        Ok(Json(d))
    })
    .await
    .map_err(ApiError)
}

async fn api_trace(
    State(ui): State<Arc<Ui>>,
    Path(id): Path<String>,
) -> Result<Json<Trace>, ApiError> {
    blocking(move || match trace(&ui, &id)? {
        (_, Some(t)) => Ok(Json(Arc::unwrap_or_clone(t))),
        (id, None) => Err(UiError::not_found(format!(
            "no recorded events for session {id}"
        ))),
    })
    .await
    .map_err(ApiError)
}

/// `/api/search?q=…&project=…&agent=…&limit=N`.
async fn api_search(
    State(ui): State<Arc<Ui>>,
    Query(p): Query<SearchParams>,
) -> Result<Json<Vec<SearchHit>>, ApiError> {
    if p.q.trim().is_empty() {
        return Err(UiError::bad_request("give words to search for: ?q=…").into());
    }
    let limit = p.limit.unwrap_or(20).min(500);
    blocking(move || Ok(Json(search(&ui, &p, limit)?)))
        .await
        .map_err(ApiError)
}

async fn api_stats(State(ui): State<Arc<Ui>>) -> Result<Json<StatsReport>, ApiError> {
    blocking(move || Ok(Json(stats(&ui)?)))
        .await
        .map_err(ApiError)
}

async fn api_usage(
    State(ui): State<Arc<Ui>>,
    Query(p): Query<UsageParams>,
) -> Result<Json<freecode_ops::usage::UsageReport>, ApiError> {
    blocking(move || Ok(Json(usage(&ui, &p)?)))
        .await
        .map_err(ApiError)
}

/// Server-sent events for session `id`: a `trace` event (the `trace --json` object) each time
/// its log changes (looked at every second; the page was drawn from the log as it was when the
/// stream opened), aged against the clock as `trace --follow` does; comments keep the
/// connection alive. The trace comes from [`trace`], which tails a live session's log: a change
/// costs the appended bytes, not a fold of the whole log.
async fn api_events(
    State(ui): State<Arc<Ui>>,
    Path(id): Path<String>,
) -> Result<Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>>, UiError>
{
    let resolved = {
        let home = ui.home.clone();
        blocking(move || Ok(resolve_recorded_id(&home, &id)?)).await?
    };
    let path = freecode_ops::trace::events_path(&ui.home, &resolved);
    let last = stamp(&path);
    let stream = futures_util::stream::unfold(
        (ui, resolved, path, last),
        |(ui, id, path, mut last)| async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = stamp(&path);
                if now.is_none() || now == last {
                    continue;
                }
                last = now;
                let (u, i) = (ui.clone(), id.to_string());
                let traced = tokio::task::spawn_blocking(move || trace(&u, &i)).await;
                let Ok(Ok((_, Some(trace)))) = traced else {
                    continue;
                };
                let Ok(json) = serde_json::to_string(&*trace) else {
                    continue;
                };
                let event = Event::default().event("trace").data(json);
                return Some((Ok(event), (ui, id, path, last)));
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Server-sent events saying how far the index refresh that searches and the stats wait on has
/// got: a `progress` event (`{"indexing": true, "done": N, "total": M}`, or `{"indexing":
/// false}`) at once and at each change (looked at five times a second); comments keep the
/// connection alive. The page a search or the stats are loading into shows it.
async fn api_progress(
    State(ui): State<Arc<Ui>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let stream = futures_util::stream::unfold((ui, None), |(ui, last)| async move {
        loop {
            let now = ui.indexing.get();
            if last != Some(now) {
                let data = match now {
                    Some((done, total)) => {
                        serde_json::json!({"indexing": true, "done": done, "total": total})
                    }
                    None => serde_json::json!({"indexing": false}),
                };
                let event = Event::default().event("progress").data(data.to_string());
                return Some((Ok(event), (ui, Some(now))));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feedback_says_how_far_indexing_is_and_clears_when_done() {
        let indexing = Indexing::default();
        assert_eq!(indexing.get(), None);
        {
            let mut f = Feedback(&indexing);
            f.sessions(0, 2_000);
            assert_eq!(indexing.get(), Some((0, 2_000)));
            f.sessions(1_500, 2_000);
            assert_eq!(indexing.get(), Some((1_500, 2_000)));
            // All done: nothing is being indexed any more.
            f.sessions(2_000, 2_000);
            assert_eq!(indexing.get(), None);
            f.sessions(3, 4);
        }
        // The operation is over (even one that failed half way): cleared.
        assert_eq!(indexing.get(), None);
    }
}
