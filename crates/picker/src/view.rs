//! What the picker sees of each endpoint of a pool, for an operator: the signals a pick reads,
//! the gateway's own credit, the latency model's prediction, and which filters would remove the
//! endpoint now and why.
//!
//! Computed on demand (a metrics scrape, the admin page), never on the request path: it walks the
//! whole pool. The filters are the profile's own, run one at a time over every endpoint exactly as
//! a pick runs them, so the view cannot drift from what a pick does. What it cannot know is the
//! request: a filter that needs one (the context window, Envoy's subset hint) is not shown, and
//! the prediction is for a request with no uncached prompt (the wait in front of the prefill).

use std::time::Duration;

use crate::filter::{Filter, Outcome};
use crate::latency::TtftFeatures;
use crate::picker::{queue_ahead, Picker};
use crate::policy::Policy;
use crate::pool::{Pool, NEVER_SCRAPED};
use crate::scorer::{Candidates, Members};
use crate::EndpointId;

/// Why a filter of the pool's profile would remove an endpoint from a pick now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Exclusion {
    /// `label-selector-filter`: the endpoint lacks a required label.
    Labels,
    /// `stale-metrics-filter`: no scrape has landed yet.
    NeverScraped,
    /// `stale-metrics-filter`: the last scrape is older than the filter's maximum age.
    Stale,
    /// `saturation-filter`: the waiting queue is at or over the filter's limit.
    QueueFull,
    /// `saturation-filter`: KV-cache use is at or over the filter's limit.
    KvFull,
}

impl Exclusion {
    /// The label value an exporter writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Exclusion::Labels => "labels",
            Exclusion::NeverScraped => "never_scraped",
            Exclusion::Stale => "stale",
            Exclusion::QueueFull => "queue_full",
            Exclusion::KvFull => "kv_full",
        }
    }

    /// The reasons `filter` can give.
    pub fn of_filter(filter: &Filter) -> &'static [Exclusion] {
        match filter {
            Filter::LabelSelector { .. } => &[Exclusion::Labels],
            Filter::Stale { .. } => &[Exclusion::NeverScraped, Exclusion::Stale],
            Filter::Saturation { .. } => &[Exclusion::QueueFull, Exclusion::KvFull],
        }
    }
}

/// One endpoint as the picker sees it now.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointView {
    /// The endpoint.
    pub id: EndpointId,
    /// Time since its last scrape landed; `None` before the first.
    pub scrape_age: Option<Duration>,
    /// Waiting requests, as scraped; `None` when the server does not report them.
    pub waiting: Option<f64>,
    /// Running requests, as scraped.
    pub running: Option<f64>,
    /// KV-cache use in `0..=1`, as scraped.
    pub kv: Option<f64>,
    /// LoRA adapters the server reports loaded and running.
    pub adapters_running: Vec<String>,
    /// LoRA adapters the server reports waiting for a slot.
    pub adapters_waiting: Vec<String>,
    /// Requests this gateway has in flight there.
    pub in_flight: u64,
    /// Requests sent there since its last scrape and still in flight: what a pick adds to the
    /// scraped queue.
    pub queue_credit: u64,
    /// Uncached prompt tokens sent there that await their first token.
    pub prefill_pending_tokens: u64,
    /// The latency model's time to first token for a request arriving now with no uncached
    /// prompt: the queue and prefill already ahead of it, at this endpoint's learned rates.
    pub predicted_ttft: Duration,
    /// The prefill rate the latency model has learned for it (the fleet prior before it has
    /// observed any first token there).
    pub prefill_tokens_per_s: f64,
    /// Every filter of the profile that would remove it now, in the profile's order.
    pub excluded: Vec<Exclusion>,
    /// Its metrics are fresh: scraped within the stale filter's maximum age (the default age
    /// for a profile without one). Pool means are taken over fresh endpoints.
    pub fresh: bool,
}

/// A pool as the picker sees it now.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolView {
    /// Each endpoint, in the pool's order.
    pub endpoints: Vec<EndpointView>,
    /// Filters that would remove every endpoint, and so fail open (remove none) for a request
    /// that arrived now, by plugin type.
    pub failing_open: Vec<&'static str>,
}

fn known(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

impl Picker {
    /// What this picker sees of `pool` at `now`. Walks every endpoint: for operators, not for
    /// the request path.
    pub fn view(&self, pool: &Pool, now: Duration) -> PoolView {
        let n = pool.len();
        let sig = pool.signal_columns();
        let max_age = self.policy().max_metrics_age();
        let mut excluded: Vec<Vec<Exclusion>> = vec![Vec::new(); n];
        let mut failing_open = Vec::new();
        if let Policy::Weighted(profile) = self.policy() {
            let mut cands = Candidates::default();
            for filter in &profile.filters {
                let removed = removed_by(filter, pool, now, profile.fresh_load, &mut cands);
                if n > 0 && removed.iter().all(|&r| r) {
                    failing_open.push(filter.plugin_type());
                }
                for (pos, _) in removed.iter().enumerate().filter(|(_, &r)| r) {
                    let why = reason(filter, &cands, pos);
                    if let Some(list) = excluded.get_mut(pos) {
                        list.push(why);
                    }
                }
            }
        }
        let endpoints = pool
            .specs()
            .iter()
            .enumerate()
            .zip(excluded)
            .map(|((pos, spec), excluded)| {
                let s = pool.signals_at(pos);
                let local = pool.local_load_since(pos, s.mark);
                let lora = pool.metrics_at(pos).and_then(|m| m.lora.as_ref());
                let estimate = self.latency_estimate_or_prior(spec.id);
                let predicted = self.latency_prediction(
                    spec.id,
                    &TtftFeatures {
                        queue_ahead: queue_ahead(pool, pos),
                        uncached_tokens: 0.0,
                        prefill_ahead: local.prefill_pending_tokens as f64,
                    },
                );
                let scrape_age = sig
                    .scraped_ns
                    .get(pos)
                    .filter(|&&at| at != NEVER_SCRAPED)
                    .map(|&at| now.saturating_sub(Duration::from_nanos(at)));
                EndpointView {
                    id: spec.id,
                    scrape_age,
                    fresh: scrape_age.is_some_and(|age| age <= max_age),
                    waiting: known(s.waiting),
                    running: known(s.running),
                    kv: known(s.kv),
                    adapters_running: lora.map(|l| l.running.clone()).unwrap_or_default(),
                    adapters_waiting: lora.map(|l| l.waiting.clone()).unwrap_or_default(),
                    in_flight: local.in_flight_requests,
                    queue_credit: local.queue_credit(),
                    prefill_pending_tokens: local.prefill_pending_tokens,
                    predicted_ttft: Duration::try_from_secs_f64(predicted.max(0.0))
                        .unwrap_or(Duration::MAX),
                    prefill_tokens_per_s: estimate.prefill_tokens_per_s,
                    excluded,
                }
            })
            .collect();
        PoolView {
            endpoints,
            failing_open,
        }
    }
}

/// Which endpoints of `pool` `filter` alone would remove at `now`, by position; `cands` is left
/// holding every endpoint's signals as the filter saw them.
fn removed_by(
    filter: &Filter,
    pool: &Pool,
    now: Duration,
    fresh_load: bool,
    cands: &mut Candidates,
) -> Vec<bool> {
    let n = pool.len();
    if let Filter::LabelSelector { .. } = filter {
        return pool
            .specs()
            .iter()
            .map(|s| !filter.admits_member(s))
            .collect();
    }
    cands.fill(pool, Members::All, &[], fresh_load);
    match filter.apply(now, cands) {
        Outcome::Applied => (0..n).map(|i| !cands.keep.kept(i)).collect(),
        // It would have removed every endpoint. (A stale filter failing open withholds the
        // load signals, but its reason reads only the scrape times, which it keeps.)
        Outcome::FailedOpen => vec![true; n],
    }
}

/// Why `filter` removed the endpoint at `pos` (whose signals `cands` holds).
fn reason(filter: &Filter, cands: &Candidates, pos: usize) -> Exclusion {
    match filter {
        Filter::LabelSelector { .. } => Exclusion::Labels,
        Filter::Stale { .. } => match cands.scraped_ns.get(pos) {
            Some(&at) if at != NEVER_SCRAPED => Exclusion::Stale,
            _ => Exclusion::NeverScraped,
        },
        Filter::Saturation { max_waiting, .. } => {
            let waiting = cands.waiting.get(pos).copied().unwrap_or(f64::NAN);
            // A comparison with NaN (unknown) is false, as in the filter.
            if max_waiting.is_some_and(|q| waiting >= q) {
                Exclusion::QueueFull
            } else {
                Exclusion::KvFull
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{read_metrics, Engine};
    use crate::{EndpointSpec, Profile, RequestFeatures};

    fn pool_of(bodies: &[Option<&str>], now: Duration) -> Pool {
        let specs = (0..bodies.len())
            .map(|i| EndpointSpec::new(i as u64, format!("10.0.0.{i}:8000")))
            .collect();
        let mut pool = Pool::new(specs).expect("pool");
        for (i, body) in bodies.iter().enumerate() {
            if let Some(body) = body {
                let scrape = read_metrics(Engine::Vllm, body.as_bytes(), now).expect("scrape");
                pool.update_metrics(EndpointId(i as u64), scrape.metrics)
                    .expect("update");
            }
        }
        pool
    }

    fn saturating_profile() -> Profile {
        let mut p = Profile::with_scorers("test", Vec::new());
        p.filters.push(Filter::Saturation {
            max_waiting: Some(5.0),
            max_kv: Some(0.9),
        });
        p
    }

    const IDLE: &str =
        "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.3\n";

    #[test]
    fn each_filter_names_the_endpoints_it_would_remove_and_why() {
        let now = Duration::from_secs(100);
        let pool = pool_of(
            &[
                Some(IDLE),
                Some("vllm:num_requests_waiting 9\nvllm:kv_cache_usage_perc 0.2\n"),
                Some("vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.95\n"),
                None,
            ],
            now,
        );
        let picker = Picker::new(Policy::Weighted(saturating_profile()), 1);
        let view = picker.view(&pool, now + Duration::from_millis(10));
        let why: Vec<&[Exclusion]> = view.endpoints.iter().map(|e| &e.excluded[..]).collect();
        assert_eq!(
            why,
            [
                &[][..],
                &[Exclusion::QueueFull],
                &[Exclusion::KvFull],
                &[Exclusion::NeverScraped],
            ]
        );
        assert!(view.failing_open.is_empty());
        let idle = &view.endpoints[0];
        assert_eq!(idle.waiting, Some(1.0));
        assert_eq!(idle.running, Some(2.0));
        assert_eq!(idle.kv, Some(0.3));
        assert_eq!(idle.scrape_age, Some(Duration::from_millis(10)));
        assert_eq!(view.endpoints[3].scrape_age, None);
        let fresh: Vec<bool> = view.endpoints.iter().map(|e| e.fresh).collect();
        assert_eq!(fresh, [true, true, true, false]);
        assert_eq!(view.endpoints[3].waiting, None);
    }

    #[test]
    fn a_filter_that_would_remove_everyone_is_shown_failing_open() {
        let now = Duration::from_secs(100);
        let pool = pool_of(&[Some(IDLE), Some(IDLE)], now);
        let picker = Picker::new(Policy::Weighted(saturating_profile()), 1);
        let later = now + Duration::from_secs(3_600);
        let view = picker.view(&pool, later);
        assert_eq!(view.failing_open, ["stale-metrics-filter"]);
        for e in &view.endpoints {
            assert_eq!(e.excluded, [Exclusion::Stale]);
            assert!(!e.fresh);
        }
    }

    #[test]
    fn the_prediction_grows_with_the_work_already_sent_there() {
        let now = Duration::from_secs(100);
        let pool = pool_of(&[Some(IDLE), Some(IDLE)], now);
        let mut picker = Picker::new(Policy::infergate(), 1);
        let req = RequestFeatures::new("m", 4_000);
        let dispatch = picker
            .on_dispatch(&pool, EndpointId(1), &req, now)
            .expect("dispatch");
        let view = picker.view(&pool, now);
        let (idle, busy) = (&view.endpoints[0], &view.endpoints[1]);
        assert_eq!((idle.in_flight, busy.in_flight), (0, 1));
        assert_eq!((idle.queue_credit, busy.queue_credit), (0, 1));
        assert_eq!(busy.prefill_pending_tokens, 4_000);
        assert!(
            busy.predicted_ttft > idle.predicted_ttft,
            "{:?} vs {:?}",
            busy.predicted_ttft,
            idle.predicted_ttft
        );
        drop(dispatch);
        let view = picker.view(&pool, now);
        assert_eq!(view.endpoints[1].in_flight, 0);
        assert_eq!(
            view.endpoints[1].predicted_ttft,
            view.endpoints[0].predicted_ttft
        );
    }

    #[test]
    fn a_baseline_policy_has_no_filters_to_show() {
        let now = Duration::from_secs(100);
        let pool = pool_of(&[None], now);
        let view = Picker::new(Policy::RoundRobin, 1).view(&pool, now);
        assert!(view.endpoints[0].excluded.is_empty());
        assert!(view.failing_open.is_empty());
    }
}
