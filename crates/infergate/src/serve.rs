//! `infergate serve --config F`: the standalone gateway, until Ctrl-C or SIGTERM (which drain);
//! SIGHUP or a change to the file reloads it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use infergate_control::{load_config, PlaneHandle};
use infergate_gateway::{Gateway, GatewayOptions};

/// Flags of `infergate serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The InferenceGatewayConfig file.
    #[arg(long)]
    config: PathBuf,
    /// Inference listener (default: spec.listen.address, else 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Admin listener for /metrics, /healthz, /readyz (default: spec.listen.adminAddress, else
    /// 127.0.0.1:9090).
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
    /// Seconds requests in flight may take to finish after Ctrl-C or SIGTERM.
    #[arg(long, default_value_t = 30)]
    drain_secs: u64,
    /// Write one JSON line per completed request to this file (arrival, model, adapter, tenant,
    /// priority, tokens, prefix hashes; never text), for `infergate bench --trace`.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
    /// Keep the data plane's threads polling for I/O instead of sleeping between events: each
    /// uses a whole CPU even when idle, and no request waits for a sleeping CPU to wake (on
    /// virtual machines a large share of the latency the gateway adds).
    #[arg(long)]
    busy_poll: bool,
}

/// How often the config file is checked for changes.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// Runs `infergate serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config =
        load_config(&args.config).with_context(|| format!("in {}", args.config.display()))?;
    let options = GatewayOptions {
        listen: args.listen,
        admin_listen: args.admin_listen,
        config_path: Some(args.config.clone()),
        drain_timeout: Duration::from_secs(args.drain_secs),
        capture: args.capture,
        ..GatewayOptions::default()
    };
    let (runtime, threads) = runtime()?;
    let busy_poll = args.busy_poll;
    runtime.block_on(async move {
        let gateway = Gateway::bind(config, options).await?;
        if busy_poll {
            crate::busy_poll::start(threads);
            println!("busy polling: {threads} data-plane thread(s), each using a whole CPU");
        }
        let scheme = if gateway.tls().is_some() { "https" } else { "http" };
        println!(
            "infergate serving {scheme}://{} (admin: http://{}/metrics, /healthz, /readyz)",
            gateway.local_addr(),
            gateway.admin_addr()
        );
        match gateway.tls() {
            Some(tls) if tls.self_signed => println!(
                "TLS: self-signed certificate made at start-up; SHA-256 fingerprint {}",
                tls.fingerprint
            ),
            Some(tls) => println!("TLS: certificate SHA-256 fingerprint {}", tls.fingerprint),
            None => println!(
                "WARNING: plain HTTP (no spec.tls): requests and credentials cross the network unencrypted"
            ),
        }
        let handle = gateway.handle();
        let watcher = handle.watch_config_file(WATCH_EVERY);
        let hup = tokio::spawn(reload_on_sighup(handle));
        gateway.run(shutdown_signal()).await;
        hup.abort();
        if let Some(w) = watcher {
            w.abort();
        }
        Ok(())
    })
}

/// The data plane's runtime. On one CPU (a container limit, `taskset`) a current-thread
/// runtime runs the accept loop and every connection on the one thread that may run: a
/// multi-thread runtime would add a worker beside the thread blocked in `block_on`, and hand
/// work between the two. With more CPUs, one worker per CPU. Returns the runtime and its
/// number of threads that run tasks.
pub fn runtime() -> std::io::Result<(tokio::runtime::Runtime, usize)> {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let runtime = if cpus == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cpus)
            .enable_all()
            .build()
    }?;
    Ok((runtime, cpus))
}

/// Reloads the config file on each SIGHUP.
pub async fn reload_on_sighup(handle: PlaneHandle) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("SIGHUP cannot be caught here; reload by changing the config file");
            return;
        };
        while hup.recv().await.is_some() {
            match handle.reload_from_file() {
                Ok(()) => tracing::info!("SIGHUP: config reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: config refused; the running config stays")
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = handle;
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down: draining what is in flight");
}
