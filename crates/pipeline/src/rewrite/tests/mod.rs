use super::*;
use infergate_config::gateway::Band;

mod restore;

fn parsed(body: &str) -> ParsedRequest {
    crate::parse::parse(body.as_bytes(), Some("from-header")).unwrap()
}

#[test]
fn the_body_names_the_target_and_keeps_every_other_byte() {
    let body = r#"{ "model" : "llama", "messages":[{"role":"user","content":"hi \"there\""}],"stream":true}"#;
    let mut p = parsed(body);
    let out = set_model(&Bytes::from(body), &mut p, "llama-canary").unwrap();
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        body.replace(r#""llama""#, r#""llama-canary""#)
    );
    assert_eq!(p.model, "llama-canary");
    // The parsed request matches a fresh parse of the new body, prompt included.
    let again = crate::parse::parse(&out, None).unwrap();
    assert_eq!(again.model, "llama-canary");
    assert_eq!(p.prompt.get(&out), again.prompt.get(&out));
    assert_eq!(
        p.prompt.get(&out),
        br#"[{"role":"user","content":"hi \"there\""}]"#.as_slice()
    );

    // A prompt before the model stays where it was; a target with quotes is escaped.
    let body = r#"{"prompt":"tell me","model":"llama"}"#;
    let mut p = parsed(body);
    let out = set_model(&Bytes::from(body), &mut p, "a\"b").unwrap();
    assert_eq!(
        &out[..],
        br#"{"prompt":"tell me","model":"a\"b"}"#.as_slice()
    );
    assert_eq!(p.prompt.get(&out), b"tell me".as_slice());
}

#[test]
fn a_body_that_named_no_model_gets_one() {
    for (body, want) in [
        (r#"{"prompt":"x"}"#, r#"{"model":"t","prompt":"x"}"#),
        (" { } ", r#" {"model":"t" } "#),
        (
            r#"{"model":null,"prompt":"x"}"#,
            r#"{"model":"t","prompt":"x"}"#,
        ),
    ] {
        let mut p = parsed(body);
        assert_eq!(p.model, "from-header");
        let out = set_model(&Bytes::from(body), &mut p, "t").unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), want);
        let again = crate::parse::parse(&out, None).unwrap();
        assert_eq!(again.model, "t");
        assert_eq!(p.prompt.get(&out), again.prompt.get(&out));
    }
}

#[test]
fn forwarding_a_band_sets_the_bodys_priority_over_the_clients_own() {
    for (body, priority, want) in [
        (
            r#"{"model":"m","prompt":"x"}"#,
            -1,
            r#"{"priority":-1,"model":"m","prompt":"x"}"#,
        ),
        // A client's own priority never reaches the server: the gateway's band wins.
        (
            r#"{"model":"m","priority": -100 ,"prompt":"x"}"#,
            1,
            r#"{"model":"m","priority": 1 ,"prompt":"x"}"#,
        ),
        (
            r#"{"prompt":"x","priority":"high","model":"m"}"#,
            0,
            r#"{"prompt":"x","priority":0,"model":"m"}"#,
        ),
    ] {
        let mut p = parsed(body);
        let out = set_priority(body.as_bytes(), &mut p, priority).unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), want);
        let again = crate::parse::parse(&out, None).unwrap();
        assert_eq!(p.prompt.get(&out), again.prompt.get(&out));
        assert_eq!(p.prompt.get(&out), b"x".as_slice());
        assert_eq!(p.model, "m");
    }
    assert_eq!(
        [Band::Critical, Band::Standard, Band::Sheddable].map(Band::engine_priority),
        [-1, 0, 1]
    );
}
