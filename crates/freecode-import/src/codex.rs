//! OpenAI Codex CLI rollouts (`rollout-….jsonl`, `.jsonl.zst`) read into [`ImportedSession`]s.
//!
//! **Where.** `${CODEX_HOME:-~/.codex}`: `sessions/YYYY/MM/DD/rollout-….jsonl` and the flat
//! `archived_sessions/`. A compressed `rollout-….jsonl.zst` is decompressed as a stream; when
//! both the plain and the compressed file exist, the plain one is read. `session_index.jsonl`
//! beside `sessions/` (thread names, the last entry for an id wins) is a side file of every unit,
//! so a rename re-reads them.
//!
//! **Generations.** Legacy (a bare `{id, timestamp, instructions, git}` first line, then bare
//! ResponseItems and `{"record_type":"state"}` lines), the envelope `{timestamp, type, payload}`,
//! and the current envelope with extra top-level record types (`world_state`,
//! `inter_agent_communication…`, …) and keys (`ordinal`). Types this reader does not know are
//! skipped and reported once per type with the first line they were seen on.
//!
//! **Field map.**
//! - `session_meta` (the first one wins): `id` → `source_id`; `cwd` → `project_path` (else the
//!   first `turn_context.cwd`); `cli_version` → `version`; `model_provider` → `provider`;
//!   `timestamp` → `created_ms`; `source: {"subagent": …}` with `parent_thread_id` (or
//!   `thread_spawn.parent_thread_id`) → [`ParentKind::Subagent`], else `forked_from_id` →
//!   [`ParentKind::Fork`].
//! - `turn_context.model` → the model of the responses after it, and the session's (the last).
//! - User turns: `event_msg/user_message` (`message`, data-URL `images`) — the prompt as typed,
//!   without the injected context (older builds tag that `kind: user_instructions` or
//!   `environment_context`: those are skipped). Each prompt is also a `response_item` message of role `user`;
//!   those are used only in files without any `user_message` event (the legacy generation), with
//!   injected context dropped (`<environment_context>`, `<user_instructions>`,
//!   `# AGENTS.md instructions for …`, `<permissions instructions>`, turn-aborted notices).
//!   `developer` and `system` messages are never imported.
//! - Responses: one [`Response`] per model call — the run of model output items
//!   (`reasoning`, assistant `message`, `function_call`, `custom_tool_call`, `local_shell_call`,
//!   other `*_call`s) between two inputs (a prompt, a tool output, a compaction, a turn's end).
//!   Assistant text comes from the `response_item` message only: the `event_msg/agent_message`
//!   copy (and `agent_reasoning`) is the UI's duplicate and is not imported. Reasoning is not a
//!   part type: it is left out. A run with no text or call (reasoning only) becomes no message.
//! - Tool calls: `function_call{name, arguments (a JSON string; a non-object is wrapped as
//!   `{"arguments": …}`)}`, `custom_tool_call{name, input}` (args `{"input": …}`),
//!   `local_shell_call{action}` (name `local_shell`), other `*_call`s by their type; paired with
//!   their `*_output` by `call_id`, `started_ms`/`finished_ms` from the two envelope timestamps.
//!   The output text: a plain string, the `output` of 0.39's stringified `{output, metadata}`
//!   (a non-zero `metadata.exit_code` is [`ToolOutcome::Error`]), or the texts of a content list.
//!   An output saying the command or patch was "rejected by user" is [`ToolOutcome::Denied`]; a
//!   failed `exec_command_end`, `patch_apply_end` or `mcp_tool_call_end` marks its call
//!   [`ToolOutcome::Error`]; a call without output is [`ToolOutcome::Missing`]. Calls without a
//!   `call_id` (`web_search_call`, `image_generation_call`) end when they are recorded.
//! - Usage: a file with `token_usage_record` records (0.16x and later: one per response, right
//!   after its items, naming its `response_id`) takes each record's `usage` for the response
//!   just recorded, and its `token_count` snapshots are not used. Otherwise
//!   `event_msg/token_count.info.last_token_usage`, once per snapshot whose
//!   `total_token_usage` differs from the previous one (identical snapshots repeat): `inputTokens`
//!   = `input_tokens` (OpenAI's cached ⊂ input, kept as is), `cacheReadInputTokens` =
//!   `cached_input_tokens`, `outputTokens` = `output_tokens`, `reasoningTokens` =
//!   `reasoning_output_tokens`, `cacheWriteInputTokens` = `cache_write_input_tokens` when
//!   present. Current builds write a snapshot right after the items of the response it
//!   measured, 0.39 right before them: which one a file does is decided by its majority (were
//!   its snapshots written while a response was open?), and each snapshot goes on that response
//!   (one outside the file, in an excerpt, is left out).
//! - `task_complete` → [`Item::TurnEnd`] (`duration_ms`; its `error.message` → [`Item::Error`]),
//!   `turn_aborted` → [`Item::TurnEnd`] with the reason, `error` → [`Item::Error`],
//!   `compacted{message}` → [`Item::Compaction`] (`before_tokens`: the last call's
//!   `total_tokens`); a `context_compacted` event not right after a `compacted` record is a
//!   compaction without a summary. `thread_rolled_back{num_turns}` drops the last `num_turns`
//!   user turns and everything after them, as Codex does on replay.
//! - Sub-agents the parent ran: `collab_agent_spawn_end{new_thread_id, prompt}` →
//!   [`Item::Subagent`], stopped by the `collab_waiting_end`/`collab_close_end` status that ends
//!   it (`{"completed": text}` is its result). Their own rollouts are child sessions.
//! - Title: the thread's name in `session_index.jsonl`, else the last `thread_name_updated`,
//!   else the first line of the first prompt.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use freecode_core::{Part, Usage};
use serde_json::{Map, Value, json};

use crate::lines::{self, Line};
use crate::model::{
    Compaction, Content, ErrorNote, ImportedSession, Item, ParentKind, ParentLink, Read, Response,
    SubagentRun, ToolCall, ToolOutcome, TurnEnd, UserTurn, parse_iso_ms,
};
use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// The thread-name index beside `sessions/`.
pub const INDEX_FILE: &str = "session_index.jsonl";
/// How deep below a root `discover` looks (`sessions/YYYY/MM/DD/` is 4).
const MAX_DEPTH: usize = 6;
/// Longest title taken from a prompt, in characters.
const TITLE_CHARS: usize = 120;

/// Where Codex keeps its sessions: `$CODEX_HOME`, else `~/.codex`.
pub fn default_roots(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    if let Some(home) = var("CODEX_HOME").filter(|v| !v.is_empty()) {
        return vec![PathBuf::from(home)];
    }
    match var("HOME").filter(|v| !v.is_empty()) {
        Some(home) => vec![PathBuf::from(home).join(".codex")],
        None => Vec::new(),
    }
}

/// The rollouts under `root` (a Codex home, a `sessions/` tree, any directory below it, or one
/// rollout file), sorted, the plain file preferred over its `.zst`. Links below the root are not
/// followed.
pub fn discover(root: &Path, issues: &mut Vec<SourceIssue>) -> Vec<SourceUnit> {
    let meta = match std::fs::metadata(root) {
        Ok(meta) => meta,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                issues.push(SourceIssue::in_file(root, format!("cannot be read: {e}")));
            }
            return Vec::new();
        }
    };
    let index = index_near(root);
    if meta.is_file() {
        return vec![unit_of(root.to_owned(), index)];
    }
    if !meta.is_dir() {
        return Vec::new();
    }
    let mut files = Vec::new();
    let tops: Vec<PathBuf> = ["sessions", "archived_sessions"]
        .iter()
        .map(|name| root.join(name))
        .filter(|dir| is_real_dir(dir))
        .collect();
    if tops.is_empty() {
        walk(root, 0, &mut files, issues);
    } else {
        for top in &tops {
            walk(top, 0, &mut files, issues);
        }
    }
    files.sort();
    files.dedup();
    let plain: std::collections::HashSet<PathBuf> =
        files.iter().filter(|p| !is_zst(p)).cloned().collect();
    files
        .into_iter()
        .filter(|p| !is_zst(p) || !plain.contains(&p.with_extension("")))
        .map(|p| unit_of(p, index.clone()))
        .collect()
}

fn unit_of(path: PathBuf, index: Option<PathBuf>) -> SourceUnit {
    let mut unit = SourceUnit::file(Agent::Codex, path);
    unit.side_files.extend(index);
    unit
}

fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

fn is_zst(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

fn is_rollout_name(name: &str) -> bool {
    name.starts_with("rollout-") && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
}

/// `session_index.jsonl` in `root`, or beside the `sessions`/`archived_sessions` directory `root`
/// is in.
fn index_near(root: &Path) -> Option<PathBuf> {
    let direct = root.join(INDEX_FILE);
    if std::fs::symlink_metadata(&direct).is_ok_and(|m| m.is_file()) {
        return Some(direct);
    }
    root.ancestors()
        .find(|a| {
            a.file_name()
                .is_some_and(|n| n == "sessions" || n == "archived_sessions")
        })
        .and_then(Path::parent)
        .map(|home| home.join(INDEX_FILE))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>, issues: &mut Vec<SourceIssue>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            issues.push(SourceIssue::in_file(dir, format!("cannot be listed: {e}")));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            if entry.file_name().to_str().is_some_and(is_rollout_name) {
                issues.push(SourceIssue::in_file(&path, "a link: not followed"));
            }
        } else if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, out, issues);
            }
        } else if kind.is_file() && entry.file_name().to_str().is_some_and(is_rollout_name) {
            out.push(path);
        }
    }
}

/// Reads one rollout (and the thread names of its side `session_index.jsonl`).
pub fn read(unit: &SourceUnit) -> Result<Read, ReadError> {
    let path = unit.path.as_path();
    let mut issues = Vec::new();
    let mut state = State::new(path);
    if is_zst(path) {
        let file = File::open(path).map_err(|e| ReadError::io(path, e))?;
        let decoder = zstd::stream::read::Decoder::new(file).map_err(|e| ReadError::io(path, e))?;
        // A stream that fails mid-way (a torn `.zst`) keeps what came before.
        if let Err(e) = lines::for_each_line_in(
            path,
            BufReader::with_capacity(256 * 1024, decoder),
            &mut issues,
            |line| state.line(line),
        ) {
            issues.push(SourceIssue::at_line(
                path,
                e.line + 1,
                format!(
                    "compressed stream unreadable from here ({}): the rest is skipped",
                    e.source
                ),
            ));
        }
    } else {
        lines::for_each_line(path, &mut issues, |line| state.line(line))?;
    }
    let names = unit
        .side_files
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == INDEX_FILE))
        .and_then(|p| thread_names(p, &mut issues));
    let session = state.finish(names.as_deref(), &mut issues);
    Ok(Read {
        sessions: session.into_iter().collect(),
        issues,
    })
}

type Names = HashMap<String, String>;

struct CachedNames {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    names: Arc<Names>,
}

/// The last parsed index: every unit of one import shares the same file, so it is read once.
static NAMES: Mutex<Option<CachedNames>> = Mutex::new(None);

/// Thread id → name from `session_index.jsonl` (`{id, thread_name, updated_at}` lines, the last
/// for an id wins).
fn thread_names(path: &Path, issues: &mut Vec<SourceIssue>) -> Option<Arc<Names>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let modified = meta.modified().ok();
    if let Ok(cache) = NAMES.lock()
        && let Some(c) = cache.as_ref()
        && c.path == path
        && c.len == meta.len()
        && c.modified == modified
    {
        return Some(c.names.clone());
    }
    let mut names = Names::new();
    let mut local = Vec::new();
    let read = lines::for_each_line(path, &mut local, |line| {
        let Some(Value::Object(entry)) = lines::parse_json::<Value>(path, &line, &mut Vec::new())
        else {
            return;
        };
        let id = entry.get("id").and_then(Value::as_str);
        let name = entry
            .get("thread_name")
            .or_else(|| entry.get("name"))
            .and_then(Value::as_str);
        if let (Some(id), Some(name)) = (id, name) {
            names.insert(id.to_owned(), name.to_owned());
        }
    });
    if let Err(e) = read {
        issues.push(SourceIssue::in_file(
            path,
            format!("thread names unread: {e}"),
        ));
        return None;
    }
    let names = Arc::new(names);
    if let Ok(mut cache) = NAMES.lock() {
        *cache = Some(CachedNames {
            path: path.to_owned(),
            len: meta.len(),
            modified,
            names: names.clone(),
        });
    }
    Some(names)
}

/// Where a user turn came from: the two copies Codex writes of one prompt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Other,
    /// `response_item` message, role user.
    ItemUser,
    /// `event_msg/user_message`.
    EventUser,
}

/// Event types read for something else or deliberately not imported (UI copies, lifecycle).
const IGNORED_EVENTS: &[&str] = &[
    "agent_message",
    "agent_message_delta",
    "agent_reasoning",
    "agent_reasoning_delta",
    "agent_reasoning_raw_content",
    "agent_reasoning_section_break",
    "task_started",
    "turn_started",
    "exec_command_begin",
    "exec_command_output_delta",
    "patch_apply_begin",
    "mcp_tool_call_begin",
    "web_search_begin",
    "web_search_end",
    "image_generation_begin",
    "image_generation_end",
    "entered_review_mode",
    "exited_review_mode",
    "thread_goal_updated",
    "item_started",
    "item_completed",
    "sub_agent_activity",
    "guardian_assessment",
    "view_image_tool_call",
    "undo_started",
    "undo_completed",
    "thread_settings_applied",
    "dynamic_tool_call_request",
    "dynamic_tool_call_response",
    "plan_update",
    "turn_diff",
    "background_event",
    "stream_error",
    "warning",
    "deprecation_notice",
    "session_configured",
    "shutdown_complete",
    "exec_approval_request",
    "apply_patch_approval_request",
    "request_user_input",
    "mcp_startup_update",
    "mcp_startup_complete",
    "raw_response_item",
];

/// Top-level record types of the current generation that hold nothing we import.
const IGNORED_RECORDS: &[&str] = &[
    "world_state",
    "inter_agent_communication",
    "inter_agent_communication_metadata",
    "security_risk_score",
    "realtime_item",
];

/// Response items that are neither a message nor a call nor an output, and are not imported.
const IGNORED_ITEMS: &[&str] = &[
    "ghost_snapshot",
    "compaction",
    "compaction_summary",
    "agent_message",
    "other",
];

/// Texts that open an injected (not typed) user message.
const INJECTED: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions for",
    "<permissions instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
    "<INSTRUCTIONS>",
];

/// A usage object of Codex (`input_tokens`, `cached_input_tokens`, `output_tokens`,
/// `reasoning_output_tokens`, `cache_write_input_tokens`) as ours, and its `total_tokens`.
fn usage_of(u: &Map<String, Value>) -> (Usage, Option<u64>) {
    let count = |key: &str| u.get(key).and_then(Value::as_u64);
    let mut usage = Usage::new(
        count("input_tokens").unwrap_or(0),
        count("output_tokens").unwrap_or(0),
    );
    usage.cache_read_input_tokens = count("cached_input_tokens");
    usage.reasoning_tokens = count("reasoning_output_tokens");
    usage.cache_write_input_tokens = count("cache_write_input_tokens");
    (usage, count("total_tokens"))
}

struct State<'a> {
    path: &'a Path,
    issues: Vec<SourceIssue>,
    line: u64,
    records: u64,
    meta_seen: bool,
    id: Option<String>,
    cwd: Option<String>,
    turn_cwd: Option<String>,
    version: Option<String>,
    provider: Option<String>,
    parent: Option<ParentLink>,
    created_ms: Option<i64>,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    model: Option<String>,
    renamed: Option<String>,
    items: Vec<(Item, Origin)>,
    /// The response model output items go into, until an input closes it.
    open: Option<usize>,
    /// `call_id` → (item, content) of the call.
    calls: HashMap<String, (usize, usize)>,
    last_total: Option<Value>,
    /// Distinct usage snapshots: (items before it, whether a response was open, usage).
    snapshots: Vec<(usize, bool, Usage)>,
    /// `token_usage_record`s: (items before it, usage).
    usage_records: Vec<(usize, Usage)>,
    context_tokens: Option<u64>,
    event_users: bool,
    unknown: BTreeMap<String, (u64, u64)>,
}

impl<'a> State<'a> {
    fn new(path: &'a Path) -> Self {
        Self {
            path,
            issues: Vec::new(),
            line: 0,
            records: 0,
            meta_seen: false,
            id: None,
            cwd: None,
            turn_cwd: None,
            version: None,
            provider: None,
            parent: None,
            created_ms: None,
            first_ms: None,
            last_ms: None,
            model: None,
            renamed: None,
            items: Vec::new(),
            open: None,
            calls: HashMap::new(),
            last_total: None,
            snapshots: Vec::new(),
            usage_records: Vec::new(),
            context_tokens: None,
            event_users: false,
            unknown: BTreeMap::new(),
        }
    }

    fn unknown(&mut self, what: String) {
        let line = self.line;
        self.unknown
            .entry(what)
            .and_modify(|(_, n)| *n += 1)
            .or_insert((line, 1));
    }

    fn line(&mut self, line: Line<'_>) {
        self.line = line.number;
        let Some(value) = lines::parse_json::<Value>(self.path, &line, &mut self.issues) else {
            return;
        };
        let Value::Object(mut obj) = value else {
            self.issues.push(SourceIssue::at_line(
                self.path,
                line.number,
                "not a JSON object, skipped",
            ));
            return;
        };
        self.records += 1;
        let ts = obj
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_iso_ms);
        if let Some(ts) = ts {
            self.first_ms.get_or_insert(ts);
            self.last_ms = Some(self.last_ms.map_or(ts, |last| last.max(ts)));
        }
        let kind = obj.get("type").and_then(Value::as_str).map(str::to_owned);
        match (kind, obj.remove("payload")) {
            (Some(kind), Some(payload)) => self.envelope(&kind, payload, ts),
            (kind, payload) => {
                if let Some(payload) = payload {
                    obj.insert("payload".into(), payload);
                }
                if obj.contains_key("record_type") {
                    // Legacy state snapshots between items.
                } else if kind.is_none() && !self.meta_seen && obj.contains_key("id") {
                    self.session_meta(&obj, ts);
                } else if kind.is_some() {
                    self.response_item(obj, ts);
                } else {
                    self.unknown("a record without a type".into());
                }
            }
        }
    }

    fn envelope(&mut self, kind: &str, payload: Value, ts: Option<i64>) {
        let Value::Object(payload) = payload else {
            self.issues.push(SourceIssue::at_line(
                self.path,
                self.line,
                format!("{kind}: payload is not an object, skipped"),
            ));
            return;
        };
        match kind {
            "session_meta" => self.session_meta(&payload, ts),
            "turn_context" => {
                if let Some(model) = str_of(&payload, "model") {
                    self.model = Some(model.to_owned());
                }
                if self.turn_cwd.is_none() {
                    self.turn_cwd = str_of(&payload, "cwd").map(str::to_owned);
                }
            }
            "response_item" => self.response_item(payload, ts),
            "event_msg" => self.event(payload, ts),
            "compacted" => {
                self.close();
                let summary = str_of(&payload, "message").unwrap_or_default().to_owned();
                self.push(Item::Compaction(Compaction {
                    at_ms: ts,
                    summary,
                    before_tokens: self.context_tokens,
                    after_tokens: None,
                }));
            }
            "token_usage_record" => {
                if let Some(usage) = payload.get("usage").and_then(Value::as_object) {
                    let (usage, total) = usage_of(usage);
                    self.context_tokens = total.or(self.context_tokens);
                    self.usage_records.push((self.items.len(), usage));
                }
            }
            k if IGNORED_RECORDS.contains(&k) => {}
            other => self.unknown(format!("record type {other:?}")),
        }
    }

    fn session_meta(&mut self, meta: &Map<String, Value>, ts: Option<i64>) {
        if self.meta_seen {
            return;
        }
        let Some(id) = str_of(meta, "id") else {
            self.issues.push(SourceIssue::at_line(
                self.path,
                self.line,
                "session_meta without an id: skipped",
            ));
            return;
        };
        self.meta_seen = true;
        self.id = Some(id.to_owned());
        self.cwd = str_of(meta, "cwd").map(str::to_owned);
        self.version = str_of(meta, "cli_version").map(str::to_owned);
        self.provider = str_of(meta, "model_provider").map(str::to_owned);
        self.created_ms = str_of(meta, "timestamp").and_then(parse_iso_ms).or(ts);
        let subagent = meta
            .get("source")
            .and_then(|s| s.get("subagent"))
            .map(|sub| {
                str_of(meta, "parent_thread_id")
                    .or_else(|| {
                        sub.get("thread_spawn")
                            .and_then(|t| t.get("parent_thread_id"))
                            .and_then(Value::as_str)
                    })
                    .map(str::to_owned)
            });
        self.parent = match subagent {
            Some(Some(parent)) => Some(ParentLink {
                source_id: parent,
                kind: ParentKind::Subagent,
            }),
            Some(None) => {
                self.issues.push(SourceIssue::at_line(
                    self.path,
                    self.line,
                    "a subagent's rollout without parent_thread_id: imported as top-level",
                ));
                None
            }
            None => str_of(meta, "forked_from_id").map(|parent| ParentLink {
                source_id: parent.to_owned(),
                kind: ParentKind::Fork,
            }),
        };
    }

    fn push(&mut self, item: Item) {
        self.items.push((item, Origin::Other));
    }

    /// Ends the open response: the next model output starts a new one.
    fn close(&mut self) {
        self.open = None;
    }

    /// The open response, opened at `ts` if there is none.
    fn open_response(&mut self, ts: Option<i64>) -> usize {
        if let Some(open) = self.open {
            if let (Item::Response(r), _) = &mut self.items[open] {
                r.completed_ms = ts.or(r.completed_ms);
            }
            return open;
        }
        self.items.push((
            Item::Response(Response {
                id: None,
                model: self.model.clone(),
                requested_ms: None,
                first_token_ms: None,
                completed_ms: ts,
                content: Vec::new(),
                usage: None,
            }),
            Origin::Other,
        ));
        let open = self.items.len() - 1;
        self.open = Some(open);
        open
    }

    fn add_content(&mut self, ts: Option<i64>, content: Content) -> (usize, usize) {
        let open = self.open_response(ts);
        if let (Item::Response(r), _) = &mut self.items[open] {
            r.content.push(content);
            return (open, r.content.len() - 1);
        }
        (open, 0)
    }

    fn response_item(&mut self, item: Map<String, Value>, ts: Option<i64>) {
        let kind = str_of(&item, "type").unwrap_or_default().to_owned();
        match kind.as_str() {
            "message" => match str_of(&item, "role") {
                Some("user") => {
                    self.close();
                    let parts = content_parts(item.get("content"));
                    let text = parts_text(&parts);
                    if parts.is_empty() || INJECTED.iter().any(|i| text.trim_start().starts_with(i))
                    {
                        return;
                    }
                    self.items.push((
                        Item::User(UserTurn {
                            id: str_of(&item, "id").map(str::to_owned),
                            at_ms: ts,
                            parts,
                        }),
                        Origin::ItemUser,
                    ));
                }
                Some("assistant") => {
                    let open = self.open_response(ts);
                    if let (Item::Response(r), _) = &mut self.items[open] {
                        if r.id.is_none() {
                            r.id = str_of(&item, "id").map(str::to_owned);
                        }
                        r.content.extend(
                            content_parts(item.get("content"))
                                .into_iter()
                                .map(Content::Part),
                        );
                    }
                }
                _ => {}
            },
            "reasoning" => {
                self.open_response(ts);
            }
            k if k.ends_with("_output") => self.output(&item, ts),
            k if k.ends_with("_call") => self.call(k, &item, ts),
            k if IGNORED_ITEMS.contains(&k) => {}
            other => self.unknown(format!("response item {other:?}")),
        }
    }

    fn call(&mut self, kind: &str, item: &Map<String, Value>, ts: Option<i64>) {
        let call_id = str_of(item, "call_id").map(str::to_owned);
        let name = match kind {
            "function_call" | "custom_tool_call" => str_of(item, "name").unwrap_or(kind),
            "local_shell_call" => "local_shell",
            other => other.strip_suffix("_call").unwrap_or(other),
        }
        .to_owned();
        let args = match kind {
            "custom_tool_call" => {
                json!({ "input": item.get("input").cloned().unwrap_or(Value::Null) })
            }
            _ => match item
                .get("arguments")
                .or_else(|| item.get("action"))
                .or_else(|| item.get("input"))
            {
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(args)) => Value::Object(args),
                    _ => json!({ "arguments": text }),
                },
                Some(Value::Object(args)) => Value::Object(args.clone()),
                Some(other) => json!({ "arguments": other }),
                None => json!({}),
            },
        };
        // A call without a call_id has no output record: it ends where it is written.
        let (outcome, finished_ms, result) = match call_id {
            Some(_) => (ToolOutcome::Missing, None, None),
            None => {
                let ok = str_of(item, "status").is_none_or(|s| s == "completed");
                let result = str_of(item, "revised_prompt")
                    .map(str::to_owned)
                    .or_else(|| item.get("action").map(Value::to_string));
                let outcome = if ok {
                    ToolOutcome::Ok
                } else {
                    ToolOutcome::Error
                };
                (outcome, ts, result)
            }
        };
        let id = call_id.clone().unwrap_or_else(|| {
            str_of(item, "id")
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{kind}-line-{}", self.line))
        });
        let at = self.add_content(
            ts,
            Content::Tool(ToolCall {
                call_id: id,
                name,
                args,
                result,
                outcome,
                started_ms: ts,
                finished_ms,
            }),
        );
        if let Some(call_id) = call_id {
            self.calls.insert(call_id, at);
        }
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut ToolCall> {
        let (item, content) = *self.calls.get(call_id)?;
        match self.items.get_mut(item) {
            Some((Item::Response(r), _)) => match r.content.get_mut(content) {
                Some(Content::Tool(call)) => Some(call),
                _ => None,
            },
            _ => None,
        }
    }

    fn output(&mut self, item: &Map<String, Value>, ts: Option<i64>) {
        self.close();
        let Some(call_id) = str_of(item, "call_id") else {
            self.unknown("an output without call_id".into());
            return;
        };
        let (text, failed) = output_text(item.get("output").or_else(|| item.get("tools")));
        let line = self.line;
        let path = self.path;
        let Some(call) = self.call_mut(call_id) else {
            self.issues.push(SourceIssue::at_line(
                path,
                line,
                format!("output for an unknown call {call_id:?}: skipped"),
            ));
            return;
        };
        call.outcome = if is_denial(&text) {
            ToolOutcome::Denied(Some(text.clone()))
        } else if failed {
            ToolOutcome::Error
        } else {
            ToolOutcome::Ok
        };
        call.result = Some(text);
        call.finished_ms = ts;
    }

    /// A later event saying a call failed (`exec_command_end`, `patch_apply_end`, …).
    fn mark_failed(&mut self, call_id: Option<&str>) {
        if let Some(call) = call_id.and_then(|id| self.call_mut(id))
            && matches!(call.outcome, ToolOutcome::Ok | ToolOutcome::Missing)
        {
            call.outcome = ToolOutcome::Error;
        }
    }

    fn event(&mut self, event: Map<String, Value>, ts: Option<i64>) {
        let kind = str_of(&event, "type").unwrap_or_default().to_owned();
        match kind.as_str() {
            "user_message" => {
                self.close();
                self.event_users = true;
                // Builds of 0.2x–0.3x tagged injected context in `kind` (else `plain`).
                let injected_kind = matches!(
                    str_of(&event, "kind"),
                    Some("user_instructions" | "environment_context")
                );
                let mut parts = Vec::new();
                if let Some(text) = str_of(&event, "message")
                    && !text.trim().is_empty()
                {
                    if injected_kind || INJECTED.iter().any(|i| text.trim_start().starts_with(i)) {
                        return;
                    }
                    parts.push(Part::text(text));
                }
                if let Some(Value::Array(images)) = event.get("images") {
                    parts.extend(
                        images
                            .iter()
                            .filter_map(|i| i.as_str())
                            .filter_map(data_url),
                    );
                }
                if parts.is_empty() {
                    return;
                }
                self.items.push((
                    Item::User(UserTurn {
                        id: None,
                        at_ms: ts,
                        parts,
                    }),
                    Origin::EventUser,
                ));
            }
            "token_count" => self.token_count(&event),
            "task_complete" => {
                self.close();
                if let Some(message) = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                {
                    self.push(Item::Error(ErrorNote {
                        at_ms: ts,
                        message: message.to_owned(),
                        aborted: false,
                    }));
                }
                self.push(Item::TurnEnd(TurnEnd {
                    at_ms: ts,
                    duration_ms: event.get("duration_ms").and_then(Value::as_i64),
                    aborted: None,
                }));
            }
            "turn_aborted" => {
                self.close();
                self.push(Item::TurnEnd(TurnEnd {
                    at_ms: ts,
                    duration_ms: event.get("duration_ms").and_then(Value::as_i64),
                    aborted: Some(str_of(&event, "reason").unwrap_or("aborted").to_owned()),
                }));
            }
            "error" => {
                self.close();
                self.push(Item::Error(ErrorNote {
                    at_ms: ts,
                    message: str_of(&event, "message").unwrap_or("error").to_owned(),
                    aborted: false,
                }));
            }
            "context_compacted" => {
                self.close();
                if !matches!(self.items.last(), Some((Item::Compaction(_), _))) {
                    self.push(Item::Compaction(Compaction {
                        at_ms: ts,
                        summary: String::new(),
                        before_tokens: self.context_tokens,
                        after_tokens: None,
                    }));
                }
            }
            "thread_rolled_back" => {
                let turns = event.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
                self.roll_back(turns);
            }
            "thread_name_updated" => {
                if let Some(name) = str_of(&event, "thread_name").filter(|n| !n.trim().is_empty()) {
                    self.renamed = Some(name.to_owned());
                }
            }
            "exec_command_end" => {
                if event
                    .get("exit_code")
                    .and_then(Value::as_i64)
                    .is_some_and(|c| c != 0)
                {
                    self.mark_failed(str_of(&event, "call_id"));
                }
            }
            "patch_apply_end" => {
                if event.get("success").and_then(Value::as_bool) == Some(false) {
                    self.mark_failed(str_of(&event, "call_id"));
                }
            }
            "mcp_tool_call_end" => {
                let result = event.get("result");
                let failed = result.is_some_and(|r| {
                    r.get("Err").is_some()
                        || r.get("Ok")
                            .and_then(|ok| ok.get("isError"))
                            .and_then(Value::as_bool)
                            == Some(true)
                });
                if failed {
                    self.mark_failed(str_of(&event, "call_id"));
                }
            }
            "collab_agent_spawn_end" => {
                if let Some(id) = str_of(&event, "new_thread_id") {
                    self.close();
                    self.push(Item::Subagent(SubagentRun {
                        subagent_id: id.to_owned(),
                        task: str_of(&event, "prompt").unwrap_or_default().to_owned(),
                        started_ms: ts,
                        stopped_ms: None,
                        result: None,
                    }));
                }
            }
            "collab_waiting_end" => {
                if let Some(Value::Array(statuses)) = event.get("agent_statuses") {
                    for status in statuses {
                        if let Some(id) = status.get("thread_id").and_then(Value::as_str) {
                            self.subagent_status(id, status.get("status"), ts);
                        }
                    }
                }
            }
            "collab_close_end" => {
                if let Some(id) = str_of(&event, "receiver_thread_id") {
                    self.subagent_status(id, event.get("status"), ts);
                }
            }
            k if IGNORED_EVENTS.contains(&k) || k.starts_with("collab_") => {}
            other => self.unknown(format!("event {other:?}")),
        }
    }

    /// A subagent's status as the parent saw it: `{"completed": text}`, `{"errored": text}` and
    /// `shutdown`/`not_found` end its run; `running`/`pending_init` do not.
    fn subagent_status(&mut self, id: &str, status: Option<&Value>, ts: Option<i64>) {
        let (ended, result) = match status {
            Some(Value::Object(map)) => (
                true,
                map.values().find_map(Value::as_str).map(str::to_owned),
            ),
            Some(Value::String(s)) => (!matches!(s.as_str(), "running" | "pending_init"), None),
            _ => (false, None),
        };
        if !ended {
            return;
        }
        let run = self
            .items
            .iter_mut()
            .rev()
            .find_map(|(item, _)| match item {
                Item::Subagent(run) if run.subagent_id == id => Some(run),
                _ => None,
            });
        if let Some(run) = run
            && run.stopped_ms.is_none()
        {
            run.stopped_ms = ts;
            run.result = result;
        }
    }

    fn token_count(&mut self, event: &Map<String, Value>) {
        let Some(info) = event.get("info").and_then(Value::as_object) else {
            return;
        };
        let Some(last) = info.get("last_token_usage").and_then(Value::as_object) else {
            return;
        };
        let total = info.get("total_token_usage").cloned();
        if total.is_some() && total == self.last_total {
            return;
        }
        self.last_total = total;
        let (usage, total) = usage_of(last);
        self.context_tokens = total;
        self.snapshots
            .push((self.items.len(), self.open.is_some(), usage));
    }

    /// Puts each usage snapshot on the response it measured. Current builds write a snapshot
    /// right after its response's items (a response is open when it comes); 0.39 wrote it before
    /// them (none is open). The file's majority decides which; a snapshot with no response on
    /// its side (one before the first, in an excerpt) is left out.
    fn assign_usage(&mut self) {
        let records = std::mem::take(&mut self.usage_records);
        if !records.is_empty() {
            // Each record measures the response whose items it follows.
            for (at, usage) in records {
                let target = self.items[..at.min(self.items.len())]
                    .iter()
                    .rposition(|(item, _)| matches!(item, Item::Response(_)));
                if let Some((Item::Response(r), _)) = target.and_then(|i| self.items.get_mut(i))
                    && r.usage.is_none()
                {
                    r.usage = Some(usage);
                }
            }
            return;
        }
        let snapshots = std::mem::take(&mut self.snapshots);
        let after = snapshots.iter().filter(|(_, open, _)| *open).count();
        let after_mode = after * 2 >= snapshots.len();
        for (at, _, usage) in snapshots {
            let target = if after_mode {
                self.items[..at.min(self.items.len())]
                    .iter()
                    .rposition(|(item, _)| matches!(item, Item::Response(_)))
            } else {
                self.items
                    .iter()
                    .skip(at)
                    .position(|(item, _)| matches!(item, Item::Response(r) if r.usage.is_none()))
                    .map(|i| i + at)
            };
            if let Some((Item::Response(r), _)) = target.and_then(|i| self.items.get_mut(i))
                && r.usage.is_none()
            {
                r.usage = Some(usage);
            }
        }
    }

    /// Drops the last `turns` user turns and everything after them.
    fn roll_back(&mut self, turns: u64) {
        self.close();
        if turns == 0 {
            return;
        }
        let origin = if self.event_users {
            Origin::EventUser
        } else {
            Origin::ItemUser
        };
        let starts: Vec<usize> = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, (item, o))| matches!(item, Item::User(_)) && *o == origin)
            .map(|(i, _)| i)
            .collect();
        let turns = usize::try_from(turns).unwrap_or(usize::MAX);
        let cut = if turns >= starts.len() {
            starts.first().copied().unwrap_or(self.items.len())
        } else {
            starts[starts.len() - turns]
        };
        self.items.truncate(cut);
        self.calls.retain(|_, (item, _)| *item < cut);
        self.snapshots.retain(|(at, _, _)| *at <= cut);
    }

    fn finish(
        mut self,
        names: Option<&Names>,
        issues: &mut Vec<SourceIssue>,
    ) -> Option<ImportedSession> {
        for (what, (line, count)) in std::mem::take(&mut self.unknown) {
            let times = if count == 1 {
                String::new()
            } else {
                format!(" ({count} times)")
            };
            self.issues.push(SourceIssue::at_line(
                self.path,
                line,
                format!("{what} unknown: skipped{times}"),
            ));
        }
        issues.append(&mut self.issues);
        self.assign_usage();
        if self.records == 0 {
            return None;
        }
        let id = match self.id.take().or_else(|| id_from_name(self.path)) {
            Some(id) => id,
            None => {
                issues.push(SourceIssue::in_file(
                    self.path,
                    "no session_meta id and no id in the file name: not imported",
                ));
                return None;
            }
        };
        if !self.meta_seen {
            issues.push(SourceIssue::in_file(
                self.path,
                "no session_meta record: the id is the file name's",
            ));
        }
        // One copy of each prompt: the typed one where the file has it.
        let drop = if self.event_users {
            Origin::ItemUser
        } else {
            Origin::EventUser
        };
        let items: Vec<Item> = self
            .items
            .into_iter()
            .filter(|(item, origin)| {
                *origin != drop && !matches!(item, Item::Response(r) if r.content.is_empty())
            })
            .map(|(item, _)| item)
            .collect();
        let first_prompt = items.iter().find_map(|item| match item {
            Item::User(turn) => Some(parts_text(&turn.parts)),
            _ => None,
        });
        let title = names
            .and_then(|names| names.get(&id).cloned())
            .filter(|n| !n.trim().is_empty())
            .or(self.renamed)
            .or_else(|| first_prompt.as_deref().and_then(title_of));
        let mut session = ImportedSession::new(Agent::Codex, id, self.path);
        session.version = self.version;
        session.project_path = self.cwd.or(self.turn_cwd);
        session.title = title;
        session.provider = self.provider;
        session.model = self.model;
        session.created_ms = self.created_ms.or(self.first_ms);
        session.updated_ms = self.last_ms;
        session.parent = self.parent;
        session.items = items;
        Some(session)
    }
}

fn str_of<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    map.get(key).and_then(Value::as_str)
}

/// The uuid at the end of `rollout-<time>-<uuid>.jsonl[.zst]`.
fn id_from_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".jsonl.zst")
        .or_else(|| name.strip_suffix(".jsonl"))?;
    let tail = stem.get(stem.len().checked_sub(36)?..)?;
    let is_uuid = tail.len() == 36
        && tail.chars().enumerate().all(|(i, c)| {
            matches!(i, 8 | 13 | 18 | 23) == (c == '-') && (c == '-' || c.is_ascii_hexdigit())
        });
    is_uuid.then(|| tail.to_owned())
}

/// The parts of a message's `content`: a string, or a list of `input_text`/`output_text`/`text`
/// and data-URL `input_image` items.
fn content_parts(content: Option<&Value>) -> Vec<Part> {
    match content {
        Some(Value::String(text)) if !text.is_empty() => vec![Part::text(text.clone())],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| {
                if let Some(text) = item.get("text").and_then(Value::as_str) {
                    return (!text.is_empty()).then(|| Part::text(text));
                }
                item.get("image_url")
                    .and_then(Value::as_str)
                    .and_then(data_url)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// An image part from a `data:<type>;base64,<data>` URL.
fn data_url(url: &str) -> Option<Part> {
    let rest = url.strip_prefix("data:")?;
    let (media, data) = rest.split_once(";base64,")?;
    Some(Part::image(data, media, None))
}

fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(Part::text_content)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A title from a prompt: its first non-blank line, at most [`TITLE_CHARS`] characters.
pub(crate) fn title_of(text: &str) -> Option<String> {
    // The VS Code extension wraps the prompt: "# Context from my IDE setup: … ## My request for
    // Codex:\n<prompt>".
    let text = text
        .split_once("## My request for Codex:")
        .map_or(text, |(_, prompt)| prompt);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(match line.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    })
}

/// The model-visible text of a tool output, and whether it says the tool failed.
fn output_text(output: Option<&Value>) -> (String, bool) {
    match output {
        None | Some(Value::Null) => (String::new(), false),
        Some(Value::String(text)) => {
            // 0.39: a stringified {"output": …, "metadata": {"exit_code": …}}.
            if text.starts_with('{')
                && let Ok(Value::Object(wrapped)) = serde_json::from_str::<Value>(text)
                && let Some(inner) = wrapped.get("output").and_then(Value::as_str)
            {
                let failed = wrapped
                    .get("metadata")
                    .and_then(|m| m.get("exit_code"))
                    .and_then(Value::as_i64)
                    .is_some_and(|c| c != 0);
                return (inner.to_owned(), failed);
            }
            (text.clone(), false)
        }
        Some(Value::Array(items)) => {
            let texts: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect();
            (texts.join("\n"), false)
        }
        Some(Value::Object(map)) => {
            let failed = map.get("success").and_then(Value::as_bool) == Some(false);
            if let Some(text) = map
                .get("text")
                .or_else(|| map.get("content"))
                .or_else(|| map.get("output"))
                .and_then(Value::as_str)
            {
                return (text.to_owned(), failed);
            }
            if let Some(Value::Array(items)) = map.get("content") {
                return (output_text(Some(&Value::Array(items.clone()))).0, failed);
            }
            (Value::Object(map.clone()).to_string(), failed)
        }
        Some(other) => (other.to_string(), false),
    }
}

/// Codex's refusal outputs: "exec command rejected by user", "patch rejected by user".
fn is_denial(text: &str) -> bool {
    let head: String = text.chars().take(200).collect::<String>().to_lowercase();
    head.contains("rejected by user") || head.contains("denied by user")
}

#[cfg(test)]
mod tests;
