//! Each fault, set at start or through `/sim/faults`.

use crate::common::{chat, eventually, fast_spec, sample, send, Replica};
use hyper::{Method, StatusCode};
use infergate_simserver::{Faults, MetricsFault, Restart};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::{timeout, Instant};

fn short() -> Value {
    chat("ping", json!({"max_tokens": 2, "ignore_eos": true}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_read_and_set_at_run_time() {
    let server = Replica::start(fast_spec(100.0)).await;
    let (status, body) = server.get("/sim/faults").await;
    assert_eq!(status, StatusCode::OK);
    let current: Faults = serde_json::from_slice(&body).unwrap();
    assert_eq!(current, Faults::default());
    let (status, v) = server
        .post_json("/sim/faults", &json!({"error_rates": {"503": 1.0}}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["error_rates"]["503"], 1.0);
    let (status, v) = server
        .post_json("/sim/faults", &json!({"error_rates": {"503": 2.0}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("error_rates"));
    let (status, _) = server
        .post_json("/sim/faults", &json!({"no_such_fault": true}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_errors_come_with_their_status_and_openai_bodies() {
    let mut spec = fast_spec(200.0);
    spec.faults.error_rates.insert(503, 1.0);
    let server = Replica::start(spec).await;
    let (status, v) = server.post_json("/v1/chat/completions", &short()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v["error"]["code"], 503);
    assert_eq!(v["error"]["type"], "ServiceUnavailableError");

    server
        .post_json(
            "/sim/faults",
            &json!({"error_rates": {"429": 0.3, "500": 0.2}}),
        )
        .await;
    let mut counts = [0u32; 3];
    for _ in 0..100 {
        let (status, _) = server
            .post("/v1/chat/completions", &short().to_string())
            .await;
        match status.as_u16() {
            200 => counts[0] += 1,
            429 => counts[1] += 1,
            500 => counts[2] += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        (15..=45).contains(&counts[1]) && (8..=35).contains(&counts[2]),
        "{counts:?}"
    );
    // Healing takes an empty body.
    server.post_json("/sim/faults", &json!({})).await;
    let (status, _) = server.post_json("/v1/chat/completions", &short()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_n_requests_resets_connections_and_closes_the_port() {
    let mut spec = fast_spec(100.0);
    spec.faults.crash_after_requests = Some(2);
    let server = Replica::start(spec).await;
    for _ in 0..2 {
        let (status, _) = server.post_json("/v1/chat/completions", &short()).await;
        assert_eq!(status, StatusCode::OK);
    }
    let third = send(
        server.addr,
        Method::POST,
        "/v1/chat/completions",
        Some(short().to_string().into_bytes()),
    )
    .await;
    assert!(third.is_err(), "{third:?}");
    let refused = eventually(Duration::from_secs(2), || async {
        tokio::net::TcpStream::connect(server.addr).await.is_err()
    })
    .await;
    assert!(refused, "the port is closed");
    // The process keeps running: stopping is clean.
    server.stop().await.unwrap();
}

/// How long the restarted replica stays down, then starting up. The test must see each phase
/// from outside, polling, so each lasts long enough that a loaded machine which leaves the test
/// unscheduled for a while still sees it.
const DOWN_SECS: f64 = 1.0;
const STARTUP_SECS: f64 = 2.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_a_time_then_a_restart_with_a_cold_cache() {
    let mut spec = fast_spec(100.0);
    spec.faults.restart = Some(Restart {
        down_secs: DOWN_SECS,
        startup_secs: STARTUP_SECS,
    });
    let server = Replica::start(spec).await;
    let long = chat(
        &"Same prefix every time. ".repeat(20),
        json!({"max_tokens": 2, "ignore_eos": true}),
    );
    server.post_json("/v1/chat/completions", &long).await;
    let (_, warm) = server.post_json("/v1/chat/completions", &long).await;
    assert!(
        warm["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );

    let crash_at = Instant::now();
    server
        .post_json(
            "/sim/faults",
            &json!({"crash_after_secs": 0.1, "restart": {"down_secs": DOWN_SECS, "startup_secs": STARTUP_SECS}}),
        )
        .await;
    let down = eventually(Duration::from_secs(2), || async {
        tokio::net::TcpStream::connect(server.addr).await.is_err()
    })
    .await;
    assert!(down);
    // Back on the port, but starting up.
    let starting = eventually(Duration::from_secs(5), || async {
        matches!(
            send(server.addr, Method::GET, "/health", None).await,
            Ok((StatusCode::SERVICE_UNAVAILABLE, _))
        )
    })
    .await;
    assert!(starting);
    let (status, v) = server.post_json("/v1/chat/completions", &long).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v["error"]["type"], "ServiceUnavailableError");
    let ready = eventually(Duration::from_secs(10), || async {
        matches!(
            send(server.addr, Method::GET, "/health", None).await,
            Ok((StatusCode::OK, _))
        )
    })
    .await;
    assert!(ready);
    assert!(
        crash_at.elapsed() >= Duration::from_secs_f64(DOWN_SECS + STARTUP_SECS),
        "down {DOWN_SECS} s + start-up {STARTUP_SECS} s"
    );
    // A fresh engine: the cache is cold, the counters start over, the crash trigger is gone.
    let (_, cold) = server.post_json("/v1/chat/completions", &long).await;
    assert_eq!(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let (_, faults) = server.post_json("/sim/faults", &json!({})).await;
    assert!(faults["crash_after_secs"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_replica_accepts_and_never_answers() {
    let mut spec = fast_spec(100.0);
    spec.faults.hang = true;
    let server = Replica::start(spec).await;
    let call = send(
        server.addr,
        Method::POST,
        "/v1/chat/completions",
        Some(short().to_string().into_bytes()),
    );
    assert!(timeout(Duration::from_millis(300), call).await.is_err());
    // Health still answers: a hang is only visible to requests.
    let (status, _) = server.get("/health").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_metrics_keep_the_figures_of_when_the_fault_began() {
    let server = Replica::start(fast_spec(200.0)).await;
    server.post_json("/v1/chat/completions", &short()).await;
    let series = "vllm:generation_tokens_total{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}";
    assert_eq!(sample(&server.metrics().await, series), Some(2.0));
    server
        .post_json("/sim/faults", &json!({"metrics": "stale"}))
        .await;
    server.post_json("/v1/chat/completions", &short()).await;
    assert_eq!(sample(&server.metrics().await, series), Some(2.0));
    server.post_json("/sim/faults", &json!({})).await;
    assert_eq!(sample(&server.metrics().await, series), Some(4.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_metrics_never_answer() {
    let mut spec = fast_spec(100.0);
    spec.faults.metrics = MetricsFault::Hang;
    let server = Replica::start(spec).await;
    let call = send(server.addr, Method::GET, "/metrics", None);
    assert!(timeout(Duration::from_millis(300), call).await.is_err());
    let (status, _) = server.post_json("/v1/chat/completions", &short()).await;
    assert_eq!(status, StatusCode::OK);
}
