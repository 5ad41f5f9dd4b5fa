//! The UI's pages, as [`maud`] templates: the session list (filters, paging, the search box),
//! search results with the matches marked, a session's transcript a page at a time (tool calls
//! folded in `<details>`, code highlighted, images from `data:` URLs of image types only), its
//! trace as a waterfall, and stats as bar charts. Everything from a session is interpolated
//! through the template, which escapes it; nothing here builds HTML from session data by hand.
//! The same templates make the offline files of `--html` ([`Assets::Inline`]).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use freecode_core::message::{PartType, Role};
use freecode_core::rollout::trace::Trace;
use freecode_core::{SessionMeta, StoredMessage};
use freecode_store::index::SearchHit;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;

use freecode_ops::human::{
    count, format_duration, local_time, plural, relative_time, thousands, truncate,
};
use freecode_ops::sessions::TranscriptPage;
use freecode_ops::types::StatsReport;
use freecode_ops::usage::{UsageKey, UsageReport};

use super::api::{self, ListQuery, PAGE_SESSIONS};
use super::highlight::code_block;
use super::text;
use super::waterfall;
use super::{COOKIE_DAYS, Ui, UiError, blocking};

/// The stylesheet, embedded.
pub const CSS: &str = include_str!("assets/app.css");
/// The script, embedded.
pub const JS: &str = include_str!("assets/app.js");

/// How a page gets its stylesheet and script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assets {
    /// From the server (`/assets/…`): what the CSP allows.
    Linked,
    /// Inside the page: an offline file (`--html`), opened without a server.
    Inline,
}

/// A whole page around `body`.
pub fn layout(title: &str, assets: Assets, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " — freecode" }
                @match assets {
                    Assets::Linked => {
                        link rel="stylesheet" href="/assets/app.css";
                        script src="/assets/app.js" defer {}
                    }
                    // Constants of this binary, not session data.
                    Assets::Inline => {
                        style { (PreEscaped(CSS)) }
                        script { (PreEscaped(JS)) }
                    }
                }
            }
            body {
                @if assets == Assets::Linked {
                    header.top {
                        a.brand href="/" { "freecode" }
                        nav {
                            a href="/" { "Sessions" }
                            a href="/stats" { "Stats" }
                        }
                        form.search action="/search" method="get" role="search" {
                            input type="search" name="q" placeholder="Search messages and tool output" aria-label="Search";
                            button type="submit" { "Search" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

pub(super) fn routes() -> Router<Arc<Ui>> {
    use axum::routing::get;
    Router::new()
        .route("/", get(list_page))
        .route("/search", get(search_page))
        .route("/session/{id}", get(session_page))
        .route("/trace/{id}", get(trace_page))
        .route("/stats", get(stats_page))
        .route("/assets/app.css", get(css))
        .route("/assets/app.js", get(js))
}

async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
        .into_response()
}

/// The page that takes the token from the URL: it sets the cookie (a header) and reloads `to`
/// from this origin. `to` is the request's own path; one starting `//` would name another host.
pub fn handshake_page(to: &str) -> Html<String> {
    let to = if to.starts_with("//") || !to.starts_with('/') {
        "/"
    } else {
        to
    };
    Html(forward_page(to, "freecode").into_string())
}

/// The private file the browser is started on: it forwards to `url` (with the token), so the
/// token is never on a command line.
pub fn launch_page(url: &str) -> Markup {
    forward_page(url, "freecode ui")
}

/// A page that sends the browser on to `to` at once (and links it, for a browser that waits).
fn forward_page(to: &str, title: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="referrer" content="no-referrer";
                meta http-equiv="refresh" content=(format!("0;url={to}"));
                title { (title) }
            }
            body { p { a href=(to) { "Open freecode ui" } } }
        }
    }
}

/// The answer to a request without the right token (403): a page that says what happened and
/// what to do, with no session data and no link that carries a token.
pub fn stale_link_page(what: &str) -> Response {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="referrer" content="no-referrer";
                title { "Open freecode ui from its link — freecode" }
            }
            body {
                h1 { "Forbidden: open the link freecode ui printed" }
                p { (what) }
                p { "The viewer shows your transcripts, so every browser needs its key once: the link "
                    code { "freecode ui" } " prints in the terminal when it starts (" code { "http://127.0.0.1:PORT/?token=…" } "). "
                    "Open that link and this page works again; the key is then kept in a cookie for "
                    (COOKIE_DAYS) " days." }
                p { "The link stays the same from run to run. It changes only after "
                    code { "freecode ui --new-token" } ", which makes every older link and tab stop working." }
            }
        }
    };
    (StatusCode::FORBIDDEN, Html(page.into_string())).into_response()
}

/// The page of an error.
pub fn error_page(status: StatusCode, message: &str) -> Html<String> {
    Html(
        layout(
            status.canonical_reason().unwrap_or("Error"),
            Assets::Linked,
            html! {
                h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                p.error { (message) }
            },
        )
        .into_string(),
    )
}

fn page_html(m: Markup) -> Html<String> {
    Html(m.into_string())
}

/// A query string from pairs, each part percent-encoded.
fn query(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// The path of a session's page (ids are `[A-Za-z0-9._-]`: safe in a path).
fn session_href(id: &str) -> String {
    format!("/session/{id}")
}

fn status_badge(status: &str) -> Markup {
    html! { span class=(format!("badge status-{}", status.chars().filter(char::is_ascii_alphanumeric).collect::<String>())) { (status) } }
}

async fn list_page(
    State(ui): State<Arc<Ui>>,
    Query(q): Query<ListQuery>,
) -> Result<Html<String>, UiError> {
    blocking(move || {
        let sessions = api::list_sessions(&ui, &q)?;
        Ok(page_html(list_markup(&sessions, &q)))
    })
    .await
}

/// The agents a session can come from, as the list's filter offers them.
const AGENTS: &[&str] = &[
    freecode_core::NATIVE_AGENT,
    "claude-code",
    "codex",
    "gemini-cli",
    "opencode",
    "goose",
];

fn list_markup(sessions: &[SessionMeta], q: &ListQuery) -> Markup {
    let page = q.page.unwrap_or(1).max(1);
    let from = (page - 1).saturating_mul(PAGE_SESSIONS);
    let shown = sessions.iter().skip(from).take(PAGE_SESSIONS);
    let project = q.project.as_deref().unwrap_or("");
    let status = q.status.as_deref().unwrap_or("");
    let agent = q.agent.as_deref().unwrap_or("");
    let pages = sessions.len().div_ceil(PAGE_SESSIONS).max(1);
    let href = |p: usize| {
        let p = p.to_string();
        format!(
            "/{}",
            query(&[
                ("project", project),
                ("status", status),
                ("agent", agent),
                ("page", &p)
            ])
        )
    };
    // The agent column and filter appear once a session came from another agent.
    let imported = !agent.is_empty()
        || sessions
            .iter()
            .any(|m| m.agent() != freecode_core::NATIVE_AGENT);
    let now = freecode_store::now_ms();
    layout(
        "Sessions",
        Assets::Linked,
        html! {
            h1 { "Sessions" }
            form.filters method="get" action="/" {
                label { "Project " input type="text" name="project" value=(project) placeholder="/path/to/project"; }
                label { "Status "
                    select name="status" {
                        @for s in ["", "active", "interrupted", "archived", "deleted"] {
                            option value=(s) selected[s == status] { @if s.is_empty() { "any" } @else { (s) } }
                        }
                    }
                }
                @if imported {
                    label { "Agent "
                        select name="agent" {
                            option value="" selected[agent.is_empty()] { "any" }
                            @for a in AGENTS {
                                option value=(a) selected[*a == agent] { (a) }
                            }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            p.count { (thousands(sessions.len() as u64)) " sessions, newest activity first" }
            table.sessions {
                thead { tr { th { "Title" } th { "Status" } th { "Turns" } th { "Last activity" } th { "Project" } th { "Model" } @if imported { th { "Agent" } } th {} } }
                tbody {
                    @for m in shown {
                        tr data-id=(m.id) {
                            td.title { a href=(session_href(&m.id)) { @if m.title.is_empty() { "(no title)" } @else { (m.title) } } }
                            td { (status_badge(m.status.as_str())) }
                            td.num { (thousands(m.turn_count)) }
                            td title=(local_time(m.last_turn_at)) { (relative_time(m.last_turn_at, now)) }
                            td.project { (m.project_path) }
                            td { (m.model.as_deref().unwrap_or("")) }
                            @if imported { td.agent { (m.agent()) } }
                            td { a href=(format!("/trace/{}", m.id)) { "trace" } }
                        }
                    }
                }
            }
            (pager(page, pages, &href))
        },
    )
}

/// The pages a pager links by number: the first, the last, and two on each side of `page`;
/// `None` where pages are left out.
fn pager_numbers(page: usize, pages: usize) -> Vec<Option<usize>> {
    let mut out = Vec::new();
    for p in 1..=pages {
        if p == 1 || p == pages || p.abs_diff(page) <= 2 {
            out.push(Some(p));
        } else if out.last().is_some_and(Option::is_some) {
            out.push(None);
        }
    }
    out
}

/// Previous, numbered pages and next; nothing when there is one page.
fn pager(page: usize, pages: usize, href: &dyn Fn(usize) -> String) -> Markup {
    html! {
        @if pages > 1 {
            nav.pager aria-label="Pages" {
                @if page > 1 { a.prev rel="prev" href=(href(page - 1)) { "← previous" } }
                @else { span.prev.disabled { "← previous" } }
                @for n in pager_numbers(page, pages) {
                    @match n {
                        Some(n) if n == page => { span.current aria-current="page" { (n) } }
                        Some(n) => { a.page href=(href(n)) { (n) } }
                        None => { span.gap { "…" } }
                    }
                }
                @if page < pages { a.next rel="next" href=(href(page + 1)) { "next →" } }
                @else { span.next.disabled { "next →" } }
                span.of { "page " (thousands(page as u64)) " of " (thousands(pages as u64)) }
            }
        }
    }
}

async fn search_page(
    State(ui): State<Arc<Ui>>,
    Query(p): Query<api::SearchParams>,
) -> Result<Html<String>, UiError> {
    blocking(move || {
        let hits = if p.q.trim().is_empty() {
            Vec::new()
        } else {
            api::search(&ui, &p, 100)?
        };
        Ok(page_html(search_markup(&p, &hits)))
    })
    .await
}

/// A snippet with its matches in `<mark>`: `matches` are char offsets, as `search --json`
/// gives them.
fn snippet(hit: &SearchHit) -> Markup {
    let chars: Vec<char> = hit.snippet.chars().collect();
    let seg = |a: usize, b: usize| -> String {
        chars[a.min(chars.len())..b.min(chars.len()).max(a.min(chars.len()))]
            .iter()
            .collect()
    };
    let mut pieces: Vec<(bool, String)> = Vec::new();
    let mut pos = 0;
    for m in &hit.matches {
        if m.start < pos || m.end < m.start {
            continue;
        }
        pieces.push((false, seg(pos, m.start)));
        pieces.push((true, seg(m.start, m.end)));
        pos = m.end;
    }
    pieces.push((false, seg(pos, chars.len())));
    html! {
        span.snippet { @for (hit, text) in &pieces { @if *hit { mark { (text) } } @else { (text) } } }
    }
}

fn search_markup(p: &api::SearchParams, hits: &[SearchHit]) -> Markup {
    let q = p.q.as_str();
    let project = p.project.as_deref().unwrap_or("");
    let agent = p.agent.as_deref().unwrap_or("");
    let mode = p.mode.as_deref().unwrap_or("");
    layout(
        "Search",
        Assets::Linked,
        html! {
            h1 { "Search" }
            form.search-big method="get" action="/search" {
                input type="search" name="q" value=(q) aria-label="Search" autofocus;
                label { "Project " input type="text" name="project" value=(project) placeholder="/path/to/project"; }
                label { "Agent "
                    select name="agent" {
                        option value="" selected[agent.is_empty()] { "any" }
                        @for a in AGENTS {
                            option value=(a) selected[*a == agent] { (a) }
                        }
                        // A name typed into the address: kept, so the page says what it searched.
                        @if !agent.is_empty() && !AGENTS.contains(&agent) {
                            option value=(agent) selected { (agent) }
                        }
                    }
                }
                label { "Find by "
                    select name="mode" {
                        option value="" selected[mode.is_empty()] { "the best there is" }
                        @for m in ["words", "meaning", "both"] {
                            option value=(m) selected[m == mode] { (m) }
                        }
                    }
                }
                button type="submit" { "Search" }
            }
            @if !q.trim().is_empty() {
                @if !hits.is_empty() && !hits.iter().any(SearchHit::is_strong) {
                    p.count { "No strong match for " q { (q) } ": the nearest by meaning, each weak." }
                } @else {
                    p.count { (hits.len()) @if hits.len() == 1 { " hit" } @else { " hits" } " for " q { (q) } }
                }
                ol.hits {
                    @for h in hits {
                        li.hit {
                            div.hit-head {
                                a href=(format!("{}#m-{}", session_href(&h.session_id), h.message_id)) { @if h.title.is_empty() { "(no title)" } @else { (h.title) } }
                                " " span.role { (h.role) } " " span.when { (local_time(h.timestamp)) }
                                " " span.agent { (h.agent) }
                                @if let Some(why) = h.why() {
                                    " " span.found-by { (why) }
                                }
                            }
                            div { (snippet(h)) }
                        }
                    }
                }
            }
        },
    )
}

/// `?page=N`.
#[derive(Debug, Deserialize)]
struct PageParams {
    #[serde(default)]
    page: Option<usize>,
}

async fn session_page(
    State(ui): State<Arc<Ui>>,
    Path(id): Path<String>,
    Query(p): Query<PageParams>,
) -> Result<Html<String>, UiError> {
    blocking(move || {
        let page = p.page.unwrap_or(1).max(1);
        let t = api::transcript_page(&ui, &id, page)?;
        Ok(page_html(session_markup(&t, page)))
    })
    .await
}

fn meta_line(m: &SessionMeta) -> Markup {
    html! {
        dl.meta {
            dt { "Session" } dd.id { (m.id) }
            dt { "Project" } dd { (m.project_path) }
            dt { "Agent" } dd.agent { (m.agent()) }
            dt { "Status" } dd { (status_badge(m.status.as_str())) }
            dt { "Model" } dd { (m.provider) " / " (m.model.as_deref().unwrap_or("-")) }
            dt { "Turns" } dd { (thousands(m.turn_count)) }
            dt { "Created" } dd { (local_time(m.created_at)) }
            dt { "Last activity" } dd { (local_time(m.last_turn_at)) }
            @if let Some(t) = m.aggregated_token_count { dt { "Tokens" } dd { (thousands(t)) } }
        }
    }
}

fn session_markup(t: &TranscriptPage, page: usize) -> Markup {
    let id = t.meta.id.clone();
    let href = move |p: usize| format!("/session/{id}?page={p}");
    layout(
        &t.meta.title,
        Assets::Linked,
        html! {
            h1 { @if t.meta.title.is_empty() { "(no title)" } @else { (t.meta.title) } }
            (meta_line(&t.meta))
            p { a href=(format!("/trace/{}", t.meta.id)) { "Trace →" } " "
                a href=(format!("/api/sessions/{}", t.meta.id)) { "JSON" } }
            @let pages = t.total.div_ceil(api::PAGE_MESSAGES).max(1);
            p.count { (thousands(t.total as u64)) " messages"
                @if pages > 1 { ", " (thousands(api::PAGE_MESSAGES as u64)) " a page" } }
            (pager(page, pages, &href))
            (transcript(&t.messages, t.first))
            (pager(page, pages, &href))
        },
    )
}

/// Image types shown inline (no SVG: it is a document, not a picture).
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A `data:` URL for an image part, when its type is an image type and its data base64.
fn image_src(media_type: Option<&str>, data: Option<&str>) -> Option<String> {
    let mt = media_type?;
    let data = data?;
    if !IMAGE_TYPES.contains(&mt) {
        return None;
    }
    let ok = data
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    ok.then(|| format!("data:{mt};base64,{data}"))
}

/// Messages `first..` of a transcript.
pub fn transcript(messages: &[StoredMessage], first: usize) -> Markup {
    html! {
        ol.transcript start=(first + 1) { (transcript_items(messages)) }
    }
}

/// The items of a transcript's list (`<li>` each): a page, or a block of a streamed file.
pub fn transcript_items(messages: &[StoredMessage]) -> Markup {
    html! {
            @for m in messages {
                li class=(format!("msg role-{}", m.role.as_str().chars().filter(char::is_ascii_alphanumeric).collect::<String>()))
                    id=(format!("m-{}", m.id)) {
                    div.msg-head {
                        span.role { (m.role.as_str()) }
                        " " span.when { (local_time(m.timestamp)) }
                        @if m.interrupted == Some(true) { " " span.badge.interrupted { "interrupted" } }
                        @if let Some(u) = &m.usage {
                            " " span.usage title=(format!("{} tokens in, {} out", thousands(u.input_tokens.unwrap_or(0)), thousands(u.output_tokens.unwrap_or(0))))
                                { (count(u.input_tokens.unwrap_or(0))) " in · " (count(u.output_tokens.unwrap_or(0))) " out" }
                        }
                    }
                    @for part in &m.parts {
                        @match part.kind {
                            PartType::Text => {
                                @let text = part.content.as_deref().unwrap_or("");
                                @if m.role == Role::Assistant { (text::markdown(text)) } @else { (text::plain(text)) }
                            }
                            PartType::Code => { (code_block(part.content.as_deref().unwrap_or(""), part.language.as_deref())) }
                            PartType::Tool => {
                                @let name = part.tool.as_ref().and_then(|t| t.name.as_deref()).unwrap_or("tool");
                                details.tool {
                                    summary { span.tool-name { (name) } " "
                                        span.tool-args-short { (part.tool.as_ref().and_then(|t| t.args.as_ref()).map(|a| truncate(&a.to_string(), 80)).unwrap_or_default()) } }
                                    @if let Some(args) = part.tool.as_ref().and_then(|t| t.args.as_ref()) {
                                        h4 { "Arguments" }
                                        (code_block(&serde_json::to_string_pretty(args).unwrap_or_default(), Some("json")))
                                    }
                                    h4 { "Result" }
                                    (code_block(part.result.as_deref().unwrap_or(""), None))
                                }
                            }
                            PartType::Image => {
                                @if let Some(src) = image_src(part.media_type.as_deref(), part.data.as_deref()) {
                                    img.image src=(src) alt=(part.alt_text.as_deref().unwrap_or("image"));
                                } @else {
                                    p.note { "[image not shown: " (part.media_type.as_deref().unwrap_or("unknown type")) "]" }
                                }
                            }
                            PartType::Other(ref k) => { p.note { "[a part of type " (k) "]" } }
                        }
                    }
                }
            }
    }
}

/// `?turn=N`, `?turns=A-B`, `&fragment=1`.
#[derive(Debug, Deserialize)]
struct TraceParams {
    #[serde(default)]
    turn: Option<usize>,
    #[serde(default)]
    turns: Option<String>,
    #[serde(default)]
    fragment: Option<String>,
}

impl TraceParams {
    fn select(&self) -> Result<waterfall::Select, UiError> {
        if let Some(n) = self.turn {
            return Ok(waterfall::Select::Turn(n));
        }
        match self.turns.as_deref() {
            None | Some("") => Ok(waterfall::Select::All),
            Some(r) => r
                .split_once('-')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                .map(|(a, b)| waterfall::Select::Turns(a, b))
                .ok_or_else(|| UiError::bad_request(format!("turns={r:?}: expected A-B"))),
        }
    }
}

/// The link of a bar of turns `a..=b` of session `id`.
fn zoom_href(id: &str, (a, b): (usize, usize)) -> String {
    if a == b {
        format!("/trace/{id}?turn={a}")
    } else {
        format!("/trace/{id}?turns={a}-{b}")
    }
}

async fn trace_page(
    State(ui): State<Arc<Ui>>,
    Path(id): Path<String>,
    Query(p): Query<TraceParams>,
) -> Result<Html<String>, UiError> {
    blocking(move || {
        let sel = p.select()?;
        let (id, trace) = api::trace(&ui, &id)?;
        let Some(trace) = trace else {
            return Err(UiError::not_found(format!(
                "no recorded events for session {id}"
            )));
        };
        let mut spans = waterfall::Spans::of(&trace);
        // Tool outputs for the spans drawn one by one: a turn, or a trace small enough.
        let drawn = match sel {
            waterfall::Select::Turn(n) => Some(n),
            waterfall::Select::All if spans.len() <= waterfall::AGGREGATE_ABOVE => Some(0),
            _ => None,
        };
        if let Some(n) = drawn
            && let Some(replay) = api::replay(&ui, &id)?
        {
            spans = spans.with_outputs(&replay, |t| n == 0 || t == n);
        }
        let w = waterfall::build_from(&spans, &trace, sel);
        let sid = id.to_string();
        let zoom = move |r: (usize, usize)| Some(zoom_href(&sid, r));
        let chart = waterfall::markup(&w, &zoom);
        if p.fragment.is_some() {
            return Ok(page_html(chart));
        }
        let writing = api::being_written(&ui.home, &id);
        Ok(page_html(trace_markup(
            &trace,
            &w,
            chart,
            sel,
            Assets::Linked,
            writing,
        )))
    })
    .await
}

/// The trace page around its waterfall `chart`. The page follows the log as it grows
/// (`data-live`) only when something can still come: a request open, or a writer holding the
/// session (`writing`); a finished trace opens no connection.
pub fn trace_markup(
    t: &Trace,
    w: &waterfall::Waterfall,
    chart: Markup,
    sel: waterfall::Select,
    assets: Assets,
    writing: bool,
) -> Markup {
    let live = t.in_flight || (t.hung && !t.abandoned) || writing;
    html! {
        (layout(&format!("Trace {}", t.session_id), assets, html! {
            h1 { "Trace " span.id { (t.session_id) } }
            p.trace-summary #summary {
                @let pc = t.time.percents();
                (format_duration(t.wall_ms as f64)) " wall · model " (format_duration(t.time.model_ms as f64))
                " (" (pc[0]) "%) · tools " (format_duration(t.time.tools_ms as f64))
                " (" (pc[1]) "%) · idle " (format_duration(t.time.idle_ms as f64))
                " (" (pc[2]) "%) · other " (format_duration(t.time.other_ms as f64)) " (" (pc[3]) "%)"
                " · " (t.model_spans.len()) " model calls, " (t.tool_spans.len()) " tools, " (t.denied_spans.len()) " denied"
                " · tokens in " (thousands(t.input_tokens)) ", out " (thousands(t.output_tokens)) ", cached " (thousands(t.cache_read_tokens))
                @if t.hung { " · " span.badge.hung { "hung request" } }
                @if t.in_flight { " · " span.badge.in-flight { "in flight" } }
            }
            @if assets == Assets::Linked {
                p {
                    a href=(session_href(&t.session_id)) { "← transcript" } " "
                    a href=(format!("/api/trace/{}", t.session_id)) { "JSON" }
                    @match sel {
                        waterfall::Select::Turn(n) => { " · turn " (n) " of " (w.turns) " · " a href=(format!("/trace/{}", t.session_id)) { "all turns" } }
                        waterfall::Select::Turns(a, b) => { " · turns " (a) "–" (b) " of " (w.turns) " · " a href=(format!("/trace/{}", t.session_id)) { "all turns" } }
                        waterfall::Select::All => {}
                    }
                }
            }
            @if w.aggregated {
                p.note { (thousands((t.model_spans.len() + t.tool_spans.len() + t.denied_spans.len()) as u64))
                    " spans in " (thousands(w.turns as u64)) " turns, drawn as one bar per turn or group of turns; open a bar to zoom in." }
            }
            div.legend { span.key.model { "model" } span.key.ttft { "first token" } span.key.tool { "tool" } span.key.denied { "denied" } span.key.hung { "hung" } }
            div #chart data-session=(t.session_id) data-live=(live) data-turn=(match sel { waterfall::Select::Turn(n) => n.to_string(), _ => String::new() }) { (chart) }
        }))
    }
}

async fn stats_page(State(ui): State<Arc<Ui>>) -> Result<Html<String>, UiError> {
    blocking(move || {
        let report = api::stats(&ui)?;
        // One look at the index: by day and model, folded each way.
        let usage = api::usage(
            &ui,
            &api::UsageParams {
                by: Some("day,model".to_owned()),
            },
        )?;
        Ok(page_html(stats_markup(&report, &usage)))
    })
    .await
}

/// Horizontal bars, one chart: label, SVG bar (width a share of the largest), value text.
/// `chart` names it (`data-chart`).
fn bars(chart: &str, rows: &[(String, f64, String)]) -> Markup {
    let max = rows.iter().map(|r| r.1).fold(0.0_f64, f64::max).max(1.0);
    html! {
        div.bars data-chart=(chart) {
            @for (label, v, text) in rows {
                div.bar-row data-value=(v) {
                    span.bar-label { (label) }
                    svg.bar-track xmlns="http://www.w3.org/2000/svg" {
                        rect.bar x="0" y="2" height="14" width=(format!("{:.4}%", v / max * 100.0)) { title { (label) ": " (text) } }
                    }
                    span.bar-value { (text) }
                }
            }
            @if rows.is_empty() { p.empty { "Nothing recorded." } }
        }
    }
}

/// A bar's text for tokens in and out.
fn tokens_text(input: i64, output: i64) -> String {
    format!(
        "{} tokens ({} in, {} out)",
        thousands((input.max(0) + output.max(0)) as u64),
        thousands(input.max(0) as u64),
        thousands(output.max(0) as u64)
    )
}

/// Cost bars of usage folded by `key`: a group of no known cost is drawn as nothing and says
/// so.
fn cost_bars(u: &UsageReport, key: UsageKey) -> Vec<(String, f64, String)> {
    u.folded_by(key)
        .into_iter()
        .map(|(label, f)| {
            let requests = plural(f.requests, "request", "requests");
            match f.cost_usd {
                Some(c) => (label, c, format!("${c:.2} ({requests})")),
                None => (label, 0.0, format!("no price known ({requests})")),
            }
        })
        .collect()
}

fn stats_markup(r: &StatsReport, usage: &UsageReport) -> Markup {
    let s = &r.stats;
    let mut cost_models = cost_bars(usage, UsageKey::Model);
    cost_models.sort_by(|a, b| b.1.total_cmp(&a.1));
    let cost_days = cost_bars(usage, UsageKey::Day);
    let calls = |n: u64| plural(n, "call", "calls");
    let tools_time: Vec<(String, f64, String)> = s
        .tools
        .iter()
        .map(|t| {
            (
                t.tool.clone(),
                t.total_ms as f64,
                format!(
                    "{} in {} (p95 {})",
                    format_duration(t.total_ms as f64),
                    calls(t.calls),
                    format_duration(t.p95_ms as f64)
                ),
            )
        })
        .collect();
    // By model and by day: the rollout logs' calls, as `stats --json` gives them.
    let models_time: Vec<(String, f64, String)> = s
        .models
        .iter()
        .map(|m| {
            (
                m.model.clone(),
                m.total_ms as f64,
                format!(
                    "{} in {}",
                    format_duration(m.total_ms as f64),
                    calls(m.calls)
                ),
            )
        })
        .collect();
    let mut models_tokens: Vec<(String, f64, String)> = s
        .models
        .iter()
        .map(|m| {
            (
                m.model.clone(),
                (m.input_tokens.max(0) + m.output_tokens.max(0)) as f64,
                tokens_text(m.input_tokens, m.output_tokens),
            )
        })
        .collect();
    models_tokens.sort_by(|a, b| b.1.total_cmp(&a.1));
    let days_tokens: Vec<(String, f64, String)> = s
        .days
        .iter()
        .map(|d| {
            (
                d.day.clone(),
                (d.input_tokens.max(0) + d.output_tokens.max(0)) as f64,
                tokens_text(d.input_tokens, d.output_tokens),
            )
        })
        .collect();
    let days_time: Vec<(String, f64, String)> = s
        .days
        .iter()
        .map(|d| {
            (
                d.day.clone(),
                (d.model_ms + d.tool_ms) as f64,
                format!(
                    "{} (model {} in {}, tools {} in {})",
                    format_duration((d.model_ms + d.tool_ms) as f64),
                    format_duration(d.model_ms as f64),
                    calls(d.model_calls),
                    format_duration(d.tool_ms as f64),
                    calls(d.tool_calls)
                ),
            )
        })
        .collect();
    layout(
        "Stats",
        Assets::Linked,
        html! {
            h1 { "Stats" }
            p.count {
                (thousands(s.sessions)) " sessions · " (thousands(s.turns)) " user turns · " (thousands(s.messages)) " messages · "
                (thousands(s.model_calls)) " model calls (" (format_duration(s.model_ms as f64)) ", " (thousands(s.model_errors)) " failed)"
            }
            p.count { "tokens in " (thousands(s.input_tokens.max(0) as u64)) " · out " (thousands(s.output_tokens.max(0) as u64))
                " · cache read " (thousands(s.cache_read_tokens.max(0) as u64)) " · cache write " (thousands(s.cache_write_tokens.max(0) as u64)) }
            p.count {
                "cost " @match usage.total.cost_usd { Some(c) => { (format!("${c:.2}")) }, None => { "unknown" } }
                @if !usage.unpriced.is_empty() { " · no price known for " (usage.unpriced.join(", ")) }
            }
            h2 { "Cost by model" } (bars("model-cost", &cost_models))
            h2 { "Cost by day" } (bars("day-cost", &cost_days))
            p.note { "Each billed request once, priced by LiteLLM's table (embedded; prices.json in the home adds models), as `freecode usage` says." }
            h2 { "Time by tool" } (bars("tool-time", &tools_time))
            h2 { "Time by model" } (bars("model-time", &models_time))
            h2 { "Tokens by model" } (bars("model-tokens", &models_tokens))
            h2 { "Tokens by day" } (bars("day-tokens", &days_tokens))
            h2 { "Time by day (model and tools)" } (bars("day-time", &days_time))
            p.note { "From the rollout logs; days are local, by when each call ended." }
            @if !r.problems.is_empty() {
                h2 { "Left out" }
                ul { @for p in &r.problems { li { (p.path.display().to_string()) ": " (p.reason) } } }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use freecode_core::message::Part;

    #[test]
    fn session_text_is_escaped_everywhere() {
        let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>";
        let mut m = StoredMessage::new(
            "m\"1".to_owned(),
            Role::User,
            vec![
                Part::text(format!("{evil}\n```js\n{evil}\n```")),
                Part::tool(evil, serde_json::json!({ "a": evil }), evil),
            ],
            1,
        );
        m.parts.push(Part::image(
            "PHN2Zz4=",
            "image/svg+xml",
            Some(evil.to_owned()),
        ));
        let html = transcript(&[m], 0).into_string();
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(
            !html.contains("data:image/svg"),
            "svg is never inlined: {html}"
        );
    }

    #[test]
    fn the_assets_can_be_inlined_in_an_offline_page() {
        // Inside <script> and <style>, "</" could end the element early.
        assert!(!JS.contains("</") && !CSS.contains("</"));
        let page = layout("t", Assets::Inline, html! { p { "x" } }).into_string();
        assert_eq!(page.matches("<script>").count(), 1);
        assert!(!page.contains("src=\"/assets") && !page.contains("href=\"/assets"));
    }

    #[test]
    fn the_pager_numbers_the_pages_around_this_one() {
        let n = |page, pages| {
            pager_numbers(page, pages)
                .iter()
                .map(|p| p.map_or("…".to_owned(), |p| p.to_string()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(n(1, 1), "1");
        assert_eq!(n(1, 3), "1 2 3");
        assert_eq!(n(1, 20), "1 2 3 … 20");
        assert_eq!(n(10, 20), "1 … 8 9 10 11 12 … 20");
        assert_eq!(n(4, 20), "1 2 3 4 5 6 … 20");
        assert_eq!(n(20, 20), "1 … 18 19 20");
        let html = pager(3, 5, &|p| format!("/x?page={p}")).into_string();
        assert!(
            html.contains("<span class=\"current\" aria-current=\"page\">3</span>"),
            "{html}"
        );
        assert!(html.contains("href=\"/x?page=2\"") && html.contains("href=\"/x?page=4\""));
        assert!(html.contains("page 3 of 5"), "{html}");
        assert_eq!(pager(1, 1, &|p| p.to_string()).into_string(), "");
    }

    #[test]
    fn images_only_from_image_types_and_base64() {
        assert_eq!(
            image_src(Some("image/png"), Some("iVBORw0KGgo=")).as_deref(),
            Some("data:image/png;base64,iVBORw0KGgo=")
        );
        assert_eq!(image_src(Some("text/html"), Some("AA==")), None);
        assert_eq!(
            image_src(Some("image/png"), Some("AA==\" onload=\"x")),
            None
        );
        assert_eq!(image_src(None, Some("AA==")), None);
    }
}
