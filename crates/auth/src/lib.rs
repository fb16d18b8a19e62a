//! JWT bearer-token verification for infergate: pure decision code, no I/O and no clock.
//!
//! The caller fetches the key set (a JWKS file or URL), reads its own wall clock and hands
//! both in; this crate says whether a token is accepted and, if not, what the client is told.
//!
//! | step | file | what |
//! |---|---|---|
//! | extract | [`refusal::bearer`] | `Authorization: Bearer <token>`, exactly one header |
//! | parse | [`jws`] | three strict base64url segments, size limit, header, `alg` allow-list |
//! | keys | [`jwk`] | JWKS → public keys (RSA ≥ 2048 bits, P-256, Ed25519); `kid` selection |
//! | verify | [`verify`] | signature, then `exp`/`nbf` with leeway, `iss`, `aud`, `requiredClaims` |
//! | refuse | [`refusal`] | 401 vs 403, `WWW-Authenticate` per RFC 6750 |
//!
//! Accepted algorithms are RS256, ES256 and EdDSA (Ed25519) only. `alg: none`, every HMAC
//! algorithm (a MAC keyed with a public key proves nothing), a key of the wrong type for the
//! algorithm, and a key that states a different `alg` are refused.
//!
//! ```
//! use infergate_auth::{bearer, KeySet, Refusal, Verifier};
//! # fn provider() -> infergate_config::gateway::JwtProvider {
//! #     infergate_config::gateway::JwtProvider {
//! #         name: "idp".into(), issuer: "https://idp".into(), remote_jwks: None,
//! #         local_jwks: None, audiences: vec!["gw".into()], required_claims: vec![],
//! #     }
//! # }
//! let verifier = Verifier::new(&provider());
//! let keys = KeySet::parse(br#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1",
//!     "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#).unwrap();
//! let refused = bearer(&[]).and_then(|t| verifier.verify(t, &keys, 1_700_000_000));
//! assert_eq!(refused.unwrap_err(), Refusal::Missing);
//! ```

#![forbid(unsafe_code)]

mod claims;
pub mod jwk;
pub mod jws;
pub mod refusal;
pub mod verify;

#[cfg(test)]
mod tests;

pub use jwk::{JwksError, KeySet, Skipped, MAX_KEYS};
pub use jws::{Alg, MAX_TOKEN_BYTES};
pub use refusal::{bearer, Refusal};
pub use verify::{Verified, Verifier, DEFAULT_LEEWAY};
