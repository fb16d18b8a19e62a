//! A gateway: its listeners, its routing table (swapped whole on reload), its scrapers.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use infergate_config::gateway::{RateLimitStore, ResolvedDiscovery, ResolvedGateway, TlsMode};
use tokio::net::TcpListener;

use crate::admin::Admin;
use crate::auth::{Auth, JwksRefresh};
use crate::capture::Capture;
use crate::clock::Clock;
use crate::error::GatewayError;
use crate::metrics::{Metrics, ReloadLabels};
use crate::proxy::client::Clients;
use crate::ratelimit::RateLimits;
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
    /// When JWT signing keys are loaded again.
    pub jwks: JwksRefresh,
    /// Write one JSON line per completed request to this file (see [`crate::capture`]).
    pub capture: Option<PathBuf>,
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
    /// JWT auth with its keys, when `spec.auth` is set; replaced by a reload.
    pub(crate) auth: ArcSwapOption<Auth>,
    /// When signing keys are loaded again (for key stores a reload starts).
    pub(crate) jwks: JwksRefresh,
    /// Per-tenant rate limits, when `spec.rateLimits` is set; replaced by a reload (which
    /// keeps the store when it is the same).
    pub(crate) rate_limits: ArcSwapOption<RateLimits>,
    /// The trace capture, when `--capture` asked for one.
    pub(crate) capture: Option<Capture>,
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

/// The gateway without its inference listener: the pools, their scrapers and the admin
/// listener. [`Gateway`] serves HTTP on it; `infergate extproc` answers Envoy on it, so both
/// modes share one data plane.
#[derive(Debug)]
pub struct Plane {
    admin: Admin,
    handle: GatewayHandle,
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
    if matches!(config.discovery, ResolvedDiscovery::Kubernetes { .. }) {
        return Err(GatewayError::unsupported(
            "spec.discovery",
            "Kubernetes discovery is not implemented by the standalone gateway yet; list spec.endpoints",
        ));
    }
    if let Some(RateLimitStore::Redis { url }) = config.rate_limits.as_ref().map(|r| &r.store.value)
    {
        crate::ratelimit::redis::Target::parse(url)
            .map_err(|e| GatewayError::unsupported("spec.rateLimits.store", e))?;
    }
    if matches!(config.tls, TlsMode::Acm { .. }) {
        return Err(GatewayError::unsupported(
            "spec.tls.acmArn",
            "an ACM certificate is served by the load balancer, not by a standalone gateway; use certFile and keyFile",
        ));
    }
    // spec.flowControl and spec.tenancy are honoured in full (see `admission`), spec.rewrites
    // too (see `rewrite`), and spec.rateLimits (see `ratelimit`).
    Ok(Vec::new())
}

impl Gateway {
    /// Checks the config, builds the pools, binds both listeners and starts the scrapers and
    /// the admin thread. Must run inside a tokio runtime (either flavour).
    pub async fn bind(
        config: ResolvedGateway,
        options: GatewayOptions,
    ) -> Result<Self, GatewayError> {
        let config_dir = options.config_path.as_deref().and_then(Path::parent);
        let listen = options.listen.unwrap_or(config.listen.value);
        let tls_mode = config.tls.clone();
        let plane = Plane::start(config, &options)?;
        // A JWKS URL answers within moments; serving before it did would refuse every token.
        if !plane
            .handle
            .wait_for_keys(crate::auth::FIRST_LOAD_WAIT)
            .await
        {
            tracing::warn!(
                "no JWT signing keys loaded yet: tokens get 503 until the key set loads (retried in the background)"
            );
        }
        let tls = crate::tls::configure(&tls_mode, config_dir)?;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| GatewayError::Bind {
                addr: listen,
                source,
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
    pub fn handle(&self) -> GatewayHandle {
        self.plane.handle()
    }

    /// Serves until `shutdown` completes, then drains: no new connections, requests in flight
    /// finish up to the drain deadline. Scrapers and the admin listener stop last.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        crate::server::serve(
            self.listener,
            Arc::clone(&self.plane.handle.shared),
            shutdown,
            self.drain,
            self.tls.map(|t| t.acceptor),
        )
        .await;
        // After the drain, so every response that finished in it is in the file.
        if let Some(capture) = &self.plane.handle.shared.capture {
            capture.close().await;
        }
        self.plane.stop();
    }
}

impl Plane {
    /// Checks the config, builds the pools, binds the admin listener and starts the scrapers
    /// and the admin thread. `options.listen` is not used here. Must run inside a
    /// tokio runtime (either flavour).
    pub fn start(config: ResolvedGateway, options: &GatewayOptions) -> Result<Self, GatewayError> {
        for w in check_supported(&config)? {
            tracing::warn!("{w}");
        }
        let config_dir = options.config_path.as_deref().and_then(Path::parent);
        let admin_listen = options.admin_listen.unwrap_or(config.admin_listen.value);
        let metrics_enabled = config.metrics_enabled.value;
        let routes = Routes::build(config, config_dir, None)?;
        let metrics = Arc::new(Metrics::new());
        let capture = match &options.capture {
            Some(path) => Some(Capture::open(path, &metrics)?),
            None => None,
        };
        let auth = Auth::for_config(&routes.config, config_dir, None, options.jwks, &metrics)?;
        let clients = Clients::new();
        let clock = Clock::new();
        let rate_limits = RateLimits::for_config(&routes.config, None, clock, &metrics)?;
        if let Some(limits) = &rate_limits {
            let limits = Arc::clone(limits);
            tokio::spawn(async move { limits.probe().await });
        }
        let shared = Arc::new(Shared {
            routes: ArcSwap::from_pointee(routes),
            clock,
            metrics: Arc::clone(&metrics),
            clients: clients.clone(),
            metrics_enabled,
            auth: ArcSwapOption::new(auth),
            jwks: options.jwks,
            rate_limits: ArcSwapOption::new(rate_limits),
            capture,
        });
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
        Ok(Self {
            admin,
            handle: GatewayHandle {
                shared,
                scrapers: Arc::new(Mutex::new(scrapers)),
                scrape,
                config_path: options.config_path.clone(),
                file_seen: Arc::new(Mutex::new(file_seen)),
            },
        })
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin.addr()
    }

    /// A handle to reload the running gateway, read its routes or ask whether it is ready.
    pub fn handle(&self) -> GatewayHandle {
        self.handle.clone()
    }

    /// Stops the scrapers and the admin listener.
    pub fn stop(self) {
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
        let old_auth = self.shared.auth.load_full();
        let auth = Auth::for_config(
            &routes.config,
            config_dir,
            old_auth.as_deref(),
            self.shared.jwks,
            &self.shared.metrics,
        )?;
        let old_limits = self.shared.rate_limits.load_full();
        let rate_limits = RateLimits::for_config(
            &routes.config,
            old_limits.as_deref(),
            self.shared.clock,
            &self.shared.metrics,
        )?;
        let scrapers = scrape::start(routes.scraped_pools(), &self.scrape);
        self.shared.routes.store(routes);
        self.shared.auth.store(auth);
        self.shared.rate_limits.store(rate_limits);
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

    /// The routing table in effect now. Load it once per request and keep it for the whole
    /// request, so a reload never changes a request's pool mid-way.
    pub fn routes(&self) -> Arc<Routes> {
        self.shared.routes.load_full()
    }

    /// The clock picks and scrapes are stamped with.
    pub fn clock(&self) -> Clock {
        self.shared.clock
    }

    /// The gateway's metrics (what the admin listener's `/metrics` serves).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// JWT auth in effect now (`None` without `spec.auth`); replaced by a reload, so load it
    /// once per request.
    pub fn auth(&self) -> Option<Arc<Auth>> {
        self.shared.auth.load_full()
    }

    /// The rate limits in effect now (`None` without `spec.rateLimits`); replaced by a reload,
    /// so load them once per request.
    pub fn rate_limits(&self) -> Option<Arc<RateLimits>> {
        self.shared.rate_limits.load_full()
    }

    /// Whether every endpoint has been scraped at least once and, with auth on, a signing key
    /// set has loaded (what `/readyz` says).
    pub fn is_ready(&self) -> bool {
        self.shared
            .routes
            .load()
            .scraped_pools()
            .all(|p| p.all_scraped())
            && crate::auth::keys_ready(&self.shared)
    }

    /// With auth on, waits up to `within` for the signing keys' first load; whether there are
    /// keys now (always true with auth off).
    pub async fn wait_for_keys(&self, within: Duration) -> bool {
        match self.shared.auth.load_full() {
            Some(auth) => auth.keys().wait_loaded(within).await,
            None => true,
        }
    }

    fn stop_scrapers(&self) {
        *self.scrapers.lock().unwrap_or_else(PoisonError::into_inner) = Scrapers::default();
    }
}
