//! One member as the tier knows it: its last status, whether that status is fresh, its
//! ejection state from the data path, when it came back, and what was sent to it since its
//! status was read.
//!
//! Freshness is judged on the sequence, not on an HTTP 200: a pull that fails or times out, or
//! whose sequence did not change, is a miss; `misses_before_stale` misses in a row make the
//! member stale and it leaves the candidates. A stale member returns after
//! `pulls_before_return` good pulls in a row, through the slow-start ramp. A member never seen
//! becomes a candidate at its first good pull, whole: there is nothing to ramp from.

use std::time::Duration;

use infergate_picker::{slow_start_weight, AttemptOutcome, Health, OutlierPolicy};

use crate::settings::TierSettings;
use crate::status::MemberStatus;

/// Why a member is not a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// A candidate.
    Available,
    /// No good pull yet.
    Unknown,
    /// Its status stopped (failed pulls or a sequence that stopped advancing).
    Stale,
    /// Ejected by outlier detection until the time given.
    Ejected,
}

/// One member's state. Invariant: `status` is the last document whose sequence changed;
/// `stale` is true until the first good pull.
#[derive(Debug)]
pub struct MemberState {
    status: Option<MemberStatus>,
    /// When `status` was received (the tier's clock).
    status_at: Option<Duration>,
    stale: bool,
    misses: u32,
    good_streak: u32,
    /// When the member last became a candidate again after being stale.
    returned_at: Option<Duration>,
    health: Health,
    /// Good pulls so far: a request sent under one status and finished under a later one was
    /// already counted by the later status, so its end must not be taken off the credit.
    generation: u64,
    /// Requests sent since the status was read and not finished: the status cannot show them.
    in_flight_since_status: u32,
    /// Requests sent since the status was read, finished or not.
    sent_since_status: u32,
    /// Requests sent between the status before and this one.
    sent_before_status: u32,
    /// Until when it said it has no capacity (a 429's `Retry-After`).
    throttled_until: Option<Duration>,
}

impl Default for MemberState {
    fn default() -> Self {
        Self::new()
    }
}

impl MemberState {
    /// A member nothing is known about.
    pub fn new() -> Self {
        Self {
            status: None,
            status_at: None,
            stale: true,
            misses: 0,
            good_streak: 0,
            returned_at: None,
            health: Health::default(),
            generation: 0,
            in_flight_since_status: 0,
            sent_since_status: 0,
            sent_before_status: 0,
            throttled_until: None,
        }
    }

    /// A pull answered at `now` with `doc`.
    pub fn on_pull(&mut self, doc: MemberStatus, now: Duration, s: &TierSettings) {
        let advanced = self
            .status
            .as_ref()
            .is_none_or(|last| last.sequence != doc.sequence);
        if !advanced {
            self.on_pull_failed(s);
            return;
        }
        self.misses = 0;
        self.good_streak = self.good_streak.saturating_add(1);
        if self.stale {
            let first = self.status.is_none();
            if first || self.good_streak >= s.pulls_before_return {
                self.stale = false;
                if !first {
                    self.returned_at = Some(now);
                }
            }
        }
        self.status = Some(doc);
        self.status_at = Some(now);
        self.generation += 1;
        self.in_flight_since_status = 0;
        self.sent_before_status = self.sent_since_status;
        self.sent_since_status = 0;
    }

    /// A pull missed: it failed (refused, timed out, unreadable), or its sequence did not
    /// change.
    pub fn on_pull_failed(&mut self, s: &TierSettings) {
        self.good_streak = 0;
        self.misses = self.misses.saturating_add(1);
        if self.misses >= s.misses_before_stale {
            self.stale = true;
        }
    }

    /// A request's attempt at this member ended as `outcome` at `now`; returns the ejection's
    /// length when this ejected it. `room` says whether one more member may be ejected.
    pub fn on_attempt(
        &mut self,
        outcome: AttemptOutcome,
        now: Duration,
        policy: &OutlierPolicy,
        room: impl FnOnce() -> bool,
    ) -> Option<Duration> {
        if policy.consecutive_failures == 0 {
            return None;
        }
        self.health.record(outcome, now, policy, room)
    }

    /// It answered 429 at `now`, asking to wait `retry_after`: until then it counts as
    /// saturated (not ejected: it is healthy, only full).
    pub fn on_throttled(&mut self, now: Duration, retry_after: Duration) {
        let until = now + retry_after;
        self.throttled_until = Some(self.throttled_until.map_or(until, |t| t.max(until)));
    }

    /// Until when it asked not to be sent work, if that is after `now`.
    pub fn throttled_until(&self, now: Duration) -> Option<Duration> {
        self.throttled_until.filter(|t| *t > now)
    }

    /// A request was sent to it; returns the status generation to hand back to
    /// [`Self::on_done`] when it ends.
    pub fn on_sent(&mut self) -> u64 {
        self.in_flight_since_status = self.in_flight_since_status.saturating_add(1);
        self.sent_since_status = self.sent_since_status.saturating_add(1);
        self.generation
    }

    /// A request sent under status `generation` ended (answered, failed or abandoned).
    pub fn on_done(&mut self, generation: u64) {
        if generation == self.generation {
            self.in_flight_since_status = self.in_flight_since_status.saturating_sub(1);
        }
    }

    /// Whether it is a candidate at `now`, and if not, why.
    pub fn availability(&self, now: Duration) -> Availability {
        if self.status.is_none() {
            Availability::Unknown
        } else if self.stale {
            Availability::Stale
        } else if self.health.is_ejected(now) {
            Availability::Ejected
        } else {
            Availability::Available
        }
    }

    /// Whether its last pull missed (failed, or showed the same sequence): not yet stale, but a
    /// black-holed member looks like this a pull after its link went, seconds before it is
    /// stale.
    pub fn is_suspect(&self) -> bool {
        self.misses > 0
    }

    /// Whether outlier detection has it out at `now`.
    pub fn is_ejected(&self, now: Duration) -> bool {
        self.health.is_ejected(now)
    }

    /// The last status, fresh or not.
    pub fn status(&self) -> Option<&MemberStatus> {
        self.status.as_ref()
    }

    /// How old the last status is at `now`.
    pub fn status_age(&self, now: Duration) -> Option<Duration> {
        self.status_at.map(|at| now.saturating_sub(at))
    }

    /// Requests sent since the status was read, and between the status before and it: how
    /// fast the tier's own traffic to the member grows.
    pub fn sends(&self) -> (u32, u32) {
        (self.sent_since_status, self.sent_before_status)
    }

    /// Requests sent since its status was read that have not ended.
    pub fn in_flight_since_status(&self) -> u32 {
        self.in_flight_since_status
    }

    /// Ejections since it last stayed in long enough to forget them.
    pub fn ejections(&self) -> u32 {
        self.health.ejections()
    }

    /// The share of its whole weight it carries at `now`: the slow-start ramp after it came back
    /// from stale or from an ejection, whichever is later; 1 otherwise, 0 when not a candidate.
    pub fn ramp_weight(&self, now: Duration, s: &TierSettings) -> f64 {
        if self.availability(now) != Availability::Available {
            return 0.0;
        }
        let since_stale = self.returned_at.map(|at| now.saturating_sub(at));
        let since_ejection = self.health.returned_since(now);
        let since = match (since_stale, since_ejection) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        since.map_or(1.0, |since| {
            slow_start_weight(
                since,
                s.slow_start_window,
                s.slow_start_aggression,
                s.slow_start_min_weight,
            )
        })
    }
}
