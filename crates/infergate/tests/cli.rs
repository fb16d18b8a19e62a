//! The `infergate sim` command as a user runs it: flags, fleet files, errors, a live server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{free_port, get, infergate, wait_for, Running, TempDir};
use std::process::Stdio;

fn wait_healthy(port: u16) {
    wait_for(&format!("the server on {port} to be healthy"), || {
        get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    });
}

#[test]
fn list_profiles_prints_every_reference_row_and_instant() {
    let out = infergate()
        .args(["sim", "--list-profiles"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| profile"))
        .count();
    assert_eq!(rows, 16, "{text}");
    assert!(text.contains("qwen3-235b-a22b-fp8/h100/tp8"));
}

#[test]
fn a_single_replica_serves_vllm_routes_with_the_flags_given() {
    let port = free_port();
    let child = infergate()
        .args([
            "sim",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "a10g",
            "--port",
            &port.to_string(),
        ])
        .args([
            "--served-model-name",
            "tiny",
            "--max-loras",
            "2",
            "--lora",
            "sql-lora",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Running(child);
    wait_healthy(port);
    let models = get(port, "/v1/models").unwrap();
    assert!(
        models.contains("\"id\":\"tiny\"") && models.contains("\"id\":\"sql-lora\""),
        "{models}"
    );
    let metrics = get(port, "/metrics").unwrap();
    assert!(
        metrics.contains("vllm:cache_config_info{") && metrics.contains("num_gpu_blocks=\"1851\"")
    );
    assert!(metrics.contains("vllm:lora_requests_info{max_lora=\"2\""));
}

#[test]
fn a_fleet_file_starts_every_replica() {
    let (a, b) = (free_port(), free_port());
    let dir = TempDir::new("fleet");
    let file = dir.path().join("fleet.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  defaults: {{model: instant}}\n  endpoints:\n    - address: 127.0.0.1:{a}\n    - address: 127.0.0.1:{b}\n      sim: {{engine: sglang}}\n"
        ),
    )
    .unwrap();
    let child = infergate()
        .args(["sim", "--fleet"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Running(child);
    wait_healthy(a);
    wait_healthy(b);
    assert!(get(a, "/metrics")
        .unwrap()
        .contains("vllm:num_requests_running"));
    assert!(get(b, "/metrics")
        .unwrap()
        .contains("sglang:num_running_reqs"));
}

#[test]
fn errors_name_what_is_wrong_without_a_backtrace() {
    let out = infergate()
        .args(["sim", "--gpu", "tpu"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("unknown gpu `tpu`"), "{err}");
    assert!(!err.contains("Stack backtrace"), "{err}");

    let dir = TempDir::new("bad-fleet");
    let file = dir.path().join("fleet.yaml");
    std::fs::write(&file, "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  endpoints:\n    - address: nowhere\n").unwrap();
    let out = infergate()
        .args(["sim", "--fleet"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("spec.endpoints[0].address"), "{err}");

    let out = infergate()
        .args(["sim", "--fail", "503=2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
