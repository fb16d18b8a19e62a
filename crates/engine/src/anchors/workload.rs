//! A published measurement as data: the server it ran on, the load a benchmark client put on it,
//! the figure it reported; and the same experiment run in virtual time.

use super::{engine, AnchorResult, Split};
use crate::drive::{quantile, run, run_sending_until, Arrival, RunRecord};
use crate::engine::NewRequest;
use crate::EngineConfig;
use infergate_rng::SplitMix64;
use std::time::Duration;

/// The server a measurement ran on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setup {
    /// Model, as profiles name it.
    pub model: &'static str,
    /// GPU kind, as profiles name it.
    pub gpu: &'static str,
    /// Tensor parallelism.
    pub tp: u32,
    /// `--max-num-seqs`, where the source sets it (else the profile's default).
    pub max_num_seqs: Option<u32>,
    /// `--max-model-len`, where the source sets it.
    pub max_model_len: Option<u32>,
    /// KV blocks of 16 tokens, where the source's KV budget is known and smaller than the
    /// profile's (a KV-pressure experiment).
    pub num_gpu_blocks: Option<u32>,
    /// `--gpu-memory-utilization`, where the source sets it: the KV cache is what that share of
    /// memory leaves ([`crate::profile::Profile::num_gpu_blocks_at`]).
    pub gpu_memory_utilization: Option<f64>,
    /// `--max-num-batched-tokens`, where the source sets it.
    pub max_num_batched_tokens: Option<u32>,
    /// Whether the source ran vLLM's V0 engine (0.4–0.6) at its defaults: its steps pay
    /// [`crate::step_time::Calibration::v0_per_request_nanos`] per request, prefix caching is
    /// off, and, up to a 32k-token `max_model_len`, chunked prefill is off and prompts run in
    /// steps of their own ([`crate::EngineConfig::prefill_steps_alone`]) with a budget of
    /// `max(max_model_len, 2048)` tokens. Above 32k V0 turned chunked prefill on, which mixes
    /// prompt chunks into the decode steps as V1 does.
    pub vllm_v0: bool,
    /// Whether the source drove vLLM's engine in-process (`benchmark_latency.py`,
    /// `benchmark_throughput.py`) rather than through its HTTP server: no API front end.
    pub offline: bool,
}

/// vLLM V0 turned chunked prefill on by default above this `max_model_len` (0.5–0.6).
const V0_CHUNKED_PREFILL_ABOVE: u32 = 32_768;

impl Setup {
    /// `model` on `gpu` at `tp` with vLLM's defaults.
    pub const fn new(model: &'static str, gpu: &'static str, tp: u32) -> Setup {
        Setup {
            model,
            gpu,
            tp,
            max_num_seqs: None,
            max_model_len: None,
            num_gpu_blocks: None,
            gpu_memory_utilization: None,
            max_num_batched_tokens: None,
            vllm_v0: false,
            offline: false,
        }
    }

    /// The same driven in-process, without the HTTP front end.
    pub const fn offline(mut self) -> Setup {
        self.offline = true;
        self
    }

    /// The same on vLLM's V0 engine.
    pub const fn v0(mut self) -> Setup {
        self.vllm_v0 = true;
        self
    }

    /// The same with `--max-num-seqs`.
    pub const fn max_num_seqs(mut self, n: u32) -> Setup {
        self.max_num_seqs = Some(n);
        self
    }

    /// The same with `--max-model-len`.
    pub const fn max_model_len(mut self, n: u32) -> Setup {
        self.max_model_len = Some(n);
        self
    }

    /// The same with `--max-num-batched-tokens`.
    pub const fn batched_tokens(mut self, n: u32) -> Setup {
        self.max_num_batched_tokens = Some(n);
        self
    }

    /// The same with `--gpu-memory-utilization`.
    pub const fn gpu_memory_utilization(mut self, share: f64) -> Setup {
        self.gpu_memory_utilization = Some(share);
        self
    }

    /// The same with a KV cache of `blocks` blocks.
    pub const fn kv_blocks(mut self, blocks: u32) -> Setup {
        self.num_gpu_blocks = Some(blocks);
        self
    }

    fn apply(&self, c: &mut EngineConfig) {
        if let Some(n) = self.max_num_seqs {
            c.max_num_seqs = n;
            c.max_num_batched_tokens = c.max_num_batched_tokens.max(n);
        }
        if let Some(n) = self.max_model_len {
            c.max_model_len = n;
        }
        if let Some(share) = self.gpu_memory_utilization {
            c.num_gpu_blocks = c.profile.num_gpu_blocks_at(share);
        }
        if let Some(n) = self.num_gpu_blocks {
            c.num_gpu_blocks = n;
        }
        if let Some(n) = self.max_num_batched_tokens {
            c.max_num_batched_tokens = n;
        }
        if self.offline {
            c.api_overhead = Duration::ZERO;
        }
        if self.vllm_v0 {
            c.calibration.per_request_nanos = c.calibration.v0_per_request_nanos;
            c.enable_prefix_caching = false;
            if c.max_model_len <= V0_CHUNKED_PREFILL_ABOVE {
                c.enable_chunked_prefill = false;
                c.prefill_steps_alone = true;
                if self.max_num_batched_tokens.is_none() {
                    c.max_num_batched_tokens = c.max_model_len.max(2_048).max(c.max_num_seqs);
                }
            }
        }
    }
}

/// How the benchmark client loaded the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// `requests` requests, at most `concurrency` in flight (`--max-concurrency`; a client that
    /// sends all at once when it equals `requests`).
    Closed {
        /// Requests in flight at most.
        concurrency: usize,
        /// Requests in all.
        requests: usize,
    },
    /// At most `concurrency` in flight, the next request sent as one finishes, for `seconds`;
    /// then nothing more is sent and the run ends when what was sent has finished (a phase
    /// bounded by time, AIPerf's `duration` with a grace period). `requests` bounds the list the
    /// client cycles through: a run that sends all of them before `seconds` have passed measures
    /// the bound, not the server, and reads as not reproduced.
    ClosedFor {
        /// Requests in flight at most.
        concurrency: usize,
        /// How long the client keeps sending.
        seconds: u64,
        /// Requests the client may send at most.
        requests: usize,
    },
    /// `requests` requests sent as a Poisson process of `per_second` (`--request-rate`).
    Poisson {
        /// Mean arrivals per second.
        per_second: f64,
        /// Requests in all.
        requests: usize,
    },
}

/// The lengths of the requests, in tokens (each output generated in full: `ignore_eos`, or
/// the lengths a source's own result file records).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lengths {
    /// Every request `input` tokens in and `output` out (`--dataset-name random` with its
    /// default range ratio 0).
    Fixed(u32, u32),
    /// Each length drawn uniformly from `mean × (1 ± spread)` (`--random-range-ratio`), for a
    /// source that gives only means.
    Spread {
        /// Mean prompt length.
        input: u32,
        /// Mean output length.
        output: u32,
        /// Relative half-width, below 1.
        spread: f64,
    },
    /// The `(input, output)` of each request, from the source's result file, in order, taken
    /// again from the start when the run has more requests than the list. A request the file
    /// records with no output at all ended at once (vLLM's client logs no first token for it,
    /// yet counts it completed) and is sent for one token, so that its prefill still costs
    /// what it cost the server.
    Exact(&'static [(u32, u32)]),
    /// A client that round-robins a short list of prompts, `(input, output)` each: request `i`
    /// sends prompt `i mod n`, the same tokens every time, and the run is preceded by a warm-up
    /// that sends each prompt once, one at a time (and is not measured). With prefix caching on
    /// (vLLM V1's default), every measured prompt finds its blocks already cached.
    CycledAfterWarmup(&'static [(u32, u32)]),
}

/// A figure a benchmark reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Mean time to first token, ms.
    TtftMeanMs,
    /// Median time to first token, ms.
    TtftMedianMs,
    /// Mean time per output token after the first, ms (vLLM's TPOT).
    TpotMeanMs,
    /// Median of the requests' TPOT, ms.
    TpotMedianMs,
    /// Mean gap between consecutive tokens, ms (vLLM's ITL).
    ItlMeanMs,
    /// Output tokens per second over the run.
    OutputTokensPerSecond,
    /// Prompt and output tokens per second over the run.
    TotalTokensPerSecond,
    /// Requests finished per second over the run.
    RequestsPerSecond,
    /// Mean end-to-end latency, s.
    E2eMeanSeconds,
}

impl Figure {
    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Figure::TtftMeanMs => "TTFT mean ms",
            Figure::TtftMedianMs => "TTFT p50 ms",
            Figure::TpotMeanMs => "TPOT mean ms",
            Figure::TpotMedianMs => "TPOT p50 ms",
            Figure::ItlMeanMs => "ITL mean ms",
            Figure::OutputTokensPerSecond => "output tok/s",
            Figure::TotalTokensPerSecond => "total tok/s",
            Figure::RequestsPerSecond => "req/s",
            Figure::E2eMeanSeconds => "E2E mean s",
        }
    }

    /// The figure from a run's record; NaN when the run has nothing to measure it on.
    fn of(self, record: &RunRecord, lengths: &[(u32, u32)]) -> f64 {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let done: Vec<_> = record
            .requests
            .iter()
            .filter(|r| r.finished.is_some())
            .collect();
        let mean = |v: &[f64]| {
            if v.is_empty() {
                f64::NAN
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        // The benchmark's duration: from the first request sent to the last one finished.
        let start = record
            .requests
            .iter()
            .map(|r| r.sent)
            .min()
            .unwrap_or_default();
        let span = record.end.saturating_sub(start).as_secs_f64();
        let per_second = |n: f64| if span > 0.0 { n / span } else { f64::NAN };
        match self {
            Figure::TtftMeanMs => mean(
                &done
                    .iter()
                    .filter_map(|r| r.ttft())
                    .map(ms)
                    .collect::<Vec<_>>(),
            ),
            Figure::TtftMedianMs => {
                let mut v: Vec<f64> = done.iter().filter_map(|r| r.ttft()).map(ms).collect();
                quantile(&mut v, 0.5).unwrap_or(f64::NAN)
            }
            Figure::TpotMeanMs => mean(
                &done
                    .iter()
                    .filter_map(|r| r.tpot())
                    .map(ms)
                    .collect::<Vec<_>>(),
            ),
            Figure::TpotMedianMs => {
                let mut v: Vec<f64> = done.iter().filter_map(|r| r.tpot()).map(ms).collect();
                quantile(&mut v, 0.5).unwrap_or(f64::NAN)
            }
            Figure::ItlMeanMs => mean(&record.itl) * 1e3,
            Figure::OutputTokensPerSecond => {
                per_second(done.iter().map(|r| f64::from(r.output_tokens)).sum())
            }
            Figure::TotalTokensPerSecond => {
                let prompt: f64 = record
                    .requests
                    .iter()
                    .zip(lengths)
                    .filter(|(r, _)| r.finished.is_some())
                    .map(|(_, &(input, _))| f64::from(input))
                    .sum();
                per_second(prompt + done.iter().map(|r| f64::from(r.output_tokens)).sum::<f64>())
            }
            Figure::RequestsPerSecond => per_second(done.len() as f64),
            Figure::E2eMeanSeconds => mean(
                &done
                    .iter()
                    .filter_map(|r| r.finished.map(|f| (f - r.sent).as_secs_f64()))
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

/// One experiment: a server, a load, lengths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Experiment {
    /// The server.
    pub setup: Setup,
    /// The client.
    pub load: Load,
    /// The requests' lengths.
    pub lengths: Lengths,
}

impl Experiment {
    /// The figure this experiment predicts (seed 1: the same run each time); NaN when its setup
    /// names no profile.
    pub fn predict(&self, figure: Figure) -> f64 {
        let setup = self.setup;
        let Some(mut e) = engine(setup.model, setup.gpu, setup.tp, |c| setup.apply(c)) else {
            return f64::NAN;
        };
        let mut rng = SplitMix64::new(1);
        let (count, cap) = match self.load {
            Load::Closed {
                concurrency,
                requests,
            }
            | Load::ClosedFor {
                concurrency,
                requests,
                ..
            } => (requests, concurrency),
            Load::Poisson { requests, .. } => (requests, usize::MAX),
        };
        let lengths: Vec<(u32, u32)> = match self.lengths {
            Lengths::Fixed(input, output) => vec![(input, output); count],
            Lengths::Spread {
                input,
                output,
                spread,
            } => {
                let mut draw = |mean: u32| -> u32 {
                    let lo = f64::from(mean) * (1.0 - spread);
                    let width = f64::from(mean) * 2.0 * spread;
                    (lo + rng.next_f64() * width).round().max(1.0) as u32
                };
                (0..count).map(|_| (draw(input), draw(output))).collect()
            }
            Lengths::Exact(list) | Lengths::CycledAfterWarmup(list) => list
                .iter()
                .map(|&(input, output)| (input, output.max(1)))
                .cycle()
                .take(count)
                .collect(),
        };
        // A cycled list's length: its prompts repeat, and a warm-up sends each once.
        let cycle = match self.lengths {
            Lengths::CycledAfterWarmup(list) if !list.is_empty() => Some(list.len()),
            _ => None,
        };
        // The prompt each request sends: its own token range, or, for a cycled list, its
        // list entry's, so that repeats share every block.
        let prompt_of = |i: usize, input: u32| -> Vec<u32> {
            let base = (cycle.map_or(i, |n| i % n) as u32).wrapping_mul(1_000_003);
            (0..input).map(|k| base.wrapping_add(k)).collect()
        };
        let until = Duration::from_secs(24 * 3600);
        // The client's warm-up: each prompt once, one at a time; the measured run starts when
        // it has finished.
        let start = if let Some(n) = cycle {
            let warm: Vec<Arrival> = lengths
                .iter()
                .take(n)
                .enumerate()
                .map(|(i, &(input, output))| Arrival {
                    at: Duration::ZERO,
                    request: NewRequest::from_tokens(&prompt_of(i, input), output),
                })
                .collect();
            run(&mut e, warm, 1, until).end
        } else {
            Duration::ZERO
        };
        let mut t = 0.0f64;
        let arrivals: Vec<Arrival> = lengths
            .iter()
            .enumerate()
            .map(|(i, &(input, output))| {
                let at = match self.load {
                    Load::Closed { .. } | Load::ClosedFor { .. } => 0.0,
                    Load::Poisson { per_second, .. } => {
                        t += -(1.0 - rng.next_f64()).ln() / per_second;
                        t
                    }
                };
                // Distinct token ranges unless the list is cycled: no two different prompts
                // share a cached block.
                Arrival {
                    at: start + Duration::from_secs_f64(at),
                    request: NewRequest::from_tokens(&prompt_of(i, input), output),
                }
            })
            .collect();
        let record = match self.load {
            Load::ClosedFor { seconds, .. } => {
                let record = run_sending_until(
                    &mut e,
                    arrivals,
                    cap,
                    start + Duration::from_secs(seconds),
                    until,
                );
                // Every request finished: the list ran out before the time did.
                if record.requests.iter().all(|r| r.finished.is_some()) {
                    return f64::NAN;
                }
                record
            }
            Load::Closed { .. } | Load::Poisson { .. } => run(&mut e, arrivals, cap, until),
        };
        figure.of(&record, &lengths)
    }
}

/// What was measured: one figure of one experiment, or the ratio of one figure between two
/// experiments (a source that publishes a comparison, or absolute figures from an engine other
/// than vLLM, whose engine-specific speed cancels in the ratio).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measure {
    /// The figure itself.
    Figure(Experiment, Figure),
    /// `figure(first) / figure(second)`.
    Ratio(Experiment, Experiment, Figure),
}

/// A published measurement and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// A short name for the table.
    pub experiment: &'static str,
    /// What was measured and how to re-create it.
    pub measure: Measure,
    /// The value published.
    pub measured: f64,
    /// The set it is in.
    pub split: Split,
    /// Allowed relative error while it is in the fitting set.
    pub tolerance: f64,
    /// Where it was published (title and address), the engine, and the assumptions made where
    /// the source leaves a detail open.
    pub source: &'static str,
}

impl Published {
    /// Re-creates it in virtual time.
    pub fn run(&self) -> AnchorResult {
        let (setup, predicted, label) = match self.measure {
            Measure::Figure(x, f) => (x.setup, x.predict(f), f.label()),
            Measure::Ratio(a, b, f) => (a.setup, a.predict(f) / b.predict(f), ratio_label(f)),
        };
        AnchorResult {
            experiment: self.experiment,
            figure: label,
            measured: self.measured,
            predicted,
            tolerance: self.tolerance,
            split: self.split,
            gpu: setup.gpu,
            model: setup.model,
            tp: setup.tp,
            source: self.source,
        }
    }
}

fn ratio_label(f: Figure) -> &'static str {
    match f {
        Figure::TtftMeanMs => "ratio of TTFT mean",
        Figure::TtftMedianMs => "ratio of TTFT p50",
        Figure::TpotMeanMs => "ratio of TPOT mean",
        Figure::TpotMedianMs => "ratio of TPOT p50",
        Figure::ItlMeanMs => "ratio of ITL mean",
        Figure::OutputTokensPerSecond => "ratio of output tok/s",
        Figure::TotalTokensPerSecond => "ratio of total tok/s",
        Figure::RequestsPerSecond => "ratio of req/s",
        Figure::E2eMeanSeconds => "ratio of E2E mean",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use crate::step_time::Calibration;

    #[test]
    fn a_v0_setup_pays_v0s_per_request_overhead_and_a_v1_setup_does_not() {
        let fresh = || EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap());
        let mut v1 = fresh();
        Setup::new("llama-3.1-8b", "h100", 1).apply(&mut v1);
        assert_eq!(
            v1.calibration.per_request_nanos,
            Calibration::FITTED.per_request_nanos
        );
        let mut v0 = fresh();
        Setup::new("llama-3.1-8b", "h100", 1).v0().apply(&mut v0);
        assert_eq!(
            v0.calibration.per_request_nanos,
            Calibration::FITTED.v0_per_request_nanos
        );
        assert!(v0.calibration.per_request_nanos > v1.calibration.per_request_nanos);
    }

    #[test]
    fn an_offline_setup_has_no_http_front_end() {
        let fresh = || EngineConfig::new(Profile::lookup("llama-3.1-8b", "h200", 1).unwrap());
        let mut served = fresh();
        Setup::new("llama-3.1-8b", "h200", 1).apply(&mut served);
        assert_eq!(served.api_overhead, crate::config::DEFAULT_API_OVERHEAD);
        assert!(served.api_overhead > Duration::ZERO);
        let mut in_process = fresh();
        Setup::new("llama-3.1-8b", "h200", 1)
            .offline()
            .v0()
            .apply(&mut in_process);
        assert_eq!(in_process.api_overhead, Duration::ZERO);
    }

    #[test]
    fn a_memory_share_sets_the_kv_cache_that_share_leaves() {
        let profile = Profile::lookup("qwen3-32b", "a10g", 4).unwrap();
        let mut c = EngineConfig::new(profile.clone());
        assert_eq!(c.num_gpu_blocks, profile.num_gpu_blocks());
        Setup::new("qwen3-32b", "a10g", 4)
            .gpu_memory_utilization(0.85)
            .apply(&mut c);
        assert_eq!(c.num_gpu_blocks, profile.num_gpu_blocks_at(0.85));
        // Five points of 24 GB boards are a third of what the weights leave the cache.
        assert!(c.num_gpu_blocks < profile.num_gpu_blocks() * 3 / 4);
        assert!(c.num_gpu_blocks > 0);
    }

    /// TTFT mean and E2E mean of 12 requests of 4,000 tokens in and 50 out, one at a time.
    fn one_at_a_time(lengths: Lengths) -> (f64, f64) {
        let experiment = Experiment {
            setup: Setup::new("llama-3.1-8b", "h100", 1),
            load: Load::Closed {
                concurrency: 1,
                requests: 12,
            },
            lengths,
        };
        (
            experiment.predict(Figure::TtftMeanMs),
            experiment.predict(Figure::E2eMeanSeconds),
        )
    }

    #[test]
    fn a_cycled_list_is_warmed_up_so_every_measured_prompt_starts_cached() {
        const THREE: &[(u32, u32)] = &[(4_000, 50); 3];
        let (cold_ttft, cold_e2e) = one_at_a_time(Lengths::Fixed(4_000, 50));
        let (warm_ttft, warm_e2e) = one_at_a_time(Lengths::CycledAfterWarmup(THREE));
        // A 4,000-token prefill costs tens of milliseconds on an H100; a cached prompt costs a
        // step of its last block and the API overhead.
        assert!(cold_ttft > warm_ttft + 40.0, "{cold_ttft} vs {warm_ttft}");
        assert!(warm_ttft < 40.0, "{warm_ttft}");
        // The warm-up is not measured: the mean request takes what one request takes, not
        // the warm-up's three on top.
        assert!(warm_e2e < cold_e2e, "{warm_e2e} vs {cold_e2e}");
        assert!(warm_e2e > 0.2 && warm_e2e < 1.0, "{warm_e2e}");
        // Without prefix caching the warm-up leaves nothing behind.
        let uncached = Experiment {
            setup: Setup::new("llama-3.1-8b", "h100", 1).v0(),
            load: Load::Closed {
                concurrency: 1,
                requests: 12,
            },
            lengths: Lengths::CycledAfterWarmup(THREE),
        };
        assert!(uncached.predict(Figure::TtftMeanMs) > cold_ttft * 0.8);
    }

    #[test]
    fn an_experiment_on_a_triple_that_is_no_profile_predicts_nothing() {
        // An unknown model or GPU is no profile: the experiment must not run on some other
        // profile in its place (it ran on the instant profile once, and printed billions of
        // tokens a second).
        let run = |setup: Setup| {
            Experiment {
                setup,
                load: Load::Closed {
                    concurrency: 1,
                    requests: 4,
                },
                lengths: Lengths::Fixed(1_000, 20),
            }
            .predict(Figure::TtftMeanMs)
        };
        assert!(run(Setup::new("no-such-model", "h100", 1)).is_nan());
        assert!(run(Setup::new("llama-3.1-8b", "no-such-gpu", 1)).is_nan());
        // The same experiment on a real profile runs.
        assert!(run(Setup::new("llama-3.1-8b", "h100", 1)).is_finite());
    }
}
