//! `infergate serve --config F` or `--from-cluster NAME`: the gateway, until Ctrl-C or SIGTERM
//! (which drain). From a file, SIGHUP or a change to the file reloads it; from the cluster,
//! every change to the resource or its adapter maps does. Under Kubernetes discovery (a config
//! without `spec.endpoints`) the pods are watched through the ambient kubeconfig or the pod's
//! service account.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use infergate_control::discovery::MemberSource;
use infergate_control::{load_config, PlaneHandle, ScrapeSettings};
use infergate_gateway::{Gateway, GatewayOptions};
use infergate_kubernetes::cluster;
use infergate_kubernetes::{Cluster, ClusterOptions, PodDiscovery};

/// Flags of `infergate serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The InferenceGatewayConfig file.
    #[arg(
        long,
        required_unless_present = "from_cluster",
        conflicts_with = "from_cluster"
    )]
    config: Option<PathBuf>,
    /// Read the InferenceGatewayConfig custom resource NAME from the Kubernetes API instead of a
    /// file, reload on each change to it, and write its status.
    #[arg(long, value_name = "NAME")]
    from_cluster: Option<String>,
    /// The namespace of `--from-cluster`'s resource, and of the pods when the config names
    /// none (default: env NAMESPACE, else the kubeconfig's or the pod's own).
    #[arg(long)]
    namespace: Option<String>,
    /// The API group of `--from-cluster`'s resource (default: the first of
    /// inference.sagemaker.aws.amazon.com and infergate.dev that has it).
    #[arg(long, requires = "from_cluster")]
    group: Option<String>,
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
    /// Milliseconds between two scrapes of one endpoint's /metrics (each wait jittered by
    /// ±20 %). Every endpoint is scraped this often, so a pool of thousands of pods may want
    /// more than the default.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    scrape_interval_ms: u64,
    /// Write one JSON line per completed request to this file (arrival, model, adapter, tenant,
    /// priority, tokens, prefix hashes; never text), for `infergate bench --trace`.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
    /// Keep the data plane's threads polling for I/O instead of sleeping between events: each
    /// uses a whole CPU even when idle, and no request waits for a sleeping CPU to wake (on
    /// virtual machines a large share of the latency the gateway adds).
    #[arg(long)]
    busy_poll: bool,
    /// Explain every pick in response headers: each candidate's total score (llm-d's
    /// `x-gateway-destination-endpoint-scores`), each scorer's part, the filters that removed
    /// endpoints and the decision time (`x-infergate-pick`). Shows the fleet's state to whoever
    /// sees the responses; off by default.
    #[arg(long)]
    emit_endpoint_scores: bool,
    #[command(flatten)]
    tracing: crate::tracing_args::TracingArgs,
}

/// How often the config file is checked for changes.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// This replica's name in leases and Events: env POD_NAME (the downward API), else the host
/// name and process id.
pub fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "infergate".to_owned());
            format!("{host}-{}", std::process::id())
        })
}

/// A namespace flag, else env NAMESPACE (the downward API's, in a pod).
pub fn namespace_flag(flag: Option<String>) -> Option<String> {
    flag.or_else(|| std::env::var("NAMESPACE").ok().filter(|n| !n.is_empty()))
}

/// Where the config comes from, opened: the config, the member source under Kubernetes
/// discovery, and, from the cluster, what keeps the gateway in step with it.
struct Opened {
    config: infergate_config::gateway::ResolvedGateway,
    pods: Option<Arc<PodDiscovery>>,
    cluster: Option<Cluster>,
}

async fn open(args: &ServeArgs) -> anyhow::Result<Opened> {
    let namespace = namespace_flag(args.namespace.clone());
    if let Some(name) = &args.from_cluster {
        let client = cluster::client().await.context(
            "connecting to the Kubernetes API (kubeconfig or in-cluster service account)",
        )?;
        let (cluster, config) = Cluster::open(
            client,
            ClusterOptions {
                name: name.clone(),
                namespace,
                group: args.group.clone(),
                identity: identity(),
            },
        )
        .await
        .context("reading the InferenceGatewayConfig from the cluster")?;
        return Ok(Opened {
            config,
            pods: None,
            cluster: Some(cluster),
        });
    }
    let path = args
        .config
        .as_ref()
        .context("--config or --from-cluster is required")?;
    let config = load_config(path).with_context(|| format!("in {}", path.display()))?;
    let pods = if cluster::pod_namespace(&config, "").is_some() {
        let client = cluster::client().await.context(
            "spec.discovery is Kubernetes (no spec.endpoints): connecting to the Kubernetes API (kubeconfig or in-cluster service account)",
        )?;
        let fallback = namespace.unwrap_or_else(|| client.default_namespace().to_owned());
        cluster::start_pods(&client, &config, &fallback).await
    } else {
        None
    };
    Ok(Opened {
        config,
        pods,
        cluster: None,
    })
}

/// Runs `infergate serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (runtime, threads) = runtime()?;
    let busy_poll = args.busy_poll;
    runtime.block_on(async move {
        let opened = open(&args).await?;
        let members = match (&opened.cluster, &opened.pods) {
            (Some(c), _) => c.members(),
            (None, Some(p)) => Some(Arc::clone(p) as Arc<dyn MemberSource>),
            (None, None) => None,
        };
        let picker_configs = opened.cluster.as_ref().map(Cluster::picker_configs);
        let options = GatewayOptions {
            picker_configs,
            listen: args.listen,
            admin_listen: args.admin_listen,
            config_path: args.config.clone(),
            drain_timeout: Duration::from_secs(args.drain_secs),
            capture: args.capture,
            emit_endpoint_scores: args.emit_endpoint_scores,
            tracing: args.tracing.settings()?,
            members,
            scrape: ScrapeSettings {
                interval: Duration::from_millis(args.scrape_interval_ms),
                ..ScrapeSettings::default()
            },
            ..GatewayOptions::default()
        };
        let gateway = Gateway::bind(opened.config, options).await?;
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
        let mut tasks = Vec::new();
        let election = opened.cluster.as_ref().map(Cluster::election);
        if let Some(cluster) = opened.cluster {
            tasks.push(cluster.run(handle.clone()));
        }
        if let Some(pods) = &opened.pods {
            tasks.push(pods.attach(handle.clone()));
        }
        tasks.extend(handle.watch_config_file(WATCH_EVERY));
        if args.config.is_some() {
            tasks.push(tokio::spawn(reload_on_sighup(handle)));
        }
        // On SIGTERM the lease goes first, so a standby writes the status while this replica
        // drains.
        let shutdown = async {
            shutdown_signal().await;
            if let Some(election) = &election {
                election.release().await;
            }
        };
        gateway.run(shutdown).await;
        for t in tasks {
            t.abort();
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
