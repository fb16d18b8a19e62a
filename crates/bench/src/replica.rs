//! One simulated replica as the runner holds it, and what passes between it and the gateway's
//! code: a request dispatched to it (by the picker or by an oracle) and a scrape of its
//! `/metrics`.

use crate::workload::BenchRequest;
use infergate_config::gateway::Band;
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::{Engine, FinishReason, NewRequest, SchedulingPolicy};
use infergate_picker::{
    Dispatch, LatencyTotals, LoraInfo, Picker, Pool, RequestFeatures, ScrapedMetrics,
};
use std::time::Duration;

/// How a run without a picker chooses each request's replica, from the engines' true state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Oracle {
    /// `greedy-oracle` (`greedy_choice`): the lowest TTFT an estimate from the queued prefill
    /// work predicts.
    #[default]
    Greedy,
    /// `lookahead-oracle` (`lookahead_choice`): the earliest first token a copy of each
    /// engine, run forward, gives.
    Lookahead,
}

/// One simulated replica and its place in the event loop.
pub(crate) struct Replica {
    pub engine: Engine,
    /// The step end the heap holds a wake-up for.
    pub wake: Option<Duration>,
    /// When the scrape after the one due now lands.
    pub next_scrape: Duration,
    /// Seconds per prefill token at a full token budget: the greedy oracle's view of its speed,
    /// and what ranks GPU kinds for `round-robin-fastest-gpu`.
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
pub(crate) fn greedy_choice(replicas: &[Replica], r: &BenchRequest) -> Option<usize> {
    let mut best = (f64::INFINITY, None);
    let needed = r.prompt_tokens + r.output_tokens;
    for (i, rep) in replicas.iter().enumerate() {
        if rep.engine.config().max_model_len < needed {
            continue;
        }
        let predicted = greedy_estimate(rep, r);
        if predicted < best.0 {
            best = (predicted, Some(i));
        }
    }
    best.1
}

/// The greedy oracle's TTFT estimate for `r` on `rep`, in seconds: prefill work queued ahead
/// plus this prompt's uncached part, at the replica's prefill rate, plus one decode step.
fn greedy_estimate(rep: &Replica, r: &BenchRequest) -> f64 {
    let cached = rep.engine.cached_prefix_blocks(&r.block_hashes) as u64 * 16;
    let work =
        rep.engine.pending_prefill_tokens() + u64::from(r.prompt_tokens).saturating_sub(cached);
    let decode = rep
        .step_model
        .decode_nanos(rep.engine.num_decoding() as u32, 1_000)
        / 1e9;
    work as f64 * rep.prefill_secs_per_token + decode
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

/// How far past its dispatch the lookahead oracle forecasts a request's first token before it
/// gives up on a replica: past it, a request behind that long a queue is lost to any SLO, and
/// a forecast that long runs thousands of engine steps for every replica.
const LOOKAHEAD_HORIZON: Duration = Duration::from_secs(10);

/// The lookahead oracle's choice: the replica whose engine, copied and run forward from its
/// true state with the request added and nothing else arriving, gives it its first token
/// soonest (`Engine::forecast_first_token`). Replicas are forecast in the order of the greedy
/// estimate, each only up to the best first token so far, so a good bound comes early and
/// later forecasts stop at it; none whose estimate is past [`LOOKAHEAD_HORIZON`], so a pool far
/// past capacity costs no forecast at all. Where no replica gives a first token within the
/// horizon, the greedy estimate chooses. Only replicas whose context holds the request are
/// considered; `None` when none does.
pub(crate) fn lookahead_choice(
    replicas: &[Replica],
    r: &BenchRequest,
    now: Duration,
) -> Option<usize> {
    let needed = r.prompt_tokens + r.output_tokens;
    let mut order: Vec<(f64, usize)> = replicas
        .iter()
        .enumerate()
        .filter(|(_, rep)| rep.engine.config().max_model_len >= needed)
        .map(|(i, rep)| (greedy_estimate(rep, r), i))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best: Option<(Duration, usize)> = None;
    for &(estimate, i) in &order {
        // The estimate prices the queued prefill at the replica's peak prefill rate, so it is
        // seldom above the forecast: a replica (and every one after it in this order) whose
        // estimate is past the horizon has a queue that a forecast within it would not clear.
        // Not a test against the best so far: the estimate is not a strict lower bound, and
        // pruning on it dropped better choices (docs/journal.md).
        if estimate > LOOKAHEAD_HORIZON.as_secs_f64() {
            break;
        }
        let engine = &replicas[i].engine;
        let bound = best.map_or(now + LOOKAHEAD_HORIZON, |(at, _)| at);
        let request = new_request(r, engine.config().scheduling_policy);
        if let Some(at) = engine.forecast_first_token(now, request, bound) {
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, i));
            }
        }
    }
    best.map(|(_, i)| i)
        .or_else(|| order.first().map(|&(_, i)| i))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use infergate_engine::{EngineConfig, Profile};

    fn replica(num_gpu_blocks: u32) -> Replica {
        let mut config = EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap());
        config.num_gpu_blocks = num_gpu_blocks;
        config.max_model_len = 4_096;
        let step_model = StepTimeModel::calibrated(&config.profile, &config.calibration);
        let budget = u64::from(config.max_num_batched_tokens);
        Replica {
            prefill_secs_per_token: 1.0 / step_model.prefill_tokens_per_second(budget),
            step_model,
            engine: Engine::new(config),
            wake: None,
            next_scrape: Duration::ZERO,
        }
    }

    fn request(prompt_tokens: u32, output_tokens: u32, base: u64) -> BenchRequest {
        BenchRequest {
            at: Duration::ZERO,
            prompt_tokens,
            output_tokens,
            // Distinct blocks per request: nothing is served from another's prefix.
            block_hashes: (0..u64::from(prompt_tokens) / 16)
                .map(|b| base + b)
                .collect(),
            adapter: None,
            band: None,
            tenant: None,
        }
    }

    fn submit(rep: &mut Replica, r: &BenchRequest, now: Duration) -> infergate_engine::RequestId {
        let policy = rep.engine.config().scheduling_policy;
        rep.engine.submit(now, new_request(r, policy)).unwrap()
    }

    /// When `r`, sent to `rep` at `now`, gets its first token, run to the end.
    fn first_token(mut rep: Replica, r: &BenchRequest, now: Duration) -> Duration {
        let id = submit(&mut rep, r, now);
        let mut events = Vec::new();
        while let Some(at) = rep.engine.next_wakeup() {
            rep.engine.advance(at, &mut events);
        }
        events
            .iter()
            .find(|e| e.id == id && matches!(e.kind, infergate_engine::EventKind::Token { .. }))
            .unwrap()
            .at
    }

    #[test]
    fn the_lookahead_oracle_sees_a_full_kv_cache_that_the_greedy_estimate_misses() {
        let now = Duration::from_millis(100);
        let mut events = Vec::new();
        // Replica 0: its KV cache (40 blocks, 640 tokens) held by two requests with answers
        // still to come (each grows to 296 tokens), and a small prompt queued behind them that
        // the cache cannot take until one finishes; little prefill queued.
        let mut busy = replica(40);
        submit(&mut busy, &request(256, 40, 1_000), Duration::ZERO);
        submit(&mut busy, &request(256, 40, 2_000), Duration::ZERO);
        busy.engine.advance(now, &mut events);
        submit(&mut busy, &request(128, 10, 3_000), now);
        // Replica 1: a long prompt queued, a cache with room for everything.
        let mut roomy = replica(4_000);
        submit(&mut roomy, &request(3_000, 10, 4_000), now);
        let r = request(96, 10, 5_000);
        let replicas = vec![busy, roomy];

        assert_eq!(greedy_choice(&replicas, &r), Some(0));
        assert_eq!(lookahead_choice(&replicas, &r, now), Some(1));
        // And the lookahead was right: its first token comes far sooner on replica 1.
        let [busy, roomy]: [Replica; 2] = replicas.try_into().ok().unwrap();
        let (on_busy, on_roomy) = (first_token(busy, &r, now), first_token(roomy, &r, now));
        assert!(on_roomy < on_busy, "{on_roomy:?} against {on_busy:?}");
    }
}
