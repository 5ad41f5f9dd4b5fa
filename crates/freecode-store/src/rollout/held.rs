//! A rollout log held as its recorder holds it, for a writer of whole lines that is not a
//! recorder (sync, which applies another machine's events): the same advisory lock on the log
//! (so a recorder and it never write at once), the log and its directory created private and
//! never reached through a link, and writes that follow the caller's durability. A log cut or
//! replaced in place keeps its inode, which a fold checkpoint's key cannot tell from the log it
//! covered when the probed bytes happen to match: the session's checkpoints go first.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;

use super::events_path;
use crate::error::{IoContext, Result};
use crate::fsutil;
use crate::home::Home;

/// Session `id`'s rollout log, locked ([`HeldLog::try_hold`]); the lock goes with it.
#[derive(Debug)]
pub struct HeldLog {
    file: File,
    path: PathBuf,
    /// The session's fold checkpoints ([`super::checkpoint::dir`]).
    folds: PathBuf,
}

impl HeldLog {
    /// Opens (creating) session `id`'s rollout log and takes its lock, as
    /// [`super::Recorder::open`] does (a lock held by a process being spawned is waited out
    /// briefly: [`crate::lock::try_lock_graced`]); `None` when a recorder or another holder
    /// has it.
    pub fn try_hold(home: &Home, id: &SessionId) -> Result<Option<Self>> {
        let path = events_path(home, id);
        fsutil::create_dir_private(&home.rollout_dir(id))?;
        fsutil::refuse_link(&path)?;
        let file = fsutil::open_append(&path)?;
        match crate::lock::try_lock_graced(&file) {
            Ok(()) => Ok(Some(Self {
                file,
                path,
                folds: super::checkpoint::dir(home, id),
            })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e).ctx("lock", &path),
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `bytes` (whole lines), their data synced when `durable` (a caller that writes
    /// many logs syncs the file system once instead: [`fsutil::sync_filesystem`]).
    pub fn append(&self, bytes: &[u8], durable: bool) -> Result<()> {
        (&self.file).write_all(bytes).ctx("append to", &self.path)?;
        if durable {
            fsutil::sync_file(&self.file, &self.path, false).ctx("fsync", &self.path)?;
        }
        Ok(())
    }

    /// Replaces the log's bytes with `bytes`, in place (the lock stays held throughout).
    pub fn replace(&self, bytes: &[u8], durable: bool) -> Result<()> {
        self.truncate(0)?;
        self.append(bytes, durable)
    }

    /// Cuts the log to its first `len` bytes (its fold checkpoints removed first).
    pub fn truncate(&self, len: u64) -> Result<()> {
        fsutil::remove_tree(&self.folds)?;
        fsutil::set_len(&self.file, &self.path, len).ctx("truncate", &self.path)
    }
}
