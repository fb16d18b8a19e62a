//! The steps that never wait, run as one call: parse → rewrite → route → identity → features,
//! ending in the charge the rate limits will take. Both fronts call [`prepare`] once the
//! token is checked and the body is in; what may wait (limit, admit) comes after, and then the
//! pick.

use std::sync::Arc;

use bytes::Bytes;
use hyper::HeaderMap;
use infergate_api_error::ApiError;
use infergate_auth::Verified;
use infergate_config::gateway::Band;
use infergate_control::limits::LimitTicket;
use infergate_control::routes::{Routes, Target};
use infergate_picker::RequestFeatures;
use infergate_telemetry::metrics::{Metrics, RequestRecord};

use crate::limit::Charge;
use crate::{features, identity, parse, rewrite, route};

/// A request as it reached the pipeline.
#[derive(Debug, Clone, Copy)]
pub struct Inbound<'a> {
    /// The client's headers (the token already removed).
    pub headers: &'a HeaderMap,
    /// The whole body; `None` when the request has none at all (its headers ended it).
    pub body: Option<&'a [u8]>,
    /// `:path`, with or without its query.
    pub path: &'a str,
    /// The verified bearer token, with auth on.
    pub token: Option<&'a Verified>,
}

/// A request routed to its pool, ready for its rate limits and flow control.
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
    /// The size of the body sent upstream, for flow control's byte caps.
    pub bytes: u64,
    /// The body to send upstream instead of the client's, when a rewrite or `forwardPriority`
    /// changed it; `None` when the client's goes as it is.
    pub body: Option<Bytes>,
    /// The model the client asked for, when a rewrite sent the request to another: the answer
    /// names it again.
    pub restore: Option<String>,
    /// Whether the client asked for a streamed answer.
    pub stream: bool,
    /// What the rate limits charge it.
    pub charge: Charge,
    /// Its rate-limit reservation, once charged.
    pub limit: Option<LimitTicket>,
}

/// Parses and routes a request, up to its rate limits. `record` is filled as far as the request
/// got, for the request count.
pub fn prepare(
    routes: &Arc<Routes>,
    inbound: Inbound<'_>,
    metrics: &Metrics,
    record: &mut RequestRecord,
) -> Result<Prepared, ApiError> {
    // Parse.
    let mut parsed = parse::parse_request(inbound.headers, inbound.body)?;
    let received = inbound.body.unwrap_or_default();
    record.asked_model.clone_from(&parsed.model);

    // Rewrite: a canary rule (or the rewrite header) sends the request to another model; the
    // body sent upstream names that model, and the answer names the client's again.
    let decision = routes
        .rewrites
        .decide(&parsed.model, inbound.headers, received);
    let (mut body, restore) = rewrite::apply(decision.as_ref(), inbound.body, &mut parsed)?;

    // Route.
    let target = route::route(routes, &parsed.model)?;
    if let Some(d) = &decision {
        d.count(metrics);
    }
    let pool = &target.pool;
    record.model.clone_from(&parsed.model);
    record.pool.clone_from(&pool.name);

    // Identity: from the token's claims, or from headers, as `tenancy` says. A pool with
    // `forwardPriority` tells its model servers the band as vLLM's body `priority`, so their
    // own queues serve Critical first too.
    let identity = identity::identity(&routes.config.tenancy, inbound.token, inbound.headers);
    record.priority = identity::priority(identity.band);
    if pool.forward_priority && inbound.body.is_some() {
        let current = body.as_deref().unwrap_or(received);
        let priority = identity.band.engine_priority();
        body = Some(rewrite::set_priority(current, &mut parsed, priority)?);
    }
    let sent = body.as_deref().unwrap_or(received);

    // Features: the request as the picker sees it.
    let mut features = features::features(features::Seen {
        model: &parsed.model,
        adapter: target.adapter.as_deref(),
        prompt: parsed.prompt.get(sent),
        prefix: &pool.policy().prefix_params(),
        band: identity.band,
        tenant: identity.tenant,
        max_tokens: parsed.max_tokens,
    });
    features.buffered_response = !parsed.stream;

    let charge = Charge {
        tenant: features.tenant.clone(),
        prompt_tokens: features.prompt_tokens,
        max_tokens: if parse::is_embeddings(inbound.path) {
            Some(0)
        } else {
            parsed.max_tokens
        },
    };
    Ok(Prepared {
        bytes: sent.len() as u64,
        target,
        features,
        model: parsed.model,
        band: identity.band,
        body,
        restore,
        stream: parsed.stream,
        charge,
        limit: None,
    })
}
