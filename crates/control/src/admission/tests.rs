//! Flow control driven in (paused) real time: waits end on a completion, a TTL or a stale
//! observation; refusals carry their status, reason and Retry-After; metrics follow.

use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use infergate_config::gateway::{Band, ResolvedGateway};
use infergate_picker::{EndpointId, EndpointSpec, Pool, ScrapedMetrics};
use tokio::time::Instant;

use super::{Admission, Admitted, Ask};
use infergate_telemetry::metrics::Metrics;

fn gateway(flow: &str) -> ResolvedGateway {
    let yaml = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  schedulers:\n    - name: p\n      modelName: m\n      modelSelector: {{matchLabels: {{app: a}}}}\n{flow}"
    );
    infergate_config::gateway::load_from_str(&yaml)
        .unwrap()
        .resolve()
        .unwrap()
}

/// Flow control of pool `p` with its metrics attached.
fn admission(flow: &str) -> (Arc<Admission>, Arc<Metrics>) {
    let a = Arc::new(Admission::new("p", &gateway(flow), true));
    let m = Arc::new(Metrics::new());
    a.attach_metrics(&m);
    (a, m)
}

/// One endpoint with `waiting` requests queued (a queue-depth threshold of 5 by default), its
/// scrape landing at `at`.
fn pool(waiting: u64, at: Duration) -> Pool {
    let mut pool = Pool::new(vec![EndpointSpec::new(1, "10.0.0.1:8000")]).unwrap();
    let m = ScrapedMetrics {
        waiting: Some(waiting),
        kv_usage: Some(0.1),
        ..ScrapedMetrics::empty(at)
    };
    pool.update_metrics(EndpointId(1), m).unwrap();
    pool
}

fn ask(band: Band) -> Ask {
    Ask {
        band,
        tenant: Some("team".into()),
        bytes: 64,
    }
}

fn metric(m: &Metrics, line: &str) -> bool {
    m.encode().lines().any(|l| l == line)
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_goes_when_a_request_in_flight_finishes() {
    let (a, m) = admission("");
    // Four waiting of five: one more Standard request fits.
    a.observe(&pool(4, Duration::ZERO), &[], Duration::ZERO);
    let Ok(Admitted::Now(first)) = a.enqueue(ask(Band::Standard)) else {
        panic!("the first request has room");
    };
    let Ok(Admitted::Queued(waiting)) = a.enqueue(ask(Band::Standard)) else {
        panic!("the second must wait");
    };
    assert_eq!(a.queued(Band::Standard).requests, 1);
    assert!(metric(
        &m,
        "infergate_flow_queue_requests{pool=\"p\",band=\"Standard\"} 1"
    ));
    let released = tokio::spawn(waiting.wait());
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(first);
    let second = released.await.unwrap().unwrap();
    assert_eq!(second.waited(), Duration::from_millis(300));
    assert_eq!(second.band(), Band::Standard);
    assert_eq!(a.queued(Band::Standard).requests, 0);
    assert!(metric(
        &m,
        "infergate_flow_queue_requests{pool=\"p\",band=\"Standard\"} 0"
    ));
    assert!(metric(
        &m,
        "infergate_flow_queue_wait_seconds_count{pool=\"p\",band=\"Standard\"} 2"
    ));
}

#[tokio::test(start_paused = true)]
async fn a_request_queued_past_its_ttl_gets_503_with_the_dropped_reason() {
    let (a, m) = admission(
        "  flowControl:\n    queueTtl: 2s\n    saturation: {metricsStalenessThreshold: 60s}\n",
    );
    a.observe(&pool(5, Duration::ZERO), &[], Duration::ZERO);
    let start = Instant::now();
    let err = a.admit(ask(Band::Standard)).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(err.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(err.code(), "queue_timeout");
    assert_eq!(err.dropped_reason(), Some("rejected-ttl-expired"));
    assert_eq!(err.retry_after_secs(), None);
    assert!(metric(
        &m,
        "infergate_flow_rejections_total{pool=\"p\",band=\"Standard\",reason=\"rejected-ttl-expired\"} 1"
    ));
    // A 503 is not a shed.
    assert!(metric(&m, "infergate_shed_requests_total{pool=\"p\"} 0"));
}

#[tokio::test(start_paused = true)]
async fn a_queue_waiting_for_an_adapter_slot_does_not_hold_standard() {
    use infergate_picker::LoraInfo;
    let (a, _) = admission("");
    // Nine waiting of five, but every slot runs another adapter than one that waits: what
    // waits for batch room cannot be told from what waits for a slot, and KV (0.1) has room.
    let mut p = pool(9, Duration::ZERO);
    let bound = ScrapedMetrics {
        waiting: Some(9),
        kv_usage: Some(0.1),
        lora: Some(LoraInfo {
            max_lora: 2,
            running: vec!["a".into(), "b".into()],
            waiting: vec!["c".into()],
        }),
        ..ScrapedMetrics::empty(Duration::ZERO)
    };
    p.update_metrics(EndpointId(1), bound.clone()).unwrap();
    let state = a.observe(&p, &[], Duration::ZERO);
    assert!((state.queue_saturation - 0.125).abs() < 1e-9, "{state:?}");
    assert!(matches!(
        a.enqueue(ask(Band::Standard)),
        Ok(Admitted::Now(_))
    ));
    // Once what waits has its adapter in the batch, it waits for batch room: the nine count.
    let runnable = ScrapedMetrics {
        lora: Some(LoraInfo {
            max_lora: 2,
            running: vec!["a".into(), "b".into()],
            waiting: vec!["a".into()],
        }),
        ..bound
    };
    p.update_metrics(EndpointId(1), runnable).unwrap();
    a.observe(&p, &[], Duration::ZERO);
    assert!(matches!(
        a.enqueue(ask(Band::Standard)),
        Ok(Admitted::Queued(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_slow_decode_over_its_recent_scrapes_holds_sheddable() {
    use infergate_picker::LatencyTotals;
    let (a, _) = admission("");
    let id = EndpointId(1);
    let scrape = |at_ms: u64, seconds: f64, count: u64| ScrapedMetrics {
        waiting: Some(0),
        kv_usage: Some(0.1),
        inter_token_latency: Some(LatencyTotals { seconds, count }),
        ..ScrapedMetrics::empty(Duration::from_millis(at_ms))
    };
    let mut p = pool(0, Duration::ZERO);
    // 1,000 tokens at 40 ms each over half a second: half the default 80 ms threshold.
    for (at, seconds, count) in [(0, 100.0, 10_000), (500, 140.0, 11_000)] {
        p.update_metrics(id, scrape(at, seconds, count)).unwrap();
        let state = a.observe(&p, &[id], Duration::from_millis(at));
        assert!(state.saturation <= 0.5 + 1e-9, "{state:?}");
    }
    assert!(matches!(
        a.enqueue(ask(Band::Sheddable)),
        Ok(Admitted::Now(_))
    ));
    // The next 1,000 at 120 ms: over the last second the mean is 80 ms, saturation 1.
    p.update_metrics(id, scrape(1_000, 260.0, 12_000)).unwrap();
    let state = a.observe(&p, &[id], Duration::from_millis(1_000));
    assert!((state.saturation - 1.0).abs() < 1e-9, "{state:?}");
    let paces = a.decode_paces([id, EndpointId(2)]);
    assert!(
        paces[0].is_some_and(|s| (s - 0.08).abs() < 1e-9),
        "{paces:?}"
    );
    assert_eq!(paces[1], None);
    // Sheddable reads it at all times; Standard not while the pool is not overloaded.
    assert!(a.admit(ask(Band::Sheddable)).await.is_err());
    assert!(matches!(
        a.enqueue(ask(Band::Standard)),
        Ok(Admitted::Now(_))
    ));
    // `interTokenLatencyThreshold: 0s` leaves the pace out.
    let (off, _) = admission("  flowControl:\n    saturation: {interTokenLatencyThreshold: 0s}\n");
    for (at, seconds, count) in [
        (0, 100.0, 10_000),
        (500, 140.0, 11_000),
        (1_000, 260.0, 12_000),
    ] {
        p.update_metrics(id, scrape(at, seconds, count)).unwrap();
        off.observe(&p, &[id], Duration::from_millis(at));
    }
    assert!(matches!(
        off.enqueue(ask(Band::Sheddable)),
        Ok(Admitted::Now(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_stale_observation_lets_queued_requests_go() {
    let (a, _) = admission("");
    a.observe(&pool(9, Duration::ZERO), &[], Duration::ZERO);
    let start = Instant::now();
    let permit = a.admit(ask(Band::Standard)).await.unwrap();
    // Scrapes stopped landing: after a second (the floor of the observation's age) nothing is
    // known about the pool, and flow control fails open.
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(permit.waited(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn sheddable_is_refused_at_saturation_and_critical_goes() {
    let (a, m) = admission("");
    a.observe(&pool(6, Duration::ZERO), &[], Duration::ZERO);
    let err = a.admit(ask(Band::Sheddable)).await.unwrap_err();
    assert_eq!(err.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(err.code(), "pool_saturated");
    assert_eq!(err.dropped_reason(), Some("rejected-saturated"));
    assert!(err.retry_after_secs().is_some_and(|s| s >= 1));
    assert!(a.admit(ask(Band::Critical)).await.is_ok());
    assert!(metric(
        &m,
        "infergate_flow_rejections_total{pool=\"p\",band=\"Sheddable\",reason=\"rejected-saturated\"} 1"
    ));
    assert!(metric(&m, "infergate_shed_requests_total{pool=\"p\"} 1"));
}

#[tokio::test(start_paused = true)]
async fn a_waiting_request_that_goes_away_leaves_the_queue() {
    let (a, _) = admission("");
    a.observe(&pool(5, Duration::ZERO), &[], Duration::ZERO);
    let Ok(Admitted::Queued(waiting)) = a.enqueue(ask(Band::Standard)) else {
        panic!("must wait");
    };
    assert_eq!(a.queued(Band::Standard).requests, 1);
    drop(waiting);
    assert_eq!(a.queued(Band::Standard).requests, 0);
}

#[tokio::test(start_paused = true)]
async fn critical_displaces_a_queued_request_from_a_full_queue() {
    let (a, m) = admission(
        "  flowControl:\n    maxQueueRequests: 1\n    saturation: {metricsStalenessThreshold: 60s}\n",
    );
    // Saturation 3: over every band's ceiling.
    a.observe(&pool(15, Duration::ZERO), &[], Duration::ZERO);
    let Ok(Admitted::Queued(standard)) = a.enqueue(ask(Band::Standard)) else {
        panic!("must wait");
    };
    let Ok(Admitted::Queued(_critical)) = a.enqueue(ask(Band::Critical)) else {
        panic!("critical takes the place");
    };
    let err = standard.wait().await.unwrap_err();
    assert_eq!(err.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(err.dropped_reason(), Some("rejected-displaced"));
    assert!(err.retry_after_secs().is_some());
    assert_eq!(a.queued(Band::Critical).requests, 1);
    assert!(metric(&m, "infergate_shed_requests_total{pool=\"p\"} 1"));
}

#[tokio::test(start_paused = true)]
async fn flow_control_off_admits_everything_at_once() {
    let a = Arc::new(Admission::new("p", &gateway(""), false));
    a.observe(&pool(50, Duration::ZERO), &[], Duration::ZERO);
    for band in [Band::Sheddable, Band::Standard, Band::Critical] {
        assert!(matches!(a.enqueue(ask(band)), Ok(Admitted::Now(_))));
    }
}

#[tokio::test(start_paused = true)]
async fn an_observation_counts_the_growth_in_flight_since_each_scrape() {
    let (a, _) = admission("");
    let p = pool(2, Duration::ZERO);
    let counters = p.counters(EndpointId(1)).unwrap();
    // In flight when the scrape landed: the scrape already shows it.
    let before = counters.dispatch(10, 10);
    let at = Duration::from_millis(10);
    assert_eq!(a.observe(&p, &[EndpointId(1)], at).waiting, 2.0);
    // Sent since and still in flight: not in the scrape yet.
    let since = counters.dispatch(10, 10);
    let state = a.observe(&p, &[], at);
    assert_eq!((state.waiting, state.fresh), (3.0, 1));
    // One finished: the growth since the scrape is gone, whichever request it was.
    drop(before);
    assert_eq!(a.observe(&p, &[], at).waiting, 2.0);
    drop(since);
    assert_eq!(a.observe(&p, &[], at).waiting, 2.0);
    // Metrics older than the staleness threshold (200 ms) say nothing.
    assert!(!a.observe(&p, &[], Duration::from_secs(1)).is_known());
}
