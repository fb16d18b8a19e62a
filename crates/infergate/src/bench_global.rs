//! `infergate bench --global ID|all`: several clusters in virtual time behind the global tier,
//! infergate's tier against round-robin across clusters and nearest-region, at each load.

use anyhow::{bail, Context};
use infergate_bench::global::{self, GlobalPoint, GlobalPolicy, GlobalScenario};
use infergate_bench::report::Slo;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// What a multi-cluster run takes from the command line.
pub struct GlobalRun<'a> {
    /// `all` or a scenario id.
    pub id: &'a str,
    /// Policy names; empty: every one.
    pub policies: &'a [String],
    /// Loads; empty: each scenario's own.
    pub loads: &'a [f64],
    /// Seeds.
    pub seeds: &'a [u64],
    /// Seconds of arrivals.
    pub duration: Duration,
    /// The goodput SLO.
    pub slo: Slo,
    /// Where the JSON goes, if anywhere.
    pub json: Option<&'a std::path::Path>,
    /// The tier's `routing.spillAt`, if not its default.
    pub spill_at: Option<f64>,
}

/// Runs it and prints a table per scenario.
pub fn run(r: &GlobalRun<'_>) -> anyhow::Result<()> {
    let mut scenarios: Vec<GlobalScenario> = if r.id == "all" {
        global::scenario::all()
    } else {
        vec![global::scenario::by_id(r.id).with_context(|| {
            let ids: Vec<&str> = global::scenario::all().iter().map(|s| s.id).collect();
            format!(
                "unknown multi-cluster scenario `{}` (known: {})",
                r.id,
                ids.join(", ")
            )
        })?]
    };
    for s in &mut scenarios {
        s.spill_at = r.spill_at.or(s.spill_at);
        // The tier's config is checked before any run, so a bad --spill-at is named at once.
        if let Err(e) = s.tier_config(true) {
            bail!("{}: the global tier's config: {e}", s.id);
        }
    }
    let policies: Vec<GlobalPolicy> = if r.policies.is_empty() {
        GlobalPolicy::ALL.to_vec()
    } else {
        r.policies
            .iter()
            .map(|p| {
                GlobalPolicy::named(p).with_context(|| {
                    let names: Vec<&str> = GlobalPolicy::ALL.iter().map(|p| p.name()).collect();
                    format!(
                        "--global takes the policies {}, not `{p}`",
                        names.join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut all = Vec::new();
    for s in &scenarios {
        let started = Instant::now();
        let loads = if r.loads.is_empty() {
            vec![s.load]
        } else {
            r.loads.to_vec()
        };
        let points = global::sweep(
            s,
            &policies,
            &loads,
            r.seeds,
            r.duration,
            &r.slo,
            &mut |d, t| {
                eprint!("\r{}: {d}/{t} runs", s.id);
            },
        )?;
        eprintln!("\r{}: {:.1} s", s.id, started.elapsed().as_secs_f64());
        print!("{}", markdown(s, &points));
        all.push(serde_json::json!({ "scenario": s.id, "points": points }));
    }
    if let Some(path) = r.json {
        let body = serde_json::to_string_pretty(&all)?;
        std::fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// One scenario's table: per load and policy, TTFT (of the answered), goodput, the share
/// refused (429 from the tier or a cluster's flow control), failures, cost and where the
/// requests went.
fn markdown(s: &GlobalScenario, points: &[GlobalPoint]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n### {}\n", s.id);
    for c in &s.clusters {
        let kinds: Vec<String> = c
            .fleet
            .iter()
            .map(|k| format!("{}× {} {}", k.count, k.model(), k.gpu()))
            .collect();
        let _ = writeln!(
            out,
            "- {} ({}, ${:.2}/GPU-h): {}",
            c.name,
            c.region,
            c.price_per_gpu_hour,
            kinds.join(", ")
        );
    }
    let callers: Vec<String> = s
        .callers
        .iter()
        .map(|(r, share)| format!("{r} {:.0} %", share * 100.0))
        .collect();
    let _ = writeln!(out, "- callers: {}", callers.join(", "));
    if let Some(f) = s.fault {
        let _ = writeln!(
            out,
            "- fault: {} black-holed from {:.0} % to {:.0} % of the run",
            f.cluster,
            f.from * 100.0,
            f.until * 100.0
        );
    }
    let _ = writeln!(
        out,
        "\n| load | policy | TTFT P50 ms | TTFT P99 ms (seeds) | goodput req/s (seeds) | refused | failed (in flight / unstarted) | $/M tokens | cross-region | shares | last to faulty s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for p in points {
        let f = &p.result.figures;
        let shares: Vec<String> = p
            .result
            .cluster_shares
            .iter()
            .map(|(_, v)| format!("{:.0}", v * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "| {:.2} | {} | {:.0} | {:.0} ({:.0}–{:.0}) | {:.2} ({:.2}–{:.2}) | {:.1} % | {} ({} / {}) | {:.3} | {:.0} % | {} % | {} |",
            p.load,
            f.policy,
            f.ttft_ms.p50,
            f.ttft_ms.p99,
            f.spread.ttft_p99_ms.min,
            f.spread.ttft_p99_ms.max,
            f.goodput_rps,
            f.spread.goodput_rps.min,
            f.spread.goodput_rps.max,
            f.shed as f64 * 100.0 / f.measured.max(1) as f64,
            p.result.failed,
            p.result.failed_in_flight,
            p.result.failed_unstarted,
            p.result.cost_per_million_tokens,
            p.result.cross_region_share * 100.0,
            shares.join("/"),
            p.result
                .last_attempt_at_faulty_s
                .map_or_else(|| "—".to_owned(), |v| format!("{v:.2}")),
        );
    }
    out
}

/// Refuses flags that mean nothing with --global.
pub fn refuse_other_modes(set: &[(bool, &str)]) -> anyhow::Result<()> {
    for (on, flag) in set {
        if *on {
            bail!("--global runs its own multi-cluster scenarios in virtual time: drop {flag}");
        }
    }
    Ok(())
}
