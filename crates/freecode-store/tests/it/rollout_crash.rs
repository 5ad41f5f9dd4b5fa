//! The rollout log under stress with real processes (this binary, re-executed as children):
//!
//! - two processes recording into one log, each opening a recorder, writing a burst and dropping
//!   it, over and over: the lock serialises them, so every line parses, `seq` is unique and
//!   strictly increasing in file order and ids increase;
//! - a recording child killed with SIGKILL at many points, some in the middle of the `write` of
//!   a ~1 MiB `function.output`: the log reopens, `seq` resumes after the last complete event, a
//!   torn tail is fenced (reported by offset, nothing glued onto it), every acknowledged event
//!   is there intact, and later events append cleanly;
//! - a recorder with its buffering window (the default) killed at random moments while it
//!   records with pauses like a provider's or a tool's: every `model.request` and
//!   `function.call` it returned is in the log, `seq` stays contiguous, a torn tail is at most
//!   the last line, and every event acknowledged more than the window (plus slack) before the
//!   kill is there — so the background flusher writes without waiting for another event;
//! - a ~2 GB log folds (trace and replay) in a child whose peak RSS stays far below the file.
//!
//! "Acknowledged" means the child printed the event's seq after the recorder call returned.
//! Temporary homes live under the cargo target directory (real disk), not `/tmp`.

use std::collections::HashMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use freecode_core::SessionId;
use freecode_core::rollout::replay::ReplayBuilder;
use freecode_core::rollout::trace::{SpanStatus, TraceBuilder};
use freecode_core::rollout::ulid;
use freecode_core::rollout::{DenySource, Event, EventKind};
use freecode_store::lock::LockWait;
use freecode_store::rollout::{
    FLUSH_WINDOW, ModelRequest, ModelResponse, Recorder, RecorderConfig, events_path, read_events,
};
use freecode_store::{Durability, Home, IssueKind, LineIssue};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{CHILD_ENV, Rng, after_last_newline, child_var, emit, is_child, spawn_child};

// ----- shared ---------------------------------------------------------------------------------

/// A fresh directory under the cargo target directory (real disk), removed on drop.
fn scratch(prefix: &str) -> TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    fs::create_dir_all(base).unwrap();
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .unwrap()
}

fn rec_config(durability: Durability, lock_wait: LockWait) -> RecorderConfig {
    RecorderConfig {
        enabled: true,
        durability,
        lock_wait,
        ..RecorderConfig::disabled()
    }
}

fn child_home() -> (Home, SessionId) {
    (
        Home::new(child_var("HOME")),
        SessionId::new(child_var("SESSION")).unwrap(),
    )
}

/// Every event of the log, with the read report; the log must exist.
fn read_all(path: &Path) -> (Vec<Event>, Vec<LineIssue>, u64) {
    let mut events = Vec::new();
    let report = read_events(path, |e| events.push(e))
        .unwrap()
        .unwrap_or_else(|| panic!("{} does not exist", path.display()));
    assert_eq!(report.events, events.len() as u64);
    (events, report.issues, report.unknown)
}

fn turn_of(e: &Event) -> &str {
    e.kind.turn_id().unwrap_or("")
}

/// Asserts seq is 1, 2, 3, … in file order and ids strictly increase.
fn assert_seq_and_ids(events: &[Event], ctx: &str) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e.seq,
            i as u64 + 1,
            "{ctx}: event #{i} in file order ({} {:?}) has the wrong seq; seqs around it: {:?}",
            e.kind.type_name(),
            turn_of(e),
            events[i.saturating_sub(3)..(i + 3).min(events.len())]
                .iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        );
    }
    for w in events.windows(2) {
        assert!(
            w[0].id < w[1].id,
            "{ctx}: ids do not increase: seq {} has {} and seq {} has {}",
            w[0].seq,
            w[0].id,
            w[1].seq,
            w[1].id
        );
    }
}

// ----- (a) two processes, one log -------------------------------------------------------------

const INTERLEAVE_CHILD: &str = "rollout_crash::interleave_child";
/// Recorders each child opens (and drops) in turn.
const BURSTS: u32 = 30;
/// Steps per burst; each writes five events.
const BURST_STEPS: u32 = 8;
const EVENTS_PER_STEP: u32 = 5;

/// Child: waits for "GO" on stdin, then opens a recorder (waiting for the lock), records a burst,
/// drops it, and again, reporting each burst's seq range.
#[test]
fn interleave_child() {
    if !is_child(INTERLEAVE_CHILD) {
        return;
    }
    let (home, id) = child_home();
    let who = child_var("WHO");
    emit("READY");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    for b in 0..BURSTS {
        let mut r = Recorder::open(&home, &id, rec_config(Durability::Never, LockWait::Block))
            .expect("open a recorder, waiting for the other process");
        let start = r.seq();
        for k in 0..BURST_STEPS {
            let turn = format!("{who}-b{b:03}-k{k:03}");
            r.turn_started(&turn).unwrap();
            let call = r
                .model_request(
                    &turn,
                    ModelRequest {
                        provider: "p".into(),
                        model: "m".into(),
                        ..Default::default()
                    },
                )
                .unwrap();
            call.response(&mut r, ModelResponse::default()).unwrap();
            let tool = r
                .function_call(&turn, "bash", json!({"who": who, "b": b, "k": k}))
                .unwrap();
            tool.output(&mut r, &format!("{turn} done"), false).unwrap();
        }
        assert_eq!(r.seq(), start + u64::from(BURST_STEPS * EVENTS_PER_STEP));
        emit(&format!("BURST {b} {start} {}", r.seq()));
        drop(r);
        // Give the waiting process its chance at the lock.
        std::thread::sleep(Duration::from_millis(1));
    }
    emit("DONE");
}

#[test]
fn two_processes_interleave_whole_recorders_with_unique_increasing_seq() {
    let tmp = scratch("rollout-interleave-");
    let home = Home::new(tmp.path().join("home"));
    let id = SessionId::new("interleaved-session").unwrap();
    let mut kids: Vec<_> = ["A", "B"]
        .iter()
        .map(|who| {
            spawn_child(
                INTERLEAVE_CHILD,
                tmp.path(),
                &[
                    ("HOME", home.root().display().to_string()),
                    ("SESSION", id.to_string()),
                    ("WHO", (*who).to_owned()),
                ],
            )
        })
        .collect();
    for k in &kids {
        k.events_until("READY");
    }
    for k in &mut kids {
        k.send("GO");
    }
    // who -> burst -> (start, end) as the child saw it.
    let mut ranges: HashMap<(String, u32), (u64, u64)> = HashMap::new();
    for (k, who) in kids.iter_mut().zip(["A", "B"]) {
        let events = k.finish();
        assert_eq!(events.last().map(String::as_str), Some("DONE"));
        for e in &events {
            if let Some(rest) = e.strip_prefix("BURST ") {
                let v: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
                ranges.insert((who.to_owned(), v[0] as u32), (v[1], v[2]));
            }
        }
    }
    assert_eq!(ranges.len() as u32, 2 * BURSTS);

    let path = events_path(&home, &id);
    let bytes = fs::read(&path).unwrap();
    assert!(bytes.ends_with(b"\n"));
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if n == newlines {
            assert!(line.is_empty());
            continue;
        }
        let v: Value = serde_json::from_slice(line)
            .unwrap_or_else(|e| panic!("line {} does not parse: {e}", n + 1));
        assert!(v["type"].is_string() && v["seq"].is_u64(), "line {}", n + 1);
    }
    let (events, issues, unknown) = read_all(&path);
    assert_eq!((issues, unknown), (vec![], 0));
    assert_eq!(
        events.len() as u32,
        2 * BURSTS * BURST_STEPS * EVENTS_PER_STEP
    );
    assert_seq_and_ids(&events, "interleaved log");

    // Recorder granularity: each burst is one contiguous run of seqs, as its child reported.
    let burst_of = |e: &Event| -> (String, u32) {
        let t = turn_of(e);
        let (who, rest) = t
            .split_once("-b")
            .unwrap_or_else(|| panic!("turn id {t:?}"));
        (who.to_owned(), rest[..3].parse().unwrap())
    };
    let mut runs: Vec<((String, u32), u64, u64)> = Vec::new();
    for e in &events {
        let key = burst_of(e);
        match runs.last_mut() {
            Some((k, _, end)) if *k == key => *end = e.seq,
            _ => runs.push((key, e.seq, e.seq)),
        }
    }
    assert_eq!(
        runs.len() as u32,
        2 * BURSTS,
        "every burst must be one contiguous run"
    );
    for (key, first, last) in &runs {
        assert_eq!(
            ranges.get(key),
            Some(&(first - 1, *last)),
            "burst {key:?}: the child's seq range"
        );
    }
    let switches = runs.windows(2).filter(|w| w[0].0.0 != w[1].0.0).count();
    eprintln!(
        "interleave: {} events, {} runs, {switches} switches between the processes",
        events.len(),
        runs.len()
    );
    assert!(
        switches >= 2,
        "the two processes did not interleave ({switches} switches)"
    );
}

// ----- (b) SIGKILL while recording (no buffering window) ------------------------------------------------------------

const RECORD_CHILD: &str = "rollout_crash::record_child";
/// Size of a big `function.output`: large enough that a kill can land inside its `write`.
const BIG_OUTPUT: usize = 1 << 20;
/// Events a child writes at most (it is normally killed long before).
const SMALL_MAX: u64 = 20_000;
const BIG_MAX: u64 = 90;

fn pattern_len(big: bool) -> u64 {
    if big { 3 } else { 7 }
}

/// The turn id of turn `t` of `round`.
fn turn_id(round: u32, t: u64) -> String {
    format!("r{round:03}-t{t:05}")
}

/// The output of turn `t` of `round`: derived from both, so a read-back is checked byte for byte.
fn output_text(round: u32, t: u64, big: bool) -> String {
    let len = if big {
        BIG_OUTPUT
    } else {
        100 + ((u64::from(round) * 131 + t * 17) % 900) as usize
    };
    let mut s = format!("{}:", turn_id(round, t));
    while s.len() < len {
        s.push_str("line \"quoted\"\tand\\n escaped\n0123456789abcdef-");
    }
    s.truncate(len);
    s
}

/// Checks that `e` is the `i`th event (0-based) a child of `round` writes.
fn check_child_event(e: &Event, round: u32, big: bool, i: u64, ctx: &str) {
    let p = pattern_len(big);
    let (t, pos) = (i / p, i % p);
    let turn = turn_id(round, t);
    let ctx = format!("{ctx}: event seq {} (round {round}, #{i})", e.seq);
    let want_type = if big {
        ["turn.started", "function.call", "function.output"][pos as usize]
    } else {
        [
            "turn.started",
            "model.request",
            "model.first_token",
            "model.response",
            "function.call",
            "function.output",
            if t % 2 == 0 {
                "function.denied"
            } else {
                "compact.occurred"
            },
        ][pos as usize]
    };
    assert_eq!(e.kind.type_name(), want_type, "{ctx}");
    match &e.kind {
        EventKind::CompactOccurred {
            before_tokens,
            after_tokens,
        } => assert_eq!(
            (*before_tokens, *after_tokens),
            (t, u64::from(round)),
            "{ctx}"
        ),
        EventKind::FunctionCall { args, .. } => {
            assert_eq!(turn_of(e), turn, "{ctx}");
            assert_eq!(args, &json!({"round": round, "turn": t}), "{ctx}");
        }
        EventKind::FunctionOutput { output, .. } => {
            assert_eq!(turn_of(e), turn, "{ctx}");
            assert!(
                *output == output_text(round, t, big),
                "{ctx}: the output was changed ({} bytes)",
                output.len()
            );
        }
        EventKind::FunctionDenied { reason, .. } => {
            assert_eq!(turn_of(e), turn, "{ctx}");
            assert_eq!(reason, &format!("no {turn}"), "{ctx}");
        }
        _ => assert_eq!(turn_of(e), turn, "{ctx}"),
    }
}

/// Child: opens a recorder and records in a loop, printing `ACK <seq> <µs>` after each call
/// returned; before each big output it prints `WRITING <file length>`.
#[test]
fn record_child() {
    if !is_child(RECORD_CHILD) {
        return;
    }
    let (home, id) = child_home();
    let round: u32 = child_var("ROUND").parse().unwrap();
    let big = child_var("MODE") == "big";
    let durability = if child_var("DURABILITY") == "every" {
        Durability::EveryAppend
    } else {
        Durability::Never
    };
    // The parent has dropped its recorder: the lock must be free. No buffering window: every
    // acknowledged event is written (the buffered recorder is killed in section (c)).
    let config = RecorderConfig {
        flush_window: Duration::ZERO,
        ..rec_config(durability, LockWait::Fail)
    };
    let mut r = Recorder::open(&home, &id, config).unwrap();
    let start = r.seq();
    emit(&format!("READY {start}"));
    let max = if big { BIG_MAX } else { SMALL_MAX };
    let mut n = 0u64;
    let mut ack = |r: &Recorder, t0: Instant| {
        n += 1;
        assert_eq!(r.seq(), start + n);
        emit(&format!("ACK {} {}", r.seq(), t0.elapsed().as_micros()));
    };
    for t in 0..max / pattern_len(big) {
        let turn = turn_id(round, t);
        let t0 = Instant::now();
        r.turn_started(&turn).unwrap();
        ack(&r, t0);
        if !big {
            let t0 = Instant::now();
            let mut call = r
                .model_request(
                    &turn,
                    ModelRequest {
                        provider: "anthropic".into(),
                        model: "claude".into(),
                        message_count: t,
                        tool_count: 15,
                        prompt_chars: 48_000,
                        streamed: true,
                    },
                )
                .unwrap();
            ack(&r, t0);
            let t0 = Instant::now();
            call.first_token(&mut r).unwrap();
            ack(&r, t0);
            let t0 = Instant::now();
            call.response(
                &mut r,
                ModelResponse {
                    input_tokens: Some(12_000),
                    output_tokens: Some(200),
                    tool_calls: vec!["bash".into()],
                    ..Default::default()
                },
            )
            .unwrap();
            ack(&r, t0);
        }
        let t0 = Instant::now();
        let tool = r
            .function_call(&turn, "bash", json!({"round": round, "turn": t}))
            .unwrap();
        ack(&r, t0);
        let out = output_text(round, t, big);
        if big {
            let len = fs::metadata(r.path()).unwrap().len();
            emit(&format!("WRITING {len}"));
        }
        let t0 = Instant::now();
        tool.output(&mut r, &out, false).unwrap();
        ack(&r, t0);
        if !big {
            let t0 = Instant::now();
            if t % 2 == 0 {
                r.deny(
                    &turn,
                    "edit",
                    json!({"filePath": "a.rs"}),
                    DenySource::Mode,
                    &format!("no {turn}"),
                )
                .unwrap();
            } else {
                r.compact_occurred(t, u64::from(round)).unwrap();
            }
            ack(&r, t0);
            if durability == Durability::Never && t % 5 == 4 {
                r.sync().unwrap();
            }
        }
    }
    emit("DONE");
}

#[derive(Clone, Copy)]
enum Kill {
    /// After the child acknowledged this many events (0: once its recorder is open).
    AfterAcks(u64),
    /// This long after the child's recorder is open.
    AfterDelay(Duration),
    /// Big mode: after `n` acks, at the next big write, as soon as the file starts to grow
    /// (the kernel extends the file page by page inside one `write`).
    WhenGrowing(u64),
    /// Big mode: after `n` acks, at the next big write, `frac` of the way through the time the
    /// last big output took.
    IntoWrite(u64, f64),
}

/// Who wrote the event with a given seq.
#[derive(Debug, Clone, Copy)]
enum Owner {
    /// The `i`th event (0-based) of a child in `round`.
    Child { round: u32, big: bool, i: u64 },
    /// The parent's event after `round`.
    Parent { round: u32 },
}

struct KillRun {
    tmp: TempDir,
    home: Home,
    id: SessionId,
    path: PathBuf,
    rounds: u32,
    /// `owners[seq - 1]`.
    owners: Vec<Owner>,
    /// Fenced fragments so far: (line, offset, len).
    fenced: Vec<(u64, u64, u64)>,
    /// The log after the last check; the next must start with it (never rewritten).
    prev: Vec<u8>,
    killed: u32,
    torn: u32,
    acked: u64,
}

impl KillRun {
    fn new() -> Self {
        let tmp = scratch("rollout-kill-");
        let home = Home::new(tmp.path().join("home"));
        let id = SessionId::new("killed-recorder").unwrap();
        let path = events_path(&home, &id);
        Self {
            tmp,
            home,
            id,
            path,
            rounds: 0,
            owners: Vec::new(),
            fenced: Vec::new(),
            prev: Vec::new(),
            killed: 0,
            torn: 0,
            acked: 0,
        }
    }

    fn round(&mut self, big: bool, every: bool, kill: Kill) {
        let round = self.rounds;
        self.rounds += 1;
        let mut child = spawn_child(
            RECORD_CHILD,
            self.tmp.path(),
            &[
                ("HOME", self.home.root().display().to_string()),
                ("SESSION", self.id.to_string()),
                ("ROUND", round.to_string()),
                ("MODE", if big { "big" } else { "small" }.to_owned()),
                (
                    "DURABILITY",
                    if every { "every" } else { "never" }.to_owned(),
                ),
            ],
        );
        let ready = child
            .next_event()
            .unwrap_or_else(|| panic!("round {round}: child exited early:\n{}", child.stderr()));
        let start: u64 = ready
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("round {round}: {ready:?}"))
            .parse()
            .unwrap();
        assert_eq!(
            start,
            self.owners.len() as u64,
            "round {round}: resumed seq"
        );
        let mut events = Vec::new();
        let acks_in = |events: &[String]| events.iter().filter(|e| e.starts_with("ACK ")).count();
        let wait_acks = |child: &crate::support::ChildProc, events: &mut Vec<String>, n| {
            while (acks_in(events) as u64) < n {
                let Some(e) = child.next_event() else { break };
                events.push(e);
            }
        };
        match kill {
            Kill::AfterAcks(n) => wait_acks(&child, &mut events, n),
            Kill::AfterDelay(d) => std::thread::sleep(d),
            Kill::WhenGrowing(n) | Kill::IntoWrite(n, _) => {
                wait_acks(&child, &mut events, n);
                // The next big write, and how long the last one took.
                let mut last_big = Duration::from_millis(20);
                let mut before = None;
                while before.is_none() {
                    let Some(e) = child.next_event() else { break };
                    if let Some(len) = e.strip_prefix("WRITING ") {
                        before = Some(len.parse::<u64>().unwrap());
                    } else if let Some(rest) = e.strip_prefix("ACK ") {
                        let seq: u64 = rest.split(' ').next().unwrap().parse().unwrap();
                        if (seq - start).is_multiple_of(3) {
                            let us: u64 = rest.split(' ').nth(1).unwrap().parse().unwrap();
                            last_big = Duration::from_micros(us);
                        }
                    }
                    events.push(e);
                }
                match (kill, before) {
                    (Kill::WhenGrowing(_), Some(len)) => {
                        let t0 = Instant::now();
                        while fs::metadata(&self.path).map_or(0, |m| m.len()) <= len
                            && t0.elapsed() < Duration::from_secs(2)
                        {
                            std::hint::spin_loop();
                        }
                    }
                    (Kill::IntoWrite(_, frac), Some(_)) => {
                        std::thread::sleep(last_big.mul_f64(frac))
                    }
                    _ => {}
                }
            }
        }
        let killed = child.sigkill();
        events.extend(child.rest());
        let acks: Vec<u64> = events
            .iter()
            .filter_map(|e| e.strip_prefix("ACK "))
            .map(|r| r.split(' ').next().unwrap().parse().unwrap())
            .collect();
        let want: Vec<u64> = (start + 1..=start + acks.len() as u64).collect();
        assert_eq!(acks, want, "round {round}: the child's acknowledgements");
        self.killed += u32::from(killed);
        self.acked += acks.len() as u64;
        self.check_and_append(round, big, start, acks.len() as u64, killed);
    }

    /// After a kill: the log reads with at most a torn tail as new issue, every acknowledged
    /// event is there intact, a new recorder resumes after the last complete event and fences
    /// the torn tail, and its event appends cleanly.
    fn check_and_append(&mut self, round: u32, big: bool, start: u64, acks: u64, killed: bool) {
        let ctx = format!(
            "round {round} ({})",
            if big { "big outputs" } else { "small events" }
        );
        let before = fs::read(&self.path).unwrap();
        assert!(
            before.starts_with(&self.prev),
            "{ctx}: the log was rewritten, not appended to"
        );
        let (events, issues, unknown) = read_all(&self.path);
        assert_eq!(unknown, 0, "{ctx}");

        let cut = after_last_newline(&before);
        let torn_len = (before.len() - cut) as u64;
        let lines = before.iter().filter(|&&b| b == b'\n').count() as u64;
        let mut want_issues: Vec<(u64, u64, u64, bool)> = self
            .fenced
            .iter()
            .map(|&(l, o, n)| (l, o, n, false))
            .collect();
        if torn_len > 0 {
            self.torn += 1;
            want_issues.push((lines + 1, cut as u64, torn_len, true));
        }
        let got_issues: Vec<(u64, u64, u64, bool)> = issues
            .iter()
            .map(|i| (i.line, i.offset, i.len, i.kind == IssueKind::Torn))
            .collect();
        assert_eq!(
            got_issues, want_issues,
            "{ctx}: issues must be the fenced fragments plus at most a torn tail ({issues:?})"
        );

        // Complete events: seq 1..=n in order, the earlier ones unchanged, then this round's.
        assert_seq_and_ids(&events, &ctx);
        let n = events.len() as u64;
        assert!(
            n >= start + acks,
            "{ctx}: acknowledged events lost: {} of this round's {acks} acknowledged are there",
            n.saturating_sub(start)
        );
        assert!(
            n <= start + acks + u64::from(killed),
            "{ctx}: {} events of this round, {acks} acknowledged: more than one in flight",
            n - start
        );
        for i in 0..n - start {
            self.owners.push(Owner::Child { round, big, i });
        }
        for e in &events {
            match self.owners[(e.seq - 1) as usize] {
                Owner::Child { round, big, i } => check_child_event(e, round, big, i, &ctx),
                Owner::Parent { round } => {
                    assert_eq!(
                        e.kind,
                        EventKind::TurnStarted {
                            turn_id: format!("parent-{round:03}")
                        },
                        "{ctx}"
                    );
                }
            }
        }

        if torn_len > 0 && round % 2 == 1 {
            // A recorder that fences the tail and is gone before its first event: the next one
            // resumes the same seq and does not fence again.
            let r = Recorder::open(
                &self.home,
                &self.id,
                rec_config(Durability::Never, LockWait::Fail),
            )
            .unwrap_or_else(|e| panic!("{ctx}: no recorder after the kill: {e}"));
            assert_eq!(
                r.seq(),
                n,
                "{ctx}: seq resumes after the last complete event"
            );
            drop(r);
            let mut fenced = before.clone();
            fenced.push(b'\n');
            assert!(
                fs::read(&self.path).unwrap() == fenced,
                "{ctx}: opening a recorder only fences the torn tail"
            );
        }
        // A new recorder: seq after the last complete event, the torn tail fenced.
        let mut r = Recorder::open(
            &self.home,
            &self.id,
            rec_config(Durability::EveryAppend, LockWait::Fail),
        )
        .unwrap_or_else(|e| panic!("{ctx}: no recorder after the kill: {e}"));
        assert_eq!(
            r.seq(),
            n,
            "{ctx}: seq resumes after the last complete event"
        );
        let rec = r
            .record(EventKind::TurnStarted {
                turn_id: format!("parent-{round:03}"),
            })
            .unwrap()
            .unwrap();
        assert_eq!(rec.seq, n + 1, "{ctx}");
        drop(r);
        self.owners.push(Owner::Parent { round });

        let after = fs::read(&self.path).unwrap();
        let mut want = before.clone();
        if torn_len > 0 {
            want.push(b'\n');
        }
        assert!(
            after.starts_with(&want),
            "{ctx}: the log after reopening must be the old bytes{} then the new line",
            if torn_len > 0 {
                " plus a fencing newline"
            } else {
                ""
            }
        );
        let new_line = &after[want.len()..];
        assert!(
            new_line.ends_with(b"\n") && !new_line[..new_line.len() - 1].contains(&b'\n'),
            "{ctx}: one new line"
        );
        let v: Value = serde_json::from_slice(new_line)
            .unwrap_or_else(|e| panic!("{ctx}: the new event was glued onto something: {e}"));
        assert_eq!(v["seq"], json!(n + 1), "{ctx}");
        if torn_len > 0 {
            self.fenced.push((lines + 1, cut as u64, torn_len));
        }
        let (events2, issues2, _) = read_all(&self.path);
        assert_eq!(
            events2.len() as u64,
            n + 1,
            "{ctx}: the new event reads back"
        );
        assert_seq_and_ids(&events2, &ctx);
        let got: Vec<(u64, u64, u64)> = issues2.iter().map(|i| (i.line, i.offset, i.len)).collect();
        assert_eq!(
            got, self.fenced,
            "{ctx}: fenced fragments, by line and offset"
        );
        assert!(
            issues2
                .iter()
                .all(|i| matches!(i.kind, IssueKind::Malformed(_))),
            "{ctx}: a fenced fragment is a malformed line, no longer a torn tail: {issues2:?}"
        );
        self.prev = after;
    }
}

#[test]
fn sigkill_while_recording_loses_no_acknowledged_event_and_fences_torn_tails() {
    let mut rng = Rng::from_env_or_clock("sigkill_while_recording");
    let mut run = KillRun::new();
    // (kill kind, rounds, torn tails)
    let mut tally: Vec<(&str, u32, u32)> = Vec::new();
    let mut round = |run: &mut KillRun, what: &'static str, big: bool, every: bool, kill: Kill| {
        let torn = run.torn;
        run.round(big, every, kill);
        let torn = u32::from(run.torn > torn);
        match tally.iter_mut().find(|t| t.0 == what) {
            Some(t) => {
                t.1 += 1;
                t.2 += torn;
            }
            None => tally.push((what, 1, torn)),
        }
    };
    // Small events, by count, alternating fsync-every-event and never.
    for (k, n) in [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144]
        .into_iter()
        .enumerate()
    {
        round(
            &mut run,
            "small, after n acks",
            false,
            k % 2 == 0,
            Kill::AfterAcks(n),
        );
    }
    // Small events, by time.
    for k in 0..6 {
        let d = Duration::from_micros(rng.below(40_000));
        round(
            &mut run,
            "small, after a delay",
            false,
            k % 2 == 1,
            Kill::AfterDelay(d),
        );
    }
    // ~1 MiB outputs: by count, then aimed into the write.
    for n in [0, 2, 4] {
        round(
            &mut run,
            "big, after n acks",
            true,
            false,
            Kill::AfterAcks(n),
        );
    }
    for k in 0..8 {
        let n = rng.below(3) * 3;
        round(
            &mut run,
            "big, when the file grows",
            true,
            false,
            Kill::WhenGrowing(n),
        );
        if k % 2 == 1 {
            // Small events after a fenced fragment.
            let n = rng.below(20);
            round(
                &mut run,
                "small, after a fenced tail",
                false,
                false,
                Kill::AfterAcks(n),
            );
        }
    }
    for _ in 0..6 {
        let frac = 0.5 + rng.below(60) as f64 / 100.0;
        let kill = Kill::IntoWrite(rng.below(2) * 3, frac);
        round(&mut run, "big, timed into the write", true, false, kill);
    }
    // On a busy machine the kill can miss the write; aim again until two lines tore.
    for _ in 0..16 {
        if run.torn >= 2 {
            break;
        }
        round(
            &mut run,
            "big, when the file grows (extra)",
            true,
            false,
            Kill::WhenGrowing(0),
        );
    }
    eprintln!(
        "sigkill_while_recording: {} rounds, {} killed, {} torn tails fenced, {} acknowledged \
         events, log {} bytes; by kill (rounds, torn): {tally:?}",
        run.rounds,
        run.killed,
        run.torn,
        run.acked,
        run.prev.len()
    );
    assert!(run.killed >= 20, "only {} kills landed", run.killed);
    assert!(
        run.torn >= 1,
        "no kill tore a line: the fencing path was not exercised"
    );
}

// ----- bugs found ------------------------------------------------------------------------------

/// A kill can stop a `write` at a page boundary, and the line's final `\n` can be the first
/// byte of the next page: the tail is then a complete event without its newline. The recorder
/// ignores it when resuming `seq` but fences it with a newline — turning it into a readable event
/// — and writes the next event with the same `seq`.
#[test]
fn a_torn_tail_that_is_a_whole_event_does_not_duplicate_its_seq() {
    let tmp = scratch("rollout-torn-whole-");
    let home = Home::new(tmp.path().join("home"));
    let id = SessionId::new("torn-whole").unwrap();
    {
        let mut r =
            Recorder::open(&home, &id, rec_config(Durability::Never, LockWait::Fail)).unwrap();
        for t in 0..4 {
            r.turn_started(&format!("turn-{t}")).unwrap();
        }
    }
    // What the kill left: event 4 written up to, not including, its newline.
    let path = events_path(&home, &id);
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(f.metadata().unwrap().len() - 1).unwrap();
    drop(f);
    {
        let mut r =
            Recorder::open(&home, &id, rec_config(Durability::Never, LockWait::Fail)).unwrap();
        r.turn_started("turn-after").unwrap();
    }
    let (events, _, _) = read_all(&path);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "seq must be unique and increasing, got {seqs:?}"
    );
}

const FAILED_WRITE_CHILD: &str = "rollout_crash::failed_write_child";

/// Child (SIGXFSZ ignored): records an event, lowers its own file-size limit so the next
/// event's `write` is cut short and fails, restores the limit and records again.
#[test]
fn failed_write_child() {
    if !is_child(FAILED_WRITE_CHILD) {
        return;
    }
    let (home, id) = child_home();
    // `direct`: no window, the event's own `write` fails; `buffered`: the event is buffered and
    // the failure comes from the `flush` that writes it.
    let buffered = child_var("MODE") == "buffered";
    let config = RecorderConfig {
        flush_window: if buffered {
            FLUSH_WINDOW
        } else {
            Duration::ZERO
        },
        ..rec_config(Durability::Never, LockWait::Fail)
    };
    let mut r = Recorder::open(&home, &id, config).unwrap();
    r.turn_started("before").unwrap();
    r.flush().unwrap();
    let len = fs::metadata(r.path()).unwrap().len();
    let prlimit = |soft: &str| {
        let ok = Command::new("prlimit")
            .arg(format!("--pid={}", std::process::id()))
            .arg(format!("--fsize={soft}:unlimited"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "prlimit --fsize={soft}");
    };
    prlimit(&(len + 40).to_string());
    let mut err = r.turn_started(&"cut-short-".repeat(20));
    if buffered {
        assert!(err.is_ok(), "a buffered event does not write");
        err = r.flush();
    }
    emit(&format!("FAILED {}", err.is_err()));
    assert_eq!(r.seq(), 1, "the lost event's seq is given again");
    prlimit("unlimited");
    r.turn_started("after").unwrap();
    r.flush().unwrap();
    emit(&format!("ACK {}", r.seq()));
}

/// A `write` that fails part-way (disk full, file-size limit, I/O error) leaves a fragment; the
/// same recorder's next event is appended right after it, glued into one malformed line, so an
/// acknowledged event is lost to every reader.
#[test]
fn an_event_after_a_failed_partial_write_is_not_glued_onto_the_fragment() {
    if !freecode_testkit::prerequisite(
        freecode_testkit::runs("prlimit", "--version"),
        "util-linux's prlimit",
        "scripts/test-deps installs it: apt-get install util-linux",
    ) {
        return;
    }
    for mode in ["direct", "buffered"] {
        failed_partial_write(mode);
    }
}

fn failed_partial_write(mode: &str) {
    let tmp = scratch("rollout-failed-write-");
    let home = Home::new(tmp.path().join("home"));
    let id = SessionId::new("failed-write").unwrap();
    // Ignore SIGXFSZ (an ignored disposition survives exec), so the write fails with EFBIG.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; exec \"$0\" \"$@\"")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            FAILED_WRITE_CHILD,
            "--nocapture",
            "--include-ignored",
        ])
        .env(CHILD_ENV, FAILED_WRITE_CHILD)
        .env("FREECODE_IT_HOME", home.root())
        .env("FREECODE_IT_SESSION", id.as_str())
        .env("FREECODE_IT_MODE", mode)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("FAILED true"),
        "{mode}: the cut write must fail: {stdout}"
    );
    let (events, issues, _) = read_all(&events_path(&home, &id));
    let turns: Vec<&str> = events.iter().map(turn_of).collect();
    assert_eq!(
        turns,
        ["before", "after"],
        "{mode}: the acknowledged event after the failed write must read back; issues: {issues:?}"
    );
    assert_seq_and_ids(&events, mode);
}

// ----- (c) a 2 GB log folds in bounded memory -------------------------------------------------

const FOLD_CHILD: &str = "rollout_crash::fold_child";
/// Turns in the big log; each carries a ~60 KiB sub-agent result that neither fold keeps.
const BIG_TURNS: u64 = 32_000;
const BULK_BYTES: usize = 54 * 1024;
/// Every this many turns, one output of `HUGE_OUTPUT` bytes (a long line the reader must carry).
const HUGE_EVERY: u64 = 8_000;
const HUGE_OUTPUT: usize = 4 << 20;
/// The peak RSS the fold may reach, far below the file.
const PEAK_BOUND_KIB: u64 = 256 * 1024;
const MIN_FREE_BYTES: u64 = 6_000_000_000;

/// What the generator wrote, which the folds must find.
#[derive(Debug, Default)]
struct BigLog {
    bytes: u64,
    lines: u64,
    events: u64,
    turns: u64,
    model_ok: u64,
    model_err: u64,
    compactions: u64,
    tokens_before: u64,
    denied: u64,
    redirects_skipped: u64,
    parse_errors: u64,
    output_bytes: u64,
    input_tokens: u64,
    unknown: u64,
    /// (line, offset) of the malformed line in the middle.
    malformed: (u64, u64),
    /// (line, offset, len) of the torn tail.
    torn: (u64, u64, u64),
}

struct LineWriter<W: Write> {
    out: W,
    log: BigLog,
    buf: Vec<u8>,
    seq: u64,
    ts: i64,
}

impl<W: Write> LineWriter<W> {
    /// Writes one event line: the base fields, then `members` (the type's own fields as JSON
    /// text, each starting with a comma) in order.
    fn event(&mut self, ty: &str, members: &[&str]) {
        self.seq += 1;
        self.ts += 7;
        self.buf.clear();
        write!(
            self.buf,
            r#"{{"type":"{ty}","id":"{}","seq":{},"aggregateID":"big-log","timestamp":{}"#,
            ulid::encode(self.ts as u64, u128::from(self.seq)),
            self.seq,
            self.ts
        )
        .unwrap();
        for m in members {
            self.buf.extend_from_slice(m.as_bytes());
        }
        self.buf.extend_from_slice(b"}\n");
        self.flush_line();
        self.log.events += 1;
    }

    /// Writes `bytes` as a line of its own (with a newline when `terminated`).
    fn raw(&mut self, bytes: &[u8], terminated: bool) {
        self.buf.clear();
        self.buf.extend_from_slice(bytes);
        if terminated {
            self.buf.push(b'\n');
        }
        self.flush_line();
    }

    fn flush_line(&mut self) {
        self.out.write_all(&self.buf).unwrap();
        self.log.bytes += self.buf.len() as u64;
        self.log.lines += 1;
    }
}

/// JSON string contents (escaped, without quotes) of at least `len` decoded bytes, like a source
/// file's text; and its decoded length.
fn escaped_text(len: usize) -> (String, usize) {
    let unit = r#"    let x = parse(\"line\")?;\n\tif x > 0 { return Ok(x); }\n"#;
    let decoded: String = serde_json::from_str(&format!("\"{unit}\"")).unwrap();
    let reps = len / decoded.len() + 1;
    (unit.repeat(reps), reps * decoded.len())
}

fn write_big_log(path: &Path) -> BigLog {
    let file = fs::File::create(path).unwrap();
    let mut w = LineWriter {
        out: BufWriter::with_capacity(8 << 20, file),
        log: BigLog::default(),
        buf: Vec::with_capacity(1 << 20),
        seq: 0,
        ts: 1_760_000_000_000,
    };
    let (bulk, _) = escaped_text(BULK_BYTES);
    let task = "Find every caller of appendMessage and explain it. ".repeat(20);
    let (huge, huge_len) = escaped_text(HUGE_OUTPUT);
    let output = "x".repeat(300);
    for t in 0..BIG_TURNS {
        let tid = format!("turn-{t}");
        let req = |tid: &str| {
            format!(
                r#","turnId":"{tid}","provider":"anthropic","model":"claude","messageCount":{t},"toolCount":15,"promptChars":48000,"streamed":true"#
            )
        };
        w.event("model.request", &[&req(&tid)]);
        w.event(
            "model.first_token",
            &[&format!(r#","turnId":"{tid}","ttft_ms":600"#)],
        );
        w.event(
            "model.response",
            &[&format!(
                r#","turnId":"{tid}","provider":"anthropic","model":"claude","duration_ms":3000,"ttft_ms":600,"inputTokens":12000,"outputTokens":200,"cacheReadTokens":11000,"toolCalls":["bash"],"textChars":40,"thinkingChars":0"#
            )],
        );
        w.log.model_ok += 1;
        w.log.input_tokens += 12_000;
        w.event("turn.started", &[&format!(r#","turnId":"{tid}""#)]);
        w.log.turns += 1;
        w.event(
            "function.call",
            &[&format!(
                r#","turnId":"{tid}","tool":"bash","args":{{"command":"cat src/f{t}.rs"}},"callId":"c{t}""#
            )],
        );
        w.event(
            "subagent.start",
            &[&format!(r#","subagentId":"sa-{t}","task":"{task}""#)],
        );
        w.event(
            "subagent.stop",
            &[
                &format!(r#","subagentId":"sa-{t}","result":""#),
                &bulk,
                "\"",
            ],
        );
        let (out, out_len) = if t % HUGE_EVERY == HUGE_EVERY / 2 {
            (huge.as_str(), huge_len)
        } else {
            (output.as_str(), output.len())
        };
        w.event(
            "function.output",
            &[
                &format!(r#","turnId":"{tid}","tool":"bash","output":""#),
                out,
                &format!(r#"","duration_ms":500,"callId":"c{t}""#),
            ],
        );
        w.log.output_bytes += out_len as u64;
        match t % 6 {
            0 => {
                w.event(
                    "compact.occurred",
                    &[r#","beforeTokens":30000,"afterTokens":8000"#],
                );
                w.log.compactions += 1;
                w.log.tokens_before += 30_000;
            }
            1 => {
                w.event(
                    "function.denied",
                    &[&format!(
                        r#","turnId":"{tid}","tool":"edit","args":{{"filePath":"a.ts"}},"reason":"read-only","source":"mode""#
                    )],
                );
                w.log.denied += 1;
            }
            2 => {
                let retry = format!("{tid}-retry");
                w.event("model.request", &[&req(&retry)]);
                w.event(
                    "model.error",
                    &[&format!(
                        r#","turnId":"{retry}","provider":"anthropic","model":"claude","duration_ms":100,"kind":"provider","error":"429""#
                    )],
                );
                w.log.model_err += 1;
            }
            3 => {
                w.event(
                    "redirect.skipped",
                    &[&format!(r#","turnId":"{tid}","reason":"debounced""#)],
                );
                w.log.redirects_skipped += 1;
            }
            4 => {
                w.event(
                    "parse.error",
                    &[&format!(
                        r#","turnId":"{tid}","parser":"tool-args","error":"bad json""#
                    )],
                );
                w.log.parse_errors += 1;
            }
            _ => w.event(
                "hook.blocked",
                &[r#","hookName":"bash","reason":"no reason""#],
            ),
        }
        if t == BIG_TURNS / 2 {
            w.log.malformed = (w.log.lines + 1, w.log.bytes);
            w.raw(br#"{"type":"turn.started","seq":"#, true);
            w.raw(
                br#"{"type":"cache.warm","id":"x","seq":0,"aggregateID":"big-log","timestamp":1}"#,
                true,
            );
            w.log.unknown += 1;
        }
    }
    let frag = br#"{"type":"function.output","id":"y","seq":999999999,"output":"cut sh"#;
    w.log.torn = (w.log.lines + 1, w.log.bytes, frag.len() as u64);
    w.raw(frag, false);
    w.out.flush().unwrap();
    w.log
}

fn vm_hwm_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// Child: folds the log at `LOG` with `read_events` + `TraceBuilder` + `ReplayBuilder` and
/// reports the counts and its peak RSS.
#[test]
fn fold_child() {
    if !is_child(FOLD_CHILD) {
        return;
    }
    let path = PathBuf::from(child_var("LOG"));
    let start_kib = vm_hwm_kib();
    let t0 = Instant::now();
    let mut trace = TraceBuilder::new("big-log");
    let mut replay = ReplayBuilder::new("big-log");
    let mut seen = 0u64;
    let report = read_events(&path, |e| {
        trace.apply(&e);
        replay.apply(&e);
        seen += 1;
        if seen.is_multiple_of(50_000) {
            // Keeps the parent's hang guard quiet on a slow (debug, busy) run.
            emit(&format!("PROGRESS {seen}"));
        }
    })
    .unwrap()
    .unwrap();
    for _ in 0..report.unknown {
        replay.unknown_event();
    }
    for i in &report.issues {
        replay.skipped_line(i.line, i.offset, i.to_string());
    }
    let trace = trace.finish(None);
    let replay = replay.finish();
    let secs = t0.elapsed().as_secs_f64();
    let peak_kib = vm_hwm_kib();
    let status = |s: SpanStatus| trace.model_spans.iter().filter(|m| m.status == s).count();
    let output_bytes: usize = replay
        .turns
        .iter()
        .flat_map(|t| &t.calls)
        .map(|c| c.output.as_ref().map_or(0, String::len))
        .sum();
    let torn = report
        .issues
        .iter()
        .find(|i| i.kind == IssueKind::Torn)
        .map_or((0, 0, 0), |i| (i.line, i.offset, i.len));
    let malformed = report
        .issues
        .iter()
        .find(|i| matches!(i.kind, IssueKind::Malformed(_)))
        .map_or((0, 0), |i| (i.line, i.offset));
    let fields = [
        ("events", report.events),
        ("unknown", replay.unknown_events),
        ("issues", report.issues.len() as u64),
        ("model_ok", status(SpanStatus::Ok) as u64),
        ("model_err", status(SpanStatus::Error) as u64),
        (
            "model_open",
            trace.model_spans.len() as u64
                - status(SpanStatus::Ok) as u64
                - status(SpanStatus::Error) as u64,
        ),
        ("tool_spans", trace.tool_spans.len() as u64),
        ("denied_spans", trace.denied_spans.len() as u64),
        ("input_tokens", trace.input_tokens),
        ("turns", replay.total_turns),
        ("calls", replay.total_calls),
        ("compactions", replay.compact_count),
        ("tokens_before", replay.total_tokens_before),
        ("denied", replay.total_denied),
        ("redirects_skipped", replay.redirects_skipped),
        ("errors", replay.errors.len() as u64),
        ("skipped_lines", replay.skipped_lines.len() as u64),
        ("output_bytes", output_bytes as u64),
        ("torn_line", torn.0),
        ("torn_offset", torn.1),
        ("torn_len", torn.2),
        ("malformed_line", malformed.0),
        ("malformed_offset", malformed.1),
        ("start_kib", start_kib),
        ("peak_kib", peak_kib),
        ("ms", (secs * 1000.0) as u64),
    ];
    let line: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    emit(&format!("RESULT {}", line.join(" ")));
}

/// Free bytes on the file system holding `dir`, from `df`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let kib: u64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[test]
fn a_2gb_log_folds_in_bounded_memory() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    fs::create_dir_all(base).unwrap();
    match free_bytes(base) {
        Some(free) if free >= MIN_FREE_BYTES => {}
        free => {
            eprintln!(
                "SKIPPED a_2gb_log_folds_in_bounded_memory: needs {MIN_FREE_BYTES} free bytes \
                 under {}, found {free:?}",
                base.display()
            );
            return;
        }
    }
    let tmp = scratch("rollout-2gb-");
    let path = tmp.path().join("events.jsonl");
    let t0 = Instant::now();
    let log = write_big_log(&path);
    let gen_secs = t0.elapsed().as_secs_f64();
    assert_eq!(fs::metadata(&path).unwrap().len(), log.bytes);
    assert!(log.bytes > 2_000_000_000, "{} bytes", log.bytes);

    let mut child = spawn_child(
        FOLD_CHILD,
        tmp.path(),
        &[("LOG", path.display().to_string())],
    );
    let events = child.finish();
    fs::remove_file(&path).unwrap();
    let result = events
        .iter()
        .find_map(|e| e.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no result from the child: {events:?}"));
    let got: HashMap<&str, u64> = result
        .split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    eprintln!(
        "2 GB fold: {} bytes, {} lines written in {gen_secs:.1} s; folded in {:.1} s, peak RSS \
         {} MiB (start {} MiB)",
        log.bytes,
        log.lines,
        got["ms"] as f64 / 1000.0,
        got["peak_kib"] / 1024,
        got["start_kib"] / 1024
    );
    let want = [
        ("events", log.events),
        ("unknown", log.unknown),
        ("issues", 2),
        ("model_ok", log.model_ok),
        ("model_err", log.model_err),
        ("model_open", 0),
        ("tool_spans", log.turns),
        ("denied_spans", log.denied),
        ("input_tokens", log.input_tokens),
        ("turns", log.turns),
        ("calls", log.turns),
        ("compactions", log.compactions),
        ("tokens_before", log.tokens_before),
        ("denied", log.denied),
        ("redirects_skipped", log.redirects_skipped),
        ("errors", log.parse_errors),
        ("skipped_lines", 2),
        ("output_bytes", log.output_bytes),
        ("torn_line", log.torn.0),
        ("torn_offset", log.torn.1),
        ("torn_len", log.torn.2),
        ("malformed_line", log.malformed.0),
        ("malformed_offset", log.malformed.1),
    ];
    for (k, v) in want {
        assert_eq!(got[k], v, "{k}");
    }
    assert!(
        got["peak_kib"] < PEAK_BOUND_KIB,
        "peak RSS {} KiB over the bound {PEAK_BOUND_KIB} KiB for a {}-byte log",
        got["peak_kib"],
        log.bytes
    );
}

// ----- (c) SIGKILL while a buffered recorder records ----------------------------------------

const BUFFERED_CHILD: &str = "rollout_crash::buffered_child";
/// Beyond the window: how late the flusher may be on a loaded machine (the check still fails
/// without a flusher: the child's long pauses are longer than window + slack).
const FLUSH_SLACK: Duration = Duration::from_millis(200);

/// Child: records turns with the default window and `Never` durability, pausing like a provider
/// (after `model.request`) and a tool (after `function.call`), sometimes longer than the window;
/// prints `ACK <seq> <type>` after each call returned.
#[test]
fn buffered_child() {
    if !is_child(BUFFERED_CHILD) {
        return;
    }
    let (home, id) = child_home();
    let mut rng = crate::support::Rng::from_env_or_clock("buffered_child");
    let config = rec_config(Durability::Never, LockWait::Fail);
    assert_eq!(config.flush_window, freecode_store::rollout::FLUSH_WINDOW);
    let mut r = Recorder::open(&home, &id, config).unwrap();
    emit(&format!("READY {}", r.seq()));
    let ack = |r: &Recorder, what: &str| emit(&format!("ACK {} {what}", r.seq()));
    let pause = |rng: &mut crate::support::Rng| {
        let ms = match rng.below(10) {
            0..=4 => 0,
            5..=7 => rng.below(20),
            _ => 300 + rng.below(200),
        };
        std::thread::sleep(Duration::from_millis(ms));
    };
    for t in 0..SMALL_MAX {
        let turn = format!("b-t{t:05}");
        r.turn_started(&turn).unwrap();
        ack(&r, "turn.started");
        let mut call = r
            .model_request(
                &turn,
                ModelRequest {
                    provider: "anthropic".into(),
                    model: "claude".into(),
                    message_count: t,
                    ..Default::default()
                },
            )
            .unwrap();
        ack(&r, "model.request");
        pause(&mut rng);
        call.first_token(&mut r).unwrap();
        ack(&r, "model.first_token");
        call.response(&mut r, ModelResponse::default()).unwrap();
        ack(&r, "model.response");
        let tool = r.function_call(&turn, "bash", json!({"turn": t})).unwrap();
        ack(&r, "function.call");
        pause(&mut rng);
        tool.output(&mut r, &format!("out {t}"), false).unwrap();
        ack(&r, "function.output");
        pause(&mut rng);
    }
    emit("DONE");
}

#[test]
fn sigkill_of_a_buffered_recorder_loses_at_most_its_window_and_never_a_request() {
    let mut rng = Rng::from_env_or_clock("sigkill_of_a_buffered_recorder");
    let tmp = scratch("rollout-buffered-kill-");
    let home = Home::new(tmp.path().join("home"));
    let id = SessionId::new("buffered-recorder").unwrap();
    let path = events_path(&home, &id);
    let (mut fenced, mut prev): (Vec<(u64, u64)>, Vec<u8>) = (Vec::new(), Vec::new());
    let (mut torn_rounds, mut by_time_checked, mut forced_checked) = (0u32, 0u64, 0u64);
    for round in 0..30u32 {
        let ctx = format!("round {round}");
        let mut child = spawn_child(
            BUFFERED_CHILD,
            tmp.path(),
            &[
                ("HOME", home.root().display().to_string()),
                ("SESSION", id.to_string()),
            ],
        );
        let ready = child
            .next_event()
            .unwrap_or_else(|| panic!("{ctx}: child exited early"));
        let start: u64 = ready.strip_prefix("READY ").unwrap().parse().unwrap();
        let deadline = Instant::now() + Duration::from_millis(50 + rng.below(1500));
        // (seq, type, when the parent read it)
        let mut acks: Vec<(u64, String, Option<Instant>)> = Vec::new();
        let parse = |e: &str| -> (u64, String) {
            let mut it = e.strip_prefix("ACK ").unwrap().split(' ');
            (
                it.next().unwrap().parse().unwrap(),
                it.next().unwrap().to_owned(),
            )
        };
        // The kill comes from another thread at a random moment, wherever the child is (in a
        // pause, between events, inside a write); this one reads acks as they arrive.
        let pid = child.pid().to_string();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            let at = Instant::now();
            let status = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
            assert!(status.success(), "kill -KILL {pid}");
            at
        });
        let mut read_at = Vec::new();
        while let Some(e) = child.next_event() {
            if e.starts_with("ACK ") {
                let (seq, what) = parse(&e);
                acks.push((seq, what, None));
                read_at.push(Instant::now());
            }
        }
        let killed_at = killer.join().unwrap();
        for (a, t) in acks.iter_mut().zip(read_at) {
            // Read after the kill: not known to be older than the window.
            a.2 = (t < killed_at).then_some(t);
        }
        assert!(child.sigkill(), "{ctx}: the child finished before the kill");
        let want: Vec<u64> = (start + 1..=start + acks.len() as u64).collect();
        assert_eq!(
            acks.iter().map(|a| a.0).collect::<Vec<_>>(),
            want,
            "{ctx}: acks"
        );

        let bytes = fs::read(&path).unwrap();
        assert!(bytes.starts_with(&prev), "{ctx}: the log was rewritten");
        let (events, issues, unknown) = read_all(&path);
        assert_eq!(unknown, 0, "{ctx}");
        assert_seq_and_ids(&events, &ctx);
        let n = events.len() as u64;
        // A torn tail only as the last line; every other issue is a fragment fenced earlier.
        let cut = after_last_newline(&bytes) as u64;
        let mut want_issues: Vec<(u64, u64, bool)> =
            fenced.iter().map(|&(l, o)| (l, o, false)).collect();
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        if cut < bytes.len() as u64 {
            torn_rounds += 1;
            want_issues.push((lines + 1, cut, true));
        }
        let got: Vec<(u64, u64, bool)> = issues
            .iter()
            .map(|i| (i.line, i.offset, i.kind == IssueKind::Torn))
            .collect();
        assert_eq!(got, want_issues, "{ctx}: issues ({issues:?})");
        // Every returned request and tool call, and everything before it, is there.
        for (seq, what, at) in &acks {
            let forced = what == "model.request" || what == "function.call";
            let old = at.is_some_and(|t| killed_at.duration_since(t) > FLUSH_WINDOW + FLUSH_SLACK);
            if forced || old {
                assert!(
                    *seq <= n,
                    "{ctx}: {what} seq {seq} ({}) is not in the log ({n} events)",
                    if forced {
                        "returned before the kill".to_owned()
                    } else {
                        format!(
                            "acknowledged {:?} before the kill",
                            at.map(|t| killed_at - t)
                        )
                    }
                );
                forced_checked += u64::from(forced);
                by_time_checked += u64::from(old && !forced);
            }
            if *seq <= n {
                let e = &events[(*seq - 1) as usize];
                assert_eq!(e.kind.type_name(), what, "{ctx}: seq {seq}");
            }
        }
        assert!(
            n <= start + acks.len() as u64 + 1,
            "{ctx}: {n} events, {} acknowledged: more than one in flight",
            acks.len()
        );
        // A new recorder resumes after the last complete event and fences a torn tail.
        let mut r = Recorder::open(
            &home,
            &id,
            rec_config(Durability::EveryAppend, LockWait::Fail),
        )
        .unwrap();
        assert_eq!(
            r.seq(),
            n,
            "{ctx}: seq resumes after the last complete event"
        );
        r.turn_started(&format!("parent-{round}")).unwrap();
        drop(r);
        if cut < bytes.len() as u64 {
            fenced.push((lines + 1, cut));
        }
        prev = fs::read(&path).unwrap();
        let (events2, _, _) = read_all(&path);
        assert_eq!(events2.len() as u64, n + 1, "{ctx}");
    }
    eprintln!(
        "buffered kills: 30 rounds, {forced_checked} requests/calls and {by_time_checked} \
         other events older than the window checked, {torn_rounds} torn tails"
    );
    assert!(
        by_time_checked > 0,
        "no event was old enough to check the flusher"
    );
}
