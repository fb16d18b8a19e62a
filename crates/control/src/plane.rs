//! The control plane of one running gateway (either front): the routing table, swapped whole
//! on reload; the scrapers feeding each pool's snapshot; signing keys and rate-limit state;
//! the admin listener. A front holds a [`Plane`] and reads it through a [`PlaneHandle`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use infergate_config::gateway::ResolvedGateway;
use infergate_telemetry::capture::Capture;
use infergate_telemetry::metrics::{Metrics, ReloadLabels, RequestRecord, TraceDropLabels};
use infergate_trace::{TraceCounters, TraceSettings, Tracer};

use crate::admin::Admin;
use crate::clock::Clock;
use crate::discovery::MemberSource;
use crate::error::GatewayError;
use crate::keys::{Auth, JwksRefresh};
use crate::limits::RateLimits;
use crate::load::{check_supported, parse_config, read_file};
use crate::policy::PickerConfigSource;
use crate::routes::Routes;
use crate::scrape::{self, ScrapeContext, ScrapeSettings, Scrapers};
use crate::shared::Shared;
use crate::tls::Tls;

/// How the control plane runs, beyond its config file.
#[derive(Debug, Clone, Default)]
pub struct PlaneOptions {
    /// Overrides `spec.listen.adminAddress`.
    pub admin_listen: Option<SocketAddr>,
    /// The config file, for reloads and for relative `pickerConfigFile` paths.
    pub config_path: Option<PathBuf>,
    /// How endpoints are scraped.
    pub scrape: ScrapeSettings,
    /// When JWT signing keys are loaded again.
    pub jwks: JwksRefresh,
    /// Write one JSON line per completed request to this file (see
    /// [`infergate_telemetry::capture`]).
    pub capture: Option<PathBuf>,
    /// Where the members of pools come from under Kubernetes discovery (required then).
    pub members: Option<Arc<dyn MemberSource>>,
    /// Where a scheduler's `configMapRef` is read (the cluster's ConfigMaps).
    pub picker_configs: Option<Arc<dyn PickerConfigSource>>,
    /// Explain every pick to the client or Envoy (`--emit-endpoint-scores`): each candidate's
    /// score, its parts, the filters that removed endpoints, the decision time.
    pub emit_endpoint_scores: bool,
    /// Export each request's spans over OTLP (`--otlp-endpoint`, the `OTEL_*` variables);
    /// `None`: tracing off.
    pub tracing: Option<TraceSettings>,
}

/// The control plane: the pools, their scrapers and the admin listener. `infergate serve`
/// serves HTTP on it; `infergate extproc` answers Envoy on it, so both fronts share one.
#[derive(Debug)]
pub struct Plane {
    admin: Admin,
    handle: PlaneHandle,
}

/// Reads and controls a running plane: the routing table, reload, readiness. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PlaneHandle {
    shared: Arc<Shared>,
    scrapers: Arc<Mutex<Scrapers>>,
    scrape: ScrapeContext,
    config_path: Option<PathBuf>,
    /// The config file's contents as last loaded, so the file watcher and SIGHUP do not both
    /// reload one change.
    file_seen: Arc<Mutex<Option<Vec<u8>>>>,
    /// Held by a reload and by a membership refresh, so that a refresh never applies members
    /// to a routing table a reload is replacing (the reload reads the member source itself,
    /// after any refresh that came first).
    writer: Arc<Mutex<()>>,
}

impl Plane {
    /// Checks the config, builds the pools, binds the admin listener and starts the scrapers
    /// and the admin thread. `options.listen` is not used here. Must run inside a
    /// tokio runtime (either flavour).
    pub fn start(config: ResolvedGateway, options: &PlaneOptions) -> Result<Self, GatewayError> {
        for w in check_supported(&config)? {
            tracing::warn!("{w}");
        }
        let config_dir = options.config_path.as_deref().and_then(Path::parent);
        let admin_listen = options.admin_listen.unwrap_or(config.admin_listen.value);
        let metrics_enabled = config.metrics_enabled.value;
        let metrics = Arc::new(Metrics::new());
        let routes = Routes::build(
            config,
            config_dir,
            options.members.as_deref(),
            options.picker_configs.as_deref(),
            None,
            &metrics,
        )?;
        let capture = match &options.capture {
            Some(path) => Some(Capture::open(path, &metrics)?),
            None => None,
        };
        let auth = Auth::for_config(&routes.config, config_dir, None, options.jwks, &metrics)?;
        let clock = Clock::new();
        let rate_limits = RateLimits::for_config(&routes.config, None, clock, &metrics)?;
        if let Some(limits) = &rate_limits {
            let limits = Arc::clone(limits);
            tokio::spawn(async move { limits.probe().await });
        }
        let tracer = match &options.tracing {
            Some(settings) => {
                let counter = |reason| {
                    metrics
                        .trace_spans_dropped
                        .get_or_create(&TraceDropLabels { reason })
                        .clone()
                };
                let counters = TraceCounters {
                    exported: metrics.trace_spans_exported.clone(),
                    dropped_queue_full: counter("queue_full"),
                    dropped_export_failed: counter("export_failed"),
                };
                tracing::info!(endpoint = %settings.endpoint, "tracing: spans exported over OTLP");
                Tracer::start(settings.clone(), counters)
            }
            None => Tracer::disabled(),
        };
        let shared = Arc::new(Shared {
            routes: ArcSwap::from_pointee(routes),
            clock,
            metrics: Arc::clone(&metrics),
            metrics_enabled,
            auth: ArcSwapOption::new(auth),
            jwks: options.jwks,
            rate_limits: ArcSwapOption::new(rate_limits),
            capture,
            members: options.members.clone(),
            picker_configs: options.picker_configs.clone(),
            emit_endpoint_scores: options.emit_endpoint_scores,
            tracer,
            refreshes: Arc::new(AtomicU64::new(0)),
        });
        let admin = Admin::start(admin_listen, Arc::clone(&shared))?;
        let scrape = ScrapeContext {
            client: scrape::client(),
            clock,
            metrics,
            settings: options.scrape,
            refreshes: Arc::clone(&shared.refreshes),
        };
        let scrapers = scrape::start(shared.routes.load().scraped_pools(), &scrape);
        let file_seen = options
            .config_path
            .as_deref()
            .and_then(|p| std::fs::read(p).ok());
        Ok(Self {
            admin,
            handle: PlaneHandle {
                shared,
                scrapers: Arc::new(Mutex::new(scrapers)),
                scrape,
                config_path: options.config_path.clone(),
                file_seen: Arc::new(Mutex::new(file_seen)),
                writer: Arc::new(Mutex::new(())),
            },
        })
    }

    /// What a front does before it binds its own listener: starts the plane, waits (up to
    /// [`crate::keys::FIRST_LOAD_WAIT`]) for the JWT signing keys' first load, and loads the
    /// listener's certificate as `spec.tls` asks (`None`: plain). Serving before a JWKS URL
    /// answered would refuse every token, so the wait is worth its few milliseconds.
    pub async fn open(
        config: ResolvedGateway,
        options: &PlaneOptions,
    ) -> Result<(Self, Option<Tls>), GatewayError> {
        let config_dir = options.config_path.as_deref().and_then(Path::parent);
        let tls_mode = config.tls.clone();
        let plane = Self::start(config, options)?;
        if !plane
            .handle
            .wait_for_keys(crate::keys::FIRST_LOAD_WAIT)
            .await
        {
            tracing::warn!(
                "no JWT signing keys loaded yet: tokens get 503 until the key set loads (retried in the background)"
            );
        }
        let tls = crate::tls::configure(&tls_mode, config_dir)?;
        Ok((plane, tls))
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin.addr()
    }

    /// A handle to reload the running gateway, read its routes or ask whether it is ready.
    pub fn handle(&self) -> PlaneHandle {
        self.handle.clone()
    }

    /// Stops the scrapers and the admin listener.
    pub fn stop(self) {
        self.handle.stop_scrapers();
        self.admin.stop();
    }
}

impl PlaneHandle {
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
        let _writing = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let config_dir = self.config_path.as_deref().and_then(Path::parent);
        let old = self.shared.routes.load_full();
        if old.config.listen != config.listen || old.config.admin_listen != config.admin_listen {
            tracing::warn!(
                "spec.listen changed: listeners are bound at start-up; restart to move them"
            );
        }
        let routes = Arc::new(Routes::build(
            config,
            config_dir,
            self.shared.members.as_deref(),
            self.shared.picker_configs.as_deref(),
            Some(&old),
            &self.shared.metrics,
        )?);
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
        self.shared.routes.store(Arc::clone(&routes));
        self.shared.auth.store(auth);
        self.shared.rate_limits.store(rate_limits);
        // The old pools' scrapers stop; the new pools' start (each reads its members now).
        self.scrapers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sync(routes.scraped_pools(), &self.scrape);
        tracing::info!("config reloaded");
        Ok(())
    }

    /// Asks the member source for every discovered pool's members again and installs those
    /// that changed (the snapshot swapped whole, the scrapers following): what a watch calls
    /// after its cache changed. Requests never wait on it. How many pools changed.
    pub fn refresh_members(&self) -> Result<usize, GatewayError> {
        let Some(source) = self.shared.members.as_deref() else {
            return Ok(0);
        };
        let _writing = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let routes = self.shared.routes.load_full();
        if routes.config.discovery == infergate_config::gateway::ResolvedDiscovery::Static {
            return Ok(0);
        }
        let mut changed = 0;
        for (config, pool) in routes.config.pools.iter().zip(&routes.pools) {
            let started = std::time::Instant::now();
            if let Some(change) = pool.set_members(source.members(config), &self.shared.metrics)? {
                changed += 1;
                self.scrapers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .sync_pool(pool, &self.scrape);
                // A few names are enough to follow a rollout; a mass change says how many.
                let names = |v: &[String]| {
                    let mut s = v.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
                    if v.len() > 4 {
                        s.push_str(&format!(" and {} more", v.len() - 4));
                    }
                    s
                };
                tracing::info!(
                    pool = %pool.name,
                    endpoints = change.endpoints,
                    joined = %names(&change.joined),
                    left = %names(&change.left),
                    took_us = started.elapsed().as_micros() as u64,
                    "pool membership changed"
                );
            }
        }
        Ok(changed)
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

    /// The trace capture, when `--capture` asked for one: the accounting of each completed
    /// request writes to it, and the front closes it after its drain.
    pub fn capture(&self) -> Option<&Capture> {
        self.shared.capture.as_ref()
    }

    /// Whether each pick is explained to its client (`--emit-endpoint-scores`).
    pub fn emits_endpoint_scores(&self) -> bool {
        self.shared.emit_endpoint_scores
    }

    /// Makes each request's spans; a no-op tracer when tracing is off.
    pub fn tracer(&self) -> &Tracer {
        &self.shared.tracer
    }

    /// The clock picks and scrapes are stamped with.
    pub fn clock(&self) -> Clock {
        self.shared.clock
    }

    /// The gateway's metrics (what the admin listener's `/metrics` serves).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// Counts one inference request that ended (answered or refused): in the metrics
    /// ([`Metrics::count_request`]) and, when it reached a pool of the routing table, in that
    /// pool's recent requests, whose error rate the member status document reports (a 5xx, the
    /// gateway's own for an endpoint it could not reach or a timeout included, is a failure).
    /// Each front calls it exactly once per request, when the answer's status is known, so
    /// both fronts feed the same figures. Two loads and a short per-pool lock: it never waits
    /// on the control plane.
    pub fn count_request(&self, record: &RequestRecord) {
        self.shared.metrics.count_request(record);
        if record.pool.is_empty() {
            return;
        }
        // The table now, which may be newer than the request's: a pool that kept its name
        // kept its recent requests too, so they land in the same window either way.
        if let Some(pool) = self.shared.routes.load().pool(&record.pool) {
            pool.recent().record_request(record.status);
        }
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

    /// Whether discovery has synced, every endpoint has been scraped at least once and, with
    /// auth on, a signing key set has loaded (what `/readyz` says).
    pub fn is_ready(&self) -> bool {
        self.shared
            .routes
            .load()
            .scraped_pools()
            .all(|p| p.all_scraped())
            && self.shared.keys_ready()
            && self.shared.members_synced()
    }

    /// Whether discovery has listed what it watches (always true with static endpoints): the
    /// members are complete.
    pub fn is_synced(&self) -> bool {
        self.shared.members_synced()
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
