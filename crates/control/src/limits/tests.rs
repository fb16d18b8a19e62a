//! The runtime on the local store: what clients get when refused, and how each way a request
//! ends settles its reservation.

use std::sync::Arc;

use hyper::header::RETRY_AFTER;
use hyper::StatusCode;

use super::*;
use infergate_api_error::DROPPED_REASON;

fn limits(yaml: &str) -> Arc<RateLimits> {
    let doc = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  schedulers:\n    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}\n  rateLimits:\n{yaml}"
    );
    let config = infergate_config::gateway::load_from_str(&doc)
        .unwrap()
        .resolve()
        .unwrap();
    RateLimits::for_config(&config, None, Clock::new(), &Arc::new(Metrics::new()))
        .unwrap()
        .unwrap()
}

/// 100 tokens a minute: a request reserving 60 leaves room for another of 40 only if the first
/// was refunded or settled below its estimate.
const TPM_100: &str = "    default: {tokensPerMinute: 100}\n";

async fn fits(l: &Arc<RateLimits>, tokens: u64) -> bool {
    l.admit(Some("t"), tokens, Some(0)).await.is_ok()
}

#[tokio::test]
async fn a_request_no_server_answered_gets_its_tokens_back() {
    let l = limits(TPM_100);
    let ticket = l.admit(Some("t"), 60, Some(0)).await.unwrap();
    assert!(!fits(&l, 60).await);
    drop(ticket);
    assert!(fits(&l, 60).await);
}

#[tokio::test]
async fn usage_settles_the_reservation_and_a_success_without_usage_keeps_it() {
    let l = limits(TPM_100);
    let ticket = l.admit(Some("t"), 60, Some(0)).await.unwrap().unwrap();
    ticket.finish(Some(10), false);
    // 10 used: 90 fit, 91 do not.
    assert!(!fits(&l, 91).await);
    let ticket = l.admit(Some("t"), 90, Some(0)).await.unwrap().unwrap();
    // No usage from a success: the 90 stand, so nothing more fits.
    ticket.finish(None, false);
    assert!(!fits(&l, 1).await);
}

#[tokio::test]
async fn an_error_answer_without_usage_is_refunded() {
    let l = limits(TPM_100);
    let ticket = l.admit(Some("t"), 100, Some(0)).await.unwrap().unwrap();
    ticket.finish(None, true);
    assert!(fits(&l, 100).await);
}

#[tokio::test]
async fn over_a_limit_is_429_with_retry_after_and_the_dropped_reason() {
    let l = limits("    tenants: [{tenant: t, requestsPerSecond: 1}]\n");
    assert!(l.admit(Some("t"), 0, None).await.unwrap().is_some());
    let e = l.admit(Some("t"), 0, None).await.unwrap_err();
    assert_eq!(e.code(), "rate_limit_exceeded");
    assert!(e
        .message()
        .contains("tenant `t` is over its limit of 1 requests per second"));
    let resp = e.into_response();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()[RETRY_AFTER], "1");
    assert_eq!(resp.headers()[DROPPED_REASON], "rejected-rate-limited");
    // A tenant without limits is not counted at all.
    assert!(l.admit(Some("other"), 0, None).await.unwrap().is_none());
    let text = l.metrics.encode();
    assert!(
        text.contains(r#"infergate_rate_limit_decisions_total{tenant="t",outcome="limited"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_larger_than_a_minute_of_tokens_is_told_so_without_retry_after() {
    let l = limits(TPM_100);
    let e = l.admit(Some("t"), 80, Some(40)).await.unwrap_err();
    assert!(
        e.message().contains("estimated 120 tokens"),
        "{}",
        e.message()
    );
    assert_eq!(e.retry_after_secs(), None);
    assert_eq!(e.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn an_unreachable_redis_fails_open_or_closed_and_is_counted() {
    let port = infergate_test_support::ports::free_port();
    let base =
        format!("    store: redis://127.0.0.1:{port}\n    default: {{requestsPerSecond: 1}}\n");
    let open = limits(&base);
    for _ in 0..3 {
        assert!(open.admit(Some("t"), 0, None).await.unwrap().is_none());
    }
    let text = open.metrics.encode();
    assert!(
        text.contains(
            r#"infergate_rate_limit_decisions_total{tenant="*",outcome="failed_open"} 3"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"infergate_rate_limit_store_errors_total{reason="connection"} 1"#)
            && text.contains(r#"infergate_rate_limit_store_errors_total{reason="down"} 2"#),
        "{text}"
    );
    let closed = limits(&format!("{base}    onStoreError: failClosed\n"));
    let resp = closed
        .admit(Some("t"), 0, None)
        .await
        .unwrap_err()
        .into_response();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()[RETRY_AFTER], "1");
    assert_eq!(
        resp.headers()[DROPPED_REASON],
        "rejected-rate-limit-unavailable"
    );
}

#[test]
fn a_reload_keeps_the_store_it_can() {
    let first = limits(TPM_100);
    let doc = |store: &str| {
        infergate_config::gateway::load_from_str(&format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  schedulers:\n    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}\n  rateLimits:\n    store: {store}\n    default: {{tokensPerMinute: 50}}\n"
        ))
        .unwrap()
        .resolve()
        .unwrap()
    };
    let metrics = Arc::new(Metrics::new());
    let local = RateLimits::for_config(&doc("local"), Some(&first), Clock::new(), &metrics)
        .unwrap()
        .unwrap();
    assert!(Arc::ptr_eq(&first.counters, &local.counters));
    let redis = RateLimits::for_config(&doc("redis://r"), Some(&local), Clock::new(), &metrics)
        .unwrap()
        .unwrap();
    assert!(matches!(redis.store(), Store::Redis(_)));
}

#[test]
fn the_documented_example_is_a_valid_config() {
    let doc = include_str!("../../../../docs/rate-limits.md");
    let example = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    let yaml = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\n{example}  bbr: {{enabled: true}}\n  schedulers:\n    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}\n  endpoints:\n    - {{address: 127.0.0.1:8000, labels: {{app: a}}}}\n"
    );
    let config = infergate_config::gateway::load_from_str(&yaml)
        .unwrap()
        .resolve()
        .unwrap();
    crate::check_supported(&config).unwrap();
    let limits = RateLimits::for_config(&config, None, Clock::new(), &Arc::new(Metrics::new()))
        .unwrap()
        .unwrap();
    let Store::Redis(redis) = limits.store() else {
        panic!("the example shares its limits through Redis");
    };
    assert_eq!(redis.target().to_string(), "redis://redis.internal:6379/0");
    assert_eq!(redis.timeout(), Duration::from_millis(50));
}
