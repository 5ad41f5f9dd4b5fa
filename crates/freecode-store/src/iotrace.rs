//! A record of the store's file-system operations, for building the states a power cut could
//! leave (the crash-state tests).
//!
//! Every write, truncate, fsync, create, rename and unlink made through [`crate::fsutil`] is
//! reported here; while a trace is running ([`start`]) the ones below its root are kept, with the
//! bytes written, in order. A test then replays prefixes of the trace on a model file system in
//! which only what was fsynced is sure to be on disk (see `tests/it/power_loss.rs`). With no
//! trace running, reporting costs one relaxed atomic load.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// One operation, as the kernel saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A file was created empty (an entry in its directory, not yet durable).
    Create {
        /// The new file.
        path: PathBuf,
    },
    /// `data` was written at `offset`.
    Write {
        /// The file.
        path: PathBuf,
        /// Where.
        offset: u64,
        /// What.
        data: Vec<u8>,
    },
    /// The file was cut (or extended) to `len`.
    SetLen {
        /// The file.
        path: PathBuf,
        /// The new length.
        len: u64,
    },
    /// The file's data (and size) were made durable: `fsync`/`fdatasync`.
    Fsync {
        /// The file.
        path: PathBuf,
    },
    /// A directory was created (an entry in its parent, not yet durable).
    Mkdir {
        /// The new directory.
        path: PathBuf,
    },
    /// An entry was renamed (replacing `to` if it existed).
    Rename {
        /// The old name.
        from: PathBuf,
        /// The new name.
        to: PathBuf,
    },
    /// A file (or link) was removed.
    Unlink {
        /// The entry.
        path: PathBuf,
    },
    /// An empty directory was removed.
    Rmdir {
        /// The entry.
        path: PathBuf,
    },
    /// A directory's entries were made durable.
    FsyncDir {
        /// The directory.
        path: PathBuf,
    },
    /// A point the caller marked (an acknowledged append, a finished compaction).
    Mark(String),
}

impl Op {
    fn path(&self) -> Option<&Path> {
        match self {
            Op::Create { path }
            | Op::Write { path, .. }
            | Op::SetLen { path, .. }
            | Op::Fsync { path }
            | Op::Mkdir { path }
            | Op::Unlink { path }
            | Op::Rmdir { path }
            | Op::FsyncDir { path } => Some(path),
            Op::Rename { to, .. } => Some(to),
            Op::Mark(_) => None,
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static TRACE: Mutex<Option<(PathBuf, Vec<Op>)>> = Mutex::new(None);

/// Starts keeping the operations below `root` (replacing a trace already running).
pub fn start(root: &Path) {
    let mut t = TRACE.lock().unwrap_or_else(PoisonError::into_inner);
    *t = Some((root.to_path_buf(), Vec::new()));
    ON.store(true, Ordering::SeqCst);
}

/// Stops the trace and returns what it kept.
pub fn stop() -> Vec<Op> {
    ON.store(false, Ordering::SeqCst);
    let mut t = TRACE.lock().unwrap_or_else(PoisonError::into_inner);
    t.take().map(|(_, ops)| ops).unwrap_or_default()
}

/// Whether a trace is running (callers skip work, such as reading back copied bytes, when not).
pub fn active() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Adds a mark to the running trace.
pub fn mark(label: impl Into<String>) {
    if active() {
        push(Op::Mark(label.into()));
    }
}

/// Reports an operation: kept when a trace is running and it is below the trace's root.
pub(crate) fn record(op: impl FnOnce() -> Op) {
    if active() {
        push(op());
    }
}

fn push(op: Op) {
    let mut t = TRACE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((root, ops)) = t.as_mut()
        && op.path().is_none_or(|p| p.starts_with(root.as_path()))
    {
        ops.push(op);
    }
}
