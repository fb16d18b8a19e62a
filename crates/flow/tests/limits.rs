//! Rate limits under random traffic on the local store: what is admitted over any window stays
//! within the bucket's promise, settled usage too; a sender within the rate is never refused;
//! Retry-After is exact; a refusal leaves no trace.
//!
//! The promise of a bucket of `limit` per `period` (a burst of one period's allowance, refilled
//! continuously): over any window from one admitted request to another `w` ms later, the
//! admitted costs sum to at most `limit + w × limit / period`. A token bucket cannot promise
//! less — a full bucket spent at once is refilled by the end of the period — and these tests
//! check that it never admits more, to the unit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use infergate_flow::limit::{
    take_all, Bucket, Charge, LimitKind, LocalStore, RateLimiter, Room, Taken, Verdict,
};
use proptest::prelude::*;

fn now_or_never<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the local store answered later"),
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A bucket of 1..=40 per second or per minute.
fn bucket() -> impl Strategy<Value = Bucket> {
    (1..=40u64, prop_oneof![Just(1_000u64), Just(60_000u64)])
        .prop_map(|(limit, period)| Bucket::new(limit, period).unwrap())
}

/// Arrivals: a gap in ms since the previous one (often none, so bursts happen) and a cost.
fn arrivals(max_gap: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec(
        (prop_oneof![2 => Just(0u64), 3 => 0..max_gap], 1..=12u64),
        1..160,
    )
}

fn charge(bucket: Bucket, cost: u64) -> Charge {
    Charge {
        kind: LimitKind::Tokens,
        bucket,
        cost,
    }
}

/// Checks every window between two admitted requests: `sum(units) ≤ capacity + w × limit`
/// plus `slack(j)` for a window ending at request `j`.
fn check_windows(
    bucket: Bucket,
    admitted: &[(u64, u64)],
    slack: impl Fn(usize) -> u64,
) -> Result<(), TestCaseError> {
    for i in 0..admitted.len() {
        let mut units = 0;
        for (j, &(t, cost)) in admitted.iter().enumerate().skip(i) {
            units += cost * bucket.period_ms();
            let w = t - admitted[i].0;
            let bound = bucket.capacity() + w * bucket.limit() + slack(j);
            prop_assert!(
                units <= bound,
                "requests {i}..={j} over {w} ms: {units} units > {bound} ({bucket:?})"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn admitted_costs_never_exceed_the_burst_plus_the_rate_over_any_window(
        bucket in bucket(),
        arrivals in arrivals(400),
    ) {
        let store = LocalStore::default();
        let mut t = 0;
        let mut admitted = Vec::new();
        for (gap, cost) in arrivals {
            t += gap;
            if store.take_now("a", &[charge(bucket, cost)], ms(t)) == Taken::Admitted {
                admitted.push((t, cost));
            }
        }
        check_windows(bucket, &admitted, |_| 0)?;
    }

    /// Reserve an estimate, settle the real usage before the next arrival: the usage over a
    /// window may exceed the promise only by what its last request used beyond its estimate
    /// (that request was admitted on its estimate; the debt falls on the requests after it).
    #[test]
    fn settled_usage_stays_within_the_promise_but_for_the_last_overshoot(
        limit in 20..=200u64,
        arrivals in prop::collection::vec((0..3_000u64, 1..=20u64, 0..=40u64), 1..120),
    ) {
        let yaml = format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  schedulers:\n    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}\n  rateLimits:\n    default: {{tokensPerMinute: {limit}}}\n"
        );
        let resolved = infergate_config::gateway::load_from_str(&yaml).unwrap().resolve().unwrap();
        let limiter = RateLimiter::from_resolved(resolved.rate_limits.as_ref().unwrap()).unwrap();
        let bucket = Bucket::per_minute(limit).unwrap();
        let store = LocalStore::default();
        let mut t = 0;
        let mut used = Vec::new();
        let mut overshoot = Vec::new();
        for (gap, estimate, actual) in arrivals {
            t += gap;
            // Usage at most the estimate plus the limit, so a debt never reaches the clamp
            // (two capacities) that would forgive part of it.
            let actual = actual.min(estimate + limit);
            if let Verdict::Admitted(r) = now_or_never(limiter.admit(&store, Some("a"), estimate, ms(t))) {
                now_or_never(r.settle(&store, actual, ms(t))).unwrap();
                used.push((t, actual));
                overshoot.push(actual.saturating_sub(estimate) * bucket.period_ms());
            }
        }
        check_windows(bucket, &used, |j| overshoot[j])?;
    }

    /// Requests spaced by at least their cost's share of the period always fit.
    #[test]
    fn a_sender_within_the_rate_is_never_refused(
        bucket in bucket(),
        costs in prop::collection::vec(1..=12u64, 1..100),
        extra in prop::collection::vec(0..50u64, 100),
    ) {
        let store = LocalStore::default();
        let mut t = 0;
        for (cost, extra) in costs.into_iter().zip(extra) {
            let cost = cost.min(bucket.limit());
            prop_assert_eq!(store.take_now("a", &[charge(bucket, cost)], ms(t)), Taken::Admitted);
            t += (cost * bucket.period_ms()).div_ceil(bucket.limit()) + extra;
        }
    }

    /// After any traffic, a refused charge fits after exactly its wait and not a millisecond
    /// sooner.
    #[test]
    fn retry_after_is_exact(
        bucket in bucket(),
        arrivals in arrivals(300),
        cost in 1..=40u64,
    ) {
        let store = LocalStore::default();
        let mut t = 0;
        for (gap, c) in arrivals {
            t += gap;
            store.take_now("a", &[charge(bucket, c)], ms(t));
        }
        let probe = [charge(bucket, cost)];
        let Taken::Refused(r) = store.take_now("a", &probe, ms(t)) else {
            return Ok(());
        };
        match r.wait_ms {
            None => prop_assert!(cost > bucket.limit()),
            Some(wait) => {
                prop_assert!(wait >= 1);
                // Probing is free: a refused take changes nothing.
                prop_assert!(matches!(store.take_now("a", &probe, ms(t + wait - 1)), Taken::Refused(_)));
                prop_assert_eq!(store.take_now("a", &probe, ms(t + wait)), Taken::Admitted);
            }
        }
    }

    /// A refused request leaves every bucket as it was: a store that saw extra refused
    /// requests decides everything after exactly as one that did not.
    #[test]
    fn refusals_leave_no_trace(
        requests in bucket(),
        tokens in bucket(),
        arrivals in arrivals(200),
    ) {
        let both = |cost| [
            Charge { kind: LimitKind::Requests, bucket: requests, cost: 1 },
            charge(tokens, cost),
        ];
        let probed = LocalStore::default();
        let clean = LocalStore::default();
        let mut t = 0;
        for (gap, cost) in arrivals {
            t += gap;
            // A request too large for any bucket, refused whatever the levels.
            let never = both(tokens.limit() + 1);
            prop_assert!(matches!(probed.take_now("a", &never, ms(t)), Taken::Refused(_)));
            let a = probed.take_now("a", &both(cost), ms(t));
            if matches!(a, Taken::Refused(_)) {
                // Refused here: a second try at once changes nothing either.
                prop_assert_eq!(probed.take_now("a", &both(cost), ms(t)), a);
            }
            prop_assert_eq!(a, clean.take_now("a", &both(cost), ms(t)));
        }
    }

    /// All or nothing across buckets, as `take_all` promises the stores: either every level
    /// moves to its bucket's `Fits` level, or none moves.
    #[test]
    fn take_all_moves_every_level_or_none(
        a in bucket(),
        b in bucket(),
        la in 0..3_000_000u64,
        lb in 0..3_000_000u64,
        cost in 1..=50u64,
        now in 0..100_000u64,
    ) {
        let charges = [charge(a, cost), Charge { kind: LimitKind::Requests, bucket: b, cost: 1 }];
        let before = [
            infergate_flow::limit::Level { units: la.min(2 * a.capacity()), at_ms: 0 },
            infergate_flow::limit::Level { units: lb.min(2 * b.capacity()), at_ms: 0 },
        ];
        let mut levels = before;
        let rooms = [a.room(before[0], cost, now), b.room(before[1], 1, now)];
        match take_all(&mut levels, &charges, now) {
            Taken::Admitted => {
                for (room, level) in rooms.iter().zip(levels) {
                    prop_assert_eq!(*room, Room::Fits(level));
                }
            }
            Taken::Refused(_) => {
                prop_assert_eq!(levels, before);
                prop_assert!(rooms.iter().any(|r| !matches!(r, Room::Fits(_))));
            }
        }
    }
}
