//! JWKS parsing: what is kept, what is skipped and why, and what makes a set unusable.

use serde_json::json;

use super::*;
use crate::{JwksError, MAX_KEYS};

#[test]
fn keys_that_cannot_check_an_accepted_algorithm_are_skipped_with_a_reason() {
    let ed = Key::ed25519();
    let p = Key::p256();
    let short_rsa = json!({"kty": "RSA", "kid": "short", "n": b64([0xc5u8; 128]), "e": "AQAB"});
    let p384 = json!({"kty": "EC", "crv": "P-384", "kid": "p384",
                      "x": b64([1u8; 48]), "y": b64([2u8; 48])});
    let ed448 = json!({"kty": "OKP", "crv": "Ed448", "kid": "ed448", "x": b64([1u8; 57])});
    let mut enc = p.jwk("enc");
    enc["use"] = json!("enc");
    let mut sign_only = p.jwk("ops");
    sign_only["key_ops"] = json!(["sign"]);
    let mut short_x = p.jwk("shortx");
    short_x["x"] = json!(b64([1u8; 31]));
    let no_kty = json!({"kid": "nokty", "x": "AA"});
    let mut verify_ok = ed.jwk("verify");
    verify_ok["key_ops"] = json!(["verify"]);
    verify_ok["use"] = json!("sig");
    let keys = set(&[
        short_rsa, p384, ed448, enc, sign_only, short_x, no_kty, verify_ok,
    ]);
    assert_eq!(keys.keys().len(), 1);
    assert_eq!(keys.keys()[0].kid(), Some("verify"));
    let skipped: Vec<(&str, &str)> = keys
        .skipped()
        .iter()
        .map(|s| (s.kid.as_deref().unwrap(), s.reason))
        .collect();
    assert_eq!(
        skipped,
        [
            ("short", "RSA modulus shorter than 2048 bits"),
            ("p384", "EC curve is not P-256"),
            ("ed448", "OKP curve is not Ed25519"),
            ("enc", "use is not sig"),
            ("ops", "key_ops lacks verify"),
            ("shortx", "P-256 coordinates are not 32 bytes"),
            ("nokty", "not a JWK (kty and string members)"),
        ]
    );
}

#[test]
fn sets_without_a_usable_key_or_not_sets_at_all_are_errors() {
    assert!(matches!(
        KeySet::parse(b"not json"),
        Err(JwksError::NotAKeySet(_))
    ));
    assert!(matches!(
        KeySet::parse(br#"{"keys": {}}"#),
        Err(JwksError::NotAKeySet(_))
    ));
    assert_eq!(
        KeySet::parse(br#"{"keys": []}"#),
        Err(JwksError::NoUsableKey(0))
    );
    assert_eq!(
        KeySet::parse(br#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#),
        Err(JwksError::NoUsableKey(1))
    );
    let ed = Key::ed25519().jwk("k");
    let many = json!({"keys": vec![ed; MAX_KEYS + 1]}).to_string();
    assert_eq!(
        KeySet::parse(many.as_bytes()),
        Err(JwksError::TooManyKeys(MAX_KEYS + 1))
    );
}

#[test]
fn a_modulus_with_a_leading_zero_and_padded_members_still_verify() {
    let rsa = Key::rsa();
    let mut jwk = rsa.jwk("k");
    let n = URL_SAFE_NO_PAD.decode(jwk["n"].as_str().unwrap()).unwrap();
    let mut padded_n = vec![0u8];
    padded_n.extend_from_slice(&n);
    jwk["n"] = json!(base64::engine::general_purpose::URL_SAFE.encode(&padded_n));
    jwk["e"] = json!("AQAB");
    let keys = set(&[jwk]);
    assert!(verifier()
        .verify(&rsa.token("k", &claims()), &keys, NOW)
        .is_ok());
}
