//! `freecode session …`: list, show, fork, delete (soft or purge), restore, compact, and
//! export/import (in [`crate::commands::share`]).
//!
//! `show` never holds a session: rendered, `--json` and `--html` alike, its messages are read a
//! block at a time (`SessionStore::message_blocks`), parsed and rendered on both cores.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use freecode_core::message::PartType;
use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};
use freecode_ops::human::{clean_line, clean_text};
use freecode_ops::scope::{parse_since, project_scope};
use freecode_ops::sessions::{self, CompactRequest, ListRequest, Sort, resolve_id};
use freecode_ops::types::JsonStyle;
use freecode_store::{Home, SessionStore};

use crate::UserError;
use crate::render::{
    Style, local_time, pad, plural, print_json, print_line, relative_time, shorten_middle,
    thousands, truncate, width,
};

/// Session commands.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// List sessions, newest activity first (deleted ones hidden unless --all).
    List(ListArgs),
    /// Show one session's meta and messages.
    Show(ShowArgs),
    /// Copy a session into a new one (parentId set, summary carried).
    Fork(IdArgs),
    /// Soft-delete a session (restorable), or erase it with --purge.
    Delete(DeleteArgs),
    /// Undo a soft delete or an archive.
    Restore(IdArgs),
    /// Give a session a new title.
    Rename(RenameArgs),
    /// Move a session to another project, keeping its id.
    ///
    /// For an imported session whose project was a guess, or that no evidence placed (under
    /// the home's `unplaced` project): put where it belongs.
    Move(MoveArgs),
    /// Hand a session to Claude Code, Codex or Gemini CLI, so the agent resumes it.
    ///
    /// Writes the session (run here, imported, or synced from another machine) as a new
    /// transcript in the agent's own home ($CLAUDE_CONFIG_DIR or ~/.claude; $CODEX_HOME or
    /// ~/.codex; ~/.gemini) and prints the command that resumes it. The session is written as it is,
    /// secrets included (it stays on your machines); --redact removes credentials first, as
    /// an export does. A later `freecode import` adds the turns the agent adds to this session.
    Handoff(HandoffArgs),
    /// Archive a session: kept and listed, out of the way (`restore` undoes it).
    Archive(IdArgs),
    /// Trim the log to the last N user turns, recording a summary.
    Compact(CompactArgs),
    /// Share a session: redacted, encrypted end to end, expiring (or write it to a file).
    Export(crate::commands::share::ExportArgs),
    /// Import a shared session (URL with its #key, or a bundle file) as a new session.
    Import(crate::commands::share::ImportArgs),
}

/// `session list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only sessions of this project directory or one below it (relative paths are taken from
    /// the current directory).
    #[arg(long, value_name = "P")]
    project: Option<String>,
    /// At most N sessions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only sessions whose last activity (`lastTurnAt`) is since D, however old their other
    /// turns: `2026-01-15`, an RFC 3339 time, `today`, `yesterday`, or `1w` / `3d` / `12h` /
    /// `30m` ago.
    #[arg(long, value_name = "D")]
    since: Option<String>,
    /// Order: activity (newest first, the default), created (newest first) or title.
    #[arg(long, value_enum, value_name = "KEY", default_value_t = SortKey::Activity)]
    sort: SortKey,
    /// Only sessions with this status (active, interrupted, archived, deleted).
    #[arg(long, value_name = "S")]
    status: Option<String>,
    /// Only sessions this agent wrote: `freecode` (ours), or the agent `freecode import` read
    /// them from (`claude-code`, `codex`, `gemini-cli`, `opencode`, `goose`). A name no session
    /// has lists nothing.
    #[arg(long, value_name = "A")]
    agent: Option<String>,
    /// Include deleted sessions.
    #[arg(long)]
    all: bool,
    /// Check every session against the files first, not only those that changed since the
    /// last look: sees at once what another program changed in place in a quiet session
    /// (otherwise seen within five minutes).
    #[arg(long)]
    fresh: bool,
    /// Print a JSON array of metas.
    #[arg(long)]
    json: bool,
}

/// `session rename`.
#[derive(Debug, Args)]
pub struct RenameArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// The new title (not empty).
    title: String,
    /// Print the updated meta as JSON.
    #[arg(long)]
    json: bool,
}

/// `session move`.
#[derive(Debug, Args)]
pub struct MoveArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// The project directory (relative paths are taken from the current directory).
    #[arg(long, value_name = "DIR")]
    project: String,
    /// Print the updated meta as JSON.
    #[arg(long)]
    json: bool,
}

/// `session handoff`.
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// The agent: claude-code, codex or gemini-cli.
    #[arg(long, value_name = "AGENT")]
    to: String,
    /// The directory to resume it in (default: the session's project; relative paths are
    /// taken from the current directory).
    #[arg(long, value_name = "DIR")]
    project: Option<String>,
    /// Remove credentials first, with the export's redactor (default: written as it is).
    #[arg(long)]
    redact: bool,
    /// Print {"agent", "id", "path", "resume"} as JSON.
    #[arg(long)]
    json: bool,
}

/// `session list --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Newest activity (`lastTurnAt`) first.
    Activity,
    /// Newest created first.
    Created,
    /// By title, A to Z (case-insensitive).
    Title,
}

/// `session show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// Print one JSON object: the meta fields plus `messages`.
    #[arg(long)]
    json: bool,
    /// Print directly even on a terminal (by default output longer than the screen goes
    /// through `$PAGER`, else `less -R`).
    #[arg(long)]
    no_pager: bool,
    /// Write the session as one self-contained HTML page to FILE (opens offline).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "offset", "limit"])]
    html: Option<PathBuf>,
    /// With --html: keep the secrets the page would redact (as `session export` does).
    #[arg(long, requires = "html")]
    no_redact: bool,
    /// Only the messages from number N on (counted from 0). Read from the log's offset index
    /// (`state/offsets/`), so a page deep in a long session costs a page.
    #[arg(long, value_name = "N")]
    offset: Option<usize>,
    /// At most N messages (from --offset, or from the first); `--json` then adds `page`
    /// (`offset`, `count`, `hasMore`, `nextOffset`).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

/// A command taking one session id.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `session delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// Erase the session directory, its rollout log and its compaction memory.
    #[arg(long)]
    purge: bool,
    /// Do not ask for confirmation before purging.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// `session compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// User turns to keep (at least 1).
    #[arg(long, value_name = "N")]
    keep: usize,
    /// File holding the summary of what is trimmed (`-`: standard input; at most 16 MiB).
    #[arg(long, value_name = "F")]
    summary_file: PathBuf,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

impl SessionCommand {
    /// Runs the command against `home`.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let store = SessionStore::open(home.clone())?;
        match self {
            Self::List(a) => list(&store, a),
            Self::Show(a) => show(&store, a),
            Self::Fork(a) => {
                let id = resolve_id(&store, &a.id)?;
                let forked = sessions::fork(&store, &id)?;
                if a.json {
                    print_json(&forked)
                } else {
                    print_line(&forked.session_id)
                }
            }
            Self::Delete(a) => delete(&store, a),
            Self::Export(a) => crate::commands::share::export(&store, a),
            Self::Import(a) => crate::commands::share::import(&store, a),
            Self::Restore(a) => {
                let id = resolve_id(&store, &a.id)?;
                let meta = sessions::restore(&store, &id)?;
                if a.json {
                    print_json(&meta)
                } else {
                    print_line(&format!("restored {id} (status {})", meta.status))
                }
            }
            Self::Rename(a) => {
                let id = resolve_id(&store, &a.id)?;
                let meta = sessions::rename(&store, &id, &a.title)?;
                if a.json {
                    print_json(&meta)
                } else {
                    print_line(&format!("renamed {id} to {:?}", meta.title))
                }
            }
            Self::Move(a) => {
                let id = resolve_id(&store, &a.id)?;
                let meta = sessions::move_to_project(&store, &id, &a.project)?;
                if a.json {
                    print_json(&meta)
                } else {
                    print_line(&format!("moved {id} to project {}", meta.project_path))
                }
            }
            Self::Handoff(a) => {
                let id = resolve_id(&store, &a.id)?;
                let req = freecode_ops::handoff::HandoffRequest {
                    to: freecode_ops::handoff::Target::parse(&a.to)?,
                    project: a.project,
                    redact: a.redact,
                };
                let homes = freecode_ops::handoff::AgentHomes::from_env(&|k| std::env::var_os(k));
                let done = freecode_ops::handoff::handoff(
                    &store,
                    &id,
                    &req,
                    &homes,
                    freecode_store::now_ms(),
                )?;
                if a.json {
                    print_json(&done)
                } else {
                    print_line(&format!(
                        "handed {id} to {} as {}
  wrote {}
  resume it with: {}",
                        done.agent,
                        done.id,
                        done.path.display(),
                        done.resume
                    ))
                }
            }
            Self::Archive(a) => {
                let id = resolve_id(&store, &a.id)?;
                let meta = sessions::archive(&store, &id)?;
                if a.json {
                    print_json(&meta)
                } else {
                    print_line(&format!(
                        "archived {id} (`freecode session restore {id}` brings it back)"
                    ))
                }
            }
            Self::Compact(a) => {
                let id = resolve_id(&store, &a.id)?;
                let summary = read_summary(&a.summary_file)?;
                if summary.trim().is_empty() {
                    return Err(UserError(format!(
                        "summary file {} is empty",
                        a.summary_file.display()
                    ))
                    .into());
                }
                let outcome = sessions::compact(
                    &store,
                    &id,
                    &CompactRequest {
                        keep: a.keep,
                        summary: Some(summary),
                    },
                )?;
                if a.json {
                    print_json(&outcome)
                } else if outcome.compacted {
                    print_line(&format!(
                        "compacted {id}: {} → {} messages, ~{} → ~{} tokens",
                        outcome.messages_before,
                        outcome.messages_after,
                        outcome.tokens_before,
                        outcome.tokens_after
                    ))
                } else {
                    print_line(&format!(
                        "nothing to compact in {id}: it has {} or fewer",
                        plural(a.keep as u64, "user turn", "user turns")
                    ))
                }
            }
        }
    }
}

fn list(store: &SessionStore, a: ListArgs) -> anyhow::Result<()> {
    if a.fresh {
        freecode_ops::index::check_everything();
    }
    let status = a
        .status
        .as_deref()
        .map(sessions::parse_status)
        .transpose()?;
    let req = ListRequest {
        status,
        within: a.project.as_deref().map(project_scope).transpose()?,
        since: a
            .since
            .as_deref()
            .map(|s| parse_since(s, freecode_store::now_ms()))
            .transpose()?,
        agent: a.agent,
        include_deleted: a.all,
        sort: match a.sort {
            SortKey::Activity => Sort::Activity,
            SortKey::Created => Sort::Created,
            SortKey::Title => Sort::Title,
        },
        limit: a.limit,
        ..ListRequest::default()
    };
    // Served from the index when it can be used (one stat per session, no file opened); the
    // scan gives the same answer when it cannot. A bare array under --json: the problems go to
    // stderr only.
    let sessions = sessions::list(store.home(), &req)?.sessions;
    if a.json {
        return print_json(&sessions);
    }
    // Rows go out in 64 KiB writes, not one a line (stdout is line-buffered).
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    if sessions.is_empty() {
        writeln!(out, "No sessions found.")?;
        out.flush()?;
        return Ok(());
    }
    let st = Style::stdout();
    let now = freecode_store::now_ms();
    let rows: Vec<[String; 5]> = sessions
        .iter()
        .map(|m| {
            [
                m.status.as_str().to_owned(),
                thousands(m.turn_count),
                relative_time(m.last_turn_at, now),
                clean_line(m.agent()).into_owned(),
                clean_line(&m.project_path).into_owned(),
            ]
        })
        .collect();
    let col = |i: usize, header: &str| {
        rows.iter()
            .map(|r| width(&r[i]))
            .chain([width(header)])
            .max()
            .unwrap_or(0)
    };
    let columns = crate::render::terminal_columns();
    // On a narrow terminal a full id takes the title's room: print the shortest prefix that
    // names one session (at least 8 characters, as git abbreviates), which every command takes.
    let ids: Vec<String> = if columns.is_some_and(|c| c < SHORT_ID_BELOW_COLUMNS) {
        let known = sessions::known_ids(store.home(), &sessions);
        sessions
            .iter()
            .map(|m| crate::render::short_id(&m.id, &known, SHORT_ID_MIN).to_owned())
            .collect()
    } else {
        sessions.iter().map(|m| m.id.clone()).collect()
    };
    let id_w = ids.iter().map(|i| width(i)).chain([2]).max().unwrap_or(2);
    let (status_w, turns_w, time_w) = (col(0, "STATUS"), col(1, "TURNS"), col(2, "ACTIVE"));
    let agent_w = col(3, "AGENT");
    let project_max = col(4, "PROJECT");
    // On a terminal every row fits its width: the project path is cut in the middle (its end,
    // the repository, stays) and the title at its end; too narrow for both, the project column
    // goes. Piped, rows are as long as they need.
    // An agent column when another agent's sessions are among them (as the viewer's list);
    // on a terminal it goes before the project's when the title would keep under 16.
    let several = sessions
        .iter()
        .any(|m| m.agent() != freecode_core::NATIVE_AGENT);
    let fixed = id_w + status_w + turns_w + time_w + 4 * 2;
    let (agent_on, project_w, title_w) = match columns {
        Some(cols) => {
            let room = cols.saturating_sub(fixed);
            let agent_on = several && room.saturating_sub(agent_w + 2) >= 16;
            let room = if agent_on { room - agent_w - 2 } else { room };
            if room >= 32 {
                let project_w = project_max.min((room * 2 / 5).max(16));
                (agent_on, Some(project_w), room - project_w - 2)
            } else {
                (agent_on, None, room.max(10))
            }
        }
        None => (several, Some(project_max.min(60)), 80),
    };
    let agent_cell = |a: &str| {
        if agent_on {
            format!("{}  ", pad(a, a, agent_w))
        } else {
            String::new()
        }
    };
    let project_header = project_w
        .map(|w| format!("{}  ", pad("PROJECT", "PROJECT", w)))
        .unwrap_or_default();
    writeln!(
        out,
        "{}",
        st.bold(&format!(
            "{}  {}  {:>turns_w$}  {}  {}{project_header}TITLE",
            pad("ID", "ID", id_w),
            pad("STATUS", "STATUS", status_w),
            "TURNS",
            pad("ACTIVE", "ACTIVE", time_w),
            agent_cell("AGENT"),
        ))
    )?;
    for ((m, row), id) in sessions.iter().zip(&rows).zip(&ids) {
        let [status, turns, active, agent, project] = row;
        let status_cell = match m.status {
            SessionStatus::Interrupted => st.red(status),
            SessionStatus::Active => status.clone(),
            _ => st.dim(status),
        };
        let project = project_w
            .map(|w| {
                let p = shorten_middle(project, w);
                format!("{}  ", pad(&p, &p, w))
            })
            .unwrap_or_default();
        let title = if m.title.is_empty() {
            "(no title)".to_owned()
        } else {
            truncate(&m.title, title_w)
        };
        writeln!(
            out,
            "{}  {}  {}{turns}  {}  {}{project}{title}",
            pad(&st.id(id), id, id_w),
            pad(&status_cell, status, status_w),
            " ".repeat(turns_w.saturating_sub(width(turns))),
            pad(active, active, time_w),
            agent_cell(agent),
        )?;
    }
    out.flush()?;
    Ok(())
}

/// Below this many columns `session list` prints short ids.
const SHORT_ID_BELOW_COLUMNS: usize = 100;
/// A short id has at least this many characters.
const SHORT_ID_MIN: usize = 8;

fn show(store: &SessionStore, a: ShowArgs) -> anyhow::Result<()> {
    let id = resolve_id(store, &a.id)?;
    if a.offset.is_some() || a.limit.is_some() {
        return show_page(store, &id, &a);
    }
    let meta = store.meta(&id)?;
    if a.json {
        return show_json(store, &id, &meta);
    }
    if let Some(file) = &a.html {
        let redactor = super::page_redactor(store.home(), a.no_redact)?;
        freecode_ui::export::session_file(store, &id, &meta, &redactor, file)?;
        super::say_redacted(&redactor, file);
        return Ok(());
    }
    // Buffered: the rendering writes a line in many pieces, and stdout (or the pager's pipe)
    // would take each as a write(2) of its own.
    let mut out =
        std::io::BufWriter::with_capacity(64 << 10, crate::pager::Pager::new(!a.no_pager));
    write_show(store, &id, &meta, Style::stdout(), &mut out)?;
    out.into_inner().map_err(|e| e.into_error())?.finish()?;
    Ok(())
}

/// `session show` for a person: the meta, then every message. The messages are rendered a
/// block at a time on both cores into a spool (memory up to 1 MiB, then an anonymous temp
/// file), and the header, which counts them, is written before them. Each issue is reported by
/// the store's reader, with the file's path.
fn write_show(
    store: &SessionStore,
    id: &SessionId,
    meta: &SessionMeta,
    st: Style,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let count = std::sync::atomic::AtomicU64::new(0);
    let mut spool =
        std::io::BufWriter::with_capacity(64 << 10, tempfile::SpooledTempFile::new(1 << 20));
    sessions::message_blocks(store, id)?.render(
        |messages, buf| {
            count.fetch_add(messages.len() as u64, std::sync::atomic::Ordering::Relaxed);
            for m in messages {
                writeln!(buf)?;
                render_message(buf, st, m)?;
            }
            Ok(())
        },
        |bytes| spool.write_all(bytes).map_err(anyhow::Error::from),
    )?;
    let mut spool = spool.into_inner().map_err(|e| e.into_error())?;
    std::io::Seek::rewind(&mut spool)?;
    writeln!(
        out,
        "{}  {}",
        st.id(&meta.id),
        st.bold(&if meta.title.is_empty() {
            "(no title)".into()
        } else {
            clean_line(&meta.title)
        })
    )?;
    writeln!(out, "  project   {}", clean_line(&meta.project_path))?;
    writeln!(
        out,
        "  model     {}{}",
        clean_line(&meta.provider),
        meta.model
            .as_deref()
            .map(|m| format!(" / {}", clean_line(m)))
            .unwrap_or_default()
    )?;
    writeln!(out, "  status    {}", clean_line(meta.status.as_str()))?;
    writeln!(out, "  created   {}", local_time(meta.created_at))?;
    writeln!(
        out,
        "  last turn {}  ({})",
        local_time(meta.last_turn_at),
        plural(meta.turn_count, "turn", "turns")
    )?;
    if let Some(p) = &meta.parent_id {
        writeln!(out, "  forked    from {}", clean_line(p))?;
    }
    if let Some(t) = meta.aggregated_token_count {
        writeln!(out, "  tokens    {}", thousands(t))?;
    }
    writeln!(out, "  messages  {}", thousands(count.into_inner()))?;
    std::io::copy(&mut spool, out)?;
    Ok(())
}

/// `session show --offset N --limit N`: one page ([`sessions::transcript_page`]), as JSON
/// ([`freecode_ops::types::SessionPage`]) or for a person (the header line, then the page's
/// messages).
fn show_page(store: &SessionStore, id: &SessionId, a: &ShowArgs) -> anyhow::Result<()> {
    let first = a.offset.unwrap_or(0);
    let take = a.limit.unwrap_or(usize::MAX);
    let page = sessions::transcript_page(store, id, first, take)?;
    if a.json {
        return print_json(&page.into_session_page());
    }
    let count = page.messages.len();
    let st = Style::stdout();
    let mut out =
        std::io::BufWriter::with_capacity(64 << 10, crate::pager::Pager::new(!a.no_pager));
    let title = if page.meta.title.is_empty() {
        "(no title)".into()
    } else {
        clean_line(&page.meta.title)
    };
    let range = match count {
        0 => format!("no messages from #{first}"),
        _ => format!("messages #{first}–#{}", first + count - 1),
    };
    let more = if page.more { ", more follow" } else { "" };
    writeln!(
        out,
        "{}  {}  ({range}{more})",
        st.id(&page.meta.id),
        st.bold(&title)
    )?;
    for m in &page.messages {
        writeln!(out)?;
        render_message(&mut out, st, m)?;
    }
    out.into_inner().map_err(|e| e.into_error())?.finish()?;
    Ok(())
}

/// `session show --json`, written as it is read ([`sessions::write_session`]): two threads
/// parse and render alternate blocks while this one writes, so the output streams on both cores
/// in the memory of a few blocks. The bytes are those of
/// [`freecode_ops::types::SessionDetail`].
fn show_json(store: &SessionStore, id: &SessionId, meta: &SessionMeta) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    sessions::write_session(
        store,
        id,
        meta,
        JsonStyle::Pretty,
        |b| Ok(out.write_all(b)?),
    )?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// The lines of a message's text, each made terminal-safe.
fn text_lines(out: &mut impl Write, text: Option<&str>) -> std::io::Result<()> {
    for line in clean_text(text.unwrap_or("")).lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

fn render_message(out: &mut impl Write, st: Style, m: &StoredMessage) -> std::io::Result<()> {
    let mut head = format!(
        "{} {}",
        local_time(m.timestamp),
        clean_line(m.role.as_str())
    );
    if m.is_interrupted() {
        head.push_str(" (interrupted)");
    }
    if let Some(u) = &m.usage {
        head.push_str(&format!(
            "  [{} in / {} out]",
            thousands(u.input_tokens.unwrap_or(0)),
            thousands(u.output_tokens.unwrap_or(0))
        ));
    }
    writeln!(out, "{}", st.dim(&head))?;
    for p in &m.parts {
        match &p.kind {
            PartType::Text => text_lines(out, p.content.as_deref())?,
            PartType::Code => {
                writeln!(
                    out,
                    "  ```{}",
                    clean_line(p.language.as_deref().unwrap_or(""))
                )?;
                text_lines(out, p.content.as_deref())?;
                writeln!(out, "  ```")?;
            }
            PartType::Tool => {
                let tool = p.tool.as_ref();
                let name = tool.and_then(|t| t.name.as_deref()).unwrap_or("?");
                let args = tool
                    .and_then(|t| t.args.as_ref())
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                writeln!(out, "  → {} {}", truncate(name, 60), truncate(&args, 100))?;
                if let Some(r) = &p.result {
                    if r.trim().is_empty() {
                        writeln!(out, "    = {}", st.dim("(empty output)"))?;
                    } else {
                        writeln!(out, "    = {}", truncate(r, 100))?;
                    }
                }
            }
            PartType::Image => {
                let size = p.data.as_deref().map_or(0, |d| d.len() * 3 / 4);
                writeln!(
                    out,
                    "  [image {} ~{} bytes{}]",
                    truncate(p.media_type.as_deref().unwrap_or("image/png"), 40),
                    thousands(size as u64),
                    p.alt_text
                        .as_deref()
                        .map(|t| format!(": {}", truncate(t, 100)))
                        .unwrap_or_default()
                )?;
            }
            PartType::Other(t) => writeln!(out, "  [{} part]", truncate(t, 40))?,
        }
    }
    Ok(())
}

fn delete(store: &SessionStore, a: DeleteArgs) -> anyhow::Result<()> {
    let id = resolve_id(store, &a.id)?;
    if !a.purge {
        let deleted = sessions::delete(store, &id)?;
        if a.json {
            return print_json(&deleted);
        }
        return print_line(&format!(
            "deleted {id} (soft: `freecode session restore {id}` brings it back)"
        ));
    }
    let meta = store.meta(&id)?;
    if !a.yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(UserError(format!(
                "refusing to purge {id} without confirmation: stdin is not a terminal (pass --yes)"
            ))
            .into());
        }
        eprint!(
            "Erase session {id} ({}) with its rollout log and compaction memory? This cannot be undone. [y/N] ",
            if meta.title.is_empty() {
                "no title".into()
            } else {
                clean_line(&meta.title)
            }
        );
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(UserError("purge cancelled".into()).into());
        }
    }
    let purged = sessions::purge(store, &id)?;
    if a.json {
        return print_json(&purged);
    }
    print_line(&format!(
        "purged {id} ({} removed)",
        plural(purged.removed_paths.unwrap_or(0) as u64, "path", "paths")
    ))
}

/// The most a compaction summary file may hold.
const SUMMARY_MAX_BYTES: u64 = 16 << 20;

/// Reads `--summary-file` (`-`: standard input), bounded: `/dev/zero` is an error, not 24 GB.
fn read_summary(path: &std::path::Path) -> anyhow::Result<String> {
    use freecode_store::fsutil::read_capped;
    let bytes = if path.as_os_str() == "-" {
        read_capped(
            std::io::stdin().lock(),
            path,
            SUMMARY_MAX_BYTES,
            "a summary file",
        )
    } else {
        let file = std::fs::File::open(path)
            .map_err(|e| UserError(format!("cannot read summary file {}: {e}", path.display())))?;
        read_capped(file, path, SUMMARY_MAX_BYTES, "a summary file")
    }
    .map_err(|e| UserError(e.to_string()))?;
    String::from_utf8(bytes)
        .map_err(|_| UserError(format!("summary file {} is not UTF-8", path.display())).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `session show` renders a session of many blocks on both cores through a spool: the
    /// messages, in file order, are those the whole read returns, rendered one after another,
    /// and the header counts them (a bad line skipped, a torn tail left out).
    #[test]
    fn show_renders_every_block_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::open(freecode_store::Home::new(dir.path())).unwrap();
        let id = store
            .create(freecode_store::NewSession {
                title: "blocks ü".into(),
                project_path: "/p".into(),
                provider: "p".into(),
                model: None,
            })
            .unwrap();
        let mut log = String::new();
        for i in 0..30_000u32 {
            if i == 12_345 {
                log += "not json\n";
            }
            log += &format!(
                r#"{{"id":"m{i}","role":"assistant","parts":[{{"type":"text","content":"line {i} é\n{}"}},{{"type":"tool","tool":{{"name":"sh","args":{{"n":{i}}}}},"result":"out {i}"}}],"timestamp":{i}}}"#,
                "word ".repeat(40)
            );
            log.push('\n');
        }
        log += r#"{"id":"torn","role":"user""#;
        let path = store.locate(&id).unwrap().messages();
        std::fs::write(&path, &log).unwrap();
        assert!(log.len() > 3 * freecode_store::session::STREAM_BLOCK);

        let meta = store.meta(&id).unwrap();
        let st = Style::new(true);
        let mut got = Vec::new();
        write_show(&store, &id, &meta, st, &mut got).unwrap();
        let whole = store.messages(&id).unwrap();
        assert_eq!(whole.messages.len(), 30_000);
        let mut body = Vec::new();
        for m in &whole.messages {
            writeln!(body).unwrap();
            render_message(&mut body, st, m).unwrap();
        }
        let got = String::from_utf8(got).unwrap();
        let (head, rest) = got.split_once("  messages  30,000\n").unwrap();
        assert!(head.contains("blocks ü"), "{head}");
        assert!(
            rest.as_bytes() == body,
            "{} vs {} bytes",
            rest.len(),
            body.len()
        );
    }
}
