//! One line of `messages.jsonl` (SPEC §4): a message with its parts and optional `usage`.
//!
//! Tool calls are stored as `assistant` messages with one `tool` part each. `usage` sits on at
//! most one line per provider response, so a plain sum over a session is its real cost.

use serde_json::Value;

use crate::record::{FieldValue, json_record};
use crate::scan::Scanner;
use crate::string_enum;

string_enum! {
    /// Who wrote a message. Tool calls are `assistant` messages.
    Role {
        /// The person (or a synthetic prompt such as an image caption).
        User => "user",
        /// The model.
        Assistant => "assistant",
    }
}
impl FieldValue for Role {}

string_enum! {
    /// What a part holds.
    PartType {
        /// Plain text in `content`.
        Text => "text",
        /// A code block: `language`, `content`.
        Code => "code",
        /// A tool call: `tool {name, args}` and its `result`.
        Tool => "tool",
        /// An image: base64 `data`, `mediaType`, `altText`.
        Image => "image",
    }
}
impl FieldValue for PartType {}

json_record! {
    /// The provider's token counts for the response that produced a message (SPEC §4.3).
    pub struct Usage {
        /// Input tokens, inclusive of cache reads and writes.
        "inputTokens" => pub input_tokens: Option<u64>,
        /// Output tokens.
        "outputTokens" => pub output_tokens: Option<u64>,
        /// Input tokens read from the provider's cache.
        "cacheReadInputTokens" => pub cache_read_input_tokens: Option<u64>,
        /// Input tokens written to the cache (legacy name).
        "cacheCreationInputTokens" => pub cache_creation_input_tokens: Option<u64>,
        /// Input tokens written to the cache.
        "cacheWriteInputTokens" => pub cache_write_input_tokens: Option<u64>,
        /// Of the cache writes, those written for an hour (Anthropic's one-hour cache, billed
        /// at its own rate); the rest were written for five minutes. freecode's own counter,
        /// beside SPEC §4.3's (a reader that does not know it ignores it).
        "cacheWrite1hInputTokens" => pub cache_write_1h_input_tokens: Option<u64>,
        /// Reasoning tokens, a subset of the output tokens.
        "reasoningTokens" => pub reasoning_tokens: Option<u64>,
    }
}
impl FieldValue for Usage {}

impl Usage {
    /// Usage with only input and output counts.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens: Some(input_tokens),
            output_tokens: Some(output_tokens),
            cache_read_input_tokens: None,
            cache_creation_input_tokens: None,
            cache_write_input_tokens: None,
            cache_write_1h_input_tokens: None,
            reasoning_tokens: None,
            extra: crate::Extra::new(),
        }
    }

    /// Input plus output tokens: what a response cost (cache reads are inside the input).
    pub fn total(&self) -> u64 {
        self.input_tokens.unwrap_or(0) + self.output_tokens.unwrap_or(0)
    }

    /// A copy with only the documented counters: what a writer persists (SPEC §19.34).
    pub fn whitelisted(&self) -> Self {
        Self {
            extra: crate::Extra::new(),
            ..self.clone()
        }
    }
}

json_record! {
    /// The call inside a `tool` part.
    pub struct ToolRef {
        /// Tool name.
        "name" => pub name: Option<String>,
        /// Arguments; a plain object in well-formed data, anything in legacy data.
        "args" => pub args: Option<Value>,
    }
}
impl FieldValue for ToolRef {}

json_record! {
    /// One part of a message. The key order of every known type matches the original's.
    pub struct Part {
        /// Which kind of part.
        "type" => pub kind: PartType,
        /// `code`: the language (absent in legacy data).
        "language" => pub language: Option<String>,
        /// `text`/`code`: the content.
        "content" => pub content: Option<String>,
        /// `tool`: the call.
        "tool" => pub tool: Option<Box<ToolRef>>,
        /// `tool`: the model-visible output, or the refusal or error text.
        "result" => pub result: Option<String>,
        /// `image`: base64 data without a `data:` prefix.
        "data" => pub data: Option<String>,
        /// `image`: e.g. `image/png`.
        "mediaType" => pub media_type: Option<String>,
        /// `image`: alternative text.
        "altText" => pub alt_text: Option<String>,
    }
}

impl Part {
    fn empty(kind: PartType) -> Self {
        Self {
            kind,
            language: None,
            content: None,
            tool: None,
            result: None,
            data: None,
            media_type: None,
            alt_text: None,
            extra: crate::Extra::new(),
        }
    }

    /// A text part.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: Some(content.into()),
            ..Self::empty(PartType::Text)
        }
    }

    /// A code part.
    pub fn code(language: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            language: Some(language.into()),
            content: Some(content.into()),
            ..Self::empty(PartType::Code)
        }
    }

    /// A tool part: the call and its result (the original always writes a result, maybe `""`).
    pub fn tool(name: impl Into<String>, args: Value, result: impl Into<String>) -> Self {
        Self {
            tool: Some(Box::new(ToolRef {
                name: Some(name.into()),
                args: Some(args),
                extra: crate::Extra::new(),
            })),
            result: Some(result.into()),
            ..Self::empty(PartType::Tool)
        }
    }

    /// An image part.
    pub fn image(
        data: impl Into<String>,
        media_type: impl Into<String>,
        alt_text: Option<String>,
    ) -> Self {
        Self {
            data: Some(data.into()),
            media_type: Some(media_type.into()),
            alt_text,
            ..Self::empty(PartType::Image)
        }
    }

    /// The text of a `text` or `code` part.
    pub fn text_content(&self) -> Option<&str> {
        match self.kind {
            PartType::Text | PartType::Code => self.content.as_deref(),
            _ => None,
        }
    }
}

json_record! {
    /// One line of `messages.jsonl`.
    pub struct StoredMessage {
        /// Message id (a UUID for loop-written messages).
        "id" => pub id: String,
        /// `user` or `assistant`.
        "role" => pub role: Role,
        /// The parts, possibly empty.
        "parts" => pub parts: Vec<Part>,
        /// When the message was persisted, ms.
        "timestamp" => pub timestamp: i64,
        /// Token counts of the response that produced it, on at most one line per response.
        /// Boxed: most lines have none, and inline it would be half of every message's size.
        "usage" => pub usage: Option<Box<Usage>>,
        /// Set (to `true`) on the message that was being written when the user hit Ctrl+C.
        "interrupted" => pub interrupted: Option<bool>,
    }
}

impl StoredMessage {
    /// A message with the given parts and no usage.
    pub fn new(id: impl Into<String>, role: Role, parts: Vec<Part>, timestamp: i64) -> Self {
        Self {
            id: id.into(),
            role,
            parts,
            timestamp,
            usage: None,
            interrupted: None,
            extra: crate::Extra::new(),
        }
    }

    /// The compact one-line JSON the log holds, with the trailing newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// Whether this message carries the interrupt mark.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted == Some(true)
    }

    /// All text of its text and code parts, joined by newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let Some(t) = p.text_content() {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(t);
            }
        }
        out
    }
}

impl StoredMessage {
    /// Reads one line the way its `Deserialize` does, in one pass (the crate's scanner), when
    /// the line is one the store writes: compact, known keys only. `None` when the scanner gives up
    /// (an unknown key, whitespace, a surrogate escape, ...): the line is then for `serde_json`,
    /// which gives the same message for every line this takes (`tests/message_scan.rs`).
    pub fn scan(line: &str) -> Option<Self> {
        let mut s = Scanner::new(line);
        let m = scan_message(&mut s)?;
        s.at_end().then_some(m)
    }
}

/// The members of an object: `member` reads each value (after its key and colon).
fn scan_object<'a>(
    s: &mut Scanner<'a>,
    mut member: impl FnMut(&'a str, &mut Scanner<'a>) -> Option<()>,
) -> Option<()> {
    s.eat(b'{')?;
    if s.peek()? == b'}' {
        s.next();
        return Some(());
    }
    loop {
        s.eat(b'"')?;
        let key = s.plain_key()?;
        s.eat(b':')?;
        member(key, s)?;
        match s.next()? {
            b',' => {}
            b'}' => return Some(()),
            _ => return None,
        }
    }
}

// Each reader below mirrors `json_record!`'s: the last of duplicate keys wins, `null` is absent
// for an optional field and refused for a required one (given up on, for serde_json to refuse).

fn scan_message(s: &mut Scanner<'_>) -> Option<StoredMessage> {
    let (mut id, mut role, mut parts, mut timestamp) = (None, None, None, None);
    let (mut usage, mut interrupted) = (None, None);
    scan_object(s, |key, s| {
        match key {
            "id" => id = Some(s.string()??),
            "role" => role = Some(Role::parse(&s.string()??)),
            "parts" => parts = Some(scan_parts(s)?),
            "timestamp" => timestamp = Some(s.i64()??),
            "usage" => usage = scan_usage(s)?,
            "interrupted" => interrupted = s.bool()?,
            _ => return None,
        }
        Some(())
    })?;
    Some(StoredMessage {
        id: id?,
        role: role?,
        parts: parts?,
        timestamp: timestamp?,
        usage,
        interrupted,
        extra: crate::Extra::new(),
    })
}

fn scan_parts(s: &mut Scanner<'_>) -> Option<Vec<Part>> {
    s.eat(b'[')?;
    // Most messages have one part: room for one, not the four a first push allots.
    let mut parts = Vec::with_capacity(1);
    if s.peek()? == b']' {
        s.next();
        return Some(parts);
    }
    loop {
        parts.push(scan_part(s)?);
        match s.next()? {
            b',' => {}
            b']' => return Some(parts),
            _ => return None,
        }
    }
}

fn scan_part(s: &mut Scanner<'_>) -> Option<Part> {
    let mut kind = None;
    let mut part = Part::empty(PartType::Text);
    scan_object(s, |key, s| {
        match key {
            "type" => kind = Some(PartType::parse(&s.string()??)),
            "language" => part.language = s.string()?,
            "content" => part.content = s.string()?,
            "tool" => part.tool = scan_tool(s)?,
            "result" => part.result = s.string()?,
            "data" => part.data = s.string()?,
            "mediaType" => part.media_type = s.string()?,
            "altText" => part.alt_text = s.string()?,
            _ => return None,
        }
        Some(())
    })?;
    part.kind = kind?;
    Some(part)
}

fn scan_tool(s: &mut Scanner<'_>) -> Option<Option<Box<ToolRef>>> {
    if s.peek()? == b'n' {
        s.value()?;
        return Some(None);
    }
    let mut tool = ToolRef {
        name: None,
        args: None,
        extra: crate::Extra::new(),
    };
    scan_object(s, |key, s| {
        match key {
            "name" => tool.name = s.string()?,
            "args" => {
                let raw = s.value()?;
                // Checked by the scanner, so this parse succeeds as the whole line's would.
                tool.args = match raw {
                    "null" => None,
                    _ => Some(serde_json::from_str(raw).ok()?),
                };
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(Some(Box::new(tool)))
}

fn scan_usage(s: &mut Scanner<'_>) -> Option<Option<Box<Usage>>> {
    if s.peek()? == b'n' {
        s.value()?;
        return Some(None);
    }
    let mut u = Usage {
        input_tokens: None,
        output_tokens: None,
        cache_read_input_tokens: None,
        cache_creation_input_tokens: None,
        cache_write_input_tokens: None,
        cache_write_1h_input_tokens: None,
        reasoning_tokens: None,
        extra: crate::Extra::new(),
    };
    scan_object(s, |key, s| {
        let field = match key {
            "inputTokens" => &mut u.input_tokens,
            "outputTokens" => &mut u.output_tokens,
            "cacheReadInputTokens" => &mut u.cache_read_input_tokens,
            "cacheCreationInputTokens" => &mut u.cache_creation_input_tokens,
            "cacheWriteInputTokens" => &mut u.cache_write_input_tokens,
            "cacheWrite1hInputTokens" => &mut u.cache_write_1h_input_tokens,
            "reasoningTokens" => &mut u.reasoning_tokens,
            _ => return None,
        };
        *field = s.u64()?;
        Some(())
    })?;
    Some(Some(Box::new(u)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) {
        let m: StoredMessage = serde_json::from_str(line).unwrap();
        assert_eq!(String::from_utf8(m.to_line()).unwrap(), format!("{line}\n"));
    }

    #[test]
    fn lines_round_trip_byte_for_byte() {
        round_trip(
            r#"{"id":"m","role":"user","parts":[{"type":"text","content":"hi"}],"timestamp":1}"#,
        );
        round_trip(
            r#"{"id":"m","role":"assistant","parts":[{"type":"text","content":"x"},{"type":"code","language":"tsx","content":"y"}],"timestamp":1,"usage":{"inputTokens":1,"outputTokens":2,"cacheReadInputTokens":0,"cacheCreationInputTokens":3},"interrupted":true}"#,
        );
        round_trip(
            r#"{"id":"m","role":"assistant","parts":[{"type":"tool","tool":{"name":"grep","args":{"a":[1,null,true,0.5,9007199254740991]}},"result":""}],"timestamp":1}"#,
        );
        round_trip(
            r#"{"id":"m","role":"assistant","parts":[],"timestamp":1,"usage":{"inputTokens":10,"outputTokens":2,"cacheCreationInputTokens":8,"cacheWrite1hInputTokens":5}}"#,
        );
        round_trip(
            r#"{"id":"m","role":"user","parts":[{"type":"image","data":"AA==","mediaType":"image/gif"},{"type":"video","url":"x"}],"timestamp":1,"future":{"k":1}}"#,
        );
        round_trip(r#"{"id":"m","role":"system","parts":[{"type":"text"}],"timestamp":1}"#);
    }

    #[test]
    fn null_reads_as_absent() {
        let m: StoredMessage = serde_json::from_str(
            r#"{"id":"m","role":"user","parts":[],"timestamp":1,"usage":null}"#,
        )
        .unwrap();
        assert!(m.usage.is_none());
    }
}
