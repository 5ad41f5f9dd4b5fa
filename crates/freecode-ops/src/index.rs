//! The session index behind `list`, `search` and `stats`: SQLite at `state/freecode.db` when it
//! can be used, else a scan of the files with the same answers ([`indexed_or_scanned`]).
//!
//! The backend is chosen at each use: SQLite, or — when it cannot be opened, the state
//! directory is read-only, or `FREECODE_THREAD_STORE=json` — the JSON thread store, in which
//! case the readers scan the files instead (same matches, simpler ranking).

use freecode_store::index::{Problem, SessionIndex};
use freecode_store::threads::BackendChoice;
use freecode_store::{Home, StoreError};

use crate::error::{Error, Result};
use crate::progress::Progress;

/// Environment switch for the thread-store backend: `json`, `sqlite` or `auto`.
pub const BACKEND_ENV: &str = "FREECODE_THREAD_STORE";

fn backend_choice() -> Result<BackendChoice> {
    match std::env::var(BACKEND_ENV).unwrap_or_default().trim() {
        "" | "auto" => Ok(BackendChoice::Auto),
        "sqlite" => Ok(BackendChoice::Sqlite),
        "json" => Ok(BackendChoice::Json),
        other => Err(Error::Invalid(format!(
            "{BACKEND_ENV}={other:?}: use auto, sqlite or json"
        ))),
    }
}

/// Set by [`check_everything`]: the indexes this process opens check every session at their next
/// look.
static CHECK_EVERYTHING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every index this process opens from now on check every session against the files at
/// its first look (`--fresh`), not only those that may have changed since the last look
/// ([`SessionIndex::check_everything`]).
pub fn check_everything() {
    CHECK_EVERYTHING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The session index when the SQLite backend can be used; `None` means: scan the files. Opens
/// the database once (recovering a corrupt one); never writes into a read-only home.
pub fn open_index(home: &Home) -> Result<Option<SessionIndex>> {
    if backend_choice()? == BackendChoice::Json {
        tracing::info!("session index not used: {BACKEND_ENV}=json; scanning the files");
        return Ok(None);
    }
    let state = home.state_dir();
    let read_only = |p: &std::path::Path| {
        std::fs::metadata(p)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o222 == 0)
    };
    if read_only(&state) || (!state.exists() && read_only(home.root())) {
        tracing::info!(
            "session index not used: {} is read-only; scanning the files",
            state.display()
        );
        return Ok(None);
    }
    match SessionIndex::open(home) {
        Ok(mut ix) => {
            if CHECK_EVERYTHING.load(std::sync::atomic::Ordering::Relaxed) {
                ix.check_everything();
            }
            Ok(Some(ix))
        }
        Err(e) => {
            tracing::warn!("session index unavailable ({e}); scanning the files");
            Ok(None)
        }
    }
}

/// The index's answer (`from_index`), or the files' (`scan`: same answer) when the index cannot
/// be used or fails: a reader never fails because another process holds the database. The one
/// fallback of `search`, `stats` and `list`.
pub fn indexed_or_scanned<T>(
    home: &Home,
    from_index: impl FnOnce(&mut SessionIndex) -> std::result::Result<T, StoreError>,
    scan: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if let Some(mut ix) = open_index(home)? {
        match from_index(&mut ix) {
            Ok(answer) => return Ok(answer),
            Err(e) => tracing::warn!("session index failed ({e}); scanning the files"),
        }
    }
    scan()
}

/// Brings the index up to date, telling `progress` how far it is (a first `search` or `stats`
/// on a big home indexes every session), then answers `query` with the damaged files the index
/// skipped.
pub fn refreshed_then<T>(
    ix: &mut SessionIndex,
    progress: &mut dyn Progress,
    query: impl FnOnce(&mut SessionIndex) -> std::result::Result<T, StoreError>,
) -> std::result::Result<(T, Vec<Problem>), StoreError> {
    ix.refresh(|done, total| progress.sessions(done, total))?;
    let answer = query(ix)?;
    Ok((answer, ix.problems().to_vec()))
}

/// Logs each damaged session file an operation skipped: one warning each, with the path and
/// the reason (stderr for the CLI, the server's log for the others).
pub fn warn_problems(problems: &[Problem]) {
    for (path, why) in problems {
        tracing::warn!("skipped {}: {why}", path.display());
    }
}
