//! The verifier: a provider's policy applied to a token, in the order that keeps every
//! decision on checked data — shape and header, signature, then the claims.

use std::time::Duration;

use infergate_config::gateway::{Band, JwtProvider};
use serde_json::{Map, Value};

use crate::claims::{self, Requirement};
use crate::{jws, KeySet, Refusal};

/// Clock skew tolerated on `exp` and `nbf` unless told otherwise.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

/// What a provider accepts: its issuer, audiences and required claims.
#[derive(Debug, Clone)]
pub struct Verifier {
    name: String,
    issuer: String,
    audiences: Vec<String>,
    required: Vec<Requirement>,
    leeway_secs: u64,
}

impl Verifier {
    /// The policy of `provider` (`spec.auth.jwt.provider`), with [`DEFAULT_LEEWAY`].
    pub fn new(provider: &JwtProvider) -> Verifier {
        Verifier {
            name: provider.name.clone(),
            issuer: provider.issuer.clone(),
            audiences: provider.audiences.clone(),
            required: provider
                .required_claims
                .iter()
                .map(Requirement::new)
                .collect(),
            leeway_secs: DEFAULT_LEEWAY.as_secs(),
        }
    }

    /// The same policy with another leeway on `exp` and `nbf`.
    pub fn with_leeway(mut self, leeway: Duration) -> Verifier {
        self.leeway_secs = leeway.as_secs();
        self
    }

    /// The provider's name, the realm of `WWW-Authenticate`.
    pub fn realm(&self) -> &str {
        &self.name
    }

    /// Verifies `token` against `keys` at `now_unix_secs` (the caller's wall clock).
    ///
    /// Order: size, shape and header ([`Refusal::AlgNone`], [`Refusal::Hmac`] and unsupported
    /// algorithms go before any key is looked at); the signature; then `exp`/`nbf`, `iss` and
    /// `aud` (each a 401); then every required claim (a 403). No claim is read before the
    /// signature holds.
    pub fn verify(
        &self,
        token: &str,
        keys: &KeySet,
        now_unix_secs: u64,
    ) -> Result<Verified, Refusal> {
        let jws = jws::parse(token)?;
        keys.verify(&jws)?;
        let claims: Map<String, Value> = serde_json::from_slice(&jws.payload)
            .map_err(|_| Refusal::Malformed("payload is not a JSON object"))?;
        claims::check_time(&claims, now_unix_secs, self.leeway_secs)?;
        claims::check_issuer(&claims, &self.issuer)?;
        claims::check_audience(&claims, &self.audiences)?;
        for r in &self.required {
            r.check(&claims)?;
        }
        Ok(Verified { claims })
    }
}

/// The claims of a token that passed every check.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    claims: Map<String, Value>,
}

impl Verified {
    /// A top-level claim.
    pub fn claim(&self, name: &str) -> Option<&Value> {
        self.claims.get(name)
    }

    /// A tenant from claim `name`: a non-empty string, or an integer written in decimal.
    pub fn tenant(&self, name: &str) -> Option<String> {
        match self.claims.get(name)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
            _ => None,
        }
    }

    /// A band from claim `name`: a band name or an upstream priority, as a string or an
    /// integer ([`Band::from_criticality`], [`Band::from_priority`]). `None` when absent or
    /// neither, so the caller applies its default band.
    pub fn band(&self, name: &str) -> Option<Band> {
        match self.claims.get(name)? {
            Value::String(s) => Band::from_criticality(s),
            Value::Number(n) => n.as_i64().map(Band::from_priority),
            _ => None,
        }
    }
}
