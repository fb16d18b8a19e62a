//! The signing keys, loaded off the request path and swapped in whole.
//!
//! A background task loads the key set from its file or URL at start, then again every
//! interval, and at once when a request brings a `kid` the set lacks — at most once per
//! `min_gap`, however many such requests arrive, so a flood of made-up `kid`s cannot hammer the
//! issuer. Requests read the current set through `arc-swap` and never wait on a lock. A load
//! that fails keeps the last good set, is logged and counted (`infergate_jwks_loads_total`
//! with `outcome="error"`), and is retried after `retry`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use hyper::Uri;
use infergate_auth::KeySet;
use infergate_config::gateway::JwtProvider;
use rustls::ClientConfig;
use tokio::sync::{watch, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::fetch;
use crate::error::GatewayError;
use infergate_telemetry::metrics::{JwksLabels, Metrics};

/// When key sets are loaded again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JwksRefresh {
    /// A URL is fetched again this often (Envoy's default cache duration is of this order).
    pub remote_interval: Duration,
    /// A file is read again this often (cheap; a mounted Secret changes in place).
    pub file_interval: Duration,
    /// After a failed load, the next try comes this soon.
    pub retry: Duration,
    /// An unknown `kid` starts a load only if the last one started at least this long ago.
    pub min_gap: Duration,
    /// A fetch that takes longer fails.
    pub timeout: Duration,
}

impl Default for JwksRefresh {
    fn default() -> Self {
        Self {
            remote_interval: Duration::from_secs(300),
            file_interval: Duration::from_secs(10),
            retry: Duration::from_secs(10),
            min_gap: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Where a key set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `localJWKS.file`, relative paths taken from the config file's directory.
    File(PathBuf),
    /// `remoteJWKS.uri`.
    Remote(Uri),
}

impl KeySource {
    /// The source `provider` names.
    pub fn of(provider: &JwtProvider, config_dir: Option<&Path>) -> Result<Self, GatewayError> {
        if let Some(remote) = &provider.remote_jwks {
            let uri = remote.uri.parse::<Uri>().map_err(|e| {
                keys_error(
                    "spec.auth.jwt.provider.remoteJWKS.uri",
                    format!("`{}`: {e}", remote.uri),
                )
            })?;
            return Ok(KeySource::Remote(uri));
        }
        match &provider.local_jwks {
            Some(local) => Ok(KeySource::File(match config_dir {
                Some(d) if Path::new(&local.file).is_relative() => d.join(&local.file),
                _ => PathBuf::from(&local.file),
            })),
            None => Err(keys_error(
                "spec.auth.jwt.provider",
                "set remoteJWKS.uri or localJWKS.file",
            )),
        }
    }

    fn field(&self) -> &'static str {
        match self {
            KeySource::File(_) => "spec.auth.jwt.provider.localJWKS.file",
            KeySource::Remote(_) => "spec.auth.jwt.provider.remoteJWKS.uri",
        }
    }
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::File(p) => write!(f, "{}", p.display()),
            KeySource::Remote(u) => write!(f, "{u}"),
        }
    }
}

fn keys_error(field: &str, reason: impl Into<String>) -> GatewayError {
    GatewayError::Keys {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// Whether a request that met an unknown `kid` should wait for a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Demand {
    /// A load is running: wait for it.
    Join,
    /// None is running and the last is old enough: one starts now; wait for it.
    Start,
    /// The last load started less than `min_gap` ago: refuse without waiting.
    TooSoon,
}

/// The load rate limit. Invariant: between two loads' starts there is at least `min_gap`,
/// unless the second is the periodic one.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    loading: bool,
    last_start: Option<Instant>,
}

impl Gate {
    pub(crate) fn demand(&mut self, now: Instant, min_gap: Duration) -> Demand {
        if self.loading {
            return Demand::Join;
        }
        if self
            .last_start
            .is_some_and(|t| now.saturating_duration_since(t) < min_gap)
        {
            return Demand::TooSoon;
        }
        self.begin(now);
        Demand::Start
    }

    pub(crate) fn begin(&mut self, now: Instant) {
        self.loading = true;
        self.last_start = Some(now);
    }

    pub(crate) fn end(&mut self) {
        self.loading = false;
    }
}

/// What the loading task and the requests share.
#[derive(Debug)]
struct Inner {
    source: KeySource,
    keys: ArcSwapOption<KeySet>,
    gate: Mutex<Gate>,
    wake: Notify,
    /// Bumped after every load, good or bad.
    loads: watch::Sender<u64>,
    refresh: JwksRefresh,
    tls: Option<Arc<ClientConfig>>,
    metrics: Arc<Metrics>,
}

/// A key set and the task that keeps it fresh; dropping it stops the task.
#[derive(Debug)]
pub struct KeyStore {
    inner: Arc<Inner>,
    task: AbortHandle,
}

impl Drop for KeyStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KeyStore {
    /// Starts keeping the keys of `source`. A file is read now, and a file that cannot be
    /// used is an error naming the field; a URL is fetched by the task at once (see
    /// [`KeyStore::wait_loaded`]). `tls` overrides the platform trust store for `https`.
    /// Must run inside a tokio runtime.
    pub fn start(
        source: KeySource,
        refresh: JwksRefresh,
        metrics: Arc<Metrics>,
        tls: Option<Arc<ClientConfig>>,
    ) -> Result<Self, GatewayError> {
        let tls = match (&source, tls) {
            (KeySource::Remote(u), None) if u.scheme_str() == Some("https") => {
                Some(fetch::native_tls().map_err(|e| keys_error(source.field(), e))?)
            }
            (_, tls) => tls,
        };
        let inner = Arc::new(Inner {
            source,
            keys: ArcSwapOption::empty(),
            gate: Mutex::new(Gate::default()),
            wake: Notify::new(),
            loads: watch::Sender::new(0),
            refresh,
            tls,
            metrics,
        });
        let first_in = match &inner.source {
            KeySource::File(path) => {
                let set = read_file(path).map_err(|e| keys_error(inner.source.field(), e))?;
                inner.gate().begin(Instant::now());
                inner.gate().end();
                inner.apply(Ok(set));
                refresh.file_interval
            }
            KeySource::Remote(_) => Duration::ZERO,
        };
        let task = tokio::spawn(refresh_loop(Arc::clone(&inner), first_in)).abort_handle();
        Ok(Self { inner, task })
    }

    /// Where the keys come from.
    pub fn source(&self) -> &KeySource {
        &self.inner.source
    }

    /// The current set; `None` until a load has succeeded.
    pub fn current(&self) -> Option<Arc<KeySet>> {
        self.inner.keys.load_full()
    }

    /// Waits up to `within` for a first good load; whether there is a set now.
    pub async fn wait_loaded(&self, within: Duration) -> bool {
        let mut loads = self.inner.loads.subscribe();
        let _ = tokio::time::timeout(within, async {
            while self.inner.keys.load().is_none() {
                if loads.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        self.inner.keys.load().is_some()
    }

    /// After a `kid` the set lacks: waits for a load that may bring it (one running, or one
    /// started now), unless the last load started less than `min_gap` ago.
    pub async fn reload_for_unknown_kid(&self) {
        let mut loads = self.inner.loads.subscribe();
        let min_gap = self.inner.refresh.min_gap;
        match self.inner.gate().demand(Instant::now(), min_gap) {
            Demand::TooSoon => return,
            Demand::Start => self.inner.wake.notify_one(),
            Demand::Join => {}
        }
        // A load ends within its timeout; the margin covers parsing and scheduling.
        let wait = self.inner.refresh.timeout + Duration::from_secs(1);
        let _ = tokio::time::timeout(wait, loads.changed()).await;
    }
}

impl Inner {
    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn load(&self) -> Result<KeySet, String> {
        match &self.source {
            KeySource::File(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_file(&path))
                    .await
                    .map_err(|e| format!("reading the file: {e}"))?
            }
            KeySource::Remote(uri) => {
                let body = fetch::get(uri, self.tls.as_ref(), self.refresh.timeout).await?;
                KeySet::parse(&body).map_err(|e| e.to_string())
            }
        }
    }

    /// Swaps a good set in, or keeps the last one; logs and counts either way. Whether the
    /// load was good.
    fn apply(&self, loaded: Result<KeySet, String>) -> bool {
        let outcome = |o: &str| JwksLabels {
            outcome: o.to_owned(),
        };
        match loaded {
            Ok(set) => {
                let changed = self.keys.load().as_deref() != Some(&set);
                if changed {
                    let kids: Vec<&str> = set.keys().iter().filter_map(|k| k.kid()).collect();
                    tracing::info!(source = %self.source, keys = set.keys().len(), ?kids, "signing keys loaded");
                    for s in set.skipped() {
                        tracing::warn!(source = %self.source, kid = s.kid.as_deref().unwrap_or(""), reason = s.reason, "signing key skipped");
                    }
                }
                self.metrics.jwks_keys.set(set.keys().len() as i64);
                self.keys.store(Some(Arc::new(set)));
                self.metrics.jwks_loads.get_or_create(&outcome("ok")).inc();
                true
            }
            Err(error) => {
                let kept = self.keys.load().as_ref().map_or(0, |k| k.keys().len());
                tracing::warn!(source = %self.source, %error, kept, "loading signing keys failed; the last good keys stay");
                self.metrics
                    .jwks_loads
                    .get_or_create(&outcome("error"))
                    .inc();
                false
            }
        }
    }
}

fn read_file(path: &Path) -> Result<KeySet, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    KeySet::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Loads on the interval, and at once when a request wakes it.
async fn refresh_loop(inner: Arc<Inner>, first_in: Duration) {
    let mut next = Instant::now() + first_in;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = inner.wake.notified() => {}
        }
        inner.gate().begin(Instant::now());
        let good = inner.apply(inner.load().await);
        inner.gate().end();
        inner.loads.send_modify(|n| *n = n.wrapping_add(1));
        next = Instant::now()
            + match (&inner.source, good) {
                (_, false) => inner.refresh.retry,
                (KeySource::File(_), true) => inner.refresh.file_interval,
                (KeySource::Remote(_), true) => inner.refresh.remote_interval,
            };
    }
}
