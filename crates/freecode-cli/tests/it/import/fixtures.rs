//! The fixture table of `freecode import`: a row per file of every agent under `../shared/fixtures/external/`, each imported, counted, searched, traced against its raw records, imported again, torn and completed; and the helpers the other import tests share.

use super::*;

/// What one fixture must give.
pub(super) struct Expect {
    /// The agent's command-line name.
    agent: &'static str,
    /// The file, under `../shared/fixtures/external/<agent>/`.
    file: &'static str,
    /// Messages of the main session: the source's prompts and responses after merging, from
    /// its last compaction on (the history our compaction would keep).
    messages: usize,
    /// With a compaction that has a summary: the messages before the last one (the summaries
    /// of `memory.json` stand for them, the last in force).
    compacted: Option<usize>,
    /// A word only this file holds (among the fixtures of its agent), in the history kept
    /// after the last compaction; empty when that history holds none of its own.
    word: &'static str,
    /// Whether every tool pair of the file is on the imported branch, so the trace's tool
    /// durations are exactly those of the file's call/result timestamps (else a subset).
    all_tools_on_branch: bool,
    /// Tools refused (`deniedSpans`), in order.
    denied: &'static [&'static str],
    /// Sessions whose `parentId` is the main one (subagent transcripts and forks).
    children: usize,
    /// How the file is given and torn: see [`Kind`].
    kind: Kind,
    /// The main session's title starts so (a unit holding several top-level sessions).
    title: Option<&'static str>,
}

/// How a fixture is imported and what its "torn copy" is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// A line-based file inside a directory: the directory is imported; torn mid-line.
    LinesInDir,
    /// A line-based file whose name is not the agent's (`rollout-…`, `session-…`): the file
    /// itself is imported; torn mid-line.
    LinesFile,
    /// A whole-JSON file (Gemini's legacy chat): the file is imported; a torn copy is not
    /// valid JSON at all, so it is checked to be reported and skipped, never half-imported.
    JsonFile,
    /// A JSON tree (opencode's `storage/`): the directory is imported; no torn copy (every
    /// file is written whole by opencode).
    Tree,
    /// A SQLite database: the file is imported; the "torn copy" is a copy with a live WAL
    /// writer holding an open write transaction beside it.
    Sqlite,
}

/// `--project` for the sources that name no project (Gemini chats without `projects.json`,
/// goose's old legacy file without `working_dir`).
pub(super) const FALLBACK_PROJECT: &str = "/work/fallback-project";

/// Claude Code's fixtures. Each count stated from reading the file:
pub(super) const CLAUDE: &[Expect] = &[
    // Line 1 the /init command, line 2 its isMeta expansion (no message); 15 assistant lines
    // are 7 message ids; every other user line holds only tool results. 1 + 7.
    Expect {
        agent: "claude-code",
        file: "genuine/ccviewer-1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        messages: 8,
        compacted: None,
        word: "placeholders",
        all_tools_on_branch: true,
        denied: &["Write"],
        children: 0,
        kind: Kind::LinesInDir,
        title: None,
    },
    // One typed prompt; five assistant lines of one message id (text, thinking, text, two
    // tool_use); two tool-result lines (both refusals); "[Request interrupted by user for tool use]" ends
    // the turn (no message). 1 + 1.
    Expect {
        agent: "claude-code",
        file: "genuine/spotter-short.jsonl",
        messages: 2,
        compacted: None,
        word: "doesnt",
        all_tools_on_branch: true,
        // Both calls were rejected by the user.
        denied: &["Bash", "Glob"],
        children: 0,
        kind: Kind::LinesInDir,
        title: None,
    },
    // The live chain: compact boundary (its logical parent is before the excerpt), the
    // isCompactSummary line (no message: the summary in force, standing for nothing of the
    // excerpt), four assistant lines of one id. The first two
    // assistant lines hang off a node outside the excerpt: another branch, with no prompt of
    // its own, so no fork. 0 + 1.
    Expect {
        agent: "claude-code",
        file: "genuine/spotter-4d5611e5-excerpt-lines742-765-compact.jsonl",
        messages: 1,
        compacted: Some(0),
        word: "transcript_components",
        all_tools_on_branch: false,
        denied: &[],
        children: 0,
        kind: Kind::LinesInDir,
        title: None,
    },
    // last-prompt's leaf is u1 ("Hello"), below which the newest leaf is its answer a1
    // (msg_stage0_1). 1 + 1.
    Expect {
        agent: "claude-code",
        file: "schema/agentsessions-small.jsonl",
        messages: 2,
        compacted: None,
        word: "Listing",
        all_tools_on_branch: false,
        denied: &[],
        children: 0,
        kind: Kind::LinesInDir,
        title: None,
    },
    // The parent: pu1 and pa1 (no message.id: grouped by requestId); the subagent transcript
    // beside it is a child. 1 + 1.
    Expect {
        agent: "claude-code",
        file: "schema/agentsessions-subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl",
        messages: 2,
        compacted: None,
        word: "Delegate",
        all_tools_on_branch: false,
        denied: &[],
        children: 1,
        kind: Kind::LinesInDir,
        title: None,
    },
    // u1 a1, the second attempt b2u b2a b2u2 b2a2 (6, compacted), the compaction, p1u p1a:
    // 1 + 1; the first attempt (b1u b1a) is a fork.
    Expect {
        agent: "claude-code",
        file: "schema/claudecodelog-dag_compact_after_rewind.jsonl",
        messages: 2,
        compacted: Some(6),
        word: "final",
        all_tools_on_branch: false,
        denied: &[],
        children: 1,
        kind: Kind::LinesInDir,
        title: None,
    },
];

/// Codex CLI's rollouts (given as files: their names are not `rollout-…`). Counts: the
/// `event_msg/user_message` prompts plus one response per model call (a run of output items
/// between two inputs), counted from the file with those rules.
pub(super) const CODEX: &[Expect] = &[
    // 1 prompt; 28 model calls (118 function_call/output pairs between them).
    Expect {
        agent: "codex",
        file: "genuine/localpush-rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
        messages: 29,
        compacted: None,
        // The fixture's text is redacted to hashes: this one is its first prompt's.
        word: "a83ebe6f",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesFile,
        title: None,
    },
    // An excerpt: no prompt of its own; 3 model calls around the `compacted` item, 2 before
    // it (compacted).
    Expect {
        agent: "codex",
        file: "genuine/localpush-rollout-2026-02-23T12-54-34-019c8a59-excerpt-line1+lines1776-1800-compacted.jsonl",
        messages: 1,
        compacted: Some(2),
        word: "980b7167",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesFile,
        title: None,
    },
    // 1 prompt; 19 model calls.
    Expect {
        agent: "codex",
        file: "genuine/vibecodingtracker-codex-0.39.0.jsonl",
        messages: 20,
        compacted: None,
        word: "ClaudeCodeLog",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesFile,
        title: None,
    },
    // The coverage file: 3 prompts and 8 model calls (calls of every kind, several
    // `compacted` and `turn_aborted` inputs between them). The first `compacted` has no
    // message (no summary: nothing trimmed); five with one follow, the last before the last
    // model call: 10 compacted, 1 kept, a tool call whose every text is "[trimmed for
    // fixture]".
    Expect {
        agent: "codex",
        file: "schema/agentsessions-small.jsonl",
        messages: 1,
        compacted: Some(10),
        word: "",
        all_tools_on_branch: false,
        denied: &[],
        children: 0,
        kind: Kind::LinesFile,
        title: None,
    },
];

/// Gemini CLI's chats (files named as exported, not `session-…`; no `projects.json`, so
/// `--project` names the project). Counts: `user` and `gemini`/`model` messages by `id` (a
/// later record of an id replaces it), `info` messages left out.
pub(super) const GEMINI: &[Expect] = &[
    // 3 user + 6 gemini.
    Expect {
        agent: "gemini-cli",
        file: "genuine/vibecodingtracker-gemini.jsonl",
        messages: 9,
        compacted: None,
        word: "AliasChoices",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesFile,
        title: None,
    },
    // 1 user + 2 gemini.
    Expect {
        agent: "gemini-cli",
        file: "schema/agentsessions-jsonl_v040.jsonl",
        messages: 3,
        compacted: None,
        word: "AgentSessions",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesFile,
        title: None,
    },
    // m1 m5 (user), m2 m2b (gemini), m4 m6 (`model`); m3 is `info`.
    Expect {
        agent: "gemini-cli",
        file: "schema/agentsessions-large.json",
        messages: 6,
        compacted: None,
        word: "multiline",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::JsonFile,
        title: None,
    },
];

/// opencode's stores (hand-written, see their PROVENANCE.md): the 1.2+ database and the JSON
/// trees. Counts: the session's user and assistant messages.
pub(super) const OPENCODE: &[Expect] = &[
    // The same content as `storage/`: one user and one assistant message; the @explore
    // subagent session is a child.
    Expect {
        agent: "opencode",
        file: "handwritten-from-schema/opencode.db",
        messages: 2,
        compacted: None,
        word: "migration",
        all_tools_on_branch: true,
        denied: &[],
        children: 1,
        kind: Kind::Sqlite,
        title: None,
    },
    Expect {
        agent: "opencode",
        file: "handwritten-from-schema/storage",
        messages: 2,
        compacted: None,
        word: "migration",
        all_tools_on_branch: true,
        denied: &[],
        children: 1,
        kind: Kind::Tree,
        title: None,
    },
    // Two sessions: small (1 + 1) and large (2 + 2); the raw durations are the whole tree's
    // (both sessions' tool parts), so each session's are a subset.
    Expect {
        agent: "opencode",
        file: "schema/agentsessions/storage_v2",
        messages: 4,
        compacted: None,
        word: "existent",
        all_tools_on_branch: false,
        denied: &[],
        children: 0,
        kind: Kind::Tree,
        title: Some("OpenCode Large"),
    },
    Expect {
        agent: "opencode",
        file: "schema/agentsessions/storage_v2",
        messages: 2,
        compacted: None,
        word: "Found",
        all_tools_on_branch: false,
        denied: &[],
        children: 0,
        kind: Kind::Tree,
        title: Some("OpenCode Small"),
    },
    Expect {
        agent: "opencode",
        file: "schema/agentsessions/storage_legacy",
        messages: 2,
        compacted: None,
        word: "extracted",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::Tree,
        title: None,
    },
];

/// goose's sessions (hand-written). `sessions.db` and `20260301_1.jsonl` hold the same session
/// (the legacy file and its migrated row): its word is unique against the other goose file.
/// Counts: user messages with text and assistant messages (a user message holding only tool
/// responses is no message).
pub(super) const GOOSE: &[Expect] = &[
    // "run the tests"; three assistant messages.
    Expect {
        agent: "goose",
        file: "handwritten-from-schema/sessions.db",
        messages: 4,
        compacted: None,
        word: "suite",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::Sqlite,
        title: None,
    },
    Expect {
        agent: "goose",
        file: "handwritten-from-schema/20260301_1.jsonl",
        messages: 4,
        compacted: None,
        word: "suite",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesInDir,
        title: None,
    },
    // The old shape: the `{"tools": …}` first line is reported; one prompt, two answers.
    Expect {
        agent: "goose",
        file: "handwritten/goose-session-analysis-sample_session.jsonl",
        messages: 3,
        compacted: None,
        word: "Francisco",
        all_tools_on_branch: true,
        denied: &[],
        children: 0,
        kind: Kind::LinesInDir,
        title: None,
    },
];

#[test]
pub(super) fn every_codex_fixture_imports() {
    for row in CODEX {
        check_fixture(row);
    }
}

#[test]
pub(super) fn every_gemini_cli_fixture_imports() {
    for row in GEMINI {
        check_fixture(row);
    }
}

#[test]
pub(super) fn every_opencode_fixture_imports() {
    for row in OPENCODE {
        check_fixture(row);
    }
}

#[test]
pub(super) fn every_goose_fixture_imports() {
    for row in GOOSE {
        check_fixture(row);
    }
}

/// Every file of an agent's folder under `../shared/fixtures/external/` is some row's, or inside
/// some row's directory or side directory. Files beside the agents' folders (the secret corpus
/// and its labels, read by the redaction tests) and notes (`.md`) are no agent's.
#[test]
pub(super) fn every_external_fixture_is_covered() {
    let root = freecode_testkit::external_fixtures();
    let rows: Vec<PathBuf> = [CLAUDE, CODEX, GEMINI, OPENCODE, GOOSE]
        .iter()
        .flat_map(|rows| rows.iter())
        .map(|r| root.join(r.agent).join(r.file))
        .collect();
    let mut missing = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_str().unwrap();
            if name.ends_with(".md") || p.parent() == Some(root.as_path()) {
                continue;
            }
            let covered = rows
                .iter()
                .any(|r| p == *r || p.starts_with(r) || p.starts_with(r.with_extension("")));
            if !covered {
                missing.push(p);
            }
        }
    }
    assert!(missing.is_empty(), "fixtures without a row: {missing:#?}");
}

#[test]
pub(super) fn every_claude_code_fixture_imports() {
    for row in CLAUDE {
        check_fixture(row);
    }
}

#[test]
pub(super) fn every_claude_code_fixture_is_covered() {
    let root = freecode_testkit::external_fixtures().join("claude-code");
    let mut files = Vec::new();
    for dir in ["genuine", "schema", "schema/agentsessions-subagent"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".jsonl") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let mut rows: Vec<String> = CLAUDE.iter().map(|r| r.file.to_owned()).collect();
    rows.sort();
    assert_eq!(files, rows, "a fixture without a row");
}

/// Runs `freecode` on `home` and returns its output, asserting success. The other agents'
/// directories (where a Gemini project hash is looked for) are the empty ones beside the home,
/// never the user's.
pub(super) fn run_ok(home: &Path, args: &[&str]) -> std::process::Output {
    let beside = home.parent().unwrap_or(home).join("user-home");
    let out = common::freecode(home)
        .env("HOME", &beside)
        .env("CODEX_HOME", beside.join(".codex"))
        .env("CLAUDE_CONFIG_DIR", beside.join(".claude"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "freecode {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

pub(super) fn json(home: &Path, args: &[&str]) -> Value {
    let out = run_ok(home, args);
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(super) fn schema_check(name: &str, v: &Value) {
    common::schema_check(name, v);
}

/// Copies the fixture (and its own directory of side files, if any; a tree whole) into `dst`;
/// returns the copy of the file (or tree).
pub(super) fn copy_fixture(row: &Expect, dst: &Path) -> PathBuf {
    let src = freecode_testkit::external_fixtures()
        .join(row.agent)
        .join(row.file);
    std::fs::create_dir_all(dst).unwrap();
    let name = src.file_name().unwrap();
    let copy = dst.join(name);
    if src.is_dir() {
        freecode_testkit::copy_tree(&src, &copy);
        return copy;
    }
    std::fs::copy(&src, &copy).unwrap();
    let own = src.with_extension("");
    if own.is_dir() {
        freecode_testkit::copy_tree(&own, &dst.join(own.file_name().unwrap()));
    }
    copy
}

/// `freecode import AGENT PATH --json` for the row (the copy's directory, or the copy itself),
/// with `--project` for the agents whose fixtures name no project.
pub(super) fn import_args(row: &Expect, src_dir: &Path, copy: &Path) -> Vec<String> {
    let target = match row.kind {
        Kind::LinesInDir => src_dir,
        Kind::LinesFile | Kind::JsonFile | Kind::Tree | Kind::Sqlite => copy,
    };
    let mut args = vec![
        "import".to_owned(),
        row.agent.to_owned(),
        target.to_str().unwrap().to_owned(),
        "--json".to_owned(),
    ];
    if ["gemini-cli", "goose"].contains(&row.agent) {
        args.extend(["--project".to_owned(), FALLBACK_PROJECT.to_owned()]);
    }
    args
}

/// Every file below `dir` with its bytes and mtime.
pub(super) fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.clone(),
                    std::fs::read(&p).unwrap(),
                    m.mtime(),
                    m.mtime_nsec(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// The durations (ms) of the source's tool calls, refusals left out, read straight from the
/// raw records, independently of the importer.
pub(super) fn raw_tool_durations(row: &Expect, path: &Path) -> Vec<i64> {
    let mut out = match row.agent {
        "claude-code" => raw_claude_durations(path),
        "codex" => raw_codex_durations(path),
        "gemini-cli" => raw_gemini_durations(path),
        "opencode" => raw_opencode_durations(path),
        "goose" => raw_goose_durations(path),
        other => panic!("no raw reader for {other}"),
    };
    out.sort();
    out
}

pub(super) fn iso_ms(v: &Value) -> Option<i64> {
    v.as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_millisecond())
}

/// Codex: a `*_call` envelope's timestamp to its `*_output`'s, by `call_id`; outputs saying
/// the user rejected the call are refusals.
pub(super) fn raw_codex_durations(path: &Path) -> Vec<i64> {
    let mut calls: HashMap<String, i64> = HashMap::new();
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let Ok(r) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if r["type"] != "response_item" {
            continue;
        }
        let p = &r["payload"];
        let (Some(kind), Some(id), Some(t)) = (
            p["type"].as_str(),
            p["call_id"].as_str(),
            iso_ms(&r["timestamp"]),
        ) else {
            continue;
        };
        if kind.ends_with("_call") {
            calls.insert(id.to_owned(), t);
        } else if kind.ends_with("_call_output")
            && !p["output"].to_string().contains("rejected by user")
            && let Some(start) = calls.remove(id)
        {
            out.push(t - start);
        }
    }
    out
}

/// Gemini: a call's own `timestamp` minus its message's, the last record of a message id
/// winning; cancelled calls are refusals.
pub(super) fn raw_gemini_durations(path: &Path) -> Vec<i64> {
    let text = std::fs::read_to_string(path).unwrap();
    let records: Vec<Value> = if path.extension().is_some_and(|e| e == "json") {
        let v: Value = serde_json::from_str(&text).unwrap();
        v["messages"].as_array().unwrap().clone()
    } else {
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let mut by_id: Vec<(String, Value)> = Vec::new();
    for r in records {
        let Some(id) = r["id"].as_str().map(str::to_owned) else {
            continue;
        };
        match by_id.iter_mut().find(|(k, _)| *k == id) {
            Some(slot) => slot.1 = r,
            None => by_id.push((id, r)),
        }
    }
    let mut out = Vec::new();
    for (_, m) in by_id {
        for c in m["toolCalls"].as_array().into_iter().flatten() {
            if c["status"] == "cancelled" {
                continue;
            }
            if let (Some(start), Some(end)) = (iso_ms(&m["timestamp"]), iso_ms(&c["timestamp"])) {
                out.push(end - start);
            }
        }
    }
    out
}

/// opencode: a tool part's `state.time.end - state.time.start` (ms), from every part file of
/// a tree or every `part.data` of a database.
pub(super) fn raw_opencode_durations(path: &Path) -> Vec<i64> {
    let mut parts: Vec<Value> = Vec::new();
    if path.is_dir() {
        let mut stack = vec![path.to_owned()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "json")
                    && let Ok(v) = serde_json::from_slice(&std::fs::read(&p).unwrap())
                {
                    parts.push(v);
                }
            }
        }
    } else {
        let db =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        let mut stmt = db.prepare("SELECT data FROM part").unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        for data in rows {
            parts.push(serde_json::from_str(&data.unwrap()).unwrap());
        }
    }
    parts
        .iter()
        .filter(|p| p["type"] == "tool")
        .filter_map(|p| {
            let time = &p["state"]["time"];
            Some(time["end"].as_i64()? - time["start"].as_i64()?)
        })
        .collect()
}

/// goose: a `toolRequest`'s message `created` to its `toolResponse`'s (seconds), by id, from
/// the legacy lines or the database's `messages` rows.
pub(super) fn raw_goose_durations(path: &Path) -> Vec<i64> {
    let mut messages: Vec<(i64, Value)> = Vec::new();
    if path.extension().is_some_and(|e| e == "db") {
        let db =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        let mut stmt = db
            .prepare("SELECT created_timestamp, content_json FROM messages ORDER BY id")
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .unwrap();
        for row in rows {
            let (at, content) = row.unwrap();
            messages.push((at, serde_json::from_str(&content).unwrap()));
        }
    } else {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line)
                && let Some(at) = v["created"].as_i64()
            {
                messages.push((at, v["content"].clone()));
            }
        }
    }
    let mut calls: HashMap<String, i64> = HashMap::new();
    let mut out = Vec::new();
    for (at, content) in messages {
        for c in content.as_array().into_iter().flatten() {
            let Some(id) = c["id"].as_str() else {
                continue;
            };
            match c["type"].as_str() {
                Some("toolRequest") => {
                    calls.insert(id.to_owned(), at);
                }
                Some("toolResponse") => {
                    if let Some(start) = calls.remove(id) {
                        out.push((at - start) * 1000);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Claude Code: the call's line to the result's line, refusals left out.
pub(super) fn raw_claude_durations(path: &Path) -> Vec<i64> {
    let text = std::fs::read_to_string(path).unwrap();
    let ts = |r: &Value| {
        r["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_millisecond())
    };
    let mut calls: HashMap<String, i64> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(r) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(blocks) = r["message"]["content"].as_array() else {
            continue;
        };
        for b in blocks {
            match b["type"].as_str() {
                Some("tool_use") => {
                    if let (Some(id), Some(t)) = (b["id"].as_str(), ts(&r)) {
                        calls.insert(id.to_owned(), t);
                    }
                }
                Some("tool_result") => {
                    let refused = b["is_error"] == true
                        && (r.get("toolDenialKind").is_some()
                            || b["content"].to_string().contains("doesn't want to proceed")
                            || b["content"].to_string().contains("requested permissions"));
                    if let (Some(id), Some(t)) = (b["tool_use_id"].as_str(), ts(&r))
                        && let Some(start) = calls.get(id)
                        && !refused
                    {
                        out.push(t - start);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

pub(super) fn main_session(report: &Value) -> &Value {
    main_session_titled(report, None)
}

pub(super) fn main_session_titled<'a>(report: &'a Value, title: Option<&str>) -> &'a Value {
    let sessions = report["sessions"].as_array().unwrap();
    sessions
        .iter()
        .find(|s| {
            s["parentId"].is_null()
                && title.is_none_or(|t| s["title"].as_str().is_some_and(|s| s.starts_with(t)))
        })
        .unwrap_or_else(|| panic!("no main session: {report:#}"))
}

pub(super) fn stored_messages(home: &Path, id: &str) -> usize {
    let shown = json(home, &["session", "show", id, "--json"]);
    shown["messages"].as_array().unwrap().len()
}

/// The per-fixture checks, for any agent.
pub(super) fn check_fixture(row: &Expect) {
    let ctx = common::Ctx::missing();
    let home = ctx.home.clone();
    let src_dir = ctx.tmp.path().join("src");
    let file = copy_fixture(row, &src_dir);
    let before = snapshot(&src_dir);
    let what = format!("{}/{}", row.agent, row.file);

    let args = import_args(row, &src_dir, &file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // Imports.
    let report = json(&home, &args);
    schema_check("import-result.json", &report);
    let main = main_session_titled(&report, row.title);
    assert_eq!(main["action"], "imported", "{what}");
    let id = main["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(main["messages"], row.messages, "{what}: {report:#}");
    assert_eq!(stored_messages(&home, &id), row.messages, "{what}");
    // A compaction is ours: its summary in `memory.json`, standing for the messages before it.
    let memory = home.join("memory").join(&id).join("memory.json");
    if let Some(compacted) = row.compacted {
        let memory: Value = serde_json::from_slice(&std::fs::read(&memory).unwrap()).unwrap();
        let summaries = memory["summaries"].as_array().unwrap();
        let replaced: u64 = summaries
            .iter()
            .map(|s| s["originalMessageCount"].as_u64().unwrap())
            .sum();
        assert_eq!(replaced, compacted as u64, "{what}: {memory:#}");
        assert_eq!(memory["totalCompactions"], summaries.len(), "{what}");
        let last = summaries.last().unwrap();
        assert!(!last["content"].as_str().unwrap().is_empty(), "{what}");
    } else {
        assert!(!memory.exists(), "{what}");
    }
    let children: Vec<&Value> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["parentId"] == id.as_str())
        .collect();
    assert_eq!(children.len(), row.children, "{what}: {report:#}");
    for child in &children {
        let meta = json(
            &home,
            &[
                "session",
                "show",
                child["sessionId"].as_str().unwrap(),
                "--json",
            ],
        );
        assert_eq!(meta["parentId"], id.as_str(), "{what}");
    }
    let listed = json(&home, &["session", "list", "--json"]);
    let meta = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id.as_str())
        .unwrap();
    assert_eq!(meta["importedFrom"]["agent"], row.agent, "{what}");
    assert!(meta["importedFrom"]["projectPath"].is_string(), "{what}");
    assert_eq!(
        meta["importedFrom"]["path"],
        file.to_str().unwrap(),
        "{what}"
    );

    // Search finds the file's own word in this session.
    if !row.word.is_empty() {
        let found = json(&home, &["search", row.word, "--json"]);
        assert!(
            found
                .as_array()
                .unwrap()
                .iter()
                .any(|hit| hit["sessionId"] == id.as_str()),
            "{what}: search {:?} found {found:#}",
            row.word
        );
    }

    // The trace: tool calls with the source's durations, refusals as denials.
    let trace = json(&home, &["trace", &id, "--json"]);
    let mut spans: Vec<i64> = trace["toolSpans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["durationMs"].as_i64().unwrap())
        .collect();
    spans.sort();
    let raw = raw_tool_durations(row, &file);
    if row.all_tools_on_branch {
        assert_eq!(spans, raw, "{what}");
        assert!(!spans.is_empty() || !row.denied.is_empty(), "{what}");
    } else {
        for d in &spans {
            assert!(raw.contains(d), "{what}: span of {d} ms not in {raw:?}");
        }
    }
    let denied: Vec<&str> = trace["deniedSpans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap())
        .collect();
    assert_eq!(denied, row.denied, "{what}");

    // Re-import adds nothing.
    let again = json(&home, &args);
    assert_eq!(again["summary"]["messages"], 0, "{what}: {again:#}");
    assert_eq!(again["summary"]["imported"], 0, "{what}");
    assert!(
        again["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["action"] == "unchanged"),
        "{what}: {again:#}"
    );
    assert_eq!(stored_messages(&home, &id), row.messages, "{what}");

    // The source was only read.
    assert_eq!(snapshot(&src_dir), before, "{what}: a source file changed");

    match row.kind {
        Kind::LinesInDir | Kind::LinesFile => check_torn_copy(row, &id),
        Kind::JsonFile => check_torn_json(row),
        Kind::Sqlite => check_beside_live_writer(row, &id),
        Kind::Tree => {}
    }
}

/// A copy cut mid-line imports its complete part; appending the rest completes it.
pub(super) fn check_torn_copy(row: &Expect, id: &str) {
    let what = format!("{}/{} (torn)", row.agent, row.file);
    let ctx = common::Ctx::missing();
    let home = ctx.home.clone();
    let src_dir = ctx.tmp.path().join("src");
    let file = copy_fixture(row, &src_dir);
    let bytes = std::fs::read(&file).unwrap();
    let mut cut = bytes.len() / 2;
    while cut < bytes.len() - 1 && (bytes[cut - 1] == b'\n' || bytes[cut] == b'\n') {
        cut += 1;
    }
    std::fs::write(&file, &bytes[..cut]).unwrap();
    let args = import_args(row, &src_dir, &file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = run_ok(&home, &args);
    let first: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert!(
        first["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["message"]
                .as_str()
                .unwrap()
                .contains("incomplete last line")),
        "{what}: {first:#}"
    );
    let complete_lines = bytes[..cut].iter().filter(|b| **b == b'\n').count();
    if let Some(s) = first["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == id)
    {
        assert!(
            s["messages"].as_u64().unwrap() as usize <= row.messages + row.compacted.unwrap_or(0),
            "{what}"
        );
        assert!(complete_lines > 0);
    }
    // The agent writes the rest.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(&bytes[cut..]).unwrap();
    drop(f);
    let second = json(&home, &args);
    let main = second["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == id)
        .unwrap_or_else(|| panic!("{what}: {second:#}"));
    assert!(
        ["imported", "updated", "replaced", "unchanged"]
            .contains(&main["action"].as_str().unwrap()),
        "{what}"
    );
    assert_eq!(stored_messages(&home, id), row.messages, "{what}");
    let third = json(&home, &args);
    assert_eq!(third["summary"]["messages"], 0, "{what}");
}

/// A whole-JSON chat cut in half (as Gemini CLI leaves it mid-rewrite) is reported and
/// imports at most its complete messages; once whole, it has them all.
pub(super) fn check_torn_json(row: &Expect) {
    let what = format!("{}/{} (torn)", row.agent, row.file);
    let ctx = common::Ctx::missing();
    let src_dir = ctx.tmp.path().join("src");
    let file = copy_fixture(row, &src_dir);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let args = import_args(row, &src_dir, &file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = json(&ctx.home, &args);
    assert!(
        !first["issues"].as_array().unwrap().is_empty(),
        "{what}: {first:#}"
    );
    for s in first["sessions"].as_array().unwrap() {
        assert!(
            s["messages"].as_u64().unwrap() < row.messages as u64,
            "{what}: {first:#}"
        );
    }
    std::fs::write(&file, &bytes).unwrap();
    let second = json(&ctx.home, &args);
    let id = main_session_titled(&second, row.title)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(stored_messages(&ctx.home, &id), row.messages, "{what}");
}

/// A database copy with a live writer beside it (WAL mode, a committed transaction still in
/// the `-wal` file, another write transaction open): the import reads the committed state,
/// never blocks, never writes the database.
pub(super) fn check_beside_live_writer(row: &Expect, id: &str) {
    let what = format!("{}/{} (live WAL writer)", row.agent, row.file);
    let ctx = common::Ctx::missing();
    let src_dir = ctx.tmp.path().join("src");
    let file = copy_fixture(row, &src_dir);
    let writer = rusqlite::Connection::open(&file).unwrap();
    let mode: String = writer
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "{what}");
    writer
        .execute_batch(
            "PRAGMA wal_autocheckpoint=0; CREATE TABLE freecode_probe(x); \
             INSERT INTO freecode_probe VALUES (1);",
        )
        .unwrap();
    let wal = PathBuf::from(format!("{}-wal", file.display()));
    assert!(std::fs::metadata(&wal).unwrap().len() > 0, "{what}");
    writer
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO freecode_probe VALUES (2);")
        .unwrap();
    let db_before = std::fs::read(&file).unwrap();
    let args = import_args(row, &src_dir, &file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = json(&ctx.home, &args);
    let main = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == id)
        .unwrap_or_else(|| panic!("{what}: {report:#}"));
    assert_eq!(main["action"], "imported", "{what}");
    assert_eq!(main["messages"], row.messages, "{what}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        db_before,
        "{what}: the database was written"
    );
    writer.execute_batch("COMMIT").unwrap();
    drop(writer);
}
