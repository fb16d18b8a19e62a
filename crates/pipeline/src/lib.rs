//! infergate's request pipeline: what is done to one inference request, written once and
//! called by both fronts (`infergate-gateway`'s HTTP listener and `infergate-extproc`'s Envoy
//! endpoint picker), so both make the same decision for the same request.
//!
//! The steps, in the order a request meets them (`docs/architecture.md` draws both fronts'
//! way through them):
//!
//! | step | module | what |
//! |---|---|---|
//! | auth | [`auth`] | the bearer token checked before the body is read (401/403/503) |
//! | parse | [`parse`] | model, stream flag, prompt bytes, max tokens (400) |
//! | rewrite | [`rewrite`] | the canary's choice written into the body; the answer renamed back |
//! | route | [`route`] | model → adapter → base model → pool (404) |
//! | identity | [`identity`] | tenant and priority band, from the token's claims or headers; the band forwarded |
//! | features | [`features`] | the request as the picker sees it: prefix hashes, token estimate |
//! | limit | [`limit`] | the tenant's requests/s and tokens/min (429 + Retry-After) |
//! | admit | [`admit`] | flow control: go, wait in the band's fair queue, or 429/503 |
//! | pick | [`pick`] | primary and ordered fallbacks on the pool as it is now (503) |
//! | account | [`account`] | in-flight guard, TTFT, usage, rate-limit settling, capture |
//!
//! [`prepare`] runs parse → features as one call; limit, admit and pick may wait and are
//! called one by one, so each front can wait its own way (the HTTP front awaits; the ext_proc
//! front polls them beside Envoy's messages). Every failure is an [`ApiError`] that knows its
//! status and its OpenAI-shaped body.

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
pub mod rewrite;
pub mod route;

pub use infergate_api_error::{ApiError, DROPPED_REASON, NO_MATCHING_MODEL};
pub use prepare::{prepare, Inbound, Prepared};

/// The error a streamed body can end with (the connection is then aborted).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
