//! Claude Code's transcripts (`~/.claude/projects/<key>/<sessionId>.jsonl`) read into
//! [`ImportedSession`]s, by the algorithm of OTHER-AGENTS.md A.1.
//!
//! - [`discover`]: one unit per `<sessionId>.jsonl`; its subagent transcripts
//!   (`<sessionId>/subagents/**/agent-*.jsonl`, and before 2.1.2 `agent-*.jsonl` beside it
//!   naming it as their `sessionId`) and its spilled tool outputs (`<sessionId>/tool-results/`)
//!   are side files of that unit. A subagent transcript whose session's file is not there
//!   (deleted by Claude Code's cleanup, or a walk started inside the session's folder) is a
//!   unit of its own, read as the same child session it would be beside its parent (so the
//!   parent, imported later, finds it).
//! - [`read`]: the records form a tree through `parentUuid`. The live leaf is
//!   `last-prompt.leafUuid` when it resolves, else the newest record nobody points to (sidechain
//!   records only in a subagent file); the chain is walked up from it, crossing a
//!   `compact_boundary` through `logicalParentUuid`. Assistant lines are merged by `message.id`
//!   (then `requestId`, then `uuid`), wherever the lines of one response sit (parallel tool
//!   calls put tool results between them), with `usage` once. User lines holding
//!   `tool_result`s are no message: they fill the tool calls (by `tool_use_id`, or for id-less
//!   records by their parent line). `isMeta` and local-command caveat lines are skipped.
//!   Thinking blocks are not kept (freecode has no reasoning part): only their length reaches
//!   the rollout. Other leaves that hold a prompt of their own become forks; subagent files
//!   become child sessions, and so do the `isSidechain` runs older versions wrote into the
//!   session's own file (each named by the Task call whose prompt it starts with).
//! - The project path is the first record's `cwd`, never the directory name.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use freecode_core::{Part, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::lines::{self, Line};
use crate::model::{
    Compaction, Content, ErrorNote, ImportedSession, Item, ParentKind, ParentLink, Read, Response,
    SubagentRun, ToolCall, ToolOutcome, TurnEnd, UserTurn, parse_iso_ms,
};
use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// A spilled tool output larger than this is not read (the record's own text is kept).
const MAX_SPILL_BYTES: u64 = 16 * 1024 * 1024;

/// `${CLAUDE_CONFIG_DIR:-~/.claude}/projects`.
pub fn default_roots(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let base = match var("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match var("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".claude"),
            None => return Vec::new(),
        },
    };
    vec![base.join("projects")]
}

/// The session units under `root` (a `projects/` tree, one project's directory, a Claude
/// config directory holding `projects/`, or one `.jsonl` file), sorted. Links are not followed.
pub fn discover(root: &Path, issues: &mut Vec<SourceIssue>) -> Vec<SourceUnit> {
    let mut units = Vec::new();
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_file() => {
            units.push(unit_for(root));
            return units;
        }
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            issues.push(SourceIssue::in_file(
                root,
                "not a file or directory (links are not followed), skipped",
            ));
            return units;
        }
        Err(e) => {
            issues.push(SourceIssue::in_file(root, format!("cannot read: {e}")));
            return units;
        }
    }
    let projects = root.join("projects");
    let start = match std::fs::symlink_metadata(&projects) {
        Ok(m) if m.is_dir() => projects,
        _ => root.to_owned(),
    };
    walk(&start, 0, &mut units, issues);
    units.sort_by(|a, b| a.path.cmp(&b.path));
    units
}

/// Directories entered below the root at most: `projects/<key>/`, and a tree of copies or
/// backups holding such trees (a bound on a walk of `/`, not on any layout Claude Code
/// writes).
const MAX_DEPTH: usize = 8;

fn walk(dir: &Path, depth: usize, units: &mut Vec<SourceUnit>, issues: &mut Vec<SourceIssue>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            issues.push(SourceIssue::in_file(dir, format!("cannot list: {e}")));
            return;
        }
    };
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        if kind.is_file() {
            files.push(name);
        } else if kind.is_dir() {
            dirs.push(name);
        }
    }
    files.sort();
    dirs.sort();
    let stems: HashSet<String> = files
        .iter()
        .filter_map(|n| n.to_str()?.strip_suffix(".jsonl").map(str::to_owned))
        .collect();
    let mut here: Vec<SourceUnit> = Vec::new();
    let mut orphans: Vec<SourceUnit> = Vec::new();
    let mut loose_agents = Vec::new();
    for name in &files {
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".jsonl") else {
            continue;
        };
        if stem.starts_with("agent-") {
            loose_agents.push(dir.join(name));
        } else {
            here.push(unit_for(&dir.join(name)));
        }
    }
    // Before 2.1.2 a subagent transcript sat beside the sessions, its records naming the parent.
    for path in loose_agents {
        match first_session_id(&path) {
            Some(sid) => match here
                .iter_mut()
                .find(|u| u.path.file_stem().and_then(|s| s.to_str()) == Some(sid.as_str()))
            {
                Some(unit) => {
                    if !unit.side_files.contains(&path) {
                        unit.side_files.push(path);
                    }
                }
                // Its session is not here (gone, or elsewhere): a session of its own.
                None => orphans.push(SourceUnit::file(Agent::ClaudeCode, &path)),
            },
            None => orphans.push(SourceUnit::file(Agent::ClaudeCode, &path)),
        }
    }
    units.extend(here);
    units.extend(orphans);
    if depth >= MAX_DEPTH {
        return;
    }
    for name in dirs {
        let Some(text) = name.to_str() else { continue };
        // A session's own directory (subagents, tool results) is read with the session.
        if stems.contains(text) || text == "tool-results" {
            continue;
        }
        // Reached only when its session's transcript is not beside it (gone, or this walk
        // started inside it): each subagent transcript is a session of its own.
        if text == "subagents" {
            let mut agents = Vec::new();
            collect_agents(&dir.join(&name), 0, &mut agents);
            agents.sort();
            units.extend(
                agents
                    .iter()
                    .map(|p| SourceUnit::file(Agent::ClaudeCode, p)),
            );
            continue;
        }
        walk(&dir.join(&name), depth + 1, units, issues);
    }
}

/// The unit of the session file `path`, with its side files.
fn unit_for(path: &Path) -> SourceUnit {
    let mut unit = SourceUnit::file(Agent::ClaudeCode, path);
    if let (Some(parent), Some(stem)) = (path.parent(), path.file_stem()) {
        let own = parent.join(stem);
        let mut side = Vec::new();
        collect_agents(&own.join("subagents"), 0, &mut side);
        if let Ok(entries) = std::fs::read_dir(own.join("tool-results")) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_file()) {
                    side.push(e.path());
                }
            }
        }
        side.sort();
        unit.side_files = side;
    }
    unit
}

fn collect_agents(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if kind.is_file() && name.starts_with("agent-") && name.ends_with(".jsonl") {
            out.push(e.path());
        } else if kind.is_dir() && depth < 4 {
            collect_agents(&e.path(), depth + 1, out);
        }
    }
}

/// The `sessionId` of a file's first record that has one (read from its first lines only).
fn first_session_id(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    for _ in 0..20 {
        let read = lines::read_line(&mut reader, &mut line).ok()?;
        if read.len == 0 {
            break;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(&line)
            && let Some(sid) = v.get("sessionId").and_then(Value::as_str)
        {
            return Some(sid.to_owned());
        }
    }
    None
}

/// Whether `path` is one of a unit's subagent transcripts.
fn is_agent_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("agent-") && n.ends_with(".jsonl"))
}

/// Reads a unit: the session, its forks, and a child session per subagent transcript.
pub fn read(unit: &SourceUnit) -> Result<Read, ReadError> {
    let mut out = Read::default();
    let source_id = unit
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let spills: HashMap<String, PathBuf> = unit
        .side_files
        .iter()
        .filter(|p| p.parent().and_then(Path::file_name) == Some("tool-results".as_ref()))
        .filter_map(|p| Some((p.file_name()?.to_str()?.to_owned(), p.clone())))
        .collect();
    let file = parse_file(&unit.path, &spills, &mut out.issues)?;
    if is_agent_file(&unit.path) {
        // A subagent transcript read alone (its session's is gone, or elsewhere): the child
        // session it would be beside its session, so it is the same one when that comes.
        let agent_id = source_id.strip_prefix("agent-").unwrap_or(&source_id);
        // `<session>/subagents/…/agent-<id>.jsonl` names its session by the folder (since
        // 2.1.2); a file beside the sessions (before) by its records' `sessionId`.
        let parent = unit
            .path
            .ancestors()
            .skip(1)
            .take(5)
            .find(|d| d.file_name() == Some("subagents".as_ref()))
            .and_then(|d| d.parent()?.file_name()?.to_str().map(str::to_owned))
            .or_else(|| first_session_id(&unit.path).filter(|sid| *sid != source_id));
        let (child_id, link) = match parent {
            Some(parent) => (
                subagent_source_id(&parent, agent_id),
                Some(ParentLink {
                    source_id: parent,
                    kind: ParentKind::Subagent,
                }),
            ),
            None => (source_id.clone(), None),
        };
        let mut kids = file.sessions(&child_id, &unit.path, link, &mut out.issues);
        kids.truncate(1);
        out.sessions = kids;
        return Ok(out);
    }
    let mut sessions = file.sessions(&source_id, &unit.path, None, &mut out.issues);
    // Before subagents had files of their own, their records sat in the session's file.
    sessions.extend(file.inline_sidechains(&source_id, &unit.path, &mut out.issues));
    for side in unit.side_files.iter().filter(|p| is_agent_file(p)) {
        let child = match parse_file(side, &spills, &mut out.issues) {
            Ok(child) => child,
            Err(e) => {
                out.issues.push(SourceIssue::in_file(side, e.to_string()));
                continue;
            }
        };
        let agent_id = side
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix("agent-"))
            .unwrap_or_default()
            .to_owned();
        let child_id = subagent_source_id(&source_id, &agent_id);
        let link = ParentLink {
            source_id: source_id.clone(),
            kind: ParentKind::Subagent,
        };
        let mut kids = child.sessions(&child_id, side, Some(link), &mut out.issues);
        // A subagent's own branches are not imported: its transcript is its live chain.
        kids.truncate(1);
        sessions.extend(kids);
    }
    out.sessions = sessions;
    Ok(out)
}

/// The source id of the child session made of subagent `agent_id`'s transcript
/// (`subagents/agent-<agent_id>.jsonl`) beside the session `session_source_id` (the file's
/// session, or one of its forks: `<file's>@<uuid>`).
pub(crate) fn subagent_source_id(session_source_id: &str, agent_id: &str) -> String {
    let file = session_source_id
        .split_once('@')
        .map_or(session_source_id, |(file, _)| file);
    format!("{file}/agent-{agent_id}")
}

/// Accepts any JSON where a value of type `T` is expected: anything else reads as `None`.
fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

/// The keys of a record the importer reads; every other key is ignored (so `progress`
/// payloads, snapshots and unknown keys cost a skip, not a tree).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Rec {
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    subtype: Option<String>,
    #[serde(deserialize_with = "lenient")]
    uuid: Option<String>,
    #[serde(rename = "parentUuid", deserialize_with = "lenient")]
    parent_uuid: Option<String>,
    #[serde(rename = "logicalParentUuid", deserialize_with = "lenient")]
    logical_parent_uuid: Option<String>,
    #[serde(rename = "isSidechain", deserialize_with = "lenient")]
    is_sidechain: Option<bool>,
    #[serde(rename = "isMeta", deserialize_with = "lenient")]
    is_meta: Option<bool>,
    #[serde(rename = "isCompactSummary", deserialize_with = "lenient")]
    is_compact_summary: Option<bool>,
    #[serde(rename = "isApiErrorMessage", deserialize_with = "lenient")]
    is_api_error: Option<bool>,
    #[serde(deserialize_with = "lenient")]
    cwd: Option<String>,
    #[serde(deserialize_with = "lenient")]
    version: Option<String>,
    #[serde(deserialize_with = "lenient")]
    timestamp: Option<String>,
    message: Option<Value>,
    #[serde(rename = "requestId", deserialize_with = "lenient")]
    request_id: Option<String>,
    #[serde(rename = "toolUseResult")]
    tool_use_result: Option<Value>,
    #[serde(rename = "toolDenialKind", deserialize_with = "lenient")]
    tool_denial_kind: Option<String>,
    #[serde(rename = "compactMetadata")]
    compact_metadata: Option<Value>,
    error: Option<Value>,
    #[serde(rename = "durationMs", deserialize_with = "lenient")]
    duration_ms: Option<i64>,
    content: Option<Value>,
    #[serde(rename = "leafUuid", deserialize_with = "lenient")]
    leaf_uuid: Option<String>,
    #[serde(deserialize_with = "lenient")]
    summary: Option<String>,
    #[serde(rename = "customTitle", deserialize_with = "lenient")]
    custom_title: Option<String>,
    #[serde(rename = "aiTitle", deserialize_with = "lenient")]
    ai_title: Option<String>,
    #[serde(rename = "agentName", deserialize_with = "lenient")]
    agent_name: Option<String>,
}

/// A record of the tree, as much of it as the walk and the mapping need.
struct Node {
    uuid: Option<String>,
    parent: Option<String>,
    logical_parent: Option<String>,
    sidechain: bool,
    at_ms: Option<i64>,
    kind: NodeKind,
}

enum NodeKind {
    /// A typed prompt (parts), or `None` for a line that is no prompt (meta, caveat, results).
    User {
        parts: Option<Vec<Part>>,
        compact_summary: Option<String>,
    },
    Assistant {
        key: String,
        model: Option<String>,
        blocks: Vec<Value>,
        usage: Option<Value>,
        api_error: bool,
    },
    CompactBoundary {
        pre_tokens: Option<u64>,
    },
    ApiError(String),
    TurnDuration(Option<i64>),
    /// `[Request interrupted by user]`: the turn was aborted.
    Interrupted,
    Other,
}

/// A tool result found in a user line.
#[derive(Clone)]
struct ToolResult {
    text: String,
    is_error: bool,
    denial: Option<String>,
    at_ms: Option<i64>,
    agent_id: Option<String>,
}

/// Everything one file holds, ready for the walk.
#[derive(Default)]
struct Parsed {
    nodes: Vec<Node>,
    by_uuid: HashMap<String, usize>,
    /// Lines of each assistant response, in file order.
    responses: HashMap<String, Vec<usize>>,
    results: HashMap<String, ToolResult>,
    /// Results without a `tool_use_id`, by the line they answer.
    anonymous_results: HashMap<String, Vec<ToolResult>>,
    cwd: Option<String>,
    version: Option<String>,
    last_prompt_leaf: Option<String>,
    custom_title: Option<String>,
    agent_name: Option<String>,
    ai_title: Option<String>,
    summary: Option<String>,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
}

fn parse_file(
    path: &Path,
    spills: &HashMap<String, PathBuf>,
    issues: &mut Vec<SourceIssue>,
) -> Result<Parsed, ReadError> {
    let mut p = Parsed::default();
    let mut local = Vec::new();
    let mut skipped = Vec::new();
    lines::for_each_line(path, &mut skipped, |line| {
        p.take(path, &line, spills, &mut local);
    })?;
    skipped.append(&mut local);
    skipped.sort_by_key(|i| i.line);
    issues.append(&mut skipped);
    Ok(p)
}

impl Parsed {
    fn take(
        &mut self,
        path: &Path,
        line: &Line<'_>,
        spills: &HashMap<String, PathBuf>,
        issues: &mut Vec<SourceIssue>,
    ) {
        let Some(rec) = lines::parse_json::<Rec>(path, line, issues) else {
            return;
        };
        let at_ms = rec.timestamp.as_deref().and_then(parse_iso_ms);
        if let Some(ms) = at_ms {
            self.first_ms = Some(self.first_ms.map_or(ms, |f| f.min(ms)));
            self.last_ms = Some(self.last_ms.map_or(ms, |l| l.max(ms)));
        }
        if self.cwd.is_none() {
            self.cwd = rec.cwd.clone().filter(|c| !c.is_empty());
        }
        if rec.version.is_some() {
            self.version = rec.version.clone();
        }
        let kind_name = rec.kind.as_deref().unwrap_or("");
        let kind = match kind_name {
            "user" => self.user(path, line, &rec, at_ms, spills, issues),
            "assistant" => match assistant(&rec) {
                Some(kind) => kind,
                None => {
                    issues.push(SourceIssue::at_line(
                        path,
                        line.number,
                        "assistant record without a message, skipped",
                    ));
                    return;
                }
            },
            "system" => match rec.subtype.as_deref() {
                Some("compact_boundary") => NodeKind::CompactBoundary {
                    pre_tokens: rec
                        .compact_metadata
                        .as_ref()
                        .and_then(|m| m.get("preTokens"))
                        .and_then(Value::as_u64),
                },
                Some("api_error") => NodeKind::ApiError(error_text(&rec)),
                Some("turn_duration") => NodeKind::TurnDuration(rec.duration_ms),
                _ => NodeKind::Other,
            },
            "summary" => {
                self.summary = rec.summary.clone().or(self.summary.take());
                return;
            }
            "custom-title" => {
                self.custom_title = rec.custom_title.clone().or(self.custom_title.take());
                return;
            }
            "ai-title" => {
                self.ai_title = rec.ai_title.clone().or(self.ai_title.take());
                return;
            }
            "agent-name" => {
                self.agent_name = rec.agent_name.clone().or(self.agent_name.take());
                return;
            }
            "last-prompt" => {
                self.last_prompt_leaf = rec.leaf_uuid.clone().or(self.last_prompt_leaf.take());
                return;
            }
            "" => {
                issues.push(SourceIssue::at_line(
                    path,
                    line.number,
                    "record without a type, skipped",
                ));
                return;
            }
            // progress, attachment, file-history-snapshot, queue-operation and every type
            // this version does not know: a node of the tree (the chain runs through them),
            // nothing more.
            _ => NodeKind::Other,
        };
        let index = self.nodes.len();
        if let Some(uuid) = &rec.uuid {
            self.by_uuid.insert(uuid.clone(), index);
        }
        if let NodeKind::Assistant { key, .. } = &kind {
            self.responses.entry(key.clone()).or_default().push(index);
        }
        self.nodes.push(Node {
            uuid: rec.uuid,
            parent: rec.parent_uuid,
            logical_parent: rec.logical_parent_uuid,
            sidechain: rec.is_sidechain.unwrap_or(false),
            at_ms,
            kind,
        });
    }

    /// A user line: its tool results go into the maps; its prompt, if it is one, into the node.
    fn user(
        &mut self,
        path: &Path,
        line: &Line<'_>,
        rec: &Rec,
        at_ms: Option<i64>,
        spills: &HashMap<String, PathBuf>,
        issues: &mut Vec<SourceIssue>,
    ) -> NodeKind {
        let content = rec.message.as_ref().and_then(|m| m.get("content"));
        let mut parts = Vec::new();
        let mut has_results = false;
        match content {
            Some(Value::String(text)) => parts.push(Part::text(text.clone())),
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("tool_result") => {
                            has_results = true;
                            let result =
                                self.tool_result(path, line, rec, block, at_ms, spills, issues);
                            match block.get("tool_use_id").and_then(Value::as_str) {
                                Some(id) => {
                                    self.results.insert(id.to_owned(), result);
                                }
                                None => {
                                    if let Some(parent) = &rec.parent_uuid {
                                        self.anonymous_results
                                            .entry(parent.clone())
                                            .or_default()
                                            .push(result);
                                    }
                                }
                            }
                        }
                        Some("text") => {
                            if let Some(text) = block.get("text").and_then(Value::as_str) {
                                parts.push(Part::text(text));
                            }
                        }
                        Some("image") => {
                            if let Some(part) = image_part(block) {
                                parts.push(part);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        let text: String = parts
            .iter()
            .filter_map(Part::text_content)
            .collect::<Vec<_>>()
            .join("\n");
        if rec.is_compact_summary == Some(true) {
            return NodeKind::User {
                parts: None,
                compact_summary: Some(text),
            };
        }
        let caveat = text.trim_start().starts_with("<local-command-caveat>")
            || text.trim_start().starts_with("<local-command-stdout>")
            || text.trim_start().starts_with("<local-command-stderr>")
            || text.starts_with("Caveat: The messages below were generated by the user");
        if text
            .trim_start()
            .starts_with("[Request interrupted by user")
        {
            return NodeKind::Interrupted;
        }
        let prompt = !has_results && rec.is_meta != Some(true) && !caveat && !parts.is_empty();
        NodeKind::User {
            parts: prompt.then_some(parts),
            compact_summary: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn tool_result(
        &self,
        path: &Path,
        line: &Line<'_>,
        rec: &Rec,
        block: &Value,
        at_ms: Option<i64>,
        spills: &HashMap<String, PathBuf>,
        issues: &mut Vec<SourceIssue>,
    ) -> ToolResult {
        let mut text = match block.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b.get("text").and_then(Value::as_str).map(str::to_owned),
                    Some("image") => Some("[image]".to_owned()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        let structured = rec.tool_use_result.as_ref();
        // A large output spilled to `<sessionId>/tool-results/`: read it from there.
        let spilled = structured
            .and_then(|r| r.get("persistedOutputPath"))
            .and_then(Value::as_str)
            .and_then(|p| Path::new(p).file_name()?.to_str().map(str::to_owned))
            .and_then(|name| spills.get(&name));
        if let Some(spill) = spilled {
            match read_spill(spill) {
                Ok(Some(body)) => text = body,
                Ok(None) => {}
                Err(e) => issues.push(SourceIssue::at_line(
                    path,
                    line.number,
                    format!(
                        "spilled tool output {} unreadable ({e}): the record's text is kept",
                        spill.display()
                    ),
                )),
            }
        }
        let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let denial = rec.tool_denial_kind.clone().or_else(|| {
            if !is_error {
                None
            } else if text.contains("doesn't want to proceed with this tool use")
                || text.contains("tool use was rejected")
            {
                Some("user-rejected".to_owned())
            } else if text.contains("requested permissions to") && text.contains("granted") {
                // Non-interactive runs: the permission was never given.
                Some("permission-rule".to_owned())
            } else {
                None
            }
        });
        let agent_id = structured
            .and_then(|r| r.get("agentId"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| agent_id_in(&text));
        ToolResult {
            text,
            is_error,
            denial,
            at_ms,
            agent_id,
        }
    }

    /// The sessions of this file: the live chain, then a fork per other branch with a prompt
    /// of its own.
    fn sessions(
        &self,
        source_id: &str,
        path: &Path,
        parent: Option<ParentLink>,
        issues: &mut Vec<SourceIssue>,
    ) -> Vec<ImportedSession> {
        let leaves = self.leaves();
        // The newest leaf below `last-prompt.leafUuid` (lines written after it continue it),
        // else the newest leaf.
        let marked = self
            .last_prompt_leaf
            .as_ref()
            .and_then(|u| self.by_uuid.get(u).copied());
        let main_leaf = match marked {
            Some(m) => leaves
                .iter()
                .rev()
                .copied()
                .find(|&l| self.chain(l, path, &mut Vec::new()).contains(&m))
                .or(Some(m)),
            None => leaves.last().copied(),
        };
        let Some(main_leaf) = main_leaf else {
            return Vec::new();
        };
        let main_chain = self.chain(main_leaf, path, issues);
        let on_main: HashSet<usize> = main_chain.iter().copied().collect();
        let mut out = vec![self.session(source_id, path, parent, &main_chain)];
        for &leaf in &leaves {
            if on_main.contains(&leaf) {
                continue;
            }
            let chain = self.chain(leaf, path, &mut Vec::new());
            let own_prompt = chain.iter().any(|i| {
                !on_main.contains(i)
                    && matches!(&self.nodes[*i].kind, NodeKind::User { parts: Some(_), .. })
            });
            if !own_prompt {
                continue;
            }
            let uuid = self.nodes[leaf].uuid.clone().unwrap_or_default();
            let link = ParentLink {
                source_id: source_id.to_owned(),
                kind: ParentKind::Fork,
            };
            out.push(self.session(&format!("{source_id}@{uuid}"), path, Some(link), &chain));
        }
        out
    }

    /// The subagent runs an older version wrote into the session's own file (`isSidechain`
    /// records beside the main chain): a child session per run, as a subagent transcript of
    /// its own would be. A run is named by the Task call whose prompt it starts with (so the
    /// parent's subagent events name it), else by its first record's uuid; its newest branch
    /// is kept.
    fn inline_sidechains(
        &self,
        source_id: &str,
        path: &Path,
        issues: &mut Vec<SourceIssue>,
    ) -> Vec<ImportedSession> {
        if !self.nodes.iter().any(|n| !n.sidechain && n.uuid.is_some()) {
            return Vec::new();
        }
        let mut pointed = HashSet::new();
        for n in &self.nodes {
            if let Some(p) = &n.parent {
                pointed.insert(p.as_str());
            }
        }
        // Each run's newest leaf, by the run's first record.
        let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.sidechain || n.uuid.as_deref().is_none_or(|u| pointed.contains(u)) {
                continue;
            }
            let chain: Vec<usize> = self
                .chain(i, path, issues)
                .into_iter()
                .filter(|&c| self.nodes[c].sidechain)
                .collect();
            let Some(&root) = chain.first() else { continue };
            match runs.iter_mut().find(|(r, _)| *r == root) {
                Some(run) => run.1 = chain,
                None => runs.push((root, chain)),
            }
        }
        // The Task calls of the main records, by their prompt.
        let mut tasks: HashMap<String, String> = HashMap::new();
        for n in self.nodes.iter().filter(|n| !n.sidechain) {
            let NodeKind::Assistant { blocks, .. } = &n.kind else {
                continue;
            };
            for b in blocks {
                let is_task = b.get("type").and_then(Value::as_str) == Some("tool_use")
                    && matches!(
                        b.get("name").and_then(Value::as_str),
                        Some("Task" | "Agent")
                    );
                if let (true, Some(prompt), Some(id)) = (
                    is_task,
                    b.pointer("/input/prompt").and_then(Value::as_str),
                    b.get("id").and_then(Value::as_str),
                ) {
                    tasks.insert(prompt.trim().to_owned(), id.to_owned());
                }
            }
        }
        // Sidechain records the session's own chains run through are the session's.
        let on_main: HashSet<usize> = self
            .leaves()
            .into_iter()
            .filter(|&l| !self.nodes[l].sidechain)
            .flat_map(|l| self.chain(l, path, &mut Vec::new()))
            .collect();
        let mut out = Vec::new();
        for (root, chain) in runs {
            if chain.iter().any(|i| on_main.contains(i)) {
                continue;
            }
            let prompt = chain.iter().find_map(|&i| match &self.nodes[i].kind {
                NodeKind::User {
                    parts: Some(parts), ..
                } => Some(
                    parts
                        .iter()
                        .filter_map(Part::text_content)
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                _ => None,
            });
            let agent = prompt
                .and_then(|p| tasks.get(p.trim()).cloned())
                .or_else(|| self.nodes[root].uuid.clone())
                .unwrap_or_default();
            let link = ParentLink {
                source_id: source_id.to_owned(),
                kind: ParentKind::Subagent,
            };
            let mut child = self.session(
                &subagent_source_id(source_id, &agent),
                path,
                Some(link),
                &chain,
            );
            // The file's title is the session's, not the run's.
            child.title = None;
            if child.message_count() > 0 {
                out.push(child);
            }
        }
        out
    }

    /// Records nobody points to, in file order: sidechain ones only when the file has nothing
    /// else (a subagent's transcript).
    fn leaves(&self) -> Vec<usize> {
        let mut pointed = HashSet::new();
        for n in &self.nodes {
            if let Some(p) = &n.parent {
                pointed.insert(p.as_str());
            }
            if let Some(p) = &n.logical_parent {
                pointed.insert(p.as_str());
            }
        }
        let free = |sidechain: bool| -> Vec<usize> {
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| {
                    n.sidechain == sidechain
                        && n.uuid.as_deref().is_some_and(|u| !pointed.contains(u))
                })
                .map(|(i, _)| i)
                .collect()
        };
        let main = free(false);
        if main.is_empty() { free(true) } else { main }
    }

    /// The chain from the root to `leaf`, crossing compact boundaries.
    fn chain(&self, leaf: usize, path: &Path, issues: &mut Vec<SourceIssue>) -> Vec<usize> {
        let mut chain = Vec::new();
        let mut seen = HashSet::new();
        let mut at = Some(leaf);
        while let Some(i) = at {
            if !seen.insert(i) {
                issues.push(SourceIssue::in_file(
                    path,
                    "parentUuid links form a cycle; the walk stopped there",
                ));
                break;
            }
            chain.push(i);
            let node = &self.nodes[i];
            let up = node.parent.as_ref().or(match node.kind {
                NodeKind::CompactBoundary { .. } => node.logical_parent.as_ref(),
                _ => None,
            });
            at = up.and_then(|u| self.by_uuid.get(u).copied());
        }
        chain.reverse();
        chain
    }

    fn session(
        &self,
        source_id: &str,
        path: &Path,
        parent: Option<ParentLink>,
        chain: &[usize],
    ) -> ImportedSession {
        let mut s = ImportedSession::new(Agent::ClaudeCode, source_id, path);
        s.version = self.version.clone();
        s.project_path = self.cwd.clone();
        s.title = self
            .custom_title
            .clone()
            .or_else(|| self.agent_name.clone())
            .or_else(|| self.ai_title.clone())
            .or_else(|| self.summary.clone());
        s.provider = Some(Agent::ClaudeCode.default_provider().to_owned());
        s.created_ms = self.first_ms;
        s.updated_ms = self.last_ms;
        s.parent = parent;
        let mut done: HashSet<&str> = HashSet::new();
        let mut response_at: HashMap<&str, usize> = HashMap::new();
        for &i in chain {
            let node = &self.nodes[i];
            match &node.kind {
                NodeKind::User {
                    parts: Some(parts), ..
                } => s.items.push(Item::User(UserTurn {
                    id: node.uuid.clone(),
                    at_ms: node.at_ms,
                    parts: parts.clone(),
                })),
                NodeKind::User {
                    compact_summary: Some(summary),
                    ..
                } => {
                    if let Some(Item::Compaction(c)) = s.items.last_mut()
                        && c.summary.is_empty()
                    {
                        c.summary = summary.clone();
                    } else {
                        s.items.push(Item::Compaction(Compaction {
                            at_ms: node.at_ms,
                            summary: summary.clone(),
                            before_tokens: None,
                            after_tokens: None,
                        }));
                    }
                }
                NodeKind::User { .. } | NodeKind::Other => {}
                NodeKind::Assistant { key, api_error, .. } => {
                    if *api_error {
                        if let NodeKind::Assistant { blocks, .. } = &node.kind {
                            s.items.push(Item::Error(ErrorNote {
                                at_ms: node.at_ms,
                                message: blocks_text(blocks),
                                aborted: false,
                            }));
                        }
                        continue;
                    }
                    if !done.insert(key.as_str()) {
                        continue;
                    }
                    let response = self.response(key);
                    if let Some(m) = &response.model {
                        s.model = Some(m.clone());
                    }
                    let runs = self.subagent_runs(&response);
                    response_at.insert(key.as_str(), s.items.len());
                    s.items.push(Item::Response(response));
                    s.items.extend(runs.into_iter().map(Item::Subagent));
                }
                NodeKind::CompactBoundary { pre_tokens } => {
                    s.items.push(Item::Compaction(Compaction {
                        at_ms: node.at_ms,
                        summary: String::new(),
                        before_tokens: *pre_tokens,
                        after_tokens: None,
                    }))
                }
                NodeKind::ApiError(message) => s.items.push(Item::Error(ErrorNote {
                    at_ms: node.at_ms,
                    message: message.clone(),
                    aborted: false,
                })),
                NodeKind::Interrupted => s.items.push(Item::TurnEnd(TurnEnd {
                    at_ms: node.at_ms,
                    duration_ms: None,
                    aborted: Some("interrupted by the user".to_owned()),
                })),
                NodeKind::TurnDuration(ms) => s.items.push(Item::TurnEnd(TurnEnd {
                    at_ms: node.at_ms,
                    duration_ms: *ms,
                    aborted: None,
                })),
            }
        }
        if s.title.is_none() {
            s.title = s
                .items
                .iter()
                .find_map(|i| match i {
                    Item::User(u) => Some(u.parts.iter().find_map(Part::text_content)),
                    _ => None,
                })
                .flatten()
                .and_then(command_title);
        }
        s
    }

    /// One response from every line of `key`, blocks in file order, usage once.
    fn response(&self, key: &str) -> Response {
        let lines = self.responses.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let mut r = Response {
            id: Some(key.to_owned()),
            model: None,
            requested_ms: None,
            first_token_ms: None,
            completed_ms: None,
            content: Vec::new(),
            usage: None,
        };
        let mut seen_calls = HashSet::new();
        for &i in lines {
            let node = &self.nodes[i];
            let NodeKind::Assistant {
                model,
                blocks,
                usage,
                ..
            } = &node.kind
            else {
                continue;
            };
            if let Some(m) = model.as_deref().filter(|m| *m != "<synthetic>") {
                r.model = Some(m.to_owned());
            }
            if r.first_token_ms.is_none() {
                r.first_token_ms = node.at_ms;
            }
            if node.at_ms.is_some() {
                r.completed_ms = node.at_ms;
            }
            if let Some(u) = usage.as_ref().and_then(usage_of) {
                r.usage = Some(u);
            }
            let mut anonymous = self
                .anonymous_results
                .get(node.uuid.as_deref().unwrap_or(""))
                .map(|v| v.iter())
                .into_iter()
                .flatten();
            for (b, block) in blocks.iter().enumerate() {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(text) = block.get("text").and_then(Value::as_str)
                            && !text.is_empty()
                        {
                            r.content.push(Content::Part(Part::text(text)));
                        }
                    }
                    Some("image") => {
                        if let Some(part) = image_part(block) {
                            r.content.push(Content::Part(part));
                        }
                    }
                    Some("tool_use") | Some("server_tool_use") => {
                        let id = block.get("id").and_then(Value::as_str);
                        let call_id = match id {
                            Some(id) => id.to_owned(),
                            None => format!("{}:{b}", node.uuid.as_deref().unwrap_or(key)),
                        };
                        if !seen_calls.insert(call_id.clone()) {
                            continue;
                        }
                        let result = match id {
                            Some(id) => self.results.get(id).cloned(),
                            None => anonymous.next().cloned(),
                        };
                        r.content
                            .push(Content::Tool(tool_call(call_id, block, node.at_ms, result)));
                    }
                    _ => {}
                }
            }
        }
        r
    }

    /// A [`SubagentRun`] per Task/Agent call of a response.
    fn subagent_runs(&self, r: &Response) -> Vec<SubagentRun> {
        let mut runs = Vec::new();
        for c in &r.content {
            let Content::Tool(call) = c else { continue };
            if call.name != "Task" && call.name != "Agent" {
                continue;
            }
            let task = ["description", "prompt"]
                .iter()
                .find_map(|k| call.args.get(*k).and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned();
            let agent_id = self
                .results
                .get(&call.call_id)
                .and_then(|r| r.agent_id.clone())
                .unwrap_or_else(|| call.call_id.clone());
            runs.push(SubagentRun {
                subagent_id: agent_id,
                task,
                started_ms: call.started_ms,
                stopped_ms: call.finished_ms,
                result: call.result.clone(),
            });
        }
        runs
    }
}

fn assistant(rec: &Rec) -> Option<NodeKind> {
    let message = rec.message.as_ref()?;
    let key = message
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| rec.request_id.clone())
        .or_else(|| rec.uuid.clone())?;
    let blocks = match message.get("content") {
        Some(Value::Array(b)) => b.clone(),
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        _ => Vec::new(),
    };
    Some(NodeKind::Assistant {
        key,
        model: message
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned),
        blocks,
        usage: message.get("usage").cloned(),
        api_error: rec.is_api_error == Some(true),
    })
}

fn tool_call(
    call_id: String,
    block: &Value,
    at_ms: Option<i64>,
    result: Option<ToolResult>,
) -> ToolCall {
    let name = block
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("tool")
        .to_owned();
    let args = block
        .get("input")
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let (result_text, outcome, finished) = match result {
        None => (None, ToolOutcome::Missing, None),
        Some(r) => {
            let outcome = match (&r.denial, r.is_error) {
                (Some(kind), _) => ToolOutcome::Denied(Some(kind.clone())),
                (None, true) => ToolOutcome::Error,
                (None, false) => ToolOutcome::Ok,
            };
            (Some(r.text), outcome, r.at_ms)
        }
    };
    ToolCall {
        call_id,
        name,
        args,
        result: result_text,
        outcome,
        started_ms: at_ms,
        finished_ms: finished,
    }
}

/// Anthropic's usage in our convention: input includes the (disjoint) cache reads and writes;
/// the writes made for an hour (`cache_creation.ephemeral_1h_input_tokens`) are counted apart
/// as well, being billed at their own rate.
fn usage_of(u: &Value) -> Option<Usage> {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    let input = n("input_tokens");
    let output = n("output_tokens");
    if input.is_none() && output.is_none() {
        return None;
    }
    let read = n("cache_read_input_tokens");
    let write = n("cache_creation_input_tokens");
    let mut usage = Usage::new(
        input
            .unwrap_or(0)
            .saturating_add(read.unwrap_or(0))
            .saturating_add(write.unwrap_or(0)),
        output.unwrap_or(0),
    );
    usage.cache_read_input_tokens = read;
    usage.cache_creation_input_tokens = write;
    usage.cache_write_1h_input_tokens = u
        .pointer("/cache_creation/ephemeral_1h_input_tokens")
        .and_then(Value::as_u64)
        .map(|h| write.map_or(h, |w| h.min(w)));
    Some(usage)
}

fn image_part(block: &Value) -> Option<Part> {
    let source = block.get("source")?;
    let data = source.get("data").and_then(Value::as_str)?;
    let media = source
        .get("media_type")
        .and_then(Value::as_str)
        .unwrap_or("image/png");
    Some(Part::image(data, media, None))
}

fn blocks_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

fn error_text(rec: &Rec) -> String {
    match &rec.error {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => v
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                v.get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| v.to_string()),
        Some(v) if !v.is_null() => v.to_string(),
        _ => match &rec.content {
            Some(Value::String(s)) => s.clone(),
            _ => "API error".to_owned(),
        },
    }
}

/// The title of a session opened by a slash command: `/init` (and its arguments) out of
/// `<command-name>/init</command-name>…<command-args>…</command-args>`; `None` for a prompt.
fn command_title(text: &str) -> Option<String> {
    let between = |open: &str, close: &str| {
        let start = text.find(open)? + open.len();
        let len = text[start..].find(close)?;
        Some(text[start..start + len].trim().to_owned())
    };
    let name = between("<command-name>", "</command-name>")?;
    let args = between("<command-args>", "</command-args>").unwrap_or_default();
    Some(if args.is_empty() {
        name
    } else {
        format!("{name} {args}")
    })
}

/// `agentId: a0ad4f44…` in a Task result's text.
fn agent_id_in(text: &str) -> Option<String> {
    let at = text.find("agentId:")?;
    let rest = text[at + "agentId:".len()..].trim_start();
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!id.is_empty()).then_some(id)
}

fn read_spill(path: &Path) -> std::io::Result<Option<String>> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_file() || meta.len() > MAX_SPILL_BYTES {
        return Ok(None);
    }
    let bytes = std::fs::read(path)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests;
