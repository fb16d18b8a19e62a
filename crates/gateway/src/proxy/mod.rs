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
use infergate_control::admission::FlowPermit;
use infergate_control::error_chain;
use infergate_control::limits::LimitTicket;
use infergate_picker::Dispatch;
use infergate_pipeline::account::{Accounting, Served};
use infergate_pipeline::pick::{count_sent, Picked};
use infergate_pipeline::rewrite::restore::{Restore, RestoreBody};
use infergate_pipeline::{ApiError, Prepared};
use infergate_telemetry::capture;
use infergate_telemetry::metrics::RetryLabels;
use infergate_telemetry::usage::UsageTap;
use tokio::time::Instant;

use crate::body::ResponseBody;
use crate::Front;
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
}

impl Forward<'_> {
    /// Tries the primary, then each fallback, until one answers.
    pub async fn send(mut self, picked: Picked) -> Result<Response<ResponseBody>, ApiError> {
        // Without an answer the permit goes with this call, and flow control hears at once.
        let mut permit = self.permit.take();
        let mut limit = self.limit.take();
        let Picked {
            snap,
            pick,
            dispatch: first,
        } = picked;
        let target = &self.prepared.target;
        let pool = &target.pool;
        let plane = &self.front.plane;
        let headers = headers::upstream(
            &self.parts.headers,
            &self.prepared.model,
            &target.base_model,
        );
        let path = self.parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut first = Some(first);
        let mut last = String::from("no endpoint was tried");
        let mut tried = 0;
        let candidates = std::iter::once(pick.primary).chain(pick.fallbacks.iter().copied());
        for id in candidates {
            let Some(address) = snap.pool.address(id) else {
                continue;
            };
            let dispatch = match first.take() {
                Some(d) => d,
                None => {
                    match pool.dispatch(&snap, id, &self.prepared.features, plane.clock().now()) {
                        Ok(d) => d,
                        Err(e) => {
                            last = e.to_string();
                            continue;
                        }
                    }
                }
            };
            tried += 1;
            count_sent(plane.metrics(), &pool.name, address);
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
                match self.front.clients.h2c.request(req).await {
                    Ok(resp) => Ok((resp, None)),
                    Err(e) => Err(format!("{address}: {}", error_chain(&e))),
                }
            } else {
                match self.front.clients.http1.send(address, req).await {
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
            plane
                .metrics()
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
            started: self.started,
            dispatched,
            dispatch,
            streaming: sse,
            usage: UsageTap::for_content_type(content_type),
        });
        if let Some(p) = permit {
            account.hold(p);
        }
        if let Some(capture) = plane.capture() {
            account.capture(capture.pending(capture::Request {
                features: &prepared.features,
                asked_model: prepared.restore.as_deref().unwrap_or(model),
                routed_model: model,
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
