//! The limiter's decisions: which buckets a tenant charges, what a refusal says, and what a
//! store failure does under each policy.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::*;

/// The local store (and the failing one here) answers at once: one poll finishes the future.
fn now_or_never<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a local store answered later"),
    }
}

fn limiter(yaml: &str) -> RateLimiter {
    let doc = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  schedulers:\n    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}\n  rateLimits:\n{yaml}"
    );
    let resolved = infergate_config::gateway::load_from_str(&doc)
        .unwrap()
        .resolve()
        .unwrap();
    RateLimiter::from_resolved(resolved.rate_limits.as_ref().unwrap()).unwrap()
}

#[derive(Debug, thiserror::Error)]
#[error("the store is down")]
struct Down;

/// A shared store that cannot be reached.
struct Unreachable;

impl LimitStore for Unreachable {
    type Error = Down;

    fn take(
        &self,
        _: &str,
        _: &[Charge],
        _: Duration,
    ) -> impl Future<Output = Result<Taken, Down>> + Send {
        std::future::ready(Err(Down))
    }

    fn adjust(
        &self,
        _: &str,
        _: LimitKind,
        _: Bucket,
        _: i64,
        _: Duration,
    ) -> impl Future<Output = Result<(), Down>> + Send {
        std::future::ready(Err(Down))
    }
}

#[test]
fn named_tenants_have_their_own_limits_and_the_rest_share_the_default() {
    let l = limiter(
        "    default: {requestsPerSecond: 1}\n    tenants: [{tenant: big, requestsPerSecond: 3}]\n",
    );
    let store = LocalStore::default();
    let t = Duration::ZERO;
    let admitted = |tenant: Option<&str>| {
        matches!(
            now_or_never(l.admit(&store, tenant, 0, t)),
            Verdict::Admitted(_)
        )
    };
    assert_eq!(
        [0; 4].map(|_| admitted(Some("big"))),
        [true, true, true, false]
    );
    // Every other tenant has a bucket of its own under the default limit…
    assert_eq!([0; 2].map(|_| admitted(Some("x"))), [true, false]);
    assert!(admitted(Some("y")));
    // …and requests naming none share one.
    assert_eq!([0; 2].map(|_| admitted(None)), [true, false]);
    assert_eq!((l.label(Some("big")), l.label(Some("x"))), ("big", "*"));
    assert_eq!(l.label(None), DEFAULT_TENANT_LABEL);
}

#[test]
fn only_listed_tenants_are_limited_without_a_default() {
    let l = limiter("    tenants: [{tenant: a, requestsPerSecond: 1}]\n");
    let store = LocalStore::default();
    let v = now_or_never(l.admit(&store, Some("b"), 10, Duration::ZERO));
    assert!(matches!(v, Verdict::Unlimited));
    assert_eq!(v.outcome(), None);
    assert!(!l.counts_tokens());
}

#[test]
fn a_refusal_names_its_limit_and_when_to_come_back() {
    let l = limiter("    default: {tokensPerMinute: 1000}\n    defaultMaxTokens: 100\n");
    let store = LocalStore::default();
    let t = Duration::ZERO;
    assert_eq!(l.estimate(500, None), 600);
    assert_eq!(l.estimate(500, Some(7)), 507);
    let first = now_or_never(l.admit(&store, Some("a"), 600, t));
    assert_eq!(first.outcome(), Some("admitted"));
    // 600 of 1000 spent: another 600 fits once 200 have drained, 12 s at 1000 a minute.
    let Verdict::Limited(refused) = now_or_never(l.admit(&store, Some("a"), 600, t)) else {
        panic!("admitted over the limit");
    };
    assert_eq!(refused.by, RefusedBy::Limit(LimitKind::Tokens));
    assert_eq!(refused.limit, 1000);
    assert_eq!(refused.wait, Some(Duration::from_secs(12)));
    assert_eq!(refused.retry_after_secs(), Some(12));
    // More than a minute's tokens never fit: no Retry-After would help.
    let Verdict::Limited(never) = now_or_never(l.admit(&store, Some("b"), 1001, t)) else {
        panic!("admitted a request larger than the bucket");
    };
    assert_eq!((never.wait, never.retry_after_secs()), (None, None));
    // A wait under a second still says 1.
    let short = Limited {
        by: RefusedBy::Limit(LimitKind::Requests),
        limit: 10,
        wait: Some(Duration::from_millis(100)),
    };
    assert_eq!(short.retry_after_secs(), Some(1));
}

#[test]
fn settling_moves_the_bucket_to_what_was_used() {
    let l = limiter("    default: {tokensPerMinute: 1000}\n");
    let store = LocalStore::default();
    let t = Duration::ZERO;
    let Verdict::Admitted(r) = now_or_never(l.admit(&store, Some("a"), 900, t)) else {
        panic!("refused");
    };
    assert_eq!(r.reserved_tokens(), Some(900));
    // It used 100: 800 come back, so 900 fit again.
    now_or_never(r.settle(&store, 100, t)).unwrap();
    let Verdict::Admitted(r) = now_or_never(l.admit(&store, Some("a"), 900, t)) else {
        panic!("the refund did not land");
    };
    // It used 1900: the tenant is 1000 over, so a minute passes before 1 token fits.
    now_or_never(r.settle(&store, 1900, t)).unwrap();
    let Verdict::Limited(refused) = now_or_never(l.admit(&store, Some("a"), 1, t)) else {
        panic!("the charge did not land");
    };
    assert_eq!(refused.wait, Some(Duration::from_millis(60_060)));
}

#[test]
fn a_store_failure_admits_or_refuses_as_configured() {
    let open = limiter("    store: redis://r\n    default: {requestsPerSecond: 1}\n");
    let v = now_or_never(open.admit(&Unreachable, Some("a"), 1, Duration::ZERO));
    assert!(matches!(v, Verdict::FailedOpen(Down)));
    assert_eq!(v.outcome(), Some("failed_open"));
    let closed = limiter(
        "    store: redis://r\n    onStoreError: failClosed\n    default: {requestsPerSecond: 1}\n",
    );
    let v = now_or_never(closed.admit(&Unreachable, Some("a"), 1, Duration::ZERO));
    assert!(matches!(v, Verdict::FailedClosed(Down)));
    assert_eq!(v.outcome(), Some("failed_closed"));
}
