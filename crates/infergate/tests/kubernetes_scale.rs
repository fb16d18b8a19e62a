//! The figures of `docs/kubernetes.md`, measured against a real kube-apiserver: how soon a pod
//! that turns Ready is routable and how soon a deleted one is not, at 10 and 1,000 matching
//! pods; what one pod's change costs the gateway in a 1,000-pod pool; and the gateway's memory
//! and CPU while it watches 1,000 pods with and without churn. A benchmark, not a check: it is
//! ignored by the test command and prints its table.
//!
//!     cargo test --release -p infergate --test kubernetes_scale -- --ignored --nocapture
//!
//! One simulated replica listens on 0.0.0.0, so every pod address on 127.0.0.0/8 reaches it;
//! the gateway scrapes each endpoint once a second (`--scrape-interval-ms 1000`, so that 1,000
//! scrapers do not take the two CPUs the measurement needs). "Routable" is the moment the
//! gateway installed the new membership (its log line `pool membership changed`, stamped in
//! microseconds): from then on every pick sees the change. At 10 pods the first request routed
//! to a new pod is measured too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use common::*;
use infergate_test_support::kube::ControlPlane;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

async fn client(cp: &ControlPlane) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn ip(i: usize) -> String {
    format!("127.1.{}.{}", i / 250, i % 250 + 1)
}

fn pod(name: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai"}]},
    }))
    .unwrap()
}

fn status(ip: &str, ready: bool) -> serde_json::Value {
    json!({"status": {"phase": "Running", "podIP": ip, "conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

/// The time of the gateway's log line saying `name` joined (or left), if it is there yet.
fn installed_at(log: &str, name: &str, joined: bool) -> Option<(SystemTime, u64)> {
    let key = if joined { "joined=" } else { "left=" };
    log.lines().find_map(|l| {
        if !l.contains("pool membership changed") {
            return None;
        }
        let part = l.split(key).nth(1)?;
        let part = part.split(" left=").next()?;
        if !part.contains(&format!("{name}-rank-0 ")) {
            return None;
        }
        let ts: Timestamp = l.split_whitespace().next()?.parse().ok()?;
        let took = l
            .split("took_us=")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some((SystemTime::from(ts), took))
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// (utime + stime) clock ticks and VmRSS in KiB of `pid`.
fn usage(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    (ticks, rss)
}

/// CPU (% of one core) and RSS (MiB) of `pid` over `window`, with `during` run meanwhile.
async fn measure_usage<F: std::future::Future<Output = ()>>(
    pid: u32,
    window: Duration,
    during: F,
) -> (f64, f64) {
    let (t0, _) = usage(pid);
    let start = Instant::now();
    tokio::select! {
        () = during => {}
        () = tokio::time::sleep(window) => {}
    }
    let (t1, rss) = usage(pid);
    let ticks_per_s = 100.0; // USER_HZ on Linux
    let cpu = (t1 - t0) as f64 / ticks_per_s / start.elapsed().as_secs_f64() * 100.0;
    (cpu, rss as f64 / 1024.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --ignored --nocapture"]
async fn discovery_latency_cost_and_footprint_at_10_and_1000_pods() {
    let mut rows = Vec::new();
    for n in [10usize, 1000] {
        let cp = ControlPlane::up(&format!("scale-{n}"));
        cp.install_crds();
        let ns = cp.namespace("scale");
        let port = free_port();
        let _replica = Running(
            infergate()
                .args([
                    "sim",
                    "--model",
                    "instant",
                    "--host",
                    "0.0.0.0",
                    "--port",
                    &port.to_string(),
                ])
                .args(["--served-model-name", "llama"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for("the replica", || {
            get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        });
        cp.apply(
            &ns,
            &format!(
                "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
metadata: {{name: scale}}
spec:
  bbr: {{enabled: true}}
  schedulers:
    - name: llama
      modelName: llama
      modelSelector: {{matchLabels: {{app: vllm}}}}
      targetPort: {port}
"
            ),
        );
        let kube = client(&cp).await;
        let pods: Api<Pod> = Api::namespaced(kube, &ns);
        let started = Instant::now();
        for i in 0..n {
            pods.create(&PostParams::default(), &pod(&format!("pod-{i}"), "vllm"))
                .await
                .unwrap();
            pods.patch_status(
                &format!("pod-{i}"),
                &PatchParams::default(),
                &Patch::Merge(status(&ip(i), true)),
            )
            .await
            .unwrap();
        }
        let setup = started.elapsed();
        let log_path = cp.dir().join("gateway.log");
        let (gateway, lport, admin) = serve_in_cluster(
            &[
                "--from-cluster",
                "scale",
                "--namespace",
                &ns,
                "--scrape-interval-ms",
                "1000",
            ],
            &cp.kubeconfig(),
            "gateway-0",
            &log_path,
        );
        assert_eq!(
            metric(admin, "infergate_pool_endpoints{pool=\"llama\"}"),
            n as f64
        );
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

        // Ready → routable, and deleted → not, 20 times each.
        let (mut joins, mut leaves, mut costs, mut first_routed) = (vec![], vec![], vec![], vec![]);
        for k in 0..20 {
            let name = format!("probe-{k}");
            let addr = ip(n + k);
            pods.create(&PostParams::default(), &pod(&name, "vllm"))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            let t0 = SystemTime::now();
            pods.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(status(&addr, true)),
            )
            .await
            .unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            let (at, took) = loop {
                if let Some(found) = installed_at(&log(), &name, true) {
                    break found;
                }
                assert!(Instant::now() < deadline, "{name} never joined");
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            joins.push(ms(at.duration_since(t0).unwrap_or_default()));
            costs.push(took as f64);
            if n <= 10 {
                // The first request that lands on it.
                let series = format!("infergate_routing_decisions_total{{pool=\"llama\",endpoint=\"{addr}:{port}\"}}");
                let body = r#"{"model": "llama", "prompt": "hi", "max_tokens": 1}"#;
                while metric(admin, &series) == 0.0 {
                    http(
                        &format!("127.0.0.1:{lport}"),
                        "POST",
                        "/v1/completions",
                        body,
                        Duration::from_secs(5),
                    );
                    assert!(
                        Instant::now() < deadline + Duration::from_secs(20),
                        "never routed to {name}"
                    );
                }
                first_routed.push(ms(SystemTime::now().duration_since(t0).unwrap_or_default()));
            }
            let t0 = SystemTime::now();
            pods.delete(&name, &Default::default()).await.unwrap();
            let (at, took) = loop {
                if let Some(found) = installed_at(&log(), &name, false) {
                    break found;
                }
                assert!(
                    Instant::now() < deadline + Duration::from_secs(40),
                    "{name} never left"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            leaves.push(ms(at.duration_since(t0).unwrap_or_default()));
            costs.push(took as f64);
        }

        // Footprint: idle, then with churn (10 pod readiness flips a second).
        let pid = gateway.0.id();
        let (cpu_idle, rss_idle) =
            measure_usage(pid, Duration::from_secs(20), std::future::pending()).await;
        let churn = async {
            let mut flip = false;
            loop {
                for j in 0..10 {
                    let i = j * (n / 10).max(1) % n;
                    pods.patch_status(
                        &format!("pod-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(status(&ip(i), flip)),
                    )
                    .await
                    .unwrap();
                }
                flip = !flip;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        };
        let (cpu_churn, rss_churn) = measure_usage(pid, Duration::from_secs(20), churn).await;
        rows.push(format!(
            "| {n} | {:.1} / {:.1} | {:.1} / {:.1} | {} | {:.0} / {:.0} | {:.1} % / {:.0} MiB | {:.1} % / {:.0} MiB | {:.0} s |",
            percentile(&mut joins.clone(), 0.5),
            percentile(&mut joins, 0.95),
            percentile(&mut leaves.clone(), 0.5),
            percentile(&mut leaves, 0.95),
            if first_routed.is_empty() {
                "—".to_owned()
            } else {
                format!("{:.1} / {:.1}", percentile(&mut first_routed.clone(), 0.5), percentile(&mut first_routed, 0.95))
            },
            percentile(&mut costs.clone(), 0.5),
            percentile(&mut costs, 0.95),
            cpu_idle,
            rss_idle,
            cpu_churn,
            rss_churn,
            setup.as_secs_f64(),
        ));
    }
    println!("| pods | Ready → routable, ms p50 / p95 | deleted → not routable, ms p50 / p95 | Ready → first request routed, ms p50 / p95 | one change installed, µs p50 / p95 | idle: CPU / RSS | 10 flips/s: CPU / RSS | pods created in |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
