//! HyperPod's scheduler `weights` block becomes the picker's scorers here.
//!
//! The block's format and its defaults live in the config crate
//! (`infergate_config::gateway::{Weights, EffectiveWeights}`, defaults in
//! `infergate_config::gateway::defaults`); the picker applies none of its own. Weights as
//! written go through [`EffectiveWeights::from_weights`] first, so both shapes take one path.

use infergate_config::gateway::{EffectiveWeights, Weights};

use crate::profile::{weighted, Profile, WeightedScorer, DEFAULT_LATENCY_TOLERANCE_S};
use crate::scorer::Scorer;

/// Scorer weights the picker can run: the scorers they turn on, and the profile of those.
pub trait ScorerWeights {
    /// The scorers these weights turn on (weight above 0), with their weights, in a fixed order.
    fn scorers(&self) -> Vec<WeightedScorer>;

    /// The profile: these scorers with infergate's mechanics (stale exclusion, dispatch credit,
    /// rotated ties; see [`Profile::with_scorers`]).
    fn to_profile(&self, name: &str) -> Profile {
        Profile::with_scorers(name, self.scorers())
    }
}

impl ScorerWeights for EffectiveWeights {
    fn scorers(&self) -> Vec<WeightedScorer> {
        // Taken apart with no `..`: a weight added to the config does not compile until it names
        // its scorer here.
        let EffectiveWeights {
            queue,
            kv_cache,
            prefix,
            lora_affinity,
            running_requests,
            predicted_latency,
            lru,
        } = *self;
        [
            (Scorer::Queue, queue),
            (Scorer::KvCache, kv_cache),
            (Scorer::Prefix, prefix),
            (Scorer::LoraAffinity, lora_affinity),
            (Scorer::RunningRequests, running_requests),
            (
                Scorer::PredictedLatency {
                    tolerance_s: DEFAULT_LATENCY_TOLERANCE_S,
                },
                predicted_latency,
            ),
            (Scorer::NoHitLru, lru),
        ]
        .into_iter()
        .filter(|(_, w)| w.value > 0)
        .map(|(s, w)| weighted(s, f64::from(w.value)))
        .collect()
    }
}

impl ScorerWeights for Weights {
    fn scorers(&self) -> Vec<WeightedScorer> {
        EffectiveWeights::from_weights(Some(self)).scorers()
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
