//! infergate's HTTP front: its own listener in front of many model pools, running the shared
//! request pipeline (`infergate-pipeline`) over the shared control plane
//! (`infergate-control`), and proxying each request to the endpoint picked for it.
//!
//! What is here is only what an HTTP front does itself; which file runs which step of the
//! pipeline is mapped in `docs/architecture.md` ("The HTTP front"):
//!
//! | concern | file |
//! |---|---|
//! | HTTP/1.1 and h2 (h2c in the clear) on one port; TLS; graceful drain | [`server`] |
//! | connections bounded in number and in time | [`connections`] |
//! | the body read once, bounded (413, 503 over the budget, 408); errors and answers | [`body`] |
//! | `/v1` routes, and the pipeline's steps called in order | [`service`] |
//! | forward, retry before the first byte, stream the answer through | [`proxy`] |
//!
//! ```no_run
//! # async fn run() -> Result<(), infergate_control::GatewayError> {
//! use infergate_control::load_config;
//! use infergate_gateway::{Gateway, GatewayOptions};
//!
//! let config = load_config("gateway.yaml".as_ref())?;
//! let gateway = Gateway::bind(config, GatewayOptions::default()).await?;
//! println!("listening on {}", gateway.local_addr());
//! gateway.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod body;
pub mod connections;
mod gateway;
pub mod proxy;
pub mod server;
pub mod service;

pub use gateway::{Front, Gateway, GatewayOptions};
