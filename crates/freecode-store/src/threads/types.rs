//! The thread store's records (SPEC §14.1) in the original's camelCase JSON, and the inputs of
//! its operations.
//!
//! Field order is the order the original's JSON store writes (`{...input, id, createdAt, …}`),
//! so a record we create serializes with the original's bytes. Optional fields are left out when
//! absent and `null` reads as absent. Keys this version does not know are kept in `extra` and
//! written back after the known ones (the JSON backend round-trips them; SQLite has no column
//! for them and drops them).
//!
//! The rules both backends share live here too, so that they cannot drift apart: applying an
//! update, the sort orders, and the search predicate.

use std::cmp::{Ordering, Reverse};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use freecode_core::string_enum;

string_enum! {
    /// A thread's lifecycle (`ThreadStatus`; there is no `interrupted`).
    #[derive(Default)]
    ThreadStatus {
        /// In use (the default).
        #[default]
        Active => "active",
        /// Archived by the user.
        Archived => "archived",
        /// Marked deleted (a hard delete removes the thread instead).
        Deleted => "deleted",
    }
}

string_enum! {
    /// Where a thread's goal stands (`ThreadGoalStatus`).
    GoalStatus {
        /// Set, not started.
        Pending => "pending",
        /// Being worked on.
        Active => "active",
        /// Reached.
        Completed => "completed",
        /// Given up.
        Failed => "failed",
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// Reads a present key (even `null`) as `Some(inner)`, so an update can clear a field.
fn double_option<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A thread: one conversation (`StoredThread`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredThread {
    /// Title shown in lists.
    #[serde(default)]
    pub title: String,
    /// The project directory the thread belongs to.
    #[serde(default)]
    pub project_path: String,
    /// The model provider.
    #[serde(default)]
    pub provider: String,
    /// What the thread is trying to achieve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// Where the goal stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_status: Option<GoalStatus>,
    /// Lifecycle status.
    #[serde(default)]
    pub status: ThreadStatus,
    /// Number of turns stored for the thread.
    #[serde(default)]
    pub turn_count: i64,
    /// Agent iterations (kept as given).
    #[serde(default)]
    pub iteration_count: i64,
    /// When the last turn was created (ms); the list order.
    #[serde(default)]
    pub last_turn_at: i64,
    /// `thread-<ms>-<5 base36>` for threads this store creates.
    #[serde(default)]
    pub id: String,
    /// Creation time (ms).
    #[serde(default)]
    pub created_at: i64,
    /// Last change (ms).
    #[serde(default)]
    pub updated_at: i64,
    /// When `goalStatus` last changed (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_updated_at: Option<i64>,
    /// Keys this version does not know, kept through a read-modify-write (JSON backend).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One tool call of a turn (`StoredToolCall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredToolCall {
    /// The tool's name.
    #[serde(default)]
    pub tool_name: String,
    /// Its arguments (an object; `{}` when the record has none).
    #[serde(default = "empty_object")]
    pub args: Value,
    /// Its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// `tc-<ms>-<5 base36>` for calls this store adds.
    #[serde(default)]
    pub id: String,
    /// 1-based position in the turn.
    #[serde(default)]
    pub sequence: i64,
    /// Keys this version does not know (JSON backend).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One turn of a thread (`StoredTurn`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTurn {
    /// The thread it belongs to.
    #[serde(default)]
    pub thread_id: String,
    /// 1-based turn number.
    #[serde(default)]
    pub turn_number: i64,
    /// The user's prompt.
    #[serde(default)]
    pub prompt: String,
    /// The agent's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// How long the turn took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Number of tool calls made in the turn (maintained by `add_tool_call`).
    #[serde(default)]
    pub tool_call_count: i64,
    /// The stored tool calls. Reads return them (ordered by `sequence`) on both backends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<StoredToolCall>>,
    /// `turn-<ms>-<5 base36>` for turns this store creates.
    #[serde(default)]
    pub id: String,
    /// Creation time (ms).
    #[serde(default)]
    pub created_at: i64,
    /// Keys this version does not know (JSON backend).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call as the turn-items view shows it: no arguments, no sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnItemToolCall {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub tool_name: String,
    /// Its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
}

/// A turn with its tool calls, for display (`StoredTurnItemsView`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTurnItemsView {
    /// The thread.
    pub thread_id: String,
    /// 1-based turn number.
    pub turn_number: i64,
    /// The user's prompt.
    pub prompt: String,
    /// The agent's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Creation time (ms).
    pub created_at: i64,
    /// The turn's tool calls, ordered by sequence.
    pub tool_calls: Vec<TurnItemToolCall>,
}

impl StoredTurnItemsView {
    /// The view of `turn` (its tool calls sorted by sequence).
    pub fn of(turn: &StoredTurn) -> Self {
        let mut calls: Vec<&StoredToolCall> = turn.tool_calls.iter().flatten().collect();
        calls.sort_by(|a, b| cmp_calls(a, b));
        Self {
            thread_id: turn.thread_id.clone(),
            turn_number: turn.turn_number,
            prompt: turn.prompt.clone(),
            response: turn.response.clone(),
            created_at: turn.created_at,
            tool_calls: calls
                .into_iter()
                .map(|c| TurnItemToolCall {
                    id: c.id.clone(),
                    tool_name: c.tool_name.clone(),
                    result: c.result.clone(),
                    error: c.error.clone(),
                    duration_ms: c.duration_ms,
                })
                .collect(),
        }
    }
}

/// Which threads `list_threads` returns (`ThreadFilter`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadFilter {
    /// Exact status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ThreadStatus>,
    /// Exact project path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_path: Option<String>,
    /// Exact provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// At most this many (after `offset`); `0` means no limit, as in the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Skip this many first (works without `limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
}

impl ThreadFilter {
    /// Whether `t` passes the status, project and provider conditions.
    pub fn admits(&self, t: &StoredThread) -> bool {
        self.status.as_ref().is_none_or(|s| *s == t.status)
            && self
                .project_path
                .as_ref()
                .is_none_or(|p| *p == t.project_path)
            && self.provider.as_ref().is_none_or(|p| *p == t.provider)
    }

    /// The effective limit: `None` for "all" (absent or 0).
    pub fn effective_limit(&self) -> Option<usize> {
        self.limit.filter(|&n| n > 0)
    }
}

/// A thread to create: everything but `id`, `createdAt` and `updatedAt`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewThread {
    /// Title.
    pub title: String,
    /// Project directory.
    pub project_path: String,
    /// Model provider.
    pub provider: String,
    /// Goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// Goal status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_status: Option<GoalStatus>,
    /// Status.
    #[serde(default)]
    pub status: ThreadStatus,
    /// Initial turn count.
    #[serde(default)]
    pub turn_count: i64,
    /// Initial iteration count.
    #[serde(default)]
    pub iteration_count: i64,
    /// `lastTurnAt`; `None` stamps the creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn_at: Option<i64>,
    /// `goalUpdatedAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_updated_at: Option<i64>,
}

impl NewThread {
    /// What `ThreadStoreService.create(title, projectPath, provider, goal?)` passes: active, no
    /// turns, and goal status `pending` when there is a goal.
    pub fn new(
        title: impl Into<String>,
        project_path: impl Into<String>,
        provider: impl Into<String>,
        goal: Option<String>,
    ) -> Self {
        Self {
            title: title.into(),
            project_path: project_path.into(),
            provider: provider.into(),
            goal_status: goal.as_ref().map(|_| GoalStatus::Pending),
            goal,
            ..Self::default()
        }
    }

    /// The stored thread, with `createdAt = updatedAt = now`.
    pub fn into_thread(self, id: String, now: i64) -> StoredThread {
        StoredThread {
            title: self.title,
            project_path: self.project_path,
            provider: self.provider,
            goal: self.goal,
            goal_status: self.goal_status,
            status: self.status,
            turn_count: self.turn_count,
            iteration_count: self.iteration_count,
            last_turn_at: self.last_turn_at.unwrap_or(now),
            id,
            created_at: now,
            updated_at: now,
            goal_updated_at: self.goal_updated_at,
            extra: Map::new(),
        }
    }
}

/// The fields `update_thread` changes; `None` leaves a field alone. The optional fields take
/// `Some(None)` to clear them (`"goal": null` in JSON). `id` and `createdAt` never change;
/// `updatedAt` is always set to now.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUpdate {
    /// New title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// New status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ThreadStatus>,
    /// New project path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_path: Option<String>,
    /// New provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// New turn count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_count: Option<i64>,
    /// New iteration count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_count: Option<i64>,
    /// New `lastTurnAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn_at: Option<i64>,
    /// New goal, or `Some(None)` to remove it.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub goal: Option<Option<String>>,
    /// New goal status, or `Some(None)` to remove it.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub goal_status: Option<Option<GoalStatus>>,
    /// New `goalUpdatedAt`, or `Some(None)` to remove it.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub goal_updated_at: Option<Option<i64>>,
}

impl ThreadUpdate {
    /// Applies the update to `t` and sets `updatedAt = now` (both backends run this).
    pub fn apply(&self, t: &mut StoredThread, now: i64) {
        fn set<T: Clone>(dst: &mut T, src: &Option<T>) {
            if let Some(v) = src {
                dst.clone_from(v);
            }
        }
        set(&mut t.title, &self.title);
        set(&mut t.status, &self.status);
        set(&mut t.project_path, &self.project_path);
        set(&mut t.provider, &self.provider);
        set(&mut t.turn_count, &self.turn_count);
        set(&mut t.iteration_count, &self.iteration_count);
        set(&mut t.last_turn_at, &self.last_turn_at);
        set(&mut t.goal, &self.goal);
        set(&mut t.goal_status, &self.goal_status);
        set(&mut t.goal_updated_at, &self.goal_updated_at);
        t.updated_at = now;
    }
}

/// A turn to create: everything but `id` and `createdAt`. Tool calls are added with
/// `add_tool_call`; the turn starts with none (`toolCalls: []`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewTurn {
    /// The thread (must exist).
    pub thread_id: String,
    /// 1-based turn number.
    pub turn_number: i64,
    /// The prompt.
    pub prompt: String,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// How long the turn took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Tool calls made (kept as given; `add_tool_call` raises it).
    #[serde(default)]
    pub tool_call_count: i64,
}

impl NewTurn {
    /// A turn with a prompt and nothing else (`addTurn(threadId, turnNumber, prompt)`).
    pub fn new(thread_id: impl Into<String>, turn_number: i64, prompt: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            turn_number,
            prompt: prompt.into(),
            ..Self::default()
        }
    }

    /// The stored turn, with `createdAt = now` and no tool calls.
    pub fn into_turn(self, id: String, now: i64) -> StoredTurn {
        StoredTurn {
            thread_id: self.thread_id,
            turn_number: self.turn_number,
            prompt: self.prompt,
            response: self.response,
            duration_ms: self.duration_ms,
            tool_call_count: self.tool_call_count,
            tool_calls: Some(Vec::new()),
            id,
            created_at: now,
            extra: Map::new(),
        }
    }
}

/// A tool call to add: everything but `id` and `sequence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewToolCall {
    /// The tool's name.
    pub tool_name: String,
    /// Its arguments.
    #[serde(default = "empty_object")]
    pub args: Value,
    /// Its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
}

impl NewToolCall {
    /// A call of `tool_name` with `args` and no outcome yet.
    pub fn new(tool_name: impl Into<String>, args: Value) -> Self {
        Self {
            tool_name: tool_name.into(),
            args,
            result: None,
            error: None,
            duration_ms: None,
        }
    }

    /// The stored call.
    pub fn into_call(self, id: String, sequence: i64) -> StoredToolCall {
        StoredToolCall {
            tool_name: self.tool_name,
            args: self.args,
            result: self.result,
            error: self.error,
            duration_ms: self.duration_ms,
            id,
            sequence,
            extra: Map::new(),
        }
    }
}

/// The list order of both backends: `lastTurnAt` desc, then `createdAt` desc, then id.
/// (SQL: `ORDER BY lastTurnAt DESC, createdAt DESC, id ASC`.)
pub fn cmp_threads(a: &StoredThread, b: &StoredThread) -> Ordering {
    (Reverse(a.last_turn_at), Reverse(a.created_at), &a.id).cmp(&(
        Reverse(b.last_turn_at),
        Reverse(b.created_at),
        &b.id,
    ))
}

/// The turn order of both backends: `turnNumber`, then `createdAt`, then id.
pub fn cmp_turns(a: &StoredTurn, b: &StoredTurn) -> Ordering {
    (a.turn_number, a.created_at, &a.id).cmp(&(b.turn_number, b.created_at, &b.id))
}

/// The tool-call order of both backends: `sequence`, then id.
pub fn cmp_calls(a: &StoredToolCall, b: &StoredToolCall) -> Ordering {
    (a.sequence, &a.id).cmp(&(b.sequence, &b.id))
}

/// The search predicate of both backends: `query` occurs literally in the title, project path
/// or goal, compared after full Unicode lower-casing (`%` and `_` are plain characters). The
/// query must already be lower-cased ([`str::to_lowercase`]); the empty query matches all.
pub fn search_matches(t: &StoredThread, query_lower: &str) -> bool {
    let hit = |s: &str| s.to_lowercase().contains(query_lower);
    hit(&t.title) || hit(&t.project_path) || t.goal.as_deref().is_some_and(hit)
}
