//! `infergate extproc --config F`: infergate as Envoy's endpoint picker (a gRPC ext_proc
//! server), until Ctrl-C or SIGTERM (which drain); SIGHUP or a change to the file reloads it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use infergate_control::load_config;
use infergate_extproc::{ExtProc, ExtProcOptions};

use crate::serve::{reload_on_sighup, shutdown_signal, WATCH_EVERY};

/// Flags of `infergate extproc`.
#[derive(Debug, Args)]
pub struct ExtProcArgs {
    /// The InferenceGatewayConfig file.
    #[arg(long)]
    config: PathBuf,
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
}

/// Runs `infergate extproc`.
pub fn run(args: ExtProcArgs) -> anyhow::Result<()> {
    let config =
        load_config(&args.config).with_context(|| format!("in {}", args.config.display()))?;
    let options = ExtProcOptions {
        listen: args.listen,
        admin_listen: args.admin_listen,
        health_listen: args.health_listen,
        config_path: Some(args.config.clone()),
        drain_timeout: Duration::from_secs(args.drain_secs),
        ..ExtProcOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
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
        let watcher = handle.watch_config_file(WATCH_EVERY);
        let hup = tokio::spawn(reload_on_sighup(handle));
        server.run(shutdown_signal()).await;
        hup.abort();
        if let Some(w) = watcher {
            w.abort();
        }
        Ok(())
    })
}
