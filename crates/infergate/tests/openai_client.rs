//! The official OpenAI Python client driving `infergate serve`: a simulated fleet (`infergate sim
//! --fleet`, instant profile, a LoRA adapter on some replicas) and the gateway on free loopback
//! ports, then `python3 tests/python/test_openai_client.py <base_url>` (chat with usage,
//! streaming with `include_usage`, a completion, an adapter, `models.list()`, and 404 / 413 / 400
//! mapped to the client's exception classes), which must exit 0.
//!
//! The client is a test dependency: `pip install -r tests/python/requirements.txt` (CI does so in
//! `.ci/run`). Without it this test fails, saying so; it never passes silently.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{sim_fleet, TempDir};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The served model, its adapter, and the body limit the script's 413 case goes just over.
const MODEL: &str = "llama";
const ADAPTER: &str = "sql-lora";
const MAX_BODY_BYTES: u64 = 65_536;

/// How long the whole Python script may take (it makes a dozen small requests).
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fails the test, naming the fix, when `python3` or the `openai` module is missing.
fn require_openai_client() {
    let requirements = repo_root().join("tests/python/requirements.txt");
    let fix = format!(
        "the OpenAI Python client is needed: pip install -r tests/python/requirements.txt \
         ({})",
        requirements.display()
    );
    let probe = Command::new("python3")
        .args(["-c", "import openai; print(openai.__version__)"])
        .output()
        .unwrap_or_else(|e| panic!("python3 cannot be run ({e}); {fix}"));
    assert!(
        probe.status.success(),
        "the `openai` module is not importable by python3: {}\n{fix}",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
}

fn fleet(replicas: &[u16]) -> String {
    // The first two replicas have LoRA slots with the adapter loaded; the third has none, so
    // an adapter request must go to one of the first two.
    let mut yaml = format!(
        "apiVersion: infergate.dev/v1alpha1
kind: SimulatedFleet
spec:
  defaults: {{model: instant, servedModelName: {MODEL}, timeScale: 100, meanOutputTokens: 8}}
  endpoints:
"
    );
    for (i, port) in replicas.iter().enumerate() {
        yaml.push_str(&format!(
            "    - address: 127.0.0.1:{port}\n      labels: {{app: llama}}\n"
        ));
        if i < 2 {
            yaml.push_str(&format!(
                "      sim: {{maxLoras: 2, maxCpuLoras: 4, loras: [{ADAPTER}]}}\n"
            ));
        }
    }
    yaml
}

fn gateway_config(replicas: &[u16]) -> String {
    let mut yaml = format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: true, maxRequestBodyBytes: {MAX_BODY_BYTES}}}
  schedulers:
    - name: llama
      modelName: {MODEL}
      modelSelector: {{matchLabels: {{app: llama}}}}
      loraAdapters: [{ADAPTER}]
      weights: {{loraAffinity: 1}}
  discovery: static
  endpoints:
"
    );
    for port in replicas {
        yaml.push_str(&format!(
            "    - address: 127.0.0.1:{port}\n      labels: {{app: llama}}\n"
        ));
    }
    yaml
}

/// Runs the script with a time limit; returns its exit status, stdout and stderr.
fn run_script(base_url: &str) -> (std::process::ExitStatus, String, String) {
    let script = repo_root().join("tests/python/test_openai_client.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(base_url)
        .args(["--model", MODEL, "--adapter", ADAPTER])
        .args(["--max-body-bytes", &MAX_BODY_BYTES.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + SCRIPT_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the OpenAI client script took over {SCRIPT_LIMIT:?}; stdout so far:\n{}",
                out.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

#[test]
fn the_official_openai_python_client_drives_the_gateway() {
    require_openai_client();

    let dir = TempDir::new("openai");
    let (_sim, replicas) = sim_fleet(&dir.path().join("fleet.yaml"), |ports: [u16; 3]| {
        fleet(&ports)
    });
    let config_file = dir.path().join("gateway.yaml");
    std::fs::write(&config_file, gateway_config(&replicas)).unwrap();

    let (_gateway, port, _admin) = common::serve_ready(&config_file, |_| {});

    let (status, stdout, stderr) = run_script(&format!("http://127.0.0.1:{port}/v1"));
    assert!(
        status.success(),
        "the OpenAI client script failed ({status}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(stdout.contains("ok: errors"), "{stdout}");
}
