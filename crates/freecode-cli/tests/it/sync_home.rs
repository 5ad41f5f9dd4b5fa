//! Home sync end to end: two and three homes, the real `freecode` binary, and a real server on
//! loopback (a filesystem store, and moto's S3 for the travel and fork tests), with sessions,
//! turns, forks, renames, deletes and purges travelling both ways, a server that tampers or
//! loses its data, pushes and pulls killed part way, `sync.auto`, and key rotation.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::common::Ctx;
use freecode_remote::blob::StoreSpec;
use freecode_remote::server::{ServerConfig, ServerHandle, spawn};
use serde_json::Value;

pub(crate) struct Net {
    pub(crate) ctx: Ctx,
    pub(crate) server: ServerHandle,
    /// The file store's directory (an S3 net has none there).
    store: PathBuf,
    pub(crate) spec: StoreSpec,
    pub(crate) url: String,
    _moto: Option<freecode_testkit::Moto>,
}

/// A server on loopback over a file store.
pub(crate) fn net() -> Net {
    let ctx = Ctx::empty();
    let store = ctx.path("server");
    net_over(ctx, StoreSpec::File(store.clone()), store, None)
}

/// A server on loopback over moto's S3.
pub(crate) fn net_on_s3() -> Net {
    let moto = freecode_testkit::Moto::start();
    moto.create_bucket("home-sync");
    let spec = StoreSpec::S3 {
        bucket: "home-sync".into(),
        prefix: "team".into(),
        options: freecode_remote::blob::S3Options {
            endpoint: Some(moto.endpoint()),
            region: Some("us-east-1".into()),
            access_key_id: Some("test-access-key".into()),
            secret_access_key: Some("test-secret-key".into()),
            session_token: None,
            allow_http: Some(true),
        },
    };
    let ctx = Ctx::empty();
    let store = ctx.path("no-file-store");
    net_over(ctx, spec, store, Some(moto))
}

/// A server on loopback over a file store, its groups held to `limits`.
pub(crate) fn net_limited(limits: freecode_remote::server::GroupLimits) -> Net {
    let ctx = Ctx::empty();
    let store = ctx.path("server");
    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(store.clone()),
        group_limits: limits,
        ..ServerConfig::default()
    })
    .unwrap();
    let url = server.url.clone();
    Net {
        ctx,
        server,
        spec: StoreSpec::File(store.clone()),
        store,
        url,
        _moto: None,
    }
}

fn net_over(
    ctx: Ctx,
    spec: StoreSpec,
    store: PathBuf,
    moto: Option<freecode_testkit::Moto>,
) -> Net {
    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: spec.clone(),
        ..ServerConfig::default()
    })
    .unwrap();
    let url = server.url.clone();
    Net {
        ctx,
        server,
        store,
        spec,
        url,
        _moto: moto,
    }
}

impl Net {
    /// Every object of the groups the server's store holds (`logs/…`, `claims/…`, `rings/…`,
    /// their group's prefix left out), read through the store itself, with its bytes.
    fn objects(&self) -> BTreeMap<String, Vec<u8>> {
        self.all_objects()
            .into_iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix("groups/")?.split_once('/')?.1;
                (rest != "group").then(|| (rest.to_owned(), v))
            })
            .collect()
    }

    /// Every sync object the server's store holds, by its whole key (`creds/…` and
    /// `groups/<group>/…`), read through the store itself, with its bytes.
    fn all_objects(&self) -> BTreeMap<String, Vec<u8>> {
        use freecode_remote::blob::{BlobStore, SyncKey};
        let store = BlobStore::open(&self.spec).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut out = BTreeMap::new();
            for top in ["groups", "creds"] {
                for key in store
                    .sync_list(&SyncKey::new([top]).unwrap())
                    .await
                    .unwrap()
                {
                    let bytes = store.sync_get(&key).await.unwrap().unwrap_or_default();
                    out.insert(key.segments().join("/"), bytes.to_vec());
                }
            }
            out
        })
    }

    pub(crate) fn home(&self, name: &str) -> PathBuf {
        self.ctx.path(name)
    }

    pub(crate) fn run(&self, home: &Path, args: &[&str]) -> Output {
        let project = self.ctx.path("project");
        std::fs::create_dir_all(&project).unwrap();
        common::freecode(home)
            .env_remove("FREECODE_ROLLOUT")
            .current_dir(project)
            .args(args)
            .output()
            .unwrap()
    }

    pub(crate) fn ok(&self, home: &Path, args: &[&str]) -> String {
        let out = self.run(home, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub(crate) fn json(&self, home: &Path, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(home, args)).unwrap()
    }

    pub(crate) fn fails(&self, home: &Path, args: &[&str]) -> String {
        let out = self.run(home, args);
        assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
        String::from_utf8(out.stderr).unwrap()
    }

    /// A first machine (`init`) and the phrase its `sync key` prints last.
    pub(crate) fn first(&self, home: &Path) -> String {
        self.ok(home, &["sync", "init", "--server", &self.url]);
        let key = self.ok(home, &["sync", "key"]);
        key.lines().last().unwrap().to_owned()
    }

    /// A group of two machines: `first` makes it and pushes what it has, `second` joins with
    /// the phrase; the phrase.
    pub(crate) fn group(&self, first: &Path, second: &Path) -> String {
        let phrase = self.first(first);
        self.ok(first, &["sync", "push"]);
        self.join(second, &phrase);
        phrase
    }

    /// `sync join` with the phrase on standard input, as the README shows it.
    pub(crate) fn join(&self, home: &Path, phrase: &str) {
        let out = self.run_with_input(home, &["sync", "join", "--server", &self.url], phrase);
        assert!(
            out.status.success(),
            "join: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("command line"),
            "no warning for a phrase read from standard input"
        );
    }

    pub(crate) fn run_with_input(&self, home: &Path, args: &[&str], input: &str) -> Output {
        use std::io::Write as _;
        let project = self.ctx.path("project");
        std::fs::create_dir_all(&project).unwrap();
        let mut child = common::freecode(home)
            .env_remove("FREECODE_ROLLOUT")
            .current_dir(project)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// A turn of the scripted agent: in a new session, or in `session`.
    pub(crate) fn turn(&self, home: &Path, session: Option<&str>, prompt: &str) -> String {
        let mut args = vec!["run", "--provider", "scripted"];
        if let Some(s) = session {
            args.extend(["-s", s]);
        }
        args.push(prompt);
        self.ok(home, &args);
        newest(home)
    }
}

/// Waits out the server's status listing age: a store changed behind the server's back (a
/// test's hand on its files) shows in its counts after that.
pub(crate) fn settle() {
    std::thread::sleep(freecode_remote::server::SYNC_STATUS_TTL);
}

/// Every session of a home: id → meta.
pub(crate) fn sessions(home: &Path) -> BTreeMap<String, Value> {
    let out = common::freecode(home)
        .args(["session", "list", "--all", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap().to_owned(), s.clone()))
        .collect()
}

pub(crate) fn newest(home: &Path) -> String {
    sessions(home)
        .into_values()
        .max_by_key(|m| m["updatedAt"].as_i64())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A session's `messages.jsonl` and rollout log, byte for byte.
pub(crate) fn files_of(home: &Path, id: &str) -> (Vec<u8>, Vec<u8>) {
    let msgs = common::find_below(&home.join("sessions"), id).join("messages.jsonl");
    let events = home.join("rollout/sessions").join(id).join("events.jsonl");
    (
        std::fs::read(msgs).unwrap_or_default(),
        std::fs::read(events).unwrap_or_default(),
    )
}

/// Every file of a tree with its bytes (state/ aside: what a user's sessions are).
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == "state") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

fn server_files(store: &Path) -> Vec<PathBuf> {
    snapshot(&store.join("sync")).into_keys().collect()
}

/// The directory of the one group a file store holds.
fn group_dir(store: &Path) -> PathBuf {
    let mut groups: Vec<PathBuf> = std::fs::read_dir(store.join("sync/groups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(groups.len(), 1, "{groups:?}");
    groups.pop().unwrap()
}

#[test]
fn sessions_turns_renames_deletes_and_purges_travel_both_ways() {
    travel_both_ways(net());
}

#[test]
fn sessions_turns_renames_deletes_and_purges_travel_both_ways_over_s3() {
    travel_both_ways(net_on_s3());
}

fn travel_both_ways(n: Net) {
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "plan the zebra-crossing refactor, ünïcödé 漢字");
    let phrase = n.first(&a);
    assert_eq!(phrase.split(' ').count(), 24);
    let pushed = n.json(&a, &["sync", "push", "--json"]);
    assert_eq!(pushed["sessionsPushed"], 1);
    common::schema_check("sync-report.json", &pushed);
    common::schema_check("sync-key.json", &n.json(&a, &["sync", "key", "--json"]));
    common::schema_check(
        "sync-status.json",
        &n.json(&a, &["sync", "status", "--json"]),
    );

    n.join(&b, &phrase);
    let pulled = n.json(&b, &["sync", "pull", "--json"]);
    assert_eq!(pulled["sessionsPulled"], 1);
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    assert!(!files_of(&b, &s).1.is_empty(), "the rollout log travels");
    assert_eq!(sessions(&a)[&s], sessions(&b)[&s]);

    // A turn on beta reaches alpha.
    n.turn(&b, Some(&s), "second turn from beta");
    n.ok(&b, &["sync", "now"]);
    n.ok(&a, &["sync", "now"]);
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    assert_eq!(sessions(&a)[&s]["turnCount"], 2);

    // A rename on alpha, a soft delete on beta after it: both arrive, the later wins.
    n.ok(&a, &["session", "rename", &s, "zèbre renamed"]);
    n.ok(&a, &["sync", "now"]);
    n.ok(&b, &["sync", "now"]);
    assert_eq!(sessions(&b)[&s]["title"], "zèbre renamed");
    n.ok(&b, &["session", "delete", &s]);
    n.ok(&b, &["sync", "now"]);
    n.ok(&a, &["sync", "now"]);
    assert_eq!(sessions(&a)[&s]["status"], "deleted");
    n.ok(&a, &["session", "restore", &s]);
    n.ok(&a, &["sync", "now"]);
    n.ok(&b, &["sync", "now"]);
    assert_eq!(sessions(&b)[&s]["status"], "active");

    // A move to another project on alpha: beta's copy moves too, directory and all.
    n.ok(&a, &["session", "move", &s, "--project", "/srv/déménagé"]);
    n.ok(&a, &["sync", "now"]);
    n.ok(&b, &["sync", "now"]);
    assert_eq!(sessions(&b)[&s]["projectPath"], "/srv/déménagé");
    let dir_of = |h: &Path| {
        common::find_below(&h.join("sessions"), &s)
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_owned()
    };
    assert_eq!(dir_of(&a), dir_of(&b));
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    let r = n.json(&b, &["sync", "now", "--json"]);
    assert_eq!(
        (r["pushed"].as_u64(), r["pulled"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );

    // The server holds none of the words.
    let objects = n.objects();
    assert!(
        objects.keys().any(|k| k.starts_with("logs/")),
        "{objects:?}"
    );
    for (name, bytes) in &objects {
        for word in ["zebra", "ünïcödé", "漢字", "second turn", "zèbre"] {
            assert!(
                !bytes.windows(word.len()).any(|w| w == word.as_bytes()),
                "{word} in {name}"
            );
        }
    }

    // A purge on beta purges alpha's copy and the server's records.
    let before = objects.len();
    n.ok(&b, &["session", "delete", "--purge", "--yes", &s]);
    let r = n.json(&b, &["sync", "now", "--json"]);
    assert_eq!(r["purged"], serde_json::json!([s]));
    n.ok(&a, &["sync", "now"]);
    assert!(!sessions(&a).contains_key(&s));
    let left: Vec<String> = n.objects().into_keys().collect();
    assert!(left.len() < before, "{left:?}");
    assert!(
        left.iter().all(|k| k.starts_with("logs/")),
        "claims of the purged log are gone: {left:?}"
    );
    // And it does not come back from either side.
    n.ok(&a, &["sync", "now"]);
    n.ok(&b, &["sync", "now"]);
    assert!(!sessions(&a).contains_key(&s) && !sessions(&b).contains_key(&s));
    drop(n.server);
}

#[test]
fn a_session_continued_on_two_machines_at_once_becomes_a_fork_and_nothing_is_lost() {
    continued_on_two_machines(net());
}

#[test]
fn a_session_continued_on_two_machines_at_once_becomes_a_fork_over_s3() {
    continued_on_two_machines(net_on_s3());
}

fn continued_on_two_machines(n: Net) {
    let (a, b, c) = (n.home("alpha"), n.home("beta"), n.home("gamma"));
    let s = n.turn(&a, None, "the shared start");
    let phrase = n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);

    n.turn(&a, Some(&s), "alpha's own continuation");
    n.turn(&b, Some(&s), "beta's own continuation");
    n.ok(&a, &["sync", "now"]);
    let r = n.json(&b, &["sync", "now", "--json"]);
    let forks = r["forks"].as_array().unwrap();
    assert_eq!(forks.len(), 1, "{r}");
    assert_eq!(forks[0]["sessionId"], s.as_str());
    let fork = forks[0]["forkId"].as_str().unwrap().to_owned();
    n.ok(&a, &["sync", "now"]);

    // A third machine joining later sees the same two sessions.
    n.join(&c, &phrase);
    n.ok(&c, &["sync", "now"]);
    for home in [&a, &b, &c] {
        let all = sessions(home);
        assert_eq!(all.len(), 2, "{}", home.display());
        assert_eq!(all[&fork]["parentId"], s.as_str());
        let (msgs, _) = files_of(home, &s);
        let text = String::from_utf8_lossy(&msgs);
        assert!(text.contains("alpha's own continuation"));
        assert!(!text.contains("beta's own continuation"));
        let (fork_msgs, _) = files_of(home, &fork);
        let text = String::from_utf8_lossy(&fork_msgs);
        assert!(text.contains("beta's own continuation") && text.contains("the shared start"));
    }
    assert_eq!(files_of(&a, &s), files_of(&c, &s));
    assert_eq!(files_of(&a, &fork), files_of(&b, &fork));

    // The same for a session recorded without a rollout log.
    let quiet = |home: &Path, session: Option<&str>, prompt: &str| {
        let mut cmd = common::freecode(home);
        cmd.current_dir(n.ctx.path("project"))
            .args(["run", "--provider", "scripted"]);
        if let Some(s) = session {
            cmd.args(["-s", s]);
        }
        assert!(cmd.arg(prompt).output().unwrap().status.success());
        newest(home)
    };
    let u = quiet(&a, None, "no rollout here");
    n.ok(&a, &["sync", "now"]);
    n.ok(&b, &["sync", "now"]);
    quiet(&a, Some(&u), "alpha again");
    quiet(&b, Some(&u), "beta again");
    n.ok(&a, &["sync", "now"]);
    let r = n.json(&b, &["sync", "now", "--json"]);
    assert_eq!(r["forks"][0]["sessionId"], u.as_str(), "{r}");
    n.ok(&a, &["sync", "now"]);
    assert_eq!(sessions(&a).len(), 4);
    assert_eq!(files_of(&a, &u), files_of(&b, &u));
    assert!(!b.join("rollout/sessions").join(&u).exists());
}

#[test]
fn a_tampering_server_is_passed_over_and_nothing_wrong_is_applied() {
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "first");
    let t = n.turn(&a, None, "second session");
    n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);
    n.turn(&a, Some(&s), "more for s");
    n.ok(&a, &["sync", "push"]);
    n.turn(&a, Some(&s), "and more for s");
    n.turn(&a, Some(&t), "more for t");
    n.ok(&a, &["sync", "push"]);

    let records: Vec<PathBuf> = server_files(&n.store)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/logs/"))
        .collect();
    let log_of = |p: &Path| p.parent().unwrap().to_owned();
    // s's log on alpha has three records (0, 1, 2); t's two.
    let mut by_log: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for r in &records {
        by_log.entry(log_of(r)).or_default().push(r.clone());
    }
    for v in by_log.values_mut() {
        v.sort();
    }
    let long = by_log.values().find(|v| v.len() == 3).unwrap().clone();
    let other = by_log.values().find(|v| v.len() == 2).unwrap().clone();

    // Each change: the pull goes through (a slot that does not open stops nobody), says which
    // record it passed over the first time it meets it, and beta never holds a byte alpha did
    // not write: its s is alpha's as of some record, its t alpha's.
    let check = |what: &str, said: Option<&str>, undo: &dyn Fn()| {
        let out = n.run(&b, &["sync", "pull"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {err}");
        if let Some(said) = said {
            assert!(
                err.contains(said) && err.contains("passed over"),
                "{what}: {err}"
            );
        }
        let (ours, theirs) = (files_of(&b, &s), files_of(&a, &s));
        assert!(
            theirs.0.starts_with(&ours.0),
            "{what}: beta's s is not alpha's"
        );
        assert!(
            theirs.1.starts_with(&ours.1),
            "{what}: beta's s log is not alpha's"
        );
        assert_eq!(files_of(&b, &t), files_of(&a, &t), "{what}");
        undo();
    };
    let put = |p: &Path, bytes: &[u8]| std::fs::write(p, bytes).unwrap();
    let before = files_of(&b, &s);

    // A flipped bit in a record.
    let orig = std::fs::read(&long[1]).unwrap();
    let mut bad = orig.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    put(&long[1], &bad);
    check("flipped bit", Some("record 1 of machine"), &|| {
        put(&long[1], &orig)
    });
    assert_eq!(
        files_of(&b, &s),
        before,
        "nothing after the broken record applied"
    );
    // A truncated record.
    put(&long[1], &orig[..orig.len() / 2]);
    check("truncated", None, &|| put(&long[1], &orig));
    // Two records swapped (reordered).
    let (r1, r2) = (
        std::fs::read(&long[1]).unwrap(),
        std::fs::read(&long[2]).unwrap(),
    );
    put(&long[1], &r2);
    put(&long[2], &r1);
    check("reordered", Some("record 2 of machine"), &|| {
        put(&long[1], &r1);
        put(&long[2], &r2);
    });
    // A record of another session's log spliced in.
    let foreign = std::fs::read(&other[1]).unwrap();
    put(&long[1], &foreign);
    check("spliced", None, &|| put(&long[1], &orig));
    // A record replayed at a later index of its own log.
    put(&long[2], &orig);
    check("replayed", None, &|| put(&long[2], &r2));

    // All undone: the slots passed over are tried again, and the pull goes through.
    n.ok(&b, &["sync", "pull"]);
    assert_eq!(files_of(&a, &s), files_of(&b, &s));
    assert_eq!(files_of(&a, &t), files_of(&b, &t));

    // A record dropped from what beta has already seen: beta keeps a copy of every record it
    // applied, so it sends it back, byte for byte, and nothing local changes.
    let snap = snapshot(&b);
    std::fs::remove_file(&long[2]).unwrap();
    settle();
    let out = n.run(&b, &["sync", "pull"]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the server had lost 1 record"), "{said}");
    assert_eq!(std::fs::read(&long[2]).unwrap(), r2, "the same bytes back");
    assert_eq!(snapshot(&b), snap);
    // Without the copies (a machine whose state was lost), a stale server is refused.
    std::fs::remove_file(&long[2]).unwrap();
    for f in ["records.db", "records.db-wal", "records.db-shm"] {
        let _ = std::fs::remove_file(b.join("state/sync").join(f));
    }
    settle();
    let err = n.fails(&b, &["sync", "pull"]);
    assert!(err.contains("stale"), "{err}");
    assert_eq!(snapshot(&b), snap);
}

#[test]
fn a_server_that_lost_its_data_is_refilled_by_the_next_sync() {
    let n = net();
    let (a, b, c) = (n.home("alpha"), n.home("beta"), n.home("gamma"));
    let s = n.turn(&a, None, "première question");
    let t = n.turn(&a, None, "to be purged");
    let phrase = n.first(&a);
    n.join(&b, &phrase);
    n.ok(&a, &["sync", "push"]);
    n.ok(&b, &["sync", "pull"]);
    n.turn(&b, Some(&s), "suite sur beta");
    n.ok(&b, &["sync", "now"]);
    n.ok(&a, &["sync", "now"]);
    let on_server = |_: ()| {
        let mut v: Vec<(PathBuf, Vec<u8>)> = snapshot(&n.store.join("sync"))
            .into_iter()
            .filter(|(p, _)| p.to_string_lossy().contains("/logs/"))
            .collect();
        v.sort();
        v
    };
    let full = on_server(());
    assert!(!full.is_empty());
    // The copies are private, as the rest of the sync state.
    for h in [&a, &b] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(h.join("state/sync/records.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The whole server lost: alpha's next push sends back what it pushed and what it applied
    // (beta's records too), byte for byte, claims included.
    std::fs::remove_dir_all(n.store.join("sync")).unwrap();
    settle();
    let out = n.run(&a, &["sync", "push", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["refilled"].as_u64().unwrap(),
        full.len() as u64,
        "{report}"
    );
    assert_eq!(on_server(()), full);
    // Beta sees nothing new; a new machine gets everything.
    let before = snapshot(&b);
    n.ok(&b, &["sync", "now"]);
    assert_eq!(snapshot(&b), before);
    n.join(&c, &phrase);
    n.ok(&c, &["sync", "pull"]);
    for id in [&s, &t] {
        assert_eq!(files_of(&a, id), files_of(&c, id), "session {id}");
    }
    // Continuing after the refill: the claims came back, so a stale continuation forks.
    n.turn(&a, Some(&s), "alpha again");
    n.turn(&c, Some(&s), "gamma at the same time");
    n.ok(&a, &["sync", "now"]);
    let out = n.json(&c, &["sync", "now", "--json"]);
    assert_eq!(out["forks"].as_array().unwrap().len(), 1, "{out}");

    // A session purged on alpha (its records deleted from the server) is not sent back by
    // beta, whose copies still hold it: the purge is read from the server first.
    n.ok(&a, &["session", "delete", "--purge", "--yes", &t]);
    n.ok(&a, &["sync", "push"]);
    let out = n.json(&b, &["sync", "push", "--json"]);
    assert_eq!(out["refilled"], 0, "{out}");
    n.ok(&b, &["sync", "pull"]);
    assert!(!sessions(&b).contains_key(&t), "purged on beta too");
    n.ok(&c, &["sync", "pull"]);
    assert!(!sessions(&c).contains_key(&t));
    assert!(sessions(&c).contains_key(&s));
}

#[test]
fn pushes_and_pulls_cut_short_resume_without_loss_or_duplicates() {
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "first");
    let phrase = n.first(&a);
    n.join(&b, &phrase);
    let state = |h: &Path| h.join("state/sync/state.json");

    // Killed after the record was stored but before its progress was saved: the old progress
    // comes back, and the push adopts the record instead of storing another.
    let a_before = std::fs::read(state(&a)).ok();
    n.ok(&a, &["sync", "push"]);
    let stored = server_files(&n.store).len();
    match &a_before {
        Some(bytes) => std::fs::write(state(&a), bytes).unwrap(),
        None => std::fs::remove_file(state(&a)).unwrap(),
    }
    n.ok(&a, &["sync", "push"]);
    assert_eq!(server_files(&n.store).len(), stored, "no second copy");

    // Killed after applying but before saving: applying again adds nothing.
    n.ok(&b, &["sync", "pull"]);
    let b_state = std::fs::read(state(&b)).unwrap();
    n.turn(&a, Some(&s), "another turn");
    n.ok(&a, &["sync", "push"]);
    n.ok(&b, &["sync", "pull"]);
    std::fs::write(state(&b), &b_state).unwrap();
    n.ok(&b, &["sync", "now"]);
    assert_eq!(files_of(&a, &s), files_of(&b, &s));

    // Real SIGKILLs at many points of a push of a bigger home, then a push that finishes.
    for i in 0..12 {
        n.turn(&a, None, &format!("session number {i}"));
    }
    for delay_ms in [5u64, 15, 30, 60, 120, 250] {
        killed_after(&a, "push", delay_ms);
        // And a pull killed on the other side.
        killed_after(&b, "pull", delay_ms);
    }
    n.ok(&a, &["sync", "push"]);
    n.ok(&b, &["sync", "now"]);
    n.ok(&a, &["sync", "now"]);
    let (sa, sb) = (sessions(&a), sessions(&b));
    assert_eq!(sa.keys().collect::<Vec<_>>(), sb.keys().collect::<Vec<_>>());
    assert_eq!(sa.len(), 13);
    for id in sa.keys() {
        assert_eq!(files_of(&a, id), files_of(&b, id), "session {id}");
    }
    let st = n.json(&a, &["sync", "status", "--json"]);
    assert_eq!(st["toPush"], 0, "{st}");
    assert_eq!(st["toPull"], 0, "{st}");
}

#[test]
fn sync_exclude_keeps_a_projects_sessions_on_this_machine() {
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let phrase = n.first(&a);
    n.join(&b, &phrase);
    let project = n.ctx.path("project").display().to_string();
    n.ok(
        &a,
        &[
            "config",
            "set",
            "sync.exclude",
            &format!("/nowhere/**, {project}"),
        ],
    );
    let kept = n.turn(&a, None, "stays on alpha");
    let st = n.json(&a, &["sync", "status", "--json"]);
    assert_eq!(st["toPush"], 0, "{st}");
    n.ok(&a, &["sync", "push"]);
    n.ok(&b, &["sync", "pull"]);
    assert!(sessions(&b).is_empty());
    n.ok(&a, &["config", "set", "sync.exclude", "/nowhere/**"]);
    n.ok(&a, &["sync", "push"]);
    n.ok(&b, &["sync", "pull"]);
    assert!(sessions(&b).contains_key(&kept));
    n.ok(&a, &["config", "set", "sync.exclude", "[unclosed"]);
    let err = n.fails(&a, &["sync", "push"]);
    assert!(err.contains("sync.exclude"), "{err}");
}

/// `freecode sync <what>` on `home`, sent SIGKILL after `delay_ms`.
fn killed_after(home: &Path, what: &str, delay_ms: u64) {
    let mut child = common::freecode(home)
        .args(["sync", what])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(delay_ms));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn bad_phrases_and_unset_homes_are_clear_errors() {
    let n = net();
    let a = n.home("alpha");
    let err = n.fails(&a, &["sync", "push"]);
    assert!(err.contains("sync init"), "{err}");
    let err = n.fails(
        &a,
        &[
            "sync",
            "join",
            "--server",
            &n.url,
            "these are not twenty four words",
        ],
    );
    assert!(err.contains("phrase") || err.contains("sync key"), "{err}");
    assert!(!a.join("state/sync/key").exists());
    // Nothing on standard input: told where the words come from.
    let out = n.run_with_input(&a, &["sync", "join", "--server", &n.url], "  \n");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no sync key on standard input"), "{err}");
    assert!(err.contains("--phrase-file"), "{err}");
    assert!(!a.join("state/sync/key").exists());
    // Another group (another key) on the same server: neither reads the other.
    let b = n.home("beta");
    n.turn(&a, None, "secret plans");
    n.first(&a);
    n.ok(&a, &["sync", "push"]);
    let said = n.ok(&b, &["sync", "init", "--server", &n.url]);
    assert!(!said.contains("$(freecode sync key)"), "{said}");
    let r = n.json(&b, &["sync", "pull", "--json"]);
    assert_eq!(r["pulled"], 0, "another group's records are not read: {r}");
    assert!(sessions(&b).is_empty());
    // Its own pushes land beside the other group's.
    n.turn(&b, None, "beta's group");
    n.ok(&b, &["sync", "push"]);
    n.ok(&a, &["sync", "now"]);
    assert_eq!(sessions(&a).len(), 1);
}

/// `count` sessions written as the original writes them (plain files), in `home`.
fn plant(home: &Path, count: usize) {
    for i in 0..count {
        let id = format!("dddddddd-0000-4000-8000-{i:012}");
        let dir = home.join("sessions/home__dev__p").join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        let t0 = 1_768_000_000_000i64 + i as i64;
        let meta = serde_json::json!({
            "id": id, "title": format!("séance {i}"), "projectPath": "/home/dev/p",
            "provider": "x", "status": "active", "createdAt": t0, "updatedAt": t0,
            "lastTurnAt": t0, "turnCount": 1,
        });
        std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
        let m = serde_json::json!({
            "id": format!("{id}-m0"), "role": "user", "timestamp": t0,
            "parts": [{"type": "text", "content": format!("question numéro {i}")}],
        });
        std::fs::write(dir.join("messages.jsonl"), format!("{m}\n")).unwrap();
    }
}

#[test]
fn a_first_sync_shows_its_progress_on_a_terminal_and_nothing_when_piped() {
    let n = net();
    let (a, b, c) = (n.home("alpha"), n.home("beta"), n.home("gamma"));
    plant(&a, 80);
    let phrase = n.first(&a);
    n.join(&b, &phrase);
    n.join(&c, &phrase);
    let tty = common::on_terminal(&a, &["sync", "push"], 100, 40, &[]);
    assert!(tty.contains("uploading ["), "{tty:?}");
    assert!(tty.contains("/80 sessions"), "{tty:?}");
    assert!(tty.contains("pushed 80 sessions"), "{tty:?}");
    let tty = common::on_terminal(&b, &["sync", "pull"], 100, 40, &[]);
    assert!(tty.contains("downloading ["), "{tty:?}");
    assert!(tty.contains("pulled 80 sessions"), "{tty:?}");
    // Piped: the result on stdout, nothing on stderr.
    let out = n.run(&c, &["sync", "pull"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.starts_with("pushed 0 sessions (0 bytes sent), pulled 80 sessions (")
            && said.ends_with(" bytes received), 0 purged\n"),
        "{said:?}"
    );
    assert_eq!(sessions(&c).len(), 80);
}

/// Waits up to 60 s for `done`, polling.
fn eventually(what: &str, done: &dyn Fn() -> bool) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: not within 60 s");
}

#[test]
fn sync_auto_syncs_after_each_turn_in_the_background_and_never_holds_it_up() {
    use std::io::{BufRead as _, Write as _};
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let phrase = n.first(&a);
    n.join(&b, &phrase);
    n.ok(&a, &["config", "set", "sync.auto", "true"]);
    let auto_log = a.join("state/sync/auto.log");

    // A turn of `run`: it reaches beta with no sync command on alpha.
    let s = n.turn(&a, None, "synchronisé tout seul");
    eventually("run's turn on beta", &|| {
        n.ok(&b, &["sync", "pull"]);
        sessions(&b).contains_key(&s) && files_of(&a, &s) == files_of(&b, &s)
    });

    // A turn of `serve` (JSON-RPC on stdio).
    let mut child = common::freecode(&a)
        .env_remove("FREECODE_ROLLOUT")
        .env("FREECODE_SCRIPTED_DELAY_MS", "0")
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let req = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session.send",
        "params": {"sessionId": s, "message": "par le serveur, 東京"}});
    writeln!(stdin, "{req}").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["result"]["status"], "completed", "{reply}");
    let (msgs, _) = files_of(&a, &s);
    assert!(String::from_utf8_lossy(&msgs).contains("東京"));
    eventually("serve's turn on beta", &|| {
        n.ok(&b, &["sync", "pull"]);
        files_of(&b, &s).0 == msgs
    });
    // The same home sync over JSON-RPC, in the CLI's vocabulary.
    for (id, method, schema) in [
        (2, "sync.now", "sync-report.json"),
        (3, "sync.status", "sync-status.json"),
    ] {
        let req = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method});
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(reply["id"], id, "{reply}");
        common::schema_check(schema, &reply["result"]);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let said = std::fs::read_to_string(&auto_log).unwrap();
    assert!(said.contains("sync.auto: pushed"), "{said}");

    // The server out of reach: the turn completes as ever, and the log says why it did not
    // sync.
    let cfg_path = a.join("state/sync/config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["server"] = Value::from("http://127.0.0.1:9");
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    n.turn(&a, Some(&s), "hors ligne");
    eventually("the failure in auto.log", &|| {
        std::fs::read_to_string(&auto_log).is_ok_and(|l| l.contains("sync.auto: error"))
    });
}

#[test]
fn two_syncs_of_one_home_at_once_take_turns() {
    let n = net();
    let a = n.home("alpha");
    plant(&a, 150);
    n.first(&a);
    let spawn = || {
        common::freecode(&a)
            .args(["sync", "now", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (spawn(), spawn());
    let reports: Vec<Value> = [one, two]
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let pushed: u64 = reports.iter().map(|r| r["pushed"].as_u64().unwrap()).sum();
    assert_eq!(pushed, 150, "each session once: {reports:?}");
    assert!(
        reports
            .iter()
            .all(|r| r["forks"].as_array().unwrap().is_empty())
    );
    assert_eq!(sessions(&a).len(), 150, "no fork made");
    let records = server_files(&n.store)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/logs/"))
        .count();
    assert_eq!(records, 150);
    let st = n.json(&a, &["sync", "status", "--json"]);
    assert_eq!(st["toPush"], 0, "{st}");
}

#[test]
fn a_session_compacted_here_while_continued_there_is_rebuilt_and_the_compaction_kept_as_a_fork() {
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "premier tour");
    n.turn(&a, Some(&s), "deuxième tour");
    n.turn(&a, Some(&s), "troisième tour");
    n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);

    // Beta compacts (rewrites its log) while alpha goes on.
    let summary = n.ctx.path("summary.txt");
    std::fs::write(&summary, "résumé: three turns about nothing").unwrap();
    n.ok(
        &b,
        &[
            "session",
            "compact",
            &s,
            "--keep",
            "1",
            "--summary-file",
            summary.to_str().unwrap(),
        ],
    );
    let compacted = files_of(&b, &s).0;
    n.turn(&a, Some(&s), "alpha continue");
    n.ok(&a, &["sync", "now"]);
    let r = n.json(&b, &["sync", "now", "--json"]);
    let forks = r["forks"].as_array().unwrap();
    assert_eq!(forks.len(), 1, "{r}");
    let fork = forks[0]["forkId"].as_str().unwrap().to_owned();
    // The session is alpha's, byte for byte; beta's compaction is the fork.
    assert_eq!(files_of(&b, &s), files_of(&a, &s));
    assert_eq!(files_of(&b, &fork).0, compacted);
    n.ok(&a, &["sync", "now"]);
    assert_eq!(files_of(&a, &fork).0, compacted);
    assert_eq!(sessions(&a).len(), 2);

    // A fork already holding this machine's bytes (one made by a pull a kill cut short) is
    // taken, not made again.
    n.turn(&a, Some(&s), "alpha, once more");
    n.turn(&b, Some(&s), "beta, at the same time");
    n.ok(&a, &["sync", "now"]);
    n.ok(&b, &["session", "fork", &s]);
    let before = sessions(&b).len();
    let r = n.json(&b, &["sync", "now", "--json"]);
    assert_eq!(r["forks"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(sessions(&b).len(), before, "no second fork");
}

#[test]
fn a_rotated_key_rewraps_the_server_and_the_other_machines_join_again_keeping_their_state() {
    let n = net();
    let (a, b, c) = (n.home("alpha"), n.home("beta"), n.home("gamma"));
    let s = n.turn(&a, None, "avant la rotation");
    let old_phrase = n.first(&a);
    n.join(&b, &old_phrase);
    n.ok(&a, &["sync", "push"]);
    n.ok(&b, &["sync", "pull"]);
    n.turn(&b, Some(&s), "beta avant");
    n.ok(&b, &["sync", "now"]);
    n.ok(&a, &["sync", "now"]);
    let logs = |_: ()| snapshot(&group_dir(&n.store).join("logs"));
    let before = logs(());
    let host = n.json(&b, &["sync", "status", "--json"])["host"].clone();

    let r = n.json(&a, &["sync", "rotate", "--json"]);
    assert_eq!(r["rewrapped"].as_u64().unwrap(), before.len() as u64, "{r}");
    common::schema_check("sync-rotation.json", &r);
    assert_eq!(r["bytesSent"].as_u64().unwrap(), 80 * before.len() as u64);
    let key_id = r["keyId"].as_str().unwrap().to_owned();
    let after = logs(());
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (path, old) in &before {
        let new = &after[path];
        assert_eq!(new.len(), old.len(), "{}", path.display());
        assert_eq!(new[..6], old[..6]);
        assert_eq!(new[86..], old[86..], "the content is not sent again");
        let id: String = new[6..14].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(id, key_id);
    }
    let new_phrase = n
        .ok(&a, &["sync", "key"])
        .lines()
        .last()
        .unwrap()
        .to_owned();
    assert_ne!(new_phrase, old_phrase);

    // Alpha goes on under the new key; beta, on the old one, is told what to do.
    n.turn(&a, Some(&s), "après la rotation");
    n.ok(&a, &["sync", "push"]);
    let untouched = snapshot(&b);
    let err = n.fails(&b, &["sync", "pull"]);
    assert!(err.contains("rotated out"), "{err}");
    assert!(err.contains("sync join"), "{err}");
    assert_eq!(snapshot(&b), untouched);
    // Joined with the new phrase: the same host, its progress kept.
    n.join(&b, &new_phrase);
    let st = n.json(&b, &["sync", "status", "--json"]);
    assert_eq!(st["host"], host);
    assert_eq!(st["keyId"], key_id.as_str());
    let rep = n.json(&b, &["sync", "now", "--json"]);
    assert_eq!(rep["pulled"], 1, "only the new record: {rep}");
    assert_eq!(files_of(&a, &s), files_of(&b, &s));

    // The old phrase on a new machine cannot even join; the new one reads everything.
    let out = n.run_with_input(&c, &["sync", "join", "--server", &n.url], &old_phrase);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rotated out"), "{err}");
    assert!(
        !c.join("state/sync").exists(),
        "no sync set up with a revoked key"
    );
    n.join(&c, &new_phrase);
    n.ok(&c, &["sync", "pull"]);
    assert_eq!(files_of(&a, &s), files_of(&c, &s));

    // A rotation cut short (one record still under the old key) is finished, with no new key.
    let (path, old) = before.iter().next().unwrap();
    std::fs::write(path, old).unwrap();
    std::fs::write(a.join("state/sync/rotating"), &key_id).unwrap();
    let r = n.json(&a, &["sync", "rotate", "--json"]);
    assert_eq!(r["keyId"], key_id.as_str());
    assert_eq!(r["rewrapped"], 1, "{r}");
    assert!(!a.join("state/sync/rotating").exists());
    n.ok(&c, &["sync", "now"]);
    // A marker naming a key that was never saved (a kill between the two) is no rotation in
    // progress: the next one makes a new key, and the old ones still open everything.
    std::fs::write(a.join("state/sync/rotating"), "0123456789abcdef").unwrap();
    let r = n.json(&a, &["sync", "rotate", "--json"]);
    assert_ne!(r["keyId"], key_id.as_str());
    assert_eq!(
        r["rewrapped"].as_u64().unwrap(),
        after.len() as u64 + 1,
        "{r}"
    );
    n.ok(&a, &["sync", "now"]);
}

#[test]
fn sessions_imported_from_another_agent_sync_too_and_two_machines_pushing_at_once_both_land() {
    let n = net();
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let transcript =
        freecode_testkit::external_fixtures().join("claude-code/genuine/spotter-short.jsonl");
    let imported = n.json(
        &a,
        &[
            "import",
            "claude-code",
            transcript.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(!imported.to_string().is_empty());
    let phrase = n.first(&a);
    n.join(&b, &phrase);
    plant(&b, 40);
    let from_a = sessions(&a);
    assert_eq!(from_a.len(), 1, "{imported}");

    // Both push at the same moment; then each takes the other's.
    let spawn = |home: &Path| {
        common::freecode(home)
            .args(["sync", "push", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (spawn(&a), spawn(&b));
    for c in [one, two] {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    n.ok(&a, &["sync", "pull"]);
    n.ok(&b, &["sync", "pull"]);
    let (sa, sb) = (sessions(&a), sessions(&b));
    assert_eq!(sa.len(), 41);
    assert_eq!(sa.keys().collect::<Vec<_>>(), sb.keys().collect::<Vec<_>>());
    for id in sa.keys() {
        assert_eq!(files_of(&a, id), files_of(&b, id), "session {id}");
    }
    // The imported session keeps its provenance on the other machine.
    let id = from_a.keys().next().unwrap();
    assert_eq!(sb[id], from_a[id]);
}

#[test]
fn strangers_other_groups_and_rotated_out_keys_touch_nothing_of_a_group() {
    strangers_touch_nothing(net());
}

#[test]
fn strangers_other_groups_and_rotated_out_keys_touch_nothing_of_a_group_over_s3() {
    strangers_touch_nothing(net_on_s3());
}

/// Every attack of a stranger on the network (no credential, a made-up one, another group's),
/// and then of a machine whose key was rotated out, against a group of two machines: each is
/// refused or lands in the attacker's own group, the group's objects on the server stay byte
/// for byte, and the victims' next `sync now` succeeds with their sessions intact.
fn strangers_touch_nothing(n: Net) {
    use freecode_remote::home_sync::{HostId, Kind, Remote, SyncKey};
    let (a, b, c) = (n.home("alpha"), n.home("beta"), n.home("gamma"));
    let s = n.turn(&a, None, "la question du jour");
    let phrase = n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);
    n.turn(&b, Some(&s), "beta continues");
    n.ok(&b, &["sync", "now"]);
    n.ok(&a, &["sync", "now"]);
    let victim = SyncKey::parse(&phrase).unwrap();
    let group = Remote::new(&n.url, None).unwrap().for_key(&victim);
    // The attacker is told the group's every log and host: ids are no secret here.
    let logs = group.status().unwrap();
    assert!(!logs.is_empty());
    let before = n.all_objects();
    let prefix = before
        .keys()
        .find_map(|k| {
            k.strip_prefix("groups/")?
                .split_once('/')
                .map(|(g, _)| g.to_owned())
        })
        .unwrap();
    let prefix = format!("groups/{prefix}/");

    // No credential at all: every endpoint answers 401 and stores nothing.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let lc = &logs[0];
    let url = |p: &str| format!("{}/sync/v1/{p}", n.url);
    let record_path = format!("logs/{}/{}/{}", lc.log, lc.host, lc.count);
    let wrap_path = format!("logs/{}/{}/0/wrap", lc.log, lc.host);
    for (method, path, body) in [
        ("GET", "status".to_owned(), Vec::new()),
        ("PUT", record_path.clone(), vec![0x41]),
        (
            "PUT",
            "logs/0123456789abcdef0123456789abcdef/0123456789abcdef0123456789abcdef/0".to_owned(),
            vec![0x41],
        ),
        ("POST", wrap_path.clone(), vec![7; 80]),
        (
            "GET",
            format!("logs/{}/{}?from=0", lc.log, lc.host),
            Vec::new(),
        ),
        ("DELETE", format!("logs/{}", lc.log), Vec::new()),
        (
            "PUT",
            "credential".to_owned(),
            br#"{"credential":"00"}"#.to_vec(),
        ),
    ] {
        let resp = match method {
            "GET" => agent.get(&url(&path)).call(),
            "DELETE" => agent.delete(&url(&path)).call(),
            "PUT" => agent.put(&url(&path)).send(&body[..]),
            _ => agent.post(&url(&path)).send(&body[..]),
        }
        .unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{method} {path}");
    }
    assert_eq!(
        n.all_objects(),
        before,
        "nothing stored without a credential"
    );

    // A made-up credential and another group's key: each has a group of its own, where what
    // it writes lands; it sees, reads, counts and removes nothing of the victims'.
    let other = SyncKey::generate().unwrap();
    let made_up = Remote::new(&n.url, None)
        .unwrap()
        .with_credential("ab".repeat(32));
    for attacker in [made_up, Remote::new(&n.url, None).unwrap().for_key(&other)] {
        assert!(
            attacker.status().unwrap().is_empty(),
            "no other group's logs"
        );
        let (got, next) = attacker.get_records(&lc.log, &lc.host, 0).unwrap();
        assert!(got.is_empty() && next == 0, "no other group's records");
        assert!(
            !attacker
                .rewrap_record(&lc.log, &lc.host, 0, &[9; 80])
                .unwrap()
        );
        attacker.delete_log(&lc.log).unwrap();
        // Garbage at the group's next index and at index 0 of a log of its own.
        let junk = other
            .seal(Kind::Session, &lc.host, &lc.log, lc.count, b"planted")
            .unwrap();
        attacker.put_record(&lc.log, &lc.host, 0, &[1]).unwrap();
        attacker.put_record(&lc.log, &lc.host, 1, &junk).unwrap();
        assert!(attacker.get_ring(&victim.id()).unwrap().is_none());
        let mine = attacker.status().unwrap();
        assert_eq!(mine.len(), 1, "its own group holds what it wrote: {mine:?}");
        assert_eq!(mine[0].count, 2);
    }
    let now = n.all_objects();
    for (k, v) in &before {
        assert_eq!(now.get(k), Some(v), "{k} changed");
    }
    assert!(
        now.keys()
            .filter(|k| !before.contains_key(*k))
            .all(|k| !k.starts_with(&prefix)),
        "nothing new in the victims' group"
    );
    let (sa, sb) = (snapshot(&a), snapshot(&b));
    let ra = n.json(&a, &["sync", "now", "--json"]);
    let rb = n.json(&b, &["sync", "now", "--json"]);
    assert_eq!(
        (ra["pulled"].as_u64(), rb["pulled"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!((snapshot(&a), snapshot(&b)), (sa, sb));
    assert_eq!(files_of(&a, &s), files_of(&b, &s));

    // A rotation (the lost laptop is beta): beta's key is revoked for reads and writes at once.
    n.json(&a, &["sync", "rotate", "--json"]);
    let new_phrase = n
        .ok(&a, &["sync", "key"])
        .lines()
        .last()
        .unwrap()
        .to_owned();
    n.join(&c, &new_phrase);
    n.ok(&c, &["sync", "pull"]);
    let rotated = n.all_objects();
    n.turn(&b, Some(&s), "planted by the lost laptop");
    n.turn(&b, None, "a planted session");
    let err = n.fails(&b, &["sync", "push"]);
    assert!(err.contains("rotated out"), "{err}");
    // The same, by hand, with the old key: every request refused.
    let old = Remote::new(&n.url, None).unwrap().for_key(&victim);
    let host = HostId::generate().unwrap();
    let sealed = victim
        .seal(Kind::Session, &host, &lc.log, 99, b"planted")
        .unwrap();
    for refused in [
        old.status().map(|_| ()),
        old.get_records(&lc.log, &lc.host, 0).map(|_| ()),
        old.put_record(&lc.log, &host, 0, &sealed).map(|_| ()),
        old.rewrap_record(&lc.log, &lc.host, 0, &[9; 80])
            .map(|_| ()),
        old.delete_log(&lc.log),
        old.rotate_credential(&other.credential_hash(), None)
            .map(|_| ()),
    ] {
        let e = refused.unwrap_err().to_string();
        assert!(e.contains("403") && e.contains("rotated out"), "{e}");
    }
    assert_eq!(n.all_objects(), rotated, "nothing written by the old key");
    let ra = n.json(&a, &["sync", "now", "--json"]);
    let rc = n.json(&c, &["sync", "now", "--json"]);
    assert_eq!(
        (ra["pulled"].as_u64(), rc["pulled"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(files_of(&a, &s), files_of(&c, &s));
    assert_eq!(sessions(&a).len(), 1, "no planted session");
}

#[test]
fn a_member_writing_garbage_stops_no_one() {
    member_garbage(net());
}

#[test]
fn a_member_writing_garbage_stops_no_one_over_s3() {
    member_garbage(net_on_s3());
}

/// `sync now` on `home`: it succeeds; its report and what it said on stderr.
pub(crate) fn sync_now(n: &Net, home: &Path) -> (Value, String) {
    let out = n.run(home, &["sync", "now", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

/// A member of the group (a buggy or hostile machine with the group's key and credential)
/// writes garbage everywhere it can: at another machine's next record index of a session and
/// of its control log, at index 0 of a log of its own, as a claim on a session's next chain
/// point, and as the key wrap of a record not pulled yet. Every `sync now` of the others
/// succeeds, names what it passed over (machine and index), mends the wrap from the copy
/// kept where the record was written, and both machines end with the same sessions.
fn member_garbage(n: Net) {
    use freecode_remote::home_sync::seal::WRAP_SPAN;
    use freecode_remote::home_sync::{Chain, HostId, Remote, SyncKey};
    let (a, b) = (n.home("alpha"), n.home("beta"));
    let s = n.turn(&a, None, "l'histoire commence");
    let phrase = n.group(&a, &b);
    n.ok(&b, &["sync", "pull"]);
    let key = SyncKey::parse(&phrase).unwrap();
    let member = Remote::new(&n.url, None).unwrap().for_key(&key);
    let host_a = HostId::parse(
        n.json(&a, &["sync", "status", "--json"])["host"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let log = key.log_id(&s);
    let count = |log, host| {
        member
            .status()
            .unwrap()
            .iter()
            .find(|l| l.log == log && l.host == host)
            .map_or(0, |l| l.count)
    };

    // Garbage at alpha's next index of s, and at index 0 of a log and machine of its own.
    let next = count(log, host_a);
    member
        .put_record(&log, &host_a, next, b"\x00garbage")
        .unwrap();
    let (junk_log, junk_host) = (key.log_id("no-such-session"), HostId::generate().unwrap());
    member
        .put_record(&junk_log, &junk_host, 0, &[7; 300])
        .unwrap();
    // Garbage at alpha's next control record.
    let control = key.control_log();
    member
        .put_record(&control, &host_a, count(control, host_a), b"junk")
        .unwrap();
    // Garbage claims on s's chain point as alpha last synced it: its next turn claims it.
    let st: Value =
        serde_json::from_slice(&std::fs::read(a.join("state/sync/state.json")).unwrap()).unwrap();
    let point = Chain::parse(st["sessions"][&s]["chain"].as_str().unwrap()).unwrap();
    for slot in 0..3 {
        member
            .put_claim(&log, &key.claim_slot(&point, slot), &[9; 77])
            .unwrap();
    }

    n.turn(&a, Some(&s), "alpha continues despite the junk");
    let (ra, _) = sync_now(&n, &a);
    let skipped = ra["skipped"].as_array().unwrap();
    assert!(
        skipped
            .iter()
            .any(|k| k["host"] == host_a.to_string() && k["index"] == next),
        "{ra}"
    );
    assert_eq!(
        count(log, host_a),
        next + 2,
        "alpha's record went to the next free index"
    );
    let (rb, err) = sync_now(&n, &b);
    assert!(
        err.contains(&format!("record {next} of machine {host_a}")) && err.contains("passed over"),
        "{err}"
    );
    assert!(
        err.contains(&format!("record 0 of machine {junk_host}")),
        "{err}"
    );
    assert!(rb["skipped"].as_array().unwrap().len() >= 3, "{rb}");
    assert_eq!(files_of(&a, &s), files_of(&b, &s));

    // A broken key wrap on alpha's newest record, before beta pulls it: beta passes it over
    // and says so through its control log; alpha, which keeps the record, mends the wrap;
    // beta's next pull applies it.
    n.turn(&a, Some(&s), "a record whose wrap is broken");
    sync_now(&n, &a);
    let newest = count(log, host_a) - 1;
    assert!(
        member
            .rewrap_record(&log, &host_a, newest, &vec![5; WRAP_SPAN.len()])
            .unwrap()
    );
    let (rb, _) = sync_now(&n, &b);
    assert!(
        rb["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["index"] == newest),
        "{rb}"
    );
    assert_ne!(files_of(&a, &s), files_of(&b, &s));
    let (ra, err) = sync_now(&n, &a);
    assert_eq!(ra["mended"], 1, "{ra} {err}");
    let (rb, _) = sync_now(&n, &b);
    assert_eq!(rb["pulled"], 1, "{rb}");
    assert_eq!(files_of(&a, &s), files_of(&b, &s));

    // Quiet from here: each slot was reported once, and nothing is left to do.
    for h in [&a, &b] {
        let (r, err) = sync_now(&n, h);
        assert_eq!(r["skipped"].as_array().unwrap().len(), 0, "{r}");
        assert!(!err.contains("warning"), "{err}");
    }
    assert_eq!(sessions(&a).len(), 1);
    assert_eq!(sessions(&b).len(), 1);

    // A rotation over the garbage: the broken wrap of a record alpha keeps is mended from its
    // copy, the slots no copy mends are left as they are, and a machine joining with the new
    // phrase passes over the garbage and gets every session whole.
    assert!(
        member
            .rewrap_record(&log, &host_a, 0, &vec![6; WRAP_SPAN.len()])
            .unwrap()
    );
    let r = n.json(&a, &["sync", "rotate", "--json"]);
    assert!(r["skipped"].as_u64().unwrap() >= 3, "{r}");
    let new_phrase = n
        .ok(&a, &["sync", "key"])
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let c = n.home("gamma");
    n.join(&c, &new_phrase);
    let (rc, _) = sync_now(&n, &c);
    assert!(rc["skipped"].as_array().unwrap().len() >= 3, "{rc}");
    assert_eq!(files_of(&a, &s), files_of(&c, &s));
}

#[test]
fn the_phrase_is_read_from_standard_input_or_a_file_and_warned_about_on_the_command_line() {
    let n = net();
    let (a, b, c, d) = (
        n.home("alpha"),
        n.home("beta"),
        n.home("gamma"),
        n.home("delta"),
    );
    n.turn(&a, None, "ünïcödé first");
    let phrase = n.first(&a);
    n.ok(&a, &["sync", "push"]);
    // On the command line: it works, and says why not to.
    let mut args = vec!["sync", "join", "--server", n.url.as_str()];
    args.extend(phrase.split(' '));
    let out = n.run(&b, &args);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("command line") && err.contains("ps"), "{err}");
    // From a file (the words, or the key file's hex under its older name): no warning.
    let words = n.ctx.path("phrase.txt");
    std::fs::write(&words, format!("{phrase}\n")).unwrap();
    let words = words.to_str().unwrap();
    let out = n.run(
        &c,
        &["sync", "join", "--server", &n.url, "--phrase-file", words],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("command line"));
    let hex = a.join("state/sync/key");
    let out = n.run(
        &d,
        &[
            "sync",
            "join",
            "--server",
            &n.url,
            "--key-file",
            hex.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for h in [&b, &c, &d] {
        n.ok(h, &["sync", "pull"]);
        assert_eq!(sessions(h).len(), 1);
    }
    // A file that is not a key is refused, naming it; a huge one is not read whole.
    let big = n.ctx.path("big.txt");
    std::fs::write(&big, vec![b'a'; 200_000]).unwrap();
    let err = n.fails(
        &n.home("epsilon"),
        &[
            "sync",
            "join",
            "--server",
            &n.url,
            "--phrase-file",
            big.to_str().unwrap(),
        ],
    );
    assert!(
        err.contains("big.txt") && err.contains("not a sync key"),
        "{err}"
    );
}
