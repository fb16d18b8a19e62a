//! A pool's recent requests: how many ended, how many failed, and their times to first token,
//! over a sliding window of the last [`WINDOW`]. What the member status document reports as a
//! pool's error rate and P99 TTFT (`crates/control/src/member_status.rs`), where a Prometheus
//! histogram, which only ever grows, would need a second scrape and a rate to say "recently".
//!
//! Bounded whatever the traffic: [`SLOTS`] one-second slots, each a few counts and a fixed
//! log-scale histogram of [`BINS`] bins (about 6 KB in all). A record lands in the slot of its
//! second; the slot is cleared when its second comes round again, [`SLOTS`] seconds later.
//! Recording is O(1); a summary merges every slot, O([`SLOTS`] × [`BINS`]).
//!
//! Reads no clock: every call is told the time, a `Duration` on the caller's clock, so tests
//! drive it directly and the caller decides which clock counts. The caller keeps one instance
//! per pool behind a lock and records from both fronts; nothing here is shared.

use std::time::Duration;

/// The width of one slot.
const SLOT: Duration = Duration::from_secs(1);

/// Slots kept: the second now under way and the nine before it.
pub const SLOTS: usize = 10;

/// The window a summary covers: the current second (so far) and the [`SLOTS`] − 1 whole seconds
/// before it, so between 9 and 10 seconds of history.
pub const WINDOW: Duration = Duration::from_secs(SLOTS as u64);

/// Bins per doubling of the time to first token: each bin is 2^(1/8) ≈ 1.09 times as wide as
/// the one before, so a percentile read from the bins is at most 9 % above the true one (and
/// never below it).
const BINS_PER_DOUBLING: u32 = 8;

/// Doublings above 1 ms covered by bins of their own: up to 2^17 ms ≈ 131 s; anything slower
/// shares the last bin (whose estimate is the largest value seen).
const DOUBLINGS: u32 = 17;

/// Histogram bins: one under 1 ms, 17 × 8 log-scale ones (eight per doubling up to about
/// 131 s), one over the top.
pub const BINS: usize = (DOUBLINGS * BINS_PER_DOUBLING) as usize + 2;

/// The percentile a summary reports.
const PERCENTILE: f64 = 0.99;

/// The bin a time to first token falls in. Bin 0 holds everything under 1 ms; bin `k` in
/// `1..BINS - 1` holds `[2^((k-1)/8), 2^(k/8))` ms; the last bin holds the rest.
fn bin_of(ttft: Duration) -> usize {
    let ms = ttft.as_secs_f64() * 1e3;
    if ms < 1.0 {
        return 0;
    }
    // Finite and non-negative for any `Duration` of at least 1 ms.
    let k = (ms.log2() * f64::from(BINS_PER_DOUBLING)).floor() as usize + 1;
    k.min(BINS - 1)
}

/// The upper bound of bin `k` (`None` for the last, which has none).
fn upper_bound(k: usize) -> Option<Duration> {
    if k >= BINS - 1 {
        return None;
    }
    let ms = 2f64.powf(k as f64 / f64::from(BINS_PER_DOUBLING));
    Some(Duration::from_secs_f64(ms / 1e3))
}

/// One second's records.
///
/// Invariant: every count and the histogram are of records made during second `second`
/// (whole seconds since the caller's epoch); `failed <= requests`; `bins` sums to
/// `first_tokens`; `max_ttft` is the largest time recorded in `bins` (zero when none).
#[derive(Debug, Clone)]
struct Slot {
    second: u64,
    requests: u32,
    failed: u32,
    first_tokens: u32,
    max_ttft: Duration,
    bins: [u32; BINS],
}

impl Slot {
    const EMPTY: Slot = Slot {
        second: 0,
        requests: 0,
        failed: 0,
        first_tokens: 0,
        max_ttft: Duration::ZERO,
        bins: [0; BINS],
    };
}

/// A pool's requests over the last [`WINDOW`] (see the module's doc).
#[derive(Debug, Clone)]
pub struct RecentRequests {
    /// Slot `i` holds a second `s` with `s % SLOTS == i`.
    slots: Box<[Slot; SLOTS]>,
}

/// What a pool's recent requests came to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecentSummary {
    /// Requests that ended (answered or refused) within the window.
    pub requests: u64,
    /// Of those, the ones that failed: a 5xx, the gateway's own included (no endpoint, none
    /// reachable, a timeout).
    pub failed: u64,
    /// First tokens seen within the window.
    pub first_tokens: u64,
    /// The 99th percentile of those first tokens' times, at most 9 % above the true one and
    /// never above the largest seen; `None` when there were none.
    pub ttft_p99: Option<Duration>,
}

impl RecentSummary {
    /// The share of the window's requests that failed, in `0..=1`; 0 when there were none.
    pub fn error_rate(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.failed as f64 / self.requests as f64
        }
    }
}

impl Default for RecentRequests {
    fn default() -> Self {
        Self::new()
    }
}

impl RecentRequests {
    /// Nothing recorded yet.
    pub fn new() -> Self {
        Self {
            slots: Box::new([Slot::EMPTY; SLOTS]),
        }
    }

    /// Counts a request that ended at `now`; `failed`: it ended in a 5xx (or never reached a
    /// model server, which the gateway answers with one).
    pub fn record_request(&mut self, now: Duration, failed: bool) {
        if let Some(slot) = self.slot_at(now) {
            slot.requests = slot.requests.saturating_add(1);
            if failed {
                slot.failed = slot.failed.saturating_add(1);
            }
        }
    }

    /// Records a first token seen at `now`, `ttft` after its request arrived.
    pub fn record_ttft(&mut self, now: Duration, ttft: Duration) {
        if let Some(slot) = self.slot_at(now) {
            slot.first_tokens = slot.first_tokens.saturating_add(1);
            if let Some(bin) = slot.bins.get_mut(bin_of(ttft)) {
                *bin = bin.saturating_add(1);
            }
            slot.max_ttft = slot.max_ttft.max(ttft);
        }
    }

    /// What the window ending at `now` holds.
    pub fn summary(&self, now: Duration) -> RecentSummary {
        let current = second_of(now);
        let mut requests = 0u64;
        let mut failed = 0u64;
        let mut first_tokens = 0u64;
        let mut max_ttft = Duration::ZERO;
        let mut bins = [0u64; BINS];
        for slot in self.slots.iter().filter(|s| in_window(s.second, current)) {
            requests += u64::from(slot.requests);
            failed += u64::from(slot.failed);
            first_tokens += u64::from(slot.first_tokens);
            max_ttft = max_ttft.max(slot.max_ttft);
            for (sum, &n) in bins.iter_mut().zip(slot.bins.iter()) {
                *sum += u64::from(n);
            }
        }
        RecentSummary {
            requests,
            failed,
            first_tokens,
            ttft_p99: percentile(&bins, first_tokens, max_ttft),
        }
    }

    /// The slot for a record made at `now`, cleared first if it still holds an older second;
    /// `None` when it already holds a later second (a record older than the window, from a
    /// caller whose `now` was read long before it got here).
    fn slot_at(&mut self, now: Duration) -> Option<&mut Slot> {
        let second = second_of(now);
        let slot = self.slots.get_mut(ring_index(second))?;
        if slot.second < second {
            *slot = Slot {
                second,
                ..Slot::EMPTY
            };
        }
        (slot.second == second).then_some(slot)
    }
}

fn second_of(now: Duration) -> u64 {
    now.as_secs() / SLOT.as_secs()
}

fn ring_index(second: u64) -> usize {
    // The remainder is below `SLOTS`, so it fits.
    (second % SLOTS as u64) as usize
}

/// Whether a slot of `second` is within the window of the second `current`.
fn in_window(second: u64, current: u64) -> bool {
    second <= current && current - second < SLOTS as u64
}

/// The [`PERCENTILE`] of `count` times binned in `bins` (nearest rank): the upper bound of the
/// bin holding that rank, but never more than `max`, the largest time binned.
fn percentile(bins: &[u64; BINS], count: u64, max: Duration) -> Option<Duration> {
    if count == 0 {
        return None;
    }
    let rank = ((count as f64 * PERCENTILE).ceil() as u64).clamp(1, count);
    let mut seen = 0;
    for (k, &n) in bins.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(upper_bound(k).map_or(max, |b| b.min(max)));
        }
    }
    Some(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn error_rate_is_the_failed_share_of_the_windows_requests() {
        let mut r = RecentRequests::new();
        assert_eq!(r.summary(ms(0)).error_rate(), 0.0, "no requests: no errors");
        for i in 0..10 {
            r.record_request(ms(1_000 + i * 100), i < 3);
        }
        let s = r.summary(ms(2_500));
        assert_eq!((s.requests, s.failed), (10, 3));
        assert!((s.error_rate() - 0.3).abs() < 1e-12, "{}", s.error_rate());
    }

    #[test]
    fn records_leave_the_window_ten_seconds_after_their_second() {
        let mut r = RecentRequests::new();
        r.record_request(ms(1_200), true);
        r.record_ttft(ms(1_300), ms(800));
        r.record_request(ms(5_000), false);
        // The second of 1.2 s is in the window up to the end of second 10.
        let s = r.summary(ms(10_999));
        assert_eq!((s.requests, s.failed, s.first_tokens), (2, 1, 1));
        assert_eq!(s.ttft_p99, Some(ms(800)));
        let s = r.summary(ms(11_000));
        assert_eq!((s.requests, s.failed, s.first_tokens), (1, 0, 0));
        assert_eq!(s.ttft_p99, None, "no first token left in the window");
        assert_eq!(s.error_rate(), 0.0);
        let s = r.summary(ms(15_000));
        assert_eq!(s.requests, 0, "all gone ten seconds after the last");
    }

    #[test]
    fn a_slot_coming_round_again_forgets_its_old_second() {
        let mut r = RecentRequests::new();
        r.record_request(ms(3_100), true);
        // Second 13 shares second 3's slot: recording there clears it first.
        r.record_request(ms(13_100), false);
        let s = r.summary(ms(13_200));
        assert_eq!((s.requests, s.failed), (1, 0));
    }

    #[test]
    fn a_record_older_than_the_window_is_dropped() {
        let mut r = RecentRequests::new();
        r.record_request(ms(13_100), false);
        // Second 3 would land in second 13's slot; it is long gone.
        r.record_request(ms(3_100), true);
        let s = r.summary(ms(13_200));
        assert_eq!((s.requests, s.failed), (1, 0));
    }

    #[test]
    fn p99_of_a_hundred_is_the_ninety_ninth_within_a_bin() {
        let mut r = RecentRequests::new();
        for i in 1..=100 {
            r.record_ttft(ms(2_000), ms(i));
        }
        let p99 = r.summary(ms(2_000)).ttft_p99.expect("some");
        assert!(p99 >= ms(99) && p99 <= ms(100), "{p99:?}");
    }

    #[test]
    fn p99_finds_the_slow_tail_and_is_never_below_it() {
        let mut r = RecentRequests::new();
        // 98.5 % fast, 1.5 % slow: the 99th percentile is a slow one.
        for i in 0..985u64 {
            r.record_ttft(ms(1_000 + i), ms(40));
        }
        for i in 0..15u64 {
            r.record_ttft(ms(1_500 + i), ms(2_000 + i * 10));
        }
        let p99 = r.summary(ms(1_999)).ttft_p99.expect("some");
        assert!(p99 >= ms(2_000), "{p99:?}");
        assert!(p99 <= ms(2_140), "at most the largest seen: {p99:?}");
        // 99.5 % fast: the 99th percentile is a fast one, within a bin's width.
        let mut r = RecentRequests::new();
        for _ in 0..995 {
            r.record_ttft(ms(1_000), ms(40));
        }
        for _ in 0..5 {
            r.record_ttft(ms(1_000), Duration::from_secs(30));
        }
        let p99 = r.summary(ms(1_000)).ttft_p99.expect("some");
        assert!(
            p99 >= ms(40) && p99.as_secs_f64() <= 0.040 * 1.0906,
            "{p99:?}"
        );
    }

    #[test]
    fn few_samples_report_the_largest_and_extremes_stay_in_bounds() {
        let mut r = RecentRequests::new();
        for t in [120, 80, 310] {
            r.record_ttft(ms(500), ms(t));
        }
        assert_eq!(r.summary(ms(900)).ttft_p99, Some(ms(310)));
        let mut r = RecentRequests::new();
        r.record_ttft(ms(500), Duration::from_micros(200));
        assert_eq!(
            r.summary(ms(900)).ttft_p99,
            Some(Duration::from_micros(200))
        );
        let mut r = RecentRequests::new();
        r.record_ttft(ms(500), Duration::from_secs(500));
        assert_eq!(r.summary(ms(900)).ttft_p99, Some(Duration::from_secs(500)));
    }

    #[test]
    fn bins_grow_by_an_eighth_of_a_doubling() {
        assert_eq!(bin_of(Duration::ZERO), 0);
        assert_eq!(bin_of(ms(1)), 1);
        assert_eq!(bin_of(ms(2)), 9);
        assert_eq!(bin_of(Duration::from_secs(1_000)), BINS - 1);
        for k in 1..BINS - 1 {
            let upper = upper_bound(k).expect("bounded");
            let lower = upper_bound(k - 1).expect("bounded");
            let ratio = upper.as_secs_f64() / lower.as_secs_f64();
            // Bounds are whole nanoseconds: the smallest bins are a little off the exact ratio.
            assert!((ratio - 2f64.powf(0.125)).abs() < 1e-5, "bin {k}: {ratio}");
        }
        assert_eq!(upper_bound(BINS - 1), None);
    }
}
