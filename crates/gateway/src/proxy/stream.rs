//! The upstream response body on its way to the client: each frame is passed on the moment it
//! arrives (no buffering, SSE intact), while accounting watches it go by.
//!
//! Once streaming has begun the status line is gone, so an upstream failure (reset, crash) or
//! a silence past `streamIdleTimeout` cannot become an error status. An SSE stream then ends
//! with one error event, `data: {"error": {...}}`, which OpenAI clients raise as an error; any
//! other body is aborted, so the client sees a truncated response rather than a hang.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

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
    /// The first frame, when the proxy read it before answering; passed on first.
    first: Option<Frame<Bytes>>,
    /// The pool's `streamIdleTimeout`.
    idle_after: Option<Duration>,
    /// Its timer: made when the first byte goes (the wait for that is the route and
    /// first-byte timeouts' business) and re-armed by every frame after.
    idle: Option<Pin<Box<Sleep>>>,
    sse: bool,
    done: bool,
    endpoint: String,
    account: Accounting,
    /// The upstream connection, handed back for the next request once the body has ended.
    lease: Option<Lease>,
}

impl ProxyBody {
    /// Wraps `inner`, whose `first` frame was already read (if it was); `idle` is the pool's
    /// `streamIdleTimeout`.
    pub fn new(
        inner: Incoming,
        first: Option<Frame<Bytes>>,
        idle: Option<Duration>,
        sse: bool,
        endpoint: String,
        account: Accounting,
    ) -> Self {
        Self {
            inner,
            first,
            idle_after: idle,
            idle: None,
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
            // The first frame, if it is still to go, is already read: the connection is free.
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

    /// Accounts for a frame on its way to the client and re-arms the idle timer.
    fn passed(&mut self, frame: Frame<Bytes>) -> Frame<Bytes> {
        if let Some(data) = frame.data_ref() {
            self.account.on_data(data);
            if let (false, Some(after)) = (data.is_empty(), self.idle_after) {
                let at = tokio::time::Instant::now() + after;
                match self.idle.as_mut() {
                    Some(sleep) => sleep.as_mut().reset(at),
                    None => self.idle = Some(Box::pin(tokio::time::sleep_until(at))),
                }
            }
        }
        frame
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
        if let Some(frame) = this.first.take() {
            return Poll::Ready(Some(Ok(this.passed(frame))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.done = true;
                this.release();
                this.account.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                // hyper stops polling a body that says it has ended, so the last frame is
                // where the connection goes back.
                if this.inner.is_end_stream() {
                    this.release();
                }
                Poll::Ready(Some(Ok(this.passed(frame))))
            }
            Poll::Ready(Some(Err(e))) => this.fail(error_chain(&e)),
            Poll::Pending => {
                let expired = this
                    .idle
                    .as_mut()
                    .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
                match (expired, this.idle_after) {
                    (true, Some(after)) => {
                        this.fail(format!("no chunk for streamIdleTimeout {after:?}"))
                    }
                    _ => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.first.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        match &self.first {
            _ if self.done => SizeHint::with_exact(0),
            Some(f) => {
                let first = f.data_ref().map_or(0, |d| d.len() as u64);
                let rest = self.inner.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(first));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(first));
                }
                hint
            }
            None => self.inner.size_hint(),
        }
    }
}
