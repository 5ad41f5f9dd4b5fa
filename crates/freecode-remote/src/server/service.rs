//! The endpoints about the service itself, and its log: `GET /healthz` (does the store
//! answer), `GET /limits` (the largest body taken), and one log line per request that never
//! holds a whole share code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::HttpBody as _;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::App;
use super::redact::redacted;

/// How long the health check waits for the store.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET /limits`: `{"maxBodyBytes": N}`, the largest upload taken, so that a client can refuse
/// a larger one before building or sending it.
pub(crate) async fn limits(State(app): State<Arc<App>>) -> Response {
    (
        StatusCode::OK,
        Json(json!({ "maxBodyBytes": app.max_body as u64 })),
    )
        .into_response()
}

/// `GET /healthz`.
pub(crate) async fn health(State(app): State<Arc<App>>) -> Response {
    let status = match tokio::time::timeout(HEALTH_TIMEOUT, app.store.health()).await {
        Ok(Ok(())) => return (StatusCode::OK, Json(json!({ "status": "ok" }))).into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %redacted(&e), "health: store unavailable");
            "store unavailable"
        }
        Err(_) => {
            tracing::warn!(
                timeout_ms = HEALTH_TIMEOUT.as_millis() as u64,
                "health: store timed out"
            );
            "store timed out"
        }
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "status": "unavailable", "error": status })),
    )
        .into_response()
}

/// What a path is, for logs: a kind, and for share paths the code's first 6 characters (never
/// the whole code: it is the capability to read the share).
fn classify(path: &str) -> (&'static str, Option<&str>) {
    match path {
        "/upload" => ("upload", None),
        "/healthz" => ("health", None),
        "/limits" => ("limits", None),
        _ => match path.strip_prefix('/') {
            Some(seg) if crate::blob::is_valid_code(seg) => ("share", Some(&seg[..6])),
            _ => ("other", None),
        },
    }
}

/// Middleware: one `info` line per request with method, path kind, code prefix, status,
/// bytes in and out, and latency.
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let (kind, code) = classify(request.uri().path());
    let code = code.map(str::to_owned);
    let bytes_in = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let response = next.run(request).await;
    let bytes_out = response.body().size_hint().exact().unwrap_or(0);
    tracing::info!(
        method = %method,
        kind,
        code = code.as_deref().unwrap_or("-"),
        status = response.status().as_u16(),
        bytes_in,
        bytes_out,
        latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "request"
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_never_keeps_a_whole_code() {
        assert_eq!(classify("/upload"), ("upload", None));
        assert_eq!(classify("/healthz"), ("health", None));
        assert_eq!(
            classify("/0123456789abcdef0123456789abcdef"),
            ("share", Some("012345"))
        );
        assert_eq!(classify("/nope"), ("other", None));
        assert_eq!(classify("/a/b"), ("other", None));
    }
}
