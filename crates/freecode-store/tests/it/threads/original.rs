//! The thread store over the original's own stores (its JSON file and its SQLite database, as it wrote them): both backends answer as the original did, a rewrite keeps its bytes, and auto adopts its database.

use super::*;

pub(super) fn expected(rel: &str) -> Value {
    let p = fixtures().join("expected/thread-store").join(rel);
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// A writable copy of the original's `state/` (never the shared directory itself).
pub(super) fn state_copy() -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join(".freecode/state");
    std::fs::create_dir_all(&state).unwrap();
    for name in ["store.json", "freecode.db"] {
        let to = state.join(name);
        std::fs::copy(fixtures().join("home/.freecode/state").join(name), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    (tmp, state)
}

pub(super) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

/// The original's SQLite answers with NULL columns as `null`; we read NULL as absent.
pub(super) fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

pub(super) fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().any(has_null),
        Value::Array(a) => a.iter().any(has_null),
        _ => false,
    }
}

/// Per-thread and per-turn expected files: (id, kind) from `<id>.<kind>.json`.
pub(super) fn expected_files(dir: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        std::fs::read_dir(fixtures().join("expected/thread-store").join(dir))
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".json").unwrap();
                let (id, kind) = stem.split_once('.').unwrap();
                (id.to_owned(), kind.to_owned())
            })
            .collect();
    v.sort();
    v
}

/// The list-shaped queries that both expected directories hold.
pub(super) fn list_queries(s: &dyn ThreadStore) -> Vec<(&'static str, Value)> {
    let list = |f: ThreadFilter| to_value(&s.list_threads(&f).unwrap());
    vec![
        ("list.json", list(ThreadFilter::default())),
        (
            "list.status-archived.json",
            list(ThreadFilter {
                status: Some(ThreadStatus::Archived),
                ..Default::default()
            }),
        ),
        (
            "list.status-active.json",
            to_value(&s.active_threads().unwrap()),
        ),
        (
            "list.project-my-app.json",
            list(ThreadFilter {
                project_path: Some("/home/dev/projects/my-app".into()),
                ..Default::default()
            }),
        ),
        (
            "list.provider-gemini.json",
            list(ThreadFilter {
                provider: Some("gemini".into()),
                ..Default::default()
            }),
        ),
        (
            "list.limit2-offset1.json",
            list(ThreadFilter {
                limit: Some(2),
                offset: Some(1),
                ..Default::default()
            }),
        ),
        (
            "recentForProject-snake_case_repo-limit1.json",
            to_value(
                &s.recent_for_project("/home/dev/work/snake_case_repo", 1)
                    .unwrap(),
            ),
        ),
    ]
}

pub(super) fn search_ids(s: &dyn ThreadStore, q: &str) -> Vec<String> {
    s.search_threads(q)
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect()
}

pub(super) fn expected_ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
pub(super) fn json_backend_answers_as_the_original_json_store() {
    let (_tmp, state) = state_copy();
    let s = JsonThreadStore::open(state.join("store.json"));
    for (file, ours) in list_queries(&s) {
        assert_eq!(ours, expected(&format!("json/{file}")), "{file}");
    }
    assert_eq!(
        to_value(&s.get_thread("thread-0-missing").unwrap()),
        expected("json/get-missing.json")
    );

    for (id, kind) in expected_files("json/threads") {
        let want = expected(&format!("json/threads/{id}.{kind}.json"));
        let ours = match kind.as_str() {
            "get" => to_value(&s.get_thread(&id).unwrap()),
            "turns" => to_value(&s.get_turns_for_thread(&id).unwrap()),
            "turnItemsView" => to_value(&s.get_turn_items_view(&id, None).unwrap()),
            "turnItemsView-limit1" => to_value(&s.get_turn_items_view(&id, Some(1)).unwrap()),
            other => panic!("unexpected expected file kind {other}"),
        };
        assert_eq!(ours, want, "{id}.{kind}");
    }
    for (id, kind) in expected_files("json/turns") {
        assert_eq!(kind, "getTurn");
        assert_eq!(
            to_value(&s.get_turn(&id).unwrap()),
            expected(&format!("json/turns/{id}.getTurn.json")),
            "{id}"
        );
    }

    let listed = s.list_threads(&ThreadFilter::default()).unwrap();
    for case in expected("json/search.json").as_array().unwrap() {
        let q = case["query"].as_str().unwrap();
        let want = expected_ids(&case["result"]);
        let ours = search_ids(&s, q);
        // Same matches (the original's JSON search was already literal and Unicode-aware)...
        let mut a = ours.clone();
        let mut b = want.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "search {q:?}");
        // ...but §19.39 (backends disagree on order): the original's JSON returned insertion
        // order, its SQLite lastTurnAt order; both backends now return list order.
        let in_list_order: Vec<String> = listed
            .iter()
            .filter(|t| ours.contains(&t.id))
            .map(|t| t.id.clone())
            .collect();
        assert_eq!(ours, in_list_order, "search {q:?}");
        if q == "snake" || q.is_empty() {
            assert_ne!(
                ours, want,
                "search {q:?}: the original's insertion order differs"
            );
        }
    }

    // §19.39: the original's JSON store never maintained toolCallCount (0 with two stored
    // calls); adding a call now raises it to at least the number of stored calls.
    let turn = "turn-1768470213944-i7k0n";
    assert_eq!(s.get_turn(turn).unwrap().unwrap().tool_call_count, 0);
    s.add_tool_call(turn, NewToolCall::new("grep", json!({"q": "x"})))
        .unwrap();
    let t = s.get_turn(turn).unwrap().unwrap();
    assert_eq!(t.tool_call_count, 3);
    assert_eq!(t.tool_calls.unwrap()[2].sequence, 3);
}

#[test]
pub(super) fn json_rewrite_of_the_original_file_keeps_its_bytes() {
    let (_tmp, state) = state_copy();
    let path = state.join("store.json");
    let original = std::fs::read(&path).unwrap();
    let s = JsonThreadStore::open(&path).with_sync(false);
    // A put of a thread as it is changes nothing but metadata.lastUpdated.
    let t = s.get_thread("thread-1768470212944-7tibw").unwrap().unwrap();
    s.put_thread(&t).unwrap();
    let after = std::fs::read(&path).unwrap();
    let mut want: Value = serde_json::from_slice(&original).unwrap();
    let got: Value = serde_json::from_slice(&after).unwrap();
    want["metadata"]["lastUpdated"] = got["metadata"]["lastUpdated"].clone();
    assert_eq!(got, want);
    // Byte for byte the original's file, but for the new timestamp.
    let stamp = got["metadata"]["lastUpdated"].as_i64().unwrap();
    let original = String::from_utf8(original).unwrap().replace(
        "\"lastUpdated\": 1768470256244",
        &format!("\"lastUpdated\": {stamp}"),
    );
    assert_eq!(String::from_utf8(after).unwrap(), original);
}

#[test]
pub(super) fn sqlite_backend_answers_as_the_original_sqlite_store() {
    let (_tmp, state) = state_copy();
    let db = state.join("freecode.db");
    // The original's database has no schema_migrations: it is adopted as is.
    {
        let raw = rusqlite::Connection::open(&db).unwrap();
        let n: i64 = raw
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'schema_migrations'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0);
    }
    let s = SqliteThreadStore::open(&db).unwrap();
    assert_eq!(migrate::recorded(s.connection()).unwrap().len(), 1);
    let counts: (i64, i64, i64) = s
        .connection()
        .query_row(
            "SELECT (SELECT COUNT(*) FROM threads), (SELECT COUNT(*) FROM turns),
                    (SELECT COUNT(*) FROM tool_calls)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(counts, (5, 3, 3));

    // Lists: equal once the original's NULL columns (goal, goalStatus, goalUpdatedAt) are read
    // as absent, which is how we read NULL.
    for (file, ours) in list_queries(&s) {
        let want = expected(&format!("sqlite/{file}"));
        assert!(!has_null(&ours), "{file}: we never answer null");
        assert_eq!(ours, strip_nulls(&want), "{file}");
    }
    assert_eq!(
        to_value(&s.get_thread("thread-0-missing").unwrap()),
        expected("sqlite/get-missing.json")
    );

    for (id, kind) in expected_files("sqlite/threads") {
        let want = strip_nulls(&expected(&format!("sqlite/threads/{id}.{kind}.json")));
        let full_view = strip_nulls(&expected(&format!(
            "sqlite/threads/{id}.turnItemsView.json"
        )));
        match kind.as_str() {
            "get" => assert_eq!(to_value(&s.get_thread(&id).unwrap()), want, "{id}.get"),
            "turns" => {
                // §19.39 (backends disagree): the original's SQLite getTurnsForThread had no tool
                // calls; ours returns them (as JSON did). Without them the rows are equal.
                let ours = s.get_turns_for_thread(&id).unwrap();
                let bare: Vec<Value> = ours
                    .iter()
                    .map(|t| {
                        let mut v = to_value(t);
                        v.as_object_mut().unwrap().remove("toolCalls");
                        v
                    })
                    .collect();
                assert_eq!(Value::Array(bare), want, "{id}.turns");
                for (t, view) in ours.iter().zip(full_view.as_array().unwrap()) {
                    let got: Vec<&str> = t
                        .tool_calls
                        .as_ref()
                        .unwrap()
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect();
                    let want: Vec<&str> = view["toolCalls"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["id"].as_str().unwrap())
                        .collect();
                    assert_eq!(got, want, "{id} turn {} calls", t.turn_number);
                }
            }
            "turnItemsView" => assert_eq!(
                to_value(&s.get_turn_items_view(&id, None).unwrap()),
                want,
                "{id}.turnItemsView"
            ),
            "turnItemsView-limit1" => {
                let ours = to_value(&s.get_turn_items_view(&id, Some(1)).unwrap());
                // §19.39: the original limited joined rows (turn × call), so a first turn with
                // two calls showed one; the limit now counts turns.
                let first_turn = Value::Array(
                    full_view
                        .as_array()
                        .unwrap()
                        .iter()
                        .take(1)
                        .cloned()
                        .collect(),
                );
                assert_eq!(ours, first_turn, "{id}.turnItemsView-limit1");
                if id == "thread-1768470328244-rinbt" {
                    assert_ne!(ours, want);
                    assert_eq!(want[0]["toolCalls"].as_array().unwrap().len(), 1);
                    assert_eq!(ours[0]["toolCalls"].as_array().unwrap().len(), 2);
                } else {
                    assert_eq!(ours, want, "{id}.turnItemsView-limit1");
                }
            }
            other => panic!("unexpected expected file kind {other}"),
        }
    }
    for (id, kind) in expected_files("sqlite/turns") {
        assert_eq!(kind, "getTurn");
        let want = strip_nulls(&expected(&format!("sqlite/turns/{id}.getTurn.json")));
        let mut ours = to_value(&s.get_turn(&id).unwrap());
        // §19.39 (backends disagree): SQLite getTurn now carries the tool calls too.
        let calls = ours.as_object_mut().unwrap().remove("toolCalls").unwrap();
        assert!(calls.is_array());
        assert_eq!(ours, want, "{id}");
    }

    // The original NULLed a zero duration at write time (§14.4 "falsy → null"); what it stored
    // reads back as absent. (New writes keep 0: see empty_strings_and_zero_durations_are_kept.)
    let bash = s
        .get_turn("turn-1768470329244-8c1ld")
        .unwrap()
        .unwrap()
        .tool_calls
        .unwrap();
    assert_eq!(
        (bash[1].tool_name.as_str(), bash[1].duration_ms),
        ("bash", None)
    );

    for case in expected("sqlite/search.json").as_array().unwrap() {
        let q = case["query"].as_str().unwrap();
        let want = expected_ids(&case["result"]);
        let ours = search_ids(&s, q);
        match q {
            // §19.39: `%` and `_` were LIKE wildcards in the original's SQLite search.
            "snake%case" | "sn_ke" => {
                assert_eq!(want.len(), 2, "{q:?}");
                assert!(ours.is_empty(), "{q:?}: {ours:?}");
            }
            // §19.39: LIKE folded ASCII only, so no case of "Üñíçødé" matched; it does now.
            "üñíçødé" | "ÜÑÍÇØDÉ" => {
                assert!(want.is_empty(), "{q:?}");
                assert_eq!(ours, ["thread-1768470369544-7jszo"], "{q:?}");
            }
            _ => assert_eq!(ours, want, "search {q:?}"),
        }
    }

    // §19.39: the original's SQLite never stored goalUpdatedAt (its goal-status update left it
    // null); goal tracking now keeps it.
    let goal = "thread-1768470328244-rinbt";
    assert_eq!(s.get_thread(goal).unwrap().unwrap().goal_updated_at, None);
    s.update_goal_status(goal, GoalStatus::Completed).unwrap();
    assert!(
        s.get_thread(goal)
            .unwrap()
            .unwrap()
            .goal_updated_at
            .is_some()
    );
    // §19.39: turnCount is a count of turns (the original stored the new turn's number).
    s.create_turn(NewTurn::new(goal, 7, "seventh")).unwrap();
    assert_eq!(s.get_thread(goal).unwrap().unwrap().turn_count, 3);
}

#[test]
pub(super) fn both_backends_answer_the_same_over_the_original_stores() {
    // The two fixture stores hold the same scenario under different ids and times; mapped by
    // title, every search and list answers identically on both backends.
    let (_tmp, state) = state_copy();
    let json = JsonThreadStore::open(state.join("store.json"));
    let sql = SqliteThreadStore::open(&state.join("freecode.db")).unwrap();
    let titles = |v: Vec<StoredThread>| v.into_iter().map(|t| t.title).collect::<Vec<_>>();
    for case in expected("json/search.json").as_array().unwrap() {
        let q = case["query"].as_str().unwrap();
        assert_eq!(
            titles(json.search_threads(q).unwrap()),
            titles(sql.search_threads(q).unwrap()),
            "search {q:?}"
        );
    }
    assert_eq!(
        titles(json.list_threads(&ThreadFilter::default()).unwrap()),
        titles(sql.list_threads(&ThreadFilter::default()).unwrap())
    );
}

#[test]
pub(super) fn auto_adopts_the_original_database() {
    let (tmp, _state) = state_copy();
    let home = Home::new(tmp.path().join(".freecode"));
    let (s, sel) = open_thread_store(&home, BackendChoice::Auto);
    assert_eq!(sel.kind, BackendKind::Sqlite, "{}", sel.reason);
    assert_eq!(s.list_threads(&ThreadFilter::default()).unwrap().len(), 5);
    assert!(corrupt_files(&home.state_dir()).is_empty());
}
