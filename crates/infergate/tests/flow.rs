//! Flow control end to end: `infergate serve` in front of a simulated replica slow enough to
//! saturate (an 8B model on an L4, two sequences at a time). Under a flood of Standard traffic,
//! Critical requests all succeed, Sheddable ones are shed with 429, Retry-After and the dropped
//! reason, and Standard requests queued past their TTL get 503; with the overload rule, Standard
//! requests of a backlog that does not drain are refused with 429 long before their TTL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{sim_replica, wait_for, Answer, Running, TempDir};

/// Standard clients looping at once: the replica holds two running and (at the ceiling) two
/// waiting, so most of these are always queued in the gateway.
const FLOOD: usize = 10;

fn chat(port: u16, band: &str) -> Answer {
    chat_as(port, band, None)
}

/// [`chat`] on behalf of `tenant` (the fairness id header) when given.
fn chat_as(port: u16, band: &str, tenant: Option<&str>) -> Answer {
    // Twenty tokens at about 63 ms each: over a second per request on this replica.
    let body = r#"{"model": "llama", "max_tokens": 20, "ignore_eos": true, "messages": [{"role": "user", "content": "hello there"}]}"#;
    let mut headers = vec![("x-gateway-inference-objective", band)];
    if let Some(tenant) = tenant {
        headers.push(("x-gateway-inference-fairness-id", tenant));
    }
    common::post(
        port,
        "/v1/chat/completions",
        &headers,
        body,
        Duration::from_secs(60),
    )
}

/// The flood test's bands: Standard expires quickly so that some of the flood times out.
const FLOOD_BANDS: &str = "
      - {name: Standard, queueTtl: 1s}
      - {name: Critical, queueTtl: 60s}";

/// The gateway's config; `flow` follows `flowControl.bands:` (the bands list, then any other
/// `flowControl` fields at their indentation). Metrics count as fresh for a minute: on a loaded
/// machine a scrape answered late must not leave the pool's saturation unknown, which fails
/// flow control open and dispatches every band at once, for a reason that is not under test.
fn config(replica: u16, flow: &str) -> String {
    let flow_control = format!(
        "  flowControl:
    saturation: {{queueDepthThreshold: 2, metricsStalenessThreshold: 60s}}
    bands:{flow}
"
    );
    common::one_pool_config("llama", replica, &flow_control, "")
}

/// A simulated 8B replica on an L4 that runs two sequences at a time, with `infergate serve` in
/// front of it; both processes die with the value.
struct SlowPool {
    port: u16,
    admin: u16,
    _dir: TempDir,
    _sim: Running,
    _gateway: Running,
}

impl SlowPool {
    fn start(name: &str, flow: &str) -> SlowPool {
        let (sim, replica) = sim_replica(&[
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "l4",
            "--max-num-seqs",
            "2",
            "--served-model-name",
            "llama",
        ]);
        let dir = TempDir::new(name);
        let file = dir.path().join("gateway.yaml");
        std::fs::write(&file, config(replica, flow)).unwrap();
        let (gateway, port, admin) = common::serve_ready(&file, |_| {});
        SlowPool {
            port,
            admin,
            _dir: dir,
            _sim: sim,
            _gateway: gateway,
        }
    }
}

/// The flood: [`FLOOD`] Standard clients that send again as soon as they are answered, until
/// the returned flag is set; returns once the pool reads as saturated. Each thread yields its
/// answers.
fn flood_until_saturated(
    port: u16,
    admin: u16,
) -> (Arc<AtomicBool>, Vec<thread::JoinHandle<Vec<Answer>>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flood = (0..FLOOD)
        .map(|_| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut answers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    answers.push(chat(port, "Standard"));
                }
                answers
            })
        })
        .collect();
    wait_for("the pool to saturate", || {
        common::metric(admin, "infergate_pool_saturation{pool=\"llama\"}") >= 1.0
    });
    (stop, flood)
}

/// A 429's Retry-After: whole seconds, between 1 and 60.
fn assert_retry_after(a: &Answer) {
    let retry: u64 = a
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
}

/// Stops the flood and sorts what it got: some requests answered, some refused with `status`
/// carrying `reason` (`x-llm-d-request-dropped-reason`) and the error `code`, and nothing else.
/// Returns the refused ones.
fn stop_and_sort(
    stop: &AtomicBool,
    flood: Vec<thread::JoinHandle<Vec<Answer>>>,
    status: u16,
    reason: &str,
    code: &str,
) -> Vec<Answer> {
    stop.store(true, Ordering::Relaxed);
    let (answered, refused): (Vec<Answer>, Vec<Answer>) = flood
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .partition(|a| a.status == 200);
    assert!(!answered.is_empty(), "nothing got through");
    assert!(!refused.is_empty(), "no request was refused with {reason}");
    for a in &refused {
        assert_eq!(a.status, status, "{}", a.body);
        assert_eq!(a.header("x-llm-d-request-dropped-reason"), Some(reason));
        assert!(a.body.contains(&format!("\"{code}\"")), "{}", a.body);
    }
    refused
}

#[test]
fn under_overload_critical_succeeds_sheddable_is_shed_and_standard_expires() {
    let pool = SlowPool::start("flow", FLOOD_BANDS);
    let (port, admin) = (pool.port, pool.admin);

    let (stop, flood) = flood_until_saturated(port, admin);

    // Sheddable traffic is shed at once.
    for _ in 0..5 {
        let a = chat(port, "Sheddable");
        assert_eq!(a.status, 429, "{}", a.body);
        assert_retry_after(&a);
        assert_eq!(
            a.header("x-llm-d-request-dropped-reason"),
            Some("rejected-saturated")
        );
        assert!(a.body.contains("\"pool_saturated\""), "{}", a.body);
    }

    // Critical traffic goes ahead of the flood and every request succeeds.
    let critical: Vec<_> = (0..4)
        .map(|_| thread::spawn(move || chat(port, "Critical")))
        .collect();
    for c in critical {
        let a = c.join().unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
    }

    let expired = stop_and_sort(&stop, flood, 503, "rejected-ttl-expired", "queue_timeout");
    // Those refused waited their whole TTL for capacity.
    for a in &expired {
        assert!(a.took() >= Duration::from_secs(1), "{:?}", a.took());
    }

    let rejected = |band: &str, reason: &str| {
        common::metric(
            admin,
            &format!(
                "infergate_flow_rejections_total{{pool=\"llama\",band=\"{band}\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert_eq!(rejected("Sheddable", "rejected-saturated"), 5.0);
    assert_eq!(
        rejected("Standard", "rejected-ttl-expired"),
        expired.len() as f64
    );
    assert_eq!(rejected("Critical", "rejected-ttl-expired"), 0.0);
}

/// A backlog that does not drain: with the overload rule's 500 ms wait (its sojourn sensor reads
/// the pool as overloaded once the oldest request has waited past the wait for another wait),
/// Standard requests that waited past the wait are refused with 429, Retry-After and
/// `rejected-overloaded` long before their 60 s TTL, and the others still get through.
#[test]
fn a_sustained_backlog_refuses_what_waited_too_long_with_429_long_before_the_ttl() {
    let flow =
        "\n      - {name: Standard, queueTtl: 60s}\n    overload: {interval: 1s, maxWait: 500ms}";
    let pool = SlowPool::start("overload", flow);
    let (port, admin) = (pool.port, pool.admin);
    let (stop, flood) = flood_until_saturated(port, admin);
    thread::sleep(Duration::from_secs(6));
    let refused = stop_and_sort(&stop, flood, 429, "rejected-overloaded", "pool_overloaded");
    for a in &refused {
        assert_retry_after(a);
        // It waited at least the overload wait, and nowhere near the TTL.
        assert!(a.took() >= Duration::from_millis(500), "{:?}", a.took());
        assert!(a.took() < Duration::from_secs(20), "{:?}", a.took());
    }
    let metric = "infergate_flow_rejections_total{pool=\"llama\",band=\"Standard\",reason=\"rejected-overloaded\"}";
    assert_eq!(common::metric(admin, metric), refused.len() as f64);
}

/// One tenant's closed-loop clients: each sends its next request as soon as the last is answered,
/// until `stop`; returns the instants at which requests completed with 200. A request cut off by
/// the gateway going away at the end of the test is not counted.
fn tenant_clients(
    port: u16,
    tenant: &'static str,
    clients: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<Vec<Instant>>> {
    (0..clients)
        .map(|_| {
            let stop = Arc::clone(stop);
            thread::spawn(move || {
                let body = r#"{"model": "llama", "max_tokens": 20, "ignore_eos": true, "messages": [{"role": "user", "content": "hi"}]}"#;
                let headers = [
                    ("x-gateway-inference-objective", "Standard"),
                    ("x-gateway-inference-fairness-id", tenant),
                ];
                let mut done = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let addr = format!("127.0.0.1:{port}");
                    let timeout = Duration::from_secs(90);
                    let Some(raw) = common::http_with(&addr, "POST", "/v1/chat/completions", &headers, body, timeout)
                    else {
                        break;
                    };
                    // A connection cut by the gateway going away reads as an empty response.
                    if raw.starts_with("HTTP/1.1 200") {
                        done.push(Instant::now());
                    }
                }
                done
            })
        })
        .collect()
}

/// Completions per tenant, (big, small), in 25 s of two tenants in one band, "big" offering ten
/// times the concurrency of "small", both backlogged behind a saturated replica; `flow` is the
/// Standard band and any other `flowControl` fields.
fn completions_ten_to_one(name: &str, flow: &str) -> (usize, usize) {
    // Three small clients keep the small tenant backlogged: the replica holds about four requests
    // (two running, two waiting at the saturation threshold), so half of it is two requests.
    const SMALL: usize = 3;
    const BIG: usize = 10 * SMALL;
    let pool = SlowPool::start(name, flow);
    let stop = Arc::new(AtomicBool::new(false));
    let big = tenant_clients(pool.port, "big", BIG, &stop);
    let small = tenant_clients(pool.port, "small", SMALL, &stop);

    // Count completions in a window after both tenants' queues have formed.
    thread::sleep(Duration::from_secs(5));
    let from = Instant::now();
    thread::sleep(Duration::from_secs(25));
    let to = Instant::now();
    stop.store(true, Ordering::Relaxed);
    drop(pool); // ends the clients still queued
    let count = |handles: Vec<thread::JoinHandle<Vec<Instant>>>| -> usize {
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .filter(|t| (from..to).contains(t))
            .count()
    };
    let (big, small) = (count(big), count(small));
    eprintln!(
        "{name}: offered 10:1 ({BIG} vs {SMALL} clients); completed in 25 s: big {big}, small {small} (small's share {:.0} %)",
        100.0 * small as f64 / (big + small).max(1) as f64
    );
    assert!(
        big + small >= 20,
        "too few completions to judge: {big} + {small}"
    );
    (big, small)
}

/// A Standard band that holds its backlog: these tests measure how a backlog that never drains
/// is shared, which the overload rule (on by default) would cut at its wait.
const FAIR_BACKLOG: &str =
    "\n      - {name: Standard, queueTtl: 120s}\n    overload: {enabled: false}";

/// Round-robin fair queueing (the default) gives each backlogged tenant about half of what
/// completes, where first-come-first-served would give the small tenant about its 1/11 of the
/// offered load.
#[test]
fn two_backlogged_tenants_offering_ten_to_one_share_the_pool_fairly() {
    let (big, small) = completions_ten_to_one("fairness-rr", FAIR_BACKLOG);
    let share = small as f64 / (big + small) as f64;
    assert!((0.35..=0.65).contains(&share), "big {big}, small {small}");
}

/// Weighted fair queueing with weights 3:1 for the tenant offering ten times more gives it about
/// three quarters, however much more it offers.
#[test]
fn weighted_fair_queueing_holds_the_configured_weights_live() {
    let flow = "\n      - {name: Standard, queueTtl: 120s}
    overload: {enabled: false}
    fairness: weighted-fair
    tenantWeights: {big: 3, small: 1}";
    let (big, small) = completions_ten_to_one("fairness-wfq", flow);
    let share = small as f64 / (big + small) as f64;
    assert!((0.12..=0.38).contains(&share), "big {big}, small {small}");
}
