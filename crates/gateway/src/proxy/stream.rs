//! The upstream response body on its way to the client: each frame is passed on the moment it
//! arrives (no buffering, SSE intact), while accounting watches it go by.
//!
//! Once streaming has begun the status line is gone, so an upstream failure (reset, crash) or
//! the route timeout cannot become an error status. An SSE stream then ends with one error
//! event, `data: {"error": {...}}`, which OpenAI clients raise as an error; any other body is
//! aborted, so the client sees a truncated response rather than a hang.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Sleep;

use crate::proxy::keepalive::Lease;
use infergate_control::error_chain;
use infergate_pipeline::account::Accounting;
use infergate_pipeline::BoxError;

/// Why a stream was cut short.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StreamError(String);

/// A streamed upstream response body.
#[derive(Debug)]
pub struct ProxyBody {
    inner: Incoming,
    deadline: Option<Pin<Box<Sleep>>>,
    sse: bool,
    done: bool,
    endpoint: String,
    account: Accounting,
    /// The upstream connection, handed back for the next request once the body has ended.
    lease: Option<Lease>,
}

impl ProxyBody {
    /// Wraps `inner`; `deadline` is the route timeout's end, if the pool has one.
    pub fn new(
        inner: Incoming,
        deadline: Option<tokio::time::Instant>,
        sse: bool,
        endpoint: String,
        account: Accounting,
    ) -> Self {
        Self {
            inner,
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
            sse,
            done: false,
            endpoint,
            account,
            lease: None,
        }
    }

    /// Hands `lease`'s connection back as soon as the upstream body has ended (at once if it
    /// has no body), with no task of its own; a body that fails or is dropped before its end
    /// drops the lease, and the connection closes.
    pub fn returning(mut self, lease: Lease) -> Self {
        if self.inner.is_end_stream() {
            lease.release();
        } else {
            self.lease = Some(lease);
        }
        self
    }

    fn release(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release();
        }
    }

    fn fail(&mut self, reason: String) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        tracing::warn!(endpoint = %self.endpoint, %reason, "upstream stream ended early");
        self.done = true;
        // The connection is mid-answer: it cannot carry another request, so it closes now.
        self.lease = None;
        self.account.broke(&reason);
        self.account.finish();
        if self.sse {
            Poll::Ready(Some(Ok(Frame::data(error_event(&reason)))))
        } else {
            Poll::Ready(Some(Err(Box::new(StreamError(reason)))))
        }
    }
}

/// The SSE event that ends a broken stream.
pub fn error_event(reason: &str) -> Bytes {
    let v = serde_json::json!({"error": {
        "message": format!("the upstream stream ended early: {reason}"),
        "type": "upstream_error",
        "param": null,
        "code": "stream_interrupted",
    }});
    Bytes::from(format!("data: {v}\n\n"))
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.done = true;
                this.release();
                this.account.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.account.on_data(data);
                }
                // hyper stops polling a body that says it has ended, so the last frame is
                // where the connection goes back.
                if this.inner.is_end_stream() {
                    this.release();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => this.fail(error_chain(&e)),
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if expired {
                    this.fail("routeTimeout passed".to_owned())
                } else {
                    Poll::Pending
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.done {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}
