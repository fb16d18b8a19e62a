//! `infergate dashboards`: the Grafana dashboards, generated from the panel lists below, so the
//! queries live in one place that tests can read. `deploy/grafana/` and the Helm chart's copy are
//! this command's output; a test fails when they differ from it, and another runs every query
//! against a real Prometheus scraping `infergate demo` (crates/infergate/tests/dashboards.rs).
//!
//! Queries use `$__rate_interval` and the `$pool` and `$model` variables (the global tier's,
//! `$member`); every ratio guards its
//! denominator with `> 0`, and panels of events that may not have happened yet (429s) fall back
//! to 0 per series rather than showing no data.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Value};

/// `infergate dashboards`.
#[derive(Debug, clap::Args)]
pub struct DashboardsArgs {
    /// The directory to write the dashboards' JSON files into (created if missing).
    #[arg(long, default_value = "deploy/grafana")]
    pub out: PathBuf,
}

/// One query of a panel.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    /// PromQL, with Grafana's variables.
    pub expr: &'static str,
    /// The legend of each series.
    pub legend: &'static str,
}

/// One panel.
#[derive(Debug, Clone, Copy)]
pub struct Panel {
    /// Its title.
    pub title: &'static str,
    /// What it shows and why, as Grafana's panel description.
    pub description: &'static str,
    /// Grafana's unit (`s`, `percentunit`, `reqps`, `short`).
    pub unit: &'static str,
    /// Its queries.
    pub queries: &'static [Query],
}

/// A row of panels under a heading.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The heading.
    pub title: &'static str,
    /// Its panels, two per line.
    pub panels: &'static [Panel],
}

/// One dashboard.
#[derive(Debug, Clone, Copy)]
pub struct Dashboard {
    /// Its stable uid (links and provisioning key on it) and file name.
    pub uid: &'static str,
    /// Its title.
    pub title: &'static str,
    /// Its variables after the data source: name and `label_values(…)` query.
    pub variables: &'static [(&'static str, &'static str)],
    /// Its rows.
    pub rows: &'static [Row],
}

/// The cluster tier's variables: every pool and every model.
const CLUSTER_VARIABLES: &[(&str, &str)] = &[
    ("pool", "label_values(infergate_pool_endpoints, pool)"),
    ("model", "label_values(infergate_requests_total, model)"),
];

const OVERVIEW: Dashboard = Dashboard {
    uid: "infergate-overview",
    title: "infergate — overview",
    variables: CLUSTER_VARIABLES,
    rows: &[
        Row {
            title: "The three panels that pay for themselves",
            panels: &[
                Panel {
                    title: "P99 time to first token per model",
                    description: "Arrival at the gateway to the first streamed chunk, queueing included: what users wait for.",
                    unit: "s",
                    queries: &[Query {
                        expr: r#"histogram_quantile(0.99, sum by (le, model) (rate(infergate_time_to_first_token_seconds_bucket{model=~"$model"}[$__rate_interval])))"#,
                        legend: "{{model}}",
                    }],
                },
                Panel {
                    title: "Queue-depth spread across each pool's endpoints",
                    description: "Largest minus smallest waiting queue among a pool's endpoints: high while some pods idle and others queue, which good routing keeps near zero.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (pool) (infergate_endpoint_waiting_requests{pool=~"$pool"}) - min by (pool) (infergate_endpoint_waiting_requests{pool=~"$pool"})"#,
                        legend: "{{pool}}",
                    }],
                },
                Panel {
                    title: "Prefix-cache hit ratio per pool",
                    description: "Share of prompt tokens the model servers served from their prefix cache, from the answers' usage: what prefix-aware routing buys.",
                    unit: "percentunit",
                    queries: &[Query {
                        expr: r#"sum by (pool) (rate(infergate_cached_tokens_total{pool=~"$pool"}[$__rate_interval])) / (sum by (pool) (rate(infergate_prompt_tokens_total{pool=~"$pool"}[$__rate_interval])) > 0)"#,
                        legend: "{{pool}}",
                    }],
                },
                Panel {
                    title: "P99 time to first token per model, as the model servers measure it",
                    description: "vLLM's own histogram (the servers' queue and prefill, without the gateway's): compare with the gateway's to see where time goes.",
                    unit: "s",
                    queries: &[Query {
                        expr: r#"histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[$__rate_interval])))"#,
                        legend: "{{model_name}}",
                    }],
                },
            ],
        },
        Row {
            title: "Traffic",
            panels: &[
                Panel {
                    title: "Requests per second by model and status",
                    description: "Every inference request, answered or refused.",
                    unit: "reqps",
                    queries: &[Query {
                        expr: r#"sum by (model, status) (rate(infergate_requests_total{model=~"$model"}[$__rate_interval]))"#,
                        legend: "{{model}} {{status}}",
                    }],
                },
                Panel {
                    title: "Share of requests refused with 429, per model",
                    description: "The earliest signal that a pool is out of capacity (flow control sheds, rate limits): scale on it, not on GPU utilization.",
                    unit: "percentunit",
                    queries: &[Query {
                        expr: r#"(sum by (model) (rate(infergate_requests_total{status="429",model=~"$model"}[$__rate_interval])) or (sum by (model) (rate(infergate_requests_total{model=~"$model"}[$__rate_interval])) * 0)) / (sum by (model) (rate(infergate_requests_total{model=~"$model"}[$__rate_interval])) > 0)"#,
                        legend: "{{model}}",
                    }],
                },
                Panel {
                    title: "Canary split: requests rewritten per second",
                    description: "Requests a canary rule or the rewrite header sent to another model, by the model asked for and the target.",
                    unit: "reqps",
                    queries: &[Query {
                        expr: r#"sum by (model, target) (rate(infergate_rewrites_total[$__rate_interval]))"#,
                        legend: "{{model}} → {{target}}",
                    }],
                },
                Panel {
                    title: "Requests sent to each endpoint per second",
                    description: "Where the picker sends traffic, fallbacks included.",
                    unit: "reqps",
                    queries: &[Query {
                        expr: r#"sum by (pool, endpoint) (rate(infergate_routing_decisions_total{pool=~"$pool"}[$__rate_interval]))"#,
                        legend: "{{pool}} {{endpoint}}",
                    }],
                },
            ],
        },
        Row {
            title: "Picker and scrapes",
            panels: &[
                Panel {
                    title: "P99 picker latency per pool",
                    description: "Time to pick an endpoint and dispatch to it.",
                    unit: "s",
                    queries: &[Query {
                        expr: r#"histogram_quantile(0.99, sum by (le, pool) (rate(infergate_picker_latency_seconds_bucket{pool=~"$pool"}[$__rate_interval])))"#,
                        legend: "{{pool}}",
                    }],
                },
                Panel {
                    title: "Endpoints a filter would remove now, by reason",
                    description: "Stale or never-scraped metrics, full queues or KV caches: endpoints the picker will not send to.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"sum by (pool, reason) (infergate_endpoint_excluded{pool=~"$pool"})"#,
                        legend: "{{pool}} {{reason}}",
                    }],
                },
                Panel {
                    title: "Oldest scrape per pool",
                    description: "Seconds since the least recent good scrape of any endpoint of the pool.",
                    unit: "s",
                    queries: &[Query {
                        expr: r#"max by (pool) (infergate_scrape_age_seconds{pool=~"$pool"})"#,
                        legend: "{{pool}}",
                    }],
                },
                Panel {
                    title: "Scrape errors per second",
                    description: "Failed scrapes of model servers' metrics (connect, status, timeout, parse).",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"sum by (pool) (rate(infergate_scrape_errors_total{pool=~"$pool"}[$__rate_interval]))"#,
                        legend: "{{pool}}",
                    }],
                },
            ],
        },
        Row {
            title: "Flow control",
            panels: &[
                Panel {
                    title: "Requests waiting in flow control, by pool and band",
                    description: "Demand the pool is not taking now: with the 429s, the autoscaling signal.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"sum by (pool, band) (infergate_flow_queue_requests{pool=~"$pool"})"#,
                        legend: "{{pool}} {{band}}",
                    }],
                },
                Panel {
                    title: "Refusals per second by band and reason",
                    description: "Requests flow control refused, by the x-llm-d-request-dropped-reason they were given.",
                    unit: "reqps",
                    queries: &[Query {
                        expr: r#"sum by (pool, band, reason) (rate(infergate_flow_rejections_total{pool=~"$pool"}[$__rate_interval]))"#,
                        legend: "{{pool}} {{band}} {{reason}}",
                    }],
                },
                Panel {
                    title: "P99 wait in flow control's queue",
                    description: "How long admitted requests waited before dispatch (0 for those admitted at once).",
                    unit: "s",
                    queries: &[Query {
                        expr: r#"histogram_quantile(0.99, sum by (le, pool) (rate(infergate_flow_queue_wait_seconds_bucket{pool=~"$pool"}[$__rate_interval])))"#,
                        legend: "{{pool}}",
                    }],
                },
                Panel {
                    title: "Pool saturation",
                    description: "Mean endpoint saturation as flow control measures it; at 1 Sheddable traffic is shed.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (pool) (infergate_pool_saturation{pool=~"$pool"})"#,
                        legend: "{{pool}}",
                    }],
                },
            ],
        },
    ],
};

const ENDPOINTS: Dashboard = Dashboard {
    uid: "infergate-endpoints",
    variables: CLUSTER_VARIABLES,
    title: "infergate — endpoints as the picker sees them",
    rows: &[Row {
        title: "Per endpoint",
        panels: &[
            Panel {
                title: "KV-cache use",
                description: "As last scraped from each model server.",
                unit: "percentunit",
                queries: &[Query {
                    expr: r#"max by (pool, pod) (infergate_endpoint_kv_cache_utilization{pool=~"$pool"})"#,
                    legend: "{{pool}} {{pod}}",
                }],
            },
            Panel {
                title: "Waiting requests",
                description: "As last scraped; the picker adds the requests it sent since (the queue credit).",
                unit: "short",
                queries: &[
                    Query {
                        expr: r#"max by (pool, pod) (infergate_endpoint_waiting_requests{pool=~"$pool"})"#,
                        legend: "{{pool}} {{pod}} scraped",
                    },
                    Query {
                        expr: r#"max by (pool, pod) (infergate_endpoint_queue_credit_requests{pool=~"$pool"})"#,
                        legend: "{{pool}} {{pod}} credit",
                    },
                ],
            },
            Panel {
                title: "Running requests",
                description: "As last scraped, and this gateway's own in flight.",
                unit: "short",
                queries: &[
                    Query {
                        expr: r#"max by (pool, pod) (infergate_endpoint_running_requests{pool=~"$pool"})"#,
                        legend: "{{pool}} {{pod}} running",
                    },
                    Query {
                        expr: r#"max by (pool, pod) (infergate_endpoint_in_flight_requests{pool=~"$pool"})"#,
                        legend: "{{pool}} {{pod}} in flight",
                    },
                ],
            },
            Panel {
                title: "Predicted time to first token",
                description: "The latency model's wait for a request arriving now, before its own prefill: the queue and prefill already there.",
                unit: "s",
                queries: &[Query {
                    expr: r#"max by (pool, pod) (infergate_endpoint_predicted_ttft_seconds{pool=~"$pool"})"#,
                    legend: "{{pool}} {{pod}}",
                }],
            },
            Panel {
                title: "Decode pace",
                description: "Each endpoint's mean time between tokens over its last second, from its server's histogram: flow control reads it against saturation.interTokenLatencyThreshold (80 ms by default) and holds new work while the pool is over it.",
                unit: "s",
                queries: &[Query {
                    expr: r#"max by (pool, pod) (infergate_endpoint_inter_token_latency_seconds{pool=~"$pool"})"#,
                    legend: "{{pool}} {{pod}}",
                }],
            },
            Panel {
                title: "Prefill waiting for a first token",
                description: "Uncached prompt tokens this gateway sent that await their first token.",
                unit: "short",
                queries: &[Query {
                    expr: r#"max by (pool, pod) (infergate_endpoint_prefill_pending_tokens{pool=~"$pool"})"#,
                    legend: "{{pool}} {{pod}}",
                }],
            },
            Panel {
                title: "LoRA adapters loaded",
                description: "Adapters each endpoint reported running in the interval.",
                unit: "short",
                queries: &[Query {
                    expr: r#"count by (pool, adapter) (max_over_time(infergate_endpoint_lora_adapter{pool=~"$pool",state="running"}[$__rate_interval]))"#,
                    legend: "{{pool}} {{adapter}}",
                }],
            },
        ],
    }],
};

/// The global tier (`infergate global`): its members as it sees them, where traffic went and
/// why, and what failed.
const GLOBAL: Dashboard = Dashboard {
    uid: "infergate-global",
    title: "infergate — global tier",
    variables: &[("member", "label_values(infergate_global_member_up, member)")],
    rows: &[
        Row {
            title: "Members",
            panels: &[
                Panel {
                    title: "Members up",
                    description: "1 while the member is a candidate: its status fresh (its sequence advancing) and not ejected.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (member) (infergate_global_member_up{member=~"$member"})"#,
                        legend: "{{member}}",
                    }],
                },
                Panel {
                    title: "Share of traffic",
                    description: "Each member's share of the attempts the tier sent.",
                    unit: "percentunit",
                    queries: &[Query {
                        expr: r#"sum by (member) (rate(infergate_global_member_requests_total{member=~"$member"}[$__rate_interval])) / ignoring (member) group_left sum(rate(infergate_global_member_requests_total[$__rate_interval])) > 0"#,
                        legend: "{{member}}",
                    }],
                },
                Panel {
                    title: "Status age",
                    description: "Age of each member's last status that advanced: it leaves the candidates after three missed pulls (about 3 s).",
                    unit: "s",
                    queries: &[Query {
                        expr: r#"max by (member) (infergate_global_member_status_age_seconds{member=~"$member"})"#,
                        legend: "{{member}}",
                    }],
                },
                Panel {
                    title: "Slow-start ramp",
                    description: "A returning member's weight: below 1 while it ramps back, 0 while out.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (member) (infergate_global_member_ramp_weight{member=~"$member"})"#,
                        legend: "{{member}}",
                    }],
                },
            ],
        },
        Row {
            title: "Why traffic went where it did",
            panels: &[
                Panel {
                    title: "Score",
                    description: "Each member's last score: the weighted sum of its KV headroom, queue, proximity and error parts.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (member) (infergate_global_member_score{member=~"$member",part="total"})"#,
                        legend: "{{member}}",
                    }],
                },
                Panel {
                    title: "Score parts",
                    description: "The parts of each member's last score, each in [0, 1] before weighting.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (member, part) (infergate_global_member_score{member=~"$member",part!="total"})"#,
                        legend: "{{member}} {{part}}",
                    }],
                },
            ],
        },
        Row {
            title: "Failures",
            panels: &[
                Panel {
                    title: "Failovers and ejections",
                    description: "Attempts at a member that failed before its answer began and moved on, and ejections by outlier detection.",
                    unit: "short",
                    queries: &[
                        Query {
                            expr: r#"sum by (member) (rate(infergate_global_member_failovers_total{member=~"$member"}[$__rate_interval]))"#,
                            legend: "{{member}} failovers/s",
                        },
                        Query {
                            expr: r#"sum by (member) (increase(infergate_global_member_ejections_total{member=~"$member"}[$__rate_interval]))"#,
                            legend: "{{member}} ejections",
                        },
                    ],
                },
                Panel {
                    title: "Status pulls failing",
                    description: "Pulls of each member's status that failed or timed out, per second: a member whose pulls fail goes stale.",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"sum by (member) (rate(infergate_global_member_status_pull_failures_total{member=~"$member"}[$__rate_interval]))"#,
                        legend: "{{member}}",
                    }],
                },
                Panel {
                    title: "Models defined differently",
                    description: "1 for a model whose members disagree on its model names, adapters or routing (drift).",
                    unit: "short",
                    queries: &[Query {
                        expr: r#"max by (model) (infergate_global_model_drift)"#,
                        legend: "{{model}}",
                    }],
                },
            ],
        },
        Row {
            title: "The fleet as callers see it",
            panels: &[
                Panel {
                    title: "P99 time to first token",
                    description: "From a request's arrival at the tier to the first chunk of its answer (a stream's first event), over every member, and per member.",
                    unit: "s",
                    queries: &[
                        Query {
                            expr: r#"histogram_quantile(0.99, sum by (le) (rate(infergate_global_time_to_first_token_seconds_bucket[$__rate_interval])))"#,
                            legend: "fleet",
                        },
                        Query {
                            expr: r#"histogram_quantile(0.99, sum by (le, member) (rate(infergate_global_time_to_first_token_seconds_bucket{member=~"$member"}[$__rate_interval])))"#,
                            legend: "{{member}}",
                        },
                    ],
                },
                Panel {
                    title: "P99 time to a member's first byte",
                    description: "From sending an attempt to the member's response headers, over every member, and per member.",
                    unit: "s",
                    queries: &[
                        Query {
                            expr: r#"histogram_quantile(0.99, sum by (le) (rate(infergate_global_member_first_byte_seconds_bucket[$__rate_interval])))"#,
                            legend: "fleet",
                        },
                        Query {
                            expr: r#"histogram_quantile(0.99, sum by (le, member) (rate(infergate_global_member_first_byte_seconds_bucket{member=~"$member"}[$__rate_interval])))"#,
                            legend: "{{member}}",
                        },
                    ],
                },
                Panel {
                    title: "Answers by status",
                    description: "Requests the tier answered per second, by status code: 429 when every member is saturated or a tenant is over its limit, 503 with no member available, 502 when every member tried failed.",
                    unit: "reqps",
                    queries: &[Query {
                        expr: r#"sum by (code) (rate(infergate_global_requests_total[$__rate_interval]))"#,
                        legend: "{{code}}",
                    }],
                },
            ],
        },
    ],
};

/// Every dashboard.
pub const DASHBOARDS: [Dashboard; 3] = [OVERVIEW, ENDPOINTS, GLOBAL];

/// Grafana's JSON model of `d`.
pub fn render(d: &Dashboard) -> Value {
    let datasource = json!({"type": "prometheus", "uid": "${datasource}"});
    let mut panels = Vec::new();
    let mut id = 1;
    let mut y = 0;
    for row in d.rows {
        panels.push(json!({
            "id": id, "type": "row", "title": row.title, "collapsed": false,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": [],
        }));
        id += 1;
        y += 1;
        for (i, p) in row.panels.iter().enumerate() {
            let targets: Vec<Value> = p
                .queries
                .iter()
                .zip('A'..)
                .map(|(q, ref_id)| {
                    json!({
                        "refId": ref_id.to_string(), "expr": q.expr,
                        "legendFormat": q.legend, "datasource": datasource,
                    })
                })
                .collect();
            let x = if i % 2 == 0 { 0 } else { 12 };
            panels.push(json!({
                "id": id, "type": "timeseries", "title": p.title, "description": p.description,
                "datasource": datasource,
                "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": p.unit, "min": 0}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": targets,
            }));
            id += 1;
            if i % 2 == 1 || i + 1 == row.panels.len() {
                y += 8;
            }
        }
    }
    let variable = |name: &str, query: &str| -> Value {
        json!({
            "name": name, "type": "query", "datasource": datasource,
            "definition": query, "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "refresh": 2, "multi": true, "includeAll": true, "allValue": ".*",
            "current": {"text": "All", "value": "$__all"}, "sort": 1,
        })
    };
    json!({
        "uid": d.uid,
        "title": d.title,
        "tags": ["infergate"],
        "schemaVersion": 41,
        "version": 1,
        "editable": true,
        "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "annotations": {"list": []},
        "templating": {"list": std::iter::once(
            json!({"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source",
             "current": {}, "hide": 0}),
        )
        .chain(d.variables.iter().map(|(name, query)| variable(name, query)))
        .collect::<Vec<Value>>()},
        "panels": panels,
    })
}

/// The file name of `d`'s JSON.
pub fn file_name(d: &Dashboard) -> String {
    format!("{}.json", d.uid)
}

/// The bytes of `d`'s file: pretty JSON with a final newline.
pub fn file_text(d: &Dashboard) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&render(d))?;
    text.push('\n');
    Ok(text)
}

/// Runs `infergate dashboards`.
pub fn run(args: DashboardsArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for d in &DASHBOARDS {
        let path = args.out.join(file_name(d));
        std::fs::write(&path, file_text(d)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
