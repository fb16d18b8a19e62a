//! Pools, static endpoints, label selectors, adapter routing and defaults in resolution.

use super::*;

#[test]
fn bbr_may_be_off_with_one_scheduler_and_then_takes_every_model() {
    let mut c = load_from_str(REFERENCE_EXAMPLE).unwrap();
    c.spec.bbr.enabled = false;
    let gw = resolve(&c).unwrap();
    let route = gw.lookup_model("anything").unwrap();
    assert_eq!(route.pool.name, "llama-70b");
    assert_eq!(route.adapter, None);
}

#[test]
fn static_endpoints_join_the_pools_whose_selector_matches_with_their_own_port_first() {
    let gw = resolve(&base()).unwrap();
    assert_eq!(gw.discovery, ResolvedDiscovery::Static);
    let llama = gw.pool("llama").unwrap();
    let got: Vec<(&str, bool)> = llama
        .endpoints
        .iter()
        .map(|e| (e.authority.as_str(), e.port_from_address))
        .collect();
    assert_eq!(got, [("10.0.0.1:8001", true), ("10.0.0.2:8000", false)]);
    let qwen = gw.pool("qwen").unwrap();
    assert_eq!(qwen.endpoints.len(), 1);
    assert_eq!(qwen.endpoints[0].authority, "10.0.0.3:9000");
    assert_eq!(qwen.endpoints[0].index, 2);
}

#[test]
fn match_expressions_select_static_endpoints_by_every_operator() {
    let cases = [
        ("{key: gpu, operator: In, values: [a10g]}", vec![1]),
        ("{key: gpu, operator: NotIn, values: [a10g]}", vec![0, 2]),
        ("{key: gpu, operator: Exists}", vec![0, 1]),
        ("{key: gpu, operator: DoesNotExist}", vec![2]),
    ];
    for (expr, want) in cases {
        let yaml = BASE.replace(
            "modelSelector: {matchLabels: {app: llama}}",
            &format!("modelSelector: {{matchExpressions: [{expr}]}}"),
        );
        let gw = resolve(&load_from_str(&yaml).unwrap()).unwrap();
        let got: Vec<usize> = gw.pools[0].endpoints.iter().map(|e| e.index).collect();
        assert_eq!(got, want, "{expr}");
    }
    // matchLabels and matchExpressions together.
    let yaml = BASE.replace(
        "modelSelector: {matchLabels: {app: llama}}",
        "modelSelector: {matchLabels: {app: llama}, matchExpressions: [{key: gpu, operator: NotIn, values: [h100]}]}",
    );
    let gw = resolve(&load_from_str(&yaml).unwrap()).unwrap();
    let got: Vec<usize> = gw.pools[0].endpoints.iter().map(|e| e.index).collect();
    assert_eq!(got, [1]);
}

#[test]
fn adapters_route_to_their_base_models_pool() {
    let mut c = base();
    c.spec.lora_adapter_maps.push(LoraAdapterMap {
        base_model: "qwen3-32b".into(),
        adapters: vec!["qwen-sql".into(), "qwen-chat".into()],
    });
    let cm = ConfigMapAdapterMap::parse_all(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: llama-adapters
  labels: {inference.networking.k8s.io/bbr-managed: "true"}
data:
  baseModel: llama-3.1-8b
  adapters: |
    - chat-lora
    - sql-lora
"#,
    )
    .unwrap();
    let gw = resolve_with_config_maps(&c, &cm).unwrap();
    let r = gw.lookup_model("sql-lora").unwrap();
    assert_eq!(
        (r.pool.name.as_str(), r.adapter, r.base_model),
        ("llama", Some("sql-lora"), "llama-3.1-8b")
    );
    let r = gw.lookup_model("chat-lora").unwrap();
    assert_eq!(
        (r.pool.name.as_str(), r.adapter),
        ("llama", Some("chat-lora"))
    );
    let r = gw.lookup_model("qwen-chat").unwrap();
    assert_eq!(
        (r.pool.name.as_str(), r.adapter, r.base_model),
        ("qwen", Some("qwen-chat"), "qwen3-32b")
    );
    let r = gw.lookup_model("qwen3-32b").unwrap();
    assert_eq!((r.pool.name.as_str(), r.adapter), ("qwen", None));
    assert!(gw.lookup_model("mistral-7b").is_none());
    assert_eq!(
        gw.pool("llama").unwrap().adapters,
        ["chat-lora", "sql-lora"]
    );
    assert_eq!(gw.pool("qwen").unwrap().adapters, ["qwen-chat", "qwen-sql"]);
    assert_eq!(gw.adapters.len(), 4);
}

#[test]
fn an_adapter_name_wins_over_a_base_model_name() {
    let c = base();
    let cm = ConfigMapAdapterMap::parse_all(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: odd
  labels: {inference.networking.k8s.io/bbr-managed: "true"}
data: {baseModel: llama-3.1-8b, adapters: "[qwen3-32b]"}
"#,
    )
    .unwrap();
    let gw = resolve_with_config_maps(&c, &cm).unwrap();
    let r = gw.lookup_model("qwen3-32b").unwrap();
    assert_eq!(
        (r.pool.name.as_str(), r.adapter),
        ("llama", Some("qwen3-32b"))
    );
    assert!(
        gw.warnings
            .iter()
            .any(|w| w.contains("an adapter name wins")),
        "{:?}",
        gw.warnings
    );
}

#[test]
fn configmap_adapters_that_conflict_or_route_nowhere_are_reported() {
    let c = base();
    let conflicting = ConfigMapAdapterMap::parse_all(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: clash
  labels: {inference.networking.k8s.io/bbr-managed: "true"}
data: {baseModel: qwen3-32b, adapters: "[sql-lora]"}
"#,
    )
    .unwrap();
    let err = resolve_with_config_maps(&c, &conflicting).unwrap_err();
    assert_eq!(err.field(), Some("ConfigMap/clash data.adapters[0]"));
    assert!(
        err.to_string()
            .contains("spec.schedulers[0].loraAdapters[0]"),
        "{err}"
    );

    let elsewhere = ConfigMapAdapterMap::parse_all(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: other-gateway
  labels: {inference.networking.k8s.io/bbr-managed: "true"}
data: {baseModel: mistral-7b, adapters: "[m-sql]"}
"#,
    )
    .unwrap();
    let gw = resolve_with_config_maps(&c, &elsewhere).unwrap();
    assert!(gw.lookup_model("m-sql").is_none());
    assert!(
        gw.warnings.iter().any(|w| w.contains("mistral-7b")),
        "{:?}",
        gw.warnings
    );
}

#[test]
fn defaults_are_applied_and_marked() {
    let gw = resolve(&base()).unwrap();
    assert_eq!(
        gw.listen,
        Setting::default_value("127.0.0.1:8080".parse().unwrap())
    );
    assert_eq!(
        gw.admin_listen,
        Setting::default_value("127.0.0.1:9090".parse().unwrap())
    );
    let llama = gw.pool("llama").unwrap();
    assert_eq!(llama.target_port, Setting::default_value(8000));
    assert_eq!(llama.scheduler, Setting::default_value(SchedulerKind::LlmD));
    assert_eq!(llama.timeouts.route, Setting::default_value(None));
    let PickerSource::Weights(w) = llama.picker else {
        panic!("weights expected")
    };
    assert_eq!(
        w.entries().map(|(_, s)| (s.value, s.is_default)),
        [
            (2, true),
            (2, true),
            (3, true),
            (0, true),
            (0, true),
            (0, true),
            (0, true)
        ]
    );
    assert_eq!(gw.pool("qwen").unwrap().target_port, Setting::set(9000));
    assert_eq!(
        gw.tenancy.tenant,
        Setting::default_value(Identity::Header("x-gateway-inference-fairness-id".into()))
    );
    assert_eq!(gw.flow_control.enabled, Setting::default_value(true));
    assert_eq!(
        gw.flow_control.saturation.kv_cache_threshold,
        Setting::default_value(0.8)
    );

    let report = gw.to_string();
    for line in [
        "listen            127.0.0.1:8080 (default)",
        "targetPort        8000 (default)",
        "targetPort        9000\n",
        "weights           queue 2 (default), kvCache 2 (default), prefix 3 (default), loraAffinity off (default)",
        "10.0.0.2:8000",
        "port from targetPort",
        "modelSelector     app=llama",
        "unknown models get 404",
    ] {
        assert!(report.contains(line), "{line:?} not in\n{report}");
    }
}

#[test]
fn route_timeouts_and_written_values_resolve() {
    let mut c = base();
    c.spec.schedulers[0].route_timeout = Some(GatewayDuration::parse("30s").unwrap());
    c.spec.schedulers[1].route_timeout = Some(GatewayDuration::parse("0s").unwrap());
    let gw = resolve(&c).unwrap();
    assert_eq!(
        gw.pools[0].timeouts.route,
        Setting::set(Some(std::time::Duration::from_secs(30)))
    );
    assert_eq!(gw.pools[1].timeouts.route, Setting::set(None));
}

#[test]
fn forward_priority_is_off_unless_a_pool_turns_it_on_and_check_says_so() {
    let mut c = base();
    c.spec.schedulers[1].forward_priority = Some(true);
    let gw = resolve(&c).unwrap();
    assert_eq!(gw.pools[0].forward_priority, Setting::default_value(false));
    assert_eq!(gw.pools[1].forward_priority, Setting::set(true));
    let report = gw.to_string();
    assert!(
        report.contains("forwardPriority   off (default)"),
        "{report}"
    );
    assert!(
        report.contains("forwardPriority   on: body `priority` Critical -1, Standard 0"),
        "{report}"
    );
    let yaml = BASE.replace(
        "      targetPort: 9000",
        "      targetPort: 9000\n      forwardPriority: true",
    );
    let gw = resolve(&load_from_str(&yaml).unwrap()).unwrap();
    assert!(gw
        .pools
        .iter()
        .any(|p| p.forward_priority == Setting::set(true)));
}

#[test]
fn deployment_knobs_are_reported_not_ignored() {
    let yaml = BASE.replace(
        "      targetPort: 9000",
        "      targetPort: 9000\n      replicas: 3\n      logLevel: 2\n      env: [{name: FOO, value: bar}]\n      podDefaults: {nodeSelector: {pool: cpu}}",
    )
    .replace("  bbr: {enabled: true}", "  bbr: {enabled: true, replicas: 2}\n  podDefaults: {resources: {requests: {cpu: 1, memory: 1Gi}}}");
    let gw = resolve(&load_from_str(&yaml).unwrap()).unwrap();
    let fields: Vec<&str> = gw
        .deployment_knobs
        .iter()
        .map(|k| k.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.bbr.replicas",
            "spec.podDefaults",
            "spec.schedulers[1].replicas",
            "spec.schedulers[1].env",
            "spec.schedulers[1].podDefaults",
            "spec.schedulers[1].logLevel",
        ]
    );
    let report = gw.to_string();
    assert!(
        report.contains("spec.schedulers[1].logLevel: 2"),
        "{report}"
    );
    assert!(report.contains("spec.podDefaults: resources"), "{report}");
}

#[test]
fn a_named_policy_is_kept_as_written_and_shown() {
    let mut c = base();
    sch(&mut c, 0).weights = None;
    sch(&mut c, 0).policy = Some("least-request".into());
    let gw = resolve(&c).unwrap();
    let pool = gw.pool(&c.spec.schedulers[0].name).unwrap();
    assert_eq!(pool.picker, PickerSource::Named("least-request".into()));
    assert!(gw.to_string().contains("policy least-request"), "{gw}");
}
