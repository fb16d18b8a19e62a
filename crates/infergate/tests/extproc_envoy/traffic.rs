//! What passes through: large bodies both ways, SSE as it is produced, refusals with their
//! headers, and each model to its own pool's cluster.

use crate::client::{chat, post, post_releasing};
use crate::envoy::{Pool, Spec};
use crate::setup::{gateway_config, one_pool, Picker, PoolDef};
use crate::upstream::{sse_events, Replica, SSE_EVENTS};

const CHAT: &str = "/v1/chat/completions";

#[test]
fn bodies_over_128_kib_pass_intact_both_ways() {
    let replica = Replica::start("a");
    let (_picker, envoy) = one_pool(&[replica.addr], "", "");
    for size in [140 * 1024, 700 * 1024] {
        // Every byte value a JSON string can carry, so a shifted or dropped chunk shows.
        let prompt: String = (0..size)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let body = chat("llama", &prompt);
        let r = post(envoy.port, CHAT, &[], &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let seen = replica.last_seen();
        // Envoy frames a body streamed through ext_proc itself (chunked); a length, if any
        // reached the upstream, must be the body's.
        if let Some(len) = seen.headers.get("content-length") {
            assert_eq!(len, body.len().to_string().as_str());
        }
        assert_eq!(seen.body.len(), body.len());
        assert!(
            seen.body == body,
            "the upstream got other bytes than the client sent"
        );
        assert!(
            r.body == body,
            "the client got other bytes than the upstream sent"
        );
        // The destination header reached the upstream with the request.
        assert_eq!(
            seen.headers["x-gateway-destination-endpoint"],
            replica.addr.to_string().as_str()
        );
    }
}

#[test]
fn sse_streams_pass_through_as_they_are_produced() {
    let replica = Replica::start("a");
    let (picker, envoy) = one_pool(&[replica.addr], "", "");
    // The replica sends its first event, then holds the rest until the client has read it: the
    // stream ends only if nothing on the way (Envoy, infergate's ext_proc) held it back, however
    // slow the machine (a measured delay would also count the machine's stalls).
    let body = serde_json::json!({
        "model": "llama",
        "stream": true,
        "hold": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "stream please"}],
    })
    .to_string();
    let r = post_releasing(envoy.port, CHAT, &[], body.as_bytes(), || replica.release());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.text(), sse_events("llama").concat());
    // Usage was read from the stream, and the first chunk was taken as the first token.
    assert_eq!(
        picker.metric(r#"infergate_completion_tokens_total{model="llama",pool="llama"}"#),
        SSE_EVENTS as f64
    );
    assert_eq!(
        picker.metric(r#"infergate_prompt_tokens_total{model="llama",pool="llama"}"#),
        7.0
    );
    assert_eq!(
        picker.metric(r#"infergate_time_to_first_token_seconds_count{model="llama"}"#),
        1.0
    );
    assert_eq!(picker.metric("infergate_in_flight_responses"), 0.0);
}

/// Saturation 1.2 (6 waiting over the default threshold of 5): past the Standard ceiling (1)
/// and the Sheddable one (0.75), within the Critical one (2).
const SATURATED: &str =
    "vllm:num_requests_waiting 6\nvllm:num_requests_running 64\nvllm:kv_cache_usage_perc 0.1\n";

fn dropped(r: &crate::client::Reply) -> Option<&str> {
    r.header("x-llm-d-request-dropped-reason")
}

#[test]
fn a_saturated_pool_sheds_with_429_and_retry_after_queues_the_rest_and_expires_them() {
    let replica = Replica::start("a");
    replica.set_metrics(SATURATED);
    // Metrics count as fresh for a minute: on a loaded machine a late scrape must not make the
    // pool's saturation unknown, which fails open and would admit the requests under test. The
    // queue TTL leaves the last request seconds to see the pool drain (a test poll, a scrape
    // and a dispatch, each slow on a loaded machine, where 2 s was a tight budget). The
    // overload rule is off: it would refuse a Standard request at twice its 1 s wait, before
    // this TTL (its own tests are in tests/flow.rs).
    let flow = "  flowControl: {queueTtl: 5s, overload: {enabled: false}, saturation: {metricsStalenessThreshold: 60s}}\n";
    let (picker, envoy) = one_pool(&[replica.addr], "", flow);
    let body = chat("llama", "hello");
    let sheddable = [("x-gateway-inference-objective", "Sheddable")];
    crate::common::wait_for("the pool to count as saturated", || {
        post(envoy.port, CHAT, &sheddable, &body).status == 429
    });

    // Sheddable: 429 at once, with Retry-After and llm-d's dropped reason.
    let r = post(envoy.port, CHAT, &sheddable, &body);
    assert_eq!(r.status, 429, "{}", r.text());
    let retry_after: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(dropped(&r), Some("rejected-saturated"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], "pool_saturated", "{v}");
    // Critical: never held back.
    let r = post(
        envoy.port,
        CHAT,
        &[("x-gateway-inference-objective", "Critical")],
        &body,
    );
    assert_eq!(r.status, 200, "{}", r.text());

    // Standard: queued; the queue TTL runs out while the pool stays saturated: 503.
    let before = replica.requests();
    let r = post(envoy.port, CHAT, &[], &body);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(dropped(&r), Some("rejected-ttl-expired"));
    assert!(
        r.elapsed >= std::time::Duration::from_millis(4500),
        "{:?}",
        r.elapsed
    );
    assert_eq!(
        replica.requests(),
        before,
        "refused requests never reach the pool"
    );

    // Standard again, and the pool drains while it waits: it goes on.
    let port = envoy.port;
    let queued = std::thread::spawn(move || post(port, CHAT, &[], &chat("llama", "patience")));
    crate::common::wait_for("the Standard request to queue", || {
        picker.metric(r#"infergate_flow_queue_requests{pool="llama",band="Standard"}"#) >= 1.0
    });
    replica.set_metrics(crate::upstream::IDLE);
    let r = queued.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(replica.requests(), before + 1);
    assert!(picker.metric(r#"infergate_shed_requests_total{pool="llama"}"#) >= 2.0);
}

#[test]
fn body_based_routing_sends_each_model_to_its_pools_cluster() {
    let (l1, l2, m1) = (
        Replica::start("l1"),
        Replica::start("l2"),
        Replica::start("m1"),
    );
    let picker = Picker::start(&gateway_config(
        &[
            PoolDef {
                name: "llama",
                model: "llama",
                endpoints: vec![l1.addr, l2.addr],
                extra: "      loraAdapters: [sql-lora]\n",
            },
            PoolDef {
                name: "mistral",
                model: "mistral",
                endpoints: vec![m1.addr],
                extra: "",
            },
        ],
        "",
    ));
    let envoy = Spec {
        pools: vec![
            Pool {
                cluster: "llama",
                base_model: Some("llama"),
                endpoints: vec![l1.addr, l2.addr],
            },
            Pool {
                cluster: "mistral",
                base_model: Some("mistral"),
                endpoints: vec![m1.addr],
            },
        ],
        ext_proc: picker.port,
        fail_open: false,
        tls: false,
    }
    .start(true);
    for (model, base, replicas) in [
        ("llama", "llama", &["l1", "l2"][..]),
        ("mistral", "mistral", &["m1"][..]),
        ("sql-lora", "llama", &["l1", "l2"][..]),
    ] {
        for _ in 0..3 {
            let r = post(envoy.port, CHAT, &[], &chat(model, "hi"));
            assert_eq!(r.status, 200, "{model}: {}", r.text());
            let by = r.header("x-replica").unwrap();
            assert!(replicas.contains(&by), "{model} served by {by}");
            let seen = [&l1, &l2, &m1]
                .into_iter()
                .find(|x| x.name == by)
                .unwrap()
                .last_seen();
            assert_eq!(seen.headers["x-gateway-model-name"], model);
            assert_eq!(seen.headers["x-gateway-base-model-name"], base);
        }
    }
    let (mistral_hosts, llama_hosts) =
        (envoy.host_requests("mistral"), envoy.host_requests("llama"));
    assert_eq!(mistral_hosts.iter().map(|(_, n)| n).sum::<u64>(), 3);
    assert_eq!(llama_hosts.iter().map(|(_, n)| n).sum::<u64>(), 6);

    let r = post(envoy.port, CHAT, &[], &chat("gpt-9", "hi"));
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.text().contains("no matching model"), "{}", r.text());
}
