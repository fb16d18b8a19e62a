//! Grid search of the step-time constants against the anchors (prints the best few).
use infergate_engine::anchors::{median_error, run_all, with_calibration};
use infergate_engine::step_time::Calibration;
use std::time::Duration;

fn main() {
    let mut rows = Vec::new();
    for per_request in [15_000.0, 17_000.0, 19_000.0] {
        for overlap in [0.7, 0.8, 0.9] {
            for mfu_scale in [1.3, 1.4] {
                for weight_eff in [0.88] {
                    for overhead in [19.0] {
                        for cv in [0.0, 0.3, 0.45, 0.6] {
                            let cal = Calibration {
                                per_request_nanos: per_request,
                                prefill_overlap_penalty: overlap,
                                weight_bandwidth_efficiency: weight_eff,
                                mfu_scale,
                                ..Calibration::BLIS
                            };
                            let results = with_calibration(
                                cal,
                                Duration::from_secs_f64(overhead / 1e3),
                                cv,
                                run_all,
                            );
                            let worst = results
                                .iter()
                                .map(|r| r.error().abs() / r.tolerance)
                                .fold(0.0, f64::max);
                            let within = results
                                .iter()
                                .filter(|r| r.error().abs() <= r.tolerance)
                                .count();
                            rows.push((within, median_error(&results), worst, format!("{per_request} {overlap} {weight_eff} {mfu_scale} 0.5 {overhead} {cv}")));
                        }
                    }
                }
            }
        }
    }
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.total_cmp(&b.2)));
    for (within, median, worst, args) in rows.iter().take(15) {
        println!("within {within} median {median:.3} worst/tol {worst:.2} args {args}");
    }
}
