//! When a connection has overstayed: a pure function of what the connection did and the
//! timeouts, so every rule is tested without a socket or a clock.

use infergate_telemetry::connections::CloseReason;

/// What a connection has done, in milliseconds on the listener's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// When it was accepted.
    pub accepted_ms: u64,
    /// Bytes read from the client so far.
    pub bytes_read: u64,
    /// Requests whose response has not ended.
    pub in_flight: u32,
    /// When its last request ended (the accept, before the first).
    pub idle_since_ms: u64,
    /// When the first byte of an HTTP/1 request head not yet complete arrived.
    pub head_started_ms: Option<u64>,
    /// Since when the client has taken no byte of what the gateway is writing.
    pub write_blocked_since_ms: Option<u64>,
}

/// The timeouts in milliseconds; `None` is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeouts {
    /// No byte after the accept.
    pub first_byte: Option<u64>,
    /// An HTTP/1 head, from its first byte.
    pub header: Option<u64>,
    /// No request in flight.
    pub idle: Option<u64>,
    /// No response byte taken.
    pub send: Option<u64>,
}

/// What the watchdog does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Close the connection now.
    Close(CloseReason),
    /// Look again at this time, or sooner if the connection's activity says so.
    CheckAt(u64),
    /// Nothing can expire until the activity changes.
    Wait,
}

/// The verdict at `now`. Of several deadlines the earliest decides; a request in flight
/// suspends the idle and head clocks (its own body and the route have their own limits), never
/// the send clock.
pub fn verdict(s: &Snapshot, t: &Timeouts, now: u64) -> Verdict {
    let mut earliest: Option<(u64, CloseReason)> = None;
    let mut consider = |deadline: Option<u64>, reason| {
        if let Some(d) = deadline {
            if earliest.is_none_or(|(e, _)| d < e) {
                earliest = Some((d, reason));
            }
        }
    };
    if s.bytes_read == 0 {
        consider(
            t.first_byte.map(|f| s.accepted_ms.saturating_add(f)),
            CloseReason::FirstByteTimeout,
        );
    }
    if s.in_flight == 0 {
        consider(
            s.head_started_ms
                .zip(t.header)
                .map(|(h, d)| h.saturating_add(d)),
            CloseReason::HeaderTimeout,
        );
        consider(
            t.idle.map(|i| s.idle_since_ms.saturating_add(i)),
            CloseReason::IdleTimeout,
        );
    }
    consider(
        s.write_blocked_since_ms
            .zip(t.send)
            .map(|(w, d)| w.saturating_add(d)),
        CloseReason::SendTimeout,
    );
    match earliest {
        Some((deadline, reason)) if deadline <= now => Verdict::Close(reason),
        Some((deadline, _)) => Verdict::CheckAt(deadline),
        None => Verdict::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timeouts = Timeouts {
        first_byte: Some(10_000),
        header: Some(5_000),
        idle: Some(60_000),
        send: Some(30_000),
    };

    fn fresh() -> Snapshot {
        Snapshot {
            accepted_ms: 1_000,
            idle_since_ms: 1_000,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_silent_connection_closes_at_the_first_byte_deadline() {
        let s = fresh();
        assert_eq!(verdict(&s, &T, 5_000), Verdict::CheckAt(11_000));
        assert_eq!(
            verdict(&s, &T, 11_000),
            Verdict::Close(CloseReason::FirstByteTimeout)
        );
    }

    #[test]
    fn a_trickled_head_closes_at_the_header_deadline_not_the_idle_one() {
        let s = Snapshot {
            bytes_read: 3,
            head_started_ms: Some(2_000),
            ..fresh()
        };
        assert_eq!(verdict(&s, &T, 6_999), Verdict::CheckAt(7_000));
        assert_eq!(
            verdict(&s, &T, 7_000),
            Verdict::Close(CloseReason::HeaderTimeout)
        );
    }

    #[test]
    fn a_request_in_flight_holds_off_idle_and_head_clocks() {
        let s = Snapshot {
            bytes_read: 300,
            in_flight: 1,
            head_started_ms: Some(2_000),
            ..fresh()
        };
        assert_eq!(verdict(&s, &T, 1_000_000), Verdict::Wait);
    }

    #[test]
    fn an_idle_connection_closes_after_its_last_request() {
        let s = Snapshot {
            bytes_read: 300,
            idle_since_ms: 40_000,
            ..fresh()
        };
        assert_eq!(verdict(&s, &T, 41_000), Verdict::CheckAt(100_000));
        assert_eq!(
            verdict(&s, &T, 100_000),
            Verdict::Close(CloseReason::IdleTimeout)
        );
    }

    #[test]
    fn a_client_that_stops_reading_is_cut_even_mid_response() {
        let s = Snapshot {
            bytes_read: 300,
            in_flight: 1,
            write_blocked_since_ms: Some(10_000),
            ..fresh()
        };
        assert_eq!(verdict(&s, &T, 20_000), Verdict::CheckAt(40_000));
        assert_eq!(
            verdict(&s, &T, 40_000),
            Verdict::Close(CloseReason::SendTimeout)
        );
    }

    #[test]
    fn timeouts_that_are_off_never_fire() {
        let off = Timeouts::default();
        let s = Snapshot {
            write_blocked_since_ms: Some(0),
            head_started_ms: Some(0),
            ..fresh()
        };
        assert_eq!(verdict(&s, &off, u64::MAX), Verdict::Wait);
    }
}
