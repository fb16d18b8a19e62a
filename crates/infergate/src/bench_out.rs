//! `infergate bench --out DIR`: the report as files — README.md with every table and the plots
//! beside it, results.json, and the SVGs (a TTFT CDF of every policy per scenario; per-pod queues
//! over time under round-robin and infergate).

use anyhow::Context;
use infergate_bench::plot;
use infergate_bench::scenario::Scenario;
use infergate_bench::suite::ScenarioReport;
use std::fmt::Write;
use std::path::Path;

/// Policies whose per-pod queues are plotted.
const QUEUE_PLOTS: [&str; 2] = ["round-robin", "infergate"];

/// Writes the report for `reports` (one per scenario, in order) into `dir`, creating it.
pub fn write(dir: &Path, scenarios: &[Scenario], reports: &[ScenarioReport]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let save = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))
    };
    let command: Vec<String> = std::env::args().skip(1).collect();
    let mut md = format!(
        "# infergate bench report\n\nProduced by `infergate {}`.\n",
        command.join(" ")
    );
    let seed_rows: Vec<(&Scenario, &ScenarioReport)> = scenarios
        .iter()
        .zip(reports)
        .filter(|(s, _)| s.seed_row.is_some())
        .collect();
    if !seed_rows.is_empty() {
        let policies: Vec<&str> = reports
            .first()
            .map(|r| r.results.iter().map(|p| p.policy.as_str()).collect())
            .unwrap_or_default();
        let (s, r): (Vec<Scenario>, Vec<ScenarioReport>) = seed_rows
            .into_iter()
            .map(|(s, r)| (s.clone(), r.clone()))
            .unzip();
        let _ = write!(
            md,
            "\n## The seed rows (Δ vs round-robin)\n\n{}",
            crate::bench_tables::seed_table(&s, &r, &policies)
        );
    }
    for (s, r) in scenarios.iter().zip(reports) {
        md.push_str(&crate::bench_tables::scenario_markdown(r));
        if r.detail.is_empty() {
            continue;
        }
        let cdf_name = format!("{}-ttft-cdf.svg", s.id);
        let ttfts: Vec<(String, Vec<f64>)> = r
            .detail
            .iter()
            .map(|d| (d.policy.clone(), d.ttft_ms.clone()))
            .collect();
        let seed = r.seeds.first().copied().unwrap_or(1);
        save(
            &cdf_name,
            &plot::ttft_cdf(&format!("{}: TTFT, seed {seed}", s.id), &ttfts),
        )?;
        let _ = write!(md, "\n![TTFT CDF of {}]({cdf_name})\n", s.id);
        let replicas: Vec<String> = s
            .replicas()
            .enumerate()
            .map(|(i, k)| format!("{i}: {} tp{}", k.gpu(), k.tp()))
            .collect();
        // Queues for the baseline and infergate only: the CDF already compares every policy, and
        // two queue plots show the difference without a file per policy.
        for d in r
            .detail
            .iter()
            .filter(|d| QUEUE_PLOTS.contains(&d.policy.as_str()))
        {
            let name = format!("{}-queues-{}.svg", s.id, d.policy);
            let samples: Vec<(f64, u32, u32)> = d
                .queues
                .iter()
                .map(|q| (q.at.as_secs_f64(), q.replica, q.waiting))
                .collect();
            save(
                &name,
                &plot::queues(
                    &format!("{}: waiting per pod, {}, seed {seed}", s.id, d.policy),
                    &samples,
                    &replicas,
                ),
            )?;
            let _ = write!(md, "\n![{} queues under {}]({name})\n", s.id, d.policy);
        }
    }
    save("README.md", &md)?;
    save("results.json", &serde_json::to_string_pretty(reports)?)?;
    Ok(())
}
