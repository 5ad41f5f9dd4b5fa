//! `context-cache.json`: files requested across turns (SPEC §5).
//!
//! The original has the API but no caller; we read and write the same shape so a session that
//! has one keeps it, and fork carries it along.

use serde_json::Value;

use crate::record::json_record;

json_record! {
    /// The contents of `context-cache.json` (pretty-printed, two spaces).
    pub struct ContextCache {
        /// File paths requested across turns.
        "requestedFiles" => pub requested_files: Vec<String>,
        /// Path → cached contents.
        "fileContents" => pub file_contents: Value,
        /// Last change, ms.
        "lastUpdated" => pub last_updated: i64,
        /// Turn count when written.
        "turnCount" => pub turn_count: u64,
    }
}
