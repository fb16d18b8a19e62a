//! The Redis store against a real `redis-server` started here: its Lua script decides exactly
//! what the Rust it mirrors decides (same answers, same levels, to the unit, up to limits at
//! the top of the accepted range), it runs on Redis's clock with keys that expire once drained,
//! and it survives a Redis that forgot its scripts.
//!
//! Needs `redis-server` on the PATH (or its path in `REDIS_SERVER`); without it this test fails,
//! naming what to install.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use infergate_control::limits::redis::RedisStore;
use infergate_control::limits::resp::Value;
use infergate_flow::limit::{Bucket, Charge, LimitKind, LocalStore, Taken};
use proptest::prelude::*;

use infergate_test_support::redis::RedisServer;

/// A store on `redis`.
fn store_on(redis: &RedisServer) -> RedisStore {
    RedisStore::new(
        &format!("redis://127.0.0.1:{}", redis.port()),
        Duration::from_secs(2),
    )
    .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Take {
        tenant: usize,
        requests: Option<Bucket>,
        tokens: Option<Bucket>,
        cost: u64,
    },
    Adjust {
        tenant: usize,
        bucket: Bucket,
        delta: i64,
    },
    Advance(u64),
}

/// Limits from tiny to the largest the config accepts, so exactness at 2⁵³ is exercised.
fn bucket(period: u64) -> impl Strategy<Value = Bucket> {
    let top = if period == 1_000 {
        u64::from(u32::MAX)
    } else {
        10_000_000_000
    };
    prop_oneof![3 => 1..=20u64, 1 => Just(1_000u64), 1 => Just(top), 1 => 1..=top]
        .prop_map(move |limit| Bucket::new(limit, period).unwrap())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (
            0..3usize,
            prop::option::of(bucket(1_000)),
            prop::option::of(bucket(60_000)),
            prop_oneof![3 => 1..=30u64, 1 => any::<u64>()],
        )
            .prop_filter("at least one bucket", |(_, r, t, _)| r.is_some() || t.is_some())
            .prop_map(|(tenant, requests, tokens, cost)| Op::Take { tenant, requests, tokens, cost }),
        2 => (0..3usize, bucket(60_000), prop_oneof![3 => -40..=40i64, 1 => any::<i64>()])
            .prop_map(|(tenant, bucket, delta)| Op::Adjust { tenant, bucket, delta }),
        3 => prop_oneof![0..50u64, 0..200_000u64].prop_map(Op::Advance),
    ]
}

#[test]
fn the_script_decides_exactly_what_the_rust_decides() {
    let redis = RedisServer::on_free_port();
    let rt = runtime();
    let store = store_on(&redis);
    // Keys written on the caller's clock never expire: each case gets tenants of its own.
    let cases = std::sync::atomic::AtomicU64::new(0);
    proptest!(ProptestConfig::with_cases(48), |(ops in prop::collection::vec(op(), 1..60), start in 0..2_000_000_000_000u64)| {
        let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let local = LocalStore::default();
        let mut now = start;
        for op in ops {
            match op {
                Op::Take { tenant, requests, tokens, cost } => {
                    let name = format!("case{case}-t{tenant}");
                    let charges: Vec<Charge> = [
                        requests.map(|bucket| Charge { kind: LimitKind::Requests, bucket, cost: 1 }),
                        tokens.map(|bucket| Charge { kind: LimitKind::Tokens, bucket, cost }),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    let want = local.take_now(&name, &charges, Duration::from_millis(now));
                    let got = rt.block_on(store.take_at(&name, &charges, Some(now))).unwrap();
                    prop_assert_eq!(got, want, "take at {} of {:?}", now, charges);
                }
                Op::Adjust { tenant, bucket, delta } => {
                    let name = format!("case{case}-t{tenant}");
                    local.adjust_now(&name, LimitKind::Tokens, bucket, delta, Duration::from_millis(now));
                    rt.block_on(store.adjust_at(&name, LimitKind::Tokens, bucket, delta, Some(now))).unwrap();
                }
                Op::Advance(ms) => now += ms,
            }
            for tenant in 0..3 {
                let name = format!("case{case}-t{tenant}");
                for kind in LimitKind::ALL {
                    let want = local.level(&name, kind);
                    let got = rt.block_on(store.level(&name, kind)).unwrap();
                    // An empty bucket is a missing key in Redis, whatever its time.
                    if want.units == 0 {
                        prop_assert_eq!(got.units, 0, "{} {:?}", name, kind);
                    } else {
                        prop_assert_eq!(got, want, "{} {:?}", name, kind);
                    }
                }
            }
        }
    });
}

#[test]
fn on_its_own_clock_redis_expires_drained_buckets_and_reloads_a_forgotten_script() {
    let redis = RedisServer::on_free_port();
    let rt = runtime();
    let store = store_on(&redis);
    let per_second = |n| Charge {
        kind: LimitKind::Requests,
        bucket: Bucket::per_second(n).unwrap(),
        cost: 1,
    };
    rt.block_on(async {
        let one = per_second(1);
        assert_eq!(
            store.take_at("ttl", &[one], None).await.unwrap(),
            Taken::Admitted
        );
        // One request of one a second drains in a second; the key lives no longer.
        let key = RedisStore::key("ttl", LimitKind::Requests);
        let ttl = store.call(&[b"PTTL", key.as_bytes()]).await.unwrap();
        assert!(
            matches!(ttl, Value::Integer(t) if (1..=1_000).contains(&t)),
            "{ttl:?}"
        );
        // Stamped with Redis's time: within a second of this machine's wall clock.
        let level = store.level("ttl", LimitKind::Requests).await.unwrap();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            level.at_ms.abs_diff(wall) < 1_000,
            "{} vs {wall}",
            level.at_ms
        );

        // A restarted Redis has no scripts: EVALSHA fails with NOSCRIPT and EVAL runs it.
        store.call(&[b"SCRIPT", b"FLUSH"]).await.unwrap();
        let ten = per_second(10);
        let mut answers = Vec::new();
        for _ in 0..20 {
            answers.push(store.take_at("burst", &[ten], None).await.unwrap());
        }
        assert_eq!(answers[0], Taken::Admitted);
        let refused: Vec<_> = answers
            .iter()
            .filter_map(|a| match a {
                Taken::Refused(r) => Some(r.wait_ms),
                Taken::Admitted => None,
            })
            .collect();
        assert!(refused.len() >= 9, "{answers:?}");
        assert!(
            refused
                .iter()
                .all(|w| w.is_some_and(|w| (1..=100).contains(&w))),
            "{refused:?}"
        );

        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let gone = store.call(&[b"EXISTS", key.as_bytes()]).await.unwrap();
        assert_eq!(gone, Value::Integer(0));
    });
}
