//! The planning step's cases, in tables: what a push sends, what a pull downloads and lets go,
//! how a session's records order and merge, what a claim means, and what does not open.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use freecode_core::{SessionId, SessionMeta};
use freecode_remote::home_sync::{
    Chain, HostId, Kind, LogCount, LogId, Opened, SealError, SyncKey,
};

use super::*;
use crate::home_sync::kept::KeptLog;
use crate::home_sync::record::{ControlRecord, Mode, Section, SessionRecord, What};
use crate::home_sync::state::{self, Mark, SessionSync, State, Unopened};

fn key() -> SyncKey {
    SyncKey::from_bytes([7; 32])
}

fn host(n: u8) -> HostId {
    HostId::parse(&format!("{n:02x}").repeat(16)).unwrap()
}

fn log(n: u8) -> LogId {
    LogId::parse(&format!("{:02x}", 0x80 + n).repeat(16)).unwrap()
}

fn chain(n: u8) -> Chain {
    Chain::parse(&format!("{n:02x}").repeat(32)).unwrap()
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn count(log: LogId, host: HostId, count: u64) -> LogCount {
    LogCount { log, host, count }
}

fn record(session: &str, base: Option<Chain>, sections: Vec<Section>) -> SessionRecord {
    SessionRecord {
        session: session.to_owned(),
        base: base.map(|c| c.to_string()),
        sections,
    }
}

fn opened(kind: Kind, plaintext: Vec<u8>) -> Got {
    Got::Opened(Opened { kind, plaintext })
}

fn state_seen(seen: &[(LogId, HostId, u64)]) -> State {
    let mut s = State::default();
    for (l, h, n) in seen {
        s.saw(l, h, *n);
    }
    s
}

fn meta(id: &str, updated_at: i64) -> SessionMeta {
    let mut m = SessionMeta::new(
        &sid(id),
        "t".into(),
        "/p".into(),
        "scripted".into(),
        None,
        1,
    );
    m.updated_at = updated_at;
    m
}

// ----- push -----------------------------------------------------------------------------------

#[test]
fn changes_become_records_of_at_most_a_chunk_in_order() {
    let line = |n: usize| {
        let mut l = vec![b'x'; n - 1];
        l.push(b'\n');
        l
    };
    let big: Vec<u8> = (0..5).flat_map(|_| line(CHUNK / 2)).collect();
    // (changes, the records' sections as (what, mode, from, len))
    type Row = (Changes, Vec<Vec<(What, Mode, u64, usize)>>);
    let rows: Vec<(&str, Row)> = vec![
        (
            "a meta alone: one record",
            (
                Changes {
                    meta: Some(b"{}".to_vec()),
                    ..Changes::default()
                },
                vec![vec![(What::Meta, Mode::Set, 0, 2)]],
            ),
        ),
        (
            "new on this side: meta, memory, messages and events in one record",
            (
                Changes {
                    meta: Some(b"{}".to_vec()),
                    memory: Some(b"[]".to_vec()),
                    messages: Some(Change::Set(b"a\n".to_vec())),
                    events: Some(Change::Append {
                        from: 0,
                        bytes: b"e\n".to_vec(),
                    }),
                },
                vec![vec![
                    (What::Meta, Mode::Set, 0, 2),
                    (What::Memory, Mode::Set, 0, 2),
                    (What::Messages, Mode::Set, 0, 2),
                    (What::Events, Mode::Append, 0, 2),
                ]],
            ),
        ),
        (
            "an append past a chunk: pieces cut at line ends, each file's in its own records",
            (
                Changes {
                    messages: Some(Change::Append {
                        from: 10,
                        bytes: big.clone(),
                    }),
                    ..Changes::default()
                },
                vec![
                    vec![(What::Messages, Mode::Append, 10, CHUNK)],
                    vec![(What::Messages, Mode::Append, 10 + CHUNK as u64, CHUNK)],
                    vec![(
                        What::Messages,
                        Mode::Append,
                        10 + 2 * CHUNK as u64,
                        CHUNK / 2,
                    )],
                ],
            ),
        ),
        (
            "a file rewritten (a compaction) past a chunk: set, then appends",
            (
                Changes {
                    messages: Some(Change::Set(big.clone())),
                    ..Changes::default()
                },
                vec![
                    vec![(What::Messages, Mode::Set, 0, CHUNK)],
                    vec![(What::Messages, Mode::Append, CHUNK as u64, CHUNK)],
                    vec![(What::Messages, Mode::Append, 2 * CHUNK as u64, CHUNK / 2)],
                ],
            ),
        ),
    ];
    for (case, (changes, want)) in rows {
        let got: Vec<Vec<(What, Mode, u64, usize)>> = records_of(changes)
            .iter()
            .map(|r| {
                r.iter()
                    .map(|s| (s.head.what, s.head.mode, s.head.from, s.bytes.len()))
                    .collect()
            })
            .collect();
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn a_content_record_names_its_chain_point_and_a_meta_alone_none() {
    let st = SessionSync {
        log: log(1),
        chain: chain(9),
        messages: Mark::default(),
        events: Mark::default(),
        meta: None,
        memory: None,
        next: 0,
    };
    let id = sid("s1");
    let meta_only = vec![Section::new(What::Meta, Mode::Set, 0, b"{}")];
    let (rec, content) = record_at(&id, &st, meta_only);
    assert!(!content);
    assert_eq!(rec.base, None);
    let with_messages = vec![Section::new(What::Messages, Mode::Append, 0, b"a\n")];
    let (rec, content) = record_at(&id, &st, with_messages);
    assert!(content);
    assert_eq!(rec.base, Some(chain(9).to_string()));
    assert_eq!(rec.session, "s1");
}

#[test]
fn a_session_synced_and_gone_from_here_is_to_be_purged_everywhere() {
    let local: BTreeMap<SessionId, PathBuf> = [(sid("kept"), PathBuf::from("/h/kept"))]
        .into_iter()
        .collect();
    let synced = ["kept".to_owned(), "deleted".to_owned(), "../bad".to_owned()];
    // A synced id that is not a session id (a hand-edited state) is never purged.
    assert_eq!(gone(&synced, &local), vec!["deleted".to_owned()]);
    assert!(gone(&[] as &[String], &local).is_empty());
}

#[test]
fn a_claim_slot_is_ours_another_records_or_passed_over() {
    let me = host(1);
    let rows = [
        ("garbage in the slot", None, ClaimSeen::NextSlot),
        ("ours, for this record", Some((me, 4)), ClaimSeen::Ours),
        (
            "ours, for a record passed over earlier",
            Some((me, 3)),
            ClaimSeen::Look { host: me, index: 3 },
        ),
        (
            "another machine's",
            Some((host(2), 0)),
            ClaimSeen::Look {
                host: host(2),
                index: 0,
            },
        ),
    ];
    for (case, opened, want) in rows {
        assert_eq!(claim_seen(opened, me, 4), want, "{case}");
    }
}

#[test]
fn a_claim_stands_while_its_record_extends_the_point_or_is_awaited_in_time() {
    let base = chain(1);
    let rows = [
        ("its record not stored yet", None, false, true),
        ("its record not stored past the patience", None, true, false),
        (
            "its record extends the point",
            Some(Some(chain(1))),
            false,
            true,
        ),
        (
            "its record extends the point, late",
            Some(Some(chain(1))),
            true,
            true,
        ),
        (
            "its record extends another point",
            Some(Some(chain(2))),
            false,
            false,
        ),
        (
            "what is stored is no session record",
            Some(None),
            false,
            false,
        ),
    ];
    for (case, record_base, waited, want) in rows {
        assert_eq!(claim_stands(record_base, &base, waited), want, "{case}");
    }
    // A claim is awaited from when it is first found, for the patience.
    let mut pending = BTreeMap::new();
    let patience = state::CLAIM_PATIENCE.as_secs();
    assert!(!waited_for(&mut pending, "l/p".into(), 1_000));
    assert!(!waited_for(
        &mut pending,
        "l/p".into(),
        1_000 + patience - 1
    ));
    assert!(waited_for(&mut pending, "l/p".into(), 1_000 + patience));
    assert!(!waited_for(&mut pending, "l/q".into(), 1_000 + patience));
    // Bounded: the oldest goes first.
    for i in 0..state::PENDING_CLAIMS_MAX as u64 {
        waited_for(&mut pending, format!("x/{i}"), 5_000 + i);
    }
    assert_eq!(pending.len(), state::PENDING_CLAIMS_MAX);
    assert!(!pending.contains_key("l/p"));
}

#[test]
fn a_record_found_at_this_machines_next_index_is_adopted_only_when_it_is_the_one() {
    let id = sid("s1");
    let at = chain(5);
    let messages = || vec![Section::new(What::Messages, Mode::Append, 0, b"a\n")];
    let rows = [
        (
            "ours, extending the point",
            record("s1", Some(at), messages()),
            true,
        ),
        (
            "a meta alone of the session",
            record(
                "s1",
                None,
                vec![Section::new(What::Meta, Mode::Set, 0, b"{}")],
            ),
            true,
        ),
        (
            "another point (a member's garbage)",
            record("s1", Some(chain(6)), messages()),
            false,
        ),
        ("another session", record("s2", Some(at), messages()), false),
    ];
    for (case, rec, ok) in rows {
        assert_eq!(adopt(&rec, &id, &at).is_ok(), ok, "{case}");
    }
}

// ----- pull -----------------------------------------------------------------------------------

#[test]
fn a_pull_downloads_the_other_machines_unseen_records_and_nothing_else() {
    let (me, other, third) = (host(1), host(2), host(3));
    let control = log(0);
    let purged_log = log(9);
    let logs = vec![
        count(log(1), other, 3),     // new on the other side: from 0
        count(log(2), other, 5),     // seen up to 2: from 2
        count(log(3), other, 4),     // all seen
        count(log(1), me, 7),        // this machine's own
        count(control, other, 2),    // control records are read apart
        count(purged_log, third, 1), // purged everywhere
        count(log(4), third, 1),     // a third machine's new session
    ];
    let state = state_seen(&[(log(2), other, 2), (log(3), other, 4)]);
    let purged: BTreeSet<LogId> = [purged_log].into();
    let rows: [(&str, Option<LogId>, Vec<LogCount>); 3] = [
        (
            "every log",
            None,
            vec![
                count(log(1), other, 3),
                count(log(2), other, 5),
                count(log(4), third, 1),
            ],
        ),
        (
            "one log (a lost claim)",
            Some(log(2)),
            vec![count(log(2), other, 5)],
        ),
        ("a log with nothing new", Some(log(3)), vec![]),
    ];
    for (case, only, want) in rows {
        let plan = pull_plan(&logs, &state, me, control, &purged, only.as_ref());
        assert_eq!(plan.fetch, want, "{case}");
        assert!(plan.behind.is_empty(), "{case}: {:?}", plan.behind);
    }
}

#[test]
fn a_server_that_counts_fewer_records_than_were_seen_is_checked() {
    let (me, other) = (host(1), host(2));
    let state = state_seen(&[(log(1), other, 5), (log(2), other, 3), (log(3), other, 2)]);
    let logs = vec![count(log(1), other, 5), count(log(2), other, 1)];
    let purged: BTreeSet<LogId> = [log(3)].into();
    let plan = pull_plan(&logs, &state, me, log(0), &purged, None);
    // log 2 is behind; log 3 is gone but purged (not stale); log 1 is whole.
    assert_eq!(
        plan.behind,
        vec![Behind {
            log: log(2),
            host: other,
            count: 1,
            seen: 3
        }]
    );
}

#[test]
fn the_logs_purged_everywhere_are_those_the_control_records_name_and_this_machines() {
    let k = key();
    let controls = [
        ControlRecord {
            purged: vec!["a".into()],
            unopened: vec![],
            compacted: vec![],
        },
        ControlRecord {
            purged: vec!["b".into(), "a".into()],
            unopened: vec!["x".into()],
            compacted: vec![],
        },
    ];
    let here: BTreeSet<String> = ["c".to_owned()].into();
    let want: BTreeSet<LogId> = ["a", "b", "c"].iter().map(|s| k.log_id(s)).collect();
    assert_eq!(purged_logs(&k, &controls, &here), want);
}

#[test]
fn slots_that_did_not_open_are_tried_again_until_they_expire() {
    let now = 10 * state::UNOPENED_FOR.as_secs();
    let (l1, l2, h) = (log(1), log(2), host(2));
    let mut state = State::default();
    let mut add = |key: String, since: u64| {
        state.unopened.insert(key, Unopened { since, told: false });
    };
    add(state::slot_key(&l1, &h, 3), now - 10);
    add(state::slot_key(&l2, &h, 0), now - 20);
    add(
        state::slot_key(&log(3), &h, 1),
        now - 2 * state::UNOPENED_FOR.as_secs(),
    );
    add(state::slot_key(&log(9), &h, 1), now - 5);
    add("not/a/slot".into(), now);
    let purged: BTreeSet<LogId> = [log(9)].into();
    let steps: BTreeMap<String, SlotStep> = unopened_plan(&state, now, &purged, None)
        .into_iter()
        .collect();
    let rows = [
        (
            "recent: asked for again",
            state::slot_key(&l1, &h, 3),
            SlotStep::Retry(l1, h, 3),
        ),
        (
            "recent, another log",
            state::slot_key(&l2, &h, 0),
            SlotStep::Retry(l2, h, 0),
        ),
        (
            "tried for too long",
            state::slot_key(&log(3), &h, 1),
            SlotStep::LetGo,
        ),
        (
            "of a log purged",
            state::slot_key(&log(9), &h, 1),
            SlotStep::LetGo,
        ),
        (
            "not a slot (a hand-edited state)",
            "not/a/slot".into(),
            SlotStep::LetGo,
        ),
    ];
    for (case, key, want) in rows {
        assert_eq!(steps.get(&key), Some(&want), "{case}");
    }
    // A pull of one log leaves the others' slots for a later pull.
    let one: BTreeMap<String, SlotStep> = unopened_plan(&state, now, &purged, Some(&l1))
        .into_iter()
        .collect();
    assert_eq!(one[&state::slot_key(&l2, &h, 0)], SlotStep::Leave);
    assert_eq!(one[&state::slot_key(&l1, &h, 3)], SlotStep::Retry(l1, h, 3));
}

#[test]
fn past_the_newest_slots_that_did_not_open_the_oldest_are_let_go() {
    let h = host(2);
    let mut state = State::default();
    let n = state::UNOPENED_MAX + 2;
    for i in 0..n {
        state.unopened.insert(
            state::slot_key(&log(1), &h, i as u64),
            Unopened {
                since: 1_000 + i as u64,
                told: false,
            },
        );
    }
    let steps = unopened_plan(&state, 2_000, &BTreeSet::new(), None);
    let let_go: Vec<&String> = steps
        .iter()
        .filter(|(_, s)| *s == SlotStep::LetGo)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        let_go,
        vec![
            &state::slot_key(&log(1), &h, 0),
            &state::slot_key(&log(1), &h, 1)
        ]
    );
}

#[test]
fn seen_counts_move_past_slots_that_did_not_open_with_nothing_after_them() {
    let h = host(2);
    let mut state = state_seen(&[(log(1), h, 2), (log(2), h, 1)]);
    for (l, i) in [(log(1), 2), (log(1), 3), (log(2), 5)] {
        state.unopened.insert(
            state::slot_key(&l, &h, i),
            Unopened {
                since: 0,
                told: false,
            },
        );
    }
    // log 1: seen 2, slots 2 and 3 did not open: seen moves to 4. log 2: its slot is past
    // a record not seen yet (1): nothing moves.
    assert_eq!(past_unopened(&state), vec![(log(1), h, 4)]);
}

#[test]
fn what_opens_in_a_control_log_is_a_control_record_or_garbage_passed_over() {
    let c = ControlRecord {
        purged: vec!["s1".into()],
        unopened: vec![],
        compacted: vec![],
    };
    let bytes = serde_json::to_vec(&c).unwrap();
    assert_eq!(control_record(opened(Kind::Control, bytes.clone())), Ok(c));
    assert_eq!(
        control_record(opened(Kind::Session, bytes)),
        Err("is of the wrong kind for its log".to_owned())
    );
    assert_eq!(
        control_record(opened(Kind::Control, b"[1,2]".to_vec())),
        Err("opens but is not a control record".to_owned())
    );
    assert_eq!(
        control_record(Got::Bad("why".into())),
        Err("why".to_owned())
    );
}

#[test]
fn a_record_under_a_key_rotated_elsewhere_stops_the_pull_and_other_keys_are_garbage() {
    let other = SealError::OtherKey {
        what: "record".into(),
    };
    let tampered = SealError::Tampered {
        what: "record".into(),
    };
    let rows = [
        (
            "the group's key, rotated on another machine",
            &other,
            true,
            None,
        ),
        (
            "a key this group never had",
            &other,
            false,
            Some("is sealed with a key this group never had"),
        ),
        (
            "changed bytes",
            &tampered,
            false,
            Some("does not open (changed, cut short, moved, or never a record)"),
        ),
    ];
    for (case, e, rotated, want) in rows {
        assert_eq!(unopened_why(e, rotated).as_deref(), want, "{case}");
    }
    assert!(
        unopened_why(&SealError::Codec("too big".into()), false)
            .is_some_and(|w| w.contains("too big"))
    );
}

#[test]
fn records_the_server_lost_are_sent_again_from_the_kept_copies() {
    let h = host(1);
    let kept = vec![
        KeptLog {
            log: log(1),
            host: h,
            count: 5,
        },
        KeptLog {
            log: log(2),
            host: h,
            count: 2,
        },
        KeptLog {
            log: log(3),
            host: h,
            count: 4,
        },
        KeptLog {
            log: log(4),
            host: h,
            count: 1,
        },
    ];
    // log 1: the server holds 2 of 5; log 2: all; log 3: none; log 4: purged.
    let logs = vec![count(log(1), h, 2), count(log(2), h, 2)];
    let purged: BTreeSet<LogId> = [log(4)].into();
    assert_eq!(
        refill_plan(&kept, &logs, &purged),
        vec![(log(1), h, 2..5), (log(3), h, 0..4)]
    );
}

// ----- apply ----------------------------------------------------------------------------------

fn pending(host: HostId, index: u64, from: Chain, to: Chain) -> Pending {
    Pending {
        host,
        index,
        retried: false,
        extends: Extends::Point { from, to },
    }
}

#[test]
fn a_sessions_records_apply_in_their_chains_order() {
    let (a, b) = (host(1), host(2));
    let l = log(1);
    let (c0, c1, c2, c3) = (chain(0), chain(1), chain(2), chain(3));
    let meta_alone = |host, index| Pending {
        host,
        index,
        retried: false,
        extends: Extends::Nothing,
    };
    type Row = (&'static str, State, Vec<Pending>, Vec<usize>);
    let rows: Vec<Row> = vec![
        (
            "one machine's records, in order",
            State::default(),
            vec![pending(a, 0, c0, c1), pending(a, 1, c1, c2)],
            vec![0, 1],
        ),
        (
            "downloaded out of order: each waits for its host's earlier ones",
            State::default(),
            vec![pending(a, 1, c1, c2), pending(a, 0, c0, c1)],
            vec![1, 0],
        ),
        (
            "two machines taking turns on one session",
            State::default(),
            vec![
                pending(a, 0, c0, c1),
                pending(b, 0, c1, c2),
                pending(a, 1, c2, c3),
            ],
            vec![0, 1, 2],
        ),
        (
            "both changed from one point: the claim's loser's record never applies",
            State::default(),
            vec![pending(a, 0, c0, c1), pending(b, 0, c0, c2)],
            vec![0],
        ),
        (
            "a meta alone applies wherever the chain stands",
            State::default(),
            vec![meta_alone(a, 0), pending(a, 1, c0, c1)],
            vec![0, 1],
        ),
        (
            "records already seen wait for nothing; a record not yet its host's next waits",
            state_seen(&[(l, a, 1)]),
            vec![pending(a, 2, c1, c2), pending(a, 1, c0, c1)],
            vec![1, 0],
        ),
        (
            "a chain point that does not parse never applies",
            State::default(),
            vec![Pending {
                host: a,
                index: 0,
                retried: false,
                extends: Extends::Unreadable,
            }],
            vec![],
        ),
    ];
    for (case, state, pending, want) in rows {
        assert_eq!(apply_order(&state, &l, c0, &pending), want, "{case}");
    }
}

#[test]
fn a_slot_that_did_not_open_is_passed_over_and_applies_out_of_order_when_it_opens() {
    let a = host(1);
    let l = log(1);
    let (c0, c1, c2) = (chain(0), chain(1), chain(2));
    let mut state = State::default();
    state.unopened.insert(
        state::slot_key(&l, &a, 0),
        Unopened {
            since: 0,
            told: false,
        },
    );
    // Slot 0 did not open: record 1 is next, and applies where the chain stands (a meta
    // alone here); slot 0, opening now (retried), applies where its point allows.
    let rows = [
        (
            "the record after a slot that did not open",
            vec![Pending {
                host: a,
                index: 1,
                retried: false,
                extends: Extends::Nothing,
            }],
            vec![0],
        ),
        (
            "the slot, opening now, then the record its chain leads to",
            vec![
                pending(a, 1, c1, c2),
                Pending {
                    host: a,
                    index: 0,
                    retried: true,
                    extends: Extends::Point { from: c0, to: c1 },
                },
            ],
            vec![1, 0],
        ),
    ];
    for (case, pending, want) in rows {
        assert_eq!(apply_order(&state, &l, c0, &pending), want, "{case}");
    }
}

#[test]
fn a_fork_is_made_when_any_file_holds_changes_of_its_own() {
    let rows = [
        (vec![Fit::Apply, Fit::Apply], false),
        (vec![Fit::Already, Fit::Apply], false),
        (vec![Fit::Apply, Fit::Diverged], true),
        (vec![], false),
    ];
    for (fits, want) in rows {
        assert_eq!(diverged(&fits), want, "{fits:?}");
    }
}

#[test]
fn metas_merge_last_writer_wins_and_a_move_travels_with_the_newer() {
    let (me, lower, higher) = (host(5), host(1), host(9));
    let local = meta("s1", 100);
    let mut moved = meta("s1", 200);
    moved.project_path = "/elsewhere".into();
    let rows = [
        (
            "newer there (renamed, moved, archived)",
            meta("s1", 200),
            lower,
            Some(&local),
            false,
            true,
            true,
        ),
        (
            "older there: ours stays and goes out next push",
            meta("s1", 50),
            higher,
            Some(&local),
            false,
            true,
            false,
        ),
        (
            "a tie, from a greater host id",
            meta("s1", 100),
            higher,
            Some(&local),
            false,
            true,
            true,
        ),
        (
            "a tie, from a lesser host id",
            meta("s1", 100),
            lower,
            Some(&local),
            false,
            true,
            false,
        ),
        ("new here", meta("s1", 50), lower, None, true, false, true),
        (
            "older, but no meta of it synced yet",
            meta("s1", 50),
            lower,
            Some(&local),
            false,
            false,
            true,
        ),
        ("moved there", moved, lower, Some(&local), false, true, true),
    ];
    for (case, remote, from, local, new_here, synced, want) in rows {
        assert_eq!(
            take_meta(&remote, from, local, me, new_here, synced),
            want,
            "{case}"
        );
    }
}

#[test]
fn a_session_as_synced_is_rebuilt_from_the_kept_records_or_not_at_all() {
    let k = key();
    let genesis = k.genesis("s1");
    let r1 = record(
        "s1",
        Some(genesis),
        vec![
            Section::new(What::Meta, Mode::Set, 0, b"{}"),
            Section::new(What::Messages, Mode::Set, 0, b"a\n"),
        ],
    );
    let p1 = r1.encode();
    let c1 = k.next(&genesis, &p1);
    let r2 = record(
        "s1",
        Some(c1),
        vec![
            Section::new(What::Messages, Mode::Append, 2, b"b\n"),
            Section::new(What::Events, Mode::Append, 0, b"e\n"),
        ],
    );
    let p2 = r2.encode();
    let c2 = k.next(&c1, &p2);
    let gap = record(
        "s1",
        Some(c1),
        vec![Section::new(What::Messages, Mode::Append, 9, b"b\n")],
    );
    let next = |c: &Chain, p: &[u8]| k.next(c, p);
    let both = vec![(p2.clone(), r2.clone()), (p1.clone(), r1.clone())];
    assert_eq!(
        rebuild(genesis, c2, both, next),
        Some((b"a\nb\n".to_vec(), b"e\n".to_vec()))
    );
    assert_eq!(
        rebuild(genesis, c1, vec![(p1.clone(), r1.clone())], next),
        Some((b"a\n".to_vec(), Vec::new()))
    );
    // A record on the way not kept here; an append that does not follow on.
    assert_eq!(rebuild(genesis, c2, vec![(p2, r2)], next), None);
    let gap_plain = gap.encode();
    let after_gap = k.next(&c1, &gap_plain);
    assert_eq!(
        rebuild(genesis, after_gap, vec![(p1, r1), (gap_plain, gap)], next),
        None
    );
}

#[test]
fn a_synced_meta_that_does_not_parse_or_names_another_session_is_refused() {
    let id = sid("s1");
    let good = serde_json::to_vec(&meta("s1", 5)).unwrap();
    assert_eq!(parse_meta(&good, &id).unwrap().updated_at, 5);
    let rows: [(&str, Vec<u8>, &str); 2] = [
        ("not JSON", b"{".to_vec(), "does not parse"),
        (
            "another session's",
            serde_json::to_vec(&meta("s2", 5)).unwrap(),
            "names session s2",
        ),
    ];
    for (case, bytes, want) in rows {
        let e = parse_meta(&bytes, &id).unwrap_err().to_string();
        assert!(e.contains(want), "{case}: {e}");
    }
}
