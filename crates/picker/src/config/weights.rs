//! HyperPod's scheduler `weights` block.

use serde::{Deserialize, Serialize};

use crate::profile::{weighted, Profile, WeightedScorer};
use crate::scorer::Scorer;

/// `spec.schedulers[].weights`: non-negative integer weights; 0 turns a scorer off. Absent fields
/// take the documented defaults (queue 2, kvCache 2, prefix 3; the others off).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Weights {
    /// `queue-scorer` weight (default 2).
    pub queue: Option<u32>,
    /// `kv-cache-utilization-scorer` weight (default 2).
    pub kv_cache: Option<u32>,
    /// `prefix-cache-scorer` weight (default 3).
    pub prefix: Option<u32>,
    /// `lora-affinity-scorer` weight (default off).
    pub lora_affinity: Option<u32>,
    /// `running-requests-size-scorer` weight (default off).
    pub running_requests: Option<u32>,
    /// `latency-scorer` weight (default off).
    pub predicted_latency: Option<u32>,
    /// `no-hit-lru-scorer` weight (default off; `scheduler: llm-d` only, which the config crate
    /// checks).
    pub lru: Option<u32>,
}

impl Weights {
    /// Default `queue` weight.
    pub const DEFAULT_QUEUE: u32 = 2;
    /// Default `kvCache` weight.
    pub const DEFAULT_KV_CACHE: u32 = 2;
    /// Default `prefix` weight.
    pub const DEFAULT_PREFIX: u32 = 3;

    /// The scorers these weights turn on, with their weights, in a fixed order.
    pub fn scorers(&self) -> Vec<WeightedScorer> {
        let entries = [
            (Scorer::Queue, self.queue.unwrap_or(Self::DEFAULT_QUEUE)),
            (
                Scorer::KvCache,
                self.kv_cache.unwrap_or(Self::DEFAULT_KV_CACHE),
            ),
            (Scorer::Prefix, self.prefix.unwrap_or(Self::DEFAULT_PREFIX)),
            (Scorer::LoraAffinity, self.lora_affinity.unwrap_or(0)),
            (Scorer::RunningRequests, self.running_requests.unwrap_or(0)),
            (
                Scorer::PredictedLatency,
                self.predicted_latency.unwrap_or(0),
            ),
            (Scorer::NoHitLru, self.lru.unwrap_or(0)),
        ];
        entries
            .into_iter()
            .filter(|(_, w)| *w > 0)
            .map(|(s, w)| weighted(s, f64::from(w)))
            .collect()
    }

    /// The profile: these scorers with infergate's mechanics (stale exclusion, dispatch credit,
    /// rotated ties; see [`Profile::with_scorers`]).
    pub fn to_profile(&self, name: &str) -> Profile {
        Profile::with_scorers(name, self.scorers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_fields_take_the_documented_defaults() {
        let w: Weights = serde_json::from_str("{}").unwrap();
        assert_eq!(
            w.scorers(),
            vec![
                weighted(Scorer::Queue, 2.0),
                weighted(Scorer::KvCache, 2.0),
                weighted(Scorer::Prefix, 3.0)
            ]
        );
    }

    #[test]
    fn zero_turns_a_scorer_off_and_others_turn_on() {
        let w: Weights = serde_json::from_str(
            r#"{"queue": 0, "loraAffinity": 1, "predictedLatency": 5, "lru": 2}"#,
        )
        .unwrap();
        let p = w.to_profile("pool-a");
        let kinds: Vec<(&str, f64)> = p
            .scorers
            .iter()
            .map(|s| (s.scorer.plugin_type(), s.weight))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("kv-cache-utilization-scorer", 2.0),
                ("prefix-cache-scorer", 3.0),
                ("lora-affinity-scorer", 1.0),
                ("latency-scorer", 5.0),
                ("no-hit-lru-scorer", 2.0),
            ]
        );
        assert_eq!(p.name, "pool-a");
    }

    #[test]
    fn unknown_and_negative_fields_are_rejected() {
        let err = serde_json::from_str::<Weights>(r#"{"queue": 1, "latency": 2}"#).unwrap_err();
        assert!(err.to_string().contains("latency"), "{err}");
        assert!(serde_json::from_str::<Weights>(r#"{"queue": -1}"#).is_err());
    }
}
