//! Tests with keys generated here (RSA 2048, P-256 and Ed25519, from the test-support crate)
//! and tokens minted over them.

mod algorithms;
mod claims;
mod confusion;
mod keys;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use infergate_config::gateway::{ClaimValueType, JwtProvider, RequiredClaim};
pub(crate) use infergate_test_support::jwt::{b64, Key};
use serde_json::{json, Value};

use crate::{KeySet, Verifier};

/// The wall clock every test runs at.
const NOW: u64 = 1_750_000_000;
const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "infergate";

/// A key set of the given JWKs.
pub(crate) fn set(jwks: &[Value]) -> KeySet {
    KeySet::parse(json!({"keys": jwks}).to_string().as_bytes()).unwrap()
}

/// Claims that pass the default policy at [`NOW`].
pub(crate) fn claims() -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW + 600, "iat": NOW - 10})
}

/// `claims()` with `key` set to `value` (or removed, for `Value::Null`).
pub(crate) fn claims_with(key: &str, value: Value) -> Value {
    let mut c = claims();
    if value.is_null() {
        c.as_object_mut().unwrap().remove(key);
    } else {
        c[key] = value;
    }
    c
}

pub(crate) fn provider(required: &[(&str, ClaimValueType, &[&str])]) -> JwtProvider {
    JwtProvider {
        name: "idp".into(),
        issuer: ISSUER.into(),
        remote_jwks: None,
        local_jwks: None,
        audiences: vec!["other".into(), AUDIENCE.into()],
        required_claims: required
            .iter()
            .map(|(name, kind, values)| RequiredClaim {
                name: (*name).into(),
                value_type: *kind,
                values: values.iter().map(|v| (*v).to_owned()).collect(),
            })
            .collect(),
    }
}

pub(crate) fn verifier() -> Verifier {
    Verifier::new(&provider(&[]))
}
