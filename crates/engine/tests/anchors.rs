//! Every measured anchor of the reference, reproduced in virtual time within its tolerance
//! (±10 %, ±15 % for saturation throughput), and the median error at or below 7 %.

#![allow(clippy::unwrap_used)]

use infergate_engine::anchors::{median_error, run_all};

#[test]
fn every_anchor_is_within_tolerance() {
    let results = run_all();
    let misses: Vec<String> = results
        .iter()
        .filter(|r| r.error().abs() > r.tolerance)
        .map(|r| {
            format!(
                "{} / {}: measured {} simulated {:.2} ({:+.1} %)",
                r.experiment,
                r.figure,
                r.measured,
                r.predicted,
                r.error() * 100.0
            )
        })
        .collect();
    assert!(
        misses.is_empty(),
        "anchors outside tolerance:\n{}",
        misses.join("\n")
    );
    let median = median_error(&results);
    assert!(median <= 0.07, "median error {:.1} %", median * 100.0);
}
