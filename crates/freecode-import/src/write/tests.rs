//! Unit tests of `write`.

#![allow(clippy::unwrap_used)]
use super::*;
use crate::model::{Response, ToolCall, UserTurn};

fn session() -> ImportedSession {
    let mut s = ImportedSession::new(Agent::ClaudeCode, "src-1", "/x/src-1.jsonl");
    s.project_path = Some("/work/p".into());
    s.items.push(Item::User(UserTurn {
        id: Some("u1".into()),
        at_ms: Some(1_000),
        parts: vec![Part::text("fix the build\nplease")],
    }));
    s.items.push(Item::Response(Response {
        id: Some("m1".into()),
        model: Some("claude-x".into()),
        requested_ms: None,
        first_token_ms: Some(1_400),
        completed_ms: Some(2_000),
        content: vec![
            Content::Part(Part::text("on it")),
            Content::Tool(ToolCall {
                call_id: "t1".into(),
                name: "Bash".into(),
                args: serde_json::json!({"command": "make"}),
                result: Some("ok".into()),
                outcome: ToolOutcome::Ok,
                started_ms: Some(2_000),
                finished_ms: Some(5_500),
            }),
            Content::Tool(ToolCall {
                call_id: "t2".into(),
                name: "Edit".into(),
                args: serde_json::json!({}),
                result: Some("no".into()),
                outcome: ToolOutcome::Denied(Some("user-rejected".into())),
                started_ms: Some(2_000),
                finished_ms: Some(6_000),
            }),
        ],
        usage: Some(Usage::new(10, 5)),
    }));
    s
}

/// A response the source recorded no start for (Codex records none): after a prompt or a
/// tool's result it went out then; after a turn's end, or first in a session (an
/// excerpt, a resumed session), nothing says when, so the call has no duration: the
/// night between is never model time.
#[test]
fn a_model_call_is_never_the_gap_across_a_turns_end() {
    use crate::model::TurnEnd;
    let response = |done: i64| {
        Item::Response(Response {
            id: None,
            model: Some("gpt-x".into()),
            requested_ms: None,
            first_token_ms: None,
            completed_ms: Some(done),
            content: vec![Content::Part(Part::text("ok"))],
            usage: None,
        })
    };
    let hour = 3_600_000;
    let mut s = ImportedSession::new(Agent::Codex, "resumed", "/x/r.jsonl");
    s.project_path = Some("/work/p".into());
    s.created_ms = Some(0);
    s.items = vec![
        // First in the session, ten hours after it was created.
        response(10 * hour),
        Item::TurnEnd(TurnEnd {
            at_ms: Some(10 * hour + 5),
            duration_ms: None,
            aborted: None,
        }),
        // After the turn ended, overnight.
        response(22 * hour),
        // A prompt, answered in 4 s.
        Item::User(UserTurn {
            id: None,
            at_ms: Some(23 * hour),
            parts: vec![Part::text("and now?")],
        }),
        response(23 * hour + 4_000),
    ];
    let p = plan(&s, 30 * hour).unwrap();
    let calls: Vec<(i64, i64)> = p
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelResponse { duration_ms, .. } => Some((e.timestamp, *duration_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [(10 * hour, 0), (22 * hour, 0), (23 * hour + 4_000, 4_000)]
    );
    // Every request is where its response says, or after the prompt.
    let requests: Vec<i64> = p
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ModelRequest { .. }))
        .map(|e| e.timestamp)
        .collect();
    assert_eq!(requests, [10 * hour, 22 * hour, 23 * hour]);
}

#[test]
fn a_message_past_the_line_cap_is_cut_to_fit_and_says_so() {
    let mut s = session();
    let big = format!("début {}", "é\"\n".repeat(MAX_LINE_BYTES / 3));
    let Item::User(u) = &mut s.items[0] else {
        panic!()
    };
    u.parts = vec![Part::text(big.clone())];
    let p = plan(&s, 10_000).unwrap();
    let line = p.messages[0].to_line();
    assert!(line.len() <= MAX_LINE_BYTES + 1, "{}", line.len());
    let text = p.messages[0].parts[0].content.as_deref().unwrap();
    assert!(text.starts_with("début é\""), "{}", &text[..20]);
    assert!(
        text.contains("[cut by the import"),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(text.len() > MAX_LINE_BYTES / 2, "{}", text.len());
    // The rest of the session is as it was.
    assert_eq!(p.messages.len(), 2);
    assert_eq!(p.messages[1].parts[0].content.as_deref(), Some("on it"));
}

#[test]
fn ids_are_derived_and_stable() {
    let id = |a, s| session_id(a, s).unwrap();
    let a = id(Agent::ClaudeCode, "abc");
    assert_eq!(a, id(Agent::ClaudeCode, "abc"));
    assert_ne!(a, id(Agent::Codex, "abc"));
    assert_ne!(a, id(Agent::ClaudeCode, "abd"));
    assert_eq!(a.as_str().len(), 36);
    assert_eq!(&a.as_str()[14..15], "8");
}

#[test]
fn plan_maps_messages_meta_and_events() {
    let p = plan(&session(), 10_000).unwrap();
    assert_eq!(p.title, "fix the build");
    assert_eq!(p.messages.len(), 2);
    assert_eq!(p.messages[1].id, "m1");
    assert_eq!(p.messages[1].parts.len(), 3);
    assert_eq!(p.messages[1].usage.as_ref().unwrap().total(), 15);
    assert_eq!(p.tokens, Some(15));
    assert_eq!(p.turn_count, 1);
    let types: Vec<&str> = p.events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(
        types,
        [
            "turn.started",
            "model.request",
            "model.first_token",
            "model.response",
            "function.call",
            "function.output",
            "function.denied"
        ]
    );
    let EventKind::ModelResponse {
        duration_ms,
        ttft_ms,
        ..
    } = &p.events[3].kind
    else {
        panic!()
    };
    assert_eq!((*duration_ms, *ttft_ms), (1_000, Some(400)));
    let EventKind::FunctionOutput { duration_ms, .. } = &p.events[5].kind else {
        panic!()
    };
    assert_eq!(*duration_ms, 3_500);
    assert!(p.events.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(p.imported_from["agent"], "claude-code");
    assert_eq!(p.imported_from["projectPath"], "/work/p");
    // Deterministic: the same plan again, event ids included.
    assert_eq!(plan(&session(), 10_000).unwrap().events, p.events);
}

#[test]
fn a_session_without_a_project_is_refused_and_times_are_clamped() {
    let mut s = session();
    s.project_path = None;
    assert!(matches!(plan(&s, 0), Err(PlanError::NoProject { .. })));
    let p = plan(&session(), 1_500).unwrap();
    assert!(p.events.iter().all(|e| e.timestamp <= 1_500));
}
