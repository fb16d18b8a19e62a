//! The fidelity anchors: the reference's own within their tolerance, every published one run on
//! the profile it names, the sets split as the rule says, and the out-of-sample error held at
//! the level measured (the goal, 10 %, is not met yet: docs/simulator.md says where it misses).

#![allow(clippy::unwrap_used)]

use infergate_engine::anchors::{fit, median_error, run_all, summary, Measure, Split, PUBLISHED};
use infergate_engine::profile::Profile;
use std::collections::BTreeMap;

/// The reference's anchors (reference/simulator.md): those the shipped constants were fitted to
/// in the first wave, from its two sources.
fn is_reference(source: &str) -> bool {
    source.starts_with("inference-perf KubeCon") || source.starts_with("reference/simulator.md")
}

#[test]
fn every_reference_anchor_is_within_tolerance() {
    let results: Vec<_> = run_all()
        .into_iter()
        .filter(|r| is_reference(r.source))
        .collect();
    assert_eq!(results.len(), 20);
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

#[test]
fn every_published_anchor_runs_on_the_profile_it_names() {
    for p in PUBLISHED {
        let setups = match p.measure {
            Measure::Figure(x, _) => vec![x.setup],
            Measure::Ratio(a, b, _) => vec![a.setup, b.setup],
        };
        for s in setups {
            // An unknown triple does not run: its anchor would read as not reproduced.
            assert!(
                Profile::lookup(s.model, s.gpu, s.tp).is_ok(),
                "{}: {}/{}/tp{}",
                p.experiment,
                s.model,
                s.gpu,
                s.tp
            );
        }
        assert!(
            p.measured > 0.0 && p.measured.is_finite(),
            "{}",
            p.experiment
        );
        assert!(!p.source.is_empty(), "{}", p.experiment);
    }
}

#[test]
fn each_source_holds_out_at_least_as_many_anchors_as_it_fits() {
    let mut by_source: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for p in PUBLISHED {
        let e = by_source.entry(p.source).or_default();
        match p.split {
            Split::Fitting => e.0 += 1,
            Split::HeldOut => e.1 += 1,
        }
    }
    for (source, (fitting, held)) in by_source {
        assert!(
            held >= fitting,
            "{source}: {fitting} fitting, {held} held out"
        );
    }
    assert!(PUBLISHED.len() + 20 >= 40);
}

#[test]
fn the_calibration_search_never_runs_a_held_out_anchor() {
    let results = fit::fitting_results(
        infergate_engine::step_time::Calibration::FITTED,
        infergate_engine::config::DEFAULT_API_OVERHEAD,
    );
    assert!(!results.is_empty());
    assert!(!fit::reads_held_out(&results));
}

#[test]
fn the_out_of_sample_error_stays_where_it_was_measured() {
    let results = run_all();
    let held = summary(&results, Split::HeldOut);
    let fitted = summary(&results, Split::Fitting);
    assert!(held.anchors >= 20, "{held:?}");
    // Every anchor runs: the Qwen3-32B rows on one GPU did not until they ran with the KV cache
    // their source's `--max-model-len 32768` proves.
    let not_run: Vec<_> = results
        .iter()
        .filter(|r| !r.reproduced())
        .map(|r| r.experiment)
        .collect();
    assert!(not_run.is_empty(), "{not_run:?}");
    // Measured 8.8 % over 42, mean 13.4 % (fitted 3.7 % over 47; docs/simulator.md,
    // 2026-12-06, after attention in MoE models moved to the dense rate and the search that
    // followed): the goal is 10 %, and this guards against getting worse than what was
    // measured. Before that change it read 10.5 % (mean 14.8 %); over the 40 before GPUStack's
    // fp8 235B rows on four A100s, 10.5 % (mean 14.5 %) with the A100's bandwidth share,
    // 10.8 % (mean 14.6 %) before it, and 10.4 % (mean 17.0 %) on the constants before the MoE
    // step change of the same day.
    assert!(
        held.median_error <= 0.09,
        "held-out median {:.1} %",
        held.median_error * 100.0
    );
    let held_out: Vec<f64> = results
        .iter()
        .filter(|r| r.split == Split::HeldOut)
        .map(|r| r.error().abs())
        .collect();
    let mean = held_out.iter().sum::<f64>() / held_out.len() as f64;
    assert!(mean <= 0.14, "held-out mean {:.1} %", mean * 100.0);
    assert!(
        fitted.median_error <= 0.05,
        "fitted median {:.1} %",
        fitted.median_error * 100.0
    );
}
