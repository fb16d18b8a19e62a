//! Algorithm and key confusions: every way to make a public key or a header stand in for a
//! signature is refused.

use ring::hmac;
use serde_json::json;

use super::*;
use crate::Refusal;

/// A token with `header`, MAC'd with `secret` under HMAC-SHA256.
fn hs256(header: &Value, secret: &[u8]) -> String {
    let input = format!("{}.{}", b64(header.to_string()), b64(claims().to_string()));
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), input.as_bytes());
    format!("{input}.{}", b64(tag.as_ref()))
}

#[test]
fn alg_none_is_refused_with_or_without_a_signature() {
    let s = Key::ed25519();
    let keys = set(&[s.jwk("k")]);
    for alg in ["none", "None", "NONE"] {
        let input = format!(
            "{}.{}",
            b64(json!({"alg": alg, "kid": "k"}).to_string()),
            b64(claims().to_string())
        );
        for token in [format!("{input}."), format!("{input}.{}", b64("x"))] {
            assert_eq!(
                verifier().verify(&token, &keys, NOW).unwrap_err(),
                Refusal::AlgNone,
                "{alg}"
            );
        }
    }
}

#[test]
fn hs256_keyed_with_the_public_key_is_refused() {
    // The classic confusion: a verifier that feeds its public key to HMAC accepts a MAC any
    // reader of the JWKS can compute. Every encoding of the public key is tried.
    let (p256, ed) = (Key::p256(), Key::ed25519());
    for s in [Key::rsa(), &p256, &ed] {
        let jwk = s.jwk("k");
        let keys = set(std::slice::from_ref(&jwk));
        let mut secrets = vec![jwk.to_string().into_bytes()];
        for member in ["n", "x", "y"] {
            if let Some(v) = jwk[member].as_str() {
                secrets.push(URL_SAFE_NO_PAD.decode(v).unwrap());
                secrets.push(v.as_bytes().to_vec());
            }
        }
        for alg in ["HS256", "HS384", "HS512"] {
            for secret in &secrets {
                let token = hs256(&json!({"alg": alg, "kid": "k"}), secret);
                assert_eq!(
                    verifier().verify(&token, &keys, NOW).unwrap_err(),
                    Refusal::Hmac,
                    "{} key, {alg}",
                    s.alg()
                );
            }
        }
    }
}

#[test]
fn an_oct_key_in_the_set_is_never_used() {
    let secret = b"a shared secret of thirty-two by";
    let oct = json!({"kty": "oct", "kid": "sym", "k": b64(secret)});
    let ed = Key::ed25519();
    let keys = set(&[oct, ed.jwk("e")]);
    assert_eq!(keys.keys().len(), 1);
    assert_eq!(keys.skipped()[0].kid.as_deref(), Some("sym"));
    let token = hs256(&json!({"alg": "HS256", "kid": "sym"}), secret);
    assert_eq!(
        verifier().verify(&token, &keys, NOW).unwrap_err(),
        Refusal::Hmac
    );
    // An asymmetric token naming the skipped key is a mismatch, not an unknown kid (which
    // would send the gateway to refetch the set for nothing).
    assert_eq!(
        verifier()
            .verify(&ed.token("sym", &claims()), &keys, NOW)
            .unwrap_err(),
        Refusal::KeyMismatch
    );
}

#[test]
fn a_key_of_the_wrong_type_for_the_alg_is_refused() {
    let (p256, ed) = (Key::p256(), Key::ed25519());
    let rsa = Key::rsa();
    let keys = set(&[rsa.jwk("rsa"), p256.jwk("ec"), ed.jwk("ed")]);
    // Each signer's token under each other key's kid.
    for (s, own) in [(rsa, "rsa"), (&p256, "ec"), (&ed, "ed")] {
        for kid in ["rsa", "ec", "ed"] {
            let r = verifier().verify(&s.token(kid, &claims()), &keys, NOW);
            if kid == own {
                assert!(r.is_ok(), "{} under {kid}", s.alg());
            } else {
                assert_eq!(
                    r.unwrap_err(),
                    Refusal::KeyMismatch,
                    "{} under {kid}",
                    s.alg()
                );
            }
        }
    }
}

#[test]
fn a_token_whose_alg_differs_from_the_alg_its_jwk_states_is_refused() {
    let rsa = Key::rsa();
    let ed = Key::ed25519();
    // A key published for PS256 (or any other algorithm) never checks an RS256 token, even
    // though its type could.
    let mut ps = rsa.jwk("ps");
    ps["alg"] = json!("PS256");
    // An RSA key claiming ES256 is inconsistent and left out.
    let mut odd = rsa.jwk("odd");
    odd["alg"] = json!("ES256");
    let mut good = ed.jwk("ed");
    good["alg"] = json!("EdDSA");
    let keys = set(&[ps, odd, good]);
    assert_eq!(keys.keys().len(), 1);
    for kid in ["ps", "odd"] {
        assert_eq!(
            verifier()
                .verify(&rsa.token(kid, &claims()), &keys, NOW)
                .unwrap_err(),
            Refusal::KeyMismatch,
            "{kid}"
        );
    }
    assert!(verifier()
        .verify(&ed.token("ed", &claims()), &keys, NOW)
        .is_ok());
    // The stated alg is honoured when it agrees.
    let mut rs = rsa.jwk("rs");
    rs["alg"] = json!("RS256");
    assert!(verifier()
        .verify(&rsa.token("rs", &claims()), &set(&[rs]), NOW)
        .is_ok());
}

#[test]
fn a_key_offered_in_the_header_is_ignored() {
    let trusted = Key::p256();
    let attacker = Key::p256();
    let keys = set(&[trusted.jwk("t")]);
    let embedded = json!({"alg": "ES256", "jwk": attacker.jwk("a"),
                          "jku": "http://attacker/jwks.json", "x5u": "http://attacker/c"});
    assert_eq!(
        verifier()
            .verify(&attacker.token_with(&embedded, &claims()), &keys, NOW)
            .unwrap_err(),
        Refusal::BadSignature
    );
    let mut with_kid = embedded.clone();
    with_kid["kid"] = json!("a");
    assert_eq!(
        verifier()
            .verify(&attacker.token_with(&with_kid, &claims()), &keys, NOW)
            .unwrap_err(),
        Refusal::UnknownKid
    );
}

#[test]
fn an_unknown_kid_is_reported_as_such_so_the_caller_can_refresh() {
    let s = Key::ed25519();
    let keys = set(&[s.jwk("old")]);
    let r = verifier().verify(&s.token("new", &claims()), &keys, NOW);
    assert!(r.as_ref().unwrap_err().is_unknown_kid(), "{r:?}");
    assert_eq!(r.unwrap_err().status(), 401);
}

#[test]
fn oversized_tokens_are_refused_whatever_they_hold() {
    let s = Key::ed25519();
    let keys = set(&[s.jwk("k")]);
    let big = claims_with("pad", json!("x".repeat(crate::MAX_TOKEN_BYTES)));
    assert_eq!(
        verifier()
            .verify(&s.token("k", &big), &keys, NOW)
            .unwrap_err(),
        Refusal::TooLarge(crate::MAX_TOKEN_BYTES)
    );
}
