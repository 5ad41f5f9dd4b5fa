//! Unit tests of `trace_render`.

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

/// `text` without the lines of "where the time went" (model, tools, other: ours cut the
/// wall time into parts that add up, a deliberate difference, issue 43), and those lines.
fn split_time_block(text: &str) -> (String, Vec<String>) {
    let mut rest = String::new();
    let mut block = Vec::new();
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        let plain = strip_ansi(line);
        if plain.starts_with("where the time went") {
            inside = true;
            rest.push_str(line);
            continue;
        }
        if inside && plain.trim_start().starts_with("tokens") {
            inside = false;
        }
        if inside {
            block.push(plain.trim_end().to_owned());
        } else {
            rest.push_str(line);
        }
    }
    (rest, block)
}

/// Ours: model, tools, idle and other, whose percents add up to 100 (or are all 0).
fn check_time_block(block: &[String]) {
    let labels: Vec<&str> = block
        .iter()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(labels, ["model", "tools", "idle", "other"], "{block:?}");
    let sum: u64 = block
        .iter()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.ends_with('%'))
                .and_then(|w| w.trim_end_matches('%').parse::<u64>().ok())
        })
        .sum();
    assert!(sum == 100 || sum == 0, "{block:?}");
}

/// Ours and the original's render, apart from "where the time went", which ours cuts into
/// parts that add up ([`check_time_block`]).
fn assert_renders_like(ours: &str, want: &str, what: &str) {
    let (ours, block) = split_time_block(ours);
    let (want, theirs) = split_time_block(want);
    assert_eq!(ours, want, "{what}");
    check_time_block(&block);
    // Where nothing overlaps, model and tools are the original's lines.
    for (o, t) in block.iter().zip(&theirs).take(2) {
        if o.split_whitespace().nth(2) == t.split_whitespace().nth(2) {
            assert_eq!(o, t, "{what}");
        }
    }
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
            assert_renders_like(&ours, &want, &format!("{name}/{file}"));
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
        assert_renders_like(&ours, &want, &format!("now = last + {n}"));
    }
}

#[test]
fn an_empty_trace_renders_like_the_original() {
    let trace = build_trace("00000000-empty", [], None);
    let ours = format!(
        "{}\n",
        render_trace(&trace, &utc(0, true), Palette::new(true))
    );
    assert_renders_like(&ours, &expected("empty-trace-render.txt"), "empty");
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
        // Where the wall time went, in parts that add up to it.
        let time = obj.shift_remove("time").unwrap();
        let parts: i64 = ["modelMs", "toolsMs", "idleMs", "otherMs"]
            .iter()
            .map(|k| time[*k].as_i64().unwrap())
            .sum();
        assert_eq!(Some(parts), obj["wallMs"].as_i64(), "{name}: {time}");
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

#[test]
fn row_number_formatting_is_format_duration_and_count() {
    let mut s = String::new();
    let check = |ms: i64, s: &mut String| {
        s.clear();
        dur_into(s, ms);
        assert_eq!(*s, format_duration(ms as f64), "{ms} ms");
    };
    for ms in -3000..400_000 {
        check(ms, &mut s);
    }
    for ms in (400_000..200_000_000).step_by(997) {
        check(ms, &mut s);
    }
    for n in (0..3_000_000u64).step_by(3) {
        s.clear();
        count_into(&mut s, n);
        assert_eq!(s, count(n), "{n}");
    }
}

#[test]
fn the_clock_cache_is_the_zoned_clock() {
    let mut zones = vec![TimeZone::UTC, TimeZone::fixed(jiff::tz::offset(-7))];
    zones.extend(TimeZone::get("America/New_York").ok());
    for tz in zones {
        let mut c = Clock::new(&tz);
        let mut s = String::new();
        for ms in (1_710_000_000_000i64..1_710_200_000_000).step_by(333_333) {
            s.clear();
            c.push(&mut s, ms);
            assert_eq!(s, clock(ms, &tz), "{ms}");
        }
    }
}

/// A log with overlapping requests closing out of order, parallel tools answered in
/// reverse, denials, clock steps back, days crossed, bad lines, requests left open and a
/// torn tail.
fn odd_log(n: i64, open_at_end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut push = |s: String| {
        out.extend_from_slice(s.as_bytes());
        out.push(b'\n');
    };
    for k in 0..n {
        let ts = 1_700_000_000_000 + k * 3_000_000 - (k % 5) * 4_000_000;
        let h = |t: &str, dt: i64| format!("\"timestamp\":{},\"turnId\":\"{t}\"", ts + dt);
        let (a, b) = (format!("turn-{k}"), format!("sub-{k}"));
        push(format!(
            "{{\"type\":\"model.request\",{},\"provider\":\"p\",\"model\":\"m\",\"messageCount\":{k},\"toolCount\":2,\"promptChars\":{}}}",
            h(&a, 1),
            k * 1237
        ));
        push(format!(
            "{{\"type\":\"model.request\",{},\"provider\":\"q\",\"model\":\"m2\",\"messageCount\":1,\"toolCount\":0,\"promptChars\":5}}",
            h(&b, 2)
        ));
        push(format!(
            "{{\"type\":\"model.first_token\",{},\"ttft_ms\":{}}}",
            h(&b, 3),
            k % 900
        ));
        push(format!(
            "{{\"type\":\"model.response\",{},\"duration_ms\":{},\"inputTokens\":{},\"toolCalls\":[\"bash\"]}}",
            h(&b, 4),
            (k * 7919) % 90_000,
            k * 11
        ));
        if k % 4 == 0 {
            push(format!(
                "{{\"type\":\"model.error\",{},\"duration_ms\":1250,\"kind\":\"stall\",\"error\":\"slow\"}}",
                h(&a, 5)
            ));
        } else {
            push(format!(
                "{{\"type\":\"model.response\",{},\"duration_ms\":{},\"outputTokens\":{k},\"cacheReadTokens\":{}}}",
                h(&a, 5),
                1000 + k % 70_000,
                k % 3
            ));
        }
        push(format!(
            "{{\"type\":\"function.call\",{},\"tool\":\"bash\",\"callId\":\"c{k}\",\"args\":{{\"n\":{k}}}}}",
            h(&a, 6)
        ));
        push(format!(
            "{{\"type\":\"function.call\",{},\"tool\":\"read\",\"callId\":\"d{k}\"}}",
            h(&a, 7)
        ));
        push(format!(
            "{{\"type\":\"function.output\",{},\"tool\":\"read\",\"callId\":\"d{k}\",\"output\":\"ok\",\"duration_ms\":{}}}",
            h(&a, 8),
            k % 50
        ));
        push(format!(
            "{{\"type\":\"function.output\",{},\"tool\":\"bash\",\"callId\":\"c{k}\",\"output\":\"ok\",\"duration_ms\":9}}",
            h(&a, 9)
        ));
        if k % 3 == 0 {
            push(format!(
                "{{\"type\":\"function.denied\",{},\"tool\":\"rm\",\"reason\":\"no\",\"source\":\"mode\"}}",
                h(&a, 10)
            ));
            push("{not json".to_owned());
        }
    }
    if open_at_end {
        push("{\"type\":\"model.request\",\"timestamp\":1700000000000,\"turnId\":\"x\",\"provider\":\"p\",\"model\":\"m\"}".to_owned());
    }
    out.extend_from_slice(b"{\"type\":\"model.request\",\"timestamp\":1");
    out
}

fn streamed(bytes: &[u8], at: u64, opts: &RenderOptions, p: Palette, now: Option<i64>) -> String {
    let sink = RowSpans::new(opts, p);
    let (b, _, _) = freecode_store::rollout::fold_views_split(
        bytes,
        at,
        64 << 10,
        TraceBuilder::with_sink("s", sink),
    )
    .unwrap();
    let (parts, sink) = b.finish_parts(now);
    let mut out = Vec::new();
    write_streamed(&mut out, &parts, &sink, None).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_streamed_waterfall_is_the_tree_built_one() {
    for name in SCENARIOS {
        let id = scenario_id(name);
        let path = reference()
            .join("home/.freecode/rollout/sessions")
            .join(&id)
            .join("events.jsonl");
        let bytes = std::fs::read(path).unwrap();
        for now in [None, Some(i64::MAX / 4)] {
            let want = render_trace(&fold(name, now), &utc(0, true), Palette::new(true)) + "\n";
            let sink = RowSpans::new(&utc(0, true), Palette::new(true));
            let mut b = TraceBuilder::with_sink(id.clone(), sink);
            freecode_store::rollout::read_views_from(&bytes[..], 1 << 20, |v| b.apply_view(v))
                .unwrap();
            let (parts, sink) = b.finish_parts(now);
            let mut out = Vec::new();
            write_streamed(&mut out, &parts, &sink, None).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want, "{name}");
        }
    }
    for (n, open) in [(40, false), (40, true), (3000, false), (3000, true)] {
        let bytes = odd_log(n, open);
        for (opts, p) in [
            (utc(0, true), Palette::new(true)),
            (utc(0, false), Palette::new(false)),
            (utc(20_000, true), Palette::new(false)),
        ] {
            for now in [None, Some(1_700_000_100_000), Some(1_900_000_000_000)] {
                let (tree, _, _) = freecode_store::rollout::fold_views_split(
                    &bytes,
                    0,
                    64 << 10,
                    TraceBuilder::new("s"),
                )
                .unwrap();
                let want = render_trace(&tree.finish(now), &opts, p) + "\n";
                for at in [0, bytes.len() as u64 / 3, bytes.len() as u64 / 2] {
                    assert_eq!(streamed(&bytes, at, &opts, p, now), want, "{n} {open} {at}");
                }
            }
        }
    }
}
