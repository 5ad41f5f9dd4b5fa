//! Making sessions: a new one (empty, or populated and committed at once by a rename), one
//! with a given id (an import, a sync), and the writer of a new one.

use std::fs::File;
use std::path::Path;

use freecode_core::{SessionId, SessionMeta, StoredMessage};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, create_dir_exclusive, write_atomic};
use crate::lock::{LockWait, SessionLock};

use super::writer;
use super::{ExtraFiles, NewSession, SessionPaths, SessionStore, SessionWriter, new_uuid};

impl SessionStore {
    /// Creates a session with a fresh UUID.
    pub fn create(&self, new: NewSession) -> Result<SessionId> {
        let id = SessionId::new(new_uuid())?;
        // A fresh random UUID cannot exist elsewhere: skip the scan; the exclusive mkdir still
        // refuses a clash in the project directory.
        self.create_at(new, &id)?;
        Ok(id)
    }

    /// Creates a session with a fresh UUID that already holds `messages` (an import). The
    /// session is built in a hidden staging directory (`.import-<id>`, which listings skip):
    /// the log written whole, `meta.json` as `edit` shapes it, and `extra_files` (paths in the
    /// home, each written atomically); then one rename makes it visible. On any error everything
    /// written so far is removed; after a crash only the hidden directory can remain.
    pub fn create_populated(
        &self,
        new: NewSession,
        messages: &[StoredMessage],
        extra_files: &ExtraFiles<'_>,
        edit: impl FnOnce(&mut SessionMeta),
    ) -> Result<SessionId> {
        let id = SessionId::new(new_uuid())?;
        let project_dir = self.project_dir_for(&new.project_path)?;
        let staging = project_dir.join(format!(".import-{id}"));
        let paths = SessionPaths {
            dir: project_dir.join(id.as_str()),
        };
        let staged = SessionPaths {
            dir: staging.clone(),
        };
        create_dir_exclusive(&staging).ctx("create directory", &staging)?;
        // Held while the session is made: `freecode doctor` clears a staging directory only
        // when no process holds it. The lock file moves with the directory's rename.
        let _making = SessionLock::acquire(&staging, id.as_str(), LockWait::Fail)?;
        let extras = extra_files(&id);
        let _busy = fsutil::busy();
        let result = (|| {
            self.stage(&staged, &id, new, messages, edit, true)?;
            for (path, bytes) in &extras {
                if let Some(dir) = path.parent() {
                    fsutil::create_dir_private(dir)?;
                }
                write_atomic(path, bytes, true)?;
            }
            fsutil::rename(&staging, &paths.dir)?;
            fsutil::sync_dir(&project_dir)
        })();
        if result.is_err() {
            let _ = fsutil::remove_tree(&staging);
            for (path, _) in &extras {
                let _ = fsutil::remove_file(path);
                if let Some(dir) = path.parent() {
                    // Only if empty: the directories are this session's own.
                    let _ = fsutil::remove_empty_dir(dir);
                }
            }
        }
        if result.is_ok() {
            self.note_change(&id, &paths.dir);
        }
        result.map(|()| id)
    }

    /// Writes a staged session's log (`messages`, whole) and its `meta.json` as `edit` shapes
    /// it (its id kept `id`): the common part of [`SessionStore::create_populated`] and
    /// [`SessionStore::put_populated`].
    pub(super) fn stage(
        &self,
        staged: &SessionPaths,
        id: &SessionId,
        new: NewSession,
        messages: &[StoredMessage],
        edit: impl FnOnce(&mut SessionMeta),
        sync: bool,
    ) -> Result<()> {
        let mut log = Vec::new();
        for m in messages {
            let line = m.to_line();
            crate::jsonl::check_line(&staged.messages(), &line)?;
            log.extend_from_slice(&line);
        }
        write_atomic(&staged.messages(), &log, sync)?;
        let mut meta = SessionMeta::new(
            id,
            new.title,
            new.project_path,
            new.provider,
            new.model,
            self.now(),
        );
        edit(&mut meta);
        meta.id = id.as_str().to_owned();
        write_atomic(&staged.meta(), &meta.to_pretty_json(), sync)
    }

    /// Writes the session `id` whole, holding `messages`: created when it does not exist,
    /// replaced all or nothing when it does (an import from another agent, whose id is
    /// derived from the source's, read again after the source changed). The new session is
    /// built in a hidden staging directory (`.import-<id>-<uuid>`, which listings skip and
    /// `freecode doctor --fix` clears when nobody holds it): the log written whole, then
    /// `meta.json` as `edit` shapes it. An existing session is locked (its writer), renamed
    /// out of sight (`.purge-<id>-<uuid>`, as [`SessionStore::purge`] does), the staging
    /// directory renamed into place, and the old one removed. `extra_files` (paths in the
    /// home, e.g. the rollout log) are written atomically after the session is in place; a
    /// crash in between leaves the session with its previous extras, which the next import
    /// rewrites. On an error before the rename nothing changes. Files and directories are
    /// fsynced unless the store's durability is [`Durability::Never`] (a bulk import syncs the
    /// file system once at its end instead).
    pub fn put_populated(
        &self,
        id: &SessionId,
        new: NewSession,
        messages: &[StoredMessage],
        extra_files: &ExtraFiles<'_>,
        edit: impl FnOnce(&mut SessionMeta),
    ) -> Result<()> {
        let sync = self.sync_rewrites();
        let existing = match self.writer(id) {
            Ok(w) => Some(w),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let project_dir = self.project_dir_for(&new.project_path)?;
        let staging = project_dir.join(format!(".import-{id}-{}", new_uuid()));
        let target = project_dir.join(id.as_str());
        let staged = SessionPaths {
            dir: staging.clone(),
        };
        create_dir_exclusive(&staging).ctx("create directory", &staging)?;
        let making = SessionLock::acquire(&staging, id.as_str(), LockWait::Fail)?;
        let _busy = fsutil::busy();
        let staged_ok = self.stage(&staged, id, new, messages, edit, sync);
        if let Err(e) = staged_ok {
            let _ = fsutil::remove_tree(&staging);
            return Err(e);
        }
        let swapped = (|| {
            let mut doomed = None;
            if let Some(w) = &existing {
                let dir = w.paths.dir.clone();
                let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                let out = parent.join(format!(".purge-{id}-{}", new_uuid()));
                fsutil::rename(&dir, &out)?;
                if sync {
                    fsutil::sync_dir(&parent)?;
                }
                doomed = Some(out);
            }
            fsutil::rename(&staging, &target)?;
            if sync {
                fsutil::sync_dir(&project_dir)?;
            }
            Ok::<_, StoreError>(doomed)
        })();
        drop(making);
        let doomed = match swapped {
            Ok(d) => d,
            Err(e) => {
                let _ = fsutil::remove_tree(&staging);
                return Err(e);
            }
        };
        drop(existing);
        if let Some(d) = doomed {
            fsutil::remove_tree(&d)?;
        }
        for (path, bytes) in extra_files(id) {
            if let Some(dir) = path.parent() {
                fsutil::create_dir_private(dir)?;
            }
            write_atomic(&path, &bytes, sync)?;
        }
        self.note_change(id, &target);
        Ok(())
    }

    /// Notes in the change journal ([`crate::changes`]) that the session in `dir` changed.
    pub(crate) fn note_change(&self, id: &SessionId, dir: &Path) {
        crate::changes::note(&self.home, id.as_str(), &writer::project_dir_name(dir));
    }

    /// Creates a session with the given id; fails if any session has it (never overwrites).
    pub fn create_with_id(&self, new: NewSession, id: &SessionId) -> Result<SessionPaths> {
        match self.locate(id) {
            Ok(p) => {
                return Err(StoreError::AlreadyExists {
                    id: id.to_string(),
                    path: p.dir,
                });
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        self.create_at(new, id)
    }

    /// Creates a session with a fresh UUID and returns its writer, holding the lock the
    /// creation took: what [`SessionStore::create`] then [`SessionStore::writer`] do, without
    /// locating the new session again, re-taking its lock, re-opening its log or looking for
    /// recovery work in a directory nobody else has written (about 50 syscalls a session).
    /// The files and their durability are those of `create`.
    pub fn create_writer(&self, new: NewSession) -> Result<SessionWriter> {
        let id = SessionId::new(new_uuid())?;
        let (paths, lock, log) = self.create_locked(new, &id)?;
        Ok(SessionWriter::from_created(
            self.clone(),
            id,
            paths,
            lock,
            log,
        ))
    }

    pub(super) fn create_at(&self, new: NewSession, id: &SessionId) -> Result<SessionPaths> {
        self.create_locked(new, id).map(|(paths, _, _)| paths)
    }

    /// Creates the session `id` (directory, lock, empty log, then `meta.json` last) and returns
    /// its paths, the lock (held since before anything was written in the directory) and the
    /// log, open for appending.
    pub(super) fn create_locked(
        &self,
        new: NewSession,
        id: &SessionId,
    ) -> Result<(SessionPaths, SessionLock, File)> {
        let project_dir = self.project_dir_for(&new.project_path)?;
        let paths = SessionPaths {
            dir: project_dir.join(id.as_str()),
        };
        create_dir_exclusive(&paths.dir).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StoreError::AlreadyExists {
                    id: id.to_string(),
                    path: paths.dir.clone(),
                }
            } else {
                StoreError::Io {
                    op: "create directory",
                    path: paths.dir.clone(),
                    source: e,
                }
            }
        })?;
        // Held until meta.json is written (see `fork`), and by `create_writer`'s writer after.
        let making = SessionLock::acquire(&paths.dir, id.as_str(), LockWait::Fail)?;
        let now = self.now();
        let meta = SessionMeta::new(
            id,
            new.title,
            new.project_path,
            new.provider,
            new.model,
            now,
        );
        let log = fsutil::create_new_append(&paths.messages())?;
        // meta.json last: a session is visible to listings only once it is complete.
        write_atomic(&paths.meta(), &meta.to_pretty_json(), self.sync_rewrites())?;
        if self.sync_rewrites() {
            fsutil::sync_dir(&project_dir)?;
        }
        self.note_change(id, &paths.dir);
        Ok((paths, making, log))
    }
}
