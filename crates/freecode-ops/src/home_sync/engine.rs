//! The engine a push, a pull or a rotation runs in: the key, the server, the progress
//! (`state.json`, saved at most every [`SAVE_EVERY`], and whenever a change here cannot be
//! found again), the copies of every record kept here; and the steps push and pull share:
//! records fetched and opened, slots that do not open passed over, a chain point claimed, a
//! session's sync state advanced, a control record stored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use freecode_core::SessionId;
use freecode_remote::home_sync::{
    Chain, Claimed, HostId, Kind, LogId, Put, Remote, SealError, SyncKey,
};
use freecode_store::rollout::events_path;
use freecode_store::session::SessionStore;
use freecode_store::{Home, StoreError, fsutil};

use super::changes::{change_of, mark_of};
use super::kept::Kept;
use super::plan::{self, Changes, ClaimSeen, Got};
use super::record::{ControlRecord, Mode, Section, SessionRecord, What};
use super::state::{self, Mark, SessionSync, State};
use super::{SkippedRecord, SyncReport, remote_for, seal_err};
use crate::error::{Error, Result};

/// How often a push or a pull writes its progress (`state.json`, rewritten whole): after every
/// record, the first sync of a big home would be quadratic in its sessions.
pub(super) const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

pub(super) struct Engine {
    pub(super) home: Home,
    pub(super) store: SessionStore,
    pub(super) key: SyncKey,
    pub(super) host: HostId,
    pub(super) settings: state::Settings,
    pub(super) remote: Remote,
    pub(super) state: State,
    pub(super) purged: BTreeSet<String>,
    pub(super) report: SyncReport,
    /// Every record pushed or applied, as sealed.
    pub(super) kept: Kept,
    /// Whether this sync compared the kept records with the server's.
    pub(super) refill_checked: bool,
    /// Key ids this key does not open, and whether each is a rotation of the group's key.
    pub(super) foreign_keys: BTreeMap<String, bool>,
    /// Progress noted and not written yet.
    pub(super) dirty: bool,
    /// Session files written (by a pull) since the file system was last synced.
    pub(super) wrote_local: bool,
    /// A big pull: its writes skip their own fsyncs, and one `syncfs` makes them durable
    /// before the progress naming them is saved.
    pub(super) bulk: bool,
    pub(super) saved_at: std::time::Instant,
}

/// A record downloaded and opened.
pub(super) struct Fetched {
    pub(super) host: HostId,
    pub(super) index: u64,
    pub(super) sealed: Vec<u8>,
    pub(super) plain: Vec<u8>,
    pub(super) record: SessionRecord,
    /// A slot that did not open before, opening now (its wrap mended): applied where its
    /// chain point allows, out of its host's order.
    pub(super) retried: bool,
}

/// Seconds since the epoch.
pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether two sealed records are the same but for their key wraps.
pub(super) fn same_but_wrap(a: &[u8], b: &[u8]) -> bool {
    use freecode_remote::home_sync::seal::WRAP_SPAN;
    a.len() == b.len()
        && a.len() > WRAP_SPAN.end
        && a[..WRAP_SPAN.start] == b[..WRAP_SPAN.start]
        && a[WRAP_SPAN.end..] == b[WRAP_SPAN.end..]
}

impl Engine {
    pub(super) fn open(home: &Home) -> Result<Self> {
        let loaded = state::load(home)?;
        let remote = remote_for(home, &loaded.settings.server, &loaded.key)?;
        let st = state::load_state(home)?;
        Ok(Self {
            home: home.clone(),
            store: SessionStore::open(home.clone())?,
            host: loaded.settings.host,
            key: loaded.key,
            settings: loaded.settings,
            remote,
            purged: st.purged.clone(),
            state: st,
            report: SyncReport::default(),
            kept: Kept::open(home)?,
            refill_checked: false,
            foreign_keys: BTreeMap::new(),
            dirty: false,
            wrote_local: false,
            bulk: false,
            saved_at: std::time::Instant::now(),
        })
    }

    /// Notes progress; written at most every [`SAVE_EVERY`] (see [`Engine::flush`]). Progress
    /// lost to a kill is found again: a record stored at this host's index is adopted, one
    /// applied twice is recognised.
    pub(super) fn save(&mut self) -> Result<()> {
        self.dirty = true;
        if self.saved_at.elapsed() >= SAVE_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the progress noted (after every local change that cannot be found again, and
    /// at the end of every push and pull, failed ones included).
    pub(super) fn flush(&mut self) -> Result<()> {
        // The copies first: progress never names a record that is not kept.
        self.kept.commit()?;
        if self.dirty {
            // And never a change to a session that is not on the disk.
            if std::mem::take(&mut self.wrote_local) && self.bulk {
                fsutil::sync_filesystem(self.home.root())
                    .map_err(Error::io("sync the file system of", self.home.root()))?;
            }
            self.state.purged = self.purged.clone();
            state::save_state(&self.home, &self.state)?;
            self.dirty = false;
        }
        self.saved_at = std::time::Instant::now();
        Ok(())
    }

    /// `r`, after the progress is written (the first error wins).
    pub(super) fn finish<T>(&mut self, r: Result<T>) -> Result<T> {
        let saved = self.flush();
        let v = r.map_err(|e| super::rotated_out(e, &self.key, &self.settings.server))?;
        saved?;
        Ok(v)
    }

    pub(super) fn fresh(&self, id: &SessionId) -> SessionSync {
        let log = self.key.log_id(id.as_str());
        SessionSync {
            log,
            chain: self.key.genesis(id.as_str()),
            messages: Mark::default(),
            events: Mark::default(),
            meta: None,
            memory: None,
            next: self.state.seen(&log, &self.host),
        }
    }

    /// Whether session `id`'s project matches `sync.exclude`.
    pub(super) fn is_excluded(&self, id: &SessionId, excluded: &globset::GlobSet) -> Result<bool> {
        if excluded.is_empty() {
            return Ok(false);
        }
        match self.store.meta(id) {
            Ok(m) => Ok(excluded.is_match(&m.project_path)),
            Err(StoreError::NotFound { .. }) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// What changed in session `id` since `st`.
    pub(super) fn changes(&self, id: &SessionId, dir: &Path, st: &SessionSync) -> Result<Changes> {
        let paths = freecode_store::session::SessionPaths {
            dir: dir.to_owned(),
        };
        if !paths.meta().is_file() {
            return Err(StoreError::NotFound { id: id.to_string() }.into());
        }
        let meta = fsutil::read_bounded(
            &paths.meta(),
            freecode_store::session::META_MAX_BYTES,
            "meta.json",
        )?
        .unwrap_or_default();
        let memory = fsutil::read_bounded(
            &self.home.memory_file(id),
            freecode_store::session::MEMORY_MAX_BYTES,
            "memory.json",
        )?;
        Ok(Changes {
            meta: (st.meta.as_deref() != Some(&state::digest(&meta))).then_some(meta),
            memory: memory.filter(|m| st.memory.as_deref() != Some(&state::digest(m))),
            messages: change_of(&paths.messages(), &st.messages)?,
            events: change_of(&events_path(&self.home, id), &st.events)?,
        })
    }

    /// `st` after `rec` (pushed from or applied to this machine's files); saved.
    pub(super) fn advance(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        rec: &SessionRecord,
        plain: &[u8],
    ) -> Result<()> {
        let after = rec.base.is_some().then(|| self.key.next(&st.chain, plain));
        let paths = self.store.locate(id)?;
        self.advance_by(id, st, after, &rec.sections, &paths)
    }

    /// `st` after a record of `sections` (a meta's and a memory's bytes read, the files' only
    /// their heads) that moves the chain to `after`; saved.
    pub(super) fn advance_by(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        after: Option<Chain>,
        sections: &[Section],
        paths: &freecode_store::session::SessionPaths,
    ) -> Result<()> {
        if let Some(c) = after {
            st.chain = c;
        }
        for s in sections {
            let end = match s.head.mode {
                Mode::Set => s.head.len,
                Mode::Append => s.head.from + s.head.len,
            };
            match s.head.what {
                What::Meta => st.meta = Some(state::digest(&s.bytes)),
                What::Memory => st.memory = Some(state::digest(&s.bytes)),
                What::Messages => st.messages = mark_of(&paths.messages(), end)?,
                What::Events => st.events = mark_of(&events_path(&self.home, id), end)?,
            }
        }
        self.state.sessions.insert(id.to_string(), st.clone());
        self.save()
    }

    /// This home holds another home's machine id (it was copied: a restored backup, a cloned
    /// VM, a laptop set up from another's home), found by a record of session `id` at its
    /// next index `index` that it did not write. It takes an id of its own: its logs start
    /// again at index 0, and the old id's logs become another machine's, pulled like any
    /// other (the records both wrote under it each stay where they are; a session both
    /// continued becomes a fork here). The progress is written before the new id, so a kill
    /// between the two finds the copy again.
    pub(super) fn become_another_machine(&mut self, id: &SessionId, index: u64) -> Result<()> {
        let old = self.host;
        let new = HostId::generate().map_err(seal_err)?;
        for st in self.state.sessions.values_mut() {
            st.next = 0;
        }
        self.state.control_next = 0;
        self.dirty = true;
        self.flush()?;
        self.settings.host = new;
        self.host = new;
        state::save_key(&self.home, &self.settings, &self.key)?;
        tracing::warn!(
            "this home is a copy of another machine's (both had machine id {old}: record {index} \
             of session {id} there is not one this home wrote): it is now machine {new}, and \
             its turns go to the group as its own; a session both continued is kept here as a \
             fork"
        );
        self.report.new_host = Some(super::SyncNewHost {
            was: old.to_string(),
            now: new.to_string(),
        });
        Ok(())
    }

    /// Stores `c` as this host's next control record.
    pub(super) fn put_control(&mut self, c: &ControlRecord) -> Result<()> {
        let control = self.key.control_log();
        let plain = serde_json::to_vec(c).unwrap_or_default();
        // An index taken (by an attempt whose progress was lost, or a member's garbage): the
        // next one.
        let mut index = self.state.control_next;
        loop {
            let sealed = self
                .key
                .seal(Kind::Control, &self.host, &control, index, &plain)
                .map_err(seal_err)?;
            match self
                .remote
                .put_record(&control, &self.host, index, &sealed)?
            {
                Put::Created => {
                    self.report.bytes_sent += sealed.len() as u64;
                    self.kept.put(&control, &self.host, index, &sealed)?;
                    break;
                }
                Put::Exists => index += 1,
            }
        }
        self.state.control_next = index + 1;
        self.state.saw(&control, &self.host, index + 1);
        self.dirty = true;
        Ok(())
    }

    /// Claims chain point `base` of `log` for record `index` of `host`. The claim that stands
    /// is the first of the point's [`CLAIM_SLOTS`] slots ([`SyncKey::claim_slot`]) holding
    /// one that opens and names a record that extends the point or is not stored yet: a
    /// slot holding garbage, or a claim whose record is there and extends something else,
    /// is passed over. So no member's write stops a session for good.
    pub(super) fn claim(
        &mut self,
        log: &LogId,
        base: &Chain,
        host: &HostId,
        index: u64,
    ) -> Result<Claim> {
        for slot in 0..CLAIM_SLOTS {
            let point = self.key.claim_slot(base, slot);
            let sealed = self
                .key
                .seal_claim(log, &point, host, index)
                .map_err(seal_err)?;
            self.report.bytes_sent += sealed.len() as u64;
            let theirs = match self.remote.put_claim(log, &point, &sealed)? {
                Claimed::Created => return Ok(Claim::Ours),
                Claimed::Exists(theirs) => theirs,
            };
            let opened = self.key.open_claim(log, &point, &theirs).ok();
            let (who, at) = match plan::claim_seen(opened, *host, index) {
                ClaimSeen::Ours => return Ok(Claim::Ours),
                ClaimSeen::NextSlot => continue,
                ClaimSeen::Look { host, index } => (host, index),
            };
            let (got, _) = self.remote.get_records(log, &who, at)?;
            let pending = format!("{log}/{point}");
            let waited = got.is_empty()
                && plan::waited_for(&mut self.state.pending_claims, pending.clone(), now_secs());
            if got.is_empty() || self.state.pending_claims.remove(&pending).is_some() {
                self.dirty = true;
            }
            let record_base = match got.into_iter().next() {
                None => None,
                Some(record) => {
                    let got = self.open_record(log, &who, at, &record)?;
                    Some(
                        self.session_record(log, got)
                            .ok()
                            .and_then(|(_, r)| r.base.as_deref().and_then(Chain::parse)),
                    )
                }
            };
            if plan::claim_stands(record_base, base, waited) {
                return Ok(Claim::Theirs);
            }
        }
        Ok(Claim::Wedged)
    }

    /// A downloaded record of session log `log`, decoded ([`plan::session_record`]).
    pub(super) fn session_record(
        &self,
        log: &LogId,
        got: Got,
    ) -> std::result::Result<(Vec<u8>, SessionRecord), String> {
        plan::session_record(&self.key, log, got)
    }

    /// Keeps record `index` of `host`'s log `log` as the server holds it, in place of a copy
    /// of that slot that did not open.
    pub(super) fn keep(
        &mut self,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
    ) -> Result<()> {
        if self
            .state
            .unopened
            .remove(&state::slot_key(log, host, index))
            .is_some()
        {
            self.dirty = true;
            self.kept.replace(log, host, index, sealed)
        } else {
            self.kept.put(log, host, index, sealed)
        }
    }

    /// Passes over slot `index` of `host`'s log `log`, which holds `sealed`, not a record of
    /// that log (`why`): a buggy or hostile member's write, or the server's change. It is
    /// kept as the server holds it (a refill sends it back, so the log keeps its indexes),
    /// reported once, and tried again on later pulls; the records after it apply where their
    /// chain points allow, so nothing that opens waits on it.
    pub(super) fn skip(
        &mut self,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
        why: &str,
    ) -> Result<()> {
        self.kept.put(log, host, index, sealed)?;
        let key = state::slot_key(log, host, index);
        if self.state.unopened.contains_key(&key) {
            return Ok(());
        }
        self.state.unopened.insert(
            key,
            state::Unopened {
                since: now_secs(),
                told: false,
            },
        );
        self.dirty = true;
        self.report.skipped.push(SkippedRecord {
            host: host.to_string(),
            log: log.to_string(),
            index,
            why: why.to_owned(),
        });
        Ok(())
    }

    /// The records of `lc` this machine has not seen, each opened where it stands.
    pub(super) fn fetch(
        &mut self,
        lc: &freecode_remote::home_sync::LogCount,
    ) -> Result<Vec<(u64, Got, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut from = self.state.seen(&lc.log, &lc.host);
        while from < lc.count {
            let (got, next) = self.remote.get_records(&lc.log, &lc.host, from)?;
            if got.is_empty() {
                return Err(Error::Failed(format!(
                    "{} lists {} records of host {}'s log {} but returned none from {from}: \
                     nothing was changed here",
                    self.settings.server, lc.count, lc.host, lc.log
                )));
            }
            for (i, sealed) in got.into_iter().enumerate() {
                let index = from + i as u64;
                self.report.bytes_received += sealed.len() as u64;
                let got = self.open_record(&lc.log, &lc.host, index, &sealed)?;
                out.push((index, got, sealed));
            }
            from = next;
        }
        Ok(out)
    }

    /// Record `index` of `host`'s log `log`, opened, or why it does not open. The one error is
    /// a record under a key rotated on another machine: this one must join again.
    pub(super) fn open_record(
        &mut self,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
    ) -> Result<Got> {
        let e = match self.key.open(host, log, index, sealed) {
            Ok(o) => return Ok(Got::Opened(o)),
            Err(e) => e,
        };
        let rotated = matches!(e, SealError::OtherKey { .. }) && self.rotated_elsewhere(sealed)?;
        match plan::unopened_why(&e, rotated) {
            Some(why) => Ok(Got::Bad(why)),
            None => Err(Error::Failed(format!(
                "the sync key was rotated on another machine: run `freecode sync join \
                 --server {} PHRASE` here with the phrase `freecode sync key` prints there \
                 (this machine keeps its sessions and progress); nothing was changed here",
                self.settings.server
            ))),
        }
    }

    /// Whether `sealed` (which this key does not open) is under a key rotated from this one:
    /// the server keeps a ring for the key it names. Asked once per key id.
    pub(super) fn rotated_elsewhere(&mut self, sealed: &[u8]) -> Result<bool> {
        let Some(id) = freecode_remote::home_sync::seal::key_id_of(sealed) else {
            return Ok(false);
        };
        if let Some(known) = self.foreign_keys.get(&id) {
            return Ok(*known);
        }
        let rotated = self.remote.get_ring(&id)?.is_some();
        self.foreign_keys.insert(id, rotated);
        Ok(rotated)
    }
}

/// Claim slots a chain point has (see [`Engine::claim`]).
pub(super) const CLAIM_SLOTS: u32 = 8;

/// Who extends a session's chain from a point.
pub(super) enum Claim {
    /// The host the claim was made for.
    Ours,
    /// Another host, whose record extends it (or will: it is not stored yet).
    Theirs,
    /// Nobody can: every slot holds a claim that does not open or names no record of it.
    Wedged,
}
