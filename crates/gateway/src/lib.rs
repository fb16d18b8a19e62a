//! infergate's standalone gateway: one OpenAI-compatible endpoint in front of many model pools.
//!
//! A request's way through, one file per step:
//!
//! | step | file | what |
//! |---|---|---|
//! | listen | [`server`], [`tls`] | HTTP/1.1 and h2 (h2c in the clear) on one port; TLS; graceful drain |
//! | parse | [`parse`] | the body read once, bounded (413); model, stream flag, prompt bytes |
//! | rewrite | [`rewrite`] | canary split of the model name (weighted, exact match, sticky sessions); the answer renamed back |
//! | route | [`route`] | model → adapter → base model → pool (404 otherwise) |
//! | auth | [`auth`] | JWT bearer token on every `/v1` route (401/403); tenant and band from its claims |
//! | features | [`features`] | prefix hashes, token estimate, band and tenant |
//! | limit | [`ratelimit`] | the tenant's requests/s and tokens/min, local or shared through Redis: 429 + Retry-After over a limit |
//! | admit | [`admission`] | flow control: go, wait in the band's fair queue, or 429/503 with the dropped reason |
//! | pick | [`pool`] | the pool's picker: primary and fallbacks, dispatch |
//! | proxy | [`proxy`] | forward, retry before the first byte, stream the answer through |
//! | account | [`account`], [`usage`], [`capture`] | in-flight guard, TTFT, usage, metrics, the optional trace capture |
//!
//! Off the request path: [`scrape`] (metrics scrapers swapping pool snapshots in), [`admin`]
//! (`/metrics`, `/healthz`, `/readyz` on its own thread) and reloads through
//! [`GatewayHandle::reload`].
//!
//! ```no_run
//! # async fn run() -> Result<(), infergate_gateway::GatewayError> {
//! use infergate_gateway::{load_config, Gateway, GatewayOptions};
//!
//! let config = load_config("gateway.yaml".as_ref())?;
//! let gateway = Gateway::bind(config, GatewayOptions::default()).await?;
//! println!("listening on {}", gateway.local_addr());
//! gateway.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod account;
pub mod admin;
pub mod admission;
pub mod api_error;
pub mod auth;
pub mod body;
pub mod capture;
pub mod clock;
mod error;
pub mod features;
mod gateway;
pub mod metrics;
pub mod parse;
pub mod policy;
pub mod pool;
pub mod proxy;
pub mod ratelimit;
pub mod rewrite;
pub mod route;
pub mod scrape;
pub mod server;
pub mod service;
pub mod tls;
pub mod usage;

pub use api_error::{ApiError, NO_MATCHING_MODEL};
pub use error::GatewayError;
pub use gateway::{
    check_supported, load_config, Gateway, GatewayHandle, GatewayOptions, Plane, Shared,
};
pub use scrape::ScrapeSettings;
