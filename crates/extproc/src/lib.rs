//! infergate as Envoy's endpoint picker: a gRPC `ext_proc` server implementing the Gateway API
//! Inference Extension's endpoint-picker protocol over the same control plane
//! (`infergate-control`) and request pipeline (`infergate-pipeline`) as the HTTP front — the
//! same routes, pools, scrapers, steps, accounting and `/metrics`.
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
//! What is here is only what the Envoy front does itself; which file runs which step of the
//! pipeline is mapped in `docs/architecture.md` ("The Envoy front"):
//!
//! | concern | file |
//! |---|---|
//! | wire: keys, header/metadata answers, ≤ 62,000-byte chunks, immediate responses | [`protocol`], [`metadata`] |
//! | one stream's state machine; the gRPC service that drives it | [`exchange`], [`service`] |
//! | Envoy's subset hint; the pick as a destination list | [`destination`], [`subset`] |
//! | the pipeline's steps that may wait, polled beside Envoy's messages | [`wait`] |
//! | the answer's way back: served endpoint, accounting, model renamed back | [`answer`] |
//! | listeners, TLS, gRPC health, drain | [`server`], [`health`] |
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
pub mod destination;
mod error;
pub mod exchange;
pub mod health;
pub mod metadata;
pub mod processor;
pub mod protocol;
pub mod server;
pub mod service;
pub mod subset;
pub mod wait;

pub use error::ExtProcError;
pub use server::{check_extproc, ExtProc, ExtProcOptions, DEFAULT_LISTEN};
