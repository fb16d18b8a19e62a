//! Filters: which endpoints may take the request at all.
//!
//! Filters that read load fail open: when they would remove every candidate they remove none,
//! because refusing a request that some pod could serve is worse than serving it slowly. The
//! flow-control layer, not the picker, decides when to shed.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::endpoint::EndpointSpec;
use crate::pool::Pool;
use crate::scorer::Candidate;

/// A filter and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `stale-metrics-filter`: excludes endpoints with no metrics or metrics older than
    /// `max_age`; they come back as soon as a fresh scrape lands. When every candidate is stale it
    /// keeps them all, with their metrics withheld from the scorers (never read as 0).
    Stale {
        /// Oldest acceptable scrape.
        max_age: Duration,
    },
    /// `saturation-filter`: excludes endpoints at or over either limit, unless every candidate is.
    Saturation {
        /// Waiting requests (fresh, when the profile credits dispatches) at which a pod is full.
        max_waiting: Option<f64>,
        /// KV use at which a pod is full.
        max_kv: Option<f64>,
    },
    /// `label-selector-filter`: keeps endpoints carrying every one of `match_labels`. Evaluated
    /// once per membership change, not per request.
    LabelSelector {
        /// Required labels.
        match_labels: BTreeMap<String, String>,
    },
}

/// What a filter did to the candidate set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Some candidates may have been removed; at least one is left.
    Applied,
    /// It would have removed every candidate, so it removed none.
    FailedOpen,
}

impl Filter {
    /// The plugin type name.
    pub fn plugin_type(&self) -> &'static str {
        match self {
            Filter::Stale { .. } => "stale-metrics-filter",
            Filter::Saturation { .. } => "saturation-filter",
            Filter::LabelSelector { .. } => "label-selector-filter",
        }
    }

    /// Whether the endpoint passes a membership-time filter (always true for per-request ones).
    pub(crate) fn admits_member(&self, spec: &EndpointSpec) -> bool {
        match self {
            Filter::LabelSelector { match_labels } => match_labels
                .iter()
                .all(|(k, v)| spec.labels.get(k) == Some(v)),
            _ => true,
        }
    }

    /// Applies a per-request filter in place.
    pub(crate) fn apply(&self, pool: &Pool, now: Duration, cands: &mut Vec<Candidate>) -> Outcome {
        match self {
            Filter::Stale { max_age } => {
                let fresh = |c: &Candidate| {
                    pool.signals_at(c.pos())
                        .scraped_at
                        .is_some_and(|at| now.saturating_sub(at) <= *max_age)
                };
                if cands.iter().any(fresh) {
                    cands.retain(fresh);
                    Outcome::Applied
                } else {
                    cands.iter_mut().for_each(Candidate::hide_metrics);
                    Outcome::FailedOpen
                }
            }
            Filter::Saturation {
                max_waiting,
                max_kv,
            } => {
                let open = |c: &Candidate| {
                    let q_full =
                        matches!((c.waiting(), max_waiting), (Some(q), Some(m)) if q >= *m);
                    let kv_full = matches!((c.kv(), max_kv), (Some(k), Some(m)) if k >= *m);
                    !(q_full || kv_full)
                };
                if cands.iter().any(open) {
                    cands.retain(open);
                    Outcome::Applied
                } else {
                    Outcome::FailedOpen
                }
            }
            Filter::LabelSelector { .. } => Outcome::Applied,
        }
    }
}
