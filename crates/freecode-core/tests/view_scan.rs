//! The line scanner (the fast path of `ParsedLine::parse`) against `serde_json` reading the
//! same line (`ParsedLine::parse_full`): whenever the scanner takes a line, `serde_json`
//! accepts it too and both give the same view; whenever `serde_json` refuses one, so does
//! `parse`. And every line the recorder and the original wrote is taken by the scanner.

use std::path::Path;

use freecode_core::rollout::view::{EventView, ParsedLine, ToolCalls};
use freecode_core::rollout::{DenySource, Event, EventKind, ModelErrorKind};
use proptest::prelude::*;

/// A view with everything compared as owned text.
fn norm(v: &EventView<'_>) -> (String, Vec<String>, Option<String>, Option<String>) {
    let mut bare = v.clone();
    bare.tool_calls = ToolCalls::Typed(&[]);
    bare.args = None;
    bare.output = None;
    (
        format!("{bare:?}"),
        v.tool_calls.to_vec(),
        v.args.map(|a| a.to_value().to_string()),
        v.output.map(|o| o.to_owned_string()),
    )
}

type Outcome = Result<Result<(String, Vec<String>, Option<String>, Option<String>), String>, ()>;

fn outcome(p: serde_json::Result<ParsedLine<'_>>) -> Outcome {
    p.map(|p| p.view().map(|v| norm(&v)).map_err(|e| format!("{e:?}")))
        .map_err(drop)
}

/// Checks one line; returns whether the scanner took it.
fn check(line: &str) -> bool {
    let fast = ParsedLine::parse(line);
    let taken = fast.as_ref().is_ok_and(ParsedLine::is_fast);
    let full = ParsedLine::parse_full(line);
    if taken {
        assert!(
            full.is_ok(),
            "the scanner took a line serde_json refuses: {line}"
        );
    }
    assert_eq!(outcome(fast), outcome(full), "{line}");
    taken
}

/// Keys, each with the kind of value the typed reader requires of it (`a`: anything).
const KEYS: &[(&str, char)] = &[
    ("type", 's'),
    ("id", 's'),
    ("seq", 'u'),
    ("aggregateID", 's'),
    ("timestamp", 'i'),
    ("turnId", 's'),
    ("tool", 's'),
    ("args", 'a'),
    ("output", 's'),
    ("duration_ms", 'i'),
    ("beforeTokens", 'u'),
    ("afterTokens", 'u'),
    ("subagentId", 's'),
    ("implicit", 'b'),
    ("blocked", 'b'),
    ("reason", 's'),
    ("parser", 's'),
    ("error", 's'),
    ("provider", 's'),
    ("model", 's'),
    ("messageCount", 'u'),
    ("promptChars", 'u'),
    ("streamed", 'b'),
    ("ttft_ms", 'i'),
    ("inputTokens", 'u'),
    ("cacheWriteTokens", 'u'),
    ("reasoningTokens", 'u'),
    ("toolCalls", 'l'),
    ("kind", 's'),
    ("source", 's'),
    ("callId", 's'),
    ("failed", 'b'),
    ("evidenceEventIds", 'l'),
    ("latency_ms", 'i'),
    ("future", 'a'),
    ("Type", 'a'),
    ("type\\u0000", 'a'),
];

/// A value of the kind a key requires: mostly plain, sometimes at an edge of what the typed
/// reader takes (each of which the scanner must either read exactly or leave to serde_json).
fn typed(kind: char) -> BoxedStrategy<String> {
    let edge = |v: &[&'static str]| prop::sample::select(v.to_vec()).prop_map(str::to_owned);
    let text = prop_oneof![
        8 => "[a-z0-9_.-]{0,24}".prop_map(|s| format!("\"{s}\"")),
        1 => edge(&["\"é 中文 🎉\"", "\"a\\\"b\\n\"", "\"\\u00e9\"", "null", "\"tab\there\"",
            "\"bad \\x\"", "\"bad \\u12\"", "\"nul\u{0}\"", "\"unterminated"]),
    ];
    let numbers = [
        "01",
        "-0",
        "-01",
        "1.0",
        "1e3",
        "1E+3",
        "-1",
        "-",
        "18446744073709551615",
        "9223372036854775807",
        "9223372036854775808",
        "1234567890123456789",
        "999999999999999999",
        "-999999999999999999",
        "0",
        "nul",
        "\"5\"",
        "true",
    ];
    match kind {
        's' => text.boxed(),
        'u' => prop_oneof![
            8 => (0u64..1 << 40).prop_map(|n| n.to_string()),
            1 => Just("null".to_owned()),
            2 => edge(&numbers),
        ]
        .boxed(),
        'i' => prop_oneof![
            8 => (-(1i64 << 40)..1 << 40).prop_map(|n| n.to_string()),
            1 => Just("null".to_owned()),
            2 => edge(&numbers),
        ]
        .boxed(),
        'b' => edge(&["true", "false", "null", "nul", "tru", "1", "\"true\""]).boxed(),
        'l' => prop_oneof![
            6 => prop::collection::vec(text, 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            1 => edge(&["[", "[\"a\",]", "[1]", "null", "[null]", "\"a\"", "[\"a\" ]"]),
        ]
        .boxed(),
        _ => value().boxed(),
    }
}

const TYPES: &[&str] = &[
    "\"turn.started\"",
    "\"function.call\"",
    "\"function.output\"",
    "\"function.denied\"",
    "\"model.response\"",
    "\"model.error\"",
    "\"compact.occurred\"",
    "\"parse.error\"",
    "\"cache.warm\"",
    "\"turn.st\\u0061rted\"",
    "null",
    "5",
];

/// A JSON value text: each of the kinds the typed fields take, and every kind they refuse.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("0".to_owned()),
        Just("-0".to_owned()),
        Just("7".to_owned()),
        Just("-7".to_owned()),
        Just("01".to_owned()),
        Just("1.5".to_owned()),
        Just("1e3".to_owned()),
        Just("-1E-3".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("999999999999999999".to_owned()),
        Just("1.".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("null".to_owned()),
        Just("nul".to_owned()),
        Just("\"\"".to_owned()),
        Just("\"plain text\"".to_owned()),
        Just("\"é 中文 🎉\"".to_owned()),
        Just("\"line\\nbreak \\\"q\\\" \\\\ \\/\"".to_owned()),
        Just("\"\\u00e9\\uD83D\\uDE00\"".to_owned()),
        Just("\"\\x\"".to_owned()),
        Just("\"\\u12\"".to_owned()),
        Just("\"tab\there\"".to_owned()),
        Just("\"turn-0\"".to_owned()),
        Just("\"read_file\"".to_owned()),
        "[a-z0-9 ]{0,40}".prop_map(|s| format!("\"{s}\"")),
        (0u64..u64::MAX).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[a-z\\\\]{0,6}", inner), 0..4).prop_map(|v| {
                let body: Vec<String> = v.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", body.join(","))
            }),
            Just("[\"a\",\"b\"]".to_owned()),
            Just("[\"a\\\"\"]".to_owned()),
            Just("[1,]".to_owned()),
            Just("{\"a\" :1}".to_owned()),
        ]
    })
}

/// A line: an object of known and unknown keys (duplicates allowed), then maybe spoiled.
fn line() -> impl Strategy<Value = String> {
    let pair = (0..KEYS.len(), any::<u8>()).prop_flat_map(|(k, dice)| {
        let (key, kind) = KEYS[k];
        // One value in eight of any kind at all: mostly a type the key refuses.
        let v = if dice < 32 {
            value().boxed()
        } else {
            typed(kind)
        };
        v.prop_map(move |v| format!("\"{key}\":{v}"))
    });
    let ty = (0..TYPES.len()).prop_map(|t| format!("\"type\":{}", TYPES[t]));
    let object = (ty, prop::collection::vec(pair, 0..10), any::<bool>()).prop_map(
        |(ty, pairs, type_first)| {
            let mut all = pairs;
            if type_first {
                all.insert(0, ty);
            } else {
                all.push(ty);
            }
            format!("{{{}}}", all.join(","))
        },
    );
    let spoil = prop_oneof![
        6 => Just(0usize),
        1 => Just(1),
        1 => Just(2),
        1 => Just(3),
        1 => Just(4),
    ];
    (object, spoil, any::<prop::sample::Index>()).prop_map(|(text, spoil, at)| {
        let cut = at.index(text.len().max(1));
        let cut = (0..=cut)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        match spoil {
            0 => text,
            1 => text[..cut].to_owned(),
            2 => format!("{} {}", &text[..cut], &text[cut..]),
            3 => format!("{}\t", text),
            _ => format!("{},}}", &text[..text.len() - 1]),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn the_scanner_reads_a_line_as_serde_json_does(line in line()) {
        check(&line);
    }
}

#[test]
fn every_kind_of_event_the_recorder_writes_is_taken_by_the_scanner() {
    let t = || "turn-1 é".to_owned();
    let s = |v: &str| v.to_owned();
    let kinds = [
        EventKind::TurnStarted { turn_id: t() },
        EventKind::TurnAborted {
            turn_id: t(),
            reason: s("ctrl-c"),
        },
        EventKind::FunctionCall {
            turn_id: t(),
            tool: s("read_file"),
            args: serde_json::json!({"path": "src/ünï.rs", "n": [1, 2.5, {"deep": null}], "q": "a\"b"}),
            call_id: Some(s("c1")),
            parent_call_id: Some(s("p1")),
        },
        EventKind::FunctionOutput {
            turn_id: t(),
            tool: s("read_file"),
            output: s("line 1\nline \"2\"\t\\ 中文"),
            duration_ms: 12,
            failed: Some(false),
            call_id: Some(s("c1")),
        },
        EventKind::FunctionDenied {
            turn_id: t(),
            tool: s("bash"),
            args: serde_json::json!({"cmd": "rm -rf /"}),
            reason: s("no"),
            source: DenySource::parse("mode"),
        },
        EventKind::CompactOccurred {
            before_tokens: 9000,
            after_tokens: 100,
        },
        EventKind::SubagentStart {
            subagent_id: s("sa"),
            task: s("look"),
        },
        EventKind::SubagentStop {
            subagent_id: s("sa"),
            result: s("found"),
        },
        EventKind::SkillInvoked {
            skill_name: s("pdf"),
            implicit: true,
        },
        EventKind::HookTriggered {
            hook_name: s("h"),
            hook_event: s("PreToolUse"),
            blocked: false,
        },
        EventKind::HookBlocked {
            hook_name: s("h"),
            reason: s("policy"),
        },
        EventKind::ContextOverflow { before_tokens: 1 },
        EventKind::ParseError {
            turn_id: t(),
            parser: s("tool-args"),
            error: s("unexpected }"),
        },
        EventKind::ModelRequest {
            turn_id: t(),
            provider: s("anthropic"),
            model: s("claude"),
            message_count: 3,
            tool_count: 14,
            prompt_chars: 48_000,
            streamed: true,
        },
        EventKind::ModelFirstToken {
            turn_id: t(),
            ttft_ms: 800,
        },
        EventKind::ModelResponse {
            turn_id: t(),
            provider: s("anthropic"),
            model: s("claude"),
            duration_ms: 4200,
            ttft_ms: Some(800),
            input_tokens: Some(12),
            output_tokens: Some(3),
            cache_read_tokens: None,
            cache_write_tokens: Some(1),
            cache_write_1h_tokens: Some(1),
            reasoning_tokens: Some(7),
            tool_calls: vec![s("read_file"), s("bash")],
            text_chars: 1,
            thinking_chars: 0,
            echoed_model: Some(s("claude-x")),
        },
        EventKind::ModelError {
            turn_id: t(),
            provider: s("p"),
            model: s("m"),
            duration_ms: 5,
            kind: ModelErrorKind::parse("stall"),
            error: s("slow"),
        },
        EventKind::RedirectTriggered {
            turn_id: t(),
            reason: s("loop"),
            evidence_event_ids: vec![s("e1"), s("e2")],
            direction_count: 2,
            direction_chars: 40,
            latency_ms: -3,
            input_tokens: Some(5),
            output_tokens: None,
        },
        EventKind::RedirectSkipped {
            turn_id: t(),
            reason: s("cooldown"),
        },
    ];
    assert_eq!(kinds.len(), 19);
    for (i, kind) in kinds.into_iter().enumerate() {
        let ev = Event {
            id: format!("01M8RNZYBN51X2ZPS5R{i:02}"),
            seq: i as u64 + 1,
            aggregate_id: s("agg"),
            timestamp: 1_796_124_703_093,
            kind,
            extra: Default::default(),
        };
        let line = String::from_utf8(ev.to_line()).unwrap();
        assert!(check(line.trim_end()), "not taken by the scanner: {line}");
    }
}

/// Every line of every rollout log the original wrote (the fixtures) is taken by the scanner
/// and reads as `serde_json` reads it.
#[test]
fn every_line_the_original_wrote_is_taken_by_the_scanner() {
    let root = freecode_testkit::fixtures().join("home/.freecode/rollout/sessions");
    let mut lines = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let log = dir.unwrap().path().join("events.jsonl");
        if !Path::new(&log).is_file() {
            continue;
        }
        for line in std::fs::read_to_string(&log).unwrap().lines() {
            if line.trim().is_empty() {
                continue;
            }
            assert!(check(line), "{}: not taken: {line}", log.display());
            lines += 1;
        }
    }
    assert!(lines > 50, "only {lines} lines under {}", root.display());
}

/// The generated lines reach both paths: a good share is taken by the scanner (so the
/// property above compares something) and a good share is not.
#[test]
fn the_generated_lines_exercise_both_paths() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = line();
    let (mut taken, n) = (0, 2000);
    for _ in 0..n {
        let line = strategy.new_tree(&mut runner).unwrap().current();
        taken += usize::from(check(&line));
    }
    assert!(taken > n / 10 && taken < n * 9 / 10, "{taken} of {n} taken");
}

/// The reader checks for lone surrogates only on lines the scanner gave up on, so the scanner
/// gives up on every surrogate escape, paired or lone, wherever it is.
#[test]
fn the_scanner_gives_up_on_every_surrogate_escape() {
    for esc in ["\\ud83d", "\\uD83D\\uDE00", "\\udc00", "\\uDFFF"] {
        for line in [
            format!(r#"{{"type":"function.output","output":"a{esc}b"}}"#),
            format!(r#"{{"type":"function.call","args":{{"k":"{esc}"}}}}"#),
            format!(r#"{{"type":"turn.started","id":"{esc}"}}"#),
            format!(r#"{{"type":"turn.started","future":["{esc}"]}}"#),
            format!(r#"{{"type":"turn.started","turnId":"{esc}"}}"#),
        ] {
            assert!(ParsedLine::scan(&line).is_none(), "{line}");
        }
    }
    // Escapes of other code points are read.
    assert!(
        ParsedLine::scan(r#"{"type":"function.output","output":"\u00e9\ud7ff\ue000"}"#).is_some()
    );
}
