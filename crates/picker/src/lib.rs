//! The Endpoint Picker: for each request, the pod of a model pool that will answer it fastest.
//!
//! Pure: no I/O, no async, no clock, no global random source. The caller passes in the time (a
//! `Duration` since an epoch of its choosing) and a seed, so the same decisions run in the live
//! gateway, in the Envoy adapter and in the virtual-time benchmark, and every run replays.
//!
//! The path of a request:
//!
//! 1. The control plane builds a [`Pool`] (membership) and installs scrapes with
//!    [`Pool::update_metrics`], reading `/metrics` bodies with [`metrics::read_metrics`].
//! 2. The gateway parses the request once into [`RequestFeatures`], hashing the prompt with
//!    [`prefix::hash_prompt`].
//! 3. [`Picker::pick`] runs the policy's filters, scorers and selection and returns a [`Pick`]:
//!    a primary and ordered fallbacks.
//! 4. [`Picker::on_dispatch`] records where the request actually went: the prefix index learns,
//!    the endpoint's counters are credited, and a [`Dispatch`] carries the in-flight guard (keep it
//!    as long as the response) and the ticket for [`Picker::observe_ttft`].
//!
//! [`speed::measure_decisions`] times the whole decision (hashing, filters, scorers, selection)
//! on a realistic pool of any size, with a clock the caller passes in.
//!
//! Configuration arrives as HyperPod [`config::Weights`] or a GIE
//! [`config::EndpointPickerConfig`] (formats and defaults from the config crate), both turned
//! into a [`Profile`] ([`config::ScorerWeights`], [`config::PickerConfig`]); or as a named
//! [`Policy`].
//!
//! ```
//! use std::time::Duration;
//! use infergate_picker::metrics::{read_metrics, Engine};
//! use infergate_picker::prefix::{hash_prompt, PrefixParams};
//! use infergate_picker::{EndpointId, EndpointSpec, Picker, Policy, Pool, RequestFeatures};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Control plane: membership, then scrapes as they land.
//! let mut pool = Pool::new(vec![
//!     EndpointSpec::new(0, "10.0.0.1:8000"),
//!     EndpointSpec::new(1, "10.0.0.2:8000"),
//! ])?;
//! let now = Duration::from_millis(1_000);
//! for (id, body) in [
//!     (0, "vllm:num_requests_waiting 4\nvllm:num_requests_running 9\nvllm:kv_cache_usage_perc 0.7\n"),
//!     (1, "vllm:num_requests_waiting 0\nvllm:num_requests_running 3\nvllm:kv_cache_usage_perc 0.2\n"),
//! ] {
//!     let scrape = read_metrics(Engine::Vllm, body.as_bytes(), now)?;
//!     pool.update_metrics(EndpointId(id), scrape.metrics)?;
//! }
//!
//! // Request path: features, pick, dispatch, first token, done.
//! let prompt = r#"[{"role":"user","content":"Tell me about KV caches."}]"#;
//! let req = RequestFeatures {
//!     prompt_block_hashes: hash_prompt("llama", None, prompt.as_bytes(), &PrefixParams::default()),
//!     ..RequestFeatures::new("llama", 12)
//! };
//! let mut picker = Picker::new(Policy::infergate(), 42);
//! let pick = picker.pick(&pool, &req, now)?;
//! assert_eq!(pick.primary, EndpointId(1));
//! assert_eq!(pool.address(pick.primary), Some("10.0.0.2:8000"));
//! let dispatch = picker.on_dispatch(&pool, pick.primary, &req, now)?;
//! picker.observe_first_token(&dispatch.ticket, now + Duration::from_millis(80));
//! drop(dispatch.guard); // when the response body ends
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod baseline;
mod clock;
pub mod config;
mod counters;
mod endpoint;
mod error;
mod extremes;
mod filter;
mod health;
mod latency;
pub mod metrics;
mod outlier;
mod picker;
mod policy;
mod pool;
pub mod prefix;
mod profile;
mod progress;
mod request;
mod scorer;
mod select;
pub mod speed;
mod view;

pub use counters::{DispatchMark, EndpointCounters, InFlightGuard, LocalLoad};
pub use endpoint::{EndpointId, EndpointSpec, LatencyTotals, LoraInfo, ScrapedMetrics};
pub use error::{ConfigError, ParseError, PickError, PoolError};
pub use filter::Filter;
pub use health::{slow_start_weight, AttemptOutcome, Health, OutlierPolicy, SLOW_START_FLOOR};
/// The house's one seeded generator, re-exported where the picker's callers have always found it.
pub use infergate_rng::SplitMix64;
pub use latency::{LatencyEstimate, LatencyModel, LatencyParams, TtftFeatures};
pub use picker::{Dispatch, Explanation, Pick, Picker, ScoredEndpoint, TtftTicket};
pub use policy::{Policy, SglangParams};
pub use pool::Pool;
pub use profile::{
    weighted, Profile, WeightedScorer, DEFAULT_FALLBACKS, DEFAULT_LATENCY_TOLERANCE_S,
    DEFAULT_MAX_METRICS_AGE,
};
pub use progress::Progress;
pub use request::RequestFeatures;
pub use scorer::{
    kv_headroom_score, load_aware_score, lora_affinity_score, min_max_scores, prefix_score,
    share_scores, Scorer,
};
pub use select::{Selection, TieBreak};
pub use view::{EndpointView, Exclusion, PoolView};
