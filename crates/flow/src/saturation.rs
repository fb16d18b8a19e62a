//! The pool saturation detector and the band ceilings it is read against.
//!
//! An endpoint's saturation is upstream's (`spec.flowControl.saturation`):
//! `max(waiting / queueDepthThreshold, kv / kvCacheThreshold)`, so 1 means "at a threshold".
//! infergate adds the server's recent decode pace, `itl / interTokenLatencyThreshold`
//! ([`crate::pace`]), read wherever KV-cache use is: both say the running batch is as large as
//! the server can carry well, and neither says anything about how soon a waiting request starts,
//! so Standard reads them only while the pool is overloaded ([`PoolState::queue_saturation`]
//! leaves both out).
//! The pool's saturation is the mean over endpoints with fresh metrics, as upstream's detector
//! computes it. Endpoints whose metrics are older than the staleness threshold, or that report
//! neither signal, are left out; with none left the detector knows nothing ([`PoolState::is_known`]
//! is false) and flow control fails open, as the picker does when every pod is stale.
//!
//! A detector may also count each endpoint's running requests (its batch) against a threshold
//! ([`Detector::with_running_threshold`]); that signal holds only the bands below Critical
//! ([`PoolState::lower_saturation`]). Under overload a model server's batch fills to its limits
//! and every step it runs grows long; Critical requests wait out those steps whatever their
//! place in the queue. Keeping the batch short by holding Standard and Sheddable traffic in the
//! gateway shortens the steps Critical requests land in, while Critical itself is still let in up
//! to its own ceiling. Off by default: it trades throughput for Critical latency.
//!
//! A LoRA server whose adapter slots are all held by adapters with running requests, while
//! requests for another adapter wait ([`EndpointLoad::adapter_bound`]), is read by its KV-cache
//! use alone: its waiting count mixes requests blocked on a slot with requests waiting for batch
//! room, and the metrics cannot tell them apart. A blocked request does not delay one whose
//! adapter is resident (vLLM's scheduler steps past it), so counting it held traffic the server
//! would have run at once: on a hot-set LoRA fleet at 90 % load the pool read as saturated,
//! the overload rule refused a quarter of the requests and goodput fell below round-robin's.
//!
//! The detector runs when metrics land (the control plane), never per request: a request reads
//! one small [`PoolState`] whatever the fleet's size.

use std::time::Duration;

use infergate_config::gateway::{defaults, Band, ResolvedFlowControl};

use crate::config::band_index;

/// The default mean pool saturation up to which a band may dispatch
/// (`spec.flowControl.bands[].saturationCeiling`): Critical 2, Standard 1, Sheddable 0.75.
/// [`defaults::saturation_ceiling`] says why.
///
/// Invariant: the ceilings never increase from Critical to Sheddable, so a band that cannot
/// dispatch implies that no lower band can either (configured ceilings are validated to keep it).
pub fn ceiling(band: Band) -> f64 {
    defaults::saturation_ceiling(band)
}

/// The default ceilings, indexed as [`band_index`] orders the bands ([`Band::ALL`]'s order).
fn default_ceilings() -> [f64; 3] {
    Band::ALL.map(ceiling)
}

/// One endpoint's load as the detector reads it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EndpointLoad {
    /// Requests waiting in the model server's queue; include what was dispatched to it since its
    /// scrape and is still in flight (the picker's queue credit), since the scrape cannot show it.
    pub waiting: Option<f64>,
    /// KV-cache use in `0..=1`.
    pub kv_usage: Option<f64>,
    /// Requests running in the model server (its batch); read only by a detector with a
    /// running-requests threshold.
    pub running: Option<f64>,
    /// Every adapter slot of a LoRA server is held by an adapter with running requests, and
    /// requests for another adapter wait: its waiting count is not read, only its KV-cache use
    /// (the module's doc says why).
    pub adapter_bound: bool,
    /// The server's recent mean inter-token latency in seconds ([`crate::RecentPace`]).
    pub inter_token_latency: Option<f64>,
    /// Age of the metrics.
    pub age: Duration,
}

/// The detector's thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detector {
    queue_depth: f64,
    kv_cache: f64,
    staleness: Duration,
    /// Running requests at saturation 1 for the bands below Critical, if counted.
    running: Option<f64>,
    /// Recent mean inter-token latency (seconds) at saturation 1, if counted.
    inter_token_latency: Option<f64>,
    /// Each band's ceiling, Critical, Standard, Sheddable. Invariant: non-increasing.
    ceilings: [f64; 3],
    /// Whether an adapter-bound endpoint's waiting count is read as any other's (only to measure
    /// what leaving it out does).
    counts_adapter_bound_queues: bool,
}

impl Detector {
    /// A detector with `queue_depth` waiting requests and `kv_cache` use as saturation, ignoring
    /// metrics older than `staleness`. Non-positive thresholds are raised to the smallest
    /// positive value, so a score is always finite.
    pub fn new(queue_depth: f64, kv_cache: f64, staleness: Duration) -> Self {
        Self {
            queue_depth: queue_depth.max(f64::MIN_POSITIVE),
            kv_cache: kv_cache.max(f64::MIN_POSITIVE),
            staleness,
            running: None,
            inter_token_latency: None,
            ceilings: default_ceilings(),
            counts_adapter_bound_queues: false,
        }
    }

    /// The same detector reading an adapter-bound endpoint's waiting count as any other's
    /// (`true`), as a detector blind to LoRA residency does; only to measure the difference.
    pub fn counting_adapter_bound_queues(mut self, counted: bool) -> Self {
        self.counts_adapter_bound_queues = counted;
        self
    }

    /// The waiting count the detector reads: none for an adapter-bound endpoint.
    fn waiting(&self, e: &EndpointLoad) -> Option<f64> {
        if e.adapter_bound && !self.counts_adapter_bound_queues {
            None
        } else {
            e.waiting
        }
    }

    /// The same detector with the bands' ceilings `[Critical, Standard, Sheddable]` instead of
    /// the defaults. Invariant: the caller passes non-increasing, positive, finite ceilings
    /// (the config's validation ensures it).
    pub fn with_ceilings(mut self, ceilings: [f64; 3]) -> Self {
        self.ceilings = ceilings;
        self
    }

    /// The same detector, also counting each endpoint's running requests against `threshold`
    /// for the bands below Critical (`None`: not counted). A non-positive threshold is raised to
    /// the smallest positive value, as the others are.
    pub fn with_running_threshold(mut self, threshold: Option<f64>) -> Self {
        self.running = threshold.map(|t| t.max(f64::MIN_POSITIVE));
        self
    }

    /// The same detector, also counting each endpoint's recent mean inter-token latency against
    /// `threshold` wherever KV-cache use is counted (zero: not counted, as the config's `0s`).
    pub fn with_inter_token_latency_threshold(mut self, threshold: Duration) -> Self {
        self.inter_token_latency = (!threshold.is_zero()).then_some(threshold.as_secs_f64());
        self
    }

    /// The detector `spec.flowControl` describes: its `saturation` thresholds and each band's
    /// `saturationCeiling`.
    pub fn from_resolved(f: &ResolvedFlowControl) -> Self {
        let s = &f.saturation;
        Self::new(
            f64::from(s.queue_depth_threshold.value),
            s.kv_cache_threshold.value,
            s.metrics_staleness_threshold.value,
        )
        .with_running_threshold(s.running_requests_threshold.map(f64::from))
        .with_inter_token_latency_threshold(s.inter_token_latency_threshold.value)
        .with_ceilings(f.bands.map(|b| b.saturation_ceiling.value))
    }

    /// Metrics older than this are left out.
    pub fn staleness(&self) -> Duration {
        self.staleness
    }

    /// An endpoint's saturation; `None` when its metrics are stale or carry neither signal.
    pub fn score(&self, e: &EndpointLoad) -> Option<f64> {
        if e.age > self.staleness {
            return None;
        }
        let parts = [
            self.waiting(e).map(|w| w / self.queue_depth),
            e.kv_usage.map(|k| k / self.kv_cache),
            self.inter_token_latency
                .zip(e.inter_token_latency)
                .map(|(t, itl)| itl / t),
        ];
        parts
            .into_iter()
            .flatten()
            .filter(|s| s.is_finite())
            .reduce(f64::max)
    }

    /// An endpoint's saturation as the bands below Critical read it: its [`Self::score`], or the
    /// worse of that and its running requests over the running threshold. `None` exactly when
    /// the score is, so both means run over the same endpoints.
    pub fn lower_score(&self, e: &EndpointLoad) -> Option<f64> {
        let score = self.score(e)?;
        let batch = self
            .running
            .zip(e.running)
            .map(|(t, r)| r / t)
            .filter(|b| b.is_finite());
        Some(batch.map_or(score, |b| b.max(score)))
    }

    /// [`Self::lower_score`] without the KV-cache and decode-pace signals: the queue and the batch
    /// alone, or the lower score itself for an endpoint that reports neither. `None` exactly when the score is.
    pub fn queue_score(&self, e: &EndpointLoad) -> Option<f64> {
        let lower = self.lower_score(e)?;
        let parts = [
            self.waiting(e).map(|w| w / self.queue_depth),
            self.running.zip(e.running).map(|(t, r)| r / t),
        ];
        Some(
            parts
                .into_iter()
                .flatten()
                .filter(|s| s.is_finite())
                .reduce(f64::max)
                .unwrap_or(lower),
        )
    }

    /// The pool's state from every endpoint's load.
    pub fn observe(&self, endpoints: impl IntoIterator<Item = EndpointLoad>) -> PoolState {
        let (mut fresh, mut saturated, mut sum, mut lower_sum) = (0usize, 0usize, 0.0, 0.0);
        let mut queue_sum = 0.0;
        let (mut min_q, mut max_q, mut waiting) = (f64::INFINITY, 0.0f64, 0.0);
        for e in endpoints {
            let Some(score) = self.score(&e) else {
                continue;
            };
            fresh += 1;
            sum += score;
            let lower = self.lower_score(&e).unwrap_or(score);
            lower_sum += lower;
            queue_sum += self.queue_score(&e).unwrap_or(lower);
            if score >= 1.0 {
                saturated += 1;
            }
            if let Some(q) = e.waiting.filter(|q| q.is_finite()) {
                min_q = min_q.min(q);
                max_q = max_q.max(q);
                waiting += q;
            }
        }
        PoolState {
            fresh,
            saturated,
            saturation: if fresh > 0 { sum / fresh as f64 } else { 0.0 },
            lower_saturation: if fresh > 0 {
                lower_sum / fresh as f64
            } else {
                0.0
            },
            queue_saturation: if fresh > 0 {
                queue_sum / fresh as f64
            } else {
                0.0
            },
            waiting,
            queue_spread: if min_q.is_finite() {
                max_q - min_q
            } else {
                0.0
            },
            queue_depth: self.queue_depth,
            ceilings: self.ceilings,
        }
    }
}

/// A pool's load as of one observation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolState {
    /// Endpoints with fresh metrics.
    pub fresh: usize,
    /// Fresh endpoints at or over saturation 1.
    pub saturated: usize,
    /// Mean saturation over fresh endpoints (0 when there is none): what Critical is held
    /// against.
    pub saturation: f64,
    /// Mean of [`Detector::lower_score`] over the same endpoints: what Standard and Sheddable are
    /// held against. Invariant: never below `saturation`, and equal to it when the detector
    /// counts no running requests.
    pub lower_saturation: f64,
    /// Mean of [`Detector::queue_score`] over the same endpoints: `lower_saturation` without the
    /// KV-cache and decode-pace signals, what Standard is held against while the pool is not overloaded
    /// ([`crate::Overload`]). Invariant: never above `lower_saturation`.
    pub queue_saturation: f64,
    /// Requests waiting over fresh endpoints.
    pub waiting: f64,
    /// Largest minus smallest waiting queue over fresh endpoints.
    pub queue_spread: f64,
    /// The queue-depth threshold the saturation was measured against.
    pub queue_depth: f64,
    /// The detector's band ceilings, Critical, Standard, Sheddable.
    pub ceilings: [f64; 3],
}

impl PoolState {
    /// A pool nothing is known about: flow control fails open.
    pub fn unknown() -> Self {
        Self {
            fresh: 0,
            saturated: 0,
            saturation: 0.0,
            lower_saturation: 0.0,
            queue_saturation: 0.0,
            waiting: 0.0,
            queue_spread: 0.0,
            queue_depth: 1.0,
            ceilings: default_ceilings(),
        }
    }

    /// Whether any endpoint had fresh metrics.
    pub fn is_known(&self) -> bool {
        self.fresh > 0
    }

    /// Requests that may still be sent before the mean saturation reaches `ceiling`, counting
    /// each request as one more waiting request on some endpoint; negative when the pool is
    /// already over it (that many completions must come first).
    pub fn headroom(&self, ceiling: f64) -> f64 {
        self.fresh as f64 * self.queue_depth * (ceiling - self.saturation)
    }

    /// [`Self::headroom`] for `band` under its ceiling ([`Self::ceilings`]), measured from the
    /// saturation that band is held against: `saturation` for Critical, `lower_saturation` below
    /// it. Each request still counts as one more waiting request, so between observations the
    /// running signal is credited at the queue's rate, not its own.
    pub fn band_headroom(&self, band: Band) -> f64 {
        self.headroom_against(band, false)
    }

    /// [`Self::band_headroom`], but for Standard measured from `queue_saturation` (KV-cache use
    /// left out) when `kv_ignored`. Sheddable is held against every signal whatever the flag:
    /// it is the band to give way first, and letting it in on a full KV cache would take the
    /// room Critical and Standard arrive to.
    pub fn headroom_against(&self, band: Band, kv_ignored: bool) -> f64 {
        let saturation = match band {
            Band::Critical => self.saturation,
            Band::Standard if kv_ignored => self.queue_saturation,
            Band::Standard | Band::Sheddable => self.lower_saturation,
        };
        self.fresh as f64 * self.queue_depth * (self.ceilings[band_index(band)] - saturation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn load(waiting: f64, kv: f64) -> EndpointLoad {
        EndpointLoad {
            waiting: Some(waiting),
            kv_usage: Some(kv),
            running: None,
            adapter_bound: false,
            inter_token_latency: None,
            age: 10 * MS,
        }
    }

    fn detector() -> Detector {
        Detector::new(5.0, 0.8, 200 * MS)
    }

    #[test]
    fn an_endpoint_is_as_saturated_as_its_worse_signal() {
        let d = detector();
        assert_eq!(d.score(&load(10.0, 0.4)), Some(2.0));
        assert_eq!(d.score(&load(1.0, 0.8)), Some(1.0));
        let kv_only = EndpointLoad {
            waiting: None,
            kv_usage: Some(0.4),
            running: None,
            adapter_bound: false,
            inter_token_latency: None,
            age: MS,
        };
        assert_eq!(d.score(&kv_only), Some(0.5));
        assert_eq!(d.score(&EndpointLoad::default()), None);
        let stale = EndpointLoad {
            age: 201 * MS,
            ..load(0.0, 0.0)
        };
        assert_eq!(d.score(&stale), None);
    }

    #[test]
    fn the_pool_is_the_mean_over_fresh_endpoints() {
        let d = detector();
        let stale = EndpointLoad {
            age: Duration::from_secs(1),
            ..load(50.0, 1.0)
        };
        let s = d.observe([load(10.0, 0.1), load(0.0, 0.4), stale]);
        assert_eq!((s.fresh, s.saturated), (2, 1));
        assert!((s.saturation - 1.25).abs() < 1e-12);
        assert_eq!((s.waiting, s.queue_spread), (10.0, 10.0));
        // Two endpoints × 5 requests × (1 − 1.25) over the Standard ceiling.
        assert!((s.headroom(ceiling(Band::Standard)) + 2.5).abs() < 1e-9);
        assert!((s.headroom(ceiling(Band::Critical)) - 7.5).abs() < 1e-9);
        assert_eq!(s.lower_saturation, s.saturation);
        assert!(!d.observe([stale]).is_known());
    }

    #[test]
    fn the_queue_saturation_leaves_kv_use_out() {
        let d = detector().with_running_threshold(Some(100.0));
        let e = EndpointLoad {
            running: Some(50.0),
            ..load(1.0, 1.2)
        };
        // KV 1.5 × its threshold, the batch 0.5, the queue 0.2.
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12);
        assert!(close(d.lower_score(&e), 1.5));
        assert!(close(d.queue_score(&e), 0.5));
        let kv_only = EndpointLoad {
            waiting: None,
            ..load(0.0, 0.4)
        };
        // Nothing but KV reported: the score itself, so the pool's means cover one set.
        assert_eq!(d.queue_score(&kv_only), Some(0.5));
        let s = d.observe([e, load(10.0, 0.0)]);
        assert!((s.lower_saturation - 1.75).abs() < 1e-12);
        assert!((s.queue_saturation - 1.25).abs() < 1e-12);
        // Two endpoints × 5 × (1 − 1.25) against the queues alone, × (1 − 1.75) with KV.
        assert!((s.headroom_against(Band::Standard, true) + 2.5).abs() < 1e-9);
        assert!((s.headroom_against(Band::Standard, false) + 7.5).abs() < 1e-9);
        for band in [Band::Critical, Band::Sheddable] {
            assert_eq!(s.headroom_against(band, true), s.band_headroom(band));
        }
    }

    #[test]
    fn an_adapter_bound_endpoint_is_read_by_its_kv_use_alone() {
        let d = detector();
        let bound = EndpointLoad {
            adapter_bound: true,
            ..load(15.0, 0.4)
        };
        // Its 15 waiting requests (3 × the threshold) are not read; KV 0.4 of 0.8 is.
        assert_eq!(d.score(&bound), Some(0.5));
        assert_eq!(d.lower_score(&bound), Some(0.5));
        assert_eq!(d.queue_score(&bound), Some(0.5));
        // The same load on an endpoint with a free slot, or read by a detector that counts
        // adapter-bound queues, is saturated by its queue.
        assert_eq!(d.score(&load(15.0, 0.4)), Some(3.0));
        let counting = detector().counting_adapter_bound_queues(true);
        assert_eq!(counting.score(&bound), Some(3.0));
        assert_eq!(counting.queue_score(&bound), Some(3.0));
        // In the pool, Standard keeps its headroom over the bound endpoint and an idle one:
        // 2 endpoints × 5 × (1 − 0.25) against the queues alone.
        let s = d.observe([bound, load(0.0, 0.0)]);
        assert!((s.headroom_against(Band::Standard, true) - 7.5).abs() < 1e-9);
        // Blind to the slots: 2 × 5 × (1 − 1.5), five completions before Standard goes.
        let blind = counting.observe([bound, load(0.0, 0.0)]);
        assert!((blind.headroom_against(Band::Standard, true) + 5.0).abs() < 1e-9);
    }

    #[test]
    fn running_requests_hold_only_the_bands_below_critical() {
        let d = detector().with_running_threshold(Some(100.0));
        let batch = |running: f64| EndpointLoad {
            running: Some(running),
            ..load(1.0, 0.4)
        };
        // Queue 0.2 and KV 0.5: the first endpoint's batch (1.5) is worse, the second's (0.3)
        // is not.
        assert_eq!(d.score(&batch(150.0)), Some(0.5));
        assert_eq!(d.lower_score(&batch(150.0)), Some(1.5));
        assert_eq!(d.lower_score(&batch(30.0)), Some(0.5));
        let s = d.observe([batch(150.0), batch(30.0)]);
        assert!((s.saturation - 0.5).abs() < 1e-12);
        assert!((s.lower_saturation - 1.0).abs() < 1e-12);
        assert_eq!(s.saturated, 0);
        // Standard is at its ceiling and Sheddable over its own (2 endpoints × 5 × (0.75 − 1));
        // Critical keeps its headroom: 2 endpoints × 5 × (2 − 0.5).
        assert!(s.band_headroom(Band::Standard).abs() < 1e-9);
        assert!((s.band_headroom(Band::Sheddable) + 2.5).abs() < 1e-9);
        assert!((s.band_headroom(Band::Critical) - 15.0).abs() < 1e-9);
        // Without the threshold the running count is not read at all.
        let plain = detector().observe([batch(150.0), batch(30.0)]);
        assert_eq!(plain.lower_saturation, plain.saturation);
        assert!((plain.band_headroom(Band::Standard) - 5.0).abs() < 1e-9);
        // A stale endpoint is left out of both means.
        let stale = EndpointLoad {
            age: Duration::from_secs(1),
            ..batch(1_000.0)
        };
        assert!((d.observe([batch(30.0), stale]).lower_saturation - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_running_threshold_comes_from_the_config_and_is_off_by_default() {
        use infergate_config::gateway::Setting;
        let batch = EndpointLoad {
            running: Some(150.0),
            ..load(1.0, 0.4)
        };
        let resolved = |running| {
            let mut f = ResolvedFlowControl::default();
            f.saturation.running_requests_threshold = running;
            f
        };
        let on = Detector::from_resolved(&resolved(Some(100)));
        assert_eq!(on.lower_score(&batch), Some(1.5));
        let off = Detector::from_resolved(&resolved(None));
        assert_eq!(off.lower_score(&batch), Some(0.5));
        assert_eq!(off, detector().with_inter_token_latency_threshold(80 * MS));
        let mut tighter = resolved(None);
        tighter.bands[2].saturation_ceiling = Setting::set(0.5);
        assert_ne!(Detector::from_resolved(&tighter), detector());
    }

    #[test]
    fn a_slow_decode_saturates_where_kv_use_would() {
        let d = detector().with_inter_token_latency_threshold(80 * MS);
        let slow = EndpointLoad {
            inter_token_latency: Some(0.12),
            ..load(1.0, 0.4)
        };
        // 120 ms a token against 80: 1.5, worse than the queue (0.2) and KV use (0.5).
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12);
        assert!(close(d.score(&slow), 1.5));
        assert!(close(d.lower_score(&slow), 1.5));
        // Left out where KV use is: Standard outside overload reads the queue alone.
        assert!(close(d.queue_score(&slow), 0.2));
        let s = d.observe([slow, load(0.0, 0.0)]);
        assert!((s.saturation - 0.75).abs() < 1e-12);
        assert!((s.queue_saturation - 0.1).abs() < 1e-12);
        // No pace reported (an idle server), or a detector that does not count it: unchanged.
        assert!(close(d.score(&load(1.0, 0.4)), 0.5));
        assert!(close(detector().score(&slow), 0.5));
        let off = detector().with_inter_token_latency_threshold(Duration::ZERO);
        assert_eq!(off, detector());
    }

    #[test]
    fn each_band_is_held_at_its_own_ceiling() {
        // One endpoint, 3 waiting of 5: saturation 0.6.
        let at = |d: Detector| d.observe([load(3.0, 0.1)]);
        let s = at(detector());
        assert!((s.band_headroom(Band::Critical) - 7.0).abs() < 1e-9);
        assert!((s.band_headroom(Band::Standard) - 2.0).abs() < 1e-9);
        // The default Sheddable ceiling, 0.75: 5 × 0.15 left.
        assert!((s.band_headroom(Band::Sheddable) - 0.75).abs() < 1e-9);
        let s = at(detector().with_ceilings([3.0, 0.6, 0.2]));
        assert!((s.band_headroom(Band::Critical) - 12.0).abs() < 1e-9);
        assert!(s.band_headroom(Band::Standard).abs() < 1e-9);
        assert!((s.band_headroom(Band::Sheddable) + 2.0).abs() < 1e-9);
    }

    #[test]
    fn sheddable_stops_below_standard_by_default() {
        assert!(ceiling(Band::Sheddable) < ceiling(Band::Standard));
    }

    #[test]
    fn ceilings_never_rise_towards_the_sheddable_band() {
        for pair in Band::ALL.windows(2) {
            assert!(ceiling(pair[0]) >= ceiling(pair[1]), "{pair:?}");
        }
    }
}
