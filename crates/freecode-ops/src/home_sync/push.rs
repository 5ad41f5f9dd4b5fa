//! A push: the sessions that changed here, each change as records sealed and stored in this
//! machine's log of the session after a claim on the chain point it extends (many sessions to
//! a request when each is one record), the sessions purged here purged everywhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_remote::home_sync::{Chain, Kind, Put};
use freecode_store::StoreError;

use super::changes::{excluded, local_sessions};
use super::engine::{CLAIM_SLOTS, Claim, Engine};
use super::plan::{self, Changes, ClaimSeen, record_at, records_of};
use super::record::{ControlRecord, Section, What};
use super::state::SessionSync;
use super::{SkippedRecord, seal_err};
use crate::error::{Error, Result};
use crate::progress::Progress;

/// Sessions a batched push plans, seals and sends at a time (two requests each window).
pub(super) const BATCH_SESSIONS: usize = 256;

impl Engine {
    pub(super) fn push(&mut self, progress: &mut dyn Progress) -> Result<()> {
        let local = local_sessions(&self.store)?;
        let excluded = excluded(&self.home)?;
        // The sessions that changed, found while the server's counts come: what it lost goes
        // back first, since this host's next records follow it.
        let (status, changed) = std::thread::scope(|scope| {
            let remote = &self.remote;
            let status = (!self.refill_checked).then(|| scope.spawn(move || remote.status()));
            let mut changed = Vec::new();
            for (id, dir) in &local {
                if self.purged.contains(id.as_str()) {
                    continue;
                }
                match self.is_excluded(id, &excluded) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => return (status.map(|h| h.join()), Err(e)),
                }
                // A session that cannot be read is tried, to report why.
                let st = self.state.sessions.get(id.as_str());
                if st.is_none_or(|st| self.changes(id, dir, st).map_or(true, |c| !c.is_empty())) {
                    changed.push((id, dir));
                }
            }
            (status.map(|h| h.join()), Ok(changed))
        });
        if let Some(status) = status {
            let logs =
                status.map_err(|_| Error::Internal("the status request panicked".into()))??;
            let (_, purged) = self.controls(&logs)?;
            self.refill(&logs, &purged)?;
        }
        let changed = changed?;
        self.push_purges(&local)?;
        let total = changed.len();
        progress.step("uploading");
        // Sessions whose change is one record go many to a request; the rest (and any a
        // batch could not settle) one by one.
        let mut alone = Vec::new();
        let mut done = 0;
        for window in changed.chunks(BATCH_SESSIONS) {
            progress.sessions(done, total);
            alone.extend(self.push_batch(window)?);
            done += window.len();
        }
        let batched = total - alone.len();
        for (n, (id, dir)) in alone.into_iter().enumerate() {
            progress.sessions(batched + n, total);
            self.push_session(id, dir)?;
        }
        progress.sessions(total, total);
        Ok(())
    }

    /// Pushes the sessions of `window` whose change is one record: their claims in one
    /// batch, then the records whose claims stand in another. The sessions left (more than
    /// one record, a claim lost, a record found there) are returned for [`Engine::push_session`].
    pub(super) fn push_batch<'a>(
        &mut self,
        window: &[(&'a SessionId, &'a PathBuf)],
    ) -> Result<Vec<(&'a SessionId, &'a PathBuf)>> {
        struct Planned<'a> {
            id: &'a SessionId,
            dir: &'a PathBuf,
            st: SessionSync,
            after: Option<Chain>,
            sections: Vec<Section>,
            claim: Option<Vec<u8>>,
            sealed: Vec<u8>,
        }
        let mut alone = Vec::new();
        let mut planned = Vec::new();
        for &(id, dir) in window {
            let st = match self.state.sessions.get(id.as_str()) {
                Some(st) => st.clone(),
                None => self.fresh(id),
            };
            let changes = match self.changes(id, dir, &st) {
                Ok(c) if c.is_empty() => continue,
                Ok(c) => c,
                // Unreadable or gone: the one-by-one path says why, or skips it.
                Err(_) => {
                    alone.push((id, dir));
                    continue;
                }
            };
            let mut records = records_of(changes);
            if records.len() != 1 {
                alone.push((id, dir));
                continue;
            }
            let (rec, content) = record_at(id, &st, records.pop().unwrap_or_default());
            let plain = rec.encode();
            let claim = if content {
                Some(
                    self.key
                        .seal_claim(&st.log, &st.chain, &self.host, st.next)
                        .map_err(seal_err)?,
                )
            } else {
                None
            };
            let sealed = self
                .key
                .seal(Kind::Session, &self.host, &st.log, st.next, &plain)
                .map_err(seal_err)?;
            let after = content.then(|| self.key.next(&st.chain, &plain));
            // What advancing needs of the sections: their heads, and a meta's or memory's bytes.
            let sections = rec
                .sections
                .into_iter()
                .map(|mut s| {
                    if matches!(s.head.what, What::Messages | What::Events) {
                        s.bytes = Vec::new();
                    }
                    s
                })
                .collect();
            planned.push(Planned {
                id,
                dir,
                st,
                after,
                sections,
                claim,
                sealed,
            });
        }
        // The claims, then the records whose claim is this machine's.
        let claims: Vec<freecode_remote::home_sync::BatchItem<'_>> = planned
            .iter()
            .filter_map(|p| {
                p.claim
                    .as_deref()
                    .map(|sealed| freecode_remote::home_sync::BatchItem::Claim {
                        log: &p.st.log,
                        base: &p.st.chain,
                        sealed,
                    })
            })
            .collect();
        let mut answers = self.remote.batch(&claims)?.into_iter();
        let mut ours = Vec::with_capacity(planned.len());
        for p in &planned {
            let won = match (&p.claim, answers.next()) {
                (None, _) => true,
                (Some(_), Some(freecode_remote::home_sync::BatchAnswer::Created)) => true,
                (Some(_), Some(freecode_remote::home_sync::BatchAnswer::Exists(theirs))) => {
                    let opened = self.key.open_claim(&p.st.log, &p.st.chain, &theirs).ok();
                    plan::claim_seen(opened, self.host, p.st.next) == ClaimSeen::Ours
                }
                (Some(_), _) => false,
            };
            ours.push(won);
        }
        let records: Vec<freecode_remote::home_sync::BatchItem<'_>> = planned
            .iter()
            .zip(&ours)
            .filter(|(_, won)| **won)
            .map(|(p, _)| freecode_remote::home_sync::BatchItem::Record {
                log: &p.st.log,
                host: &self.host,
                index: p.st.next,
                sealed: &p.sealed,
            })
            .collect();
        let answers = self.remote.batch(&records)?;
        let mut answers = answers.into_iter();
        for (p, won) in planned.into_iter().zip(ours) {
            let created = won
                && matches!(
                    answers.next(),
                    Some(freecode_remote::home_sync::BatchAnswer::Created)
                );
            if !created {
                alone.push((p.id, p.dir));
                continue;
            }
            let mut st = p.st;
            let index = st.next;
            self.report.pushed += 1;
            self.report.sessions_pushed += 1;
            self.report.bytes_sent += (p.sealed.len() + p.claim.map_or(0, |c| c.len())) as u64;
            self.kept.put(&st.log, &self.host, index, &p.sealed)?;
            st.next = index + 1;
            self.state.saw(&st.log, &self.host, index + 1);
            let paths = freecode_store::session::SessionPaths { dir: p.dir.clone() };
            self.advance_by(p.id, &mut st, p.after, &p.sections, &paths)?;
        }
        Ok(alone)
    }

    pub(super) fn push_session(&mut self, id: &SessionId, dir: &Path) -> Result<()> {
        let mut pushed_any = false;
        // Each pass pushes what changed; a lost claim pulls the session (making a fork of
        // this machine's changes) and tries again. A record found stored (its progress lost
        // to a kill) is adopted and the pass starts again from it: each such pass moves on
        // by one record, so only lost claims are counted.
        let mut lost = 0;
        loop {
            let mut st = match self.state.sessions.get(id.as_str()) {
                Some(st) => st.clone(),
                None => self.fresh(id),
            };
            let changes = match self.changes(id, dir, &st) {
                Ok(c) => c,
                Err(Error::Store(StoreError::NotFound { .. })) => return Ok(()),
                Err(e) => return Err(e),
            };
            if changes.is_empty() {
                break;
            }
            match self.push_changes(id, &mut st, changes)? {
                Pushed::Done => {
                    pushed_any = true;
                    break;
                }
                Pushed::Again => pushed_any = true,
                Pushed::Lost if lost < 4 => {
                    lost += 1;
                    let log = st.log;
                    self.pull(Some(&log), &mut crate::progress::Silent)?;
                }
                Pushed::Lost => {
                    tracing::warn!(
                        "session {id}'s changes were not pushed: its next chain point is \
                         claimed by another machine whose record has not come (it waits for \
                         it, 15 minutes at most, then pushes past it)"
                    );
                    break;
                }
            }
        }
        if pushed_any {
            self.report.sessions_pushed += 1;
        }
        Ok(())
    }

    pub(super) fn push_changes(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        c: Changes,
    ) -> Result<Pushed> {
        for sections in records_of(c) {
            let (rec, content) = record_at(id, st, sections);
            let plain = rec.encode();
            let index = st.next;
            if content {
                let me = self.host;
                match self.claim(&st.log, &st.chain, &me, index)? {
                    Claim::Ours => {}
                    Claim::Theirs => return Ok(Pushed::Lost),
                    Claim::Wedged => {
                        self.report.skipped.push(SkippedRecord {
                            host: self.host.to_string(),
                            log: st.log.to_string(),
                            index,
                            why: format!(
                                "would be session {id}'s next, not pushed: all {CLAIM_SLOTS} \
                                 claim slots of its chain point hold claims that do not open or \
                                 name no record"
                            ),
                        });
                        return Ok(Pushed::Done);
                    }
                }
            }
            let sealed = self
                .key
                .seal(Kind::Session, &self.host, &st.log, index, &plain)
                .map_err(seal_err)?;
            match self
                .remote
                .put_record(&st.log, &self.host, index, &sealed)?
            {
                Put::Created => {
                    self.report.pushed += 1;
                    self.report.bytes_sent += sealed.len() as u64;
                    self.kept.put(&st.log, &self.host, index, &sealed)?;
                    st.next = index + 1;
                    self.state.saw(&st.log, &self.host, index + 1);
                    self.advance(id, st, &rec, &plain)?;
                }
                Put::Exists => {
                    // Stored by an attempt whose progress was not saved: take it as pushed.
                    // Anything else there (a member's garbage at this machine's next index)
                    // is passed over, and the record goes to the next free one.
                    let (got, _) = self.remote.get_records(&st.log, &self.host, index)?;
                    let first = got.into_iter().next().ok_or_else(|| {
                        Error::Failed(format!("the server lost record {index} of log {}", st.log))
                    })?;
                    let me = self.host;
                    let got = self.open_record(&st.log, &me, index, &first)?;
                    let ours = self
                        .session_record(&st.log, got)
                        .and_then(|(plain, r)| plan::adopt(&r, id, &st.chain).map(|()| (plain, r)));
                    // Of this session and from its chain point, but bytes this home did not
                    // write (neither its kept copy nor what its files hold): another home
                    // with this machine's id (a copied home) wrote it. This one takes an id of
                    // its own, and its turns go out as its own after the other's come in.
                    if let Ok((_, theirs)) = &ours
                        && !self.wrote(id, st, index, &first, theirs)?
                    {
                        self.become_another_machine(id, index)?;
                        return Ok(Pushed::Lost);
                    }
                    st.next = index + 1;
                    self.state.saw(&st.log, &self.host, index + 1);
                    match ours {
                        Ok((plain, theirs)) => {
                            self.kept.put(&st.log, &self.host, index, &first)?;
                            self.advance(id, st, &theirs, &plain)?;
                        }
                        // Kept as the server holds it (a refill puts it back where it was);
                        // never tried again: nothing but a key wrap changes a stored record.
                        Err(why) => {
                            self.kept.put(&st.log, &self.host, index, &first)?;
                            self.report.skipped.push(SkippedRecord {
                                host: self.host.to_string(),
                                log: st.log.to_string(),
                                index,
                                why,
                            });
                            self.state.sessions.insert(id.to_string(), st.clone());
                            self.save()?;
                        }
                    }
                    return Ok(Pushed::Again);
                }
            }
        }
        Ok(Pushed::Done)
    }

    /// Whether record `index` of this host's log of session `id` (stored as `sealed`,
    /// decoded as `rec`) is one this home wrote: its kept copy, or a record whose messages
    /// and rollout lines this home's files hold where it puts them (a push whose progress a
    /// kill lost). A record that changes neither is taken as written (it cannot tear a file).
    pub(super) fn wrote(
        &self,
        id: &SessionId,
        st: &SessionSync,
        index: u64,
        sealed: &[u8],
        rec: &super::record::SessionRecord,
    ) -> Result<bool> {
        if self.kept.get(&st.log, &self.host, index)?.as_deref() == Some(sealed) {
            return Ok(true);
        }
        let messages = self.store.locate(id)?.messages();
        let events = freecode_store::rollout::events_path(&self.home, id);
        for s in &rec.sections {
            let held = match s.head.what {
                What::Messages => super::changes::fit(&messages, &st.messages, s)?,
                What::Events => super::changes::fit(&events, &st.events, s)?,
                What::Meta | What::Memory => continue,
            };
            if held != plan::Fit::Already {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub(super) fn push_purges(&mut self, local: &BTreeMap<SessionId, PathBuf>) -> Result<()> {
        // Missing from the listing, and confirmed missing by a lookup.
        let gone: Vec<String> = plan::gone(self.state.sessions.keys(), local)
            .into_iter()
            .filter(|id| {
                SessionId::new(id.as_str()).is_ok_and(|id| {
                    matches!(self.store.locate(&id), Err(StoreError::NotFound { .. }))
                })
            })
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        self.put_control(&ControlRecord {
            purged: gone.clone(),
            unopened: Vec::new(),
            compacted: Vec::new(),
        })?;
        for id in &gone {
            if let Some(st) = self.state.sessions.get(id) {
                self.remote.delete_log(&st.log)?;
                self.kept.remove_log(&st.log)?;
                let prefix = format!("{}/", st.log);
                self.state.seen.retain(|k, _| !k.starts_with(&prefix));
            }
            self.state.sessions.remove(id);
            self.purged.insert(id.clone());
            self.report.purged.push(id.clone());
        }
        self.dirty = true;
        self.flush()
    }
}

pub(super) enum Pushed {
    Done,
    Again,
    Lost,
}
