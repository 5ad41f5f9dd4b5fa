//! The 19 rollout event types (SPEC §6.4) and their exact JSON shape (SPEC §6.1).
//!
//! Every event is `{type, id, seq, aggregateID, timestamp}` followed by its own fields in the
//! original's order. Whitelisted string fields (`turnId`, `tool`, `reason`, …) are left out when
//! empty, as the original does; numbers and booleans are always written. Reading goes through
//! [`RawEvent`] (every key optional, unknown keys kept) and [`Event::from_raw`], which defaults a
//! missing string to `""` and a missing number to 0 and sorts out unknown types.

use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use crate::jsonw::{Emit, Key, Line, MapMembers, Members, key};
use crate::record::json_record;
use crate::string_enum;

string_enum! {
    /// Who refused a tool call (`function.denied.source`).
    DenySource {
        /// A PreToolUse hook blocked it.
        Hook => "hook",
        /// The agent mode forbids it.
        Mode => "mode",
        /// A permission rule denied it.
        Rule => "rule",
        /// A PermissionRequest hook denied it.
        PermissionHook => "permission-hook",
        /// The user said no.
        User => "user",
    }
}

string_enum! {
    /// Why a model call failed (`model.error.kind`).
    ModelErrorKind {
        /// The provider went silent past its budget.
        Stall => "stall",
        /// The user cancelled.
        Abort => "abort",
        /// The provider returned an error.
        Provider => "provider",
    }
}

json_record! {
    /// Any event line, every key optional: what the reader parses before typing it.
    pub struct RawEvent {
        /// Event type.
        "type" => pub kind: Option<String>,
        /// Event id (a ULID, or anything).
        "id" => pub id: Option<String>,
        /// Sequence number within the log.
        "seq" => pub seq: Option<u64>,
        /// What the record is of: the session (or subagent) id.
        "aggregateID" => pub aggregate_id: Option<String>,
        /// Wall clock, ms.
        "timestamp" => pub timestamp: Option<i64>,
        /// Turn id.
        "turnId" => pub turn_id: Option<String>,
        /// Tool name.
        "tool" => pub tool: Option<String>,
        /// Tool arguments.
        "args" => pub args: Option<Value>,
        /// Tool output.
        "output" => pub output: Option<String>,
        /// Duration, ms.
        "duration_ms" => pub duration_ms: Option<i64>,
        /// Tokens before compaction / at overflow.
        "beforeTokens" => pub before_tokens: Option<u64>,
        /// Tokens after compaction.
        "afterTokens" => pub after_tokens: Option<u64>,
        /// Subagent id.
        "subagentId" => pub subagent_id: Option<String>,
        /// Subagent task.
        "task" => pub task: Option<String>,
        /// Subagent result.
        "result" => pub result: Option<String>,
        /// Skill name.
        "skillName" => pub skill_name: Option<String>,
        /// Whether a skill was invoked implicitly.
        "implicit" => pub implicit: Option<bool>,
        /// Hook name.
        "hookName" => pub hook_name: Option<String>,
        /// Hook event.
        "hookEvent" => pub hook_event: Option<String>,
        /// Whether the hook blocked.
        "blocked" => pub blocked: Option<bool>,
        /// A reason.
        "reason" => pub reason: Option<String>,
        /// Parser name.
        "parser" => pub parser: Option<String>,
        /// Error text.
        "error" => pub error: Option<String>,
        /// Provider id.
        "provider" => pub provider: Option<String>,
        /// Model id.
        "model" => pub model: Option<String>,
        /// Messages sent.
        "messageCount" => pub message_count: Option<u64>,
        /// Tools offered.
        "toolCount" => pub tool_count: Option<u64>,
        /// Prompt size proxy, characters.
        "promptChars" => pub prompt_chars: Option<u64>,
        /// Whether the call streamed.
        "streamed" => pub streamed: Option<bool>,
        /// Time to first token, ms.
        "ttft_ms" => pub ttft_ms: Option<i64>,
        /// Input tokens.
        "inputTokens" => pub input_tokens: Option<u64>,
        /// Output tokens.
        "outputTokens" => pub output_tokens: Option<u64>,
        /// Cache-read tokens.
        "cacheReadTokens" => pub cache_read_tokens: Option<u64>,
        /// Cache-write tokens.
        "cacheWriteTokens" => pub cache_write_tokens: Option<u64>,
        /// Of the cache writes, those made for an hour (billed at their own rate).
        "cacheWrite1hTokens" => pub cache_write_1h_tokens: Option<u64>,
        /// Reasoning tokens.
        "reasoningTokens" => pub reasoning_tokens: Option<u64>,
        /// Tool names the response called.
        "toolCalls" => pub tool_calls: Option<Vec<String>>,
        /// Response text length.
        "textChars" => pub text_chars: Option<u64>,
        /// Thinking text length.
        "thinkingChars" => pub thinking_chars: Option<u64>,
        /// The model id the provider said it served.
        "echoedModel" => pub echoed_model: Option<String>,
        /// `model.error` kind.
        "kind" => pub error_kind: Option<String>,
        /// `function.denied` source.
        "source" => pub source: Option<String>,
        /// Pairs a call with its output.
        "callId" => pub call_id: Option<String>,
        /// The call that spawned this one.
        "parentCallId" => pub parent_call_id: Option<String>,
        /// Whether the tool failed.
        "failed" => pub failed: Option<bool>,
        /// Events a redirect was based on.
        "evidenceEventIds" => pub evidence_event_ids: Option<Vec<String>>,
        /// Redirect directions given.
        "directionCount" => pub direction_count: Option<u64>,
        /// Redirect direction length.
        "directionChars" => pub direction_chars: Option<u64>,
        /// Redirect latency, ms.
        "latency_ms" => pub latency_ms: Option<i64>,
    }
}

/// What happened: the 19 event types.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // Field names are the spec's; each variant documents its event.
pub enum EventKind {
    /// `turn.started`.
    TurnStarted { turn_id: String },
    /// `turn.aborted`.
    TurnAborted { turn_id: String, reason: String },
    /// `function.call`: a tool is about to run.
    FunctionCall {
        turn_id: String,
        tool: String,
        args: Value,
        call_id: Option<String>,
        parent_call_id: Option<String>,
    },
    /// `function.output`: a tool returned.
    FunctionOutput {
        turn_id: String,
        tool: String,
        output: String,
        duration_ms: i64,
        failed: Option<bool>,
        call_id: Option<String>,
    },
    /// `function.denied`: a call that never ran.
    FunctionDenied {
        turn_id: String,
        tool: String,
        args: Value,
        reason: String,
        source: DenySource,
    },
    /// `compact.occurred`.
    CompactOccurred {
        before_tokens: u64,
        after_tokens: u64,
    },
    /// `subagent.start`.
    SubagentStart { subagent_id: String, task: String },
    /// `subagent.stop`.
    SubagentStop { subagent_id: String, result: String },
    /// `skill.invoked`.
    SkillInvoked { skill_name: String, implicit: bool },
    /// `hook.triggered`.
    HookTriggered {
        hook_name: String,
        hook_event: String,
        blocked: bool,
    },
    /// `hook.blocked`.
    HookBlocked { hook_name: String, reason: String },
    /// `context.overflow`.
    ContextOverflow { before_tokens: u64 },
    /// `parse.error`.
    ParseError {
        turn_id: String,
        parser: String,
        error: String,
    },
    /// `model.request`: written before the provider is called.
    ModelRequest {
        turn_id: String,
        provider: String,
        model: String,
        message_count: u64,
        tool_count: u64,
        prompt_chars: u64,
        streamed: bool,
    },
    /// `model.first_token`.
    ModelFirstToken { turn_id: String, ttft_ms: i64 },
    /// `model.response`.
    ModelResponse {
        turn_id: String,
        provider: String,
        model: String,
        duration_ms: i64,
        ttft_ms: Option<i64>,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        cache_read_tokens: Option<u64>,
        cache_write_tokens: Option<u64>,
        cache_write_1h_tokens: Option<u64>,
        reasoning_tokens: Option<u64>,
        tool_calls: Vec<String>,
        text_chars: u64,
        thinking_chars: u64,
        echoed_model: Option<String>,
    },
    /// `model.error`.
    ModelError {
        turn_id: String,
        provider: String,
        model: String,
        duration_ms: i64,
        kind: ModelErrorKind,
        error: String,
    },
    /// `redirect.triggered` — never carries the advice text.
    RedirectTriggered {
        turn_id: String,
        reason: String,
        evidence_event_ids: Vec<String>,
        direction_count: u64,
        direction_chars: u64,
        latency_ms: i64,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
    },
    /// `redirect.skipped`.
    RedirectSkipped { turn_id: String, reason: String },
}

impl EventKind {
    /// The `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::TurnStarted { .. } => "turn.started",
            Self::TurnAborted { .. } => "turn.aborted",
            Self::FunctionCall { .. } => "function.call",
            Self::FunctionOutput { .. } => "function.output",
            Self::FunctionDenied { .. } => "function.denied",
            Self::CompactOccurred { .. } => "compact.occurred",
            Self::SubagentStart { .. } => "subagent.start",
            Self::SubagentStop { .. } => "subagent.stop",
            Self::SkillInvoked { .. } => "skill.invoked",
            Self::HookTriggered { .. } => "hook.triggered",
            Self::HookBlocked { .. } => "hook.blocked",
            Self::ContextOverflow { .. } => "context.overflow",
            Self::ParseError { .. } => "parse.error",
            Self::ModelRequest { .. } => "model.request",
            Self::ModelFirstToken { .. } => "model.first_token",
            Self::ModelResponse { .. } => "model.response",
            Self::ModelError { .. } => "model.error",
            Self::RedirectTriggered { .. } => "redirect.triggered",
            Self::RedirectSkipped { .. } => "redirect.skipped",
        }
    }

    /// Every type name, in SPEC order.
    pub const TYPE_NAMES: [&'static str; 19] = [
        "turn.started",
        "turn.aborted",
        "function.call",
        "function.output",
        "function.denied",
        "compact.occurred",
        "subagent.start",
        "subagent.stop",
        "skill.invoked",
        "hook.triggered",
        "hook.blocked",
        "context.overflow",
        "parse.error",
        "model.request",
        "model.first_token",
        "model.response",
        "model.error",
        "redirect.triggered",
        "redirect.skipped",
    ];

    /// The turn id, for events that carry one.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            Self::TurnStarted { turn_id }
            | Self::TurnAborted { turn_id, .. }
            | Self::FunctionCall { turn_id, .. }
            | Self::FunctionOutput { turn_id, .. }
            | Self::FunctionDenied { turn_id, .. }
            | Self::ParseError { turn_id, .. }
            | Self::ModelRequest { turn_id, .. }
            | Self::ModelFirstToken { turn_id, .. }
            | Self::ModelResponse { turn_id, .. }
            | Self::ModelError { turn_id, .. }
            | Self::RedirectTriggered { turn_id, .. }
            | Self::RedirectSkipped { turn_id, .. } => Some(turn_id),
            Self::CompactOccurred { .. }
            | Self::SubagentStart { .. }
            | Self::SubagentStop { .. }
            | Self::SkillInvoked { .. }
            | Self::HookTriggered { .. }
            | Self::HookBlocked { .. }
            | Self::ContextOverflow { .. } => None,
        }
    }
}

/// One event: the base fields, what happened, and keys this version does not know.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Event id.
    pub id: String,
    /// Sequence number, unique and increasing within the log.
    pub seq: u64,
    /// The session (or subagent) the log belongs to.
    pub aggregate_id: String,
    /// Wall clock, ms.
    pub timestamp: i64,
    /// What happened.
    pub kind: EventKind,
    /// Keys this version does not know, written back after the known ones.
    pub extra: crate::Extra,
}

/// Why a line is not an event of a known type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAnEvent {
    /// The line has a `type` this version does not know: skip and count it.
    UnknownType(String),
    /// The line has no `type`.
    MissingType,
}

fn s(v: Option<String>) -> String {
    v.unwrap_or_default()
}

impl Event {
    /// Types a raw line; missing strings become `""` and missing numbers 0 (SPEC §6.1).
    pub fn from_raw(r: RawEvent) -> Result<Self, NotAnEvent> {
        let Some(type_name) = r.kind else {
            return Err(NotAnEvent::MissingType);
        };
        let args = || r.args.clone().unwrap_or_else(|| Value::Object(Map::new()));
        let kind = match type_name.as_str() {
            "turn.started" => EventKind::TurnStarted {
                turn_id: s(r.turn_id),
            },
            "turn.aborted" => EventKind::TurnAborted {
                turn_id: s(r.turn_id),
                reason: s(r.reason),
            },
            "function.call" => EventKind::FunctionCall {
                args: args(),
                turn_id: s(r.turn_id),
                tool: s(r.tool),
                call_id: r.call_id,
                parent_call_id: r.parent_call_id,
            },
            "function.output" => EventKind::FunctionOutput {
                turn_id: s(r.turn_id),
                tool: s(r.tool),
                output: s(r.output),
                duration_ms: r.duration_ms.unwrap_or(0),
                failed: r.failed,
                call_id: r.call_id,
            },
            "function.denied" => EventKind::FunctionDenied {
                args: args(),
                turn_id: s(r.turn_id),
                tool: s(r.tool),
                reason: s(r.reason),
                source: DenySource::parse(r.source.as_deref().unwrap_or("")),
            },
            "compact.occurred" => EventKind::CompactOccurred {
                before_tokens: r.before_tokens.unwrap_or(0),
                after_tokens: r.after_tokens.unwrap_or(0),
            },
            "subagent.start" => EventKind::SubagentStart {
                subagent_id: s(r.subagent_id),
                task: s(r.task),
            },
            "subagent.stop" => EventKind::SubagentStop {
                subagent_id: s(r.subagent_id),
                result: s(r.result),
            },
            "skill.invoked" => EventKind::SkillInvoked {
                skill_name: s(r.skill_name),
                implicit: r.implicit.unwrap_or(false),
            },
            "hook.triggered" => EventKind::HookTriggered {
                hook_name: s(r.hook_name),
                hook_event: s(r.hook_event),
                blocked: r.blocked.unwrap_or(false),
            },
            "hook.blocked" => EventKind::HookBlocked {
                hook_name: s(r.hook_name),
                reason: s(r.reason),
            },
            "context.overflow" => EventKind::ContextOverflow {
                before_tokens: r.before_tokens.unwrap_or(0),
            },
            "parse.error" => EventKind::ParseError {
                turn_id: s(r.turn_id),
                parser: s(r.parser),
                error: s(r.error),
            },
            "model.request" => EventKind::ModelRequest {
                turn_id: s(r.turn_id),
                provider: s(r.provider),
                model: s(r.model),
                message_count: r.message_count.unwrap_or(0),
                tool_count: r.tool_count.unwrap_or(0),
                prompt_chars: r.prompt_chars.unwrap_or(0),
                streamed: r.streamed.unwrap_or(false),
            },
            "model.first_token" => EventKind::ModelFirstToken {
                turn_id: s(r.turn_id),
                ttft_ms: r.ttft_ms.unwrap_or(0),
            },
            "model.response" => EventKind::ModelResponse {
                turn_id: s(r.turn_id),
                provider: s(r.provider),
                model: s(r.model),
                duration_ms: r.duration_ms.unwrap_or(0),
                ttft_ms: r.ttft_ms,
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                cache_read_tokens: r.cache_read_tokens,
                cache_write_tokens: r.cache_write_tokens,
                cache_write_1h_tokens: r.cache_write_1h_tokens,
                reasoning_tokens: r.reasoning_tokens,
                tool_calls: r.tool_calls.unwrap_or_default(),
                text_chars: r.text_chars.unwrap_or(0),
                thinking_chars: r.thinking_chars.unwrap_or(0),
                echoed_model: r.echoed_model,
            },
            "model.error" => EventKind::ModelError {
                turn_id: s(r.turn_id),
                provider: s(r.provider),
                model: s(r.model),
                duration_ms: r.duration_ms.unwrap_or(0),
                kind: ModelErrorKind::parse(r.error_kind.as_deref().unwrap_or("")),
                error: s(r.error),
            },
            "redirect.triggered" => EventKind::RedirectTriggered {
                turn_id: s(r.turn_id),
                reason: s(r.reason),
                evidence_event_ids: r.evidence_event_ids.unwrap_or_default(),
                direction_count: r.direction_count.unwrap_or(0),
                direction_chars: r.direction_chars.unwrap_or(0),
                latency_ms: r.latency_ms.unwrap_or(0),
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
            },
            "redirect.skipped" => EventKind::RedirectSkipped {
                turn_id: s(r.turn_id),
                reason: s(r.reason),
            },
            _ => return Err(NotAnEvent::UnknownType(type_name)),
        };
        Ok(Self {
            id: s(r.id),
            seq: r.seq.unwrap_or(0),
            aggregate_id: s(r.aggregate_id),
            timestamp: r.timestamp.unwrap_or(0),
            kind,
            extra: r.extra,
        })
    }

    /// This event by reference.
    pub fn as_line(&self) -> EventLine<'_> {
        EventLine {
            id: &self.id,
            seq: self.seq,
            aggregate_id: &self.aggregate_id,
            timestamp: self.timestamp,
            kind: &self.kind,
            extra: &self.extra,
        }
    }

    /// The compact JSON line, with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = Vec::with_capacity(256);
        if self.as_line().write_to(&mut line).is_err() {
            line.clear();
            line.push(b'\n');
        }
        line
    }
}

/// Writes whitelisted strings only when non-empty (the original's truthiness test).
fn put_str<M: Members>(m: &mut M, k: Key, v: &str) -> Result<(), M::Error> {
    if v.is_empty() { Ok(()) } else { m.member(k, v) }
}

fn put_opt<M: Members, T: Emit + serde::Serialize>(
    m: &mut M,
    k: Key,
    v: &Option<T>,
) -> Result<(), M::Error> {
    match v {
        Some(v) => m.member(k, v),
        None => Ok(()),
    }
}

impl serde::Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.as_line().serialize(ser)
    }
}

/// An event by reference: what a recorder serialises straight into its buffer, without building
/// an owned [`Event`] (no copy of the aggregate id or the kind). Written exactly as [`Event`].
#[derive(Debug, Clone, Copy)]
pub struct EventLine<'a> {
    /// Event id.
    pub id: &'a str,
    /// Sequence number.
    pub seq: u64,
    /// The log's aggregate.
    pub aggregate_id: &'a str,
    /// Wall clock, ms.
    pub timestamp: i64,
    /// What happened.
    pub kind: &'a EventKind,
    /// Unknown keys, written after the known ones.
    pub extra: &'a crate::Extra,
}

impl EventLine<'_> {
    /// Appends the compact JSON line and its newline to `out` (on an error, `out` is left as
    /// it was).
    pub fn write_to(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        let start = out.len();
        let mut line = Line::new(out);
        match self.members(&mut line) {
            Ok(()) => {
                line.end();
                out.push(b'\n');
                Ok(())
            }
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }
}

impl serde::Serialize for EventLine<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(None)?;
        self.members(&mut MapMembers(&mut m))?;
        m.end()
    }
}

impl EventLine<'_> {
    /// Every member of the line, in the original's order, to `m`: the one list behind both
    /// [`EventLine::write_to`] and `Serialize`.
    fn members<M: Members>(&self, m: &mut M) -> Result<(), M::Error> {
        m.member(key!("type"), self.kind.type_name())?;
        m.member(key!("id"), self.id)?;
        m.member(key!("seq"), &self.seq)?;
        m.member(key!("aggregateID"), self.aggregate_id)?;
        m.member(key!("timestamp"), &self.timestamp)?;
        match self.kind {
            EventKind::TurnStarted { turn_id } => put_str(m, key!("turnId"), turn_id)?,
            EventKind::TurnAborted { turn_id, reason } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("reason"), reason)?;
            }
            EventKind::FunctionCall {
                turn_id,
                tool,
                args,
                call_id,
                parent_call_id,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("tool"), tool)?;
                m.member(key!("args"), args)?;
                put_opt(m, key!("callId"), call_id)?;
                put_opt(m, key!("parentCallId"), parent_call_id)?;
            }
            EventKind::FunctionOutput {
                turn_id,
                tool,
                output,
                duration_ms,
                failed,
                call_id,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("tool"), tool)?;
                m.member(key!("output"), output)?;
                m.member(key!("duration_ms"), duration_ms)?;
                put_opt(m, key!("failed"), failed)?;
                put_opt(m, key!("callId"), call_id)?;
            }
            EventKind::FunctionDenied {
                turn_id,
                tool,
                args,
                reason,
                source,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("tool"), tool)?;
                m.member(key!("args"), args)?;
                put_str(m, key!("reason"), reason)?;
                m.member(key!("source"), source.as_str())?;
            }
            EventKind::CompactOccurred {
                before_tokens,
                after_tokens,
            } => {
                m.member(key!("beforeTokens"), before_tokens)?;
                m.member(key!("afterTokens"), after_tokens)?;
            }
            EventKind::SubagentStart { subagent_id, task } => {
                put_str(m, key!("subagentId"), subagent_id)?;
                put_str(m, key!("task"), task)?;
            }
            EventKind::SubagentStop {
                subagent_id,
                result,
            } => {
                put_str(m, key!("subagentId"), subagent_id)?;
                put_str(m, key!("result"), result)?;
            }
            EventKind::SkillInvoked {
                skill_name,
                implicit,
            } => {
                put_str(m, key!("skillName"), skill_name)?;
                m.member(key!("implicit"), implicit)?;
            }
            EventKind::HookTriggered {
                hook_name,
                hook_event,
                blocked,
            } => {
                put_str(m, key!("hookName"), hook_name)?;
                put_str(m, key!("hookEvent"), hook_event)?;
                m.member(key!("blocked"), blocked)?;
            }
            EventKind::HookBlocked { hook_name, reason } => {
                put_str(m, key!("hookName"), hook_name)?;
                put_str(m, key!("reason"), reason)?;
            }
            EventKind::ContextOverflow { before_tokens } => {
                m.member(key!("beforeTokens"), before_tokens)?
            }
            EventKind::ParseError {
                turn_id,
                parser,
                error,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("parser"), parser)?;
                put_str(m, key!("error"), error)?;
            }
            EventKind::ModelRequest {
                turn_id,
                provider,
                model,
                message_count,
                tool_count,
                prompt_chars,
                streamed,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                m.member(key!("provider"), provider)?;
                m.member(key!("model"), model)?;
                m.member(key!("messageCount"), message_count)?;
                m.member(key!("toolCount"), tool_count)?;
                m.member(key!("promptChars"), prompt_chars)?;
                m.member(key!("streamed"), streamed)?;
            }
            EventKind::ModelFirstToken { turn_id, ttft_ms } => {
                put_str(m, key!("turnId"), turn_id)?;
                m.member(key!("ttft_ms"), ttft_ms)?;
            }
            EventKind::ModelResponse {
                turn_id,
                provider,
                model,
                duration_ms,
                ttft_ms,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                cache_write_1h_tokens,
                reasoning_tokens,
                tool_calls,
                text_chars,
                thinking_chars,
                echoed_model,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                m.member(key!("provider"), provider)?;
                m.member(key!("model"), model)?;
                m.member(key!("duration_ms"), duration_ms)?;
                put_opt(m, key!("ttft_ms"), ttft_ms)?;
                put_opt(m, key!("inputTokens"), input_tokens)?;
                put_opt(m, key!("outputTokens"), output_tokens)?;
                put_opt(m, key!("cacheReadTokens"), cache_read_tokens)?;
                put_opt(m, key!("cacheWriteTokens"), cache_write_tokens)?;
                put_opt(m, key!("cacheWrite1hTokens"), cache_write_1h_tokens)?;
                put_opt(m, key!("reasoningTokens"), reasoning_tokens)?;
                m.member(key!("toolCalls"), tool_calls)?;
                m.member(key!("textChars"), text_chars)?;
                m.member(key!("thinkingChars"), thinking_chars)?;
                put_opt(m, key!("echoedModel"), echoed_model)?;
            }
            EventKind::ModelError {
                turn_id,
                provider,
                model,
                duration_ms,
                kind,
                error,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                m.member(key!("provider"), provider)?;
                m.member(key!("model"), model)?;
                m.member(key!("duration_ms"), duration_ms)?;
                m.member(key!("kind"), kind.as_str())?;
                m.member(key!("error"), error)?;
            }
            EventKind::RedirectTriggered {
                turn_id,
                reason,
                evidence_event_ids,
                direction_count,
                direction_chars,
                latency_ms,
                input_tokens,
                output_tokens,
            } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("reason"), reason)?;
                m.member(key!("evidenceEventIds"), evidence_event_ids)?;
                m.member(key!("directionCount"), direction_count)?;
                m.member(key!("directionChars"), direction_chars)?;
                m.member(key!("latency_ms"), latency_ms)?;
                put_opt(m, key!("inputTokens"), input_tokens)?;
                put_opt(m, key!("outputTokens"), output_tokens)?;
            }
            EventKind::RedirectSkipped { turn_id, reason } => {
                put_str(m, key!("turnId"), turn_id)?;
                put_str(m, key!("reason"), reason)?;
            }
        }
        for (k, v) in self.extra {
            m.extra(k, v)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) {
        let raw: RawEvent = serde_json::from_str(line).unwrap();
        let ev = Event::from_raw(raw).unwrap();
        assert_eq!(
            String::from_utf8(ev.to_line()).unwrap(),
            format!("{line}\n")
        );
    }

    #[test]
    fn lines_round_trip_byte_for_byte() {
        round_trip(
            r#"{"type":"model.error","id":"x","seq":3,"aggregateID":"s","timestamp":1,"turnId":"turn-1","provider":"p","model":"m","duration_ms":3000,"kind":"provider","error":"429"}"#,
        );
        round_trip(
            r#"{"type":"function.denied","id":"x","seq":18,"aggregateID":"s","timestamp":1,"turnId":"turn-0","tool":"edit","args":{"filePath":"a.ts"},"reason":"no","source":"mode"}"#,
        );
        round_trip(
            r#"{"type":"function.output","id":"x","seq":2,"aggregateID":"s","timestamp":1,"turnId":"t","tool":"bash","output":"","duration_ms":0,"callId":"c1","future":true}"#,
        );
        round_trip(
            r#"{"type":"subagent.stop","id":"x","seq":2,"aggregateID":"s","timestamp":1,"subagentId":"a"}"#,
        );
    }

    #[test]
    fn unknown_types_are_reported_not_fatal() {
        let raw: RawEvent =
            serde_json::from_str(r#"{"type":"cache.warm","id":"x","seq":1}"#).unwrap();
        assert_eq!(
            Event::from_raw(raw),
            Err(NotAnEvent::UnknownType("cache.warm".into()))
        );
    }
}
