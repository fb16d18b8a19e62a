//! Tests with keys generated here: an RSA 2048 key (made by `rsa`, signing with `ring`), a
//! P-256 and an Ed25519 key (made and used by `ring`), tokens minted over them.

mod algorithms;
mod claims;
mod confusion;
mod keys;

use std::sync::OnceLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use infergate_config::gateway::{ClaimValueType, JwtProvider, RequiredClaim};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use serde_json::{json, Value};

use crate::{KeySet, Verifier};

/// The wall clock every test runs at.
const NOW: u64 = 1_750_000_000;
const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "infergate";

pub(crate) fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key and its public JWK.
pub(crate) enum Signer {
    Rsa(RsaKeyPair, Vec<u8>, Vec<u8>),
    P256(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

impl Signer {
    /// RSA 2048, made once per test binary (generating primes takes a while).
    pub(crate) fn rsa() -> &'static Signer {
        static KEY: OnceLock<Signer> = OnceLock::new();
        KEY.get_or_init(new_rsa)
    }

    pub(crate) fn rsa_other() -> &'static Signer {
        static KEY: OnceLock<Signer> = OnceLock::new();
        KEY.get_or_init(new_rsa)
    }

    pub(crate) fn p256() -> Signer {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Signer::P256(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    pub(crate) fn ed25519() -> Signer {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Signer::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    /// The `alg` this key signs with.
    pub(crate) fn alg(&self) -> &'static str {
        match self {
            Signer::Rsa(..) => "RS256",
            Signer::P256(_) => "ES256",
            Signer::Ed(_) => "EdDSA",
        }
    }

    /// The public key as a JWK with `kid`.
    pub(crate) fn jwk(&self, kid: &str) -> Value {
        match self {
            Signer::Rsa(_, n, e) => json!({"kty": "RSA", "kid": kid, "n": b64(n), "e": b64(e)}),
            Signer::P256(k) => {
                let point = k.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid,
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Signer::Ed(k) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(k.public_key())})
            }
        }
    }

    pub(crate) fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            Signer::Rsa(k, ..) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .unwrap();
                sig
            }
            Signer::P256(k) => k.sign(&rng, message).unwrap().as_ref().to_vec(),
            Signer::Ed(k) => k.sign(message).as_ref().to_vec(),
        }
    }

    /// A token with this key's `alg` and `kid`, over `claims`.
    pub(crate) fn token(&self, kid: &str, claims: &Value) -> String {
        self.token_with(
            &json!({"alg": self.alg(), "kid": kid, "typ": "JWT"}),
            claims,
        )
    }

    /// A token with any header, signed by this key.
    pub(crate) fn token_with(&self, header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let sig = self.sign(input.as_bytes());
        format!("{input}.{}", b64(sig))
    }
}

fn new_rsa() -> Signer {
    use rsa::pkcs8::EncodePrivateKey;
    use rsa::traits::PublicKeyParts;
    let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
    let der = key.to_pkcs8_der().unwrap();
    let pair = RsaKeyPair::from_pkcs8(der.as_bytes()).unwrap();
    Signer::Rsa(pair, key.n().to_bytes_be(), key.e().to_bytes_be())
}

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
