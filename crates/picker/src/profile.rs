//! A scheduling profile: filters, weighted scorers and a picker — what both configuration formats
//! (HyperPod `weights` and GIE `EndpointPickerConfig`) are turned into.

use std::time::Duration;

use crate::filter::Filter;
use crate::latency::LatencyParams;
use crate::prefix::PrefixParams;
use crate::scorer::Scorer;
use crate::select::{Selection, TieBreak};

/// Metrics older than this are stale (20 scrape intervals at the default 50 ms): long enough that
/// one slow scrape of a busy server does not eject it, short enough that a dead pod leaves within
/// a second.
pub const DEFAULT_MAX_METRICS_AGE: Duration = Duration::from_secs(1);

/// Fallbacks returned after the primary unless configured otherwise.
pub const DEFAULT_FALLBACKS: usize = 2;

/// The latency scorer's tolerance unless configured otherwise (seconds): a quarter of the 2 s
/// TTFT objective the benchmarks judge by, so that two predictions tens of milliseconds apart
/// score nearly alike and ones seconds apart do not ([`Scorer::PredictedLatency`]).
pub const DEFAULT_LATENCY_TOLERANCE_S: f64 = 0.5;

/// A scorer with its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedScorer {
    /// The scorer.
    pub scorer: Scorer,
    /// Its weight in the sum (finite, non-negative).
    pub weight: f64,
}

/// The internal form of a picker configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Name, for reports.
    pub name: String,
    /// Filters, applied in order.
    pub filters: Vec<Filter>,
    /// Scorers and weights; the total is the weighted sum.
    pub scorers: Vec<WeightedScorer>,
    /// How the primary is chosen from the totals.
    pub selection: Selection,
    /// How many fallbacks to return after the primary.
    pub max_fallbacks: usize,
    /// Credit each endpoint's scraped queue with requests dispatched since its last scrape (and
    /// still in flight). Off only to reproduce upstream's behaviour.
    pub fresh_load: bool,
    /// Prefix index parameters.
    pub prefix: PrefixParams,
    /// Latency model parameters.
    pub latency: LatencyParams,
}

impl Profile {
    /// A profile with infergate's mechanics (stale exclusion, fresh load, rotated ties) and the
    /// given scorers: what a HyperPod `weights` block becomes.
    pub fn with_scorers(name: impl Into<String>, scorers: Vec<WeightedScorer>) -> Self {
        Self {
            name: name.into(),
            filters: vec![Filter::Stale {
                max_age: DEFAULT_MAX_METRICS_AGE,
            }],
            scorers,
            selection: Selection::MaxScore {
                ties: TieBreak::Rotate,
            },
            max_fallbacks: DEFAULT_FALLBACKS,
            fresh_load: true,
            prefix: PrefixParams::default(),
            latency: LatencyParams::default(),
        }
    }

    /// `gie-default`: queue 2, kvCache 2, prefix 3 with upstream formulas, max-score picker with
    /// random ties, no dispatch credit and no stale exclusion (upstream keeps stale pods
    /// schedulable on their last metrics) — upstream as it ships, to measure against.
    pub fn gie_default() -> Self {
        Self {
            name: "gie-default".into(),
            filters: Vec::new(),
            scorers: vec![
                weighted(Scorer::Queue, 2.0),
                weighted(Scorer::KvCache, 2.0),
                weighted(Scorer::Prefix, 3.0),
            ],
            selection: Selection::MaxScore {
                ties: TieBreak::Random,
            },
            max_fallbacks: DEFAULT_FALLBACKS,
            fresh_load: false,
            prefix: PrefixParams::default(),
            latency: LatencyParams::default(),
        }
    }

    /// `infergate`, the default policy; `docs/picker.md` explains each choice.
    ///
    /// - fresh load: the scraped queue plus requests dispatched since the scrape;
    /// - kvCache 2 and prefix 3 as documented upstream, with prefix affinity that yields to load;
    /// - predicted latency (4): the learned per-endpoint TTFT model, which tells GPU generations
    ///   apart and prices a prefix hit against a longer queue in seconds, with a 0.5 s tolerance
    ///   so that differences of tens of milliseconds do not herd load (chosen on
    ///   shared-prefix-8b, where the plain ratio let one seed in five collapse at 2.6× the
    ///   per-replica capacity; every other scenario held out: `docs/benchmarks.md`);
    /// - no `queue-scorer`: the latency model already prices the queue, in seconds, and the
    ///   min-max queue score turns a one-request difference into the whole `[0, 1]` range, which
    ///   herds bursts (`infergate tune` dropped it on bursty-70b; across every benchmark scenario
    ///   that lowered P99 TTFT in eight of ten, by up to 47 %);
    /// - KV headroom (2), to keep requests off pods about to preempt — a score, not a filter: a
    ///   busy vLLM pod sits near full KV because it admits until the cache is full, and a
    ///   filter at 97 % dropped every busy fast pod of a mixed fleet from 80 % load up, piling
    ///   requests onto the slow ones (P99 TTFT 33 s against 3.8 s without it on
    ///   trace-azure-conv at 0.8; `docs/benchmarks.md`, "The losses, ablated");
    /// - LoRA residency (2), neutral for base-model requests;
    /// - stale exclusion, and rotated ties.
    pub fn infergate() -> Self {
        Self::with_scorers(
            "infergate",
            vec![
                weighted(Scorer::KvCache, 2.0),
                weighted(Scorer::PrefixYieldingToLoad { slack: 4.0 }, 3.0),
                weighted(
                    Scorer::PredictedLatency {
                        tolerance_s: DEFAULT_LATENCY_TOLERANCE_S,
                    },
                    4.0,
                ),
                weighted(Scorer::KvHeadroom { soft_limit: 0.85 }, 2.0),
                weighted(Scorer::LoraAffinity, 2.0),
            ],
        )
    }

    /// Whether any scorer reads the prefix match.
    pub(crate) fn needs_prefix(&self) -> bool {
        self.scorers.iter().any(|s| s.scorer.needs_prefix())
    }
}

/// Shorthand for a [`WeightedScorer`].
pub fn weighted(scorer: Scorer, weight: f64) -> WeightedScorer {
    WeightedScorer { scorer, weight }
}
