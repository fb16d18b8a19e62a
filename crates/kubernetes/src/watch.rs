//! A watch's health, shared by every watch this crate runs: whether it has listed once (its
//! cache is complete) and, when the API server is lost, since when and why. The cache itself
//! is kube's reflector store, which keeps its last contents through a lost connection and is
//! replaced whole by the re-list that follows (`410 Gone` included), so what was known keeps
//! serving until something newer is known.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use infergate_telemetry::metrics::{Metrics, ResourceLabels};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use tokio::sync::{watch, Notify};

/// What one watch knows of itself.
#[derive(Debug, Default)]
struct State {
    synced: bool,
    /// Since when and why the watch is failing; `None` while it is live.
    failing: Option<(Instant, String)>,
}

/// The health of one watch, cloned into the task that drives it.
#[derive(Debug, Clone)]
pub struct WatchHealth {
    resource: &'static str,
    state: Arc<Mutex<State>>,
    synced: watch::Sender<bool>,
    metrics: Arc<Mutex<Option<Arc<Metrics>>>>,
}

impl WatchHealth {
    /// A watch of `resource` (its plural, for logs and metrics) that has not listed yet.
    pub fn new(resource: &'static str) -> Self {
        Self {
            resource,
            state: Arc::default(),
            synced: watch::channel(false).0,
            metrics: Arc::default(),
        }
    }

    /// Counts watch errors in `metrics` from now on.
    pub fn attach_metrics(&self, metrics: &Arc<Metrics>) {
        *self.metrics.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(metrics));
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the watch has listed once.
    pub fn synced(&self) -> bool {
        self.state().synced
    }

    /// Empty while live; otherwise what is wrong, for readiness detail.
    pub fn problem(&self) -> String {
        match &self.state().failing {
            None => String::new(),
            Some((since, why)) => format!(
                "{} watch failing for {} s: {why}",
                self.resource,
                since.elapsed().as_secs()
            ),
        }
    }

    /// Whether it is synced and live.
    pub fn live(&self) -> bool {
        let s = self.state();
        s.synced && s.failing.is_none()
    }

    /// Waits up to `within` for the first list; whether it came.
    pub async fn wait_synced(&self, within: Duration) -> bool {
        let mut rx = self.synced.subscribe();
        tokio::time::timeout(within, rx.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn on_event<K>(&self, event: &watcher::Event<K>) {
        let mut s = self.state();
        if let Some((since, _)) = s.failing.take() {
            tracing::info!(
                resource = self.resource,
                after_s = since.elapsed().as_secs(),
                "Kubernetes watch recovered"
            );
        }
        if matches!(event, watcher::Event::InitDone) && !s.synced {
            s.synced = true;
            drop(s);
            self.synced.send_replace(true);
        }
    }

    fn on_error(&self, error: &watcher::Error) {
        if let Some(m) = self
            .metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            m.discovery_watch_errors
                .get_or_create(&ResourceLabels {
                    resource: self.resource.to_owned(),
                })
                .inc();
        }
        let mut s = self.state();
        if s.failing.is_none() {
            tracing::warn!(resource = self.resource, %error, "Kubernetes watch failed; keeping what it last knew and retrying");
            s.failing = Some((Instant::now(), error.to_string()));
        } else if let Some((_, why)) = s.failing.as_mut() {
            *why = error.to_string();
        }
    }
}

/// Drives `stream` (a reflector over a watcher) for ever, with kube's default backoff between
/// failures, keeping `health` and waking `changed` after each event that may have changed
/// the cache and after each failure.
pub async fn drive<K, S>(stream: S, health: WatchHealth, changed: Arc<Notify>)
where
    S: futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let stream = stream.default_backoff();
    futures_util::pin_mut!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                health.on_event(&event);
                // Mid-list events change nothing the reflector shows until the list is done.
                if !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_)) {
                    changed.notify_one();
                }
            }
            Err(e) => {
                health.on_error(&e);
                // Nothing in the cache changed, but what readiness and the metrics say did.
                changed.notify_one();
            }
        }
    }
}

/// One resource watched into kube's reflector cache: the cache, the watch's health, and the
/// task that keeps both, stopped when this is dropped. Every watch of this crate is one.
pub struct Watched<K>
where
    K: kube::Resource + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// The objects as last seen.
    pub store: kube::runtime::reflector::Store<K>,
    /// Whether it has listed and is live.
    pub health: WatchHealth,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Watched<K>
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    /// Starts watching what `api` and `config` select (`plural` names it in logs and
    /// metrics), waking `changed` after each change. Must run inside a tokio runtime.
    pub fn start(
        api: kube::Api<K>,
        config: watcher::Config,
        plural: &'static str,
        changed: &Arc<Notify>,
    ) -> Self {
        Self::start_with(api, K::DynamicType::default(), config, plural, changed)
    }
}

impl<K> Watched<K>
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    /// [`Watched::start`] for a resource known only at run time (`dyntype` says which).
    pub fn start_with(
        api: kube::Api<K>,
        dyntype: K::DynamicType,
        config: watcher::Config,
        plural: &'static str,
        changed: &Arc<Notify>,
    ) -> Self {
        let writer = kube::runtime::reflector::store::Writer::new(dyntype);
        let store = writer.as_reader();
        let health = WatchHealth::new(plural);
        let stream = kube::runtime::reflector::reflector(writer, watcher::watcher(api, config));
        let task = tokio::spawn(drive(stream, health.clone(), Arc::clone(changed)));
        Self {
            store,
            health,
            task,
        }
    }
}

impl<K> std::fmt::Debug for Watched<K>
where
    K: kube::Resource + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl<K> Drop for Watched<K>
where
    K: kube::Resource + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}
