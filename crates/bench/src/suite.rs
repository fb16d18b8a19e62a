//! A scenario end to end: measure the fleet's capacity, derive the offered rate from the
//! scenario's load, generate the arrivals once per seed, and run every policy on them.

use crate::report::{measured_ttfts_ms, median_over_seeds, summarize_with, PolicyResult, Slo};
use crate::runner::{
    replica_capacity, run, BenchError, QueueSample, RunOptions, GREEDY_ORACLE, LOOKAHEAD_ORACLE,
    ROUND_ROBIN_FASTEST_GPU,
};
use crate::scenario::Scenario;
use infergate_rng::SplitMix64;
use serde::Serialize;
use std::time::Duration;

/// Every policy the runner compares, baselines first. [`ROUND_ROBIN_FASTEST_GPU`] runs only
/// on fleets of more than one GPU kind ([`policies_for`]).
pub const POLICIES: &[&str] = &[
    "round-robin",
    "k8s-service",
    ROUND_ROBIN_FASTEST_GPU,
    "random",
    "least-request",
    "gie-default",
    "sglang-cache-aware",
    "dynamo-kv",
    GREEDY_ORACLE,
    LOOKAHEAD_ORACLE,
    "infergate",
];

/// `policies` less those that mean nothing on `scenario`'s fleet: round-robin over the fastest
/// GPU kind is round-robin itself on a fleet of one kind.
pub fn policies_for<'a>(scenario: &Scenario, policies: &[&'a str]) -> Vec<&'a str> {
    let mut gpus: Vec<&str> = scenario.fleet.iter().map(|k| k.gpu()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    policies
        .iter()
        .copied()
        .filter(|&p| p != ROUND_ROBIN_FASTEST_GPU || gpus.len() > 1)
        .collect()
}

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
///
/// Each replica is measured on the lengths the replay sends — the scenario's own distribution,
/// capped only where the replay caps it (at the fleet's largest context) — restricted to the
/// requests that fit its own context, as the picker restricts them.
pub fn fleet_capacity(scenario: &Scenario, seed: u64) -> Result<f64, BenchError> {
    let shape = scenario.shape()?;
    let largest = largest_context(scenario);
    let mut total = 0.0;
    for kind in &scenario.fleet {
        let mut rng = SplitMix64::new(seed ^ 0xCA9A);
        let mut requests = shape.requests(&[Duration::ZERO; 1_500], largest, &mut rng);
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
    /// The largest `max_model_len` in the fleet: requests are capped at it (none could be
    /// served anywhere beyond it), and each goes only to replicas whose context holds it.
    pub max_model_len: u32,
}

/// The largest `max_model_len` of the scenario's replicas (a fleet file's own `maxModelLen`
/// counts).
pub fn largest_context(scenario: &Scenario) -> u32 {
    scenario
        .replicas()
        .filter_map(|k| k.engine_config().ok())
        .map(|c| c.max_model_len)
        .max()
        .unwrap_or(4_096)
}

/// Measures the fleet's capacity and derives the offered rate.
pub fn offered(scenario: &Scenario) -> Result<Offered, BenchError> {
    let capacity_rps = fleet_capacity(scenario, 7)?;
    Ok(Offered {
        capacity_rps,
        rate_rps: capacity_rps * scenario.load,
        max_model_len: largest_context(scenario),
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
    let plan = Plan {
        policies,
        seeds,
        duration,
        gateway_replicas,
        slo: Slo::default(),
    };
    let mut reports = run_sweep(scenario, &[scenario.load], &plan, progress)?;
    reports
        .pop()
        .ok_or(BenchError::Policy("sweep".into(), "no load to run".into()))
}

/// What every run of a sweep or a capacity search shares.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    /// Policies, in report order.
    pub policies: &'a [&'a str],
    /// Seeds of every point.
    pub seeds: &'a [u64],
    /// Arrivals per run.
    pub duration: Duration,
    /// Gateway replicas behind one Service.
    pub gateway_replicas: u32,
    /// What goodput and "meets the SLO" are judged against.
    pub slo: Slo,
}

/// Runs every policy of `plan` at each of `loads` (fractions of the fleet's capacity, measured
/// once), on the same arrivals per (load, seed), the runs spread over the machine's cores.
/// One report per load; only a single load keeps the first seed's plot material.
pub fn run_sweep(
    scenario: &Scenario,
    loads: &[f64],
    plan: &Plan<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Vec<ScenarioReport>, BenchError> {
    let offered = offered(scenario)?;
    let policies = plan.policies;
    let mut jobs = Vec::new();
    for (l, &load) in loads.iter().enumerate() {
        for (s, &seed) in plan.seeds.iter().enumerate() {
            for p in 0..policies.len() {
                jobs.push((l, load, s, seed, p));
            }
        }
    }
    // Arrivals per (load, seed), made once and shared by every policy.
    let mut arrivals = Vec::new();
    for &load in loads {
        let mut per_seed = Vec::new();
        for &seed in plan.seeds {
            let rate = offered.capacity_rps * load;
            per_seed.push(scenario.requests(rate, plan.duration, offered.max_model_len, seed)?);
        }
        arrivals.push(per_seed);
    }
    let keep_detail = loads.len() == 1;
    let total = jobs.len();
    let outcomes = parallel_map(
        &jobs,
        |&(l, _, s, seed, p)| {
            let options = RunOptions {
                duration: plan.duration,
                seed,
                gateway_replicas: plan.gateway_replicas,
                ..RunOptions::default()
            };
            let outcome = run(scenario, policies[p], &arrivals[l][s], &options)?;
            let result = summarize_with(policies[p], &outcome, &plan.slo);
            let detail = (keep_detail && s == 0).then(|| PolicyDetail {
                policy: policies[p].to_owned(),
                ttft_ms: measured_ttfts_ms(&outcome),
                queues: outcome.queue_samples,
            });
            Ok::<_, BenchError>((result, detail))
        },
        &mut |done, &(_, _, _, seed, p)| {
            progress(Progress {
                policy: policies[p],
                seed,
                done,
                total,
            })
        },
    );
    let mut reports = Vec::new();
    let mut outcomes = outcomes.into_iter();
    for &load in loads {
        let mut per_policy: Vec<Vec<PolicyResult>> = vec![Vec::new(); policies.len()];
        let mut detail: Vec<Option<PolicyDetail>> = vec![None; policies.len()];
        for _ in plan.seeds {
            for p in 0..policies.len() {
                let Some(outcome) = outcomes.next() else {
                    continue;
                };
                let (result, d) = outcome?;
                per_policy[p].push(result);
                if d.is_some() {
                    detail[p] = d;
                }
            }
        }
        reports.push(ScenarioReport {
            scenario: scenario.id.to_owned(),
            seeds: plan.seeds.to_vec(),
            load,
            capacity_rps: offered.capacity_rps,
            rate_rps: offered.capacity_rps * load,
            duration_s: plan.duration.as_secs_f64(),
            gateway_replicas: plan.gateway_replicas.max(1),
            results: per_policy
                .iter()
                .filter_map(|r| median_over_seeds(r))
                .collect(),
            detail: detail.into_iter().flatten().collect(),
        });
    }
    Ok(reports)
}

/// The highest load at which a policy meets the SLO, found by bisection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityAtSlo {
    /// Policy name.
    pub policy: String,
    /// The highest load (fraction of the fleet's capacity) found to meet the SLO; 0 when even
    /// the lowest load searched misses it.
    pub load: f64,
    /// The same as a request rate.
    pub rate_rps: f64,
    /// The search stopped at its upper bound: the capacity is at least `load`.
    pub at_least: bool,
    /// Loads run, in order, and whether the median over seeds met the SLO there.
    pub probes: Vec<(f64, bool)>,
}

/// Where a capacity search looks and how finely.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Lowest load tried.
    pub low: f64,
    /// Highest load tried.
    pub high: f64,
    /// Stop when the bracket is this narrow.
    pub resolution: f64,
}

impl Default for Search {
    fn default() -> Self {
        Search {
            low: 0.1,
            high: 3.0,
            resolution: 0.02,
        }
    }
}

/// Capacity at SLO of every policy of `plan` on `scenario`: per policy, a bisection over load
/// on the seeds' arrivals at each probed load (the same arrivals every policy gets there). A
/// load meets the SLO when most seeds do ([`crate::report::PolicyResult::slo_met`]). The
/// policies' searches run side by side on the machine's cores.
pub fn capacity_at_slo(
    scenario: &Scenario,
    plan: &Plan<'_>,
    search: Search,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(Offered, Vec<CapacityAtSlo>), BenchError> {
    let offered = offered(scenario)?;
    let meets = |policy: &str, load: f64| -> Result<bool, BenchError> {
        let mut met = 0;
        for &seed in plan.seeds {
            let requests = scenario.requests(
                offered.capacity_rps * load,
                plan.duration,
                offered.max_model_len,
                seed,
            )?;
            let options = RunOptions {
                duration: plan.duration,
                seed,
                gateway_replicas: plan.gateway_replicas,
                ..RunOptions::default()
            };
            let outcome = run(scenario, policy, &requests, &options)?;
            met += usize::from(summarize_with(policy, &outcome, &plan.slo).slo_met);
        }
        Ok(2 * met > plan.seeds.len())
    };
    let total = plan.policies.len();
    let results = parallel_map(
        plan.policies,
        |&policy| {
            let mut probes = Vec::new();
            let mut probe = |load: f64| -> Result<bool, BenchError> {
                let ok = meets(policy, load)?;
                probes.push((load, ok));
                Ok(ok)
            };
            let (load, at_least) = if !probe(search.low)? {
                (0.0, false)
            } else if probe(search.high)? {
                (search.high, true)
            } else {
                let (mut lo, mut hi) = (search.low, search.high);
                while hi - lo > search.resolution {
                    let mid = 0.5 * (lo + hi);
                    if probe(mid)? {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                (lo, false)
            };
            Ok::<_, BenchError>(CapacityAtSlo {
                policy: policy.to_owned(),
                load,
                rate_rps: load * offered.capacity_rps,
                at_least,
                probes,
            })
        },
        &mut |done, &policy| {
            progress(Progress {
                policy,
                seed: 0,
                done,
                total,
            })
        },
    );
    Ok((offered, results.into_iter().collect::<Result<_, _>>()?))
}

/// `f` over `items` on as many threads as the machine has cores, results in `items`' order.
/// `done` hears, on the calling thread, each item as it finishes and how many had before it.
pub(crate) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
    done: &mut dyn FnMut(usize, &T),
) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, R)>();
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, f) = (&next, &f);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                if tx.send((i, f(item))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (finished, (i, r)) in rx.iter().enumerate() {
            if let Some(item) = items.get(i) {
                done(finished + 1, item);
            }
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(r);
            }
        }
    });
    out.into_iter().flatten().collect()
}
