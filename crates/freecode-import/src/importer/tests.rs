//! Unit tests of `importer`.

#![allow(clippy::unwrap_used)]
use super::*;
use freecode_store::Home;

fn store(dir: &Path) -> SessionStore {
    SessionStore::open(Home::new(dir.join("home"))).unwrap()
}

fn opts() -> Options {
    Options {
        now: 1_900_000_000_000,
        ..Options::default()
    }
}

fn actions(r: &Report) -> Vec<&'static str> {
    r.sessions.iter().map(|s| s.action.name()).collect()
}

#[test]
fn import_reimport_grow_and_replace() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let fixture = freecode_testkit::external_fixtures()
        .join("claude-code/schema/claudecodelog-dag_compact_after_rewind.jsonl");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let file = src.join("s1.jsonl");
    // The first 8 lines (the second branch up to b2a2) and a torn ninth.
    let head = format!("{}\n{}", lines[..8].join("\n"), &lines[8][..40]);
    std::fs::write(&file, &head).unwrap();
    let store = store(dir.path());
    let roots = vec![src.clone()];
    let r = run(&store, Agent::ClaudeCode, &roots, &opts()).unwrap();
    assert_eq!(actions(&r), ["imported", "imported"], "{:?}", r.issues);
    assert!(
        r.issues
            .iter()
            .any(|i| i.message.contains("incomplete last line"))
    );
    let main = SessionId::new(r.sessions[0].id.clone()).unwrap();
    let fork = SessionId::new(r.sessions[1].id.clone()).unwrap();
    assert_eq!(store.messages(&main).unwrap().messages.len(), 6);
    let fork_meta = store.meta(&fork).unwrap();
    assert_eq!(fork_meta.parent_id.as_deref(), Some(main.as_str()));
    // The fork's log holds its own branch only: from its first prompt ("First attempt",
    // 10:02), seq from 1.
    let mut fork_events = Vec::new();
    freecode_store::rollout::read_events(
        &freecode_store::rollout::events_path(store.home(), &fork),
        |e| fork_events.push(e),
    )
    .unwrap();
    assert_eq!(fork_events[0].seq, 1);
    assert_eq!(
        Some(fork_events[0].timestamp),
        crate::model::parse_iso_ms("2025-07-01T10:02:00Z")
    );
    assert_eq!(fork_events[0].kind.type_name(), "turn.started");
    let meta = store.meta(&main).unwrap();
    assert_eq!(meta.agent(), "claude-code");
    assert_eq!(meta.project_path, "/tmp");
    assert!(meta.is_untouched_import());
    let from = meta.imported_from().unwrap();
    assert_eq!(from["sourceId"], "s1");
    assert_eq!(from["version"], "2.1.0");

    // Unchanged: skipped on the stat.
    let again = run(&store, Agent::ClaudeCode, &roots, &opts()).unwrap();
    assert_eq!(again.unchanged_units, 1);
    assert_eq!(actions(&again), ["unchanged", "unchanged"]);

    // A later import: `importedAt` follows it, so the session still counts as untouched.
    let later = Options {
        now: opts().now + 1,
        ..opts()
    };
    // The rest written: a compaction, then p1u and p1a. It becomes ours: the summary in
    // `memory.json`, the log from the compaction on (replaced: it no longer starts as
    // the first import's did).
    std::fs::write(&file, &text).unwrap();
    let compacted = run(&store, Agent::ClaudeCode, &roots, &later).unwrap();
    let meta = store.meta(&main).unwrap();
    assert_eq!(meta.imported_from().unwrap()["importedAt"], later.now);
    assert!(meta.is_untouched_import());
    assert_eq!(
        actions(&compacted),
        ["replaced", "unchanged"],
        "{:?}",
        compacted.issues
    );
    let texts = |s: &SessionStore| -> Vec<String> {
        s.messages(&main)
            .unwrap()
            .messages
            .iter()
            .map(StoredMessage::text)
            .collect()
    };
    assert_eq!(texts(&store).len(), 2);
    assert!(
        texts(&store)[0].starts_with("After compaction"),
        "{:?}",
        texts(&store)
    );
    let memory = store.compaction_memory(&main).unwrap().unwrap();
    assert_eq!(memory.session_id, main.as_str());
    assert_eq!(memory.total_compactions, 1);
    let summary = memory.latest_summary().unwrap();
    assert!(
        summary
            .content
            .contains("Summary: the user asked for a plan."),
        "{summary:?}"
    );
    // It replaced the six messages of the live branch before it.
    assert_eq!(summary.original_message_count, 6);
    assert_eq!(
        Some(summary.created_at),
        crate::model::parse_iso_ms("2025-07-01T10:30:00Z")
    );
    // The resumed session starts from the summary and the kept history.
    let resumed = store.resume(&main).unwrap();
    assert_eq!(resumed.summary.as_deref(), Some(summary.content.as_str()));
    assert_eq!(resumed.messages.len(), 2);
    // The rollout log keeps every event, the compaction's too.
    let events = count_events(&store, &main).unwrap();
    assert_eq!(events, compacted.sessions[0].events);

    // A turn more: the session grows by it, the summary stays.
    let p2: String = lines[lines.len() - 2..]
        .iter()
        .map(|l| {
            l.replace("p1u", "p2u")
                .replace("p1a", "p2a")
                .replace("\"parentUuid\":\"cs\"", "\"parentUuid\":\"p1a\"")
                .replace("T10:4", "T10:5")
                + "\n"
        })
        .collect();
    let grown_text = format!("{}{p2}", text.trim_end_matches('\n').to_owned() + "\n");
    std::fs::write(&file, &grown_text).unwrap();
    let grown = run(&store, Agent::ClaudeCode, &roots, &later).unwrap();
    assert_eq!(
        actions(&grown),
        ["updated", "unchanged"],
        "{:?}",
        grown.issues
    );
    assert_eq!(grown.sessions[0].added_messages, 2);
    assert_eq!(texts(&store).len(), 4);
    assert_eq!(store.compaction_memory(&main).unwrap().unwrap(), memory);
    // The grown session is the one a fresh import writes.
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh = self::store(fresh_dir.path());
    run(&fresh, Agent::ClaudeCode, &roots, &opts()).unwrap();
    for (a, b) in [
        (
            freecode_store::rollout::events_path(store.home(), &main),
            freecode_store::rollout::events_path(fresh.home(), &main),
        ),
        (
            store.locate(&main).unwrap().messages(),
            fresh.locate(&main).unwrap().messages(),
        ),
        (
            store.home().memory_file(&main),
            fresh.home().memory_file(&main),
        ),
    ] {
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{}",
            a.display()
        );
    }

    // A kept message changed: the session is replaced whole.
    std::fs::write(
        &file,
        grown_text.replace("After compaction", "After the compaction"),
    )
    .unwrap();
    let replaced = run(&store, Agent::ClaudeCode, &roots, &opts()).unwrap();
    assert_eq!(replaced.sessions[0].action, Action::Replaced);
    assert_eq!(texts(&store).len(), 4);
    assert!(texts(&store)[0].starts_with("After the compaction"));
    assert!(store.compaction_memory(&main).unwrap().is_some());

    // The source rewound before its compaction (the first import's text again): no
    // summary is left in force.
    std::fs::write(&file, &head).unwrap();
    let rewound = run(&store, Agent::ClaudeCode, &roots, &opts()).unwrap();
    assert_eq!(rewound.sessions[0].action, Action::Replaced);
    assert_eq!(texts(&store).len(), 6);
    assert_eq!(store.compaction_memory(&main).unwrap(), None);
}

#[test]
fn dry_run_writes_nothing_and_counts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let line = serde_json::json!({"type":"user","uuid":"u1","parentUuid":null,
        "timestamp":"2026-01-01T00:00:00Z","cwd":"/p","sessionId":"s",
        "message":{"role":"user","content":"token ghp_R8mZ2kQ7vLx9Tn4Wp1Yc6Hd3Jf5Gs0Bq8Ua2 here"}});
    std::fs::write(src.join("s.jsonl"), format!("{line}\n")).unwrap();
    let store = store(dir.path());
    let r = run(
        &store,
        Agent::ClaudeCode,
        &[src],
        &Options {
            dry_run: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(actions(&r), ["imported"]);
    assert_eq!(r.sessions[0].redactions, 1);
    // Each finding by rule, place and a masked preview, never the value.
    let f = &r.sessions[0].findings;
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].location.starts_with("messages["), "{f:?}");
    assert!(f[0].preview.contains('…'), "{f:?}");
    assert!(!store.home().root().exists(), "nothing written");
}

#[test]
fn a_session_with_no_project_is_placed_by_its_paths_or_unplaced_and_stays_where_moved() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    // No cwd on any record: no project directory. One chat names paths, one none.
    let user = |session: &str, uuid: &str, text: &str| {
        let parent = (uuid != "u1").then_some("u1");
        serde_json::json!({"type":"user","uuid":uuid,"parentUuid":parent,
            "timestamp":"2026-01-01T00:00:00Z","sessionId":session,
            "message":{"role":"user","content":text}})
        .to_string()
            + "\n"
    };
    std::fs::write(src.join("s.jsonl"), user("s", "u1", "hello")).unwrap();
    std::fs::write(
        src.join("t.jsonl"),
        user(
            "t",
            "u1",
            "why does /srv/app/src/main.rs not see /srv/app/Cargo.toml?",
        ),
    )
    .unwrap();
    let store = store(dir.path());
    let roots = vec![src.clone()];
    let r = run(&store, Agent::ClaudeCode, &roots, &opts()).unwrap();
    assert_eq!(actions(&r), ["imported", "imported"], "{:?}", r.issues);
    let placed: Vec<_> = r
        .sessions
        .iter()
        .map(|s| s.placed.clone().unwrap())
        .collect();
    let unplaced = crate::place::unplaced_project(store.home().root());
    assert_eq!(
        (placed[0].how, placed[0].project.as_str()),
        ("unplaced", unplaced.as_str())
    );
    assert_eq!(
        (placed[1].how, placed[1].project.as_str()),
        ("guess", "/srv/app")
    );
    let (s, t) = (
        session_id(Agent::ClaudeCode, "s").unwrap(),
        session_id(Agent::ClaudeCode, "t").unwrap(),
    );
    assert_eq!(store.meta(&s).unwrap().project_path, unplaced);
    assert_eq!(store.meta(&t).unwrap().project_path, "/srv/app");
    assert_eq!(ImportState::load(store.home()).units.len(), 2);
    // Moved by the user, grown in the source: it stays where the user put it.
    store.move_to_project(&s, "/work/app").unwrap();
    let mut grown = user("s", "u1", "hello");
    grown.push_str(&user("s", "u2", "again"));
    std::fs::write(src.join("s.jsonl"), grown).unwrap();
    let r = run(&store, Agent::ClaudeCode, &roots, &opts()).unwrap();
    assert_eq!(actions(&r), ["updated", "unchanged"], "{:?}", r.issues);
    assert!(r.sessions[0].placed.is_none());
    assert_eq!(store.meta(&s).unwrap().project_path, "/work/app");
    assert_eq!(store.messages(&s).unwrap().messages.len(), 2);
    // `--project` names it before any guess.
    let named = Options {
        fallback_project: Some("/p".into()),
        ..opts()
    };
    let fresh = SessionStore::open(Home::new(dir.path().join("other-home"))).unwrap();
    let r = run(&fresh, Agent::ClaudeCode, &roots, &named).unwrap();
    assert!(
        r.sessions.iter().all(|s| s.placed.is_none()),
        "{:?}",
        r.sessions
    );
    assert_eq!(fresh.meta(&t).unwrap().project_path, "/p");
}

#[test]
fn a_unit_that_cannot_be_read_is_counted_failed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    std::fs::write(&db, b"not a database at all, not even close").unwrap();
    let store = store(dir.path());
    let r = run(&store, Agent::Opencode, &[db], &opts()).unwrap();
    assert_eq!((r.units, r.failed_units), (1, 1), "{:?}", r.issues);
    assert!(!r.issues.is_empty());
    assert!(ImportState::load(store.home()).units.is_empty());
}

/// The `subagent.start/stop` events of `id`'s log: (event type, subagent id).
fn subagent_events(store: &SessionStore, id: &str) -> Vec<(String, String)> {
    let id = SessionId::new(id.to_owned()).unwrap();
    let mut out = Vec::new();
    freecode_store::rollout::read_events(
        &freecode_store::rollout::events_path(store.home(), &id),
        |e| match &e.kind {
            freecode_core::rollout::event::EventKind::SubagentStart { subagent_id, .. }
            | freecode_core::rollout::event::EventKind::SubagentStop { subagent_id, .. } => {
                out.push((e.kind.type_name().to_owned(), subagent_id.clone()))
            }
            _ => {}
        },
    )
    .unwrap();
    out
}

#[test]
fn subagent_events_name_the_child_session() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let kids = src.join("s1").join("subagents");
    std::fs::create_dir_all(&kids).unwrap();
    let rec = |v: serde_json::Value| format!("{v}\n");
    let base = serde_json::json!({"cwd": "/p", "sessionId": "s1", "version": "2.1.0"});
    let with = |extra: serde_json::Value| {
        let mut v = base.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        rec(v)
    };
    let parent = [
        with(
            serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "look around"}}),
        ),
        with(
            serde_json::json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1",
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {"id": "m1", "role": "assistant", "model": "claude-test",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Task",
                             "input": {"description": "explore", "prompt": "find it"}}]}}),
        ),
        with(
            serde_json::json!({"type": "user", "uuid": "r1", "parentUuid": "a1",
            "timestamp": "2026-01-01T00:00:09Z",
            "toolUseResult": {"agentId": "abc123", "status": "completed"},
            "message": {"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": "toolu_1", "content": "found it"}]}}),
        ),
    ]
    .concat();
    std::fs::write(src.join("s1.jsonl"), parent).unwrap();
    let child = [
        with(
            serde_json::json!({"type": "user", "uuid": "c1", "parentUuid": null,
            "isSidechain": true, "agentId": "abc123", "timestamp": "2026-01-01T00:00:02Z",
            "message": {"role": "user", "content": "find it"}}),
        ),
        with(
            serde_json::json!({"type": "assistant", "uuid": "c2", "parentUuid": "c1",
            "isSidechain": true, "agentId": "abc123", "timestamp": "2026-01-01T00:00:08Z",
            "message": {"id": "m2", "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": "found it"}]}}),
        ),
    ]
    .concat();
    std::fs::write(kids.join("agent-abc123.jsonl"), child).unwrap();
    let store = store(dir.path());
    let r = run(&store, Agent::ClaudeCode, &[src], &opts()).unwrap();
    assert_eq!(actions(&r), ["imported", "imported"], "{:?}", r.issues);
    let (main, kid) = (&r.sessions[0], &r.sessions[1]);
    assert_eq!(kid.parent_id.as_deref(), Some(main.id.as_str()));
    assert_eq!(
        subagent_events(&store, &main.id),
        [
            ("subagent.start".to_owned(), kid.id.clone()),
            ("subagent.stop".to_owned(), kid.id.clone())
        ]
    );
}
