//! Import throughput: generates a Claude Code tree (default 10,000 sessions of about 105 KB,
//! ≥ 1 GB: prompts, assistant responses split over several lines with parallel tool calls,
//! tool results, hook progress lines, snapshots) in a temp directory, imports it into a fresh
//! home, and prints MB/s of source; then imports the unchanged tree again (every unit skipped
//! on its stat) and prints that time.
//!
//! `cargo run --release -p freecode-import --example import_bench` (`IMPORT_BENCH_SESSIONS`,
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

fn main() {
    let sessions = env_usize("IMPORT_BENCH_SESSIONS", 10_000);
    let turns = env_usize("IMPORT_BENCH_TURNS", 7);
    let tmp = match std::env::var_os("IMPORT_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = tmp.path().join("claude").join("projects");
    let started = Instant::now();
    let mut bytes = 0u64;
    for s in 0..sessions {
        let dir = root.join(format!("-home-me-projects-bench{}", s % 50));
        std::fs::create_dir_all(&dir).unwrap();
        let sid = format!("{:08x}-0000-4000-8000-{:012x}", s, s);
        bytes += write_session(&dir.join(format!("{sid}.jsonl")), &sid, turns);
    }
    let mb = bytes as f64 / 1e6;
    eprintln!(
        "generated {sessions} sessions, {mb:.0} MB in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let home = Home::new(tmp.path().join("home"));
    let store = SessionStore::open(home).unwrap();
    let opts = Options {
        now: freecode_store::now_ms(),
        ..Options::default()
    };
    let roots = vec![root];
    let started = Instant::now();
    let report = importer::run(&store, Agent::ClaudeCode, &roots, &opts).unwrap();
    let secs = started.elapsed().as_secs_f64();
    let messages: usize = report.sessions.iter().map(|s| s.added_messages).sum();
    let sync = report.sync_ms as f64 / 1000.0;
    println!(
        "full import: {} sessions, {messages} messages, {mb:.0} MB of source in {secs:.2} s: {:.1} MB/s \
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
    let again = importer::run(&store, Agent::ClaudeCode, &roots, &opts).unwrap();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "unchanged re-import: {} files, {} skipped on their stat, in {:.3} s",
        again.units, again.unchanged_units, secs
    );
}
