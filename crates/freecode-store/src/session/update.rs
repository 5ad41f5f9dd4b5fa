//! Changing sessions, each under the session's writer: appends, meta updates, moves, status
//! (archive, delete, restore), purge, fork, resume, compaction, the context cache, and the
//! recovery of a compaction a crash cut short.

use std::fs;
use std::path::{Path, PathBuf};

use freecode_core::context_cache::ContextCache;
use freecode_core::meta::IMPORTED_FROM;
use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, create_dir_exclusive, create_dir_private, write_atomic};
use crate::lock::{LockWait, SessionLock};

use super::offsets;
use super::{
    CONTEXT_CACHE_MAX_BYTES, CompactionOutcome, SessionContext, SessionPaths, SessionStore,
    SessionWriter, copy_complete_lines, new_uuid, read_meta_file,
};

impl SessionStore {
    /// Takes the session's write lock and opens it for appending. A session still in a
    /// directory an earlier version named (`esc-…`/`h-…`) where the original can find it under
    /// its own name is moved there first, under the lock ([`SessionWriter::move_to_current_dir`]).
    pub fn writer(&self, id: &SessionId) -> Result<SessionWriter> {
        let mut tries = 0;
        loop {
            let paths = self.locate(id)?;
            match SessionWriter::open(self.clone(), id.clone(), paths) {
                Ok(mut w) => {
                    w.move_to_current_dir()?;
                    return Ok(w);
                }
                // Another writer moved the session while this one waited for its lock: the
                // directory found is gone; find it again.
                Err(e) if tries < 3 && e.is_not_found() => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs a read on a located session, locating it again once if it was moved in between
    /// (a writer moving it to its current directory).
    pub(super) fn read_located<T>(
        &self,
        id: &SessionId,
        read: impl Fn(&SessionPaths) -> Result<T>,
    ) -> Result<T> {
        let paths = self.locate(id)?;
        match read(&paths) {
            Err(e) if e.is_not_found() && !paths.dir.exists() => read(&self.locate(id)?),
            r => r,
        }
    }

    /// Appends one message (taking and releasing the lock).
    pub fn append(&self, id: &SessionId, msg: &StoredMessage) -> Result<()> {
        self.writer(id)?.append(msg)
    }

    /// Updates the meta; `id` and `createdAt` cannot change, `updatedAt` is set to now.
    pub fn update_meta(
        &self,
        id: &SessionId,
        f: impl FnOnce(&mut SessionMeta),
    ) -> Result<SessionMeta> {
        self.writer(id)?.update_meta(f)
    }

    /// Moves a session to another project, keeping its id (see
    /// [`SessionWriter::move_to_project`]); `project_path` must be absolute and in normal form.
    pub fn move_to_project(&self, id: &SessionId, project_path: &str) -> Result<SessionMeta> {
        self.writer(id)?.move_to_project(project_path)
    }

    /// Sets the status.
    pub fn set_status(&self, id: &SessionId, status: SessionStatus) -> Result<SessionMeta> {
        self.update_meta(id, |m| m.status = status)
    }

    /// Soft delete: status `deleted`, files stay (SPEC §8.8).
    pub fn delete(&self, id: &SessionId) -> Result<SessionMeta> {
        self.set_status(id, SessionStatus::Deleted)
    }

    /// Archive.
    pub fn archive(&self, id: &SessionId) -> Result<SessionMeta> {
        self.set_status(id, SessionStatus::Archived)
    }

    /// Undo a soft delete or an archive: status back to `active`.
    pub fn restore(&self, id: &SessionId) -> Result<SessionMeta> {
        self.set_status(id, SessionStatus::Active)
    }

    /// Erases a session: its directory, its rollout log and its compaction memory — nothing
    /// else. Returns the paths removed. A purge interrupted by a crash (the directory already
    /// renamed to `.purge-<id>-…`) is finished by purging again.
    pub fn purge(&self, id: &SessionId) -> Result<Vec<PathBuf>> {
        let leftovers = self.purge_leftovers(id)?;
        let mut removed = Vec::new();
        let mut parents = Vec::new();
        match self.writer(id) {
            Ok(writer) => {
                let dir = writer.paths.dir.clone();
                let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                // Take the directory out of sight first: a crash mid-removal leaves no half
                // session, and the next purge finds the renamed directory.
                let doomed = parent.join(format!(".purge-{id}-{}", new_uuid()));
                fsutil::rename(&dir, &doomed)?;
                fsutil::sync_dir(&parent)?;
                drop(writer);
                fsutil::remove_tree(&doomed)?;
                self.note_change(id, &dir);
                removed.push(dir);
                parents.push(parent);
            }
            Err(StoreError::NotFound { .. }) if !leftovers.is_empty() => {}
            Err(e) => return Err(e),
        }
        for doomed in leftovers {
            fsutil::remove_tree(&doomed)?;
            parents.extend(doomed.parent().map(Path::to_path_buf));
            removed.push(doomed);
        }
        for extra in [self.home.rollout_dir(id), self.home.memory_dir(id)] {
            if fsutil::remove_tree(&extra)? {
                removed.push(extra);
            }
        }
        // Derived, but it hashes some of the log's bytes: it goes with the session.
        let offsets = offsets::index_path(&self.home, id);
        if fsutil::remove_file(&offsets)? {
            removed.push(offsets);
        }
        // The same for the rollout log's fold checkpoints (they hold the trace's spans).
        let folds = crate::rollout::checkpoint::dir(&self.home, id);
        if fsutil::remove_tree(&folds)? {
            removed.push(folds);
        }
        for parent in parents {
            fsutil::sync_dir(&parent)?;
        }
        Ok(removed)
    }

    /// Directories `sessions/*/.purge-<id>-*` left by a purge that did not finish.
    pub(super) fn purge_leftovers(&self, id: &SessionId) -> Result<Vec<PathBuf>> {
        let sessions = self.home.sessions_dir();
        let prefix = format!(".purge-{id}-");
        let mut found = Vec::new();
        let Ok(projects) = fs::read_dir(&sessions) else {
            return Ok(found);
        };
        for project in projects.filter_map(|e| e.ok()) {
            if project.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let Ok(children) = fs::read_dir(project.path()) else {
                continue;
            };
            for child in children.filter_map(|e| e.ok()) {
                let name = child.file_name();
                // The suffix is a UUID; the id before it is validated, so the prefix is exact.
                if name
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix) && n.len() == prefix.len() + 36)
                {
                    found.push(child.path());
                }
            }
        }
        Ok(found)
    }

    /// Forks a session: a full copy under a new id, with `parentId`, the parent's `turnCount`,
    /// its context cache and its compaction summary. The log is copied as a file, not
    /// re-appended; a torn tail of the parent is not copied.
    pub fn fork(&self, id: &SessionId, new_project_path: Option<&str>) -> Result<SessionId> {
        let src = self.locate(id)?;
        let parent = read_meta_file(&src.meta())?;
        if parent.is_deleted() {
            return Err(StoreError::NotFound { id: id.to_string() });
        }
        let project_path = new_project_path
            .filter(|p| !p.is_empty())
            .unwrap_or(&parent.project_path)
            .to_owned();
        let new_id = SessionId::new(new_uuid())?;
        let project_dir = self.project_dir_for(&project_path)?;
        let dst = SessionPaths {
            dir: project_dir.join(new_id.as_str()),
        };
        create_dir_exclusive(&dst.dir).ctx("create directory", &dst.dir)?;
        // Held until the fork's meta.json is written: a fork cut short by a crash is a
        // directory without meta.json that no process holds, which `freecode doctor` clears.
        let _making = SessionLock::acquire(&dst.dir, new_id.as_str(), LockWait::Fail)?;
        copy_complete_lines(&src.messages(), &dst.messages())?;
        if let Some(cache) = fsutil::read_bounded(
            &src.context_cache(),
            CONTEXT_CACHE_MAX_BYTES,
            "context-cache.json",
        )? {
            write_atomic(&dst.context_cache(), &cache, false)?;
        }
        if let Some(memory) = self.compaction_memory(id)? {
            let path = self.home.memory_file(&new_id);
            create_dir_private(&self.home.memory_dir(&new_id))?;
            let bytes =
                serde_json::to_vec_pretty(&memory.for_session(new_id.as_str())).unwrap_or_default();
            write_atomic(&path, &bytes, self.sync_rewrites())?;
        }
        let now = self.now();
        let mut meta = SessionMeta::new(
            &new_id,
            format!("{} (fork)", parent.title),
            project_path,
            parent.provider.clone(),
            parent.model.clone(),
            now,
        );
        meta.parent_id = Some(id.to_string());
        meta.turn_count = parent.turn_count;
        if parent.project_path_from_bundle()
            && meta.project_path == parent.project_path
            && let Some(from) = parent.imported_from()
        {
            // The path is still an older import's bundle path: the fork keeps the mark, so it
            // never becomes the tools' root either.
            meta.extra.insert(IMPORTED_FROM.to_owned(), from.clone());
        }
        if self.sync_rewrites() {
            fsutil::open_read(&dst.messages())
                .and_then(|f| fsutil::sync_file(&f, &dst.messages(), true))
                .ctx("fsync", dst.messages())?;
        }
        write_atomic(&dst.meta(), &meta.to_pretty_json(), self.sync_rewrites())?;
        if self.sync_rewrites() {
            fsutil::sync_dir(&project_dir)?;
        }
        self.note_change(&new_id, &dst.dir);
        Ok(new_id)
    }

    /// Resumes a session (not a deleted one): see [`SessionWriter::resume`].
    pub fn resume(&self, id: &SessionId) -> Result<SessionContext> {
        self.writer(id)?.resume()
    }

    /// Compaction: see [`SessionWriter::compact`].
    pub fn compact(
        &self,
        id: &SessionId,
        keep_user_turns: usize,
        summary: &str,
    ) -> Result<CompactionOutcome> {
        self.writer(id)?.compact(keep_user_turns, summary, None)
    }

    /// Writes the context cache (pretty, atomic).
    pub fn set_context_cache(&self, id: &SessionId, cache: &ContextCache) -> Result<()> {
        let w = self.writer(id)?;
        let bytes = serde_json::to_vec_pretty(cache).unwrap_or_default();
        write_atomic(&w.paths.context_cache(), &bytes, self.sync_rewrites())
    }

    /// Removes the context cache.
    pub fn clear_context_cache(&self, id: &SessionId) -> Result<()> {
        let w = self.writer(id)?;
        let path = w.paths.context_cache();
        fsutil::remove_file(&path).map(drop)
    }

    /// Completes a compaction interrupted by a crash, if one is pending and nobody holds the
    /// session (a writer does this itself when it opens).
    pub(super) fn recover_if_needed(&self, id: &SessionId, paths: &SessionPaths) {
        if paths.journal().exists()
            && let Ok(w) = SessionWriter::open(self.clone(), id.clone(), paths.clone())
        {
            drop(w);
        }
    }
}
