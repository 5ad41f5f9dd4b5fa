//! One writer per session across processes: an advisory lock on `<session>/.lock`.
//!
//! The holder writes its pid into the lock file, so a second writer's error names it. The lock
//! is released when the [`SessionLock`] is dropped or the process dies (the kernel drops it), so
//! a crash never leaves a session locked.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{IoContext, Result, StoreError};

/// File name of the lock inside a session directory.
pub const LOCK_FILE: &str = ".lock";

/// Whether to wait for a held lock or fail at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockWait {
    /// Fail with [`StoreError::Locked`] naming the holder.
    #[default]
    Fail,
    /// Block until the holder releases it.
    Block,
}

/// A held session lock.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
    path: PathBuf,
}

impl SessionLock {
    /// Acquires the lock of the session in `session_dir`.
    pub fn acquire(session_dir: &Path, id: &str, wait: LockWait) -> Result<Self> {
        let path = session_dir.join(LOCK_FILE);
        // Never through a link: a planted `.lock` link would have the pid written over the
        // first bytes of its target.
        let mut file = crate::fsutil::open_rw(&path)?;
        match wait {
            LockWait::Block => file.lock().ctx("lock", &path)?,
            LockWait::Fail => match try_lock_graced(&file) {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut s = String::new();
                    let _ = file.read_to_string(&mut s);
                    return Err(StoreError::Locked {
                        id: id.to_owned(),
                        pid: s.trim().parse().ok(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(e).ctx("lock", &path),
            },
        }
        // Overwrite in place, padded to a fixed width: truncating first would make ext4 flush the
        // file on close (its rename/truncate heuristics), costing ~100 µs per lock.
        let pid = format!("{:<10}\n", std::process::id());
        file.write_all_at(pid.as_bytes(), 0)
            .ctx("write pid to", &path)?;
        Ok(Self { _file: file, path })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How long a lock found held is tried again before it is reported held.
const GRACE: Duration = Duration::from_millis(250);

/// `try_lock`, tried again for a short grace when the lock is found held.
///
/// A lock this process released may still be held for a moment by a child it is spawning: from
/// fork to exec the child shares the parent's open file descriptions, and with them the `flock`
/// (`O_CLOEXEC` closes them only at exec). An agent that runs tools from one thread while it
/// reopens a session on another would otherwise see its own session "locked" by itself.
pub fn try_lock_graced(file: &File) -> std::result::Result<(), std::fs::TryLockError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < GRACE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(25));
            }
            other => return other,
        }
    }
}

/// Whether a process holds the lock of the directory `dir`, found without creating or
/// changing anything: `Some(pid)` (the pid it wrote, if any) when held, `None` when free or
/// when there is no lock file.
pub fn holder(dir: &Path) -> Option<Option<u32>> {
    let path = dir.join(LOCK_FILE);
    let mut file = crate::fsutil::open_read(&path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut s = String::new();
            let _ = file.read_to_string(&mut s);
            Some(s.trim().parse().ok())
        }
        Err(std::fs::TryLockError::Error(_)) => None,
    }
}
