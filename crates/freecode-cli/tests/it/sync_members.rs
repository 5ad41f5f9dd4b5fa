//! Home sync against a member of the group gone bad (a stolen laptop, a broken build, a script
//! gone wrong): a machine with the group's key and credential that writes records which open
//! but hold what no machine writes. The honest machines keep syncing, nothing they hold
//! changes, and a machine that joins later gets every honest session.

use std::collections::BTreeMap;
use std::path::Path;

use freecode_ops::home_sync::record::{Mode, Section, SectionHead, SessionRecord, What};
use freecode_remote::home_sync::{Chain, HostId, Kind, LogId, Remote, SyncKey};
use serde_json::Value;

use crate::sync_home::{Net, files_of, net, net_on_s3, sessions, snapshot, sync_now};

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

fn section(what: What, mode: Mode, from: u64, bytes: &[u8]) -> Section {
    Section {
        head: SectionHead {
            what,
            mode,
            from,
            len: bytes.len() as u64,
        },
        bytes: bytes.to_vec(),
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
    let phrase = n.first(&a);
    n.ok(&a, &["sync", "push"]);
    n.join(&b, &phrase);
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
    let meta_set = |bytes: &[u8]| section(What::Meta, Mode::Set, 0, bytes);
    let append = |what, bytes: &[u8]| section(what, Mode::Append, msgs_len, bytes);

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
                vec![section(What::Memory, Mode::Set, 0, b"\x00\x01")],
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
            vec![section(
                What::Messages,
                Mode::Set,
                0,
                &[&line[..], b"\n"].concat(),
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
                section(What::Messages, Mode::Set, 0, &[&line[..], b"\n"].concat()),
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
