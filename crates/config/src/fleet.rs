//! The simulated fleet file read by `infergate sim --fleet FILE`.
//!
//! Its `spec.endpoints` list has the same `{address, labels}` shape as the gateway config's static
//! `spec.endpoints`, so one file describes both what to simulate and what to route to:
//!
//! ```yaml
//! apiVersion: infergate.dev/v1alpha1
//! kind: SimulatedFleet
//! spec:
//!   defaults: {model: llama-3.1-8b, gpu: h100}
//!   endpoints:
//!     - address: 127.0.0.1:8001
//!       labels: {app: vllm-llama, gpu: h100}
//!     - address: 127.0.0.1:8002
//!       labels: {app: vllm-llama, gpu: a10g}
//!       sim: {gpu: a10g, maxLoras: 4, loras: [sql-lora]}
//! ```
//!
//! `schedulingPolicy: priority` (in `defaults` or one endpoint's `sim`) runs vLLM's priority
//! scheduler, which a gateway pool's `forwardPriority` feeds.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The only `apiVersion` this file format has.
pub const API_VERSION: &str = "infergate.dev/v1alpha1";
/// Its `kind`.
pub const KIND: &str = "SimulatedFleet";

/// The model profile of a replica whose settings name none (`infergate sim`'s `--model`).
pub const DEFAULT_MODEL: &str = "llama-3.1-8b";
/// The GPU of a replica whose settings name none (`infergate sim`'s `--gpu`).
pub const DEFAULT_GPU: &str = "h100";
/// The tensor-parallel degree of a replica whose settings name none (`infergate sim`'s `--tp`).
pub const DEFAULT_TP: u32 = 1;

/// A fleet file as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetFile {
    /// Must be [`API_VERSION`].
    pub api_version: String,
    /// Must be [`KIND`].
    pub kind: String,
    /// Optional metadata (a name), accepted for symmetry with other resources.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// The fleet.
    pub spec: FleetSpec,
}

/// Resource metadata.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// Name of the fleet.
    pub name: String,
}

/// Defaults and endpoints.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetSpec {
    /// Settings every endpoint starts from.
    #[serde(default)]
    pub defaults: SimSettings,
    /// The replicas, at least one.
    pub endpoints: Vec<EndpointEntry>,
}

/// One replica as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointEntry {
    /// `host:port` to listen on (a loopback address).
    pub address: String,
    /// Labels a gateway's `modelSelector` matches.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Settings that override the defaults for this replica.
    #[serde(default)]
    pub sim: SimSettings,
}

/// What a replica simulates; every field optional, so defaults and overrides share the type.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SimSettings {
    /// Model profile name (`llama-3.1-8b`, `qwen3-32b`, `llama-3.1-70b`, `qwen3-235b-a22b[-fp8]`,
    /// or `instant`).
    pub model: Option<String>,
    /// GPU name (`h100`, `h200`, `a100-80`, `a100-40`, `a10g`, `l4`).
    pub gpu: Option<String>,
    /// Tensor-parallel degree.
    pub tp: Option<u32>,
    /// The model name the server reports and accepts.
    pub served_model_name: Option<String>,
    /// Metrics dialect: `vllm` or `sglang`.
    pub engine: Option<String>,
    /// vLLM `--max-num-seqs`.
    pub max_num_seqs: Option<u32>,
    /// vLLM `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u32>,
    /// vLLM `--max-model-len`.
    pub max_model_len: Option<u32>,
    /// Automatic prefix caching.
    pub prefix_caching: Option<bool>,
    /// Chunked prefill.
    pub chunked_prefill: Option<bool>,
    /// vLLM `--scheduling-policy`: `fcfs` (the default) or `priority`, under which requests
    /// carry a `priority` (lower first) and urgent ones preempt less urgent ones.
    pub scheduling_policy: Option<String>,
    /// GPU LoRA slots.
    pub max_loras: Option<u32>,
    /// Host LoRA cache.
    pub max_cpu_loras: Option<u32>,
    /// Adapters loaded at start.
    pub loras: Option<Vec<String>>,
    /// Seed of every random draw.
    pub seed: Option<u64>,
    /// Simulated seconds per wall second.
    pub time_scale: Option<f64>,
    /// Mean output length of requests without `ignore_eos`.
    pub mean_output_tokens: Option<u32>,
}

impl SimSettings {
    /// `self` with every unset field taken from `base`.
    pub fn over(&self, base: &SimSettings) -> SimSettings {
        fn pick<T: Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
            a.clone().or_else(|| b.clone())
        }
        SimSettings {
            model: pick(&self.model, &base.model),
            gpu: pick(&self.gpu, &base.gpu),
            tp: pick(&self.tp, &base.tp),
            served_model_name: pick(&self.served_model_name, &base.served_model_name),
            engine: pick(&self.engine, &base.engine),
            max_num_seqs: pick(&self.max_num_seqs, &base.max_num_seqs),
            max_num_batched_tokens: pick(
                &self.max_num_batched_tokens,
                &base.max_num_batched_tokens,
            ),
            max_model_len: pick(&self.max_model_len, &base.max_model_len),
            prefix_caching: pick(&self.prefix_caching, &base.prefix_caching),
            chunked_prefill: pick(&self.chunked_prefill, &base.chunked_prefill),
            scheduling_policy: pick(&self.scheduling_policy, &base.scheduling_policy),
            max_loras: pick(&self.max_loras, &base.max_loras),
            max_cpu_loras: pick(&self.max_cpu_loras, &base.max_cpu_loras),
            loras: pick(&self.loras, &base.loras),
            seed: pick(&self.seed, &base.seed),
            time_scale: pick(&self.time_scale, &base.time_scale),
            mean_output_tokens: pick(&self.mean_output_tokens, &base.mean_output_tokens),
        }
    }
}

/// One replica, resolved: its address parsed and its settings merged over the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SimEndpoint {
    /// Where it listens.
    pub address: SocketAddr,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its settings (defaults applied; unset fields are left to the simulator's own defaults).
    pub settings: SimSettings,
}

/// Why a fleet file was refused; each names the field.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// Not YAML, or a field of the wrong type or unknown. Forwarded whole, so its message is
    /// printed once (see the rule in `gateway::error`).
    #[error(transparent)]
    Syntax(#[from] serde_norway::Error),
    /// A field with a value the simulator cannot use.
    #[error("{field}: {reason}")]
    Invalid {
        /// Path of the field, like `spec.endpoints[2].address`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> FleetError {
    FleetError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

impl FleetFile {
    /// Parses and validates a fleet file, returning one resolved entry per endpoint.
    pub fn parse(yaml: &str) -> Result<Vec<SimEndpoint>, FleetError> {
        let file: FleetFile = serde_norway::from_str(yaml)?;
        file.resolve()
    }

    /// Validates and resolves.
    pub fn resolve(&self) -> Result<Vec<SimEndpoint>, FleetError> {
        if self.api_version != API_VERSION {
            return Err(invalid(
                "apiVersion",
                format!("must be `{API_VERSION}`, got `{}`", self.api_version),
            ));
        }
        if self.kind != KIND {
            return Err(invalid(
                "kind",
                format!("must be `{KIND}`, got `{}`", self.kind),
            ));
        }
        if self.spec.endpoints.is_empty() {
            return Err(invalid(
                "spec.endpoints",
                "at least one endpoint is required",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::with_capacity(self.spec.endpoints.len());
        for (i, entry) in self.spec.endpoints.iter().enumerate() {
            let field = |name: &str| format!("spec.endpoints[{i}].{name}");
            let address: SocketAddr = entry.address.parse().map_err(|e| {
                invalid(
                    field("address"),
                    format!("`{}` is not ip:port ({e})", entry.address),
                )
            })?;
            if !seen.insert(address) {
                return Err(invalid(
                    field("address"),
                    format!("{address} is used twice"),
                ));
            }
            let settings = entry.sim.over(&self.spec.defaults);
            check_settings(&settings, &|name| field(&format!("sim.{name}")))?;
            out.push(SimEndpoint {
                address,
                labels: entry.labels.clone(),
                settings,
            });
        }
        Ok(out)
    }
}

fn check_settings(s: &SimSettings, field: &dyn Fn(&str) -> String) -> Result<(), FleetError> {
    if let Some(engine) = &s.engine {
        if engine != "vllm" && engine != "sglang" {
            return Err(invalid(
                field("engine"),
                format!("must be `vllm` or `sglang`, got `{engine}`"),
            ));
        }
    }
    if let Some(policy) = &s.scheduling_policy {
        if policy != "fcfs" && policy != "priority" {
            return Err(invalid(
                field("schedulingPolicy"),
                format!("must be `fcfs` or `priority`, got `{policy}`"),
            ));
        }
    }
    if let Some(scale) = s.time_scale {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(invalid(field("timeScale"), "must be a positive number"));
        }
    }
    for (name, value) in [
        ("maxNumSeqs", s.max_num_seqs),
        ("maxNumBatchedTokens", s.max_num_batched_tokens),
        ("maxModelLen", s.max_model_len),
    ] {
        if value == Some(0) {
            return Err(invalid(field(name), "must be at least 1"));
        }
    }
    if let Some(loras) = &s.loras {
        if !loras.is_empty() && s.max_loras.unwrap_or(0) == 0 {
            return Err(invalid(
                field("loras"),
                "adapters need maxLoras of at least 1",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
apiVersion: infergate.dev/v1alpha1
kind: SimulatedFleet
spec:
  defaults: {model: llama-3.1-8b, gpu: h100}
  endpoints:
    - address: 127.0.0.1:8001
      labels: {app: vllm-llama, gpu: h100}
    - address: 127.0.0.1:8002
      labels: {app: vllm-llama, gpu: a10g}
      sim: {gpu: a10g, maxLoras: 4, loras: [sql-lora]}
"#;

    #[test]
    fn the_documented_example_resolves_with_defaults_applied() {
        let fleet = FleetFile::parse(EXAMPLE).unwrap();
        assert_eq!(fleet.len(), 2);
        assert_eq!(fleet[0].settings.gpu.as_deref(), Some("h100"));
        assert_eq!(fleet[1].settings.gpu.as_deref(), Some("a10g"));
        assert_eq!(fleet[1].settings.model.as_deref(), Some("llama-3.1-8b"));
        assert_eq!(fleet[1].labels["gpu"], "a10g");
    }

    #[test]
    fn the_shipped_fleet_file_loads() {
        let fleet = FleetFile::parse(include_str!("../../../deploy/sim/fleet.yaml")).unwrap();
        assert_eq!(fleet.len(), 8);
        assert!(fleet
            .iter()
            .all(|e| e.settings.model.as_deref() == Some("llama-3.1-8b")));
        assert_eq!(
            fleet.iter().filter(|e| e.labels["gpu"] == "a10g").count(),
            4
        );
    }

    #[test]
    fn the_scheduling_policy_is_a_default_an_endpoint_can_override() {
        let yaml = EXAMPLE
            .replace(
                "defaults: {model: llama-3.1-8b, gpu: h100}",
                "defaults: {model: llama-3.1-8b, gpu: h100, schedulingPolicy: priority}",
            )
            .replace("gpu: a10g, ", "gpu: a10g, schedulingPolicy: fcfs, ");
        let fleet = FleetFile::parse(&yaml).unwrap();
        assert_eq!(
            fleet[0].settings.scheduling_policy.as_deref(),
            Some("priority")
        );
        assert_eq!(fleet[1].settings.scheduling_policy.as_deref(), Some("fcfs"));
        let plain = FleetFile::parse(EXAMPLE).unwrap();
        assert_eq!(plain[0].settings.scheduling_policy, None);
    }

    #[test]
    fn an_unknown_field_is_an_error_naming_it() {
        let err = FleetFile::parse(&EXAMPLE.replace("maxLoras", "maxLorass"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("maxLorass"), "{err}");
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases = [
            (
                EXAMPLE.replace("127.0.0.1:8002", "localhost"),
                "spec.endpoints[1].address",
            ),
            (
                EXAMPLE.replace("127.0.0.1:8002", "127.0.0.1:8001"),
                "spec.endpoints[1].address",
            ),
            (
                EXAMPLE.replace("maxLoras: 4", "maxLoras: 0"),
                "spec.endpoints[1].sim.loras",
            ),
            (
                EXAMPLE.replace("gpu: a10g, ", "gpu: a10g, engine: tgi, "),
                "spec.endpoints[1].sim.engine",
            ),
            (
                EXAMPLE.replace("gpu: a10g, ", "gpu: a10g, schedulingPolicy: lifo, "),
                "spec.endpoints[1].sim.schedulingPolicy",
            ),
            (EXAMPLE.replace("SimulatedFleet", "Fleet"), "kind"),
        ];
        for (yaml, field) in cases {
            let err = FleetFile::parse(&yaml).unwrap_err().to_string();
            assert!(err.starts_with(field), "{field}: {err}");
        }
    }
}
