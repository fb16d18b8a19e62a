//! The figures of a speed measurement: quantiles of one round, and the median of several.

use std::fmt;
use std::time::Duration;

/// Quantiles of the decision time over the measured requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionTimes {
    /// Endpoints in the pool.
    pub endpoints: usize,
    /// Decisions timed (after the untimed warm-up ones).
    pub requests: usize,
    /// Median time of one decision: hashing the prompt, filters, scorers, selection.
    pub p50: Duration,
    /// 99th percentile of the same.
    pub p99: Duration,
    /// The slowest decision.
    pub max: Duration,
    /// Mean decision time.
    pub mean: Duration,
    /// Median time of hashing the prompt, the first step of the decision: the blocks the memo
    /// does not hold, and comparing those it does.
    pub hash_p50: Duration,
    /// 99th percentile of the same.
    pub hash_p99: Duration,
    /// Median time of recording the dispatch afterwards (index learning, counters), which the
    /// gateway pays per request too but off the decision's latency.
    pub dispatch_p50: Duration,
    /// 99th percentile of the same.
    pub dispatch_p99: Duration,
    /// The slowest dispatch: where a growing index shows its pauses (a rehash of its table), which
    /// the gateway pays inside the pool's picker lock.
    pub dispatch_max: Duration,
    /// Share of decisions whose primary held at least one block of the prompt: how warm the
    /// index was, so a run that accidentally measured a cold index shows it.
    pub prefix_hit_share: f64,
    /// Share of the prompts' block hashes taken from the hash memo rather than computed.
    pub memo_share: f64,
}

impl DecisionTimes {
    /// The median in microseconds.
    pub fn p50_us(&self) -> f64 {
        micros(self.p50)
    }

    /// The 99th percentile in microseconds.
    pub fn p99_us(&self) -> f64 {
        micros(self.p99)
    }

    /// One JSON object on one line: `{"endpoints": N, "p50_us": …, "p99_us": …}`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"endpoints\": {}, \"p50_us\": {:.2}, \"p99_us\": {:.2}}}",
            self.endpoints,
            self.p50_us(),
            self.p99_us()
        )
    }
}

impl fmt::Display for DecisionTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>6} endpoints: decision p50 {:.2} µs, p99 {:.2} µs, max {:.2} µs, mean {:.2} µs \
             ({} requests, {:.0} % prefix hits); of which hashing p50 {:.2} µs, p99 {:.2} µs \
             ({:.0} % of blocks from the memo); dispatch p50 {:.2} µs, p99 {:.2} µs, max {:.2} µs",
            self.endpoints,
            self.p50_us(),
            self.p99_us(),
            micros(self.max),
            micros(self.mean),
            self.requests,
            100.0 * self.prefix_hit_share,
            micros(self.hash_p50),
            micros(self.hash_p99),
            100.0 * self.memo_share,
            micros(self.dispatch_p50),
            micros(self.dispatch_p99),
            micros(self.dispatch_max),
        )
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The figures of every round of [`super::measure_rounds`] (at least one).
#[derive(Debug, Clone, PartialEq)]
pub struct Rounds {
    /// One entry per round, in the order they ran.
    pub rounds: Vec<DecisionTimes>,
}

impl Rounds {
    /// The median round, figure by figure: each quantile (and the mean, the maximum and the
    /// shares) is the median of that figure over the rounds; the upper median for an even count.
    /// `requests` is the requests of one round. The exception is `dispatch_max`, the slowest
    /// dispatch of any round: a pause that happens once a run must not be hidden by a median.
    pub fn median(&self) -> DecisionTimes {
        let med = |f: &dyn Fn(&DecisionTimes) -> Duration| {
            let mut v: Vec<Duration> = self.rounds.iter().map(f).collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or_default()
        };
        let share = |f: &dyn Fn(&DecisionTimes) -> f64| {
            let mut v: Vec<f64> = self.rounds.iter().map(f).collect();
            v.sort_unstable_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        let first = self.rounds.first();
        DecisionTimes {
            endpoints: first.map_or(0, |r| r.endpoints),
            requests: first.map_or(0, |r| r.requests),
            p50: med(&|r| r.p50),
            p99: med(&|r| r.p99),
            max: med(&|r| r.max),
            mean: med(&|r| r.mean),
            hash_p50: med(&|r| r.hash_p50),
            hash_p99: med(&|r| r.hash_p99),
            dispatch_p50: med(&|r| r.dispatch_p50),
            dispatch_p99: med(&|r| r.dispatch_p99),
            dispatch_max: self
                .rounds
                .iter()
                .map(|r| r.dispatch_max)
                .max()
                .unwrap_or_default(),
            prefix_hit_share: share(&|r| r.prefix_hit_share),
            memo_share: share(&|r| r.memo_share),
        }
    }

    /// The lowest and the highest p99 of the rounds.
    pub fn p99_range(&self) -> (Duration, Duration) {
        let p99s = self.rounds.iter().map(|r| r.p99);
        (
            p99s.clone().min().unwrap_or_default(),
            p99s.max().unwrap_or_default(),
        )
    }

    /// One JSON object on one line: `{"endpoints": N, "p50_us": …, "p99_us": …, "rounds": R,
    /// "requests_per_round": M}`, the quantiles those of the median round.
    pub fn to_json(&self) -> String {
        let m = self.median();
        format!(
            "{{\"endpoints\": {}, \"p50_us\": {:.2}, \"p99_us\": {:.2}, \"rounds\": {}, \
             \"requests_per_round\": {}}}",
            m.endpoints,
            m.p50_us(),
            m.p99_us(),
            self.rounds.len(),
            m.requests
        )
    }
}

impl fmt::Display for Rounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (lo, hi) = self.p99_range();
        write!(
            f,
            "{}; median of {} rounds, p99 per round {:.2}–{:.2} µs",
            self.median(),
            self.rounds.len(),
            micros(lo),
            micros(hi)
        )
    }
}

/// Nearest-rank quantile of sorted `values`; zero when empty.
pub(super) fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let n = sorted.len();
    if n == 0 {
        return Duration::ZERO;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted.get(rank - 1).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_report_the_median_round_and_the_spread_of_p99() {
        let us = Duration::from_micros;
        let round = |p50: u64, p99: u64| DecisionTimes {
            endpoints: 10,
            requests: 100,
            p50: us(p50),
            p99: us(p99),
            max: us(p99 * 2),
            mean: us(p50),
            hash_p50: us(p50 / 2),
            hash_p99: us(p99 / 2),
            dispatch_p50: us(1),
            dispatch_p99: us(2),
            dispatch_max: us(p99 * 3),
            prefix_hit_share: 0.5,
            memo_share: 0.4,
        };
        let r = Rounds {
            rounds: vec![round(4, 9), round(6, 30), round(5, 8)],
        };
        let m = r.median();
        // Figure by figure: the p50 of one round and the p99 of another may be the medians.
        assert_eq!((m.p50, m.p99, m.max), (us(5), us(9), us(18)));
        assert_eq!((m.hash_p50, m.hash_p99), (us(2), us(4)));
        // The slowest dispatch of all rounds, not the median round's.
        assert_eq!(m.dispatch_max, us(90));
        assert_eq!(r.p99_range(), (us(8), us(30)));
        assert_eq!(
            r.to_json(),
            r#"{"endpoints": 10, "p50_us": 5.00, "p99_us": 9.00, "rounds": 3, "requests_per_round": 100}"#
        );
        assert!(r
            .to_string()
            .ends_with("median of 3 rounds, p99 per round 8.00–30.00 µs"));
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=200).map(Duration::from_micros).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_micros(100));
        assert_eq!(quantile(&v, 0.99), Duration::from_micros(198));
        assert_eq!(quantile(&[], 0.99), Duration::ZERO);
    }
}
