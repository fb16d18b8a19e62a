//! A pool's picking policy from its config: scheduler `weights` (with the defaults the config
//! crate applied) or an `EndpointPickerConfig` file, and the metric dialect of its engine.

use std::path::Path;

use infergate_config::gateway::{EngineType, PickerSource, Pool};
use infergate_picker::config::{PickerConfig, ScorerWeights};
use infergate_picker::metrics::Engine;
use infergate_picker::Policy;

use crate::error::GatewayError;

/// Where a scheduler's `configMapRef` is read: the ConfigMaps of the cluster (kept by a watch
/// elsewhere; answered without waiting).
pub trait PickerConfigSource: Send + Sync + std::fmt::Debug {
    /// The text under `key` of ConfigMap `name`, or why there is none.
    fn picker_config(&self, name: &str, key: &str) -> Result<String, String>;
}

/// The policy of `pool`. A picker config file is read relative to `config_dir` (the directory
/// of the gateway config) when its path is relative; a `configMapRef` from `config_maps`.
pub fn pool_policy(
    pool: &Pool,
    config_dir: Option<&Path>,
    config_maps: Option<&dyn PickerConfigSource>,
) -> Result<Policy, GatewayError> {
    let picker_error = |reason: String| GatewayError::Picker {
        pool: pool.name.clone(),
        reason,
    };
    match &pool.picker {
        PickerSource::Weights(w) => Ok(Policy::Weighted(w.to_profile(&pool.name))),
        PickerSource::File(path) => {
            let path = match config_dir {
                Some(dir) if Path::new(path).is_relative() => dir.join(path),
                _ => Path::new(path).to_path_buf(),
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| picker_error(format!("pickerConfigFile {}: {e}", path.display())))?;
            let epc = infergate_config::picker::from_yaml_str(&text)
                .map_err(|e| picker_error(format!("pickerConfigFile {}: {e}", path.display())))?;
            let profile = epc
                .to_profile()
                .map_err(|e| picker_error(format!("pickerConfigFile {}: {e}", path.display())))?;
            Ok(Policy::Weighted(profile))
        }
        PickerSource::Named(name) => {
            Policy::named(name).map_err(|e| picker_error(format!("policy: {e}")))
        }
        PickerSource::ConfigMap { name, key } => {
            let Some(source) = config_maps else {
                return Err(GatewayError::unsupported(
                    format!("spec.schedulers[{}].configMapRef", pool.name),
                    format!(
                        "ConfigMap `{name}` lives in Kubernetes: run with --from-cluster, or use \
                         pickerConfigFile with the same EndpointPickerConfig"
                    ),
                ));
            };
            let at = format!("configMapRef {name}/{}", key.value);
            let text = source
                .picker_config(name, &key.value)
                .map_err(|e| picker_error(format!("{at}: {e}")))?;
            let epc = infergate_config::picker::from_yaml_str(&text)
                .map_err(|e| picker_error(format!("{at}: {e}")))?;
            let profile = epc
                .to_profile()
                .map_err(|e| picker_error(format!("{at}: {e}")))?;
            Ok(Policy::Weighted(profile))
        }
    }
}

/// The metric dialect of an engine type.
pub fn engine_dialect(engine: EngineType) -> Engine {
    match engine {
        EngineType::Vllm => Engine::Vllm,
        EngineType::Sglang => Engine::Sglang,
        EngineType::Tgi => Engine::Tgi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_config::gateway::{EffectiveWeights, Setting};
    use infergate_picker::Scorer;

    #[test]
    fn resolved_defaults_become_the_same_scorers() {
        let w = EffectiveWeights::from_weights(None);
        let profile = w.to_profile("p");
        let kinds: Vec<(Scorer, f64)> = profile
            .scorers
            .iter()
            .map(|s| (s.scorer.clone(), s.weight))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Scorer::Queue, 2.0),
                (Scorer::KvCache, 2.0),
                (Scorer::Prefix, 3.0)
            ]
        );
        let mut off = w;
        off.queue = Setting::set(0);
        off.lora_affinity = Setting::set(1);
        let profile = off.to_profile("p");
        assert!(profile.scorers.iter().all(|s| s.scorer != Scorer::Queue));
        assert!(profile
            .scorers
            .iter()
            .any(|s| s.scorer == Scorer::LoraAffinity));
    }
}
