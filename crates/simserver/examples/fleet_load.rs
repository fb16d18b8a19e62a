//! How much CPU a simulated fleet costs under load: 8 Llama-3.1-8B/H100 replicas in one child
//! process, driven in real time at 200 streaming chat requests per second in total (the
//! KubeCon shared-prefix shape: ~200-token prompts, 64 output tokens), measuring the child's
//! CPU time from `/proc`.
//!
//! ```text
//! cargo run --release -p infergate-simserver --example fleet_load -- [replicas] [rate] [secs]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: fail loudly

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use infergate_engine::{EngineConfig, Profile};
use infergate_simserver::{serve_fleet, ReplicaSpec};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve") {
        serve(args[2].parse().unwrap());
        return;
    }
    let replicas: usize = args.get(1).map_or(8, |a| a.parse().unwrap());
    let rate: f64 = args.get(2).map_or(200.0, |a| a.parse().unwrap());
    let secs: u64 = args.get(3).map_or(20, |a| a.parse().unwrap());
    load(replicas, rate, secs);
}

/// Child: the fleet. Prints its ports, then serves until stdin closes.
fn serve(replicas: usize) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut fleet = Vec::new();
        let mut ports = Vec::new();
        for i in 0..replicas {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            ports.push(listener.local_addr().unwrap().port().to_string());
            let mut spec = ReplicaSpec::new(EngineConfig::new(
                Profile::lookup("llama-3.1-8b", "h100", 1).unwrap(),
            ));
            spec.seed = i as u64;
            fleet.push((spec, listener));
        }
        println!("{}", ports.join(" "));
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin()
                .read_line(&mut line)
                .map(|n| n > 0)
                .unwrap_or(false)
            {}
        });
        serve_fleet(fleet, async {
            let _ = stdin_closed.await;
        })
        .await
        .unwrap();
    });
}

/// User + system CPU seconds of a process, from `/proc/<pid>/stat` (in USER_HZ = 100 ticks).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

fn load(replicas: usize, rate: f64, secs: u64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--serve", &replicas.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ports = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ports)
        .unwrap();
    let ports: Vec<u16> = ports
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let pid = child.id();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (done, tokens) = runtime.block_on(async {
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let done = Arc::new(AtomicU64::new(0));
        let tokens = Arc::new(AtomicU64::new(0));
        let warmup = Duration::from_secs(2);
        let start = Instant::now();
        let mut measured_from = None;
        let mut next = start;
        let mut i = 0u64;
        let system = "You are a helpful assistant for a routing benchmark. ".repeat(10);
        while start.elapsed() < warmup + Duration::from_secs(secs) {
            if measured_from.is_none() && start.elapsed() >= warmup {
                measured_from = Some((Instant::now(), cpu_seconds(pid)));
            }
            tokio::time::sleep_until(next.into()).await;
            next += Duration::from_secs_f64(1.0 / rate);
            let port = ports[(i as usize) % ports.len()];
            let body = serde_json::json!({
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": format!("Question {} about the fleet?", i % 100)}],
                "stream": true, "max_tokens": 64, "ignore_eos": true,
            });
            i += 1;
            let (client, done, tokens) = (client.clone(), done.clone(), tokens.clone());
            tokio::spawn(async move {
                let request = hyper::Request::post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .unwrap();
                let Ok(response) = client.request(request).await else { return };
                let Ok(body) = response.into_body().collect().await else { return };
                let text = body.to_bytes();
                tokens.fetch_add(text.windows(10).filter(|w| w == b"\"content\":").count() as u64, Ordering::Relaxed);
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        let (t0, cpu0) = measured_from.unwrap();
        let cpu = cpu_seconds(pid) - cpu0;
        let wall = t0.elapsed().as_secs_f64();
        println!(
            "{replicas} replicas, {rate} req/s offered: server CPU {cpu:.2} s over {wall:.1} s = {:.3} cores",
            cpu / wall
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        (done.load(Ordering::Relaxed), tokens.load(Ordering::Relaxed))
    });
    println!("{done} requests completed, {tokens} content chunks received");
    drop(child.stdin.take());
    let _ = child.wait();
}
