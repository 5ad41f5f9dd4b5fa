//! What earlier imports saw of each source file: `state/imports.json`, the importer's
//! watermarks.
//!
//! One entry per unit (keyed by its main file): every file of the unit with its inode, length,
//! mtime and the offset after its last complete line, and the sessions the unit gave (with the
//! number of messages and rollout events written for each). A unit whose files all stat the
//! same is skipped without opening them; a changed one is read again and its sessions are
//! grown (only the new messages and events appended) or replaced.
//!
//! A JSON file, not a table in `state/freecode.db`: that database is derived and may be moved
//! aside and rebuilt at any time (a corrupt index), which must not forget what was imported;
//! the watermarks are small (about 200 bytes a unit: 10,000 units read in milliseconds) and
//! rewritten once per import run, atomically through the store's `fsutil` (temp, fsync,
//! rename), so a crash leaves the old state or the new one. Losing the file costs one full
//! re-read, never a duplicate: ids are derived from the source.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use freecode_store::Home;
use serde::{Deserialize, Serialize};

/// The file under the home's `state/`.
pub const STATE_FILE: &str = "imports.json";
/// A state file larger than this is not read (and is rebuilt by the next import).
const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// The watermarks of every unit imported into a home.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportState {
    /// Format version (1).
    pub version: u32,
    /// By the unit's main file.
    pub units: BTreeMap<String, UnitMark>,
}

/// What one unit looked like when it was last imported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitMark {
    /// Every file of the unit, the main one first.
    pub files: Vec<FileMark>,
    /// The sessions it gave, by our id.
    pub sessions: BTreeMap<String, SessionMark>,
}

/// One source file's stat and extent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileMark {
    /// The file.
    pub path: PathBuf,
    /// Its inode.
    pub ino: u64,
    /// Its length.
    pub len: u64,
    /// Its mtime, ns since the epoch.
    pub mtime_ns: i64,
    /// The offset after its last complete line (what the reader read).
    pub complete: u64,
}

/// What was written for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMark {
    /// Messages in its log.
    pub messages: usize,
    /// Events in its rollout log.
    pub events: usize,
}

impl FileMark {
    /// The file's stat now (a link is not followed); `None` when it cannot be read. A directory
    /// is a unit's main path for sources kept as a tree of files (opencode's `storage/`): its
    /// mtime moves when an entry is added or removed, and its files are side files.
    pub fn stat(path: &Path) -> Option<Self> {
        let m = std::fs::symlink_metadata(path).ok()?;
        if !(m.is_file() || m.is_dir()) {
            return None;
        }
        Some(Self {
            path: path.to_owned(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
            complete: 0,
        })
    }

    /// Whether `other` is the same file unchanged (extent aside).
    pub fn same(&self, other: &Self) -> bool {
        self.path == other.path
            && self.ino == other.ino
            && self.len == other.len
            && self.mtime_ns == other.mtime_ns
    }

    /// Fills `complete`: the offset after the last newline (read from the end, a block at a
    /// time; never the whole file).
    pub fn with_extent(mut self) -> Self {
        self.complete = last_newline_end(&self.path, self.len).unwrap_or(0);
        self
    }
}

/// The offset after the last `\n` in the first `len` bytes of `path`.
fn last_newline_end(path: &Path, len: u64) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

impl ImportState {
    /// The state of `home`; empty when there is none, or when it cannot be read (reported:
    /// the next import reads every unit again, which duplicates nothing).
    pub fn load(home: &Home) -> Self {
        let path = home.state_dir().join(STATE_FILE);
        match freecode_store::fsutil::read_bounded(&path, MAX_STATE_BYTES, "import state") {
            Ok(None) => Self::default(),
            Ok(Some(bytes)) => match serde_json::from_slice(&bytes) {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(
                        "{}: unreadable ({e}); every source is read again",
                        path.display()
                    );
                    Self::default()
                }
            },
            Err(e) => {
                tracing::warn!("{e}; every source is read again");
                Self::default()
            }
        }
    }

    /// Writes the state atomically.
    pub fn save(&self, home: &Home) -> Result<(), freecode_store::StoreError> {
        let dir = home.state_dir();
        freecode_store::fsutil::create_dir_private(&dir)?;
        let mut state = self.clone();
        state.version = 1;
        let bytes =
            serde_json::to_vec(&state).map_err(|e| freecode_store::StoreError::BadJson {
                path: dir.join(STATE_FILE),
                source: e,
            })?;
        freecode_store::fsutil::write_atomic(&dir.join(STATE_FILE), &bytes, true)
    }

    /// The key of a unit.
    pub fn key(path: &Path) -> String {
        path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_extent_ends_at_the_last_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut text = "x".repeat(100_000);
        text.push('\n');
        text.push_str(&"y".repeat(70_000));
        std::fs::write(&p, &text).unwrap();
        let m = FileMark::stat(&p).unwrap().with_extent();
        assert_eq!(m.len, 170_001);
        assert_eq!(m.complete, 100_001);
        std::fs::write(&p, "no newline").unwrap();
        assert_eq!(FileMark::stat(&p).unwrap().with_extent().complete, 0);
    }

    #[test]
    fn state_round_trips_through_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("h"));
        assert_eq!(ImportState::load(&home), ImportState::default());
        let mut s = ImportState::default();
        s.units.insert(
            "/a.jsonl".into(),
            UnitMark {
                files: vec![FileMark {
                    path: "/a.jsonl".into(),
                    ino: 1,
                    len: 2,
                    mtime_ns: 3,
                    complete: 2,
                }],
                sessions: BTreeMap::from([(
                    "id".to_owned(),
                    SessionMark {
                        messages: 4,
                        events: 9,
                    },
                )]),
            },
        );
        s.save(&home).unwrap();
        let back = ImportState::load(&home);
        assert_eq!(back.units, s.units);
        assert_eq!(back.version, 1);
    }
}

/// The file of [`HandoffMarks`] under the home's `state/`.
pub const HANDOFFS_FILE: &str = "handoffs.json";

/// Sessions handed back to an agent (`freecode session handoff`), so that an import of the
/// file the agent goes on writing adds its new turns to the session it came from instead of
/// making a new one: `state/handoffs.json`, written by the hand-back only (so an import that
/// rewrites `imports.json` never loses one), atomically.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffMarks {
    /// Format version (1).
    pub version: u32,
    /// By `<agent>:<the source id the hand-back wrote>`.
    pub handoffs: BTreeMap<String, HandoffMark>,
}

/// One hand-back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffMark {
    /// Our session it came from.
    pub session: String,
    /// When it was written, ms: every record it wrote is at or before this time.
    pub at: i64,
    /// The file written.
    pub path: PathBuf,
    /// The ids of the messages an import of the file as written gives: what the hand-back
    /// carried, never new, however the agent rewrites or re-stamps it on resume.
    #[serde(default)]
    pub handed: Vec<String>,
}

impl HandoffMarks {
    /// The key of a hand-back to `agent` that wrote source id `source_id`.
    pub fn key(agent: crate::source::Agent, source_id: &str) -> String {
        format!("{}:{source_id}", agent.name())
    }

    /// The marks of `home` (none when the file is missing or unreadable, which is reported).
    pub fn load(home: &Home) -> Self {
        let path = home.state_dir().join(HANDOFFS_FILE);
        match freecode_store::fsutil::read_bounded(&path, MAX_STATE_BYTES, "hand-back marks") {
            Ok(None) => Self::default(),
            Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("{}: unreadable ({e})", path.display());
                Self::default()
            }),
            Err(e) => {
                tracing::warn!("{e}");
                Self::default()
            }
        }
    }

    /// Adds `mark` under `key` to the home's marks: read, changed and written atomically under
    /// an advisory lock (`state/handoffs.lock`), so two hand-backs at once both stay.
    pub fn add(
        home: &Home,
        key: String,
        mark: HandoffMark,
    ) -> Result<(), freecode_store::StoreError> {
        let dir = home.state_dir();
        freecode_store::fsutil::create_dir_private(&dir)?;
        let lock_path = dir.join("handoffs.lock");
        let lock = freecode_store::fsutil::open_rw(&lock_path)?;
        lock.lock().map_err(|e| freecode_store::StoreError::Io {
            op: "lock",
            path: lock_path.clone(),
            source: e,
        })?;
        let mut marks = Self::load(home);
        marks.version = 1;
        marks.handoffs.insert(key, mark);
        let bytes = serde_json::to_vec_pretty(&marks).unwrap_or_default();
        freecode_store::fsutil::write_atomic(&dir.join(HANDOFFS_FILE), &bytes, true)
    }
}
