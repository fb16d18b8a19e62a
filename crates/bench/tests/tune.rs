//! The tuner finds and removes a harmful weight, and the gain holds on traffic it never saw.

#![allow(clippy::unwrap_used)]

use infergate_bench::scenario;
use infergate_bench::tune::{tune, TuneOptions};
use infergate_picker::{weighted, Profile, Scorer};
use std::time::Duration;

#[test]
fn a_harmful_weight_is_dropped_and_the_gain_holds_on_held_out_traffic() {
    // On a mixed fleet of fast and slow GPUs, a heavy no-hit-LRU weight makes unique prompts
    // rotate over every pod like round-robin, slow ones included.
    let mut start = Profile::infergate();
    start.scorers.push(weighted(Scorer::NoHitLru, 50.0));
    let s = scenario::by_id("mixed-gpu-8b").unwrap();
    let options = TuneOptions {
        tune_seeds: vec![1],
        validate_seed: 5,
        duration: Duration::from_secs(40),
        rounds: 1,
    };
    let mut seen = 0;
    let report = tune(&s, start, &options, |_| seen += 1).unwrap();
    assert_eq!(seen, report.steps.len());
    let lru = report
        .profile
        .scorers
        .iter()
        .find(|w| w.scorer == Scorer::NoHitLru)
        .unwrap();
    assert_eq!(lru.weight, 0.0, "{:?}", report.steps);
    assert!(
        report.best.ttft_ms.p99 < 0.5 * report.start.ttft_ms.p99,
        "{} vs {}",
        report.best.ttft_ms.p99,
        report.start.ttft_ms.p99
    );
    assert!(
        report.validation_best.ttft_ms.p99 < 0.5 * report.validation_start.ttft_ms.p99,
        "{} vs {}",
        report.validation_best.ttft_ms.p99,
        report.validation_start.ttft_ms.p99
    );
    assert!(report.best.output_tokens_per_s >= 0.99 * report.start.output_tokens_per_s);
}
