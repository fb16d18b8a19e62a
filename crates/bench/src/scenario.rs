//! The benchmark scenarios of the reference, as data.

use crate::trace::{read_azure_csv, traces_dir, TraceError};
use crate::workload::{Arrivals, Shape};

/// One replica of a fleet: a profile as `infergate sim` names it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicaKind {
    /// Model profile (`llama-3.1-8b`, `qwen3-235b-a22b-fp8`, …).
    pub model: &'static str,
    /// GPU.
    pub gpu: &'static str,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// How many of them.
    pub count: u32,
}

/// Where request lengths come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lengths {
    /// (ContextTokens, GeneratedTokens) pairs sampled from the Azure 2023 conversation trace.
    AzureConversation,
    /// inference-perf's shared_prefix: 150 groups × 5 prompts, system 6,000 tokens, question
    /// 1,200, output 1,000.
    SharedPrefix150x5,
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
}

impl Scenario {
    /// The request shape, reading the trace it samples from when it needs one.
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
    pub fn replicas(&self) -> impl Iterator<Item = ReplicaKind> + '_ {
        self.fleet
            .iter()
            .flat_map(|k| std::iter::repeat_n(*k, k.count as usize))
    }
}

fn kind(model: &'static str, gpu: &'static str, tp: u32, count: u32) -> ReplicaKind {
    ReplicaKind {
        model,
        gpu,
        tp,
        count,
    }
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
            seed_row: Some([Some(-97.0), Some(-97.0), Some(8.0)]),
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
            seed_row: Some([Some(-98.0), Some(-97.0), Some(50.0)]),
        },
        Scenario {
            id: "bursty-70b",
            fleet: vec![kind("llama-3.1-70b", "h100", 4, 4)],
            arrivals: bursty,
            lengths: Lengths::AzureConversation,
            load: 0.5,
            seed_row: Some([Some(-94.0), Some(-98.0), Some(12.0)]),
        },
        Scenario {
            id: "bursty-235b",
            fleet: vec![kind("qwen3-235b-a22b-fp8", "h100", 8, 2)],
            arrivals: bursty,
            lengths: Lengths::AzureConversation,
            load: 0.5,
            seed_row: Some([None, Some(-89.0), None]),
        },
        Scenario {
            id: "shared-prefix-8b",
            fleet: vec![kind("llama-3.1-8b", "h100", 1, 4)],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::SharedPrefix150x5,
            load: 0.7,
            seed_row: Some([Some(-26.0), Some(-43.0), None]),
        },
        Scenario {
            id: "uniform-steady-235b",
            fleet: vec![kind("qwen3-235b-a22b-fp8", "h100", 8, 2)],
            arrivals: Arrivals::Poisson,
            lengths: Lengths::AzureConversation,
            load: 0.5,
            seed_row: Some([None, None, None]),
        },
    ]
}

/// The scenario called `id`.
pub fn by_id(id: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.id == id)
}
