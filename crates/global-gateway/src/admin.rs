//! The tier's admin listener: `/metrics`, `/healthz`, `/readyz` (ready while at least one member
//! is a candidate) and `/status/global` (each member as the tier sees it, JSON).

use std::sync::Arc;

use hyper::{Method, Request, Response, StatusCode};
use infergate_global_picker::Availability;
use infergate_telemetry::global::MemberGauges;

use crate::proxy::{json_response, own_body, ProxyBody};
use crate::tier::{Table, Tier};

/// Answers one admin request.
pub(crate) fn handle<B>(tier: &Arc<Tier>, req: &Request<B>) -> Response<ProxyBody> {
    if req.method() != Method::GET {
        return own_body(StatusCode::METHOD_NOT_ALLOWED, "GET only\n", "text/plain");
    }
    match req.uri().path() {
        "/healthz" => own_body(StatusCode::OK, "ok\n", "text/plain"),
        "/readyz" => {
            let now = tier.now();
            let ready = tier
                .table()
                .members
                .iter()
                .any(|m| m.state.availability(now) == Availability::Available);
            if ready {
                own_body(StatusCode::OK, "ready\n", "text/plain")
            } else {
                own_body(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no member gateway is available yet\n",
                    "text/plain",
                )
            }
        }
        "/metrics" => {
            refresh_gauges(tier);
            own_body(
                StatusCode::OK,
                exposition(tier),
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
        }
        "/status/global" => json_response(StatusCode::OK, &status(tier)),
        _ => own_body(StatusCode::NOT_FOUND, "not found\n", "text/plain"),
    }
}

/// The cluster tier's families the global tier feeds: callers' auth, the key set and the
/// rate limits, counted by the same code under the same names.
const CLUSTER_FAMILIES: [&str; 3] = [
    "infergate_auth_",
    "infergate_jwks_",
    "infergate_rate_limit_",
];

/// The tier's own families, then those of [`CLUSTER_FAMILIES`], as one exposition.
fn exposition(tier: &Tier) -> String {
    let own = tier.metrics.encode();
    let mut out = own.strip_suffix("# EOF\n").unwrap_or(&own).to_owned();
    for line in tier.cluster_metrics.encode().lines() {
        let name = match line.strip_prefix("# ") {
            // `# HELP name …`, `# TYPE name …`, `# UNIT name …`; `# EOF` has no name.
            Some(meta) => meta.split(' ').nth(1).unwrap_or(""),
            None => line.split(['{', ' ']).next().unwrap_or(""),
        };
        if CLUSTER_FAMILIES.iter().any(|p| name.starts_with(p)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

fn availability_name(a: Availability) -> &'static str {
    match a {
        Availability::Available => "available",
        Availability::Unknown => "unknown",
        Availability::Stale => "stale",
        Availability::Ejected => "ejected",
    }
}

/// The drift among the members' last statuses (stale ones included: a definition does not
/// go stale).
fn current_drift(table: &Table) -> Vec<infergate_global_picker::Drift> {
    infergate_global_picker::drift(
        table
            .members
            .iter()
            .filter_map(|m| m.state.status().map(|s| (m.name.as_str(), s))),
    )
}

fn refresh_gauges(tier: &Tier) {
    let now = tier.now();
    let table = tier.table();
    let drift = current_drift(&table);
    let served: std::collections::BTreeSet<&str> = table
        .members
        .iter()
        .filter_map(|m| m.state.status())
        .flat_map(|s| &s.pools)
        .flat_map(|p| p.models.iter().chain(&p.adapters))
        .map(String::as_str)
        .collect();
    tier.metrics.set_drift(
        served
            .iter()
            .map(|m| (*m, drift.iter().any(|d| d.model == *m))),
    );
    for (i, m) in table.members.iter().enumerate() {
        let score = table.last_score[i].map(|s| {
            [
                s.total,
                s.kv_headroom,
                s.queue_depth,
                s.region_proximity,
                s.error_rate,
            ]
        });
        tier.metrics.set_member(
            i,
            MemberGauges {
                up: m.state.availability(now) == Availability::Available,
                status_age: m.state.status_age(now),
                ramp_weight: m.state.ramp_weight(now, &tier.settings),
                score,
            },
        );
    }
}

/// `/status/global`: every member, its state, its last status's pools and its last score.
fn status(tier: &Tier) -> serde_json::Value {
    let now = tier.now();
    let table = tier.table();
    let members: Vec<serde_json::Value> = table
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let spec = &tier.config.members[i];
            serde_json::json!({
                "name": m.name,
                "region": m.region,
                "zone": spec.zone,
                "state": availability_name(m.state.availability(now)),
                "statusAgeSeconds": m.state.status_age(now).map(|a| a.as_secs_f64()),
                "sequence": m.state.status().map(|s| s.sequence),
                "rampWeight": m.state.ramp_weight(now, &tier.settings),
                "ejections": m.state.ejections(),
                "throttledForSeconds": m.state.throttled_until(now).map(|t| (t - now).as_secs_f64()),
                "pools": m.state.status().map(|s| &s.pools),
                "lastScore": table.last_score[i].map(|s| serde_json::json!({
                    "total": s.total,
                    "kvHeadroom": s.kv_headroom,
                    "queueDepth": s.queue_depth,
                    "regionProximity": s.region_proximity,
                    "errorRate": s.error_rate,
                })),
            })
        })
        .collect();
    let drift: Vec<serde_json::Value> = current_drift(&table)
        .iter()
        .map(|d| {
            serde_json::json!({
                "model": d.model,
                "message": d.describe(),
                "variants": d.variants.iter().map(|(def, members)| serde_json::json!({
                    "members": members,
                    "models": def.models,
                    "adapters": def.adapters,
                    "routing": def.routing,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": infergate_config::gateway::API_VERSION,
        "kind": "GlobalStatus",
        "members": members,
        "drift": drift,
    })
}
