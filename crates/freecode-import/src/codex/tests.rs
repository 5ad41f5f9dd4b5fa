//! Unit tests of `codex`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn read_text(name: &str, text: &str) -> Read {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    read(&SourceUnit::file(Agent::Codex, &path)).unwrap()
}

fn session(read: &Read) -> &ImportedSession {
    assert_eq!(read.sessions.len(), 1, "{:?}", read.issues);
    &read.sessions[0]
}

fn env(line: &str) -> String {
    format!("{line}\n")
}

#[test]
fn envelope_rollout_maps_prompts_responses_calls_and_usage_once() {
    let text = [
        r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"019a-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p","cli_version":"0.100.0","model_provider":"openai"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:00.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"user_message","message":"fix the bug","images":[]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"user_message","message":"<user_instructions>x</user_instructions>","kind":"user_instructions"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"turn_context","payload":{"cwd":"/p","model":"gpt-5"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02.000Z","type":"event_msg","payload":{"type":"agent_message","message":"looking"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"looking"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02.100Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02.200Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":4,"total_tokens":110},"last_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":4,"total_tokens":110}}}}"#,
        r#"{"timestamp":"2026-01-01T00:00:03.500Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"a.txt\",\"metadata\":{\"exit_code\":1}}"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:03.600Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":4,"total_tokens":110},"last_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":4,"total_tokens":110}}}}"#,
        r#"{"timestamp":"2026-01-01T00:00:04.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:04.100Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":300,"cached_input_tokens":140,"output_tokens":15,"total_tokens":315},"last_token_usage":{"input_tokens":200,"cached_input_tokens":100,"output_tokens":5,"total_tokens":205}}}}"#,
        r#"{"timestamp":"2026-01-01T00:00:04.200Z","type":"event_msg","payload":{"type":"task_complete","duration_ms":3200}}"#,
        r#"{"timestamp":"2026-01-01T00:00:04.300Z","type":"brand_new_record","payload":{}}"#,
    ]
    .map(env)
    .concat();
    let read = read_text("rollout-2026-01-01T00-00-00-x.jsonl", &text);
    let s = session(&read);
    assert_eq!(s.source_id, "019a-1");
    assert_eq!(s.project_path.as_deref(), Some("/p"));
    assert_eq!(s.version.as_deref(), Some("0.100.0"));
    assert_eq!(s.provider.as_deref(), Some("openai"));
    assert_eq!(s.model.as_deref(), Some("gpt-5"));
    assert_eq!(s.title.as_deref(), Some("fix the bug"));
    // One prompt (the two copies are one, the injected context dropped), two responses.
    assert_eq!(s.message_count(), 3);
    let responses: Vec<&Response> = s
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Response(r) => Some(r),
            _ => None,
        })
        .collect();
    let usage = responses[0].usage.as_ref().unwrap();
    assert_eq!(usage.input_tokens, Some(100));
    assert_eq!(usage.cache_read_input_tokens, Some(40));
    assert_eq!(usage.reasoning_tokens, Some(4));
    assert_eq!(responses[1].usage.as_ref().unwrap().input_tokens, Some(200));
    let Content::Tool(call) = &responses[0].content[1] else {
        panic!("not a call")
    };
    assert_eq!(call.args, json!({"command": ["ls"]}));
    assert_eq!(call.result.as_deref(), Some("a.txt"));
    assert_eq!(call.outcome, ToolOutcome::Error);
    assert_eq!(call.finished_ms.unwrap() - call.started_ms.unwrap(), 1400);
    assert!(matches!(s.items.last(), Some(Item::TurnEnd(t)) if t.duration_ms == Some(3200)));
    assert!(
        read.issues
            .iter()
            .any(|i| i.line == Some(16) && i.message.contains("brand_new_record")),
        "{:?}",
        read.issues
    );
}

/// 0.16x writes a `token_usage_record` after each response's items, and its `token_count`
/// snapshot only after the calls' outputs: the records decide, each for the response it
/// follows, and nothing is reported unknown.
#[test]
fn usage_records_measure_the_response_they_follow() {
    let usage = |i: u64, o: u64| {
        format!(
            r#"{{"input_tokens":{i},"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":{o},"reasoning_output_tokens":0,"total_tokens":{}}}"#,
            i + o
        )
    };
    let record = |resp: &str, i: u64, o: u64| {
        format!(
            r#"{{"timestamp":"2026-12-06T07:44:22.806Z","type":"token_usage_record","payload":{{"thread_id":"t","turn_id":"u","response_id":"{resp}","usage":{}}}}}"#,
            usage(i, o)
        )
    };
    let count = |ti: u64, to: u64, i: u64, o: u64| {
        format!(
            r#"{{"timestamp":"2026-12-06T07:44:22.900Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{},"last_token_usage":{}}}}}}}"#,
            usage(ti, to),
            usage(i, o)
        )
    };
    let lines = [
        r#"{"timestamp":"2026-12-06T07:44:22.000Z","type":"session_meta","payload":{"id":"01a2-0169","timestamp":"2026-12-06T07:44:22.000Z","cwd":"/p","cli_version":"0.169.0","model_provider":"scripted"}}"#.to_owned(),
        r#"{"timestamp":"2026-12-06T07:44:22.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}}"#.to_owned(),
        r#"{"timestamp":"2026-12-06T07:44:22.700Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}}"#.to_owned(),
        record("resp_1", 100, 6),
        r#"{"timestamp":"2026-12-06T07:44:22.850Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"a.txt"}}"#.to_owned(),
        count(100, 6, 100, 6),
        r#"{"timestamp":"2026-12-06T07:44:23.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}"#.to_owned(),
        record("resp_2", 200, 7),
        count(300, 13, 200, 7),
        r#"{"timestamp":"2026-12-06T07:44:24.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"more?"}]}}"#.to_owned(),
        r#"{"timestamp":"2026-12-06T07:44:25.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"no"}]}}"#.to_owned(),
        record("resp_3", 300, 8),
        count(600, 21, 300, 8),
    ];
    let text: String = lines.iter().map(|l| env(l)).collect();
    let read = read_text("rollout-2026-12-06T07-44-22-x.jsonl", &text);
    assert!(read.issues.is_empty(), "{:?}", read.issues);
    let s = session(&read);
    let got: Vec<(Option<u64>, Option<u64>)> = s
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Response(r) => r.usage.as_ref().map(|u| (u.input_tokens, u.output_tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some(100), Some(6)),
            (Some(200), Some(7)),
            (Some(300), Some(8))
        ]
    );
}

#[test]
fn legacy_rollout_reads_bare_items_and_drops_injected_context() {
    let text = [
        r#"{"id":"0198-legacy","timestamp":"2025-08-01T10:00:00.000Z","instructions":null,"git":{"branch":"main"}}"#,
        r#"{"record_type":"state"}"#,
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>be nice</user_instructions>"}]}"#,
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"hello legacy"}]}"#,
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}"#,
        r#"{"type":"local_shell_call","call_id":"s1","status":"completed","action":{"type":"exec","command":["ls"]}}"#,
        r#"{"type":"function_call_output","call_id":"s1","output":"exec command rejected by user"}"#,
    ]
    .map(env)
    .concat();
    let read = read_text("rollout-legacy.jsonl", &text);
    let s = session(&read);
    assert_eq!(s.source_id, "0198-legacy");
    assert_eq!(s.message_count(), 2);
    assert_eq!(s.title.as_deref(), Some("hello legacy"));
    let Some(Item::Response(r)) = s.items.get(1) else {
        panic!("{:?}", s.items)
    };
    let Content::Tool(call) = &r.content[1] else {
        panic!()
    };
    assert_eq!(call.name, "local_shell");
    assert!(matches!(call.outcome, ToolOutcome::Denied(Some(_))));
}

#[test]
fn forks_subagents_rollback_and_compaction() {
    let fork = read_text(
        "rollout-f.jsonl",
        &env(
            r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"child","forked_from_id":"parent"}}"#,
        ),
    );
    assert_eq!(
        session(&fork).parent,
        Some(ParentLink {
            source_id: "parent".into(),
            kind: ParentKind::Fork
        })
    );
    let sub = read_text(
        "rollout-s.jsonl",
        &env(
            r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"kid","source":{"subagent":{"thread_spawn":{"parent_thread_id":"boss","depth":1}}},"forked_from_id":"boss"}}"#,
        ),
    );
    assert_eq!(
        session(&sub).parent,
        Some(ParentLink {
            source_id: "boss".into(),
            kind: ParentKind::Subagent
        })
    );
    let text = [
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"r"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"one"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a1"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:03Z","type":"compacted","payload":{"message":"the summary","replacement_history":[]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:03Z","type":"event_msg","payload":{"type":"context_compacted"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:04Z","type":"event_msg","payload":{"type":"user_message","message":"two"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:05Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a2"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:06Z","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}"#,
    ]
    .map(env)
    .concat();
    let read = read_text("rollout-r.jsonl", &text);
    let s = session(&read);
    assert_eq!(s.message_count(), 2);
    let compactions: Vec<_> = s
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Compaction(c) => Some(c.summary.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(compactions, vec!["the summary"]);
}

#[test]
fn subagents_the_parent_ran_start_and_stop() {
    let text = [
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"boss"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"collab_agent_spawn_end","new_thread_id":"kid","prompt":"count the files","status":"running"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:02Z","type":"event_msg","payload":{"type":"collab_waiting_end","agent_statuses":[{"thread_id":"kid","status":"running"}]}}"#,
        r#"{"timestamp":"2026-01-01T00:00:09Z","type":"event_msg","payload":{"type":"collab_close_end","receiver_thread_id":"kid","status":{"completed":"12 files"}}}"#,
    ]
    .map(env)
    .concat();
    let read = read_text("rollout-boss.jsonl", &text);
    let s = session(&read);
    let runs: Vec<_> = s
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Subagent(run) => Some(run.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        runs,
        vec![SubagentRun {
            subagent_id: "kid".into(),
            task: "count the files".into(),
            started_ms: parse_iso_ms("2026-01-01T00:00:01Z"),
            stopped_ms: parse_iso_ms("2026-01-01T00:00:09Z"),
            result: Some("12 files".into()),
        }]
    );
}

#[test]
fn zst_rollouts_stream_and_the_plain_file_wins() {
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    let text = [
        r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"z"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"compressed words"}}"#,
    ]
    .map(env)
    .concat();
    let zst = zstd::encode_all(text.as_bytes(), 3).unwrap();
    std::fs::write(day.join("rollout-a.jsonl.zst"), &zst).unwrap();
    std::fs::write(day.join("rollout-b.jsonl.zst"), &zst).unwrap();
    std::fs::write(day.join("rollout-b.jsonl"), &text).unwrap();
    std::fs::write(
        dir.path().join(INDEX_FILE),
        "{\"id\":\"z\",\"thread_name\":\"old\"}\n{\"id\":\"z\",\"thread_name\":\"Renamed\"}\n",
    )
    .unwrap();
    let mut issues = Vec::new();
    let units = discover(dir.path(), &mut issues);
    let names: Vec<_> = units
        .iter()
        .map(|u| u.path.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, vec!["rollout-a.jsonl.zst", "rollout-b.jsonl"]);
    assert_eq!(units[0].side_files, vec![dir.path().join(INDEX_FILE)]);
    let read = read(&units[0]).unwrap();
    let s = session(&read);
    assert_eq!(s.message_count(), 1);
    assert_eq!(s.title.as_deref(), Some("Renamed"));
    // A torn compressed file keeps what came before the cut.
    std::fs::write(day.join("rollout-a.jsonl.zst"), &zst[..zst.len() - 4]).unwrap();
    let torn = super::read(&units[0]).unwrap();
    assert!(!torn.issues.is_empty());
}

#[test]
fn links_below_the_root_are_reported_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.jsonl");
    std::fs::write(&outside, "{}\n").unwrap();
    let day = dir.path().join("home/sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    std::os::unix::fs::symlink(&outside, day.join("rollout-link.jsonl")).unwrap();
    std::os::unix::fs::symlink(dir.path(), day.join("loop")).unwrap();
    let mut issues = Vec::new();
    assert!(discover(&dir.path().join("home"), &mut issues).is_empty());
    assert!(
        issues
            .iter()
            .any(|i| i.path.ends_with("rollout-link.jsonl")),
        "{issues:?}"
    );
}

#[test]
fn default_roots_honour_codex_home() {
    let with = |k: &str| match k {
        "CODEX_HOME" => Some(OsString::from("/x/codex")),
        "HOME" => Some(OsString::from("/home/u")),
        _ => None,
    };
    assert_eq!(default_roots(&with), vec![PathBuf::from("/x/codex")]);
    let without = |k: &str| (k == "HOME").then(|| OsString::from("/home/u"));
    assert_eq!(
        default_roots(&without),
        vec![PathBuf::from("/home/u/.codex")]
    );
}

#[test]
fn ids_come_from_file_names_only_as_a_fallback() {
    assert_eq!(
        id_from_name(Path::new(
            "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
        ))
        .as_deref(),
        Some("019c8a4d-8f45-7010-8b5d-7fad920aa6f9")
    );
    assert_eq!(id_from_name(Path::new("rollout-x.jsonl")), None);
}
