//! `infergate global --config F`: the global tier, one OpenAI-compatible endpoint over member
//! gateways (`docs/global.md`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use infergate_global_gateway::GlobalGateway;

/// Flags of `infergate global`.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The GlobalGatewayConfig file.
    #[arg(long)]
    config: PathBuf,
    /// Data-plane address (overrides spec.listen).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Admin address: /metrics, /healthz, /readyz, /status/global (overrides spec.adminListen).
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
}

/// Runs `infergate global` until SIGTERM or Ctrl-C.
pub fn run(args: GlobalArgs) -> anyhow::Result<()> {
    let path = &args.config;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let config = infergate_config::global::load_global_from_str(&text)
        .with_context(|| format!("in {}", path.display()))?;
    let (runtime, _) = crate::serve::runtime().context("starting the runtime")?;
    runtime.block_on(async move {
        let tier = GlobalGateway::start(config, path.parent(), args.listen, args.admin_listen)
            .await
            .with_context(|| format!("starting the global tier of {}", path.display()))?;
        tokio::select! {
            () = tier.wait() => {}
            () = crate::serve::shutdown_signal() => {
                tracing::info!("global tier stopping");
            }
        }
        Ok(())
    })
}
