//! How a refused config is reported, and a minimal config needing no `bbr` block.

use super::*;

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
        Setting::default_value(defaults::MAX_REQUEST_BODY_BYTES)
    );
}
