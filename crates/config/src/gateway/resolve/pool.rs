//! A resolved pool: one per scheduler, with defaults applied and, for static discovery, the
//! endpoints its `modelSelector` matches.

use std::collections::BTreeMap;

use super::Setting;
use crate::gateway::address::EndpointAddress;
use crate::gateway::defaults;
use crate::gateway::scheduler::{AppProtocol, EngineType, SchedulerKind, SchedulerSpec, Weights};
use crate::gateway::selector::LabelSelector;
use crate::gateway::types::EndpointSpec;

/// One model pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The scheduler's name.
    pub name: String,
    /// The model it serves.
    pub model_name: String,
    /// Every adapter that routes here (its `loraAdapters` and the adapter maps naming its
    /// model), sorted.
    pub adapters: Vec<String>,
    /// Which endpoints belong to it.
    pub selector: LabelSelector,
    /// Port of an endpoint whose address has none.
    pub target_port: Setting<u16>,
    /// Upstream protocol.
    pub app_protocol: Setting<AppProtocol>,
    /// Picker family.
    pub scheduler: Setting<SchedulerKind>,
    /// Metric dialect.
    pub engine_type: Setting<EngineType>,
    /// Where the picker's scorers come from.
    pub picker: PickerSource,
    /// `routeTimeout`, `firstByteTimeout` and `streamIdleTimeout`.
    pub timeouts: crate::gateway::ResolvedTimeouts,
    /// When endpoints that keep failing leave the picks.
    pub outlier_detection: crate::gateway::ResolvedOutlierDetection,
    /// Write the request's band into the forwarded body as vLLM's `priority`
    /// ([`crate::gateway::Band::engine_priority`]).
    pub forward_priority: Setting<bool>,
    /// Resume a stream whose endpoint fails mid-answer on another one.
    pub resume_streams: Setting<bool>,
    /// Static discovery: the endpoints the selector matches, in `spec.endpoints` order.
    /// Kubernetes discovery: empty (pods are watched at run time).
    pub endpoints: Vec<PoolEndpoint>,
}

/// Where a pool's picker configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickerSource {
    /// `weights` (or nothing): scorer weights with defaults applied.
    Weights(EffectiveWeights),
    /// `configMapRef`: an `EndpointPickerConfig` in a ConfigMap.
    ConfigMap {
        /// ConfigMap name.
        name: String,
        /// Data key.
        key: Setting<String>,
    },
    /// `pickerConfigFile`: an `EndpointPickerConfig` file, path as written.
    File(String),
    /// `policy`: a picker policy by name, as written.
    Named(String),
}

/// Scorer weights with each default applied and marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveWeights {
    /// queue-scorer.
    pub queue: Setting<u32>,
    /// kv-cache-utilization-scorer.
    pub kv_cache: Setting<u32>,
    /// prefix-cache-scorer.
    pub prefix: Setting<u32>,
    /// lora-affinity-scorer.
    pub lora_affinity: Setting<u32>,
    /// running-requests-size-scorer.
    pub running_requests: Setting<u32>,
    /// latency-scorer.
    pub predicted_latency: Setting<u32>,
    /// no-hit-lru-scorer.
    pub lru: Setting<u32>,
}

impl EffectiveWeights {
    /// Applies the defaults to `weights` as written (or to nothing).
    pub fn from_weights(weights: Option<&Weights>) -> EffectiveWeights {
        let w = weights.copied().unwrap_or_default();
        EffectiveWeights {
            queue: Setting::or(w.queue, defaults::WEIGHT_QUEUE),
            kv_cache: Setting::or(w.kv_cache, defaults::WEIGHT_KV_CACHE),
            prefix: Setting::or(w.prefix, defaults::WEIGHT_PREFIX),
            lora_affinity: Setting::or(w.lora_affinity, defaults::WEIGHT_OFF),
            running_requests: Setting::or(w.running_requests, defaults::WEIGHT_OFF),
            predicted_latency: Setting::or(w.predicted_latency, defaults::WEIGHT_OFF),
            lru: Setting::or(w.lru, defaults::WEIGHT_OFF),
        }
    }

    /// Each weight under its config name, in a fixed order.
    pub fn entries(&self) -> [(&'static str, Setting<u32>); 7] {
        [
            ("queue", self.queue),
            ("kvCache", self.kv_cache),
            ("prefix", self.prefix),
            ("loraAffinity", self.lora_affinity),
            ("runningRequests", self.running_requests),
            ("predictedLatency", self.predicted_latency),
            ("lru", self.lru),
        ]
    }

    /// Whether every scorer is off.
    pub fn all_off(&self) -> bool {
        self.entries().iter().all(|(_, w)| w.value == 0)
    }
}

/// A static endpoint as a member of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolEndpoint {
    /// Its index in `spec.endpoints`.
    pub index: usize,
    /// Its address as parsed.
    pub address: EndpointAddress,
    /// The port used: the address's own, else the pool's `targetPort`.
    pub port: u16,
    /// Whether `port` is the address's own (it wins over `targetPort`).
    pub port_from_address: bool,
    /// `host:port` to connect to.
    pub authority: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl Pool {
    /// How the pool picks, in one line, for comparing the same pool across clusters (the
    /// global tier's drift check): the scheduler, the metric dialect and the picker's source
    /// (its weights, its named policy, or where its EndpointPickerConfig lives). Endpoints,
    /// timeouts and the like are left out: they differ between clusters on purpose.
    pub fn routing_definition(&self) -> String {
        let picker = match &self.picker {
            PickerSource::Weights(w) => {
                let parts: Vec<String> = w
                    .entries()
                    .iter()
                    .map(|(name, s)| format!("{name} {}", s.value))
                    .collect();
                format!("weights {}", parts.join(", "))
            }
            PickerSource::ConfigMap { name, key } => {
                format!(
                    "EndpointPickerConfig in ConfigMap {name}, key {}",
                    key.value
                )
            }
            PickerSource::File(path) => format!("EndpointPickerConfig file {path}"),
            PickerSource::Named(name) => format!("policy {name}"),
        };
        format!(
            "scheduler {:?}, engine {:?}, {picker}",
            self.scheduler.value, self.engine_type.value
        )
    }

    /// Resolves one validated scheduler; `endpoints` is `spec.endpoints` under static
    /// discovery.
    pub(super) fn new(
        s: &SchedulerSpec,
        adapters: Vec<String>,
        endpoints: Option<&[EndpointSpec]>,
    ) -> Pool {
        let target_port = Setting::or(
            s.target_port.and_then(|p| u16::try_from(p).ok()),
            defaults::TARGET_PORT,
        );
        let picker = if let Some(r) = &s.config_map_ref {
            PickerSource::ConfigMap {
                name: r.name.clone(),
                key: Setting::or(r.key.clone(), defaults::CONFIG_MAP_KEY.to_owned()),
            }
        } else if let Some(path) = &s.picker_config_file {
            PickerSource::File(path.clone())
        } else if let Some(name) = &s.policy {
            PickerSource::Named(name.clone())
        } else {
            PickerSource::Weights(EffectiveWeights::from_weights(s.weights.as_ref()))
        };
        let members = endpoints
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter(|(_, e)| s.model_selector.matches(&e.labels))
            .filter_map(|(index, e)| {
                let address: EndpointAddress = e.address.parse().ok()?;
                Some(PoolEndpoint {
                    index,
                    authority: address.with_default_port(target_port.value),
                    port: address.port.unwrap_or(target_port.value),
                    port_from_address: address.port.is_some(),
                    address,
                    labels: e.labels.clone(),
                })
            })
            .collect();
        Pool {
            name: s.name.clone(),
            model_name: s.model_name.clone(),
            adapters,
            selector: s.model_selector.clone(),
            target_port,
            app_protocol: Setting::or(s.app_protocol, defaults::APP_PROTOCOL),
            scheduler: Setting::or(s.scheduler, defaults::SCHEDULER),
            engine_type: Setting::or(s.engine_type, defaults::ENGINE_TYPE),
            picker,
            timeouts: crate::gateway::ResolvedTimeouts::new(
                s.route_timeout,
                s.first_byte_timeout,
                s.stream_idle_timeout,
            ),
            outlier_detection: crate::gateway::ResolvedOutlierDetection::new(
                s.outlier_detection.as_ref(),
            ),
            forward_priority: Setting::or(s.forward_priority, defaults::FORWARD_PRIORITY),
            resume_streams: Setting::or(s.resume_streams, defaults::RESUME_STREAMS),
            endpoints: members,
        }
    }
}
