//! The counters and histograms a vLLM V1 server exports, kept by the engine as plain numbers.
//!
//! The HTTP front renders them in Prometheus text format under vLLM's exact names; the bucket
//! bounds here are vLLM's, so dashboards built for vLLM read the simulator unchanged.

/// `vllm:time_to_first_token_seconds` bucket bounds.
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// `vllm:inter_token_latency_seconds` (and `vllm:time_per_output_token_seconds`) bucket bounds.
pub const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// Bucket bounds of the per-request latency histograms (e2e, queue, prefill, decode).
pub const REQUEST_LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A cumulative histogram with fixed upper bounds (`+Inf` implied after the last).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); one more slot than `bounds` for `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// An empty histogram over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records one observation, in seconds.
    pub fn observe(&mut self, value: f64) {
        let slot = self.bounds.partition_point(|&b| b < value);
        self.counts[slot] += 1;
        self.sum += value;
        self.count += 1;
    }

    /// Records `n` observations of the same value (a step's ITL for each request in it).
    pub fn observe_many(&mut self, value: f64, n: u64) {
        if n == 0 {
            return;
        }
        let slot = self.bounds.partition_point(|&b| b < value);
        self.counts[slot] += n;
        self.sum += value * n as f64;
        self.count += n;
    }

    /// Upper bounds, without `+Inf`.
    pub fn bounds(&self) -> &'static [f64] {
        self.bounds
    }

    /// Cumulative counts per bound, then the total for `+Inf`.
    pub fn cumulative(&self) -> impl Iterator<Item = u64> + '_ {
        self.counts.iter().scan(0u64, |acc, &c| {
            *acc += c;
            Some(*acc)
        })
    }

    /// Sum of observations.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// Why a request finished, as vLLM labels `vllm:request_success_total{finished_reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// The model emitted its end-of-sequence token.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// The client went away or the request was cancelled.
    Abort,
}

impl FinishReason {
    /// The label value (`stop`, `length`, `abort`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
        }
    }
}

/// Cumulative counters and histograms since the engine started.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineCounters {
    /// `vllm:prompt_tokens_total`.
    pub prompt_tokens: u64,
    /// `vllm:generation_tokens_total`.
    pub generation_tokens: u64,
    /// `vllm:num_preemptions_total`.
    pub preemptions: u64,
    /// `vllm:request_success_total{finished_reason="stop"}`.
    pub finished_stop: u64,
    /// `vllm:request_success_total{finished_reason="length"}`.
    pub finished_length: u64,
    /// `vllm:request_success_total{finished_reason="abort"}`.
    pub finished_abort: u64,
    /// `vllm:prefix_cache_queries_total` (tokens).
    pub prefix_cache_queries: u64,
    /// `vllm:prefix_cache_hits_total` (tokens).
    pub prefix_cache_hits: u64,
    /// Engine steps run.
    pub steps: u64,
    /// LoRA adapter loads onto a GPU slot.
    pub lora_loads: u64,
    /// `vllm:time_to_first_token_seconds`.
    pub ttft: Histogram,
    /// `vllm:inter_token_latency_seconds`.
    pub itl: Histogram,
    /// `vllm:e2e_request_latency_seconds`.
    pub e2e: Histogram,
    /// `vllm:request_queue_time_seconds`.
    pub queue: Histogram,
    /// `vllm:request_prefill_time_seconds`.
    pub prefill: Histogram,
    /// `vllm:request_decode_time_seconds`.
    pub decode: Histogram,
}

impl Default for EngineCounters {
    fn default() -> Self {
        EngineCounters {
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            finished_stop: 0,
            finished_length: 0,
            finished_abort: 0,
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            steps: 0,
            lora_loads: 0,
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(REQUEST_LATENCY_BUCKETS),
            queue: Histogram::new(REQUEST_LATENCY_BUCKETS),
            prefill: Histogram::new(REQUEST_LATENCY_BUCKETS),
            decode: Histogram::new(REQUEST_LATENCY_BUCKETS),
        }
    }
}

impl EngineCounters {
    /// Counts one finished request.
    pub fn count_finish(&mut self, reason: FinishReason) {
        match reason {
            FinishReason::Stop => self.finished_stop += 1,
            FinishReason::Length => self.finished_length += 1,
            FinishReason::Abort => self.finished_abort += 1,
        }
    }
}

/// The gauges of the moment.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineGauges {
    /// `vllm:num_requests_running`.
    pub running: usize,
    /// `vllm:num_requests_waiting` (including requests still in the API front).
    pub waiting: usize,
    /// `vllm:kv_cache_usage_perc`, 0..1.
    pub kv_usage: f64,
    /// `vllm:cache_config_info{num_gpu_blocks}`.
    pub num_gpu_blocks: u32,
    /// `vllm:cache_config_info{block_size}`.
    pub block_size: u32,
    /// `vllm:lora_requests_info{max_lora}`.
    pub max_lora: usize,
    /// Adapters of running requests, sorted, deduplicated.
    pub running_adapters: Vec<String>,
    /// Adapters of waiting requests, sorted, deduplicated.
    pub waiting_adapters: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_is_not_below_them() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.1);
        h.observe(0.5);
        h.observe(5.0);
        h.observe_many(0.05, 2);
        assert_eq!(h.cumulative().collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(h.count(), 5);
        assert!((h.sum() - 5.7).abs() < 1e-12);
    }
}
