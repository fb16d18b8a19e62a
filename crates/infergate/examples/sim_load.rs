//! An open-loop load generator for simulated servers: streaming chat requests at a fixed rate,
//! spread round-robin over ports, for a bounded time. Prints requests sent, completed, failed,
//! and tokens received. Used to measure how much CPU the simulator itself needs.
//!
//! `cargo run --release -p infergate --example sim_load -- 127.0.0.1 8001-8008 200 30 64`
//! (host, port range, requests per second, seconds, max_tokens).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let host = args.first().cloned().unwrap_or_else(|| "127.0.0.1".into());
    let (lo, hi) = args
        .get(1)
        .and_then(|r| r.split_once('-'))
        .map(|(a, b)| (a.parse::<u16>().unwrap(), b.parse::<u16>().unwrap()))
        .unwrap_or((8000, 8000));
    let rate: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let seconds: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let max_tokens: u32 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(64);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let (done, failed, tokens) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let start = Instant::now();
    let total = (rate * seconds) as u64;
    let mut tasks = Vec::new();
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let port = lo + (i % u64::from(hi - lo + 1)) as u16;
        let body = format!(
            r#"{{"model":"meta-llama/Llama-3.1-8B-Instruct","stream":true,"max_tokens":{max_tokens},"ignore_eos":true,"messages":[{{"role":"system","content":"You are a helpful assistant that answers briefly."}},{{"role":"user","content":"Question {i}: what is the capital of country number {i}?"}}]}}"#
        );
        let req = hyper::Request::post(format!("http://{host}:{port}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let (client, done, failed, tokens) =
            (client.clone(), done.clone(), failed.clone(), tokens.clone());
        tasks.push(tokio::spawn(async move {
            match client.request(req).await {
                Ok(resp) if resp.status().is_success() => {
                    let mut body = resp.into_body();
                    while let Some(Ok(frame)) = body.frame().await {
                        if let Some(data) = frame.data_ref() {
                            let n = data.windows(6).filter(|w| w == b"data: ").count();
                            tokens.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "sent {total} completed {} failed {} sse_events {} in {:.1}s",
        done.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        tokens.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}
