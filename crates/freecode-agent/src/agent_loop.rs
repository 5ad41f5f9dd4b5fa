//! [`AgentLoop`]: one session held open for turns. Each [`AgentLoop::run_turn`] appends the
//! user's prompt, then alternates model calls and tool calls until the model stops calling
//! tools (or the iteration cap), persisting every message through the session writer and
//! recording every step in the rollout log.
//!
//! Per iteration (turn id `turn-<n>-<i>`: `n` the session's turn number — past `turnCount` and
//! every turn already in the log, so ids never repeat in a session — and `i` the iteration):
//! `turn.started` → `model.request` (before the provider is called) → `model.first_token` →
//! `model.response` | `model.error{stall|abort|provider}` → per tool call `function.denied` or
//! `function.call` … `function.output` (paired by call id). Messages follow SPEC §4.4: the
//! response text as one assistant line (carrying `usage`), then one assistant line per tool
//! call with its result; a failed model call writes nothing. Every turn — completed, failed or
//! interrupted — ends with [`SessionWriter::end_turn`] (the turn-boundary fsync, `turnCount`,
//! `lastTurnAt`) and a rollout fsync.
//!
//! Ctrl+C ([`InterruptFlag`], raised through [`Interrupts`]): the stream or tool in flight is
//! abandoned, `model.error{kind:"abort"}` (or the tool's `function.output` "interrupted") is
//! recorded, what was streamed so far is **appended** as an assistant message marked
//! `interrupted: true` — or, when nothing was streamed, the last assistant message of the turn
//! is marked with [`SessionWriter::mark_interrupted`] — and the session status becomes
//! `interrupted`. Resuming such a session persists "Continue from where you left off.".

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use freecode_core::compaction::{extractive_summary_within, keep_last_n_user_turns};
use freecode_core::memory::estimate_tokens;
use freecode_core::message::Role;
use freecode_core::rollout::{EventKind, ModelErrorKind};
use freecode_core::{Part, SessionId, SessionMeta, SessionStatus, StoredMessage, Usage};
use freecode_store::rollout::{
    ModelCall, ModelRequest, ModelResponse, Recorder, RecorderConfig, last_event_where,
};
use freecode_store::session::read_messages_at;
use freecode_store::{ListFilter, NewSession, SessionStore, SessionWriter};
use serde_json::Value;

use freecode_ops::types::{ToolCallSummary, TurnError, TurnOutcome, TurnStatus};
use freecode_ops::{Error, Result};

use crate::interrupt::{InterruptFlag, Interrupts};
use crate::messages::build_prompt;
use crate::provider::{ChatRequest, Family, Provider, ProviderConfig, Wire};
use crate::sse::{Completion, Delta, SseParser};
use crate::tools::{Decision, PermissionMode, Tools};

/// How often a waiting loop checks the interrupt flag.
const TICK: Duration = Duration::from_millis(20);
/// The rollout's model name when none is pinned (SPEC §6.4).
const PROVIDER_DEFAULT: &str = "(provider default)";
/// User turns kept when the loop compacts the session.
pub const COMPACT_KEEP_TURNS: usize = 2;
/// The history size (estimated tokens) past which a turn starts by compacting, by default.
pub const DEFAULT_COMPACT_AT_TOKENS: u64 = 100_000;
/// The automatic summary's budget is the threshold divided by this (10%)…
const SUMMARY_SHARE: u64 = 10;
/// …and at least this many estimated tokens.
const SUMMARY_MIN_TOKENS: u64 = 256;
/// The tool output recorded for a tool stopped by Ctrl+C.
pub const INTERRUPTED_OUTPUT: &str = "interrupted";

/// How a loop talks to its model and what it may do.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The provider.
    pub provider: ProviderConfig,
    /// An explicit model (flag or environment): pinned into the session's meta.
    pub model: Option<String>,
    /// What the tools may do.
    pub permission: PermissionMode,
    /// A model call with no bytes for this long is a stall.
    pub stall_timeout: Duration,
    /// The most model calls per turn.
    pub max_iterations: u32,
    /// Rollout recording.
    pub recorder: RecorderConfig,
    /// Compact before a turn once the stored history passes this many estimated tokens
    /// (keeping the last [`COMPACT_KEEP_TURNS`] user turns); `None` never compacts.
    pub compact_at_tokens: Option<u64>,
    /// Test hook: a pause between saving an interrupted turn's partial text and marking the
    /// session, so a test can land a second Ctrl+C mid-save. Zero in real use.
    pub interrupt_save_pause: Duration,
}

impl AgentConfig {
    /// Defaults around `provider`: read-only, 60 s stall timeout, 8 iterations.
    pub fn new(provider: ProviderConfig) -> Self {
        Self {
            provider,
            model: None,
            permission: PermissionMode::default(),
            stall_timeout: Duration::from_secs(60),
            max_iterations: 8,
            recorder: RecorderConfig::default(),
            compact_at_tokens: Some(DEFAULT_COMPACT_AT_TOKENS),
            interrupt_save_pause: Duration::ZERO,
        }
    }
}

/// Which session a loop works on.
#[derive(Debug, Clone)]
pub enum SessionTarget {
    /// A new session of this project path.
    New {
        /// The project directory.
        project: String,
    },
    /// An existing session (resumed: an interrupted one gets "Continue from where you left
    /// off." and becomes active).
    Resume(SessionId),
    /// [`SessionTarget::Resume`] of a session whose meta the caller has just read (to learn
    /// its provider pin): the loop takes it instead of reading `meta.json` again.
    Known(Box<SessionMeta>),
}

/// What the loop reports while it runs (for printing or streaming to a client).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Answer text, as streamed.
    Text(String),
    /// A model response ended (after its text, if any).
    ResponseEnd,
    /// A tool is about to run.
    ToolStarted {
        /// Tool name.
        name: String,
        /// Its arguments.
        args: Value,
    },
    /// A tool returned.
    ToolFinished {
        /// Tool name.
        name: String,
        /// Whether it failed.
        failed: bool,
    },
    /// A tool call was refused.
    ToolDenied {
        /// Tool name.
        name: String,
        /// The refusal text handed to the model.
        reason: String,
    },
    /// The history was compacted before the turn (`compact.occurred` is in the log).
    Compacted {
        /// Estimated tokens before.
        tokens_before: u64,
        /// Estimated tokens after (kept messages plus the summary).
        tokens_after: u64,
    },
    /// The history is past the threshold and compaction cannot bring it under (said once per
    /// loop).
    CompactionShort {
        /// Estimated tokens of the history (kept messages plus the summary, when compacted).
        tokens: u64,
        /// The threshold.
        limit: u64,
        /// Why it cannot be brought under.
        reason: String,
    },
}

/// How a model stream ended.
enum StreamEnd {
    Complete(Completion),
    Aborted(Completion),
    Stalled(String),
    Failed(String),
}

/// Where an interrupt caught the turn.
enum Caught {
    /// Mid-stream, with the text streamed so far.
    Streaming(String),
    /// Between steps: the turn's last assistant message (if any) is the target.
    Between,
    /// A tool was stopped; its message is already appended, marked.
    ToolAppended(String),
}

/// A session held open for agent turns. Holds the session's write lock and its rollout log's
/// lock until dropped.
pub struct AgentLoop {
    writer: SessionWriter,
    recorder: Recorder,
    provider: Box<dyn Provider>,
    provider_name: &'static str,
    meta: SessionMeta,
    messages: Vec<StoredMessage>,
    summary: Option<String>,
    tools: Tools,
    interrupts: Interrupts,
    config: AgentConfig,
    observer: Box<dyn FnMut(&AgentEvent) + Send>,
    /// The assistant message appended last in the current turn.
    target: Option<String>,
    resumed_after_interrupt: bool,
    /// The next turn's number: past both `turnCount` and every turn id in the log, so ids stay
    /// unique even after a run that died before ending its turn.
    next_turn: u64,
    /// Whether the loop has said that compaction cannot bring the history under the threshold.
    compaction_short_said: bool,
}

impl std::fmt::Debug for AgentLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoop")
            .field("session", &self.meta.id)
            .field("provider", &self.provider_name)
            .field("model", &self.meta.model)
            .finish_non_exhaustive()
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn title_from(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut t: String = line.trim().chars().take(60).collect();
    if line.trim().chars().count() > 60 {
        t.push('…');
    }
    t
}

/// The session `--continue` resumes in `project` (else it starts a new one): its most recent active or interrupted one
/// that is not an import no turn has run in (someone else's history, whatever its times say:
/// resumed by id only).
pub fn continue_candidate(store: &SessionStore, project: &str) -> Result<Option<SessionMeta>> {
    let listing = store.list(&ListFilter {
        project_path: Some(project.to_owned()),
        ..ListFilter::default()
    })?;
    Ok(listing.sessions.into_iter().find(|m| {
        matches!(m.status, SessionStatus::Active | SessionStatus::Interrupted)
            && !m.is_untouched_import()
    }))
}

/// Checks a resumed session's pin against the loop's provider (refused when it is of another
/// family) and pins what it lacks: the provider of an unpinned session, and the model (the
/// pinned one stays unless a model is given explicitly). The meta after it.
fn pin(
    writer: &mut SessionWriter,
    meta: SessionMeta,
    config: &AgentConfig,
    id: &SessionId,
) -> Result<SessionMeta> {
    let provider_name = config.provider.name();
    let unpinned = meta.provider.trim().is_empty();
    if !unpinned && Family::of(&meta.provider) != Some(config.provider.family()) {
        return Err(Error::Failed(format!(
            "cannot resume session {id}: it is pinned to provider {}{}, not {provider_name}; \
             start a new session to use {provider_name}",
            meta.provider,
            meta.model
                .as_deref()
                .map(|m| format!("/{m}"))
                .unwrap_or_default(),
        )));
    }
    let model = config
        .model
        .clone()
        .or_else(|| meta.model.clone())
        .or_else(|| config.provider.default_model());
    if meta.model == model && !unpinned {
        return Ok(meta);
    }
    Ok(writer.update_meta(|m| {
        m.model = model;
        if unpinned {
            m.provider = provider_name.to_owned();
        }
    })?)
}

impl AgentLoop {
    /// Opens `target` in `store` for turns: resolves (or creates) the session, resumes it,
    /// pins provider and model in its meta, and opens its rollout log. SIGINT reaches the
    /// loop's turns through `interrupts` (install its handler separately).
    pub fn open(
        store: &SessionStore,
        target: SessionTarget,
        config: AgentConfig,
        interrupts: Interrupts,
    ) -> Result<Self> {
        let provider_name = config.provider.name();
        let new_session = |project: String| -> Result<SessionId> {
            let model = config
                .model
                .clone()
                .or_else(|| config.provider.default_model());
            Ok(store.create(NewSession {
                title: String::new(),
                project_path: project,
                provider: provider_name.to_owned(),
                model,
            })?)
        };
        // A new session is pinned as it is created; a resumed one is checked against its pin.
        let (id, created, known) = match target {
            SessionTarget::New { project } => (new_session(project)?, true, None),
            SessionTarget::Resume(id) => (id, false, None),
            SessionTarget::Known(meta) => (SessionId::new(meta.id.as_str())?, false, Some(*meta)),
        };
        let found = match known {
            Some(meta) => meta,
            None => store.meta(&id)?,
        };
        if found.project_path_from_bundle() {
            // An older version's import: `projectPath` is the sender's, not a directory the
            // user chose, so it never becomes the tools' root.
            return Err(Error::Failed(format!(
                "session {id} was imported by an older freecode, which took its project \
                 directory {} from the bundle; import the bundle again with \
                 `freecode session import SOURCE --project DIR`",
                found.project_path
            )));
        }
        let was_interrupted = found.status == SessionStatus::Interrupted;
        let context = store.resume(&id)?;
        let mut writer = store.writer(&id)?;
        let mut meta = context.meta;
        // A session keeps the provider it is pinned to: its history is that provider's
        // conversation (canned answers must never be appended to a real one, nor a real one
        // sent to the scripted provider). Only an unpinned session takes the loop's provider.
        // A new session was pinned as it was created: nothing to check.
        if !created {
            meta = pin(&mut writer, meta, &config, &id)?;
        }
        let project = std::path::PathBuf::from(&meta.project_path);
        // The tools are rooted only where the path says, read as it is written: never a
        // relative path (resolved from wherever this process runs) or one that climbs out
        // with `..` (an older version's import kept a source's `/.x/../../etc` as it came).
        if !project.is_absolute()
            || project
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(Error::Failed(format!(
                "session {id}'s project directory {:?} is not an absolute path without `..`, so \
                 the tools would not be rooted where it says; import the session again \
                 (`freecode import AGENT PATH --project DIR` names the directory)",
                meta.project_path
            )));
        }
        let tools = Tools::new(&project, config.permission).map_err(|e| {
            Error::Failed(format!(
                "the session's project directory {} is not usable: {e}",
                project.display()
            ))
        })?;
        let recorder = Recorder::open(store.home(), &id, config.recorder)?;
        let mut next_turn = meta.turn_count.saturating_add(1);
        if recorder.is_enabled() {
            // Turn numbers only grow in the log: the last `turn.started` (read from the end,
            // not the whole log) is past every earlier one.
            let last = last_event_where(recorder.path(), |e| {
                matches!(e.kind, EventKind::TurnStarted { .. })
            })?;
            if let Some(EventKind::TurnStarted { turn_id }) = last.map(|e| e.kind)
                && let Some(n) = turn_number(&turn_id)
            {
                next_turn = next_turn.max(n.saturating_add(1));
            }
        }
        Ok(Self {
            writer,
            recorder,
            provider: config.provider.build(config.stall_timeout),
            provider_name,
            meta,
            messages: context.messages,
            summary: context.summary,
            tools,
            interrupts,
            config,
            observer: Box::new(|_| {}),
            target: None,
            resumed_after_interrupt: was_interrupted,
            next_turn,
            compaction_short_said: false,
        })
    }

    /// Reports progress to `f` (streamed text, tool calls).
    pub fn on_event(mut self, f: impl FnMut(&AgentEvent) + Send + 'static) -> Self {
        self.observer = Box::new(f);
        self
    }

    /// The session id.
    pub fn session_id(&self) -> &SessionId {
        self.writer.id()
    }

    /// The session's meta as of the last change.
    #[allow(dead_code, reason = "API for the JSON-RPC server's session.send")]
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// Whether opening resumed an interrupted session (and persisted "Continue…").
    pub fn resumed_after_interrupt(&self) -> bool {
        self.resumed_after_interrupt
    }

    fn system_prompt(&self) -> String {
        let mut s = format!(
            "You are freecode, a coding agent working in the project directory {}. Use the \
             tools to look at the project: read_file and list_dir take paths relative to it; \
             write_file needs the workspace-write permission (the current mode is {}). Answer \
             concisely.",
            self.tools.root().display(),
            self.config.permission.as_str()
        );
        if let Some(summary) = &self.summary {
            s.push_str("\n\nSummary of the earlier conversation:\n");
            s.push_str(summary);
        }
        s
    }

    fn emit(&mut self, e: AgentEvent) {
        (self.observer)(&e);
    }

    fn append(&mut self, msg: StoredMessage) -> Result<()> {
        self.writer.append(&msg)?;
        if msg.role == Role::Assistant {
            self.interrupts
                .set_target(self.writer.id().as_str(), &msg.id);
            self.target = Some(msg.id.clone());
        }
        self.messages.push(msg);
        Ok(())
    }

    /// Runs one turn on `prompt`. `interrupt` is lowered first; raising it (Ctrl+C through
    /// [`Interrupts`], or the caller) stops the turn, which then saves what it had and returns
    /// [`TurnStatus::Interrupted`]. Model failures are outcomes ([`TurnStatus::Failed`]);
    /// `Err` means the session or its log could not be written.
    pub fn run_turn(&mut self, prompt: &str, interrupt: &InterruptFlag) -> Result<TurnOutcome> {
        interrupt.reset();
        let sid = self.writer.id().to_string();
        self.interrupts.begin_turn(&sid, interrupt);
        self.target = None;
        let result = self.turn(prompt, interrupt);
        self.interrupts.end_turn(&sid);
        self.target = None;
        result
    }

    /// Compacts the session when its history has grown past `compact_at_tokens`: the older
    /// turns go into an extractive summary (the previous summary included), the last
    /// [`COMPACT_KEEP_TURNS`] user turns stay, and `compact.occurred` is recorded — all through
    /// the writer's journalled compaction.
    fn compact_if_needed(&mut self) -> Result<()> {
        let Some(limit) = self.config.compact_at_tokens else {
            return Ok(());
        };
        let tokens: u64 = self
            .messages
            .iter()
            .map(|m| estimate_tokens(&m.text()))
            .sum();
        if tokens <= limit {
            return Ok(());
        }
        let cut = keep_last_n_user_turns(&self.messages, COMPACT_KEEP_TURNS)
            .map_err(|e| Error::Internal(e.to_string()))?;
        if cut == 0 {
            self.compaction_short(
                tokens,
                limit,
                format!(
                    "the whole history is its last {COMPACT_KEEP_TURNS} user turns, which \
                     compaction keeps"
                ),
            );
            return Ok(());
        }
        // The summary has a budget, a small fraction of the threshold, so that it never grows
        // with the history it replaces.
        let budget = (limit / SUMMARY_SHARE).max(SUMMARY_MIN_TOKENS);
        let summary =
            extractive_summary_within(self.summary.as_deref(), &self.messages[..cut], budget);
        let outcome =
            self.writer
                .compact(COMPACT_KEEP_TURNS, &summary, Some(&mut self.recorder))?;
        if outcome.compacted {
            self.messages = read_messages_at(&self.writer.paths().messages())?.messages;
            let summary_tokens = estimate_tokens(&summary);
            self.summary = Some(summary);
            self.emit(AgentEvent::Compacted {
                tokens_before: outcome.tokens_before,
                tokens_after: outcome.tokens_after,
            });
            if outcome.tokens_after > limit {
                self.compaction_short(
                    outcome.tokens_after,
                    limit,
                    format!(
                        "the last {COMPACT_KEEP_TURNS} user turns, which compaction keeps, are \
                         ~{} tokens themselves (the summary ~{summary_tokens})",
                        outcome.tokens_after.saturating_sub(summary_tokens)
                    ),
                );
            }
        }
        Ok(())
    }

    /// Reports, once per loop, that the history stays past the threshold.
    fn compaction_short(&mut self, tokens: u64, limit: u64, reason: String) {
        if std::mem::replace(&mut self.compaction_short_said, true) {
            return;
        }
        self.emit(AgentEvent::CompactionShort {
            tokens,
            limit,
            reason,
        });
    }

    fn turn(&mut self, prompt: &str, interrupt: &InterruptFlag) -> Result<TurnOutcome> {
        self.compact_if_needed()?;
        let turn_no = self.next_turn;
        self.next_turn = self.next_turn.saturating_add(1);
        if self.meta.title.is_empty() {
            let title = title_from(prompt);
            self.meta = self.writer.update_meta(|m| m.title = title)?;
        }
        let now = freecode_store::now_ms();
        self.append(StoredMessage::new(
            new_id(),
            Role::User,
            vec![Part::text(prompt)],
            now,
        ))?;
        let mut out = TurnOutcome {
            session_id: self.writer.id().to_string(),
            status: TurnStatus::IterationLimit,
            text: String::new(),
            tool_calls: Vec::new(),
            model_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            provider: self.provider_name.to_owned(),
            model: self.meta.model.clone(),
            turn: turn_no,
            error: None,
            interrupted_message_id: None,
        };
        let mut turn_id = format!("turn-{turn_no}-0");
        for iteration in 0..self.config.max_iterations {
            if interrupt.is_raised() {
                self.interrupted(&mut out, &turn_id, Caught::Between)?;
                break;
            }
            turn_id = format!("turn-{turn_no}-{iteration}");
            match self.iteration(&turn_id, interrupt, &mut out)? {
                Some(Caught::Streaming(partial)) if partial.is_empty() => {
                    self.interrupted(&mut out, &turn_id, Caught::Between)?;
                }
                Some(caught) => self.interrupted(&mut out, &turn_id, caught)?,
                None => {}
            }
            if out.status != TurnStatus::IterationLimit {
                break;
            }
        }
        if out.status == TurnStatus::IterationLimit {
            tracing::warn!(
                "stopped after {} model calls: the model kept calling tools",
                self.config.max_iterations
            );
        }
        let tokens = out.input_tokens + out.output_tokens;
        self.meta = self.writer.end_turn(tokens)?;
        self.recorder.sync()?;
        out.model = self.meta.model.clone();
        out.turn = self.meta.turn_count;
        Ok(out)
    }

    /// One model call and its tool calls. `Some` when an interrupt caught it; otherwise sets
    /// `out.status` when the turn is over.
    fn iteration(
        &mut self,
        turn_id: &str,
        interrupt: &InterruptFlag,
        out: &mut TurnOutcome,
    ) -> Result<Option<Caught>> {
        self.recorder.turn_started(turn_id)?;
        let prompt = build_prompt(&self.system_prompt(), &self.messages);
        let model = self.meta.model.clone();
        let req = ChatRequest {
            model: model.clone(),
            messages: prompt.messages,
            tools: self.tools.definitions(),
        };
        let call = self.recorder.model_request(
            turn_id,
            ModelRequest {
                provider: self.provider_name.to_owned(),
                model: model.unwrap_or_else(|| PROVIDER_DEFAULT.to_owned()),
                message_count: req.messages.len() as u64,
                tool_count: self.tools.count(),
                prompt_chars: prompt.prompt_chars,
                streamed: true,
            },
        )?;
        out.model_calls += 1;
        // The guard: whatever ends what follows — a result, an error or a panic — the request
        // is closed in the log. The paths below close it themselves (`take`); one that leaves
        // it open (an error, a panic) has it closed here with the reason.
        let mut open = Some(call);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.answer(turn_id, &req, &mut open, interrupt, out)
        }));
        if let Some(call) = open.take() {
            let reason = match &result {
                Ok(Ok(_)) => "the agent left the call without a result".to_owned(),
                Ok(Err(e)) => format!("the agent stopped: {e:#}"),
                Err(payload) => format!("the agent panicked: {}", panic_message(payload.as_ref())),
            };
            let closed = call
                .error(&mut self.recorder, ModelErrorKind::Abort, &reason)
                .and_then(|()| self.recorder.sync());
            if let Err(e) = closed {
                tracing::warn!("cannot record the end of the model call ({reason}): {e}");
            }
        }
        match result {
            Ok(r) => r,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// The rest of one iteration once its request is recorded: the stream, the response (or
    /// error) that closes `call`, and the tool calls.
    fn answer(
        &mut self,
        turn_id: &str,
        req: &ChatRequest,
        call: &mut Option<ModelCall>,
        interrupt: &InterruptFlag,
        out: &mut TurnOutcome,
    ) -> Result<Option<Caught>> {
        let rx = self.provider.start(req);
        let Some(open) = call.as_mut() else {
            return Err(Error::Internal("the model call is already closed".into()));
        };
        let end = self.consume(&rx, open, interrupt)?;
        let Some(call) = call.take() else {
            return Err(Error::Internal("the model call is already closed".into()));
        };
        let completion = match end {
            StreamEnd::Complete(c) => c,
            StreamEnd::Aborted(c) => {
                drop(rx);
                call.error(
                    &mut self.recorder,
                    ModelErrorKind::Abort,
                    "interrupted by the user",
                )?;
                if !c.text.is_empty() {
                    self.emit(AgentEvent::ResponseEnd);
                    push_line(&mut out.text, &c.text);
                }
                return Ok(Some(Caught::Streaming(c.text)));
            }
            StreamEnd::Stalled(msg) => {
                call.error(&mut self.recorder, ModelErrorKind::Stall, &msg)?;
                return self.failed(out, "stall", msg);
            }
            StreamEnd::Failed(msg) => {
                call.error(&mut self.recorder, ModelErrorKind::Provider, &msg)?;
                return self.failed(out, "provider", msg);
            }
        };
        let usage = completion.usage.clone().unwrap_or_default();
        let calls = completion.calls();
        call.response(
            &mut self.recorder,
            ModelResponse {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cache_read_tokens: usage.cache_read_tokens,
                reasoning_tokens: usage.reasoning_tokens,
                tool_calls: calls.iter().map(|c| c.name.clone()).collect(),
                text_chars: completion.text.chars().count() as u64,
                thinking_chars: completion.thinking_chars,
                echoed_model: completion.model.clone(),
                ..ModelResponse::default()
            },
        )?;
        out.input_tokens += usage.input_tokens.unwrap_or(0);
        out.output_tokens += usage.output_tokens.unwrap_or(0);
        if self.meta.model.is_none()
            && let Some(echoed) = completion.model.clone()
        {
            self.meta = self.writer.update_meta(|m| m.model = Some(echoed))?;
        }
        if !completion.text.is_empty() {
            self.emit(AgentEvent::ResponseEnd);
            push_line(&mut out.text, &completion.text);
        }
        // SPEC §4.4: usage on the text line, else on the first tool line.
        let mut usage_slot = completion.usage.as_ref().map(|u| {
            let mut s = Usage::new(u.input_tokens.unwrap_or(0), u.output_tokens.unwrap_or(0));
            s.cache_read_input_tokens = u.cache_read_tokens;
            s.reasoning_tokens = u.reasoning_tokens;
            s
        });
        if !completion.text.is_empty() || calls.is_empty() {
            let mut msg = StoredMessage::new(
                new_id(),
                Role::Assistant,
                vec![Part::text(completion.text.clone())],
                freecode_store::now_ms(),
            );
            msg.usage = usage_slot.take().map(Box::new);
            self.append(msg)?;
        }
        if calls.is_empty() {
            out.status = TurnStatus::Completed;
            return Ok(None);
        }
        for c in calls {
            if interrupt.is_raised() {
                return Ok(Some(Caught::Between));
            }
            let (args, bad_args) = if c.arguments.trim().is_empty() {
                (Value::Object(serde_json::Map::new()), None)
            } else {
                match serde_json::from_str::<Value>(&c.arguments) {
                    Ok(v @ Value::Object(_)) => (v, None),
                    Ok(_) => (
                        Value::Object(serde_json::Map::new()),
                        Some("arguments must be a JSON object".to_owned()),
                    ),
                    Err(e) => (
                        Value::Object(serde_json::Map::new()),
                        Some(format!("arguments are not valid JSON: {e}")),
                    ),
                }
            };
            let mut msg_for = |result: &str| {
                let mut m = StoredMessage::new(
                    new_id(),
                    Role::Assistant,
                    vec![Part::tool(c.name.clone(), args.clone(), result)],
                    freecode_store::now_ms(),
                );
                m.usage = usage_slot.take().map(Box::new);
                m
            };
            if let Decision::Deny { source, reason } = self.tools.check(&c.name, &args) {
                self.recorder
                    .deny(turn_id, &c.name, args.clone(), source, &reason)?;
                self.emit(AgentEvent::ToolDenied {
                    name: c.name.clone(),
                    reason: reason.clone(),
                });
                let msg = msg_for(&reason);
                self.append(msg)?;
                out.tool_calls.push(ToolCallSummary {
                    name: c.name.clone(),
                    args: args.clone(),
                    outcome: "denied",
                    result: reason,
                });
                continue;
            }
            self.emit(AgentEvent::ToolStarted {
                name: c.name.clone(),
                args: args.clone(),
            });
            let tc = self
                .recorder
                .function_call(turn_id, &c.name, args.clone())?;
            let result = match bad_args {
                Some(e) => Some(Err(e)),
                None => self.run_tool(&c.name, &args, interrupt),
            };
            let Some(result) = result else {
                // Stopped by Ctrl+C: the call is closed, its line saved and marked.
                tc.output(&mut self.recorder, INTERRUPTED_OUTPUT, true)?;
                let mut msg = msg_for(INTERRUPTED_OUTPUT);
                msg.interrupted = Some(true);
                let id = msg.id.clone();
                self.append(msg)?;
                out.tool_calls.push(ToolCallSummary {
                    name: c.name.clone(),
                    args: args.clone(),
                    outcome: "interrupted",
                    result: INTERRUPTED_OUTPUT.to_owned(),
                });
                return Ok(Some(Caught::ToolAppended(id)));
            };
            let (text, failed) = match result {
                Ok(t) => (t, false),
                Err(e) => (format!("error: {e}"), true),
            };
            tc.output(&mut self.recorder, &text, failed)?;
            self.emit(AgentEvent::ToolFinished {
                name: c.name.clone(),
                failed,
            });
            let msg = msg_for(&text);
            self.append(msg)?;
            out.tool_calls.push(ToolCallSummary {
                name: c.name.clone(),
                args: args.clone(),
                outcome: if failed { "failed" } else { "ok" },
                result: text,
            });
        }
        Ok(None)
    }

    fn failed(
        &mut self,
        out: &mut TurnOutcome,
        kind: &str,
        message: String,
    ) -> Result<Option<Caught>> {
        out.status = TurnStatus::Failed;
        out.error = Some(TurnError {
            kind: kind.to_owned(),
            message,
        });
        Ok(None)
    }

    /// Runs a tool in a worker thread, polling the interrupt flag; `None` when interrupted
    /// (the worker is abandoned — the tools are read-only or bounded).
    fn run_tool(
        &self,
        name: &str,
        args: &Value,
        interrupt: &InterruptFlag,
    ) -> Option<Result<String, String>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let tools = self.tools.clone();
        let (name, args) = (name.to_owned(), args.clone());
        let spawned = std::thread::Builder::new()
            .name("tool".into())
            .spawn(move || {
                let _ = tx.send(tools.run(&name, &args));
            });
        if let Err(e) = spawned {
            return Some(Err(format!("cannot start the tool: {e}")));
        }
        loop {
            if interrupt.is_raised() {
                return None;
            }
            match rx.recv_timeout(TICK) {
                Ok(r) => return Some(r),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Some(Err("the tool stopped without a result".into()));
                }
            }
        }
    }

    /// Reads a model stream to its end, a stall, a failure or an interrupt.
    fn consume(
        &mut self,
        rx: &Receiver<Wire>,
        call: &mut ModelCall,
        interrupt: &InterruptFlag,
    ) -> Result<StreamEnd> {
        let stall = self.config.stall_timeout;
        let mut parser = SseParser::default();
        let mut completion = Completion::default();
        let mut last_bytes = Instant::now();
        loop {
            if interrupt.is_raised() {
                return Ok(StreamEnd::Aborted(completion));
            }
            let waited = last_bytes.elapsed();
            if waited >= stall {
                return Ok(StreamEnd::Stalled(format!(
                    "no data from the provider for {:.1} s",
                    stall.as_secs_f64()
                )));
            }
            let wire = match rx.recv_timeout(TICK.min(stall - waited)) {
                Ok(w) => w,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Ok(StreamEnd::Failed(
                        "the provider stopped without a result".into(),
                    ));
                }
            };
            let payloads = match wire {
                Wire::Chunk(bytes) => {
                    last_bytes = Instant::now();
                    call.first_token(&mut self.recorder)?;
                    #[cfg(debug_assertions)]
                    fail_mid_stream_for_test()?;
                    match parser.feed(&bytes) {
                        Ok(p) => p,
                        Err(e) => return Ok(StreamEnd::Failed(e.to_string())),
                    }
                }
                Wire::End => {
                    match parser.finish() {
                        Ok(Some(p)) => {
                            if let Err(e) = completion.apply(&p) {
                                return Ok(StreamEnd::Failed(e.to_string()));
                            }
                        }
                        Ok(None) => {}
                        Err(e) => return Ok(StreamEnd::Failed(e.to_string())),
                    }
                    return Ok(if completion.is_complete() {
                        StreamEnd::Complete(completion)
                    } else {
                        StreamEnd::Failed(
                            "the stream ended before the response was complete".into(),
                        )
                    });
                }
                Wire::Failed(msg) => return Ok(StreamEnd::Failed(msg)),
            };
            for p in payloads {
                match completion.apply(&p) {
                    Ok(Delta::Text(t)) => self.emit(AgentEvent::Text(t)),
                    Ok(Delta::Other) => {}
                    Ok(Delta::Done) => return Ok(StreamEnd::Complete(completion)),
                    Err(e) => return Ok(StreamEnd::Failed(e.to_string())),
                }
            }
        }
    }

    /// Saves an interrupted turn: the partial text appended as a marked message, or the
    /// turn's last assistant message marked; the status becomes `interrupted`.
    fn interrupted(&mut self, out: &mut TurnOutcome, turn_id: &str, caught: Caught) -> Result<()> {
        let marked = match caught {
            Caught::Streaming(partial) => {
                let mut msg = StoredMessage::new(
                    new_id(),
                    Role::Assistant,
                    vec![Part::text(partial)],
                    freecode_store::now_ms(),
                );
                msg.interrupted = Some(true);
                let id = msg.id.clone();
                self.append(msg)?;
                self.pause_for_test();
                self.writer.mark_interrupted(None)?;
                Some(id)
            }
            Caught::ToolAppended(id) => {
                self.pause_for_test();
                self.writer.mark_interrupted(None)?;
                Some(id)
            }
            Caught::Between => {
                let target = self.target.clone();
                if self.writer.mark_interrupted(target.as_deref())? {
                    target
                } else {
                    None
                }
            }
        };
        self.meta = self.writer.meta()?;
        self.recorder
            .turn_aborted(turn_id, "interrupted by the user")?;
        out.status = TurnStatus::Interrupted;
        out.interrupted_message_id = marked;
        Ok(())
    }

    fn pause_for_test(&self) {
        if !self.config.interrupt_save_pause.is_zero() {
            std::thread::sleep(self.config.interrupt_save_pause);
        }
    }
}

/// `n` of a turn id `turn-<n>-<i>` (or the original's `turn-<n>`).
/// The text of a panic's payload (a `&str` or a `String`, as `panic!` makes them).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}

/// Test hook of debug builds only: `FREECODE_TEST_FAIL_MID_STREAM=panic|error` makes the loop
/// panic, or fail, right after a model call's first chunk — with the call open, as a bug
/// there would leave it.
#[cfg(debug_assertions)]
fn fail_mid_stream_for_test() -> Result<()> {
    match std::env::var("FREECODE_TEST_FAIL_MID_STREAM").as_deref() {
        Ok("panic") => std::panic::panic_any("test hook: a panic mid-stream"),
        Ok("error") => Err(Error::Internal("test hook: an error mid-stream".into())),
        _ => Ok(()),
    }
}

fn turn_number(turn_id: &str) -> Option<u64> {
    let rest = turn_id.strip_prefix("turn-")?;
    rest.split('-').next()?.parse().ok()
}

fn push_line(text: &mut String, line: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(line);
}

#[cfg(test)]
mod tests;
