//! Writes the fleet as each pool's picker sees it into the metrics, when they are read: the
//! per-endpoint signals and credit, why a filter would remove an endpoint, the pool means, and
//! their twins under GIE's and llm-d's names (`infergate_telemetry::fleet`).
//!
//! Runs on the admin listener's thread, once per `/metrics` read: it walks every pool (holding
//! each pool's picker lock for the walk of that pool), which is fine at a scrape interval and
//! never done on the request path.

use infergate_picker::{EndpointSpec, EndpointView, Exclusion, PoolView};
use infergate_telemetry::fleet::{
    mean_and_std_dev, AdapterLabels, EndpointQueueLabels, EndpointViewLabels, ExclusionLabels,
    FilterLabels, FleetGauges, FloatGauge, NameLabels, PodQueueLabels,
};
use infergate_telemetry::metrics::PoolLabels;
use prometheus_client::metrics::family::Family;

use crate::shared::Shared;

/// Rewrites every fleet gauge from the pools as they are now.
pub(crate) fn export(shared: &Shared) {
    let gauges = &shared.metrics.fleet;
    gauges.clear();
    let now = shared.clock.now();
    let routes = shared.routes.load();
    for pool in routes.scraped_pools() {
        let (snap, view) = pool.view(now);
        let paces = pool
            .admission()
            .decode_paces(snap.pool.specs().iter().map(|s| s.id));
        write_pool(
            gauges,
            &pool.name,
            snap.pool.specs(),
            &view,
            &paces,
            pool_reasons(pool),
        );
    }
}

/// The exclusion reasons the pool's profile can give, in the profile's order.
fn pool_reasons(pool: &crate::pool::PoolRuntime) -> Vec<Exclusion> {
    match pool.policy() {
        infergate_picker::Policy::Weighted(profile) => profile
            .filters
            .iter()
            .flat_map(|f| Exclusion::of_filter(f).iter().copied())
            .collect(),
        _ => Vec::new(),
    }
}

fn write_pool(
    g: &FleetGauges,
    pool: &str,
    specs: &[EndpointSpec],
    view: &PoolView,
    paces: &[Option<f64>],
    reasons: Vec<Exclusion>,
) {
    let mut fresh = FreshSignals::default();
    for (i, (spec, e)) in specs.iter().zip(&view.endpoints).enumerate() {
        write_endpoint(g, pool, spec, e, paces.get(i).copied().flatten(), &reasons);
        if e.fresh {
            fresh.add(e);
        }
    }
    let labels = PoolLabels {
        pool: pool.to_owned(),
    };
    let name = NameLabels {
        name: pool.to_owned(),
    };
    let ready = i64::try_from(fresh.endpoints).unwrap_or(i64::MAX);
    g.pool_ready.get_or_create(&labels).set(ready);
    g.gie_ready_pods.get_or_create(&name).set(ready);
    g.llmd_ready_endpoints.get_or_create(&name).set(ready);
    // With no fresh endpoint there is no mean: the series is absent rather than stale (GIE
    // keeps its last value, which makes a pool that lost its metrics look healthy).
    // Each signal's mean (ours, and GIE's twin) and standard deviation (llm-d's).
    for (values, ours, gie, llmd) in [
        (
            &fresh.kv,
            &g.pool_mean_kv,
            &g.gie_average_kv,
            &g.llmd_std_dev_kv,
        ),
        (
            &fresh.waiting,
            &g.pool_mean_waiting,
            &g.gie_average_queue,
            &g.llmd_std_dev_queue,
        ),
        (
            &fresh.running,
            &g.pool_mean_running,
            &g.gie_average_running,
            &g.llmd_std_dev_running,
        ),
    ] {
        if let Some((mean, sd)) = mean_and_std_dev(values) {
            ours.get_or_create(&labels).set(mean);
            gie.get_or_create(&name).set(mean);
            llmd.get_or_create(&name).set(sd);
        }
    }
    for filter in &view.failing_open {
        g.pool_failing_open
            .get_or_create(&FilterLabels {
                pool: pool.to_owned(),
                filter: (*filter).to_owned(),
            })
            .set(1);
    }
}

/// The known signals of a pool's fresh endpoints.
#[derive(Default)]
struct FreshSignals {
    endpoints: usize,
    kv: Vec<f64>,
    waiting: Vec<f64>,
    running: Vec<f64>,
}

impl FreshSignals {
    fn add(&mut self, e: &EndpointView) {
        self.endpoints += 1;
        self.kv.extend(e.kv);
        self.waiting.extend(e.waiting);
        self.running.extend(e.running);
    }
}

fn write_endpoint(
    g: &FleetGauges,
    pool: &str,
    spec: &EndpointSpec,
    e: &EndpointView,
    decode_pace: Option<f64>,
    reasons: &[Exclusion],
) {
    let labels = EndpointViewLabels {
        pool: pool.to_owned(),
        endpoint: spec.address.clone(),
        pod: spec.name.clone(),
    };
    let set = |family: &Family<EndpointViewLabels, FloatGauge>, x: Option<f64>| {
        if let Some(x) = x {
            family.get_or_create(&labels).set(x);
        }
    };
    set(&g.endpoint_kv, e.kv);
    set(&g.endpoint_waiting, e.waiting);
    set(&g.endpoint_running, e.running);
    set(
        &g.endpoint_scrape_age,
        e.scrape_age.map(|a| a.as_secs_f64()),
    );
    set(
        &g.endpoint_predicted_ttft,
        Some(e.predicted_ttft.as_secs_f64()),
    );
    set(&g.endpoint_prefill_rate, Some(e.prefill_tokens_per_s));
    set(&g.endpoint_decode_pace, decode_pace);
    let int = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
    g.endpoint_in_flight
        .get_or_create(&labels)
        .set(int(e.in_flight));
    g.endpoint_queue_credit
        .get_or_create(&labels)
        .set(int(e.queue_credit));
    g.endpoint_prefill_pending
        .get_or_create(&labels)
        .set(int(e.prefill_pending_tokens));
    for &reason in reasons {
        g.endpoint_excluded
            .get_or_create(&ExclusionLabels {
                pool: pool.to_owned(),
                endpoint: spec.address.clone(),
                pod: spec.name.clone(),
                reason: reason.as_str().to_owned(),
            })
            .set(i64::from(e.excluded.contains(&reason)));
    }
    for (adapters, state) in [
        (&e.adapters_running, "running"),
        (&e.adapters_waiting, "waiting"),
    ] {
        for adapter in adapters {
            g.endpoint_adapter
                .get_or_create(&AdapterLabels {
                    pool: pool.to_owned(),
                    endpoint: spec.address.clone(),
                    pod: spec.name.clone(),
                    adapter: adapter.clone(),
                    state: state.to_owned(),
                })
                .set(1);
        }
    }
    if let Some(waiting) = e.waiting {
        g.gie_per_pod_queue
            .get_or_create(&PodQueueLabels {
                name: pool.to_owned(),
                model_server_pod: spec.name.clone(),
            })
            .set(waiting);
        g.llmd_per_endpoint_queue
            .get_or_create(&EndpointQueueLabels {
                name: pool.to_owned(),
                model_server_endpoint: spec.name.clone(),
            })
            .set(waiting);
    }
}
