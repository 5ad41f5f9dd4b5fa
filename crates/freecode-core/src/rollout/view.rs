//! A borrowed view of one event line: what the folds read, without building the typed
//! [`Event`] or any `serde_json::Value` tree.
//!
//! [`ParsedLine::parse`] reads a line's keys into `&str`s borrowed from the line, numbers and
//! booleans; tool `args` and `output` stay raw JSON text ([`Json`], [`Text`]) that a fold decodes
//! only if it keeps them; unknown keys are skipped. A line the recorder wrote is read by the
//! scanner (`crate::scan`) in one pass; any other line by `serde_json` (strings with escapes
//! owned), with the same view either way (`tests/view_scan.rs`). It accepts exactly the lines [`RawEvent`](super::RawEvent) accepts when the line is
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
use crate::scan::Scanner;

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
    /// The JSON text as written (checked to be one value).
    Raw(&'a str),
    /// A typed event's value.
    Value(&'a Value),
    /// Absent (or `null`) on the line: `{}`, as [`Event::from_raw`] reads it.
    EmptyObject,
}

impl Json<'_> {
    /// The value (`{}` when unparseable, which a line that passed [`ParsedLine::parse`] is not).
    pub fn to_value(&self) -> Value {
        match self {
            Self::Raw(r) => {
                serde_json::from_str(r).unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
            }
            Self::Value(v) => (*v).clone(),
            Self::EmptyObject => Value::Object(serde_json::Map::new()),
        }
    }
}

/// A string field kept as raw JSON text until a fold needs it (tool output).
#[derive(Debug, Clone, Copy)]
pub enum Text<'a> {
    /// The JSON string literal as written, quotes included (checked).
    Raw(&'a str),
    /// A typed event's string.
    Str(&'a str),
}

impl Text<'_> {
    /// The decoded string.
    pub fn to_owned_string(&self) -> String {
        match self {
            Self::Raw(r) => match r.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                // No escape: the text is the string.
                Some(body) if !body.contains('\\') => body.to_owned(),
                _ => serde_json::from_str(r).unwrap_or_default(),
            },
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

        /// The same keys as the scanner reads them ([`crate::scan`]): borrowed text, and `()`
        /// for the keys only checked.
        #[derive(Default)]
        #[allow(dead_code)]
        struct FastFields<'a> {
            $( $field: Option<<$ty as Fast<'a>>::Out>, )+
        }

        /// Scans a line as [`Fields`] would deserialize it, or gives up (`None`).
        #[inline]
        fn scan_fields<'a>(line: &'a str) -> Option<FastFields<'a>> {
            let mut s = Scanner::new(line);
            let mut out = FastFields::default();
            s.eat(b'{')?;
            // The recorder writes these five keys first, in this order: read them without
            // looking them up. Any other line reads on from where this stops.
            let mut after_value = false;
            'spec: {
                if !s.lit(b"\"type\":") { break 'spec; }
                out.kind = <Str<'a> as Fast<'a>>::scan(&mut s)?;
                after_value = true;
                if !s.lit(b",\"id\":") { break 'spec; }
                out.id = <Checked<Str<'a>> as Fast<'a>>::scan(&mut s)?;
                if !s.lit(b",\"seq\":") { break 'spec; }
                out.seq = <Checked<u64> as Fast<'a>>::scan(&mut s)?;
                if !s.lit(b",\"aggregateID\":") { break 'spec; }
                out.aggregate_id = <Checked<Str<'a>> as Fast<'a>>::scan(&mut s)?;
                if !s.lit(b",\"timestamp\":") { break 'spec; }
                out.timestamp = <i64 as Fast<'a>>::scan(&mut s)?;
            }
            if !after_value && s.peek()? == b'}' {
                s.next();
                return s.at_end().then_some(out);
            }
            loop {
                if after_value {
                    match s.next()? {
                        b',' => {}
                        b'}' => return s.at_end().then_some(out),
                        _ => return None,
                    }
                }
                after_value = true;
                s.eat(b'"')?;
                match s.plain_key()? {
                    $( $key => {
                        s.eat(b':')?;
                        out.$field = <$ty as Fast<'a>>::scan(&mut s)?;
                    } )+
                    _ => {
                        s.eat(b':')?;
                        s.value()?;
                    }
                }
            }
        }
    };
}

/// How the scanner reads a field of [`Fields`]'s type: the same values, or gives up.
trait Fast<'a>: Sized {
    /// What the view keeps of it.
    type Out;
    /// The value (`Some(None)` for `null`), or `None` to give up.
    fn scan(s: &mut Scanner<'a>) -> Option<Option<Self::Out>>;
}

impl<'a> Fast<'a> for Str<'a> {
    type Out = &'a str;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<&'a str>> {
        s.plain_str()
    }
}

impl<'a> Fast<'a> for i64 {
    type Out = i64;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<i64>> {
        s.i64()
    }
}

impl<'a> Fast<'a> for u64 {
    type Out = u64;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<u64>> {
        s.u64()
    }
}

impl<'a> Fast<'a> for bool {
    type Out = bool;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<bool>> {
        s.bool()
    }
}

impl<'a> Fast<'a> for &'a RawValue {
    type Out = &'a str;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<&'a str>> {
        // `Option<&RawValue>` reads `null` as absent.
        let v = s.value()?;
        Some((v != "null").then_some(v))
    }
}

impl<'a> Fast<'a> for RawStr<'a> {
    type Out = &'a str;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<&'a str>> {
        s.raw_str()
    }
}

impl<'a> Fast<'a> for Vec<Str<'a>> {
    type Out = &'a str;
    fn scan(s: &mut Scanner<'a>) -> Option<Option<&'a str>> {
        s.plain_str_array()
    }
}

impl<'a> Fast<'a> for Checked<Str<'a>> {
    type Out = ();
    fn scan(s: &mut Scanner<'a>) -> Option<Option<()>> {
        s.raw_str().map(|v| v.map(drop))
    }
}

impl<'a> Fast<'a> for Checked<Vec<Str<'a>>> {
    type Out = ();
    fn scan(s: &mut Scanner<'a>) -> Option<Option<()>> {
        s.str_array().map(|()| None)
    }
}

macro_rules! fast_checked {
    ($($t:ty),+) => {$(
        impl<'a> Fast<'a> for Checked<$t> {
            type Out = ();
            fn scan(s: &mut Scanner<'a>) -> Option<Option<()>> {
                <$t as Fast<'a>>::scan(s).map(|v| v.map(drop))
            }
        }
    )+};
}

fast_checked!(u64, i64, bool);

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
    /// From a line read by the scanner: the text between the brackets of an array of strings
    /// without escapes (`"a","b"`, or empty).
    Joined(&'a str),
    /// From a typed event.
    Typed(&'a [String]),
}

impl ToolCalls<'_> {
    /// Owned names.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Self::Parsed(v) => v.iter().map(|s| s.0.as_ref().to_owned()).collect(),
            Self::Joined("") => Vec::new(),
            Self::Joined(text) => text
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .unwrap_or(text)
                .split("\",\"")
                .map(str::to_owned)
                .collect(),
            Self::Typed(v) => v.to_vec(),
        }
    }
}

/// The parsed keys of one line, which an [`EventView`] borrows from.
pub struct ParsedLine<'a>(Parsed<'a>);

enum Parsed<'a> {
    /// Read by the scanner: every string borrowed.
    Fast(FastFields<'a>),
    /// Read by `serde_json` (a line the scanner gave up on).
    Full(Fields<'a>),
}

impl<'a> ParsedLine<'a> {
    /// Parses one line (valid UTF-8 already); `Err` is serde_json's. The scanner reads it when
    /// it can (the crate's one-pass scanner), `serde_json` otherwise: the same view either way.
    pub fn parse(line: &'a str) -> serde_json::Result<Self> {
        match Self::scan(line) {
            Some(p) => Ok(p),
            None => Self::parse_full(line),
        }
    }

    /// The scanner alone: `None` when it gives up. It gives up on any surrogate escape, so a
    /// line it takes has no lone surrogate (which the reader must check before
    /// [`ParsedLine::parse_full`]).
    pub fn scan(line: &'a str) -> Option<Self> {
        scan_fields(line).map(|f| ParsedLine(Parsed::Fast(f)))
    }

    /// [`ParsedLine::scan`] straight to the view (what the log reader calls: the scanned
    /// fields never leave this call).
    #[inline]
    pub fn scan_view(line: &'a str) -> Option<Result<EventView<'a>, NotAnEvent>> {
        scan_fields(line).map(|f| f.view())
    }

    /// Parses one line with `serde_json` alone (what the scanner is checked against).
    pub fn parse_full(line: &'a str) -> serde_json::Result<Self> {
        serde_json::from_str(line).map(|f| ParsedLine(Parsed::Full(f)))
    }

    /// Whether the scanner read the line.
    pub fn is_fast(&self) -> bool {
        matches!(self.0, Parsed::Fast(_))
    }

    /// The event's view, or why the line is not an event of a known type.
    pub fn view(&self) -> Result<EventView<'_>, NotAnEvent> {
        match &self.0 {
            Parsed::Fast(f) => f.view(),
            Parsed::Full(f) => f.view(),
        }
    }
}

/// The type of a line's `type` (or why it has none it knows).
fn event_type(kind: Option<&str>) -> Result<EventType, NotAnEvent> {
    let Some(kind) = kind else {
        return Err(NotAnEvent::MissingType);
    };
    EventType::parse(kind).ok_or_else(|| NotAnEvent::UnknownType(kind.to_owned()))
}

/// Tool `args` as a view has them: on calls and denials only, `{}` when absent.
fn view_args(ty: EventType, args: Option<&str>) -> Option<Json<'_>> {
    match ty {
        EventType::FunctionCall | EventType::FunctionDenied => {
            Some(args.map_or(Json::EmptyObject, Json::Raw))
        }
        _ => None,
    }
}

/// A tool `output` as a view has it: on outputs only, `""` when absent.
fn view_output(ty: EventType, output: Option<&str>) -> Option<Text<'_>> {
    (ty == EventType::FunctionOutput).then(|| output.map_or(Text::Str(""), Text::Raw))
}

impl<'a> FastFields<'a> {
    #[inline]
    fn view(&self) -> Result<EventView<'a>, NotAnEvent> {
        let ty = event_type(self.kind)?;
        fn st(v: Option<&str>) -> &str {
            v.unwrap_or("")
        }
        Ok(EventView {
            ty,
            timestamp: self.timestamp.unwrap_or(0),
            turn_id: st(self.turn_id),
            tool: st(self.tool),
            args: view_args(ty, self.args),
            output: view_output(ty, self.output),
            duration_ms: self.duration_ms.unwrap_or(0),
            failed: self.failed,
            call_id: self.call_id,
            before_tokens: self.before_tokens.unwrap_or(0),
            after_tokens: self.after_tokens.unwrap_or(0),
            reason: st(self.reason),
            source: st(self.source),
            parser: st(self.parser),
            error: st(self.error),
            provider: st(self.provider),
            model: st(self.model),
            message_count: self.message_count.unwrap_or(0),
            tool_count: self.tool_count.unwrap_or(0),
            prompt_chars: self.prompt_chars.unwrap_or(0),
            ttft_ms: self.ttft_ms,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            tool_calls: ToolCalls::Joined(self.tool_calls.unwrap_or("")),
            error_kind: st(self.error_kind),
        })
    }
}

impl Fields<'_> {
    fn view(&self) -> Result<EventView<'_>, NotAnEvent> {
        let ty = event_type(self.kind.as_ref().map(|k| k.0.as_ref()))?;
        fn st<'b>(v: &'b Option<Str<'_>>) -> &'b str {
            v.as_ref().map_or("", |s| s.0.as_ref())
        }
        Ok(EventView {
            ty,
            timestamp: self.timestamp.unwrap_or(0),
            turn_id: st(&self.turn_id),
            tool: st(&self.tool),
            args: view_args(ty, self.args.map(RawValue::get)),
            output: view_output(ty, self.output.as_ref().map(|r| r.0.get())),
            duration_ms: self.duration_ms.unwrap_or(0),
            failed: self.failed,
            call_id: self.call_id.as_ref().map(|s| s.0.as_ref()),
            before_tokens: self.before_tokens.unwrap_or(0),
            after_tokens: self.after_tokens.unwrap_or(0),
            reason: st(&self.reason),
            source: st(&self.source),
            parser: st(&self.parser),
            error: st(&self.error),
            provider: st(&self.provider),
            model: st(&self.model),
            message_count: self.message_count.unwrap_or(0),
            tool_count: self.tool_count.unwrap_or(0),
            prompt_chars: self.prompt_chars.unwrap_or(0),
            ttft_ms: self.ttft_ms,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            tool_calls: ToolCalls::Parsed(self.tool_calls.as_deref().unwrap_or(&[])),
            error_kind: st(&self.error_kind),
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
