//! A hostile home: links planted where the store writes, homes others control, files past their
//! bounds. Every case plants the real thing (a symlink, a chown, a 0777 directory, a huge file)
//! and checks that nothing outside the home changed and that the error names the path.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use freecode_core::message::Role;
use freecode_store::error::chain;
use freecode_store::rollout::{Recorder, RecorderConfig};
use freecode_store::{Home, ListFilter, SessionStore, StoreError, fsutil};

use crate::support::{TestHome, new_session, quiet, snapshot, text_msg};

/// A directory outside the home holding a file and a directory an attacker wants written.
struct Outside {
    dir: PathBuf,
}

impl Outside {
    fn new(t: &TestHome) -> Self {
        let dir = t.tmp.path().join("outside");
        std::fs::create_dir_all(dir.join("victim-dir")).unwrap();
        std::fs::write(dir.join("victim"), b"precious, no newline").unwrap();
        std::fs::write(dir.join("victim-dir").join("keep"), b"keep me\n").unwrap();
        Self { dir }
    }
    fn file(&self) -> PathBuf {
        self.dir.join("victim")
    }
    fn subdir(&self) -> PathBuf {
        self.dir.join("victim-dir")
    }
    fn state(&self) -> std::collections::BTreeMap<PathBuf, crate::support::Entry> {
        snapshot(&self.dir)
    }
}

fn is_link_error(e: &StoreError, link: &Path) -> bool {
    matches!(e, StoreError::Symlink { path } if path == link)
        && e.to_string().contains(&link.display().to_string())
}

fn recording() -> RecorderConfig {
    RecorderConfig {
        enabled: true,
        ..RecorderConfig::default()
    }
}

#[test]
fn a_planted_lock_link_is_refused_and_its_target_untouched() {
    let t = TestHome::new();
    let out = Outside::new(&t);
    let id = t.create("/p");
    let lock = t.dir(&id).join(".lock");
    let _ = std::fs::remove_file(&lock);
    symlink(out.file(), &lock).unwrap();
    let before = out.state();
    let err = t.store.writer(&id).unwrap_err();
    assert!(is_link_error(&err, &lock), "{err:?}");
    assert_eq!(
        out.state(),
        before,
        "the lock's pid landed outside the home"
    );
}

#[test]
fn a_planted_messages_link_is_never_truncated_or_appended_to() {
    let t = TestHome::new();
    let out = Outside::new(&t);
    let id = t.create("/p");
    let log = t.log_path(&id);
    std::fs::remove_file(&log).unwrap();
    // The target ends without a newline: the torn-tail repair would cut it.
    symlink(out.file(), &log).unwrap();
    let before = out.state();
    let err = t.store.writer(&id).unwrap_err();
    assert!(is_link_error(&err, &log), "{err:?}");
    assert_eq!(out.state(), before);
    // Readers name the link too instead of reading through it.
    let err = chain(&t.store.messages(&id).unwrap_err());
    assert!(err.contains("symbolic link"), "{err}");
}

#[test]
fn a_planted_torn_link_is_refused() {
    let t = TestHome::new();
    let out = Outside::new(&t);
    let id = t.create("/p");
    std::fs::write(t.log_path(&id), b"{\"id\":\"m1\",\"role\":\"user\"").unwrap();
    let torn = t.dir(&id).join("messages.jsonl.torn");
    symlink(out.file(), &torn).unwrap();
    let before = out.state();
    let err = t.store.writer(&id).unwrap_err();
    assert!(is_link_error(&err, &torn), "{err:?}");
    assert_eq!(out.state(), before);
}

#[test]
fn rollout_links_are_refused_at_every_level() {
    for level in [
        "rollout",
        "rollout/sessions",
        "rollout/sessions/<id>",
        "events.jsonl",
    ] {
        let t = TestHome::new();
        let out = Outside::new(&t);
        let id = t.create("/p");
        let home = t.store.home().clone();
        let dir = home.rollout_dir(&id);
        let link = match level {
            "rollout" => home.root().join("rollout"),
            "rollout/sessions" => home.root().join("rollout/sessions"),
            "rollout/sessions/<id>" => dir.clone(),
            _ => dir.join("events.jsonl"),
        };
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        let target = if level == "events.jsonl" {
            out.file()
        } else {
            out.subdir()
        };
        symlink(&target, &link).unwrap();
        let before = out.state();
        let err = Recorder::open(&home, &id, recording()).unwrap_err();
        assert!(is_link_error(&err, &link), "{level}: {err:?}");
        assert_eq!(out.state(), before, "{level}: written outside the home");
    }
}

#[test]
fn memory_links_are_refused_by_compaction() {
    for level in ["memory", "memory/<id>", "memory/<id>/memory.json"] {
        let t = TestHome::new();
        let out = Outside::new(&t);
        let id = t.create("/p");
        let mut w = t.store.writer(&id).unwrap();
        for (i, role) in [Role::User, Role::Assistant, Role::User, Role::Assistant]
            .into_iter()
            .enumerate()
        {
            w.append(&text_msg(&format!("m{i}"), role, "hello"))
                .unwrap();
        }
        drop(w);
        let home = t.store.home().clone();
        let link = match level {
            "memory" => home.root().join("memory"),
            "memory/<id>" => home.memory_dir(&id),
            _ => home.memory_file(&id),
        };
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        let target = if level.ends_with(".json") {
            out.file()
        } else {
            out.subdir()
        };
        symlink(&target, &link).unwrap();
        let before = out.state();
        let res = t.store.compact(&id, 1, "summary");
        assert_eq!(out.state(), before, "{level}: written outside the home");
        if level.ends_with(".json") {
            // Reading the previous summary refuses the link, naming it.
            let err = chain(&res.unwrap_err());
            assert!(err.contains("symbolic link"), "{err}");
            assert!(err.contains(&link.display().to_string()), "{err}");
        } else {
            let err = res.unwrap_err();
            assert!(is_link_error(&err, &link), "{level}: {err:?}");
        }
    }
}

#[test]
fn a_replaced_meta_link_is_replaced_not_followed() {
    let t = TestHome::new();
    let out = Outside::new(&t);
    let id = t.create("/p");
    let meta = t.dir(&id).join("meta.json");
    let copy = std::fs::read(&meta).unwrap();
    std::fs::write(out.file(), &copy).unwrap();
    std::fs::remove_file(&meta).unwrap();
    symlink(out.file(), &meta).unwrap();
    let before = out.state();
    // Readers refuse the link: the session is a problem of the listing, not a redirect.
    let listing = t.store.list(&ListFilter::default()).unwrap();
    assert!(listing.sessions.is_empty());
    assert_eq!(listing.problems.len(), 1, "{:?}", listing.problems);
    assert!(listing.problems[0].1.contains("symbolic link"));
    assert_eq!(out.state(), before);
}

#[test]
fn purge_never_deletes_through_a_linked_directory() {
    for level in ["rollout/sessions", "memory", "sessions/<project>"] {
        let t = TestHome::new();
        let out = Outside::new(&t);
        let id = t.create("/p");
        let home = t.store.home().clone();
        // The attacker's copy of the id's directory, outside the home.
        let victim = out.dir.join(id.as_str());
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("meta.json"), b"{}").unwrap();
        let link = match level {
            "rollout/sessions" => home.root().join("rollout/sessions"),
            "memory" => home.root().join("memory"),
            _ => home.sessions_dir().join("evil"),
        };
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        symlink(&out.dir, &link).unwrap();
        let before = out.state();
        let res = t.store.purge(&id);
        assert_eq!(
            out.state(),
            before,
            "{level}: purge reached outside: {res:?}"
        );
        if level != "sessions/<project>" {
            let err = res.unwrap_err();
            assert!(is_link_error(&err, &link), "{level}: {err:?}");
        } else {
            // A linked project directory is skipped: the real session is purged.
            res.unwrap();
            assert!(matches!(
                t.store.meta(&id),
                Err(StoreError::NotFound { .. })
            ));
        }
    }
}

#[test]
fn a_linked_project_directory_is_never_written_into() {
    let t = TestHome::new();
    let out = Outside::new(&t);
    let home = t.store.home().clone();
    std::fs::create_dir_all(home.sessions_dir()).unwrap();
    let key = freecode_core::project_key::project_key("/victim/project");
    let link = home.sessions_dir().join(key.dir_name());
    symlink(out.subdir(), &link).unwrap();
    let before = out.state();
    let err = t.store.create(new_session("/victim/project")).unwrap_err();
    assert!(is_link_error(&err, &link), "{err:?}");
    assert_eq!(out.state(), before);
}

#[test]
fn a_session_moved_to_another_project_keeps_everything_and_never_goes_through_a_link() {
    let t = TestHome::new();
    let out = Outside::new(&t);
    let home = t.store.home().clone();
    let id = t.store.create(new_session("/src/première")).unwrap();
    t.store
        .append(&id, &text_msg("m1", Role::User, "bonjour"))
        .unwrap();
    let old_dir = t.store.locate(&id).unwrap().dir;
    // Into a project directory that is a link: refused, nothing moved, nothing written there.
    let key = freecode_core::project_key::project_key("/victim/project");
    let link = home.sessions_dir().join(key.dir_name());
    symlink(out.subdir(), &link).unwrap();
    let before = out.state();
    let err = t.store.move_to_project(&id, "/victim/project").unwrap_err();
    assert!(is_link_error(&err, &link), "{err:?}");
    assert_eq!(out.state(), before);
    assert_eq!(t.store.locate(&id).unwrap().dir, old_dir);
    // Elsewhere: the same id, messages and all; the emptied project directory is gone.
    let meta = t.store.move_to_project(&id, "/dst/déplacé").unwrap();
    assert_eq!(
        (meta.id.as_str(), meta.project_path.as_str()),
        (id.as_str(), "/dst/déplacé")
    );
    let new_dir = t.store.locate(&id).unwrap().dir;
    assert_ne!(new_dir, old_dir);
    assert!(!old_dir.parent().unwrap().exists());
    assert_eq!(t.store.messages(&id).unwrap().messages.len(), 1);
    assert_eq!(t.store.meta(&id).unwrap().project_path, "/dst/déplacé");
    // Held by a writer: it waits its turn (this store fails at once).
    let w = t.store.writer(&id).unwrap();
    assert!(matches!(
        t.store.move_to_project(&id, "/dst/ailleurs"),
        Err(StoreError::Locked { .. })
    ));
    drop(w);
    // Moving to where it is: nothing but the meta's time.
    t.store.move_to_project(&id, "/dst/déplacé").unwrap();
    assert_eq!(t.store.locate(&id).unwrap().dir, new_dir);
}

#[test]
fn state_links_never_redirect_the_database() {
    for level in ["state", "state/freecode.db", "state/freecode.db-wal"] {
        let t = TestHome::new();
        let out = Outside::new(&t);
        t.create("/p");
        let home = t.store.home().clone();
        let link = home.root().join(level);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        // The session's note in the change journal made `state/`.
        if link.is_dir() {
            std::fs::remove_dir_all(&link).unwrap();
        }
        let target = if level == "state" {
            out.subdir()
        } else {
            out.file()
        };
        symlink(&target, &link).unwrap();
        let before = out.state();
        // A write notes the session in the change journal: never through the link.
        t.create("/q");
        // Whatever the index does (refuse, or fall back to scanning), nothing lands outside.
        if let Ok(mut index) = freecode_store::index::SessionIndex::open(&home) {
            let _ = index.refresh(|_, _| {});
        }
        let _ = freecode_store::threads::open_thread_store(&home, Default::default());
        assert_eq!(out.state(), before, "{level}: written outside the home");
    }
}

#[test]
fn fsutil_refuses_links_for_every_kind_of_write() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("home");
    let _home = Home::new(&root);
    std::fs::create_dir_all(root.join("d")).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("f"), b"x").unwrap();
    symlink(outside.join("f"), root.join("d/link")).unwrap();
    symlink(&outside, root.join("dlink")).unwrap();
    let file_link = root.join("d/link");
    let dir_link = root.join("dlink");
    assert!(is_link_error(
        &fsutil::open_append(&file_link).unwrap_err(),
        &file_link
    ));
    assert!(is_link_error(
        &fsutil::open_rw(&file_link).unwrap_err(),
        &file_link
    ));
    assert!(is_link_error(
        &fsutil::append_line(&file_link, b"x").unwrap_err(),
        &file_link
    ));
    for below in ["f", "new"] {
        let p = dir_link.join(below);
        assert!(is_link_error(
            &fsutil::write_atomic(&p, b"y", true).unwrap_err(),
            &dir_link
        ));
        assert!(is_link_error(
            &fsutil::create_new(&p).unwrap_err(),
            &dir_link
        ));
        assert!(is_link_error(
            &fsutil::remove_file(&p).unwrap_err(),
            &dir_link
        ));
        assert!(is_link_error(
            &fsutil::remove_tree(&p).unwrap_err(),
            &dir_link
        ));
    }
    assert!(is_link_error(
        &fsutil::create_dir_private(&dir_link.join("x/y")).unwrap_err(),
        &dir_link
    ));
    // Removing a link removes the link, never its target.
    assert!(fsutil::remove_tree(&dir_link).unwrap());
    assert!(fsutil::remove_file(&file_link).unwrap());
    assert_eq!(std::fs::read(outside.join("f")).unwrap(), b"x");
    // A FIFO where a file is expected is refused without blocking.
    let fifo = root.join("d/fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let err = fsutil::open_append(&fifo).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::WrongType {
                found: "a FIFO",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(fsutil::read_bounded(&fifo, 10, "x").is_err());
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_home_writable_by_others_is_refused_with_the_fix() {
    for (sub, mode) in [
        ("", 0o777),
        ("", 0o770),
        ("sessions", 0o757),
        ("state", 0o722),
    ] {
        let t = TestHome::new();
        t.create("/p");
        std::fs::create_dir_all(t.root().join("state")).unwrap();
        let dir = if sub.is_empty() {
            t.root().to_path_buf()
        } else {
            t.root().join(sub)
        };
        chmod(&dir, mode);
        let err = SessionStore::with_config(Home::new(t.root()), quiet()).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, StoreError::Unsafe { ref path, .. } if *path == dir),
            "{err:?}"
        );
        assert!(msg.contains("writable by group or others"), "{msg}");
        assert!(
            msg.contains(&format!("chmod go-w {}", dir.display())),
            "{msg}"
        );
    }
}

#[test]
fn a_home_owned_by_another_user_is_refused() {
    // Only root may chown a file to another user (CI runs the tests as root).
    let t = TestHome::new();
    if !freecode_testkit::prerequisite(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(t.root()).unwrap()) == 0,
        "root (to give a directory to another user)",
        "run the tests as root, as CI does",
    ) {
        return;
    }
    let id = t.create("/p");
    let project = t.dir(&id).parent().unwrap().to_path_buf();
    std::os::unix::fs::chown(&project, Some(4242), None).unwrap();
    let err = t.store.writer(&id).unwrap_err();
    assert!(
        matches!(err, StoreError::Unsafe { ref path, .. } if *path == project),
        "{err:?}"
    );
    assert!(err.to_string().contains("owned by uid 4242"), "{err}");
    std::os::unix::fs::chown(t.root(), Some(4242), None).unwrap();
    let err = SessionStore::with_config(Home::new(t.root()), quiet()).unwrap_err();
    assert!(err.to_string().contains("chown"), "{err}");
}

#[test]
fn loose_modes_of_ours_are_tightened_when_written() {
    let t = TestHome::new();
    let id = t.create("/p");
    let dir = t.dir(&id);
    let log = t.log_path(&id);
    chmod(&dir, 0o755);
    chmod(&log, 0o644);
    chmod(t.root(), 0o711);
    // Reading changes nothing.
    t.store.messages(&id).unwrap();
    assert_eq!(crate::support::mode(&dir), 0o755);
    let mut w = t.store.writer(&id).unwrap();
    w.append(&text_msg("m1", Role::User, "hi")).unwrap();
    drop(w);
    assert_eq!(crate::support::mode(&dir), 0o700);
    assert_eq!(crate::support::mode(&log), 0o600);
    assert_eq!(crate::support::mode(t.root()), 0o700);
}

#[test]
fn oversized_files_are_refused_by_size_not_read() {
    let t = TestHome::new();
    let id = t.create("/p");
    let meta = t.dir(&id).join("meta.json");
    // A sparse 3 GB meta.json: refusing it must cost an fstat, not 3 GB of memory.
    let f = std::fs::OpenOptions::new().write(true).open(&meta).unwrap();
    f.set_len(3 << 30).unwrap();
    drop(f);
    let err = t.store.meta(&id).unwrap_err();
    assert!(matches!(err, StoreError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("4 MiB"), "{err}");
    let listing = t.store.list(&ListFilter::default()).unwrap();
    assert!(listing.sessions.is_empty());
    assert_eq!(listing.problems.len(), 1);
    // A stream past its bound (a device, a pipe) is cut at the bound plus one byte.
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let err =
        fsutil::read_capped(zero, Path::new("/dev/zero"), 1 << 20, "a summary file").unwrap_err();
    assert!(err.to_string().contains("1 MiB"), "{err}");
    // The context cache is bounded too.
    let cache = t.dir(&id).join("context-cache.json");
    let f = std::fs::File::create(&cache).unwrap();
    f.set_len(65 << 20).unwrap();
    assert!(matches!(
        t.store.context_cache(&id),
        Err(StoreError::TooLarge { .. })
    ));
}

#[test]
fn doctor_and_the_writer_read_a_compaction_journal_alike() {
    use freecode_store::doctor::{FindingKind, examine};
    // (the journal, whether it is garbage: the writer sets it aside and doctor reports it)
    let cases = [
        (
            r#"{"messages":".messages.jsonl.1.0.tmp","memory":".memory.json.1.1.tmp"}"#,
            false,
        ),
        (
            r#"{"memory":"m","messages":"l","note":"a later key"}"#,
            false,
        ),
        (" {\"messages\": \"l\", \"memory\": \"m\"}\n", false),
        ("{}", true),
        ("[]", true),
        (r#""a string""#, true),
        (r#"{"messages":1,"memory":"m"}"#, true),
        ("garbage", true),
    ];
    for (journal, garbage) in cases {
        let t = TestHome::new();
        let id = t.create("/p");
        let path = t.dir(&id).join("compaction.pending");
        std::fs::write(&path, journal).unwrap();
        let report = examine(t.store.home(), false).unwrap();
        let reported = report
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::BadJournal);
        assert_eq!(reported, garbage, "{journal}: {:?}", report.findings);
        drop(t.store.writer(&id).unwrap());
        assert!(!path.exists(), "{journal}");
        let set_aside = std::fs::read_dir(t.dir(&id))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .any(|n| n.starts_with("compaction.pending.bad-"));
        assert_eq!(set_aside, garbage, "{journal}");
    }
}

#[test]
fn a_garbage_compaction_journal_is_set_aside_and_never_blocks_writes() {
    for garbage in [&b"garbage"[..], &vec![b'{'; 2 << 20][..]] {
        let t = TestHome::new();
        let id = t.create("/p");
        let journal = t.dir(&id).join("compaction.pending");
        std::fs::write(&journal, garbage).unwrap();
        let mut w = t.store.writer(&id).unwrap();
        w.append(&text_msg("m1", Role::User, "still writable"))
            .unwrap();
        drop(w);
        assert!(!journal.exists());
        let aside: Vec<_> = std::fs::read_dir(t.dir(&id))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("compaction.pending.bad-"))
            .collect();
        assert_eq!(aside.len(), 1, "the garbage is kept for inspection");
        assert_eq!(t.store.messages(&id).unwrap().messages.len(), 1);
    }
}
