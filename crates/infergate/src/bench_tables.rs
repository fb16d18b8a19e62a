//! The bench's results as text: a scenario's markdown section and the seed's table, printed by
//! `infergate bench` and written by `--out` alike.

use infergate_bench::report::{band_table, markdown_table};
use infergate_bench::scenario::Scenario;
use infergate_bench::suite::ScenarioReport;
use infergate_engine::anchors::{self, Summary};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The held-out anchors' error per simulator profile, run once per process.
fn held_out_by_profile() -> &'static BTreeMap<String, Summary> {
    static HELD: OnceLock<BTreeMap<String, Summary>> = OnceLock::new();
    HELD.get_or_init(anchors::held_out_by_profile)
}

/// A line naming each profile of `scenario`'s fleet whose simulated figures are not backed by
/// held-out anchors within 20 % (`sim --list-profiles` has the same column); empty when every
/// one is, or for a fleet that is not a named scenario's.
pub fn fidelity_note(scenario: &str) -> String {
    let Some(s) = infergate_bench::scenario::by_id(scenario) else {
        return String::new();
    };
    let mut flagged = Vec::new();
    for kind in &s.fleet {
        let st = &kind.settings;
        let (Some(model), Some(gpu)) = (st.model.as_deref(), st.gpu.as_deref()) else {
            continue;
        };
        let profile = format!("{model}/{gpu}/tp{}", st.tp.unwrap_or(1));
        match held_out_by_profile().get(&profile) {
            None => flagged.push(format!("{profile} (no held-out anchor)")),
            Some(h) if h.flagged() => flagged.push(format!(
                "{profile} (held-out error {:.0} %)",
                h.median_error * 100.0
            )),
            Some(_) => {}
        }
    }
    if flagged.is_empty() {
        String::new()
    } else {
        format!(
            "⚠ simulator fidelity not established for {} (`infergate sim --anchors`).\n\n",
            flagged.join(", ")
        )
    }
}

/// A scenario's heading (with its gateway replicas when there are several), load line and
/// table.
pub fn scenario_markdown(r: &ScenarioReport) -> String {
    let gateways = match r.gateway_replicas {
        0 | 1 => String::new(),
        n => format!(", {n} gateway replicas"),
    };
    format!(
        "\n### {}{gateways}\n\nfleet capacity {:.1} req/s, offered {:.1} req/s ({:.0} %), {} s of arrivals, median of seeds {:?}\n\n{}{}",
        r.scenario,
        r.capacity_rps,
        r.rate_rps,
        r.load * 100.0,
        r.duration_s,
        r.seeds,
        fidelity_note(&r.scenario),
        markdown_table(&r.results, "round-robin")
    ) + &match band_table(&r.results) {
        t if t.is_empty() => t,
        t => format!("\nPer priority band:\n\n{t}"),
    }
}

/// The HyperPod table's layout: per scenario and policy, Δ TTFT P95, Δ TTFT P99, Δ throughput
/// against round-robin, with the seed's own claim beside infergate's row.
pub fn seed_table(scenarios: &[Scenario], reports: &[ScenarioReport], policies: &[&str]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | policy | Δ TTFT P95 | Δ TTFT P99 | Δ throughput |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    let pct = |v: f64, b: f64| {
        if b.abs() > 1e-12 {
            format!("{:+.0} %", (v - b) / b * 100.0)
        } else {
            "—".into()
        }
    };
    let claim = |v: Option<f64>| v.map_or("comparable".to_owned(), |v| format!("{v:+.0} %"));
    for (s, r) in scenarios.iter().zip(reports) {
        let Some(base) = r.results.iter().find(|p| p.policy == "round-robin") else {
            continue;
        };
        if let Some([p95, p99, tput]) = s.seed_row {
            let _ = writeln!(
                out,
                "| {} | *seed claim* | {} | {} | {} |",
                s.id,
                claim(p95),
                claim(p99),
                claim(tput)
            );
        }
        for p in r
            .results
            .iter()
            .filter(|p| p.policy != "round-robin" && policies.contains(&p.policy.as_str()))
        {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                s.id,
                p.policy,
                pct(p.ttft_ms.p95, base.ttft_ms.p95),
                pct(p.ttft_ms.p99, base.ttft_ms.p99),
                pct(p.output_tokens_per_s, base.output_tokens_per_s)
            );
        }
    }
    out
}
