//! Home sync against a member of the group gone bad (a stolen laptop, a broken build, a script
//! gone wrong): a machine with the group's key and credential that writes records which open
//! but hold what no machine writes. The honest machines keep syncing, nothing they hold
//! changes, and a machine that joins later gets every honest session.

use std::collections::BTreeMap;
use std::path::Path;

use freecode_ops::home_sync::record::{Mode, Section, SessionRecord, What};
use freecode_remote::home_sync::{Chain, HostId, Kind, LogId, Remote, SyncKey};
use serde_json::Value;

use crate::sync_home::{Net, files_of, net, net_limited, net_on_s3, sessions, snapshot, sync_now};

#[test]
fn a_member_writing_bad_content_stops_no_one() {
    member_bad_content(net());
}

#[test]
fn a_member_writing_bad_content_stops_no_one_over_s3() {
    member_bad_content(net_on_s3());
}

/// A member of the group writing records of its own machine, sealed with the group's key.
struct Rogue {
    key: SyncKey,
    remote: Remote,
    host: HostId,
    next: BTreeMap<LogId, u64>,
}

impl Rogue {
    /// Stores `rec` at the next index of its log of `rec`'s session; a content record claims
    /// the first free slot of the chain point it names first, as an honest machine does.
    /// Returns the log and index.
    fn put(&mut self, rec: &SessionRecord) -> (LogId, u64) {
        let log = self.key.log_id(&rec.session);
        let index = *self.next.entry(log).or_default();
        if let Some(base) = rec.base.as_deref().and_then(Chain::parse) {
            let claimed = (0..8).any(|slot| {
                let point = self.key.claim_slot(&base, slot);
                let sealed = self
                    .key
                    .seal_claim(&log, &point, &self.host, index)
                    .unwrap();
                matches!(
                    self.remote.put_claim(&log, &point, &sealed).unwrap(),
                    freecode_remote::home_sync::Claimed::Created
                )
            });
            assert!(claimed, "a claim slot is free");
        }
        let sealed = self
            .key
            .seal(Kind::Session, &self.host, &log, index, &rec.encode())
            .unwrap();
        self.remote
            .put_record(&log, &self.host, index, &sealed)
            .unwrap();
        self.next.insert(log, index + 1);
        (log, index)
    }
}

fn record(session: &str, base: Option<Chain>, sections: Vec<Section>) -> SessionRecord {
    SessionRecord {
        session: session.to_owned(),
        base: base.map(|c| c.to_string()),
        sections,
    }
}

/// The chain point of session `id` as `home` last synced it.
fn point(home: &Path, id: &str) -> Chain {
    let st: Value =
        serde_json::from_slice(&std::fs::read(home.join("state/sync/state.json")).unwrap())
            .unwrap();
    Chain::parse(st["sessions"][id]["chain"].as_str().unwrap()).unwrap()
}

fn meta_json(home: &Path, id: &str) -> Value {
    let dir = crate::common::find_below(&home.join("sessions"), id);
    serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap()
}

/// Every shape of bad content a member can seal: for a session the others hold (content
/// records extending its chain point, each claiming a slot of it, and metas alone) and for
/// sessions of its own. Every other machine's `sync now` succeeds and reports each slot
/// once, with the machine and index; their files do not change but for the honest turns;
/// their own new sessions reach the group; a machine that joins gets every honest session.
fn member_bad_content(n: Net) {
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "une session honnête, ça commence");
    let phrase = n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);
    let key = SyncKey::parse(&phrase).unwrap();
    let mut rogue = Rogue {
        remote: Remote::new(&n.url, None).unwrap().for_key(&key),
        key,
        host: HostId::generate().unwrap(),
        next: BTreeMap::new(),
    };
    let at = point(&a, &s);
    let good_meta = meta_json(&a, &s);
    let meta = |f: &dyn Fn(&mut Value)| {
        let mut m = good_meta.clone();
        f(&mut m);
        serde_json::to_vec(&m).unwrap()
    };
    let msgs_len = files_of(&a, &s).0.len() as u64;
    let line = br#"{"id":"rogue","role":"user","content":"injected"}"#;
    let meta_set = |bytes: &[u8]| Section::new(What::Meta, Mode::Set, 0, bytes);
    let append = |what, bytes: &[u8]| Section::new(what, Mode::Append, msgs_len, bytes);

    let mut planted: Vec<(&str, (LogId, u64))> = Vec::new();
    // Content records on the honest session's chain point, each taking a claim slot.
    let shapes: Vec<(&str, SessionRecord)> = vec![
        (
            "a torn message line",
            record(
                &s,
                Some(at),
                vec![append(What::Messages, &[&line[..], b"\n{\"id\":"].concat())],
            ),
        ),
        (
            "message lines that are not JSON",
            record(
                &s,
                Some(at),
                vec![append(What::Messages, b"not json\n\xff\xfe\n")],
            ),
        ),
        (
            "rollout lines that are not JSON",
            record(&s, Some(at), vec![append(What::Events, b"{\"type\":\n")]),
        ),
        (
            "a memory that is not JSON",
            record(
                &s,
                Some(at),
                vec![Section::new(What::Memory, Mode::Set, 0, b"\x00\x01")],
            ),
        ),
        (
            "another session's meta with good lines",
            record(
                &s,
                Some(at),
                vec![
                    meta_set(&meta(&|m| m["id"] = "someone-else".into())),
                    append(What::Messages, &[&line[..], b"\n"].concat()),
                ],
            ),
        ),
    ];
    for (what, rec) in shapes {
        planted.push((what, rogue.put(&rec)));
    }
    // Metas alone (no chain point): each would replace the session's meta everywhere.
    let metas: Vec<(&str, Vec<u8>)> = vec![
        ("a meta that does not parse", b"{\"id\": ".to_vec()),
        (
            "an empty project path",
            meta(&|m| {
                m["projectPath"] = "".into();
                m["updatedAt"] = (i64::MAX / 2).into();
            }),
        ),
        (
            "a relative project path",
            meta(&|m| m["projectPath"] = "relative/dir".into()),
        ),
        (
            "a project path climbing out",
            meta(&|m| m["projectPath"] = "/tmp/../../etc".into()),
        ),
        (
            "another session's meta",
            meta(&|m| m["id"] = "someone-else".into()),
        ),
        ("a meta that is an array", b"[1, 2, 3]".to_vec()),
    ];
    for (what, bytes) in metas {
        planted.push((what, rogue.put(&record(&s, None, vec![meta_set(&bytes)]))));
    }
    // Sessions of its own that no machine could make.
    let id = "rogue-session-sans-meta";
    planted.push((
        "a session's first record without a meta",
        rogue.put(&record(
            id,
            Some(rogue.key.genesis(id)),
            vec![Section::new(
                What::Messages,
                Mode::Set,
                0,
                [&line[..], b"\n"].concat(),
            )],
        )),
    ));
    let id = "rogue-session-relative";
    let mut m = good_meta.clone();
    m["id"] = id.into();
    m["projectPath"] = "../../outside".into();
    planted.push((
        "a new session placed outside",
        rogue.put(&record(
            id,
            Some(rogue.key.genesis(id)),
            vec![
                meta_set(&serde_json::to_vec(&m).unwrap()),
                Section::new(What::Messages, Mode::Set, 0, [&line[..], b"\n"].concat()),
            ],
        )),
    ));

    // Beta holds s as synced: nothing of it changes but for alpha's honest turn.
    let before_b = snapshot(&b.join("sessions"));
    n.turn(&a, Some(&s), "alpha continues, une suite honnête");
    let (ra, _) = sync_now(&n, &a);
    let reported = |r: &Value, log: LogId, index: u64| {
        r["skipped"].as_array().unwrap().iter().any(|k| {
            k["host"] == rogue.host.to_string()
                && k["log"] == log.to_string()
                && k["index"] == index
        })
    };
    for (what, (log, index)) in &planted {
        assert!(reported(&ra, *log, *index), "alpha: {what}: {ra}");
    }
    let b_own = n.turn(&b, None, "beta's own session, pushed despite the rogue");
    let (rb, err) = sync_now(&n, &b);
    for (what, (log, index)) in &planted {
        assert!(reported(&rb, *log, *index), "beta: {what}: {rb}");
    }
    assert!(
        err.contains(&format!("machine {}", rogue.host)) && err.contains("passed over"),
        "{err}"
    );
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    assert_eq!(meta_json(&b, &s)["projectPath"], good_meta["projectPath"]);
    let after_b = snapshot(&b.join("sessions"));
    for (path, bytes) in &before_b {
        let changed = after_b.get(path) != Some(bytes);
        let of_s = path.to_string_lossy().contains(&s);
        assert!(!changed || of_s, "{} changed", path.display());
    }
    assert!(
        !String::from_utf8_lossy(&files_of(&b, &s).0).contains("injected"),
        "nothing of the rogue's lands"
    );
    // Alpha gets beta's session; each slot was reported once and nothing is left to do.
    let (ra, _) = sync_now(&n, &a);
    assert!(sessions(&a).contains_key(&b_own), "{ra}");
    for h in [&a, &b] {
        let (r, err) = sync_now(&n, h);
        assert_eq!(r["skipped"].as_array().unwrap().len(), 0, "{r}");
        assert!(!err.contains("warning"), "{err}");
    }

    // A machine that joins now gets every honest session and nothing of the rogue's.
    let c = n.home("gamma");
    n.join(&c, &phrase);
    let (rc, _) = sync_now(&n, &c);
    for (what, (log, index)) in &planted {
        assert!(reported(&rc, *log, *index), "gamma: {what}: {rc}");
    }
    let ids = |h: &Path| sessions(h).into_keys().collect::<Vec<_>>();
    assert_eq!(ids(&c), ids(&a));
    assert_eq!(ids(&c).len(), 2);
    for id in ids(&a) {
        assert_eq!(files_of(&a, &id), files_of(&c, &id), "{id}");
    }
    assert!(!c.join("outside").exists());
}

#[test]
fn a_copied_home_becomes_another_machine_and_nothing_is_torn_or_lost() {
    copied_home(net());
}

#[test]
fn a_copied_home_becomes_another_machine_over_s3() {
    copied_home(net_on_s3());
}

/// Every line of every session of `home` is JSON (nothing torn).
fn all_lines_parse(home: &Path) {
    for id in sessions(home).into_keys() {
        let (msgs, _) = files_of(home, &id);
        for line in String::from_utf8(msgs).unwrap().lines() {
            assert!(
                serde_json::from_str::<Value>(line).is_ok(),
                "{id}: a torn line: {line}"
            );
        }
    }
}

/// A home copied to a second place (a restored backup, a cloned VM) keeps the machine id.
/// Both continue one synced session, and the copy starts one of its own: the copy finds
/// records under its id that it did not write, takes an id of its own, keeps its turns of
/// the shared session as a fork, and every machine ends with every turn of both, whole.
fn copied_home(n: Net) {
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "avant la copie");
    n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);
    let copy = n.home("alpha-copy");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&a)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let host = |h: &Path| n.json(h, &["sync", "status", "--json"])["host"].clone();
    assert_eq!(host(&a), host(&copy));

    n.turn(&a, Some(&s), "alpha continues after the copy");
    n.turn(&copy, Some(&s), "the copy continues too");
    let own = n.turn(&copy, None, "a session made on the copy");
    let (ra, _) = sync_now(&n, &a);
    assert!(ra.get("newHost").is_none(), "{ra}");
    let (rc, err) = sync_now(&n, &copy);
    assert_eq!(rc["newHost"]["was"], host(&a), "{rc}");
    assert_ne!(host(&copy), host(&a));
    assert!(err.contains("is a copy of another machine's"), "{err}");
    assert_eq!(rc["forks"].as_array().unwrap().len(), 1, "{rc}");
    // Quiet from then on; everyone gets everything.
    let (rc, _) = sync_now(&n, &copy);
    assert!(rc.get("newHost").is_none(), "{rc}");
    for h in [&a, &b, &copy, &a] {
        sync_now(&n, h);
    }
    let ids = |h: &Path| sessions(h).into_keys().collect::<Vec<_>>();
    assert_eq!(ids(&a).len(), 3, "s, the copy's fork of it, the copy's own");
    assert!(ids(&a).contains(&own));
    for h in [&b, &copy] {
        assert_eq!(ids(h), ids(&a));
        for id in ids(&a) {
            assert_eq!(files_of(&a, &id), files_of(h, &id), "{id}");
        }
        all_lines_parse(h);
    }
    let every = ids(&b)
        .iter()
        .map(|id| String::from_utf8(files_of(&b, id).0).unwrap())
        .collect::<String>();
    for turn in [
        "avant la copie",
        "alpha continues after the copy",
        "the copy continues too",
        "a session made on the copy",
    ] {
        assert!(every.contains(turn), "{turn} is lost");
    }
}

#[test]
fn a_member_that_rotates_the_others_out_locks_no_one_out_for_good() {
    rogue_rotation(net());
}

/// A member sets a credential only it knows (`PUT /sync/v1/credential` by hand): every other
/// machine is told it was rotated out by a request that named no machine of the group, and
/// when; nothing it holds changes; the command it names (a new group from its copy, which the
/// others join) works, and the rogue reaches nothing of the new group. A rotation by one of
/// the group's own machines is named: its machine id, read from a notice sealed with the key
/// rotated out.
fn rogue_rotation(n: Net) {
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let sa = n.turn(&a, None, "alpha's session, à garder");
    let phrase = n.group(&a, &b);
    let sb = n.turn(&b, None, "beta's session, à garder aussi");
    sync_now(&n, &b);
    sync_now(&n, &a);
    let key = SyncKey::parse(&phrase).unwrap();
    let rogue = Remote::new(&n.url, None).unwrap().for_key(&key);
    let private = SyncKey::from_bytes([9; 32]);
    assert!(
        rogue
            .rotate_credential(&private.credential_hash(), None)
            .unwrap()
    );
    let rogue = rogue.with_credential(private.credential());
    let logs_before = rogue.status().unwrap().len();

    for h in [&a, &b] {
        let before = snapshot(&h.join("sessions"));
        let err = n.fails(h, &["sync", "now"]);
        assert!(
            err.contains("named no machine of the group")
                && err.contains("Nothing here was changed"),
            "{err}"
        );
        assert!(
            err.contains(&format!("freecode sync init --server {} --force", n.url)),
            "{err}"
        );
        assert_eq!(snapshot(&h.join("sessions")), before);
    }
    // The command it names: a new group from alpha's copy; beta joins it.
    n.ok(&a, &["sync", "init", "--server", &n.url, "--force"]);
    sync_now(&n, &a);
    let new_phrase = n
        .ok(&a, &["sync", "key"])
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let out = n.run_with_input(
        &b,
        &["sync", "join", "--server", &n.url, "--force"],
        &new_phrase,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sync_now(&n, &b);
    sync_now(&n, &a);
    for h in [&a, &b] {
        let ids = sessions(h);
        assert!(ids.contains_key(&sa) && ids.contains_key(&sb), "{ids:?}");
        assert_eq!(ids.len(), 2);
        for id in [&sa, &sb] {
            assert_eq!(files_of(h, id), files_of(&a, id));
        }
    }
    assert_eq!(
        rogue.status().unwrap().len(),
        logs_before,
        "the rogue sees nothing new"
    );

    // A rotation by a machine of the group names it.
    n.ok(&b, &["sync", "rotate"]);
    let b_host = n.json(&b, &["sync", "status", "--json"])["host"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = n.fails(&a, &["sync", "now"]);
    assert!(err.contains(&format!("by machine {b_host}")), "{err}");
    let rotated = n
        .ok(&b, &["sync", "key"])
        .lines()
        .last()
        .unwrap()
        .to_owned();
    n.join(&a, &rotated);
    sync_now(&n, &a);
}

/// A member fills its group's object limit with 1-byte records (in a log of its own and in
/// the honest session's log, under a machine id of its own): every push then gets 413.
/// `sync compact` removes them, and only them; the other machine drops its copies of them
/// (no refill sends them back); pushes go through again and nothing honest is lost.
#[test]
fn a_group_a_member_filled_is_made_room_in_by_sync_compact() {
    let n = net_limited(freecode_remote::server::GroupLimits {
        max_objects: 40,
        ..freecode_remote::server::GroupLimits::default()
    });
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "une session avant le remplissage");
    let phrase = n.group(&a, &b);
    sync_now(&n, &b);
    let key = SyncKey::parse(&phrase).unwrap();
    let rogue = Remote::new(&n.url, None).unwrap().for_key(&key);
    let junk_host = HostId::generate().unwrap();
    let junk_log = key.log_id("junk");
    let real_log = key.log_id(&s);
    let mut filled = 0;
    for i in 0..100u64 {
        let log = if i % 2 == 0 { junk_log } else { real_log };
        match rogue.put_record(&log, &junk_host, i / 2, b"x") {
            Ok(_) => filled += 1,
            Err(e) => {
                assert!(e.to_string().contains("413"), "{e}");
                break;
            }
        }
    }
    assert!(filled > 10, "{filled}");
    // Beta pulls (and keeps copies of) the garbage; alpha's next push is refused.
    sync_now(&n, &b);
    n.turn(&a, Some(&s), "alpha's turn that does not fit");
    let err = n.fails(&a, &["sync", "now"]);
    assert!(err.contains("413") && err.contains("objects"), "{err}");

    let r = n.json(&b, &["sync", "compact", "--json"]);
    assert_eq!(r["records"], filled, "{r}");
    assert_eq!(r["removed"].as_array().unwrap().len(), 2, "{r}");
    sync_now(&n, &a);
    sync_now(&n, &b);
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    assert!(String::from_utf8_lossy(&files_of(&b, &s).0).contains("alpha's turn"));
    // Nothing of the garbage comes back, whoever syncs.
    for h in [&a, &b, &a] {
        sync_now(&n, h);
    }
    let left: u64 = rogue
        .status()
        .unwrap()
        .iter()
        .filter(|l| l.host == junk_host)
        .map(|l| l.count)
        .sum();
    assert_eq!(left, 0);
    // Nothing to remove a second time.
    let again = n.json(&b, &["sync", "compact", "--json"]);
    assert_eq!(again["records"], 0, "{again}");
}

/// A member claims a session's next chain point for a record it never stores: the honest
/// machine's push of that session waits (said on stderr), and once the claim has waited past
/// the patience (state's first-seen time moved back here, as 15 minutes passing would) it is
/// passed over: the turn reaches the others.
#[test]
fn a_claim_no_record_follows_holds_a_session_back_only_for_a_while() {
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "une session que l'on réclame");
    let phrase = n.group(&a, &b);
    sync_now(&n, &b);
    let key = SyncKey::parse(&phrase).unwrap();
    let rogue = Remote::new(&n.url, None).unwrap().for_key(&key);
    let log = key.log_id(&s);
    let at = point(&a, &s);
    let ghost = HostId::generate().unwrap();
    let claim = key.seal_claim(&log, &at, &ghost, 5).unwrap();
    rogue.put_claim(&log, &at, &claim).unwrap();

    n.turn(&a, Some(&s), "alpha's turn behind the claim");
    let (ra, err) = sync_now(&n, &a);
    assert_eq!(ra["sessionsPushed"], 0, "{ra}");
    assert!(err.contains("waits for"), "{err}");
    let state = a.join("state/sync/state.json");
    let mut st: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let pending = st["pendingClaims"].as_object_mut().unwrap();
    assert_eq!(pending.len(), 1, "{st}");
    for v in pending.values_mut() {
        *v = (v.as_u64().unwrap() - 16 * 60).into();
    }
    std::fs::write(&state, serde_json::to_vec(&st).unwrap()).unwrap();
    let (ra, _) = sync_now(&n, &a);
    assert_eq!(ra["sessionsPushed"], 1, "{ra}");
    sync_now(&n, &b);
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    assert!(String::from_utf8_lossy(&files_of(&b, &s).0).contains("behind the claim"));
}
