//! A gateway: its listeners, its routing table (swapped whole on reload), its scrapers.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use infergate_config::gateway::{ResolvedDiscovery, ResolvedGateway, TlsMode};
use tokio::net::TcpListener;

use crate::admin::Admin;
use crate::clock::Clock;
use crate::error::GatewayError;
use crate::metrics::{Metrics, ReloadLabels};
use crate::proxy::client::Clients;
use crate::route::Routes;
use crate::scrape::{self, ScrapeContext, ScrapeSettings, Scrapers};
use crate::tls::Tls;

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
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            listen: None,
            admin_listen: None,
            config_path: None,
            scrape: ScrapeSettings::default(),
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// What every request and the control plane share.
#[derive(Debug)]
pub struct Shared {
    /// The routing table, replaced whole by a reload.
    pub(crate) routes: ArcSwap<Routes>,
    /// The one clock of picks and scrapes.
    pub(crate) clock: Clock,
    /// The gateway's metrics.
    pub(crate) metrics: Arc<Metrics>,
    /// Upstream clients.
    pub(crate) clients: Clients,
    /// `observability.metrics.enabled`.
    pub(crate) metrics_enabled: bool,
}

/// A bound gateway, ready to [`Gateway::run`].
#[derive(Debug)]
pub struct Gateway {
    listener: TcpListener,
    local_addr: SocketAddr,
    admin: Admin,
    handle: GatewayHandle,
    drain: Duration,
    tls: Option<Tls>,
}

/// Controls a running gateway: reload, readiness. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GatewayHandle {
    shared: Arc<Shared>,
    scrapers: Arc<Mutex<Scrapers>>,
    scrape: ScrapeContext,
    config_path: Option<PathBuf>,
    /// The config file's contents as last loaded, so the file watcher and SIGHUP do not both
    /// reload one change.
    file_seen: Arc<Mutex<Option<Vec<u8>>>>,
}

/// Reads, validates and resolves a config file.
pub fn load_config(path: &Path) -> Result<ResolvedGateway, GatewayError> {
    let bytes = read_file(path)?;
    parse_config(&bytes, path)
}

fn read_file(path: &Path) -> Result<Vec<u8>, GatewayError> {
    std::fs::read(path).map_err(|e| GatewayError::io(format!("reading {}", path.display()), e))
}

fn parse_config(bytes: &[u8], path: &Path) -> Result<ResolvedGateway, GatewayError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        GatewayError::io(
            format!("reading {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    let config = infergate_config::gateway::load_from_str(text)?;
    Ok(config.resolve()?)
}

/// Refuses what the standalone gateway cannot honour yet, naming the field, and returns the
/// warnings for what it honours only in part.
pub fn check_supported(config: &ResolvedGateway) -> Result<Vec<String>, GatewayError> {
    if config.auth.is_some() {
        return Err(GatewayError::unsupported(
            "spec.auth",
            "JWT auth is not implemented by the standalone gateway yet",
        ));
    }
    if matches!(config.discovery, ResolvedDiscovery::Kubernetes { .. }) {
        return Err(GatewayError::unsupported(
            "spec.discovery",
            "Kubernetes discovery is not implemented by the standalone gateway yet; list spec.endpoints",
        ));
    }
    if !config.rewrites.is_empty() {
        return Err(GatewayError::unsupported(
            "spec.rewrites",
            "model rewrites are not implemented by the standalone gateway yet",
        ));
    }
    if config.rate_limits.is_some() {
        return Err(GatewayError::unsupported(
            "spec.rateLimits",
            "rate limits are not implemented by the standalone gateway yet",
        ));
    }
    if matches!(config.tls, TlsMode::Acm { .. }) {
        return Err(GatewayError::unsupported(
            "spec.tls.acmArn",
            "an ACM certificate is served by the load balancer, not by a standalone gateway; use certFile and keyFile",
        ));
    }
    let mut warnings = Vec::new();
    let f = &config.flow_control;
    if f.enabled.value {
        warnings.push(
            "spec.flowControl: requests are admitted or shed (429 + Retry-After) by band; \
             queueing (queue limits and TTLs) is not implemented yet"
                .to_owned(),
        );
    }
    Ok(warnings)
}

impl Gateway {
    /// Checks the config, builds the pools, binds both listeners and starts the scrapers and
    /// the admin thread. Must run inside a multi-threaded tokio runtime.
    pub async fn bind(
        config: ResolvedGateway,
        options: GatewayOptions,
    ) -> Result<Self, GatewayError> {
        for w in check_supported(&config)? {
            tracing::warn!("{w}");
        }
        let config_dir = options.config_path.as_deref().and_then(Path::parent);
        let listen = options.listen.unwrap_or(config.listen.value);
        let admin_listen = options.admin_listen.unwrap_or(config.admin_listen.value);
        let metrics_enabled = config.metrics_enabled.value;
        let tls = crate::tls::configure(&config.tls, config_dir)?;
        let routes = Routes::build(config, config_dir, None)?;
        let metrics = Arc::new(Metrics::new());
        let clients = Clients::new();
        let clock = Clock::new();
        let shared = Arc::new(Shared {
            routes: ArcSwap::from_pointee(routes),
            clock,
            metrics: Arc::clone(&metrics),
            clients: clients.clone(),
            metrics_enabled,
        });
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| GatewayError::Bind {
                addr: listen,
                source,
            })?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| GatewayError::io("listener address", e))?;
        let admin = Admin::start(admin_listen, Arc::clone(&shared))?;
        let scrape = ScrapeContext {
            client: clients.scrape,
            clock,
            metrics,
            settings: options.scrape,
        };
        let scrapers = scrape::start(shared.routes.load().scraped_pools(), &scrape);
        let file_seen = options
            .config_path
            .as_deref()
            .and_then(|p| std::fs::read(p).ok());
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
            admin,
            handle: GatewayHandle {
                shared,
                scrapers: Arc::new(Mutex::new(scrapers)),
                scrape,
                config_path: options.config_path,
                file_seen: Arc::new(Mutex::new(file_seen)),
            },
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
        self.admin.addr()
    }

    /// A handle to reload the running gateway or ask whether it is ready.
    pub fn handle(&self) -> GatewayHandle {
        self.handle.clone()
    }

    /// Serves until `shutdown` completes, then drains: no new connections, requests in flight
    /// finish up to the drain deadline. Scrapers and the admin listener stop last.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        crate::server::serve(
            self.listener,
            Arc::clone(&self.handle.shared),
            shutdown,
            self.drain,
            self.tls.map(|t| t.acceptor),
        )
        .await;
        self.handle.stop_scrapers();
        self.admin.stop();
    }
}

impl GatewayHandle {
    /// Swaps in a new config: pools and weights change atomically between two requests; a
    /// request in flight finishes on the config it started with. Endpoints that stay keep
    /// their metrics and counters. On error the running config stays.
    ///
    /// Listener addresses are bound once; a changed address takes a restart.
    pub fn reload(&self, config: ResolvedGateway) -> Result<(), GatewayError> {
        let result = self.try_reload(config);
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.shared
            .metrics
            .reloads
            .get_or_create(&ReloadLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
        result
    }

    fn try_reload(&self, config: ResolvedGateway) -> Result<(), GatewayError> {
        check_supported(&config)?;
        let config_dir = self.config_path.as_deref().and_then(Path::parent);
        let old = self.shared.routes.load_full();
        if old.config.listen != config.listen || old.config.admin_listen != config.admin_listen {
            tracing::warn!(
                "spec.listen changed: listeners are bound at start-up; restart to move them"
            );
        }
        let routes = Arc::new(Routes::build(config, config_dir, Some(&old))?);
        let scrapers = scrape::start(routes.scraped_pools(), &self.scrape);
        self.shared.routes.store(routes);
        // The old scrapers stop as they are replaced.
        *self.scrapers.lock().unwrap_or_else(PoisonError::into_inner) = scrapers;
        tracing::info!("config reloaded");
        Ok(())
    }

    /// Reloads from the config file the gateway was started with.
    pub fn reload_from_file(&self) -> Result<(), GatewayError> {
        let Some(path) = &self.config_path else {
            return Err(GatewayError::unsupported(
                "config",
                "the gateway was not started from a file",
            ));
        };
        let loaded = read_file(path).and_then(|bytes| {
            let config = parse_config(&bytes, path);
            *self
                .file_seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(bytes);
            config
        });
        match loaded {
            Ok(config) => self.reload(config),
            Err(e) => {
                self.shared
                    .metrics
                    .reloads
                    .get_or_create(&ReloadLabels {
                        outcome: "error".to_owned(),
                    })
                    .inc();
                Err(e)
            }
        }
    }

    /// Watches the config file, reloading when its contents change (checked every `every`).
    /// Runs until the returned task is aborted.
    pub fn watch_config_file(&self, every: Duration) -> Option<tokio::task::JoinHandle<()>> {
        let path = self.config_path.clone()?;
        let handle = self.clone();
        Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Ok(now) = std::fs::read(&path) else {
                    continue;
                };
                let changed = handle
                    .file_seen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    != Some(&now);
                if changed {
                    match handle.reload_from_file() {
                        Ok(()) => {
                            tracing::info!(path = %path.display(), "config file changed: reloaded")
                        }
                        Err(e) => {
                            tracing::error!(path = %path.display(), error = %e, "config file changed but was refused; the running config stays")
                        }
                    }
                }
            }
        }))
    }

    /// Whether every endpoint has been scraped at least once (what `/readyz` says).
    pub fn is_ready(&self) -> bool {
        self.shared
            .routes
            .load()
            .scraped_pools()
            .all(|p| p.all_scraped())
    }

    fn stop_scrapers(&self) {
        *self.scrapers.lock().unwrap_or_else(PoisonError::into_inner) = Scrapers::default();
    }
}
