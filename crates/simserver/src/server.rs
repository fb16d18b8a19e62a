//! A replica's life on its port: accept connections and serve them, and when a crash fault
//! fires, close the port, reset every connection, drop the engine — and, if told to, come back
//! after a while with a fresh one.

use crate::body::ResponseBody;
use crate::error::SimError;
use crate::replica;
use crate::routes::{self, Life, Shared};
use crate::spec::ReplicaSpec;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Serves one simulated replica on `listener` until `shutdown` completes.
///
/// Crash faults close the port and reset its connections; with a restart fault the replica
/// binds the same address again after the down time, with a fresh engine.
pub async fn serve(
    spec: ReplicaSpec,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SimError> {
    spec.validate()?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared::new(spec));
    tracing::info!(%addr, model = %shared.spec.served_model_name, profile = %shared.spec.engine.profile, "replica serving");
    tokio::pin!(shutdown);
    let mut listener = Some(listener);
    let mut startup = Duration::ZERO;
    loop {
        let port = match listener.take() {
            Some(l) => l,
            None => TcpListener::bind(addr).await?,
        };
        if live(&shared, port, startup, shutdown.as_mut()).await == End::Shutdown {
            return Ok(());
        }
        let faults = shared.faults.get();
        let Some(restart) = faults.restart else {
            tracing::warn!(%addr, "replica crashed; it stays down");
            shutdown.await;
            return Ok(());
        };
        tracing::warn!(%addr, down_secs = restart.down_secs, "replica crashed; restarting");
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(restart.down_secs)) => {}
            () = shutdown.as_mut() => return Ok(()),
        }
        shared.faults.set(faults.after_restart(), None);
        startup = Duration::from_secs_f64(restart.startup_secs);
    }
}

/// Serves many replicas in one process until `shutdown` completes. Every spec is checked before
/// any replica starts; a replica that fails later (its port taken while it was down) is logged
/// and the others keep serving. Returns the first failure, if any, at shutdown.
pub async fn serve_fleet(
    replicas: Vec<(ReplicaSpec, TcpListener)>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), SimError> {
    for (spec, _) in &replicas {
        spec.validate()?;
    }
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for (spec, listener) in replicas {
        let mut stopped = stopped.clone();
        tasks.spawn(serve(spec, listener, async move {
            // An error means the fleet itself is gone: stop too.
            let _ = stopped.wait_for(|&s| s).await;
        }));
    }
    let mut first_error = None;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = shutdown.as_mut() => break,
            joined = tasks.join_next() => match joined {
                None => break,
                Some(result) => note_failure(result, &mut first_error),
            },
        }
    }
    // Nobody may be listening any more; that is fine.
    let _ = stop.send(true);
    while let Some(result) = tasks.join_next().await {
        note_failure(result, &mut first_error);
    }
    first_error.map_or(Ok(()), Err)
}

fn note_failure(
    result: Result<Result<(), SimError>, tokio::task::JoinError>,
    first: &mut Option<SimError>,
) {
    let error = match result {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e,
        Err(e) => SimError::Io(io::Error::other(e.to_string())),
    };
    tracing::error!(%error, "replica stopped");
    first.get_or_insert(error);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Shutdown,
    Crash,
}

/// One life: serve until shutdown or a crash fault.
async fn live(
    shared: &Arc<Shared>,
    listener: TcpListener,
    startup: Duration,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> End {
    let mut spec = shared.spec.clone();
    spec.faults = shared.faults.get();
    let (replica, actor) = replica::start(&spec);
    let life = Arc::new(Life {
        replica,
        ready_at: Instant::now() + startup,
    });
    let crashed = Arc::new(AtomicBool::new(false));
    let mut connections = JoinSet::new();
    let end = loop {
        let crash_at = shared.faults.crash_deadline();
        let crash = async move {
            match crash_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.as_mut() => break End::Shutdown,
            () = crash => break End::Crash,
            () = shared.faults.changed.notified() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(stream, peer, shared.clone(), life.clone(), crashed.clone()));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    };
    if end == End::Crash {
        // Connections dropped from here on are reset, not closed.
        crashed.store(true, Ordering::Relaxed);
    }
    drop(listener);
    connections.shutdown().await;
    actor.abort();
    end
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    life: Arc<Life>,
    crashed: Arc<AtomicBool>,
) {
    // Tokens are small writes that must leave at once.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "set_nodelay failed");
    }
    let io = TokioIo::new(Connection { stream, crashed });
    let service = service_fn(move |req: Request<Incoming>| {
        let (shared, life) = (shared.clone(), life.clone());
        async move { Ok::<Response<ResponseBody>, Infallible>(routes::handle(shared, life, req).await) }
    });
    // No timer: idle keep-alive connections stay open for the gateway's pool (hyper's 30 s
    // header-read timeout would close them under it).
    let served = http1::Builder::new().serve_connection(io, service).await;
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// A client connection that is reset (RST) rather than closed when dropped after a crash, as
/// when a server process dies.
struct Connection {
    stream: TcpStream,
    crashed: Arc<AtomicBool>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.crashed.load(Ordering::Relaxed) {
            // Zero linger makes the close a reset; it cannot block.
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
