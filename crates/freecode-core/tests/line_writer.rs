//! The hand-written JSON of `freecode_core::jsonw` against `serde_json`: the recorder's lines,
//! the messages `session show --json` prints, the spans and turns of `trace --json` and
//! `replay --json`, and the OTLP document of `trace --otlp`.
//!
//! The recorder's hand-written lines ([`EventLine::write_to`], `freecode_core::jsonw`) against
//! `serde_json`: for every event kind, with generated strings (every control byte, quotes,
//! backslashes, multi-byte text, runs longer than a word), generated values (floats, big and
//! negative integers, nesting) and unknown keys, the bytes are the ones `serde_json::to_vec`
//! writes for the same line (which the readers' own tests hold to the original's).

use freecode_core::jsonw::{Emit, push_str, to_compact, to_pretty_at};
use freecode_core::message::{Part, PartType, Role, StoredMessage, ToolRef, Usage};
use freecode_core::rollout::otlp::{trace_to_otlp, write_otlp};
use freecode_core::rollout::replay::{ReplayCall, ReplayDenied, ReplayTurn};
use freecode_core::rollout::trace::{DeniedSpan, ModelSpan, SpanStatus, ToolSpan, Trace};
use freecode_core::rollout::{DenySource, Event, EventKind, ModelErrorKind};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Text that exercises the escaper: mostly plain, with every kind of special byte.
fn text() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        8 => prop::char::range('a', 'z'),
        2 => (0u8..0x20).prop_map(char::from),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('/'),
        1 => Just('\u{7f}'),
        1 => Just('é'),
        1 => Just('中'),
        1 => Just('🦀'),
        1 => any::<char>(),
    ];
    prop::collection::vec(ch, 0..70).prop_map(|v| v.into_iter().collect())
}

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![Just(0.1), Just(1e21), Just(-0.0), Just(2.5e-8), Just(100.0)]
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every one of the 19 kinds, with generated fields.
fn kind() -> impl Strategy<Value = EventKind> {
    let t = text;
    prop_oneof![
        t().prop_map(|turn_id| EventKind::TurnStarted { turn_id }),
        (t(), t()).prop_map(|(turn_id, reason)| EventKind::TurnAborted { turn_id, reason }),
        (t(), t(), json(), opt(t()), opt(t())).prop_map(
            |(turn_id, tool, args, call_id, parent_call_id)| EventKind::FunctionCall {
                turn_id,
                tool,
                args,
                call_id,
                parent_call_id,
            }
        ),
        (t(), t(), t(), any::<i64>(), opt(any::<bool>()), opt(t())).prop_map(
            |(turn_id, tool, output, duration_ms, failed, call_id)| EventKind::FunctionOutput {
                turn_id,
                tool,
                output,
                duration_ms,
                failed,
                call_id,
            }
        ),
        (t(), t(), json(), t(), t()).prop_map(|(turn_id, tool, args, reason, source)| {
            EventKind::FunctionDenied {
                turn_id,
                tool,
                args,
                reason,
                source: DenySource::parse(&source),
            }
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(before_tokens, after_tokens)| {
            EventKind::CompactOccurred {
                before_tokens,
                after_tokens,
            }
        }),
        (t(), t()).prop_map(|(subagent_id, task)| EventKind::SubagentStart { subagent_id, task }),
        (t(), t()).prop_map(|(subagent_id, result)| EventKind::SubagentStop {
            subagent_id,
            result
        }),
        (t(), any::<bool>()).prop_map(|(skill_name, implicit)| EventKind::SkillInvoked {
            skill_name,
            implicit
        }),
        (t(), t(), any::<bool>()).prop_map(|(hook_name, hook_event, blocked)| {
            EventKind::HookTriggered {
                hook_name,
                hook_event,
                blocked,
            }
        }),
        (t(), t()).prop_map(|(hook_name, reason)| EventKind::HookBlocked { hook_name, reason }),
        any::<u64>().prop_map(|before_tokens| EventKind::ContextOverflow { before_tokens }),
        (t(), t(), t()).prop_map(|(turn_id, parser, error)| EventKind::ParseError {
            turn_id,
            parser,
            error
        }),
        (
            t(),
            t(),
            t(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(
                |(turn_id, provider, model, message_count, tool_count, prompt_chars, streamed)| {
                    EventKind::ModelRequest {
                        turn_id,
                        provider,
                        model,
                        message_count,
                        tool_count,
                        prompt_chars,
                        streamed,
                    }
                }
            ),
        (t(), any::<i64>())
            .prop_map(|(turn_id, ttft_ms)| EventKind::ModelFirstToken { turn_id, ttft_ms }),
        (
            (t(), t(), t(), any::<i64>(), opt(any::<i64>())),
            (
                opt(any::<u64>()),
                opt(any::<u64>()),
                opt(any::<u64>()),
                opt(any::<u64>()),
                opt(any::<u64>())
            ),
            (
                prop::collection::vec(t(), 0..4),
                any::<u64>(),
                any::<u64>(),
                opt(t())
            ),
        )
            .prop_map(|(a, b, c)| EventKind::ModelResponse {
                turn_id: a.0,
                provider: a.1,
                model: a.2,
                duration_ms: a.3,
                ttft_ms: a.4,
                input_tokens: b.0,
                output_tokens: b.1,
                cache_read_tokens: b.2,
                cache_write_tokens: b.3,
                cache_write_1h_tokens: b.3.map(|w| w / 2),
                reasoning_tokens: b.4,
                tool_calls: c.0,
                text_chars: c.1,
                thinking_chars: c.2,
                echoed_model: c.3,
            }),
        (t(), t(), t(), any::<i64>(), t(), t()).prop_map(
            |(turn_id, provider, model, duration_ms, kind, error)| EventKind::ModelError {
                turn_id,
                provider,
                model,
                duration_ms,
                kind: ModelErrorKind::parse(&kind),
                error,
            }
        ),
        (
            (t(), t(), prop::collection::vec(t(), 0..4)),
            (
                any::<u64>(),
                any::<u64>(),
                any::<i64>(),
                opt(any::<u64>()),
                opt(any::<u64>())
            ),
        )
            .prop_map(|(a, b)| EventKind::RedirectTriggered {
                turn_id: a.0,
                reason: a.1,
                evidence_event_ids: a.2,
                direction_count: b.0,
                direction_chars: b.1,
                latency_ms: b.2,
                input_tokens: b.3,
                output_tokens: b.4,
            }),
        (t(), t()).prop_map(|(turn_id, reason)| EventKind::RedirectSkipped { turn_id, reason }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    (
        (text(), any::<u64>(), text(), any::<i64>()),
        kind(),
        prop::collection::vec(("[a-zA-Z_]{1,8}|\\PC{0,6}", json()), 0..3),
    )
        .prop_map(|((id, seq, aggregate_id, timestamp), kind, extra)| {
            let mut ev = Event {
                id,
                seq,
                aggregate_id,
                timestamp,
                kind,
                extra: Default::default(),
            };
            for (k, v) in extra {
                ev.extra.insert(k, v);
            }
            ev
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_written_line_is_the_line_serde_json_writes(ev in event()) {
        let mut ours = b"left alone ".to_vec();
        ev.as_line().write_to(&mut ours).unwrap();
        let mut theirs = b"left alone ".to_vec();
        theirs.extend(serde_json::to_vec(&ev.as_line()).unwrap());
        theirs.push(b'\n');
        prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        prop_assert_eq!(&ev.to_line()[..], &ours[b"left alone ".len()..]);
    }

    #[test]
    fn strings_and_values_are_written_as_serde_json_writes_them(s in text(), v in json()) {
        let mut out = Vec::new();
        push_str(&mut out, &s);
        prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&s).unwrap());
        let mut out = Vec::new();
        to_compact(&v, &mut out).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&v).unwrap());
    }
}

fn extra() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec(("[a-zA-Z_]{1,8}|\\PC{0,6}", json()), 0..2)
}

fn part() -> impl Strategy<Value = Part> {
    let s = || opt(text());
    (
        prop_oneof![
            Just("text"),
            Just("code"),
            Just("tool"),
            Just("image"),
            Just("thinking")
        ],
        (s(), s(), s(), s(), s(), s()),
        opt((opt(text()), opt(json()), extra())),
        extra(),
    )
        .prop_map(|(kind, f, tool, extra)| {
            let mut p = Part::text("");
            p.kind = PartType::parse(kind);
            (
                p.language,
                p.content,
                p.result,
                p.data,
                p.media_type,
                p.alt_text,
            ) = f;
            p.tool = tool.map(|(name, args, extra)| {
                let mut t = ToolRef {
                    name,
                    args,
                    extra: Default::default(),
                };
                for (k, v) in extra {
                    t.extra.insert(k, v);
                }
                Box::new(t)
            });
            for (k, v) in extra {
                p.extra.insert(k, v);
            }
            p
        })
}

fn message() -> impl Strategy<Value = StoredMessage> {
    let n = || opt(any::<u64>());
    (
        (
            text(),
            prop_oneof![Just("user"), Just("assistant"), Just("tool")],
        ),
        prop::collection::vec(part(), 0..4),
        (any::<i64>(), opt(any::<bool>())),
        opt(((n(), n(), n()), (n(), n(), n()), extra())),
        extra(),
    )
        .prop_map(
            |((id, role), parts, (timestamp, interrupted), usage, extra)| {
                let mut m = StoredMessage::new(id, Role::parse(role), parts, timestamp);
                m.interrupted = interrupted;
                m.usage = usage.map(|((a, b, c), (d, e, f), extra)| {
                    let mut u = Usage::new(0, 0);
                    (u.input_tokens, u.output_tokens, u.cache_read_input_tokens) = (a, b, c);
                    (
                        u.cache_creation_input_tokens,
                        u.cache_write_input_tokens,
                        u.reasoning_tokens,
                    ) = (d, e, f);
                    for (k, v) in extra {
                        u.extra.insert(k, v);
                    }
                    Box::new(u)
                });
                for (k, v) in extra {
                    m.extra.insert(k, v);
                }
                m
            },
        )
}

/// serde_json's pretty form of `v` as it sits `depth` levels deep: every line after the first
/// indented `depth` levels more.
fn pretty_at(v: &impl serde::Serialize, depth: usize) -> String {
    let pad = format!("\n{}", "  ".repeat(depth));
    // An error reads as text no writer writes, so the comparison fails on it.
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("error: {e}"));
    text.replace('\n', &pad)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// What `session show --json` and RPC `session.get` print for each message.
    #[test]
    fn a_message_is_written_as_serde_json_writes_it(m in message(), depth in 0usize..4) {
        let mut out = Vec::new();
        to_compact(&m, &mut out).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&m).unwrap());
        let mut out = Vec::new();
        to_pretty_at(&m, depth, &mut out).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), pretty_at(&m, depth));
    }

    #[test]
    fn a_value_is_laid_out_as_serde_json_lays_it_out(v in json(), depth in 0usize..6) {
        let mut out = Vec::new();
        to_pretty_at(&v, depth, &mut out).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), pretty_at(&v, depth));
    }
}

fn status() -> impl Strategy<Value = SpanStatus> {
    prop_oneof![
        Just(SpanStatus::Ok),
        Just(SpanStatus::Error),
        Just(SpanStatus::InFlight),
        Just(SpanStatus::Hung),
    ]
}

fn model_span() -> impl Strategy<Value = ModelSpan> {
    (
        (text(), text(), text(), any::<i64>(), status(), any::<i64>()),
        (any::<u64>(), any::<u64>(), any::<u64>()),
        prop::collection::vec(text(), 0..3),
        (opt(any::<i64>()), opt(any::<u64>()), opt(any::<u64>())),
        (
            opt(any::<u64>()),
            opt(any::<u64>()),
            opt(text()),
            opt(text()),
        ),
    )
        .prop_map(
            |(
                (turn_id, provider, model, started_at, status, duration_ms),
                (message_count, tool_count, prompt_chars),
                tool_calls,
                (ttft_ms, input_tokens, output_tokens),
                (cache_read_tokens, cache_write_tokens, error_kind, error),
            )| ModelSpan {
                turn_id,
                provider,
                model,
                started_at,
                status,
                duration_ms,
                message_count,
                tool_count,
                prompt_chars,
                tool_calls,
                ttft_ms,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                error_kind,
                error,
            },
        )
}

fn tool_span() -> impl Strategy<Value = ToolSpan> {
    (
        text(),
        any::<i64>(),
        any::<i64>(),
        opt(json()),
        opt(any::<bool>()),
    )
        .prop_map(|(tool, started_at, duration_ms, args, failed)| ToolSpan {
            tool,
            started_at,
            duration_ms,
            args,
            failed,
        })
}

fn denied_span() -> impl Strategy<Value = DeniedSpan> {
    (text(), any::<i64>(), opt(json()), text(), text()).prop_map(
        |(tool, at, args, source, reason)| DeniedSpan {
            tool,
            at,
            args,
            source: DenySource::parse(&source),
            reason,
        },
    )
}

fn replay_turn() -> impl Strategy<Value = ReplayTurn> {
    let call = (
        (text(), json(), opt(text())),
        (opt(any::<i64>()), opt(any::<bool>()), opt(text())),
    )
        .prop_map(
            |((tool, args, output), (duration_ms, failed, call_id))| ReplayCall {
                tool,
                args,
                output,
                duration_ms,
                failed,
                call_id,
            },
        );
    let denied =
        (text(), json(), text(), text()).prop_map(|(tool, args, source, reason)| ReplayDenied {
            tool,
            args,
            source: DenySource::parse(&source),
            reason,
        });
    (
        text(),
        any::<i64>(),
        prop::collection::vec(call, 0..3),
        prop::collection::vec(denied, 0..2),
    )
        .prop_map(|(turn_id, started_at, calls, denied)| ReplayTurn {
            turn_id,
            started_at,
            calls,
            denied,
        })
}

/// `to_compact` and `to_pretty_at` of `v` against serde_json's bytes.
fn same_as_serde<T: Emit + serde::Serialize>(v: &T, depth: usize) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let mut out = Vec::new();
    to_compact(v, &mut out).map_err(|e| fail(&e))?;
    let serde = serde_json::to_string(v).map_err(|e| fail(&e))?;
    prop_assert_eq!(String::from_utf8(out).map_err(|e| fail(&e))?, serde);
    let mut out = Vec::new();
    to_pretty_at(v, depth, &mut out).map_err(|e| fail(&e))?;
    prop_assert_eq!(
        String::from_utf8(out).map_err(|e| fail(&e))?,
        pretty_at(v, depth)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// What `trace --json` prints for each span, and `replay --json` for each turn (at depth 2,
    /// as elements of the document's arrays; other depths for good measure).
    #[test]
    fn spans_and_turns_are_written_as_serde_json_writes_them(
        m in model_span(),
        t in tool_span(),
        d in denied_span(),
        r in replay_turn(),
        depth in 0usize..4,
    ) {
        same_as_serde(&m, depth)?;
        same_as_serde(&t, depth)?;
        same_as_serde(&d, depth)?;
        same_as_serde(&r, depth)?;
    }
}

fn trace() -> impl Strategy<Value = Trace> {
    (
        (text(), any::<i64>(), any::<i64>(), any::<i64>()),
        prop::collection::vec(model_span(), 0..4),
        prop::collection::vec(tool_span(), 0..3),
        prop::collection::vec(denied_span(), 0..3),
        (any::<i64>(), any::<i64>(), any::<bool>(), any::<bool>()),
        (0u64..3, 0u64..3),
    )
        .prop_map(
            |(
                (session_id, started_at, wall_ms, ended_at),
                model_spans,
                tool_spans,
                denied_spans,
                (model_ms, tool_ms, hung, in_flight),
                (redirects, redirects_skipped),
            )| Trace {
                session_id,
                started_at,
                ended_at,
                wall_ms,
                model_spans,
                tool_spans,
                denied_spans,
                model_ms,
                tool_ms,
                input_tokens: 0,
                output_tokens: 0,
                cache_read_tokens: 0,
                hung,
                in_flight,
                abandoned: false,
                redirects,
                redirects_skipped,
                time: Default::default(),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `trace --otlp FILE` and `--otlp-endpoint` write the document a span at a time: the bytes
    /// are those of the document built as a tree.
    #[test]
    fn an_otlp_document_is_written_as_serde_json_writes_its_tree(t in trace()) {
        let mut out = Vec::new();
        write_otlp(&t, &mut out).unwrap();
        let tree = serde_json::to_vec(&trace_to_otlp(&t)).unwrap();
        prop_assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(tree).unwrap());
    }
}

#[test]
fn empty_containers_stay_on_their_line_at_every_depth() {
    let v = serde_json::json!({
        "a": [], "b": {}, "c": [{"d": [1, [2, []], {}], "e": null}], "f": "x\ny", "g": [[]]
    });
    for depth in [0, 1, 2, 5] {
        let mut out = Vec::new();
        to_pretty_at(&v, depth, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            pretty_at(&v, depth),
            "depth {depth}"
        );
    }
}
