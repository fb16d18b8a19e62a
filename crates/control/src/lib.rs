//! infergate's control plane, shared by both fronts (`serve` and `extproc`): everything that
//! keeps the state a request reads up to date, and nothing that handles a request itself (that
//! is `infergate-pipeline`).
//!
//! | concern | module |
//! |---|---|
//! | config files: read, validate, refuse what is not honoured | [`load`] |
//! | discovery: which endpoints each pool has (the static list; Kubernetes next) | [`discovery`] |
//! | a pool at run time: its snapshot, swapped whole; its picker; its flow control | [`pool`], [`admission`] |
//! | the routing table of one config: model → pool, canary rules | [`routes`] |
//! | metrics scraping: every endpoint polled, each round swapped into its pool | [`scrape`] |
//! | tenants' rate-limit state, local or shared through Redis | [`limits`] |
//! | JWT signing keys, loaded and refreshed | [`keys`] |
//! | the listeners' certificates | [`tls`] |
//! | the plane itself: start, reload (file watch, SIGHUP), readiness | [`plane`] |
//! | `/metrics`, `/healthz`, `/readyz` on a thread of their own | [`admin`] |
//! | the member status document a global tier pulls (`/status/member`) | [`member_status`] |
//! | each pool's recent requests (error rate, P99 TTFT), fed by both fronts | [`recent`] |
//!
//! Requests read what this crate keeps with one atomic load per request and never wait on
//! it. Services a request may wait on (the flow-control queue, the rate-limit store, a key
//! reload) refuse with an [`infergate_api_error::ApiError`], the client's answer. The map of
//! the whole house is `docs/architecture.md`.

#![forbid(unsafe_code)]

pub mod admin;
mod admin_page;
pub mod admission;
pub mod clock;
pub mod discovery;
mod error;
mod fleet_view;
pub mod keys;
pub mod limits;
pub mod load;
pub mod member_status;
pub mod plane;
pub mod policy;
pub mod pool;
pub mod recent;
pub mod routes;
pub mod scrape;
mod shared;
pub mod tls;

pub use clock::Clock;
pub use error::{error_chain, GatewayError};
pub use load::{check_supported, load_config};
pub use plane::{Plane, PlaneHandle, PlaneOptions};
pub use scrape::ScrapeSettings;
