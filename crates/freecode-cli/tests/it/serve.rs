//! `freecode serve` driven as a front end drives it: a child process, JSON-RPC 2.0 lines over
//! its stdin and stdout — every method, and a catalogue of bad requests after which it keeps
//! serving and has written nothing.

use crate::common;

use crate::common::Ctx;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
const S2_INTERRUPTED: &str = "2b0084fa-74c0-4e03-a6d9-7e1128df064c";
const S5_DELETED: &str = "b5f300b4-eac0-4eab-8ef1-3233db36ea63";

struct Rpc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Rpc {
    fn start(home: &Path, rollout: bool) -> Self {
        Self::start_with(home, rollout, &[])
    }

    fn start_with(home: &Path, rollout: bool, env: &[(&str, &str)]) -> Self {
        let mut cmd = common::freecode(home);
        cmd.envs(env.iter().copied());
        cmd.arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if rollout {
            cmd.env_remove("FREECODE_ROLLOUT");
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next: 1,
        }
    }

    fn send_line(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the server closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {line}"))
    }

    fn raw(&mut self, line: &str) -> Value {
        self.send_line(line);
        self.read()
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let reply = self.raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        assert_eq!(reply["jsonrpc"], "2.0");
        assert_eq!(reply["id"], id);
        reply
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let reply = self.call(method, params);
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }

    fn err(&mut self, method: &str, params: Value) -> (i64, String) {
        let reply = self.call(method, params);
        let e = &reply["error"];
        assert!(e.is_object(), "{method} should fail: {reply}");
        (
            e["code"].as_i64().unwrap(),
            e["message"].as_str().unwrap().to_owned(),
        )
    }

    /// Sends a request without waiting; returns its id.
    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        id
    }

    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        self.child.wait().unwrap()
    }
}

fn fixture_home() -> (tempfile::TempDir, PathBuf) {
    let ctx = Ctx::fixture();
    (ctx.tmp, ctx.home)
}

/// Every file under `dir` with its bytes: "nothing was written" is this staying equal.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_session_method_over_stdio() {
    let (tmp, home) = fixture_home();
    let project = tmp.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let mut rpc = Rpc::start(&home, false);

    // list: the metas, as `session list --json` prints them; deleted ones hidden.
    let list = rpc.ok("session.list", json!({}));
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&S1) && !ids.contains(&S5_DELETED));
    let s1 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == S1)
        .unwrap();
    assert!(s1.get("messages").is_none(), "{s1}");
    assert_eq!(s1["model"], "claude-sonnet-4-5");
    let interrupted = rpc.ok("session.list", json!({"status": "interrupted"}));
    assert!(
        interrupted
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "interrupted")
    );
    // The reference home is ours only: `agent` selects all of it or nothing.
    let ours = rpc.ok("session.list", json!({"agent": "freecode"}));
    assert_eq!(ours.as_array().unwrap().len(), ids.len());
    let codex = rpc.ok("session.list", json!({"agent": "codex"}));
    assert_eq!(codex, json!([]));

    // start: a new session with the given provider and model.
    let started = rpc.ok(
        "session.start",
        json!({"projectPath": project, "provider": "openai", "model": "gpt-5"}),
    );
    let new_id = started["sessionId"].as_str().unwrap().to_owned();
    let list = rpc.ok("session.list", json!({"projectPath": project}));
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], new_id.as_str());
    assert_eq!(list[0]["title"], format!("Session {new_id}"));
    assert_eq!(list[0]["model"], "gpt-5");

    // resume of an interrupted session: the pinned model, the persisted "Continue…", active.
    let resumed = rpc.ok("session.resume", json!({"sessionId": S2_INTERRUPTED}));
    assert_eq!(resumed["sessionId"], S2_INTERRUPTED);
    assert_eq!(resumed["status"], "active");
    let msgs = resumed["messages"].as_array().unwrap();
    assert_eq!(
        msgs.last().unwrap()["parts"][0]["content"],
        "Continue from where you left off."
    );
    let again = rpc.ok("session.resume", json!({"sessionId": S2_INTERRUPTED}));
    assert_eq!(
        again["messages"].as_array().unwrap().len(),
        msgs.len(),
        "resuming an active session adds nothing"
    );
    let s1 = rpc.ok("session.resume", json!({"sessionId": S1}));
    assert_eq!(s1["model"], "claude-sonnet-4-5");

    // fork: a bare string id, the copy has parentId.
    let fork = rpc.ok("session.fork", json!({"sessionId": S1}));
    let fork_id = fork
        .as_str()
        .expect("fork returns a bare string")
        .to_owned();
    let list = rpc.ok("session.list", json!({}));
    let f = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == fork_id.as_str())
        .unwrap();
    assert_eq!(f["parentId"], S1);

    // compact: keep the last user turn, with and without a caller's summary.
    let c = rpc.ok("session.compact", json!({"sessionId": fork_id, "keep": 1}));
    assert_eq!(c["compacted"], true, "{c}");
    assert!(c["tokensAfter"].as_u64().unwrap() < c["tokensBefore"].as_u64().unwrap());
    let c = rpc.ok(
        "session.compact",
        json!({"sessionId": fork_id, "keep": 1, "summary": "nothing left"}),
    );
    assert_eq!(c["compacted"], false);
    assert!(c["reason"].is_string());

    // trace: the fold as JSON (S1 has a rollout log in the fixtures).
    let t = rpc.ok("session.trace", json!({"sessionId": S1}));
    assert!(t.is_object(), "{t}");
    assert!(t.get("hung").is_some(), "{t}");
    let none = rpc.ok("session.trace", json!({"sessionId": new_id}));
    assert_eq!(none, Value::Null);

    // move: another project, the same id; a relative directory or none is refused.
    let moved = rpc.ok(
        "session.move",
        json!({"sessionId": fork_id, "project": "/srv/déplacé"}),
    );
    assert_eq!(
        (moved["id"].as_str(), moved["projectPath"].as_str()),
        (Some(fork_id.as_str()), Some("/srv/déplacé"))
    );
    let got = rpc.ok("session.get", json!({"sessionId": fork_id}));
    assert_eq!(got["projectPath"], "/srv/déplacé");
    for bad in [
        json!({"sessionId": fork_id, "project": "rel"}),
        json!({"sessionId": fork_id}),
    ] {
        assert_eq!(rpc.err("session.move", bad).0, -32602);
    }

    // getInterrupted, archive.
    rpc.ok("session.getInterrupted", json!({}));
    assert_eq!(
        rpc.ok("session.archive", json!({"sessionId": fork_id})),
        Value::Null
    );

    // delete: soft (hidden, restorable), then purge (gone from disk).
    assert_eq!(
        rpc.ok("session.delete", json!({"sessionId": new_id})),
        Value::Null
    );
    let (code, msg) = rpc.err("session.resume", json!({"sessionId": new_id}));
    assert_eq!(
        (code, msg),
        (-32001, format!("Session not found: {new_id}"))
    );
    let dir_of = |id: &str| {
        std::fs::read_dir(home.join("sessions"))
            .unwrap()
            .flatten()
            .map(|p| p.path().join(id))
            .find(|p| p.exists())
    };
    assert!(dir_of(&fork_id).is_some());
    rpc.ok(
        "session.delete",
        json!({"sessionId": fork_id, "purge": true}),
    );
    assert!(dir_of(&fork_id).is_none(), "purge removes the directory");

    assert!(rpc.finish().success(), "stdin closed: the server exits 0");
}

/// `session.handoff`: a new Claude Code transcript in the agent's home (`HOME` of the server),
/// answered as `session handoff --json` answers; a relative project, an unknown agent and a
/// project that does not exist here are refused.
#[test]
fn handoff_over_rpc() {
    let (tmp, home) = fixture_home();
    let agent_home = tmp.path().join("agent home");
    let project = tmp.path().join("projet résumé");
    std::fs::create_dir_all(&agent_home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let mut rpc = Rpc::start_with(&home, false, &[("HOME", agent_home.to_str().unwrap())]);
    let done = rpc.ok(
        "session.handoff",
        json!({"sessionId": S1, "to": "claude-code", "project": project}),
    );
    common::schema_check("session-handoff.json", &done);
    assert_eq!(done["agent"], "claude-code");
    let path = PathBuf::from(done["path"].as_str().unwrap());
    assert!(
        path.starts_with(agent_home.join(".claude/projects")),
        "{done}"
    );
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.lines().count() > 2, "{first}");
    assert!(done["resume"].as_str().unwrap().contains("claude --resume"));
    let codex = rpc.ok(
        "session.handoff",
        json!({"sessionId": S1, "to": "codex", "project": project, "redact": true}),
    );
    assert!(
        Path::new(codex["path"].as_str().unwrap()).starts_with(agent_home.join(".codex/sessions"))
    );
    for (bad, says) in [
        (
            json!({"sessionId": S1, "to": "codex", "project": "rel"}),
            "absolute",
        ),
        (
            json!({"sessionId": S1, "to": "opencode", "project": project}),
            "claude-code, codex, gemini-cli",
        ),
        (json!({"sessionId": S1, "to": "codex"}), "--project"),
        (json!({"sessionId": S1}), "to"),
    ] {
        let (_, message) = rpc.err("session.handoff", bad.clone());
        assert!(message.contains(says), "{bad}: {message}");
    }
    rpc.finish();
}

#[test]
fn export_and_import_over_rpc() {
    let (tmp, home) = fixture_home();
    let server = freecode_remote::server::spawn(freecode_remote::server::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: freecode_remote::blob::StoreSpec::File(tmp.path().join("blobs")),
        ..Default::default()
    })
    .unwrap();
    let mut rpc = Rpc::start(&home, false);
    let e = rpc.ok("session.export", json!({"sessionId": S1, "to": server.url}));
    let url = e["url"].as_str().unwrap().to_owned();
    assert!(url.contains('#'));
    assert!(e["expiresAt"].as_i64().unwrap() > 0);
    let i = rpc.ok("session.import", json!({"url": url}));
    let id = i["sessionId"].as_str().unwrap();
    assert_ne!(id, S1);
    let r = rpc.ok("session.resume", json!({"sessionId": id}));
    assert!(!r["messages"].as_array().unwrap().is_empty());
    // By default the session belongs to the server's working directory; the sender's project
    // path is provenance only.
    let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
    let meta = meta_of(&home, id);
    assert_eq!(meta["projectPath"], cwd.to_str().unwrap());
    assert_eq!(
        meta["importedFrom"]["projectPath"],
        meta_of(&home, S1)["projectPath"]
    );
    // `projectPath` names the project.
    let project = tmp.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let project = project.canonicalize().unwrap();
    let i = rpc.ok(
        "session.import",
        json!({"url": url, "projectPath": project}),
    );
    let named = i["sessionId"].as_str().unwrap();
    assert_eq!(
        meta_of(&home, named)["projectPath"],
        project.to_str().unwrap()
    );
    let listed = rpc.ok("session.list", json!({"projectPath": project}));
    assert_eq!(listed[0]["id"], named);
    // A project directory that does not exist: an error, and nothing written.
    let before = snapshot(&home);
    let (code, msg) = rpc.err(
        "session.import",
        json!({"url": url, "projectPath": "/nonexistent/dir"}),
    );
    assert_eq!(code, -32602);
    assert!(msg.contains("/nonexistent/dir"), "{msg}");
    assert_eq!(snapshot(&home), before);
    let (code, msg) = rpc.err(
        "session.import",
        json!({"url": url.split('#').next().unwrap()}),
    );
    assert_eq!(code, -32602);
    assert!(msg.contains("no key"), "{msg}");
    assert!(rpc.finish().success());
}

#[test]
fn bad_requests_get_json_rpc_errors_and_write_nothing() {
    let (_tmp, home) = fixture_home();
    let before = snapshot(&home);
    let mut rpc = Rpc::start(&home, false);

    let code = |v: &Value| v["error"]["code"].as_i64().unwrap();
    // Not JSON: parse error, id null; not even UTF-8.
    let r = rpc.raw("{not json");
    assert_eq!((code(&r), &r["id"]), (-32700, &Value::Null));
    rpc.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\xff\xfe}\n")
        .unwrap();
    rpc.stdin.flush().unwrap();
    assert_eq!(code(&rpc.read()), -32700);
    // A line past the 16 MiB a message may hold: measured, not held, and answered.
    let past = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"session.list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "ü".repeat(9 << 20)
    );
    let r = rpc.raw(&past);
    assert_eq!((code(&r), &r["id"]), (-32700, &Value::Null), "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("past the"),
        "{r}"
    );
    // Not a request.
    assert_eq!(code(&rpc.raw("42")), -32600);
    assert_eq!(
        code(&rpc.raw(r#"{"id":1,"method":"session.list"}"#)),
        -32600
    );
    assert_eq!(
        code(&rpc.raw(r#"{"jsonrpc":"2.0","id":2,"method":7}"#)),
        -32600
    );
    assert_eq!(
        code(&rpc.raw(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"session.list"}"#)),
        -32600
    );
    assert_eq!(code(&rpc.raw("[]")), -32600);
    // Unknown method.
    let (c, m) = rpc.err("session.nope", json!({}));
    assert_eq!((c, m.as_str()), (-32601, "Method not found: session.nope"));
    // Wrong params.
    let r = rpc.raw(r#"{"jsonrpc":"2.0","id":3,"method":"session.list","params":[1,2]}"#);
    assert_eq!(code(&r), -32602);
    for (method, params) in [
        ("session.resume", json!({})),
        ("session.resume", json!({"sessionId": 5})),
        ("session.resume", json!({"sessionId": "../../etc"})),
        ("session.resume", json!({"sessionId": ".."})),
        ("session.delete", json!({"sessionId": "a/b", "purge": true})),
        ("session.delete", json!({"sessionId": S1, "purge": "yes"})),
        ("session.fork", json!({"sessionId": ""})),
        ("session.compact", json!({"sessionId": S1, "keep": 0})),
        ("session.compact", json!({"sessionId": S1, "keep": -1})),
        ("session.compact", json!({"sessionId": S1, "summary": "  "})),
        ("session.list", json!({"status": "bogus"})),
        ("session.start", json!({"provider": 3})),
        ("session.import", json!({})),
        ("session.trace", json!({"sessionId": "x\u{0}y"})),
        ("session.send", json!({"sessionId": S1})),
        ("session.send", json!({"sessionId": S1, "message": "  "})),
        ("session.send", json!({"sessionId": S1, "message": 3})),
        ("session.stop", json!({})),
    ] {
        let (c, m) = rpc.err(method, params.clone());
        assert_eq!(c, -32602, "{method} {params}: {m}");
    }
    // Unknown or deleted ids.
    for (method, params) in [
        ("session.resume", json!({"sessionId": "no-such-session"})),
        ("session.fork", json!({"sessionId": "no-such-session"})),
        (
            "session.delete",
            json!({"sessionId": "no-such-session", "purge": true}),
        ),
        ("session.compact", json!({"sessionId": "no-such-session"})),
        ("session.trace", json!({"sessionId": "no-such-session"})),
        ("session.resume", json!({"sessionId": S5_DELETED})),
        ("session.fork", json!({"sessionId": S5_DELETED})),
        (
            "session.send",
            json!({"sessionId": "no-such-session", "message": "hi"}),
        ),
        (
            "session.send",
            json!({"sessionId": S5_DELETED, "message": "hi"}),
        ),
    ] {
        let (c, m) = rpc.err(method, params.clone());
        assert_eq!(c, -32001, "{method} {params}: {m}");
        assert!(m.starts_with("Session not found: "), "{m}");
    }
    // Export over plain HTTP to a non-loopback host is refused before anything leaves.
    let (c, m) = rpc.err(
        "session.export",
        json!({"sessionId": S1, "to": "http://example.com"}),
    );
    assert_eq!(c, -32602);
    assert!(m.contains("plain HTTP"), "{m}");
    // A notification (no id) gets no answer, even when it fails; the next call still works.
    rpc.send_line(r#"{"jsonrpc":"2.0","method":"session.nope"}"#);
    rpc.send_line(r#"{"jsonrpc":"2.0","method":"session.resume","params":{"sessionId":"../x"}}"#);
    // A batch: answers in an array, notifications left out.
    let r = rpc.raw(
        r#"[{"jsonrpc":"2.0","id":"a","method":"session.list","params":{"projectPath":"/none"}},{"jsonrpc":"2.0","method":"session.list"},{"jsonrpc":"2.0","id":"b","method":"x"}]"#,
    );
    let arr = r.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["id"], "a");
    assert_eq!(arr[0]["result"], json!([]));
    assert_eq!(arr[1]["error"]["code"], -32601);
    assert!(rpc.ok("session.list", json!({})).is_array());
    assert!(rpc.finish().success());
    assert!(before == snapshot(&home), "no invalid call wrote anything");
}

#[test]
fn ctrl_c_while_idle_keeps_serving_and_a_second_within_a_second_exits_1() {
    let (_tmp, home) = fixture_home();
    let before = snapshot(&home.join("sessions"));
    let mut rpc = Rpc::start(&home, false);
    rpc.ok("session.list", json!({}));
    let pid = rpc.child.id().to_string();
    let kill = || {
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    kill();
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        rpc.child.try_wait().unwrap().is_none(),
        "one Ctrl+C while idle: still serving"
    );
    assert!(rpc.ok("session.list", json!({})).is_array());
    kill();
    std::thread::sleep(Duration::from_millis(100));
    kill();
    let mut status = None;
    for _ in 0..100 {
        status = rpc.child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        status.expect("two Ctrl+C within a second exit").code(),
        Some(1)
    );
    assert!(
        before == snapshot(&home.join("sessions")),
        "idle Ctrl+C marked nothing"
    );
}

fn sigint(pid: u32) {
    assert!(
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

fn meta_of(home: &Path, id: &str) -> Value {
    for dir in std::fs::read_dir(home.join("sessions")).unwrap().flatten() {
        let p = dir.path().join(id).join("meta.json");
        if p.exists() {
            return serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        }
    }
    panic!("no session {id}");
}

fn log_of(home: &Path, id: &str) -> Vec<Value> {
    for dir in std::fs::read_dir(home.join("sessions")).unwrap().flatten() {
        let p = dir.path().join(id).join("messages.jsonl");
        if p.exists() {
            return std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        }
    }
    panic!("no session {id}");
}

#[test]
fn session_send_runs_a_turn_and_ctrl_c_interrupts_it_while_the_server_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("README.md"), "# a project\n").unwrap();
    let mut rpc = Rpc::start_with(&home, true, &[("FREECODE_SCRIPTED_DELAY_MS", "0")]);
    let id = rpc.ok(
        "session.start",
        json!({"projectPath": project, "provider": "scripted"}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    // A whole turn: tools, a refused write, an answer.
    let n = rpc.send(
        "session.send",
        json!({"sessionId": id, "message": "what is this?"}),
    );
    let r = rpc.read();
    assert_eq!(r["id"], n, "{r}");
    let out = &r["result"];
    assert_eq!(out["status"], "completed", "{r}");
    assert!(out["toolCalls"].as_array().unwrap().len() >= 2);
    assert_eq!(meta_of(&home, &id)["turnCount"], 1);
    let trace = rpc.ok("session.trace", json!({"sessionId": id}));
    assert_eq!(trace["hung"], false);
    assert!(rpc.finish().success());

    // A slow turn: Ctrl+C stops it, saves what was streamed, and the server keeps serving.
    let mut rpc = Rpc::start_with(&home, true, &[("FREECODE_SCRIPTED_DELAY_MS", "150")]);
    let n = rpc.send(
        "session.send",
        json!({"sessionId": id, "message": "and again?"}),
    );
    let (c, m) = rpc.err(
        "session.send",
        json!({"sessionId": id, "message": "twice?"}),
    );
    assert_eq!(c, -32002, "{m}");
    std::thread::sleep(Duration::from_millis(700));
    sigint(rpc.child.id());
    let r = rpc.read();
    assert_eq!(r["id"], n, "{r}");
    assert_eq!(r["result"]["status"], "interrupted", "{r}");
    assert!(
        rpc.child.try_wait().unwrap().is_none(),
        "the server keeps running"
    );
    assert!(rpc.ok("session.list", json!({})).is_array());
    assert_eq!(meta_of(&home, &id)["status"], "interrupted");
    let log = log_of(&home, &id);
    let marked: Vec<&Value> = log.iter().filter(|m| m["interrupted"] == true).collect();
    assert_eq!(marked.len(), 1, "one message marked: {log:?}");
    assert_eq!(marked[0]["role"], "assistant");
    let events =
        std::fs::read_to_string(home.join("rollout/sessions").join(&id).join("events.jsonl"))
            .unwrap();
    assert!(
        events.contains("\"kind\":\"abort\""),
        "model.error{{abort}}: {events}"
    );

    // Resume: "Continue from where you left off." is persisted and the status is active.
    let resumed = rpc.ok("session.resume", json!({"sessionId": id}));
    assert_eq!(resumed["status"], "active");
    assert_eq!(
        resumed["messages"].as_array().unwrap().last().unwrap()["parts"][0]["content"],
        "Continue from where you left off."
    );

    // session.stop does what Ctrl+C does, for one session.
    let n = rpc.send(
        "session.send",
        json!({"sessionId": id, "message": "once more"}),
    );
    std::thread::sleep(Duration::from_millis(400));
    let stopped = rpc.ok("session.stop", json!({"sessionId": id}));
    assert_eq!(stopped["stopped"], true);
    let r = rpc.read();
    assert_eq!(r["id"], n, "{r}");
    assert_eq!(r["result"]["status"], "interrupted");
    assert_eq!(
        rpc.ok("session.stop", json!({"sessionId": id}))["stopped"],
        false
    );
    assert!(rpc.finish().success());
}

#[test]
fn dot_leading_project_paths_list_show_and_purge_over_rpc_and_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("h");
    let mut rpc = Rpc::start(&home, false);
    let id = rpc.ok(
        "session.start",
        json!({"projectPath": "/./tmp", "provider": "openai"}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // A dot-leading (hidden) name is unsafe: the path is written escaped (issue 12).
    assert!(
        home.join("sessions/esc-%2F.%2Ftmp")
            .join(&id)
            .join("meta.json")
            .is_file()
    );
    let listed = rpc.ok("session.list", json!({}));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], id.as_str());
    let by_project = rpc.ok("session.list", json!({"projectPath": "/./tmp"}));
    assert_eq!(by_project[0]["id"], id.as_str());
    assert_eq!(
        rpc.ok("session.resume", json!({"sessionId": id}))["sessionId"],
        id.as_str()
    );
    assert!(rpc.finish().success());

    // The CLI (its listing goes through the index) sees it too, and purges it.
    let run = |args: &[&str]| {
        let out = common::freecode(&home).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let list: Vec<Value> = serde_json::from_str(&run(&["session", "list", "--json"])).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], id.as_str());
    let shown: Value = serde_json::from_str(&run(&["session", "show", &id, "--json"])).unwrap();
    assert_eq!(shown["projectPath"], "/./tmp");
    run(&["session", "delete", &id, "--purge", "--yes"]);
    assert!(!home.join("sessions/esc-%2F.%2Ftmp").join(&id).exists());
    let list: Vec<Value> =
        serde_json::from_str(&run(&["session", "list", "--all", "--json"])).unwrap();
    assert!(list.is_empty(), "{list:?}");
}

/// `schema` (from the OpenRPC document's `components`) as a validator of one result.
fn check_result(doc: &Value, method: &str, result: &Value) {
    let m = doc["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == method)
        .unwrap_or_else(|| panic!("rpc.discover lists no {method}"));
    let mut schema = m["result"]["schema"].clone();
    if let Some(o) = schema.as_object_mut() {
        o.insert("components".into(), doc["components"].clone());
    }
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(result)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{method}: {errors:?}\n{result:#}");
}

#[test]
fn one_vocabulary_with_the_cli_discover_get_title_and_a_missing_provider() {
    let (tmp, home) = fixture_home();
    let project = tmp.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let cli = |args: &[&str]| -> Value {
        let out = common::freecode(&home).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let mut rpc = Rpc::start(&home, false);

    // rpc.discover: an OpenRPC document naming every method the server answers.
    let doc = rpc.ok("rpc.discover", json!({}));
    assert_eq!(doc["openrpc"], "1.3.2");
    let names: Vec<&str> = doc["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    for want in [
        "session.start",
        "session.list",
        "session.get",
        "session.resume",
        "session.send",
        "session.stop",
        "session.delete",
        "session.archive",
        "session.move",
        "session.fork",
        "session.compact",
        "session.getInterrupted",
        "session.export",
        "session.import",
        "session.trace",
        "rpc.discover",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // Every listed method exists: none answers "Method not found".
    for name in &names {
        let reply = rpc.call(name, json!({}));
        assert_ne!(reply["error"]["code"], -32601, "{name}: {reply}");
    }
    assert!(doc["components"]["schemas"]["SessionMeta"].is_object());

    // session.list: the very items of `session list --json`.
    let listed = rpc.ok("session.list", json!({}));
    check_result(&doc, "session.list", &listed);
    assert_eq!(listed, cli(&["session", "list", "--json"]));

    // session.get: `session show --json`'s object.
    let got = rpc.ok("session.get", json!({"sessionId": S1}));
    check_result(&doc, "session.get", &got);
    assert_eq!(got, cli(&["session", "show", S1, "--json"]));
    let (code, msg) = rpc.err("session.get", json!({"sessionId": "no-such-session"}));
    assert_eq!(code, -32001, "{msg}");

    // session.start honours title; without one the original's "Session <id>".
    let started = rpc.ok(
        "session.start",
        json!({"projectPath": project, "provider": "openai", "title": "fix the login bug"}),
    );
    check_result(&doc, "session.start", &started);
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let got = rpc.ok("session.get", json!({"sessionId": id}));
    assert_eq!(got["title"], "fix the login bug");
    assert_eq!(got["messages"], json!([]));
    let untitled = rpc.ok(
        "session.start",
        json!({"projectPath": project, "provider": "openai", "title": "  "}),
    );
    let uid = untitled["sessionId"].as_str().unwrap();
    let got = rpc.ok("session.get", json!({"sessionId": uid}));
    assert_eq!(got["title"], format!("Session {uid}"));

    // session.compact answers what `session compact --json` prints, sessionId included.
    let c = rpc.ok("session.compact", json!({"sessionId": S1, "keep": 1}));
    check_result(&doc, "session.compact", &c);
    assert_eq!(c["sessionId"], S1);

    // A missing provider is the caller's to fix: -32602 with the reason; nothing written.
    let before = snapshot(&home);
    let (code, msg) = rpc.err("session.start", json!({"projectPath": project}));
    assert_eq!(code, -32602, "{msg}");
    assert!(msg.contains("No provider configured"), "{msg}");
    assert_eq!(snapshot(&home), before);
    assert!(rpc.finish().success());
}

#[test]
fn start_and_resume_take_the_configured_provider_and_model() {
    let (_tmp, home) = fixture_home();
    std::fs::write(
        home.join("config.json"),
        r#"{"current": {"provider": "scripted", "model": "scripted-1"}}"#,
    )
    .unwrap();
    let mut rpc = Rpc::start(&home, false);
    let mut start = |params: Value| {
        rpc.ok("session.start", params)["sessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let id = start(json!({"title": "configured"}));
    let other = start(json!({"provider": "openai", "model": "gpt-x"}));
    let meta = meta_of(&home, &id);
    assert_eq!(meta["provider"], "scripted");
    assert_eq!(meta["model"], "scripted-1");
    let r = rpc.ok("session.resume", json!({"sessionId": id}));
    assert_eq!(r["provider"], "scripted");
    assert_eq!(r["model"], "scripted-1");
    // What the caller passes wins over the configuration.
    let id = other;
    let meta = meta_of(&home, &id);
    assert_eq!(meta["provider"], "openai");
    assert_eq!(meta["model"], "gpt-x");
    // A config.json that does not parse is an error naming it, for every method that reads it.
    std::fs::write(home.join("config.json"), "{").unwrap();
    let (code, msg) = rpc.err("session.start", json!({}));
    assert_eq!(code, -32603);
    assert!(msg.contains("config.json"), "{msg}");
    let (code, msg) = rpc.err("session.resume", json!({"sessionId": id}));
    assert_eq!(code, -32603);
    assert!(msg.contains("config.json"), "{msg}");
    assert!(rpc.finish().success());
}

/// A `session.get` on its own is written as the session is read (a block of messages at a
/// time, through a spool); a batch still builds its answers as values. Both must be the same
/// bytes, over a log of several blocks with escapes, non-ASCII text, floats, unknown keys and
/// a bad line, for a number id and a string id that needs escaping.
#[test]
fn a_session_get_alone_is_streamed_and_is_the_batch_answer_byte_for_byte() {
    let ctx = Ctx::fixture();
    let log = ctx
        .home
        .join("sessions/home__dev__projects__my_h_app")
        .join(S1)
        .join("messages.jsonl");
    let mut lines = String::new();
    for i in 0..9_000u32 {
        if i == 4_321 {
            lines.push_str("not json\n");
        }
        lines.push_str(&format!(
            r#"{{"id":"g{i}","role":"assistant","parts":[{{"type":"text","content":"tab\t\"q\" é 😀 {}"}},{{"type":"tool","tool":{{"name":"sh","args":{{"n":0.1,"big":9007199254740993,"neg":-{i}}}}},"result":"{}"}}],"timestamp":{i},"usage":{{"inputTokens":{i},"outputTokens":2}},"later":[1.5e300,null]}}"#,
            "word ".repeat(60),
            "out\\n".repeat(40)
        ));
        lines.push('\n');
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(lines.as_bytes()).unwrap();
    drop(f);
    assert!(std::fs::metadata(&log).unwrap().len() > 5 << 20);

    let mut rpc = Rpc::start(&ctx.home, false);
    for result in alone_and_batched(&mut rpc, "session.get") {
        assert!(result["messages"].as_array().unwrap().len() > 9_000);
    }
    // An error is an answer, and the server goes on.
    let (code, _) = rpc.err("session.get", json!({"sessionId": "no-such-session"}));
    assert_eq!(code, -32001);
    rpc.ok("session.get", json!({"sessionId": S1}));
}

/// A `session.trace` on its own is written as the log is folded (spans spooled as compact JSON
/// as they close, two halves on two threads); a batch builds the trace as a value. Both must be
/// the same bytes, over a log past the split with overlapping requests, parallel calls
/// answered in reverse, denials, bad lines and a torn tail; a session without a log is `null`.
#[test]
fn a_session_trace_alone_is_streamed_and_is_the_batch_answer_byte_for_byte() {
    let ctx = Ctx::fixture();
    let log = ctx
        .home
        .join("rollout/sessions")
        .join(S1)
        .join("events.jsonl");
    std::fs::write(&log, common::logs::big_odd_log()).unwrap();
    let mut rpc = Rpc::start(&ctx.home, false);
    for result in alone_and_batched(&mut rpc, "session.trace") {
        assert_eq!(result["toolSpans"].as_array().unwrap().len(), 48_000);
    }
    std::fs::remove_file(&log).unwrap();
    assert_eq!(
        rpc.ok("session.trace", json!({"sessionId": S1})),
        Value::Null
    );
    let (code, _) = rpc.err("session.trace", json!({"sessionId": "no-such-session"}));
    assert_eq!(code, -32001);
    assert!(rpc.finish().success());
}

/// Sends `method` for session S1 alone and then as a batch of one, with a number id and a
/// string id that needs escaping; checks that both answers are the same bytes and returns the
/// results answered alone.
fn alone_and_batched(rpc: &mut Rpc, method: &str) -> Vec<Value> {
    let read_line = |rpc: &mut Rpc| {
        let mut line = String::new();
        rpc.stdout.read_line(&mut line).unwrap();
        line
    };
    let mut results = Vec::new();
    for id in [json!(7), json!("a \"quoted\" id é")] {
        let req =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"sessionId": S1}})
                .to_string();
        rpc.send_line(&req);
        let alone = read_line(rpc);
        rpc.send_line(&format!("[{req}]"));
        let batch = read_line(rpc);
        let mut v: Value = serde_json::from_str(&alone).unwrap();
        assert_eq!(v["id"], id);
        let inner = batch
            .strip_prefix('[')
            .and_then(|b| b.strip_suffix("]\n"))
            .unwrap();
        assert!(
            alone.strip_suffix('\n') == Some(inner),
            "{method}: {} vs {} bytes",
            alone.len(),
            inner.len()
        );
        results.push(v["result"].take());
    }
    results
}
