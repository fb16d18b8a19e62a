//! A pool that mixes context windows: each request goes only to the replicas whose
//! `max_model_len` (read from their `/v1/models`) holds it, and only the model server refuses
//! one that none holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{instant_replica_with, wait_for, TempDir};

fn chat(port: u16, prompt_bytes: usize) -> common::Answer {
    let body = format!(
        r#"{{"model": "llama", "max_tokens": 4, "messages": [{{"role": "user", "content": "{}"}}]}}"#,
        "word ".repeat(prompt_bytes / 5)
    );
    common::post(
        port,
        "/v1/chat/completions",
        &[],
        &body,
        Duration::from_secs(30),
    )
}

/// Requests the replica on `port` has finished, from its own metrics.
fn served(port: u16) -> f64 {
    common::metric(port, "vllm:request_success_total")
}

#[test]
fn long_prompts_go_only_to_replicas_that_hold_them() {
    let (_small, small) = instant_replica_with("llama", &["--max-model-len", "2048"]);
    let (_large, large) = instant_replica_with("llama", &["--max-model-len", "32768"]);
    let dir = TempDir::new("context-fit");
    let file = dir.path().join("gateway.yaml");
    // Round-robin: without the window every other request would reach the small replica.
    let config = common::one_pool_config("llama", small, "", "      policy: round-robin\n").replace(
        "      labels: {app: llama}\n",
        &format!("      labels: {{app: llama}}\n    - address: 127.0.0.1:{large}\n      labels: {{app: llama}}\n"),
    );
    std::fs::write(&file, config).unwrap();
    let (_gateway, port, admin) = common::serve_ready(&file, |_| {});
    // Both endpoints in the pool, then time for their first scrapes, which read their windows
    // before they publish (at 50 ms intervals; two seconds leave room on a loaded machine).
    wait_for("both endpoints in the pool", || {
        common::metric(admin, "infergate_pool_endpoints{pool=\"llama\"}") == 2.0
    });
    std::thread::sleep(Duration::from_secs(2));

    // Short prompts go anywhere: both replicas take some.
    for _ in 0..20 {
        assert_eq!(chat(port, 400).status, 200);
    }
    let (small_before, large_before) = (served(small), served(large));
    assert!(
        small_before > 0.0 && large_before > 0.0,
        "{small_before} {large_before}"
    );

    // About 4,000 tokens: more than the small replica holds. Every one is answered, by the
    // large replica alone.
    for _ in 0..10 {
        let a = chat(port, 16_000);
        assert_eq!(a.status, 200, "{}", a.body);
    }
    assert_eq!(
        served(small),
        small_before,
        "the small replica took a long prompt"
    );
    assert_eq!(served(large), large_before + 10.0);

    // Longer than any replica holds: the gateway sends it to the largest window, and that
    // server's 400 is the answer.
    let too_long = chat(port, 200_000);
    assert_eq!(too_long.status, 400, "{}", too_long.body);
    assert_eq!(served(small), small_before);
}
