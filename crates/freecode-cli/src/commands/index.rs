//! `freecode search`, `freecode stats` and `freecode index rebuild`: the readers served by the
//! SQLite session index ([`freecode_ops::search`]), with a scan of the files when SQLite cannot
//! be used (`FREECODE_THREAD_STORE=json`, a read-only home): same matches, simpler ranking.

use std::io::{IsTerminal, Write};

use clap::{Args, Subcommand};
use freecode_ops::scope::{parse_since, parse_until, project_scope};
use freecode_ops::sessions::resolve_recorded_id;
use freecode_store::Home;
use freecode_store::index::{MatchSpan, SearchHit, SearchMode, SearchQuery, Stats, StatsScope};

use crate::progress::Feedback;
use crate::render::{Style, local_time, plural, print_json, thousands, truncate};
use crate::trace_render::{count, format_duration};
use freecode_ops::human::clean_line;

/// `freecode search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words to find in messages and tool output: each must begin a word of the message (stop
    /// words such as "the" or "why" left out); messages holding every word come first, then,
    /// for three words or more, those holding most of them (the rest said as "missing").
    query: String,
    /// Only sessions of this project directory or one below it (relative: from the current
    /// directory).
    #[arg(long, value_name = "P")]
    project: Option<String>,
    /// Only messages written since DATE (each message's own time, not its session's):
    /// `2026-01-15`, an RFC 3339 time, `today`, `yesterday`, or `1w` / `3d` / `12h` / `30m` ago.
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Only messages written before DATE (each message's own time), in the words --since
    /// takes; a date counts the whole day (`--since 2026-01-15 --until 2026-01-15` is that day).
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
    /// At most N sessions (with --per-message, N messages).
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// Search archived and deleted sessions too.
    #[arg(long)]
    all: bool,
    /// Only sessions this agent wrote: `freecode` (ours), or the agent `freecode import` read
    /// them from (`claude-code`, `codex`, …). A name no session has matches nothing.
    #[arg(long, value_name = "A")]
    agent: Option<String>,
    /// How to find: `words` (every word begins a word of the message), `meaning` (the turns
    /// nearest the query's sense, by the configured embedder: `embed.provider`; the nearest
    /// are shown even when none is near, marked weak), or `both`, fused. Default: both when an
    /// embedder is configured, else words.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    mode: Option<SearchMode>,
    /// Check every session against the files first, not only those that changed since the
    /// last look: sees at once what another program changed in place in a quiet session
    /// (otherwise seen within five minutes).
    #[arg(long)]
    fresh: bool,
    /// Every matching message, several of one session as they rank (by default a session's
    /// best message stands for it, with its other matches counted).
    #[arg(long)]
    per_message: bool,
    /// Print a JSON array of hits: each with its plain `snippet` and the `matches` in it as
    /// character offsets (`[{start, end}]`), `foundBy` (words, meaning, both, or id: the query
    /// is the session's id), the `similarity` when meaning found it, the `missing` words of a
    /// hit of most words, its `strength` (`strong`, or `weak`: found by meaning alone, less near
    /// than `embed.minSimilarity`; a search with no strong hit exits 1) and the session's other
    /// matching messages (`otherMatches`, `otherMessageIds`).
    #[arg(long)]
    json: bool,
}

fn parse_mode(s: &str) -> Result<SearchMode, String> {
    s.parse()
}

/// How long a search embeds what is pending before it answers with the vectors there are.
const SEARCH_EMBED_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// `freecode stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// One session (its id or a unique prefix of one).
    id: Option<String>,
    /// Sessions of this project directory or one below it (relative: from the current
    /// directory).
    #[arg(long, value_name = "P", conflicts_with = "id")]
    project: Option<String>,
    /// Check every session against the files first, not only those that changed since the
    /// last look: sees at once what another program changed in place in a quiet session
    /// (otherwise seen within five minutes).
    #[arg(long)]
    fresh: bool,
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
    /// Say what the index holds and how much of the history search by meaning covers (chunks
    /// with a vector, of all), embedding nothing.
    Status {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Embed every chunk of conversation that has no vector yet, for search by meaning (with
    /// the embedder `embed.provider` names); the vectors are kept in the index.
    Embed {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `freecode search`.
pub fn search(home: &Home, a: SearchArgs) -> anyhow::Result<()> {
    if a.fresh {
        freecode_ops::index::check_everything();
    }
    let since = a
        .since
        .as_deref()
        .map(|s| parse_since(s, freecode_store::now_ms()))
        .transpose()?;
    let until = a
        .until
        .as_deref()
        .map(|s| parse_until(s, freecode_store::now_ms()))
        .transpose()?;
    let q = SearchQuery {
        text: a.query.clone(),
        project: a.project.as_deref().map(project_scope).transpose()?,
        since,
        until,
        limit: a.limit,
        all: a.all,
        agent: a.agent.clone(),
    };
    // A bare array: the problems go to stderr only.
    let mut feedback = Feedback::new("indexing");
    let hits = if a.per_message {
        freecode_ops::meaning::search(home, &q, a.mode, SEARCH_EMBED_BUDGET, &mut feedback)
    } else {
        freecode_ops::meaning::search_by_session(
            home,
            &q,
            a.mode,
            SEARCH_EMBED_BUDGET,
            &mut feedback,
        )
    };
    feedback.finish();
    let hits = hits?;
    let strong = hits.iter().any(SearchHit::is_strong);
    if a.json {
        print_json(&hits)?;
    } else {
        if !strong && !hits.is_empty() {
            eprintln!(
                "No strong match: the nearest by meaning follow, each marked weak (less near than \
                 embed.minSimilarity)."
            );
        }
        render_hits(&hits)?;
    }
    // As grep and rg: no match is exit status 1; weak hits alone (the nearest by meaning, none
    // near enough) are no match.
    if !strong {
        // Words alone, more than one of them: say what would find more (on a terminal, or
        // with -v).
        if a.mode.is_none()
            && q.text.split_whitespace().count() > 1
            && matches!(
                freecode_ops::meaning::resolve_mode(home, None),
                Ok(SearchMode::Words)
            )
        {
            let hint = "no message holds most of these words (each must begin a word of it); \
                        a question finds more by meaning: `freecode config set embed.provider \
                        local` with `embed.path` (see `freecode config list`)";
            if std::io::stderr().is_terminal() && !a.json {
                eprintln!("{hint}");
            } else {
                tracing::info!("{hint}");
            }
        }
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
    // The agent is named once hits come from another agent's sessions (as `session list`).
    let agents = hits.iter().any(|h| h.agent != freecode_core::NATIVE_AGENT);
    let width = hits.iter().map(|h| h.agent.len()).max().unwrap_or(0);
    for h in hits {
        let title = if h.title.is_empty() {
            "(no title)"
        } else {
            &h.title
        };
        let agent = if agents {
            format!("{:<width$}  ", clean_line(&h.agent))
        } else {
            String::new()
        };
        let why = h
            .why()
            .map(|w| format!("  ({})", clean_line(&w)))
            .unwrap_or_default();
        writeln!(
            out,
            "{}  {}  {:<9}  {agent}{}{}",
            st.id(&h.session_id),
            local_time(h.timestamp),
            clean_line(&h.role),
            st.dim(&truncate(title, 60)),
            st.dim(&why)
        )?;
        writeln!(out, "    {}", highlight(&h.snippet, &h.matches, st))?;
        if h.other_matches > 0 {
            let more = plural(h.other_matches as u64, "other message", "other messages");
            writeln!(
                out,
                "    {}",
                st.dim(&format!("+ {more} of this session match"))
            )?;
        }
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
    if a.fresh {
        freecode_ops::index::check_everything();
    }
    let scope = match (a.id, a.project) {
        (Some(id), _) => StatsScope::Session(resolve_recorded_id(home, &id)?),
        (None, Some(p)) => StatsScope::Project(project_scope(&p)?),
        (None, None) => StatsScope::All,
    };
    let mut feedback = Feedback::new("indexing");
    let report = freecode_ops::search::stats(home, &scope, &mut feedback);
    feedback.finish();
    let report = report?;
    if a.json {
        return print_json(&report);
    }
    // The session's own turn count beside the index's user turns.
    let turn_count = match &scope {
        StatsScope::Session(id) => Some(freecode_ops::sessions::open(home)?.meta(id)?.turn_count),
        _ => None,
    };
    render_stats(&report.stats, turn_count)
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

/// `index status` for a person: the database, what it holds, and search by meaning's cover.
fn render_status(r: &freecode_ops::types::IndexStatus) -> anyhow::Result<()> {
    let st = Style::stdout();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}  {} ({:.1} MB)",
        st.bold("index   "),
        r.database.display(),
        r.database_bytes as f64 / 1e6
    )?;
    let skipped = if r.problems.is_empty() {
        String::new()
    } else {
        format!(
            "; {} skipped (`freecode doctor` says why)",
            plural(r.problems.len() as u64, "damaged file", "damaged files")
        )
    };
    writeln!(
        out,
        "{}  {}, {}{skipped}",
        st.bold("sessions"),
        thousands(r.sessions),
        plural(r.messages, "message", "messages")
    )?;
    let Some(m) = &r.meaning else {
        writeln!(
            out,
            "{}  {}",
            st.bold("meaning "),
            st.dim(
                "no embedder configured: search finds words (`freecode config set \
                 embed.provider local` with embed.path: see `freecode config list`)"
            )
        )?;
        return Ok(());
    };
    let model = m.model.as_deref().unwrap_or("no vectors yet");
    let cover = format!(
        "{} of {} {} a vector ({:.0}%)",
        thousands(m.embedded),
        plural(m.chunks, "chunk", "chunks"),
        if m.embedded == 1 { "has" } else { "have" },
        // Rounded down, so that 100% means every one.
        (m.coverage * 100.0).floor()
    );
    writeln!(out, "{}  {model}: {cover}", st.bold("meaning "))?;
    if let Some(problem) = &m.problem {
        writeln!(
            out,
            "{}  {}",
            " ".repeat(8),
            st.yellow(&format!("the embedder cannot be used: {problem}"))
        )?;
    } else if m.pending > 0 {
        let what = if m.embedded == 0 {
            "search finds by words until they have"
        } else {
            "search by meaning covers those only until the rest have"
        };
        writeln!(
            out,
            "{}  {what}: `freecode index embed` embeds them (so do `serve`, `mcp` and `ui`, in \
             the background)",
            " ".repeat(8),
        )?;
    }
    Ok(())
}

impl IndexCommand {
    /// Runs `freecode index …`.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        match self {
            Self::Rebuild { json } => {
                let mut feedback =
                    Feedback::with_delay("rebuilding the index", std::time::Duration::ZERO);
                let report = freecode_ops::search::rebuild(home, &mut feedback);
                feedback.finish();
                let report = report?;
                if json {
                    return print_json(&report);
                }
                writeln!(
                    std::io::stdout().lock(),
                    "indexed {}, {}, {} into {}",
                    plural(report.sessions as u64, "session", "sessions"),
                    plural(report.messages, "message", "messages"),
                    plural(report.events, "rollout event", "rollout events"),
                    report.database.display()
                )?;
                Ok(())
            }
            Self::Status { json } => {
                let mut feedback = Feedback::new("indexing");
                let report = freecode_ops::meaning::index_status(home, &mut feedback);
                feedback.finish();
                let report = report?;
                if json {
                    return print_json(&report);
                }
                render_status(&report)
            }
            Self::Embed { json } => {
                let embedder = freecode_ops::meaning::required(home)?;
                // Sessions indexed first (a bar of sessions), then chunks embedded (a bar of
                // chunks, "embedding").
                let mut feedback = Feedback::with_delay("indexing", std::time::Duration::ZERO);
                let report =
                    freecode_ops::meaning::fill(home, embedder.as_ref(), None, &mut feedback);
                feedback.finish();
                let report = report?;
                if json {
                    return print_json(&report);
                }
                writeln!(
                    std::io::stdout().lock(),
                    "{} of {} {} ({} now, in {:.1} s) from {}, in {}",
                    thousands(report.embedded),
                    plural(report.chunks, "chunk", "chunks"),
                    if report.embedded == 1 {
                        "has a vector"
                    } else {
                        "have vectors"
                    },
                    thousands(report.embedded_now),
                    report.seconds,
                    report.model,
                    report.database.display()
                )?;
                Ok(())
            }
        }
    }
}
