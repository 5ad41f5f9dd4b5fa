//! `--html FILE` on `trace` and `session show`: one self-contained HTML file to attach to a bug
//! report, opened offline. The UI's own templates with the stylesheet and script inside the
//! file (no server, so nothing is fetched: no network, no external fonts or scripts); a trace
//! drawn one bar per turn keeps each turn's spans in a `<details>` under the chart. A session's
//! page is written as its messages are read, block by block ([`write_session_page`]). A trace's
//! page reads back from the replay only the turns it details, and builds only their rows.
//! Both are redacted as `session export` redacts ([`PageRedactor`]) unless told not to.

use std::collections::HashSet;
use std::path::Path;

use std::io::Write;

use freecode_core::rollout::replay::Replay;
use freecode_core::rollout::trace::Trace;
use freecode_core::{SessionId, SessionMeta};
use freecode_ops::output::{write_user_file, write_user_stream};
use freecode_ops::{Error, Home, Result};
use freecode_store::SessionStore;
use maud::{Markup, PreEscaped, html};

use super::pages::{self, Assets};
use super::redact::PageRedactor;
use super::waterfall;

/// Rows of the per-turn sections an offline trace keeps at most (the chart above has every turn).
const MAX_TURN_ROWS: usize = 20_000;

/// Which turns (0-based) an aggregated page details under its chart: in order, each whose
/// rows still fit in [`MAX_TURN_ROWS`] with those of the turns kept before it.
fn detailed_turns(sizes: &[usize]) -> Vec<bool> {
    let mut rows = 0usize;
    sizes
        .iter()
        .map(|&n| {
            let fits = rows + n <= MAX_TURN_ROWS;
            if fits {
                rows += n;
            }
            fits
        })
        .collect()
}

/// The turns whose tool outputs the page of `spans` shows: `None` for every turn (each span is
/// drawn), else the ids of the turns `keep` details under the chart (the bars show no output).
fn output_turns(spans: &waterfall::Spans<'_>, keep: &[bool]) -> Option<HashSet<String>> {
    spans.aggregated().then(|| {
        keep.iter()
            .enumerate()
            .filter(|(_, k)| **k)
            .filter_map(|(t, _)| spans.turn_id(t))
            .map(str::to_owned)
            .collect()
    })
}

/// The offline page of session `id`'s trace. Tool rows show their outputs from the same log's
/// replay, of which only the turns the page shows outputs for are read back ([`freecode_ops::trace::replay_of`]).
/// Its free text (tool arguments and outputs, errors) redacted by `redactor`.
pub fn trace_page(
    home: &Home,
    id: &SessionId,
    trace: &Trace,
    redactor: &PageRedactor,
) -> Result<Markup> {
    let mut redacted;
    let trace = if redactor.redacts() {
        redacted = trace.clone();
        redactor.trace(&mut redacted);
        &redacted
    } else {
        trace
    };
    let spans = waterfall::Spans::of(trace);
    let keep = detailed_turns(&spans.turn_sizes());
    let replay = freecode_ops::trace::replay_of(home, id, output_turns(&spans, &keep).as_ref())?
        .map(|r| redactor.replay(r))
        .transpose()?;
    Ok(page(spans, &keep, trace, replay.as_ref()))
}

/// Writes the offline page of session `id`'s `trace` ([`trace_page`]) to `path` (`-`: stdout)
/// as every file the user names is written ([`write_user_file`]).
pub fn trace_file(
    home: &Home,
    id: &SessionId,
    trace: &Trace,
    redactor: &PageRedactor,
    path: &Path,
) -> Result<()> {
    write_user_file(path, trace_page(home, id, trace, redactor)?.0.as_bytes())
}

/// The page of `spans` (those of `trace`) with the turns `keep` selects detailed under an
/// aggregated chart ([`detailed_turns`]); tool rows show their outputs from `replay`.
fn page(
    mut spans: waterfall::Spans<'_>,
    keep: &[bool],
    trace: &Trace,
    replay: Option<&Replay>,
) -> Markup {
    let aggregated = spans.aggregated();
    if let Some(r) = replay {
        spans = spans.with_outputs(r, |t| !aggregated || keep.get(t - 1) == Some(&true));
    }
    let w = waterfall::build_from(&spans, trace, waterfall::Select::All);
    let none = |_: (usize, usize)| None;
    let mut chart = waterfall::markup(&w, &none).into_string();
    if w.aggregated {
        let mut left_out = 0usize;
        for (i, turn_rows) in spans.by_turn_where(keep).into_iter().enumerate() {
            if !keep[i] {
                left_out += 1;
                continue;
            }
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
        false,
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
    redactor: &PageRedactor,
    out: &mut dyn Write,
) -> Result<usize> {
    let mut blocks = store.message_blocks(id)?;
    let mut next = blocks.next_block()?.map(|b| b.items);
    let meta = &redactor.meta(meta.clone(), next.as_deref().unwrap_or_default())?;
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
        _ => {
            return Err(Error::Internal(
                "the page template holds its stream mark more than once".into(),
            ));
        }
    };
    out.write_all(head.as_bytes())?;
    let mut count = 0usize;
    while let Some(items) = next.take() {
        count += items.len();
        let items = redactor.messages(items)?;
        out.write_all(pages::transcript_items(&items).0.as_bytes())?;
        next = blocks.next_block()?.map(|b| b.items);
    }
    let n = format!("{} messages", freecode_ops::human::thousands(count as u64));
    out.write_all(tail.replacen("{count}", &n, 1).as_bytes())?;
    out.flush()?;
    Ok(count)
}

/// Writes the offline page of session `id` to `path` as [`write_user_stream`] does.
pub fn session_file(
    store: &SessionStore,
    id: &SessionId,
    meta: &SessionMeta,
    redactor: &PageRedactor,
    path: &Path,
) -> Result<()> {
    write_user_stream(path, |out| {
        write_session_page(store, id, meta, redactor, out).map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use freecode_core::rollout::replay::ReplayBuilder;
    use freecode_core::rollout::trace::TraceBuilder;
    use freecode_ops::trace::replay_of;

    /// The page of a trace drawn one bar per turn, with more rows than the file details, is the
    /// same from the replay of only the detailed turns ([`trace_page`]: [`output_turns`],
    /// [`freecode_ops::trace::replay_of`]) as from the whole replay: the outputs it shows come
    /// from the turns kept.
    #[test]
    fn a_page_needs_only_the_detailed_turns_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let home = freecode_store::Home::new(dir.path());
        let id = SessionId::new("s").unwrap();
        let path = freecode_store::rollout::events_path(&home, &id);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut log = String::new();
        for n in 0..12_000i64 {
            let ts = 1_700_000_000_000 + n * 1000;
            let t = |dt: i64| format!("\"timestamp\":{},\"turnId\":\"turn-{n}\"", ts + dt);
            log += &format!("{{\"type\":\"turn.started\",{}}}\n", t(0));
            log += &format!(
                "{{\"type\":\"model.request\",{},\"provider\":\"p\",\"model\":\"m\",\"messageCount\":1,\"toolCount\":1,\"promptChars\":5}}\n",
                t(1)
            );
            log += &format!(
                "{{\"type\":\"model.response\",{},\"duration_ms\":5,\"toolCalls\":[\"read\"]}}\n",
                t(6)
            );
            log += &format!(
                "{{\"type\":\"function.call\",{},\"tool\":\"read\",\"callId\":\"c{n}\",\"args\":{{\"path\":\"{n}.rs\"}}}}\n",
                t(7)
            );
            log += &format!(
                "{{\"type\":\"function.output\",{},\"tool\":\"read\",\"callId\":\"c{n}\",\"output\":\"output of call {n} ü\",\"duration_ms\":3}}\n",
                t(10)
            );
        }
        std::fs::write(&path, log).unwrap();
        let (b, _) = freecode_store::rollout::fold_event_views(&path, TraceBuilder::new("s"))
            .unwrap()
            .unwrap();
        let trace = b.finish(None);
        let (whole, _) = freecode_store::rollout::fold_event_views(&path, ReplayBuilder::new("s"))
            .unwrap()
            .unwrap();
        let whole = whole.finish();

        let spans = waterfall::Spans::of(&trace);
        let keep = detailed_turns(&spans.turn_sizes());
        let turns = output_turns(&spans, &keep).expect("drawn one bar per turn");
        assert!(
            turns.len() < 12_000 && turns.contains("turn-0"),
            "{}",
            turns.len()
        );
        let some = replay_of(&home, &id, Some(&turns)).unwrap().unwrap();
        assert_eq!(some.turns.len(), turns.len());
        let whole_page = page(spans, &keep, &trace, Some(&whole)).into_string();
        assert!(
            whole_page.contains("output of call 1 ü")
                && whole_page.contains("left out of this file")
        );
        assert!(!whole_page.contains("output of call 11999 ü"));
        assert!(
            trace_page(&home, &id, &trace, &PageRedactor::none())
                .unwrap()
                .into_string()
                == whole_page
        );
        // Every turn's, when all are asked for.
        let all = replay_of(&home, &id, None).unwrap().unwrap();
        assert_eq!(all, whole);
    }
}
