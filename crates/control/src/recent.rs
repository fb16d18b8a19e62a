//! A pool's recent requests on the control plane's side: the sliding window of
//! [`infergate_telemetry::recent`] behind a lock, with the clock its records are stamped by.
//!
//! Both fronts feed it through shared code: [`crate::PlaneHandle::count_request`] records how
//! each request ended, and the pipeline's accounting (`crates/pipeline/src/account.rs`) each
//! successful answer's time to first token. The member status document reads it once per
//! pull. A reload hands it to the pool that keeps its name, so the window outlives the config.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use infergate_telemetry::recent::{RecentRequests, RecentSummary};

use crate::clock::Clock;

/// A pool's requests over the last [`infergate_telemetry::recent::WINDOW`].
///
/// The lock is held for an O(1) update per record and for one merge of the window's slots per
/// summary (microseconds), never across an await.
#[derive(Debug, Default)]
pub struct RecentWindow {
    /// The clock every record and summary reads, so they share one scale.
    clock: Clock,
    window: Mutex<RecentRequests>,
}

impl RecentWindow {
    /// An empty window whose clock starts now.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts a request that ended now with `status` (the client's); a 5xx is a failure.
    pub fn record_request(&self, status: u16) {
        let now = self.clock.now();
        self.lock().record_request(now, status >= 500);
    }

    /// Records a successful answer's first token, `ttft` after its request arrived.
    pub fn record_ttft(&self, ttft: Duration) {
        let now = self.clock.now();
        self.lock().record_ttft(now, ttft);
    }

    /// What the window ending now holds.
    pub fn summary(&self) -> RecentSummary {
        let now = self.clock.now();
        self.lock().summary(now)
    }

    fn lock(&self) -> MutexGuard<'_, RecentRequests> {
        // Counts only: a panic mid-update leaves at worst one record half-counted.
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn records_age_out_on_the_windows_own_clock() {
        let w = RecentWindow::new();
        w.record_request(200);
        w.record_request(503);
        w.record_request(429);
        w.record_ttft(Duration::from_millis(250));
        let s = w.summary();
        assert_eq!((s.requests, s.failed), (3, 1), "only the 5xx failed");
        assert_eq!(s.ttft_p99, Some(Duration::from_millis(250)));
        tokio::time::advance(infergate_telemetry::recent::WINDOW).await;
        let s = w.summary();
        assert_eq!((s.requests, s.first_tokens), (0, 0));
        assert_eq!(s.ttft_p99, None);
    }
}
