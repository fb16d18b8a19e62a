//! infergate's telemetry, shared by both fronts and the control plane: the Prometheus metrics
//! the admin listener serves ([`metrics`]; the fleet as the picker sees it in [`fleet`], the
//! families under GIE's and llm-d's names in [`upstream`], bounded labels in [`cap`]), token usage read from answers on their way through
//! ([`usage`]), the trace capture of completed requests ([`capture`]), and each pool's recent
//! requests over a sliding window, for the member status document ([`recent`]).
//!
//! Nothing here decides anything: the pipeline and the control plane write what they saw, and
//! this crate only keeps it in bounded form. Where each metric is written is listed in
//! `docs/architecture.md`.

#![forbid(unsafe_code)]

pub mod cap;
pub mod capture;
pub mod catalog;
pub mod connections;
pub mod fleet;
pub mod global;
pub mod metrics;
pub mod recent;
pub mod upstream;
pub mod usage;

pub use metrics::Metrics;
