//! infergate against a real Kubernetes control plane (etcd and kube-apiserver on loopback,
//! `tests/k8s/control-plane`): the seed's `InferenceGatewayConfig` applied verbatim with
//! kubectl, Pods made Ready through the status subresource at 127.0.0.x where simulated
//! replicas listen, and real requests routed through real discovery as pods come, go, turn
//! Terminating, get relabelled, and as the resource and its adapter maps are edited.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use infergate_test_support::kube::ControlPlane;

/// The seed's config, byte for byte as the seed document has it.
const SEED: &str = r#"apiVersion: inference.sagemaker.aws.amazon.com/v1alpha1
kind: InferenceGatewayConfig
metadata:
  name: my-gateway
spec:
  tls: {}
  bbr:
    enabled: true
  schedulers:
    - name: llama-70b
      modelName: "llama-3.1-70b"
      modelSelector:
        matchLabels:
          app: vllm-llama
      targetPort: 8000
      scheduler: llm-d
"#;

/// A simulated replica serving `model` at `ip:port` (the instant profile), with LoRA slots and
/// the adapter `sql-lora` loaded.
fn replica_at(ip: &str, port: u16, model: &str) -> Running {
    replica_on(ip, port, model, &["--max-loras", "2", "--lora", "sql-lora"])
}

/// `infergate serve` with `args` against the control plane, on free ports; returns once
/// `/readyz` answers 200: the process, its listener's port and its admin port. Its log goes to
/// `log` in the control plane's directory.
fn serve(cp: &ControlPlane, args: &[&str], log: &str) -> (Running, u16, u16) {
    serve_in_cluster(args, &cp.kubeconfig(), "gateway-0", &cp.dir().join(log))
}

/// The seed's curl, over the self-signed TLS that `tls: {}` asks for: the status and body.
fn seed_curl(port: u16, model: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10"])
        .arg(format!("https://127.0.0.1:{port}/v1/chat/completions"))
        .args(["-H", "Content-Type: application/json"])
        .args([
            "-d",
            &format!(
                r#"{{"model": "{model}", "messages": [{{"role": "user", "content": "Hello"}}]}}"#
            ),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Waits up to 30 s for `ok`, saying `what` and the last `detail` when it never holds.
fn wait_until(what: &str, mut ok: impl FnMut() -> bool, mut detail: impl FnMut() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}: {}", detail());
}

fn endpoints(admin: u16, pool: &str) -> f64 {
    metric(
        admin,
        &format!("infergate_pool_endpoints{{pool=\"{pool}\"}}"),
    )
}

fn sent_to(admin: u16, address: &str) -> f64 {
    metric(
        admin,
        &format!("infergate_routing_decisions_total{{pool=\"llama-70b\",endpoint=\"{address}\""),
    )
}

/// Sends `n` requests for `model`, each of which must be answered 200.
fn all_answered(port: u16, model: &str, n: usize) {
    for i in 0..n {
        let (code, body) = seed_curl(port, model);
        assert_eq!(code, 200, "request {i} for {model}: {body}");
    }
}

#[test]
fn the_seed_config_from_the_cluster_routes_to_labelled_pods_and_follows_every_change() {
    let cp = ControlPlane::up("seed");
    cp.install_crds();
    let ns = cp.namespace("seed");
    // The seed's resource, applied verbatim.
    cp.apply(&ns, SEED);
    let _replicas: Vec<Running> = (11..=14)
        .map(|i| replica_at(&format!("127.0.0.{i}"), 8000, "llama-3.1-70b"))
        .collect();
    cp.ready_pod(&ns, "vllm-a", "app=vllm-llama", "127.0.0.11", None);
    cp.ready_pod(&ns, "vllm-b", "app=vllm-llama", "127.0.0.12", None);

    let (_gateway, port, admin) = serve(
        &cp,
        &["--from-cluster", "my-gateway", "--namespace", &ns],
        "gateway.log",
    );
    let log = || std::fs::read_to_string(cp.dir().join("gateway.log")).unwrap_or_default();

    // The seed's curl is answered, and `kubectl get igwc` shows the resource Ready.
    let (code, body) = seed_curl(port, "llama-3.1-70b");
    assert_eq!(code, 200, "{body}\n{}", log());
    assert!(body.contains("\"choices\""), "{body}");
    wait_until(
        "kubectl get igwc to show Ready",
        || {
            let table = cp.kubectl(&["get", "igwc", "-n", &ns]);
            table.lines().nth(1).is_some_and(|row| {
                let cols: Vec<&str> = row.split_whitespace().collect();
                cols.len() >= 5 && cols[..5] == ["my-gateway", "True", "True", "1", "2"]
            })
        },
        || cp.kubectl(&["get", "igwc", "-n", &ns]),
    );
    let status = |path: &str| cp.jsonpath(&ns, "igwc", "my-gateway", path);
    assert_eq!(status("{.status.observedGeneration}"), "1");
    assert_eq!(status("{.status.schedulers[0].rolloutState}"), "Available");
    assert_eq!(status("{.status.schedulers[0].endpoints}"), "2");

    // Both pods take traffic.
    all_answered(port, "llama-3.1-70b", 12);
    assert!(sent_to(admin, "127.0.0.11:8000") > 0.0 && sent_to(admin, "127.0.0.12:8000") > 0.0);

    // Scale up: a third pod joins and is routed to.
    cp.ready_pod(&ns, "vllm-c", "app=vllm-llama", "127.0.0.13", None);
    wait_until(
        "a third endpoint",
        || endpoints(admin, "llama-70b") == 3.0,
        log,
    );
    wait_until(
        "a request routed to the new pod",
        || {
            all_answered(port, "llama-3.1-70b", 3);
            sent_to(admin, "127.0.0.13:8000") > 0.0
        },
        log,
    );

    // Scale down: a deleted pod leaves.
    cp.kubectl(&["delete", "pod", "vllm-c", "-n", &ns]);
    wait_until(
        "the deleted pod to leave",
        || endpoints(admin, "llama-70b") == 2.0,
        log,
    );

    // A Terminating pod (scheduled on a node, so the delete waits for its kubelet) leaves at
    // once, while it still exists.
    cp.ready_pod(
        &ns,
        "vllm-d",
        "app=vllm-llama",
        "127.0.0.14",
        Some("node-1"),
    );
    wait_until(
        "the fourth pod to join",
        || endpoints(admin, "llama-70b") == 3.0,
        log,
    );
    cp.kubectl(&["delete", "pod", "vllm-d", "-n", &ns, "--wait=false"]);
    wait_until(
        "the Terminating pod to leave",
        || endpoints(admin, "llama-70b") == 2.0,
        log,
    );
    assert!(
        !cp.jsonpath(&ns, "pod", "vllm-d", "{.metadata.deletionTimestamp}")
            .is_empty(),
        "the pod is still there, Terminating"
    );
    let before = sent_to(admin, "127.0.0.14:8000");
    all_answered(port, "llama-3.1-70b", 10);
    assert_eq!(
        sent_to(admin, "127.0.0.14:8000"),
        before,
        "nothing goes to a Terminating pod"
    );

    // A relabelled pod leaves its pool and comes back with its label; a pod that turns
    // unready leaves too.
    cp.kubectl(&[
        "label",
        "pod",
        "vllm-b",
        "-n",
        &ns,
        "app=other",
        "--overwrite",
    ]);
    wait_until(
        "the relabelled pod to leave",
        || endpoints(admin, "llama-70b") == 1.0,
        log,
    );
    cp.kubectl(&[
        "label",
        "pod",
        "vllm-b",
        "-n",
        &ns,
        "app=vllm-llama",
        "--overwrite",
    ]);
    wait_until(
        "the pod to come back",
        || endpoints(admin, "llama-70b") == 2.0,
        log,
    );
    cp.set_pod_status(&ns, "vllm-b", "127.0.0.12", false);
    wait_until(
        "the unready pod to leave",
        || endpoints(admin, "llama-70b") == 1.0,
        log,
    );
    cp.set_pod_status(&ns, "vllm-b", "127.0.0.12", true);
    wait_until(
        "the ready pod to return",
        || endpoints(admin, "llama-70b") == 2.0,
        log,
    );

    // The bbr-managed ConfigMap: an adapter routes to its base model's pool once the map
    // names it, and no longer once the map is gone.
    let (code, _) = seed_curl(port, "sql-lora");
    assert_eq!(code, 404, "an adapter no map names is not a model");
    cp.apply(
        &ns,
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: llama-adapters
  labels: {inference.networking.k8s.io/bbr-managed: "true"}
data:
  baseModel: llama-3.1-70b
  adapters: |
    - sql-lora
"#,
    );
    wait_until(
        "the adapter to route",
        || seed_curl(port, "sql-lora").0 == 200,
        log,
    );
    cp.kubectl(&[
        "label",
        "configmap",
        "llama-adapters",
        "-n",
        &ns,
        "inference.networking.k8s.io/bbr-managed-",
    ]);
    wait_until(
        "the unlabelled map's adapter to go",
        || seed_curl(port, "sql-lora").0 == 404,
        log,
    );

    // The resource edited: new weights and a second scheduler are reloaded without a
    // failed request.
    let _qwen = replica_at("127.0.0.15", 8000, "qwen3-32b");
    cp.ready_pod(&ns, "qwen-a", "app=vllm-qwen", "127.0.0.15", None);
    let edited = SEED.replace(
        "      scheduler: llm-d\n",
        "      scheduler: llm-d\n      weights: {queue: 3, kvCache: 1, prefix: 2}\n",
    ) + r#"    - name: qwen
      modelName: qwen3-32b
      modelSelector:
        matchLabels:
          app: vllm-qwen
      targetPort: 8000
"#;
    cp.apply(&ns, &edited);
    wait_until(
        "generation 2 to be accepted",
        || status("{.status.conditions[?(@.type==\"Accepted\")].observedGeneration}") == "2",
        || status("{.status}"),
    );
    assert_eq!(
        status("{.status.conditions[?(@.type==\"Accepted\")].status}"),
        "True"
    );
    wait_until(
        "the second scheduler to answer",
        || seed_curl(port, "qwen3-32b").0 == 200,
        log,
    );
    wait_until(
        "two schedulers in kubectl get igwc",
        || status("{.status.schedulerCount}") == "2" && status("{.status.endpointCount}") == "3",
        || status("{.status}"),
    );

    // A scheduler's configMapRef: its EndpointPickerConfig read from the ConfigMap; an edit to
    // the ConfigMap that breaks it is refused, naming it, and the running picker stays.
    cp.apply(
        &ns,
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: qwen-picker}
data:
  default-plugins.yaml: |
    apiVersion: inference.networking.x-k8s.io/v1alpha1
    kind: EndpointPickerConfig
    plugins:
    - type: queue-scorer
    - type: max-score-picker
    schedulingProfiles:
    - name: default
      plugins:
      - pluginRef: queue-scorer
        weight: 1
      - pluginRef: max-score-picker
"#,
    );
    let with_ref = edited.replace(
        "          app: vllm-qwen
      targetPort: 8000
",
        "          app: vllm-qwen
      targetPort: 8000
      configMapRef: {name: qwen-picker}
",
    );
    assert_ne!(with_ref, edited);
    cp.apply(&ns, &with_ref);
    wait_until(
        "generation 3 (configMapRef) to be accepted",
        || {
            status("{.status.conditions[?(@.type==\"Accepted\")].observedGeneration}") == "3"
                && status("{.status.conditions[?(@.type==\"Accepted\")].status}") == "True"
        },
        || status("{.status}"),
    );
    all_answered(port, "qwen3-32b", 3);
    cp.kubectl(&[
        "patch", "configmap", "qwen-picker", "-n", &ns, "--type=merge", "-p",
        r#"{"data":{"default-plugins.yaml":"apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: no-such-scorer\n"}}"#,
    ]);
    wait_until(
        "the broken picker config to be refused",
        || status("{.status.conditions[?(@.type==\"Accepted\")].status}") == "False",
        || status("{.status}"),
    );
    let message = status("{.status.conditions[?(@.type==\"Accepted\")].message}");
    assert!(
        message.contains("configMapRef qwen-picker") && message.contains("no-such-scorer"),
        "{message}"
    );
    all_answered(port, "qwen3-32b", 3);
    cp.apply(&ns, &edited);
    wait_until(
        "generation 4 (weights again) to be accepted",
        || {
            status("{.status.conditions[?(@.type==\"Accepted\")].observedGeneration}") == "4"
                && status("{.status.conditions[?(@.type==\"Accepted\")].status}") == "True"
        },
        || status("{.status}"),
    );

    // An invalid field: Accepted=False naming it, an Event, and the old config keeps serving.
    let invalid = edited.replace("weights: {queue: 3,", "weights: {bogus: 1, queue: 3,");
    cp.apply(&ns, &invalid);
    wait_until(
        "generation 5 to be refused",
        || {
            status("{.status.observedGeneration}") == "5"
                && status("{.status.conditions[?(@.type==\"Accepted\")].status}") == "False"
        },
        || status("{.status}"),
    );
    let message = status("{.status.conditions[?(@.type==\"Accepted\")].message}");
    assert!(
        message.contains("spec.schedulers[0].weights") && message.contains("bogus"),
        "{message}"
    );
    assert!(message.contains("generation 4 keeps serving"), "{message}");
    assert_eq!(status("{.status.observedGeneration}"), "5");
    let events = cp.kubectl(&[
        "get",
        "events",
        "-n",
        &ns,
        "--field-selector",
        "reason=ConfigRejected",
    ]);
    assert!(events.contains("bogus"), "{events}");
    all_answered(port, "llama-3.1-70b", 5);
    all_answered(port, "qwen3-32b", 5);
    assert_eq!(
        server_errors(admin),
        0.0,
        "no request failed through any of it"
    );
}

/// Requests answered 5xx, over every model, pool and endpoint.
fn server_errors(admin: u16) -> f64 {
    get(admin, "/metrics")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("infergate_requests_total{") && l.contains("status=\"5"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn the_seed_file_with_kubernetes_discovery_runs_verbatim() {
    let cp = ControlPlane::up("seed-file");
    let ns = "default";
    let dir = TempDir::new("seed-file");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, SEED).unwrap();
    let _replica = replica_at("127.0.0.21", 8000, "llama-3.1-70b");
    cp.ready_pod(ns, "vllm-a", "app=vllm-llama", "127.0.0.21", None);
    let (_gateway, port, admin) = serve(&cp, &["--config", file.to_str().unwrap()], "file.log");
    let (code, body) = seed_curl(port, "llama-3.1-70b");
    assert_eq!(code, 200, "{body}");
    assert_eq!(endpoints(admin, "llama-70b"), 1.0);
    assert_eq!(metric(admin, "infergate_discovery_synced"), 1.0);
}

/// A kubeconfig for `account` in `namespace`, with a token from the TokenRequest API: the
/// identity a pod running as that ServiceAccount would have.
fn service_account_kubeconfig(
    cp: &ControlPlane,
    namespace: &str,
    account: &str,
) -> std::path::PathBuf {
    let token = cp.kubectl(&["create", "token", account, "-n", namespace, "--duration=1h"]);
    let admin = std::fs::read_to_string(cp.kubeconfig()).unwrap();
    let server = admin
        .lines()
        .find_map(|l| l.split("server: \"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let ca = admin
        .lines()
        .find_map(|l| l.split("certificate-authority-data: \"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let path = cp.dir().join(format!("{account}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: \"{server}\", certificate-authority-data: \"{ca}\"}}}}]
users: [{{name: {account}, user: {{token: \"{}\"}}}}]
contexts: [{{name: c, context: {{cluster: c, user: {account}, namespace: {namespace}}}}}]
current-context: c
",
            token.trim()
        ),
    )
    .unwrap();
    path
}

/// Requests sent in a loop on a thread until stopped: how many were sent and how many failed
/// (anything but 200), with the first failures.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(usize, Vec<String>)>,
}

impl Load {
    fn start(port: u16) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let body = r#"{"model": "llama-3.1-70b", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}"#;
            let mut sent = 0;
            let mut failed = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let raw = http(
                    &format!("127.0.0.1:{port}"),
                    "POST",
                    "/v1/chat/completions",
                    body,
                    Duration::from_secs(10),
                );
                sent += 1;
                match raw {
                    Some(r) if r.starts_with("HTTP/1.1 200") => {}
                    other => failed.push(
                        other
                            .unwrap_or_else(|| "no answer".into())
                            .chars()
                            .take(300)
                            .collect(),
                    ),
                }
            }
            (sent, failed)
        });
        Load { stop, thread }
    }

    fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

#[test]
fn a_rolling_replacement_and_an_api_server_restart_under_load_lose_no_request_with_the_charts_role()
{
    let cp = ControlPlane::up("rolling");
    cp.install_crds();
    let ns = cp.namespace("rolling");
    // The chart's ServiceAccount, Role and RoleBinding, exactly as it renders them; the
    // gateway runs with that account's token and nothing more.
    let rbac = Command::new(cp.dir().join("bin/helm"))
        .args([
            "template",
            "gw",
            "deploy/helm/infergate",
            "--namespace",
            &ns,
        ])
        .args([
            "--show-only",
            "templates/serviceaccount.yaml",
            "--show-only",
            "templates/rbac.yaml",
        ])
        .current_dir(infergate_test_support::kube::repo_root())
        .env("HELM_CACHE_HOME", cp.dir().join("helm"))
        .env("HELM_CONFIG_HOME", cp.dir().join("helm"))
        .env("HELM_DATA_HOME", cp.dir().join("helm"))
        .output()
        .unwrap();
    assert!(
        rbac.status.success(),
        "{}",
        String::from_utf8_lossy(&rbac.stderr)
    );
    cp.apply(&ns, &String::from_utf8_lossy(&rbac.stdout));
    let kubeconfig = service_account_kubeconfig(&cp, &ns, "gw-infergate");
    let denied = cp.kubectl_output(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "get",
            "secrets",
            "-n",
            &ns,
        ],
        None,
    );
    assert!(
        !denied.status.success(),
        "the chart's Role must not read secrets"
    );

    cp.apply(&ns, &SEED.replace("  tls: {}\n", ""));
    let replicas: Vec<Running> = (31..=37)
        .map(|i| replica_at(&format!("127.0.0.{i}"), 8000, "llama-3.1-70b"))
        .collect();
    let mut replicas: Vec<Option<Running>> = replicas.into_iter().map(Some).collect();
    for i in 0..3 {
        cp.ready_pod(
            &ns,
            &format!("old-{i}"),
            "app=vllm-llama",
            &format!("127.0.0.{}", 31 + i),
            Some("node-1"),
        );
    }
    let log_name = "rolling.log";
    let (_gateway, port, admin) = serve_in_cluster(
        &["--from-cluster", "my-gateway", "--namespace", &ns],
        &kubeconfig,
        "gw-0",
        &cp.dir().join(log_name),
    );
    let log = || std::fs::read_to_string(cp.dir().join(log_name)).unwrap_or_default();
    assert_eq!(endpoints(admin, "llama-70b"), 3.0, "{}", log());
    // The status is written with the Role's token too.
    wait_until(
        "Ready in the status",
        || {
            cp.jsonpath(
                &ns,
                "igwc",
                "my-gateway",
                "{.status.conditions[?(@.type==\"Ready\")].status}",
            ) == "True"
        },
        log,
    );

    // A rolling replacement of every pod under load: each new pod becomes Ready, then the old
    // one is deleted (Terminating: it leaves the pool at once) and its server stops a little
    // later, as the kubelet would stop it after the pod left its endpoints.
    let load = Load::start(port);
    for (i, old) in replicas.iter_mut().take(3).enumerate() {
        cp.ready_pod(
            &ns,
            &format!("new-{i}"),
            "app=vllm-llama",
            &format!("127.0.0.{}", 34 + i),
            None,
        );
        wait_until("the new pod", || endpoints(admin, "llama-70b") == 4.0, log);
        cp.kubectl(&[
            "delete",
            "pod",
            &format!("old-{i}"),
            "-n",
            &ns,
            "--wait=false",
        ]);
        wait_until(
            "the old pod to leave",
            || endpoints(admin, "llama-70b") == 3.0,
            log,
        );
        std::thread::sleep(Duration::from_millis(500));
        *old = None;
    }

    // The API server goes away under load: the last known endpoints keep serving, and
    // readiness and the metrics say so.
    cp.stop();
    wait_until(
        "discovery to notice the lost API server",
        || metric(admin, "infergate_discovery_synced") == 0.0,
        log,
    );
    let readyz = get(admin, "/readyz").unwrap_or_default();
    assert!(
        readyz.starts_with("HTTP/1.1 200") && readyz.contains("degraded"),
        "{readyz}"
    );
    std::thread::sleep(Duration::from_secs(2));
    // Back on the same address: the watches resume without a restart, and a change made after
    // it is seen.
    cp.restart();
    wait_until(
        "discovery to resume",
        || metric(admin, "infergate_discovery_synced") == 1.0,
        log,
    );
    cp.ready_pod(&ns, "after-restart", "app=vllm-llama", "127.0.0.37", None);
    wait_until(
        "the pod made after the restart",
        || endpoints(admin, "llama-70b") == 4.0,
        log,
    );
    std::thread::sleep(Duration::from_millis(500));
    let (sent, failed) = load.finish();
    eprintln!(
        "rolling replacement and API-server restart: {} of {sent} requests failed",
        failed.len()
    );
    assert!(sent > 50, "the load ran ({sent} requests)");
    assert!(
        failed.is_empty(),
        "{} of {sent} requests failed: {:?}\n{}",
        failed.len(),
        &failed[..failed.len().min(3)],
        log()
    );
    assert!(metric(admin, "infergate_discovery_watch_errors_total") >= 1.0);
    drop(replicas);
}

#[test]
fn the_chart_lints_renders_and_applies_to_a_real_api_server() {
    let cp = ControlPlane::up("chart");
    let out = Command::new(infergate_test_support::kube::repo_root().join("tests/k8s/chart-check"))
        .arg(cp.dir())
        .env("INFERGATE", env!("CARGO_BIN_EXE_infergate"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/k8s/chart-check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn of_two_replicas_both_serve_one_writes_the_status_and_the_other_takes_over() {
    let cp = ControlPlane::up("replicas");
    cp.install_crds();
    let ns = cp.namespace("replicas");
    cp.apply(&ns, &SEED.replace("  tls: {}\n", ""));
    let _replica = replica_at("127.0.0.51", 8000, "llama-3.1-70b");
    cp.ready_pod(&ns, "vllm-a", "app=vllm-llama", "127.0.0.51", None);
    let start = |identity: &str| {
        serve_in_cluster(
            &["--from-cluster", "my-gateway", "--namespace", &ns],
            &cp.kubeconfig(),
            identity,
            &cp.dir().join(format!("{identity}.log")),
        )
    };
    let (first, port_a, _) = start("gw-a");
    let (second, port_b, _) = start("gw-b");
    let leader = || cp.jsonpath(&ns, "igwc", "my-gateway", "{.status.leader}");
    wait_until("a status writer", || !leader().is_empty(), String::new);
    assert_eq!(leader(), "gw-a", "the first replica took the lease");
    assert_eq!(
        cp.jsonpath(
            &ns,
            "lease",
            "infergate-my-gateway",
            "{.spec.holderIdentity}"
        ),
        "gw-a"
    );
    // Both serve.
    for port in [port_a, port_b] {
        let r = http(
            &format!("127.0.0.1:{port}"),
            "POST",
            "/v1/chat/completions",
            r#"{"model": "llama-3.1-70b", "messages": [{"role": "user", "content": "hi"}]}"#,
            Duration::from_secs(10),
        )
        .unwrap_or_default();
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    // The leader stops gracefully: it releases the lease on SIGTERM, and the standby takes
    // over on its next look (every 2 s), well before the 15 s a crashed leader's lease needs to
    // expire.
    let mut first = first;
    let stopped = Instant::now();
    terminate(&mut first.0, "the leader");
    while cp.jsonpath(
        &ns,
        "lease",
        "infergate-my-gateway",
        "{.spec.holderIdentity}",
    ) != "gw-b"
    {
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "the standby did not take the released lease within 10 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("released lease taken over after {:?}", stopped.elapsed());
    drop(first);
    // A change the new writer must report.
    cp.ready_pod(&ns, "vllm-b", "app=vllm-llama", "127.0.0.52", None);
    wait_until(
        "the new writer's status",
        || {
            leader() == "gw-b"
                && cp.jsonpath(&ns, "igwc", "my-gateway", "{.status.endpointCount}") == "2"
        },
        || cp.jsonpath(&ns, "igwc", "my-gateway", "{.status}"),
    );
    drop(second);
}

#[test]
fn infergates_own_api_group_is_read_as_the_same_schema() {
    let cp = ControlPlane::up("own-group");
    cp.install_crds();
    let ns = cp.namespace("own");
    let own = SEED
        .replace(
            "inference.sagemaker.aws.amazon.com/v1alpha1",
            "infergate.dev/v1alpha1",
        )
        .replace("  tls: {}\n", "");
    cp.apply(&ns, &own);
    let _replica = replica_at("127.0.0.61", 8000, "llama-3.1-70b");
    cp.ready_pod(&ns, "vllm-a", "app=vllm-llama", "127.0.0.61", None);
    let (_gateway, port, _admin) = serve(
        &cp,
        &[
            "--from-cluster",
            "my-gateway",
            "--namespace",
            &ns,
            "--group",
            "infergate.dev",
        ],
        "own.log",
    );
    let r = http(
        &format!("127.0.0.1:{port}"),
        "POST",
        "/v1/chat/completions",
        r#"{"model": "llama-3.1-70b", "messages": [{"role": "user", "content": "hi"}]}"#,
        Duration::from_secs(10),
    )
    .unwrap_or_default();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    // `igc` is this group's short name; the seed's `igwc` has no such object.
    wait_until(
        "kubectl get igc to show Ready",
        || {
            cp.jsonpath(
                &ns,
                "igc",
                "my-gateway",
                "{.status.conditions[?(@.type==\"Ready\")].status}",
            ) == "True"
        },
        || cp.kubectl(&["get", "igc", "-n", &ns, "-o", "yaml"]),
    );
    let seed_group = cp.kubectl_output(&["get", "igwc", "my-gateway", "-n", &ns], None);
    assert!(!seed_group.status.success());
}
