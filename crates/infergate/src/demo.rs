//! `infergate demo`: a simulated fleet in this process, on free loopback ports, with the gateway
//! in front of it — two pools (Llama-3.1-8B on H100 and A10G replicas with LoRA adapters, and
//! Qwen3-32B), ready to curl.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use infergate_engine::{EngineConfig, Profile};
use infergate_gateway::{Gateway, GatewayOptions};
use infergate_simserver::ReplicaSpec;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Flags of `infergate demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Gateway listener.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Admin listener (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9090")]
    admin_listen: SocketAddr,
    /// Simulated seconds per wall-clock second (1: real GPU speed).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Write one JSON line per completed request to this file, for `infergate bench --trace`.
    #[arg(long, value_name = "FILE")]
    capture: Option<std::path::PathBuf>,
    #[command(flatten)]
    tracing: crate::tracing_args::TracingArgs,
}

const LLAMA: &str = "meta-llama/Llama-3.1-8B-Instruct";
const QWEN: &str = "Qwen/Qwen3-32B";
const ADAPTERS: [&str; 3] = ["sql-lora", "chat-lora", "code-lora"];

/// One replica of the demo fleet.
struct Member {
    app: &'static str,
    gpu: &'static str,
    spec: ReplicaSpec,
}

fn fleet(time_scale: f64) -> anyhow::Result<Vec<Member>> {
    let mut out = Vec::new();
    for (i, gpu) in ["h100", "h100", "a10g", "a10g"].into_iter().enumerate() {
        let mut engine = EngineConfig::new(Profile::lookup("llama-3.1-8b", gpu, 1)?);
        engine.max_loras = 4;
        engine.max_cpu_loras = 8;
        engine.seed = i as u64 + 1;
        let mut spec = ReplicaSpec::new(engine);
        spec.served_model_name = LLAMA.into();
        spec.lora_adapters = ADAPTERS.iter().map(|a| (*a).to_owned()).collect();
        spec.time_scale = time_scale;
        spec.seed = i as u64 + 1;
        out.push(Member {
            app: "vllm-llama",
            gpu,
            spec,
        });
    }
    for i in 0..2u64 {
        let mut engine = EngineConfig::new(Profile::lookup("qwen3-32b", "h100", 2)?);
        engine.seed = 100 + i;
        let mut spec = ReplicaSpec::new(engine);
        spec.served_model_name = QWEN.into();
        spec.time_scale = time_scale;
        spec.seed = 100 + i;
        out.push(Member {
            app: "vllm-qwen",
            gpu: "h100-tp2",
            spec,
        });
    }
    for m in &out {
        m.spec.validate()?;
    }
    Ok(out)
}

/// The gateway config over the fleet's addresses.
fn config_yaml(members: &[(&Member, SocketAddr)]) -> String {
    let mut y = format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
metadata: {{name: demo}}
spec:
  bbr: {{enabled: true}}
  schedulers:
    - name: llama-8b
      modelName: {LLAMA}
      modelSelector: {{matchLabels: {{app: vllm-llama}}}}
      loraAdapters: [{}]
      weights: {{loraAffinity: 1}}
    - name: qwen3-32b
      modelName: {QWEN}
      modelSelector: {{matchLabels: {{app: vllm-qwen}}}}
  endpoints:
",
        ADAPTERS.join(", ")
    );
    for (m, addr) in members {
        // Writing to a String cannot fail.
        let _ = writeln!(
            y,
            "    - address: {addr}\n      labels: {{app: {}, gpu: {}}}",
            m.app, m.gpu
        );
    }
    y
}

/// Runs `infergate demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let members = fleet(args.time_scale)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut bound = Vec::with_capacity(members.len());
        for m in &members {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .context("binding a replica")?;
            let addr = listener.local_addr()?;
            bound.push((m, listener, addr));
        }
        let yaml = config_yaml(&bound.iter().map(|(m, _, a)| (*m, *a)).collect::<Vec<_>>());
        let config = infergate_config::gateway::load_from_str(&yaml)?.resolve()?;
        // The gateway's own listeners first: a port already taken fails the demo before any
        // simulated replica starts serving (the replicas' sockets are bound, but idle until
        // the fleet is spawned below).
        let options = GatewayOptions {
            listen: Some(args.listen),
            admin_listen: Some(args.admin_listen),
            drain_timeout: Duration::from_secs(10),
            capture: args.capture,
            // The demo shows why each request went where it went (the headers of every answer).
            emit_endpoint_scores: true,
            tracing: args.tracing.settings()?,
            ..GatewayOptions::default()
        };
        let gateway = Gateway::bind(config, options).await?;
        let (stop, stopped) = watch::channel(false);
        let replicas = bound
            .into_iter()
            .map(|(m, l, _)| (m.spec.clone(), l))
            .collect();
        let fleet = tokio::spawn(infergate_simserver::serve_fleet(replicas, async move {
            let mut stopped = stopped;
            let _ = stopped.wait_for(|&s| s).await;
        }));
        let handle = gateway.handle();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !handle.is_ready() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        print_banner(gateway.local_addr(), gateway.admin_addr());
        gateway.run(crate::serve::shutdown_signal()).await;
        let _ = stop.send(true);
        match fleet.await {
            Ok(r) => r.context("simulated fleet")?,
            Err(e) => anyhow::bail!("simulated fleet: {e}"),
        }
        Ok(())
    })
}

fn print_banner(gateway: SocketAddr, admin: SocketAddr) {
    println!("infergate demo: a simulated GPU fleet behind the gateway");
    println!("  gateway  http://{gateway}");
    println!("  page     http://{admin}/   (each pool's endpoints as the picker sees them, live)");
    println!("  metrics  http://{admin}/metrics   (health: /healthz, /readyz)");
    println!(
        "  models   {LLAMA}  — 2× H100 + 2× A10G; adapters: {}",
        ADAPTERS.join(", ")
    );
    println!("           {QWEN}  — 2× H100 (TP2)");
    println!("try:");
    println!(
        "  curl -N http://{gateway}/v1/chat/completions -H 'content-type: application/json' -d '{{\"model\": \"{LLAMA}\", \"stream\": true, \"max_tokens\": 32, \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'"
    );
    println!("  curl -s http://{gateway}/v1/models");
    println!("  curl -s http://{admin}/metrics | grep ^infergate_requests");
    println!("  (every answer says why its endpoint was picked: header x-infergate-pick)");
    println!("Ctrl-C drains and stops.");
}
