//! How a refused config is reported: every mistake at once, each cause printed once, and a
//! minimal config needing no `bbr` block.

use std::error::Error;

use super::*;

/// What a chain printer such as anyhow's `{:#}` prints: the error, then each `source()`.
fn chain(err: &(dyn Error + 'static)) -> Vec<String> {
    let mut links = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        links.push(e.to_string());
        next = e.source();
    }
    links
}

fn assert_each_cause_once(err: &(dyn Error + 'static)) {
    let links = chain(err);
    for pair in links.windows(2) {
        assert!(
            !pair[0].contains(&pair[1]),
            "the cause is printed twice: {links:?}"
        );
    }
}

const MINIMAL: &str = "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  schedulers:
    - {name: llama, modelName: llama-3.1-8b, modelSelector: {matchLabels: {app: llama}}}
  endpoints:
    - {address: 10.0.0.1:8000, labels: {app: llama}}
";

#[test]
fn a_minimal_config_without_bbr_routes_by_the_body_with_the_default_limits() {
    let config = load_from_str(MINIMAL).unwrap();
    assert_eq!(config.spec.bbr, Bbr::default());
    let resolved = resolve(&config).unwrap();
    assert_eq!(resolved.bbr.enabled, defaults::BBR_ENABLED);
    assert_eq!(
        resolved.bbr.max_request_body_bytes,
        Setting::default_value(defaults::DEFAULT_REQUEST_BODY_BYTES)
    );
}

#[test]
fn a_config_with_several_mistakes_reports_every_one_naming_its_field() {
    let mut c = base();
    c.spec.bbr.max_request_body_bytes = Some(0);
    sch(&mut c, 0).target_port = Some(0);
    sch(&mut c, 1).name = "Not_A_Label".into();
    c.spec.endpoints.as_mut().unwrap()[2].address = "10.0.0.1:8001".into();
    let err = c.validate().unwrap_err();
    let fields: Vec<&str> = err.all().iter().filter_map(|e| e.field()).collect();
    assert_eq!(
        fields,
        [
            "spec.bbr.maxRequestBodyBytes",
            "spec.schedulers[0].targetPort",
            "spec.schedulers[1].name",
            "spec.endpoints[2].address",
        ]
    );
    // The first is what a stop-at-the-first check reported; each line names its field.
    assert_eq!(err.field(), Some("spec.bbr.maxRequestBodyBytes"));
    let message = err.to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 4, "{message}");
    for (line, field) in lines.iter().zip(&fields) {
        assert!(line.starts_with(&format!("{field}: ")), "{line}");
    }
    assert_each_cause_once(&err);
}

#[test]
fn one_mistake_is_reported_as_before() {
    let mut c = base();
    sch(&mut c, 0).target_port = Some(0);
    let err = c.validate().unwrap_err();
    assert!(matches!(err, GatewayConfigError::Invalid { .. }), "{err:?}");
    assert_eq!(err.all().len(), 1);
}

#[test]
fn a_syntax_error_prints_its_cause_once() {
    let err = load_from_str(&BASE.replace(
        "      targetPort: 9000",
        "      targetPort: 9000\n      weigths: {}",
    ))
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("spec.schedulers[1]: unknown field `weigths`"),
        "{message}"
    );
    assert_each_cause_once(&err);
    let err = crate::fleet::FleetFile::parse("apiVersion: [").unwrap_err();
    assert_each_cause_once(&err);
    let err = crate::picker::from_yaml_str("plugins: [{type: x, weigth: 1}]").unwrap_err();
    assert!(err.to_string().contains("weigth"), "{err}");
    assert_each_cause_once(&err);
}
