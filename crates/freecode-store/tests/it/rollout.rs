//! The rollout log: our reader and folds over the original's logs answer as its readers did
//! (`expected/rollout/*`), and what our recorder writes reads back with no loss.
//!
//! Deliberate differences (docs/compatibility.md) are asserted explicitly.

use crate::support::fixtures;

use freecode_core::SessionId;
use freecode_core::rollout::replay::ReplayBuilder;
use freecode_core::rollout::trace::{SpanStatus, TraceBuilder, build_trace};
use freecode_core::rollout::{DenySource, Event, EventKind, ModelErrorKind};
use freecode_store::rollout::{
    ModelRequest, ModelResponse, Recorder, RecorderConfig, events_path, last_event_where,
    read_events,
};
use freecode_store::{Durability, Home, StoreError};
use proptest::prelude::*;
use serde_json::{Value, json};

fn expected(rel: &str) -> Value {
    let p = fixtures().join("expected/rollout").join(rel);
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// The original's fold output with our key names: camelCase throughout (`wall_ms` is our
/// `wallMs`, and so on; docs/json.md). The values and the key order are the same.
fn camel_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let k = match k.as_str() {
                        "wall_ms" => "wallMs".to_owned(),
                        "model_ms" => "modelMs".to_owned(),
                        "tool_ms" => "toolMs".to_owned(),
                        "duration_ms" => "durationMs".to_owned(),
                        "ttft_ms" => "ttftMs".to_owned(),
                        _ => k,
                    };
                    (k, camel_keys(v))
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(camel_keys).collect()),
        other => other,
    }
}

const LOGS: [(&str, &str); 5] = [
    ("S1_full", "68d44408-94df-4f2f-ae2e-ffffdb68e297"),
    ("S2_interrupted", "2b0084fa-74c0-4e03-a6d9-7e1128df064c"),
    ("S5_deleted", "b5f300b4-eac0-4eab-8ef1-3233db36ea63"),
    ("S7_compacted", "16aa3e15-f2e4-4fc5-bf70-a0962a62c733"),
    ("S8_odd_path", "cd3ea044-8813-45ef-895e-87ac699e8acf"),
];

fn fixture_events(id: &str) -> Vec<Event> {
    let home = Home::new(fixtures().join("home/.freecode"));
    let mut events = Vec::new();
    let report = read_events(&events_path(&home, &SessionId::new(id).unwrap()), |e| {
        events.push(e)
    })
    .unwrap()
    .unwrap();
    assert!(
        report.issues.is_empty() && report.unknown == 0,
        "{id}: {report:?}"
    );
    events
}

fn remove(v: &mut Value, key: &str) -> Option<Value> {
    v.as_object_mut().unwrap().remove(key)
}

#[test]
fn events_read_back_as_the_original_loaded_them() {
    for (name, id) in LOGS {
        let events = fixture_events(id);
        let want = expected(&format!("{name}/loadSessionEvents.json"));
        assert_eq!(
            serde_json::to_value(&events).unwrap(),
            want["events"],
            "{name}"
        );
        assert_eq!(
            events.iter().map(|e| e.timestamp).min(),
            want["startTime"].as_i64()
        );
        assert_eq!(
            events.iter().map(|e| e.timestamp).max(),
            want["endTime"].as_i64()
        );
        let counts = expected(&format!("{name}/eventCounts.json"));
        let n = |t: &str| events.iter().filter(|e| e.kind.type_name() == t).count() as u64;
        assert_eq!(
            events.len() as u64,
            counts["getEventCount"].as_u64().unwrap()
        );
        for t in ["function.call", "function.output", "model.request"] {
            assert_eq!(n(t), counts[t].as_u64().unwrap(), "{name} {t}");
        }
        // Writing them back gives the original's bytes, line for line.
        let home = Home::new(fixtures().join("home/.freecode"));
        let original = std::fs::read(events_path(&home, &SessionId::new(id).unwrap())).unwrap();
        let ours: Vec<u8> = events.iter().flat_map(|e| e.to_line()).collect();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(original).unwrap(),
            "{name}"
        );
        let compactions: Vec<Value> = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::CompactOccurred { before_tokens, after_tokens } => Some(
                    json!({"beforeTokens": before_tokens, "afterTokens": after_tokens, "timestamp": e.timestamp}),
                ),
                _ => None,
            })
            .collect();
        assert_eq!(
            Value::Array(compactions),
            expected(&format!("{name}/getCompactions.json")),
            "{name}"
        );
    }
}

#[test]
fn replay_matches_the_original_except_the_repeated_turn_fix() {
    for (name, id) in LOGS {
        let mut b = ReplayBuilder::new(id);
        for e in &fixture_events(id) {
            b.apply(e);
        }
        let replay = b.finish();
        let summary = std::fs::read_to_string(
            fixtures().join(format!("expected/rollout/{name}/getSessionSummary.txt")),
        )
        .unwrap();
        assert_eq!(format!("{}\n", replay.summary_text()), summary, "{name}");
        let mut got = serde_json::to_value(&replay).unwrap();
        // Fields the 19-event schema adds; the original's are all present.
        for k in [
            "totalDenied",
            "redirects",
            "redirectsSkipped",
            "unknownEvents",
            "skippedLines",
        ] {
            assert!(remove(&mut got, k).is_some(), "{k}");
        }
        let mut want = camel_keys(expected(&format!("{name}/replaySession.json")));
        if name == "S1_full" {
            // SPEC §19.29: the original lists a reused turn id twice, both times as the later
            // turn, losing the first turn's calls. We keep both turns.
            let turns = |v: &Value| {
                v["turns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["turnId"].clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(turns(&got), turns(&want));
            assert_eq!(
                want["turns"][0], want["turns"][3],
                "the original's duplicate"
            );
            assert_ne!(got["turns"][0], got["turns"][3]);
            assert_eq!(got["turns"][0]["calls"].as_array().unwrap().len(), 3);
            assert_eq!(got["turns"][3], want["turns"][3]);
            for i in [1, 2] {
                assert_eq!(got["turns"][i], want["turns"][i]);
            }
            remove(&mut got, "turns");
            remove(&mut want, "turns");
        }
        assert_eq!(got, want, "{name}");
    }
}

/// Removes what the 19-event fold adds to the original's 16-event one, asserting it is there.
fn strip_idx_additions(trace: &mut Value) {
    assert_eq!(remove(trace, "deniedSpans"), Some(json!([])));
    assert_eq!(remove(trace, "redirects"), Some(json!(0)));
    assert_eq!(remove(trace, "redirectsSkipped"), Some(json!(0)));
    // Within a day of the last event nothing is abandoned.
    assert_eq!(remove(trace, "abandoned"), Some(json!(false)));
    // Where the wall time went, in parts that add up to it.
    let time = remove(trace, "time").unwrap();
    let parts: i64 = ["modelMs", "toolsMs", "idleMs", "otherMs"]
        .iter()
        .map(|k| time[*k].as_i64().unwrap())
        .sum();
    assert_eq!(Some(parts), trace["wallMs"].as_i64(), "{time}");
    for s in trace["modelSpans"].as_array_mut().unwrap() {
        remove(s, "cacheWriteTokens");
    }
    for s in trace["toolSpans"].as_array_mut().unwrap() {
        remove(s, "args");
    }
}

#[test]
fn trace_fold_matches_the_original_as_of_the_last_event() {
    for (name, id) in LOGS {
        let events = fixture_events(id);
        let mut got = serde_json::to_value(build_trace(id, &events, None)).unwrap();
        strip_idx_additions(&mut got);
        assert_eq!(
            got,
            camel_keys(expected(&format!("{name}/buildTrace.json"))),
            "{name}"
        );
    }
    // Aged against a later "now", as --follow sees it: in flight up to the threshold, then hung.
    let (_, s2) = LOGS[1];
    let events = fixture_events(s2);
    let last = events.last().unwrap().timestamp;
    for n in [10_000, 299_999, 300_000, 3_600_000] {
        let mut got = serde_json::to_value(build_trace(s2, &events, Some(last + n))).unwrap();
        strip_idx_additions(&mut got);
        assert_eq!(
            got,
            camel_keys(expected(&format!(
                "S2_interrupted/buildTrace-now-last+{n}.json"
            ))),
            "+{n}"
        );
    }
    let mut empty = serde_json::to_value(build_trace("00000000-empty", &[], None)).unwrap();
    strip_idx_additions(&mut empty);
    assert_eq!(empty, camel_keys(expected("empty-trace.json")));
}

#[test]
fn tool_args_in_spans_come_from_the_paired_call() {
    let (_, s1) = LOGS[0];
    let trace = build_trace(s1, &fixture_events(s1), None);
    assert_eq!(
        trace.tool_spans[0].args,
        Some(json!({"path": "src/settings/Settings.tsx"}))
    );
}

fn rec_config(durability: Durability) -> RecorderConfig {
    RecorderConfig {
        enabled: true,
        durability,
        ..RecorderConfig::disabled()
    }
}

#[test]
fn recorder_resumes_seq_from_the_tail_and_fences_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-1").unwrap();
    {
        let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
        r.turn_started("turn-0").unwrap();
        r.compact_occurred(10, 5).unwrap();
        assert_eq!(r.seq(), 2);
    }
    // A crash mid-append leaves a fragment.
    let path = events_path(&home, &id);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"turn.started","id":"X","seq":3,"aggr"#);
    std::fs::write(&path, &bytes).unwrap();
    {
        let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
        assert_eq!(r.seq(), 2);
        r.turn_started("turn-1").unwrap();
    }
    let mut events = Vec::new();
    let report = read_events(&path, |e| events.push(e)).unwrap().unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(report.issues.len(), 1, "the fenced fragment is reported");
    assert_eq!(report.issues[0].line, 3);
    assert!(
        events.windows(2).all(|w| w[0].id < w[1].id),
        "ULIDs increase"
    );
    assert!(events.iter().all(|e| e.id.len() == 26));
}

/// The types of the complete lines in the log at `path`, in file order.
fn types_on_disk(path: &std::path::Path) -> Vec<String> {
    let mut v = Vec::new();
    read_events(path, |e| v.push(e.kind.type_name().to_owned()))
        .unwrap()
        .unwrap();
    v
}

fn request() -> ModelRequest {
    ModelRequest {
        provider: "p".into(),
        model: "m".into(),
        ..Default::default()
    }
}

#[test]
fn a_buffered_recorder_writes_before_a_provider_call_a_tool_run_a_sync_and_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-buffered").unwrap();
    let path = events_path(&home, &id);
    // A window long enough that the background flusher never writes during this test.
    let config = RecorderConfig {
        flush_window: std::time::Duration::from_secs(600),
        ..rec_config(Durability::TurnBoundary)
    };
    let mut r = Recorder::open(&home, &id, config).unwrap();
    r.turn_started("t").unwrap();
    assert!(
        types_on_disk(&path).is_empty(),
        "turn.started waits in the buffer"
    );
    let call = r.model_request("t", request()).unwrap();
    assert_eq!(
        types_on_disk(&path),
        ["turn.started", "model.request"],
        "the request and everything before it are written before the provider is called"
    );
    call.response(&mut r, ModelResponse::default()).unwrap();
    assert_eq!(types_on_disk(&path).len(), 2);
    let tool = r.function_call("t", "bash", json!({})).unwrap();
    assert_eq!(
        types_on_disk(&path),
        [
            "turn.started",
            "model.request",
            "model.response",
            "function.call"
        ],
        "written before the tool runs"
    );
    tool.output(&mut r, "ok", false).unwrap();
    r.deny("t", "edit", json!({}), DenySource::Mode, "no")
        .unwrap();
    assert_eq!(types_on_disk(&path).len(), 4);
    r.sync().unwrap();
    assert_eq!(types_on_disk(&path).len(), 6, "sync writes the buffer");
    r.flush().unwrap();
    r.compact_occurred(2, 1).unwrap();
    assert_eq!(types_on_disk(&path).len(), 6);
    assert_eq!(r.seq(), 7);
    drop(r);
    assert_eq!(
        types_on_disk(&path).last().map(String::as_str),
        Some("compact.occurred"),
        "drop writes the buffer"
    );
    // The bytes are the typed events' own lines, seq 1..=7.
    let mut events = Vec::new();
    read_events(&path, |e| events.push(e)).unwrap().unwrap();
    let rewritten: Vec<u8> = events.iter().flat_map(Event::to_line).collect();
    assert_eq!(std::fs::read(&path).unwrap(), rewritten);
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7]
    );
}

#[test]
fn the_background_flusher_writes_a_lone_event_without_another_one_arriving() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-flusher").unwrap();
    let path = events_path(&home, &id);
    let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
    for round in 0..3 {
        r.turn_started(&format!("t{round}")).unwrap();
        // Not a timing assertion: the bound only keeps a broken flusher from hanging the test.
        let t0 = std::time::Instant::now();
        while types_on_disk(&path).len() <= round {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(30),
                "round {round}: the buffered event was never written"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    assert_eq!(types_on_disk(&path).len(), 3);
}

#[test]
fn a_zero_window_or_every_append_writes_every_event_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    for (k, config) in [
        RecorderConfig {
            flush_window: std::time::Duration::ZERO,
            ..rec_config(Durability::Never)
        },
        rec_config(Durability::EveryAppend),
    ]
    .into_iter()
    .enumerate()
    {
        let id = SessionId::new(format!("s-direct-{k}")).unwrap();
        let path = events_path(&home, &id);
        let mut r = Recorder::open(&home, &id, config).unwrap();
        for n in 1..=3 {
            r.turn_started("t").unwrap();
            assert_eq!(types_on_disk(&path).len(), n, "config {k}");
        }
    }
}

/// Writes a log of one event with this id and seq; returns its bytes.
fn log_ending_in(home: &Home, id: &SessionId, event_id: &str, seq: u64) -> Vec<u8> {
    let path = events_path(home, id);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let line = format!(
        "{{\"type\":\"turn.started\",\"id\":\"{event_id}\",\"seq\":{seq},\"aggregateID\":\"{id}\",\"timestamp\":1,\"turnId\":\"turn-1\"}}\n"
    );
    std::fs::write(&path, &line).unwrap();
    line.into_bytes()
}

#[test]
fn a_log_at_the_largest_seq_refuses_new_events_instead_of_restarting_at_zero() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-max").unwrap();
    let before = log_ending_in(&home, &id, "01KF0E48H0AAAAAAAAAAAAAAAA", u64::MAX);
    let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
    assert_eq!(r.seq(), u64::MAX);
    let err = r.turn_started("turn-2").unwrap_err();
    assert!(
        matches!(&err, StoreError::Exhausted { what: "seq", .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("18446744073709551615") && text.contains("events.jsonl"),
        "{text}"
    );
    assert!(r.function_call("turn-2", "read_file", json!({})).is_err());
    drop(r);
    assert_eq!(std::fs::read(events_path(&home, &id)).unwrap(), before);
}

#[test]
fn a_log_after_the_largest_event_id_refuses_new_events_instead_of_restarting_at_000() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-maxid").unwrap();
    let before = log_ending_in(&home, &id, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 4);
    let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
    let err = r.turn_started("turn-2").unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::Exhausted {
                what: "event id",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
        "{err}"
    );
    drop(r);
    assert_eq!(std::fs::read(events_path(&home, &id)).unwrap(), before);

    // One id short of the largest: the next event gets the largest, never a smaller one.
    let id2 = SessionId::new("s-nearmax").unwrap();
    log_ending_in(&home, &id2, "7ZZZZZZZZZZZZZZZZZZZZZZZZY", 4);
    let mut r = Recorder::open(&home, &id2, rec_config(Durability::Never)).unwrap();
    let rec = r
        .record(EventKind::TurnStarted {
            turn_id: "turn-2".into(),
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.id.as_str(), rec.seq),
        ("7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 5)
    );
    assert!(r.turn_started("turn-3").is_err());
}

#[test]
fn the_last_matching_event_is_found_from_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-last").unwrap();
    let path = events_path(&home, &id);
    let is_turn = |e: &Event| matches!(e.kind, EventKind::TurnStarted { .. });
    assert!(
        last_event_where(&path, is_turn).unwrap().is_none(),
        "no log"
    );
    {
        let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
        r.turn_started("turn-1-0").unwrap();
        r.compact_occurred(10, 5).unwrap();
        r.turn_started("turn-2-0").unwrap();
        // More than one 64 KiB chunk after the match.
        for _ in 0..2_000 {
            r.compact_occurred(10, 5).unwrap();
        }
    }
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"turn.started","turnId":"turn-9-0","se"#);
    std::fs::write(&path, &bytes).unwrap();
    let last = last_event_where(&path, is_turn).unwrap().unwrap();
    assert!(
        matches!(&last.kind, EventKind::TurnStarted { turn_id } if turn_id == "turn-2-0"),
        "a torn fragment is not an event: {last:?}"
    );
    assert!(
        last_event_where(&path, |e| matches!(e.kind, EventKind::ModelResponse { .. }))
            .unwrap()
            .is_none()
    );
}

#[test]
fn one_recorder_per_log_and_disabled_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-1").unwrap();
    let _a = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
    assert!(matches!(
        Recorder::open(&home, &id, rec_config(Durability::Never)),
        Err(StoreError::Locked { .. })
    ));
    let other = SessionId::new("s-2").unwrap();
    let mut off = Recorder::open(&home, &other, RecorderConfig::disabled()).unwrap();
    assert_eq!(
        off.record(EventKind::TurnStarted {
            turn_id: "t".into()
        })
        .unwrap(),
        None
    );
    assert!(!home.rollout_dir(&other).exists());
}

#[test]
fn the_api_keeps_the_ordering_rules() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let id = SessionId::new("s-1").unwrap();
    {
        let mut r = Recorder::open(&home, &id, rec_config(Durability::EveryAppend)).unwrap();
        let req = ModelRequest {
            provider: "p".into(),
            model: "m".into(),
            streamed: true,
            ..Default::default()
        };
        let mut call = r.model_request("turn-0", req.clone()).unwrap();
        call.first_token(&mut r).unwrap();
        call.response(
            &mut r,
            ModelResponse {
                input_tokens: Some(5),
                tool_calls: vec!["read".into()],
                ..Default::default()
            },
        )
        .unwrap();
        let a = r.function_call("turn-0", "read", json!({"p": 1})).unwrap();
        let b = r.function_call("turn-0", "read", json!({"p": 2})).unwrap();
        b.output(&mut r, "two", false).unwrap();
        a.output(&mut r, "one", true).unwrap();
        r.deny(
            "turn-0",
            "edit",
            json!({}),
            DenySource::Mode,
            "read-only mode",
        )
        .unwrap();
        r.model_request("turn-0", req.clone())
            .unwrap()
            .error(&mut r, ModelErrorKind::Stall, "no data")
            .unwrap();
        // A request never closed: the log shows it open.
        let _hang = r.model_request("turn-1", req).unwrap();
    }
    let mut events = Vec::new();
    read_events(&events_path(&home, &id), |e| events.push(e))
        .unwrap()
        .unwrap();
    let types: Vec<_> = events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(
        types,
        [
            "model.request",
            "model.first_token",
            "model.response",
            "function.call",
            "function.call",
            "function.output",
            "function.output",
            "function.denied",
            "model.request",
            "model.error",
            "model.request"
        ]
    );
    let trace = build_trace(
        "s-1",
        &events,
        Some(events.last().unwrap().timestamp + 300_000),
    );
    // Parallel calls of one tool pair by call id, not by name.
    assert_eq!(
        trace
            .tool_spans
            .iter()
            .map(|s| s.args.clone().unwrap()["p"].clone())
            .collect::<Vec<_>>(),
        [json!(2), json!(1)]
    );
    assert_eq!(trace.tool_spans[1].failed, Some(true));
    assert_eq!(trace.denied_spans.len(), 1);
    assert_eq!(trace.model_spans[1].error_kind.as_deref(), Some("stall"));
    assert_eq!(trace.model_spans[2].status, SpanStatus::Hung);
    assert!(trace.hung);
}

#[test]
fn a_post_mortem_calls_a_final_open_request_hung_by_the_clock() {
    // SPEC §19.32: aged against itself, the last-line request looks in flight forever.
    let (_, s2) = LOGS[1];
    let events = fixture_events(s2);
    let mut b = TraceBuilder::new(s2);
    for e in &events {
        b.apply(e);
    }
    assert!(b.snapshot(None).in_flight);
    let t = b.snapshot(Some(freecode_store::now_ms()));
    assert!(t.hung && !t.in_flight);
}

fn arb_kind() -> impl Strategy<Value = EventKind> {
    let s = "\\PC{0,12}";
    prop_oneof![
        s.prop_map(|turn_id| EventKind::TurnStarted { turn_id }),
        (s, s).prop_map(|(turn_id, reason)| EventKind::TurnAborted { turn_id, reason }),
        (s, s, any::<i64>(), proptest::option::of(s)).prop_map(|(turn_id, tool, n, call_id)| {
            EventKind::FunctionCall {
                turn_id,
                tool,
                args: json!({"n": n}),
                call_id,
                parent_call_id: None,
            }
        }),
        (s, s, s, any::<i64>(), proptest::option::of(any::<bool>())).prop_map(
            |(turn_id, tool, output, d, failed)| EventKind::FunctionOutput {
                turn_id,
                tool,
                output,
                duration_ms: d,
                failed,
                call_id: None
            }
        ),
        (s, s, s).prop_map(|(turn_id, tool, reason)| EventKind::FunctionDenied {
            turn_id,
            tool,
            args: json!({}),
            reason,
            source: DenySource::User
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| EventKind::CompactOccurred {
            before_tokens: a,
            after_tokens: b
        }),
        (s, s).prop_map(|(subagent_id, task)| EventKind::SubagentStart { subagent_id, task }),
        (s, s).prop_map(|(subagent_id, result)| EventKind::SubagentStop {
            subagent_id,
            result
        }),
        (s, any::<bool>()).prop_map(|(skill_name, implicit)| EventKind::SkillInvoked {
            skill_name,
            implicit
        }),
        (s, s, any::<bool>()).prop_map(|(hook_name, hook_event, blocked)| {
            EventKind::HookTriggered {
                hook_name,
                hook_event,
                blocked,
            }
        }),
        (s, s).prop_map(|(hook_name, reason)| EventKind::HookBlocked { hook_name, reason }),
        any::<u64>().prop_map(|before_tokens| EventKind::ContextOverflow { before_tokens }),
        (s, s, s).prop_map(|(turn_id, parser, error)| EventKind::ParseError {
            turn_id,
            parser,
            error
        }),
        (s, s, s, any::<u64>(), any::<bool>()).prop_map(
            |(turn_id, provider, model, n, streamed)| {
                EventKind::ModelRequest {
                    turn_id,
                    provider,
                    model,
                    message_count: n,
                    tool_count: n,
                    prompt_chars: n,
                    streamed,
                }
            }
        ),
        (s, any::<i64>())
            .prop_map(|(turn_id, ttft_ms)| EventKind::ModelFirstToken { turn_id, ttft_ms }),
        (
            s,
            s,
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(s, 0..3)
        )
            .prop_map(|(turn_id, model, t, tool_calls)| EventKind::ModelResponse {
                turn_id,
                provider: "p".into(),
                model,
                duration_ms: 1,
                ttft_ms: t.map(|t| t as i64 / 2),
                input_tokens: t,
                output_tokens: t,
                cache_read_tokens: None,
                cache_write_tokens: t,
                cache_write_1h_tokens: t.map(|t| t / 2),
                reasoning_tokens: None,
                tool_calls,
                text_chars: 3,
                thinking_chars: 0,
                echoed_model: None
            }),
        (s, s).prop_map(|(turn_id, error)| EventKind::ModelError {
            turn_id,
            provider: "p".into(),
            model: "m".into(),
            duration_ms: 5,
            kind: ModelErrorKind::Abort,
            error
        }),
        (s, s, proptest::collection::vec(s, 0..3)).prop_map(
            |(turn_id, reason, evidence_event_ids)| {
                EventKind::RedirectTriggered {
                    turn_id,
                    reason,
                    evidence_event_ids,
                    direction_count: 1,
                    direction_chars: 40,
                    latency_ms: 9,
                    input_tokens: Some(1),
                    output_tokens: None,
                }
            }
        ),
        (s, s).prop_map(|(turn_id, reason)| EventKind::RedirectSkipped { turn_id, reason }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Record → read gives the same events, every type.
    #[test]
    fn record_then_read_is_lossless(kinds in proptest::collection::vec(arb_kind(), 0..30)) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let id = SessionId::new("p-1").unwrap();
        {
            let mut r = Recorder::open(&home, &id, rec_config(Durability::Never)).unwrap();
            for k in &kinds {
                r.record(k.clone()).unwrap();
            }
        }
        let mut events = Vec::new();
        let report = read_events(&events_path(&home, &id), |e| events.push(e)).unwrap().unwrap();
        prop_assert!(report.issues.is_empty());
        let got: Vec<EventKind> = events.iter().map(|e| e.kind.clone()).collect();
        prop_assert_eq!(got, kinds);
        prop_assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1 && e.aggregate_id == "p-1"));
    }
}

/// A log held for sync (`HeldLog`) and its recorder exclude each other, as two recorders do;
/// what it appends is read back as the recorder's own lines are; a log planted as a link is
/// refused, and nothing is written through it; a log it replaces in place loses its fold
/// checkpoints, whose key (inode and probes) could take the new bytes for the old.
#[test]
fn a_held_log_and_its_recorder_exclude_each_other() {
    use freecode_store::lock::LockWait;
    use freecode_store::rollout::HeldLog;
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join(".freecode"));
    let id = SessionId::new("held-log").unwrap();
    let config = RecorderConfig {
        enabled: true,
        durability: Durability::Never,
        lock_wait: LockWait::Fail,
        ..RecorderConfig::disabled()
    };
    let held = HeldLog::try_hold(&home, &id)
        .unwrap()
        .expect("a free log is held");
    assert!(matches!(
        Recorder::open(&home, &id, config),
        Err(StoreError::Locked { .. })
    ));
    let line = b"{\"type\":\"turn.started\",\"timestamp\":1,\"turnId\":\"t\xc3\xbcrn\"}\n";
    held.append(line, true).unwrap();
    held.append(line, false).unwrap();
    held.truncate(line.len() as u64).unwrap();
    drop(held);
    {
        let _rec = Recorder::open(&home, &id, config).unwrap();
        assert!(
            HeldLog::try_hold(&home, &id).unwrap().is_none(),
            "held under a recorder"
        );
    }
    // A checkpoint of the log goes when the log is replaced in place (same inode).
    let folds = freecode_store::rollout::checkpoint::dir(&home, &id);
    std::fs::create_dir_all(&folds).unwrap();
    std::fs::write(folds.join("replay-pretty.state"), b"stale").unwrap();
    let held = HeldLog::try_hold(&home, &id).unwrap().unwrap();
    held.replace(line, true).unwrap();
    drop(held);
    assert!(
        !folds.exists(),
        "a checkpoint outlived the bytes it covered"
    );
    let mut events = Vec::new();
    let report = read_events(&events_path(&home, &id), |e| events.push(e))
        .unwrap()
        .unwrap();
    assert_eq!((events.len(), report.issues.len()), (1, 0), "{events:?}");

    let other = SessionId::new("held-link").unwrap();
    let target = dir.path().join("elsewhere.jsonl");
    std::fs::write(&target, b"").unwrap();
    let log = events_path(&home, &other);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&target, &log).unwrap();
    assert!(matches!(
        HeldLog::try_hold(&home, &other),
        Err(StoreError::Symlink { .. })
    ));
    assert_eq!(std::fs::read(&target).unwrap(), b"");
}
