//! A gateway: its HTTP listener in front of the control plane.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::ResolvedGateway;
use infergate_control::discovery::MemberSource;
use infergate_control::keys::JwksRefresh;
use infergate_control::policy::PickerConfigSource;
use infergate_control::tls::Tls;
use infergate_control::{GatewayError, Plane, PlaneHandle, PlaneOptions, ScrapeSettings};
use tokio::net::TcpListener;

use crate::proxy::client::Clients;

/// How a gateway runs, beyond its config file.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Overrides `spec.listen.address`.
    pub listen: Option<SocketAddr>,
    /// Overrides `spec.listen.adminAddress`.
    pub admin_listen: Option<SocketAddr>,
    /// The config file, for reloads and for relative `pickerConfigFile` paths.
    pub config_path: Option<PathBuf>,
    /// How endpoints are scraped.
    pub scrape: ScrapeSettings,
    /// How long requests in flight may take to finish after shutdown begins.
    pub drain_timeout: Duration,
    /// When JWT signing keys are loaded again.
    pub jwks: JwksRefresh,
    /// Write one JSON line per completed request to this file (see
    /// [`infergate_telemetry::capture`]).
    pub capture: Option<PathBuf>,
    /// Where pools' members come from under Kubernetes discovery.
    pub members: Option<Arc<dyn MemberSource>>,
    /// Where a scheduler's `configMapRef` is read.
    pub picker_configs: Option<Arc<dyn PickerConfigSource>>,
    /// Explain each pick in response headers (`--emit-endpoint-scores`).
    pub emit_endpoint_scores: bool,
    /// Export each request's spans over OTLP; `None`: tracing off.
    pub tracing: Option<infergate_trace::TraceSettings>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            listen: None,
            admin_listen: None,
            config_path: None,
            scrape: ScrapeSettings::default(),
            drain_timeout: Duration::from_secs(30),
            jwks: JwksRefresh::default(),
            capture: None,
            members: None,
            picker_configs: None,
            emit_endpoint_scores: false,
            tracing: None,
        }
    }
}

impl GatewayOptions {
    /// What the control plane is started with.
    pub fn plane_options(&self) -> PlaneOptions {
        PlaneOptions {
            admin_listen: self.admin_listen,
            config_path: self.config_path.clone(),
            scrape: self.scrape,
            jwks: self.jwks,
            capture: self.capture.clone(),
            members: self.members.clone(),
            picker_configs: self.picker_configs.clone(),
            emit_endpoint_scores: self.emit_endpoint_scores,
            tracing: self.tracing.clone(),
        }
    }
}

/// What every request through the HTTP front shares: the control plane and the upstream
/// clients.
#[derive(Debug)]
pub struct Front {
    /// The control plane.
    pub plane: PlaneHandle,
    /// Upstream clients.
    pub clients: Clients,
    /// The request body bytes buffered at once, over every request.
    pub bodies: Arc<crate::body::BodyBudget>,
}

/// A bound gateway, ready to [`Gateway::run`].
#[derive(Debug)]
pub struct Gateway {
    listener: TcpListener,
    local_addr: SocketAddr,
    plane: Plane,
    drain: Duration,
    tls: Option<Tls>,
}

impl Gateway {
    /// Checks the config, builds the pools, binds both listeners and starts the scrapers and
    /// the admin thread. Must run inside a tokio runtime (either flavour).
    pub async fn bind(
        config: ResolvedGateway,
        options: GatewayOptions,
    ) -> Result<Self, GatewayError> {
        let listen = options.listen.unwrap_or(config.listen.value);
        let (plane, tls) = Plane::open(config, &options.plane_options()).await?;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|cause| GatewayError::Bind {
                addr: listen,
                cause,
            })?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| GatewayError::io("listener address", e))?;
        match &tls {
            None => tracing::warn!(
                address = %local_addr,
                "serving PLAIN HTTP (no spec.tls): traffic and credentials cross the network unencrypted"
            ),
            Some(t) if t.self_signed => tracing::warn!(
                address = %local_addr,
                fingerprint = %t.fingerprint,
                "serving HTTPS with a self-signed certificate made at start-up; pin its SHA-256 fingerprint"
            ),
            Some(t) => {
                tracing::info!(address = %local_addr, fingerprint = %t.fingerprint, "serving HTTPS")
            }
        }
        Ok(Self {
            listener,
            local_addr,
            plane,
            drain: options.drain_timeout,
            tls,
        })
    }

    /// The inference listener's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The listener's TLS, when it serves HTTPS (its certificate and fingerprint).
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.plane.admin_addr()
    }

    /// A handle to reload the running gateway or ask whether it is ready.
    pub fn handle(&self) -> PlaneHandle {
        self.plane.handle()
    }

    /// Serves until `shutdown` completes, then drains: no new connections, requests in flight
    /// finish up to the drain deadline. Scrapers and the admin listener stop last.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let plane = self.plane.handle();
        let front = Arc::new(Front {
            bodies: crate::body::BodyBudget::new(Arc::clone(plane.metrics())),
            plane,
            clients: Clients::new(),
        });
        crate::server::serve(
            self.listener,
            front,
            shutdown,
            self.drain,
            self.tls.map(|t| t.acceptor),
        )
        .await;
        // After the drain, so every response that finished in it is in the file.
        if let Some(capture) = self.plane.handle().capture() {
            capture.close().await;
        }
        // Likewise the spans of the requests the drain finished.
        self.plane.handle().tracer().flush().await;
        self.plane.stop();
    }
}
