//! The virtual-time runner: simulated replicas, the real picker, scrapes at their real interval.
//!
//! One event heap orders arrivals, engine step ends and per-replica scrapes. A scrape copies a
//! replica's gauges into the picker's pool exactly as the gateway's scraper would parse them from
//! `/metrics`, so between scrapes the picker sees metrics up to one interval old — the staleness
//! that makes naive max-score pickers herd. Each replica's scrapes have their own random phase.
//! `clairvoyant` instead reads every engine's true state at dispatch time.

use crate::event_loop::{Ev, Sim};
use crate::gate::FlowGate;
use crate::scenario::{ReplicaKind, Scenario};
pub use crate::tuning::Tuning;
use crate::workload::BenchRequest;
use infergate_config::gateway::Band;
use infergate_engine::rng::Rng;
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::{Engine, FinishReason, NewRequest, SchedulingPolicy};
use infergate_picker::{
    Dispatch, EndpointSpec, LoraInfo, Picker, Policy, Pool, RequestFeatures, ScrapedMetrics,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

/// The picker's approximate index looks at no more than this many leading blocks.
const MAX_PREFIX_BLOCKS: usize = 256;

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A profile in the scenario does not exist.
    #[error("profile: {0}")]
    Profile(#[from] infergate_engine::ProfileError),
    /// A replica's settings make no engine (the field is named).
    #[error(transparent)]
    Settings(#[from] infergate_engine::SettingsError),
    /// The policy name is unknown.
    #[error("policy `{0}`: {1}")]
    Policy(String, String),
    /// The trace could not be read.
    #[error("trace: {0}")]
    Trace(#[from] crate::trace::TraceError),
    /// A tuned engine setting is one the engine refuses.
    #[error("engine: {0}")]
    Engine(#[from] infergate_engine::ConfigError),
}

/// Knobs of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOptions {
    /// How long arrivals last.
    pub duration: Duration,
    /// Seed of arrivals, lengths, scrape phases, jitter and the picker.
    pub seed: u64,
    /// Metrics scrape interval.
    pub scrape_interval: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: Duration::from_secs(120),
            seed: 1,
            scrape_interval: Duration::from_millis(50),
        }
    }
}

/// What one request saw.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Outcome {
    /// When it was sent.
    pub sent: Duration,
    /// First token, if it got one.
    pub first_token: Option<Duration>,
    /// Last token, if it finished.
    pub finished: Option<Duration>,
    /// Tokens generated.
    pub output_tokens: u32,
    /// Refused (no endpoint, or the engine refused it).
    pub error: bool,
    /// Refused by flow control with this status (429 shed, 503 queue TTL), never sent.
    pub refused: Option<u16>,
    /// Its priority band, if it had one.
    pub band: Option<infergate_config::gateway::Band>,
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// One per request, in arrival order.
    pub requests: Vec<Outcome>,
    /// When the last arrival came.
    pub last_arrival: Duration,
    /// Fleet prefix-cache hits over queries (tokens).
    pub prefix_hit_ratio: f64,
    /// Preemptions across the fleet.
    pub preemptions: u64,
    /// Each replica's waiting queue at each of its scrapes until the last arrival.
    pub queue_samples: Vec<QueueSample>,
    /// One per request, in arrival order: the gaps between its successive tokens, in
    /// milliseconds (none for a request with fewer than two tokens). The report's ITL.
    pub token_gaps_ms: Vec<Vec<f32>>,
}

/// A replica's queue when it was scraped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueSample {
    /// When.
    pub at: Duration,
    /// Which replica (its index in the scenario's fleet).
    pub replica: u32,
    /// Requests waiting.
    pub waiting: u32,
    /// Requests running.
    pub running: u32,
}

/// A replica of `kind` serving every adapter `requests` name (as vLLM started with
/// `--lora-modules` for each): its settings through the conversion `infergate sim` uses, then
/// what the run decides — its seed (a replica's own `seed` is folded in, so replicas seeded
/// apart stay apart and every seed of a run still differs) and any tuned limits.
pub(crate) fn engine_for(
    kind: &ReplicaKind,
    seed: u64,
    requests: &[BenchRequest],
    tuning: &Tuning,
) -> Result<Engine, BenchError> {
    let mut config = kind.engine_config()?;
    if let Some(budget) = tuning.max_num_batched_tokens {
        config.max_num_batched_tokens = budget;
    }
    if let Some(seqs) = tuning.max_num_seqs {
        config.max_num_seqs = seqs;
    }
    // The settings were valid; a tuned limit may not be (a budget below the batch cap).
    config.validate()?;
    config.seed ^= seed;
    // Every token's time, so that ITL is the gaps between tokens, not an average per request.
    config.report_every_token = true;
    let mut engine = Engine::new(config);
    if engine.config().max_loras > 0 {
        for name in requests.iter().filter_map(|r| r.adapter.as_deref()) {
            engine.register_adapter(name);
        }
    }
    Ok(engine)
}

/// The requests a replica of `kind` finishes per second when offered far more than it can
/// serve: `requests` (at least a few hundred) all queued at once, in a closed loop that keeps
/// it full, measured between the 20th and 80th percentiles of completions.
pub fn replica_capacity(
    kind: &ReplicaKind,
    requests: &[BenchRequest],
    seed: u64,
) -> Result<f64, BenchError> {
    let mut engine = engine_for(kind, seed, requests, &Tuning::default())?;
    let cap = engine.config().max_num_seqs as usize;
    let max_len = engine.config().max_model_len;
    let policy = engine.config().scheduling_policy;
    let arrivals = requests
        .iter()
        .filter(|r| r.prompt_tokens + r.output_tokens <= max_len)
        .map(|r| infergate_engine::drive::Arrival {
            at: Duration::ZERO,
            request: new_request(r, policy),
        })
        .collect();
    let record =
        infergate_engine::drive::run(&mut engine, arrivals, cap, Duration::from_secs(100_000));
    let mut done: Vec<f64> = record
        .requests
        .iter()
        .filter_map(|r| r.finished)
        .map(|t| t.as_secs_f64())
        .collect();
    done.sort_by(f64::total_cmp);
    let (lo, hi) = (done.len() / 5, done.len() * 4 / 5);
    if hi <= lo + 1 {
        return Ok(0.0);
    }
    Ok((hi - lo) as f64 / (done[hi] - done[lo]).max(1e-9))
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

/// Runs `requests` on the scenario's fleet with `policy` (a picker policy name, or
/// `clairvoyant`) and returns what every request saw.
pub fn run(
    scenario: &Scenario,
    policy: &str,
    requests: &[BenchRequest],
    options: &RunOptions,
) -> Result<RunOutcome, BenchError> {
    if policy == "clairvoyant" {
        return run_with(scenario, None, requests, options);
    }
    let named =
        Policy::named(policy).map_err(|e| BenchError::Policy(policy.into(), e.to_string()))?;
    run_with(scenario, Some(named), requests, options)
}

/// Runs `requests` with a picker policy given as a value (`None`: clairvoyant), for policies
/// that have no name, such as candidates of a weight search.
pub fn run_with(
    scenario: &Scenario,
    policy: Option<Policy>,
    requests: &[BenchRequest],
    options: &RunOptions,
) -> Result<RunOutcome, BenchError> {
    run_tuned(scenario, policy, requests, options, &Tuning::default())
}

/// [`run_with`] with the fleet and the gate changed as `tuning` says.
pub fn run_tuned(
    scenario: &Scenario,
    policy: Option<Policy>,
    requests: &[BenchRequest],
    options: &RunOptions,
    tuning: &Tuning,
) -> Result<RunOutcome, BenchError> {
    let mut replicas = Vec::new();
    let mut rng = Rng::new(options.seed ^ 0x5C4A_9E00);
    for (i, kind) in scenario.replicas().enumerate() {
        let engine = engine_for(
            kind,
            options.seed.wrapping_mul(1_000).wrapping_add(i as u64),
            requests,
            tuning,
        )?;
        let step_model =
            StepTimeModel::calibrated(&engine.config().profile, &engine.config().calibration);
        let budget = u64::from(engine.config().max_num_batched_tokens);
        let phase = Duration::from_secs_f64(rng.next_f64() * options.scrape_interval.as_secs_f64());
        replicas.push(Replica {
            prefill_secs_per_token: 1.0 / step_model.prefill_tokens_per_second(budget),
            step_model,
            engine,
            wake: None,
            next_scrape: phase + options.scrape_interval,
        });
    }
    let specs = (0..replicas.len())
        .map(|i| EndpointSpec::new(i as u64, format!("10.0.0.{}:8000", i + 1)))
        .collect();
    let pool = Pool::new(specs).map_err(|e| BenchError::Policy("pool".into(), e.to_string()))?;
    let picker = policy.map(|p| Picker::new(p, options.seed));

    let mut heap: BinaryHeap<Reverse<(Duration, Ev)>> = BinaryHeap::new();
    for (i, r) in requests.iter().enumerate() {
        heap.push(Reverse((r.at, Ev::Arrival(i))));
    }
    for e in 0..replicas.len() {
        heap.push(Reverse((Duration::ZERO, Ev::Scrape(e))));
    }
    let last_arrival = requests.last().map_or(Duration::ZERO, |r| r.at);
    let drain_until = last_arrival + options.duration.max(Duration::from_secs(600)) * 3;
    let mut sim = Sim {
        requests,
        gate: scenario
            .bands
            .map(|_| FlowGate::tuned(replicas.len(), tuning)),
        gate_wake: None,
        replicas,
        pool,
        picker,
        scrape_interval: options.scrape_interval,
        last_arrival,
        heap,
        outcomes: vec![Outcome::default(); requests.len()],
        last_token: vec![Duration::ZERO; requests.len()],
        token_gaps_ms: vec![Vec::new(); requests.len()],
        dispatches: (0..requests.len()).map(|_| None).collect(),
        owner: HashMap::new(),
        unfinished: requests.len(),
        events: Vec::new(),
        queue_samples: Vec::new(),
    };
    sim.run(drain_until);
    let Sim {
        replicas,
        outcomes,
        queue_samples,
        token_gaps_ms,
        ..
    } = sim;
    let (hits, queries, preemptions) = replicas.iter().fold((0, 0, 0), |(h, q, p), r| {
        let c = r.engine.counters();
        (
            h + c.prefix_cache_hits,
            q + c.prefix_cache_queries,
            p + c.preemptions,
        )
    });
    Ok(RunOutcome {
        requests: outcomes,
        last_arrival,
        prefix_hit_ratio: hits as f64 / (queries.max(1)) as f64,
        preemptions,
        queue_samples,
        token_gaps_ms,
    })
}

pub(crate) fn choose(
    picker: &mut Picker,
    pool: &Pool,
    r: &BenchRequest,
    now: Duration,
) -> Option<(usize, Dispatch)> {
    let features = RequestFeatures {
        prompt_block_hashes: r.block_hashes[..r.block_hashes.len().min(MAX_PREFIX_BLOCKS)].to_vec(),
        target_adapter: r.adapter.clone(),
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
pub(crate) fn clairvoyant_choice(replicas: &[Replica], r: &BenchRequest) -> usize {
    let mut best = (f64::INFINITY, 0);
    for (i, rep) in replicas.iter().enumerate() {
        let cached = rep.engine.cached_prefix_blocks(&r.block_hashes) as u64 * 16;
        let work =
            rep.engine.pending_prefill_tokens() + u64::from(r.prompt_tokens).saturating_sub(cached);
        let decode = rep
            .step_model
            .decode_nanos(rep.engine.num_decoding() as u32, 1_000)
            / 1e9;
        let predicted = work as f64 * rep.prefill_secs_per_token + decode;
        if predicted < best.0 {
            best = (predicted, i);
        }
    }
    best.1
}

/// What the gateway's scraper would read from this replica's `/metrics` now.
pub(crate) fn scrape(engine: &Engine, now: Duration) -> ScrapedMetrics {
    let g = engine.gauges();
    let c = engine.counters();
    ScrapedMetrics {
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
    }
}
