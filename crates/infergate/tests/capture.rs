//! `infergate serve --capture` as an operator runs it: requests through the gateway to a
//! simulated replica (an adapter, a tenant, a band, a shared prefix), a SIGTERM, and the capture
//! read back with the bench's reader — every request there, with its fields, sharing block
//! hashes exactly where its prompt shared a prefix with the same model's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{http_with, instant_replica_with, terminate, TempDir};
use infergate_bench::trace::{read_capture_jsonl, TraceFormat};
use infergate_config::gateway::Band;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const ADAPTER: &str = "sql-lora";

fn config(replica: u16) -> String {
    let adapters = format!("      loraAdapters: [{ADAPTER}]\n");
    common::one_pool_config("llama", replica, "", &adapters)
}

/// A completion of `max_tokens` for `prompt` to `model`, streamed with a final usage event or
/// buffered.
fn completion(model: &str, prompt: &str, stream: bool, max_tokens: u32) -> String {
    let mut body = serde_json::json!({
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        // The simulator samples where an answer stops; this makes it exactly max_tokens.
        "ignore_eos": true,
        "stream": stream,
    });
    if stream {
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    body.to_string()
}

#[test]
fn serve_captures_every_completed_request_and_flushes_on_sigterm() {
    // 1 ms a step: short answers come at once, an 800-token one streams for about a second.
    let (_sim, replica) = instant_replica_with(
        "llama",
        &["--max-loras", "2", "--lora", ADAPTER, "--slowdown", "1000"],
    );
    let dir = TempDir::new("capture-it");
    let (file, capture) = (
        dir.path().join("gateway.yaml"),
        dir.path().join("capture.jsonl"),
    );
    std::fs::write(&file, config(replica)).unwrap();
    // Killed if the test fails before SIGTERM does it.
    let (mut child, port, _admin) = common::serve_ready(&file, |c| {
        c.arg("--capture").arg(&capture);
    });
    let gateway = format!("127.0.0.1:{port}");

    // Four 64-character blocks of system prompt, then each request's own question.
    let system = "You are a careful SQL assistant. Answer with one query only. ".repeat(5);
    let system = &system[..256];
    let sends = [
        (
            ADAPTER,
            format!("{system}How many users signed up in May of this year, counted by their country of residence?"),
            true,
            vec![
                ("x-gateway-inference-objective", "Critical"),
                ("x-gateway-inference-fairness-id", "team-a"),
            ],
        ),
        (
            ADAPTER,
            format!("{system}List the ten largest orders placed last week, newest first, with their customer names."),
            false,
            vec![],
        ),
        (
            "llama",
            format!("{system}How many users signed up in May of this year, counted by their country of residence?"),
            true,
            vec![("x-gateway-inference-objective", "Sheddable")],
        ),
    ];
    for (model, prompt, stream, headers) in &sends {
        let r = http_with(
            &gateway,
            "POST",
            "/v1/completions",
            headers,
            &completion(model, prompt, *stream, 4),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        // Arrivals a little apart, so their order in the capture is certain.
        std::thread::sleep(Duration::from_millis(20));
    }

    // A long answer still streaming when SIGTERM comes: the drain lets it finish, and only
    // then is the capture closed, so it is in the file. SIGTERM waits for its first event, not
    // for a while: on a slow machine the request may not even have arrived after a while.
    let (streaming, started) = std::sync::mpsc::channel();
    let long = {
        let gateway = gateway.clone();
        let body = completion("llama", "tell me a long story", true, 800);
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(&gateway).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            write!(
                s,
                "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
            loop {
                let n = match s.read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    n => n.unwrap(),
                };
                if n == 0 {
                    break String::from_utf8(got).unwrap();
                }
                got.extend_from_slice(&buf[..n]);
                if got.windows(5).any(|w| w == b"data:") {
                    // Only the first matters; the test reads no more of them.
                    let _ = streaming.send(());
                }
            }
        })
    };
    started
        .recv_timeout(Duration::from_secs(30))
        .expect("the long answer starts streaming");
    let status = terminate(&mut child.0, "serve");
    assert!(status.success(), "{status}");
    let long = long.join().unwrap();
    assert!(
        long.starts_with("HTTP/1.1 200") && long.contains("[DONE]"),
        "{long}"
    );

    assert_eq!(
        TraceFormat::detect(&capture).unwrap(),
        Some(TraceFormat::CaptureJsonl)
    );
    let text = std::fs::read_to_string(&capture).unwrap();
    let mut trace = read_capture_jsonl(&capture).unwrap();
    assert_eq!(trace.len(), 4, "{text}");
    let long = trace.pop().unwrap();
    assert_eq!(long.request.output_tokens, 800, "{text}");
    for (r, (model, prompt, _, _)) in trace.iter().zip(&sends) {
        // The replica's tokenizer: four bytes a token; the usage it answers with.
        assert_eq!(
            r.request.input_tokens as usize,
            prompt.len().div_ceil(4),
            "{text}"
        );
        assert_eq!(r.request.output_tokens, 4, "{text}");
        assert_eq!(r.adapter.as_deref(), (*model == ADAPTER).then_some(ADAPTER));
        assert_eq!(r.prefix_hashes.len(), prompt.len() / 64, "{text}");
    }
    assert!(trace.windows(2).all(|w| w[0].request.at < w[1].request.at));
    assert_eq!(
        trace.iter().map(|r| r.band).collect::<Vec<_>>(),
        [Band::Critical, Band::Standard, Band::Sheddable]
    );
    assert_eq!(trace[0].tenant.as_deref(), Some("team-a"));
    assert_eq!(trace[1].tenant, None);
    // The adapter's two prompts share exactly the four system blocks.
    let (a, b, c) = (
        &trace[0].prefix_hashes,
        &trace[1].prefix_hashes,
        &trace[2].prefix_hashes,
    );
    assert_eq!(a[..4], b[..4]);
    assert_ne!(a[4], b[4]);
    // The base model's prompt is the first one's text, but another model's cache: no sharing.
    assert!(a.iter().zip(c).all(|(x, y)| x != y));
    // Never the text.
    assert!(!text.contains("SQL assistant") && !text.contains("signed up"));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().all(|l| l["tokens_from"] == "usage"), "{text}");
    assert!(lines.iter().all(|l| l["routed_model"] == l["model"]));
    assert!(lines
        .iter()
        .all(|l| l["endpoint"] == format!("127.0.0.1:{replica}").as_str()));
}
