//! Kept-alive HTTP/1.1 connections to the endpoints: one idle list per endpoint address, a
//! connection lent to one request at a time and handed back by the response body itself.
//!
//! Why not hyper-util's pooled client (still used for h2c upstreams and scrapes): for every
//! HTTP/1.1 answer whose body is still to come, it spawns a task that waits for the connection to
//! become idle and puts it back, so each request costs a task, its wake-ups and a second trip
//! through the pool's lock; and a checkout that finds no connection idle at that instant starts a
//! connect that races the one about to come back, which opens surplus connections under load.
//! Here a request takes an idle connection (or opens one), and its [`Lease`] goes back to the
//! idle list the moment the response body has been read to its end, on the task that read it.
//!
//! Invariants:
//! - a connection in an idle list has no request in flight: only a [`Lease`] whose response body
//!   ended cleanly is handed back; any other lease is dropped, and the connection closes with it;
//! - each idle list holds at most [`MAX_IDLE_PER_ENDPOINT`] connections, and connections idle
//!   longer than [`IDLE_TIMEOUT`] are closed when the list is next used;
//! - a request is sent again on a new connection only when the kept-alive one was found closed
//!   before any of it was written (hyper hands the request back), so nothing is sent twice.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a connect may take before the endpoint counts as down and the next one is tried.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Idle connections are closed after this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per endpoint; more are closed as they come back.
pub const MAX_IDLE_PER_ENDPOINT: usize = 512;
/// TCP keep-alive probes start after this much silence, so a dead peer is noticed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

type Sender = SendRequest<Full<Bytes>>;

/// Why a request got no answer from an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The TCP connect failed.
    #[error("connect to {address} failed")]
    Connect {
        /// The endpoint.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TCP connect took longer than [`CONNECT_TIMEOUT`].
    #[error("connect to {address} timed out after {CONNECT_TIMEOUT:?}")]
    ConnectTimeout {
        /// The endpoint.
        address: String,
    },
    /// The HTTP/1.1 handshake, the request or the response head failed.
    #[error("HTTP/1.1 exchange with {address} failed")]
    Http {
        /// The endpoint.
        address: String,
        /// The cause.
        #[source]
        source: hyper::Error,
    },
}

struct Idle {
    sender: Sender,
    since: Instant,
}

#[derive(Default)]
struct Lists {
    by_address: HashMap<Arc<str>, VecDeque<Idle>>,
}

/// The HTTP/1.1 upstream connections of a gateway. Cheap to clone (one shared set of lists).
#[derive(Clone, Default)]
pub struct Connections {
    lists: Arc<Mutex<Lists>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle: usize = self.lock().by_address.values().map(VecDeque::len).sum();
        f.debug_struct("Connections").field("idle", &idle).finish()
    }
}

/// A connection lent to one request. Hand it back with [`Lease::release`] once the response
/// body has been read to its end; dropping it instead closes the connection.
pub struct Lease {
    connections: Connections,
    address: Arc<str>,
    sender: Sender,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// The response was read to its end: the connection may carry the next request.
    pub fn release(self) {
        if self.sender.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut lists = self.connections.lock();
        let list = lists.by_address.entry(self.address).or_default();
        expire(list, now);
        if list.len() < MAX_IDLE_PER_ENDPOINT {
            list.push_back(Idle {
                sender: self.sender,
                since: now,
            });
        }
    }
}

/// Closes (drops) the connections at the front of `list` that have been idle too long; the
/// list is in the order the connections came back, so those are the oldest.
fn expire(list: &mut VecDeque<Idle>, now: Instant) {
    while list
        .front()
        .is_some_and(|i| now.duration_since(i.since) > IDLE_TIMEOUT)
    {
        list.pop_front();
    }
}

impl Connections {
    /// No connections yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Lists> {
        // The lists hold only idle connections; a panic elsewhere cannot leave one half-made.
        self.lists.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently returned idle connection to `address` that is still open, with the
    /// address's shared key.
    fn take_idle(&self, address: &str) -> (Option<Sender>, Option<Arc<str>>) {
        let now = Instant::now();
        let mut lists = self.lock();
        let Some(key) = lists
            .by_address
            .get_key_value(address)
            .map(|(k, _)| Arc::clone(k))
        else {
            return (None, None);
        };
        let Some(list) = lists.by_address.get_mut(address) else {
            return (None, Some(key));
        };
        expire(list, now);
        while let Some(idle) = list.pop_back() {
            if !idle.sender.is_closed() {
                return (Some(idle.sender), Some(key));
            }
        }
        (None, Some(key))
    }

    /// Sends `req` (origin-form URI, `Host` set) to `address` (`host:port`) over a kept-alive
    /// connection, or a new one, and returns the response head with the connection's lease.
    pub async fn send(
        &self,
        address: &str,
        mut req: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, Lease), UpstreamError> {
        let (idle, key) = self.take_idle(address);
        let key = key.unwrap_or_else(|| Arc::from(address));
        if let Some(mut sender) = idle {
            // A connection returned the moment its last body ended may not have told hyper it
            // is idle yet; `ready` waits for that (or finds it closed).
            if sender.ready().await.is_ok() {
                match sender.try_send_request(req).await {
                    Ok(resp) => return Ok((resp, self.lease(key, sender))),
                    Err(mut e) => match e.take_message() {
                        // Closed before any of the request was written: send it on a new one.
                        Some(back) => req = back,
                        None => {
                            return Err(UpstreamError::Http {
                                address: address.to_owned(),
                                source: e.into_error(),
                            })
                        }
                    },
                }
            }
        }
        let mut sender = connect(address).await?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|source| UpstreamError::Http {
                address: address.to_owned(),
                source,
            })?;
        Ok((resp, self.lease(key, sender)))
    }

    fn lease(&self, address: Arc<str>, sender: Sender) -> Lease {
        Lease {
            connections: self.clone(),
            address,
            sender,
        }
    }

    /// Idle connections kept to `address` now.
    pub fn idle(&self, address: &str) -> usize {
        self.lock().by_address.get(address).map_or(0, VecDeque::len)
    }
}

/// Opens a connection to `address` and starts its task (one per connection, not per request).
async fn connect(address: &str) -> Result<Sender, UpstreamError> {
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(s)) => s,
        Ok(Err(source)) => {
            return Err(UpstreamError::Connect {
                address: address.to_owned(),
                source,
            })
        }
        Err(_) => {
            return Err(UpstreamError::ConnectTimeout {
                address: address.to_owned(),
            })
        }
    };
    // Tokens are small writes that must leave at once.
    let _ = stream.set_nodelay(true);
    let _ = socket2::SockRef::from(&stream)
        .set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE));
    let (sender, conn) = http1::Builder::new()
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|source| UpstreamError::Http {
            address: address.to_owned(),
            source,
        })?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}

#[cfg(test)]
#[path = "keepalive_tests.rs"]
mod tests;
