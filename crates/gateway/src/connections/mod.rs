//! The listener's client connections, each bounded in number and in time
//! (`spec.listen.connections`): the table that admits them at accept ([`table`]), each one's
//! activity and the watchdog that closes it when a clock runs out ([`activity`], with the
//! rules in [`verdict`], pure), the socket wrapper that records the activity ([`io`]), and the
//! descriptor limit under which the table's limit stays ([`descriptors`]).

pub mod activity;
pub mod descriptors;
pub mod io;
pub mod table;
pub mod verdict;

use std::time::Duration;

use infergate_config::gateway::ResolvedConnections;

pub use activity::{Activity, InFlight, Protocol, Tracked};
pub use io::WatchedIo;
pub use table::{ConnectionTable, Lease};
pub use verdict::Timeouts;

impl Timeouts {
    /// The watchdog's timeouts from the config.
    pub fn from_config(c: &ResolvedConnections) -> Timeouts {
        let ms =
            |d: Duration| (!d.is_zero()).then(|| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timeouts {
            first_byte: ms(c.first_byte_timeout.value),
            header: ms(c.header_timeout.value),
            idle: ms(c.idle_timeout.value),
            send: ms(c.send_timeout.value),
        }
    }
}

/// Logs failed accepts at most once per interval, with how many were not logged, so that a
/// listener out of descriptors does not also flood the log (an outside test saw ~90 lines a
/// second).
#[derive(Debug)]
pub struct AcceptErrorLog {
    interval: Duration,
    last: Option<tokio::time::Instant>,
    suppressed: u64,
}

impl AcceptErrorLog {
    /// At most one line per `interval`.
    pub fn new(interval: Duration) -> Self {
        AcceptErrorLog {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// Records a failed accept, logging it unless one was logged within the interval.
    pub fn record(&mut self, error: &std::io::Error) {
        let now = tokio::time::Instant::now();
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < self.interval)
        {
            self.suppressed += 1;
            return;
        }
        tracing::warn!(
            error = %error,
            not_logged_since_last = self.suppressed,
            "accept failed (infergate_accept_errors_total counts every one)"
        );
        self.last = Some(now);
        self.suppressed = 0;
    }
}
