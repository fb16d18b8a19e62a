//! Flow control for one model pool, as pure decisions: no I/O, no async runtime, no clock and no
//! random source of its own, so the live gateway, the Envoy adapter and the virtual-time
//! benchmark run the very same code.
//!
//! | piece | file | what |
//! |---|---|---|
//! | detector | [`saturation`] | endpoint loads → [`PoolState`]; each band's [`ceiling`] |
//! | settings | [`config`] | `spec.flowControl` as plain values |
//! | queues | `fair` | per-band, per-tenant FIFOs shared by weighted fair queueing |
//! | controller | [`controller`] | admit, queue, dispatch, expire, shed: [`FlowController`] |
//! | answers | [`decision`] | [`Admission`], [`Decision`], [`Rejection`] with status and reason |
//! | drain | [`drain`] | completions per second → Retry-After |
//! | pace | [`pace`] | the servers' inter-token latency totals → each endpoint's recent decode pace |
//! | rate limits | [`limit`] | per-tenant requests/s and tokens/min against a [`limit::LimitStore`] |
//!
//! ```
//! use std::time::Duration;
//! use infergate_config::gateway::Band;
//! use infergate_flow::{Admission, Detector, EndpointLoad, FlowController, FlowRequest, Outcome};
//! # let resolved = infergate_config::gateway::load_from_str(
//! #     "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {enabled: true}\n  schedulers:\n    - {name: a, modelName: m, modelSelector: {matchLabels: {app: a}}}\n",
//! # ).unwrap().resolve().unwrap();
//!
//! let mut flow = FlowController::new(infergate_flow::FlowConfig::from_resolved(&resolved.flow_control));
//! let detector = Detector::from_resolved(&resolved.flow_control);
//! let t = Duration::from_secs(1);
//! // One endpoint with 5 waiting requests: saturation 1, the Standard ceiling.
//! let busy = EndpointLoad {
//!     waiting: Some(5.0),
//!     kv_usage: Some(0.1),
//!     running: None,
//!     adapter_bound: false,
//!     inter_token_latency: None,
//!     age: Duration::ZERO,
//! };
//! flow.observe(detector.observe([busy]), t);
//! let req = |id, band| FlowRequest { id, band, tenant: Some("team-a".into()), bytes: 100 };
//! assert!(matches!(flow.enqueue(req(1, Band::Standard), t), Ok(Admission::Queued { .. })));
//! assert!(matches!(flow.enqueue(req(2, Band::Sheddable), t), Ok(Admission::Rejected(_))));
//! assert_eq!(flow.enqueue(req(3, Band::Critical), t), Ok(Admission::DispatchNow));
//! // The Critical request and one that was already running finish: the pool is now below
//! // the Standard ceiling, and the queued request goes.
//! flow.on_complete(t);
//! flow.on_complete(t);
//! let decided = flow.poll(t);
//! assert_eq!((decided[0].id, decided[0].outcome), (1, Outcome::Dispatch));
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod controller;
pub mod decision;
pub mod drain;
mod fair;
pub mod limit;
pub mod pace;
pub mod saturation;

pub use config::{band_index, BandLimits, FlowConfig, Overload};
pub use controller::{FlowController, FlowError, FlowRequest, QueueLength};
pub use decision::{Admission, Decision, DropReason, Outcome, Rejection, RequestId};
pub use drain::DrainRate;
pub use pace::RecentPace;
pub use saturation::{ceiling, Detector, EndpointLoad, PoolState};
