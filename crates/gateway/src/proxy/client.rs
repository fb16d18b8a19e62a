//! Upstream HTTP clients: pooled keep-alive connections, one client per upstream protocol.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// A pooled client sending buffered request bodies.
pub type UpstreamClient = Client<HttpConnector, Full<Bytes>>;

/// How long a connect may take before the endpoint counts as down and the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Idle pooled connections are closed after this long.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The clients of a gateway.
#[derive(Debug, Clone)]
pub struct Clients {
    /// HTTP/1.1 upstreams.
    pub http1: UpstreamClient,
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
            http1: build(false),
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
