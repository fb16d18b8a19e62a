//! One request through the gateway, in the order of its way through: auth → parse → rewrite →
//! route → limit (the tenant's rate limits) → admit (flow control: go, queue or refuse) → pick →
//! proxy (→ account, in the response body). Every failure leaves as an OpenAI-shaped error, and every inference request is counted
//! once, with the status the client got.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response};
use tokio::time::Instant;

use crate::admission::Ask;
use crate::api_error::ApiError;
use crate::body::ResponseBody;
use crate::metrics::{PoolLabels, RequestLabels};
use crate::parse::{self, MODEL_HEADER};
use crate::proxy::{headers::DESTINATION_ENDPOINT, Forward};
use crate::route::Routes;
use crate::{auth, features, rewrite, Shared};

/// Routes a request to its handler. With `spec.auth`, every `/v1` route needs a valid token
/// (inference requests are checked on their own way through, where they are counted).
pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ResponseBody> {
    let path = req.uri().path();
    let inference_route = matches!(
        path,
        "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings"
    );
    if inference_route && req.method() == Method::POST {
        return inference(shared, req).await;
    }
    // An anonymous client learns nothing, not even which models or routes exist.
    if path == "/v1" || path.starts_with("/v1/") {
        let (mut parts, _) = req.into_parts();
        if let Err(e) = auth::authenticate(&shared, &mut parts.headers).await {
            return e.into_response();
        }
        return open_route(&shared, &parts);
    }
    ApiError::no_route(path).into_response()
}

/// The `/v1` routes other than a POST to an inference route.
fn open_route(shared: &Shared, parts: &Parts) -> Response<ResponseBody> {
    let path = parts.uri.path();
    match path {
        "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings" => {
            ApiError::method_not_allowed(path).into_response()
        }
        "/v1/models" => {
            if parts.method == Method::GET {
                let mut resp = Response::new(ResponseBody::full(shared.routes.load().models()));
                resp.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                resp
            } else {
                ApiError::method_not_allowed(path).into_response()
            }
        }
        _ => ApiError::no_route(path).into_response(),
    }
}

async fn inference(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ResponseBody> {
    let started = Instant::now();
    // One config for the whole request, even if a reload lands meanwhile.
    let routes = shared.routes.load_full();
    let (mut parts, body) = req.into_parts();
    let mut labels = RequestLabels {
        model: String::new(),
        pool: String::new(),
        endpoint: String::new(),
        status: 0,
    };
    let resp = match serve(&shared, &routes, &mut parts, body, started, &mut labels).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "request refused");
            e.into_response()
        }
    };
    labels.status = resp.status().as_u16();
    if let Some(ep) = resp
        .headers()
        .get(DESTINATION_ENDPOINT)
        .and_then(|v| v.to_str().ok())
    {
        ep.clone_into(&mut labels.endpoint);
    }
    shared.metrics.requests.get_or_create(&labels).inc();
    resp
}

async fn serve(
    shared: &Arc<Shared>,
    routes: &Routes,
    parts: &mut Parts,
    body: Incoming,
    started: Instant,
    labels: &mut RequestLabels,
) -> Result<Response<ResponseBody>, ApiError> {
    // Auth, before the body is read: an anonymous client cannot make the gateway buffer it.
    // The token leaves the headers here, so it is not forwarded upstream.
    let token = auth::authenticate(shared, &mut parts.headers).await?;
    let parts = &*parts;

    // Parse.
    let limit = routes.config.bbr.max_request_body_bytes.value;
    let body = parse::read_body(body, &parts.headers, limit).await?;
    let header_model = parts
        .headers
        .get(MODEL_HEADER)
        .and_then(|v| v.to_str().ok());
    let mut parsed = parse::parse(&body, header_model)?;

    // Rewrite: a canary rule (or the rewrite header) sends the request to another model. The
    // body names that model from here on; the answer names the client's again.
    let rewrite = routes.rewrites.decide(&parsed.model, &parts.headers, &body);
    let body = match &rewrite {
        Some(r) if r.restore().is_some() => rewrite::set_model(&body, &mut parsed, &r.target)?,
        _ => body,
    };

    // Route.
    let target = routes
        .route(&parsed.model)
        .ok_or_else(ApiError::unknown_model)?;
    if let Some(r) = &rewrite {
        r.count(&shared.metrics);
    }
    let pool = &target.pool;
    labels.model.clone_from(&parsed.model);
    labels.pool.clone_from(&pool.name);
    let identity = auth::identity(&routes.config.tenancy, token.as_ref(), &parts.headers);
    // Priority: a pool with `forwardPriority` tells its model servers the band as vLLM's body
    // `priority`, so their own queues serve Critical first too (rewrite::set_priority).
    let body = if pool.forward_priority {
        rewrite::set_priority(&body, &mut parsed, identity.band.engine_priority())?
    } else {
        body
    };
    let mut features = features::features(
        &parsed.model,
        target.adapter.as_deref(),
        parsed.prompt.get(&body),
        &pool.policy().prefix_params(),
        identity.band,
        identity.tenant,
    );
    features.buffered_response = !parsed.stream;

    // Limit: the tenant's requests and tokens, before the request may wait in flow control.
    // Embeddings generate nothing, so only their input counts.
    let limit = match shared.rate_limits.load_full() {
        Some(limits) => {
            let max_tokens = if parts.uri.path() == "/v1/embeddings" {
                Some(0)
            } else {
                parsed.max_tokens
            };
            limits
                .admit(
                    features.tenant.as_deref(),
                    features.prompt_tokens,
                    max_tokens,
                )
                .await?
        }
        None => None,
    };

    // Admit: go on, wait in the pool's queue, or be refused. The route timeout counts from the
    // request's arrival, so time spent queued is part of it.
    let deadline = pool.route_timeout.map(|t| started + t);
    let timed_out = || ApiError::timeout(&pool.name, pool.route_timeout.unwrap_or(Duration::ZERO));
    let ask = Ask {
        band: identity.band,
        tenant: features.tenant.clone(),
        bytes: body.len() as u64,
    };
    let admitted = pool.admission().admit(ask);
    let permit = match deadline {
        Some(d) => tokio::time::timeout_at(d, admitted)
            .await
            .unwrap_or_else(|_| Err(timed_out()))?,
        None => admitted.await?,
    };
    // The snapshot after the wait: a queued request is picked on the pool as it is now.
    let snap = pool.snapshot();
    let now = shared.clock.now();
    let pool_labels = PoolLabels {
        pool: pool.name.clone(),
    };

    // Pick.
    let t0 = Instant::now();
    let picked = pool.pick(&snap, &features, now);
    shared
        .metrics
        .picker_latency
        .get_or_create(&pool_labels)
        .observe(t0.elapsed().as_secs_f64());
    let (pick, dispatch) = picked.map_err(|e| ApiError::no_endpoint(&pool.name, e))?;

    // Proxy.
    let forward = Forward {
        shared,
        target: &target,
        snap: &snap,
        features: &features,
        parts,
        body,
        model: &parsed.model,
        restore: rewrite.as_ref().and_then(rewrite::Decision::restore),
        started,
        deadline,
        permit: Some(permit),
        limit,
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d, forward.send(pick, dispatch))
            .await
            .unwrap_or_else(|_| Err(timed_out())),
        None => forward.send(pick, dispatch).await,
    }
}
