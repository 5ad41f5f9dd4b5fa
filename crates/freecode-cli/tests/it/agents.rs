//! The real agents, today's versions (pinned in `scripts/agents.pinned`, installed from npm by
//! `scripts/test-deps`), run offline against the scripted model server
//! (`freecode_testkit::model_server`) with homes of their own: a multi-turn session with tool
//! calls (a file read, a command, an edit, calls in parallel) and a long answer, continued by
//! the agent's own resume; then `freecode import` of what the agent wrote, compared with what
//! the model server saw and what the agent did: every prompt and answer in order, each tool
//! call with its input and the output the agent sent back, the model, the project directory
//! and the token counts the server reported.
//!
//! Without the agents installed the tests print a notice and pass, except under `CI=true`
//! (`freecode_testkit::agents::installed`).

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::Ctx;
use freecode_testkit::agents::{self, Agent};
use freecode_testkit::model_server::{Api, ModelServer, Recorded, Script, Step};
use serde_json::{Value, json};

/// A long markdown answer, not ASCII only.
const ANSWER: &str = "## Done\n\nThe typo is fixed: `teh` → `the` in **notes.txt**.\n\n\
- Read the file first (one line, 14 bytes)\n- Listed the directory: nothing else to fix\n\n\
Ça y est — the file now reads *the quick fox*. Naïve spellcheckers miss this kind of slip, so \
I also looked for other three-letter transpositions and found none. ";

/// The prompts of the two runs (the second continues the first).
const PROMPTS: [&str; 2] = [
    "Fix the typo in notes.txt, s'il vous plaît — and check nothing else is wrong",
    "Anything else in this directory to fix?",
];

/// A directory for an agent's work: `notes.txt` with a typo, in a path that is not ASCII.
pub(crate) fn workspace(ctx: &Ctx) -> PathBuf {
    let work = ctx.path("wörk space");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "teh quick fox\n").unwrap();
    // The path the agents see (the temporary directory may be under a link).
    std::fs::canonicalize(&work).unwrap()
}

/// An empty `HOME` for an agent.
pub(crate) fn agent_home(ctx: &Ctx) -> PathBuf {
    let home = ctx.path("agent-home");
    std::fs::create_dir_all(&home).unwrap();
    home
}

/// Runs `cmd`, which must succeed within the test's patience; its stdout.
pub(crate) fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one file with extension `ext` below `dir`.
fn only_file(dir: &Path, ext: &str) -> PathBuf {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                found.push(p);
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// What a session holds, as the tests compare it: prompts, answers' text, tool calls (name,
/// input, output) in order, each assistant message's tokens.
#[derive(Debug, Default)]
struct Seen {
    prompts: Vec<String>,
    answers: Vec<String>,
    tools: Vec<(String, Value, String)>,
    tokens: Vec<(u64, u64)>,
}

fn seen(session: &Value) -> Seen {
    let mut s = Seen::default();
    for m in session["messages"].as_array().unwrap() {
        let assistant = m["role"] == "assistant";
        for p in m["parts"].as_array().unwrap() {
            match p["type"].as_str().unwrap() {
                "text" if assistant => s.answers.push(p["content"].as_str().unwrap().to_owned()),
                "text" => s.prompts.push(p["content"].as_str().unwrap().to_owned()),
                "tool" => s.tools.push((
                    p["tool"]["name"].as_str().unwrap().to_owned(),
                    p["tool"]["args"].clone(),
                    p["result"].as_str().unwrap_or("").to_owned(),
                )),
                _ => {}
            }
        }
        if assistant && let Some(u) = m.get("usage").filter(|u| !u.is_null()) {
            s.tokens.push((
                u["inputTokens"].as_u64().unwrap_or(0),
                u["outputTokens"].as_u64().unwrap_or(0),
            ));
        }
    }
    s
}

/// Whether `want`'s keys all hold the same values in `got` (an agent may add defaults).
fn includes(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| includes(gv, v))),
        _ => got == want,
    }
}

/// Imports every session of `agent` from `home` into the context's home; the one imported.
fn import_one(ctx: &Ctx, home: &Path, agent: &str) -> Value {
    let out = ctx
        .cmd(&["import", agent, "--json"])
        .env("HOME", home)
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "import {agent}: {stderr}");
    // Every record of today's version is read or knowingly passed over: no issue, nothing
    // skipped, nothing unknown.
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["issues"], json!([]), "import {agent}: {report}");
    assert_eq!(report["summary"]["skipped"], 0, "{report}");
    assert!(!stderr.contains("unknown"), "import {agent} said: {stderr}");
    let list = ctx.json(&["session", "list", "--json", "--agent", agent]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    let id = list[0]["id"].as_str().unwrap().to_owned();
    ctx.json(&["session", "show", &id, "--json"])
}

/// The text of the tool results a Messages API request carries, by tool-use id.
pub(crate) fn anthropic_results(r: &Recorded) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in r.body["messages"].as_array().unwrap() {
        let Some(blocks) = m["content"].as_array() else {
            continue;
        };
        for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            out.push((b["tool_use_id"].as_str().unwrap().to_owned(), text));
        }
    }
    // The agent sends results as the tools finish; the scripted ids number them as called.
    out.sort();
    out
}

/// Every text a request carries from the user (prompts, with what the agent adds).
fn request_text(r: &Recorded) -> String {
    r.body.to_string()
}

#[test]
fn claude_code_today_imports_every_turn_the_model_saw() {
    let Some(bin) = agents::installed(Agent::ClaudeCode) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let notes = work.join("notes.txt").display().to_string();
    let server = ModelServer::start(Script::new([
        Step::tool("Read", json!({"file_path": notes})),
        // Two calls in parallel.
        Step::Tools(vec![
            (
                "Bash".into(),
                json!({"command": "ls -a", "description": "List the directory"}),
            ),
            ("Grep".into(), json!({"pattern": "teh", "path": work})),
        ]),
        Step::TextThenTools(
            "Fixing it now.".into(),
            vec![(
                "Edit".into(),
                json!({"file_path": notes, "old_string": "teh", "new_string": "the"}),
            )],
        ),
        Step::text(ANSWER.repeat(6)),
    ]));
    let claude = |prompt: &str, resume: Option<&str>| {
        let mut c = agents::claude(&bin, &home, &work, &server.url());
        c.args(["--permission-mode", "acceptEdits"])
            .args(["--allowedTools", "Read,Bash,Edit,Grep"]);
        if let Some(id) = resume {
            c.args(["--resume", id]);
        }
        c.args(["--", prompt]);
        run(&mut c)
    };
    let printed = claude(PROMPTS[0], None);
    assert!(printed.contains("the quick fox"), "{printed}");
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "the quick fox\n",
        "the agent ran the edit"
    );
    let transcript = only_file(&home.join(".claude/projects"), "jsonl");
    let uuid = transcript.file_stem().unwrap().to_str().unwrap().to_owned();
    // The second run resumes the first: its request carries every earlier turn.
    server.play(Script::new([Step::text(
        "Nothing else: the directory is clean.",
    )]));
    claude(PROMPTS[1], Some(&uuid));
    let turns = server.turns();
    assert_eq!(turns.len(), 5, "4 steps, then the resumed turn");
    assert!(turns.iter().all(|t| t.api == Api::Messages));
    let resumed = request_text(&turns[4]);
    for earlier in [PROMPTS[0], "Fixing it now.", "the quick fox"] {
        assert!(resumed.contains(earlier), "{earlier:?} not sent again");
    }
    assert!(resumed.contains(PROMPTS[1]));

    let session = import_one(&ctx, &home, "claude-code");
    let s = seen(&session);
    assert_eq!(s.prompts, PROMPTS, "the prompts, in order");
    assert_eq!(
        s.answers,
        [
            "Fixing it now.".to_owned(),
            ANSWER.repeat(6),
            "Nothing else: the directory is clean.".to_owned()
        ]
    );
    // Each tool call with its input, and the output the agent sent to the model.
    let names: Vec<&str> = s.tools.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["Read", "Bash", "Grep", "Edit"]);
    let scripted: Vec<Value> = turns[..3]
        .iter()
        .flat_map(|t| match t.step.as_ref().unwrap() {
            Step::Tools(c) | Step::TextThenTools(_, c) => c.iter().map(|c| c.1.clone()).collect(),
            _ => Vec::new(),
        })
        .collect();
    for ((name, args, _), want) in s.tools.iter().zip(&scripted) {
        assert!(includes(args, want), "{name}: {args} is not {want}");
    }
    let sent: Vec<String> = anthropic_results(&turns[3])
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    let imported: Vec<String> = s.tools.iter().map(|t| t.2.clone()).collect();
    assert_eq!(imported, sent, "the tool outputs the model saw");
    assert!(imported[0].contains("teh quick fox") && imported[1].contains("notes.txt"));
    // The model, the project, the tokens.
    let model = turns[0].body["model"].as_str().unwrap();
    assert_eq!(session["model"], model);
    assert_eq!(session["provider"], "anthropic");
    assert_eq!(session["projectPath"], work.display().to_string());
    let usage: Vec<(u64, u64)> = turns.iter().map(|t| t.usage).collect();
    assert_eq!(
        s.tokens, usage,
        "the tokens the server reported, per answer"
    );
}

#[test]
fn codex_today_imports_every_turn_the_model_saw() {
    let Some(bin) = agents::installed(Agent::Codex) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let server = ModelServer::start(Script::new([
        Step::tool("exec_command", json!({"cmd": "cat notes.txt"})),
        Step::Tools(vec![
            ("exec_command".into(), json!({"cmd": "ls -a"})),
            (
                "exec_command".into(),
                json!({"cmd": "grep -n teh notes.txt"}),
            ),
        ]),
        Step::TextThenTools(
            "Fixing it now.".into(),
            vec![(
                "exec_command".into(),
                json!({"cmd": "sed -i s/teh/the/ notes.txt && cat notes.txt"}),
            )],
        ),
        Step::text(ANSWER.repeat(6)),
    ]));
    agents::codex_config(&home, &server.openai_base());
    let printed = run(agents::codex(&bin, &home, &work).arg(PROMPTS[0]));
    assert!(printed.contains("the quick fox"), "{printed}");
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "the quick fox\n",
        "the agent ran the edit"
    );
    let rollout = only_file(&home.join(".codex/sessions"), "jsonl");
    let name = rollout.file_stem().unwrap().to_str().unwrap();
    // rollout-YYYY-MM-DDThh-mm-ss-<id>
    let id = &name[name.len() - 36..];
    server.play(Script::new([Step::text(
        "Nothing else: the directory is clean.",
    )]));
    run(agents::codex(&bin, &home, &work).args(["resume", id, PROMPTS[1]]));
    let turns = server.turns();
    assert_eq!(turns.len(), 5, "4 steps, then the resumed turn");
    assert!(turns.iter().all(|t| t.api == Api::Responses));
    let resumed = request_text(&turns[4]);
    for earlier in [PROMPTS[0], "Fixing it now.", "teh quick fox"] {
        assert!(resumed.contains(earlier), "{earlier:?} not sent again");
    }

    let session = import_one(&ctx, &home, "codex");
    let s = seen(&session);
    assert_eq!(s.prompts, PROMPTS, "the prompts, in order");
    assert_eq!(
        s.answers,
        [
            "Fixing it now.".to_owned(),
            ANSWER.repeat(6),
            "Nothing else: the directory is clean.".to_owned()
        ]
    );
    assert_eq!(s.tools.len(), 4, "{:?}", s.tools);
    let scripted = [
        "cat notes.txt",
        "ls -a",
        "grep -n teh notes.txt",
        "sed -i s/teh/the/ notes.txt && cat notes.txt",
    ];
    for ((name, args, _), want) in s.tools.iter().zip(scripted) {
        assert_eq!(name, "exec_command");
        assert!(
            args.to_string().contains(&want.replace('"', "\\\"")),
            "{args} is not {want}"
        );
    }
    // The outputs the agent sent back, as the model saw them.
    let sent: Vec<String> = turns[3].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| match &i["output"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(sent.len(), 4);
    for ((_, _, got), want) in s.tools.iter().zip(&sent) {
        assert!(
            want.contains(got.trim()) || got.contains(want.trim()),
            "imported {got:?}, the model saw {want:?}"
        );
    }
    assert!(s.tools[0].2.contains("teh quick fox"));
    assert_eq!(session["model"], turns[0].body["model"]);
    assert_eq!(session["projectPath"], work.display().to_string());
    let usage: Vec<(u64, u64)> = turns.iter().map(|t| t.usage).collect();
    assert_eq!(
        s.tokens, usage,
        "the tokens the server reported, per answer"
    );
}

/// A session of this home (as `freecode run` writes one) in `project`: a prompt, an answer
/// with a tool call and its output, a last answer. Its id.
fn session_here(ctx: &Ctx, project: &Path) -> String {
    let id = "0c5e5510-4a2f-4f3e-9d0c-000000000044";
    let project = project.display().to_string();
    let dir = ctx
        .home
        .join("sessions")
        .join(freecode_core::project_key::project_key(&project).dir_name())
        .join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let t0 = 1_767_225_600_000_i64;
    let meta = json!({
        "id": id, "title": "Fix the typo", "projectPath": project, "provider": "openai",
        "model": "gpt-here", "status": "active", "createdAt": t0, "updatedAt": t0 + 3_000,
        "lastTurnAt": t0 + 3_000, "turnCount": 1,
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_vec_pretty(&meta).unwrap(),
    )
    .unwrap();
    let notes = format!("{project}/notes.txt");
    let messages = [
        json!({"id": "h1", "role": "user", "parts": [{"type": "text", "content": "Fix the typo in notes.txt — vite"}], "timestamp": t0}),
        json!({"id": "h2", "role": "assistant", "parts": [
            {"type": "text", "content": "Reading it first."},
            {"type": "tool", "tool": {"name": "read_file", "args": {"path": notes}}, "result": "teh quick fox"},
        ], "timestamp": t0 + 1_000, "usage": {"inputTokens": 50, "outputTokens": 9}}),
        json!({"id": "h3", "role": "assistant", "parts": [{"type": "text", "content": "Found it: `teh` should be `the`."}], "timestamp": t0 + 3_000}),
    ];
    let lines: String = messages.iter().map(|m| format!("{m}\n")).collect();
    std::fs::write(dir.join("messages.jsonl"), lines).unwrap();
    id.to_owned()
}

/// `session handoff ID --to AGENT --json` with `home` as `HOME`: the answer.
fn handoff(ctx: &Ctx, home: &Path, id: &str, agent: &str) -> Value {
    let out = ctx
        .cmd(&["session", "handoff", id, "--to", agent, "--json"])
        .env("HOME", home)
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    common::schema_check("session-handoff.json", &v);
    let path = Path::new(v["path"].as_str().unwrap());
    assert!(path.starts_with(home), "{v}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    v
}

/// The session's messages as (role, text of its parts) lines.
fn lines_of(session: &Value) -> Vec<String> {
    session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let parts: Vec<String> = m["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| match p["type"].as_str().unwrap() {
                    "tool" => format!(
                        "{}→{}",
                        p["tool"]["name"].as_str().unwrap(),
                        p["result"].as_str().unwrap_or("")
                    ),
                    _ => p["content"].as_str().unwrap_or("").to_owned(),
                })
                .collect();
            format!("{}: {}", m["role"].as_str().unwrap(), parts.join(" | "))
        })
        .collect()
}

/// Imports `agent` from `home`; the report.
fn import_report(ctx: &Ctx, home: &Path, agent: &str) -> Value {
    let out = ctx
        .cmd(&["import", agent, "--json"])
        .env("HOME", home)
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_session_handed_to_claude_code_is_resumed_and_its_new_turns_come_back() {
    let Some(bin) = agents::installed(Agent::ClaudeCode) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    let before = lines_of(&ctx.json(&["session", "show", &id, "--json"]));
    let handed = handoff(&ctx, &home, &id, "claude-code");
    assert_eq!(handed["agent"], "claude-code");
    let uuid = handed["id"].as_str().unwrap();
    assert!(
        handed["resume"]
            .as_str()
            .unwrap()
            .ends_with(&format!("claude --resume {uuid}"))
    );
    // Never the same file twice.
    let again = handoff(&ctx, &home, &id, "claude-code");
    assert_ne!(again["id"], handed["id"]);
    std::fs::remove_file(again["path"].as_str().unwrap()).unwrap();

    let server = ModelServer::start(Script::new([Step::text(
        "Continuing: the file is clean now.",
    )]));
    let mut c = agents::claude(&bin, &home, &work, &server.url());
    c.args([
        "--permission-mode",
        "acceptEdits",
        "--resume",
        uuid,
        "--",
        PROMPTS[1],
    ]);
    run(&mut c);
    // The agent sent the whole session to the model: prompt, answer, call and its output.
    let turns = server.turns();
    assert_eq!(turns.len(), 1);
    let sent = request_text(&turns[0]);
    let mut at = 0;
    for want in [
        "Fix the typo in notes.txt — vite",
        "Reading it first.",
        "read_file",
        "teh quick fox",
        "Found it: `teh` should be `the`.",
        PROMPTS[1],
    ] {
        let pos = sent[at..].find(want).map(|p| p + at);
        assert!(
            pos.is_some(),
            "{want:?} not sent (in order) to the model: {sent}"
        );
        at = pos.unwrap();
    }
    let results = anthropic_results(&turns[0]);
    assert_eq!(
        results.len(),
        1,
        "the call's output went back as its result"
    );

    // Its new turns come back into the session it came from, once.
    let report = import_report(&ctx, &home, "claude-code");
    let back: Vec<&Value> = report["sessions"].as_array().unwrap().iter().collect();
    assert!(back.iter().all(|s| s["sessionId"] == id), "{report}");
    assert!(
        back.iter()
            .any(|s| s["action"] == "updated" && s["addedMessages"] == 2),
        "{report}"
    );
    let list = ctx.json(&["session", "list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "no new session: {list}");
    let after = lines_of(&ctx.json(&["session", "show", &id, "--json"]));
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(
        after[before.len()..],
        [
            format!("user: {}", PROMPTS[1]),
            "assistant: Continuing: the file is clean now.".to_owned()
        ]
    );
    let report = import_report(&ctx, &home, "claude-code");
    assert!(
        report["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["addedMessages"] == 0),
        "{report}"
    );
    assert_eq!(
        lines_of(&ctx.json(&["session", "show", &id, "--json"])),
        after
    );
}

#[test]
fn a_session_handed_to_codex_is_resumed_and_its_new_turns_come_back() {
    let Some(bin) = agents::installed(Agent::Codex) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    let before = lines_of(&ctx.json(&["session", "show", &id, "--json"]));
    let handed = handoff(&ctx, &home, &id, "codex");
    assert_eq!(handed["agent"], "codex");
    let cid = handed["id"].as_str().unwrap();
    assert!(
        handed["resume"]
            .as_str()
            .unwrap()
            .ends_with(&format!("codex resume {cid}"))
    );

    let server = ModelServer::start(Script::new([Step::text(
        "Continuing: the file is clean now.",
    )]));
    agents::codex_config(&home, &server.openai_base());
    run(agents::codex(&bin, &home, &work).args(["resume", cid, PROMPTS[1]]));
    let turns = server.turns();
    assert_eq!(turns.len(), 1);
    let sent = request_text(&turns[0]);
    let mut at = 0;
    for want in [
        "Fix the typo in notes.txt — vite",
        "Reading it first.",
        "read_file",
        "teh quick fox",
        "Found it: `teh` should be `the`.",
        PROMPTS[1],
    ] {
        let pos = sent[at..].find(want).map(|p| p + at);
        assert!(
            pos.is_some(),
            "{want:?} not sent (in order) to the model: {sent}"
        );
        at = pos.unwrap();
    }

    let report = import_report(&ctx, &home, "codex");
    let back: Vec<&Value> = report["sessions"].as_array().unwrap().iter().collect();
    assert!(back.iter().all(|s| s["sessionId"] == id), "{report}");
    assert!(
        back.iter()
            .any(|s| s["action"] == "updated" && s["addedMessages"] == 2),
        "{report}"
    );
    let list = ctx.json(&["session", "list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "no new session: {list}");
    let after = lines_of(&ctx.json(&["session", "show", &id, "--json"]));
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(
        after[before.len()..],
        [
            format!("user: {}", PROMPTS[1]),
            "assistant: Continuing: the file is clean now.".to_owned()
        ]
    );
}

/// Without the agents: a hand-back is written as the session is, secrets included, unless
/// `--redact`; each is a new private file; a project that does not exist here must be named,
/// and a relative `--project` is taken from the current directory.
#[test]
fn handoff_writes_new_private_files_and_redacts_only_when_asked() {
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    // A credential in a tool's output.
    let secret = "ghp_Zq9XyTb3LmN0pQr5StUvWx7YzA1bC2dE3fG4";
    let log = common::find_below(&ctx.home.join("sessions"), "messages.jsonl");
    let text = std::fs::read_to_string(&log)
        .unwrap()
        .replace("teh quick fox", &format!("teh quick fox\\ntoken={secret}"));
    std::fs::write(&log, text).unwrap();
    let plain = handoff(&ctx, &home, &id, "codex");
    let written = std::fs::read_to_string(plain["path"].as_str().unwrap()).unwrap();
    assert!(written.contains(secret), "written as it is by default");
    let out = ctx
        .cmd(&[
            "session",
            "handoff",
            &id,
            "--to",
            "claude-code",
            "--redact",
            "--json",
        ])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let redacted: Value = serde_json::from_slice(&out.stdout).unwrap();
    let written = std::fs::read_to_string(redacted["path"].as_str().unwrap()).unwrap();
    assert!(!written.contains(secret), "--redact removes it");
    assert!(written.contains("teh quick fox"));
    // The session's project gone from this machine: the error says what to do; a relative
    // --project is taken from the current directory.
    std::fs::rename(&work, ctx.path("moved away")).unwrap();
    let err = ctx
        .cmd(&["session", "handoff", &id, "--to", "codex"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(err.status.code(), Some(1), "{err:?}");
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("--project DIR"),
        "{err:?}"
    );
    let out = ctx
        .cmd(&[
            "session",
            "handoff",
            &id,
            "--to",
            "codex",
            "--project",
            "moved away",
        ])
        .current_dir(ctx.tmp.path())
        .env("HOME", &home)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("resume it with: cd '") && said.contains("moved away' && codex resume "),
        "{said}"
    );
}

/// A handed-back transcript is known by what the hand-back wrote in it, not by its name: a
/// copy under another project folder, continued there, is a session of its own, and so is a
/// file of the same name that the hand-back never wrote; the file the hand-back wrote, grown,
/// adds its new turns to the session it came from.
#[test]
fn a_handed_back_transcript_is_known_by_its_content_not_its_name() {
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    let handed = handoff(&ctx, &home, &id, "claude-code");
    let path = PathBuf::from(handed["path"].as_str().unwrap());
    let name = path.file_name().unwrap().to_owned();
    let text = std::fs::read_to_string(&path).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A turn as Claude Code appends it: a user record after the last one.
    let turn = |prompt: &str, n: u64| -> String {
        let last = records
            .iter()
            .rev()
            .find(|r| r["uuid"].is_string())
            .unwrap();
        let mut r = records
            .iter()
            .find(|r| r["type"] == "user")
            .unwrap()
            .clone();
        r["uuid"] = json!(format!("00000000-0000-4000-8000-{n:012}"));
        r["parentUuid"] = last["uuid"].clone();
        r["timestamp"] = json!("2099-01-01T00:00:00.000Z");
        r["message"] = json!({"role": "user", "content": prompt});
        format!("{r}\n")
    };
    let projects = home.join(".claude/projects");
    // A copy in another project's folder, continued there.
    let copy = projects.join("-elsewhere").join(&name);
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::write(&copy, format!("{text}{}", turn("continued in the copy", 1))).unwrap();
    // Another file of the same name the hand-back never wrote.
    let other = projects.join("-another").join(&name);
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    let mut stranger = records
        .iter()
        .find(|r| r["type"] == "user")
        .unwrap()
        .clone();
    stranger["uuid"] = json!("11111111-0000-4000-8000-000000000001");
    stranger["parentUuid"] = Value::Null;
    stranger["timestamp"] = json!("2099-01-02T00:00:00.000Z");
    stranger["message"] = json!({"role": "user", "content": "a stranger's conversation"});
    std::fs::write(&other, format!("{stranger}\n")).unwrap();
    // The file the hand-back wrote, grown.
    std::fs::write(
        &path,
        format!("{text}{}", turn("continued where it was handed", 2)),
    )
    .unwrap();

    let report = import_report(&ctx, &home, "claude-code");
    let shown = ctx.json(&["session", "show", &id, "--json"]);
    let lines = lines_of(&shown).join("\n");
    assert!(lines.contains("continued where it was handed"), "{lines}");
    assert!(!lines.contains("continued in the copy"), "{lines}");
    assert!(!lines.contains("a stranger's conversation"), "{lines}");
    // The copy and the stranger are sessions of their own: nothing lost, nothing replaced.
    let ids: Vec<&str> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert_ne!(o["action"], "replaced", "{report}");
            o["sessionId"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        ids.iter().collect::<std::collections::BTreeSet<_>>().len(),
        3,
        "{report}"
    );
    for (file, words) in [
        (&copy, "continued in the copy"),
        (&other, "a stranger's conversation"),
    ] {
        let o = report["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["path"] == file.display().to_string())
            .unwrap();
        let shown = ctx.json(&[
            "session",
            "show",
            o["sessionId"].as_str().unwrap(),
            "--json",
        ]);
        assert!(lines_of(&shown).join("\n").contains(words), "{shown}");
    }
    // Imported again: the same sessions, nothing changed.
    let again = import_report(&ctx, &home, "claude-code");
    for o in again["sessions"].as_array().unwrap() {
        assert!(ids.contains(&o["sessionId"].as_str().unwrap()), "{again}");
        assert_eq!(o["action"], "unchanged", "{again}");
    }
}

/// Gemini CLI, resuming a handed-back chat in another minute than its file's name says, may
/// start a new chat file beside it with the conversation's id: its turns go to the session the
/// chat came from, not to a session of their own.
#[test]
fn a_chat_gemini_starts_beside_a_handed_back_one_continues_its_session() {
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    let handed = handoff(&ctx, &home, &id, "gemini-cli");
    let path = PathBuf::from(handed["path"].as_str().unwrap());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    let head = lines.next().unwrap().to_owned();
    let mut user: Value = lines
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["type"] == "user")
        .unwrap();
    user["id"] = json!("beside-1");
    user["timestamp"] = json!("2099-01-03T00:00:00.000Z");
    user["content"] = json!([{"text": "continued in a chat beside it"}]);
    std::fs::write(
        path.with_file_name("session-2099-01-03T00-00-beside.jsonl"),
        format!("{head}\n{user}\n"),
    )
    .unwrap();
    let report = import_report(&ctx, &home, "gemini-cli");
    for s in report["sessions"].as_array().unwrap() {
        assert_eq!(s["sessionId"], id.as_str(), "{report}");
    }
    let shown = lines_of(&ctx.json(&["session", "show", &id, "--json"])).join("\n");
    assert!(shown.contains("continued in a chat beside it"), "{shown}");
}

/// Gemini CLI's `projects.json` is another program's file: a slug in it that is not one
/// directory name (`..` steps, an absolute path) is refused, and nothing is written outside
/// `~/.gemini`.
#[test]
fn a_gemini_slug_that_climbs_out_is_refused() {
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    let gemini = home.join(".gemini");
    std::fs::create_dir_all(&gemini).unwrap();
    for slug in ["../../../outside", "/tmp/elsewhere", "..", ""] {
        let registry = json!({"projects": {work.display().to_string(): slug}});
        std::fs::write(gemini.join("projects.json"), registry.to_string()).unwrap();
        let before: Vec<PathBuf> = walk(ctx.tmp.path());
        let out = ctx
            .cmd(&["session", "handoff", &id, "--to", "gemini-cli"])
            .env("HOME", &home)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{slug:?}: {err}");
        assert!(err.contains("not one directory name"), "{err}");
        assert_eq!(walk(ctx.tmp.path()), before, "{slug:?}: nothing written");
    }
}

/// Every path below `dir`, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `freecode` on `home` with `agent_home` as `HOME`, in `cwd`; must succeed; its stdout.
fn fc(home: &Path, agent_home: &Path, cwd: &Path, args: &[&str], input: Option<&str>) -> String {
    use std::io::Write as _;
    let mut c = common::freecode(home);
    c.args(args)
        .current_dir(cwd)
        .env("HOME", agent_home)
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(text) = input {
        stdin.write_all(text.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "freecode {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The round trip across machines and agents, each step by the real programs: on alpha, Codex
/// does a task and `freecode import` takes it; `freecode sync` carries it to beta; beta hands
/// it to Claude Code, which resumes it (the model server receives Codex's turns) and adds a
/// turn; beta imports that turn into the same session and syncs; alpha gets it, hands the
/// session back to Codex, which resumes it with both agents' turns; alpha imports that too.
/// One session holds all three runs, the same on both machines.
#[test]
fn a_session_goes_from_codex_on_one_machine_to_claude_code_on_another_and_back() {
    let (Some(codex_bin), Some(claude_bin)) = (
        agents::installed(Agent::Codex),
        agents::installed(Agent::ClaudeCode),
    ) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let (alpha, beta) = (ctx.path("alpha"), ctx.path("beta"));
    let (agents_a, agents_b) = (ctx.path("agents-alpha"), ctx.path("agents-beta"));
    for d in [&agents_a, &agents_b] {
        std::fs::create_dir_all(d).unwrap();
    }
    let model = ModelServer::start(Script::new([
        Step::tool("exec_command", json!({"cmd": "cat notes.txt"})),
        Step::text("On alpha, with Codex: the typo is `teh`."),
    ]));
    agents::codex_config(&agents_a, &model.openai_base());
    run(agents::codex(&codex_bin, &agents_a, &work).arg(PROMPTS[0]));
    fc(&alpha, &agents_a, &work, &["import", "codex"], None);
    let id = {
        let list: Value = serde_json::from_str(&fc(
            &alpha,
            &agents_a,
            &work,
            &["session", "list", "--json"],
            None,
        ))
        .unwrap();
        assert_eq!(list.as_array().unwrap().len(), 1);
        list[0]["id"].as_str().unwrap().to_owned()
    };

    // Alpha to beta, end to end encrypted, through a real sync server on loopback.
    let sync = freecode_remote::server::spawn(freecode_remote::server::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: freecode_remote::blob::StoreSpec::File(ctx.path("sync-server")),
        ..Default::default()
    })
    .unwrap();
    fc(
        &alpha,
        &agents_a,
        &work,
        &["sync", "init", "--server", &sync.url],
        None,
    );
    let key = fc(&alpha, &agents_a, &work, &["sync", "key"], None);
    let phrase = key.lines().last().unwrap().to_owned();
    fc(&alpha, &agents_a, &work, &["sync", "now"], None);
    fc(
        &beta,
        &agents_b,
        &work,
        &["sync", "join", "--server", &sync.url],
        Some(&phrase),
    );
    fc(&beta, &agents_b, &work, &["sync", "now"], None);

    // Beta: to Claude Code, which sends Codex's turns to its model and adds one.
    let handed: Value = serde_json::from_str(&fc(
        &beta,
        &agents_b,
        &work,
        &["session", "handoff", &id, "--to", "claude-code", "--json"],
        None,
    ))
    .unwrap();
    model.play(Script::new([Step::text(
        "On beta, with Claude Code: fixed it in my head.",
    )]));
    let mut c = agents::claude(&claude_bin, &agents_b, &work, &model.url());
    c.args(["--resume", handed["id"].as_str().unwrap(), "--", PROMPTS[1]]);
    run(&mut c);
    let sent = request_text(model.turns().last().unwrap());
    for earlier in [
        PROMPTS[0],
        "cat notes.txt",
        "teh quick fox",
        "On alpha, with Codex",
    ] {
        assert!(
            sent.contains(earlier),
            "{earlier:?} not sent by Claude Code"
        );
    }
    fc(&beta, &agents_b, &work, &["import", "claude-code"], None);
    fc(&beta, &agents_b, &work, &["sync", "now"], None);
    fc(&alpha, &agents_a, &work, &["sync", "now"], None);

    // Alpha: back to Codex, with both agents' turns.
    let handed: Value = serde_json::from_str(&fc(
        &alpha,
        &agents_a,
        &work,
        &["session", "handoff", &id, "--to", "codex", "--json"],
        None,
    ))
    .unwrap();
    model.play(Script::new([Step::text(
        "Back on alpha, with Codex: all done.",
    )]));
    run(agents::codex(&codex_bin, &agents_a, &work).args([
        "resume",
        handed["id"].as_str().unwrap(),
        "Summarise what happened.",
    ]));
    let sent = request_text(model.turns().last().unwrap());
    for earlier in [
        "On alpha, with Codex",
        PROMPTS[1],
        "On beta, with Claude Code",
    ] {
        assert!(sent.contains(earlier), "{earlier:?} not sent by Codex");
    }
    fc(&alpha, &agents_a, &work, &["import", "codex"], None);
    fc(&alpha, &agents_a, &work, &["sync", "now"], None);
    fc(&beta, &agents_b, &work, &["sync", "now"], None);

    let show = |home: &Path, agents: &Path| -> Value {
        serde_json::from_str(&fc(
            home,
            agents,
            &work,
            &["session", "show", &id, "--json"],
            None,
        ))
        .unwrap()
    };
    let (on_alpha, on_beta) = (show(&alpha, &agents_a), show(&beta, &agents_b));
    let texts: Vec<String> = lines_of(&on_alpha)
        .into_iter()
        .filter(|l| !l.contains("exec_command"))
        .collect();
    assert_eq!(
        texts,
        [
            format!("user: {}", PROMPTS[0]),
            "assistant: On alpha, with Codex: the typo is `teh`.".to_owned(),
            format!("user: {}", PROMPTS[1]),
            "assistant: On beta, with Claude Code: fixed it in my head.".to_owned(),
            "user: Summarise what happened.".to_owned(),
            "assistant: Back on alpha, with Codex: all done.".to_owned(),
        ]
    );
    assert_eq!(
        lines_of(&on_alpha),
        lines_of(&on_beta),
        "the same on both machines"
    );
    for home in [(&alpha, &agents_a), (&beta, &agents_b)] {
        let list: Value = serde_json::from_str(&fc(
            home.0,
            home.1,
            &work,
            &["session", "list", "--json"],
            None,
        ))
        .unwrap();
        assert_eq!(list.as_array().unwrap().len(), 1, "one session: {list}");
    }
}

#[test]
fn gemini_cli_today_imports_every_turn_the_model_saw() {
    let Some(bin) = agents::installed(Agent::GeminiCli) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let notes = work.join("notes.txt").display().to_string();
    let server = ModelServer::start(Script::new([
        Step::tool("read_file", json!({"file_path": notes})),
        Step::tool(
            "run_shell_command",
            json!({"command": "ls -a", "description": "List the directory"}),
        ),
        Step::text(ANSWER.repeat(6)),
    ]));
    let printed =
        run(agents::gemini(&bin, &home, &work, &server.gemini_base()).args(["-p", PROMPTS[0]]));
    assert!(printed.contains("the quick fox"), "{printed}");
    let turns = server.turns();
    assert_eq!(
        turns.len(),
        3,
        "{:?}",
        server.requests().iter().map(|r| &r.uri).collect::<Vec<_>>()
    );
    assert!(turns.iter().all(|t| t.api == Api::Gemini));
    // What the agent sent back for each call, as the model saw it (functionResponse parts).
    let responses: Vec<String> = turns[2].body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").map(|f| f["response"].to_string()))
        .collect();
    assert_eq!(responses.len(), 2, "{responses:?}");

    let session = import_one(&ctx, &home, "gemini-cli");
    let s = seen(&session);
    // Gemini CLI sends the model a `<session_context>` block as the first user turn; the typed
    // prompt follows it.
    let typed: Vec<&String> = s
        .prompts
        .iter()
        .filter(|p| !p.starts_with("<session_context>"))
        .collect();
    assert_eq!(typed, [PROMPTS[0]], "{:?}", s.prompts);
    // Gemini CLI keeps the answer without its trailing blanks.
    assert_eq!(s.answers, [ANSWER.repeat(6).trim_end()]);
    let names: Vec<&str> = s.tools.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["read_file", "run_shell_command"]);
    assert!(includes(&s.tools[0].1, &json!({"file_path": notes})));
    assert!(s.tools[0].2.contains("teh quick fox"), "{:?}", s.tools[0]);
    assert!(s.tools[1].2.contains("notes.txt"), "{:?}", s.tools[1]);
    for ((_, _, got), sent) in s.tools.iter().zip(&responses) {
        let first = got.lines().next().unwrap_or("");
        assert!(
            sent.contains(&first.replace('"', "\\\"")) || sent.contains(first),
            "imported {got:?}, sent {sent}"
        );
    }
    let model = turns[0]
        .uri
        .trim_start_matches("/v1beta/models/")
        .split(':')
        .next()
        .unwrap();
    assert_eq!(session["model"], model);
    assert_eq!(session["projectPath"], work.display().to_string());
    let usage: Vec<(u64, u64)> = turns.iter().map(|t| t.usage).collect();
    assert_eq!(
        s.tokens, usage,
        "the tokens the server reported, per answer"
    );
}

#[test]
fn a_session_handed_to_gemini_cli_is_resumed_and_its_new_turns_come_back() {
    let Some(bin) = agents::installed(Agent::GeminiCli) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let id = session_here(&ctx, &work);
    let before = lines_of(&ctx.json(&["session", "show", &id, "--json"]));
    let handed = handoff(&ctx, &home, &id, "gemini-cli");
    assert_eq!(handed["agent"], "gemini-cli");
    let gid = handed["id"].as_str().unwrap();
    assert!(
        handed["resume"]
            .as_str()
            .unwrap()
            .ends_with(&format!("gemini --resume {gid}"))
    );
    // The project is registered as Gemini CLI registers one.
    let registry: Value =
        serde_json::from_slice(&std::fs::read(home.join(".gemini/projects.json")).unwrap())
            .unwrap();
    assert!(
        registry["projects"][work.display().to_string()].is_string(),
        "{registry}"
    );

    let server = ModelServer::start(Script::new([Step::text(
        "Continuing: the file is clean now.",
    )]));
    run(agents::gemini(&bin, &home, &work, &server.gemini_base())
        .args(["--resume", gid, "-p", PROMPTS[1]]));
    let turns = server.turns();
    assert_eq!(turns.len(), 1);
    let sent = request_text(&turns[0]);
    let mut at = 0;
    for want in [
        "Fix the typo in notes.txt — vite",
        "Reading it first.",
        "read_file",
        "teh quick fox",
        "Found it: `teh` should be `the`.",
        PROMPTS[1],
    ] {
        let pos = sent[at..].find(want).map(|p| p + at);
        assert!(
            pos.is_some(),
            "{want:?} not sent (in order) to the model: {sent}"
        );
        at = pos.unwrap();
    }

    let report = import_report(&ctx, &home, "gemini-cli");
    let back: Vec<&Value> = report["sessions"].as_array().unwrap().iter().collect();
    assert!(back.iter().all(|s| s["sessionId"] == id), "{report}");
    let list = ctx.json(&["session", "list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "no new session: {list}");
    let after = lines_of(&ctx.json(&["session", "show", &id, "--json"]));
    assert_eq!(after[..before.len()], before[..]);
    let added: Vec<&String> = after[before.len()..]
        .iter()
        .filter(|l| !l.contains("<session_context>"))
        .collect();
    assert_eq!(
        added,
        [
            &format!("user: {}", PROMPTS[1]),
            &"assistant: Continuing: the file is clean now.".to_owned()
        ]
    );
}

#[test]
fn opencode_today_imports_every_turn_the_model_saw() {
    let Some(bin) = agents::installed(Agent::Opencode) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let notes = work.join("notes.txt").display().to_string();
    let server = ModelServer::start(Script::new([
        Step::tool("read", json!({"filePath": notes})),
        Step::tool(
            "bash",
            json!({"command": "ls -a", "description": "List the directory"}),
        ),
        Step::text(ANSWER.repeat(6)),
    ]));
    let printed = run(agents::opencode(&bin, &home, &work, &server.openai_base()).arg(PROMPTS[0]));
    assert!(printed.contains("the quick fox"), "{printed}");
    let turns = server.turns();
    assert_eq!(
        turns.len(),
        3,
        "{:?}",
        server.requests().iter().map(|r| &r.uri).collect::<Vec<_>>()
    );
    assert!(turns.iter().all(|t| t.api == Api::ChatCompletions));
    // The outputs the agent sent back (`tool` messages), as the model saw them.
    let sent: Vec<String> = turns[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");

    let session = import_one(&ctx, &home, "opencode");
    let s = seen(&session);
    assert_eq!(s.prompts.len(), 1, "{:?}", s.prompts);
    assert!(s.prompts[0].contains(PROMPTS[0]), "{:?}", s.prompts);
    assert_eq!(s.answers.concat().trim_end(), ANSWER.repeat(6).trim_end());
    let names: Vec<&str> = s.tools.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["read", "bash"]);
    assert!(includes(&s.tools[0].1, &json!({"filePath": notes})));
    for ((_, _, got), want) in s.tools.iter().zip(&sent) {
        assert!(
            want.contains(got.trim()) || got.contains(want.trim()),
            "imported {got:?}, the model saw {want:?}"
        );
    }
    assert!(s.tools[0].2.contains("teh quick fox"));
    assert_eq!(session["model"], "scripted-model");
    assert_eq!(session["projectPath"], work.display().to_string());
    let usage: Vec<(u64, u64)> = turns.iter().map(|t| t.usage).collect();
    assert_eq!(
        s.tokens, usage,
        "the tokens the server reported, per answer"
    );
}

/// Claude Code runs a subagent (its `Agent` tool, launched beside the parent): the subagent's
/// own loop talks to the model, and the import makes it a child session of the parent, with
/// its prompt, its call with the output and its answer.
#[test]
fn a_claude_code_subagent_is_imported_as_a_child_session() {
    let Some(bin) = agents::installed(Agent::ClaudeCode) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    let notes = work.join("notes.txt").display().to_string();
    // The subagent runs beside its parent (Claude Code launches it asynchronously): its
    // requests are told apart by its prompt.
    let server = ModelServer::start(
        Script::new([
            Step::tool(
                "Agent",
                json!({"description": "Check the notes", "prompt": "Read notes.txt and report any typo.", "subagent_type": "general-purpose"}),
            ),
            Step::text("Waiting for the subagent."),
            // Its report comes back to the parent when it ends.
            Step::text("The subagent found one typo."),
        ])
        .route(
            "Read notes.txt and report any typo.",
            [
                Step::tool("Read", json!({"file_path": notes})),
                Step::text("Subagent report: `teh` should be `the`."),
            ],
        ),
    );
    let mut c = agents::claude(&bin, &home, &work, &server.url());
    c.args([
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Agent,Read",
        "--",
        PROMPTS[0],
    ]);
    run(&mut c);
    assert_eq!(server.steps_left(), 0, "every step played");

    let out = ctx
        .cmd(&["import", "claude-code", "--json"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["issues"], json!([]), "{report}");
    let list = ctx.json(&["session", "list", "--json"]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "the parent and its subagent: {list:?}");
    let child = list
        .iter()
        .find(|s| s["parentId"].is_string())
        .expect("a child session");
    let parent = list.iter().find(|s| s["parentId"].is_null()).unwrap();
    assert_eq!(child["parentId"], parent["id"]);
    let child = seen(&ctx.json(&["session", "show", child["id"].as_str().unwrap(), "--json"]));
    assert!(
        child
            .prompts
            .iter()
            .any(|p| p.contains("Read notes.txt and report any typo.")),
        "{:?}",
        child.prompts
    );
    assert_eq!(child.tools.len(), 1, "{child:?}");
    assert!(child.tools[0].2.contains("teh quick fox"));
    assert_eq!(child.answers, ["Subagent report: `teh` should be `the`."]);
    let parent = seen(&ctx.json(&["session", "show", parent["id"].as_str().unwrap(), "--json"]));
    // The parent's call launched it, and the report reached the parent's model.
    assert_eq!(parent.tools.len(), 1);
    assert_eq!(parent.tools[0].0, "Agent");
    assert_eq!(
        parent.answers,
        ["Waiting for the subagent.", "The subagent found one typo."]
    );
    let last = server.turns().into_iter().last().unwrap();
    assert!(
        request_text(&last).contains("Subagent report"),
        "the report went to the parent"
    );
}

/// Claude Code compacts a session non-interactively (`claude -p --resume <uuid> /compact`):
/// the model writes the summary, and the import makes it the session's compaction (a summary
/// in `memory/<id>/memory.json`, the history from it on), so resuming here sends the summary.
#[test]
fn a_claude_code_compaction_is_imported_as_ours() {
    let Some(bin) = agents::installed(Agent::ClaudeCode) else {
        return;
    };
    let ctx = Ctx::empty();
    let work = workspace(&ctx);
    let home = agent_home(&ctx);
    // The summary is asked for like a turn (the request offers the tools too).
    let server = ModelServer::start(Script::new([
        Step::text("The typo is `teh`."),
        Step::text("SUMMARY: the user asked about a typo in notes.txt; it is `teh`."),
    ]));
    let claude = |args: &[&str]| {
        let mut c = agents::claude(&bin, &home, &work, &server.url());
        c.args(args);
        run(&mut c)
    };
    claude(&["--", PROMPTS[0]]);
    let transcript = only_file(&home.join(".claude/projects"), "jsonl");
    let uuid = transcript.file_stem().unwrap().to_str().unwrap().to_owned();
    claude(&["--resume", &uuid, "/compact"]);
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(text.contains("compact_boundary"), "Claude Code compacted");

    let session = import_one(&ctx, &home, "claude-code");
    let id = session["id"].as_str().unwrap();
    let memory = std::fs::read_to_string(ctx.home.join("memory").join(id).join("memory.json"))
        .expect("the compaction's summary is the session's");
    assert!(
        memory.contains("SUMMARY: the user asked about a typo"),
        "{memory}"
    );
}
