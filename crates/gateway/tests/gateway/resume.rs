//! A dying pod loses no stream: when the pod under a stream crashes, the gateway goes on at
//! another pod from the tokens already sent, and the client's stream is the one an unbroken
//! answer would have been (same id, one role chunk, every token once, `usage` counting what
//! it received). The answers are seeded, so the simulator writes the same words wherever the
//! answer is written, and each stream is checked word for word against them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use infergate_simserver::seeded_answer;
use infergate_test_support::client::{stream, stream_interrupted, Stream};
use infergate_test_support::replicas::fast_spec;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::common::*;

/// A seeded streamed chat of exactly `tokens` tokens, with a usage chunk.
fn seeded_chat(seed: u64, tokens: u32) -> Value {
    chat(
        LLAMA,
        &format!("question {seed}"),
        json!({"stream": true, "max_tokens": tokens, "ignore_eos": true, "seed": seed,
               "stream_options": {"include_usage": true}}),
    )
}

/// Why `s` is not the whole, unbroken answer of `tokens` tokens with `seed`, if it is not.
fn broken(
    s: &Stream,
    seed: u64,
    tokens: u32,
    text_of: fn(&Value) -> Option<&str>,
) -> Option<String> {
    if s.status != StatusCode::OK {
        return Some(format!("status {}: {}", s.status, s.raw));
    }
    if s.events.last().map(|(_, e)| e.as_str()) != Some("[DONE]") {
        return Some(format!("no [DONE] at the end: {}", s.raw));
    }
    if s.events.iter().filter(|(_, e)| e == "[DONE]").count() != 1 {
        return Some("more than one [DONE]".into());
    }
    let chunks = s.chunks();
    if let Some(e) = chunks.iter().find(|c| c.get("error").is_some()) {
        return Some(format!("an error event: {e}"));
    }
    let ids: Vec<&str> = chunks.iter().filter_map(|c| c["id"].as_str()).collect();
    if ids.windows(2).any(|w| w[0] != w[1]) {
        return Some(format!("ids changed: {ids:?}"));
    }
    let roles = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"].get("role").is_some())
        .count();
    if roles > 1 {
        return Some(format!("{roles} role chunks"));
    }
    let text: String = chunks.iter().filter_map(text_of).collect();
    let expected = seeded_answer(seed, tokens);
    if text != expected {
        return Some(format!("text {text:?}, expected {expected:?}"));
    }
    let usage = chunks
        .iter()
        .rev()
        .find_map(|c| c.get("usage").filter(|u| !u.is_null()));
    match usage.and_then(|u| u["completion_tokens"].as_u64()) {
        Some(n) if n == u64::from(tokens) => None,
        other => Some(format!(
            "usage says {other:?} completion tokens, not {tokens}"
        )),
    }
}

fn chat_text(c: &Value) -> Option<&str> {
    c["choices"][0]["delta"]["content"].as_str()
}

fn completion_text(c: &Value) -> Option<&str> {
    c["choices"][0]["text"].as_str()
}

/// `infergate_stream_resumes_total` of pool `llama` with `outcome`, over every endpoint.
fn resumes(metrics: &str, outcome: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("infergate_stream_resumes_total{pool=\"llama\""))
        .filter(|l| l.contains(&format!("outcome=\"{outcome}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b)
}

/// Crashes the replica at `endpoint` (one of `replicas`) now; with `restart`, it comes back
/// after 300 ms down and 200 ms starting up.
async fn crash(replicas: &HashMap<String, Replica>, endpoint: &str, restart: bool) {
    let r = replicas
        .get(endpoint)
        .unwrap_or_else(|| panic!("the stream named no known endpoint: {endpoint:?}"));
    let mut faults = json!({"crash_after_secs": 0.0});
    if restart {
        faults["restart"] = json!({"down_secs": 0.3, "startup_secs": 0.2});
    }
    r.set_faults(faults).await;
}

async fn fleet(n: usize) -> (HashMap<String, Replica>, Vec<SocketAddr>) {
    let mut replicas = HashMap::new();
    let mut addrs = Vec::new();
    for _ in 0..n {
        let r = Replica::start(real_time()).await;
        addrs.push(r.addr);
        replicas.insert(r.addr.to_string(), r);
    }
    (replicas, addrs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_whose_pod_crashes_mid_stream_goes_on_at_another_word_for_word() {
    let (replicas, addrs) = fleet(2).await;
    let gw = TestGateway::ready(&config_yaml(&[PoolDef::new("llama", LLAMA, addrs)], "")).await;
    let body = seeded_chat(42, 80);
    let crashed = std::sync::Mutex::new(String::new());
    let s = stream_interrupted(gw.addr, "/v1/chat/completions", &body, 10, |endpoint| {
        let (replicas, crashed) = (&replicas, &crashed);
        async move {
            crash(replicas, &endpoint, false).await;
            *crashed.lock().unwrap() = endpoint;
        }
    })
    .await
    .unwrap();
    if let Some(why) = broken(&s, 42, 80, chat_text) {
        panic!("{why}\n{}", s.raw);
    }
    // The usage counts what the client received: its own prompt, and 80 completion tokens of
    // which the first pod wrote some and the second the rest.
    let crashed = crashed.lock().unwrap().clone();
    let survivor = replicas
        .iter()
        .find(|(addr, _)| **addr != crashed)
        .map(|(_, r)| r)
        .unwrap();
    let whole = survivor.stream("/v1/chat/completions", &body).await;
    let usage = |s: &Stream| {
        s.chunks()
            .into_iter()
            .rev()
            .find_map(|c| c.get("usage").filter(|u| !u.is_null()).cloned())
            .unwrap()
    };
    assert_eq!(usage(&s)["prompt_tokens"], usage(&whole)["prompt_tokens"]);
    assert_eq!(usage(&s)["total_tokens"], usage(&whole)["total_tokens"]);
    let m = gw.metric_text().await;
    assert_eq!(resumes(&m, "resumed"), 1.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_goes_on_from_its_prompt_and_the_text_so_far() {
    let (replicas, addrs) = fleet(2).await;
    let gw = TestGateway::ready(&config_yaml(&[PoolDef::new("llama", LLAMA, addrs)], "")).await;
    let body = json!({"model": LLAMA, "prompt": "Tell me about routers.", "stream": true,
                      "max_tokens": 60, "ignore_eos": true, "seed": 7,
                      "stream_options": {"include_usage": true}});
    let s = stream_interrupted(gw.addr, "/v1/completions", &body, 12, |endpoint| {
        let replicas = &replicas;
        async move { crash(replicas, &endpoint, false).await }
    })
    .await
    .unwrap();
    if let Some(why) = broken(&s, 7, 60, completion_text) {
        panic!("{why}\n{}", s.raw);
    }
    let m = gw.metric_text().await;
    assert_eq!(resumes(&m, "resumed"), 1.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resume_off_a_crash_ends_the_stream_with_an_error_event() {
    let (replicas, addrs) = fleet(2).await;
    let mut pool = PoolDef::new("llama", LLAMA, addrs);
    pool.extra = "      resumeStreams: false\n";
    let gw = TestGateway::ready(&config_yaml(&[pool], "")).await;
    let s = stream_interrupted(
        gw.addr,
        "/v1/chat/completions",
        &seeded_chat(1, 80),
        10,
        |e| {
            let replicas = &replicas;
            async move { crash(replicas, &e, false).await }
        },
    )
    .await
    .unwrap();
    let last = s.chunks().pop().unwrap();
    assert_eq!(last["error"]["code"], "stream_interrupted", "{}", s.raw);
    let m = gw.metric_text().await;
    assert_eq!(resumes(&m, "resumed"), 0.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_streams_with_pods_killed_at_random_moments_lose_none() {
    // Four replicas at twice real time: a stream of 64 tokens lasts about a quarter of a
    // second, so every crash lands in the middle of several.
    let mut replicas = HashMap::new();
    let mut addrs = Vec::new();
    for _ in 0..4 {
        let r = Replica::start(fast_spec(2.0)).await;
        addrs.push(r.addr);
        replicas.insert(r.addr.to_string(), r);
    }
    let gw = TestGateway::ready(&config_yaml(
        &[PoolDef::new("llama", LLAMA, addrs.clone())],
        "",
    ))
    .await;
    let replicas = Arc::new(replicas);
    let stop = Arc::new(AtomicBool::new(false));
    // A pod, chosen by a seeded draw, crashes every 0.6 to 0.9 s, and is back (down 0.3 s,
    // starting 0.2 s) before the next goes: the pool always has room for every stream, so a
    // stream that breaks is the gateway's doing.
    let killer = {
        let (replicas, stop, addrs) = (Arc::clone(&replicas), Arc::clone(&stop), addrs.clone());
        tokio::spawn(async move {
            let mut rng = infergate_picker::SplitMix64::new(19);
            let mut kills = 0;
            loop {
                let wait = 600 + (rng.next_u64() % 300);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                if stop.load(Ordering::Relaxed) {
                    break kills;
                }
                let victim = addrs[(rng.next_u64() % addrs.len() as u64) as usize].to_string();
                crash(&replicas, &victim, true).await;
                kills += 1;
            }
        })
    };
    const STREAMS: u64 = 1_000;
    const CLIENTS: u64 = 16;
    const TOKENS: u32 = 64;
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let addr = gw.addr;
        clients.push(tokio::spawn(async move {
            let mut broken_streams = Vec::new();
            for seed in (c..STREAMS).step_by(CLIENTS as usize) {
                let s = stream(addr, "/v1/chat/completions", &seeded_chat(seed, TOKENS)).await;
                let why = match &s {
                    Ok(s) => broken(s, seed, TOKENS, chat_text),
                    Err(e) => Some(e.clone()),
                };
                if let Some(why) = why {
                    broken_streams.push(format!("stream {seed}: {why}"));
                }
            }
            broken_streams
        }));
    }
    let mut broken_streams = Vec::new();
    for c in clients {
        broken_streams.extend(c.await.unwrap());
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let kills = killer.await.unwrap();
    let m = gw.metric_text().await;
    let (resumed, finished, failed) = (
        resumes(&m, "resumed"),
        resumes(&m, "finished"),
        resumes(&m, "failed"),
    );
    eprintln!(
        "{STREAMS} streams in {took:?}, {kills} pods killed: {resumed} resumed, {finished} \
         finished by the gateway, {failed} not resumed; {} broken",
        broken_streams.len()
    );
    let per_endpoint: Vec<&str> = m
        .lines()
        .filter(|l| {
            l.starts_with("infergate_endpoint_ejections_total")
                || l.starts_with("infergate_routing_decisions_total")
                || l.starts_with("infergate_scrape_errors_total")
                || l.starts_with("infergate_upstream_retries_total")
        })
        .collect();
    assert!(
        broken_streams.is_empty(),
        "{per_endpoint:#?}\n{} broken streams: {:#?}",
        broken_streams.len(),
        &broken_streams[..broken_streams.len().min(10)]
    );
    assert!(kills >= 10, "only {kills} pods killed");
    assert!(
        resumed >= 20.0,
        "only {resumed} streams lost their pod: the test proved little"
    );
    assert_eq!(failed, 0.0, "{m}");
}
