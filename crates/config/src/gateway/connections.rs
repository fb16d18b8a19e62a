//! `spec.listen.connections`: how many client connections the HTTP front holds and how long a
//! connection may sit without doing its part — the limits that keep a client which sends
//! nothing, sends slowly or reads slowly from holding the gateway's descriptors.
//!
//! Each timeout is a GEP-2257 duration; `0s` turns that one off. `infergate check` shows every
//! value with its default marked; `docs/reliability.md` says what a client sees at each limit.

use std::fmt::{self, Display, Formatter};
use std::time::Duration;

use serde::Deserialize;

use super::defaults;
use super::duration::GatewayDuration;
use super::error::{invalid, GatewayConfigError};
use super::setting::Setting;

/// `spec.listen.connections`, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConnectionLimits {
    /// Client connections held at once. The listener also stays under what the process's
    /// descriptor limit allows (two descriptors a connection: the client's and the upstream's).
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// The share of `maxConnections` one source address may hold, in (0, 1].
    #[serde(default)]
    pub per_source_share: Option<f64>,
    /// A connection that sends no byte within this long of being accepted is closed.
    #[serde(default)]
    pub first_byte_timeout: Option<GatewayDuration>,
    /// An HTTP/1 request head must be complete within this long of its first byte.
    #[serde(default)]
    pub header_timeout: Option<GatewayDuration>,
    /// A request body must be read whole within this long of its head (408 after).
    #[serde(default)]
    pub body_timeout: Option<GatewayDuration>,
    /// A connection with no request in flight is closed after this long.
    #[serde(default)]
    pub idle_timeout: Option<GatewayDuration>,
    /// A connection whose client takes no byte of a response for this long is closed.
    #[serde(default)]
    pub send_timeout: Option<GatewayDuration>,
    /// HTTP/2 pings are sent this often on a quiet connection.
    #[serde(default)]
    pub http2_keep_alive_interval: Option<GatewayDuration>,
    /// An HTTP/2 ping not answered within this long closes the connection.
    #[serde(default)]
    pub http2_keep_alive_timeout: Option<GatewayDuration>,
}

/// `spec.listen.connections` with every default applied. A zero [`Duration`] is off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedConnections {
    /// Client connections held at once (before the descriptor limit lowers it).
    pub max_connections: Setting<u32>,
    /// The share of `max_connections` one source address may hold.
    pub per_source_share: Setting<f64>,
    /// First byte after accept.
    pub first_byte_timeout: Setting<Duration>,
    /// An HTTP/1 request head, from its first byte.
    pub header_timeout: Setting<Duration>,
    /// A request body, from its head.
    pub body_timeout: Setting<Duration>,
    /// No request in flight.
    pub idle_timeout: Setting<Duration>,
    /// No response byte taken by the client.
    pub send_timeout: Setting<Duration>,
    /// HTTP/2 ping interval.
    pub http2_keep_alive_interval: Setting<Duration>,
    /// HTTP/2 ping answer.
    pub http2_keep_alive_timeout: Setting<Duration>,
}

impl ResolvedConnections {
    /// Resolves `spec` (absent: every default).
    pub fn new(spec: Option<&ConnectionLimits>) -> ResolvedConnections {
        let c = spec.cloned().unwrap_or_default();
        let d = |v: Option<GatewayDuration>, default: Duration| {
            Setting::or(v.map(GatewayDuration::get), default)
        };
        ResolvedConnections {
            max_connections: Setting::or(c.max_connections, defaults::MAX_CONNECTIONS),
            per_source_share: Setting::or(c.per_source_share, defaults::PER_SOURCE_SHARE),
            first_byte_timeout: d(c.first_byte_timeout, defaults::FIRST_BYTE_TIMEOUT),
            header_timeout: d(c.header_timeout, defaults::HEADER_TIMEOUT),
            body_timeout: d(c.body_timeout, defaults::BODY_TIMEOUT),
            idle_timeout: d(c.idle_timeout, defaults::IDLE_TIMEOUT),
            send_timeout: d(c.send_timeout, defaults::SEND_TIMEOUT),
            http2_keep_alive_interval: d(
                c.http2_keep_alive_interval,
                defaults::HTTP2_KEEP_ALIVE_INTERVAL,
            ),
            http2_keep_alive_timeout: d(
                c.http2_keep_alive_timeout,
                defaults::HTTP2_KEEP_ALIVE_TIMEOUT,
            ),
        }
    }

    /// Connections one source address may hold out of `max` (at least one).
    pub fn per_source_limit(&self, max: u32) -> u32 {
        let share = (f64::from(max) * self.per_source_share.value).ceil();
        // The share is in (0, 1], so the product is in (0, max].
        (share as u32).clamp(1, max.max(1))
    }
}

/// Checks `spec.listen.connections`.
pub(crate) fn check(c: &ConnectionLimits) -> Result<(), GatewayConfigError> {
    const AT: &str = "spec.listen.connections";
    if c.max_connections == Some(0) {
        return Err(invalid(
            format!("{AT}.maxConnections"),
            "must be at least 1",
        ));
    }
    if let Some(share) = c.per_source_share {
        if !(share > 0.0 && share <= 1.0) {
            return Err(invalid(
                format!("{AT}.perSourceShare"),
                format!(
                    "must be in (0, 1] (1: one address may take every connection), got {share}"
                ),
            ));
        }
    }
    if c.http2_keep_alive_interval.is_some_and(|i| !i.is_zero())
        && c.http2_keep_alive_timeout
            .is_some_and(GatewayDuration::is_zero)
    {
        return Err(invalid(
            format!("{AT}.http2KeepAliveTimeout"),
            "must be above 0s while pings are sent (http2KeepAliveInterval): an unanswered ping \
             has to end somewhen",
        ));
    }
    Ok(())
}

fn timeout(f: &mut Formatter<'_>, name: &str, s: Setting<Duration>) -> fmt::Result {
    let value = s.map(|d| {
        if d.is_zero() {
            "off".to_owned()
        } else {
            GatewayDuration::from_duration(d).to_string()
        }
    });
    write!(f, "{name} {value}")
}

impl Display for ResolvedConnections {
    /// One line for `infergate check`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "maxConnections {}, perSourceShare {}; ",
            self.max_connections, self.per_source_share
        )?;
        timeout(f, "firstByte", self.first_byte_timeout)?;
        f.write_str(", ")?;
        timeout(f, "header", self.header_timeout)?;
        f.write_str(", ")?;
        timeout(f, "body", self.body_timeout)?;
        f.write_str(", ")?;
        timeout(f, "idle", self.idle_timeout)?;
        f.write_str(", ")?;
        timeout(f, "send", self.send_timeout)?;
        f.write_str("; h2 ping ")?;
        timeout(f, "every", self.http2_keep_alive_interval)?;
        f.write_str(", ")?;
        timeout(f, "answer within", self.http2_keep_alive_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_values_resolve_and_zero_turns_a_timeout_off() {
        let spec: ConnectionLimits = serde_norway::from_str(
            "maxConnections: 600\nperSourceShare: 0.25\nidleTimeout: 0s\nheaderTimeout: 2s\n",
        )
        .unwrap();
        check(&spec).unwrap();
        let r = ResolvedConnections::new(Some(&spec));
        assert_eq!(r.max_connections, Setting::set(600));
        assert_eq!(r.idle_timeout, Setting::set(Duration::ZERO));
        assert_eq!(r.header_timeout, Setting::set(Duration::from_secs(2)));
        assert_eq!(
            r.first_byte_timeout,
            Setting::default_value(defaults::FIRST_BYTE_TIMEOUT)
        );
        assert_eq!(r.per_source_limit(600), 150);
        let shown = r.to_string();
        assert!(shown.contains("idle off"), "{shown}");
        assert!(shown.contains("header 2s,"), "{shown}");
        assert!(shown.contains("firstByte 10s (default)"), "{shown}");
    }

    #[test]
    fn a_source_always_gets_at_least_one_connection() {
        let r = ResolvedConnections::new(None);
        assert_eq!(r.per_source_limit(1), 1);
        assert_eq!(r.per_source_limit(3), 2);
        assert_eq!(r.per_source_limit(0), 1);
    }

    #[test]
    fn an_unknown_field_is_refused() {
        let err = serde_norway::from_str::<ConnectionLimits>("maxConns: 5\n").unwrap_err();
        assert!(err.to_string().contains("maxConns"), "{err}");
    }
}
