//! Bodies on the HTTP front: the request's, read whole and bounded (413 over the size limit, 503
//! over the budget of bytes buffered at once, 408 past the body timeout), and the response's —
//! a small buffered answer (errors, `/v1/models`) or an upstream response streamed through as
//! it arrives.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::CONTENT_LENGTH;
use hyper::{HeaderMap, Response};
use infergate_pipeline::rewrite::restore::RestoreBody;
use infergate_pipeline::{ApiError, BoxError};
use infergate_telemetry::connections::BodyRefusal;
use infergate_telemetry::Metrics;
use tokio::time::Instant;

use crate::proxy::stream::ProxyBody;

/// The request bytes the HTTP front holds at once, over every request
/// (`spec.bbr.maxBufferedBodyBytes`). Bytes are counted as they arrive, not as a
/// `Content-Length` declares them, so a client that trickles a body holds only what it sent.
#[derive(Debug)]
pub struct BodyBudget {
    held: AtomicU64,
    metrics: Arc<Metrics>,
}

/// One request's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: Arc<BodyBudget>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        let now = self.budget.held.fetch_sub(self.bytes, Relaxed) - self.bytes;
        self.budget.publish(now);
    }
}

impl BodyBudget {
    /// Nothing held yet.
    pub fn new(metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(BodyBudget {
            held: AtomicU64::new(0),
            metrics,
        })
    }

    fn publish(&self, now: u64) {
        self.metrics
            .connections
            .body_bytes_buffered
            .set(i64::try_from(now).unwrap_or(i64::MAX));
    }

    /// Adds `n` bytes to `held` if the total stays within `limit`.
    fn grow(&self, held: &mut Held, n: u64, limit: u64) -> bool {
        let grown = self.held.fetch_update(Relaxed, Relaxed, |h| {
            h.checked_add(n).filter(|t| *t <= limit)
        });
        match grown {
            Ok(before) => {
                held.bytes += n;
                self.publish(before + n);
                true
            }
            Err(_) => false,
        }
    }
}

/// What bounds a body read.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// `bbr.maxRequestBodyBytes` (413).
    pub max_bytes: u64,
    /// `bbr.maxBufferedBodyBytes` (503).
    pub budget_bytes: u64,
    /// `listen.connections.bodyTimeout`, from the request's arrival (408); `None`: off.
    pub timeout: Option<Duration>,
}

/// Reads the whole body, refusing with 413 as soon as it is known to be over the limit (at
/// once from `Content-Length`, else when the bytes read pass it), with 503 when holding it
/// would pass the budget, and with 408 when it has not arrived whole by the deadline. The
/// bytes stay counted against the budget as long as the returned [`Held`] lives.
pub async fn read_body(
    mut body: Incoming,
    headers: &HeaderMap,
    limits: BodyLimits,
    budget: &Arc<BodyBudget>,
    started: Instant,
) -> Result<(Bytes, Held), ApiError> {
    let refused = |reason: BodyRefusal| budget.metrics.connections.body_refused(reason);
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_bytes) {
        refused(BodyRefusal::TooLarge);
        return Err(ApiError::too_large(limits.max_bytes));
    }
    let mut held = Held {
        budget: Arc::clone(budget),
        bytes: 0,
    };
    let mut chunks: Vec<Bytes> = Vec::new();
    let deadline = limits.timeout.map(|t| started + t);
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, body.frame()).await {
                Ok(next) => next,
                Err(_) => {
                    refused(BodyRefusal::Timeout);
                    return Err(ApiError::body_timeout(limits.timeout.unwrap_or_default()));
                }
            },
            None => body.frame().await,
        };
        let Some(frame) = next else {
            break;
        };
        let frame = frame.map_err(ApiError::body_read)?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers: nothing to route on
        };
        let n = data.len() as u64;
        if held.bytes + n > limits.max_bytes {
            refused(BodyRefusal::TooLarge);
            return Err(ApiError::too_large(limits.max_bytes));
        }
        if !budget.grow(&mut held, n, limits.budget_bytes) {
            refused(BodyRefusal::Budget);
            return Err(ApiError::body_budget(limits.budget_bytes));
        }
        chunks.push(data);
    }
    let whole = match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => {
            let mut all = BytesMut::with_capacity(usize::try_from(held.bytes).unwrap_or(0));
            for c in &chunks {
                all.extend_from_slice(c);
            }
            all.freeze()
        }
    };
    Ok((whole, held))
}

/// The response that answers `e`.
pub fn error_response(e: ApiError) -> Response<ResponseBody> {
    e.into_response().map(ResponseBody::full)
}

/// A response body.
#[derive(Debug)]
pub enum ResponseBody {
    /// Everything at once.
    Full(Full<Bytes>),
    /// An upstream body, frame by frame.
    Proxy(Box<ProxyBody>),
    /// An upstream body of a rewritten request, its model renamed back on the way.
    Restored(Box<RestoreBody<ProxyBody>>),
}

impl ResponseBody {
    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Full::new(bytes.into()))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ResponseBody::Full(f) => Pin::new(f)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(|never| match never {}))),
            ResponseBody::Proxy(p) => Pin::new(p.as_mut()).poll_frame(cx),
            ResponseBody::Restored(r) => Pin::new(r.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(f) => f.is_end_stream(),
            ResponseBody::Proxy(p) => p.is_end_stream(),
            ResponseBody::Restored(r) => r.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(f) => f.size_hint(),
            ResponseBody::Proxy(p) => p.size_hint(),
            ResponseBody::Restored(r) => r.size_hint(),
        }
    }
}
