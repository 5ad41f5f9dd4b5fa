//! The view reader (`read_views_from`) against the typed reader (`read_events_from`) on
//! generated logs: the same report (events, unknown types, every issue with its line, offset
//! and message) at any block size, and the same trace and replay folded from either; the
//! streamed `trace --json`, `trace --otlp` and `replay --json` equal to the tree-built bytes at
//! every split, and so are the rendered replay's turns read back.

use freecode_core::rollout::otlp::write_otlp;
use freecode_core::rollout::replay::ReplayBuilder;
use freecode_core::rollout::trace::TraceBuilder;
use freecode_store::rollout::{
    CompactSpans, CompactTurns, JsonSpans, JsonTurns, OtlpSpans, ReadReport, StreamedReplay,
    fold_views_split, read_events_from, read_views_from, trace_page, write_otlp_streamed,
    write_replay_json, write_trace_json,
};
use proptest::prelude::*;

/// One line of a generated log (without its newline).
pub(crate) fn line() -> impl Strategy<Value = Vec<u8>> {
    let turn = prop_oneof![Just("turn-0"), Just("turn-1"), Just("")];
    let tool = prop_oneof![Just("read_file"), Just("bash"), Just("t\\u00e9")];
    let call = prop_oneof![
        Just(String::new()),
        Just(",\"callId\":\"c1\"".to_owned()),
        Just(",\"callId\":\"c2\"".to_owned()),
        Just(",\"callId\":null".to_owned())
    ];
    let args = prop_oneof![
        Just(",\"args\":{\"path\":\"a\",\"n\":1.50}".to_owned()),
        Just(",\"args\":null".to_owned()),
        Just(",\"args\":[1,{\"b\":\"\\n\"}]".to_owned()),
        Just(String::new()),
    ];
    let event = (0usize..20, 0i64..1000, turn, tool, call, args).prop_map(
        |(k, ts, turn, tool, call, args)| {
            let head = format!("\"timestamp\":{ts},\"turnId\":\"{turn}\"");
            let body = match k {
                0 => format!("{{\"type\":\"turn.started\",{head}}}"),
                1 => format!("{{\"type\":\"function.call\",{head},\"tool\":\"{tool}\"{args}{call}}}"),
                2 => format!("{{\"type\":\"function.output\",{head},\"tool\":\"{tool}\",\"output\":\"x\\ny \\\"q\\\"\",\"duration_ms\":{ts}{call},\"failed\":true}}"),
                3 => format!("{{\"type\":\"function.denied\",{head},\"tool\":\"{tool}\"{args},\"reason\":\"no\",\"source\":\"mode\"}}"),
                4 => format!("{{\"type\":\"model.request\",{head},\"provider\":\"p\",\"model\":\"m\",\"messageCount\":3,\"toolCount\":2,\"promptChars\":9,\"streamed\":true}}"),
                5 => format!("{{\"type\":\"model.first_token\",{head},\"ttft_ms\":{ts}}}"),
                6 => format!("{{\"type\":\"model.response\",{head},\"provider\":\"p\",\"model\":\"m\",\"duration_ms\":5,\"inputTokens\":7,\"cacheWriteTokens\":1,\"toolCalls\":[\"a\",\"b\"],\"textChars\":3}}"),
                7 => format!("{{\"type\":\"model.error\",{head},\"duration_ms\":5,\"kind\":\"stall\",\"error\":\"slow\"}}"),
                8 => format!("{{\"type\":\"compact.occurred\",{head},\"beforeTokens\":10,\"afterTokens\":4}}"),
                9 => format!("{{\"type\":\"parse.error\",{head},\"parser\":\"p\",\"error\":\"e\\u00e9\"}}"),
                10 => format!("{{\"type\":\"redirect.triggered\",{head},\"evidenceEventIds\":[\"a\"]}}"),
                11 => format!("{{\"type\":\"redirect.skipped\",{head}}}"),
                12 => format!("{{\"type\":\"cache.warm\",{head}}}"),
                13 => format!("{{{head}}}"),
                // Lone surrogates: kept (as U+FFFD) and reported.
                14 => format!("{{\"type\":\"turn.aborted\",{head},\"reason\":\"cut \\ud83d\"}}"),
                15 => format!("{{\"type\":\"subagent.stop\",{head},\"future\":{{\"k\":\"\\udc00\"}}}}"),
                // Wrong types: refused by both.
                16 => format!("{{\"type\":\"model.request\",{head},\"messageCount\":\"3\"}}"),
                17 => format!("{{\"type\":\"function.output\",{head},\"output\":5}}"),
                // Duplicate keys: the last wins.
                18 => format!("{{\"type\":\"cache.warm\",\"type\":\"turn.started\",{head},\"turnId\":\"turn-1\"}}"),
                _ => format!("{{\"type\":\"hook.triggered\",{head},\"extra\":[1,2,{{}}]}}"),
            };
            body.into_bytes()
        },
    );
    prop_oneof![
        8 => event,
        1 => Just(b"not json".to_vec()),
        1 => Just(b"   ".to_vec()),
        1 => Just(Vec::new()),
        1 => Just(b"[1,2]".to_vec()),
        1 => Just(b"{\"type\":\"turn.started\",\"turnId\":\"\xff\"}".to_vec()),
        1 => Just(b"{\"type\":\"turn.started\",\"x\":\"\xc3\"}".to_vec()),
        1 => Just(b"{\"type\":\"turn.started\",\"x\":\"a\x01b\"}".to_vec()),
    ]
}

pub(crate) fn log() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(line(), 0..40),
        proptest::option::of(line()),
    )
        .prop_map(|(lines, torn)| {
            let mut out = Vec::new();
            for l in lines {
                out.extend_from_slice(&l);
                out.push(b'\n');
            }
            if let Some(t) = torn {
                out.extend_from_slice(&t);
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn views_read_and_fold_as_typed_events(bytes in log(), block in 1usize..200) {
        let (mut typed_trace, mut typed_replay) = (TraceBuilder::new("s"), ReplayBuilder::new("s"));
        let want = read_events_from(&bytes[..], |e| {
            typed_trace.apply(&e);
            typed_replay.apply(&e);
        })
        .unwrap();
        let (mut trace, mut replay) = (TraceBuilder::new("s"), ReplayBuilder::new("s"));
        let got = read_views_from(&bytes[..], block, |v| {
            trace.apply_view(v);
            replay.apply_view(v);
        })
        .unwrap();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(
            serde_json::to_string(&trace.finish(Some(2_000_000))).unwrap(),
            serde_json::to_string(&typed_trace.finish(Some(2_000_000))).unwrap()
        );
        prop_assert_eq!(
            serde_json::to_string(&replay.finish()).unwrap(),
            serde_json::to_string(&typed_replay.finish()).unwrap()
        );
    }
}

/// A replay as the CLI finishes it: the report's unknown events and skipped lines added.
fn replay_json(mut b: ReplayBuilder, r: &ReadReport) -> String {
    for _ in 0..r.unknown {
        b.unknown_event();
    }
    for i in r.issues.iter().filter(|i| i.kind.skipped()) {
        b.skipped_line(i.line, i.offset, format!("{:?}", i.kind));
    }
    serde_json::to_string(&b.finish()).unwrap()
}

fn trace_json(b: TraceBuilder) -> String {
    serde_json::to_string(&b.finish(Some(2_000_000))).unwrap()
}

/// Folds `bytes` split at `at` and checks report, trace and replay against one sequential
/// read; returns whether each fold took its tail's results (rather than reading to the end).
fn split_matches_sequential(bytes: &[u8], at: u64, block: usize) -> (bool, bool) {
    let (mut trace, mut replay) = (TraceBuilder::new("s"), ReplayBuilder::new("s"));
    let want = read_views_from(bytes, block, |v| {
        trace.apply_view(v);
        replay.apply_view(v);
    })
    .unwrap();
    let (t, tr, t_at) = fold_views_split(bytes, at, block, TraceBuilder::new("s")).unwrap();
    assert_eq!(tr, want, "trace read split at {at}");
    let tree = trace.clone().finish(Some(2_000_000));
    assert_eq!(trace_json(t), trace_json(trace), "trace split at {at}");
    // `trace --json` streamed (spans spooled as they close, read back after the fold) writes
    // the bytes of the tree-built trace, split or not.
    let mut want_pretty = serde_json::to_vec_pretty(&tree).unwrap();
    want_pretty.push(b'\n');
    let streamed = split_with(bytes, at, block, JsonSpans::new());
    let mut got = Vec::new();
    write_trace_json(&mut got, streamed, Some(2_000_000)).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want_pretty),
        "streamed trace --json split at {at}"
    );
    // Compact (the JSON-RPC `session.trace` answer): serde_json's compact bytes of the tree.
    let streamed = split_with(bytes, at, block, CompactSpans::new());
    let mut got = Vec::new();
    write_trace_json(&mut got, streamed, Some(2_000_000)).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&serde_json::to_vec(&tree).unwrap()),
        "streamed compact trace split at {at}"
    );
    // A page of each list read back (the MCP trace page): the tree's spans at those places.
    let value = serde_json::to_value(&tree).unwrap();
    for (offset, limit) in [(1, 2), (0, u64::MAX)] {
        let streamed = split_with(bytes, at, block, CompactSpans::new());
        let page = trace_page(streamed, Some(2_000_000), offset, limit).unwrap();
        let mut scalars = tree.clone();
        scalars.model_spans.clear();
        scalars.tool_spans.clear();
        scalars.denied_spans.clear();
        assert_eq!(page.trace, scalars, "page scalars split at {at}");
        for (key, list) in [
            ("modelSpans", &page.model),
            ("toolSpans", &page.tool),
            ("deniedSpans", &page.denied),
        ] {
            let all = value[key].as_array().unwrap();
            assert_eq!(list.total, all.len() as u64, "{key} count split at {at}");
            let want: Vec<_> = all
                .iter()
                .skip(offset as usize)
                .take(limit.min(1 << 20) as usize)
                .cloned()
                .collect();
            assert_eq!(
                list.spans, want,
                "{key} page {offset}+{limit} split at {at}"
            );
        }
    }
    // `trace --otlp FILE` streamed the same way: the bytes of the document of the tree.
    let mut want_otlp = Vec::new();
    write_otlp(&tree, &mut want_otlp).unwrap();
    let streamed = split_with(bytes, at, block, OtlpSpans::new("s"));
    let mut got = Vec::new();
    write_otlp_streamed(&mut got, streamed, Some(2_000_000)).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want_otlp),
        "streamed trace --otlp split at {at}"
    );
    let (r, rr, r_at) = fold_views_split(bytes, at, block, ReplayBuilder::new("s")).unwrap();
    assert_eq!(rr, want, "replay read split at {at}");
    assert_eq!(
        replay_json(r, &rr),
        replay_json(replay, &want),
        "replay split at {at}"
    );
    // `replay --json` streamed (turns written out once newer ones start, later events for
    // them kept as patches), whatever the number of turns held: the tree-built bytes.
    let tree = {
        let mut b = ReplayBuilder::new("s");
        read_views_from(bytes, block, |v| b.apply_view(v)).unwrap();
        with_report(&mut b, &want);
        let mut v = serde_json::to_vec_pretty(&b.finish()).unwrap();
        v.push(b'\n');
        v
    };
    for window in [0, 1, 64] {
        let fold = ReplayBuilder::with_sink("s", JsonTurns::new()).with_window(window);
        let (mut b, rr, _) = fold_views_split(bytes, at, block, fold).unwrap();
        with_report(&mut b, &rr);
        let mut got = Vec::new();
        write_replay_json(&mut got, b).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&tree),
            "streamed replay --json split at {at}, {window} turns held"
        );
        // The rendered replay's read-back: each turn of the tree-built replay, in order.
        let fold = ReplayBuilder::with_sink("s", CompactTurns::new()).with_window(window);
        let (mut b, rr, _) = fold_views_split(bytes, at, block, fold).unwrap();
        with_report(&mut b, &rr);
        let streamed = StreamedReplay::new(b);
        let mut turns = Vec::new();
        let mut back = streamed
            .each_turn(|t| {
                turns.push(t);
                Ok(())
            })
            .unwrap();
        back.turns = turns;
        let mut got = serde_json::to_vec_pretty(&back).unwrap();
        got.push(b'\n');
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&tree),
            "read-back replay split at {at}, {window} turns held"
        );
    }
    (t_at.is_some(), r_at.is_some())
}

/// The trace fold of `bytes` split at `at`, its spans handed to `sink`.
fn split_with<S: freecode_core::rollout::trace::SpanSink>(
    bytes: &[u8],
    at: u64,
    block: usize,
    sink: S,
) -> TraceBuilder<S>
where
    TraceBuilder<S>: freecode_core::rollout::split::SplitFold + Send + 'static,
{
    fold_views_split(bytes, at, block, TraceBuilder::with_sink("s", sink))
        .unwrap()
        .0
}

fn with_report<S: freecode_core::rollout::replay::TurnSink>(
    b: &mut ReplayBuilder<S>,
    r: &ReadReport,
) {
    for _ in 0..r.unknown {
        b.unknown_event();
    }
    for i in r.issues.iter().filter(|i| i.kind.skipped()) {
        b.skipped_line(i.line, i.offset, format!("{:?}", i.kind));
    }
}

/// Turns as the agent writes them (unique turn ids, requests answered, calls with outputs),
/// with some left open, some calls without ids and noise lines between.
fn turns_log() -> impl Strategy<Value = Vec<u8>> {
    let turn = (0usize..4, 0usize..3, any::<bool>(), 0usize..6);
    (proptest::collection::vec(turn, 0..8), line()).prop_map(|(turns, noise)| {
        let mut out = Vec::new();
        let mut ts = 0;
        let push = |s: String, out: &mut Vec<u8>| {
            out.extend_from_slice(s.as_bytes());
            out.push(b'\n');
        };
        for (n, (requests, calls, ids, oddity)) in turns.into_iter().enumerate() {
            let head = |ts: i64| format!("\"timestamp\":{ts},\"turnId\":\"turn-{n}\"");
            push(format!("{{\"type\":\"turn.started\",{}}}", head(ts)), &mut out);
            for r in 0..requests {
                ts += 10;
                push(format!("{{\"type\":\"model.request\",{},\"provider\":\"p\",\"model\":\"m\",\"messageCount\":3,\"toolCount\":2,\"promptChars\":9}}", head(ts)), &mut out);
                if oddity == 0 && r == 0 {
                    continue; // never answered
                }
                push(format!("{{\"type\":\"model.first_token\",{},\"ttft_ms\":3}}", head(ts + 3)), &mut out);
                if oddity == 1 {
                    out.extend_from_slice(&noise);
                    out.push(b'\n');
                }
                let end = if oddity == 2 && r == 0 {
                    format!("{{\"type\":\"model.error\",{},\"duration_ms\":5,\"kind\":\"stall\",\"error\":\"slow\"}}", head(ts + 5))
                } else {
                    format!("{{\"type\":\"model.response\",{},\"provider\":\"p\",\"model\":\"m\",\"duration_ms\":5,\"inputTokens\":7,\"toolCalls\":[\"bash\"]}}", head(ts + 5))
                };
                push(end, &mut out);
                for c in 0..calls {
                    let id = if ids { format!(",\"callId\":\"c{n}-{r}-{c}\"") } else { String::new() };
                    push(format!("{{\"type\":\"function.call\",{},\"tool\":\"bash\",\"args\":{{\"n\":{c}}}{id}}}", head(ts + 6)), &mut out);
                    if oddity == 3 && c == 0 {
                        continue; // no output
                    }
                    push(format!("{{\"type\":\"function.output\",{},\"tool\":\"bash\",\"output\":\"ok\",\"duration_ms\":2{id}}}", head(ts + 8)), &mut out);
                }
                if oddity == 4 {
                    push(format!("{{\"type\":\"function.denied\",{},\"tool\":\"rm\",\"reason\":\"no\",\"source\":\"mode\"}}", head(ts + 9)), &mut out);
                    push(format!("{{\"type\":\"compact.occurred\",{},\"beforeTokens\":10,\"afterTokens\":4}}", head(ts + 9)), &mut out);
                }
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Every line start of a generated log, and some offsets inside lines, as the split.
    #[test]
    fn split_folds_give_the_sequential_answer(bytes in log(), block in 1usize..200, inside in proptest::collection::vec(any::<prop::sample::Index>(), 4)) {
        let mut at: Vec<u64> = std::iter::once(0)
            .chain(bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i as u64 + 1))
            .collect();
        at.extend(inside.iter().map(|i| i.index(bytes.len() + 1) as u64));
        for a in at {
            split_matches_sequential(&bytes, a, block);
        }
    }

    /// Every line start of a log of turns as the split (none inside lines: the split moves to
    /// the next line start anyway, which the test above covers).
    #[test]
    fn split_turns_give_the_sequential_answer(bytes in turns_log(), block in 64usize..300) {
        let starts = std::iter::once(0)
            .chain(bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i as u64 + 1));
        for a in starts {
            split_matches_sequential(&bytes, a, block);
        }
    }
}

/// A log of clean turns splices at the first turn past the split (the tail's work is used),
/// with a bad line and a torn tail after the split reported once, with their global lines.
#[test]
fn clean_turns_splice_near_the_split() {
    let mut log = Vec::new();
    for n in 0..50 {
        log.extend_from_slice(format!("{{\"type\":\"turn.started\",\"timestamp\":{n},\"turnId\":\"t{n}\"}}\n{{\"type\":\"model.request\",\"timestamp\":{n},\"turnId\":\"t{n}\",\"provider\":\"p\",\"model\":\"m\"}}\n{{\"type\":\"model.response\",\"timestamp\":{n},\"turnId\":\"t{n}\",\"duration_ms\":1}}\n{{\"type\":\"function.call\",\"timestamp\":{n},\"turnId\":\"t{n}\",\"tool\":\"bash\",\"callId\":\"c{n}\"}}\n{{\"type\":\"function.output\",\"timestamp\":{n},\"turnId\":\"t{n}\",\"tool\":\"bash\",\"callId\":\"c{n}\",\"duration_ms\":1}}\n").as_bytes());
        if n == 40 {
            log.extend_from_slice(b"not json\n");
        }
    }
    log.extend_from_slice(b"{\"type\":\"turn");
    let mut spliced = 0;
    for at in (0..log.len() as u64).step_by(13) {
        let (t, r) = split_matches_sequential(&log, at, 4096);
        spliced += usize::from(t) + usize::from(r);
    }
    let splits = log.len().div_ceil(13);
    assert!(
        spliced * 10 >= splits * 2 * 9,
        "{spliced} of {}",
        splits * 2
    );
}

/// A log past `SPLIT_BYTES` read from a file: `fold_event_views` (two threads, `pread`) gives
/// the sequential report, trace and replay.
#[test]
fn a_large_file_folds_as_one_read() {
    use freecode_store::rollout::{SPLIT_BYTES, fold_event_views};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut log = Vec::new();
    let mut n = 0u64;
    while (log.len() as u64) < SPLIT_BYTES + (1 << 20) {
        let pad = "x".repeat((n % 500) as usize);
        log.extend_from_slice(format!("{{\"type\":\"turn.started\",\"timestamp\":{n},\"turnId\":\"turn-{n}\"}}\n{{\"type\":\"model.request\",\"timestamp\":{n},\"turnId\":\"turn-{n}\",\"provider\":\"p\",\"model\":\"m\"}}\n{{\"type\":\"model.response\",\"timestamp\":{n},\"turnId\":\"turn-{n}\",\"duration_ms\":3,\"inputTokens\":5}}\n{{\"type\":\"function.call\",\"timestamp\":{n},\"turnId\":\"turn-{n}\",\"tool\":\"bash\",\"args\":{{\"p\":\"{pad}\"}}}}\n{{\"type\":\"function.output\",\"timestamp\":{n},\"turnId\":\"turn-{n}\",\"tool\":\"bash\",\"output\":\"{pad}\",\"duration_ms\":1}}\n").as_bytes());
        if n.is_multiple_of(997) {
            log.extend_from_slice(b"not json\n");
        }
        n += 1;
    }
    log.extend_from_slice(
        b"{\"type\":\"model.request\",\"timestamp\":1,\"turnId\":\"late\"}\n{\"type",
    );
    std::fs::write(&path, &log).unwrap();
    let (mut trace, mut replay) = (TraceBuilder::new("s"), ReplayBuilder::new("s"));
    let want = freecode_store::rollout::read_event_views(&path, |v| {
        trace.apply_view(v);
        replay.apply_view(v);
    })
    .unwrap()
    .unwrap();
    assert!(want.issues.len() > 2, "{:?}", want.issues.len());
    let (t, tr) = fold_event_views(&path, TraceBuilder::new("s"))
        .unwrap()
        .unwrap();
    assert_eq!(tr, want);
    assert_eq!(trace_json(t), trace_json(trace));
    let (r, rr) = fold_event_views(&path, ReplayBuilder::new("s"))
        .unwrap()
        .unwrap();
    assert_eq!(rr, want);
    assert_eq!(replay_json(r, &rr), replay_json(replay, &want));
}
