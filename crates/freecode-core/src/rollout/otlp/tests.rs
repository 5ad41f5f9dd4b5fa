//! Unit tests of `otlp`.

use std::collections::HashMap;

use super::*;
use crate::rollout::trace::TraceBuilder;
use crate::rollout::{DenySource, Event, RawEvent};

use freecode_testkit::fixtures;

fn read_json(rel: &str) -> Value {
    let p = fixtures().join(rel);
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"))).unwrap()
}

/// The trace of a fixture log, read line by line as the store's reader does.
fn fixture_trace(scenario: &str) -> Trace {
    let ids = read_json("scenario-ids.json");
    let id = ids[scenario].as_str().unwrap();
    let log = fixtures().join(format!("home/.freecode/rollout/sessions/{id}/events.jsonl"));
    let text = std::fs::read_to_string(&log).unwrap();
    let mut b = TraceBuilder::new(id);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let raw: RawEvent = serde_json::from_str(line).unwrap();
        b.apply(&Event::from_raw(raw).unwrap());
    }
    b.snapshot(None)
}

fn spans_mut(doc: &mut Value) -> &mut Vec<Value> {
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array_mut()
        .unwrap()
}

fn attrs_mut(span: &mut Value) -> &mut Vec<Value> {
    span["attributes"].as_array_mut().unwrap()
}

/// Removes attribute `key` from `span`, returning its value.
fn take_attr(span: &mut Value, key: &str) -> Option<Value> {
    let attrs = attrs_mut(span);
    let pos = attrs.iter().position(|a| a["key"] == key)?;
    Some(attrs.remove(pos)["value"].take())
}

fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

/// Checks every documented difference between our document and the original's for the
/// same trace, and rewrites ours into the original's form. Whatever is left must be equal.
fn undo_documented_differences(trace: &Trace, ours: &mut Value, theirs: &Value) {
    let their_spans = theirs["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let spans = spans_mut(ours);
    assert_eq!(spans.len(), their_spans.len(), "span count");
    assert!(
        trace.denied_spans.is_empty(),
        "the original's logs have no refusals"
    );

    // Root: the IDX name, and three gen_ai attributes appended after the original's.
    let root = &mut spans[0];
    assert_eq!(root["name"], ROOT_SPAN_NAME);
    assert_eq!(
        their_spans[0]["name"],
        format!("session {}", &trace.session_id[..8])
    );
    root["name"] = their_spans[0]["name"].clone();
    let added = attrs_mut(root).split_off(5);
    assert_eq!(
        added,
        vec![
            json!({"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}),
            json!({"key": "gen_ai.agent.name", "value": {"stringValue": "freecode"}}),
            json!({"key": "gen_ai.conversation.id", "value": {"stringValue": trace.session_id}}),
        ]
    );
    assert_eq!((trace.redirects, trace.redirects_skipped), (0, 0));

    // Chat spans.
    for (i, m) in trace.model_spans.iter().enumerate() {
        let span = &mut spans[1 + i];
        assert_eq!(
            take_attr(span, "gen_ai.provider.name"),
            Some(json!({"stringValue": m.provider}))
        );
        // The original's fold dropped cacheWriteTokens.
        assert_eq!(
            take_attr(span, "gen_ai.usage.cache_creation.input_tokens"),
            m.cache_write_tokens
                .map(|n| json!({"intValue": n.to_string()}))
        );
        assert_eq!(
            take_attr(span, "freecode.hung"),
            (m.status == SpanStatus::Hung).then(|| json!({"boolValue": true}))
        );
        if m.status == SpanStatus::InFlight {
            assert!(span.get("status").is_none(), "in flight: status unset");
            assert_eq!(
                their_spans[1 + i]["status"],
                json!({"code": 2, "message": "model error"})
            );
            span["status"] = their_spans[1 + i]["status"].clone();
        }
    }
    // Tool spans: none of the original's logs has a failed tool.
    assert!(trace.tool_spans.iter().all(|t| t.failed != Some(true)));
}

const SCENARIOS: [&str; 5] = [
    "S1_full",
    "S2_interrupted",
    "S5_deleted",
    "S7_compacted",
    "S8_odd_path",
];

#[test]
fn matches_the_originals_documents_modulo_documented_differences() {
    for scenario in SCENARIOS {
        let trace = fixture_trace(scenario);
        let theirs = read_json(&format!("expected/rollout/{scenario}/traceToOtlp.json"));
        let mut ours = trace_to_otlp(&trace);
        undo_documented_differences(&trace, &mut ours, &theirs);
        assert_eq!(ours, theirs, "{scenario}");
    }
}

#[test]
fn the_scenarios_exercise_each_difference() {
    let s1 = fixture_trace("S1_full");
    assert!(s1.model_spans.iter().any(|m| m.status == SpanStatus::Hung));
    assert!(
        s1.model_spans
            .iter()
            .any(|m| m.cache_write_tokens.is_some())
    );
    let s2 = fixture_trace("S2_interrupted");
    assert!(
        s2.model_spans
            .iter()
            .any(|m| m.status == SpanStatus::InFlight)
    );
    let doc = trace_to_otlp(&s1);
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let hung = spans
        .iter()
        .find(|s| attr(s, "freecode.status") == Some(&json!({"stringValue": "hung"})))
        .unwrap();
    assert_eq!(
        hung["status"],
        json!({"code": 2, "message": "request never terminated"})
    );
    assert_eq!(
        attr(hung, "freecode.hung"),
        Some(&json!({"boolValue": true}))
    );
}

#[test]
fn compact_body_equals_the_originals_request_body() {
    let trace = fixture_trace("S1_full");
    let theirs = read_json("expected/rollout/S1_full/traceToOtlp.json");
    let body = std::fs::read_to_string(
        fixtures().join("expected/rollout/S1_full/otlp-export-request-body.json"),
    )
    .unwrap();
    let mut ours = trace_to_otlp(&trace);
    undo_documented_differences(&trace, &mut ours, &theirs);
    assert_eq!(serde_json::to_string(&ours).unwrap(), body);
}

#[test]
fn ids_are_sha256_prefixes() {
    let t = trace_id("68d44408-94df-4f2f-ae2e-ffffdb68e297");
    assert_eq!(t, "f53a5df48433a0faa4d98bf072d6af89");
    assert_eq!(span_id(&t, "root"), "0835cb33679287d4");
    assert_eq!(span_id(&t, "model:0"), "eee2b7dc2607c57d");
}

#[test]
fn target_from_env_reproduces_the_original() {
    let fixture = read_json("expected/rollout/otlpTargetFromEnv.json");
    let env: HashMap<String, String> = fixture["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let target = target_from_env(None, |k| env.get(k).cloned()).unwrap();
    assert_eq!(target.url, fixture["target"]["endpoint"]);
    let expected: Vec<(String, String)> = fixture["target"]["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(target.headers, expected);
}

#[test]
fn target_precedence_and_absence() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let all = env(&[
        (ENV_TRACES_ENDPOINT, "http://traces"),
        (ENV_ENDPOINT, "http://generic"),
        (ENV_HEADERS, "a=1"),
    ]);
    // An explicit endpoint wins and takes no headers.
    assert_eq!(
        target_from_env(Some("http://cli"), all),
        Some(OtlpTarget {
            url: "http://cli".into(),
            headers: vec![]
        })
    );
    // An empty explicit endpoint means "from the environment".
    let t = target_from_env(Some(""), all).unwrap();
    assert_eq!(t.url, "http://traces");
    assert_eq!(t.headers, vec![("a".to_owned(), "1".to_owned())]);
    let t = target_from_env(
        None,
        env(&[(ENV_TRACES_ENDPOINT, ""), (ENV_ENDPOINT, "http://generic")]),
    )
    .unwrap();
    assert_eq!(t.url, "http://generic");
    assert!(t.headers.is_empty());
    assert_eq!(target_from_env(None, env(&[(ENV_HEADERS, "a=1")])), None);
    assert_eq!(target_from_env(None, |_| None), None);
}

#[test]
fn header_parsing_edges() {
    assert_eq!(
        parse_headers("a=1, b = x=y ,,c,=d, a=2,e="),
        vec![
            ("a".to_owned(), "2".to_owned()),
            ("b".to_owned(), "x=y".to_owned()),
            ("e".to_owned(), String::new()),
        ]
    );
}

#[test]
fn traces_url_follows_the_originals_requests() {
    let cases = read_json("expected/rollout/S1_full/exportTrace-requests.json");
    for case in cases.as_array().unwrap() {
        let endpoint = case["target"]["endpoint"].as_str().unwrap();
        let path = case["requests"][0]["url"].as_str().unwrap();
        assert_eq!(
            traces_url(endpoint),
            format!("http://127.0.0.1:PORT{path}"),
            "{endpoint}"
        );
    }
    assert_eq!(traces_url("http://h/v1/traces/"), "http://h/v1/traces/");
    assert_eq!(traces_url("http://h//"), "http://h//v1/traces");
}

#[test]
fn idx_spans_denied_failed_redirects() {
    let trace = Trace {
        session_id: "s".into(),
        started_at: 1_000,
        ended_at: 5_000,
        wall_ms: 4_000,
        model_spans: vec![],
        tool_spans: vec![ToolSpan {
            tool: "bash".into(),
            started_at: 2_000,
            duration_ms: 10,
            args: Some(json!({"command": "false"})),
            failed: Some(true),
        }],
        denied_spans: vec![DeniedSpan {
            tool: "edit".into(),
            at: 3_000,
            args: Some(json!({"filePath": "a.ts"})),
            source: DenySource::Mode,
            reason: "read-only".into(),
        }],
        model_ms: 0,
        tool_ms: 10,
        input_tokens: 0,
        output_tokens: 0,
        cache_read_tokens: 0,
        hung: false,
        in_flight: false,
        abandoned: false,
        redirects: 2,
        redirects_skipped: 1,
        time: Default::default(),
    };
    let doc = trace_to_otlp(&trace);
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let tid = trace_id("s");
    let root = span_id(&tid, "root");
    assert_eq!(
        attr(&spans[0], "freecode.redirects"),
        Some(&json!({"intValue": "2"}))
    );
    assert_eq!(
        attr(&spans[0], "freecode.redirects_skipped"),
        Some(&json!({"intValue": "1"}))
    );
    assert_eq!(
        spans[1]["status"],
        json!({"code": 2, "message": "tool failed"})
    );
    assert_eq!(
        spans[2],
        json!({
            "traceId": tid,
            "spanId": span_id(&tid, "denied:0"),
            "parentSpanId": root,
            "name": "execute_tool edit",
            "kind": 1,
            "startTimeUnixNano": "3000000000",
            "endTimeUnixNano": "3000000000",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "edit"}},
                {"key": "gen_ai.conversation.id", "value": {"stringValue": "s"}},
                {"key": "freecode.denied", "value": {"boolValue": true}},
                {"key": "freecode.deny_source", "value": {"stringValue": "mode"}},
            ],
            "status": {"code": 2, "message": "read-only"},
        })
    );
}

#[test]
fn empty_trace_is_a_lone_root() {
    let trace = TraceBuilder::new("x").snapshot(None);
    let doc = trace_to_otlp(&trace);
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0]["startTimeUnixNano"], "0");
    assert_eq!(spans[0]["status"], json!({"code": 1}));
}
