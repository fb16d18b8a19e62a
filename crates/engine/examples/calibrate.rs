//! The calibration search on the fitting set alone (`anchors::fit`): prints the best grid
//! points. The held-out anchors are never run. The grid is scored on every core, in parts.
use infergate_engine::anchors::fit::{rank, score_points, GRID};

// An example is a program, so it is the edge the crate's purity rules leave concurrency to: the
// search itself scores points one after another, and the program runs parts of the grid on
// threads of its own.
#[allow(clippy::disallowed_methods)]
fn main() {
    let points = GRID.points();
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = points.len().div_ceil(parts).max(1);
    let mut fits: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = points
            .chunks(chunk)
            .map(|part| scope.spawn(move || score_points(part)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    rank(&mut fits);
    println!("{} points", fits.len());
    for f in fits.iter().take(20) {
        println!(
            "within_reference {} score {:.4} median {:.3} per_request_nanos {} overlap {} weight_eff {} kv_eff {} mfu_scale {} moe_eff {} moe_experts_only {} decode_eff {:?} all_reduce {} v0_per_request {} fp8_eff {} h200_share {} a100_share {} moe_layer {} api_overhead_ms {}",
            f.within_reference,
            f.score,
            f.median_error,
            f.calibration.per_request_nanos,
            f.calibration.prefill_overlap_penalty,
            f.calibration.weight_bandwidth_efficiency,
            f.calibration.kv_bandwidth_efficiency,
            f.calibration.mfu_scale,
            f.calibration.moe_compute_efficiency,
            f.calibration.moe_experts_only,
            f.calibration.decode_compute_efficiency,
            f.calibration.nvlink_all_reduce_nanos,
            f.calibration.v0_per_request_nanos,
            f.calibration.fp8_compute_efficiency,
            f.calibration.h200_bandwidth_share,
            f.calibration.a100_bandwidth_share,
            f.calibration.moe_layer_nanos,
            f.api_overhead.as_secs_f64() * 1e3
        );
    }
}
