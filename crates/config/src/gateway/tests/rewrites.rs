//! `spec.rewrites[].stickiness`: where a session id is read, what is refused, what `check`
//! prints.

use super::*;

fn sticky(s: Stickiness) -> InferenceGatewayConfig {
    let mut c = base();
    let mut rule = rewrite("llama", &[("llama-3.1-8b", Some(9)), ("sql-lora", Some(1))]);
    rule.stickiness = Some(s);
    c.spec.rewrites = vec![rule];
    c
}

fn header(h: &str) -> Stickiness {
    Stickiness {
        header: Some(h.into()),
        field: None,
    }
}

fn field(f: &str) -> Stickiness {
    Stickiness {
        header: None,
        field: Some(f.into()),
    }
}

#[test]
fn a_session_id_comes_from_one_header_or_one_body_field_other_than_model() {
    let cases = [
        (
            Stickiness {
                header: Some("x-session-id".into()),
                field: Some("user".into()),
            },
            "spec.rewrites[0].stickiness.field",
        ),
        (Stickiness::default(), "spec.rewrites[0].stickiness"),
        (header("X-Session-Id"), "spec.rewrites[0].stickiness.header"),
        (header("x session"), "spec.rewrites[0].stickiness.header"),
        (header(""), "spec.rewrites[0].stickiness.header"),
        (field(""), "spec.rewrites[0].stickiness.field"),
        (field("model"), "spec.rewrites[0].stickiness.field"),
    ];
    for (s, want) in cases {
        let (got, message) = refused(&sticky(s.clone()));
        assert_eq!(got, want, "{s:?}: {message}");
    }
}

#[test]
fn stickiness_resolves_and_check_prints_the_rule_with_it() {
    let gw = resolve(&sticky(header("x-session-id"))).unwrap();
    assert_eq!(
        gw.rewrites[0].stickiness,
        Some(SessionKey::Header("x-session-id".into()))
    );
    let report = gw.to_string();
    assert!(
        report.contains(
            "llama → llama-3.1-8b weight 9, sql-lora weight 1; sessions stick by header x-session-id"
        ),
        "{report}"
    );

    let gw = resolve(&sticky(field("user"))).unwrap();
    assert_eq!(
        gw.rewrites[0].stickiness,
        Some(SessionKey::Field("user".into()))
    );
    assert!(gw.to_string().contains("sessions stick by body field user"));

    // Without stickiness, and with a name, from YAML.
    let yaml = format!(
        "{BASE}{}",
        r#"  rewrites:
    - name: canary
      matches: [{model: {value: llama}}]
      targets: [{modelRewrite: llama-3.1-8b, weight: 90}, {modelRewrite: sql-lora}]
"#
    );
    let gw = resolve(&load_from_str(&yaml).unwrap()).unwrap();
    assert_eq!(gw.rewrites[0].stickiness, None);
    assert_eq!(
        gw.rewrites[0].targets[1],
        ("sql-lora".into(), Setting::default_value(1))
    );
    let report = gw.to_string();
    assert!(
        report.contains("canary: llama → llama-3.1-8b weight 90, sql-lora weight 1 (default)\n"),
        "{report}"
    );
}
