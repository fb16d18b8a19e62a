//! `GET /status/member` on the admin listener of a running gateway, in front of simulated
//! replicas: the pools with their names and endpoints, the recent requests' TTFT and error
//! rate as traffic passes, and a sequence that advances with the scrapes.

use std::collections::BTreeSet;
use std::time::Duration;

use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

/// The document as the admin listener serves it now, checked for its status and content type.
async fn member_status(gw: &TestGateway) -> Value {
    let (status, headers, body) =
        send_full(gw.admin, Method::GET, "/status/member", None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

fn the_pool(doc: &Value) -> &Value {
    let pools = doc["pools"].as_array().expect("pools");
    assert_eq!(pools.len(), 1, "{doc}");
    &pools[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_member_status_follows_the_pools_endpoints_traffic_and_failures() {
    let (a, b) = (
        Replica::start(instant_with_adapters(&["sql-lora"])).await,
        Replica::start(instant_with_adapters(&["sql-lora"])).await,
    );
    let mut pool = PoolDef::new("llama", LLAMA, vec![a.addr, b.addr]);
    pool.adapters = vec!["sql-lora"];
    let rewrite = format!(
        "  rewrites:\n    - matches: [{{model: {{type: Exact, value: chat-alias}}}}]\n      targets: [{{modelRewrite: {LLAMA}}}]\n"
    );
    let gw = TestGateway::ready(&config_yaml(&[pool], &rewrite)).await;

    let doc = member_status(&gw).await;
    assert_eq!(doc["apiVersion"], "infergate.dev/v1alpha1");
    assert_eq!(doc["kind"], "MemberStatus");
    assert!(doc["sequence"].is_u64() && doc["clockUnixMs"].as_u64() > Some(1_700_000_000_000));
    let p = the_pool(&doc);
    let keys: BTreeSet<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
    let contract: BTreeSet<&str> = [
        "name",
        "models",
        "adapters",
        "readyEndpoints",
        "endpoints",
        "kvHeadroom",
        "queueDepth",
        "errorRate",
        "ttftP99Seconds",
        "saturation",
        "routing",
    ]
    .into();
    assert_eq!(keys, contract);
    // How the pool picks, for the global tier's drift check.
    let routing = p["routing"].as_str().unwrap();
    assert!(
        routing.starts_with("scheduler ") && routing.contains("weights queue"),
        "{routing}"
    );
    assert_eq!(p["name"], "llama");
    assert_eq!(p["models"], json!([LLAMA, "chat-alias"]));
    assert_eq!(p["adapters"], json!(["sql-lora"]));
    assert_eq!(p["endpoints"], 2);
    assert!(p["ttftP99Seconds"].is_null(), "no request yet: {p}");
    assert_eq!(p["errorRate"], 0.0);
    // Both were scraped (the gateway is ready) and keep being scraped every 20 ms; a stalled
    // machine may leave one stale for a moment, so this waits for both to read fresh.
    eventually("both endpoints read ready", || async {
        the_pool(&member_status(&gw).await)["readyEndpoints"] == 2
    })
    .await;
    let kv = the_pool(&member_status(&gw).await)["kvHeadroom"]
        .as_f64()
        .unwrap();
    assert!(kv > 0.0 && kv <= 1.0, "idle replicas have headroom: {kv}");

    for (i, stream) in [(0, true), (1, false), (2, true), (3, false)] {
        let model = if i == 3 { "chat-alias" } else { LLAMA };
        let body = chat(
            model,
            &format!("hello {i}"),
            json!({"max_tokens": 4, "stream": stream}),
        );
        let (s, _, b) = gw.post("/v1/chat/completions", &body).await;
        assert_eq!(s, StatusCode::OK, "{b:?}");
    }
    let doc = member_status(&gw).await;
    let p = the_pool(&doc);
    let ttft = p["ttftP99Seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("a TTFT after requests: {p}"));
    assert!(ttft > 0.0 && ttft < 10.0, "{ttft}");
    assert_eq!(p["errorRate"], 0.0);

    // The sequence follows the scrapes (every 20 ms here), not the reads.
    let before = doc["sequence"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = member_status(&gw).await["sequence"].as_u64().unwrap();
    assert!(after > before, "{before} → {after}");

    // Both replicas answer 500 now: every request fails, and the rate shows it.
    for r in [&a, &b] {
        r.set_faults(json!({"error_rates": {"500": 1.0}})).await;
    }
    for i in 0..4 {
        let body = chat(LLAMA, &format!("failing {i}"), json!({"max_tokens": 4}));
        let (s, _, b) = gw.post("/v1/chat/completions", &body).await;
        assert!(s.is_server_error(), "{s}: {b:?}");
    }
    let p = the_pool(&member_status(&gw).await).clone();
    let rate = p["errorRate"].as_f64().unwrap();
    // 4 of the 8 requests of the last seconds failed (more than half only if this machine took
    // over 9 s since the first, and the good ones left the window).
    assert!((0.5 - 1e-9..=1.0).contains(&rate), "{p}");
}
