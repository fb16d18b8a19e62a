//! A pool's timeouts on the way to an answer (`spec.schedulers[]`): `routeTimeout` until the
//! answer begins, `firstByteTimeout` for each attempt at an endpoint (after which `infergate
//! serve` tries the next one while nothing has reached the client), and `streamIdleTimeout`
//! between the chunks of an answer that has begun — so a healthy long stream is never cut.
//! `docs/reliability.md` says what a client sees at each.

use std::fmt;
use std::time::Duration;

use super::defaults;
use super::duration::GatewayDuration;
use super::scheduler::FirstByteTimeout;
use super::setting::Setting;

/// `auto`: the predicted TTFT times this, plus [`AUTO_SLACK`]: the latency model's error is far
/// smaller than 4×, so a healthy endpoint is not timed out; a hung one is, within a few of its
/// usual TTFTs.
pub const AUTO_FACTOR: u32 = 4;
/// `auto`: added to the scaled prediction, for the network and a cold engine's first step.
pub const AUTO_SLACK: Duration = Duration::from_secs(2);
/// `auto`: never shorter than this.
pub const AUTO_FLOOR: Duration = Duration::from_secs(5);
/// `auto` while the latency model has learned nothing (no endpoint of the pool has answered
/// enough requests to be warm): a prediction would be the defaults'.
pub const AUTO_UNINFORMED: Duration = Duration::from_secs(30);

impl FirstByteTimeout {
    /// The timeout of one attempt, given the TTFT the picker predicted for the request at that
    /// endpoint (`None` while it has learned nothing) and whether the request is streamed.
    /// `None`: no timeout. `auto` times streamed requests only, because a buffered answer's
    /// first byte comes only with its whole completion, which a TTFT does not bound.
    pub fn for_attempt(self, predicted_ttft: Option<Duration>, streamed: bool) -> Option<Duration> {
        match self {
            FirstByteTimeout::After(d) => Some(d).filter(|d| !d.is_zero()),
            FirstByteTimeout::Auto if !streamed => None,
            FirstByteTimeout::Auto => Some(predicted_ttft.map_or(AUTO_UNINFORMED, |p| {
                p.saturating_mul(AUTO_FACTOR)
                    .saturating_add(AUTO_SLACK)
                    .max(AUTO_FLOOR)
            })),
        }
    }
}

impl fmt::Display for FirstByteTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FirstByteTimeout::Auto => write!(
                f,
                "auto (streamed requests: {AUTO_FACTOR} × the predicted TTFT + {:?}, at least \
                 {:?}; {:?} until the latency model has learned)",
                AUTO_SLACK, AUTO_FLOOR, AUTO_UNINFORMED
            ),
            FirstByteTimeout::After(d) if d.is_zero() => f.write_str("none (0s)"),
            FirstByteTimeout::After(d) => write!(f, "{d:?}"),
        }
    }
}

/// A pool's timeouts with every default applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedTimeouts {
    /// Arrival (queueing included) until the answer's first byte; `None`: no limit.
    pub route: Setting<Option<Duration>>,
    /// Each attempt, dispatch until its first byte.
    pub first_byte: Setting<FirstByteTimeout>,
    /// Between two chunks of an answer that has begun; zero: no limit.
    pub stream_idle: Setting<Duration>,
}

impl ResolvedTimeouts {
    /// Resolves the three fields as written.
    pub fn new(
        route: Option<GatewayDuration>,
        first_byte: Option<FirstByteTimeout>,
        stream_idle: Option<GatewayDuration>,
    ) -> Self {
        ResolvedTimeouts {
            route: match route {
                None => Setting::default_value(None),
                Some(t) if t.is_zero() => Setting::set(None),
                Some(t) => Setting::set(Some(t.get())),
            },
            first_byte: Setting::or(first_byte, FirstByteTimeout::Auto),
            stream_idle: Setting::or(
                stream_idle.map(GatewayDuration::get),
                defaults::STREAM_IDLE_TIMEOUT,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Holder {
        t: FirstByteTimeout,
    }

    #[test]
    fn first_byte_reads_auto_or_a_duration_and_names_both_when_wrong() {
        let read = |y: &str| serde_norway::from_str::<Holder>(y).map(|h| h.t);
        assert_eq!(read("t: auto").unwrap(), FirstByteTimeout::Auto);
        assert_eq!(
            read("t: 750ms").unwrap(),
            FirstByteTimeout::After(Duration::from_millis(750))
        );
        assert_eq!(
            read("t: 0s").unwrap(),
            FirstByteTimeout::After(Duration::ZERO)
        );
        let e = read("t: soon").unwrap_err().to_string();
        assert!(e.contains("not a duration") && e.contains("`auto`"), "{e}");
    }

    #[test]
    fn auto_scales_the_prediction_for_streams_and_leaves_buffered_answers_alone() {
        let auto = FirstByteTimeout::Auto;
        let s = Duration::from_secs;
        assert_eq!(auto.for_attempt(Some(s(3)), true), Some(s(14)));
        assert_eq!(
            auto.for_attempt(Some(Duration::from_millis(100)), true),
            Some(AUTO_FLOOR)
        );
        assert_eq!(auto.for_attempt(None, true), Some(AUTO_UNINFORMED));
        assert_eq!(auto.for_attempt(Some(s(3)), false), None);
        let fixed = FirstByteTimeout::After(s(7));
        assert_eq!(fixed.for_attempt(None, false), Some(s(7)));
        assert_eq!(
            FirstByteTimeout::After(Duration::ZERO).for_attempt(Some(s(1)), true),
            None
        );
        assert!(auto
            .to_string()
            .starts_with("auto (streamed requests: 4 × the predicted TTFT + 2s"));
    }

    #[test]
    fn defaults_are_marked_and_zero_route_is_none() {
        let r = ResolvedTimeouts::new(None, None, None);
        assert_eq!(r.route, Setting::default_value(None));
        assert_eq!(r.first_byte, Setting::default_value(FirstByteTimeout::Auto));
        assert_eq!(
            r.stream_idle,
            Setting::default_value(defaults::STREAM_IDLE_TIMEOUT)
        );
        let z = ResolvedTimeouts::new(
            Some(GatewayDuration::from_millis(0)),
            Some(FirstByteTimeout::After(Duration::from_secs(3))),
            Some(GatewayDuration::from_millis(0)),
        );
        assert_eq!(z.route, Setting::set(None));
        assert_eq!(z.stream_idle, Setting::set(Duration::ZERO));
        assert_eq!(
            z.first_byte.value.to_string(),
            "3s",
            "a fixed value shows as written"
        );
    }
}
