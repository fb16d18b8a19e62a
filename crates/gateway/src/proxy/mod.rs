//! Proxy: send the request to the picked endpoint and stream the answer back; before the first
//! response byte, a failure moves on to the next fallback.
//!
//! Retryability is decided here, where the failure is understood:
//! - no answer (connect refused, reset, closed before the first byte): the next fallback;
//! - `503` from the endpoint (overloaded, starting up, shutting down): the next fallback;
//! - no first byte within the attempt's `firstByteTimeout`: the next fallback (the head is held
//!   until the first byte, so the client has seen nothing);
//! - any other answer, `429` included, goes to the client as it is — an endpoint's "no capacity"
//!   is not retried, and the gateway's own 429 never reaches this point.
//!
//! When every endpoint the pick offered failed so, up to [`LAST_RESORT_ATTEMPTS`] of the pool's
//! others are tried before the client gets 503.

pub mod client;
pub mod failure;
pub mod headers;
pub mod keepalive;
pub mod resume;
pub mod stream;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper::http::request::Parts;
use hyper::http::uri::{Authority, Scheme};
use hyper::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use infergate_control::admission::FlowPermit;
use infergate_control::error_chain;
use infergate_control::limits::LimitTicket;
use infergate_control::pool::Snapshot;
use infergate_picker::{AttemptOutcome, Dispatch, EndpointId};
use infergate_pipeline::account::{Accounting, Served};
use infergate_pipeline::pick::{Picked, Why};
use infergate_pipeline::rewrite::restore::{Restore, RestoreBody};
use infergate_pipeline::trace::RequestTrace;
use infergate_pipeline::{ApiError, Prepared};
use infergate_telemetry::capture;
use infergate_telemetry::usage::UsageTap;
use infergate_trace::{Span, SpanContext};
use tokio::time::Instant;

use crate::body::ResponseBody;
use crate::Front;
use failure::Failure;
use keepalive::Lease;
use resume::{Resume, ResumeContext};
use stream::ProxyBody;

/// Endpoints outside the pick tried, at most, once every endpoint it offered failed before
/// answering.
const LAST_RESORT_ATTEMPTS: usize = 2;

/// One request on its way upstream.
#[derive(Debug)]
pub struct Forward<'a> {
    /// The front.
    pub front: &'a Arc<Front>,
    /// The request as the pipeline prepared it: target, features, model, the model to restore.
    pub prepared: &'a mut Prepared,
    /// The client's request head.
    pub parts: &'a Parts,
    /// The body, forwarded as received (or with its model rewritten).
    pub body: Bytes,
    /// When the request arrived.
    pub started: Instant,
    /// When the route timeout ends, if the pool has one.
    pub deadline: Option<Instant>,
    /// Its flow-control permit, handed to the response's accounting.
    pub permit: Option<FlowPermit>,
    /// Its rate-limit reservation, settled by the response's accounting (refunded if no
    /// endpoint answers).
    pub limit: Option<LimitTicket>,
    /// Why the endpoints were picked, when picks are explained to the client.
    pub why: Option<Why>,
    /// The request's spans: each attempt gets one, and the answer ends the request's.
    pub trace: &'a mut RequestTrace,
    /// Set to each endpoint as it is tried, so that a request that fails or times out is
    /// counted against the endpoint it concerns (the request record's `endpoint`).
    pub tried_endpoint: &'a mut String,
}

/// The endpoint that answered, as [`Forward::respond`] turns its answer into the client's.
struct Answer<'a> {
    lease: Option<Lease>,
    dispatch: Dispatch,
    endpoint: EndpointId,
    address: &'a str,
    /// The headers the request went upstream with (a continuation goes with them too).
    headers: HeaderMap,
    dispatched: Instant,
    /// The body's first frame, when it was awaited before answering.
    first: Option<Frame<Bytes>>,
    /// Why it was picked, when picks are explained.
    why: Option<&'a Why>,
    /// The attempt's span.
    span: Span,
}

/// What an attempt that produced an answer hands back.
struct Arrived {
    resp: Response<Incoming>,
    /// The body's first frame, when it was awaited.
    first: Option<Frame<Bytes>>,
    lease: Option<Lease>,
    dispatch: Dispatch,
    dispatched: Instant,
}

impl Forward<'_> {
    /// Tries the primary, then each fallback, until one answers.
    pub async fn send(mut self, picked: Picked) -> Result<Response<ResponseBody>, ApiError> {
        // Without an answer the permit goes with this call, and flow control hears at once.
        let mut permit = self.permit.take();
        let mut limit = self.limit.take();
        let why = self.why.take();
        let Picked {
            snap,
            pick,
            dispatch: first,
            ..
        } = picked;
        let target = &self.prepared.target;
        let pool = &target.pool;
        let headers = headers::upstream(
            &self.parts.headers,
            &self.prepared.model,
            &target.base_model,
        );
        let path = self.parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut first = Some(first);
        let mut last: Option<Failure> = None;
        let mut tried = 0;
        // When every endpoint the pick offered failed before answering, a few of the pool's
        // others (those its filters or outlier detection set aside) are tried before the client
        // gets 503: nothing has been sent yet, and one set aside a while ago may be back.
        let offered = 1 + pick.fallbacks.len();
        let candidates = pick
            .then_the_rest(&snap.pool)
            .take(offered + LAST_RESORT_ATTEMPTS);
        for id in candidates {
            let Some(address) = snap.pool.address(id) else {
                continue;
            };
            address.clone_into(self.tried_endpoint);
            let mut span = self.trace.upstream(&self.prepared.model, address);
            let mut watch = AttemptWatch {
                front: Arc::clone(self.front),
                pool: Arc::clone(pool),
                endpoint: id,
                deadline: self.deadline,
                settled: false,
            };
            let attempt = self
                .attempt(
                    (&snap, id, address),
                    first.take(),
                    &headers,
                    path,
                    span.context(),
                )
                .await;
            let failure = match attempt {
                Ok(Arrived {
                    resp,
                    first,
                    lease,
                    dispatch,
                    dispatched,
                }) => {
                    watch.settle(if resp.status().is_server_error() {
                        AttemptOutcome::Failed
                    } else {
                        AttemptOutcome::Answered
                    });
                    span.set("http.response.status_code", resp.status().as_u16());
                    let held = (permit.take(), limit.take());
                    let answer = Answer {
                        lease,
                        dispatch,
                        endpoint: id,
                        address,
                        headers,
                        dispatched,
                        first,
                        why: why.as_ref(),
                        span,
                    };
                    return Ok(self.respond(resp, answer, held));
                }
                Err(failure) => {
                    if failure.endpoint_failed() {
                        watch.settle(AttemptOutcome::Failed);
                    } else {
                        watch.settled = true;
                    }
                    failure
                }
            };
            if let Failure::Unavailable { .. } = failure {
                span.set("http.response.status_code", 503u16);
            }
            span.set("error.type", failure.kind());
            span.fail(failure.to_string());
            span.end();
            if failure.tried() {
                tried += 1;
            }
            if let Some(reason) = failure.reason() {
                tracing::debug!(pool = %pool.name, endpoint = %address, failure = %failure, "trying the next endpoint");
                pool.count_retry(id, reason);
            }
            let retryable = failure.retryable();
            last = Some(failure);
            if !retryable {
                break;
            }
        }
        if let Some(Failure::FirstByteTimeout { after, .. }) = last {
            return Err(ApiError::first_byte_timeout(&pool.name, tried, after));
        }
        let last = last.map_or_else(|| "no endpoint was tried".to_owned(), |f| f.to_string());
        Err(ApiError::upstream_unavailable(&pool.name, tried, last))
    }

    /// One attempt at `address`: dispatched (the primary already is), sent (naming the
    /// attempt's span as its `traceparent` when traced), and answered with anything but 503.
    async fn attempt(
        &self,
        (snap, id, address): (&Snapshot, EndpointId, &str),
        primary: Option<Dispatch>,
        headers: &hyper::HeaderMap,
        path: &str,
        span: Option<&SpanContext>,
    ) -> Result<Arrived, Failure> {
        let pool = &self.prepared.target.pool;
        let plane = &self.front.plane;
        let dispatch = match primary {
            Some(d) => d,
            None => pool
                .dispatch(snap, id, &self.prepared.features, plane.clock().now())
                .map_err(Failure::Dispatch)?,
        };
        pool.count_sent(id);
        let mut headers = headers.clone();
        if let Some(span) = span {
            span.inject(&mut headers);
        }
        let req = build_request(
            &self.parts.method,
            headers,
            address,
            path,
            self.body.clone(),
            pool.h2c,
        )
        .map_err(|cause| Failure::Request {
            address: address.to_owned(),
            cause,
        })?;
        let dispatched = Instant::now();
        let streamed = !self.prepared.features.buffered_response;
        let timeout = pool
            .first_byte_timeout
            .for_attempt(dispatch.predicted_ttft, streamed);
        // The first byte is awaited here, before anything reaches the client, whenever a
        // timeout could end the wait: an attempt that runs out is retried elsewhere, and the
        // route timeout covers the wait for the first byte (not the whole answer).
        let wait_first = timeout.is_some() || self.deadline.is_some();
        let answer = self.exchange(req, address, wait_first);
        let (resp, first, lease) = match timeout {
            None => answer.await?,
            Some(after) => tokio::time::timeout(after, answer).await.map_err(|_| {
                Failure::FirstByteTimeout {
                    address: address.to_owned(),
                    after,
                }
            })??,
        };
        Ok(Arrived {
            resp,
            first,
            lease,
            dispatch,
            dispatched,
        })
    }

    /// Sends `req` to `address` and reads the answer's head, then, with `wait_first`, its first
    /// frame (an empty body has none). A 503 is a failure.
    async fn exchange(
        &self,
        req: Request<Full<Bytes>>,
        address: &str,
        wait_first: bool,
    ) -> Result<(Response<Incoming>, Option<Frame<Bytes>>, Option<Lease>), Failure> {
        let pool = &self.prepared.target.pool;
        let (resp, lease) = send_upstream(self.front, pool.h2c, req, address).await?;
        if !wait_first || resp.body().is_end_stream() {
            return Ok((resp, None, lease));
        }
        let (parts, mut body) = resp.into_parts();
        let first = match body.frame().await {
            None => None,
            Some(Ok(frame)) => Some(frame),
            Some(Err(e)) => {
                return Err(Failure::Broken {
                    address: address.to_owned(),
                    cause: error_chain(&e),
                })
            }
        };
        Ok((Response::from_parts(parts, body), first, lease))
    }

    fn respond(
        &mut self,
        resp: Response<hyper::body::Incoming>,
        answer: Answer<'_>,
        (permit, limit): (Option<FlowPermit>, Option<LimitTicket>),
    ) -> Response<ResponseBody> {
        let Answer {
            lease,
            dispatch,
            endpoint,
            address,
            headers: upstream_headers,
            dispatched,
            first,
            why,
            span,
        } = answer;
        let (mut parts, body) = resp.into_parts();
        headers::strip_hop_by_hop(&mut parts.headers);
        if let Ok(v) = HeaderValue::from_str(address) {
            parts.headers.insert(headers::DESTINATION_ENDPOINT, v);
        }
        if let Some(why) = why {
            headers::explain(&mut parts.headers, why);
        }
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let sse =
            content_type.is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        let prepared = &*self.prepared;
        let model = prepared.model.as_str();
        let restore = prepared
            .restore
            .as_deref()
            .and_then(|m| Restore::new(content_type, m));
        let plane = &self.front.plane;
        let mut account = Accounting::new(Served {
            metrics: Arc::clone(plane.metrics()),
            pool: Arc::clone(&prepared.target.pool),
            model,
            asked_model: prepared.restore.as_deref().unwrap_or(model),
            priority: prepared.features.priority,
            tenant: prepared.features.tenant.as_deref(),
            started: self.started,
            dispatched,
            dispatch,
            streaming: sse,
            usage: UsageTap::for_content_type(content_type),
            status: parts.status.as_u16(),
        });
        if let Some(p) = permit {
            account.hold(p);
        }
        let root = std::mem::take(&mut *self.trace).answered(parts.status.as_u16());
        account.trace(root, span);
        if let Some(capture) = plane.capture() {
            account.capture(capture.pending(capture::Request {
                features: &prepared.features,
                asked_model: prepared.restore.as_deref().unwrap_or(model),
                routed_model: model,
                endpoint: address,
                status: parts.status.as_u16(),
                arrived: self.started,
                pick: why.map(|w| w.explanation.as_str()),
            }));
        }
        if let Some(t) = limit {
            let failed = parts.status.is_client_error() || parts.status.is_server_error();
            account.hold_limit(t, failed);
        }
        let pool = &self.prepared.target.pool;
        let path = self.parts.uri.path();
        let resumable = (parts.status == StatusCode::OK && prepared.stream)
            .then(|| ResumeContext::resumable(pool, path, sse))
            .flatten();
        if resumable.is_some() {
            // A continuation changes the body's length.
            parts.headers.remove(CONTENT_LENGTH);
        }
        let idle = pool.stream_idle_timeout;
        let mut body = ProxyBody::new(body, first, idle, sse, address.to_owned(), account);
        if let Some(api) = resumable {
            let ctx = ResumeContext {
                front: Arc::clone(self.front),
                pool: Arc::clone(pool),
                // Nothing reads the request's features after its answer began.
                features: std::mem::take(&mut self.prepared.features),
                method: self.parts.method.clone(),
                path: self
                    .parts
                    .uri
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_owned(),
                headers: upstream_headers,
                body: self.body.clone(),
            };
            body = body.resuming(Resume::new(ctx, api, endpoint, address.to_owned()));
        }
        if let Some(lease) = lease {
            body = body.returning(lease);
        }
        let body = match restore {
            None => ResponseBody::Proxy(Box::new(body)),
            Some(r) => {
                // The renamed body's length differs from the upstream's.
                parts.headers.remove(CONTENT_LENGTH);
                ResponseBody::Restored(Box::new(RestoreBody::new(body, r)))
            }
        };
        Response::from_parts(parts, body)
    }
}

/// One attempt's outcome for outlier detection, settled when the attempt returns. An attempt
/// dropped unsettled once the route deadline has passed is the gateway's timeout waiting for
/// the endpoint's answer: a failure. One dropped before it (the client went away) counts as
/// nothing.
struct AttemptWatch {
    front: Arc<Front>,
    pool: Arc<infergate_control::pool::PoolRuntime>,
    endpoint: EndpointId,
    deadline: Option<Instant>,
    settled: bool,
}

impl AttemptWatch {
    fn settle(&mut self, outcome: AttemptOutcome) {
        self.settled = true;
        let now = self.front.plane.clock().now();
        self.pool.record_outcome(self.endpoint, outcome, now);
    }
}

impl Drop for AttemptWatch {
    fn drop(&mut self) {
        if !self.settled && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.settle(AttemptOutcome::Failed);
        }
    }
}

/// Sends `req` to `address` (over h2c or a kept-alive HTTP/1.1 connection) and reads the
/// answer's head. A 503 is a failure.
pub(crate) async fn send_upstream(
    front: &Front,
    h2c: bool,
    req: Request<Full<Bytes>>,
    address: &str,
) -> Result<(Response<Incoming>, Option<Lease>), Failure> {
    let (resp, lease) = if h2c {
        let resp = front
            .clients
            .h2c
            .request(req)
            .await
            .map_err(|e| Failure::H2c {
                address: address.to_owned(),
                cause: error_chain(&e),
            })?;
        (resp, None)
    } else {
        let (resp, lease) = front
            .clients
            .http1
            .send(address, req)
            .await
            .map_err(Failure::Http1)?;
        (resp, Some(lease))
    };
    if resp.status() == StatusCode::SERVICE_UNAVAILABLE {
        return Err(Failure::Unavailable {
            address: address.to_owned(),
        });
    }
    Ok((resp, lease))
}

/// The upstream request. HTTP/1.1 goes out as [`keepalive::Connections`] sends it: the path
/// alone (origin form) with `Host` naming the endpoint; h2c with the full URI hyper-util's
/// client routes by.
pub(crate) fn build_request(
    method: &Method,
    mut headers: HeaderMap,
    address: &str,
    path: &str,
    body: Bytes,
    h2c: bool,
) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
    let authority = Authority::try_from(address)?;
    let uri = if h2c {
        Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(authority)
            .path_and_query(path)
            .build()?
    } else {
        headers.insert(HOST, HeaderValue::from_str(authority.as_str())?);
        Uri::builder().path_and_query(path).build()?
    };
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}
