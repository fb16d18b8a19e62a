//! The gateway's one clock: the picker takes time as a `Duration` since an epoch of the caller's
//! choosing, and scrapes must be stamped on the same scale as picks.

use std::time::Duration;

use tokio::time::Instant;

/// Time since the gateway started. Built on tokio's `Instant`, so tests with paused time control
/// it.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    /// Time since the epoch.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// `at` on this clock's scale.
    pub fn at(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.epoch)
    }

    /// The instant `since` after this clock's epoch (the inverse of [`Clock::at`]).
    pub fn instant(&self, since: Duration) -> Instant {
        self.epoch + since
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
