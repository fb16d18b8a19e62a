//! `infergate`: the binary. Each subcommand wires library crates together; no decisions live
//! here.

mod profiles;
mod sim;
mod sim_faults;
mod sim_serve;

use clap::{Parser, Subcommand};

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
        .init();
    match Cli::parse().command {
        Command::Sim(args) => sim::run(*args),
    }
}
