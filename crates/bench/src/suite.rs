//! A scenario end to end: measure the fleet's capacity, derive the offered rate from the
//! scenario's load, generate the arrivals once per seed, and run every policy on them.

use crate::report::{measured_ttfts_ms, median_over_seeds, summarize, PolicyResult};
use crate::runner::{replica_capacity, run, BenchError, QueueSample, RunOptions};
use crate::scenario::Scenario;
use infergate_rng::SplitMix64;
use serde::Serialize;
use std::time::Duration;

/// Every policy the runner compares, baseline first.
pub const POLICIES: &[&str] = &[
    "round-robin",
    "random",
    "least-request",
    "gie-default",
    "sglang-cache-aware",
    "dynamo-kv",
    "clairvoyant",
    "infergate",
];

/// The outcome of a scenario: median over seeds per policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    /// Scenario id.
    pub scenario: String,
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// Offered load as a fraction of capacity.
    pub load: f64,
    /// Fleet capacity in requests per second.
    pub capacity_rps: f64,
    /// Offered rate.
    pub rate_rps: f64,
    /// Simulated seconds of arrivals per run.
    pub duration_s: f64,
    /// Gateway replicas of every run, each with its own picker (1: one gateway).
    pub gateway_replicas: u32,
    /// One entry per policy (median over seeds).
    pub results: Vec<PolicyResult>,
    /// The first seed's raw material for plots, per policy (not in the JSON: it is large).
    #[serde(skip)]
    pub detail: Vec<PolicyDetail>,
}

/// What one policy's run on the first seed looked like, for plots.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDetail {
    /// Policy name.
    pub policy: String,
    /// TTFT of every measured request (ms).
    pub ttft_ms: Vec<f64>,
    /// Every replica's queue at each scrape.
    pub queues: Vec<QueueSample>,
}

/// The fleet's capacity for the scenario's request mix: the sum of each replica's capacity.
pub fn fleet_capacity(scenario: &Scenario, seed: u64) -> Result<f64, BenchError> {
    let shape = scenario.shape()?;
    let mut total = 0.0;
    for kind in &scenario.fleet {
        let mut rng = SplitMix64::new(seed ^ 0xCA9A);
        let mut requests = shape.requests(&[Duration::ZERO; 1_500], 32_768, &mut rng);
        if let Some(mix) = &scenario.adapters {
            mix.assign(&mut requests, &mut rng);
        }
        total += replica_capacity(kind, &requests, seed)? * f64::from(kind.count);
    }
    Ok(total)
}

/// What a scenario offers its fleet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offered {
    /// The fleet's capacity in requests per second.
    pub capacity_rps: f64,
    /// The offered rate: capacity × the scenario's load.
    pub rate_rps: f64,
    /// The smallest `max_model_len` in the fleet: every request must fit every replica.
    pub max_model_len: u32,
}

/// Measures the fleet's capacity and derives the offered rate.
pub fn offered(scenario: &Scenario) -> Result<Offered, BenchError> {
    let capacity_rps = fleet_capacity(scenario, 7)?;
    // A fleet file's own `maxModelLen` counts: requests longer than a replica takes would fail.
    let max_model_len = scenario
        .replicas()
        .filter_map(|k| k.engine_config().ok())
        .map(|c| c.max_model_len)
        .min()
        .unwrap_or(4_096);
    Ok(Offered {
        capacity_rps,
        rate_rps: capacity_rps * scenario.load,
        max_model_len,
    })
}

/// Runs `policies` on `scenario` for each seed and reports the median per policy.
pub fn run_scenario(
    scenario: &Scenario,
    policies: &[&str],
    seeds: &[u64],
    duration: Duration,
) -> Result<ScenarioReport, BenchError> {
    run_scenario_with_progress(scenario, policies, seeds, duration, 1, &mut |_| {})
}

/// Where a scenario run is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress<'a> {
    /// The run about to start: its policy…
    pub policy: &'a str,
    /// …and seed.
    pub seed: u64,
    /// Runs finished so far.
    pub done: usize,
    /// Runs in all.
    pub total: usize,
}

/// [`run_scenario`] with `gateway_replicas` gateways sharing the traffic (see
/// [`RunOptions::gateway_replicas`]), telling `progress` before each run.
pub fn run_scenario_with_progress(
    scenario: &Scenario,
    policies: &[&str],
    seeds: &[u64],
    duration: Duration,
    gateway_replicas: u32,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<ScenarioReport, BenchError> {
    let Offered {
        capacity_rps: capacity,
        rate_rps: rate,
        max_model_len,
    } = offered(scenario)?;
    let mut per_policy: Vec<Vec<PolicyResult>> = vec![Vec::new(); policies.len()];
    let mut detail = Vec::new();
    for &seed in seeds {
        let requests = scenario.requests(rate, duration, max_model_len, seed)?;
        let options = RunOptions {
            duration,
            seed,
            gateway_replicas,
            ..RunOptions::default()
        };
        for (i, policy) in policies.iter().enumerate() {
            progress(Progress {
                policy,
                seed,
                done: per_policy.iter().map(Vec::len).sum(),
                total: policies.len() * seeds.len(),
            });
            let outcome = run(scenario, policy, &requests, &options)?;
            per_policy[i].push(summarize(policy, &outcome));
            if detail.len() < policies.len() {
                detail.push(PolicyDetail {
                    policy: (*policy).to_owned(),
                    ttft_ms: measured_ttfts_ms(&outcome),
                    queues: outcome.queue_samples,
                });
            }
        }
    }
    Ok(ScenarioReport {
        scenario: scenario.id.to_owned(),
        seeds: seeds.to_vec(),
        load: scenario.load,
        capacity_rps: capacity,
        rate_rps: rate,
        duration_s: duration.as_secs_f64(),
        gateway_replicas: gateway_replicas.max(1),
        results: per_policy
            .iter()
            .filter_map(|r| median_over_seeds(r))
            .collect(),
        detail,
    })
}
