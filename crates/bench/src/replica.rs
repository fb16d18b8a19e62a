//! One simulated replica as the runner holds it, and what passes between it and the gateway's
//! code: a request dispatched to it (by the picker or by clairvoyance) and a scrape of its
//! `/metrics`.

use crate::workload::BenchRequest;
use infergate_config::gateway::Band;
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::{Engine, FinishReason, NewRequest, SchedulingPolicy};
use infergate_picker::{
    Dispatch, LatencyTotals, LoraInfo, Picker, Pool, RequestFeatures, ScrapedMetrics,
};
use std::time::Duration;

/// One simulated replica and its place in the event loop.
pub(crate) struct Replica {
    pub engine: Engine,
    /// The step end the heap holds a wake-up for.
    pub wake: Option<Duration>,
    /// When the scrape after the one due now lands.
    pub next_scrape: Duration,
    /// Clairvoyant's view of its speed.
    pub prefill_secs_per_token: f64,
    pub step_model: StepTimeModel,
}

/// What an engine with `policy` is asked to run for `r`. Under the priority policy the band goes
/// along as the engine priority ([`Band::engine_priority`], what a pool with `forwardPriority`
/// writes into the body); an FCFS engine gets vLLM's default 0, as it refuses any other.
pub(crate) fn new_request(r: &BenchRequest, policy: SchedulingPolicy) -> NewRequest {
    let priority = match policy {
        SchedulingPolicy::Fcfs => 0,
        SchedulingPolicy::Priority => r.band.unwrap_or(Band::Standard).engine_priority(),
    };
    NewRequest {
        prompt_tokens: r.prompt_tokens,
        block_hashes: r.block_hashes.clone(),
        output_tokens: r.output_tokens,
        finish: FinishReason::Length,
        adapter: r.adapter.clone(),
        priority,
    }
}

pub(crate) fn choose(
    picker: &mut Picker,
    pool: &Pool,
    r: &BenchRequest,
    now: Duration,
) -> Option<(usize, Dispatch)> {
    // The picker's approximate index looks at no more than its policy's leading blocks.
    let hashed = r
        .block_hashes
        .len()
        .min(picker.policy().prefix_params().max_prefix_blocks);
    let features = RequestFeatures {
        prompt_block_hashes: r.block_hashes[..hashed].to_vec(),
        target_adapter: r.adapter.clone(),
        context_tokens: u64::from(r.prompt_tokens) + u64::from(r.output_tokens),
        ..RequestFeatures::new("model", u64::from(r.prompt_tokens))
    };
    let pick = picker.pick(pool, &features, now).ok()?;
    let dispatch = picker
        .on_dispatch(pool, pick.primary, &features, now)
        .ok()?;
    Some((pick.primary.0 as usize, dispatch))
}

/// The replica with the lowest predicted TTFT from its true state: prefill work queued ahead
/// plus this prompt's uncached part, at the replica's prefill rate, plus one decode step.
/// Only replicas whose context holds the request are considered; `None` when none does.
pub(crate) fn clairvoyant_choice(replicas: &[Replica], r: &BenchRequest) -> Option<usize> {
    let mut best = (f64::INFINITY, None);
    let needed = r.prompt_tokens + r.output_tokens;
    for (i, rep) in replicas.iter().enumerate() {
        if rep.engine.config().max_model_len < needed {
            continue;
        }
        let cached = rep.engine.cached_prefix_blocks(&r.block_hashes) as u64 * 16;
        let work =
            rep.engine.pending_prefill_tokens() + u64::from(r.prompt_tokens).saturating_sub(cached);
        let decode = rep
            .step_model
            .decode_nanos(rep.engine.num_decoding() as u32, 1_000)
            / 1e9;
        let predicted = work as f64 * rep.prefill_secs_per_token + decode;
        if predicted < best.0 {
            best = (predicted, Some(i));
        }
    }
    best.1
}

/// What the gateway's scraper would read from this replica's `/metrics` now.
pub(crate) fn scrape(engine: &Engine, now: Duration) -> ScrapedMetrics {
    let g = engine.gauges();
    let c = engine.counters();
    ScrapedMetrics {
        body_fingerprint: None,
        scraped_at: now,
        waiting: Some(g.waiting as u64),
        running: Some(g.running as u64),
        kv_usage: Some(g.kv_usage),
        lora: (g.max_lora > 0).then_some(LoraInfo {
            max_lora: g.max_lora as u32,
            running: g.running_adapters,
            waiting: g.waiting_adapters,
        }),
        block_size: Some(g.block_size),
        num_gpu_blocks: Some(u64::from(g.num_gpu_blocks)),
        prefix_cache_queries: Some(c.prefix_cache_queries),
        prefix_cache_hits: Some(c.prefix_cache_hits),
        prefix_cache_hit_rate: None,
        max_model_len: Some(engine.config().max_model_len),
        inter_token_latency: Some(LatencyTotals {
            seconds: c.itl.sum(),
            count: c.itl.count(),
        }),
    }
}
