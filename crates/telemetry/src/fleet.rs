//! The fleet as the picker sees it: per-endpoint and per-pool gauges, rewritten whole from the
//! pools' snapshots each time the metrics are read (by the control plane's admin listener).
//!
//! Rewritten rather than updated because the set of series follows membership: clearing and
//! refilling at read time drops an endpoint's series the moment it leaves its pool, with no
//! bookkeeping of who left. Beside infergate's own names, the pool families that GIE's EPP and
//! llm-d export, under their names, types and labels, so dashboards built for them work here.

use std::sync::atomic::AtomicU64;

use crate::catalog::Registrar;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// A gauge that holds a fraction or a mean.
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// Labels of a per-pool series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// The pool.
    pub pool: String,
}

/// Labels of an endpoint as the picker sees it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointViewLabels {
    /// The pool.
    pub pool: String,
    /// The endpoint's address.
    pub endpoint: String,
    /// The endpoint's name: `<pod>-rank-<i>` under Kubernetes discovery, the address otherwise.
    pub pod: String,
}

/// Labels of an endpoint that a filter would remove.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExclusionLabels {
    /// The pool.
    pub pool: String,
    /// The endpoint's address.
    pub endpoint: String,
    /// The endpoint's name.
    pub pod: String,
    /// `labels`, `never_scraped`, `stale`, `queue_full` or `kv_full`.
    pub reason: String,
}

/// Labels of an adapter an endpoint reports.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdapterLabels {
    /// The pool.
    pub pool: String,
    /// The endpoint's address.
    pub endpoint: String,
    /// The endpoint's name.
    pub pod: String,
    /// The adapter's name, as the server reports it (bounded by the server's `max_loras`).
    pub adapter: String,
    /// `running` (loaded) or `waiting` (for a slot).
    pub state: String,
}

/// Labels of a filter of a pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FilterLabels {
    /// The pool.
    pub pool: String,
    /// The filter's plugin type, like `saturation-filter`.
    pub filter: String,
}

/// GIE's and llm-d's pool label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    /// The pool.
    pub name: String,
}

/// GIE's per-pod label set.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodQueueLabels {
    /// The pool.
    pub name: String,
    /// The endpoint's name (`<pod>-rank-<i>`, as upstream).
    pub model_server_pod: String,
}

/// llm-d's per-endpoint label set.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointQueueLabels {
    /// The pool.
    pub name: String,
    /// The endpoint's name (`<pod>-rank-<i>`, as upstream).
    pub model_server_endpoint: String,
}

/// Every gauge of the fleet view. Invariant: between two reads every family holds exactly the
/// series of the pools and endpoints that existed at the last read.
#[derive(Debug, Default)]
pub struct FleetGauges {
    /// KV-cache use, as last scraped.
    pub endpoint_kv: Family<EndpointViewLabels, FloatGauge>,
    /// Waiting requests, as last scraped.
    pub endpoint_waiting: Family<EndpointViewLabels, FloatGauge>,
    /// Running requests, as last scraped.
    pub endpoint_running: Family<EndpointViewLabels, FloatGauge>,
    /// Seconds since the last good scrape (absent before the first).
    pub endpoint_scrape_age: Family<EndpointViewLabels, FloatGauge>,
    /// Requests this gateway has in flight there.
    pub endpoint_in_flight: Family<EndpointViewLabels, Gauge>,
    /// Requests sent since the last scrape and still in flight (the queue credit a pick adds).
    pub endpoint_queue_credit: Family<EndpointViewLabels, Gauge>,
    /// Uncached prompt tokens in flight that await their first token.
    pub endpoint_prefill_pending: Family<EndpointViewLabels, Gauge>,
    /// The latency model's TTFT for a request arriving now with no uncached prompt.
    pub endpoint_predicted_ttft: Family<EndpointViewLabels, FloatGauge>,
    /// The prefill rate the latency model learned.
    pub endpoint_prefill_rate: Family<EndpointViewLabels, FloatGauge>,
    /// The mean inter-token latency over the endpoint's recent scrapes, as flow control reads it.
    pub endpoint_decode_pace: Family<EndpointViewLabels, FloatGauge>,
    /// 1 for each reason a filter would remove the endpoint now, 0 for the profile's other
    /// reasons.
    pub endpoint_excluded: Family<ExclusionLabels, Gauge>,
    /// 1 per adapter an endpoint reports running or waiting.
    pub endpoint_adapter: Family<AdapterLabels, Gauge>,
    /// Endpoints whose metrics are fresh (scraped within the stale filter's age).
    pub pool_ready: Family<PoolLabels, Gauge>,
    /// Mean KV-cache use over fresh endpoints (absent when none is fresh).
    pub pool_mean_kv: Family<PoolLabels, FloatGauge>,
    /// Mean waiting queue over fresh endpoints.
    pub pool_mean_waiting: Family<PoolLabels, FloatGauge>,
    /// Mean running requests over fresh endpoints.
    pub pool_mean_running: Family<PoolLabels, FloatGauge>,
    /// 1 for a filter that would remove every endpoint now (and so fails open).
    pub pool_failing_open: Family<FilterLabels, Gauge>,
    /// `inference_pool_average_kv_cache_utilization`.
    pub gie_average_kv: Family<NameLabels, FloatGauge>,
    /// `inference_pool_average_queue_size`.
    pub gie_average_queue: Family<NameLabels, FloatGauge>,
    /// `inference_pool_average_running_requests`.
    pub gie_average_running: Family<NameLabels, FloatGauge>,
    /// `inference_pool_ready_pods`.
    pub gie_ready_pods: Family<NameLabels, Gauge>,
    /// `inference_pool_per_pod_queue_size`.
    pub gie_per_pod_queue: Family<PodQueueLabels, FloatGauge>,
    /// `llm_d_epp_ready_endpoints`.
    pub llmd_ready_endpoints: Family<NameLabels, Gauge>,
    /// `llm_d_epp_per_endpoint_queue_size`.
    pub llmd_per_endpoint_queue: Family<EndpointQueueLabels, FloatGauge>,
    /// `llm_d_epp_std_dev_kv_cache_utilization`.
    pub llmd_std_dev_kv: Family<NameLabels, FloatGauge>,
    /// `llm_d_epp_std_dev_queue_size`.
    pub llmd_std_dev_queue: Family<NameLabels, FloatGauge>,
    /// `llm_d_epp_std_dev_running_requests`.
    pub llmd_std_dev_running: Family<NameLabels, FloatGauge>,
}

impl FleetGauges {
    /// Registers infergate's families in `ours` (the prefixed registry).
    pub(crate) fn register_ours(&self, ours: &mut Registrar<'_>) {
        let g = self;
        ours.register(
            "endpoint_kv_cache_utilization",
            "KV-cache use of the endpoint (0..1), as last scraped",
            g.endpoint_kv.clone(),
        );
        ours.register(
            "endpoint_waiting_requests",
            "Requests waiting at the endpoint, as last scraped",
            g.endpoint_waiting.clone(),
        );
        ours.register(
            "endpoint_running_requests",
            "Requests running at the endpoint, as last scraped",
            g.endpoint_running.clone(),
        );
        ours.register(
            "scrape_age_seconds",
            "Seconds since the endpoint's last good scrape",
            g.endpoint_scrape_age.clone(),
        );
        ours.register(
            "endpoint_in_flight_requests",
            "Requests this gateway has in flight at the endpoint",
            g.endpoint_in_flight.clone(),
        );
        ours.register(
            "endpoint_queue_credit_requests",
            "Requests sent to the endpoint since its last scrape and still in flight",
            g.endpoint_queue_credit.clone(),
        );
        ours.register(
            "endpoint_prefill_pending_tokens",
            "Uncached prompt tokens sent to the endpoint that await their first token",
            g.endpoint_prefill_pending.clone(),
        );
        ours.register(
            "endpoint_predicted_ttft_seconds",
            "The latency model's time to first token at the endpoint for a request arriving now with no uncached prompt",
            g.endpoint_predicted_ttft.clone(),
        );
        ours.register(
            "endpoint_prefill_tokens_per_second",
            "The prefill rate the latency model learned for the endpoint",
            g.endpoint_prefill_rate.clone(),
        );
        ours.register(
            "endpoint_inter_token_latency_seconds",
            "The endpoint's mean inter-token latency over its last second of scrapes (its server's histogram), as flow control reads it",
            g.endpoint_decode_pace.clone(),
        );
        ours.register(
            "endpoint_excluded",
            "1 when a filter of the pool's profile would remove the endpoint now, by reason",
            g.endpoint_excluded.clone(),
        );
        ours.register(
            "endpoint_lora_adapter",
            "1 per LoRA adapter the endpoint reports, by state (running, waiting)",
            g.endpoint_adapter.clone(),
        );
        ours.register(
            "pool_ready_endpoints",
            "Endpoints of the pool with fresh metrics",
            g.pool_ready.clone(),
        );
        ours.register(
            "pool_mean_kv_cache_utilization",
            "Mean KV-cache use over the pool's fresh endpoints",
            g.pool_mean_kv.clone(),
        );
        ours.register(
            "pool_mean_waiting_requests",
            "Mean waiting queue over the pool's fresh endpoints",
            g.pool_mean_waiting.clone(),
        );
        ours.register(
            "pool_mean_running_requests",
            "Mean running requests over the pool's fresh endpoints",
            g.pool_mean_running.clone(),
        );
        ours.register(
            "pool_filter_failing_open",
            "1 while a filter would remove every endpoint of the pool (so removes none)",
            g.pool_failing_open.clone(),
        );
    }

    /// Registers the upstream families in `upstream` (the unprefixed registry).
    pub(crate) fn register_upstream(&self, upstream: &mut Registrar<'_>) {
        let g = self;
        upstream.register(
            "inference_pool_average_kv_cache_utilization",
            "Mean KV-cache use over the pool's endpoints with fresh metrics",
            g.gie_average_kv.clone(),
        );
        upstream.register(
            "inference_pool_average_queue_size",
            "Mean waiting queue over the pool's endpoints with fresh metrics",
            g.gie_average_queue.clone(),
        );
        upstream.register(
            "inference_pool_average_running_requests",
            "Mean running requests over the pool's endpoints with fresh metrics",
            g.gie_average_running.clone(),
        );
        upstream.register(
            "inference_pool_ready_pods",
            "Endpoints of the pool with fresh metrics",
            g.gie_ready_pods.clone(),
        );
        upstream.register(
            "inference_pool_per_pod_queue_size",
            "Waiting requests per endpoint",
            g.gie_per_pod_queue.clone(),
        );
        upstream.register(
            "llm_d_epp_ready_endpoints",
            "Endpoints of the pool with fresh metrics",
            g.llmd_ready_endpoints.clone(),
        );
        upstream.register(
            "llm_d_epp_per_endpoint_queue_size",
            "Waiting requests per endpoint",
            g.llmd_per_endpoint_queue.clone(),
        );
        upstream.register(
            "llm_d_epp_std_dev_kv_cache_utilization",
            "Standard deviation of KV-cache use over the pool's fresh endpoints",
            g.llmd_std_dev_kv.clone(),
        );
        upstream.register(
            "llm_d_epp_std_dev_queue_size",
            "Standard deviation of the waiting queue over the pool's fresh endpoints",
            g.llmd_std_dev_queue.clone(),
        );
        upstream.register(
            "llm_d_epp_std_dev_running_requests",
            "Standard deviation of running requests over the pool's fresh endpoints",
            g.llmd_std_dev_running.clone(),
        );
    }

    /// Removes every series, before the fleet is written again.
    pub fn clear(&self) {
        let g = self;
        for f in [
            &g.endpoint_kv,
            &g.endpoint_waiting,
            &g.endpoint_running,
            &g.endpoint_scrape_age,
            &g.endpoint_predicted_ttft,
            &g.endpoint_prefill_rate,
            &g.endpoint_decode_pace,
        ] {
            f.clear();
        }
        for f in [
            &g.endpoint_in_flight,
            &g.endpoint_queue_credit,
            &g.endpoint_prefill_pending,
        ] {
            f.clear();
        }
        g.endpoint_excluded.clear();
        g.endpoint_adapter.clear();
        g.pool_ready.clear();
        for f in [&g.pool_mean_kv, &g.pool_mean_waiting, &g.pool_mean_running] {
            f.clear();
        }
        g.pool_failing_open.clear();
        for f in [
            &g.gie_average_kv,
            &g.gie_average_queue,
            &g.gie_average_running,
            &g.llmd_std_dev_kv,
            &g.llmd_std_dev_queue,
            &g.llmd_std_dev_running,
        ] {
            f.clear();
        }
        g.gie_ready_pods.clear();
        g.llmd_ready_endpoints.clear();
        g.gie_per_pod_queue.clear();
        g.llmd_per_endpoint_queue.clear();
    }
}

/// Mean and population standard deviation of `xs`; `None` when empty.
pub fn mean_and_std_dev(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Some((mean, var.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_std_dev_of_a_small_set() {
        assert_eq!(mean_and_std_dev(&[]), None);
        assert_eq!(mean_and_std_dev(&[3.0]), Some((3.0, 0.0)));
        let (m, s) = mean_and_std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).expect("some");
        assert!(
            (m - 5.0).abs() < 1e-12 && (s - 2.0).abs() < 1e-12,
            "{m} {s}"
        );
    }
}
