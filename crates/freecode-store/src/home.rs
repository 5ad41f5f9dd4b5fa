//! The home directory (`~/.freecode`) and the paths of everything in it (SPEC §1).
//!
//! Every path here is built from a validated [`SessionId`] or a project key, so nothing can
//! resolve outside the home.

use std::path::{Path, PathBuf};

use freecode_core::SessionId;

use crate::error::Result;
use crate::fsutil;

/// Environment variable that overrides the home directory.
pub const HOME_ENV: &str = "FREECODE_HOME";

/// The most `config.json` may hold.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// The root of freecode's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// A home at `root` (not created until something is written). From now on nothing below
    /// `root` is reached through a link ([`fsutil::register_root`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        fsutil::register_root(&root);
        Self { root }
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

    /// `config.json` as JSON, read afresh: `Null` when missing or unreadable, and when it does
    /// not parse (with a warning) — the original falls back to its defaults the same way.
    pub fn read_config(&self) -> serde_json::Value {
        let path = self.config_file();
        match fsutil::read_bounded(&path, CONFIG_MAX_BYTES, "config.json") {
            Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "config.json is not valid JSON; using defaults");
                serde_json::Value::Null
            }),
            Ok(None) => serde_json::Value::Null,
            Err(e) => {
                tracing::warn!(error = %e, "config.json cannot be read; using defaults");
                serde_json::Value::Null
            }
        }
    }

    /// Refuses a home that someone else controls, as ssh's StrictModes does: the root, or one
    /// of the directories freecode keeps in it, owned by another user or writable by group or
    /// others, or a link where one of those directories should be. A home that does not exist
    /// yet passes (it will be created private).
    pub fn check(&self) -> Result<()> {
        if !self.root.exists() {
            return Ok(());
        }
        fsutil::check_dir(&self.root)?;
        for sub in [
            "sessions",
            "state",
            "rollout",
            "rollout/sessions",
            "memory",
            "remote",
            "projects",
        ] {
            let dir = self.root.join(sub);
            if std::fs::symlink_metadata(&dir).is_ok() {
                fsutil::check_dir(&dir)?;
            }
        }
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
