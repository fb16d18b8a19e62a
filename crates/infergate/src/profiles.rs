//! `infergate sim --list-profiles` and `--anchors`: the simulator's derived figures and its
//! fidelity, printed as Markdown tables.

use infergate_engine::anchors::{median_error, run_all};
use infergate_engine::profile::{Profile, REFERENCE_PROFILES};
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::EngineConfig;

/// Prints every reference profile with the figures derived from its geometry and datasheet.
pub fn list_profiles() -> anyhow::Result<()> {
    println!("| profile | KV capacity (tokens) | blocks | decode ms B=1 ctx 1k | B=32 ctx 2k | B=128 ctx 2k | prefill tok/s | TTFT 1k tokens, idle | max_num_seqs / batched tokens | max_model_len |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &(model, gpu, tp) in REFERENCE_PROFILES {
        print_row(&Profile::lookup(model, gpu, tp)?);
    }
    print_row(&Profile::instant());
    Ok(())
}

fn print_row(profile: &Profile) {
    let config = EngineConfig::new(profile.clone());
    let m = StepTimeModel::calibrated(profile, &config.calibration);
    let ttft = config.api_overhead.as_secs_f64() * 1e3
        + m.idle_prefill_nanos(1000, u64::from(config.max_num_batched_tokens)) / 1e6;
    println!(
        "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} ms | {} / {} | {} |",
        profile,
        profile.kv_capacity_tokens(),
        profile.num_gpu_blocks(),
        m.decode_nanos(1, 1000) / 1e6,
        m.decode_nanos(32, 2000) / 1e6,
        m.decode_nanos(128, 2000) / 1e6,
        m.prefill_tokens_per_second(u64::from(config.max_num_batched_tokens)),
        ttft,
        config.max_num_seqs,
        config.max_num_batched_tokens,
        config.max_model_len,
    );
}

/// Runs every measured anchor in virtual time and prints predicted against measured.
pub fn anchors() -> anyhow::Result<()> {
    let results = run_all();
    println!("| experiment | figure | measured | simulated | error | tolerance |");
    println!("|---|---|---|---|---|---|");
    for r in &results {
        println!(
            "| {} | {} | {} | {:.2} | {:+.1} % | ±{:.0} % |",
            r.experiment,
            r.figure,
            r.measured,
            r.predicted,
            r.error() * 100.0,
            r.tolerance * 100.0
        );
    }
    println!();
    println!(
        "median absolute error: {:.1} % over {} figures",
        median_error(&results) * 100.0,
        results.len()
    );
    Ok(())
}
