//! Turning outcomes into the reference's figures, and tables.

use crate::runner::RunOutcome;
use infergate_config::gateway::Band;
use serde::Serialize;
use std::time::Duration;

/// Goodput thresholds: a request counts if its TTFT and TPOT are within these.
pub const GOODPUT_TTFT: Duration = Duration::from_secs(2);
/// See [`GOODPUT_TTFT`].
pub const GOODPUT_TPOT: Duration = Duration::from_millis(100);

/// A service-level objective. Each request is judged against it for goodput (its own TTFT and
/// TPOT within the limits); a run meets it when the p99 of TTFT — counting every request that
/// never got a first token as a miss — and, if set, the p99 of TPOT are within the limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slo {
    /// Time to first token.
    #[serde(serialize_with = "millis")]
    pub ttft: Duration,
    /// Time per output token after the first; `None`: not part of the objective.
    #[serde(serialize_with = "opt_millis")]
    pub tpot: Option<Duration>,
}

impl Default for Slo {
    /// The goodput thresholds: [`GOODPUT_TTFT`] and [`GOODPUT_TPOT`].
    fn default() -> Self {
        Slo {
            ttft: GOODPUT_TTFT,
            tpot: Some(GOODPUT_TPOT),
        }
    }
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

fn opt_millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => millis(d, s),
        None => s.serialize_none(),
    }
}

/// The lowest and highest value of a figure over the seeds of a result.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Range {
    /// Lowest.
    pub min: f64,
    /// Highest.
    pub max: f64,
}

impl Range {
    fn of(values: &[f64]) -> Range {
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for &v in values {
            min = min.min(v);
            max = max.max(v);
        }
        Range { min, max }
    }

    fn one(v: f64) -> Range {
        Range { min: v, max: v }
    }
}

/// How far the headline figures moved from seed to seed.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Spread {
    /// TTFT p99 (ms).
    pub ttft_p99_ms: Range,
    /// TPOT p99 (ms).
    pub tpot_p99_ms: Range,
    /// Goodput (requests per second).
    pub goodput_rps: Range,
}

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
    /// Served throughput: output tokens generated per second during the measurement window, by
    /// any request — at a load the fleet keeps up with this is the offered work, above it the
    /// rate the fleet actually serves (not backlog finished early).
    pub output_tokens_per_s: f64,
    /// Goodput: requests that arrived in the measurement window and met the SLO (their own TTFT
    /// and TPOT within it), per second of the window.
    pub goodput_rps: f64,
    /// Requests sent (not refused by flow control) that never got a first token: beside the
    /// percentiles, which are over the requests that got one.
    pub unanswered: u64,
    /// Whether the run met the SLO ([`Slo`]): the P99 TTFT over every measured arrival, with
    /// the unanswered and the refused counted as misses, and the P99 TPOT within it; over
    /// seeds, whether most did.
    pub slo_met: bool,
    /// Spread over seeds (a single run: its own values).
    pub spread: Spread,
    /// Requests refused or never finished.
    pub errors: u64,
    /// Measured arrivals (after the warm-up): what `errors`, `shed` and `unanswered` are out
    /// of.
    pub measured: u64,
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

/// The figures of a run against the default [`Slo`].
pub fn summarize(policy: &str, run: &RunOutcome) -> PolicyResult {
    summarize_with(policy, run, &Slo::default())
}

/// The figures of a run: the first 10 % of arrivals are warm-up; the measurement window runs
/// from the first measured arrival to the last arrival. Percentiles are over the measured
/// requests; throughput counts every token generated in the window; goodput the measured
/// requests that met `slo`.
pub fn summarize_with(policy: &str, run: &RunOutcome, slo: &Slo) -> PolicyResult {
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
    let tokens = tokens_generated_between(run, window_start, run.last_arrival);
    let good = measured
        .iter()
        .filter(|r| r.finished.is_some() && !r.error)
        .filter(|r| {
            let ttft_ok = r.first_token.is_some_and(|t| t - r.sent <= slo.ttft);
            let tpot_ok = match slo.tpot {
                Some(limit) => tpot(r).is_none_or(|t| t <= ms(limit)),
                None => true,
            };
            ttft_ok && tpot_ok
        })
        .count();
    let failed =
        |r: &crate::runner::Outcome| r.refused.is_none() && (r.error || r.finished.is_none());
    let errors = measured.iter().filter(|r| failed(r)).count() as u64;
    let shed = measured.iter().filter(|r| r.refused.is_some()).count() as u64;
    let unanswered = measured
        .iter()
        .filter(|r| r.refused.is_none() && r.first_token.is_none())
        .count() as u64;
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
    // The objective's p99 counts an unanswered request and a refused one as misses: it is the
    // p99 over every measured arrival, those without a first token sorted last, so a policy
    // cannot meet an SLO by refusing the requests that would miss it.
    // `Percentiles::of` sorts `ttft`, so the rank reads straight from it.
    let ttft_ms = Percentiles::of(&mut ttft);
    let arrivals = measured.len();
    let ttft_p99_all = if arrivals == 0 {
        f64::NAN
    } else {
        let rank = ((0.99 * arrivals as f64).ceil() as usize).clamp(1, arrivals);
        ttft.get(rank - 1).copied().unwrap_or(f64::INFINITY)
    };
    let tpot_ms = Percentiles::of(&mut tpots);
    let slo_met = ttft_p99_all <= ms(slo.ttft)
        && slo
            .tpot
            .is_none_or(|limit| tpot_ms.p99.is_nan() || tpot_ms.p99 <= ms(limit));
    let goodput_rps = good as f64 / window;
    PolicyResult {
        policy: policy.to_owned(),
        ttft_ms,
        itl_ms: Percentiles::of(&mut itl),
        tpot_ms,
        e2e_ms: Percentiles::of(&mut e2e),
        output_tokens_per_s: tokens / window,
        goodput_rps,
        unanswered,
        slo_met,
        spread: Spread {
            ttft_p99_ms: Range::one(ttft_ms.p99),
            tpot_p99_ms: Range::one(tpot_ms.p99),
            goodput_rps: Range::one(goodput_rps),
        },
        errors,
        measured: measured.len() as u64,
        shed,
        prefix_hit_ratio: run.prefix_hit_ratio,
        preemptions: run.preemptions,
        bands,
    }
}

/// Output tokens generated in `[from, to]` by every request of the run: each token at its own
/// time where the run recorded every gap, else spread evenly between the first and last token.
fn tokens_generated_between(run: &RunOutcome, from: Duration, to: Duration) -> f64 {
    let (from_s, to_s) = (from.as_secs_f64(), to.as_secs_f64());
    let mut total = 0.0;
    for (i, r) in run.requests.iter().enumerate() {
        let Some(first) = r.first_token else { continue };
        let first_s = first.as_secs_f64();
        let gaps = run.token_gaps_ms.get(i).map_or(&[][..], Vec::as_slice);
        if r.output_tokens > 0 && gaps.len() + 1 == r.output_tokens as usize {
            let mut t = first_s;
            total += f64::from(u8::from((from_s..=to_s).contains(&t)));
            for &g in gaps {
                t += f64::from(g) / 1e3;
                if t > to_s {
                    break;
                }
                total += f64::from(u8::from(t >= from_s));
            }
        } else {
            let last_s = r.finished.map_or(first_s, |t| t.as_secs_f64());
            let n = f64::from(r.output_tokens);
            if last_s <= first_s {
                total += n * f64::from(u8::from((from_s..=to_s).contains(&first_s)));
            } else {
                let overlap = (last_s.min(to_s) - first_s.max(from_s)).max(0.0);
                total += n * overlap / (last_s - first_s);
            }
        }
    }
    total
}

/// TTFT (ms) of every request after the warm-up tenth that got a first token.
pub fn measured_ttfts_ms(run: &RunOutcome) -> Vec<f64> {
    let warm = run.requests.len() / 10;
    run.requests[warm..]
        .iter()
        .filter_map(|r| r.first_token.map(|t| (t - r.sent).as_secs_f64() * 1e3))
        .collect()
}

/// The median of `v` (the mean of the middle two of an even count); NaN when empty. Its home is
/// the engine's `drive`, where the simulator's anchors read it too.
pub use infergate_engine::drive::median;

/// The median, per figure, of one policy's results over several seeds (an even count of
/// seeds: the mean of the middle two), with each headline figure's spread.
pub fn median_over_seeds(results: &[PolicyResult]) -> Option<PolicyResult> {
    let first = results.first()?;
    let med = |f: &dyn Fn(&PolicyResult) -> f64| {
        let mut v: Vec<f64> = results.iter().map(f).collect();
        median(&mut v)
    };
    let range = |f: &dyn Fn(&PolicyResult) -> f64| {
        let v: Vec<f64> = results.iter().map(f).collect();
        Range::of(&v)
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
        unanswered: med(&|r| r.unanswered as f64).round() as u64,
        slo_met: 2 * results.iter().filter(|r| r.slo_met).count() > results.len(),
        spread: Spread {
            ttft_p99_ms: range(&|r| r.ttft_ms.p99),
            tpot_p99_ms: range(&|r| r.tpot_ms.p99),
            goodput_rps: range(&|r| r.goodput_rps),
        },
        errors: med(&|r| r.errors as f64).round() as u64,
        measured: med(&|r| r.measured as f64).round() as u64,
        shed: med(&|r| r.shed as f64).round() as u64,
        prefix_hit_ratio: med(&|r| r.prefix_hit_ratio),
        preemptions: med(&|r| r.preemptions as f64).round() as u64,
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

    use crate::runner::Outcome;

    fn run_of(requests: Vec<Outcome>, last_arrival_s: u64) -> RunOutcome {
        RunOutcome {
            token_gaps_ms: vec![Vec::new(); requests.len()],
            requests,
            last_arrival: Duration::from_secs(last_arrival_s),
            prefix_hit_ratio: 0.0,
            preemptions: 0,
            queue_samples: Vec::new(),
            gateways: Vec::new(),
        }
    }

    fn served(sent: u64, first: u64, done: u64, tokens: u32) -> Outcome {
        Outcome {
            sent: Duration::from_secs(sent),
            first_token: Some(Duration::from_secs(first)),
            finished: Some(Duration::from_secs(done)),
            output_tokens: tokens,
            ..Outcome::default()
        }
    }

    #[test]
    fn unanswered_requests_are_counted_and_miss_the_slo() {
        // Ten requests, the first is warm-up; of the nine measured, one never got a token.
        let mut requests: Vec<Outcome> = (0..10).map(|i| served(i, i, i + 1, 2)).collect();
        requests[9] = Outcome {
            sent: Duration::from_secs(9),
            ..Outcome::default()
        };
        let r = summarize("p", &run_of(requests, 9));
        assert_eq!(r.unanswered, 1);
        assert_eq!(r.errors, 1);
        // Every answered one took 0 s to its first token; the p99 over all nine is the miss.
        assert_eq!(r.ttft_ms.p99, 0.0);
        assert!(!r.slo_met);
    }

    #[test]
    fn refused_requests_are_counted_and_miss_the_slo() {
        // 200 measured requests (after 22 of warm-up) answered at once, both tokens in the same
        // instant; refusing 1 keeps the SLO, refusing 3 (over 1 % of the arrivals) does not,
        // though every answered one is on time.
        let refuse = |n: usize| {
            let mut requests: Vec<Outcome> = (0..222).map(|i| served(i, i, i, 2)).collect();
            for r in requests.iter_mut().rev().take(n) {
                *r = Outcome {
                    sent: r.sent,
                    refused: Some(429),
                    ..Outcome::default()
                };
            }
            summarize("p", &run_of(requests, 222))
        };
        let (one, three) = (refuse(1), refuse(3));
        assert_eq!((one.shed, three.shed), (1, 3));
        assert_eq!((one.unanswered, three.unanswered), (0, 0));
        assert_eq!(three.ttft_ms.p99, 0.0);
        assert!(one.slo_met);
        assert!(!three.slo_met);
    }

    #[test]
    fn throughput_counts_tokens_made_in_the_window_not_backlog() {
        // Two measured requests (warm-up is the first tenth of 2: none), window 0–10 s. One
        // makes 100 tokens over 0–10 s; the other 100 over 5–25 s, only a quarter inside.
        let requests = vec![served(0, 0, 10, 100), served(5, 5, 25, 100)];
        let r = summarize("p", &run_of(requests, 10));
        assert!(
            (r.output_tokens_per_s - 12.5).abs() < 1e-9,
            "{}",
            r.output_tokens_per_s
        );
        // Goodput: both arrived in the window and met the 2 s TTFT, but TPOT is 20/99 s and
        // 10/99 s per token (> 100 ms): neither counts.
        assert_eq!(r.goodput_rps, 0.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!((p.p50, p.p95, p.p99), (50.0, 95.0, 99.0));
        assert!((p.mean - 50.5).abs() < 1e-12);
    }
}
