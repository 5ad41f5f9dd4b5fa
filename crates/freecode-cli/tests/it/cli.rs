//! The `freecode` binary driven as a user drives it: exit codes, stdout data, stderr errors.

use crate::common;

use crate::common::{Ctx, fixtures};

use serde_json::Value;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
const S5_DELETED: &str = "b5f300b4-eac0-4eab-8ef1-3233db36ea63";

#[test]
fn list_prints_a_table_and_exact_json() {
    let ctx = Ctx::fixture();
    let table = ctx.ok(&["session", "list"]);
    assert!(table.starts_with("ID "), "{table}");
    assert!(table.contains(S1) && !table.contains(S5_DELETED));
    assert!(!table.contains('\x1b'), "NO_COLOR and a pipe: no escapes");
    assert!(ctx.ok(&["session", "list", "--all"]).contains(S5_DELETED));

    let mut json: Value = serde_json::from_str(&ctx.ok(&["session", "list", "--json"])).unwrap();
    // The original's output, and the agent that wrote each session (all of these, ours).
    for m in json.as_array_mut().unwrap() {
        assert_eq!(m["agent"], "freecode", "{m}");
        m.as_object_mut().unwrap().remove("agent");
    }
    let want: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expected/sessions/list/default.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json, want);

    let snake = ctx.ok(&["session", "list", "--project", "/home/dev/work", "--json"]);
    let snake: Vec<Value> = serde_json::from_str(&snake).unwrap();
    assert!(
        snake
            .iter()
            .all(|m| m["projectPath"] == "/home/dev/work/snake_case_repo")
            && !snake.is_empty()
    );
    let archived: Vec<Value> =
        serde_json::from_str(&ctx.ok(&["session", "list", "--status", "archived", "--json"]))
            .unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(
        ctx.run(&["session", "list", "--status", "bogus"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn show_json_is_the_meta_plus_the_stored_messages() {
    let ctx = Ctx::fixture();
    let mut v: Value = serde_json::from_str(&ctx.ok(&["session", "show", S1, "--json"])).unwrap();
    assert_eq!(v["agent"], "freecode");
    v.as_object_mut().unwrap().remove("agent");
    let meta: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expected/sessions/getMeta/S1_full.json")).unwrap(),
    )
    .unwrap();
    let msgs: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expected/sessions/getMessages/S1_full.json")).unwrap(),
    )
    .unwrap();
    let mut want = meta.as_object().unwrap().clone();
    want.insert("messages".into(), msgs);
    assert_eq!(v, Value::Object(want));
    let human = ctx.ok(&["session", "show", S1]);
    assert!(human.contains("Add dark mode toggle") && human.contains("read_file"));
}

/// `session show --json` streams a log block by block; on a log of several blocks (parsed on
/// several threads) with bad lines, lone surrogates and a torn tail it prints exactly what the
/// whole-log tree (the meta's fields plus every readable message) pretty-prints.
#[test]
fn streamed_show_json_is_the_tree_built_one_byte_for_byte() {
    use freecode_core::{SessionId, SessionMeta, StoredMessage};
    use std::io::Write as _;
    let ctx = Ctx::fixture();
    let store = freecode_store::SessionStore::open(freecode_store::Home::new(&ctx.home)).unwrap();
    let id = SessionId::new(S1).unwrap();
    let path = store.locate(&id).unwrap().messages();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let mut buf = Vec::new();
    let big = r#"x\n\"y\" é "#.repeat(40);
    for i in 0..30_000u32 {
        match i % 997 {
            5 => buf.extend_from_slice(b"{not json\n"),
            6 => buf.extend_from_slice(b"{\"id\":\"\xff\"}\n"),
            7 => buf.extend_from_slice(
                format!(
                    r#"{{"id":"s{i}","role":"user","parts":[{{"type":"text","content":"cut \ud83d"}}],"timestamp":{i}}}"#
                )
                .as_bytes(),
            ),
            8 => buf.extend_from_slice(b"\n   \n"),
            _ => buf.extend_from_slice(
                format!(
                    r#"{{"id":"g{i}","role":"assistant","parts":[{{"type":"text","content":"{big}{i}"}},{{"type":"tool","tool":{{"name":"grep","args":{{"n":{i},"f":0.25}}}},"result":""}}],"timestamp":{i},"usage":{{"inputTokens":{i},"outputTokens":1}},"extra":[true,null]}}"#
                )
                .as_bytes(),
            ),
        }
        if !buf.ends_with(b"\n") {
            buf.push(b'\n');
        }
    }
    buf.extend_from_slice(br#"{"id":"torn","role":"user""#);
    assert!(buf.len() > 3 * freecode_store::session::STREAM_BLOCK);
    f.write_all(&buf).unwrap();
    drop(f);

    #[derive(serde::Serialize)]
    struct Tree {
        #[serde(flatten)]
        meta: SessionMeta,
        messages: Vec<StoredMessage>,
    }
    let log = store.messages(&id).unwrap();
    assert!(log.issues.iter().any(|i| i.kind.skipped()));
    assert!(log.issues.iter().any(|i| !i.kind.skipped()));
    let mut want = serde_json::to_string_pretty(&Tree {
        meta: store.meta(&id).unwrap().with_agent(),
        messages: log.messages,
    })
    .unwrap();
    want.push('\n');
    let got = ctx.ok(&["session", "show", S1, "--json"]);
    assert!(
        got == want,
        "streamed output differs ({} vs {} bytes)",
        got.len(),
        want.len()
    );
}

#[test]
fn bad_and_unknown_ids_are_user_errors() {
    let ctx = Ctx::fixture();
    for bad in ["..", "../../x", "a/b", ""] {
        let out = ctx.run(&["session", "show", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("session id"),
            "{bad:?}"
        );
    }
    let out = ctx.run(&[
        "session",
        "delete",
        "00000000-0000-4000-8000-000000000000",
        "--purge",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

#[test]
fn delete_is_soft_restore_undoes_it_purge_needs_confirmation() {
    let ctx = Ctx::fixture();
    ctx.ok(&["session", "delete", S1]);
    assert!(!ctx.ok(&["session", "list"]).contains(S1));
    ctx.ok(&["session", "restore", S1]);
    assert!(ctx.ok(&["session", "list"]).contains(S1));

    let out = ctx.run(&["session", "delete", S1, "--purge"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no terminal and no --yes: refuse"
    );
    assert!(ctx.ok(&["session", "list"]).contains(S1));
    ctx.ok(&["session", "delete", S1, "--purge", "--yes"]);
    assert!(!ctx.ok(&["session", "list", "--all"]).contains(S1));
}

#[test]
fn fork_and_compact() {
    let ctx = Ctx::fixture();
    let new_id = ctx.ok(&["session", "fork", S1]).trim().to_owned();
    let v: Value = serde_json::from_str(&ctx.ok(&["session", "show", &new_id, "--json"])).unwrap();
    assert_eq!(v["parentId"], S1);
    assert_eq!(v["messages"].as_array().unwrap().len(), 12);

    let summary = ctx.home.join("summary.txt");
    std::fs::write(&summary, "earlier: dark mode toggle planned").unwrap();
    let s = summary.to_str().unwrap();
    assert_eq!(
        ctx.run(&[
            "session",
            "compact",
            &new_id,
            "--keep",
            "0",
            "--summary-file",
            s
        ])
        .status
        .code(),
        Some(1)
    );
    let out: Value = serde_json::from_str(&ctx.ok(&[
        "session",
        "compact",
        &new_id,
        "--keep",
        "1",
        "--summary-file",
        s,
        "--json",
    ]))
    .unwrap();
    assert_eq!(out["compacted"], true);
    let v: Value = serde_json::from_str(&ctx.ok(&["session", "show", &new_id, "--json"])).unwrap();
    assert_eq!(
        v["messages"].as_array().unwrap().len(),
        out["messagesAfter"].as_u64().unwrap() as usize
    );
    assert_eq!(v["messages"][0]["role"], "user");
}

#[test]
fn an_empty_home_lists_nothing() {
    let ctx = Ctx::missing();
    std::fs::create_dir(&ctx.home).unwrap();
    assert_eq!(ctx.ok(&["session", "list"]), "No sessions found.\n");
    assert_eq!(ctx.ok(&["session", "list", "--json"]).trim(), "[]");
}

/// README's main command: offline, in a fresh home, a real session, its trace and a share.
#[test]
fn demo_shows_a_real_session_its_trace_and_a_share_round_trip() {
    let ctx = Ctx::missing();
    let project = ctx.tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README.md"), "# demo project\n").unwrap();
    let out = common::freecode(&ctx.home)
        .args(["--home", ctx.home.to_str().unwrap(), "demo", "--project"])
        .arg(&project)
        .env_remove("FREECODE_HOME")
        .env_remove("FREECODE_ROLLOUT")
        .env("FREECODE_SCRIPTED_DELAY_MS", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "$ freecode session list",
        "$ freecode trace --last",
        "where the time went",
        "deny  write_file",
        "(imported)",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    // Two sessions on disk: the run and its imported copy, and the run's rollout log.
    let list = ctx.ok(&["session", "list", "--json"]);
    let v: Vec<Value> = serde_json::from_str(&list).unwrap();
    assert_eq!(v.len(), 2);
    let run = v.iter().find(|m| m.get("importedFrom").is_none()).unwrap();
    let events = ctx
        .home
        .join("rollout/sessions")
        .join(run["id"].as_str().unwrap())
        .join("events.jsonl");
    let log = std::fs::read_to_string(events).unwrap();
    for kind in [
        "model.request",
        "model.first_token",
        "model.response",
        "function.call",
        "function.output",
        "function.denied",
    ] {
        assert!(
            log.contains(&format!("\"type\":\"{kind}\"")),
            "no {kind} in the log"
        );
    }
}
