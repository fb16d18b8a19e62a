//! A pool's timeouts: `routeTimeout` ends at the answer's first byte (a healthy long stream
//! is never cut), `streamIdleTimeout` between chunks, and `firstByteTimeout` per attempt, after
//! which the request moves to the next endpoint while the client has seen nothing.

use std::net::SocketAddr;
use std::time::Duration;

use hyper::{Method, StatusCode};
use serde_json::json;
use tokio::time::Instant;

use crate::common::*;

const TEN_EVENTS: [&str; 10] = [
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"d\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"e\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"f\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"g\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"i\"}}]}\n\n",
    "data: [DONE]\n\n",
];

fn sse(gap: Duration) -> Script {
    Script {
        metrics: Script::idle_metrics(),
        content_type: "text/event-stream",
        chunks: TEN_EVENTS.to_vec(),
        gap,
        held: None,
    }
}

fn pool(endpoints: Vec<SocketAddr>, extra: String) -> PoolDef {
    let mut p = PoolDef::new("llama", LLAMA, endpoints);
    p.extra = Box::leak(extra.into_boxed_str());
    p
}

async fn streamed(gw: &TestGateway, content: &str) -> (StatusCode, String, Duration) {
    let body = chat(LLAMA, content, json!({"stream": true, "max_tokens": 4}));
    let t0 = Instant::now();
    let (s, _, b) = send_full(
        gw.addr,
        Method::POST,
        "/v1/chat/completions",
        Some(body.to_string()),
        &[],
    )
    .await;
    (s, String::from_utf8_lossy(&b).into_owned(), t0.elapsed())
}

fn retried_first_byte(metrics: &str, endpoint: SocketAddr) -> f64 {
    metric_sum(
        metrics,
        &format!(
            "infergate_upstream_retries_total{{pool=\"llama\",endpoint=\"{endpoint}\",reason=\"first_byte_timeout\"}}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_stream_longer_than_the_route_timeout_is_not_cut() {
    // Ten events 100 ms apart: a second-long stream under a 300 ms routeTimeout.
    let up = Scripted::start(sse(Duration::from_millis(100))).await;
    let p = pool(vec![up.addr], "      routeTimeout: 300ms\n".into());
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    let (s, body, took) = streamed(&gw, "hi").await;
    assert_eq!(s, StatusCode::OK);
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(!body.contains("stream_interrupted"), "{body}");
    assert_eq!(body, TEN_EVENTS.concat(), "every event, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_past_the_stream_idle_timeout_ends_the_stream_with_an_error_event() {
    let up = Scripted::start(sse(Duration::from_millis(800))).await;
    let p = pool(
        vec![up.addr],
        "      streamIdleTimeout: 300ms\n      firstByteTimeout: 5s\n".into(),
    );
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    let (s, body, took) = streamed(&gw, "hi").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        body.starts_with(TEN_EVENTS[0]),
        "the first event came: {body}"
    );
    assert!(!body.contains("\"content\":\"b\""), "{body}");
    assert!(
        body.contains("stream_interrupted") && body.contains("streamIdleTimeout 300ms"),
        "{body}"
    );
    // First event at 0.8 s, cut 0.3 s later.
    assert!(took < Duration::from_millis(1_500), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_without_a_first_byte_in_time_moves_to_the_next_endpoint() {
    // One pod accepts and never answers; one sends its head at once and its first event after
    // 5 s; one is healthy. Detection off and round-robin picks, so the broken ones are met
    // again and again.
    let mut hang = instant();
    hang.faults.hang = true;
    let hung = Replica::start(hang).await;
    let slow = Scripted::start(sse(Duration::from_secs(5))).await;
    let good = Replica::start(instant()).await;
    let p = pool(
        vec![hung.addr, slow.addr, good.addr],
        "      policy: round-robin\n      firstByteTimeout: 300ms\n      outlierDetection: {consecutiveFailures: 0}\n"
            .into(),
    );
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    for i in 0..12 {
        let (s, body, took) = streamed(&gw, &format!("question {i}")).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
        assert!(!body.contains("stream_interrupted"), "{body}");
        // At most two attempts ran out before the healthy pod answered.
        assert!(took < Duration::from_millis(2_000), "request {i}: {took:?}");
    }
    let m = gw.metric_text().await;
    assert!(retried_first_byte(&m, hung.addr) >= 1.0, "{m}");
    assert!(retried_first_byte(&m, slow.addr) >= 1.0, "{m}");
    assert_eq!(retried_first_byte(&m, good.addr), 0.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_endpoint_misses_its_first_byte_the_client_gets_504() {
    let mut hang = instant();
    hang.faults.hang = true;
    let (a, b) = (
        Replica::start(hang.clone()).await,
        Replica::start(hang).await,
    );
    let p = pool(
        vec![a.addr, b.addr],
        "      firstByteTimeout: 200ms\n".into(),
    );
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    let (s, body, took) = streamed(&gw, "hi").await;
    assert_eq!(s, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "first_byte_timeout", "{v}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_times_a_stream_by_its_predicted_ttft_not_the_uninformed_30s() {
    let (a, b) = (
        Replica::start(instant()).await,
        Replica::start(instant()).await,
    );
    let p = pool(vec![a.addr, b.addr], String::new());
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    // Teach the latency model: both pods answer streams in milliseconds.
    for i in 0..40 {
        let (s, body, _) = streamed(&gw, &format!("warm-up {i}")).await;
        assert_eq!(s, StatusCode::OK, "{body}");
    }
    a.set_faults(json!({"hang": true})).await;
    // Eight at once, so that the in-flight credit spreads them over both pods whatever their
    // last scrapes said (one after another, every one could go to the pod that looked idler):
    // each is served, and those that met the hung pod waited about the 5 s floor (a few
    // milliseconds predicted × 4 + 2 s, at least 5 s), not 30 s.
    let probes: Vec<_> = (0..8)
        .map(|i| {
            let gw = &gw;
            async move { streamed(gw, &format!("question {i}")).await }
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for (s, body, took) in futures_util::future::join_all(probes).await {
        assert_eq!(s, StatusCode::OK, "{body}");
        slowest = slowest.max(took);
    }
    let m = gw.metric_text().await;
    assert!(
        retried_first_byte(&m, a.addr) >= 1.0,
        "the hung pod was never met:\n{m}"
    );
    assert!(
        slowest >= Duration::from_secs(5) && slowest < Duration::from_secs(10),
        "{slowest:?}"
    );
}
