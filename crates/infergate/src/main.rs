//! `infergate`: the binary. Each subcommand wires library crates together; no decisions live
//! here.

mod bench;
mod bench_global;
mod bench_live;
mod bench_out;
mod bench_sweep;
mod bench_tables;
mod busy_poll;
mod check;
mod dashboards;
mod demo;
mod extproc;
mod global;
mod profiles;
mod serve;
mod sim;
mod sim_faults;
mod sim_serve;
mod tracing_args;
mod tune;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: a proxied request makes a few dozen short-lived
/// allocations, and under that churn glibc's per-thread heaps also grow and shrink with
/// `mprotect` calls (26 to 342 in 3 s of `infergate serve` at 1,000 req/s). See
/// docs/journal.md, "Run D".
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A GPU-aware, OpenAI-compatible inference gateway for LLM model-server fleets.
#[derive(Debug, Parser)]
#[command(name = "infergate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run simulated vLLM-compatible model servers (one, or a fleet from a file).
    Sim(Box<sim::SimArgs>),
    /// Run the gateway: an OpenAI-compatible endpoint in front of the pools of a config file.
    Serve(serve::ServeArgs),
    /// Be Envoy's endpoint picker: a gRPC ext_proc server over the pools of a config file.
    Extproc(extproc::ExtProcArgs),
    /// Be the global tier: one OpenAI-compatible endpoint over member gateways in several
    /// clusters and regions.
    Global(global::GlobalArgs),
    /// Validate a gateway config (or a GlobalGatewayConfig) and print what it means, defaults
    /// shown.
    Check(check::CheckArgs),
    /// A simulated fleet with the gateway in front of it, ready to curl.
    Demo(demo::DemoArgs),
    /// Measure routing policies side by side on simulated fleets, or the picker's speed.
    Bench(Box<bench::BenchArgs>),
    /// Search the default policy's scorer weights on a scenario, validate on held-out traffic,
    /// and print the winner as config.
    Tune(tune::TuneArgs),
    /// Write the Grafana dashboards (generated from code) as JSON files.
    Dashboards(dashboards::DashboardsArgs),
}

fn main() {
    if let Err(err) = run() {
        // The chain of causes, without a backtrace: these are users' errors, not crashes.
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a log collected from a pod or a file keeps
        // plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Sim(args) => sim::run(*args),
        Command::Serve(args) => serve::run(args),
        Command::Extproc(args) => extproc::run(args),
        Command::Global(args) => global::run(args),
        Command::Check(args) => check::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(*args),
        Command::Tune(args) => tune::run(args),
        Command::Dashboards(args) => dashboards::run(args),
    }
}
