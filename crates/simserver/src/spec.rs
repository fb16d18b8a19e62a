//! What one simulated replica is: its engine, the API it speaks and how fast its clock runs.

use crate::faults::Faults;
use crate::SimError;
use infergate_engine::EngineConfig;

/// Mean length of a generated answer when the request does not fix it with `ignore_eos`.
///
/// Chat answers on ShareGPT-like traffic average a couple of hundred tokens.
pub const DEFAULT_MEAN_OUTPUT_TOKENS: f64 = 256.0;

/// Which model server the replica pretends to be; it sets the `/metrics` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// vLLM V1: `vllm:*` families.
    #[default]
    Vllm,
    /// SGLang: `sglang:*` families.
    Sglang,
}

impl Dialect {
    /// The name used on command lines and in fleet files (`vllm`, `sglang`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Vllm => "vllm",
            Dialect::Sglang => "sglang",
        }
    }
}

impl std::str::FromStr for Dialect {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Dialect, SimError> {
        match s {
            "vllm" => Ok(Dialect::Vllm),
            "sglang" => Ok(Dialect::Sglang),
            other => Err(SimError::InvalidSpec(format!(
                "engine must be `vllm` or `sglang`, got `{other}`"
            ))),
        }
    }
}

/// Everything that defines one simulated model server.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSpec {
    /// The model name clients send and `/v1/models` lists (vLLM's `--served-model-name`).
    pub served_model_name: String,
    /// The engine's settings. `report_every_token` is forced on: a streaming server needs every
    /// token as an event.
    pub engine: EngineConfig,
    /// The API dialect of `/metrics`.
    pub dialect: Dialect,
    /// Simulated seconds per wall-clock second: above 1 the replica runs faster than real time.
    pub time_scale: f64,
    /// Seed of the server's own draws: output lengths, generated words and injected errors.
    /// (The engine's step-time jitter uses `engine.seed`.)
    pub seed: u64,
    /// LoRA adapters loaded at start-up (vLLM's `--lora-modules`).
    pub lora_adapters: Vec<String>,
    /// Mean output length, in tokens, of requests without `ignore_eos`.
    pub mean_output_tokens: f64,
    /// Faults injected from the start; `POST /sim/faults` changes them at run time.
    pub faults: Faults,
}

impl ReplicaSpec {
    /// A healthy vLLM replica of `engine`'s profile, served under the model's usual name, in real
    /// time.
    pub fn new(engine: EngineConfig) -> ReplicaSpec {
        ReplicaSpec {
            served_model_name: engine.profile.model.served_name.to_owned(),
            seed: engine.seed,
            engine,
            dialect: Dialect::Vllm,
            time_scale: 1.0,
            lora_adapters: Vec::new(),
            mean_output_tokens: DEFAULT_MEAN_OUTPUT_TOKENS,
            faults: Faults::default(),
        }
    }

    /// Checks what the engine's own validation does not: the server's knobs.
    pub fn validate(&self) -> Result<(), SimError> {
        self.engine.validate()?;
        // Outside these bounds converting between engine and wall time overflows.
        if !(self.time_scale.is_finite() && (1e-3..=1e6).contains(&self.time_scale)) {
            return Err(SimError::InvalidSpec(format!(
                "time_scale must be between 0.001 and 1000000, got {}",
                self.time_scale
            )));
        }
        if !(self.mean_output_tokens.is_finite() && self.mean_output_tokens >= 1.0) {
            return Err(SimError::InvalidSpec(format!(
                "mean_output_tokens must be at least 1, got {}",
                self.mean_output_tokens
            )));
        }
        if self.served_model_name.is_empty() {
            return Err(SimError::InvalidSpec(
                "served_model_name must not be empty".into(),
            ));
        }
        if !self.lora_adapters.is_empty() && self.engine.max_loras == 0 {
            return Err(SimError::InvalidSpec(
                "lora_adapters are set but max_loras is 0 (LoRA disabled)".into(),
            ));
        }
        if let Some(name) = self
            .lora_adapters
            .iter()
            .find(|a| **a == self.served_model_name)
        {
            return Err(SimError::InvalidSpec(format!(
                "lora adapter `{name}` has the served model's name"
            )));
        }
        self.faults.validate().map_err(SimError::InvalidSpec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_engine::Profile;

    fn spec() -> ReplicaSpec {
        ReplicaSpec::new(EngineConfig::new(
            Profile::lookup("llama-3.1-8b", "h100", 1).unwrap(),
        ))
    }

    #[test]
    fn a_new_spec_serves_the_model_under_its_usual_name_in_real_time() {
        let s = spec();
        assert_eq!(s.served_model_name, "meta-llama/Llama-3.1-8B-Instruct");
        assert_eq!((s.time_scale, s.dialect), (1.0, Dialect::Vllm));
        assert!(s.validate().is_ok());
    }

    #[test]
    fn validation_names_the_knob() {
        let message = |s: ReplicaSpec| s.validate().unwrap_err().to_string();
        assert!(message(ReplicaSpec {
            time_scale: 0.0,
            ..spec()
        })
        .contains("time_scale"));
        assert!(message(ReplicaSpec {
            mean_output_tokens: 0.5,
            ..spec()
        })
        .contains("mean_output_tokens"));
        assert!(message(ReplicaSpec {
            lora_adapters: vec!["a".into()],
            ..spec()
        })
        .contains("max_loras"));
        let mut zero = spec();
        zero.engine.max_num_seqs = 0;
        assert!(message(zero).contains("max_num_seqs"));
        assert_eq!("sglang".parse::<Dialect>().unwrap(), Dialect::Sglang);
        assert!("tgi".parse::<Dialect>().is_err());
    }
}
