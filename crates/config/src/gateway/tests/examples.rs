//! The reference's and HyperPod's examples load as written; what does not fit the schema is
//! refused naming the field.

use super::*;

#[test]
fn the_reference_example_is_accepted_verbatim() {
    let config = load_from_str(REFERENCE_EXAMPLE).unwrap();
    assert_eq!(config.api_version, ApiVersion::SageMaker);
    let gw = resolve(&config).unwrap();
    assert_eq!(gw.name.as_deref(), Some("my-gateway"));
    assert_eq!(gw.tls, TlsMode::SelfSigned);
    assert!(gw.bbr.enabled);
    // The upstream schema's default is 256 MiB; infergate's is 32 MiB (defaults.rs says why),
    // and 256 MiB stays the most a config may set.
    assert_eq!(
        gw.bbr.max_request_body_bytes,
        Setting::default_value(32 * 1024 * 1024)
    );
    assert_eq!(gw.metrics_enabled, Setting::default_value(true));
    assert_eq!(
        gw.discovery,
        ResolvedDiscovery::Kubernetes {
            namespace: Setting::default_value(None)
        }
    );
    let pool = &gw.pools[0];
    assert_eq!(
        (pool.name.as_str(), pool.model_name.as_str()),
        ("llama-70b", "llama-3.1-70b")
    );
    assert_eq!(pool.target_port, Setting::set(8000));
    assert_eq!(pool.scheduler, Setting::set(SchedulerKind::LlmD));
    assert_eq!(pool.engine_type, Setting::default_value(EngineType::Vllm));
    assert_eq!(pool.app_protocol, Setting::default_value(AppProtocol::Http));
    let route = gw.lookup_model("llama-3.1-70b").unwrap();
    assert_eq!(
        (route.pool.name.as_str(), route.adapter),
        ("llama-70b", None)
    );
    assert_eq!(route.base_model, "llama-3.1-70b");
    assert!(gw.lookup_model("llama-3.1-8b").is_none());
}

#[test]
fn both_api_versions_read_the_same_schema() {
    let ours = REFERENCE_EXAMPLE.replace(SAGEMAKER_API_VERSION, API_VERSION);
    let a = load_from_str(REFERENCE_EXAMPLE).unwrap();
    let b = load_from_str(&ours).unwrap();
    assert_eq!(b.api_version, ApiVersion::Infergate);
    assert_eq!(a.spec, b.spec);

    let err = load_from_str(&REFERENCE_EXAMPLE.replace("v1alpha1", "v1"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("apiVersion"), "{err}");
    let err =
        load_from_str(&REFERENCE_EXAMPLE.replace("kind: InferenceGatewayConfig", "kind: Gateway"))
            .unwrap_err()
            .to_string();
    assert!(err.starts_with("kind"), "{err}");
}

#[test]
fn hyperpods_documented_examples_are_accepted() {
    let gw = resolve(&load_from_str(HYPERPOD_MULTI_MODEL).unwrap()).unwrap();
    assert_eq!(
        gw.discovery,
        ResolvedDiscovery::Kubernetes {
            namespace: Setting::default_value(Some("inference-gateway".into()))
        }
    );
    let gw = resolve(&load_from_str(HYPERPOD_SGLANG).unwrap()).unwrap();
    let pool = &gw.pools[0];
    assert_eq!(pool.engine_type, Setting::set(EngineType::Sglang));
    let PickerSource::Weights(w) = pool.picker else {
        panic!("weights expected")
    };
    // A weight left out of a written block still takes its default.
    assert_eq!(w.queue, Setting::default_value(2));
    assert_eq!(w.kv_cache, Setting::set(2));
    assert_eq!(w.running_requests, Setting::set(2));
    assert_eq!(w.lru, Setting::default_value(0));
    assert!(gw.deployment_knobs.contains(&DeploymentKnob {
        field: "spec.schedulers[0].logLevel".into(),
        value: "4".into()
    }));
}

#[test]
fn unknown_fields_anywhere_are_errors_naming_them() {
    let cases = [
        (
            "  bbr: {enabled: true}",
            "  bbr: {enabled: true, replica: 2}",
            "replica",
        ),
        (
            "      targetPort: 9000",
            "      targetPort: 9000\n      weight: {queue: 1}",
            "weight",
        ),
        (
            "      targetPort: 9000",
            "      targetPort: 9000\n      weights: {queue: 1, latency: 2}",
            "latency",
        ),
        (
            "      labels: {app: qwen}",
            "      labels: {app: qwen}\n      sim: {gpu: h100}",
            "sim",
        ),
        (
            "metadata: {name: test}",
            "metadata: {name: test, owner: me}",
            "owner",
        ),
        (
            "  bbr: {enabled: true}",
            "  bbr: {enabled: true}\n  listener: {}",
            "listener",
        ),
    ];
    for (from, to, field) in cases {
        let yaml = BASE.replace(from, to);
        assert_ne!(yaml, BASE, "{from}");
        let err = load_from_str(&yaml).unwrap_err().to_string();
        assert!(err.contains(&format!("unknown field `{field}`")), "{err}");
    }
    // The path leads the message.
    let err = load_from_str(&BASE.replace("targetPort: 9000", "targetPort: 9000\n      foo: 1"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("spec.schedulers[1]"), "{err}");
}

#[test]
fn values_of_the_wrong_shape_name_their_field() {
    const QWEN: &str = "modelSelector: {matchLabels: {app: qwen}}";
    let more = |line: &str| format!("{QWEN}\n      {line}");
    for (replacement, field) in [
        (more("routeTimeout: 30"), "spec.schedulers[1].routeTimeout"),
        (
            more("routeTimeout: 1.5s"),
            "spec.schedulers[1].routeTimeout",
        ),
        (more("appProtocol: grpc"), "spec.schedulers[1].appProtocol"),
        (more("engineType: trtllm"), "spec.schedulers[1].engineType"),
        (more("scheduler: random"), "spec.schedulers[1].scheduler"),
        (
            more("weights: {queue: -1}"),
            "spec.schedulers[1].weights.queue",
        ),
        (
            "modelSelector: {matchExpressions: [{key: a, operator: Like}]}".to_owned(),
            "spec.schedulers[1].modelSelector.matchExpressions[0].operator",
        ),
    ] {
        let err = load_from_str(&BASE.replace(QWEN, &replacement))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&format!("{field}: ")), "{field}: {err}");
    }
    let err = load_from_str(&BASE.replace("  bbr: {enabled: true}", "  bbr: {}"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("spec.bbr: missing field `enabled`"),
        "{err}"
    );
}

/// The `flowControl` examples in `docs/flow-control.md` load as they are written, and the band
/// ceiling one sets what the page says it sets.
#[test]
fn the_flow_control_pages_examples_are_valid_configs() {
    let page = include_str!("../../../../../docs/flow-control.md");
    let examples: Vec<&str> = page
        .split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .filter(|block| block.starts_with("spec:\n  flowControl:"))
        .collect();
    assert_eq!(
        examples.len(),
        3,
        "the saturation, the band ceiling and the overload examples"
    );
    for example in examples {
        let yaml = format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\n{example}  bbr: {{enabled: true}}\n  schedulers:\n    - {{name: a, modelName: m, modelSelector: {{matchLabels: {{app: a}}}}}}\n  endpoints:\n    - {{address: 127.0.0.1:8000, labels: {{app: a}}}}\n"
        );
        let resolved = resolve(&load_from_str(&yaml).unwrap()).unwrap();
        let fc = &resolved.flow_control;
        if example.contains("saturationCeiling") {
            assert_eq!(fc.bands[2].saturation_ceiling, Setting::set(1.0));
        } else if example.contains("overload") {
            // The page writes the defaults out: set, and equal to what leaving them out gives.
            let o = &fc.overload;
            let d = crate::gateway::ResolvedFlowControl::default().overload;
            assert!(o.enabled.value && d.enabled.value && !o.enabled.is_default);
            assert!(!o.kv_cache_always.value && !d.kv_cache_always.value);
            assert!(o.hold_while_draining.value && d.hold_while_draining.value);
            assert!(!o.hold_while_draining.is_default);
            assert_eq!(o.sensor.value, crate::gateway::OverloadSensor::Sojourn);
            assert_eq!(d.sensor.value, crate::gateway::OverloadSensor::Sojourn);
            assert!(!o.sensor.is_default);
            assert_eq!(
                (o.interval.value, o.max_wait.value),
                (d.interval.value, d.max_wait.value)
            );
            assert_eq!(d.interval.value, std::time::Duration::from_secs(2));
            assert_eq!(d.max_wait.value, std::time::Duration::from_secs(1));
        } else {
            assert_eq!(fc.saturation.running_requests_threshold, Some(120));
            assert_eq!(fc.bands[2].saturation_ceiling, Setting::default_value(0.75));
        }
    }
}
