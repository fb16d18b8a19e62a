//! Per-tenant rate limits (`spec.rateLimits`): requests per second and tokens per minute,
//! decided here without I/O against a [`LimitStore`] — [`LocalStore`] in this process, or a
//! store shared by gateway replicas (the gateway's Redis store).
//!
//! | piece | file | what |
//! |---|---|---|
//! | bucket | [`bucket`] | one limit in exact integer arithmetic: drain, room, settle |
//! | store | [`store`] | the [`LimitStore`] trait, all-or-nothing [`take_all`], [`LocalStore`] |
//! | limiter | here | tenant → buckets, estimate, verdict, fail open or closed |
//!
//! A request's way: [`RateLimiter::admit`] charges 1 request and its estimated tokens (prompt
//! estimate plus `max_tokens`, or `defaultMaxTokens`) to the tenant's buckets. Admitted, it
//! holds a [`Reservation`]; once the response's `usage` is known, [`Reservation::settle`]
//! charges the difference or refunds it. Refused, it gets a [`Limited`]: 429 with
//! `Retry-After` from the bucket and [`RATE_LIMITED`] as its dropped reason.
//!
//! Why a token bucket, kept as a leaky-bucket meter (GCRA's other form): one level and one
//! time per bucket, so a shared store updates it in one atomic script; it refills smoothly,
//! unlike a fixed window that admits two windows' worth across a boundary; and the wait until
//! a request fits is exact, which is the Retry-After. GCRA's usual state, a theoretical
//! arrival time, would have to be scaled by the limit to stay exact, which overflows the
//! 53-bit integers of Redis's Lua; a level relative to its own timestamp does not.
//!
//! ```
//! use std::time::Duration;
//! use infergate_flow::limit::{LocalStore, RateLimiter, Verdict};
//! # let resolved = infergate_config::gateway::load_from_str(
//! #     "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {enabled: true}\n  schedulers:\n    - {name: a, modelName: m, modelSelector: {matchLabels: {app: a}}}\n  rateLimits:\n    tenants: [{tenant: team-a, requestsPerSecond: 2, tokensPerMinute: 600}]\n",
//! # ).unwrap().resolve().unwrap();
//! # // The local store answers at once: one poll finishes any of its futures.
//! # fn now_or_never<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     match std::future::Future::poll(std::pin::pin!(f), &mut cx) {
//! #         std::task::Poll::Ready(v) => v,
//! #         std::task::Poll::Pending => unreachable!(),
//! #     }
//! # }
//! let limiter = RateLimiter::from_resolved(resolved.rate_limits.as_ref().unwrap()).unwrap();
//! let store = LocalStore::default();
//! let t = Duration::ZERO;
//! // 100 prompt tokens and max_tokens 200: 300 of the 600 tokens a minute.
//! let tokens = limiter.estimate(100, Some(200));
//! let first = now_or_never(limiter.admit(&store, Some("team-a"), tokens, t));
//! let Verdict::Admitted(reservation) = first else { panic!() };
//! // It used 50 tokens: 250 come back.
//! now_or_never(reservation.settle(&store, 50, t)).unwrap();
//! // Two requests a second: the third is refused, told to come back in a second.
//! let second = now_or_never(limiter.admit(&store, Some("team-a"), 300, t));
//! assert!(matches!(second, Verdict::Admitted(_)));
//! let third = now_or_never(limiter.admit(&store, Some("team-a"), 1, t));
//! let Verdict::Limited(limited) = third else { panic!() };
//! assert_eq!(limited.retry_after_secs(), Some(1));
//! ```

pub mod bucket;
pub mod store;

use std::collections::HashMap;
use std::time::Duration;

use infergate_config::gateway::{RateLimit, ResolvedRateLimits, StoreFailure};

pub use bucket::{Bucket, Level, Room};
pub use store::{
    millis, take_all, Charge, LimitKind, LimitStore, LocalStore, Refusal, RefusedBy, Taken,
};

/// `x-llm-d-request-dropped-reason` of a request over its tenant's limit (429).
pub const RATE_LIMITED: &str = "rejected-rate-limited";

/// `x-llm-d-request-dropped-reason` of a request refused because the shared store could not
/// be asked and the gateway fails closed (503).
pub const LIMIT_UNAVAILABLE: &str = "rejected-rate-limit-unavailable";

/// The metric label of every tenant without a limit of its own (they share the default).
pub const DEFAULT_TENANT_LABEL: &str = "*";

/// A limit the buckets cannot hold exactly (the config's validation refuses these first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.rateLimits: the limit of {tenant} is out of range ({limit})")]
pub struct LimitRangeError {
    tenant: String,
    limit: u64,
}

/// One tenant's buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantLimits {
    /// Requests per second.
    pub requests: Option<Bucket>,
    /// Tokens per minute.
    pub tokens: Option<Bucket>,
}

impl TenantLimits {
    fn from_config(l: &RateLimit, tenant: &str) -> Result<Self, LimitRangeError> {
        let bucket = |limit: Option<u64>, make: fn(u64) -> Option<Bucket>| {
            limit
                .map(|n| {
                    make(n).ok_or_else(|| LimitRangeError {
                        tenant: tenant.to_owned(),
                        limit: n,
                    })
                })
                .transpose()
        };
        Ok(TenantLimits {
            requests: bucket(l.requests_per_second.map(u64::from), Bucket::per_second)?,
            tokens: bucket(l.tokens_per_minute, Bucket::per_minute)?,
        })
    }
}

/// What [`RateLimiter::admit`] decided.
#[derive(Debug)]
pub enum Verdict<E> {
    /// No limit applies to this tenant.
    Unlimited,
    /// Within its limits; settle the reservation once the usage is known.
    Admitted(Reservation),
    /// Over a limit: 429.
    Limited(Limited),
    /// The store failed and the gateway fails open: admitted, uncounted.
    FailedOpen(E),
    /// The store failed and the gateway fails closed: 503.
    FailedClosed(E),
}

impl<E> Verdict<E> {
    /// The metric label of the outcome: `admitted`, `limited`, `failed_open` or
    /// `failed_closed`; `None` when no limit applied.
    pub fn outcome(&self) -> Option<&'static str> {
        match self {
            Verdict::Unlimited => None,
            Verdict::Admitted(_) => Some("admitted"),
            Verdict::Limited(_) => Some("limited"),
            Verdict::FailedOpen(_) => Some("failed_open"),
            Verdict::FailedClosed(_) => Some("failed_closed"),
        }
    }
}

/// A refusal over a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// What refused it.
    pub by: RefusedBy,
    /// The limit that refused it, per its period (0 for [`RefusedBy::TooManyTenants`]).
    pub limit: u64,
    /// When the same request fits with no other traffic; `None` when it never does (it asks
    /// for more tokens than a whole minute allows).
    pub wait: Option<Duration>,
}

impl Limited {
    /// `Retry-After` in whole seconds, rounded up and at least 1; `None` when no wait helps.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.wait
            .map(|w| w.as_millis().div_ceil(1000).max(1) as u64)
    }
}

/// Tokens reserved for an admitted request, to be settled with what it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    tenant: String,
    tokens: Option<(Bucket, u64)>,
}

impl Reservation {
    /// The tenant's key in the store (empty for requests naming no tenant).
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Tokens reserved, when the tenant has a tokens-per-minute limit.
    pub fn reserved_tokens(&self) -> Option<u64> {
        self.tokens.map(|(_, n)| n)
    }

    /// What settling with `used` tokens changes: the bucket and the tokens to charge (or, when
    /// negative, refund); `None` without a token limit or when nothing changes.
    pub fn settlement(&self, used: u64) -> Option<(LimitKind, Bucket, i64)> {
        let (bucket, reserved) = self.tokens?;
        let delta = i64::try_from(used)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(reserved).unwrap_or(i64::MAX));
        (delta != 0).then_some((LimitKind::Tokens, bucket, delta))
    }

    /// Charges the tenant the difference between `used` tokens and the reservation, or
    /// refunds it ([`Reservation::settlement`]).
    pub async fn settle<S: LimitStore>(
        self,
        store: &S,
        used: u64,
        now: Duration,
    ) -> Result<(), S::Error> {
        match self.settlement(used) {
            Some((kind, bucket, delta)) => {
                store.adjust(&self.tenant, kind, bucket, delta, now).await
            }
            None => Ok(()),
        }
    }
}

/// `spec.rateLimits` as decisions: which buckets a request charges, and what the store's
/// answer means for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimiter {
    default: Option<TenantLimits>,
    tenants: HashMap<String, TenantLimits>,
    on_store_error: StoreFailure,
    default_max_tokens: u64,
}

impl RateLimiter {
    /// The limiter of a resolved `spec.rateLimits`.
    pub fn from_resolved(r: &ResolvedRateLimits) -> Result<Self, LimitRangeError> {
        let default = r
            .default
            .as_ref()
            .map(|l| TenantLimits::from_config(l, "every tenant"))
            .transpose()?;
        let tenants = r
            .tenants
            .iter()
            .map(|(t, l)| Ok((t.clone(), TenantLimits::from_config(l, t)?)))
            .collect::<Result<_, LimitRangeError>>()?;
        Ok(Self {
            default,
            tenants,
            on_store_error: r.on_store_error.value,
            default_max_tokens: r.default_max_tokens.value,
        })
    }

    /// The limits of `tenant`: its own, else the default. Requests naming no tenant share one
    /// anonymous tenant under the default.
    pub fn limits_of(&self, tenant: Option<&str>) -> Option<&TenantLimits> {
        tenant
            .and_then(|t| self.tenants.get(t))
            .or(self.default.as_ref())
    }

    /// `tenant` as a metric label: its name when it has limits of its own, else
    /// [`DEFAULT_TENANT_LABEL`], so the label's values are bounded by the config.
    pub fn label<'a>(&self, tenant: Option<&'a str>) -> &'a str {
        match tenant {
            Some(t) if self.tenants.contains_key(t) => t,
            _ => DEFAULT_TENANT_LABEL,
        }
    }

    /// Whether any limit counts tokens (only then is usage worth settling).
    pub fn counts_tokens(&self) -> bool {
        self.default
            .iter()
            .chain(self.tenants.values())
            .any(|l| l.tokens.is_some())
    }

    /// A request's tokens before it runs: its prompt estimate plus its completion maximum, or
    /// `defaultMaxTokens` when it names none.
    pub fn estimate(&self, prompt_tokens: u64, max_tokens: Option<u64>) -> u64 {
        prompt_tokens.saturating_add(max_tokens.unwrap_or(self.default_max_tokens))
    }

    /// Charges a request of `tenant` estimated at `tokens` to its buckets in `store`.
    pub async fn admit<S: LimitStore>(
        &self,
        store: &S,
        tenant: Option<&str>,
        tokens: u64,
        now: Duration,
    ) -> Verdict<S::Error> {
        let Some(limits) = self.limits_of(tenant).copied() else {
            return Verdict::Unlimited;
        };
        let charges: Vec<Charge> = [
            limits.requests.map(|bucket| Charge {
                kind: LimitKind::Requests,
                bucket,
                cost: 1,
            }),
            limits.tokens.map(|bucket| Charge {
                kind: LimitKind::Tokens,
                bucket,
                cost: tokens,
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        let key = tenant.unwrap_or_default();
        match store.take(key, &charges, now).await {
            Ok(Taken::Admitted) => Verdict::Admitted(Reservation {
                tenant: key.to_owned(),
                tokens: limits.tokens.map(|b| (b, tokens)),
            }),
            Ok(Taken::Refused(r)) => Verdict::Limited(Limited {
                by: r.by,
                limit: match r.by {
                    RefusedBy::Limit(LimitKind::Requests) => limits.requests,
                    RefusedBy::Limit(LimitKind::Tokens) => limits.tokens,
                    RefusedBy::TooManyTenants => None,
                }
                .map_or(0, |b| b.limit()),
                wait: r.wait_ms.map(Duration::from_millis),
            }),
            Err(e) => match self.on_store_error {
                StoreFailure::FailOpen => Verdict::FailedOpen(e),
                StoreFailure::FailClosed => Verdict::FailedClosed(e),
            },
        }
    }
}

#[cfg(test)]
mod tests;
