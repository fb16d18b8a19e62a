//! Proxy: send the request to the picked endpoint and stream the answer back; before the first
//! response byte, a failure moves on to the next fallback.
//!
//! Retryability is decided here, where the failure is understood:
//! - no answer (connect refused, reset, closed before the response head): the next fallback;
//! - `503` from the endpoint (overloaded, starting up, shutting down): the next fallback;
//! - any other answer, `429` included, goes to the client as it is — an endpoint's "no capacity"
//!   is not retried, and the gateway's own 429 never reaches this point.

pub mod client;
pub mod headers;
pub mod keepalive;
pub mod stream;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper::http::request::Parts;
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Response, StatusCode, Uri};
use infergate_picker::{Dispatch, Pick, RequestFeatures};
use tokio::time::Instant;

use crate::account::Accounting;
use crate::admission::FlowPermit;
use crate::api_error::ApiError;
use crate::body::ResponseBody;
use crate::metrics::{EndpointLabels, RetryLabels};
use crate::pool::Snapshot;
use crate::ratelimit::LimitTicket;
use crate::rewrite::response::RestoreBody;
use crate::route::Target;
use crate::usage::UsageTap;
use crate::Shared;
use keepalive::Lease;
use stream::ProxyBody;

/// One request on its way upstream.
#[derive(Debug)]
pub struct Forward<'a> {
    /// The gateway.
    pub shared: &'a Arc<Shared>,
    /// Where routing sent it.
    pub target: &'a Target,
    /// The pool snapshot the pick was made on.
    pub snap: &'a Snapshot,
    /// The picker's view of the request.
    pub features: &'a RequestFeatures,
    /// The client's request head.
    pub parts: &'a Parts,
    /// The body, forwarded as received (or with its model rewritten).
    pub body: Bytes,
    /// The model the request is sent to.
    pub model: &'a str,
    /// The model the client asked for, when a rewrite sent the request to another: the answer
    /// names it again.
    pub restore: Option<&'a str>,
    /// When the request arrived.
    pub started: Instant,
    /// When the route timeout ends, if the pool has one.
    pub deadline: Option<Instant>,
    /// Its flow-control permit, handed to the response's accounting.
    pub permit: Option<FlowPermit>,
    /// Its rate-limit reservation, settled by the response's accounting (refunded if no
    /// endpoint answers).
    pub limit: Option<LimitTicket>,
}

/// An error and its causes on one line (hyper's own message is only the outermost).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

impl Forward<'_> {
    /// Tries the primary, then each fallback, until one answers.
    pub async fn send(
        mut self,
        pick: Pick,
        first: Dispatch,
    ) -> Result<Response<ResponseBody>, ApiError> {
        // Without an answer the permit goes with this call, and flow control hears at once.
        let mut permit = self.permit.take();
        let mut limit = self.limit.take();
        let pool = &self.target.pool;
        let headers = headers::upstream(&self.parts.headers, self.model, &self.target.base_model);
        let path = self.parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut first = Some(first);
        let mut last = String::from("no endpoint was tried");
        let mut tried = 0;
        let candidates = std::iter::once(pick.primary).chain(pick.fallbacks.iter().copied());
        for id in candidates {
            let Some(address) = self.snap.pool.address(id) else {
                continue;
            };
            let dispatch = match first.take() {
                Some(d) => d,
                None => {
                    match pool.dispatch(self.snap, id, self.features, self.shared.clock.now()) {
                        Ok(d) => d,
                        Err(e) => {
                            last = e.to_string();
                            continue;
                        }
                    }
                }
            };
            tried += 1;
            self.shared
                .metrics
                .routing_decisions
                .get_or_create(&EndpointLabels {
                    pool: pool.name.clone(),
                    endpoint: address.to_owned(),
                })
                .inc();
            let req = match build_request(
                self.parts,
                headers.clone(),
                address,
                path,
                self.body.clone(),
                pool.h2c,
            ) {
                Ok(r) => r,
                Err(e) => {
                    last = format!("{address}: {e}");
                    continue;
                }
            };
            let dispatched = Instant::now();
            let sent = if pool.h2c {
                match self.shared.clients.h2c.request(req).await {
                    Ok(resp) => Ok((resp, None)),
                    Err(e) => Err(format!("{address}: {}", error_chain(&e))),
                }
            } else {
                match self.shared.clients.http1.send(address, req).await {
                    Ok((resp, lease)) => Ok((resp, Some(lease))),
                    // The error names the endpoint.
                    Err(e) => Err(error_chain(&e)),
                }
            };
            let reason = match sent {
                Ok((resp, lease)) if resp.status() != StatusCode::SERVICE_UNAVAILABLE => {
                    let held = (permit.take(), limit.take());
                    return Ok(self.respond(resp, lease, dispatch, address, dispatched, held));
                }
                Ok(_) => {
                    last = format!("{address} answered 503");
                    "status_503"
                }
                Err(e) => {
                    last = e;
                    "connect"
                }
            };
            tracing::debug!(pool = %pool.name, endpoint = %address, %last, "trying the next endpoint");
            self.shared
                .metrics
                .retries
                .get_or_create(&RetryLabels {
                    pool: pool.name.clone(),
                    endpoint: address.to_owned(),
                    reason: reason.to_owned(),
                })
                .inc();
        }
        Err(ApiError::upstream_unavailable(&pool.name, tried, last))
    }

    fn respond(
        &self,
        resp: Response<hyper::body::Incoming>,
        lease: Option<Lease>,
        dispatch: Dispatch,
        address: &str,
        dispatched: Instant,
        (permit, limit): (Option<FlowPermit>, Option<LimitTicket>),
    ) -> Response<ResponseBody> {
        let (mut parts, body) = resp.into_parts();
        headers::strip_hop_by_hop(&mut parts.headers);
        if let Ok(v) = HeaderValue::from_str(address) {
            parts.headers.insert(headers::DESTINATION_ENDPOINT, v);
        }
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let sse =
            content_type.is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        let restore = self
            .restore
            .and_then(|m| crate::rewrite::response::Restore::new(content_type, m));
        let mut account = Accounting::new(
            Arc::clone(&self.shared.metrics),
            Arc::clone(&self.target.pool),
            self.model,
            self.started,
            dispatched,
            dispatch.ticket,
            dispatch.guard,
            sse,
            UsageTap::for_content_type(content_type),
        );
        if let Some(p) = permit {
            account.hold(p);
        }
        if let Some(capture) = &self.shared.capture {
            account.capture(capture.pending(crate::capture::Request {
                features: self.features,
                asked_model: self.restore.unwrap_or(self.model),
                routed_model: self.model,
                endpoint: address,
                status: parts.status.as_u16(),
                arrived: self.started,
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
