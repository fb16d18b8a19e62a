//! Several clusters in virtual time: one infergate gateway per cluster (picker and flow control
//! as shipped) over its own replicas, the global tier in front of them in every caller region,
//! round trips between regions, and a cluster cut off mid-run. The tier's policy is
//! infergate's (`infergate-global`) or a baseline (`round-robin-clusters`,
//! `nearest-region`); see [`tier`] for what is and is not modelled.
//!
//! Figures are as callers see them: a request's TTFT includes the round trip to the cluster
//! that served it and any connect timeouts on the way, and one that failed (in flight on a
//! cluster when it was cut off, or out of attempts) counts as a failure.
//!
//! Cost is what each cluster would pay if it scaled its GPUs to the work it was given: the
//! tokens (prompt and output) it answered, over what its GPUs answer per second at capacity
//! (measured as the load is, on the same request mix), in GPU-hours at its price, per million
//! tokens answered anywhere. A fixed fleet pays for its GPUs whatever the tier does, so the
//! figure a policy can change is this one: the work it puts on dear GPUs and on cheap ones.

pub mod scenario;
pub(crate) mod tier;

use crate::gateway::Gateway;
use crate::report::{median, median_over_seeds, summarize_with, PolicyResult, Slo};
use crate::runner::{build_replicas, BenchError, RunOptions, Tuning};
use crate::suite::{fleet_capacity, largest_context};
use crate::workload::BenchRequest;
use crate::{event_loop::Ev, event_loop::Sim, gate::FlowGate};
use infergate_picker::{EndpointSpec, Picker, Policy, Pool};
use infergate_rng::SplitMix64;
pub use scenario::{Cluster, ClusterFault, GlobalScenario};
use serde::Serialize;
use std::cmp::Reverse;
use std::time::Duration;
pub use tier::GlobalPolicy;
use tier::{TierSetup, TierSim};

/// Mixed into the run's seed for the callers' regions.
const CALLER_SEED: u64 = 0xCA11_E500_0000_0000;

/// One policy's figures on one multi-cluster run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GlobalResult {
    /// The latency, goodput and failure figures, as for one cluster.
    pub figures: PolicyResult,
    /// Dollars per million tokens answered, each cluster's GPUs scaled to its work (see the
    /// module's documentation).
    pub cost_per_million_tokens: f64,
    /// Share of the measured answered requests served outside their caller's region.
    pub cross_region_share: f64,
    /// Share of the measured requests each cluster took, in cluster order (refused by the
    /// tier: none).
    pub cluster_shares: Vec<(String, f64)>,
    /// Attempts moved to another member after one failed.
    pub failovers: u64,
    /// Seconds from the fault to the last attempt sent to the cut-off cluster while it was
    /// cut off (0 when none went there after it; `None` without a fault).
    pub last_attempt_at_faulty_s: Option<f64>,
    /// Requests that failed (never answered) over the whole run.
    pub failed: u64,
    /// Of those, the ones lost at the cut-off cluster: held there when it was cut (their
    /// callers' streams end with an error event), or reaching it in the half round trip after.
    pub failed_in_flight: u64,
    /// Of those, the ones that had not started: every attempt timed out.
    pub failed_unstarted: u64,
}

/// The requests of one run and each one's caller.
#[derive(Debug, Clone)]
pub struct GlobalArrivals {
    /// The requests, in arrival order.
    pub requests: Vec<BenchRequest>,
    /// Each request's caller region, an index into the scenario's callers.
    pub callers: Vec<usize>,
}

/// What the clusters serve at capacity on the scenario's request mix.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// The whole fleet, requests per second: what a load is a fraction of.
    pub fleet_rps: f64,
    /// Each cluster, requests per second, in cluster order.
    pub cluster_rps: Vec<f64>,
}

/// Measures [`Capacity`] as the single-cluster bench measures a fleet's.
pub fn capacity(scenario: &GlobalScenario) -> Result<Capacity, BenchError> {
    let whole = scenario.fleet_scenario();
    let cluster_rps = scenario
        .clusters
        .iter()
        .map(|c| {
            fleet_capacity(
                &crate::scenario::Scenario {
                    fleet: c.fleet.clone(),
                    ..whole.clone()
                },
                7,
            )
        })
        .collect::<Result<Vec<f64>, _>>()?;
    Ok(Capacity {
        fleet_rps: cluster_rps.iter().sum(),
        cluster_rps,
    })
}

/// The requests of one run of `scenario` at `load` (a fraction of the whole fleet's capacity)
/// for `duration`, and each one's caller region.
pub fn arrivals(
    scenario: &GlobalScenario,
    capacity: &Capacity,
    load: f64,
    duration: Duration,
    seed: u64,
) -> Result<GlobalArrivals, BenchError> {
    let fleet = scenario.fleet_scenario();
    let requests = fleet.requests(
        capacity.fleet_rps * load,
        duration,
        largest_context(&fleet),
        seed,
    )?;
    let mut rng = SplitMix64::new(seed ^ CALLER_SEED);
    let shares: Vec<f64> = scenario.callers.iter().map(|&(_, s)| s).collect();
    let callers = requests
        .iter()
        .map(|_| rng.weighted_index(&shares))
        .collect();
    Ok(GlobalArrivals { requests, callers })
}

/// Runs `arrivals` on `scenario`'s clusters (of `capacity`) with the tier ordering members by
/// `policy`.
pub fn run(
    scenario: &GlobalScenario,
    policy: GlobalPolicy,
    arrivals: &GlobalArrivals,
    capacity: &Capacity,
    options: &RunOptions,
    slo: &Slo,
) -> Result<GlobalResult, BenchError> {
    let (requests, callers) = (arrivals.requests.as_slice(), arrivals.callers.as_slice());
    let config = scenario
        .tier_config(policy != GlobalPolicy::GlobalWithoutCost)
        .map_err(|e| BenchError::Policy(scenario.id.into(), e))?;
    let fleet = scenario.fleet_scenario();
    let replicas = build_replicas(&fleet, requests, options, &Tuning::default())?;
    let ranges = cluster_ranges(scenario);
    let gpus: Vec<u32> = fleet.replicas().map(|k| k.tp()).collect();
    let mut gateways = Vec::with_capacity(scenario.clusters.len());
    for (c, range) in ranges.iter().cloned().enumerate() {
        let specs: Vec<EndpointSpec> = range
            .clone()
            .map(|i| EndpointSpec::new(i as u64, format!("10.{c}.0.{}:8000", i + 1)))
            .collect();
        let pool =
            Pool::new(specs).map_err(|e| BenchError::Policy("pool".into(), e.to_string()))?;
        gateways.push(Gateway {
            replicas: range,
            pool,
            // Each cluster runs infergate as it ships.
            chooser: crate::gateway::Chooser::Picker(Box::new(Picker::new(
                Policy::infergate(),
                crate::gateway::picker_seed(options.seed, c),
            ))),
            gate: Some(FlowGate::new(replicas.len())),
            gate_wake: None,
        });
    }
    let fault = scenario.fault.and_then(|f| {
        let c = scenario.cluster_index(f.cluster)?;
        let span = requests.last().map_or(Duration::ZERO, |r| r.at);
        Some((c, span.mul_f64(f.from), span.mul_f64(f.until)))
    });
    let mut tier = TierSim::new(TierSetup {
        config: &config,
        policy,
        model: scenario.model().to_owned(),
        caller: callers.to_vec(),
        callers: scenario
            .callers
            .iter()
            .map(|(r, _)| (*r).to_owned())
            .collect(),
        fault,
        seed: options.seed,
    });
    let mut sim = Sim::new(
        requests,
        replicas,
        gateways,
        vec![0; requests.len()],
        options,
    );
    for (at, ev) in tier.first_pulls().into_iter().chain(tier.fault_events()) {
        sim.heap.push(Reverse((at, ev)));
    }
    for (i, r) in requests.iter().enumerate() {
        sim.heap.push(Reverse((r.at, Ev::Caller(i))));
    }
    sim.tier = Some(Box::new(tier));
    let finished = sim.finish(options);
    let Some(tier) = finished.tier else {
        return Err(BenchError::Policy(
            scenario.id.into(),
            "the run lost its tier".into(),
        ));
    };
    let mut outcome = finished.outcome;
    // As the caller sees it: sent when it sent, answered half a round trip after the cluster.
    let mut cross = 0u64;
    let mut answered = 0u64;
    let mut taken = vec![0u64; scenario.clusters.len()];
    let mut tokens = vec![0u64; scenario.clusters.len()];
    // Shares, tokens and cost over the measured requests, after the same warm-up the latency
    // figures leave out (the first tenth of arrivals: before the first pulls nothing is known).
    let warm = requests.len() / 10;
    for (i, o) in outcome.requests.iter_mut().enumerate() {
        o.sent = tier.caller_sent[i];
        let Some(m) = tier.served_by[i] else {
            continue;
        };
        let back = tier.one_way(tier.front_of(i), m);
        o.first_token = o.first_token.map(|t| t + back);
        o.finished = o.finished.map(|t| t + back);
        if i < warm {
            continue;
        }
        taken[m] += 1;
        if o.finished.is_some() && !o.error {
            answered += 1;
            tokens[m] += u64::from(requests[i].prompt_tokens) + u64::from(o.output_tokens);
            if tier.region_of(m) != tier.front_region(tier.front_of(i)) {
                cross += 1;
            }
        }
    }
    // Tokens per request of this run's mix: what a cluster's capacity in requests is in tokens.
    let offered_tokens: u64 = requests[warm..]
        .iter()
        .map(|r| u64::from(r.prompt_tokens) + u64::from(r.output_tokens))
        .sum();
    let tokens_per_request = offered_tokens as f64 / (requests.len() - warm).max(1) as f64;
    let mut dollars = 0.0;
    for (c, range) in ranges.into_iter().enumerate() {
        let cluster_gpus: u32 = range.map(|e| gpus[e]).sum();
        let tokens_per_s = capacity.cluster_rps[c] * tokens_per_request;
        if tokens_per_s > 0.0 {
            let gpu_hours = tokens[c] as f64 / tokens_per_s * f64::from(cluster_gpus) / 3_600.0;
            dollars += gpu_hours * scenario.clusters[c].price_per_gpu_hour;
        }
    }
    let tokens: u64 = tokens.iter().sum();
    let failed = outcome
        .requests
        .iter()
        .filter(|o| o.refused.is_none() && (o.error || o.finished.is_none()))
        .count() as u64;
    let total = (outcome.requests.len() - warm).max(1) as f64;
    Ok(GlobalResult {
        figures: summarize_with(policy.name(), &outcome, slo),
        cost_per_million_tokens: dollars / (tokens.max(1) as f64 / 1e6),
        cross_region_share: cross as f64 / answered.max(1) as f64,
        cluster_shares: tier
            .names()
            .into_iter()
            .zip(taken)
            .map(|(n, t)| (n, t as f64 / total))
            .collect(),
        failovers: tier.failovers,
        last_attempt_at_faulty_s: fault.map(|(_, from, _)| {
            tier.last_to_faulty
                .map_or(0.0, |last| last.saturating_sub(from).as_secs_f64())
        }),
        failed,
        failed_in_flight: tier.lost_in_flight,
        failed_unstarted: tier.out_of_attempts,
    })
}

/// One policy at one load: the median over seeds, each figure on its own (as
/// [`median_over_seeds`] takes them), with the spread of P99 TTFT and goodput in `figures`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GlobalPoint {
    /// Offered load, a fraction of the whole fleet's capacity.
    pub load: f64,
    /// The offered rate, requests per second.
    pub rate_rps: f64,
    /// The medians.
    pub result: GlobalResult,
}

/// Runs every policy of `policies` at each of `loads` on `seeds` (the same arrivals and
/// callers for every policy at one load and seed), in parallel; `done` hears each run end.
pub fn sweep(
    scenario: &GlobalScenario,
    policies: &[GlobalPolicy],
    loads: &[f64],
    seeds: &[u64],
    duration: Duration,
    slo: &Slo,
    done: &mut dyn FnMut(usize, usize),
) -> Result<Vec<GlobalPoint>, BenchError> {
    let capacity = capacity(scenario)?;
    let mut per_run = Vec::new();
    for &load in loads {
        for &seed in seeds {
            per_run.push(arrivals(scenario, &capacity, load, duration, seed)?);
        }
    }
    let mut jobs = Vec::new();
    for (l, _) in loads.iter().enumerate() {
        for (s, &seed) in seeds.iter().enumerate() {
            for &policy in policies {
                jobs.push((l, s, seed, policy));
            }
        }
    }
    let total = jobs.len();
    let results = crate::suite::parallel_map(
        &jobs,
        |&(l, s, seed, policy)| {
            let options = RunOptions {
                duration,
                seed,
                ..RunOptions::default()
            };
            let arrivals = &per_run[l * seeds.len() + s];
            run(scenario, policy, arrivals, &capacity, &options, slo)
        },
        &mut |finished, _| done(finished, total),
    );
    let results: Vec<GlobalResult> = results.into_iter().collect::<Result<_, _>>()?;
    let mut points = Vec::new();
    for (l, &load) in loads.iter().enumerate() {
        for &policy in policies {
            let runs: Vec<&GlobalResult> = jobs
                .iter()
                .zip(&results)
                .filter(|((jl, _, _, p), _)| *jl == l && *p == policy)
                .map(|(_, r)| r)
                .collect();
            if let Some(result) = median_result(&runs) {
                points.push(GlobalPoint {
                    load,
                    rate_rps: capacity.fleet_rps * load,
                    result,
                });
            }
        }
    }
    Ok(points)
}

/// The median of each figure over `runs`.
fn median_result(runs: &[&GlobalResult]) -> Option<GlobalResult> {
    let first = runs.first()?;
    let figures: Vec<PolicyResult> = runs.iter().map(|r| r.figures.clone()).collect();
    let med = |f: &dyn Fn(&GlobalResult) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(|r| f(r)).collect();
        median(&mut v)
    };
    Some(GlobalResult {
        figures: median_over_seeds(&figures)?,
        cost_per_million_tokens: med(&|r| r.cost_per_million_tokens),
        cross_region_share: med(&|r| r.cross_region_share),
        cluster_shares: first
            .cluster_shares
            .iter()
            .enumerate()
            .map(|(c, (name, _))| (name.clone(), med(&|r| r.cluster_shares[c].1)))
            .collect(),
        failovers: med(&|r| r.failovers as f64).round() as u64,
        last_attempt_at_faulty_s: runs
            .iter()
            .all(|r| r.last_attempt_at_faulty_s.is_some())
            .then(|| med(&|r| r.last_attempt_at_faulty_s.unwrap_or(0.0))),
        failed: med(&|r| r.failed as f64).round() as u64,
        failed_in_flight: med(&|r| r.failed_in_flight as f64).round() as u64,
        failed_unstarted: med(&|r| r.failed_unstarted as f64).round() as u64,
    })
}

/// Each cluster's replica indices, in cluster order.
fn cluster_ranges(scenario: &GlobalScenario) -> Vec<std::ops::Range<usize>> {
    let mut first = 0;
    scenario
        .clusters
        .iter()
        .map(|c| {
            let n: usize = c.fleet.iter().map(|k| k.count as usize).sum();
            first += n;
            first - n..first
        })
        .collect()
}

#[cfg(test)]
mod tests;
