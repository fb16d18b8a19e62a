//! Outlier detection across a pool: an endpoint whose attempts fail several times in a row
//! (5xx answers, refused or broken connections, the gateway's own timeout while waiting for its
//! answer) is ejected — no policy picks it — for a time that doubles on each repeat
//! ([`crate::health`] keeps each endpoint's state), and never more than a share of the pool at
//! once. An ejected endpoint comes back on probation: its first failure ejects it again at once,
//! so a pod that stays broken costs one request per return rather than another run of failures.

use std::time::Duration;

use crate::health::{AttemptOutcome, OutlierPolicy};
use crate::pool::Pool;
use crate::EndpointId;

impl Pool {
    /// Records an attempt's outcome at `endpoint`; returns how long it is ejected for when this
    /// ejected it. Endpoints not in the pool (gone since the pick) are ignored.
    pub fn record_outcome(
        &self,
        endpoint: EndpointId,
        outcome: AttemptOutcome,
        now: Duration,
        policy: &OutlierPolicy,
    ) -> Option<Duration> {
        if policy.consecutive_failures == 0 {
            return None;
        }
        let counters = self.counters_at(self.position(endpoint)?)?;
        counters
            .health
            .record(outcome, now, policy, || self.room_to_eject(now, policy))
    }

    /// Ejects `endpoint`, whose metrics stopped moving while it had requests in flight
    /// ([`crate::Progress::Frozen`]), as a run of failures would; returns for how long, or
    /// `None` when detection is off, it is out already or the pool has no room.
    pub fn eject_frozen(
        &self,
        endpoint: EndpointId,
        now: Duration,
        policy: &OutlierPolicy,
    ) -> Option<Duration> {
        if policy.consecutive_failures == 0 || policy.frozen_metrics_after.is_zero() {
            return None;
        }
        let counters = self.counters_at(self.position(endpoint)?)?;
        counters
            .health
            .eject(now, policy, || self.room_to_eject(now, policy))
    }

    /// Whether one more endpoint may be ejected under the policy's share.
    fn room_to_eject(&self, now: Duration, policy: &OutlierPolicy) -> bool {
        let n = self.len();
        if n < 2 {
            return false;
        }
        let allowed = ((n as f64 * policy.max_ejected_share).floor() as usize).clamp(1, n - 1);
        let ejected = self
            .all_counters()
            .iter()
            .filter(|c| c.health.is_ejected(now))
            .count();
        ejected < allowed
    }

    /// The share of its picks the endpoint at `position` keeps at `now`
    /// ([`crate::health::Health::admitted_share`]).
    pub(crate) fn admitted_share_at(&self, position: usize, now: Duration) -> f64 {
        self.counters_at(position)
            .map_or(1.0, |c| c.health.admitted_share(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::EndpointSpec;
    use crate::health::SLOW_START_FLOOR;

    const POLICY: OutlierPolicy = OutlierPolicy {
        consecutive_failures: 3,
        base_ejection: Duration::from_secs(10),
        max_ejection: Duration::from_secs(300),
        max_ejected_share: 0.5,
        slow_start: Duration::from_secs(20),
        frozen_metrics_after: Duration::from_secs(3),
    };

    fn pool(n: u64) -> Pool {
        Pool::new(
            (0..n)
                .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:80")))
                .collect(),
        )
        .unwrap()
    }

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn ejected(p: &Pool, position: usize, at: Duration) -> bool {
        p.admitted_share_at(position, at) == 0.0
    }

    fn fail(p: &Pool, id: u64, at: u64) -> Option<Duration> {
        p.record_outcome(EndpointId(id), AttemptOutcome::Failed, s(at), &POLICY)
    }

    #[test]
    fn consecutive_failures_eject_and_a_success_resets_the_streak() {
        let p = pool(4);
        assert_eq!(fail(&p, 0, 1), None);
        assert_eq!(fail(&p, 0, 1), None);
        p.record_outcome(EndpointId(0), AttemptOutcome::Answered, s(1), &POLICY);
        assert_eq!(fail(&p, 0, 2), None);
        assert_eq!(fail(&p, 0, 2), None);
        assert_eq!(fail(&p, 0, 2), Some(s(10)));
        assert!(ejected(&p, 0, s(11)));
        assert!(!ejected(&p, 0, s(12)));
    }

    #[test]
    fn back_on_probation_one_failure_ejects_again_for_twice_as_long() {
        let p = pool(4);
        for _ in 0..3 {
            fail(&p, 1, 0);
        }
        assert!(ejected(&p, 1, s(5)));
        // Returned at 10 s: its first failure ejects it for 20 s, then 40 s.
        assert_eq!(fail(&p, 1, 11), Some(s(20)));
        assert_eq!(fail(&p, 1, 31), Some(s(40)));
        // Capped at max_ejection.
        let mut at = 71;
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            last = fail(&p, 1, at).unwrap();
            at += last.as_secs();
        }
        assert_eq!(last, s(300));
    }

    #[test]
    fn an_endpoint_that_stayed_in_long_enough_starts_again_from_the_base() {
        let p = pool(4);
        for _ in 0..3 {
            fail(&p, 2, 0);
        }
        assert_eq!(fail(&p, 2, 10), Some(s(20)));
        // Back at 30 s, then healthy past max_ejection (300 s): forgotten.
        assert_eq!(fail(&p, 2, 400), None);
        assert_eq!(fail(&p, 2, 400), None);
        assert_eq!(fail(&p, 2, 400), Some(s(10)));
    }

    #[test]
    fn never_more_than_the_share_and_never_a_pool_of_one() {
        let p = pool(4);
        for id in 0..3 {
            for _ in 0..3 {
                fail(&p, id, 0);
            }
        }
        let out = (0..4).filter(|&i| ejected(&p, i, s(1))).count();
        assert_eq!(out, 2, "half of four");
        let one = pool(1);
        for _ in 0..10 {
            assert_eq!(fail(&one, 0, 0), None);
        }
        assert!(!ejected(&one, 0, s(1)));
    }

    #[test]
    fn a_returning_endpoint_ramps_from_the_floor_to_whole() {
        let p = pool(2);
        assert_eq!(p.admitted_share_at(0, s(0)), 1.0, "never ejected");
        for _ in 0..3 {
            fail(&p, 0, 0);
        }
        assert_eq!(p.admitted_share_at(0, s(9)), 0.0);
        assert_eq!(p.admitted_share_at(0, s(10)), SLOW_START_FLOOR);
        assert!((p.admitted_share_at(0, s(15)) - 0.25).abs() < 1e-9);
        assert_eq!(p.admitted_share_at(0, s(30)), 1.0);
    }

    #[test]
    fn the_picker_skips_an_ejected_endpoint_and_admits_a_ramping_one_by_its_share() {
        let p = pool(2);
        let req = crate::RequestFeatures::new("m", 100);
        let mut picker = crate::Picker::new(crate::Policy::RoundRobin, 7);
        for _ in 0..3 {
            fail(&p, 0, 0);
        }
        let mut picks_of_0 = |at: Duration| {
            (0..2_000)
                .filter(|_| picker.pick(&p, &req, at).unwrap().primary == EndpointId(0))
                .count()
        };
        assert_eq!(picks_of_0(s(5)), 0, "ejected");
        // At 15 s it keeps a quarter of the half round-robin would give it: about 250.
        let ramping = picks_of_0(s(15));
        assert!((180..320).contains(&ramping), "{ramping}");
        assert_eq!(picks_of_0(s(40)), 1_000, "whole again");
    }

    #[test]
    fn metrics_frozen_though_requests_were_sent_turn_stale_and_eject_and_a_change_frees_them() {
        use crate::scorer::Scorer;
        use crate::{Filter, Policy, Profile, Progress, ScrapedMetrics};
        let mut p = pool(2);
        let profile = Profile::with_scorers("q", vec![crate::weighted(Scorer::Queue, 1.0)]);
        let mut picker = crate::Picker::new(Policy::Weighted(profile), 7);
        let req = crate::RequestFeatures::new("m", 100);
        // Requests go to endpoint 0 throughout.
        let scrape = |at: Duration, body: u64| ScrapedMetrics {
            waiting: Some(0),
            running: Some(0),
            body_fingerprint: Some(body),
            ..ScrapedMetrics::empty(at)
        };
        let mut progress = Vec::new();
        for tenth in 0..=40u64 {
            let at = Duration::from_millis(tenth * 100);
            drop(p.all_counters()[0].dispatch(100, 0));
            progress.push(
                p.update_scrape(EndpointId(0), scrape(at, 1), POLICY.frozen_metrics_after)
                    .unwrap(),
            );
            // Endpoint 1's body changes with every scrape.
            p.update_scrape(
                EndpointId(1),
                scrape(at, tenth),
                POLICY.frozen_metrics_after,
            )
            .unwrap();
        }
        // The first request after the first scrape went at 100 ms: frozen 3 s later.
        assert!(progress[..31].iter().all(|g| *g == Progress::Moving));
        assert_eq!(
            progress[31],
            Progress::Frozen {
                since: Duration::ZERO,
                newly: true
            }
        );
        // Installed as of its last change, 4 s ago: the stale filter drops it, and every pick
        // goes to endpoint 1 though both report an empty queue.
        assert_eq!(p.metrics(EndpointId(0)).unwrap().scraped_at, Duration::ZERO);
        let at = s(4);
        assert!((0..50).all(|_| picker.pick(&p, &req, at).unwrap().primary == EndpointId(1)));
        assert!(matches!(
            picker.policy(),
            Policy::Weighted(profile) if matches!(profile.filters[..], [Filter::Stale { .. }])
        ));
        // And it is ejected as a run of failures would eject it, once.
        assert_eq!(p.eject_frozen(EndpointId(0), at, &POLICY), Some(s(10)));
        assert_eq!(p.eject_frozen(EndpointId(0), at, &POLICY), None);
        assert!(ejected(&p, 0, s(5)));
        // Its body changes: fresh at once.
        assert_eq!(
            p.update_scrape(EndpointId(0), scrape(s(5), 2), POLICY.frozen_metrics_after)
                .unwrap(),
            Progress::Moving
        );
        assert_eq!(p.metrics(EndpointId(0)).unwrap().scraped_at, s(5));
        // With detection off it is stale, never ejected.
        let off = OutlierPolicy {
            consecutive_failures: 0,
            ..POLICY
        };
        assert_eq!(p.eject_frozen(EndpointId(1), at, &off), None);
    }

    #[test]
    fn off_records_nothing() {
        let p = pool(2);
        for _ in 0..10 {
            assert_eq!(
                p.record_outcome(
                    EndpointId(0),
                    AttemptOutcome::Failed,
                    s(0),
                    &OutlierPolicy::OFF
                ),
                None
            );
        }
        assert_eq!(p.all_counters()[0].health.consecutive_failures(), 0);
    }
}
