//! Flow control end to end: `infergate serve` in front of a simulated replica slow enough to
//! saturate (an 8B model on an L4, two sequences at a time). Under a flood of Standard traffic,
//! Critical requests all succeed, Sheddable ones are shed with 429, Retry-After and the dropped
//! reason, and Standard requests queued past their TTL get 503.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{free_port, infergate, split_response, wait_for, Running};

/// Standard clients looping at once: the replica holds two running and (at the ceiling) two
/// waiting, so most of these are always queued in the gateway.
const FLOOD: usize = 10;

/// Status, lower-cased headers and body of a raw HTTP/1.1 response.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    took: Duration,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn chat(port: u16, band: &str) -> Answer {
    // Twenty tokens at about 63 ms each: over a second per request on this replica.
    let body = r#"{"model": "llama", "max_tokens": 20, "ignore_eos": true, "messages": [{"role": "user", "content": "hello there"}]}"#;
    let t0 = Instant::now();
    let raw = common::http_with(
        &format!("127.0.0.1:{port}"),
        "POST",
        "/v1/chat/completions",
        &[("x-gateway-inference-objective", band)],
        body,
        Duration::from_secs(60),
    )
    .expect("the gateway answers");
    let took = t0.elapsed();
    let (status, headers, body) = split_response(&raw);
    Answer {
        status,
        headers,
        body: body.to_owned(),
        took,
    }
}

fn config(replica: u16) -> String {
    format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: true}}
  flowControl:
    saturation: {{queueDepthThreshold: 2}}
    bands:
      - {{name: Standard, queueTtl: 1s}}
      - {{name: Critical, queueTtl: 60s}}
  schedulers:
    - name: llama
      modelName: llama
      modelSelector: {{matchLabels: {{app: llama}}}}
  endpoints:
    - address: 127.0.0.1:{replica}
      labels: {{app: llama}}
"
    )
}

fn metric(admin: u16, series: &str) -> f64 {
    let text = common::get(admin, "/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn under_overload_critical_succeeds_sheddable_is_shed_and_standard_expires() {
    let replica = free_port();
    let _sim = Running(
        infergate()
            .args(["sim", "--model", "llama-3.1-8b", "--gpu", "l4"])
            .args(["--max-num-seqs", "2", "--served-model-name", "llama"])
            .args(["--port", &replica.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let dir = std::env::temp_dir().join(format!("infergate-flow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    std::fs::write(&file, config(replica)).unwrap();
    let (port, admin) = (free_port(), free_port());
    let _gateway = Running(
        infergate()
            .args(["serve", "--config"])
            .arg(&file)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("readyz", || {
        common::get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    });

    // The flood: Standard clients that send again as soon as they are answered.
    let stop = Arc::new(AtomicBool::new(false));
    let flood: Vec<_> = (0..FLOOD)
        .map(|_| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    answers.push(chat(port, "Standard"));
                }
                answers
            })
        })
        .collect();
    wait_for("the pool to saturate", || {
        metric(admin, "infergate_pool_saturation{pool=\"llama\"}") >= 1.0
    });

    // Sheddable traffic is shed at once.
    for _ in 0..5 {
        let a = chat(port, "Sheddable");
        assert_eq!(a.status, 429, "{}", a.body);
        let retry: u64 = a
            .header("retry-after")
            .expect("Retry-After")
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(
            a.header("x-llm-d-request-dropped-reason"),
            Some("rejected-saturated")
        );
        assert!(a.body.contains("\"pool_saturated\""), "{}", a.body);
    }

    // Critical traffic goes ahead of the flood and every request succeeds.
    let critical: Vec<_> = (0..4)
        .map(|_| thread::spawn(move || chat(port, "Critical")))
        .collect();
    for c in critical {
        let a = c.join().unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
    }

    stop.store(true, Ordering::Relaxed);
    let standard: Vec<Answer> = flood.into_iter().flat_map(|t| t.join().unwrap()).collect();
    // Standard requests either got through or waited their whole TTL for capacity.
    let expired: Vec<&Answer> = standard.iter().filter(|a| a.status == 503).collect();
    assert!(standard.iter().any(|a| a.status == 200));
    assert!(!expired.is_empty(), "no Standard request expired");
    for a in &standard {
        assert!(matches!(a.status, 200 | 503), "{} {}", a.status, a.body);
    }
    for a in &expired {
        assert_eq!(
            a.header("x-llm-d-request-dropped-reason"),
            Some("rejected-ttl-expired")
        );
        assert!(a.body.contains("\"queue_timeout\""), "{}", a.body);
        assert!(a.took >= Duration::from_secs(1), "{:?}", a.took);
    }

    let rejected = |band: &str, reason: &str| {
        metric(
            admin,
            &format!(
                "infergate_flow_rejections_total{{pool=\"llama\",band=\"{band}\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert_eq!(rejected("Sheddable", "rejected-saturated"), 5.0);
    assert_eq!(
        rejected("Standard", "rejected-ttl-expired"),
        expired.len() as f64
    );
    assert_eq!(rejected("Critical", "rejected-ttl-expired"), 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}
