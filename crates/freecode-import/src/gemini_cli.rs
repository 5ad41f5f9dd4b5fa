//! Gemini CLI chats (`session-….json` and `session-….jsonl`) read into [`ImportedSession`]s.
//!
//! **Where.** `$GEMINI_CLI_HOME/.gemini` (Gemini CLI's own override of the home), else
//! `~/.gemini`: `tmp/<project>/chats/session-<time>-<id8>.json[l]`. When a legacy `.json` and
//! the `.jsonl` it was migrated to both exist, only the `.jsonl` is read. Subagent chats,
//! `chats/<parentSessionId>/<id>.jsonl`, are their own units and sessions, children of that
//! parent ([`ParentKind::Subagent`]). `~/.gemini/projects.json` is a side file of every unit.
//!
//! **Formats.** Legacy: one `ConversationRecord` object `{sessionId, projectHash, startTime,
//! lastUpdated, messages[], summary?, kind?}`, rewritten each turn; one cut mid-write keeps the
//! metadata before `messages` and every complete message. JSONL (append-only): line 1 the same
//! metadata without `messages`; then message records (a later record with the same `id`
//! replaces the earlier, in the earlier's place), `{"$set": {…}}` patches merged into the
//! metadata (a `messages` array in one is a batch of message records, de-duplicated by id with
//! the bare ones), and `{"$rewindTo": id}`, which deletes that message and everything after it
//! (everything, when the id is unknown). Lines are streamed ([`lines::for_each_line`]).
//!
//! **Field map.**
//! - `sessionId` → `source_id`; `startTime` → `created_ms`; `lastUpdated` (after patches) →
//!   `updated_ms`; `provider` is `google`; the model is the last `gemini` message's `model`.
//! - `project_path`: never from a directory name. `projects.json` (`{"projects": {root: slug}}`)
//!   is searched for the root whose sha256 is the chat's `projectHash`, else for the root whose
//!   slug is the `<project>` the chat is filed under. Unresolved, it stays `None` and the hash
//!   goes to `project_hash`: the importer hashes the directories it knows ([`crate::projects`]).
//! - `user` → [`UserTurn`]: `content` (a string, or parts `[{text}]`, `inlineData` images).
//! - `gemini` (and the `model` + `parts` shape some tools write) → one [`Response`]: text from
//!   `content`; each `toolCalls[]` entry a [`ToolCall`] (`id`, `name`, `args`, result = the
//!   `functionResponse.response` `output`, else its `error`; `status` `success` → Ok, `error` →
//!   Error, `cancelled` → Denied; started at the message's `timestamp`, finished at the call's);
//!   `tokens` → usage: `inputTokens` = `input` + `tool` (the tool-use prompt), cached ⊂ input
//!   kept, `cacheReadInputTokens` = `cached`, `outputTokens` = `output` + `thoughts`,
//!   `reasoningTokens` = `thoughts`. `thoughts` text is not a part type and is left out.
//! - `error` → [`Item::Error`]; `info` and `warning` are UI notes, skipped.
//! - Title: `summary`, else the first prompt that is not an injected `<session_context>` block
//!   (its `displayContent` when it has one: `/init` rather than the expanded prompt).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use freecode_core::{Part, Usage};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::codex::title_of;
use crate::lines;
use crate::model::{
    Content, ErrorNote, ImportedSession, Item, ParentKind, ParentLink, Read, Response, ToolCall,
    ToolOutcome, UserTurn, parse_iso_ms,
};
use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// The project registry in the Gemini directory.
pub const PROJECTS_FILE: &str = "projects.json";
/// How deep below a root `discover` looks (`tmp/<project>/chats/<parent>/` is 4).
const MAX_DEPTH: usize = 5;
/// The largest legacy `.json` chat read whole (Gemini CLI rewrites it each turn).
const MAX_LEGACY_BYTES: u64 = 1 << 30;
/// The largest `projects.json` read.
const MAX_PROJECTS_BYTES: u64 = 16 * 1024 * 1024;

/// Where Gemini CLI keeps its chats: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn default_roots(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let home = var("GEMINI_CLI_HOME")
        .filter(|v| !v.is_empty())
        .or_else(|| var("HOME").filter(|v| !v.is_empty()));
    home.map(|home| vec![PathBuf::from(home).join(".gemini")])
        .unwrap_or_default()
}

/// The chats under `root` (a Gemini directory, any directory below it, or one chat file): main
/// chats first, sorted, then subagent chats. Links below the root are not followed.
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
    if meta.is_file() {
        return vec![unit_of(root.to_owned())];
    }
    if !meta.is_dir() {
        return Vec::new();
    }
    let mut mains = Vec::new();
    let mut subagents = Vec::new();
    // In a Gemini directory only `tmp/` holds chats (`history/` holds shadow git repositories).
    let tmp = root.join("tmp");
    let top = if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir()) {
        tmp.as_path()
    } else {
        root
    };
    walk(top, 0, &mut mains, &mut subagents, issues);
    mains.sort();
    subagents.sort();
    let jsonl: std::collections::HashSet<PathBuf> = mains
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .cloned()
        .collect();
    mains
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                || !(jsonl.contains(&p.with_extension("jsonl"))
                    || jsonl.contains(&with_suffix(p, ".jsonl")))
        })
        .chain(subagents)
        .map(unit_of)
        .collect()
}

/// `path` with `suffix` appended to its file name (`a.json` → `a.json.jsonl`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn unit_of(path: PathBuf) -> SourceUnit {
    let projects = gemini_dir_of(&path).map(|dir| dir.join(PROJECTS_FILE));
    let mut unit = SourceUnit::file(Agent::GeminiCli, path);
    unit.side_files
        .extend(projects.filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())));
    unit
}

/// The Gemini directory a chat file is filed in: `<gemini>/tmp/<project>/chats/[<parent>/]f`.
fn gemini_dir_of(chat: &Path) -> Option<PathBuf> {
    let chats = chat
        .ancestors()
        .skip(1)
        .take(2)
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?;
    let tmp = chats.parent()?.parent()?;
    (tmp.file_name()? == "tmp").then(|| tmp.parent().map(Path::to_owned))?
}

fn is_chat_name(name: &str) -> bool {
    name.starts_with("session-") && (name.ends_with(".json") || name.ends_with(".jsonl"))
}

fn walk(
    dir: &Path,
    depth: usize,
    mains: &mut Vec<PathBuf>,
    subagents: &mut Vec<PathBuf>,
    issues: &mut Vec<SourceIssue>,
) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            issues.push(SourceIssue::in_file(dir, format!("cannot be listed: {e}")));
            return;
        }
    };
    let in_chats = dir.file_name().is_some_and(|n| n == "chats");
    let under_chats = dir
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "chats");
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        let name = name.to_str().unwrap_or_default();
        if kind.is_symlink() {
            if is_chat_name(name) {
                issues.push(SourceIssue::in_file(&path, "a link: not followed"));
            }
        } else if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, mains, subagents, issues);
            }
        } else if kind.is_file() {
            if under_chats && name.ends_with(".jsonl") {
                subagents.push(path);
            } else if is_chat_name(name) && (in_chats || depth == 0) {
                mains.push(path);
            }
        }
    }
}

/// Reads one chat file.
pub fn read(unit: &SourceUnit) -> Result<Read, ReadError> {
    let path = unit.path.as_path();
    let mut issues = Vec::new();
    let chat = if path.extension().is_some_and(|e| e == "json") {
        read_legacy(path, &mut issues)?
    } else {
        read_jsonl(path, &mut issues)?
    };
    let Some(chat) = chat else {
        return Ok(Read {
            sessions: Vec::new(),
            issues,
        });
    };
    let projects = unit
        .side_files
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == PROJECTS_FILE))
        .and_then(|p| read_projects(p, &mut issues));
    let session = chat.into_session(path, projects.as_ref(), &mut issues);
    Ok(Read {
        sessions: session.into_iter().collect(),
        issues,
    })
}

/// A chat's metadata and messages, patches and rewinds applied.
#[derive(Default)]
struct Chat {
    meta: Map<String, Value>,
    messages: Vec<Value>,
    by_id: HashMap<String, usize>,
    /// Unknown record shapes: first line, count.
    unknown: BTreeMap<String, (u64, u64)>,
}

impl Chat {
    fn upsert(&mut self, message: Value) {
        match message.get("id").and_then(Value::as_str).map(str::to_owned) {
            Some(id) => match self.by_id.get(&id) {
                Some(&at) => self.messages[at] = message,
                None => {
                    self.by_id.insert(id, self.messages.len());
                    self.messages.push(message);
                }
            },
            None => self.messages.push(message),
        }
    }

    fn patch(&mut self, set: Map<String, Value>) {
        for (key, value) in set {
            if key == "messages" {
                if let Value::Array(batch) = value {
                    for message in batch {
                        self.upsert(message);
                    }
                }
            } else {
                self.meta.insert(key, value);
            }
        }
    }

    fn rewind_to(&mut self, id: Option<&str>) {
        let cut = id.and_then(|id| self.by_id.get(id).copied()).unwrap_or(0);
        self.messages.truncate(cut);
        self.by_id.retain(|_, at| *at < cut);
    }

    fn unknown(&mut self, what: String, line: u64) {
        self.unknown
            .entry(what)
            .and_modify(|(_, n)| *n += 1)
            .or_insert((line, 1));
    }
}

fn read_jsonl(path: &Path, issues: &mut Vec<SourceIssue>) -> Result<Option<Chat>, ReadError> {
    let mut chat = Chat::default();
    let mut records = 0u64;
    let mut local = Vec::new();
    lines::for_each_line(path, issues, |line| {
        let Some(value) = lines::parse_json::<Value>(path, &line, &mut local) else {
            return;
        };
        let Value::Object(mut record) = value else {
            local.push(SourceIssue::at_line(
                path,
                line.number,
                "not a JSON object, skipped",
            ));
            return;
        };
        records += 1;
        if let Some(set) = record.remove("$set") {
            match set {
                Value::Object(set) => chat.patch(set),
                _ => chat.unknown("a $set that is not an object".into(), line.number),
            }
        } else if let Some(to) = record.get("$rewindTo") {
            chat.rewind_to(to.as_str());
        } else if record.contains_key("id") && record.contains_key("type") {
            chat.upsert(Value::Object(record));
        } else if record.contains_key("sessionId") {
            // The metadata line (line 1; a repeated one is merged like a patch).
            record.remove("messages");
            chat.patch(record);
        } else {
            chat.unknown(
                "a record that is no message, patch or rewind".into(),
                line.number,
            );
        }
    })?;
    issues.append(&mut local);
    Ok((records > 0).then_some(chat))
}

fn read_legacy(path: &Path, issues: &mut Vec<SourceIssue>) -> Result<Option<Chat>, ReadError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|file| file.take(MAX_LEGACY_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| ReadError::io(path, e))?;
    if bytes.len() as u64 > MAX_LEGACY_BYTES {
        issues.push(SourceIssue::in_file(
            path,
            format!("larger than {MAX_LEGACY_BYTES} bytes: not read"),
        ));
        return Ok(None);
    }
    let mut body = bytes.as_slice();
    if let Some(rest) = body.strip_prefix(b"\xEF\xBB\xBF") {
        issues.push(SourceIssue::in_file(path, "byte-order mark skipped"));
        body = rest;
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut chat = Chat::default();
    match freecode_core::json::from_slice_lossy::<Value>(body) {
        Ok(lossy) => {
            let Value::Object(mut record) = lossy.value else {
                return Err(ReadError::NotThisAgent {
                    path: path.to_owned(),
                    agent: Agent::GeminiCli,
                    message: "not a JSON object".into(),
                });
            };
            let messages = record.remove("messages");
            chat.patch(record);
            if let Some(Value::Array(messages)) = messages {
                for message in messages {
                    chat.upsert(message);
                }
            }
        }
        Err(e) => {
            // Cut while Gemini CLI rewrote it: keep the metadata and every complete message.
            let Some(kept) = salvage(body, &mut chat) else {
                issues.push(SourceIssue::in_file(
                    path,
                    format!("not JSON ({e}) and nothing could be kept: left for the next import"),
                ));
                return Ok(None);
            };
            issues.push(SourceIssue::in_file(
                path,
                format!("incomplete ({e}): {kept} complete messages kept, the rest left for the next import"),
            ));
        }
    }
    Ok(Some(chat))
}

/// What a cut legacy file still holds: the keys before `"messages"`, then each complete message
/// of the array. `None` when even the metadata is cut.
fn salvage(body: &[u8], chat: &mut Chat) -> Option<usize> {
    let key = memchr::memmem::find(body, b"\"messages\"")?;
    let after_key = key + b"\"messages\"".len();
    let colon = after_key
        + body[after_key..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())?;
    if body.get(colon) != Some(&b':') {
        return None;
    }
    let mut head = body[..key].to_vec();
    // `{…, ` before the key: close the object without it.
    while head
        .last()
        .is_some_and(|b| b.is_ascii_whitespace() || *b == b',')
    {
        head.pop();
    }
    head.push(b'}');
    let Ok(lossy) = freecode_core::json::from_slice_lossy::<Value>(&head) else {
        return None;
    };
    let Value::Object(meta) = lossy.value else {
        return None;
    };
    chat.patch(meta);
    let mut at = colon + 1;
    at += body[at..].iter().position(|b| !b.is_ascii_whitespace())?;
    if body.get(at) != Some(&b'[') {
        return Some(0);
    }
    at += 1;
    let mut kept = 0;
    while let Some(skip) = body[at..]
        .iter()
        .position(|b| !(b.is_ascii_whitespace() || *b == b','))
    {
        at += skip;
        if body[at] == b']' {
            break;
        }
        let mut stream = serde_json::Deserializer::from_slice(&body[at..]).into_iter::<Value>();
        let Some(Ok(message)) = stream.next() else {
            break;
        };
        at += stream.byte_offset();
        chat.upsert(message);
        kept += 1;
    }
    Some(kept)
}

/// `projects.json`: project root → slug.
fn read_projects(path: &Path, issues: &mut Vec<SourceIssue>) -> Option<Map<String, Value>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_PROJECTS_BYTES {
        issues.push(SourceIssue::in_file(
            path,
            "not a regular file of a sane size: not read",
        ));
        return None;
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            issues.push(SourceIssue::in_file(path, format!("cannot be read: {e}")));
            return None;
        }
    };
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match freecode_core::json::from_slice_lossy::<Value>(body).map(|l| l.value) {
        Ok(Value::Object(mut top)) => match top.remove("projects") {
            Some(Value::Object(projects)) => Some(projects),
            _ => Some(top),
        },
        Ok(_) => None,
        Err(e) => {
            issues.push(SourceIssue::in_file(
                path,
                format!("not JSON ({e}): not read"),
            ));
            None
        }
    }
}

/// Lowercase hex sha256, as Gemini CLI's `getProjectHash`.
pub(crate) fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The project root of a chat: the registered root whose hash is `projectHash`, else the one
/// whose slug is the directory the chat is filed under (a registry lookup, not a decoding).
fn project_root(
    chat_path: &Path,
    hash: Option<&str>,
    projects: &Map<String, Value>,
) -> Option<String> {
    if let Some(hash) = hash {
        let found = projects.keys().find(|root| {
            let trimmed = root.trim_end_matches('/');
            sha256_hex(root) == hash || (!trimmed.is_empty() && sha256_hex(trimmed) == hash)
        });
        if let Some(root) = found {
            return Some(root.clone());
        }
    }
    let chats = chat_path
        .ancestors()
        .skip(1)
        .take(2)
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?;
    let slug = chats.parent()?.file_name()?.to_str()?;
    projects
        .iter()
        .find(|(_, s)| s.as_str() == Some(slug))
        .map(|(root, _)| root.clone())
}

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(text) => Some(text.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Object(part)) => part
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

/// Text and inline image parts of a `PartListUnion`.
fn parts_of(content: Option<&Value>) -> Vec<Part> {
    let mut parts = Vec::new();
    let text = text_of(content);
    if !text.trim().is_empty() {
        parts.push(Part::text(text));
    }
    if let Some(Value::Array(items)) = content {
        for item in items {
            if let Some(inline) = item.get("inlineData")
                && let (Some(data), Some(mime)) = (
                    inline.get("data").and_then(Value::as_str),
                    inline.get("mimeType").and_then(Value::as_str),
                )
            {
                parts.push(Part::image(data, mime, None));
            }
        }
    }
    parts
}

fn str_of<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    map.get(key).and_then(Value::as_str)
}

fn time_of(map: &Map<String, Value>, key: &str) -> Option<i64> {
    str_of(map, key).and_then(parse_iso_ms)
}

fn tool_call(
    call: &Map<String, Value>,
    started_ms: Option<i64>,
    (message, index): (usize, usize),
) -> ToolCall {
    let response = call
        .get("result")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|r| r.get("functionResponse").and_then(|f| f.get("response")));
    let as_text = |v: &Value| match v {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let output = response.and_then(|r| r.get("output")).map(as_text);
    let error = response.and_then(|r| r.get("error")).map(as_text);
    let result = output.clone().or_else(|| error.clone());
    let outcome = match str_of(call, "status") {
        Some("success") if error.is_none() || output.is_some() => ToolOutcome::Ok,
        Some("error") => ToolOutcome::Error,
        Some("cancelled") => ToolOutcome::Denied(error.clone().or_else(|| output.clone())),
        _ if error.is_some() && output.is_none() => ToolOutcome::Error,
        _ if result.is_some() => ToolOutcome::Ok,
        _ => ToolOutcome::Missing,
    };
    let args = match call.get("args") {
        Some(Value::Object(args)) => Value::Object(args.clone()),
        Some(Value::Null) | None => json!({}),
        Some(other) => json!({ "args": other }),
    };
    ToolCall {
        call_id: str_of(call, "id")
            .map(str::to_owned)
            .unwrap_or_else(|| format!("call-{message}-{index}")),
        name: str_of(call, "name").unwrap_or("tool").to_owned(),
        args,
        result,
        outcome,
        started_ms,
        finished_ms: time_of(call, "timestamp"),
    }
}

fn usage_of(tokens: &Map<String, Value>) -> Usage {
    let count = |key: &str| tokens.get(key).and_then(Value::as_u64);
    let thoughts = count("thoughts");
    let mut usage = Usage::new(
        count("input").unwrap_or(0) + count("tool").unwrap_or(0),
        count("output").unwrap_or(0) + thoughts.unwrap_or(0),
    );
    usage.cache_read_input_tokens = count("cached");
    usage.reasoning_tokens = thoughts;
    usage
}

impl Chat {
    fn into_session(
        mut self,
        path: &Path,
        projects: Option<&Map<String, Value>>,
        issues: &mut Vec<SourceIssue>,
    ) -> Option<ImportedSession> {
        for (what, (line, count)) in std::mem::take(&mut self.unknown) {
            let times = if count == 1 {
                String::new()
            } else {
                format!(" ({count} times)")
            };
            issues.push(SourceIssue::at_line(
                path,
                line,
                format!("{what}: skipped{times}"),
            ));
        }
        // A subagent's chat is named by its id: the fallback when its metadata has none.
        let named =
            subagent_parent(path).and_then(|_| path.file_stem()?.to_str().map(str::to_owned));
        let Some(id) = str_of(&self.meta, "sessionId").map(str::to_owned).or(named) else {
            issues.push(SourceIssue::in_file(path, "no sessionId: not imported"));
            return None;
        };
        let mut session = ImportedSession::new(Agent::GeminiCli, id, path);
        session.provider = Some(Agent::GeminiCli.default_provider().to_owned());
        session.created_ms = time_of(&self.meta, "startTime");
        let hash = str_of(&self.meta, "projectHash");
        session.project_path = projects.and_then(|p| project_root(path, hash, p));
        if session.project_path.is_none() {
            // Resolved by the importer from the directories it knows, else skipped with why.
            session.project_hash = hash.map(str::to_owned);
        }
        if let Some(parent) = subagent_parent(path) {
            session.parent = Some(ParentLink {
                source_id: parent,
                kind: ParentKind::Subagent,
            });
        }
        let mut first_prompt = None;
        let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
        let mut last_ms = None;
        for (at, message) in self.messages.iter().enumerate() {
            let Some(message) = message.as_object() else {
                continue;
            };
            let ts = time_of(message, "timestamp");
            if ts.is_some() {
                last_ms = ts;
            }
            match str_of(message, "type").unwrap_or_default() {
                "user" => {
                    let parts = parts_of(message.get("content"));
                    if parts.is_empty() {
                        continue;
                    }
                    if first_prompt.is_none() {
                        let shown = message
                            .get("displayContent")
                            .map(|d| text_of(Some(d)))
                            .filter(|d| !d.trim().is_empty())
                            .unwrap_or_else(|| text_of(message.get("content")));
                        if !shown.trim_start().starts_with("<session_context>") {
                            first_prompt = Some(shown);
                        }
                    }
                    session.items.push(Item::User(UserTurn {
                        id: str_of(message, "id").map(str::to_owned),
                        at_ms: ts,
                        parts,
                    }));
                }
                "gemini" | "model" => {
                    let mut content: Vec<Content> =
                        parts_of(message.get("content").or_else(|| message.get("parts")))
                            .into_iter()
                            .map(Content::Part)
                            .collect();
                    if let Some(Value::Array(calls)) = message.get("toolCalls") {
                        content.extend(
                            calls
                                .iter()
                                .filter_map(Value::as_object)
                                .enumerate()
                                .map(|(i, call)| Content::Tool(tool_call(call, ts, (at, i)))),
                        );
                    }
                    let model = str_of(message, "model").map(str::to_owned);
                    if model.is_some() {
                        session.model.clone_from(&model);
                    }
                    let usage = message
                        .get("tokens")
                        .and_then(Value::as_object)
                        .map(usage_of);
                    if content.is_empty() && usage.is_none() {
                        continue;
                    }
                    session.items.push(Item::Response(Response {
                        id: str_of(message, "id").map(str::to_owned),
                        model,
                        requested_ms: None,
                        first_token_ms: None,
                        completed_ms: ts,
                        content,
                        usage,
                    }));
                }
                "error" => session.items.push(Item::Error(ErrorNote {
                    at_ms: ts,
                    message: text_of(message.get("content")),
                    aborted: false,
                })),
                "info" | "warning" => {}
                other => *skipped.entry(other.to_owned()).or_default() += 1,
            }
        }
        for (kind, count) in skipped {
            issues.push(SourceIssue::in_file(
                path,
                format!("{count} messages of unknown type {kind:?}: skipped"),
            ));
        }
        session.updated_ms = time_of(&self.meta, "lastUpdated").or(last_ms);
        session.title = str_of(&self.meta, "summary")
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
            .or_else(|| first_prompt.as_deref().and_then(title_of));
        Some(session)
    }
}

/// `chats/<parentSessionId>/<id>.jsonl`: the parent's session id.
fn subagent_parent(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    (dir.parent()?.file_name()? == "chats").then(|| dir.file_name()?.to_str().map(str::to_owned))?
}

#[cfg(test)]
mod tests;
