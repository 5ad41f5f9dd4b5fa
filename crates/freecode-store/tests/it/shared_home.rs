//! One home with the original (issue 12): sessions live under the original's directory names,
//! lossy or not, are told apart by `projectPath`, and sessions an earlier version put under
//! `esc-…`/`h-…` keep being read and move to the original's name on their next write.

use std::fs;
use std::path::Path;

use freecode_core::project_key::{format_original, project_dir_name};
use freecode_core::{Role, SessionId};
use freecode_store::lock::LockWait;
use freecode_store::{ListFilter, SessionStore};
use proptest::prelude::*;

use crate::support::{TestHome, new_session, open_store, text_msg};

fn listed(store: &SessionStore, project: &str) -> Vec<String> {
    let mut v: Vec<String> = store
        .list(&ListFilter {
            project_path: Some(project.to_owned()),
            include_deleted: true,
            ..ListFilter::default()
        })
        .unwrap()
        .sessions
        .into_iter()
        .map(|m| m.id)
        .collect();
    v.sort();
    v
}

/// Writes a session as an earlier version of ours did: under `dir_name`, with its meta and
/// one message.
fn plant_legacy(root: &Path, dir_name: &str, id: &str, project: &str) -> SessionId {
    let project_dir = root.join("sessions").join(dir_name);
    let dir = project_dir.join(id);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("meta.json"),
        format!(
            r#"{{"id":"{id}","title":"legacy","projectPath":{},"provider":"anthropic","status":"active","createdAt":1,"updatedAt":1,"lastTurnAt":1,"turnCount":1}}"#,
            serde_json::to_string(project).unwrap()
        ),
    )
    .unwrap();
    let line = text_msg("m0", Role::User, "from before").to_line();
    fs::write(dir.join("messages.jsonl"), line).unwrap();
    if dir_name.starts_with("h-") {
        fs::write(project_dir.join(".project-path"), project).unwrap();
    }
    SessionId::new(id).unwrap()
}

#[test]
fn colliding_projects_share_the_originals_directory_and_stay_apart() {
    let h = TestHome::new();
    // The original names all three `a___b`; each keeps its own sessions.
    let projects = ["/a_/b", "/a/_b", "/a___b"];
    let ids: Vec<SessionId> = projects.iter().map(|p| h.create(p)).collect();
    for (p, id) in projects.iter().zip(&ids) {
        assert_eq!(
            h.dir(id),
            h.root().join("sessions").join("a___b").join(id.as_str())
        );
        assert_eq!(listed(&h.store, p), vec![id.to_string()], "{p}");
        assert_eq!(h.store.meta(id).unwrap().project_path, *p);
    }
}

#[test]
fn an_earlier_versions_escaped_session_is_read_then_moved_on_its_next_write() {
    let h = TestHome::new();
    let id = plant_legacy(
        h.root(),
        "esc-%2Fa_%2Fb",
        "11111111-0000-4000-8000-000000000001",
        "/a_/b",
    );
    // Read where it is: listed (by project too), its meta and messages.
    assert_eq!(listed(&h.store, "/a_/b"), vec![id.to_string()]);
    assert_eq!(h.store.messages(&id).unwrap().messages.len(), 1);
    let legacy_dir = h.root().join("sessions/esc-%2Fa_%2Fb");
    assert!(
        legacy_dir.join(id.as_str()).is_dir(),
        "a read moves nothing"
    );

    // The next write moves it, whole, to the original's name, and appends there.
    h.store
        .append(&id, &text_msg("m1", Role::Assistant, "after"))
        .unwrap();
    let new_dir = h.root().join("sessions/a___b").join(id.as_str());
    assert_eq!(h.dir(&id), new_dir);
    assert!(
        !legacy_dir.exists(),
        "the emptied legacy directory is removed"
    );
    let log = h.store.messages(&id).unwrap();
    assert_eq!(
        log.messages
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        ["m0", "m1"]
    );
    assert_eq!(listed(&h.store, "/a_/b"), vec![id.to_string()]);
    assert_eq!(h.store.meta(&id).unwrap().title, "legacy");
}

#[test]
fn an_earlier_versions_hashed_session_moves_and_its_path_file_goes_with_the_last() {
    let h = TestHome::new();
    // Escaped, this path is past 255 bytes (so an earlier version hashed it); the original's
    // name is short enough to write.
    let project = format!("/a_/{}", "é".repeat(100));
    assert!(format_original(&project).len() <= 255);
    let legacy = freecode_core::project_key::legacy_dir_names(&project);
    assert_eq!(legacy.len(), 1);
    assert!(legacy[0].starts_with("h-"), "{legacy:?}");
    let a = plant_legacy(
        h.root(),
        &legacy[0],
        "22222222-0000-4000-8000-00000000000a",
        &project,
    );
    let b = plant_legacy(
        h.root(),
        &legacy[0],
        "22222222-0000-4000-8000-00000000000b",
        &project,
    );
    let mut both = vec![a.to_string(), b.to_string()];
    both.sort();
    assert_eq!(listed(&h.store, &project), both);
    let legacy_dir = h.root().join("sessions").join(&legacy[0]);
    h.store
        .set_status(&a, freecode_core::SessionStatus::Archived)
        .unwrap();
    assert!(
        legacy_dir.join(".project-path").is_file(),
        "kept while a session is left"
    );
    h.store
        .append(&b, &text_msg("m1", Role::User, "x"))
        .unwrap();
    assert!(!legacy_dir.exists());
    for id in [&a, &b] {
        assert_eq!(
            h.dir(id).parent().unwrap(),
            h.root().join("sessions").join(project_dir_name(&project))
        );
    }
    assert_eq!(listed(&h.store, &project), both);
}

#[test]
fn an_originals_lossy_directory_is_never_moved() {
    let h = TestHome::new();
    // The original wrote `/a_/b` under its own (lossy) name: it stays there.
    let id = plant_legacy(
        h.root(),
        "a___b",
        "33333333-0000-4000-8000-000000000001",
        "/a_/b",
    );
    h.store
        .append(&id, &text_msg("m1", Role::User, "x"))
        .unwrap();
    assert_eq!(
        h.dir(&id),
        h.root().join("sessions/a___b").join(id.as_str())
    );
}

#[test]
fn writers_racing_on_a_legacy_session_lose_nothing() {
    let h = TestHome::new();
    let id = plant_legacy(
        h.root(),
        "esc-%2Fx-%2Fy",
        "44444444-0000-4000-8000-000000000001",
        "/x-/y",
    );
    let root = h.root().to_path_buf();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (root, id) = (root.clone(), id.clone());
            s.spawn(move || {
                let store = open_store(&root, LockWait::Block);
                for i in 0..10 {
                    store
                        .append(&id, &text_msg(&format!("t{t}-{i}"), Role::User, "é"))
                        .unwrap();
                    // A reader beside the writers always finds the session.
                    assert!(store.meta(&id).is_ok());
                    assert!(store.messages(&id).is_ok());
                }
            });
        }
    });
    assert_eq!(h.store.messages(&id).unwrap().messages.len(), 41);
    assert_eq!(
        h.dir(&id).parent().unwrap(),
        h.root().join("sessions/x_h___y")
    );
}

fn colliding_path() -> impl Strategy<Value = String> {
    // Few components from the characters the original's transform drops or rewrites, so that
    // several paths of one case often share a directory.
    proptest::collection::vec(
        prop_oneof![
            Just("/"),
            Just("_"),
            Just("-"),
            Just("_h_"),
            Just("__"),
            Just(":"),
            Just("a"),
            Just("é"),
            Just("."),
        ],
        1..6,
    )
    .prop_map(|v| format!("/{}", v.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A session is always found again from its project path and id, under the original's
    /// name wherever that is safe, and never confused with another project's session.
    #[test]
    fn found_again_by_project_and_never_confused(
        projects in proptest::collection::vec(colliding_path(), 1..6)
    ) {
        let h = TestHome::new();
        let made: Vec<(String, SessionId)> = projects
            .iter()
            .map(|p| (p.clone(), h.store.create(new_session(p)).unwrap()))
            .collect();
        for (p, id) in &made {
            let meta = h.store.meta(id).unwrap();
            prop_assert_eq!(&meta.project_path, p);
            let dir = h.dir(id);
            let parent = dir.parent().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
            prop_assert_eq!(&parent, &project_dir_name(p));
            let original = format_original(p);
            if freecode_core::project_key::is_safe_original_name(&original) {
                prop_assert_eq!(&parent, &original);
            }
            let mut want: Vec<String> = made
                .iter()
                .filter(|(q, _)| q == p)
                .map(|(_, i)| i.to_string())
                .collect();
            want.sort();
            prop_assert_eq!(listed(&h.store, p), want);
        }
    }
}

#[test]
fn lone_surrogates_from_the_original_are_read_as_replacement_characters_and_kept_on_disk() {
    use freecode_store::IssueKind;
    use freecode_store::index::SearchQuery;
    use freecode_store::index::SessionIndex;

    let h = TestHome::new();
    let id = "55555555-0000-4000-8000-000000000001";
    let dir = h.root().join("sessions/home__dev__app").join(id);
    fs::create_dir_all(&dir).unwrap();
    // As the original's JSON.stringify writes a title and a read-tool line cut inside an emoji.
    let meta = format!(
        r#"{{"id":"{id}","title":"emoji \ud83d","projectPath":"/home/dev/app","provider":"anthropic","status":"active","createdAt":1,"updatedAt":2,"lastTurnAt":2,"turnCount":1}}"#
    );
    fs::write(dir.join("meta.json"), &meta).unwrap();
    let log = concat!(
        r#"{"id":"m1","role":"user","parts":[{"type":"text","content":"read the file"}],"timestamp":1}"#,
        "\n",
        r#"{"id":"m2","role":"assistant","parts":[{"type":"tool","tool":{"name":"read_file","args":{"path":"a"}},"result":"line \ud83d"}],"timestamp":2}"#,
        "\n",
        r#"{"id":"m3","role":"assistant","parts":[{"type":"text","content":"a zebra \ud83d"}],"timestamp":3}"#,
        "\n",
    );
    fs::write(dir.join("messages.jsonl"), log).unwrap();
    let sid = SessionId::new(id).unwrap();

    let m = h.store.meta(&sid).unwrap();
    assert_eq!(m.title, "emoji \u{FFFD}");
    let read = h.store.messages(&sid).unwrap();
    assert_eq!(
        read.messages.len(),
        3,
        "the cut lines are read, not skipped"
    );
    assert!(
        serde_json::to_string(&read.messages[1])
            .unwrap()
            .contains("line \u{FFFD}")
    );
    assert_eq!(read.issues.len(), 2);
    assert_eq!(read.issues[0].line, 2);
    assert_eq!(read.issues[0].kind, IssueKind::LoneSurrogates(1));
    assert!(!read.issues[0].kind.skipped());
    // Listed, and found by the index, with the same reading.
    let listing = h.store.list(&ListFilter::default()).unwrap();
    assert_eq!(listing.sessions[0].title, "emoji \u{FFFD}");
    fs::create_dir_all(h.root().join("state")).unwrap();
    let mut ix = SessionIndex::open(h.store.home()).unwrap();
    let hits = ix
        .search(&SearchQuery {
            text: "zebra".into(),
            project: None,
            since: None,
            until: None,
            limit: 10,
            all: false,
            agent: None,
        })
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].title, "emoji \u{FFFD}");
    // The bytes on disk are as the original wrote them.
    assert_eq!(fs::read_to_string(dir.join("messages.jsonl")).unwrap(), log);
    assert_eq!(fs::read_to_string(dir.join("meta.json")).unwrap(), meta);

    // An event log line cut the same way is read too.
    let events = h.root().join("rollout/sessions").join(id);
    fs::create_dir_all(&events).unwrap();
    fs::write(
        events.join("events.jsonl"),
        format!(
            "{}\n",
            r#"{"type":"function.output","id":"01KF0FSPAWME0FZGFAGJ","seq":1,"aggregateID":"55555555-0000-4000-8000-000000000001","timestamp":2,"turnId":"turn-0","tool":"read_file","output":"tail \ud83d","duration_ms":3}"#
        ),
    )
    .unwrap();
    let mut got = Vec::new();
    let report =
        freecode_store::rollout::read_events(&events.join("events.jsonl"), |e| got.push(e))
            .unwrap()
            .unwrap();
    assert_eq!(report.events, 1, "{report:?}");
    assert_eq!(report.issues.len(), 1);
    assert_eq!(report.issues[0].kind, IssueKind::LoneSurrogates(1));
}
