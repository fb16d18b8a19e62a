//! The steps of a request that may have to wait (the pipeline's auth, limit and admit): the
//! bearer token's check (which waits for a key reload when it names an unknown `kid`), the
//! tenant's rate limits (a round trip to Redis with `store: redis://…`) and the flow-control
//! queue.
//!
//! Each step is tried at once; a step that finishes then (a known key, the local store, a pool
//! below its ceiling) costs the exchange no wait at all. Only one that cannot finish now is
//! handed, as a [`Pending`] future, to the gRPC service, which polls it next to Envoy's
//! messages and hands its outcome back ([`crate::exchange::Exchange::on_resumed`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use hyper::HeaderMap;
use infergate_auth::Verified;
use infergate_control::admission::{FlowPermit, Waiting};
use infergate_control::keys::Auth;
use infergate_control::limits::{LimitTicket, RateLimits};
use infergate_pipeline::limit::Charge;
use infergate_pipeline::{auth, limit, ApiError};

/// The outcome of a step that waited.
#[derive(Debug)]
pub enum Resumed {
    /// The bearer token was checked.
    Authenticated(Result<Verified, ApiError>),
    /// The tenant's rate limits were charged (`None`: no limit applies, or the store failed
    /// and the gateway fails open).
    Limited(Result<Option<LimitTicket>, ApiError>),
    /// Flow control let the request go on, or refused it.
    Admitted(Result<FlowPermit, ApiError>),
}

/// A step still waiting. Dropping it abandons the step (a queued request leaves its queue).
pub type Pending = Pin<Box<dyn Future<Output = Resumed> + Send>>;

/// A step tried at once.
pub enum Step<T> {
    /// It finished with this outcome.
    Done(T),
    /// It has to wait; the future's outcome is this step's, as a [`Resumed`].
    Wait(Pending),
}

impl<T: std::fmt::Debug> std::fmt::Debug for Step<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Done(r) => f.debug_tuple("Done").field(r).finish(),
            Step::Wait(_) => f.write_str("Wait(..)"),
        }
    }
}

/// Polls `step` once: its outcome if it is ready, else the future to wait on, its outcome
/// wrapped by `resumed`. A future polled here is polled again later with the service's waker,
/// so it loses no wake-up.
fn try_now<T: 'static>(
    step: impl Future<Output = T> + Send + 'static,
    resumed: fn(T) -> Resumed,
) -> Step<T> {
    let mut step = Box::pin(step);
    match (&mut step).now_or_never() {
        Some(outcome) => Step::Done(outcome),
        None => Step::Wait(Box::pin(step.map(resumed))),
    }
}

/// Checks the request's bearer token with `auth`. The future owns only the `Authorization`
/// values, never the rest of the request.
pub fn authenticate(auth: Arc<Auth>, headers: &HeaderMap) -> Step<Result<Verified, ApiError>> {
    try_now(
        auth::verify(auth, auth::credentials(headers)),
        Resumed::Authenticated,
    )
}

/// Charges a request to its tenant's rate limits.
pub fn limit(
    limits: Arc<RateLimits>,
    charge: Charge,
) -> Step<Result<Option<LimitTicket>, ApiError>> {
    try_now(limit::limit(Some(limits), charge), Resumed::Limited)
}

/// Waits for flow control's verdict on a queued request (queued, so never ready at once).
pub fn queued(waiting: Waiting) -> Pending {
    Box::pin(async move { Resumed::Admitted(waiting.wait().await) })
}
