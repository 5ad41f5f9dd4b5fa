//! A session written back in another agent's own format, so that the agent resumes it
//! (`freecode session handoff`): the inverse of the importers, pure (the lines of the file;
//! the caller writes it).
//!
//! - **Claude Code** ([`claude_code`]): a transcript `<uuid>.jsonl` for
//!   `$HOME/.claude/projects/<project, every character but ASCII letters and digits as ->/`.
//!   Each message is a `user` or `assistant` record chained by `parentUuid`; an assistant's
//!   tool calls are `tool_use` blocks (ids `toolu_fc_…`) and their results a `tool_result` in the
//!   `user` record after it; a `custom-title` record carries the title.
//! - **Codex** ([`codex`]): a rollout `rollout-<local time>-<id>.jsonl` for
//!   `$CODEX_HOME/sessions/YYYY/MM/DD/`: `session_meta` (id, cwd), then `response_item`s: user
//!   and assistant `message`s, `function_call`s (ids `call_fc_…`) with their
//!   `function_call_output`s, and a `user_message` event for each prompt.
//! - **Gemini CLI** ([`gemini_cli`]): a chat `session-<time>-<id8>.jsonl` for
//!   `~/.gemini/tmp/<project slug>/chats/`: the metadata line (`sessionId`, `projectHash`: the
//!   project's SHA-256), then `user` records and `gemini` records whose `toolCalls` carry their
//!   results as `functionResponse`s, each followed by a `user` record of those responses, as
//!   0.61 writes them.
//!
//! What the target has no shape for is carried as text with a marker, never dropped: a code
//! part becomes a fenced block; an image goes to Claude Code as an image block and to Codex as
//! `[freecode: an image (image/png) not carried]`; a part of another type is named. A session
//! compacted here starts with its latest summary as the first user turn
//! (`[freecode: the conversation before this point, summarised]`). Timestamps later than `now`
//! (a clock ahead on the machine that wrote them) are written as `now`, so everything the agent
//! adds after the hand-back is later than every record handed back.

use freecode_core::message::{PartType, Role};
use freecode_core::{SessionMeta, StoredMessage};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What a hand-back writes: the file's name relative to the agent's home, and its lines.
#[derive(Debug, Clone)]
pub struct Written {
    /// Relative to the agent's home (`~/.claude`, `$CODEX_HOME`).
    pub rel_path: std::path::PathBuf,
    /// The file's bytes (JSON lines).
    pub bytes: Vec<u8>,
    /// Records written.
    pub records: usize,
}

/// The `version` of the Claude Code records a hand-back writes: a 2.1 release's shape, which
/// is what the records follow (Claude Code reads it as information only).
const CLAUDE_RECORD_VERSION: &str = "2.1.0";

/// The marker that opens a summary of what a compaction replaced.
pub const SUMMARY_MARK: &str = "[freecode: the conversation before this point, summarised]";

/// Claude Code's directory name for a project: every character but ASCII letters and digits
/// as `-`.
pub fn claude_project_dir(project: &str) -> String {
    project
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A UUID-shaped id derived from `seed` and `n` (version 4 bits set): the records' ids, the
/// same for the same hand-back.
pub fn derived_uuid(seed: &str, n: usize) -> String {
    let mut h = Sha256::new();
    h.update(seed.as_bytes());
    h.update(b"\0");
    h.update(n.to_le_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// `ms` as an RFC 3339 UTC time with milliseconds.
fn iso(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned())
}

/// A tool-call id the agents accept (`[A-Za-z0-9_-]`), from the prefix and the call's number.
fn call_id(prefix: &str, n: usize) -> String {
    format!("{prefix}{n:04}")
}

/// The text a part stands for where the target has no shape for it.
fn part_as_text(kind: &PartType, p: &freecode_core::message::Part) -> String {
    match kind {
        PartType::Code => format!(
            "```{}\n{}\n```",
            p.language.as_deref().unwrap_or(""),
            p.content.as_deref().unwrap_or("")
        ),
        PartType::Image => format!(
            "[freecode: an image ({}) not carried]",
            p.media_type.as_deref().unwrap_or("unknown type")
        ),
        PartType::Other(k) => format!("[freecode: a part of type {k} not carried]"),
        PartType::Text => p.content.clone().unwrap_or_default(),
        PartType::Tool => String::new(),
    }
}

/// Session `meta`'s `messages` (after `summary`, the latest compaction's, if any) as a Claude
/// Code transcript of session `uuid` in `project`.
pub fn claude_code(
    meta: &SessionMeta,
    messages: &[StoredMessage],
    summary: Option<&str>,
    project: &str,
    uuid: &str,
    now: i64,
) -> Written {
    let model = meta.model.clone().unwrap_or_else(|| "unknown".to_owned());
    let mut lines: Vec<Value> = Vec::new();
    let mut parent: Option<String> = None;
    let mut n = 0;
    let mut calls = 0;
    let mut push = |lines: &mut Vec<Value>, kind: &str, message: Value, ts: i64, extra: Value| {
        let id = derived_uuid(uuid, n);
        n += 1;
        let mut rec = json!({
            "parentUuid": parent,
            "isSidechain": false,
            "userType": "external",
            "cwd": project,
            "sessionId": uuid,
            "version": CLAUDE_RECORD_VERSION,
            "type": kind,
            "message": message,
            "uuid": id,
            "timestamp": iso(ts.min(now)),
        });
        if let (Some(r), Value::Object(x)) = (rec.as_object_mut(), extra) {
            r.extend(x);
        }
        parent = Some(id);
        lines.push(rec);
    };
    let first_ts = messages.first().map_or(now, |m| m.timestamp);
    if let Some(s) = summary {
        push(
            &mut lines,
            "user",
            json!({"role": "user", "content": format!("{SUMMARY_MARK}\n\n{s}")}),
            first_ts,
            json!({}),
        );
    }
    for m in messages {
        match &m.role {
            Role::User | Role::Other(_) => {
                let mut blocks = Vec::new();
                if let Role::Other(r) = &m.role {
                    blocks.push(json!({"type": "text", "text": format!("[freecode: a message of role {r}]")}));
                }
                for p in &m.parts {
                    match (&p.kind, p.data.as_deref(), p.media_type.as_deref()) {
                        (PartType::Image, Some(data), Some(mt)) if mt.starts_with("image/") => {
                            blocks.push(json!({"type": "image", "source": {"type": "base64", "media_type": mt, "data": data}}));
                        }
                        (kind, _, _) => {
                            let text = part_as_text(kind, p);
                            if !text.is_empty() {
                                blocks.push(json!({"type": "text", "text": text}));
                            }
                        }
                    }
                }
                let content = match blocks.as_slice() {
                    [one] if one["type"] == "text" => one["text"].clone(),
                    [] => continue,
                    _ => Value::Array(blocks),
                };
                push(
                    &mut lines,
                    "user",
                    json!({"role": "user", "content": content}),
                    m.timestamp,
                    json!({}),
                );
            }
            Role::Assistant => {
                let mut blocks = Vec::new();
                let mut results = Vec::new();
                for p in &m.parts {
                    if p.kind == PartType::Tool {
                        let id = call_id("toolu_fc_", calls);
                        calls += 1;
                        let tool = p.tool.as_deref();
                        blocks.push(json!({
                            "type": "tool_use", "id": id,
                            "name": tool.and_then(|t| t.name.clone()).unwrap_or_else(|| "tool".to_owned()),
                            "input": tool.and_then(|t| t.args.clone()).unwrap_or_else(|| json!({})),
                        }));
                        results.push(json!({
                            "type": "tool_result", "tool_use_id": id,
                            "content": p.result.clone().unwrap_or_default(),
                        }));
                    } else {
                        let text = part_as_text(&p.kind, p);
                        if !text.is_empty() {
                            blocks.push(json!({"type": "text", "text": text}));
                        }
                    }
                }
                if blocks.is_empty() {
                    continue;
                }
                let usage = m.usage.as_deref();
                let message = json!({
                    "id": format!("msg_fc_{}", derived_uuid(uuid, 1_000_000 + lines.len()).replace('-', "")),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": if results.is_empty() { "end_turn" } else { "tool_use" },
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": usage.and_then(|u| u.input_tokens).unwrap_or(0),
                        "output_tokens": usage.and_then(|u| u.output_tokens).unwrap_or(0),
                    },
                });
                push(&mut lines, "assistant", message, m.timestamp, json!({}));
                if !results.is_empty() {
                    push(
                        &mut lines,
                        "user",
                        json!({"role": "user", "content": results}),
                        m.timestamp,
                        json!({}),
                    );
                }
            }
        }
    }
    let mut records = lines.len();
    if !meta.title.is_empty() {
        lines.push(json!({"type": "custom-title", "customTitle": meta.title, "sessionId": uuid}));
        records += 1;
    }
    Written {
        rel_path: std::path::Path::new("projects")
            .join(claude_project_dir(project))
            .join(format!("{uuid}.jsonl")),
        bytes: to_lines(&lines),
        records,
    }
}

/// Session `meta`'s `messages` (after `summary`, if any) as a Codex rollout of session `id`
/// in `project`, its file named by `now` in the local time zone `tz` (as Codex names them).
pub fn codex(
    meta: &SessionMeta,
    messages: &[StoredMessage],
    summary: Option<&str>,
    project: &str,
    id: &str,
    now: i64,
    tz: &jiff::tz::TimeZone,
) -> Written {
    let mut lines: Vec<Value> = Vec::new();
    let first_ts = messages.first().map_or(now, |m| m.timestamp).min(now);
    let rec = |ts: i64, kind: &str, payload: Value| json!({"timestamp": iso(ts.min(now)), "type": kind, "payload": payload});
    lines.push(rec(
        first_ts,
        "session_meta",
        json!({
            "id": id, "timestamp": iso(first_ts), "cwd": project, "originator": "freecode",
            "cli_version": "0.0.0", "source": "exec",
        }),
    ));
    let mut calls = 0;
    let user = |lines: &mut Vec<Value>, text: String, ts: i64| {
        lines.push(rec(
            ts,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        ));
        lines.push(rec(
            ts,
            "event_msg",
            json!({"type": "user_message", "message": text, "images": []}),
        ));
    };
    if let Some(s) = summary {
        user(&mut lines, format!("{SUMMARY_MARK}\n\n{s}"), first_ts);
    }
    if let Some(model) = &meta.model {
        lines.push(rec(
            first_ts,
            "turn_context",
            json!({"cwd": project, "model": model, "approval_policy": "never", "sandbox_policy": {"type": "read-only"}, "summary": "auto"}),
        ));
    }
    for m in messages {
        match &m.role {
            Role::User | Role::Other(_) => {
                let mut text: Vec<String> = m
                    .parts
                    .iter()
                    .map(|p| part_as_text(&p.kind, p))
                    .filter(|t| !t.is_empty())
                    .collect();
                if let Role::Other(r) = &m.role {
                    text.insert(0, format!("[freecode: a message of role {r}]"));
                }
                if !text.is_empty() {
                    user(&mut lines, text.join("\n\n"), m.timestamp);
                }
            }
            Role::Assistant => {
                let mut text = Vec::new();
                let flush = |lines: &mut Vec<Value>, text: &mut Vec<String>| {
                    if !text.is_empty() {
                        lines.push(rec(
                            m.timestamp,
                            "response_item",
                            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text.join("\n\n")}]}),
                        ));
                        text.clear();
                    }
                };
                for p in &m.parts {
                    if p.kind == PartType::Tool {
                        flush(&mut lines, &mut text);
                        let call = call_id("call_fc_", calls);
                        calls += 1;
                        let tool = p.tool.as_deref();
                        let args = tool
                            .and_then(|t| t.args.clone())
                            .unwrap_or_else(|| json!({}));
                        lines.push(rec(
                            m.timestamp,
                            "response_item",
                            json!({
                                "type": "function_call",
                                "name": tool.and_then(|t| t.name.clone()).unwrap_or_else(|| "tool".to_owned()),
                                "arguments": args.to_string(), "call_id": call,
                            }),
                        ));
                        lines.push(rec(
                            m.timestamp,
                            "response_item",
                            json!({"type": "function_call_output", "call_id": call, "output": p.result.clone().unwrap_or_default()}),
                        ));
                    } else {
                        let t = part_as_text(&p.kind, p);
                        if !t.is_empty() {
                            text.push(t);
                        }
                    }
                }
                flush(&mut lines, &mut text);
            }
        }
    }
    let local = jiff::Timestamp::from_millisecond(now)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_zoned(tz.clone());
    let day = local.strftime("%Y/%m/%d").to_string();
    let stamp = local.strftime("%Y-%m-%dT%H-%M-%S").to_string();
    let records = lines.len();
    Written {
        rel_path: std::path::Path::new("sessions")
            .join(day)
            .join(format!("rollout-{stamp}-{id}.jsonl")),
        bytes: to_lines(&lines),
        records,
    }
}

/// Session `meta`'s `messages` (after `summary`, if any) as a Gemini CLI chat of session `id`
/// in `project`, filed under the project's `slug` (`projects.json` names it).
pub fn gemini_cli(
    meta: &SessionMeta,
    messages: &[StoredMessage],
    summary: Option<&str>,
    project: &str,
    slug: &str,
    id: &str,
    now: i64,
) -> Written {
    let first_ts = messages.first().map_or(now, |m| m.timestamp).min(now);
    let hash = hex::encode(Sha256::digest(project.as_bytes()));
    let mut lines = vec![json!({
        "sessionId": id, "projectHash": hash, "startTime": iso(first_ts),
        "lastUpdated": iso(messages.last().map_or(now, |m| m.timestamp).min(now)), "kind": "main",
    })];
    let mut n = 0;
    let mut next_id = || {
        n += 1;
        derived_uuid(id, n)
    };
    let model = meta.model.clone().unwrap_or_else(|| "unknown".to_owned());
    if let Some(s) = summary {
        lines.push(
            json!({"id": next_id(), "timestamp": iso(first_ts), "type": "user",
                          "content": [{"text": format!("{SUMMARY_MARK}\n\n{s}")}]}),
        );
    }
    let mut calls = 0;
    for m in messages {
        let ts = iso(m.timestamp.min(now));
        match &m.role {
            Role::User | Role::Other(_) => {
                let mut text: Vec<String> = m
                    .parts
                    .iter()
                    .map(|p| part_as_text(&p.kind, p))
                    .filter(|t| !t.is_empty())
                    .collect();
                if let Role::Other(r) = &m.role {
                    text.insert(0, format!("[freecode: a message of role {r}]"));
                }
                if !text.is_empty() {
                    lines.push(json!({"id": next_id(), "timestamp": ts, "type": "user",
                                      "content": [{"text": text.join("\n\n")}]}));
                }
            }
            Role::Assistant => {
                let mut text = Vec::new();
                let mut tool_calls = Vec::new();
                let mut responses = Vec::new();
                for p in &m.parts {
                    if p.kind == PartType::Tool {
                        let call = call_id("call_fc_", calls);
                        calls += 1;
                        let tool = p.tool.as_deref();
                        let name = tool
                            .and_then(|t| t.name.clone())
                            .unwrap_or_else(|| "tool".to_owned());
                        let response = json!({"functionResponse": {"id": call, "name": name,
                            "response": {"output": p.result.clone().unwrap_or_default()}}});
                        tool_calls.push(json!({
                            "id": call, "name": name,
                            "args": tool.and_then(|t| t.args.clone()).unwrap_or_else(|| json!({})),
                            "result": [response.clone()], "status": "success", "timestamp": ts,
                        }));
                        responses.push(response);
                    } else {
                        let t = part_as_text(&p.kind, p);
                        if !t.is_empty() {
                            text.push(t);
                        }
                    }
                }
                if text.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                let usage = m.usage.as_deref();
                let input = usage.and_then(|u| u.input_tokens).unwrap_or(0);
                let output = usage.and_then(|u| u.output_tokens).unwrap_or(0);
                let mut rec = json!({
                    "id": next_id(), "timestamp": ts, "type": "gemini", "content": text.join("\n\n"),
                    "thoughts": [], "model": model,
                    "tokens": {"input": input, "output": output, "cached": 0, "thoughts": 0, "tool": 0, "total": input + output},
                });
                if !tool_calls.is_empty() {
                    rec["toolCalls"] = Value::Array(tool_calls);
                }
                lines.push(rec);
                if !responses.is_empty() {
                    lines.push(json!({"id": next_id(), "timestamp": ts, "type": "user", "content": responses}));
                }
            }
        }
    }
    let stamp = jiff::Timestamp::from_millisecond(now)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y-%m-%dT%H-%M")
        .to_string();
    let short: String = id.chars().take(8).collect();
    let records = lines.len();
    Written {
        rel_path: std::path::Path::new("tmp")
            .join(slug)
            .join("chats")
            .join(format!("session-{stamp}-{short}.jsonl")),
        bytes: to_lines(&lines),
        records,
    }
}

fn to_lines(lines: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(l.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use freecode_core::message::Part;

    fn session() -> (SessionMeta, Vec<StoredMessage>) {
        let meta = SessionMeta::new(
            &freecode_core::SessionId::new("s1").unwrap(),
            "Fix the parser".into(),
            "/work/wörk".into(),
            "anthropic".into(),
            Some("claude-test".into()),
            1_000,
        );
        let mut answer = StoredMessage::new(
            "m2",
            Role::Assistant,
            vec![
                Part::text("Reading it."),
                Part::tool("Read", json!({"file_path": "/work/wörk/a.rs"}), "fn a() {}"),
            ],
            2_000,
        );
        answer.usage = Some(Box::new(freecode_core::message::Usage::new(120, 7)));
        let msgs = vec![
            StoredMessage::new(
                "m1",
                Role::User,
                vec![Part::text("fix it — s'il te plaît")],
                1_000,
            ),
            answer,
            StoredMessage::new("m3", Role::Assistant, vec![Part::text("Done.")], 9_999_999),
        ];
        (meta, msgs)
    }

    fn parse(w: &Written) -> Vec<Value> {
        String::from_utf8(w.bytes.clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn claude_code_records_chain_and_carry_calls_and_results() {
        let (meta, msgs) = session();
        let w = claude_code(&meta, &msgs, Some("we talked"), "/work/wörk", "u-1", 5_000);
        assert_eq!(
            w.rel_path,
            std::path::Path::new("projects/-work-w-rk/u-1.jsonl")
        );
        let recs = parse(&w);
        let kinds: Vec<&str> = recs.iter().map(|r| r["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "user",
                "user",
                "assistant",
                "user",
                "assistant",
                "custom-title"
            ]
        );
        assert!(
            recs[0]["message"]["content"]
                .as_str()
                .unwrap()
                .starts_with(SUMMARY_MARK)
        );
        for pair in recs[..5].windows(2) {
            assert_eq!(pair[1]["parentUuid"], pair[0]["uuid"]);
        }
        assert_eq!(recs[0]["parentUuid"], Value::Null);
        let call = &recs[2]["message"]["content"][1];
        assert_eq!(call["type"], "tool_use");
        assert_eq!(call["input"]["file_path"], "/work/wörk/a.rs");
        assert_eq!(recs[3]["message"]["content"][0]["tool_use_id"], call["id"]);
        assert_eq!(recs[3]["message"]["content"][0]["content"], "fn a() {}");
        assert_eq!(recs[2]["message"]["usage"]["input_tokens"], 120);
        assert_eq!(recs[2]["message"]["model"], "claude-test");
        // A time ahead of now is written as now.
        assert_eq!(recs[4]["timestamp"], "1970-01-01T00:00:05.000Z");
        assert_eq!(recs[5]["customTitle"], "Fix the parser");
    }

    #[test]
    fn codex_items_pair_calls_with_outputs() {
        let (meta, msgs) = session();
        let w = codex(
            &meta,
            &msgs,
            None,
            "/work/wörk",
            "id-1",
            5_000,
            &jiff::tz::TimeZone::UTC,
        );
        assert_eq!(
            w.rel_path,
            std::path::Path::new("sessions/1970/01/01/rollout-1970-01-01T00-00-05-id-1.jsonl")
        );
        let recs = parse(&w);
        assert_eq!(recs[0]["type"], "session_meta");
        assert_eq!(recs[0]["payload"]["cwd"], "/work/wörk");
        let items: Vec<String> = recs
            .iter()
            .filter(|r| r["type"] == "response_item")
            .map(|r| {
                format!(
                    "{}:{}",
                    r["payload"]["type"].as_str().unwrap(),
                    r["payload"]["role"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(
            items,
            [
                "message:user",
                "message:assistant",
                "function_call:",
                "function_call_output:",
                "message:assistant"
            ]
        );
        let call = recs
            .iter()
            .find(|r| r["payload"]["type"] == "function_call")
            .unwrap();
        let out = recs
            .iter()
            .find(|r| r["payload"]["type"] == "function_call_output")
            .unwrap();
        assert_eq!(call["payload"]["call_id"], out["payload"]["call_id"]);
        assert_eq!(out["payload"]["output"], "fn a() {}");
    }
}
