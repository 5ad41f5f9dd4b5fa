//! Unit tests of `gemini_cli`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn only(read: &Read) -> &ImportedSession {
    assert_eq!(read.sessions.len(), 1, "{:?}", read.issues);
    &read.sessions[0]
}

#[test]
fn jsonl_replaces_by_id_merges_batches_and_rewinds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session-x.jsonl");
    let lines = [
        r#"{"sessionId":"s1","projectHash":"h","startTime":"2026-01-01T00:00:00Z","lastUpdated":"2026-01-01T00:00:00Z"}"#,
        r#"{"id":"u1","timestamp":"2026-01-01T00:00:01Z","type":"user","content":[{"text":"<session_context>tree</session_context>"}]}"#,
        r#"{"id":"u2","timestamp":"2026-01-01T00:00:02Z","type":"user","content":"real prompt"}"#,
        r#"{"id":"g1","timestamp":"2026-01-01T00:00:03Z","type":"gemini","content":"draft","model":"m1"}"#,
        r#"{"id":"g1","timestamp":"2026-01-01T00:00:03Z","type":"gemini","content":"final","model":"m1","tokens":{"input":10,"output":2,"cached":4,"thoughts":3,"tool":1,"total":16},"toolCalls":[{"id":"t1","name":"ls","args":{},"status":"cancelled","timestamp":"2026-01-01T00:00:05Z","result":[{"functionResponse":{"id":"t1","name":"ls","response":{"error":"User did not allow"}}}]}]}"#,
        r#"{"$set":{"lastUpdated":"2026-01-01T00:00:09Z","summary":"A summary","messages":[{"id":"u2","timestamp":"2026-01-01T00:00:02Z","type":"user","content":"real prompt"},{"id":"g2","timestamp":"2026-01-01T00:00:06Z","type":"gemini","content":"batched","model":"m2"}]}}"#,
        r#"{"id":"u3","timestamp":"2026-01-01T00:00:07Z","type":"user","content":"rewound"}"#,
        r#"{"id":"e1","timestamp":"2026-01-01T00:00:07Z","type":"error","content":"quota"}"#,
        r#"{"$rewindTo":"u3"}"#,
        r#"{"id":"w","timestamp":"2026-01-01T00:00:08Z","type":"warning","content":"careful"}"#,
        r#"{"weird":true}"#,
    ];
    write(&path, &(lines.join("\n") + "\n"));
    let read = read(&SourceUnit::file(Agent::GeminiCli, &path)).unwrap();
    let s = only(&read);
    assert_eq!(s.source_id, "s1");
    assert_eq!(s.title.as_deref(), Some("A summary"));
    assert_eq!(s.model.as_deref(), Some("m2"));
    assert_eq!(s.updated_ms, parse_iso_ms("2026-01-01T00:00:09Z"));
    // u1, u2, g1, g2 (u3 and e1 rewound, the warning skipped).
    assert_eq!(s.message_count(), 4);
    let Item::Response(g1) = &s.items[2] else {
        panic!("{:?}", s.items)
    };
    assert_eq!(g1.content[0], Content::Part(Part::text("final")));
    let usage = g1.usage.as_ref().unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.reasoning_tokens
        ),
        (Some(11), Some(5), Some(4), Some(3))
    );
    let Content::Tool(call) = &g1.content[1] else {
        panic!()
    };
    assert_eq!(
        call.outcome,
        ToolOutcome::Denied(Some("User did not allow".into()))
    );
    assert_eq!(call.finished_ms.unwrap() - call.started_ms.unwrap(), 2000);
    assert!(
        read.issues.iter().any(|i| i.line == Some(11)),
        "{:?}",
        read.issues
    );
    assert!(s.project_path.is_none());
    assert_eq!(s.project_hash.as_deref(), Some("h"));
}

#[test]
fn project_path_from_the_hash_or_the_slug_never_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = dir.path().join(".gemini");
    let hash = sha256_hex("/home/u/alpha");
    write(
        &gemini.join(PROJECTS_FILE),
        r#"{"projects":{"/home/u/alpha":"alpha","/home/u/beta-repo":"beta"}}"#,
    );
    let by_hash = gemini.join("tmp/whatever/chats/session-a.jsonl");
    write(
        &by_hash,
        &format!("{{\"sessionId\":\"a\",\"projectHash\":\"{hash}\"}}\n"),
    );
    let by_slug = gemini.join("tmp/beta/chats/session-b.jsonl");
    write(&by_slug, "{\"sessionId\":\"b\",\"projectHash\":\"00\"}\n");
    let lost = gemini.join("tmp/gamma/chats/session-c.jsonl");
    write(&lost, "{\"sessionId\":\"c\",\"projectHash\":\"00\"}\n");
    let child = gemini.join("tmp/beta/chats/b/sub-1.jsonl");
    write(&child, "{\"sessionId\":\"sub-1\",\"kind\":\"subagent\"}\n");
    write(
        &gemini.join("tmp/beta/chats/session-b.json"),
        "{\"sessionId\":\"b\"}",
    );
    let mut issues = Vec::new();
    let units = discover(&gemini, &mut issues);
    let paths: Vec<_> = units.iter().map(|u| u.path.clone()).collect();
    // Sorted; the legacy `.json` beside its `.jsonl` left out; the subagent's chat last.
    assert_eq!(
        paths,
        vec![
            by_slug.clone(),
            lost.clone(),
            by_hash.clone(),
            child.clone()
        ]
    );
    assert!(
        units
            .iter()
            .all(|u| u.side_files == vec![gemini.join(PROJECTS_FILE)])
    );
    let project = |i: usize| read(&units[i]).unwrap().sessions[0].project_path.clone();
    assert_eq!(project(2).as_deref(), Some("/home/u/alpha"));
    assert_eq!(project(0).as_deref(), Some("/home/u/beta-repo"));
    assert_eq!(project(1), None);
    let lost = read(&units[1]).unwrap();
    assert_eq!(only(&lost).project_hash.as_deref(), Some("00"));
    // Resolved sessions carry no hash to resolve.
    assert_eq!(read(&units[2]).unwrap().sessions[0].project_hash, None);
    let child = read(&units[3]).unwrap();
    assert_eq!(
        only(&child).parent,
        Some(ParentLink {
            source_id: "b".into(),
            kind: ParentKind::Subagent
        })
    );
}

#[test]
fn a_legacy_file_cut_mid_write_keeps_its_complete_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session-l.json");
    let whole = r#"{"sessionId":"l","startTime":"2026-01-01T00:00:00Z","messages":[{"id":"1","type":"user","content":"one"},{"id":"2","type":"gemini","content":"two"},{"id":"3","type":"user","content":"three"}]}"#;
    let cut = whole.find("three").unwrap();
    write(&path, &whole[..cut]);
    let read = read(&SourceUnit::file(Agent::GeminiCli, &path)).unwrap();
    let s = only(&read);
    assert_eq!(s.message_count(), 2);
    assert!(
        read.issues
            .iter()
            .any(|i| i.message.contains("2 complete messages kept"))
    );
}

#[test]
fn a_rewind_to_an_unknown_id_clears_the_chat_and_links_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let chats = dir.path().join(".gemini/tmp/p/chats");
    let path = chats.join("session-r.jsonl");
    write(
        &path,
        "{\"sessionId\":\"r\"}\n{\"id\":\"a\",\"type\":\"user\",\"content\":\"gone\"}\n{\"$rewindTo\":\"nope\"}\n{\"id\":\"b\",\"type\":\"user\",\"content\":\"kept\"}\n",
    );
    let read = read(&SourceUnit::file(Agent::GeminiCli, &path)).unwrap();
    let s = only(&read);
    assert_eq!(s.message_count(), 1);
    assert_eq!(s.title.as_deref(), Some("kept"));
    let outside = dir.path().join("session-outside.jsonl");
    write(&outside, "{\"sessionId\":\"o\"}\n");
    std::os::unix::fs::symlink(&outside, chats.join("session-link.jsonl")).unwrap();
    let mut issues = Vec::new();
    let units = discover(&dir.path().join(".gemini"), &mut issues);
    assert_eq!(units.len(), 1);
    assert!(
        issues
            .iter()
            .any(|i| i.path.ends_with("session-link.jsonl"))
    );
}

#[test]
fn default_roots_honour_gemini_cli_home() {
    let with = |k: &str| match k {
        "GEMINI_CLI_HOME" => Some(OsString::from("/iso")),
        "HOME" => Some(OsString::from("/home/u")),
        _ => None,
    };
    assert_eq!(default_roots(&with), vec![PathBuf::from("/iso/.gemini")]);
    let without = |k: &str| (k == "HOME").then(|| OsString::from("/home/u"));
    assert_eq!(
        default_roots(&without),
        vec![PathBuf::from("/home/u/.gemini")]
    );
}
