//! The claims checks (RFC 7519 §4.1 and the provider's `requiredClaims`), on a payload whose
//! signature is already verified.

use std::collections::HashSet;

use infergate_config::gateway::{ClaimValueType, RequiredClaim};
use serde_json::{Map, Value};

use crate::Refusal;

/// A claim the token must carry, with its accepted values precomputed.
#[derive(Debug, Clone)]
pub(crate) struct Requirement {
    name: String,
    kind: ClaimValueType,
    values: HashSet<String>,
}

impl Requirement {
    pub(crate) fn new(c: &RequiredClaim) -> Requirement {
        Requirement {
            name: c.name.clone(),
            kind: c.value_type,
            values: c.values.iter().cloned().collect(),
        }
    }

    /// Default-deny: the claim must exist and (String) be a string equal to one of the
    /// values, or (StringArray) be an array with a string element equal to one of them. A
    /// claim of another JSON type matches nothing.
    pub(crate) fn check(&self, claims: &Map<String, Value>) -> Result<(), Refusal> {
        let Some(v) = claims.get(&self.name) else {
            return Err(Refusal::ClaimMissing(self.name.clone()));
        };
        let ok = match (self.kind, v) {
            (ClaimValueType::String, Value::String(s)) => self.values.contains(s),
            (ClaimValueType::StringArray, Value::Array(items)) => items
                .iter()
                .any(|i| i.as_str().is_some_and(|s| self.values.contains(s))),
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(Refusal::ClaimNotAllowed(self.name.clone()))
        }
    }
}

/// `exp` (required) and `nbf` (optional) against `now`, both with `leeway` seconds of grace
/// for clock skew between the issuer and the gateway.
pub(crate) fn check_time(
    claims: &Map<String, Value>,
    now: u64,
    leeway: u64,
) -> Result<(), Refusal> {
    let now = i128::from(now);
    let leeway = i128::from(leeway);
    let exp = numeric_date(claims, "exp")?.ok_or(Refusal::NoExpiry)?;
    // RFC 7519 §4.1.4: the token must not be accepted on or after exp.
    if now >= exp + leeway {
        return Err(Refusal::Expired);
    }
    if let Some(nbf) = numeric_date(claims, "nbf")? {
        if now + leeway < nbf {
            return Err(Refusal::NotYetValid);
        }
    }
    Ok(())
}

/// A NumericDate: seconds since the epoch, an integer or a finite fraction (rounded down).
fn numeric_date(claims: &Map<String, Value>, name: &'static str) -> Result<Option<i128>, Refusal> {
    let Some(v) = claims.get(name) else {
        return Ok(None);
    };
    let bad = Refusal::Malformed("a time claim is not a NumericDate");
    let Value::Number(n) = v else {
        return Err(bad);
    };
    if let Some(i) = n.as_i64() {
        return Ok(Some(i128::from(i)));
    }
    if let Some(u) = n.as_u64() {
        return Ok(Some(i128::from(u)));
    }
    match n.as_f64() {
        // Beyond ±1e30 s the exact value does not matter: it is far past or far ahead.
        Some(f) if f.is_finite() => Ok(Some(f.floor().clamp(-1e30, 1e30) as i128)),
        _ => Err(bad),
    }
}

/// `iss` must be exactly the provider's issuer.
pub(crate) fn check_issuer(claims: &Map<String, Value>, issuer: &str) -> Result<(), Refusal> {
    match claims.get("iss") {
        Some(Value::String(iss)) if iss == issuer => Ok(()),
        _ => Err(Refusal::WrongIssuer),
    }
}

/// `aud` (a string or an array of strings) must name one of `audiences`; with no audiences
/// configured, `aud` is not checked (the provider then binds tokens with `requiredClaims`).
pub(crate) fn check_audience(
    claims: &Map<String, Value>,
    audiences: &[String],
) -> Result<(), Refusal> {
    if audiences.is_empty() {
        return Ok(());
    }
    let accepted = |s: &str| audiences.iter().any(|a| a == s);
    let ok = match claims.get("aud") {
        Some(Value::String(a)) => accepted(a),
        Some(Value::Array(items)) => items.iter().any(|i| i.as_str().is_some_and(accepted)),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Refusal::WrongAudience)
    }
}
