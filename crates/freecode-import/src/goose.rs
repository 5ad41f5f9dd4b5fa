//! goose's sessions (OTHER-AGENTS.md A.4): the SQLite `sessions.db` of late-2025 builds and the
//! older one-`<name>.jsonl`-per-session files.
//!
//! A directory holding `sessions.db` is one unit: the database (with its `-wal`/`-shm`) and the
//! legacy `.jsonl` files beside it, which goose copied into the database when it was created; a
//! legacy file whose name is a database session's id or name is that session and is not read
//! again (the database wins). Without a database each `.jsonl` is its own unit. A root may be
//! one file.
//!
//! The database is opened read-only (`file:…?mode=ro`, safe beside goose's WAL) and its columns
//! found with `PRAGMA table_info`. Sessions of type `hidden` are skipped; a `sub_agent` session
//! is a child when its parent is recorded, else a top-level session with a note. A legacy file's
//! first line is its metadata when it reads as such (`working_dir`, `description`, token
//! counts), else a message like the others.
//!
//! Mapping of a Message `{role, created (s), content[], metadata{userVisible, agentVisible}}`:
//! a user message's text and images are a [`Item::User`]; its `toolResponse`s complete the calls
//! they answer (by id: the call's start is its request's time, its end the response's) and make
//! no message of their own. An assistant message is one [`Item::Response`]: text, images and
//! one [`ToolCall`] per `toolRequest`/`frontendToolRequest`. A failed request or result is a
//! [`ToolOutcome::Error`]; a result saying the user declined is [`ToolOutcome::Denied`].
//! Thinking, notifications and confirmation requests are left out. A message visible to neither
//! user nor agent is left out; a text message shown only to the agent after earlier messages
//! were hidden from it is the compaction summary ([`Item::Compaction`]). goose counts tokens per
//! session only, so no response has usage; the totals are [`ImportedSession::session_usage`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use freecode_core::{Part, Usage};
use serde_json::Value;

use crate::lines::{for_each_line, parse_json};
use crate::model::{
    Compaction, Content, ImportedSession, Item, ParentKind, ParentLink, Read, Response, ToolCall,
    ToolOutcome, UserTurn,
};
use crate::opencode::{
    EntryKind, col_int, col_text, db_error, db_unit, file_name, has_extension, list_dir,
    open_read_only, select_columns, table_columns, xdg_data_home,
};
use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// How deep [`discover`] looks below a root.
const MAX_DEPTH: usize = 4;

/// The database's name in a sessions directory.
const DB_NAME: &str = "sessions.db";

/// The sessions directory: `$XDG_DATA_HOME` (absolute) else `$HOME/.local/share`, then
/// `goose/sessions/`.
pub fn default_roots(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    xdg_data_home(var)
        .map(|data| vec![data.join("goose").join("sessions")])
        .unwrap_or_default()
}

/// The units under `root`: `sessions.db` with the legacy files beside it, or each legacy
/// `.jsonl` alone; a root may be one file. Symlinks below the root are not followed.
pub fn discover(root: &Path, issues: &mut Vec<SourceIssue>) -> Vec<SourceUnit> {
    crate::opencode::discover_root(
        root,
        issues,
        Agent::Goose,
        "jsonl",
        "not a goose database (.db) or session (.jsonl): skipped",
        discover_dir,
    )
}

fn discover_dir(
    dir: &Path,
    depth: usize,
    units: &mut Vec<SourceUnit>,
    issues: &mut Vec<SourceIssue>,
) {
    let entries = list_dir(dir, issues);
    let files: Vec<&PathBuf> = entries
        .iter()
        .filter(|(_, kind)| *kind == EntryKind::File)
        .map(|(path, _)| path)
        .collect();
    let legacy = files.iter().filter(|path| has_extension(path, "jsonl"));
    if let Some(db) = files.iter().find(|path| file_name(path) == DB_NAME) {
        let mut unit = db_unit(Agent::Goose, db);
        unit.side_files.extend(legacy.map(|path| (*path).clone()));
        units.push(unit);
    } else {
        units.extend(legacy.map(|path| SourceUnit::file(Agent::Goose, *path)));
    }
    if depth < MAX_DEPTH {
        for (path, kind) in &entries {
            if *kind == EntryKind::Dir {
                discover_dir(path, depth + 1, units, issues);
            }
        }
    }
}

/// The sessions of one unit.
pub fn read(unit: &SourceUnit) -> Result<Read, ReadError> {
    let mut read = Read::default();
    let path = unit.path.as_path();
    if has_extension(path, "db") {
        let legacy_beside = unit.side_files.iter().any(|p| has_extension(p, "jsonl"));
        let known = match read_db(path, &mut read) {
            Ok(known) => known,
            // The legacy files still read when the database cannot be.
            Err(e) if legacy_beside => {
                read.issues.push(SourceIssue::in_file(
                    path,
                    format!("database skipped, the legacy files beside it read alone: {e}"),
                ));
                HashSet::new()
            }
            Err(e) => return Err(e),
        };
        for legacy in unit.side_files.iter().filter(|p| has_extension(p, "jsonl")) {
            let name = legacy.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if known.contains(name) {
                continue;
            }
            if let Err(e) = read_legacy(legacy, &mut read) {
                read.issues
                    .push(SourceIssue::in_file(legacy, format!("skipped: {e}")));
            }
        }
    } else {
        read_legacy(path, &mut read)?;
    }
    Ok(read)
}

/// Seconds (goose's `created`) as ms; a value already in ms is kept.
fn seconds_to_ms(value: i64) -> i64 {
    if value.abs() >= 100_000_000_000 {
        value
    } else {
        value.saturating_mul(1000)
    }
}

/// A `TIMESTAMP` column: `2026-03-01 09:00:00` (UTC, as SQLite writes it), RFC 3339, or a
/// number of seconds.
fn timestamp_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<i64>() {
        return Some(seconds_to_ms(seconds));
    }
    crate::model::parse_iso_ms(text)
        .or_else(|| crate::model::parse_iso_ms(&text.replacen(' ', "T", 1)))
}

fn non_empty(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

/// Session token totals: the accumulated counts, else the last ones.
fn session_usage(input: Option<i64>, output: Option<i64>) -> Option<Usage> {
    let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok());
    match (count(input), count(output)) {
        (None, None) => None,
        (input, output) => {
            let mut usage = Usage::new(0, 0);
            usage.input_tokens = input;
            usage.output_tokens = output;
            Some(usage)
        }
    }
}

/// Reads `sessions.db`; returns the ids and names of its sessions (hidden ones included), which
/// legacy files of the same session must not repeat.
fn read_db(path: &Path, read: &mut Read) -> Result<HashSet<String>, ReadError> {
    let conn = open_read_only(path)?;
    let session_cols = table_columns(&conn, path, "sessions")?;
    let message_cols = table_columns(&conn, path, "messages")?;
    for (table, cols, needed) in [
        ("sessions", &session_cols, &["id"][..]),
        (
            "messages",
            &message_cols,
            &["session_id", "role", "content_json"][..],
        ),
    ] {
        if let Some(missing) = needed.iter().find(|col| !cols.iter().any(|c| c == *col)) {
            return Err(ReadError::NotThisAgent {
                path: path.to_owned(),
                agent: Agent::Goose,
                message: format!("no column {table}.{missing}"),
            });
        }
    }
    let sql = select_columns(
        "sessions",
        &session_cols,
        &[
            "id",
            "name",
            "description",
            "session_type",
            "working_dir",
            "created_at",
            "updated_at",
            "provider_name",
            "model_config_json",
            "extension_data",
            "accumulated_input_tokens",
            "accumulated_output_tokens",
            "input_tokens",
            "output_tokens",
            "parent_session_id",
            "parent_id",
        ],
        "ORDER BY rowid",
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| db_error(path, &e))?;
    let mut rows = stmt.query([]).map_err(|e| db_error(path, &e))?;
    let mut known = HashSet::new();
    let mut builders: Vec<Builder> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut hidden: HashSet<String> = HashSet::new();
    let mut wanted_parent: Vec<(usize, Option<String>)> = Vec::new();
    while let Some(row) = rows.next().map_err(|e| db_error(path, &e))? {
        let Some(id) = col_text(row, 0) else { continue };
        let name = non_empty(col_text(row, 1));
        known.insert(id.clone());
        if let Some(name) = &name {
            known.insert(name.clone());
        }
        let session_type = col_text(row, 3).unwrap_or_default();
        if session_type == "hidden" {
            hidden.insert(id);
            continue;
        }
        let mut session = ImportedSession::new(Agent::Goose, id.clone(), path);
        session.title = name.or_else(|| non_empty(col_text(row, 2)));
        session.project_path = non_empty(col_text(row, 4));
        session.created_ms = col_text(row, 5).as_deref().and_then(timestamp_ms);
        session.updated_ms = col_text(row, 6).as_deref().and_then(timestamp_ms);
        session.provider = non_empty(col_text(row, 7));
        session.model = col_text(row, 8)
            .and_then(|json| serde_json::from_str::<Value>(&json).ok())
            .and_then(|config| {
                config
                    .get("model_name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .filter(|m| !m.is_empty());
        session.session_usage = session_usage(
            col_int(row, 10).or_else(|| col_int(row, 12)),
            col_int(row, 11).or_else(|| col_int(row, 13)),
        );
        if session_type == "sub_agent" {
            let parent = non_empty(col_text(row, 14))
                .or_else(|| non_empty(col_text(row, 15)))
                .or_else(|| {
                    col_text(row, 9)
                        .and_then(|json| serde_json::from_str::<Value>(&json).ok())
                        .as_ref()
                        .and_then(parent_in_extension_data)
                });
            wanted_parent.push((builders.len(), parent));
        }
        index_of.insert(id, builders.len());
        builders.push(Builder::new(session));
    }
    drop(rows);
    drop(stmt);
    for (index, parent) in wanted_parent {
        let session = &mut builders[index].session;
        match parent.filter(|p| index_of.contains_key(p) || hidden.contains(p)) {
            Some(parent) => {
                session.parent = Some(ParentLink {
                    source_id: parent,
                    kind: ParentKind::Subagent,
                })
            }
            None => read.issues.push(SourceIssue::in_file(
                path,
                format!(
                    "sub_agent session {}: no parent session recorded, imported as a top-level \
                     session",
                    session.source_id
                ),
            )),
        }
    }

    let sql = select_columns(
        "messages",
        &message_cols,
        &[
            "session_id",
            "role",
            "content_json",
            "created_timestamp",
            "metadata_json",
            "message_id",
            "id",
        ],
        "ORDER BY rowid",
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| db_error(path, &e))?;
    let mut rows = stmt.query([]).map_err(|e| db_error(path, &e))?;
    while let Some(row) = rows.next().map_err(|e| db_error(path, &e))? {
        let Some(session_id) = col_text(row, 0) else {
            continue;
        };
        let Some(&index) = index_of.get(&session_id) else {
            if !hidden.contains(&session_id) {
                read.issues.push(SourceIssue::in_file(
                    path,
                    format!("message of unknown session {session_id}, skipped"),
                ));
            }
            continue;
        };
        let row_id = col_text(row, 6).unwrap_or_default();
        let where_ = format!("message {row_id} of session {session_id}");
        let content = match col_text(row, 2).map(|json| parse_value(json.as_bytes())) {
            Some(Ok(content)) => content,
            _ => {
                read.issues.push(SourceIssue::in_file(
                    path,
                    format!("{where_}: content_json is not JSON, skipped"),
                ));
                continue;
            }
        };
        let mut message = serde_json::Map::new();
        if let Some(id) = non_empty(col_text(row, 5)) {
            message.insert("id".into(), Value::String(id));
        }
        message.insert(
            "role".into(),
            Value::String(col_text(row, 1).unwrap_or_default()),
        );
        if let Some(created) = col_int(row, 3) {
            message.insert("created".into(), Value::from(created));
        }
        message.insert("content".into(), content);
        if let Some(Ok(metadata)) = col_text(row, 4).map(|json| parse_value(json.as_bytes())) {
            message.insert("metadata".into(), metadata);
        }
        let mut issue = |text: String| {
            read.issues
                .push(SourceIssue::in_file(path, format!("{where_}: {text}")));
        };
        builders[index].message(&Value::Object(message), &mut issue);
    }
    read.sessions
        .extend(builders.into_iter().map(Builder::finish));
    Ok(known)
}

fn parse_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    freecode_core::json::from_slice_lossy::<Value>(bytes).map(|lossy| lossy.value)
}

/// A parent session id kept in `extension_data` by builds that record one.
fn parent_in_extension_data(data: &Value) -> Option<String> {
    match data {
        Value::Object(map) => map.iter().find_map(|(key, value)| {
            let key = key.to_ascii_lowercase().replace('_', "");
            if (key == "parentsessionid" || key == "parentid")
                && let Some(id) = value.as_str().filter(|id| !id.is_empty())
            {
                return Some(id.to_owned());
            }
            parent_in_extension_data(value)
        }),
        _ => None,
    }
}

/// Keys of the legacy metadata line.
const METADATA_KEYS: [&str; 5] = [
    "working_dir",
    "description",
    "message_count",
    "total_tokens",
    "schedule_id",
];

/// Whether a legacy first line is the session's metadata rather than a message.
fn is_metadata(value: &Value) -> bool {
    value.as_object().is_some_and(|map| {
        !map.contains_key("role") && METADATA_KEYS.iter().any(|key| map.contains_key(*key))
    })
}

/// A legacy `<name>.jsonl`: the session named by the file, read line by line (a torn tail is
/// left for the next import).
fn read_legacy(path: &Path, read: &mut Read) -> Result<(), ReadError> {
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut builder = Builder::new(ImportedSession::new(Agent::Goose, id, path));
    let mut issues = Vec::new();
    let mut line_issues = Vec::new();
    let mut first = true;
    let mut metadata: Option<Value> = None;
    let mut each = |number: u64, value: Value, line_issues: &mut Vec<SourceIssue>| {
        if std::mem::replace(&mut first, false) && is_metadata(&value) {
            metadata = Some(value);
            return;
        }
        let mut issue = |text: String| {
            line_issues.push(SourceIssue::at_line(path, number, text));
        };
        if value.get("role").and_then(Value::as_str).is_none()
            || !value.get("content").is_some_and(Value::is_array)
        {
            issue("not a goose message (no role and content), skipped".to_owned());
            return;
        }
        builder.message(&value, &mut issue);
    };
    let extent = for_each_line(path, &mut issues, |line| {
        if let Some(value) = parse_json::<Value>(path, &line, &mut line_issues) {
            each(line.number, value, &mut line_issues);
        }
    })?;
    if extent.torn_tail
        && let Some((number, value)) = whole_tail(path, extent.complete_len, &issues)
    {
        // goose writes no legacy file any more: a last line without its newline that is whole
        // JSON is the end of the file, not a write in progress.
        issues.retain(|issue| issue.line != Some(number));
        each(number, value, &mut line_issues);
    }
    issues.extend(line_issues);
    issues.sort_by_key(|issue| issue.line);
    let mut session = builder.finish();
    if let Some(metadata) = metadata {
        session.project_path = metadata
            .get("working_dir")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        session.title = metadata
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .map(str::to_owned);
        let count = |key: &str| metadata.get(key).and_then(Value::as_i64);
        session.session_usage = session_usage(
            count("accumulated_input_tokens").or_else(|| count("input_tokens")),
            count("accumulated_output_tokens").or_else(|| count("output_tokens")),
        );
    }
    read.issues.extend(issues);
    read.sessions.push(session);
    Ok(())
}

/// The last line of a legacy file that has no newline, when it is whole JSON: its number (from
/// the torn-tail issue) and value.
fn whole_tail(path: &Path, offset: u64, issues: &[SourceIssue]) -> Option<(u64, Value)> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let number = issues.iter().rev().find_map(|issue| {
        (issue.path == path && issue.message.starts_with("incomplete last line"))
            .then_some(issue.line)
            .flatten()
    })?;
    let mut file = fs::File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut tail = Vec::new();
    file.take(MAX_TAIL).read_to_end(&mut tail).ok()?;
    let value = parse_value(&tail).ok()?;
    value.is_object().then_some((number, value))
}

/// The longest unterminated last line [`whole_tail`] reads.
const MAX_TAIL: u64 = 64 * 1024 * 1024;

/// Content types goose writes (conversation/message.rs); others are reported once.
const KNOWN_CONTENT: [&str; 13] = [
    "text",
    "image",
    "toolRequest",
    "toolResponse",
    "toolConfirmationRequest",
    "actionRequired",
    "frontendToolRequest",
    "thinking",
    "redactedThinking",
    "systemNotification",
    "conversationCompacted",
    "contextLengthExceeded",
    "summarizationRequested",
];

/// One session's timeline, built a message at a time.
struct Builder {
    session: ImportedSession,
    /// Calls waiting for their response: call id → (item, content) index.
    pending: HashMap<String, (usize, usize)>,
    /// Calls made in messages left out (visible to no one): their responses are not reported.
    hidden_calls: HashSet<String>,
    /// Whether an earlier message was hidden from the agent (compaction happened).
    agent_hidden_seen: bool,
    /// Unknown content types met.
    unknown: BTreeSet<String>,
    /// The time of the last message (a tool response included): when the next request went out.
    last_at: Option<i64>,
}

impl Builder {
    fn new(session: ImportedSession) -> Self {
        Self {
            session,
            pending: HashMap::new(),
            hidden_calls: HashSet::new(),
            agent_hidden_seen: false,
            unknown: BTreeSet::new(),
            last_at: None,
        }
    }

    /// Adds one Message.
    fn message(&mut self, message: &Value, issue: &mut dyn FnMut(String)) {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let at = message
            .get("created")
            .and_then(Value::as_i64)
            .map(seconds_to_ms);
        let Some(content) = message.get("content").and_then(Value::as_array) else {
            issue("content is not a list, skipped".to_owned());
            return;
        };
        let flag = |key: &str| {
            message
                .pointer(&format!("/metadata/{key}"))
                .and_then(Value::as_bool)
                .unwrap_or(true)
        };
        let (user_visible, agent_visible) = (flag("userVisible"), flag("agentVisible"));
        let requested = self.last_at;
        self.last_at = at.or(requested);
        if let Some(at) = at {
            self.session.created_ms.get_or_insert(at);
            if self.session.updated_ms.is_none_or(|u| u < at) {
                self.session.updated_ms = Some(at);
            }
        }
        if !user_visible && !agent_visible {
            for item in content {
                if let Some(id) = tool_request_id(item) {
                    self.hidden_calls.insert(id.to_owned());
                }
            }
            return;
        }
        if !agent_visible {
            self.agent_hidden_seen = true;
        }
        for item in content {
            let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
            if !KNOWN_CONTENT.contains(&kind) && self.unknown.insert(kind.to_owned()) {
                issue(format!("unknown content type {kind:?} skipped"));
            }
            if kind == "toolResponse" {
                self.tool_response(item, at, issue);
            }
            if kind == "conversationCompacted" {
                self.session.items.push(Item::Compaction(Compaction {
                    at_ms: at,
                    summary: item
                        .get("msg")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    before_tokens: None,
                    after_tokens: None,
                }));
            }
        }
        let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        match role {
            "user" => {
                let parts: Vec<Part> = content.iter().filter_map(plain_part).collect();
                if parts.is_empty() {
                    return;
                }
                let all_text = parts.iter().all(|p| p.text_content().is_some());
                if !user_visible && self.agent_hidden_seen && all_text {
                    let summary: Vec<&str> = parts.iter().filter_map(Part::text_content).collect();
                    self.session.items.push(Item::Compaction(Compaction {
                        at_ms: at,
                        summary: summary.join("\n"),
                        before_tokens: None,
                        after_tokens: None,
                    }));
                    return;
                }
                self.session.items.push(Item::User(UserTurn {
                    id,
                    at_ms: at,
                    parts,
                }));
            }
            "assistant" => {
                let item_index = self.session.items.len();
                let mut out = Vec::new();
                for item in content {
                    if let Some(part) = plain_part(item) {
                        out.push(Content::Part(part));
                    } else if let Some(call) = tool_request(item, at) {
                        self.pending
                            .insert(call.call_id.clone(), (item_index, out.len()));
                        out.push(Content::Tool(call));
                    }
                }
                self.session.items.push(Item::Response(Response {
                    id,
                    model: self.session.model.clone(),
                    requested_ms: requested,
                    first_token_ms: None,
                    completed_ms: at,
                    content: out,
                    usage: None,
                }));
            }
            other => issue(format!("unknown role {other:?}, skipped")),
        }
    }

    /// Completes the call a `toolResponse` answers.
    fn tool_response(&mut self, item: &Value, at: Option<i64>, issue: &mut dyn FnMut(String)) {
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            issue("toolResponse without an id, skipped".to_owned());
            return;
        };
        let Some((item_index, content_index)) = self.pending.remove(id) else {
            if !self.hidden_calls.contains(id) {
                issue(format!("toolResponse {id} answers no call, skipped"));
            }
            return;
        };
        let Some(Item::Response(response)) = self.session.items.get_mut(item_index) else {
            return;
        };
        let Some(Content::Tool(call)) = response.content.get_mut(content_index) else {
            return;
        };
        let result = item.get("toolResult").unwrap_or(&Value::Null);
        let (text, failed) = match result.get("status").and_then(Value::as_str) {
            Some("error") => (error_text(result.get("error")), true),
            _ => {
                let value = result.get("value").unwrap_or(&Value::Null);
                (
                    result_text(value),
                    value.get("isError").and_then(Value::as_bool) == Some(true),
                )
            }
        };
        call.outcome = if is_declined(&text) {
            ToolOutcome::Denied(Some(text.clone()))
        } else if failed {
            ToolOutcome::Error
        } else {
            ToolOutcome::Ok
        };
        call.result = Some(text);
        call.finished_ms = at;
    }

    fn finish(self) -> ImportedSession {
        self.session
    }
}

/// The id of a `toolRequest`/`frontendToolRequest` item.
fn tool_request_id(item: &Value) -> Option<&str> {
    match item.get("type").and_then(Value::as_str)? {
        "toolRequest" | "frontendToolRequest" => item.get("id").and_then(Value::as_str),
        _ => None,
    }
}

/// A request as a call waiting for its response (a request goose could not parse is an error
/// already).
fn tool_request(item: &Value, at: Option<i64>) -> Option<ToolCall> {
    let id = tool_request_id(item)?;
    let request = item.get("toolCall").unwrap_or(&Value::Null);
    let value = request.get("value").unwrap_or(&Value::Null);
    let failed = request.get("status").and_then(Value::as_str) == Some("error");
    Some(ToolCall {
        call_id: id.to_owned(),
        name: value
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("unknown")
            .to_owned(),
        args: value.get("arguments").cloned().unwrap_or(Value::Null),
        result: failed.then(|| error_text(request.get("error"))),
        outcome: if failed {
            ToolOutcome::Error
        } else {
            ToolOutcome::Missing
        },
        started_ms: at,
        finished_ms: None,
    })
}

/// A text or image content item as a part.
fn plain_part(item: &Value) -> Option<Part> {
    match item.get("type").and_then(Value::as_str)? {
        "text" => item.get("text").and_then(Value::as_str).map(Part::text),
        "image" => {
            let data = item.get("data").and_then(Value::as_str)?;
            let mime = item
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("image/png");
            Some(Part::image(data, mime, None))
        }
        _ => None,
    }
}

fn error_text(error: Option<&Value>) -> String {
    match error {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(map)) => map
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| Value::Object(map.clone()).to_string()),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A result's text: a `CallToolResult{content[]}` or (older files) a bare Content array.
fn result_text(value: &Value) -> String {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::Object(map) => match map.get("content") {
            Some(Value::Array(items)) => items.as_slice(),
            _ => return value.to_string(),
        },
        Value::String(text) => return text.clone(),
        Value::Null => return String::new(),
        other => return other.to_string(),
    };
    let texts: Vec<String> = items
        .iter()
        .filter_map(|item| match item.get("type").and_then(Value::as_str) {
            Some("text") => item.get("text").and_then(Value::as_str).map(str::to_owned),
            Some("image") => Some(format!(
                "[image {}]",
                item.get("mimeType").and_then(Value::as_str).unwrap_or("")
            )),
            Some("resource") => item
                .pointer("/resource/text")
                .or_else(|| item.pointer("/resource/uri"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// goose's answer when the user declines a call (`DECLINED_RESPONSE`).
fn is_declined(text: &str) -> bool {
    text.contains("declined to run this tool")
}

#[cfg(test)]
mod tests;
