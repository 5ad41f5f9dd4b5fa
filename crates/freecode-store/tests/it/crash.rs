//! Crash safety with real processes. Child processes (this binary, re-executed) append to or
//! rewrite a session and are killed with SIGKILL at many points; afterwards no acknowledged
//! write is lost, nothing is half-applied, and the next writer repairs what the crash left.
//! Two processes writing one session are serialised by the session lock.
//!
//! A child reports each write on stdout only after the store call returned, so "acknowledged"
//! means what a caller of the store was told was saved. A child killed mid-write may also leave
//! that one unacknowledged write (whole, or as a torn last line): both are allowed.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use freecode_core::compaction::keep_last_n_user_turns;
use freecode_core::memory::CompactionMemory;
use freecode_core::{Role, SessionId, SessionMeta, SessionStatus, StoredMessage};
use freecode_store::lock::LockWait;
use freecode_store::session::{COMPACTION_JOURNAL, MESSAGES_FILE, META_FILE, TORN_FILE};
use freecode_store::{IssueKind, LineIssue, StoreError};

use crate::support::{
    self, ChildProc, Rng, TestHome, after_last_newline, child_var, emit, ids, is_child,
    spawn_child, text_msg,
};

// ----- shared by the children and their parents ----------------------------------------------

/// The id of the `n`th message a child writes in `round`; ids sort in write order.
fn msg_id(round: u32, n: u32) -> String {
    format!("r{round:03}-{n:05}")
}

/// The id of the message the parent appends after `round`; sorts after the round's own.
fn parent_id(round: u32) -> String {
    format!("r{round:03}-parent")
}

/// Size of a "big" message: large enough that a kill can land inside its `write`.
const BIG_LEN: usize = 1 << 20;

/// The text of message `id`: derived from the id, so a read-back can be checked byte for byte.
fn payload(id: &str, big: bool) -> String {
    let h = id
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let len = if big {
        BIG_LEN
    } else {
        40 + (h % 400) as usize
    };
    let mut s = format!("{id}:");
    while s.len() < len {
        s.push_str("0123456789abcdef-");
    }
    s.truncate(len);
    s
}

fn role_of(n: u32) -> Role {
    support::role_for(u64::from(n))
}

fn child_store() -> (freecode_store::SessionStore, SessionId, u32) {
    let store = support::open_store(Path::new(&child_var("HOME")), LockWait::Fail);
    let id = SessionId::new(child_var("SESSION")).expect("a valid session id");
    let round = child_var("ROUND").parse().expect("a round number");
    (store, id, round)
}

fn child_vars(h: &TestHome, id: &SessionId, round: u32) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", h.root().display().to_string()),
        ("SESSION", id.to_string()),
        ("ROUND", round.to_string()),
    ]
}

/// Hidden temp files (`.name.pid.n.tmp`) in `dir`.
fn temps_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.map(|e| e.expect("a directory entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with('.') && name.ends_with(".tmp")
        })
        .collect()
}

// ----- appends under SIGKILL -----------------------------------------------------------------

const APPEND_CHILD: &str = "crash::append_child";
/// A child stops after this many appends (it is normally killed long before).
const SMALL_MAX: u32 = 3000;
const BIG_MAX: u32 = 4;

/// Child: opens a writer and appends messages, acknowledging each after `append` returned.
#[test]
fn append_child() {
    if !is_child(APPEND_CHILD) {
        return;
    }
    let (store, id, round) = child_store();
    let big = child_var("MODE") == "big";
    let mut w = store.writer(&id).unwrap();
    emit("READY");
    for n in 0..if big { BIG_MAX } else { SMALL_MAX } {
        let mid = msg_id(round, n);
        w.append(&text_msg(&mid, role_of(n), &payload(&mid, big)))
            .unwrap();
        emit(&format!("ACK {mid}"));
    }
    emit("DONE");
}

enum Kill {
    /// After the child acknowledged this many appends (0: once its writer is open).
    AfterAcks(u32),
    /// This long after the child's writer is open.
    AfterDelay(Duration),
}

/// One session appended to by a series of killed children, with what they acknowledged.
struct AppendRun {
    h: TestHome,
    id: SessionId,
    big: bool,
    rounds: u32,
    /// Every acknowledged id, in order (children's and the parent's).
    acked: Vec<String>,
    /// Ids a killed child may have written without acknowledging (one per killed child).
    in_flight: HashSet<String>,
    killed: u32,
    torn: u32,
}

impl AppendRun {
    fn new(big: bool) -> Self {
        let h = TestHome::new();
        let id = h.create("/work/crash/appends");
        Self {
            h,
            id,
            big,
            rounds: 0,
            acked: Vec::new(),
            in_flight: HashSet::new(),
            killed: 0,
            torn: 0,
        }
    }

    fn round(&mut self, kill: Kill) {
        let round = self.rounds;
        self.rounds += 1;
        let mut vars = child_vars(&self.h, &self.id, round);
        vars.push(("MODE", if self.big { "big" } else { "small" }.to_owned()));
        let mut child = spawn_child(APPEND_CHILD, self.h.tmp.path(), &vars);
        let mut events = child.events_until("READY");
        match kill {
            Kill::AfterAcks(n) => {
                let mut acks = 0;
                while acks < n {
                    let Some(e) = child.next_event() else { break };
                    acks += u32::from(e.starts_with("ACK "));
                    events.push(e);
                }
            }
            Kill::AfterDelay(d) => std::thread::sleep(d),
        }
        let killed = child.sigkill();
        events.extend(child.rest());
        let acks: Vec<String> = events
            .iter()
            .filter_map(|e| e.strip_prefix("ACK "))
            .map(str::to_owned)
            .collect();
        let want: Vec<String> = (0..acks.len() as u32).map(|n| msg_id(round, n)).collect();
        assert_eq!(acks, want, "round {round}: the child's acknowledgements");
        if killed {
            self.killed += 1;
            self.in_flight.insert(msg_id(round, acks.len() as u32));
        }
        self.acked.extend(acks);
        self.verify_and_append(round);
    }

    /// After a kill: the session opens, every acknowledged message is there in order, the only
    /// possible issue is a torn last line, and a new writer cuts it and appends cleanly.
    fn verify_and_append(&mut self, round: u32) {
        let ctx = format!(
            "round {round} ({} mode)",
            if self.big { "big" } else { "small" }
        );
        let path = self.h.log_path(&self.id);
        let before = fs::read(&path).unwrap();
        let log = self
            .h
            .store
            .messages(&self.id)
            .unwrap_or_else(|e| panic!("{ctx}: the session does not open after a kill: {e}"));
        assert!(
            fs::read(&path).unwrap() == before,
            "{ctx}: reading changed the log"
        );

        let cut = after_last_newline(&before);
        let torn_len = (before.len() - cut) as u64;
        if torn_len > 0 {
            self.torn += 1;
            let lines = before.iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(
                log.issues,
                vec![LineIssue {
                    line: lines + 1,
                    offset: cut as u64,
                    len: torn_len,
                    kind: IssueKind::Torn,
                }],
                "{ctx}: a torn last line is the only issue a kill may leave"
            );
        } else {
            assert_eq!(log.issues, vec![], "{ctx}: no issue without a torn tail");
        }
        self.check_messages(&log.messages, &ctx);

        let mut w = self
            .h
            .store
            .writer(&self.id)
            .unwrap_or_else(|e| panic!("{ctx}: no writer after the kill: {e}"));
        if torn_len > 0 {
            assert_eq!(w.repaired_tail, Some((cut as u64, torn_len)), "{ctx}");
            let kept = fs::read(self.h.dir(&self.id).join(TORN_FILE)).unwrap();
            let mut fragment = before[cut..].to_vec();
            fragment.push(b'\n');
            assert!(
                kept.ends_with(&fragment),
                "{ctx}: the cut bytes are kept in {TORN_FILE}"
            );
        } else {
            assert_eq!(w.repaired_tail, None, "{ctx}");
        }
        let pid = parent_id(round);
        let pmsg = text_msg(&pid, Role::User, &payload(&pid, false));
        w.append(&pmsg).unwrap();
        drop(w);

        let after = fs::read(&path).unwrap();
        let mut want = before[..cut].to_vec();
        want.extend_from_slice(&pmsg.to_line());
        assert!(
            after == want,
            "{ctx}: after the repair and an append the log must be its complete lines plus the \
             new one ({} bytes, expected {})",
            after.len(),
            want.len()
        );
        let log = self.h.store.messages(&self.id).unwrap();
        assert_eq!(log.issues, vec![], "{ctx}: no torn line after the repair");
        assert_eq!(log.messages.last(), Some(&pmsg), "{ctx}: the new message");
        self.acked.push(pid);
    }

    fn check_messages(&self, messages: &[StoredMessage], ctx: &str) {
        let got = ids(messages);
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{ctx}: messages out of order or duplicated: {got:?}"
        );
        let acked: HashSet<&String> = self.acked.iter().collect();
        let (present, extra): (Vec<&String>, Vec<&String>) =
            got.iter().partition(|id| acked.contains(id));
        assert!(
            present.iter().copied().eq(self.acked.iter()),
            "{ctx}: acknowledged messages lost or reordered:\n acked {:?}\n found {present:?}",
            self.acked
        );
        for e in extra {
            assert!(
                self.in_flight.contains(e),
                "{ctx}: message {e} was never written"
            );
        }
        for m in messages {
            let big = self.big && !m.id.ends_with("-parent");
            assert!(
                m.text() == payload(&m.id, big),
                "{ctx}: the text of {} was changed",
                m.id
            );
        }
    }
}

#[test]
fn sigkill_during_appends_loses_no_acknowledged_message() {
    let mut rng = Rng::from_env_or_clock("sigkill_during_appends");

    let mut small = AppendRun::new(false);
    for n in [0, 1, 2, 3, 4, 5, 7, 10, 14, 20, 30, 45, 70, 100] {
        small.round(Kill::AfterAcks(n));
    }
    for _ in 0..8 {
        small.round(Kill::AfterDelay(Duration::from_micros(rng.below(30_000))));
    }
    // Kill points: 14 by count, 8 by delay; every child was killed mid-run (none can finish
    // 3000 fsynced appends before the kill reaches it).
    assert_eq!(small.killed, small.rounds);

    let mut big = AppendRun::new(true);
    for n in [0, 1, 2] {
        big.round(Kill::AfterAcks(n));
    }
    for _ in 0..6 {
        big.round(Kill::AfterDelay(Duration::from_micros(rng.below(40_000))));
    }
    eprintln!(
        "appends: {} small rounds ({} torn tails), {} big rounds ({} killed, {} torn tails)",
        small.rounds, small.torn, big.rounds, big.killed, big.torn
    );
}

// ----- rewrites (interrupt marks, compaction) under SIGKILL ----------------------------------

const REWRITE_CHILD: &str = "crash::rewrite_child";
/// User turns a compaction keeps.
const KEEP: usize = 2;
const REWRITE_ITERATIONS: u32 = 400;

/// Child: appends a user and an assistant message, marks the assistant one interrupted, and
/// compacts to the last two user turns; again and again. Every step is acknowledged after it
/// returned; `COMPACT <summary> <first kept id>` is announced before the compaction starts.
#[test]
fn rewrite_child() {
    if !is_child(REWRITE_CHILD) {
        return;
    }
    let (store, id, round) = child_store();
    let mut w = store.writer(&id).unwrap();
    emit("READY");
    let mut seq = 0;
    for k in 0..REWRITE_ITERATIONS {
        let mut last = String::new();
        for _ in 0..2 {
            let mid = msg_id(round, seq);
            w.append(&text_msg(&mid, role_of(seq), &payload(&mid, false)))
                .unwrap();
            emit(&format!("ACK {mid}"));
            seq += 1;
            last = mid;
        }
        assert!(w.mark_interrupted(Some(&last)).unwrap());
        emit(&format!("MARKED {last}"));
        let log = store.messages(&id).unwrap();
        let cut = keep_last_n_user_turns(&log.messages, KEEP).unwrap();
        if cut > 0 {
            let summary = format!("summary-r{round:03}-k{k:04}");
            emit(&format!("COMPACT {summary} {}", log.messages[cut].id));
            assert!(w.compact(KEEP, &summary, None).unwrap().compacted);
            emit(&format!("COMPACTED {summary}"));
        }
    }
    emit("DONE");
}

enum RewriteKill {
    /// After the `count`th event starting with `prefix`, and then `then` more.
    AfterEvent(&'static str, u32, Duration),
    /// This long after the child's writer is open.
    AfterDelay(Duration),
}

#[derive(Default)]
struct RewriteModel {
    acked: Vec<String>,
    in_flight: HashSet<String>,
    /// Acknowledged interrupt marks.
    marked: HashSet<String>,
    /// Messages a killed child may have been marking.
    maybe_marked: HashSet<String>,
    /// Summary → the first message its compaction keeps.
    first_kept: HashMap<String, String>,
    /// Summaries in memory.json after the last round, oldest first.
    committed: Vec<String>,
    journals_seen: u32,
    temps_seen: u32,
    killed: u32,
}

struct RoundEvents {
    round: u32,
    /// Summaries this round started compacting, in order.
    compacts: Vec<String>,
    /// Whether the last of them was acknowledged.
    last_completed: bool,
}

fn assert_no_temps(dir: &Path, ctx: &str) {
    let temps = temps_in(dir);
    assert!(temps.is_empty(), "{ctx}: temp files left: {temps:?}");
}

fn rewrite_round(
    h: &TestHome,
    id: &SessionId,
    m: &mut RewriteModel,
    round: u32,
    kill: RewriteKill,
) {
    let mut child = spawn_child(REWRITE_CHILD, h.tmp.path(), &child_vars(h, id, round));
    let mut events = child.events_until("READY");
    match kill {
        RewriteKill::AfterEvent(prefix, count, then) => {
            let mut seen = 0;
            while seen < count {
                let Some(e) = child.next_event() else { break };
                seen += u32::from(e.starts_with(prefix));
                events.push(e);
            }
            std::thread::sleep(then);
        }
        RewriteKill::AfterDelay(d) => std::thread::sleep(d),
    }
    let killed = child.sigkill();
    m.killed += u32::from(killed);
    events.extend(child.rest());
    let ev = digest_events(m, round, &events, killed);
    check_after_kill(h, id, m, &ev);
}

fn digest_events(m: &mut RewriteModel, round: u32, events: &[String], killed: bool) -> RoundEvents {
    let mut acks = Vec::new();
    let mut compacts = Vec::new();
    let mut completed = HashSet::new();
    for e in events {
        let words: Vec<&str> = e.split(' ').collect();
        match words.as_slice() {
            ["ACK", mid] => acks.push((*mid).to_owned()),
            ["MARKED", mid] => {
                m.marked.insert((*mid).to_owned());
            }
            ["COMPACT", summary, first] => {
                compacts.push((*summary).to_owned());
                m.first_kept
                    .insert((*summary).to_owned(), (*first).to_owned());
            }
            ["COMPACTED", summary] => {
                completed.insert((*summary).to_owned());
            }
            ["DONE"] => {}
            _ => panic!("round {round}: unexpected event {e:?}"),
        }
    }
    let want: Vec<String> = (0..acks.len() as u32).map(|n| msg_id(round, n)).collect();
    assert_eq!(acks, want, "round {round}: the child's acknowledgements");
    if killed {
        m.in_flight.insert(msg_id(round, acks.len() as u32));
        if let Some(last) = acks.last() {
            m.maybe_marked.insert(last.clone());
        }
    }
    m.acked.extend(acks);
    let n = compacts.len();
    for s in compacts.iter().take(n.saturating_sub(1)) {
        assert!(
            completed.contains(s),
            "round {round}: compaction {s} never returned"
        );
    }
    RoundEvents {
        round,
        last_completed: compacts.last().is_none_or(|s| completed.contains(s)),
        compacts,
    }
}

/// After a kill: every file parses as it stands; once the next writer has opened there is no
/// journal and no temp file; and the log and memory.json agree (a compaction is all or nothing).
fn check_after_kill(h: &TestHome, id: &SessionId, m: &mut RewriteModel, ev: &RoundEvents) {
    let round = ev.round;
    let dir = h.dir(id);
    let memory_dir = h.store.home().memory_dir(id);

    // 1. The files as the kill left them, before anything repairs them.
    let ctx = format!("round {round}, as the kill left it");
    let meta = fs::read(dir.join(META_FILE)).unwrap();
    if let Err(e) = serde_json::from_slice::<SessionMeta>(&meta) {
        panic!("{ctx}: meta.json does not parse: {e}");
    }
    let raw = fs::read(dir.join(MESSAGES_FILE)).unwrap();
    let complete = after_last_newline(&raw);
    for (i, line) in raw[..complete].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        if let Err(e) = serde_json::from_slice::<StoredMessage>(line) {
            panic!("{ctx}: messages.jsonl line {} does not parse: {e}", i + 1);
        }
    }
    if let Ok(bytes) = fs::read(h.store.home().memory_file(id))
        && let Err(e) = serde_json::from_slice::<CompactionMemory>(&bytes)
    {
        panic!("{ctx}: memory.json does not parse: {e}");
    }
    let journal = dir.join(COMPACTION_JOURNAL);
    if journal.exists() {
        m.journals_seen += 1;
        let j = fs::read(&journal).unwrap();
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(&j) {
            panic!("{ctx}: the compaction journal does not parse: {e}");
        }
    } else {
        // Without a journal nothing is pending: the log and the memory already agree.
        check_consistent(h, id, m, ev, &ctx, true);
    }
    if !temps_in(&dir).is_empty() || !temps_in(&memory_dir).is_empty() {
        m.temps_seen += 1;
    }

    // 2. The next writer rolls a committed compaction forward and clears the debris.
    let ctx = format!("round {round}, after the next writer opened");
    let w = h
        .store
        .writer(id)
        .unwrap_or_else(|e| panic!("{ctx}: no writer: {e}"));
    assert!(!journal.exists(), "{ctx}: {COMPACTION_JOURNAL} is left");
    assert_no_temps(&dir, &ctx);
    assert_no_temps(&memory_dir, &ctx);
    drop(w);
    m.committed = check_consistent(h, id, m, ev, &ctx, false);
}

/// Checks that the log and memory.json agree with what the children acknowledged; returns the
/// summaries in memory.json.
fn check_consistent(
    h: &TestHome,
    id: &SessionId,
    m: &RewriteModel,
    ev: &RoundEvents,
    ctx: &str,
    torn_allowed: bool,
) -> Vec<String> {
    let log = h.store.messages(id).unwrap();
    let torn_tail_only = log.issues.is_empty()
        || (torn_allowed && log.issues.len() == 1 && log.issues[0].kind == IssueKind::Torn);
    assert!(torn_tail_only, "{ctx}: issues {:?}", log.issues);

    // Memory: the summaries before this round, then this round's — the last one only if its
    // compaction committed.
    let memory = h.store.compaction_memory(id).unwrap();
    let summaries: Vec<String> = memory
        .as_ref()
        .map(|mem| mem.summaries.iter().map(|s| s.content.clone()).collect())
        .unwrap_or_default();
    let mut all = m.committed.clone();
    all.extend(ev.compacts.iter().cloned());
    let without_last = &all[..all
        .len()
        .saturating_sub(usize::from(!ev.compacts.is_empty()))];
    assert!(
        summaries == all || (!ev.last_completed && summaries == without_last),
        "{ctx}: summaries {summaries:?}, expected {all:?} (the last may be missing: {})",
        !ev.last_completed
    );
    if let Some(mem) = &memory {
        assert_eq!(mem.total_compactions, summaries.len() as u64, "{ctx}");
    }

    // The log: in order, nothing invented, and trimmed exactly where the last committed
    // compaction cut it — both or neither.
    let got = ids(&log.messages);
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "{ctx}: messages out of order or duplicated: {got:?}"
    );
    for g in &got {
        assert!(
            m.in_flight.contains(g) || m.acked.contains(g),
            "{ctx}: message {g} was never written"
        );
    }
    let first = summaries.last().map(|s| &m.first_kept[s]);
    if let Some(first) = first {
        assert_eq!(
            got.first(),
            Some(first),
            "{ctx}: memory.json has the summary {:?} but the log is not trimmed to match",
            summaries.last()
        );
    }
    let present: HashSet<&String> = got.iter().collect();
    for a in &m.acked {
        if first.is_none_or(|f| a >= f) {
            assert!(present.contains(a), "{ctx}: acknowledged message {a} lost");
        }
    }
    for msg in &log.messages {
        if m.marked.contains(&msg.id) {
            assert!(
                msg.is_interrupted(),
                "{ctx}: the mark on {} was lost",
                msg.id
            );
        } else if msg.is_interrupted() {
            assert!(
                m.maybe_marked.contains(&msg.id),
                "{ctx}: {} is marked but never was",
                msg.id
            );
        }
        assert!(
            msg.text() == payload(&msg.id, false),
            "{ctx}: {} changed",
            msg.id
        );
    }
    if !m.marked.is_empty() {
        let meta = h.store.meta(id).unwrap();
        assert_eq!(meta.status, SessionStatus::Interrupted, "{ctx}");
    }
    summaries
}

#[test]
fn sigkill_during_rewrites_leaves_old_or_new_never_half() {
    let mut rng = Rng::from_env_or_clock("sigkill_during_rewrites");
    let h = TestHome::new();
    let id = h.create("/work/crash/rewrites");
    let mut m = RewriteModel::default();
    let mut kills = Vec::new();
    for n in [1, 2, 3, 5, 8] {
        kills.push(RewriteKill::AfterEvent("ACK", n, Duration::ZERO));
    }
    for n in [1, 2, 4] {
        kills.push(RewriteKill::AfterEvent("MARKED", n, Duration::ZERO));
    }
    // Through a compaction and past its commit point: a sweep of delays after it starts.
    for (n, us) in (0..40u64).map(|i| (1 + (i % 3) as u32, i * 300)) {
        kills.push(RewriteKill::AfterEvent(
            "COMPACT",
            n,
            Duration::from_micros(us),
        ));
    }
    for _ in 0..6 {
        let n = 1 + rng.below(3) as u32;
        let us = rng.below(6000);
        kills.push(RewriteKill::AfterEvent(
            "COMPACT",
            n,
            Duration::from_micros(us),
        ));
    }
    for _ in 0..6 {
        kills.push(RewriteKill::AfterDelay(Duration::from_micros(
            rng.below(150_000),
        )));
    }
    let rounds = kills.len();
    for (round, kill) in kills.into_iter().enumerate() {
        rewrite_round(&h, &id, &mut m, round as u32, kill);
    }
    assert!(
        !m.committed.is_empty(),
        "no compaction ever committed: the test did not exercise compaction"
    );
    eprintln!(
        "rewrites: {rounds} rounds, {} killed mid-run, {} left a pending journal, {} left temp \
         files, {} compactions committed",
        m.killed,
        m.journals_seen,
        m.temps_seen,
        m.committed.len()
    );
}

/// A crash between the two renames of a committed compaction (the log already replaced, the
/// memory not yet): the next writer finishes it.
#[test]
fn a_compaction_interrupted_between_its_renames_is_finished() {
    let h = TestHome::new();
    let id = h.create("/work/crash/journal");
    let mut w = h.store.writer(&id).unwrap();
    let all: Vec<StoredMessage> = (0..6)
        .map(|n| text_msg(&msg_id(0, n), role_of(n), &payload(&msg_id(0, n), false)))
        .collect();
    for msg in &all {
        w.append(msg).unwrap();
    }
    drop(w);
    let dir = h.dir(&id);
    let kept: Vec<u8> = all[2..].iter().flat_map(StoredMessage::to_line).collect();
    let mut memory = CompactionMemory::new(id.as_str());
    memory.total_compactions = 1;
    memory.summaries.push(freecode_core::memory::Summary {
        id: "summary-x".to_owned(),
        created_at: 1,
        original_message_count: 2,
        original_token_count: 10,
        summary_token_count: 1,
        content: "the summary".to_owned(),
        extra: freecode_core::Extra::new(),
    });
    let memory_dir = h.store.home().memory_dir(&id);
    fs::create_dir_all(&memory_dir).unwrap();
    let memory_tmp = ".memory.json.1.1.tmp";
    fs::write(
        memory_dir.join(memory_tmp),
        serde_json::to_vec_pretty(&memory).unwrap(),
    )
    .unwrap();
    // The log's temp was already renamed into place; the journal still names it.
    fs::write(dir.join(MESSAGES_FILE), &kept).unwrap();
    fs::write(
        dir.join(COMPACTION_JOURNAL),
        format!(r#"{{"messages":".messages.jsonl.1.0.tmp","memory":"{memory_tmp}"}}"#),
    )
    .unwrap();

    drop(h.store.writer(&id).unwrap());
    assert!(!dir.join(COMPACTION_JOURNAL).exists());
    assert!(!memory_dir.join(memory_tmp).exists());
    assert_eq!(fs::read(dir.join(MESSAGES_FILE)).unwrap(), kept);
    let got = h.store.compaction_memory(&id).unwrap().unwrap();
    assert_eq!(
        got.latest_summary().map(|s| s.content.as_str()),
        Some("the summary")
    );
}

// ----- two processes, one session ------------------------------------------------------------

const HOLD_CHILD: &str = "crash::hold_lock_child";

/// Child: takes the session's writer, appends one message and holds the lock until its stdin
/// closes.
#[test]
fn hold_lock_child() {
    if !is_child(HOLD_CHILD) {
        return;
    }
    let (store, id, round) = child_store();
    let mut w = store.writer(&id).unwrap();
    w.append(&text_msg(&msg_id(round, 0), Role::User, "from the holder"))
        .unwrap();
    emit("LOCKED");
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(w);
    emit("RELEASED");
}

fn assert_refused(h: &TestHome, id: &SessionId, holder: &ChildProc) {
    let err = h
        .store
        .writer(id)
        .expect_err("a second writer must be refused");
    match &err {
        StoreError::Locked { id: locked, pid } => {
            assert_eq!(locked, id.as_str());
            assert_eq!(*pid, Some(holder.pid()), "the error names the holder");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&holder.pid().to_string()) && text.contains(id.as_str()),
        "the message names the session and the holder's pid: {text}"
    );

    // Every mutation is refused and changes nothing; reading needs no lock.
    let dir = h.dir(id);
    let before = support::snapshot(&dir);
    let one = text_msg("intruder", Role::User, "must not be written");
    assert!(matches!(
        h.store.append(id, &one),
        Err(StoreError::Locked { .. })
    ));
    assert!(matches!(
        h.store.set_status(id, SessionStatus::Archived),
        Err(StoreError::Locked { .. })
    ));
    assert!(matches!(
        h.store.compact(id, 1, "s"),
        Err(StoreError::Locked { .. })
    ));
    assert!(matches!(h.store.purge(id), Err(StoreError::Locked { .. })));
    assert!(
        support::snapshot(&dir) == before,
        "a refused call changed files"
    );
    assert!(h.store.messages(id).is_ok());
}

#[test]
fn a_second_writer_is_refused_naming_the_holder_until_it_exits_or_dies() {
    let h = TestHome::new();
    let id = h.create("/work/crash/lock");

    // A holder that exits normally.
    let mut holder = spawn_child(HOLD_CHILD, h.tmp.path(), &child_vars(&h, &id, 0));
    holder.events_until("LOCKED");
    assert_refused(&h, &id, &holder);
    assert_eq!(holder.finish(), ["RELEASED"]);
    h.store
        .append(&id, &text_msg("after-exit", Role::Assistant, "ok"))
        .unwrap();

    // A holder killed with SIGKILL: the kernel drops its lock, no stale lock is left.
    let mut holder = spawn_child(HOLD_CHILD, h.tmp.path(), &child_vars(&h, &id, 1));
    holder.events_until("LOCKED");
    assert_refused(&h, &id, &holder);
    assert!(holder.sigkill());
    h.store
        .append(&id, &text_msg("after-kill", Role::Assistant, "ok"))
        .unwrap();

    let log = h.store.messages(&id).unwrap();
    assert_eq!(
        ids(&log.messages),
        [
            msg_id(0, 0),
            "after-exit".into(),
            msg_id(1, 0),
            "after-kill".into()
        ]
    );
    assert_eq!(log.issues, vec![]);
}

const CONTEND_CHILD: &str = "crash::contend_child";
const CONTEND_N: u32 = 150;

fn contend_id(tag: &str, n: u32) -> String {
    format!("{tag}-{n:04}")
}

/// Some lines are large (256 KiB) so that an unserialised writer would interleave visibly.
fn contend_text(tag: &str, n: u32) -> String {
    let len = if n % 10 == 3 {
        256 * 1024
    } else {
        20 + (n as usize * 37) % 500
    };
    tag.repeat(len)
}

/// Child: waits for "go" on stdin, then appends `CONTEND_N` messages, taking the lock for each
/// append (`LockWait::Block`).
#[test]
fn contend_child() {
    if !is_child(CONTEND_CHILD) {
        return;
    }
    let store = support::open_store(Path::new(&child_var("HOME")), LockWait::Block);
    let id = SessionId::new(child_var("SESSION")).unwrap();
    let tag = child_var("TAG");
    emit("READY");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    for n in 0..CONTEND_N {
        let mid = contend_id(&tag, n);
        let mut w = store.writer(&id).unwrap();
        w.append(&text_msg(&mid, role_of(n), &contend_text(&tag, n)))
            .unwrap();
        drop(w);
        emit(&format!("ACK {mid}"));
    }
    emit("DONE");
}

#[test]
fn two_processes_appending_with_blocking_locks_write_whole_lines() {
    let h = TestHome::new();
    let id = h.create("/work/crash/contend");
    let mut children: Vec<(String, ChildProc)> = ["a", "b"]
        .into_iter()
        .map(|tag| {
            let vars = [
                ("HOME", h.root().display().to_string()),
                ("SESSION", id.to_string()),
                ("TAG", tag.to_owned()),
            ];
            (
                tag.to_owned(),
                spawn_child(CONTEND_CHILD, h.tmp.path(), &vars),
            )
        })
        .collect();
    for (_, c) in &children {
        c.events_until("READY");
    }
    for (_, c) in &mut children {
        c.send("go");
    }
    for (tag, c) in &mut children {
        let events = c.finish();
        assert_eq!(events.len() as u32, CONTEND_N + 1, "{tag}: {events:?}");
        assert_eq!(events.last().map(String::as_str), Some("DONE"));
    }

    let raw = fs::read(h.log_path(&id)).unwrap();
    assert_eq!(raw.last(), Some(&b'\n'));
    let lines: Vec<&[u8]> = raw[..raw.len() - 1].split(|&b| b == b'\n').collect();
    assert_eq!(lines.len() as u32, 2 * CONTEND_N);
    for (i, line) in lines.iter().enumerate() {
        if let Err(e) = serde_json::from_slice::<StoredMessage>(line) {
            panic!("line {} is not one whole message: {e}", i + 1);
        }
    }
    let log = h.store.messages(&id).unwrap();
    assert_eq!(log.issues, vec![]);
    for tag in ["a", "b"] {
        let mine: Vec<&StoredMessage> = log
            .messages
            .iter()
            .filter(|m| m.id.starts_with(&format!("{tag}-")))
            .collect();
        let want: Vec<String> = (0..CONTEND_N).map(|n| contend_id(tag, n)).collect();
        assert_eq!(mine.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), want);
        for (n, m) in mine.iter().enumerate() {
            assert!(m.text() == contend_text(tag, n as u32), "{} changed", m.id);
        }
    }
    let switches = log
        .messages
        .windows(2)
        .filter(|w| w[0].id[..1] != w[1].id[..1])
        .count();
    eprintln!("two writers: {switches} hand-overs between the processes");
}

// ----- purge under SIGKILL -------------------------------------------------------------------

const PURGE_CHILD: &str = "crash::purge_child";

/// Child: purges the session.
#[test]
fn purge_child() {
    if !is_child(PURGE_CHILD) {
        return;
    }
    let (store, id, _) = child_store();
    emit("PURGING");
    store.purge(&id).unwrap();
    emit("PURGED");
}

/// A purge killed after it has begun leaves the session half-erased; purging again must finish
/// the job (or the next store operation must): the transcript, the summary and the rollout are
/// what the user asked to erase.
#[test]
fn a_purge_killed_midway_is_finished_by_purging_again() {
    let h = TestHome::new();
    let id = h.create("/work/crash/purge");
    let other = h.create("/work/crash/purge");
    let mut w = h.store.writer(&id).unwrap();
    for n in 0..4 {
        let mid = msg_id(0, n);
        w.append(&text_msg(&mid, role_of(n), &payload(&mid, false)))
            .unwrap();
    }
    assert!(w.compact(1, "secret summary", None).unwrap().compacted);
    drop(w);
    let rollout = h.store.home().rollout_dir(&id);
    fs::create_dir_all(&rollout).unwrap();
    fs::write(rollout.join("events.jsonl"), b"{}\n").unwrap();
    h.store
        .append(&other, &text_msg("other", Role::User, "kept"))
        .unwrap();
    // Many files in the session directory make its removal slow enough to kill the purge
    // during it, once the directory has been renamed out of sight.
    let dir = h.dir(&id);
    for i in 0..20_000 {
        fs::write(dir.join(format!("padding-{i}")), b"").unwrap();
    }

    let mut child = spawn_child(PURGE_CHILD, h.tmp.path(), &child_vars(&h, &id, 0));
    child.events_until("PURGING");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the purge never started; stderr:\n{}",
            child.stderr()
        );
        std::thread::sleep(Duration::from_micros(20));
    }
    child.sigkill();

    // The user purges again.
    match h.store.purge(&id) {
        Ok(_) | Err(StoreError::NotFound { .. }) => {}
        Err(e) => panic!("purging again failed: {e}"),
    }
    let leftovers: Vec<PathBuf> = support::snapshot(h.root())
        .into_keys()
        .filter(|p| p.to_string_lossy().contains(id.as_str()))
        .filter(|p| p.components().count() <= 3)
        .collect();
    assert!(
        leftovers.is_empty(),
        "after a purge killed midway and a second purge, the session is still on disk: \
         {leftovers:?}"
    );
    assert_eq!(ids(&h.store.messages(&other).unwrap().messages), ["other"]);
}
