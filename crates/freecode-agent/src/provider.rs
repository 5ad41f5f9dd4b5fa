//! Model providers: an OpenAI-compatible streaming client (`POST {base}/chat/completions` with
//! `"stream": true`) and a scripted provider built into the binary for use without an endpoint.
//!
//! Both run in a worker thread and hand the raw response body to the loop through a channel
//! ([`Wire`]), so the loop can wait with a timeout — stall detection and Ctrl+C — and parse the
//! SSE itself. The scripted provider produces the very same bytes an OpenAI-compatible server
//! would, so it exercises the same parser. Dropping the receiver stops a worker at its next
//! chunk; a worker blocked on a silent connection ends at the per-read timeout.

use std::io::Read;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use serde_json::{Value, json};

/// Provider id recorded for an OpenAI-compatible endpoint named by its base URL.
pub const OPENAI_COMPATIBLE: &str = "openai-compatible";
/// Provider id recorded for the OpenAI API at its public endpoint (a key, no base URL).
pub const OPENAI: &str = "openai";
/// Where a key without a base URL goes: the OpenAI API's public endpoint.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Provider id of the built-in scripted provider.
pub const SCRIPTED: &str = "scripted";
/// The scripted provider's model.
pub const SCRIPTED_MODEL: &str = "scripted-1";
/// How much of an error response body is quoted.
const ERROR_BODY_BYTES: u64 = 2048;

/// Which provider to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderConfig {
    /// An OpenAI-compatible endpoint.
    OpenAi {
        /// The id recorded in meta: [`OPENAI`] or [`OPENAI_COMPATIBLE`].
        name: &'static str,
        /// The base URL, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
        base_url: String,
        /// Sent as `Authorization: Bearer …` when set.
        api_key: Option<String>,
        /// The model when none is given or pinned (`current.model` of `config.json`).
        default_model: Option<String>,
    },
    /// The built-in scripted provider.
    Scripted {
        /// Pause between streamed chunks.
        chunk_delay: Duration,
    },
}

/// The two kinds of provider this binary can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// The OpenAI chat-completions API (`openai`, `openai-compatible`).
    OpenAi,
    /// The built-in scripted provider (`scripted`).
    Scripted,
}

impl Family {
    /// The family of a recorded provider id; `None` for one this binary cannot call.
    pub fn of(provider: &str) -> Option<Self> {
        match provider.trim() {
            OPENAI | OPENAI_COMPATIBLE => Some(Self::OpenAi),
            SCRIPTED => Some(Self::Scripted),
            _ => None,
        }
    }
}

impl ProviderConfig {
    /// The provider id recorded in meta and the rollout log.
    pub fn name(&self) -> &'static str {
        match self {
            Self::OpenAi { name, .. } => name,
            Self::Scripted { .. } => SCRIPTED,
        }
    }

    /// Which kind of provider this is.
    pub fn family(&self) -> Family {
        match self {
            Self::OpenAi { .. } => Family::OpenAi,
            Self::Scripted { .. } => Family::Scripted,
        }
    }

    /// The model used when none is given or pinned.
    pub fn default_model(&self) -> Option<String> {
        match self {
            Self::OpenAi { default_model, .. } => default_model.clone(),
            Self::Scripted { .. } => Some(SCRIPTED_MODEL.to_owned()),
        }
    }

    /// A provider; `stall` bounds how long an abandoned worker may block on a silent read.
    pub fn build(&self, stall: Duration) -> Box<dyn Provider> {
        match self {
            Self::OpenAi {
                base_url, api_key, ..
            } => Box::new(OpenAiProvider::new(
                base_url.clone(),
                api_key.clone(),
                stall,
            )),
            Self::Scripted { chunk_delay } => Box::new(ScriptedProvider {
                chunk_delay: *chunk_delay,
            }),
        }
    }
}

/// Everything that may choose a provider, gathered from flags, the environment and
/// `config.json`; [`ProviderInputs::resolve`] decides.
#[derive(Debug, Clone, Default)]
pub struct ProviderInputs {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--base-url`, else `OPENAI_BASE_URL`.
    pub base_url: Option<String>,
    /// `OPENAI_API_KEY`.
    pub api_key: Option<String>,
    /// `current.provider` of `config.json`.
    pub configured_provider: Option<String>,
    /// `current.model` of `config.json`.
    pub configured_model: Option<String>,
    /// `baseUrl` of `config.json`.
    pub configured_base_url: Option<String>,
    /// An explicit model (`--model`, `FREECODE_MODEL`).
    pub model: Option<String>,
    /// The scripted provider's pause between chunks.
    pub chunk_delay: Duration,
}

/// A decided provider, and the one line to tell the user when the choice was not theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The provider.
    pub config: ProviderConfig,
    /// Printed on stderr (the scripted provider answering though nobody asked for it).
    pub notice: Option<String>,
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl ProviderInputs {
    /// The provider for a session pinned to `pinned` (its meta's `provider`; `None` or empty
    /// for a new session). A pinned session keeps its provider: the choice is refused, with the
    /// reason, when it names another one or when the pinned one cannot be reached with what is
    /// configured. A new session takes `--provider`, else `current.provider`, else a base URL
    /// (`--base-url`, `OPENAI_BASE_URL`, `baseUrl`), else a key alone (the OpenAI API's public
    /// endpoint), else — nothing configured — the scripted provider, with a notice.
    pub fn resolve(&self, pinned: Option<&str>) -> Result<Resolved, String> {
        let base_url = non_empty(&self.base_url).or(non_empty(&self.configured_base_url));
        if let Some(url) = base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "the base URL must be an http:// or https:// URL, not {url:?}"
            ));
        }
        if let Some(pin) = pinned.map(str::trim).filter(|p| !p.is_empty()) {
            return self.resolve_pinned(pin, base_url);
        }
        if let Some(p) = non_empty(&self.provider) {
            return self.named(p, base_url, "--provider");
        }
        if let Some(p) = non_empty(&self.configured_provider) {
            return self.named(p, base_url, "current.provider in config.json");
        }
        if base_url.is_some() || non_empty(&self.api_key).is_some() {
            return self.named(OPENAI, base_url, "OPENAI_API_KEY");
        }
        Ok(Resolved {
            config: ProviderConfig::Scripted {
                chunk_delay: self.chunk_delay,
            },
            notice: Some(
                "no provider configured (--provider, --base-url, OPENAI_API_KEY or \
                 current.provider in config.json): the built-in scripted provider answers"
                    .to_owned(),
            ),
        })
    }

    fn resolve_pinned(&self, pin: &str, base_url: Option<&str>) -> Result<Resolved, String> {
        let Some(family) = Family::of(pin) else {
            return Err(format!(
                "it is pinned to provider {pin:?}, which freecode run cannot call (it speaks \
                 the OpenAI chat-completions API, or runs its built-in scripted provider); \
                 start a new session instead"
            ));
        };
        if let Some(asked) = non_empty(&self.provider)
            && Family::of(asked) != Some(family)
        {
            return Err(format!(
                "it is pinned to provider {pin}, not {asked}: a session's history stays with \
                 its provider; start a new session to use {asked}"
            ));
        }
        match family {
            Family::Scripted => {
                if let Some(url) = non_empty(&self.base_url) {
                    return Err(format!(
                        "it is pinned to the built-in scripted provider, so its history is \
                         canned answers; it is not sent to {url}: start a new session there"
                    ));
                }
                Ok(Resolved {
                    config: ProviderConfig::Scripted {
                        chunk_delay: self.chunk_delay,
                    },
                    notice: non_empty(&self.provider).is_none().then(|| {
                        "the session is pinned to the built-in scripted provider: it answers"
                            .to_owned()
                    }),
                })
            }
            Family::OpenAi => {
                let name = if pin == OPENAI {
                    OPENAI
                } else {
                    OPENAI_COMPATIBLE
                };
                let base_url = match base_url {
                    Some(u) => u.to_owned(),
                    None if name == OPENAI => OPENAI_DEFAULT_BASE_URL.to_owned(),
                    None => {
                        return Err(
                            "it is pinned to an OpenAI-compatible endpoint, whose URL is not \
                             recorded: pass --base-url URL (or set OPENAI_BASE_URL, or baseUrl \
                             with `freecode config set baseUrl URL`)"
                                .to_owned(),
                        );
                    }
                };
                let api_key = non_empty(&self.api_key).map(str::to_owned);
                if base_url == OPENAI_DEFAULT_BASE_URL && api_key.is_none() {
                    return Err(format!(
                        "it is pinned to provider {pin}, whose public endpoint needs a key: set \
                         OPENAI_API_KEY (or pass --base-url for a compatible server)"
                    ));
                }
                Ok(Resolved {
                    config: ProviderConfig::OpenAi {
                        name,
                        base_url,
                        api_key,
                        default_model: non_empty(&self.configured_model).map(str::to_owned),
                    },
                    notice: None,
                })
            }
        }
    }

    /// A new session on the provider `p`, named by `source`.
    fn named(&self, p: &str, base_url: Option<&str>, source: &str) -> Result<Resolved, String> {
        match Family::of(p) {
            Some(Family::Scripted) => Ok(Resolved {
                config: ProviderConfig::Scripted {
                    chunk_delay: self.chunk_delay,
                },
                notice: None,
            }),
            Some(Family::OpenAi) => {
                let api_key = non_empty(&self.api_key).map(str::to_owned);
                let default_model = non_empty(&self.configured_model).map(str::to_owned);
                let (name, base_url) = match base_url {
                    Some(u) => (OPENAI_COMPATIBLE, u.to_owned()),
                    None => {
                        if api_key.is_none() {
                            return Err(format!(
                                "{source} asks for the OpenAI API, whose public endpoint needs a \
                                 key: set OPENAI_API_KEY (or pass --base-url for a compatible \
                                 server)"
                            ));
                        }
                        if non_empty(&self.model).is_none() && default_model.is_none() {
                            return Err(format!(
                                "the OpenAI API ({OPENAI_DEFAULT_BASE_URL}) needs a model: pass \
                                 --model M (or set FREECODE_MODEL, or current.model with \
                                 `freecode config set current.model M`)"
                            ));
                        }
                        (OPENAI, OPENAI_DEFAULT_BASE_URL.to_owned())
                    }
                };
                Ok(Resolved {
                    config: ProviderConfig::OpenAi {
                        name,
                        base_url,
                        api_key,
                        default_model,
                    },
                    notice: None,
                })
            }
            None => Err(format!(
                "{source} names provider {p:?}, which freecode run cannot call: use {OPENAI} \
                 (any OpenAI-compatible endpoint, with --base-url) or {SCRIPTED}"
            )),
        }
    }
}

/// One chat-completions call.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model; omitted from the request when `None` (the endpoint's default).
    pub model: Option<String>,
    /// The messages.
    pub messages: Vec<Value>,
    /// The OpenAI `tools` array.
    pub tools: Value,
}

impl ChatRequest {
    /// The JSON body, streaming with usage in the last chunk.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "messages": self.messages,
            "tools": self.tools,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(m) = &self.model {
            body["model"] = Value::String(m.clone());
        }
        body
    }
}

/// What a worker hands the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire {
    /// Body bytes, as they arrived.
    Chunk(Vec<u8>),
    /// The body ended.
    End,
    /// The call failed: connection error, HTTP error status (with the body), read error.
    Failed(String),
}

/// A model provider.
pub trait Provider: Send {
    /// Starts the call in a worker thread; its body arrives on the receiver.
    fn start(&self, req: &ChatRequest) -> Receiver<Wire>;
}

/// An OpenAI-compatible endpoint over ureq (blocking, in a worker thread).
pub struct OpenAiProvider {
    url: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl OpenAiProvider {
    /// A client of `{base_url}/chat/completions`.
    pub fn new(base_url: String, api_key: Option<String>, stall: Duration) -> Self {
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(30)))
                // The loop decides when a stream has stalled; this only bounds how long an
                // abandoned worker can stay blocked on a silent connection.
                .timeout_per_read(Some(
                    stall
                        .saturating_mul(2)
                        .saturating_add(Duration::from_secs(5)),
                ))
                .build(),
        );
        Self {
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
            agent,
        }
    }
}

impl Provider for OpenAiProvider {
    fn start(&self, req: &ChatRequest) -> Receiver<Wire> {
        let (tx, rx) = sync_channel(64);
        let body = req.body().to_string();
        let url = self.url.clone();
        let key = self.api_key.clone();
        let agent = self.agent.clone();
        let spawned = std::thread::Builder::new()
            .name("provider".into())
            .spawn(move || stream_http(&agent, &url, key.as_deref(), &body, &tx));
        if let Err(e) = spawned {
            let (tx, rx) = sync_channel(1);
            let _ = tx.send(Wire::Failed(format!(
                "cannot start the provider thread: {e}"
            )));
            return rx;
        }
        rx
    }
}

fn stream_http(
    agent: &ureq::Agent,
    url: &str,
    key: Option<&str>,
    body: &str,
    tx: &SyncSender<Wire>,
) {
    let mut request = agent
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream");
    if let Some(k) = key.filter(|k| !k.is_empty()) {
        request = request.header("authorization", format!("Bearer {k}"));
    }
    let response = match request.send(body.as_bytes()) {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Wire::Failed(format!("cannot reach {url}: {e}")));
            return;
        }
    };
    let status = response.status();
    let mut reader = response.into_body().into_reader();
    if !status.is_success() {
        let mut text = String::new();
        let _ = (&mut reader)
            .take(ERROR_BODY_BYTES)
            .read_to_string(&mut text);
        let text = text.trim();
        let mut msg = format!(
            "HTTP {} {} from {url}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        if !text.is_empty() {
            msg.push_str(": ");
            msg.push_str(text);
        }
        let _ = tx.send(Wire::Failed(msg));
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send(Wire::End);
                return;
            }
            Ok(n) => {
                if tx.send(Wire::Chunk(buf[..n].to_vec())).is_err() {
                    // The loop gave up on this call: dropping the reader closes the connection.
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = tx.send(Wire::Failed(format!("reading the stream from {url}: {e}")));
                return;
            }
        }
    }
}

/// The built-in provider: a deterministic little agent that lists the project, reads a file
/// it found, tries to write a note (denied in read-only mode), then answers — streamed chunk by
/// chunk as an OpenAI-compatible server would.
pub struct ScriptedProvider {
    chunk_delay: Duration,
}

impl Provider for ScriptedProvider {
    fn start(&self, req: &ChatRequest) -> Receiver<Wire> {
        let (tx, rx) = sync_channel(64);
        let payloads = script(req);
        let delay = self.chunk_delay;
        let spawned = std::thread::Builder::new()
            .name("scripted-provider".into())
            .spawn(move || {
                for (i, p) in payloads.iter().enumerate() {
                    if i > 0 && !delay.is_zero() {
                        std::thread::sleep(delay);
                    }
                    if tx
                        .send(Wire::Chunk(format!("data: {p}\n\n").into_bytes()))
                        .is_err()
                    {
                        return;
                    }
                }
                let _ = tx.send(Wire::End);
            });
        if let Err(e) = spawned {
            let (tx, rx) = sync_channel(1);
            let _ = tx.send(Wire::Failed(format!(
                "cannot start the provider thread: {e}"
            )));
            return rx;
        }
        rx
    }
}

/// What the scripted model decides to do next.
enum Step {
    Call {
        text: String,
        tool: &'static str,
        args: Value,
    },
    Answer(String),
}

fn content_of(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The next step, from the messages since the last user message (a real model's only input).
fn next_step(messages: &[Value]) -> Step {
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    let prompt = messages.get(last_user).map(content_of).unwrap_or_default();
    let since = &messages[last_user..];
    // Tool name → its result, in order.
    let mut ids: Vec<(String, String)> = Vec::new();
    let mut results: Vec<(String, String)> = Vec::new();
    for m in since {
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for c in calls {
                ids.push((
                    c["id"].as_str().unwrap_or_default().to_owned(),
                    c["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ));
            }
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            if let Some((_, name)) = ids.iter().find(|(i, _)| i == id) {
                results.push((name.clone(), content_of(m)));
            }
        }
    }
    let result = |tool: &str| {
        results
            .iter()
            .find(|(n, _)| n == tool)
            .map(|(_, r)| r.clone())
    };
    let Some(listing) = result("list_dir") else {
        return Step::Call {
            text: "I'll look around the project first.".into(),
            tool: "list_dir",
            args: json!({"path": "."}),
        };
    };
    let entries: Vec<&str> = listing.lines().filter(|l| !l.starts_with('[')).collect();
    let file = entries
        .iter()
        .find(|e| !e.ends_with('/') && !e.starts_with('.'))
        .or_else(|| entries.iter().find(|e| !e.ends_with('/')))
        .map(|s| (*s).to_owned());
    let read = result("read_file");
    if let (Some(file), None) = (&file, &read) {
        return Step::Call {
            text: format!("Let me read {file}."),
            tool: "read_file",
            args: json!({"path": file}),
        };
    }
    let Some(written) = result("write_file") else {
        return Step::Call {
            text: "I'll save a short note about it.".into(),
            tool: "write_file",
            args: json!({"path": "NOTES.md", "content": format!("# Notes\n\n{prompt}\n")}),
        };
    };
    let mut answer = format!(
        "Here is what I found for \"{prompt}\": the project's top level has {} entries",
        entries.len()
    );
    match (&file, &read) {
        (Some(f), Some(r)) => {
            let first = r.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first: String = first.chars().take(80).collect();
            answer.push_str(&format!(", and {f} begins with \"{}\".", first.trim()));
        }
        _ => answer.push('.'),
    }
    answer.push_str(&format!(" Saving NOTES.md: {written}"));
    Step::Answer(answer)
}

/// The SSE payloads of the scripted response to `req`.
fn script(req: &ChatRequest) -> Vec<String> {
    let model = req
        .model
        .clone()
        .unwrap_or_else(|| SCRIPTED_MODEL.to_owned());
    let prompt_chars: usize = req.messages.iter().map(|m| content_of(m).len()).sum();
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let words = |text: &str, out: &mut Vec<String>| {
        for w in text.split_inclusive(' ') {
            out.push(chunk(json!({"content": w}), None));
        }
    };
    let (finish, output_chars) = match next_step(&req.messages) {
        Step::Call { text, tool, args } => {
            words(&text, &mut out);
            let args = args.to_string();
            // Split the arguments in two chunks as a real stream would, at a character
            // boundary (a prompt quoted in them may be any Unicode).
            let mid = (0..=args.len() / 2)
                .rev()
                .find(|&i| args.is_char_boundary(i))
                .unwrap_or(0);
            let (a, b) = args.split_at(mid);
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": format!("call_{tool}"), "type": "function",
                    "function": {"name": tool, "arguments": a}}]}),
                None,
            ));
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                None,
            ));
            ("tool_calls", text.len() + args.len())
        }
        Step::Answer(text) => {
            words(&text, &mut out);
            ("stop", text.len())
        }
    };
    out.push(chunk(json!({}), Some(finish)));
    out.push(
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [], "usage": {"prompt_tokens": prompt_chars.div_ceil(4),
            "completion_tokens": output_chars.div_ceil(4).max(1),
            "total_tokens": prompt_chars.div_ceil(4) + output_chars.div_ceil(4).max(1)}})
        .to_string(),
    );
    out.push("[DONE]".to_owned());
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::sse::{Completion, SseParser};

    fn run(req: &ChatRequest) -> Completion {
        let rx = ScriptedProvider {
            chunk_delay: Duration::ZERO,
        }
        .start(req);
        let mut parser = SseParser::default();
        let mut c = Completion::default();
        while let Ok(w) = rx.recv() {
            match w {
                Wire::Chunk(b) => {
                    for p in parser.feed(&b).unwrap() {
                        c.apply(&p).unwrap();
                    }
                }
                Wire::End => break,
                Wire::Failed(e) => panic!("{e}"),
            }
        }
        c
    }

    #[test]
    fn the_script_lists_reads_tries_to_write_then_answers() {
        let mut messages = vec![
            json!({"role": "system", "content": "s"}),
            json!({"role": "user", "content": "what is here?"}),
        ];
        let mut req = ChatRequest {
            model: None,
            messages: messages.clone(),
            tools: json!([]),
        };
        let mut seen = Vec::new();
        let results = ["Cargo.toml\nsrc/", "[package]\nname = \"x\"", "denied!"];
        for result in results {
            let c = run(&req);
            assert!(c.done && c.usage.is_some());
            let call = c.calls().remove(0);
            seen.push(call.name.clone());
            messages.push(json!({"role": "assistant", "content": c.text, "tool_calls": [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": result}));
            req.messages = messages.clone();
        }
        assert_eq!(seen, ["list_dir", "read_file", "write_file"]);
        let c = run(&req);
        assert!(c.calls().is_empty());
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            c.text,
            "Here is what I found for \"what is here?\": the project's top level has 2 entries, \
             and Cargo.toml begins with \"[package]\". Saving NOTES.md: denied!"
        );
        assert_eq!(c.model.as_deref(), Some(SCRIPTED_MODEL));
    }
}
