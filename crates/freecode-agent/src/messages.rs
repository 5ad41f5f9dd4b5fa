//! Stored messages → the `messages` array of a chat-completions request (SPEC §10).
//!
//! The history goes through [`load_history`], so tool calls get the derived, reload-stable ids
//! `tool-<messageId>-<partIndex>` and malformed arguments become `{}`. One provider response is
//! stored as several assistant lines (a text line, then one line per tool call); they are sent
//! back as **one** assistant message with all its tool calls, followed by one `tool` message per
//! result — the shape the model produced, so a resumed session sends the same prompt as a live
//! one (§19.35). Assistant text that follows a tool line starts the next response.
//! A tool part without a result would dangle and is left out.

use freecode_core::StoredMessage;
use freecode_core::history::{HistoryMessage, HistoryPart, load_history};
use freecode_core::message::Role;
use serde_json::{Value, json};

/// A request's messages and its size proxy.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// The `messages` array.
    pub messages: Vec<Value>,
    /// Σ system text, text and code content, tool results and image data (SPEC §6.4).
    pub prompt_chars: u64,
}

fn chars(s: &str) -> u64 {
    s.chars().count() as u64
}

/// The request messages: `system` first, then the history.
pub fn build_prompt(system: &str, stored: &[StoredMessage]) -> Prompt {
    let history = load_history(stored);
    let mut messages = vec![json!({"role": "system", "content": system})];
    let mut prompt_chars = chars(system);
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        if m.role == Role::Assistant {
            let mut j = i;
            while j < history.len() && history[j].role == Role::Assistant {
                j += 1;
            }
            prompt_chars += push_assistant_run(&history[i..j], &mut messages);
            i = j;
        } else {
            prompt_chars += push_user(m, &mut messages);
            i += 1;
        }
    }
    Prompt {
        messages,
        prompt_chars,
    }
}

fn push_user(m: &HistoryMessage, out: &mut Vec<Value>) -> u64 {
    let mut size = 0;
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for p in &m.parts {
        match p {
            HistoryPart::Text { content } => {
                size += chars(content);
                texts.push(content.clone());
            }
            HistoryPart::Code { language, content } => {
                size += chars(content);
                texts.push(format!("```{language}\n{content}\n```"));
            }
            HistoryPart::Image {
                data, media_type, ..
            } => {
                size += chars(data);
                images.push(json!({"type": "image_url",
                    "image_url": {"url": format!("data:{media_type};base64,{data}")}}));
            }
            // A tool part in a user message (legacy data): its result is context.
            HistoryPart::Tool { result, .. } => {
                if let Some(r) = result {
                    size += chars(r);
                    texts.push(r.clone());
                }
            }
        }
    }
    let text = texts.join("\n\n");
    if images.is_empty() {
        out.push(json!({"role": "user", "content": text}));
    } else {
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
        content.extend(images);
        out.push(json!({"role": "user", "content": content}));
    }
    size
}

/// One provider response as stored: text first, then tool calls with their results.
#[derive(Default)]
struct Group {
    texts: Vec<String>,
    calls: Vec<Value>,
    results: Vec<Value>,
}

impl Group {
    fn flush(&mut self, out: &mut Vec<Value>) {
        let g = std::mem::take(self);
        if g.texts.is_empty() && g.calls.is_empty() {
            return;
        }
        let content = if g.texts.is_empty() {
            Value::Null
        } else {
            Value::String(g.texts.join("\n\n"))
        };
        let mut msg = json!({"role": "assistant", "content": content});
        if !g.calls.is_empty() {
            msg["tool_calls"] = Value::Array(g.calls);
        }
        out.push(msg);
        out.extend(g.results);
    }
}

/// A run of assistant lines, split into responses: text that follows a tool call starts the
/// next response.
fn push_assistant_run(run: &[HistoryMessage], out: &mut Vec<Value>) -> u64 {
    let mut size = 0;
    let mut group = Group::default();
    for m in run {
        for p in &m.parts {
            match p {
                HistoryPart::Text { content } if !content.is_empty() => {
                    if !group.calls.is_empty() {
                        group.flush(out);
                    }
                    size += chars(content);
                    group.texts.push(content.clone());
                }
                HistoryPart::Text { .. } | HistoryPart::Image { .. } => {}
                HistoryPart::Code { language, content } => {
                    if !group.calls.is_empty() {
                        group.flush(out);
                    }
                    size += chars(content);
                    group.texts.push(format!("```{language}\n{content}\n```"));
                }
                HistoryPart::Tool { tool, result } => {
                    let Some(result) = result else { continue };
                    size += chars(result);
                    group
                        .calls
                        .push(json!({"id": tool.id, "type": "function", "function": {
                        "name": tool.tool, "arguments": tool.args.to_string()}}));
                    group
                        .results
                        .push(json!({"role": "tool", "tool_call_id": tool.id, "content": result}));
                }
            }
        }
    }
    group.flush(out);
    size
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use freecode_core::Part;

    use super::*;

    #[test]
    fn each_response_becomes_one_message_followed_by_its_tool_results() {
        let stored = vec![
            StoredMessage::new("u1", Role::User, vec![Part::text("hi")], 1),
            StoredMessage::new("a1", Role::Assistant, vec![Part::text("Looking.")], 2),
            StoredMessage::new(
                "a2",
                Role::Assistant,
                vec![Part::tool("list_dir", json!({"path": "."}), "a\nb/")],
                3,
            ),
            StoredMessage::new(
                "a3",
                Role::Assistant,
                vec![Part::tool("read_file", json!("bad"), "x")],
                4,
            ),
            StoredMessage::new("a4", Role::Assistant, vec![Part::text("Done.")], 5),
        ];
        let p = build_prompt("sys", &stored);
        let v = Value::Array(p.messages);
        assert_eq!(v[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(v[1], json!({"role": "user", "content": "hi"}));
        assert_eq!(v[2]["content"], "Looking.");
        assert_eq!(v[2]["tool_calls"][0]["id"], "tool-a2-0");
        assert_eq!(
            v[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"path":"."}"#
        );
        assert_eq!(v[2]["tool_calls"][1]["function"]["arguments"], "{}");
        assert_eq!(
            v[3],
            json!({"role": "tool", "tool_call_id": "tool-a2-0", "content": "a\nb/"})
        );
        assert_eq!(v[4]["tool_call_id"], "tool-a3-0");
        // Text after the tool calls is the next response.
        assert_eq!(v[5], json!({"role": "assistant", "content": "Done."}));
        assert_eq!(v.as_array().unwrap().len(), 6);
        assert_eq!(
            p.prompt_chars,
            (3 + 2 + 8 + 4 + 1 + 5) as u64,
            "system, texts and results"
        );
    }
}
