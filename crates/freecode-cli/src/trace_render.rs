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

use freecode_core::rollout::trace::{HANG_THRESHOLD_MS, SpanStatus, Trace};
use jiff::tz::TimeZone;

use crate::sanitize::clean_line;

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

/// JavaScript's `Math.round` (halves round up, towards +∞).
fn js_round(x: f64) -> f64 {
    let f = x.floor();
    if x - f >= 0.5 { f + 1.0 } else { f }
}

/// JavaScript's `Number.prototype.toFixed(digits)`: the decimal nearest to the exact value of
/// `x`, halves rounded away from zero. (Rust's `{:.1}` rounds exact halves to even: `1.25` →
/// `1.2`, where the original prints `1.3`.)
fn to_fixed(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    // The exact decimal expansion of `x`: its lowest set bit can weigh 2^(biased exponent −
    // 1075), which takes that many fractional digits (at most 1074, for subnormals).
    let biased_exp = i64::try_from((x.abs().to_bits() >> 52) & 0x7ff).unwrap_or(0);
    let exact_digits = usize::try_from(1075 - biased_exp).unwrap_or(0);
    let exact = format!("{:.*}", exact_digits.max(digits + 1), x.abs());
    let (int_part, frac) = exact.split_once('.').unwrap_or((&exact, ""));
    let mut digits_kept: Vec<u8> = int_part.bytes().chain(frac.bytes().take(digits)).collect();
    if frac.as_bytes().get(digits).is_some_and(|&d| d >= b'5') {
        let mut i = digits_kept.len();
        loop {
            if i == 0 {
                digits_kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits_kept[i] == b'9' {
                digits_kept[i] = b'0';
            } else {
                digits_kept[i] += 1;
                break;
            }
        }
    }
    let split = digits_kept.len() - digits;
    let mut out = String::with_capacity(digits_kept.len() + 2);
    if x < 0.0 && digits_kept.iter().any(|&d| d != b'0') {
        out.push('-');
    }
    out.push_str(&String::from_utf8_lossy(&digits_kept[..split]));
    if digits > 0 {
        out.push('.');
        out.push_str(&String::from_utf8_lossy(&digits_kept[split..]));
    }
    out
}

/// A duration for humans: `820ms`, `4.2s`, `12m04s` (SPEC §13.3), with the rounding carried
/// into the next unit (SPEC §19.36): never `1000ms`, `60.0s` or `1m60s`; past an hour `2h 05m`,
/// past a day `3d 4h` (the original printed `460675m39s`).
pub fn format_duration(ms: f64) -> String {
    let whole_ms = js_round(ms);
    if whole_ms < 1000.0 {
        return format!("{}ms", whole_ms as i64);
    }
    if ms < 60_000.0 {
        let secs = to_fixed(ms / 1000.0, 1);
        // "60.0" would be a minute: fall through to the minutes form.
        if secs.parse::<f64>().is_ok_and(|s| s < 60.0) {
            return format!("{secs}s");
        }
    }
    let mut minutes = (ms / 60_000.0).floor();
    let mut seconds = js_round((ms % 60_000.0) / 1000.0);
    if seconds >= 60.0 {
        minutes += 1.0;
        seconds -= 60.0;
    }
    if minutes < 60.0 {
        return format!("{}m{:02}s", minutes as i64, seconds as i64);
    }
    // Past an hour, hours and minutes; past a day, days and hours (never `460675m39s`).
    let total_minutes = js_round(ms / 60_000.0) as i64;
    if total_minutes < 24 * 60 {
        return format!("{}h {:02}m", total_minutes / 60, total_minutes % 60);
    }
    let total_hours = js_round(ms / 3_600_000.0) as i64;
    format!("{}d {}h", total_hours / 24, total_hours % 24)
}

/// A count for humans: `48`, `1.5k`, `1.25M` (SPEC §13.3); `999950` is `1.00M`, not `1000.0k`.
pub fn count(n: u64) -> String {
    if n < 1000 {
        return n.to_string();
    }
    if n < 1_000_000 {
        let k = to_fixed(n as f64 / 1000.0, 1);
        if k != "1000.0" {
            return format!("{k}k");
        }
    }
    format!("{}M", to_fixed(n as f64 / 1_000_000.0, 2))
}

/// A ms timestamp as `HH:MM:SS` in `tz`.
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

/// `part` as a share of `whole`: ` 68%`, `100%`, `  0%` when `whole` is not positive.
fn pct(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "  0%".to_owned();
    }
    let p = js_round(part as f64 / whole as f64 * 100.0);
    format!("{p:>3}%")
}

fn dur(ms: i64) -> String {
    format_duration(ms as f64)
}

/// 18 spaces: the indent of a span's detail lines.
const INDENT: &str = "                  ";

/// Renders `trace` as the waterfall, lines joined by `\n` with no trailing newline (the
/// original's `renderTrace`).
pub fn render_trace(trace: &Trace, opts: &RenderOptions, p: Palette) -> String {
    let hang = dur(HANG_THRESHOLD_MS);
    let mut lines: Vec<String> = Vec::new();

    let id8: String = trace.session_id.chars().take(8).collect();
    let mut header = p.bold(&format!("session {id8}"));
    if let Some(first) = trace.model_spans.first() {
        header.push_str(&p.dim(&format!(
            "  {}/{}",
            clean_line(&first.provider),
            clean_line(&first.model)
        )));
    }
    header.push_str(&p.dim(&format!("  {} wall", dur(trace.wall_ms))));
    lines.push(header);
    lines.push(String::new());

    // Rows sorted by start time; the sort is stable, so ties keep models before tools before
    // denials, each in fold order — as the original's `Array.prototype.sort` does.
    let mut rows: Vec<(i64, Vec<String>)> = Vec::new();
    for s in &trace.model_spans {
        if s.duration_ms < opts.slower_than_ms {
            continue;
        }
        // A request that never closed has no duration to show: it is open since its start.
        let never_closed = trace.abandoned && s.status == SpanStatus::Hung;
        let d = if never_closed {
            format!("{:>7}", "—")
        } else {
            format!("{:>7}", dur(s.duration_ms))
        };
        let d = match s.status {
            SpanStatus::Hung => p.red(&d),
            SpanStatus::Error => p.yellow(&d),
            SpanStatus::InFlight => p.cyan(&d),
            SpanStatus::Ok if s.duration_ms >= 30_000 => p.yellow(&d),
            SpanStatus::Ok => p.dim(&d),
        };
        let mut row = vec![format!(
            "{} {d} {} {}",
            p.dim(&clock(s.started_at, &opts.time_zone)),
            p.cyan("model"),
            clean_line(&s.turn_id)
        )];
        let mut facts = vec![
            format!("msgs={}", s.message_count),
            format!("prompt={}c", count(s.prompt_chars)),
        ];
        if let Some(t) = s.ttft_ms {
            facts.push(format!("ttft={}", dur(t)));
        }
        if let Some(n) = s.input_tokens {
            facts.push(format!("in={}", count(n)));
        }
        if let Some(n) = s.output_tokens {
            facts.push(format!("out={}", count(n)));
        }
        if let Some(n) = s.cache_read_tokens.filter(|&n| n != 0) {
            facts.push(format!("cached={}", count(n)));
        }
        row.push(format!("{INDENT}{}", p.dim(&facts.join("  "))));
        if !s.tool_calls.is_empty() {
            row.push(format!(
                "{INDENT}{}",
                p.dim(&format!("→ {}", clean_line(&s.tool_calls.join(", "))))
            ));
        }
        match s.status {
            SpanStatus::InFlight => {
                let what = if s.ttft_ms.is_none() {
                    "— awaiting first token"
                } else {
                    "— streaming"
                };
                row.push(format!("{INDENT}{} {}", p.cyan("in flight"), p.dim(what)));
            }
            SpanStatus::Hung if never_closed => {
                row.push(format!(
                    "{INDENT}{} {}",
                    p.red("NEVER CLOSED"),
                    p.dim(&format!(
                        "— open since {} with no response and no error; nothing was recorded \
                         after it.",
                        date_time(s.started_at, &opts.time_zone)
                    ))
                ));
                if s.ttft_ms.is_none() {
                    row.push(format!(
                        "{INDENT}{}",
                        p.dim("Never produced a first token.")
                    ));
                }
            }
            SpanStatus::Hung => {
                row.push(format!(
                    "{INDENT}{} {}",
                    p.red("HUNG"),
                    p.dim(&format!(
                        "— open for over {hang} with no response and no error."
                    ))
                ));
                if s.ttft_ms.is_none() {
                    row.push(format!(
                        "{INDENT}{}",
                        p.dim(
                            "Never produced a first token: the provider accepted the \
                             connection and went silent."
                        )
                    ));
                }
            }
            SpanStatus::Error => row.push(format!(
                "{INDENT}{}: {}",
                p.yellow(&clean_line(s.error_kind.as_deref().unwrap_or("error"))),
                clean_line(s.error.as_deref().unwrap_or(""))
            )),
            SpanStatus::Ok => {}
        }
        rows.push((s.started_at, row));
    }
    if opts.show_tools && opts.slower_than_ms <= 0 {
        for t in &trace.tool_spans {
            rows.push((
                t.started_at,
                vec![format!(
                    "{} {} {} {}",
                    p.dim(&clock(t.started_at, &opts.time_zone)),
                    p.dim(&format!("{:>7}", dur(t.duration_ms))),
                    p.dim("tool "),
                    clean_line(&t.tool)
                )],
            ));
        }
        for d in &trace.denied_spans {
            rows.push((
                d.at,
                vec![format!(
                    "{} {} {} {} {}",
                    p.dim(&clock(d.at, &opts.time_zone)),
                    p.dim(&format!("{:>7}", "—")),
                    p.dim("deny "),
                    clean_line(&d.tool),
                    p.dim(&format!("({}) {}", d.source, clean_line(&d.reason)))
                )],
            ));
        }
    }
    rows.sort_by_key(|r| r.0);
    // A trace that spans days gets a date line where each day starts (the clock column alone
    // would read as one day).
    let day = |ms: i64| match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts.to_zoned(opts.time_zone.clone()).date().to_string(),
        Err(_) => String::new(),
    };
    let multi_day = match (rows.first(), rows.last()) {
        (Some(a), Some(b)) => day(a.0) != day(b.0),
        _ => false,
    };
    let mut current_day = String::new();
    for (at, row) in rows {
        if multi_day {
            let d = day(at);
            if d != current_day {
                lines.push(p.dim(&format!("── {d}")));
                current_day = d;
            }
        }
        lines.extend(row);
    }

    let other = (trace.wall_ms - trace.model_ms - trace.tool_ms).max(0);
    let mut tool_calls = crate::render::plural(trace.tool_spans.len() as u64, "call", "calls");
    if !trace.denied_spans.is_empty() {
        tool_calls.push_str(&format!(", {} denied", trace.denied_spans.len()));
    }
    lines.push(String::new());
    lines.push(p.bold("where the time went"));
    let share = |label: &str, ms: i64, note: &str| {
        format!(
            "  {label}   {:>8}  {}  {}",
            dur(ms),
            p.dim(&pct(ms, trace.wall_ms)),
            p.dim(note)
        )
    };
    lines.push(share(
        "model",
        trace.model_ms,
        &crate::render::plural(trace.model_spans.len() as u64, "call", "calls"),
    ));
    lines.push(share("tools", trace.tool_ms, &tool_calls));
    lines.push(share("other", other, "user input, idle"));
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
    let hung = trace
        .model_spans
        .iter()
        .filter(|s| s.status == SpanStatus::Hung)
        .count();
    let failed = trace
        .model_spans
        .iter()
        .filter(|s| s.status == SpanStatus::Error)
        .count();
    lines.push(if trace.model_spans.is_empty() {
        format!(
            "{}{}",
            p.yellow("no model calls recorded"),
            p.dim(" — this log predates model tracing, so the gaps above are unattributed.")
        )
    } else if hung > 0 && trace.abandoned {
        let since = trace
            .model_spans
            .iter()
            .filter(|s| s.status == SpanStatus::Hung)
            .map(|s| s.started_at)
            .min()
            .unwrap_or(trace.ended_at);
        format!(
            "{}{}",
            p.red(&format!(
                "{} never closed (open since {})",
                crate::render::plural(hung as u64, "request", "requests"),
                date_time(since, &opts.time_zone)
            )),
            p.dim(" — the process that made it stopped before a response or an error.")
        )
    } else if hung > 0 {
        format!(
            "{}{}",
            p.red(&format!(
                "{} open for over {hang}",
                crate::render::plural(hung as u64, "request", "requests")
            )),
            p.dim(" — hung on the provider, not on a tool.")
        )
    } else if failed > 0 {
        p.yellow(&format!(
            "{} failed",
            crate::render::plural(failed as u64, "model call", "model calls")
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
    lines.join("\n")
}

#[cfg(test)]
mod tests {

    use freecode_core::rollout::trace::{DeniedSpan, TraceBuilder, build_trace};
    use freecode_core::rollout::{DenySource, Event};
    use serde_json::Value;

    use super::*;

    use freecode_testkit::fixtures as reference;

    fn expected(rel: &str) -> String {
        let path = reference().join("expected/rollout").join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    const SCENARIOS: [&str; 5] = [
        "S1_full",
        "S2_interrupted",
        "S5_deleted",
        "S7_compacted",
        "S8_odd_path",
    ];

    fn scenario_id(name: &str) -> String {
        let ids: Value = serde_json::from_str(
            &std::fs::read_to_string(reference().join("scenario-ids.json")).unwrap(),
        )
        .unwrap();
        ids[name].as_str().unwrap().to_owned()
    }

    fn events(name: &str) -> Vec<Event> {
        let id = scenario_id(name);
        let path = reference()
            .join("home/.freecode/rollout/sessions")
            .join(&id)
            .join("events.jsonl");
        let mut out = Vec::new();
        let report = freecode_store::rollout::read_events(&path, |e| out.push(e))
            .unwrap()
            .unwrap();
        assert!(
            report.issues.is_empty() && report.unknown == 0,
            "{report:?}"
        );
        out
    }

    fn fold(name: &str, now: Option<i64>) -> Trace {
        let mut b = TraceBuilder::new(scenario_id(name));
        for e in events(name) {
            b.apply(&e);
        }
        b.snapshot(now)
    }

    fn utc(slower_than_ms: i64, show_tools: bool) -> RenderOptions {
        RenderOptions {
            slower_than_ms,
            show_tools,
            time_zone: TimeZone::UTC,
        }
    }

    /// The original's waterfall with our deliberate differences applied: `1 call` (not
    /// `1 calls`) and an hour as `1h 00m` (not `60m02s`).
    pub(crate) fn deliberate(original: &str) -> String {
        original
            .replace("1 calls\x1b", "1 call\x1b")
            .replace("60m02s", "1h 00m")
            .replace("1 request(s) ", "1 request ")
            .replace("1 model call(s) failed", "1 model call failed")
            .replace("model call(s) failed", "model calls failed")
            .replace("request(s) ", "requests ")
    }

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut it = s.chars();
        while let Some(c) = it.next() {
            if c == '\x1b' {
                for c in it.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn format_duration_matches_the_original_except_the_carried_roundings() {
        let cases: Vec<Value> = serde_json::from_str(&expected("formatDuration.json")).unwrap();
        assert_eq!(cases.len(), 20);
        let mut carried = 0;
        for case in &cases {
            let ms = case["ms"].as_f64().unwrap();
            let original = case["text"].as_str().unwrap();
            // SPEC §19.36: the original rounds after choosing the unit and prints values that
            // should have carried into the next one; these are the only differences.
            let want = match original {
                "1000ms" => "1.0s",    // 999.5 ms
                "60.0s" => "1m00s",    // 59950 and 59999 ms
                "1m60s" => "2m00s",    // 119500 ms
                "60m00s" => "1h 00m",  // 3600000 ms: past an hour, hours and minutes
                "1440m00s" => "1d 0h", // 86400000 ms: past a day, days and hours
                other => other,
            };
            carried += usize::from(want != original);
            assert_eq!(format_duration(ms), want, "formatDuration({ms})");
        }
        assert_eq!(carried, 6);
        // The brief's and SPEC's own examples of the bug, fixed.
        assert_eq!(format_duration(119_600.0), "2m00s");
        assert_eq!(format_duration(59_999.0), "1m00s");
        assert_eq!(format_duration(999.6), "1.0s");
        assert_eq!(format_duration(300_000.0), "5m00s");
        assert_eq!(format_duration(179_499.0), "2m59s");
        assert_eq!(format_duration(179_500.0), "3m00s");
        // JavaScript's toFixed rounds exact halves up; Rust's `{:.1}` would print 1.2s.
        assert_eq!(format_duration(1250.0), "1.3s");
        assert_eq!(format_duration(0.0), "0ms");
    }

    #[test]
    fn long_durations_read_in_hours_and_days() {
        assert_eq!(format_duration(3_599_000.0), "59m59s");
        // 59m59.6s carries into the hour, not into `60m00s`.
        assert_eq!(format_duration(3_599_600.0), "1h 00m");
        assert_eq!(format_duration(3_600_000.0 + 5.0 * 60_000.0), "1h 05m");
        assert_eq!(
            format_duration(23.0 * 3_600_000.0 + 59.0 * 60_000.0),
            "23h 59m"
        );
        assert_eq!(format_duration(86_400_000.0 - 20_000.0), "1d 0h");
        // The issue's `460675m39s`.
        assert_eq!(format_duration(460_675.0 * 60_000.0 + 39_000.0), "319d 22h");
        assert_eq!(
            format_duration(3.0 * 86_400_000.0 + 4.0 * 3_600_000.0),
            "3d 4h"
        );
    }

    #[test]
    fn a_trace_over_days_dates_its_rows() {
        let mut b = TraceBuilder::new("s");
        let day: i64 = 86_400_000;
        let t0: i64 = 1_768_467_600_000; // 2026-01-15 09:00 UTC
        for (seq, (ts, kind)) in [
            (t0, r#""type":"model.request","provider":"p","model":"m""#),
            (
                t0 + 1000,
                r#""type":"model.response","provider":"p","model":"m","duration_ms":1000"#,
            ),
            (
                t0 + day,
                r#""type":"model.request","provider":"p","model":"m""#,
            ),
            (
                t0 + day + 500,
                r#""type":"model.response","provider":"p","model":"m","duration_ms":500"#,
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let line = format!(
                r#"{{"id":"e{seq}","seq":{seq},"aggregateID":"s","timestamp":{ts},"turnId":"turn-0",{kind}}}"#
            );
            let raw: freecode_core::rollout::RawEvent = serde_json::from_str(&line).unwrap();
            b.apply(&Event::from_raw(raw).unwrap());
        }
        let text = render_trace(&b.snapshot(None), &utc(0, true), Palette::new(false));
        assert!(text.contains("── 2026-01-15\n09:00:00"), "{text}");
        assert!(text.contains("── 2026-01-16\n09:00:00"), "{text}");
        assert!(text.contains("1d 0h wall"), "{text}");
        assert!(text.contains("2 calls"), "{text}");
    }

    #[test]
    fn a_request_left_open_long_ago_never_closed_and_is_not_timed_to_now() {
        let last = events("S1_full").last().unwrap().timestamp;
        let year = 320 * 86_400_000;
        // Within a day of silence it is a hang timed to now (a process may still wait)…
        let recent = fold("S1_full", Some(last + 600_000));
        assert!(recent.hung && !recent.abandoned);
        let text = render_trace(&recent, &utc(0, true), Palette::new(false));
        assert!(text.contains("1 request open for over 5m00s"), "{text}");
        // …long after, it never closed: no wall time counted to now.
        let old = fold("S1_full", Some(last + year));
        assert!(old.hung && old.abandoned);
        assert_eq!(old.wall_ms, old.ended_at - old.started_at);
        let text = render_trace(&old, &utc(0, true), Palette::new(false));
        assert!(!text.contains("320d"), "{text}");
        assert!(
            text.contains("NEVER CLOSED — open since 2026-01-15 09:11"),
            "{text}"
        );
        assert!(
            text.contains("1 request never closed (open since 2026-01-15 09:11)"),
            "{text}"
        );
        assert!(!text.contains("HUNG"), "{text}");
    }

    #[test]
    fn to_fixed_is_javascripts() {
        assert_eq!(to_fixed(0.25, 1), "0.3"); // exact half: up (Rust's `{:.1}` gives 0.2)
        assert_eq!(to_fixed(9.95, 1), "9.9"); // 9.9499999… as a double
        assert_eq!(to_fixed(1.005, 2), "1.00");
        assert_eq!(to_fixed(99.96, 1), "100.0");
        assert_eq!(to_fixed(-1.25, 1), "-1.3");
        assert_eq!(to_fixed(1e-7, 3), "0.000");
        assert_eq!(to_fixed(5e-324, 0), "0");
    }

    #[test]
    fn count_matches_the_original() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1.0k");
        assert_eq!(count(1520), "1.5k");
        assert_eq!(count(1550), "1.6k"); // an exact half rounds up, as toFixed does
        assert_eq!(count(354_430), "354.4k");
        assert_eq!(count(1_250_000), "1.25M");
        assert_eq!(count(1_000_000), "1.00M");
        // Deliberate: the original prints "1000.0k" here (the §19.36 rounding bug).
        assert_eq!(count(999_950), "1.00M");
        assert_eq!(count(999_949), "999.9k");
    }

    #[test]
    fn clock_uses_the_given_zone() {
        assert_eq!(clock(1_768_467_604_150, &TimeZone::UTC), "09:00:04");
        let plus_two = TimeZone::fixed(jiff::tz::offset(2));
        assert_eq!(clock(1_768_467_604_150, &plus_two), "11:00:04");
    }

    #[test]
    fn the_five_logs_render_like_the_original() {
        for name in SCENARIOS {
            let trace = fold(name, None);
            for (file, opts) in [
                ("trace.txt", utc(0, true)),
                ("trace--no-tools.txt", utc(0, false)),
                ("trace--slow-5000.txt", utc(5000, true)),
            ] {
                let ours = format!("{}\n", render_trace(&trace, &opts, Palette::new(true)));
                let want = deliberate(&expected(&format!("{name}/{file}")));
                assert_eq!(ours, want, "{name}/{file}");
            }
        }
    }

    #[test]
    fn s2_aged_against_a_later_now_renders_like_the_original() {
        let last = events("S2_interrupted").last().unwrap().timestamp;
        for n in [10_000, 299_999, 300_000, 3_600_000] {
            let trace = fold("S2_interrupted", Some(last + n));
            let ours = format!(
                "{}\n",
                render_trace(&trace, &utc(0, true), Palette::new(true))
            );
            let want = deliberate(&expected(&format!(
                "S2_interrupted/renderTrace-now-last+{n}.txt"
            )));
            assert_eq!(ours, want, "now = last + {n}");
        }
    }

    #[test]
    fn an_empty_trace_renders_like_the_original() {
        let trace = build_trace("00000000-empty", [], None);
        let ours = format!(
            "{}\n",
            render_trace(&trace, &utc(0, true), Palette::new(true))
        );
        assert_eq!(ours, expected("empty-trace-render.txt"));
    }

    /// The fold the renderer is fed equals the original's `buildTrace`, key order included,
    /// apart from what the 19-event schema adds (documented in `freecode_core::rollout::trace`):
    /// `deniedSpans`, `redirects`, `redirectsSkipped`, `abandoned`, tool-span `args` and model-span
    /// `cacheWriteTokens`.
    #[test]
    fn the_fold_equals_the_originals_build_trace_plus_the_idx_fields() {
        for name in SCENARIOS {
            let mut ours = serde_json::to_value(fold(name, None)).unwrap();
            let obj = ours.as_object_mut().unwrap();
            assert_eq!(obj.shift_remove("deniedSpans"), Some(Value::Array(vec![])));
            assert_eq!(obj.shift_remove("redirects"), Some(Value::from(0)));
            assert_eq!(obj.shift_remove("redirectsSkipped"), Some(Value::from(0)));
            // Aged against the last event, nothing is abandoned.
            assert_eq!(obj.shift_remove("abandoned"), Some(Value::from(false)));
            for span in obj["toolSpans"].as_array_mut().unwrap() {
                // Tool spans carry their call's args (absent for an output with no call).
                span.as_object_mut().unwrap().shift_remove("args");
            }
            for span in obj["modelSpans"].as_array_mut().unwrap() {
                span.as_object_mut()
                    .unwrap()
                    .shift_remove("cacheWriteTokens");
            }
            let want = expected(&format!("{name}/buildTrace.json"));
            // Our keys are camelCase throughout (docs/json.md): the original's `wall_ms` is our
            // `wallMs`, and so on; the values and the order are the same.
            let mut camel = want.clone();
            for (theirs, ours) in [
                ("wall_ms", "wallMs"),
                ("model_ms", "modelMs"),
                ("tool_ms", "toolMs"),
                ("duration_ms", "durationMs"),
                ("ttft_ms", "ttftMs"),
            ] {
                camel = camel.replace(&format!("\"{theirs}\": "), &format!("\"{ours}\": "));
            }
            assert_eq!(
                format!("{}\n", serde_json::to_string_pretty(&ours).unwrap()),
                camel,
                "{name}"
            );
            assert_eq!(
                expected(&format!("{name}/trace--json.txt")),
                want,
                "{name}: --json prints the fold"
            );
        }
    }

    fn with_denial() -> Trace {
        let mut t = fold("S7_compacted", None);
        t.denied_spans.push(DeniedSpan {
            tool: "bash".into(),
            at: t.tool_spans[0].started_at + 1,
            args: Some(serde_json::json!({"command": "rm -rf /"})),
            source: DenySource::Rule,
            reason: "Denied by rule: bash(rm *)".into(),
        });
        t
    }

    #[test]
    fn denials_get_a_row_and_a_summary_suffix() {
        let t = with_denial();
        let out = render_trace(&t, &utc(0, true), Palette::new(false));
        let row = out
            .lines()
            .find(|l| l.contains("deny"))
            .expect("a denial row");
        assert_eq!(
            row,
            "09:35:21       — deny  bash (rule) Denied by rule: bash(rm *)"
        );
        // Sorted by time: right after the read_file tool row it follows.
        let lines: Vec<&str> = out.lines().collect();
        let i = lines.iter().position(|l| *l == row).unwrap();
        assert!(lines[i - 1].ends_with("tool  read_file"), "{out}");
        assert!(
            out.contains("  tools      33.1s   16%  5 calls, 1 denied\n"),
            "{out}"
        );
        // With colour: the same row, dim around the clock, dash, label and reason.
        let coloured = render_trace(&t, &utc(0, true), Palette::new(true));
        assert!(coloured.contains(
            "\x1b[2m09:35:21\x1b[0m \x1b[2m      —\x1b[0m \x1b[2mdeny \x1b[0m bash \
             \x1b[2m(rule) Denied by rule: bash(rm *)\x1b[0m"
        ));
        // Hidden with the tool rows, but still counted.
        for opts in [utc(0, false), utc(5000, true)] {
            let out = render_trace(&t, &opts, Palette::new(false));
            assert!(!out.contains("— deny"), "{out}");
            assert!(out.contains(", 1 denied"), "{out}");
        }
    }

    #[test]
    fn a_trace_without_denials_never_says_denied() {
        for name in SCENARIOS {
            let out = render_trace(&fold(name, None), &utc(0, true), Palette::new(true));
            assert!(
                !out.contains("denied") && !out.contains("redirect"),
                "{out}"
            );
        }
    }

    #[test]
    fn redirects_get_a_summary_line_when_any_happened() {
        let mut t = fold("S7_compacted", None);
        t.redirects = 2;
        let out = render_trace(&t, &utc(0, true), Palette::new(true));
        assert!(
            out.contains("\x1b[2m  tokens  in=97.5k out=1.1k cached=65.0k\x1b[0m\n\x1b[2m  redirect  fired=2 skipped=0\x1b[0m\n\n"),
            "{out}"
        );
        t.redirects = 0;
        t.redirects_skipped = 1;
        let out = render_trace(&t, &utc(0, true), Palette::new(false));
        assert!(out.contains("\n  redirect  fired=0 skipped=1\n"), "{out}");
    }

    #[test]
    fn plain_output_is_the_coloured_output_without_escapes() {
        for name in SCENARIOS {
            let t = fold(name, None);
            let plain = render_trace(&t, &utc(0, true), Palette::new(false));
            assert!(!plain.contains('\x1b'));
            let coloured = render_trace(&t, &utc(0, true), Palette::new(true));
            assert_eq!(plain, strip_ansi(&coloured));
        }
    }

    #[test]
    fn an_in_flight_request_without_a_first_token_is_awaiting_it() {
        let evs = events("S2_interrupted");
        // turn.started and model.request only: no first token yet.
        let t = build_trace("2b0084fa-x", &evs[..2], Some(evs[1].timestamp + 2000));
        let out = render_trace(&t, &utc(0, true), Palette::new(false));
        assert!(out.contains("in flight — awaiting first token"), "{out}");
        assert!(!out.contains("HUNG"));
        let t = build_trace("2b0084fa-x", &evs[..2], Some(evs[1].timestamp + 300_000));
        let out = render_trace(&t, &utc(0, true), Palette::new(false));
        assert!(out.contains("HUNG — open for over 5m00s"), "{out}");
        assert!(out.contains("Never produced a first token"), "{out}");
    }
}
