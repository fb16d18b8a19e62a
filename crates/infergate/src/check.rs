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
