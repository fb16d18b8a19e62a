//! When infergate is away: FailOpen lets Envoy pick, FailClose refuses. Plus TLS to infergate,
//! a graceful SIGTERM, and the Envoy configs shipped in `deploy/envoy/`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::client::{chat, post};
use crate::common::{free_port, terminate};
use crate::envoy::{binary, Pool, Spec};
use crate::setup::one_pool_picker;
use crate::upstream::Replica;

const CHAT: &str = "/v1/chat/completions";

fn spec(replicas: &[&Replica], ext_proc: u16, fail_open: bool, tls: bool) -> Spec {
    Spec {
        pools: vec![Pool {
            cluster: "llama",
            base_model: None,
            endpoints: replicas.iter().map(|r| r.addr).collect(),
        }],
        ext_proc,
        fail_open,
        tls,
    }
}

#[test]
fn with_infergate_down_fail_open_round_robins_and_fail_close_refuses() {
    let (a, b) = (Replica::start("a"), Replica::start("b"));
    // Nothing listens on the ext_proc port.
    let nobody = free_port();
    let body = chat("llama", "hi");

    let closed = spec(&[&a, &b], nobody, false, false).start(false);
    for _ in 0..4 {
        let r = post(closed.port, CHAT, &[], &body);
        assert!(
            r.status >= 500,
            "FailClose answered {}: {}",
            r.status,
            r.text()
        );
    }
    assert_eq!(
        a.requests() + b.requests(),
        0,
        "FailClose sent requests upstream"
    );
    drop(closed);

    let open = spec(&[&a, &b], nobody, true, false).start(false);
    let mut by = Vec::new();
    // A client naming its own pod is not obeyed: the header is dropped before ext_proc.
    let own = a.addr.to_string();
    for _ in 0..4 {
        let r = post(
            open.port,
            CHAT,
            &[("x-gateway-destination-endpoint", &own)],
            &body,
        );
        assert_eq!(r.status, 200, "FailOpen: {}", r.text());
        assert_eq!(r.body, body, "the request went through unchanged");
        by.push(r.header("x-replica").unwrap().to_owned());
    }
    // Round-robin (the override-host policy's fallback) over both replicas.
    assert!(
        by.iter().any(|x| x == "a") && by.iter().any(|x| x == "b"),
        "{by:?}"
    );
    assert_eq!(a.requests() + b.requests(), 4);
}

#[test]
fn ext_proc_over_tls_and_sigterm_drains() {
    let replica = Replica::start("a");
    let mut picker = one_pool_picker(&[replica.addr], "", "  tls: {}\n");
    let envoy = spec(&[&replica], picker.port, false, true).start(true);
    let r = post(envoy.port, CHAT, &[], &chat("llama", "over tls"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.served(), replica.addr.to_string());

    let status = terminate(&mut picker.child.0, "extproc");
    assert!(status.success(), "{status}");
}

#[test]
fn the_route_timeout_answers_504() {
    let replica = Replica::start("a");
    let picker = one_pool_picker(&[replica.addr], "      routeTimeout: 1s\n", "");
    let envoy = spec(&[&replica], picker.port, false, false).start(true);
    let body = serde_json::json!({"model": "llama", "hang": true, "messages": []}).to_string();
    let r = post(envoy.port, CHAT, &[], body.as_bytes());
    assert_eq!(r.status, 504, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], "route_timeout", "{v}");
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);
    assert_eq!(replica.requests(), 1, "the request did reach the replica");
    // A request within the timeout is unaffected.
    let r = post(envoy.port, CHAT, &[], &chat("llama", "quick"));
    assert_eq!(r.status, 200, "{}", r.text());
}

fn deploy_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/envoy")
}

#[test]
fn the_shipped_envoy_and_infergate_configs_are_valid() {
    let dir = deploy_dir();
    let mut envoy_configs = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("one-pool-") || name.starts_with("multi-pool-") {
            envoy_configs += 1;
            let out = Command::new(binary())
                .args(["--mode", "validate", "--disable-hot-restart", "-c"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if name.starts_with("gateway-") {
            let config =
                infergate_control::load_config(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            infergate_extproc::check_extproc(&config).unwrap_or_else(|e| panic!("{name}: {e}"));
            infergate_control::check_supported(&config).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    assert_eq!(
        envoy_configs, 4,
        "one and several pools, FailOpen and FailClose each"
    );
}
