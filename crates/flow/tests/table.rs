//! The controller's behaviour, one situation per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{config, ms, pool_at, req, roomy};
use infergate_config::gateway::Band::{Critical, Sheddable, Standard};
use infergate_config::gateway::OverloadSensor;
use infergate_flow::{
    Admission, Decision, DropReason, FlowController, FlowError, Outcome, QueueLength, Rejection,
};

fn dispatched(decisions: &[Decision]) -> Vec<u64> {
    decisions
        .iter()
        .filter(|d| d.outcome == Outcome::Dispatch)
        .map(|d| d.id)
        .collect()
}

fn rejected(decisions: &[Decision]) -> Vec<(u64, DropReason)> {
    decisions
        .iter()
        .filter_map(|d| match d.outcome {
            Outcome::Reject(r) => Some((d.id, r.reason)),
            Outcome::Dispatch => None,
        })
        .collect()
}

fn is_queued(a: Admission) -> bool {
    matches!(a, Admission::Queued { .. })
}

#[test]
fn an_unknown_or_idle_pool_dispatches_every_band_at_once() {
    let mut f = FlowController::new(roomy());
    for (id, band) in [(1, Critical), (2, Standard), (3, Sheddable)] {
        assert_eq!(
            f.enqueue(req(id, band, "t", 10), ms(0)),
            Ok(Admission::DispatchNow)
        );
    }
    f.observe(pool_at(0.0), ms(1));
    // Idle: five requests of Standard headroom on top of the three already sent.
    for id in 10..15 {
        assert_eq!(
            f.enqueue(req(id, Standard, "t", 10), ms(1)),
            Ok(Admission::DispatchNow)
        );
    }
    assert!(is_queued(
        f.enqueue(req(15, Standard, "t", 10), ms(1)).unwrap()
    ));
}

#[test]
fn at_the_ceiling_standard_waits_sheddable_is_shed_and_critical_goes() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(1.0), ms(0));
    let a = f.enqueue(req(1, Standard, "t", 10), ms(0)).unwrap();
    assert_eq!(
        a,
        Admission::Queued {
            deadline: ms(10_000)
        }
    );
    let Admission::Rejected(r) = f.enqueue(req(2, Sheddable, "t", 10), ms(0)).unwrap() else {
        panic!("a sheddable request at saturation must be shed");
    };
    assert_eq!((r.status(), r.reason.as_str()), (429, "rejected-saturated"));
    assert!(r.retry_after.is_some_and(|d| d >= Duration::from_secs(1)));
    // Critical has headroom up to twice the thresholds: 5 more requests.
    for id in 3..8 {
        assert_eq!(
            f.enqueue(req(id, Critical, "t", 10), ms(0)),
            Ok(Admission::DispatchNow)
        );
    }
    assert!(is_queued(
        f.enqueue(req(8, Critical, "t", 10), ms(0)).unwrap()
    ));
    assert!(f.poll(ms(0)).is_empty());
}

#[test]
fn sheddable_stops_a_quarter_of_the_threshold_before_standard() {
    let mut f = FlowController::new(roomy());
    // Saturation 0.6: under the Sheddable ceiling (0.75) by 0.75 of a request.
    f.observe(pool_at(0.6), ms(0));
    assert_eq!(
        f.enqueue(req(1, Sheddable, "t", 10), ms(0)),
        Ok(Admission::DispatchNow)
    );
    // That one took the room: the next Sheddable request is shed, Standard still goes.
    assert!(matches!(
        f.enqueue(req(2, Sheddable, "t", 10), ms(0)),
        Ok(Admission::Rejected(_))
    ));
    assert_eq!(
        f.enqueue(req(3, Standard, "t", 10), ms(0)),
        Ok(Admission::DispatchNow)
    );
    // Between the two ceilings: Standard goes while Sheddable is shed.
    f.observe(pool_at(0.8), ms(10));
    assert!(matches!(
        f.enqueue(req(4, Sheddable, "t", 10), ms(10)),
        Ok(Admission::Rejected(r)) if r.reason.as_str() == "rejected-saturated"
    ));
    assert_eq!(
        f.enqueue(req(5, Standard, "t", 10), ms(10)),
        Ok(Admission::DispatchNow)
    );
}

#[test]
fn completions_release_queued_requests_critical_first() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(2.0), ms(0));
    for id in 1..=3 {
        assert!(is_queued(
            f.enqueue(req(id, Standard, "t", 10), ms(0)).unwrap()
        ));
    }
    assert!(is_queued(
        f.enqueue(req(9, Critical, "t", 10), ms(1)).unwrap()
    ));
    f.on_complete(ms(2));
    let d = f.poll(ms(2));
    assert_eq!(dispatched(&d), vec![9]);
    assert_eq!(d[0].waited, ms(1));
    // The pool is five requests over the Standard ceiling: five completions only bring it back
    // to the ceiling, the sixth frees one slot (credit −6 against headroom −5).
    for _ in 0..4 {
        f.on_complete(ms(3));
    }
    assert!(f.poll(ms(3)).is_empty());
    f.on_complete(ms(3));
    f.on_complete(ms(3));
    assert_eq!(dispatched(&f.poll(ms(3))), vec![1]);
}

#[test]
fn a_new_observation_replaces_the_credit() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(0.8), ms(0));
    assert_eq!(
        f.enqueue(req(1, Standard, "t", 1), ms(0)),
        Ok(Admission::DispatchNow)
    );
    assert!(is_queued(
        f.enqueue(req(2, Standard, "t", 1), ms(0)).unwrap()
    ));
    // The next scrape shows the pool emptier than the credit assumed.
    f.observe(pool_at(0.2), ms(50));
    assert_eq!(dispatched(&f.poll(ms(50))), vec![2]);
}

#[test]
fn queued_requests_expire_with_503_at_their_band_ttl() {
    let mut cfg = roomy();
    cfg.bands[0].queue_ttl = ms(500);
    cfg.bands[1].queue_ttl = ms(200);
    let mut f = FlowController::new(cfg);
    f.observe(pool_at(3.0), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Critical, "t", 1), ms(0)).unwrap()
    ));
    assert!(is_queued(
        f.enqueue(req(2, Standard, "t", 1), ms(100)).unwrap()
    ));
    // The observation goes stale at 1 s; the Standard TTL comes first.
    assert_eq!(f.next_deadline(), Some(ms(300)));
    assert!(f.poll(ms(299)).is_empty());
    let d = f.poll(ms(300));
    assert_eq!(rejected(&d), vec![(2, DropReason::TtlExpired)]);
    let Outcome::Reject(r) = d[0].outcome else {
        unreachable!()
    };
    assert_eq!((r.status(), r.retry_after), (503, None));
    assert_eq!(d[0].waited, ms(200));
    assert_eq!(f.next_deadline(), Some(ms(500)));
    assert_eq!(
        rejected(&f.poll(ms(700))),
        vec![(1, DropReason::TtlExpired)]
    );
    assert_eq!(f.next_deadline(), None);
}

#[test]
fn full_band_queues_refuse_with_429_by_requests_and_by_bytes() {
    let mut f = FlowController::new(config(2, 100, Duration::from_secs(10)));
    f.observe(pool_at(2.5), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 60), ms(0)).unwrap()
    ));
    let Admission::Rejected(r) = f.enqueue(req(2, Standard, "t", 41), ms(0)).unwrap() else {
        panic!("over the byte cap");
    };
    assert_eq!((r.status(), r.reason), (429, DropReason::QueueFull));
    assert!(r.retry_after.is_some());
    assert!(is_queued(
        f.enqueue(req(3, Standard, "t", 40), ms(0)).unwrap()
    ));
    let full = f.enqueue(req(4, Standard, "t", 0), ms(0)).unwrap();
    assert!(matches!(
        full,
        Admission::Rejected(Rejection {
            reason: DropReason::QueueFull,
            ..
        })
    ));
    // Other bands have their own caps.
    assert!(is_queued(
        f.enqueue(req(5, Critical, "t", 100), ms(0)).unwrap()
    ));
    assert_eq!(
        f.queued(Standard),
        QueueLength {
            requests: 2,
            bytes: 100
        }
    );
    assert_eq!(
        f.total_queued(),
        QueueLength {
            requests: 3,
            bytes: 200
        }
    );
}

#[test]
fn critical_displaces_the_newest_lowest_band_request_from_a_full_queue() {
    let mut cfg = roomy();
    cfg.max_queue_requests = 3;
    let mut f = FlowController::new(cfg);
    f.observe(pool_at(1.5), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "a", 1), ms(0)).unwrap()
    ));
    assert!(is_queued(
        f.enqueue(req(2, Standard, "b", 1), ms(1)).unwrap()
    ));
    assert!(is_queued(
        f.enqueue(req(3, Standard, "a", 1), ms(2)).unwrap()
    ));
    // Standard cannot displace Standard.
    let same = f.enqueue(req(4, Standard, "c", 1), ms(3)).unwrap();
    assert!(matches!(
        same,
        Admission::Rejected(Rejection {
            reason: DropReason::QueueFull,
            ..
        })
    ));
    f.observe(pool_at(2.5), ms(4));
    assert!(is_queued(
        f.enqueue(req(5, Critical, "x", 1), ms(4)).unwrap()
    ));
    let d = f.poll(ms(4));
    assert_eq!(rejected(&d), vec![(3, DropReason::Displaced)]);
    let Outcome::Reject(r) = d[0].outcome else {
        unreachable!()
    };
    assert_eq!((r.status(), r.reason.as_str()), (429, "rejected-displaced"));
    assert_eq!(d[0].waited, ms(2));
    assert_eq!(f.total_queued().requests, 3);
}

#[test]
fn a_stale_or_empty_observation_fails_open() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(3.0), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 1), ms(0)).unwrap()
    ));
    assert_eq!(f.next_deadline(), Some(ms(1_000)));
    assert!(f.poll(ms(999)).is_empty());
    assert_eq!(dispatched(&f.poll(ms(1_000))), vec![1]);
    let mut f = FlowController::new(roomy());
    let mut nobody = pool_at(3.0);
    nobody.fresh = 0;
    f.observe(nobody, ms(0));
    assert_eq!(
        f.enqueue(req(1, Sheddable, "t", 1), ms(0)),
        Ok(Admission::DispatchNow)
    );
}

#[test]
fn queued_sheddable_requests_are_shed_when_the_pool_saturates() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(2.5), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Critical, "t", 1), ms(0)).unwrap()
    ));
    // Below the Sheddable ceiling by the pool's measure, but behind a waiting Critical request.
    f.observe(pool_at(0.0), ms(10));
    assert!(is_queued(
        f.enqueue(req(2, Sheddable, "t", 1), ms(10)).unwrap()
    ));
    f.observe(pool_at(1.2), ms(20));
    let d = f.poll(ms(20));
    assert_eq!(dispatched(&d), vec![1]);
    assert_eq!(rejected(&d), vec![(2, DropReason::Saturated)]);
}

#[test]
fn disabled_flow_control_admits_everything_at_once() {
    let mut cfg = roomy();
    cfg.enabled = false;
    let mut f = FlowController::new(cfg);
    f.observe(pool_at(9.0), ms(0));
    for (id, band) in [(1, Sheddable), (2, Standard), (3, Critical)] {
        assert_eq!(
            f.enqueue(req(id, band, "t", 1), ms(0)),
            Ok(Admission::DispatchNow)
        );
    }
    assert!(f.poll(ms(0)).is_empty());
}

#[test]
fn ids_are_unique_and_a_cancelled_request_leaves_without_a_decision() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(1.0), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 7), ms(0)).unwrap()
    ));
    assert_eq!(
        f.enqueue(req(1, Critical, "t", 7), ms(0)),
        Err(FlowError::DuplicateId(1))
    );
    assert_eq!(f.oldest_wait(Standard, ms(40)), Some(ms(40)));
    assert!(f.cancel(1));
    assert!(!f.cancel(1));
    assert_eq!(f.total_queued(), QueueLength::default());
    assert_eq!(f.oldest_wait(Standard, ms(40)), None);
    f.on_complete(ms(50));
    assert!(f.poll(ms(50)).is_empty());
}

#[test]
fn retry_after_is_the_backlog_over_the_drain_rate() {
    let mut f = FlowController::new(roomy());
    // Twenty completions in the first second: 20 per second.
    for i in 0..20 {
        f.on_complete(ms(50 * i));
    }
    f.observe(pool_at(2.0), ms(1_000));
    for id in 0..30 {
        assert!(is_queued(
            f.enqueue(req(id, Standard, "t", 1), ms(1_000)).unwrap()
        ));
    }
    // 30 queued ahead and 10 waiting in the servers, draining at 20/s: 2 s.
    let Admission::Rejected(r) = f.enqueue(req(99, Sheddable, "t", 1), ms(1_000)).unwrap() else {
        panic!("shed");
    };
    assert_eq!(r.retry_after, Some(Duration::from_secs(2)));
}

#[test]
fn a_full_batch_holds_standard_and_sheds_sheddable_while_critical_goes() {
    use infergate_flow::{Detector, EndpointLoad};
    // Short queues and little KV, but 150 requests running against a threshold of 100.
    let detector =
        Detector::new(5.0, 0.8, Duration::from_millis(200)).with_running_threshold(Some(100.0));
    let busy = EndpointLoad {
        waiting: Some(1.0),
        kv_usage: Some(0.4),
        running: Some(150.0),
        adapter_bound: false,
        inter_token_latency: None,
        age: ms(10),
    };
    let mut f = FlowController::new(roomy());
    f.observe(detector.observe([busy]), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 10), ms(0)).unwrap()
    ));
    assert!(matches!(
        f.enqueue(req(2, Sheddable, "t", 10), ms(0)),
        Ok(Admission::Rejected(Rejection {
            reason: DropReason::Saturated,
            ..
        }))
    ));
    // Critical reads only queue and KV (saturation 0.5): 5 × (2 − 0.5) = 7.5 requests go.
    for id in 10..18 {
        assert_eq!(
            f.enqueue(req(id, Critical, "t", 10), ms(0)),
            Ok(Admission::DispatchNow),
            "Critical request {id}"
        );
    }
    assert!(is_queued(
        f.enqueue(req(18, Critical, "t", 10), ms(0)).unwrap()
    ));
    // The batch drains below the threshold: Standard goes once Critical's queue is empty.
    let drained = EndpointLoad {
        running: Some(40.0),
        waiting: Some(0.0),
        ..busy
    };
    f.observe(detector.observe([drained]), ms(50));
    assert_eq!(dispatched(&f.poll(ms(50))), vec![18, 1]);
}

/// A controller with a 10 s TTL and the overload rule at a 2 s interval and a 1 s wait, held
/// while a backlog drains, reading KV-cache use for Standard only in overload when
/// `kv_only_in_overload`, with `sensor`.
fn with_overload_rule(kv_only_in_overload: bool, sensor: OverloadSensor) -> FlowController {
    let mut cfg = roomy();
    cfg.overload = Some(infergate_flow::Overload {
        interval: ms(2_000),
        max_wait: ms(1_000),
        kv_only_in_overload,
        hold_while_draining: true,
        sensor,
    });
    FlowController::new(cfg)
}

/// The overload rule with the backlog sensor, KV use read at all times ([`saturate`] keeps the
/// pool saturated).
fn overloaded_controller() -> FlowController {
    with_overload_rule(false, OverloadSensor::Backlog)
}

/// Observes a saturated pool every 500 ms from `from` to `until` (so it never goes stale) and
/// polls after each observation.
fn saturate(f: &mut FlowController, from: u64, until: u64) -> Vec<Decision> {
    let mut out = Vec::new();
    for t in (from..=until).step_by(500) {
        f.observe(pool_at(3.0), ms(t));
        out.extend(f.poll(ms(t)));
    }
    out
}

#[test]
fn a_burst_that_drains_within_the_interval_waits_however_long_it_takes() {
    let mut f = overloaded_controller();
    f.observe(pool_at(3.0), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 1), ms(0)).unwrap()
    ));
    assert!(is_queued(
        f.enqueue(req(2, Standard, "t", 1), ms(200)).unwrap()
    ));
    // Waited 1.5 s, past the overload wait, but the queue has been backlogged only 1.5 s.
    assert!(saturate(&mut f, 500, 1_500).is_empty());
    // Capacity comes back at 1.8 s: both go, the queue empties and the backlog ends.
    f.observe(pool_at(0.0), ms(1_800));
    assert_eq!(dispatched(&f.poll(ms(1_800))), vec![1, 2]);
    // A new backlog starts its interval afresh: at 3.5 s request 3 has waited 1.5 s, but the
    // backlog it started is only 1.5 s old.
    f.observe(pool_at(3.0), ms(2_000));
    assert!(is_queued(
        f.enqueue(req(3, Standard, "t", 1), ms(2_000)).unwrap()
    ));
    assert!(saturate(&mut f, 2_000, 3_500).is_empty());
}

#[test]
fn a_sustained_backlog_refuses_what_waited_the_overload_wait_with_429() {
    let mut f = overloaded_controller();
    f.observe(pool_at(3.0), ms(0));
    // One request every 250 ms into a pool that takes none.
    let mut decisions = Vec::new();
    for i in 0..16u64 {
        let t = i * 250;
        f.observe(pool_at(3.0), ms(t));
        decisions.extend(f.poll(ms(t)));
        let band = if i % 4 == 0 { Critical } else { Standard };
        assert!(is_queued(f.enqueue(req(i, band, "t", 1), ms(t)).unwrap()));
    }
    decisions.extend(saturate(&mut f, 4_000, 4_000));
    // Standard is backlogged from its first request at 250 ms; the cut is at
    // max(250 ms + 2 s, arrival + 1 s): none before 2.25 s, and by 4 s every Standard request that
    // arrived by 3 s. Critical waits out its TTL.
    let refused = rejected(&decisions);
    let expected: Vec<(u64, DropReason)> = (0..=12)
        .filter(|i| i % 4 != 0)
        .map(|i| (i, DropReason::Overloaded))
        .collect();
    assert_eq!(refused, expected);
    for d in &decisions {
        let Outcome::Reject(r) = d.outcome else {
            unreachable!("nothing can be dispatched")
        };
        assert_eq!(r.status(), 429);
        assert!(r.retry_after.is_some());
        assert!(d.waited >= ms(1_000));
    }
    assert_eq!(f.queued(Standard).requests, 3); // 13, 14 and 15
    assert_eq!(f.queued(Critical).requests, 4);
    // The next cut is request 13's (arrived at 3.25 s).
    assert_eq!(f.next_deadline(), Some(ms(4_250)));
}

/// An overloaded controller whose pool has finished `per_sec` requests a second over the
/// first second (so its drain rate is known from 1 s on), saturated from then on.
fn draining_at(per_sec: u64) -> FlowController {
    let mut f = overloaded_controller();
    f.observe(pool_at(3.0), ms(0));
    for i in 0..per_sec {
        f.on_complete(ms(i * 1_000 / per_sec));
    }
    assert_eq!(f.drain_rate(ms(1_000)), per_sec as f64);
    f.observe(pool_at(3.0), ms(1_000));
    f
}

/// Three Standard requests queued at 1 s, 1.1 s and 1.2 s into a saturated pool, polled every
/// 500 ms until `until`.
fn three_queued(f: &mut FlowController, until: u64) -> Vec<Decision> {
    for (id, t) in [(1, 1_000), (2, 1_100), (3, 1_200)] {
        assert!(is_queued(
            f.enqueue(req(id, Standard, "t", 1), ms(t)).unwrap()
        ));
    }
    saturate(f, 1_000, until)
}

#[test]
fn a_backlog_the_pool_drains_within_the_wait_is_held_past_it() {
    // 20 completions a second drain three queued requests in 150 ms: a burst passing, not
    // arrivals outrunning the pool. At 3 s the backlog is 2 s old and request 1 has waited 2 s,
    // past the 1 s wait, and is still held.
    let mut f = draining_at(20);
    assert!(three_queued(&mut f, 2_500).is_empty());
    assert_eq!(f.next_deadline(), Some(ms(3_000)));
    // Held at most twice the wait: at 3 s the pool still has taken none of them, so the
    // estimate is wrong and the rule refuses as it would have.
    let refused = rejected(&saturate(&mut f, 3_000, 3_000));
    assert_eq!(refused, vec![(1, DropReason::Overloaded)]);
}

#[test]
fn a_backlog_deeper_than_the_wait_at_the_drain_rate_is_refused_at_the_cut() {
    // Four completions a second, all through the run; six requests queued between 1 s and
    // 1.5 s take 1.5 s to drain, more than the 1 s wait. At the cut (the backlog's interval,
    // 3 s) the rule refuses the oldest until what is left drains within the wait: requests 1
    // and 2 go, the four left are one second's drain and stay.
    let mut f = draining_at(4);
    for id in 1..=6u64 {
        let t = 1_000 + (id - 1) * 100;
        assert!(is_queued(
            f.enqueue(req(id, Standard, "t", 1), ms(t)).unwrap()
        ));
    }
    let mut decisions = Vec::new();
    for t in (1_000..=3_000).step_by(250) {
        f.on_complete(ms(t));
        f.observe(pool_at(3.0), ms(t));
        decisions.extend(f.poll(ms(t)));
    }
    assert_eq!(
        rejected(&decisions),
        vec![(1, DropReason::Overloaded), (2, DropReason::Overloaded)]
    );
    assert_eq!(f.queued(Standard).requests, 4);
}

/// A pool whose servers queue `queue` × the threshold and whose KV use reads `kv` × its own.
fn pool_with(queue: f64, kv: f64) -> infergate_flow::PoolState {
    let worse = queue.max(kv);
    infergate_flow::PoolState {
        queue_saturation: queue,
        ..pool_at(worse)
    }
}

#[test]
fn kv_use_holds_standard_only_while_the_pool_is_overloaded() {
    let rule =
        |kv_only_in_overload| with_overload_rule(kv_only_in_overload, OverloadSensor::Backlog);
    // Well packed, not queueing: KV at 1.5 × its threshold, queues at 0.2.
    let packed = pool_with(0.2, 1.5);
    let mut always = rule(false);
    always.observe(packed, ms(0));
    assert!(is_queued(
        always.enqueue(req(1, Standard, "t", 1), ms(0)).unwrap()
    ));
    let mut f = rule(true);
    f.observe(packed, ms(0));
    assert_eq!(
        f.enqueue(req(1, Standard, "t", 1), ms(0)),
        Ok(Admission::DispatchNow)
    );

    // Queues full: Standard backlogs from 100 ms, and is overloaded from 2.1 s.
    f.observe(pool_with(1.5, 1.5), ms(100));
    assert!(is_queued(
        f.enqueue(req(2, Standard, "t", 1), ms(100)).unwrap()
    ));
    assert!(is_queued(
        f.enqueue(req(3, Standard, "t", 1), ms(1_800)).unwrap()
    ));
    f.observe(pool_with(1.5, 1.5), ms(1_800));
    assert!(f.poll(ms(1_800)).is_empty());
    // The queues drain but KV stays high: overloaded, so KV holds request 3, and the rule
    // refuses request 2, which waited 2 s.
    f.observe(packed, ms(2_100));
    let d = f.poll(ms(2_100));
    assert_eq!(rejected(&d), vec![(2, DropReason::Overloaded)]);
    assert_eq!(f.queued(Standard).requests, 1);
    // Request 3 is refused at 2.8 s and the queue is empty, but the servers are as full as
    // they were: for the interval after a refusal the pool still reads as overloaded, so KV
    // holds request 4.
    f.observe(packed, ms(2_800));
    assert_eq!(
        rejected(&f.poll(ms(2_800))),
        vec![(3, DropReason::Overloaded)]
    );
    assert!(is_queued(
        f.enqueue(req(4, Standard, "t", 1), ms(2_800)).unwrap()
    ));
    assert!(f.cancel(4));
    // The interval passes with no refusal and nothing queued: the overload is over, and the
    // same well-packed pool takes a new request at once.
    f.observe(packed, ms(4_800));
    assert_eq!(
        f.enqueue(req(5, Standard, "t", 1), ms(4_800)),
        Ok(Admission::DispatchNow)
    );
}

#[test]
fn sheddable_refused_for_the_interval_counts_as_overload_for_standard() {
    let mut f = with_overload_rule(true, OverloadSensor::Backlog);
    // Queues short (0.2), KV at 1.5 × its threshold: Sheddable is refused on every signal,
    // Standard outside overload reads the queues alone and goes.
    let packed = pool_with(0.2, 1.5);
    let shed = |f: &mut FlowController, id, at| {
        matches!(
            f.enqueue(req(id, Sheddable, "t", 1), ms(at)),
            Ok(Admission::Rejected(Rejection {
                reason: DropReason::Saturated,
                ..
            }))
        )
    };
    f.observe(packed, ms(0));
    assert!(shed(&mut f, 1, 0));
    assert_eq!(
        f.enqueue(req(2, Standard, "t", 1), ms(100)),
        Ok(Admission::DispatchNow)
    );
    // Every Sheddable request refused for 2 s: the pool is overloaded, so KV holds Standard,
    // though Standard's own queue never backed up.
    for (id, at) in [(3, 1_000), (4, 2_000)] {
        f.observe(packed, ms(at));
        assert!(shed(&mut f, id, at));
    }
    assert!(is_queued(
        f.enqueue(req(5, Standard, "t", 1), ms(2_000)).unwrap()
    ));
    f.observe(packed, ms(2_500));
    assert!(f.poll(ms(2_500)).is_empty());
    assert_eq!(f.queued(Standard).requests, 1);
    // Its client goes away. With no Sheddable refusal for the interval the overload is over,
    // and the same well-packed pool takes Standard on its queues alone again.
    assert!(f.cancel(5));
    f.observe(packed, ms(4_000));
    assert_eq!(
        f.enqueue(req(6, Standard, "t", 1), ms(4_000)),
        Ok(Admission::DispatchNow)
    );
}

/// A queue that never empties for 4 s while each request in it waits 500 ms: two queued at
/// the start, then one arriving and one let through every 250 ms, with the servers' queues
/// just under their threshold and their KV use over its own. What the controller decided.
fn a_queue_that_moves(sensor: OverloadSensor) -> Vec<Decision> {
    let mut f = with_overload_rule(true, sensor);
    f.observe(pool_with(1.5, 1.5), ms(0));
    for id in [1, 2] {
        assert!(is_queued(
            f.enqueue(req(id, Standard, "t", 1), ms(0)).unwrap()
        ));
    }
    let mut decisions = Vec::new();
    for k in 1..=16u64 {
        let t = ms(k * 250);
        assert!(is_queued(
            f.enqueue(req(k + 2, Standard, "t", 1), t).unwrap()
        ));
        // Headroom for one: 5 × (1 − 0.8) on the queues alone.
        f.observe(pool_with(0.8, 1.5), t);
        decisions.extend(f.poll(t));
    }
    decisions
}

#[test]
fn a_queue_whose_requests_wait_less_than_the_wait_is_not_an_overload() {
    // The sojourn sensor: every request waits 500 ms, half the overload wait, so the pool is
    // never overloaded; Standard reads the queues alone and one request goes at every poll.
    let d = a_queue_that_moves(OverloadSensor::Sojourn);
    assert_eq!(dispatched(&d), (1..=16).collect::<Vec<u64>>());
    assert!(rejected(&d).is_empty());
    assert!(d.iter().all(|d| d.waited <= ms(500)));
    // The backlog sensor reads the same queue as overload once it has not emptied for 2 s:
    // KV use then holds Standard, the heads wait past the wait, and the rule refuses them.
    let d = a_queue_that_moves(OverloadSensor::Backlog);
    assert!(dispatched(&d).len() < 16, "{:?}", dispatched(&d));
    assert!(!rejected(&d).is_empty());
    assert!(rejected(&d)
        .iter()
        .all(|&(_, reason)| reason == DropReason::Overloaded));
}

#[test]
fn an_overload_outlasts_a_queue_that_empties_for_less_than_the_interval() {
    let mut f = with_overload_rule(true, OverloadSensor::Sojourn);
    // Standard stalls from 0 s: overloaded from 2 s, when request 1 has waited past the wait
    // for another wait.
    f.observe(pool_at(3.0), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 1), ms(0)).unwrap()
    ));
    assert!(saturate(&mut f, 0, 1_500).is_empty());
    // At 2 s the servers have room by every signal: request 1 goes, nothing is refused, and
    // nothing below Critical is queued from then.
    f.observe(pool_with(0.2, 0.5), ms(2_000));
    assert_eq!(dispatched(&f.poll(ms(2_000))), vec![1]);
    // At 3 s the servers' queues are short but their KV use is at 1.5 × its threshold. The
    // queue has been empty for 1 s, less than the interval: still an overload, so KV use
    // holds request 2 (one empty moment between two arrivals ended it before).
    let packed = pool_with(0.2, 1.5);
    f.observe(packed, ms(3_000));
    assert!(is_queued(
        f.enqueue(req(2, Standard, "t", 1), ms(3_000)).unwrap()
    ));
    assert!(f.poll(ms(3_000)).is_empty());
    // Its client goes away at 3.2 s. Within the interval after that a request is still held…
    assert!(f.cancel(2));
    f.observe(packed, ms(3_200));
    f.observe(packed, ms(5_100));
    assert_eq!(f.poll(ms(5_100)), vec![]);
    assert!(is_queued(
        f.enqueue(req(3, Standard, "t", 1), ms(5_100)).unwrap()
    ));
    assert!(f.poll(ms(5_100)).is_empty());
    assert!(f.cancel(3));
    // …and once nothing below Critical has been queued for the interval the overload is over:
    // the same packed pool takes Standard on its queues alone, at once.
    f.observe(packed, ms(5_200));
    f.observe(packed, ms(7_200));
    assert_eq!(
        f.enqueue(req(4, Standard, "t", 1), ms(7_200)),
        Ok(Admission::DispatchNow)
    );
}

#[test]
fn a_stalled_queue_is_overloaded_once_its_oldest_has_waited_past_the_wait_for_another_wait() {
    let mut f = with_overload_rule(true, OverloadSensor::Sojourn);
    f.observe(pool_at(3.0), ms(0));
    assert!(is_queued(
        f.enqueue(req(1, Standard, "t", 1), ms(0)).unwrap()
    ));
    assert!(saturate(&mut f, 0, 1_000).is_empty());
    assert!(is_queued(
        f.enqueue(req(2, Standard, "t", 1), ms(1_500)).unwrap()
    ));
    assert!(saturate(&mut f, 1_500, 1_500).is_empty());
    // Request 1 passed the wait at 1 s; if nothing changes the pool is overloaded at 2 s
    // (before the observation of 1.5 s goes stale at 2.5 s).
    assert_eq!(f.next_deadline(), Some(ms(2_000)));
    assert!(f.poll(ms(1_999)).is_empty());
    // At 2 s request 1 has waited twice the wait: refused. The overload lasts while Standard
    // is queued, so request 2 is refused as soon as it has waited the wait, at 2.5 s.
    assert_eq!(
        rejected(&f.poll(ms(2_000))),
        vec![(1, DropReason::Overloaded)]
    );
    assert_eq!(f.next_deadline(), Some(ms(2_500)));
    assert_eq!(
        rejected(&saturate(&mut f, 2_500, 2_500)),
        vec![(2, DropReason::Overloaded)]
    );
    // Within the interval after a refusal a new request is refused at one wait as well.
    assert!(is_queued(
        f.enqueue(req(3, Standard, "t", 1), ms(3_000)).unwrap()
    ));
    assert!(saturate(&mut f, 3_000, 3_500).is_empty());
    assert_eq!(
        rejected(&saturate(&mut f, 4_000, 4_000)),
        vec![(3, DropReason::Overloaded)]
    );
}
