//! One request through the HTTP front: auth, the body read, then the shared pipeline (parse →
//! rewrite → route → identity → features → limit → admit → pick), then the proxy (→ account,
//! in the response body). Every failure leaves as an OpenAI-shaped error, and every inference
//! request is counted once, with the status the client got.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response};
use tokio::time::Instant;

use infergate_control::admission::Admitted;
use infergate_control::routes::Routes;
use infergate_pipeline::{admit, auth, limit, pick, prepare, ApiError, Inbound};
use infergate_telemetry::metrics::RequestRecord;

use crate::body::{self, error_response, ResponseBody};
use crate::proxy::{headers::DESTINATION_ENDPOINT, Forward};
use crate::Front;

/// Routes a request to its handler. With `spec.auth`, every `/v1` route needs a valid token
/// (inference requests are checked on their own way through, where they are counted).
pub async fn handle(front: Arc<Front>, req: Request<Incoming>) -> Response<ResponseBody> {
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
    let mut record = RequestRecord::default();
    let resp = match serve(&front, &routes, &mut parts, body, started, &mut record).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "request refused");
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
    front.plane.metrics().count_request(&record);
    resp
}

async fn serve(
    front: &Arc<Front>,
    routes: &Arc<Routes>,
    parts: &mut Parts,
    body: Incoming,
    started: Instant,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError> {
    let plane = &front.plane;
    // Auth, before the body is read: an anonymous client cannot make the gateway buffer it.
    // The token leaves the headers here, so it is not forwarded upstream.
    let token = auth::authenticate(plane.auth(), &mut parts.headers).await?;
    let parts = &*parts;

    // The body, read whole and bounded; then parse → rewrite → route → identity → features.
    let limit_bytes = routes.config.bbr.max_request_body_bytes.value;
    let received = body::read_body(body, &parts.headers, limit_bytes).await?;
    let inbound = Inbound {
        headers: &parts.headers,
        body: Some(&received),
        path: parts.uri.path(),
        token: token.as_ref(),
    };
    let mut prepared = prepare(routes, inbound, plane.metrics(), record)?;
    let pool = Arc::clone(&prepared.target.pool);

    // Limit: the tenant's requests and tokens, before the request may wait in flow control.
    prepared.limit = limit::limit(plane.rate_limits(), prepared.charge.clone()).await?;

    // Admit: go on, wait in the pool's queue, or be refused. The route timeout counts from the
    // request's arrival, so time spent queued is part of it.
    let deadline = pool.route_timeout.map(|t| started + t);
    let timed_out = || ApiError::timeout(&pool.name, pool.route_timeout.unwrap_or(Duration::ZERO));
    let admitted = async {
        match admit::admit(&prepared)? {
            Admitted::Now(permit) => Ok(permit),
            Admitted::Queued(waiting) => waiting.wait().await,
        }
    };
    let permit = match deadline {
        Some(d) => tokio::time::timeout_at(d, admitted)
            .await
            .unwrap_or_else(|_| Err(timed_out()))?,
        None => admitted.await?,
    };

    // Pick, on the pool as it is after the wait.
    let picked = pick::pick(
        &pool,
        &prepared.features,
        plane.clock(),
        plane.emits_endpoint_scores(),
    )?;

    // Proxy.
    let body = prepared.body.take().unwrap_or(received);
    let limit = prepared.limit.take();
    let forward = Forward {
        front,
        prepared: &prepared,
        parts,
        body,
        started,
        deadline,
        permit: Some(permit),
        limit,
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d, forward.send(picked))
            .await
            .unwrap_or_else(|_| Err(timed_out())),
        None => forward.send(picked).await,
    }
}
