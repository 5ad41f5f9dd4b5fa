//! A scripted model server on loopback, for running the real agents in tests: the Anthropic
//! Messages API (`POST /v1/messages`, what Claude Code speaks at `ANTHROPIC_BASE_URL`), the
//! OpenAI Responses API (`POST /v1/responses`, what Codex speaks at a provider's `base_url`),
//! OpenAI's Chat Completions (`POST /v1/chat/completions`, what opencode speaks through an
//! OpenAI-compatible provider) and the Gemini API (`POST /v1beta/models/M:streamGenerateContent`, `:generateContent`,
//! `:countTokens`, what Gemini CLI speaks at `GOOGLE_GEMINI_BASE_URL`), as server-sent events
//! (or one JSON answer where the request asks for it), driven by a [`Script`] of [`Step`]s,
//! recording every request.
//!
//! Which request takes the next step: one that offers the model tools (the agent's own loop,
//! a subagent's loop). A request without tools (a title, a summary, a check the agent makes on
//! the side) is answered with [`Script::side_answer`] and takes no step, so the script is the
//! conversation and nothing else. When the steps run out, the answer is the
//! [`Script::fallback`] text, so an agent that asks once more never hangs. A side request that
//! asks for JSON of a schema (Gemini CLI's model router: `responseMimeType: application/json`
//! with `responseJsonSchema`) gets the smallest object of that schema: each required property
//! a value of its type.
//!
//! Every answer carries usage: input tokens are the request body's bytes / 4, output tokens
//! the answer's characters / 4 + 1 (recorded with the request as [`Recorded::usage`]), so a
//! test can compare the tokens an importer read with what the server said.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One answer of the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A text answer that ends the turn.
    Text(String),
    /// Tool calls the agent must run (more than one: in parallel), each a name and its input;
    /// the turn goes on with their results.
    Tools(Vec<(String, Value)>),
    /// Text, then tool calls, in one answer.
    TextThenTools(String, Vec<(String, Value)>),
    /// An API error with this HTTP status and message (400 is not retried by the agents).
    Error(u16, String),
}

impl Step {
    /// A text answer.
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text(s.into())
    }

    /// One tool call.
    pub fn tool(name: impl Into<String>, input: Value) -> Self {
        Self::Tools(vec![(name.into(), input)])
    }
}

/// The conversation the server plays.
#[derive(Debug, Clone)]
pub struct Script {
    /// The answers to the requests that offer tools, in order.
    pub steps: VecDeque<Step>,
    /// Conversations of their own, each with its steps: a request whose first user message
    /// holds the marker takes its steps from there (a subagent, which may run beside its
    /// parent, is told apart by the prompt it was given).
    pub routes: Vec<(String, VecDeque<Step>)>,
    /// The answer once the steps are used up.
    pub fallback: String,
    /// The answer to a request that offers no tools.
    pub side_answer: String,
}

impl Script {
    /// A script of `steps`.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self {
            steps: steps.into_iter().collect(),
            routes: Vec::new(),
            fallback: "Nothing more to do.".to_owned(),
            side_answer: "Scripted session".to_owned(),
        }
    }
}

impl Script {
    /// Steps for the conversation whose first user message holds `marker`.
    pub fn route(
        mut self,
        marker: impl Into<String>,
        steps: impl IntoIterator<Item = Step>,
    ) -> Self {
        self.routes
            .push((marker.into(), steps.into_iter().collect()));
        self
    }
}

/// The text of a request's first user message, whatever the API.
fn first_user_text(body: &Value) -> String {
    let list = ["messages", "input", "contents"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_array));
    let first = list.and_then(|l| {
        l.iter()
            .find(|m| matches!(m.get("role").and_then(Value::as_str), Some("user")))
    });
    first.map(Value::to_string).unwrap_or_default()
}

/// Which API a request was made to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/messages` (Anthropic).
    Messages,
    /// `POST /v1/messages/count_tokens` (Anthropic).
    CountTokens,
    /// `POST /v1/responses` (OpenAI).
    Responses,
    /// `POST /v1/chat/completions` (OpenAI Chat Completions).
    ChatCompletions,
    /// `POST /v1beta/models/M:generateContent` or `:streamGenerateContent` (Gemini).
    Gemini,
    /// `POST /v1beta/models/M:countTokens` (Gemini).
    GeminiCount,
    /// Anything else (answered 404).
    Other,
}

/// A request the server got, and what it answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The API.
    pub api: Api,
    /// The method.
    pub method: String,
    /// The path and query.
    pub uri: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The step it was answered with (`None`: a side answer, the fallback, or no answer).
    pub step: Option<Step>,
    /// Input and output tokens the answer reported.
    pub usage: (u64, u64),
}

impl Recorded {
    /// Whether the request offered the model tools (a turn of the agent's loop).
    pub fn offers_tools(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Inner {
    script: Script,
    requests: Vec<Recorded>,
    tool_ids: u64,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The server, stopped on drop.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Starts the server on a free loopback port, playing `script`.
    pub fn start(script: Script) -> Self {
        let shared: Shared = Arc::new(Mutex::new(Inner {
            script,
            requests: Vec::new(),
            tool_ids: 0,
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Self {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`: Claude Code's `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT`: Gemini CLI's `GOOGLE_GEMINI_BASE_URL`, Claude Code's
    /// `ANTHROPIC_BASE_URL` ([`Self::url`]).
    pub fn gemini_base(&self) -> String {
        self.url()
    }

    /// `http://127.0.0.1:PORT/v1`: a Codex provider's `base_url`.
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request so far, in the order they came.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared).requests.clone()
    }

    /// The requests that took steps (the agent's loop), in order.
    pub fn turns(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.step.is_some())
            .collect()
    }

    /// Replaces what is left of the script (for the agent's next run).
    pub fn play(&self, script: Script) {
        lock(&self.shared).script = script;
    }

    /// Steps not played yet, on every route.
    pub fn steps_left(&self) -> usize {
        let inner = lock(&self.shared);
        inner.script.steps.len() + inner.script.routes.iter().map(|r| r.1.len()).sum::<usize>()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Tokens for `n` bytes or characters, as the module says.
fn tokens(n: usize) -> u64 {
    (n / 4) as u64
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let api = match (method.as_str(), path) {
        ("POST", "/v1/messages") => Api::Messages,
        ("POST", "/v1/messages/count_tokens") => Api::CountTokens,
        ("POST", "/v1/responses") => Api::Responses,
        ("POST", "/v1/chat/completions") => Api::ChatCompletions,
        ("POST", p) if p.starts_with("/v1beta/models/") && p.ends_with(":countTokens") => {
            Api::GeminiCount
        }
        ("POST", p)
            if p.starts_with("/v1beta/models/")
                && (p.ends_with(":generateContent") || p.ends_with(":streamGenerateContent")) =>
        {
            Api::Gemini
        }
        _ => Api::Other,
    };
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut rec = Recorded {
        api,
        method: method.to_string(),
        uri: uri.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: json.clone(),
        step: None,
        usage: (0, 0),
    };
    let input_tokens = tokens(body.len());
    let answer = {
        let mut inner = lock(&shared);
        let step = match api {
            Api::Messages | Api::Responses | Api::ChatCompletions | Api::Gemini
                if rec.offers_tools() =>
            {
                let first = first_user_text(&json);
                let route = inner
                    .script
                    .routes
                    .iter()
                    .position(|(marker, _)| first.contains(marker.as_str()));
                let step = match route {
                    Some(i) => inner.script.routes[i].1.pop_front(),
                    None => inner.script.steps.pop_front(),
                };
                rec.step = step.clone();
                step.unwrap_or_else(|| Step::Text(inner.script.fallback.clone()))
            }
            Api::Gemini => match json_schema_asked(&json) {
                Some(schema) => Step::Text(smallest_of(schema).to_string()),
                None => Step::Text(inner.script.side_answer.clone()),
            },
            Api::Messages | Api::Responses | Api::ChatCompletions => {
                Step::Text(inner.script.side_answer.clone())
            }
            Api::CountTokens | Api::GeminiCount | Api::Other => Step::Text(String::new()),
        };
        let first_id = inner.tool_ids;
        let n = inner.requests.len() as u64;
        if let Step::Tools(calls) | Step::TextThenTools(_, calls) = &step {
            inner.tool_ids += calls.len() as u64;
        }
        let out_chars = match &step {
            Step::Text(t) => t.chars().count(),
            Step::TextThenTools(t, calls) => {
                t.chars().count() + calls.iter().map(|c| c.1.to_string().len()).sum::<usize>()
            }
            Step::Tools(calls) => calls.iter().map(|c| c.1.to_string().len()).sum(),
            Step::Error(..) => 0,
        };
        rec.usage = (input_tokens, tokens(out_chars) + 1);
        let usage = rec.usage;
        inner.requests.push(rec);
        (step, (n, first_id), usage)
    };
    let (step, ids, usage) = answer;
    match api {
        Api::CountTokens => axum::Json(json!({"input_tokens": input_tokens})).into_response(),
        Api::GeminiCount => axum::Json(json!({"totalTokens": input_tokens})).into_response(),
        Api::ChatCompletions => {
            let model = json
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("chat-scripted");
            chat(&step, model, ids, usage)
        }
        Api::Gemini => {
            let model = path
                .trim_start_matches("/v1beta/models/")
                .split(':')
                .next()
                .unwrap_or("gemini-scripted")
                .to_owned();
            gemini(
                &step,
                &model,
                ids,
                usage,
                path.ends_with(":streamGenerateContent"),
            )
        }
        Api::Other => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": {"message": "not scripted", "type": "not_found"}})),
        )
            .into_response(),
        Api::Messages => {
            let model = json
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("claude-scripted");
            let streamed = json.get("stream").and_then(Value::as_bool) == Some(true);
            anthropic(&step, model, ids, usage, streamed)
        }
        Api::Responses => {
            let model = json
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("gpt-scripted");
            openai(&step, model, ids, usage)
        }
    }
}

/// An answer of Chat Completions, as a stream of chunks: the text in pieces, the tool calls,
/// the finish reason, then the usage, then `[DONE]`.
fn chat(step: &Step, model: &str, (n, first_id): (u64, u64), usage: (u64, u64)) -> Response {
    if let Step::Error(status, message) = step {
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
        return (
            status,
            axum::Json(json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})),
        )
            .into_response();
    }
    let (text, calls) = parts(step);
    let id = format!("chatcmpl-scripted-{n:04}");
    let chunk = |choices: Value| json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": model, "choices": choices});
    let mut chunks = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
    )];
    for d in text.map(deltas).unwrap_or_default() {
        chunks.push(chunk(
            json!([{"index": 0, "delta": {"content": d}, "finish_reason": null}]),
        ));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        chunks.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [{
            "index": i, "id": format!("call_scripted_{:04}", first_id + i as u64), "type": "function",
            "function": {"name": name, "arguments": args.to_string()},
        }]}, "finish_reason": null}])));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunks.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let mut last = chunk(json!([]));
    last["usage"] = json!({"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1});
    chunks.push(last);
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The JSON schema a Gemini request asks its answer to follow, if it does.
fn json_schema_asked(body: &Value) -> Option<&Value> {
    let config = body.get("generationConfig")?;
    (config.get("responseMimeType").and_then(Value::as_str) == Some("application/json"))
        .then(|| {
            config
                .get("responseJsonSchema")
                .or_else(|| config.get("responseSchema"))
        })
        .flatten()
}

/// The smallest value of `schema`: an object of its required properties, each the smallest of
/// its own; the first of an enum; 1 for a number; false; an empty array; else a short string.
fn smallest_of(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    match kind.as_str() {
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let props = schema.get("properties").and_then(Value::as_object);
            let mut out = serde_json::Map::new();
            for name in required {
                let sub = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_owned(), smallest_of(sub));
            }
            Value::Object(out)
        }
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => json!("scripted"),
    }
}

/// An answer of the Gemini API: server-sent events (one chunk a piece of text, the last with
/// the finish reason and usage), or one JSON answer.
fn gemini(
    step: &Step,
    model: &str,
    (n, first_id): (u64, u64),
    usage: (u64, u64),
    streamed: bool,
) -> Response {
    if let Step::Error(status, message) = step {
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
        return (
            status,
            axum::Json(json!({"error": {"code": status.as_u16(), "message": message, "status": "INVALID_ARGUMENT"}})),
        )
            .into_response();
    }
    let (text, calls) = parts(step);
    let usage_meta = json!({"promptTokenCount": usage.0, "candidatesTokenCount": usage.1, "totalTokenCount": usage.0 + usage.1});
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut c = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                           "modelVersion": model, "responseId": format!("resp_scripted_{n:04}")});
        if last {
            c["candidates"][0]["finishReason"] = json!("STOP");
            c["usageMetadata"] = usage_meta.clone();
        }
        c
    };
    let call_parts: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"functionCall": {"name": name, "args": args, "id": format!("call_scripted_{:04}", first_id + i as u64)}})
        })
        .collect();
    if !streamed {
        let mut all: Vec<Value> = text.map(|t| json!({"text": t})).into_iter().collect();
        all.extend(call_parts);
        return axum::Json(chunk(all, true)).into_response();
    }
    let mut chunks: Vec<Value> = text
        .map(|t| {
            deltas(t)
                .into_iter()
                .map(|d| chunk(vec![json!({"text": d})], false))
                .collect()
        })
        .unwrap_or_default();
    chunks.push(chunk(call_parts, true));
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\r\n\r\n"));
    }
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The pieces of `text` a stream sends one delta each.
fn deltas(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(64).map(|c| c.iter().collect()).collect()
}

fn sse(events: &[(String, Value)]) -> Response {
    let mut body = String::new();
    for (name, data) in events {
        body.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The text and the tool calls of a step.
fn parts(step: &Step) -> (Option<&str>, &[(String, Value)]) {
    match step {
        Step::Text(t) => (Some(t), &[]),
        Step::Tools(c) => (None, c),
        Step::TextThenTools(t, c) => (Some(t), c),
        Step::Error(..) => (None, &[]),
    }
}

/// An answer of the Messages API: a stream of events, or one JSON message.
/// `ids`: the request's number (the message's id) and the first tool call's.
fn anthropic(
    step: &Step,
    model: &str,
    (n, first_id): (u64, u64),
    usage: (u64, u64),
    streamed: bool,
) -> Response {
    if let Step::Error(status, message) = step {
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
        let kind = if status.is_server_error() {
            "api_error"
        } else {
            "invalid_request_error"
        };
        return (
            status,
            [("x-should-retry", "false")],
            axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
        )
            .into_response();
    }
    let (text, calls) = parts(step);
    let id = format!("msg_scripted_{n:04}");
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let tool_id = |i: usize| format!("toolu_scripted_{:04}", first_id + i as u64);
    if !streamed {
        let mut content = Vec::new();
        if let Some(t) = text {
            content.push(json!({"type": "text", "text": t}));
        }
        for (i, (name, input)) in calls.iter().enumerate() {
            content
                .push(json!({"type": "tool_use", "id": tool_id(i), "name": name, "input": input}));
        }
        return axum::Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": usage.0, "output_tokens": usage.1},
        }))
        .into_response();
    }
    let mut ev: Vec<(String, Value)> = vec![(
        "message_start".into(),
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.0, "output_tokens": 1},
        }}),
    )];
    let mut index = 0;
    if let Some(t) = text {
        ev.push((
            "content_block_start".into(),
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for d in deltas(t) {
            ev.push((
                "content_block_delta".into(),
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": d}}),
            ));
        }
        ev.push((
            "content_block_stop".into(),
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for (i, (name, input)) in calls.iter().enumerate() {
        ev.push((
            "content_block_start".into(),
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": tool_id(i), "name": name, "input": {}}}),
        ));
        ev.push((
            "content_block_delta".into(),
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        ));
        ev.push((
            "content_block_stop".into(),
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    ev.push((
        "message_delta".into(),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": usage.1}}),
    ));
    ev.push(("message_stop".into(), json!({"type": "message_stop"})));
    sse(&ev)
}

/// An answer of the Responses API, as a stream of events.
fn openai(step: &Step, model: &str, (n, first_id): (u64, u64), usage: (u64, u64)) -> Response {
    if let Step::Error(status, message) = step {
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
        return (
            status,
            axum::Json(json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})),
        )
            .into_response();
    }
    let (text, calls) = parts(step);
    let id = format!("resp_scripted_{n:04}");
    let mut ev: Vec<(String, Value)> = vec![(
        "response.created".into(),
        json!({"type": "response.created", "response": {"id": id, "object": "response", "model": model, "status": "in_progress", "output": []}}),
    )];
    let mut output = Vec::new();
    if let Some(t) = text {
        let item_id = format!("msg_scripted_{n:04}");
        ev.push((
            "response.output_item.added".into(),
            json!({"type": "response.output_item.added", "output_index": output.len(), "item": {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}}),
        ));
        for d in deltas(t) {
            ev.push((
                "response.output_text.delta".into(),
                json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": output.len(), "content_index": 0, "delta": d}),
            ));
        }
        let item = json!({"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": t, "annotations": []}]});
        ev.push((
            "response.output_item.done".into(),
            json!({"type": "response.output_item.done", "output_index": output.len(), "item": item}),
        ));
        output.push(item);
    }
    for (i, (name, input)) in calls.iter().enumerate() {
        let n = first_id + i as u64;
        let item = json!({"type": "function_call", "id": format!("fc_scripted_{n:04}"), "call_id": format!("call_scripted_{n:04}"), "name": name, "arguments": input.to_string(), "status": "completed"});
        ev.push((
            "response.output_item.added".into(),
            json!({"type": "response.output_item.added", "output_index": output.len(), "item": item}),
        ));
        ev.push((
            "response.output_item.done".into(),
            json!({"type": "response.output_item.done", "output_index": output.len(), "item": item}),
        ));
        output.push(item);
    }
    ev.push((
        "response.completed".into(),
        json!({"type": "response.completed", "response": {
            "id": id, "object": "response", "model": model, "status": "completed", "output": output,
            "usage": {"input_tokens": usage.0, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": usage.1, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": usage.0 + usage.1},
        }}),
    ));
    sse(&ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A POST over plain HTTP/1.1; the status and the body.
    fn post(addr: SocketAddr, path: &str, body: &Value) -> (u16, String) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let body = body.to_string();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let status = out[9..12].parse().unwrap();
        let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        (status, body.to_owned())
    }

    #[test]
    fn steps_go_to_requests_with_tools_in_order_and_everything_is_recorded() {
        let server = ModelServer::start(Script::new([
            Step::tool("Read", json!({"file_path": "/x"})),
            Step::text("é".repeat(100)),
            Step::Error(400, "scripted failure".into()),
        ]));
        let tools = json!([{"name": "Read", "input_schema": {"type": "object"}}]);
        let ask = json!({"model": "claude-t", "stream": true, "tools": tools, "messages": []});
        let (status, sse) = post(server.addr, "/v1/messages?beta=true", &ask);
        assert_eq!(status, 200);
        assert!(sse.contains("event: message_start"), "{sse}");
        assert!(
            sse.contains(r#""type":"tool_use""#) && sse.contains(r#""stop_reason":"tool_use""#)
        );
        assert!(sse.contains(r#"\"file_path\":\"/x\""#), "{sse}");
        // A side request takes no step.
        let side = json!({"model": "claude-t", "messages": []});
        let (_, title) = post(server.addr, "/v1/messages", &side);
        assert!(title.contains("Scripted session"), "{title}");
        // The long text comes in pieces of 64 characters.
        let (_, sse) = post(server.addr, "/v1/messages", &ask);
        assert_eq!(sse.matches("text_delta").count(), 2, "{sse}");
        let (status, err) = post(
            server.addr,
            "/v1/responses",
            &json!({"model": "g", "tools": tools, "input": []}),
        );
        assert_eq!(status, 400);
        assert!(err.contains("scripted failure"));
        // Then the fallback, on the Responses API.
        let (_, sse) = post(
            server.addr,
            "/v1/responses",
            &json!({"model": "g", "tools": tools, "input": []}),
        );
        assert!(
            sse.contains("response.completed") && sse.contains("Nothing more to do."),
            "{sse}"
        );
        let (status, _) = post(server.addr, "/v1/elsewhere", &json!({}));
        assert_eq!(status, 404);
        let seen = server.requests();
        assert_eq!(seen.len(), 6);
        assert_eq!(server.turns().len(), 3, "the fallback took no step");
        assert_eq!(seen[0].uri, "/v1/messages?beta=true");
        assert_eq!(seen[0].body["model"], "claude-t");
        assert_eq!(seen[5].api, Api::Other);
        assert_eq!(server.steps_left(), 0);
    }
}
