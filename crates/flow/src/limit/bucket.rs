//! One rate-limit bucket in exact integer arithmetic: a token bucket kept as a leaky-bucket
//! meter (the form GCRA takes when it stores a level instead of a theoretical arrival time).
//!
//! A bucket of `limit` per `period` holds at most one period's allowance. Its state is a
//! [`Level`]: how full it is and when that was measured. The level drains at `limit` per
//! period; a charge of `cost` fits while `level + cost` stays within the capacity.
//!
//! Units: time in whole milliseconds; a level in *cost × period_ms*, so that draining for
//! `e` ms removes exactly `e × limit` units and no division ever rounds. Every value stays
//! below 2⁵³ ([`MAX_UNITS`]) for limits the config accepts, so the shared store's Lua script
//! (whose numbers are doubles) computes bit for bit what this file computes; the two are kept
//! in step by a conformance test against a real Redis.
//!
//! Invariants (checked by the property tests in `tests/limits.rs`):
//! - a charge is admitted only if the level after it is at most [`Bucket::capacity`], so over
//!   any stretch of `w` ms the admitted costs sum to at most `limit + w × limit / period_ms`;
//! - a refused charge's wait is exact: the same charge fits after exactly that many
//!   milliseconds with no other traffic, and not one millisecond earlier;
//! - settling a reservation moves the level by the difference and clamps it to
//!   `0..=2 × capacity`, so a tenant's debt never exceeds one extra period.

/// Bound on every value the arithmetic forms, in units: 2⁵³, the largest range in which a
/// double holds every integer exactly. The largest is a debt of two capacities plus a charge
/// of one capacity and a period, so a bucket needs `3 × capacity + period_ms ≤ MAX_UNITS`.
pub const MAX_UNITS: u64 = 1 << 53;

/// Milliseconds in the period of a requests-per-second bucket.
pub const SECOND_MS: u64 = 1_000;
/// Milliseconds in the period of a tokens-per-minute bucket.
pub const MINUTE_MS: u64 = 60_000;

/// A limit: `limit` per `period_ms`, with a burst of one period's allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bucket {
    limit: u64,
    period_ms: u64,
}

/// How full a bucket is, as of `at_ms`. The default is an empty bucket (a tenant never seen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Level {
    /// Fill, in cost × period_ms units.
    pub units: u64,
    /// When the fill was measured (ms on the store's clock).
    pub at_ms: u64,
}

/// Whether a charge fits a bucket now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// It fits; the bucket's level after taking it.
    Fits(Level),
    /// It fits after this many milliseconds (at least 1).
    WaitMs(u64),
    /// It costs more than the whole bucket holds: it never fits.
    Never,
}

impl Bucket {
    /// `limit` per `period_ms`; `None` when either is zero or the bucket's arithmetic would
    /// not stay within [`MAX_UNITS`].
    pub fn new(limit: u64, period_ms: u64) -> Option<Bucket> {
        let top = limit.checked_mul(period_ms)?.checked_mul(3)?;
        let fits = top.checked_add(period_ms)? <= MAX_UNITS;
        (limit > 0 && period_ms > 0 && fits).then_some(Bucket { limit, period_ms })
    }

    /// A requests-per-second bucket.
    pub fn per_second(limit: u64) -> Option<Bucket> {
        Bucket::new(limit, SECOND_MS)
    }

    /// A tokens-per-minute bucket.
    pub fn per_minute(limit: u64) -> Option<Bucket> {
        Bucket::new(limit, MINUTE_MS)
    }

    /// Allowance per period.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The period, in milliseconds.
    pub fn period_ms(&self) -> u64 {
        self.period_ms
    }

    /// Units a full bucket holds: one period's allowance.
    pub fn capacity(&self) -> u64 {
        self.limit * self.period_ms
    }

    /// A cost in units. Costs above the limit never fit whatever their size, so they are
    /// clamped to one more than the limit, which keeps every sum below [`MAX_UNITS`].
    pub fn units(&self, cost: u64) -> u64 {
        cost.min(self.limit + 1) * self.period_ms
    }

    /// The level at `now_ms`. A clock that went back (`now_ms` before `at_ms`) drains nothing
    /// and keeps the later time, so a level never refills twice for the same moment.
    pub fn drain(&self, level: Level, now_ms: u64) -> Level {
        if now_ms <= level.at_ms {
            return level;
        }
        let elapsed = now_ms - level.at_ms;
        // Compared before multiplying, so `elapsed × limit` stays below the level (and 2⁵³).
        let units = if elapsed >= level.units.div_ceil(self.limit) {
            0
        } else {
            level.units - elapsed * self.limit
        };
        Level {
            units,
            at_ms: now_ms,
        }
    }

    /// Whether `cost` fits at `now_ms`, given the level last stored.
    pub fn room(&self, level: Level, cost: u64, now_ms: u64) -> Room {
        let level = self.drain(level, now_ms);
        let cost = self.units(cost);
        let cap = self.capacity();
        // A level past two capacities can only come from a replica with a larger limit (a
        // config rollout); it counts as the most debt this bucket carries.
        let units = level.units.min(2 * cap);
        if cost > cap {
            Room::Never
        } else if units + cost <= cap {
            Room::Fits(Level {
                units: units + cost,
                at_ms: level.at_ms,
            })
        } else {
            Room::WaitMs((units + cost - cap).div_ceil(self.limit))
        }
    }

    /// The level after charging `delta` more (or refunding `-delta`) at `now_ms`, clamped to
    /// `0..=2 × capacity`.
    pub fn adjust(&self, level: Level, delta: i64, now_ms: u64) -> Level {
        let level = self.drain(level, now_ms);
        let cap = self.capacity();
        // Any |delta| past twice the limit hits a clamp anyway; bounding it first, and
        // comparing before adding, keeps every value within two capacities.
        let step = delta.unsigned_abs().min(2 * self.limit) * self.period_ms;
        let units = if delta < 0 {
            level.units.saturating_sub(step)
        } else if step >= 2 * cap - level.units.min(2 * cap) {
            2 * cap
        } else {
            level.units + step
        };
        Level {
            units,
            at_ms: level.at_ms,
        }
    }

    /// Milliseconds until `level` has drained to empty (when a store may forget it).
    pub fn ttl_ms(&self, level: Level) -> u64 {
        level.units.div_ceil(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(limit: u64, period_ms: u64) -> Bucket {
        Bucket::new(limit, period_ms).unwrap()
    }

    #[test]
    fn a_full_period_is_the_burst_and_then_the_rate_refills_it() {
        let rps = b(3, 1000);
        let mut level = Level::default();
        for _ in 0..3 {
            match rps.room(level, 1, 0) {
                Room::Fits(l) => level = l,
                other => panic!("{other:?}"),
            }
        }
        // A fourth at once waits exactly one emission interval (333.3 ms → 334).
        assert_eq!(rps.room(level, 1, 0), Room::WaitMs(334));
        assert_eq!(rps.room(level, 1, 333), Room::WaitMs(1));
        assert!(matches!(rps.room(level, 1, 334), Room::Fits(_)));
        assert_eq!(rps.room(level, 4, 0), Room::Never);
    }

    #[test]
    fn settling_refunds_or_charges_the_difference_within_one_extra_period() {
        let tpm = b(100, 60_000);
        let reserved = match tpm.room(Level::default(), 40, 0) {
            Room::Fits(l) => l,
            other => panic!("{other:?}"),
        };
        // Used 10 of 40: 30 come back.
        let refunded = tpm.adjust(reserved, -30, 0);
        assert_eq!(refunded.units, tpm.units(10));
        // Used 500 of 40: the debt stops at one extra period.
        let charged = tpm.adjust(reserved, 460, 0);
        assert_eq!(charged.units, 2 * tpm.capacity());
        assert_eq!(tpm.ttl_ms(charged), 120_000);
        // A refund never goes below empty.
        assert_eq!(tpm.adjust(reserved, -1_000, 0).units, 0);
    }

    #[test]
    fn a_clock_that_goes_back_drains_nothing() {
        let rps = b(10, 1000);
        let level = Level {
            units: 5000,
            at_ms: 1_000,
        };
        assert_eq!(rps.drain(level, 900), level);
        assert_eq!(rps.drain(level, 1_100).units, 4000);
        assert_eq!(rps.drain(level, u64::MAX).units, 0);
    }

    #[test]
    fn buckets_that_would_leave_exact_doubles_are_refused() {
        assert!(Bucket::per_minute(10_000_000_000).is_some());
        assert!(Bucket::per_second(u64::from(u32::MAX)).is_some());
        assert!(Bucket::per_minute(u64::MAX / 60_000).is_none());
        assert!(Bucket::new(0, 1000).is_none());
    }
}
