//! Server-sent events of a streaming chat completion, parsed incrementally: bytes in (in
//! whatever pieces the network delivers), [`Delta`]s out, and a [`Completion`] accumulated from
//! them — text, tool calls reassembled from their fragments, usage, finish reason.

use serde_json::Value;

/// The longest SSE line accepted (a guard against a server that never sends a newline): the
/// one cap on a line ([`freecode_core::limits`]).
pub use freecode_core::limits::MAX_LINE_BYTES;

/// Splits a byte stream into SSE `data:` payloads.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

/// Why a stream could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamError(pub String);

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl SseParser {
    /// Feeds bytes; returns the `data:` payloads of the lines completed by them (comments,
    /// `event:`, `id:`, `retry:` and blank lines are skipped).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, StreamError> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(i) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buf[start..start + i];
            start += i + 1;
            if let Some(data) = data_of(line)? {
                out.push(data);
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(StreamError(format!(
                "malformed stream: a line longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(out)
    }

    /// The stream ended: the payload of an unterminated last line, if any.
    pub fn finish(&mut self) -> Result<Option<String>, StreamError> {
        let rest = std::mem::take(&mut self.buf);
        data_of(&rest)
    }
}

fn data_of(line: &[u8]) -> Result<Option<String>, StreamError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(data) = line.strip_prefix(b"data:") else {
        return Ok(None);
    };
    let data = data.strip_prefix(b" ").unwrap_or(data);
    String::from_utf8(data.to_vec())
        .map(Some)
        .map_err(|_| StreamError("malformed stream: a data line is not UTF-8".into()))
}

/// A tool call as the model streamed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamedToolCall {
    /// The provider's call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, a JSON text (possibly invalid).
    pub arguments: String,
}

/// Token counts from the stream's `usage` object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamUsage {
    /// `prompt_tokens`.
    pub input_tokens: Option<u64>,
    /// `completion_tokens`.
    pub output_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens`.
    pub cache_read_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: Option<u64>,
}

/// Something one payload added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Answer text.
    Text(String),
    /// Anything else (tool-call fragments, usage, reasoning, role).
    Other,
    /// `[DONE]`.
    Done,
}

/// A streamed completion, accumulated payload by payload.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    /// The answer text so far.
    pub text: String,
    /// Characters of reasoning text (never kept).
    pub thinking_chars: u64,
    /// Tool calls by stream index.
    pub tool_calls: Vec<StreamedToolCall>,
    /// Usage, from the last chunk.
    pub usage: Option<StreamUsage>,
    /// The finish reason, once given.
    pub finish_reason: Option<String>,
    /// The model the provider says it served.
    pub model: Option<String>,
    /// Whether `[DONE]` arrived.
    pub done: bool,
}

fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_u64()
}

impl Completion {
    /// Applies one `data:` payload.
    pub fn apply(&mut self, payload: &str) -> Result<Delta, StreamError> {
        let payload = payload.trim();
        if payload == "[DONE]" {
            self.done = true;
            return Ok(Delta::Done);
        }
        if payload.is_empty() {
            return Ok(Delta::Other);
        }
        let v: Value = serde_json::from_str(payload).map_err(|e| {
            let mut shown: String = payload.chars().take(120).collect();
            if shown.len() < payload.len() {
                shown.push('…');
            }
            StreamError(format!("malformed stream: {e} in data {shown:?}"))
        })?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), str::to_owned);
            return Err(StreamError(format!(
                "the provider reported an error: {msg}"
            )));
        }
        if let Some(m) = v.get("model").and_then(Value::as_str)
            && !m.is_empty()
        {
            self.model = Some(m.to_owned());
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(StreamUsage {
                input_tokens: u64_at(u, &["prompt_tokens"]),
                output_tokens: u64_at(u, &["completion_tokens"]),
                cache_read_tokens: u64_at(u, &["prompt_tokens_details", "cached_tokens"]),
                reasoning_tokens: u64_at(u, &["completion_tokens_details", "reasoning_tokens"]),
            });
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Delta::Other);
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(Delta::Other);
        };
        for key in ["reasoning_content", "reasoning"] {
            if let Some(r) = delta.get(key).and_then(Value::as_str) {
                self.thinking_chars += r.chars().count() as u64;
            }
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(pos, |i| i as usize);
                if index > 1024 {
                    return Err(StreamError(format!(
                        "malformed stream: tool call index {index}"
                    )));
                }
                if self.tool_calls.len() <= index {
                    self.tool_calls
                        .resize_with(index + 1, StreamedToolCall::default);
                }
                let slot = &mut self.tool_calls[index];
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    slot.id = id.to_owned();
                }
                if let Some(f) = call.get("function") {
                    if let Some(n) = f.get("name").and_then(Value::as_str) {
                        slot.name.push_str(n);
                    }
                    if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                        slot.arguments.push_str(a);
                    }
                }
            }
        }
        match delta.get("content").and_then(Value::as_str) {
            Some(t) if !t.is_empty() => {
                self.text.push_str(t);
                Ok(Delta::Text(t.to_owned()))
            }
            _ => Ok(Delta::Other),
        }
    }

    /// The tool calls that have a name (fragments of an unnamed slot are dropped).
    pub fn calls(&self) -> Vec<StreamedToolCall> {
        self.tool_calls
            .iter()
            .filter(|c| !c.name.is_empty())
            .cloned()
            .collect()
    }

    /// Whether the stream said it was complete (`[DONE]` or a finish reason).
    pub fn is_complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn lines_split_across_reads_are_reassembled() {
        let mut p = SseParser::default();
        assert!(p.feed(b"data: {\"a\"").unwrap().is_empty());
        assert_eq!(p.feed(b":1}\r\n\r\n: ping\n").unwrap(), ["{\"a\":1}"]);
        assert_eq!(
            p.feed(b"event: x\ndata:[DONE]").unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(p.finish().unwrap().as_deref(), Some("[DONE]"));
    }

    #[test]
    fn text_tool_fragments_and_usage_accumulate() {
        let mut c = Completion::default();
        let payloads = [
            r#"{"model":"m-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            "[DONE]",
        ];
        let mut text = String::new();
        for p in payloads {
            if let Delta::Text(t) = c.apply(p).unwrap() {
                text.push_str(&t);
            }
        }
        assert_eq!(text, "Hello");
        assert_eq!(c.text, "Hello");
        assert_eq!(
            c.calls(),
            [StreamedToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into()
            }]
        );
        let u = c.usage.clone().unwrap();
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (Some(12), Some(3), Some(4))
        );
        assert_eq!(c.model.as_deref(), Some("m-1"));
        assert!(c.done && c.is_complete());
    }

    #[test]
    fn garbage_and_error_objects_are_errors() {
        let mut c = Completion::default();
        assert!(c.apply("{not json").unwrap_err().0.contains("malformed"));
        let e = c
            .apply(r#"{"error":{"message":"rate limited"}}"#)
            .unwrap_err();
        assert!(e.0.contains("rate limited"), "{e}");
    }
}
