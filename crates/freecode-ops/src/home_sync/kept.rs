//! Every sealed record this machine pushed or applied, kept as the server stored it, in
//! `state/sync/records.db` (SQLite, 0600): so a server that lost its data is refilled by the
//! next sync, byte for byte, and a record whose progress a kill lost is found again here.
//!
//! The copies are ciphertext, the same bytes the server holds (about 3% of a home's size),
//! and derived: deleting the file loses only the ability to refill. Writes go into one open
//! transaction that [`Kept::commit`] ends, as the engine saves its progress.

use std::path::{Path, PathBuf};

use freecode_remote::home_sync::{HostId, LogId};
use freecode_store::{Home, fsutil};
use rusqlite::{Connection, OptionalExtension as _, params};

use crate::error::{Error, Result};

/// The database's file name, under `state/sync/`.
pub const FILE: &str = "records.db";

/// The kept records.
pub struct Kept {
    conn: Connection,
    path: PathBuf,
    open_tx: bool,
}

fn db_err(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |e| Error::Failed(format!("{}: {e}", path.display()))
}

/// How many records a (log, host) holds here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptLog {
    /// The log.
    pub log: LogId,
    /// Its host.
    pub host: HostId,
    /// Records kept, indexes `0..count`.
    pub count: u64,
}

impl Kept {
    /// Removes the copies kept in `home` (a home set up again for another group: its records
    /// are another key's, and a refill would send them into the new group).
    pub fn remove(home: &Home) -> Result<()> {
        let dir = super::state::dir(home);
        for name in [
            FILE.to_owned(),
            format!("{FILE}-wal"),
            format!("{FILE}-shm"),
        ] {
            fsutil::remove_file(&dir.join(name))?;
        }
        Ok(())
    }

    /// Opens (creating) the database of `home`; never through a link.
    pub fn open(home: &Home) -> Result<Self> {
        let dir = super::state::dir(home);
        fsutil::create_dir_private(&dir)?;
        let path = dir.join(FILE);
        for p in [path.clone(), dir.join(format!("{FILE}-wal"))] {
            fsutil::refuse_link(&p)?;
        }
        let conn = Connection::open(&path).map_err(db_err(&path))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(db_err(&path))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS records (
                 log TEXT NOT NULL, host TEXT NOT NULL, idx INTEGER NOT NULL,
                 sealed BLOB NOT NULL, PRIMARY KEY (log, host, idx)
             ) WITHOUT ROWID;",
        )
        .map_err(db_err(&path))?;
        fsutil::tighten(&path, 0o600)?;
        Ok(Self {
            conn,
            path,
            open_tx: false,
        })
    }

    fn begin(&mut self) -> Result<()> {
        if !self.open_tx {
            self.conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(db_err(&self.path))?;
            self.open_tx = true;
        }
        Ok(())
    }

    /// Keeps record `index` of `host`'s log `log` (a copy already kept stays).
    pub fn put(&mut self, log: &LogId, host: &HostId, index: u64, sealed: &[u8]) -> Result<()> {
        self.write("INSERT OR IGNORE", log, host, index, sealed)
    }

    /// Keeps `sealed` as record `index` of `host`'s log `log` in place of any copy (the same
    /// record rewrapped under a rotated key).
    pub fn replace(&mut self, log: &LogId, host: &HostId, index: u64, sealed: &[u8]) -> Result<()> {
        self.write("INSERT OR REPLACE", log, host, index, sealed)
    }

    fn write(
        &mut self,
        verb: &str,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
    ) -> Result<()> {
        self.begin()?;
        self.conn
            .prepare_cached(&format!(
                "{verb} INTO records (log, host, idx, sealed) VALUES (?1, ?2, ?3, ?4)"
            ))
            .and_then(|mut s| {
                s.execute(params![
                    log.to_string(),
                    host.to_string(),
                    i64::try_from(index).unwrap_or(i64::MAX),
                    sealed
                ])
            })
            .map_err(db_err(&self.path))?;
        Ok(())
    }

    /// Record `index` of `host`'s log `log`, if kept.
    pub fn get(&self, log: &LogId, host: &HostId, index: u64) -> Result<Option<Vec<u8>>> {
        self.conn
            .prepare_cached("SELECT sealed FROM records WHERE log = ?1 AND host = ?2 AND idx = ?3")
            .and_then(|mut s| {
                s.query_row(
                    params![
                        log.to_string(),
                        host.to_string(),
                        i64::try_from(index).unwrap_or(i64::MAX)
                    ],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(db_err(&self.path))
    }

    /// Every (log, host) kept, with how many of its records are kept from index 0 on without
    /// a gap.
    pub fn logs(&self) -> Result<Vec<KeptLog>> {
        let mut stmt = self
            .conn
            .prepare("SELECT log, host, COUNT(*), MAX(idx) FROM records GROUP BY log, host")
            .map_err(db_err(&self.path))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(db_err(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (log, host, count, max) = row.map_err(db_err(&self.path))?;
            let (Some(log), Some(host)) = (LogId::parse(&log), HostId::parse(&host)) else {
                continue;
            };
            // With a gap, only the records before it can be sent again in order.
            let count = if max + 1 == count {
                count as u64
            } else {
                self.dense_prefix(&log, &host)?
            };
            out.push(KeptLog { log, host, count });
        }
        Ok(out)
    }

    fn dense_prefix(&self, log: &LogId, host: &HostId) -> Result<u64> {
        let mut stmt = self
            .conn
            .prepare("SELECT idx FROM records WHERE log = ?1 AND host = ?2 ORDER BY idx")
            .map_err(db_err(&self.path))?;
        let idx = stmt
            .query_map(params![log.to_string(), host.to_string()], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(db_err(&self.path))?;
        let mut n = 0u64;
        for i in idx {
            if i.map_err(db_err(&self.path))? != n as i64 {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// Every host's kept records of `log`: (host, index, sealed).
    pub fn of_log(&self, log: &LogId) -> Result<Vec<(HostId, u64, Vec<u8>)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT host, idx, sealed FROM records WHERE log = ?1 ORDER BY host, idx")
            .map_err(db_err(&self.path))?;
        let rows = stmt
            .query_map(params![log.to_string()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                ))
            })
            .map_err(db_err(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (host, idx, sealed) = row.map_err(db_err(&self.path))?;
            if let Some(host) = HostId::parse(&host) {
                out.push((host, idx as u64, sealed));
            }
        }
        Ok(out)
    }

    /// Forgets every host's records of `log` (a purged session).
    pub fn remove_host_log(&mut self, log: &LogId, host: &HostId) -> Result<()> {
        self.begin()?;
        self.conn
            .execute(
                "DELETE FROM records WHERE log = ?1 AND host = ?2",
                params![log.to_string(), host.to_string()],
            )
            .map_err(db_err(&self.path))?;
        Ok(())
    }

    /// Forgets every copy of log `log`.
    pub fn remove_log(&mut self, log: &LogId) -> Result<()> {
        self.begin()?;
        self.conn
            .execute(
                "DELETE FROM records WHERE log = ?1",
                params![log.to_string()],
            )
            .map_err(db_err(&self.path))?;
        Ok(())
    }

    /// Makes what was kept since the last commit durable.
    pub fn commit(&mut self) -> Result<()> {
        if self.open_tx {
            self.conn
                .execute_batch("COMMIT")
                .map_err(db_err(&self.path))?;
            self.open_tx = false;
        }
        Ok(())
    }
}
