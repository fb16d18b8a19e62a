//! What the picker knows about one endpoint: who it is and what its last scrape said.
//!
//! Every load signal is an `Option`: a family the server did not export, a value that was NaN, or
//! a scrape that never arrived is `None`, never 0. A zero would make a broken pod look idle and
//! draw traffic onto it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A stable identity for an endpoint, chosen by discovery and kept across snapshots.
///
/// The picker's learned state (prefix index, latency model) is keyed by it, so an endpoint that
/// stays in the pool keeps what was learned about it when the pool is rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub u64);

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoint#{}", self.0)
    }
}

/// The static description of an endpoint: what changes only when membership changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    /// Stable identity.
    pub id: EndpointId,
    /// Where to send requests, `"ip:port"` (or `"host:port"`); unique within a pool.
    pub address: String,
    /// A name for people: `<pod>-rank-<i>` for a discovered pod's port, the address for a
    /// static endpoint.
    pub name: String,
    /// Pod or static labels, matched by label-selector filters.
    pub labels: BTreeMap<String, String>,
}

impl EndpointSpec {
    /// An endpoint with no labels.
    pub fn new(id: u64, address: impl Into<String>) -> Self {
        let address = address.into();
        Self {
            id: EndpointId(id),
            name: address.clone(),
            address,
            labels: BTreeMap::new(),
        }
    }

    /// Names it (builder style).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a label (builder style).
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// LoRA residency as the server reports it (`vllm:lora_requests_info`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoraInfo {
    /// Adapter slots on the GPU (`max_lora`).
    pub max_lora: u32,
    /// Adapters with running requests (loaded).
    pub running: Vec<String>,
    /// Adapters with waiting requests.
    pub waiting: Vec<String>,
}

impl LoraInfo {
    /// Adapters named in either list, each counted once.
    ///
    /// In current vLLM a waiting adapter is usually also running; counting the union keeps a slot
    /// from being counted twice (upstream GIE made the same fix).
    pub fn distinct_adapters(&self) -> usize {
        let extra = self
            .waiting
            .iter()
            .filter(|w| !self.running.contains(w))
            .count();
        self.running.len() + extra
    }

    /// Whether at least one more adapter fits without evicting one.
    pub fn has_free_slot(&self) -> bool {
        self.distinct_adapters() < self.max_lora as usize
    }

    /// Whether requests wait for an adapter slot: every slot is held by an adapter with running
    /// requests (none can be evicted) and some waiting adapter is not among them. Then part of
    /// the server's waiting queue waits for a slot, not for batch room.
    pub fn waits_for_a_slot(&self) -> bool {
        self.max_lora > 0
            && self.running.len() >= self.max_lora as usize
            && self.waiting.iter().any(|w| !self.running.contains(w))
    }
}

/// One endpoint's scraped model-server metrics, with the time the scrape landed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScrapedMetrics {
    /// When the scrape landed, as time since the caller's epoch. Age is `now - scraped_at`.
    pub scraped_at: Duration,
    /// Requests waiting in the server's queue.
    pub waiting: Option<u64>,
    /// Requests in the running batch.
    pub running: Option<u64>,
    /// KV-cache use in `0..=1`.
    pub kv_usage: Option<f64>,
    /// LoRA residency.
    pub lora: Option<LoraInfo>,
    /// Tokens per KV block (vLLM `block_size`, SGLang `page_size`).
    pub block_size: Option<u32>,
    /// KV blocks on the GPU (vLLM `num_gpu_blocks`, SGLang `num_pages`).
    pub num_gpu_blocks: Option<u64>,
    /// Prompt tokens looked up in the prefix cache (counter).
    pub prefix_cache_queries: Option<u64>,
    /// Prompt tokens found in the prefix cache (counter).
    pub prefix_cache_hits: Option<u64>,
    /// Prefix-cache hit rate in `0..=1`, where the engine reports a rate instead of counters.
    pub prefix_cache_hit_rate: Option<f64>,
    /// The longest context (prompt + generated tokens) the server accepts (vLLM
    /// `max_model_len`, from `/v1/models`); `None`: unknown, which takes any request.
    pub max_model_len: Option<u32>,
    /// The server's inter-token latency histogram's running totals (vLLM
    /// `vllm:inter_token_latency_seconds`, SGLang `sglang:inter_token_latency_seconds`): two
    /// scrapes' difference is the mean gap between tokens in between.
    pub inter_token_latency: Option<LatencyTotals>,
    /// A fingerprint of the whole `/metrics` body this was read from (any change to it changes
    /// the fingerprint): how [`crate::Pool::update_scrape`] tells metrics that stopped moving.
    /// `None` for metrics that were not read from a body.
    pub body_fingerprint: Option<u64>,
}

/// A latency histogram's cumulative `_sum` (seconds) and `_count`, summed over its series.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencyTotals {
    /// Seconds observed in all.
    pub seconds: f64,
    /// Observations.
    pub count: u64,
}

impl ScrapedMetrics {
    /// Metrics with every signal missing, scraped at `scraped_at`.
    pub fn empty(scraped_at: Duration) -> Self {
        Self {
            scraped_at,
            ..Self::default()
        }
    }

    /// How old these metrics are at `now` (zero if `now` is before the scrape).
    pub fn age(&self, now: Duration) -> Duration {
        now.saturating_sub(self.scraped_at)
    }

    /// KV capacity in tokens, when both block size and block count are known.
    pub fn kv_capacity_tokens(&self) -> Option<u64> {
        Some(u64::from(self.block_size?).saturating_mul(self.num_gpu_blocks?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lora_union_counts_an_adapter_once() {
        let info = LoraInfo {
            max_lora: 2,
            running: vec!["a".into()],
            waiting: vec!["a".into()],
        };
        assert_eq!(info.distinct_adapters(), 1);
        assert!(info.has_free_slot());
        let full = LoraInfo {
            max_lora: 2,
            running: vec!["a".into()],
            waiting: vec!["b".into()],
        };
        assert!(!full.has_free_slot());
    }

    #[test]
    fn requests_wait_for_a_slot_only_when_every_slot_runs_another_adapter() {
        let info = |running: &[&str], waiting: &[&str]| LoraInfo {
            max_lora: 2,
            running: running.iter().map(|&a| a.into()).collect(),
            waiting: waiting.iter().map(|&a| a.into()).collect(),
        };
        assert!(info(&["a", "b"], &["c"]).waits_for_a_slot());
        assert!(info(&["a", "b"], &["a", "c"]).waits_for_a_slot());
        // What waits has its adapter in the batch: it waits for batch room.
        assert!(!info(&["a", "b"], &["a", "b"]).waits_for_a_slot());
        // A slot is free (or holds an evictable adapter) for the waiting one.
        assert!(!info(&["a"], &["c"]).waits_for_a_slot());
        assert!(!info(&[], &["c"]).waits_for_a_slot());
        // A server without LoRA slots.
        let none = LoraInfo {
            max_lora: 0,
            ..info(&[], &["c"])
        };
        assert!(!none.waits_for_a_slot());
    }

    #[test]
    fn age_saturates_and_capacity_needs_both_fields() {
        let mut m = ScrapedMetrics::empty(Duration::from_millis(100));
        assert_eq!(m.age(Duration::from_millis(50)), Duration::ZERO);
        assert_eq!(m.age(Duration::from_millis(175)), Duration::from_millis(75));
        assert_eq!(m.kv_capacity_tokens(), None);
        m.block_size = Some(16);
        assert_eq!(m.kv_capacity_tokens(), None);
        m.num_gpu_blocks = Some(1000);
        assert_eq!(m.kv_capacity_tokens(), Some(16_000));
    }
}
