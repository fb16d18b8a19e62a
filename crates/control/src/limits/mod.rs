//! Rate limits on the request path (`spec.rateLimits`): right after auth names the tenant and
//! before flow control, a request is charged 1 request and its estimated tokens; over a limit
//! it gets 429 with `Retry-After` and `x-llm-d-request-dropped-reason: rejected-rate-limited`.
//! Once its response's `usage` is known, the reservation is settled with the real tokens.
//!
//! The decisions are [`infergate_flow::limit`]'s; this module brings the store — local, or
//! Redis shared by every replica ([`redis`], over the small RESP client in [`resp`]) — the
//! clock, the metrics, and the fail-open or fail-closed answer when Redis cannot be asked.
//!
//! Settling, by how the request ended:
//! - the response carried `usage`: the tenant is charged the difference from the estimate,
//!   or refunded it;
//! - no model server answered (refused by flow control, no endpoint, every attempt failed), or
//!   one answered with an error status and no usage: the tokens are refunded;
//! - a successful answer without usage (a stream without `include_usage`, a client that left):
//!   the estimate stands, the best guess there is.
//!
//! The request counted against requests per second is never refunded: it was made.

pub mod redis;
pub mod resp;
pub mod target;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::{
    RateLimitStore, ResolvedGateway, ResolvedRateLimits, StoreFailure,
};
use infergate_flow::limit::{
    Bucket, Charge, LimitKind, LimitStore, LocalStore, RateLimiter, Reservation, Taken, Verdict,
};

use crate::clock::Clock;
use crate::error::GatewayError;
use infergate_api_error::ApiError;
use infergate_telemetry::metrics::{Metrics, RateLimitLabels, StoreErrorLabels};
use redis::{RedisError, RedisStore};

/// Where bucket levels live.
#[derive(Debug)]
pub enum Store {
    /// In this process.
    Local(LocalStore),
    /// In Redis, shared by every gateway pointed at it.
    Redis(RedisStore),
}

impl Store {
    /// The store `limits` asks for. Redis is connected to on first use.
    pub fn for_config(limits: &ResolvedRateLimits) -> Result<Self, GatewayError> {
        match &limits.store.value {
            RateLimitStore::Local => Ok(Store::Local(LocalStore::default())),
            RateLimitStore::Redis { url } => RedisStore::new(url, limits.store_timeout.value)
                .map(Store::Redis)
                .map_err(|e| GatewayError::unsupported("spec.rateLimits.store", e)),
        }
    }

    /// Whether this store is the one `limits` asks for, so a reload keeps it (with its levels
    /// or its connections).
    fn serves(&self, limits: &ResolvedRateLimits) -> bool {
        match (self, &limits.store.value) {
            (Store::Local(_), RateLimitStore::Local) => true,
            (Store::Redis(r), RateLimitStore::Redis { url }) => {
                redis::Target::parse(url).is_ok_and(|t| t == *r.target())
                    && r.timeout() == limits.store_timeout.value
            }
            _ => false,
        }
    }
}

impl LimitStore for Store {
    type Error = RedisError;

    async fn take(
        &self,
        tenant: &str,
        charges: &[Charge],
        now: Duration,
    ) -> Result<Taken, RedisError> {
        match self {
            Store::Local(s) => Ok(s.take_now(tenant, charges, now)),
            Store::Redis(r) => r.take_at(tenant, charges, None).await,
        }
    }

    async fn adjust(
        &self,
        tenant: &str,
        kind: LimitKind,
        bucket: Bucket,
        delta: i64,
        now: Duration,
    ) -> Result<(), RedisError> {
        match self {
            Store::Local(s) => {
                s.adjust_now(tenant, kind, bucket, delta, now);
                Ok(())
            }
            Store::Redis(r) => r.adjust_at(tenant, kind, bucket, delta, None).await,
        }
    }
}

/// A store and whether its last call failed, kept together across reloads so that an outage
/// is logged when it starts and when it ends, not once per request.
#[derive(Debug)]
struct Counters {
    store: Store,
    failing: AtomicBool,
}

/// `spec.rateLimits` at run time.
#[derive(Debug)]
pub struct RateLimits {
    limiter: RateLimiter,
    counters: Arc<Counters>,
    fail: StoreFailure,
    clock: Clock,
    metrics: Arc<Metrics>,
}

impl RateLimits {
    /// The rate limits of `config` (`None` without `spec.rateLimits`). The store of `previous`
    /// (a reload) is kept when the config asks for the same one, so levels and connections
    /// survive a reload that only changes limits.
    pub fn for_config(
        config: &ResolvedGateway,
        previous: Option<&RateLimits>,
        clock: Clock,
        metrics: &Arc<Metrics>,
    ) -> Result<Option<Arc<Self>>, GatewayError> {
        Self::for_limits(config.rate_limits.as_ref(), previous, clock, metrics)
    }

    /// [`Self::for_config`] from the `rateLimits` section alone (the global tier's config has
    /// one of the same shape).
    pub fn for_limits(
        limits: Option<&ResolvedRateLimits>,
        previous: Option<&RateLimits>,
        clock: Clock,
        metrics: &Arc<Metrics>,
    ) -> Result<Option<Arc<Self>>, GatewayError> {
        let Some(limits) = limits else {
            return Ok(None);
        };
        let limiter = RateLimiter::from_resolved(limits)
            .map_err(|e| GatewayError::unsupported("spec.rateLimits", e.to_string()))?;
        let counters = match previous {
            Some(p) if p.counters.store.serves(limits) => Arc::clone(&p.counters),
            _ => {
                let store = Store::for_config(limits)?;
                if let Store::Redis(r) = &store {
                    tracing::info!(store = %r.target(), timeout = ?r.timeout(), "rate limits shared through Redis");
                }
                Arc::new(Counters {
                    store,
                    failing: AtomicBool::new(false),
                })
            }
        };
        Ok(Some(Arc::new(Self {
            limiter,
            counters,
            fail: limits.on_store_error.value,
            clock,
            metrics: Arc::clone(metrics),
        })))
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.counters.store
    }

    /// Checks that a shared store answers, logging the outcome (start-up calls it off the
    /// request path, so an unreachable Redis is reported before the first request).
    pub async fn probe(&self) {
        if let Store::Redis(r) = &self.counters.store {
            match r.ping().await {
                Ok(()) => tracing::info!(store = %r.target(), "Redis answers"),
                Err(e) => self.failed(&e),
            }
        }
    }

    /// Charges a request of `tenant` — `prompt_tokens` estimated, at most `max_tokens`
    /// generated — to its limits. `Ok(None)`: no limit applies, or the store failed and the
    /// gateway fails open; the request goes on uncounted.
    pub async fn admit(
        self: &Arc<Self>,
        tenant: Option<&str>,
        prompt_tokens: u64,
        max_tokens: Option<u64>,
    ) -> Result<Option<LimitTicket>, ApiError> {
        let tokens = self.limiter.estimate(prompt_tokens, max_tokens);
        let verdict = self
            .limiter
            .admit(&self.counters.store, tenant, tokens, self.clock.now())
            .await;
        if let Some(outcome) = verdict.outcome() {
            self.metrics
                .rate_limit_decisions
                .get_or_create(&RateLimitLabels {
                    tenant: self.limiter.label(tenant).to_owned(),
                    outcome: outcome.to_owned(),
                })
                .inc();
        }
        if let Store::Local(local) = &self.counters.store {
            self.metrics
                .rate_limit_tenants
                .set(i64::try_from(local.len()).unwrap_or(i64::MAX));
        }
        match verdict {
            Verdict::Unlimited => Ok(None),
            Verdict::Admitted(reservation) => {
                self.answered();
                Ok(Some(LimitTicket {
                    reservation: Some(reservation),
                    limits: Arc::clone(self),
                }))
            }
            Verdict::Limited(limited) => {
                self.answered();
                Err(ApiError::rate_limited(tenant, &limited, tokens))
            }
            Verdict::FailedOpen(e) => {
                self.failed(&e);
                Ok(None)
            }
            Verdict::FailedClosed(e) => {
                self.failed(&e);
                Err(ApiError::limit_unavailable())
            }
        }
    }

    /// The store answered: if it was failing, say it recovered.
    fn answered(&self) {
        if self.counters.failing.swap(false, Ordering::Relaxed) {
            tracing::info!("rate-limit store answers again: limits are enforced");
        }
    }

    /// The store failed: count it, and say so when it starts failing.
    fn failed(&self, e: &RedisError) {
        self.metrics
            .rate_limit_store_errors
            .get_or_create(&StoreErrorLabels {
                reason: e.reason().to_owned(),
            })
            .inc();
        if !self.counters.failing.swap(true, Ordering::Relaxed) {
            match self.fail {
                StoreFailure::FailOpen => tracing::error!(error = %e,
                    "rate-limit store failed: admitting requests without limits until it answers (onStoreError: failOpen)"),
                StoreFailure::FailClosed => tracing::error!(error = %e,
                    "rate-limit store failed: refusing limited requests with 503 until it answers (onStoreError: failClosed)"),
            }
        }
    }

    /// Settles `reservation` with `used` tokens: at once on the local store, in the
    /// background on Redis (the response is already on its way to the client).
    fn settle(&self, reservation: &Reservation, used: u64) {
        let Some((kind, bucket, delta)) = reservation.settlement(used) else {
            return;
        };
        let now = self.clock.now();
        let redis = match &self.counters.store {
            Store::Local(local) => {
                local.adjust_now(reservation.tenant(), kind, bucket, delta, now);
                return;
            }
            Store::Redis(_) => Arc::clone(&self.counters),
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let tenant = reservation.tenant().to_owned();
        let metrics = Arc::clone(&self.metrics);
        runtime.spawn(async move {
            if let Err(e) = redis.store.adjust(&tenant, kind, bucket, delta, now).await {
                metrics
                    .rate_limit_store_errors
                    .get_or_create(&StoreErrorLabels {
                        reason: e.reason().to_owned(),
                    })
                    .inc();
                tracing::debug!(error = %e, "a token reservation could not be settled");
            }
        });
    }
}

/// An admitted request's reservation. Hand it to the response's accounting, which calls
/// [`LimitTicket::finish`]; dropped before that, the request never reached a model server and
/// its tokens are refunded.
#[derive(Debug)]
pub struct LimitTicket {
    reservation: Option<Reservation>,
    limits: Arc<RateLimits>,
}

impl LimitTicket {
    /// The response ended: `used` tokens from its `usage` if it had one; `failed` when the
    /// model server answered with an error status.
    pub fn finish(mut self, used: Option<u64>, failed: bool) {
        let Some(r) = self.reservation.take() else {
            return;
        };
        match (used, failed) {
            (Some(used), _) => self.limits.settle(&r, used),
            (None, true) => self.limits.settle(&r, 0),
            // A success without usage: the estimate stands.
            (None, false) => {}
        }
    }
}

impl Drop for LimitTicket {
    fn drop(&mut self) {
        if let Some(r) = self.reservation.take() {
            self.limits.settle(&r, 0);
        }
    }
}

#[cfg(test)]
mod tests;
