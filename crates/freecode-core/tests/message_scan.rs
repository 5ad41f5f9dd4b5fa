//! `StoredMessage::scan` (the load's fast path) against `serde_json` reading the same line:
//! whenever the scanner takes a line, `serde_json` accepts it and gives the same message (and
//! so the same line written back); and every line the original and our writer write is taken.

use freecode_core::{Part, Role, StoredMessage, Usage};
use proptest::prelude::*;

/// Checks one line; returns whether the scanner took it.
fn check(line: &str) -> bool {
    let Some(fast) = StoredMessage::scan(line) else {
        return false;
    };
    let full: StoredMessage = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("the scanner took a line serde_json refuses ({e}): {line}"));
    assert_eq!(fast, full, "{line}");
    assert_eq!(fast.to_line(), full.to_line());
    true
}

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        16 => "[a-z0-9 _.-]{0,30}".prop_map(|s| format!("\"{s}\"")),
        2 => Just("\"line 1\\nline \\\"2\\\"\\t\\\\ end\"".to_owned()),
        1 => Just("\"é 中文 🎉 \\u00e9\\u4e2d\\/\"".to_owned()),
        1 => Just("\"\\b\\f\\r\\u0000\"".to_owned()),
        1 => prop::sample::select(vec![
            "null", "\"\\uD83D\\uDE00\"", "\"\\ud83d\"", "\"bad \\x\"", "\"bad \\u12\"",
            "\"tab\there\"", "5", "true", "[]", "\"unterminated",
        ])
        .prop_map(str::to_owned),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<String> {
    prop_oneof![
        16 => (0u64..1 << 50).prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec![
            "null", "-1", "-0", "01", "1.5", "1e3", "18446744073709551615", "9223372036854775808",
            "1234567890123456789", "\"5\"", "true",
        ])
        .prop_map(str::to_owned),
    ]
    .boxed()
}

fn args() -> BoxedStrategy<String> {
    prop_oneof![
        Just("{\"path\":\"src/ünï.rs\"}".to_owned()),
        Just("{\"a\":[1,null,true,0.5,9007199254740993,-2e-3],\"b\":{\"c\":\"\\n\"}}".to_owned()),
        Just("{}".to_owned()),
        Just("null".to_owned()),
        Just("[1,2]".to_owned()),
        Just("\"text\"".to_owned()),
        Just("{\"z\":1,\"a\":2,\"z\":3}".to_owned()),
        Just("{\"a\":1,}".to_owned()),
        Just("{\"k\":\"\\udc00\"}".to_owned()),
    ]
    .boxed()
}

fn object(pairs: Vec<(String, String)>) -> String {
    let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", body.join(","))
}

fn tool() -> BoxedStrategy<String> {
    let pair = prop_oneof![
        4 => text().prop_map(|v| ("name".to_owned(), v)),
        4 => args().prop_map(|v| ("args".to_owned(), v)),
        1 => Just(("future".to_owned(), "1".to_owned())),
    ];
    prop_oneof![
        6 => prop::collection::vec(pair, 0..3).prop_map(object),
        1 => Just("null".to_owned()),
        1 => Just("\"read_file\"".to_owned()),
    ]
    .boxed()
}

fn part() -> BoxedStrategy<String> {
    let kind = prop::sample::select(vec![
        "\"text\"",
        "\"code\"",
        "\"tool\"",
        "\"image\"",
        "\"video\"",
        "\"te\\u0078t\"",
        "null",
    ]);
    let key = prop::sample::select(vec![
        "language",
        "content",
        "result",
        "data",
        "mediaType",
        "altText",
    ]);
    let pair = prop_oneof![
        16 => (key, text()).prop_map(|(k, v)| (k.to_owned(), v)),
        2 => tool().prop_map(|v| ("tool".to_owned(), v)),
        1 => Just(("later".to_owned(), "{\"k\":2}".to_owned())),
    ];
    (kind, prop::collection::vec(pair, 0..4), 0usize..5)
        .prop_map(|(kind, mut pairs, at)| {
            // Usually one `type`, anywhere; sometimes none.
            if at < 4 {
                let at = at.min(pairs.len());
                pairs.insert(at, ("type".to_owned(), kind.to_owned()));
            }
            object(pairs)
        })
        .boxed()
}

fn usage() -> BoxedStrategy<String> {
    let key = prop::sample::select(vec![
        "inputTokens",
        "outputTokens",
        "cacheReadInputTokens",
        "cacheCreationInputTokens",
        "cacheWriteInputTokens",
        "reasoningTokens",
        "unknownTokens",
    ]);
    prop_oneof![
        6 => prop::collection::vec((key, number()).prop_map(|(k, v)| (k.to_owned(), v)), 0..5)
            .prop_map(object),
        1 => Just("null".to_owned()),
        1 => Just("5".to_owned()),
    ]
    .boxed()
}

/// A message line: the keys in any order (sometimes one missing, repeated or unknown), then
/// maybe spoiled.
fn line() -> impl Strategy<Value = String> {
    let role = prop_oneof![
        8 => prop::sample::select(vec!["\"user\"", "\"assistant\"", "\"system\""]),
        1 => prop::sample::select(vec!["null", "1"]),
    ];
    let parts = prop_oneof![
        8 => prop::collection::vec(part(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
        1 => Just("null".to_owned()),
        1 => Just("[1]".to_owned()),
    ];
    let interrupted = prop::sample::select(vec!["true", "false", "null", "1"]);
    let extra = prop::sample::select(vec![
        ("future", "{\"k\":1}"),
        ("id", "\"again\""),
        ("usage", "null"),
        ("timestamp", "2"),
    ]);
    (
        (text(), role, parts, number(), usage(), interrupted),
        prop::collection::vec(any::<bool>(), 6),
        prop::option::weighted(0.2, extra),
        any::<prop::sample::Index>(),
        0u8..10,
    )
        .prop_map(
            |((id, role, parts, ts, usage, int), keep, extra, at, spoil)| {
                let all = [
                    ("id", id),
                    ("role", role.to_owned()),
                    ("parts", parts),
                    ("timestamp", ts),
                    ("usage", usage),
                    ("interrupted", int.to_owned()),
                ];
                // The required four kept nearly always, the optional two half the time.
                let mut pairs: Vec<(String, String)> = all
                    .into_iter()
                    .zip(keep)
                    .enumerate()
                    .filter(|(i, (_, k))| *k || *i < 4 && spoil != 0)
                    .map(|(_, ((k, v), _))| (k.to_owned(), v))
                    .collect();
                if let Some((k, v)) = extra {
                    let i = at.index(pairs.len() + 1);
                    pairs.insert(i, (k.to_owned(), v.to_owned()));
                }
                let text = object(pairs);
                match spoil {
                    1 => format!("{text} "),
                    2 => text.replacen(':', ": ", 1),
                    3 => {
                        let cut = at.index(text.len().max(1));
                        let cut = (0..=cut)
                            .rev()
                            .find(|&i| text.is_char_boundary(i))
                            .unwrap_or(0);
                        text[..cut].to_owned()
                    }
                    _ => text,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn the_scanner_reads_a_message_line_as_serde_json_does(line in line()) {
        check(&line);
    }
}

/// Both paths are exercised: a good share of generated lines is taken, and a good share not.
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

/// Every line our writer writes is taken (and reads back as written).
#[test]
fn every_line_the_store_writes_is_taken() {
    let mut usage = Usage::new(12_000, 180);
    usage.cache_read_input_tokens = Some(11_000);
    usage.reasoning_tokens = Some(0);
    let mut with_usage = StoredMessage::new(
        "msg-1",
        Role::Assistant,
        vec![
            Part::text("I'll read it.\nThen \"fix\" it\t\\ — 中文 🎉"),
            Part::code("rust", "fn main() {\n    println!(\"hi\");\n}"),
        ],
        1_796_125_895_059,
    );
    with_usage.usage = Some(Box::new(usage));
    let mut interrupted = StoredMessage::new("m2", Role::Assistant, vec![], 7);
    interrupted.interrupted = Some(true);
    let messages = [
        StoredMessage::new("msg-0", Role::User, vec![Part::text("Please look")], 1),
        with_usage,
        StoredMessage::new(
            "msg-2",
            Role::Assistant,
            vec![Part::tool(
                "read_file",
                serde_json::json!({"path": "src/ünï.rs", "range": [1, 40], "opts": {"x": null, "f": 0.5}}),
                "  1: line\n  2: \"quoted\"\u{1}",
            )],
            3,
        ),
        StoredMessage::new(
            "msg-3",
            Role::User,
            vec![Part::image(
                "iVBORw0KGgo=",
                "image/png",
                Some("a chart".into()),
            )],
            4,
        ),
        interrupted,
    ];
    for m in messages {
        let line = String::from_utf8(m.to_line()).unwrap();
        let line = line.trim_end();
        assert!(check(line), "not taken: {line}");
        assert_eq!(StoredMessage::scan(line), Some(m));
    }
}

/// Every line of every `messages.jsonl` the original wrote (the fixtures) is taken.
#[test]
fn every_line_the_original_wrote_is_taken() {
    let root = freecode_testkit::fixtures().join("home/.freecode/sessions");
    let mut lines = 0;
    for project in std::fs::read_dir(&root).unwrap() {
        for session in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let log = session.unwrap().path().join("messages.jsonl");
            let Ok(text) = std::fs::read_to_string(&log) else {
                continue;
            };
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                assert!(check(line), "{}: not taken: {line}", log.display());
                lines += 1;
            }
        }
    }
    assert!(lines >= 40, "only {lines} lines under {}", root.display());
}
