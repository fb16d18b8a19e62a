//! The `infergate sim` command as a user runs it: flags, fleet files, errors, a live server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{get, infergate, sim_fleet, sim_replica, TempDir};

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
    let (_guard, port) = sim_replica(&[
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "a10g",
        "--served-model-name",
        "tiny",
        "--max-loras",
        "2",
        "--lora",
        "sql-lora",
    ]);
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
    let dir = TempDir::new("fleet");
    let file = dir.path().join("fleet.yaml");
    let (_guard, [a, b]) = sim_fleet(&file, |[a, b]| {
        format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  defaults: {{model: instant}}\n  endpoints:\n    - address: 127.0.0.1:{a}\n    - address: 127.0.0.1:{b}\n      sim: {{engine: sglang}}\n"
        )
    });
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
