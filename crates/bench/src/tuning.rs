//! What a run may change beyond its scenario: the replicas' engine limits and the flow
//! controller's signals, to measure their effect on the same arrivals.

use std::time::Duration;

/// Settings a run may change beyond its scenario, to measure what they do on the same arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tuning {
    /// Every replica's step token budget (vLLM `--max-num-batched-tokens`) instead of its
    /// profile's default.
    pub max_num_batched_tokens: Option<u32>,
    /// Every replica's cap on running requests (vLLM `--max-num-seqs`) instead of its
    /// profile's default.
    pub max_num_seqs: Option<u32>,
    /// The flow controller's saturation detector also reads a replica with this many pending
    /// prefill tokens (queued and prefilling prompt tokens still to compute, the engine's own
    /// count as of its last scrape) as a full queue, for every band. vLLM exports no such
    /// gauge: a gateway would have to estimate it from what it dispatched.
    pub prefill_tokens_threshold: Option<u64>,
    /// The detector also counts each replica's running requests against this threshold, for
    /// the bands below Critical (the config's `saturation.runningRequestsThreshold`).
    pub running_threshold: Option<u32>,
    /// How long a Standard request may wait in the gateway's queue instead of the default.
    pub standard_queue_ttl: Option<Duration>,
    /// The Sheddable band's saturation ceiling instead of the default (the config's
    /// `bands[].saturationCeiling`); at most Standard's, 1.
    pub sheddable_ceiling: Option<f64>,
    /// The detector's KV-cache threshold instead of the default (the config's
    /// `saturation.kvCacheThreshold`); above 1 the KV signal never saturates an endpoint.
    pub kv_cache_threshold: Option<f64>,
    /// The detector's queue-depth threshold instead of the default (the config's
    /// `saturation.queueDepthThreshold`).
    pub queue_depth_threshold: Option<u32>,
    /// The detector's inter-token latency threshold instead of the default (the config's
    /// `saturation.interTokenLatencyThreshold`); zero: the decode pace is not read.
    pub inter_token_latency_threshold: Option<Duration>,
    /// The overload rule off (the config's `overload.enabled: false`).
    pub without_overload_rule: bool,
    /// KV-cache use holds requests at all times, not only in overload (the config's
    /// `overload.kvCacheAlways: true`).
    pub kv_cache_always: bool,
    /// The overload rule refuses at its wait even while the queue drains within it (the
    /// config's `overload.holdWhileDraining: false`).
    pub without_hold_while_draining: bool,
    /// The detector reads a LoRA server's waiting count even while requests in it wait for an
    /// adapter slot, as a detector blind to adapter residency does.
    pub counts_adapter_bound_queues: bool,
    /// The overload rule reads a queue not empty for its interval as overload, as it did before
    /// the sojourn sensor (the config's `overload.sensor: backlog`).
    pub backlog_overload_sensor: bool,
}
