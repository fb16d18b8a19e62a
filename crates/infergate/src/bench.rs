//! `infergate bench`: the policies side by side on a scenario in virtual time, the seed table in
//! the HyperPod layout, and the picker's own decision speed.

use anyhow::{bail, Context};
use clap::Args;
use infergate_bench::report::markdown_table;
use infergate_bench::scenario::{self, Scenario};
use infergate_bench::suite::{run_scenario, ScenarioReport, POLICIES};
use std::time::{Duration, Instant};

/// Flags of `infergate bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Scenario id, or `all`.
    #[arg(long)]
    scenario: Option<String>,
    /// Print the six seed rows as the HyperPod table lays them out (Δ vs round-robin).
    #[arg(long)]
    seed_table: bool,
    /// Policies to compare (default: every one).
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// Seeds per scenario (the median is reported).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Simulated seconds of arrivals per run.
    #[arg(long, default_value_t = 120)]
    duration: u64,
    /// JSON: with --picker, one line per fleet size; otherwise every figure, to FILE.
    #[arg(long, num_args = 0..=1, value_name = "FILE")]
    json: Option<Option<std::path::PathBuf>>,
    /// Measure the picker's decision time instead.
    #[arg(long)]
    picker: bool,
    /// Fleet sizes for --picker.
    #[arg(long, value_delimiter = ',', default_value = "100,5000")]
    endpoints: Vec<usize>,
}

/// Runs `infergate bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.picker {
        return picker_speed(&args);
    }
    let scenarios: Vec<Scenario> = match (args.scenario.as_deref(), args.seed_table) {
        (_, true) => scenario::seed_rows(),
        (Some("all"), false) => scenario::all(),
        (Some(id), false) => vec![scenario::by_id(id).with_context(|| {
            let ids: Vec<&str> = scenario::all().iter().map(|s| s.id).collect();
            format!("unknown scenario `{id}` (known: {})", ids.join(", "))
        })?],
        (None, false) => bail!("say --scenario NAME|all, --seed-table or --picker"),
    };
    let policies: Vec<&str> = if args.policies.is_empty() {
        POLICIES.to_vec()
    } else {
        args.policies.iter().map(String::as_str).collect()
    };
    let seeds: Vec<u64> = (1..=args.seeds.max(1)).collect();
    let mut reports = Vec::new();
    let started = Instant::now();
    for s in &scenarios {
        let t = Instant::now();
        let report = run_scenario(s, &policies, &seeds, Duration::from_secs(args.duration))?;
        eprintln!("{}: {:.1} s", s.id, t.elapsed().as_secs_f64());
        if !args.seed_table {
            print_report(&report);
        }
        reports.push(report);
    }
    if args.seed_table {
        print_seed_table(&scenarios, &reports, &policies);
    }
    eprintln!("all done in {:.1} s", started.elapsed().as_secs_f64());
    if let Some(json) = &args.json {
        let Some(path) = json else {
            bail!("--json needs a FILE (except with --picker)")
        };
        let body = serde_json::to_string_pretty(&reports)?;
        std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print_report(r: &ScenarioReport) {
    println!(
        "\n### {}\n\nfleet capacity {:.1} req/s, offered {:.1} req/s ({:.0} %), {} s of arrivals, median of seeds {:?}\n",
        r.scenario,
        r.capacity_rps,
        r.rate_rps,
        r.load * 100.0,
        r.duration_s,
        r.seeds
    );
    print!("{}", markdown_table(&r.results, "round-robin"));
}

/// The HyperPod table's layout: per scenario and policy, Δ TTFT P95, Δ TTFT P99, Δ throughput
/// against round-robin, with the seed's own claim beside infergate's row.
fn print_seed_table(scenarios: &[Scenario], reports: &[ScenarioReport], policies: &[&str]) {
    println!("| scenario | policy | Δ TTFT P95 | Δ TTFT P99 | Δ throughput |");
    println!("|---|---|---|---|---|");
    let pct = |v: f64, b: f64| {
        if b.abs() > 1e-12 {
            format!("{:+.0} %", (v - b) / b * 100.0)
        } else {
            "—".into()
        }
    };
    let claim = |v: Option<f64>| v.map_or("comparable".to_owned(), |v| format!("{v:+.0} %"));
    for (s, r) in scenarios.iter().zip(reports) {
        let Some(base) = r.results.iter().find(|p| p.policy == "round-robin") else {
            continue;
        };
        if let Some([p95, p99, tput]) = s.seed_row {
            println!(
                "| {} | *seed claim* | {} | {} | {} |",
                s.id,
                claim(p95),
                claim(p99),
                claim(tput)
            );
        }
        for p in r
            .results
            .iter()
            .filter(|p| p.policy != "round-robin" && policies.contains(&p.policy.as_str()))
        {
            println!(
                "| {} | {} | {} | {} | {} |",
                s.id,
                p.policy,
                pct(p.ttft_ms.p95, base.ttft_ms.p95),
                pct(p.ttft_ms.p99, base.ttft_ms.p99),
                pct(p.output_tokens_per_s, base.output_tokens_per_s)
            );
        }
    }
}

fn picker_speed(args: &BenchArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut clock = || start.elapsed();
    for (i, &n) in args.endpoints.iter().enumerate() {
        let t = infergate_picker::speed::measure_decisions(
            n,
            infergate_picker::speed::DEFAULT_REQUESTS,
            42 + i as u64,
            &mut clock,
        )
        .map_err(|e| anyhow::anyhow!("{n} endpoints: {e}"))?;
        if args.json.is_some() {
            println!("{}", t.to_json());
        } else {
            println!("{t}");
        }
    }
    Ok(())
}
