//! Named policies: infergate's own and the baselines it is measured against
//! (`shared/reference/benchmarks.md`, "Policies").

use std::str::FromStr;
use std::time::Duration;

use crate::error::ConfigError;
use crate::filter::Filter;
use crate::prefix::PrefixParams;
use crate::profile::{Profile, DEFAULT_MAX_METRICS_AGE};

/// `sglang-cache-aware` thresholds, as sglang-router publishes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SglangParams {
    /// Load is imbalanced when `max − min` exceeds this (in-flight requests)…
    pub balance_abs_threshold: f64,
    /// …and `max` exceeds `min` times this.
    pub balance_rel_threshold: f64,
    /// A prefix match ratio above this goes to the matching endpoint.
    pub cache_threshold: f64,
}

impl Default for SglangParams {
    fn default() -> Self {
        Self {
            balance_abs_threshold: 64.0,
            balance_rel_threshold: 1.5,
            cache_threshold: 0.3,
        }
    }
}

/// Keep-alive connections of `k8s-service`: a client pool of this many connections (32 is
/// within the defaults of common HTTP client pools, and several per pod on the benchmark's
/// fleets, so the imbalance measured is the Service's, not a starved pool's).
pub const K8S_SERVICE_CONNECTIONS: u32 = 32;

/// A picking policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// `round-robin`: cycle through the endpoints (the Kubernetes Service baseline).
    RoundRobin,
    /// `random`: uniform.
    Random,
    /// `least-request`: power of two choices on gateway-local in-flight requests (Envoy's
    /// LEAST_REQUEST).
    LeastRequest,
    /// `sglang-cache-aware`: least in-flight when imbalanced, else the longest prefix match when
    /// its ratio (over the whole prompt) is over the threshold, else the endpoint whose tree
    /// holds the least — sglang-router's `cache_aware` as it ships.
    SglangCacheAware(SglangParams),
    /// `k8s-service`: what a Kubernetes Service does to keep-alive traffic. kube-proxy balances
    /// connections, not requests: each of the client's `connections` is pinned to a pod chosen
    /// at random when it opens, and requests take the connections in turn. A connection whose
    /// pod left is reopened to a random pod.
    K8sService {
        /// Keep-alive connections the clients hold to the Service.
        connections: u32,
    },
    /// `dynamo-kv`: lowest `new prefill blocks + active decode blocks`, ties at random.
    DynamoKv,
    /// A weighted profile: `gie-default`, `infergate`, or one built from configuration.
    Weighted(Profile),
}

impl Policy {
    /// Every named policy.
    pub const NAMES: [&'static str; 8] = [
        "round-robin",
        "k8s-service",
        "random",
        "least-request",
        "gie-default",
        "sglang-cache-aware",
        "dynamo-kv",
        "infergate",
    ];

    /// The policy called `name` (one of [`Policy::NAMES`]).
    pub fn named(name: &str) -> Result<Self, ConfigError> {
        Ok(match name {
            "round-robin" => Policy::RoundRobin,
            "k8s-service" => Policy::K8sService {
                connections: K8S_SERVICE_CONNECTIONS,
            },
            "random" => Policy::Random,
            "least-request" => Policy::LeastRequest,
            "gie-default" => Policy::Weighted(Profile::gie_default()),
            "sglang-cache-aware" => Policy::SglangCacheAware(SglangParams::default()),
            "dynamo-kv" => Policy::DynamoKv,
            "infergate" => Policy::Weighted(Profile::infergate()),
            other => return Err(ConfigError::UnknownPolicy(other.to_owned())),
        })
    }

    /// infergate's default policy.
    pub fn infergate() -> Self {
        Policy::Weighted(Profile::infergate())
    }

    /// The policy's name (a weighted profile's own name).
    pub fn name(&self) -> &str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::K8sService { .. } => "k8s-service",
            Policy::Random => "random",
            Policy::LeastRequest => "least-request",
            Policy::SglangCacheAware(_) => "sglang-cache-aware",
            Policy::DynamoKv => "dynamo-kv",
            Policy::Weighted(p) => &p.name,
        }
    }

    /// Prefix index parameters (the defaults for the fixed policies; sglang-router matches the
    /// whole prompt, not its first 256 blocks).
    pub fn prefix_params(&self) -> PrefixParams {
        match self {
            Policy::Weighted(p) => p.prefix,
            Policy::SglangCacheAware(_) => PrefixParams {
                max_prefix_blocks: usize::MAX,
                ..PrefixParams::default()
            },
            _ => PrefixParams::default(),
        }
    }

    /// The oldest scrape that counts as fresh: the stale filter's `max_age` in a weighted
    /// profile that has one, [`DEFAULT_MAX_METRICS_AGE`] otherwise (a policy without the filter
    /// picks stale endpoints too, but an operator's view still calls them stale).
    pub fn max_metrics_age(&self) -> Duration {
        match self {
            Policy::Weighted(profile) => profile.filters.iter().find_map(|f| match f {
                Filter::Stale { max_age } => Some(*max_age),
                _ => None,
            }),
            _ => None,
        }
        .unwrap_or(DEFAULT_MAX_METRICS_AGE)
    }

    /// Whether anything reads the prefix index (the match, or whether a block is known at all):
    /// policies that do not are spared its memory.
    pub(crate) fn uses_index(&self) -> bool {
        self.needs_prefix()
            || matches!(self, Policy::Weighted(p) if p.scorers.iter().any(|s| s.scorer == crate::scorer::Scorer::NoHitLru))
    }

    pub(crate) fn needs_prefix(&self) -> bool {
        match self {
            Policy::SglangCacheAware(_) | Policy::DynamoKv => true,
            Policy::Weighted(p) => p.needs_prefix(),
            _ => false,
        }
    }
}

impl FromStr for Policy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::named(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_and_unknown_names_are_errors() {
        for name in Policy::NAMES {
            assert_eq!(Policy::named(name).unwrap().name(), name);
        }
        assert_eq!(
            "fastest".parse::<Policy>().unwrap_err(),
            ConfigError::UnknownPolicy("fastest".into())
        );
    }
}
