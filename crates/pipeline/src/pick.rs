//! Pick: the pool's picker chooses the primary endpoint and ordered fallbacks on the pool's
//! snapshot as it is now (a request that waited in a queue is picked after its wait) and
//! dispatches to the primary (its in-flight guard and TTFT ticket); 503 when no endpoint can
//! take it. The decision time is measured here, for both fronts.

use std::sync::Arc;

use infergate_api_error::ApiError;
use infergate_control::pool::{PoolRuntime, Snapshot};
use infergate_control::Clock;
use infergate_picker::{Dispatch, Pick, RequestFeatures};
use tokio::time::Instant;

/// A request's endpoints, chosen.
#[derive(Debug)]
pub struct Picked {
    /// The snapshot the pick was made on (fallbacks are dispatched on it too).
    pub snap: Arc<Snapshot>,
    /// The primary and the fallbacks.
    pub pick: Pick,
    /// The dispatch to the primary.
    pub dispatch: Dispatch,
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
}

/// Picks and dispatches on `pool` as it is now, timing the decision into
/// `infergate_picker_latency_seconds`.
pub fn pick(
    pool: &PoolRuntime,
    features: &RequestFeatures,
    clock: Clock,
) -> Result<Picked, ApiError> {
    let snap = pool.snapshot();
    let now = clock.now();
    let t0 = Instant::now();
    let picked = pool.pick(&snap, features, now);
    pool.observe_decision(t0.elapsed());
    let (pick, dispatch) = picked.map_err(|e| ApiError::no_endpoint(&pool.name, e))?;
    Ok(Picked {
        snap,
        pick,
        dispatch,
    })
}
