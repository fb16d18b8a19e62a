//! One endpoint's outlier state: its failure streak, how often it was ejected and until when,
//! and the rule that moves it (Envoy's manner: several failures in a row eject for a time that
//! doubles on each repeat; a returning endpoint is on probation, so its first failure ejects it
//! again). How many of a pool may be out at once is the pool's question ([`crate::outlier`]).
//!
//! Atomics, shared by every snapshot of the pool; time is passed in, so the same code runs live
//! and in virtual time.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::clock::nanos;

/// When endpoints are ejected, and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutlierPolicy {
    /// Failures in a row that eject an endpoint; 0 turns detection off.
    pub consecutive_failures: u32,
    /// The first ejection's length; each repeat doubles it.
    pub base_ejection: Duration,
    /// The longest ejection; also how long an endpoint must stay in before its ejections are
    /// forgotten (the next one is a first again).
    pub max_ejection: Duration,
    /// The most of the pool ejected at once, in (0, 1]; at least one endpoint of a pool of two
    /// or more may be. A pool of one is never ejected from: there is nowhere better to send.
    pub max_ejected_share: f64,
    /// After an ejection, how long the endpoint's share of picks takes to ramp back to whole
    /// (Envoy's slow start with aggression 1: linear, from [`SLOW_START_FLOOR`]); zero returns
    /// it whole at once.
    pub slow_start: Duration,
    /// How long an endpoint's metrics may stay the same after this gateway sent it a request
    /// before they count as frozen ([`crate::Progress`]): then they are stale, and, with
    /// detection on, the endpoint is ejected as for a run of failures. Zero turns it off.
    pub frozen_metrics_after: Duration,
}

/// The least share of its picks a returning endpoint keeps during slow start, so that one that
/// came back healthy is seen to be within the first seconds (Envoy's `min_weight_percent`
/// default is 10 %).
pub const SLOW_START_FLOOR: f64 = 0.1;

/// Envoy's slow-start weight (`slow_start_config`): the share of its whole weight a target that
/// came back `since` ago carries, `max(min_weight, time_factor^(1/aggression))` with
/// `time_factor = max(since, 1 ms) / window`; 1 once the window has passed or when it is zero.
/// Aggression 1 is linear, above 1 rises faster at first.
///
/// Invariant: the result is in `[min_weight.min(1), 1]` for a positive, finite `aggression`.
pub fn slow_start_weight(
    since: Duration,
    window: Duration,
    aggression: f64,
    min_weight: f64,
) -> f64 {
    if window.is_zero() || since >= window {
        return 1.0;
    }
    let time_factor = since.max(Duration::from_millis(1)).as_secs_f64() / window.as_secs_f64();
    time_factor.powf(1.0 / aggression).max(min_weight).min(1.0)
}

impl OutlierPolicy {
    /// Detection off.
    pub const OFF: OutlierPolicy = OutlierPolicy {
        consecutive_failures: 0,
        base_ejection: Duration::ZERO,
        max_ejection: Duration::ZERO,
        max_ejected_share: 0.0,
        slow_start: Duration::ZERO,
        frozen_metrics_after: Duration::ZERO,
    };
}

/// What one attempt at an endpoint came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// It answered with a status below 500.
    Answered,
    /// It answered 5xx, refused or broke the connection, or did not answer in time.
    Failed,
}

/// One endpoint's failure streak and ejections.
///
/// Invariant: `ejected_until` is 0 (never ejected) or the end of the last ejection, in
/// nanoseconds plus one on the picker's clock; `ejections` counts those since the endpoint last
/// stayed in for `max_ejection`; `slow_start` is the policy's ramp, in nanoseconds, recorded
/// with the last ejection.
#[derive(Debug, Default)]
pub struct Health {
    consecutive: AtomicU32,
    ejections: AtomicU32,
    ejected_until: AtomicU64,
    slow_start: AtomicU64,
}

impl Health {
    /// Whether the endpoint is ejected at `now`.
    pub fn is_ejected(&self, now: Duration) -> bool {
        let until = self.ejected_until.load(Relaxed);
        until != 0 && nanos(now) < until - 1
    }

    /// The share of the picks that would choose it that it keeps at `now`: 0 while ejected,
    /// ramping linearly from [`SLOW_START_FLOOR`] to 1 over the slow-start window after it
    /// returns, 1 otherwise (never ejected, or past the ramp).
    pub fn admitted_share(&self, now: Duration) -> f64 {
        let until = self.ejected_until.load(Relaxed);
        if until == 0 {
            return 1.0;
        }
        let now = nanos(now);
        let back = until - 1;
        if now < back {
            return 0.0;
        }
        let window = self.slow_start.load(Relaxed);
        slow_start_weight(
            Duration::from_nanos(now - back),
            Duration::from_nanos(window),
            1.0,
            SLOW_START_FLOOR,
        )
    }

    /// Failures in a row so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive.load(Relaxed)
    }

    /// Ejections since it last stayed in long enough to forget them.
    pub fn ejections(&self) -> u32 {
        self.ejections.load(Relaxed)
    }

    /// Records an attempt's outcome; returns how long the endpoint is ejected for when this
    /// ejected it. `room` says whether the pool may eject one more endpoint (asked only when
    /// this failure would eject).
    pub fn record(
        &self,
        outcome: AttemptOutcome,
        now: Duration,
        policy: &OutlierPolicy,
        room: impl FnOnce() -> bool,
    ) -> Option<Duration> {
        match outcome {
            AttemptOutcome::Answered => {
                // Read first: every answered request comes here, and a healthy endpoint's
                // streak is already 0, so its cache line is not written once per request.
                if self.consecutive.load(Relaxed) != 0 {
                    self.consecutive.store(0, Relaxed);
                }
                None
            }
            AttemptOutcome::Failed => {
                let streak = self.consecutive.fetch_add(1, Relaxed) + 1;
                // On probation (back from an ejection it has not yet outlived) one failure is
                // enough.
                let probation = self
                    .since_return(now)
                    .is_some_and(|since| since < nanos(policy.max_ejection));
                if streak < policy.consecutive_failures && !probation {
                    return None;
                }
                self.eject(now, policy, room)
            }
        }
    }

    /// Ejects the endpoint now, whatever its streak (unless it is out already or the pool has
    /// no room); returns for how long. Each ejection doubles the last one's length, unless the
    /// endpoint stayed in for `max_ejection` since: then it is a first again.
    pub(crate) fn eject(
        &self,
        now: Duration,
        policy: &OutlierPolicy,
        room: impl FnOnce() -> bool,
    ) -> Option<Duration> {
        if self.is_ejected(now) || !room() {
            return None;
        }
        let forgotten = self
            .since_return(now)
            .is_some_and(|since| since >= nanos(policy.max_ejection));
        let previous = if forgotten {
            0
        } else {
            self.ejections.load(Relaxed)
        };
        let ejections = previous.saturating_add(1);
        let length = policy
            .base_ejection
            .saturating_mul(1u32 << (ejections - 1).min(16))
            .min(policy.max_ejection);
        self.ejections.store(ejections, Relaxed);
        self.slow_start.store(nanos(policy.slow_start), Relaxed);
        self.ejected_until
            .store(nanos(now + length).saturating_add(1), Relaxed);
        self.consecutive.store(0, Relaxed);
        Some(length)
    }

    /// How long ago the endpoint came back from its last ejection; `None` when it was never
    /// ejected or is out now.
    pub fn returned_since(&self, now: Duration) -> Option<Duration> {
        self.since_return(now).map(Duration::from_nanos)
    }

    /// Nanoseconds since the endpoint came back from its last ejection; `None` when it was never
    /// ejected or is out now.
    fn since_return(&self, now: Duration) -> Option<u64> {
        let until = self.ejected_until.load(Relaxed);
        let now = nanos(now);
        (until != 0 && now >= until - 1).then(|| now - (until - 1))
    }
}
