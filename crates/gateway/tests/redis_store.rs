//! The Redis store against a real `redis-server` started here: its Lua script decides exactly
//! what the Rust it mirrors decides (same answers, same levels, to the unit, up to limits at
//! the top of the accepted range), it runs on Redis's clock with keys that expire once drained,
//! and it survives a Redis that forgot its scripts.
//!
//! Needs `redis-server` on the PATH (or its path in `REDIS_SERVER`); without it this test fails,
//! naming what to install.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use infergate_flow::limit::{Bucket, Charge, LimitKind, LocalStore, Taken};
use infergate_gateway::ratelimit::redis::RedisStore;
use infergate_gateway::ratelimit::resp::Value;
use proptest::prelude::*;

/// A `redis-server` on a free loopback port, killed when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    /// Starts a `redis-server` on a free loopback port. A port that was free when chosen is not
    /// reserved: another process (another test's Redis, started at the same moment) may bind it
    /// first, and then this server exits while the other one answers on the port — sharing a
    /// server that its owner later kills. So a server counts as started only once the one that
    /// answers reports this child's process id; otherwise it is started again on a fresh port.
    fn start() -> Redis {
        const TRIES: usize = 5;
        for _ in 0..TRIES {
            if let Some(redis) = Self::try_start() {
                return redis;
            }
        }
        panic!("redis-server did not start on a port of its own in {TRIES} tries");
    }

    fn try_start() -> Option<Redis> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{bin}` ({e}): these tests need a real Redis; install it \
                     (apt-get install -y redis-server) or set REDIS_SERVER to its path"
                )
            });
        // Dropping it kills the child, whatever happens below.
        let mut redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if redis.child.try_wait().unwrap().is_some() {
                return None; // it exited: the port was taken
            }
            if let Some(pid) = server_pid(port) {
                return (pid == redis.child.id()).then_some(redis);
            }
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn store(&self) -> RedisStore {
        RedisStore::new(
            &format!("redis://127.0.0.1:{}", self.port),
            Duration::from_secs(2),
        )
        .unwrap()
    }
}

/// The process id that the Redis answering on loopback `port` reports (`INFO server`), if one
/// answers.
fn server_pid(port: u16) -> Option<u32> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    conn.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&reply);
        if let Some(rest) = text.split("process_id:").nth(1) {
            if let Some((pid, _)) = rest.split_once("\r\n") {
                return pid.trim().parse().ok();
            }
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let redis = Redis::start();
    let rt = runtime();
    let store = redis.store();
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
    let redis = Redis::start();
    let rt = runtime();
    let store = redis.store();
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
