//! A request's way through the data plane once its body is in (and its token checked): parse →
//! rewrite → route → identity → features → subset, then (after the rate limits and flow control
//! let it go on, see [`crate::wait`]) pick. The same steps, the same errors and the same
//! metrics as the standalone gateway (`infergate_gateway::service`); what differs is the end:
//! instead of proxying, the pick goes back to Envoy as a destination list (with the rewritten
//! body, when a canary rule changed the model), and the dispatch (the in-flight guard), the
//! flow-control permit and the rate-limit reservation are held until the response ends.

use std::sync::Arc;

use hyper::HeaderMap;
use infergate_auth::Verified;
use infergate_config::gateway::Band;
use infergate_gateway::admission::{Ask as FlowAsk, FlowPermit};
use infergate_gateway::api_error::ApiError;
use infergate_gateway::metrics::{EndpointLabels, Metrics, PoolLabels, RequestLabels};
use infergate_gateway::parse::{self, ParsedRequest, PromptBytes, MODEL_HEADER};
use infergate_gateway::pool::Snapshot;
use infergate_gateway::ratelimit::LimitTicket;
use infergate_gateway::route::{Routes, Target};
use infergate_gateway::{auth, features, rewrite, GatewayHandle};
use infergate_picker::{Dispatch, EndpointId, RequestFeatures};
use tokio::time::Instant;

use crate::subset::SubsetIndexes;
use crate::wait::Charge;

/// A request routed to its pool, waiting for flow control.
#[derive(Debug)]
pub struct Prepared {
    /// Where routing sent it.
    pub target: Target,
    /// The picker's view of the request.
    pub features: RequestFeatures,
    /// The model the request is routed by (a canary rule's target, when one rewrote it).
    pub model: String,
    /// Its priority band.
    pub band: Band,
    /// Its body's size.
    pub bytes: u64,
    /// The body naming the rewritten model, to send upstream instead of the client's; `None`
    /// when the model stayed as the client named it. Taken by the exchange.
    pub rewritten_body: Option<Vec<u8>>,
    /// The model the client asked for, when a rewrite sent the request to another: the answer
    /// names it again.
    pub restore: Option<String>,
    /// What the rate limits charge it.
    pub charge: Charge,
    /// Its rate-limit reservation, once charged.
    pub limit: Option<LimitTicket>,
}

impl Prepared {
    /// What flow control reads from it.
    pub fn flow_ask(&self) -> FlowAsk {
        FlowAsk {
            band: self.band,
            tenant: self.features.tenant.clone(),
            bytes: self.bytes,
        }
    }
}

/// A request with its endpoints chosen.
#[derive(Debug)]
pub struct Routed {
    /// Where routing sent it.
    pub target: Target,
    /// The snapshot the pick was made on.
    pub snap: Arc<Snapshot>,
    /// The picker's view of the request.
    pub features: RequestFeatures,
    /// The model the request is routed by.
    pub model: String,
    /// The model the client asked for, when a rewrite sent the request to another.
    pub restore: Option<String>,
    /// The rate-limit reservation, settled with the response's usage.
    pub limit: Option<LimitTicket>,
    /// The primary endpoint.
    pub primary: EndpointId,
    /// `ip:port` of the primary, then of each fallback, comma-separated.
    pub destination: String,
    /// The dispatch to the primary: its in-flight guard and TTFT ticket.
    pub dispatch: Dispatch,
    /// Flow control's permit: the request counts as in flight until it is dropped.
    pub permit: FlowPermit,
}

/// What the decision reads from one request.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The client's headers.
    pub headers: &'a HeaderMap,
    /// The whole body (empty when the request has none).
    pub body: &'a [u8],
    /// The subset hint, when Envoy sent one.
    pub subset: Option<&'a [String]>,
    /// The verified bearer token, with auth on.
    pub token: Option<&'a Verified>,
    /// `:path`.
    pub path: &'a str,
}

/// The model and prompt of a request. A request with no body (a GET) can still name its model
/// in the `x-gateway-model-name` header; it then has no prompt.
fn parse(ask: Ask<'_>) -> Result<ParsedRequest, ApiError> {
    let header_model = ask.headers.get(MODEL_HEADER).and_then(|v| v.to_str().ok());
    if !ask.body.is_empty() {
        return parse::parse(ask.body, header_model);
    }
    match header_model {
        Some(m) if !m.is_empty() => Ok(ParsedRequest {
            model: m.to_owned(),
            stream: false,
            prompt: PromptBytes::None,
            max_tokens: None,
        }),
        _ => Err(ApiError::no_model()),
    }
}

/// Parses and routes a request, up to flow control. `labels` is filled as far as the request
/// got, for the request count.
pub fn prepare(
    routes: &Arc<Routes>,
    subsets: &SubsetIndexes,
    ask: Ask<'_>,
    metrics: &Metrics,
    labels: &mut RequestLabels,
) -> Result<Prepared, ApiError> {
    // Parse.
    let mut parsed = parse(ask)?;

    // Rewrite: a canary rule (or the rewrite header) sends the request to another model; the
    // body sent upstream names that model, and the answer names the client's again. A request
    // without a body is routed by the target alone.
    let rewrite = routes.rewrites.decide(&parsed.model, ask.headers, ask.body);
    let restore = rewrite
        .as_ref()
        .and_then(|r| r.restore())
        .map(str::to_owned);
    let rewritten_body = match &rewrite {
        Some(r) if restore.is_some() && !ask.body.is_empty() => Some(Vec::from(
            rewrite::set_model(ask.body, &mut parsed, &r.target)?,
        )),
        Some(r) if restore.is_some() => {
            parsed.model.clone_from(&r.target);
            None
        }
        _ => None,
    };

    // Route.
    let target = routes
        .route(&parsed.model)
        .ok_or_else(ApiError::unknown_model)?;
    if let Some(r) = &rewrite {
        r.count(metrics);
    }
    let pool = Arc::clone(&target.pool);
    labels.model.clone_from(&parsed.model);
    labels.pool.clone_from(&pool.name);

    // Identity: from the token's claims, or from headers, as `tenancy` says.
    let identity = auth::identity(&routes.config.tenancy, ask.token, ask.headers);
    // Priority: a pool with `forwardPriority` tells its model servers the band as vLLM's body
    // `priority`, as the standalone gateway does.
    let rewritten_body = if pool.forward_priority && !ask.body.is_empty() {
        let current = rewritten_body.as_deref().unwrap_or(ask.body);
        let priority = identity.band.engine_priority();
        Some(Vec::from(rewrite::set_priority(
            current,
            &mut parsed,
            priority,
        )?))
    } else {
        rewritten_body
    };
    let body = rewritten_body.as_deref().unwrap_or(ask.body);
    let mut features = features::features(
        &parsed.model,
        target.adapter.as_deref(),
        parsed.prompt.get(body),
        &pool.policy().prefix_params(),
        identity.band,
        identity.tenant,
    );
    features.buffered_response = !parsed.stream;

    // Subset: the proxy restricts the choice; naming nothing eligible is a 503, never a pick
    // outside it.
    if let Some(hint) = ask.subset {
        let eligible = subsets.eligible(routes, &pool.name, hint);
        if eligible.is_empty() {
            return Err(ApiError::no_endpoint(
                &pool.name,
                format!(
                    "the subset hint names no endpoint of the pool ({} entries)",
                    hint.len()
                ),
            ));
        }
        features.endpoint_subset = Some(eligible);
    }
    // Embeddings generate nothing, so only their input counts against tokens per minute.
    let embeddings = ask.path.split('?').next() == Some("/v1/embeddings");
    let charge = Charge {
        tenant: features.tenant.clone(),
        prompt_tokens: features.prompt_tokens,
        max_tokens: if embeddings {
            Some(0)
        } else {
            parsed.max_tokens
        },
    };
    Ok(Prepared {
        target,
        features,
        model: parsed.model,
        band: identity.band,
        bytes: body.len() as u64,
        rewritten_body,
        restore,
        charge,
        limit: None,
    })
}

/// Picks the endpoints of an admitted request on the pool as it is now.
pub fn pick(
    handle: &GatewayHandle,
    prepared: Prepared,
    permit: FlowPermit,
) -> Result<Routed, ApiError> {
    let metrics = handle.metrics();
    let Prepared {
        target,
        features,
        model,
        restore,
        limit,
        ..
    } = prepared;
    let pool = &target.pool;
    let snap = pool.snapshot();
    let now = handle.clock().now();
    let pool_labels = PoolLabels {
        pool: pool.name.clone(),
    };
    let t0 = Instant::now();
    let picked = pool.pick(&snap, &features, now);
    metrics
        .picker_latency
        .get_or_create(&pool_labels)
        .observe(t0.elapsed().as_secs_f64());
    let (pick, dispatch) = picked.map_err(|e| ApiError::no_endpoint(&pool.name, e))?;
    let mut destination = String::new();
    for id in std::iter::once(pick.primary).chain(pick.fallbacks.iter().copied()) {
        if let Some(address) = snap.pool.address(id) {
            if !destination.is_empty() {
                destination.push(',');
            }
            destination.push_str(address);
        }
    }
    if let Some(address) = snap.pool.address(pick.primary) {
        metrics
            .routing_decisions
            .get_or_create(&EndpointLabels {
                pool: pool.name.clone(),
                endpoint: address.to_owned(),
            })
            .inc();
    }
    Ok(Routed {
        target,
        snap,
        features,
        model,
        restore,
        limit,
        primary: pick.primary,
        destination,
        dispatch,
        permit,
    })
}
