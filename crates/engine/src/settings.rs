//! A replica's settings as `infergate sim` takes them (flags or a fleet file's `sim` block,
//! [`SimSettings`]) become an [`EngineConfig`] here and nowhere else.
//!
//! `infergate sim` and the benchmark's replay of a fleet file both call
//! [`EngineConfig::from_settings`], so a field means the same on a real socket and in virtual
//! time, and one that is set is never dropped on one of the two ways. The settings are taken
//! apart field by field with no `..`: a field added to [`SimSettings`] does not compile until
//! this conversion says what it does with it.

use infergate_config::fleet::{SimSettings, DEFAULT_GPU, DEFAULT_MODEL, DEFAULT_TP};

use crate::config::{ConfigError, EngineConfig};
use crate::profile::{Profile, ProfileError};

/// Why settings make no engine; each names what is at fault.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// The model, GPU and TP name no profile.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// `schedulingPolicy` is neither `fcfs` nor `priority`.
    #[error("schedulingPolicy: {0}")]
    SchedulingPolicy(String),
    /// A combination vLLM would refuse at start-up.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl EngineConfig {
    /// The engine `settings` describe: vLLM's defaults for the profile they name, with every
    /// engine argument they set applied, checked as vLLM checks its arguments at start-up.
    ///
    /// Unset fields keep vLLM's defaults ([`EngineConfig::new`]). Without chunked prefill and
    /// with no `maxNumBatchedTokens`, the step budget is vLLM's `max(max_model_len, 2048)`.
    /// `maxCpuLoras` defaults to `maxLoras`, as vLLM's `--max-cpu-loras` does.
    pub fn from_settings(settings: &SimSettings) -> Result<EngineConfig, SettingsError> {
        let SimSettings {
            model,
            gpu,
            tp,
            max_num_seqs,
            max_num_batched_tokens,
            max_model_len,
            prefix_caching,
            chunked_prefill,
            scheduling_policy,
            max_loras,
            max_cpu_loras,
            seed,
            // The server front's, not the engine's: the name it answers to, the metric names it
            // exposes, the adapters it registers at start, how fast its clock runs, and the
            // length of answers a request leaves open.
            served_model_name: _,
            engine: _,
            loras: _,
            time_scale: _,
            mean_output_tokens: _,
        } = settings;
        let model = model.as_deref().unwrap_or(DEFAULT_MODEL);
        let profile = if model == "instant" {
            Profile::instant()
        } else {
            Profile::lookup(
                model,
                gpu.as_deref().unwrap_or(DEFAULT_GPU),
                tp.unwrap_or(DEFAULT_TP),
            )?
        };
        let mut config = EngineConfig::new(profile);
        if let Some(v) = *max_num_seqs {
            config.max_num_seqs = v;
        }
        if let Some(v) = *max_num_batched_tokens {
            config.max_num_batched_tokens = v;
        }
        if let Some(v) = *max_model_len {
            config.max_model_len = v;
        }
        if let Some(v) = *prefix_caching {
            config.enable_prefix_caching = v;
        }
        if let Some(v) = *chunked_prefill {
            config.enable_chunked_prefill = v;
            if !v && max_num_batched_tokens.is_none() {
                // vLLM's budget without chunked prefill: max(max_model_len, 2048).
                config.max_num_batched_tokens = config.max_model_len.max(2048);
            }
        }
        if let Some(v) = scheduling_policy {
            config.scheduling_policy = v.parse().map_err(SettingsError::SchedulingPolicy)?;
        }
        if let Some(v) = *max_loras {
            config.max_loras = v;
            config.max_cpu_loras = max_cpu_loras.unwrap_or(v);
        } else if let Some(v) = *max_cpu_loras {
            config.max_cpu_loras = v;
        }
        if let Some(v) = *seed {
            config.seed = v;
        }
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SchedulingPolicy;

    #[test]
    fn unset_settings_are_vllms_defaults_for_the_default_profile() {
        let config = EngineConfig::from_settings(&SimSettings::default()).unwrap();
        let defaults = EngineConfig::new(Profile::lookup(DEFAULT_MODEL, DEFAULT_GPU, 1).unwrap());
        assert_eq!(config, defaults);
    }

    #[test]
    fn every_engine_argument_that_is_set_reaches_the_engine() {
        let settings = SimSettings {
            model: Some("llama-3.1-8b".into()),
            gpu: Some("a100-80".into()),
            tp: Some(2),
            max_num_seqs: Some(64),
            max_num_batched_tokens: Some(16_384),
            max_model_len: Some(8_192),
            prefix_caching: Some(false),
            chunked_prefill: Some(false),
            scheduling_policy: Some("priority".into()),
            max_loras: Some(2),
            max_cpu_loras: Some(6),
            seed: Some(42),
            ..SimSettings::default()
        };
        let c = EngineConfig::from_settings(&settings).unwrap();
        assert_eq!(
            c.profile,
            Profile::lookup("llama-3.1-8b", "a100-80", 2).unwrap()
        );
        assert_eq!(
            (c.max_num_seqs, c.max_num_batched_tokens, c.max_model_len),
            (64, 16_384, 8_192)
        );
        assert!(!c.enable_prefix_caching && !c.enable_chunked_prefill);
        assert_eq!(c.scheduling_policy, SchedulingPolicy::Priority);
        assert_eq!((c.max_loras, c.max_cpu_loras, c.seed), (2, 6, 42));
    }

    #[test]
    fn what_vllm_refuses_is_refused_naming_the_field() {
        let bad = |s: SimSettings| EngineConfig::from_settings(&s).unwrap_err().to_string();
        let policy = bad(SimSettings {
            scheduling_policy: Some("lifo".into()),
            ..SimSettings::default()
        });
        assert!(policy.starts_with("schedulingPolicy: "), "{policy}");
        let budget = bad(SimSettings {
            max_num_seqs: Some(512),
            max_num_batched_tokens: Some(256),
            ..SimSettings::default()
        });
        assert!(budget.contains("max_num_batched_tokens (256)"), "{budget}");
        let gpu = bad(SimSettings {
            gpu: Some("tpu".into()),
            ..SimSettings::default()
        });
        assert!(gpu.contains("tpu"), "{gpu}");
    }
}
