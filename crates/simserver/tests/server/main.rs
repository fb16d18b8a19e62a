//! The simulated server over real loopback sockets: the OpenAI API, errors, LoRA, metrics,
//! faults and timing. One test binary, so the crate links once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod api;
#[allow(dead_code)] // shared with tests/realtime.rs; not every helper is used here
mod common;
mod errors;
mod faults;
mod fleet;
mod garbage;
mod lora;
mod metrics;
