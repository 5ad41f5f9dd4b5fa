//! The session index: the same answers as scanning the files, without opening session files
//! when fresh, incremental from per-file watermarks, and wired to the thread store.

use crate::support::{copy_tree, fixtures};
use std::fs::File;
use std::path::Path;

use freecode_core::SessionId;
use freecode_core::message::{Part, Role};
use freecode_core::{SessionStatus, StoredMessage};
use freecode_store::index::{SearchQuery, SessionIndex, StatsScope, search_scan, stats_scan};
use freecode_store::{Home, ListFilter, NewSession, SessionStore};

/// A writable copy of the original's home, without its thread-store database (the index makes
/// its own), and a store over it.
fn fixture_home() -> (tempfile::TempDir, SessionStore) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(".freecode");
    copy_tree(&fixtures().join("home/.freecode"), &root);
    for f in ["freecode.db", "store.json"] {
        let _ = std::fs::remove_file(root.join("state").join(f));
    }
    for d in ["sessions", "state", "rollout", "memory"] {
        let _ = std::fs::create_dir_all(root.join(d));
    }
    let store = SessionStore::with_config(Home::new(&root), crate::support::quiet()).unwrap();
    (tmp, store)
}

fn ids(v: &[freecode_core::SessionMeta]) -> Vec<String> {
    v.iter().map(|m| m.id.clone()).collect()
}

#[test]
fn listing_from_the_index_equals_the_scan() {
    let (_tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let filters = [
        ListFilter::default(),
        ListFilter {
            include_deleted: true,
            ..Default::default()
        },
        ListFilter {
            status: Some(SessionStatus::Deleted),
            ..Default::default()
        },
        ListFilter {
            status: Some(SessionStatus::Interrupted),
            ..Default::default()
        },
        ListFilter {
            project_path: Some("/home/dev/projects/my-app".into()),
            ..Default::default()
        },
        ListFilter {
            project_path: Some("C:\\Users\\john\\Projects\\win-app".into()),
            ..Default::default()
        },
        ListFilter {
            limit: Some(3),
            ..Default::default()
        },
        ListFilter {
            limit: Some(0),
            ..Default::default()
        },
        ListFilter {
            include_deleted: true,
            limit: Some(4),
            ..Default::default()
        },
        ListFilter {
            within: Some("/home/dev".into()),
            limit: Some(2),
            ..Default::default()
        },
    ];
    // A `since` between two sessions' activity: the index stops at the first older one.
    let all = store.list(&ListFilter::default()).unwrap().sessions;
    let mid = all[all.len() / 2].last_turn_at;
    let filters: Vec<ListFilter> = filters
        .into_iter()
        .chain([ListFilter {
            since: Some(mid),
            ..Default::default()
        }])
        .collect();
    for f in &filters {
        let scan = store.list(f).unwrap().sessions;
        let indexed = ix.list(f).unwrap().sessions;
        assert_eq!(indexed, scan, "{f:?}");
    }
    assert_eq!(ix.list(&ListFilter::default()).unwrap().sessions.len(), 10);
}

/// Overwrites every meta.json with garbage of the same size and puts its mtime back: a reader
/// that opened it would fail, a `stat` sees nothing changed.
fn poison_metas(root: &Path) {
    for project in std::fs::read_dir(root.join("sessions")).unwrap() {
        for session in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let meta = session.unwrap().path().join("meta.json");
            let Ok(md) = std::fs::metadata(&meta) else {
                continue;
            };
            let mtime = md.modified().unwrap();
            std::fs::write(&meta, vec![b'#'; md.len() as usize]).unwrap();
            File::options()
                .write(true)
                .open(&meta)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
    }
}

#[test]
fn a_fresh_index_lists_without_opening_a_session_file_and_sees_new_sessions() {
    let (tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let before = ix.list(&ListFilter::default()).unwrap().sessions;
    poison_metas(&tmp.path().join(".freecode"));
    assert!(
        store
            .list(&ListFilter::default())
            .unwrap()
            .sessions
            .is_empty(),
        "the files are unreadable now"
    );
    let after = ix.list(&ListFilter::default()).unwrap();
    assert_eq!(after.sessions, before, "served from the index");
    assert!(after.problems.is_empty());

    // Written behind the index's back — by another process, or by the original (plain write).
    let id = store
        .create(NewSession {
            title: "new".into(),
            project_path: "/p".into(),
            provider: "x".into(),
            model: None,
        })
        .unwrap();
    let listed = ix.list(&ListFilter::default()).unwrap().sessions;
    assert_eq!(listed.len(), before.len() + 1);
    assert_eq!(listed[0].id, id.as_str(), "newest first");
    let dir = tmp
        .path()
        .join(".freecode/sessions/home__dev__legacy/11111111-2222-4333-8444-555555555555");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("meta.json"),
        r#"{"id":"11111111-2222-4333-8444-555555555555","title":"from the original","projectPath":"/home/dev/legacy","provider":"claude","status":"active","createdAt":1,"updatedAt":1,"lastTurnAt":1,"turnCount":0}"#,
    )
    .unwrap();
    let listed = ix.list(&ListFilter::default()).unwrap().sessions;
    assert!(listed.iter().any(|m| m.title == "from the original"));
    // And a removed session disappears.
    store.purge(&id).unwrap();
    assert!(!ids(&ix.list(&ListFilter::default()).unwrap().sessions).contains(&id.to_string()));
}

#[test]
fn search_matches_the_scan_and_follows_appends_and_rewrites() {
    let (_tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let key = |h: &freecode_store::index::SearchHit| (h.session_id.clone(), h.message_id.clone());
    for text in [
        "dark",
        "toggle settings",
        "ダークモード",
        "invoice",
        "Blocked hook",
        "nothing-like-this",
    ] {
        let q = SearchQuery {
            text: text.into(),
            limit: 100,
            ..Default::default()
        };
        let mut a: Vec<_> = ix.search(&q).unwrap().iter().map(key).collect();
        let mut b: Vec<_> = search_scan(&store, &q).unwrap().0.iter().map(key).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{text}");
    }
    let q = SearchQuery {
        text: "dark".into(),
        limit: 100,
        ..Default::default()
    };
    let hits = ix.search(&q).unwrap();
    assert!(
        hits.iter().all(|h| !h.matches.is_empty()
            && h.matches.iter().all(|m| {
                let word: String = h
                    .snippet
                    .chars()
                    .skip(m.start)
                    .take(m.end - m.start)
                    .collect();
                word.to_lowercase().starts_with("dark")
            })),
        "{hits:#?}"
    );
    let scoped = ix
        .search(&SearchQuery {
            project: Some("snake".into()),
            ..q.clone()
        })
        .unwrap();
    assert!(scoped.iter().all(|h| h.project_path.contains("snake")));

    // An appended message is found at the next search (incremental: read from the watermark).
    let id = SessionId::new("68d44408-94df-4f2f-ae2e-ffffdb68e297").unwrap();
    let m = StoredMessage::new(
        "m-new",
        Role::User,
        vec![Part::text("zebra crossing")],
        1_800_000_000_000,
    );
    store.append(&id, &m).unwrap();
    let q = SearchQuery {
        text: "zebra".into(),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(
        ix.search(&q)
            .unwrap()
            .iter()
            .map(|h| h.message_id.as_str())
            .collect::<Vec<_>>(),
        ["m-new"]
    );
    let since = SearchQuery {
        since: Some(1_900_000_000_000),
        ..q.clone()
    };
    assert!(ix.search(&since).unwrap().is_empty());
    // A rewrite (compaction) re-reads the log whole: trimmed text is no longer found.
    store.compact(&id, 1, "summary").unwrap();
    let old = SearchQuery {
        text: "settings component".into(),
        limit: 10,
        ..Default::default()
    };
    assert!(
        ix.search(&old)
            .unwrap()
            .iter()
            .all(|h| h.session_id != id.as_str())
    );
    assert_eq!(ix.search(&q).unwrap().len(), 1);
}

#[test]
fn stats_match_the_scan() {
    let (_tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let s1 = SessionId::new("68d44408-94df-4f2f-ae2e-ffffdb68e297").unwrap();
    for scope in [
        StatsScope::All,
        StatsScope::Session(s1.clone()),
        StatsScope::Project("my-app".into()),
    ] {
        assert_eq!(
            ix.stats(&scope).unwrap(),
            stats_scan(&store, &scope).unwrap().0,
            "{scope:?}"
        );
    }
    let s = ix.stats(&StatsScope::Session(s1)).unwrap();
    assert_eq!(
        s.model_calls, 8,
        "five answers and three errors; the hung request has no end yet"
    );
    assert_eq!(s.model_errors, 3);
    assert_eq!(s.tools.iter().map(|t| t.calls).sum::<u64>(), 4);
    let agent = s.tools.iter().find(|t| t.tool == "agent").unwrap();
    assert_eq!(agent.p95_ms, agent.total_ms, "one call: p95 is that call");
    // By model and by day: every call counted once, its time and tokens with it.
    let all = ix.stats(&StatsScope::All).unwrap();
    assert!(!all.models.is_empty() && !all.days.is_empty());
    assert_eq!(
        all.models.iter().map(|m| m.calls).sum::<u64>(),
        all.model_calls
    );
    assert_eq!(
        all.models.iter().map(|m| m.total_ms).sum::<i64>(),
        all.model_ms
    );
    assert_eq!(
        all.models.iter().map(|m| m.input_tokens).sum::<i64>(),
        all.input_tokens
    );
    assert_eq!(
        all.days.iter().map(|d| d.model_calls).sum::<u64>(),
        all.model_calls
    );
    assert_eq!(
        all.days.iter().map(|d| d.output_tokens).sum::<i64>(),
        all.output_tokens
    );
    assert_eq!(
        all.days.iter().map(|d| d.tool_ms).sum::<i64>(),
        all.tools.iter().map(|t| t.total_ms).sum::<i64>()
    );
    assert!(all.models.iter().all(|m| !m.model.is_empty()), "{all:?}");
    assert!(all.days.windows(2).all(|w| w[0].day < w[1].day));
}

#[test]
fn an_index_from_before_span_models_reads_its_rollout_logs_again() {
    let (_tmp, store) = fixture_home();
    let want = stats_scan(&store, &StatsScope::All).unwrap().0;
    let db = {
        let mut ix = SessionIndex::open(store.home()).unwrap();
        ix.refresh(|_, _| {}).unwrap();
        ix.path().to_owned()
    };
    // The index as the release before the migration left it: no model or time per span.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "ALTER TABLE idx_model_spans DROP COLUMN model;
         ALTER TABLE idx_model_spans DROP COLUMN at;
         ALTER TABLE idx_tool_spans DROP COLUMN at;
         DELETE FROM schema_migrations WHERE version = 20261201150000;",
    )
    .unwrap();
    drop(conn);
    let mut ix = SessionIndex::open(store.home()).unwrap();
    assert_eq!(ix.stats(&StatsScope::All).unwrap(), want);
}

#[test]
fn sessions_become_threads_in_the_thread_store() {
    let (_tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    ix.refresh(|_, _| {}).unwrap();
    let (threads, _) = freecode_store::threads::open_thread_store(
        store.home(),
        freecode_store::threads::BackendChoice::Sqlite,
    );
    let s1 = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
    let t = threads.get_thread(s1).unwrap().unwrap();
    assert_eq!(t.title, "Add dark mode toggle");
    let view = threads.get_turn_items_view(s1, None).unwrap();
    assert_eq!(
        view.len(),
        3,
        "three user turns (the image caption is not a turn)"
    );
    assert_eq!(
        view[0].prompt,
        "Add a dark mode toggle to the settings page"
    );
    assert_eq!(view[0].tool_calls.len(), 4);
    assert_eq!(view[0].tool_calls[0].tool_name, "read_file");
}

#[test]
fn rebuild_gives_the_same_index() {
    let (_tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let first = ix.refresh(|_, _| {}).unwrap();
    let again = ix.refresh(|_, _| {}).unwrap();
    assert_eq!(
        (again.messages, again.events, again.metas_read),
        (0, 0, 0),
        "nothing changed: nothing read"
    );
    let mut seen = Vec::new();
    let rebuilt = ix.rebuild(|done, total| seen.push((done, total))).unwrap();
    assert_eq!(
        (rebuilt.messages, rebuilt.events),
        (first.messages, first.events)
    );
    assert_eq!(seen.last(), Some(&(first.sessions, first.sessions)));
}

#[test]
fn a_word_in_too_many_messages_returns_the_newest_unranked() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = freecode_store::StoreConfig {
        durability: freecode_store::Durability::Never,
        ..crate::support::quiet()
    };
    let store = SessionStore::with_config(Home::new(dir.path()), cfg).unwrap();
    let id = store
        .create(NewSession {
            title: "t".into(),
            project_path: "/p".into(),
            provider: "x".into(),
            model: None,
        })
        .unwrap();
    let mut w = store.writer(&id).unwrap();
    let n = freecode_store::index::RANK_LIMIT + 5;
    for i in 0..n {
        w.append(&StoredMessage::new(
            format!("m{i}"),
            Role::User,
            vec![Part::text("common word")],
            i,
        ))
        .unwrap();
    }
    drop(w);
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let hits = ix
        .search(&SearchQuery {
            text: "common".into(),
            limit: 3,
            ..Default::default()
        })
        .unwrap();
    let got: Vec<_> = hits
        .iter()
        .map(|h| (h.message_id.clone(), h.rank))
        .collect();
    let newest = |k: i64| format!("m{}", n - 1 - k);
    assert_eq!(
        got,
        vec![(newest(0), 0.0), (newest(1), 0.0), (newest(2), 0.0)]
    );
}

/// Paths of the problems, sorted.
fn problem_paths(p: &[(std::path::PathBuf, String)]) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = p.iter().map(|(path, _)| path.clone()).collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn damaged_sessions_are_skipped_and_reported_by_the_index_and_the_scan() {
    let (tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let q = SearchQuery {
        text: "invoice".into(),
        limit: 100,
        ..Default::default()
    };
    let clean_hits = ix.search(&q).unwrap();
    let clean_stats = ix.stats(&StatsScope::All).unwrap();
    let clean_list = ix.list(&ListFilter::default()).unwrap().sessions;
    assert!(ix.problems().is_empty());

    let base = tmp
        .path()
        .join(".freecode/sessions/home__dev__odd__name_h_dir");
    let log = r#"{"id":"x-1","role":"user","parts":[{"type":"text","content":"invoice again"}],"timestamp":1}
"#;
    let meta = |id: &str| {
        format!(
            r#"{{"id":"{id}","title":"t","projectPath":"/p","provider":"x","status":"active","createdAt":1,"updatedAt":1,"lastTurnAt":1,"turnCount":0}}"#
        )
    };
    // Another session's id in its meta (the id of a real one: the worst case).
    let other = base.join("aaaaaaaa-0000-4000-8000-000000000001");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("meta.json"),
        meta("68d44408-94df-4f2f-ae2e-ffffdb68e297"),
    )
    .unwrap();
    std::fs::write(other.join("messages.jsonl"), log).unwrap();
    // A directory for a log, and for a rollout log.
    let dir_log = base.join("aaaaaaaa-0000-4000-8000-000000000002");
    std::fs::create_dir_all(dir_log.join("messages.jsonl")).unwrap();
    std::fs::write(
        dir_log.join("meta.json"),
        meta("aaaaaaaa-0000-4000-8000-000000000002"),
    )
    .unwrap();
    let ev_dir = tmp
        .path()
        .join(".freecode/rollout/sessions/aaaaaaaa-0000-4000-8000-000000000002/events.jsonl");
    std::fs::create_dir_all(&ev_dir).unwrap();
    // Garbage.
    let garbage = base.join("aaaaaaaa-0000-4000-8000-000000000003");
    std::fs::create_dir_all(&garbage).unwrap();
    std::fs::write(garbage.join("meta.json"), "{{{").unwrap();
    std::fs::write(garbage.join("messages.jsonl"), log).unwrap();
    let mut want_problems_sorted = vec![
        other.join("meta.json"),
        dir_log.join("messages.jsonl"),
        garbage.join("meta.json"),
        ev_dir.clone(),
    ];
    want_problems_sorted.sort();

    let key = |h: &freecode_store::index::SearchHit| (h.session_id.clone(), h.message_id.clone());
    let keys = |v: &[freecode_store::index::SearchHit]| {
        let mut k: Vec<_> = v.iter().map(key).collect();
        k.sort();
        k
    };
    for round in 0..2 {
        // The index: the same hits, and the damaged files named (again when nothing changed).
        let hits = ix.search(&q).unwrap();
        assert_eq!(keys(&hits), keys(&clean_hits), "round {round}");
        assert_eq!(
            problem_paths(ix.problems()),
            want_problems_sorted,
            "round {round}"
        );
        let stats = ix.stats(&StatsScope::All).unwrap();
        assert_eq!(
            stats.sessions,
            clean_stats.sessions + 1,
            "the log-less one counts"
        );
        assert_eq!(
            (stats.turns, stats.messages),
            (clean_stats.turns, clean_stats.messages)
        );
        let listing = ix.list(&ListFilter::default()).unwrap();
        assert_eq!(listing.sessions.len(), clean_list.len() + 1);
        assert_eq!(
            problem_paths(&listing.problems),
            [other.join("meta.json"), garbage.join("meta.json")],
            "a listing reads metas only"
        );
    }
    let bad = ix
        .problems()
        .iter()
        .find(|(p, _)| *p == other.join("meta.json"))
        .unwrap();
    assert!(
        bad.1.contains("68d44408-94df-4f2f-ae2e-ffffdb68e297"),
        "{bad:?}"
    );

    // The scan: the same answers and the same problems.
    let (hits, problems) = search_scan(&store, &q).unwrap();
    assert_eq!(keys(&hits), keys(&clean_hits));
    assert_eq!(
        problem_paths(&problems),
        want_problems_sorted
            .iter()
            .filter(|p| **p != ev_dir)
            .cloned()
            .collect::<Vec<_>>(),
        "a search scan reads no rollout log"
    );
    let (stats, problems) = stats_scan(&store, &StatsScope::All).unwrap();
    assert_eq!(stats, ix.stats(&StatsScope::All).unwrap());
    assert_eq!(problem_paths(&problems), want_problems_sorted);
    let listing = store.list(&ListFilter::default()).unwrap();
    assert_eq!(
        listing.sessions,
        ix.list(&ListFilter::default()).unwrap().sessions
    );

    // A rebuild skips them too.
    let report = ix.rebuild(|_, _| {}).unwrap();
    assert_eq!(problem_paths(&report.problems), want_problems_sorted);
    assert_eq!(report.sessions as u64, clean_stats.sessions + 1);

    // An indexed session whose meta turns bad leaves the index, as it leaves the scan.
    let good = store.list(&ListFilter::default()).unwrap().sessions[0]
        .id
        .clone();
    let good_meta = store
        .locate(&SessionId::new(good.as_str()).unwrap())
        .unwrap()
        .meta();
    std::fs::write(&good_meta, "not json").unwrap();
    let listed = ix.list(&ListFilter::default()).unwrap();
    assert!(!ids(&listed.sessions).contains(&good));
    assert!(problem_paths(&listed.problems).contains(&good_meta));
    assert_eq!(
        ix.stats(&StatsScope::All).unwrap(),
        stats_scan(&store, &StatsScope::All).unwrap().0
    );
}

/// A session in `store` holding one user message `text`; `agent`: the meta says it was imported
/// from that agent (`importedFrom.agent`, as `freecode import` writes it).
fn session_by(store: &SessionStore, agent: Option<&str>, text: &str, at: i64) -> String {
    let id = store
        .create(NewSession {
            title: format!("by {}", agent.unwrap_or("us")),
            project_path: "/work/agents".into(),
            provider: "scripted".into(),
            model: None,
        })
        .unwrap();
    let mut w = store.writer(&id).unwrap();
    w.append(&StoredMessage::new(
        format!("m-{}", agent.unwrap_or("us")),
        Role::User,
        vec![Part::text(text)],
        at,
    ))
    .unwrap();
    if let Some(agent) = agent {
        w.update_meta(|m| {
            m.extra.insert(
                "importedFrom".into(),
                serde_json::json!({"agent": agent, "path": "/src", "sourceId": "s-1"}),
            );
        })
        .unwrap();
    }
    id.to_string()
}

#[test]
fn the_agent_filter_selects_the_sessions_an_agent_wrote_in_the_index_and_the_scan() {
    let (_tmp, store) = fixture_home();
    let codex = session_by(
        &store,
        Some("codex"),
        "quokka from codex",
        1_800_000_000_000,
    );
    let ours = session_by(&store, None, "quokka from us", 1_800_000_000_001);
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let list = |ix: &mut SessionIndex, agent: &str| {
        let f = ListFilter {
            agent: Some(agent.into()),
            ..ListFilter::default()
        };
        let a = ids(&ix.list(&f).unwrap().sessions);
        assert_eq!(a, ids(&store.list(&f).unwrap().sessions), "{agent}");
        a
    };
    assert_eq!(list(&mut ix, "codex"), [codex.as_str()]);
    let native = list(&mut ix, "freecode");
    assert!(
        native.contains(&ours) && !native.contains(&codex),
        "{native:?}"
    );
    assert_eq!(
        native.len() + 1,
        store.list(&ListFilter::default()).unwrap().sessions.len()
    );
    assert!(list(&mut ix, "gemini-cli").is_empty());

    let search = |ix: &mut SessionIndex, agent: Option<&str>| {
        let q = SearchQuery {
            text: "quokka".into(),
            limit: 10,
            agent: agent.map(str::to_owned),
            ..Default::default()
        };
        let mut a: Vec<_> = ix
            .search(&q)
            .unwrap()
            .into_iter()
            .map(|h| h.session_id)
            .collect();
        let mut b: Vec<_> = search_scan(&store, &q)
            .unwrap()
            .0
            .into_iter()
            .map(|h| h.session_id)
            .collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{agent:?}");
        a
    };
    assert_eq!(search(&mut ix, Some("codex")), [codex.as_str()]);
    assert_eq!(search(&mut ix, Some("freecode")), [ours.as_str()]);
    assert!(search(&mut ix, Some("goose")).is_empty());
    assert_eq!(search(&mut ix, None).len(), 2);
}

#[test]
fn an_index_made_before_the_agent_column_learns_each_sessions_agent() {
    let (_tmp, store) = fixture_home();
    let codex = session_by(
        &store,
        Some("codex"),
        "wombat from codex",
        1_800_000_000_000,
    );
    let mut ix = SessionIndex::open(store.home()).unwrap();
    ix.refresh(|_, _| {}).unwrap();
    let db = ix.path().to_owned();
    drop(ix);
    // The database as the version before the column left it: indexed, fresh, no agent column.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP INDEX idx_sessions_agent; ALTER TABLE idx_sessions DROP COLUMN agent;
         DELETE FROM schema_migrations WHERE version = 20261201130000;",
    )
    .unwrap();
    drop(conn);
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let hits = ix
        .search(&SearchQuery {
            text: "wombat".into(),
            limit: 10,
            agent: Some("codex".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        hits.iter()
            .map(|h| h.session_id.as_str())
            .collect::<Vec<_>>(),
        [codex.as_str()]
    );
}

/// A question finds its session by words: stop words left out, the messages holding every
/// remaining word first, then those holding most of them (naming the words they lack), in
/// the same order from the index and from the scan; a message with less than most of the
/// words is no hit.
#[test]
fn a_question_finds_its_session_by_most_of_its_words_in_the_index_and_the_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let store = SessionStore::with_config(Home::new(tmp.path()), crate::support::quiet()).unwrap();
    let all = session_by(
        &store,
        None,
        "the quokka gateway would not boot: port 4000 was taken",
        1_800_000_000_000,
    );
    let most = session_by(
        &store,
        Some("codex"),
        "Quokka proxy did not boot after the upgrade",
        1_800_000_000_001,
    );
    let one = session_by(
        &store,
        Some("goose"),
        "the gateway is up again",
        1_800_000_000_002,
    );
    let mut ix = SessionIndex::open(store.home()).unwrap();
    let q = SearchQuery {
        text: "Why did the Quokka gateway not boot?".into(),
        limit: 10,
        ..Default::default()
    };
    let from_index = ix.search(&q).unwrap();
    let (from_scan, _) = search_scan(&store, &q).unwrap();
    let view = |hits: &[freecode_store::index::SearchHit]| -> Vec<(String, Vec<String>, String)> {
        hits.iter()
            .map(|h| {
                (
                    h.session_id.clone(),
                    h.missing.clone(),
                    format!("{:.6}", h.rank),
                )
            })
            .collect()
    };
    assert_eq!(view(&from_index), view(&from_scan));
    let ids: Vec<&str> = from_index.iter().map(|h| h.session_id.as_str()).collect();
    assert_eq!(ids, [all.as_str(), most.as_str()], "{from_index:#?}");
    assert!(from_index[0].missing.is_empty());
    assert_eq!(from_index[1].missing, ["gateway"]);
    assert_eq!(
        from_index[1].why().as_deref(),
        Some("missing: gateway"),
        "{:?}",
        from_index[1]
    );
    assert!(!ids.contains(&one.as_str()));
    // Stop words are not highlighted; the words asked for are.
    let hit = &from_index[0];
    let marked: Vec<String> = hit
        .matches
        .iter()
        .map(|m| {
            hit.snippet
                .chars()
                .skip(m.start)
                .take(m.end - m.start)
                .collect()
        })
        .collect();
    assert_eq!(marked, ["quokka", "gateway", "boot"], "{hit:?}");

    // Four words (three needed): messages holding three and holding all four, the same from
    // the index and the scan, ranks and all.
    let four = SearchQuery {
        text: "quokka gateway boot port".into(),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(
        view(&ix.search(&four).unwrap()),
        view(&search_scan(&store, &four).unwrap().0)
    );
    let wide = SearchQuery {
        text: "quokka proxy boot upgrade gateway".into(),
        limit: 10,
        ..Default::default()
    };
    let a = ix.search(&wide).unwrap();
    assert_eq!(view(&a), view(&search_scan(&store, &wide).unwrap().0));
    assert_eq!(a.len(), 2, "{a:#?}");

    // With room for only the full match, the partial one is not asked for.
    let first = ix
        .search(&SearchQuery {
            limit: 1,
            ..q.clone()
        })
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].session_id, all);
    // Two words: both are needed, as before.
    let two = SearchQuery {
        text: "quokka gateway".into(),
        limit: 10,
        ..Default::default()
    };
    let ids: Vec<String> = ix
        .search(&two)
        .unwrap()
        .into_iter()
        .map(|h| h.session_id)
        .collect();
    assert_eq!(ids, [all]);
    // Only stop words: they are the words then.
    let stop = SearchQuery {
        text: "is up".into(),
        limit: 10,
        ..Default::default()
    };
    let ids: Vec<String> = ix
        .search(&stop)
        .unwrap()
        .into_iter()
        .map(|h| h.session_id)
        .collect();
    assert_eq!(ids, [one]);
}

/// A search by meaning scores the vectors read ahead (`vectors_ahead`, while a front end's
/// model loads) exactly as the vectors it reads itself, and a search by both fuses the words'
/// hits found ahead (`words_ahead`) as those it finds: the same hits in the same order, in every
/// scope; vectors read ahead for another embedder, another scope or past the bound, and words
/// found ahead for another query are not used.
#[test]
fn what_a_search_finds_ahead_gives_the_same_hits_as_what_it_finds_itself() {
    use freecode_store::index::{Meaning, SearchMode};

    let (_tmp, store) = fixture_home();
    let mut ix = SessionIndex::open(store.home()).unwrap();
    ix.refresh(|_, _| {}).unwrap();
    ix.sync_chunks("test-model", 1000).unwrap();
    // A vector of 16 dimensions for every chunk, made from its text (no model needed).
    let pending = ix.pending_chunks(10_000).unwrap();
    assert!(pending.len() > 5, "{}", pending.len());
    let vector = |seed: u64| -> Vec<f32> {
        let mut x = seed | 1;
        let v: Vec<f32> = (0..16)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.into_iter().map(|a| a / n).collect()
    };
    let rows: Vec<(i64, i64, Vec<f32>)> = pending
        .iter()
        .map(|p| (p.id, p.hash, vector(p.hash as u64)))
        .collect();
    assert_eq!(ix.put_vectors(&rows).unwrap(), rows.len());

    let scopes = [
        SearchQuery {
            text: "dark mode toggle".into(),
            limit: 10,
            ..SearchQuery::default()
        },
        SearchQuery {
            text: "rounding".into(),
            limit: 3,
            all: true,
            ..SearchQuery::default()
        },
        SearchQuery {
            text: "auth".into(),
            limit: 10,
            project: Some("/home/dev/projects/my-app".into()),
            ..SearchQuery::default()
        },
    ];
    for (n, q) in scopes.iter().enumerate() {
        let query = vector(1_000 + n as u64);
        let ahead = ix.vectors_ahead(q, 100_000).unwrap().unwrap();
        let from_another_connection = {
            let other_ix = SessionIndex::open(store.home()).unwrap();
            other_ix.vectors_ahead(q, 100_000).unwrap().unwrap()
        };
        let other_scope = SearchQuery {
            project: Some("/home/dev/work/snake_case_repo".into()),
            ..q.clone()
        };
        let elsewhere = ix.vectors_ahead(&other_scope, 100_000).unwrap().unwrap();
        let meaning = |vectors_ahead| Meaning {
            model: "test-model",
            vector: &query,
            strong_similarity: -1.0,
            vectors_ahead,
            words_ahead: None,
        };
        for mode in [SearchMode::Meaning, SearchMode::Both] {
            let read = ix.search_mode(q, mode, Some(meaning(None))).unwrap();
            let scored = ix
                .search_mode(q, mode, Some(meaning(Some(&ahead))))
                .unwrap();
            let key = |hits: &[freecode_store::index::SearchHit]| -> Vec<(String, String, u64)> {
                hits.iter()
                    .map(|h| (h.session_id.clone(), h.message_id.clone(), h.rank.to_bits()))
                    .collect()
            };
            assert!(!read.is_empty(), "{q:?}");
            assert_eq!(key(&read), key(&scored), "{q:?} {mode:?}");
            assert_eq!(
                key(&read),
                key(&ix
                    .search_mode(q, mode, Some(meaning(Some(&from_another_connection))))
                    .unwrap())
            );
            // Vectors read ahead for another scope are not used.
            assert_eq!(
                key(&read),
                key(&ix
                    .search_mode(q, mode, Some(meaning(Some(&elsewhere))))
                    .unwrap()),
                "{q:?} {mode:?}"
            );
            // The words' hits found ahead fuse as those the search finds; those of another
            // query are not used.
            let other_query = SearchQuery {
                text: "toggle".into(),
                ..q.clone()
            };
            for words in [
                ix.words_ahead(q).unwrap(),
                ix.words_ahead(&other_query).unwrap(),
            ] {
                let m = Meaning {
                    words_ahead: Some(&words),
                    ..meaning(Some(&ahead))
                };
                assert_eq!(
                    key(&read),
                    key(&ix.search_mode(q, mode, Some(m)).unwrap()),
                    "{q:?} {mode:?}"
                );
            }
        }
    }
    // Past the bound: nothing read ahead.
    assert!(ix.vectors_ahead(&scopes[0], 2).unwrap().is_none());
    // Vectors of another embedder read ahead are not scored: a search for this one finds what
    // its own reading finds.
    let ahead = ix.vectors_ahead(&scopes[0], 100_000).unwrap().unwrap();
    ix.sync_chunks("another-model", 1000).unwrap();
    let query = vector(7);
    let m = Meaning {
        model: "another-model",
        vector: &query,
        strong_similarity: -1.0,
        vectors_ahead: Some(&ahead),
        words_ahead: None,
    };
    assert!(
        ix.search_mode(&scopes[0], SearchMode::Meaning, Some(m))
            .unwrap()
            .is_empty(),
        "no vector of another-model yet"
    );
}
