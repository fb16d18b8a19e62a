//! An `EndpointPickerConfig` (the `pickerConfigFile` / `configMapRef` format, whose home is
//! `infergate_config::picker`) becomes a [`Profile`] here.

use std::collections::{BTreeMap, HashMap};

use infergate_config::picker::{
    EndpointPickerConfig, ParamValue, PickerConfigError, PluginRef, SchedulingProfileSpec,
};

use super::params::Params;
use super::render::RenderError;
use crate::error::ConfigError;
use crate::filter::Filter;
use crate::prefix::PrefixParams;
use crate::profile::{weighted, Profile, DEFAULT_LATENCY_TOLERANCE_S, DEFAULT_MAX_METRICS_AGE};
use crate::scorer::Scorer;
use crate::select::{Selection, TieBreak};

/// A declared plugin, parsed.
#[derive(Debug, Clone, PartialEq)]
enum Plugin {
    Scorer(Scorer, Option<PrefixParams>),
    Filter(Filter),
    Picker(Selection, usize),
    PrefixProducer(PrefixParams),
    ProfileHandler,
}

const PREFIX_PARAMS: &[&str] = &[
    "blockSizeTokens",
    "maxPrefixBlocksToMatch",
    "lruCapacityPerServer",
    "autoTune",
];

/// What the picker makes of an `EndpointPickerConfig`: the profile it describes, and the
/// document that describes a profile. A trait because the format's home is the config crate,
/// which knows nothing of profiles.
pub trait PickerConfig: Sized {
    /// The profile this config describes, with infergate's mechanics (stale exclusion, dispatch
    /// credit, rotated ties) under the configured plugins.
    ///
    /// One scheduling profile is supported (several would need a profile handler infergate does
    /// not implement: an error, not a silent choice). With none, every declared plugin is used,
    /// scorers with weight 1, as upstream does.
    fn to_profile(&self) -> Result<Profile, ConfigError>;

    /// The config whose [`PickerConfig::to_profile`] gives back `profile`. Upstream's mechanics
    /// that only the built-in `gie-default` uses (random ties, no dispatch credit) have no
    /// config form and are an error.
    fn from_profile(profile: &Profile) -> Result<Self, RenderError>;
}

impl PickerConfig for EndpointPickerConfig {
    fn to_profile(&self) -> Result<Profile, ConfigError> {
        to_profile(self)
    }

    fn from_profile(profile: &Profile) -> Result<Self, RenderError> {
        super::render::from_profile(profile)
    }
}

fn to_profile(config: &EndpointPickerConfig) -> Result<Profile, ConfigError> {
    // The format's own rules (the `kind`) are the config crate's; a document built in code
    // rather than parsed meets them here.
    config.validate().map_err(|e| match e {
        PickerConfigError::Invalid { field, reason } => ConfigError::InvalidField { field, reason },
        // Checking a parsed document reads no text, so it has no syntax to get wrong.
        PickerConfigError::Syntax(e) => ConfigError::InvalidField {
            field: "document".into(),
            reason: e.to_string(),
        },
    })?;
    let mut declared: HashMap<&str, Plugin> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for spec in &config.plugins {
        let name = spec.name.as_deref().unwrap_or(&spec.plugin_type);
        let plugin = parse_plugin(name, &spec.plugin_type, spec.parameters.as_ref())?;
        if declared.insert(name, plugin).is_some() {
            return Err(ConfigError::DuplicatePluginName(name.to_owned()));
        }
        order.push(name);
    }
    let implicit;
    let profile_spec = match config.scheduling_profiles.as_slice() {
        [] => {
            implicit = SchedulingProfileSpec {
                name: "default".into(),
                plugins: order
                    .iter()
                    .map(|n| PluginRef {
                        plugin_ref: (*n).to_owned(),
                        weight: None,
                    })
                    .collect(),
            };
            &implicit
        }
        [one] => one,
        many => {
            return Err(ConfigError::Profiles(format!(
                "{} profiles given; infergate runs exactly one per pool",
                many.len()
            )))
        }
    };
    let mut profile = Profile::with_scorers(profile_spec.name.clone(), Vec::new());
    // The default stale filter stands unless the profile configures its own.
    let default_filters = std::mem::take(&mut profile.filters);
    let mut picker_seen = false;
    let mut prefix_seen: Option<PrefixParams> = None;
    for r in &profile_spec.plugins {
        let plugin =
            declared
                .get(r.plugin_ref.as_str())
                .ok_or_else(|| ConfigError::UnknownPluginRef {
                    profile: profile_spec.name.clone(),
                    plugin_ref: r.plugin_ref.clone(),
                })?;
        let not_scorer = || ConfigError::WeightOnNonScorer {
            profile: profile_spec.name.clone(),
            plugin_ref: r.plugin_ref.clone(),
        };
        match plugin {
            Plugin::Scorer(scorer, prefix) => {
                let weight = r.weight.unwrap_or(1.0);
                if !(weight.is_finite() && weight >= 0.0) {
                    return Err(ConfigError::InvalidWeight {
                        field: format!(
                            "schedulingProfiles[{}].{}.weight",
                            profile_spec.name, r.plugin_ref
                        ),
                        value: weight,
                    });
                }
                if let Some(p) = prefix {
                    set_prefix(&mut prefix_seen, *p, &r.plugin_ref)?;
                }
                profile.scorers.push(weighted(scorer.clone(), weight));
            }
            Plugin::Filter(f) => {
                if r.weight.is_some() {
                    return Err(not_scorer());
                }
                profile.filters.push(f.clone());
            }
            Plugin::Picker(selection, max_endpoints) => {
                if r.weight.is_some() {
                    return Err(not_scorer());
                }
                if picker_seen {
                    return Err(ConfigError::SeveralPickers(profile_spec.name.clone()));
                }
                picker_seen = true;
                profile.selection = *selection;
                profile.max_fallbacks = max_endpoints.saturating_sub(1);
            }
            Plugin::PrefixProducer(p) => {
                if r.weight.is_some() {
                    return Err(not_scorer());
                }
                set_prefix(&mut prefix_seen, *p, &r.plugin_ref)?;
            }
            Plugin::ProfileHandler => {
                if r.weight.is_some() {
                    return Err(not_scorer());
                }
            }
        }
    }
    if let Some(p) = prefix_seen {
        profile.prefix = p;
    }
    if !profile
        .filters
        .iter()
        .any(|f| matches!(f, Filter::Stale { .. }))
    {
        profile.filters.splice(0..0, default_filters);
    }
    Ok(profile)
}

/// Two prefix plugins may both configure the index only if they agree.
fn set_prefix(
    seen: &mut Option<PrefixParams>,
    p: PrefixParams,
    plugin: &str,
) -> Result<(), ConfigError> {
    match seen {
        Some(prev) if *prev != p => Err(ConfigError::InvalidParameter {
            plugin: plugin.to_owned(),
            parameter: "blockSizeTokens".into(),
            reason: "prefix parameters differ from another prefix plugin's in this profile".into(),
        }),
        _ => {
            *seen = Some(p);
            Ok(())
        }
    }
}

fn parse_prefix(p: &Params<'_>) -> Result<PrefixParams, ConfigError> {
    let d = PrefixParams::default();
    Ok(PrefixParams {
        block_size_tokens: p
            .positive("blockSizeTokens")?
            .unwrap_or(d.block_size_tokens),
        max_prefix_blocks: p
            .positive("maxPrefixBlocksToMatch")?
            .unwrap_or(d.max_prefix_blocks),
        lru_capacity_per_server: p
            .positive("lruCapacityPerServer")?
            .unwrap_or(d.lru_capacity_per_server),
        auto_tune: p.boolean("autoTune")?.unwrap_or(d.auto_tune),
    })
}

fn parse_plugin(
    name: &str,
    plugin_type: &str,
    params: Option<&BTreeMap<String, ParamValue>>,
) -> Result<Plugin, ConfigError> {
    let none = |scorer: Scorer| -> Result<Plugin, ConfigError> {
        Params::new(name, params, &[])?;
        Ok(Plugin::Scorer(scorer, None))
    };
    let picker = |selection: Selection| -> Result<Plugin, ConfigError> {
        let p = Params::new(name, params, &["maxNumOfEndpoints"])?;
        Ok(Plugin::Picker(
            selection,
            p.positive("maxNumOfEndpoints")?.unwrap_or(1),
        ))
    };
    match plugin_type {
        "queue-scorer" => none(Scorer::Queue),
        "kv-cache-utilization-scorer" => none(Scorer::KvCache),
        "running-requests-size-scorer" => none(Scorer::RunningRequests),
        "lora-affinity-scorer" => none(Scorer::LoraAffinity),
        "active-request-scorer" => none(Scorer::ActiveRequest),
        "token-load-scorer" => none(Scorer::TokenLoad),
        "session-affinity-scorer" => none(Scorer::SessionAffinity),
        "latency-scorer" => {
            let p = Params::new(name, params, &["tolerance"])?;
            let tolerance_s = p
                .duration("tolerance")?
                .map_or(DEFAULT_LATENCY_TOLERANCE_S, |d| d.as_secs_f64());
            Ok(Plugin::Scorer(
                Scorer::PredictedLatency { tolerance_s },
                None,
            ))
        }
        "no-hit-lru-scorer" => {
            // `lruSize` bounds how many pods upstream tracks; infergate tracks every pod of the
            // pool, so the knob would be ignored: rejected as unknown rather than accepted.
            let p = Params::new(name, params, &["prefixPluginName"])?;
            p.string("prefixPluginName")?;
            Ok(Plugin::Scorer(Scorer::NoHitLru, None))
        }
        "prefix-cache-scorer" => {
            let p = Params::new(name, params, PREFIX_PARAMS)?;
            let prefix = params.map(|_| parse_prefix(&p)).transpose()?;
            Ok(Plugin::Scorer(Scorer::Prefix, prefix))
        }
        "prefix-affinity-scorer" => {
            let p = Params::new(name, params, &["slack"])?;
            let slack = p.number("slack", 0.001..=1e6)?.unwrap_or(4.0);
            Ok(Plugin::Scorer(Scorer::PrefixYieldingToLoad { slack }, None))
        }
        "approx-prefix-cache-producer" => {
            let p = Params::new(name, params, PREFIX_PARAMS)?;
            Ok(Plugin::PrefixProducer(parse_prefix(&p)?))
        }
        "load-aware-scorer" => {
            let p = Params::new(name, params, &["threshold"])?;
            let threshold = p.number("threshold", 1.0..=1e9)?.unwrap_or(128.0);
            Ok(Plugin::Scorer(Scorer::LoadAware { threshold }, None))
        }
        "kv-headroom-scorer" => {
            let p = Params::new(name, params, &["softLimit"])?;
            let soft_limit = p.number("softLimit", 0.0..=1.0)?.unwrap_or(0.85);
            Ok(Plugin::Scorer(Scorer::KvHeadroom { soft_limit }, None))
        }
        "label-selector-filter" => {
            let p = Params::new(name, params, &["matchLabels"])?;
            let match_labels = p.string_map("matchLabels")?.unwrap_or_default();
            Ok(Plugin::Filter(Filter::LabelSelector { match_labels }))
        }
        "stale-metrics-filter" => {
            let p = Params::new(name, params, &["maxAge"])?;
            let max_age = p.duration("maxAge")?.unwrap_or(DEFAULT_MAX_METRICS_AGE);
            Ok(Plugin::Filter(Filter::Stale { max_age }))
        }
        "saturation-filter" => {
            let p = Params::new(name, params, &["queueThreshold", "kvCacheThreshold"])?;
            Ok(Plugin::Filter(Filter::Saturation {
                max_waiting: p.number("queueThreshold", 0.0..=1e9)?,
                max_kv: p.number("kvCacheThreshold", 0.0..=1.0)?,
            }))
        }
        "max-score-picker" => picker(Selection::MaxScore {
            ties: TieBreak::Rotate,
        }),
        "random-picker" => picker(Selection::Random),
        "weighted-random-picker" => picker(Selection::WeightedRandom),
        "single-profile-handler" => {
            Params::new(name, params, &[])?;
            Ok(Plugin::ProfileHandler)
        }
        other => Err(ConfigError::UnknownPluginType {
            name: name.to_owned(),
            plugin_type: other.to_owned(),
        }),
    }
}
