//! Published measurements beyond the reference's own: vLLM benchmark outputs from public
//! repositories, and TensorRT-LLM's performance tables as ratios between GPUs.
//!
//! The set of each anchor was chosen before any fit, by one rule: within each source, in the
//! order listed, anchors alternate held-out, fitting, held-out, … so every source has at least
//! as many held-out anchors as fitting ones.
//!
//! Assumptions common to the GPUStack rows: `vllm bench serve --dataset-name random` sends every
//! request at once (`--request-rate inf`, no concurrency cap), with fixed lengths (range ratio
//! 0; the result blocks' token totals show every output generated in full, except the 32k-token
//! rows of Qwen3-32B on one GPU, which generated 7,681 and 7,699 of 10,000 tokens: the
//! prompts' 3.2 M tokens set those runs' total throughput); the server runs vLLM v0.11's
//! defaults (prefix caching and chunked prefill on); random prompts share no prefix.
//!
//! Qwen3-32B on one 80 GB GPU: the model's 40,960-token context does not fit the KV cache vLLM
//! leaves beside 61 GiB of weights, and the A100 page's own engine-selection run says how it was
//! served: `vllm serve Qwen/Qwen3-32B --max-model-len 32768`. vLLM refuses to start unless its
//! KV cache holds `max_model_len` tokens, so those servers had at least 32,768 tokens of KV
//! cache, more than the profile's formula gives (29,400 with its 4 GB activation reserve,
//! fitted to other models). The rows run with exactly that bound (2,048 blocks) and that
//! `max_model_len`, on both GPUs (the H100 page names no `--max-model-len`; the same limit
//! applies to it). Until 2026-12-05 they ran with the formula's cache, which cannot hold one
//! 32k-token prompt, and four rows were not reproduced.
//! The short-prompt rows (128 in, 4 out, 1,000 requests at once) are left out: there the chat
//! endpoint's own per-request work, which the simulator does not model beyond a fixed API
//! overhead, sets the duration (49.6 s for 1,000 requests of 132 tokens on an A100).

use super::lambda;
use super::systalyze;
use super::workload::{Experiment, Figure, Lengths, Load, Measure, Published, Setup};
use super::Split::{Fitting, HeldOut};

const GPUSTACK_32B_H100: &str = "GPUStack Performance Lab, \"Optimizing Qwen3-32B Throughput on NVIDIA H100 GPUs\" (github.com/gpustack/gpustack docs/performance-lab/qwen3-32b/h100.md), vLLM v0.11.0 baseline `vllm serve Qwen/Qwen3-32B` (one GPU, BF16)";
const GPUSTACK_32B_A100: &str = "GPUStack Performance Lab, \"Optimizing Qwen3-32B Throughput on NVIDIA A100 GPUs\" (github.com/gpustack/gpustack docs/performance-lab/qwen3-32b/a100.md), vLLM v0.11.0 baseline `vllm serve Qwen/Qwen3-32B` (one A100 SXM 80GB, BF16)";
const GPUSTACK_235B_H100: &str = "GPUStack Performance Lab, \"Optimizing Qwen3-235B-A22B Throughput on NVIDIA H100 GPUs\" (github.com/gpustack/gpustack docs/performance-lab/qwen3-235b-a22b/h100.md), vLLM v0.11.0 baseline `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8` (BF16)";
const GPUSTACK_235B_H100_FP8: &str = "GPUStack Performance Lab, \"Optimizing Qwen3-235B-A22B Throughput on NVIDIA H100 GPUs\" (github.com/gpustack/gpustack docs/performance-lab/qwen3-235b-a22b/h100.md), vLLM v0.11.0 optimized `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 -tp 4 --max-num-batched-tokens 16384`";
const GPUSTACK_235B_A100_FP8: &str = "GPUStack Performance Lab, \"Optimizing Qwen3-235B-A22B Throughput on NVIDIA A100 GPUs\" (github.com/gpustack/gpustack docs/performance-lab/qwen3-235b-a22b/a100.md, commit 9babbd26), vLLM v0.11.0 optimized `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 -tp 4` (fp8 weights, which vLLM runs on the A100 with its Marlin w8a16 kernels, as the page says), one replica of four A100s (the page's \"×2\" is two replicas on its eight GPUs; each run is one), measured with the page's client: `vllm bench serve --backend openai-chat --dataset-name random`, every request at once, 100 prompts of 32,000 tokens in / 100 out, 500 of 4,000 / 200, 500 of 2,000 / 100. Assumed: the A100s the same SXM 80 GB boards as the page's baseline, vLLM's defaults otherwise (the baseline's `max_model_len`)";
const GPUSTACK_235B_A100: &str = "GPUStack Performance Lab, \"Optimizing Qwen3-235B-A22B Throughput on NVIDIA A100 GPUs\" (github.com/gpustack/gpustack docs/performance-lab/qwen3-235b-a22b/a100.md), vLLM v0.11.0 baseline `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8` (BF16)";
const LAMBDA: &str = "Lambda, vllm-benchmark result files (github.com/LambdaLabsML/vllm-benchmark results/prompt_<N>/<GPU>/…_len2000.json), `benchmark_serving.py` on ShareGPT at request rate inf, `--max-model-len 2000 --max-num-seqs 256`; vLLM v0.6.0 with multi-step scheduling inferred from the streamed chunks. Lengths of the 10-prompt runs are the result file's own";
const LAMBDA_320: &str = "Lambda, vllm-benchmark result files (github.com/LambdaLabsML/vllm-benchmark results/prompt_320/…_len2000.json), 320 ShareGPT prompts at request rate inf, `--max-model-len 2000 --max-num-seqs 256`; each request's lengths are the file's own `input_lens` / `output_lens` (`anchors::lambda`; until 2026-12-05 they were drawn uniformly within ±90 % of the file's means, which left out ShareGPT's long answers, and a burst's duration is its longest answer's). A request the file records with no output is sent for one token";
const LAMBDA_H100: &str = "Lambda, vllm-benchmark result files (github.com/LambdaLabsML/vllm-benchmark results/prompt_<N>/<G>xH100-80GB-SXM/Meta-Llama-3-<M>-Instruct_tp<G>_len2048.json, commit a4f9f437), `benchmark_serving.py` on ShareGPT at request rate inf, `--max-model-len 2048 --max-num-seqs 256` (the repo's launch script); vLLM v0.6.0 with multi-step scheduling, inferred from the streamed chunks (ITL ≈ 10 × TPOT). Each request's lengths are the file's own (`anchors::lambda`); a request recorded with no output is sent for one token. Llama-3-70B/8B stand in for Llama-3.1's (the same geometry)";
const NEURAL_MAGIC_A10G: &str = "R. Shaw (Neural Magic), vllm-benchmarking-sample (github.com/robertgshaw2-neuralmagic/vllm-benchmarking-sample BENCHMARK.md, commit afb9a4f9): `benchmark_serving.py` on ShareGPT, 200 prompts, Poisson arrivals at 1 req/s, `vllm.entrypoints.openai.api_server --model meta-llama/Meta-Llama-3-8B-Instruct` at its defaults, on an A10 (\"A10G\" in a copy of the same text). Assumed: vLLM 0.5.0 (June 2024, version not printed; no chunked prefill, no prefix caching, max-model-len 8192), the GPU an A10G; the lengths ShareGPT's shape as Lambda's 8B file records it (`anchors::lambda`, 194 in / 216 out on average against the run's 228 / 197)";
const LLMPERF_A10G: &str = "\"Benchmark: Llama 3 8b Instruct on NVIDIA A10G\" (an llmperf fork's results page on GitHub), `vllm/vllm-openai:v0.4.3` with only `--model meta-llama/Meta-Llama-3-8B-Instruct` on an AWS g5.2xlarge, llmperf at concurrency 1 / 16 / 64 with 550 tokens in and 150 out on average; its \"Inter Token Latency\" is llmperf's mean per-request (E2E − TTFT) / tokens, the simulator's TPOT mean. Assumed: fixed 550 / 150 lengths (llmperf's spreads are not given and the figure is a per-token mean), 20 requests per unit of concurrency (the count is not given), max-model-len 8192, no chunked prefill";
const ARC53_L4: &str = "arc53 llm-price-compass (github.com/arc53/llm-price-compass benchmarks/13-06-2024.json, commit baa72b62): vLLM `benchmark_serving.py`, Meta-Llama-3.1-8B-Instruct on one Scaleway L4, 1,000 ShareGPT prompts at request rate inf, 197,739 output tokens in 385.30 s. Assumed: vLLM 0.5.x at its defaults with `--max-model-len 8192` (some cap below 128k must have been set for the KV cache to hold one sequence; the value is not recorded), BF16; ShareGPT's lengths as Lambda's 8B file records them, taken again from the start past 320 (215 in / 198 out on average in the run, 194 / 216 in the list)";
const SGLANG_VLLM060: &str = "SGLang, \"benchmark_vllm_060\" (github.com/sgl-project/sglang benchmark/benchmark_vllm_060/README.md, commit 120affb9): vLLM 0.6.0, `vllm serve meta-llama/Llama-3.1-70B-Instruct --disable-log-requests --num-scheduler-steps 10 --tensor 4 --max_model_len 4096` on 4× H100 80GB, `sglang.bench_serving --backend vllm --dataset-name sharegpt` with Poisson arrivals, median TPOT. Assumed: ShareGPT's lengths as Lambda's 70B H100 TP4 file records them (`anchors::lambda`), taken again from the start past 320";
const VLLM_CI: &str = "vLLM nightly performance benchmark, latency test `latency_llama8B_tp1` on A100-SXM4-80GB (\"Input length: 32 tokens. Output length: 128 tokens. Batch size: fixed (8)\"), mean latency 1585.43 ms";
const MUSGRAVE: &str = "J. Musgrave, \"vLLM throughput-latency sweep on NVIDIA A100\" (A100 40GB, `vllm bench serve --random-input-len 1024 --random-output-len 128 --ignore-eos --max-concurrency C --num-prompts 20·C`): \"Batching buys throughput almost for free up to a concurrency of 8, a 6.6x gain\"";
const QWEN_SPEED: &str = "Qwen2.5 speed benchmark (github.com/QwenLM/Qwen2.5 docs/source/benchmark/speed_benchmark.rst), vLLM 0.6.3 on A100 80GB, Qwen2.5-32B-Instruct BF16 on 2 GPUs, one request generating 2048 tokens, speed = 2048 / total time (prefill included); `gpu_memory_utilization=0.9`, max_model_len 32768 (65536 for the 63,488-token row, 131,072 with vLLM 0.6.2 for the 129,024-token row). Qwen2.5-32B stands in for Qwen3-32B: the same 64 layers, hidden size 5,120 and 8 KV heads (40 query heads against 64, FFN 27,648 against 25,600; 32.5B against 32.8B parameters)";
const TRTLLM_235B: &str = "TensorRT-LLM performance overview (github.com/NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md), Qwen3-235B-A22B FP8 (`nvidia/Qwen3-235B-A22B-FP8`), `trtllm-bench throughput` with the MoE options (expert parallelism, attention data parallelism), fixed lengths, as many requests as its table gives for each length pair (3,000 for 128 / 2,048; 1,500 for 2,048 / 2,048 and 5,000 / 500), total output tok/s of H100 TP8 over H200 TP8. TensorRT-LLM, not vLLM: only the ratio is compared, filed under the H100 profile the bench's 235B fleets run. Assumed: every request sent at once, and TP8 in the simulator standing in for the expert-parallel layout on both GPUs";
const VLLM_CI_2024: &str = "vLLM's performance-benchmark pipeline (Buildkite `vllm/performance-benchmark`, builds 9513 and 9515 on H200 from vLLM PR #9768 \"[perf bench] H200 development\", October 2024; build 9523 on A100-SXM4-80GB): `benchmark_latency.py` (`latency_llama8B_tp1`, `latency_llama70B_tp4`: Meta-Llama-3-8B and Meta-Llama-3-70B-Instruct, dummy weights, \"Input length: 32 tokens. Output length: 128 tokens. Batch size: fixed (8)\", mean latency) and `benchmark_serving.py` (`serving_llama70B_tp4_sharegpt_qps_1`: 200 ShareGPT prompts, Poisson at 1 req/s, server with `--swap-space 16 --disable-log-stats --disable-log-requests --load-format dummy`). Assumed: vLLM 0.6.3 (the PR's month; the builds do not print it), so V0 at its defaults with the models' 8,192-token `max_model_len`; the latency test in-process (no HTTP front end); the serving run's lengths ShareGPT's as Lambda's 70B H100 TP4 file records them (`anchors::lambda`). Where the two H200 builds differ (8B 833.4 / 834.1 ms, 70B 2,077.5 / 2,075.1 ms) the first, build 9515, is used";
const TRTLLM_8B: &str = "TensorRT-LLM performance overview (github.com/NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md), Llama 3.1 8B FP8, `trtllm-bench throughput`, fixed lengths, total output tok/s of H200 TP1 over H100 TP1. TensorRT-LLM, not vLLM: only the ratio between GPUs is compared. Assumed: 1,000 requests sent at once";
const SYSTALYZE_32B_H200: &str = "Systalyze, \"vLLM serving benchmarks on AWS G7, G7e and H200\" (github.com/systalyze/vllm-benchmarks README.md and configs/qwen3-32b/h200/baseline/row.json, commit 004db0c3): stock vLLM v0.27.1 (`vllm/vllm-openai:v0.27.1`), `Qwen/Qwen3-32B` BF16 on one H200 SXM 141 GB of a p5en.48xlarge, `--tensor-parallel-size 1 --max-model-len 12288 --no-enable-prefix-caching`, other flags at their defaults; AIPerf 0.12.0 streaming chat requests from the frozen list `workload/aws-p50p90-v1` (`anchors::systalyze`: 160 coding prompts, 3,500 / 10,000 tokens in at p50 / p90, 200 / 400 out, `ignore_eos`, temperature 0), cycled in order. The saturation probe (bench/run_replicas.py `probe_lambda_sat`): a closed loop at concurrency 64 for 180 s after 8 warm-up requests, `lambda_sat` = output tok/s / mean output length = 1.5034 req/s (row.json), the requests finished per second. The load point: Poisson arrivals at 1.290 req/s (85 % of the baseline's capacity of 1.517 req/s), 512 requests after 16 warm-ups, per-user output speed at p50 42 tok/s (README), AIPerf's `output_token_throughput_per_user`, one over a request's mean gap between tokens after the first: a TPOT p50 of 1000 / 42 ms. Assumed: the list starts at its first entry (the warm-ups are left out), the load point is measured as a run of its own at that rate (the ladder's rungs are at multiples of 1.5034; the README's point lies between two of them)";
/// The AWS suite's common description, then one configuration's.
macro_rules! aws_suite {
    ($configuration:literal) => {
        concat!(
            "AWS, SageMaker inference benchmark suite (github.com/aws-samples/sagemaker-genai-hosting-examples 07-benchmark/sagemaker-inference-benchmark-suite, commit 089da29d; results/matrix/FINAL_REPORT_20260311.md, docs/BENCHMARK_METHODOLOGY.md, the recipes and the per-level CSVs named beside each anchor), \"vanilla\" configurations, which set no prefix-caching flag, so vLLM V1's default (on) holds. Client (scripts/benchmarker.py): the SageMaker runtime's `invoke_endpoint`, chat requests round-robined through three prompts per use case with `max_tokens` 600 (`enable_thinking` off; every request generated all 600, `avg_output_tokens` 600), 3 warm-up requests, then 30 requests per concurrency level from a pool of C workers; `latency_avg` is the mean wall-clock request time. Assumed: the three prompts each at the level's mean prompt length (`avg_input_tokens`, from vLLM's usage counts; the methodology gives each prompt only roughly), and the warm-up as one pass of the three, one at a time, so every measured prompt starts cached; the SageMaker front end costs nothing beyond the simulator's API overhead. ",
            $configuration
        )
    };
}
const AWS_SUITE_G5: &str = aws_suite!("Qwen/Qwen3-32B BF16 on one ml.g5.12xlarge (4× A10G) with the AWS vLLM 0.11.0 container (cu128), recipes/qwen3-32b-g5-vanilla.yaml: `tensor_parallel_size` 4, `max_model_len` 4096, `max_num_seqs` 32, `max_num_batched_tokens` 4096, `gpu_memory_utilization` 0.85, chunked prefill on; us-east-1 runs of 2026-03-10 (`overnight-qwen3-vanilla-g512xl_use1_…_multiturn_chat_useast1_20260310_001408.csv`, `…_long_context_useast1_20260310_005702.csv`). Assumed: the recipe, committed after the runs, is what they ran with");
const AWS_SUITE_P5E: &str = aws_suite!("Qwen/Qwen3-235B-A22B BF16 on one ml.p5e.48xlarge (8× H200) with the DJL LMI v20 container (`djl_python.lmi_vllm.vllm_async_service`, vLLM V1; the report does not print its vLLM version), recipes/qwen3-235b-p5e-vanilla.yaml: `tensor_parallel_size` 8, `max_model_len` 4096, max rolling batch 64, `gpu_memory_utilization` 0.9, chunked prefill on; us-west-2 runs of 2026-03-11 (`qwen3-235b-vanilla_p5e_p5e48xlarge_multiturn_chat_uswest2_20260311_175625.csv`, `…_long_context_uswest2_20260311_180637.csv`, the first of each on the report's day). Assumed: vLLM's default token budget for the container's engine (not printed)");
const TRTLLM_70B: &str = "TensorRT-LLM performance overview (github.com/NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md), Llama 3.3 70B FP8 (Llama 3.1 70B's geometry), `trtllm-bench throughput`, fixed lengths, total output tok/s of one H200 over two H100 at TP2. TensorRT-LLM, not vLLM: only the ratio is compared. Assumed: 1,000 requests sent at once";

/// Every request sent at once, no cap.
const fn burst(requests: usize) -> Load {
    Load::Closed {
        concurrency: requests,
        requests,
    }
}

const fn x(setup: Setup, load: Load, lengths: Lengths) -> Experiment {
    Experiment {
        setup,
        load,
        lengths,
    }
}

const fn figure(
    experiment: &'static str,
    e: Experiment,
    f: Figure,
    measured: f64,
    split: super::Split,
    source: &'static str,
) -> Published {
    Published {
        experiment,
        measure: Measure::Figure(e, f),
        measured,
        split,
        tolerance: 0.20,
        source,
    }
}

const fn ratio(
    experiment: &'static str,
    a: Experiment,
    b: Experiment,
    f: Figure,
    measured: f64,
    split: super::Split,
    source: &'static str,
) -> Published {
    Published {
        experiment,
        measure: Measure::Ratio(a, b, f),
        measured,
        split,
        tolerance: 0.20,
        source,
    }
}

/// The same 1,000 requests of `lengths`, all at once, on `a` over `b`: a throughput ratio
/// between two GPUs, for sources that do not give their request counts.
const fn gpu_ratio(
    experiment: &'static str,
    a: Setup,
    b: Setup,
    lengths: Lengths,
    measured: f64,
    split: super::Split,
    source: &'static str,
) -> Published {
    gpu_ratio_of(experiment, (a, b), 1_000, lengths, measured, split, source)
}

/// `requests` requests of `lengths`, all at once, on `a` over `b`: a throughput ratio between
/// two GPUs, for sources that give their request counts.
const fn gpu_ratio_of(
    experiment: &'static str,
    (a, b): (Setup, Setup),
    requests: usize,
    lengths: Lengths,
    measured: f64,
    split: super::Split,
    source: &'static str,
) -> Published {
    ratio(
        experiment,
        x(a, burst(requests), lengths),
        x(b, burst(requests), lengths),
        Figure::OutputTokensPerSecond,
        measured,
        split,
        source,
    )
}

const Q235_FP8_H100_OVER_H200: (Setup, Setup) = (
    Setup::new("qwen3-235b-a22b-fp8", "h100", 8),
    Setup::new("qwen3-235b-a22b-fp8", "h200", 8),
);

/// A Llama-3 server of vLLM's 2024 benchmark pipeline (`VLLM_CI_2024`): V0 at its defaults.
const fn vllm_ci_2024(model: &'static str, gpu: &'static str, tp: u32) -> Setup {
    Setup::new(model, gpu, tp).max_model_len(8_192).v0()
}

/// `benchmark_latency.py` of vLLM's pipeline: a batch of 8 prompts of 32 tokens, 128 out,
/// in-process.
const fn vllm_ci_latency(model: &'static str, gpu: &'static str, tp: u32) -> Experiment {
    x(
        vllm_ci_2024(model, gpu, tp).offline(),
        burst(8),
        Lengths::Fixed(32, 128),
    )
}

/// `serving_llama70B_tp4_sharegpt_qps_1` of vLLM's pipeline on 4× H200.
const VLLM_CI_70B_H200_QPS_1: Experiment = x(
    vllm_ci_2024("llama-3.1-70b", "h200", 4),
    Load::Poisson {
        per_second: 1.0,
        requests: 200,
    },
    Lengths::Exact(lambda::H100_70B_TP4_320),
);

const L8_FP8_H200: Setup = Setup::new("llama-3.1-8b-fp8", "h200", 1);
const L8_FP8_H100: Setup = Setup::new("llama-3.1-8b-fp8", "h100", 1);
const L70_FP8_H200: Setup = Setup::new("llama-3.1-70b-fp8", "h200", 1);
const L70_FP8_H100: Setup = Setup::new("llama-3.1-70b-fp8", "h100", 2);

/// Qwen3-32B on one GPU as GPUStack served it: `--max-model-len 32768`, so at least that much
/// KV cache (the module's note).
const fn q32_one_gpu(gpu: &'static str) -> Setup {
    Setup::new("qwen3-32b", gpu, 1)
        .kv_blocks(32_768 / 16)
        .max_model_len(32_768)
}
const Q32_H100: Setup = q32_one_gpu("h100");
const Q32_A100: Setup = q32_one_gpu("a100-80");
/// Qwen3-32B on one H200 as Systalyze's baseline served it (`SYSTALYZE_32B_H200`).
const Q32_H200_SYSTALYZE: Setup = Setup::new("qwen3-32b", "h200", 1).max_model_len(12_288);
const SYSTALYZE_LIST: Lengths = Lengths::Exact(systalyze::AWS_P50P90_V1);
/// Qwen3-32B on four A10Gs as the AWS suite's g5 recipe served it (`AWS_SUITE_G5`).
const Q32_A10G_AWS: Setup = Setup::new("qwen3-32b", "a10g", 4)
    .max_model_len(4_096)
    .max_num_seqs(32)
    .batched_tokens(4_096)
    .gpu_memory_utilization(0.85);
/// Qwen3-235B-A22B on eight H200s as the AWS suite's p5e recipe served it (`AWS_SUITE_P5E`).
const Q235_H200_AWS: Setup = Setup::new("qwen3-235b-a22b", "h200", 8)
    .max_model_len(4_096)
    .max_num_seqs(64);
/// The AWS suite's multi-turn chat prompts: three, at their mean of 521.7 tokens, 600 out.
const AWS_CHAT: Lengths = Lengths::CycledAfterWarmup(&[(522, 600); 3]);
/// The AWS suite's long-context prompts: three, at their mean of 1,662.3 tokens, 600 out.
const AWS_LONG: Lengths = Lengths::CycledAfterWarmup(&[(1_662, 600); 3]);

/// One concurrency level of the AWS suite: 30 requests from `concurrency` workers (at 32, all
/// 30 at once).
const fn aws_level(setup: Setup, concurrency: usize, lengths: Lengths) -> Experiment {
    x(
        setup,
        Load::Closed {
            concurrency,
            requests: 30,
        },
        lengths,
    )
}
const Q235_H100: Setup = Setup::new("qwen3-235b-a22b", "h100", 8);
const Q235_H100_FP8: Setup = Setup::new("qwen3-235b-a22b-fp8", "h100", 4).batched_tokens(16_384);
const Q235_A100: Setup = Setup::new("qwen3-235b-a22b", "a100-80", 8);
/// GPUStack's optimized A100 server: fp8 weights at TP4, one replica of four A100s.
const Q235_A100_FP8: Setup = Setup::new("qwen3-235b-a22b-fp8", "a100-80", 4);
/// A server of Lambda's runs: vLLM 0.6 with the repo's `--max-model-len` (2,000 on the A100s,
/// 2,048 on the H100s) and `--max-num-seqs 256`.
const fn lambda_server(
    model: &'static str,
    gpu: &'static str,
    tp: u32,
    max_model_len: u32,
) -> Setup {
    Setup::new(model, gpu, tp)
        .max_model_len(max_model_len)
        .max_num_seqs(256)
        .v0()
}

const L8_A100: Setup = lambda_server("llama-3.1-8b", "a100-80", 1, 2_000);
const L70_A100: Setup = lambda_server("llama-3.1-70b", "a100-80", 4, 2_000);
const L8_H100_LAMBDA: Setup = lambda_server("llama-3.1-8b", "h100", 1, 2_048);
const L70_H100_TP4_LAMBDA: Setup = lambda_server("llama-3.1-70b", "h100", 4, 2_048);
const L70_H100_TP8_LAMBDA: Setup = lambda_server("llama-3.1-70b", "h100", 8, 2_048);
const L8_A10G: Setup = Setup::new("llama-3.1-8b", "a10g", 1)
    .max_model_len(8_192)
    .v0();
const L8_L4: Setup = Setup::new("llama-3.1-8b", "l4", 1)
    .max_model_len(8_192)
    .v0();
const L70_H100_TP4_SGLANG: Setup = Setup::new("llama-3.1-70b", "h100", 4)
    .max_model_len(4_096)
    .v0();

/// A burst of every request of a Lambda result file, with its own lengths.
const fn lambda_burst(setup: Setup, lengths: &'static [(u32, u32)]) -> Experiment {
    x(setup, burst(lengths.len()), Lengths::Exact(lengths))
}

/// Neural Magic's ShareGPT run on the A10G at 1 req/s (`NEURAL_MAGIC_A10G`): one run, two
/// figures.
const NEURAL_MAGIC_RUN: Experiment = x(
    L8_A10G,
    Load::Poisson {
        per_second: 1.0,
        requests: 200,
    },
    Lengths::Exact(lambda::A100_8B_320),
);

/// llmperf at `concurrency` on the A10G (`LLMPERF_A10G`).
const fn llmperf_a10g(concurrency: usize) -> Experiment {
    x(
        L8_A10G,
        Load::Closed {
            concurrency,
            requests: 20 * concurrency,
        },
        Lengths::Fixed(550, 150),
    )
}

const VERY_LONG: Lengths = Lengths::Fixed(32_000, 100);
const LONG: Lengths = Lengths::Fixed(4_000, 200);
const MEDIUM: Lengths = Lengths::Fixed(2_000, 100);

/// The published anchors, in source order.
pub const PUBLISHED: &[Published] = &[
    // Qwen3-32B on one H100.
    figure(
        "Qwen3-32B H100, 32k in × 100 at once",
        x(Q32_H100, burst(100), VERY_LONG),
        Figure::TotalTokensPerSecond,
        2_771.81,
        HeldOut,
        GPUSTACK_32B_H100,
    ),
    figure(
        "Qwen3-32B H100, 4k in × 500 at once",
        x(Q32_H100, burst(500), LONG),
        Figure::TotalTokensPerSecond,
        2_148.69,
        Fitting,
        GPUSTACK_32B_H100,
    ),
    figure(
        "Qwen3-32B H100, 2k in × 500 at once",
        x(Q32_H100, burst(500), MEDIUM),
        Figure::TotalTokensPerSecond,
        3_195.30,
        HeldOut,
        GPUSTACK_32B_H100,
    ),
    figure(
        "Qwen3-32B H100, 32k in × 100 at once",
        x(Q32_H100, burst(100), VERY_LONG),
        Figure::TpotMeanMs,
        43.42,
        Fitting,
        GPUSTACK_32B_H100,
    ),
    // Qwen3-32B on one A100.
    figure(
        "Qwen3-32B A100, 32k in × 100 at once",
        x(Q32_A100, burst(100), VERY_LONG),
        Figure::TotalTokensPerSecond,
        1_798.45,
        HeldOut,
        GPUSTACK_32B_A100,
    ),
    figure(
        "Qwen3-32B A100, 4k in × 500 at once",
        x(Q32_A100, burst(500), LONG),
        Figure::TotalTokensPerSecond,
        1_837.08,
        Fitting,
        GPUSTACK_32B_A100,
    ),
    figure(
        "Qwen3-32B A100, 2k in × 500 at once",
        x(Q32_A100, burst(500), MEDIUM),
        Figure::TotalTokensPerSecond,
        2_521.38,
        HeldOut,
        GPUSTACK_32B_A100,
    ),
    figure(
        "Qwen3-32B A100, 32k in × 100 at once",
        x(Q32_A100, burst(100), VERY_LONG),
        Figure::TpotMeanMs,
        67.87,
        Fitting,
        GPUSTACK_32B_A100,
    ),
    // Qwen3-235B-A22B BF16 on 8× H100.
    figure(
        "Qwen3-235B H100 TP8, 32k in × 100 at once",
        x(Q235_H100, burst(100), VERY_LONG),
        Figure::TotalTokensPerSecond,
        22_657.51,
        HeldOut,
        GPUSTACK_235B_H100,
    ),
    figure(
        "Qwen3-235B H100 TP8, 4k in × 500 at once",
        x(Q235_H100, burst(500), LONG),
        Figure::TotalTokensPerSecond,
        21_113.53,
        Fitting,
        GPUSTACK_235B_H100,
    ),
    figure(
        "Qwen3-235B H100 TP8, 2k in × 500 at once",
        x(Q235_H100, burst(500), MEDIUM),
        Figure::TotalTokensPerSecond,
        23_858.69,
        HeldOut,
        GPUSTACK_235B_H100,
    ),
    figure(
        "Qwen3-235B H100 TP8, 4k in × 500 at once",
        x(Q235_H100, burst(500), LONG),
        Figure::TpotMeanMs,
        68.94,
        Fitting,
        GPUSTACK_235B_H100,
    ),
    // Qwen3-235B-A22B FP8 on 4× H100.
    figure(
        "Qwen3-235B FP8 H100 TP4, 32k in × 100 at once",
        x(Q235_H100_FP8, burst(100), VERY_LONG),
        Figure::TotalTokensPerSecond,
        15_366.32,
        HeldOut,
        GPUSTACK_235B_H100_FP8,
    ),
    figure(
        "Qwen3-235B FP8 H100 TP4, 4k in × 500 at once",
        x(Q235_H100_FP8, burst(500), LONG),
        Figure::TotalTokensPerSecond,
        16_478.79,
        Fitting,
        GPUSTACK_235B_H100_FP8,
    ),
    figure(
        "Qwen3-235B FP8 H100 TP4, 2k in × 500 at once",
        x(Q235_H100_FP8, burst(500), MEDIUM),
        Figure::TotalTokensPerSecond,
        18_950.04,
        HeldOut,
        GPUSTACK_235B_H100_FP8,
    ),
    // Qwen3-235B-A22B BF16 on 8× A100.
    figure(
        "Qwen3-235B A100 TP8, 32k in × 100 at once",
        x(Q235_A100, burst(100), VERY_LONG),
        Figure::TotalTokensPerSecond,
        6_657.49,
        HeldOut,
        GPUSTACK_235B_A100,
    ),
    figure(
        "Qwen3-235B A100 TP8, 4k in × 500 at once",
        x(Q235_A100, burst(500), LONG),
        Figure::TotalTokensPerSecond,
        8_170.72,
        Fitting,
        GPUSTACK_235B_A100,
    ),
    figure(
        "Qwen3-235B A100 TP8, 2k in × 500 at once",
        x(Q235_A100, burst(500), MEDIUM),
        Figure::TotalTokensPerSecond,
        9_342.67,
        HeldOut,
        GPUSTACK_235B_A100,
    ),
    // Lambda, A100-80GB.
    figure(
        "8B A100, 10 ShareGPT prompts at once",
        x(L8_A100, burst(10), Lengths::Exact(lambda::A100_10)),
        Figure::TpotMedianMs,
        11.96,
        HeldOut,
        LAMBDA,
    ),
    figure(
        "70B A100 TP4, 10 ShareGPT prompts at once",
        x(L70_A100, burst(10), Lengths::Exact(lambda::A100_10)),
        Figure::TpotMedianMs,
        29.55,
        Fitting,
        LAMBDA,
    ),
    figure(
        "8B A100, 320 ShareGPT prompts at once",
        lambda_burst(L8_A100, lambda::A100_8B_320),
        Figure::OutputTokensPerSecond,
        3_107.49,
        HeldOut,
        LAMBDA_320,
    ),
    figure(
        "70B A100 TP4, 320 ShareGPT prompts at once",
        lambda_burst(L70_A100, lambda::A100_70B_TP4_320),
        Figure::OutputTokensPerSecond,
        1_196.05,
        Fitting,
        LAMBDA_320,
    ),
    // Lambda, H100 80GB (added 2026-12-05, the source's order continuing the alternation).
    figure(
        "70B H100 TP4, 10 ShareGPT prompts at once",
        lambda_burst(L70_H100_TP4_LAMBDA, lambda::H100_70B_TP4_10),
        Figure::TpotMedianMs,
        18.12,
        HeldOut,
        LAMBDA_H100,
    ),
    figure(
        "70B H100 TP4, 320 ShareGPT prompts at once",
        lambda_burst(L70_H100_TP4_LAMBDA, lambda::H100_70B_TP4_320),
        Figure::OutputTokensPerSecond,
        2_445.30,
        Fitting,
        LAMBDA_H100,
    ),
    figure(
        "70B H100 TP8, 10 ShareGPT prompts at once",
        lambda_burst(L70_H100_TP8_LAMBDA, lambda::H100_70B_TP8_10),
        Figure::TpotMedianMs,
        12.18,
        HeldOut,
        LAMBDA_H100,
    ),
    figure(
        "70B H100 TP8, 320 ShareGPT prompts at once",
        lambda_burst(L70_H100_TP8_LAMBDA, lambda::H100_70B_TP8_320),
        Figure::OutputTokensPerSecond,
        3_301.05,
        Fitting,
        LAMBDA_H100,
    ),
    figure(
        "8B H100, 10 ShareGPT prompts at once",
        lambda_burst(L8_H100_LAMBDA, lambda::H100_8B_10),
        Figure::TpotMedianMs,
        7.56,
        HeldOut,
        LAMBDA_H100,
    ),
    figure(
        "8B H100, 320 ShareGPT prompts at once",
        lambda_burst(L8_H100_LAMBDA, lambda::H100_8B_320),
        Figure::OutputTokensPerSecond,
        6_026.61,
        Fitting,
        LAMBDA_H100,
    ),
    // SGLang's vLLM 0.6.0 runs, 70B on 4× H100.
    figure(
        "70B H100 TP4, ShareGPT at 4 req/s",
        x(
            L70_H100_TP4_SGLANG,
            Load::Poisson {
                per_second: 4.0,
                requests: 1_200,
            },
            Lengths::Exact(lambda::H100_70B_TP4_320),
        ),
        Figure::TpotMedianMs,
        23.58,
        HeldOut,
        SGLANG_VLLM060,
    ),
    figure(
        "70B H100 TP4, ShareGPT at 8 req/s",
        x(
            L70_H100_TP4_SGLANG,
            Load::Poisson {
                per_second: 8.0,
                requests: 2_400,
            },
            Lengths::Exact(lambda::H100_70B_TP4_320),
        ),
        Figure::TpotMedianMs,
        29.15,
        Fitting,
        SGLANG_VLLM060,
    ),
    // A10G: Neural Magic's ShareGPT run at 1 req/s.
    figure(
        "8B A10G, ShareGPT at 1 req/s",
        NEURAL_MAGIC_RUN,
        Figure::TpotMedianMs,
        42.29,
        HeldOut,
        NEURAL_MAGIC_A10G,
    ),
    figure(
        "8B A10G, ShareGPT at 1 req/s",
        NEURAL_MAGIC_RUN,
        Figure::TtftMedianMs,
        76.73,
        Fitting,
        NEURAL_MAGIC_A10G,
    ),
    // A10G: llmperf's concurrency sweep.
    figure(
        "8B A10G, llmperf concurrency 1",
        llmperf_a10g(1),
        Figure::TpotMeanMs,
        30.65,
        HeldOut,
        LLMPERF_A10G,
    ),
    figure(
        "8B A10G, llmperf concurrency 16",
        llmperf_a10g(16),
        Figure::TpotMeanMs,
        42.67,
        Fitting,
        LLMPERF_A10G,
    ),
    figure(
        "8B A10G, llmperf concurrency 64",
        llmperf_a10g(64),
        Figure::TpotMeanMs,
        61.73,
        HeldOut,
        LLMPERF_A10G,
    ),
    // L4: 1,000 ShareGPT prompts at once.
    figure(
        "8B L4, 1,000 ShareGPT prompts at once",
        x(L8_L4, burst(1_000), Lengths::Exact(lambda::A100_8B_320)),
        Figure::OutputTokensPerSecond,
        197_739.0 / 385.303,
        HeldOut,
        ARC53_L4,
    ),
    // vLLM CI, A100-80GB.
    figure(
        "8B A100, batch 8, 32 in / 128 out",
        x(
            Setup::new("llama-3.1-8b", "a100-80", 1),
            burst(8),
            Lengths::Fixed(32, 128),
        ),
        Figure::E2eMeanSeconds,
        1.585,
        HeldOut,
        VLLM_CI,
    ),
    // A100-40GB concurrency sweep.
    ratio(
        "8B A100-40GB, concurrency 8 over 1",
        x(
            Setup::new("llama-3.1-8b", "a100-40", 1),
            Load::Closed {
                concurrency: 8,
                requests: 160,
            },
            Lengths::Fixed(1_024, 128),
        ),
        x(
            Setup::new("llama-3.1-8b", "a100-40", 1),
            Load::Closed {
                concurrency: 1,
                requests: 20,
            },
            Lengths::Fixed(1_024, 128),
        ),
        Figure::OutputTokensPerSecond,
        6.6,
        HeldOut,
        MUSGRAVE,
    ),
    // Qwen's speed benchmark: one long prompt at a time on two A100s.
    figure(
        "32B A100 TP2, one 30,720-token prompt, 2048 out",
        x(
            Setup::new("qwen3-32b", "a100-80", 2)
                .max_model_len(32_768)
                .v0(),
            burst(1),
            Lengths::Fixed(30_720, 2_048),
        ),
        Figure::OutputTokensPerSecond,
        31.82,
        HeldOut,
        QWEN_SPEED,
    ),
    figure(
        "32B A100 TP2, one 63,488-token prompt, 2048 out",
        x(
            Setup::new("qwen3-32b", "a100-80", 2)
                .max_model_len(65_536)
                .v0(),
            burst(1),
            Lengths::Fixed(63_488, 2_048),
        ),
        Figure::OutputTokensPerSecond,
        24.45,
        Fitting,
        QWEN_SPEED,
    ),
    figure(
        "32B A100 TP2, one 129,024-token prompt, 2048 out",
        x(
            Setup::new("qwen3-32b", "a100-80", 2)
                .max_model_len(131_072)
                .v0(),
            burst(1),
            Lengths::Fixed(129_024, 2_048),
        ),
        Figure::OutputTokensPerSecond,
        14.31,
        HeldOut,
        QWEN_SPEED,
    ),
    // TensorRT-LLM ratios, H200 over H100.
    gpu_ratio(
        "8B FP8 H200 / H100, 128 in / 2048 out",
        L8_FP8_H200,
        L8_FP8_H100,
        Lengths::Fixed(128, 2_048),
        26_221.0 / 22_714.0,
        HeldOut,
        TRTLLM_8B,
    ),
    gpu_ratio(
        "8B FP8 H200 / H100, 2048 in / 2048 out",
        L8_FP8_H200,
        L8_FP8_H100,
        Lengths::Fixed(2_048, 2_048),
        12_194.0 / 9_305.0,
        Fitting,
        TRTLLM_8B,
    ),
    gpu_ratio(
        "8B FP8 H200 / H100, 5000 in / 500 out",
        L8_FP8_H200,
        L8_FP8_H100,
        Lengths::Fixed(5_000, 500),
        3_902.0 / 3_459.0,
        HeldOut,
        TRTLLM_8B,
    ),
    gpu_ratio(
        "8B FP8 H200 / H100, 20000 in / 2000 out",
        L8_FP8_H200,
        L8_FP8_H100,
        Lengths::Fixed(20_000, 2_000),
        1_804.0 / 1_351.0,
        Fitting,
        TRTLLM_8B,
    ),
    gpu_ratio(
        "70B FP8 H200 TP1 / H100 TP2, 1000 in / 1000 out",
        L70_FP8_H200,
        L70_FP8_H100,
        Lengths::Fixed(1_000, 1_000),
        2_909.0 / 4_205.0,
        HeldOut,
        TRTLLM_70B,
    ),
    gpu_ratio(
        "70B FP8 H200 TP1 / H100 TP2, 20000 in / 2000 out",
        L70_FP8_H200,
        L70_FP8_H100,
        Lengths::Fixed(20_000, 2_000),
        283.0 / 437.0,
        Fitting,
        TRTLLM_70B,
    ),
    // vLLM's 2024 benchmark pipeline (appended 2026-12-05, listed so that the profiles with
    // no held-out anchor get one first; the sets written before the simulator first ran them).
    figure(
        "8B H200, batch 8, 32 in / 128 out",
        vllm_ci_latency("llama-3.1-8b", "h200", 1),
        Figure::E2eMeanSeconds,
        0.833421,
        HeldOut,
        VLLM_CI_2024,
    ),
    figure(
        "70B H200 TP4, batch 8, 32 in / 128 out",
        vllm_ci_latency("llama-3.1-70b", "h200", 4),
        Figure::E2eMeanSeconds,
        2.07753,
        Fitting,
        VLLM_CI_2024,
    ),
    figure(
        "70B H200 TP4, ShareGPT at 1 req/s",
        VLLM_CI_70B_H200_QPS_1,
        Figure::ItlMeanMs,
        16.5538,
        HeldOut,
        VLLM_CI_2024,
    ),
    figure(
        "70B H200 TP4, ShareGPT at 1 req/s",
        VLLM_CI_70B_H200_QPS_1,
        Figure::TtftMedianMs,
        58.6838,
        Fitting,
        VLLM_CI_2024,
    ),
    figure(
        "70B A100 TP4, batch 8, 32 in / 128 out",
        vllm_ci_latency("llama-3.1-70b", "a100-80", 4),
        Figure::E2eMeanSeconds,
        3.99059,
        HeldOut,
        VLLM_CI_2024,
    ),
    // TensorRT-LLM's fp8 Qwen3-235B, H100 over H200 at TP8 (appended 2026-12-05 for the shipped
    // fp8 TP8 profile, which had no held-out anchor; the length pairs those of the 8B rows that
    // both GPUs have, the sets written before the simulator first ran them).
    gpu_ratio_of(
        "235B FP8 H100 / H200 TP8, 128 in / 2048 out",
        Q235_FP8_H100_OVER_H200,
        3_000,
        Lengths::Fixed(128, 2_048),
        19_658.0 / 42_821.0,
        HeldOut,
        TRTLLM_235B,
    ),
    gpu_ratio_of(
        "235B FP8 H100 / H200 TP8, 2048 in / 2048 out",
        Q235_FP8_H100_OVER_H200,
        1_500,
        Lengths::Fixed(2_048, 2_048),
        9_924.0 / 16_672.0,
        Fitting,
        TRTLLM_235B,
    ),
    gpu_ratio_of(
        "235B FP8 H100 / H200 TP8, 5000 in / 500 out",
        Q235_FP8_H100_OVER_H200,
        1_500,
        Lengths::Fixed(5_000, 500),
        3_225.0 / 3_623.0,
        HeldOut,
        TRTLLM_235B,
    ),
    // Systalyze's Qwen3-32B on one H200 (appended 2026-12-05 for the shipped profile, which had
    // no held-out anchor; the sets written before the simulator first ran them).
    figure(
        "Qwen3-32B H200, closed loop of 64 for 180 s",
        x(
            Q32_H200_SYSTALYZE,
            Load::ClosedFor {
                concurrency: 64,
                seconds: 180,
                requests: 2_000,
            },
            SYSTALYZE_LIST,
        ),
        Figure::RequestsPerSecond,
        1.503_421,
        HeldOut,
        SYSTALYZE_32B_H200,
    ),
    figure(
        "Qwen3-32B H200, Poisson at 1.29 req/s",
        x(
            Q32_H200_SYSTALYZE,
            Load::Poisson {
                per_second: 1.290,
                requests: 512,
            },
            SYSTALYZE_LIST,
        ),
        Figure::TpotMedianMs,
        1_000.0 / 42.0,
        Fitting,
        SYSTALYZE_32B_H200,
    ),
    // The AWS suite (appended 2026-12-06 for the two shipped profiles without a held-out anchor:
    // Qwen3-32B on four A10Gs and Qwen3-235B-A22B on eight H200s). Per profile, the multi-turn
    // chat and long-context use cases at one request at a time and at the full 30, in the order
    // chat C=1, long C=1, chat C=32, long C=32, alternating from held out: each set gets a
    // batch-1 and a full-batch figure. Chosen and split before the simulator ran any of them.
    figure(
        "Qwen3-32B 4× A10G, chat, one at a time",
        aws_level(Q32_A10G_AWS, 1, AWS_CHAT),
        Figure::E2eMeanSeconds,
        26.384,
        HeldOut,
        AWS_SUITE_G5,
    ),
    figure(
        "Qwen3-32B 4× A10G, long context, one at a time",
        aws_level(Q32_A10G_AWS, 1, AWS_LONG),
        Figure::E2eMeanSeconds,
        26.4468,
        Fitting,
        AWS_SUITE_G5,
    ),
    figure(
        "Qwen3-32B 4× A10G, chat, 30 at once",
        aws_level(Q32_A10G_AWS, 32, AWS_CHAT),
        Figure::E2eMeanSeconds,
        44.1809,
        HeldOut,
        AWS_SUITE_G5,
    ),
    figure(
        "Qwen3-32B 4× A10G, long context, 30 at once",
        aws_level(Q32_A10G_AWS, 32, AWS_LONG),
        Figure::E2eMeanSeconds,
        46.0325,
        Fitting,
        AWS_SUITE_G5,
    ),
    figure(
        "Qwen3-235B 8× H200, chat, one at a time",
        aws_level(Q235_H200_AWS, 1, AWS_CHAT),
        Figure::E2eMeanSeconds,
        5.3804,
        HeldOut,
        AWS_SUITE_P5E,
    ),
    figure(
        "Qwen3-235B 8× H200, long context, one at a time",
        aws_level(Q235_H200_AWS, 1, AWS_LONG),
        Figure::E2eMeanSeconds,
        5.4380,
        Fitting,
        AWS_SUITE_P5E,
    ),
    figure(
        "Qwen3-235B 8× H200, chat, 30 at once",
        aws_level(Q235_H200_AWS, 32, AWS_CHAT),
        Figure::E2eMeanSeconds,
        11.1164,
        HeldOut,
        AWS_SUITE_P5E,
    ),
    figure(
        "Qwen3-235B 8× H200, long context, 30 at once",
        aws_level(Q235_H200_AWS, 32, AWS_LONG),
        Figure::E2eMeanSeconds,
        11.0969,
        Fitting,
        AWS_SUITE_P5E,
    ),
    // GPUStack's fp8 Qwen3-235B at TP4 on four A100s (appended 2026-12-06). Listed so that the
    // fitting set gets a 2k-token and a 32k-token burst of an MoE model, which no earlier source
    // gave it (every GPUStack 235B server held its 2k and 32k rows out and fitted the 4k one):
    // throughput at 4k (held out), 2k (fitting), the 32k burst's TPOT (held out) and its
    // throughput (fitting). The order and sets were written before the simulator first ran any.
    figure(
        "Qwen3-235B FP8 A100 TP4, 4k in × 500 at once",
        x(Q235_A100_FP8, burst(500), LONG),
        Figure::TotalTokensPerSecond,
        4_633.41,
        HeldOut,
        GPUSTACK_235B_A100_FP8,
    ),
    figure(
        "Qwen3-235B FP8 A100 TP4, 2k in × 500 at once",
        x(Q235_A100_FP8, burst(500), MEDIUM),
        Figure::TotalTokensPerSecond,
        5_333.91,
        Fitting,
        GPUSTACK_235B_A100_FP8,
    ),
    figure(
        "Qwen3-235B FP8 A100 TP4, 32k in × 100 at once",
        x(Q235_A100_FP8, burst(100), VERY_LONG),
        Figure::TpotMeanMs,
        481.71,
        HeldOut,
        GPUSTACK_235B_A100_FP8,
    ),
    figure(
        "Qwen3-235B FP8 A100 TP4, 32k in × 100 at once",
        x(Q235_A100_FP8, burst(100), VERY_LONG),
        Figure::TotalTokensPerSecond,
        4_132.51,
        Fitting,
        GPUSTACK_235B_A100_FP8,
    ),
];
