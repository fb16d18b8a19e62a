//! Faults under streaming load, injected through the simulator's fault API: a pod that answers
//! 500 to everything, or hangs, is ejected after a few failures, comes back on probation, and
//! costs under 1 % of the requests once first ejected, the failures counted against it; a pod
//! whose metrics freeze is found within seconds and then sent nothing; a slowed pod is sent
//! less than its share.

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

/// Sends streamed chat requests from `clients` concurrent clients for `length`. A stream that
/// began but did not end whole (no `[DONE]`, or an error event) counts as a 502.
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
                    json!({"max_tokens": 2, "stream": true}),
                );
                let s = infergate_test_support::client::stream(addr, "/v1/chat/completions", &body)
                    .await;
                let status = match s {
                    Err(_) => StatusCode::BAD_GATEWAY,
                    Ok(s) if s.status != StatusCode::OK => s.status,
                    Ok(s) => {
                        let whole = s.events.last().is_some_and(|(_, e)| e == "[DONE]")
                            && !s.raw.contains("\"error\"");
                        if whole {
                            StatusCode::OK
                        } else {
                            StatusCode::BAD_GATEWAY
                        }
                    }
                };
                statuses.lock().await.push(status);
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

/// Clients streaming chats of 24 tokens back to back until stopped; each stream that does not
/// end whole is noted.
struct StreamingClients {
    stop: Arc<std::sync::atomic::AtomicBool>,
    broken: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl StreamingClients {
    fn start(addr: SocketAddr, clients: usize) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let broken = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..clients)
            .map(|c| {
                let (stop, broken) = (Arc::clone(&stop), Arc::clone(&broken));
                tokio::spawn(async move {
                    let mut i = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let body = chat(
                            LLAMA,
                            &format!("client {c} question {i}"),
                            json!({"stream": true, "max_tokens": 24}),
                        );
                        let s = infergate_test_support::client::stream(
                            addr,
                            "/v1/chat/completions",
                            &body,
                        )
                        .await;
                        let whole = s.as_ref().is_ok_and(|s| {
                            s.status == StatusCode::OK
                                && s.events.last().is_some_and(|(_, e)| e == "[DONE]")
                        });
                        if !whole {
                            broken
                                .lock()
                                .await
                                .push(format!("{:?}", s.map(|s| s.status)));
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        Self {
            stop,
            broken,
            tasks,
        }
    }

    /// Stops them once their streams in progress end; the broken streams.
    async fn stop(self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        std::mem::take(&mut *self.broken.lock().await)
    }
}

fn routed(metrics: &str, endpoint: SocketAddr) -> f64 {
    metric_sum(
        metrics,
        &format!("infergate_routing_decisions_total{{pool=\"llama\",endpoint=\"{endpoint}\"}}"),
    )
}

fn frozen(metrics: &str, endpoint: SocketAddr) -> f64 {
    metric_sum(
        metrics,
        &format!("infergate_endpoint_metrics_frozen{{pool=\"llama\",endpoint=\"{endpoint}\"}}"),
    )
}

/// Polls the gateway's metrics until `check` holds of them, for at most `limit`; returns them
/// and how long it took, or panics.
async fn until_metrics(
    gw: &TestGateway,
    limit: Duration,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> (String, Duration) {
    let from = Instant::now();
    loop {
        let m = gw.metric_text().await;
        if check(&m) {
            return (m, from.elapsed());
        }
        assert!(from.elapsed() < limit, "{what} not within {limit:?}:\n{m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_metrics_freeze_is_found_in_seconds_then_drawn_nothing_and_healed_returns() {
    // Ten times real time: a stream of 24 tokens takes some 20 ms, so each pod always has
    // requests in flight under the load below.
    let spec = || infergate_test_support::replicas::fast_spec(10.0);
    let (bad, a, b) = (
        Replica::start(spec()).await,
        Replica::start(spec()).await,
        Replica::start(spec()).await,
    );
    let addrs = [bad.addr, a.addr, b.addr];
    let mut pool = PoolDef::new("llama", LLAMA, addrs.to_vec());
    // The default window (3 s); a short ejection, so that the healed pod may return in time.
    pool.extra = SHORT_EJECTIONS;
    let gw = TestGateway::ready(&config_yaml(&[pool], "")).await;

    let clients = StreamingClients::start(gw.addr, 9);
    let all = |m: &str| addrs.iter().map(|&e| routed(m, e)).sum::<f64>();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = gw.metric_text().await;
    assert!(routed(&before, bad.addr) > 0.0, "{before}");

    // Its metrics freeze (the simulator's fault API) while it keeps serving.
    bad.set_faults(json!({"metrics": "stale"})).await;
    let (at_detection, detection) = until_metrics(&gw, Duration::from_secs(8), "frozen", |m| {
        frozen(m, bad.addr) == 1.0
    })
    .await;
    let frozen_share = (routed(&at_detection, bad.addr) - routed(&before, bad.addr))
        / (all(&at_detection) - all(&before));
    assert!(
        detection < Duration::from_millis(4_500),
        "found after {detection:?}"
    );
    assert!(ejections(&at_detection, bad.addr) >= 1.0, "{at_detection}");

    // Then it draws nothing: what it still gets is what was on its way when it was found.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let later = gw.metric_text().await;
    let (to_bad, total) = (
        routed(&later, bad.addr) - routed(&at_detection, bad.addr),
        all(&later) - all(&at_detection),
    );
    eprintln!(
        "frozen metrics: found {detection:?} after the fault (it drew {:.0} % meanwhile); \
         after that {to_bad} of {total} requests went to it",
        frozen_share * 100.0
    );
    assert!(total >= 1_000.0, "only {total} requests after detection");
    assert!(
        to_bad * 100.0 < total,
        "{to_bad} of {total} went to the frozen pod"
    );
    assert_eq!(
        frozen(&later, bad.addr),
        1.0,
        "still frozen at rest:\n{later}"
    );

    // Healed: its metrics move again (its counters show what it served meanwhile), and it is
    // sent work again.
    bad.set_faults(json!({})).await;
    let healed = routed(&later, bad.addr);
    let (_, back) = until_metrics(&gw, Duration::from_secs(5), "traffic back", |m| {
        frozen(m, bad.addr) == 0.0 && routed(m, bad.addr) > healed + 20.0
    })
    .await;
    let broken = clients.stop().await;
    eprintln!("healed: back within {back:?}");
    assert!(broken.is_empty(), "broken streams: {broken:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_slowed_tenfold_under_streaming_load_is_sent_less_and_no_stream_breaks() {
    let spec = || infergate_test_support::replicas::fast_spec(10.0);
    let (slow, a, b) = (
        Replica::start(spec()).await,
        Replica::start(spec()).await,
        Replica::start(spec()).await,
    );
    let addrs = [slow.addr, a.addr, b.addr];
    let gw = TestGateway::ready(&config_yaml(
        &[PoolDef::new("llama", LLAMA, addrs.to_vec())],
        "",
    ))
    .await;
    let clients = StreamingClients::start(gw.addr, 9);
    let all = |m: &str| addrs.iter().map(|&e| routed(m, e)).sum::<f64>();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Thermal throttling: every engine step of one pod takes ten times as long.
    slow.set_faults(json!({"slowdown": 10.0})).await;
    // Two seconds to notice, then three measured.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let from = gw.metric_text().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let to = gw.metric_text().await;
    let broken = clients.stop().await;
    let share = (routed(&to, slow.addr) - routed(&from, slow.addr)) / (all(&to) - all(&from));
    eprintln!(
        "slowed tenfold: {:.1} % of {} requests went to it (a third is its fair share)",
        share * 100.0,
        all(&to) - all(&from)
    );
    // Less than the third round-robin would send it. (A tenth of the others' speed would earn
    // it about 5 %; the picker's default scorers weigh queues, and a slowed pod batches its
    // requests rather than queueing them: a routing finding, not a reliability one.)
    assert!(share < 0.30, "the slowed pod drew {:.1} %", share * 100.0);
    assert!(broken.is_empty(), "broken streams: {broken:?}");
}
