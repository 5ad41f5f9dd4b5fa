//! The home directory (`~/.freecode`) and the paths of everything in it (SPEC §1).
//!
//! Every path here is built from a validated [`SessionId`] or a project key, so nothing can
//! resolve outside the home.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use freecode_core::SessionId;

use crate::error::{Result, StoreError};
use crate::fsutil;

/// Environment variable that overrides the home directory.
pub const HOME_ENV: &str = "FREECODE_HOME";

/// The most `config.json` may hold.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// The directories of a home that [`Home::check`] inspects (parents before children).
const CHECKED_DIRS: &[&str] = &[
    "sessions",
    "state",
    "rollout",
    "rollout/sessions",
    "memory",
    "remote",
    "projects",
];

/// The root of freecode's data.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
    /// Set once [`Home::check`] passed on an existing root: a command checks its home once,
    /// however many stores it opens (clones share it).
    checked: Arc<OnceLock<()>>,
}

impl PartialEq for Home {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for Home {}

impl Home {
    /// A home at `root` (not created until something is written). From now on nothing below
    /// `root` is reached through a link ([`fsutil::register_root`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        fsutil::register_root(&root);
        Self {
            root,
            checked: Arc::default(),
        }
    }

    /// `explicit` (a `--home` flag) if given, else `$FREECODE_HOME`, else `$HOME/.freecode`.
    pub fn resolve(explicit: Option<PathBuf>) -> Option<Self> {
        if let Some(p) = explicit {
            return Some(Self::new(p));
        }
        if let Some(p) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
            return Some(Self::new(p));
        }
        std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|h| Self::new(PathBuf::from(h).join(".freecode")))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `sessions/`.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `state/` (thread store).
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    /// `rollout/sessions/<id>/`.
    pub fn rollout_dir(&self, id: &SessionId) -> PathBuf {
        self.root.join("rollout").join("sessions").join(id.as_str())
    }

    /// `memory/<id>/`.
    pub fn memory_dir(&self, id: &SessionId) -> PathBuf {
        self.root.join("memory").join(id.as_str())
    }

    /// `memory/<id>/memory.json`: the compaction summary.
    pub fn memory_file(&self, id: &SessionId) -> PathBuf {
        self.memory_dir(id).join("memory.json")
    }

    /// `remote/`.
    pub fn remote_dir(&self) -> PathBuf {
        self.root.join("remote")
    }

    /// `config.json`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.json")
    }

    /// `config.json` as JSON, read afresh: `Null` when there is none, else its object. A file
    /// that does not parse, or is not a JSON object, is [`StoreError::BadConfig`] naming the
    /// file, line and column; one that cannot be read is the read's error. (The original fell
    /// back to its defaults, which sent shares to a public endpoint instead of the configured
    /// private one.)
    pub fn read_config(&self) -> Result<serde_json::Value> {
        let path = self.config_file();
        let Some(bytes) = fsutil::read_bounded(&path, CONFIG_MAX_BYTES, "config.json")? else {
            return Ok(serde_json::Value::Null);
        };
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v @ serde_json::Value::Object(_)) => Ok(v),
            Ok(other) => Err(StoreError::BadConfig {
                path,
                line: 1,
                column: 1,
                message: format!(
                    "expected a JSON object {{\"key\": value, …}}, found {}",
                    json_kind(&other)
                ),
            }),
            Err(e) => {
                let message = e.to_string();
                // serde_json appends " at line L column C"; the position is given up front.
                let message = match message.rfind(" at line ") {
                    Some(i) => message[..i].to_owned(),
                    None => message,
                };
                Err(StoreError::BadConfig {
                    path,
                    line: e.line().max(1),
                    column: e.column().max(1),
                    message,
                })
            }
        }
    }

    /// Refuses a home that someone else controls, as ssh's StrictModes does: the root, or one
    /// of the directories freecode keeps in it, owned by another user or writable by group or
    /// others, or a link where one of those directories should be. A home that does not exist
    /// yet passes (it will be created private).
    ///
    /// One walk: each directory is opened once, from its parent. A check that passed is not
    /// repeated for this home or its clones (the writes themselves check every directory they
    /// walk through).
    pub fn check(&self) -> Result<()> {
        if self.checked.get().is_some() || !self.root.exists() {
            return Ok(());
        }
        fsutil::check_dirs(&self.root, CHECKED_DIRS)?;
        // A second thread racing here checked the same thing.
        let _ = self.checked.set(());
        Ok(())
    }

    /// Creates the root and `sessions/` (0700) where missing. Existing directories are left as
    /// they are: reading a home never changes it.
    pub fn ensure(&self) -> Result<()> {
        if self.sessions_dir().is_dir() {
            return Ok(());
        }
        fsutil::create_dir_private(&self.sessions_dir())
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
