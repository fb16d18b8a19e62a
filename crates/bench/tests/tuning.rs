//! A run's [`Tuning`] reaches the replicas and the flow controller it names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use infergate_bench::report::summarize;
use infergate_bench::runner::{run_tuned, RunOptions, RunOutcome, Tuning};
use infergate_bench::scenario::{self, Scenario};
use infergate_bench::workload::BenchRequest;
use infergate_picker::Policy;
use std::time::Duration;

fn run(s: &Scenario, requests: &[BenchRequest], tuning: &Tuning) -> RunOutcome {
    let options = RunOptions {
        duration: Duration::from_secs(40),
        seed: 2,
        ..RunOptions::default()
    };
    let policy = Policy::named("infergate").unwrap();
    run_tuned(s, Some(policy), requests, &options, tuning).unwrap()
}

/// Mean running requests per replica over the scrapes after the first tenth of the run.
fn mean_running(r: &RunOutcome) -> f64 {
    let warm = r.last_arrival / 10;
    let batches: Vec<f64> = r
        .queue_samples
        .iter()
        .filter(|q| q.at >= warm)
        .map(|q| f64::from(q.running))
        .collect();
    batches.iter().sum::<f64>() / batches.len() as f64
}

#[test]
fn a_smaller_step_budget_splits_a_long_prompt_over_more_steps() {
    let s = scenario::by_id("priority-overload-8b-vllm-priority").unwrap();
    let request = BenchRequest {
        at: Duration::from_secs(1),
        prompt_tokens: 6_000,
        output_tokens: 8,
        block_hashes: (0..375).collect(),
        adapter: None,
        band: None,
        tenant: None,
    };
    let ttft = |budget: Option<u32>| {
        let tuning = Tuning {
            max_num_batched_tokens: budget,
            ..Tuning::default()
        };
        let r = &run(&s, std::slice::from_ref(&request), &tuning).requests[0];
        r.first_token.unwrap() - r.sent
    };
    // One 6,000-token step under the default 8,192 budget; three under 2,048, each paying the
    // step's fixed costs again.
    let (whole, chunked) = (ttft(None), ttft(Some(2_048)));
    assert!(
        chunked > whole,
        "budget 2048: {chunked:?}, default: {whole:?}"
    );
}

#[test]
fn a_running_threshold_keeps_batches_short_and_lets_critical_through() {
    let s = scenario::by_id("priority-overload-8b-vllm-priority").unwrap();
    let load = infergate_bench::suite::offered(&s).unwrap();
    let requests = s
        .requests(
            load.rate_rps,
            Duration::from_secs(40),
            load.max_model_len,
            2,
        )
        .unwrap();
    let plain = run(&s, &requests, &Tuning::default());
    let held = run(
        &s,
        &requests,
        &Tuning {
            running_threshold: Some(120),
            ..Tuning::default()
        },
    );
    let (before, after) = (mean_running(&plain), mean_running(&held));
    assert!(before > 200.0, "default batch {before}");
    assert!(after < 140.0, "batch held at 120: {after}");
    let critical = |r: &RunOutcome| {
        summarize("infergate", r)
            .bands
            .into_iter()
            .find(|b| b.band == "Critical")
            .unwrap()
    };
    let (before, after) = (critical(&plain), critical(&held));
    assert_eq!((after.errors, after.shed), (0, 0), "{after:?}");
    assert!(
        after.ttft_ms.p99 < 0.85 * before.ttft_ms.p99,
        "held {after:?} vs default {before:?}"
    );
}

#[test]
fn a_step_budget_below_the_batch_cap_is_refused() {
    let s = scenario::by_id("priority-overload-8b-vllm-priority").unwrap();
    let options = RunOptions::default();
    let tuning = Tuning {
        max_num_batched_tokens: Some(64),
        max_num_seqs: Some(128),
        ..Tuning::default()
    };
    let err = run_tuned(&s, None, &[], &options, &tuning).unwrap_err();
    assert!(err.to_string().contains("max_num_seqs"), "{err}");
}
