//! The measured anchors of `reference/simulator.md`: the inference-perf KubeCon NA 2025 demo's
//! stages (Llama-3-8B on one H100), and four single points from other sources.

use super::{client_cv_override, engine, AnchorResult, Split};
use crate::drive::{quantile, run, Arrival, RunRecord};
use crate::engine::NewRequest;
use infergate_rng::SplitMix64;
use std::time::Duration;

pub(super) const KUBECON: &str = "inference-perf KubeCon NA 2025 demo (reference/simulator.md): Llama-3-8B-Instruct, 1× H100-80GB, vLLM 0.11, max-model-len 512, shared_prefix workload, constant-rate 60 s stages";
pub(super) const REFERENCE: &str = "reference/simulator.md, \"Other points\"";

/// The inference-perf `shared_prefix` workload of the KubeCon NA 2025 demo: 10 system prompts
/// of 128 tokens × 10 questions of 64 tokens each, output 64 tokens with `ignore_eos`, sent at a
/// constant rate.
fn shared_prefix_arrivals(rate: f64, duration: Duration, seed: u64) -> Vec<Arrival> {
    let mut rng = SplitMix64::new(seed);
    let count = (rate * duration.as_secs_f64()) as usize;
    let cv = client_cv_override().unwrap_or(CLIENT_CV);
    let mut t = 0.0f64;
    (0..count)
        .map(|i| {
            let at = if cv > 0.0 {
                // Gamma inter-arrivals with shape 1/cv² by summing exponentials (shape rounded).
                let shape = (1.0 / (cv * cv)).round().max(1.0) as usize;
                let gap: f64 = (0..shape)
                    .map(|_| -(1.0 - rng.next_f64()).ln())
                    .sum::<f64>()
                    / shape as f64;
                t += gap / rate;
                t
            } else {
                i as f64 / rate
            };
            let group = rng.below(10) as u32;
            let question = rng.below(10) as u32;
            let mut prompt: Vec<u32> = (0..128).map(|t| 1_000 + group * 1_000 + t).collect();
            prompt.extend((0..64).map(|t| 100_000 + group * 10_000 + question * 100 + t));
            Arrival {
                at: Duration::from_secs_f64(at),
                request: NewRequest::from_tokens(&prompt, 64),
            }
        })
        .collect()
}

/// A prompt of `len` tokens whose ids start at `base`; prompts with different bases share no
/// block.
fn unique_prompt(len: u32, base: u32, output: u32) -> NewRequest {
    let prompt: Vec<u32> = (0..len).map(|t| base.wrapping_add(t)).collect();
    NewRequest::from_tokens(&prompt, output)
}

/// Coefficient of variation of the load generator's inter-arrival gaps: inference-perf's
/// "constant" rate is dispatched by Python worker processes, not by a perfect clock. Gaps are
/// Erlang-3 (CV 0.58); a perfect clock would leave the 170 req/s stage, at 96 % of capacity,
/// with no queue at all, which the measurement (55 ms against 32 ms at 128 req/s) contradicts.
const CLIENT_CV: f64 = 0.58;

/// The measurement window: requests sent after the warm-up, up to the end of the stage.
const STAGE: Duration = Duration::from_secs(60);
const WARMUP: Duration = Duration::from_secs(10);

/// inference-perf caps requests in flight; both saturated rows imply 435–450 in flight
/// (TTFT × achieved rate + 128 running), so the client cap is taken as 440.
const CLIENT_CAP: usize = 440;

struct Stage {
    ttft_p50_ms: f64,
    itl_mean_ms: f64,
    achieved_rps: f64,
}

impl Stage {
    /// A stage whose profile could not be looked up: every figure NaN, so not reproduced.
    const NOT_RUN: Stage = Stage {
        ttft_p50_ms: f64::NAN,
        itl_mean_ms: f64::NAN,
        achieved_rps: f64::NAN,
    };
}

/// Seeds of the KubeCon stages; each figure is the median over them, as the benchmark reports.
const SEEDS: [u64; 3] = [1, 2, 3];

fn kubecon_stage(rate: f64, prefix_caching: bool) -> Stage {
    let mut stages: Vec<Stage> = SEEDS
        .iter()
        .map(|&seed| kubecon_stage_seeded(rate, prefix_caching, seed))
        .collect();
    let mut median = |f: fn(&Stage) -> f64| {
        let mut v: Vec<f64> = stages.iter_mut().map(|s| f(s)).collect();
        quantile(&mut v, 0.5).unwrap_or(f64::NAN)
    };
    Stage {
        ttft_p50_ms: median(|s| s.ttft_p50_ms),
        itl_mean_ms: median(|s| s.itl_mean_ms),
        achieved_rps: median(|s| s.achieved_rps),
    }
}

fn kubecon_stage_seeded(rate: f64, prefix_caching: bool, seed: u64) -> Stage {
    let Some(mut e) = engine("llama-3.1-8b", "h100", 1, |c| {
        c.max_model_len = 512;
        c.max_num_seqs = 128;
        c.enable_prefix_caching = prefix_caching;
        c.enable_chunked_prefill = prefix_caching;
        c.seed = seed;
        if !prefix_caching {
            // vLLM's budget without chunked prefill: max(max_model_len, 2048).
            c.max_num_batched_tokens = 2048;
        }
    }) else {
        return Stage::NOT_RUN;
    };
    let arrivals = shared_prefix_arrivals(rate, STAGE, seed);
    let record = run(
        &mut e,
        arrivals,
        CLIENT_CAP,
        STAGE + Duration::from_secs(120),
    );
    summarize(&record)
}

fn summarize(record: &RunRecord) -> Stage {
    let measured = record
        .requests
        .iter()
        .filter(|r| r.sent >= WARMUP && r.sent < STAGE);
    let mut ttft: Vec<f64> = measured
        .filter_map(|r| r.ttft())
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let finished_in_window = record
        .requests
        .iter()
        .filter_map(|r| r.finished)
        .filter(|&t| t >= WARMUP && t < STAGE)
        .count();
    let itl_mean_ms = record.itl.iter().sum::<f64>() / record.itl.len().max(1) as f64 * 1e3;
    Stage {
        ttft_p50_ms: quantile(&mut ttft, 0.5).unwrap_or(f64::NAN),
        itl_mean_ms,
        achieved_rps: finished_in_window as f64 / (STAGE - WARMUP).as_secs_f64(),
    }
}

/// The reference's anchors, run.
pub(super) fn run_all() -> Vec<AnchorResult> {
    let mut results = Vec::new();
    let kubecon: [(&'static str, f64, bool, [f64; 3], bool); 7] = [
        (
            "8B H100, no cache, 1 req/s",
            1.0,
            false,
            [31.0, 7.2, 1.0],
            false,
        ),
        (
            "8B H100, no cache, 61.8 req/s",
            61.8,
            false,
            [33.0, 10.5, 61.8],
            false,
        ),
        (
            "8B H100, no cache, 92 req/s",
            92.0,
            false,
            [45.0, 15.8, 92.0],
            false,
        ),
        (
            "8B H100, no cache, 183 req/s (saturated)",
            183.0,
            false,
            [2900.0, 19.5, 106.0],
            true,
        ),
        (
            "8B H100, prefix cache + chunked, 128 req/s",
            128.0,
            true,
            [32.0, 10.3, 128.0],
            false,
        ),
        (
            "8B H100, prefix cache + chunked, 170 req/s",
            170.0,
            true,
            [55.0, 11.6, 170.0],
            false,
        ),
        (
            "8B H100, prefix cache + chunked, 254 req/s (saturated)",
            254.0,
            true,
            [1800.0, 11.8, 178.0],
            true,
        ),
    ];
    for (name, rate, cached, [ttft, itl, achieved], saturated) in kubecon {
        let stage = kubecon_stage(rate, cached);
        let figure = |figure, measured, predicted, tolerance| AnchorResult {
            experiment: name,
            figure,
            measured,
            predicted,
            tolerance,
            split: Split::Fitting,
            gpu: "h100",
            model: "llama-3.1-8b",
            tp: 1,
            source: KUBECON,
        };
        results.push(figure("TTFT p50 ms", ttft, stage.ttft_p50_ms, 0.10));
        results.push(figure("ITL ms", itl, stage.itl_mean_ms, 0.10));
        if saturated {
            results.push(figure("achieved req/s", achieved, stage.achieved_rps, 0.15));
        }
    }
    results.push(single_stream_itl());
    results.extend(closed_loop_tpot());
    results.push(prefix_hit_ratio());
    results
}

/// Llama-3.1-8B on an A100-40GB, batch 1: ITL 13.3 ms. Assumed: a 128-token prompt, 128 out.
fn single_stream_itl() -> AnchorResult {
    let itl = engine("llama-3.1-8b", "a100-40", 1, |_| {}).map_or(f64::NAN, |mut e| {
        let arrivals = vec![Arrival {
            at: Duration::ZERO,
            request: unique_prompt(128, 0, 128),
        }];
        let record = run(&mut e, arrivals, 1, Duration::from_secs(60));
        record.itl.iter().sum::<f64>() / record.itl.len().max(1) as f64 * 1e3
    });
    AnchorResult {
        experiment: "8B A100-40GB, batch 1",
        figure: "ITL ms",
        measured: 13.3,
        predicted: itl,
        tolerance: 0.10,
        split: Split::HeldOut,
        gpu: "a100-40",
        model: "llama-3.1-8b",
        tp: 1,
        source: REFERENCE,
    }
}

/// Llama-3.1-8B FP16 on an H100 at concurrency 1 and 16: TPOT 6.48 ms and 10.9 ms. Assumed:
/// `vllm bench serve`'s random dataset, 1,024 tokens in and 128 out on average, lengths spread
/// uniformly ±50 % (`--random-range-ratio 0.5`); with identical lengths a closed loop runs in
/// lockstep and no request ever waits behind another's prefill, which no real run shows.
fn closed_loop_tpot() -> Vec<AnchorResult> {
    [(1usize, 6.48), (16, 10.9)]
        .into_iter()
        .map(|(concurrency, measured)| {
            let mean = engine("llama-3.1-8b", "h100", 1, |_| {}).map_or(f64::NAN, |mut e| {
                let mut rng = SplitMix64::new(11);
                let mut spread = |mean: u32| mean / 2 + rng.below(mean as usize + 1) as u32;
                let arrivals: Vec<Arrival> = (0..(concurrency * 8) as u32)
                    .map(|i| {
                        let (input, output) = (spread(1024), spread(128));
                        Arrival {
                            at: Duration::ZERO,
                            request: unique_prompt(input, i * 2_000_000, output),
                        }
                    })
                    .collect();
                let record = run(&mut e, arrivals, concurrency, Duration::from_secs(600));
                let tpot: Vec<f64> = record
                    .requests
                    .iter()
                    .filter_map(|r| r.tpot())
                    .map(|d| d.as_secs_f64() * 1e3)
                    .collect();
                tpot.iter().sum::<f64>() / tpot.len().max(1) as f64
            });
            AnchorResult {
                experiment: if concurrency == 1 {
                    "8B H100, concurrency 1"
                } else {
                    "8B H100, concurrency 16"
                },
                figure: "TPOT ms",
                measured,
                predicted: mean,
                tolerance: 0.10,
                // Chosen before the fit: one of the pair held out.
                split: if concurrency == 1 {
                    Split::HeldOut
                } else {
                    Split::Fitting
                },
                gpu: "h100",
                model: "llama-3.1-8b",
                tp: 1,
                source: REFERENCE,
            }
        })
        .collect()
}

/// Qwen3-32B (H100 TP2), a ~10k-token prompt: cold TTFT over prefix-hit TTFT ≈ 7. Assumed: the
/// hit covers the shared 9,000 tokens (system prompt and document); the last 1,000 are new.
fn prefix_hit_ratio() -> AnchorResult {
    let predicted = engine("qwen3-32b", "h100", 2, |_| {}).map_or(f64::NAN, |mut e| {
        let shared: Vec<u32> = (0..9_000).collect();
        let prompt = |tail: u32| {
            let mut p = shared.clone();
            p.extend((0..1_000).map(|t| 50_000_000 + tail * 10_000 + t));
            NewRequest::from_tokens(&p, 16)
        };
        let arrivals = vec![
            Arrival {
                at: Duration::ZERO,
                request: prompt(1),
            },
            Arrival {
                at: Duration::from_secs(5),
                request: prompt(2),
            },
        ];
        let record = run(&mut e, arrivals, 1, Duration::from_secs(60));
        let ttft = |i: usize| {
            record.requests[i]
                .ttft()
                .map_or(f64::NAN, |d| d.as_secs_f64())
        };
        ttft(0) / ttft(1)
    });
    AnchorResult {
        experiment: "Qwen3-32B H100 TP2, 10k prompt",
        figure: "cold / hit TTFT",
        measured: 7.0,
        predicted,
        tolerance: 0.10,
        split: Split::HeldOut,
        gpu: "h100",
        model: "qwen3-32b",
        tp: 2,
        source: REFERENCE,
    }
}
