//! The billed requests the index holds, for `freecode usage`: each model call that answered
//! (`model.response` in a session's rollout log, `idx_model_spans` with `ok`), with its model,
//! time and tokens, and its session's project and agent; in a scope of time, agent, project
//! and status. Kept current by the same look as everything else in the index; the grouping and
//! pricing are the caller's.

use freecode_core::project_key::trim_separators;
use rusqlite::{Transaction, TransactionBehavior, params};

use super::query::in_project_sql;
use super::{SessionIndex, db_err};
use crate::error::Result;

/// Which requests [`SessionIndex::usage_requests`] gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageScope {
    /// Only requests at or after this time, ms.
    pub since: Option<i64>,
    /// Only requests before this time, ms.
    pub until: Option<i64>,
    /// Only sessions this agent wrote.
    pub agent: Option<String>,
    /// Only sessions of this project path or below it.
    pub project: Option<String>,
    /// Archived and deleted sessions too (by default, as the rest of the index's readers, left
    /// out).
    pub all: bool,
}

/// One billed request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageRequest {
    /// Its session.
    pub session_id: String,
    /// The session's project.
    pub project_path: String,
    /// The agent that wrote the session.
    pub agent: String,
    /// The model the request named.
    pub model: String,
    /// When it was answered, ms.
    pub at: i64,
    /// Input tokens, inclusive of cache reads and writes.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the cache.
    pub cache_write_tokens: u64,
    /// Of those, the ones written for an hour.
    pub cache_write_1h_tokens: u64,
    /// Reasoning tokens, a part of the output.
    pub reasoning_tokens: u64,
}

impl SessionIndex {
    /// Each billed request of `scope`, oldest first, handed to `each`, from an index brought
    /// up to date first (`progress` hears how far it is).
    pub fn usage_requests(
        &mut self,
        scope: &UsageScope,
        progress: impl FnMut(usize, usize),
        mut each: impl FnMut(UsageRequest),
    ) -> Result<()> {
        self.refresh(progress)?;
        let path = self.path().to_owned();
        // One snapshot: a rebuild committed meanwhile cannot mix in.
        let snapshot = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)
            .map_err(db_err(&path))?;
        let sql = format!(
            "SELECT m.sessionId, s.projectPath, s.agent, m.model, m.at, m.inputTokens,
                    m.outputTokens, m.cacheRead, m.cacheWrite, m.cacheWrite1h, m.reasoning
             FROM idx_model_spans m JOIN idx_sessions s ON s.id = m.sessionId
             WHERE m.ok = 1
               AND (?5 OR s.status NOT IN ('deleted', 'archived'))
               AND (?1 IS NULL OR m.at >= ?1)
               AND (?2 IS NULL OR m.at < ?2)
               AND (?3 IS NULL OR s.agent = ?3)
               AND (?4 IS NULL OR {in_project})
             ORDER BY m.at, m.sessionId",
            in_project = in_project_sql(4),
        );
        let project = scope.project.as_deref().map(trim_separators);
        let tokens = |r: &rusqlite::Row<'_>, i: usize| -> rusqlite::Result<u64> {
            Ok(u64::try_from(r.get::<_, i64>(i)?).unwrap_or(0))
        };
        {
            let mut stmt = self.conn.prepare(&sql).map_err(db_err(&path))?;
            let rows = stmt
                .query_map(
                    params![scope.since, scope.until, scope.agent, project, scope.all],
                    |r| {
                        Ok(UsageRequest {
                            session_id: r.get(0)?,
                            project_path: r.get(1)?,
                            agent: r.get(2)?,
                            model: r.get(3)?,
                            at: r.get(4)?,
                            input_tokens: tokens(r, 5)?,
                            output_tokens: tokens(r, 6)?,
                            cache_read_tokens: tokens(r, 7)?,
                            cache_write_tokens: tokens(r, 8)?,
                            cache_write_1h_tokens: tokens(r, 9)?,
                            reasoning_tokens: tokens(r, 10)?,
                        })
                    },
                )
                .map_err(db_err(&path))?;
            for row in rows {
                each(row.map_err(db_err(&path))?);
            }
        }
        snapshot.commit().map_err(db_err(&path))?;
        Ok(())
    }
}
