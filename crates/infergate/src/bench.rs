//! `infergate bench`: the policies side by side on a scenario in virtual time, the seed table in
//! the HyperPod layout, and the picker's own decision speed.

use crate::bench_tables::{scenario_markdown, seed_table};
use anyhow::{bail, Context};
use clap::Args;
use infergate_bench::scenario::{self, Scenario};
use infergate_bench::suite::{run_scenario_with_progress, Progress, ScenarioReport};
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
    /// Policies to compare (default: every one). `infergate` runs behind its own flow control,
    /// as it ships; `infergate-without-<part>` is infergate with one scorer, filter,
    /// `fresh-load`, `latency-tolerance` (the latency scorer's plain ratio), or part of its
    /// flow control (`flow-control`, `overload-rule`,
    /// `kv-saturation`, `queue-saturation`, `kv-only-in-overload`,
    /// `adapter-aware-queues`, `decode-pace`) off (see --ablate).
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// Add every ablation of infergate (one part off at a time) to the policies.
    #[arg(long)]
    ablate: bool,
    /// Replay this trace (Azure CSV, Mooncake JSONL with hash_ids, or an infergate capture from
    /// `serve --capture`; told by content) on --fleet, its timestamps time-scaled to --load
    /// (default 0.6) of the fleet's capacity.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    /// The simulated fleet (a `SimulatedFleet` file, as `infergate sim --fleet`) for --trace.
    #[arg(long, value_name = "FLEET.yaml")]
    fleet: Option<std::path::PathBuf>,
    /// Offered load as a fraction of fleet capacity, instead of the scenario's own: one value
    /// (`0.8`), a list (`0.5,0.8,1.2`) or a range `FROM:TO:STEP` (`0.3:2.0:0.1`, both ends
    /// included). Several loads sweep: every policy at every load on the same arrivals per
    /// load and seed, with a table per scenario and, with --out, P99 TTFT against load.
    #[arg(long, value_name = "LOAD|LIST|FROM:TO:STEP")]
    load: Option<String>,
    /// Instead of fixed loads, find by bisection each policy's capacity at SLO: the highest
    /// load at which the median seed keeps P99 TTFT (counting unanswered requests as misses)
    /// within --slo-ttft-p99 and, if given, P99 TPOT within --slo-tpot-p99.
    #[arg(long)]
    capacity: bool,
    /// The TTFT objective of --capacity and of goodput (`500ms`, `2s`; default 2s).
    #[arg(long, value_name = "DURATION")]
    slo_ttft_p99: Option<String>,
    /// The TPOT objective of --capacity and of goodput (default 100ms for goodput, none for
    /// --capacity unless given).
    #[arg(long, value_name = "DURATION")]
    slo_tpot_p99: Option<String>,
    /// Seeds per scenario (the median is reported; an odd count, so the median is a run).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// The first seed: the runs use seeds N, N+1, … (`--first-seed 4 --seeds 3`: seeds 4–6, to
    /// judge a change on arrivals it was not tuned on).
    #[arg(long, default_value_t = 1, value_name = "N")]
    first_seed: u64,
    /// Seconds of arrivals per run (default: 120 virtual, 20 live).
    #[arg(long)]
    duration: Option<u64>,
    /// `virtual`: simulated time, every policy. `live`: real `infergate sim` replicas behind
    /// `infergate serve` (any policy) or a peer router (envoy-round-robin, sglang-router,
    /// vllm-router, gie-epp, llm-d-epp), in real time.
    #[arg(long, value_enum, default_value_t = crate::bench_live::Mode::Virtual)]
    mode: crate::bench_live::Mode,
    /// Write the report here: README.md (the tables), results.json, and SVG plots (TTFT CDF per
    /// scenario; per-pod queues over time under round-robin and infergate; first seed).
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
    /// JSON: with --picker, one line per fleet size; otherwise every figure, to FILE.
    #[arg(long, num_args = 0..=1, value_name = "FILE")]
    json: Option<Option<std::path::PathBuf>>,
    /// Measure the picker's decision time instead: per fleet size, the median of 3 rounds of
    /// 20,000 decisions after an untimed round, with the spread of the rounds' p99.
    #[arg(long)]
    picker: bool,
    /// Fleet sizes for --picker.
    #[arg(long, value_delimiter = ',', default_value = "100,5000")]
    endpoints: Vec<usize>,
    /// Run each scenario once per count in this list with that many gateway replicas behind one
    /// Service (virtual mode): each with its own picker (prefix index, latency model, in-flight
    /// credit) and flow controller, sharing only the scraped metrics; arrivals dealt to them at
    /// random from the seed. The oracles (`greedy-oracle`, `lookahead-oracle`) have no picker
    /// state and are the same at every count.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1",
        value_name = "N,…",
        value_parser = clap::value_parser!(u32).range(1..=64)
    )]
    gateway_replicas: Vec<u32>,
    /// Run a multi-cluster scenario (or `all`) instead: one infergate gateway per cluster, the
    /// global tier in every caller region, a cluster cut off mid-run; the tier's policy
    /// (`infergate-global`, and `infergate-global-without-cost` without the members' prices)
    /// against `round-robin-clusters` and `nearest-region` (--policies picks among them), at
    /// each --load, on P99 TTFT, goodput and cost per million tokens.
    #[arg(long, value_name = "ID|all")]
    global: Option<String>,
    /// With --global: the tier's `routing.spillAt` instead of its default (the saturation from
    /// which a cheaper member counts as full).
    #[arg(long, value_name = "FRACTION")]
    spill_at: Option<f64>,
}

/// Runs `infergate bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let replicated = args.gateway_replicas != [1];
    if replicated {
        // Each of these reports one gateway or lays out one table per scenario; none would
        // honour the counts.
        for (set, flag) in [
            (args.picker, "--picker"),
            (args.seed_table, "--seed-table"),
            (args.out.is_some(), "--out"),
            (args.mode == crate::bench_live::Mode::Live, "--mode live"),
        ] {
            if set {
                bail!("--gateway-replicas other than 1 is for virtual scenario runs: drop it or {flag} (--json keeps every count's figures)");
            }
        }
    }
    if args.picker {
        return picker_speed(&args);
    }
    if let Some(id) = &args.global {
        return global(&args, id);
    }
    if args.spill_at.is_some() {
        bail!("--spill-at sets the global tier's spillAt for --global: add --global ID|all or drop it");
    }
    let mut scenarios: Vec<Scenario> = match (args.scenario.as_deref(), args.seed_table) {
        _ if args.trace.is_some() || args.fleet.is_some() => {
            let (Some(trace), Some(fleet)) = (&args.trace, &args.fleet) else {
                bail!("--trace and --fleet go together: a trace to replay and a fleet to replay it on");
            };
            if args.scenario.is_some() || args.seed_table {
                bail!("--trace/--fleet make their own scenario: drop --scenario/--seed-table");
            }
            vec![infergate_bench::custom::from_files(trace, fleet, 0.6)?]
        }
        (_, true) => scenario::seed_rows(),
        (Some("all"), false) => scenario::all(),
        (Some(id), false) => vec![scenario::by_id(id).with_context(|| {
            let ids: Vec<&str> = scenario::all().iter().map(|s| s.id).collect();
            format!("unknown scenario `{id}` (known: {})", ids.join(", "))
        })?],
        (None, false) => bail!("say --scenario NAME|all, --seed-table or --picker"),
    };
    let ablations = if args.ablate {
        infergate_bench::ablation::names()
    } else {
        Vec::new()
    };
    let mut policies: Vec<&str> = if args.policies.is_empty() {
        args.mode.default_policies()
    } else {
        args.policies.iter().map(String::as_str).collect()
    };
    policies.extend(ablations.iter().map(String::as_str));
    let loads = match &args.load {
        Some(text) => crate::bench_sweep::parse_loads(text)?,
        None => Vec::new(),
    };
    if let [load] = loads.as_slice() {
        scenarios.iter_mut().for_each(|s| s.load = *load);
    }
    let seeds = seeds_of(&args);
    let duration = Duration::from_secs(args.duration.unwrap_or(args.mode.default_duration()));
    let slo = slo_of(&args)?;
    // What a capacity search or a sweep runs with (the first gateway count only).
    let runs = Runs {
        scenarios: &scenarios,
        policies: &policies,
        seeds: &seeds,
        duration,
        slo,
        gateway_replicas: args.gateway_replicas[0],
    };
    let virtual_only = |what: &str| -> anyhow::Result<()> {
        if args.mode == crate::bench_live::Mode::Live {
            bail!("{what} runs in virtual time: drop --mode live");
        }
        if args.seed_table && what != "--capacity" {
            bail!("{what} does not combine with --seed-table");
        }
        Ok(())
    };
    if args.capacity {
        virtual_only("--capacity")?;
        if !loads.is_empty() {
            bail!("--capacity searches the load itself: drop --load");
        }
        if args.seed_table {
            print!("{}", seed_table_of(&runs)?);
        }
        return capacity(&runs, &args);
    }
    if loads.len() > 1 {
        virtual_only("a load sweep")?;
        return sweep(&runs, &loads, &args);
    }
    let live = (args.mode == crate::bench_live::Mode::Live)
        .then(crate::bench_live::Live::new)
        .transpose()?;
    let mut reports = Vec::new();
    let started = Instant::now();
    for s in &scenarios {
        for &gateways in &args.gateway_replicas {
            let t = Instant::now();
            let report = match &live {
                Some(live) => live.run_scenario(s, &policies, &seeds, duration)?,
                None => run_scenario_with_progress(
                    s,
                    &infergate_bench::suite::policies_for(s, &policies),
                    &seeds,
                    duration,
                    gateways,
                    &mut |p| progress_line(s.id, p),
                )?,
            };
            progress_done();
            eprintln!("{}: {:.1} s", s.id, t.elapsed().as_secs_f64());
            if !args.seed_table {
                print_report(&report);
            }
            reports.push(report);
        }
    }
    if args.seed_table {
        print!("{}", seed_table(&scenarios, &reports, &policies));
    }
    eprintln!("all done in {:.1} s", started.elapsed().as_secs_f64());
    if let Some(dir) = &args.out {
        crate::bench_out::write(dir, &scenarios, &reports)?;
        eprintln!("report written to {}", dir.display());
    }
    if let Some(json) = &args.json {
        let Some(path) = json else {
            bail!("--json needs a FILE (except with --picker)")
        };
        let body = serde_json::to_string_pretty(&reports)?;
        std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `--global`: the multi-cluster scenarios.
fn global(args: &BenchArgs, id: &str) -> anyhow::Result<()> {
    crate::bench_global::refuse_other_modes(&[
        (args.scenario.is_some(), "--scenario"),
        (args.seed_table, "--seed-table"),
        (
            args.trace.is_some() || args.fleet.is_some(),
            "--trace/--fleet",
        ),
        (args.capacity, "--capacity"),
        (args.ablate, "--ablate"),
        (args.out.is_some(), "--out (--json FILE keeps every figure)"),
        (args.mode == crate::bench_live::Mode::Live, "--mode live"),
        (args.gateway_replicas != [1], "--gateway-replicas"),
    ])?;
    let loads = match &args.load {
        Some(text) => crate::bench_sweep::parse_loads(text)?,
        None => Vec::new(),
    };
    let seeds = seeds_of(args);
    let json = match &args.json {
        Some(Some(path)) => Some(path.as_path()),
        Some(None) => bail!("--json needs a FILE"),
        None => None,
    };
    crate::bench_global::run(&crate::bench_global::GlobalRun {
        id,
        policies: &args.policies,
        loads: &loads,
        seeds: &seeds,
        duration: Duration::from_secs(args.duration.unwrap_or(120)),
        slo: slo_of(args)?,
        json,
        spill_at: args.spill_at,
    })
}

/// The SLO from the flags; without --slo-tpot-p99, --capacity judges TTFT alone and goodput
/// keeps its default TPOT.
fn slo_of(args: &BenchArgs) -> anyhow::Result<infergate_bench::report::Slo> {
    let mut slo = infergate_bench::report::Slo::default();
    if let Some(t) = &args.slo_ttft_p99 {
        slo.ttft = crate::bench_sweep::parse_duration(t).context("--slo-ttft-p99")?;
    }
    match &args.slo_tpot_p99 {
        Some(t) => {
            slo.tpot = Some(crate::bench_sweep::parse_duration(t).context("--slo-tpot-p99")?)
        }
        None if args.capacity => slo.tpot = None,
        None => {}
    }
    Ok(slo)
}

/// The seeds of the runs: `--seeds` of them from `--first-seed`.
fn seeds_of(args: &BenchArgs) -> Vec<u64> {
    let first = args.first_seed.max(1);
    (first..first + args.seeds.max(1)).collect()
}

/// What every scenario of one sweep, capacity search or seed table runs with.
struct Runs<'a> {
    scenarios: &'a [Scenario],
    policies: &'a [&'a str],
    seeds: &'a [u64],
    duration: Duration,
    slo: infergate_bench::report::Slo,
    gateway_replicas: u32,
}

impl Runs<'_> {
    /// Runs `each` once per scenario with its plan (the policies that mean something on its
    /// fleet), clearing the progress bar after each and printing how long it took.
    fn each(
        &self,
        each: &mut dyn FnMut(&Scenario, &infergate_bench::suite::Plan<'_>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        for s in self.scenarios {
            let t = Instant::now();
            let policies = infergate_bench::suite::policies_for(s, self.policies);
            let plan = infergate_bench::suite::Plan {
                policies: &policies,
                seeds: self.seeds,
                duration: self.duration,
                gateway_replicas: self.gateway_replicas,
                slo: self.slo,
            };
            each(s, &plan)?;
            progress_done();
            eprintln!("{}: {:.1} s", s.id, t.elapsed().as_secs_f64());
        }
        Ok(())
    }
}

/// The seed table at each scenario's own load (the part of --seed-table --capacity that is
/// not the capacity search).
fn seed_table_of(runs: &Runs<'_>) -> anyhow::Result<String> {
    let mut reports = Vec::new();
    runs.each(&mut |s, plan| {
        let at_own_load =
            infergate_bench::suite::run_sweep(s, &[s.load], plan, &mut |p| progress_line(s.id, p))?;
        reports.extend(at_own_load);
        Ok(())
    })?;
    Ok(seed_table(runs.scenarios, &reports, runs.policies))
}

/// `--capacity`: per scenario, every policy's capacity at SLO.
fn capacity(runs: &Runs<'_>, args: &BenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let (slo, seeds, duration) = (runs.slo, runs.seeds, runs.duration);
    let mut md = String::new();
    let mut all = Vec::new();
    runs.each(&mut |s, plan| {
        let (offered, results) = infergate_bench::suite::capacity_at_slo(
            s,
            plan,
            infergate_bench::suite::Search::default(),
            &mut |p| progress_line(s.id, p),
        )?;
        let table = crate::bench_sweep::capacity_markdown(s.id, &offered, &slo, &results);
        print!("{table}");
        md.push_str(&table);
        all.push(serde_json::json!({
            "scenario": s.id,
            "capacity_rps": offered.capacity_rps,
            "slo": slo,
            "seeds": seeds,
            "duration_s": duration.as_secs_f64(),
            "results": results,
        }));
        Ok(())
    })?;
    eprintln!("all done in {:.1} s", started.elapsed().as_secs_f64());
    write_outputs(
        args,
        "capacity.md",
        &md,
        &serde_json::Value::Array(all),
        &[],
    )
}

/// A load sweep: per scenario, every policy at every load.
fn sweep(runs: &Runs<'_>, loads: &[f64], args: &BenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut md = String::new();
    let mut all = Vec::new();
    let mut plots = Vec::new();
    runs.each(&mut |s, plan| {
        let reports =
            infergate_bench::suite::run_sweep(s, loads, plan, &mut |p| progress_line(s.id, p))?;
        let table = crate::bench_sweep::sweep_markdown(&reports);
        print!("{table}");
        let plot = format!("{}-p99-ttft-vs-load.svg", s.id);
        md.push_str(&table);
        let _ = std::fmt::Write::write_fmt(
            &mut md,
            format_args!("\n![P99 TTFT against load, {}]({plot})\n", s.id),
        );
        plots.push((plot, crate::bench_sweep::p99_vs_load_svg(&reports)));
        all.extend(reports);
        Ok(())
    })?;
    eprintln!("all done in {:.1} s", started.elapsed().as_secs_f64());
    write_outputs(args, "sweep.md", &md, &serde_json::to_value(&all)?, &plots)
}

/// Writes --out (the Markdown as `name`, `results.json`, the plots) and --json.
fn write_outputs(
    args: &BenchArgs,
    name: &str,
    md: &str,
    json: &serde_json::Value,
    plots: &[(String, String)],
) -> anyhow::Result<()> {
    let body = serde_json::to_string_pretty(json)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let command: Vec<String> = std::env::args().skip(1).collect();
        let md = format!(
            "# infergate bench report\n\nProduced by `infergate {}`.\n{md}",
            command.join(" ")
        );
        let mut files = vec![
            (name.to_owned(), md),
            ("results.json".to_owned(), body.clone()),
        ];
        files.extend(plots.iter().cloned());
        for (file, text) in files {
            let path = dir.join(&file);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        eprintln!("report written to {}", dir.display());
    }
    if let Some(json) = &args.json {
        let Some(path) = json else {
            bail!("--json needs a FILE (except with --picker)")
        };
        std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A progress bar on stderr, redrawn in place — only when stderr is a terminal, so logs and
/// pipes stay clean.
fn progress_line(scenario: &str, p: Progress<'_>) {
    use std::io::{IsTerminal, Write};
    let mut err = std::io::stderr();
    if !err.is_terminal() || p.total == 0 {
        return;
    }
    const WIDTH: usize = 30;
    let filled = WIDTH * p.done / p.total;
    let _ = write!(
        err,
        "\r{scenario} [{}{}] {}/{} {} seed {}\x1b[K",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        p.done,
        p.total,
        p.policy,
        p.seed
    );
    let _ = err.flush();
}

/// Clears the progress bar's line.
fn progress_done() {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K");
    }
}

fn print_report(r: &ScenarioReport) {
    print!("{}", scenario_markdown(r));
}

fn picker_speed(args: &BenchArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut clock = || start.elapsed();
    for (i, &n) in args.endpoints.iter().enumerate() {
        let t = infergate_picker::speed::measure_rounds(
            n,
            infergate_picker::speed::DEFAULT_REQUESTS,
            infergate_picker::speed::DEFAULT_ROUNDS,
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
