//! The view reader (`read_views_from`) against the typed reader (`read_events_from`) on
//! generated logs: the same report (events, unknown types, every issue with its line, offset
//! and message) at any block size, and the same trace and replay folded from either.

use freecode_core::rollout::replay::ReplayBuilder;
use freecode_core::rollout::trace::TraceBuilder;
use freecode_store::rollout::{read_events_from, read_views_from};
use proptest::prelude::*;

/// One line of a generated log (without its newline).
fn line() -> impl Strategy<Value = Vec<u8>> {
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

fn log() -> impl Strategy<Value = Vec<u8>> {
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
