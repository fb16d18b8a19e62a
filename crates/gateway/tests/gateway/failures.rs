//! Failures: before the first byte a request moves to a fallback; after it, the stream ends with
//! an error event; no endpoint, timeouts and saturation have their statuses.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use tokio::time::{timeout, Instant};

use crate::common::*;

fn retried(metrics: &str, endpoint: std::net::SocketAddr, reason: &str) -> bool {
    let series = format!(
        "infergate_upstream_retries_total{{pool=\"llama\",endpoint=\"{endpoint}\",reason=\"{reason}\"}}"
    );
    metric_sum(metrics, &series) > 0.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_or_refusing_primary_moves_the_request_to_a_fallback() {
    let mut crashing = instant();
    crashing.faults.crash_after_requests = Some(0);
    let mut refusing = instant();
    refusing.faults.error_rates.insert(503, 1.0);
    let (a, b, c) = (
        Replica::start(crashing).await,
        Replica::start(instant()).await,
        Replica::start(refusing).await,
    );
    let gw = TestGateway::ready(&config_yaml(
        &[PoolDef::new("llama", LLAMA, vec![a.addr, b.addr, c.addr])],
        "",
    ))
    .await;
    let mut served = Vec::new();
    for i in 0..30 {
        let body = chat(
            LLAMA,
            &format!("question number {i}"),
            json!({"max_tokens": 2}),
        );
        let (s, h, bytes) = gw.post("/v1/chat/completions", &body).await;
        assert_eq!(s, StatusCode::OK, "request {i}: {bytes:?}");
        served.push(h);
        let m = gw.metric_text().await;
        if retried(&m, a.addr, "connect") && retried(&m, c.addr, "status_503") {
            break;
        }
    }
    let m = gw.metric_text().await;
    assert!(
        retried(&m, a.addr, "connect"),
        "the crashed replica was never tried:\n{m}"
    );
    assert!(
        retried(&m, c.addr, "status_503"),
        "the refusing replica was never tried:\n{m}"
    );
    // Every answer came from the healthy replica.
    assert_eq!(
        by_endpoint(&served).keys().collect::<Vec<_>>(),
        vec![&b.addr.to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_without_endpoints_answers_503() {
    let r = Replica::start(instant()).await;
    let yaml = config_yaml(
        &[
            PoolDef::new("llama", LLAMA, vec![r.addr]),
            PoolDef::new("empty", "nothing-here", vec![]),
        ],
        "",
    );
    let gw = TestGateway::ready(&yaml).await;
    let (s, _, b) = gw
        .post(
            "/v1/chat/completions",
            &chat("nothing-here", "hi", json!({})),
        )
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(error_of(&b)["code"], "no_endpoint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_upstream_gets_504_at_the_route_timeout() {
    let mut hung = instant();
    hung.faults.hang = true;
    let r = Replica::start(hung).await;
    let mut p = PoolDef::new("llama", LLAMA, vec![r.addr]);
    p.extra = "      routeTimeout: 300ms\n";
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    let t0 = Instant::now();
    let (s, _, b) = gw
        .post("/v1/chat/completions", &chat(LLAMA, "hi", json!({})))
        .await;
    let took = t0.elapsed();
    assert_eq!(s, StatusCode::GATEWAY_TIMEOUT, "{b:?}");
    assert_eq!(error_of(&b)["code"], "route_timeout");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_stream_ends_the_stream_with_an_error_event_promptly() {
    let r = Replica::start(real_time()).await;
    let gw = TestGateway::ready(&llama_yaml(r.addr, "")).await;
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let body = chat(
        LLAMA,
        "write a long story",
        json!({"stream": true, "max_tokens": 3000, "ignore_eos": true}),
    );
    let req = Request::post(format!("http://{}/v1/chat/completions", gw.addr))
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = timeout(CALL_LIMIT, client.request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let first = timeout(CALL_LIMIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.data_ref().is_some());
    r.set_faults(json!({"crash_after_secs": 0.1})).await;
    let crashed = Instant::now();
    let mut last = Bytes::new();
    let ended = timeout(Duration::from_secs(5), async {
        while let Some(f) = body.frame().await {
            match f {
                Ok(f) => {
                    if let Ok(d) = f.into_data() {
                        last = d;
                    }
                }
                Err(e) => panic!("the stream broke instead of ending with an event: {e}"),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream hung after the crash");
    assert!(crashed.elapsed() < Duration::from_secs(3));
    let text = String::from_utf8_lossy(&last);
    assert!(text.starts_with("data: {\"error\""), "last event: {text}");
    let v: serde_json::Value =
        serde_json::from_str(text.trim_start_matches("data: ").trim()).unwrap();
    assert_eq!(v["error"]["code"], "stream_interrupted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pool_sheds_sheddable_queues_standard_and_lets_critical_through() {
    // Each endpoint at max(7 / 5, 0.95 / 0.8) = 1.4: over the Standard and Sheddable ceiling
    // (1), under the Critical one (2).
    let saturated = "vllm:num_requests_waiting 7\nvllm:num_requests_running 40\nvllm:kv_cache_usage_perc 0.95\n";
    let script = Script {
        metrics: saturated.into(),
        content_type: "application/json",
        chunks: vec![r#"{"object":"chat.completion","choices":[]}"#],
        gap: Duration::ZERO,
        held: None,
    };
    let (a, b) = (
        Scripted::start(script.clone()).await,
        Scripted::start(script).await,
    );
    let gw = TestGateway::ready(&config_yaml(
        &[PoolDef::new("p", "m", vec![a.addr, b.addr])],
        "  flowControl: {queueTtl: 1s}\n",
    ))
    .await;
    let body = || chat("m", "hi", json!({})).to_string();
    let sheddable = [("x-gateway-inference-objective", "Sheddable")];
    // The pool's state is computed when scrapes land; give it a round.
    eventually("the pool looks saturated", || async {
        let (s, _, _) = gw
            .post_with("/v1/chat/completions", body(), &sheddable)
            .await;
        s == StatusCode::TOO_MANY_REQUESTS
    })
    .await;
    let (s, h, b) = gw
        .post_with("/v1/chat/completions", body(), &sheddable)
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(h["x-llm-d-request-dropped-reason"], "rejected-saturated");
    assert_eq!(error_of(&b)["code"], "pool_saturated");

    // Standard waits for capacity that never comes, then gets 503 at its queue TTL.
    let t0 = Instant::now();
    let (s, h, b) = gw
        .post_with(
            "/v1/chat/completions",
            body(),
            &[("x-gateway-inference-objective", "0")],
        )
        .await;
    let waited = t0.elapsed();
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b:?}");
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(h["x-llm-d-request-dropped-reason"], "rejected-ttl-expired");
    assert!(h.get("retry-after").is_none());
    assert_eq!(error_of(&b)["code"], "queue_timeout");

    // Critical goes at once.
    let (s, _, _) = gw
        .post_with(
            "/v1/chat/completions",
            body(),
            &[("x-gateway-inference-objective", "Critical")],
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let m = gw.metric_text().await;
    assert!(
        metric_sum(&m, "infergate_shed_requests_total{pool=\"p\"}") >= 2.0,
        "{m}"
    );
    let expired = "infergate_flow_rejections_total{pool=\"p\",band=\"Standard\",reason=\"rejected-ttl-expired\"}";
    assert_eq!(metric_sum(&m, expired), 1.0, "{m}");
    let waits = "infergate_flow_queue_wait_seconds_count{pool=\"p\",band=\"Critical\"}";
    assert_eq!(metric_sum(&m, waits), 1.0, "{m}");
    assert!(
        m.contains("infergate_flow_queue_requests{pool=\"p\",band=\"Standard\"} 0"),
        "{m}"
    );
}
