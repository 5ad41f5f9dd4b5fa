//! What the UI tests share: a fixture home written as plain files (two sessions, one with a
//! rollout log holding model, tool and denied spans and a request that never answered), and
//! the real `freecode ui --no-open` process on it with the URL it printed.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The session with a trace.
pub const TRACED: &str = "ui-traced-0001";
/// A second session, another project, with the search word.
pub const OTHER: &str = "ui-other-0002";
/// The word only [`OTHER`] holds.
pub const WORD: &str = "zebrafish";
/// Text of a message that must show as text.
pub const EVIL: &str =
    "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">";
/// A 1×1 PNG.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// Model spans (ms): start offset, duration, time to first token; the third never answers.
pub const MODEL: [(i64, i64, i64); 2] = [(1_000, 1_000, 200), (2_600, 2_000, 900)];
/// Tool spans (ms): start offset, duration.
pub const TOOLS: [(&str, i64, i64); 2] = [("read_file", 2_050, 500), ("bash", 4_650, 3_000)];
/// When the hung request starts (offset, ms).
pub const HUNG_AT: i64 = 8_000;

fn mkdir(p: &Path) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .unwrap();
}

fn write(p: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(p)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn jsonl(items: &[Value]) -> String {
    items.iter().map(|v| format!("{v}\n")).collect()
}

/// Writes a session: its meta and messages.
pub fn write_session(home: &Path, meta: &Value, messages: &[Value]) {
    let id = meta["id"].as_str().unwrap();
    let project = meta["projectPath"].as_str().unwrap();
    let dir = home
        .join("sessions")
        .join(freecode_core::project_key::project_key(project).dir_name())
        .join(id);
    mkdir(&dir);
    write(
        &dir.join("meta.json"),
        &serde_json::to_string_pretty(meta).unwrap(),
    );
    write(&dir.join("messages.jsonl"), &jsonl(messages));
}

/// Writes a rollout log.
pub fn write_events(home: &Path, id: &str, events: &str) {
    let dir = home.join("rollout").join("sessions").join(id);
    mkdir(&dir);
    write(&dir.join("events.jsonl"), events);
}

/// One event line.
pub fn event(seq: u64, id: &str, ts: i64, kind: &str, fields: Value) -> String {
    let mut v = json!({
        "type": kind, "id": format!("01KF0G{seq:014}"), "seq": seq,
        "aggregateID": id, "timestamp": ts,
    });
    if let (Some(o), Some(f)) = (v.as_object_mut(), fields.as_object()) {
        for (k, x) in f {
            o.insert(k.clone(), x.clone());
        }
    }
    format!("{v}\n")
}

fn meta(id: &str, title: &str, project: &str, status: &str, at: i64, turns: u64) -> Value {
    json!({
        "id": id, "title": title, "projectPath": project, "provider": "openai",
        "model": "gpt-test", "status": status, "createdAt": at - 60_000, "updatedAt": at,
        "lastTurnAt": at, "turnCount": turns, "aggregatedTokenCount": 4242,
    })
}

/// The fixture home at `<tmp>/.freecode`; `base` is when the trace starts (ms).
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub base: i64,
}

/// The calendar day of `ms` in UTC (the tests' `TZ`), `YYYY-MM-DD`.
pub fn local_day(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .strftime("%Y-%m-%d")
        .to_string()
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Two sessions; [`TRACED`]'s log started an hour ago, so its last request is hung (open past
/// the five-minute threshold) and not abandoned.
pub fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join(".freecode");
    mkdir(&home);
    let base = now_ms() - 3_600_000;
    let msg = |id: &str, role: &str, parts: Value, ts: i64| json!({"id": id, "role": role, "parts": parts, "timestamp": ts});
    write_session(
        &home,
        &meta(
            TRACED,
            "Fix the flaky parser",
            "/work/parser",
            "active",
            base + 9_000,
            2,
        ),
        &[
            msg(
                "m1",
                "user",
                json!([{"type": "text", "content": "Please fix the flaky parser test"}]),
                base,
            ),
            msg(
                "m2",
                "assistant",
                json!([{"type": "text", "content": "Here is the change:\n```rust\nfn parse(s: &str) -> Option<u32> { s.trim().parse().ok() } // fixed\n```\nDone."}]),
                base + 2_000,
            ),
            msg(
                "m3",
                "assistant",
                json!([{"type": "tool", "tool": {"name": "read_file", "args": {"path": "src/parser.rs"}}, "result": "pub fn parse() {}\n// TOOL-RESULT-MARKER"}]),
                base + 2_100,
            ),
            msg(
                "m4",
                "user",
                json!([{"type": "text", "content": EVIL}]),
                base + 5_000,
            ),
            msg(
                "m5",
                "user",
                json!([{"type": "image", "data": PNG, "mediaType": "image/png", "altText": "a pixel"}]),
                base + 6_000,
            ),
        ],
    );
    write_session(
        &home,
        &meta(
            OTHER,
            "Aquarium inventory",
            "/work/aquarium",
            "interrupted",
            base - 86_400_000,
            1,
        ),
        &[
            msg(
                "o1",
                "user",
                json!([{"type": "text", "content": format!("How many {WORD} are in tank three?")}]),
                base - 86_400_000,
            ),
            msg(
                "o2",
                "assistant",
                json!([{"type": "text", "content": "Eleven."}]),
                base - 86_399_000,
            ),
        ],
    );
    let mut ev = String::new();
    let mut seq = 0;
    let mut push = |ts: i64, kind: &str, fields: Value| {
        seq += 1;
        ev.push_str(&event(seq, TRACED, ts, kind, fields));
    };
    push(base, "turn.started", json!({"turnId": "turn-0"}));
    for (i, (at, dur, ttft)) in MODEL.iter().enumerate() {
        let t = base + at;
        push(
            t,
            "model.request",
            json!({"turnId": "turn-0", "provider": "openai", "model": "gpt-test", "messageCount": i + 1, "toolCount": 3, "promptChars": 1000, "streamed": true}),
        );
        push(
            t + ttft,
            "model.first_token",
            json!({"turnId": "turn-0", "ttft_ms": ttft}),
        );
        push(
            t + dur,
            "model.response",
            json!({"turnId": "turn-0", "provider": "openai", "model": "gpt-test", "duration_ms": dur, "ttft_ms": ttft, "inputTokens": 1500, "outputTokens": 60, "toolCalls": [TOOLS[i].0], "textChars": 10, "thinkingChars": 0}),
        );
        let (tool, tat, tdur) = TOOLS[i];
        push(
            base + tat,
            "function.call",
            json!({"turnId": "turn-0", "tool": tool, "args": {"path": "src/parser.rs"}}),
        );
        push(
            base + tat + tdur,
            "function.output",
            json!({"turnId": "turn-0", "tool": tool, "output": format!("{tool} said <b>hello</b>\nsecond line"), "duration_ms": tdur}),
        );
    }
    push(
        base + 7_700,
        "function.denied",
        json!({"turnId": "turn-0", "tool": "bash", "args": {"command": "rm -rf /"}, "reason": "not in this project", "source": "rule"}),
    );
    push(base + 7_900, "turn.started", json!({"turnId": "turn-1"}));
    push(
        base + HUNG_AT,
        "model.request",
        json!({"turnId": "turn-1", "provider": "openai", "model": "gpt-test", "messageCount": 6, "toolCount": 3, "promptChars": 2000, "streamed": true}),
    );
    write_events(&home, TRACED, &ev);
    Fixture { tmp, home, base }
}

/// A session imported from Claude Code: opened by a slash command, a prompt carrying a system
/// reminder, and a long markdown answer with token usage ([`write_markdown_session`]).
pub const MARKDOWN: &str = "ui-markdown-0003";

/// The answer of [`MARKDOWN`]: headings, lists, a table, code, a quote, links (one of them not
/// a web link), an image, raw HTML, and text that is not ASCII.
pub const LONG_ANSWER: &str = "## What changed in the parser\n\n\
The flaky test came from **two** causes, and *both* are fixed:\n\n\
1. The tokenizer read `\\r\\n` as two line ends.\n\
2. A number such as `1_000` was cut at the underscore.\n\n\
- Kept: the public API of `parse()`\n\
- Changed: `Lexer::next` now returns `Option<Token>`\n\
\x20 - nested: error messages name the line\n\n\
| file | lines | why |\n|---|---:|---|\n\
| `src/lexer.rs` | 42 | line ends |\n| `src/number.rs` | 7 | underscores |\n\n\
```rust\nfn parse(s: &str) -> Option<u32> {\n    // keep digits and underscores\n    s.trim().replace('_', \"\").parse().ok()\n}\n```\n\n\
> Note: run `cargo test -p parser` twice; the second run must be green too.\n\n\
See [the CommonMark spec](https://spec.commonmark.org/) and [a bad link](javascript:alert(1)). \
![diagram](https://example.com/diagram.png)\n\n\
<div onclick=\"alert(1)\">raw html stays text</div>\n\n\
Ça marche — готово ✓\n\n\
- [x] tests pass\n- [ ] release notes\n";

/// Writes [`MARKDOWN`] into `home`, its last turn at `at` (ms).
pub fn write_markdown_session(home: &Path, at: i64) {
    let mut m = meta(
        MARKDOWN,
        "Explain the parser fix",
        "/work/parser",
        "active",
        at,
        2,
    );
    m["provider"] = json!("anthropic");
    m["model"] = json!("claude-sonnet-4-5");
    m["importedFrom"] = json!({"agent": "claude-code", "sessionId": "0b7c1d2e-aaaa-bbbb-cccc-000000000003", "projectPath": "/work/parser", "importedAt": at});
    let msg = |id: &str, role: &str, parts: Value, ts: i64| json!({"id": id, "role": role, "parts": parts, "timestamp": ts});
    let mut answer = msg(
        "k3",
        "assistant",
        json!([{"type": "text", "content": LONG_ANSWER}]),
        at,
    );
    answer["usage"] = json!({"inputTokens": 25_801, "outputTokens": 27});
    write_session(
        home,
        &m,
        &[
            msg(
                "k1",
                "user",
                json!([{"type": "text", "content": "<command-message>review</command-message>\n<command-name>/review</command-name>\n<command-args>src/parser.rs</command-args>"}]),
                at - 2_000,
            ),
            msg(
                "k2",
                "user",
                json!([{"type": "text", "content": "Why was the **parser** test flaky?\n<system-reminder>\nThe user opened src/parser.rs in the IDE.\n</system-reminder>"}]),
                at - 1_000,
            ),
            answer,
        ],
    );
}

/// `freecode` on `home`, as the other CLI tests run it.
pub fn freecode(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_freecode"));
    c.env("FREECODE_HOME", home)
        .env("NO_COLOR", "1")
        .env("TZ", "UTC")
        .env("FREECODE_ROLLOUT", "off")
        .env_remove("RUST_LOG")
        .env_remove("FREECODE_LOG")
        .stdin(Stdio::null());
    c
}

/// A running `freecode ui --no-open`, killed on drop.
pub struct Server {
    child: Child,
    /// The URL it printed (with the token).
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub authority: String,
    /// The token.
    pub token: String,
}

impl Server {
    pub fn start(home: &Path) -> Self {
        let mut c = freecode(home);
        c.args(["ui", "--no-open"]);
        Self::spawn(c)
    }

    /// `freecode ui` opening its page with a stand-in `xdg-open` that writes its arguments,
    /// one a line, to `<bin>/opened` (and its whole command line to `<bin>/cmdline`).
    pub fn start_opening(home: &Path, bin: &Path) -> Self {
        std::fs::create_dir_all(bin).unwrap();
        let opener = bin.join("xdg-open");
        std::fs::write(
            &opener,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{0}/opened.tmp'\ncat /proc/$$/cmdline > '{0}/cmdline'\nmv '{0}/opened.tmp' '{0}/opened'\n",
                bin.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = freecode(home);
        c.args(["ui"]).env("PATH", path);
        Self::spawn(c)
    }

    /// What the stand-in opener of [`Server::start_opening`] was given, once it ran.
    pub fn opened(bin: &Path) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(s) = std::fs::read_to_string(bin.join("opened")) {
                return s.lines().map(str::to_owned).collect();
            }
            assert!(std::time::Instant::now() < deadline, "the opener never ran");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server with SIGINT (Ctrl+C) and waits for it to exit, at most 20 s.
    pub fn interrupt(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-INT", &pid]).status().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "freecode ui did not stop on Ctrl+C"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `freecode ui --no-open ARGS…`, its standard error written to `log`.
    pub fn start_logged(home: &Path, args: &[&str], log: &Path) -> Self {
        let mut c = freecode(home);
        c.args(["ui", "--no-open"])
            .args(args)
            .stderr(std::fs::File::create(log).unwrap());
        Self::spawn(c)
    }

    fn spawn(mut c: Command) -> Self {
        let mut child = c.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(!line.is_empty(), "freecode ui printed no URL");
        let url = line.trim().to_owned();
        let rest = url.strip_prefix("http://").expect("an http URL");
        let (authority, q) = rest.split_once("/?token=").expect("a token in the URL");
        Self {
            child,
            authority: authority.to_owned(),
            token: q.to_owned(),
            url,
        }
    }

    pub fn port(&self) -> u16 {
        self.authority.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// The server's base URL, without the token.
    pub fn base(&self) -> String {
        format!("http://{}", self.authority)
    }

    /// The cookie that carries the token (named after the port).
    pub fn cookie(&self) -> String {
        format!("freecode_ui_{}={}", self.port(), self.token)
    }

    /// A request with the token cookie.
    pub fn get(&self, path: &str) -> Response {
        let cookie = self.cookie();
        http(
            &self.authority,
            path,
            &[("Host", &self.authority), ("Cookie", &cookie)],
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response: status, headers (names lowercased), body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request over a fresh loopback connection, with exactly `headers` (the `Host`
/// too: a test sets a foreign one), `Connection: close`, the body read to the end.
pub fn http(authority: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = TcpStream::connect(authority).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}
