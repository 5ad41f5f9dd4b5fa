//! The Gemini CLI reader over every chat in `../shared/fixtures/external/gemini-cli/` (the genuine
//! JSONL, the 0.40 JSONL capture and the legacy JSON coverage file), and over copies of them made
//! hostile in a temporary directory: torn, BOM-prefixed, with a 50 MB line; and filed in a
//! Gemini directory with a `projects.json` that names the project.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use freecode_import::gemini_cli;
use freecode_import::model::{Content, ImportedSession, Item, ToolOutcome, parse_iso_ms};
use freecode_import::source::{Agent, SourceIssue, SourceUnit};
use serde_json::{Value, json};
use sha2::Digest as _;

fn fixture_files() -> Vec<PathBuf> {
    let root = freecode_testkit::external_fixtures().join("gemini-cli");
    let mut out: Vec<PathBuf> = ["genuine", "schema"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"))
        .collect();
    out.sort();
    assert_eq!(out.len(), 3, "the fixture set changed: {out:?}");
    out
}

fn name(path: &Path) -> &str {
    path.file_name().unwrap().to_str().unwrap()
}

fn read_path(path: &Path) -> (ImportedSession, Vec<SourceIssue>) {
    read_unit(&SourceUnit::file(Agent::GeminiCli, path))
}

fn read_unit(unit: &SourceUnit) -> (ImportedSession, Vec<SourceIssue>) {
    let read = gemini_cli::read(unit).unwrap();
    assert_eq!(
        read.sessions.len(),
        1,
        "{}: {:?}",
        unit.path.display(),
        read.issues
    );
    let mut sessions = read.sessions;
    (sessions.remove(0), read.issues)
}

fn placeless(mut session: ImportedSession) -> ImportedSession {
    session.source_path = PathBuf::new();
    session
}

/// The chat's messages as the file holds them, merged independently of the reader: for a JSONL
/// the bare records and the `$set.messages` batches, the last record of an id winning (no
/// fixture rewinds); for a JSON the `messages` array.
fn source_messages(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    if name(path).ends_with(".json") {
        let v: Value = serde_json::from_str(&text).unwrap();
        return v["messages"].as_array().unwrap().clone();
    }
    let mut order = Vec::new();
    let mut by_id = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        let batch = match v.get("$set") {
            Some(set) => set["messages"].as_array().cloned().unwrap_or_default(),
            None if v.get("id").is_some() => vec![v],
            None => Vec::new(),
        };
        for m in batch {
            let id = m["id"].as_str().unwrap().to_owned();
            if !by_id.contains_key(&id) {
                order.push(id.clone());
            }
            by_id.insert(id, m);
        }
    }
    order
        .into_iter()
        .map(|id| by_id.remove(&id).unwrap())
        .collect()
}

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

#[test]
fn every_fixture_reads_with_its_user_and_model_messages_once() {
    for path in fixture_files() {
        let messages = source_messages(&path);
        // user, gemini, and the `model` shape of the coverage file; info/warning are notes.
        let expected = messages
            .iter()
            .filter(|m| matches!(m["type"].as_str(), Some("user" | "gemini" | "model")))
            .count();
        let (session, _) = read_path(&path);
        assert_eq!(session.message_count(), expected, "{}", name(&path));
        assert_eq!(session.agent, Agent::GeminiCli);
        assert_eq!(session.provider.as_deref(), Some("google"));
    }
    // Counted by hand: the genuine chat has 3 prompts and 6 gemini messages (each of the 4
    // messages with tool calls written twice: first without, then with its toolCalls).
    let genuine = &fixture_files()[0];
    assert_eq!(read_path(genuine).0.message_count(), 9);
}

#[test]
fn metadata_model_title_and_usage() {
    let files = fixture_files();
    let (genuine, _) = read_path(&files[0]);
    assert_eq!(genuine.source_id, "0ab84937-9fe7-4284-986a-33c832af0b6a");
    assert_eq!(genuine.model.as_deref(), Some("gemini-3.1-pro-preview"));
    // The first prompt's displayContent, not the expanded /init prompt.
    assert_eq!(genuine.title.as_deref(), Some("/init"));
    assert_eq!(genuine.created_ms, parse_iso_ms("2026-04-23T12:52:52.759Z"));
    // Usage on every gemini message, once: the sums of the source's tokens.
    let mut expected = (0, 0, 0, 0);
    for m in source_messages(&files[0])
        .iter()
        .filter(|m| m["type"] == "gemini")
    {
        let t = &m["tokens"];
        let n = |k: &str| t[k].as_u64().unwrap();
        expected.0 += n("input") + n("tool");
        expected.1 += n("output") + n("thoughts");
        expected.2 += n("cached");
        expected.3 += n("thoughts");
    }
    let mut got = (0, 0, 0, 0);
    for item in &genuine.items {
        if let Item::Response(r) = item {
            let u = r.usage.as_ref().unwrap();
            got.0 += u.input_tokens.unwrap();
            got.1 += u.output_tokens.unwrap();
            got.2 += u.cache_read_input_tokens.unwrap();
            got.3 += u.reasoning_tokens.unwrap();
        }
    }
    assert_eq!(got, expected);
}

#[test]
fn a_word_only_that_file_holds_is_in_its_session() {
    let files = fixture_files();
    let codex = freecode_testkit::external_fixtures().join("codex");
    for (file, word) in [
        ("vibecodingtracker-gemini", "discordbot"),
        ("agentsessions-jsonl_v040", "AgentSessions"),
        ("agentsessions-large", "Captured multiline"),
    ] {
        let path = files.iter().find(|p| name(p).starts_with(file)).unwrap();
        let others = files.iter().filter(|p| *p != path).cloned().chain(
            [
                "genuine/vibecodingtracker-codex-0.39.0.jsonl",
                "schema/agentsessions-small.jsonl",
            ]
            .map(|f| codex.join(f)),
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
fn tool_calls_last_from_their_message_to_their_result() {
    for path in fixture_files() {
        // Each call: started with its gemini message, finished at its own timestamp.
        let mut expected = HashMap::new();
        for m in source_messages(&path) {
            for call in m["toolCalls"].as_array().into_iter().flatten() {
                expected.insert(
                    call["id"].as_str().unwrap().to_owned(),
                    (
                        m["timestamp"].as_str().and_then(parse_iso_ms),
                        call["timestamp"].as_str().and_then(parse_iso_ms),
                        call["status"].as_str().unwrap().to_owned(),
                    ),
                );
            }
        }
        let (session, _) = read_path(&path);
        let mut seen = 0;
        for item in &session.items {
            let Item::Response(r) = item else { continue };
            for c in &r.content {
                let Content::Tool(call) = c else { continue };
                let (started, finished, status) = &expected[&call.call_id];
                assert_eq!((call.started_ms, call.finished_ms), (*started, *finished));
                assert!(call.finished_ms.unwrap() >= call.started_ms.unwrap());
                assert!(call.result.is_some(), "{}", call.call_id);
                assert_eq!(status == "success", call.outcome == ToolOutcome::Ok);
                seen += 1;
            }
        }
        assert_eq!(seen, expected.len(), "{}", name(&path));
    }
    // The 0.40 capture: message 21:39:35.125, run_shell_command recorded 21:39:35.364.
    let (v040, _) = read_path(&fixture_files()[1]);
    let Some(Item::Response(r)) = v040.items.get(1) else {
        panic!("{:?}", v040.items)
    };
    let Content::Tool(call) = &r.content[0] else {
        panic!()
    };
    assert_eq!(call.finished_ms.unwrap() - call.started_ms.unwrap(), 239);
}

#[test]
fn reading_twice_gives_the_same_sessions() {
    for path in fixture_files() {
        let unit = SourceUnit::file(Agent::GeminiCli, &path);
        let first = gemini_cli::read(&unit).unwrap();
        let second = gemini_cli::read(&unit).unwrap();
        assert_eq!(first.sessions, second.sessions);
        assert_eq!(first.issues, second.issues);
    }
}

#[test]
fn a_torn_copy_reads_its_complete_part() {
    let dir = tempfile::tempdir().unwrap();
    for path in fixture_files() {
        let bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() * 6 / 10;
        let line_start = bytes[..at].iter().rposition(|b| *b == b'\n').unwrap() + 1;
        let line_end = at + bytes[at..].iter().position(|b| *b == b'\n').unwrap();
        let cut = (line_start + line_end) / 2;
        let torn = dir.path().join(format!("torn-{}", name(&path)));
        std::fs::write(&torn, &bytes[..cut]).unwrap();
        let (torn_session, issues) = read_path(&torn);
        let (full, _) = read_path(&path);
        assert!(
            torn_session.message_count() < full.message_count(),
            "{}",
            name(&path)
        );
        assert!(torn_session.message_count() > 0);
        if name(&path).ends_with(".jsonl") {
            // The complete lines, exactly.
            let whole = dir.path().join(format!("whole-{}", name(&path)));
            std::fs::write(&whole, &bytes[..line_start]).unwrap();
            assert_eq!(placeless(torn_session), placeless(read_path(&whole).0));
            assert!(
                issues
                    .iter()
                    .any(|i| i.message.contains("incomplete last line"))
            );
        } else {
            // A legacy file cut while Gemini CLI rewrote it: its complete messages.
            assert!(
                issues
                    .iter()
                    .any(|i| i.message.contains("complete messages kept"))
            );
            assert_eq!(torn_session.source_id, full.source_id);
            assert_eq!(
                torn_session.items[..],
                full.items[..torn_session.items.len()],
                "the kept part is the full file's beginning"
            );
        }
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
        assert!(issues.iter().any(|i| i.message.contains("byte-order")));
        assert_eq!(placeless(with_bom), placeless(read_path(&path).0));
    }
}

#[test]
fn the_project_path_comes_from_projects_json_by_the_hash() {
    let home = tempfile::tempdir().unwrap();
    let gemini = home.path().join(".gemini");
    // Filed under a directory whose name says nothing, registered under another slug: only
    // sha256("/home/wei/repo/discordbot") = the chat's projectHash can find it.
    let chats = gemini.join("tmp/unrelated/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let genuine = &fixture_files()[0];
    let copy = chats.join("session-2026-04-23T12-52-0ab84937.jsonl");
    std::fs::copy(genuine, &copy).unwrap();
    // The legacy JSON the JSONL was migrated from is not read again.
    std::fs::write(chats.join("session-2026-04-23T12-52-0ab84937.json"), "{}").unwrap();
    std::fs::write(
        gemini.join(gemini_cli::PROJECTS_FILE),
        r#"{"projects":{"/home/wei/other":"unrelated","/home/wei/repo/discordbot":"discordbot"}}"#,
    )
    .unwrap();
    let roots =
        gemini_cli::default_roots(&|k| (k == "GEMINI_CLI_HOME").then(|| home.path().into()));
    assert_eq!(roots, vec![gemini.clone()]);
    let mut issues = Vec::new();
    let units = gemini_cli::discover(&roots[0], &mut issues);
    assert_eq!(units.len(), 1, "{units:?}");
    assert_eq!(units[0].path, copy);
    let (session, issues) = read_unit(&units[0]);
    assert_eq!(
        session.project_path.as_deref(),
        Some("/home/wei/repo/discordbot")
    );
    assert!(!issues.iter().any(|i| i.message.contains("unresolved")));
    // Without the registry: no project, and its hash for the importer to resolve.
    std::fs::remove_file(gemini.join(gemini_cli::PROJECTS_FILE)).unwrap();
    let units = gemini_cli::discover(&roots[0], &mut Vec::new());
    let (session, _) = read_unit(&units[0]);
    assert_eq!(session.project_path, None);
    let hash: String = sha2::Sha256::digest(b"/home/wei/repo/discordbot")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(session.project_hash, Some(hash));
}

#[test]
fn a_line_just_under_the_cap_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session-big.jsonl");
    let big = "y".repeat(freecode_core::limits::MAX_LINE_BYTES - 1024);
    let lines = [
        r#"{"sessionId":"big","projectHash":"00","startTime":"2026-01-01T00:00:00Z"}"#.to_owned(),
        r#"{"id":"u","timestamp":"2026-01-01T00:00:01Z","type":"user","content":"read it"}"#.to_owned(),
        format!(
            r#"{{"id":"g","timestamp":"2026-01-01T00:00:02Z","type":"gemini","content":"","toolCalls":[{{"id":"t","name":"read_file","args":{{}},"status":"success","timestamp":"2026-01-01T00:00:05Z","result":[{{"functionResponse":{{"id":"t","name":"read_file","response":{{"output":"{big}"}}}}}}]}}]}}"#
        ),
        r#"{"id":"g2","timestamp":"2026-01-01T00:00:06Z","type":"gemini","content":"after the big one"}"#.to_owned(),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (session, _) = read_path(&path);
    assert_eq!(session.message_count(), 3);
    let Some(Item::Response(r)) = session.items.get(1) else {
        panic!()
    };
    let Content::Tool(call) = &r.content[0] else {
        panic!()
    };
    assert_eq!(call.result.as_ref().map(String::len), Some(big.len()));
    assert_eq!(call.finished_ms.unwrap() - call.started_ms.unwrap(), 3000);
}

#[test]
fn fields_of_the_wrong_type_are_no_panic() {
    // Every message of every fixture again with each field (and each tool call's) replaced by a
    // value of each JSON type, ids kept distinct: the read succeeds and keeps the session.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session-mangled.jsonl");
    let mut out = String::from("{\"sessionId\":\"m\"}\n");
    let wrong = [
        json!(null),
        json!(7),
        json!("s"),
        json!([1]),
        json!({"a": 1}),
    ];
    let mut n = 0;
    for file in fixture_files() {
        for message in source_messages(&file) {
            let keys: Vec<String> = message.as_object().unwrap().keys().cloned().collect();
            let mut variants = Vec::new();
            for key in keys.iter().filter(|k| *k != "id") {
                for w in &wrong {
                    let mut m = message.clone();
                    m[key.as_str()] = w.clone();
                    variants.push(m);
                }
            }
            if let Some(calls) = message["toolCalls"].as_array() {
                for key in calls[0].as_object().unwrap().keys() {
                    for w in &wrong {
                        let mut m = message.clone();
                        m["toolCalls"][0][key.as_str()] = w.clone();
                        variants.push(m);
                    }
                }
            }
            for mut m in variants {
                n += 1;
                m["id"] = json!(format!("v{n}"));
                out += &m.to_string();
                out += "\n";
            }
        }
    }
    for patch in [
        json!({"$set": 5}),
        json!({"$set": {"messages": 5}}),
        json!({"$rewindTo": 5}),
    ] {
        out += &patch.to_string();
        out += "\n";
    }
    std::fs::write(&path, out).unwrap();
    let read = gemini_cli::read(&SourceUnit::file(Agent::GeminiCli, &path)).unwrap();
    assert_eq!(read.sessions.len(), 1);
}
