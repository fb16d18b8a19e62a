//! The fixed key set and policy both auth targets check tokens against, and a signer for one of
//! its keys, so that fuzzed headers and payloads reach the checks that follow the signature.

// Each target uses part of the fixture.
#![allow(dead_code)]

use std::sync::OnceLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use infergate_auth::{KeySet, Verifier};
use infergate_config::gateway::{ClaimValueType, JwtProvider, RequiredClaim};
use ring::signature::{Ed25519KeyPair, KeyPair};

pub const ISSUER: &str = "https://idp.example";

/// The Ed25519 key the signed tokens are made with (a fixed seed: every run replays).
pub fn signer() -> &'static Ed25519KeyPair {
    static KEY: OnceLock<Ed25519KeyPair> = OnceLock::new();
    KEY.get_or_init(|| {
        Ed25519KeyPair::from_seed_unchecked(&[7; 32]).expect("any 32 bytes are an Ed25519 seed")
    })
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// One key of each type: the signer's (with and without a `kid`), the P-256 generator point (a
/// valid public key whose private key nobody needs), and an RSA modulus that is the right
/// shape but no product of primes — `ring` checks the shape, so a signature is really tried.
pub fn key_set() -> &'static KeySet {
    static SET: OnceLock<KeySet> = OnceLock::new();
    SET.get_or_init(|| {
        let x = b64(signer().public_key().as_ref());
        let gx = "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY";
        let gy = "T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU";
        let n = b64(&[0xd5; 256]);
        let doc = format!(
            r#"{{"keys":[
                {{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"{x}"}},
                {{"kty":"OKP","crv":"Ed25519","x":"{x}","alg":"EdDSA"}},
                {{"kty":"EC","crv":"P-256","kid":"ec","x":"{gx}","y":"{gy}"}},
                {{"kty":"RSA","kid":"rsa","n":"{n}","e":"AQAB"}},
                {{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}}
            ]}}"#
        );
        let set = KeySet::parse(doc.as_bytes()).expect("the fixture key set parses");
        assert_eq!(set.keys().len(), 4, "{:?}", set.skipped());
        set
    })
}

/// The policy: an issuer, an audience, one required claim of each type.
pub fn verifier() -> &'static Verifier {
    static VERIFIER: OnceLock<Verifier> = OnceLock::new();
    VERIFIER.get_or_init(|| {
        Verifier::new(&JwtProvider {
            name: "fuzz".into(),
            issuer: ISSUER.into(),
            remote_jwks: None,
            local_jwks: None,
            audiences: vec!["gw".into()],
            required_claims: vec![
                RequiredClaim {
                    name: "tier".into(),
                    value_type: ClaimValueType::String,
                    values: vec!["gold".into()],
                },
                RequiredClaim {
                    name: "groups".into(),
                    value_type: ClaimValueType::StringArray,
                    values: vec!["ml".into()],
                },
            ],
        })
    })
}

/// A compact JWS over these header and payload bytes, signed by [`signer`].
pub fn sign(header: &[u8], payload: &[u8]) -> String {
    let input = format!("{}.{}", b64(header), b64(payload));
    let sig = signer().sign(input.as_bytes());
    format!("{input}.{}", b64(sig.as_ref()))
}
