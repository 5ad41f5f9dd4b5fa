//! The index's look (`index::look`): what changed since the last look is found without checking
//! every session — by the change journal our writers append to, directory mtimes, the recently
//! changed sessions and the damaged ones — and a full check sees the rest on its schedule or
//! when asked.

use std::fs;
use std::path::Path;

use freecode_core::message::{Part, Role};
use freecode_core::{SessionId, SessionMeta, StoredMessage};
use freecode_store::index::{SearchQuery, SessionIndex};
use freecode_store::{ListFilter, SessionStore};

use crate::support::{TestHome, new_session, open_store};

fn titles(ix: &mut SessionIndex) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = ix
        .list(&ListFilter::default())
        .unwrap()
        .sessions
        .into_iter()
        .map(|m| (m.id, m.title))
        .collect();
    v.sort();
    v
}

fn found(ix: &mut SessionIndex, words: &str) -> Vec<String> {
    let mut v: Vec<String> = ix
        .search(&SearchQuery {
            text: words.to_owned(),
            limit: 50,
            ..SearchQuery::default()
        })
        .unwrap()
        .into_iter()
        .map(|h| h.session_id)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// What a few quiet minutes do to the index's memory of the last look: nothing is recent any
/// more (the schedule of the full check is left alone).
fn let_time_pass(root: &Path) {
    let db = rusqlite::Connection::open(root.join("state/freecode.db")).unwrap();
    db.execute("UPDATE idx_recent SET atMs = 0", []).unwrap();
}

/// The full check falls due, as five minutes after the last one.
fn full_check_due(root: &Path) {
    let db = rusqlite::Connection::open(root.join("state/freecode.db")).unwrap();
    db.execute(
        "UPDATE idx_look SET value = 0 WHERE key IN ('fullLogsAtMs', 'fullMetasAtMs')",
        [],
    )
    .unwrap();
}

/// Rewrites `meta.json` in place (truncate and write, as the original does) with `title`.
fn retitle_in_place(dir: &Path, title: &str) {
    let path = dir.join("meta.json");
    let mut meta: SessionMeta = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    meta.title = title.to_owned();
    fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
}

/// Appends a message line to `messages.jsonl` with a plain append (as the original does).
fn append_in_place(dir: &Path, id: &str, text: &str) {
    use std::io::Write;
    let msg = StoredMessage::new(id, Role::User, vec![Part::text(text)], 1_700_000_000_000);
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(dir.join("messages.jsonl"))
        .unwrap();
    f.write_all(&msg.to_line()).unwrap();
}

#[test]
fn a_look_sees_what_changed_and_a_full_check_the_rest() {
    let t = TestHome::new();
    let root = t.root().to_path_buf();
    let a = t.create("/p/un");
    let b = t.create("/p/deux");
    let c = t.create("/p/un");
    let mut ix = SessionIndex::open(t.store.home()).unwrap();
    assert_eq!(titles(&mut ix).len(), 3);
    assert!(found(&mut ix, "zébulon").is_empty());
    let_time_pass(&root);

    // Another program edits a quiet session in place: no journal, no directory changes, not
    // recent. The look does not see it (it stats no quiet session) …
    retitle_in_place(&t.dir(&a), "retitré à la main");
    let before = titles(&mut ix);
    assert!(before.iter().all(|(_, title)| title != "retitré à la main"));
    // … a full check does, when asked (`--fresh`) …
    ix.check_everything();
    assert!(titles(&mut ix).contains(&(a.to_string(), "retitré à la main".to_owned())));
    // … and on its schedule.
    let_time_pass(&root);
    retitle_in_place(&t.dir(&a), "encore");
    assert!(!titles(&mut ix).contains(&(a.to_string(), "encore".to_owned())));
    full_check_due(&root);
    assert!(titles(&mut ix).contains(&(a.to_string(), "encore".to_owned())));
    let_time_pass(&root);

    // Our writer in another store (its own handles, as another process) notes what it changes:
    // seen at the next look, metas and logs, though the session was quiet.
    let other: SessionStore = open_store(&root, freecode_store::lock::LockWait::Fail);
    other
        .append(
            &c,
            &StoredMessage::new("m1", Role::User, vec![Part::text("zébulon arrive")], 1),
        )
        .unwrap();
    other
        .update_meta(&b, |m| m.title = "renommé".into())
        .unwrap();
    assert_eq!(found(&mut ix, "zébulon"), vec![c.to_string()]);
    assert!(titles(&mut ix).contains(&(b.to_string(), "renommé".to_owned())));
    let_time_pass(&root);

    // Another program makes a session (a new directory in a project directory, meta and log
    // written in place): its project directory's mtime changed, so it is seen.
    let d = SessionId::new("0b16b16b-0000-4000-8000-0000000000dd").unwrap();
    let d_dir = t.dir(&a).parent().unwrap().join(d.as_str());
    fs::create_dir(&d_dir).unwrap();
    let mut meta: SessionMeta =
        serde_json::from_slice(&fs::read(t.dir(&a).join("meta.json")).unwrap()).unwrap();
    meta.id = d.to_string();
    meta.title = "faite ailleurs".into();
    fs::write(
        d_dir.join("meta.json"),
        serde_json::to_vec_pretty(&meta).unwrap(),
    )
    .unwrap();
    fs::write(d_dir.join("messages.jsonl"), b"").unwrap();
    assert!(titles(&mut ix).contains(&(d.to_string(), "faite ailleurs".to_owned())));
    // It stays recent for a while: the same program appending to it is seen.
    append_in_place(&d_dir, "m-d", "quokka nocturne");
    assert_eq!(found(&mut ix, "quokka"), vec![d.to_string()]);

    // Another program removes a session's directory: seen.
    fs::remove_dir_all(t.dir(&b)).unwrap();
    assert!(titles(&mut ix).iter().all(|(id, _)| id != b.as_str()));
    // And a whole project directory.
    let deux = t.root().join("sessions").join(
        fs::read_dir(t.root().join("sessions"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .find(|n| n.to_string_lossy().contains("deux"))
            .unwrap_or_default(),
    );
    let e = t.store.create(new_session("/p/deux")).unwrap();
    assert!(titles(&mut ix).iter().any(|(id, _)| id == e.as_str()));
    let_time_pass(&root);
    fs::remove_dir_all(&deux).unwrap();
    assert!(titles(&mut ix).iter().all(|(id, _)| id != e.as_str()));
}

#[test]
fn a_damaged_session_is_reported_at_every_look_and_taken_in_once_mended() {
    let t = TestHome::new();
    let root = t.root().to_path_buf();
    let a = t.create("/p");
    let mut ix = SessionIndex::open(t.store.home()).unwrap();
    ix.list(&ListFilter::default()).unwrap();
    let good = fs::read(t.dir(&a).join("meta.json")).unwrap();
    fs::write(t.dir(&a).join("meta.json"), b"{ pas du json").unwrap();
    ix.check_everything();
    for _ in 0..3 {
        let listing = ix.list(&ListFilter::default()).unwrap();
        assert!(listing.sessions.is_empty());
        assert_eq!(listing.problems.len(), 1, "{:?}", listing.problems);
        let_time_pass(&root);
    }
    let report = ix.refresh(|_, _| {}).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    // Mended in place, by hand: taken in at the next look.
    fs::write(t.dir(&a).join("meta.json"), good).unwrap();
    let listing = ix.list(&ListFilter::default()).unwrap();
    assert_eq!(listing.sessions.len(), 1);
    assert!(listing.problems.is_empty());
}

#[test]
fn a_replaced_or_lost_journal_means_a_full_check() {
    let t = TestHome::new();
    let root = t.root().to_path_buf();
    let a = t.create("/p");
    let mut ix = SessionIndex::open(t.store.home()).unwrap();
    ix.refresh(|_, _| {}).unwrap();
    let_time_pass(&root);
    // A quiet in-place edit, then the journal goes: the next look cannot trust what it missed.
    retitle_in_place(&t.dir(&a), "vu quand même");
    fs::remove_file(freecode_store::changes::journal_path(t.store.home())).unwrap();
    assert!(titles(&mut ix).contains(&(a.to_string(), "vu quand même".to_owned())));
    ix.refresh(|_, _| {}).unwrap();
    let_time_pass(&root);
    // A new journal in its place (another inode) after the index read the old one.
    t.store.update_meta(&a, |m| m.title = "x".into()).unwrap();
    ix.refresh(|_, _| {}).unwrap();
    let_time_pass(&root);
    retitle_in_place(&t.dir(&a), "encore vu");
    let journal = freecode_store::changes::journal_path(t.store.home());
    fs::remove_file(&journal).unwrap();
    fs::write(&journal, b"").unwrap();
    let report = ix.refresh(|_, _| {}).unwrap();
    assert_eq!(report.metas_read, 1);
    assert!(titles(&mut ix).contains(&(a.to_string(), "encore vu".to_owned())));
}
