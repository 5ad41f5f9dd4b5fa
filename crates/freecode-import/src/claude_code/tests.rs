//! The reader over every Claude Code fixture, and the traps of A.1 one by one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::*;

fn fixtures() -> PathBuf {
    freecode_testkit::external_fixtures().join("claude-code")
}

fn read_one(path: &Path) -> Read {
    let mut issues = Vec::new();
    let units = discover(path, &mut issues);
    assert_eq!(units.len(), 1, "{path:?}: {units:?}");
    read(&units[0]).unwrap()
}

fn kinds(s: &ImportedSession) -> String {
    s.items
        .iter()
        .map(|i| match i {
            Item::User(_) => 'U',
            Item::Response(_) => 'A',
            Item::Compaction(_) => 'C',
            Item::Error(_) => 'E',
            Item::Subagent(_) => 'S',
            Item::TurnEnd(_) => 'T',
        })
        .collect()
}

fn responses(s: &ImportedSession) -> Vec<&Response> {
    s.items
        .iter()
        .filter_map(|i| match i {
            Item::Response(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn tools(s: &ImportedSession) -> Vec<&ToolCall> {
    responses(s)
        .into_iter()
        .flat_map(|r| r.content.iter())
        .filter_map(|c| match c {
            Content::Tool(t) => Some(t),
            _ => None,
        })
        .collect()
}

#[test]
fn discover_finds_sessions_and_keeps_subagents_as_side_files() {
    let mut issues = Vec::new();
    let units = discover(&fixtures(), &mut issues);
    let names: Vec<String> = units
        .iter()
        .map(|u| u.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "ccviewer-1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
            "spotter-4d5611e5-excerpt-lines742-765-compact.jsonl",
            "spotter-short.jsonl",
            "agentsessions-small.jsonl",
            "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl",
            "claudecodelog-dag_compact_after_rewind.jsonl",
        ]
    );
    let parent = &units[4];
    assert_eq!(parent.side_files.len(), 1, "{parent:?}");
    assert!(parent.side_files[0].ends_with("subagents/agent-a0ad4f44468bdf20d.jsonl"));
    assert!(issues.is_empty(), "{issues:?}");
}

#[test]
fn default_roots_honour_claude_config_dir() {
    let with = |k: &str| match k {
        "CLAUDE_CONFIG_DIR" => Some(OsString::from("/cfg")),
        "HOME" => Some(OsString::from("/home/me")),
        _ => None,
    };
    assert_eq!(default_roots(&with), vec![PathBuf::from("/cfg/projects")]);
    let home = |k: &str| (k == "HOME").then(|| OsString::from("/home/me"));
    assert_eq!(
        default_roots(&home),
        vec![PathBuf::from("/home/me/.claude/projects")]
    );
    assert!(default_roots(&|_| None).is_empty());
}

#[test]
fn ccviewer_merges_split_lines_and_pairs_parallel_calls() {
    let r =
        read_one(&fixtures().join("genuine/ccviewer-1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"));
    assert_eq!(r.sessions.len(), 1);
    let s = &r.sessions[0];
    // Line 1 is the /init command (a prompt); line 2 its isMeta expansion (skipped); 15
    // assistant lines are 7 message ids; every other user line holds tool results.
    assert_eq!(kinds(s), "UAAAAAAA");
    assert_eq!(s.message_count(), 8);
    assert_eq!(s.project_path.as_deref(), Some("/path/to/Demo"));
    assert_eq!(s.source_id, "ccviewer-1af7fc5e-8455-4414-9ccd-011d40f70b2a");
    assert_eq!(
        s.title.as_deref(),
        Some("/init"),
        "no title record: the command"
    );
    // Five parallel calls in one response (lines 6-10), each with its result.
    let rs = responses(s);
    let parallel = rs
        .iter()
        .map(|r| {
            r.content
                .iter()
                .filter(|c| matches!(c, Content::Tool(_)))
                .count()
        })
        .max()
        .unwrap();
    assert_eq!(parallel, 5);
    let calls = tools(s);
    assert_eq!(calls.len(), 12);
    // The Write was refused: "Claude requested permissions to write …, but you haven't
    // granted it yet."
    let denied: Vec<&str> = calls
        .iter()
        .filter(|t| matches!(t.outcome, ToolOutcome::Denied(_)))
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(denied, ["Write"]);
    for t in &calls {
        assert!(
            matches!(t.outcome, ToolOutcome::Ok | ToolOutcome::Denied(_)),
            "{t:?}"
        );
        assert!(t.result.is_some());
        assert!(t.finished_ms.unwrap() >= t.started_ms.unwrap());
    }
    // Usage once per message id, in our convention (cache reads inside the input).
    for r in &rs {
        let u = r.usage.as_ref().unwrap();
        assert!(u.input_tokens.unwrap() >= u.cache_read_input_tokens.unwrap_or(0));
    }
    assert!(s.model.as_deref().unwrap().starts_with("claude"));
}

#[test]
fn spotter_short_keeps_off_chain_results_and_the_interruption() {
    let r = read_one(&fixtures().join("genuine/spotter-short.jsonl"));
    let s = &r.sessions[0];
    // One prompt; one response of five lines (text, thinking, text, two tool_use) whose first
    // tool result (line 11) hangs off the chain; then "[Request interrupted by user for tool
    // use]" ends the turn.
    assert_eq!(kinds(s), "UAT");
    let calls = tools(s);
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|t| t.result.is_some()), "{calls:?}");
    let Item::TurnEnd(end) = &s.items[2] else {
        panic!()
    };
    assert!(end.aborted.is_some());
    // Its cache writes were all for an hour (`cache_creation.ephemeral_1h_input_tokens`):
    // counted apart, at their own rate later.
    let u = responses(s)[0].usage.as_ref().unwrap();
    assert_eq!(u.cache_creation_input_tokens, Some(13_835));
    assert_eq!(u.cache_write_1h_input_tokens, Some(13_835));
    assert_eq!(u.input_tokens, Some(3 + 13_835 + 11_515));
    // Thinking is not a part.
    let r0 = responses(s)[0];
    assert!(r0.content.iter().all(|c| match c {
        Content::Part(p) => p.kind == freecode_core::message::PartType::Text,
        Content::Tool(_) => true,
    }));
}

#[test]
fn compaction_is_crossed_and_kept_as_an_item() {
    let r =
        read_one(&fixtures().join("genuine/spotter-4d5611e5-excerpt-lines742-765-compact.jsonl"));
    let s = &r.sessions[0];
    // The boundary's logical parent is before the excerpt: the walk stops there. The summary
    // line is no message; one response (four lines) follows.
    assert_eq!(kinds(s), "CA");
    let Item::Compaction(c) = &s.items[0] else {
        panic!()
    };
    assert_eq!(c.before_tokens, Some(170_251));
    assert!(c.summary.starts_with("This session is being continued"));
}

#[test]
fn the_live_branch_wins_and_the_rewound_one_is_a_fork() {
    let r = read_one(&fixtures().join("schema/claudecodelog-dag_compact_after_rewind.jsonl"));
    assert_eq!(r.sessions.len(), 2);
    let main = &r.sessions[0];
    // u1 a1, then the second attempt (b2u b2a b2u2 b2a2), the compaction, p1u p1a.
    assert_eq!(kinds(main), "UAUAUACUA");
    let texts: Vec<String> = main
        .items
        .iter()
        .filter_map(|i| match i {
            Item::User(u) => u.parts[0].content.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        ["Start", "Second attempt", "Keep going", "After compaction"]
    );
    let fork = &r.sessions[1];
    assert_eq!(fork.parent.as_ref().unwrap().kind, ParentKind::Fork);
    assert_eq!(fork.parent.as_ref().unwrap().source_id, main.source_id);
    assert_eq!(kinds(fork), "UAUA");
    assert_eq!(fork.source_id, format!("{}@b1a", main.source_id));
}

#[test]
fn subagent_transcripts_are_children() {
    let r = read_one(
        &fixtures()
            .join("schema/agentsessions-subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"),
    );
    assert_eq!(r.sessions.len(), 2);
    let (parent, child) = (&r.sessions[0], &r.sessions[1]);
    assert!(parent.parent.is_none());
    assert_eq!(kinds(parent), "UAS");
    assert_eq!(
        child.parent,
        Some(ParentLink {
            source_id: parent.source_id.clone(),
            kind: ParentKind::Subagent
        })
    );
    assert_eq!(kinds(child), "UA");
    // The child's call has no id: its result is the id-less tool_result of the next line.
    let calls = tools(child);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].result.as_deref(), Some("a.txt:1: TODO fix"));
    assert_eq!(calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(parent.project_path.as_deref(), Some("/tmp"));
}

#[test]
fn the_coverage_fixture_reads_without_failing() {
    let r = read_one(&fixtures().join("schema/agentsessions-small.jsonl"));
    assert!(!r.sessions.is_empty());
    let s = &r.sessions[0];
    assert_eq!(
        s.title.as_deref(),
        Some("Stage0 small fixture"),
        "custom-title first"
    );
    assert!(s.message_count() >= 1);
}

fn write(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn user(uuid: &str, parent: Option<&str>, ts: &str, content: Value) -> Value {
    serde_json::json!({"type":"user","uuid":uuid,"parentUuid":parent,"timestamp":ts,
        "cwd":"/work/p","sessionId":"s","message":{"role":"user","content":content}})
}

fn asst(uuid: &str, parent: &str, ts: &str, id: &str, block: Value) -> Value {
    serde_json::json!({"type":"assistant","uuid":uuid,"parentUuid":parent,"timestamp":ts,
        "cwd":"/work/p","sessionId":"s","requestId":"r",
        "message":{"id":id,"role":"assistant","model":"claude-x","content":[block],
        "usage":{"input_tokens":3,"output_tokens":7,"cache_read_input_tokens":100,
                 "cache_creation_input_tokens":20}}})
}

#[test]
fn non_adjacent_split_lines_denials_api_errors_and_usage_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "s.jsonl",
        &[
            user("u1", None, "2026-01-01T00:00:00.000Z", Value::from("go")),
            asst(
                "a1",
                "u1",
                "2026-01-01T00:00:01.000Z",
                "m1",
                serde_json::json!({"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}),
            ),
            user(
                "r1",
                Some("a1"),
                "2026-01-01T00:00:03.500Z",
                serde_json::json!([{"type":"tool_result","tool_use_id":"t1","content":"a b"}]),
            ),
            asst(
                "a2",
                "r1",
                "2026-01-01T00:00:02.000Z",
                "m1",
                serde_json::json!({"type":"tool_use","id":"t2","name":"Edit","input":{}}),
            ),
            serde_json::json!({"type":"user","uuid":"r2","parentUuid":"a2","timestamp":"2026-01-01T00:00:04.000Z",
                "toolDenialKind":"user-rejected",
                "message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,
                "content":"The user doesn't want to proceed with this tool use."}]}}),
            serde_json::json!({"type":"system","subtype":"api_error","uuid":"e1","parentUuid":"r2",
                "timestamp":"2026-01-01T00:00:05.000Z","error":{"message":"overloaded"}}),
            serde_json::json!({"type":"mystery","uuid":"x1","parentUuid":"e1","newKey":1}),
            serde_json::json!({"type":"system","subtype":"turn_duration","uuid":"d1","parentUuid":"x1",
                "timestamp":"2026-01-01T00:00:06.000Z","durationMs":6000}),
        ],
    );
    let r = read(&SourceUnit::file(Agent::ClaudeCode, &path)).unwrap();
    let s = &r.sessions[0];
    assert_eq!(kinds(s), "UAET");
    let resp = responses(s)[0];
    let u = resp.usage.as_ref().unwrap();
    assert_eq!(u.input_tokens, Some(123));
    assert_eq!(u.output_tokens, Some(7));
    // No `cache_creation` split: nothing said to be for an hour.
    assert_eq!(u.cache_write_1h_input_tokens, None);
    assert_eq!(resp.first_token_ms, Some(1_767_225_601_000));
    assert_eq!(resp.completed_ms, Some(1_767_225_602_000));
    let calls = tools(s);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0].finished_ms.unwrap() - calls[0].started_ms.unwrap(),
        2500
    );
    assert_eq!(
        calls[1].outcome,
        ToolOutcome::Denied(Some("user-rejected".into()))
    );
    let Item::Error(e) = &s.items[2] else {
        panic!()
    };
    assert_eq!(e.message, "overloaded");
    assert_eq!(s.project_path.as_deref(), Some("/work/p"));
}

#[test]
fn bad_lines_torn_tails_and_lines_up_to_the_cap() {
    use freecode_core::limits::MAX_LINE_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    // A line just under the cap is read whole; one past it is skipped, never held.
    let big = "x".repeat(MAX_LINE_BYTES - 1024);
    let past = "y".repeat(MAX_LINE_BYTES + 1);
    let mut text = String::from("\u{feff}");
    text.push_str(&user("u1", None, "2026-01-01T00:00:00Z", Value::from(big.clone())).to_string());
    text.push_str("\nnot json\n");
    text.push_str(&user("u0", Some("u1"), "2026-01-01T00:00:00Z", Value::from(past)).to_string());
    text.push('\n');
    text.push_str(
        &asst(
            "a1",
            "u1",
            "2026-01-01T00:00:01Z",
            "m1",
            serde_json::json!({"type":"text","text":"done"}),
        )
        .to_string(),
    );
    text.push('\n');
    text.push_str("{\"type\":\"user\",\"uuid\":\"u2\",\"parentUuid\":\"a1\",\"mess");
    std::fs::write(&path, text).unwrap();
    let r = read(&SourceUnit::file(Agent::ClaudeCode, &path)).unwrap();
    let s = &r.sessions[0];
    assert_eq!(kinds(s), "UA");
    let Item::User(u) = &s.items[0] else { panic!() };
    assert_eq!(u.parts[0].content.as_ref().unwrap().len(), big.len());
    let lines: Vec<Option<u64>> = r.issues.iter().map(|i| i.line).collect();
    assert_eq!(
        lines,
        vec![Some(1), Some(2), Some(3), Some(5)],
        "{:?}",
        r.issues
    );
    assert!(
        r.issues[2].to_string().contains("longer than"),
        "{}",
        r.issues[2]
    );
}

#[test]
fn spilled_tool_outputs_are_read_from_tool_results() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("s").join("tool-results");
    std::fs::create_dir_all(&spill).unwrap();
    std::fs::write(spill.join("toolu_big.txt"), "the whole output").unwrap();
    write(
        dir.path(),
        "s.jsonl",
        &[
            user("u1", None, "2026-01-01T00:00:00Z", Value::from("go")),
            asst(
                "a1",
                "u1",
                "2026-01-01T00:00:01Z",
                "m1",
                serde_json::json!({"type":"tool_use","id":"t1","name":"Bash","input":{}}),
            ),
            serde_json::json!({"type":"user","uuid":"r1","parentUuid":"a1",
                "timestamp":"2026-01-01T00:00:02Z",
                "toolUseResult":{"persistedOutputPath":"/elsewhere/s/tool-results/toolu_big.txt"},
                "message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1",
                "content":"Output too large, saved to a file"}]}}),
        ],
    );
    let mut issues = Vec::new();
    let units = discover(dir.path(), &mut issues);
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].side_files, vec![spill.join("toolu_big.txt")]);
    let r = read(&units[0]).unwrap();
    let calls = tools(&r.sessions[0]);
    assert_eq!(calls[0].result.as_deref(), Some("the whole output"));
}

#[test]
fn pre_2_1_2_subagent_files_beside_the_session_are_children_not_sessions() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p1.jsonl",
        &[user("u1", None, "2026-01-01T00:00:00Z", Value::from("go"))],
    );
    let mut child = user("c1", None, "2026-01-01T00:00:01Z", Value::from("sub task"));
    child["sessionId"] = Value::from("p1");
    child["isSidechain"] = Value::from(true);
    write(dir.path(), "agent-abc.jsonl", &[child]);
    let mut issues = Vec::new();
    let units = discover(dir.path(), &mut issues);
    assert_eq!(units.len(), 1, "{units:?}");
    assert_eq!(
        units[0].side_files,
        vec![dir.path().join("agent-abc.jsonl")]
    );
    let r = read(&units[0]).unwrap();
    assert_eq!(r.sessions.len(), 2);
    assert_eq!(r.sessions[1].source_id, "p1/agent-abc");
    assert_eq!(
        r.sessions[1].parent.as_ref().unwrap().kind,
        ParentKind::Subagent
    );
}

#[test]
fn subagent_transcripts_whose_session_is_gone_are_sessions_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let sid = "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f";
    let project = dir.path().join("projects/-tmp");
    freecode_testkit::copy_tree(&fixtures().join("schema/agentsessions-subagent"), &project);
    // The child it is beside its session: the id an orphan must have too.
    let with_parent = read_one(&project.join(format!("{sid}.jsonl")));
    let child = with_parent.sessions[1].clone();
    std::fs::remove_file(project.join(format!("{sid}.jsonl"))).unwrap();
    // From the projects tree, from the session's folder, from `subagents/`, and the file.
    for root in [
        dir.path().join("projects"),
        project.join(sid),
        project.join(sid).join("subagents"),
        project
            .join(sid)
            .join("subagents/agent-a0ad4f44468bdf20d.jsonl"),
    ] {
        let mut issues = Vec::new();
        let units = discover(&root, &mut issues);
        assert_eq!(units.len(), 1, "{root:?}: {units:?} {issues:?}");
        assert!(issues.is_empty(), "{root:?}: {issues:?}");
        let r = read(&units[0]).unwrap();
        assert_eq!(r.sessions.len(), 1, "{root:?}");
        let orphan = &r.sessions[0];
        assert_eq!(orphan.source_id, child.source_id, "{root:?}");
        assert_eq!(orphan.parent, child.parent, "{root:?}");
        assert_eq!(kinds(orphan), kinds(&child));
    }
}

#[test]
fn inline_sidechains_of_older_versions_are_child_sessions_named_by_their_task_call() {
    let dir = tempfile::tempdir().unwrap();
    let side = |mut v: Value| {
        v["isSidechain"] = Value::from(true);
        v
    };
    let task = serde_json::json!({"type":"tool_use","id":"toolu_task1","name":"Task",
        "input":{"description":"find files","prompt":"List the Rust files"}});
    let path = write(
        dir.path(),
        "old.jsonl",
        &[
            user(
                "u1",
                None,
                "2026-01-01T00:00:00Z",
                Value::from("look around"),
            ),
            asst("a1", "u1", "2026-01-01T00:00:01Z", "m1", task),
            // The subagent's run, inline, its root a prompt of its own.
            side(user(
                "s1",
                None,
                "2026-01-01T00:00:02Z",
                Value::from("List the Rust files"),
            )),
            side(asst(
                "s2",
                "s1",
                "2026-01-01T00:00:03Z",
                "m2",
                serde_json::json!({"type":"text","text":"src/main.rs and src/lib.rs"}),
            )),
            user(
                "u2",
                Some("a1"),
                "2026-01-01T00:00:04Z",
                serde_json::json!([{"type":"tool_result","tool_use_id":"toolu_task1",
                    "content":"src/main.rs and src/lib.rs"}]),
            ),
            asst(
                "a2",
                "u2",
                "2026-01-01T00:00:05Z",
                "m3",
                serde_json::json!({"type":"text","text":"two files"}),
            ),
            // A run no Task call names: by its first record.
            side(user(
                "t1",
                None,
                "2026-01-01T00:00:06Z",
                Value::from("an orphan run"),
            )),
        ],
    );
    let r = read_one(&path);
    assert_eq!(r.sessions.len(), 3, "{:?}", r.sessions);
    let (main, run, other) = (&r.sessions[0], &r.sessions[1], &r.sessions[2]);
    assert_eq!(kinds(main), "UASA");
    assert_eq!(run.source_id, "old/agent-toolu_task1");
    assert_eq!(run.parent.as_ref().unwrap().kind, ParentKind::Subagent);
    assert_eq!(kinds(run), "UA");
    assert!(run.title.is_none());
    assert_eq!(other.source_id, "old/agent-t1");
    // The parent's subagent run names the child.
    let Some(Item::Subagent(s)) = main.items.iter().find(|i| matches!(i, Item::Subagent(_))) else {
        panic!()
    };
    assert_eq!(
        subagent_source_id(&main.source_id, &s.subagent_id),
        run.source_id
    );
}
