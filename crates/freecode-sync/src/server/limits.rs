//! Admission control: at most [`super::ServerConfig::max_concurrent`] requests inside the
//! handlers at once (so uploads buffer at most that many bodies), and a deadline on each
//! request (so a client that stalls mid-body cannot hold a slot, or the shutdown, forever).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Semaphore;

use super::handlers::error;

/// How long a request waits for a free slot before it is turned away with 503.
pub(crate) const QUEUE_WAIT: Duration = Duration::from_secs(2);

/// The shared limits of one server.
#[derive(Debug)]
pub(crate) struct Limits {
    /// One permit per request allowed inside the handlers.
    pub permits: Arc<Semaphore>,
    /// Deadline for a request, from the moment it has a slot to its response.
    pub request_timeout: Duration,
}

impl Limits {
    pub(crate) fn new(max_concurrent: usize, request_timeout: Duration) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrent)),
            request_timeout,
        }
    }
}

/// Middleware: waits up to [`QUEUE_WAIT`] for a slot (`/healthz` needs none), else
/// `503 {"error": "server busy"}` with `Retry-After: 1`; then runs the request under
/// `request_timeout`, answering `408 {"error": "request timed out"}` past it (the handler,
/// and any body it was reading, is dropped).
pub(crate) async fn limit(
    State(limits): State<Arc<Limits>>,
    request: Request,
    next: Next,
) -> Response {
    let _permit = if request.uri().path() == "/healthz" {
        None
    } else {
        match tokio::time::timeout(QUEUE_WAIT, Arc::clone(&limits.permits).acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            // Timed out, or (never, as nothing closes it) the semaphore was closed.
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(
                    wait_ms = QUEUE_WAIT.as_millis() as u64,
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
    match tokio::time::timeout(limits.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                timeout_ms = u64::try_from(limits.request_timeout.as_millis()).unwrap_or(u64::MAX),
                "request timed out: answering 408"
            );
            let mut response = error(StatusCode::REQUEST_TIMEOUT, "request timed out");
            // The request's body was left half read: the connection cannot be reused.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}
