//! One replica's engine, owned by one actor task (see [`actor`]); connections talk to it
//! through a [`ReplicaHandle`], so the engine needs no lock.

mod actor;

pub(crate) use actor::start;

use crate::error::ApiError;
use crate::generation::OutputPlan;
use crate::request::Prompt;
use hyper::StatusCode;
use infergate_engine::metrics::Histogram;
use infergate_engine::{EngineCounters, EngineGauges, FinishReason, RequestId, Usage};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Commands queued to one replica before submitters wait.
const COMMAND_QUEUE: usize = 4096;
/// `vllm:lora_requests_info` series kept (one per label combination ever seen, newest first).
const LORA_SERIES: usize = 16;
/// How soon to look again when the engine has queued work it cannot schedule yet.
const STALL_POLL: Duration = Duration::from_millis(1);
/// The resolution of tokio's timer: a step due within it is taken at once.
const TIMER_GRANULARITY: Duration = Duration::from_millis(1);

/// SGLang's default bucket bounds, for the histograms the SGLang dialect exports.
pub(crate) const SGLANG_TTFT_BUCKETS: &[f64] = &[
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0,
];
pub(crate) const SGLANG_ITL_BUCKETS: &[f64] = &[
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
];
pub(crate) const SGLANG_E2E_BUCKETS: &[f64] = &[
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0, 600.0, 1200.0, 1800.0, 2400.0,
];

/// What happens to an admitted request, in order; `Finished` is the last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Progress {
    /// Output token `index` is ready.
    Token { index: u32 },
    /// Done.
    Finished { reason: FinishReason, usage: Usage },
}

/// A request for the engine.
#[derive(Debug)]
pub(crate) struct Submission {
    pub model: Option<String>,
    pub prompt: Prompt,
    pub max_tokens: Option<u32>,
    pub ignore_eos: bool,
    pub priority: i32,
    /// The request's `seed`, which fixes the answer.
    pub seed: Option<u64>,
    /// Words of the answer already written, when it continues one.
    pub written: u32,
    pub events: mpsc::UnboundedSender<Progress>,
}

/// The engine took the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admitted {
    pub id: RequestId,
    pub output: OutputPlan,
    /// Seed of the answer's words.
    pub seed: u64,
    /// Index of the answer's first word: the words already written when it continues one.
    pub first_word: u32,
}

/// An adapter as `/v1/models` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdapterCard {
    pub name: String,
    pub path: String,
}

/// Server-side histograms with SGLang's buckets (the engine keeps vLLM's).
#[derive(Debug, Clone)]
pub(crate) struct SglangHistograms {
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
}

/// One `vllm:lora_requests_info` series.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LoraSeries {
    pub running: String,
    pub waiting: String,
    /// Unix time of the last update.
    pub at: f64,
}

/// Everything `/metrics` shows, taken at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub counters: EngineCounters,
    pub gauges: EngineGauges,
    pub lora: Vec<LoraSeries>,
    pub cached_tokens: u64,
    pub sglang: Option<SglangHistograms>,
}

#[derive(Debug)]
enum Command {
    Submit(Box<Submission>, oneshot::Sender<Result<Admitted, ApiError>>),
    Abort(RequestId),
    LoadAdapter(AdapterCard, oneshot::Sender<Result<(), ApiError>>),
    UnloadAdapter(String, oneshot::Sender<Result<(), ApiError>>),
    Adapters(oneshot::Sender<Vec<AdapterCard>>),
    Snapshot(oneshot::Sender<Snapshot>),
    SetSlowdown(f64),
}

/// The way to one running replica actor. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct ReplicaHandle {
    commands: mpsc::Sender<Command>,
}

fn gone() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailableError",
        "The engine is not running.",
    )
}

impl ReplicaHandle {
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(make(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Submits a request; its progress arrives on `submission.events`.
    pub async fn submit(&self, submission: Submission) -> Result<Admitted, ApiError> {
        self.ask(|tx| Command::Submit(Box::new(submission), tx))
            .await
            .unwrap_or_else(|| Err(gone()))
    }

    /// Cancels a request whose client went away. Never waits: if the queue is full the actor
    /// still notices when the request's event channel is closed.
    pub fn abort(&self, id: RequestId) {
        if self.commands.try_send(Command::Abort(id)).is_err() {
            tracing::debug!(
                id = id.as_u64(),
                "abort not queued; the closed channel will tell"
            );
        }
    }

    /// vLLM's `load_lora_adapter`.
    pub async fn load_adapter(&self, card: AdapterCard) -> Result<(), ApiError> {
        self.ask(|tx| Command::LoadAdapter(card, tx))
            .await
            .unwrap_or_else(|| Err(gone()))
    }

    /// vLLM's `unload_lora_adapter`.
    pub async fn unload_adapter(&self, name: String) -> Result<(), ApiError> {
        self.ask(|tx| Command::UnloadAdapter(name, tx))
            .await
            .unwrap_or_else(|| Err(gone()))
    }

    /// The loaded adapters, in load order.
    pub async fn adapters(&self) -> Option<Vec<AdapterCard>> {
        self.ask(Command::Adapters).await
    }

    /// The figures for `/metrics`.
    pub async fn snapshot(&self) -> Option<Snapshot> {
        self.ask(Command::Snapshot).await
    }

    /// Sets the step-time slowdown factor.
    pub async fn set_slowdown(&self, factor: f64) {
        // A stopped actor has no engine to slow down.
        let _ = self.commands.send(Command::SetSlowdown(factor)).await;
    }
}
