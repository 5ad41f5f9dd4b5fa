//! `freecode import` as a user meets it: the real binary, a temporary home, private copies of
//! the agents' fixture files (`../shared/fixtures/external/<agent>/`). One table-driven check
//! per fixture ([`check_fixture`], a row per file of every agent, and
//! [`every_external_fixture_is_covered`] fails on a file without one): the import succeeds; the message count is the source's user prompts and merged responses; a
//! word only that file holds is found by `search`; `trace` shows its tool calls with durations
//! from the source's timestamps (re-read from the raw records per agent); re-import adds
//! nothing; a torn copy imports its complete part and completes once the rest is appended (a
//! SQLite source: a copy read beside a live WAL writer); children carry `parentId`; the source files are
//! never written to.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod fixtures;

use fixtures::{CODEX, copy_fixture, json, main_session, schema_check, stored_messages};

#[test]
fn a_grown_session_gets_only_the_new_messages_and_its_trace_grows() {
    let ctx = common::Ctx::missing();
    let src = ctx.tmp.path().join("projects").join("-work-p");
    std::fs::create_dir_all(&src).unwrap();
    let file = src.join("a1b2.jsonl");
    let line = |uuid: &str, parent: Option<&str>, ts: &str, kind: &str, content: Value| {
        let mut v = serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": parent,
            "timestamp": ts, "cwd": "/work/p", "sessionId": "a1b2", "version": "2.1.0",
            "message": {"role": kind, "content": content}});
        if kind == "assistant" {
            v["message"]["id"] = Value::from(format!("msg_{uuid}"));
            v["message"]["model"] = Value::from("claude-test");
            v["message"]["usage"] = serde_json::json!({"input_tokens": 5, "output_tokens": 2});
        }
        format!("{v}\n")
    };
    std::fs::write(
        &file,
        line(
            "u1",
            None,
            "2026-03-01T10:00:00Z",
            "user",
            Value::from("zebrafish question"),
        ) + &line(
            "a1",
            Some("u1"),
            "2026-03-01T10:00:03Z",
            "assistant",
            serde_json::json!([{"type": "text", "text": "first answer"}]),
        ),
    )
    .unwrap();
    // CLAUDE_CONFIG_DIR's projects/ is the default root.
    let import = |args: &[&str]| {
        let out = ctx
            .cmd(&[])
            .env("CLAUDE_CONFIG_DIR", ctx.tmp.path())
            .args(["import", "claude-code"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let first: Value = serde_json::from_slice(&import(&["--json"]).stdout).unwrap();
    let id = main_session(&first)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(
        (line(
            "u2",
            Some("a1"),
            "2026-03-01T10:01:00Z",
            "user",
            Value::from("and narwhals?"),
        ) + &line(
            "a2",
            Some("u2"),
            "2026-03-01T10:01:05Z",
            "assistant",
            serde_json::json!([{"type": "text", "text": "second answer"}]),
        ))
            .as_bytes(),
    )
    .unwrap();
    drop(f);
    let out = import(&[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with(&format!("updated   {id}")), "{stdout}");
    assert!(stdout.contains("(+2 messages)"), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("1 updated"), "{stderr}");
    assert_eq!(stored_messages(&ctx.home, &id), 4);
    let trace = json(&ctx.home, &["trace", &id, "--json"]);
    let spans = trace["modelSpans"].as_array().unwrap();
    assert_eq!(spans.len(), 2);
    // The second request went out with the prompt (10:01:00) and was answered at 10:01:05.
    assert_eq!(spans[1]["durationMs"], 5000);
    let found = json(&ctx.home, &["search", "narwhals", "--json"]);
    assert_eq!(found[0]["sessionId"], id.as_str());
    let stats = json(&ctx.home, &["stats", "--json"]);
    assert!(stats["turns"].as_u64().unwrap() >= 2, "{stats:#}");
    let replay = json(&ctx.home, &["replay", &id, "--json"]);
    assert_eq!(replay["turns"].as_array().unwrap().len(), 2, "{replay:#}");

    // --since: a session last active before it is left out.
    let out = import(&["--since", "2026-03-02", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["sessions"][0]["action"], "unchanged",
        "stat-skipped: {v:#}"
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(b"not json\n")
        .unwrap();
    let out = import(&["--since", "2026-03-02"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with(&format!("skipped   {id}")), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(&format!("{}:5: not JSON, skipped", file.display())),
        "{stderr}"
    );
}

#[test]
fn dry_run_and_detect_write_nothing() {
    let ctx = common::Ctx::missing();
    let config = ctx.tmp.path().join("claude");
    let projects = config.join("projects").join("-p");
    std::fs::create_dir_all(&projects).unwrap();
    let key = format!("ghp_{}", "R8mZ2kQ7vLx9Tn4Wp1Yc6Hd3Jf5Gs0Bq8Ua2");
    let rec = serde_json::json!({"type":"user","uuid":"u1","parentUuid":null,
        "timestamp":"2026-01-01T00:00:00Z","cwd":"/p","sessionId":"s",
        "message":{"role":"user","content":format!("my token is {key}")}});
    std::fs::write(projects.join("s.jsonl"), format!("{rec}\n")).unwrap();
    let out = ctx
        .cmd(&[])
        .env("CLAUDE_CONFIG_DIR", &config)
        .args(["import", "claude-code", "--dry-run", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    schema_check("import-result.json", &v);
    assert_eq!(v["dryRun"], true);
    assert_eq!(v["summary"]["imported"], 1);
    assert_eq!(v["summary"]["redactions"], 1);
    assert_eq!(v["summary"]["redactionsByRule"]["github-pat"], 1, "{v}");
    // Each finding by its rule, its place and a masked preview; never the value.
    let f = &v["sessions"][0]["findings"][0];
    assert_eq!(f["kind"], "github-pat", "{v}");
    assert_eq!(f["location"], "messages[0].parts[0].content", "{v}");
    assert_eq!(f["preview"], "ghp_…Ua2", "{v}");
    assert!(!v["sessions"][0]["findings"].to_string().contains(&key));
    let human = ctx
        .cmd(&[])
        .env("CLAUDE_CONFIG_DIR", &config)
        .args(["import", "claude-code", "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("github-pat  messages[0].parts[0].content  ghp_…Ua2"),
        "{text}"
    );
    assert!(!ctx.home.exists(), "a dry run writes nothing");

    let out = ctx
        .cmd(&[])
        .env("CLAUDE_CONFIG_DIR", &config)
        .env("HOME", ctx.tmp.path())
        .args(["import", "--detect", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    schema_check("import-detect.json", &v);
    let claude = &v["agents"][0];
    assert_eq!(claude["agent"], "claude-code");
    assert_eq!(
        claude["roots"][0],
        config.join("projects").to_str().unwrap()
    );
    assert_eq!(claude["sessions"], 1);
    assert_eq!(claude["messages"], 1);
    assert_eq!(v["agents"].as_array().unwrap().len(), 5);
    assert!(!ctx.home.exists(), "detect writes nothing");
}

/// `import --detect` counts what the import then writes: every session (subagent runs and
/// forks included) and every message it writes (after a compaction, not before), over every
/// Claude Code fixture at once, one whose session is gone among them.
#[test]
fn detect_counts_exactly_what_the_import_writes() {
    let ctx = common::Ctx::missing();
    let config = ctx.tmp.path().join("claude");
    let project = config.join("projects/-work");
    freecode_testkit::copy_tree(
        &freecode_testkit::external_fixtures().join("claude-code"),
        &project,
    );
    // A subagent transcript whose session's file is gone.
    let orphan = project.join("orphan-session/subagents");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::copy(
        project.join(
            "schema/agentsessions-subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents/\
             agent-a0ad4f44468bdf20d.jsonl",
        ),
        orphan.join("agent-0rphan.jsonl"),
    )
    .unwrap();
    // A session compacted once: the import writes what follows the compaction.
    let rec = |v: Value| v.to_string() + "\n";
    let at = |s: u32| format!("2026-01-01T00:00:{s:02}Z");
    let msg = |uuid: &str, parent: Option<&str>, s: u32, role: &str, text: &str| {
        rec(
            serde_json::json!({"type": role, "uuid": uuid, "parentUuid": parent,
            "timestamp": at(s), "cwd": "/work", "sessionId": "compacted",
            "message": {"role": role, "content": text, "id": format!("m-{uuid}")}}),
        )
    };
    let text = [
        msg("u1", None, 1, "user", "first question"),
        msg("a1", Some("u1"), 2, "assistant", "first answer"),
        msg("u2", Some("a1"), 3, "user", "second question"),
        msg("a2", Some("u2"), 4, "assistant", "second answer"),
        rec(
            serde_json::json!({"type": "system", "subtype": "compact_boundary", "uuid": "b1",
            "parentUuid": null, "logicalParentUuid": "a2", "timestamp": at(5), "cwd": "/work",
            "sessionId": "compacted", "compactMetadata": {"preTokens": 900}}),
        ),
        rec(
            serde_json::json!({"type": "user", "isCompactSummary": true, "uuid": "cs",
            "parentUuid": "b1", "timestamp": at(6), "cwd": "/work", "sessionId": "compacted",
            "message": {"role": "user", "content": "two questions were answered"}}),
        ),
        msg("u3", Some("cs"), 7, "user", "third question"),
        msg("a3", Some("u3"), 8, "assistant", "third answer"),
    ]
    .concat();
    std::fs::write(project.join("compacted.jsonl"), text).unwrap();
    let run = |args: &[&str]| {
        let out = ctx
            .cmd(&[])
            .env("CLAUDE_CONFIG_DIR", &config)
            .env("HOME", ctx.tmp.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let detect = run(&["import", "--detect", "--json"]);
    let claude = &detect["agents"][0];
    let imported = run(&["import", "claude-code", "--json"]);
    let s = &imported["summary"];
    assert_eq!(s["skipped"], 0, "{imported:#}");
    assert_eq!(claude["sessions"], s["imported"], "{claude} {s}");
    assert_eq!(claude["messages"], s["messages"], "{claude} {s}");
    let orphaned = imported["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["path"].as_str().unwrap().ends_with("agent-0rphan.jsonl"))
        .unwrap_or_else(|| panic!("{imported:#}"));
    assert_eq!(orphaned["action"], "imported");
    assert!(orphaned["parentId"].is_string(), "{orphaned}");
    let compacted = imported["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["sourceId"] == "compacted")
        .unwrap();
    assert_eq!(compacted["messages"], 2, "{compacted}");
}

/// `freecode import` with no agent imports every agent `--detect` finds; a near name is
/// answered with the agent meant; a dry run says what would be written, not what was.
#[test]
fn import_with_no_agent_takes_every_agent_found_and_a_near_name_is_named() {
    let ctx = common::Ctx::missing();
    let config = ctx.tmp.path().join("claude");
    let project = config.join("projects/-work");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(
        freecode_testkit::external_fixtures().join("claude-code/genuine/spotter-short.jsonl"),
        project.join("spotter-short.jsonl"),
    )
    .unwrap();
    // No other agent of the machine's: every agent's locations inside the test's directory.
    let isolate = |c: &mut std::process::Command, tmp: &Path| {
        c.env("HOME", tmp.join("user-home"))
            .env("CODEX_HOME", tmp.join("no-codex"))
            .env("XDG_DATA_HOME", tmp.join("no-data"))
            .env("XDG_CONFIG_HOME", tmp.join("no-config"))
            .env_remove("GEMINI_CLI_HOME");
    };
    let cmd = |args: &[&str]| {
        let mut c = ctx.cmd(&[]);
        isolate(&mut c, ctx.tmp.path());
        c.env("CLAUDE_CONFIG_DIR", &config)
            .args(args)
            .output()
            .unwrap()
    };
    let out = cmd(&["import", "claude"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean claude-code?"), "{err}");
    let out = cmd(&["import", "--dry-run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("of claude-code") && err.contains("would be written"),
        "{err}"
    );
    assert!(!err.contains("messages written"), "{err}");
    let out = cmd(&["import", "--dry-run", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    schema_check("import-results.json", &v);
    assert_eq!(v[0]["agent"], "claude-code", "{v}");
    let out = cmd(&["import"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("1 imported"), "{err}");
    let list = json(&ctx.home, &["session", "list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["agent"], "claude-code");
    // Nothing of any agent here: it says where to look, and writes nothing.
    let empty = common::Ctx::missing();
    let mut c = empty.cmd(&[]);
    isolate(&mut c, empty.tmp.path());
    let out = c
        .env("CLAUDE_CONFIG_DIR", empty.tmp.path().join("none"))
        .args(["import"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--detect"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_directory_without_the_agents_file_names_says_what_it_looks_for() {
    // A Codex rollout saved under another name: found when given as a file, and the
    // directory holding it says why nothing was found there.
    let ctx = common::Ctx::missing();
    let src = ctx.tmp.path().join("src");
    let row = &CODEX[2];
    let file = copy_fixture(row, &src);
    let v = json(
        &ctx.home,
        &["import", "codex", src.to_str().unwrap(), "--json"],
    );
    assert_eq!(v["summary"]["units"], 0, "{v:#}");
    let issue = &v["issues"][0];
    assert_eq!(issue["path"], src.to_str().unwrap(), "{v:#}");
    assert!(
        issue["message"]
            .as_str()
            .unwrap()
            .contains("rollout-*.jsonl"),
        "{v:#}"
    );
    let v = json(
        &ctx.home,
        &["import", "codex", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(v["summary"]["imported"], 1, "{v:#}");
    assert!(v["issues"].as_array().unwrap().is_empty(), "{v:#}");
}

#[test]
fn unknown_agents_and_missing_paths_are_user_errors() {
    let ctx = common::Ctx::missing();
    let out = ctx.cmd(&[]).args(["import", "vim"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("claude-code, codex"));
    let out = ctx
        .cmd(&[])
        .args(["import", "claude-code", "/nonexistent/x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// A source's project directory is kept only as the absolute path it resolves to: `..` is
/// resolved on the text (`/.x/../../etc` is `/etc`), a relative one is refused unless the user
/// names a directory with `--project`, and `run -s` never roots its tools in a path with `..`
/// (an older version kept one as it came).
#[test]
fn a_sources_project_directory_is_normalised_and_a_relative_one_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = tmp.path().join("claude/projects/-srv-app");
    std::fs::create_dir_all(&src).unwrap();
    let session = |sid: &str, cwd: &str| {
        let line = |uuid: &str, parent: Option<&str>, ts: &str, role: &str, text: &str| {
            serde_json::json!({"type": role, "uuid": uuid, "parentUuid": parent, "timestamp": ts,
                "cwd": cwd, "sessionId": sid,
                "message": {"role": role, "content": text}})
            .to_string()
        };
        let text = [
            line(
                "u1",
                None,
                "2026-01-01T00:00:00.000Z",
                "user",
                "où en est le dépôt ?",
            ),
            line(
                "a1",
                Some("u1"),
                "2026-01-01T00:00:01.000Z",
                "assistant",
                "tout va bien",
            ),
        ]
        .join("\n")
            + "\n";
        std::fs::write(src.join(format!("{sid}.jsonl")), text).unwrap();
    };
    session("0b9b4c1e-0000-4000-8000-000000000001", "relative/../../etc");
    session("0b9b4c1e-0000-4000-8000-000000000002", "/.x/../../etc");
    let v = json(
        &home,
        &["import", "claude-code", src.to_str().unwrap(), "--json"],
    );
    // The relative one is imported too, under the unplaced project (the chat names no path).
    assert_eq!(v["summary"]["imported"], 2, "{v}");
    assert_eq!(v["summary"]["unplaced"], 1, "{v}");
    let placed = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s.get("placed"))
        .unwrap();
    assert_eq!(placed["how"], "unplaced", "{v}");
    assert!(
        placed["why"]
            .as_str()
            .unwrap()
            .contains("\"relative/../../etc\", not an absolute path"),
        "{v}"
    );
    let unplaced = home.join("unplaced").to_string_lossy().into_owned();
    let list = json(&home, &["session", "list", "--json"]);
    let mut paths: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["projectPath"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["/etc", unplaced.as_str()], "{list}");

    // Placed by the user, relative to where they stand, keeping its id.
    let here = tmp.path().join("ici");
    std::fs::create_dir_all(&here).unwrap();
    let id = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["projectPath"] == unplaced.as_str())
        .and_then(|s| s["id"].as_str())
        .unwrap()
        .to_owned();
    let moved = common::json_of(common::freecode(&home).current_dir(&here).args([
        "session",
        "move",
        &id[..8],
        "--project",
        "./projet",
        "--json",
    ]));
    assert_eq!(moved["id"], id.as_str());
    let list = json(&home, &["session", "list", "--json"]);
    let mut paths: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["projectPath"].as_str().unwrap().to_owned())
        .collect();
    paths.sort();
    let named = here.join("projet").to_string_lossy().into_owned();
    assert_eq!(paths, ["/etc".to_owned(), named], "{list}");

    // A session an older version imported with `..` in its path is not run there.
    let id = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["projectPath"] == "/etc")
        .and_then(|s| s["id"].as_str())
        .unwrap()
        .to_owned();
    let meta = common::find_below(&home.join("sessions"), &id).join("meta.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    m["projectPath"] = Value::from("/.x/../../etc");
    // A provider `run` can call, so only the directory stands in the way.
    m["provider"] = Value::from("scripted");
    m.as_object_mut().unwrap().remove("importedFrom");
    std::fs::write(&meta, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let out = common::freecode(&home)
        .args(["run", "-s", &id, "liste les fichiers"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/.x/../../etc") && err.contains("not an absolute path"),
        "{err}"
    );
}

/// A Gemini CLI chat `<gemini>/tmp/<slug>/chats/session-….jsonl` whose `projectHash` is the
/// SHA-256 of `root` (the form Gemini CLI hashes: the root as given), with one prompt and one
/// answer; no `projects.json`. Returns the chat file.
fn gemini_chat(gemini: &Path, session_id: &str, root: &str) -> PathBuf {
    use sha2::Digest as _;
    let hash: String = sha2::Sha256::digest(root.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let chats = gemini.join("tmp/some-slug/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let file = chats.join(format!(
        "session-2026-01-01T00-00-{}.jsonl",
        &session_id[..8]
    ));
    let lines = [
        serde_json::json!({"sessionId": session_id, "projectHash": hash,
            "startTime": "2026-01-01T00:00:00Z", "lastUpdated": "2026-01-01T00:00:02Z"}),
        serde_json::json!({"id": "m1", "type": "user", "timestamp": "2026-01-01T00:00:00Z",
            "content": "where is the parser"}),
        serde_json::json!({"id": "m2", "type": "gemini", "timestamp": "2026-01-01T00:00:02Z",
            "content": "in src/parse.rs", "model": "gemini-2.5-pro"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// The binary on `home` with no other agent's directories of the user's (`HOME`, `CODEX_HOME`,
/// `CLAUDE_CONFIG_DIR` point into `tmp`), run in `cwd`.
fn isolated(home: &Path, tmp: &Path, cwd: &Path) -> std::process::Command {
    let mut c = common::freecode(home);
    c.env("HOME", tmp.join("user-home"))
        .env("CODEX_HOME", tmp.join("user-home/.codex"))
        .env("CLAUDE_CONFIG_DIR", tmp.join("user-home/.claude"))
        .env_remove("GEMINI_CLI_HOME")
        .current_dir(cwd);
    c
}

/// A chat nothing places (its hash is no directory known here, and it names no path) is
/// imported under the home's project for unplaced sessions, says so in one line and in the
/// summary, and `session move` places it, keeping its id; it is watermarked like any other.
#[test]
fn a_gemini_chat_nothing_places_is_imported_unplaced_and_placed_later_by_session_move() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let here = tmp.path().join("here");
    std::fs::create_dir_all(&here).unwrap();
    let chat = gemini_chat(
        &tmp.path().join("gemini"),
        "5c0ffee1-0000-4000-8000-000000000001",
        "/nowhere/known/project",
    );
    let path = chat.to_str().unwrap();
    let out = isolated(&home, tmp.path(), &here)
        .args(["import", "gemini-cli", path, "--dry-run"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 unplaced"), "{stderr}");
    let out = isolated(&home, tmp.path(), &here)
        .args(["import", "gemini-cli", path])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("imported"), "{stdout}");
    // One line for the file: what was done, why, and how to place it.
    let line = stderr
        .lines()
        .find(|l| l.starts_with(path))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains("no project found")
            && line.contains("SHA-256 of none of the")
            && line.contains("session move"),
        "{line}"
    );
    assert_eq!(stderr.matches("SHA-256").count(), 1, "said once: {stderr}");
    assert!(
        stderr.contains("1 imported") && stderr.contains("1 unplaced"),
        "{stderr}"
    );
    let list = json(&home, &["session", "list", "--json"]);
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        list[0]["projectPath"],
        home.join("unplaced").to_str().unwrap(),
        "{list}"
    );

    let project = tmp.path().join("proj");
    let moved = common::json_of(isolated(&home, tmp.path(), &here).args([
        "session",
        "move",
        &id,
        "--project",
        project.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(moved["projectPath"], project.to_str().unwrap(), "{moved}");
    let list = json(&home, &["session", "list", "--json"]);
    assert_eq!(list[0]["projectPath"], project.to_str().unwrap(), "{list}");
    assert_eq!(list[0]["id"], id.as_str());
    let shown = json(&home, &["session", "show", &id, "--json"]);
    assert_eq!(shown["messages"].as_array().unwrap().len(), 2, "{shown}");
    // Watermarked when imported: unchanged next time, and still where it was moved.
    let v = common::json_of(isolated(&home, tmp.path(), &here).args([
        "import",
        "gemini-cli",
        path,
        "--json",
    ]));
    assert_eq!(v["summary"]["unchanged"], 1, "{v:#}");
    let list = json(&home, &["session", "list", "--json"]);
    assert_eq!(list[0]["projectPath"], project.to_str().unwrap(), "{list}");
    // A directory that is no path, or a session that is not there: clear errors.
    let out = common::freecode(&home)
        .args(["session", "move", "nope", "--project", "/x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// The genuine Gemini CLI chat names its project only by a hash, and no directory known here
/// has it; a path one of its tool results names (`/home/wei/repo/discordbot/GEMINI.md`) has a
/// parent with that hash: the chat goes there, with no guess to report.
#[test]
fn the_genuine_gemini_chat_is_placed_by_a_path_its_tools_name() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let here = tmp.path().join("here");
    std::fs::create_dir_all(&here).unwrap();
    let chat = freecode_testkit::external_fixtures()
        .join("gemini-cli/genuine/vibecodingtracker-gemini.jsonl");
    let out = isolated(&home, tmp.path(), &here)
        .args(["import", "gemini-cli"])
        .arg(&chat)
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    schema_check("import-result.json", &v);
    assert_eq!(v["summary"]["imported"], 1, "{v:#}");
    assert_eq!(v["sessions"][0]["placed"]["how"], "hash", "{v:#}");
    assert!(
        !stderr.contains("guess") && !stderr.contains("no project"),
        "{stderr}"
    );
    let list = json(&home, &["session", "list", "--json"]);
    assert_eq!(
        list[0]["projectPath"], "/home/wei/repo/discordbot",
        "{list}"
    );
}

/// Without `projects.json`, a chat's `projectHash` is resolved by hashing the directories known
/// here: the current directory and its parents, the home's sessions' projects, and the `cwd`s
/// of Claude Code's transcripts and Codex's rollouts. Never from a directory name.
#[test]
fn a_gemini_project_hash_is_found_among_the_directories_known_here() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let home = t.join("home");
    let gemini = t.join("gemini");
    // The current directory's parent.
    let here = t.join("work/repo/sub");
    std::fs::create_dir_all(&here).unwrap();
    let parent = t.join("work/repo").to_str().unwrap().to_owned();
    gemini_chat(&gemini, "aaaaaaa1-0000-4000-8000-000000000001", &parent);
    // A Claude Code transcript's cwd.
    let claude = t.join("user-home/.claude/projects/-anything");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(
        claude.join("s.jsonl"),
        "{\"type\":\"user\",\"cwd\":\"/srv/from-claude\",\"sessionId\":\"s\"}\n",
    )
    .unwrap();
    gemini_chat(
        &gemini,
        "aaaaaaa2-0000-4000-8000-000000000002",
        "/srv/from-claude",
    );
    // A Codex rollout's session_meta cwd.
    let day = t.join("user-home/.codex/sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::write(
        day.join("rollout-2026-01-01T00-00-00-x.jsonl"),
        "{\"type\":\"session_meta\",\"payload\":{\"id\":\"x\",\"cwd\":\"/srv/from-codex\"}}\n",
    )
    .unwrap();
    gemini_chat(
        &gemini,
        "aaaaaaa3-0000-4000-8000-000000000003",
        "/srv/from-codex",
    );
    // A project of a session already in the home (imported from a file elsewhere).
    let elsewhere = t.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let rec = serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null,
        "timestamp": "2026-01-01T00:00:00Z", "cwd": "/srv/native", "sessionId": "n1",
        "message": {"role": "user", "content": "hello"}});
    std::fs::write(elsewhere.join("n1.jsonl"), format!("{rec}\n")).unwrap();
    let first = common::json_of(isolated(&home, t, &here).args([
        "import",
        "claude-code",
        elsewhere.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(first["summary"]["imported"], 1, "{first:#}");
    gemini_chat(
        &gemini,
        "aaaaaaa4-0000-4000-8000-000000000004",
        "/srv/native",
    );
    // Known nowhere.
    gemini_chat(
        &gemini,
        "aaaaaaa5-0000-4000-8000-000000000005",
        "/srv/unknown",
    );

    let v = common::json_of(isolated(&home, t, &here).args([
        "import",
        "gemini-cli",
        gemini.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["summary"]["imported"], 5, "{v:#}");
    assert_eq!(v["summary"]["skipped"], 0, "{v:#}");
    assert_eq!(v["summary"]["unplaced"], 1, "{v:#}");
    let by_source: HashMap<&str, &Value> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sourceId"].as_str().unwrap(), s))
        .collect();
    let unplaced = by_source["aaaaaaa5-0000-4000-8000-000000000005"];
    assert_eq!(unplaced["action"], "imported", "{v:#}");
    assert!(
        unplaced["placed"]["why"]
            .as_str()
            .unwrap()
            .contains("SHA-256 of none of the"),
        "{v:#}"
    );
    let list = common::json_of(isolated(&home, t, &here).args(["session", "list", "--json"]));
    let mut projects: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["projectPath"].as_str().unwrap())
        .collect();
    projects.sort();
    let unplaced = home.join("unplaced").to_string_lossy().into_owned();
    let mut want = vec![
        parent.as_str(),
        "/srv/from-claude",
        "/srv/from-codex",
        "/srv/native",
        "/srv/native",
        unplaced.as_str(),
    ];
    want.sort();
    assert_eq!(projects, want, "{list:#}");
}

/// An imported compaction is ours: `run -s` on the imported session sends the summary (in the
/// system prompt, as after our own compaction) and the history from the compaction on, never
/// what the summary stands for; the source agent would send the same.
#[test]
fn a_resumed_import_sends_the_summary_and_the_history_kept_after_its_compaction() {
    use common::mock_openai::{MockOpenAi, Reply, finish, text, usage};
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let src = tmp.path().join("codex");
    std::fs::create_dir_all(&src).unwrap();
    let rollout = src.join("rollout-2026-01-01T00-00-00-0199aaaa.jsonl");
    let cwd = project.to_str().unwrap();
    let records = [
        serde_json::json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
            "payload": {"id": "0199aaaa-0000-7000-8000-000000000001", "cwd": cwd,
                "model_provider": "openai", "cli_version": "0.50.0"}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:00Z", "type": "turn_context",
            "payload": {"cwd": cwd, "model": "gpt-5"}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:01Z", "type": "event_msg",
            "payload": {"type": "user_message", "message": "explain the ZEPPELIN module"}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:02Z", "type": "response_item",
            "payload": {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "ZEPPELIN parses the config"}]}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:03Z", "type": "compacted",
            "payload": {"message": "SUMMARY-7F3A: the user learnt what the parser does",
                "replacement_history": []}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:03Z", "type": "event_msg",
            "payload": {"type": "context_compacted"}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:04Z", "type": "event_msg",
            "payload": {"type": "user_message", "message": "now add a KESTREL flag"}}),
        serde_json::json!({"timestamp": "2026-01-01T00:00:05Z", "type": "response_item",
            "payload": {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "KESTREL flag added"}]}}),
    ];
    let body: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&rollout, body).unwrap();
    let v = json(
        &home,
        &["import", "codex", rollout.to_str().unwrap(), "--json"],
    );
    assert_eq!(v["summary"]["imported"], 1, "{v:#}");
    let id = v["sessions"][0]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(v["sessions"][0]["messages"], 2, "{v:#}");
    // The trace still shows the whole history, the compaction included.
    let replay = json(&home, &["replay", &id, "--json"]);
    assert!(replay.to_string().contains("compact"), "{replay:#}");

    let mock = MockOpenAi::start(vec![Reply::stream(vec![
        text("Done."),
        finish("stop"),
        usage(30, 2),
    ])]);
    let out = common::freecode(&home)
        .env("OPENAI_API_KEY", "sk-test")
        .env("FREECODE_ROLLOUT", "on")
        .current_dir(&project)
        .args([
            "run",
            "--base-url",
            &mock.base_url,
            "-s",
            &id,
            "and document it",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0].body;
    assert_eq!(sent["model"], "gpt-5", "{sent:#}");
    let messages = sent["messages"].as_array().unwrap();
    let system = messages[0]["content"].to_string();
    assert_eq!(messages[0]["role"], "system", "{sent:#}");
    assert!(system.contains("SUMMARY-7F3A"), "{system}");
    let rest = serde_json::to_string(&messages[1..]).unwrap();
    assert!(
        !rest.contains("ZEPPELIN"),
        "the compacted history was sent: {rest}"
    );
    let texts: Vec<String> = messages[1..]
        .iter()
        .map(|m| format!("{}: {}", m["role"].as_str().unwrap(), m["content"]))
        .collect();
    assert_eq!(texts.len(), 3, "{texts:#?}");
    assert!(
        texts[0].starts_with("user: ") && texts[0].contains("KESTREL flag"),
        "{texts:#?}"
    );
    assert!(texts[1].starts_with("assistant: ") && texts[1].contains("KESTREL flag added"));
    assert!(texts[2].starts_with("user: ") && texts[2].contains("and document it"));
}

/// The id the source agent gave a session (the one `claude --resume` shows), whole or a unique
/// prefix, finds the session it was imported as: show, trace, replay, MCP's pages; `session
/// list --json` carries it; a prefix two sources share is ambiguous, naming both.
#[test]
fn a_session_is_found_by_the_id_its_agent_gave_it() {
    let ctx = common::Ctx::missing();
    let src = ctx.tmp.path().join("projects").join("-work-p");
    std::fs::create_dir_all(&src).unwrap();
    let write = |sid: &str, words: &str| {
        let line = |uuid: &str, kind: &str, content: Value, ts: &str| {
            let mut v = serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": null,
                "timestamp": ts, "cwd": "/work/p", "sessionId": sid, "version": "2.1.0",
                "message": {"role": kind, "content": content}});
            if kind == "assistant" {
                v["message"]["id"] = Value::from(format!("msg_{uuid}"));
                v["message"]["model"] = Value::from("claude-test");
                // The answer follows the prompt (one conversation, not two roots).
                v["parentUuid"] = Value::from(format!("{sid}-u"));
            }
            format!("{v}\n")
        };
        std::fs::write(
            src.join(format!("{sid}.jsonl")),
            line(
                &format!("{sid}-u"),
                "user",
                Value::from(words),
                "2026-03-01T10:00:00Z",
            ) + &line(
                &format!("{sid}-a"),
                "assistant",
                serde_json::json!([{"type": "text", "text": "réponse"}]),
                "2026-03-01T10:00:02Z",
            ),
        )
        .unwrap();
    };
    let claude = "55604662-cf2a-4b8e-9d1f-0a1b2c3d4e5f";
    write(claude, "the capybara question");
    write("55609999-0000-4000-8000-000000000001", "another one");
    let out = ctx
        .cmd(&[])
        .env("CLAUDE_CONFIG_DIR", ctx.tmp.path())
        .args(["import", "claude-code", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<Value> = serde_json::from_str(&ctx.ok(&["session", "list", "--json"])).unwrap();
    let ours = listed
        .iter()
        .find(|m| m["importedFrom"]["sourceId"] == claude)
        .unwrap_or_else(|| panic!("{listed:?}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !ours.starts_with("5560"),
        "our id is not the source's: {ours}"
    );
    for id in [claude, "55604662", "55604662-CF2A"] {
        let shown: Value =
            serde_json::from_str(&ctx.ok(&["session", "show", id, "--json"])).unwrap();
        assert_eq!(shown["id"], ours.as_str(), "{id}");
    }
    let trace: Value = serde_json::from_str(&ctx.ok(&["trace", "55604662", "--json"])).unwrap();
    assert_eq!(trace["sessionId"], ours.as_str());
    ctx.ok(&["replay", "55604662"]);
    // `search` of the id (whole, a prefix, freecode's own) finds the session first, by its id;
    // its first prompt stands for it. A prefix too short to be an id is searched as words.
    for id in [claude, "55604662", &ours[..8]] {
        let hits: Value = serde_json::from_str(&ctx.ok(&["search", id, "--json"])).unwrap();
        assert_eq!(hits[0]["sessionId"], ours.as_str(), "{id}: {hits:#}");
        assert_eq!(hits[0]["foundBy"], "id", "{id}");
        assert_eq!(hits[0]["strength"], "strong", "{id}");
        assert_eq!(hits[0]["snippet"], "the capybara question", "{id}");
    }
    let text = ctx.ok(&["search", "55604662"]);
    assert!(text.contains("(by its id)"), "{text}");
    let out = ctx.cmd(&["search", "5560", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // Out of the search's scope (another agent): not found.
    let out = ctx
        .cmd(&["search", claude, "--agent", "codex", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // Two sources share `5560`: ambiguous, both named.
    let out = ctx.cmd(&["session", "show", "5560"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("ambiguous"), "{err}");
    // Nothing at all: the error names the id given.
    let out = ctx.cmd(&["session", "show", "deadbeef"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("deadbeef"));
}
