//! From an [`ImportedSession`] to what the store writes: our `meta.json` fields, the
//! `messages.jsonl` lines and a rollout log synthesised from the source's times, so that
//! `trace`, `replay`, `stats` and `search` work on an imported session as on a native one.
//!
//! Everything here is a pure function of the session and the import time ([`plan`]): ids are
//! derived from (agent, source id) ([`session_id`]), message ids from the source's ids, event
//! ids from the session id and the event's place, so re-reading an unchanged source plans the
//! same bytes and a grown one plans the old lines as a prefix.
//!
//! The rollout log: `turn.started` per user turn (a turn is opened for a response that comes
//! before any prompt); per response `model.request` (at `requested_ms`, else the previous
//! item's time), `model.first_token` when the source says when it came, `model.response` with
//! the duration from the source's timestamps and the tokens; per tool call `function.call` and
//! `function.output` (paired by call id, the duration from the call's and the result's
//! timestamps), `function.denied` for a refusal (no call/output pair); `subagent.start/stop`
//! naming the child session by its derived id (`subagent_session_id`);
//! `compact.occurred`; `model.request` + `model.error` for an error; `turn.aborted` for an
//! aborted turn. Events are ordered by time (stably), their `seq` 1, 2, …
//!
//! Compactions become ours: each one with a summary is a summary of `memory/<id>/memory.json`
//! (the last in force, as our compaction leaves it), and `messages.jsonl` holds the history
//! from the last one on ([`Planned::written`]), so that resuming the session sends the summary
//! and what came after it, as the source agent would. The rollout log keeps every event (our
//! compaction never trims it either). A compaction whose summary the source does not hold
//! (Codex's `context_compacted` without its `compacted` record) trims nothing: there is no
//! summary to send in its place.

use freecode_core::limits::MAX_LINE_BYTES;
use freecode_core::memory::{CompactionMemory, Summary, estimate_tokens};
use freecode_core::project_key::normalize_absolute;
use freecode_core::rollout::event::{DenySource, Event, EventKind, ModelErrorKind};
use freecode_core::rollout::ulid;
use freecode_core::{Part, Role, SessionId, StoredMessage, Usage};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::model::{Content, ImportedSession, Item, ParentKind, SubagentRun, ToolOutcome};
use crate::source::Agent;

/// A title longer than this (from the first prompt) is cut.
const TITLE_CHARS: usize = 80;
/// A tool output longer than this is cut in the rollout log (the message keeps it whole).
const EVENT_OUTPUT_BYTES: usize = 16 * 1024;

/// Why a session cannot be written. Its text names the source file; [`PlanError::reason`] is
/// the same without it (for a report whose entry already names the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The source names no project directory: such a session would have no root for the tools.
    NoProject {
        /// The source file.
        path: String,
        /// The source's session id.
        source_id: String,
    },
    /// The source's project directory is not absolute (`relative/../etc`): the tools of a later
    /// run would be rooted wherever that resolves to from the run's own directory.
    RelativeProject {
        /// The source file.
        path: String,
        /// The source's session id.
        source_id: String,
        /// The directory it names.
        project: String,
    },
    /// The derived id is not a valid session id (never, for a UUID shape).
    Id(freecode_core::IdError),
}

impl PlanError {
    /// What is wrong and what to do, without the source file's name.
    pub fn reason(&self) -> String {
        match self {
            PlanError::NoProject { source_id, .. } => format!(
                "session {source_id} names no project directory (no cwd); skipped: pass \
                 --project DIR to import it into one"
            ),
            PlanError::RelativeProject {
                source_id, project, ..
            } => format!(
                "session {source_id} names the project directory {project:?}, which is not an \
                 absolute path; skipped: pass --project DIR to import it into one"
            ),
            PlanError::Id(e) => e.to_string(),
        }
    }
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::NoProject { path, .. } | PlanError::RelativeProject { path, .. } => {
                write!(f, "{path}: {}", self.reason())
            }
            PlanError::Id(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PlanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PlanError::Id(e) => e.source(),
            _ => None,
        }
    }
}

impl From<freecode_core::IdError> for PlanError {
    fn from(e: freecode_core::IdError) -> Self {
        PlanError::Id(e)
    }
}

/// Everything the store writes for one imported session.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Our id, derived from (agent, source id).
    pub id: SessionId,
    /// The parent's derived id (subagent or fork).
    pub parent_id: Option<SessionId>,
    /// Title (the source's, else the first prompt, cut).
    pub title: String,
    /// The project path from the records.
    pub project_path: String,
    /// Provider.
    pub provider: String,
    /// Last model.
    pub model: Option<String>,
    /// Creation time, ms.
    pub created_at: i64,
    /// Last activity, ms.
    pub last_activity: i64,
    /// User turns.
    pub turn_count: u64,
    /// Sum of the responses' tokens.
    pub tokens: Option<u64>,
    /// `importedFrom` (its `importedAt` the given import time).
    pub imported_from: Value,
    /// Every message of the source's history, the compacted ones included (a fork is told
    /// from its parent by them); [`Planned::written`] is what goes to `messages.jsonl`.
    pub messages: Vec<StoredMessage>,
    /// The first message written: the one after the last compaction with a summary, else 0.
    pub kept_from: usize,
    /// `memory/<id>/memory.json`: one summary per compaction with one, the last in force;
    /// `None` without any.
    pub memory: Option<CompactionMemory>,
    /// The synthesised rollout log.
    pub events: Vec<Event>,
}

impl Planned {
    /// The `messages.jsonl` lines: the history from the last compaction on, as our own
    /// compaction leaves it (the summary is in [`Planned::memory`]).
    pub fn written(&self) -> &[StoredMessage] {
        &self.messages[self.kept_from.min(self.messages.len())..]
    }
}

/// Our session id for `source_id` of `agent`: a UUID-shaped hex of SHA-256 (version nibble 8,
/// RFC 4122 variant), valid per [`SessionId::new`]. The same source always gets the same id.
pub fn session_id(agent: Agent, source_id: &str) -> Result<SessionId, freecode_core::IdError> {
    let mut h = Sha256::new();
    h.update(b"freecode-import\0");
    h.update(agent.name().as_bytes());
    h.update(b"\0");
    h.update(source_id.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex::encode(b);
    let text = format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    );
    // Hex and dashes, 36 characters: valid (the error is never seen in practice).
    SessionId::new(text)
}

/// A 128-bit value from the session id and an event's sequence number: the random part of a
/// deterministic ULID.
fn event_random(id: &SessionId, seq: u64) -> u128 {
    let mut h = Sha256::new();
    h.update(id.as_str().as_bytes());
    h.update(seq.to_le_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    // 80 bits are the ULID's random part.
    u128::from_le_bytes(b) & ((1u128 << 80) - 1)
}

/// The id of the child session a subagent run's transcript becomes: [`session_id`] of the
/// child's source id (Claude Code: `<session>/agent-<agentId>`; Codex: the spawned thread's id;
/// opencode: the child session's id), so `subagent.start/stop` name a session of this home. A
/// run without a transcript names the session it would have had.
fn subagent_session_id(s: &ImportedSession, run: &SubagentRun) -> String {
    let source = match s.agent {
        Agent::ClaudeCode => crate::claude_code::subagent_source_id(&s.source_id, &run.subagent_id),
        _ => run.subagent_id.clone(),
    };
    session_id(s.agent, &source)
        .map_or_else(|_| run.subagent_id.clone(), |id| id.as_str().to_owned())
}

/// Plans the files of `s`, imported at `now` (ms). Times after `now` are clamped to it.
pub fn plan(s: &ImportedSession, now: i64) -> Result<Planned, PlanError> {
    plan_as(s, now, session_id(s.agent, &s.source_id)?)
}

/// The id of the session of `s` when another file holds the same source id and does not
/// continue it (a copy continued elsewhere, a file of the same name): derived from the source
/// id and this file's path, so each such file is a session of its own, the same on every import.
pub fn copy_session_id(s: &ImportedSession) -> Result<SessionId, freecode_core::IdError> {
    session_id(
        s.agent,
        &format!("{}\0{}", s.source_id, s.source_path.display()),
    )
}

/// [`plan`], as session `id`.
pub fn plan_as(s: &ImportedSession, now: i64, id: SessionId) -> Result<Planned, PlanError> {
    let named = s
        .project_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| PlanError::NoProject {
            path: s.source_path.display().to_string(),
            source_id: s.source_id.clone(),
        })?;
    // Lexically normal: `/.x/../../etc` is kept as the `/etc` it is, never as a path that
    // reads like a directory below `/.x`.
    let project_path = normalize_absolute(named).ok_or_else(|| PlanError::RelativeProject {
        path: s.source_path.display().to_string(),
        source_id: s.source_id.clone(),
        project: named.to_owned(),
    })?;
    let parent_id = match &s.parent {
        Some(p) => Some(session_id(s.agent, &p.source_id)?),
        None => None,
    };
    let clamp = |t: i64| t.min(now);
    let first_time = s.items.iter().find_map(item_time);
    let created_at = clamp(s.created_ms.or(first_time).unwrap_or(now));
    let provider = s
        .provider
        .clone()
        .unwrap_or_else(|| s.agent.default_provider().to_owned());
    let model = s.model.clone();

    let mut messages = Vec::new();
    let mut kinds: Vec<(i64, EventKind)> = Vec::new();
    let mut last = created_at;
    // Whether `last` is something the agent answers at once (a prompt, a tool's result, an
    // error it retries, a compaction): a request the source recorded no start for went out
    // then. After a turn's end, or before anything, nothing says when it went out: the call
    // is put where it ended, with no duration, never the gap (a night's idle is no model
    // time).
    let mut answered_at_once = false;
    let mut turn: Option<String> = None;
    let mut turns = 0u64;
    let mut tokens: Option<u64> = None;
    let mut first_prompt: Option<String> = None;
    // (time, messages before it, summary) of each compaction with a summary.
    let mut compactions: Vec<(i64, usize, &str)> = Vec::new();
    let open_turn = |kinds: &mut Vec<(i64, EventKind)>, at: i64, turn: &mut Option<String>| {
        if turn.is_none() {
            let turn_id = "turn-0".to_owned();
            kinds.push((
                at,
                EventKind::TurnStarted {
                    turn_id: turn_id.clone(),
                },
            ));
            *turn = Some(turn_id);
        }
    };
    for (index, item) in s.items.iter().enumerate() {
        match item {
            Item::User(u) => {
                let at = clamp(u.at_ms.unwrap_or(last)).max(created_at);
                turns += 1;
                let msg_id = u.id.clone().unwrap_or_else(|| format!("user-{index}"));
                let turn_id = format!("turn-{turns}");
                kinds.push((
                    at,
                    EventKind::TurnStarted {
                        turn_id: turn_id.clone(),
                    },
                ));
                turn = Some(turn_id);
                if first_prompt.is_none() {
                    first_prompt = u.parts.iter().find_map(|p| p.text_content()).map(cut_title);
                }
                messages.push(message(msg_id, Role::User, u.parts.clone(), at, None));
                last = at;
                answered_at_once = true;
            }
            Item::Response(r) => {
                let unknown_start = if answered_at_once {
                    last
                } else {
                    r.first_token_ms.or(r.completed_ms).unwrap_or(last)
                };
                let requested = clamp(r.requested_ms.unwrap_or(unknown_start));
                open_turn(&mut kinds, requested, &mut turn);
                let turn_id = turn.clone().unwrap_or_default();
                let first = r.first_token_ms.map(clamp);
                let done = clamp(r.completed_ms.or(first).unwrap_or(requested)).max(requested);
                let model_name = r
                    .model
                    .clone()
                    .or_else(|| model.clone())
                    .unwrap_or_default();
                kinds.push((
                    requested,
                    EventKind::ModelRequest {
                        turn_id: turn_id.clone(),
                        provider: provider.clone(),
                        model: model_name.clone(),
                        message_count: messages.len() as u64,
                        tool_count: 0,
                        prompt_chars: 0,
                        streamed: true,
                    },
                ));
                let ttft = first.map(|f| (f - requested).max(0));
                if let (Some(f), Some(ttft)) = (first, ttft) {
                    kinds.push((
                        f.max(requested),
                        EventKind::ModelFirstToken {
                            turn_id: turn_id.clone(),
                            ttft_ms: ttft,
                        },
                    ));
                }
                let mut parts = Vec::new();
                let mut tool_names = Vec::new();
                let mut text_chars = 0u64;
                let mut tool_events = Vec::new();
                let mut end = done;
                for c in &r.content {
                    match c {
                        Content::Part(p) => {
                            text_chars += p.text_content().map_or(0, |t| t.chars().count()) as u64;
                            parts.push(p.clone());
                        }
                        Content::Tool(t) => {
                            tool_names.push(t.name.clone());
                            let result = t.result.clone().unwrap_or_default();
                            parts.push(Part::tool(t.name.clone(), t.args.clone(), result.clone()));
                            let started = clamp(t.started_ms.unwrap_or(done));
                            let finished = t.finished_ms.map(clamp).map(|f| f.max(started));
                            match &t.outcome {
                                ToolOutcome::Denied(reason) => {
                                    let source = match reason.as_deref() {
                                        Some("permission-rule") => DenySource::Rule,
                                        Some("automode-blocked") => DenySource::Mode,
                                        _ => DenySource::User,
                                    };
                                    tool_events.push((
                                        finished.unwrap_or(started),
                                        EventKind::FunctionDenied {
                                            turn_id: turn_id.clone(),
                                            tool: t.name.clone(),
                                            args: t.args.clone(),
                                            reason: if result.is_empty() {
                                                reason.clone().unwrap_or_default()
                                            } else {
                                                cut_bytes(&result, EVENT_OUTPUT_BYTES)
                                            },
                                            source,
                                        },
                                    ));
                                }
                                outcome => {
                                    tool_events.push((
                                        started,
                                        EventKind::FunctionCall {
                                            turn_id: turn_id.clone(),
                                            tool: t.name.clone(),
                                            args: t.args.clone(),
                                            call_id: Some(t.call_id.clone()),
                                            parent_call_id: None,
                                        },
                                    ));
                                    if let Some(f) = finished
                                        && *outcome != ToolOutcome::Missing
                                    {
                                        tool_events.push((
                                            f,
                                            EventKind::FunctionOutput {
                                                turn_id: turn_id.clone(),
                                                tool: t.name.clone(),
                                                output: cut_bytes(&result, EVENT_OUTPUT_BYTES),
                                                duration_ms: f - started,
                                                failed: (*outcome == ToolOutcome::Error)
                                                    .then_some(true),
                                                call_id: Some(t.call_id.clone()),
                                            },
                                        ));
                                        end = end.max(f);
                                    }
                                }
                            }
                        }
                    }
                }
                let usage = r.usage.as_ref().map(Usage::whitelisted);
                if let Some(u) = &usage {
                    tokens = Some(tokens.unwrap_or(0).saturating_add(u.total()));
                }
                kinds.push((
                    done,
                    EventKind::ModelResponse {
                        turn_id: turn_id.clone(),
                        provider: provider.clone(),
                        model: model_name.clone(),
                        duration_ms: done - requested,
                        ttft_ms: ttft,
                        input_tokens: usage.as_ref().and_then(|u| u.input_tokens),
                        output_tokens: usage.as_ref().and_then(|u| u.output_tokens),
                        cache_read_tokens: usage.as_ref().and_then(|u| u.cache_read_input_tokens),
                        cache_write_tokens: usage.as_ref().and_then(|u| {
                            u.cache_write_input_tokens.or(u.cache_creation_input_tokens)
                        }),
                        cache_write_1h_tokens: usage
                            .as_ref()
                            .and_then(|u| u.cache_write_1h_input_tokens),
                        reasoning_tokens: usage.as_ref().and_then(|u| u.reasoning_tokens),
                        tool_calls: tool_names,
                        text_chars,
                        thinking_chars: 0,
                        echoed_model: r.model.clone(),
                    },
                ));
                kinds.extend(tool_events);
                let msg_id = r.id.clone().unwrap_or_else(|| format!("response-{index}"));
                messages.push(message(msg_id, Role::Assistant, parts, done, usage));
                last = end;
                answered_at_once = true;
            }
            Item::Compaction(c) => {
                let at = clamp(c.at_ms.unwrap_or(last)).max(last);
                kinds.push((
                    at,
                    EventKind::CompactOccurred {
                        before_tokens: c.before_tokens.unwrap_or(0),
                        after_tokens: c.after_tokens.unwrap_or(0),
                    },
                ));
                if !c.summary.trim().is_empty() {
                    compactions.push((at, messages.len(), c.summary.as_str()));
                }
                last = at;
                answered_at_once = true;
            }
            Item::Error(e) => {
                let at = clamp(e.at_ms.unwrap_or(last)).max(last);
                // The failed request went out when the agent last had something to answer.
                let sent = if answered_at_once { last } else { at };
                open_turn(&mut kinds, sent, &mut turn);
                let turn_id = turn.clone().unwrap_or_default();
                let model_name = model.clone().unwrap_or_default();
                kinds.push((
                    sent,
                    EventKind::ModelRequest {
                        turn_id: turn_id.clone(),
                        provider: provider.clone(),
                        model: model_name.clone(),
                        message_count: messages.len() as u64,
                        tool_count: 0,
                        prompt_chars: 0,
                        streamed: true,
                    },
                ));
                kinds.push((
                    at,
                    EventKind::ModelError {
                        turn_id,
                        provider: provider.clone(),
                        model: model_name,
                        duration_ms: at - sent,
                        kind: if e.aborted {
                            ModelErrorKind::Abort
                        } else {
                            ModelErrorKind::Provider
                        },
                        error: e.message.clone(),
                    },
                ));
                last = at;
                answered_at_once = !e.aborted;
            }
            Item::Subagent(run) => {
                let start = clamp(run.started_ms.unwrap_or(last));
                kinds.push((
                    start,
                    EventKind::SubagentStart {
                        subagent_id: subagent_session_id(s, run),
                        task: run.task.clone(),
                    },
                ));
                if let Some(stop) = run.stopped_ms.map(clamp) {
                    kinds.push((
                        stop.max(start),
                        EventKind::SubagentStop {
                            subagent_id: subagent_session_id(s, run),
                            result: cut_bytes(
                                run.result.as_deref().unwrap_or(""),
                                EVENT_OUTPUT_BYTES,
                            ),
                        },
                    ));
                }
            }
            Item::TurnEnd(end) => {
                let at = clamp(end.at_ms.unwrap_or(last)).max(last);
                if let (Some(reason), Some(turn_id)) = (&end.aborted, &turn) {
                    kinds.push((
                        at,
                        EventKind::TurnAborted {
                            turn_id: turn_id.clone(),
                            reason: reason.clone(),
                        },
                    ));
                }
                last = at;
                answered_at_once = false;
            }
        }
    }
    // By time; items of one time keep their order.
    kinds.sort_by_key(|(at, _)| *at);
    let events = kinds
        .into_iter()
        .enumerate()
        .map(|(i, (at, kind))| {
            let seq = i as u64 + 1;
            Event {
                id: ulid::encode(u64::try_from(at).unwrap_or(0), event_random(&id, seq)),
                seq,
                aggregate_id: id.as_str().to_owned(),
                timestamp: at,
                kind,
                extra: freecode_core::Extra::new(),
            }
        })
        .collect();
    let last_activity = clamp(s.updated_ms.unwrap_or(last).max(last)).max(created_at);
    let title = s
        .title
        .as_deref()
        .map(cut_title)
        .filter(|t| !t.is_empty())
        .or(first_prompt)
        .unwrap_or_default();
    let mut from = Map::new();
    from.insert("agent".into(), Value::from(s.agent.name()));
    from.insert(
        "path".into(),
        Value::from(s.source_path.display().to_string()),
    );
    from.insert("sourceId".into(), Value::from(s.source_id.clone()));
    if let Some(v) = &s.version {
        from.insert("version".into(), Value::from(v.clone()));
    }
    from.insert("projectPath".into(), Value::from(project_path.clone()));
    if let Some(p) = &s.parent {
        let kind = match p.kind {
            ParentKind::Subagent => "subagent",
            ParentKind::Fork => "fork",
        };
        from.insert("parentKind".into(), Value::from(kind));
    }
    from.insert("importedAt".into(), Value::from(now));
    for m in &mut messages {
        fit_line(m);
    }
    let (kept_from, memory) = memory_of(&id, &compactions, &messages);
    Ok(Planned {
        id,
        parent_id,
        title,
        project_path,
        provider,
        model,
        created_at,
        last_activity,
        turn_count: turns,
        tokens,
        imported_from: Value::Object(from),
        messages,
        kept_from,
        memory,
        events,
    })
}

/// The compaction state of an imported history, as our own compaction would have left it:
/// each compaction a [`Summary`] (the messages it replaced are those since the one before), the
/// last one in force and the history kept from it on. Returns the first message kept and the
/// memory (`None`, keeping everything, when no compaction has a summary).
fn memory_of(
    id: &SessionId,
    compactions: &[(i64, usize, &str)],
    messages: &[StoredMessage],
) -> (usize, Option<CompactionMemory>) {
    let Some(&(last_at, kept_from, last_summary)) = compactions.last() else {
        return (0, None);
    };
    let mut memory = CompactionMemory::new(id.as_str());
    let mut from = 0;
    for &(at, cut, summary) in compactions {
        let replaced = messages.get(from..cut).unwrap_or_default();
        memory.summaries.push(Summary {
            id: format!("summary-{id}-{at}"),
            created_at: at,
            original_message_count: replaced.len() as u64,
            original_token_count: replaced.iter().map(|m| estimate_tokens(&m.text())).sum(),
            summary_token_count: estimate_tokens(summary),
            content: summary.to_owned(),
            extra: freecode_core::Extra::new(),
        });
        from = cut;
    }
    memory.total_compactions = compactions.len() as u64;
    memory.last_compaction_at = Some(last_at);
    // What the context held right after it: the summary (nothing was kept beside it).
    memory.token_count = estimate_tokens(last_summary);
    (kept_from, Some(memory))
}

/// Leaves out of a fork's rollout log what it shares with its parent (those events are the
/// parent's, as a native fork starts with its own log): only the events from the first message
/// it does not share on, renumbered.
pub fn keep_own_events(fork: &mut Planned, parent: &Planned) {
    let shared = fork
        .messages
        .iter()
        .zip(&parent.messages)
        .take_while(|(a, b)| a == b)
        .count();
    let from = fork.messages.get(shared).map_or(i64::MAX, |m| m.timestamp);
    fork.events.retain(|e| e.timestamp >= from);
    for (i, e) in fork.events.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
        e.id = ulid::encode(
            u64::try_from(e.timestamp).unwrap_or(0),
            event_random(&fork.id, e.seq),
        );
    }
}

fn item_time(item: &Item) -> Option<i64> {
    match item {
        Item::User(u) => u.at_ms,
        Item::Response(r) => r.requested_ms.or(r.first_token_ms).or(r.completed_ms),
        Item::Compaction(c) => c.at_ms,
        Item::Error(e) => e.at_ms,
        Item::Subagent(s) => s.started_ms,
        Item::TurnEnd(t) => t.at_ms,
    }
}

fn message(
    id: String,
    role: Role,
    parts: Vec<Part>,
    timestamp: i64,
    usage: Option<Usage>,
) -> StoredMessage {
    StoredMessage {
        id,
        role,
        parts,
        timestamp,
        usage: usage.map(Box::new),
        interrupted: None,
        extra: freecode_core::Extra::new(),
    }
}

/// The first line of a prompt, at most [`TITLE_CHARS`] characters.
fn cut_title(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        out.push('…');
    }
    out
}

/// Makes a message fit one log line ([`MAX_LINE_BYTES`], which the store refuses to pass and
/// every reader skips past): while it does not, its longest text, tool result or image is cut
/// (an image is left out, its alt text saying so), with a note of how much went. A source's
/// message that big is one tool output or file pasted whole; the rest of it, and the session,
/// are kept. A message of many small parts past the cap stays as it is (the store refuses it,
/// naming it).
fn fit_line(m: &mut StoredMessage) {
    // The line is at most ~6 bytes a byte of its strings (`\u00XX`) plus its keys: below
    // this, nothing to measure.
    let strings: usize = m
        .parts
        .iter()
        .map(|p| {
            [&p.content, &p.result, &p.data]
                .iter()
                .map(|s| s.as_ref().map_or(0, String::len))
                .sum::<usize>()
                + p.tool
                    .as_ref()
                    .and_then(|t| t.args.as_ref())
                    .map_or(0, |a| a.to_string().len())
        })
        .sum();
    if strings.saturating_mul(6) + (64 << 10) < MAX_LINE_BYTES {
        return;
    }
    loop {
        let len = m.to_line().len().saturating_sub(1);
        if len <= MAX_LINE_BYTES {
            return;
        }
        // The longest string to cut: (part, which) where 0 = content, 1 = result, 2 = data.
        let longest = m
            .parts
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                [&p.content, &p.result, &p.data]
                    .into_iter()
                    .enumerate()
                    .map(move |(w, s)| (s.as_ref().map_or(0, String::len), i, w))
            })
            .max();
        let Some((n, i, which)) = longest.filter(|(n, ..)| *n > 0) else {
            return;
        };
        let part = &mut m.parts[i];
        if which == 2 {
            part.data = None;
            part.alt_text = Some(format!(
                "[image of {n} bytes left out by the import: past the {MAX_LINE_BYTES} bytes a \
                 message line may hold]"
            ));
            continue;
        }
        let over = len - MAX_LINE_BYTES;
        let field = if which == 0 {
            &mut part.content
        } else {
            &mut part.result
        };
        let Some(text) = field.as_mut() else { return };
        // `over` is in bytes of the line, where an escaped character takes more than one:
        // cut the share of the text that makes them.
        let escaped = serde_json::to_string(text.as_str()).map_or(n, |j| j.len().max(n));
        let cut = ((over as u128 * n as u128).div_ceil(escaped as u128) as usize + 256).min(n);
        let note = format!(
            "\n[cut by the import: {cut} of {n} bytes left out, past the {MAX_LINE_BYTES} bytes \
             a message line may hold]"
        );
        let mut keep = n.saturating_sub(cut + note.len());
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        text.truncate(keep);
        text.push_str(&note);
    }
}

fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests;
