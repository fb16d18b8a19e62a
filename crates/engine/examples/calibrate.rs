//! The calibration search on the fitting set alone (`anchors::fit`): prints the best grid
//! points. The held-out anchors are never run.
use infergate_engine::anchors::fit::{search, GRID};

fn main() {
    for f in search(&GRID).iter().take(10) {
        println!(
            "within_reference {} score {:.4} median {:.3} per_request_nanos {} overlap {} weight_eff {} kv_eff {} mfu_scale {} moe_eff {} moe_experts_only {} decode_eff {:?} all_reduce {} v0_per_request {} api_overhead_ms {}",
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
            f.api_overhead.as_secs_f64() * 1e3
        );
    }
}
