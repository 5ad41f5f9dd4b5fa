//! One home with the original, both ways (issue 12): the original's own code
//! (`../shared/reference/original/src`, unchanged, run under Node with `tsx` by
//! `tests/original/harness.mts`) reads a home our CLI wrote, and our CLI reads a home the
//! original's code wrote, and each side's readings are compared value by value.
//!
//! Needs Node and npm (`.ci/run` and `scripts/test-deps` install them); `tsx` is installed once
//! into `$FREECODE_REF_NODE` (default `/tmp/freecode-ref-node`, the directory the original's
//! `run-bench.sh` uses). The only differences allowed are those docs/compatibility.md lists.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::mock_openai::{End, MockOpenAi, Progress, Reply, text};
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reference_src() -> PathBuf {
    let src = repo_root().join("../shared/reference/original/src");
    assert!(
        src.join("session/store.ts").is_file(),
        "the original's code is missing at {}",
        src.display()
    );
    src
}

/// The `tsx` binary, installed with npm on first use, as `run-bench.sh` does.
fn tsx() -> PathBuf {
    let dir = std::env::var_os("FREECODE_REF_NODE")
        .map_or_else(|| PathBuf::from("/tmp/freecode-ref-node"), PathBuf::from);
    let bin = dir.join("node_modules/.bin/tsx");
    if !bin.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let npm = |args: &[&str]| {
            Command::new("npm")
                .args(args)
                .current_dir(&dir)
                .stdout(Stdio::null())
                .status()
                .unwrap_or_else(|e| {
                    panic!("this test runs the original under Node: install nodejs and npm ({e})")
                })
        };
        if !dir.join("package.json").exists() {
            assert!(npm(&["init", "-y"]).success());
        }
        assert!(npm(&["install", "--silent", "--no-audit", "--no-fund", "tsx@4"]).success());
    }
    bin
}

/// Runs the harness with `HOME=parent` (the home is `parent/.freecode`), returning its JSON,
/// read as we read the original's files (lone surrogates as U+FFFD).
fn harness(parent: &Path, args: &[&str]) -> Value {
    let out = Command::new(tsx())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/original/harness.mts"))
        .args(args)
        .env("HOME", parent)
        .env("REF", reference_src())
        .current_dir(parent)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "harness {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    freecode_core::json::from_slice_lossy::<Value>(&out.stdout)
        .unwrap()
        .value
}

struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join(".freecode")).unwrap();
        Self { tmp }
    }

    fn parent(&self) -> &Path {
        self.tmp.path()
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join(".freecode")
    }

    /// The binary, recording rollout logs as a user's runs do.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = common::freecode(&self.home());
        c.env_remove("FREECODE_ROLLOUT")
            .env("FREECODE_SCRIPTED_DELAY_MS", "0")
            .env_remove("OPENAI_API_KEY")
            .args(args);
        c
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().unwrap();
        assert!(
            out.status.success(),
            "freecode {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// A project directory (created) whose path holds `name`.
    fn project(&self, name: &str) -> String {
        let dir = self.parent().join("work").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap().to_str().unwrap().to_owned()
    }

    fn run_in(&self, project: &str, prompt: &str) -> String {
        self.ok(&[
            "run",
            "--provider",
            "scripted",
            "--project",
            project,
            prompt,
        ]);
        let list = self.json(&[
            "session",
            "list",
            "--json",
            "--project",
            project,
            "--sort",
            "created",
        ]);
        list[0]["id"].as_str().unwrap().to_owned()
    }

    fn ids(&self, args: &[&str]) -> BTreeSet<String> {
        let mut all = vec!["session", "list", "--json"];
        all.extend_from_slice(args);
        self.json(&all)
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    }

    fn messages(&self, id: &str) -> Value {
        self.json(&["session", "show", id, "--json"])["messages"].clone()
    }

    /// The meta `session show --json` prints, less `agent` (ours, derived, which the original
    /// does not write): what `meta.json` says.
    fn meta(&self, id: &str) -> Value {
        let mut v = self.json(&["session", "show", id, "--json"]);
        let m = v.as_object_mut().unwrap();
        m.remove("messages");
        assert!(m.remove("agent").is_some_and(|a| a.is_string()), "{id}");
        v
    }
}

/// An interrupted run, as a user makes one: a real provider stream, Ctrl+C mid-answer.
fn interrupted_run(h: &Home, project: &str) -> String {
    let mock = MockOpenAi::start(vec![Reply::Stream {
        payloads: vec![text("Half an "), text("answer")],
        delay: Duration::from_millis(20),
        end: End::Hang,
    }]);
    let mut c = h.cmd(&[
        "run",
        "--base-url",
        &mock.base_url,
        "--project",
        project,
        "answer slowly",
    ]);
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    mock.wait_for(Duration::from_secs(20), |p| {
        matches!(p, Progress::Sent { chunks: 2, .. })
    });
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = h.json(&["session", "list", "--json", "--project", project]);
    list[0]["id"].as_str().unwrap().to_owned()
}

/// The ids of a JSON array of strings.
fn id_set(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Our trace/replay against the original's folds over the same log.
fn same_folds(h: &Home, id: &str, theirs: &Value) {
    let trace = h.json(&["trace", id, "--json"]);
    let t = &theirs["trace"];
    assert_eq!(
        trace["modelSpans"].as_array().unwrap().len() as u64,
        t["modelSpans"],
        "{id}"
    );
    assert_eq!(
        trace["toolSpans"].as_array().unwrap().len() as u64,
        t["toolSpans"],
        "{id}"
    );
    for (ours, orig) in [
        ("inputTokens", "inputTokens"),
        ("outputTokens", "outputTokens"),
        ("cacheReadTokens", "cacheReadTokens"),
        ("modelMs", "model_ms"),
        ("toolMs", "tool_ms"),
        ("hung", "hung"),
        ("inFlight", "inFlight"),
    ] {
        assert_eq!(trace[ours], t[orig], "{id}: trace {ours}");
    }
    let replay = h.json(&["replay", id, "--json"]);
    let r = &theirs["replay"];
    for key in [
        "totalTurns",
        "totalCalls",
        "totalTokensBefore",
        "totalTokensAfter",
        "compactCount",
    ] {
        assert_eq!(replay[key], r[key], "{id}: replay {key}");
    }
    // The original's recorder resumes after the last event of the log we wrote.
    let events = theirs["events"].as_array().unwrap();
    let last_seq = events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .unwrap_or(0);
    assert_eq!(
        theirs["recorderSeq"].as_u64(),
        Some(last_seq),
        "{id}: recorder seq"
    );
}

#[test]
fn the_original_finds_reads_and_continues_everything_our_cli_writes() {
    let h = Home::new();
    // Project paths the original's naming cannot round-trip, and ordinary ones.
    let names = [
        "plain",
        "x__y",
        "a_h_b",
        "web-/api",
        "web/-api",
        "a_/b",
        "my app",
        "项目 ünï",
        "C:drive",
    ];
    let mut ids = BTreeMap::new();
    for name in names {
        let p = h.project(name);
        ids.insert(
            name,
            (p.clone(), h.run_in(&p, &format!("explain {name} 🙂"))),
        );
    }
    let plain = ids["plain"].1.clone();
    // A second turn, a fork, a compaction, a delete, a restore, an import, an interrupted run.
    h.ok(&[
        "run",
        "--provider",
        "scripted",
        "--session",
        &plain,
        "and more",
    ]);
    let forked: Value = h.json(&["session", "fork", &plain, "--json"]);
    let fork_id = forked["sessionId"].as_str().unwrap().to_owned();
    let summary = h.parent().join("summary.md");
    std::fs::write(&summary, "The user asked about x__y; it was explained.").unwrap();
    h.ok(&[
        "run",
        "--provider",
        "scripted",
        "--session",
        &ids["x__y"].1,
        "go on",
    ]);
    let compacted = h.json(&[
        "session",
        "compact",
        &ids["x__y"].1,
        "--keep",
        "1",
        "--summary-file",
        summary.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(compacted["compacted"], true, "{compacted}");
    h.ok(&["session", "delete", &ids["a_/b"].1]);
    h.ok(&["session", "delete", &ids["web/-api"].1]);
    h.ok(&["session", "restore", &ids["web/-api"].1]);
    let bundle = h.parent().join("b.json");
    h.ok(&[
        "session",
        "export",
        &ids["my app"].1,
        "--file",
        bundle.to_str().unwrap(),
    ]);
    let imported: Value = h.json(&["session", "import", bundle.to_str().unwrap(), "--json"]);
    let imported_id = imported["sessionId"].as_str().unwrap().to_owned();
    let interrupted = interrupted_run(&h, &h.project("in-terrupted"));

    let orig = harness(h.parent(), &["read"]);
    let listed = id_set(&orig["listed"]);
    // The original lists what we list (deleted ones left out by both)…
    assert_eq!(listed, h.ids(&[]));
    assert!(listed.contains(&fork_id) && listed.contains(&imported_id));
    assert_eq!(
        orig["deleted"],
        serde_json::json!([ids["a_/b"].1.clone()]),
        "{orig:#}"
    );
    // …and finds every one of them by its project path, with our messages, value by value.
    let mut compared = 0;
    for id in listed.iter().chain([&ids["a_/b"].1]) {
        let theirs = &orig["sessions"][id];
        let meta = h.meta(id);
        assert_eq!(theirs["meta"], meta, "{id}: getMeta(id, projectPath)");
        let ours = h.messages(id);
        assert!(!ours.as_array().unwrap().is_empty(), "{id}");
        assert_eq!(
            theirs["messages"], ours,
            "{id}: getMessages(id, projectPath)"
        );
        // The directory it looks in is the one we wrote to.
        let dir = h
            .home()
            .join("sessions")
            .join(theirs["dirName"].as_str().unwrap())
            .join(id);
        assert!(dir.join("meta.json").is_file(), "{id}: {}", dir.display());
        // Listing by project path gives this project's sessions only (ours filter too).
        let project = meta["projectPath"].as_str().unwrap();
        // `--project` takes the directories below it too; the original's filter is equality.
        let mut ours_by_project = h.ids(&["--project", project]);
        ours_by_project.retain(|s| h.meta(s)["projectPath"] == project);
        let theirs_by_project = id_set(&theirs["byProject"]);
        assert_eq!(
            theirs_by_project, ours_by_project,
            "{id}: list({{projectPath}})"
        );
        compared += ours.as_array().unwrap().len();
    }
    assert!(compared > 20, "{compared} messages compared");
    let events: usize = orig["rollout"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["events"].as_array().unwrap().len())
        .sum();
    eprintln!(
        "the original read {} sessions, {compared} messages and {events} events our CLI wrote",
        listed.len() + 1
    );
    // The interrupted run is the one its agent offers to resume, at the marked message.
    assert_eq!(orig["interrupted"]["sessionId"], interrupted.as_str());
    let last = h
        .messages(&interrupted)
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["interrupted"], true);
    assert_eq!(orig["interrupted"]["messageId"], last["id"]);
    // Every rollout log we wrote folds to the same trace and replay on both sides.
    let rollout = orig["rollout"].as_object().unwrap();
    assert!(rollout.contains_key(&plain) && rollout.contains_key(&interrupted));
    for (id, theirs) in rollout {
        same_folds(&h, id, theirs);
    }

    // The original continues one of ours in a directory it names lossily (`x__y` and
    // `web-/api` were `esc-…` before): its append and meta update land where we read them.
    for name in ["x__y", "web-/api"] {
        let (project, id) = &ids[name];
        let before = h.messages(id).as_array().unwrap().len();
        let theirs = harness(h.parent(), &["continue", id, project]);
        let ours = h.messages(id);
        assert_eq!(ours.as_array().unwrap().len(), before + 1, "{name}");
        assert_eq!(theirs["messages"], ours, "{name}");
        assert_eq!(h.meta(id)["title"], "continued by the original");
        // …and we continue after it.
        h.ok(&[
            "run",
            "--provider",
            "scripted",
            "--session",
            id,
            "and us again",
        ]);
        assert!(h.messages(id).as_array().unwrap().len() > before + 1);
    }
    let cont = harness(h.parent(), &["import", bundle.to_str().unwrap()]);
    let theirs_id = cont["managerId"].as_str().unwrap().to_owned();
    // The original's importers read our bundle: `metadata` and parts-form messages.
    assert_eq!(cont["remote"]["title"], h.meta(&ids["my app"].1)["title"]);
    assert_eq!(cont["remote"]["projectPath"], ids["my app"].0.as_str());
    let ours_after = h.messages(&theirs_id);
    assert_eq!(cont["imported"]["messages"], ours_after);
    assert_eq!(ours_after, h.messages(&ids["my app"].1));
}

#[test]
fn an_earlier_versions_escaped_session_becomes_the_originals_on_its_next_write() {
    let h = Home::new();
    let p = h.project("web-/api");
    let id = h.run_in(&p, "hello");
    // Put it where an earlier version of ours wrote it: `esc-<path percent-encoded>`.
    let sessions = h.home().join("sessions");
    let name = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .next()
        .unwrap();
    let legacy = freecode_core::project_key::legacy_dir_names(&p);
    assert_eq!(legacy.len(), 1, "{p}");
    std::fs::rename(sessions.join(&name), sessions.join(&legacy[0])).unwrap();
    let before = harness(h.parent(), &["read"]);
    assert_eq!(
        before["sessions"][&id]["meta"],
        Value::Null,
        "the original cannot find it there"
    );
    // Read by us where it is; one write moves it to the original's name.
    let messages = h.messages(&id);
    assert!(!messages.as_array().unwrap().is_empty());
    h.ok(&["session", "rename", &id, "renamed"]);
    assert!(!sessions.join(&legacy[0]).exists());
    let after = harness(h.parent(), &["read"]);
    assert_eq!(after["sessions"][&id]["meta"]["title"], "renamed");
    assert_eq!(after["sessions"][&id]["messages"], messages);
    assert_eq!(h.messages(&id), messages);
}

#[test]
fn our_cli_reads_everything_the_originals_code_writes_surrogates_included() {
    let h = Home::new();
    let orig = harness(h.parent(), &["write"]);
    let listed = id_set(&orig["listed"]);
    assert_eq!(listed.len(), 5);
    assert_eq!(h.ids(&[]), listed);
    let all = h.ids(&["--all"]);
    let deleted = id_set(&orig["deleted"]);
    assert_eq!(all, listed.union(&deleted).cloned().collect());
    let mut messages = 0;
    for id in &all {
        let theirs = &orig["sessions"][id];
        // Metas and messages equal value by value; the original's lone surrogates (a title and
        // a tool result cut inside an emoji) read as U+FFFD on both sides of the comparison.
        assert_eq!(h.meta(id), theirs["meta"], "{id}");
        let ours = h.messages(id);
        assert_eq!(ours, theirs["messages"], "{id}");
        assert!(
            ours.to_string().contains('\u{FFFD}'),
            "{id}: the cut string is read"
        );
        messages += ours.as_array().unwrap().len();
    }
    assert_eq!(messages, 18);
    // The interrupted one, as its agent would resume it.
    let interrupted = orig["interrupted"]["sessionId"].as_str().unwrap();
    let list = h.json(&["session", "list", "--json", "--status", "interrupted"]);
    assert_eq!(list[0]["id"], interrupted);
    // The same events on both sides: the same folds.
    let rollout = orig["rollout"].as_object().unwrap();
    assert_eq!(rollout.len(), 5);
    let mut events = 0;
    for (id, theirs) in rollout {
        same_folds(&h, id, theirs);
        events += theirs["events"].as_array().unwrap().len();
    }
    assert_eq!(events, 30);
    eprintln!(
        "our CLI read {} sessions, {messages} messages and {events} events the original wrote",
        all.len()
    );
}

/// The index's look (issue 45) over sessions the original's own code writes while our index
/// keeps looking: its new sessions are seen at the next look (their project directories
/// changed), its append and meta rewrite to a session it wrote minutes ago too (recently changed),
/// and the same to a quiet session at once with `--fresh` (else at the next scheduled full check).
#[test]
fn the_index_sees_what_the_originals_code_writes_in_a_home_it_has_looked_at() {
    let h = Home::new();
    let titles = |args: &[&str]| -> BTreeMap<String, String> {
        let mut all = vec!["session", "list", "--json"];
        all.extend_from_slice(args);
        h.json(&all)
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["title"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let found = |words: &str, args: &[&str]| -> bool {
        let mut all = vec!["search", words];
        all.extend_from_slice(args);
        h.cmd(&all).output().unwrap().status.success()
    };
    // Our index has looked at the (empty) home, logs and metas.
    assert!(titles(&[]).is_empty());
    assert!(!found("question", &[]));
    // The original writes six sessions: the next look sees every one, and their messages.
    let orig = harness(h.parent(), &["write"]);
    let listed = id_set(&orig["listed"]);
    assert_eq!(titles(&[]).keys().cloned().collect::<BTreeSet<_>>(), listed);
    assert!(found("ünïcödé", &[]));
    // It continues one of them minutes later (an append, a meta rewritten in place): recent.
    let mut ids = listed.iter();
    let first = ids.next().unwrap().clone();
    let path = |id: &str| {
        orig["sessions"][id]["meta"]["projectPath"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    harness(h.parent(), &["continue", &first, &path(&first)]);
    assert_eq!(titles(&[])[&first], "continued by the original");
    assert!(found("continued", &[]));
    // Quiet for a while (nothing recent), then the original continues another: not seen by a
    // look that stats no quiet session, seen at once with --fresh.
    let db = rusqlite::Connection::open(h.home().join("state/freecode.db")).unwrap();
    db.execute("UPDATE idx_recent SET atMs = 0", []).unwrap();
    let second = ids.next().unwrap().clone();
    let before = titles(&[])[&second].clone();
    harness(h.parent(), &["continue", &second, &path(&second)]);
    assert_eq!(titles(&[])[&second], before);
    assert_eq!(titles(&["--fresh"])[&second], "continued by the original");
}
