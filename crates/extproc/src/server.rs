//! `infergate extproc` as a server: the gateway's data plane without its HTTP listener
//! (pools, scrapers, the admin listener with `/metrics`), the ext_proc and health services on
//! one gRPC listener (TLS when `spec.tls` asks for it), optionally health alone on a second
//! one, and a graceful drain.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::ExternalProcessorServer;
use futures_util::Stream;
use infergate_config::gateway::{DefaultBackend, ResolvedGateway};
use infergate_control::discovery::MemberSource;
use infergate_control::tls::Tls;
use infergate_control::{GatewayError, Plane, PlaneHandle, PlaneOptions, ScrapeSettings};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tonic::transport::Server;

use crate::error::ExtProcError;
use crate::health;
use crate::processor::Processor;
use crate::service::ExtProcService;

/// The ext_proc port of the endpoint-picker reference deployment.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9002);

/// Largest gRPC message taken from Envoy. Envoy sends a body in the chunks it received it in
/// (tens of kilobytes); this only bounds a misbehaving peer.
const MAX_MESSAGE: usize = 16 << 20;

/// Concurrent streams on one connection from Envoy. Every request in flight through Envoy holds
/// one stream for its whole life, so the HTTP/2 default (a few hundred) would queue requests
/// at Envoy under load.
const MAX_STREAMS: u32 = 100_000;

/// A TLS handshake not finished within this long is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How `infergate extproc` runs, beyond its config file.
#[derive(Debug, Clone)]
pub struct ExtProcOptions {
    /// The ext_proc (and health) gRPC listener; else `spec.listen.address` when the config
    /// writes it, else [`DEFAULT_LISTEN`].
    pub listen: Option<SocketAddr>,
    /// Overrides `spec.listen.adminAddress` (`/metrics`, `/healthz`, `/readyz`).
    pub admin_listen: Option<SocketAddr>,
    /// A second gRPC listener serving only health, for probes kept off the ext_proc port.
    pub health_listen: Option<SocketAddr>,
    /// The config file, for reloads and relative paths.
    pub config_path: Option<PathBuf>,
    /// How endpoints are scraped.
    pub scrape: ScrapeSettings,
    /// How long streams in flight may take to finish after shutdown begins.
    pub drain_timeout: Duration,
    /// Where pools' members come from under Kubernetes discovery (`--pool-name`).
    pub members: Option<Arc<dyn MemberSource>>,
    /// Explain each pick in the `envoy.lb` metadata (`--emit-endpoint-scores`).
    pub emit_endpoint_scores: bool,
    /// Export each request's spans over OTLP; `None`: tracing off.
    pub tracing: Option<infergate_trace::TraceSettings>,
}

impl Default for ExtProcOptions {
    fn default() -> Self {
        Self {
            listen: None,
            admin_listen: None,
            health_listen: None,
            config_path: None,
            scrape: ScrapeSettings::default(),
            drain_timeout: Duration::from_secs(30),
            members: None,
            emit_endpoint_scores: false,
            tracing: None,
        }
    }
}

/// Refuses what extproc mode does not honour, naming the field, on top of what the data plane
/// itself refuses: endpoints Envoy cannot be pointed at — the destination names endpoints as
/// `ip:port`, and Envoy's override-host policy matches hosts by IP address only. (Auth,
/// rewrites and rate limits run as in the standalone gateway.)
pub fn check_extproc(config: &ResolvedGateway) -> Result<(), ExtProcError> {
    for pool in &config.pools {
        for e in &pool.endpoints {
            if e.authority.parse::<SocketAddr>().is_err() {
                return Err(ExtProcError::Unsupported {
                    field: format!("spec.endpoints[{}].address", e.index),
                    reason: format!(
                        "`{}` is not ip:port; Envoy matches the destination to its hosts by IP \
                         address, so name the endpoint by its IP",
                        e.authority
                    ),
                });
            }
        }
    }
    if let Some(DefaultBackend::Host { host, port }) = &config.bbr.default_backend {
        if format!("{host}:{}", port.value)
            .parse::<SocketAddr>()
            .is_err()
        {
            return Err(ExtProcError::Unsupported {
                field: "spec.bbr.defaultBackend.name".into(),
                reason: format!(
                    "`{host}` is not an IP address; Envoy matches the destination to its hosts by IP"
                ),
            });
        }
    }
    Ok(())
}

/// A bound ext_proc server, ready to [`ExtProc::run`].
#[derive(Debug)]
pub struct ExtProc {
    listener: TcpListener,
    local_addr: SocketAddr,
    health_listener: Option<(TcpListener, SocketAddr)>,
    plane: Plane,
    tls: Option<Tls>,
    drain: Duration,
}

impl ExtProc {
    /// Checks the config, starts the data plane (pools, scrapers, admin listener) and binds the
    /// gRPC listeners. Must run inside a multi-threaded tokio runtime.
    pub async fn bind(
        config: ResolvedGateway,
        options: ExtProcOptions,
    ) -> Result<Self, ExtProcError> {
        check_extproc(&config)?;
        let listen = options.listen.unwrap_or(if config.listen.is_default {
            DEFAULT_LISTEN
        } else {
            config.listen.value
        });
        let plane_options = PlaneOptions {
            admin_listen: options.admin_listen,
            config_path: options.config_path.clone(),
            scrape: options.scrape,
            members: options.members.clone(),
            emit_endpoint_scores: options.emit_endpoint_scores,
            tracing: options.tracing.clone(),
            ..PlaneOptions::default()
        };
        let (plane, tls) = Plane::open(config, &plane_options).await?;
        let listener = bind(listen).await?;
        let local_addr = address_of(&listener)?;
        let health_listener = match options.health_listen {
            Some(addr) => {
                let l = bind(addr).await?;
                let a = address_of(&l)?;
                Some((l, a))
            }
            None => None,
        };
        match &tls {
            None => tracing::warn!(
                address = %local_addr,
                "ext_proc over PLAIN gRPC (no spec.tls): request bodies cross the network unencrypted"
            ),
            Some(t) => tracing::info!(
                address = %local_addr,
                fingerprint = %t.fingerprint,
                self_signed = t.self_signed,
                "ext_proc over TLS"
            ),
        }
        Ok(Self {
            listener,
            local_addr,
            health_listener,
            plane,
            tls,
            drain: options.drain_timeout,
        })
    }

    /// The ext_proc listener's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The health-only listener's address, when there is one.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_listener.as_ref().map(|(_, a)| *a)
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.plane.admin_addr()
    }

    /// The listener's TLS, when it serves TLS.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// A handle to reload the data plane or ask whether it is ready.
    pub fn handle(&self) -> PlaneHandle {
        self.plane.handle()
    }

    /// Serves until `shutdown` completes, then drains: health turns NOT_SERVING, no new
    /// connections are taken, streams in flight finish up to the drain deadline. Scrapers and
    /// the admin listener stop last.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let handle = self.plane.handle();
        let processor = Arc::new(Processor::new(handle.clone()));
        let (reporter, health_service) = tonic_health::server::health_reporter();
        // Every status is set before the first probe can arrive (the reporter starts with
        // `""` SERVING).
        health::publish(&reporter, &handle).await;
        let follow = tokio::spawn(health::follow(reporter.clone(), handle));
        let ext_proc = ExternalProcessorServer::new(ExtProcService::new(processor))
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let health_only = self.health_listener.map(|(listener, _)| {
            let router = Server::builder().add_service(health_service.clone());
            tokio::spawn(
                router.serve_with_incoming_shutdown(plain(listener), stopped(stop_rx.clone())),
            )
        });
        let router = Server::builder()
            .max_concurrent_streams(MAX_STREAMS)
            .add_service(health_service)
            .add_service(ext_proc);
        let signal = {
            let reporter = reporter.clone();
            let stop_tx = stop_tx.clone();
            async move {
                shutdown.await;
                tracing::info!("shutting down: health NOT_SERVING, draining streams in flight");
                follow.abort();
                health::draining(&reporter).await;
                let _ = stop_tx.send(true);
            }
        };
        let served = async move {
            let result = match self.tls {
                Some(t) => {
                    router
                        .serve_with_incoming_shutdown(tls(self.listener, t.acceptor), signal)
                        .await
                }
                None => {
                    router
                        .serve_with_incoming_shutdown(plain(self.listener), signal)
                        .await
                }
            };
            if let Err(e) = result {
                tracing::error!(error = %e, "ext_proc server failed");
            }
        };
        let drain = self.drain;
        let deadline = async move {
            stopped(stop_rx).await;
            tokio::time::sleep(drain).await;
        };
        tokio::select! {
            () = served => {}
            () = deadline => tracing::warn!(?drain, "drain deadline passed; closing streams still in flight"),
        }
        if let Some(h) = health_only {
            h.abort();
        }
        // The spans of the streams the drain finished.
        self.plane.handle().tracer().flush().await;
        self.plane.stop();
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ExtProcError> {
    TcpListener::bind(addr)
        .await
        .map_err(|cause| GatewayError::Bind { addr, cause }.into())
}

fn address_of(listener: &TcpListener) -> Result<SocketAddr, ExtProcError> {
    listener
        .local_addr()
        .map_err(|cause| GatewayError::io("listener address", cause).into())
}

/// Accepted connections, with Nagle off (answers are small writes that must leave at once). An
/// accept error (out of file descriptors, say) is logged and accepting goes on.
fn plain(listener: TcpListener) -> impl Stream<Item = Result<TcpStream, std::io::Error>> {
    futures_util::stream::unfold(listener, |listener| async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    return Some((Ok(stream), listener));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    })
}

/// Accepted connections after their TLS handshake. Handshakes run concurrently, each bounded
/// in time, so one slow client cannot hold up the others.
fn tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> impl Stream<Item = Result<tokio_rustls::server::TlsStream<TcpStream>, std::io::Error>> {
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut accepted = Box::pin(plain(listener));
        loop {
            let next = tokio::select! {
                () = tx.closed() => return,
                n = futures_util::StreamExt::next(&mut accepted) => n,
            };
            let Some(Ok(stream)) = next else { continue };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                }
            });
        }
    });
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str, extra: &str) -> ResolvedGateway {
        let yaml = format!(
            "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: true{extra}}}
  schedulers:
    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}
  endpoints:
    - {{address: 10.0.0.1:8000, labels: {{app: a}}}}
    - {{address: \"{endpoint}\", labels: {{app: a}}}}
"
        );
        infergate_config::gateway::load_from_str(&yaml)
            .unwrap()
            .resolve()
            .unwrap()
    }

    #[test]
    fn endpoints_must_be_ip_addresses_and_the_error_names_the_field() {
        assert!(check_extproc(&config("[fd00::2]:8000", "")).is_ok());
        let err = check_extproc(&config("pod-b.local:8000", "")).unwrap_err();
        assert!(
            err.to_string().starts_with("spec.endpoints[1].address:"),
            "{err}"
        );
        let err = check_extproc(&config(
            "10.0.0.2:8000",
            ", defaultBackend: {name: fallback.svc, port: 8000}",
        ))
        .unwrap_err();
        assert!(
            err.to_string().starts_with("spec.bbr.defaultBackend.name:"),
            "{err}"
        );
    }
}
