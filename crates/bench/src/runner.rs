//! The virtual-time runner: simulated replicas, the real picker, scrapes at their real interval.
//!
//! One event heap orders arrivals, engine step ends and per-replica scrapes. A scrape copies a
//! replica's gauges into the picker's pool exactly as the gateway's scraper would parse them from
//! `/metrics`, so between scrapes the picker sees metrics up to one interval old — the staleness
//! that makes naive max-score pickers herd. Each replica's scrapes have their own random phase.
//! The oracles (`greedy-oracle`, `lookahead-oracle`) instead read every engine's true state at
//! dispatch time.
//!
//! A run may have several gateway replicas ([`RunOptions::gateway_replicas`]), each with its own
//! pool view, picker and flow controller, sharing only the scrapes ([`crate::gateway`]).

use crate::ablation::Ablation;
use crate::event_loop::{Ev, Sim};
use crate::gate::FlowGate;
pub use crate::gateway::GatewayOutcome;
use crate::gateway::{deal, picker_seed, Chooser, Gateway};
pub use crate::outcome::{Outcome, QueueSample, RunOutcome};
pub use crate::replica::Oracle;
use crate::replica::{new_request, Replica};
use crate::scenario::{ReplicaKind, Scenario};
pub use crate::tuning::Tuning;
use crate::workload::BenchRequest;
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::Engine;
use infergate_picker::{EndpointSpec, Picker, Policy, Pool};
use infergate_rng::SplitMix64;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

/// Why a run could not be made. Each message carries its cause, which is therefore not also a
/// `source()` (the house rule in `infergate_config::gateway::error`: each cause printed once).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A profile in the scenario does not exist.
    #[error("profile: {0}")]
    Profile(infergate_engine::ProfileError),
    /// A replica's settings make no engine (the field is named).
    #[error(transparent)]
    Settings(#[from] infergate_engine::SettingsError),
    /// The policy name is unknown.
    #[error("policy `{0}`: {1}")]
    Policy(String, String),
    /// The trace could not be read.
    #[error("trace: {0}")]
    Trace(crate::trace::TraceError),
    /// A tuned engine setting is one the engine refuses.
    #[error("engine: {0}")]
    Engine(infergate_engine::ConfigError),
}

impl From<infergate_engine::ProfileError> for BenchError {
    fn from(e: infergate_engine::ProfileError) -> Self {
        BenchError::Profile(e)
    }
}

impl From<crate::trace::TraceError> for BenchError {
    fn from(e: crate::trace::TraceError) -> Self {
        BenchError::Trace(e)
    }
}

impl From<infergate_engine::ConfigError> for BenchError {
    fn from(e: infergate_engine::ConfigError) -> Self {
        BenchError::Engine(e)
    }
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
    /// Gateway replicas behind one Service, each with its own picker, pool view and flow
    /// controller, sharing only the scrapes; arrivals are dealt to them at random. 0 counts as
    /// 1, the single gateway.
    pub gateway_replicas: u32,
    /// The pool holds only the replicas of the fastest GPU kind (the highest prefill rate);
    /// the rest of the fleet takes no request.
    pub fastest_gpu_only: bool,
    /// Flow control in front of the picker even where the scenario has no priority bands (its
    /// requests are then all Standard), as infergate ships it: on by default. Scenarios with
    /// bands run it in front of every policy, so that their comparison is the pick alone.
    pub flow_control: bool,
    /// Which oracle chooses where a run has no picker (the oracles' runs).
    pub oracle: Oracle,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: Duration::from_secs(120),
            seed: 1,
            scrape_interval: Duration::from_millis(50),
            gateway_replicas: 1,
            fastest_gpu_only: false,
            flow_control: false,
            oracle: Oracle::Greedy,
        }
    }
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

/// The greedy oracle: each request to the replica whose true state, read at dispatch with no
/// delay, predicts the lowest TTFT. A myopic rule with perfect information, not a bound:
/// it ignores what the request does to those that follow. `clairvoyant` is its former name.
pub const GREEDY_ORACLE: &str = "greedy-oracle";

/// The lookahead oracle: each request to the replica where it gets its first token soonest, as
/// a copy of that replica's engine, run forward from its true state with the request added,
/// says: it knows every running request's true output length (when each frees its batch slot
/// and KV blocks, and whether the cache runs out and preempts), every queued prompt and every
/// step's time. Still myopic: it knows nothing of later arrivals, and it does not weigh what
/// the request does to those already there.
pub const LOOKAHEAD_ORACLE: &str = "lookahead-oracle";

/// The oracle `policy` names, if it names one (`clairvoyant` is the greedy oracle's former
/// name).
pub fn oracle_named(policy: &str) -> Option<Oracle> {
    match policy {
        GREEDY_ORACLE | "clairvoyant" => Some(Oracle::Greedy),
        LOOKAHEAD_ORACLE => Some(Oracle::Lookahead),
        _ => None,
    }
}

/// Whether `policy` is a reference that reads the engines' true state rather than a router.
pub fn is_oracle(policy: &str) -> bool {
    oracle_named(policy).is_some()
}

/// infergate's own policy, which runs with its flow control as shipped
/// ([`RunOptions::flow_control`]).
pub const INFERGATE: &str = "infergate";

/// Round-robin over the replicas of the fastest GPU kind only (the highest prefill rate),
/// the others idle: what an operator of a mixed fleet without a GPU-aware router does.
pub const ROUND_ROBIN_FASTEST_GPU: &str = "round-robin-fastest-gpu";

/// Runs `requests` on the scenario's fleet with `policy` (a picker policy name,
/// [`GREEDY_ORACLE`] or [`ROUND_ROBIN_FASTEST_GPU`]) and returns what every request saw.
pub fn run(
    scenario: &Scenario,
    policy: &str,
    requests: &[BenchRequest],
    options: &RunOptions,
) -> Result<RunOutcome, BenchError> {
    if let Some(oracle) = oracle_named(policy) {
        let options = RunOptions { oracle, ..*options };
        return run_with(scenario, None, requests, &options);
    }
    if policy == ROUND_ROBIN_FASTEST_GPU {
        let options = RunOptions {
            fastest_gpu_only: true,
            ..*options
        };
        return run_with(scenario, Some(Policy::RoundRobin), requests, &options);
    }
    // infergate as it ships: its own flow control in front of its picker.
    let shipped = RunOptions {
        flow_control: true,
        ..*options
    };
    match crate::ablation::ablation(policy) {
        Some(Ablation::Pick(ablated)) => {
            return run_with(scenario, Some(ablated), requests, &shipped)
        }
        Some(Ablation::FlowControl) => {
            return run_with(scenario, Some(Policy::infergate()), requests, options)
        }
        Some(Ablation::Gate(tuning)) => {
            let whole = Some(Policy::infergate());
            return run_tuned(scenario, whole, requests, &shipped, &tuning);
        }
        None => {}
    }
    let named =
        Policy::named(policy).map_err(|e| BenchError::Policy(policy.into(), e.to_string()))?;
    let options = if policy == INFERGATE {
        &shipped
    } else {
        options
    };
    run_with(scenario, Some(named), requests, options)
}

/// Runs `requests` with a picker policy given as a value (`None`: the oracle `options` names),
/// for policies that have no name, such as candidates of a weight search.
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
    let replicas = build_replicas(scenario, requests, options, tuning)?;
    // Replica ids are their indices, so a restricted pool still names replicas directly. Alike
    // replicas compute the same rate the same way, so the fastest kind's equal the minimum.
    let fastest = replicas
        .iter()
        .map(|r| r.prefill_secs_per_token)
        .fold(f64::INFINITY, f64::min);
    let specs: Vec<EndpointSpec> = (0..replicas.len())
        .filter(|&i| !options.fastest_gpu_only || replicas[i].prefill_secs_per_token <= fastest)
        .map(|i| EndpointSpec::new(i as u64, format!("10.0.0.{}:8000", i + 1)))
        .collect();
    let gateway_count = options.gateway_replicas.max(1) as usize;
    let mut gateways = Vec::with_capacity(gateway_count);
    for g in 0..gateway_count {
        // A pool of its own: fresh counters, so no gateway sees another's dispatches.
        let pool = Pool::new(specs.clone())
            .map_err(|e| BenchError::Policy("pool".into(), e.to_string()))?;
        gateways.push(Gateway {
            replicas: 0..replicas.len(),
            pool,
            chooser: match &policy {
                Some(p) => Chooser::Picker(Box::new(Picker::new(
                    p.clone(),
                    picker_seed(options.seed, g),
                ))),
                None => Chooser::Oracle(options.oracle),
            },
            gate: (scenario.bands.is_some() || options.flow_control)
                .then(|| FlowGate::tuned(replicas.len(), tuning)),
            gate_wake: None,
        });
    }
    let dealt_to = deal(requests.len(), gateway_count, options.seed);

    let mut sim = Sim::new(requests, replicas, gateways, dealt_to, options);
    for (i, r) in requests.iter().enumerate() {
        sim.heap.push(Reverse((r.at, Ev::Arrival(i))));
    }
    Ok(sim.finish(options).outcome)
}

/// The replicas of `scenario`'s fleet, in its order, each with its engine seeded apart and
/// its first scrape at a random phase.
pub(crate) fn build_replicas(
    scenario: &Scenario,
    requests: &[BenchRequest],
    options: &RunOptions,
    tuning: &Tuning,
) -> Result<Vec<Replica>, BenchError> {
    let mut replicas = Vec::new();
    let mut rng = SplitMix64::new(options.seed ^ 0x5C4A_9E00);
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
    Ok(replicas)
}

/// What a run left: every request's outcome and the tier of a multi-cluster run.
pub(crate) struct Finished {
    pub outcome: RunOutcome,
    pub tier: Option<Box<crate::global::tier::TierSim>>,
}

impl<'a> Sim<'a> {
    /// A run of `requests` on `replicas` behind `gateways`, each request at the gateway
    /// `dealt_to` names; every replica's first scrape at zero. Arrivals are the caller's to
    /// push.
    pub(crate) fn new(
        requests: &'a [BenchRequest],
        replicas: Vec<Replica>,
        gateways: Vec<Gateway>,
        dealt_to: Vec<u32>,
        options: &RunOptions,
    ) -> Self {
        let mut heap: BinaryHeap<Reverse<(Duration, Ev)>> = BinaryHeap::new();
        for e in 0..replicas.len() {
            heap.push(Reverse((Duration::ZERO, Ev::Scrape(e))));
        }
        let n = requests.len();
        Sim {
            requests,
            completed: vec![0; gateways.len()],
            replicas,
            gateways,
            dealt_to,
            scrape_interval: options.scrape_interval,
            last_arrival: requests.last().map_or(Duration::ZERO, |r| r.at),
            heap,
            outcomes: vec![Outcome::default(); n],
            last_token: vec![Duration::ZERO; n],
            token_gaps_ms: vec![Vec::new(); n],
            dispatches: (0..n).map(|_| None).collect(),
            owner: HashMap::new(),
            unfinished: n,
            events: Vec::new(),
            queue_samples: Vec::new(),
            tier: None,
        }
    }

    /// Runs until every request is settled or the drain (three times the run, at least half an
    /// hour, after the last arrival) ends, and gathers what it left.
    pub(crate) fn finish(mut self, options: &RunOptions) -> Finished {
        let drain_until = self.last_arrival + options.duration.max(Duration::from_secs(600)) * 3;
        self.run(drain_until);
        let Sim {
            replicas,
            gateways,
            dealt_to,
            outcomes,
            queue_samples,
            token_gaps_ms,
            last_arrival,
            tier,
            ..
        } = self;
        let mut arrivals = vec![0u64; gateways.len()];
        for &g in &dealt_to {
            arrivals[g as usize] += 1;
        }
        let (hits, queries, preemptions) = replicas.iter().fold((0, 0, 0), |(h, q, p), r| {
            let c = r.engine.counters();
            (
                h + c.prefix_cache_hits,
                q + c.prefix_cache_queries,
                p + c.preemptions,
            )
        });
        let outcome = RunOutcome {
            requests: outcomes,
            last_arrival,
            prefix_hit_ratio: hits as f64 / (queries.max(1)) as f64,
            preemptions,
            queue_samples,
            token_gaps_ms,
            gateways: gateways
                .iter()
                .zip(arrivals)
                .map(|(g, n)| g.outcome(n))
                .collect(),
        };
        Finished { outcome, tier }
    }
}
