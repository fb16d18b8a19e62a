//! `infergate check --config F`: the config resolved, defaults shown, and what a standalone
//! gateway would make of it. A config that does not load is an error naming the field.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use infergate_control::{check_supported, policy::pool_policy, GatewayError};

/// Flags of `infergate check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The InferenceGatewayConfig (or GlobalGatewayConfig) file.
    #[arg(long)]
    config: PathBuf,
    /// For a GlobalGatewayConfig: also read every member's status once and report the ones
    /// that cannot be read and the models whose members define them differently (drift). Exits
    /// with an error on drift.
    #[arg(long)]
    pull_members: bool,
}

/// Runs `infergate check`.
pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let path = &args.config;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if infergate_config::global::is_global_config(&text) {
        let global = infergate_config::global::load_global_from_str(&text)
            .with_context(|| format!("in {}", path.display()))?;
        print!("{global}");
        if args.pull_members {
            return pull_members(&global);
        }
        return Ok(());
    }
    let config = infergate_config::gateway::load_from_str(&text)
        .with_context(|| format!("in {}", path.display()))?;
    let resolved = config
        .resolve()
        .with_context(|| format!("in {}", path.display()))?;
    print!("{resolved}");
    // Each pool's picker must build (a pickerConfigFile that does not exist or does not parse
    // is an error here, not at start-up).
    let mut refused = Vec::new();
    for pool in &resolved.pools {
        match pool_policy(pool, path.parent(), None) {
            Ok(_) => {}
            Err(e @ GatewayError::Unsupported { .. }) => refused.push(e.to_string()),
            Err(e) => return Err(e).with_context(|| format!("in {}", path.display())),
        }
    }
    match check_supported(&resolved) {
        Ok(notes) => {
            for n in notes {
                println!("note (infergate serve): {n}");
            }
        }
        Err(e) => refused.push(e.to_string()),
    }
    for r in refused {
        println!("note: `infergate serve` would refuse this config: {r}");
    }
    Ok(())
}

/// `--pull-members`: every member's status read once, and the drift among them.
fn pull_members(global: &infergate_config::global::ResolvedGlobal) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Twice a pull's own timeout: a one-off read from an operator's machine may be farther.
    let timeout = global.status.timeout.value * 2;
    let (read, drift) = runtime.block_on(infergate_global_gateway::read_members(global, timeout));
    println!();
    println!("members' status");
    for (name, r) in &read {
        match r {
            Ok(s) => {
                let pools: Vec<String> = s
                    .pools
                    .iter()
                    .map(|p| format!("{} ({}/{} ready)", p.name, p.ready_endpoints, p.endpoints))
                    .collect();
                println!(
                    "  {name:<16}  read: sequence {}, pools {}",
                    s.sequence,
                    pools.join(", ")
                );
            }
            Err(e) => println!("  {name:<16}  not read: {e}"),
        }
    }
    if drift.is_empty() {
        println!("  no drift: every model is defined alike by the members that serve it");
        return Ok(());
    }
    for d in &drift {
        println!("  drift: {}", d.describe());
    }
    anyhow::bail!(
        "{} model(s) defined differently across members",
        drift.len()
    )
}
