//! Whether an endpoint's metrics still move while this gateway sends it requests.
//!
//! A model server that is working changes its `/metrics` as soon as a request reaches it (the
//! waiting and running gauges) and with every engine step after (token counters, latency
//! histograms). One whose metrics answer but stay byte-for-byte the same although this gateway
//! kept sending it requests is reporting a moment that has passed (a wedged exporter, a cache in
//! front of it, a server stuck in a state it no longer leaves). Its figures are then as old as
//! their last change, whatever the scrape's own time, and the stale filter should see them so.
//! An idle server's metrics may stay the same for hours: that is not a fault, so the window
//! opens only when a request is sent there after the last change. Sent requests, not requests
//! in flight at each scrape, because a request that starts and ends between two scrapes still
//! moves a working server's counters, and on a busy machine a pod may be between requests at
//! one scrape or another. Once frozen, the body stays frozen until it changes, work or no work:
//! the requests served meanwhile would have moved a working server's counters, so a healed
//! server shows a new body even at rest, and a broken one is not sent work again only to be
//! found out a second time.

use std::time::Duration;

/// One endpoint's watch over its scrapes.
///
/// Invariant: `unchanged_since` is when the first scrape with `fingerprint` landed, and
/// `sent_at_change` how many requests this gateway had sent the endpoint then; `sent_since`,
/// when set, is when a scrape first found more sent since, and is no earlier than
/// `unchanged_since`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProgressWatch {
    /// The last body's fingerprint; `None` before the first, or when the reader gave none.
    fingerprint: Option<u64>,
    unchanged_since: Duration,
    sent_at_change: u64,
    sent_since: Option<Duration>,
    /// Whether the last scrape was judged frozen.
    frozen: bool,
}

/// What a scrape says about the endpoint's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Its metrics changed within the window, or nothing was sent there since they last did:
    /// nothing to hold against it.
    Moving,
    /// Its metrics have not changed since `since`, though requests were sent there at least the
    /// window ago and after that change (or they were judged so and have not changed since);
    /// `newly` on the first scrape judged so.
    Frozen {
        /// When the metrics last changed.
        since: Duration,
        /// This is the first frozen scrape of the run.
        newly: bool,
    },
}

impl ProgressWatch {
    /// The watch after a scrape with `fingerprint` landed at `now`, when this gateway had sent
    /// the endpoint `sent` requests in all, and what it says; `after` is the window (zero
    /// turns the watch off: every scrape is [`Progress::Moving`]).
    pub(crate) fn observe(
        self,
        fingerprint: Option<u64>,
        sent: u64,
        now: Duration,
        after: Duration,
    ) -> (ProgressWatch, Progress) {
        let changed = fingerprint.is_none() || fingerprint != self.fingerprint;
        let watch = if changed {
            ProgressWatch {
                fingerprint,
                unchanged_since: now,
                sent_at_change: sent,
                sent_since: None,
                frozen: false,
            }
        } else {
            let sent_since = self
                .sent_since
                .or_else(|| (sent > self.sent_at_change).then_some(now));
            ProgressWatch { sent_since, ..self }
        };
        let frozen = !after.is_zero()
            && ((self.frozen && !changed)
                || watch
                    .sent_since
                    .is_some_and(|t| now.saturating_sub(t) >= after));
        let progress = if frozen {
            Progress::Frozen {
                since: watch.unchanged_since,
                newly: !self.frozen,
            }
        } else {
            Progress::Moving
        };
        (ProgressWatch { frozen, ..watch }, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(3);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Feeds scrapes every 100 ms from `from` to `to` (exclusive) with one fingerprint, the
    /// requests sent growing by `rate` a scrape from `sent`; returns the last verdict.
    fn run(
        watch: &mut ProgressWatch,
        fingerprint: Option<u64>,
        (sent, rate): (&mut u64, u64),
        from: u64,
        to: u64,
    ) -> Progress {
        let mut last = Progress::Moving;
        for t in (from..to).step_by(100) {
            *sent += rate;
            let (w, p) = watch.observe(fingerprint, *sent, ms(t), WINDOW);
            *watch = w;
            last = p;
        }
        last
    }

    #[test]
    fn metrics_that_stay_the_same_while_requests_are_sent_freeze_after_the_window() {
        let (mut w, mut sent) = (ProgressWatch::default(), 0);
        // The first scrape is the change; requests sent from the next one on.
        assert_eq!(
            run(&mut w, Some(1), (&mut sent, 2), 0, 3_100),
            Progress::Moving
        );
        let (w, p) = w.observe(Some(1), sent + 2, ms(3_100), WINDOW);
        assert_eq!(
            p,
            Progress::Frozen {
                since: ms(0),
                newly: true
            }
        );
        let (_, p) = w.observe(Some(1), sent + 4, ms(3_200), WINDOW);
        assert_eq!(
            p,
            Progress::Frozen {
                since: ms(0),
                newly: false
            }
        );
    }

    #[test]
    fn an_idle_server_is_never_frozen_and_the_window_opens_with_the_first_request_sent() {
        let (mut w, mut sent) = (ProgressWatch::default(), 5);
        // An hour without a request, the same body.
        assert_eq!(
            run(&mut w, Some(7), (&mut sent, 0), 0, 3_600_000),
            Progress::Moving
        );
        // One request: the window opens now, not at the last change an hour ago, and one
        // request is enough, however briefly it was in flight.
        assert_eq!(
            run(&mut w, Some(7), (&mut sent, 1), 3_600_000, 3_600_100),
            Progress::Moving
        );
        assert_eq!(
            run(&mut w, Some(7), (&mut sent, 0), 3_600_100, 3_603_000),
            Progress::Moving
        );
        let (_, p) = w.observe(Some(7), sent, ms(3_603_000), WINDOW);
        assert_eq!(
            p,
            Progress::Frozen {
                since: ms(0),
                newly: true
            }
        );
    }

    #[test]
    fn a_change_restarts_the_window() {
        let (mut w, mut sent) = (ProgressWatch::default(), 0);
        assert_eq!(
            run(&mut w, Some(1), (&mut sent, 1), 0, 2_900),
            Progress::Moving
        );
        assert_eq!(
            run(&mut w, Some(2), (&mut sent, 1), 2_900, 5_900),
            Progress::Moving
        );
        let (_, p) = w.observe(Some(2), sent + 1, ms(6_000), WINDOW);
        assert!(matches!(p, Progress::Frozen { since, .. } if since == ms(2_900)));
    }

    #[test]
    fn a_frozen_body_stays_frozen_at_rest_until_it_changes() {
        let (mut w, mut sent) = (ProgressWatch::default(), 0);
        run(&mut w, Some(1), (&mut sent, 3), 0, 3_200);
        // Nothing is sent any more (the stale filter keeps it out), the body is the same:
        // still frozen.
        let p = run(&mut w, Some(1), (&mut sent, 0), 3_200, 60_000);
        assert_eq!(
            p,
            Progress::Frozen {
                since: ms(0),
                newly: false
            }
        );
        // A healed server's body differs: moving at once, and judged afresh from then on.
        assert_eq!(
            run(&mut w, Some(2), (&mut sent, 0), 60_000, 60_100),
            Progress::Moving
        );
        assert_eq!(
            run(&mut w, Some(2), (&mut sent, 1), 60_100, 63_000),
            Progress::Moving
        );
    }

    #[test]
    fn a_moving_body_or_one_without_a_fingerprint_or_a_zero_window_never_freezes() {
        let mut w = ProgressWatch::default();
        for t in 0..100u64 {
            let (next, p) = w.observe(Some(t), t * 5, ms(t * 100), WINDOW);
            assert_eq!(p, Progress::Moving);
            w = next;
        }
        let (mut w, mut sent) = (ProgressWatch::default(), 0);
        assert_eq!(
            run(&mut w, None, (&mut sent, 5), 0, 10_000),
            Progress::Moving
        );
        let mut w = ProgressWatch::default();
        for t in (0..10_000).step_by(100) {
            let (next, p) = w.observe(Some(1), t, ms(t), Duration::ZERO);
            assert_eq!(p, Progress::Moving);
            w = next;
        }
    }
}
