//! The reverse of [`PickerConfig::to_profile`](super::PickerConfig::to_profile): a profile
//! written out as the config that produces it, so a tuned profile can be pasted into a gateway
//! config.

use std::collections::BTreeMap;

use crate::filter::Filter;
use crate::prefix::PrefixParams;
use crate::profile::Profile;
use crate::scorer::Scorer;
use crate::select::{Selection, TieBreak};
use infergate_config::picker::{
    EndpointPickerConfig, ParamValue, PluginRef, PluginSpec, SchedulingProfileSpec, KIND,
};

/// Why a profile has no `EndpointPickerConfig` form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile {profile:?} cannot be written as an EndpointPickerConfig: {reason}")]
pub struct RenderError {
    /// The profile's name.
    pub profile: String,
    /// What has no config form.
    pub reason: String,
}

/// [`PickerConfig::from_profile`](super::PickerConfig::from_profile).
pub(super) fn from_profile(profile: &Profile) -> Result<EndpointPickerConfig, RenderError> {
    let refuse = |reason: &str| RenderError {
        profile: profile.name.clone(),
        reason: reason.to_owned(),
    };
    if !profile.fresh_load {
        return Err(refuse(
            "dispatch credit off (fresh_load) is not configurable",
        ));
    }
    let mut plugins = Vec::new();
    let mut refs = Vec::new();
    let mut declare = |plugin_type: &str, parameters: Vec<(&str, ParamValue)>, weight| {
        let same_type = plugins
            .iter()
            .filter(|p: &&PluginSpec| p.plugin_type == plugin_type)
            .count();
        let name = match same_type {
            0 => plugin_type.to_owned(),
            n => format!("{plugin_type}-{}", n + 1),
        };
        plugins.push(PluginSpec {
            plugin_type: plugin_type.to_owned(),
            name: (name != plugin_type).then(|| name.clone()),
            parameters: (!parameters.is_empty()).then(|| {
                parameters
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect()
            }),
        });
        refs.push(PluginRef {
            plugin_ref: name,
            weight,
        });
    };
    for filter in &profile.filters {
        let (kind, params) = filter_params(filter);
        declare(kind, params, None);
    }
    for ws in &profile.scorers {
        declare(
            ws.scorer.plugin_type(),
            scorer_params(&ws.scorer),
            Some(ws.weight),
        );
    }
    if profile.prefix != PrefixParams::default() {
        declare(
            "approx-prefix-cache-producer",
            prefix_params(&profile.prefix),
            None,
        );
    }
    let picker = match profile.selection {
        Selection::MaxScore {
            ties: TieBreak::Rotate,
        } => "max-score-picker",
        Selection::MaxScore {
            ties: TieBreak::Random,
        } => return Err(refuse("random tie-breaking is not configurable")),
        Selection::Random => "random-picker",
        Selection::WeightedRandom => "weighted-random-picker",
    };
    let max_endpoints = i64::try_from(profile.max_fallbacks + 1).unwrap_or(i64::MAX);
    declare(
        picker,
        vec![("maxNumOfEndpoints", ParamValue::Int(max_endpoints))],
        None,
    );
    Ok(EndpointPickerConfig {
        api_version: Some("inference.networking.x-k8s.io/v1alpha1".into()),
        kind: Some(KIND.into()),
        plugins,
        scheduling_profiles: vec![SchedulingProfileSpec {
            name: profile.name.clone(),
            plugins: refs,
        }],
    })
}

fn filter_params(filter: &Filter) -> (&'static str, Vec<(&'static str, ParamValue)>) {
    let params = match filter {
        Filter::Stale { max_age } => vec![(
            "maxAge",
            ParamValue::Str(format!("{}ms", max_age.as_millis())),
        )],
        Filter::Saturation {
            max_waiting,
            max_kv,
        } => [
            max_waiting.map(|v| ("queueThreshold", ParamValue::Float(v))),
            max_kv.map(|v| ("kvCacheThreshold", ParamValue::Float(v))),
        ]
        .into_iter()
        .flatten()
        .collect(),
        Filter::LabelSelector { match_labels } => vec![(
            "matchLabels",
            ParamValue::Map(
                match_labels
                    .iter()
                    .map(|(k, v)| (k.clone(), ParamValue::Str(v.clone())))
                    .collect::<BTreeMap<_, _>>(),
            ),
        )],
    };
    (filter.plugin_type(), params)
}

fn scorer_params(scorer: &Scorer) -> Vec<(&'static str, ParamValue)> {
    match scorer {
        Scorer::PrefixYieldingToLoad { slack } => vec![("slack", ParamValue::Float(*slack))],
        Scorer::KvHeadroom { soft_limit } => {
            vec![("softLimit", ParamValue::Float(*soft_limit))]
        }
        Scorer::LoadAware { threshold } => vec![("threshold", ParamValue::Float(*threshold))],
        Scorer::PredictedLatency { tolerance_s } => {
            vec![("tolerance", ParamValue::Str(format!("{tolerance_s}s")))]
        }
        _ => Vec::new(),
    }
}

fn prefix_params(p: &PrefixParams) -> Vec<(&'static str, ParamValue)> {
    let int = |v: usize| ParamValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
    vec![
        ("blockSizeTokens", int(p.block_size_tokens)),
        ("maxPrefixBlocksToMatch", int(p.max_prefix_blocks)),
        ("lruCapacityPerServer", int(p.lru_capacity_per_server)),
        ("autoTune", ParamValue::Bool(p.auto_tune)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PickerConfig;
    use crate::profile::weighted;

    fn round_trip(profile: &Profile) -> Profile {
        let config = EndpointPickerConfig::from_profile(profile).unwrap();
        // Through text, as a user would paste it.
        let text = serde_json::to_string(&config).unwrap();
        let parsed: EndpointPickerConfig = serde_json::from_str(&text).unwrap();
        parsed.to_profile().unwrap()
    }

    #[test]
    fn the_default_policy_and_a_tuned_variant_round_trip() {
        let default = Profile::infergate();
        assert_eq!(round_trip(&default), default);
        let mut tuned = Profile::infergate();
        tuned.name = "tuned".into();
        tuned.scorers[0].weight = 0.5;
        tuned
            .scorers
            .push(weighted(Scorer::LoadAware { threshold: 64.0 }, 1.5));
        tuned.scorers[2].scorer = Scorer::PredictedLatency { tolerance_s: 0.125 };
        tuned.prefix.block_size_tokens = 32;
        tuned.max_fallbacks = 4;
        assert_eq!(round_trip(&tuned), tuned);
    }

    #[test]
    fn what_has_no_config_form_is_an_error() {
        let err = EndpointPickerConfig::from_profile(&Profile::gie_default()).unwrap_err();
        assert!(err.reason.contains("fresh_load"), "{err}");
    }
}
