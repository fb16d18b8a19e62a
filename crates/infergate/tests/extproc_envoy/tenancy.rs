//! Tenancy through Envoy, as `infergate serve` runs it: JWT auth (401, 403, 200, a key rotated
//! in while the stream waits for the reload), per-tenant rate limits on a real Redis (429 with
//! Retry-After, tokens settled with the usage the model server reports), and a 90/10 canary
//! split whose upstreams get the rewritten body while clients see their own model name.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{chat, post, request, Reply};
use crate::common::jwt::{self, auth_spec, claims, Key, MIN_GAP};
use crate::common::{metric, redis_server_on_free_port, redis_token_bucket, wait_for};
use crate::envoy::{Envoy, Pool, Spec};
use crate::setup::{gateway_config, one_pool, Picker, PoolDef, TempDir};
use crate::upstream::{sse_events, Replica, SSE_EVENTS};

const CHAT: &str = "/v1/chat/completions";
/// Requests per second of every tenant without its own limit, in the rate-limit test.
const RPS: u64 = 3;

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn error_code(r: &Reply) -> String {
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
    v["error"]["code"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn jwt_auth_through_envoy_refuses_401_and_403_serves_valid_tokens_and_takes_a_rotated_key() {
    let (k1, k2) = (Key::p256(), Key::ed25519());
    let keys = TempDir::new("jwks");
    let jwks = keys.path().join("jwks.json");
    let publish = |ks: &[serde_json::Value]| {
        std::fs::write(&jwks, jwt::jwks(ks)).unwrap();
    };
    publish(&[k1.jwk("k1")]);
    let replica = Replica::start("a");
    let auth = auth_spec(&format!(
        "localJWKS: {{file: {:?}}}",
        jwks.display().to_string()
    ));
    let (picker, envoy) = one_pool(&[replica.addr], "", &auth);
    let body = chat("llama", "hello");
    let with = |token: &str| {
        post(
            envoy.port,
            CHAT,
            &[("authorization", &bearer(token))],
            &body,
        )
    };

    // No token: 401 with a bare challenge, and nothing reaches the model server.
    let r = post(envoy.port, CHAT, &[], &body);
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="test-idp""#)
    );
    // Nor does an anonymous client learn the models.
    let r = request(envoy.port, "GET", "/v1/models", &[], b"");
    assert_eq!(r.status, 401, "{}", r.text());

    // Signed by a stranger under a known kid: 401 invalid_token.
    let r = with(&Key::p256().token("k1", &claims(&["ml"], 600)));
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains(r#"error="invalid_token""#),
        "{r:?}"
    );
    // Expired: 401.
    let r = with(&k1.token("k1", &claims(&["ml"], -3600)));
    assert_eq!(r.status, 401, "{}", r.text());

    // Valid, but not in the required group: 403 insufficient_scope.
    let r = with(&k1.token("k1", &claims(&["ops"], 600)));
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(error_code(&r), "insufficient_scope");
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains(r#"error="insufficient_scope""#));
    assert_eq!(
        replica.requests(),
        0,
        "refused requests never reach the pool"
    );

    // Valid: served, and the token stops at infergate.
    let r = with(&k1.token("k1", &claims(&["ml"], 600)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(replica.requests(), 1);
    assert!(replica.last_seen().headers.get("authorization").is_none());

    // Rotation: the file gains k2; once the reload gap has passed, the first k2 token makes
    // infergate load the keys again while its stream waits, and is accepted — no restart.
    publish(&[k1.jwk("k1"), k2.jwk("k2")]);
    std::thread::sleep(MIN_GAP + Duration::from_millis(500));
    let r = with(&k2.token("k2", &claims(&["ml"], 600)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(replica.requests(), 2);
    assert!(
        picker.metric(r#"infergate_auth_refusals_total{code="insufficient_scope"}"#) >= 1.0,
        "{}",
        picker.metrics()
    );
}

#[test]
fn rate_limits_on_redis_through_envoy_answer_429_with_retry_after_and_settle_with_usage() {
    let (_redis, redis_port) = redis_server_on_free_port();
    let replica = Replica::start("a");
    // A generous store timeout: on a loaded machine the first call (connect, load the script)
    // must not miss it and fail open, which would admit a request for the wrong reason.
    let limits = format!(
        "  rateLimits:
    store: redis://127.0.0.1:{redis_port}
    storeTimeout: 2s
    default: {{requestsPerSecond: {RPS}}}
    tenants:
      - {{tenant: team-b, requestsPerSecond: 100, tokensPerMinute: 100}}
"
    );
    let (picker, envoy) = one_pool(&[replica.addr], "", &limits);
    let tenant = |who: &str, body: &[u8]| {
        post(
            envoy.port,
            CHAT,
            &[("x-gateway-inference-fairness-id", who)],
            body,
        )
    };

    // On a loaded machine the picker's first calls to Redis (connect, load the script) can miss
    // the store timeout and fail open: wait until its start-up probe has finished, either way,
    // and a request was admitted on Redis's word, before counting anything.
    let body = chat("llama", "hi");
    wait_for("the picker's start-up probe of Redis", || {
        let log = picker.log();
        log.contains("Redis answers") || log.contains("rate-limit store failed")
    });
    wait_for("the picker to count on Redis", || {
        tenant("warm-up", &body);
        metric(
            picker.admin,
            r#"infergate_rate_limit_decisions_total{tenant="*",outcome="admitted"}"#,
        ) >= 1.0
    });
    let store_errors = metric(picker.admin, "infergate_rate_limit_store_errors_total");
    let reached = replica.requests() as u64;

    // Requests per second: a second's worth goes, the next is refused as `serve` refuses it.
    // The bucket refills at RPS a second, so on a slow machine a refill can land between the
    // requests: count what was admitted before the first refusal against what the bucket may
    // admit over that time, measured from the first sending to the refusal's answer. Redis
    // reads the wall clock in whole milliseconds (1 ms more at most), which NTP may slew by
    // 500 ppm. Within a third of a second that is exactly a second's worth.
    let started = Instant::now();
    let mut admitted = 0;
    let r = loop {
        let r = tenant("team-a", &body);
        if r.status != 200 {
            break r;
        }
        admitted += 1;
        assert!(admitted <= 10 * RPS, "never refused");
    };
    let measured_ms = started.elapsed().as_millis() as u64;
    let window_ms = measured_ms + 1 + measured_ms.div_ceil(2_000);
    let bound = RPS + RPS * window_ms / 1000;
    assert!(
        (RPS..=bound).contains(&admitted),
        "{admitted} admitted over {window_ms} ms; the bucket admits {RPS} at once and {bound} at most"
    );
    assert_eq!(r.status, 429, "{}", r.text());
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        r.header("x-llm-d-request-dropped-reason"),
        Some("rejected-rate-limited")
    );
    assert_eq!(
        replica.requests() as u64 - reached,
        admitted,
        "the refused request never reached the pool"
    );
    // Another tenant has its own buckets.
    assert_eq!(tenant("team-c", &body).status, 200);

    // Tokens per minute, settled with the usage: a stream reserves its prompt estimate (8) plus
    // max_tokens (60) = 68 of 100, and the replica reports 27 used. Only a settled reservation
    // leaves room (73) for a second one; the third finds 46 and is refused.
    let stream = json!({
        "model": "llama", "stream": true, "max_tokens": 60,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string();
    let r = tenant("team-b", stream.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), sse_events("llama").concat());
    // The settlement goes to Redis in the background once the stream ends. Redis drains a
    // stored level only when the bucket is next used, so until the settlement lands it holds
    // the whole reservation (68 tokens); settled, at most the 27 used.
    let used = 7 + SSE_EVENTS as u64;
    wait_for("the stream's usage to be settled in Redis", || {
        redis_token_bucket(redis_port, "team-b").0 <= used * 60_000
    });
    let r = tenant("team-b", stream.as_bytes());
    assert_eq!(
        r.status,
        200,
        "settled with usage, not the estimate: {}",
        r.text()
    );
    // Whether or not the second settlement has landed, the third does not fit: 27 + 68
    // unsettled, 27 + 27 settled, plus 68 for itself, is over 100.
    let r = tenant("team-b", stream.as_bytes());
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    assert_eq!(error_code(&r), "rate_limit_exceeded");
    // Every decision above was Redis's: none failed open.
    assert_eq!(
        metric(picker.admin, "infergate_rate_limit_store_errors_total"),
        store_errors,
        "{}",
        picker.log()
    );
}

/// Requests for `llama` split 90/10 between `llama-stable` and `llama-canary`, each its own pool
/// and Envoy cluster; sessions named by `x-session-id` stick.
fn canary(stable: &Replica, canary: &Replica) -> (Picker, Envoy) {
    let picker = Picker::start(&gateway_config(
        &[
            PoolDef {
                name: "stable",
                model: "llama-stable",
                endpoints: vec![stable.addr],
                extra: "",
            },
            PoolDef {
                name: "canary",
                model: "llama-canary",
                endpoints: vec![canary.addr],
                extra: "",
            },
        ],
        "  rewrites:
    - name: llama-canary
      matches: [{model: {type: Exact, value: llama}}]
      targets:
        - {modelRewrite: llama-stable, weight: 90}
        - {modelRewrite: llama-canary, weight: 10}
      stickiness: {header: x-session-id}
",
    ));
    let envoy = Spec {
        pools: vec![
            Pool {
                cluster: "stable",
                base_model: Some("llama-stable"),
                endpoints: vec![stable.addr],
            },
            Pool {
                cluster: "canary",
                base_model: Some("llama-canary"),
                endpoints: vec![canary.addr],
            },
        ],
        ext_proc: picker.port,
        fail_open: false,
        tls: false,
    }
    .start(true);
    (picker, envoy)
}

/// Requests in the split.
const SPLIT_REQUESTS: usize = 400;
/// How far the canary's share may land from 10 %: the draws come from a fixed seed, and over
/// 400 requests their standard deviation is 1.5 points.
const SPLIT_TOLERANCE: f64 = 0.05;

#[test]
fn a_90_10_canary_through_envoy_lands_in_tolerance_and_clients_see_their_own_model() {
    let (stable, canary_replica) = (Replica::start("stable"), Replica::start("canary"));
    let (picker, envoy) = canary(&stable, &canary_replica);
    let mut served: HashMap<String, usize> = HashMap::new();
    for i in 0..SPLIT_REQUESTS {
        let r = post(
            envoy.port,
            CHAT,
            &[],
            &chat("llama", &format!("request {i}")),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        // The replica echoes the body it got, which named the target; the client reads its own
        // model back (the renamed body's length is not the upstream's).
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["model"], "llama", "{}", r.text());
        assert_eq!(v["messages"][0]["content"], format!("request {i}"));
        *served
            .entry(r.header("x-replica").unwrap().to_owned())
            .or_default() += 1;
    }
    let to_canary = served.get("canary").copied().unwrap_or(0);
    let share = to_canary as f64 / SPLIT_REQUESTS as f64;
    println!("canary share through Envoy: {share:.4} ({to_canary} of {SPLIT_REQUESTS})");
    assert!((share - 0.10).abs() <= SPLIT_TOLERANCE, "{served:?}");
    assert_eq!(
        stable.requests() + canary_replica.requests(),
        SPLIT_REQUESTS
    );
    for (replica, target) in [(&stable, "llama-stable"), (&canary_replica, "llama-canary")] {
        let seen: serde_json::Value = serde_json::from_slice(&replica.last_seen().body).unwrap();
        assert_eq!(seen["model"], target, "the upstream got the rewritten body");
    }
    assert_eq!(
        picker.metric(r#"infergate_rewrites_total{model="llama",target="llama-canary"}"#),
        to_canary as f64
    );

    // A stream: every event names the client's model.
    let stream = json!({
        "model": "llama", "stream": true,
        "messages": [{"role": "user", "content": "stream please"}],
    })
    .to_string();
    let r = post(envoy.port, CHAT, &[], stream.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), sse_events("llama").concat());
    assert_eq!(
        r.text().matches(r#""model":"llama""#).count(),
        SSE_EVENTS + 1
    );

    // Sessions stick: each lands where it first did, every time.
    let mut moved = 0;
    for s in 0..20 {
        let id = format!("session-{s}");
        let mut first = None;
        for _ in 0..3 {
            let r = post(
                envoy.port,
                CHAT,
                &[("x-session-id", &id)],
                &chat("llama", "again"),
            );
            assert_eq!(r.status, 200, "{}", r.text());
            let by = r.header("x-replica").unwrap().to_owned();
            if *first.get_or_insert_with(|| by.clone()) != by {
                moved += 1;
            }
        }
    }
    assert_eq!(moved, 0, "a session moved between targets");
}
