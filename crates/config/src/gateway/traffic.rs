//! infergate's traffic extensions: `spec.tenancy`, `spec.flowControl`, `spec.rateLimits` and
//! `spec.rewrites`. The `flow` crate and the gateway act on them; here they are typed and
//! checked.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

use super::duration::GatewayDuration;

/// Priority bands, strictest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
pub enum Band {
    /// Never shed while capacity exists.
    Critical,
    /// The default.
    Standard,
    /// Shed first (429) when the pool saturates.
    Sheddable,
}

impl Band {
    /// All bands, strictest first.
    pub const ALL: [Band; 3] = [Band::Critical, Band::Standard, Band::Sheddable];

    /// The band of an upstream priority (InferenceObjective `priority`): above zero is
    /// Critical, zero Standard, below zero Sheddable (upstream sheds negative priorities first).
    pub fn from_priority(priority: i64) -> Band {
        match priority {
            p if p > 0 => Band::Critical,
            0 => Band::Standard,
            _ => Band::Sheddable,
        }
    }

    /// The `priority` a vLLM server started with `--scheduling-policy priority` is given for
    /// this band (lower is served first): Critical -1, Standard 0, Sheddable 1.
    ///
    /// Standard takes vLLM's default 0, so a request that reaches the server without the field
    /// (another client, a probe) ranks with Standard traffic, and the scale is the upstream
    /// priority negated (upstream: Critical above 0, Sheddable below). Only the order matters
    /// to vLLM, so one step between bands is enough.
    pub fn engine_priority(self) -> i32 {
        match self {
            Band::Critical => -1,
            Band::Standard => 0,
            Band::Sheddable => 1,
        }
    }

    /// A criticality as a header or a JWT claim carries it: a band name (any case) or an
    /// upstream priority integer. `None` for anything else, so the caller applies its default.
    pub fn from_criticality(value: &str) -> Option<Band> {
        let v = value.trim();
        if v.eq_ignore_ascii_case("critical") {
            Some(Band::Critical)
        } else if v.eq_ignore_ascii_case("standard") {
            Some(Band::Standard)
        } else if v.eq_ignore_ascii_case("sheddable") {
            Some(Band::Sheddable)
        } else {
            v.parse::<i64>().ok().map(Band::from_priority)
        }
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `spec.tenancy`: where a request's tenant and criticality come from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tenancy {
    /// The tenant (default: header [`super::defaults::TENANT_HEADER`]).
    #[serde(default)]
    pub tenant: Option<IdentitySource>,
    /// The criticality (default: header [`super::defaults::CRITICALITY_HEADER`]); values are
    /// band names or upstream priority integers.
    #[serde(default)]
    pub criticality: Option<IdentitySource>,
    /// Band of a request that names none (default [`super::defaults::CRITICALITY`]).
    #[serde(default)]
    pub default_criticality: Option<Band>,
}

/// A JWT claim (needs `spec.auth`) or a request header; exactly one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IdentitySource {
    /// A claim of the verified token.
    #[serde(default)]
    pub claim: Option<String>,
    /// A request header (lowercase).
    #[serde(default)]
    pub header: Option<String>,
}

/// `spec.flowControl`: admission, queueing and shedding per pool.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FlowControl {
    /// Queue and shed (default on); off admits every request at once.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// How long a request may wait in a queue before it gets 503.
    #[serde(default)]
    pub queue_ttl: Option<GatewayDuration>,
    /// Requests queued over all bands.
    #[serde(default)]
    pub max_queue_requests: Option<u32>,
    /// Request bytes queued over all bands.
    #[serde(default)]
    pub max_queue_bytes: Option<u64>,
    /// How tenants within a band share dispatch (default round-robin).
    #[serde(default)]
    pub fairness: Option<Fairness>,
    /// Tenant weights for `weighted-fair` (absent tenants weigh 1).
    #[serde(default)]
    pub tenant_weights: BTreeMap<String, u32>,
    /// Per-band limits; a band left out takes the defaults.
    #[serde(default)]
    pub bands: Vec<BandSpec>,
    /// When an endpoint, and so a pool, counts as saturated.
    #[serde(default)]
    pub saturation: Option<Saturation>,
    /// When a backlog counts as an overload, and how long a request then may wait.
    #[serde(default)]
    pub overload: Option<OverloadSpec>,
}

/// `spec.flowControl.overload`: once the pool reads as overloaded (by default: the oldest request
/// below Critical has waited past `maxWait` for another `maxWait`, see [`OverloadSensor`]), a
/// request below Critical that has waited `maxWait` is refused with 429 + Retry-After instead of
/// waiting out its queue TTL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OverloadSpec {
    /// The rule on (default on whenever flow control is).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// How long the overload lasts after the rule's last refusal, and how long every Sheddable
    /// request must have been refused for saturation to count as overload; with the `sojourn`
    /// sensor, also how long the queues below Critical must stay empty to end an overload; with
    /// the `backlog` sensor, how long a queue must have stayed non-empty to count as overloaded.
    #[serde(default)]
    pub interval: Option<GatewayDuration>,
    /// How long a request of an overloaded band may wait.
    #[serde(default)]
    pub max_wait: Option<GatewayDuration>,
    /// KV-cache use holds Standard at all times, as upstream's detector does, instead of only
    /// while the pool is overloaded (default false); Sheddable and Critical are held on it always.
    #[serde(default)]
    pub kv_cache_always: Option<bool>,
    /// A request that has waited `maxWait` is held, up to twice `maxWait`, while the queue
    /// ahead of it drains within `maxWait` at the pool's completion rate (default true).
    #[serde(default)]
    pub hold_while_draining: Option<bool>,
    /// What reads the pool as overloaded (default `sojourn`).
    #[serde(default)]
    pub sensor: Option<OverloadSensor>,
}

/// `spec.flowControl.overload.sensor`: what tells the overload rule that arrivals outrun the
/// pool, after CoDel's idea that a queue is bad when its requests wait long, not when it is
/// merely not empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum OverloadSensor {
    /// The oldest request queued below Critical has waited at least `maxWait` without a break for
    /// another `maxWait`: a backlog the gateway holds during a burst, each request waiting a
    /// fraction of a second, is not an overload.
    #[serde(rename = "sojourn")]
    Sojourn,
    /// A band below Critical has not been empty for `interval` (the rule before 2026-12-05):
    /// reads a burst the gateway holds as overload.
    #[serde(rename = "backlog")]
    Backlog,
}

impl OverloadSensor {
    /// As written.
    pub fn as_str(self) -> &'static str {
        match self {
            OverloadSensor::Sojourn => "sojourn",
            OverloadSensor::Backlog => "backlog",
        }
    }
}

/// Fair sharing among tenants of a band.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Fairness {
    /// Each backlogged tenant in turn.
    #[serde(rename = "round-robin")]
    RoundRobin,
    /// Weighted fair queueing by `tenantWeights`.
    #[serde(rename = "weighted-fair")]
    WeightedFair,
}

impl Fairness {
    /// As written.
    pub fn as_str(self) -> &'static str {
        match self {
            Fairness::RoundRobin => "round-robin",
            Fairness::WeightedFair => "weighted-fair",
        }
    }
}

/// `spec.flowControl.bands[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BandSpec {
    /// Which band.
    pub name: Band,
    /// Requests queued in this band.
    #[serde(default)]
    pub max_queue_requests: Option<u32>,
    /// Request bytes queued in this band.
    #[serde(default)]
    pub max_queue_bytes: Option<u64>,
    /// Queue TTL of this band (default the global one).
    #[serde(default)]
    pub queue_ttl: Option<GatewayDuration>,
    /// Mean pool saturation up to which this band dispatches (default
    /// [`super::defaults::saturation_ceiling`]).
    #[serde(default)]
    pub saturation_ceiling: Option<f64>,
}

/// `spec.flowControl.saturation`: an endpoint's saturation is
/// `max(waiting / queueDepthThreshold, kv / kvCacheThreshold, itl / interTokenLatencyThreshold)`;
/// stale metrics count as saturated.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Saturation {
    /// Waiting requests at saturation.
    #[serde(default)]
    pub queue_depth_threshold: Option<u32>,
    /// KV-cache use at saturation, in (0, 1].
    #[serde(default)]
    pub kv_cache_threshold: Option<f64>,
    /// Metrics older than this are stale.
    #[serde(default)]
    pub metrics_staleness_threshold: Option<GatewayDuration>,
    /// Running requests at saturation for the bands below Critical (default: not counted).
    #[serde(default)]
    pub running_requests_threshold: Option<u32>,
    /// The model server's recent mean inter-token latency at saturation, read as KV-cache use
    /// is; `0s` leaves it out.
    #[serde(default)]
    pub inter_token_latency_threshold: Option<GatewayDuration>,
}

/// `spec.rateLimits`: per-tenant limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RateLimits {
    /// `local` (default) or `redis://…` / `rediss://…` shared by several gateway replicas.
    #[serde(default)]
    pub store: Option<String>,
    /// What to do when the shared store cannot be reached (default fail open).
    #[serde(default)]
    pub on_store_error: Option<StoreFailure>,
    /// How long one call to the shared store may take before it counts as failed.
    #[serde(default)]
    pub store_timeout: Option<GatewayDuration>,
    /// Completion tokens reserved against `tokensPerMinute` for a request that sets neither
    /// `max_tokens` nor `max_completion_tokens` (settled with the real usage afterwards).
    #[serde(default)]
    pub default_max_tokens: Option<u64>,
    /// The limit of every tenant not listed in `tenants`.
    #[serde(default)]
    pub default: Option<RateLimit>,
    /// Limits of named tenants.
    #[serde(default)]
    pub tenants: Vec<TenantRateLimit>,
}

/// A limit; at least one field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RateLimit {
    /// Requests per second.
    #[serde(default)]
    pub requests_per_second: Option<u32>,
    /// Prompt plus completion tokens per minute.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
}

/// `spec.rateLimits.tenants[]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TenantRateLimit {
    /// The tenant.
    pub tenant: String,
    /// Requests per second.
    #[serde(default)]
    pub requests_per_second: Option<u32>,
    /// Prompt plus completion tokens per minute.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
}

impl TenantRateLimit {
    /// The limit itself.
    pub fn limit(&self) -> RateLimit {
        RateLimit {
            requests_per_second: self.requests_per_second,
            tokens_per_minute: self.tokens_per_minute,
        }
    }
}

/// `spec.rateLimits.onStoreError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StoreFailure {
    /// Admit the request (and report the store as down).
    FailOpen,
    /// Refuse the request with 503: the limit cannot be checked, which is the gateway's
    /// failure, not the tenant's.
    FailClosed,
}

/// Where rate-limit counters live, parsed from `store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateLimitStore {
    /// In this process.
    Local,
    /// A Redis server shared by gateway replicas.
    Redis {
        /// The URL as written.
        url: String,
    },
}

impl RateLimitStore {
    /// Parses `local`, `redis://host[:port][/db]` or `rediss://…`.
    pub fn parse(s: &str) -> Result<RateLimitStore, String> {
        if s == "local" {
            return Ok(RateLimitStore::Local);
        }
        let rest = s
            .strip_prefix("redis://")
            .or_else(|| s.strip_prefix("rediss://"))
            .ok_or_else(|| format!("`{s}` is neither `local` nor a redis:// or rediss:// URL"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        if host.is_empty() || host.starts_with(':') {
            return Err(format!("`{s}` names no Redis host"));
        }
        Ok(RateLimitStore::Redis { url: s.to_owned() })
    }
}

/// `spec.rewrites[]`: an InferenceModelRewrite rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelRewrite {
    /// Optional name, for reports.
    #[serde(default)]
    pub name: Option<String>,
    /// Request models this rule applies to.
    pub matches: Vec<RewriteMatch>,
    /// Models to send them to, split by weight.
    pub targets: Vec<RewriteTarget>,
    /// Keeps each session on one target (an infergate extension; default off: every request
    /// is split on its own).
    #[serde(default)]
    pub stickiness: Option<Stickiness>,
}

/// `spec.rewrites[].stickiness`: where a request's session id is read; exactly one field. A
/// request without one is split at random like any other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Stickiness {
    /// A request header (lowercase), such as `x-session-id`.
    #[serde(default)]
    pub header: Option<String>,
    /// A top-level string field of the request body, such as OpenAI's `user`.
    #[serde(default)]
    pub field: Option<String>,
}

/// `matches[]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RewriteMatch {
    /// The model-name match.
    pub model: ModelMatch,
}

/// `matches[].model`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelMatch {
    /// Only `Exact` (the default).
    #[serde(default, rename = "type")]
    pub match_type: Option<MatchType>,
    /// The model name.
    pub value: String,
}

/// `matches[].model.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum MatchType {
    /// The whole name, case-sensitive.
    Exact,
}

/// `targets[]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RewriteTarget {
    /// The model name to send instead.
    pub model_rewrite: String,
    /// Relative weight, at least 1 (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criticality_is_a_band_name_or_an_upstream_priority() {
        assert_eq!(Band::from_criticality("Critical"), Some(Band::Critical));
        assert_eq!(Band::from_criticality(" sheddable "), Some(Band::Sheddable));
        assert_eq!(Band::from_criticality("STANDARD"), Some(Band::Standard));
        assert_eq!(Band::from_criticality("5"), Some(Band::Critical));
        assert_eq!(Band::from_criticality("0"), Some(Band::Standard));
        assert_eq!(Band::from_criticality("-1"), Some(Band::Sheddable));
        for other in ["", "urgent", "1.5", "critical!"] {
            assert_eq!(Band::from_criticality(other), None, "{other:?}");
        }
    }

    #[test]
    fn rate_limit_stores_are_local_or_redis_urls() {
        assert_eq!(RateLimitStore::parse("local"), Ok(RateLimitStore::Local));
        for url in [
            "redis://127.0.0.1:6379/0",
            "rediss://user:pw@cache.internal",
            "redis://r",
        ] {
            assert_eq!(
                RateLimitStore::parse(url),
                Ok(RateLimitStore::Redis { url: url.into() })
            );
        }
        for bad in [
            "",
            "Local",
            "memcached://x",
            "redis://",
            "redis://:6379",
            "redis:///0",
        ] {
            assert!(RateLimitStore::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
