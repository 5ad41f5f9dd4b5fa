//! The decisions of home sync, made from what the other steps read: no file or network I/O.
//! The steps (`push`, `pull`, `apply`) read the home and the server, ask here what to do, and
//! carry it out; every case of what they may meet is a row of a table in `plan/tests.rs`.
//!
//! | step | decisions |
//! |---|---|
//! | push | a session's changes as records of at most [`CHUNK`] bytes ([`records_of`], [`record_at`]); the sessions to purge everywhere ([`gone`]); what a claim slot holds ([`claim_seen`], [`claim_stands`]); a record found at this machine's next index ([`adopt`]) |
//! | pull | what to download and what to check first ([`pull_plan`]); the logs purged ([`purged_logs`]); slots that did not open, retried or let go ([`unopened_plan`], [`past_unopened`]); what a downloaded record is ([`session_record`], [`control_record`], [`unopened_why`]); what the server lost ([`refill_plan`]) |
//! | apply | the order of a session's records ([`apply_order`]); a fork ([`diverged`]); the meta that wins ([`take_meta`], [`parse_meta`]); the session as synced, rebuilt ([`rebuild`]) |

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use freecode_core::{SessionId, SessionMeta};
use freecode_remote::home_sync::{
    Chain, HostId, Kind, LogCount, LogId, Opened, SealError, SyncKey,
};

use super::CHUNK;
use super::kept::KeptLog;
use super::record::{ControlRecord, Mode, Section, SessionRecord, What};
use super::state::{self, SessionSync, State};
use crate::error::{Error, Result};

#[cfg(test)]
mod content_tests;
#[cfg(test)]
mod tests;

// ----- what changed, as records ---------------------------------------------------------------

/// A record downloaded: opened, or why it does not open.
pub(super) enum Got {
    /// Opened.
    Opened(Opened),
    /// Why it does not open.
    Bad(String),
}

/// A file's change since its mark.
#[derive(Debug)]
pub(super) enum Change {
    Append { from: u64, bytes: Vec<u8> },
    Set(Vec<u8>),
}

/// What changed in one session.
#[derive(Debug, Default)]
pub(super) struct Changes {
    pub(super) meta: Option<Vec<u8>>,
    pub(super) memory: Option<Vec<u8>>,
    pub(super) messages: Option<Change>,
    pub(super) events: Option<Change>,
}

impl Changes {
    pub(super) fn is_empty(&self) -> bool {
        self.meta.is_none()
            && self.memory.is_none()
            && self.messages.is_none()
            && self.events.is_none()
    }
}

/// The whole lines of `bytes` (up to its last newline).
pub(super) fn whole_lines(bytes: &[u8]) -> &[u8] {
    match memchr::memrchr(b'\n', bytes) {
        Some(i) => &bytes[..=i],
        None => &[],
    }
}

/// Pieces of at most [`CHUNK`] bytes cut at line ends (a longer line is one piece).
pub(super) fn pieces(what: What, change: Change) -> Vec<Section> {
    let (mut from, bytes, mut mode) = match change {
        Change::Append { from, bytes } => (from, bytes, Mode::Append),
        Change::Set(bytes) => (0, bytes, Mode::Set),
    };
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    loop {
        let cut = if rest.len() <= CHUNK {
            rest.len()
        } else {
            memchr::memrchr(b'\n', &rest[..CHUNK])
                .map(|i| i + 1)
                .or_else(|| memchr::memchr(b'\n', rest).map(|i| i + 1))
                .unwrap_or(rest.len())
        };
        let (piece, tail) = rest.split_at(cut);
        out.push(Section::new(
            what,
            mode,
            if mode == Mode::Append { from } else { 0 },
            piece,
        ));
        from = if mode == Mode::Set {
            piece.len() as u64
        } else {
            from + piece.len() as u64
        };
        mode = Mode::Append;
        rest = tail;
        if rest.is_empty() {
            break;
        }
    }
    out
}

/// The records `c` makes: sections of at most [`CHUNK`] bytes, in order; a file's pieces stay
/// in order and in records of their own.
pub(super) fn records_of(c: Changes) -> Vec<Vec<Section>> {
    let mut sections = Vec::new();
    let set = |what, bytes: Vec<u8>| Section::new(what, Mode::Set, 0, bytes);
    sections.extend(c.meta.map(|m| set(What::Meta, m)));
    sections.extend(c.memory.map(|m| set(What::Memory, m)));
    if let Some(ch) = c.messages {
        sections.extend(pieces(What::Messages, ch));
    }
    if let Some(ch) = c.events {
        sections.extend(pieces(What::Events, ch));
    }
    let mut records: Vec<Vec<Section>> = Vec::new();
    let mut size = 0;
    for s in sections {
        let same_file_twice = records
            .last()
            .is_some_and(|r| r.iter().any(|x| x.head.what == s.head.what));
        if records.is_empty() || size + s.bytes.len() > CHUNK || same_file_twice {
            records.push(Vec::new());
            size = 0;
        }
        size += s.bytes.len();
        if let Some(r) = records.last_mut() {
            r.push(s);
        }
    }
    records
}

/// The record of `sections` for session `id` at `st`'s chain point, and whether it is a
/// content record (one that extends the chain: anything but a meta alone).
pub(super) fn record_at(
    id: &SessionId,
    st: &SessionSync,
    sections: Vec<Section>,
) -> (SessionRecord, bool) {
    let content = sections.iter().any(|s| s.head.what != What::Meta);
    let rec = SessionRecord {
        session: id.to_string(),
        base: content.then(|| st.chain.to_string()),
        sections,
    };
    (rec, content)
}

/// Which of a section's bytes a local file already holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// The file is at the section's start: apply it.
    Apply,
    /// The file already holds it (an earlier pull stopped before saving its progress).
    Already,
    /// The file holds other changes from that point: this machine's, not pushed.
    Diverged,
}

// ----- push -----------------------------------------------------------------------------------

/// The sessions this machine synced that are gone from its listing (`local`): candidates for a
/// purge everywhere, which the push confirms with a lookup before it purges any.
pub(super) fn gone<'a>(
    synced: impl IntoIterator<Item = &'a String>,
    local: &BTreeMap<SessionId, PathBuf>,
) -> Vec<String> {
    synced
        .into_iter()
        .filter(|id| SessionId::new(id.as_str()).is_ok_and(|id| !local.contains_key(&id)))
        .cloned()
        .collect()
}

/// What a claim slot of a chain point holds, as far as its claim tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimSeen {
    /// The claim made for this very record (an attempt whose progress was lost made it).
    Ours,
    /// Another record's claim: whether it stands depends on that record ([`claim_stands`]).
    Look {
        /// The host whose record it names.
        host: HostId,
        /// Its index.
        index: u64,
    },
    /// A claim that does not open: passed over for the point's next slot.
    NextSlot,
}

/// What a slot's claim (`opened`: the host and index it names, if it opens) means for record
/// `index` of `me`. One of this host's own for an earlier index is for a slot it passed over
/// (garbage there): it is looked at like any other.
pub(super) fn claim_seen(opened: Option<(HostId, u64)>, me: HostId, index: u64) -> ClaimSeen {
    match opened {
        None => ClaimSeen::NextSlot,
        Some((host, at)) if host == me && at == index => ClaimSeen::Ours,
        Some((host, index)) => ClaimSeen::Look { host, index },
    }
}

/// Whether a claim on chain point `base` naming a record stands: the record is not stored yet
/// (`None`: its host is storing it) and has not been awaited past [`state::CLAIM_PATIENCE`]
/// (`waited`), or it is and extends `base`. A claim whose record extends another point (or is
/// not a session record: `Some(None)`), or that no record followed in time, is passed over.
pub(super) fn claim_stands(record_base: Option<Option<Chain>>, base: &Chain, waited: bool) -> bool {
    match record_base {
        None => !waited,
        Some(b) => b.as_ref() == Some(base),
    }
}

/// Notes in `pending` (claim key → first seen, seconds) a claim found at `now` naming a record
/// not stored; whether it has been waited for past [`state::CLAIM_PATIENCE`]. The oldest are
/// forgotten past [`state::PENDING_CLAIMS_MAX`].
pub(super) fn waited_for(pending: &mut BTreeMap<String, u64>, key: String, now: u64) -> bool {
    if !pending.contains_key(&key)
        && pending.len() >= state::PENDING_CLAIMS_MAX
        && let Some(oldest) = pending
            .iter()
            .min_by_key(|(_, at)| **at)
            .map(|(k, _)| k.clone())
    {
        pending.remove(&oldest);
    }
    let first = *pending.entry(key).or_insert(now);
    now.saturating_sub(first) >= state::CLAIM_PATIENCE.as_secs()
}

/// Whether the record stored at this machine's own next index (found there by a push whose
/// progress was lost) is the one it would push now: of session `id`, extending `chain` (or a
/// meta alone). Why not, if it is not: it is then passed over for the next free index.
pub(super) fn adopt(record: &SessionRecord, id: &SessionId, chain: &Chain) -> Result<(), String> {
    let extends =
        record.base.is_none() || record.base.as_deref().and_then(Chain::parse) == Some(*chain);
    if record.session == id.as_str() && extends {
        Ok(())
    } else {
        Err("is not this machine's record of its session".to_owned())
    }
}

// ----- pull -----------------------------------------------------------------------------------

/// A log the server counts fewer records of than this machine saw: stale or rolled back,
/// unless its last record seen is still there (the counts may be a second old).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Behind {
    /// The log.
    pub(super) log: LogId,
    /// Its host.
    pub(super) host: HostId,
    /// What the server counts.
    pub(super) count: u64,
    /// What this machine saw.
    pub(super) seen: u64,
}

/// What a pull downloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PullPlan {
    /// Logs to check before anything is downloaded: the pull stops if one is behind indeed.
    pub(super) behind: Vec<Behind>,
    /// The other hosts' session logs with records this machine has not seen, in the server's
    /// order: each downloaded from what was seen.
    pub(super) fetch: Vec<LogCount>,
}

/// A pull's downloads, from the server's counts (`logs`) and what this machine saw (`state`):
/// never this host's own logs nor the control log (read first, apart), nor a log purged
/// (`purged`), nor, with `only`, any other log.
pub(super) fn pull_plan(
    logs: &[LogCount],
    state: &State,
    me: HostId,
    control: LogId,
    purged: &BTreeSet<LogId>,
    only: Option<&LogId>,
) -> PullPlan {
    let counts: BTreeMap<(LogId, HostId), u64> =
        logs.iter().map(|l| ((l.log, l.host), l.count)).collect();
    let behind = state
        .seen
        .iter()
        .filter_map(|(key, seen)| {
            let (log, host) = key.split_once('/')?;
            let (log, host) = (LogId::parse(log)?, HostId::parse(host)?);
            let count = counts.get(&(log, host)).copied().unwrap_or(0);
            (count < *seen && !purged.contains(&log)).then_some(Behind {
                log,
                host,
                count,
                seen: *seen,
            })
        })
        .collect();
    let fetch = logs
        .iter()
        .filter(|lc| {
            lc.host != me
                && lc.log != control
                && !purged.contains(&lc.log)
                && only.is_none_or(|o| *o == lc.log)
                && lc.count > state.seen(&lc.log, &lc.host)
        })
        .cloned()
        .collect();
    PullPlan { behind, fetch }
}

/// The logs purged everywhere: the sessions other hosts' control records name, and those
/// purged here.
pub(super) fn purged_logs<'a>(
    key: &SyncKey,
    controls: impl IntoIterator<Item = &'a ControlRecord>,
    purged_here: &BTreeSet<String>,
) -> BTreeSet<LogId> {
    controls
        .into_iter()
        .flat_map(|c| c.purged.iter())
        .chain(purged_here)
        .map(|id| key.log_id(id))
        .collect()
}

/// What becomes of a slot that did not open, at a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SlotStep {
    /// Forgotten: tried for [`state::UNOPENED_FOR`], past the [`state::UNOPENED_MAX`] newest,
    /// of a log purged, or not a slot at all.
    LetGo,
    /// Not this pull's (it pulls another log).
    Leave,
    /// Asked for again: it may open now (its key wrap mended).
    Retry(LogId, HostId, u64),
}

/// Each slot that did not open (oldest first) and what a pull at `now` (seconds) does with it.
pub(super) fn unopened_plan(
    state: &State,
    now: u64,
    purged: &BTreeSet<LogId>,
    only: Option<&LogId>,
) -> Vec<(String, SlotStep)> {
    let mut by_age: Vec<(u64, &String)> =
        state.unopened.iter().map(|(k, u)| (u.since, k)).collect();
    by_age.sort();
    let over = by_age.len().saturating_sub(state::UNOPENED_MAX);
    by_age
        .into_iter()
        .enumerate()
        .map(|(n, (since, key))| {
            let expired = n < over || now.saturating_sub(since) > state::UNOPENED_FOR.as_secs();
            let step = match state::parse_slot(key) {
                Some((log, ..)) if expired || purged.contains(&log) => SlotStep::LetGo,
                None => SlotStep::LetGo,
                Some((log, ..)) if only.is_some_and(|o| *o != log) => SlotStep::Leave,
                Some((log, host, index)) => SlotStep::Retry(log, host, index),
            };
            (key.clone(), step)
        })
        .collect()
}

/// The logs whose records this machine has seen up to a slot that did not open, with nothing
/// after it waiting: each with the index its seen count moves past those slots to.
pub(super) fn past_unopened(state: &State) -> Vec<(LogId, HostId, u64)> {
    let logs: BTreeSet<(LogId, HostId)> = state
        .unopened
        .keys()
        .filter_map(|k| state::parse_slot(k))
        .map(|(log, host, _)| (log, host))
        .collect();
    logs.into_iter()
        .filter_map(|(log, host)| {
            let next = state.next_to_apply(&log, &host);
            (next > state.seen(&log, &host)).then_some((log, host, next))
        })
        .collect()
}

/// A downloaded record of session log `log`, decoded; why it is not a record of that log, if it is not: of another kind, not a session
/// record, or naming a session of another log.
pub(super) fn session_record(
    key: &SyncKey,
    log: &LogId,
    got: Got,
) -> std::result::Result<(Vec<u8>, SessionRecord), String> {
    let opened = match got {
        Got::Opened(o) => o,
        Got::Bad(why) => return Err(why),
    };
    if opened.kind != Kind::Session {
        return Err("is of the wrong kind for its log".into());
    }
    let record = SessionRecord::decode(&opened.plaintext)
        .ok_or_else(|| "opens but is not a session record".to_owned())?;
    let Ok(id) = SessionId::new(&record.session) else {
        return Err("names a session of another log".into());
    };
    if key.log_id(&record.session) != *log {
        return Err("names a session of another log".into());
    }
    check_content(&record, &id)?;
    Ok((opened.plaintext, record))
}

/// Why a session record's sections are not what any machine of the group writes, if they are
/// not: a meta that does not parse, names another session, or whose project path is not an
/// absolute, plain path ([`freecode_core::meta::project_path_fault`]); a memory that is not
/// JSON; messages or rollout lines that are not whole JSON objects or are too long; a file
/// past its size bound. Such a record is passed over like a slot that does not open, so
/// whatever a member writes never stops the others (nor lands in their files).
pub(super) fn check_content(record: &SessionRecord, id: &SessionId) -> Result<(), String> {
    for s in &record.sections {
        let what = match s.head.what {
            What::Meta => "meta",
            What::Memory => "memory",
            What::Messages => "messages",
            What::Events => "rollout log",
        };
        match s.head.what {
            What::Meta | What::Memory => {
                if s.bytes.len() as u64 > freecode_store::session::META_MAX_BYTES {
                    return Err(format!("holds a {what} of {} bytes", s.bytes.len()));
                }
                if s.head.mode != Mode::Set {
                    return Err(format!("appends to a {what}"));
                }
            }
            What::Messages | What::Events => {
                if let Some(why) = bad_lines(&s.bytes) {
                    return Err(format!("holds {what} lines that {why}"));
                }
            }
        }
        match s.head.what {
            What::Meta => {
                let m = freecode_core::json::from_slice_lossy::<SessionMeta>(&s.bytes)
                    .map_err(|e| format!("holds a meta that does not parse ({e})"))?
                    .value;
                if m.id != id.as_str() {
                    return Err(format!("holds a meta of another session ({})", m.id));
                }
                if let Some(why) = freecode_core::meta::project_path_fault(&m.project_path) {
                    return Err(format!("holds a meta whose project path {why}"));
                }
            }
            What::Memory => {
                if freecode_core::json::from_slice_lossy::<serde::de::IgnoredAny>(&s.bytes).is_err()
                {
                    return Err("holds a memory that is not JSON".into());
                }
            }
            What::Messages | What::Events => {}
        }
    }
    Ok(())
}

/// Why `bytes` are not whole lines each a JSON object (blank lines aside) no longer than a
/// reader takes, if they are not.
fn bad_lines(bytes: &[u8]) -> Option<String> {
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        return Some("end in a torn line".into());
    }
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > freecode_store::jsonl::MAX_LINE_BYTES {
            return Some(format!("are too long (line {})", n + 1));
        }
        let object = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        if !object || freecode_core::json::from_slice_lossy::<serde::de::IgnoredAny>(line).is_err()
        {
            return Some(format!("are not JSON objects (line {})", n + 1));
        }
    }
    None
}

/// A downloaded control record, decoded; why it is not one, if it is not.
pub(super) fn control_record(got: Got) -> std::result::Result<ControlRecord, String> {
    let opened = match got {
        Got::Opened(o) => o,
        Got::Bad(why) => return Err(why),
    };
    if opened.kind != Kind::Control {
        return Err("is of the wrong kind for its log".into());
    }
    serde_json::from_slice(&opened.plaintext)
        .map_err(|_| "opens but is not a control record".to_owned())
}

/// Why a record does not open, as a skipped slot reports it. A record under another key is
/// this group's rotated key (the pull stops: this machine must join again) only when
/// `rotated` says the server keeps a ring for that key; otherwise the group never had it.
pub(super) fn unopened_why(e: &SealError, rotated: bool) -> Option<String> {
    match e {
        SealError::OtherKey { .. } if rotated => None,
        SealError::OtherKey { .. } => Some("is sealed with a key this group never had".into()),
        SealError::Tampered { .. } => {
            Some("does not open (changed, cut short, moved, or never a record)".into())
        }
        e => Some(format!("does not open ({e})")),
    }
}

/// The records kept here that the server no longer holds, by log: each `(log, host, from,
/// to)` sent again, byte for byte, in order (a log purged is not).
pub(super) fn refill_plan(
    kept: &[KeptLog],
    logs: &[LogCount],
    purged: &BTreeSet<LogId>,
) -> Vec<(LogId, HostId, std::ops::Range<u64>)> {
    let counts: BTreeMap<(LogId, HostId), u64> =
        logs.iter().map(|l| ((l.log, l.host), l.count)).collect();
    kept.iter()
        .filter_map(|k| {
            let have = counts.get(&(k.log, k.host)).copied().unwrap_or(0);
            (have < k.count && !purged.contains(&k.log)).then_some((k.log, k.host, have..k.count))
        })
        .collect()
}

// ----- apply ----------------------------------------------------------------------------------

/// What applying a record needs to know of it to order it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    /// The host whose log it is in.
    pub(super) host: HostId,
    /// Its index there.
    pub(super) index: u64,
    /// A slot that did not open before and opens now: applied where its chain point
    /// allows, out of its host's order.
    pub(super) retried: bool,
    /// The chain point it extends.
    pub(super) extends: Extends,
}

/// The chain point a record extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Extends {
    /// None: a meta alone, applied wherever the chain stands.
    Nothing,
    /// `from`, moving the chain to `to`.
    Point {
        /// The point it extends.
        from: Chain,
        /// The point it leads to.
        to: Chain,
    },
    /// A point that does not parse: never applied.
    Unreadable,
}

impl Extends {
    /// The point the chain moves to once the record is applied, if it moves.
    pub(super) fn to(self) -> Option<Chain> {
        match self {
            Self::Point { to, .. } => Some(to),
            Self::Nothing | Self::Unreadable => None,
        }
    }
}

/// The order in which a session's downloaded records apply here, from the session's chain
/// point `chain`: a record applies once its host's earlier records are applied (or it is a
/// slot retried) and the chain stands where it extends it. A record that extends a point the
/// chain never reaches (another machine's changes from a point this one moved on from) is
/// left out.
pub(super) fn apply_order(
    state: &State,
    log: &LogId,
    mut chain: Chain,
    pending: &[Pending],
) -> Vec<usize> {
    // What applying changes of the state, kept aside: each host's records seen, the slots
    // that did not open and opened now.
    let mut seen: BTreeMap<HostId, u64> = BTreeMap::new();
    let mut opened: BTreeSet<(HostId, u64)> = BTreeSet::new();
    let next_to_apply = |seen: &BTreeMap<HostId, u64>, opened: &BTreeSet<_>, host: HostId| {
        let mut i = seen
            .get(&host)
            .copied()
            .unwrap_or(0)
            .max(state.seen(log, &host));
        while state.is_unopened(log, &host, i) && !opened.contains(&(host, i)) {
            i += 1;
        }
        i
    };
    let mut done = vec![false; pending.len()];
    let mut order = Vec::new();
    loop {
        let mut progressed = false;
        for (i, p) in pending.iter().enumerate() {
            if done[i] || !(p.retried || p.index == next_to_apply(&seen, &opened, p.host)) {
                continue;
            }
            match p.extends {
                Extends::Nothing => {}
                Extends::Point { from, to } if from == chain => chain = to,
                Extends::Point { .. } | Extends::Unreadable => continue,
            }
            let s = seen.entry(p.host).or_insert(0);
            *s = (*s).max(p.index + 1);
            opened.insert((p.host, p.index));
            done[i] = true;
            order.push(i);
            progressed = true;
        }
        if !progressed {
            return order;
        }
    }
}

/// Whether this machine's files hold changes of their own from the point a record extends
/// (any section's file diverged): they are then kept as a fork first.
pub(super) fn diverged(fits: &[Fit]) -> bool {
    fits.contains(&Fit::Diverged)
}

/// Whether a record's meta (`remote`, from host `from`) replaces the local one: when it is
/// newer (`updatedAt`; on a tie, the greater host id wins), when the session is new here, or
/// when no meta of it was synced yet (a creation cut short left a fresh meta of its own).
/// Otherwise the local meta stays and goes out with the next push.
pub(super) fn take_meta(
    remote: &SessionMeta,
    from: HostId,
    local: Option<&SessionMeta>,
    me: HostId,
    new_here: bool,
    synced_before: bool,
) -> bool {
    let newer = local.is_none_or(|l| {
        remote.updated_at > l.updated_at || (remote.updated_at == l.updated_at && from > me)
    });
    newer || new_here || !synced_before
}

/// A session's messages and rollout log as synced at chain point `to`, rebuilt from its
/// records opened (`records`, of every host) by following the chain from `genesis` (`next`
/// steps it); `None` when a record on the way is missing or does not follow on.
pub(super) fn rebuild(
    genesis: Chain,
    to: Chain,
    records: impl IntoIterator<Item = (Vec<u8>, SessionRecord)>,
    next: impl Fn(&Chain, &[u8]) -> Chain,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut by_base: BTreeMap<Chain, (Vec<u8>, SessionRecord)> = BTreeMap::new();
    for (plain, rec) in records {
        if let Some(base) = rec.base.as_deref().and_then(Chain::parse) {
            by_base.insert(base, (plain, rec));
        }
    }
    let (mut msgs, mut evs) = (Vec::new(), Vec::new());
    let mut chain = genesis;
    while chain != to {
        let (plain, rec) = by_base.remove(&chain)?;
        for s in &rec.sections {
            let buf = match s.head.what {
                What::Messages => &mut msgs,
                What::Events => &mut evs,
                What::Meta | What::Memory => continue,
            };
            match s.head.mode {
                Mode::Set => buf.clone_from(&s.bytes),
                Mode::Append if s.head.from == buf.len() as u64 => {
                    buf.extend_from_slice(&s.bytes);
                }
                Mode::Append => return None,
            }
        }
        chain = next(&chain, &plain);
    }
    Some((msgs, evs))
}

/// A synced `meta.json` of session `id`, parsed; an error when it does not parse or names
/// another session.
pub(super) fn parse_meta(bytes: &[u8], id: &SessionId) -> Result<SessionMeta> {
    let m = freecode_core::json::from_slice_lossy::<SessionMeta>(bytes)
        .map_err(|e| Error::Failed(format!("session {id}'s synced meta does not parse: {e}")))?
        .value;
    if m.id != id.as_str() {
        return Err(Error::Failed(format!(
            "a synced meta of session {id} names session {}",
            m.id
        )));
    }
    Ok(m)
}
