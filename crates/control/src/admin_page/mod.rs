//! The admin listener's live page: `/` serves one HTML file (built into the binary, loading
//! nothing from elsewhere) that polls `/api/fleet` every second and draws each pool's endpoints
//! as the picker sees them, the recent decisions and the 429s.
//!
//! `/api/fleet` is the same view as the fleet gauges (`Picker::view` on each pool's snapshot)
//! plus the pools' recent decisions, as JSON; like `/metrics` it walks every pool, so it is for
//! the admin path only.

use infergate_picker::EndpointSpec;
use infergate_telemetry::metrics::{EndpointLabels, PoolLabels};
use serde_json::{json, Value};

use crate::pool::PoolRuntime;
use crate::shared::Shared;

/// The page.
pub(crate) const PAGE: &str = include_str!("index.html");

/// `/api/fleet`: every scraped pool as its picker sees it now, and its recent decisions, newest
/// first.
pub(crate) fn fleet_json(shared: &Shared) -> String {
    let now = shared.clock.now();
    let routes = shared.routes.load();
    let mut pools = Vec::new();
    let mut decisions = Vec::new();
    for pool in routes.scraped_pools() {
        pools.push(pool_json(shared, pool, now));
        for d in pool.recent_decisions() {
            decisions.push((
                d.at,
                json!({
                    "pool": pool.name,
                    "model": d.model,
                    "endpoint": d.endpoint,
                    "candidates": d.candidates,
                    "removed": d.removed,
                    "best_score": d.best_score,
                    "decision_seconds": d.decision.as_secs_f64(),
                    "age_seconds": now.saturating_sub(d.at).as_secs_f64(),
                }),
            ));
        }
    }
    decisions.sort_by_key(|d| std::cmp::Reverse(d.0));
    decisions.truncate(crate::pool::RECENT_DECISIONS);
    json!({
        "pools": pools,
        "decisions": decisions.into_iter().map(|(_, d)| d).collect::<Vec<Value>>(),
    })
    .to_string()
}

fn pool_json(shared: &Shared, pool: &PoolRuntime, now: std::time::Duration) -> Value {
    let (snap, view) = pool.view(now);
    let metrics = &shared.metrics;
    let sent = |spec: &EndpointSpec| {
        metrics
            .routing_decisions
            .get(&EndpointLabels {
                pool: pool.name.clone(),
                endpoint: spec.address.clone(),
            })
            .map_or(0, |c| c.get())
    };
    let shed = metrics
        .shed
        .get(&PoolLabels {
            pool: pool.name.clone(),
        })
        .map_or(0, |c| c.get());
    let specs = snap.pool.specs();
    let mut requests = 0;
    let endpoints: Vec<Value> = specs
        .iter()
        .zip(&view.endpoints)
        .map(|(spec, e)| {
            let sent = sent(spec);
            requests += sent;
            json!({
                "address": spec.address,
                "pod": spec.name,
                "kv": e.kv,
                "waiting": e.waiting,
                "running": e.running,
                "adapters_running": e.adapters_running,
                "adapters_waiting": e.adapters_waiting,
                "in_flight": e.in_flight,
                "queue_credit": e.queue_credit,
                "prefill_pending_tokens": e.prefill_pending_tokens,
                "predicted_ttft_seconds": e.predicted_ttft.as_secs_f64(),
                "scrape_age_seconds": e.scrape_age.map(|a| a.as_secs_f64()),
                "fresh": e.fresh,
                "excluded": e.excluded.iter().map(|x| x.as_str()).collect::<Vec<_>>(),
                "requests": sent,
            })
        })
        .collect();
    json!({
        "name": pool.name,
        "model": pool.model_name,
        "ready": view.endpoints.iter().filter(|e| e.fresh).count(),
        "saturation": snap.state.saturation,
        "shed": shed,
        "requests": requests,
        "failing_open": view.failing_open,
        "endpoints": endpoints,
    })
}
