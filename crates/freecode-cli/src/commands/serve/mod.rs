//! `freecode serve`: JSON-RPC 2.0 over stdio for front ends (SPEC §9.2), one message per line.
//!
//! Requests are read from stdin and answered on stdout in order, one compact JSON line each;
//! stdout carries nothing else (logs go to stderr, §19.40). Notifications (no `id`) get no
//! answer; a batch (an array) gets an array. Errors:
//!
//! | code | when |
//! |---|---|
//! | -32700 | the line is not JSON |
//! | -32600 | not a JSON-RPC 2.0 request object |
//! | -32601 | `Method not found: <m>` |
//! | -32602 | wrong or missing params, an invalid session id (nothing is written) |
//! | -32001 | `Session not found: <id>` |
//! | -32002 | the session is locked by another writer |
//! | -32603 | anything else, with its message |
//!
//! The server keeps serving after any error and stops at the end of stdin (after the turns in
//! flight end). `session.send` runs an agent turn on a worker thread — against
//! `OPENAI_BASE_URL`, or the built-in scripted provider — and answers when the turn ends, so
//! `session.stop` and other requests are served meanwhile (answers may come out of order; match
//! them by id); `session.export`/`session.import` run inline, bounded by the 30 s network
//! timeout. Ctrl+C stops every turn in flight (each saved and marked `interrupted`, its
//! `session.send` answered with status `interrupted`) and the server keeps running; Ctrl+C while
//! idle marks nothing; a second Ctrl+C within a second exits with status 1, after any write in
//! progress has finished.
//!
//! `session.get` (not in a batch) is written as it is read: the reply line is serialised into a
//! spooled temp (memory up to 1 MiB, then an anonymous temp file) a block of messages at a time
//! and copied to stdout once whole, so a large session never becomes a JSON tree and a read
//! error is an error answer, never half a line; the bytes are those of the tree-built answer
//! (which a batch still gets). `session.trace` (not in a batch) likewise: the log folded with
//! spans spooled as compact JSON as they close, the trace written once into the reply's spool
//! (`rollout::write_trace_json`), never a tree.
//!
//! `session.import {url, projectPath?}` writes the session under `projectPath` (an existing
//! directory, made canonical; default: the server's working directory), never under the path
//! the bundle names.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use freecode_agent::{AgentLoop, InterruptFlag, Interrupts, SessionTarget};
use freecode_core::SessionId;
use freecode_ops::ErrorKind;
use freecode_ops::sessions::{self, CompactRequest, ListRequest, StartRequest};
use freecode_ops::share::{self, ExportRequest, ImportRequest};
use freecode_ops::trace::{self, CompactJson};
use freecode_ops::types::{self as ops, JsonStyle};
use freecode_remote::share::ClientError;
use freecode_store::{Home, SessionStore, StoreError};
use serde_json::{Map, Value, json};

mod discover;

/// Arguments of `freecode serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

/// A JSON-RPC error object.
#[derive(Debug)]
pub struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn params(message: impl Into<String>) -> Self {
        Self::new(-32602, format!("Invalid params: {}", message.into()))
    }
}

impl From<StoreError> for RpcError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound { id } => Self::new(-32001, format!("Session not found: {id}")),
            StoreError::InvalidId(_)
            | StoreError::InvalidProjectPath { .. }
            | StoreError::Compaction(_) => Self::params(e.to_string()),
            StoreError::Locked { .. } => Self::new(-32002, e.to_string()),
            _ => Self::new(-32603, e.to_string()),
        }
    }
}

impl From<freecode_store::share::ShareError> for RpcError {
    fn from(e: freecode_store::share::ShareError) -> Self {
        match e {
            freecode_store::share::ShareError::Store(s) => s.into(),
            other => Self::new(-32603, other.to_string()),
        }
    }
}

/// An operation's error as a JSON-RPC error: the store's and a share's by their own rules
/// (above), anything else by its kind, with its whole chain as the message.
impl From<freecode_ops::Error> for RpcError {
    fn from(e: freecode_ops::Error) -> Self {
        match e {
            freecode_ops::Error::Store(e) => e.into(),
            freecode_ops::Error::Share(e) => e.into(),
            e => {
                let message = freecode_ops::error::chain(&e);
                match e.kind() {
                    ErrorKind::Invalid => Self::params(message),
                    ErrorKind::NotFound => Self::new(-32001, message),
                    ErrorKind::Busy => Self::new(-32002, message),
                    ErrorKind::Failed | ErrorKind::Internal => Self::new(-32603, message),
                }
            }
        }
    }
}

type RpcResult = Result<Value, RpcError>;

impl ServeArgs {
    /// Serves until stdin ends.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let interrupts = Interrupts::new();
        crate::signals::install_sigint_handler(&interrupts)?;
        let store = SessionStore::open(home.clone())?;
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let server = Server {
            store,
            interrupts,
            out: out.clone(),
            turns: Arc::new(Mutex::new(HashMap::new())),
            workers: Mutex::new(Vec::new()),
        };
        let stdin = std::io::stdin();
        // At most a line of the cap is held; a longer one is measured and answered -32700.
        let mut input = freecode_store::jsonl::LineReader::new(stdin.lock(), 0);
        while let Some(line) = input.next_line()? {
            if line.len > freecode_store::jsonl::MAX_LINE_BYTES as u64 {
                let why = format!(
                    "Parse error: line {} is {} bytes, past the {} a message may hold",
                    line.no,
                    line.len,
                    freecode_store::jsonl::MAX_LINE_BYTES
                );
                write_reply(&out, &error_reply(Value::Null, -32700, &why))?;
                continue;
            }
            let reply = match std::str::from_utf8(&line.bytes) {
                Ok(line) if line.trim().is_empty() => continue,
                Ok(line) => server.handle_line(line),
                Err(e) => Some(error_reply(
                    Value::Null,
                    -32700,
                    &format!("Parse error: the line is not UTF-8 ({e})"),
                )),
            };
            if let Some(reply) = reply {
                write_reply(&out, &reply)?;
            }
        }
        // End of input: let the turns in flight finish and answer.
        let workers = std::mem::take(&mut *lock(&server.workers));
        for w in workers {
            let _ = w.join();
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes one answer line; the lock keeps a worker's answer from interleaving with another.
fn write_reply(out: &Mutex<std::io::Stdout>, reply: &Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(reply)?;
    bytes.push(b'\n');
    let mut out = lock(out);
    out.write_all(&bytes)?;
    out.flush()
}

/// Bytes of a streamed answer held in memory before its spool moves to an anonymous temp file.
const SPOOL_IN_MEMORY: usize = 1 << 20;

/// What a turn in flight needs from the server: the flag `session.stop` raises.
type Turns = Arc<Mutex<HashMap<String, InterruptFlag>>>;

struct Server {
    store: SessionStore,
    interrupts: Interrupts,
    out: Arc<Mutex<std::io::Stdout>>,
    turns: Turns,
    workers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Server {
    /// The answer to one line, or `None` for a notification (or a batch of them).
    fn handle_line(&self, line: &str) -> Option<Value> {
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                return Some(error_reply(
                    Value::Null,
                    -32700,
                    &format!("Parse error: {e}"),
                ));
            }
        };
        match v {
            Value::Array(items) if items.is_empty() => Some(error_reply(
                Value::Null,
                -32600,
                "Invalid Request: empty batch",
            )),
            Value::Array(items) => {
                let replies: Vec<Value> = items
                    .into_iter()
                    .filter_map(|r| self.handle(r, false))
                    .collect();
                (!replies.is_empty()).then_some(Value::Array(replies))
            }
            other => self.handle(other, true),
        }
    }

    /// The answer to one request; `alone` when it is not in a batch (its answer may then be
    /// written by the method itself: `session.get`).
    fn handle(&self, req: Value, alone: bool) -> Option<Value> {
        let Value::Object(mut req) = req else {
            return Some(error_reply(
                Value::Null,
                -32600,
                "Invalid Request: not an object",
            ));
        };
        let id = req.remove("id");
        let reply_id = id.clone().unwrap_or(Value::Null);
        if let Some(bad) = id
            .as_ref()
            .filter(|i| !(i.is_string() || i.is_number() || i.is_null()))
        {
            let _ = bad;
            return Some(error_reply(
                Value::Null,
                -32600,
                "Invalid Request: id must be a string, a number or null",
            ));
        }
        if req.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Some(error_reply(
                reply_id,
                -32600,
                "Invalid Request: jsonrpc must be \"2.0\"",
            ));
        }
        let Some(Value::String(method)) = req.remove("method") else {
            return Some(error_reply(
                reply_id,
                -32600,
                "Invalid Request: method must be a string",
            ));
        };
        let params = match req.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return id.map(|_| {
                    error_reply(reply_id, -32602, "Invalid params: params must be an object")
                });
            }
        };
        let result = if method == "session.send" {
            match self.send(&Params(params), id.clone()) {
                // Answered by the worker when the turn ends.
                Ok(()) => return None,
                Err(e) => Err(e),
            }
        } else if method == "session.get" && alone && id.is_some() {
            match self.get_streamed(&Params(params), &reply_id) {
                // Answered on stdout already.
                Ok(()) => return None,
                Err(e) => Err(e),
            }
        } else if method == "session.trace" && alone && id.is_some() {
            match self.trace_streamed(&Params(params), &reply_id) {
                Ok(()) => return None,
                Err(e) => Err(e),
            }
        } else {
            self.dispatch(&method, &Params(params))
        };
        if let Err(e) = &result {
            tracing::debug!(method, code = e.code, error = %e.message, "rpc error");
        }
        // A notification gets no answer, even an error.
        id.as_ref()?;
        Some(match result {
            Ok(v) => json!({"jsonrpc": "2.0", "id": reply_id, "result": v}),
            Err(e) => error_reply(reply_id, e.code, &e.message),
        })
    }

    /// `session.get` answered as it is read (see the module docs): the messages rendered a
    /// block at a time on both cores ([`ops::write_detail`]) into the answer's spool.
    fn get_streamed(&self, p: &Params, reply_id: &Value) -> Result<(), RpcError> {
        let id = p.session_id()?;
        let meta = self.store.meta(&id)?;
        let blocks = sessions::message_blocks(&self.store, &id)?;
        self.answer_streamed(reply_id, |out| {
            ops::write_detail(&meta, blocks, JsonStyle::Compact, |b| Ok(out.write_all(b)?))
                .map_err(|e| RpcError::new(-32603, freecode_ops::error::chain(&e)))
        })
    }

    /// `session.trace` answered as it is folded: spans spooled as compact JSON as they close,
    /// the trace written once into the answer's spool (`null` without a log).
    fn trace_streamed(&self, p: &Params, reply_id: &Value) -> Result<(), RpcError> {
        let id = p.session_id()?;
        self.store.meta(&id)?;
        let folded = trace::fold_trace_json::<CompactJson>(self.store.home(), &id)?;
        self.answer_streamed(reply_id, |out| {
            match folded {
                Some((builder, now)) => trace::write_trace_json(out, builder, now),
                None => out.write_all(b"null"),
            }
            .map_err(internal)
        })
    }

    /// Answers `reply_id` with the result `write` writes: the line
    /// `{"jsonrpc":"2.0","id":…,"result":…}` serialised into a spooled temp, then copied to
    /// stdout under the answer lock. Any error before the copy is returned, nothing written.
    fn answer_streamed(
        &self,
        reply_id: &Value,
        write: impl FnOnce(&mut dyn Write) -> Result<(), RpcError>,
    ) -> Result<(), RpcError> {
        use std::io::Seek;
        let mut spool = std::io::BufWriter::with_capacity(
            64 << 10,
            tempfile::SpooledTempFile::new(SPOOL_IN_MEMORY),
        );
        spool
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":")
            .map_err(internal)?;
        serde_json::to_writer(&mut spool, reply_id).map_err(|e| internal(e.into()))?;
        spool.write_all(b",\"result\":").map_err(internal)?;
        write(&mut spool)?;
        spool.write_all(b"}\n").map_err(internal)?;
        let mut spool = spool.into_inner().map_err(|e| internal(e.into_error()))?;
        spool.rewind().map_err(internal)?;
        let mut out = lock(&self.out);
        std::io::copy(&mut spool, &mut *out)
            .and_then(|_| out.flush())
            .map_err(internal)?;
        Ok(())
    }

    fn dispatch(&self, method: &str, p: &Params) -> RpcResult {
        match method {
            "session.start" => self.start(p),
            "session.list" => self.list(p),
            "session.get" => {
                let id = p.session_id()?;
                to_value(&sessions::detail(&self.store, &id)?)
            }
            "rpc.discover" => Ok(discover::openrpc_document()),
            "session.resume" => self.resume(p),
            "session.delete" => self.delete(p),
            "session.archive" => {
                let id = p.session_id()?;
                sessions::archive(&self.store, &id)?;
                Ok(Value::Null)
            }
            "session.move" => {
                let id = p.session_id()?;
                let project = p
                    .opt_str("project")?
                    .ok_or_else(|| RpcError::params("project is required"))?;
                if !std::path::Path::new(&project).is_absolute() {
                    return Err(RpcError::params("project must be an absolute directory"));
                }
                sessions::visible(&self.store, &id)?;
                to_value(&sessions::move_to_project(&self.store, &id, &project)?)
            }
            "session.handoff" => {
                let params: freecode_ops::handoff::HandoffParams =
                    serde_json::from_value(Value::Object(p.0.clone()))
                        .map_err(|e| RpcError::params(e.to_string()))?;
                to_value(&freecode_ops::handoff::handoff_params(
                    self.store.home(),
                    params,
                )?)
            }
            "session.fork" => {
                let id = p.session_id()?;
                sessions::visible(&self.store, &id)?;
                Ok(Value::String(sessions::fork(&self.store, &id)?.session_id))
            }
            "session.compact" => self.compact(p),
            "session.getInterrupted" => to_value(&sessions::interrupted(&self.store)?),
            // Home sync (`freecode sync status|now`), blocking this request only as long as
            // the server takes.
            "sync.status" => to_value(&freecode_ops::home_sync::status(self.store.home())?),
            "sync.now" => to_value(&freecode_ops::home_sync::now(
                self.store.home(),
                &mut freecode_ops::Silent,
            )?),
            "session.export" => self.export(p),
            "session.import" => self.import(p),
            "session.trace" => self.trace(p),
            "session.stop" => {
                let id = p.session_id()?;
                let flag = lock(&self.turns).get(id.as_str()).cloned();
                if let Some(f) = &flag {
                    f.raise();
                }
                to_value(&ops::Stopped {
                    stopped: flag.is_some(),
                })
            }
            other => Err(RpcError::new(-32601, format!("Method not found: {other}"))),
        }
    }

    /// `session.send {sessionId, message, model?}`: one agent turn on a worker thread, answered
    /// with the turn's outcome when it ends (`status` completed, interrupted, failed or
    /// iteration_limit). One turn per session at a time.
    fn send(&self, p: &Params, id: Option<Value>) -> Result<(), RpcError> {
        let sid = p.session_id()?;
        let message = p
            .opt_str("message")?
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| RpcError::params("message is required"))?;
        let model = p.opt_str("model")?;
        p.opt_str("agentMode")?;
        let meta = sessions::visible(&self.store, &sid)?;
        let mut config = freecode_agent::config::agent_config_from_env(
            self.store.home(),
            Some(meta.provider.as_str()),
            Some(sid.as_str()),
        )
        .map_err(|e| RpcError::new(-32603, freecode_ops::error::chain(&e)))?;
        config.model = model;
        let flag = InterruptFlag::new();
        {
            let mut turns = lock(&self.turns);
            if turns.contains_key(sid.as_str()) {
                return Err(RpcError::new(
                    -32002,
                    format!("a turn is already running in session {sid}; session.stop it first"),
                ));
            }
            turns.insert(sid.to_string(), flag.clone());
        }
        let home = self.store.home().clone();
        let sync_home = home.clone();
        let interrupts = self.interrupts.clone();
        let turns = self.turns.clone();
        let out = self.out.clone();
        let reply_id = id.clone().unwrap_or(Value::Null);
        // Whatever happens to the worker (an error, a panic), the session is free again.
        struct Release(Turns, String);
        impl Drop for Release {
            fn drop(&mut self) {
                lock(&self.0).remove(&self.1);
            }
        }
        let release = Release(turns, sid.to_string());
        let spawned = std::thread::Builder::new()
            .name(format!("turn-{sid}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let store = SessionStore::open(home)?;
                    let mut agent = AgentLoop::open(
                        &store,
                        SessionTarget::Resume(sid.clone()),
                        config,
                        interrupts,
                    )?;
                    let outcome = agent.run_turn(&message, &flag)?;
                    Ok::<_, freecode_ops::Error>(serde_json::to_value(&outcome)?)
                }))
                .unwrap_or_else(|_| {
                    Err(freecode_ops::Error::Internal(
                        "the turn crashed (a bug); see stderr".into(),
                    ))
                });
                drop(release);
                // The agent is gone with its lock: `sync.auto` takes the turn from here.
                crate::autosync::after_turn(&sync_home);
                if id.is_none() {
                    return;
                }
                let reply = match result {
                    Ok(v) => json!({"jsonrpc": "2.0", "id": reply_id, "result": v}),
                    Err(e) => {
                        let e = RpcError::from(e);
                        error_reply(reply_id, e.code, &e.message)
                    }
                };
                if let Err(e) = write_reply(&out, &reply) {
                    tracing::warn!("cannot answer session.send: {e}");
                }
            });
        let worker = match spawned {
            Ok(w) => w,
            Err(e) => {
                // The closure (and its release guard) was dropped: the session is free.
                return Err(RpcError::new(-32603, format!("cannot start the turn: {e}")));
            }
        };
        let mut workers = lock(&self.workers);
        workers.retain(|w| !w.is_finished());
        workers.push(worker);
        Ok(())
    }

    fn start(&self, p: &Params) -> RpcResult {
        let req = StartRequest {
            project_path: p.opt_str("projectPath")?,
            provider: p.opt_str("provider")?,
            model: p.opt_str("model")?,
            title: p.opt_str("title")?,
        };
        p.opt_str("agentMode")?;
        to_value(&sessions::start(&self.store, &req)?)
    }

    fn list(&self, p: &Params) -> RpcResult {
        let project_path = p.opt_str("projectPath")?;
        let status = p
            .opt_str("status")?
            .as_deref()
            .map(sessions::parse_status)
            .transpose()?;
        let listed = sessions::list(
            self.store.home(),
            &ListRequest {
                status,
                project_path,
                agent: p.opt_str("agent")?,
                from_files: true,
                ..ListRequest::default()
            },
        )?;
        // The very items of `session list --json`: the metas.
        to_value(&listed.sessions)
    }

    fn resume(&self, p: &Params) -> RpcResult {
        let id = p.session_id()?;
        to_value(&sessions::resume(&self.store, &id)?)
    }

    fn delete(&self, p: &Params) -> RpcResult {
        let id = p.session_id()?;
        if p.opt_bool("purge")?.unwrap_or(false) {
            sessions::purge(&self.store, &id)?;
        } else {
            sessions::delete(&self.store, &id)?;
        }
        Ok(Value::Null)
    }

    fn compact(&self, p: &Params) -> RpcResult {
        let id = p.session_id()?;
        let keep = match p.opt_u64("keep")? {
            None => 2,
            Some(0) => return Err(RpcError::params("keep must be at least 1")),
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let summary = match p.opt_str("summary")? {
            Some(s) if s.trim().is_empty() => return Err(RpcError::params("summary is empty")),
            s => s,
        };
        sessions::visible(&self.store, &id)?;
        to_value(&sessions::compact(
            &self.store,
            &id,
            &CompactRequest { keep, summary },
        )?)
    }

    fn export(&self, p: &Params) -> RpcResult {
        let id = p.session_id()?;
        let req = ExportRequest {
            to: p.opt_str("to")?,
            plain: p.opt_bool("plain")?.unwrap_or(false),
            expires: p
                .opt_u64("expiresInDays")?
                .map(|d| Duration::from_secs(d.max(1).saturating_mul(86_400))),
            include_rollout: p.opt_bool("includeRollout")?.unwrap_or(false),
            include_memories: false,
        };
        let shared = share::share(&self.store, &id, &req, &mut freecode_ops::Silent).map_err(
            |e| match e {
                freecode_ops::Error::Client(ClientError::Export(e)) => RpcError::from(e),
                freecode_ops::Error::Client(e) => client_error("Export failed", e),
                e => RpcError::from(e),
            },
        )?;
        to_value(&shared.exported)
    }

    fn import(&self, p: &Params) -> RpcResult {
        let url = p
            .opt_str("url")?
            .ok_or_else(|| RpcError::params("url is required"))?;
        // The session belongs to the project the caller names (default: the server's working
        // directory), never to the path inside the bundle.
        let project = p.opt_str("projectPath")?;
        let project_path =
            freecode_ops::scope::project_directory(project.as_deref().map(Path::new)).map_err(
                |e| RpcError::params(format!("projectPath: {}", freecode_ops::error::chain(&e))),
            )?;
        let (bundle, shape) = share::fetch(self.store.home(), &url).map_err(|e| match e {
            freecode_ops::Error::Client(e) => client_error("Import failed", e),
            e => RpcError::from(e),
        })?;
        let imported = share::import(
            &self.store,
            bundle,
            shape,
            &ImportRequest {
                source: url.split('#').next().unwrap_or("").to_owned(),
                project_path,
                with_memories: false,
            },
        )?;
        to_value(&ops::SessionRef {
            session_id: imported.session_id,
        })
    }

    fn trace(&self, p: &Params) -> RpcResult {
        let id = p.session_id()?;
        self.store.meta(&id)?;
        to_value(&trace::trace(self.store.home(), &id)?)
    }
}

/// A share failure: the caller's URL or key is bad (-32602), or the exchange failed (-32603).
fn client_error(what: &str, e: freecode_remote::share::ClientError) -> RpcError {
    use freecode_remote::crypto::CryptoError;
    use freecode_remote::share::ClientError as C;
    let code = match &e {
        C::BadUrl { .. } | C::Insecure { .. } | C::MissingKey | C::Crypto(CryptoError::BadKey) => {
            -32602
        }
        _ => -32603,
    };
    RpcError::new(code, format!("{what}: {e}"))
}

/// An I/O error writing an answer (-32603).
fn internal(e: std::io::Error) -> RpcError {
    RpcError::new(-32603, e.to_string())
}

/// A result as JSON (-32603 if it cannot be: never, for these types).
fn to_value(v: &impl serde::Serialize) -> RpcResult {
    serde_json::to_value(v).map_err(|e| RpcError::new(-32603, e.to_string()))
}

/// `{jsonrpc, id, error}`.
fn error_reply(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Typed access to a request's params; every accessor fails with -32602.
struct Params(Map<String, Value>);

impl Params {
    fn session_id(&self) -> Result<SessionId, RpcError> {
        let s = self
            .opt_str("sessionId")?
            .ok_or_else(|| RpcError::params("sessionId is required"))?;
        SessionId::new(s).map_err(|e| RpcError::params(e.to_string()))
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, RpcError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(RpcError::params(format!("{key} must be a string"))),
        }
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, RpcError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(RpcError::params(format!("{key} must be a boolean"))),
        }
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, RpcError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| RpcError::params(format!("{key} must be a non-negative integer"))),
        }
    }
}
