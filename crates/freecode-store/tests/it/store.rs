//! Session life-cycle behaviour a user relies on: counters, interrupts and resume, compaction,
//! soft delete and restore, exclusive create, and record → read round trips.

use freecode_core::message::{Part, Role};
use freecode_core::{CONTINUE_MESSAGE, SessionId, SessionStatus, StoredMessage, Usage};
use freecode_store::{
    Durability, Home, ListFilter, NewSession, SessionStore, StoreConfig, StoreError,
};
use proptest::prelude::*;

fn store(dir: &tempfile::TempDir) -> SessionStore {
    SessionStore::with_config(Home::new(dir.path()), crate::support::quiet()).unwrap()
}

fn new_session(project: &str) -> NewSession {
    NewSession {
        title: "t".into(),
        project_path: project.into(),
        provider: "anthropic".into(),
        model: Some("claude-sonnet-4-5".into()),
    }
}

fn text(id: &str, role: Role, s: &str) -> StoredMessage {
    StoredMessage::new(id, role, vec![Part::text(s)], 1)
}

#[test]
fn end_turn_maintains_the_counters() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let id = store.create(new_session("/p")).unwrap();
    let mut w = store.writer(&id).unwrap();
    w.append(&text("u1", Role::User, "hi")).unwrap();
    let mut a = text("a1", Role::Assistant, "hello");
    a.usage = Some(Box::new(Usage::new(100, 20)));
    w.append(&a).unwrap();
    let m1 = w.end_turn(120).unwrap();
    w.append(&text("u2", Role::User, "more")).unwrap();
    let m2 = w.end_turn(30).unwrap();
    assert_eq!((m1.turn_count, m2.turn_count), (1, 2));
    assert_eq!(m2.aggregated_token_count, Some(150));
    assert!(m2.last_turn_at >= m1.last_turn_at && m2.last_turn_at >= m2.created_at);
    drop(w);
    assert_eq!(store.meta(&id).unwrap().turn_count, 2);
}

#[test]
fn end_turn_counters_saturate_at_the_largest_value_instead_of_wrapping() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let id = store.create(new_session("/p")).unwrap();
    store
        .update_meta(&id, |m| {
            m.turn_count = u64::MAX;
            m.aggregated_token_count = Some(u64::MAX - 5);
        })
        .unwrap();
    let mut w = store.writer(&id).unwrap();
    let m = w.end_turn(120).unwrap();
    assert_eq!(m.turn_count, u64::MAX);
    assert_eq!(m.aggregated_token_count, Some(u64::MAX));
    let m = w.end_turn(1).unwrap();
    assert_eq!(
        (m.turn_count, m.aggregated_token_count),
        (u64::MAX, Some(u64::MAX))
    );
    drop(w);
    let on_disk = store.meta(&id).unwrap();
    assert_eq!(on_disk.turn_count, u64::MAX);
    assert_eq!(on_disk.aggregated_token_count, Some(u64::MAX));
}

#[test]
fn interrupt_then_resume_persists_the_continue_message_and_reactivates() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let id = store.create(new_session("/p")).unwrap();
    let mut w = store.writer(&id).unwrap();
    w.append(&text("u1", Role::User, "go")).unwrap();
    w.append(&text("a1", Role::Assistant, "partial")).unwrap();
    // A tool line appended after the abort: the mark must still land on a1 (SPEC §19.22).
    w.append(&StoredMessage::new(
        "t1",
        Role::Assistant,
        vec![Part::tool("read", serde_json::json!({}), "x")],
        2,
    ))
    .unwrap();
    assert!(w.mark_interrupted(Some("a1")).unwrap());
    drop(w);
    let log = store.messages(&id).unwrap().messages;
    assert_eq!(
        log.iter().map(|m| m.is_interrupted()).collect::<Vec<_>>(),
        [false, true, false]
    );
    assert_eq!(store.meta(&id).unwrap().status, SessionStatus::Interrupted);
    let (meta, marked) = store.interrupted_session().unwrap().unwrap();
    assert_eq!(
        (meta.id.as_str(), marked.as_deref()),
        (id.as_str(), Some("a1"))
    );

    let ctx = store.resume(&id).unwrap();
    assert_eq!(ctx.meta.status, SessionStatus::Active);
    assert_eq!(ctx.model(), Some("claude-sonnet-4-5"));
    let last = ctx.messages.last().unwrap();
    assert_eq!(
        (last.role.clone(), last.text()),
        (Role::User, CONTINUE_MESSAGE.to_owned())
    );
    // Persisted: the model (which reloads from disk) sees it, and a second resume adds nothing.
    let reloaded = store.messages(&id).unwrap().messages;
    assert_eq!(reloaded.len(), 4);
    assert_eq!(store.resume(&id).unwrap().messages.len(), 4);
    assert!(store.interrupted_session().unwrap().is_none());
}

#[test]
fn compaction_keeps_the_last_turns_byte_for_byte_and_records_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let id = store.create(new_session("/p")).unwrap();
    let mut w = store.writer(&id).unwrap();
    for t in 0..5 {
        w.append(&text(
            &format!("u{t}"),
            Role::User,
            &format!("question {t}"),
        ))
        .unwrap();
        w.append(&text(
            &format!("a{t}"),
            Role::Assistant,
            &format!("answer {t}"),
        ))
        .unwrap();
    }
    let before = std::fs::read(w.paths().messages()).unwrap();
    assert!(matches!(
        w.compact(0, "s", None),
        Err(StoreError::Compaction(_))
    ));
    let out = w.compact(2, "they asked 3 questions", None).unwrap();
    assert!(out.compacted);
    assert_eq!((out.messages_before, out.messages_after), (10, 4));
    let after = std::fs::read(w.paths().messages()).unwrap();
    assert!(before.ends_with(&after));
    assert!(after.starts_with(br#"{"id":"u3""#));
    // Appends after a rewrite go to the new file.
    w.append(&text("u5", Role::User, "next")).unwrap();
    drop(w);
    assert_eq!(store.messages(&id).unwrap().messages.len(), 5);
    let mem = store.compaction_memory(&id).unwrap().unwrap();
    assert_eq!(mem.total_compactions, 1);
    assert_eq!(
        mem.latest_summary().unwrap().content,
        "they asked 3 questions"
    );
    assert_eq!(mem.latest_summary().unwrap().original_message_count, 6);
    assert_eq!(
        store.resume(&id).unwrap().summary.as_deref(),
        Some("they asked 3 questions")
    );
    // Nothing to trim: the log is untouched.
    let out = store.compact(&id, 10, "s").unwrap();
    assert!(!out.compacted);
}

#[test]
fn a_committed_compaction_is_completed_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let id = store.create(new_session("/p")).unwrap();
    let paths = store.locate(&id).unwrap();
    store.append(&id, &text("u0", Role::User, "old")).unwrap();
    // The state a crash right after the commit point leaves: temps plus the journal.
    std::fs::write(
        paths.dir.join(".messages.jsonl.1.0.tmp"),
        text("u1", Role::User, "new").to_line(),
    )
    .unwrap();
    let memdir = store.home().memory_dir(&id);
    std::fs::create_dir_all(&memdir).unwrap();
    let mem = freecode_core::memory::CompactionMemory::new(id.as_str());
    std::fs::write(
        memdir.join(".memory.json.1.1.tmp"),
        serde_json::to_vec(&mem).unwrap(),
    )
    .unwrap();
    std::fs::write(
        paths.dir.join("compaction.pending"),
        br#"{"messages":".messages.jsonl.1.0.tmp","memory":".memory.json.1.1.tmp"}"#,
    )
    .unwrap();
    // A reader finishes it (nobody holds the lock): both files are the new ones.
    let log = store.messages(&id).unwrap();
    assert_eq!(
        log.messages
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        ["u1"]
    );
    assert!(store.compaction_memory(&id).unwrap().is_some());
    assert!(!paths.dir.join("compaction.pending").exists());

    // Temps without a journal (a crash before the commit point) are discarded.
    std::fs::write(paths.dir.join(".messages.jsonl.1.2.tmp"), b"junk\n").unwrap();
    drop(store.writer(&id).unwrap());
    assert!(!paths.dir.join(".messages.jsonl.1.2.tmp").exists());
    assert_eq!(store.messages(&id).unwrap().messages.len(), 1);
}

#[test]
fn soft_delete_hides_restore_brings_back_purge_erases() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let a = store.create(new_session("/p")).unwrap();
    let b = store.create(new_session("/q")).unwrap();
    store.delete(&a).unwrap();
    let ids = |f: ListFilter| {
        store
            .list(&f)
            .unwrap()
            .sessions
            .into_iter()
            .map(|m| m.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(ListFilter::default()), [b.to_string()]);
    assert_eq!(
        ids(ListFilter {
            include_deleted: true,
            ..Default::default()
        })
        .len(),
        2
    );
    assert_eq!(
        ids(ListFilter {
            status: Some(SessionStatus::Deleted),
            ..Default::default()
        }),
        [a.to_string()]
    );
    assert!(matches!(store.resume(&a), Err(StoreError::NotFound { .. })));
    assert!(matches!(
        store.fork(&a, None),
        Err(StoreError::NotFound { .. })
    ));
    store.restore(&a).unwrap();
    assert_eq!(ids(ListFilter::default()).len(), 2);
    store.purge(&a).unwrap();
    assert!(matches!(store.meta(&a), Err(StoreError::NotFound { .. })));
    assert_eq!(
        ids(ListFilter {
            include_deleted: true,
            ..Default::default()
        }),
        [b.to_string()]
    );
}

#[test]
fn create_writer_makes_the_session_create_makes_and_holds_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let msgs = [
        text("m0", Role::User, "hi"),
        text("m1", Role::Assistant, "yo"),
    ];
    // The same session twice: create + writer, and create_writer.
    let a = s.create(new_session("/work/p")).unwrap();
    let mut wa = s.writer(&a).unwrap();
    let mut wb = s.create_writer(new_session("/work/p")).unwrap();
    let b = wb.id().clone();
    assert_ne!(a, b);
    for m in &msgs {
        wa.append(m).unwrap();
        wb.append(m).unwrap();
    }
    // The writer holds the lock taken at creation: a second writer is refused.
    assert!(
        matches!(s.writer(&b), Err(StoreError::Locked { .. })),
        "the new session's lock is held by its writer"
    );
    drop(wa);
    drop(wb);
    let files = |id: &SessionId| {
        let dir = s.locate(id).unwrap().dir;
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        (dir, names)
    };
    let ((da, fa), (db, fb)) = (files(&a), files(&b));
    assert_eq!(fa, fb, "the same files");
    assert_eq!(
        std::fs::read(da.join("messages.jsonl")).unwrap(),
        std::fs::read(db.join("messages.jsonl")).unwrap(),
        "the same log, byte for byte"
    );
    let (ma, mb) = (s.meta(&a).unwrap(), s.meta(&b).unwrap());
    assert_eq!((ma.title, ma.project_path), (mb.title, mb.project_path));
    assert_eq!(s.messages(&b).unwrap().messages, msgs.to_vec());
    let listed: Vec<String> = s
        .list(&ListFilter::default())
        .unwrap()
        .sessions
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert!(listed.contains(&b.to_string()), "listed: {listed:?}");
    // Free once the writer is gone.
    s.writer(&b)
        .unwrap()
        .append(&text("m2", Role::User, "again"))
        .unwrap();
    assert_eq!(s.messages(&b).unwrap().messages.len(), 3);
}

#[test]
fn create_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let id = SessionId::new("forced-1").unwrap();
    store.create_with_id(new_session("/p"), &id).unwrap();
    store
        .append(&id, &text("u", Role::User, "keep me"))
        .unwrap();
    for project in ["/p", "/other"] {
        assert!(matches!(
            store.create_with_id(new_session(project), &id),
            Err(StoreError::AlreadyExists { .. })
        ));
    }
    assert_eq!(store.messages(&id).unwrap().messages.len(), 1);
    assert!(matches!(
        store.create(NewSession {
            project_path: String::new(),
            ..new_session("")
        }),
        Err(StoreError::InvalidProjectPath { .. })
    ));
}

#[test]
fn root_and_odd_project_paths_stay_inside_sessions_and_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    for p in [
        "/",
        "..",
        "/..",
        ".",
        "/a-/b",
        &format!("/{}", "long".repeat(100)),
    ] {
        let id = store.create(new_session(p)).unwrap();
        let loc = store.locate(&id).unwrap();
        assert_eq!(
            loc.dir.parent().unwrap().parent().unwrap(),
            store.home().sessions_dir(),
            "{p:?}"
        );
        let f = ListFilter {
            project_path: Some(p.to_owned()),
            ..Default::default()
        };
        assert_eq!(store.list(&f).unwrap().sessions.len(), 1, "{p:?}");
    }
}

#[test]
fn the_turn_boundary_default_and_never_both_read_back() {
    for durability in [
        Durability::EveryAppend,
        Durability::TurnBoundary,
        Durability::Never,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            durability,
            ..crate::support::quiet()
        };
        let store = SessionStore::with_config(Home::new(dir.path()), cfg).unwrap();
        let id = store.create(new_session("/p")).unwrap();
        let mut w = store.writer(&id).unwrap();
        for i in 0..10 {
            w.append(&text(&i.to_string(), Role::User, "x")).unwrap();
        }
        w.end_turn(0).unwrap();
        drop(w);
        assert_eq!(store.messages(&id).unwrap().messages.len(), 10);
    }
}

fn arb_message() -> impl Strategy<Value = StoredMessage> {
    let arb_text = "\\PC{0,40}|[\\t\\n\"\\\\ \u{0}-\u{1f}]{0,8}";
    let part =
        prop_oneof![
            arb_text.prop_map(Part::text),
            (arb_text, arb_text).prop_map(|(l, c)| Part::code(l, c)),
            (arb_text, any::<i64>(), any::<bool>(), arb_text).prop_map(|(n, i, b, r)| Part::tool(
                n,
                serde_json::json!({"i": i, "b": b, "a": [null, 0.5]}),
                r
            )),
            ("[A-Za-z0-9+/]{0,16}", proptest::option::of(arb_text))
                .prop_map(|(d, alt)| Part::image(d, "image/png", alt)),
        ];
    (
        "[a-z0-9-]{1,36}",
        any::<bool>(),
        proptest::collection::vec(part, 0..4),
        0i64..=4_102_444_800_000,
        proptest::option::of((any::<u32>(), any::<u32>())),
        any::<bool>(),
    )
        .prop_map(|(id, user, parts, ts, usage, interrupted)| {
            let mut m = StoredMessage::new(
                id,
                if user { Role::User } else { Role::Assistant },
                parts,
                ts,
            );
            m.usage = usage.map(|(i, o)| Box::new(Usage::new(u64::from(i), u64::from(o))));
            m.interrupted = interrupted.then_some(true);
            m
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Record → read gives the same messages, whatever text they hold.
    #[test]
    fn record_then_read_is_lossless(msgs in proptest::collection::vec(arb_message(), 0..20)) {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let id = store.create(new_session("/p")).unwrap();
        let mut w = store.writer(&id).unwrap();
        for m in &msgs {
            w.append(m).unwrap();
        }
        drop(w);
        let log = store.messages(&id).unwrap();
        prop_assert!(log.issues.is_empty());
        prop_assert_eq!(&log.messages, &msgs);
        let mut streamed = Vec::new();
        store.stream_messages(&id, |m| streamed.push(m), |_| {}).unwrap();
        prop_assert_eq!(streamed, msgs);
    }
}

/// An agent runs tools (child processes) from one thread while it reopens its session on
/// another. From fork to exec a child shares the parent's lock; the session must still open.
#[test]
fn a_session_reopens_while_another_thread_spawns_processes() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let id = s.create(new_session("/work/p")).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::process::Command::new("true").status().unwrap();
                n += 1;
            }
            n
        })
    };
    for i in 0..300 {
        let mut w = s.writer(&id).unwrap_or_else(|e| panic!("reopen {i}: {e}"));
        w.append(&text(&format!("m{i}"), Role::User, "hi")).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        spawner.join().unwrap() > 0,
        "processes were spawned meanwhile"
    );
    assert_eq!(s.messages(&id).unwrap().messages.len(), 300);
}

#[test]
fn a_session_is_being_written_while_a_writer_holds_it() {
    let h = crate::support::TestHome::new();
    let id = h.create("/work/live");
    assert!(!h.store.is_being_written(&id).unwrap());
    let w = h.store.writer(&id).unwrap();
    assert!(h.store.is_being_written(&id).unwrap());
    // The probe takes nothing from the writer: it goes on appending.
    let mut w = w;
    w.append(&crate::support::text_msg("m1", Role::User, "still mine"))
        .unwrap();
    assert!(h.store.is_being_written(&id).unwrap());
    drop(w);
    assert!(!h.store.is_being_written(&id).unwrap());
    // With no lock file at all, nothing is being written, and the probe makes none.
    let lock = h.dir(&id).join(freecode_store::lock::LOCK_FILE);
    std::fs::remove_file(&lock).unwrap();
    assert!(!h.store.is_being_written(&id).unwrap());
    assert!(!lock.exists());
    // A link in its place is not followed.
    std::os::unix::fs::symlink("/etc/passwd", &lock).unwrap();
    assert!(h.store.is_being_written(&id).is_err());
}
