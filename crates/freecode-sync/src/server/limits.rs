//! Admission control: at most [`super::ServerConfig::max_concurrent`] requests inside the
//! handlers at once (so uploads buffer at most that many bodies), a deadline on each request
//! (so a client that stalls mid-body cannot hold a slot, or the shutdown, forever), and a
//! shorter one on receiving its body (so a body trickled in is cut early).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use tokio::sync::Semaphore;
use tokio::time::Instant;

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

/// A request body that records when it has been read to its end.
struct WatchedBody {
    inner: Body,
    done: Arc<AtomicBool>,
}

impl HttpBody for WatchedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => false,
        };
        if ended {
            self.done.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
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
    let body = Body::new(WatchedBody {
        inner: body,
        done: Arc::clone(&done),
    });
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
