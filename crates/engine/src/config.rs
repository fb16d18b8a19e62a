//! A replica's settings: vLLM's engine arguments, with vLLM's defaults derived from the profile.

use crate::profile::Profile;
use crate::step_time::Calibration;
use std::time::Duration;

/// Time from a request reaching the server to its reaching the scheduler, plus the output path
/// back: HTTP parsing, chat templating, tokenization, detokenization. Fitted to the measured
/// anchors (docs/simulator.md); the reference's rough figure is 15 ms.
pub const DEFAULT_API_OVERHEAD: Duration = Duration::from_millis(18);

/// Log-standard-deviation of the step-time jitter (3–5 % on real GPUs).
pub const DEFAULT_JITTER_SIGMA: f64 = 0.04;

/// LoRA rank assumed for adapter sizes.
pub const DEFAULT_LORA_RANK: u32 = 16;

/// How the scheduler orders its waiting queue and picks preemption victims (vLLM's
/// `--scheduling-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulingPolicy {
    /// First come, first served; the newest running request is preempted when blocks run out.
    /// vLLM's default, and the only policy under which it accepts a request priority of 0 alone.
    #[default]
    Fcfs,
    /// Waiting requests in (priority, arrival) order, lower priority values first; the least
    /// urgent (then latest-arrived) running request is the preemption victim, and a waiting
    /// request blocked for KV blocks or batch slots preempts running requests strictly less
    /// urgent than itself.
    Priority,
}

impl SchedulingPolicy {
    /// The name vLLM's command line uses (`fcfs`, `priority`).
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulingPolicy::Fcfs => "fcfs",
            SchedulingPolicy::Priority => "priority",
        }
    }
}

impl std::str::FromStr for SchedulingPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<SchedulingPolicy, String> {
        match s {
            "fcfs" => Ok(SchedulingPolicy::Fcfs),
            "priority" => Ok(SchedulingPolicy::Priority),
            other => Err(format!(
                "scheduling policy must be `fcfs` or `priority`, got `{other}`"
            )),
        }
    }
}

/// Settings of one simulated replica.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Model, GPU, TP and precision.
    pub profile: Profile,
    /// Most requests running at once.
    pub max_num_seqs: u32,
    /// Token budget of one step.
    pub max_num_batched_tokens: u32,
    /// Longest prompt plus output.
    pub max_model_len: u32,
    /// KV blocks (derived from the profile unless overridden).
    pub num_gpu_blocks: u32,
    /// Automatic prefix caching.
    pub enable_prefix_caching: bool,
    /// Chunked prefill: a long prompt is computed over several steps.
    pub enable_chunked_prefill: bool,
    /// vLLM V0's scheduler (0.4–0.6 without chunked prefill): a step that admits waiting prompts
    /// runs them alone and the running requests decode in the steps between. Off (V1, every
    /// vLLM since 0.8), prompts and decodes share each step.
    pub prefill_steps_alone: bool,
    /// Waiting-queue order and preemption victims (vLLM `--scheduling-policy`).
    pub scheduling_policy: SchedulingPolicy,
    /// Distinct adapters in one batch (GPU slots); 0 disables LoRA.
    pub max_loras: u32,
    /// Adapters kept in host memory.
    pub max_cpu_loras: u32,
    /// LoRA rank, which sets adapter size and load time.
    pub lora_rank: u32,
    /// API front-end overhead before scheduling.
    pub api_overhead: Duration,
    /// Step-time jitter (lognormal log-sd); 0 for none.
    pub jitter_sigma: f64,
    /// Seed of every random draw.
    pub seed: u64,
    /// Step-time constants.
    pub calibration: Calibration,
    /// Report every output token as an event (a streaming server needs them; a benchmark that
    /// only wants first-token and finish times leaves it off).
    pub report_every_token: bool,
}

/// A setting that vLLM would refuse at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `max_model_len` larger than the KV cache holds.
    #[error(
        "max_model_len ({max_model_len}) is larger than the maximum number of tokens that can be \
         stored in KV cache ({capacity}); lower max_model_len"
    )]
    ModelLenOverCapacity {
        /// Asked.
        max_model_len: u32,
        /// What fits.
        capacity: u64,
    },
    /// Without chunked prefill a whole prompt must fit in one step.
    #[error(
        "max_num_batched_tokens ({batched}) is smaller than max_model_len ({max_model_len}) with \
         chunked prefill disabled"
    )]
    BudgetBelowModelLen {
        /// Step budget.
        batched: u32,
        /// Longest sequence.
        max_model_len: u32,
    },
    /// vLLM refuses a step budget smaller than the batch.
    #[error("max_num_batched_tokens ({batched}) must be at least max_num_seqs ({seqs})")]
    BudgetBelowSeqs {
        /// Step budget.
        batched: u32,
        /// Batch limit.
        seqs: u32,
    },
    /// A limit set to zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
}

impl EngineConfig {
    /// vLLM's defaults for `profile`: prefix caching and chunked prefill on, FCFS scheduling,
    /// LoRA off.
    pub fn new(profile: Profile) -> EngineConfig {
        EngineConfig {
            max_num_seqs: profile.default_max_num_seqs(),
            max_num_batched_tokens: profile.default_max_num_batched_tokens(),
            max_model_len: profile.default_max_model_len(),
            num_gpu_blocks: profile.num_gpu_blocks(),
            enable_prefix_caching: true,
            enable_chunked_prefill: true,
            prefill_steps_alone: false,
            scheduling_policy: SchedulingPolicy::Fcfs,
            max_loras: 0,
            max_cpu_loras: 0,
            lora_rank: DEFAULT_LORA_RANK,
            // The `instant` profile measures a gateway's own overhead: nothing simulated may add
            // to it, the API front end included.
            api_overhead: if profile.instant {
                Duration::ZERO
            } else {
                DEFAULT_API_OVERHEAD
            },
            jitter_sigma: DEFAULT_JITTER_SIGMA,
            seed: 0,
            report_every_token: false,
            calibration: Calibration::default(),
            profile,
        }
    }

    /// Checks the settings the way vLLM does at start-up.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_num_seqs == 0 {
            return Err(ConfigError::Zero("max_num_seqs"));
        }
        if self.max_num_batched_tokens == 0 {
            return Err(ConfigError::Zero("max_num_batched_tokens"));
        }
        if self.max_model_len == 0 {
            return Err(ConfigError::Zero("max_model_len"));
        }
        if self.max_num_batched_tokens < self.max_num_seqs {
            return Err(ConfigError::BudgetBelowSeqs {
                batched: self.max_num_batched_tokens,
                seqs: self.max_num_seqs,
            });
        }
        let capacity = u64::from(self.num_gpu_blocks) * u64::from(crate::BLOCK_SIZE);
        if u64::from(self.max_model_len) > capacity {
            return Err(ConfigError::ModelLenOverCapacity {
                max_model_len: self.max_model_len,
                capacity,
            });
        }
        if !self.enable_chunked_prefill && self.max_num_batched_tokens < self.max_model_len {
            return Err(ConfigError::BudgetBelowModelLen {
                batched: self.max_num_batched_tokens,
                max_model_len: self.max_model_len,
            });
        }
        Ok(())
    }

    /// Bytes of one adapter: rank × (in + out) parameters for every linear layer, bf16.
    pub fn adapter_bytes(&self) -> f64 {
        let m = &self.profile.model;
        let q = m.attention_width();
        let kv = u64::from(m.kv_heads) * m.head_dim;
        let mlp = match &m.moe {
            // Adapters on MoE models usually skip the experts.
            Some(_) => 0,
            None => 3 * (m.hidden + m.intermediate),
        };
        let per_layer = (m.hidden + q) + 2 * (m.hidden + kv) + (q + m.hidden) + mlp;
        (u64::from(self.lora_rank) * per_layer * u64::from(m.layers)) as f64 * 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_16_adapter_of_an_8b_model_is_about_84_mb() {
        let config = EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap());
        let mb = config.adapter_bytes() / 1e6;
        assert!((80.0..=88.0).contains(&mb), "{mb}");
    }

    #[test]
    fn vllm_defaults_follow_the_gpu() {
        let h100 = EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap());
        assert_eq!(
            (h100.max_num_seqs, h100.max_num_batched_tokens),
            (1024, 8192)
        );
        let a100 = EngineConfig::new(Profile::lookup("llama-3.1-8b", "a100-80", 1).unwrap());
        assert_eq!(
            (a100.max_num_seqs, a100.max_num_batched_tokens),
            (256, 2048)
        );
        assert_eq!(h100.validate(), Ok(()));
    }

    #[test]
    fn validation_refuses_what_vllm_refuses() {
        let mut c = EngineConfig::new(Profile::lookup("llama-3.1-8b", "a10g", 1).unwrap());
        c.max_model_len = 131_072;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ModelLenOverCapacity { .. })
        ));
        c.max_model_len = 4096;
        c.enable_chunked_prefill = false;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::BudgetBelowModelLen { .. })
        ));
    }
}
