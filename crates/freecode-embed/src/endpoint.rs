//! An OpenAI-compatible embeddings endpoint: `POST {url}/embeddings` with
//! `{"model": …, "input": [texts]}`, answered `{"data": [{"index": i, "embedding": [...]}]}`
//! (OpenAI, Ollama's `/v1`, llama.cpp's server, vLLM). Bounded: a connect and a whole-request
//! deadline, at most [`MAX_BODY`] read, and an answer that does not hold one vector per text,
//! all of one length, is refused.

use std::io::Read as _;
use std::time::Duration;

use serde::Deserialize;

use crate::{EmbedError, Embedder, normalize};

/// Texts sent in one request.
const BATCH: usize = 32;
/// The largest answer read.
pub const MAX_BODY: u64 = 64 << 20;
/// The window assumed for an endpoint's model, in characters (8,192 tokens is common; a chunk
/// of this size stays well inside any of them).
const WINDOW_CHARS: usize = 2_000;
/// How long a connection may take.
const CONNECT: Duration = Duration::from_secs(10);
/// How long one request may take, end to end.
const REQUEST: Duration = Duration::from_secs(120);

/// A client of one endpoint and model.
pub struct Endpoint {
    url: String,
    model: String,
    api_key: Option<String>,
    agent: ureq::Agent,
    id: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("id", &self.id).finish()
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl Endpoint {
    /// A client of `{url}/embeddings` asking for `model`. The URL must be `http://` or
    /// `https://`.
    pub fn new(url: &str, model: &str, api_key: Option<String>) -> Result<Self, EmbedError> {
        let base = url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(EmbedError::Endpoint {
                url: url.to_owned(),
                message: "not an http:// or https:// URL".into(),
            });
        }
        if model.trim().is_empty() {
            return Err(EmbedError::Endpoint {
                url: url.to_owned(),
                message: "no model named (set embed.model)".into(),
            });
        }
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(CONNECT))
                .timeout_global(Some(REQUEST))
                .build(),
        );
        Ok(Self {
            url: format!("{base}/embeddings"),
            model: model.to_owned(),
            api_key,
            agent,
            id: format!("endpoint:{base}#{model}"),
        })
    }

    fn fail(&self, message: impl Into<String>) -> EmbedError {
        EmbedError::Endpoint {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    fn post(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = serde_json::json!({ "model": self.model, "input": texts }).to_string();
        let mut request = self
            .agent
            .post(self.url.as_str())
            .header("content-type", "application/json");
        if let Some(k) = self.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = request.header("authorization", format!("Bearer {k}"));
        }
        let response = request
            .send(body.as_bytes())
            .map_err(|e| self.fail(format!("cannot reach it: {e}")))?;
        let status = response.status();
        let mut bytes = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(MAX_BODY + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.fail(format!("reading the answer: {e}")))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned();
            return Err(self.fail(format!(
                "HTTP {} {}{}",
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                if text.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", text.trim())
                }
            )));
        }
        if bytes.len() as u64 > MAX_BODY {
            return Err(self.fail(format!("the answer is larger than {MAX_BODY} bytes")));
        }
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|e| self.fail(format!("not an embeddings answer: {e}")))?;
        if answer.data.len() != texts.len() {
            return Err(self.fail(format!(
                "{} vectors for {} texts",
                answer.data.len(),
                texts.len()
            )));
        }
        let mut out = vec![Vec::new(); texts.len()];
        for (pos, item) in answer.data.into_iter().enumerate() {
            let i = item.index.unwrap_or(pos);
            let slot = out
                .get_mut(i)
                .ok_or_else(|| self.fail(format!("a vector for text {i} of {}", texts.len())))?;
            if !slot.is_empty() {
                return Err(self.fail(format!("two vectors for text {i}")));
            }
            if item.embedding.is_empty() || item.embedding.iter().any(|x| !x.is_finite()) {
                return Err(self.fail(format!("the vector of text {i} is empty or not finite")));
            }
            *slot = item.embedding;
        }
        let dim = out.first().map_or(0, Vec::len);
        if out.iter().any(|v| v.len() != dim) {
            return Err(self.fail("vectors of different lengths"));
        }
        for v in &mut out {
            normalize(v);
        }
        Ok(out)
    }
}

impl Embedder for Endpoint {
    fn id(&self) -> &str {
        &self.id
    }

    fn window_chars(&self) -> usize {
        WINDOW_CHARS
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for group in texts.chunks(BATCH) {
            let cut: Vec<&str> = group
                .iter()
                .map(|t| crate::cut(t, WINDOW_CHARS * 2))
                .collect();
            out.extend(self.post(&cut)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    use super::*;

    /// A one-shot HTTP server on loopback answering every request with `status` and `body`;
    /// hands back the request bodies it read.
    fn serve(status: &'static str, body: String) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut req = vec![0; len];
            std::io::Read::read_exact(&mut reader, &mut req).unwrap();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            vec![String::from_utf8(req).unwrap()]
        });
        (url, handle)
    }

    #[test]
    fn vectors_come_back_in_the_texts_order_normalised() {
        let (url, server) = serve(
            "200 OK",
            r#"{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}"#.into(),
        );
        let e = Endpoint::new(&url, "m", Some("k".into())).unwrap();
        let v = e.embed(&["a", "b"]).unwrap();
        assert!(
            (v[0][0] - 0.6).abs() < 1e-6 && (v[1][1] - 1.0).abs() < 1e-6,
            "{v:?}"
        );
        let sent: serde_json::Value = serde_json::from_str(&server.join().unwrap()[0]).unwrap();
        assert_eq!(sent, serde_json::json!({"model": "m", "input": ["a", "b"]}));
        assert_eq!(e.id(), format!("endpoint:{url}#m"));
    }

    #[test]
    fn an_error_status_is_an_error_with_its_text() {
        let (url, server) = serve("404 Not Found", r#"{"error":"model not found"}"#.into());
        let e = Endpoint::new(&url, "nope", None).unwrap();
        let err = e.embed(&["a"]).unwrap_err().to_string();
        assert!(
            err.contains("404") && err.contains("model not found"),
            "{err}"
        );
        assert!(err.contains("/v1/embeddings"), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn a_wrong_count_or_shape_is_refused() {
        for body in [
            r#"{"data":[{"embedding":[1,0]}]}"#,
            r#"{"data":[{"embedding":[1,0]},{"embedding":[1]}]}"#,
            r#"{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[0,1]}]}"#,
            r#"{"data":[{"embedding":[]},{"embedding":[]}]}"#,
            r#"{"vectors":[]}"#,
        ] {
            let (url, server) = serve("200 OK", body.into());
            let e = Endpoint::new(&url, "m", None).unwrap();
            assert!(e.embed(&["a", "b"]).is_err(), "{body}");
            server.join().unwrap();
        }
    }

    #[test]
    fn nothing_listening_is_a_clear_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = Endpoint::new(&format!("http://127.0.0.1:{port}/v1"), "m", None).unwrap();
        let err = e.embed(&["a"]).unwrap_err().to_string();
        assert!(err.contains("cannot reach it"), "{err}");
    }

    #[test]
    fn bad_settings_are_refused_up_front() {
        assert!(Endpoint::new("ftp://x", "m", None).is_err());
        assert!(Endpoint::new("http://x/v1", " ", None).is_err());
    }
}
