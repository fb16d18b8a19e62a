//! Streaming passes through untouched and as it arrives; usage and TTFT are counted on the way.

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
    let gap = Duration::from_millis(150);
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "text/event-stream",
        chunks: EVENTS.to_vec(),
        gap,
    })
    .await;
    let gw = TestGateway::ready(&config_yaml(&[PoolDef::new("p", "m", vec![up.addr])], "")).await;
    let sent = Instant::now();
    let (status, frames) = stream(gw.addr, &chat("m", "hello", json!({"stream": true}))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(joined(&frames), EVENTS.concat().into_bytes());
    // The first event reached the client long before the last was sent: nothing was buffered.
    let first = frames[0].0.duration_since(sent);
    let last = frames.last().unwrap().0.duration_since(sent);
    assert!(first < gap * 3, "first event after {first:?}");
    assert!(last >= gap * 5, "last event after {last:?}");

    // Usage came from the split event; TTFT was observed once.
    let m = gw.metric_text().await;
    assert_eq!(
        metric_sum(&m, "infergate_prompt_tokens_total{model=\"m\"}"),
        11.0,
        "{m}"
    );
    assert_eq!(
        metric_sum(&m, "infergate_completion_tokens_total{model=\"m\"}"),
        2.0
    );
    assert_eq!(
        metric_sum(&m, "infergate_cached_tokens_total{model=\"m\"}"),
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
    let gw = TestGateway::ready(&config_yaml(
        &[PoolDef::new("llama", LLAMA, vec![behind.addr])],
        "",
    ))
    .await;
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
            &format!("infergate_completion_tokens_total{{model=\"{LLAMA}\"}}")
        ),
        24.0,
        "{m}"
    );
}
