//! The gateway end to end, on loopback: simulated vLLM replicas (and scripted upstreams where a
//! test needs exact bytes or load figures) behind a gateway started in-process.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod attacks;
mod auth;
mod common;
mod conformance;
mod control;
mod failures;
mod limits;
mod member_status;
mod outliers;
mod resume;
mod routing;
mod smuggling;
mod streaming;
mod timeouts;
mod tls;
mod tracing;
