//! One model pool at run time: the snapshot the control plane swaps in, the picker that learns
//! across requests, its flow control, and the pool's settings.
//!
//! Requests read the snapshot with one atomic load and never wait on the control plane. The
//! picker needs `&mut`, so it sits behind a mutex held only for the pick and the dispatch of one
//! request (microseconds); the first-token observation takes it once more.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use infergate_config::gateway::{
    AppProtocol, FirstByteTimeout, Pool as PoolConfig, ResolvedGateway,
};
use infergate_flow::PoolState;
use infergate_picker::metrics::Engine;
use infergate_picker::{
    AttemptOutcome, Dispatch, EndpointId, EndpointSpec, OutlierPolicy, Pick, PickError, Picker,
    Policy, Pool, PoolView, Progress, RequestFeatures, ScrapedMetrics, TtftTicket,
};

use infergate_telemetry::metrics::{EndpointLabels, Metrics, PoolLabels, RetryLabels};
use infergate_telemetry::upstream::InferencePoolLabels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use crate::admission::Admission;
use crate::discovery::{self, endpoint_id};
use crate::error::GatewayError;
use crate::recent::RecentWindow;

/// What a request reads: the endpoints with their last scrapes, and the load summary.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The picker's pool.
    pub pool: Pool,
    /// Saturation as of the last round of scrapes (what flow control last observed).
    pub state: PoolState,
}

/// A pool at run time.
#[derive(Debug)]
pub struct PoolRuntime {
    /// The scheduler's name.
    pub name: String,
    /// The model it serves.
    pub model_name: String,
    /// Adapters routed here.
    pub adapters: Vec<String>,
    /// Metric dialect of its endpoints.
    pub engine: Engine,
    /// Upstream speaks HTTP/2 over cleartext.
    pub h2c: bool,
    /// Arrival until the answer's first byte.
    pub route_timeout: Option<Duration>,
    /// Each attempt until its first byte (`infergate serve` then tries the next endpoint).
    pub first_byte_timeout: FirstByteTimeout,
    /// Between two chunks of an answer that has begun.
    pub stream_idle_timeout: Option<Duration>,
    /// When endpoints that keep failing leave the picks.
    pub outlier: OutlierPolicy,
    /// Whether its endpoints are scraped (a default-backend host is not).
    pub scraped: bool,
    /// `forwardPriority`: the request's band goes upstream as the body's `priority`.
    pub forward_priority: bool,
    /// `resumeStreams`: a stream whose endpoint fails after the client began to receive it
    /// goes on at another endpoint (the HTTP front's).
    pub resume_streams: bool,
    policy: Policy,
    snapshot: ArcSwap<Snapshot>,
    /// Held by whoever replaces the snapshot with a changed copy (a round of scrapes, a
    /// membership change), so two writers never lose each other's update. Never taken on the
    /// request path.
    writer: Mutex<()>,
    picker: Arc<Mutex<Picker>>,
    admission: Arc<Admission>,
    /// Each member's counters, labelled once when the endpoint joins, so the request path
    /// never builds a label set. Replaced whole by a membership change, which keeps the
    /// handles of endpoints that stay.
    counters: ArcSwap<HashMap<EndpointId, EndpointCounters>>,
    /// `infergate_picker_latency_seconds` of this pool, labelled once.
    decision_time: Histogram,
    /// `inference_extension_scheduler_e2e_duration_seconds` (unlabelled, as upstream).
    scheduler_time: Histogram,
    /// The last [`RECENT_DECISIONS`] decisions, oldest first; a reload keeps them.
    recent: Mutex<VecDeque<RecentDecision>>,
    /// How its requests ended and their first tokens, over the last few seconds; shared with
    /// the pool of the same name a reload builds.
    recent_requests: Arc<RecentWindow>,
}

/// Decisions each pool keeps for the admin page.
pub const RECENT_DECISIONS: usize = 20;

/// One recent decision of a pool, for the admin page.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentDecision {
    /// When it was made (the gateway's clock).
    pub at: Duration,
    /// The model the request was routed by.
    pub model: String,
    /// The primary's address.
    pub endpoint: String,
    /// Candidates scored, when the pick was explained.
    pub candidates: Option<usize>,
    /// Endpoints removed by filters, when the pick was explained.
    pub removed: Option<usize>,
    /// The primary's total score, when the pick was explained.
    pub best_score: Option<f64>,
    /// How long the pick and dispatch took.
    pub decision: Duration,
}

/// The request-path counters of one endpoint: handles into the metric families, made when
/// the endpoint joins the pool.
#[derive(Debug, Clone)]
struct EndpointCounters {
    sent: Counter,
    retried_connect: Counter,
    retried_unavailable: Counter,
    retried_first_byte: Counter,
    ejections: Counter,
    metrics_frozen: Gauge,
}

/// What one membership change did to a pool, for its log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipChange {
    /// Endpoints that joined, as `name (address)`.
    pub joined: Vec<String>,
    /// Endpoints that left, as `name (address)`.
    pub left: Vec<String>,
    /// Endpoints the pool has now.
    pub endpoints: usize,
}

impl MembershipChange {
    /// Who joined and who left going from `before` to `after`.
    fn between(before: &[EndpointSpec], after: &[EndpointSpec]) -> Self {
        let ids = |specs: &[EndpointSpec]| specs.iter().map(|s| s.id).collect::<HashSet<_>>();
        let (was, is) = (ids(before), ids(after));
        let named = |specs: &[EndpointSpec], keep: &dyn Fn(EndpointId) -> bool| {
            specs
                .iter()
                .filter(|s| keep(s.id))
                .map(|s| format!("{} ({})", s.name, s.address))
                .collect()
        };
        Self {
            joined: named(after, &|id| !was.contains(&id)),
            left: named(before, &|id| !is.contains(&id)),
            endpoints: after.len(),
        }
    }
}

/// Why an attempt at an endpoint moved on to the next one, as the retry metric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    /// No answer: connect refused or timed out, reset, closed before the first byte.
    Connect,
    /// The endpoint answered 503.
    Unavailable,
    /// No first byte within the attempt's `firstByteTimeout`.
    FirstByteTimeout,
}

impl RetryReason {
    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::Connect => "connect",
            RetryReason::Unavailable => "status_503",
            RetryReason::FirstByteTimeout => "first_byte_timeout",
        }
    }
}

/// The picker's outlier policy from the config's.
fn outlier_policy(o: &infergate_config::gateway::ResolvedOutlierDetection) -> OutlierPolicy {
    OutlierPolicy {
        consecutive_failures: o.consecutive_failures.value,
        base_ejection: o.base_ejection_time.value,
        max_ejection: o.max_ejection_time.value,
        max_ejected_share: f64::from(o.max_ejection_percent.value) / 100.0,
        slow_start: o.slow_start_window.value,
        frozen_metrics_after: o.frozen_metrics_after.value,
    }
}

fn seed_of(name: &str) -> u64 {
    endpoint_id(name).0
}

impl EndpointCounters {
    fn of(metrics: &Metrics, pool: &str, address: &str) -> Self {
        let retried = |reason: RetryReason| {
            metrics
                .retries
                .get_or_create(&RetryLabels {
                    pool: pool.to_owned(),
                    endpoint: address.to_owned(),
                    reason: reason.as_str().to_owned(),
                })
                .clone()
        };
        let labels = EndpointLabels {
            pool: pool.to_owned(),
            endpoint: address.to_owned(),
        };
        let sent = metrics.routing_decisions.get_or_create(&labels).clone();
        let ejections = metrics.ejections.get_or_create(&labels).clone();
        let metrics_frozen = metrics.metrics_frozen.get_or_create(&labels).clone();
        Self {
            sent,
            retried_connect: retried(RetryReason::Connect),
            retried_unavailable: retried(RetryReason::Unavailable),
            retried_first_byte: retried(RetryReason::FirstByteTimeout),
            ejections,
            metrics_frozen,
        }
    }
}

/// Everything a pool is built from, named, so no two settings can be swapped by position.
struct PoolParts<'a> {
    name: &'a str,
    model_name: &'a str,
    adapters: Vec<String>,
    engine: Engine,
    h2c: bool,
    route_timeout: Option<Duration>,
    first_byte_timeout: FirstByteTimeout,
    stream_idle_timeout: Option<Duration>,
    outlier: OutlierPolicy,
    scraped: bool,
    forward_priority: bool,
    resume_streams: bool,
    admission: Admission,
    policy: Policy,
    /// The endpoints discovery found.
    members: Vec<EndpointSpec>,
    /// Where its endpoints' counters live.
    metrics: &'a Metrics,
}

fn lock_writer(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    // Guards no data of its own: a panicking writer left nothing half-written behind it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lock(m: &Mutex<Picker>) -> MutexGuard<'_, Picker> {
    // The picker's state is a cache of what it learned; a panic mid-update cannot make it
    // unsafe to keep using, only slightly wrong until it relearns.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PoolRuntime {
    /// A pool from its config, with the `members` discovery found. With `previous` (a
    /// reload), endpoints that stay keep their metrics, counters and in-flight guards, the
    /// picker is kept when the policy did not change, and flow control (its queue and what it
    /// measured) when its settings did not.
    pub fn new(
        config: &PoolConfig,
        gateway: &ResolvedGateway,
        policy: Policy,
        members: Vec<EndpointSpec>,
        previous: Option<&PoolRuntime>,
        metrics: &Metrics,
    ) -> Result<Self, GatewayError> {
        Self::build(
            PoolParts {
                name: &config.name,
                model_name: &config.model_name,
                adapters: config.adapters.clone(),
                engine: crate::policy::engine_dialect(config.engine_type.value),
                h2c: config.app_protocol.value == AppProtocol::H2c,
                route_timeout: config.timeouts.route.value,
                first_byte_timeout: config.timeouts.first_byte.value,
                stream_idle_timeout: Some(config.timeouts.stream_idle.value)
                    .filter(|t| !t.is_zero()),
                outlier: outlier_policy(&config.outlier_detection),
                scraped: true,
                forward_priority: config.forward_priority.value,
                resume_streams: config.resume_streams.value,
                admission: Admission::new(&config.name, gateway, true),
                policy,
                members,
                metrics,
            },
            previous,
        )
    }

    /// A pool of one host that is not scraped: `bbr.defaultBackend` naming a host.
    pub fn host(
        name: &str,
        authority: &str,
        gateway: &ResolvedGateway,
        metrics: &Metrics,
    ) -> Result<Self, GatewayError> {
        Self::build(
            PoolParts {
                name,
                model_name: "",
                adapters: Vec::new(),
                engine: Engine::Vllm,
                h2c: false,
                // A plain HTTP host: no model server's timing to go by, as before.
                route_timeout: None,
                first_byte_timeout: FirstByteTimeout::After(Duration::ZERO),
                stream_idle_timeout: None,
                // One host: there is nowhere else to send.
                outlier: OutlierPolicy::OFF,
                scraped: false,
                forward_priority: false,
                // Not a model server: its streams are not OpenAI answers.
                resume_streams: false,
                // A host that is not scraped gives flow control nothing to go on.
                admission: Admission::new(name, gateway, false),
                policy: Policy::RoundRobin,
                members: vec![discovery::host_member(authority)],
                metrics,
            },
            None,
        )
    }

    fn build(parts: PoolParts<'_>, previous: Option<&PoolRuntime>) -> Result<Self, GatewayError> {
        let PoolParts {
            name,
            model_name,
            adapters,
            engine,
            h2c,
            route_timeout,
            first_byte_timeout,
            stream_idle_timeout,
            outlier,
            scraped,
            forward_priority,
            resume_streams,
            admission,
            policy,
            members,
            metrics,
        } = parts;
        let counters = members
            .iter()
            .map(|m| (m.id, EndpointCounters::of(metrics, name, &m.address)))
            .collect();
        metrics
            .pool_endpoints
            .get_or_create(&PoolLabels {
                pool: name.to_owned(),
            })
            .set(i64::try_from(members.len()).unwrap_or(i64::MAX));
        let decision_time = metrics
            .picker_latency
            .get_or_create(&PoolLabels {
                pool: name.to_owned(),
            })
            .clone();
        let bad = |e: infergate_picker::PoolError| GatewayError::Picker {
            pool: name.to_owned(),
            reason: e.to_string(),
        };
        let (pool, state, picker, admission) = match previous {
            Some(prev) => {
                let old = prev.snapshot.load();
                let picker = if prev.policy == policy {
                    Arc::clone(&prev.picker)
                } else {
                    Arc::new(Mutex::new(Picker::new(policy.clone(), seed_of(name))))
                };
                let admission = if prev.admission.same_settings(&admission) {
                    Arc::clone(&prev.admission)
                } else {
                    // Requests queued in the old one stay with it; with no more observations
                    // it fails open and lets them go.
                    Arc::new(admission)
                };
                (
                    old.pool.with_members(members).map_err(bad)?,
                    old.state,
                    picker,
                    admission,
                )
            }
            None => (
                Pool::new(members).map_err(bad)?,
                PoolState::unknown(),
                Arc::new(Mutex::new(Picker::new(policy.clone(), seed_of(name)))),
                Arc::new(admission),
            ),
        };
        Ok(Self {
            name: name.to_owned(),
            model_name: model_name.to_owned(),
            adapters,
            engine,
            h2c,
            route_timeout,
            first_byte_timeout,
            stream_idle_timeout,
            outlier,
            scraped,
            forward_priority,
            resume_streams,
            policy,
            snapshot: ArcSwap::from_pointee(Snapshot { pool, state }),
            writer: Mutex::new(()),
            picker,
            admission,
            counters: ArcSwap::from_pointee(counters),
            decision_time,
            scheduler_time: metrics.upstream.scheduler.clone(),
            recent: Mutex::new(
                previous
                    .map(|p| p.recent_decisions().into_iter().collect())
                    .unwrap_or_default(),
            ),
            recent_requests: previous.map_or_else(Arc::default, |p| Arc::clone(&p.recent_requests)),
        })
    }

    /// How the pool's requests ended and their first tokens, over the last few seconds (the
    /// member status document's error rate and P99 TTFT). Both fronts record into it.
    pub fn recent(&self) -> &RecentWindow {
        &self.recent_requests
    }

    /// Records how long one pick and dispatch took, in `infergate_picker_latency_seconds` and
    /// upstream's `inference_extension_scheduler_e2e_duration_seconds`.
    pub fn observe_decision(&self, took: Duration) {
        self.decision_time.observe(took.as_secs_f64());
        self.scheduler_time.observe(took.as_secs_f64());
    }

    /// Keeps `d` among the pool's recent decisions (the oldest leaves when full).
    pub fn record_decision(&self, d: RecentDecision) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() == RECENT_DECISIONS {
            recent.pop_front();
        }
        recent.push_back(d);
    }

    /// The pool's recent decisions, oldest first.
    pub fn recent_decisions(&self) -> Vec<RecentDecision> {
        // A list of values: a panic while pushing cannot leave it unusable.
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.iter().cloned().collect()
    }

    /// Counts a request sent to `endpoint` (fallbacks included) in
    /// `infergate_routing_decisions_total`.
    pub fn count_sent(&self, endpoint: EndpointId) {
        if let Some(c) = self.counters.load().get(&endpoint) {
            c.sent.inc();
        }
    }

    /// Counts an attempt at `endpoint` that moved on to the next endpoint in
    /// `infergate_upstream_retries_total`.
    pub fn count_retry(&self, endpoint: EndpointId, reason: RetryReason) {
        if let Some(c) = self.counters.load().get(&endpoint) {
            match reason {
                RetryReason::Connect => c.retried_connect.inc(),
                RetryReason::Unavailable => c.retried_unavailable.inc(),
                RetryReason::FirstByteTimeout => c.retried_first_byte.inc(),
            };
        }
    }

    /// Records what an attempt at `endpoint` came to, for outlier detection; an ejection is
    /// logged and counted in `infergate_endpoint_ejections_total`.
    pub fn record_outcome(&self, endpoint: EndpointId, outcome: AttemptOutcome, now: Duration) {
        let snap = self.snapshot.load();
        let Some(length) = snap
            .pool
            .record_outcome(endpoint, outcome, now, &self.outlier)
        else {
            return;
        };
        if let Some(c) = self.counters.load().get(&endpoint) {
            c.ejections.inc();
        }
        tracing::warn!(
            pool = %self.name,
            endpoint = snap.pool.address(endpoint).unwrap_or("?"),
            ejected_for = ?length,
            "endpoint ejected: its attempts keep failing"
        );
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// The picker's policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The pool's flow control: every request is admitted here before it is picked.
    pub fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }

    /// Picks the primary and fallbacks and dispatches to the primary, in one short critical
    /// section; with `explain`, the pick carries its explanation.
    pub fn pick(
        &self,
        snap: &Snapshot,
        req: &RequestFeatures,
        now: Duration,
        explain: bool,
    ) -> Result<(Pick, Dispatch), PickError> {
        let mut picker = lock(&self.picker);
        let pick = if explain {
            picker.pick_explained(&snap.pool, req, now)?
        } else {
            picker.pick(&snap.pool, req, now)?
        };
        let dispatch = picker.on_dispatch(&snap.pool, pick.primary, req, now)?;
        Ok((pick, dispatch))
    }

    /// The pool as its picker sees it at `now`, with the snapshot it was read from. Holds the
    /// picker's lock while it walks the pool: for the admin listener, not the request path.
    pub fn view(&self, now: Duration) -> (Arc<Snapshot>, PoolView) {
        let snap = self.snapshot();
        let view = lock(&self.picker).view(&snap.pool, now);
        (snap, view)
    }

    /// Every endpoint of the pool in the order a request should try them now: the primary and
    /// its fallbacks, then the rest in the pool's order; nothing dispatched. For a stream that
    /// goes on elsewhere, which has already lost the client one endpoint and would rather try
    /// every other than give up.
    pub fn candidates(
        &self,
        snap: &Snapshot,
        req: &RequestFeatures,
        now: Duration,
    ) -> Result<Vec<EndpointId>, PickError> {
        let pick = lock(&self.picker).pick(&snap.pool, req, now)?;
        Ok(pick.then_the_rest(&snap.pool).collect())
    }

    /// Dispatches to a fallback after the primary failed before answering.
    pub fn dispatch(
        &self,
        snap: &Snapshot,
        endpoint: EndpointId,
        req: &RequestFeatures,
        now: Duration,
    ) -> Result<Dispatch, PickError> {
        lock(&self.picker).on_dispatch(&snap.pool, endpoint, req, now)
    }

    /// Teaches the latency model a first token.
    pub fn observe_ttft(&self, ticket: &TtftTicket, ttft: Duration) {
        lock(&self.picker).observe_ttft(ticket, ttft);
    }

    /// Installs a round of scrapes: a new snapshot with them applied, swapped in whole. Only the
    /// pool's publisher calls it, so there is one writer and no lost update.
    pub fn install(
        &self,
        scrapes: Vec<(EndpointId, ScrapedMetrics)>,
        now: Duration,
        metrics: &Metrics,
    ) {
        let _writing = lock_writer(&self.writer);
        let mut pool = self.snapshot.load().pool.clone();
        let landed: Vec<EndpointId> = scrapes.iter().map(|(id, _)| *id).collect();
        let counters = self.counters.load();
        for (id, m) in scrapes {
            // An endpoint removed by a reload while its scrape was in flight: nothing to do.
            let Ok(progress) = pool.update_scrape(id, m, self.outlier.frozen_metrics_after) else {
                continue;
            };
            let frozen = matches!(progress, Progress::Frozen { .. });
            if let Some(c) = counters.get(&id) {
                c.metrics_frozen.set(i64::from(frozen));
            }
            if let Progress::Frozen { since, newly: true } = progress {
                self.on_frozen(&pool, id, since, now, counters.get(&id));
            }
        }
        let state = self.admission.observe(&pool, &landed, now);
        let labels = PoolLabels {
            pool: self.name.clone(),
        };
        metrics
            .queue_spread
            .get_or_create(&labels)
            .set(state.queue_spread);
        metrics
            .saturation
            .get_or_create(&labels)
            .set(state.saturation);
        metrics
            .upstream
            .pool_saturation
            .get_or_create(&InferencePoolLabels {
                inference_pool: self.name.clone(),
            })
            .set(state.saturation.min(1.0));
        self.snapshot.store(Arc::new(Snapshot { pool, state }));
    }

    /// An endpoint whose metrics stopped moving though requests were sent there: when first
    /// seen so, logged and ejected (and counted) as a run of failures would be: for that long it
    /// is out even of a policy without the stale filter.
    fn on_frozen(
        &self,
        pool: &Pool,
        id: EndpointId,
        since: Duration,
        now: Duration,
        counters: Option<&EndpointCounters>,
    ) {
        let address = pool.address(id).unwrap_or("?");
        tracing::warn!(
            pool = %self.name,
            endpoint = address,
            unchanged_for = ?now.saturating_sub(since),
            "endpoint's metrics stopped changing though requests were sent there; they count as stale until they change"
        );
        if let Some(length) = pool.eject_frozen(id, now, &self.outlier) {
            if let Some(c) = counters {
                c.ejections.inc();
            }
            tracing::warn!(
                pool = %self.name,
                endpoint = address,
                ejected_for = ?length,
                "endpoint ejected: its metrics stopped changing"
            );
        }
    }

    /// Replaces the members with what discovery found now, when they differ: endpoints that
    /// stay keep their scrapes, picker state, in-flight credit and counters (only a joining
    /// endpoint gets new ones), so one pod's change costs one endpoint's state, not the
    /// pool's. What changed, if anything (then the scrapers must follow).
    pub fn set_members(
        &self,
        members: Vec<EndpointSpec>,
        metrics: &Metrics,
    ) -> Result<Option<MembershipChange>, GatewayError> {
        let _writing = lock_writer(&self.writer);
        let old = self.snapshot.load_full();
        if old.pool.specs() == members.as_slice() {
            return Ok(None);
        }
        let change = MembershipChange::between(old.pool.specs(), &members);
        let pool = old
            .pool
            .with_members(members)
            .map_err(|e| GatewayError::Picker {
                pool: self.name.clone(),
                reason: e.to_string(),
            })?;
        let old_counters = self.counters.load();
        let counters: HashMap<EndpointId, EndpointCounters> = pool
            .specs()
            .iter()
            .map(|m| {
                let c = old_counters
                    .get(&m.id)
                    .cloned()
                    .unwrap_or_else(|| EndpointCounters::of(metrics, &self.name, &m.address));
                (m.id, c)
            })
            .collect();
        let labels = PoolLabels {
            pool: self.name.clone(),
        };
        metrics
            .pool_endpoints
            .get_or_create(&labels)
            .set(i64::try_from(pool.specs().len()).unwrap_or(i64::MAX));
        metrics.membership_changes.get_or_create(&labels).inc();
        self.counters.store(Arc::new(counters));
        self.snapshot.store(Arc::new(Snapshot {
            pool,
            state: old.state,
        }));
        Ok(Some(change))
    }

    /// Whether every endpoint has been scraped at least once.
    pub fn all_scraped(&self) -> bool {
        let snap = self.snapshot.load();
        snap.pool
            .specs()
            .iter()
            .all(|s| snap.pool.metrics(s.id).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_picker::ScrapedMetrics;

    fn gateway() -> ResolvedGateway {
        let yaml = "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {enabled: true}\n  discovery: kubernetes\n  schedulers:\n    - name: p\n      modelName: m\n      modelSelector: {matchLabels: {app: a}}\n";
        infergate_config::gateway::load_from_str(yaml)
            .expect("parses")
            .resolve()
            .expect("resolves")
    }

    fn member(i: u32) -> EndpointSpec {
        let address = format!("10.0.{}.{}:8000", i / 250, i % 250 + 1);
        EndpointSpec::new(endpoint_id(&address).0, address).with_name(format!("pod-{i}-rank-0"))
    }

    #[test]
    fn one_pod_joining_keeps_every_other_endpoints_scrapes_and_counters() {
        let g = gateway();
        let metrics = Metrics::new();
        let members: Vec<EndpointSpec> = (0..1000).map(member).collect();
        let policy = crate::policy::pool_policy(&g.pools[0], None, None).expect("policy");
        let pool = PoolRuntime::new(&g.pools[0], &g, policy, members.clone(), None, &metrics)
            .expect("pool");
        let scrapes = members
            .iter()
            .map(|m| {
                let s = ScrapedMetrics {
                    waiting: Some(3),
                    ..ScrapedMetrics::empty(Duration::from_secs(1))
                };
                (m.id, s)
            })
            .collect();
        pool.install(scrapes, Duration::from_secs(1), &metrics);
        pool.count_sent(members[7].id);
        let counter_before = pool.counters.load()[&members[7].id].sent.clone();

        let mut grown = members.clone();
        grown.push(member(1000));
        let change = pool
            .set_members(grown.clone(), &metrics)
            .expect("installs")
            .expect("a change");
        assert_eq!(change.joined, ["pod-1000-rank-0 (10.0.4.1:8000)"]);
        assert!(change.left.is_empty());
        assert_eq!(change.endpoints, 1001);

        let snap = pool.snapshot();
        assert_eq!(snap.pool.specs().len(), 1001);
        // The 1,000 that stayed keep what was scraped; only the newcomer has nothing yet.
        assert!(members.iter().all(|m| snap.pool.metrics(m.id).is_some()));
        assert!(snap.pool.metrics(grown[1000].id).is_none());
        // The counters that stayed are the same handles, not new series.
        pool.count_sent(members[7].id);
        assert_eq!(counter_before.get(), 2);
        // The same members again is no change at all.
        assert_eq!(pool.set_members(grown, &metrics).expect("ok"), None);
    }

    #[test]
    fn recent_decisions_and_requests_survive_a_reload() {
        let g = gateway();
        let metrics = Metrics::new();
        let policy = crate::policy::pool_policy(&g.pools[0], None, None).expect("policy");
        let members: Vec<EndpointSpec> = (0..2).map(member).collect();
        let pool = PoolRuntime::new(
            &g.pools[0],
            &g,
            policy.clone(),
            members.clone(),
            None,
            &metrics,
        )
        .expect("pool");
        for i in 0..(RECENT_DECISIONS as u64 + 5) {
            pool.record_decision(RecentDecision {
                at: Duration::from_secs(i),
                model: "m".into(),
                endpoint: "e".into(),
                candidates: None,
                removed: None,
                best_score: None,
                decision: Duration::ZERO,
            });
        }
        let kept = pool.recent_decisions();
        assert_eq!(kept.len(), RECENT_DECISIONS);
        assert_eq!(kept[0].at, Duration::from_secs(5), "the oldest five left");
        pool.recent().record_request(502);
        let reloaded = PoolRuntime::new(&g.pools[0], &g, policy, members, Some(&pool), &metrics)
            .expect("pool");
        assert_eq!(reloaded.recent_decisions(), kept);
        // The recent requests are the same window, whichever table a request counts in.
        reloaded.recent().record_request(200);
        assert_eq!(pool.recent().summary().requests, 2);
        assert_eq!(reloaded.recent().summary().failed, 1);
    }

    #[test]
    fn a_pod_leaving_takes_only_its_own_endpoint() {
        let g = gateway();
        let metrics = Metrics::new();
        let members: Vec<EndpointSpec> = (0..10).map(member).collect();
        let policy = crate::policy::pool_policy(&g.pools[0], None, None).expect("policy");
        let pool = PoolRuntime::new(&g.pools[0], &g, policy, members.clone(), None, &metrics)
            .expect("pool");
        let fewer: Vec<EndpointSpec> = members.iter().skip(1).cloned().collect();
        let change = pool
            .set_members(fewer, &metrics)
            .expect("ok")
            .expect("a change");
        assert_eq!(change.left, ["pod-0-rank-0 (10.0.0.1:8000)"]);
        assert!(change.joined.is_empty());
        assert!(!pool.counters.load().contains_key(&members[0].id));
    }
}
