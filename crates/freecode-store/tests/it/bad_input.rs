//! Bad input the store must survive: hostile session ids, damaged logs (malformed lines, NUL
//! bytes, invalid UTF-8, 50 MB lines, torn tails), missing, unreadable and corrupt `meta.json`;
//! and two promises about the disk: everything created is private (0700/0600), and purge
//! removes exactly one session's files.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use freecode_core::context_cache::ContextCache;
use freecode_core::{Role, SessionId, StoredMessage};
use freecode_store::session::{META_FILE, TORN_FILE};
use freecode_store::{IssueKind, LineIssue, ListFilter, StoreError};

use crate::support::{
    Entry, TestHome, ids, mode, new_session, role_for, snapshot, text_msg, without_file_override,
};

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

fn listed(h: &TestHome) -> (BTreeSet<String>, Vec<(PathBuf, String)>) {
    let listing = h.store.list(&ListFilter::default()).unwrap();
    let ids = listing.sessions.iter().map(|m| m.id.clone()).collect();
    (ids, listing.problems)
}

fn set(ids: &[&SessionId]) -> BTreeSet<String> {
    ids.iter().map(|id| id.to_string()).collect()
}

// ----- session ids ---------------------------------------------------------------------------

#[test]
fn invalid_session_ids_are_rejected_clearly_and_create_nothing() {
    let h = TestHome::new();
    fs::write(h.tmp.path().join("x"), b"outside the home").unwrap();
    let before = snapshot(h.tmp.path());
    let long = "a".repeat(300);
    let cases: [(&str, &[&str]); 6] = [
        ("..", &[r#""..""#, "starts with a dot"]),
        ("../../x", &[r#""../../x""#, "starts with a dot"]),
        ("a/b", &[r#""a/b""#, "'/'", "only ASCII letters"]),
        ("", &["empty"]),
        (&long, &["300 characters", "at most 128"]),
        ("a\0b", &[r#""a\0b""#, r"'\0'"]),
    ];
    for (bad, needles) in cases {
        let err = SessionId::new(bad).expect_err("an invalid id is rejected");
        let text = err.to_string();
        for n in needles {
            assert!(text.contains(n), "{bad:?}: {text:?} should mention {n}");
        }
        assert!(
            !text.contains('\0') && !text.contains(&long),
            "{bad:?}: the message is printable and short: {text:?}"
        );
        // Every other way in validates the same way.
        assert!(bad.parse::<SessionId>().is_err(), "{bad:?}");
        assert!(
            serde_json::from_value::<SessionId>(serde_json::Value::from(bad)).is_err(),
            "{bad:?}"
        );
        // The store reports it unchanged.
        assert_eq!(StoreError::from(err).to_string(), text);
    }
    assert!(
        snapshot(h.tmp.path()) == before,
        "rejecting ids created or changed files"
    );
}

// ----- damaged logs --------------------------------------------------------------------------

/// A garbage line far past the line cap (skipped without being held).
const BIG: usize = 50 << 20;
/// A good message as long as a line may be (many blocks of the reader).
const HUGE: usize = freecode_store::jsonl::MAX_LINE_BYTES - (64 << 10);

enum Line {
    Good(Box<StoredMessage>),
    Bad(Vec<u8>),
    Blank(&'static [u8]),
}

impl Line {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Line::Good(m) => {
                let mut l = m.to_line();
                l.pop();
                l
            }
            Line::Bad(b) => b.clone(),
            Line::Blank(b) => b.to_vec(),
        }
    }
}

fn good(n: u32) -> Line {
    let role = role_for(u64::from(n));
    Line::Good(Box::new(text_msg(
        &format!("good-{n}"),
        role,
        &format!("message {n}"),
    )))
}

fn msg_json(id: &str, content: &[u8]) -> Vec<u8> {
    let mut v =
        format!(r#"{{"id":"{id}","role":"user","parts":[{{"type":"text","content":""#).into_bytes();
    v.extend_from_slice(content);
    v.extend_from_slice(br#""}],"timestamp":1}"#);
    v
}

#[test]
fn bad_lines_are_skipped_and_reported_with_line_and_offset() {
    let h = TestHome::new();
    let other = h.create("/work/other");
    h.store
        .append(&other, &text_msg("o1", Role::User, "untouched"))
        .unwrap();
    let id = h.create("/work/damaged");
    let other_before = snapshot(&h.dir(&other));

    let mut garbage = Vec::with_capacity(BIG);
    while garbage.len() < BIG {
        garbage.extend_from_slice(b"garbage\0\xff\xfe{\"id\":[}");
    }
    garbage.truncate(BIG);
    let mut huge_text = String::with_capacity(HUGE);
    while huge_text.len() < HUGE {
        huge_text.push_str("a long but valid message. ");
    }
    huge_text.truncate(HUGE);
    let huge = text_msg("huge", Role::Assistant, &huge_text);

    let lines = vec![
        good(1),
        Line::Bad(br#"{"id":"broken","role":"#.to_vec()),
        good(2),
        Line::Bad(msg_json("nul-in-string", b"a\0b")),
        Line::Bad(vec![0; 64]),
        Line::Bad(msg_json("bad-utf8", b"caf\xe9 \xff")),
        good(3),
        Line::Bad(garbage),
        Line::Good(Box::new(huge)),
        Line::Blank(b""),
        Line::Blank(b"  \t "),
        Line::Bad(br#"{"id":7,"role":"user"}"#.to_vec()),
        Line::Bad(b"[1,2,3]".to_vec()),
        good(4),
    ];
    let mut file = Vec::new();
    let mut want_messages = Vec::new();
    let mut want_issues = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let bytes = line.bytes();
        match line {
            Line::Good(m) => want_messages.push(StoredMessage::clone(m)),
            Line::Bad(_) => want_issues.push((i as u64 + 1, file.len() as u64, bytes.len() as u64)),
            Line::Blank(_) => {}
        }
        file.extend_from_slice(&bytes);
        file.push(b'\n');
    }
    drop(lines);
    let path = h.log_path(&id);
    fs::write(&path, &file).unwrap();

    let check = |messages: &[StoredMessage], issues: &[LineIssue], how: &str| {
        assert_eq!(
            ids(messages),
            ids(&want_messages),
            "{how}: the good messages"
        );
        assert!(
            messages == want_messages.as_slice(),
            "{how}: a good message was altered"
        );
        let got: Vec<(u64, u64, u64)> = issues.iter().map(|i| (i.line, i.offset, i.len)).collect();
        assert_eq!(
            got, want_issues,
            "{how}: (line, offset, len) of each bad line"
        );
        for i in issues {
            // The garbage past the cap is too long to read at all; the rest do not parse.
            if i.len as usize > freecode_store::jsonl::MAX_LINE_BYTES {
                assert_eq!(i.kind, IssueKind::TooLong, "{how}: {i}");
            } else {
                assert!(
                    matches!(i.kind, IssueKind::Malformed(_)),
                    "{how}: {i} should be malformed"
                );
            }
            let text = i.to_string();
            assert!(
                text.contains(&format!("line {}", i.line))
                    && text.contains(&format!("byte offset {}", i.offset)),
                "{how}: {text}"
            );
        }
    };
    let log = h.store.messages(&id).unwrap();
    check(&log.messages, &log.issues, "messages()");
    drop(log);
    let (mut streamed, mut issues) = (Vec::new(), Vec::new());
    h.store
        .stream_messages(&id, |m| streamed.push(m), |i| issues.push(i))
        .unwrap();
    check(&streamed, &issues, "stream_messages()");
    drop(streamed);
    assert!(fs::read(&path).unwrap() == file, "reading changed the log");

    // Appending keeps every line, bad ones included, and adds after them.
    let next = text_msg("after", Role::User, "appended after the damage");
    h.store.append(&id, &next).unwrap();
    let mut want_file = file;
    want_file.extend_from_slice(&next.to_line());
    assert!(
        fs::read(&path).unwrap() == want_file,
        "the append changed earlier lines"
    );
    let log = h.store.messages(&id).unwrap();
    assert_eq!(log.messages.last(), Some(&next));
    assert_eq!(log.issues.len(), want_issues.len());

    assert!(
        snapshot(&h.dir(&other)) == other_before,
        "another session was touched"
    );
    assert_eq!(ids(&h.store.messages(&other).unwrap().messages), ["o1"]);
}

#[test]
fn a_torn_tail_is_reported_then_cut_and_kept_aside_by_the_next_writer() {
    let h = TestHome::new();
    let id = h.create("/work/torn");
    let path = h.log_path(&id);
    let torn_path = h.dir(&id).join(TORN_FILE);
    let m = |n: u32| text_msg(&format!("m{n}"), Role::User, &format!("message {n}"));
    let line = |n: u32| m(n).to_line();
    {
        let mut w = h.store.writer(&id).unwrap();
        w.append(&m(1)).unwrap();
        w.append(&m(2)).unwrap();
    }
    let fragment: &[u8] = br#"{"id":"m-half","role":"assistant","parts":[{"type":"te"#;
    append_raw(&path, fragment);
    let complete = [line(1), line(2)].concat();
    let offset = complete.len() as u64;

    let want_issue = LineIssue {
        line: 3,
        offset,
        len: fragment.len() as u64,
        kind: IssueKind::Torn,
    };
    let log = h.store.messages(&id).unwrap();
    assert_eq!(ids(&log.messages), ["m1", "m2"]);
    assert_eq!(log.issues, vec![want_issue.clone()]);
    let text = log.issues[0].to_string();
    assert!(
        text.contains("line 3") && text.contains(&format!("byte offset {offset}")),
        "{text}"
    );
    let mut streamed = Vec::new();
    h.store
        .stream_messages(&id, |_| {}, |i| streamed.push(i))
        .unwrap();
    assert_eq!(streamed, vec![want_issue]);
    assert_eq!(
        fs::read(&path).unwrap(),
        [&complete[..], fragment].concat(),
        "reading changed the log"
    );

    // The next writer cuts the fragment off (keeping it aside) before appending.
    let mut w = h.store.writer(&id).unwrap();
    assert_eq!(w.repaired_tail, Some((offset, fragment.len() as u64)));
    assert_eq!(fs::read(&path).unwrap(), complete);
    assert_eq!(fs::read(&torn_path).unwrap(), [fragment, b"\n"].concat());
    assert_eq!(mode(&torn_path), 0o600);
    w.append(&m(3)).unwrap();
    drop(w);
    assert_eq!(
        fs::read(&path).unwrap(),
        [line(1), line(2), line(3)].concat()
    );
    let log = h.store.messages(&id).unwrap();
    assert_eq!(ids(&log.messages), ["m1", "m2", "m3"]);
    assert_eq!(log.issues, vec![]);

    // A whole message without its newline was never acknowledged: torn too; a second cut
    // adds to what was kept before.
    let mut unterminated = line(4);
    unterminated.pop();
    append_raw(&path, &unterminated);
    let log = h.store.messages(&id).unwrap();
    assert_eq!(ids(&log.messages), ["m1", "m2", "m3"]);
    assert_eq!(
        log.issues,
        vec![LineIssue {
            line: 4,
            offset: (line(1).len() + line(2).len() + line(3).len()) as u64,
            len: unterminated.len() as u64,
            kind: IssueKind::Torn,
        }]
    );
    h.store.append(&id, &m(5)).unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        [line(1), line(2), line(3), line(5)].concat()
    );
    assert_eq!(
        fs::read(&torn_path).unwrap(),
        [fragment, b"\n", &unterminated, b"\n"].concat()
    );

    // A log that is nothing but a fragment.
    let id2 = h.create("/work/torn");
    let path2 = h.log_path(&id2);
    fs::write(&path2, b"{\"id\"").unwrap();
    let log = h.store.messages(&id2).unwrap();
    assert_eq!(
        log.issues,
        vec![LineIssue {
            line: 1,
            offset: 0,
            len: 5,
            kind: IssueKind::Torn,
        }]
    );
    h.store.append(&id2, &m(1)).unwrap();
    assert_eq!(fs::read(&path2).unwrap(), line(1));
}

/// A log large enough to be parsed on several threads numbers its lines as a serial read does.
#[test]
fn a_large_log_reports_bad_torn_and_repaired_lines_at_their_true_position() {
    let h = TestHome::new();
    let id = h.create("/work/large");
    let mut file = Vec::new();
    let mut want = Vec::new();
    let mut want_ids = Vec::new();
    let n = 60_000u64;
    // Bad lines at the start, on both sides of the middle, and near the end (the blocks a load
    // reads, the halves a parallel read would split); a lone surrogate is kept and reported.
    let bad = [3, n / 2 - 1, n / 2, n / 2 + 1, n / 2 + 7, n - 2];
    for i in 1..=n {
        if bad.contains(&i) {
            want.push((i, file.len() as u64, IssueKind::Malformed(String::new())));
            file.extend_from_slice(b"{\"id\":\n");
            continue;
        }
        if i == n / 2 + 3 {
            want.push((i, file.len() as u64, IssueKind::LoneSurrogates(1)));
            want_ids.push(format!("m{i:06}"));
            file.extend_from_slice(
                format!("{{\"id\":\"m{i:06}\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"content\":\"cut \\ud83d\"}}],\"timestamp\":1}}\n")
                    .as_bytes(),
            );
            continue;
        }
        let role = role_for(i);
        want_ids.push(format!("m{i:06}"));
        file.extend_from_slice(
            &text_msg(
                &format!("m{i:06}"),
                role,
                "some text to make it long, é 中文",
            )
            .to_line(),
        );
    }
    want.push((n + 1, file.len() as u64, IssueKind::Torn));
    file.extend_from_slice(b"{\"id\":\"m-torn\",\"ro");
    assert!(file.len() > 4 << 20, "above the parallel threshold");
    fs::write(h.log_path(&id), &file).unwrap();

    // The kind, without a malformed line's message.
    let kind = |k: &IssueKind| match k {
        IssueKind::Malformed(_) => IssueKind::Malformed(String::new()),
        k => k.clone(),
    };
    let summary = |issues: &[LineIssue]| -> Vec<(u64, u64, IssueKind)> {
        issues
            .iter()
            .map(|i| (i.line, i.offset, kind(&i.kind)))
            .collect()
    };
    let log = h.store.messages(&id).unwrap();
    assert_eq!(ids(&log.messages), want_ids);
    assert_eq!(summary(&log.issues), want);
    let mut issues = Vec::new();
    let mut streamed = Vec::new();
    h.store
        .stream_messages(&id, |m| streamed.push(m.id), |i| issues.push(i))
        .unwrap();
    assert_eq!(streamed, want_ids);
    assert_eq!(summary(&issues), want);
    assert_eq!(
        log.messages[n as usize / 2 - 2].parts[0].content.as_deref(),
        Some("cut \u{fffd}")
    );
}

// ----- meta.json -----------------------------------------------------------------------------

#[test]
fn a_corrupt_meta_is_a_listed_problem_and_its_error_names_the_path() {
    let h = TestHome::new();
    let a = h.create("/work/one");
    let b = h.create("/work/two");
    let bad = h.create("/work/one");
    h.store
        .append(&bad, &text_msg("kept", Role::User, "still readable"))
        .unwrap();
    let meta_path = h.dir(&bad).join(META_FILE);
    let corruptions: [(&str, &[u8]); 5] = [
        ("truncated", br#"{"id": "x", "title": "#),
        ("empty", b""),
        ("wrong shape", br#"{"id": "x"}"#),
        ("NUL bytes", &[0; 32]),
        ("invalid UTF-8", b"{\"id\": \"\xff\xfe\"}"),
    ];
    for (what, bytes) in corruptions {
        fs::write(&meta_path, bytes).unwrap();
        let (ids_listed, problems) = listed(&h);
        assert_eq!(
            ids_listed,
            set(&[&a, &b]),
            "{what}: the others are still listed"
        );
        assert_eq!(problems.len(), 1, "{what}: {problems:?}");
        assert_eq!(problems[0].0, meta_path, "{what}");
        assert!(
            problems[0].1.contains("cannot parse"),
            "{what}: {problems:?}"
        );

        let err = h.store.meta(&bad).expect_err("a corrupt meta is an error");
        assert!(
            matches!(&err, StoreError::BadJson { path, .. } if *path == meta_path),
            "{what}: {err:?}"
        );
        assert!(
            err.to_string().contains(&meta_path.display().to_string()),
            "{what}: {err}"
        );
        // The conversation itself is still readable.
        assert_eq!(ids(&h.store.messages(&bad).unwrap().messages), ["kept"]);
    }
}

#[test]
fn a_session_without_meta_is_skipped_and_never_overwritten() {
    let h = TestHome::new();
    let a = h.create("/work/one");
    let gone = h.create("/work/one");
    h.store
        .append(&gone, &text_msg("orphan", Role::User, "kept"))
        .unwrap();
    let dir = h.dir(&gone);
    let log_before = fs::read(dir.join("messages.jsonl")).unwrap();
    fs::remove_file(dir.join(META_FILE)).unwrap();

    let (ids_listed, problems) = listed(&h);
    assert_eq!(ids_listed, set(&[&a]));
    assert_eq!(problems, vec![]);
    let err = h.store.meta(&gone).expect_err("no meta, no session");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains(gone.as_str()), "{err}");
    assert!(matches!(
        h.store.writer(&gone),
        Err(StoreError::NotFound { .. })
    ));

    // Creating a session with that id refuses and names the directory, keeping its log.
    let err = h
        .store
        .create_with_id(new_session("/work/one"), &gone)
        .expect_err("the directory is taken");
    assert!(
        err.to_string().contains(&dir.display().to_string()),
        "{err}"
    );
    assert_eq!(fs::read(dir.join("messages.jsonl")).unwrap(), log_before);
}

#[test]
fn an_unreadable_meta_is_a_listed_problem_and_its_error_names_the_path() {
    let h = TestHome::new();
    let a = h.create("/work/one");
    let locked = h.create("/work/one");
    let meta_path = h.dir(&locked).join(META_FILE);
    fs::set_permissions(&meta_path, fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads a mode-000 file: this thread drops that power for the test.
    without_file_override(|| {
        assert!(fs::read(&meta_path).is_err(), "a mode-000 file read");
        let (ids_listed, problems) = listed(&h);
        assert_eq!(ids_listed, set(&[&a]));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, meta_path);
        assert!(
            problems[0].1.contains(&meta_path.display().to_string()),
            "{problems:?}"
        );

        let err = h
            .store
            .meta(&locked)
            .expect_err("an unreadable meta is an error");
        assert!(
            matches!(&err, StoreError::Io { path, .. } if *path == meta_path),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&meta_path.display().to_string()),
            "{err}"
        );
    });
    fs::set_permissions(&meta_path, fs::Permissions::from_mode(0o600)).unwrap();
}

// ----- file modes ----------------------------------------------------------------------------

#[test]
fn everything_the_store_creates_is_private() {
    let h = TestHome::new();
    let id = h.create("/work/modes");
    {
        let mut w = h.store.writer(&id).unwrap();
        for n in 0..6u64 {
            let role = role_for(n);
            w.append(&text_msg(&format!("m{n}"), role, "secret"))
                .unwrap();
        }
        w.mark_interrupted(Some("m5")).unwrap();
        w.end_turn(10).unwrap();
        assert!(w.compact(1, "summary", None).unwrap().compacted);
    }
    let cache = ContextCache {
        requested_files: vec!["src/main.rs".to_owned()],
        file_contents: serde_json::json!({"src/main.rs": "fn main() {}"}),
        last_updated: 1,
        turn_count: 1,
        extra: freecode_core::Extra::new(),
    };
    h.store.set_context_cache(&id, &cache).unwrap();
    append_raw(&h.log_path(&id), b"{\"torn");
    drop(h.store.writer(&id).unwrap());
    let long_project = format!("/work/{}", "deep/".repeat(80));
    let hashed = h.create(&long_project);
    h.store.fork(&id, None).unwrap();
    h.store.fork(&hashed, Some("/work/elsewhere")).unwrap();

    let mut names = BTreeSet::new();
    assert_eq!(mode(h.root()), 0o700, "the home");
    for (rel, entry) in snapshot(h.root()) {
        let path = h.root().join(&rel);
        let want = match entry {
            Entry::Dir => 0o700,
            Entry::File(_) => 0o600,
            Entry::Link(_) => panic!("the store made a symlink: {}", path.display()),
        };
        assert_eq!(mode(&path), want, "{}: {:o}", path.display(), mode(&path));
        names.insert(rel.file_name().unwrap().to_string_lossy().into_owned());
    }
    for expected in [
        "sessions",
        "meta.json",
        "messages.jsonl",
        ".lock",
        "context-cache.json",
        "messages.jsonl.torn",
        "memory.json",
        ".project-path",
    ] {
        assert!(names.contains(expected), "{expected} was not created");
    }
}

// ----- purge ---------------------------------------------------------------------------------

#[test]
fn purge_removes_exactly_the_session_its_rollout_and_its_memory() {
    let h = TestHome::new();
    let root = h.root().to_path_buf();
    let a = h.create("/work/p1");
    let b = h.create("/work/p1");
    let c = h.create("/work/p2");
    for id in [&a, &b, &c] {
        let mut w = h.store.writer(id).unwrap();
        for n in 0..4u64 {
            let role = role_for(n);
            w.append(&text_msg(&format!("{id}-{n}"), role, "text"))
                .unwrap();
        }
        assert!(w.compact(1, "summary", None).unwrap().compacted);
    }
    let home = h.store.home().clone();
    for id in [&a, &b] {
        let r = home.rollout_dir(id);
        fs::create_dir_all(&r).unwrap();
        fs::write(r.join("events.jsonl"), b"{}\n").unwrap();
    }
    // Neighbours whose names start like the target's, and files that belong to nobody.
    let p1 = h.dir(&a).parent().unwrap().to_path_buf();
    let lookalike = format!("{a}.bak");
    for d in [
        p1.join(&lookalike),
        root.join("rollout/sessions").join(&lookalike),
        root.join("memory").join(&lookalike),
        root.join("state"),
        h.tmp.path().join(a.as_str()),
    ] {
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("keep"), b"keep").unwrap();
    }
    fs::write(root.join("config.json"), b"{}").unwrap();
    fs::write(p1.join("notes.txt"), b"notes").unwrap();
    fs::write(root.join("memory").join(format!("{a}-old")), b"old").unwrap();

    let purge = |id: &SessionId, expect: &[PathBuf]| {
        let before = snapshot(h.tmp.path());
        let mut removed = h.store.purge(id).unwrap();
        removed.sort();
        let mut expect = expect.to_vec();
        expect.sort();
        assert_eq!(removed, expect, "the paths purge reports");
        let gone: Vec<PathBuf> = expect
            .iter()
            .map(|p| p.strip_prefix(h.tmp.path()).unwrap().to_path_buf())
            .collect();
        let mut want = before;
        want.retain(|rel, _| !gone.iter().any(|g| rel.starts_with(g)));
        // The change journal says the session changed: the one other file a purge writes.
        let journal = freecode_store::changes::journal_path(&home);
        let journal = journal.strip_prefix(h.tmp.path()).unwrap().to_path_buf();
        want.remove(&journal);
        let mut after = snapshot(h.tmp.path());
        let noted = after.remove(&journal);
        let noted = match noted {
            Some(Entry::File(b)) => String::from_utf8(b).unwrap(),
            other => panic!("no change journal after a purge: {other:?}"),
        };
        assert!(
            noted
                .lines()
                .last()
                .is_some_and(|l| l.starts_with(&format!("{id}\t"))),
            "the purge is noted: {noted}"
        );
        let changed: Vec<&PathBuf> = after
            .keys()
            .chain(want.keys())
            .filter(|k| after.get(*k) != want.get(*k))
            .collect();
        assert!(changed.is_empty(), "purge of {id} also changed {changed:?}");
        assert!(matches!(
            h.store.locate(id),
            Err(StoreError::NotFound { .. })
        ));
    };

    purge(&a, &[h.dir(&a), home.rollout_dir(&a), home.memory_dir(&a)]);
    assert_eq!(listed(&h).0, set(&[&b, &c]));
    assert_eq!(
        ids(&h.store.messages(&b).unwrap().messages),
        [format!("{b}-2"), format!("{b}-3")]
    );

    // No rollout: only what exists is reported; the emptied project directory stays.
    let c_project = h.dir(&c).parent().unwrap().to_path_buf();
    purge(&c, &[h.dir(&c), home.memory_dir(&c)]);
    assert!(c_project.is_dir());
    assert_eq!(listed(&h).0, set(&[&b]));

    // Purging what is not there changes nothing.
    let before = snapshot(h.tmp.path());
    assert!(matches!(
        h.store.purge(&a),
        Err(StoreError::NotFound { .. })
    ));
    assert!(snapshot(h.tmp.path()) == before);
}
