//! Stored messages → the agent loop's in-memory history (SPEC §10, `loadHistory`).
//!
//! Tool parts get the derived id `tool-<messageId>-<partIndex>`, stable across reloads because
//! pruning state is keyed by it; arguments that are not a plain object become `{}`; `usage` and
//! `interrupted` are dropped.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::message::{PartType, Role, StoredMessage};

/// A message as the loop holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryMessage {
    /// The stored message id.
    pub id: String,
    /// `user` or `assistant`.
    pub role: Role,
    /// Stored timestamp, ms.
    pub timestamp: i64,
    /// The mapped parts.
    pub parts: Vec<HistoryPart>,
}

/// A part as the loop holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum HistoryPart {
    /// Text.
    Text {
        /// The text (`""` when absent).
        content: String,
    },
    /// A code block.
    Code {
        /// The language (`""` when absent).
        language: String,
        /// The code (`""` when absent).
        content: String,
    },
    /// A tool call with its result.
    Tool {
        /// The call.
        tool: HistoryToolCall,
        /// Its result; absent for legacy parts, which then dangle.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// An image.
    Image {
        /// Base64 data.
        data: String,
        /// Media type (`image/png` when absent).
        #[serde(rename = "mediaType")]
        media_type: String,
        /// Alternative text.
        #[serde(rename = "altText", skip_serializing_if = "Option::is_none")]
        alt_text: Option<String>,
    },
}

/// A tool call rebuilt from a stored tool part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryToolCall {
    /// `tool-<messageId>-<partIndex>`.
    pub id: String,
    /// The tool name (`""` when absent).
    pub tool: String,
    /// The arguments: a plain object, or `{}`.
    pub args: Value,
    /// Always `sequential` after a reload.
    pub execution: &'static str,
}

/// The derived tool-call id of part `index` of message `message_id`.
pub fn tool_call_id(message_id: &str, index: usize) -> String {
    format!("tool-{message_id}-{index}")
}

/// Maps one stored message.
pub fn to_history(msg: &StoredMessage) -> HistoryMessage {
    let parts = msg
        .parts
        .iter()
        .enumerate()
        .map(|(i, p)| match p.kind {
            PartType::Text => HistoryPart::Text {
                content: p.content.clone().unwrap_or_default(),
            },
            PartType::Code => HistoryPart::Code {
                language: p.language.clone().unwrap_or_default(),
                content: p.content.clone().unwrap_or_default(),
            },
            PartType::Image => HistoryPart::Image {
                data: p.data.clone().unwrap_or_default(),
                media_type: p
                    .media_type
                    .clone()
                    .unwrap_or_else(|| "image/png".to_owned()),
                alt_text: p.alt_text.clone(),
            },
            // The original maps `tool` and every unknown type to a tool part.
            PartType::Tool | PartType::Other(_) => {
                let tool = p.tool.as_ref();
                let args = match tool.and_then(|t| t.args.as_ref()) {
                    Some(Value::Object(o)) => Value::Object(o.clone()),
                    _ => Value::Object(Map::new()),
                };
                HistoryPart::Tool {
                    tool: HistoryToolCall {
                        id: tool_call_id(&msg.id, i),
                        tool: tool.and_then(|t| t.name.clone()).unwrap_or_default(),
                        args,
                        execution: "sequential",
                    },
                    result: p.result.clone(),
                }
            }
        })
        .collect();
    HistoryMessage {
        id: msg.id.clone(),
        role: msg.role.clone(),
        timestamp: msg.timestamp,
        parts,
    }
}

/// Maps a whole log.
pub fn load_history(messages: &[StoredMessage]) -> Vec<HistoryMessage> {
    messages.iter().map(to_history).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Part;
    use serde_json::json;

    #[test]
    fn tool_ids_carry_the_part_index_and_args_are_guarded() {
        let mut m = StoredMessage::new(
            "m1",
            Role::Assistant,
            vec![
                Part::text("x"),
                Part::tool("bash", json!("ls"), "out"),
                Part::tool("glob", json!([1]), ""),
            ],
            5,
        );
        m.parts[1].result = None;
        let h = to_history(&m);
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["parts"][1]["tool"]["id"], "tool-m1-1");
        assert_eq!(v["parts"][1]["tool"]["args"], json!({}));
        assert!(v["parts"][1].get("result").is_none());
        assert_eq!(v["parts"][2]["tool"]["id"], "tool-m1-2");
        assert_eq!(v["parts"][2]["tool"]["args"], json!({}));
    }
}
