//! A pull: the other machines' new records downloaded and opened (all of them before anything
//! here changes), purges and mends from their control records, slots that did not open tried
//! again, records the server lost sent back from the copies kept here; then each session's
//! records applied ([`super::apply`]).

use std::collections::{BTreeMap, BTreeSet};

use freecode_core::SessionId;
use freecode_remote::home_sync::{Chain, HostId, LogId, Put};
use freecode_store::session::SessionStore;

use super::engine::{Engine, Fetched, now_secs, same_but_wrap};
use super::plan::{self, SlotStep};
use super::record::{ControlRecord, SessionRecord};
use super::state::{self};
use crate::error::{Error, Result};
use crate::progress::Progress;

/// Sessions a pull applies past which it syncs the file system once a second instead of
/// fsyncing every file it writes (a first pull: 5.5 → 2.7 s for 2,000 sessions).
pub(super) const BULK_SESSIONS: usize = 32;

impl Engine {
    /// Downloads and applies the other hosts' new records (of `only` that log, if given).
    pub(super) fn pull(&mut self, only: Option<&LogId>, progress: &mut dyn Progress) -> Result<()> {
        let mut logs = self.remote.status()?;
        // Download and open everything first: nothing local changes unless all of it opens.
        // Control logs first: a log purged everywhere is gone from the server, not stale.
        let control = self.key.control_log();
        self.check_copy(&logs)?;
        let (mut controls, purged_logs) = self.controls(&logs)?;
        if only.is_none() && self.refill(&logs, &purged_logs)? {
            logs = self.remote.status()?;
        }
        let plan = plan::pull_plan(&logs, &self.state, self.host, control, &purged_logs, only);
        // A server that holds fewer records than this machine saw (and could not be refilled
        // from the copies kept here) is stale or was rolled back. The counts are a hint (a
        // replica may answer from a listing a second old): the log itself decides.
        for b in &plan.behind {
            if self
                .remote
                .get_records(&b.log, &b.host, b.seen - 1)?
                .0
                .is_empty()
            {
                return Err(Error::Failed(format!(
                    "{} holds {} records of host {}'s log {}, but this machine has seen {}: the \
                     server returned stale or truncated data, so nothing was changed here",
                    self.settings.server, b.count, b.host, b.log, b.seen
                )));
            }
        }
        let mut sessions: BTreeMap<String, Vec<Fetched>> = BTreeMap::new();
        let wanted = plan.fetch;
        progress.step("downloading");
        for (session, f) in self.retry_unopened(only, &purged_logs, &mut controls)? {
            sessions.entry(session).or_default().push(f);
        }
        for (n, lc) in wanted.iter().enumerate() {
            progress.sessions(n, wanted.len());
            for (index, got, sealed) in self.fetch(lc)? {
                match self.session_record(&lc.log, got) {
                    Ok((plain, record)) => {
                        sessions
                            .entry(record.session.clone())
                            .or_default()
                            .push(Fetched {
                                host: lc.host,
                                index,
                                sealed,
                                plain,
                                record,
                                retried: false,
                            });
                    }
                    Err(why) => self.skip(&lc.log, &lc.host, index, &sealed, &why)?,
                }
            }
        }
        // Purges first, and the broken wraps the other machines found mended.
        controls.sort_by_key(|(h, i, _, _)| (*h, *i));
        for (host, index, c, sealed) in controls {
            for id in c.purged {
                self.purge_here(&id)?;
            }
            for slot in &c.unopened {
                self.mend(slot)?;
            }
            self.keep(&control, &host, index, &sealed)?;
            self.state.saw(&control, &host, index + 1);
        }
        self.dirty = true;
        self.flush()?;
        progress.sessions(wanted.len(), wanted.len());
        progress.step("applying");
        let total = sessions.len();
        if total > BULK_SESSIONS && !self.bulk {
            self.bulk = true;
            self.store = SessionStore::with_config(
                self.home.clone(),
                freecode_store::StoreConfig {
                    durability: freecode_store::Durability::Never,
                    ..freecode_store::StoreConfig::default()
                },
            )?;
        }
        for (n, (id, mut records)) in sessions.into_iter().enumerate() {
            progress.sessions(n, total);
            if self.purged.contains(&id) {
                continue;
            }
            records.sort_by_key(|f| (f.host, f.index));
            let id = SessionId::new(&id)?;
            self.apply_session(&id, records)?;
        }
        progress.sessions(total, total);
        // Past the slots that did not open where nothing after them waits.
        for (log, host, next) in plan::past_unopened(&self.state) {
            self.state.saw(&log, &host, next);
            self.dirty = true;
        }
        if only.is_none() {
            self.tell_unopened()?;
        }
        Ok(())
    }

    /// Whether another home writes with this machine's id (a copied home): a record in one of
    /// this host's session logs past what this home pushed, of a session it does not hold or
    /// whose content its files do not hold. Then it takes an id of its own
    /// ([`Engine::become_another_machine`]) before anything is pulled, so what the other
    /// wrote under the old id comes in like any other machine's. A record this home wrote
    /// and lost track of (a push a kill cut short) is its own, and the push adopts it.
    pub(super) fn check_copy(
        &mut self,
        logs: &[freecode_remote::home_sync::LogCount],
    ) -> Result<()> {
        let control = self.key.control_log();
        let me = self.host;
        for lc in logs.iter().filter(|l| l.host == me && l.log != control) {
            let seen = self.state.seen(&lc.log, &me);
            if lc.count <= seen {
                continue;
            }
            let (got, _) = self.remote.get_records(&lc.log, &me, seen)?;
            let Some(sealed) = got.into_iter().next() else {
                continue;
            };
            let opened = self.open_record(&lc.log, &me, seen, &sealed)?;
            // Garbage at this host's index: the push passes it over.
            let Ok((_, rec)) = self.session_record(&lc.log, opened) else {
                continue;
            };
            let id = SessionId::new(&rec.session)?;
            let st = match self.state.sessions.get(id.as_str()) {
                Some(st) => st.clone(),
                None => self.fresh(&id),
            };
            let ours = match self.store.locate(&id) {
                Ok(_) => self.wrote(&id, &st, seen, &sealed, &rec)?,
                Err(freecode_store::StoreError::NotFound { .. }) => false,
                Err(e) => return Err(e.into()),
            };
            if !ours {
                return self.become_another_machine(&id, seen);
            }
        }
        Ok(())
    }

    /// The slots that did not open, tried again (those of `only`, if given; those past
    /// [`state::UNOPENED_FOR`] or [`state::UNOPENED_MAX`], or of logs gone, let go): the
    /// control records that open now join `controls`, the session records are returned by
    /// session.
    #[allow(clippy::type_complexity)]
    pub(super) fn retry_unopened(
        &mut self,
        only: Option<&LogId>,
        purged: &BTreeSet<LogId>,
        controls: &mut Vec<(HostId, u64, ControlRecord, Vec<u8>)>,
    ) -> Result<Vec<(String, Fetched)>> {
        if self.state.unopened.is_empty() {
            return Ok(Vec::new());
        }
        let control = self.key.control_log();
        let mut out = Vec::new();
        for (key, step) in plan::unopened_plan(&self.state, now_secs(), purged, only) {
            let (log, host, index) = match step {
                SlotStep::LetGo => {
                    self.state.unopened.remove(&key);
                    self.dirty = true;
                    continue;
                }
                SlotStep::Leave => continue,
                SlotStep::Retry(log, host, index) => (log, host, index),
            };
            let (got, _) = self.remote.get_records(&log, &host, index)?;
            let Some(sealed) = got.into_iter().next() else {
                // The log is gone from the server (purged, or lost with nothing to refill).
                self.state.unopened.remove(&key);
                self.dirty = true;
                continue;
            };
            if self.kept.get(&log, &host, index)?.as_deref() == Some(&sealed[..]) {
                continue;
            }
            let got = self.open_record(&log, &host, index, &sealed)?;
            if log == control {
                if let Ok(c) = plan::control_record(got) {
                    controls.push((host, index, c, sealed));
                }
            } else if let Ok((plain, record)) = self.session_record(&log, got) {
                out.push((
                    record.session.clone(),
                    Fetched {
                        host,
                        index,
                        sealed,
                        plain,
                        record,
                        retried: true,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// Tells the other machines (one control record) the slots found here that did not open,
    /// so that one keeping a copy of a record whose key wrap was broken on the server mends it.
    pub(super) fn tell_unopened(&mut self) -> Result<()> {
        let me = self.host.to_string();
        let untold: Vec<String> = self
            .state
            .unopened
            .iter()
            .filter(|(k, u)| {
                !u.told && state::parse_slot(k).is_some_and(|(_, host, _)| host.to_string() != me)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if untold.is_empty() {
            return Ok(());
        }
        let told = self.put_control(&ControlRecord {
            purged: Vec::new(),
            unopened: untold.clone(),
            compacted: Vec::new(),
        });
        // A group at its limit (a member filled it: `sync compact` makes room) takes no
        // more: told on a later pull, and this one goes on.
        if let Err(Error::Client(freecode_remote::share::ClientError::Status {
            status: 413, ..
        })) = &told
        {
            tracing::warn!(
                "the group is at its limit on the server: the other machines are told of the \
                 slots that did not open later (`freecode sync compact` removes what never opens)"
            );
            return Ok(());
        }
        told?;
        for k in untold {
            if let Some(u) = self.state.unopened.get_mut(&k) {
                u.told = true;
            }
        }
        self.dirty = true;
        Ok(())
    }

    /// The key wrap that makes `theirs` (slot `index` of `host`'s log `log` on the server,
    /// which does not open) the record `kept` here again: when the copy opens and is the
    /// same bytes but for its wrap. Under this machine's key.
    pub(super) fn wrap_from_kept(
        &self,
        log: &LogId,
        host: &HostId,
        index: u64,
        theirs: &[u8],
        kept: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let Some(kept) = kept else {
            return Ok(None);
        };
        if !same_but_wrap(&kept, theirs) || self.key.open(host, log, index, &kept).is_err() {
            return Ok(None);
        }
        let good = match self.key.rewrap(host, log, index, &kept) {
            Ok(Some(new)) => new,
            Ok(None) => kept,
            Err(_) => return Ok(None),
        };
        Ok(Some(
            good[freecode_remote::home_sync::seal::WRAP_SPAN].to_vec(),
        ))
    }

    /// Mends slot `slot` (another machine could not open it) from the copy kept here, when
    /// the server's record is the kept one with a broken key wrap.
    pub(super) fn mend(&mut self, slot: &str) -> Result<()> {
        let Some((log, host, index)) = state::parse_slot(slot) else {
            return Ok(());
        };
        let Some(kept) = self.kept.get(&log, &host, index)? else {
            return Ok(());
        };
        let (got, _) = self.remote.get_records(&log, &host, index)?;
        let Some(theirs) = got.first() else {
            return Ok(());
        };
        if self.key.open(&host, &log, index, theirs).is_ok() {
            return Ok(());
        }
        if let Some(wrap) = self.wrap_from_kept(&log, &host, index, theirs, Some(kept))?
            && self.remote.rewrap_record(&log, &host, index, &wrap)?
        {
            tracing::info!(%host, %log, index, "mended a broken key wrap from the copy kept here");
            self.report.mended += 1;
        }
        Ok(())
    }

    /// The other hosts' control records this machine has not seen, opened, and the logs
    /// purged (by them or here).
    #[allow(clippy::type_complexity)]
    pub(super) fn controls(
        &mut self,
        logs: &[freecode_remote::home_sync::LogCount],
    ) -> Result<(Vec<(HostId, u64, ControlRecord, Vec<u8>)>, BTreeSet<LogId>)> {
        let control = self.key.control_log();
        let mut controls = Vec::new();
        let me = self.host;
        for lc in logs.iter().filter(|l| l.log == control && l.host != me) {
            for (index, got, sealed) in self.fetch(lc)? {
                match plan::control_record(got) {
                    Ok(c) => controls.push((lc.host, index, c, sealed)),
                    Err(why) => self.skip(&lc.log, &lc.host, index, &sealed, &why)?,
                }
            }
        }
        // What another machine compacted away goes from the copies here first: a refill
        // would send it back.
        for slot in controls.iter().flat_map(|(_, _, c, _)| c.compacted.clone()) {
            self.forget_host_log(&slot)?;
        }
        let purged_logs = plan::purged_logs(
            &self.key,
            controls.iter().map(|(_, _, c, _)| c),
            &self.purged,
        );
        Ok((controls, purged_logs))
    }

    /// Sends the server again, byte for byte, every kept record it no longer holds (a server
    /// that lost its data, or a replica restored from an old copy), each content record's
    /// claim with it; logs purged are not sent. Once per sync; whether anything was sent.
    pub(super) fn refill(
        &mut self,
        logs: &[freecode_remote::home_sync::LogCount],
        purged: &BTreeSet<LogId>,
    ) -> Result<bool> {
        if std::mem::replace(&mut self.refill_checked, true) {
            return Ok(false);
        }
        let control = self.key.control_log();
        let mut sent = false;
        for (log, host, missing) in plan::refill_plan(&self.kept.logs()?, logs, purged) {
            for index in missing {
                let Some(sealed) = self.kept.get(&log, &host, index)? else {
                    break;
                };
                // A slot kept as garbage (passed over) goes back as it was, without a claim.
                let base = (log != control)
                    .then(|| self.key.open(&host, &log, index, &sealed).ok())
                    .flatten()
                    .and_then(|opened| SessionRecord::decode(&opened.plaintext))
                    .and_then(|r| r.base)
                    .and_then(|b| Chain::parse(&b));
                if let Some(base) = base {
                    // Ours, or another's standing: either way the claim names a record.
                    self.claim(&log, &base, &host, index)?;
                }
                if self.remote.put_record(&log, &host, index, &sealed)? == Put::Created {
                    self.report.refilled += 1;
                    self.report.bytes_sent += sealed.len() as u64;
                    sent = true;
                }
            }
        }
        if sent {
            tracing::info!(
                server = %self.settings.server,
                records = self.report.refilled,
                "the server had lost records this machine keeps: sent them again"
            );
        }
        Ok(sent)
    }
}
