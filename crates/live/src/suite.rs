//! A scenario live: the offered rate from the fleet's capacity (measured in virtual time, as the
//! virtual suite measures it), the same arrivals per seed as the virtual suite, each router run on
//! them in turn, and the median per router over seeds — the virtual suite's report.

use crate::router::Router;
use crate::run::LiveRunner;
use crate::LiveError;
use infergate_bench::report::{measured_ttfts_ms, median_over_seeds, summarize, PolicyResult};
use infergate_bench::scenario::Scenario;
use infergate_bench::suite::{offered, Offered, PolicyDetail, ScenarioReport};
use infergate_bench::workload::BenchRequest;
use std::time::{Duration, Instant};

/// The requests of `scenario` for `seed` over `duration` at the rate the virtual suite offers,
/// drawn exactly as it draws them, so a live run replays the virtual run's arrivals.
pub fn requests(
    scenario: &Scenario,
    offered: &Offered,
    seed: u64,
    duration: Duration,
) -> Result<Vec<BenchRequest>, LiveError> {
    Ok(scenario.requests(offered.rate_rps, duration, offered.max_model_len, seed)?)
}

/// Runs every router on `scenario` for each seed, in real time, and reports the median per
/// router. `progress` hears one line per run.
pub fn run_live_scenario(
    runner: &LiveRunner,
    scenario: &Scenario,
    routers: &[Router],
    seeds: &[u64],
    duration: Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<ScenarioReport, LiveError> {
    let offer = offered(scenario)?;
    let mut per_router: Vec<Vec<PolicyResult>> = vec![Vec::new(); routers.len()];
    let mut detail = Vec::new();
    for &seed in seeds {
        let reqs = requests(scenario, &offer, seed, duration)?;
        for (i, router) in routers.iter().enumerate() {
            if runner.interrupted() {
                return Err(LiveError::Interrupted);
            }
            let started = Instant::now();
            let outcome = runner.run(scenario, router, &reqs, seed)?;
            let result = summarize(router.name(), &outcome);
            progress(&format!(
                "live {} seed {seed} {}: {} requests, TTFT p50 {:.0} ms p99 {:.0} ms, {} errors, {:.0} s",
                scenario.id,
                router.name(),
                reqs.len(),
                result.ttft_ms.p50,
                result.ttft_ms.p99,
                result.errors,
                started.elapsed().as_secs_f64()
            ));
            per_router[i].push(result);
            if detail.len() < routers.len() {
                detail.push(PolicyDetail {
                    policy: router.name().to_owned(),
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
        capacity_rps: offer.capacity_rps,
        rate_rps: offer.rate_rps,
        duration_s: duration.as_secs_f64(),
        // A live run has one `infergate serve` (or one peer router) in front of the fleet.
        gateway_replicas: 1,
        results: per_router
            .iter()
            .filter_map(|r| median_over_seeds(r))
            .collect(),
        detail,
    })
}
