//! The `freecode trace` waterfall (SPEC §13.3): a pure rendering of a [`Trace`] — header,
//! timeline rows, "where the time went" and one verdict line — plus the original's number
//! formatters ([`format_duration`], [`count`], [`clock`]).
//!
//! The layout, colours and wording are the original's byte for byte (the reference fixtures are
//! compared in the tests below). Deliberate differences, all from SPEC §19.36:
//!
//! - [`format_duration`] carries its rounding: `119600` ms is `2m00s` (not `1m60s`), `59999` ms
//!   is `1m00s` (not `60.0s`) and `999.6` ms is `1.0s` (not `1000ms`); [`count`] likewise gives
//!   `1.00M` where the original printed `1000.0k`.
//! - Colour is the caller's choice ([`Palette`]): the CLI turns it on only for a terminal without
//!   `NO_COLOR`.
//! - The clock column uses the time zone in [`RenderOptions`] (the system's, which honours `TZ`,
//!   in the CLI).

use freecode_core::rollout::trace::{
    DeniedSpan, HANG_THRESHOLD_MS, ModelSpan, SpanSink, SpanStatus, ToolSpan, Trace, TraceParts,
};
use freecode_store::rollout::spool::{Order, Records, Spool};
use jiff::tz::TimeZone;

use freecode_ops::human::clean_line;

/// What to show.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// Hide model spans shorter than this (ms); any value above 0 also hides tool and denial
    /// rows (`--slow`).
    pub slower_than_ms: i64,
    /// Show tool and denial rows (`--tools`, the default; `--no-tools` hides them).
    pub show_tools: bool,
    /// The zone of the clock column.
    pub time_zone: TimeZone,
}

impl Default for RenderOptions {
    /// Everything shown, clock in the system's time zone.
    fn default() -> Self {
        Self {
            slower_than_ms: 0,
            show_tools: true,
            time_zone: TimeZone::system(),
        }
    }
}

/// The ANSI styles the waterfall uses: the CLI's one [`Style`](crate::render::Style).
pub use crate::render::Style as Palette;

pub use freecode_ops::human::{count, format_duration};

/// A ms timestamp as `HH:MM:SS` in `tz` (what the clock column shows; rows write it through a
/// cache of the zone's offset, checked against this in the tests).
#[cfg_attr(not(test), allow(dead_code))]
pub fn clock(ms: i64, tz: &TimeZone) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts.to_zoned(tz.clone()).strftime("%H:%M:%S").to_string(),
        Err(_) => ms.to_string(),
    }
}

/// A ms timestamp as `YYYY-MM-DD HH:MM` in `tz`.
fn date_time(ms: i64, tz: &TimeZone) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

fn dur(ms: i64) -> String {
    let mut s = String::new();
    dur_into(&mut s, ms);
    s
}

/// `x / 1000` to one decimal as `toFixed(1)` gives it, in tenths, for a whole `x` below 2^40:
/// the digit after the kept one decides, except at an exact `…50`, where the double nearest to
/// `x / 1000` is compared with the exact quotient (halves go up).
fn tenths_of_thousandth(x: u64) -> u64 {
    let (q, r) = (x / 100, x % 100);
    if r != 50 {
        return q + u64::from(r > 50);
    }
    let d = x as f64 / 1000.0;
    let bits = d.to_bits();
    let exp = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0) - 1075;
    let mant = u128::from((bits & ((1u64 << 52) - 1)) | (1u64 << 52));
    // d >= x / 1000  <=>  mant * 1000 * 2^exp >= x.
    let up = if exp >= 0 {
        true
    } else {
        let shift = u32::try_from(-exp).unwrap_or(127).min(127);
        mant * 1000 >= u128::from(x) << shift
    };
    q + u64::from(up)
}

/// Appends `n` in decimal without `format!`.
fn push_int(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    let mut v = n.unsigned_abs();
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        out.push(char::from(d));
    }
}

/// [`format_duration`] of a whole `ms`, appended; the common units without formatting
/// machinery, the rest through [`format_duration`].
fn dur_into(out: &mut String, ms: i64) {
    if ms < 1000 && ms > -(1 << 53) {
        push_int(out, ms);
        out.push_str("ms");
        return;
    }
    if ms < 60_000 {
        let t = tenths_of_thousandth(ms.unsigned_abs());
        if t < 600 {
            push_int(out, (t / 10) as i64);
            out.push('.');
            out.push(char::from(b'0' + (t % 10) as u8));
            out.push('s');
            return;
        }
    } else if ms < 3_600_000 {
        let (mut m, rem) = (ms / 60_000, ms % 60_000);
        let mut s = (rem + 500) / 1000;
        if s >= 60 {
            m += 1;
            s -= 60;
        }
        if m < 60 {
            push_int(out, m);
            out.push('m');
            out.push(char::from(b'0' + (s / 10) as u8));
            out.push(char::from(b'0' + (s % 10) as u8));
            out.push('s');
            return;
        }
    }
    out.push_str(&format_duration(ms as f64));
}

/// [`count`], appended; below a million without formatting machinery.
fn count_into(out: &mut String, n: u64) {
    if n < 1000 {
        push_int(out, n as i64);
        return;
    }
    if n < 1_000_000 {
        let t = tenths_of_thousandth(n);
        if t < 10_000 {
            push_int(out, (t / 10) as i64);
            out.push('.');
            out.push(char::from(b'0' + (t % 10) as u8));
            out.push('k');
            return;
        }
    }
    out.push_str(&count(n));
}

/// Appends `text` in the ANSI style `code` when colour is on.
fn paint(out: &mut String, p: Palette, code: &str, text: &str) {
    if p.enabled() {
        out.push_str("\x1b[");
        out.push_str(code);
        out.push('m');
        out.push_str(text);
        out.push_str("\x1b[0m");
    } else {
        out.push_str(text);
    }
}

const DIM: &str = "2";
const RED: &str = "31";
const YELLOW: &str = "33";
const CYAN: &str = "36";

/// Appends `s` right-aligned in 7 columns (by chars, as `format!("{:>7}")` pads).
fn push_right7(out: &mut String, s: &str) {
    for _ in s.chars().count()..7 {
        out.push(' ');
    }
    out.push_str(s);
}

/// The clock column: `HH:MM:SS` in a zone, the zone's offset looked up once per second.
struct Clock {
    tz: TimeZone,
    last: Option<(i64, String)>,
}

impl Clock {
    fn new(tz: &TimeZone) -> Self {
        Self {
            tz: tz.clone(),
            last: None,
        }
    }

    fn push(&mut self, out: &mut String, ms: i64) {
        let sec = ms.div_euclid(1000);
        if let Some((s, text)) = &self.last
            && *s == sec
        {
            out.push_str(text);
            return;
        }
        let text = match jiff::Timestamp::from_millisecond(ms) {
            Ok(ts) => {
                let local = sec + i64::from(self.tz.to_offset(ts).seconds());
                let sod = local.rem_euclid(86_400);
                let mut t = String::with_capacity(8);
                for (i, v) in [sod / 3600, sod / 60 % 60, sod % 60]
                    .into_iter()
                    .enumerate()
                {
                    if i > 0 {
                        t.push(':');
                    }
                    t.push(char::from(b'0' + (v / 10) as u8));
                    t.push(char::from(b'0' + (v % 10) as u8));
                }
                t
            }
            Err(_) => ms.to_string(),
        };
        out.push_str(&text);
        self.last = Some((sec, text));
    }
}

/// 18 spaces: the indent of a span's detail lines.
const INDENT: &str = "                  ";

/// What rows are rendered with.
struct RowStyle {
    opts: RenderOptions,
    p: Palette,
    hang: String,
    clock: Clock,
}

impl RowStyle {
    fn new(opts: &RenderOptions, p: Palette) -> Self {
        Self {
            opts: opts.clone(),
            p,
            hang: dur(HANG_THRESHOLD_MS),
            clock: Clock::new(&opts.time_zone),
        }
    }

    /// Whether a model span of `duration_ms` is shown.
    fn shows_model(&self, duration_ms: i64) -> bool {
        duration_ms >= self.opts.slower_than_ms
    }

    /// Whether tool and denial rows are shown.
    fn shows_tools(&self) -> bool {
        self.opts.show_tools && self.opts.slower_than_ms <= 0
    }

    /// A model span's row (its lines joined by `\n`), appended.
    fn model_row(&mut self, out: &mut String, s: &ModelSpan, abandoned: bool) {
        let p = self.p;
        // A request that never closed has no duration to show: it is open since its start.
        let never_closed = abandoned && s.status == SpanStatus::Hung;
        let mut d = String::new();
        if never_closed {
            push_right7(&mut d, "—");
        } else {
            let mut t = String::new();
            dur_into(&mut t, s.duration_ms);
            push_right7(&mut d, &t);
        }
        let code = match s.status {
            SpanStatus::Hung => RED,
            SpanStatus::Error => YELLOW,
            SpanStatus::InFlight => CYAN,
            SpanStatus::Ok if s.duration_ms >= 30_000 => YELLOW,
            SpanStatus::Ok => DIM,
        };
        let mut c = String::new();
        self.clock.push(&mut c, s.started_at);
        paint(out, p, DIM, &c);
        out.push(' ');
        paint(out, p, code, &d);
        out.push(' ');
        paint(out, p, CYAN, "model");
        out.push(' ');
        out.push_str(&clean_line(&s.turn_id));
        let mut facts = String::new();
        facts.push_str("msgs=");
        push_int(&mut facts, s.message_count as i64);
        facts.push_str("  prompt=");
        count_into(&mut facts, s.prompt_chars);
        facts.push('c');
        if let Some(t) = s.ttft_ms {
            facts.push_str("  ttft=");
            dur_into(&mut facts, t);
        }
        if let Some(n) = s.input_tokens {
            facts.push_str("  in=");
            count_into(&mut facts, n);
        }
        if let Some(n) = s.output_tokens {
            facts.push_str("  out=");
            count_into(&mut facts, n);
        }
        if let Some(n) = s.cache_read_tokens.filter(|&n| n != 0) {
            facts.push_str("  cached=");
            count_into(&mut facts, n);
        }
        out.push('\n');
        out.push_str(INDENT);
        paint(out, p, DIM, &facts);
        if !s.tool_calls.is_empty() {
            out.push('\n');
            out.push_str(INDENT);
            paint(
                out,
                p,
                DIM,
                &format!("→ {}", clean_line(&s.tool_calls.join(", "))),
            );
        }
        match s.status {
            SpanStatus::InFlight => {
                let what = if s.ttft_ms.is_none() {
                    "— awaiting first token"
                } else {
                    "— streaming"
                };
                out.push('\n');
                out.push_str(INDENT);
                paint(out, p, CYAN, "in flight");
                out.push(' ');
                paint(out, p, DIM, what);
            }
            SpanStatus::Hung if never_closed => {
                out.push('\n');
                out.push_str(INDENT);
                paint(out, p, RED, "NEVER CLOSED");
                out.push(' ');
                paint(
                    out,
                    p,
                    DIM,
                    &format!(
                        "— open since {} with no response and no error; nothing was recorded \
                         after it.",
                        date_time(s.started_at, &self.opts.time_zone)
                    ),
                );
                if s.ttft_ms.is_none() {
                    out.push('\n');
                    out.push_str(INDENT);
                    paint(out, p, DIM, "Never produced a first token.");
                }
            }
            SpanStatus::Hung => {
                out.push('\n');
                out.push_str(INDENT);
                paint(out, p, RED, "HUNG");
                out.push(' ');
                paint(
                    out,
                    p,
                    DIM,
                    &format!(
                        "— open for over {} with no response and no error.",
                        self.hang
                    ),
                );
                if s.ttft_ms.is_none() {
                    out.push('\n');
                    out.push_str(INDENT);
                    paint(
                        out,
                        p,
                        DIM,
                        "Never produced a first token: the provider accepted the \
                         connection and went silent.",
                    );
                }
            }
            SpanStatus::Error => {
                out.push('\n');
                out.push_str(INDENT);
                paint(
                    out,
                    p,
                    YELLOW,
                    &clean_line(s.error_kind.as_deref().unwrap_or("error")),
                );
                out.push_str(": ");
                out.push_str(&clean_line(s.error.as_deref().unwrap_or("")));
            }
            SpanStatus::Ok => {}
        }
    }

    /// A tool span's row, appended.
    fn tool_row(&mut self, out: &mut String, t: &ToolSpan) {
        let p = self.p;
        let mut c = String::new();
        self.clock.push(&mut c, t.started_at);
        paint(out, p, DIM, &c);
        out.push(' ');
        let (mut d, mut n) = (String::new(), String::new());
        dur_into(&mut n, t.duration_ms);
        push_right7(&mut d, &n);
        paint(out, p, DIM, &d);
        out.push(' ');
        paint(out, p, DIM, "tool ");
        out.push(' ');
        out.push_str(&clean_line(&t.tool));
    }

    /// A denied span's row, appended.
    fn denied_row(&mut self, out: &mut String, d: &DeniedSpan) {
        let p = self.p;
        let mut c = String::new();
        self.clock.push(&mut c, d.at);
        paint(out, p, DIM, &c);
        out.push(' ');
        let mut dash = String::new();
        push_right7(&mut dash, "—");
        paint(out, p, DIM, &dash);
        out.push(' ');
        paint(out, p, DIM, "deny ");
        out.push(' ');
        out.push_str(&clean_line(&d.tool));
        out.push(' ');
        paint(
            out,
            p,
            DIM,
            &format!("({}) {}", d.source, clean_line(&d.reason)),
        );
    }
}

/// What the waterfall says around its rows: all from the fold's sums and the open spans.
struct Summary<'a> {
    trace: &'a Trace,
    first_model: Option<(&'a str, &'a str)>,
    model_spans: u64,
    tool_spans: u64,
    denied_spans: u64,
    hung: u64,
    failed: u64,
    /// The earliest start of a hung span.
    hung_since: Option<i64>,
}

impl Summary<'_> {
    fn header(&self, p: Palette) -> String {
        let trace = self.trace;
        let id8: String = trace.session_id.chars().take(8).collect();
        let mut header = p.bold(&format!("session {id8}"));
        if let Some((provider, model)) = self.first_model {
            header.push_str(&p.dim(&format!("  {}/{}", clean_line(provider), clean_line(model))));
        }
        header.push_str(&p.dim(&format!("  {} wall", dur(trace.wall_ms))));
        header
    }

    fn footer(&self, opts: &RenderOptions, p: Palette) -> Vec<String> {
        let trace = self.trace;
        let hang = dur(HANG_THRESHOLD_MS);
        let mut lines = Vec::new();
        let mut tool_calls = crate::render::plural(self.tool_spans, "call", "calls");
        if self.denied_spans > 0 {
            tool_calls.push_str(&format!(", {} denied", self.denied_spans));
        }
        lines.push(String::new());
        lines.push(p.bold("where the time went"));
        // The wall time cut into parts that add up to it (overlapping calls count once).
        let time = trace.time;
        let shares = time.percents();
        let share = |label: &str, ms: i64, share: u64, note: &str| {
            format!(
                "  {label:<5}   {:>8}  {}  {}",
                dur(ms),
                p.dim(&format!("{share:>3}%")),
                p.dim(note)
            )
        };
        lines.push(share(
            "model",
            time.model_ms,
            shares[0],
            &crate::render::plural(self.model_spans, "call", "calls"),
        ));
        lines.push(share("tools", time.tools_ms, shares[1], &tool_calls));
        lines.push(share("idle", time.idle_ms, shares[2], "between turns"));
        lines.push(share(
            "other",
            time.other_ms,
            shares[3],
            "the agent's own work, approvals",
        ));
        lines.push(p.dim(&format!(
            "  tokens  in={} out={} cached={}",
            count(trace.input_tokens),
            count(trace.output_tokens),
            count(trace.cache_read_tokens)
        )));
        if trace.redirects > 0 || trace.redirects_skipped > 0 {
            lines.push(p.dim(&format!(
                "  redirect  fired={} skipped={}",
                trace.redirects, trace.redirects_skipped
            )));
        }

        lines.push(String::new());
        let (hung, failed) = (self.hung, self.failed);
        lines.push(if self.model_spans == 0 {
            format!(
                "{}{}",
                p.yellow("no model calls recorded"),
                p.dim(" — this log predates model tracing, so the gaps above are unattributed.")
            )
        } else if hung > 0 && trace.abandoned {
            let since = self.hung_since.unwrap_or(trace.ended_at);
            format!(
                "{}{}",
                p.red(&format!(
                    "{} never closed (open since {})",
                    crate::render::plural(hung, "request", "requests"),
                    date_time(since, &opts.time_zone)
                )),
                p.dim(" — the process that made it stopped before a response or an error.")
            )
        } else if hung > 0 {
            format!(
                "{}{}",
                p.red(&format!(
                    "{} open for over {hang}",
                    crate::render::plural(hung, "request", "requests")
                )),
                p.dim(" — hung on the provider, not on a tool.")
            )
        } else if failed > 0 {
            p.yellow(&format!(
                "{} failed",
                crate::render::plural(failed, "model call", "model calls")
            ))
        } else if trace.in_flight {
            format!(
                "{}{}",
                p.cyan("a request is in flight"),
                p.dim(" — not a fault; still within budget.")
            )
        } else {
            p.green("no hangs, no model errors")
        });
        lines
    }
}

/// Writes the waterfall's lines (each through `line`): the header, the rows in start order
/// (`rows` yields them sorted, each possibly several lines), a date line where each day starts
/// when the rows span days (`first`/`last`: the first and last row's start), the footer.
fn assemble(
    summary: &Summary<'_>,
    opts: &RenderOptions,
    p: Palette,
    span: Option<(i64, i64)>,
    mut rows: impl FnMut(&mut dyn FnMut(i64, &str) -> std::io::Result<()>) -> std::io::Result<()>,
    line: &mut dyn FnMut(&str) -> std::io::Result<()>,
) -> std::io::Result<()> {
    line(&summary.header(p))?;
    line("")?;
    // A trace that spans days gets a date line where each day starts (the clock column alone
    // would read as one day).
    let day_of = |ms: i64| -> (i64, Option<jiff::Timestamp>) {
        match jiff::Timestamp::from_millisecond(ms) {
            Ok(ts) => {
                let local = ms.div_euclid(1000) + i64::from(opts.time_zone.to_offset(ts).seconds());
                (local.div_euclid(86_400), Some(ts))
            }
            Err(_) => (i64::MIN, None),
        }
    };
    let day_text = |ts: Option<jiff::Timestamp>| match ts {
        Some(ts) => ts.to_zoned(opts.time_zone.clone()).date().to_string(),
        None => String::new(),
    };
    let multi_day = span.is_some_and(|(a, b)| day_of(a).0 != day_of(b).0);
    let mut cached: Option<(i64, String)> = None;
    let mut current_day = String::new();
    rows(&mut |at, row| {
        if multi_day {
            let (d, ts) = day_of(at);
            let text = match &cached {
                Some((cd, t)) if *cd == d => t.clone(),
                _ => {
                    let t = day_text(ts);
                    cached = Some((d, t.clone()));
                    t
                }
            };
            if text != current_day {
                line(&p.dim(&format!("── {text}")))?;
                current_day = text;
            }
        }
        for l in row.split('\n') {
            line(l)?;
        }
        Ok(())
    })?;
    for l in summary.footer(opts, p) {
        line(&l)?;
    }
    Ok(())
}

/// Renders `trace` as the waterfall, lines joined by `\n` with no trailing newline (the
/// original's `renderTrace`).
pub fn render_trace(trace: &Trace, opts: &RenderOptions, p: Palette) -> String {
    let mut style = RowStyle::new(opts, p);
    // Rows sorted by start time; the sort is stable, so ties keep models before tools before
    // denials, each in fold order — as the original's `Array.prototype.sort` does.
    let mut rows: Vec<(i64, String)> = Vec::new();
    for s in &trace.model_spans {
        if style.shows_model(s.duration_ms) {
            let mut row = String::new();
            style.model_row(&mut row, s, trace.abandoned);
            rows.push((s.started_at, row));
        }
    }
    if style.shows_tools() {
        for t in &trace.tool_spans {
            let mut row = String::new();
            style.tool_row(&mut row, t);
            rows.push((t.started_at, row));
        }
        for d in &trace.denied_spans {
            let mut row = String::new();
            style.denied_row(&mut row, d);
            rows.push((d.at, row));
        }
    }
    rows.sort_by_key(|r| r.0);
    let hung: Vec<&ModelSpan> = trace
        .model_spans
        .iter()
        .filter(|s| s.status == SpanStatus::Hung)
        .collect();
    let summary = Summary {
        trace,
        first_model: trace
            .model_spans
            .first()
            .map(|s| (s.provider.as_str(), s.model.as_str())),
        model_spans: trace.model_spans.len() as u64,
        tool_spans: trace.tool_spans.len() as u64,
        denied_spans: trace.denied_spans.len() as u64,
        hung: hung.len() as u64,
        failed: trace
            .model_spans
            .iter()
            .filter(|s| s.status == SpanStatus::Error)
            .count() as u64,
        hung_since: hung.iter().map(|s| s.started_at).min(),
    };
    let span = rows.first().zip(rows.last()).map(|(a, b)| (a.0, b.0));
    let mut lines: Vec<String> = Vec::new();
    let _ = assemble(
        &summary,
        opts,
        p,
        span,
        |emit| {
            for (at, row) in &rows {
                emit(*at, row)?;
            }
            Ok(())
        },
        &mut |l| {
            lines.push(l.to_owned());
            Ok(())
        },
    );
    lines.join("\n")
}

/// A [`SpanSink`] that renders each span's row as it closes into a spool (keyed by start
/// time), for [`write_streamed`]: the waterfall of a log of any length in flat memory.
pub struct RowSpans {
    style: RowStyle,
    model: Spool,
    tool: Spool,
    denied: Spool,
    rows: u64,
    row: String,
}

impl RowSpans {
    /// An empty sink rendering with `opts` and `p`.
    pub fn new(opts: &RenderOptions, p: Palette) -> Self {
        Self {
            style: RowStyle::new(opts, p),
            model: Spool::new(),
            tool: Spool::new(),
            denied: Spool::new(),
            rows: 0,
            row: String::new(),
        }
    }
}

impl std::fmt::Debug for RowSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowSpans").finish_non_exhaustive()
    }
}

impl SpanSink for RowSpans {
    type Pos = (u64, u64, u64);

    fn model(&mut self, index: u64, span: ModelSpan) {
        if !self.style.shows_model(span.duration_ms) {
            return;
        }
        let mut row = std::mem::take(&mut self.row);
        row.clear();
        // A closed span is `ok` or `error`: its row does not depend on how the trace ends.
        self.style.model_row(&mut row, &span, false);
        self.model.push(span.started_at, index, row.as_bytes());
        self.row = row;
    }

    fn tool(&mut self, span: ToolSpan) {
        if !self.style.shows_tools() {
            return;
        }
        let mut row = std::mem::take(&mut self.row);
        row.clear();
        self.style.tool_row(&mut row, &span);
        self.tool.push(span.started_at, self.rows, row.as_bytes());
        self.rows += 1;
        self.row = row;
    }

    fn denied(&mut self, span: DeniedSpan) {
        if !self.style.shows_tools() {
            return;
        }
        let mut row = std::mem::take(&mut self.row);
        row.clear();
        self.style.denied_row(&mut row, &span);
        self.denied.push(span.at, self.rows, row.as_bytes());
        self.rows += 1;
        self.row = row;
    }

    fn pos(&self) -> Self::Pos {
        (self.model.pos(), self.tool.pos(), self.denied.pos())
    }

    fn tail(&self) -> Self {
        Self::new(&self.style.opts, self.style.p)
    }

    fn splice(&mut self, tail: Self, from: Self::Pos, first: u64, base: u64) {
        self.model
            .splice(tail.model, from.0, base.wrapping_sub(first));
        self.tool.splice(tail.tool, from.1, 0);
        self.denied.splice(tail.denied, from.2, 0);
    }
}

/// The rows of one stream (model, tool or denied) read back in start order: from a spool in
/// that order (the model spool merged by index with the open spans' rows), or held sorted.
struct Stream<'a> {
    records: Option<Records<'a>>,
    /// Whether `records` holds a record not yet taken.
    loaded: Option<bool>,
    open: std::iter::Peekable<std::vec::IntoIter<(u64, i64, String)>>,
    held: std::vec::IntoIter<(i64, String)>,
    head: Option<(i64, String)>,
}

impl<'a> Stream<'a> {
    fn spooled(records: Records<'a>, open: Vec<(u64, i64, String)>) -> Self {
        Self {
            records: Some(records),
            loaded: None,
            open: open.into_iter().peekable(),
            held: Vec::new().into_iter(),
            head: None,
        }
    }

    fn held(rows: Vec<(i64, String)>) -> Self {
        Self {
            records: None,
            loaded: None,
            open: Vec::new().into_iter().peekable(),
            held: rows.into_iter(),
            head: None,
        }
    }

    fn advance(&mut self) -> std::io::Result<()> {
        let Some(r) = &mut self.records else {
            self.head = self.held.next();
            return Ok(());
        };
        let has = match self.loaded {
            Some(has) => has,
            None => r.advance()?,
        };
        self.loaded = Some(has);
        let open_first = match self.open.peek() {
            Some((i, _, _)) => !has || *i < r.index,
            None => false,
        };
        self.head = if open_first {
            self.open.next().map(|(_, k, row)| (k, row))
        } else if has {
            self.loaded = None;
            Some((r.key, String::from_utf8_lossy(&r.bytes).into_owned()))
        } else {
            None
        };
        Ok(())
    }
}

/// Writes the waterfall of a fold with [`RowSpans`] to `out` (a newline after each line, each
/// line fitted to `columns` when given, as [`fit_to_terminal`](crate::render::fit_to_terminal)
/// does): the bytes of [`render_trace`] on the trace the fold would build,
/// plus a newline.
pub fn write_streamed(
    out: &mut impl std::io::Write,
    parts: &TraceParts,
    sink: &RowSpans,
    columns: Option<usize>,
) -> std::io::Result<()> {
    let mut style = RowStyle::new(&sink.style.opts, sink.style.p);
    let trace = &parts.trace;
    // Open spans, rendered as the trace ends.
    let mut open: Vec<(u64, i64, String)> = Vec::new();
    for (i, s) in &parts.open {
        if style.shows_model(s.duration_ms) {
            let mut row = String::new();
            style.model_row(&mut row, s, trace.abandoned);
            open.push((*i, s.started_at, row));
        }
    }
    // Model rows: closed ones by index with the open ones merged in at theirs; streamed when
    // that order is start order, else held and sorted (requests that overlap).
    let streamable = sink.model.in_order(Order::Index)
        && sink.model.in_order(Order::Key)
        && (open.is_empty() || {
            // Each open row must sit between its closed neighbours' starts.
            let mut r = sink.model.records(Order::Index)?;
            let (mut ok, mut prev) = (true, i64::MIN);
            let mut o = open.iter().peekable();
            while r.advance()? {
                while let Some((_, k, _)) = o.next_if(|(i, _, _)| *i < r.index) {
                    ok &= *k >= prev;
                    prev = *k;
                }
                ok &= r.key >= prev;
                prev = r.key;
            }
            for (_, k, _) in o {
                ok &= *k >= prev;
                prev = *k;
            }
            ok
        });
    let (model, last_key) = if streamable {
        let last = sink.model.last_key();
        let last = match open.last() {
            Some((_, k, _)) => Some(last.map_or(*k, |l: i64| l.max(*k))),
            None => last,
        };
        (
            Stream::spooled(sink.model.records(Order::Index)?, open),
            last,
        )
    } else {
        let mut r = sink.model.records(Order::Index)?;
        let mut all: Vec<(u64, i64, String)> = Vec::new();
        while r.advance()? {
            all.push((
                r.index,
                r.key,
                String::from_utf8_lossy(&r.bytes).into_owned(),
            ));
        }
        all.extend(open);
        all.sort_by_key(|(i, _, _)| *i);
        let mut rows: Vec<(i64, String)> = all.into_iter().map(|(_, k, s)| (k, s)).collect();
        rows.sort_by_key(|(k, _)| *k);
        let last = rows.last().map(|r| r.0);
        (Stream::held(rows), last)
    };
    let mut streams = [
        model,
        Stream::spooled(sink.tool.records(Order::Key)?, Vec::new()),
        Stream::spooled(sink.denied.records(Order::Key)?, Vec::new()),
    ];
    for s in &mut streams {
        s.advance()?;
    }
    // The first and last row's start: the least head, and the greatest last start (a spool
    // read in key order ends with its greatest).
    let first = streams
        .iter()
        .filter_map(|s| s.head.as_ref().map(|h| h.0))
        .min();
    let last = [last_key, sink.tool.max_key()?, sink.denied.max_key()?]
        .into_iter()
        .flatten()
        .max();
    let span = first.zip(last);
    let hung: Vec<&ModelSpan> = parts
        .open
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.status == SpanStatus::Hung)
        .collect();
    let summary = Summary {
        trace,
        first_model: parts
            .first_model
            .as_ref()
            .map(|(a, b)| (a.as_str(), b.as_str())),
        model_spans: parts.model_spans,
        tool_spans: parts.tool_spans,
        denied_spans: parts.denied_spans,
        hung: hung.len() as u64,
        failed: parts.failed,
        hung_since: hung.iter().map(|s| s.started_at).min(),
    };
    let opts = sink.style.opts.clone();
    assemble(
        &summary,
        &opts,
        sink.style.p,
        span,
        |emit| {
            loop {
                // The least start; ties: models, then tools, then denials (a stable sort).
                let mut best: Option<(usize, i64)> = None;
                for (n, s) in streams.iter().enumerate() {
                    if let Some((k, _)) = &s.head
                        && best.is_none_or(|(_, bk)| *k < bk)
                    {
                        best = Some((n, *k));
                    }
                }
                let Some((b, _)) = best else { return Ok(()) };
                if let Some((k, row)) = streams[b].head.take() {
                    emit(k, &row)?;
                }
                streams[b].advance()?;
            }
        },
        &mut |l| {
            match columns {
                Some(c) => out.write_all(crate::render::fit_line(l, c).as_bytes())?,
                None => out.write_all(l.as_bytes())?,
            }
            out.write_all(b"\n")
        },
    )
}

#[cfg(test)]
mod tests;
