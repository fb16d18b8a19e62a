//! Outlier detection: a pod that answers 500 to everything, or hangs, is ejected after a few
//! failures, comes back on probation, and costs under 1 % of the requests once first ejected;
//! the failures are counted against the endpoint that caused them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use serde_json::json;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::common::*;

/// Detection with short ejections, so that returns (and re-ejections) happen within a test.
const SHORT_EJECTIONS: &str =
    "      outlierDetection: {consecutiveFailures: 5, baseEjectionTime: 1s, slowStartWindow: 1s}\n";

/// What each request came to, in the order the answers arrived.
struct Run {
    statuses: Vec<StatusCode>,
}

impl Run {
    /// Fewer than 1 % of the requests answered after the first five failures (those that
    /// ejected the pod) failed, over at least 300 of them; prints the figures.
    fn assert_under_one_percent_failed_after_the_first_ejection(&self) {
        let (failed, after) = self.failures_after(5);
        eprintln!(
            "{} requests, {} failed; after the first ejection {failed} of {after}",
            self.statuses.len(),
            self.statuses.iter().filter(|s| s.is_server_error()).count()
        );
        assert!(
            after >= 300,
            "the gateway served only {after} requests after the ejection"
        );
        assert!(
            failed * 100 < after,
            "{failed} of {after} requests failed after the first ejection"
        );
    }

    /// Failed answers after the first `skip` failures (those that led to the first ejection).
    fn failures_after(&self, skip: usize) -> (usize, usize) {
        let mut failures = 0;
        let mut after = None;
        for (i, s) in self.statuses.iter().enumerate() {
            if !s.is_server_error() {
                continue;
            }
            failures += 1;
            if failures == skip {
                after = Some(i + 1);
                break;
            }
        }
        let Some(from) = after else {
            return (0, 0);
        };
        let rest = &self.statuses[from..];
        (
            rest.iter().filter(|s| s.is_server_error()).count(),
            rest.len(),
        )
    }
}

/// Sends chat requests from `clients` concurrent clients for `length`.
async fn load(gw: &TestGateway, clients: usize, length: Duration) -> Run {
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let end = Instant::now() + length;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (addr, statuses) = (gw.addr, Arc::clone(&statuses));
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < end {
                let body = chat(
                    LLAMA,
                    &format!("client {c} question {i}"),
                    json!({"max_tokens": 2}),
                );
                let (s, _, _) = send_full(
                    addr,
                    hyper::Method::POST,
                    "/v1/chat/completions",
                    Some(body.to_string()),
                    &[],
                )
                .await;
                statuses.lock().await.push(s);
                i += 1;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let statuses = std::mem::take(&mut *statuses.lock().await);
    Run { statuses }
}

fn ejections(metrics: &str, endpoint: SocketAddr) -> f64 {
    metric_sum(
        metrics,
        &format!("infergate_endpoint_ejections_total{{pool=\"llama\",endpoint=\"{endpoint}\"}}"),
    )
}

fn answered(metrics: &str, endpoint: SocketAddr, status: u16) -> f64 {
    metric_sum(
        metrics,
        &format!(
            "infergate_requests_total{{model=\"{LLAMA}\",pool=\"llama\",endpoint=\"{endpoint}\",status=\"{status}\"}}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_answering_500_is_ejected_and_costs_under_one_percent_after() {
    let mut broken = instant();
    broken.faults.error_rates.insert(500, 1.0);
    let (bad, a, b) = (
        Replica::start(broken).await,
        Replica::start(instant()).await,
        Replica::start(instant()).await,
    );
    let mut pool = PoolDef::new("llama", LLAMA, vec![bad.addr, a.addr, b.addr]);
    pool.extra = SHORT_EJECTIONS;
    let gw = TestGateway::ready(&config_yaml(&[pool], "")).await;
    // 4 s: ejected at once, back at 1 s and re-ejected for 2 s, back at about 3 s.
    let run = load(&gw, 4, Duration::from_secs(4)).await;
    run.assert_under_one_percent_failed_after_the_first_ejection();
    let m = gw.metric_text().await;
    assert!(
        ejections(&m, bad.addr) >= 2.0,
        "ejected, returned on probation and ejected again:\n{m}"
    );
    assert_eq!(ejections(&m, a.addr) + ejections(&m, b.addr), 0.0, "{m}");
    // Every 500 the client saw is counted against the broken pod.
    let fives = run.statuses.iter().filter(|s| s.as_u16() == 500).count();
    assert_eq!(answered(&m, bad.addr, 500), fives as f64, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_pod_is_ejected_at_the_route_timeout_and_its_504s_name_it() {
    let mut hung = instant();
    hung.faults.hang = true;
    let (bad, a, b) = (
        Replica::start(hung).await,
        Replica::start(instant()).await,
        Replica::start(instant()).await,
    );
    let mut pool = PoolDef::new("llama", LLAMA, vec![bad.addr, a.addr, b.addr]);
    pool.extra =
        Box::leak(format!("{SHORT_EJECTIONS}      routeTimeout: 300ms\n").into_boxed_str());
    let gw = TestGateway::ready(&config_yaml(&[pool], "")).await;
    let run = load(&gw, 4, Duration::from_secs(5)).await;
    let timeouts = run
        .statuses
        .iter()
        .filter(|s| **s == StatusCode::GATEWAY_TIMEOUT)
        .count();
    assert!(
        timeouts >= 5,
        "the hung pod was never tried: {timeouts} timeouts"
    );
    run.assert_under_one_percent_failed_after_the_first_ejection();
    let m = gw.metric_text().await;
    assert!(ejections(&m, bad.addr) >= 1.0, "{m}");
    // The 504s name the pod that did not answer, not an empty endpoint.
    assert_eq!(answered(&m, bad.addr, 504), timeouts as f64, "{m}");
}
