//! What a [`crate::FlowController`] needs from `spec.flowControl`, as plain values.

use std::collections::BTreeMap;
use std::time::Duration;

use infergate_config::gateway::{Band, Fairness, OverloadSensor, ResolvedFlowControl};

/// An observation older than this is never trusted, however lax the metrics' own staleness
/// threshold: a pool whose scrapes all stopped landing says nothing about now.
const MIN_STATE_MAX_AGE: Duration = Duration::from_secs(1);

/// One band's queue limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandLimits {
    /// Requests queued in the band.
    pub max_queue_requests: u32,
    /// Request bytes queued in the band.
    pub max_queue_bytes: u64,
    /// How long a request may wait before it is refused with 503.
    pub queue_ttl: Duration,
}

/// When a backlog is an overload rather than a burst (`spec.flowControl.overload`), after
/// CoDel's idea: a queue whose requests wait a little is absorbing a burst, and waiting in it
/// pays; a queue whose oldest request has waited past `max_wait` without a break for another
/// `max_wait` ([`OverloadSensor::Sojourn`]) is fed faster than the pool serves, and every
/// request waiting in it grows the wait of every request behind it. Then a request that has
/// waited `max_wait` is refused (429 + Retry-After) instead of waiting out its TTL, so the
/// requests that are dispatched are the ones that can still be answered in time.
///
/// Applies to the bands below Critical; Critical waits out its own TTL.
///
/// With `kv_only_in_overload`, KV-cache use holds Standard only while the pool is overloaded
/// (as the sensor reads it; Sheddable and Critical are held against every signal at all
/// times): a model server runs near its KV
/// threshold while it still admits work, so holding requests on KV use alone leaves capacity
/// unused below overload; in overload the same signal keeps the batches short enough for the
/// answered requests' time per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overload {
    /// How long the overload outlasts the rule's last refusal, and how long every Sheddable
    /// request must have been refused for saturation to count as overload; with
    /// [`OverloadSensor::Sojourn`], how long the bands below Critical must stay empty to end an
    /// overload; with [`OverloadSensor::Backlog`], how long a band's queue must have stayed
    /// non-empty.
    pub interval: Duration,
    /// How long a request of an overloaded band may wait.
    pub max_wait: Duration,
    /// KV-cache use holds Standard only while the pool is overloaded (Sheddable and Critical
    /// at all times).
    pub kv_only_in_overload: bool,
    /// The oldest request of an overloaded band, past `max_wait`, is held (to twice
    /// `max_wait` at most) while what is queued in its band and above drains within `max_wait`
    /// at the pool's completion rate: a burst passing rather than arrivals outrunning the pool.
    pub hold_while_draining: bool,
    /// What reads the pool as overloaded.
    pub sensor: OverloadSensor,
}

/// Flow control settings of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowConfig {
    /// Queue and shed; off, every request is dispatched at once.
    pub enabled: bool,
    /// Critical, Standard, Sheddable, in that order.
    pub bands: [BandLimits; 3],
    /// Requests queued over all bands.
    pub max_queue_requests: u32,
    /// Request bytes queued over all bands.
    pub max_queue_bytes: u64,
    /// How tenants of a band share dispatch.
    pub fairness: Fairness,
    /// Tenant weights under weighted-fair (a tenant not listed weighs 1).
    pub tenant_weights: BTreeMap<String, u32>,
    /// A pool observation older than this is ignored (flow control fails open until the next).
    pub state_max_age: Duration,
    /// The overload rule, if on.
    pub overload: Option<Overload>,
}

/// Position of `band` in per-band arrays: Critical 0, Standard 1, Sheddable 2.
pub fn band_index(band: Band) -> usize {
    match band {
        Band::Critical => 0,
        Band::Standard => 1,
        Band::Sheddable => 2,
    }
}

impl FlowConfig {
    /// The settings `spec.flowControl` describes.
    pub fn from_resolved(f: &ResolvedFlowControl) -> Self {
        let band = |i: usize| {
            let b = &f.bands[i];
            BandLimits {
                max_queue_requests: b.max_queue_requests.value,
                max_queue_bytes: b.max_queue_bytes.value,
                queue_ttl: b.queue_ttl.value,
            }
        };
        Self {
            enabled: f.enabled.value,
            bands: [band(0), band(1), band(2)],
            max_queue_requests: f.max_queue_requests.value,
            max_queue_bytes: f.max_queue_bytes.value,
            fairness: f.fairness.value,
            tenant_weights: f.tenant_weights.clone(),
            state_max_age: f
                .saturation
                .metrics_staleness_threshold
                .value
                .max(MIN_STATE_MAX_AGE),
            overload: f.overload.enabled.value.then_some(Overload {
                interval: f.overload.interval.value,
                max_wait: f.overload.max_wait.value,
                kv_only_in_overload: !f.overload.kv_cache_always.value,
                hold_while_draining: f.overload.hold_while_draining.value,
                sensor: f.overload.sensor.value,
            }),
        }
    }

    /// The limits of `band`.
    pub fn band(&self, band: Band) -> &BandLimits {
        &self.bands[band_index(band)]
    }

    /// The weight `tenant` is served with: 1 under round-robin, its configured weight (at least
    /// 1) under weighted-fair.
    pub fn weight(&self, tenant: &str) -> u32 {
        match self.fairness {
            Fairness::RoundRobin => 1,
            Fairness::WeightedFair => self.tenant_weights.get(tenant).copied().unwrap_or(1).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(flow: &str) -> ResolvedFlowControl {
        let yaml = format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  schedulers:\n    - name: a\n      modelName: m\n      modelSelector: {{matchLabels: {{app: a}}}}\n{flow}"
        );
        infergate_config::gateway::load_from_str(&yaml)
            .unwrap()
            .resolve()
            .unwrap()
            .flow_control
    }

    #[test]
    fn settings_follow_the_config_and_its_defaults() {
        let c = FlowConfig::from_resolved(&resolve(
            "  flowControl:\n    queueTtl: 5s\n    maxQueueRequests: 10\n    fairness: weighted-fair\n    tenantWeights: {a: 3}\n    bands:\n      - {name: Sheddable, maxQueueRequests: 2, queueTtl: 1s}\n",
        ));
        assert!(c.enabled);
        assert_eq!(c.max_queue_requests, 10);
        assert_eq!(c.band(Band::Critical).queue_ttl, Duration::from_secs(5));
        assert_eq!(c.band(Band::Sheddable).queue_ttl, Duration::from_secs(1));
        assert_eq!(c.band(Band::Sheddable).max_queue_requests, 2);
        assert_eq!(c.band(Band::Standard).max_queue_requests, 1_024);
        assert_eq!((c.weight("a"), c.weight("b")), (3, 1));
        // The default staleness (200 ms) is below the floor.
        assert_eq!(c.state_max_age, MIN_STATE_MAX_AGE);

        let rr = FlowConfig::from_resolved(&resolve(""));
        assert_eq!(rr.fairness, Fairness::RoundRobin);
        assert_eq!(rr.band(Band::Standard).queue_ttl, Duration::from_secs(30));
        assert_eq!(rr.weight("anyone"), 1);
    }
}
