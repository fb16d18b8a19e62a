//! `infergate bench` over several loads and `--capacity`: the load list's syntax, the sweep's
//! tables and plot, and the capacity-at-SLO table with its "GPUs saved" against round-robin.

use anyhow::{bail, Context};
use infergate_bench::plot::{line_chart, Series, XScale};
use infergate_bench::suite::{CapacityAtSlo, Offered, ScenarioReport};
use std::fmt::Write;
use std::time::Duration;

/// Parses `--load`: one fraction (`0.8`), a list (`0.5,0.8,1.2`) or a range `FROM:TO:STEP`
/// (`0.3:2.0:0.1`, both ends included). Every load is a positive fraction of capacity.
pub fn parse_loads(text: &str) -> anyhow::Result<Vec<f64>> {
    let number = |s: &str| -> anyhow::Result<f64> {
        let v: f64 = s
            .trim()
            .parse()
            .with_context(|| format!("--load: `{s}` is not a number"))?;
        if !(v.is_finite() && v > 0.0) {
            bail!("--load must be a positive fraction of capacity, got {v}");
        }
        Ok(v)
    };
    let loads = if text.contains(':') {
        let parts: Vec<&str> = text.split(':').collect();
        let [from, to, step] = parts.as_slice() else {
            bail!("--load range is FROM:TO:STEP, got `{text}`");
        };
        let (from, to, step) = (number(from)?, number(to)?, number(step)?);
        if to < from {
            bail!("--load range {text}: TO is below FROM");
        }
        let steps = ((to - from) / step + 1e-9).floor() as usize;
        if steps > 1_000 {
            bail!("--load range {text} has {steps} points: use a larger STEP");
        }
        // Each point from its index, not by adding STEP, so 0.3 + 7 × 0.1 prints as 1.0.
        (0..=steps)
            .map(|i| ((from + i as f64 * step) * 1e6).round() / 1e6)
            .collect()
    } else {
        text.split(',').map(number).collect::<anyhow::Result<_>>()?
    };
    Ok(loads)
}

/// Parses a duration for the SLO flags: `500ms`, `2s`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let (number, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = t.strip_suffix('s') {
        (s, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = number
        .trim()
        .parse()
        .with_context(|| format!("`{text}` is not a duration (say 500ms or 2s)"))?;
    if !(v.is_finite() && v > 0.0) {
        bail!("`{text}`: a duration must be positive");
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// One scenario's sweep as Markdown: per policy, P50/P95/P99 TTFT, P99 TPOT, goodput,
/// unanswered and refused requests at each load, and P99 TTFT against the best peer at each
/// load.
pub fn sweep_markdown(reports: &[ScenarioReport]) -> String {
    let Some(first) = reports.first() else {
        return String::new();
    };
    let mut out = format!(
        "\n### {} — load sweep\n\nfleet capacity {:.1} req/s, {} s of arrivals per point, median of seeds {:?} (each P99 with its range over seeds)\n\n",
        first.scenario, first.capacity_rps, first.duration_s, first.seeds
    );
    out.push_str(&crate::bench_tables::fidelity_note(&first.scenario));
    out.push_str("| load | policy | TTFT p50 | p95 | p99 (seeds' range) | TPOT p99 | goodput req/s | tok/s | unanswered | refused |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for r in reports {
        for p in &r.results {
            let _ = writeln!(
                out,
                "| {:.2} | {} | {} | {} | {} ({}–{}) | {:.0} ms | {:.2} | {:.0} | {} | {} |",
                r.load,
                p.policy,
                ms(p.ttft_ms.p50),
                ms(p.ttft_ms.p95),
                ms(p.ttft_ms.p99),
                ms(p.spread.ttft_p99_ms.min),
                ms(p.spread.ttft_p99_ms.max),
                p.tpot_ms.p99,
                p.goodput_rps,
                p.output_tokens_per_s,
                p.unanswered,
                p.shed
            );
        }
    }
    out.push_str(&verdict_markdown(reports));
    out
}

/// Per load: infergate's P99 TTFT and goodput against the best peer's (the oracle is not a
/// peer), so that a loss is one line, not a search through the table.
fn verdict_markdown(reports: &[ScenarioReport]) -> String {
    let mut out = String::from(
        "\n| load | infergate p99 | best peer p99 | infergate / best | infergate refused | infergate goodput | round-robin goodput |\n|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let Some(ig) = r.results.iter().find(|p| p.policy == "infergate") else {
            continue;
        };
        let best = r
            .results
            .iter()
            .filter(|p| is_peer(&p.policy))
            .min_by(|a, b| a.ttft_ms.p99.total_cmp(&b.ttft_ms.p99));
        let rr = r.results.iter().find(|p| p.policy == "round-robin");
        let Some(best) = best else { continue };
        let _ = writeln!(
            out,
            "| {:.2} | {} | {} ({}) | {:.2} | {:.1} % | {:.2} | {} |",
            r.load,
            ms(ig.ttft_ms.p99),
            ms(best.ttft_ms.p99),
            best.policy,
            ig.ttft_ms.p99 / best.ttft_ms.p99,
            refused_share(ig),
            ig.goodput_rps,
            rr.map_or("—".into(), |r| format!("{:.2}", r.goodput_rps)),
        );
    }
    out
}

/// The share of a policy's measured arrivals that flow control refused, in percent.
fn refused_share(p: &infergate_bench::report::PolicyResult) -> f64 {
    let measured = p.measured.max(1) as f64;
    100.0 * p.shed as f64 / measured
}

/// Whether `policy` is a peer infergate is judged against: not infergate itself, nor one of its
/// ablations, nor the oracle (a reference that reads the engines' true state).
fn is_peer(policy: &str) -> bool {
    policy != infergate_bench::runner::INFERGATE
        && !policy.starts_with(infergate_bench::ablation::PREFIX)
        && !infergate_bench::runner::is_oracle(policy)
}

/// The P99 TTFT of every policy against load, log y as seconds.
pub fn p99_vs_load_svg(reports: &[ScenarioReport]) -> String {
    let Some(first) = reports.first() else {
        return String::new();
    };
    let series: Vec<Series> = first
        .results
        .iter()
        .map(|p| Series {
            name: p.policy.clone(),
            points: reports
                .iter()
                .filter_map(|r| {
                    let v = r.results.iter().find(|q| q.policy == p.policy)?;
                    Some((r.load, v.ttft_ms.p99 / 1e3))
                })
                .collect(),
        })
        .collect();
    line_chart(
        &format!("{}: P99 TTFT against load", first.scenario),
        "offered load (fraction of fleet capacity)",
        "P99 TTFT (s)",
        &series,
        XScale::Linear,
    )
}

/// Capacity at SLO as Markdown: per policy, the highest load meeting the SLO, against
/// round-robin's, and the share of the fleet that serves round-robin's capacity under it.
pub fn capacity_markdown(
    scenario: &str,
    offered: &Offered,
    slo: &infergate_bench::report::Slo,
    results: &[CapacityAtSlo],
) -> String {
    let tpot = slo.tpot.map_or(String::new(), |t| {
        format!(", TPOT p99 ≤ {} ms", t.as_millis())
    });
    let mut out = format!(
        "\n### {scenario} — capacity at SLO (TTFT p99 ≤ {} ms{tpot})\n\nfleet capacity {:.1} req/s\n\n| policy | capacity (load) | req/s | vs round-robin | GPUs saved vs round-robin |\n|---|---|---|---|---|\n",
        slo.ttft.as_millis(),
        offered.capacity_rps
    );
    out.insert_str(
        out.find("| policy |").unwrap_or(out.len()),
        &crate::bench_tables::fidelity_note(scenario),
    );
    let rr = results.iter().find(|c| c.policy == "round-robin");
    for c in results {
        let bound = if c.at_least { "≥ " } else { "" };
        let (ratio, saved) = match rr {
            Some(rr) if rr.load > 0.0 && c.load > 0.0 => (
                format!("{:.2}×", c.load / rr.load),
                format!("{:+.0} %", (1.0 - rr.load / c.load) * 100.0),
            ),
            _ => ("—".into(), "—".into()),
        };
        let _ = writeln!(
            out,
            "| {} | {bound}{:.2} | {bound}{:.1} | {ratio} | {saved} |",
            c.policy, c.load, c.rate_rps
        );
    }
    out
}

fn ms(v: f64) -> String {
    if v.is_nan() {
        "—".into()
    } else if v >= 10_000.0 {
        format!("{:.1} s", v / 1e3)
    } else {
        format!("{v:.0} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_parse_as_a_value_a_list_or_an_inclusive_range() {
        assert_eq!(parse_loads("0.8").unwrap(), vec![0.8]);
        assert_eq!(parse_loads("0.5,1.2").unwrap(), vec![0.5, 1.2]);
        let range = parse_loads("0.3:2.0:0.1").unwrap();
        assert_eq!(range.len(), 18);
        assert_eq!((range[0], range[7], range[17]), (0.3, 1.0, 2.0));
        assert!(parse_loads("0:1:0.1").is_err());
        assert!(parse_loads("1:0.5:0.1").is_err());
        assert!(parse_loads("0.1:0.2").is_err());
        assert!(parse_loads("-1").is_err());
    }

    #[test]
    fn slo_durations_take_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1_500));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("0s").is_err());
    }
}
