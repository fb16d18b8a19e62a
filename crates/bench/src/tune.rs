//! `infergate tune`: the seed's advice — change one weight at a time, replay the same traffic,
//! compare P99 TTFT — automated as a coordinate search, then checked on traffic it never saw.
//!
//! Each step scales one scorer's weight (×0, ×½, ×2) and replays the tuning seeds' requests with
//! the candidate; it is kept only if P99 TTFT (median over the tuning seeds) falls by more than
//! the noise margin and throughput stays within 1 % — a weight that buys latency by serving less
//! is not a win. The winner is then replayed on a validation seed beside the default, so an
//! overfit to the tuning arrivals shows up as no gain there.

use crate::report::{median_over_seeds, summarize, PolicyResult};
use crate::runner::{run_with, BenchError, RunOptions};
use crate::scenario::Scenario;
use crate::suite::offered;
use crate::workload::BenchRequest;
use infergate_picker::{Policy, Profile};
use std::time::Duration;

/// Multipliers tried on each weight.
const FACTORS: [f64; 3] = [0.0, 0.5, 2.0];

/// A candidate must cut P99 TTFT by more than this fraction to be kept: smaller changes are within
/// what reshuffled ties alone produce.
const MIN_GAIN: f64 = 0.01;

/// Throughput may fall by at most this fraction.
const MAX_THROUGHPUT_LOSS: f64 = 0.01;

/// Knobs of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneOptions {
    /// Seeds whose traffic the search replays.
    pub tune_seeds: Vec<u64>,
    /// Seed of the held-out traffic the winner is checked on.
    pub validate_seed: u64,
    /// Simulated seconds of arrivals per replay.
    pub duration: Duration,
    /// Passes over every scorer.
    pub rounds: usize,
}

/// One candidate tried.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneStep {
    /// The scorer whose weight changed (its plugin type).
    pub scorer: String,
    /// Its weight before.
    pub from: f64,
    /// The weight tried.
    pub to: f64,
    /// P99 TTFT with it (ms, median over the tuning seeds).
    pub p99_ms: f64,
    /// Output tokens per second with it.
    pub throughput: f64,
    /// Whether it became the new best.
    pub kept: bool,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneReport {
    /// The starting profile on the tuning seeds.
    pub start: PolicyResult,
    /// The winner on the tuning seeds.
    pub best: PolicyResult,
    /// The winning profile.
    pub profile: Profile,
    /// Every candidate tried, in order.
    pub steps: Vec<TuneStep>,
    /// The starting profile on the validation seed.
    pub validation_start: PolicyResult,
    /// The winner on the validation seed.
    pub validation_best: PolicyResult,
}

/// Searches the weights of `start` on `scenario`; `progress` sees each step as it is made.
pub fn tune(
    scenario: &Scenario,
    start: Profile,
    options: &TuneOptions,
    mut progress: impl FnMut(&TuneStep),
) -> Result<TuneReport, BenchError> {
    let load = offered(scenario)?;
    let traffic = |seed: u64| -> Result<(Vec<BenchRequest>, RunOptions), BenchError> {
        let requests =
            scenario.requests(load.rate_rps, options.duration, load.max_model_len, seed)?;
        // Candidates run as infergate ships, behind its flow control.
        let run = RunOptions {
            duration: options.duration,
            seed,
            flow_control: true,
            ..RunOptions::default()
        };
        Ok((requests, run))
    };
    let tuning: Vec<_> = options
        .tune_seeds
        .iter()
        .map(|&s| traffic(s))
        .collect::<Result<_, _>>()?;
    let measure = |profile: &Profile, runs: &[(Vec<BenchRequest>, RunOptions)]| {
        let mut results = Vec::new();
        for (requests, run) in runs {
            let outcome = run_with(
                scenario,
                Some(Policy::Weighted(profile.clone())),
                requests,
                run,
            )?;
            results.push(summarize(&profile.name, &outcome));
        }
        median_over_seeds(&results)
            .ok_or_else(|| BenchError::Policy(profile.name.clone(), "no tuning seeds given".into()))
    };

    let start_result = measure(&start, &tuning)?;
    let mut best = start.clone();
    let mut best_result = start_result.clone();
    let mut steps = Vec::new();
    for _ in 0..options.rounds.max(1) {
        let mut improved = false;
        for i in 0..best.scorers.len() {
            let base = best.scorers[i].weight;
            for factor in FACTORS {
                let to = base * factor;
                if base == 0.0 || to == base {
                    continue;
                }
                let mut candidate = best.clone();
                candidate.scorers[i].weight = to;
                let result = measure(&candidate, &tuning)?;
                let kept = result.ttft_ms.p99 < best_result.ttft_ms.p99 * (1.0 - MIN_GAIN)
                    && result.output_tokens_per_s
                        >= best_result.output_tokens_per_s * (1.0 - MAX_THROUGHPUT_LOSS);
                let step = TuneStep {
                    scorer: best.scorers[i].scorer.plugin_type().to_owned(),
                    from: base,
                    to,
                    p99_ms: result.ttft_ms.p99,
                    throughput: result.output_tokens_per_s,
                    kept,
                };
                progress(&step);
                steps.push(step);
                if kept {
                    best = candidate;
                    best_result = result;
                    improved = true;
                    break;
                }
            }
        }
        if !improved {
            break;
        }
    }
    let held_out = [traffic(options.validate_seed)?];
    let mut tuned = best;
    tuned.name = format!("{}-tuned", start.name);
    Ok(TuneReport {
        validation_start: measure(&start, &held_out)?,
        validation_best: measure(&tuned, &held_out)?,
        start: start_result,
        best: best_result,
        profile: tuned,
        steps,
    })
}
