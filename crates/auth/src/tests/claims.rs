//! Claims policy: time with leeway, issuer, audiences, required claims, identity claims.

use std::time::Duration;

use infergate_config::gateway::{Band, ClaimValueType};
use serde_json::json;

use super::*;
use crate::Refusal;

fn check(v: &Verifier, claims: &Value) -> Result<(), Refusal> {
    let s = Key::ed25519();
    v.verify(&s.token("k", claims), &set(&[s.jwk("k")]), NOW)
        .map(|_| ())
}

#[test]
fn exp_is_required_and_honoured_with_sixty_seconds_of_leeway() {
    let v = verifier();
    assert_eq!(check(&v, &claims_with("exp", json!(NOW - 59))), Ok(()));
    assert_eq!(
        check(&v, &claims_with("exp", json!(NOW - 60))),
        Err(Refusal::Expired)
    );
    assert_eq!(
        check(&v, &claims_with("exp", Value::Null)),
        Err(Refusal::NoExpiry)
    );
    assert!(matches!(
        check(&v, &claims_with("exp", json!("tomorrow"))),
        Err(Refusal::Malformed(_))
    ));
    // A NumericDate may be fractional.
    assert_eq!(
        check(&v, &claims_with("exp", json!(NOW as f64 + 0.5))),
        Ok(())
    );
    let strict = verifier().with_leeway(Duration::ZERO);
    assert_eq!(
        check(&strict, &claims_with("exp", json!(NOW))),
        Err(Refusal::Expired)
    );
    assert_eq!(check(&strict, &claims_with("exp", json!(NOW + 1))), Ok(()));
    assert_eq!(
        check(&v, &claims_with("exp", json!(1e300))),
        Ok(()),
        "a far-future exp is valid"
    );
}

#[test]
fn nbf_is_optional_and_honoured_with_leeway() {
    let v = verifier();
    assert_eq!(check(&v, &claims_with("nbf", json!(NOW + 60))), Ok(()));
    assert_eq!(
        check(&v, &claims_with("nbf", json!(NOW + 61))),
        Err(Refusal::NotYetValid)
    );
    let strict = verifier().with_leeway(Duration::ZERO);
    assert_eq!(check(&strict, &claims_with("nbf", json!(NOW))), Ok(()));
    assert_eq!(
        check(&strict, &claims_with("nbf", json!(NOW + 1))),
        Err(Refusal::NotYetValid)
    );
}

#[test]
fn the_issuer_must_match_exactly() {
    let v = verifier();
    for iss in [
        json!("https://idp.example/"),
        json!("https://IDP.example"),
        json!(["https://idp.example"]),
        Value::Null,
    ] {
        assert_eq!(
            check(&v, &claims_with("iss", iss.clone())),
            Err(Refusal::WrongIssuer),
            "{iss}"
        );
    }
}

#[test]
fn any_accepted_audience_will_do() {
    let v = verifier();
    assert_eq!(check(&v, &claims_with("aud", json!("other"))), Ok(()));
    assert_eq!(
        check(&v, &claims_with("aud", json!(["x", "infergate"]))),
        Ok(())
    );
    for aud in [
        json!("x"),
        json!(["x", "y"]),
        json!([]),
        json!(7),
        Value::Null,
    ] {
        assert_eq!(
            check(&v, &claims_with("aud", aud.clone())),
            Err(Refusal::WrongAudience),
            "{aud}"
        );
    }
    // With no audiences configured, the provider binds tokens by required claims instead.
    let mut p = provider(&[("group", ClaimValueType::String, &["ml"])]);
    p.audiences.clear();
    let v = Verifier::new(&p);
    assert_eq!(
        check(&v, &claims_with("group", json!("ml"))),
        Ok(()),
        "aud not checked"
    );
}

#[test]
fn a_string_claim_must_equal_one_of_the_values() {
    let v = Verifier::new(&provider(&[(
        "tier",
        ClaimValueType::String,
        &["gold", "silver"],
    )]));
    assert_eq!(check(&v, &claims_with("tier", json!("silver"))), Ok(()));
    for other in [json!("bronze"), json!("Gold"), json!(["gold"]), json!(1)] {
        let r = check(&v, &claims_with("tier", other.clone()));
        assert_eq!(r, Err(Refusal::ClaimNotAllowed("tier".into())), "{other}");
        assert_eq!(r.unwrap_err().status(), 403);
    }
    let missing = check(&v, &claims());
    assert_eq!(missing, Err(Refusal::ClaimMissing("tier".into())));
    assert_eq!(missing.unwrap_err().status(), 403);
}

#[test]
fn a_string_array_claim_must_contain_one_of_the_values() {
    let v = Verifier::new(&provider(&[(
        "groups",
        ClaimValueType::StringArray,
        &["ml-team"],
    )]));
    assert_eq!(
        check(&v, &claims_with("groups", json!([1, "ops", "ml-team"]))),
        Ok(())
    );
    for other in [
        json!(["ops"]),
        json!([]),
        json!("ml-team"),
        json!([["ml-team"]]),
    ] {
        assert_eq!(
            check(&v, &claims_with("groups", other.clone())),
            Err(Refusal::ClaimNotAllowed("groups".into())),
            "{other}"
        );
    }
}

#[test]
fn every_required_claim_must_hold() {
    let v = Verifier::new(&provider(&[
        ("tier", ClaimValueType::String, &["gold"]),
        ("groups", ClaimValueType::StringArray, &["ml"]),
    ]));
    let mut c = claims_with("tier", json!("gold"));
    assert_eq!(check(&v, &c), Err(Refusal::ClaimMissing("groups".into())));
    c["groups"] = json!(["ml"]);
    assert_eq!(check(&v, &c), Ok(()));
}

#[test]
fn a_token_that_fails_a_401_check_is_never_reported_as_a_403() {
    let v = Verifier::new(&provider(&[("tier", ClaimValueType::String, &["gold"])]));
    // Expired and lacking the claim: the client must learn its token is invalid.
    assert_eq!(
        check(&v, &claims_with("exp", json!(NOW - 3600))),
        Err(Refusal::Expired)
    );
    // Claims are read only after the signature holds.
    let s = Key::ed25519();
    let forged = Key::ed25519().token("k", &claims());
    assert_eq!(
        v.verify(&forged, &set(&[s.jwk("k")]), NOW).unwrap_err(),
        Refusal::BadSignature
    );
}

#[test]
fn tenant_and_band_come_from_the_named_claims() {
    let s = Key::ed25519();
    let keys = set(&[s.jwk("k")]);
    let mut c = claims();
    c["org"] = json!("team-a");
    c["num_org"] = json!(42);
    c["empty"] = json!("");
    c["crit"] = json!("Critical");
    c["shed"] = json!("sheddable");
    c["prio"] = json!(3);
    c["neg"] = json!(-2);
    c["prio_s"] = json!("0");
    c["junk"] = json!("urgent");
    c["list"] = json!(["Critical"]);
    let v = verifier().verify(&s.token("k", &c), &keys, NOW).unwrap();
    assert_eq!(v.tenant("org").as_deref(), Some("team-a"));
    assert_eq!(v.tenant("num_org").as_deref(), Some("42"));
    assert_eq!(v.tenant("empty"), None);
    assert_eq!(v.tenant("list"), None);
    assert_eq!(v.tenant("absent"), None);
    assert_eq!(v.band("crit"), Some(Band::Critical));
    assert_eq!(v.band("shed"), Some(Band::Sheddable));
    assert_eq!(v.band("prio"), Some(Band::Critical));
    assert_eq!(v.band("neg"), Some(Band::Sheddable));
    assert_eq!(v.band("prio_s"), Some(Band::Standard));
    assert_eq!(v.band("junk"), None);
    assert_eq!(v.band("list"), None);
    assert_eq!(v.band("absent"), None);
}
