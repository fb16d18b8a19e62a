//! infergate's request pipeline: what is done to one inference request, written once and
//! called by both fronts (`infergate-gateway`'s HTTP listener and `infergate-extproc`'s Envoy
//! endpoint picker), so both make the same decision for the same request.
//!
//! One module per step; their order, and which file of each front calls them, is written
//! once in `docs/architecture.md` ("A request's way through"). The modules: [`auth`],
//! [`parse`], [`rewrite`], [`route`], [`identity`], [`features`], [`limit`], [`admit`],
//! [`pick`], [`account`]; the spans of a traced request in [`trace`].
//!
//! [`prepare`] runs the steps that never wait (parse to features) as one call; limit and admit
//! may wait and are called one by one, so each front waits its own way (the HTTP front
//! awaits; the ext_proc front polls them beside Envoy's messages), then pick. Every failure is
//! an [`ApiError`] that knows its status and its OpenAI-shaped body.

#![forbid(unsafe_code)]

pub mod account;
pub mod admit;
pub mod auth;
pub mod features;
pub mod identity;
pub mod limit;
pub mod parse;
pub mod pick;
mod prepare;
pub mod resume;
pub mod rewrite;
pub mod route;
pub mod trace;

pub use infergate_api_error::{ApiError, DROPPED_REASON, NO_MATCHING_MODEL};
pub use prepare::{prepare, Inbound, Prepared};

/// The error a streamed body can end with (the connection is then aborted).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
