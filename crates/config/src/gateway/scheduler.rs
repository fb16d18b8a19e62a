//! `spec.schedulers[]`: one model pool each.

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;

use super::deploy::{EnvFromSource, EnvVar, PodDefaults};
use super::duration::GatewayDuration;
use super::selector::LabelSelector;

/// One `SchedulerSpec` as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulerSpec {
    /// The pool's name: at most 63 characters, an RFC 1123 label, unique.
    pub name: String,
    /// The model the request body names: at most 253 characters, unique across schedulers.
    pub model_name: String,
    /// Which endpoints (pods) belong to the pool.
    pub model_selector: LabelSelector,
    /// Port on the endpoints, 1..65535 (default [`super::defaults::TARGET_PORT`]); an endpoint address
    /// with its own port wins.
    #[serde(default)]
    pub target_port: Option<u32>,
    /// Upstream protocol (default [`super::defaults::APP_PROTOCOL`]).
    #[serde(default)]
    pub app_protocol: Option<AppProtocol>,
    /// Picker family (default [`super::defaults::SCHEDULER`]).
    #[serde(default)]
    pub scheduler: Option<SchedulerKind>,
    /// Metric dialect to scrape (default [`super::defaults::ENGINE_TYPE`]).
    #[serde(default)]
    pub engine_type: Option<EngineType>,
    /// Scorer weights; exclusive with `configMapRef` and `pickerConfigFile`.
    #[serde(default)]
    pub weights: Option<Weights>,
    /// An `EndpointPickerConfig` in a ConfigMap (Kubernetes discovery only).
    #[serde(default)]
    pub config_map_ref: Option<ConfigMapRef>,
    /// An `EndpointPickerConfig` file (standalone counterpart of `configMapRef`).
    #[serde(default)]
    pub picker_config_file: Option<String>,
    /// A named picker policy (an infergate addition): `infergate`, `gie-default`,
    /// `round-robin`, `k8s-service`, `random`, `least-request`, `sglang-cache-aware` or
    /// `dynamo-kv`, as
    /// `infergate bench` compares them. Exclusive with `weights`, `configMapRef` and
    /// `pickerConfigFile`; the name is checked where policies are built.
    #[serde(default)]
    pub policy: Option<String>,
    /// LoRA adapters served behind this model (at most 50); naming one routes here.
    #[serde(default)]
    pub lora_adapters: Vec<String>,
    /// Arrival (queueing included) until the answer's first byte (504 when it passes); `0s`
    /// disables it. Once the answer has begun, `streamIdleTimeout` applies instead.
    #[serde(default)]
    pub route_timeout: Option<GatewayDuration>,
    /// Each attempt at an endpoint until its answer's first byte, `auto` (default) or a
    /// duration (`0s`: none); when it passes `infergate serve` tries the next endpoint (an
    /// infergate addition).
    #[serde(default)]
    pub first_byte_timeout: Option<FirstByteTimeout>,
    /// The longest silence between two chunks of an answer that has begun (default 60s, `0s`:
    /// none); the stream then ends with an error event (an infergate addition).
    #[serde(default)]
    pub stream_idle_timeout: Option<GatewayDuration>,
    /// When endpoints that keep failing leave the pool's picks (an infergate addition).
    #[serde(default)]
    pub outlier_detection: Option<OutlierDetection>,
    /// Forward the request's band to the model server as the body's `priority` (an infergate
    /// addition, default off): see [`super::traffic::Band::engine_priority`]. Only for servers
    /// started with vLLM's `--scheduling-policy priority`; under `fcfs` vLLM refuses any
    /// priority but 0 with a 400.
    #[serde(default)]
    pub forward_priority: Option<bool>,
    /// Resume a stream whose endpoint fails after the client began to receive it on another
    /// endpoint, from the tokens already sent (an infergate addition, default on; `serve` only).
    #[serde(default)]
    pub resume_streams: Option<bool>,
    /// Endpoint Picker replicas, at least 1 (deployment only).
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Extra environment of the Endpoint Picker container (deployment only).
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Environment sources of the Endpoint Picker container (deployment only).
    #[serde(default)]
    pub env_from: Vec<EnvFromSource>,
    /// Pod settings of this scheduler's Endpoint Picker (deployment only).
    #[serde(default)]
    pub pod_defaults: Option<PodDefaults>,
    /// Endpoint Picker log verbosity, 0..5.
    #[serde(default)]
    pub log_level: Option<u32>,
}

/// `appProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum AppProtocol {
    /// HTTP/1.1.
    #[serde(rename = "http")]
    Http,
    /// HTTP/2 over cleartext.
    #[serde(rename = "kubernetes.io/h2c")]
    H2c,
}

impl AppProtocol {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            AppProtocol::Http => "http",
            AppProtocol::H2c => "kubernetes.io/h2c",
        }
    }
}

/// `scheduler`: the picker family. infergate implements both with its own code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SchedulerKind {
    /// llm-d's scheduler (the only one with the `lru` scorer).
    #[serde(rename = "llm-d")]
    LlmD,
    /// The Gateway API Inference Extension's Endpoint Picker.
    #[serde(rename = "epp")]
    Epp,
}

impl SchedulerKind {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerKind::LlmD => "llm-d",
            SchedulerKind::Epp => "epp",
        }
    }
}

/// `engineType`: which metric names the scraper reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum EngineType {
    /// vLLM.
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang.
    #[serde(rename = "sglang")]
    Sglang,
    /// Hugging Face TGI (an infergate addition).
    #[serde(rename = "tgi")]
    Tgi,
}

impl EngineType {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineType::Vllm => "vllm",
            EngineType::Sglang => "sglang",
            EngineType::Tgi => "tgi",
        }
    }
}

/// `weights`: non-negative integers; 0 turns a scorer off. A field left out takes its default
/// ([`super::defaults::WEIGHT_QUEUE`], [`super::defaults::WEIGHT_KV_CACHE`], [`super::defaults::WEIGHT_PREFIX`], the
/// others off), whether or not the block is written; [`super::EffectiveWeights`] is them with
/// the defaults applied. This is the format's one home: the picker re-exports it and turns
/// [`super::EffectiveWeights`] into scorers (`infergate_picker::config::ScorerWeights`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Weights {
    /// queue-scorer.
    pub queue: Option<u32>,
    /// kv-cache-utilization-scorer.
    pub kv_cache: Option<u32>,
    /// prefix-cache-scorer.
    pub prefix: Option<u32>,
    /// lora-affinity-scorer.
    pub lora_affinity: Option<u32>,
    /// running-requests-size-scorer.
    pub running_requests: Option<u32>,
    /// latency-scorer.
    pub predicted_latency: Option<u32>,
    /// no-hit-lru-scorer (`scheduler: llm-d` only).
    pub lru: Option<u32>,
}

/// `configMapRef`: where a full `EndpointPickerConfig` lives.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigMapRef {
    /// The ConfigMap's name.
    pub name: String,
    /// The data key (default [`super::defaults::CONFIG_MAP_KEY`]).
    #[serde(default)]
    pub key: Option<String>,
}

/// `outlierDetection`, as written; resolved and checked in [`super::outlier`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OutlierDetection {
    /// Failed attempts in a row that eject an endpoint; 0 turns detection off.
    #[serde(default)]
    pub consecutive_failures: Option<u32>,
    /// The first ejection's length; each repeat doubles it.
    #[serde(default)]
    pub base_ejection_time: Option<GatewayDuration>,
    /// The longest ejection.
    #[serde(default)]
    pub max_ejection_time: Option<GatewayDuration>,
    /// The most of the pool ejected at once, in percent (1..100).
    #[serde(default)]
    pub max_ejection_percent: Option<u32>,
    /// How long a returning endpoint's share of picks takes to ramp from 10 % back to whole;
    /// `0s` returns it whole at once.
    #[serde(default)]
    pub slow_start_window: Option<GatewayDuration>,
    /// How long an endpoint's `/metrics` may stay byte-for-byte the same after this gateway sent
    /// it a request before its metrics count as stale (and, with detection on, it is ejected);
    /// `0s` turns the check off.
    #[serde(default)]
    pub frozen_metrics_after: Option<GatewayDuration>,
}

/// `firstByteTimeout`: how long one attempt at an endpoint may take to send the first byte of
/// its answer; what `auto` comes to is [`super::timeouts`]'s rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstByteTimeout {
    /// Derived per request from the TTFT the picker predicts for it at that endpoint (streamed
    /// requests only: a buffered answer's first byte comes with its last).
    Auto,
    /// This long for every attempt; zero: none.
    After(Duration),
}

impl<'de> Deserialize<'de> for FirstByteTimeout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "auto" {
            return Ok(FirstByteTimeout::Auto);
        }
        GatewayDuration::parse(&text)
            .map(|t| FirstByteTimeout::After(t.get()))
            .map_err(|e| de::Error::custom(format!("{e}, or `auto`")))
    }
}
