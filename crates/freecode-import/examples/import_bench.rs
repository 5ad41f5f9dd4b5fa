//! Import throughput: generates a Claude Code tree (default 10,000 sessions of about 105 KB,
//! ≥ 1 GB: prompts, assistant responses split over several lines with parallel tool calls,
//! tool results, hook progress lines, snapshots) and a Codex CLI tree (10,000 rollouts of about
//! 103 KB under `sessions/YYYY/MM/DD/`: `session_meta`, a `turn_context` per turn, the prompt
//! as `event_msg/user_message` and its `response_item` copy, reasoning, assistant messages,
//! parallel `function_call`s and their `function_call_output`s, `token_count` snapshots,
//! `agent_message` copies, `task_complete`) in a temp directory, imports each into a fresh home,
//! and prints MB/s of source; then imports each unchanged tree again (every unit skipped on its
//! stat) and prints that time, and the time `import --detect` takes to count the tree.
//!
//! `cargo run --release -p freecode-import --example import_bench` (`IMPORT_BENCH_AGENTS`:
//! `claude-code`, `codex` or both, the default, comma-separated; `IMPORT_BENCH_SESSIONS`,
//! `IMPORT_BENCH_TURNS` change the size; `IMPORT_BENCH_DIR` the directory, else the system
//! temp directory).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use freecode_import::importer::{self, Options};
use freecode_import::source::Agent;
use freecode_store::{Home, SessionStore};
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One session file of `turns` turns; returns its size.
fn write_session(path: &Path, sid: &str, turns: usize) -> u64 {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0u64;
    let mut put = |v: serde_json::Value| {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        written += line.len() as u64;
        out.write_all(&line).unwrap();
    };
    let base = 1_767_225_600_000i64;
    let ts = |ms: i64| {
        jiff::Timestamp::from_millisecond(base + ms)
            .unwrap()
            .to_string()
    };
    let env = |uuid: &str, parent: Option<&str>, t: i64| {
        json!({"parentUuid": parent, "isSidechain": false, "userType": "external",
               "cwd": "/home/me/projects/bench", "sessionId": sid, "version": "2.1.39",
               "gitBranch": "main", "uuid": uuid, "timestamp": ts(t)})
    };
    put(json!({"type": "file-history-snapshot", "messageId": "m0",
        "snapshot": {"messageId": "m0", "trackedFileBackups": {}, "timestamp": ts(0)},
        "isSnapshotUpdate": false}));
    let mut parent: Option<String> = None;
    let mut t = 0i64;
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(8);
    for turn in 0..turns {
        let u = format!("{sid}-u{turn}");
        let mut rec = env(&u, parent.as_deref(), t);
        rec["type"] = json!("user");
        rec["message"] = json!({"role": "user",
            "content": format!("turn {turn}: please fix the failing test in module {turn} {filler}")});
        rec["promptId"] = json!(format!("p{turn}"));
        put(rec);
        parent = Some(u);
        for h in 0..3 {
            let p = format!("{sid}-h{turn}-{h}");
            let mut rec = env(&p, parent.as_deref(), t + 5);
            rec["type"] = json!("progress");
            rec["data"] = json!({"type": "hook_progress", "hookEvent": "PreToolUse",
                "hookName": "PreToolUse:Bash", "command": "echo ok"});
            rec["toolUseID"] = json!(format!("toolu_{turn}_{h}"));
            rec["parentToolUseID"] = json!(format!("toolu_{turn}_{h}"));
            put(rec);
            parent = Some(p);
        }
        // One response over four lines: text, two parallel tool calls, the second's line
        // after the first call's result.
        let msg = format!("msg_{sid}_{turn}");
        let usage = json!({"input_tokens": 3, "cache_creation_input_tokens": 1200,
            "cache_read_input_tokens": 25000, "output_tokens": 450,
            "service_tier": "standard"});
        let blocks = [
            json!({"type": "thinking", "thinking": filler, "signature": "sig"}),
            json!({"type": "text", "text": format!("Looking at module {turn}. {filler}")}),
            json!({"type": "tool_use", "id": format!("toolu_{turn}_a"), "name": "Bash",
                   "input": {"command": format!("cargo test -p m{turn}"), "description": "run"}}),
            json!({"type": "tool_use", "id": format!("toolu_{turn}_b"), "name": "Read",
                   "input": {"file_path": format!("/home/me/projects/bench/src/m{turn}.rs")}}),
        ];
        for (i, block) in blocks.iter().enumerate() {
            t += 700;
            let a = format!("{sid}-a{turn}-{i}");
            let mut rec = env(&a, parent.as_deref(), t);
            rec["type"] = json!("assistant");
            rec["requestId"] = json!(format!("req_{turn}"));
            rec["message"] = json!({"id": msg, "type": "message", "role": "assistant",
                "model": "claude-opus-4-5", "content": [block], "stop_reason": null,
                "stop_sequence": null, "usage": usage});
            put(rec);
            parent = Some(a.clone());
            if i >= 2 {
                t += 1500;
                let r = format!("{sid}-r{turn}-{i}");
                let id = block["id"].as_str().unwrap();
                let output = format!("test result: ok. {filler}\n").repeat(4);
                let mut rec = env(&r, Some(&a), t);
                rec["type"] = json!("user");
                rec["message"] = json!({"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": id, "content": output, "is_error": false}]});
                rec["toolUseResult"] = json!({"stdout": output, "stderr": "",
                    "interrupted": false, "isImage": false});
                rec["sourceToolAssistantUUID"] = json!(a);
                put(rec);
                parent = Some(r);
            }
        }
        t += 2000;
        let mut rec = env(&format!("{sid}-d{turn}"), parent.as_deref(), t);
        rec["type"] = json!("system");
        rec["subtype"] = json!("turn_duration");
        rec["durationMs"] = json!(6000);
        put(rec);
        parent = Some(format!("{sid}-d{turn}"));
    }
    out.flush().unwrap();
    written
}

/// One Codex rollout of `turns` turns; returns its size.
fn write_rollout(path: &Path, sid: &str, turns: usize) -> u64 {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0u64;
    let base = 1_767_225_600_000i64;
    let ts = |ms: i64| {
        jiff::Timestamp::from_millisecond(base + ms)
            .unwrap()
            .to_string()
    };
    let mut put = |t: i64, kind: &str, payload: serde_json::Value| {
        let mut line =
            serde_json::to_vec(&json!({"timestamp": ts(t), "type": kind, "payload": payload}))
                .unwrap();
        line.push(b'\n');
        written += line.len() as u64;
        out.write_all(&line).unwrap();
    };
    let cwd = "/home/me/projects/bench";
    put(
        0,
        "session_meta",
        json!({"id": sid, "timestamp": ts(0), "cwd": cwd, "originator": "codex_cli_rs",
               "cli_version": "0.98.0", "instructions": null, "source": "cli",
               "model_provider": "openai",
               "git": {"commit_hash": "0123456789abcdef", "branch": "main"}}),
    );
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(8);
    let mut t = 0i64;
    let (mut total_in, mut total_out) = (0u64, 0u64);
    for turn in 0..turns {
        t += 1000;
        put(
            t,
            "turn_context",
            json!({"cwd": cwd, "approval_policy": "on-request",
                   "sandbox_policy": {"type": "workspace-write", "network_access": false},
                   "model": "gpt-5.1-codex", "effort": "medium", "summary": "auto"}),
        );
        let prompt = format!("turn {turn}: please fix the failing test in module {turn} {filler}");
        put(
            t,
            "response_item",
            json!({"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": prompt}]}),
        );
        put(
            t,
            "event_msg",
            json!({"type": "user_message", "message": prompt, "images": []}),
        );
        // Two model calls: reasoning, text and two parallel calls; then the final answer.
        for call in 0..2 {
            t += 900;
            let last = call == 1;
            put(
                t,
                "response_item",
                json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": filler}],
                       "content": null, "encrypted_content": "gAAAA".repeat(40)}),
            );
            put(
                t,
                "event_msg",
                json!({"type": "agent_reasoning", "text": filler}),
            );
            let text = format!("Looking at module {turn}, step {call}. {filler}");
            put(
                t,
                "response_item",
                json!({"type": "message", "role": "assistant",
                       "content": [{"type": "output_text", "text": text}]}),
            );
            put(
                t,
                "event_msg",
                json!({"type": "agent_message", "message": text}),
            );
            let ids = [
                format!("call_{sid}_{turn}_{call}_a"),
                format!("call_{sid}_{turn}_{call}_b"),
            ];
            if !last {
                for (i, id) in ids.iter().enumerate() {
                    let args = json!({"command": ["bash", "-lc", format!("cargo test -p m{turn} --test t{i}")],
                                      "workdir": cwd, "timeout_ms": 120000});
                    put(
                        t,
                        "response_item",
                        json!({"type": "function_call", "name": "shell",
                               "arguments": args.to_string(), "call_id": id}),
                    );
                }
            }
            let (input, output) = (25_000 + 1_000 * turn as u64, 450u64);
            total_in += input;
            total_out += output;
            let usage = |i: u64, o: u64| {
                json!({"input_tokens": i, "cached_input_tokens": i / 2, "output_tokens": o,
                       "reasoning_output_tokens": o / 3, "total_tokens": i + o})
            };
            put(
                t,
                "event_msg",
                json!({"type": "token_count",
                       "info": {"total_token_usage": usage(total_in, total_out),
                                "last_token_usage": usage(input, output),
                                "model_context_window": 272000},
                       "rate_limits": {"primary": {"used_percent": 12.0, "window_minutes": 300,
                                                   "resets_in_seconds": 3600}}}),
            );
            if !last {
                for id in &ids {
                    t += 1500;
                    let result = json!({"output": format!("test result: ok. {filler}\n").repeat(4),
                                        "metadata": {"exit_code": 0, "duration_seconds": 1.5}});
                    put(
                        t,
                        "response_item",
                        json!({"type": "function_call_output", "call_id": id,
                               "output": result.to_string()}),
                    );
                }
            }
        }
        t += 500;
        put(
            t,
            "event_msg",
            json!({"type": "task_complete", "last_agent_message": "done"}),
        );
    }
    out.flush().unwrap();
    written
}

/// Generates `sessions` sessions of `agent` under `root`; returns their bytes.
fn generate(agent: Agent, root: &Path, sessions: usize, turns: usize) -> u64 {
    let mut bytes = 0u64;
    for s in 0..sessions {
        let sid = format!("{:08x}-0000-4000-8000-{:012x}", s, s);
        bytes += match agent {
            Agent::Codex => {
                let dir = root
                    .join("sessions/2026/01")
                    .join(format!("{:02}", s % 28 + 1));
                std::fs::create_dir_all(&dir).unwrap();
                let name = format!("rollout-2026-01-{:02}T10-00-00-{sid}.jsonl", s % 28 + 1);
                write_rollout(&dir.join(name), &sid, turns)
            }
            _ => {
                let dir = root
                    .join("projects")
                    .join(format!("-home-me-projects-bench{}", s % 50));
                std::fs::create_dir_all(&dir).unwrap();
                write_session(&dir.join(format!("{sid}.jsonl")), &sid, turns)
            }
        };
    }
    bytes
}

/// Generates, imports and re-imports one agent's tree under `dir`.
fn bench(agent: Agent, dir: &Path, sessions: usize, turns: usize) {
    let root = dir.join(agent.name());
    let started = Instant::now();
    let bytes = generate(agent, &root, sessions, turns);
    let mb = bytes as f64 / 1e6;
    eprintln!(
        "{agent}: generated {sessions} sessions, {mb:.0} MB in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let home = Home::new(dir.join(format!("home-{}", agent.name())));
    let store = SessionStore::open(home).unwrap();
    let opts = Options {
        now: freecode_store::now_ms(),
        ..Options::default()
    };
    let roots = vec![root];
    let started = Instant::now();
    let report = importer::run(&store, agent, &roots, &opts).unwrap();
    let secs = started.elapsed().as_secs_f64();
    let messages: usize = report.sessions.iter().map(|s| s.added_messages).sum();
    let sync = report.sync_ms as f64 / 1000.0;
    println!(
        "{agent} full import: {} sessions, {messages} messages, {mb:.0} MB of source in {secs:.2} s: {:.1} MB/s \
         ({sync:.2} s of it the final syncfs; {:.1} MB/s before it)",
        report.sessions.len(),
        mb / secs,
        mb / (secs - sync).max(0.001)
    );
    assert_eq!(
        report.sessions.len(),
        sessions,
        "{:?}",
        report.issues.first()
    );
    let started = Instant::now();
    let again = importer::run(&store, agent, &roots, &opts).unwrap();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{agent} unchanged re-import: {} files, {} skipped on their stat, in {:.3} s",
        again.units, again.unchanged_units, secs
    );
    // `freecode import --detect` with the agent's home variable naming the tree.
    let tree = roots[0].clone();
    let var = |name: &str| {
        let wanted = match agent {
            Agent::Codex => "CODEX_HOME",
            _ => "CLAUDE_CONFIG_DIR",
        };
        (name == wanted).then(|| tree.clone().into_os_string())
    };
    let started = Instant::now();
    let mut issues = Vec::new();
    let found = importer::detect(&var, &mut issues);
    let secs = started.elapsed().as_secs_f64();
    let d = found.iter().find(|d| d.agent == agent).unwrap();
    println!(
        "{agent} detect: {} sessions, {} messages, {:.0} MB in {secs:.2} s",
        d.sessions,
        d.messages,
        d.bytes as f64 / 1e6
    );
}

fn main() {
    let sessions = env_usize("IMPORT_BENCH_SESSIONS", 10_000);
    // About 105 KB a session: 7 Claude Code turns, 8 Codex turns.
    let turns = std::env::var("IMPORT_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let agents: Vec<Agent> = std::env::var("IMPORT_BENCH_AGENTS")
        .unwrap_or_else(|_| "claude-code,codex".to_owned())
        .split(',')
        .map(|name| Agent::from_name(name.trim()).expect("claude-code or codex"))
        .collect();
    let tmp = match std::env::var_os("IMPORT_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    for agent in agents {
        let turns = turns.unwrap_or(if agent == Agent::Codex { 8 } else { 7 });
        bench(agent, tmp.path(), sessions, turns);
        // Each tree and home removed before the next, so two never fill the disk together.
        for entry in std::fs::read_dir(tmp.path()).unwrap() {
            std::fs::remove_dir_all(entry.unwrap().path()).unwrap();
        }
    }
}
