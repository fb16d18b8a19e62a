//! The Envoy front's own part of the decision: the subset hint Envoy may send (the proxy
//! restricts the choice), and the pick turned into a destination list. Everything before is
//! the shared pipeline's ([`infergate_pipeline::prepare`]); the dispatch (the in-flight guard),
//! the flow-control permit and the rate-limit reservation are held until the response ends.

use std::sync::Arc;

use infergate_control::admission::FlowPermit;
use infergate_control::limits::LimitTicket;
use infergate_control::pool::Snapshot;
use infergate_control::routes::{Routes, Target};
use infergate_control::PlaneHandle;
use infergate_picker::{Dispatch, EndpointId, RequestFeatures};
use infergate_pipeline::pick::{Picked, Why};
use infergate_pipeline::trace::RequestTrace;
use infergate_pipeline::{ApiError, Prepared};

use crate::subset::SubsetIndexes;

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
    /// Why, when picks are explained (`--emit-endpoint-scores`).
    pub why: Option<Why>,
    /// The dispatch to the primary: its in-flight guard and TTFT ticket.
    pub dispatch: Dispatch,
    /// Flow control's permit: the request counts as in flight until it is dropped.
    pub permit: FlowPermit,
}

/// Subset: the proxy restricts the choice to the endpoints its hint names; naming nothing
/// eligible is a 503, never a pick outside it.
pub fn restrict(
    routes: &Arc<Routes>,
    subsets: &SubsetIndexes,
    prepared: &mut Prepared,
    hint: &[String],
) -> Result<(), ApiError> {
    let pool = &prepared.target.pool.name;
    let eligible = subsets.eligible(routes, pool, hint);
    if eligible.is_empty() {
        return Err(ApiError::no_endpoint(
            pool,
            format!(
                "the subset hint names no endpoint of the pool ({} entries)",
                hint.len()
            ),
        ));
    }
    prepared.features.endpoint_subset = Some(eligible);
    Ok(())
}

/// Picks the endpoints of an admitted request on the pool as it is now.
pub fn pick(
    handle: &PlaneHandle,
    prepared: Prepared,
    permit: FlowPermit,
    trace: &RequestTrace,
) -> Result<Routed, ApiError> {
    let Prepared {
        target,
        features,
        model,
        restore,
        limit,
        ..
    } = prepared;
    // A traced pick is explained in its span; Envoy's metadata carries the explanation only
    // with --emit-endpoint-scores.
    let (picked, why) = trace.pick(
        &target.pool,
        &features,
        handle.clock(),
        handle.emits_endpoint_scores(),
    )?;
    let destination = picked.destination();
    let Picked {
        snap,
        pick,
        dispatch,
        ..
    } = picked;
    target.pool.count_sent(pick.primary);
    Ok(Routed {
        target,
        snap,
        features,
        model,
        restore,
        limit,
        primary: pick.primary,
        destination,
        why,
        dispatch,
        permit,
    })
}
