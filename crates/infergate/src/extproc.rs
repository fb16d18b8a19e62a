//! `infergate extproc --config F` or `--pool-name N`: infergate as Envoy's endpoint picker (a
//! gRPC ext_proc server), until Ctrl-C or SIGTERM (which drain). From a file, SIGHUP or a
//! change to the file reloads it; with `--pool-name`, a drop-in for the upstream endpoint
//! picker behind any Gateway API implementation, every change to the InferencePool N (its
//! selector, its target ports) or its InferenceModelRewrites does.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use infergate_control::discovery::MemberSource;
use infergate_control::load_config;
use infergate_extproc::{ExtProc, ExtProcOptions};
use infergate_kubernetes::cluster;
use infergate_kubernetes::inference_pool::InferencePoolSource;

use crate::serve::{namespace_flag, reload_on_sighup, shutdown_signal, WATCH_EVERY};

/// Flags of `infergate extproc`.
#[derive(Debug, Args)]
pub struct ExtProcArgs {
    /// The InferenceGatewayConfig file.
    #[arg(
        long,
        required_unless_present = "pool_name",
        conflicts_with = "pool_name"
    )]
    config: Option<PathBuf>,
    /// Pick for the InferencePool N (`inference.networking.k8s.io/v1`), watched in the
    /// Kubernetes API: its selector and target ports are the pool.
    #[arg(long, value_name = "N")]
    pool_name: Option<String>,
    /// The InferencePool's namespace (default: env NAMESPACE, else the kubeconfig's or the
    /// pod's own).
    #[arg(long, requires = "pool_name")]
    pool_namespace: Option<String>,
    /// The ext_proc gRPC listener, also serving gRPC health (default: spec.listen.address when
    /// the config sets it, else 127.0.0.1:9002).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Admin listener for /metrics, /healthz, /readyz (default: spec.listen.adminAddress, else
    /// 127.0.0.1:9090).
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
    /// A second gRPC listener serving only grpc.health.v1 (liveness, readiness), for probes
    /// kept off the ext_proc port.
    #[arg(long)]
    health_listen: Option<SocketAddr>,
    /// Seconds streams in flight may take to finish after Ctrl-C or SIGTERM.
    #[arg(long, default_value_t = 30)]
    drain_secs: u64,
    /// Explain every pick in the `envoy.lb` dynamic metadata: each candidate's total score (llm-d's
    /// `x-gateway-destination-endpoint-scores`), each scorer's part, the filters that removed
    /// endpoints and the decision time (`x-infergate-pick`). Shows the fleet's state to whoever
    /// sees Envoy's metadata (access logs, filters); off by default.
    #[arg(long)]
    emit_endpoint_scores: bool,
    #[command(flatten)]
    tracing: crate::tracing_args::TracingArgs,
}

/// Runs `infergate extproc`.
pub fn run(args: ExtProcArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (config, pool) = match (&args.config, &args.pool_name) {
            (Some(path), _) => (
                load_config(path).with_context(|| format!("in {}", path.display()))?,
                None,
            ),
            (None, Some(name)) => {
                let client = cluster::client().await.context(
                    "connecting to the Kubernetes API (kubeconfig or in-cluster service account)",
                )?;
                let namespace = namespace_flag(args.pool_namespace.clone())
                    .unwrap_or_else(|| client.default_namespace().to_owned());
                let source = InferencePoolSource::start(client, name, &namespace).await;
                let config = match source.config() {
                    Some(c) => c,
                    None => source
                        .placeholder()
                        .map_err(|e| anyhow::anyhow!("the placeholder pool: {e}"))?,
                };
                (config, Some(source))
            }
            (None, None) => anyhow::bail!("--config or --pool-name is required"),
        };
        let options = ExtProcOptions {
            listen: args.listen,
            admin_listen: args.admin_listen,
            health_listen: args.health_listen,
            config_path: args.config.clone(),
            drain_timeout: Duration::from_secs(args.drain_secs),
            emit_endpoint_scores: args.emit_endpoint_scores,
            tracing: args.tracing.settings()?,
            members: pool
                .as_ref()
                .map(|p| Arc::clone(p) as Arc<dyn MemberSource>),
            ..ExtProcOptions::default()
        };
        let server = ExtProc::bind(config, options).await?;
        let scheme = if server.tls().is_some() {
            "gRPC over TLS"
        } else {
            "plain gRPC"
        };
        println!(
            "infergate ext_proc on {} ({scheme}; admin: http://{}/metrics, /healthz, /readyz)",
            server.local_addr(),
            server.admin_addr()
        );
        if let Some(h) = server.health_addr() {
            println!("gRPC health on {h}");
        }
        if let Some(tls) = server.tls() {
            println!("TLS: certificate SHA-256 fingerprint {}", tls.fingerprint);
        }
        let handle = server.handle();
        let mut tasks = Vec::new();
        if let Some(pool) = &pool {
            tasks.push(pool.run(handle.clone()));
        }
        tasks.extend(handle.watch_config_file(WATCH_EVERY));
        if args.config.is_some() {
            tasks.push(tokio::spawn(reload_on_sighup(handle)));
        }
        server.run(shutdown_signal()).await;
        for t in tasks {
            t.abort();
        }
        Ok(())
    })
}
