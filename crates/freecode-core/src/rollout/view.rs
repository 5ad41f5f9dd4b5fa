//! A borrowed view of one event line: what the folds read, without building the typed
//! [`Event`] or any `serde_json::Value` tree.
//!
//! [`EventView::parse`] deserializes a line's keys into `&str`s borrowed from the line (owned
//! only when the JSON string has escapes), numbers and booleans; tool `args` and `output` stay
//! raw JSON text ([`Json`], [`Text`]) that a fold decodes only if it keeps them; unknown keys are
//! skipped. It accepts exactly the lines [`RawEvent`](super::RawEvent) accepts when the line is
//! valid UTF-8 without lone surrogate escapes (the reader checks both first, and on any failure
//! takes the [`RawEvent`](super::RawEvent) path, so errors read as before): the same types per
//! known key, `null` as absent, the last of duplicate keys winning. [`EventView::of`] views a
//! typed [`Event`], so one fold serves both.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::event::{DenySource, Event, EventKind, ModelErrorKind, NotAnEvent};
use crate::record::Key;

/// A JSON string, borrowed from the line when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Tool arguments: raw JSON text from a line, or a value of a typed event.
#[derive(Debug, Clone, Copy)]
pub enum Json<'a> {
    /// The text as written.
    Raw(&'a RawValue),
    /// A typed event's value.
    Value(&'a Value),
    /// Absent (or `null`) on the line: `{}`, as [`Event::from_raw`] reads it.
    EmptyObject,
}

impl Json<'_> {
    /// The value (`{}` when unparseable, which a line that passed [`EventView::parse`] is not).
    pub fn to_value(&self) -> Value {
        match self {
            Self::Raw(r) => serde_json::from_str(r.get())
                .unwrap_or_else(|_| Value::Object(serde_json::Map::new())),
            Self::Value(v) => (*v).clone(),
            Self::EmptyObject => Value::Object(serde_json::Map::new()),
        }
    }
}

/// A string field kept as raw JSON text until a fold needs it (tool output).
#[derive(Debug, Clone, Copy)]
pub enum Text<'a> {
    /// The JSON string literal as written, quotes included.
    Raw(&'a RawValue),
    /// A typed event's string.
    Str(&'a str),
}

impl Text<'_> {
    /// The decoded string.
    pub fn to_owned_string(&self) -> String {
        match self {
            Self::Raw(r) => serde_json::from_str(r.get()).unwrap_or_default(),
            Self::Str(s) => (*s).to_owned(),
        }
    }
}

/// A raw value that must be a JSON string (checked, not decoded).
struct RawStr<'a>(&'a RawValue);

impl<'de> Deserialize<'de> for RawStr<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&RawValue>::deserialize(d)?;
        if raw.get().starts_with('"') {
            Ok(RawStr(raw))
        } else {
            Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Other("a non-string value"),
                &"a string",
            ))
        }
    }
}

/// A value checked to be a `T` and dropped: the keys no fold reads (no room in the view).
struct Checked<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(|_| Checked(std::marker::PhantomData))
    }
}

/// The 19 event types, without their fields: what a fold matches on (exhaustively).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum EventType {
    TurnStarted,
    TurnAborted,
    FunctionCall,
    FunctionOutput,
    FunctionDenied,
    CompactOccurred,
    SubagentStart,
    SubagentStop,
    SkillInvoked,
    HookTriggered,
    HookBlocked,
    ContextOverflow,
    ParseError,
    ModelRequest,
    ModelFirstToken,
    ModelResponse,
    ModelError,
    RedirectTriggered,
    RedirectSkipped,
}

impl EventType {
    /// The type of a `type` string; `None` for one this version does not know.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "turn.started" => Self::TurnStarted,
            "turn.aborted" => Self::TurnAborted,
            "function.call" => Self::FunctionCall,
            "function.output" => Self::FunctionOutput,
            "function.denied" => Self::FunctionDenied,
            "compact.occurred" => Self::CompactOccurred,
            "subagent.start" => Self::SubagentStart,
            "subagent.stop" => Self::SubagentStop,
            "skill.invoked" => Self::SkillInvoked,
            "hook.triggered" => Self::HookTriggered,
            "hook.blocked" => Self::HookBlocked,
            "context.overflow" => Self::ContextOverflow,
            "parse.error" => Self::ParseError,
            "model.request" => Self::ModelRequest,
            "model.first_token" => Self::ModelFirstToken,
            "model.response" => Self::ModelResponse,
            "model.error" => Self::ModelError,
            "redirect.triggered" => Self::RedirectTriggered,
            "redirect.skipped" => Self::RedirectSkipped,
            _ => return None,
        })
    }

    /// The type of a typed event.
    pub fn of(kind: &EventKind) -> Self {
        match kind {
            EventKind::TurnStarted { .. } => Self::TurnStarted,
            EventKind::TurnAborted { .. } => Self::TurnAborted,
            EventKind::FunctionCall { .. } => Self::FunctionCall,
            EventKind::FunctionOutput { .. } => Self::FunctionOutput,
            EventKind::FunctionDenied { .. } => Self::FunctionDenied,
            EventKind::CompactOccurred { .. } => Self::CompactOccurred,
            EventKind::SubagentStart { .. } => Self::SubagentStart,
            EventKind::SubagentStop { .. } => Self::SubagentStop,
            EventKind::SkillInvoked { .. } => Self::SkillInvoked,
            EventKind::HookTriggered { .. } => Self::HookTriggered,
            EventKind::HookBlocked { .. } => Self::HookBlocked,
            EventKind::ContextOverflow { .. } => Self::ContextOverflow,
            EventKind::ParseError { .. } => Self::ParseError,
            EventKind::ModelRequest { .. } => Self::ModelRequest,
            EventKind::ModelFirstToken { .. } => Self::ModelFirstToken,
            EventKind::ModelResponse { .. } => Self::ModelResponse,
            EventKind::ModelError { .. } => Self::ModelError,
            EventKind::RedirectTriggered { .. } => Self::RedirectTriggered,
            EventKind::RedirectSkipped { .. } => Self::RedirectSkipped,
        }
    }
}

macro_rules! view_fields {
    ($( $key:literal => $field:ident : $ty:ty ),+ $(,)?) => {
        /// The known keys of one line, each absent when missing or `null`. Keys no fold reads
        /// are still parsed with their types, so a line is refused exactly when a `RawEvent`
        /// is.
        #[derive(Default)]
        #[allow(dead_code)]
        struct Fields<'a> {
            $( $field: Option<$ty>, )+
        }

        impl<'a> Deserialize<'a> for Fields<'a> {
            fn deserialize<D: serde::Deserializer<'a>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'a> Visitor<'a> for V {
                    type Value = Fields<'a>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a RawEvent object")
                    }
                    fn visit_map<A: MapAccess<'a>>(self, mut a: A) -> Result<Fields<'a>, A::Error> {
                        let mut out = Fields::default();
                        while let Some(Key(key)) = a.next_key::<Key<'a>>()? {
                            match key.as_ref() {
                                $( $key => out.$field = a.next_value::<Option<$ty>>()?, )+
                                _ => { a.next_value::<IgnoredAny>()?; }
                            }
                        }
                        Ok(out)
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

view_fields! {
    "type" => kind: Str<'a>,
    "id" => id: Checked<Str<'a>>,
    "seq" => seq: Checked<u64>,
    "aggregateID" => aggregate_id: Checked<Str<'a>>,
    "timestamp" => timestamp: i64,
    "turnId" => turn_id: Str<'a>,
    "tool" => tool: Str<'a>,
    "args" => args: &'a RawValue,
    "output" => output: RawStr<'a>,
    "duration_ms" => duration_ms: i64,
    "beforeTokens" => before_tokens: u64,
    "afterTokens" => after_tokens: u64,
    "subagentId" => subagent_id: Checked<Str<'a>>,
    "task" => task: Checked<Str<'a>>,
    "result" => result: Checked<Str<'a>>,
    "skillName" => skill_name: Checked<Str<'a>>,
    "implicit" => implicit: Checked<bool>,
    "hookName" => hook_name: Checked<Str<'a>>,
    "hookEvent" => hook_event: Checked<Str<'a>>,
    "blocked" => blocked: Checked<bool>,
    "reason" => reason: Str<'a>,
    "parser" => parser: Str<'a>,
    "error" => error: Str<'a>,
    "provider" => provider: Str<'a>,
    "model" => model: Str<'a>,
    "messageCount" => message_count: u64,
    "toolCount" => tool_count: u64,
    "promptChars" => prompt_chars: u64,
    "streamed" => streamed: Checked<bool>,
    "ttft_ms" => ttft_ms: i64,
    "inputTokens" => input_tokens: u64,
    "outputTokens" => output_tokens: u64,
    "cacheReadTokens" => cache_read_tokens: u64,
    "cacheWriteTokens" => cache_write_tokens: u64,
    "reasoningTokens" => reasoning_tokens: Checked<u64>,
    "toolCalls" => tool_calls: Vec<Str<'a>>,
    "textChars" => text_chars: Checked<u64>,
    "thinkingChars" => thinking_chars: Checked<u64>,
    "echoedModel" => echoed_model: Checked<Str<'a>>,
    "kind" => error_kind: Str<'a>,
    "source" => source: Str<'a>,
    "callId" => call_id: Str<'a>,
    "parentCallId" => parent_call_id: Checked<Str<'a>>,
    "failed" => failed: bool,
    "evidenceEventIds" => evidence_event_ids: Checked<Vec<Str<'a>>>,
    "directionCount" => direction_count: Checked<u64>,
    "directionChars" => direction_chars: Checked<u64>,
    "latency_ms" => latency_ms: Checked<i64>,
}

/// One event as the folds read it: the type, the timestamp and the fields they use, borrowed.
/// Missing strings read as `""` and missing numbers as 0, as [`Event::from_raw`] types them.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub struct EventView<'a> {
    pub ty: EventType,
    pub timestamp: i64,
    pub turn_id: &'a str,
    pub tool: &'a str,
    pub args: Option<Json<'a>>,
    pub output: Option<Text<'a>>,
    pub duration_ms: i64,
    pub failed: Option<bool>,
    pub call_id: Option<&'a str>,
    pub before_tokens: u64,
    pub after_tokens: u64,
    pub reason: &'a str,
    pub source: &'a str,
    pub parser: &'a str,
    pub error: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub message_count: u64,
    pub tool_count: u64,
    pub prompt_chars: u64,
    pub ttft_ms: Option<i64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub tool_calls: ToolCalls<'a>,
    pub error_kind: &'a str,
}

/// `toolCalls`: parsed strings of a line, or a typed event's list.
#[derive(Debug, Clone)]
pub enum ToolCalls<'a> {
    /// From a line.
    Parsed(&'a [Str<'a>]),
    /// From a typed event.
    Typed(&'a [String]),
}

impl ToolCalls<'_> {
    /// Owned names.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Self::Parsed(v) => v.iter().map(|s| s.0.as_ref().to_owned()).collect(),
            Self::Typed(v) => v.to_vec(),
        }
    }
}

/// The parsed keys of one line, which an [`EventView`] borrows from.
pub struct ParsedLine<'a>(Fields<'a>);

impl<'a> ParsedLine<'a> {
    /// Parses one line (valid UTF-8 already); `Err` is serde_json's.
    pub fn parse(line: &'a str) -> serde_json::Result<Self> {
        serde_json::from_str(line).map(ParsedLine)
    }

    /// The event's view, or why the line is not an event of a known type.
    pub fn view(&self) -> Result<EventView<'_>, NotAnEvent> {
        let f = &self.0;
        let Some(kind) = f.kind.as_ref() else {
            return Err(NotAnEvent::MissingType);
        };
        let Some(ty) = EventType::parse(&kind.0) else {
            return Err(NotAnEvent::UnknownType(kind.0.clone().into_owned()));
        };
        fn st<'b>(v: &'b Option<Str<'_>>) -> &'b str {
            v.as_ref().map_or("", |s| s.0.as_ref())
        }
        let args = match ty {
            EventType::FunctionCall | EventType::FunctionDenied => {
                Some(f.args.map_or(Json::EmptyObject, Json::Raw))
            }
            _ => None,
        };
        Ok(EventView {
            ty,
            timestamp: f.timestamp.unwrap_or(0),
            turn_id: st(&f.turn_id),
            tool: st(&f.tool),
            args,
            output: (ty == EventType::FunctionOutput)
                .then(|| f.output.as_ref().map_or(Text::Str(""), |r| Text::Raw(r.0))),
            duration_ms: f.duration_ms.unwrap_or(0),
            failed: f.failed,
            call_id: f.call_id.as_ref().map(|s| s.0.as_ref()),
            before_tokens: f.before_tokens.unwrap_or(0),
            after_tokens: f.after_tokens.unwrap_or(0),
            reason: st(&f.reason),
            source: st(&f.source),
            parser: st(&f.parser),
            error: st(&f.error),
            provider: st(&f.provider),
            model: st(&f.model),
            message_count: f.message_count.unwrap_or(0),
            tool_count: f.tool_count.unwrap_or(0),
            prompt_chars: f.prompt_chars.unwrap_or(0),
            ttft_ms: f.ttft_ms,
            input_tokens: f.input_tokens,
            output_tokens: f.output_tokens,
            cache_read_tokens: f.cache_read_tokens,
            cache_write_tokens: f.cache_write_tokens,
            tool_calls: ToolCalls::Parsed(f.tool_calls.as_deref().unwrap_or(&[])),
            error_kind: st(&f.error_kind),
        })
    }
}

impl<'a> EventView<'a> {
    /// Views a typed event (every field the folds read, borrowed).
    pub fn of(ev: &'a Event) -> Self {
        let mut v = EventView {
            ty: EventType::of(&ev.kind),
            timestamp: ev.timestamp,
            turn_id: ev.kind.turn_id().unwrap_or(""),
            tool: "",
            args: None,
            output: None,
            duration_ms: 0,
            failed: None,
            call_id: None,
            before_tokens: 0,
            after_tokens: 0,
            reason: "",
            source: "",
            parser: "",
            error: "",
            provider: "",
            model: "",
            message_count: 0,
            tool_count: 0,
            prompt_chars: 0,
            ttft_ms: None,
            input_tokens: None,
            output_tokens: None,
            cache_read_tokens: None,
            cache_write_tokens: None,
            tool_calls: ToolCalls::Typed(&[]),
            error_kind: "",
        };
        match &ev.kind {
            EventKind::FunctionCall {
                tool,
                args,
                call_id,
                ..
            } => {
                v.tool = tool;
                v.args = Some(Json::Value(args));
                v.call_id = call_id.as_deref();
            }
            EventKind::FunctionOutput {
                tool,
                output,
                duration_ms,
                failed,
                call_id,
                ..
            } => {
                v.tool = tool;
                v.output = Some(Text::Str(output));
                v.duration_ms = *duration_ms;
                v.failed = *failed;
                v.call_id = call_id.as_deref();
            }
            EventKind::FunctionDenied {
                tool,
                args,
                reason,
                source,
                ..
            } => {
                v.tool = tool;
                v.args = Some(Json::Value(args));
                v.reason = reason;
                v.source = source.as_str();
            }
            EventKind::CompactOccurred {
                before_tokens,
                after_tokens,
            } => {
                v.before_tokens = *before_tokens;
                v.after_tokens = *after_tokens;
            }
            EventKind::ContextOverflow { before_tokens } => v.before_tokens = *before_tokens,
            EventKind::ParseError { parser, error, .. } => {
                v.parser = parser;
                v.error = error;
            }
            EventKind::TurnAborted { reason, .. }
            | EventKind::HookBlocked { reason, .. }
            | EventKind::RedirectSkipped { reason, .. } => v.reason = reason,
            EventKind::ModelRequest {
                provider,
                model,
                message_count,
                tool_count,
                prompt_chars,
                ..
            } => {
                v.provider = provider;
                v.model = model;
                v.message_count = *message_count;
                v.tool_count = *tool_count;
                v.prompt_chars = *prompt_chars;
            }
            EventKind::ModelFirstToken { ttft_ms, .. } => v.ttft_ms = Some(*ttft_ms),
            EventKind::ModelResponse {
                provider,
                model,
                duration_ms,
                ttft_ms,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                tool_calls,
                ..
            } => {
                v.provider = provider;
                v.model = model;
                v.duration_ms = *duration_ms;
                v.ttft_ms = *ttft_ms;
                v.input_tokens = *input_tokens;
                v.output_tokens = *output_tokens;
                v.cache_read_tokens = *cache_read_tokens;
                v.cache_write_tokens = *cache_write_tokens;
                v.tool_calls = ToolCalls::Typed(tool_calls);
            }
            EventKind::ModelError {
                provider,
                model,
                duration_ms,
                kind,
                error,
                ..
            } => {
                v.provider = provider;
                v.model = model;
                v.duration_ms = *duration_ms;
                v.error_kind = kind.as_str();
                v.error = error;
            }
            EventKind::RedirectTriggered {
                reason,
                input_tokens,
                output_tokens,
                ..
            } => {
                v.reason = reason;
                v.input_tokens = *input_tokens;
                v.output_tokens = *output_tokens;
            }
            EventKind::TurnStarted { .. }
            | EventKind::SubagentStart { .. }
            | EventKind::SubagentStop { .. }
            | EventKind::SkillInvoked { .. }
            | EventKind::HookTriggered { .. } => {}
        }
        v
    }

    /// The deny source, typed.
    pub fn deny_source(&self) -> DenySource {
        DenySource::parse(self.source)
    }

    /// The model error kind, typed.
    pub fn model_error_kind(&self) -> ModelErrorKind {
        ModelErrorKind::parse(self.error_kind)
    }
}
