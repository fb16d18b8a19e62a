//! Admit: flow control decides whether the request goes on now, waits in its band's fair
//! queue (behind higher bands, taking turns with other tenants), or is refused — Sheddable at
//! saturation and full queues with 429, a queue TTL run out with 503, each with
//! `x-llm-d-request-dropped-reason`. The queue and its driver are the pool's
//! ([`infergate_control::admission::Admission`]); what is decided here is what a request asks
//! with.

use infergate_api_error::ApiError;
use infergate_control::admission::{Admitted, Ask};

use crate::Prepared;

/// What flow control reads from a prepared request: its band, tenant and size.
pub fn ask(prepared: &Prepared) -> Ask {
    Ask {
        band: prepared.band,
        tenant: prepared.features.tenant.clone(),
        bytes: prepared.bytes,
    }
}

/// Asks the request's pool without waiting: it goes on now ([`Admitted::Now`]), is queued
/// ([`Admitted::Queued`], whose `wait` the front awaits its own way), or is refused. Must run
/// inside a tokio runtime (the first queued request starts the pool's driver).
pub fn admit(prepared: &Prepared) -> Result<Admitted, ApiError> {
    prepared.target.pool.admission().enqueue(ask(prepared))
}
