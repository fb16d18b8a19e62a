//! The standalone extensions, and the shipped example over the simulated fleet.

use super::*;
use crate::fleet::FleetFile;

#[test]
fn the_standalone_extensions_load_from_yaml() {
    let yaml = format!(
        "{BASE}{}",
        r#"  listen: {address: "0.0.0.0:8080", adminAddress: "127.0.0.1:9091"}
  tls: {certFile: cert.pem, keyFile: key.pem}
  discovery: static
  auth:
    jwt:
      provider:
        name: idp
        issuer: https://idp.example.com
        localJWKS: {file: jwks.json}
        requiredClaims:
          - {name: groups, valueType: StringArray, values: [ml-team]}
  tenancy:
    tenant: {claim: sub}
    criticality: {claim: tier}
    defaultCriticality: Sheddable
  flowControl:
    queueTtl: 10s
    maxQueueRequests: 100
    fairness: weighted-fair
    tenantWeights: {team-a: 3}
    bands:
      - {name: Critical, maxQueueRequests: 50, queueTtl: 1m}
      - {name: Sheddable, saturationCeiling: 0.5}
    saturation: {queueDepthThreshold: 8, kvCacheThreshold: 0.9, metricsStalenessThreshold: 500ms, runningRequestsThreshold: 120, interTokenLatencyThreshold: 60ms}
  rateLimits:
    store: redis://127.0.0.1:6379/0
    onStoreError: failClosed
    default: {requestsPerSecond: 10}
    tenants:
      - {tenant: team-a, requestsPerSecond: 50, tokensPerMinute: 1000000}
  rewrites:
    - name: llama-canary
      matches: [{model: {type: Exact, value: llama}}]
      targets:
        - {modelRewrite: llama-3.1-8b, weight: 90}
        - {modelRewrite: sql-lora, weight: 10}
"#
    );
    let gw = resolve(&load_from_str(&yaml).unwrap()).unwrap();
    assert_eq!(gw.listen, Setting::set("0.0.0.0:8080".parse().unwrap()));
    assert_eq!(
        gw.tls,
        TlsMode::Files {
            cert_file: "cert.pem".into(),
            key_file: "key.pem".into()
        }
    );
    assert_eq!(
        gw.tenancy.criticality,
        Setting::set(Identity::Claim("tier".into()))
    );
    assert_eq!(
        gw.tenancy.default_criticality,
        Setting::set(Band::Sheddable)
    );
    let fc = &gw.flow_control;
    assert_eq!(fc.fairness, Setting::set(Fairness::WeightedFair));
    assert_eq!(fc.bands[0].max_queue_requests, Setting::set(50));
    assert_eq!(fc.bands[0].queue_ttl.value.as_secs(), 60);
    assert_eq!(
        fc.bands[1].queue_ttl,
        Setting::set(std::time::Duration::from_secs(10))
    );
    assert_eq!(fc.bands[2].max_queue_requests, Setting::default_value(1024));
    assert_eq!(fc.bands[2].saturation_ceiling, Setting::set(0.5));
    assert_eq!(fc.bands[0].saturation_ceiling, Setting::default_value(2.0));
    assert_eq!(fc.bands[1].saturation_ceiling, Setting::default_value(1.0));
    assert_eq!(fc.saturation.running_requests_threshold, Some(120));
    assert_eq!(
        fc.saturation.inter_token_latency_threshold,
        Setting::set(std::time::Duration::from_millis(60))
    );
    assert_eq!(
        ResolvedFlowControl::default()
            .saturation
            .inter_token_latency_threshold,
        Setting::default_value(std::time::Duration::from_millis(80))
    );
    let rl = gw.rate_limits.as_ref().unwrap();
    assert_eq!(
        rl.store.value,
        RateLimitStore::Redis {
            url: "redis://127.0.0.1:6379/0".into()
        }
    );
    assert_eq!(rl.tenants["team-a"].tokens_per_minute, Some(1_000_000));
    assert_eq!(
        gw.rewrites[0].targets[1],
        ("sql-lora".into(), Setting::set(10))
    );
    let report = gw.to_string();
    assert!(
        report.contains("llama → llama-3.1-8b weight 90, sql-lora weight 10"),
        "{report}"
    );
    assert!(report.contains("store down: fail closed"), "{report}");
    assert_eq!(
        (rl.store_timeout, rl.default_max_tokens),
        (
            Setting::default_value(std::time::Duration::from_millis(50)),
            Setting::default_value(256)
        )
    );
    assert!(
        report.contains("timeout 50ms (default)") && report.contains("reserve 256 (default)"),
        "{report}"
    );
    // `discovery` also reads in its map form.
    let k8s = REFERENCE_EXAMPLE.replace(
        "  tls: {}",
        "  tls: {}\n  discovery: {kubernetes: {namespace: models}}",
    );
    let gw = resolve(&load_from_str(&k8s).unwrap()).unwrap();
    assert_eq!(
        gw.discovery,
        ResolvedDiscovery::Kubernetes {
            namespace: Setting::set(Some("models".into()))
        }
    );
}

#[test]
fn the_shipped_gateway_config_routes_over_the_simulated_fleet() {
    let config = load_from_str(include_str!("../../../../../deploy/gateway/gateway.yaml")).unwrap();
    let gw = resolve(&config).unwrap();
    assert_eq!(gw.listen.value.to_string(), "127.0.0.1:8080");
    assert_eq!(gw.admin_listen.value.to_string(), "127.0.0.1:9090");
    assert_eq!(gw.pools.len(), 1);
    let fleet = FleetFile::parse(include_str!("../../../../../deploy/sim/fleet.yaml")).unwrap();
    let pool = &gw.pools[0];
    let selected: Vec<(String, &std::collections::BTreeMap<String, String>)> = pool
        .endpoints
        .iter()
        .map(|e| (e.authority.clone(), &e.labels))
        .collect();
    let simulated: Vec<(String, &std::collections::BTreeMap<String, String>)> = fleet
        .iter()
        .filter(|e| e.labels.get("app").map(String::as_str) == Some("vllm-llama"))
        .map(|e| (e.address.to_string(), &e.labels))
        .collect();
    assert_eq!(selected, simulated);
    let served = fleet[0].settings.served_model_name.as_deref();
    assert_eq!(Some(pool.model_name.as_str()), served);
    let r = gw.lookup_model("sql-lora").unwrap();
    assert_eq!(
        (r.pool.name.as_str(), r.base_model),
        ("llama-8b", pool.model_name.as_str())
    );
    let report = gw.to_string();
    assert!(report.contains("8 matched"), "{report}");
}

#[test]
fn discovery_reads_in_every_form() {
    let with =
        |d: &str| REFERENCE_EXAMPLE.replace("  tls: {}", &format!("  tls: {{}}\n  discovery: {d}"));
    for (form, want) in [
        ("kubernetes", Discovery::Kubernetes { namespace: None }),
        (
            "{kubernetes: {}}",
            Discovery::Kubernetes { namespace: None },
        ),
        (
            "{kubernetes: {namespace: ml}}",
            Discovery::Kubernetes {
                namespace: Some("ml".into()),
            },
        ),
    ] {
        let c = load_from_str(&with(form)).unwrap();
        assert_eq!(c.spec.discovery, Some(want), "{form}");
    }
    let statik = BASE.replace("  endpoints:", "  discovery: {static: {}}\n  endpoints:");
    assert_eq!(
        load_from_str(&statik).unwrap().spec.discovery,
        Some(Discovery::Static)
    );
    for (form, needle) in [
        ("dns", "unknown variant `dns`"),
        ("{kubernetes: {ns: x}}", "unknown field `ns`"),
        ("{static: {}, kubernetes: {}}", "not both"),
    ] {
        let err = load_from_str(&with(form)).unwrap_err().to_string();
        assert!(err.starts_with("spec.discovery"), "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
