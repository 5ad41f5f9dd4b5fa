//! Admission control: at most [`crate::server::ServerConfig::max_concurrent`] requests inside the
//! handlers at once (so uploads buffer at most that many bodies), a deadline on each request
//! (so a client that stalls mid-body cannot hold a slot, or the shutdown, forever), and a
//! shorter one on receiving its body (so a body trickled in is cut early).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::HttpBody;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::server::error;
use freecode_http::OnEnd;

/// How long a request waits for a free slot before it is turned away with 503.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_secs(2);

/// The shared limits of one server.
#[derive(Debug)]
pub(crate) struct Limits {
    /// One permit per request allowed inside the handlers.
    pub permits: Arc<Semaphore>,
    /// Deadline for a request, from the moment it has a slot to its response.
    pub request_timeout: Duration,
    /// Deadline for the request's body to have been received, from the same moment.
    pub body_timeout: Duration,
}

impl Limits {
    pub(crate) fn new(
        max_concurrent: usize,
        request_timeout: Duration,
        body_timeout: Duration,
    ) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrent)),
            request_timeout,
            body_timeout,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A 408 whose connection is closed: the request's body was left half read.
fn timed_out(message: &'static str) -> Response {
    let mut response = error(StatusCode::REQUEST_TIMEOUT, message);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Middleware: waits up to [`QUEUE_WAIT`] for a slot (`/healthz` and `/limits` need none), else
/// `503 {"error": "server busy"}` with `Retry-After: 1`; then runs the request under
/// `request_timeout`, answering `408 {"error": "request timed out"}` past it, and answers
/// `408 {"error": "request body timed out"}` if its body has not been received in full
/// within `body_timeout` (either way the handler, and any body it was reading, is dropped,
/// and the connection is closed).
pub(crate) async fn limit(
    State(limits): State<Arc<Limits>>,
    request: Request,
    next: Next,
) -> Response {
    // `/healthz` and `/limits` touch no store and no body: they never wait for a slot.
    let _permit = if matches!(request.uri().path(), "/healthz" | "/limits") {
        None
    } else {
        match tokio::time::timeout(QUEUE_WAIT, Arc::clone(&limits.permits).acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            // Timed out, or (never, as nothing closes it) the semaphore was closed.
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(
                    wait_ms = millis(QUEUE_WAIT),
                    "no free request slot: answering 503"
                );
                let mut response = error(StatusCode::SERVICE_UNAVAILABLE, "server busy");
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return response;
            }
        }
    };
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let done = Arc::new(AtomicBool::new(body.is_end_stream()));
    let arrived = Arc::clone(&done);
    let body = OnEnd::wrap(body, move || arrived.store(true, Ordering::Release));
    let run = next.run(Request::from_parts(parts, body));
    let mut run = std::pin::pin!(run);
    let request_deadline = started + limits.request_timeout;
    let body_deadline = started + limits.body_timeout;
    tokio::select! {
        response = &mut run => return response,
        () = tokio::time::sleep_until(request_deadline) => {
            tracing::warn!(
                timeout_ms = millis(limits.request_timeout),
                "request timed out: answering 408"
            );
            return timed_out("request timed out");
        }
        () = tokio::time::sleep_until(body_deadline) => {}
    }
    if !done.load(Ordering::Acquire) {
        tracing::warn!(
            timeout_ms = millis(limits.body_timeout),
            "request body not received in time: answering 408"
        );
        return timed_out("request body timed out");
    }
    match tokio::time::timeout_at(request_deadline, run).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                timeout_ms = millis(limits.request_timeout),
                "request timed out: answering 408"
            );
            timed_out("request timed out")
        }
    }
}
