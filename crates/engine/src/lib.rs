//! A pure, clock-agnostic, iteration-level model of a vLLM V1 model server.
//!
//! The engine models what makes routing matter on real GPUs: continuous batching with a token
//! budget and chunked prefill, a KV block pool with prefix caching and LRU eviction, recompute
//! preemption when blocks run out, LoRA slots that fill up, and a step time computed from the
//! model's geometry and the GPU's datasheet. It does no I/O and reads no clock: it is told the
//! time and says when its step ends, so the HTTP server drives it in real time and the benchmark
//! in virtual time. See `docs/simulator.md` for the calibration.

pub mod anchors;
pub mod blocks;
pub mod config;
pub mod drive;
pub mod engine;
pub mod lora;
pub mod metrics;
pub mod profile;
mod seq;
pub mod settings;
pub mod step_time;
pub mod tokens;

pub use config::{ConfigError, EngineConfig, SchedulingPolicy};
pub use engine::{Engine, Event, EventKind, NewRequest, RequestId, SubmitError, Usage};
pub use metrics::{EngineCounters, EngineGauges, FinishReason};
pub use profile::{Profile, ProfileError};
pub use settings::SettingsError;

/// Tokens per KV block.
pub const BLOCK_SIZE: u32 = 16;
