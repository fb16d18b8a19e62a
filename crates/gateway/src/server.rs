//! The data-plane listener: HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on one port, through
//! hyper-util's auto builder; a graceful drain on shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::{service, Front};

/// A client that sends no request head within this long is disconnected.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A TLS handshake not finished within this long is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Tokens are small writes that must leave at once.
                    let _ = stream.set_nodelay(true);
                    let front = Arc::clone(&front);
                    let svc = service_fn(move |req| {
                        let front = Arc::clone(&front);
                        async move { Ok::<_, Infallible>(service::handle(front, req).await) }
                    });
                    let Some(acceptor) = &tls else {
                        let conn = builder
                            .serve_connection(TokioIo::new(stream), svc)
                            .into_owned();
                        let conn = graceful.watch(conn);
                        tokio::spawn(async move {
                            if let Err(e) = conn.await {
                                tracing::debug!(%peer, error = %e, "connection ended with an error");
                            }
                        });
                        continue;
                    };
                    // The handshake runs in the connection's own task, so a slow client never
                    // holds up the accept loop; the watcher counts it for the drain already.
                    let (acceptor, builder, watcher) = (acceptor.clone(), builder.clone(), graceful.watcher());
                    tokio::spawn(async move {
                        let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
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
                        let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                        if let Err(e) = watcher.watch(conn).await {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
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
