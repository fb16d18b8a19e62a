//! Wall-clock behaviour: the done criterion, time scaling and slowdown. A test binary of
//! its own, so no other test competes for the CPU while these measure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

#[path = "server/common.rs"]
#[allow(dead_code)] // shared with tests/server; not every helper is used here
mod common;

use common::{chat, fast_spec, Replica, Stream};
use serde_json::json;
use std::time::Duration;
use tokio::time::Instant;

/// A user message that the chat template turns into exactly 204 tokens (816 bytes).
fn prompt_of_204_tokens() -> String {
    let filler = "Routers that read live metrics from model servers place requests better. ";
    let mut text = filler.repeat(10);
    text.truncate(816 - 116);
    text
}

struct Latency {
    ttft: Duration,
    mean_itl: Duration,
    prompt_tokens: u64,
}

fn latency(s: &Stream) -> Latency {
    let times = s.content_times();
    let first = times[0];
    let last = *times.last().unwrap();
    let chunks = s.chunks();
    let usage = &chunks.last().unwrap()["usage"];
    Latency {
        ttft: first - s.sent_at,
        mean_itl: (last - first) / (times.len() as u32 - 1),
        prompt_tokens: usage["prompt_tokens"].as_u64().unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_8b_on_h100_streams_at_the_measured_anchor_in_real_time() {
    // The done criterion (KubeCon anchor at 1 req/s: TTFT 31 ms, ITL 7.2 ms). Wall-clock
    // measurements on a shared machine are noisy: generous bounds, one retry.
    let server = Replica::start(fast_spec(1.0)).await;
    let body = chat(
        &prompt_of_204_tokens(),
        json!({"stream": true, "max_tokens": 64, "ignore_eos": true,
               "stream_options": {"include_usage": true}}),
    );
    let mut seen = Vec::new();
    for attempt in 0..2 {
        // A distinct prompt each time, so the retry is not a prefix-cache hit.
        let mut body = body.clone();
        body["messages"][0]["content"] =
            json!(format!("{attempt}{}", &prompt_of_204_tokens()[1..]));
        let s = server.stream("/v1/chat/completions", &body).await;
        let l = latency(&s);
        assert_eq!(l.prompt_tokens, 204);
        assert_eq!(s.content_times().len(), 64);
        let ok = (Duration::from_millis(20)..=Duration::from_millis(45)).contains(&l.ttft)
            && (Duration::from_micros(5_500)..=Duration::from_millis(9)).contains(&l.mean_itl);
        eprintln!(
            "attempt {attempt}: TTFT {:?}, mean ITL {:?}",
            l.ttft, l.mean_itl
        );
        seen.push((l.ttft, l.mean_itl));
        if ok {
            return;
        }
    }
    panic!("TTFT / mean ITL out of bounds on both tries: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_larger_time_scale_runs_the_same_request_faster() {
    let body = chat(
        "Tell me a story",
        json!({"max_tokens": 60, "ignore_eos": true}),
    );
    let mut walls = Vec::new();
    for scale in [1.0, 10.0] {
        let server = Replica::start(fast_spec(scale)).await;
        let started = Instant::now();
        let (status, _) = server.post_json("/v1/chat/completions", &body).await;
        assert!(status.is_success());
        walls.push(started.elapsed());
    }
    // 60 tokens ≈ 15 ms + 60 × 7 ms ≈ 0.45 s in real time; ten times faster scaled.
    assert!(walls[0] > Duration::from_millis(300), "{walls:?}");
    assert!(walls[1] < walls[0] / 4, "{walls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowdown_stretches_step_time() {
    let server = Replica::start(fast_spec(20.0)).await;
    let body = chat("Go", json!({"max_tokens": 100, "ignore_eos": true}));
    let started = Instant::now();
    server.post_json("/v1/chat/completions", &body).await;
    let normal = started.elapsed();
    server
        .post_json("/sim/faults", &json!({"slowdown": 4.0}))
        .await;
    let started = Instant::now();
    server.post_json("/v1/chat/completions", &body).await;
    let slow = started.elapsed();
    let ratio = slow.as_secs_f64() / normal.as_secs_f64();
    assert!((2.5..6.0).contains(&ratio), "{normal:?} vs {slow:?}");
}
