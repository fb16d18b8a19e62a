//! `infergate extproc --pool-name`, the drop-in for the upstream endpoint picker, against a real
//! kube-apiserver and behind a real Envoy: the InferencePool's selector and target ports are
//! the pool (one endpoint per pod and port), pods join and leave as they turn Ready or
//! Terminating, a changed selector is a full resync, an InferenceModelRewrite splits traffic,
//! and gRPC health follows the reference table.

use std::net::SocketAddr;
use std::process::Stdio;

use crate::client::{chat, post};
use crate::common::*;
use crate::envoy::{Pool, Spec};
use infergate_test_support::kube::{repo_root, ControlPlane};

fn replica(ip: &str, port: u16, model: &str) -> Running {
    replica_on(ip, port, model, &[])
}

fn endpoints(admin: u16) -> f64 {
    metric(admin, "infergate_pool_endpoints{pool=\"llama\"}")
}

#[test]
fn extproc_picks_for_an_inference_pool_watched_in_the_cluster() {
    let cp = ControlPlane::up("pool");
    cp.kubectl(&[
        "apply",
        "--server-side",
        "-f",
        repo_root().join("tests/k8s/crds").to_str().unwrap(),
    ]);
    cp.kubectl(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "-f",
        repo_root().join("tests/k8s/crds").to_str().unwrap(),
    ]);
    let ns = cp.namespace("pool");
    // Two target ports: every pod gives two endpoints, rank 0 and rank 1.
    let _replicas: Vec<Running> = [
        ("127.0.0.41", 8000),
        ("127.0.0.41", 8001),
        ("127.0.0.42", 8000),
        ("127.0.0.42", 8001),
    ]
    .iter()
    .map(|(ip, port)| replica(ip, *port, "llama"))
    .collect();
    cp.apply(
        &ns,
        "apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: llama}
spec:
  selector: {matchLabels: {app: vllm}}
  targetPorts: [{number: 8000}, {number: 8001}]
  endpointPickerRef: {name: llama-epp, port: {number: 9002}, failureMode: FailClose}
",
    );
    cp.ready_pod(&ns, "vllm-a", "app=vllm", "127.0.0.41", None);

    let dir = TempDir::new("pool-picker");
    let spawn = |[port, admin, health]: [u16; 3]| {
        let log = std::fs::File::create(dir.path().join("extproc.log")).unwrap();
        infergate()
            .args(["extproc", "--pool-name", "llama", "--pool-namespace", &ns])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .args(["--health-listen", &format!("127.0.0.1:{health}")])
            .env("KUBECONFIG", cp.kubeconfig())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    let ready = |[_, admin, _]: [u16; 3]| {
        get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    };
    let (_picker, [port, admin, _health]) =
        start_on_free_ports("extproc --pool-name to be ready", spawn, ready);
    let log = || std::fs::read_to_string(dir.path().join("extproc.log")).unwrap_or_default();
    assert_eq!(
        endpoints(admin),
        2.0,
        "one pod, two target ports: {}",
        log()
    );

    let all: Vec<SocketAddr> = [
        "127.0.0.41:8000",
        "127.0.0.41:8001",
        "127.0.0.42:8000",
        "127.0.0.42:8001",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    let envoy = Spec {
        pools: vec![Pool {
            cluster: "llama",
            base_model: None,
            endpoints: all.clone(),
        }],
        ext_proc: port,
        fail_open: false,
        tls: false,
    }
    .start(true);
    let served = |n: usize| -> Vec<String> {
        (0..n)
            .map(|i| {
                let r = post(
                    envoy.port,
                    "/v1/chat/completions",
                    &[],
                    &chat("llama", &format!("hello {i}")),
                );
                assert_eq!(r.status, 200, "{}\n{}", r.text(), log());
                r.served()
            })
            .collect()
    };
    let first = served(20);
    assert!(
        first.iter().all(|s| s.starts_with("127.0.0.41:")),
        "{first:?}"
    );

    // A second pod joins with both ranks; its Terminating leaves at once.
    cp.ready_pod(&ns, "vllm-b", "app=vllm", "127.0.0.42", Some("node-1"));
    wait_for("the second pod's two endpoints", || endpoints(admin) == 4.0);
    wait_for("traffic on the second pod", || {
        served(4).iter().any(|s| s.starts_with("127.0.0.42:"))
    });
    cp.kubectl(&["delete", "pod", "vllm-b", "-n", &ns, "--wait=false"]);
    wait_for("the Terminating pod to leave", || endpoints(admin) == 2.0);
    assert!(served(10).iter().all(|s| s.starts_with("127.0.0.41:")));

    // The active-ports annotation narrows the ranks.
    cp.kubectl(&[
        "annotate",
        "pod",
        "vllm-a",
        "-n",
        &ns,
        "llm-d.ai/active-ports=8001",
    ]);
    wait_for("rank 0 to drop out", || endpoints(admin) == 1.0);
    assert!(served(10).iter().all(|s| s == "127.0.0.41:8001"));

    // The pool's selector changes: a full resync onto the pods it now selects.
    cp.ready_pod(&ns, "vllm-c", "app=vllm-next", "127.0.0.42", None);
    cp.kubectl(&[
        "patch",
        "inferencepool",
        "llama",
        "-n",
        &ns,
        "--type=merge",
        "-p",
        r#"{"spec":{"selector":{"matchLabels":{"app":"vllm-next"}}}}"#,
    ]);
    wait_for("the resync onto the new selector", || {
        served(3).iter().all(|s| s.starts_with("127.0.0.42:"))
    });
    assert_eq!(endpoints(admin), 2.0);

    // The pool deleted: no endpoints (FailClose: Envoy refuses) and not ready.
    cp.kubectl(&["delete", "inferencepool", "llama", "-n", &ns]);
    wait_for("the pool's endpoints to clear", || endpoints(admin) == 0.0);
    wait_for("readiness to drop", || {
        get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 503"))
    });
}
