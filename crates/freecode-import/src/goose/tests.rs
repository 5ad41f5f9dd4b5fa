//! Unit tests of `goose`.

use super::*;
use serde_json::json;

fn build(messages: &[Value]) -> (ImportedSession, Vec<String>) {
    let mut builder = Builder::new(ImportedSession::new(Agent::Goose, "s", "/x"));
    let mut issues = Vec::new();
    for message in messages {
        builder.message(message, &mut |text| issues.push(text));
    }
    (builder.finish(), issues)
}

fn request(id: &str, at: i64) -> Value {
    json!({"role": "assistant", "created": at, "content": [
        {"type": "toolRequest", "id": id, "toolCall": {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "ls"}}}}
    ]})
}

fn response(id: &str, at: i64, result: Value) -> Value {
    json!({"role": "user", "created": at, "content": [{"type": "toolResponse", "id": id, "toolResult": result}]})
}

fn outcomes(session: &ImportedSession) -> Vec<(ToolOutcome, Option<String>)> {
    session
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Response(r) => Some(&r.content),
            _ => None,
        })
        .flatten()
        .filter_map(|c| match c {
            Content::Tool(call) => Some((call.outcome.clone(), call.result.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn timestamps_in_every_form_goose_writes() {
    assert_eq!(timestamp_ms("2026-03-01 09:00:00"), Some(1772355600000));
    assert_eq!(timestamp_ms("2026-03-01T09:00:00Z"), Some(1772355600000));
    assert_eq!(timestamp_ms("1772355600"), Some(1772355600000));
    assert_eq!(timestamp_ms("1772355600000"), Some(1772355600000));
    assert_eq!(timestamp_ms("soon"), None);
}

#[test]
fn results_declined_failed_and_in_the_old_shape() {
    let declined =
        "The user has declined to run this tool. DO NOT attempt to call this tool again.";
    let (session, issues) = build(&[
        request("a", 1),
        response(
            "a",
            2,
            json!({"status": "success", "value": {"content": [{"type": "text", "text": "boom"}], "isError": true}}),
        ),
        request("b", 3),
        response(
            "b",
            4,
            json!({"status": "success", "value": [{"type": "text", "text": "old"}, {"type": "image", "data": "x", "mimeType": "image/png"}]}),
        ),
        request("c", 5),
        response("c", 6, json!({"status": "error", "error": declined})),
        response("zzz", 7, json!({"status": "success", "value": []})),
    ]);
    assert_eq!(
        outcomes(&session),
        vec![
            (ToolOutcome::Error, Some("boom".to_owned())),
            (ToolOutcome::Ok, Some("old\n[image image/png]".to_owned())),
            (
                ToolOutcome::Denied(Some(declined.to_owned())),
                Some(declined.to_owned())
            ),
        ]
    );
    assert_eq!(session.message_count(), 3);
    assert_eq!(
        issues,
        vec!["toolResponse zzz answers no call, skipped".to_owned()]
    );
}

#[test]
fn hidden_history_and_the_summary_after_it() {
    let hidden = |role: &str, text: &str, user: bool, agent: bool| {
        json!({"role": role, "created": 1, "content": [{"type": "text", "text": text}],
               "metadata": {"userVisible": user, "agentVisible": agent}})
    };
    let (session, issues) = build(&[
        hidden("user", "nobody sees this", false, false),
        hidden("user", "old prompt", true, false),
        hidden("assistant", "old answer", true, false),
        hidden("user", "summary of it all", false, true),
        hidden("user", "new prompt", true, true),
        json!({"role": "assistant", "created": 2, "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "systemNotification", "notificationType": "x", "msg": "y"},
            {"type": "brandNew"}, {"type": "brandNew"},
            {"type": "text", "text": "ok"}
        ]}),
    ]);
    let kinds: Vec<_> = session
        .items
        .iter()
        .map(|item| match item {
            Item::User(u) => format!("user:{}", u.parts[0].text_content().unwrap_or("")),
            Item::Response(r) => format!("response:{}", r.content.len()),
            Item::Compaction(c) => format!("compaction:{}", c.summary),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "user:old prompt",
            "response:1",
            "compaction:summary of it all",
            "user:new prompt",
            "response:1"
        ]
    );
    assert_eq!(
        issues,
        vec!["unknown content type \"brandNew\" skipped".to_owned()]
    );
}

#[test]
fn metadata_lines_are_told_from_messages() {
    assert!(is_metadata(
        &json!({"working_dir": "/w", "description": "d"})
    ));
    assert!(is_metadata(
        &json!({"description": "d", "message_count": 0})
    ));
    assert!(!is_metadata(
        &json!({"role": "user", "content": [], "description": "d"})
    ));
    assert!(!is_metadata(&json!({"tools": []})));
}
