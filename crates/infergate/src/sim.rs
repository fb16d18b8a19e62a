//! `infergate sim`: simulated vLLM-compatible servers, one from flags or a fleet from a file.
//!
//! Flags and fleet files go through one conversion path: both become
//! [`infergate_config::fleet::SimSettings`], and only [`crate::sim_serve::engine_config`] turns those into an
//! engine configuration, so a flag and the same field in a file always mean the same thing.

use anyhow::{bail, Context};
use clap::Args;
use infergate_config::fleet::{FleetFile, SimEndpoint, SimSettings};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// Flags of `infergate sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Model profile: llama-3.1-8b, qwen3-32b, llama-3.1-70b, qwen3-235b-a22b[-fp8], instant.
    #[arg(long, default_value = "llama-3.1-8b")]
    model: String,
    /// GPU: h100, h200, a100-80, a100-40, a10g, l4.
    #[arg(long, default_value = "h100")]
    gpu: String,
    /// Tensor-parallel degree.
    #[arg(long, default_value_t = 1)]
    tp: u32,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to listen on.
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Model name the server reports and accepts (default: the profile's Hugging Face name).
    #[arg(long)]
    served_model_name: Option<String>,
    /// GPU LoRA slots (vLLM --max-loras); 0 disables LoRA.
    #[arg(long)]
    max_loras: Option<u32>,
    /// Adapters kept in host memory (vLLM --max-cpu-loras).
    #[arg(long)]
    max_cpu_loras: Option<u32>,
    /// Adapters loaded at start, comma-separated.
    #[arg(long, value_delimiter = ',')]
    lora: Vec<String>,
    /// vLLM --max-num-seqs (default from the GPU, as vLLM chooses).
    #[arg(long)]
    max_num_seqs: Option<u32>,
    /// vLLM --max-num-batched-tokens (default from the GPU, as vLLM chooses).
    #[arg(long)]
    max_num_batched_tokens: Option<u32>,
    /// vLLM --max-model-len (default: the model's, lowered to what the KV cache holds).
    #[arg(long)]
    max_model_len: Option<u32>,
    /// Turn automatic prefix caching off.
    #[arg(long)]
    no_prefix_caching: bool,
    /// Turn chunked prefill off.
    #[arg(long)]
    no_chunked_prefill: bool,
    /// vLLM --scheduling-policy: fcfs, or priority (requests' `priority` field, lower first).
    #[arg(long)]
    scheduling_policy: Option<String>,
    /// Metrics dialect: vllm or sglang.
    #[arg(long, default_value = "vllm")]
    engine: String,
    /// Simulated seconds per wall-clock second.
    #[arg(long)]
    time_scale: Option<f64>,
    /// Seed of every random draw.
    #[arg(long)]
    seed: Option<u64>,
    /// Mean output length of requests without ignore_eos.
    #[arg(long)]
    mean_output_tokens: Option<u32>,
    /// Start the replicas of a fleet file instead of one from flags.
    #[arg(long, conflicts_with_all = ["port", "model", "gpu", "tp"])]
    fleet: Option<std::path::PathBuf>,
    /// Print every profile with its derived figures and exit.
    #[arg(long)]
    list_profiles: bool,
    /// Run the fidelity anchors in virtual time, print predicted against measured (fitted and
    /// held-out sets, each with its median error), and exit.
    #[arg(long)]
    anchors: bool,
    /// With --anchors: print the sets' summaries and every anchor as one JSON object.
    #[arg(long, requires = "anchors")]
    json: bool,
    #[command(flatten)]
    faults: crate::sim_faults::FaultArgs,
}

impl SimArgs {
    fn settings(&self) -> SimSettings {
        SimSettings {
            model: Some(self.model.clone()),
            gpu: Some(self.gpu.clone()),
            tp: Some(self.tp),
            served_model_name: self.served_model_name.clone(),
            engine: Some(self.engine.clone()),
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_model_len: self.max_model_len,
            prefix_caching: self.no_prefix_caching.then_some(false),
            chunked_prefill: self.no_chunked_prefill.then_some(false),
            scheduling_policy: self.scheduling_policy.clone(),
            max_loras: self.max_loras,
            max_cpu_loras: self.max_cpu_loras,
            loras: (!self.lora.is_empty()).then(|| self.lora.clone()),
            seed: self.seed,
            time_scale: self.time_scale,
            mean_output_tokens: self.mean_output_tokens,
        }
    }
}

/// A replica to start: where, with which labels and settings.
fn plans(args: &SimArgs) -> anyhow::Result<Vec<SimEndpoint>> {
    match &args.fleet {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            FleetFile::parse(&text).with_context(|| format!("in {}", path.display()))
        }
        None => Ok(vec![SimEndpoint {
            address: SocketAddr::new(args.host, args.port),
            labels: BTreeMap::new(),
            settings: args.settings(),
        }]),
    }
}

/// Runs `infergate sim`.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    if args.list_profiles {
        return crate::profiles::list_profiles();
    }
    if args.anchors {
        return crate::profiles::anchors(args.json);
    }
    let plans = plans(&args)?;
    if plans.is_empty() {
        bail!("no replica to start");
    }
    let faults = args.faults.to_faults()?;
    crate::sim_serve::serve(plans, faults)
}
