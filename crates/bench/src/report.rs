//! Turning outcomes into the reference's figures, and tables.

use crate::runner::RunOutcome;
use infergate_config::gateway::Band;
use serde::Serialize;
use std::time::Duration;

/// Goodput thresholds: a request counts if its TTFT and TPOT are within these.
pub const GOODPUT_TTFT: Duration = Duration::from_secs(2);
/// See [`GOODPUT_TTFT`].
pub const GOODPUT_TPOT: Duration = Duration::from_millis(100);

/// p50 / p95 / p99 / mean, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values` (milliseconds).
    pub fn of(values: &mut [f64]) -> Percentiles {
        if values.is_empty() {
            return Percentiles {
                p50: f64::NAN,
                p95: f64::NAN,
                p99: f64::NAN,
                mean: f64::NAN,
            };
        }
        values.sort_by(f64::total_cmp);
        let at =
            |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Percentiles {
            p50: at(0.5),
            p95: at(0.95),
            p99: at(0.99),
            mean: values.iter().sum::<f64>() / values.len() as f64,
        }
    }
}

/// One policy's figures on one run (or the median over seeds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Time to first token.
    pub ttft_ms: Percentiles,
    /// Inter-token latency: the gaps between successive tokens, pooled over the measured
    /// requests (the virtual runner's engine step ends; the live client's chunk arrivals).
    pub itl_ms: Percentiles,
    /// Time per output token after the first, one value per request: (E2E − TTFT) / (output
    /// tokens − 1).
    pub tpot_ms: Percentiles,
    /// End to end.
    pub e2e_ms: Percentiles,
    /// Output tokens per second finished in the measurement window.
    pub output_tokens_per_s: f64,
    /// Requests per second finished in the window within the goodput thresholds.
    pub goodput_rps: f64,
    /// Requests refused or never finished.
    pub errors: u64,
    /// Requests shed (flow control; none without it).
    pub shed: u64,
    /// Prefix-cache hit ratio over the fleet.
    pub prefix_hit_ratio: f64,
    /// Preemptions over the fleet.
    pub preemptions: u64,
    /// Per priority band, when the requests carry bands (flow-control scenarios).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bands: Vec<BandResult>,
}

/// One priority band's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandResult {
    /// `Critical`, `Standard` or `Sheddable`.
    pub band: String,
    /// Measured requests of the band.
    pub requests: u64,
    /// Their time to first token (those that got one).
    pub ttft_ms: Percentiles,
    /// Sent but failed or never finished.
    pub errors: u64,
    /// Refused by flow control (429 shed or queue full, 503 queue TTL).
    pub shed: u64,
}

/// The figures of a run: the first 10 % of arrivals are warm-up; throughput counts requests
/// finishing between the end of warm-up and the last arrival.
pub fn summarize(policy: &str, run: &RunOutcome) -> PolicyResult {
    let warm = run.requests.len() / 10;
    let measured = &run.requests[warm..];
    let window_start = measured.first().map_or(Duration::ZERO, |r| r.sent);
    let window = (run.last_arrival.saturating_sub(window_start))
        .as_secs_f64()
        .max(1e-9);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut ttft = measured_ttfts_ms(run);
    let mut e2e: Vec<f64> = measured
        .iter()
        .filter_map(|r| r.finished.map(|t| ms(t - r.sent)))
        .collect();
    let tpot = |r: &crate::runner::Outcome| {
        let (first, done) = (r.first_token?, r.finished?);
        (r.output_tokens > 1).then(|| ms(done - first) / f64::from(r.output_tokens - 1))
    };
    let mut tpots: Vec<f64> = measured.iter().filter_map(tpot).collect();
    let mut itl: Vec<f64> = run
        .token_gaps_ms
        .get(warm..)
        .unwrap_or_default()
        .iter()
        .flatten()
        .map(|&g| f64::from(g))
        .collect();
    let in_window = |r: &&crate::runner::Outcome| {
        r.finished
            .is_some_and(|t| t >= window_start && t <= run.last_arrival)
    };
    let tokens: u64 = measured
        .iter()
        .filter(in_window)
        .map(|r| u64::from(r.output_tokens))
        .sum();
    let good = measured
        .iter()
        .filter(in_window)
        .filter(|r| {
            let ttft_ok = r.first_token.is_some_and(|t| t - r.sent <= GOODPUT_TTFT);
            ttft_ok && tpot(r).is_none_or(|t| t <= ms(GOODPUT_TPOT))
        })
        .count();
    let failed =
        |r: &crate::runner::Outcome| r.refused.is_none() && (r.error || r.finished.is_none());
    let errors = measured.iter().filter(|r| failed(r)).count() as u64;
    let shed = measured.iter().filter(|r| r.refused.is_some()).count() as u64;
    let bands = Band::ALL
        .into_iter()
        .filter(|&b| measured.iter().any(|r| r.band == Some(b)))
        .map(|b| {
            let of_band: Vec<&crate::runner::Outcome> =
                measured.iter().filter(|r| r.band == Some(b)).collect();
            let mut ttft: Vec<f64> = of_band
                .iter()
                .filter_map(|r| r.first_token.map(|t| ms(t - r.sent)))
                .collect();
            BandResult {
                band: format!("{b:?}"),
                requests: of_band.len() as u64,
                ttft_ms: Percentiles::of(&mut ttft),
                errors: of_band.iter().filter(|r| failed(r)).count() as u64,
                shed: of_band.iter().filter(|r| r.refused.is_some()).count() as u64,
            }
        })
        .collect();
    PolicyResult {
        policy: policy.to_owned(),
        ttft_ms: Percentiles::of(&mut ttft),
        itl_ms: Percentiles::of(&mut itl),
        tpot_ms: Percentiles::of(&mut tpots),
        e2e_ms: Percentiles::of(&mut e2e),
        output_tokens_per_s: tokens as f64 / window,
        goodput_rps: good as f64 / window,
        errors,
        shed,
        prefix_hit_ratio: run.prefix_hit_ratio,
        preemptions: run.preemptions,
        bands,
    }
}

/// TTFT (ms) of every request after the warm-up tenth that got a first token.
pub fn measured_ttfts_ms(run: &RunOutcome) -> Vec<f64> {
    let warm = run.requests.len() / 10;
    run.requests[warm..]
        .iter()
        .filter_map(|r| r.first_token.map(|t| (t - r.sent).as_secs_f64() * 1e3))
        .collect()
}

/// The median, per figure, of one policy's results over several seeds.
pub fn median_over_seeds(results: &[PolicyResult]) -> Option<PolicyResult> {
    let first = results.first()?;
    let med = |f: &dyn Fn(&PolicyResult) -> f64| {
        let mut v: Vec<f64> = results.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let pct = |f: &dyn Fn(&PolicyResult) -> Percentiles| Percentiles {
        p50: med(&|r| f(r).p50),
        p95: med(&|r| f(r).p95),
        p99: med(&|r| f(r).p99),
        mean: med(&|r| f(r).mean),
    };
    Some(PolicyResult {
        policy: first.policy.clone(),
        ttft_ms: pct(&|r| r.ttft_ms),
        itl_ms: pct(&|r| r.itl_ms),
        tpot_ms: pct(&|r| r.tpot_ms),
        e2e_ms: pct(&|r| r.e2e_ms),
        output_tokens_per_s: med(&|r| r.output_tokens_per_s),
        goodput_rps: med(&|r| r.goodput_rps),
        errors: med(&|r| r.errors as f64) as u64,
        shed: med(&|r| r.shed as f64) as u64,
        prefix_hit_ratio: med(&|r| r.prefix_hit_ratio),
        preemptions: med(&|r| r.preemptions as f64) as u64,
        bands: first
            .bands
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let of = |r: &PolicyResult| r.bands.get(i).cloned();
                let band_med =
                    |f: &dyn Fn(&BandResult) -> f64| med(&|r| of(r).map_or(f64::NAN, |b| f(&b)));
                BandResult {
                    band: b.band.clone(),
                    requests: band_med(&|b| b.requests as f64) as u64,
                    ttft_ms: Percentiles {
                        p50: band_med(&|b| b.ttft_ms.p50),
                        p95: band_med(&|b| b.ttft_ms.p95),
                        p99: band_med(&|b| b.ttft_ms.p99),
                        mean: band_med(&|b| b.ttft_ms.mean),
                    },
                    errors: band_med(&|b| b.errors as f64) as u64,
                    shed: band_med(&|b| b.shed as f64) as u64,
                }
            })
            .collect(),
    })
}

/// A Markdown table of each policy's figures per priority band; empty when no result has bands.
pub fn band_table(results: &[PolicyResult]) -> String {
    if results.iter().all(|r| r.bands.is_empty()) {
        return String::new();
    }
    let mut out = String::from(
        "| policy | band | requests | TTFT p50 | p95 | p99 | errors | shed |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        for b in &r.bands {
            out.push_str(&format!(
                "| {} | {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {} | {} |\n",
                r.policy,
                b.band,
                b.requests,
                b.ttft_ms.p50,
                b.ttft_ms.p95,
                b.ttft_ms.p99,
                b.errors,
                b.shed
            ));
        }
    }
    out
}

/// A Markdown table of `results`, with Δ TTFT p99 and Δ throughput against `baseline`.
pub fn markdown_table(results: &[PolicyResult], baseline: &str) -> String {
    let base = results.iter().find(|r| r.policy == baseline);
    let delta = |v: f64, b: Option<f64>| match b {
        Some(b) if b.abs() > 1e-12 => format!("{:+.0} %", (v - b) / b * 100.0),
        _ => "—".to_owned(),
    };
    let mut out = String::from(
        "| policy | TTFT p50 | p95 | p99 | ITL p50 | E2E p99 | output tok/s | goodput req/s | errors | shed | prefix hits | Δ TTFT p99 | Δ throughput |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} ms | {:.1} s | {:.0} | {:.2} | {} | {} | {:.0} % | {} | {} |\n",
            r.policy,
            r.ttft_ms.p50,
            r.ttft_ms.p95,
            r.ttft_ms.p99,
            r.itl_ms.p50,
            r.e2e_ms.p99 / 1e3,
            r.output_tokens_per_s,
            r.goodput_rps,
            r.errors,
            r.shed,
            r.prefix_hit_ratio * 100.0,
            delta(r.ttft_ms.p99, base.map(|b| b.ttft_ms.p99)),
            delta(r.output_tokens_per_s, base.map(|b| b.output_tokens_per_s)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50, p.p95, p.p99), (50.0, 95.0, 99.0));
        assert!((p.mean - 50.5).abs() < 1e-12);
    }
}
