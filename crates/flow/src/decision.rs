//! What flow control answers: dispatch now, wait in a queue, or a refusal that knows its HTTP
//! status, its `x-llm-d-request-dropped-reason` and its Retry-After.

use std::time::Duration;

use infergate_config::gateway::Band;

/// The caller's name for a request; unique among the requests a controller holds.
pub type RequestId = u64;

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Sheddable and the pool is saturated (429).
    Saturated,
    /// Its band's queue, or every band's together, is full (429).
    QueueFull,
    /// Queued, then pushed out of a full queue by a request of a higher band (429).
    Displaced,
    /// Waited in the queue for its band's whole TTL (503).
    TtlExpired,
    /// Waited longer than the overload wait while its band's queue has not emptied for the
    /// overload interval: the pool is over capacity, not in a burst (429).
    Overloaded,
}

impl DropReason {
    /// Every reason.
    pub const ALL: [DropReason; 5] = [
        DropReason::Saturated,
        DropReason::QueueFull,
        DropReason::Displaced,
        DropReason::TtlExpired,
        DropReason::Overloaded,
    ];

    /// The `x-llm-d-request-dropped-reason` value.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Saturated => "rejected-saturated",
            DropReason::QueueFull => "rejected-queue-full",
            DropReason::Displaced => "rejected-displaced",
            DropReason::TtlExpired => "rejected-ttl-expired",
            DropReason::Overloaded => "rejected-overloaded",
        }
    }

    /// The HTTP status a client gets: 429 when coming back later helps, 503 when the request
    /// waited and no capacity came.
    pub fn status(self) -> u16 {
        match self {
            DropReason::TtlExpired => 503,
            DropReason::Saturated
            | DropReason::QueueFull
            | DropReason::Displaced
            | DropReason::Overloaded => 429,
        }
    }
}

/// A refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    /// Why.
    pub reason: DropReason,
    /// When to come back, in whole seconds (at least 1), derived from the pool's observed drain
    /// rate; set on every 429, never on a 503.
    pub retry_after: Option<Duration>,
}

impl Rejection {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.reason.status()
    }
}

/// The answer to [`crate::FlowController::enqueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go on to pick and dispatch now; report its end with
    /// [`crate::FlowController::on_complete`].
    DispatchNow,
    /// Wait: a later [`crate::FlowController::poll`] says what becomes of it, at the latest at
    /// `deadline`.
    Queued {
        /// When its queue TTL runs out.
        deadline: Duration,
    },
    /// Refused at once.
    Rejected(Rejection),
}

/// What becomes of a queued request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Leave the queue and go on to pick and dispatch.
    Dispatch,
    /// Leave the queue refused.
    Reject(Rejection),
}

/// One queued request's outcome, from [`crate::FlowController::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The request.
    pub id: RequestId,
    /// Its band.
    pub band: Band,
    /// How long it waited in the queue.
    pub waited: Duration,
    /// What becomes of it.
    pub outcome: Outcome,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_the_status_and_header_value_clients_see() {
        let cases = [
            (DropReason::Saturated, 429, "rejected-saturated"),
            (DropReason::QueueFull, 429, "rejected-queue-full"),
            (DropReason::Displaced, 429, "rejected-displaced"),
            (DropReason::TtlExpired, 503, "rejected-ttl-expired"),
            (DropReason::Overloaded, 429, "rejected-overloaded"),
        ];
        for (reason, status, header) in cases {
            assert_eq!((reason.status(), reason.as_str()), (status, header));
        }
    }
}
