//! Prints every fidelity anchor: measured, predicted, error. Optional args override the
//! calibration: per_request_nanos overlap weight_eff mfu_scale kv_eff api_overhead_ms client_cv
//! [moe_compute_efficiency [decode_compute_efficiency, 0 for decode FLOPs left out
//! [nvlink_all_reduce_nanos [v0_per_request_nanos [fp8_compute_efficiency
//! [h200_bandwidth_share [moe_layer_nanos [a100_bandwidth_share]]]]]]]].
use infergate_engine::anchors::{run_all, summary, with_calibration, Split};
use infergate_engine::step_time::Calibration;
use std::time::Duration;

// An example is a program, so it is the edge the crate's purity rules leave I/O to: it
// reads its command line and passes the values into the crate.
#[allow(clippy::disallowed_methods)]
fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let results = if (7..=15).contains(&args.len()) {
        let cal = Calibration {
            per_request_nanos: args[0],
            prefill_overlap_penalty: args[1],
            weight_bandwidth_efficiency: args[2],
            mfu_scale: args[3],
            kv_bandwidth_efficiency: args[4],
            moe_compute_efficiency: args.get(7).copied().unwrap_or(1.0),
            moe_experts_only: false,
            decode_compute_efficiency: args.get(8).copied().filter(|&e| e > 0.0),
            nvlink_all_reduce_nanos: args.get(9).copied().unwrap_or(10_000.0),
            v0_per_request_nanos: args.get(10).copied().unwrap_or(args[0]),
            fp8_compute_efficiency: args.get(11).copied().unwrap_or(1.0),
            h200_bandwidth_share: args.get(12).copied().unwrap_or(1.0),
            moe_layer_nanos: args.get(13).copied().unwrap_or(60_000.0),
            a100_bandwidth_share: args.get(14).copied().unwrap_or(1.0),
        };
        with_calibration(
            cal,
            Duration::from_secs_f64(args[5] / 1e3),
            args[6],
            run_all,
        )
    } else {
        run_all()
    };
    for r in &results {
        println!(
            "{:<8} {:<55} {:<16} measured {:>8.2} predicted {:>8.2} error {:>+6.1}%",
            r.split.label(),
            r.experiment,
            r.figure,
            r.measured,
            r.predicted,
            r.error() * 100.0
        );
    }
    for split in [Split::Fitting, Split::HeldOut] {
        let s = summary(&results, split);
        println!(
            "{}: median |error| {:.1}% over {}",
            split.label(),
            s.median_error * 100.0,
            s.anchors
        );
    }
}
