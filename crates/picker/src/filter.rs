//! Filters: which endpoints may take the request at all.
//!
//! Filters that read load fail open: when they would remove every candidate they remove none,
//! because refusing a request that some pod could serve is worse than serving it slowly. The
//! flow-control layer, not the picker, decides when to shed.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::clock::nanos;
use crate::endpoint::EndpointSpec;
use crate::pool::NEVER_SCRAPED;
use crate::scorer::Candidates;

/// A filter and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `stale-metrics-filter`: excludes endpoints with no metrics or metrics older than
    /// `max_age` (frozen metrics are as old as their last change: [`crate::Progress`]); they
    /// come back as soon as a fresh scrape lands. When every candidate is stale it keeps them
    /// all, with their metrics withheld from the scorers (never read as 0).
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

    /// Applies a per-request filter to the candidates still kept; the caller compacts them once
    /// after the last filter ([`Candidates::compact`]).
    pub(crate) fn apply(&self, now: Duration, cands: &mut Candidates) -> Outcome {
        let Candidates {
            scraped_ns,
            waiting,
            kv,
            keep,
            ..
        } = cands;
        match self {
            Filter::Stale { max_age } => {
                let (now, max_age) = (nanos(now), nanos(*max_age));
                let fresh = || {
                    scraped_ns
                        .iter()
                        .map(move |&at| (at != NEVER_SCRAPED) & (now.saturating_sub(at) <= max_age))
                };
                if keep.narrow(fresh) {
                    Outcome::Applied
                } else {
                    cands.hide_metrics();
                    Outcome::FailedOpen
                }
            }
            Filter::Saturation {
                max_waiting,
                max_kv,
            } => {
                // A comparison with NaN (unknown) is false: unknown is never full.
                let q_max = max_waiting.unwrap_or(f64::NAN);
                let kv_max = max_kv.unwrap_or(f64::NAN);
                let open = || {
                    waiting
                        .iter()
                        .zip(kv.iter())
                        .map(move |(&q, &kv)| !((q >= q_max) | (kv >= kv_max)))
                };
                if keep.narrow(open) {
                    Outcome::Applied
                } else {
                    Outcome::FailedOpen
                }
            }
            Filter::LabelSelector { .. } => Outcome::Applied,
        }
    }
}
