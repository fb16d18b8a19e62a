//! HyperPod `weights` and GIE `EndpointPickerConfig` both become the same `Profile`; what cannot
//! be honoured is an error naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::time::Duration;

use infergate_picker::config::{EndpointPickerConfig, PickerConfig, ScorerWeights, Weights};
use infergate_picker::{
    weighted, ConfigError, Filter, Scorer, Selection, TieBreak, DEFAULT_LATENCY_TOLERANCE_S,
};

fn epp(json: &str) -> Result<infergate_picker::Profile, ConfigError> {
    serde_json::from_str::<EndpointPickerConfig>(json)
        .unwrap()
        .to_profile()
}

/// The upstream example from `gateway-config.md`, as JSON.
const UPSTREAM_EXAMPLE: &str = r#"{
  "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
  "kind": "EndpointPickerConfig",
  "plugins": [
    {"type": "queue-scorer"},
    {"type": "kv-cache-utilization-scorer"},
    {"type": "prefix-cache-scorer"},
    {"type": "lora-affinity-scorer"},
    {"type": "max-score-picker", "parameters": {"maxNumOfEndpoints": 1}}
  ],
  "schedulingProfiles": [
    {"name": "default", "plugins": [
      {"pluginRef": "queue-scorer", "weight": 2},
      {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
      {"pluginRef": "prefix-cache-scorer", "weight": 3},
      {"pluginRef": "max-score-picker"}
    ]}
  ]
}"#;

#[test]
fn the_upstream_example_and_default_weights_give_the_same_profile() {
    let from_epp = epp(UPSTREAM_EXAMPLE).unwrap();
    let from_weights = Weights::default().to_profile("default");
    assert_eq!(from_epp.scorers, from_weights.scorers);
    assert_eq!(from_epp.filters, from_weights.filters);
    assert_eq!(
        from_epp.selection,
        Selection::MaxScore {
            ties: TieBreak::Rotate
        }
    );
    // maxNumOfEndpoints 1: a primary and no fallbacks.
    assert_eq!(from_epp.max_fallbacks, 0);
    // lora-affinity-scorer is declared but not in the profile: not used.
    assert!(!from_epp
        .scorers
        .iter()
        .any(|s| s.scorer == Scorer::LoraAffinity));
}

#[test]
fn without_profiles_every_declared_plugin_is_used_with_weight_one() {
    let p = epp(r#"{"plugins": [
        {"type": "queue-scorer"},
        {"type": "load-aware-scorer", "parameters": {"threshold": 64}},
        {"type": "label-selector-filter", "parameters": {"matchLabels": {"gpu": "h100"}}},
        {"type": "stale-metrics-filter", "parameters": {"maxAge": "250ms"}},
        {"type": "weighted-random-picker", "parameters": {"maxNumOfEndpoints": 3}}
    ]}"#)
    .unwrap();
    assert_eq!(
        p.scorers,
        vec![
            weighted(Scorer::Queue, 1.0),
            weighted(Scorer::LoadAware { threshold: 64.0 }, 1.0)
        ]
    );
    assert_eq!(p.selection, Selection::WeightedRandom);
    assert_eq!(p.max_fallbacks, 2);
    // The configured stale filter replaces the default one.
    assert_eq!(
        p.filters,
        vec![
            Filter::LabelSelector {
                match_labels: [("gpu".to_string(), "h100".to_string())].into()
            },
            Filter::Stale {
                max_age: Duration::from_millis(250)
            },
        ]
    );
}

#[test]
fn the_latency_scorer_takes_a_tolerance_and_defaults_to_half_a_second() {
    let p = epp(r#"{"plugins": [
        {"type": "latency-scorer", "name": "tolerant", "parameters": {"tolerance": "1.5s"}},
        {"type": "latency-scorer", "name": "plain", "parameters": {"tolerance": "0s"}},
        {"type": "latency-scorer", "name": "default"}
    ]}"#)
    .unwrap();
    assert_eq!(
        p.scorers,
        vec![
            weighted(Scorer::PredictedLatency { tolerance_s: 1.5 }, 1.0),
            weighted(Scorer::PredictedLatency { tolerance_s: 0.0 }, 1.0),
            weighted(
                Scorer::PredictedLatency {
                    tolerance_s: DEFAULT_LATENCY_TOLERANCE_S
                },
                1.0
            ),
        ]
    );
    assert_eq!(DEFAULT_LATENCY_TOLERANCE_S, 0.5);
    let err =
        epp(r#"{"plugins": [{"type": "latency-scorer", "parameters": {"tolerance": "soon"}}]}"#)
            .unwrap_err()
            .to_string();
    assert!(err.contains("tolerance") && err.contains("soon"), "{err}");
}

#[test]
fn prefix_parameters_configure_the_index() {
    let p = epp(r#"{"plugins": [
        {"type": "prefix-cache-scorer", "parameters": {"blockSizeTokens": 32, "maxPrefixBlocksToMatch": 128,
                                                        "lruCapacityPerServer": 1000, "autoTune": false}}
    ]}"#)
    .unwrap();
    assert_eq!(p.prefix.block_size_tokens, 32);
    assert_eq!(p.prefix.chunk_bytes(), 128);
    assert_eq!(p.prefix.max_prefix_blocks, 128);
    assert_eq!(p.prefix.lru_capacity_per_server, 1000);
    assert!(!p.prefix.auto_tune);
}

#[test]
fn what_cannot_be_honoured_is_an_error_naming_it() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"plugins": [{"type": "magic-scorer", "name": "m"}]}"#,
            "magic-scorer",
        ),
        (
            r#"{"plugins": [{"type": "queue-scorer", "parameters": {"speed": 1}}]}"#,
            "speed",
        ),
        (
            r#"{"plugins": [{"type": "active-request-scorer", "parameters": {"requestTimeout": "2m"}}]}"#,
            "requestTimeout",
        ),
        (
            r#"{"plugins": [{"type": "no-hit-lru-scorer", "parameters": {"lruSize": 10}}]}"#,
            "lruSize",
        ),
        (
            r#"{"plugins": [{"type": "max-score-picker", "parameters": {"maxNumOfEndpoints": 0}}]}"#,
            "maxNumOfEndpoints",
        ),
        (
            r#"{"plugins": [{"type": "queue-scorer"}], "schedulingProfiles": [{"name": "p", "plugins": [{"pluginRef": "nope"}]}]}"#,
            "nope",
        ),
        (
            r#"{"plugins": [{"type": "random-picker"}], "schedulingProfiles": [{"name": "p", "plugins": [{"pluginRef": "random-picker", "weight": 2}]}]}"#,
            "random-picker",
        ),
        (
            r#"{"plugins": [{"type": "queue-scorer"}], "schedulingProfiles": [{"name": "p", "plugins": [{"pluginRef": "queue-scorer", "weight": -1}]}]}"#,
            "weight",
        ),
        (
            r#"{"plugins": [{"type": "queue-scorer"}, {"type": "queue-scorer"}]}"#,
            "queue-scorer",
        ),
        (
            r#"{"plugins": [{"type": "random-picker"}, {"type": "max-score-picker"}]}"#,
            "more than one picker",
        ),
        (
            r#"{"schedulingProfiles": [{"name": "a"}, {"name": "b"}]}"#,
            "2 profiles",
        ),
        (r#"{"kind": "Deployment"}"#, "kind"),
        (
            r#"{"plugins": [{"type": "stale-metrics-filter", "parameters": {"maxAge": "soon"}}]}"#,
            "maxAge",
        ),
    ];
    for (json, needle) in cases {
        let err = epp(json).unwrap_err().to_string();
        assert!(err.contains(needle), "{json}: {err}");
    }
}

#[test]
fn unknown_fields_are_rejected_by_name() {
    let err =
        serde_json::from_str::<EndpointPickerConfig>(r#"{"plugins": [], "featureGates": []}"#)
            .unwrap_err()
            .to_string();
    assert!(err.contains("featureGates"), "{err}");
    let err = serde_json::from_str::<EndpointPickerConfig>(
        r#"{"plugins": [{"type": "queue-scorer", "weigth": 2}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("weigth"), "{err}");
}
