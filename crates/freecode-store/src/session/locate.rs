//! Where a session is: its directory by id (moved or renamed projects included), an id by a
//! unique prefix, a project's directory.

use std::fs;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::project_key::{ProjectKey, is_project_dir_name, project_key};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{create_dir_private, write_atomic};

use super::{META_FILE, PROJECT_PATH_FILE, SessionPaths, SessionStore};

impl SessionStore {
    /// Finds a session's directory by id, scanning project directories (one `stat` each).
    pub fn locate(&self, id: &SessionId) -> Result<SessionPaths> {
        let sessions = self.home.sessions_dir();
        let entries = match fs::read_dir(&sessions) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound { id: id.to_string() });
            }
            Err(e) => return Err(e).ctx("list", &sessions),
        };
        for entry in entries {
            let entry = entry.ctx("list", &sessions)?;
            if !entry.file_name().to_str().is_some_and(is_project_dir_name)
                || entry.file_type().is_ok_and(|t| t.is_symlink())
            {
                continue;
            }
            let dir = entry.path().join(id.as_str());
            if dir.join(META_FILE).is_file() {
                return Ok(SessionPaths { dir });
            }
        }
        Err(StoreError::NotFound { id: id.to_string() })
    }

    /// The session a user's id or unique id prefix names, as git resolves a short hash: an
    /// existing id is itself; otherwise the one session (of any status) or recorded rollout log
    /// whose id starts with `prefix`. None is [`StoreError::NotFound`], several is
    /// [`StoreError::AmbiguousId`] with the candidates, sorted.
    pub fn resolve_prefix(&self, prefix: &str) -> Result<SessionId> {
        let wanted = SessionId::new(prefix)?;
        if self.locate(&wanted).is_ok()
            || self
                .home
                .rollout_dir(&wanted)
                .join(crate::rollout::EVENTS_FILE)
                .is_file()
        {
            return Ok(wanted);
        }
        let mut found = std::collections::BTreeSet::new();
        let mut collect = |dir: &Path, is_session: bool| {
            let Ok(rd) = fs::read_dir(dir) else { return };
            for e in rd.filter_map(|e| e.ok()) {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                if !name.starts_with(prefix) || e.file_type().is_ok_and(|t| t.is_symlink()) {
                    continue;
                }
                let Ok(id) = SessionId::new(name) else {
                    continue;
                };
                let marker = if is_session {
                    META_FILE
                } else {
                    crate::rollout::EVENTS_FILE
                };
                if e.path().join(marker).is_file() {
                    found.insert(id);
                }
            }
        };
        let sessions = self.home.sessions_dir();
        if let Ok(rd) = fs::read_dir(&sessions) {
            for e in rd.filter_map(|e| e.ok()) {
                if e.file_name().to_str().is_some_and(is_project_dir_name)
                    && !e.file_type().is_ok_and(|t| t.is_symlink())
                {
                    collect(&e.path(), true);
                }
            }
        }
        collect(&self.home.root().join("rollout").join("sessions"), false);
        let mut found = found.into_iter();
        match (found.next(), found.next()) {
            (None, _) => Err(StoreError::NotFound {
                id: prefix.to_owned(),
            }),
            (Some(id), None) => Ok(id),
            (Some(a), Some(b)) => Err(StoreError::AmbiguousId {
                prefix: prefix.to_owned(),
                candidates: [a, b]
                    .into_iter()
                    .chain(found)
                    .map(|id| id.to_string())
                    .collect(),
            }),
        }
    }

    /// The directory new sessions of `project_path` go to.
    pub(super) fn project_dir_for(&self, project_path: &str) -> Result<PathBuf> {
        if project_path.is_empty() {
            return Err(StoreError::InvalidProjectPath {
                path: String::new(),
                why: "it is empty",
            });
        }
        let key = project_key(project_path);
        let dir = self.home.sessions_dir().join(key.dir_name());
        create_dir_private(&dir)?;
        if let ProjectKey::Hashed(_) = key {
            let side = dir.join(PROJECT_PATH_FILE);
            if !side.exists() {
                write_atomic(&side, project_path.as_bytes(), self.sync_rewrites())?;
            }
        }
        Ok(dir)
    }
}
