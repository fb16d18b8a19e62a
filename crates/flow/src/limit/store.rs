//! Where bucket levels live: the [`LimitStore`] a [`super::RateLimiter`] runs against, and
//! [`LocalStore`], which keeps them in this process.
//!
//! A store applies [`take_all`] and [`Bucket::adjust`] atomically per tenant; that is all it
//! decides. The local store does it under a mutex; the gateway's Redis store does it in one Lua
//! script, which mirrors this arithmetic line for line.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::{ready, Future};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::bucket::{Bucket, Level, Room};

/// Which of a tenant's limits a bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// `requestsPerSecond`: every request costs 1.
    Requests,
    /// `tokensPerMinute`: a request costs its prompt plus completion tokens.
    Tokens,
}

impl LimitKind {
    /// Both, in a fixed order (stores index their slots by it).
    pub const ALL: [LimitKind; 2] = [LimitKind::Requests, LimitKind::Tokens];

    /// `requests` or `tokens`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests",
            LimitKind::Tokens => "tokens",
        }
    }

    /// Its place in [`LimitKind::ALL`].
    pub fn index(self) -> usize {
        match self {
            LimitKind::Requests => 0,
            LimitKind::Tokens => 1,
        }
    }
}

/// One bucket a request is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// Which limit.
    pub kind: LimitKind,
    /// The tenant's bucket for it.
    pub bucket: Bucket,
    /// What the request costs (1 request, or its estimated tokens).
    pub cost: u64,
}

/// What refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedBy {
    /// The tenant's bucket for this limit has no room.
    Limit(LimitKind),
    /// The store tracks as many tenants as it may, and this one is new ([`LocalStore`]).
    TooManyTenants,
}

/// A refusal and when the same request would be admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// What refused it.
    pub by: RefusedBy,
    /// Milliseconds until it fits with no other traffic; `None` when it never fits (it costs
    /// more than the whole bucket holds).
    pub wait_ms: Option<u64>,
}

/// The answer to [`LimitStore::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Every charge fitted and was taken.
    Admitted,
    /// Nothing was taken.
    Refused(Refusal),
}

/// Takes every charge or none at `now_ms`: `levels[i]` is the stored level of `charges[i]`'s
/// bucket, and is replaced by its new level only when all fit. A refusal names the charge
/// that fits last (one that never fits first), and its wait is the longest.
pub fn take_all(levels: &mut [Level], charges: &[Charge], now_ms: u64) -> Taken {
    let mut fitted = Vec::with_capacity(charges.len());
    let mut refusal: Option<Refusal> = None;
    for (c, level) in charges.iter().zip(levels.iter()) {
        let wait = match c.bucket.room(*level, c.cost, now_ms) {
            Room::Fits(l) => {
                fitted.push(l);
                continue;
            }
            Room::WaitMs(ms) => Some(ms),
            Room::Never => None,
        };
        let worse = match (refusal.map(|r| r.wait_ms), wait) {
            (None, _) => true,
            (Some(None), _) => false,
            (Some(Some(_)), None) => true,
            (Some(Some(old)), Some(new)) => new > old,
        };
        if worse {
            refusal = Some(Refusal {
                by: RefusedBy::Limit(c.kind),
                wait_ms: wait,
            });
        }
    }
    match refusal {
        Some(r) => Taken::Refused(r),
        None => {
            for (level, new) in levels.iter_mut().zip(fitted) {
                *level = new;
            }
            Taken::Admitted
        }
    }
}

/// Where a tenant's bucket levels live. Implementations apply [`take_all`] and
/// [`Bucket::adjust`] atomically per tenant, so concurrent requests (and, for a shared store,
/// concurrent gateways) never both take the last of a bucket.
///
/// `now` is the caller's clock. A shared store uses its own clock instead, so that every
/// gateway sharing it measures time alike.
pub trait LimitStore {
    /// Why the store could not answer.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Charges `tenant`'s buckets, all or nothing (at most one charge per [`LimitKind`]).
    fn take(
        &self,
        tenant: &str,
        charges: &[Charge],
        now: Duration,
    ) -> impl Future<Output = Result<Taken, Self::Error>> + Send;

    /// Charges `delta` more to `tenant`'s `kind` bucket, or refunds `-delta`.
    fn adjust(
        &self,
        tenant: &str,
        kind: LimitKind,
        bucket: Bucket,
        delta: i64,
        now: Duration,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Tenants the local store tracks at most (about 10 MB). Drained tenants are forgotten, so
/// this bounds the tenants active within the last period or two, not all tenants ever seen.
pub const MAX_LOCAL_TENANTS: usize = 100_000;

/// Sweeps for drained tenants start at this many tracked, then at twice what a sweep left.
const FIRST_SWEEP: usize = 1_024;

/// Sweeps run at most this often, so a flood of new tenants cannot make every request walk the
/// table; it is also the wait a refused new tenant is told.
const SWEEP_EVERY_MS: u64 = 1_000;

#[derive(Debug, Clone, Copy, Default)]
struct Slots {
    levels: [Level; 2],
    /// When each level will have drained to empty.
    empty_at_ms: [u64; 2],
}

#[derive(Debug)]
struct Table {
    tenants: HashMap<String, Slots>,
    max: usize,
    sweep_at: usize,
    next_sweep_ms: u64,
}

/// Bucket levels in this process: exact, and private to it (each gateway replica counts only
/// its own traffic).
///
/// Bounded: tenants whose buckets have drained are swept away (an empty bucket is what an
/// unknown tenant has anyway); when [`MAX_LOCAL_TENANTS`] are still active, a request from a
/// tenant not yet tracked is refused ([`RefusedBy::TooManyTenants`]) until a sweep makes room.
#[derive(Debug)]
pub struct LocalStore {
    table: Mutex<Table>,
}

impl Default for LocalStore {
    fn default() -> Self {
        Self::with_max_tenants(MAX_LOCAL_TENANTS)
    }
}

impl LocalStore {
    /// A store tracking at most `max` tenants.
    pub fn with_max_tenants(max: usize) -> Self {
        Self {
            table: Mutex::new(Table {
                tenants: HashMap::new(),
                max,
                sweep_at: FIRST_SWEEP.min(max),
                next_sweep_ms: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // Every update writes whole levels after computing them, so a panic elsewhere cannot
        // leave a half-written one behind.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tenants tracked now (the size of the table, for a metric).
    pub fn len(&self) -> usize {
        self.lock().tenants.len()
    }

    /// Whether no tenant is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The level stored for `tenant`'s `kind` bucket, as last written (empty when the tenant
    /// is not tracked).
    pub fn level(&self, tenant: &str, kind: LimitKind) -> Level {
        self.lock()
            .tenants
            .get(tenant)
            .map_or_else(Level::default, |s| s.levels[kind.index()])
    }

    /// [`LimitStore::take`] without the future.
    pub fn take_now(&self, tenant: &str, charges: &[Charge], now: Duration) -> Taken {
        let now_ms = millis(now);
        let mut table = self.lock();
        if !table.tenants.contains_key(tenant) && !table.make_room(now_ms) {
            return Taken::Refused(Refusal {
                by: RefusedBy::TooManyTenants,
                wait_ms: Some(SWEEP_EVERY_MS),
            });
        }
        let mut slots = table.tenants.get(tenant).copied().unwrap_or_default();
        let mut levels: Vec<Level> = charges
            .iter()
            .map(|c| slots.levels[c.kind.index()])
            .collect();
        let taken = take_all(&mut levels, charges, now_ms);
        if taken == Taken::Admitted {
            for (c, level) in charges.iter().zip(levels) {
                let i = c.kind.index();
                slots.levels[i] = level;
                slots.empty_at_ms[i] = level.at_ms + c.bucket.ttl_ms(level);
            }
            table.tenants.insert(tenant.to_owned(), slots);
        }
        taken
    }

    /// [`LimitStore::adjust`] without the future. A tenant not tracked (swept while its
    /// request ran, or refused room) starts from an empty bucket, as it would in a store that
    /// expired it.
    pub fn adjust_now(
        &self,
        tenant: &str,
        kind: LimitKind,
        bucket: Bucket,
        delta: i64,
        now: Duration,
    ) {
        let now_ms = millis(now);
        let mut table = self.lock();
        let known = table.tenants.contains_key(tenant);
        if !known && (delta <= 0 || !table.make_room(now_ms)) {
            // A refund to an empty bucket changes nothing; a charge with no room is dropped,
            // as a shared store's error would drop it.
            return;
        }
        let slots = table.tenants.entry(tenant.to_owned()).or_default();
        let i = kind.index();
        let level = bucket.adjust(slots.levels[i], delta, now_ms);
        slots.levels[i] = level;
        slots.empty_at_ms[i] = level.at_ms + bucket.ttl_ms(level);
    }
}

impl Table {
    /// Whether one more tenant fits, sweeping drained ones first when it is time.
    fn make_room(&mut self, now_ms: u64) -> bool {
        if self.tenants.len() >= self.sweep_at && now_ms >= self.next_sweep_ms {
            self.tenants
                .retain(|_, s| s.empty_at_ms.iter().any(|&t| t > now_ms));
            self.sweep_at = (2 * self.tenants.len()).clamp(FIRST_SWEEP.min(self.max), self.max);
            self.next_sweep_ms = now_ms + SWEEP_EVERY_MS;
        }
        self.tenants.len() < self.max
    }
}

impl LimitStore for LocalStore {
    type Error = Infallible;

    fn take(
        &self,
        tenant: &str,
        charges: &[Charge],
        now: Duration,
    ) -> impl Future<Output = Result<Taken, Infallible>> + Send {
        ready(Ok(self.take_now(tenant, charges, now)))
    }

    fn adjust(
        &self,
        tenant: &str,
        kind: LimitKind,
        bucket: Bucket,
        delta: i64,
        now: Duration,
    ) -> impl Future<Output = Result<(), Infallible>> + Send {
        self.adjust_now(tenant, kind, bucket, delta, now);
        ready(Ok(()))
    }
}

/// Whole milliseconds of `d` (a clock running for 584 million years saturates).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rps(n: u64) -> Charge {
        Charge {
            kind: LimitKind::Requests,
            bucket: Bucket::per_second(n).unwrap(),
            cost: 1,
        }
    }

    fn tpm(n: u64, cost: u64) -> Charge {
        Charge {
            kind: LimitKind::Tokens,
            bucket: Bucket::per_minute(n).unwrap(),
            cost,
        }
    }

    #[test]
    fn a_request_takes_every_bucket_or_none() {
        let store = LocalStore::default();
        let t = Duration::ZERO;
        assert_eq!(
            store.take_now("a", &[rps(10), tpm(100, 60)], t),
            Taken::Admitted
        );
        // The tokens do not fit, so the request slot is not spent either.
        let refused = store.take_now("a", &[rps(10), tpm(100, 60)], t);
        assert_eq!(
            refused,
            Taken::Refused(Refusal {
                by: RefusedBy::Limit(LimitKind::Tokens),
                wait_ms: Some(12_000)
            })
        );
        for _ in 0..9 {
            assert_eq!(store.take_now("a", &[rps(10)], t), Taken::Admitted);
        }
        assert!(matches!(
            store.take_now("a", &[rps(10)], t),
            Taken::Refused(_)
        ));
        // Tenants have buckets of their own.
        assert_eq!(store.take_now("b", &[rps(10)], t), Taken::Admitted);
        // More than a whole minute's tokens never fit, and say so.
        assert_eq!(
            store.take_now("c", &[rps(10), tpm(100, 101)], t),
            Taken::Refused(Refusal {
                by: RefusedBy::Limit(LimitKind::Tokens),
                wait_ms: None
            })
        );
    }

    #[test]
    fn drained_tenants_are_forgotten_and_a_full_table_refuses_new_ones() {
        let store = LocalStore::with_max_tenants(4);
        let ms = Duration::from_millis;
        for t in ["a", "b", "c", "d"] {
            assert_eq!(store.take_now(t, &[rps(1000)], ms(0)), Taken::Admitted);
        }
        let full = store.take_now("e", &[rps(1000)], ms(0));
        assert_eq!(
            full,
            Taken::Refused(Refusal {
                by: RefusedBy::TooManyTenants,
                wait_ms: Some(SWEEP_EVERY_MS)
            })
        );
        // Known tenants go on meanwhile.
        assert_eq!(store.take_now("a", &[rps(1000)], ms(1)), Taken::Admitted);
        // A second later every bucket has drained; the sweep makes room.
        assert_eq!(
            store.take_now("e", &[rps(1000)], ms(1_000)),
            Taken::Admitted
        );
        assert_eq!(store.len(), 1);
    }
}
