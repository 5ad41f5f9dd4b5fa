//! `meta.json`: a session's title, provider, model, status and counters (SPEC §3).
//!
//! Written pretty (two spaces, no trailing newline) with the original's key order; keys this
//! version does not know are kept in `extra` and written back after the known ones.

use crate::record::{FieldValue, json_record};
use crate::string_enum;

string_enum! {
    /// The lifecycle state of a session.
    SessionStatus {
        /// Usable; the default.
        Active => "active",
        /// A turn was interrupted (Ctrl+C); resuming sets it back to active.
        Interrupted => "interrupted",
        /// Set aside by the user; still listed and resumable.
        Archived => "archived",
        /// Soft-deleted: files stay, listing hides it unless asked.
        Deleted => "deleted",
    }
}
impl FieldValue for SessionStatus {}

/// The agent name of sessions freecode wrote itself (and of sessions imported from bundles):
/// what `session list --agent freecode` selects.
pub const NATIVE_AGENT: &str = "freecode";

json_record! {
    /// The contents of `meta.json`.
    pub struct SessionMeta {
        /// The session id; equals the directory name. Immutable.
        "id" => pub id: String,
        /// Free text, may be empty.
        "title" => pub title: String,
        /// The project path as given (not normalised).
        "projectPath" => pub project_path: String,
        /// Provider id, e.g. `anthropic`.
        "provider" => pub provider: String,
        /// The model the session is pinned to; absent when unknown.
        "model" => pub model: Option<String>,
        /// Lifecycle state.
        "status" => pub status: SessionStatus,
        /// Creation time, ms since the epoch. Immutable.
        "createdAt" => pub created_at: i64,
        /// Time of the last meta change, ms.
        "updatedAt" => pub updated_at: i64,
        /// Time the last turn ended, ms (creation time until then).
        "lastTurnAt" => pub last_turn_at: i64,
        /// Number of completed turns.
        "turnCount" => pub turn_count: u64,
        /// The session this one was forked from.
        "parentId" => pub parent_id: Option<String>,
        /// Sum of the tokens of every provider response in this session.
        "aggregatedTokenCount" => pub aggregated_token_count: Option<u64>,
    }
    // The agent that wrote it ([`SessionMeta::agent`]), in every session the outputs print
    // ([`SessionMeta::with_agent`]); not a key of `meta.json`.
    derived { "agent": String }
}

impl SessionMeta {
    /// A fresh meta for a new session, every timestamp `now`.
    pub fn new(
        id: &crate::SessionId,
        title: String,
        project_path: String,
        provider: String,
        model: Option<String>,
        now: i64,
    ) -> Self {
        Self {
            id: id.as_str().to_owned(),
            title,
            project_path,
            provider,
            model,
            status: SessionStatus::Active,
            created_at: now,
            updated_at: now,
            last_turn_at: now,
            turn_count: 0,
            parent_id: None,
            aggregated_token_count: None,
            extra: crate::Extra::new(),
        }
    }

    /// Serialises as the original writes it: pretty, two spaces, no trailing newline.
    pub fn to_pretty_json(&self) -> Vec<u8> {
        // A record of strings, integers and JSON values always serialises.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Whether the session is hidden from a default listing.
    pub fn is_deleted(&self) -> bool {
        self.status == SessionStatus::Deleted
    }

    /// An imported session's provenance (`importedFrom`): where it came from, the sender's
    /// session id and project path, when it was imported.
    pub fn imported_from(&self) -> Option<&serde_json::Value> {
        self.extra.get(IMPORTED_FROM)
    }

    /// This meta as the outputs print it: with `agent` ([`SessionMeta::agent`]). Never written
    /// to `meta.json` (the writers read the file, not an output).
    pub fn with_agent(mut self) -> Self {
        if self.extra.get("agent").is_none() {
            let agent = self.agent().to_owned();
            self.extra
                .insert("agent".to_owned(), serde_json::Value::from(agent));
        }
        self
    }

    /// The agent that wrote this session: `importedFrom.agent` of a session `freecode import`
    /// read from another agent (`claude-code`, `codex`, …), else [`NATIVE_AGENT`].
    pub fn agent(&self) -> &str {
        self.imported_from()
            .and_then(|from| from.get("agent"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or(NATIVE_AGENT)
    }

    /// Whether `projectPath` came from a bundle: an import made by a version that used the
    /// sender's path as the session's project (it did not record `importedFrom.projectPath`).
    /// Such a path is never a directory the agent's tools may use.
    pub fn project_path_from_bundle(&self) -> bool {
        self.imported_from()
            .is_some_and(|f| f.get("projectPath").is_none())
    }

    /// Whether the session was imported and no turn has ended here since (`lastTurnAt` is not
    /// after `importedFrom.importedAt`), or its project path came from the bundle. Such a
    /// session is someone else's history: `run --continue` does not pick it.
    pub fn is_untouched_import(&self) -> bool {
        let Some(from) = self.imported_from() else {
            return false;
        };
        if self.project_path_from_bundle() {
            return true;
        }
        from.get("importedAt")
            .and_then(serde_json::Value::as_i64)
            .is_none_or(|at| self.last_turn_at <= at)
    }
}

/// Why `path` cannot be a session's `projectPath` as another machine sent it, if it cannot:
/// empty, not absolute (a Unix path, or a Windows drive or share path), a `.` or `..` step,
/// a control character, or longer than 4,096 bytes.
pub fn project_path_fault(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("is empty");
    }
    if path.len() > 4096 {
        return Some("is longer than 4,096 bytes");
    }
    if path.chars().any(char::is_control) {
        return Some("holds a control character");
    }
    // Absolute as the importers take a project path (Unix, a Windows drive or share).
    if crate::project_key::normalize_absolute(path).is_none() {
        return Some("is not an absolute path");
    }
    if path
        .split(['/', '\\'])
        .any(|step| step == ".." || step == ".")
    {
        return Some("has a `.` or `..` step");
    }
    None
}

/// The `meta.json` key of an imported session's provenance.
pub const IMPORTED_FROM: &str = "importedFrom";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_path_from_elsewhere_is_absolute_and_plain() {
        for ok in [
            "/home/ana/app",
            "/",
            "C:\\Users\\ana\\app",
            "d:/src",
            "\\\\srv\\share\\x",
            "/tmp/日本語 dir",
        ] {
            assert_eq!(project_path_fault(ok), None, "{ok}");
        }
        for bad in [
            "",
            "app",
            "./app",
            "/a/../../etc",
            "/a/./b",
            "C:",
            "/a\nb",
            "/a\u{0}b",
            "~/app",
        ] {
            assert!(project_path_fault(bad).is_some(), "{bad:?}");
        }
        assert!(project_path_fault(&format!("/{}", "a".repeat(4096))).is_some());
    }

    #[test]
    fn round_trips_bytes_and_unknown_keys() {
        let text = "{\n  \"id\": \"s1\",\n  \"title\": \"t\",\n  \"projectPath\": \"/p\",\n  \"provider\": \"x\",\n  \"status\": \"paused\",\n  \"createdAt\": 1,\n  \"updatedAt\": 2,\n  \"lastTurnAt\": 1,\n  \"turnCount\": 0,\n  \"parentId\": \"s0\",\n  \"futureKey\": {\n    \"a\": [\n      1\n    ]\n  }\n}";
        let meta: SessionMeta = serde_json::from_str(text).unwrap();
        assert_eq!(meta.status, SessionStatus::Other("paused".into()));
        assert_eq!(String::from_utf8(meta.to_pretty_json()).unwrap(), text);
    }

    #[test]
    fn missing_required_key_is_an_error() {
        let err = serde_json::from_str::<SessionMeta>(r#"{"id":"s1"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
    }

    #[test]
    fn imports_are_untouched_until_a_turn_ends_after_the_import() {
        let id = crate::SessionId::new("s").unwrap();
        let mut m = SessionMeta::new(&id, "t".into(), "/p".into(), "x".into(), None, 100);
        assert!(!m.is_untouched_import() && !m.project_path_from_bundle());
        m.extra.insert(
            IMPORTED_FROM.into(),
            serde_json::json!({"projectPath": "/sender", "importedAt": 100}),
        );
        assert!(m.is_untouched_import() && !m.project_path_from_bundle());
        m.last_turn_at = 101;
        assert!(!m.is_untouched_import());
        // An older version's import: the meta's project path is the sender's.
        m.extra
            .insert(IMPORTED_FROM.into(), serde_json::json!({"importedAt": 100}));
        assert!(m.project_path_from_bundle() && m.is_untouched_import());
    }

    #[test]
    fn the_agent_is_importeds_or_ours() {
        let id = crate::SessionId::new("s").unwrap();
        let mut m = SessionMeta::new(&id, "t".into(), "/p".into(), "x".into(), None, 100);
        assert_eq!(m.agent(), NATIVE_AGENT);
        m.extra.insert(
            IMPORTED_FROM.into(),
            serde_json::json!({"projectPath": "/p", "importedAt": 100}),
        );
        assert_eq!(m.agent(), NATIVE_AGENT, "a bundle import is ours");
        m.extra.insert(
            IMPORTED_FROM.into(),
            serde_json::json!({"agent": "codex", "projectPath": "/p", "importedAt": 100}),
        );
        assert_eq!(m.agent(), "codex");
    }
}
