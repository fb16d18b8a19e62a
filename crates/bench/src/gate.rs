//! Flow control in virtual time: the real `flow` controller between arrivals and the picker,
//! fed the same scrapes the picker sees.

use crate::tuning::Tuning;
use infergate_config::gateway::{Band, OverloadSensor, ResolvedFlowControl, Setting};
use infergate_flow::{
    band_index, Admission, Detector, EndpointLoad, FlowConfig, FlowController, FlowRequest,
    Outcome, RecentPace,
};
use infergate_picker::{LoraInfo, ScrapedMetrics};
use std::time::Duration;

/// Bytes per token of the simulator's tokenizer: a request's body size for the byte caps.
const BYTES_PER_TOKEN: u64 = 4;

/// What became of an arrival at the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Pick and dispatch it now.
    Now,
    /// It waits; poll again at the latest at this time.
    Queued(Duration),
    /// Refused with this HTTP status (429 shed or queue full, 503 TTL expired).
    Refused(u16),
}

/// The flow controller of one pool with its saturation detector, under the gateway's default
/// `spec.flowControl` (enabled), changed as a run's [`Tuning`] says.
#[derive(Debug)]
pub struct FlowGate {
    flow: FlowController,
    detector: Detector,
    /// Each replica's last scrape as the detector reads it (`age` zero) and when it landed.
    last: Vec<Option<(EndpointLoad, Duration)>>,
    /// Each replica's recent decode pace, from its scrapes' inter-token latency totals.
    pace: Vec<RecentPace>,
    /// The detector's queue-depth threshold (waiting requests at saturation 1).
    queue_depth: f64,
    /// Pending prefill tokens read as a full queue, if counted.
    prefill_threshold: Option<u64>,
}

impl FlowGate {
    /// A gate for a pool of `replicas`, with the defaults a config that says nothing resolves to,
    /// flow control switched on.
    pub fn new(replicas: usize) -> Self {
        Self::tuned(replicas, &Tuning::default())
    }

    /// [`Self::new`] with the detector's extra signals and the Standard queue TTL `tuning`
    /// sets.
    pub fn tuned(replicas: usize, tuning: &Tuning) -> Self {
        let mut resolved = ResolvedFlowControl::default();
        resolved.saturation.running_requests_threshold = tuning.running_threshold;
        if let Some(kv) = tuning.kv_cache_threshold {
            resolved.saturation.kv_cache_threshold = Setting::set(kv);
        }
        if let Some(depth) = tuning.queue_depth_threshold {
            resolved.saturation.queue_depth_threshold = Setting::set(depth);
        }
        if let Some(itl) = tuning.inter_token_latency_threshold {
            resolved.saturation.inter_token_latency_threshold = Setting::set(itl);
        }
        if tuning.without_overload_rule {
            resolved.overload.enabled = Setting::set(false);
        }
        if tuning.kv_cache_always {
            resolved.overload.kv_cache_always = Setting::set(true);
        }
        if tuning.without_hold_while_draining {
            resolved.overload.hold_while_draining = Setting::set(false);
        }
        if tuning.backlog_overload_sensor {
            resolved.overload.sensor = Setting::set(OverloadSensor::Backlog);
        }
        if let Some(c) = tuning.sheddable_ceiling {
            resolved.bands[band_index(Band::Sheddable)].saturation_ceiling = Setting::set(c);
        }
        let mut config = FlowConfig::from_resolved(&resolved);
        config.enabled = true;
        if let Some(ttl) = tuning.standard_queue_ttl {
            config.bands[band_index(Band::Standard)].queue_ttl = ttl;
        }
        Self {
            flow: FlowController::new(config),
            detector: Detector::from_resolved(&resolved)
                .counting_adapter_bound_queues(tuning.counts_adapter_bound_queues),
            last: vec![None; replicas],
            pace: vec![RecentPace::new(); replicas],
            queue_depth: f64::from(resolved.saturation.queue_depth_threshold.value),
            prefill_threshold: tuning.prefill_tokens_threshold.map(|t| t.max(1)),
        }
    }

    /// A replica was scraped, with `pending_prefill` prompt tokens still to compute: the pool's
    /// state as the detector reads every replica's last scrape.
    pub fn on_scrape(
        &mut self,
        replica: usize,
        metrics: &ScrapedMetrics,
        pending_prefill: u64,
        now: Duration,
    ) {
        // A prefill backlog at its threshold reads as a full queue, so an endpoint's score is
        // the worst of its queue, its KV use and its backlog, for every band.
        let backlog = self.prefill_threshold.map_or(0.0, |t| {
            pending_prefill as f64 / t as f64 * self.queue_depth
        });
        let pace = self.pace.get_mut(replica).and_then(|p| {
            let t = metrics.inter_token_latency?;
            p.record(metrics.scraped_at, t.seconds, t.count);
            p.mean_seconds()
        });
        if let Some(slot) = self.last.get_mut(replica) {
            let load = EndpointLoad {
                waiting: metrics.waiting.map(|w| (w as f64).max(backlog)),
                kv_usage: metrics.kv_usage,
                running: metrics.running.map(|r| r as f64),
                adapter_bound: metrics
                    .lora
                    .as_ref()
                    .is_some_and(LoraInfo::waits_for_a_slot),
                inter_token_latency: pace,
                age: Duration::ZERO,
            };
            *slot = Some((load, metrics.scraped_at));
        }
        let loads = self.last.iter().flatten().map(|&(load, at)| EndpointLoad {
            age: now.saturating_sub(at),
            ..load
        });
        let state = self.detector.observe(loads);
        self.flow.observe(state, now);
    }

    /// The pool's saturation as of the last scrape, as a member's status reports it.
    pub fn saturation(&self) -> f64 {
        self.flow.last_observed().map_or(0.0, |s| s.saturation)
    }

    /// Requests waiting in the gate, every band.
    pub fn queued(&self) -> u64 {
        self.flow.total_queued().requests as u64
    }

    /// Request `id` of `band` and `tenant` with a prompt of `prompt_tokens` arrives.
    pub fn admit(
        &mut self,
        id: usize,
        band: Band,
        tenant: Option<&str>,
        prompt_tokens: u32,
        now: Duration,
    ) -> Gate {
        let req = FlowRequest {
            id: id as u64,
            band,
            tenant: tenant.map(str::to_owned),
            bytes: u64::from(prompt_tokens) * BYTES_PER_TOKEN,
        };
        match self.flow.enqueue(req, now) {
            Ok(Admission::DispatchNow) => Gate::Now,
            Ok(Admission::Queued { deadline }) => Gate::Queued(deadline),
            Ok(Admission::Rejected(r)) => Gate::Refused(r.status()),
            // Ids are arrival indices, unique by construction; a duplicate would be a runner bug
            // and is reported as a refusal rather than a panic.
            Err(_) => Gate::Refused(500),
        }
    }

    /// A dispatched request finished.
    pub fn complete(&mut self, now: Duration) {
        self.flow.on_complete(now);
    }

    /// Queued requests decided at `now`: `(id, None)` to dispatch, `(id, Some(status))` refused.
    pub fn poll(&mut self, now: Duration) -> Vec<(usize, Option<u16>)> {
        self.flow
            .poll(now)
            .into_iter()
            .map(|d| {
                let refused = match d.outcome {
                    Outcome::Dispatch => None,
                    Outcome::Reject(r) => Some(r.status()),
                };
                (d.id as usize, refused)
            })
            .collect()
    }

    /// The earliest queue deadline, if anything is queued.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.flow.next_deadline()
    }
}
