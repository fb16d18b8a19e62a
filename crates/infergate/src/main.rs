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
    end_quietly_when_stdout_closes();
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

/// A reader that stops early (`infergate sim --anchors --json | head`) closes the pipe. Rust
/// ignores SIGPIPE, so the next `println!` panics with "failed printing to stdout" and a
/// backtrace, where a Unix filter ends quietly: that one panic exits at once with 141, the
/// status a shell reports for a process SIGPIPE ended; every other panic reaches the default
/// hook. Output to a closed pipe has no reader to lose anything to.
fn end_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        // EPIPE on Linux and macOS; the panic message carries the error as `Display` shows it.
        const EPIPE: i32 = 32;
        const SIGPIPE: i32 = 13;
        let closed = std::io::Error::from_raw_os_error(EPIPE).to_string();
        if message.starts_with("failed printing to stdout") && message.contains(&closed) {
            std::process::exit(128 + SIGPIPE);
        }
        default(info);
    }));
}
