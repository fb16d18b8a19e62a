//! Tenancy, flow control and rate limits with their defaults applied.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Setting;
use crate::gateway::defaults;
use crate::gateway::traffic::{
    Band, Fairness, FlowControl, IdentitySource, OverloadSensor, RateLimit, RateLimitStore,
    RateLimits, StoreFailure, Tenancy,
};

/// Where a piece of identity is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A claim of the verified JWT.
    Claim(String),
    /// A request header.
    Header(String),
}

impl Identity {
    fn from_source(src: &IdentitySource) -> Option<Identity> {
        match (&src.claim, &src.header) {
            (Some(c), _) => Some(Identity::Claim(c.clone())),
            (None, Some(h)) => Some(Identity::Header(h.clone())),
            (None, None) => None,
        }
    }
}

/// `spec.tenancy`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTenancy {
    /// Where the tenant comes from.
    pub tenant: Setting<Identity>,
    /// Where the criticality comes from.
    pub criticality: Setting<Identity>,
    /// Band of a request that names none.
    pub default_criticality: Setting<Band>,
    /// InferenceObjectives by name → their `priority`: a criticality header naming one gives
    /// that priority's band. Filled from the cluster (`extproc --pool-name`); empty from a file.
    pub objectives: std::collections::BTreeMap<String, i64>,
}

impl ResolvedTenancy {
    pub(crate) fn new(t: Option<&Tenancy>) -> ResolvedTenancy {
        let t = t.cloned().unwrap_or_default();
        let pick = |src: &Option<IdentitySource>, header: &str| {
            Setting::or(
                src.as_ref().and_then(Identity::from_source),
                Identity::Header(header.to_owned()),
            )
        };
        ResolvedTenancy {
            tenant: pick(&t.tenant, defaults::TENANT_HEADER),
            criticality: pick(&t.criticality, defaults::CRITICALITY_HEADER),
            default_criticality: Setting::or(t.default_criticality, defaults::CRITICALITY),
            objectives: std::collections::BTreeMap::new(),
        }
    }
}

/// `spec.flowControl`, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedFlowControl {
    /// Queueing and shedding on.
    pub enabled: Setting<bool>,
    /// Queue TTL of a band that sets none.
    pub queue_ttl: Setting<Duration>,
    /// Requests queued over all bands.
    pub max_queue_requests: Setting<u32>,
    /// Bytes queued over all bands.
    pub max_queue_bytes: Setting<u64>,
    /// Sharing among tenants of a band.
    pub fairness: Setting<Fairness>,
    /// Tenant weights for weighted-fair.
    pub tenant_weights: BTreeMap<String, u32>,
    /// Critical, Standard, Sheddable, in that order.
    pub bands: [ResolvedBand; 3],
    /// Saturation detector thresholds.
    pub saturation: ResolvedSaturation,
    /// The overload rule.
    pub overload: ResolvedOverload,
}

/// `spec.flowControl.overload`, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedOverload {
    /// The rule on.
    pub enabled: Setting<bool>,
    /// How long the overload outlasts the rule's last refusal; with the sojourn sensor, how
    /// long the queues below Critical must stay empty to end it; with the backlog sensor, how
    /// long a queue must stay non-empty to start it.
    pub interval: Setting<Duration>,
    /// How long a request of an overloaded band may wait.
    pub max_wait: Setting<Duration>,
    /// KV-cache use holds Standard at all times, not only in overload.
    pub kv_cache_always: Setting<bool>,
    /// A request past its wait is held while the queue ahead of it drains within the wait.
    pub hold_while_draining: Setting<bool>,
    /// What reads the pool as overloaded.
    pub sensor: Setting<OverloadSensor>,
}

/// One band's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedBand {
    /// Which.
    pub band: Band,
    /// Requests queued.
    pub max_queue_requests: Setting<u32>,
    /// Bytes queued.
    pub max_queue_bytes: Setting<u64>,
    /// Queue TTL.
    pub queue_ttl: Setting<Duration>,
    /// Mean pool saturation up to which the band dispatches.
    pub saturation_ceiling: Setting<f64>,
}

/// Saturation detector thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedSaturation {
    /// Waiting requests at saturation.
    pub queue_depth_threshold: Setting<u32>,
    /// KV-cache use at saturation.
    pub kv_cache_threshold: Setting<f64>,
    /// Metrics older than this are stale.
    pub metrics_staleness_threshold: Setting<Duration>,
    /// Running requests at saturation for the bands below Critical; `None`: not counted.
    pub running_requests_threshold: Option<u32>,
    /// Recent mean inter-token latency at saturation; zero: not counted.
    pub inter_token_latency_threshold: Setting<Duration>,
}

impl Default for ResolvedFlowControl {
    /// What a config that says nothing about flow control resolves to.
    fn default() -> Self {
        Self::new(None)
    }
}

impl ResolvedFlowControl {
    pub(super) fn new(f: Option<&FlowControl>) -> ResolvedFlowControl {
        let f = f.cloned().unwrap_or_default();
        let queue_ttl = Setting::or(f.queue_ttl.map(|t| t.get()), defaults::QUEUE_TTL);
        let band = |band: Band| {
            let spec = f.bands.iter().find(|b| b.name == band);
            ResolvedBand {
                band,
                max_queue_requests: Setting::or(
                    spec.and_then(|b| b.max_queue_requests),
                    defaults::BAND_MAX_QUEUE_REQUESTS,
                ),
                max_queue_bytes: Setting::or(
                    spec.and_then(|b| b.max_queue_bytes),
                    defaults::BAND_MAX_QUEUE_BYTES,
                ),
                queue_ttl: match spec.and_then(|b| b.queue_ttl) {
                    Some(t) => Setting::set(t.get()),
                    None => queue_ttl,
                },
                saturation_ceiling: Setting::or(
                    spec.and_then(|b| b.saturation_ceiling),
                    defaults::saturation_ceiling(band),
                ),
            }
        };
        let s = f.saturation.clone().unwrap_or_default();
        let o = f.overload.clone().unwrap_or_default();
        ResolvedFlowControl {
            enabled: Setting::or(f.enabled, defaults::FLOW_CONTROL_ENABLED),
            queue_ttl,
            max_queue_requests: Setting::or(f.max_queue_requests, defaults::MAX_QUEUE_REQUESTS),
            max_queue_bytes: Setting::or(f.max_queue_bytes, defaults::MAX_QUEUE_BYTES),
            fairness: Setting::or(f.fairness, defaults::FAIRNESS),
            tenant_weights: f.tenant_weights.clone(),
            bands: Band::ALL.map(band),
            saturation: ResolvedSaturation {
                queue_depth_threshold: Setting::or(
                    s.queue_depth_threshold,
                    defaults::SATURATION_QUEUE_DEPTH,
                ),
                kv_cache_threshold: Setting::or(
                    s.kv_cache_threshold,
                    defaults::SATURATION_KV_CACHE,
                ),
                metrics_staleness_threshold: Setting::or(
                    s.metrics_staleness_threshold.map(|t| t.get()),
                    defaults::METRICS_STALENESS,
                ),
                running_requests_threshold: s.running_requests_threshold,
                inter_token_latency_threshold: Setting::or(
                    s.inter_token_latency_threshold.map(|t| t.get()),
                    defaults::SATURATION_INTER_TOKEN_LATENCY,
                ),
            },
            overload: ResolvedOverload {
                enabled: Setting::or(o.enabled, defaults::OVERLOAD_ENABLED),
                interval: Setting::or(o.interval.map(|t| t.get()), defaults::OVERLOAD_INTERVAL),
                max_wait: Setting::or(o.max_wait.map(|t| t.get()), defaults::OVERLOAD_MAX_WAIT),
                kv_cache_always: Setting::or(o.kv_cache_always, defaults::OVERLOAD_KV_CACHE_ALWAYS),
                hold_while_draining: Setting::or(
                    o.hold_while_draining,
                    defaults::OVERLOAD_HOLD_WHILE_DRAINING,
                ),
                sensor: Setting::or(o.sensor, defaults::OVERLOAD_SENSOR),
            },
        }
    }
}

/// `spec.rateLimits`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRateLimits {
    /// Where counters live.
    pub store: Setting<RateLimitStore>,
    /// What a shared store's outage does.
    pub on_store_error: Setting<StoreFailure>,
    /// How long one call to the shared store may take.
    pub store_timeout: Setting<Duration>,
    /// Completion tokens reserved for a request that names no maximum.
    pub default_max_tokens: Setting<u64>,
    /// The limit of a tenant not listed.
    pub default: Option<RateLimit>,
    /// Named tenants' limits.
    pub tenants: BTreeMap<String, RateLimit>,
}

impl ResolvedRateLimits {
    pub(crate) fn new(r: &RateLimits) -> ResolvedRateLimits {
        ResolvedRateLimits {
            store: Setting::or(
                r.store
                    .as_deref()
                    .and_then(|s| RateLimitStore::parse(s).ok()),
                defaults::RATE_LIMIT_STORE,
            ),
            on_store_error: Setting::or(r.on_store_error, defaults::STORE_FAILURE),
            store_timeout: Setting::or(
                r.store_timeout.map(|t| t.get()),
                defaults::RATE_LIMIT_STORE_TIMEOUT,
            ),
            default_max_tokens: Setting::or(r.default_max_tokens, defaults::RATE_LIMIT_MAX_TOKENS),
            default: r.default,
            tenants: r
                .tenants
                .iter()
                .map(|t| (t.tenant.clone(), t.limit()))
                .collect(),
        }
    }
}
