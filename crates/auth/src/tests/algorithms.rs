//! Each accepted algorithm verifies with its key and fails with any change.

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::json;

use super::*;
use crate::Refusal;

#[test]
fn rs256_es256_and_eddsa_tokens_verify_against_their_jwk() {
    let (p256, ed) = (Key::p256(), Key::ed25519());
    for s in [Key::rsa(), &p256, &ed] {
        let keys = set(&[s.jwk("k1")]);
        let v = verifier().verify(&s.token("k1", &claims()), &keys, NOW);
        let v = v.unwrap_or_else(|e| panic!("{}: {e}", s.alg()));
        assert_eq!(v.claim("sub"), Some(&json!("alice")), "{}", s.alg());
    }
}

#[test]
fn a_changed_payload_or_signature_fails_for_every_algorithm() {
    let (p256, ed) = (Key::p256(), Key::ed25519());
    for s in [Key::rsa(), &p256, &ed] {
        let keys = set(&[s.jwk("k1")]);
        let token = s.token("k1", &claims());
        let parts: Vec<&str> = token.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            b64(claims_with("sub", json!("mallory")).to_string()),
            parts[2]
        );
        assert_eq!(
            verifier().verify(&forged, &keys, NOW).unwrap_err(),
            Refusal::BadSignature,
            "{}",
            s.alg()
        );
        let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        sig[0] ^= 1;
        let flipped = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
        assert_eq!(
            verifier().verify(&flipped, &keys, NOW).unwrap_err(),
            Refusal::BadSignature,
            "{}",
            s.alg()
        );
    }
}

#[test]
fn a_token_signed_by_another_key_under_a_known_kid_fails() {
    let keys = set(&[Key::rsa().jwk("k1")]);
    let token = Key::other_rsa().token("k1", &claims());
    assert_eq!(
        verifier().verify(&token, &keys, NOW).unwrap_err(),
        Refusal::BadSignature
    );
    let (a, b) = (Key::ed25519(), Key::ed25519());
    let keys = set(&[a.jwk("a")]);
    assert_eq!(
        verifier()
            .verify(&b.token("a", &claims()), &keys, NOW)
            .unwrap_err(),
        Refusal::BadSignature
    );
}

#[test]
fn the_kid_selects_among_several_keys() {
    let (a, b, c) = (Key::p256(), Key::p256(), Key::ed25519());
    let keys = set(&[a.jwk("a"), b.jwk("b"), c.jwk("c"), Key::rsa().jwk("r")]);
    for (s, kid) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        assert!(verifier()
            .verify(&s.token(kid, &claims()), &keys, NOW)
            .is_ok());
    }
    assert!(verifier()
        .verify(&Key::rsa().token("r", &claims()), &keys, NOW)
        .is_ok());
    // b's token under a's kid is checked against a's key only.
    assert_eq!(
        verifier()
            .verify(&b.token("a", &claims()), &keys, NOW)
            .unwrap_err(),
        Refusal::BadSignature
    );
}

#[test]
fn without_a_kid_every_key_that_fits_the_alg_is_tried() {
    let (a, b) = (Key::p256(), Key::p256());
    let keys = set(&[Key::ed25519().jwk("e"), a.jwk("a"), b.jwk("b")]);
    let header = json!({"alg": "ES256"});
    assert!(verifier()
        .verify(&b.token_with(&header, &claims()), &keys, NOW)
        .is_ok());
    let stranger = Key::p256();
    assert_eq!(
        verifier()
            .verify(&stranger.token_with(&header, &claims()), &keys, NOW)
            .unwrap_err(),
        Refusal::BadSignature
    );
    let rsa_only = set(&[Key::rsa().jwk("r")]);
    assert_eq!(
        verifier()
            .verify(&a.token_with(&header, &claims()), &rsa_only, NOW)
            .unwrap_err(),
        Refusal::NoKey
    );
}

#[test]
fn a_der_encoded_ecdsa_signature_is_refused() {
    // JOSE's ES256 signature is the fixed 64-byte r || s; the ASN.1 form some libraries emit
    // by mistake must not verify.
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_ASN1_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "k",
                     "x": b64(&point[1..33]), "y": b64(&point[33..65])});
    let input = format!(
        "{}.{}",
        b64(json!({"alg": "ES256", "kid": "k"}).to_string()),
        b64(claims().to_string())
    );
    let der = pair.sign(&rng, input.as_bytes()).unwrap();
    let token = format!("{input}.{}", b64(der.as_ref()));
    assert_eq!(
        verifier().verify(&token, &set(&[jwk]), NOW).unwrap_err(),
        Refusal::BadSignature
    );
}

#[test]
fn a_signed_payload_that_is_not_a_json_object_is_malformed() {
    let s = Key::ed25519();
    let keys = set(&[s.jwk("k")]);
    let header = b64(json!({"alg": "EdDSA", "kid": "k"}).to_string());
    for payload in ["[1,2]", "not json", "\"exp\""] {
        let input = format!("{header}.{}", b64(payload));
        let token = format!("{input}.{}", b64(s.sign(input.as_bytes())));
        assert!(
            matches!(
                verifier().verify(&token, &keys, NOW),
                Err(Refusal::Malformed(_))
            ),
            "{payload}"
        );
    }
}
