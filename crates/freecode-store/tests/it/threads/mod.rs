//! The thread store (SPEC §14): one suite run against both backends, the §19.39 fixes, two
//! instances on one store, the upserts, each backend's file format, backend selection and
//! recovery, and compatibility with the original's stores
//! (`../shared/fixtures/reference/home/.freecode/state` and `expected/thread-store/**`).
//!
//! Where our fixed behaviour deliberately differs from the original's recorded answer, the test
//! asserts both the original's value and ours, naming the §19.39 item.

use crate::support::fixtures;
use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use freecode_store::threads::{
    BackendChoice, BackendKind, GoalStatus, JsonThreadStore, NewThread, NewToolCall, NewTurn,
    SqliteThreadStore, StoredThread, StoredToolCall, StoredTurn, ThreadFilter, ThreadStatus,
    ThreadStore, ThreadUpdate, migrate, open_thread_store,
};
use freecode_store::{Home, StoreError};
use serde_json::{Map, Value, json};
use tempfile::TempDir;

mod original;

// ---- harness ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Json,
    Sqlite,
}

/// A throw-away `state/` directory and a way to open the backend over it (any number of times:
/// each call is a separate instance, as another process would have).
struct Fx {
    tmp: TempDir,
    backend: Backend,
}

impl Fx {
    fn new(backend: Backend) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("freecode-threads-")
            .tempdir()
            .unwrap();
        Self { tmp, backend }
    }

    fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn open(&self) -> Box<dyn ThreadStore + Send> {
        open_backend(self.backend, &self.state())
    }
}

fn open_backend(backend: Backend, state: &Path) -> Box<dyn ThreadStore + Send> {
    match backend {
        Backend::Json => Box::new(JsonThreadStore::open(state.join("store.json")).with_sync(false)),
        Backend::Sqlite => {
            std::fs::create_dir_all(state).unwrap();
            Box::new(SqliteThreadStore::open(&state.join("freecode.db")).unwrap())
        }
    }
}

/// Runs a suite function against each backend.
macro_rules! both_backends {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn json() {
                super::$name(super::Backend::Json);
            }
            #[test]
            fn sqlite() {
                super::$name(super::Backend::Sqlite);
            }
        }
    )+};
}

both_backends!(
    create_and_get,
    update_applies_every_field,
    archive_and_goal_tracking,
    delete_removes_turns_and_calls,
    list_order_filters_and_paging,
    search_is_literal_and_unicode_case_insensitive,
    turns_count_order_and_foreign_keys,
    tool_calls_sequence_and_count,
    turn_items_view_limit_counts_turns,
    empty_strings_and_zero_durations_are_kept,
    put_thread_upserts,
    put_turn_upserts_and_replaces_calls,
    ids_are_unique_and_shaped,
    two_instances_see_each_other,
    two_instances_write_concurrently,
);

fn thread(store: &dyn ThreadStore, id: &str) -> StoredThread {
    store.get_thread(id).unwrap().unwrap()
}

fn new_thread(title: &str, project: &str, provider: &str) -> NewThread {
    NewThread::new(title, project, provider, None)
}

fn ids(ts: &[StoredThread]) -> Vec<&str> {
    ts.iter().map(|t| t.id.as_str()).collect()
}

fn tick() {
    std::thread::sleep(std::time::Duration::from_millis(3));
}

fn is_not_found(e: &StoreError, id: &str) -> bool {
    matches!(e, StoreError::NotFound { id: got } if got == id)
}

fn id_shape(id: &str, prefix: &str) -> bool {
    let Some(rest) = id.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
        return false;
    };
    let Some((ms, tail)) = rest.split_once('-') else {
        return false;
    };
    ms.len() >= 13
        && ms.bytes().all(|b| b.is_ascii_digit())
        && tail.len() == 5
        && tail
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

// ---- the shared suite ------------------------------------------------------------------------

fn create_and_get(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    assert_eq!(
        s.kind(),
        match b {
            Backend::Json => BackendKind::Json,
            Backend::Sqlite => BackendKind::Sqlite,
        }
    );
    let before = freecode_store::now_ms();
    let id = s
        .create_thread(NewThread::new(
            "Add dark mode",
            "/p/app",
            "anthropic",
            Some("Ship it".into()),
        ))
        .unwrap();
    assert!(id_shape(&id, "thread"), "{id}");
    let t = thread(&*s, &id);
    assert_eq!(t.id, id);
    assert_eq!(t.title, "Add dark mode");
    assert_eq!(t.project_path, "/p/app");
    assert_eq!(t.provider, "anthropic");
    assert_eq!(t.goal.as_deref(), Some("Ship it"));
    assert_eq!(t.goal_status, Some(GoalStatus::Pending));
    assert_eq!(t.status, ThreadStatus::Active);
    assert_eq!((t.turn_count, t.iteration_count), (0, 0));
    assert!(t.created_at >= before);
    assert_eq!(t.updated_at, t.created_at);
    assert_eq!(t.last_turn_at, t.created_at);
    assert_eq!(t.goal_updated_at, None);
    // camelCase, absent optionals left out.
    let v = serde_json::to_value(&t).unwrap();
    let keys: HashSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        HashSet::from([
            "title",
            "projectPath",
            "provider",
            "goal",
            "goalStatus",
            "status",
            "turnCount",
            "iterationCount",
            "lastTurnAt",
            "id",
            "createdAt",
            "updatedAt"
        ])
    );

    // A caller-given lastTurnAt is kept (both backends; SQLite used to force now).
    let id2 = s
        .create_thread(NewThread {
            last_turn_at: Some(42),
            ..new_thread("old", "/p/app", "openai")
        })
        .unwrap();
    let t2 = thread(&*s, &id2);
    assert_eq!(t2.last_turn_at, 42);
    assert_eq!(t2.goal, None);
    assert_eq!(t2.goal_status, None);
    let v = serde_json::to_value(&t2).unwrap();
    assert!(v.get("goal").is_none() && v.get("goalStatus").is_none());

    assert_eq!(s.get_thread("thread-0-nope0").unwrap(), None);
    assert_eq!(s.get_turn("turn-0-nope0").unwrap(), None);
    assert!(s.get_turns_for_thread("thread-0-nope0").unwrap().is_empty());
    assert!(
        s.get_turn_items_view("thread-0-nope0", None)
            .unwrap()
            .is_empty()
    );
}

fn update_applies_every_field(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let id = s
        .create_thread(NewThread::new("t", "/a", "anthropic", Some("g".into())))
        .unwrap();
    let created = thread(&*s, &id);
    tick();
    // §19.39: SQLite ignored projectPath, provider and goalUpdatedAt; every field applies now.
    let up = ThreadUpdate {
        title: Some("renamed".into()),
        status: Some(ThreadStatus::Archived),
        project_path: Some("/b".into()),
        provider: Some("gemini".into()),
        turn_count: Some(9),
        iteration_count: Some(7),
        last_turn_at: Some(123),
        goal: Some(Some("new goal".into())),
        goal_status: Some(Some(GoalStatus::Completed)),
        goal_updated_at: Some(Some(456)),
    };
    assert!(s.update_thread(&id, &up).unwrap());
    let t = thread(&*s, &id);
    assert_eq!(t.title, "renamed");
    assert_eq!(t.status, ThreadStatus::Archived);
    assert_eq!(t.project_path, "/b");
    assert_eq!(t.provider, "gemini");
    assert_eq!((t.turn_count, t.iteration_count), (9, 7));
    assert_eq!(t.last_turn_at, 123);
    assert_eq!(t.goal.as_deref(), Some("new goal"));
    assert_eq!(t.goal_status, Some(GoalStatus::Completed));
    assert_eq!(t.goal_updated_at, Some(456));
    assert_eq!(
        (t.id.as_str(), t.created_at),
        (id.as_str(), created.created_at)
    );
    assert!(t.updated_at > created.updated_at);

    // Some(None) clears an optional field; None leaves it.
    let clear = ThreadUpdate {
        goal: Some(None),
        goal_status: Some(None),
        goal_updated_at: Some(None),
        ..ThreadUpdate::default()
    };
    assert!(s.update_thread(&id, &clear).unwrap());
    let t = thread(&*s, &id);
    assert_eq!(
        (t.goal, t.goal_status, t.goal_updated_at),
        (None, None, None)
    );
    assert_eq!(t.title, "renamed");

    // A patch in the original's JSON form.
    let patch: ThreadUpdate =
        serde_json::from_value(json!({"title": "from json", "goal": null, "turnCount": 2}))
            .unwrap();
    assert_eq!(patch.goal, Some(None));
    assert!(s.update_thread(&id, &patch).unwrap());
    assert_eq!(thread(&*s, &id).title, "from json");

    // Unknown id: no-op.
    assert!(!s.update_thread("thread-0-nope0", &up).unwrap());
    assert_eq!(s.get_thread("thread-0-nope0").unwrap(), None);
    assert_eq!(s.list_threads(&ThreadFilter::default()).unwrap().len(), 1);
}

fn archive_and_goal_tracking(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let id = s
        .create_thread(NewThread::new("t", "/a", "x", Some("goal".into())))
        .unwrap();
    assert!(s.archive_thread(&id).unwrap());
    assert_eq!(thread(&*s, &id).status, ThreadStatus::Archived);
    assert!(!s.archive_thread("thread-0-nope0").unwrap());
    let before = freecode_store::now_ms();
    // §19.39: goal tracking's timestamp was lost on SQLite.
    assert!(s.update_goal_status(&id, GoalStatus::Active).unwrap());
    let t = thread(&*s, &id);
    assert_eq!(t.goal_status, Some(GoalStatus::Active));
    assert!(t.goal_updated_at.unwrap() >= before);
    assert!(t.updated_at >= t.goal_updated_at.unwrap());
    assert!(
        !s.update_goal_status("thread-0-nope0", GoalStatus::Failed)
            .unwrap()
    );
}

fn delete_removes_turns_and_calls(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let keep = s.create_thread(new_thread("keep", "/a", "x")).unwrap();
    let gone = s.create_thread(new_thread("gone", "/a", "x")).unwrap();
    let kt = s.create_turn(NewTurn::new(&keep, 1, "k")).unwrap();
    let kc = s
        .add_tool_call(&kt, NewToolCall::new("read", json!({})))
        .unwrap();
    let gt1 = s.create_turn(NewTurn::new(&gone, 1, "g1")).unwrap();
    let gt2 = s.create_turn(NewTurn::new(&gone, 2, "g2")).unwrap();
    let gc = s
        .add_tool_call(&gt1, NewToolCall::new("bash", json!({"c": 1})))
        .unwrap();

    assert!(s.delete_thread(&gone).unwrap());
    assert_eq!(s.get_thread(&gone).unwrap(), None);
    assert_eq!(s.get_turn(&gt1).unwrap(), None);
    assert_eq!(s.get_turn(&gt2).unwrap(), None);
    assert!(s.get_turns_for_thread(&gone).unwrap().is_empty());
    assert!(!s.delete_thread(&gone).unwrap());
    // The other thread is untouched.
    let k = s.get_turn(&kt).unwrap().unwrap();
    assert_eq!(k.tool_calls.unwrap()[0].id, kc);
    assert_eq!(
        ids(&s.list_threads(&ThreadFilter::default()).unwrap()),
        [keep.as_str()]
    );
    // The removed call is gone too: its id can be put under another turn as a new call.
    let mut t = s.get_turn(&kt).unwrap().unwrap();
    t.tool_calls.as_mut().unwrap().push(call(&gc, 2, "x"));
    s.put_turn(&t).unwrap();
    assert_eq!(
        s.get_turn(&kt).unwrap().unwrap().tool_calls.unwrap().len(),
        2
    );
}

fn mk(store: &dyn ThreadStore, title: &str, project: &str, provider: &str, last: i64) -> String {
    store
        .create_thread(NewThread {
            last_turn_at: Some(last),
            ..new_thread(title, project, provider)
        })
        .unwrap()
}

fn list_order_filters_and_paging(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let a = mk(&*s, "a", "/p1", "anthropic", 300);
    let bb = mk(&*s, "b", "/p2", "gemini", 100);
    let c = mk(&*s, "c", "/p1", "gemini", 200);
    let d = mk(&*s, "d", "/p1", "anthropic", 400);
    s.archive_thread(&c).unwrap();
    let list = |f: ThreadFilter| {
        s.list_threads(&f)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(ThreadFilter::default()),
        [d.as_str(), a.as_str(), c.as_str(), bb.as_str()]
    );
    assert_eq!(
        list(ThreadFilter {
            status: Some(ThreadStatus::Archived),
            ..Default::default()
        }),
        [c.as_str()]
    );
    assert_eq!(
        ids(&s.active_threads().unwrap()),
        [d.as_str(), a.as_str(), bb.as_str()]
    );
    assert_eq!(
        list(ThreadFilter {
            project_path: Some("/p1".into()),
            ..Default::default()
        }),
        [d.as_str(), a.as_str(), c.as_str()]
    );
    assert_eq!(
        list(ThreadFilter {
            provider: Some("gemini".into()),
            ..Default::default()
        }),
        [c.as_str(), bb.as_str()]
    );
    assert_eq!(
        list(ThreadFilter {
            project_path: Some("/p1".into()),
            provider: Some("anthropic".into()),
            status: Some(ThreadStatus::Active),
            ..Default::default()
        }),
        [d.as_str(), a.as_str()]
    );
    assert_eq!(
        list(ThreadFilter {
            limit: Some(2),
            offset: Some(1),
            ..Default::default()
        }),
        [a.as_str(), c.as_str()]
    );
    // §19.39: offset without limit was invalid SQL on SQLite.
    assert_eq!(
        list(ThreadFilter {
            offset: Some(2),
            ..Default::default()
        }),
        [c.as_str(), bb.as_str()]
    );
    // limit 0 means "no limit" (both backends of the original agree).
    assert_eq!(
        list(ThreadFilter {
            limit: Some(0),
            ..Default::default()
        })
        .len(),
        4
    );
    assert!(
        list(ThreadFilter {
            offset: Some(10),
            ..Default::default()
        })
        .is_empty()
    );
    assert_eq!(
        ids(&s.recent_for_project("/p1", 2).unwrap()),
        [d.as_str(), a.as_str()]
    );
    assert!(s.recent_for_project("/none", 10).unwrap().is_empty());
    // Ties on lastTurnAt: createdAt desc, then id.
    let x = mk(&*s, "x", "/tie", "p", 7);
    tick();
    let y = mk(&*s, "y", "/tie", "p", 7);
    assert_eq!(
        ids(&s.recent_for_project("/tie", 10).unwrap()),
        [y.as_str(), x.as_str()]
    );
}

fn search_is_literal_and_unicode_case_insensitive(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let snake = mk(&*s, "snake_case cleanup", "/w/snake_case_repo", "x", 10);
    let plain = mk(&*s, "snakeXcase", "/w/other", "x", 20);
    let uni = s
        .create_thread(NewThread {
            last_turn_at: Some(30),
            ..NewThread::new(
                "Üñíçødé title — ΣΊΣΥΦΟΣ",
                "/home/odd",
                "x",
                Some("Finish 100% of it".into()),
            )
        })
        .unwrap();
    let search = |q: &str| {
        s.search_threads(q)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    // §19.39: `%` and `_` are literal, not LIKE wildcards.
    assert_eq!(search("snake_case"), [snake.as_str()]);
    assert_eq!(search("snake%case"), Vec::<String>::new());
    assert_eq!(search("sn_ke"), Vec::<String>::new());
    assert_eq!(search("100%"), [uni.as_str()]);
    assert_eq!(search("%"), [uni.as_str()]);
    assert_eq!(search("_"), [snake.as_str()]);
    // §19.39: case-insensitive for all of Unicode, not ASCII only.
    assert_eq!(search("üñíçødé"), [uni.as_str()]);
    assert_eq!(search("ÜÑÍÇØDÉ"), [uni.as_str()]);
    assert_eq!(search("σίσυφος"), [uni.as_str()]);
    assert_eq!(search("SNAKEXCASE"), [plain.as_str()]);
    // Title, project path and goal; list order; the empty query matches everything.
    assert_eq!(search("/w/"), [plain.as_str(), snake.as_str()]);
    assert_eq!(search("FINISH"), [uni.as_str()]);
    assert_eq!(search(""), [uni.as_str(), plain.as_str(), snake.as_str()]);
    assert!(search("nomatch").is_empty());
    assert!(search("x\u{0}").is_empty());
}

fn turns_count_order_and_foreign_keys(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    let t0 = thread(&*s, &id);
    tick();
    // Out of order, with gaps: turnCount counts turns (§19.39: SQLite stored the turn number).
    let t5 = s
        .create_turn(NewTurn {
            response: Some("five".into()),
            tool_call_count: 3,
            ..NewTurn::new(&id, 5, "p5")
        })
        .unwrap();
    assert!(id_shape(&t5, "turn"), "{t5}");
    let after1 = thread(&*s, &id);
    assert_eq!(after1.turn_count, 1);
    assert!(after1.last_turn_at > t0.last_turn_at);
    assert_eq!(after1.updated_at, after1.last_turn_at);
    let t2 = s.create_turn(NewTurn::new(&id, 2, "p2")).unwrap();
    assert_eq!(thread(&*s, &id).turn_count, 2);

    let turns = s.get_turns_for_thread(&id).unwrap();
    assert_eq!(
        turns.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        [t2.as_str(), t5.as_str()]
    );
    let got = s.get_turn(&t5).unwrap().unwrap();
    assert_eq!(got.thread_id, id);
    assert_eq!(got.turn_number, 5);
    assert_eq!(got.prompt, "p5");
    assert_eq!(got.response.as_deref(), Some("five"));
    assert_eq!(got.tool_call_count, 3);
    assert_eq!(got.tool_calls, Some(vec![]));
    assert!(got.created_at >= after1.created_at);
    assert_eq!(got.duration_ms, None);
    let v = serde_json::to_value(&got).unwrap();
    assert!(v.get("durationMs").is_none(), "{v}");

    // §19.39 foreign keys: a turn needs its thread (SQLite inserted an orphan), a call its turn
    // (SQLite inserted an orphan; JSON threw).
    let e = s
        .create_turn(NewTurn::new("thread-0-nope0", 1, "x"))
        .unwrap_err();
    assert!(is_not_found(&e, "thread-0-nope0"), "{e}");
    let e = s
        .add_tool_call("turn-0-nope0", NewToolCall::new("x", json!({})))
        .unwrap_err();
    assert!(is_not_found(&e, "turn-0-nope0"), "{e}");
    let mut orphan = got.clone();
    orphan.id = "turn-orphan".into();
    orphan.thread_id = "thread-0-nope0".into();
    let e = s.put_turn(&orphan).unwrap_err();
    assert!(is_not_found(&e, "thread-0-nope0"), "{e}");
    assert_eq!(s.get_turn("turn-orphan").unwrap(), None);
}

fn tool_calls_sequence_and_count(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    let turn = s.create_turn(NewTurn::new(&id, 1, "p")).unwrap();
    let args = json!({"file_path": "src/theme.ts", "nested": {"a": [1, 2, {"b": null}]}});
    let c1 = s
        .add_tool_call(
            &turn,
            NewToolCall {
                result: Some("ok".into()),
                duration_ms: Some(8),
                ..NewToolCall::new("edit", args.clone())
            },
        )
        .unwrap();
    assert!(id_shape(&c1, "tc"), "{c1}");
    let c2 = s
        .add_tool_call(
            &turn,
            NewToolCall {
                error: Some("Blocked by hook".into()),
                ..NewToolCall::new("bash", json!({"command": "rm -rf x"}))
            },
        )
        .unwrap();
    let t = s.get_turn(&turn).unwrap().unwrap();
    // §19.39: JSON did not maintain toolCallCount.
    assert_eq!(t.tool_call_count, 2);
    let calls = t.tool_calls.unwrap();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.id.as_str(), c.sequence))
            .collect::<Vec<_>>(),
        [(c1.as_str(), 1), (c2.as_str(), 2)]
    );
    assert_eq!(calls[0].tool_name, "edit");
    assert_eq!(calls[0].args, args);
    assert_eq!(calls[0].result.as_deref(), Some("ok"));
    assert_eq!(calls[0].duration_ms, Some(8));
    assert_eq!(calls[1].error.as_deref(), Some("Blocked by hook"));
    assert_eq!(calls[1].result, None);
    let v = serde_json::to_value(&calls[1]).unwrap();
    assert_eq!(
        v,
        json!({"toolName": "bash", "args": {"command": "rm -rf x"},
               "error": "Blocked by hook", "id": c2, "sequence": 2})
    );
    // A turn whose count was given (calls not stored) keeps counting up from it.
    let counted = s
        .create_turn(NewTurn {
            tool_call_count: 3,
            ..NewTurn::new(&id, 2, "p2")
        })
        .unwrap();
    s.add_tool_call(&counted, NewToolCall::new("read", json!({})))
        .unwrap();
    let t = s.get_turn(&counted).unwrap().unwrap();
    assert_eq!(t.tool_call_count, 4);
    assert_eq!(t.tool_calls.unwrap()[0].sequence, 1);
}

fn turn_items_view_limit_counts_turns(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    let t1 = s
        .create_turn(NewTurn {
            response: Some("r1".into()),
            ..NewTurn::new(&id, 1, "p1")
        })
        .unwrap();
    let t2 = s.create_turn(NewTurn::new(&id, 2, "p2")).unwrap();
    let a = s
        .add_tool_call(
            &t1,
            NewToolCall {
                result: Some("ok".into()),
                duration_ms: Some(12),
                ..NewToolCall::new("read", json!({"path": "x"}))
            },
        )
        .unwrap();
    let bb = s
        .add_tool_call(&t1, NewToolCall::new("bash", json!({})))
        .unwrap();
    let c = s
        .add_tool_call(&t2, NewToolCall::new("edit", json!({})))
        .unwrap();
    let all = s.get_turn_items_view(&id, None).unwrap();
    assert_eq!(
        serde_json::to_value(&all).unwrap(),
        json!([
            {"threadId": id, "turnNumber": 1, "prompt": "p1", "response": "r1",
             "createdAt": all[0].created_at,
             "toolCalls": [{"id": a, "toolName": "read", "result": "ok", "durationMs": 12},
                           {"id": bb, "toolName": "bash"}]},
            {"threadId": id, "turnNumber": 2, "prompt": "p2", "createdAt": all[1].created_at,
             "toolCalls": [{"id": c, "toolName": "edit"}]}
        ])
    );
    // §19.39: the limit counts turns (SQLite limited joined rows: one call of turn 1).
    let one = s.get_turn_items_view(&id, Some(1)).unwrap();
    assert_eq!(one, all[..1]);
    assert_eq!(one[0].tool_calls.len(), 2);
    assert_eq!(s.get_turn_items_view(&id, Some(5)).unwrap(), all);
    // §19.39: limit 0 gives none on both (SQLite treated it as "all").
    assert!(s.get_turn_items_view(&id, Some(0)).unwrap().is_empty());
}

fn empty_strings_and_zero_durations_are_kept(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let id = s
        .create_thread(NewThread::new("t", "", "", Some(String::new())))
        .unwrap();
    let turn = s
        .create_turn(NewTurn {
            response: Some(String::new()),
            duration_ms: Some(0),
            ..NewTurn::new(&id, 1, "")
        })
        .unwrap();
    s.add_tool_call(
        &turn,
        NewToolCall {
            result: Some(String::new()),
            error: Some(String::new()),
            duration_ms: Some(0),
            ..NewToolCall::new("x", json!({}))
        },
    )
    .unwrap();
    // §14.4: the original stored these as NULL (falsy → null); they are kept as given.
    let t = thread(&*s, &id);
    assert_eq!(t.goal.as_deref(), Some(""));
    assert_eq!((t.project_path.as_str(), t.provider.as_str()), ("", ""));
    let turn = s.get_turn(&turn).unwrap().unwrap();
    assert_eq!(turn.response.as_deref(), Some(""));
    assert_eq!(turn.duration_ms, Some(0));
    let c = &turn.tool_calls.unwrap()[0];
    assert_eq!(
        (c.result.as_deref(), c.error.as_deref(), c.duration_ms),
        (Some(""), Some(""), Some(0))
    );
    // "" filters match "".
    assert_eq!(
        s.list_threads(&ThreadFilter {
            project_path: Some(String::new()),
            provider: Some(String::new()),
            ..Default::default()
        })
        .unwrap()
        .len(),
        1
    );
}

fn call(id: &str, sequence: i64, tool: &str) -> StoredToolCall {
    serde_json::from_value(json!({"toolName": tool, "args": {"n": sequence}, "id": id,
                                  "sequence": sequence}))
    .unwrap()
}

fn stored_thread(id: &str, last: i64) -> StoredThread {
    serde_json::from_value(json!({
        "title": "derived", "projectPath": "/p", "provider": "anthropic",
        "goal": "g", "goalStatus": "active", "status": "active",
        "turnCount": 3, "iterationCount": 1, "lastTurnAt": last, "id": id,
        "createdAt": 1000, "updatedAt": 2000, "goalUpdatedAt": 1500
    }))
    .unwrap()
}

fn put_thread_upserts(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let t = stored_thread("session-1", 5000);
    s.put_thread(&t).unwrap();
    // Kept exactly: ids, timestamps and counters.
    assert_eq!(thread(&*s, "session-1"), t);
    let mut t2 = t.clone();
    t2.title = "replaced".into();
    t2.goal = None;
    t2.goal_status = None;
    t2.goal_updated_at = None;
    t2.status = ThreadStatus::Other("paused".into());
    s.put_thread(&t2).unwrap();
    assert_eq!(thread(&*s, "session-1"), t2);
    assert_eq!(
        s.list_threads(&ThreadFilter::default()).unwrap(),
        [t2.clone()]
    );
    // Its turns survive a replace.
    let turn = s.create_turn(NewTurn::new("session-1", 1, "p")).unwrap();
    s.put_thread(&t2).unwrap();
    assert_eq!(s.get_turn(&turn).unwrap().unwrap().thread_id, "session-1");
    assert_eq!(thread(&*s, "session-1").turn_count, t2.turn_count);
}

fn put_turn_upserts_and_replaces_calls(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    s.put_thread(&stored_thread("s1", 10)).unwrap();
    s.put_thread(&stored_thread("s2", 20)).unwrap();
    let mut turn: StoredTurn = serde_json::from_value(json!({
        "threadId": "s1", "turnNumber": 1, "prompt": "p", "response": "r",
        "durationMs": 40, "toolCallCount": 2, "id": "s1-t1", "createdAt": 1100,
        "toolCalls": [
            {"toolName": "b", "args": {}, "id": "s1-c2", "sequence": 2},
            {"toolName": "a", "args": {"x": 1}, "result": "ok", "id": "s1-c1", "sequence": 1}
        ]
    }))
    .unwrap();
    s.put_turn(&turn).unwrap();
    let got = s.get_turn("s1-t1").unwrap().unwrap();
    let mut want = turn.clone();
    want.tool_calls.as_mut().unwrap().reverse(); // reads order calls by sequence
    assert_eq!(got, want);
    // The thread's counters are the writer's business.
    assert_eq!(thread(&*s, "s1").turn_count, 3);

    // Replace: the calls become exactly the given ones.
    turn.prompt = "p2".into();
    turn.tool_calls = Some(vec![call("s1-c3", 1, "c")]);
    s.put_turn(&turn).unwrap();
    let got = s.get_turn("s1-t1").unwrap().unwrap();
    assert_eq!(got.prompt, "p2");
    assert_eq!(got.tool_calls, Some(vec![call("s1-c3", 1, "c")]));

    // None keeps the stored calls.
    turn.response = None;
    turn.tool_calls = None;
    s.put_turn(&turn).unwrap();
    let got = s.get_turn("s1-t1").unwrap().unwrap();
    assert_eq!(got.response, None);
    assert_eq!(got.tool_calls, Some(vec![call("s1-c3", 1, "c")]));
    assert_eq!(s.get_turns_for_thread("s1").unwrap().len(), 1);

    // A call id moves from another turn; duplicates in one put keep the last.
    let mut other: StoredTurn = serde_json::from_value(json!({
        "threadId": "s2", "turnNumber": 1, "prompt": "q", "toolCallCount": 0,
        "id": "s2-t1", "createdAt": 2100,
        "toolCalls": [{"toolName": "x", "args": {}, "id": "s1-c3", "sequence": 1},
                      {"toolName": "y", "args": {}, "id": "dup", "sequence": 2},
                      {"toolName": "z", "args": {}, "id": "dup", "sequence": 3}]
    }))
    .unwrap();
    s.put_turn(&other).unwrap();
    assert_eq!(
        s.get_turn("s1-t1").unwrap().unwrap().tool_calls,
        Some(vec![])
    );
    let got = s.get_turn("s2-t1").unwrap().unwrap().tool_calls.unwrap();
    assert_eq!(
        got.iter()
            .map(|c| (c.id.as_str(), c.tool_name.as_str()))
            .collect::<Vec<_>>(),
        [("s1-c3", "x"), ("dup", "z")]
    );

    // A turn can move to another thread.
    other.thread_id = "s1".into();
    other.tool_calls = None;
    s.put_turn(&other).unwrap();
    assert!(s.get_turns_for_thread("s2").unwrap().is_empty());
    assert_eq!(s.get_turns_for_thread("s1").unwrap().len(), 2);
    assert_eq!(
        s.get_turn("s2-t1")
            .unwrap()
            .unwrap()
            .tool_calls
            .unwrap()
            .len(),
        2
    );

    // Deleting the thread removes put turns and calls too.
    assert!(s.delete_thread("s1").unwrap());
    assert_eq!(s.get_turn("s2-t1").unwrap(), None);
    assert_eq!(s.get_turn("s1-t1").unwrap(), None);
}

fn ids_are_unique_and_shaped(b: Backend) {
    let fx = Fx::new(b);
    let s = fx.open();
    let mut seen = HashSet::new();
    let th = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    let turn = s.create_turn(NewTurn::new(&th, 1, "p")).unwrap();
    seen.insert(th.clone());
    seen.insert(turn.clone());
    // Many in the same milliseconds.
    for i in 0..150 {
        let id = s
            .create_thread(new_thread(&format!("t{i}"), "/a", "x"))
            .unwrap();
        assert!(id_shape(&id, "thread"), "{id}");
        assert!(seen.insert(id));
        let c = s
            .add_tool_call(&turn, NewToolCall::new("x", json!({})))
            .unwrap();
        assert!(id_shape(&c, "tc"), "{c}");
        assert!(seen.insert(c));
    }
    assert_eq!(s.list_threads(&ThreadFilter::default()).unwrap().len(), 151);
    let t = s.get_turn(&turn).unwrap().unwrap();
    assert_eq!(t.tool_call_count, 150);
    let seqs: Vec<i64> = t.tool_calls.unwrap().iter().map(|c| c.sequence).collect();
    assert_eq!(seqs, (1..=150).collect::<Vec<_>>());
}

fn two_instances_see_each_other(b: Backend) {
    let fx = Fx::new(b);
    let a = fx.open();
    let bb = fx.open();
    // Both have read (and, for JSON, cached) the empty store.
    assert!(a.list_threads(&ThreadFilter::default()).unwrap().is_empty());
    assert!(
        bb.list_threads(&ThreadFilter::default())
            .unwrap()
            .is_empty()
    );
    let id = a.create_thread(new_thread("aaaa", "/a", "x")).unwrap();
    // §19.39: JSON kept a stale snapshot (last writer wins); B sees A's write and keeps it.
    assert_eq!(thread(&*bb, &id).title, "aaaa");
    let id2 = bb.create_thread(new_thread("from b", "/a", "x")).unwrap();
    assert!(thread(&*a, &id2).title == "from b");
    assert_eq!(a.list_threads(&ThreadFilter::default()).unwrap().len(), 2);
    // A same-size rewrite within the same moment is still seen.
    let rename = |to: &str| ThreadUpdate {
        title: Some(to.into()),
        ..ThreadUpdate::default()
    };
    bb.update_thread(&id, &rename("bbbb")).unwrap();
    assert_eq!(thread(&*a, &id).title, "bbbb");
    a.update_thread(&id, &rename("cccc")).unwrap();
    assert_eq!(thread(&*bb, &id).title, "cccc");
    let turn = bb.create_turn(NewTurn::new(&id, 1, "p")).unwrap();
    a.add_tool_call(&turn, NewToolCall::new("x", json!({})))
        .unwrap();
    assert_eq!(bb.get_turn(&turn).unwrap().unwrap().tool_call_count, 1);
    bb.delete_thread(&id2).unwrap();
    assert_eq!(a.get_thread(&id2).unwrap(), None);
    assert_eq!(thread(&*a, &id).turn_count, 1);
}

fn two_instances_write_concurrently(b: Backend) {
    let fx = Fx::new(b);
    let per = 25;
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let store = fx.open();
            std::thread::spawn(move || {
                for i in 0..per {
                    let id = store
                        .create_thread(new_thread(&format!("w{w}-{i}"), "/c", "x"))
                        .unwrap();
                    let turn = store.create_turn(NewTurn::new(&id, 1, "p")).unwrap();
                    store
                        .add_tool_call(&turn, NewToolCall::new("x", json!({})))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = fx.open();
    let all = s.list_threads(&ThreadFilter::default()).unwrap();
    assert_eq!(all.len(), 2 * per, "no write was lost");
    let titles: HashSet<&str> = all.iter().map(|t| t.title.as_str()).collect();
    assert_eq!(titles.len(), 2 * per);
    for t in &all {
        assert_eq!(t.turn_count, 1, "{}", t.title);
        let turns = s.get_turns_for_thread(&t.id).unwrap();
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].tool_calls.as_ref().unwrap().len(), 1);
        assert_eq!(turns[0].tool_call_count, 1);
    }
}

// ---- the JSON file ---------------------------------------------------------------------------

#[test]
fn json_file_has_the_original_shape() {
    let fx = Fx::new(Backend::Json);
    let s = fx.open();
    let id = s
        .create_thread(NewThread::new("t", "/a", "anthropic", None))
        .unwrap();
    let turn = s.create_turn(NewTurn::new(&id, 1, "p")).unwrap();
    let c = s
        .add_tool_call(&turn, NewToolCall::new("read", json!({})))
        .unwrap();
    let path = fx.state().join("store.json");
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        !text.ends_with('\n'),
        "no trailing newline, as the original"
    );
    assert!(text.starts_with("{\n  \"threads\": {\n    \""), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let t = &v["threads"][&id];
    let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "title",
            "projectPath",
            "provider",
            "status",
            "turnCount",
            "iterationCount",
            "lastTurnAt",
            "id",
            "createdAt",
            "updatedAt"
        ]
    );
    let turns = v["turns"][&id].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    let keys: Vec<&str> = turns[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "threadId",
            "turnNumber",
            "prompt",
            "toolCallCount",
            "toolCalls",
            "id",
            "createdAt"
        ]
    );
    assert_eq!(
        turns[0]["toolCalls"],
        json!([{"toolName": "read", "args": {}, "id": c, "sequence": 1}])
    );
    assert_eq!(v["metadata"]["version"], 1);
    assert!(v["metadata"]["lastUpdated"].as_i64().unwrap() >= t["createdAt"].as_i64().unwrap());
    assert_eq!(crate::support::mode(&path), 0o600);
    assert_eq!(crate::support::mode(&fx.state()), 0o700);
    // No temp files left behind.
    let names: HashSet<String> = std::fs::read_dir(fx.state())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        HashSet::from(["store.json".to_owned(), "store.json.lock".to_owned()])
    );
}

#[test]
fn json_keeps_unknown_fields_and_unparseable_entries() {
    let fx = Fx::new(Backend::Json);
    std::fs::create_dir_all(fx.state()).unwrap();
    let doc = json!({
        "threads": {
            "t1": {"title": "one", "projectPath": "/a", "provider": "x", "status": "active",
                   "turnCount": 1, "iterationCount": 0, "lastTurnAt": 5, "id": "t1",
                   "createdAt": 1, "updatedAt": 2, "color": "blue", "tags": ["a"]},
            "broken": {"title": 42, "turnCount": "many"}
        },
        "turns": {
            "t1": [{"threadId": "t1", "turnNumber": 1, "prompt": "p", "toolCallCount": 0,
                    "toolCalls": [{"toolName": "r", "args": {}, "id": "c1", "sequence": 1,
                                   "tokens": 9}],
                    "id": "u1", "createdAt": 3, "model": "m"}],
            "weird": "not an array"
        },
        "metadata": {"version": 1, "lastUpdated": 2, "writer": "future"},
        "schemaHint": {"v": 2}
    });
    std::fs::write(
        fx.state().join("store.json"),
        serde_json::to_vec_pretty(&doc).unwrap(),
    )
    .unwrap();
    let s = fx.open();
    // Reads skip what does not parse.
    assert_eq!(
        ids(&s.list_threads(&ThreadFilter::default()).unwrap()),
        ["t1"]
    );
    let t = thread(&*s, "t1");
    assert_eq!(t.extra.get("color"), Some(&json!("blue")));
    let turn = s.get_turn("u1").unwrap().unwrap();
    assert_eq!(turn.extra.get("model"), Some(&json!("m")));
    // A read-modify-write keeps every unknown key and the unparseable entries verbatim.
    s.update_thread(
        "t1",
        &ThreadUpdate {
            title: Some("renamed".into()),
            ..Default::default()
        },
    )
    .unwrap();
    s.add_tool_call("u1", NewToolCall::new("w", json!({})))
        .unwrap();
    let after: Value =
        serde_json::from_slice(&std::fs::read(fx.state().join("store.json")).unwrap()).unwrap();
    assert_eq!(after["threads"]["t1"]["color"], "blue");
    assert_eq!(after["threads"]["t1"]["tags"], json!(["a"]));
    assert_eq!(after["threads"]["t1"]["title"], "renamed");
    assert_eq!(after["threads"]["broken"], doc["threads"]["broken"]);
    assert_eq!(after["turns"]["weird"], "not an array");
    assert_eq!(after["turns"]["t1"][0]["model"], "m");
    assert_eq!(after["turns"]["t1"][0]["toolCalls"][0]["tokens"], 9);
    assert_eq!(
        after["turns"]["t1"][0]["toolCalls"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(after["metadata"]["writer"], "future");
    assert_eq!(after["schemaHint"], json!({"v": 2}));
}

#[test]
fn json_unreadable_file_is_moved_aside_not_overwritten() {
    let fx = Fx::new(Backend::Json);
    std::fs::create_dir_all(fx.state()).unwrap();
    let path = fx.state().join("store.json");
    std::fs::write(&path, b"{\"threads\": {\"t1\": ").unwrap();
    let s = fx.open();
    // Read as empty (as the original), without touching the file.
    assert!(s.list_threads(&ThreadFilter::default()).unwrap().is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"threads\": {\"t1\": ");
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    let aside: Vec<PathBuf> = std::fs::read_dir(fx.state())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("store.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        std::fs::read(&aside[0]).unwrap(),
        b"{\"threads\": {\"t1\": "
    );
    assert_eq!(
        ids(&fx.open().list_threads(&ThreadFilter::default()).unwrap()),
        [id.as_str()]
    );
}

#[test]
fn json_delete_removes_the_per_thread_file_only_for_safe_ids() {
    let fx = Fx::new(Backend::Json);
    let s = fx.open();
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    let threads = fx.state().join("threads");
    std::fs::create_dir_all(&threads).unwrap();
    std::fs::write(threads.join(format!("{id}.json")), b"{}").unwrap();
    std::fs::write(fx.tmp.path().join("outside.json"), b"{}").unwrap();
    assert!(s.delete_thread(&id).unwrap());
    assert!(!threads.join(format!("{id}.json")).exists());
    // An id that would resolve outside `threads/` never names a file.
    assert!(!s.delete_thread("../../outside").unwrap());
    assert!(fx.tmp.path().join("outside.json").exists());
}

// ---- the SQLite file -------------------------------------------------------------------------

fn sqlite(fx: &Fx) -> SqliteThreadStore {
    std::fs::create_dir_all(fx.state()).unwrap();
    SqliteThreadStore::open(&fx.state().join("freecode.db")).unwrap()
}

#[test]
fn sqlite_pragmas_migrations_and_fts5() {
    let fx = Fx::new(Backend::Sqlite);
    let s = sqlite(&fx);
    let c = s.connection();
    let fk: i64 = c
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let busy: i64 = c
        .query_row("PRAGMA busy_timeout", [], |r| r.get(0))
        .unwrap();
    assert!(busy >= 1000, "{busy}");
    assert_eq!(
        migrate::recorded(c).unwrap(),
        [(20261130051900, "thread_store".to_owned())]
    );
    assert_eq!(crate::support::mode(&fx.state().join("freecode.db")), 0o600);
    // Foreign keys are enforced in the database itself.
    let e = c
        .execute(
            "INSERT INTO turns (id, threadId, turnNumber, prompt, createdAt) \
             VALUES ('u', 'nope', 1, 'p', 0)",
            [],
        )
        .unwrap_err();
    assert!(e.to_string().contains("FOREIGN KEY"), "{e}");
    // The bundled SQLite has FTS5 (the session index uses it in this database).
    c.execute_batch(
        "CREATE VIRTUAL TABLE fts_probe USING fts5(body, tokenize = 'unicode61');
         INSERT INTO fts_probe (body) VALUES ('dark mode toggle'), ('snake case');",
    )
    .unwrap();
    let hit: String = c
        .query_row(
            "SELECT body FROM fts_probe WHERE fts_probe MATCH 'toggle'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(hit, "dark mode toggle");
    // Reopening applies nothing new.
    drop(s);
    let s = sqlite(&fx);
    assert_eq!(migrate::recorded(s.connection()).unwrap().len(), 1);
}

#[test]
fn sqlite_tolerates_a_newer_schema() {
    let fx = Fx::new(Backend::Sqlite);
    let s = sqlite(&fx);
    s.put_thread(&stored_thread("t1", 10)).unwrap();
    // What a newer binary might have done.
    s.connection()
        .execute_batch(
            "INSERT INTO schema_migrations (version, name, appliedAt)
               VALUES (99991231235959, 'from_the_future', 0);
             ALTER TABLE threads ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
             CREATE TABLE future_things (id TEXT PRIMARY KEY);",
        )
        .unwrap();
    drop(s);
    let s = sqlite(&fx);
    assert_eq!(thread(&s, "t1"), stored_thread("t1", 10));
    s.put_thread(&stored_thread("t2", 20)).unwrap();
    let id = s.create_thread(new_thread("new", "/a", "x")).unwrap();
    s.create_turn(NewTurn::new(&id, 1, "p")).unwrap();
    assert_eq!(s.list_threads(&ThreadFilter::default()).unwrap().len(), 3);
    let versions: Vec<i64> = migrate::recorded(s.connection())
        .unwrap()
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(versions, [20261130051900, 99991231235959]);
}

#[test]
fn sqlite_migrations_run_in_order_once() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let list = [
        migrate::Migration {
            version: 20300101000000,
            name: "second",
            sql: "ALTER TABLE a ADD COLUMN y TEXT;",
        },
        migrate::Migration {
            version: 20200101000000,
            name: "first",
            sql: "CREATE TABLE a (x TEXT);",
        },
    ];
    assert_eq!(
        migrate::apply(&conn, &list).unwrap(),
        [20200101000000, 20300101000000]
    );
    assert!(migrate::apply(&conn, &list).unwrap().is_empty());
    conn.execute("INSERT INTO a (x, y) VALUES ('1', '2')", [])
        .unwrap();
    // A failing migration leaves nothing half-applied.
    let bad = [migrate::Migration {
        version: 20400101000000,
        name: "bad",
        sql: "CREATE TABLE b (z TEXT); THIS IS NOT SQL;",
    }];
    assert!(migrate::apply(&conn, &bad).is_err());
    let b_exists: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'b')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!b_exists);
    assert_eq!(migrate::recorded(&conn).unwrap().len(), 2);
}

// ---- selection and recovery ------------------------------------------------------------------

fn home_in(tmp: &TempDir) -> Home {
    Home::new(tmp.path().join("home"))
}

fn corrupt_files(state: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("freecode.db.corrupt-"))
        .collect();
    v.sort();
    v
}

#[test]
fn auto_picks_sqlite_and_json_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_in(&tmp);
    let (s, sel) = open_thread_store(&home, BackendChoice::Auto);
    assert_eq!(sel.kind, BackendKind::Sqlite, "{}", sel.reason);
    assert_eq!(s.kind(), BackendKind::Sqlite);
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    assert!(home.state_dir().join("freecode.db").is_file());
    assert_eq!(crate::support::mode(&home.state_dir()), 0o700);
    let (s, sel) = open_thread_store(&home, BackendChoice::Sqlite);
    assert_eq!(
        (sel.kind, s.kind()),
        (BackendKind::Sqlite, BackendKind::Sqlite)
    );
    assert_eq!(thread(&*s, &id).title, "t");
    let (s, sel) = open_thread_store(&home, BackendChoice::Json);
    assert_eq!((sel.kind, s.kind()), (BackendKind::Json, BackendKind::Json));
    assert!(sel.reason.contains("requested"), "{}", sel.reason);
    assert!(s.list_threads(&ThreadFilter::default()).unwrap().is_empty());
    assert_eq!(BackendChoice::parse(" JSON "), Some(BackendChoice::Json));
    assert_eq!(BackendChoice::parse("sqlite"), Some(BackendChoice::Sqlite));
    assert_eq!(BackendChoice::parse("auto"), Some(BackendChoice::Auto));
    assert_eq!(BackendChoice::parse("mysql"), None);
}

#[test]
fn garbage_database_is_moved_aside_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_in(&tmp);
    let state = home.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("freecode.db"),
        b"this is not a database, just text",
    )
    .unwrap();
    std::fs::write(state.join("freecode.db-wal"), b"stale wal").unwrap();
    for choice in [BackendChoice::Auto, BackendChoice::Sqlite] {
        let (s, sel) = open_thread_store(&home, choice);
        assert_eq!(sel.kind, BackendKind::Sqlite, "{}", sel.reason);
        let id = s.create_thread(new_thread("after", "/a", "x")).unwrap();
        assert_eq!(thread(&*s, &id).title, "after");
        if choice == BackendChoice::Auto {
            assert!(
                sel.reason.contains("moved the corrupt database aside"),
                "{}",
                sel.reason
            );
        }
    }
    let aside = corrupt_files(&state);
    assert_eq!(aside.len(), 2, "{aside:?}");
    assert!(aside[1].ends_with("-wal"), "{aside:?}");
    assert_eq!(
        std::fs::read(state.join(&aside[0])).unwrap(),
        b"this is not a database, just text"
    );
}

#[test]
fn truncated_database_is_moved_aside_and_replaced() {
    for keep in [10u64, 0] {
        let tmp = tempfile::tempdir().unwrap();
        let home = home_in(&tmp);
        let state = home.state_dir();
        let db = state.join("freecode.db");
        {
            let (s, _) = open_thread_store(&home, BackendChoice::Auto);
            for i in 0..300 {
                s.put_thread(&StoredThread {
                    title: format!("{i} {}", "x".repeat(200)),
                    ..stored_thread(&format!("t{i}"), i)
                })
                .unwrap();
            }
        }
        let len = std::fs::metadata(&db).unwrap().len();
        assert!(len > 40_000, "{len}");
        // keep 10: cut inside the header; keep 0: cut in the middle of the pages.
        let cut = if keep == 0 { len / 2 } else { keep };
        std::fs::OpenOptions::new()
            .write(true)
            .open(&db)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let (s, sel) = open_thread_store(&home, BackendChoice::Auto);
        assert_eq!(sel.kind, BackendKind::Sqlite, "{}", sel.reason);
        assert!(
            sel.reason.contains("moved the corrupt database aside"),
            "cut {cut}: {}",
            sel.reason
        );
        assert_eq!(corrupt_files(&state).len(), 1);
        assert!(s.list_threads(&ThreadFilter::default()).unwrap().is_empty());
        s.create_thread(new_thread("fresh", "/a", "x")).unwrap();
    }
}

#[test]
fn read_only_state_dir_falls_back_to_json() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_in(&tmp);
    let state = home.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("store.json"),
        serde_json::to_vec(
            &json!({"threads": {"t1": stored_thread("t1", 5)}, "turns": {},
                                   "metadata": {"version": 1, "lastUpdated": 5}}),
        )
        .unwrap(),
    )
    .unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o555)).unwrap();
    let (s, sel) = open_thread_store(&home, BackendChoice::Auto);
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(sel.kind, BackendKind::Json);
    assert!(sel.reason.contains("read-only"), "{}", sel.reason);
    assert_eq!(thread(&*s, "t1"), stored_thread("t1", 5));
    assert!(!state.join("freecode.db").exists());
}

#[test]
fn unopenable_database_falls_back_to_json() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home_in(&tmp);
    // A directory where the database should be: not corrupt (nothing to move aside), unusable.
    std::fs::create_dir_all(home.state_dir().join("freecode.db")).unwrap();
    let (s, sel) = open_thread_store(&home, BackendChoice::Sqlite);
    assert_eq!(sel.kind, BackendKind::Json, "{}", sel.reason);
    assert!(sel.reason.contains("freecode.db"), "{}", sel.reason);
    assert!(home.state_dir().join("freecode.db").is_dir());
    let id = s.create_thread(new_thread("t", "/a", "x")).unwrap();
    assert_eq!(thread(&*s, &id).title, "t");
}
