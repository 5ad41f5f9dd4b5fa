//! The goose reader over every fixture in `../shared/fixtures/external/goose/` (all hand-written,
//! see its PROVENANCE.md: no genuine goose data exists publicly), and over copies of them:
//! read-only databases, a live WAL, a torn legacy file, a 50 MB line, sub-agent and hidden
//! sessions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Unwritable, snapshot};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use freecode_import::goose;
use freecode_import::model::{Content, ImportedSession, Item, ParentKind, ToolCall, ToolOutcome};
use freecode_import::source::SourceUnit;
use rusqlite::Connection;
use serde_json::Value;

fn fixtures() -> PathBuf {
    freecode_testkit::external_fixtures().join("goose")
}

fn schema() -> PathBuf {
    fixtures().join("handwritten-from-schema")
}

fn sample() -> PathBuf {
    fixtures().join("handwritten/goose-session-analysis-sample_session.jsonl")
}

/// Every root a user could name.
fn roots() -> Vec<PathBuf> {
    vec![
        fixtures(),
        fixtures().join("handwritten"),
        sample(),
        schema(),
        schema().join("sessions.db"),
        schema().join("20260301_1.jsonl"),
    ]
}

fn units(root: &Path) -> Vec<SourceUnit> {
    let mut issues = Vec::new();
    let units = goose::discover(root, &mut issues);
    assert!(issues.is_empty(), "{root:?}: {issues:?}");
    assert!(!units.is_empty(), "{root:?}: no unit");
    units
}

fn read_root(root: &Path) -> Vec<ImportedSession> {
    units(root)
        .iter()
        .flat_map(|unit| goose::read(unit).unwrap().sessions)
        .collect()
}

fn text_of(session: &ImportedSession) -> String {
    let mut out = String::new();
    for item in &session.items {
        match item {
            Item::User(turn) => turn
                .parts
                .iter()
                .for_each(|p| out.push_str(p.text_content().unwrap_or(""))),
            Item::Response(response) => {
                for content in &response.content {
                    match content {
                        Content::Part(part) => out.push_str(part.text_content().unwrap_or("")),
                        Content::Tool(call) => {
                            out.push_str(&call.args.to_string());
                            out.push_str(call.result.as_deref().unwrap_or(""));
                        }
                    }
                }
            }
            Item::Compaction(c) => out.push_str(&c.summary),
            _ => {}
        }
        out.push('\n');
    }
    out
}

fn tool_calls(session: &ImportedSession) -> Vec<&ToolCall> {
    session
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Response(r) => Some(r),
            _ => None,
        })
        .flat_map(|r| &r.content)
        .filter_map(|c| match c {
            Content::Tool(call) => Some(call),
            _ => None,
        })
        .collect()
}

/// Whether a goose message becomes one of ours: every assistant message does; a user message
/// does when it holds text or an image (one holding only tool responses completes the calls it
/// answers instead).
fn is_counted(role: &str, content: &Value) -> bool {
    role == "assistant"
        || content
            .as_array()
            .unwrap()
            .iter()
            .any(|item| matches!(item["type"].as_str(), Some("text" | "image")))
}

/// User and assistant messages per session in the database, counted from its rows.
fn db_counts(db: &Path) -> BTreeMap<String, usize> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT session_id, role, content_json FROM messages")
        .unwrap();
    let rows: Vec<(String, String, String)> = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut counts = BTreeMap::new();
    for (session, role, content) in rows {
        if is_counted(&role, &serde_json::from_str(&content).unwrap()) {
            *counts.entry(session).or_insert(0) += 1;
        }
    }
    counts
}

/// The same for a legacy file's message lines (a first line without `role` is not a message).
fn jsonl_count(file: &Path) -> usize {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|v| v["role"].is_string() && is_counted(v["role"].as_str().unwrap(), &v["content"]))
        .count()
}

/// Call id → (request time, response time) in ms, from the messages' `created` seconds.
fn source_tool_times(messages: &[Value]) -> BTreeMap<String, (i64, i64)> {
    let mut requests = BTreeMap::new();
    let mut times = BTreeMap::new();
    for message in messages {
        let at = message["created"].as_i64().unwrap() * 1000;
        for item in message["content"].as_array().unwrap() {
            match item["type"].as_str() {
                Some("toolRequest") => {
                    requests.insert(item["id"].as_str().unwrap().to_owned(), at);
                }
                Some("toolResponse") => {
                    let id = item["id"].as_str().unwrap().to_owned();
                    times.insert(id.clone(), (requests[&id], at));
                }
                _ => {}
            }
        }
    }
    times
}

fn jsonl_messages(file: &Path) -> Vec<Value> {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|v| v["role"].is_string())
        .collect()
}

#[test]
fn every_fixture_reads_with_the_sources_message_counts() {
    for root in roots() {
        assert!(!read_root(&root).is_empty(), "{root:?}");
    }
    let db = schema().join("sessions.db");
    let expected = db_counts(&db);
    assert_eq!(expected.get("20260301_1"), Some(&4));
    for root in [db.clone(), schema()] {
        let sessions = read_root(&root);
        let counts: BTreeMap<_, _> = sessions
            .iter()
            .map(|s| (s.source_id.clone(), s.message_count()))
            .collect();
        assert_eq!(counts, expected, "{root:?}");
    }
    for file in [sample(), schema().join("20260301_1.jsonl")] {
        let sessions = read_root(&file);
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].message_count(), jsonl_count(&file), "{file:?}");
    }
    assert_eq!(jsonl_count(&sample()), 3);
}

#[test]
fn each_fixture_has_its_own_words_in_its_parts() {
    let cases: [(PathBuf, &str); 4] = [
        (sample(), "sunny with a temperature of 22°C"),
        (sample(), "The weather is sunny and 22°C"),
        (schema().join("sessions.db"), "1 failed, 12 passed"),
        (
            schema().join("20260301_1.jsonl"),
            "test_migration expects 3 columns",
        ),
    ];
    for (root, word) in cases {
        let sessions = read_root(&root);
        assert!(
            sessions.iter().any(|s| text_of(s).contains(word)),
            "{root:?} lacks {word:?}"
        );
    }
    // Thinking is left out.
    let sessions = read_root(&schema().join("sessions.db"));
    assert!(!text_of(&sessions[0]).contains("pytest should do"));
}

#[test]
fn tool_calls_last_from_request_to_response() {
    for file in [sample(), schema().join("20260301_1.jsonl")] {
        let expected = source_tool_times(&jsonl_messages(&file));
        let sessions = read_root(&file);
        let calls = tool_calls(&sessions[0]);
        assert_eq!(calls.len(), expected.len());
        for call in calls {
            let (start, end) = expected[&call.call_id];
            assert_eq!(
                (call.started_ms, call.finished_ms),
                (Some(start), Some(end))
            );
        }
    }
    let sessions = read_root(&schema().join("sessions.db"));
    let calls: Vec<_> = tool_calls(&sessions[0])
        .into_iter()
        .map(|c| {
            (
                c.outcome.clone(),
                c.finished_ms.unwrap() - c.started_ms.unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![(ToolOutcome::Ok, 7000), (ToolOutcome::Error, 1000)]
    );
}

#[test]
fn the_database_maps_meta_and_keeps_usage_on_the_session_only() {
    let sessions = read_root(&schema().join("sessions.db"));
    assert_eq!(sessions.len(), 1);
    let session = &sessions[0];
    assert_eq!(session.source_id, "20260301_1");
    assert_eq!(session.title.as_deref(), Some("Run the tests"));
    assert_eq!(session.project_path.as_deref(), Some("/home/dev/acme-api"));
    assert_eq!(session.provider.as_deref(), Some("anthropic"));
    assert_eq!(session.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(session.created_ms, Some(1772355600000));
    let usage = session.session_usage.as_ref().unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (Some(21052), Some(262))
    );
    assert!(
        session
            .items
            .iter()
            .all(|item| !matches!(item, Item::Response(r) if r.usage.is_some()))
    );
    // The second response went out when the first call's result came back (09:00:09).
    let requested: Vec<_> = session
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Response(r) => Some(r.requested_ms),
            _ => None,
        })
        .collect();
    assert_eq!(
        requested,
        vec![
            Some(1772355600000),
            Some(1772355609000),
            Some(1772355612000)
        ]
    );
}

#[test]
fn reading_twice_gives_equal_sessions() {
    for root in roots() {
        for unit in units(&root) {
            let first = goose::read(&unit).unwrap();
            let second = goose::read(&unit).unwrap();
            assert_eq!(first.sessions, second.sessions, "{unit:?}");
            assert_eq!(first.issues, second.issues, "{unit:?}");
        }
    }
}

#[test]
fn a_legacy_file_of_a_database_session_is_read_once() {
    let units = units(&schema());
    assert_eq!(units.len(), 1);
    assert!(units[0].path.ends_with("sessions.db"));
    assert!(
        units[0]
            .side_files
            .iter()
            .any(|p| p.ends_with("20260301_1.jsonl"))
    );
    let sessions = goose::read(&units[0]).unwrap().sessions;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions, read_root(&schema().join("sessions.db")));

    // A legacy file the database does not hold is read beside it.
    let tmp = tempfile::tempdir().unwrap();
    freecode_testkit::copy_tree(&schema(), tmp.path());
    fs::copy(sample(), tmp.path().join("weather.jsonl")).unwrap();
    let sessions = read_root(tmp.path());
    let ids: Vec<_> = sessions.iter().map(|s| s.source_id.as_str()).collect();
    assert_eq!(ids, vec!["20260301_1", "weather"]);
}

#[test]
fn legacy_files_read_when_the_database_beside_them_cannot() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(
        tmp.path().join("sessions.db"),
        b"not a database at all, not even close",
    )
    .unwrap();
    fs::copy(
        schema().join("20260301_1.jsonl"),
        tmp.path().join("20260301_1.jsonl"),
    )
    .unwrap();
    let read = goose::read(&units(tmp.path())[0]).unwrap();
    assert_eq!(read.sessions.len(), 1);
    assert_eq!(read.sessions[0].message_count(), 4);
    assert_eq!(read.issues.len(), 1);
    assert!(read.issues[0].path.ends_with("sessions.db"));
    // Alone, the database is an error.
    assert!(goose::read(&units(&tmp.path().join("sessions.db"))[0]).is_err());
}

#[test]
fn a_read_only_database_reads_and_is_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ro");
    fs::create_dir(&dir).unwrap();
    let db = dir.join("sessions.db");
    fs::copy(schema().join("sessions.db"), &db).unwrap();
    fs::set_permissions(&db, fs::Permissions::from_mode(0o444)).unwrap();
    let lock = Unwritable::new(&dir);
    if lock.is_writable() {
        eprintln!("note: this user can write a 0555 directory and chattr is unavailable");
    }
    let before = snapshot(&dir);
    let sessions = read_root(&dir);
    let after = snapshot(&dir);
    drop(lock);
    assert_eq!(before, after, "the database or its directory changed");
    let mut original = read_root(&schema().join("sessions.db"));
    for session in &mut original {
        session.source_path = db.clone();
    }
    assert_eq!(sessions, original);
}

fn insert_message(conn: &Connection, created: i64, role: &str, content: Value) {
    conn.execute(
        "INSERT INTO messages (session_id, role, content_json, created_timestamp, metadata_json) \
         VALUES ('20260301_1', ?1, ?2, ?3, '{\"userVisible\":true,\"agentVisible\":true}')",
        rusqlite::params![role, content.to_string(), created],
    )
    .unwrap();
}

#[test]
fn a_live_wal_reads_what_was_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("sessions.db");
    fs::copy(schema().join("sessions.db"), &db).unwrap();
    fs::set_permissions(&db, fs::Permissions::from_mode(0o600)).unwrap();
    let writer = Connection::open(&db).unwrap();
    let mode: String = writer
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let text = |t: &str| serde_json::json!([{"type": "text", "text": t}]);
    insert_message(&writer, 1772355620, "user", text("committed walword"));
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    insert_message(&writer, 1772355621, "user", text("uncommitted walword"));
    let units = units(tmp.path());
    assert!(
        units[0]
            .side_files
            .iter()
            .any(|p| p.ends_with("sessions.db-wal"))
    );
    let sessions = read_root(tmp.path());
    writer.execute_batch("ROLLBACK").unwrap();
    let all = text_of(&sessions[0]);
    assert!(all.contains("committed walword"));
    assert!(!all.contains("uncommitted walword"));
    assert_eq!(sessions[0].message_count(), 5);
}

#[test]
fn a_torn_legacy_file_reads_its_complete_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("20260301_1.jsonl");
    let bytes = fs::read(schema().join("20260301_1.jsonl")).unwrap();
    // Cut in the middle of the last line (line 7).
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    fs::write(&file, &bytes[..last_start + 20]).unwrap();
    let read = goose::read(&units(&file)[0]).unwrap();
    let session = &read.sessions[0];
    assert_eq!(session.message_count(), 3);
    assert!(!text_of(session).contains("test_migration expects"));
    assert_eq!(read.issues.len(), 1);
    assert_eq!(read.issues[0].line, Some(7));
    assert_eq!(session.project_path.as_deref(), Some("/home/dev/acme-api"));
    assert_eq!(session.title.as_deref(), Some("Run the tests"));

    // Cut just before the final newline: the last line is whole, and read.
    fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
    let read = goose::read(&units(&file)[0]).unwrap();
    assert!(read.issues.is_empty(), "{:?}", read.issues);
    assert_eq!(read.sessions[0].message_count(), 4);
}

#[test]
fn a_line_just_under_the_cap_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.jsonl");
    let big = "x".repeat(freecode_core::limits::MAX_LINE_BYTES - 1024);
    let mut out = fs::File::create(&file).unwrap();
    writeln!(out, r#"{{"working_dir":"/w","description":"big"}}"#).unwrap();
    let user = serde_json::json!({"role": "user", "created": 1, "content": [{"type": "text", "text": big}]});
    writeln!(out, "{user}").unwrap();
    writeln!(
        out,
        r#"{{"role":"assistant","created":2,"content":[{{"type":"text","text":"seen it"}}]}}"#
    )
    .unwrap();
    drop(out);
    let read = goose::read(&units(&file)[0]).unwrap();
    assert!(read.issues.is_empty());
    let session = &read.sessions[0];
    assert_eq!(session.message_count(), 2);
    let Item::User(turn) = &session.items[0] else {
        panic!()
    };
    assert_eq!(turn.parts[0].text_content().map(str::len), Some(big.len()));
}

#[test]
fn sub_agent_sessions_are_children_and_hidden_ones_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("sessions.db");
    fs::copy(schema().join("sessions.db"), &db).unwrap();
    fs::set_permissions(&db, fs::Permissions::from_mode(0o600)).unwrap();
    {
        let conn = Connection::open(&db).unwrap();
        let add = |id: &str, kind: &str, extension: &str| {
            conn.execute(
                "INSERT INTO sessions (id, name, session_type, working_dir, extension_data) \
                 VALUES (?1, ?1, ?2, '/w', ?3)",
                rusqlite::params![id, kind, extension],
            )
            .unwrap();
        };
        add(
            "20260301_2",
            "sub_agent",
            r#"{"subagent":{"parent_session_id":"20260301_1"}}"#,
        );
        add("20260301_3", "sub_agent", "{}");
        add("20260301_4", "hidden", "{}");
    }
    let read = goose::read(&units(&db)[0]).unwrap();
    let parents: Vec<_> = read
        .sessions
        .iter()
        .map(|s| {
            (
                s.source_id.as_str(),
                s.parent.as_ref().map(|p| (p.source_id.as_str(), p.kind)),
            )
        })
        .collect();
    assert_eq!(
        parents,
        vec![
            ("20260301_1", None),
            ("20260301_2", Some(("20260301_1", ParentKind::Subagent))),
            ("20260301_3", None),
        ]
    );
    assert_eq!(read.issues.len(), 1);
    assert!(
        read.issues[0].message.contains("20260301_3"),
        "{:?}",
        read.issues
    );
}

#[test]
fn default_roots_follow_xdg_data_home_then_home() {
    let xdg = |name: &str| match name {
        "XDG_DATA_HOME" => Some("/data".into()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    };
    assert_eq!(
        goose::default_roots(&xdg),
        vec![PathBuf::from("/data/goose/sessions")]
    );
    let home = |name: &str| (name == "HOME").then(|| "/home/u".into());
    assert_eq!(
        goose::default_roots(&home),
        vec![PathBuf::from("/home/u/.local/share/goose/sessions")]
    );
}
