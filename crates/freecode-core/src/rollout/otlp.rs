//! OTLP export of a [`Trace`] (SPEC §13.4): the OTLP/HTTP JSON `ExportTraceServiceRequest`
//! document, and where to send it.
//!
//! Pure: [`trace_to_otlp`] maps a folded trace to the document, [`write_otlp`] writes the same
//! document's bytes a span at a time (what the CLI sends and saves: the tree of a
//! 1,000,000-event trace took 5 GiB), [`target_from_env`] and [`traces_url`] decide the
//! endpoint. Both writers take each span from one borrowed `SpanParts`, so they cannot disagree
//! on what a span holds (`tests/line_writer.rs` holds their bytes equal). The CLI does the file
//! and network I/O.
//!
//! Spans follow the OpenTelemetry GenAI semantic conventions: an `invoke_agent freecode` root,
//! one `chat <model>` CLIENT span per model call, one `execute_tool <tool>` span per tool that
//! ran and one zero-length, ERROR `execute_tool <tool>` span per refused call. Ids are
//! deterministic (SHA-256 of the session id), so exporting the same session twice yields the
//! same trace. Attribute values use the original's encodings: integers as decimal strings in
//! `intValue`, times as strings of `ms × 10⁶`.
//!
//! Differences from the original's output, all deliberate:
//!
//! - the root span is named `invoke_agent freecode` (the original's later name; HEAD wrote
//!   `session <first 8 of id>`) and carries `gen_ai.operation.name = "invoke_agent"`,
//!   `gen_ai.agent.name = "freecode"` and `gen_ai.conversation.id`, plus
//!   `freecode.redirects` / `freecode.redirects_skipped` when non-zero;
//! - chat spans carry `gen_ai.provider.name` (the current name of `gen_ai.system`, which is
//!   kept), `gen_ai.usage.cache_creation.input_tokens` when the response reported cache writes,
//!   and `freecode.hung = true` when the request never terminated;
//! - a request still in flight has no status (UNSET) instead of ERROR "model error": it has not
//!   failed;
//! - a tool span whose output says it failed is ERROR "tool failed" instead of OK;
//! - refused calls appear as denied spans (the 19-event schema; HEAD had none).

use std::borrow::Cow;
use std::io::Write;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::jsonw::push_str;

use super::trace::{DeniedSpan, ModelSpan, SpanStatus, ToolSpan, Trace};

/// Name of the root span.
pub const ROOT_SPAN_NAME: &str = "invoke_agent freecode";
/// `service.name` of the resource and `gen_ai.agent.name` of the root span.
pub const SERVICE_NAME: &str = "freecode";
/// Name of the instrumentation scope.
pub const SCOPE_NAME: &str = "freecode.rollout";

/// `SPAN_KIND_INTERNAL`.
pub const KIND_INTERNAL: u8 = 1;
/// `SPAN_KIND_CLIENT`.
pub const KIND_CLIENT: u8 = 3;
/// `STATUS_CODE_OK`.
pub const STATUS_OK: u8 = 1;
/// `STATUS_CODE_ERROR`.
pub const STATUS_ERROR: u8 = 2;

/// Status message of a request that never terminated.
pub const HUNG_MESSAGE: &str = "request never terminated";

/// Signal-specific endpoint variable, read first.
pub const ENV_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// Generic endpoint variable.
pub const ENV_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Comma-separated `key=value` headers.
pub const ENV_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";

/// Where to send an export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    /// The endpoint as given (see [`traces_url`] for the URL actually posted to).
    pub url: String,
    /// Extra request headers, in the order given.
    pub headers: Vec<(String, String)>,
}

/// The export target: an explicit, non-empty endpoint (no headers), else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`, with headers from
/// `OTEL_EXPORTER_OTLP_HEADERS`. `None` when there is no endpoint at all. `env` looks a
/// variable up (`|k| std::env::var(k).ok()` in the binary); empty values count as unset.
pub fn target_from_env(
    explicit: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<OtlpTarget> {
    if let Some(url) = explicit.filter(|u| !u.is_empty()) {
        return Some(OtlpTarget {
            url: url.to_owned(),
            headers: Vec::new(),
        });
    }
    let url = [ENV_TRACES_ENDPOINT, ENV_ENDPOINT]
        .into_iter()
        .filter_map(&env)
        .find(|v| !v.is_empty())?;
    let headers = env(ENV_HEADERS)
        .map(|h| parse_headers(&h))
        .unwrap_or_default();
    Some(OtlpTarget { url, headers })
}

/// Parses `k=v,k2=v2`: entries trimmed, split at the first `=`, key and value trimmed;
/// entries without `=` or with an empty key are skipped, an empty value is kept, and a
/// repeated key keeps its first position with the last value.
fn parse_headers(s: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in s.split(',') {
        let Some((k, v)) = entry.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v.to_owned(),
            None => out.push((k.to_owned(), v.to_owned())),
        }
    }
    out
}

/// The URL to POST to: `endpoint` as is when it already contains `/v1/traces`, else with one
/// trailing `/` removed and `/v1/traces` appended.
pub fn traces_url(endpoint: &str) -> String {
    if endpoint.contains("/v1/traces") {
        return endpoint.to_owned();
    }
    let base = endpoint.strip_suffix('/').unwrap_or(endpoint);
    format!("{base}/v1/traces")
}

/// Lowercase hex of the first `n` bytes of SHA-256(`input`).
fn sha256_hex(input: &str, n: usize) -> String {
    let digest = Sha256::digest(input.as_bytes());
    hex::encode(&digest[..n.min(digest.len())])
}

/// The trace id of a session: the first 16 bytes of SHA-256(session id), as hex.
pub fn trace_id(session_id: &str) -> String {
    sha256_hex(session_id, 16)
}

/// A span id: the first 8 bytes of SHA-256(`"<traceId>:<suffix>"`), as hex. Suffixes are
/// `root`, `model:<i>`, `tool:<i>` and `denied:<i>`.
pub fn span_id(trace_id: &str, suffix: &str) -> String {
    sha256_hex(&format!("{trace_id}:{suffix}"), 8)
}

/// `ms × 10⁶` (negative times clamp to 0: OTLP times are unsigned), written as a decimal string.
fn nanos(ms: i64) -> i128 {
    i128::from(ms.max(0)) * 1_000_000
}

/// An attribute's value in the original's encodings.
enum AttrValue<'a> {
    /// `{"stringValue": …}`.
    Str(Cow<'a, str>),
    /// `{"intValue": "<decimal>"}`.
    Int(i128),
    /// `{"boolValue": …}`.
    Bool(bool),
}

/// An attribute list in the original's value encodings.
#[derive(Default)]
struct Attrs<'a>(Vec<(&'static str, AttrValue<'a>)>);

impl<'a> Attrs<'a> {
    fn str(&mut self, key: &'static str, v: impl Into<Cow<'a, str>>) {
        self.0.push((key, AttrValue::Str(v.into())));
    }
    fn int(&mut self, key: &'static str, v: impl Into<i128>) {
        self.0.push((key, AttrValue::Int(v.into())));
    }
    fn opt_int(&mut self, key: &'static str, v: Option<impl Into<i128>>) {
        if let Some(v) = v {
            self.int(key, v);
        }
    }
    fn bool(&mut self, key: &'static str, v: bool) {
        self.0.push((key, AttrValue::Bool(v)));
    }
}

/// A span's status.
enum Status<'a> {
    /// No status at all (the span has not finished).
    Unset,
    Ok,
    Error(Option<&'a str>),
}

/// Everything a span needs besides the trace id, borrowed from the trace where it can be.
struct SpanParts<'a> {
    parent: Option<&'a str>,
    name: Cow<'a, str>,
    kind: u8,
    start_ms: i64,
    end_ms: i64,
    attributes: Attrs<'a>,
    status: Status<'a>,
}

impl SpanParts<'_> {
    /// The span object, keys in the original's order.
    fn into_json(self, trace_id: &str, span_id: String) -> Value {
        let mut m = Map::new();
        m.insert("traceId".into(), trace_id.into());
        m.insert("spanId".into(), span_id.into());
        if let Some(p) = self.parent {
            m.insert("parentSpanId".into(), p.into());
        }
        m.insert("name".into(), self.name.into_owned().into());
        m.insert("kind".into(), self.kind.into());
        m.insert(
            "startTimeUnixNano".into(),
            nanos(self.start_ms).to_string().into(),
        );
        m.insert(
            "endTimeUnixNano".into(),
            nanos(self.end_ms).to_string().into(),
        );
        let attributes = self.attributes.0.into_iter().map(|(key, value)| {
            let value = match value {
                AttrValue::Str(v) => json!({ "stringValue": v }),
                AttrValue::Int(v) => json!({ "intValue": v.to_string() }),
                AttrValue::Bool(v) => json!({ "boolValue": v }),
            };
            json!({ "key": key, "value": value })
        });
        m.insert("attributes".into(), Value::Array(attributes.collect()));
        match self.status {
            Status::Unset => {}
            Status::Ok => {
                m.insert("status".into(), json!({ "code": STATUS_OK }));
            }
            Status::Error(None) => {
                m.insert("status".into(), json!({ "code": STATUS_ERROR }));
            }
            Status::Error(Some(msg)) => {
                m.insert(
                    "status".into(),
                    json!({ "code": STATUS_ERROR, "message": msg }),
                );
            }
        }
        Value::Object(m)
    }

    /// The same object's members after its `spanId`, written compactly into `out`: with
    /// [`write_span_start`] before them, the bytes `serde_json::to_vec` writes for
    /// [`SpanParts::into_json`].
    fn write_rest(&self, out: &mut Vec<u8>) {
        let int = |out: &mut Vec<u8>, v: i128| {
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        };
        let quoted_int = |out: &mut Vec<u8>, v: i128| {
            out.push(b'"');
            int(out, v);
            out.push(b'"');
        };
        if let Some(p) = self.parent {
            out.extend_from_slice(b",\"parentSpanId\":");
            push_str(out, p);
        }
        out.extend_from_slice(b",\"name\":");
        push_str(out, &self.name);
        out.extend_from_slice(b",\"kind\":");
        int(out, self.kind.into());
        out.extend_from_slice(b",\"startTimeUnixNano\":");
        quoted_int(out, nanos(self.start_ms));
        out.extend_from_slice(b",\"endTimeUnixNano\":");
        quoted_int(out, nanos(self.end_ms));
        out.extend_from_slice(b",\"attributes\":[");
        for (i, (key, value)) in self.attributes.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"key\":");
            push_str(out, key);
            out.extend_from_slice(b",\"value\":");
            match value {
                AttrValue::Str(v) => {
                    out.extend_from_slice(b"{\"stringValue\":");
                    push_str(out, v);
                }
                AttrValue::Int(v) => {
                    out.extend_from_slice(b"{\"intValue\":");
                    quoted_int(out, *v);
                }
                AttrValue::Bool(v) => {
                    out.extend_from_slice(if *v {
                        b"{\"boolValue\":true"
                    } else {
                        b"{\"boolValue\":false"
                    });
                }
            }
            out.extend_from_slice(b"}}");
        }
        out.push(b']');
        match self.status {
            Status::Unset => {}
            Status::Ok => {
                out.extend_from_slice(b",\"status\":{\"code\":");
                int(out, STATUS_OK.into());
                out.push(b'}');
            }
            Status::Error(msg) => {
                out.extend_from_slice(b",\"status\":{\"code\":");
                int(out, STATUS_ERROR.into());
                if let Some(m) = msg {
                    out.extend_from_slice(b",\"message\":");
                    push_str(out, m);
                }
                out.push(b'}');
            }
        }
        out.push(b'}');
    }
}

fn root_span(t: &Trace) -> SpanParts<'_> {
    let mut a = Attrs::default();
    a.str("session.id", t.session_id.as_str());
    a.int("freecode.model_ms", t.model_ms);
    a.int("freecode.tool_ms", t.tool_ms);
    a.bool("freecode.hung", t.hung);
    a.bool("freecode.in_flight", t.in_flight);
    a.str("gen_ai.operation.name", "invoke_agent");
    a.str("gen_ai.agent.name", SERVICE_NAME);
    a.str("gen_ai.conversation.id", t.session_id.as_str());
    if t.redirects > 0 {
        a.int("freecode.redirects", t.redirects);
    }
    if t.redirects_skipped > 0 {
        a.int("freecode.redirects_skipped", t.redirects_skipped);
    }
    SpanParts {
        parent: None,
        name: Cow::Borrowed(ROOT_SPAN_NAME),
        kind: KIND_INTERNAL,
        start_ms: t.started_at,
        end_ms: t.started_at.saturating_add(t.wall_ms),
        attributes: a,
        status: if t.hung {
            Status::Error(None)
        } else {
            Status::Ok
        },
    }
}

fn model_span<'a>(s: &'a ModelSpan, root: &'a str) -> SpanParts<'a> {
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "chat");
    a.str("gen_ai.system", s.provider.as_str());
    a.str("gen_ai.provider.name", s.provider.as_str());
    a.str("gen_ai.request.model", s.model.as_str());
    a.opt_int("gen_ai.usage.input_tokens", s.input_tokens);
    a.opt_int("gen_ai.usage.output_tokens", s.output_tokens);
    a.opt_int("gen_ai.usage.cache_read_input_tokens", s.cache_read_tokens);
    a.opt_int(
        "gen_ai.usage.cache_creation.input_tokens",
        s.cache_write_tokens,
    );
    match s.tool_calls.as_slice() {
        [] => {}
        [one] => a.str("gen_ai.response.tool_calls", one.as_str()),
        many => a.str("gen_ai.response.tool_calls", many.join(",")),
    }
    a.str("freecode.turn_id", s.turn_id.as_str());
    a.str("freecode.status", s.status.as_str());
    if s.status == SpanStatus::Hung {
        a.bool("freecode.hung", true);
    }
    a.opt_int("freecode.ttft_ms", s.ttft_ms);
    a.int("freecode.prompt_chars", s.prompt_chars);
    a.int("freecode.message_count", s.message_count);
    a.int("freecode.tool_count", s.tool_count);
    if let Some(kind) = &s.error_kind {
        a.str("freecode.error_kind", kind.as_str());
    }
    let status = match s.status {
        SpanStatus::Ok => Status::Ok,
        SpanStatus::InFlight => Status::Unset,
        SpanStatus::Hung => Status::Error(Some(HUNG_MESSAGE)),
        SpanStatus::Error => Status::Error(Some(
            s.error
                .as_deref()
                .filter(|e| !e.is_empty())
                .unwrap_or("model error"),
        )),
    };
    SpanParts {
        parent: Some(root),
        name: Cow::Owned(format!("chat {}", s.model)),
        kind: KIND_CLIENT,
        start_ms: s.started_at,
        end_ms: s.started_at.saturating_add(s.duration_ms),
        attributes: a,
        status,
    }
}

fn tool_span<'a>(s: &'a ToolSpan, root: &'a str) -> SpanParts<'a> {
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "execute_tool");
    a.str("gen_ai.tool.name", s.tool.as_str());
    SpanParts {
        parent: Some(root),
        name: Cow::Owned(format!("execute_tool {}", s.tool)),
        kind: KIND_INTERNAL,
        start_ms: s.started_at,
        end_ms: s.started_at.saturating_add(s.duration_ms),
        attributes: a,
        status: if s.failed == Some(true) {
            Status::Error(Some("tool failed"))
        } else {
            Status::Ok
        },
    }
}

fn denied_span<'a>(s: &'a DeniedSpan, session_id: &'a str, root: &'a str) -> SpanParts<'a> {
    let mut a = Attrs::default();
    a.str("gen_ai.operation.name", "execute_tool");
    a.str("gen_ai.tool.name", s.tool.as_str());
    a.str("gen_ai.conversation.id", session_id);
    a.bool("freecode.denied", true);
    a.str("freecode.deny_source", s.source.as_str());
    SpanParts {
        parent: Some(root),
        name: Cow::Owned(format!("execute_tool {}", s.tool)),
        kind: KIND_INTERNAL,
        start_ms: s.at,
        end_ms: s.at,
        attributes: a,
        status: Status::Error(Some(&s.reason)),
    }
}

/// `{"traceId":…,"spanId":…`: how each span object starts.
fn write_span_start(trace_id: &str, span_id: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"traceId\":");
    push_str(out, trace_id);
    out.extend_from_slice(b",\"spanId\":");
    push_str(out, span_id);
}

/// The span lists of the document, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanList {
    /// Model calls (`model:<i>`).
    Model = 0,
    /// Tools that ran (`tool:<i>`).
    Tool = 1,
    /// Refused calls (`denied:<i>`).
    Denied = 2,
}

impl SpanList {
    fn prefix(self) -> &'static str {
        match self {
            SpanList::Model => "model",
            SpanList::Tool => "tool",
            SpanList::Denied => "denied",
        }
    }
}

/// The OTLP document of one session's trace written in pieces, for a writer that produces it as
/// a fold closes spans (`trace --otlp FILE`): each span's members after its id as it closes
/// ([`OtlpDoc::model_rest`] and its siblings; a span's id depends on its place in its list,
/// which a split fold's tail does not know yet), then the document in order through
/// [`OtlpDoc::writer`]. [`write_otlp`] is the same pieces over a whole [`Trace`].
#[derive(Debug, Clone)]
pub struct OtlpDoc {
    session_id: String,
    trace_id: String,
    root: String,
    /// `SHA-256` fed with `"<traceId>:"`, cloned for each span id.
    ids: Sha256,
}

impl OtlpDoc {
    /// The document of session `session_id`'s trace.
    pub fn new(session_id: &str) -> Self {
        let trace_id = trace_id(session_id);
        let root = span_id(&trace_id, "root");
        let mut ids = Sha256::new();
        ids.update(trace_id.as_bytes());
        ids.update(b":");
        Self {
            session_id: session_id.to_owned(),
            trace_id,
            root,
            ids,
        }
    }

    /// A model span's members after its id (from `,"parentSpanId":` to the closing `}`).
    pub fn model_rest(&self, s: &ModelSpan, out: &mut Vec<u8>) {
        model_span(s, &self.root).write_rest(out);
    }

    /// A tool span's, as [`OtlpDoc::model_rest`].
    pub fn tool_rest(&self, s: &ToolSpan, out: &mut Vec<u8>) {
        tool_span(s, &self.root).write_rest(out);
    }

    /// A refused call's, as [`OtlpDoc::model_rest`].
    pub fn denied_rest(&self, s: &DeniedSpan, out: &mut Vec<u8>) {
        denied_span(s, &self.session_id, &self.root).write_rest(out);
    }

    /// Writes the document to `out` in order: this makes the head and the root span (from the
    /// trace's scalars; its span lists are not read), then [`OtlpWriter::span`] takes each span
    /// of each list in the document's order (model calls, tools, refusals), and
    /// [`OtlpWriter::finish`] ends it.
    pub fn writer<'a, W: Write + ?Sized>(
        &'a self,
        trace: &Trace,
        out: &'a mut W,
    ) -> OtlpWriter<'a, W> {
        let mut buf = Vec::with_capacity(BUF_BYTES + (16 << 10));
        buf.extend_from_slice(DOC_HEAD.as_bytes());
        write_span_start(&self.trace_id, &self.root, &mut buf);
        root_span(trace).write_rest(&mut buf);
        OtlpWriter {
            doc: self,
            out,
            buf,
            counts: [0; 3],
        }
    }

    /// The span id of the `index`th span of `list`: [`span_id`]`(trace id, "<list>:<index>")`.
    fn span_id_of(&self, list: SpanList, index: u64) -> [u8; 16] {
        let mut ids = self.ids.clone();
        ids.update(list.prefix().as_bytes());
        ids.update(b":");
        ids.update(itoa::Buffer::new().format(index).as_bytes());
        let mut id = [0u8; 16];
        for (pair, b) in id.chunks_exact_mut(2).zip(ids.finalize()) {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0xf)];
        }
        id
    }
}

/// Bytes an [`OtlpWriter`] holds before it writes them out.
const BUF_BYTES: usize = 240 << 10;

/// The OTLP document being written, a span at a time (see [`OtlpDoc::writer`]). Each list's
/// spans are numbered as they come, which makes their ids.
pub struct OtlpWriter<'a, W: Write + ?Sized> {
    doc: &'a OtlpDoc,
    out: &'a mut W,
    buf: Vec<u8>,
    /// Spans taken so far in each list.
    counts: [u64; 3],
}

impl<W: Write + ?Sized> OtlpWriter<'_, W> {
    /// The next span of `list`, whose members after its id are `rest`
    /// ([`OtlpDoc::model_rest`] and its siblings).
    pub fn span(&mut self, list: SpanList, rest: &[u8]) -> std::io::Result<()> {
        let count = &mut self.counts[list as usize];
        let id = self.doc.span_id_of(list, *count);
        *count += 1;
        let buf = &mut self.buf;
        buf.push(b',');
        // Lower-case hex: always UTF-8.
        write_span_start(
            &self.doc.trace_id,
            std::str::from_utf8(&id).unwrap_or(""),
            buf,
        );
        buf.extend_from_slice(rest);
        if buf.len() >= BUF_BYTES {
            self.out.write_all(buf)?;
            buf.clear();
        }
        Ok(())
    }

    /// Ends the document and writes what is left.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.buf.extend_from_slice(DOC_TAIL.as_bytes());
        self.out.write_all(&self.buf)
    }
}

/// The document around the spans, compact: what comes before the first span and after the last.
const DOC_HEAD: &str = concat!(
    r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"#,
    "\"freecode\"",
    r#"}}]},"scopeSpans":[{"scope":{"name":"freecode.rollout"},"spans":["#
);
/// See [`DOC_HEAD`].
const DOC_TAIL: &str = "]}]}]}";

/// The OTLP/HTTP JSON `ExportTraceServiceRequest` for `trace`: spans in the order root, model
/// calls, tools, refusals. [`write_otlp`] writes the same document without building it.
pub fn trace_to_otlp(trace: &Trace) -> Value {
    let tid = trace_id(&trace.session_id);
    let root = span_id(&tid, "root");
    let id = |kind: &str, i: usize| span_id(&tid, &format!("{kind}:{i}"));
    let mut spans = vec![root_span(trace).into_json(&tid, root.clone())];
    for (i, s) in trace.model_spans.iter().enumerate() {
        spans.push(model_span(s, &root).into_json(&tid, id("model", i)));
    }
    for (i, s) in trace.tool_spans.iter().enumerate() {
        spans.push(tool_span(s, &root).into_json(&tid, id("tool", i)));
    }
    for (i, s) in trace.denied_spans.iter().enumerate() {
        spans.push(denied_span(s, &trace.session_id, &root).into_json(&tid, id("denied", i)));
    }
    json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [{ "key": "service.name", "value": { "stringValue": SERVICE_NAME } }]
            },
            "scopeSpans": [{
                "scope": { "name": SCOPE_NAME },
                "spans": spans
            }]
        }]
    })
}

/// Writes [`trace_to_otlp`]`(trace)` compactly (the bytes of `serde_json::to_writer` on it) to
/// `out`, a span at a time through [`OtlpDoc::writer`]: no JSON tree, memory for one span and a
/// 256 KiB buffer (the tree of a 1,000,000-event trace took 5 GiB).
pub fn write_otlp(trace: &Trace, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
    let doc = OtlpDoc::new(&trace.session_id);
    let mut w = doc.writer(trace, out);
    let mut rest = Vec::new();
    for s in &trace.model_spans {
        rest.clear();
        doc.model_rest(s, &mut rest);
        w.span(SpanList::Model, &rest)?;
    }
    for s in &trace.tool_spans {
        rest.clear();
        doc.tool_rest(s, &mut rest);
        w.span(SpanList::Tool, &rest)?;
    }
    for s in &trace.denied_spans {
        rest.clear();
        doc.denied_rest(s, &mut rest);
        w.span(SpanList::Denied, &rest)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests;
