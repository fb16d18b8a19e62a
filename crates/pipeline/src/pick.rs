//! Pick: the pool's picker chooses the primary endpoint and ordered fallbacks on the pool's
//! snapshot as it is now (a request that waited in a queue is picked after its wait) and
//! dispatches to the primary (its in-flight guard and TTFT ticket); 503 when no endpoint can
//! take it. The decision time is measured here, for both fronts.

use std::sync::Arc;
use std::time::Duration;

use infergate_api_error::ApiError;
use infergate_control::pool::{PoolRuntime, RecentDecision, Snapshot};
use infergate_control::Clock;
use infergate_picker::{Dispatch, Explanation, Pick, RequestFeatures};
use serde_json::{json, Map, Value};
use tokio::time::Instant;

/// The response header (serve) and `envoy.lb` metadata key (extproc) of each candidate's total
/// score, `{"ip:port": total}`: llm-d's name and shape.
pub const ENDPOINT_SCORES: &str = "x-gateway-destination-endpoint-scores";

/// The response header and `envoy.lb` metadata key of the whole explanation (JSON): the
/// scorers' parts, the filters that removed endpoints, the decision time.
pub const PICK_EXPLANATION: &str = "x-infergate-pick";

/// A request's endpoints, chosen.
#[derive(Debug)]
pub struct Picked {
    /// The snapshot the pick was made on (fallbacks are dispatched on it too).
    pub snap: Arc<Snapshot>,
    /// The primary and the fallbacks.
    pub pick: Pick,
    /// The dispatch to the primary.
    pub dispatch: Dispatch,
    /// How long the pick and dispatch took.
    pub decision: Duration,
}

/// Why a request went where it went, rendered once for whichever front tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Why {
    /// Each scored endpoint's total, by address ([`ENDPOINT_SCORES`]).
    pub scores: Map<String, Value>,
    /// The whole explanation as compact JSON ([`PICK_EXPLANATION`]).
    pub explanation: String,
}

impl Picked {
    /// `ip:port` of the primary, then of each fallback, comma-separated: the destination an
    /// endpoint-picker protocol peer is told.
    pub fn destination(&self) -> String {
        let mut destination = String::new();
        let ids = std::iter::once(self.pick.primary).chain(self.pick.fallbacks.iter().copied());
        for id in ids {
            if let Some(address) = self.snap.pool.address(id) {
                if !destination.is_empty() {
                    destination.push(',');
                }
                destination.push_str(address);
            }
        }
        destination
    }

    /// Why, when the pick was explained (`--emit-endpoint-scores`).
    pub fn why(&self) -> Option<Why> {
        let e = self.pick.explanation.as_deref()?;
        Some(render(e, &self.snap, self.pick.primary, self.decision))
    }
}

/// The explanation `e` of a pick of `primary` on `snap` that took `decision`, with endpoints
/// named by address. A score that is not finite (no candidate has one) is written as null.
fn render(
    e: &Explanation,
    snap: &Snapshot,
    primary: infergate_picker::EndpointId,
    decision: Duration,
) -> Why {
    let address = |id| snap.pool.address(id).unwrap_or_default().to_owned();
    let number = |x: f64| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number);
    let scores: Map<String, Value> = e
        .scored
        .iter()
        .map(|s| (address(s.id), number(s.total)))
        .collect();
    let candidates: Vec<Value> = e
        .scored
        .iter()
        .map(|s| {
            let parts: Map<String, Value> = e
                .scorers
                .iter()
                .zip(&s.parts)
                .map(|(name, &x)| ((*name).to_owned(), number(x)))
                .collect();
            json!({"endpoint": address(s.id), "total": number(s.total), "scores": parts})
        })
        .collect();
    let removed: Vec<Value> = e
        .removed
        .iter()
        .map(|(id, by)| json!({"endpoint": address(*id), "by": by}))
        .collect();
    let explanation = json!({
        "primary": address(primary),
        "decision_seconds": decision.as_secs_f64(),
        "candidates": candidates,
        "removed": removed,
    })
    .to_string();
    Why {
        scores,
        explanation,
    }
}

/// Picks and dispatches on `pool` as it is now, timing the decision into
/// `infergate_picker_latency_seconds`; with `explain`, the pick says why ([`Picked::why`]).
pub fn pick(
    pool: &PoolRuntime,
    features: &RequestFeatures,
    clock: Clock,
    explain: bool,
) -> Result<Picked, ApiError> {
    let snap = pool.snapshot();
    let now = clock.now();
    let t0 = Instant::now();
    let picked = pool.pick(&snap, features, now, explain);
    let decision = t0.elapsed();
    pool.observe_decision(decision);
    let (pick, dispatch) = picked.map_err(|e| ApiError::no_endpoint(&pool.name, e))?;
    let explained = pick.explanation.as_deref();
    pool.record_decision(RecentDecision {
        at: now,
        model: features.model.clone(),
        endpoint: snap
            .pool
            .address(pick.primary)
            .unwrap_or_default()
            .to_owned(),
        candidates: explained.map(|e| e.scored.len()),
        removed: explained.map(|e| e.removed.len()),
        best_score: explained.and_then(|e| {
            e.scored
                .iter()
                .find(|s| s.id == pick.primary)
                .map(|s| s.total)
        }),
        decision,
    });
    Ok(Picked {
        snap,
        pick,
        dispatch,
        decision,
    })
}
