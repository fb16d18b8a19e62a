//! Upstream HTTP clients: pooled keep-alive connections, one client per upstream protocol.
//! HTTP/1.1 requests go through [`Connections`] (the hot path); h2c upstreams and metrics
//! scrapes through hyper-util's pooled client.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::keepalive::{Connections, CONNECT_TIMEOUT, IDLE_TIMEOUT as POOL_IDLE};

/// A pooled client sending buffered request bodies.
pub type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// The clients of a gateway.
#[derive(Debug, Clone)]
pub struct Clients {
    /// HTTP/1.1 upstreams.
    pub http1: Connections,
    /// `kubernetes.io/h2c` upstreams.
    pub h2c: UpstreamClient,
    /// Metrics scrapes: their own pool, so a hung scrape never holds a request's connection.
    pub scrape: UpstreamClient,
}

fn connector() -> HttpConnector {
    let mut c = HttpConnector::new();
    // Tokens are small writes that must leave at once.
    c.set_nodelay(true);
    c.set_connect_timeout(Some(CONNECT_TIMEOUT));
    c.set_keepalive(Some(Duration::from_secs(30)));
    c
}

impl Clients {
    /// New clients with empty pools.
    pub fn new() -> Self {
        let build = |h2: bool| {
            let mut b = Client::builder(TokioExecutor::new());
            b.pool_idle_timeout(POOL_IDLE).pool_timer(TokioTimer::new());
            if h2 {
                b.http2_only(true);
            }
            b.build(connector())
        };
        Self {
            http1: Connections::new(),
            h2c: build(true),
            scrape: build(false),
        }
    }
}

impl Default for Clients {
    fn default() -> Self {
        Self::new()
    }
}
