//! `freecode sync compact`: room made in a group a member filled with what never opens. Each
//! other machine's log of a session (or its control log) whose every record does not open, or
//! opens as nothing a machine of the group writes ([`plan::session_record`],
//! [`plan::control_record`]), is removed from the server; the other machines are told in a
//! control record (`compacted`) so they drop their copies of it and no refill sends it back.
//! Nothing that opens is touched: a log with one good record stays whole, and so does every
//! log of this machine.

use freecode_remote::home_sync::{HostId, LogId};

use super::engine::Engine;
use super::plan;
use super::record::ControlRecord;
use super::state;
use super::{SyncCompacted, SyncCompaction, take_turn};
use crate::error::Result;
use freecode_store::Home;

impl Engine {
    /// Drops what this machine keeps of `slot` (`"<log>/<host>"`), compacted away by a machine
    /// of the group: its copies, how many of it were seen, its slots that did not open.
    pub(super) fn forget_host_log(&mut self, slot: &str) -> Result<()> {
        let Some((log, host)) = slot
            .split_once('/')
            .and_then(|(l, h)| Some((LogId::parse(l)?, HostId::parse(h)?)))
        else {
            return Ok(());
        };
        if host == self.host {
            return Ok(());
        }
        self.kept.remove_host_log(&log, &host)?;
        let prefix = format!("{}/", state::seen_key(&log, &host));
        self.state.seen.remove(&state::seen_key(&log, &host));
        self.state.unopened.retain(|k, _| !k.starts_with(&prefix));
        self.dirty = true;
        Ok(())
    }

    /// Whether every record of `host`'s log `log` (`count` of them) is something no machine
    /// of the group writes; how many bytes they take.
    fn all_garbage(&mut self, log: &LogId, host: &HostId, count: u64) -> Result<Option<u64>> {
        let control = self.key.control_log();
        let mut from = 0;
        let mut bytes = 0;
        while from < count {
            let (got, next) = self.remote.get_records(log, host, from)?;
            if got.is_empty() {
                break;
            }
            for (i, sealed) in got.iter().enumerate() {
                let index = from + i as u64;
                bytes += sealed.len() as u64;
                let opened = self.open_record(log, host, index, sealed)?;
                let good = if *log == control {
                    plan::control_record(opened).is_ok()
                } else {
                    self.session_record(log, opened).is_ok()
                };
                if good {
                    return Ok(None);
                }
            }
            from = next.max(from + got.len() as u64);
        }
        Ok(Some(bytes))
    }
}

/// `freecode sync compact`.
pub fn compact(home: &Home) -> Result<SyncCompaction> {
    let _turn = take_turn(home)?;
    let mut e = Engine::open(home)?;
    let r = run(&mut e);
    e.finish(r)
}

fn run(e: &mut Engine) -> Result<SyncCompaction> {
    let mut out = SyncCompaction::default();
    let logs = e.remote.status()?;
    let mut garbage = Vec::new();
    let me = e.host;
    for lc in logs.iter().filter(|l| l.host != me) {
        if let Some(bytes) = e.all_garbage(&lc.log, &lc.host, lc.count)? {
            garbage.push((lc.log, lc.host, lc.count, bytes));
        }
    }
    if garbage.is_empty() {
        return Ok(out);
    }
    let told = ControlRecord {
        purged: Vec::new(),
        unopened: Vec::new(),
        compacted: garbage
            .iter()
            .map(|(log, host, _, _)| format!("{log}/{host}"))
            .collect(),
    };
    for (log, host, records, bytes) in garbage {
        e.remote.delete_host_log(&log, &host)?;
        e.forget_host_log(&format!("{log}/{host}"))?;
        out.records += records;
        out.bytes += bytes;
        out.removed.push(SyncCompacted {
            log: log.to_string(),
            host: host.to_string(),
            records,
        });
    }
    // Then the others are told (the group may have had no room for it before): each drops
    // its copies. One that syncs in between sends its copies back, and the next compact
    // removes them again.
    e.put_control(&told)?;
    e.flush()?;
    Ok(out)
}
