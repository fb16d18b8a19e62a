//! A canary split end to end: `infergate serve` in front of two simulated replicas (instant
//! profile), one serving `llama-stable` and one `llama-canary`, with a rule that sends the
//! model `llama` 90/10 between them. Each replica knows only its own name, so a request whose
//! body was not rewritten would get the replica's 404.
//!
//! Over 10,000 requests the canary's share lands within ±2 percentage points of 10 %; every
//! client sees `llama` in its answer, JSON and SSE alike; a session id keeps a session on one
//! target; `x-gateway-model-name-rewrite` pins a request to a target; and
//! `infergate_rewrites_total` counts exactly what was observed.
//!
//! Run with `--nocapture` to see the measured split.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{infergate, instant_replica, split_response, wait_for, TempDir};
use serde_json::Value;

/// Requests in the measured split, and clients sending them at once.
const REQUESTS: usize = 10_000;
const CLIENTS: usize = 32;
/// The canary's configured share, and how far the measured one may be from it.
const CANARY_SHARE: f64 = 0.10;
const TOLERANCE: f64 = 0.02;

fn config(stable: u16, canary: u16) -> String {
    format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: true}}
  flowControl: {{enabled: false}}
  schedulers:
    - name: stable
      modelName: llama-stable
      modelSelector: {{matchLabels: {{app: stable}}}}
    - name: canary
      modelName: llama-canary
      modelSelector: {{matchLabels: {{app: canary}}}}
  endpoints:
    - address: 127.0.0.1:{stable}
      labels: {{app: stable}}
    - address: 127.0.0.1:{canary}
      labels: {{app: canary}}
  rewrites:
    - name: llama-canary
      matches: [{{model: {{type: Exact, value: llama}}}}]
      targets:
        - {{modelRewrite: llama-stable, weight: 90}}
        - {{modelRewrite: llama-canary, weight: 10}}
      stickiness: {{header: x-session-id}}
"
    )
}

/// An answer: status, lower-cased headers, body (de-chunked).
struct Answer {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

impl Answer {
    /// The port of the replica that served it.
    fn served_by(&self) -> u16 {
        let ep = &self.headers["x-gateway-destination-endpoint"];
        ep.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// Undoes `Transfer-Encoding: chunked`.
fn dechunk(mut raw: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = raw.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        raw = &rest[size + 2..];
    }
}

fn post(port: u16, body: &str, headers: &[(&str, &str)]) -> Answer {
    let raw = common::http_with(
        &format!("127.0.0.1:{port}"),
        "POST",
        "/v1/chat/completions",
        headers,
        body,
        Duration::from_secs(30),
    )
    .expect("the gateway answers");
    let (status, headers, body) = split_response(&raw);
    let headers: HashMap<String, String> = headers.into_iter().collect();
    let body = if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer {
        status,
        headers,
        body,
    }
}

const CHAT: &str =
    r#"{"model": "llama", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}"#;
const STREAM: &str = r#"{"model": "llama", "max_tokens": 4, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}]}"#;

/// A JSON answer that names the client's model.
fn json_ok(a: &Answer) {
    assert_eq!(a.status, 200, "{}", a.body);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["model"], "llama", "{}", a.body);
}

fn rewrites_total(admin: u16, target: &str) -> usize {
    let series = format!("infergate_rewrites_total{{model=\"llama\",target=\"{target}\"}} ");
    common::get(admin, "/metrics")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as usize
}

#[test]
fn a_90_10_split_lands_within_2_percent_sessions_stick_and_clients_see_their_model() {
    let (_stable_sim, stable) = instant_replica("llama-stable");
    let (_canary_sim, canary) = instant_replica("llama-canary");
    let dir = TempDir::new("canary");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, config(stable, canary)).unwrap();

    // `check` prints the rule and has nothing to refuse.
    let check = infergate()
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{report}");
    assert!(
        report.contains(
            "llama-canary: llama → llama-stable weight 90, llama-canary weight 10; sessions \
             stick by header x-session-id"
        ),
        "{report}"
    );
    assert!(!report.contains("would refuse"), "{report}");

    let (_gateway, port, admin) = common::serve_ready(&file, |_| {});
    let mut seen: HashMap<u16, usize> = HashMap::new();

    // The split: small non-streaming requests from many clients at once.
    let started = Instant::now();
    let left = Arc::new(AtomicUsize::new(REQUESTS));
    let served = Arc::new(Mutex::new(HashMap::<u16, usize>::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (left, served) = (Arc::clone(&left), Arc::clone(&served));
            thread::spawn(move || {
                let mut mine: HashMap<u16, usize> = HashMap::new();
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                {
                    let a = post(port, CHAT, &[]);
                    json_ok(&a);
                    *mine.entry(a.served_by()).or_default() += 1;
                }
                let mut all = served.lock().unwrap();
                for (p, n) in mine {
                    *all.entry(p).or_default() += n;
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let took = started.elapsed();
    let split = served.lock().unwrap().clone();
    assert_eq!(split.values().sum::<usize>(), REQUESTS, "{split:?}");
    let to_canary = split.get(&canary).copied().unwrap_or(0);
    let share = to_canary as f64 / REQUESTS as f64;
    eprintln!(
        "canary split: {to_canary} of {REQUESTS} requests = {:.2} % (configured 10 %), {} clients, {:.1} s",
        share * 100.0,
        CLIENTS,
        took.as_secs_f64()
    );
    assert!(
        (share - CANARY_SHARE).abs() <= TOLERANCE,
        "canary got {:.2} %",
        share * 100.0
    );
    for (p, n) in split {
        *seen.entry(p).or_default() += n;
    }

    // Streaming: every `data:` event names the client's model.
    for _ in 0..20 {
        let a = post(port, STREAM, &[]);
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(a.headers["content-type"].starts_with("text/event-stream"));
        let events: Vec<&str> = a
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .collect();
        assert!(events.len() >= 2, "{}", a.body);
        for e in events {
            let v: Value = serde_json::from_str(e).unwrap();
            assert_eq!(v["model"], "llama", "{e}");
        }
        assert!(a.body.contains("data: [DONE]"));
        *seen.entry(a.served_by()).or_default() += 1;
    }

    // Stickiness: each session always lands on the same replica, and sessions are split too.
    let mut sessions_on: HashMap<u16, usize> = HashMap::new();
    for s in 0..200 {
        let id = format!("session-{s}");
        let first = post(port, CHAT, &[("x-session-id", &id)]);
        json_ok(&first);
        for _ in 0..2 {
            let again = post(port, CHAT, &[("x-session-id", &id)]);
            json_ok(&again);
            assert_eq!(again.served_by(), first.served_by(), "{id} moved");
        }
        *sessions_on.entry(first.served_by()).or_default() += 1;
        *seen.entry(first.served_by()).or_default() += 3;
    }
    assert!(
        sessions_on.get(&canary).copied().unwrap_or(0) > 0
            && sessions_on.get(&stable).copied().unwrap_or(0) > 0,
        "{sessions_on:?}"
    );

    // The rewrite header pins a request to a target; the answer still names `llama`.
    for _ in 0..20 {
        let a = post(
            port,
            CHAT,
            &[("x-gateway-model-name-rewrite", "llama-canary")],
        );
        json_ok(&a);
        assert_eq!(a.served_by(), canary);
    }
    *seen.entry(canary).or_default() += 20;
    let unknown = post(port, CHAT, &[("x-gateway-model-name-rewrite", "llama-9")]);
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    // The metric counts what was observed, by target.
    wait_for("the rewrite counters", || {
        rewrites_total(admin, "llama-canary") == seen[&canary]
            && rewrites_total(admin, "llama-stable") == seen[&stable]
    });
}
