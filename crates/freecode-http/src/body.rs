//! The one body wrapper of the servers: a body that says when it has been read to its end.
//!
//! Used both ways: a request body records that it arrived in full (the share server's body
//! deadline), a response body keeps its connection in flight until it is written
//! ([`crate::conn`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};

/// `inner`, calling `on_end` once when its last frame has been polled (the end of the stream,
/// or a frame after which it says it has ended). Dropped before that, `on_end` is dropped
/// without being called.
pub struct OnEnd<F: FnOnce()> {
    inner: Body,
    on_end: Option<F>,
}

impl<F: FnOnce() + Send + Unpin + 'static> OnEnd<F> {
    /// `inner` as an axum [`Body`] that calls `on_end` at its end.
    pub fn wrap(inner: Body, on_end: F) -> Body {
        Body::new(Self {
            inner,
            on_end: Some(on_end),
        })
    }
}

impl<F: FnOnce() + Unpin> HttpBody for OnEnd<F> {
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
        if ended && let Some(on_end) = self.on_end.take() {
            on_end();
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
