//! Timestamped SQLite migrations, recorded in `schema_migrations`.
//!
//! A migration is a `crates/freecode-store/migrations/<YYYYMMDDHHMMSS>_<name>.sql` file compiled
//! in with `include_str!`; its version is the timestamp. Once shipped a migration is never
//! edited: a change of schema is a new file. [`apply`] runs, in version order, each migration of
//! a list that the table does not record, each in its own `BEGIN IMMEDIATE` transaction
//! (concurrent openers serialize; the loser sees it done). Versions in the table that the list
//! does not know (a newer binary's, or another list's sharing the database) are ignored: an
//! older binary keeps working on a newer schema.

use rusqlite::{Connection, TransactionBehavior, params};

/// One migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// The `YYYYMMDDHHMMSS` timestamp of its file name.
    pub version: i64,
    /// The rest of its file name.
    pub name: &'static str,
    /// Its SQL (several statements).
    pub sql: &'static str,
}

/// The table that records applied migrations.
pub const TABLE: &str = "schema_migrations";

/// The thread store's migrations, oldest first.
pub const THREAD_STORE: &[Migration] = &[Migration {
    version: 20261130051900,
    name: "thread_store",
    sql: include_str!("../../migrations/20261130051900_thread_store.sql"),
}];

/// Applies the migrations of `list` not yet recorded, oldest first; returns the versions applied
/// now.
pub fn apply(conn: &Connection, list: &[Migration]) -> rusqlite::Result<Vec<i64>> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
           version INTEGER PRIMARY KEY,
           name TEXT NOT NULL,
           appliedAt INTEGER NOT NULL
         )",
    )?;
    let recorded = recorded(conn)?;
    let mut todo: Vec<&Migration> = list
        .iter()
        .filter(|m| !recorded.iter().any(|(v, _)| *v == m.version))
        .collect();
    todo.sort_by_key(|m| m.version);
    let mut applied = Vec::new();
    for m in todo {
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        let done: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?1)",
            [m.version],
            |r| r.get(0),
        )?;
        if !done {
            tx.execute_batch(m.sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, name, appliedAt) VALUES (?1, ?2, ?3)",
                params![m.version, m.name, crate::now_ms()],
            )?;
            applied.push(m.version);
        }
        tx.commit()?;
        tracing::debug!(version = m.version, name = m.name, done, "migration");
    }
    for (version, name) in recorded {
        if !list.iter().any(|m| m.version == version) {
            tracing::debug!(
                version,
                name,
                "migration recorded but not in this list; ignored"
            );
        }
    }
    Ok(applied)
}

/// The recorded migrations: `(version, name)`, oldest first.
pub fn recorded(conn: &Connection) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut stmt = conn.prepare("SELECT version, name FROM schema_migrations ORDER BY version")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}
