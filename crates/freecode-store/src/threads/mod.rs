//! The thread store (SPEC §14): threads → turns → tool calls, behind one [`ThreadStore`] trait
//! with two backends that answer identically.
//!
//! - [`SqliteThreadStore`] over `state/freecode.db` (WAL, foreign keys on, timestamped
//!   migrations recorded in `schema_migrations`; the original's database is adopted as is).
//! - [`JsonThreadStore`] over `state/store.json` in the original's exact shape, rewritten
//!   atomically under a lock and re-read when another process changed it.
//!
//! [`open_thread_store`] picks one once, at first use: SQLite unless it cannot be opened, the
//! state directory is read-only, or the configuration asks for JSON. A corrupt database is moved
//! aside and replaced by a fresh one, so the store is never blocked. The choice and its reason
//! are logged with `tracing` (never printed: §19.40) and returned.
//!
//! The §19.39 disagreements are fixed the same way on both backends: every updatable field is
//! applied, `turnCount` counts turns, `toolCallCount` is maintained, the turn-items limit counts
//! turns, `offset` works without `limit`, search is literal and case-insensitive for all of
//! Unicode, foreign keys hold (a turn needs its thread, a call its turn), and deletes are
//! all-or-nothing. Ids keep the original's `<prefix>-<ms>-<5 base36>` shape, drawn from the OS
//! random source and re-drawn on collision.

mod json;
pub mod migrate;
mod sqlite;
mod types;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub use json::JsonThreadStore;
pub use sqlite::{BUSY_TIMEOUT, SqliteThreadStore};
pub use types::{
    GoalStatus, NewThread, NewToolCall, NewTurn, StoredThread, StoredToolCall, StoredTurn,
    StoredTurnItemsView, ThreadFilter, ThreadStatus, ThreadUpdate, TurnItemToolCall, cmp_calls,
    cmp_threads, cmp_turns, search_matches,
};

use crate::error::Result;
use crate::home::Home;

/// File name of the JSON store inside `state/`.
pub const JSON_FILE: &str = "store.json";
/// File name of the SQLite database inside `state/`.
pub const DB_FILE: &str = "freecode.db";

/// Thread storage (SPEC §14.2, synchronous). Every method behaves the same on both backends.
pub trait ThreadStore {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Creates a thread with a fresh `thread-<ms>-<5 base36>` id, `createdAt = updatedAt = now`
    /// (and `lastTurnAt = now` unless given); returns the id.
    fn create_thread(&self, thread: NewThread) -> Result<String>;

    /// The thread, or `None`.
    fn get_thread(&self, id: &str) -> Result<Option<StoredThread>>;

    /// Applies every field of `update` and sets `updatedAt = now`. Returns `false` (and changes
    /// nothing) for an unknown id.
    fn update_thread(&self, id: &str, update: &ThreadUpdate) -> Result<bool>;

    /// `update_thread(id, {status: archived})`.
    fn archive_thread(&self, id: &str) -> Result<bool> {
        self.update_thread(
            id,
            &ThreadUpdate {
                status: Some(ThreadStatus::Archived),
                ..ThreadUpdate::default()
            },
        )
    }

    /// Removes the thread, its turns and their tool calls, all or nothing. Returns whether
    /// anything was removed.
    fn delete_thread(&self, id: &str) -> Result<bool>;

    /// Threads passing `filter`, newest `lastTurnAt` first ([`cmp_threads`]), then `offset`
    /// skipped and at most `limit` (0 = all) kept.
    fn list_threads(&self, filter: &ThreadFilter) -> Result<Vec<StoredThread>>;

    /// Threads whose title, project path or goal contains `query` literally, ignoring case
    /// (all of Unicode), in list order. The empty query matches every thread.
    fn search_threads(&self, query: &str) -> Result<Vec<StoredThread>>;

    /// Creates a turn (`turn-<ms>-<5 base36>`, `createdAt = now`, no tool calls) and sets the
    /// thread's `turnCount` to its number of turns, `lastTurnAt` and `updatedAt` to now.
    /// [`StoreError::NotFound`](crate::StoreError::NotFound) when the thread does not exist.
    fn create_turn(&self, turn: NewTurn) -> Result<String>;

    /// The turn with its tool calls (ordered by sequence), or `None`.
    fn get_turn(&self, id: &str) -> Result<Option<StoredTurn>>;

    /// The thread's turns with their tool calls, ordered by [`cmp_turns`].
    fn get_turns_for_thread(&self, thread_id: &str) -> Result<Vec<StoredTurn>>;

    /// The thread's turns as views, ordered by [`cmp_turns`]; `limit` counts turns
    /// (`Some(0)` gives none, `None` all).
    fn get_turn_items_view(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<Vec<StoredTurnItemsView>>;

    /// Adds a tool call (`tc-<ms>-<5 base36>`, `sequence` = highest so far + 1) and raises the
    /// turn's `toolCallCount` to at least its number of stored calls (by one per call).
    /// [`StoreError::NotFound`](crate::StoreError::NotFound) when the turn does not exist.
    fn add_tool_call(&self, turn_id: &str, call: NewToolCall) -> Result<String>;

    /// Goal tracking: sets `goalStatus` and `goalUpdatedAt = now` (kept on both backends).
    fn update_goal_status(&self, thread_id: &str, status: GoalStatus) -> Result<bool> {
        self.update_thread(
            thread_id,
            &ThreadUpdate {
                goal_status: Some(Some(status)),
                goal_updated_at: Some(Some(crate::now_ms())),
                ..ThreadUpdate::default()
            },
        )
    }

    /// The project's most recent threads, any status (`recentForProject`, default limit 10).
    fn recent_for_project(&self, project_path: &str, limit: usize) -> Result<Vec<StoredThread>> {
        self.list_threads(&ThreadFilter {
            project_path: Some(project_path.to_owned()),
            limit: Some(limit),
            ..ThreadFilter::default()
        })
    }

    /// Threads with status `active`.
    fn active_threads(&self) -> Result<Vec<StoredThread>> {
        self.list_threads(&ThreadFilter {
            status: Some(ThreadStatus::Active),
            ..ThreadFilter::default()
        })
    }

    /// Inserts or replaces a thread by id, exactly as given (ids, timestamps and counters are
    /// kept; its turns are not touched). For writers that derive threads from sessions.
    fn put_thread(&self, thread: &StoredThread) -> Result<()>;

    /// Inserts or replaces a turn by id, exactly as given; its thread must exist. With
    /// `tool_calls: Some(calls)` the turn's stored calls become `calls` (a call id used by
    /// another turn moves here); with `None` they are left as they are. The thread's counters are
    /// not touched (the writer sets them with [`put_thread`](Self::put_thread)).
    fn put_turn(&self, turn: &StoredTurn) -> Result<()>;
}

/// Which backend to use: what `FREECODE_THREAD_STORE` and the configuration map to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// SQLite, falling back to JSON when it cannot be used.
    #[default]
    Auto,
    /// SQLite (still falls back to JSON, with the reason, rather than fail).
    Sqlite,
    /// The JSON file.
    Json,
}

impl BackendChoice {
    /// Parses `auto`, `sqlite` or `json` (any case, surrounding blanks ignored).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Some(Self::Auto),
            "sqlite" => Some(Self::Sqlite),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// A backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// `state/freecode.db`.
    Sqlite,
    /// `state/store.json`.
    Json,
}

impl BackendKind {
    /// `sqlite` or `json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Json => "json",
        }
    }
}

/// The backend [`open_thread_store`] picked, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedBackend {
    /// The backend.
    pub kind: BackendKind,
    /// Why it was picked (what failed, what was moved aside).
    pub reason: String,
}

/// Opens the thread store of `home`, choosing the backend once (see the module docs). Never
/// fails: when SQLite cannot be used the JSON store is returned with the reason.
pub fn open_thread_store(
    home: &Home,
    choice: BackendChoice,
) -> (Box<dyn ThreadStore + Send>, SelectedBackend) {
    let state = home.state_dir();
    let json = |reason: String| -> (Box<dyn ThreadStore + Send>, SelectedBackend) {
        let store = JsonThreadStore::open(state.join(JSON_FILE));
        (
            Box::new(store),
            SelectedBackend {
                kind: BackendKind::Json,
                reason,
            },
        )
    };
    let (store, selected) = match choice {
        BackendChoice::Json => json("JSON store requested".to_owned()),
        BackendChoice::Auto | BackendChoice::Sqlite => match try_sqlite(&state) {
            Ok((store, note)) => {
                let mut reason = match choice {
                    BackendChoice::Sqlite => "SQLite store requested".to_owned(),
                    _ => "SQLite database opened".to_owned(),
                };
                if let Some(note) = note {
                    reason = format!("{reason}; {note}");
                }
                (
                    Box::new(store) as Box<dyn ThreadStore + Send>,
                    SelectedBackend {
                        kind: BackendKind::Sqlite,
                        reason,
                    },
                )
            }
            Err(why) => json(format!("SQLite unavailable, using the JSON store: {why}")),
        },
    };
    let db = state.join(DB_FILE);
    match (choice, selected.kind) {
        (BackendChoice::Json, _) | (_, BackendKind::Sqlite) => tracing::info!(
            backend = selected.kind.as_str(),
            reason = %selected.reason,
            "thread store selected"
        ),
        (_, BackendKind::Json) => tracing::warn!(
            backend = selected.kind.as_str(),
            db = %db.display(),
            reason = %selected.reason,
            "thread store fell back to JSON"
        ),
    }
    (store, selected)
}

/// Opens (or recovers) the SQLite store in `state`, or says why it cannot be used.
fn try_sqlite(state: &Path) -> std::result::Result<(SqliteThreadStore, Option<String>), String> {
    crate::fsutil::create_dir_private(state).map_err(|e| e.to_string())?;
    let meta =
        std::fs::metadata(state).map_err(|e| format!("cannot inspect {}: {e}", state.display()))?;
    // No write bit for anyone: read-only by intent, even for a user (root) who could write.
    if meta.permissions().mode() & 0o222 == 0 {
        return Err(format!("state directory {} is read-only", state.display()));
    }
    SqliteThreadStore::open_or_recover(&state.join(DB_FILE)).map_err(|e| e.to_string())
}

/// A fresh `<prefix>-<ms>-<5 base36>` id; the five characters come from the OS random source.
pub(crate) fn new_id(prefix: &str, now: i64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut r = uuid::Uuid::new_v4().as_u128();
    let mut tail = [0u8; 5];
    for c in &mut tail {
        *c = DIGITS[(r % 36) as usize];
        r /= 36;
    }
    let tail: String = tail.iter().map(|&b| char::from(b)).collect();
    format!("{prefix}-{now}-{tail}")
}

/// Draws ids until `taken` says one is free. A collision needs the same millisecond and the same
/// five random characters (36^5 ≈ 6·10^7 values), so the bound is never reached by chance.
pub(crate) fn unique_id(
    prefix: &str,
    now: i64,
    mut taken: impl FnMut(&str) -> Result<bool>,
) -> Result<String> {
    for _ in 0..64 {
        let id = new_id(prefix, now);
        if !taken(&id)? {
            return Ok(id);
        }
    }
    Err(crate::StoreError::Io {
        op: "draw a unique id for",
        path: std::path::PathBuf::from(prefix),
        source: std::io::Error::other("64 colliding ids in a row"),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_keep_the_original_shape() {
        let id = new_id("thread", 1_768_470_212_944);
        let tail = id.strip_prefix("thread-1768470212944-").unwrap_or_default();
        assert_eq!(tail.len(), 5, "{id}");
        assert!(
            tail.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        );
    }

    #[test]
    fn ids_drawn_in_one_millisecond_are_unique() {
        // 20 000 ids in one millisecond: raw draws collide (birthday bound ~3 expected);
        // unique_id re-draws until free.
        let mut seen = HashSet::new();
        for _ in 0..20_000 {
            let id = unique_id("tc", 7, |id| Ok(seen.contains(id))).unwrap_or_default();
            assert!(id.starts_with("tc-7-") && id.len() == "tc-7-".len() + 5);
            assert!(seen.insert(id));
        }
    }

    #[test]
    fn backend_choice_parses() {
        assert_eq!(BackendChoice::parse("Json"), Some(BackendChoice::Json));
        assert_eq!(BackendChoice::parse(""), Some(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse("postgres"), None);
    }
}
