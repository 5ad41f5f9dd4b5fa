//! Durability and permission primitives; every write in the store goes through these.
//!
//! - Directories are created 0700 and files 0600 (SPEC §19.4: transcripts hold secrets).
//! - [`write_atomic`] replaces a file so that after a crash at any instant it is the old or the
//!   new one: temp file in the same directory → fsync → rename → fsync the directory.
//! - Appends are one `write` of one whole line on a file opened with `O_APPEND`.
//! - [`busy`] / [`exit_when_idle`]: a forced exit waits for the write in progress to finish.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::error::{IoContext, Result};

/// Mode of every directory the store creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the store creates.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents with mode 0700.
pub fn create_dir_private(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .ctx("create directory", dir)
}

/// Creates `dir` (its parent must exist) with mode 0700; fails if it exists.
pub fn create_dir_exclusive(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new().mode(DIR_MODE).create(dir)
}

/// Opens `path` for appending (and reading, to check its tail), creating it 0600 if missing.
pub fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .open(path)
        .ctx("open for append", path)
}

/// Creates an empty file 0600, open for reading and writing; fails if it exists.
pub fn create_new(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .ctx("create", path)
}

/// fsyncs a directory, making a rename or create in it durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("fsync directory", dir)
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temp-file path beside `path`, unique within this process and across processes.
pub fn temp_path_for(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Writes `bytes` to a fresh temp file beside `path` (0600) and returns its path; with `sync`
/// its data is on disk before this returns.
pub fn write_temp(path: &Path, bytes: &[u8], sync: bool) -> Result<std::path::PathBuf> {
    let tmp = temp_path_for(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&tmp)
        .ctx("create", &tmp)?;
    let res = f
        .write_all(bytes)
        .and_then(|()| if sync { f.sync_all() } else { Ok(()) });
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(e).ctx("write", &tmp);
    }
    Ok(tmp)
}

/// Atomically replaces `path` with `bytes`. With `sync`, the data and the rename are durable
/// when this returns; without it the replacement is still all-or-nothing for a process crash.
pub fn write_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let _busy = busy();
    let tmp = write_temp(path, bytes, sync)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e).ctx("rename into", path);
    }
    if sync {
        // `Path::parent` of a bare file name is "", which names the current directory.
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(dir)?;
    }
    Ok(())
}

/// Like [`write_atomic`] with `sync`, but without the directory fsync: after a crash the file is
/// still the old one or the new one (the new data is on disk before the rename), but the rename
/// itself may be lost. For frequent updates whose latest value can be rebuilt (turn counters).
pub fn write_atomic_relaxed(path: &Path, bytes: &[u8]) -> Result<()> {
    let _busy = busy();
    let tmp = write_temp(path, bytes, true)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e).ctx("rename into", path);
    }
    Ok(())
}

/// Appends one line (`line` plus `\n`) to a small append-only log, as one `write`, then makes it
/// durable. A torn last line left by a crash is fenced with a newline first, never glued onto.
pub fn append_line(path: &Path, line: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut f = open_append(path)?;
    let len = f.metadata().ctx("inspect", path)?.len();
    let mut last = [b'\n'];
    if len > 0 {
        f.read_exact_at(&mut last, len - 1).ctx("read", path)?;
    }
    let mut buf = Vec::with_capacity(line.len() + 2);
    if last[0] != b'\n' {
        buf.push(b'\n');
    }
    buf.extend_from_slice(line);
    buf.push(b'\n');
    let _busy = busy();
    f.write_all(&buf)
        .and_then(|()| f.sync_data())
        .ctx("append to", path)
}

/// Reads a whole file; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx("read", path),
    }
}

/// Removes a directory tree if present. A symlink is removed, never followed.
pub fn remove_tree(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path).ctx("remove", path).map(|()| true),
        Ok(_) => fs::remove_file(path).ctx("remove", path).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).ctx("inspect", path),
    }
}

/// Writes in progress in this process (appends and whole-file rewrites), for [`exit_when_idle`].
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Set once the process has decided to exit: no new write starts after it.
static EXITING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// How many [`Busy`] guards this thread holds: an inner write of an outer one (the log
    /// rewrite inside an interrupt mark) must never park.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Held for the length of one write to the home (see [`busy`]); dropping it ends the write.
/// Not `Send`: it counts a write of the thread that made it.
#[must_use = "the write is only covered while the guard lives"]
pub struct Busy(std::marker::PhantomData<*const ()>);

impl Drop for Busy {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Marks a write as in progress until the guard drops. Once [`exit_when_idle`] has started, a
/// new write never starts: the calling thread parks until the process exits, so a forced exit
/// (a second Ctrl+C) never leaves a half-written temp file renamed, or a line half appended.
/// Re-entrant: a write that starts inside another on the same thread (a rewrite inside an
/// interrupt mark or a compaction) goes on, so the outer one finishes whole.
pub fn busy() -> Busy {
    enter(&EXITING)
}

fn enter(exiting: &AtomicBool) -> Busy {
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let nested = DEPTH.with(std::cell::Cell::get) > 0;
    if !nested && exiting.load(Ordering::SeqCst) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        loop {
            std::thread::park();
        }
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    Busy(std::marker::PhantomData)
}

/// Exits the process with `code` once no write is in progress (waiting at most `max_wait`):
/// the forced exit of a second Ctrl+C (SPEC §19.23), which must not tear a file.
pub fn exit_when_idle(code: i32, max_wait: std::time::Duration) -> ! {
    EXITING.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + max_wait;
    while IN_FLIGHT.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The second Ctrl+C lands while an interrupt mark is between its log rewrite and its meta
    /// rewrite: the inner write must not park (which would hold the exit for its whole wait and
    /// leave the mark half done).
    #[test]
    fn nested_writes_go_on_while_an_exit_waits() {
        // A local flag stands for `exit_when_idle` having started (the global one would park
        // the other tests' writes).
        let exiting = AtomicBool::new(false);
        let outer = enter(&exiting);
        assert_eq!(DEPTH.with(std::cell::Cell::get), 1);
        exiting.store(true, Ordering::SeqCst);
        let inner = enter(&exiting); // returns: nested
        assert_eq!(DEPTH.with(std::cell::Cell::get), 2);
        drop(inner);
        drop(outer);
        assert_eq!(DEPTH.with(std::cell::Cell::get), 0);
        // A fresh write on another thread parks once the exit has started.
        let (tx, rx) = std::sync::mpsc::channel();
        let exiting = std::sync::Arc::new(exiting);
        let e2 = exiting.clone();
        std::thread::spawn(move || {
            let _g = enter(&e2);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "a new write must not start during an exit"
        );
    }
}
