//! `infergate bench --mode live`: the scenarios run for real — `infergate sim` replicas and the
//! router under test as processes on loopback, the workload replayed in real time
//! (`infergate-live`) — reported exactly as the virtual runs are.

use anyhow::Context;
use infergate_bench::scenario::Scenario;
use infergate_bench::suite::{ScenarioReport, POLICIES};
use infergate_live::{run_live_scenario, LiveOptions, LiveRunner, Router};
use std::time::Duration;

/// How `infergate bench` runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Simulated replicas in virtual time: every policy, thousands of times faster than real
    /// time.
    Virtual,
    /// Real processes on loopback in real time: `infergate sim` replicas behind `infergate
    /// serve` (any picker policy) or a peer router (`envoy-round-robin`, `sglang-router`,
    /// `vllm-router`, `gie-epp`, `llm-d-epp`).
    Live,
}

impl Mode {
    /// Seconds of arrivals per run when `--duration` is not given: live runs take real time.
    pub fn default_duration(self) -> u64 {
        match self {
            Mode::Virtual => 120,
            Mode::Live => 20,
        }
    }

    /// What is compared when `--policies` is not given: live, the policies that need nothing
    /// but this binary.
    pub fn default_policies(self) -> Vec<&'static str> {
        match self {
            Mode::Virtual => POLICIES.to_vec(),
            Mode::Live => vec!["round-robin", "least-request", "infergate"],
        }
    }
}

/// Live runs for one `infergate bench` invocation.
#[derive(Debug)]
pub struct Live {
    runner: LiveRunner,
}

impl Live {
    /// Live runs with this very binary as the simulator and the gateway. From here on Ctrl-C
    /// and SIGTERM stop the run in progress and tear its processes down.
    pub fn new() -> anyhow::Result<Live> {
        let exe = std::env::current_exe().context("locating the infergate binary")?;
        Ok(Live {
            runner: LiveRunner::new(LiveOptions::new(exe))?,
        })
    }

    /// Runs every router named in `policies` on `scenario` for each seed.
    pub fn run_scenario(
        &self,
        scenario: &Scenario,
        policies: &[&str],
        seeds: &[u64],
        duration: Duration,
    ) -> anyhow::Result<ScenarioReport> {
        let routers = policies
            .iter()
            .map(|p| Router::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut progress = |line: &str| eprintln!("{line}");
        Ok(run_live_scenario(
            &self.runner,
            scenario,
            &routers,
            seeds,
            duration,
            &mut progress,
        )?)
    }
}
