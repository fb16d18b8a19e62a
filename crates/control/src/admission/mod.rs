//! Admission: the pool's flow controller ([`infergate_flow`]) driven in real time.
//!
//! A request asks with its band, tenant and size. It goes on at once, waits in its band's queue
//! (behind higher bands, taking turns with other tenants, first come first served within its
//! tenant), or is refused: Sheddable at saturation with 429, a full queue with 429, a queue TTL
//! run out with 503 — each with `x-llm-d-request-dropped-reason`, every 429 with `Retry-After`.
//!
//! The controller is pure and told the time; this module gives it a clock and its events:
//! - every round of scrapes installs a new pool observation ([`Admission::observe`]);
//! - every admitted request holds a [`FlowPermit`] for as long as it is in flight; dropping it
//!   (the response ended, failed, or its client went away) frees its capacity;
//! - a driver task per pool, started with the first queued request, wakes at the controller's
//!   next deadline (a TTL, or the observation going stale) and when a newly queued request or an
//!   observation may have moved that deadline.
//!
//! After each event the controller is polled and its decisions are handed to the waiting
//! requests. Decisions are made under the pool's flow lock (held for microseconds) and delivered
//! after it is released, so a permit dropped by a request whose client left never re-enters it.
//!
//! Invariant: every request admitted by [`Admission::enqueue`] or by a queued decision owns
//! exactly one [`FlowPermit`], so the controller hears of every completion exactly once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use infergate_config::gateway::{Band, ResolvedGateway};
use infergate_flow::{
    Admission as Answer, Decision, Detector, DropReason, EndpointLoad, FlowConfig, FlowController,
    FlowRequest, Outcome, PoolState, QueueLength, RecentPace, Rejection, RequestId,
};
use infergate_picker::{EndpointId, LoraInfo, Pool};
use tokio::sync::{oneshot, Notify};

use infergate_telemetry::metrics::{FlowBandLabels, FlowRejectionLabels, Metrics, PoolLabels};

use crate::clock::Clock;
use infergate_api_error::ApiError;

mod permit;

pub use permit::{Admitted, FlowPermit, Waiting};

/// What flow control reads from a request: its identity and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// Its priority band.
    pub band: Band,
    /// Its tenant, when it names one.
    pub tenant: Option<String>,
    /// Its body's size, for the byte caps.
    pub bytes: u64,
}

type Verdict = Result<FlowPermit, ApiError>;

#[derive(Debug)]
struct State {
    flow: FlowController,
    waiters: HashMap<RequestId, oneshot::Sender<Verdict>>,
}

/// Flow control of one pool at run time.
#[derive(Debug)]
pub struct Admission {
    pool: String,
    clock: Clock,
    detector: Detector,
    state: Mutex<State>,
    next_id: AtomicU64,
    wake: Arc<Notify>,
    driver_started: AtomicBool,
    metrics: OnceLock<Arc<Metrics>>,
    /// What each endpoint's scrapes leave behind for the next observation.
    at_scrape: Mutex<HashMap<EndpointId, ScrapeMarks>>,
    /// Requests queued over every band, as last recorded (after each change of the queues),
    /// so a reader off the request path never takes the flow lock.
    queued_requests: AtomicU64,
}

/// What an endpoint's scrapes leave behind.
#[derive(Debug, Default)]
struct ScrapeMarks {
    /// Requests this gateway had in flight to it when its last scrape landed.
    in_flight: u64,
    /// Its decode pace over its recent scrapes.
    pace: RecentPace,
}

fn band_name(band: Band) -> String {
    band.to_string()
}

impl Admission {
    /// Flow control of pool `pool` as `config.flow_control` describes it; `enabled: false`
    /// admits every request at once whatever the config says (a host that is not scraped).
    pub fn new(pool: &str, config: &ResolvedGateway, enabled: bool) -> Self {
        let mut settings = FlowConfig::from_resolved(&config.flow_control);
        settings.enabled &= enabled;
        Self {
            pool: pool.to_owned(),
            clock: Clock::new(),
            detector: Detector::from_resolved(&config.flow_control),
            state: Mutex::new(State {
                flow: FlowController::new(settings),
                waiters: HashMap::new(),
            }),
            next_id: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
            driver_started: AtomicBool::new(false),
            metrics: OnceLock::new(),
            at_scrape: Mutex::new(HashMap::new()),
            queued_requests: AtomicU64::new(0),
        }
    }

    /// Whether `other` would control the same way, so a reload can keep this one (with its
    /// queue, credit and drain rate).
    pub fn same_settings(&self, other: &Admission) -> bool {
        self.detector == other.detector && self.lock().flow.config() == other.lock().flow.config()
    }

    /// Where queue sizes, waits and refusals are counted; the first call wins.
    pub fn attach_metrics(&self, metrics: &Arc<Metrics>) {
        if self.metrics.set(Arc::clone(metrics)).is_ok() {
            let pool = PoolLabels {
                pool: self.pool.clone(),
            };
            let _ = metrics.shed.get_or_create(&pool);
            // Every refusal series at zero, so a dashboard shows a rate of 0 rather than no
            // data before the first refusal.
            for band in Band::ALL {
                for reason in DropReason::ALL {
                    let _ = metrics.flow_rejections.get_or_create(&FlowRejectionLabels {
                        pool: self.pool.clone(),
                        band: band_name(band),
                        reason: reason.as_str().to_owned(),
                    });
                }
            }
            let lengths = self.lengths(&self.lock());
            self.record_lengths(&lengths);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The controller's indexes are updated together in each call, and no call panics
        // half-way by design; a poisoned lock still holds a usable controller.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a request, waiting in the queue if it must.
    pub async fn admit(self: &Arc<Self>, ask: Ask) -> Result<FlowPermit, ApiError> {
        match self.enqueue(ask)? {
            Admitted::Now(permit) => Ok(permit),
            Admitted::Queued(waiting) => waiting.wait().await,
        }
    }

    /// Admits a request without waiting: it goes on now, is queued, or is refused. Must run
    /// inside a tokio runtime (the first queued request starts the pool's driver task).
    pub fn enqueue(self: &Arc<Self>, ask: Ask) -> Result<Admitted, ApiError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let band = ask.band;
        let req = FlowRequest {
            id,
            band,
            tenant: ask.tenant,
            bytes: ask.bytes,
        };
        let now = self.clock.now();
        let mut st = self.lock();
        // Ids come from a counter that never repeats, so the controller never sees a duplicate.
        let answer = st.flow.enqueue(req, now).map_err(|e| {
            ApiError::no_endpoint(&self.pool, format!("flow control refused an id: {e}"))
        })?;
        match answer {
            Answer::DispatchNow => {
                drop(st);
                self.observe_wait(band, Duration::ZERO);
                Ok(Admitted::Now(FlowPermit {
                    admission: Arc::clone(self),
                    band,
                    waited: Duration::ZERO,
                }))
            }
            Answer::Rejected(r) => {
                drop(st);
                Err(self.refuse(band, &r))
            }
            Answer::Queued { .. } => {
                let (tx, rx) = oneshot::channel();
                st.waiters.insert(id, tx);
                // Queueing may have displaced lower-band requests: tell them now.
                self.settle(st, now);
                self.start_driver();
                self.wake.notify_one();
                Ok(Admitted::Queued(Waiting {
                    admission: Arc::clone(self),
                    id,
                    rx: Some(rx),
                }))
            }
        }
    }

    /// Installs an observation of `pool`, whose endpoints `landed` were just scraped (metrics
    /// ages measured at `now` on the gateway's clock), and returns it.
    ///
    /// Each endpoint's waiting queue is credited with the growth of this gateway's requests in
    /// flight to it since its scrape landed: load the scrape cannot show yet. Growth, not the
    /// requests sent since: against a fast server that finishes them as they come, requests
    /// sent since the scrape are no new load, and counting them would hold traffic back.
    pub fn observe(
        self: &Arc<Self>,
        pool: &Pool,
        landed: &[EndpointId],
        now: Duration,
    ) -> PoolState {
        let in_flight = |id: EndpointId| pool.counters(id).map_or(0, |c| c.in_flight_requests());
        let mut at_scrape = self
            .at_scrape
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for &id in landed {
            let marks = at_scrape.entry(id).or_default();
            marks.in_flight = in_flight(id);
            if let Some((t, at)) = pool
                .metrics(id)
                .and_then(|m| Some((m.inter_token_latency?, m.scraped_at)))
            {
                marks.pace.record(at, t.seconds, t.count);
            }
        }
        if at_scrape.len() > pool.len() {
            // Endpoints a reload removed.
            at_scrape.retain(|id, _| pool.position(*id).is_some());
        }
        let loads = pool.specs().iter().filter_map(|s| {
            let m = pool.metrics(s.id)?;
            let now_in_flight = in_flight(s.id);
            let marks = at_scrape.get(&s.id);
            let added = now_in_flight.saturating_sub(marks.map_or(now_in_flight, |m| m.in_flight));
            Some(EndpointLoad {
                waiting: m.waiting.map(|w| w.saturating_add(added) as f64),
                kv_usage: m.kv_usage,
                running: m.running.map(|r| r as f64),
                adapter_bound: m.lora.as_ref().is_some_and(LoraInfo::waits_for_a_slot),
                inter_token_latency: marks.and_then(|m| m.pace.mean_seconds()),
                age: m.age(now),
            })
        });
        let state = self.detector.observe(loads);
        drop(at_scrape);
        let mut st = self.lock();
        let at = self.clock.now();
        st.flow.observe(state, at);
        let waiting = st.flow.total_queued().requests > 0;
        self.settle(st, at);
        if waiting {
            // The observation moved the moment it goes stale.
            self.wake.notify_one();
        }
        state
    }

    /// Each of `ids`' decode pace as flow control last read it, in order: its mean inter-token
    /// latency in seconds over its recent scrapes (`None` before two scrapes with tokens
    /// between them). One lock for them all.
    pub fn decode_paces(&self, ids: impl IntoIterator<Item = EndpointId>) -> Vec<Option<f64>> {
        let marks = self
            .at_scrape
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        ids.into_iter()
            .map(|id| marks.get(&id).and_then(|m| m.pace.mean_seconds()))
            .collect()
    }

    /// What is queued in `band`.
    pub fn queued(&self, band: Band) -> QueueLength {
        self.lock().flow.queued(band)
    }

    /// Requests waiting in the pool's queue over every band, as of the last change of the
    /// queues; one atomic load, no lock.
    pub fn queued_requests(&self) -> u64 {
        self.queued_requests.load(Ordering::Relaxed)
    }

    fn complete(self: &Arc<Self>) {
        let now = self.clock.now();
        let mut st = self.lock();
        st.flow.on_complete(now);
        if st.flow.total_queued().requests > 0 {
            self.settle(st, now);
        }
    }

    fn cancel(&self, id: RequestId) {
        let mut st = self.lock();
        st.waiters.remove(&id);
        if st.flow.cancel(id) {
            let lengths = self.lengths(&st);
            drop(st);
            self.record_lengths(&lengths);
        }
    }

    /// Polls the controller and hands each decision to its request, after the lock is gone.
    fn settle(self: &Arc<Self>, mut st: MutexGuard<'_, State>, now: Duration) {
        let decisions = st.flow.poll(now);
        let delivered: Vec<(Option<oneshot::Sender<Verdict>>, Decision)> = decisions
            .into_iter()
            .map(|d| (st.waiters.remove(&d.id), d))
            .collect();
        let lengths = self.lengths(&st);
        drop(st);
        self.record_lengths(&lengths);
        for (tx, d) in delivered {
            let verdict = match d.outcome {
                Outcome::Dispatch => {
                    self.observe_wait(d.band, d.waited);
                    Ok(FlowPermit {
                        admission: Arc::clone(self),
                        band: d.band,
                        waited: d.waited,
                    })
                }
                Outcome::Reject(r) => Err(self.refuse(d.band, &r)),
            };
            // A request that went away drops its permit here, which completes it.
            if let Some(tx) = tx {
                let _ = tx.send(verdict);
            }
        }
    }

    /// Runs what is due now: TTLs, and a stale observation opening the gates.
    fn tick(self: &Arc<Self>) {
        let now = self.clock.now();
        let st = self.lock();
        self.settle(st, now);
    }

    fn start_driver(self: &Arc<Self>) {
        if !self.driver_started.swap(true, Ordering::AcqRel) {
            tokio::spawn(drive(Arc::downgrade(self), Arc::clone(&self.wake)));
        }
    }

    fn refuse(&self, band: Band, r: &Rejection) -> ApiError {
        if let Some(m) = self.metrics.get() {
            m.flow_rejections
                .get_or_create(&FlowRejectionLabels {
                    pool: self.pool.clone(),
                    band: band_name(band),
                    reason: r.reason.as_str().to_owned(),
                })
                .inc();
            if r.status() == 429 {
                m.shed
                    .get_or_create(&PoolLabels {
                        pool: self.pool.clone(),
                    })
                    .inc();
            }
        }
        ApiError::flow_refused(&self.pool, band, r)
    }

    fn observe_wait(&self, band: Band, waited: Duration) {
        if let Some(m) = self.metrics.get() {
            m.flow_queue_wait
                .get_or_create(&self.band_labels(band))
                .observe(waited.as_secs_f64());
        }
    }

    fn band_labels(&self, band: Band) -> FlowBandLabels {
        FlowBandLabels {
            pool: self.pool.clone(),
            band: band_name(band),
        }
    }

    fn lengths(&self, st: &State) -> [QueueLength; 3] {
        Band::ALL.map(|b| st.flow.queued(b))
    }

    fn record_lengths(&self, lengths: &[QueueLength; 3]) {
        let total = lengths.iter().map(|l| l.requests).sum::<usize>();
        self.queued_requests
            .store(u64::try_from(total).unwrap_or(u64::MAX), Ordering::Relaxed);
        let Some(m) = self.metrics.get() else {
            return;
        };
        for (band, len) in Band::ALL.into_iter().zip(lengths) {
            let labels = self.band_labels(band);
            let requests = i64::try_from(len.requests).unwrap_or(i64::MAX);
            let bytes = i64::try_from(len.bytes).unwrap_or(i64::MAX);
            m.flow_queue_requests.get_or_create(&labels).set(requests);
            m.flow_queue_bytes.get_or_create(&labels).set(bytes);
        }
    }

    fn next_deadline(&self) -> Option<tokio::time::Instant> {
        let at = self.lock().flow.next_deadline()?;
        Some(self.clock.instant(at))
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        // Lets the driver see that its pool is gone.
        self.wake.notify_one();
    }
}

/// The pool's timer: sleeps until the controller's next deadline or a nudge, then polls. Ends
/// when the pool's flow control is dropped (a reload replaced it and no request holds it).
async fn drive(admission: Weak<Admission>, wake: Arc<Notify>) {
    loop {
        let deadline = match admission.upgrade() {
            Some(a) => a.next_deadline(),
            None => return,
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
        match admission.upgrade() {
            Some(a) => a.tick(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests;
