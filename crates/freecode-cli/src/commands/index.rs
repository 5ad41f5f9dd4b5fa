//! `freecode search`, `freecode stats` and `freecode index rebuild`: the readers served by the
//! SQLite session index, with a scan of the files when SQLite cannot be used.
//!
//! The backend is chosen once, at first use: SQLite at `state/freecode.db`, or — when it cannot be
//! opened, the state directory is read-only, or `FREECODE_THREAD_STORE=json` — the JSON thread
//! store, in which case these commands scan the files instead (same matches, simpler ranking).

use std::io::{IsTerminal, Write};

use anyhow::Context;
use clap::{Args, Subcommand};
use freecode_store::index::{
    MatchSpan, Problem, SearchHit, SearchQuery, SessionIndex, Stats, StatsScope, search_scan,
    stats_scan,
};
use freecode_store::threads::BackendChoice;
use freecode_store::{Home, SessionStore};

use crate::UserError;
use crate::render::{Style, local_time, plural, print_json, thousands, truncate};
use crate::sanitize::clean_line;
use crate::trace_render::{count, format_duration};

/// Environment switch for the thread-store backend: `json`, `sqlite` or `auto`.
pub const BACKEND_ENV: &str = "FREECODE_THREAD_STORE";

fn backend_choice() -> anyhow::Result<BackendChoice> {
    match std::env::var(BACKEND_ENV).unwrap_or_default().trim() {
        "" | "auto" => Ok(BackendChoice::Auto),
        "sqlite" => Ok(BackendChoice::Sqlite),
        "json" => Ok(BackendChoice::Json),
        other => {
            Err(UserError(format!("{BACKEND_ENV}={other:?}: use auto, sqlite or json")).into())
        }
    }
}

/// The session index when the SQLite backend can be used; `None` means: scan the files. Opens
/// the database once (recovering a corrupt one); never writes into a read-only home.
pub fn open_index(home: &Home) -> anyhow::Result<Option<SessionIndex>> {
    if backend_choice()? == BackendChoice::Json {
        tracing::info!("session index not used: {BACKEND_ENV}=json; scanning the files");
        return Ok(None);
    }
    let state = home.state_dir();
    let read_only = |p: &std::path::Path| {
        std::fs::metadata(p)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o222 == 0)
    };
    if read_only(&state) || (!state.exists() && read_only(home.root())) {
        tracing::info!(
            "session index not used: {} is read-only; scanning the files",
            state.display()
        );
        return Ok(None);
    }
    match SessionIndex::open(home) {
        Ok(ix) => Ok(Some(ix)),
        Err(e) => {
            tracing::warn!("session index unavailable ({e}); scanning the files");
            Ok(None)
        }
    }
}

/// The index's answer (`from_index`), or the files' (`scan`: same answer) when the index cannot
/// be used or fails: a reader never fails because another process holds the database. The one
/// fallback of `search`, `stats` and `session list`.
pub fn indexed_or_scanned<T>(
    home: &Home,
    from_index: impl FnOnce(&mut SessionIndex) -> Result<T, freecode_store::StoreError>,
    scan: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if let Some(mut ix) = open_index(home)? {
        match from_index(&mut ix) {
            Ok(answer) => return Ok(answer),
            Err(e) => tracing::warn!("session index failed ({e}); scanning the files"),
        }
    }
    scan()
}

/// Brings the index up to date, with a progress bar on a terminal when it takes a while (a
/// first `search` or `stats` on a big home indexes every session).
fn refreshed(ix: &mut SessionIndex) -> Result<(), freecode_store::StoreError> {
    let mut bar = crate::progress::Progress::new("indexing");
    let report = ix.refresh(|done, total| bar.update(done, total));
    bar.finish();
    report.map(drop)
}

/// The index brought up to date ([`refreshed`]), then `query`'s answer with the damaged files
/// the index skipped.
fn refreshed_then<T>(
    ix: &mut SessionIndex,
    query: impl FnOnce(&mut SessionIndex) -> Result<T, freecode_store::StoreError>,
) -> Result<(T, Vec<Problem>), freecode_store::StoreError> {
    refreshed(ix)?;
    let answer = query(ix)?;
    Ok((answer, ix.problems().to_vec()))
}

/// Warns on stderr about each damaged session file a command skipped: one line each, with the
/// path and the reason.
pub fn warn_problems(problems: &[Problem]) {
    for (path, why) in problems {
        tracing::warn!("skipped {}: {why}", path.display());
    }
}

/// `freecode search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words to find in messages and tool output (every word must match the start of a word).
    query: String,
    /// Only sessions of this project directory or one below it (relative: from the current
    /// directory).
    #[arg(long, value_name = "P")]
    project: Option<String>,
    /// Only messages since DATE: `2026-01-15`, an RFC 3339 time, `today`, `yesterday`, or
    /// `1w` / `3d` / `12h` / `30m` ago.
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// At most N hits.
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// Search archived and deleted sessions too.
    #[arg(long)]
    all: bool,
    /// Only sessions this agent wrote: `freecode` (ours), or the agent `freecode import` read
    /// them from (`claude-code`, `codex`, …). A name no session has matches nothing.
    #[arg(long, value_name = "A")]
    agent: Option<String>,
    /// Print a JSON array of hits: each with its plain `snippet` and the `matches` in it as
    /// character offsets (`[{start, end}]`).
    #[arg(long)]
    json: bool,
}

/// `freecode stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// One session (its id or a unique prefix of one).
    id: Option<String>,
    /// Sessions of this project directory or one below it (relative: from the current
    /// directory).
    #[arg(long, value_name = "P", conflicts_with = "id")]
    project: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `freecode index …`.
#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Drop the session index and rebuild it from the files.
    Rebuild {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `--project P` as the readers take it: relative paths are made absolute from the current
/// directory (without resolving links, as the session's own `projectPath` was recorded); paths
/// that are absolute here or in the original's Windows form (`C:\…`, `\\…`) are kept. The
/// readers then match P or a directory below it by whole components
/// ([`freecode_core::project_key::within_project`]).
pub fn project_scope(p: &str) -> anyhow::Result<String> {
    if p.is_empty() {
        return Err(UserError("--project: give a directory".into()).into());
    }
    let bytes = p.as_bytes();
    let windows = p.starts_with('\\')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':');
    if p.starts_with('/') || windows {
        return Ok(p.to_owned());
    }
    let abs = std::path::absolute(p).with_context(|| format!("--project {p}"))?;
    abs.into_os_string()
        .into_string()
        .map_err(|_| UserError(format!("--project {p}: the path is not UTF-8")).into())
}

/// Parses `--since` (one parser for every command that takes it): a date (local midnight),
/// an RFC 3339 time, `today` or `yesterday` (local midnight), or a span ago (`1w`, `3d`, `12h`,
/// `30m`, `10s`). A time in the future is a user error: it could only match nothing.
pub fn parse_since(s: &str, now_ms: i64) -> anyhow::Result<i64> {
    let t = since_ms(s.trim(), now_ms)?;
    if t > now_ms {
        return Err(UserError(format!(
            "--since {s:?} is in the future: nothing could match it"
        ))
        .into());
    }
    Ok(t)
}

fn since_ms(s: &str, now_ms: i64) -> anyhow::Result<i64> {
    // A date past what a timestamp holds (9999-12-31 in a zone east of UTC) is as much in the
    // future as any.
    let midnight = |date: jiff::civil::Date| -> anyhow::Result<i64> {
        match date.to_zoned(jiff::tz::TimeZone::system()) {
            Ok(zoned) => Ok(zoned.timestamp().as_millisecond()),
            Err(_) if date > jiff::civil::date(1970, 1, 1) => Ok(i64::MAX),
            Err(e) => Err(UserError(format!("--since {s:?}: {e}")).into()),
        }
    };
    let today = || -> anyhow::Result<jiff::civil::Date> {
        Ok(jiff::Timestamp::from_millisecond(now_ms)
            .context("the clock")?
            .to_zoned(jiff::tz::TimeZone::system())
            .date())
    };
    match s.to_ascii_lowercase().as_str() {
        "today" => return midnight(today()?),
        "yesterday" => return midnight(today()?.yesterday().context("yesterday")?),
        _ => {}
    }
    if let Ok(ago) = crate::duration::parse_duration(s, None) {
        let ago = i64::try_from(ago.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms.saturating_sub(ago));
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    if let Ok(date) = s.parse::<jiff::civil::Date>() {
        return midnight(date);
    }
    Err(UserError(format!(
        "--since {s:?}: expected a date (2026-01-15), an RFC 3339 time, today, yesterday, \
         or 1w / 3d / 12h / 30m"
    ))
    .into())
}

/// Runs `freecode search`.
pub fn search(home: &Home, a: SearchArgs) -> anyhow::Result<()> {
    let since = a
        .since
        .as_deref()
        .map(|s| parse_since(s, freecode_store::now_ms()))
        .transpose()?;
    let q = SearchQuery {
        text: a.query.clone(),
        project: a.project.as_deref().map(project_scope).transpose()?,
        since,
        limit: a.limit,
        all: a.all,
        agent: a.agent.clone(),
    };
    let (hits, problems) = indexed_or_scanned(
        home,
        |ix| refreshed_then(ix, |ix| ix.search(&q)),
        || Ok(search_scan(&SessionStore::open(home.clone())?, &q)?),
    )?;
    // A bare array: the problems go to stderr only.
    warn_problems(&problems);
    if a.json {
        print_json(&hits)?;
    } else {
        render_hits(&hits)?;
    }
    // As grep and rg: no match is exit status 1.
    if hits.is_empty() {
        return Err(crate::NoMatch.into());
    }
    Ok(())
}

fn render_hits(hits: &[SearchHit]) -> anyhow::Result<()> {
    let st = Style::stdout();
    if hits.is_empty() {
        // The status (1) says it to scripts; a person gets a word on stderr.
        if std::io::stderr().is_terminal() {
            eprintln!("No matches.");
        }
        return Ok(());
    }
    // Hits go out in 64 KiB writes, not one a line (stdout is line-buffered).
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    for h in hits {
        let title = if h.title.is_empty() {
            "(no title)"
        } else {
            &h.title
        };
        writeln!(
            out,
            "{}  {}  {:<9}  {}",
            st.id(&h.session_id),
            local_time(h.timestamp),
            clean_line(&h.role),
            st.dim(&truncate(title, 60))
        )?;
        writeln!(out, "    {}", highlight(&h.snippet, &h.matches, st))?;
    }
    out.flush()?;
    Ok(())
}

/// A snippet for the terminal: each segment made terminal-safe, the matches in bold yellow when
/// colour is on, and no markers at all when it is off (piped output is the plain text).
fn highlight(snippet: &str, matches: &[MatchSpan], st: Style) -> String {
    if !st.enabled() {
        return clean_line(snippet).into_owned();
    }
    let chars: Vec<char> = snippet.chars().collect();
    let segment = |a: usize, b: usize| -> String {
        let text: String = chars[a.min(chars.len())..b.min(chars.len())]
            .iter()
            .collect();
        clean_line(&text).into_owned()
    };
    let mut out = String::new();
    let mut pos = 0;
    for m in matches {
        if m.start < pos || m.end < m.start {
            continue;
        }
        out.push_str(&segment(pos, m.start));
        out.push_str(&st.highlight(&segment(m.start, m.end)));
        pos = m.end;
    }
    out.push_str(&segment(pos, chars.len()));
    out
}

/// Runs `freecode stats`.
pub fn stats(home: &Home, a: StatsArgs) -> anyhow::Result<()> {
    let scope = match (a.id, a.project) {
        (Some(id), _) => {
            StatsScope::Session(crate::commands::session::resolve_recorded_id(home, &id)?)
        }
        (None, Some(p)) => StatsScope::Project(project_scope(&p)?),
        (None, None) => StatsScope::All,
    };
    let store = SessionStore::open(home.clone())?;
    // A clear "not found" rather than empty stats; and the session's own turn count.
    let turn_count = match &scope {
        StatsScope::Session(id) => Some(store.meta(id)?.turn_count),
        _ => None,
    };
    let (stats, problems) = indexed_or_scanned(
        home,
        |ix| refreshed_then(ix, |ix| ix.stats(&scope)),
        || Ok(stats_scan(&store, &scope)?),
    )?;
    warn_problems(&problems);
    if a.json {
        return print_json(&crate::ops::StatsReport {
            stats,
            problems: crate::ops::Problem::all(&problems),
        });
    }
    render_stats(&stats, turn_count)
}

/// `turn_count`: the session's `turnCount` (every turn it ran, what `session list` shows), for
/// the stats of one session. The index counts the user turns still in the history, which
/// compaction trims: both are shown, each named for what it counts.
fn render_stats(s: &Stats, turn_count: Option<u64>) -> anyhow::Result<()> {
    let st = Style::stdout();
    let mut out = std::io::stdout().lock();
    let turns = match turn_count {
        Some(n) if n != s.turns => format!(
            "{} ({} in the history)",
            plural(n, "turn", "turns"),
            plural(s.turns, "user turn", "user turns")
        ),
        Some(n) => plural(n, "turn", "turns"),
        None => plural(s.turns, "user turn", "user turns"),
    };
    writeln!(
        out,
        "{}",
        st.bold(&format!(
            "{}, {turns}, {}",
            plural(s.sessions, "session", "sessions"),
            plural(s.messages, "message", "messages")
        ))
    )?;
    let failed = if s.model_errors > 0 {
        format!(", {} failed", thousands(s.model_errors))
    } else {
        String::new()
    };
    writeln!(
        out,
        "  model   {:>9}  {}{failed}",
        format_duration(s.model_ms as f64),
        plural(s.model_calls, "call", "calls")
    )?;
    // As `trace` prints them; cache writes (which `trace` rows leave out) only when there are.
    let cache_write = match s.cache_write_tokens.max(0) as u64 {
        0 => String::new(),
        n => format!(" cache-write={}", count(n)),
    };
    writeln!(
        out,
        "  tokens  in={} out={} cached={}{cache_write}",
        count(s.input_tokens.max(0) as u64),
        count(s.output_tokens.max(0) as u64),
        count(s.cache_read_tokens.max(0) as u64),
    )?;
    if s.tools.is_empty() {
        writeln!(out, "  {}", st.dim("no tool calls recorded"))?;
        return Ok(());
    }
    writeln!(
        out,
        "  {:<24} {:>6} {:>9} {:>9}",
        "tool", "calls", "total", "p95"
    )?;
    for t in &s.tools {
        writeln!(
            out,
            "  {:<24} {:>6} {:>9} {:>9}",
            truncate(&t.tool, 24),
            thousands(t.calls),
            format_duration(t.total_ms as f64),
            format_duration(t.p95_ms as f64)
        )?;
    }
    Ok(())
}

impl IndexCommand {
    /// Runs `freecode index …`.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        match self {
            Self::Rebuild { json } => {
                let Some(mut ix) = open_index(home)? else {
                    return Err(UserError(
                        "the session index needs the SQLite backend, which is not available here (see FREECODE_LOG=info)"
                            .into(),
                    )
                    .into());
                };
                let mut bar = crate::progress::Progress::with_delay(
                    "rebuilding the index",
                    std::time::Duration::ZERO,
                );
                let report = ix.rebuild(|done, total| bar.update(done, total));
                bar.finish();
                let report = report?;
                warn_problems(&report.problems);
                if json {
                    print_json(&crate::ops::Rebuilt {
                        sessions: report.sessions,
                        messages: report.messages,
                        events: report.events,
                        database: ix.path().to_path_buf(),
                        problems: crate::ops::Problem::all(&report.problems),
                    })
                } else {
                    writeln!(
                        std::io::stdout().lock(),
                        "indexed {}, {}, {} into {}",
                        plural(report.sessions as u64, "session", "sessions"),
                        plural(report.messages, "message", "messages"),
                        plural(report.events, "rollout event", "rollout events"),
                        ix.path().display()
                    )?;
                    Ok(())
                }
            }
        }
    }
}
