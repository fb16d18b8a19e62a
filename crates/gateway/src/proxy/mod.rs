//! Proxy: send the request to the picked endpoint and stream the answer back; before the first
//! response byte, a failure moves on to the next fallback.
//!
//! Retryability is decided here, where the failure is understood:
//! - no answer (connect refused, reset, closed before the response head): the next fallback;
//! - `503` from the endpoint (overloaded, starting up, shutting down): the next fallback;
//! - any other answer, `429` included, goes to the client as it is — an endpoint's "no capacity"
//!   is not retried, and the gateway's own 429 never reaches this point.

pub mod client;
pub mod failure;
pub mod headers;
pub mod keepalive;
pub mod stream;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper::http::request::Parts;
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Response, StatusCode, Uri};
use infergate_control::admission::FlowPermit;
use infergate_control::error_chain;
use infergate_control::limits::LimitTicket;
use infergate_control::pool::Snapshot;
use infergate_picker::{Dispatch, EndpointId};
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
use stream::ProxyBody;

/// One request on its way upstream.
#[derive(Debug)]
pub struct Forward<'a> {
    /// The front.
    pub front: &'a Arc<Front>,
    /// The request as the pipeline prepared it: target, features, model, the model to restore.
    pub prepared: &'a Prepared,
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
}

/// The endpoint that answered, as [`Forward::respond`] turns its answer into the client's.
struct Answer<'a> {
    lease: Option<Lease>,
    dispatch: Dispatch,
    address: &'a str,
    dispatched: Instant,
    /// Why it was picked, when picks are explained.
    why: Option<&'a Why>,
    /// The attempt's span.
    span: Span,
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
        let candidates = std::iter::once(pick.primary).chain(pick.fallbacks.iter().copied());
        for id in candidates {
            let Some(address) = snap.pool.address(id) else {
                continue;
            };
            let mut span = self.trace.upstream(&self.prepared.model, address);
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
                Ok((resp, lease, dispatch, dispatched)) => {
                    span.set("http.response.status_code", resp.status().as_u16());
                    let held = (permit.take(), limit.take());
                    let answer = Answer {
                        lease,
                        dispatch,
                        address,
                        dispatched,
                        why: why.as_ref(),
                        span,
                    };
                    return Ok(self.respond(resp, answer, held));
                }
                Err(failure) => failure,
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
    ) -> Result<(Response<Incoming>, Option<Lease>, Dispatch, Instant), Failure> {
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
            self.parts,
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
        let (resp, lease) = if pool.h2c {
            let resp = self
                .front
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
            let (resp, lease) = self
                .front
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
        Ok((resp, lease, dispatch, dispatched))
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
            address,
            dispatched,
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
        let prepared = self.prepared;
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
        let mut body = ProxyBody::new(body, self.deadline, sse, address.to_owned(), account);
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

/// The upstream request. HTTP/1.1 goes out as [`keepalive::Connections`] sends it: the path
/// alone (origin form) with `Host` naming the endpoint; h2c with the full URI hyper-util's
/// client routes by.
fn build_request(
    client: &Parts,
    mut headers: hyper::HeaderMap,
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
    *req.method_mut() = client.method.clone();
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}
