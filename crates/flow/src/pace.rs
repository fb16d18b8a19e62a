//! An endpoint's recent decode pace: the mean gap between the tokens its model server produced
//! over about the last [`PACE_WINDOW`], from the running totals of the server's inter-token
//! latency histogram at each scrape.
//!
//! One scrape's difference is too short a look: at the default 50 ms interval it spans one or
//! two engine steps, and one step that carries a long prefill chunk reads as a slow decode. A
//! request's time per output token averages over its whole decode, seconds long, so the signal
//! that predicts it averages over seconds too.

use std::collections::VecDeque;
use std::time::Duration;

/// How far back the pace looks: the oldest scrape kept is the newest one at least this old.
pub const PACE_WINDOW: Duration = Duration::from_secs(1);

/// Scrapes kept at most, whatever the interval; a faster scraper's window is then shorter.
const MAX_SAMPLES: usize = 128;

/// The scrapes of one endpoint inside the window: when each landed, and the histogram's `_sum`
/// (seconds) and `_count` then.
///
/// Invariant: times and both totals never decrease from front to back (a decrease — a
/// restarted server, a replaced pod behind the same address — starts the window again).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecentPace {
    samples: VecDeque<(Duration, f64, u64)>,
}

impl RecentPace {
    /// An empty window: no pace known.
    pub fn new() -> Self {
        Self::default()
    }

    /// A scrape landed at `at` with the histogram's running totals `seconds` and `count`.
    pub fn record(&mut self, at: Duration, seconds: f64, count: u64) {
        if !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        if let Some(&(t, s, c)) = self.samples.back() {
            if at < t || seconds < s || count < c {
                self.samples.clear();
            } else if at == t {
                // The same scrape read twice: keep one.
                self.samples.pop_back();
            }
        }
        self.samples.push_back((at, seconds, count));
        while self.samples.len() > MAX_SAMPLES
            || (self.samples.len() > 2
                && self
                    .samples
                    .get(1)
                    .is_some_and(|&(t, _, _)| at.saturating_sub(t) >= PACE_WINDOW))
        {
            self.samples.pop_front();
        }
    }

    /// The mean inter-token latency in seconds over the window; `None` until two scrapes with
    /// tokens between them have landed (an idle server has no pace, not a fast one).
    pub fn mean_seconds(&self) -> Option<f64> {
        let (&(_, s0, c0), &(_, s1, c1)) = (self.samples.front()?, self.samples.back()?);
        (c1 > c0).then(|| (s1 - s0) / (c1 - c0) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_pace_is_the_mean_gap_over_the_last_second() {
        let mut p = RecentPace::new();
        assert_eq!(p.mean_seconds(), None);
        p.record(Duration::ZERO, 10.0, 100);
        assert_eq!(p.mean_seconds(), None);
        // 100 tokens at 20 ms, then 100 at 100 ms: the mean over both is 60 ms.
        p.record(500 * MS, 12.0, 200);
        p.record(1_000 * MS, 22.0, 300);
        assert!((p.mean_seconds().unwrap() - 0.06).abs() < 1e-12);
        // A second on, the first half-second has left the window: 100 ms per token.
        p.record(1_500 * MS, 32.0, 400);
        assert!((p.mean_seconds().unwrap() - 0.1).abs() < 1e-12);
    }

    #[test]
    fn an_idle_server_has_no_pace() {
        let mut p = RecentPace::new();
        p.record(Duration::ZERO, 5.0, 50);
        p.record(50 * MS, 5.0, 50);
        assert_eq!(p.mean_seconds(), None);
    }

    #[test]
    fn totals_that_fall_start_the_window_again() {
        let mut p = RecentPace::new();
        p.record(Duration::ZERO, 100.0, 1_000);
        p.record(50 * MS, 101.0, 1_010);
        // The server restarted: its counters began again from zero.
        p.record(100 * MS, 0.5, 10);
        assert_eq!(p.mean_seconds(), None);
        p.record(150 * MS, 1.0, 20);
        assert!((p.mean_seconds().unwrap() - 0.05).abs() < 1e-12);
    }

    #[test]
    fn the_same_scrape_twice_counts_once_and_the_window_stays_bounded() {
        let mut p = RecentPace::new();
        p.record(Duration::ZERO, 0.0, 0);
        p.record(10 * MS, 1.0, 10);
        p.record(10 * MS, 1.0, 10);
        assert!((p.mean_seconds().unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(p.samples.len(), 2);
        for i in 0..10_000u64 {
            p.record(
                Duration::from_micros(2_000 + i * 100),
                2.0 + i as f64,
                20 + i * 10,
            );
        }
        assert!(p.samples.len() <= MAX_SAMPLES);
        assert!((p.mean_seconds().unwrap() - 0.1).abs() < 1e-9);
    }
}
