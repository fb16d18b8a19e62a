//! `infergate tune`: searches the default policy's scorer weights on a scenario and prints the
//! winner as an `EndpointPickerConfig` to paste into a gateway config.

use anyhow::Context;
use clap::Args;
use infergate_bench::scenario;
use infergate_bench::tune::{tune, TuneOptions};
use infergate_picker::config::{EndpointPickerConfig, PickerConfig};
use infergate_picker::Profile;
use std::time::Duration;

/// Flags of `infergate tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Scenario id (see `infergate bench --scenario`).
    #[arg(long)]
    scenario: String,
    /// Seeds whose traffic the search replays (P99 is their median).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    seeds: Vec<u64>,
    /// Seed of the held-out traffic the winner is checked on.
    #[arg(long, default_value_t = 9)]
    validate_seed: u64,
    /// Simulated seconds of arrivals per replay.
    #[arg(long, default_value_t = 120)]
    duration: u64,
    /// Passes over every scorer.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

/// Runs `infergate tune`.
pub fn run(args: TuneArgs) -> anyhow::Result<()> {
    let s = scenario::by_id(&args.scenario).with_context(|| {
        let ids: Vec<&str> = scenario::all().iter().map(|s| s.id).collect();
        format!(
            "unknown scenario `{}` (known: {})",
            args.scenario,
            ids.join(", ")
        )
    })?;
    if args.seeds.contains(&args.validate_seed) {
        anyhow::bail!(
            "--validate-seed {} is also a tuning seed: validation must use traffic the search never saw",
            args.validate_seed
        );
    }
    let options = TuneOptions {
        tune_seeds: args.seeds.clone(),
        validate_seed: args.validate_seed,
        duration: Duration::from_secs(args.duration),
        rounds: args.rounds,
    };
    eprintln!(
        "tuning infergate's weights on {} (seeds {:?}, {} s each; validation seed {})",
        s.id, args.seeds, args.duration, args.validate_seed
    );
    let report = tune(&s, Profile::infergate(), &options, |step| {
        eprintln!(
            "  {:<28} {:>5} → {:<5} P99 TTFT {:>9.1} ms, {:>7.0} tok/s{}",
            step.scorer,
            step.from,
            step.to,
            step.p99_ms,
            step.throughput,
            if step.kept { "  kept" } else { "" }
        );
    })?;
    let change = |a: f64, b: f64| 100.0 * (b - a) / a.max(1e-9);
    println!(
        "tuning seeds: P99 TTFT {:.1} → {:.1} ms ({:+.1} %), throughput {:.0} → {:.0} tok/s",
        report.start.ttft_ms.p99,
        report.best.ttft_ms.p99,
        change(report.start.ttft_ms.p99, report.best.ttft_ms.p99),
        report.start.output_tokens_per_s,
        report.best.output_tokens_per_s,
    );
    println!(
        "held-out seed {}: P99 TTFT {:.1} → {:.1} ms ({:+.1} %), throughput {:.0} → {:.0} tok/s",
        args.validate_seed,
        report.validation_start.ttft_ms.p99,
        report.validation_best.ttft_ms.p99,
        change(
            report.validation_start.ttft_ms.p99,
            report.validation_best.ttft_ms.p99
        ),
        report.validation_start.output_tokens_per_s,
        report.validation_best.output_tokens_per_s,
    );
    if report.profile.scorers == Profile::infergate().scorers {
        println!("no weight change beat the default; keep it.");
        return Ok(());
    }
    let config = EndpointPickerConfig::from_profile(&report.profile)?;
    println!("\n# The tuned profile, for a scheduler's EndpointPickerConfig:");
    print!("{}", serde_norway::to_string(&config)?);
    Ok(())
}
