//! The simulator's fidelity: measured figures, each re-created as a virtual-time experiment, so
//! the simulator's error is a number anyone can reproduce (`infergate sim --anchors`) and a test
//! can hold it to.
//!
//! Every anchor belongs to one of two sets, fixed in its table before any fitting:
//! - the **fitting set**, the only anchors [`fit::score_points`] reads when it chooses the step-time
//!   constants ([`Calibration::FITTED`] is its result);
//! - the **held-out set**, only ever reported: its error is the simulator's error out of sample,
//!   per GPU and per model ([`summary`], [`by_gpu`], [`by_model`]).
//!
//! Where a source leaves a workload detail open, the assumption is written next to the anchor.

pub mod fit;
mod kubecon;
mod lambda;
mod published;
mod systalyze;
mod workload;

pub use published::PUBLISHED;
pub use workload::{Experiment, Figure, Lengths, Load, Measure, Published, Setup};

use crate::drive::median;
use crate::engine::Engine;
use crate::profile::Profile;
use crate::step_time::Calibration;
use crate::EngineConfig;
use std::collections::BTreeMap;
use std::time::Duration;

/// Which set an anchor is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Split {
    /// Read by the calibration search.
    Fitting,
    /// Never read by the search; reported as the out-of-sample error.
    HeldOut,
}

impl Split {
    /// `fitted` or `held-out`, as the table prints it.
    pub fn label(self) -> &'static str {
        match self {
            Split::Fitting => "fitted",
            Split::HeldOut => "held-out",
        }
    }
}

/// One measured figure and what the simulator predicts for it.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorResult {
    /// Which experiment.
    pub experiment: &'static str,
    /// Which figure (`TTFT p50 ms`, ...).
    pub figure: &'static str,
    /// The measured value.
    pub measured: f64,
    /// The simulator's value.
    pub predicted: f64,
    /// Allowed relative error of an anchor in the fitting set (held-out anchors are reported,
    /// not held to it).
    pub tolerance: f64,
    /// Its set.
    pub split: Split,
    /// The GPU kind, as profiles name it (`h100`, `a10g`, ...).
    pub gpu: &'static str,
    /// The model, as profiles name it (`llama-3.1-8b`, ...).
    pub model: &'static str,
    /// Tensor parallelism of the profile it runs on.
    pub tp: u32,
    /// Where the measured figure was published.
    pub source: &'static str,
}

impl AnchorResult {
    /// Signed relative error of the prediction; infinite when the simulator could not run the
    /// experiment at all (no request finished: a prompt its KV cache cannot hold), so such an
    /// anchor counts as the worst miss, never as a gap in the median.
    pub fn error(&self) -> f64 {
        if self.reproduced() {
            (self.predicted - self.measured) / self.measured
        } else {
            f64::INFINITY
        }
    }

    /// Whether it is one of the reference's own anchors (reference/simulator.md), which the
    /// first wave held to their tolerance and every calibration still must meet.
    pub fn from_reference(&self) -> bool {
        self.source == kubecon::KUBECON || self.source == kubecon::REFERENCE
    }

    /// Whether the simulator produced the figure at all.
    pub fn reproduced(&self) -> bool {
        self.predicted.is_finite()
    }

    /// The profile it runs on, as `--list-profiles` names it (`llama-3.1-8b/h100/tp1`).
    pub fn profile(&self) -> String {
        format!("{}/{}/tp{}", self.model, self.gpu, self.tp)
    }
}

/// Every anchor, run with the shipped calibration. Takes about two seconds of CPU.
pub fn run_all() -> Vec<AnchorResult> {
    let mut results = kubecon::run_all();
    results.extend(PUBLISHED.iter().map(Published::run));
    results
}

/// The anchors of one set only, run with the shipped calibration (or an override's): the
/// published anchors of the other set are not run at all.
pub fn run_split(split: Split) -> Vec<AnchorResult> {
    let mut results: Vec<AnchorResult> = kubecon::run_all()
        .into_iter()
        .filter(|r| r.split == split)
        .collect();
    results.extend(
        PUBLISHED
            .iter()
            .filter(|p| p.split == split)
            .map(Published::run),
    );
    results
}

/// Median absolute relative error over `results` (the mean of the middle two of an even
/// count; NaN when empty).
pub fn median_error(results: &[AnchorResult]) -> f64 {
    let mut errors: Vec<f64> = results.iter().map(|r| r.error().abs()).collect();
    median(&mut errors)
}

/// How well one group of anchors is predicted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Anchors in the group.
    pub anchors: usize,
    /// Median absolute relative error (the mean of the middle two of an even count, so a
    /// profile with one close and one far anchor reads halfway, not as its closer one).
    pub median_error: f64,
    /// Largest absolute relative error (infinite if one was not reproduced).
    pub worst_error: f64,
    /// Anchors the simulator could not run.
    pub not_reproduced: usize,
}

impl Summary {
    /// Whether a profile with this held-out summary is flagged: its median error is above
    /// [`FLAG_ABOVE`] or not a number at all.
    pub fn flagged(&self) -> bool {
        !self.median_error.is_finite() || self.median_error > FLAG_ABOVE
    }
}

fn summarize<'a>(results: impl IntoIterator<Item = &'a AnchorResult>) -> Summary {
    let mut errors: Vec<f64> = Vec::new();
    let mut not_reproduced = 0;
    for r in results {
        errors.push(r.error().abs());
        not_reproduced += usize::from(!r.reproduced());
    }
    Summary {
        anchors: errors.len(),
        worst_error: errors.iter().copied().fold(0.0, f64::max),
        median_error: median(&mut errors),
        not_reproduced,
    }
}

/// The summary of one set.
pub fn summary(results: &[AnchorResult], split: Split) -> Summary {
    summarize(results.iter().filter(|r| r.split == split))
}

fn grouped(
    results: &[AnchorResult],
    split: Split,
    key: impl Fn(&AnchorResult) -> String,
) -> BTreeMap<String, Summary> {
    let mut groups: BTreeMap<String, Vec<&AnchorResult>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.split == split) {
        groups.entry(key(r)).or_default().push(r);
    }
    groups.into_iter().map(|(k, v)| (k, summarize(v))).collect()
}

/// One set's summary per GPU kind.
pub fn by_gpu(results: &[AnchorResult], split: Split) -> BTreeMap<String, Summary> {
    grouped(results, split, |r| r.gpu.to_owned())
}

/// One set's summary per model.
pub fn by_model(results: &[AnchorResult], split: Split) -> BTreeMap<String, Summary> {
    grouped(results, split, |r| r.model.to_owned())
}

/// One set's summary per profile (`model/gpu/tpN`).
pub fn by_profile(results: &[AnchorResult], split: Split) -> BTreeMap<String, Summary> {
    grouped(results, split, AnchorResult::profile)
}

/// The held-out anchors run and summarised per profile: what `sim --list-profiles` and the
/// bench's fidelity lines read (under a second of CPU; only the held-out set runs).
pub fn held_out_by_profile() -> BTreeMap<String, Summary> {
    by_profile(&run_split(Split::HeldOut), Split::HeldOut)
}

/// A profile's error is flagged above this held-out median (`sim --list-profiles` and the bench
/// say so beside every row that uses it).
pub const FLAG_ABOVE: f64 = 0.20;

/// Constants the anchors run with instead of the shipped ones: step-time constants, API
/// overhead and the load generator's inter-arrival coefficient of variation.
type Knobs = (Calibration, Duration, f64);

thread_local! {
    static OVERRIDE: std::cell::Cell<Option<Knobs>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the anchors' engines on other constants (the calibration search): step-time
/// constants, API overhead and the client's inter-arrival coefficient of variation.
pub fn with_calibration<T>(
    calibration: Calibration,
    api_overhead: Duration,
    client_cv: f64,
    f: impl FnOnce() -> T,
) -> T {
    OVERRIDE.with(|o| o.set(Some((calibration, api_overhead, client_cv))));
    let out = f();
    OVERRIDE.with(|o| o.set(None));
    out
}

/// The client inter-arrival CV an override sets, if any.
fn client_cv_override() -> Option<f64> {
    OVERRIDE.with(|o| o.get()).map(|k| k.2)
}

/// An engine on `model`/`gpu`/`tp` with vLLM's defaults, the override's constants if one is set,
/// then `edit`; `None` if the triple is not a profile, so the anchor's prediction is NaN and it
/// counts as not reproduced (the worst miss) rather than as a run on some other profile.
fn engine(model: &str, gpu: &str, tp: u32, edit: impl FnOnce(&mut EngineConfig)) -> Option<Engine> {
    let profile = Profile::lookup(model, gpu, tp).ok()?;
    let mut config = EngineConfig::new(profile);
    config.report_every_token = true;
    if let Some((calibration, overhead, _)) = OVERRIDE.with(|o| o.get()) {
        config.calibration = calibration;
        config.api_overhead = overhead;
    }
    edit(&mut config);
    Some(Engine::new(config))
}
