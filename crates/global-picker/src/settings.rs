//! The settings the decisions read, taken once from the resolved config.

use std::time::Duration;

use infergate_config::global::{RegionLatencies, ResolvedGlobal, ScoreWeights};
use infergate_picker::OutlierPolicy;

/// What the tier's decisions need from its config.
#[derive(Debug, Clone, PartialEq)]
pub struct TierSettings {
    /// The score's weights.
    pub weights: ScoreWeights,
    /// Saturation from which a member has no headroom.
    pub spill_at: f64,
    /// How often each member's status is pulled.
    pub status_interval: Duration,
    /// Misses before stale.
    pub misses_before_stale: u32,
    /// Good pulls before a stale member returns.
    pub pulls_before_return: u32,
    /// Slow-start window.
    pub slow_start_window: Duration,
    /// Slow-start aggression.
    pub slow_start_aggression: f64,
    /// Slow-start least weight, a fraction.
    pub slow_start_min_weight: f64,
    /// Passive outlier detection on the data path.
    pub outlier: OutlierPolicy,
    /// The region a caller that names none is in.
    pub home_region: Option<String>,
    /// Round trips between pairs of regions; proximity is measured against the farthest.
    pub region_latencies: RegionLatencies,
}

impl TierSettings {
    /// The settings of `g`.
    pub fn from_resolved(g: &ResolvedGlobal) -> Self {
        Self {
            weights: g.routing.weights.value,
            spill_at: g.routing.spill_at.value,
            status_interval: g.status.interval.value,
            misses_before_stale: g.status.misses_before_stale.value,
            pulls_before_return: g.status.pulls_before_return.value,
            slow_start_window: g.slow_start.window.value,
            slow_start_aggression: g.slow_start.aggression.value,
            slow_start_min_weight: g.slow_start.min_weight.value,
            outlier: OutlierPolicy {
                consecutive_failures: g.outlier.consecutive_failures.value,
                base_ejection: g.outlier.base_ejection_time.value,
                max_ejection: g.outlier.max_ejection_time.value,
                // The table decides the room itself (all but one member).
                max_ejected_share: 1.0,
                // The tier ramps a returning member itself, with Envoy's formula.
                slow_start: Duration::ZERO,
                frozen_metrics_after: Duration::ZERO,
            },
            home_region: g.region.clone(),
            region_latencies: g.region_latencies.clone(),
        }
    }

    /// How close a member in `member_region` is to a caller in `caller`, in [0, 1]: 1 in the
    /// same region; with configured round trips, 1 − rtt / the farthest configured (a pair not
    /// listed counts as the farthest); without any, 0 for every other region. A caller in no
    /// known region is equally near every member (0.5), so proximity decides nothing.
    pub fn proximity(&self, caller: Option<&str>, member_region: &str) -> f64 {
        let Some(caller) = caller.or(self.home_region.as_deref()) else {
            return 0.5;
        };
        if caller == member_region {
            return 1.0;
        }
        let Some(farthest) = self.region_latencies.farthest().filter(|f| !f.is_zero()) else {
            return 0.0;
        };
        let rtt = self
            .region_latencies
            .between(caller, member_region)
            .unwrap_or(farthest);
        (1.0 - rtt.as_secs_f64() / farthest.as_secs_f64()).clamp(0.0, 1.0)
    }
}
