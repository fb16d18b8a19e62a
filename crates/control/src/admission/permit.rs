//! What an admission hands out: the permit an admitted request holds while in flight, and the
//! handle of a queued request.

use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::Band;
use infergate_flow::RequestId;
use tokio::sync::oneshot;

use super::{Admission, Verdict};
use infergate_api_error::ApiError;

/// Capacity held by one admitted request; dropping it tells flow control the request ended.
#[derive(Debug)]
pub struct FlowPermit {
    pub(super) admission: Arc<Admission>,
    pub(super) band: Band,
    pub(super) waited: Duration,
}

impl FlowPermit {
    /// The request's band.
    pub fn band(&self) -> Band {
        self.band
    }

    /// How long the request waited in the queue (zero when it went on at once).
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl Drop for FlowPermit {
    fn drop(&mut self) {
        self.admission.complete();
    }
}

/// The answer to [`Admission::enqueue`].
#[derive(Debug)]
pub enum Admitted {
    /// Go on now.
    Now(FlowPermit),
    /// Queued: [`Waiting::wait`] for the decision.
    Queued(Waiting),
}

/// A queued request. Dropping it before its decision takes it out of the queue.
#[derive(Debug)]
pub struct Waiting {
    pub(super) admission: Arc<Admission>,
    pub(super) id: RequestId,
    pub(super) rx: Option<oneshot::Receiver<Verdict>>,
}

impl Waiting {
    /// Waits for the decision: a permit to go on, or the refusal to answer.
    pub async fn wait(mut self) -> Result<FlowPermit, ApiError> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(ApiError::draining());
        };
        let verdict = rx.await;
        self.rx = None;
        // The sender goes only with its decision or with the whole pool (a reload that
        // dropped the controller); the latter is a pool that no longer exists.
        verdict.unwrap_or_else(|_| Err(ApiError::draining()))
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.rx.is_some() {
            self.admission.cancel(self.id);
        }
    }
}
