//! The opencode reader over every fixture in `../shared/fixtures/external/opencode/` (all
//! hand-written from opencode's schema, see its PROVENANCE.md: no genuine data exists publicly),
//! and over copies of them: read-only databases, a live WAL, a database beside the JSON tree it
//! was migrated from, a torn JSON file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Unwritable, snapshot};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use freecode_import::model::{Content, ImportedSession, Item, ParentKind, ToolOutcome};
use freecode_import::opencode;
use freecode_import::source::SourceUnit;
use rusqlite::Connection;
use serde_json::Value;

fn fixtures() -> PathBuf {
    freecode_testkit::external_fixtures().join("opencode")
}

fn handwritten() -> PathBuf {
    fixtures().join("handwritten-from-schema")
}

/// Every root a user could name: the data directory, its database alone, its `storage/` alone,
/// the coverage trees, and the whole fixture directory.
fn roots() -> Vec<PathBuf> {
    vec![
        handwritten(),
        handwritten().join("opencode.db"),
        handwritten().join("storage"),
        fixtures().join("schema/agentsessions/storage_v2"),
        fixtures().join("schema/agentsessions/storage_legacy"),
        fixtures(),
    ]
}

fn units(root: &Path) -> Vec<SourceUnit> {
    let mut issues = Vec::new();
    let units = opencode::discover(root, &mut issues);
    assert!(issues.is_empty(), "{root:?}: {issues:?}");
    assert!(!units.is_empty(), "{root:?}: no unit");
    units
}

fn read_root(root: &Path) -> Vec<ImportedSession> {
    units(root)
        .iter()
        .flat_map(|unit| opencode::read(unit).unwrap().sessions)
        .collect()
}

/// All the text a session holds: parts, tool arguments and results, compaction summaries.
fn text_of(session: &ImportedSession) -> String {
    let mut out = String::new();
    for item in &session.items {
        match item {
            Item::User(turn) => {
                for part in &turn.parts {
                    out.push_str(part.text_content().unwrap_or(""));
                    out.push('\n');
                }
            }
            Item::Response(response) => {
                for content in &response.content {
                    match content {
                        Content::Part(part) => out.push_str(part.text_content().unwrap_or("")),
                        Content::Tool(call) => {
                            out.push_str(&call.args.to_string());
                            out.push_str(call.result.as_deref().unwrap_or(""));
                        }
                    }
                    out.push('\n');
                }
            }
            Item::Compaction(c) => out.push_str(&c.summary),
            Item::Error(e) => out.push_str(&e.message),
            _ => {}
        }
    }
    out
}

fn tool_calls(session: &ImportedSession) -> Vec<&freecode_import::model::ToolCall> {
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

/// User and assistant messages per session, counted in the database itself (no compaction
/// pairs in these fixtures, which would become one compaction instead of two messages).
fn db_message_counts(db: &Path) -> BTreeMap<String, usize> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT session_id, count(*) FROM message \
             WHERE json_extract(data, '$.role') IN ('user', 'assistant') GROUP BY session_id",
        )
        .unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as usize)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Message files per session of a storage tree: the session is the file's `sessionID`, else
/// its directory's name.
fn json_message_counts(storage: &Path) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for file in walk(&storage.join("message")) {
        let value: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        let session = value["sessionID"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| {
                let dir = file.parent().unwrap().file_name().unwrap();
                dir.to_str().unwrap().to_owned()
            });
        if matches!(value["role"].as_str(), Some("user" | "assistant")) {
            *counts.entry(session).or_insert(0) += 1;
        }
    }
    counts
}

/// Tool times `callID → (start, end)` from a tree's part files.
fn json_tool_times(storage: &Path) -> BTreeMap<String, (i64, i64)> {
    let mut times = BTreeMap::new();
    for file in walk(&storage.join("part")) {
        let value: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        if value["type"] == "tool" {
            times.insert(
                value["callID"].as_str().unwrap().to_owned(),
                (
                    value["state"]["time"]["start"].as_i64().unwrap(),
                    value["state"]["time"]["end"].as_i64().unwrap(),
                ),
            );
        }
    }
    times
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out
}

fn counts_of(sessions: &[ImportedSession]) -> BTreeMap<String, usize> {
    sessions
        .iter()
        .filter(|s| s.message_count() > 0)
        .map(|s| (s.source_id.clone(), s.message_count()))
        .collect()
}

#[test]
fn every_fixture_reads_with_the_sources_message_counts() {
    for root in roots() {
        assert!(!read_root(&root).is_empty(), "{root:?}");
    }
    let db = handwritten().join("opencode.db");
    let expected = db_message_counts(&db);
    assert_eq!(expected.values().sum::<usize>(), 2);
    assert_eq!(counts_of(&read_root(&db)), expected);
    assert_eq!(counts_of(&read_root(&handwritten())), expected);
    for storage in [
        handwritten().join("storage"),
        fixtures().join("schema/agentsessions/storage_v2"),
        fixtures().join("schema/agentsessions/storage_legacy"),
    ] {
        let expected = json_message_counts(&storage);
        assert!(!expected.is_empty());
        assert_eq!(counts_of(&read_root(&storage)), expected, "{storage:?}");
    }
}

#[test]
fn each_fixture_has_its_own_words_in_its_parts() {
    let cases: [(PathBuf, &str); 5] = [
        (
            handwritten().join("opencode.db"),
            "oldString not found in content",
        ),
        (handwritten().join("storage"), "expected 3 columns, got 2"),
        (
            fixtures().join("schema/agentsessions/storage_v2"),
            "non-existent-directory",
        ),
        (
            fixtures().join("schema/agentsessions/storage_v2"),
            "Found 2 files.",
        ),
        (
            fixtures().join("schema/agentsessions/storage_legacy"),
            "Read README and extracted the title.",
        ),
    ];
    for (root, word) in cases {
        let sessions = read_root(&root);
        assert!(
            sessions.iter().any(|s| text_of(s).contains(word)),
            "{root:?} lacks {word:?}"
        );
    }
}

#[test]
fn tool_calls_take_their_times_from_the_tool_state() {
    let storages = [
        handwritten().join("storage"),
        fixtures().join("schema/agentsessions/storage_v2"),
        fixtures().join("schema/agentsessions/storage_legacy"),
    ];
    for storage in storages {
        let expected = json_tool_times(&storage);
        let sessions = read_root(&storage);
        let calls: Vec<_> = sessions.iter().flat_map(tool_calls).collect();
        assert_eq!(calls.len(), expected.len(), "{storage:?}");
        for call in calls {
            let (start, end) = expected[&call.call_id];
            assert_eq!(
                (call.started_ms, call.finished_ms),
                (Some(start), Some(end))
            );
        }
    }
    // The database: the same two calls, 2.2 s and 0.1 s.
    let sessions = read_root(&handwritten().join("opencode.db"));
    let durations: Vec<_> = sessions
        .iter()
        .flat_map(tool_calls)
        .map(|c| {
            (
                c.name.as_str(),
                c.finished_ms.unwrap() - c.started_ms.unwrap(),
            )
        })
        .collect();
    assert_eq!(durations, vec![("bash", 2200), ("edit", 100)]);
}

#[test]
fn the_database_maps_meta_usage_outcomes_and_children() {
    let sessions = read_root(&handwritten().join("opencode.db"));
    assert_eq!(sessions.len(), 2);
    let parent = &sessions[0];
    assert_eq!(parent.source_id, "ses_4f2c1a9b7ffeQm3Xw8RtLk2Pz9");
    assert_eq!(parent.title.as_deref(), Some("Fix failing migration test"));
    assert_eq!(parent.project_path.as_deref(), Some("/home/dev/acme-api"));
    assert_eq!(parent.provider.as_deref(), Some("anthropic"));
    assert_eq!(parent.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(parent.version.as_deref(), Some("1.2.6"));
    assert_eq!(parent.parent, None);
    let Item::Response(response) = &parent.items[1] else {
        panic!("{:?}", parent.items[1]);
    };
    let usage = response.usage.as_ref().unwrap();
    // opencode's input excludes the cache: ours includes it.
    assert_eq!(usage.input_tokens, Some(12 + 18304 + 2210));
    assert_eq!(usage.output_tokens, Some(412));
    assert_eq!(usage.cache_read_input_tokens, Some(18304));
    assert_eq!(usage.cache_write_input_tokens, Some(2210));
    assert_eq!(response.requested_ms, Some(1771056601000));
    assert_eq!(response.completed_ms, Some(1771056609000));
    // finish: "stop" ends the turn, timed from the user's message.
    let Item::TurnEnd(end) = &parent.items[2] else {
        panic!("{:?}", parent.items[2]);
    };
    assert_eq!(
        (end.at_ms, end.duration_ms, end.aborted.as_deref()),
        (Some(1771056609000), Some(9000), None)
    );
    let outcomes: Vec<_> = tool_calls(parent)
        .iter()
        .map(|c| c.outcome.clone())
        .collect();
    assert_eq!(outcomes, vec![ToolOutcome::Ok, ToolOutcome::Error]);
    let child = &sessions[1];
    let link = child.parent.as_ref().unwrap();
    assert_eq!(link.source_id, parent.source_id);
    assert_eq!(link.kind, ParentKind::Subagent);
}

#[test]
fn an_aborted_message_is_an_aborted_error_after_its_response() {
    let sessions = read_root(&fixtures().join("schema/agentsessions/storage_v2"));
    let large = sessions
        .iter()
        .find(|s| s.source_id == "s_stage0_large")
        .unwrap();
    let position = large
        .items
        .iter()
        .position(|item| matches!(item, Item::Error(e) if e.aborted))
        .unwrap();
    assert!(
        matches!(&large.items[position - 1], Item::Response(r) if r.id.as_deref() == Some("m_assistant_large_1"))
    );
    assert!(matches!(&large.items[position + 1], Item::TurnEnd(end) if end.aborted.is_some()));
}

#[test]
fn reading_twice_gives_equal_sessions() {
    for root in roots() {
        for unit in units(&root) {
            let first = opencode::read(&unit).unwrap();
            let second = opencode::read(&unit).unwrap();
            assert_eq!(first.sessions, second.sessions, "{unit:?}");
            assert_eq!(first.issues, second.issues, "{unit:?}");
        }
    }
}

#[test]
fn a_database_beside_its_json_tree_is_read_once_and_wins() {
    let unit = units(&handwritten()).remove(0);
    assert!(unit.path.ends_with("opencode.db"));
    assert!(
        unit.side_files
            .iter()
            .any(|p| p.ends_with("prt_b0d3e5a13003Ii9Jj0Kk1Ll2.json"))
    );
    let read = opencode::read(&unit).unwrap();
    assert_eq!(read.sessions, read_root(&handwritten().join("opencode.db")));
    assert_eq!(read.sessions.len(), 2);
    assert_eq!(tool_calls(&read.sessions[0]).len(), 2);

    // A copy where the JSON says something else about a part the database has, and holds a
    // message the database lacks (a migration that stopped part-way).
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("opencode");
    freecode_testkit::copy_tree(&handwritten(), &data);
    let part =
        data.join("storage/part/msg_b0d3e5640001aB3cD4eF5gH6iJ/prt_b0d3e5640002Zy1Xw2Vu3Ts4.json");
    let text = fs::read_to_string(&part).unwrap();
    fs::write(
        &part,
        text.replace("the migration test fails", "json copy words"),
    )
    .unwrap();
    let session_dir = data.join("storage/message/ses_4f2c1a9b7ffeQm3Xw8RtLk2Pz9");
    fs::write(
        session_dir.join("msg_b0d3e5ff0001zzzzzzzzzzzzzz.json"),
        r#"{"id":"msg_b0d3e5ff0001zzzzzzzzzzzzzz","sessionID":"ses_4f2c1a9b7ffeQm3Xw8RtLk2Pz9","role":"user","time":{"created":1771056610000}}"#,
    )
    .unwrap();
    let part_dir = data.join("storage/part/msg_b0d3e5ff0001zzzzzzzzzzzzzz");
    fs::create_dir_all(&part_dir).unwrap();
    fs::write(
        part_dir.join("prt_b0d3e5ff0002zzzzzzzzzzzzzz.json"),
        r#"{"id":"prt_b0d3e5ff0002zzzzzzzzzzzzzz","messageID":"msg_b0d3e5ff0001zzzzzzzzzzzzzz","type":"text","text":"only in json"}"#,
    )
    .unwrap();
    let sessions = read_root(&data);
    let parent = &sessions[0];
    assert_eq!(parent.message_count(), 3);
    let text = text_of(parent);
    assert!(text.contains("the migration test fails"));
    assert!(!text.contains("json copy words"));
    assert!(
        matches!(parent.items.last(), Some(Item::User(u)) if u.parts[0].text_content() == Some("only in json"))
    );
}

#[test]
fn a_read_only_database_reads_and_is_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ro");
    fs::create_dir(&dir).unwrap();
    let db = dir.join("opencode.db");
    fs::copy(handwritten().join("opencode.db"), &db).unwrap();
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
    let mut original = read_root(&handwritten().join("opencode.db"));
    for session in &mut original {
        session.source_path = db.clone();
    }
    assert_eq!(sessions, original);
}

#[test]
fn a_wal_database_in_a_directory_nobody_can_write_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ro");
    fs::create_dir(&dir).unwrap();
    let db = dir.join("opencode.db");
    fs::copy(handwritten().join("opencode.db"), &db).unwrap();
    let conn = Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    assert!(!dir.join("opencode.db-shm").exists());
    let lock = Unwritable::new(&dir);
    if lock.is_writable() {
        eprintln!("note: this user can write a 0555 directory and chattr is unavailable");
    }
    let before = snapshot(&dir);
    let sessions = read_root(&dir);
    assert_eq!(before, snapshot(&dir));
    drop(lock);
    assert_eq!(
        counts_of(&sessions),
        db_message_counts(&handwritten().join("opencode.db"))
    );
}

#[test]
fn a_live_wal_reads_what_was_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("opencode.db");
    fs::copy(handwritten().join("opencode.db"), &db).unwrap();
    fs::set_permissions(&db, fs::Permissions::from_mode(0o600)).unwrap();
    let writer = Connection::open(&db).unwrap();
    let mode: String = writer
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let insert = |conn: &Connection, n: u32, word: &str| {
        let msg = format!("msg_b0d3e5ff{n:04}zzzzzzzzzzzzzz");
        conn.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) \
             VALUES (?1, 'ses_4f2c1a9b7ffeQm3Xw8RtLk2Pz9', ?2, ?2, ?3)",
            rusqlite::params![
                msg,
                1771056610000i64 + i64::from(n),
                r#"{"role":"user","time":{"created":1771056610000}}"#
            ],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
             VALUES (?1, ?2, 'ses_4f2c1a9b7ffeQm3Xw8RtLk2Pz9', 0, 0, ?3)",
            rusqlite::params![
                format!("prt_b0d3e5ff{n:04}zzzzzzzzzzzzzz"),
                msg,
                serde_json::json!({"type": "text", "text": word}).to_string()
            ],
        )
        .unwrap();
    };
    insert(&writer, 1, "committed walword");
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    insert(&writer, 2, "uncommitted walword");
    let units = units(tmp.path());
    assert!(
        units[0]
            .side_files
            .iter()
            .any(|p| p.ends_with("opencode.db-wal"))
    );
    let sessions = read_root(tmp.path());
    writer.execute_batch("ROLLBACK").unwrap();
    let text = text_of(&sessions[0]);
    assert!(text.contains("committed walword"));
    assert!(!text.contains("uncommitted walword"));
    assert_eq!(sessions[0].message_count(), 3);
}

#[test]
fn a_50_mb_part_reads_from_the_database_and_from_a_file() {
    let big = "y".repeat(50 * 1024 * 1024);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("opencode");
    freecode_testkit::copy_tree(&handwritten(), &data);
    let part = serde_json::json!({"type": "text", "text": big}).to_string();
    Connection::open(data.join("opencode.db"))
        .unwrap()
        .execute(
            "UPDATE part SET data = ?1 WHERE id = 'prt_b0d3e5640002Zy1Xw2Vu3Ts4'",
            [&part],
        )
        .unwrap();
    let file =
        data.join("storage/part/msg_b0d3e5a12001kL7mN8oP9qR0sT/prt_b0d3e5a13002Ee5Ff6Gg7Hh8.json");
    let mut value: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    value["text"] = Value::String(big.clone());
    fs::write(&file, value.to_string()).unwrap();
    for root in [data.join("opencode.db"), data.join("storage")] {
        let sessions = read_root(&root);
        let Item::User(turn) = &sessions[0].items[0] else {
            panic!("{:?}", sessions[0].items[0]);
        };
        let Item::Response(response) = &sessions[0].items[1] else {
            panic!("{:?}", sessions[0].items[1]);
        };
        let Content::Part(text) = &response.content[0] else {
            panic!("{:?}", response.content[0]);
        };
        let lengths = (
            turn.parts[0].text_content().unwrap().len(),
            text.text_content().unwrap().len(),
        );
        if root.ends_with("opencode.db") {
            assert_eq!(lengths.0, big.len());
        } else {
            assert_eq!(lengths.1, big.len());
        }
    }
}

#[test]
fn the_json_tree_reads_when_the_database_beside_it_cannot() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("opencode");
    freecode_testkit::copy_tree(&handwritten(), &data);
    fs::write(
        data.join("opencode.db"),
        b"not a database, not even the header",
    )
    .unwrap();
    let read = opencode::read(&units(&data)[0]).unwrap();
    assert_eq!(
        counts_of(&read.sessions),
        json_message_counts(&data.join("storage"))
    );
    assert_eq!(read.issues.len(), 1);
    assert!(read.issues[0].path.ends_with("opencode.db"));
    assert!(opencode::read(&units(&data.join("opencode.db"))[0]).is_err());
}

#[test]
fn a_torn_json_file_is_reported_and_the_rest_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("storage");
    freecode_testkit::copy_tree(&handwritten().join("storage"), &storage);
    let part =
        storage.join("part/msg_b0d3e5a12001kL7mN8oP9qR0sT/prt_b0d3e5a13004Mm3Nn4Oo5Pp6.json");
    let bytes = fs::read(&part).unwrap();
    fs::write(&part, &bytes[..bytes.len() / 2]).unwrap();
    let unit = units(tmp.path()).remove(0);
    let read = opencode::read(&unit).unwrap();
    assert_eq!(read.issues.len(), 1);
    assert_eq!(read.issues[0].path, part);
    let parent = &read.sessions[0];
    assert_eq!(parent.message_count(), 2);
    let names: Vec<_> = tool_calls(parent).iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, vec!["bash"]);
}

#[test]
fn default_roots_follow_xdg_data_home_then_home() {
    let xdg = |name: &str| match name {
        "XDG_DATA_HOME" => Some("/data".into()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    };
    assert_eq!(
        opencode::default_roots(&xdg),
        vec![PathBuf::from("/data/opencode")]
    );
    let home = |name: &str| match name {
        "XDG_DATA_HOME" => Some("relative".into()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    };
    assert_eq!(
        opencode::default_roots(&home),
        vec![PathBuf::from("/home/u/.local/share/opencode")]
    );
    assert!(opencode::default_roots(&|_| None).is_empty());
}
