//! infergate as Envoy's endpoint picker: a gRPC `ext_proc` server implementing the Gateway API
//! Inference Extension's endpoint-picker protocol over the standalone gateway's data plane —
//! the same routes, pools, scrapers, features, admission, picker, accounting and `/metrics`.
//!
//! Envoy owns the listener and the upstream connections. For each request it opens one
//! `Process` stream, sends the headers and (in `FULL_DUPLEX_STREAMED` mode) the body; infergate
//! buffers the body, decides, and answers the headers with the destination endpoints — the
//! `x-gateway-destination-endpoint` header and the same value under `envoy.lb` metadata,
//! primary then ordered fallbacks — clearing the route cache, then streams the body back. With
//! body-based routing on it also sets `X-Gateway-Model-Name` and `X-Gateway-Base-Model-Name`,
//! so Envoy's routes can send each model to its pool's cluster. On the way back it learns which
//! endpoint served (Envoy's override-host policy reports it) and accounts for the response
//! until its last chunk.
//!
//! | step | file | what |
//! |---|---|---|
//! | wire | [`protocol`], [`metadata`] | keys, header/metadata answers, ≤ 62,000-byte chunks, immediate responses |
//! | stream | [`exchange`], [`service`] | one stream's state machine; the gRPC service that drives it |
//! | decide | [`decide`], [`subset`] | parse → rewrite → route → identity → features → subset → pick |
//! | wait | [`wait`] | the steps that may wait: token check, rate limits, flow-control queue |
//! | account | [`answer`] | served endpoint, in-flight guard, TTFT, usage, rate-limit settling, model renamed back |
//! | serve | [`server`], [`health`] | listeners, TLS, gRPC health, drain |
//!
//! ```no_run
//! # async fn run() -> Result<(), infergate_extproc::ExtProcError> {
//! use infergate_extproc::{ExtProc, ExtProcOptions};
//!
//! let config = infergate_control::load_config("gateway.yaml".as_ref())?;
//! let server = ExtProc::bind(config, ExtProcOptions::default()).await?;
//! println!("ext_proc on {}", server.local_addr());
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod answer;
pub mod decide;
mod error;
pub mod exchange;
pub mod health;
pub mod metadata;
pub mod protocol;
pub mod server;
pub mod service;
pub mod subset;
pub mod wait;

pub use error::ExtProcError;
pub use server::{check_extproc, ExtProc, ExtProcOptions, DEFAULT_LISTEN};
