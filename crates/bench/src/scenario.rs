//! The benchmark scenarios of the reference, as data.

use crate::replay::Recorded;
use crate::trace::{
    read_azure_csv, read_capture_jsonl, read_mooncake_jsonl, traces_dir, TraceError, TraceFormat,
};
use crate::workload::{Arrivals, BenchRequest, Shape};
use infergate_config::fleet::{SimSettings, DEFAULT_GPU, DEFAULT_MODEL, DEFAULT_TP};
use infergate_config::gateway::Band;
use infergate_engine::{EngineConfig, SchedulingPolicy, SettingsError};
use infergate_rng::SplitMix64;
use std::time::Duration;

/// Replicas of a fleet that are alike: the settings `infergate sim` would start each of them
/// with, and how many there are.
///
/// The settings are the fleet file's own type, so a scenario made from a file keeps every field
/// the file set, and the runner turns them into engines through the same conversion as
/// `infergate sim` ([`EngineConfig::from_settings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaKind {
    /// What each replica simulates; unset fields keep the simulator's defaults.
    pub settings: SimSettings,
    /// How many of them.
    pub count: u32,
}

impl ReplicaKind {
    /// `count` replicas of `model` on `gpu` with tensor parallelism `tp`, vLLM's defaults
    /// otherwise (LoRA off, FCFS).
    pub fn new(model: &str, gpu: &str, tp: u32, count: u32) -> ReplicaKind {
        ReplicaKind {
            settings: SimSettings {
                model: Some(model.to_owned()),
                gpu: Some(gpu.to_owned()),
                tp: Some(tp),
                ..SimSettings::default()
            },
            count,
        }
    }

    /// With `max_loras` GPU LoRA slots (vLLM `--max-loras`) and `max_cpu_loras` in host memory.
    pub fn with_loras(mut self, max_loras: u32, max_cpu_loras: u32) -> ReplicaKind {
        self.settings.max_loras = Some(max_loras);
        self.settings.max_cpu_loras = Some(max_cpu_loras);
        self
    }

    /// With vLLM `--scheduling-policy`. Under `Priority` each request carries its band as the
    /// engine priority, as a gateway pool with `forwardPriority` sends it.
    pub fn with_scheduling(mut self, policy: SchedulingPolicy) -> ReplicaKind {
        self.settings.scheduling_policy = Some(policy.as_str().to_owned());
        self
    }

    /// The model profile's name.
    pub fn model(&self) -> &str {
        self.settings.model.as_deref().unwrap_or(DEFAULT_MODEL)
    }

    /// The GPU's name.
    pub fn gpu(&self) -> &str {
        self.settings.gpu.as_deref().unwrap_or(DEFAULT_GPU)
    }

    /// The tensor-parallel degree.
    pub fn tp(&self) -> u32 {
        self.settings.tp.unwrap_or(DEFAULT_TP)
    }

    /// GPU LoRA slots; 0 is LoRA off.
    pub fn max_loras(&self) -> u32 {
        self.settings.max_loras.unwrap_or(0)
    }

    /// The engine each of these replicas runs, as `infergate sim` would start it.
    pub fn engine_config(&self) -> Result<EngineConfig, SettingsError> {
        EngineConfig::from_settings(&self.settings)
    }
}

/// Where request lengths come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lengths {
    /// (ContextTokens, GeneratedTokens) pairs sampled from the Azure 2023 conversation trace.
    AzureConversation,
    /// inference-perf's shared_prefix: 150 groups × 5 prompts, system 6,000 tokens, question
    /// 1,200, output 1,000.
    SharedPrefix150x5,
    /// The Azure conversation trace replayed with its own timestamps, time-scaled to the load.
    AzureTrace,
    /// The Mooncake conversation trace replayed with its own timestamps, time-scaled, its
    /// prompts built from `hash_ids` so that shared ids are shared prefixes.
    MooncakeTrace,
    /// A trace file replayed like the two above, its format told by its content: the Azure CSV,
    /// the Mooncake JSONL, or infergate's own capture (whose adapters, tenants and bands are
    /// replayed too).
    TraceFile(&'static std::path::Path),
}

/// Which LoRA adapters requests name: `adapters` of them, Zipf-distributed with the exponent
/// that gives the three most popular `top3_share` of the requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdapterMix {
    /// Distinct adapters.
    pub adapters: u32,
    /// Share of requests that go to the three most popular.
    pub top3_share: f64,
}

impl AdapterMix {
    /// The Zipf exponent `s` with `Σ_{k≤3} k^-s / Σ_{k≤n} k^-s = top3_share` (bisection; the
    /// share grows with `s`).
    pub fn exponent(&self) -> f64 {
        let share = |s: f64| {
            let w = |k: u32| f64::from(k).powf(-s);
            let top: f64 = (1..=3.min(self.adapters)).map(w).sum();
            let all: f64 = (1..=self.adapters).map(w).sum();
            top / all
        };
        let (mut lo, mut hi) = (0.0, 20.0);
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if share(mid) < self.top3_share {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }

    /// Names an adapter (`adapter-1` is the most popular) for every request.
    pub fn assign(&self, requests: &mut [BenchRequest], rng: &mut SplitMix64) {
        let s = self.exponent();
        let mut cumulative: Vec<f64> = Vec::with_capacity(self.adapters as usize);
        let mut total = 0.0;
        for k in 1..=self.adapters {
            total += f64::from(k).powf(-s);
            cumulative.push(total);
        }
        for r in requests {
            let u = rng.next_f64() * total;
            let k = cumulative.partition_point(|&c| c < u) + 1;
            r.adapter = Some(format!("adapter-{k}"));
        }
    }
}

/// A scenario: fleet, arrivals, lengths, and load as a fraction of fleet capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name on the command line.
    pub id: &'static str,
    /// The replicas.
    pub fleet: Vec<ReplicaKind>,
    /// How requests arrive.
    pub arrivals: Arrivals,
    /// How long prompts and answers are.
    pub lengths: Lengths,
    /// Offered load as a fraction of the fleet's capacity.
    pub load: f64,
    /// The HyperPod table's row this mirrors, if any: (Δ TTFT P95, Δ TTFT P99, Δ throughput) in
    /// percent vs round-robin; `None` where the seed says "comparable".
    pub seed_row: Option<[Option<f64>; 3]>,
    /// LoRA adapters the requests name, if any.
    pub adapters: Option<AdapterMix>,
    /// Shares of Critical, Standard and Sheddable requests; `Some` also puts the gateway's flow
    /// control (its defaults, enabled) in front of the picker.
    pub bands: Option<[f64; 3]>,
}

impl Scenario {
    /// The trace the scenario replays, if it replays one.
    pub fn recorded(&self) -> Result<Option<Recorded>, TraceError> {
        Ok(match self.lengths {
            Lengths::AzureTrace => Some(Recorded::Lengths(read_azure_csv(
                &traces_dir().join("azure-llm-2023-conv.csv"),
            )?)),
            Lengths::MooncakeTrace => Some(Recorded::Blocks(read_mooncake_jsonl(
                &traces_dir().join("mooncake-conversation.jsonl"),
            )?)),
            // Told by content; a file of no known format is read as the Azure CSV, whose
            // reader then names the first line it cannot read.
            Lengths::TraceFile(path) => Some(match TraceFormat::detect(path)? {
                Some(TraceFormat::MooncakeJsonl) => Recorded::Blocks(read_mooncake_jsonl(path)?),
                Some(TraceFormat::CaptureJsonl) => Recorded::Captured(read_capture_jsonl(path)?),
                Some(TraceFormat::AzureCsv) | None => Recorded::Lengths(read_azure_csv(path)?),
            }),
            Lengths::AzureConversation | Lengths::SharedPrefix150x5 => None,
        })
    }

    /// The requests of one run at `rate` for `duration`: synthetic arrivals and lengths, or a
    /// window of the trace time-scaled to `rate`, with adapters named when the scenario has them.
    pub fn requests(
        &self,
        rate: f64,
        duration: Duration,
        max_model_len: u32,
        seed: u64,
    ) -> Result<Vec<BenchRequest>, TraceError> {
        let mut rng = SplitMix64::new(seed);
        let mut requests = match self.recorded()? {
            Some(trace) => {
                let window = trace.window(rate, duration, max_model_len, &mut rng);
                if window.is_empty() && rate > 0.0 && !duration.is_zero() {
                    return Err(TraceError::NothingToReplay(format!(
                        "{} requests spanning {:.1} s, replayed at {rate:.2} req/s for {:.0} s",
                        trace.len(),
                        trace.span().as_secs_f64(),
                        duration.as_secs_f64()
                    )));
                }
                window
            }
            None => {
                let times = self.arrivals.times(rate, duration, &mut rng);
                self.shape()?.requests(&times, max_model_len, &mut rng)
            }
        };
        if let Some(mix) = &self.adapters {
            mix.assign(&mut requests, &mut rng);
        }
        if let Some(shares) = self.bands {
            // A replayed capture brings each request's own band.
            for r in requests.iter_mut().filter(|r| r.band.is_none()) {
                r.band = Some(Band::ALL[rng.weighted_index(&shares)]);
            }
        }
        Ok(requests)
    }

    /// The request shape (lengths; for a trace, its lengths with unique prompts), reading the
    /// trace it samples from when it needs one.
    pub fn shape(&self) -> Result<Shape, TraceError> {
        Ok(match self.lengths {
            Lengths::AzureConversation => {
                let trace = read_azure_csv(&traces_dir().join("azure-llm-2023-conv.csv"))?;
                Shape::Sampled(
                    trace
                        .iter()
                        .map(|r| (r.input_tokens, r.output_tokens))
                        .collect(),
                )
            }
            Lengths::AzureTrace | Lengths::MooncakeTrace | Lengths::TraceFile(_) => {
                Shape::Sampled(self.recorded()?.map(|t| t.lengths()).unwrap_or_default())
            }
            Lengths::SharedPrefix150x5 => Shape::SharedPrefix {
                groups: 150,
                prompts_per_group: 5,
                system_tokens: 6_000,
                question_tokens: 1_200,
                output_tokens: 1_000,
            },
        })
    }

    /// Replicas in the fleet.
    pub fn replicas(&self) -> impl Iterator<Item = &ReplicaKind> + '_ {
        self.fleet
            .iter()
            .flat_map(|k| std::iter::repeat_n(k, k.count as usize))
    }
}

fn kind(model: &str, gpu: &str, tp: u32, count: u32) -> ReplicaKind {
    ReplicaKind::new(model, gpu, tp, count)
}

/// Every scenario the runner knows, in the reference's order.
pub fn all() -> Vec<Scenario> {
    let bursty = Arrivals::Gamma { cv: 4.0 };
    vec![
        Scenario {
            id: "mixed-gpu-8b",
            fleet: vec![
                kind("llama-3.1-8b", "h100", 1, 4),
                kind("llama-3.1-8b", "a10g", 1, 4),
            ],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 0.6,
            adapters: None,
            seed_row: Some([Some(-97.0), Some(-97.0), Some(8.0)]),
            bands: None,
        },
        Scenario {
            id: "mixed-gpu-32b",
            fleet: vec![
                kind("qwen3-32b", "h100", 2, 2),
                kind("qwen3-32b", "a10g", 4, 2),
            ],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 0.6,
            adapters: None,
            seed_row: Some([Some(-98.0), Some(-97.0), Some(50.0)]),
            bands: None,
        },
        Scenario {
            id: "bursty-70b",
            fleet: vec![kind("llama-3.1-70b", "h100", 4, 4)],
            arrivals: bursty,
            lengths: Lengths::AzureConversation,
            load: 0.5,
            adapters: None,
            seed_row: Some([Some(-94.0), Some(-98.0), Some(12.0)]),
            bands: None,
        },
        Scenario {
            id: "bursty-235b",
            fleet: vec![kind("qwen3-235b-a22b-fp8", "h100", 8, 2)],
            arrivals: bursty,
            lengths: Lengths::AzureConversation,
            load: 0.5,
            adapters: None,
            seed_row: Some([None, Some(-89.0), None]),
            bands: None,
        },
        Scenario {
            id: "shared-prefix-8b",
            fleet: vec![kind("llama-3.1-8b", "h100", 1, 4)],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::SharedPrefix150x5,
            load: 0.7,
            adapters: None,
            seed_row: Some([Some(-26.0), Some(-43.0), None]),
            bands: None,
        },
        Scenario {
            id: "uniform-steady-235b",
            fleet: vec![kind("qwen3-235b-a22b-fp8", "h100", 8, 2)],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 0.5,
            seed_row: Some([None, None, None]),
            adapters: None,
            bands: None,
        },
        Scenario {
            id: "lora-hotset-8b",
            fleet: vec![kind("llama-3.1-8b", "h100", 1, 4).with_loras(4, 16)],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 0.6,
            seed_row: None,
            adapters: Some(AdapterMix {
                adapters: 40,
                top3_share: 0.9,
            }),
            bands: None,
        },
        Scenario {
            id: "priority-overload-8b",
            fleet: vec![kind("llama-3.1-8b", "h100", 1, 4)],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 1.3,
            seed_row: None,
            adapters: None,
            bands: Some([0.2, 0.5, 0.3]),
        },
        // The same, with the model servers ordering their own queues by band (vLLM
        // `--scheduling-policy priority`, the gateway's `forwardPriority`): the gateway cannot
        // reorder what already waits inside a server, the server can.
        Scenario {
            id: "priority-overload-8b-vllm-priority",
            fleet: vec![
                kind("llama-3.1-8b", "h100", 1, 4).with_scheduling(SchedulingPolicy::Priority)
            ],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 1.3,
            seed_row: None,
            adapters: None,
            bands: Some([0.2, 0.5, 0.3]),
        },
        Scenario {
            id: "trace-azure-conv",
            fleet: vec![
                kind("llama-3.1-8b", "h100", 1, 4),
                kind("llama-3.1-8b", "a10g", 1, 4),
            ],
            arrivals: Arrivals::TraceTimestamps,
            lengths: Lengths::AzureTrace,
            load: 0.6,
            seed_row: None,
            adapters: None,
            bands: None,
        },
        Scenario {
            id: "trace-mooncake",
            fleet: vec![kind("llama-3.1-8b", "h100", 1, 8)],
            arrivals: Arrivals::TraceTimestamps,
            lengths: Lengths::MooncakeTrace,
            load: 0.6,
            seed_row: None,
            adapters: None,
            bands: None,
        },
    ]
}

/// The seed table's six scenarios (those with a `seed_row`).
pub fn seed_rows() -> Vec<Scenario> {
    all().into_iter().filter(|s| s.seed_row.is_some()).collect()
}

/// The scenario called `id`.
pub fn by_id(id: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.id == id)
}
