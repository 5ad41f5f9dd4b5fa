//! Unit tests of `opencode`.

use super::*;
use serde_json::json;

fn read_export_value(export: &Value) -> Read {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("export.json");
    fs::write(&path, export.to_string()).unwrap();
    let mut issues = Vec::new();
    let units = discover(&path, &mut issues);
    assert!(issues.is_empty());
    read(&units[0]).unwrap()
}

fn message(id: &str, info: Value, parts: Value) -> Value {
    let mut info = info;
    info["id"] = json!(id);
    json!({"info": info, "parts": parts})
}

#[test]
fn uris_escape_what_sqlite_would_read_as_syntax() {
    assert_eq!(
        sqlite_uri(Path::new("/tmp/a b?c#d%e")),
        "file:/tmp/a%20b%3Fc%23d%25e?mode=ro"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd ?#%name.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (7);")
        .unwrap();
    drop(conn);
    let conn = open_read_only(&path).unwrap();
    let x: i64 = conn.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(x, 7);
}

#[test]
fn the_connection_refuses_writes_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opencode.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE t (x);")
        .unwrap();
    let conn = open_read_only(&path).unwrap();
    let err = conn.execute("INSERT INTO t VALUES (1)", []).unwrap_err();
    assert_eq!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ReadOnly),
        "{err}"
    );
    assert!(open_read_only(&dir.path().join("missing.db")).is_err());
    assert!(!dir.path().join("missing.db").exists());
}

#[test]
fn a_database_with_only_the_required_columns_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opencode.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            r#"CREATE TABLE session (id TEXT);
               CREATE TABLE message (id TEXT, session_id TEXT, data TEXT);
               CREATE TABLE part (id TEXT, message_id TEXT, data TEXT);
               INSERT INTO session VALUES ('ses_1');
               INSERT INTO message VALUES ('msg_2', 'ses_1', '{"role":"assistant","time":{"created":20}}');
               INSERT INTO message VALUES ('msg_1', 'ses_1', '{"role":"user","time":{"created":10}}');
               INSERT INTO message VALUES ('msg_3', 'ses_1', 'not json');
               INSERT INTO part VALUES ('prt_1', 'msg_1', '{"type":"text","text":"hello"}');"#,
        )
        .unwrap();
    let read = read(&db_unit(Agent::Opencode, &path)).unwrap();
    assert_eq!(read.sessions.len(), 1);
    let session = &read.sessions[0];
    assert_eq!(session.message_count(), 2);
    assert!(
        matches!(&session.items[0], Item::User(u) if u.parts[0].text_content() == Some("hello"))
    );
    assert_eq!(read.issues.len(), 1);
    assert!(read.issues[0].message.contains("msg_3"));
}

#[test]
fn a_database_of_something_else_is_not_opencode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opencode.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE other (x);")
        .unwrap();
    assert!(matches!(
        read(&db_unit(Agent::Opencode, &path)),
        Err(ReadError::NotThisAgent { .. })
    ));
}

#[test]
fn an_export_maps_compaction_refusals_subagents_files_and_retries() {
    let tokens =
        json!({"input": 5, "output": 7, "reasoning": 2, "cache": {"read": 100, "write": 0}});
    let export = json!({
        "info": {"id": "ses_a", "title": "T", "directory": "/p", "time": {"created": 1, "updated": 9}},
        "messages": [
            message("msg_01", json!({"role": "user", "time": {"created": 1}}), json!([
                {"id": "prt_01", "type": "text", "text": "look at this"},
                {"id": "prt_02", "type": "file", "mime": "image/png", "filename": "a.png", "url": "data:image/png;base64,QUJD"},
                {"id": "prt_03", "type": "text", "text": "ignored text", "ignored": true}
            ])),
            message("msg_02", json!({"role": "assistant", "time": {"created": 2, "completed": 6},
                    "providerID": "openai", "modelID": "gpt-5", "tokens": tokens}), json!([
                {"id": "prt_04", "type": "retry", "attempt": 1, "error": {"name": "APIError", "data": {"message": "overloaded"}}, "time": {"created": 2}},
                {"id": "prt_05", "type": "reasoning", "text": "secret thoughts", "time": {"start": 3}},
                {"id": "prt_06", "type": "tool", "callID": "c1", "tool": "bash",
                 "state": {"status": "error", "input": {"command": "rm"}, "error": "The user rejected permission to use this specific tool call.", "time": {"start": 3, "end": 4}}},
                {"id": "prt_07", "type": "tool", "callID": "c2", "tool": "task",
                 "state": {"status": "completed", "input": {"description": "d", "prompt": "find it"}, "output": "found",
                           "metadata": {"sessionId": "ses_child"}, "time": {"start": 4, "end": 5}}},
                {"id": "prt_08", "type": "tool", "callID": "c3", "tool": "read",
                 "state": {"status": "running", "input": {}, "time": {"start": 5}}},
                {"id": "prt_09", "type": "mystery"}
            ])),
            message("msg_03", json!({"role": "user", "time": {"created": 7}}), json!([
                {"id": "prt_10", "type": "compaction", "auto": true}
            ])),
            message("msg_04", json!({"role": "assistant", "summary": true, "time": {"created": 8, "completed": 9}}), json!([
                {"id": "prt_11", "type": "text", "text": "the summary"}
            ]))
        ]
    });
    let read = read_export_value(&export);
    assert_eq!(read.issues.len(), 1, "{:?}", read.issues);
    assert!(read.issues[0].message.contains("mystery"));
    let session = &read.sessions[0];
    assert_eq!(session.message_count(), 2);
    assert_eq!(
        (session.provider.as_deref(), session.model.as_deref()),
        (Some("openai"), Some("gpt-5"))
    );
    let [
        Item::User(user),
        Item::Error(retry),
        Item::Response(response),
        Item::Subagent(run),
        Item::Compaction(compaction),
    ] = session.items.as_slice()
    else {
        panic!("{:#?}", session.items);
    };
    assert_eq!(user.parts.len(), 2);
    assert_eq!(user.parts[1].data.as_deref(), Some("QUJD"));
    assert!(retry.message.contains("overloaded") && !retry.aborted);
    let usage = response.usage.as_ref().unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_input_tokens,
            usage.reasoning_tokens
        ),
        (Some(105), Some(100), Some(2))
    );
    assert_eq!(response.first_token_ms, Some(3));
    let calls: Vec<_> = response
        .content
        .iter()
        .map(|c| match c {
            Content::Tool(call) => (
                call.call_id.as_str(),
                call.outcome.clone(),
                call.finished_ms,
            ),
            Content::Part(p) => panic!("{p:?}"),
        })
        .collect();
    assert!(matches!(
        calls[0],
        ("c1", ToolOutcome::Denied(Some(_)), Some(4))
    ));
    assert_eq!(calls[1], ("c2", ToolOutcome::Ok, Some(5)));
    assert_eq!(calls[2], ("c3", ToolOutcome::Missing, None));
    assert_eq!(
        (run.subagent_id.as_str(), run.task.as_str()),
        ("ses_child", "find it")
    );
    assert_eq!(
        (compaction.summary.as_str(), compaction.at_ms),
        ("the summary", Some(9))
    );
}

#[test]
fn usage_counts_the_cache_in_the_input_and_reasoning_in_the_output() {
    let old = usage_of(
        &json!({"input": 5, "output": 7, "reasoning": 2, "cache": {"read": 100, "write": 3}}),
    )
    .unwrap();
    assert_eq!(
        (old.input_tokens, old.output_tokens, old.reasoning_tokens),
        (Some(108), Some(7), Some(2))
    );
    assert_eq!(
        (old.cache_read_input_tokens, old.cache_write_input_tokens),
        (Some(100), Some(3))
    );
    let new = usage_of(&json!({"total": 117, "input": 5, "output": 7, "reasoning": 2, "cache": {"read": 100, "write": 3}})).unwrap();
    assert_eq!((new.input_tokens, new.output_tokens), (Some(108), Some(9)));
    assert_eq!(usage_of(&json!({"cache": {"read": 1}})), None);
}

#[test]
fn a_json_file_that_is_no_export_is_not_opencode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json");
    fs::write(&path, r#"{"hello": 1}"#).unwrap();
    assert!(matches!(
        read(&SourceUnit::file(Agent::Opencode, &path)),
        Err(ReadError::NotThisAgent { .. })
    ));
}

#[test]
fn discovery_finds_data_dirs_below_a_root_and_skips_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("a/opencode");
    fs::create_dir_all(data.join("storage/session/p")).unwrap();
    fs::write(data.join("storage/session/p/ses_1.json"), "{}").unwrap();
    fs::write(data.join("opencode-beta.db"), "").unwrap();
    fs::write(data.join("opencode.db"), "").unwrap();
    fs::write(data.join("opencode.db-wal"), "").unwrap();
    std::os::unix::fs::symlink(&data, dir.path().join("link")).unwrap();
    let mut issues = Vec::new();
    let units = discover(dir.path(), &mut issues);
    assert!(issues.is_empty());
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].path, data.join("opencode.db"));
    assert_eq!(
        units[0].side_files,
        vec![
            data.join("opencode.db-wal"),
            data.join("opencode-beta.db"),
            data.join("storage/session/p/ses_1.json"),
        ]
    );
}
