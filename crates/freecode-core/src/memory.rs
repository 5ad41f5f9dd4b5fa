//! `memory/<sessionId>/memory.json`: the compaction state whose latest summary is injected into
//! every later request (SPEC §12).
//!
//! The original's MemoryService owns `messages`; we keep them verbatim and only add summaries.

use serde_json::Value;

use crate::record::{FieldValue, json_record};

json_record! {
    /// One compaction summary.
    pub struct Summary {
        /// `summary-<sessionId>-<ms>`.
        "id" => pub id: String,
        /// When it was made, ms.
        "createdAt" => pub created_at: i64,
        /// Messages it replaced.
        "originalMessageCount" => pub original_message_count: u64,
        /// Estimated tokens of what it replaced.
        "originalTokenCount" => pub original_token_count: u64,
        /// Estimated tokens of the summary.
        "summaryTokenCount" => pub summary_token_count: u64,
        /// The summary text.
        "content" => pub content: String,
    }
}
impl FieldValue for Summary {}

json_record! {
    /// The contents of `memory.json`.
    pub struct CompactionMemory {
        /// The session it belongs to.
        "sessionId" => pub session_id: String,
        /// The memory service's own message list, kept verbatim.
        "messages" => pub messages: Vec<Value>,
        /// Every summary, oldest first; the last one is in force.
        "summaries" => pub summaries: Vec<Summary>,
        /// Estimated tokens after the last compaction.
        "tokenCount" => pub token_count: u64,
        /// Number of compactions.
        "totalCompactions" => pub total_compactions: u64,
        /// Time of the last compaction, ms.
        "lastCompactionAt" => pub last_compaction_at: Option<i64>,
    }
}

impl CompactionMemory {
    /// An empty state for `session_id`.
    pub fn new(session_id: &str) -> Self {
        Self {
            session_id: session_id.to_owned(),
            messages: Vec::new(),
            summaries: Vec::new(),
            token_count: 0,
            total_compactions: 0,
            last_compaction_at: None,
            extra: crate::Extra::new(),
        }
    }

    /// The summary in force, if any.
    pub fn latest_summary(&self) -> Option<&Summary> {
        self.summaries.last()
    }

    /// The same state under another session id (fork carries the summary).
    pub fn for_session(&self, session_id: &str) -> Self {
        Self {
            session_id: session_id.to_owned(),
            ..self.clone()
        }
    }
}

/// The rough token estimate the original uses for text: a quarter of its characters, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}
