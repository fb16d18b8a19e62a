//! How fast a pool finishes requests, and the Retry-After it implies for a backlog.

use std::time::Duration;

/// Completions are counted over windows of this length before they update the rate.
const WINDOW: Duration = Duration::from_secs(1);
/// Weight of the newest window in the moving average.
const ALPHA: f64 = 0.3;
/// Longest Retry-After suggested: beyond a minute the estimate says little.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Completions per second, an exponential moving average over one-second windows.
///
/// Invariant: `rate` only changes when a window closes, so two calls at one instant agree.
#[derive(Debug, Clone, Default)]
pub struct DrainRate {
    window_start: Option<Duration>,
    count: u64,
    rate: f64,
}

impl DrainRate {
    /// Counts one completion at `now`.
    pub fn record(&mut self, now: Duration) {
        self.roll(now);
        self.count += 1;
    }

    /// Completions per second as of `now`; 0 until a window has closed.
    pub fn per_sec(&mut self, now: Duration) -> f64 {
        self.roll(now);
        self.rate
    }

    /// Completions per second as of the last closed window, without closing one: what a
    /// caller that cannot mutate (a deadline query) reads; 0 until a window has closed.
    pub fn last_rate(&self) -> f64 {
        self.rate
    }

    fn roll(&mut self, now: Duration) {
        let Some(start) = self.window_start else {
            self.window_start = Some(now);
            return;
        };
        let elapsed = now.saturating_sub(start);
        if elapsed < WINDOW {
            return;
        }
        // Windows with no completion at all count too: a pool that stopped finishing drains at 0.
        let sample = self.count as f64 / elapsed.as_secs_f64();
        self.rate = if self.rate == 0.0 {
            sample
        } else {
            (1.0 - ALPHA) * self.rate + ALPHA * sample
        };
        self.window_start = Some(now);
        self.count = 0;
    }

    /// Whole seconds for `backlog` requests to drain at the current rate, in `1..=60`; 1 when
    /// the rate is not known yet.
    pub fn retry_after(&mut self, backlog: f64, now: Duration) -> Duration {
        let rate = self.per_sec(now);
        let secs = if rate > 0.0 && backlog.is_finite() {
            (backlog.max(0.0) / rate).ceil()
        } else {
            1.0
        };
        Duration::from_secs(secs.clamp(1.0, MAX_RETRY_AFTER.as_secs_f64()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_rate_follows_completions_and_sets_retry_after() {
        let mut d = DrainRate::default();
        assert_eq!(d.retry_after(100.0, ms(0)), Duration::from_secs(1));
        for i in 0..10 {
            d.record(ms(100 * i));
        }
        assert_eq!(d.per_sec(ms(999)), 0.0);
        assert!((d.per_sec(ms(1000)) - 10.0).abs() < 1e-9);
        assert_eq!(d.retry_after(35.0, ms(1000)), Duration::from_secs(4));
        assert_eq!(d.retry_after(1e6, ms(1000)), MAX_RETRY_AFTER);
        assert_eq!(d.retry_after(0.0, ms(1000)), Duration::from_secs(1));
        // Three silent seconds pull the average down.
        let later = d.per_sec(ms(4000));
        assert!((later - 7.0).abs() < 1e-9, "{later}");
    }
}
