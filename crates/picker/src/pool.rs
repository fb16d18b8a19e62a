//! The pool snapshot: the endpoints of one model pool and what was last scraped from each.
//!
//! Membership (ids, addresses, labels, counters and the lookup maps) is immutable and shared
//! behind an `Arc`; it is rebuilt only when discovery changes the set of endpoints. Metrics are a
//! plain vector beside it, so the control plane can clone a pool, apply a round of scrapes and
//! swap the result in while requests keep reading the old one. A pick never rebuilds or walks
//! membership: everything it needs per endpoint is indexed by position.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::nanos;
use crate::counters::{DispatchMark, EndpointCounters, LocalLoad};
use crate::endpoint::{EndpointId, EndpointSpec, ScrapedMetrics};
use crate::error::PoolError;
use crate::progress::{Progress, ProgressWatch};

/// `scraped_ns` of an endpoint that was never scraped.
pub(crate) const NEVER_SCRAPED: u64 = u64::MAX;

/// A scraped signal as stored in the pool's compact per-endpoint array: NaN when unknown (or not
/// finite).
pub(crate) fn signal(x: Option<f64>) -> f64 {
    x.filter(|v| v.is_finite()).unwrap_or(f64::NAN)
}

/// The immutable part of a pool: who is in it.
#[derive(Debug)]
pub(crate) struct Membership {
    pub(crate) specs: Vec<EndpointSpec>,
    pub(crate) counters: Vec<Arc<EndpointCounters>>,
    by_id: HashMap<EndpointId, usize>,
    by_address: HashMap<String, usize>,
}

#[derive(Debug, Clone, Default)]
struct EndpointState {
    metrics: Option<ScrapedMetrics>,
    progress: ProgressWatch,
}

/// One endpoint's scraped signals, as a pick reads them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signals {
    /// When the scrape landed; `None` before the first one.
    pub scraped_at: Option<Duration>,
    /// Waiting requests, NaN when unknown.
    pub waiting: f64,
    /// Running requests, NaN when unknown.
    pub running: f64,
    /// KV use clamped to `0..=1`, NaN when unknown.
    pub kv: f64,
    /// `1 / KV capacity in tokens`: the share of the cache one token takes; 0 when the capacity is
    /// unknown, so a projection adds nothing (kept as a reciprocal so that a pick multiplies).
    pub kv_share_per_token: f64,
    /// Dispatched totals when the scrape landed; the credit is counted from here.
    pub mark: DispatchMark,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            scraped_at: None,
            waiting: f64::NAN,
            running: f64::NAN,
            kv: f64::NAN,
            kv_share_per_token: 0.0,
            mark: DispatchMark::default(),
        }
    }
}

impl Signals {
    fn of(m: &ScrapedMetrics, mark: DispatchMark) -> Self {
        Self {
            scraped_at: Some(m.scraped_at),
            waiting: signal(m.waiting.map(|w| w as f64)),
            running: signal(m.running.map(|r| r as f64)),
            kv: signal(m.kv_usage.map(|k| k.clamp(0.0, 1.0))),
            kv_share_per_token: m
                .kv_capacity_tokens()
                .filter(|&c| c > 0)
                .map_or(0.0, |c| 1.0 / c as f64),
            mark,
        }
    }
}

/// Every endpoint's [`Signals`], one column per signal, indexed by position.
///
/// Columns rather than one record per endpoint because a pick copies whole columns into its
/// candidate set: at thousands of endpoints, streaming 8 bytes per endpoint per signal instead of
/// a 64-byte record is most of the difference between a fast pick and a slow one.
#[derive(Debug, Clone, Default)]
pub(crate) struct SignalColumns {
    /// When the scrape landed, in nanoseconds since the caller's epoch; [`NEVER_SCRAPED`] before
    /// the first.
    pub scraped_ns: Vec<u64>,
    /// Waiting requests, NaN when unknown.
    pub waiting: Vec<f64>,
    /// Running requests, NaN when unknown.
    pub running: Vec<f64>,
    /// KV use clamped to `0..=1`, NaN when unknown.
    pub kv: Vec<f64>,
    /// `1 / KV capacity in tokens`, 0 when unknown.
    pub kv_share_per_token: Vec<f64>,
    /// Dispatched totals when the scrape landed.
    pub marks: Vec<DispatchMark>,
}

impl SignalColumns {
    fn with_capacity(n: usize) -> Self {
        Self {
            scraped_ns: Vec::with_capacity(n),
            waiting: Vec::with_capacity(n),
            running: Vec::with_capacity(n),
            kv: Vec::with_capacity(n),
            kv_share_per_token: Vec::with_capacity(n),
            marks: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, s: Signals) {
        self.scraped_ns
            .push(s.scraped_at.map_or(NEVER_SCRAPED, nanos));
        self.waiting.push(s.waiting);
        self.running.push(s.running);
        self.kv.push(s.kv);
        self.kv_share_per_token.push(s.kv_share_per_token);
        self.marks.push(s.mark);
    }

    fn set(&mut self, pos: usize, s: Signals) {
        let cells = (
            self.scraped_ns.get_mut(pos),
            self.waiting.get_mut(pos),
            self.running.get_mut(pos),
            self.kv.get_mut(pos),
            self.kv_share_per_token.get_mut(pos),
            self.marks.get_mut(pos),
        );
        if let (Some(at), Some(w), Some(r), Some(kv), Some(cap), Some(mark)) = cells {
            *at = s.scraped_at.map_or(NEVER_SCRAPED, nanos);
            *w = s.waiting;
            *r = s.running;
            *kv = s.kv;
            *cap = s.kv_share_per_token;
            *mark = s.mark;
        }
    }

    fn get(&self, pos: usize) -> Signals {
        let Some(&at) = self.scraped_ns.get(pos) else {
            return Signals::default();
        };
        let f = |col: &[f64]| col.get(pos).copied().unwrap_or(f64::NAN);
        Signals {
            scraped_at: (at != NEVER_SCRAPED).then(|| Duration::from_nanos(at)),
            waiting: f(&self.waiting),
            running: f(&self.running),
            kv: f(&self.kv),
            kv_share_per_token: self.kv_share_per_token.get(pos).copied().unwrap_or(0.0),
            mark: self.marks.get(pos).copied().unwrap_or_default(),
        }
    }
}

/// A snapshot of one pool. Cheap to clone relative to a scrape round (membership is shared).
#[derive(Debug, Clone)]
pub struct Pool {
    members: Arc<Membership>,
    states: Vec<EndpointState>,
    signals: SignalColumns,
}

impl Pool {
    /// A pool of `specs`, with no metrics yet and fresh counters.
    ///
    /// Ids and addresses must be unique.
    pub fn new(specs: Vec<EndpointSpec>) -> Result<Self, PoolError> {
        let counters = specs.iter().map(|_| EndpointCounters::new()).collect();
        let states = vec![EndpointState::default(); specs.len()];
        let mut signals = SignalColumns::with_capacity(specs.len());
        for _ in &specs {
            signals.push(Signals::default());
        }
        Ok(Self {
            members: Arc::new(Membership::new(specs, counters)?),
            states,
            signals,
        })
    }

    /// A pool with new membership `specs`. An endpoint whose id was already here keeps its
    /// metrics, its counters (so in-flight guards keep counting) and its dispatch mark.
    pub fn with_members(&self, specs: Vec<EndpointSpec>) -> Result<Self, PoolError> {
        let mut counters = Vec::with_capacity(specs.len());
        let mut states = Vec::with_capacity(specs.len());
        let mut signals = SignalColumns::with_capacity(specs.len());
        for spec in &specs {
            match self.members.by_id.get(&spec.id) {
                Some(&old) => {
                    counters.push(Arc::clone(&self.members.counters[old]));
                    states.push(self.states[old].clone());
                    signals.push(self.signals.get(old));
                }
                None => {
                    counters.push(EndpointCounters::new());
                    states.push(EndpointState::default());
                    signals.push(Signals::default());
                }
            }
        }
        Ok(Self {
            members: Arc::new(Membership::new(specs, counters)?),
            states,
            signals,
        })
    }

    /// Installs a scrape of endpoint `id`. Dispatch credit restarts from this moment, because the
    /// scrape now reflects what was sent before it. Metrics are taken as they are, however long
    /// they stay the same ([`Pool::update_scrape`] watches for that).
    pub fn update_metrics(
        &mut self,
        id: EndpointId,
        metrics: ScrapedMetrics,
    ) -> Result<(), PoolError> {
        self.update_scrape(id, metrics, Duration::ZERO).map(|_| ())
    }

    /// [`Pool::update_metrics`], also watching whether the endpoint's metrics still move: when
    /// their body has stayed the same for `frozen_after` since this gateway sent it a request
    /// ([`crate::progress`]), the scrape is installed as of the last change, so the stale
    /// filter sees how old its figures really are. Zero turns the watch off.
    pub fn update_scrape(
        &mut self,
        id: EndpointId,
        mut metrics: ScrapedMetrics,
        frozen_after: Duration,
    ) -> Result<Progress, PoolError> {
        let pos = self.position(id).ok_or(PoolError::UnknownEndpoint(id))?;
        let mark = self
            .members
            .counters
            .get(pos)
            .map(|c| c.mark())
            .unwrap_or_default();
        let state = self
            .states
            .get_mut(pos)
            .ok_or(PoolError::UnknownEndpoint(id))?;
        let (watch, progress) = state.progress.observe(
            metrics.body_fingerprint,
            mark.requests,
            metrics.scraped_at,
            frozen_after,
        );
        if let Progress::Frozen { since, .. } = progress {
            metrics.scraped_at = since;
        }
        self.signals.set(pos, Signals::of(&metrics, mark));
        *state = EndpointState {
            metrics: Some(metrics),
            progress: watch,
        };
        Ok(progress)
    }

    /// Number of endpoints.
    pub fn len(&self) -> usize {
        self.members.specs.len()
    }

    /// Whether the pool has no endpoints.
    pub fn is_empty(&self) -> bool {
        self.members.specs.is_empty()
    }

    /// The endpoints, in position order.
    pub fn specs(&self) -> &[EndpointSpec] {
        &self.members.specs
    }

    /// Position of endpoint `id`, O(1).
    pub fn position(&self, id: EndpointId) -> Option<usize> {
        self.members.by_id.get(&id).copied()
    }

    /// Position of the endpoint at `address`, O(1).
    pub fn position_of_address(&self, address: &str) -> Option<usize> {
        self.members.by_address.get(address).copied()
    }

    /// The endpoint at `position`.
    pub fn spec(&self, position: usize) -> Option<&EndpointSpec> {
        self.members.specs.get(position)
    }

    /// The address of endpoint `id`.
    pub fn address(&self, id: EndpointId) -> Option<&str> {
        Some(self.spec(self.position(id)?)?.address.as_str())
    }

    /// The last scrape of endpoint `id`, if any landed.
    pub fn metrics(&self, id: EndpointId) -> Option<&ScrapedMetrics> {
        self.metrics_at(self.position(id)?)
    }

    /// The live counters of endpoint `id`, to hand to the gateway's accounting.
    pub fn counters(&self, id: EndpointId) -> Option<&Arc<EndpointCounters>> {
        self.members.counters.get(self.position(id)?)
    }

    /// The gateway-local load of endpoint `id` relative to its last scrape.
    pub fn local_load(&self, id: EndpointId) -> Option<LocalLoad> {
        Some(self.local_load_at(self.position(id)?))
    }

    /// The KV block size (tokens) reported by the first endpoint that reports one; what upstream's
    /// `autoTune` uses for the prefix chunk size.
    pub fn reported_block_size(&self) -> Option<u32> {
        self.states
            .iter()
            .find_map(|s| s.metrics.as_ref().and_then(|m| m.block_size))
    }

    pub(crate) fn metrics_at(&self, position: usize) -> Option<&ScrapedMetrics> {
        self.states.get(position).and_then(|s| s.metrics.as_ref())
    }

    pub(crate) fn local_load_at(&self, position: usize) -> LocalLoad {
        self.local_load_since(position, self.signals_at(position).mark)
    }

    pub(crate) fn local_load_since(&self, position: usize, mark: DispatchMark) -> LocalLoad {
        self.members
            .counters
            .get(position)
            .map(|c| c.load_since(mark))
            .unwrap_or_default()
    }

    pub(crate) fn signals_at(&self, position: usize) -> Signals {
        self.signals.get(position)
    }

    /// Every endpoint's scraped signals, by position.
    pub(crate) fn signal_columns(&self) -> &SignalColumns {
        &self.signals
    }

    /// Every endpoint's live counters, by position.
    pub(crate) fn all_counters(&self) -> &[Arc<EndpointCounters>] {
        &self.members.counters
    }

    pub(crate) fn counters_at(&self, position: usize) -> Option<&Arc<EndpointCounters>> {
        self.members.counters.get(position)
    }

    pub(crate) fn membership(&self) -> &Arc<Membership> {
        &self.members
    }
}

impl Membership {
    fn new(
        specs: Vec<EndpointSpec>,
        counters: Vec<Arc<EndpointCounters>>,
    ) -> Result<Self, PoolError> {
        let mut by_id = HashMap::with_capacity(specs.len());
        let mut by_address = HashMap::with_capacity(specs.len());
        for (pos, spec) in specs.iter().enumerate() {
            if by_id.insert(spec.id, pos).is_some() {
                return Err(PoolError::DuplicateId(spec.id));
            }
            if by_address.insert(spec.address.clone(), pos).is_some() {
                return Err(PoolError::DuplicateAddress(spec.address.clone()));
            }
        }
        Ok(Self {
            specs,
            counters,
            by_id,
            by_address,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(n: u64) -> Vec<EndpointSpec> {
        (0..n)
            .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:8000")))
            .collect()
    }

    #[test]
    fn duplicate_ids_and_addresses_are_rejected_by_name() {
        let mut s = specs(2);
        s[1].id = EndpointId(0);
        assert_eq!(
            Pool::new(s).unwrap_err(),
            PoolError::DuplicateId(EndpointId(0))
        );
        let mut s = specs(2);
        s[1].address = s[0].address.clone();
        assert_eq!(
            Pool::new(s).unwrap_err(),
            PoolError::DuplicateAddress("10.0.0.0:8000".into())
        );
    }

    #[test]
    fn a_new_scrape_restarts_the_dispatch_credit() {
        let mut pool = Pool::new(specs(1)).unwrap();
        let id = EndpointId(0);
        let c = Arc::clone(pool.counters(id).unwrap());
        let _g1 = c.dispatch(10, 0);
        assert_eq!(pool.local_load(id).unwrap().queue_credit(), 1);
        pool.update_metrics(id, ScrapedMetrics::empty(Duration::from_millis(50)))
            .unwrap();
        assert_eq!(pool.local_load(id).unwrap().queue_credit(), 0);
        let _g2 = c.dispatch(10, 0);
        assert_eq!(pool.local_load(id).unwrap().queue_credit(), 1);
        assert_eq!(pool.local_load(id).unwrap().in_flight_requests, 2);
    }

    #[test]
    fn membership_change_keeps_survivors_state_and_drops_the_rest() {
        let mut pool = Pool::new(specs(3)).unwrap();
        pool.update_metrics(EndpointId(1), ScrapedMetrics::empty(Duration::from_secs(1)))
            .unwrap();
        let guard = pool.counters(EndpointId(1)).unwrap().dispatch(5, 0);
        let mut next = specs(3);
        next.remove(0);
        next.push(EndpointSpec::new(9, "10.0.0.9:8000"));
        let pool2 = pool.with_members(next).unwrap();
        assert_eq!(pool2.len(), 3);
        assert_eq!(pool2.position(EndpointId(0)), None);
        assert_eq!(pool2.position(EndpointId(1)), Some(0));
        assert!(pool2.metrics(EndpointId(1)).is_some());
        assert!(pool2.metrics(EndpointId(9)).is_none());
        assert_eq!(
            pool2.local_load(EndpointId(1)).unwrap().in_flight_requests,
            1
        );
        drop(guard);
        assert_eq!(
            pool2.local_load(EndpointId(1)).unwrap().in_flight_requests,
            0
        );
        assert_eq!(pool2.position_of_address("10.0.0.9:8000"), Some(2));
    }
}
