//! A session's records applied here, in their chain's order: the session made from its first
//! record's meta, a file's bytes appended or set (bytes already there recognised), a meta
//! merged by `updatedAt`, and this machine's own changes from the same point kept as a fork
//! before the session is cut back to it. A purge from another machine carried out.

use freecode_core::SessionId;
use freecode_remote::home_sync::Chain;
use freecode_store::rollout::{HeldLog, events_path};
use freecode_store::session::NewSession;
use freecode_store::{StoreError, fsutil};

use super::SyncFork;
use super::changes::{fit, local_sessions, mark_of, read_from};
use super::engine::{Engine, Fetched};
use super::plan::{self, Extends, Fit, Pending, whole_lines};
use super::record::{Mode, SessionRecord, What};
use super::state::{self, SessionSync};
use crate::error::{Error, Result};

impl Engine {
    pub(super) fn purge_here(&mut self, id: &str) -> Result<()> {
        self.wrote_local = true;
        if let Ok(sid) = SessionId::new(id) {
            match self.store.purge(&sid) {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            if let Some(st) = self.state.sessions.remove(id) {
                let prefix = format!("{}/", st.log);
                self.state.seen.retain(|k, _| !k.starts_with(&prefix));
            }
            self.kept.remove_log(&self.key.log_id(id))?;
            if self.purged.insert(id.to_owned()) {
                self.report.purged.push(id.to_owned());
            }
        }
        Ok(())
    }

    pub(super) fn apply_session(&mut self, id: &SessionId, records: Vec<Fetched>) -> Result<()> {
        let mut st = match self.state.sessions.get(id.as_str()) {
            Some(st) => st.clone(),
            None => self.fresh(id),
        };
        // Each record's chain point and the one it leads to.
        let pending: Vec<Pending> = records
            .iter()
            .map(|f| Pending {
                host: f.host,
                index: f.index,
                retried: f.retried,
                extends: match f.record.base.as_deref().map(Chain::parse) {
                    None => Extends::Nothing,
                    Some(None) => Extends::Unreadable,
                    Some(Some(from)) => Extends::Point {
                        from,
                        to: self.key.next(&from, &f.plain),
                    },
                },
            })
            .collect();
        let order = plan::apply_order(&self.state, &st.log, st.chain, &pending);
        let forks = self.report.forks.len();
        for &i in &order {
            let f = &records[i];
            let after = pending[i].extends.to();
            match self.apply_record(id, &mut st, f, after)? {
                Applied::Busy => {
                    self.report.busy.push(id.to_string());
                    return Ok(());
                }
                Applied::Done => {}
                Applied::Refused(why) => {
                    // Passed over like a slot that does not open; what follows it waits.
                    self.skip(&st.log, &f.host, f.index, &f.sealed, &why)?;
                    self.flush()?;
                    break;
                }
            }
            self.state.saw(&st.log, &f.host, f.index + 1);
            self.state.sessions.insert(id.to_string(), st.clone());
            self.keep(&st.log, &f.host, f.index, &f.sealed)?;
            if self.report.forks.len() == forks {
                self.save()?;
            } else {
                // A fork made and the session cut back: not to be made twice.
                self.dirty = true;
                self.flush()?;
            }
            self.report.pulled += 1;
        }
        if !order.is_empty() {
            self.report.sessions_pulled += 1;
        }
        Ok(())
    }

    /// A session forked from `id` whose messages are `messages`, byte for byte.
    pub(super) fn existing_fork(
        &self,
        id: &SessionId,
        messages: &[u8],
    ) -> Result<Option<SessionId>> {
        for (other, dir) in local_sessions(&self.store)? {
            let paths = freecode_store::session::SessionPaths { dir };
            let meta = match self.store.meta(&other) {
                Ok(m) => m,
                Err(_) => continue,
            };
            if meta.parent_id.as_deref() == Some(id.as_str())
                && read_from(&paths.messages(), 0)? == messages
            {
                return Ok(Some(other));
            }
        }
        Ok(None)
    }

    /// Session `id`'s messages and rollout log as synced at `st`'s chain point, rebuilt from
    /// the kept records of every host (`None` when a record on the way is not kept).
    pub(super) fn synced_content(
        &self,
        id: &SessionId,
        st: &SessionSync,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut records = Vec::new();
        for (host, index, sealed) in self.kept.of_log(&st.log)? {
            // Slots passed over are kept as the server held them, and do not open.
            let Ok(opened) = self.key.open(&host, &st.log, index, &sealed) else {
                continue;
            };
            if let Some(rec) = SessionRecord::decode(&opened.plaintext) {
                records.push((opened.plaintext, rec));
            }
        }
        let genesis = self.key.genesis(id.as_str());
        Ok(plan::rebuild(genesis, st.chain, records, |c, p| {
            self.key.next(c, p)
        }))
    }

    pub(super) fn apply_record(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        f: &Fetched,
        after: Option<Chain>,
    ) -> Result<Applied> {
        let rec = &f.record;
        self.wrote_local = true;
        // The session, created from the record's meta when this machine does not have it.
        let exists = match self.store.locate(id) {
            Ok(_) => true,
            Err(StoreError::NotFound { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        if !exists {
            let Some(meta) = rec.section(What::Meta) else {
                return Ok(Applied::Refused(
                    "would begin a session here but has no meta".into(),
                ));
            };
            let m = plan::parse_meta(&meta.bytes, id)?;
            let new = || NewSession {
                title: m.title.clone(),
                project_path: m.project_path.clone(),
                provider: m.provider.clone(),
                model: m.model.clone(),
            };
            match self.store.create_with_id(new(), id) {
                Ok(_) => {}
                // A creation cut short (a directory without meta.json that nobody holds): what
                // `doctor --fix` clears, cleared here, then made again.
                Err(StoreError::AlreadyExists { path, .. })
                    if !path.join("meta.json").exists()
                        && freecode_store::lock::holder(&path).is_none() =>
                {
                    fsutil::remove_tree(&path)?;
                    self.store.create_with_id(new(), id)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut writer = match self.store.writer(id) {
            Ok(w) => w,
            Err(StoreError::Locked { .. }) => return Ok(Applied::Busy),
            Err(e) => return Err(e.into()),
        };
        let paths = writer.paths().clone();
        let events = events_path(&self.home, id);
        // The rollout log is held only when there is one, or the record brings one.
        let events_lock = if rec.section(What::Events).is_some() || events.exists() {
            match HeldLog::try_hold(&self.home, id)? {
                Some(l) => Some(l),
                None => return Ok(Applied::Busy),
            }
        } else {
            None
        };
        // Does this machine hold changes of its own from the record's point?
        let mut fits = Vec::new();
        for s in &rec.sections {
            fits.push(match s.head.what {
                What::Messages => fit(&paths.messages(), &st.messages, s)?,
                What::Events => fit(&events, &st.events, s)?,
                What::Meta | What::Memory => Fit::Apply,
            });
        }
        if plan::diverged(&fits) {
            // A fork made by an attempt a kill cut short is the one: same parent, same bytes.
            let local_messages = read_from(&paths.messages(), 0)?;
            let fork = match self.existing_fork(id, whole_lines(&local_messages))? {
                Some(f) => f,
                None => self.store.fork(id, None)?,
            };
            let local_events = read_from(&events, 0)?;
            let fork_events = events_path(&self.home, &fork);
            if !local_events.is_empty() && read_from(&fork_events, 0)? != local_events {
                fsutil::create_dir_private(&self.home.rollout_dir(&fork))?;
                fsutil::write_atomic(&fork_events, &local_events, !self.bulk)?;
            }
            self.report.forks.push(SyncFork {
                session_id: id.to_string(),
                fork_id: fork.to_string(),
            });
            // Back to the point the record extends: cut where the files still hold it, and
            // rebuilt from the kept records where this machine rewrote them (a compaction).
            let cut = [
                (paths.messages(), &st.messages),
                (events.clone(), &st.events),
            ]
            .iter()
            .map(|(file, mark)| Ok(mark.len == 0 || mark_of(file, mark.len)? == **mark))
            .collect::<Result<Vec<bool>>>()?;
            if cut.iter().all(|c| *c) {
                writer.truncate_log(st.messages.len)?;
                if let Some(l) = &events_lock {
                    l.truncate(st.events.len)?;
                }
            } else {
                let Some((msgs, evs)) = self.synced_content(id, st)? else {
                    return Err(Error::Failed(format!(
                        "session {id} was compacted here while another machine continued it: \
                         this machine's version is kept as session {fork}, but the synced \
                         version cannot be rebuilt (its records are not all kept here)"
                    )));
                };
                writer.replace_log_bytes(&msgs)?;
                match &events_lock {
                    Some(l) => l.replace(&evs, !self.bulk)?,
                    None if evs.is_empty() => {}
                    None => {
                        return Err(Error::Internal(format!("{}: not held", events.display())));
                    }
                }
            }
            fits = rec.sections.iter().map(|_| Fit::Apply).collect();
        }
        for (s, fit) in rec.sections.iter().zip(fits) {
            if fit == Fit::Already {
                continue;
            }
            match (s.head.what, s.head.mode) {
                (What::Meta, _) => {
                    let remote = plan::parse_meta(&s.bytes, id)?;
                    let local = writer.meta().ok();
                    let new_here = !exists;
                    let synced = st.meta.is_some();
                    if plan::take_meta(&remote, f.host, local.as_ref(), self.host, new_here, synced)
                    {
                        writer.put_meta_bytes(&s.bytes)?;
                        // Moved to another project there (`session move`): here too.
                        writer.move_dir_to_project(&remote.project_path)?;
                    } else {
                        // Ours is newer: it stays, and goes out with the next push.
                        continue;
                    }
                }
                (What::Memory, _) => {
                    fsutil::create_dir_private(&self.home.memory_dir(id))?;
                    fsutil::write_atomic(&self.home.memory_file(id), &s.bytes, !self.bulk)?;
                }
                (What::Messages, Mode::Append) => writer.append_lines(&s.bytes)?,
                (What::Messages, Mode::Set) => writer.replace_log_bytes(&s.bytes)?,
                (What::Events, mode) => {
                    let Some(l) = &events_lock else {
                        return Err(Error::Internal(format!("{}: not held", events.display())));
                    };
                    if mode == Mode::Append {
                        l.append(&s.bytes, !self.bulk)?;
                    } else {
                        l.replace(&s.bytes, !self.bulk)?;
                    }
                }
            }
        }
        drop(events_lock);
        // Where the session is now (a meta that moved it to another project moved it).
        let paths = writer.paths().clone();
        drop(writer);
        // The meta digest is the record's only when it was taken.
        let before_meta = st.meta.clone();
        let here = self.store.locate(id)?;
        self.advance_by(id, st, after, &rec.sections, &here)?;
        if let Some(meta) = rec.section(What::Meta) {
            let local = fsutil::read_bounded(
                &paths.meta(),
                freecode_store::session::META_MAX_BYTES,
                "meta.json",
            )?
            .unwrap_or_default();
            st.meta = if local == meta.bytes {
                Some(state::digest(&meta.bytes))
            } else {
                before_meta
            };
        }
        Ok(Applied::Done)
    }
}

pub(super) enum Applied {
    Done,
    /// Another machine holds the session: tried again by the next sync.
    Busy,
    /// Not a record this machine can apply (why): passed over.
    Refused(String),
}
