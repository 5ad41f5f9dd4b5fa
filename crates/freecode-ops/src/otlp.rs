//! OTLP export of a trace (`freecode trace --otlp`, SPEC §13.4, §16.3): the I/O around
//! [`freecode_core::rollout::otlp`].
//!
//! - [`write_file`] writes the OTLP/JSON document to a file (one compact line, the OTLP JSON
//!   file format collectors read), mode 0600, replaced atomically.
//! - [`post_document`] sends it to an OTLP/HTTP collector: `POST <endpoint>/v1/traces`,
//!   `content-type: application/json`, the headers from `OTEL_EXPORTER_OTLP_HEADERS` when the
//!   endpoint comes from the environment, 30 s overall timeout, any non-2xx answer an error.
//!   The body is a [`Document`]: written into an anonymous temp file first (from the spooled
//!   fold when there is no `--html`, [`Source::Folded`]) and sent from it with its length,
//!   so a large trace's request is never in memory.

use std::fs::File;
use std::io::{BufWriter, Seek as _, Write as _};
use std::path::Path;
use std::time::Duration;

use freecode_core::rollout::otlp::{OtlpTarget, target_from_env, traces_url, write_otlp};
use freecode_core::rollout::trace::{Trace, TraceBuilder};
use freecode_store::rollout::{OtlpSpans, write_otlp_streamed};

use crate::error::{Error, Result};

/// The whole export, connection to last byte of the answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The original's message when neither `--otlp` nor the environment names an endpoint.
const NO_ENDPOINT: &str =
    "No OTLP endpoint. Pass --otlp-endpoint <url> or set OTEL_EXPORTER_OTLP_ENDPOINT.";

/// What an OTLP document is written from: a trace folded with its spans spooled as OTLP as
/// they close (`trace` without `--html`: the trace never in memory), or a whole trace.
pub enum Source<'a> {
    /// A fold with [`OtlpSpans`] (boxed: it is most of a kilobyte), and the `now` it is aged
    /// against.
    Folded(Box<TraceBuilder<OtlpSpans>>, Option<i64>),
    /// A trace built whole.
    Whole(&'a Trace),
}

impl Source<'_> {
    /// Writes the compact document (the same bytes from either source).
    fn write(self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match self {
            Source::Folded(builder, now) => write_otlp_streamed(out, *builder, now),
            Source::Whole(trace) => write_otlp(trace, out),
        }
    }
}

/// Writes the OTLP/JSON document of `src` to `path` as it is produced: compact JSON plus a
/// newline, created 0600 in a temp file beside `path`, synced, then renamed over it (see
/// [`crate::output::write_user_stream`] for `-`, FIFOs and devices; a missing directory is an
/// error).
pub fn write_file(src: Source<'_>, path: &Path) -> Result<()> {
    write_document(path, |out| src.write(out))
}

/// The document `write` writes, then a newline, to `path` as [`write_file`] says.
fn write_document(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    crate::output::write_user_stream(path, |out| {
        write(out)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(())
    })
}

/// An OTLP/JSON document (compact, no newline: what a POST sends) in an anonymous temp file
/// (`tempfile::tempfile`: unlinked at creation, never a path in the home), so the request
/// body of a large trace is page cache, not heap, and goes out with its length.
pub struct Document(File);

impl Document {
    /// The document of `src`.
    pub fn new(src: Source<'_>) -> Result<Self> {
        Self::written(|out| src.write(out))
    }

    fn written(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> Result<Self> {
        let file = tempfile::tempfile().map_err(|source| Error::Io {
            context: "create a temp file for the OTLP document".into(),
            source,
        })?;
        let mut out = BufWriter::with_capacity(1 << 20, &file);
        write(&mut out)
            .and_then(|()| out.flush())
            .map_err(|source| Error::Io {
                context: "write the OTLP document to a temp file".into(),
                source,
            })?;
        drop(out);
        Ok(Self(file))
    }

    /// The document from its first byte.
    fn rewound(&self) -> Result<&File> {
        let mut file = &self.0;
        file.rewind().map_err(|source| Error::Io {
            context: "rewind the OTLP document".into(),
            source,
        })?;
        Ok(file)
    }

    /// Writes the document and a newline to `path`, as [`write_file`] does.
    pub fn write_to(&self, path: &Path) -> Result<()> {
        let mut file = self.rewound()?;
        write_document(path, |out| std::io::copy(&mut file, out).map(drop))
    }
}

/// Exports `doc` to an OTLP/HTTP collector and returns the endpoint as given (what the
/// original prints: `Exported <id> to <endpoint>`); the request goes to
/// [`traces_url`]`(endpoint)`. `endpoint` `None` (or empty) reads `OTEL_EXPORTER_OTLP_*` from
/// the process environment; no endpoint at all is an [`Error::Invalid`]. A collector that
/// cannot be reached or refuses the document is an [`Error::Failed`].
pub fn post_document(doc: &Document, endpoint: Option<&str>) -> Result<String> {
    post_with_env(doc, endpoint, |k| std::env::var(k).ok())
}

/// [`post_document`] with the environment looked up through `env`.
fn post_with_env(
    doc: &Document,
    endpoint: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String> {
    let target =
        target_from_env(endpoint, env).ok_or_else(|| Error::Invalid(NO_ENDPOINT.into()))?;
    send(doc, &target)?;
    Ok(target.url)
}

/// POSTs the document to `target`, read from its file with its length as `content-length`;
/// returns the URL posted to.
fn send(doc: &Document, target: &OtlpTarget) -> Result<String> {
    let url = traces_url(&target.url);
    let body = doc.rewound()?;
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build(),
    );
    let mut request = agent
        .post(url.as_str())
        .header("content-type", "application/json");
    for (k, v) in &target.headers {
        request = request.header(k.as_str(), v.as_str());
    }
    let mut response = request
        .send(body)
        .map_err(|e| Error::Failed(format!("OTLP export to {url} failed: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.body_mut().read_to_string().unwrap_or_default();
        return Err(Error::Failed(format!(
            "OTLP export to {url} failed: {} {text}",
            status.as_u16()
        )));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::os::unix::fs::PermissionsExt;
    use std::thread::JoinHandle;
    use std::time::Instant;

    use freecode_core::rollout::otlp::trace_to_otlp;

    use freecode_core::rollout::otlp::{ROOT_SPAN_NAME, span_id, trace_id};
    use freecode_core::rollout::trace::{SpanStatus, TraceBuilder};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::AnyValue;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use serde_json::Value;

    use super::*;

    fn post(trace: &Trace, endpoint: Option<&str>) -> Result<String> {
        post_document(&Document::new(Source::Whole(trace))?, endpoint)
    }

    use freecode_testkit::fixtures;

    fn read_json(rel: &str) -> Value {
        serde_json::from_slice(&std::fs::read(fixtures().join(rel)).unwrap()).unwrap()
    }

    const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";

    /// The S1 trace, read through the store's log reader.
    fn s1_trace() -> Trace {
        let log = fixtures().join(format!("home/.freecode/rollout/sessions/{S1}/events.jsonl"));
        let mut b = TraceBuilder::new(S1);
        let report = freecode_store::rollout::read_events(&log, |e| b.apply(&e))
            .unwrap()
            .unwrap();
        assert_eq!(report.events, 48);
        b.snapshot(None)
    }

    fn decode(doc: &Value) -> ExportTraceServiceRequest {
        serde_json::from_value(doc.clone()).unwrap()
    }

    fn spans(req: &ExportTraceServiceRequest) -> &[Span] {
        &req.resource_spans[0].scope_spans[0].spans
    }

    fn gen_ai_attrs(span: &Span) -> HashMap<&str, &AnyValue> {
        span.attributes
            .iter()
            .filter(|kv| kv.key.starts_with("gen_ai."))
            .map(|kv| (kv.key.as_str(), kv.value.as_ref().unwrap()))
            .collect()
    }

    fn any(v: Any) -> AnyValue {
        AnyValue { value: Some(v) }
    }

    fn string(s: &str) -> AnyValue {
        any(Any::StringValue(s.to_owned()))
    }

    /// Checks that `body` is a real OTLP request for the S1 trace: span names, parents, times
    /// and `gen_ai.*` attributes, against the trace and the original's document.
    fn check_s1_request(trace: &Trace, body: &Value) {
        let ours = decode(body);
        let theirs = decode(&read_json("expected/rollout/S1_full/traceToOtlp.json"));
        let rs = &ours.resource_spans;
        assert_eq!(rs.len(), 1);
        let resource = rs[0].resource.as_ref().unwrap();
        let resource_attrs: Vec<(&str, Option<&AnyValue>)> = resource
            .attributes
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_ref()))
            .collect();
        assert_eq!(
            resource_attrs,
            vec![("service.name", Some(&string("freecode")))]
        );
        assert_eq!(
            rs[0].scope_spans[0].scope.as_ref().unwrap().name,
            "freecode.rollout"
        );

        let (ours, theirs) = (spans(&ours), spans(&theirs));
        let n = 1 + trace.model_spans.len() + trace.tool_spans.len();
        assert_eq!((ours.len(), theirs.len()), (n, n));

        // The decoder kept every attribute we wrote: nothing unknown, nothing empty.
        let json_spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .unwrap();
        for (span, json) in ours.iter().zip(json_spans) {
            assert_eq!(
                span.attributes.len(),
                json["attributes"].as_array().unwrap().len()
            );
            assert!(span.attributes.iter().all(|kv| kv.value.is_some()));
        }

        let tid = trace_id(S1);
        let root_id = span_id(&tid, "root");
        let ms = |v: i64| u64::try_from(v).unwrap() * 1_000_000;

        // Root.
        let root = &ours[0];
        assert_eq!(root.name, ROOT_SPAN_NAME);
        assert_eq!(hex::encode(&root.trace_id), tid);
        assert_eq!(hex::encode(&root.span_id), root_id);
        assert!(root.parent_span_id.is_empty());
        assert_eq!(root.kind, 1);
        assert_eq!(root.start_time_unix_nano, ms(trace.started_at));
        assert_eq!(
            root.end_time_unix_nano,
            ms(trace.started_at + trace.wall_ms)
        );
        assert_eq!(
            root.status.as_ref().unwrap().code,
            2,
            "S1 has a hung request"
        );
        let mut g = gen_ai_attrs(root);
        assert_eq!(
            g.remove("gen_ai.operation.name"),
            Some(&string("invoke_agent"))
        );
        assert_eq!(g.remove("gen_ai.agent.name"), Some(&string("freecode")));
        assert_eq!(g.remove("gen_ai.conversation.id"), Some(&string(S1)));
        assert!(g.is_empty());

        // Children: same ids, parents and times as the original; names from the trace.
        for (i, (o, t)) in ours.iter().zip(theirs).enumerate().skip(1) {
            assert_eq!(o.trace_id, t.trace_id, "span {i}");
            assert_eq!(o.span_id, t.span_id, "span {i}");
            assert_eq!(hex::encode(&o.parent_span_id), root_id, "span {i}");
            assert_eq!(o.parent_span_id, t.parent_span_id, "span {i}");
            assert_eq!(o.name, t.name, "span {i}");
            assert_eq!(o.kind, t.kind, "span {i}");
            assert_eq!(o.start_time_unix_nano, t.start_time_unix_nano, "span {i}");
            assert_eq!(o.end_time_unix_nano, t.end_time_unix_nano, "span {i}");
        }
        for (i, m) in trace.model_spans.iter().enumerate() {
            let span = &ours[1 + i];
            assert_eq!(span.name, format!("chat {}", m.model));
            assert_eq!(span.kind, 3);
            assert_eq!(span.start_time_unix_nano, ms(m.started_at));
            assert_eq!(span.end_time_unix_nano, ms(m.started_at + m.duration_ms));
            let mut g = gen_ai_attrs(span);
            assert_eq!(g.remove("gen_ai.operation.name"), Some(&string("chat")));
            assert_eq!(g.remove("gen_ai.system"), Some(&string(&m.provider)));
            assert_eq!(g.remove("gen_ai.provider.name"), Some(&string(&m.provider)));
            assert_eq!(g.remove("gen_ai.request.model"), Some(&string(&m.model)));
            let int = |v: Option<u64>| v.map(|n| any(Any::IntValue(i64::try_from(n).unwrap())));
            assert_eq!(
                g.remove("gen_ai.usage.input_tokens").cloned(),
                int(m.input_tokens)
            );
            assert_eq!(
                g.remove("gen_ai.usage.output_tokens").cloned(),
                int(m.output_tokens)
            );
            assert_eq!(
                g.remove("gen_ai.usage.cache_read_input_tokens").cloned(),
                int(m.cache_read_tokens)
            );
            assert_eq!(
                g.remove("gen_ai.usage.cache_creation.input_tokens")
                    .cloned(),
                int(m.cache_write_tokens)
            );
            assert_eq!(
                g.remove("gen_ai.response.tool_calls").cloned(),
                (!m.tool_calls.is_empty()).then(|| string(&m.tool_calls.join(",")))
            );
            assert!(g.is_empty(), "{g:?}");
            let status = span.status.as_ref().unwrap();
            match m.status {
                SpanStatus::Ok => assert_eq!(status.code, 1),
                SpanStatus::Hung => {
                    assert_eq!((status.code, status.message.as_str()), (2, HUNG))
                }
                SpanStatus::Error => {
                    assert_eq!((status.code, Some(&status.message)), (2, m.error.as_ref()))
                }
                SpanStatus::InFlight => unreachable!("S1 has no request in flight"),
            }
        }
        for (i, t) in trace.tool_spans.iter().enumerate() {
            let span = &ours[1 + trace.model_spans.len() + i];
            assert_eq!(span.name, format!("execute_tool {}", t.tool));
            assert_eq!(span.kind, 1);
            let mut g = gen_ai_attrs(span);
            assert_eq!(
                g.remove("gen_ai.operation.name"),
                Some(&string("execute_tool"))
            );
            assert_eq!(g.remove("gen_ai.tool.name"), Some(&string(&t.tool)));
            assert!(g.is_empty());
        }
    }

    const HUNG: &str = "request never terminated";

    #[test]
    fn the_document_decodes_as_an_otlp_request() {
        let trace = s1_trace();
        check_s1_request(&trace, &trace_to_otlp(&trace));
    }

    /// One request as a tiny OTLP/HTTP receiver saw it.
    #[derive(Debug)]
    struct Received {
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Received {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    /// A receiver on 127.0.0.1 that answers one request with `status` and `body`, then stops;
    /// it gives up after 20 s without a request.
    fn receiver(status: &'static str, body: &'static str) -> (u16, JoinHandle<Option<Received>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let handle = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let stream = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if Instant::now() > deadline {
                            return None;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            };
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap().to_owned();
            let path = parts.next().unwrap().to_owned();
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end_matches(['\r', '\n']);
                if h.is_empty() {
                    break;
                }
                let (k, v) = h.split_once(':').unwrap();
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .map(|(_, v)| v.parse().unwrap())
                .unwrap();
            let mut payload = vec![0; len];
            reader.read_exact(&mut payload).unwrap();
            let mut out = stream;
            write!(
                out,
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            out.flush().unwrap();
            Some(Received {
                method,
                path,
                headers,
                body: payload,
            })
        });
        (port, handle)
    }

    #[test]
    fn post_sends_the_document_to_v1_traces() {
        let trace = s1_trace();
        let (port, rx) = receiver("200 OK", "");
        let endpoint = format!("http://127.0.0.1:{port}");
        assert_eq!(post(&trace, Some(&endpoint)).unwrap(), endpoint);
        let req = rx.join().unwrap().unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/v1/traces");
        assert_eq!(req.header("content-type"), Some("application/json"));
        assert_eq!(req.header("authorization"), None);
        // The body is the compact document, byte for byte.
        assert_eq!(
            req.body,
            serde_json::to_vec(&trace_to_otlp(&trace)).unwrap()
        );
        check_s1_request(&trace, &serde_json::from_slice(&req.body).unwrap());
    }

    #[test]
    fn post_from_env_sends_the_env_headers() {
        let trace = s1_trace();
        let (port, rx) = receiver("200 OK", "");
        let fixture = read_json("expected/rollout/otlpTargetFromEnv.json");
        let env: HashMap<String, String> = fixture["env"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().unwrap().replace("PORT", &port.to_string());
                (k.clone(), v)
            })
            .collect();
        let target = target_from_env(None, |k| env.get(k).cloned()).unwrap();
        let endpoint = format!("http://127.0.0.1:{port}/");
        assert_eq!(target.url, endpoint);
        let exported = post_with_env(&Document::new(Source::Whole(&trace)).unwrap(), None, |k| {
            env.get(k).cloned()
        })
        .unwrap();
        assert_eq!(exported, endpoint);

        // What the original's collector saw for `freecode trace <id> --otlp` with this env.
        let expected = &read_json("expected/rollout/S1_full/trace--otlp-env-request.json")[0];
        let req = rx.join().unwrap().unwrap();
        assert_eq!(req.method, expected["method"]);
        assert_eq!(req.path, expected["url"]);
        for (k, v) in expected["headers"].as_object().unwrap() {
            assert_eq!(req.header(k), v.as_str(), "{k}");
        }
        assert_eq!(req.header("x-tenant"), Some("acme"));
        assert_eq!(req.header("empty"), Some(""));
        assert_eq!(req.header("novalue"), None);
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(body, trace_to_otlp(&trace));
        check_s1_request(&trace, &body);
        let printed = std::fs::read_to_string(
            fixtures().join("expected/rollout/S1_full/trace--otlp-env.txt"),
        )
        .unwrap();
        assert_eq!(
            printed.replace("PORT", &port.to_string()).trim_end(),
            format!("Exported {S1} to {exported}")
        );
    }

    #[test]
    fn a_503_is_an_error_with_the_originals_text() {
        let trace = s1_trace();
        let (port, rx) = receiver("503 Service Unavailable", "collector unavailable");
        let err = post(&trace, Some(&format!("http://127.0.0.1:{port}/fail")))
            .unwrap_err()
            .to_string();
        let cases = read_json("expected/rollout/S1_full/exportTrace-requests.json");
        let case = cases
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c.get("error").is_some())
            .unwrap();
        let expected = case["error"]
            .as_str()
            .unwrap()
            .strip_prefix("Error: ")
            .unwrap()
            .replace("PORT", &port.to_string());
        assert_eq!(err, expected);
        let req = rx.join().unwrap().unwrap();
        assert_eq!(req.path, "/fail/v1/traces");
        assert_eq!(req.path, case["requests"][0]["url"]);
    }

    #[test]
    fn an_https_endpoint_speaks_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let rx = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut hello = [0u8; 3];
            s.read_exact(&mut hello).unwrap();
            hello
        });
        let err = post(&s1_trace(), Some(&format!("https://127.0.0.1:{port}"))).unwrap_err();
        // A TLS handshake record (0x16, version 3.x): a ClientHello, not plain HTTP.
        let hello = rx.join().unwrap();
        assert_eq!(hello[..2], [0x16, 0x03], "{err:#}");
    }

    #[test]
    fn no_endpoint_is_a_user_error() {
        let err = post_with_env(
            &Document::new(Source::Whole(&s1_trace())).unwrap(),
            None,
            |_| None,
        )
        .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Invalid);
        assert_eq!(
            err.to_string(),
            "No OTLP endpoint. Pass --otlp-endpoint <url> or set OTEL_EXPORTER_OTLP_ENDPOINT."
        );
    }

    #[test]
    fn write_file_is_private_atomic_and_decodes() {
        let trace = s1_trace();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.otlp.json");
        std::fs::write(&path, "old").unwrap();
        write_file(Source::Whole(&trace), &path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(text.ends_with('\n'));
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc, trace_to_otlp(&trace));
        check_s1_request(&trace, &doc);
        // Only the file itself is left behind: no temp files.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
