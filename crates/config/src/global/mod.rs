//! `GlobalGatewayConfig` (`infergate.dev/v1alpha1`): the global tier's file — the member
//! gateways it sends to, how it reads their status, how it scores them, and how it treats one
//! that fails. `docs/global.md` describes every field; this module holds the types, the
//! defaults ([`defaults`]), the validation with field-named errors and the resolved form
//! ([`ResolvedGlobal`]) that `infergate check` prints and `infergate global` runs.

mod report;
mod resolve;

pub mod defaults;

use serde::Deserialize;

use crate::gateway::{Auth, GatewayConfigError, GatewayDuration, ObjectMeta, RateLimits, Tenancy};

pub use resolve::{
    MemberCost, MemberEndpoint, RegionLatencies, ResolvedGlobal, ResolvedMember, ResolvedMemberTls,
    ResolvedOutlier, ResolvedRouting, ResolvedSlowStart, ResolvedStatusPull, ScoreWeights,
};

/// The only `kind` this file may have.
pub const GLOBAL_KIND: &str = "GlobalGatewayConfig";

/// A `GlobalGatewayConfig` document as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GlobalGatewayConfig {
    /// Must be `infergate.dev/v1alpha1`.
    pub api_version: String,
    /// Must be `GlobalGatewayConfig`.
    pub kind: String,
    /// Its name.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the tier does.
    pub spec: GlobalSpec,
}

/// `spec`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GlobalSpec {
    /// Data-plane listener, `host:port` (default `0.0.0.0:8080`; `--listen` wins).
    #[serde(default)]
    pub listen: Option<String>,
    /// Admin listener (`/metrics`, `/healthz`, `/readyz`, `/status/global`), `host:port`
    /// (default `0.0.0.0:9090`; `--admin-listen` wins).
    #[serde(default)]
    pub admin_listen: Option<String>,
    /// The region this tier's replica runs in: a caller that names none is this close.
    #[serde(default)]
    pub region: Option<String>,
    /// The request header naming the caller's region (default `x-infergate-region`).
    #[serde(default)]
    pub region_header: Option<String>,
    /// Round-trip times between regions; a pair not listed is as far as the farthest listed
    /// (or, with none listed, simply "another region").
    #[serde(default)]
    pub region_latencies: Vec<RegionLatency>,
    /// The member gateways.
    pub members: Vec<MemberSpec>,
    /// How each member's status document is pulled.
    #[serde(default)]
    pub status: Option<StatusPullSpec>,
    /// How a member is chosen.
    #[serde(default)]
    pub routing: Option<RoutingSpec>,
    /// Passive outlier detection on the data path.
    #[serde(default)]
    pub outlier_detection: Option<MemberOutlierSpec>,
    /// The ramp a returning member comes back through.
    #[serde(default)]
    pub slow_start: Option<SlowStartSpec>,
    /// JWT authentication of callers, as `InferenceGatewayConfig`'s `spec.auth`.
    #[serde(default)]
    pub auth: Option<Auth>,
    /// Where a request's tenant and band come from, as `InferenceGatewayConfig`'s.
    #[serde(default)]
    pub tenancy: Option<Tenancy>,
    /// Per-tenant limits, as `InferenceGatewayConfig`'s `spec.rateLimits`: with
    /// `store: redis://…`, shared by every replica of the tier pointed at that Redis.
    #[serde(default)]
    pub rate_limits: Option<RateLimits>,
}

/// `spec.regionLatencies[]`: one pair of regions, either order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegionLatency {
    /// One region.
    pub from: String,
    /// The other.
    pub to: String,
    /// The round trip between them.
    pub latency: GatewayDuration,
}

/// `spec.members[]`: one member gateway.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemberSpec {
    /// Unique among the members; a DNS label (it is a metric label value).
    pub name: String,
    /// Its data plane, `http://host:port` or `https://host:port`.
    pub url: String,
    /// Its admin listener, `http://host:port` or `https://…`, where `/status/member` is read.
    pub admin_url: String,
    /// How an `https` URL's certificate is checked (absent: against the platform's trusted
    /// CAs, for the URL's host name).
    #[serde(default)]
    pub tls: Option<MemberTlsSpec>,
    /// Its region.
    pub region: String,
    /// Its zone, informative (shown in status and metrics).
    #[serde(default)]
    pub zone: Option<String>,
    /// What its GPUs cost; absent: every member costs the same.
    #[serde(default)]
    pub cost: Option<CostSpec>,
    /// The capacity of one of its endpoints relative to other members' (default 1; 2 for GPUs
    /// twice as fast): its queue term falls half as fast per request in flight. Its number of
    /// endpoints is read from its status, so its size needs no weight.
    #[serde(default)]
    pub weight: Option<f64>,
    /// A file holding a bearer token sent to the member on every request and status pull
    /// (replacing the caller's `Authorization`, which the member would not accept).
    #[serde(default)]
    pub bearer_token_file: Option<String>,
}

/// `spec.members[].tls`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemberTlsSpec {
    /// A PEM file of the CA certificates to trust instead of the platform's.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// The name the certificate must carry, when not the URL's host (an IP address URL, say).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// `spec.members[].cost`: one of the two.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CostSpec {
    /// Price per GPU-hour, any currency (the same for every member).
    #[serde(default)]
    pub per_gpu_hour: Option<f64>,
    /// A cost tier: 0 is the cheapest.
    #[serde(default)]
    pub tier: Option<u32>,
}

/// `spec.status`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StatusPullSpec {
    /// Between pulls of one member (default 1 s), jittered by up to a tenth either way.
    #[serde(default)]
    pub interval: Option<GatewayDuration>,
    /// One pull's deadline (default 500 ms); below the interval.
    #[serde(default)]
    pub timeout: Option<GatewayDuration>,
    /// Pulls in a row that failed, or whose sequence did not advance, before the member is
    /// stale and leaves the candidates (default 3).
    #[serde(default)]
    pub misses_before_stale: Option<u32>,
    /// Good pulls in a row before a stale member is a candidate again (default 2).
    #[serde(default)]
    pub pulls_before_return: Option<u32>,
}

/// `spec.routing`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RoutingSpec {
    /// The score's weights: all four or none, each in [0, 1], summing to 1 ± 0.001.
    #[serde(default)]
    pub weights: Option<WeightsSpec>,
    /// Pool saturation (the member's own flow-control detector) from which a member counts as
    /// out of headroom: cheaper members are filled up to it, and a member at or over 1 is
    /// saturated (default 0.8).
    #[serde(default)]
    pub spill_at: Option<f64>,
    /// Members tried for one request, the first included, when an earlier one fails before its
    /// first byte (default 3).
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Connect deadline per attempt (default 1 s): a black-holed member fails here.
    #[serde(default)]
    pub connect_timeout: Option<GatewayDuration>,
    /// Deadline for a member's response headers (default 300 s).
    #[serde(default)]
    pub first_byte_timeout: Option<GatewayDuration>,
}

/// `spec.routing.weights` (AWS's `Routing.Weights`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WeightsSpec {
    /// Free KV cache on the member.
    pub kv_headroom: Option<f64>,
    /// Requests waiting on the member.
    pub queue_depth: Option<f64>,
    /// Closeness to the caller's region.
    pub region_proximity: Option<f64>,
    /// The member's recent error rate.
    pub error_rate: Option<f64>,
}

/// `spec.outlierDetection`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemberOutlierSpec {
    /// Connect failures or 5xx answers in a row that eject a member (default 5; 0: off).
    #[serde(default)]
    pub consecutive_failures: Option<u32>,
    /// First ejection (default 30 s); each repeat doubles it.
    #[serde(default)]
    pub base_ejection_time: Option<GatewayDuration>,
    /// Longest ejection (default 300 s).
    #[serde(default)]
    pub max_ejection_time: Option<GatewayDuration>,
}

/// `spec.slowStart` (Envoy's `slow_start_config`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SlowStartSpec {
    /// How long the ramp lasts (default 30 s; `0s`: none).
    #[serde(default)]
    pub window: Option<GatewayDuration>,
    /// The ramp's curve: 1 linear, above 1 faster at first (default 1).
    #[serde(default)]
    pub aggression: Option<f64>,
    /// The least weight, percent, a returning member starts with (default 10).
    #[serde(default)]
    pub min_weight_percent: Option<u32>,
}

/// Parses, validates and resolves a `GlobalGatewayConfig` document.
pub fn load_global_from_str(yaml: &str) -> Result<ResolvedGlobal, GatewayConfigError> {
    let config: GlobalGatewayConfig = serde_norway::from_str(yaml)?;
    resolve::resolve(&config)
}

/// Whether a YAML document declares `kind: GlobalGatewayConfig` (so `infergate check` knows
/// which file it was given) — read without validating anything else.
pub fn is_global_config(yaml: &str) -> bool {
    #[derive(Deserialize)]
    struct KindOnly {
        #[serde(default)]
        kind: Option<String>,
    }
    serde_norway::from_str::<KindOnly>(yaml)
        .ok()
        .and_then(|k| k.kind)
        .is_some_and(|k| k == GLOBAL_KIND)
}

#[cfg(test)]
mod tests;
