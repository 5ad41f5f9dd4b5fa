//! `freecode run` driven as a user drives it: the scripted provider with no endpoint, a mock
//! OpenAI-compatible server (tool calls, stalls, HTTP errors, a process killed mid-request), and
//! real SIGINTs — one (exit 130, partial text saved and marked, resumable) and two within a
//! second (exit 1, every file still parses).

use crate::common::Ctx;
use crate::common::mock_openai::{
    End, MockOpenAi, Progress, Reply, finish, text, tool_call, usage,
};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CONTINUE: &str = "Continue from where you left off.";
const WAIT: Duration = Duration::from_secs(30);

impl Ctx {
    /// A home not made yet, and a small project beside it that commands run in; the scripted
    /// provider answers at once, the rollout is recorded, and nothing of the caller's provider,
    /// proxy or timing settings reaches the binary.
    fn new() -> Self {
        let mut ctx = Self::missing().with_env("FREECODE_SCRIPTED_DELAY_MS", "0");
        for var in [
            "OPENAI_API_KEY",
            "FREECODE_MODEL",
            "FREECODE_STALL_TIMEOUT_MS",
            "FREECODE_INTERRUPT_SAVE_DELAY_MS",
            "FREECODE_ROLLOUT",
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            ctx = ctx.without_env(var);
        }
        let project = ctx.path("proj");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("README.md"), "# Demo project\n\nhello\n").unwrap();
        std::fs::write(project.join("hello.txt"), "hi there\n").unwrap();
        std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
        ctx.in_dir(project)
    }

    /// The project directory the commands run in.
    fn project(&self) -> PathBuf {
        self.path("proj")
    }

    /// Runs `freecode args`, waiting for it at most [`WAIT`].
    fn run_bounded(&self, args: &[&str]) -> Output {
        let child = self
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_output(child, WAIT)
    }

    fn session_dir(&self, id: &str) -> PathBuf {
        for project in std::fs::read_dir(self.home.join("sessions")).unwrap() {
            let dir = project.unwrap().path().join(id);
            if dir.join("meta.json").is_file() {
                return dir;
            }
        }
        panic!("no session {id} under {}", self.home.display());
    }

    /// The ids of every session in the home.
    fn sessions(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(self.home.join("sessions")) else {
            return out;
        };
        for project in rd {
            let project = project.unwrap().path();
            if !project.is_dir() {
                continue;
            }
            for s in std::fs::read_dir(project).unwrap() {
                let s = s.unwrap().path();
                if s.join("meta.json").is_file() {
                    out.push(s.file_name().unwrap().to_string_lossy().into_owned());
                }
            }
        }
        out
    }

    fn only_session(&self) -> String {
        let s = self.sessions();
        assert_eq!(s.len(), 1, "{s:?}");
        s[0].clone()
    }

    fn meta(&self, id: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.session_dir(id).join("meta.json")).unwrap())
            .unwrap()
    }

    fn messages(&self, id: &str) -> Vec<Value> {
        jsonl(&self.session_dir(id).join("messages.jsonl"))
    }

    fn events_path(&self, id: &str) -> PathBuf {
        self.home
            .join("rollout/sessions")
            .join(id)
            .join("events.jsonl")
    }

    fn events(&self, id: &str) -> Vec<Value> {
        jsonl(&self.events_path(id))
    }

    fn trace_json(&self, id: &str) -> Value {
        let out = self.run_bounded(&["trace", id, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// Every line of a JSONL file, each of which must parse.
fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends in a torn line",
        path.display()
    );
    text.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", path.display()))
        })
        .collect()
}

fn wait_output(mut child: Child, timeout: Duration) -> Output {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        stdout.read_to_end(&mut b).unwrap();
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        stderr.read_to_end(&mut b).unwrap();
        b
    });
    let status = wait_status(&mut child, timeout);
    Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

fn wait_status(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sigint(child: &Child) {
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// A child whose stdout is collected in the background, for acting mid-run.
struct Running {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut threads = Vec::new();
        let mut pump = |mut r: Box<dyn Read + Send>| {
            let buf = Arc::new(Mutex::new(Vec::new()));
            let b = buf.clone();
            threads.push(std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                loop {
                    match r.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => b.lock().unwrap().extend_from_slice(&chunk[..n]),
                    }
                }
            }));
            buf
        };
        let stdout = pump(Box::new(child.stdout.take().unwrap()));
        let stderr = pump(Box::new(child.stderr.take().unwrap()));
        Self {
            child,
            stdout,
            stderr,
            threads,
        }
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    fn wait_stdout(&self, want: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.stdout().contains(want) {
            assert!(
                Instant::now() < deadline,
                "stdout never showed {want:?}: {:?} / stderr {:?}",
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn finish(mut self) -> (ExitStatus, String, String) {
        let status = wait_status(&mut self.child, WAIT);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
        (status, self.stdout(), self.stderr())
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn position(events: &[Value], ty: &str, turn: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == ty && e["turnId"] == turn)
        .unwrap_or_else(|| panic!("no {ty} for {turn} in {:?}", types(events)))
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn text_of(msg: &Value) -> String {
    msg["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["content"].as_str())
        .collect()
}

// ----- the scripted provider ----------------------------------------------------------------

#[test]
fn without_an_endpoint_the_scripted_provider_lists_reads_is_denied_and_answers() {
    let ctx = Ctx::new();
    let out = ctx.run_bounded(&["run", "what is in here?"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("I'll look around the project first."),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "Here is what I found for \"what is in here?\": the project's top level has 3 \
             entries, and README.md begins with \"# Demo project\"."
        ),
        "{stdout}"
    );
    let id = ctx.only_session();
    assert!(
        stderr.contains(&format!(
            "session {id}: 3 tool calls (1 denied), 4 model calls"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("write_file denied"), "{stderr}");

    let meta = ctx.meta(&id);
    assert_eq!(meta["provider"], "scripted");
    assert_eq!(meta["model"], "scripted-1");
    assert_eq!(meta["status"], "active");
    assert_eq!(meta["turnCount"], 1);
    assert_eq!(meta["title"], "what is in here?");
    assert_eq!(
        meta["projectPath"],
        ctx.project().canonicalize().unwrap().to_str().unwrap()
    );

    let msgs = ctx.messages(&id);
    let tools: Vec<(&str, &str)> = msgs
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["type"] == "tool")
        .map(|p| {
            (
                p["tool"]["name"].as_str().unwrap(),
                p["result"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools.len(), 3, "{msgs:#?}");
    assert_eq!(tools[0], ("list_dir", "README.md\nhello.txt\nsrc/"));
    assert_eq!(tools[1], ("read_file", "# Demo project\n\nhello\n"));
    assert_eq!(tools[2].0, "write_file");
    assert!(tools[2].1.contains("not allowed in read-only mode"));
    assert!(
        !ctx.project().join("NOTES.md").exists(),
        "the write was denied"
    );
    // Finished cleanly: nothing is marked interrupted.
    assert!(msgs.iter().all(|m| m.get("interrupted").is_none()));
    assert_eq!(msgs[0]["role"], "user");
    assert!(text_of(msgs.last().unwrap()).starts_with("Here is what I found"));

    let trace = ctx.trace_json(&id);
    let spans = trace["modelSpans"].as_array().unwrap();
    assert_eq!(spans.len(), 4);
    assert!(spans.iter().all(|s| s["status"] == "ok"), "{spans:#?}");
    assert!(spans.iter().all(|s| s["provider"] == "scripted"));
    assert_eq!(trace["toolSpans"].as_array().unwrap().len(), 2);
    let denied = &trace["deniedSpans"][0];
    assert_eq!(denied["tool"], "write_file");
    assert_eq!(denied["source"], "mode");
    assert_eq!(trace["hung"], false);
}

#[test]
fn json_output_is_one_object_and_continue_resumes_the_project_session() {
    let ctx = Ctx::new();
    let out = ctx.run_bounded(&["run", "--json", "first"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["provider"], "scripted");
    assert_eq!(v["modelCalls"], 4);
    assert_eq!(v["turn"], 1);
    let calls = v["toolCalls"].as_array().unwrap();
    let outcomes: Vec<&str> = calls
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "ok", "denied"]);
    assert!(v["text"].as_str().unwrap().contains("Here is what I found"));

    let out = ctx.run_bounded(&["run", "--json", "--continue", "second"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["sessionId"],
        id.as_str(),
        "--continue picks the project's session"
    );
    assert_eq!(v["turn"], 2);
    assert_eq!(ctx.meta(&id)["turnCount"], 2);
    // Turn ids never repeat in one session's log.
    let started: Vec<String> = of_type(&ctx.events(&id), "turn.started")
        .iter()
        .map(|e| e["turnId"].as_str().unwrap().to_owned())
        .collect();
    let mut unique = started.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), started.len(), "{started:?}");
    assert!(started.contains(&"turn-2-0".to_owned()), "{started:?}");
}

#[test]
fn counters_at_their_largest_value_saturate_or_refuse_and_never_wrap() {
    let ctx = Ctx::new();
    let out = ctx.run_bounded(&["run", "--json", "first"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    // turnCount and aggregatedTokenCount at the top stay there.
    let meta_path = ctx.session_dir(&id).join("meta.json");
    let mut meta = ctx.meta(&id);
    meta["turnCount"] = json!(u64::MAX);
    meta["aggregatedTokenCount"] = json!(u64::MAX - 1);
    std::fs::write(&meta_path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    let out = ctx.run_bounded(&["run", "--json", "--session", &id, "second"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = ctx.meta(&id);
    assert_eq!(meta["turnCount"], json!(u64::MAX));
    assert_eq!(meta["aggregatedTokenCount"], json!(u64::MAX));

    // A log whose last event has seq u64::MAX: the next turn is refused, the log untouched.
    let events = ctx.events_path(&id);
    let mut log = std::fs::read(&events).unwrap();
    log.extend_from_slice(
        format!(
            "{{\"type\":\"compact.occurred\",\"id\":\"01KF0E48H0AAAAAAAAAAAAAAAA\",\"seq\":{},\"aggregateID\":\"{id}\",\"timestamp\":1,\"beforeTokens\":1,\"afterTokens\":1}}\n",
            u64::MAX
        )
        .as_bytes(),
    );
    std::fs::write(&events, &log).unwrap();
    let out = ctx.run_bounded(&["run", "--session", &id, "third"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("seq 18446744073709551615 is the largest there is"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&events).unwrap(),
        log,
        "nothing restarts at seq 0"
    );
}

// ----- a mock OpenAI-compatible endpoint ----------------------------------------------------

#[test]
fn a_streamed_tool_call_then_an_answer_is_persisted_and_recorded() {
    let ctx = Ctx::new();
    let mut first = vec![text("Let me "), text("look.")];
    first.extend(tool_call(
        0,
        "call_a",
        "read_file",
        json!({"path": "hello.txt"}),
    ));
    first.extend(tool_call(
        1,
        "call_b",
        "write_file",
        json!({"path": "x.txt", "content": "nope"}),
    ));
    first.push(finish("tool_calls"));
    first.push(usage(100, 20));
    let second = vec![
        text("The file "),
        text("says hi."),
        finish("stop"),
        usage(150, 10),
    ];
    let mock = MockOpenAi::start(vec![Reply::stream(first), Reply::stream(second)]);
    let out = ctx
        .cmd(&[
            "run",
            "--base-url",
            &mock.base_url,
            "--model",
            "test-model",
            "what does hello.txt say?",
        ])
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout, "Let me look.\nThe file says hi.\n");
    let id = ctx.only_session();

    // What the endpoint saw.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-test"));
    let body = &reqs[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_file", "list_dir", "write_file"]);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "what does hello.txt say?"})
    );
    let msgs2 = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs2.len(), 5, "{msgs2:#?}");
    assert_eq!(msgs2[2]["content"], "Let me look.");
    assert_eq!(msgs2[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(msgs2[3]["role"], "tool");
    assert_eq!(msgs2[3]["content"], "hi there\n");
    assert!(
        msgs2[4]["content"]
            .as_str()
            .unwrap()
            .contains("not allowed in read-only mode")
    );
    assert_eq!(msgs2[3]["tool_call_id"], msgs2[2]["tool_calls"][0]["id"]);

    // messages.jsonl: SPEC §4.4.
    let msgs = ctx.messages(&id);
    assert_eq!(msgs.len(), 5, "{msgs:#?}");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(text_of(&msgs[1]), "Let me look.");
    assert_eq!(
        msgs[1]["usage"],
        json!({"inputTokens": 100, "outputTokens": 20})
    );
    assert_eq!(msgs[2]["parts"][0]["tool"]["name"], "read_file");
    assert_eq!(
        msgs[2]["parts"][0]["tool"]["args"],
        json!({"path": "hello.txt"})
    );
    assert_eq!(msgs[2]["parts"][0]["result"], "hi there\n");
    assert!(
        msgs[2].get("usage").is_none(),
        "usage sits on one line only"
    );
    assert_eq!(msgs[3]["parts"][0]["tool"]["name"], "write_file");
    assert_eq!(text_of(&msgs[4]), "The file says hi.");
    assert_eq!(msgs[4]["usage"]["inputTokens"], 150);
    assert!(!ctx.project().join("x.txt").exists());

    // meta.json.
    let meta = ctx.meta(&id);
    assert_eq!(meta["turnCount"], 1);
    assert_eq!(meta["model"], "test-model");
    assert_eq!(meta["provider"], "openai-compatible");
    assert_eq!(meta["status"], "active");
    assert_eq!(meta["aggregatedTokenCount"], 280);
    assert!(meta["lastTurnAt"].as_i64().unwrap() >= meta["createdAt"].as_i64().unwrap());
    assert!(meta["lastTurnAt"].as_i64().unwrap() > meta["createdAt"].as_i64().unwrap() - 1);

    // The rollout log.
    let ev = ctx.events(&id);
    for turn in ["turn-1-0", "turn-1-1"] {
        let started = position(&ev, "turn.started", turn);
        let req = position(&ev, "model.request", turn);
        let first = position(&ev, "model.first_token", turn);
        let resp = position(&ev, "model.response", turn);
        assert!(
            started < req && req < first && first < resp,
            "{:?}",
            types(&ev)
        );
        assert_eq!(ev[req]["model"], "test-model");
        assert_eq!(ev[req]["provider"], "openai-compatible");
        assert_eq!(ev[req]["streamed"], true);
        assert_eq!(ev[req]["toolCount"], 3);
    }
    let resp = &ev[position(&ev, "model.response", "turn-1-0")];
    assert_eq!(resp["inputTokens"], 100);
    assert_eq!(resp["outputTokens"], 20);
    assert_eq!(resp["toolCalls"], json!(["read_file", "write_file"]));
    assert_eq!(resp["echoedModel"], "mock-model");
    let calls = of_type(&ev, "function.call");
    let outputs = of_type(&ev, "function.output");
    assert_eq!((calls.len(), outputs.len()), (1, 1));
    assert_eq!(calls[0]["tool"], "read_file");
    assert_eq!(calls[0]["callId"], outputs[0]["callId"]);
    assert_eq!(outputs[0]["output"], "hi there\n");
    let denied = of_type(&ev, "function.denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["tool"], "write_file");
    assert_eq!(denied[0]["source"], "mode");
    assert_eq!(
        denied[0]["args"],
        json!({"path": "x.txt", "content": "nope"})
    );
    let seqs: Vec<i64> = ev.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=ev.len() as i64).collect::<Vec<_>>());

    // `trace` folds it without hanging.
    let trace = ctx.trace_json(&id);
    let spans = trace["modelSpans"].as_array().unwrap();
    assert_eq!(spans.len(), 2);
    assert!(spans.iter().all(|s| s["status"] == "ok"));
    assert_eq!(trace["inputTokens"], 250);
    assert_eq!(trace["hung"], false);
    assert_eq!(trace["inFlight"], false);
    assert_eq!(trace["toolSpans"][0]["tool"], "read_file");
    assert_eq!(trace["deniedSpans"][0]["tool"], "write_file");
}

#[test]
fn a_stream_that_goes_silent_is_a_stall() {
    let ctx = Ctx::new();
    let mock = MockOpenAi::start(vec![Reply::Stream {
        payloads: vec![text("Thinking")],
        delay: Duration::ZERO,
        end: End::Hang,
    }]);
    let started = Instant::now();
    let out = ctx
        .cmd(&["run", "--base-url", &mock.base_url, "hello"])
        .env("FREECODE_STALL_TIMEOUT_MS", "300")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        stderr.contains("the model call failed (stall): no data from the provider for 0.3 s"),
        "{stderr}"
    );
    let id = ctx.only_session();
    let ev = ctx.events(&id);
    let err = of_type(&ev, "model.error");
    assert_eq!(err.len(), 1, "{:?}", types(&ev));
    assert_eq!(err[0]["kind"], "stall");
    assert_eq!(
        of_type(&ev, "model.first_token").len(),
        1,
        "it died mid-stream"
    );
    assert!(of_type(&ev, "model.response").is_empty());
    let trace = ctx.trace_json(&id);
    assert_eq!(trace["modelSpans"][0]["status"], "error");
    assert_eq!(trace["modelSpans"][0]["errorKind"], "stall");
    assert_eq!(trace["hung"], false);
    // A failed call writes nothing but the prompt; the session stays usable.
    let msgs = ctx.messages(&id);
    assert_eq!(msgs.len(), 1);
    assert_eq!(ctx.meta(&id)["status"], "active");
}

#[test]
fn an_http_error_is_a_provider_error_with_a_clear_message() {
    let ctx = Ctx::new();
    let mock = MockOpenAi::start(vec![Reply::Status {
        code: 500,
        body: r#"{"error":{"message":"boom"}}"#.into(),
    }]);
    let out = ctx
        .cmd(&["run", "--base-url", &mock.base_url, "hello"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: the model call failed (provider): HTTP 500"),
        "{stderr}"
    );
    assert!(stderr.contains("boom"), "{stderr}");
    let id = ctx.only_session();
    let ev = ctx.events(&id);
    let err = of_type(&ev, "model.error");
    assert_eq!(err.len(), 1);
    assert_eq!(err[0]["kind"], "provider");
    assert!(err[0]["error"].as_str().unwrap().contains("HTTP 500"));
    assert!(of_type(&ev, "model.first_token").is_empty());
    let trace = ctx.trace_json(&id);
    assert_eq!(trace["modelSpans"][0]["errorKind"], "provider");

    // An endpoint nobody listens on is a provider error too.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = ctx
        .cmd(&[
            "run",
            "--base-url",
            &format!("http://127.0.0.1:{port}/v1"),
            "hello",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot reach"), "{stderr}");
}

/// Shifts every timestamp of a log back by `ms`, as if it had been written that long ago.
fn age_log(path: &Path, ms: i64) {
    let lines: Vec<String> = jsonl(path)
        .into_iter()
        .map(|mut e| {
            let t = e["timestamp"].as_i64().unwrap();
            e["timestamp"] = json!(t - ms);
            e.to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_request_left_open_by_a_killed_process_is_in_flight_until_the_threshold() {
    let ctx = Ctx::new();
    let mock = MockOpenAi::start(vec![Reply::Stream {
        payloads: vec![],
        delay: Duration::ZERO,
        end: End::Hang,
    }]);
    let mut run = Running::spawn(ctx.cmd(&["run", "--base-url", &mock.base_url, "hello"]));
    mock.wait_for(WAIT, |p| matches!(p, Progress::Hanging { .. }));
    // The request is open: model.request is in the log, nothing closes it.
    let deadline = Instant::now() + WAIT;
    let id = loop {
        if let Some(id) = ctx.sessions().first().cloned()
            && ctx.events_path(&id).is_file()
            && ctx.events(&id).iter().any(|e| e["type"] == "model.request")
        {
            break id;
        }
        assert!(Instant::now() < deadline, "no model.request recorded");
        std::thread::sleep(Duration::from_millis(10));
    };
    run.child.kill().unwrap(); // SIGKILL: nothing gets to clean up
    let (status, _, _) = run.finish();
    assert!(!status.success());

    let ev = ctx.events(&id);
    assert_eq!(types(&ev).last(), Some(&"model.request"));
    // Just killed: the open request is young, so it is in flight, not hung.
    let trace = ctx.trace_json(&id);
    assert_eq!(trace["modelSpans"][0]["status"], "in_flight");
    assert_eq!(trace["hung"], false);
    assert_eq!(trace["inFlight"], true);

    // Past the hang threshold (300 s) the same log is a hang.
    age_log(&ctx.events_path(&id), 301_000);
    let trace = ctx.trace_json(&id);
    assert_eq!(trace["modelSpans"][0]["status"], "hung");
    assert_eq!(trace["hung"], true);
    let out = ctx.run_bounded(&["trace", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("HUNG"), "{text}");
}

// ----- Ctrl+C -------------------------------------------------------------------------------

fn hanging_stream(payloads: Vec<String>) -> Reply {
    Reply::Stream {
        payloads,
        delay: Duration::from_millis(20),
        end: End::Hang,
    }
}

#[test]
fn one_ctrl_c_saves_the_partial_answer_marks_it_and_exits_130_then_resume_continues() {
    let ctx = Ctx::new();
    let mock = MockOpenAi::start(vec![hanging_stream(vec![text("Hello, "), text("wor")])]);
    let run = Running::spawn(ctx.cmd(&["run", "--base-url", &mock.base_url, "say hello"]));
    mock.wait_for(WAIT, |p| matches!(p, Progress::Sent { chunks: 2, .. }));
    run.wait_stdout("Hello, wor");
    sigint(&run.child);
    let (status, stdout, stderr) = run.finish();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stdout.starts_with("Hello, wor"), "{stdout}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");

    let id = ctx.only_session();
    let msgs = ctx.messages(&id);
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(text_of(&msgs[1]), "Hello, wor");
    assert_eq!(msgs[1]["interrupted"], true);
    let meta = ctx.meta(&id);
    assert_eq!(meta["status"], "interrupted");
    assert_eq!(meta["turnCount"], 1);
    let ev = ctx.events(&id);
    let err = of_type(&ev, "model.error");
    assert_eq!(err.len(), 1, "{:?}", types(&ev));
    assert_eq!(err[0]["kind"], "abort");
    assert_eq!(of_type(&ev, "turn.aborted").len(), 1);
    assert!(of_type(&ev, "model.response").is_empty());
    let trace = ctx.trace_json(&id);
    assert_eq!(trace["modelSpans"][0]["errorKind"], "abort");

    // Resuming brings "Continue from where you left off." to the model.
    let mock2 = MockOpenAi::start(vec![Reply::stream(vec![
        text("Hello, world!"),
        finish("stop"),
        usage(10, 3),
    ])]);
    let out = ctx.run_bounded(&[
        "run",
        "--base-url",
        &mock2.base_url,
        "--session",
        &id,
        "go on",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = mock2.requests();
    let sent = reqs[0].body["messages"].as_array().unwrap().clone();
    let roles_contents: Vec<(String, String)> = sent
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        roles_contents[1..],
        [
            ("user".to_owned(), "say hello".to_owned()),
            ("assistant".to_owned(), "Hello, wor".to_owned()),
            ("user".to_owned(), CONTINUE.to_owned()),
            ("user".to_owned(), "go on".to_owned()),
        ]
    );
    let meta = ctx.meta(&id);
    assert_eq!(meta["status"], "active");
    assert_eq!(meta["turnCount"], 2);
    let msgs = ctx.messages(&id);
    assert_eq!(text_of(&msgs[2]), CONTINUE);
    assert_eq!(text_of(msgs.last().unwrap()), "Hello, world!");
    assert!(msgs.last().unwrap().get("interrupted").is_none());
    let started: Vec<&str> = of_type(&ctx.events(&id), "turn.started")
        .iter()
        .map(|e| e["turnId"].as_str().unwrap())
        .map(|s| if s == "turn-1-0" { "turn-1-0" } else { "other" })
        .collect();
    assert_eq!(started, ["turn-1-0", "other"]);
}

#[test]
fn two_ctrl_c_within_a_second_exit_1_and_leave_every_file_whole() {
    let ctx = Ctx::new();
    let mock = MockOpenAi::start(vec![hanging_stream(vec![text("Partial "), text("answer")])]);
    // The test hook holds the save between appending the partial text and marking the
    // session, so the second Ctrl+C lands mid-save.
    let mut cmd = ctx.cmd(&["run", "--base-url", &mock.base_url, "say something"]);
    cmd.env("FREECODE_INTERRUPT_SAVE_DELAY_MS", "5000");
    let run = Running::spawn(cmd);
    mock.wait_for(WAIT, |p| matches!(p, Progress::Sent { chunks: 2, .. }));
    run.wait_stdout("Partial answer");
    let started = Instant::now();
    sigint(&run.child);
    std::thread::sleep(Duration::from_millis(200));
    sigint(&run.child);
    let (status, _stdout, stderr) = run.finish();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the forced exit does not wait for the save pause"
    );
    assert!(stderr.contains("interrupted twice"), "{stderr}");

    // Every file parses (jsonl() also refuses a torn last line).
    let id = ctx.only_session();
    let meta = ctx.meta(&id);
    assert!(meta["status"] == "active" || meta["status"] == "interrupted");
    let msgs = ctx.messages(&id);
    assert_eq!(msgs.last().unwrap()["interrupted"], true);
    assert_eq!(text_of(msgs.last().unwrap()), "Partial answer");
    let ev = ctx.events(&id);
    assert_eq!(of_type(&ev, "model.error")[0]["kind"], "abort");
    let dir = ctx.session_dir(&id);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// ----- choosing the provider ------------------------------------------------------------------

#[test]
fn nothing_configured_the_scripted_provider_answers_with_a_notice_and_only_then() {
    let ctx = Ctx::new();
    let out = ctx.run_bounded(&["run", "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no provider configured"))
        .collect();
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(notices[0].contains("scripted provider"), "{stderr}");
    // Asked for by name: no notice.
    let out = ctx.run_bounded(&["run", "--provider", "scripted", "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("no provider configured"), "{stderr}");
    // An unknown provider is refused before any session is made.
    let before = ctx.sessions().len();
    let out = ctx.run_bounded(&["run", "--provider", "anthropic", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"anthropic\""), "{stderr}");
    assert_eq!(ctx.sessions().len(), before);
}

#[test]
fn a_key_without_a_base_url_goes_to_the_public_endpoint_never_the_scripted_provider() {
    let ctx = Ctx::new();
    // Without a model the public API cannot be called: refused before anything is written.
    let out = ctx
        .cmd(&["run", "hi"])
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("needs a model"), "{stderr}");
    assert!(ctx.sessions().is_empty());
    // With one it goes there (through a proxy that refuses, so the test stays offline).
    let out = ctx
        .cmd(&["run", "--model", "gpt-test", "hi"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("FREECODE_STALL_TIMEOUT_MS", "5000")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !stdout.contains("I'll look around"),
        "scripted answer: {stdout}"
    );
    assert!(!stderr.contains("no provider configured"), "{stderr}");
    let id = ctx.only_session();
    let meta = ctx.meta(&id);
    assert_eq!(meta["provider"], "openai");
    assert_eq!(meta["model"], "gpt-test");
}

/// A session of the original's pinned to `openai/gpt-5`, with one exchange.
fn pinned_session(ctx: &Ctx) -> String {
    let mock = MockOpenAi::start(vec![Reply::stream(vec![
        text("First answer."),
        finish("stop"),
        usage(10, 3),
    ])]);
    let out = ctx.run_bounded(&["run", "--base-url", &mock.base_url, "first"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = ctx.only_session();
    let path = ctx.session_dir(&id).join("meta.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["provider"] = json!("openai");
    meta["model"] = json!("gpt-5");
    std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
    id
}

#[test]
fn a_pinned_session_is_resumed_on_its_provider_and_model_or_refused_with_the_reason() {
    let ctx = Ctx::new();
    let id = pinned_session(&ctx);
    let log_before = std::fs::read(ctx.session_dir(&id).join("messages.jsonl")).unwrap();
    let refused = |args: &[&str], key: Option<&str>, want: &str| {
        let mut cmd = ctx.cmd(args);
        if let Some(k) = key {
            cmd.env("OPENAI_API_KEY", k);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot resume session {id}")) && stderr.contains(want),
            "{args:?}: {stderr}"
        );
        let meta = ctx.meta(&id);
        assert_eq!(
            (meta["provider"].as_str(), meta["model"].as_str()),
            (Some("openai"), Some("gpt-5"))
        );
        assert_eq!(
            std::fs::read(ctx.session_dir(&id).join("messages.jsonl")).unwrap(),
            log_before,
            "{args:?} appended to the session"
        );
    };
    // Nothing configured: the scripted provider never answers in it.
    refused(
        &["run", "--session", &id, "more"],
        None,
        "set OPENAI_API_KEY",
    );
    refused(&["run", "--continue", "more"], None, "set OPENAI_API_KEY");
    // Asked for another provider.
    refused(
        &["run", "--provider", "scripted", "--session", &id, "more"],
        Some("sk-test"),
        "pinned to provider openai, not scripted",
    );

    // With its endpoint it goes on with its own model, and the pin stays.
    let mock = MockOpenAi::start(vec![Reply::stream(vec![
        text("Second answer."),
        finish("stop"),
        usage(20, 3),
    ])]);
    let out = ctx.run_bounded(&[
        "run",
        "--base-url",
        &mock.base_url,
        "--session",
        &id,
        "more",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mock.requests()[0].body["model"], "gpt-5");
    let meta = ctx.meta(&id);
    assert_eq!(meta["provider"], "openai");
    assert_eq!(meta["model"], "gpt-5");

    // A scripted session is not sent to a real endpoint either.
    let out = ctx.run_bounded(&["run", "--provider", "scripted", "demo"]);
    assert!(out.status.success());
    let scripted = ctx.sessions().into_iter().find(|s| *s != id).unwrap();
    let out = ctx.run_bounded(&[
        "run",
        "--base-url",
        &mock.base_url,
        "--session",
        &scripted,
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pinned to the built-in scripted provider"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_json_chooses_the_provider_model_and_base_url_of_new_sessions() {
    let ctx = Ctx::new();
    let mock = MockOpenAi::start(vec![Reply::stream(vec![
        text("Configured."),
        finish("stop"),
        usage(10, 3),
    ])]);
    for (k, v) in [
        ("current.provider", "openai"),
        ("current.model", "m-config"),
        ("baseUrl", mock.base_url.as_str()),
    ] {
        let out = ctx.run_bounded(&["config", "set", k, v]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = ctx.run_bounded(&["run", "hi"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Configured.\n");
    assert_eq!(mock.requests()[0].body["model"], "m-config");
    let meta = ctx.meta(&ctx.only_session());
    assert_eq!(meta["provider"], "openai-compatible");
    assert_eq!(meta["model"], "m-config");
}

// ----- automatic compaction ---------------------------------------------------------------------

/// Appends `pairs` user/assistant exchanges of ~300 characters each to the session's log.
fn grow_history(ctx: &Ctx, id: &str, pairs: usize, prompt_chars: usize) {
    use std::io::Write;
    let path = ctx.session_dir(id).join("messages.jsonl");
    let mut buf = String::new();
    for i in 0..pairs {
        for (role, text) in [
            (
                "user",
                format!("question {i}: {}", "q".repeat(prompt_chars)),
            ),
            ("assistant", format!("answer {i}: {}", "a".repeat(300))),
        ] {
            let line = json!({
                "id": format!("gen-{role}-{i}"),
                "role": role,
                "parts": [{"type": "text", "content": text}],
                "timestamp": 1_700_000_000_000_i64 + i as i64,
            });
            buf.push_str(&line.to_string());
            buf.push('\n');
        }
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(buf.as_bytes()).unwrap();
}

#[test]
fn automatic_compaction_brings_a_20000_message_history_under_the_threshold() {
    let ctx = Ctx::new();
    assert!(
        ctx.run_bounded(&["run", "--provider", "scripted", "seed"])
            .status
            .success()
    );
    let id = ctx.only_session();
    grow_history(&ctx, &id, 10_000, 300);
    let started = Instant::now();
    let out = ctx
        .cmd(&[
            "run",
            "--session",
            &id,
            "--compact-at",
            "100000",
            "what now?",
        ])
        .env_remove("FREECODE_ROLLOUT")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("stays above"), "{stderr}");
    assert!(stderr.contains("compacted the history"), "{stderr}");
    // The summary kept to its budget (10% of the threshold), the history under the threshold.
    let memory: Value = serde_json::from_slice(
        &std::fs::read(ctx.home.join("memory").join(&id).join("memory.json")).unwrap(),
    )
    .unwrap();
    let summary = memory["summaries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let summary_tokens = summary["summaryTokenCount"].as_u64().unwrap();
    assert!(summary_tokens <= 10_100, "{summary_tokens}");
    assert!(
        summary_tokens >= 9_000,
        "the budget is used: {summary_tokens}"
    );
    let content = summary["content"].as_str().unwrap();
    // The newest dropped prompt is in it (the last two user turns stay in the log).
    assert!(
        content.contains("- question 9997: "),
        "the newest dropped prompt is kept"
    );
    assert!(!content.contains("question 9998: "));
    assert!(!content.contains("- question 0: "));
    assert!(
        content.contains("left out to fit 10000 tokens"),
        "{}",
        &content[..200]
    );
    let events = ctx.events(&id);
    let compact = of_type(&events, "compact.occurred");
    assert_eq!(compact.len(), 1);
    let after = compact[0]["afterTokens"].as_u64().unwrap();
    assert!(compact[0]["beforeTokens"].as_u64().unwrap() > 1_000_000);
    assert!(after < 100_000, "{after}");
    // The log kept the last two user turns (and this turn's messages), not 20,000 lines.
    let kept = ctx.messages(&id).len();
    assert!(kept < 20, "{kept}");
    eprintln!("compacting 20,002 messages and the turn took {took:?}");
}

#[test]
fn compaction_that_cannot_reach_the_threshold_says_why_once() {
    let ctx = Ctx::new();
    assert!(
        ctx.run_bounded(&["run", "--provider", "scripted", "seed"])
            .status
            .success()
    );
    let id = ctx.only_session();
    // The last two user turns alone are ~2 × 1,000 tokens, above a 500-token threshold.
    grow_history(&ctx, &id, 3, 4_000);
    let out = ctx.run_bounded(&["run", "--session", &id, "--compact-at", "500", "next"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("stays above"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("--compact-at 500") && said[0].contains("the last 2 user turns"),
        "{stderr}"
    );
}

/// A loop that panics, or fails, between `model.request` and `model.response` (the debug
/// build's test hook, right after the first chunk) still closes the request in the log:
/// `model.error` with the reason, so `trace` shows no request open for ever.
#[test]
fn a_loop_that_panics_or_fails_mid_stream_still_closes_its_request() {
    for (mode, said) in [("panic", "panicked"), ("error", "stopped")] {
        let ctx = Ctx::new();
        let out = ctx
            .cmd(&["run", "--provider", "scripted", "hello"])
            .env("FREECODE_TEST_FAIL_MID_STREAM", mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{mode}: the hook did not fire");
        let id = ctx.only_session();
        let errors: Vec<_> = ctx
            .events(&id)
            .into_iter()
            .filter(|e| e["type"] == "model.error")
            .collect();
        assert_eq!(errors.len(), 1, "{mode}: {errors:?}");
        assert_eq!(errors[0]["kind"], "abort", "{mode}");
        let reason = errors[0]["error"].as_str().unwrap();
        assert!(reason.contains(said), "{mode}: {reason}");
        assert!(reason.contains("mid-stream"), "{mode}: {reason}");
        let trace = ctx.trace_json(&id);
        assert_eq!(trace["inFlight"], false, "{mode}: {trace}");
        assert_eq!(trace["hung"], false, "{mode}: {trace}");
        let spans = trace["modelSpans"].as_array().unwrap();
        assert_eq!(spans.len(), 1, "{mode}: {trace}");
        assert_eq!(spans[0]["status"], "error", "{mode}: {trace}");
    }
}

/// `run --session ID` reads the session's `meta.json` once to learn its pin and passes it
/// down: the loop does not read it again. Counted with strace: that read, the writer's under
/// its lock (resume), and the end of the turn's update — three, where it was four.
#[test]
fn run_on_a_session_reads_its_meta_once_before_the_writer() {
    if !freecode_testkit::prerequisite(
        freecode_testkit::runs("strace", "-V"),
        "strace",
        "scripts/test-deps installs it: apt-get install strace",
    ) {
        return;
    }
    let ctx = Ctx::new();
    assert!(
        ctx.run(&["run", "--provider", "scripted", "hello"])
            .status
            .success()
    );
    let id = ctx.only_session();
    let log = ctx.home.join("strace.txt");
    let bin = env!("CARGO_BIN_EXE_freecode");
    let out = Command::new("strace")
        .args(["-f", "-e", "trace=openat", "-o"])
        .arg(&log)
        .arg(bin)
        .args(["run", "--session", &id, "again"])
        .current_dir(ctx.project())
        .env("FREECODE_HOME", &ctx.home)
        .env("FREECODE_SCRIPTED_DELAY_MS", "0")
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read_to_string(&log).unwrap();
    let reads = trace
        .lines()
        .filter(|l| l.contains("/meta.json\"") && l.contains("O_RDONLY"))
        .count();
    assert_eq!(reads, 3, "{trace}");
}
