//! `freecode import --watch` and `freecode mcp --watch` as a user runs them: the real binary as
//! a child process following a Codex home (`CODEX_HOME`, not made yet when it starts) in a
//! temporary directory, while the test writes rollouts the way Codex does and more: appended,
//! rotated (moved to `archived_sessions/`, a new one in its place), truncated and rewritten,
//! deleted. Each step waits, up to a generous deadline, for `session list` to show what the
//! files hold; the watcher then stops on SIGINT with status 0.

#![allow(clippy::panic)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a step may take before the test gives up (the watcher imports within a second).
const DEADLINE: Duration = Duration::from_secs(20);

struct Fixture {
    tmp: tempfile::TempDir,
    home: PathBuf,
    codex: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let codex = tmp.path().join("codex");
        Self { tmp, home, codex }
    }

    /// `freecode` on the home, the other agents' locations pointed into the temporary
    /// directory (never the user's).
    fn cmd(&self) -> Command {
        let mut c = common::freecode(&self.home);
        let user = self.tmp.path().join("user-home");
        c.env("HOME", &user)
            .env("CODEX_HOME", &self.codex)
            .env("CLAUDE_CONFIG_DIR", user.join(".claude"))
            .env("GEMINI_CLI_HOME", &user)
            .env("XDG_DATA_HOME", user.join(".local/share"))
            .current_dir(self.tmp.path());
        c
    }

    /// The sessions imported from Codex: source id → (messages, the file it came from).
    fn imported(&self) -> Vec<(String, usize, String, String)> {
        let out = self
            .cmd()
            .args(["session", "list", "--json"])
            .output()
            .unwrap();
        if !out.status.success() {
            // No home yet.
            return Vec::new();
        }
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let id = s["id"].as_str().unwrap();
                let shown = common::json_of(self.cmd().args(["session", "show", id, "--json"]));
                let texts: Vec<String> = shown["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|m| m["parts"].as_array().unwrap().clone())
                    .filter_map(|p| p["content"].as_str().map(str::to_owned))
                    .collect();
                (
                    s["importedFrom"]["sourceId"].as_str().unwrap().to_owned(),
                    texts.len(),
                    s["importedFrom"]["path"].as_str().unwrap().to_owned(),
                    texts.join(" | "),
                )
            })
            .collect()
    }

    /// Waits until `want` holds of the imported sessions; panics with what was seen after
    /// [`DEADLINE`].
    fn wait_for(&self, what: &str, want: impl Fn(&[(String, usize, String, String)]) -> bool) {
        let start = Instant::now();
        loop {
            let seen = self.imported();
            if want(&seen) {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: not seen within {DEADLINE:?}; sessions: {seen:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn day_dir(codex: &Path) -> PathBuf {
    codex.join("sessions/2026/01/01")
}

fn rollout_name(source: &str) -> String {
    format!("rollout-2026-01-01T00-00-00-{source}.jsonl")
}

fn meta(source: &str, cwd: &Path) -> String {
    json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
        "payload": {"id": source, "cwd": cwd, "model_provider": "openai"}})
    .to_string()
        + "\n"
}

fn prompt(at: u32, text: &str) -> String {
    json!({"timestamp": format!("2026-01-01T00:00:{at:02}Z"), "type": "event_msg",
        "payload": {"type": "user_message", "message": text}})
    .to_string()
        + "\n"
}

fn answer(at: u32, text: &str) -> String {
    json!({"timestamp": format!("2026-01-01T00:00:{at:02}Z"), "type": "response_item",
        "payload": {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}})
    .to_string()
        + "\n"
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn one<'a>(
    seen: &'a [(String, usize, String, String)],
    source: &str,
) -> Option<&'a (String, usize, String, String)> {
    seen.iter().find(|s| s.0 == source)
}

/// Sends SIGINT and waits, up to [`DEADLINE`], for the child to exit; its status code.
fn interrupt(child: &mut Child) -> Option<i32> {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("still running {DEADLINE:?} after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Collects the child's stdout lines as they come.
fn lines_of(child: &mut Child) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let out = child.stdout.take().unwrap();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

#[test]
fn a_watched_codex_home_is_imported_as_it_is_appended_rotated_truncated_and_deleted() {
    let f = Fixture::new();
    let project = f.tmp.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let mut child = f
        .cmd()
        .args(["import", "--watch", "codex", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);

    // The Codex home is made after the watcher started; a first prompt.
    let day = day_dir(&f.codex);
    std::fs::create_dir_all(&day).unwrap();
    let a = day.join(rollout_name("aaaa"));
    append(&a, &(meta("aaaa", &project) + &prompt(1, "first prompt")));
    f.wait_for("a new rollout in a new home", |s| {
        one(s, "aaaa").is_some_and(|x| x.1 == 1)
    });

    // Appended: the answer comes in.
    append(&a, &answer(2, "first answer"));
    f.wait_for("an appended answer", |s| {
        one(s, "aaaa").is_some_and(|x| x.1 == 2 && x.3.contains("first answer"))
    });

    // Rotated: the rollout archived, a new one in its place.
    let archived = f.codex.join("archived_sessions");
    std::fs::create_dir_all(&archived).unwrap();
    let a_archived = archived.join(rollout_name("aaaa"));
    std::fs::rename(&a, &a_archived).unwrap();
    let b = day.join(rollout_name("bbbb"));
    append(
        &b,
        &(meta("bbbb", &project) + &prompt(3, "second prompt") + &answer(4, "second answer")),
    );
    f.wait_for("the rotated rollout and its successor", |s| {
        one(s, "aaaa").is_some_and(|x| x.1 == 2 && x.2 == a_archived.to_str().unwrap())
            && one(s, "bbbb").is_some_and(|x| x.1 == 2)
    });

    // Truncated and rewritten: the session follows what the file now holds.
    std::fs::write(&b, meta("bbbb", &project) + &prompt(3, "rewritten prompt")).unwrap();
    f.wait_for("the truncated rollout", |s| {
        one(s, "bbbb").is_some_and(|x| x.1 == 1 && x.3 == "rewritten prompt")
    });

    // Deleted: the watcher goes on, the imported session stays.
    std::fs::remove_file(&b).unwrap();
    let c = day.join(rollout_name("cccc"));
    append(&c, &(meta("cccc", &project) + &prompt(5, "third prompt")));
    f.wait_for("a rollout after a deletion", |s| {
        one(s, "cccc").is_some_and(|x| x.1 == 1) && one(s, "bbbb").is_some_and(|x| x.1 == 1)
    });

    assert_eq!(interrupt(&mut child), Some(0));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    // One JSON object a line, each an import report of Codex that changed something.
    let lines = lines.lock().unwrap().clone();
    assert!(lines.len() >= 5, "{lines:#?}\n{stderr}");
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["agent"], "codex", "{line}");
        assert!(
            v["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["action"] != "unchanged"),
            "{line}"
        );
    }
    // The source files were only read.
    assert!(a_archived.is_file() && c.is_file());
}

#[test]
fn watch_names_agents_only() {
    let f = Fixture::new();
    let out = f
        .cmd()
        .args(["import", "--watch", "codex", "/some/path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("name agents only"), "{err}");
    let out = f
        .cmd()
        .args(["import", "--watch", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
}

/// `freecode mcp --watch`: the MCP server imports on a thread while it serves, and stops when
/// the client closes stdin.
#[test]
fn mcp_watch_imports_while_it_serves() {
    let f = Fixture::new();
    let project = f.tmp.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let day = day_dir(&f.codex);
    std::fs::create_dir_all(&day).unwrap();
    let mut child = f
        .cmd()
        .args(["mcp", "--watch", "codex"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            concat!(
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":",
                "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},",
                "\"clientInfo\":{\"name\":\"raw\",\"version\":\"1\"}}}\n",
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            )
            .as_bytes(),
        )
        .unwrap();
    stdin.flush().unwrap();
    let lines = lines_of(&mut child);
    append(
        &day.join(rollout_name("dddd")),
        &(meta("dddd", &project) + &prompt(1, "served prompt")),
    );
    f.wait_for("a rollout imported by mcp --watch", |s| {
        one(s, "dddd").is_some_and(|x| x.1 == 1)
    });
    drop(stdin);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("mcp --watch still running {DEADLINE:?} after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // Nothing but protocol on stdout: the answer to `initialize`, as JSON-RPC.
    let start = Instant::now();
    while lines.lock().unwrap().is_empty() && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(20));
    }
    let lines = lines.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let answer: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
}
