//! One request through the gateway, in the order of its way through: parse → route → admit →
//! pick → proxy (→ account, in the response body). Every failure leaves as an OpenAI-shaped
//! error, and every request is counted once, with the status the client got.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response};
use tokio::time::Instant;

use crate::api_error::ApiError;
use crate::body::ResponseBody;
use crate::metrics::{PoolLabels, RequestLabels};
use crate::parse::{self, MODEL_HEADER};
use crate::proxy::{headers::DESTINATION_ENDPOINT, Forward};
use crate::route::Routes;
use crate::{features, Shared};

/// Routes a request to its handler.
pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ResponseBody> {
    let path = req.uri().path();
    match path {
        "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings" => {
            if req.method() == Method::POST {
                inference(shared, req).await
            } else {
                ApiError::method_not_allowed(path).into_response()
            }
        }
        "/v1/models" => {
            if req.method() == Method::GET {
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
    let (parts, body) = req.into_parts();
    let mut labels = RequestLabels {
        model: String::new(),
        pool: String::new(),
        endpoint: String::new(),
        status: 0,
    };
    let resp = match serve(&shared, &routes, &parts, body, started, &mut labels).await {
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
    parts: &Parts,
    body: Incoming,
    started: Instant,
    labels: &mut RequestLabels,
) -> Result<Response<ResponseBody>, ApiError> {
    // Parse.
    let limit = routes.config.bbr.max_request_body_bytes.value;
    let body = parse::read_body(body, &parts.headers, limit).await?;
    let header_model = parts
        .headers
        .get(MODEL_HEADER)
        .and_then(|v| v.to_str().ok());
    let parsed = parse::parse(&body, header_model)?;

    // Route.
    let target = routes
        .route(&parsed.model)
        .ok_or_else(ApiError::unknown_model)?;
    let pool = &target.pool;
    labels.model.clone_from(&parsed.model);
    labels.pool.clone_from(&pool.name);
    let tenancy = &routes.config.tenancy;
    let band = features::band(&parts.headers, tenancy);
    let mut features = features::features(
        &parsed.model,
        target.adapter.as_deref(),
        parsed.prompt.get(&body),
        &pool.policy().prefix_params(),
        band,
        features::tenant(&parts.headers, tenancy),
    );
    features.buffered_response = !parsed.stream;

    // Admit.
    let snap = pool.snapshot();
    let now = shared.clock.now();
    let pool_labels = PoolLabels {
        pool: pool.name.clone(),
    };
    if let Err(retry_after) = pool.admit(&snap, features.priority, now) {
        shared.metrics.shed.get_or_create(&pool_labels).inc();
        return Err(ApiError::saturated(&pool.name, retry_after));
    }

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
    let deadline = pool.route_timeout.map(|t| started + t);
    let forward = Forward {
        shared,
        target: &target,
        snap: &snap,
        features: &features,
        parts,
        body,
        model: &parsed.model,
        started,
        deadline,
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d, forward.send(pick, dispatch))
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::timeout(
                    &pool.name,
                    pool.route_timeout.unwrap_or(Duration::ZERO),
                ))
            }),
        None => forward.send(pick, dispatch).await,
    }
}
