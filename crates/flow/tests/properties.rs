//! The controller's invariants under random traffic, checked after every call: no priority
//! inversion, no starvation within a band, caps hold, FCFS within a tenant, TTLs honoured, one
//! outcome per request, and refusals only for the reasons the bands allow.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use common::{ms, pool_at};
use infergate_config::gateway::{Band, Fairness, OverloadSensor};
use infergate_flow::{
    band_index, Admission, BandLimits, Decision, DropReason, FlowConfig, FlowController,
    FlowRequest, Outcome, Overload,
};
use proptest::prelude::*;

const TENANTS: u64 = 4;

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        band: usize,
        tenant: u64,
        bytes: u64,
    },
    /// Several small requests of one tenant at once, so that tenants build backlogs.
    Burst {
        band: usize,
        tenant: u64,
        n: u64,
    },
    Observe {
        tenths: u32,
    },
    Complete,
    Advance {
        ms: u64,
    },
    Cancel {
        pick: usize,
    },
    Poll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 0..TENANTS, 0..60u64)
            .prop_map(|(band, tenant, bytes)| Op::Enqueue { band, tenant, bytes }),
        2 => (0..3usize, 0..TENANTS, 1..6u64)
            .prop_map(|(band, tenant, n)| Op::Burst { band, tenant, n }),
        2 => (0..30u32).prop_map(|tenths| Op::Observe { tenths }),
        3 => Just(Op::Complete),
        2 => (1..400u64).prop_map(|ms| Op::Advance { ms }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        2 => Just(Op::Poll),
    ]
}

fn config() -> impl Strategy<Value = FlowConfig> {
    let band = (1..20u32, 20..400u64, 100..1_000u64).prop_map(|(r, b, t)| BandLimits {
        max_queue_requests: r,
        max_queue_bytes: b,
        queue_ttl: ms(t),
    });
    (
        [band.clone(), band.clone(), band],
        4..40u32,
        50..800u64,
        any::<bool>(),
        proptest::collection::vec(1..5u32, TENANTS as usize),
        proptest::option::of((
            50..1_000u64,
            20..800u64,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )),
    )
        .prop_map(
            |(bands, max_r, max_b, weighted, weights, overload)| FlowConfig {
                enabled: true,
                bands,
                max_queue_requests: max_r,
                max_queue_bytes: max_b,
                fairness: if weighted {
                    Fairness::WeightedFair
                } else {
                    Fairness::RoundRobin
                },
                tenant_weights: if weighted {
                    weights
                        .iter()
                        .enumerate()
                        .map(|(t, &w)| (t.to_string(), w))
                        .collect()
                } else {
                    BTreeMap::new()
                },
                state_max_age: Duration::from_secs(1),
                overload: overload.map(|(interval, wait, kv_only, hold, sojourn)| Overload {
                    interval: ms(interval),
                    max_wait: ms(wait),
                    kv_only_in_overload: kv_only,
                    hold_while_draining: hold,
                    sensor: if sojourn {
                        OverloadSensor::Sojourn
                    } else {
                        OverloadSensor::Backlog
                    },
                }),
            },
        )
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    band: usize,
    tenant: u64,
    bytes: u64,
    enqueued_at: Duration,
    deadline: Duration,
}

/// What the test knows independently of the controller.
struct Model {
    config: FlowConfig,
    queued: HashMap<u64, Queued>,
    /// Per band and tenant, queued ids in arrival order.
    fifo: [BTreeMap<u64, VecDeque<u64>>; 3],
    /// Per band and tenant, dispatches of other tenants since this one was last served.
    passed_over: [BTreeMap<u64, u64>; 3],
    in_flight: u64,
    decided: HashMap<u64, &'static str>,
    /// The last observed saturation and when, and dispatches minus completions since.
    observed: Option<(f64, Duration)>,
    credit: i64,
    /// Per band, since when its queue has held a request without emptying, as the model saw
    /// it: never later than the controller's, which may have emptied earlier by displacing a
    /// request the model learns of only at the next poll.
    backlogged_since: [Option<Duration>; 3],
    /// The earliest time at which the sojourn sensor can read the pool as overloaded: the least
    /// arrival plus twice the overload wait of the requests below Critical that stayed queued at
    /// least one wait, of those that have left (the queued ones are read where it is checked).
    sojourn_onset: Option<Duration>,
}

impl Model {
    /// Counts a dispatch of `band` at `now`, checking the pool was below the band's ceiling:
    /// the band's default saturation ceiling (Critical 2, Standard 1, Sheddable 0.75) over one
    /// endpoint with a
    /// queue-depth threshold of 5, unless the observation is missing or a second old.
    fn dispatch(&mut self, band: Band, now: Duration) {
        if let Some((saturation, at)) = self.observed.filter(|&(_, at)| now - at < ms(1_000)) {
            let ceiling = match band {
                Band::Critical => 2.0,
                Band::Standard => 1.0,
                Band::Sheddable => 0.75,
            };
            let headroom = 5.0 * (ceiling - saturation);
            assert!(
                headroom > self.credit as f64,
                "{band} dispatched at saturation {saturation} with credit {} (since {at:?})",
                self.credit
            );
        }
        self.credit += 1;
        self.in_flight += 1;
    }

    fn weight(&self, tenant: u64) -> u64 {
        u64::from(self.config.weight(&tenant.to_string()))
    }

    /// The most dispatches of other tenants a backlogged tenant may see before its turn.
    fn starvation_bound(&self, tenant: u64) -> u64 {
        let others = (0..TENANTS).filter(|&j| j != tenant);
        match self.config.fairness {
            Fairness::RoundRobin => TENANTS - 1,
            Fairness::WeightedFair => others
                .map(|j| self.weight(j).div_ceil(self.weight(tenant)) + 1)
                .sum(),
        }
    }

    fn remove(&mut self, id: u64) -> Queued {
        let q = self
            .queued
            .remove(&id)
            .expect("a decision for a request not queued");
        let fifo = self.fifo[q.band].get_mut(&q.tenant).unwrap();
        fifo.retain(|&x| x != id);
        if fifo.is_empty() {
            self.fifo[q.band].remove(&q.tenant);
            self.passed_over[q.band].remove(&q.tenant);
        }
        if self.fifo[q.band].is_empty() {
            self.backlogged_since[q.band] = None;
        }
        q
    }

    /// Whether the overload rule may refuse `q` at `now` if its band has been backlogged
    /// `since`: below Critical, the pool overloaded and `q` waited the overload wait (`waits` of
    /// them). The rule refuses at one wait, unless it holds while the queue drains within the
    /// wait at the pool's drain rate (which the model does not track): then at two at the
    /// latest. With the backlog sensor the pool is overloaded once the band has been backlogged
    /// for the interval; with the sojourn sensor not before [`Self::sojourn_onset_at`] says.
    fn overload_due(&self, q: &Queued, since: Option<Duration>, now: Duration, waits: u32) -> bool {
        let Some(rule) = self.config.overload else {
            return false;
        };
        let overloaded = match rule.sensor {
            OverloadSensor::Backlog => since.is_some_and(|since| now >= since + rule.interval),
            OverloadSensor::Sojourn => self.sojourn_onset_at(now).is_some_and(|at| now >= at),
        };
        q.band != band_index(Band::Critical)
            && overloaded
            && now >= q.enqueued_at + rule.max_wait * waits
    }

    /// The earliest the sojourn sensor can have read the pool as overloaded, as of `now`: some
    /// request below Critical stayed queued for the overload wait (while queued now, or before
    /// it left) and arrived twice the wait before. `None` while none has.
    fn sojourn_onset_at(&self, now: Duration) -> Option<Duration> {
        let wait = self.config.overload?.max_wait;
        self.queued
            .values()
            .filter(|q| q.band != band_index(Band::Critical) && now >= q.enqueued_at + wait)
            .map(|q| q.enqueued_at + 2 * wait)
            .chain(self.sojourn_onset)
            .min()
    }

    /// A request left the queue after waiting `waited`: it counts for [`Self::sojourn_onset_at`]
    /// if it was below Critical and waited the overload wait.
    fn left(&mut self, q: &Queued, waited: Duration) {
        let Some(rule) = self.config.overload else {
            return;
        };
        if q.band != band_index(Band::Critical) && waited >= rule.max_wait {
            let at = q.enqueued_at + 2 * rule.max_wait;
            self.sojourn_onset = Some(self.sojourn_onset.map_or(at, |o| o.min(at)));
        }
    }

    /// After a poll at `now`, whether `q` has outlived the overload rule's cut. With the backlog
    /// sensor: the band's oldest has been queued since its backlog began or later (`band_since`
    /// is the latest the backlog can have started) and `q` waited the most waits the rule lets
    /// it. With the sojourn sensor: `q`, below Critical, has waited twice the wait.
    fn outlived_cut(&self, q: &Queued, band_since: Option<Duration>, now: Duration) -> bool {
        match self.config.overload {
            Some(rule) if rule.sensor == OverloadSensor::Sojourn => {
                q.band != band_index(Band::Critical) && now >= q.enqueued_at + 2 * rule.max_wait
            }
            _ => self.overload_due(q, band_since, now, self.latest_cut_in_waits()),
        }
    }

    /// The most overload waits a request can have waited when the rule must have cut it.
    fn latest_cut_in_waits(&self) -> u32 {
        match self.config.overload {
            Some(rule) if rule.hold_while_draining => 2,
            _ => 1,
        }
    }

    fn apply(&mut self, d: &Decision, now: Duration) {
        let head = self.queued.get(&d.id).map(|q| (q.band, q.tenant));
        let (band, tenant) = head.expect("a decision for a request not queued");
        // The model's start of the backlog is the earliest the controller's can be.
        let since = self.backlogged_since[band];
        let overload_due = self.overload_due(&self.queued[&d.id], since, now, 1);
        let oldest_of_band = self
            .queued
            .values()
            .filter(|q| q.band == band)
            .all(|q| q.enqueued_at >= self.queued[&d.id].enqueued_at);
        assert_eq!(band_index(d.band), band);
        let first = self.fifo[band][&tenant].front().copied();
        let q = self.remove(d.id);
        self.left(&q, d.waited);
        if matches!(d.outcome, Outcome::Reject(r) if r.reason == DropReason::Displaced) {
            // Displaced when a later request arrived, reported at the next poll.
            assert!(d.waited <= now - q.enqueued_at);
        } else {
            assert_eq!(d.waited, now - q.enqueued_at);
        }
        match d.outcome {
            Outcome::Dispatch => {
                assert_eq!(first, Some(d.id), "FCFS within tenant {tenant}");
                assert!(now < q.deadline, "dispatched after its TTL");
                self.dispatch(d.band, now);
                self.passed_over[band].remove(&tenant);
                let bound: Vec<_> = self.passed_over[band].keys().copied().collect();
                for t in bound {
                    let limit = self.starvation_bound(t);
                    let n = self.passed_over[band].get_mut(&t).unwrap();
                    *n += 1;
                    assert!(
                        *n <= limit,
                        "tenant {t} passed over {n} times (bound {limit})"
                    );
                }
                if self.fifo[band].contains_key(&tenant) {
                    self.passed_over[band].insert(tenant, 0);
                }
            }
            Outcome::Reject(r) => match r.reason {
                DropReason::TtlExpired => assert!(now >= q.deadline),
                DropReason::Saturated => assert_eq!(d.band, Band::Sheddable),
                DropReason::Displaced => assert_ne!(d.band, Band::Critical),
                DropReason::QueueFull => panic!("a queued request cannot find its queue full"),
                DropReason::Overloaded => {
                    assert!(overload_due, "refused as overloaded before the rule's cut");
                    assert!(
                        oldest_of_band,
                        "an overload refusal passed an older request"
                    );
                }
            },
        }
        let what = if d.outcome == Outcome::Dispatch {
            "dispatched"
        } else {
            "rejected"
        };
        assert!(
            self.decided.insert(d.id, what).is_none(),
            "two decisions for {}",
            d.id
        );
    }
}

fn check_caps(f: &FlowController, c: &FlowConfig) {
    let mut total = (0, 0);
    for band in Band::ALL {
        let q = f.queued(band);
        let l = c.band(band);
        assert!(
            q.requests <= l.max_queue_requests as usize,
            "{band} requests"
        );
        assert!(q.bytes <= l.max_queue_bytes, "{band} bytes");
        total = (total.0 + q.requests, total.1 + q.bytes);
    }
    assert!(total.0 <= c.max_queue_requests as usize);
    assert!(total.1 <= c.max_queue_bytes);
    assert_eq!((f.total_queued().requests, f.total_queued().bytes), total);
}

fn poll(f: &mut FlowController, m: &mut Model, now: Duration) {
    let decisions = f.poll(now);
    for d in &decisions {
        m.apply(d, now);
    }
    // Strict priority: the highest band still waiting was waiting all through this poll, so
    // nothing below it may have gone out, and it must not be dispatchable.
    if let Some(h) = Band::ALL.into_iter().find(|&b| f.queued(b).requests > 0) {
        for d in decisions.iter().filter(|d| d.outcome == Outcome::Dispatch) {
            assert!(d.band <= h, "{} dispatched while {h} waits", d.band);
        }
        assert!(!f.below_ceiling(h, now), "{h} waits although dispatchable");
    }
    for q in m.queued.values() {
        assert!(q.deadline > now, "a request outlived its TTL");
        // Right after a poll the model and the controller hold the same requests, and the
        // band's oldest has been queued since its backlog began or later: the latest the
        // backlog can have started.
        let latest_since = m
            .queued
            .values()
            .filter(|o| o.band == q.band)
            .map(|o| o.enqueued_at)
            .min();
        assert!(
            !m.outlived_cut(q, latest_since, now),
            "a request outlived the overload rule's cut"
        );
    }
    assert_eq!(
        f.total_queued().requests,
        m.queued.len(),
        "a decision went missing"
    );
    let bytes: u64 = m.queued.values().map(|q| q.bytes).sum();
    assert_eq!(f.total_queued().bytes, bytes);
}

impl Model {
    /// Offers one request and checks the answer against what was queued before it.
    fn arrive(
        &mut self,
        f: &mut FlowController,
        id: u64,
        arrival: (usize, u64, u64),
        now: Duration,
    ) {
        let (band, tenant, bytes) = arrival;
        let b = Band::ALL[band];
        let nothing_ahead = Band::ALL[..=band]
            .iter()
            .all(|&x| f.queued(x).requests == 0);
        let below = f.below_ceiling(b, now);
        let before = f.queued(b);
        let critical_only = f.queued(Band::Critical);
        let req = FlowRequest {
            id,
            band: b,
            tenant: Some(tenant.to_string()),
            bytes,
        };
        match f.enqueue(req, now).unwrap() {
            Admission::DispatchNow => {
                assert!(nothing_ahead && below, "jumped the queue");
                self.dispatch(b, now);
            }
            Admission::Queued { deadline } => {
                assert!(!(nothing_ahead && below), "queued although it could go");
                let q = Queued {
                    band,
                    tenant,
                    bytes,
                    enqueued_at: now,
                    deadline,
                };
                self.queued.insert(id, q);
                self.backlogged_since[band].get_or_insert(now);
                self.fifo[band].entry(tenant).or_default().push_back(id);
                self.passed_over[band].entry(tenant).or_insert(0);
            }
            Admission::Rejected(r) => {
                assert!(r.retry_after.is_some(), "a 429 without Retry-After");
                match r.reason {
                    DropReason::Saturated => assert!(b == Band::Sheddable && !below),
                    DropReason::QueueFull => {
                        let l = self.config.band(b);
                        let band_full = before.requests + 1 > l.max_queue_requests as usize
                            || before.bytes + bytes > l.max_queue_bytes;
                        // Critical displaces every lower band before it is refused.
                        let c = &self.config;
                        let global_full = critical_only.requests + 1
                            > c.max_queue_requests as usize
                            || critical_only.bytes + bytes > c.max_queue_bytes;
                        assert!(b != Band::Critical || band_full || global_full);
                    }
                    other => panic!("refused at once for {other:?}"),
                }
            }
        }
    }
}

/// Plays `ops` against a controller, checking every invariant after every call.
fn play(config: FlowConfig, ops: Vec<Op>) {
    let mut f = FlowController::new(config.clone());
    let mut m = Model {
        config: config.clone(),
        queued: HashMap::new(),
        fifo: Default::default(),
        passed_over: Default::default(),
        in_flight: 0,
        decided: HashMap::new(),
        observed: None,
        credit: 0,
        backlogged_since: [None; 3],
        sojourn_onset: None,
    };
    let mut now = Duration::ZERO;
    let mut next_id = 0u64;
    for op in ops {
        match op {
            Op::Enqueue {
                band,
                tenant,
                bytes,
            } => {
                m.arrive(&mut f, next_id, (band, tenant, bytes), now);
                next_id += 1;
            }
            Op::Burst { band, tenant, n } => {
                for _ in 0..n {
                    m.arrive(&mut f, next_id, (band, tenant, 1), now);
                    next_id += 1;
                }
            }
            Op::Observe { tenths } => {
                let saturation = f64::from(tenths) / 10.0;
                f.observe(pool_at(saturation), now);
                m.observed = Some((saturation, now));
                m.credit = 0;
            }
            Op::Complete => {
                if m.in_flight > 0 {
                    m.in_flight -= 1;
                    m.credit -= 1;
                    f.on_complete(now);
                }
            }
            Op::Advance { ms: dt } => {
                // Never sleep past a deadline without polling, as a driver would not.
                let target = now + ms(dt);
                while let Some(d) = f.next_deadline().filter(|&d| d <= target) {
                    now = now.max(d);
                    poll(&mut f, &mut m, now);
                }
                now = target;
            }
            Op::Cancel { pick } => {
                let mut ids: Vec<_> = m.queued.keys().copied().collect();
                ids.sort_unstable();
                if !ids.is_empty() {
                    let id = ids[pick % ids.len()];
                    // Not queued any more only when it was displaced; the next poll says so.
                    if f.cancel(id) {
                        let q = m.remove(id);
                        m.left(&q, now - q.enqueued_at);
                        m.decided.insert(id, "cancelled");
                    }
                }
            }
            Op::Poll => poll(&mut f, &mut m, now),
        }
        check_caps(&f, &config);
        // Displaced requests leave at once and are reported by the next poll.
        assert!(f.total_queued().requests <= m.queued.len());
    }
    poll(&mut f, &mut m, now);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn flow_control_keeps_its_invariants(
        config in config(),
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        play(config, ops);
    }
}
