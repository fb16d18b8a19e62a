//! Limit: the tenant's requests per second and tokens per minute, charged before the request
//! may wait in flow control; 429 with `Retry-After` over a limit, 503 when a shared store
//! cannot be asked and the gateway fails closed. The buckets (local, or shared through Redis)
//! are the control plane's [`RateLimits`]; the reservation is settled with the answer's
//! `usage` by [`crate::account`].

use std::sync::Arc;

use infergate_api_error::ApiError;
use infergate_control::limits::{LimitTicket, RateLimits};

/// What a request is charged to its tenant's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The tenant, when the request names one.
    pub tenant: Option<String>,
    /// The prompt's estimated tokens.
    pub prompt_tokens: u64,
    /// The most tokens it may generate (`Some(0)` for embeddings, which generate none).
    pub max_tokens: Option<u64>,
}

/// Charges a request to its tenant's limits (`None`: no limits are set, no limit applies, or
/// the store failed and the gateway fails open). The future owns what it needs, so a front can
/// poll it beside other work.
pub async fn limit(
    limits: Option<Arc<RateLimits>>,
    charge: Charge,
) -> Result<Option<LimitTicket>, ApiError> {
    match limits {
        Some(limits) => {
            limits
                .admit(
                    charge.tenant.as_deref(),
                    charge.prompt_tokens,
                    charge.max_tokens,
                )
                .await
        }
        None => Ok(None),
    }
}
