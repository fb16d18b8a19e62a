//! `infergate demo` as a user runs it: it starts, prints where to curl, and answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Running;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

fn post(addr: &str, path: &str, body: &str) -> String {
    common::http(addr, "POST", path, body, Duration::from_secs(20)).unwrap()
}

#[test]
fn demo_starts_prints_a_curl_line_and_answers_it() {
    let mut child = common::infergate()
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--time-scale",
            "50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _running = Running(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut banner = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no banner; got {banner:?}"));
        let done = line.starts_with("Ctrl-C");
        banner.push(line);
        if done {
            break;
        }
    }
    let text = banner.join("\n");
    let gateway = banner
        .iter()
        .find_map(|l| l.trim().strip_prefix("gateway  http://"))
        .unwrap_or_else(|| panic!("no gateway line:\n{text}"))
        .to_owned();
    assert!(text.contains("curl -N http://"), "{text}");
    assert!(text.contains("/metrics"), "{text}");
    assert!(
        text.contains("Qwen/Qwen3-32B") && text.contains("sql-lora"),
        "{text}"
    );

    // What the printed curl line sends.
    let body = r#"{"model": "meta-llama/Llama-3.1-8B-Instruct", "stream": true, "max_tokens": 8, "messages": [{"role": "user", "content": "Hello!"}]}"#;
    let answer = post(&gateway, "/v1/chat/completions", body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("data: [DONE]"), "{answer}");
    // The demo explains each pick: every Llama endpoint's total (llm-d's header) and the
    // scorers' parts behind it, the primary being the endpoint that answered.
    let (_, headers, _) = common::split_response(&answer);
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {answer}"))
    };
    let served = header("x-gateway-destination-endpoint");
    let scores: serde_json::Value =
        serde_json::from_str(&header("x-gateway-destination-endpoint-scores")).unwrap();
    assert_eq!(scores.as_object().unwrap().len(), 4, "{scores}");
    let why: serde_json::Value = serde_json::from_str(&header("x-infergate-pick")).unwrap();
    assert_eq!(why["primary"], served.as_str(), "{why}");
    assert!(why["decision_seconds"].as_f64().unwrap() > 0.0, "{why}");
    let candidates = why["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 4, "{why}");
    for c in candidates {
        let parts = c["scores"].as_object().unwrap();
        assert!(!parts.is_empty(), "{why}");
        let sum: f64 = parts.values().map(|v| v.as_f64().unwrap()).sum();
        let total = c["total"].as_f64().unwrap();
        assert!((sum - total).abs() < 1e-9, "{why}");
        assert_eq!(scores[c["endpoint"].as_str().unwrap()], c["total"], "{why}");
    }
    // An adapter and the second pool answer too.
    let adapter = post(
        &gateway,
        "/v1/chat/completions",
        r#"{"model": "sql-lora", "max_tokens": 4, "messages": [{"role": "user", "content": "SELECT"}]}"#,
    );
    assert!(adapter.starts_with("HTTP/1.1 200"), "{adapter}");
    let qwen = post(
        &gateway,
        "/v1/completions",
        r#"{"model": "Qwen/Qwen3-32B", "max_tokens": 4, "prompt": "Once"}"#,
    );
    assert!(qwen.starts_with("HTTP/1.1 200"), "{qwen}");
}
