//! `freecode trace` (SPEC §16.3) and `freecode replay` (SPEC §13.1): read a session's rollout log
//! back as a waterfall of model calls and tools, or as turns and tool calls.
//!
//! Logs are folded by [`freecode_ops::trace`] (two halves on two threads past 8 MiB, borrowed
//! views, large reads) into the pure folds of [`freecode_core::rollout`] (constant memory
//! however long the log: spans and turns are spooled and written out, `--json` and rendered
//! alike); lines that are not events are reported on stderr. Differences from the original,
//! all deliberate:
//!
//! - Open requests are aged against the current time, not the last event, so a final request
//!   that never terminated shows as hung in a post-mortem (SPEC §19.32); `--json` and the OTLP
//!   export use that same trace. (A log with nothing open still ends at its last event.)
//! - `--list` is sorted, newest first (§19.36); colour and screen clearing only on a terminal.
//! - `--follow` tails the file: appended complete lines are read as they arrive, the log is never
//!   re-read from the start.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use freecode_core::SessionId;
use freecode_core::rollout::replay::{Replay, ReplayTurn};
use freecode_core::rollout::trace::TraceBuilder;
use freecode_ops::human::clean_line;
use freecode_ops::otlp::{Document, Source};
use freecode_ops::sessions::resolve_recorded_id;
use freecode_ops::trace::{
    self, CompactJson, PrettyJson, StreamedReplay, Tail, events_path, no_events, now_after,
    write_replay_json, write_trace_json,
};
use freecode_store::Home;

use crate::render::{
    fit_to, fit_to_terminal, local_time, plural, print_json, print_line, terminal_columns,
    thousands, truncate,
};
use crate::trace_render::{
    Palette, RenderOptions, RowSpans, format_duration, render_trace, write_streamed,
};

/// `freecode trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Session id or a unique prefix of one [default: the session whose log changed last]
    #[arg(value_name = "ID")]
    id: Option<String>,
    /// Trace the session whose log changed last (the default without an ID).
    #[arg(long, conflicts_with = "id")]
    last: bool,
    /// Show tool and denial rows (the default).
    #[arg(long, overrides_with = "no_tools")]
    tools: bool,
    /// Hide tool and denial rows.
    #[arg(long, overrides_with = "tools")]
    no_tools: bool,
    /// Only model calls that took at least N ms (tool rows hidden).
    #[arg(long, value_name = "N")]
    slow: Option<u64>,
    /// Print the trace as JSON (with --list: the listing).
    #[arg(long)]
    json: bool,
    /// List the recorded sessions, newest first.
    #[arg(long, conflicts_with_all = ["id", "last", "follow", "otlp", "otlp_endpoint"])]
    list: bool,
    /// Re-render every second as the log grows, until ctrl-c.
    #[arg(long, short = 'f', conflicts_with_all = ["json", "otlp", "otlp_endpoint"])]
    follow: bool,
    /// Print directly even on a terminal (by default a trace longer than the screen goes
    /// through `$PAGER`, else `less -R`).
    #[arg(long)]
    no_pager: bool,
    /// Stop --follow after N renders.
    #[arg(long, value_name = "N", hide = true, requires = "follow")]
    follow_iterations: Option<u64>,
    /// Write the trace as an OTLP/HTTP JSON document to FILE instead of rendering it.
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    otlp: Option<PathBuf>,
    /// Send the trace to an OTLP/HTTP collector instead of rendering it [default URL:
    /// $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT]
    #[arg(
        long,
        value_name = "URL",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with = "json"
    )]
    otlp_endpoint: Option<String>,
    /// Write the trace as one self-contained HTML page (the waterfall) to FILE (opens offline).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "follow", "list"])]
    html: Option<PathBuf>,
    /// With --html: keep the secrets the page would redact (as `session export` does).
    #[arg(long, requires = "html")]
    no_redact: bool,
}

/// `freecode replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Session id (or a unique prefix of one).
    id: String,
    /// Print the replay as JSON (`null` when the session has no log).
    #[arg(long)]
    json: bool,
}

impl TraceArgs {
    fn render_options(&self) -> RenderOptions {
        RenderOptions {
            slower_than_ms: self
                .slow
                .map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX)),
            show_tools: !self.no_tools,
            ..RenderOptions::default()
        }
    }

    /// Runs the command against `home`.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        if self.list {
            return list(home, self.json);
        }
        let id = match &self.id {
            Some(s) => resolve_recorded_id(home, s)?,
            None => trace::latest(home)?,
        };
        if self.follow {
            return follow(
                &id,
                &events_path(home, &id),
                &self.render_options(),
                Palette::stdout(),
                self.follow_iterations,
            );
        }
        // OTLP exports and `--html` pages need the whole trace; the rest is written as folded.
        let exporting = self.otlp.is_some() || self.otlp_endpoint.is_some() || self.html.is_some();
        if self.json && !exporting {
            // Written as folded: spans spooled as they close, the document written once.
            let Some((builder, now)) = trace::fold_trace_json::<PrettyJson>(home, &id)? else {
                return Err(no_events(&id).into());
            };
            let mut out = BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
            write_trace_json(&mut out, builder, now)?;
            out.flush()?;
            return Ok(());
        }
        if !exporting {
            // Rendered as folded: each row written into a spool as its span closes, the
            // waterfall written once in start order.
            let (opts, palette) = (self.render_options(), Palette::stdout());
            let sink = RowSpans::new(&opts, palette);
            let Some((builder, now)) = trace::fold_trace(home, &id, sink)? else {
                return Err(no_events(&id).into());
            };
            let (parts, sink) = builder.finish_parts(now);
            // On a terminal every row fits its width (cut with an ellipsis, never wrapped);
            // piped, rows are whole.
            let mut out =
                BufWriter::with_capacity(64 << 10, crate::pager::Pager::new(!self.no_pager));
            write_streamed(&mut out, &parts, &sink, terminal_columns())?;
            out.into_inner().map_err(|e| e.into_error())?.finish()?;
            return Ok(());
        }
        if self.html.is_none() {
            // Written as folded: each span's OTLP spooled as it closes, the document written
            // once, never held whole (for a POST into a temp file, sent from there).
            let Some((builder, now)) = trace::fold_trace_otlp(home, &id)? else {
                return Err(no_events(&id).into());
            };
            return export(
                &id,
                self.otlp.as_deref(),
                self.otlp_endpoint.as_deref(),
                Source::Folded(Box::new(builder), now),
            );
        }
        // `--html` needs the whole trace and replay; with `--otlp`/`--otlp-endpoint` too, the
        // same trace is exported.
        let Some(trace) = trace::trace(home, &id)? else {
            return Err(no_events(&id).into());
        };
        if let Some(file) = &self.html {
            let redactor = super::page_redactor(home, self.no_redact)?;
            freecode_ui::export::trace_file(home, &id, &trace, &redactor, file)?;
            super::say_redacted(&redactor, file);
        }
        export(
            &id,
            self.otlp.as_deref(),
            self.otlp_endpoint.as_deref(),
            Source::Whole(&trace),
        )
    }
}

/// `--otlp FILE` and `--otlp-endpoint [URL]` (empty: from `OTEL_EXPORTER_OTLP_*`), either or
/// both, the document written from `src`: straight into the file alone, else once into a
/// temp file that the file is copied from and the POST sends.
fn export(
    id: &SessionId,
    file: Option<&Path>,
    endpoint: Option<&str>,
    src: Source<'_>,
) -> anyhow::Result<()> {
    let Some(endpoint) = endpoint else {
        if let Some(file) = file {
            freecode_ops::otlp::write_file(src, file)?;
            print_line(&format!("Exported {id} to {}", file.display()))?;
        }
        return Ok(());
    };
    let doc = Document::new(src)?;
    if let Some(file) = file {
        doc.write_to(file)?;
        print_line(&format!("Exported {id} to {}", file.display()))?;
    }
    post(id, &doc, endpoint)
}

/// `--otlp-endpoint [URL]` (empty: from `OTEL_EXPORTER_OTLP_*`): POSTs `doc` and says where.
fn post(id: &SessionId, doc: &Document, endpoint: &str) -> anyhow::Result<()> {
    let endpoint = Some(endpoint).filter(|e| !e.is_empty());
    let url = freecode_ops::otlp::post_document(doc, endpoint)?;
    print_line(&format!("Exported {id} to {url}"))
}

fn list(home: &Home, json: bool) -> anyhow::Result<()> {
    let rows = trace::recorded(home)?;
    if json {
        return print_json(&rows);
    }
    // Human output is local time (as `session list`); `--json` carries the ms timestamps. Rows
    // go out in 64 KiB writes, not one a line (stdout is line-buffered).
    let mut out = BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    for r in &rows {
        let start = r.started_at.map_or_else(|| "-".to_owned(), local_time);
        let span = match (r.started_at, r.ended_at) {
            (Some(a), Some(b)) => format_duration((b - a) as f64),
            _ => format_duration(0.0),
        };
        writeln!(
            out,
            "{}  {start}  {}  {span}",
            r.session_id,
            plural(r.events, "event", "events")
        )?;
    }
    out.flush()?;
    Ok(())
}

/// `--follow`: tail the log and re-render every second, aged against the clock.
fn follow(
    id: &SessionId,
    path: &Path,
    opts: &RenderOptions,
    palette: Palette,
    iterations: Option<u64>,
) -> anyhow::Result<()> {
    let mut tail = Tail::open(id, path)?;
    let clear = std::io::stdout().is_terminal();
    let mut builder = TraceBuilder::new(id.as_str());
    let mut last = None;
    let mut renders = 0u64;
    loop {
        tail.read_new(path, |e| {
            last = Some(e.timestamp);
            builder.apply(&e);
        })?;
        // Aged to the clock once there is something to age (an empty log stays empty).
        let trace = builder.snapshot(last.map(|l| now_after(Some(l))));
        let mut out = std::io::stdout().lock();
        if clear {
            write!(out, "\x1b[2J\x1b[H")?;
        }
        writeln!(
            out,
            "{}\n\n{}",
            fit_to_terminal(&render_trace(&trace, opts, palette)),
            palette.dim(&format!("watching {id} — ctrl-c to stop"))
        )?;
        out.flush()?;
        drop(out);
        renders += 1;
        if iterations.is_some_and(|max| renders >= max) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

impl ReplayArgs {
    /// Runs the command against `home`.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let id = resolve_recorded_id(home, &self.id)?;
        let mut out = BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
        if self.json {
            // Written as folded: turns spooled as newer ones start, the document written once.
            let Some(builder) = trace::fold_replay::<PrettyJson>(home, &id)? else {
                return Err(no_events(&id).into());
            };
            write_replay_json(&mut out, builder)?;
        } else {
            // Rendered as read back: turns spooled as newer ones start, then written one at
            // a time.
            let Some(builder) = trace::fold_replay::<CompactJson>(home, &id)? else {
                return Err(no_events(&id).into());
            };
            write_replay(
                &mut out,
                StreamedReplay::new(builder),
                Palette::stdout(),
                terminal_columns(),
            )?;
        }
        out.flush()?;
        Ok(())
    }
}

/// Writes the rendered replay as it is read back from the spool, a turn at a time: the totals,
/// then every turn with its tool calls (arguments, duration, the first line of the output) and
/// refusals, then parse errors. Every text from the log is made terminal-safe; each line is
/// fitted to `columns` when given (a terminal's width).
fn write_replay(
    out: &mut impl Write,
    replay: StreamedReplay,
    p: Palette,
    columns: Option<usize>,
) -> std::io::Result<()> {
    let mut lines = Vec::new();
    replay_head(replay.replay(), p, &mut lines);
    write_lines(out, &mut lines, columns)?;
    let mut n = 0;
    let r = replay.each_turn(|t| {
        turn_lines(n, &t, p, &mut lines);
        n += 1;
        write_lines(out, &mut lines, columns)
    })?;
    replay_foot(&r, p, &mut lines);
    write_lines(out, &mut lines, columns)
}

/// Writes each of `lines` (fitted to `columns` when given) and a newline, and empties it.
fn write_lines(
    out: &mut impl Write,
    lines: &mut Vec<String>,
    columns: Option<usize>,
) -> std::io::Result<()> {
    for l in lines.drain(..) {
        out.write_all(fit_to(&l, columns).as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The replay's first lines: its totals.
fn replay_head(r: &Replay, p: Palette, lines: &mut Vec<String>) {
    lines.push(p.bold(&format!(
        "session {}  {} started, {}, {}",
        r.session_id,
        plural(r.total_turns, "turn", "turns"),
        plural(r.total_calls, "tool call", "tool calls"),
        plural(r.compact_count, "compaction", "compactions"),
    )));
    if r.compact_count > 0 {
        lines.push(p.dim(&format!(
            "  compacted ~{} → ~{} tokens",
            thousands(r.total_tokens_before),
            thousands(r.total_tokens_after)
        )));
    }
}

/// The lines of turn `n` (from 0): a blank line, its id and start, each call with its output's
/// first line, each refusal.
fn turn_lines(n: usize, t: &ReplayTurn, p: Palette, lines: &mut Vec<String>) {
    lines.push(String::new());
    lines.push(format!(
        "{} {}  {}",
        p.bold(&format!("turn {}", n + 1)),
        p.dim(&clean_line(&t.turn_id)),
        p.dim(&local_time(t.started_at))
    ));
    if t.calls.is_empty() && t.denied.is_empty() {
        lines.push(format!("  {}", p.dim("no tool calls")));
    }
    for c in &t.calls {
        let args = if c.args.is_null() {
            String::new()
        } else {
            c.args.to_string()
        };
        let took = c
            .duration_ms
            .map(|d| format!("  {}", format_duration(d as f64)))
            .unwrap_or_default();
        let failed = if c.failed == Some(true) {
            format!("  {}", p.red("failed"))
        } else {
            String::new()
        };
        lines.push(format!(
            "  → {} {}{}{failed}",
            p.cyan(&truncate(&c.tool, 40)),
            truncate(&args, 80),
            p.dim(&took)
        ));
        match &c.output {
            Some(out) => {
                let first = out
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("(empty output)");
                let more = out.lines().count().saturating_sub(1);
                let more = if more > 0 {
                    format!(" (+{})", plural(more as u64, "line", "lines"))
                } else {
                    String::new()
                };
                lines.push(format!("    = {}{}", truncate(first, 100), p.dim(&more)));
            }
            None => lines.push(format!("    {}", p.dim("(no output recorded)"))),
        }
    }
    for d in &t.denied {
        lines.push(format!(
            "  {} {} {}",
            p.yellow("✗ denied"),
            truncate(&d.tool, 40),
            p.dim(&format!("({}) {}", d.source, truncate(&d.reason, 100)))
        ));
    }
}

/// The replay's last lines: refusals, parse errors, what the read skipped.
fn replay_foot(r: &Replay, p: Palette, lines: &mut Vec<String>) {
    if r.total_denied > 0 {
        lines.push(String::new());
        lines.push(plural(r.total_denied, "call denied", "calls denied"));
    }
    if !r.errors.is_empty() {
        lines.push(String::new());
        lines.push(p.yellow(&format!(
            "parse errors ({})",
            thousands(r.errors.len() as u64)
        )));
        lines.extend(
            r.errors
                .iter()
                .take(5)
                .map(|e| format!("  - {}", truncate(e, 120))),
        );
        if r.errors.len() > 5 {
            lines.push(format!(
                "  … and {} more",
                thousands(r.errors.len() as u64 - 5)
            ));
        }
    }
    if r.unknown_events > 0 || !r.skipped_lines.is_empty() {
        lines.push(p.dim(&format!(
            "skipped: {}, {}",
            plural(
                r.unknown_events,
                "event of an unknown type",
                "events of unknown types"
            ),
            plural(
                r.skipped_lines.len() as u64,
                "unreadable line",
                "unreadable lines"
            )
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rendered replay written as its turns are read back from the spool is the one
    /// rendered from the whole replay in memory: on a log past the split, with outputs, calls
    /// and refusals for turns long out of the fold's window, unreadable lines and a torn tail,
    /// fitted to a width and not.
    #[test]
    fn streamed_replay_renders_the_whole_replay() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let id = SessionId::new("s").unwrap();
        let path = events_path(&home, &id);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut log = String::new();
        let big = "ü".repeat(1500);
        for n in 0..3000i64 {
            let ts = 1_700_000_000_000 + n * 1000;
            let t = format!("\"timestamp\":{ts},\"turnId\":\"turn-{n}\"");
            log += &format!("{{\"type\":\"turn.started\",{t}}}\n");
            log += &format!(
                "{{\"type\":\"function.call\",{t},\"tool\":\"read\",\"callId\":\"c{n}\",\"args\":{{\"path\":\"src/{n}.rs\"}}}}\n"
            );
            if n >= 100 {
                // Turn n - 100 left the window long ago: these change a spooled turn.
                let (old, ots) = (
                    n - 100,
                    format!("\"timestamp\":{ts},\"turnId\":\"turn-{}\"", n - 100),
                );
                log += &format!(
                    "{{\"type\":\"function.output\",{ots},\"tool\":\"read\",\"callId\":\"c{old}\",\"output\":\"\\n{big}\\nline {old}\",\"duration_ms\":{}}}\n",
                    n % 70
                );
                if n % 7 == 0 {
                    log += &format!(
                        "{{\"type\":\"function.call\",{ots},\"tool\":\"bash\",\"callId\":\"late{old}\",\"args\":{{\"cmd\":\"ls\"}}}}\n"
                    );
                    log += &format!(
                        "{{\"type\":\"function.denied\",{ots},\"tool\":\"rm\",\"args\":{{}},\"reason\":\"not here\",\"source\":\"mode\"}}\n"
                    );
                }
            }
            if n % 500 == 0 {
                log += "{not json\n";
            }
        }
        log += "{\"type\":\"turn.started\",\"timestamp\":1";
        assert!(log.len() as u64 > freecode_store::rollout::SPLIT_BYTES);
        std::fs::write(&path, &log).unwrap();

        for (columns, colour) in [(None, false), (Some(50), true)] {
            let p = Palette::new(colour);
            let whole = trace::replay(&home, &id).unwrap().unwrap();
            assert!(
                whole
                    .turns
                    .iter()
                    .any(|t| t.calls.len() == 2 && !t.denied.is_empty())
            );
            let mut lines = Vec::new();
            replay_head(&whole, p, &mut lines);
            for (n, t) in whole.turns.iter().enumerate() {
                turn_lines(n, t, p, &mut lines);
            }
            replay_foot(&whole, p, &mut lines);
            // The whole text fitted at once, as it was printed before it was streamed.
            let want = format!("{}\n", fit_to(&lines.join("\n"), columns)).into_bytes();

            let b = trace::fold_replay::<CompactJson>(&home, &id)
                .unwrap()
                .unwrap();
            let mut got = Vec::new();
            write_replay(&mut got, StreamedReplay::new(b), p, columns).unwrap();
            assert!(got.len() > 100_000);
            assert!(got == want, "streamed replay differs ({columns:?} columns)");
        }
    }
}
