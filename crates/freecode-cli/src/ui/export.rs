//! `--html FILE` on `trace` and `session show`: one self-contained HTML file to attach to a bug
//! report, opened offline. The UI's own templates with the stylesheet and script inside the
//! file (no server, so nothing is fetched: no network, no external fonts or scripts); a trace
//! drawn one bar per turn keeps each turn's spans in a `<details>` under the chart.

use std::path::Path;

use freecode_core::SessionId;
use freecode_core::rollout::replay::{Replay, ReplayBuilder};
use freecode_core::rollout::trace::Trace;
use freecode_core::{SessionMeta, StoredMessage};
use maud::{Markup, html};

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

/// The offline page of a session: its meta and every message.
pub fn session_page(meta: &SessionMeta, messages: &[StoredMessage]) -> Markup {
    pages::layout(
        &meta.title,
        Assets::Inline,
        html! {
            h1 { @if meta.title.is_empty() { "(no title)" } @else { (meta.title) } }
            p.count { "session " span.id { (meta.id) } " · " (meta.project_path) " · " (messages.len()) " messages" }
            (pages::transcript(messages, 0))
        },
    )
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
