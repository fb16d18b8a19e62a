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
/// `prefill_pending_tokens` the sum over live guards that have not seen their first token;
/// `dispatched_*` only grow.
///
/// Aligned to a cache line: a pick reads every endpoint's counters, and behind the `Arc` header
/// they straddled two lines for about half the endpoints (two misses instead of one); gateway
/// threads dispatching to neighbouring endpoints also stop invalidating each other's lines.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct EndpointCounters {
    in_flight_requests: AtomicU64,
    in_flight_tokens: AtomicU64,
    prefill_pending_tokens: AtomicU64,
    dispatched_requests: AtomicU64,
    dispatched_tokens: AtomicU64,
    /// Its failure streak and ejections ([`crate::health`]).
    pub(crate) health: crate::health::Health,
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
    /// Uncached prompt tokens of requests in flight that have not produced their first token:
    /// prefill work queued ahead of a new request, which a request count cannot see (one
    /// 7,000-token prefill delays the next request as much as dozens of short ones).
    pub prefill_pending_tokens: u64,
}

impl LocalLoad {
    /// Requests to add to the scraped waiting queue: dispatched since the scrape and still in
    /// flight. A request that already finished is no longer load, so the credit never exceeds what
    /// is in flight.
    pub fn queue_credit(&self) -> u64 {
        self.requests_since_scrape.min(self.in_flight_requests)
    }

    /// The waiting queue to score: the scraped `waiting` plus [`Self::queue_credit`], raised so
    /// that waiting plus `running` is never below what this gateway has in flight there. A pod
    /// that hangs keeps reporting zero running while the requests sent to it pile up; without
    /// the floor it looked the least loaded and drew the most traffic. `running` may be NaN
    /// (not reported); a NaN `waiting` (no queue reported) stays NaN.
    pub fn floored_waiting(&self, waiting: f64, running: f64) -> f64 {
        let credited = waiting + self.queue_credit() as f64;
        let reported = credited + if running.is_nan() { 0.0 } else { running };
        let floor = self.in_flight_requests as f64;
        if floor > reported {
            credited + (floor - reported)
        } else {
            credited
        }
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

    /// Records a dispatch of a request with `prompt_tokens`, of which `uncached_tokens` are
    /// expected to need prefill there, and returns the guard that keeps it counted as in flight
    /// until dropped (and its prefill as pending until [`InFlightGuard::first_token`]).
    pub fn dispatch(self: &Arc<Self>, prompt_tokens: u64, uncached_tokens: u64) -> InFlightGuard {
        let uncached_tokens = uncached_tokens.min(prompt_tokens);
        self.in_flight_requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        self.prefill_pending_tokens
            .fetch_add(uncached_tokens, Ordering::Relaxed);
        self.dispatched_requests.fetch_add(1, Ordering::Relaxed);
        self.dispatched_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        InFlightGuard {
            counters: Arc::clone(self),
            tokens: prompt_tokens,
            prefill_tokens: uncached_tokens,
        }
    }

    /// The current dispatched totals, to store as the mark of a scrape that just landed.
    pub fn mark(&self) -> DispatchMark {
        DispatchMark {
            requests: self.dispatched_requests.load(Ordering::Relaxed),
            tokens: self.dispatched_tokens.load(Ordering::Relaxed),
        }
    }

    /// Its failure streak and ejections.
    pub fn health(&self) -> &crate::health::Health {
        &self.health
    }

    /// Requests in flight now.
    pub fn in_flight_requests(&self) -> u64 {
        self.in_flight_requests.load(Ordering::Relaxed)
    }

    /// Uncached prompt tokens in flight here that await their first token.
    pub fn prefill_pending_tokens(&self) -> u64 {
        self.prefill_pending_tokens.load(Ordering::Relaxed)
    }

    /// The local load relative to the scrape that recorded `since`.
    pub fn load_since(&self, since: DispatchMark) -> LocalLoad {
        let now = self.mark();
        LocalLoad {
            in_flight_requests: self.in_flight_requests.load(Ordering::Relaxed),
            in_flight_tokens: self.in_flight_tokens.load(Ordering::Relaxed),
            requests_since_scrape: now.requests.saturating_sub(since.requests),
            tokens_since_scrape: now.tokens.saturating_sub(since.tokens),
            prefill_pending_tokens: self.prefill_pending_tokens.load(Ordering::Relaxed),
        }
    }
}

/// Counts one request as in flight for as long as it lives; the gateway keeps it alive as long as
/// the response body.
#[derive(Debug)]
pub struct InFlightGuard {
    counters: Arc<EndpointCounters>,
    tokens: u64,
    /// Prefill still counted as pending; 0 once the first token came.
    prefill_tokens: u64,
}

impl InFlightGuard {
    /// The request's first token arrived: its prefill is no longer work ahead of anyone. Only
    /// the first call has an effect.
    pub fn first_token(&mut self) {
        let tokens = std::mem::take(&mut self.prefill_tokens);
        if tokens > 0 {
            self.counters
                .prefill_pending_tokens
                .fetch_sub(tokens, Ordering::Relaxed);
        }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        // A request that ends before its first token (an error, a cancelled client) releases its
        // prefill here.
        self.first_token();
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
        let mut g1 = c.dispatch(100, 60);
        let g2 = c.dispatch(50, 80);
        let load = c.load_since(DispatchMark::default());
        assert_eq!(load.in_flight_requests, 2);
        assert_eq!(load.in_flight_tokens, 150);
        // Uncached tokens are capped at the prompt: 60 + 50.
        assert_eq!(load.prefill_pending_tokens, 110);
        g1.first_token();
        g1.first_token();
        assert_eq!(
            c.load_since(DispatchMark::default()).prefill_pending_tokens,
            50
        );
        assert_eq!(c.in_flight_requests(), 2);
        drop(g1);
        let load = c.load_since(DispatchMark::default());
        assert_eq!(load.in_flight_requests, 1);
        assert_eq!(load.in_flight_tokens, 50);
        // Dispatched totals are monotonic: dropping a guard does not undo the dispatch.
        assert_eq!(load.requests_since_scrape, 2);
        // g2 never saw a first token: dropping it releases its prefill too.
        drop(g2);
        assert_eq!(c.in_flight_requests(), 0);
        assert_eq!(
            c.load_since(DispatchMark::default()).prefill_pending_tokens,
            0
        );
    }

    #[test]
    fn credit_is_relative_to_the_mark_and_bounded_by_in_flight() {
        let c = EndpointCounters::new();
        let _old = c.dispatch(10, 10);
        let mark = c.mark();
        let g = c.dispatch(20, 0);
        let _h = c.dispatch(30, 0);
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
    #[test]
    fn a_pod_reporting_less_than_the_gateway_has_in_flight_is_floored_at_it() {
        let hung = LocalLoad {
            in_flight_requests: 50,
            ..LocalLoad::default()
        };
        // Reports nothing running, nothing waiting: 50 of ours are there all the same.
        assert_eq!(hung.floored_waiting(0.0, 0.0), 50.0);
        assert_eq!(hung.floored_waiting(0.0, f64::NAN), 50.0);
        // A pod reporting more than we sent (other gateways' requests) keeps its report.
        assert_eq!(hung.floored_waiting(10.0, 60.0), 10.0);
        assert_eq!(hung.floored_waiting(5.0, 40.0), 10.0);
        assert!(hung.floored_waiting(f64::NAN, 0.0).is_nan());
    }
}
