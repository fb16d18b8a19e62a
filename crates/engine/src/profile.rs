//! Hardware and model descriptions, and the figures derived from them.
//!
//! Profiles are data: a model's geometry and a GPU's datasheet figures. Everything the engine
//! needs (weight bytes per GPU, KV bytes per token, KV capacity, FLOPs per token, default limits)
//! is computed here from that data, never pasted from a table, so a new model or GPU is one entry.

use std::fmt;

/// How two GPUs of a tensor-parallel group talk to each other; it sets the all-reduce cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interconnect {
    /// NVLink / NVSwitch (SXM boards).
    NvLink,
    /// PCIe only (A10G, L4).
    Pcie,
}

/// Which searched share of the H100's bandwidth efficiencies a GPU's reads are priced at
/// ([`crate::step_time::Calibration::hbm_bandwidth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryFamily {
    /// Read at the H100's efficiencies, the datasheet bandwidth at face value (H100, A10G, L4).
    AtH100Efficiency,
    /// H200: `Calibration::h200_bandwidth_share`.
    H200,
    /// Either A100 board (the same GA100 die and memory controller):
    /// `Calibration::a100_bandwidth_share`.
    A100,
}

/// A GPU's datasheet figures plus the two efficiency figures the step-time model uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    /// Short name used on the command line (`h100`).
    pub name: &'static str,
    /// HBM bandwidth in bytes per second.
    pub hbm_bandwidth: f64,
    /// Dense bf16 peak in FLOP/s.
    pub peak_flops_bf16: f64,
    /// Dense fp8 peak in FLOP/s; `None` where the GPU has no fp8 tensor cores.
    pub peak_flops_fp8: Option<f64>,
    /// Memory as the driver reports it, in bytes.
    pub memory_bytes: f64,
    /// Memory vLLM keeps back for activations, CUDA graphs and the sampler, in bytes per GPU.
    /// Fitted to the calibration table (about 4 GB on 80 GB-class boards, 3.25 GB on 24 GB ones).
    pub activation_reserve_bytes: f64,
    /// Model FLOPs utilisation reached by prefill.
    pub prefill_mfu: f64,
    /// TP interconnect.
    pub interconnect: Interconnect,
    /// vLLM picks larger scheduler limits on big-memory GPUs other than A100.
    pub large_scheduler_defaults: bool,
    /// The share of the H100's bandwidth efficiencies its reads are priced at.
    pub memory_family: MemoryFamily,
}

/// vLLM's default `--gpu-memory-utilization`: the share of each GPU's memory it may use for
/// weights, activations and the KV cache.
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Every GPU the simulator knows.
pub const GPUS: &[Gpu] = &[
    Gpu {
        name: "h100",
        hbm_bandwidth: 3.35e12,
        peak_flops_bf16: 989e12,
        peak_flops_fp8: Some(1979e12),
        memory_bytes: 80.0 * GIB,
        activation_reserve_bytes: 4.0e9,
        prefill_mfu: 0.5,
        interconnect: Interconnect::NvLink,
        large_scheduler_defaults: true,
        memory_family: MemoryFamily::AtH100Efficiency,
    },
    Gpu {
        name: "h200",
        hbm_bandwidth: 4.8e12,
        peak_flops_bf16: 989e12,
        peak_flops_fp8: Some(1979e12),
        memory_bytes: 143_771.0 * MIB,
        activation_reserve_bytes: 4.0e9,
        prefill_mfu: 0.5,
        interconnect: Interconnect::NvLink,
        large_scheduler_defaults: true,
        memory_family: MemoryFamily::H200,
    },
    Gpu {
        name: "a100-80",
        hbm_bandwidth: 2.04e12,
        peak_flops_bf16: 312e12,
        peak_flops_fp8: None,
        memory_bytes: 80.0 * GIB,
        activation_reserve_bytes: 4.0e9,
        prefill_mfu: 0.43,
        interconnect: Interconnect::NvLink,
        large_scheduler_defaults: false,
        memory_family: MemoryFamily::A100,
    },
    Gpu {
        name: "a100-40",
        hbm_bandwidth: 1.555e12,
        peak_flops_bf16: 312e12,
        peak_flops_fp8: None,
        memory_bytes: 40.0 * GIB,
        activation_reserve_bytes: 4.0e9,
        prefill_mfu: 0.43,
        interconnect: Interconnect::NvLink,
        large_scheduler_defaults: false,
        memory_family: MemoryFamily::A100,
    },
    Gpu {
        name: "a10g",
        hbm_bandwidth: 0.6e12,
        peak_flops_bf16: 125e12,
        peak_flops_fp8: None,
        memory_bytes: 24.0 * GIB,
        activation_reserve_bytes: 3.25e9,
        prefill_mfu: 0.36,
        interconnect: Interconnect::Pcie,
        large_scheduler_defaults: false,
        memory_family: MemoryFamily::AtH100Efficiency,
    },
    Gpu {
        name: "l4",
        hbm_bandwidth: 0.3e12,
        peak_flops_bf16: 121e12,
        peak_flops_fp8: Some(242e12),
        memory_bytes: 24.0 * GIB,
        activation_reserve_bytes: 3.25e9,
        prefill_mfu: 0.36,
        interconnect: Interconnect::Pcie,
        large_scheduler_defaults: false,
        memory_family: MemoryFamily::AtH100Efficiency,
    },
];

/// Mixture-of-experts geometry.
#[derive(Debug, Clone, PartialEq)]
pub struct Moe {
    /// Routed experts per layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub top_k: u32,
    /// Intermediate size of one expert's MLP.
    pub expert_intermediate: u64,
}

/// A transformer's geometry; parameter counts are derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Short name used on the command line (`llama-3.1-8b`).
    pub name: &'static str,
    /// The name a real server would report (`meta-llama/Llama-3.1-8B-Instruct`).
    pub served_name: &'static str,
    /// Decoder layers.
    pub layers: u32,
    /// Hidden size.
    pub hidden: u64,
    /// Query heads.
    pub q_heads: u32,
    /// Key/value heads (GQA groups).
    pub kv_heads: u32,
    /// Dimension of one head.
    pub head_dim: u64,
    /// Dense MLP intermediate size (unused when `moe` is set).
    pub intermediate: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// Input and output embeddings share weights.
    pub tied_embeddings: bool,
    /// Longest context the model supports.
    pub max_position: u32,
    /// Mixture-of-experts geometry, if any.
    pub moe: Option<Moe>,
}

/// Every model the simulator knows.
pub const MODELS: &[Model] = &[
    Model {
        name: "llama-3.1-8b",
        served_name: "meta-llama/Llama-3.1-8B-Instruct",
        layers: 32,
        hidden: 4096,
        q_heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 128_256,
        tied_embeddings: false,
        max_position: 131_072,
        moe: None,
    },
    Model {
        name: "qwen3-32b",
        served_name: "Qwen/Qwen3-32B",
        layers: 64,
        hidden: 5120,
        q_heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 25600,
        vocab: 151_936,
        tied_embeddings: false,
        max_position: 40_960,
        moe: None,
    },
    Model {
        name: "llama-3.1-70b",
        served_name: "meta-llama/Llama-3.1-70B-Instruct",
        layers: 80,
        hidden: 8192,
        q_heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 28672,
        vocab: 128_256,
        tied_embeddings: false,
        max_position: 131_072,
        moe: None,
    },
    Model {
        name: "qwen3-235b-a22b",
        served_name: "Qwen/Qwen3-235B-A22B",
        layers: 94,
        hidden: 4096,
        q_heads: 64,
        kv_heads: 4,
        head_dim: 128,
        intermediate: 12288,
        vocab: 151_936,
        tied_embeddings: false,
        max_position: 40_960,
        moe: Some(Moe {
            experts: 128,
            top_k: 8,
            expert_intermediate: 1536,
        }),
    },
];

/// The profiles of the reference calibration table (model, GPU, TP), in its order.
pub const REFERENCE_PROFILES: &[(&str, &str, u32)] = &[
    ("llama-3.1-8b", "h100", 1),
    ("llama-3.1-8b", "h200", 1),
    ("llama-3.1-8b", "a100-80", 1),
    ("llama-3.1-8b", "a10g", 1),
    ("llama-3.1-8b", "l4", 1),
    ("qwen3-32b", "h100", 2),
    ("qwen3-32b", "h200", 1),
    ("qwen3-32b", "a100-80", 2),
    ("qwen3-32b", "a10g", 4),
    ("llama-3.1-70b", "h100", 4),
    ("llama-3.1-70b", "h100", 8),
    ("llama-3.1-70b", "h200", 4),
    ("llama-3.1-70b", "a100-80", 4),
    ("qwen3-235b-a22b-fp8", "h100", 8),
    ("qwen3-235b-a22b", "h200", 8),
];

impl Model {
    /// Width of the attention output (query heads × head dimension).
    pub fn attention_width(&self) -> u64 {
        u64::from(self.q_heads) * self.head_dim
    }

    fn attention_params_per_layer(&self) -> u64 {
        let q = self.attention_width();
        let kv = u64::from(self.kv_heads) * self.head_dim;
        // q, k, v projections in, o projection out.
        self.hidden * q + 2 * self.hidden * kv + q * self.hidden
    }

    /// Parameters of one routed expert (gate, up and down projections).
    pub fn expert_params(&self) -> u64 {
        self.moe
            .as_ref()
            .map_or(0, |m| 3 * self.hidden * m.expert_intermediate)
    }

    fn embedding_params(&self) -> u64 {
        let tables = if self.tied_embeddings { 1 } else { 2 };
        tables * self.vocab * self.hidden
    }

    /// Parameters every token touches: attention, dense MLP or the router's top-k experts,
    /// embeddings.
    pub fn active_params(&self) -> u64 {
        let mlp = match &self.moe {
            None => 3 * self.hidden * self.intermediate,
            Some(m) => u64::from(m.top_k) * self.expert_params(),
        };
        u64::from(self.layers) * (self.attention_params_per_layer() + mlp) + self.embedding_params()
    }

    /// Parameters of the routed experts a token passes through (`top_k` per layer); 0 for a
    /// dense model.
    pub fn active_expert_params(&self) -> u64 {
        self.moe.as_ref().map_or(0, |m| {
            u64::from(self.layers) * u64::from(m.top_k) * self.expert_params()
        })
    }

    /// All parameters.
    pub fn total_params(&self) -> u64 {
        self.dense_params() + self.all_expert_params()
    }

    /// Parameters outside the routed experts (always read in full each step).
    pub fn dense_params(&self) -> u64 {
        let mlp = if self.moe.is_some() {
            0
        } else {
            3 * self.hidden * self.intermediate
        };
        u64::from(self.layers) * (self.attention_params_per_layer() + mlp) + self.embedding_params()
    }

    fn all_expert_params(&self) -> u64 {
        let experts = self.moe.as_ref().map_or(0, |m| u64::from(m.experts));
        u64::from(self.layers) * experts * self.expert_params()
    }

    /// KV-cache bytes one token takes across all GPUs at bf16 (K and V, every layer).
    pub fn kv_bytes_per_token(&self) -> u64 {
        2 * u64::from(self.layers) * u64::from(self.kv_heads) * self.head_dim * 2
    }
}

/// Weight precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// bf16 / fp16 weights.
    Bf16,
    /// fp8 weights (KV cache stays bf16).
    Fp8,
}

impl Precision {
    fn bytes_per_param(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
        }
    }
}

/// Why a profile cannot be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProfileError {
    /// The model name is not in [`MODELS`].
    #[error("unknown model `{0}` (known: {1})")]
    UnknownModel(String, String),
    /// The GPU name is not in [`GPUS`].
    #[error("unknown gpu `{0}` (known: {1})")]
    UnknownGpu(String, String),
    /// The tensor-parallel degree is zero or not a power of two.
    #[error("tp must be a power of two between 1 and 8, got {0}")]
    BadTp(u32),
    /// The weights do not fit in the GPUs' memory.
    #[error("{model} does not fit on {tp}× {gpu}: no memory left for the KV cache")]
    DoesNotFit {
        /// Model name.
        model: &'static str,
        /// GPU name.
        gpu: &'static str,
        /// Tensor-parallel degree.
        tp: u32,
    },
}

/// A model served on `tp` GPUs of one kind at one precision: what one replica is.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The model.
    pub model: Model,
    /// The GPU.
    pub gpu: Gpu,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Weight precision.
    pub precision: Precision,
    /// The `instant` profile: every step takes [`Profile::INSTANT_STEP_NANOS`], for measuring
    /// a gateway's own overhead with a server that answers at once.
    pub instant: bool,
}

impl Profile {
    /// Step time of the `instant` profile, in nanoseconds.
    pub const INSTANT_STEP_NANOS: u64 = 1_000;

    /// Looks a profile up by model and GPU names. `model` may end in `-fp8`.
    pub fn lookup(model: &str, gpu: &str, tp: u32) -> Result<Profile, ProfileError> {
        let (base, precision) = match model.strip_suffix("-fp8") {
            Some(base) => (base, Precision::Fp8),
            None => (model, Precision::Bf16),
        };
        let model = MODELS
            .iter()
            .find(|m| m.name == base)
            .cloned()
            .ok_or_else(|| {
                ProfileError::UnknownModel(base.to_owned(), names(MODELS.iter().map(|m| m.name)))
            })?;
        let gpu = GPUS
            .iter()
            .find(|g| g.name == gpu)
            .cloned()
            .ok_or_else(|| {
                ProfileError::UnknownGpu(gpu.to_owned(), names(GPUS.iter().map(|g| g.name)))
            })?;
        if !(1..=8).contains(&tp) || !tp.is_power_of_two() {
            return Err(ProfileError::BadTp(tp));
        }
        // fp8 on a GPU without fp8 tensor cores is served weight-only
        // (`Profile::fp8_gemm_peak_flops`).
        let profile = Profile {
            model,
            gpu,
            tp,
            precision,
            instant: false,
        };
        if profile.kv_capacity_tokens() < 16 {
            return Err(ProfileError::DoesNotFit {
                model: profile.model.name,
                gpu: profile.gpu.name,
                tp,
            });
        }
        Ok(profile)
    }

    /// The `instant` profile: Llama-3.1-8B's geometry and capacity on an H100, with every step
    /// taking [`Profile::INSTANT_STEP_NANOS`].
    pub fn instant() -> Profile {
        Profile {
            model: MODELS[0].clone(),
            gpu: GPUS[0].clone(),
            tp: 1,
            precision: Precision::Bf16,
            instant: true,
        }
    }

    /// Weight bytes each GPU holds.
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        self.model.total_params() as f64 * self.precision.bytes_per_param() / f64::from(self.tp)
    }

    /// Bytes of weights each GPU reads in a step whose batch holds `tokens` tokens: dense
    /// weights always, and of each layer's experts those the batch's tokens route to.
    ///
    /// Each token picks `top_k` of `experts` experts; taken as uniform and independent between
    /// tokens, a layer's expected distinct experts are `experts × (1 − (1 − top_k / experts)^tokens)`:
    /// `top_k` for one token, all of them for a long prefill chunk. (Counting `top_k × tokens`
    /// up to `experts`, as before 2026-12-06, read every expert of Qwen3-235B from 16 tokens up,
    /// where the expectation is 64 % of them at 16 and 86 % at 30; eight H200s decoding 30
    /// requests at once showed the step shorter than that read.)
    pub fn weight_bytes_read_per_gpu(&self, tokens: u64) -> f64 {
        let Some(moe) = &self.model.moe else {
            return self.weight_bytes_per_gpu();
        };
        let experts = f64::from(moe.experts);
        let miss = 1.0 - (f64::from(moe.top_k) / experts).min(1.0);
        let touched = experts * (1.0 - miss.powf(tokens.max(1) as f64));
        let params = self.model.dense_params() as f64
            + f64::from(self.model.layers) * touched * self.model.expert_params() as f64;
        params * self.precision.bytes_per_param() / f64::from(self.tp)
    }

    /// KV bytes one token takes on each GPU. KV heads are split across the TP group; when
    /// there are fewer KV heads than GPUs they are replicated, so the share stops shrinking.
    pub fn kv_bytes_per_token_per_gpu(&self) -> f64 {
        let shards = self.tp.min(self.model.kv_heads).max(1);
        self.model.kv_bytes_per_token() as f64 / f64::from(shards)
    }

    /// Tokens the KV cache holds at vLLM's default `--gpu-memory-utilization`.
    pub fn kv_capacity_tokens(&self) -> u64 {
        self.kv_capacity_tokens_at(DEFAULT_GPU_MEMORY_UTILIZATION)
    }

    /// Tokens the KV cache holds when vLLM may use `utilization` of each GPU's memory: what is
    /// left of that share after weights and the activation reserve, divided by one token's KV
    /// share.
    pub fn kv_capacity_tokens_at(&self, utilization: f64) -> u64 {
        let free = self.gpu.memory_bytes * utilization
            - self.weight_bytes_per_gpu()
            - self.gpu.activation_reserve_bytes;
        if free <= 0.0 {
            return 0;
        }
        (free / self.kv_bytes_per_token_per_gpu()).floor() as u64
    }

    /// KV blocks of [`crate::BLOCK_SIZE`] tokens at vLLM's default memory share.
    pub fn num_gpu_blocks(&self) -> u32 {
        self.num_gpu_blocks_at(DEFAULT_GPU_MEMORY_UTILIZATION)
    }

    /// KV blocks of [`crate::BLOCK_SIZE`] tokens when vLLM may use `utilization` of memory.
    pub fn num_gpu_blocks_at(&self, utilization: f64) -> u32 {
        let blocks = self.kv_capacity_tokens_at(utilization) / u64::from(crate::BLOCK_SIZE);
        u32::try_from(blocks).unwrap_or(u32::MAX)
    }

    /// The fp8 tensor-core peak this profile's GEMMs run at, if they run in fp8: an fp8 model
    /// on a GPU with fp8 tensor cores. An fp8 checkpoint on a GPU without them is served
    /// weight-only (vLLM's Marlin w8a16): fp8 weights, bf16 GEMMs.
    pub fn fp8_gemm_peak_flops(&self) -> Option<f64> {
        match self.precision {
            Precision::Fp8 => self.gpu.peak_flops_fp8,
            Precision::Bf16 => None,
        }
    }

    /// Peak FLOP/s of the whole TP group for this profile's GEMMs.
    pub fn peak_flops(&self) -> f64 {
        let per_gpu = self
            .fp8_gemm_peak_flops()
            .unwrap_or(self.gpu.peak_flops_bf16);
        per_gpu * f64::from(self.tp)
    }

    /// vLLM's default `max_num_seqs`.
    pub fn default_max_num_seqs(&self) -> u32 {
        if self.gpu.large_scheduler_defaults {
            1024
        } else {
            256
        }
    }

    /// vLLM's default `max_num_batched_tokens`.
    pub fn default_max_num_batched_tokens(&self) -> u32 {
        if self.gpu.large_scheduler_defaults {
            8192
        } else {
            2048
        }
    }

    /// vLLM's default `max_model_len`: the model's maximum, lowered to what one sequence can
    /// hold in the KV cache.
    pub fn default_max_model_len(&self) -> u32 {
        let capacity = u64::from(self.num_gpu_blocks()) * u64::from(crate::BLOCK_SIZE);
        self.model
            .max_position
            .min(u32::try_from(capacity).unwrap_or(u32::MAX))
    }

    /// A short label: `llama-3.1-8b/h100/tp1`.
    pub fn label(&self) -> String {
        let precision = if self.precision == Precision::Fp8 {
            "-fp8"
        } else {
            ""
        };
        if self.instant {
            return "instant".to_owned();
        }
        format!(
            "{}{}/{}/tp{}",
            self.model.name, precision, self.gpu.name, self.tp
        )
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
        ((actual - expected) / expected).abs() <= tolerance
    }

    #[test]
    fn parameter_counts_match_the_published_sizes() {
        let cases = [
            ("llama-3.1-8b", 8.03e9, 8.03e9),
            ("qwen3-32b", 32.8e9, 32.8e9),
            ("llama-3.1-70b", 70.6e9, 70.6e9),
            ("qwen3-235b-a22b", 235e9, 22e9),
        ];
        for (name, total, active) in cases {
            let model = MODELS.iter().find(|m| m.name == name).unwrap();
            assert!(
                within(model.total_params() as f64, total, 0.02),
                "{name} total"
            );
            assert!(
                within(model.active_params() as f64, active, 0.04),
                "{name} active"
            );
        }
    }

    #[test]
    fn kv_bytes_per_token_match_the_reference() {
        let expected = [
            ("llama-3.1-8b", 128 * 1024),
            ("qwen3-32b", 256 * 1024),
            ("llama-3.1-70b", 320 * 1024),
            ("qwen3-235b-a22b", 188 * 1024),
        ];
        for (name, bytes) in expected {
            let model = MODELS.iter().find(|m| m.name == name).unwrap();
            assert_eq!(model.kv_bytes_per_token(), bytes, "{name}");
        }
    }

    #[test]
    fn kv_capacity_matches_the_calibration_table_within_one_percent() {
        let table = [
            ("llama-3.1-8b", "h100", 1, 436_821),
            ("llama-3.1-8b", "h200", 1, 883_613),
            ("llama-3.1-8b", "a100-80", 1, 436_821),
            ("llama-3.1-8b", "a10g", 1, 29_597),
            ("llama-3.1-8b", "l4", 1, 29_597),
            ("qwen3-32b", "h100", 2, 309_105),
            ("qwen3-32b", "h200", 1, 252_826),
            ("qwen3-32b", "a100-80", 2, 309_105),
            ("qwen3-32b", "a10g", 4, 54_006),
            ("llama-3.1-70b", "h100", 4, 464_051),
            ("llama-3.1-70b", "h100", 8, 1_359_011),
            ("llama-3.1-70b", "h200", 4, 1_178_918),
            ("llama-3.1-70b", "a100-80", 4, 464_051),
            ("qwen3-235b-a22b-fp8", "h100", 8, 912_724),
            ("qwen3-235b-a22b", "h200", 8, 1_518_907),
        ];
        for (model, gpu, tp, tokens) in table {
            let profile = Profile::lookup(model, gpu, tp).unwrap();
            let got = profile.kv_capacity_tokens() as f64;
            assert!(
                within(got, f64::from(tokens), 0.01),
                "{profile}: {got} vs {tokens}"
            );
        }
    }

    #[test]
    fn lookup_names_what_is_wrong() {
        assert!(matches!(
            Profile::lookup("gpt-9", "h100", 1),
            Err(ProfileError::UnknownModel(..))
        ));
        assert!(matches!(
            Profile::lookup("llama-3.1-8b", "tpu", 1),
            Err(ProfileError::UnknownGpu(..))
        ));
        assert_eq!(
            Profile::lookup("llama-3.1-8b", "h100", 3),
            Err(ProfileError::BadTp(3))
        );
        // fp8 weights on a GPU without fp8 tensor cores: half the weight bytes, the bf16 peak.
        let w8a16 = Profile::lookup("llama-3.1-8b-fp8", "a10g", 1).unwrap();
        let bf16 = Profile::lookup("llama-3.1-8b", "a10g", 1).unwrap();
        assert_eq!(w8a16.peak_flops(), bf16.peak_flops());
        assert!(w8a16.weight_bytes_per_gpu() < 0.6 * bf16.weight_bytes_per_gpu());
        assert!(matches!(
            Profile::lookup("llama-3.1-70b", "a10g", 1),
            Err(ProfileError::DoesNotFit { .. })
        ));
    }

    #[test]
    fn max_model_len_is_capped_by_kv_capacity() {
        let a10g = Profile::lookup("llama-3.1-8b", "a10g", 1).unwrap();
        // Whole blocks only: what vLLM can actually give one sequence.
        assert_eq!(a10g.default_max_model_len(), a10g.num_gpu_blocks() * 16);
        assert!(u64::from(a10g.default_max_model_len()) <= a10g.kv_capacity_tokens());
        let h100 = Profile::lookup("llama-3.1-8b", "h100", 1).unwrap();
        assert_eq!(h100.default_max_model_len(), 131_072);
    }
}
