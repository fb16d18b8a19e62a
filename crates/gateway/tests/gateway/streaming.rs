//! Streaming passes through untouched and as it arrives; usage and TTFT are counted on the way.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::time::{timeout, Instant};

use crate::common::*;

const EVENTS: [&str; 5] = [
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    // An event split across two chunks, as TCP may deliver it.
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"total_tokens\":13,",
    "\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n",
    "data: [DONE]\n\n",
];

/// Frames of a streamed response with their arrival times.
async fn stream(addr: std::net::SocketAddr, body: &Value) -> (StatusCode, Vec<(Instant, Bytes)>) {
    stream_releasing(addr, body, None).await
}

/// [`stream`], notifying `release` once the first frame has arrived.
async fn stream_releasing(
    addr: std::net::SocketAddr,
    body: &Value,
    release: Option<&tokio::sync::Notify>,
) -> (StatusCode, Vec<(Instant, Bytes)>) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let req = Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    timeout(CALL_LIMIT, async {
        let resp = client.request(req).await.unwrap();
        let status = resp.status();
        let mut body = resp.into_body();
        let mut frames = Vec::new();
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.unwrap().into_data() {
                frames.push((Instant::now(), d));
                if let (1, Some(release)) = (frames.len(), release) {
                    release.notify_one();
                }
            }
        }
        (status, frames)
    })
    .await
    .expect("the stream ended in time")
}

fn joined(frames: &[(Instant, Bytes)]) -> Vec<u8> {
    frames.iter().flat_map(|(_, b)| b.to_vec()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_passes_through_byte_for_byte_as_it_arrives() {
    // The replica sends its first event, then waits for the client to have it before it sends
    // the rest: the stream ends only if nothing on the way buffered it, however slow the
    // machine (a measured delay would also count the machine's stalls).
    let held = Arc::new(tokio::sync::Notify::new());
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "text/event-stream",
        chunks: EVENTS.to_vec(),
        gap: Duration::from_millis(20),
        held: Some(Arc::clone(&held)),
    })
    .await;
    let gw = TestGateway::ready(&config_yaml(&[PoolDef::new("p", "m", vec![up.addr])], "")).await;
    let body = chat("m", "hello", json!({"stream": true}));
    let (status, frames) = stream_releasing(gw.addr, &body, Some(&held)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(joined(&frames), EVENTS.concat().into_bytes());

    // Usage came from the split event; TTFT was observed once.
    let m = gw.metric_text().await;
    assert_eq!(
        metric_sum(&m, "infergate_prompt_tokens_total{model=\"m\",pool=\"p\"}"),
        11.0,
        "{m}"
    );
    assert_eq!(
        metric_sum(
            &m,
            "infergate_completion_tokens_total{model=\"m\",pool=\"p\"}"
        ),
        2.0
    );
    assert_eq!(
        metric_sum(&m, "infergate_cached_tokens_total{model=\"m\",pool=\"p\"}"),
        4.0
    );
    assert_eq!(
        metric_sum(
            &m,
            "infergate_time_to_first_token_seconds_count{model=\"m\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_sum(
            &m,
            "infergate_e2e_request_latency_seconds_count{model=\"m\"}"
        ),
        1.0
    );
    assert_eq!(metric_sum(&m, "infergate_in_flight_responses"), 0.0);
}

/// Replaces the `"created":<seconds>` stamps, the one thing two identical replicas may write
/// differently.
fn without_created(bytes: &[u8]) -> String {
    let s = String::from_utf8(bytes.to_vec()).unwrap();
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find("\"created\":") {
        out.push_str(&rest[..i + 10]);
        rest = rest[i + 10..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('N');
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_chat_through_the_gateway_is_what_the_replica_sends_directly() {
    let behind = Replica::start(instant()).await;
    let direct = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(behind.addr, "")).await;
    let body = chat(
        LLAMA,
        "Tell me about KV caches.",
        json!({"stream": true, "max_tokens": 24, "ignore_eos": true, "stream_options": {"include_usage": true}}),
    );
    let (s1, via_gateway) = stream(gw.addr, &body).await;
    let (s2, straight) = stream(direct.addr, &body).await;
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK));
    let (a, b) = (joined(&via_gateway), joined(&straight));
    assert!(a.ends_with(b"data: [DONE]\n\n"));
    assert_eq!(without_created(&a), without_created(&b));
    let m = gw.metric_text().await;
    assert_eq!(
        metric_sum(
            &m,
            &format!("infergate_completion_tokens_total{{model=\"{LLAMA}\",pool=\"llama\"}}")
        ),
        24.0,
        "{m}"
    );
}
