//! The data-plane listener: HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on one port, through
//! hyper-util's auto builder; every connection admitted by the [`ConnectionTable`] and watched
//! for the timeouts of `spec.listen.connections`; a graceful drain on shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use infergate_config::gateway::ResolvedConnections;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::connections::{
    descriptors, AcceptErrorLog, ConnectionTable, Lease, Protocol, Timeouts, Tracked, WatchedIo,
};
use crate::{service, Front};

/// A TLS handshake not finished within this long is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most one "accept failed" line this often.
const ACCEPT_ERROR_LOG_INTERVAL: Duration = Duration::from_secs(5);

/// Serves `listener` (through `tls` when given) until `shutdown` completes, then stops
/// accepting and lets requests in flight (streams included) finish for up to `drain`.
pub async fn serve(
    listener: TcpListener,
    front: Arc<Front>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
    tls: Option<TlsAcceptor>,
) {
    let graceful = GracefulShutdown::new();
    let metrics = Arc::clone(front.plane.metrics());
    let table = ConnectionTable::new(Arc::clone(&metrics));
    let descriptor_cap = descriptors::connection_cap(descriptors::raise_limit());
    let mut accept_errors = AcceptErrorLog::new(ACCEPT_ERROR_LOG_INTERVAL);
    let mut warned_cap = false;
    let at_start = front
        .plane
        .routes()
        .config
        .connections
        .max_connections
        .value;
    metrics
        .connections
        .limit
        .set(i64::from(at_start.min(descriptor_cap)));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Read per connection, so a reload's limits apply to the next accept.
                    let limits = front.plane.routes().config.connections;
                    let configured = limits.max_connections.value;
                    let cap = configured.min(descriptor_cap);
                    if cap < configured && !warned_cap {
                        tracing::warn!(
                            max_connections = configured,
                            held = cap,
                            "the file-descriptor limit holds fewer connections than \
                             maxConnections; raise `ulimit -n` to hold more"
                        );
                        warned_cap = true;
                    }
                    metrics.connections.limit.set(i64::from(cap));
                    let lease = match table.admit(peer.ip(), cap, limits.per_source_limit(cap)) {
                        Ok(lease) => lease,
                        Err(reason) => {
                            metrics.connections.closed(reason);
                            tracing::debug!(%peer, reason = reason.as_str(), "connection refused");
                            continue;
                        }
                    };
                    // Tokens are small writes that must leave at once.
                    let _ = stream.set_nodelay(true);
                    let connection = Connection {
                        front: Arc::clone(&front),
                        peer,
                        lease,
                        limits,
                        watcher: graceful.watcher(),
                    };
                    tokio::spawn(connection.run(stream, tls.clone()));
                }
                Err(e) => {
                    metrics.connections.accept_errors.inc();
                    accept_errors.record(&e);
                    // Out of descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    drop(listener);
    tracing::info!(deadline = ?drain, "draining: no new connections; letting requests in flight finish");
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("drain deadline passed with requests still in flight; cutting them");
    } else {
        tracing::info!("drained");
    }
}

/// The HTTP server of one connection, with the limits in effect when it was accepted.
fn builder(limits: &ResolvedConnections) -> auto::Builder<TokioExecutor> {
    let off = |d: Duration| (!d.is_zero()).then_some(d);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The watchdog times heads (and counts what it closes); hyper's own head timer would race
    // it and close uncounted.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    let ping = off(limits.http2_keep_alive_interval.value);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(ping)
        .keep_alive_timeout(limits.http2_keep_alive_timeout.value);
    builder
}

/// One accepted connection.
struct Connection {
    front: Arc<Front>,
    peer: SocketAddr,
    lease: Lease,
    limits: ResolvedConnections,
    watcher: Watcher,
}

impl Connection {
    /// Serves the connection until it ends or its watchdog closes it; the lease (its slot in
    /// the table) is given back when this returns.
    async fn run(self, stream: TcpStream, tls: Option<TlsAcceptor>) {
        let Connection {
            front,
            peer,
            lease,
            limits,
            watcher,
        } = self;
        let activity = Arc::clone(&lease.activity);
        let timeouts = Timeouts::from_config(&limits);
        let io = WatchedIo::new(stream, Arc::clone(&activity), tls.is_none());
        let svc_activity = Arc::clone(&activity);
        let metrics = Arc::clone(front.plane.metrics());
        let svc = service_fn(move |req| {
            let front = Arc::clone(&front);
            let in_flight = svc_activity.request_started();
            async move {
                let resp = service::handle(front, req).await;
                Ok::<_, Infallible>(resp.map(|b| Tracked::new(b, in_flight)))
            }
        });
        let builder = builder(&limits);
        let served = async {
            let result = match tls {
                None => {
                    let conn = builder.serve_connection(TokioIo::new(io), svc).into_owned();
                    watcher.watch(conn).await
                }
                Some(acceptor) => {
                    // The handshake runs in the connection's own task, so a slow client never
                    // holds up the accept loop; the watcher counts it for the drain already.
                    let stream =
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        };
                    let protocol = match stream.get_ref().1.alpn_protocol() {
                        Some(b"h2") => Protocol::Http2,
                        _ => Protocol::Http1,
                    };
                    activity.set_protocol(protocol);
                    let conn = builder
                        .serve_connection(TokioIo::new(stream), svc)
                        .into_owned();
                    watcher.watch(conn).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        };
        tokio::select! {
            () = served => {}
            reason = activity.watch(timeouts) => {
                metrics.connections.closed(reason);
                tracing::debug!(%peer, reason = reason.as_str(), "connection closed by the listener");
            }
        }
        drop(lease);
    }
}
