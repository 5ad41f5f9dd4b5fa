//! `freecode search`, `stats`, `index rebuild` and the index behind `session list`, driven as a
//! user drives them: the same answers with SQLite and with the JSON fallback, and every command
//! still working when the database is corrupt.

use crate::common;

use crate::common::Ctx;

use std::io::Write;
use std::process::Output;

use serde_json::Value;

/// A writable copy of the original's home without its thread-store files.
fn index_home() -> Ctx {
    let ctx = Ctx::fixture();
    for f in ["freecode.db", "store.json"] {
        std::fs::remove_file(ctx.home.join("state").join(f)).unwrap();
    }
    ctx
}

impl Ctx {
    /// Runs `freecode args` with the thread-store `backend`.
    fn run_on(&self, backend: &str, args: &[&str]) -> Output {
        self.cmd(args)
            .env("FREECODE_THREAD_STORE", backend)
            .output()
            .unwrap()
    }

    /// [`Ctx::run_on`], which must succeed; its stdout as JSON.
    fn json_on(&self, backend: &str, args: &[&str]) -> Value {
        let out = self.run_on(backend, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn hit_keys(v: &Value) -> Vec<(String, String)> {
    let mut k: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["sessionId"].as_str().unwrap().to_owned(),
                h["messageId"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    k.sort();
    k
}

/// The hits in order (the snippets' windows may differ: FTS5 picks its own).
fn ordered_hits(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["sessionId"].as_str().unwrap().to_owned(),
                h["messageId"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn sqlite_and_json_backends_answer_the_same() {
    let home = index_home();
    for args in [
        vec!["session", "list", "--json"],
        vec!["session", "list", "--all", "--json"],
        vec!["stats", "--json"],
        vec!["stats", "68d44408-94df-4f2f-ae2e-ffffdb68e297", "--json"],
        vec![
            "stats",
            "--project",
            "/home/dev/work/snake_case_repo",
            "--json",
        ],
    ] {
        assert_eq!(
            home.json_on("sqlite", &args),
            home.json_on("json", &args),
            "{args:?}"
        );
    }
    assert!(
        home.home.join("state/freecode.db").exists(),
        "the index was built"
    );
    for q in [
        "dark mode",
        "invoice",
        "ダークモード",
        "dark",
        "the",
        "toggle settings",
    ] {
        for all in [false, true] {
            let mut args = vec!["search", q, "--json", "--limit", "100"];
            if all {
                args.push("--all");
            }
            let a = home.json_on("sqlite", &args);
            let b = home.json_on("json", &args);
            assert_eq!(hit_keys(&a), hit_keys(&b), "{q}");
            // The same order (BM25 as FTS5 computes it, then newest first) and the same ranks.
            assert_eq!(ordered_hits(&a), ordered_hits(&b), "{args:?}");
            let ranks = |v: &Value| -> Vec<f64> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["rank"].as_f64().unwrap())
                    .collect()
            };
            for (x, y) in ranks(&a).iter().zip(ranks(&b)) {
                assert!((x - y).abs() < 1e-9, "{args:?}: {x} vs {y}");
            }
        }
    }
    // No match: an empty array and exit status 1 (as grep), on both backends, nothing on
    // stderr.
    for backend in ["sqlite", "json"] {
        let out = home.run_on(backend, &["search", "zzz-nothing", "--json"]);
        assert_eq!(out.status.code(), Some(1), "{backend}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v, serde_json::json!([]));
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = home.run_on(backend, &["search", "zzz-nothing"]);
        assert_eq!(out.status.code(), Some(1), "{backend}");
        assert!(out.stdout.is_empty());
    }
    let out = home.run_on(
        "sqlite",
        &[
            "search",
            "dark",
            "--json",
            "--since",
            "2026-01-15T09:30:00Z",
        ],
    );
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        hits.as_array()
            .unwrap()
            .iter()
            .all(|h| h["timestamp"].as_i64().unwrap() >= 1_768_469_400_000)
    );
    // Piped, the snippet is the plain text: no markers, no escapes; code keeps its brackets.
    let text = String::from_utf8(home.run_on("sqlite", &["search", "dark mode"]).stdout).unwrap();
    assert!(text.contains("dark mode"), "{text}");
    assert!(!text.contains('\x1b'), "{text}");
    let text = String::from_utf8(home.run_on("sqlite", &["search", "dark"]).stdout).unwrap();
    assert!(text.contains("const [dark, setDark]"), "{text}");
    assert_eq!(
        home.run_on("sqlite", &["search", "x", "--since", "yesterday-ish"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn a_corrupt_database_never_blocks_a_command() {
    for garbage in [&b""[..], b"this is not a database at all, just some bytes"] {
        let home = index_home();
        home.json_on("sqlite", &["session", "list", "--json"]);
        let db = home.home.join("state/freecode.db");
        std::fs::write(&db, garbage).unwrap();
        let _ = std::fs::remove_file(home.home.join("state/freecode.db-wal"));
        let listed = home.json_on("auto", &["session", "list", "--json"]);
        assert_eq!(listed.as_array().unwrap().len(), 10);
        assert!(!hit_keys(&home.json_on("auto", &["search", "invoice", "--json"])).is_empty());
        assert_eq!(home.json_on("auto", &["stats", "--json"])["sessions"], 11);
        let out = home.run_on("auto", &["index", "rebuild"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("indexed 11 sessions"));
    }
}

#[test]
fn a_read_only_home_is_read_without_writing_to_it() {
    let home = index_home();
    let state = home.home.join("state");
    std::process::Command::new("chmod")
        .args(["0555"])
        .arg(&state)
        .status()
        .unwrap();
    let listed = home.json_on("auto", &["session", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 10);
    assert!(
        !state.join("freecode.db").exists(),
        "nothing written into a read-only state dir"
    );
    let out = home.run_on("auto", &["index", "rebuild"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no index without SQLite: a clear user error"
    );
    std::process::Command::new("chmod")
        .args(["0700"])
        .arg(&state)
        .status()
        .unwrap();
}

const DAMAGED: &str = "sessions/home__dev__odd__name_h_dir";
const OTHER_ID: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const LOG_IS_DIR: &str = "aaaaaaaa-0000-4000-8000-000000000002";
const GARBAGE: &str = "aaaaaaaa-0000-4000-8000-000000000003";

fn meta_json(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","title":"damaged","projectPath":"/home/dev/odd__name_h_dir","provider":"x","status":"active","createdAt":1768470040944,"updatedAt":1768470040944,"lastTurnAt":1768470040944,"turnCount":1}}"#
    )
}

const INVOICE_LOG: &str = concat!(
    r#"{"id":"m-1","role":"user","parts":[{"type":"text","content":"invoice totals please"}],"timestamp":1768470041944}"#,
    "\n",
    r#"{"id":"m-2","role":"assistant","parts":[{"type":"text","content":"invoice done"},{"type":"tool","tool":{"name":"bash"},"result":"ok"}],"timestamp":1768470042944}"#,
    "\n"
);

/// Adds to `home` a session whose meta.json names another id, one whose messages.jsonl is a
/// directory, and one whose meta.json is garbage: each of the three would break a reader that
/// trusted it.
fn damage(home: &Ctx) {
    let base = home.home.join(DAMAGED);
    let other = base.join(OTHER_ID);
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("meta.json"),
        meta_json("aaaaaaaa-0000-4000-8000-0000000000ff"),
    )
    .unwrap();
    std::fs::write(other.join("messages.jsonl"), INVOICE_LOG).unwrap();
    let dir_log = base.join(LOG_IS_DIR);
    std::fs::create_dir_all(dir_log.join("messages.jsonl")).unwrap();
    std::fs::write(dir_log.join("meta.json"), meta_json(LOG_IS_DIR)).unwrap();
    let garbage = base.join(GARBAGE);
    std::fs::create_dir_all(&garbage).unwrap();
    std::fs::write(garbage.join("meta.json"), "{ this is not json").unwrap();
    std::fs::write(garbage.join("messages.jsonl"), INVOICE_LOG).unwrap();
}

/// The `problems` array of a JSON answer, as (path, reason) pairs, sorted by path.
fn problems_of(v: &Value) -> Vec<(String, String)> {
    let mut p: Vec<_> = v["problems"]
        .as_array()
        .unwrap_or_else(|| panic!("no problems array in {v}"))
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    p.sort();
    p
}

fn without_problems(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("problems");
    v
}

/// Every damaged path, with a reason, in one stderr.
fn assert_warned(stderr: &[u8], ids: &[&str], args: &[&str]) {
    let stderr = String::from_utf8_lossy(stderr);
    for id in ids {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&format!("{DAMAGED}/{id}")) && l.contains("skipped")),
            "{args:?}: no warning about {id} in:\n{stderr}"
        );
    }
}

#[test]
fn a_damaged_session_never_blocks_the_home() {
    let clean = index_home();
    let home = index_home();
    damage(&home);
    for backend in ["sqlite", "json"] {
        // search: the good sessions' hits; a bare array, so the problems go to stderr.
        let args = ["search", "invoice", "--json", "--limit", "100"];
        let out = home.run_on(backend, &args);
        assert!(
            out.status.success(),
            "{backend} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            hit_keys(&hits),
            hit_keys(&clean.json_on(backend, &args)),
            "{backend}"
        );
        assert_warned(&out.stderr, &[OTHER_ID, LOG_IS_DIR, GARBAGE], &args);

        // stats: an object, so the problems are in it too.
        let args = ["stats", "--json"];
        let out = home.run_on(backend, &args);
        assert!(
            out.status.success(),
            "{backend} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_warned(&out.stderr, &[OTHER_ID, LOG_IS_DIR, GARBAGE], &args);
        let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
        let problems = problems_of(&stats);
        let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        let root = home.home.join(DAMAGED);
        assert_eq!(
            paths,
            [
                root.join(OTHER_ID).join("meta.json"),
                root.join(LOG_IS_DIR).join("messages.jsonl"),
                root.join(GARBAGE).join("meta.json"),
            ]
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect::<Vec<_>>(),
            "{backend}"
        );
        assert!(
            problems[0]
                .1
                .contains("aaaaaaaa-0000-4000-8000-0000000000ff"),
            "{problems:?}"
        );
        assert!(problems.iter().all(|(_, why)| !why.is_empty()));
        let mut want = clean.json_on(backend, &args);
        assert_eq!(problems_of(&want), vec![], "a clean home has none");
        // The session whose log is a directory still counts: its meta is fine, its log is
        // skipped.
        want["sessions"] = (want["sessions"].as_u64().unwrap() + 1).into();
        assert_eq!(without_problems(stats), without_problems(want), "{backend}");

        // session list: the good metas (the one with a directory for a log included); a bare
        // array, so the problems go to stderr.
        let args = ["session", "list", "--all", "--json"];
        let out = home.run_on(backend, &args);
        assert!(out.status.success(), "{backend} {args:?}");
        assert_warned(&out.stderr, &[OTHER_ID, GARBAGE], &args);
        let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut ids: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        let want = clean.json_on(backend, &args);
        let mut want_ids: Vec<&str> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        want_ids.push(LOG_IS_DIR);
        ids.sort_unstable();
        want_ids.sort_unstable();
        assert_eq!(ids, want_ids, "{backend}");
    }

    // index rebuild: the good sessions indexed, the damaged ones reported.
    let args = ["index", "rebuild", "--json"];
    let out = home.run_on("sqlite", &args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_warned(&out.stderr, &[OTHER_ID, LOG_IS_DIR, GARBAGE], &args);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(problems_of(&report).len(), 3, "{report}");
    let want = clean.json_on("sqlite", &args);
    assert_eq!(report["messages"], want["messages"]);
    assert_eq!(report["sessions"], want["sessions"].as_u64().unwrap() + 1);
    let out = home.run_on("sqlite", &["index", "rebuild"]);
    assert!(out.status.success());
    assert_warned(&out.stderr, &[OTHER_ID, LOG_IS_DIR, GARBAGE], &args);
}

/// Adds `n` sessions of `turns` turns each, written as the original writes them (plain files).
fn add_sessions(home: &Ctx, n: usize, turns: usize) {
    let base = home.home.join("sessions/home__dev__bulk");
    for s in 0..n {
        let id = format!("bbbbbbbb-0000-4000-8000-{s:012}");
        let dir = base.join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        let t0 = 1_768_000_000_000i64 + (s as i64) * 1000;
        std::fs::write(
            dir.join("meta.json"),
            format!(
                r#"{{"id":"{id}","title":"bulk {s}","projectPath":"/home/dev/bulk","provider":"x","status":"active","createdAt":{t0},"updatedAt":{t0},"lastTurnAt":{t0},"turnCount":{turns}}}"#
            ),
        )
        .unwrap();
        let mut log = String::new();
        for t in 0..turns {
            log.push_str(&format!(
                r#"{{"id":"u-{s}-{t}","role":"user","parts":[{{"type":"text","content":"please refactor the invoice module part {t}"}}],"timestamp":{}}}"#,
                t0 + t as i64
            ));
            log.push('\n');
            log.push_str(&format!(
                r#"{{"id":"a-{s}-{t}","role":"assistant","parts":[{{"type":"text","content":"refactored invoice part {t}"}},{{"type":"tool","tool":{{"name":"edit"}},"result":"ok {s} {t}"}}],"timestamp":{}}}"#,
                t0 + t as i64
            ));
            log.push('\n');
        }
        std::fs::write(dir.join("messages.jsonl"), log).unwrap();
    }
}

#[test]
fn readers_never_fail_while_other_processes_rebuild_the_index() {
    const READERS: usize = 3;
    const CALLS_PER_READER: usize = 60;
    let home = index_home();
    add_sessions(&home, 150, 8);
    let commands: [&[&str]; 3] = [
        &["search", "invoice", "--json", "--limit", "50"],
        &["stats", "--json"],
        &["session", "list", "--all", "--json"],
    ];
    // The answers of a quiet home, from the index.
    let want: Vec<Vec<u8>> = commands
        .iter()
        .map(|args| {
            let out = home.run_on("sqlite", args);
            assert!(out.status.success(), "{args:?}");
            out.stdout
        })
        .collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (failures, rebuilds, calls, scans) =
        std::thread::scope(|s| {
            let rebuilder = s.spawn(|| {
                let mut failed = Vec::new();
                let mut n = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let out = home.run_on("sqlite", &["index", "rebuild"]);
                    n += 1;
                    if !out.status.success() {
                        failed.push(format!("rebuild: {}", String::from_utf8_lossy(&out.stderr)));
                    }
                }
                (failed, n)
            });
            // A writer that changes files without changing any answer, so that readers' refreshes
            // write while rebuilds run: a meta.json's mtime moves (its row is rewritten), and a
            // log grows by a blank line (its watermark moves).
            let toucher = s.spawn(|| {
                let mut n = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let dir = home.home.join(format!(
                        "sessions/home__dev__bulk/bbbbbbbb-0000-4000-8000-{:012}",
                        n % 150
                    ));
                    std::fs::File::options()
                        .append(true)
                        .open(dir.join("messages.jsonl"))
                        .unwrap()
                        .write_all(b"\n")
                        .unwrap();
                    std::fs::File::options()
                        .write(true)
                        .open(dir.join("meta.json"))
                        .unwrap()
                        .set_modified(std::time::SystemTime::now())
                        .unwrap();
                    n += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                n
            });
            let readers: Vec<_> =
                (0..READERS)
                    .map(|r| {
                        let (home, want, commands) = (&home, &want, &commands);
                        s.spawn(move || {
                            let (mut failed, mut scanned) = (Vec::new(), 0usize);
                            for i in 0..CALLS_PER_READER {
                                let c = (r + i) % commands.len();
                                let out = home.run_on("sqlite", commands[c]);
                                // Falling back to a scan is allowed (same answer); it is counted.
                                scanned += usize::from(
                                    String::from_utf8_lossy(&out.stderr)
                                        .contains("scanning the files"),
                                );
                                if !out.status.success() {
                                    failed.push(format!(
                                        "{:?}: {}",
                                        commands[c],
                                        String::from_utf8_lossy(&out.stderr)
                                    ));
                                } else if out.stdout != want[c] {
                                    let (got, want) = (
                                        String::from_utf8_lossy(&out.stdout),
                                        String::from_utf8_lossy(&want[c]),
                                    );
                                    let at = got
                                        .char_indices()
                                        .zip(want.chars())
                                        .find(|((_, a), b)| a != b)
                                        .map_or(0, |((i, _), _)| i);
                                    failed.push(format!(
                                "{:?}: a different answer from byte {at}: {:?} instead of {:?}",
                                commands[c],
                                got.get(at..).unwrap_or("").chars().take(80).collect::<String>(),
                                want.get(at..).unwrap_or("").chars().take(80).collect::<String>()
                            ));
                                }
                            }
                            (failed, scanned)
                        })
                    })
                    .collect();
            let mut failures = Vec::new();
            let mut scans = 0;
            for h in readers {
                let (failed, scanned) = h.join().unwrap();
                failures.extend(failed);
                scans += scanned;
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let (rebuild_failures, rebuilds) = rebuilder.join().unwrap();
            assert!(toucher.join().unwrap() > 0);
            failures.extend(rebuild_failures);
            (failures, rebuilds, READERS * CALLS_PER_READER, scans)
        });
    eprintln!(
        "{calls} reader calls, {rebuilds} rebuilds, {} failures, {scans} answered by a scan",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {calls} reader calls (and {rebuilds} rebuilds) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A session of `ctx`'s home written through the store, one user message `text`; with `agent`,
/// its meta says `freecode import` read it from that agent (`importedFrom.agent`).
fn session_by(ctx: &Ctx, agent: Option<&str>, text: &str) -> String {
    use freecode_core::StoredMessage;
    use freecode_core::message::{Part, Role};
    let store = freecode_store::SessionStore::open(freecode_store::Home::new(&ctx.home)).unwrap();
    let id = store
        .create(freecode_store::NewSession {
            title: format!("by {}", agent.unwrap_or("us")),
            project_path: "/work/agents".into(),
            provider: "scripted".into(),
            model: None,
        })
        .unwrap();
    let mut w = store.writer(&id).unwrap();
    w.append(&StoredMessage::new(
        "m-1",
        Role::User,
        vec![Part::text(text)],
        1_800_000_000_000,
    ))
    .unwrap();
    if let Some(agent) = agent {
        w.update_meta(|m| {
            m.extra.insert(
                "importedFrom".into(),
                serde_json::json!({"agent": agent, "path": "/src/a.jsonl", "sourceId": "s-1"}),
            );
        })
        .unwrap();
    }
    id.to_string()
}

fn session_ids(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s.get("sessionId")
                .or(s.get("id"))
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids
}

#[test]
fn agent_filters_select_imported_sessions_on_both_backends() {
    let ctx = Ctx::empty();
    let codex = session_by(&ctx, Some("codex"), "platypus in codex");
    let ours = session_by(&ctx, None, "platypus in freecode");
    for backend in ["sqlite", "json"] {
        let list = |agent: &str| {
            session_ids(&ctx.json_on(backend, &["session", "list", "--json", "--agent", agent]))
        };
        assert_eq!(list("codex"), [codex.as_str()], "{backend}");
        assert_eq!(list("freecode"), [ours.as_str()], "{backend}");
        // An agent no session has: an empty list, as a project nothing was done in.
        assert!(list("no-such-agent").is_empty(), "{backend}");
        let search = |agent: &str| {
            session_ids(&ctx.json_on(backend, &["search", "platypus", "--json", "--agent", agent]))
        };
        assert_eq!(search("codex"), [codex.as_str()], "{backend}");
        assert_eq!(search("freecode"), [ours.as_str()], "{backend}");
        // Each hit names its agent; the text names it once hits come from another agent.
        let hits = ctx.json_on(backend, &["search", "platypus", "--json"]);
        let mut agents: Vec<&str> = hits
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["agent"].as_str().unwrap())
            .collect();
        agents.sort_unstable();
        assert_eq!(agents, ["codex", "freecode"], "{backend}");
        let text = String::from_utf8(ctx.run_on(backend, &["search", "platypus"]).stdout).unwrap();
        let line = |id: &str| text.lines().find(|l| l.starts_with(id)).unwrap().to_owned();
        assert!(line(&codex).contains("  codex     "), "{text}");
        assert!(line(&ours).contains("  freecode  "), "{text}");
        let only_ours = String::from_utf8(
            ctx.run_on(backend, &["search", "platypus", "--agent", "freecode"])
                .stdout,
        )
        .unwrap();
        assert!(!only_ours.contains("  freecode  "), "{only_ours}");
        // Nothing matches: search's "no match" (exit 1, nothing on stderr), not an error.
        let out = ctx.run_on(
            backend,
            &["search", "platypus", "--json", "--agent", "goose"],
        );
        assert_eq!(out.status.code(), Some(1), "{backend}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--fresh` on `session list`, `search` and `stats`: what another program changed in place in a
/// quiet session (no note in the change journal, no directory changed) is seen at once; without
/// it, at the next scheduled full check.
#[test]
fn fresh_sees_an_in_place_change_to_a_quiet_session_at_once() {
    let ctx = index_home();
    let listed = ctx.json(&["session", "list", "--json"]);
    let first = listed.as_array().unwrap()[0].clone();
    let id = first["id"].as_str().unwrap().to_owned();
    // The first search indexes every log (a first look is a full check).
    ctx.run(&["search", "anything"]);
    // Quiet: nothing is recently changed any more (as ten minutes later).
    let db = rusqlite::Connection::open(ctx.home.join("state/freecode.db")).unwrap();
    db.execute("UPDATE idx_recent SET atMs = 0", []).unwrap();
    // Another program rewrites the meta in place, and appends a message, as the original does.
    let dir = common::find_below(&ctx.home.join("sessions"), &id);
    let meta_path = dir.join("meta.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["title"] = "Titre changé à la main ✓".into();
    std::fs::write(&meta_path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("messages.jsonl"))
        .unwrap();
    writeln!(
        log,
        r#"{{"id":"m-fresh","role":"user","parts":[{{"type":"text","content":"ornithorynque"}}],"timestamp":1700000000000}}"#
    )
    .unwrap();
    drop(log);
    let title_of = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id.as_str())
            .map(|m| m["title"].as_str().unwrap().to_owned())
    };
    let stale = ctx.json(&["session", "list", "--json"]);
    assert_ne!(
        title_of(&stale).as_deref(),
        Some("Titre changé à la main ✓")
    );
    assert!(!ctx.run(&["search", "ornithorynque"]).status.success());
    let fresh = ctx.json(&["session", "list", "--fresh", "--json"]);
    assert_eq!(
        title_of(&fresh).as_deref(),
        Some("Titre changé à la main ✓")
    );
    let hits = ctx.json(&["search", "ornithorynque", "--fresh", "--json"]);
    assert_eq!(hits[0]["sessionId"], id.as_str());
    assert!(ctx.run(&["stats", "--fresh", "--json"]).status.success());
}

/// A person looks for a conversation, not a line: `search` answers each session once, its best
/// message standing for it with the session's other matching messages counted (and their ids
/// in `--json`); `--limit N` is N sessions; `--per-message` answers every message.
#[test]
fn search_answers_each_conversation_once() {
    use freecode_core::StoredMessage;
    use freecode_core::message::{Part, Role};
    let ctx = Ctx::missing();
    let store = freecode_store::SessionStore::open(freecode_store::Home::new(&ctx.home)).unwrap();
    let make = |title: &str, texts: &[&str]| {
        let id = store
            .create(freecode_store::NewSession {
                title: title.into(),
                project_path: "/work/okapi".into(),
                provider: "scripted".into(),
                model: None,
            })
            .unwrap();
        let mut w = store.writer(&id).unwrap();
        for (i, t) in texts.iter().enumerate() {
            w.append(&StoredMessage::new(
                format!("m-{i}"),
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                vec![Part::text(*t)],
                1_800_000_000_000 + i as i64,
            ))
            .unwrap();
        }
        id.to_string()
    };
    let chatty = make(
        "l'okapi, encore",
        &[
            "okapi one",
            "okapi two",
            "okapi three",
            "okapi four",
            "okapi five",
        ],
    );
    let quiet = make("another", &["a single okapi here"]);
    let json = |args: &[&str]| -> Value { serde_json::from_str(&ctx.ok(args)).unwrap() };
    let hits = json(&["search", "okapi", "--mode", "words", "--json"]);
    let sessions: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 2, "{hits:#}");
    assert!(sessions.contains(&chatty.as_str()) && sessions.contains(&quiet.as_str()));
    let of = |id: &str| {
        hits.as_array()
            .unwrap()
            .iter()
            .find(|h| h["sessionId"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(of(&chatty)["otherMatches"], 4, "{hits:#}");
    assert_eq!(of(&chatty)["otherMessageIds"].as_array().unwrap().len(), 4);
    assert!(of(&quiet).get("otherMatches").is_none());
    // --limit counts sessions.
    assert_eq!(
        json(&[
            "search", "okapi", "--mode", "words", "--limit", "1", "--json"
        ])
        .as_array()
        .unwrap()
        .len(),
        1
    );
    // --per-message: every message, several of one session.
    let all = json(&[
        "search",
        "okapi",
        "--mode",
        "words",
        "--per-message",
        "--json",
    ]);
    assert_eq!(all.as_array().unwrap().len(), 6, "{all:#}");
    // A person sees the count.
    let text = ctx.ok(&["search", "okapi", "--mode", "words"]);
    assert!(
        text.contains("+ 4 other messages of this session match"),
        "{text}"
    );
}
