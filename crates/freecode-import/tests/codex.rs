//! The Codex CLI reader over every rollout in `../shared/fixtures/external/codex/` (genuine files
//! and the coverage file), and over copies of them made hostile in a temporary directory: torn,
//! BOM-prefixed, compressed, with a 50 MB line. Expected values are computed from the records
//! here, independently of the reader, or stated per file with how they were counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use freecode_import::codex;
use freecode_import::model::{Content, ImportedSession, Item, ToolOutcome, parse_iso_ms};
use freecode_import::source::{Agent, SourceIssue, SourceUnit};
use serde_json::{Value, json};

fn fixture_dir() -> PathBuf {
    freecode_testkit::external_fixtures().join("codex")
}

fn fixture_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.to_str().unwrap().ends_with(".jsonl") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&fixture_dir(), &mut out);
    out.sort();
    assert_eq!(out.len(), 4, "the fixture set changed: {out:?}");
    out
}

fn name(path: &Path) -> &str {
    path.file_name().unwrap().to_str().unwrap()
}

fn read_path(path: &Path) -> (ImportedSession, Vec<SourceIssue>) {
    let read = codex::read(&SourceUnit::file(Agent::Codex, path)).unwrap();
    assert_eq!(
        read.sessions.len(),
        1,
        "{}: {:?}",
        path.display(),
        read.issues
    );
    let mut sessions = read.sessions;
    (sessions.remove(0), read.issues)
}

/// The same session, wherever its file is.
fn placeless(mut session: ImportedSession) -> ImportedSession {
    session.source_path = PathBuf::new();
    session
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kind(record: &Value) -> (&str, &str) {
    (
        record["type"].as_str().unwrap_or(""),
        record["payload"]["type"].as_str().unwrap_or(""),
    )
}

/// Every text in the session: text parts, tool arguments and results.
fn all_text(session: &ImportedSession) -> String {
    let mut out = String::new();
    for item in &session.items {
        match item {
            Item::User(turn) => turn.parts.iter().for_each(|p| {
                out += p.content.as_deref().unwrap_or("");
                out += "\n";
            }),
            Item::Response(r) => r.content.iter().for_each(|c| match c {
                Content::Part(p) => {
                    out += p.content.as_deref().unwrap_or("");
                    out += "\n";
                }
                Content::Tool(t) => {
                    out += &t.args.to_string();
                    out += t.result.as_deref().unwrap_or("");
                    out += "\n";
                }
            }),
            _ => {}
        }
    }
    out
}

/// The messages a rollout holds, counted from its records: the prompts (the `user_message`
/// events where the file has them, else the `response_item` user messages that are not injected
/// context), and one per model call: a run of model output items (reasoning, assistant message,
/// calls) between inputs, when it has an assistant text or a call.
fn expected_messages(records: &[Value]) -> usize {
    let events: usize = records
        .iter()
        .filter(|r| kind(r) == ("event_msg", "user_message"))
        .filter(|r| {
            r["payload"]["message"]
                .as_str()
                .is_some_and(|m| !m.trim().is_empty())
        })
        .count();
    let item_users = records
        .iter()
        .filter(|r| kind(r) == ("response_item", "message") && r["payload"]["role"] == "user")
        .filter(|r| {
            let text = r["payload"]["content"][0]["text"].as_str().unwrap_or("");
            !text.starts_with('<') && !text.starts_with("# AGENTS.md")
        })
        .count();
    let users = if events > 0 { events } else { item_users };
    let mut calls = 0;
    let mut in_run = false;
    let mut run_counts = false;
    for record in records {
        let (outer, inner) = kind(record);
        let output_item = outer == "response_item"
            && (inner == "reasoning"
                || inner.ends_with("_call")
                || (inner == "message" && record["payload"]["role"] == "assistant"));
        let input = (outer == "response_item"
            && (inner.ends_with("_output")
                || (inner == "message" && record["payload"]["role"] == "user")))
            || outer == "compacted"
            || (outer == "event_msg"
                && matches!(
                    inner,
                    "user_message"
                        | "task_complete"
                        | "turn_aborted"
                        | "error"
                        | "context_compacted"
                ));
        if output_item {
            if !in_run {
                in_run = true;
                run_counts = false;
            }
            let has_text = inner == "message"
                && record["payload"]["content"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|p| p["text"].as_str().is_some_and(|t| !t.is_empty()))
                });
            if (inner.ends_with("_call") || has_text) && !run_counts {
                run_counts = true;
                calls += 1;
            }
        } else if input {
            in_run = false;
        }
    }
    users + calls
}

#[test]
fn every_fixture_reads_with_the_source_messages_once() {
    for path in fixture_files() {
        let (session, _) = read_path(&path);
        assert_eq!(
            session.message_count(),
            expected_messages(&records(&path)),
            "{}",
            name(&path)
        );
        assert_eq!(session.agent, Agent::Codex);
        // The id, project and version are the first session_meta's.
        let meta = records(&path)
            .into_iter()
            .find(|r| r["type"] == "session_meta")
            .unwrap();
        assert_eq!(
            Some(session.source_id.as_str()),
            meta["payload"]["id"].as_str()
        );
        assert_eq!(
            session.project_path.as_deref(),
            meta["payload"]["cwd"].as_str()
        );
        assert_eq!(
            session.version.as_deref(),
            meta["payload"]["cli_version"].as_str()
        );
    }
}

#[test]
fn the_genuine_sessions_have_what_their_files_hold() {
    // Counted with jq over the files: prompts are `event_msg/user_message`s; responses are model
    // calls (the distinct `token_count` snapshots of the complete files: 28 and 19).
    for (file, users, responses, calls, model) in [
        (
            "localpush-rollout-2026-02-23T12-41-04",
            1,
            28,
            118,
            "gpt-5.3-codex",
        ),
        (
            "localpush-rollout-2026-02-23T12-54-34",
            0,
            3,
            5,
            "gpt-5.3-codex",
        ),
        ("vibecodingtracker-codex-0.39.0", 1, 19, 19, "aide-gpt-5"),
    ] {
        let path = fixture_files()
            .into_iter()
            .find(|p| name(p).starts_with(file))
            .unwrap();
        let (session, _) = read_path(&path);
        let count = |f: fn(&Item) -> bool| session.items.iter().filter(|i| f(i)).count();
        assert_eq!(count(|i| matches!(i, Item::User(_))), users, "{file}");
        assert_eq!(
            count(|i| matches!(i, Item::Response(_))),
            responses,
            "{file}"
        );
        let tools = session
            .items
            .iter()
            .map(|i| match i {
                Item::Response(r) => r
                    .content
                    .iter()
                    .filter(|c| matches!(c, Content::Tool(_)))
                    .count(),
                _ => 0,
            })
            .sum::<usize>();
        assert_eq!(tools, calls, "{file}");
        assert_eq!(session.model.as_deref(), Some(model), "{file}");
        assert_eq!(session.provider.as_deref().unwrap_or("openai"), "openai");
    }
}

#[test]
fn usage_is_counted_once_per_model_call() {
    for path in fixture_files() {
        let records = records(&path);
        let snapshots: Vec<&Value> = records
            .iter()
            .filter(|r| kind(r) == ("event_msg", "token_count") && r["payload"]["info"].is_object())
            .map(|r| &r["payload"]["info"])
            .collect();
        let total = |s: &Value| s["total_token_usage"]["input_tokens"].as_u64().unwrap();
        let expected = match name(&path) {
            // A whole session: the responses' counts add up to the final cumulative total.
            n if n.starts_with("localpush-rollout-2026-02-23T12-41-04")
                || n.starts_with("vibecodingtracker") =>
            {
                total(snapshots.last().unwrap())
            }
            // An excerpt: its first snapshot measured a response cut out of it.
            n if n.contains("excerpt") => {
                total(snapshots.last().unwrap()) - total(snapshots.first().unwrap())
            }
            // The coverage file: its two distinct snapshots (16341 and an all-zero one).
            _ => 16_341,
        };
        let (session, _) = read_path(&path);
        let (mut input, mut cached) = (0, 0);
        for item in &session.items {
            if let Item::Response(r) = item
                && let Some(usage) = &r.usage
            {
                input += usage.input_tokens.unwrap();
                cached += usage.cache_read_input_tokens.unwrap_or(0);
                // OpenAI's cached ⊂ input, kept.
                assert!(usage.cache_read_input_tokens.unwrap_or(0) <= usage.input_tokens.unwrap());
            }
        }
        assert_eq!(input, expected, "{}", name(&path));
        assert!(cached <= input);
    }
}

#[test]
fn a_word_only_that_file_holds_is_in_its_session() {
    let files = fixture_files();
    let gemini = freecode_testkit::external_fixtures().join("gemini-cli");
    for (file, word) in [
        ("localpush-rollout-2026-02-23T12-41-04", "bb721c9c"),
        ("localpush-rollout-2026-02-23T12-54-34", "c116ff66"),
        ("vibecodingtracker-codex-0.39.0", "LATEST_GO"),
        ("agentsessions-small", "Found 2 files"),
    ] {
        let path = files.iter().find(|p| name(p).starts_with(file)).unwrap();
        let others = files.iter().filter(|p| *p != path).cloned().chain(
            [
                "genuine/vibecodingtracker-gemini.jsonl",
                "schema/agentsessions-large.json",
            ]
            .map(|f| gemini.join(f)),
        );
        for other in others {
            assert!(
                !std::fs::read_to_string(&other).unwrap().contains(word),
                "{word} in {other:?}"
            );
        }
        let (session, _) = read_path(path);
        assert!(all_text(&session).contains(word), "{word} not in {file}");
    }
}

#[test]
fn tool_calls_last_from_call_to_output() {
    for path in fixture_files() {
        let records = records(&path);
        let mut called = HashMap::new();
        let mut answered = HashMap::new();
        // The coverage file's ids are all "[trimmed for fixture]": those pair with the latest.
        let mut seen = HashMap::<String, usize>::new();
        for r in &records {
            let (outer, inner) = kind(r);
            let Some(id) = r["payload"]["call_id"].as_str() else {
                continue;
            };
            let at = r["timestamp"].as_str().and_then(parse_iso_ms);
            if outer == "response_item" && inner.ends_with("_output") {
                answered.insert(id.to_owned(), at);
            } else if outer == "response_item" && inner.ends_with("_call") {
                called.insert(id.to_owned(), at);
                *seen.entry(id.to_owned()).or_default() += 1;
            }
        }
        called.retain(|id, _| seen[id] == 1);
        let (session, _) = read_path(&path);
        let mut paired = 0;
        for item in &session.items {
            let Item::Response(r) = item else { continue };
            for c in &r.content {
                let Content::Tool(call) = c else { continue };
                if seen.get(&call.call_id).is_some_and(|n| *n > 1) {
                    continue;
                }
                if let Some(started) = called.get(&call.call_id) {
                    assert_eq!(call.started_ms, *started, "{}", call.call_id);
                }
                match answered.get(&call.call_id) {
                    Some(finished) if called.contains_key(&call.call_id) => {
                        paired += 1;
                        assert_eq!(call.finished_ms, *finished, "{}", call.call_id);
                        assert!(call.result.is_some());
                        if let (Some(s), Some(f)) = (call.started_ms, call.finished_ms) {
                            assert!(f >= s, "{}: {s} → {f}", call.call_id);
                        }
                    }
                    _ if call.finished_ms.is_none() => {
                        assert_eq!(call.outcome, ToolOutcome::Missing, "{}", call.call_id)
                    }
                    _ => {}
                }
            }
        }
        let pairs: HashSet<_> = called
            .keys()
            .filter(|k| answered.contains_key(*k))
            .collect();
        assert_eq!(paired, pairs.len(), "{}", name(&path));
    }
    // localpush's first exec_command: called 11:41:38.901, answered 11:41:39.032.
    let localpush = fixture_files()
        .into_iter()
        .find(|p| name(p).starts_with("localpush-rollout-2026-02-23T12-41"))
        .unwrap();
    let (session, _) = read_path(&localpush);
    let first = session
        .items
        .iter()
        .find_map(|i| match i {
            Item::Response(r) => r.content.iter().find_map(|c| match c {
                Content::Tool(t) => Some(t.clone()),
                _ => None,
            }),
            _ => None,
        })
        .unwrap();
    assert_eq!(first.finished_ms.unwrap() - first.started_ms.unwrap(), 131);
}

#[test]
fn reading_twice_gives_the_same_sessions() {
    for path in fixture_files() {
        let first = codex::read(&SourceUnit::file(Agent::Codex, &path)).unwrap();
        let second = codex::read(&SourceUnit::file(Agent::Codex, &path)).unwrap();
        assert_eq!(first.sessions, second.sessions);
        assert_eq!(first.issues, second.issues);
    }
}

#[test]
fn a_torn_copy_reads_its_complete_lines() {
    let dir = tempfile::tempdir().unwrap();
    for path in fixture_files() {
        let bytes = std::fs::read(&path).unwrap();
        // Cut in the middle of the line that spans 60% of the file.
        let at = bytes.len() * 6 / 10;
        let line_start = bytes[..at].iter().rposition(|b| *b == b'\n').unwrap() + 1;
        let line_end = at + bytes[at..].iter().position(|b| *b == b'\n').unwrap();
        let cut = (line_start + line_end) / 2;
        assert!(cut > line_start && cut < line_end);
        let torn = dir.path().join(format!("torn-{}", name(&path)));
        std::fs::write(&torn, &bytes[..cut]).unwrap();
        let whole = dir.path().join(format!("whole-{}", name(&path)));
        std::fs::write(&whole, &bytes[..line_start]).unwrap();
        let (torn_session, issues) = read_path(&torn);
        let line = bytes[..line_start].iter().filter(|b| **b == b'\n').count() as u64 + 1;
        assert!(
            issues
                .iter()
                .any(|i| i.line == Some(line) && i.message.contains("incomplete")),
            "{issues:?}"
        );
        let (whole_session, _) = read_path(&whole);
        assert_eq!(placeless(torn_session.clone()), placeless(whole_session));
        let (full, _) = read_path(&path);
        assert!(torn_session.message_count() <= full.message_count());
        assert!(torn_session.message_count() > 0 || full.message_count() < 4);
    }
}

#[test]
fn a_bom_prefixed_copy_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    for path in fixture_files() {
        let copy = dir.path().join(name(&path));
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(std::fs::read(&path).unwrap());
        std::fs::write(&copy, bytes).unwrap();
        let (with_bom, issues) = read_path(&copy);
        assert!(
            issues
                .iter()
                .any(|i| i.line == Some(1) && i.message.contains("byte-order"))
        );
        assert_eq!(placeless(with_bom), placeless(read_path(&path).0));
    }
}

#[test]
fn a_compressed_copy_reads_the_same_and_a_codex_home_is_discovered() {
    let home = tempfile::tempdir().unwrap();
    let day = home.path().join("sessions/2026/02/23");
    let archived = home.path().join("archived_sessions");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::create_dir_all(&archived).unwrap();
    let files = fixture_files();
    let zst = day.join(format!("rollout-zst-{}.zst", name(&files[0])));
    let plain = std::fs::read(&files[0]).unwrap();
    std::fs::write(&zst, zstd::encode_all(plain.as_slice(), 3).unwrap()).unwrap();
    let archived_copy = archived.join(format!("rollout-{}", name(&files[2])));
    std::fs::copy(&files[2], &archived_copy).unwrap();
    std::fs::write(home.path().join("notes.jsonl"), "{}\n").unwrap();
    let mut issues = Vec::new();
    let units = codex::discover(home.path(), &mut issues);
    let paths: Vec<_> = units.iter().map(|u| u.path.clone()).collect();
    assert_eq!(paths, vec![archived_copy, zst.clone()]);
    let (compressed, _) = read_path(&zst);
    assert_eq!(placeless(compressed), placeless(read_path(&files[0]).0));
    // The home's thread names give the title.
    let id = read_path(&files[2]).0.source_id;
    std::fs::write(
        home.path().join(codex::INDEX_FILE),
        format!("{{\"id\":\"{id}\",\"thread_name\":\"Go versions\",\"updated_at\":\"2026-01-01T00:00:00Z\"}}\n"),
    )
    .unwrap();
    let units = codex::discover(home.path(), &mut issues);
    let read = codex::read(&units[0]).unwrap();
    assert_eq!(read.sessions[0].title.as_deref(), Some("Go versions"));
    assert_eq!(
        codex::default_roots(&|k| (k == "CODEX_HOME").then(|| home.path().into())),
        vec![home.path().to_owned()]
    );
}

#[test]
fn a_line_up_to_the_cap_is_read_whole_and_one_past_it_skipped() {
    use freecode_core::limits::MAX_LINE_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout-big.jsonl");
    let big = "x".repeat(MAX_LINE_BYTES - 1024);
    let past = "y".repeat(MAX_LINE_BYTES);
    let lines = [
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"big"}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"cat it"}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}}"#.to_owned(),
        format!(r#"{{"timestamp":"2026-01-01T00:00:09Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"c","output":"{big}"}}}}"#),
        r#"{"timestamp":"2026-01-01T00:00:10Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"d"}}"#.to_owned(),
        format!(r#"{{"timestamp":"2026-01-01T00:00:11Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"d","output":"{past}"}}}}"#),
        r#"{"timestamp":"2026-01-01T00:00:12Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"after the big one"}]}}"#.to_owned(),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (session, issues) = read_path(&path);
    assert_eq!(session.message_count(), 3);
    let Some(Item::Response(r)) = session.items.get(1) else {
        panic!()
    };
    let Content::Tool(call) = &r.content[0] else {
        panic!()
    };
    assert_eq!(call.result.as_ref().map(String::len), Some(big.len()));
    assert_eq!(call.finished_ms.unwrap() - call.started_ms.unwrap(), 7000);
    // The line past the cap is reported by number, and what follows it is read.
    assert!(
        issues
            .iter()
            .any(|i| i.line == Some(6) && i.to_string().contains("longer than")),
        "{issues:?}"
    );
}

#[test]
fn fields_of_the_wrong_type_are_no_panic() {
    // Every record of every fixture again with each payload field replaced by a value of each
    // JSON type: the read succeeds and keeps a session.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout-mangled.jsonl");
    let mut out = String::new();
    let wrong = [
        json!(null),
        json!(7),
        json!("s"),
        json!([1]),
        json!({"a": 1}),
    ];
    for file in fixture_files() {
        for record in records(&file) {
            let keys: Vec<String> = record["payload"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            for key in keys {
                for w in &wrong {
                    let mut r = record.clone();
                    r["payload"][&key] = w.clone();
                    out += &r.to_string();
                    out += "\n";
                }
            }
            for w in &wrong {
                let mut r = record.clone();
                r["payload"] = w.clone();
                out += &r.to_string();
                out += "\n";
            }
        }
    }
    std::fs::write(&path, out).unwrap();
    let read = codex::read(&SourceUnit::file(Agent::Codex, &path)).unwrap();
    assert_eq!(read.sessions.len(), 1);
}
