//! Why one attempt at an endpoint did not produce an answer for the client, decided where the
//! failure is understood (pingora's `RetryType`): each failure knows whether another endpoint
//! may be tried and the reason the retry metric names, so the proxy's loop stays dumb.

use std::fmt;
use std::time::Duration;

use infergate_control::error_chain;
use infergate_control::pool::RetryReason;
use infergate_picker::PickError;

use super::keepalive::UpstreamError;

/// One attempt that failed before the first response byte.
#[derive(Debug)]
pub enum Failure {
    /// The fallback could not be dispatched to (the picker refused it); nothing was sent.
    Dispatch(PickError),
    /// The upstream request could not be built for this endpoint (its address is not an
    /// authority); nothing was sent.
    Request {
        /// The endpoint.
        address: String,
        /// What was wrong.
        cause: hyper::http::Error,
    },
    /// No answer over HTTP/1.1: connect refused or timed out, reset, closed before the head.
    Http1(UpstreamError),
    /// No answer over h2c.
    H2c {
        /// The endpoint.
        address: String,
        /// The client's error, with its causes.
        cause: String,
    },
    /// The endpoint answered 503: overloaded, starting up or shutting down.
    Unavailable {
        /// The endpoint.
        address: String,
    },
    /// The answer's head came, then its body broke before its first byte.
    Broken {
        /// The endpoint.
        address: String,
        /// The body's error, with its causes.
        cause: String,
    },
    /// No first byte within the attempt's `firstByteTimeout`; the connection is closed, which
    /// makes a model server abort the request.
    FirstByteTimeout {
        /// The endpoint.
        address: String,
        /// The timeout that passed.
        after: Duration,
    },
}

impl Failure {
    /// Whether the request may go on to the next endpoint. Every failure here happened before
    /// the client saw a byte and concerns one endpoint only, so another may answer; an
    /// endpoint's other answers (a 429 "no capacity" included) are never failures: they go to
    /// the client as they are.
    pub fn retryable(&self) -> bool {
        match self {
            Failure::Dispatch(_)
            | Failure::Request { .. }
            | Failure::Http1(_)
            | Failure::H2c { .. }
            | Failure::Unavailable { .. }
            | Failure::Broken { .. }
            | Failure::FirstByteTimeout { .. } => true,
        }
    }

    /// The attempt span's `error.type`: the retry metric's reason for a request that was
    /// sent, else what stopped it being sent.
    pub fn kind(&self) -> &'static str {
        match (self.reason(), self) {
            (Some(reason), _) => reason.as_str(),
            (None, Failure::Dispatch(_)) => "dispatch_refused",
            (None, _) => "bad_upstream_request",
        }
    }

    /// The `reason` label of `infergate_upstream_retries_total`, for failures after a request
    /// was sent; `None` for those where nothing reached the endpoint.
    pub fn reason(&self) -> Option<RetryReason> {
        match self {
            Failure::Dispatch(_) | Failure::Request { .. } => None,
            Failure::Http1(_) | Failure::H2c { .. } | Failure::Broken { .. } => {
                Some(RetryReason::Connect)
            }
            Failure::Unavailable { .. } => Some(RetryReason::Unavailable),
            Failure::FirstByteTimeout { .. } => Some(RetryReason::FirstByteTimeout),
        }
    }

    /// Whether the endpoint itself failed, for outlier detection: it refused or broke the
    /// connection, answered 503, or sent no first byte in time. Not when the gateway could not
    /// dispatch or build the request — the endpoint never saw it.
    pub fn endpoint_failed(&self) -> bool {
        matches!(
            self,
            Failure::Http1(_)
                | Failure::H2c { .. }
                | Failure::Unavailable { .. }
                | Failure::Broken { .. }
                | Failure::FirstByteTimeout { .. }
        )
    }

    /// Whether an endpoint was tried: the request was built for it and sent, or about to be.
    pub fn tried(&self) -> bool {
        !matches!(self, Failure::Dispatch(_))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Dispatch(e) => write!(f, "{e}"),
            Failure::Request { address, cause } => write!(f, "{address}: {cause}"),
            // The error names the endpoint.
            Failure::Http1(e) => f.write_str(&error_chain(e)),
            Failure::H2c { address, cause } => write!(f, "{address}: {cause}"),
            Failure::Unavailable { address } => write!(f, "{address} answered 503"),
            Failure::Broken { address, cause } => {
                write!(
                    f,
                    "{address}: the answer broke before its first byte: {cause}"
                )
            }
            Failure::FirstByteTimeout { address, after } => {
                write!(f, "{address}: no first byte within {after:?}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_names_its_endpoint_and_its_retry_reason() {
        let refused = Failure::Http1(UpstreamError::ConnectTimeout {
            address: "10.0.0.1:8000".into(),
        });
        assert_eq!(refused.reason().map(RetryReason::as_str), Some("connect"));
        assert!(refused.to_string().contains("10.0.0.1:8000"), "{refused}");
        let busy = Failure::Unavailable {
            address: "10.0.0.2:8000".into(),
        };
        assert_eq!(busy.reason().map(RetryReason::as_str), Some("status_503"));
        assert_eq!(busy.to_string(), "10.0.0.2:8000 answered 503");
        let h2 = Failure::H2c {
            address: "10.0.0.3:8000".into(),
            cause: "connection reset".into(),
        };
        assert_eq!(h2.reason().map(RetryReason::as_str), Some("connect"));
        assert_eq!(h2.to_string(), "10.0.0.3:8000: connection reset");
        let slow = Failure::FirstByteTimeout {
            address: "10.0.0.4:8000".into(),
            after: Duration::from_secs(5),
        };
        assert_eq!(
            slow.reason().map(RetryReason::as_str),
            Some("first_byte_timeout")
        );
        assert_eq!(slow.to_string(), "10.0.0.4:8000: no first byte within 5s");
        for f in [&refused, &busy, &h2, &slow] {
            assert!(f.retryable() && f.tried() && f.endpoint_failed(), "{f}");
        }
    }

    #[test]
    fn a_failure_before_sending_is_not_counted_as_a_retry() {
        let bad = hyper::http::uri::Authority::try_from("not an authority").unwrap_err();
        let request = Failure::Request {
            address: "not an authority".into(),
            cause: bad.into(),
        };
        assert_eq!(request.reason(), None);
        assert!(request.tried() && request.retryable());
        let dispatch = Failure::Dispatch(PickError::EmptyPool);
        assert_eq!(dispatch.reason(), None);
        assert!(!dispatch.tried() && dispatch.retryable());
    }
}
