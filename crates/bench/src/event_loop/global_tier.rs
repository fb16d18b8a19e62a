//! The global tier's events in a multi-cluster run: the hooks by which the event loop hands a
//! caller's send, a timed-out attempt, a status pull and the cluster fault to the tier
//! ([`TierSim`]), and the tier's answers back to the loop's heap.
//!
//! Here, not in [`crate::global::tier`], so that the tier's state knows nothing of the loop
//! that drives it.

use super::{Ev, Sim};
use crate::global::tier::{Next, TierSim};
use infergate_global_picker::{
    MemberStatus, PoolStatus, Readiness, DEFAULT_RETRY_AFTER, MEMBER_STATUS_API_VERSION,
    MEMBER_STATUS_KIND,
};
use infergate_picker::AttemptOutcome;
use std::cmp::Reverse;
use std::time::Duration;

impl TierSim {
    /// The first pull of every member by every tier replica, each at its own phase.
    pub fn first_pulls(&mut self) -> Vec<(Duration, Ev)> {
        let mut out = Vec::new();
        for f in 0..self.fronts.len() {
            for m in 0..self.clusters.len() {
                let phase = self.pull_interval.mul_f64(self.pull_rng.next_f64());
                out.push((phase, Ev::Pull(f, m)));
            }
        }
        out
    }

    /// When the fault starts and heals.
    pub fn fault_events(&self) -> Vec<(Duration, Ev)> {
        self.fault.map_or_else(Vec::new, |(_, from, until)| {
            vec![(from, Ev::Fault(true)), (until, Ev::Fault(false))]
        })
    }
}

impl Sim<'_> {
    /// A caller sends request `i` (multi-cluster runs only).
    pub(crate) fn tier_send(&mut self, i: usize, now: Duration) {
        let Some(tier) = self.tier.as_mut() else {
            return;
        };
        tier.caller_sent[i] = now;
        self.outcomes[i].sent = now;
        self.tier_attempt(i, now);
    }

    /// Request `i`'s attempt at a cut-off member timed out: on to the next.
    pub(crate) fn tier_retry(&mut self, i: usize, now: Duration) {
        if let Some(tier) = self.tier.as_mut() {
            tier.end_attempt(i, now, Some(AttemptOutcome::Failed));
        }
        self.tier_attempt(i, now);
    }

    fn tier_attempt(&mut self, i: usize, now: Duration) {
        let Some(tier) = self.tier.as_mut() else {
            return;
        };
        match tier.next(i, now) {
            Next::Member(m) if tier.clusters[m].down => {
                // A black hole: no answer, not even a refusal, until the connect timeout.
                let at = now + tier.connect_timeout;
                self.heap.push(Reverse((at, Ev::Retry(i))));
            }
            Next::Member(m) => {
                let at = now + tier.one_way(tier.front_of(i), m);
                tier.answered(i, m, now);
                tier.served_by[i] = Some(m);
                self.dealt_to[i] = m as u32;
                self.heap.push(Reverse((at, Ev::Arrival(i))));
            }
            Next::Refused(status) => self.refuse(i, status, now),
            Next::Failed => {
                tier.out_of_attempts += 1;
                self.fail(i, None, now);
            }
        }
    }

    /// Request `i` ended at its cluster (finished, failed, or refused with `status`).
    pub(crate) fn tier_settled(&mut self, i: usize, now: Duration, status: Option<u16>) {
        let Some(tier) = self.tier.as_mut() else {
            return;
        };
        let member = tier.flight[i].map(|(m, _)| m);
        tier.end_attempt(i, now, None);
        if let (Some(m), Some(429)) = (member, status) {
            let f = tier.caller[i];
            tier.fronts[f].members[m]
                .state
                .on_throttled(now, DEFAULT_RETRY_AFTER);
        }
    }

    /// Whether request `i` may go on at its cluster; if the cluster is cut off, the request
    /// fails there (after `admitted` by its flow control, which then counts it done).
    pub(crate) fn cluster_accepts(&mut self, i: usize, now: Duration, admitted: bool) -> bool {
        let Some(tier) = self.tier.as_mut() else {
            return true;
        };
        let c = self.dealt_to[i] as usize;
        if !tier.clusters[c].down {
            return true;
        }
        tier.lost_in_flight += 1;
        self.fail(i, admitted.then_some(c), now);
        false
    }

    /// Tier replica `f` pulls member `m`'s status.
    pub(crate) fn tier_pull(&mut self, f: usize, m: usize, now: Duration) {
        let Some(tier) = self.tier.as_mut() else {
            return;
        };
        let jitter = 0.9 + 0.2 * tier.pull_rng.next_f64();
        let next = now + tier.pull_interval.mul_f64(jitter);
        self.heap.push(Reverse((next, Ev::Pull(f, m))));
        if tier.clusters[m].down {
            let at = now + tier.pull_timeout;
            self.heap.push(Reverse((at, Ev::PullMissed(f, m))));
            return;
        }
        tier.clusters[m].sequence += 1;
        let gateway = &self.gateways[m];
        let max_age = gateway
            .picker()
            .map_or(infergate_picker::DEFAULT_MAX_METRICS_AGE, |p| {
                p.policy().max_metrics_age()
            });
        let readiness = Readiness::of(&gateway.pool, now, max_age);
        let (queued, saturation) = gateway
            .gate
            .as_ref()
            .map_or((0, 0.0), |g| (g.queued(), g.saturation()));
        let doc = MemberStatus {
            api_version: MEMBER_STATUS_API_VERSION.to_owned(),
            kind: MEMBER_STATUS_KIND.to_owned(),
            sequence: tier.clusters[m].sequence,
            clock_unix_ms: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
            pools: vec![PoolStatus {
                models: vec![tier.model.clone()],
                ..PoolStatus::from_readiness(&tier.clusters[m].name, readiness, queued, saturation)
            }],
        };
        tier.fronts[f].members[m]
            .state
            .on_pull(doc, now, &tier.settings);
    }

    /// Tier replica `f`'s pull of member `m` timed out.
    pub(crate) fn tier_pull_missed(&mut self, f: usize, m: usize) {
        if let Some(tier) = self.tier.as_mut() {
            let settings = &tier.settings;
            tier.fronts[f].members[m].state.on_pull_failed(settings);
        }
    }

    /// The run's fault starts (`down`) or heals. When it starts, every request held by the
    /// cluster's replicas fails: nothing they answer reaches the caller.
    pub(crate) fn tier_fault(&mut self, down: bool, now: Duration) {
        let Some(tier) = self.tier.as_mut() else {
            return;
        };
        let Some((c, _, _)) = tier.fault else {
            return;
        };
        tier.clusters[c].down = down;
        if !down {
            return;
        }
        let range = self.gateways[c].replicas.clone();
        let mut lost: Vec<((usize, infergate_engine::RequestId), usize)> = self
            .owner
            .iter()
            .filter(|((e, _), _)| range.contains(e))
            .map(|(&k, &i)| (k, i))
            .collect();
        // The map's order is the hasher's; the run's is the requests'.
        lost.sort_by_key(|&(_, i)| i);
        tier.lost_in_flight += lost.len() as u64;
        for (key, i) in lost {
            self.owner.remove(&key);
            self.fail(i, Some(c), now);
        }
    }
}
