//! The HTTP front's client connections and buffered request bodies: what the listener holds
//! and every limit that closed a connection or refused a body, so an operator sees an attack
//! (or a limit set too low) as a count rather than as clients that cannot connect.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::catalog::Registrar;

/// Why the listener closed (or refused) a connection. Closes by the client, and after a
/// response on a connection the client asked to close, are not counted.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum CloseReason {
    /// No byte within `firstByteTimeout` of the accept.
    FirstByteTimeout,
    /// An HTTP/1 request head not complete within `headerTimeout` of its first byte.
    HeaderTimeout,
    /// No request in flight for `idleTimeout`.
    IdleTimeout,
    /// The client took no response byte for `sendTimeout`.
    SendTimeout,
    /// Idle, and closed to make room for a new connection at `maxConnections`.
    Evicted,
    /// Refused at accept: `maxConnections` held, none of them idle.
    RefusedAtLimit,
    /// Refused at accept: the source address holds its `perSourceShare`.
    RefusedPerSource,
}

impl CloseReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::FirstByteTimeout => "first_byte_timeout",
            CloseReason::HeaderTimeout => "header_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::SendTimeout => "send_timeout",
            CloseReason::Evicted => "evicted_idle",
            CloseReason::RefusedAtLimit => "refused_max_connections",
            CloseReason::RefusedPerSource => "refused_per_source",
        }
    }
}

/// Why a request body was refused.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum BodyRefusal {
    /// Over `maxRequestBodyBytes` (413).
    TooLarge,
    /// Would pass `maxBufferedBodyBytes` (503).
    Budget,
    /// Not read whole within `bodyTimeout` (408).
    Timeout,
}

impl BodyRefusal {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            BodyRefusal::TooLarge => "too_large",
            BodyRefusal::Budget => "budget",
            BodyRefusal::Timeout => "timeout",
        }
    }
}

/// Labels of a closed connection.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloseLabels {
    /// [`CloseReason::as_str`].
    pub reason: String,
}

/// Labels of a refused body.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BodyRefusalLabels {
    /// [`BodyRefusal::as_str`].
    pub reason: String,
}

/// The families.
#[derive(Debug, Default)]
pub struct ConnectionGauges {
    /// Client connections open now.
    pub open: Gauge,
    /// The connection limit in effect: `maxConnections`, or less where the descriptor limit
    /// holds fewer.
    pub limit: Gauge,
    /// Connections the listener closed or refused, by reason.
    pub closed: Family<CloseLabels, Counter>,
    /// Accepts that failed (out of descriptors and the like).
    pub accept_errors: Counter,
    /// Request body bytes buffered now, over every request.
    pub body_bytes_buffered: Gauge,
    /// Request bodies refused, by reason.
    pub body_refusals: Family<BodyRefusalLabels, Counter>,
}

impl ConnectionGauges {
    /// Counts a connection closed or refused for `reason`.
    pub fn closed(&self, reason: CloseReason) {
        self.closed
            .get_or_create(&CloseLabels {
                reason: reason.as_str().to_owned(),
            })
            .inc();
    }

    /// Counts a body refused for `reason`.
    pub fn body_refused(&self, reason: BodyRefusal) {
        self.body_refusals
            .get_or_create(&BodyRefusalLabels {
                reason: reason.as_str().to_owned(),
            })
            .inc();
    }

    pub(crate) fn register(&self, r: &mut Registrar<'_>) {
        r.register(
            "client_connections",
            "Client connections the inference listener holds now",
            self.open.clone(),
        );
        r.register(
            "client_connections_limit",
            "Client connections the inference listener may hold (maxConnections, or less where the descriptor limit holds fewer)",
            self.limit.clone(),
        );
        r.register(
            "client_connections_closed",
            "Client connections the listener closed or refused, by limit",
            self.closed.clone(),
        );
        r.register(
            "accept_errors",
            "Accepts on the inference listener that failed (out of descriptors and the like)",
            self.accept_errors.clone(),
        );
        r.register(
            "request_body_bytes_buffered",
            "Request body bytes the HTTP front buffers now, over every request",
            self.body_bytes_buffered.clone(),
        );
        r.register(
            "request_body_refusals",
            "Request bodies refused, by limit (too_large: 413, budget: 503, timeout: 408)",
            self.body_refusals.clone(),
        );
    }
}
