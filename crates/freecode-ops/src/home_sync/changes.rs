//! What changed here: the complete sessions of the home, the projects `sync.exclude` keeps
//! home, and each session's files read against the marks of what was synced (the meta and
//! memory by digest, the logs by length and the digest of their last bytes); the local side of
//! a push, and of applying a record (which bytes a file already holds).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_store::session::SessionStore;
use freecode_store::{Home, fsutil};

use super::plan::{Change, Fit, whole_lines};
use super::record::{Mode, Section};
use super::state::{self, Mark};
use crate::error::{Error, Result};

/// `sync.exclude` of `config.json`: comma-separated project path globs.
pub(super) fn excluded(home: &Home) -> Result<globset::GlobSet> {
    let config = home.read_config()?;
    let mut set = globset::GlobSetBuilder::new();
    for glob in crate::keys::lookup_str(&config, "sync.exclude")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        let g = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::Invalid(format!("sync.exclude: {glob:?}: {e}")))?;
        set.add(g);
    }
    set.build()
        .map_err(|e| Error::Invalid(format!("sync.exclude: {e}")))
}

/// The complete sessions in this home (any status), by id, with their directories: the
/// store's one listing ([`SessionStore::session_dirs`]), so a push costs no lookup per session.
pub(super) fn local_sessions(store: &SessionStore) -> Result<BTreeMap<SessionId, PathBuf>> {
    Ok(store
        .session_dirs()?
        .into_iter()
        .filter(|(_, dir)| dir.join("meta.json").is_file())
        .collect())
}

/// The bytes of `path` from `from` on (empty when it is missing or shorter).
pub(super) fn read_from(path: &Path, from: u64) -> Result<Vec<u8>> {
    fsutil::refuse_link(path)?;
    let mut f = match fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read", path)(e)),
    };
    let len = f.metadata().map_err(Error::io("stat", path))?.len();
    if len <= from {
        return Ok(Vec::new());
    }
    f.seek(SeekFrom::Start(from))
        .map_err(Error::io("read", path))?;
    let mut out = Vec::with_capacity((len - from) as usize);
    f.read_to_end(&mut out).map_err(Error::io("read", path))?;
    Ok(out)
}

pub(super) fn file_len(path: &Path) -> u64 {
    fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The mark of `path`'s first `len` bytes.
pub(super) fn mark_of(path: &Path, len: u64) -> Result<Mark> {
    let start = len.saturating_sub(state::PROBE);
    let tail = read_from(path, start)?;
    let have = (tail.len() as u64).min(len - start);
    Ok(state::mark(&tail[..have as usize], have).with_len(start + have))
}

impl Mark {
    fn with_len(mut self, len: u64) -> Self {
        self.len = len;
        self
    }
}

/// How `path` changed since `mark` (whole lines only).
pub(super) fn change_of(path: &Path, mark: &Mark) -> Result<Option<Change>> {
    let start = mark.len.saturating_sub(state::PROBE);
    let tail = read_from(path, start)?;
    let probe_len = (mark.len - start) as usize;
    if tail.len() >= probe_len && state::digest(&tail[..probe_len]) == mark.probe {
        let new = whole_lines(&tail[probe_len..]);
        if new.is_empty() {
            return Ok(None);
        }
        return Ok(Some(Change::Append {
            from: mark.len,
            bytes: new.to_vec(),
        }));
    }
    if mark.len == 0 && tail.is_empty() {
        return Ok(None);
    }
    let all = read_from(path, 0)?;
    Ok(Some(Change::Set(whole_lines(&all).to_vec())))
}

pub(super) fn fit(path: &Path, mark: &Mark, section: &Section) -> Result<Fit> {
    match section.head.mode {
        Mode::Append => {
            let from = section.head.from;
            if mark.len != from {
                return Ok(Fit::Diverged);
            }
            let local_len = file_len(path);
            if local_len == from {
                return Ok(Fit::Apply);
            }
            let have = read_from(path, from)?;
            if have.len() >= section.bytes.len() && have[..section.bytes.len()] == section.bytes[..]
            {
                return Ok(Fit::Already);
            }
            Ok(Fit::Diverged)
        }
        Mode::Set => {
            let all = read_from(path, 0)?;
            if whole_lines(&all) == &section.bytes[..] || all == section.bytes {
                return Ok(Fit::Already);
            }
            if change_of(path, mark)?.is_none() {
                return Ok(Fit::Apply);
            }
            Ok(Fit::Diverged)
        }
    }
}
