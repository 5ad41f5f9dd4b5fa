//! `--html FILE` on `trace` and `session show`: one self-contained HTML file to attach to a bug
//! report, opened offline. The UI's own templates with the stylesheet and script inside the
//! file (no server, so nothing is fetched: no network, no external fonts or scripts); a trace
//! drawn one bar per turn keeps each turn's spans in a `<details>` under the chart. A session's
//! page is written as its messages are read, block by block ([`write_session_page`]).

use std::path::Path;

use freecode_core::SessionId;
use freecode_core::SessionMeta;
use freecode_core::rollout::replay::{Replay, ReplayBuilder};
use freecode_core::rollout::trace::Trace;
use freecode_store::SessionStore;
use maud::{Markup, PreEscaped, html};
use std::io::Write;

use super::pages::{self, Assets};
use super::waterfall;

/// Rows of the per-turn sections an offline trace keeps at most (the chart above has every turn).
const MAX_TURN_ROWS: usize = 20_000;

/// The offline page of a trace; tool rows show their outputs from `replay` (the same log's).
pub fn trace_page(trace: &Trace, replay: Option<&Replay>) -> Markup {
    let mut spans = waterfall::Spans::of(trace);
    if let Some(r) = replay {
        spans = spans.with_outputs(r, |_| true);
    }
    let w = waterfall::build_from(&spans, trace, waterfall::Select::All);
    let none = |_: (usize, usize)| None;
    let mut chart = waterfall::markup(&w, &none).into_string();
    if w.aggregated {
        let mut rows = 0usize;
        let mut left_out = 0usize;
        for (i, turn_rows) in spans.by_turn().into_iter().enumerate() {
            if rows + turn_rows.len() > MAX_TURN_ROWS {
                left_out += 1;
                continue;
            }
            rows += turn_rows.len();
            let n = turn_rows.len();
            let turn = waterfall::of_turn(turn_rows, trace, spans.turns);
            chart.push_str(
                &html! {
                    details.turn-spans {
                        summary { "turn " (i + 1) ": " (n) " spans" }
                        (waterfall::markup(&turn, &none))
                    }
                }
                .into_string(),
            );
        }
        if left_out > 0 {
            chart.push_str(
                &html! { p.note { (left_out) " turns' spans left out of this file; `freecode trace --json` has them all." } }
                    .into_string(),
            );
        }
    }
    pages::trace_markup(
        trace,
        &w,
        maud::PreEscaped(chart),
        waterfall::Select::All,
        Assets::Inline,
    )
}

/// Where the streamed transcript goes in the page around it; cannot come from a session (the
/// template escapes `<` in session text) nor from the inlined assets (checked).
const STREAM_MARK: &str = "<!--freecode:messages-->";

/// Writes the offline page of session `id` (its meta and every message) to `out` as the
/// messages are read: a block of the log at a time (`SessionStore::message_blocks`), each
/// block's messages rendered and written before the next is read, so the session is never
/// held whole, only a block's messages and their markup. Returns how many messages.
pub fn write_session_page(
    store: &SessionStore,
    id: &SessionId,
    meta: &SessionMeta,
    out: &mut dyn Write,
) -> anyhow::Result<usize> {
    let frame = pages::layout(
        &meta.title,
        Assets::Inline,
        html! {
            h1 { @if meta.title.is_empty() { "(no title)" } @else { (meta.title) } }
            p.count { "session " span.id { (meta.id) } " · " (meta.project_path) }
            ol.transcript start="1" { (PreEscaped(STREAM_MARK)) }
            p.count #message-count { "{count}" }
        },
    )
    .into_string();
    let (head, tail) = match frame.split_once(STREAM_MARK) {
        Some((h, t)) if !t.contains(STREAM_MARK) => (h, t),
        _ => anyhow::bail!("the page template holds its stream mark more than once"),
    };
    out.write_all(head.as_bytes())?;
    let mut blocks = store.message_blocks(id)?;
    let mut count = 0usize;
    while let Some(block) = blocks.next_block()? {
        count += block.items.len();
        out.write_all(pages::transcript_items(&block.items).0.as_bytes())?;
    }
    let n = format!("{} messages", crate::render::thousands(count as u64));
    out.write_all(tail.replacen("{count}", &n, 1).as_bytes())?;
    out.flush()?;
    Ok(count)
}

/// Writes the offline page of session `id` to `path` as [`write_user_stream`] does.
pub fn session_file(
    store: &SessionStore,
    id: &SessionId,
    meta: &SessionMeta,
    path: &Path,
) -> anyhow::Result<()> {
    write_user_stream(path, |out| {
        write_session_page(store, id, meta, out).map(|_| ())
    })
}

/// Writes an output the user named as `fsutil::write_user_file` does (`-` is standard output;
/// a FIFO, terminal or device is written into; a regular file is replaced atomically, 0600, and
/// left as it was when `write` fails), but as `write` produces it, never holding it whole.
pub fn write_user_stream(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use freecode_store::fsutil::{self, UserTarget};
    match fsutil::user_target(path)? {
        UserTarget::Stdout => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            write(&mut out)
        }
        UserTarget::Stream(p) => {
            // No O_CREAT, no O_TRUNC: a stream is written into as it is.
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(|e| anyhow::Error::new(e).context(format!("open {}", p.display())))?;
            let mut out = std::io::BufWriter::new(f);
            write(&mut out)
        }
        UserTarget::File { replace, .. } => fsutil::write_atomic_with(&replace, true, write),
    }
}

/// The replay of session `id`'s log (for the tool outputs of [`trace_page`]); `None` without
/// a log.
pub fn replay_of(home: &freecode_store::Home, id: &SessionId) -> anyhow::Result<Option<Replay>> {
    let path = freecode_store::rollout::events_path(home, id);
    let folded = freecode_store::rollout::fold_event_views(&path, ReplayBuilder::new(id.as_str()))?;
    Ok(folded.map(|(b, _)| b.finish()))
}

/// Writes `page` to `path` (`-`: stdout) as the CLI writes every file the user names.
pub fn write(path: &Path, page: &Markup) -> anyhow::Result<()> {
    freecode_store::fsutil::write_user_file(path, page.0.as_bytes())?;
    Ok(())
}
