//! One request through the HTTP front: auth, the body read, then the shared pipeline (parse →
//! rewrite → route → identity → features → limit → admit → pick), then the proxy (→ account,
//! in the response body). Every failure leaves as an OpenAI-shaped error, and every inference
//! request is counted once, with the status the client got. A traced request records a span
//! per step ([`infergate_pipeline::trace`]), ended with the response body.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, EXPECT, HOST};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, Version};
use tokio::time::Instant;

use infergate_control::admission::Admitted;
use infergate_control::routes::Routes;
use infergate_pipeline::trace::{fail, RequestTrace};
use infergate_pipeline::{admit, auth, limit, prepare, ApiError, Inbound};
use infergate_telemetry::metrics::RequestRecord;

use crate::body::{self, error_response, ResponseBody};
use crate::proxy::{headers::DESTINATION_ENDPOINT, Forward};
use crate::Front;

/// Routes a request to its handler. With `spec.auth`, every `/v1` route needs a valid token
/// (inference requests are checked on their own way through, where they are counted).
pub async fn handle(front: Arc<Front>, req: Request<Incoming>) -> Response<ResponseBody> {
    if let Err(e) = strict_http(&req) {
        let mut resp = error_response(e);
        // Whatever followed the refused request on this connection is not to be trusted.
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return resp;
    }
    let path = req.uri().path();
    let inference_route = matches!(
        path,
        "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings"
    );
    if inference_route && req.method() == Method::POST {
        return inference(front, req).await;
    }
    // An anonymous client learns nothing, not even which models or routes exist.
    if path == "/v1" || path.starts_with("/v1/") {
        let (mut parts, _) = req.into_parts();
        if let Err(e) = auth::authenticate(front.plane.auth(), &mut parts.headers).await {
            return error_response(e);
        }
        return open_route(&front, &parts);
    }
    error_response(ApiError::no_route(path))
}

/// What HTTP itself requires of a request before anything reads it: exactly one `Host` on
/// HTTP/1.1 (RFC 9112, section 3.2: a proxy that picks one of two can be told a different
/// story than the one behind it), and no expectation but `100-continue` (RFC 9110, section
/// 10.1.1), which hyper meets by sending `100 Continue` when the body is first read — after
/// auth, so a refused client is never invited to send its body. (A body framed by both
/// `Content-Length` and `Transfer-Encoding` never gets here as such: hyper reads it by the
/// latter, drops the former and closes the connection after the answer, as RFC 9112, section
/// 6.3, requires.)
fn strict_http(req: &Request<Incoming>) -> Result<(), ApiError> {
    if req.version() == Version::HTTP_11 {
        let hosts = req.headers().get_all(HOST).iter().count();
        if hosts != 1 {
            return Err(ApiError::bad_host(hosts));
        }
    }
    let mut expect = req.headers().get_all(EXPECT).iter();
    match (expect.next(), expect.next()) {
        (None, _) => Ok(()),
        (Some(v), None) if v.as_bytes().eq_ignore_ascii_case(b"100-continue") => Ok(()),
        _ => Err(ApiError::expectation_failed()),
    }
}

/// The `/v1` routes other than a POST to an inference route.
fn open_route(front: &Front, parts: &Parts) -> Response<ResponseBody> {
    let path = parts.uri.path();
    match path {
        "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings" => {
            error_response(ApiError::method_not_allowed(path))
        }
        "/v1/models" => {
            if parts.method == Method::GET {
                let mut resp = Response::new(ResponseBody::full(front.plane.routes().models()));
                resp.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                resp
            } else {
                error_response(ApiError::method_not_allowed(path))
            }
        }
        _ => error_response(ApiError::no_route(path)),
    }
}

async fn inference(front: Arc<Front>, req: Request<Incoming>) -> Response<ResponseBody> {
    let started = Instant::now();
    // One config for the whole request, even if a reload lands meanwhile.
    let routes = front.plane.routes();
    let (mut parts, body) = req.into_parts();
    let mut trace = RequestTrace::start(
        front.plane.tracer(),
        parts.method.as_str(),
        parts.uri.path(),
        &parts.headers,
    );
    let mut record = RequestRecord::default();
    let served = serve(
        &front,
        &routes,
        &mut parts,
        body,
        (started, &mut record, &mut trace),
    );
    let resp = match served.await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "request refused");
            trace.refused(&e);
            error_response(e)
        }
    };
    record.status = resp.status().as_u16();
    if let Some(ep) = resp
        .headers()
        .get(DESTINATION_ENDPOINT)
        .and_then(|v| v.to_str().ok())
    {
        ep.clone_into(&mut record.endpoint);
    }
    front.plane.count_request(&record);
    resp
}

async fn serve(
    front: &Arc<Front>,
    routes: &Arc<Routes>,
    parts: &mut Parts,
    body: Incoming,
    (started, record, trace): (Instant, &mut RequestRecord, &mut RequestTrace),
) -> Result<Response<ResponseBody>, ApiError> {
    let plane = &front.plane;
    // Auth, before the body is read: an anonymous client cannot make the gateway buffer it.
    // The token leaves the headers here, so it is not forwarded upstream.
    let auth = plane.auth();
    let mut span = if auth.is_some() {
        trace.step("infergate.auth")
    } else {
        Default::default()
    };
    let token = auth::authenticate(auth, &mut parts.headers)
        .await
        .inspect_err(|e| fail(&mut span, e))?;
    span.end();
    let parts = &*parts;

    // The body, read whole and bounded; then parse → rewrite → route → identity → features.
    let config = &routes.config;
    let limits = body::BodyLimits {
        max_bytes: config.bbr.max_request_body_bytes.value,
        budget_bytes: config.bbr.max_buffered_body_bytes.value,
        timeout: Some(config.connections.body_timeout.value).filter(|t| !t.is_zero()),
    };
    // The bytes stay counted against the budget until the upstream's answer begins (the
    // proxy keeps the body for a retry until then).
    let (received, _held) =
        body::read_body(body, &parts.headers, limits, &front.bodies, started).await?;
    let inbound = Inbound {
        headers: &parts.headers,
        body: Some(&received),
        path: parts.uri.path(),
        token: token.as_ref(),
    };
    let mut span = trace.step("infergate.route");
    let mut prepared =
        prepare(routes, inbound, plane.metrics(), record).inspect_err(|e| fail(&mut span, e))?;
    trace.prepared(&mut span, &prepared);
    span.end();
    let pool = Arc::clone(&prepared.target.pool);

    // Limit: the tenant's requests and tokens, before the request may wait in flow control.
    let limits = plane.rate_limits();
    let mut span = if limits.is_some() {
        trace.step("infergate.rate_limit")
    } else {
        Default::default()
    };
    prepared.limit = limit::limit(limits, prepared.charge.clone())
        .await
        .inspect_err(|e| fail(&mut span, e))?;
    span.end();

    // Admit: go on, wait in the pool's queue, or be refused. The route timeout counts from the
    // request's arrival, so time spent queued is part of it.
    let deadline = pool.route_timeout.map(|t| started + t);
    let timed_out = || ApiError::timeout(&pool.name, pool.route_timeout.unwrap_or(Duration::ZERO));
    let mut span = trace.step("infergate.flow_control");
    let admitted = async {
        match admit::admit(&prepared)? {
            Admitted::Now(permit) => Ok(permit),
            Admitted::Queued(waiting) => {
                span.set("infergate.flow.queued", true);
                waiting.wait().await
            }
        }
    };
    let permit = match deadline {
        Some(d) => tokio::time::timeout_at(d, admitted)
            .await
            .unwrap_or_else(|_| Err(timed_out())),
        None => admitted.await,
    }
    .inspect_err(|e| fail(&mut span, e))?;
    span.end();

    // Pick, on the pool as it is after the wait. A traced pick is explained in its span; the
    // client sees the explanation only with --emit-endpoint-scores.
    let emit = plane.emits_endpoint_scores();
    let (picked, why) = trace.pick(&pool, &prepared.features, plane.clock(), emit)?;

    // Proxy.
    let body = prepared.body.take().unwrap_or(received);
    let limit = prepared.limit.take();
    let forward = Forward {
        front,
        prepared: &mut prepared,
        parts,
        body,
        started,
        deadline,
        permit: Some(permit),
        limit,
        why,
        trace,
        tried_endpoint: &mut record.endpoint,
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d, forward.send(picked))
            .await
            .unwrap_or_else(|_| Err(timed_out())),
        None => forward.send(picked).await,
    }
}
