//! The admin listener: `/metrics`, `/healthz`, `/readyz`, the member status document a global
//! tier pulls (`/status/member`, [`crate::member_status`]) and the live page, on its own
//! address and its own thread and runtime, so a flood of traffic on the data plane cannot
//! starve a health probe or a status pull.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use crate::error::GatewayError;
use crate::shared::Shared;

/// The running admin listener; [`Admin::stop`] (or dropping it) ends it.
#[derive(Debug)]
pub struct Admin {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Admin {
    /// Binds `addr` now (so a taken port fails start-up) and serves it on a new thread.
    pub(crate) fn start(addr: SocketAddr, shared: Arc<Shared>) -> Result<Self, GatewayError> {
        let std_listener = std::net::TcpListener::bind(addr)
            .map_err(|cause| GatewayError::Bind { addr, cause })?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| GatewayError::io("admin listener address", e))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| GatewayError::io("admin listener", e))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| GatewayError::io("admin runtime", e))?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("infergate-admin".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(listener) => serve(listener, shared, stopped).await,
                        Err(e) => tracing::error!(error = %e, "admin listener failed"),
                    }
                });
            })
            .map_err(|e| GatewayError::io("admin thread", e))?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = Arc::clone(&shared);
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let shared = Arc::clone(&shared);
                            async move { Ok::<_, Infallible>(route(&shared, &req)) }
                        });
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
        }
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn typed(
    status: StatusCode,
    body: impl Into<Bytes>,
    content_type: &'static str,
) -> Response<Full<Bytes>> {
    let mut r = text(status, body);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The page and the global tier poll: never a cached answer.
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

fn route(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/" => typed(
            StatusCode::OK,
            crate::admin_page::PAGE,
            "text/html; charset=utf-8",
        ),
        crate::member_status::PATH => typed(
            StatusCode::OK,
            crate::member_status::member_status_now(shared).to_json(),
            "application/json",
        ),
        "/api/fleet" => typed(
            StatusCode::OK,
            crate::admin_page::fleet_json(shared),
            "application/json",
        ),
        "/readyz" => {
            let health = shared.members.as_ref().map(|m| m.health());
            let mut waiting = Vec::new();
            if let Some(h) = health.as_ref().filter(|h| !h.synced) {
                waiting.push(format!("discovery has not synced: {}", h.problem));
            }
            let unscraped = unscraped(shared);
            if !unscraped.is_empty() {
                waiting.push(format!("never scraped: {}", unscraped.join(", ")));
            }
            if !shared.keys_ready() {
                waiting.push("JWT signing keys never loaded".to_owned());
            }
            if !waiting.is_empty() {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {}\n", waiting.join("; ")),
                );
            }
            match health.filter(|h| !h.problem.is_empty()) {
                // Still ready: the last known endpoints keep serving, and restarting would
                // lose them.
                Some(h) => text(
                    StatusCode::OK,
                    format!(
                        "ready (degraded: {}; serving the last known endpoints)\n",
                        h.problem
                    ),
                ),
                None => text(StatusCode::OK, "ready\n"),
            }
        }
        "/metrics" if shared.metrics_enabled => {
            crate::fleet_view::export(shared);
            let mut r = text(StatusCode::OK, shared.metrics.encode());
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// Endpoints never scraped, as `pool/address`.
fn unscraped(shared: &Shared) -> Vec<String> {
    let routes = shared.routes.load();
    let mut out = Vec::new();
    for pool in routes.scraped_pools() {
        let snap = pool.snapshot();
        for s in snap.pool.specs() {
            if snap.pool.metrics(s.id).is_none() {
                out.push(format!("{}/{}", pool.name, s.address));
            }
        }
    }
    out
}
