//! vLLM-compatible HTTP servers over the simulated engine.
//!
//! Each replica is an [`infergate_engine::Engine`] owned by one actor task and driven in real
//! time, or `time_scale` times faster: engine time is the wall time since the replica started
//! times the scale. Around it, vLLM's OpenAI server:
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/chat/completions`, `POST /v1/completions` | streaming (OpenAI SSE, `data: [DONE]`) or not; `stream_options.include_usage`; `usage.prompt_tokens_details.cached_tokens`; `max_tokens` / `max_completion_tokens`; `ignore_eos`; `model` = the served model or a loaded adapter |
//! | `GET /v1/models` | the base model and the loaded adapters, with `max_model_len`, `root`, `parent` |
//! | `POST /v1/load_lora_adapter`, `POST /v1/unload_lora_adapter` | vLLM's dynamic LoRA API, answers and errors |
//! | `GET /health` | 200, or 503 while a restarted replica starts up |
//! | `GET /metrics` | vLLM V1's families (or SGLang's with [`Dialect::Sglang`]), Prometheus text 0.0.4 |
//! | `GET /sim/faults`, `POST /sim/faults` | the injected [`Faults`], as JSON |
//!
//! Chat messages go through a fixed Llama-3-style template ([`render_chat`]) and the engine's
//! deterministic tokenizer, so equal text prefixes hit the same prefix-cache blocks on every
//! replica. Answers are seeded words, one per token; without `ignore_eos` their length is a
//! seeded geometric draw with mean [`ReplicaSpec::mean_output_tokens`], capped by `max_tokens`
//! (or by what is left of `max_model_len`). Errors are OpenAI-shaped ([`ApiError`]).
//!
//! Faults, at start ([`ReplicaSpec::faults`]) or at run time:
//!
//! ```text
//! curl -X POST localhost:8000/sim/faults -d '{"error_rates": {"503": 0.05, "429": 0.02}}'
//! curl -X POST localhost:8000/sim/faults -d '{"crash_after_secs": 10, "restart": {"down_secs": 5, "startup_secs": 20}}'
//! curl -X POST localhost:8000/sim/faults -d '{"slowdown": 2.0, "metrics": "stale"}'
//! curl -X POST localhost:8000/sim/faults -d '{}'   # heal
//! ```
//!
//! ```no_run
//! # async fn run() -> Result<(), infergate_simserver::SimError> {
//! use infergate_engine::{EngineConfig, Profile};
//! use infergate_simserver::{serve, ReplicaSpec};
//!
//! let profile = Profile::lookup("llama-3.1-8b", "h100", 1).map_err(|e| {
//!     infergate_simserver::SimError::InvalidSpec(e.to_string())
//! })?;
//! let spec = ReplicaSpec::new(EngineConfig::new(profile));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
//! serve(spec, listener, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

mod answer;
mod body;
mod error;
mod exposition;
mod faults;
mod generation;
mod prompt;
mod replica;
mod request;
mod routes;
mod server;
mod spec;

pub use error::{ApiError, SimError};
pub use faults::{Faults, MetricsFault, Restart};
pub use generation::seeded_answer;
pub use prompt::{render_chat, ChatMessage};
pub use request::{parse_request, Endpoint, InferenceRequest, Prompt};
pub use server::{serve, serve_fleet};
pub use spec::{Dialect, ReplicaSpec, DEFAULT_MEAN_OUTPUT_TOKENS};
