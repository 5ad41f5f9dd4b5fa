//! The agent-neutral shape every importer reads a source session into.
//!
//! An [`ImportedSession`] is a timeline of [`Item`]s in the order they happened: user turns,
//! provider responses (one per response, split lines already merged, usage once), compactions,
//! errors, subagent runs and turn ends. Tool calls sit inside the response that made them with
//! their result, outcome and times. Our `messages.jsonl` and the synthesised rollout log are both
//! derived from this one shape, so every agent maps the same way.
//!
//! Times are ms since the epoch, `None` when the source has none. Conventions each agent module
//! (`claude_code`, `codex`, …) follows:
//! - `pub fn default_roots(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf>`:
//!   where the agent keeps its sessions, honouring its own variables (`CLAUDE_CONFIG_DIR`,
//!   `CODEX_HOME`, `XDG_DATA_HOME`, `HOME`, …) read through `var`;
//! - `pub fn discover(root: &Path, issues: &mut Vec<SourceIssue>) -> Vec<SourceUnit>`: the units
//!   under a root (a root may also be one file), sorted, never following a symlink out;
//! - `pub fn read(unit: &SourceUnit) -> Result<Read, ReadError>`: the sessions of one unit, bad
//!   input reported in [`Read::issues`], never fatal unless the unit cannot be opened at all.

use std::path::PathBuf;

use freecode_core::{Part, Usage};
use serde_json::Value;

use crate::source::{Agent, SourceIssue};

/// What reading one [`crate::source::SourceUnit`] gave.
#[derive(Debug, Default)]
pub struct Read {
    /// Its sessions: usually one; a database holds many; subagent transcripts are their own
    /// sessions with a [`ParentLink`].
    pub sessions: Vec<ImportedSession>,
    /// What was skipped, with file and line.
    pub issues: Vec<SourceIssue>,
}

/// One session of another agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedSession {
    /// Which agent wrote it.
    pub agent: Agent,
    /// The session's id in the source (Claude Code's `sessionId`, Codex's `session_meta.id`, …):
    /// our session id is derived from it and the agent, so re-import finds the same session.
    pub source_id: String,
    /// The file or database it was read from.
    pub source_path: PathBuf,
    /// The agent's version, when the source records one.
    pub version: Option<String>,
    /// The project path from the records (`cwd`, `directory`, `working_dir`), never decoded from
    /// a directory name. `None` when the source has none.
    pub project_path: Option<String>,
    /// The lowercase hex SHA-256 of the project root, when the source names its project only
    /// so and its own registry does not resolve it (Gemini CLI's `projectHash`): the importer
    /// hashes the directories it knows to find it ([`crate::projects`]).
    pub project_hash: Option<String>,
    /// The title by the agent's own order of preference, if any (else the importer uses the
    /// first prompt).
    pub title: Option<String>,
    /// Provider id, when the source names one.
    pub provider: Option<String>,
    /// The last model used.
    pub model: Option<String>,
    /// Creation time.
    pub created_ms: Option<i64>,
    /// Last activity.
    pub updated_ms: Option<i64>,
    /// A subagent's parent, or the session a fork branches from.
    pub parent: Option<ParentLink>,
    /// What happened, in order.
    pub items: Vec<Item>,
    /// Token totals of the whole session, for sources that count per session only (goose):
    /// on no message, since no response's own counts are known.
    pub session_usage: Option<Usage>,
}

/// How a session hangs off another of the same agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentLink {
    /// The parent's id in the source.
    pub source_id: String,
    /// Subagent transcript or fork.
    pub kind: ParentKind,
}

/// The kind of a [`ParentLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentKind {
    /// A transcript of a subagent (Task tool, sub_agent session) the parent ran.
    Subagent,
    /// A branch of the parent's conversation (an edited prompt, `--fork-session`,
    /// `forked_from_id`).
    Fork,
}

/// One step of a session's timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A prompt from the user: starts a turn.
    User(UserTurn),
    /// One provider response.
    Response(Response),
    /// The history was compacted into a summary.
    Compaction(Compaction),
    /// The provider or the agent reported an error.
    Error(ErrorNote),
    /// A subagent ran (its transcript, when the source has one, is a child session).
    Subagent(SubagentRun),
    /// A turn ended (the agent recorded it).
    TurnEnd(TurnEnd),
}

/// A user prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct UserTurn {
    /// The source's id of this message, when it has one.
    pub id: Option<String>,
    /// When it was sent.
    pub at_ms: Option<i64>,
    /// Text and image parts.
    pub parts: Vec<Part>,
}

/// One provider response, merged from however many records the source split it into.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The provider's response id (Claude's `message.id`), or the record's id.
    pub id: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
    /// When the request went out, when the source says; else the importer uses the previous
    /// item's time.
    pub requested_ms: Option<i64>,
    /// When its first token arrived, when the source says.
    pub first_token_ms: Option<i64>,
    /// When it was complete (its last record's time).
    pub completed_ms: Option<i64>,
    /// Its content in order: text, code and image parts, and tool calls.
    pub content: Vec<Content>,
    /// Its token counts, once per response. Our convention: `inputTokens` includes cache
    /// reads (Anthropic's disjoint counters are summed; OpenAI's cached ⊂ input kept).
    pub usage: Option<Usage>,
}

/// A piece of a response.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// A text, code or image part.
    Part(Part),
    /// A tool call and what came back.
    Tool(ToolCall),
}

/// A tool call with its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id pairing call and result (`toolu_…`, `call_…`).
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Its arguments.
    pub args: Value,
    /// The model-visible output, the error text or the refusal; `None` when no result came.
    pub result: Option<String>,
    /// How it ended.
    pub outcome: ToolOutcome,
    /// When it was called.
    pub started_ms: Option<i64>,
    /// When its result came back.
    pub finished_ms: Option<i64>,
}

/// How a [`ToolCall`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOutcome {
    /// It ran and returned.
    Ok,
    /// It ran and failed.
    Error,
    /// The user or a rule refused it; the reason when the source gives one.
    Denied(Option<String>),
    /// No result was recorded (the session ended, or was cut, before it came).
    Missing,
}

/// A compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// When it happened.
    pub at_ms: Option<i64>,
    /// The summary the model continued from.
    pub summary: String,
    /// Tokens in the context before it, when recorded.
    pub before_tokens: Option<u64>,
    /// Tokens after it, when recorded.
    pub after_tokens: Option<u64>,
}

/// An error the provider or agent reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorNote {
    /// When.
    pub at_ms: Option<i64>,
    /// Its text.
    pub message: String,
    /// Whether the user aborted (rather than the provider failing).
    pub aborted: bool,
}

/// A subagent's run, as the parent saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentRun {
    /// The subagent's id (its transcript's source id, when it has one).
    pub subagent_id: String,
    /// What it was asked to do.
    pub task: String,
    /// When it started.
    pub started_ms: Option<i64>,
    /// When it stopped.
    pub stopped_ms: Option<i64>,
    /// What it returned.
    pub result: Option<String>,
}

/// The end of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// When.
    pub at_ms: Option<i64>,
    /// The turn's wall time, when the source records it.
    pub duration_ms: Option<i64>,
    /// Set when the turn was aborted, with the reason.
    pub aborted: Option<String>,
}

impl ImportedSession {
    /// An empty session of `agent` read from `source_path`.
    pub fn new(
        agent: Agent,
        source_id: impl Into<String>,
        source_path: impl Into<PathBuf>,
    ) -> Self {
        Self {
            agent,
            source_id: source_id.into(),
            source_path: source_path.into(),
            version: None,
            project_path: None,
            project_hash: None,
            title: None,
            provider: None,
            model: None,
            created_ms: None,
            updated_ms: None,
            parent: None,
            items: Vec::new(),
            session_usage: None,
        }
    }

    /// The number of messages it becomes: one per user turn and one per response.
    pub fn message_count(&self) -> usize {
        self.items
            .iter()
            .filter(|item| matches!(item, Item::User(_) | Item::Response(_)))
            .count()
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (`2026-02-23T12:41:04.123Z`, with or
/// without fraction, `Z` or an offset; without an offset it is read as UTC). `None` for anything
/// else.
pub fn parse_iso_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let timestamp = match text.parse::<jiff::Timestamp>() {
        Ok(timestamp) => timestamp,
        Err(_) => text
            .parse::<jiff::civil::DateTime>()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp(),
    };
    Some(timestamp.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_parse_to_epoch_ms() {
        assert_eq!(parse_iso_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_iso_ms("2026-02-23T12:41:04.123Z"),
            Some(1_771_850_464_123)
        );
        assert_eq!(
            parse_iso_ms("2026-02-23T12:41:04.1Z"),
            Some(1_771_850_464_100)
        );
        assert_eq!(
            parse_iso_ms("2026-02-23T13:41:04+01:00"),
            Some(1_771_850_464_000)
        );
        assert_eq!(
            parse_iso_ms("2026-02-23T12:41:04.123456789Z"),
            Some(1_771_850_464_123)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-23T12:41:04.Z",
        ] {
            assert_eq!(parse_iso_ms(bad), None, "{bad:?}");
        }
    }
}
