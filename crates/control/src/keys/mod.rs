//! JWT signing keys and the verifier that uses them: the control plane's half of auth.
//!
//! The decisions are [`infergate_auth`]'s (pure); this module brings the keys ([`KeyStore`],
//! fetched and refreshed off the request path) and the wall clock. The pipeline's auth step
//! (`infergate_pipeline::auth`) calls [`Auth::verify`], which answers 401, 403 or 503 as
//! an [`ApiError`].
//!
//! Tokens never reach a log: refusals carry no part of the token and nothing here logs a
//! header.

mod fetch;
mod store;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use infergate_api_error::ApiError;
use infergate_auth::{bearer, Refusal, Verified, Verifier};
use infergate_config::gateway::{JwtProvider, ResolvedGateway};
use infergate_telemetry::metrics::{AuthLabels, Metrics};

use crate::error::GatewayError;
pub use fetch::{client_tls, native_tls, MAX_JWKS_BYTES};
pub use store::{JwksRefresh, KeySource, KeyStore};

/// How long start-up waits for a JWKS URL's first answer before serving without keys (every
/// token then gets 503 until a load succeeds).
pub const FIRST_LOAD_WAIT: Duration = Duration::from_secs(5);

/// A provider's verifier and its keys.
#[derive(Debug)]
pub struct Auth {
    verifier: Verifier,
    keys: Arc<KeyStore>,
    metrics: Arc<Metrics>,
}

impl Auth {
    /// Builds the auth of `provider`. The key store of `previous` (a reload) is kept when the
    /// key source is the same, so a reload that changes audiences or claims does not refetch
    /// keys; a new source starts a new store and the old one stops with the old config.
    pub fn build(
        provider: &JwtProvider,
        config_dir: Option<&Path>,
        previous: Option<&Auth>,
        refresh: JwksRefresh,
        metrics: &Arc<Metrics>,
    ) -> Result<Self, GatewayError> {
        let source = KeySource::of(provider, config_dir)?;
        let keys = match previous {
            Some(p) if *p.keys.source() == source => Arc::clone(&p.keys),
            _ => Arc::new(KeyStore::start(source, refresh, Arc::clone(metrics), None)?),
        };
        Ok(Self::with_keys(Verifier::new(provider), keys, metrics))
    }

    /// The auth of `config` (`None` without `spec.auth`), reusing `previous`'s keys where it
    /// can ([`Auth::build`]).
    pub fn for_config(
        config: &ResolvedGateway,
        config_dir: Option<&Path>,
        previous: Option<&Auth>,
        refresh: JwksRefresh,
        metrics: &Arc<Metrics>,
    ) -> Result<Option<Arc<Self>>, GatewayError> {
        config
            .auth
            .as_ref()
            .map(|p| Self::build(p, config_dir, previous, refresh, metrics).map(Arc::new))
            .transpose()
    }

    /// An auth over an existing key store.
    pub fn with_keys(verifier: Verifier, keys: Arc<KeyStore>, metrics: &Arc<Metrics>) -> Self {
        Self {
            verifier,
            keys,
            metrics: Arc::clone(metrics),
        }
    }

    /// The key store.
    pub fn keys(&self) -> &KeyStore {
        &self.keys
    }

    /// Verifies the request's bearer token. A `kid` the key set lacks (or no key set yet)
    /// waits for a fresh load, rate-limited, then is checked once more.
    pub async fn verify(&self, headers: &HeaderMap) -> Result<Verified, ApiError> {
        let values: Vec<&[u8]> = headers
            .get_all(AUTHORIZATION)
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        let token = bearer(&values).map_err(|r| self.refuse(&r))?;
        let check = |keys: Option<Arc<infergate_auth::KeySet>>| {
            keys.map(|k| self.verifier.verify(token, &k, unix_now()))
        };
        match check(self.keys.current()) {
            Some(Ok(v)) => return Ok(v),
            Some(Err(r)) if !r.is_unknown_kid() => return Err(self.refuse(&r)),
            _ => {}
        }
        // The issuer may have rotated its keys since the last load.
        self.keys.reload_for_unknown_kid().await;
        match check(self.keys.current()) {
            Some(Ok(v)) => Ok(v),
            Some(Err(r)) => Err(self.refuse(&r)),
            None => {
                self.count("keys_unavailable");
                Err(ApiError::keys_unavailable())
            }
        }
    }

    fn refuse(&self, r: &Refusal) -> ApiError {
        self.count(r.error_code().unwrap_or("missing_token"));
        ApiError::refused(r, self.verifier.realm())
    }

    fn count(&self, code: &str) {
        self.metrics
            .auth_refusals
            .get_or_create(&AuthLabels {
                code: code.to_owned(),
            })
            .inc();
    }
}

/// Seconds since the Unix epoch by the wall clock (`exp` and `nbf` are wall-clock times, so
/// the gateway's monotonic clock will not do); a clock set before 1970 reads as 0.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
