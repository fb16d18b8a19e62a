//! Fault-injection flags of `infergate sim`, turned into the server's [`Faults`].

use anyhow::{bail, Context};
use clap::Args;
use infergate_simserver::{Faults, MetricsFault, Restart};

/// Faults to inject from the start (they can also be changed at run time through
/// `POST /sim/faults`).
#[derive(Debug, Args)]
pub struct FaultArgs {
    /// Answer a share of requests with an HTTP error: `503=0.05,500=0.01,429=0.02`.
    #[arg(long, value_name = "STATUS=SHARE,…")]
    fail: Option<String>,
    /// Crash (close the port, reset connections) when request N+1 arrives.
    #[arg(long, value_name = "N")]
    crash_after_requests: Option<u64>,
    /// Crash this many seconds after start.
    #[arg(long, value_name = "SECS")]
    crash_after_secs: Option<f64>,
    /// After a crash, come back after this many seconds down...
    #[arg(long, value_name = "SECS", requires = "restart_startup_secs")]
    restart_down_secs: Option<f64>,
    /// ...and this many seconds of start-up (health answers 503 meanwhile).
    #[arg(long, value_name = "SECS", requires = "restart_down_secs")]
    restart_startup_secs: Option<f64>,
    /// Accept inference requests and never answer them.
    #[arg(long)]
    hang: bool,
    /// Step-time multiplier (thermal throttling); 1 is normal speed.
    #[arg(long, value_name = "FACTOR")]
    slowdown: Option<f64>,
    /// `/metrics` behaviour: `ok`, `stale` (frozen at start) or `hang` (never answers).
    #[arg(long, value_name = "MODE", default_value = "ok")]
    metrics_fault: String,
}

impl FaultArgs {
    /// The faults these flags describe, validated.
    pub fn to_faults(&self) -> anyhow::Result<Faults> {
        let mut faults = Faults::default();
        if let Some(spec) = &self.fail {
            for part in spec.split(',').filter(|p| !p.is_empty()) {
                let (status, share) = part
                    .split_once('=')
                    .with_context(|| format!("--fail: `{part}` is not STATUS=SHARE"))?;
                let status: u16 = status
                    .trim()
                    .parse()
                    .with_context(|| format!("--fail: bad status `{status}`"))?;
                let share: f64 = share
                    .trim()
                    .parse()
                    .with_context(|| format!("--fail: bad share `{share}`"))?;
                faults.error_rates.insert(status, share);
            }
        }
        faults.crash_after_requests = self.crash_after_requests;
        faults.crash_after_secs = self.crash_after_secs;
        if let (Some(down_secs), Some(startup_secs)) =
            (self.restart_down_secs, self.restart_startup_secs)
        {
            faults.restart = Some(Restart {
                down_secs,
                startup_secs,
            });
        }
        faults.hang = self.hang;
        if let Some(slowdown) = self.slowdown {
            faults.slowdown = slowdown;
        }
        faults.metrics = match self.metrics_fault.as_str() {
            "ok" => MetricsFault::Ok,
            "stale" => MetricsFault::Stale,
            "hang" => MetricsFault::Hang,
            other => bail!("--metrics-fault: `{other}` is not ok, stale or hang"),
        };
        faults
            .validate()
            .map_err(|e| anyhow::anyhow!("faults: {e}"))?;
        Ok(faults)
    }
}
