//! Gateway-local accounting: what this gateway has sent to an endpoint, known without waiting
//! for the next scrape.
//!
//! Scraped load is up to one scrape interval old (50 ms by default). A burst that arrives between
//! two scrapes sees the same numbers for every request and, with a max-score picker, lands on one
//! pod ("herding"). The fix is to credit each endpoint with what was dispatched to it since its
//! last scrape. Counters here are monotonic totals; a scrape records the totals at the moment it
//! lands ([`DispatchMark`]) and the credit is the difference. No reset races a dispatch, and an old
//! snapshot still computes a correct credit against its own mark.
//!
//! Atomics (not locks) keep the hot path wait-free: a pick reads a few counters, a dispatch adds to
//! them, a guard's drop subtracts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Live per-endpoint counters shared by every snapshot of a pool and every in-flight guard.
///
/// Invariant: `in_flight_*` equals the sum over live [`InFlightGuard`]s for this endpoint;
/// `dispatched_*` only grow.
#[derive(Debug, Default)]
pub struct EndpointCounters {
    in_flight_requests: AtomicU64,
    in_flight_tokens: AtomicU64,
    dispatched_requests: AtomicU64,
    dispatched_tokens: AtomicU64,
}

/// The dispatched totals at the moment a scrape landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DispatchMark {
    /// Requests dispatched (all time) when the scrape landed.
    pub requests: u64,
    /// Prompt tokens dispatched (all time) when the scrape landed.
    pub tokens: u64,
}

/// Gateway-local load of one endpoint as a plain value, read at pick time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LocalLoad {
    /// Requests sent and not yet finished.
    pub in_flight_requests: u64,
    /// Prompt tokens of the requests in flight.
    pub in_flight_tokens: u64,
    /// Requests dispatched since the endpoint's last scrape landed.
    pub requests_since_scrape: u64,
    /// Prompt tokens dispatched since the endpoint's last scrape landed.
    pub tokens_since_scrape: u64,
}

impl LocalLoad {
    /// Requests to add to the scraped waiting queue: dispatched since the scrape and still in
    /// flight. A request that already finished is no longer load, so the credit never exceeds what
    /// is in flight.
    pub fn queue_credit(&self) -> u64 {
        self.requests_since_scrape.min(self.in_flight_requests)
    }

    /// Prompt tokens to add to the scraped state, bounded the same way as [`Self::queue_credit`].
    pub fn token_credit(&self) -> u64 {
        self.tokens_since_scrape.min(self.in_flight_tokens)
    }
}

impl EndpointCounters {
    /// Fresh counters (all zero), shared behind an `Arc`.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records a dispatch of a request with `prompt_tokens` and returns the guard that keeps it
    /// counted as in flight until dropped.
    pub fn dispatch(self: &Arc<Self>, prompt_tokens: u64) -> InFlightGuard {
        self.in_flight_requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        self.dispatched_requests.fetch_add(1, Ordering::Relaxed);
        self.dispatched_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        InFlightGuard {
            counters: Arc::clone(self),
            tokens: prompt_tokens,
        }
    }

    /// The current dispatched totals, to store as the mark of a scrape that just landed.
    pub fn mark(&self) -> DispatchMark {
        DispatchMark {
            requests: self.dispatched_requests.load(Ordering::Relaxed),
            tokens: self.dispatched_tokens.load(Ordering::Relaxed),
        }
    }

    /// Requests in flight now.
    pub fn in_flight_requests(&self) -> u64 {
        self.in_flight_requests.load(Ordering::Relaxed)
    }

    /// The local load relative to the scrape that recorded `since`.
    pub fn load_since(&self, since: DispatchMark) -> LocalLoad {
        let now = self.mark();
        LocalLoad {
            in_flight_requests: self.in_flight_requests.load(Ordering::Relaxed),
            in_flight_tokens: self.in_flight_tokens.load(Ordering::Relaxed),
            requests_since_scrape: now.requests.saturating_sub(since.requests),
            tokens_since_scrape: now.tokens.saturating_sub(since.tokens),
        }
    }
}

/// Counts one request as in flight for as long as it lives; the gateway keeps it alive as long as
/// the response body.
#[derive(Debug)]
pub struct InFlightGuard {
    counters: Arc<EndpointCounters>,
    tokens: u64,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        // Each guard subtracts exactly what its `dispatch` added, so these never underflow.
        self.counters
            .in_flight_requests
            .fetch_sub(1, Ordering::Relaxed);
        self.counters
            .in_flight_tokens
            .fetch_sub(self.tokens, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_counts_while_alive_and_releases_on_drop() {
        let c = EndpointCounters::new();
        let g1 = c.dispatch(100);
        let g2 = c.dispatch(50);
        let load = c.load_since(DispatchMark::default());
        assert_eq!(load.in_flight_requests, 2);
        assert_eq!(load.in_flight_tokens, 150);
        drop(g1);
        let load = c.load_since(DispatchMark::default());
        assert_eq!(load.in_flight_requests, 1);
        assert_eq!(load.in_flight_tokens, 50);
        // Dispatched totals are monotonic: dropping a guard does not undo the dispatch.
        assert_eq!(load.requests_since_scrape, 2);
        drop(g2);
        assert_eq!(c.in_flight_requests(), 0);
    }

    #[test]
    fn credit_is_relative_to_the_mark_and_bounded_by_in_flight() {
        let c = EndpointCounters::new();
        let _old = c.dispatch(10);
        let mark = c.mark();
        let g = c.dispatch(20);
        let _h = c.dispatch(30);
        let load = c.load_since(mark);
        assert_eq!(load.requests_since_scrape, 2);
        assert_eq!(load.tokens_since_scrape, 50);
        assert_eq!(load.queue_credit(), 2);
        drop(g);
        drop(_old);
        // One of the two dispatched since the scrape finished: the credit follows in-flight.
        let load = c.load_since(mark);
        assert_eq!(load.queue_credit(), 1);
        assert_eq!(load.token_credit(), 30);
    }
}
