use super::*;

const MINIMAL: &str = r#"
apiVersion: infergate.dev/v1alpha1
kind: GlobalGatewayConfig
metadata: {name: global}
spec:
  region: us-east
  members:
    - {name: east-a, url: "http://10.0.0.1:8080", adminUrl: "http://10.0.0.1:9090", region: us-east}
    - {name: west-a, url: "http://10.1.0.1", adminUrl: "http://10.1.0.1:9090/", region: us-west}
"#;

fn errors_of(yaml: &str) -> Vec<(String, String)> {
    let e = load_global_from_str(yaml).expect_err("should be refused");
    e.all()
        .iter()
        .map(|e| (e.field().unwrap_or("").to_string(), e.to_string()))
        .collect()
}

fn with_spec(extra: &str) -> String {
    format!("{MINIMAL}{extra}")
}

#[test]
fn minimal_config_takes_every_default() {
    let g = load_global_from_str(MINIMAL).expect("loads");
    assert_eq!(g.members.len(), 2);
    assert_eq!(g.members[0].data.authority, "10.0.0.1:8080");
    assert_eq!(g.members[1].data.authority, "10.1.0.1:80");
    assert_eq!(g.members[1].admin.authority, "10.1.0.1:9090");
    assert!(g.routing.weights.is_default);
    let w = g.routing.weights.value;
    let sum = w.kv_headroom + w.queue_depth + w.region_proximity + w.error_rate;
    assert!((sum - 1.0).abs() < 1e-9, "the defaults sum to 1: {sum}");
    assert_eq!(g.status.interval.value, defaults::STATUS_INTERVAL);
    assert_eq!(g.status.misses_before_stale.value, 3);
    assert_eq!(g.slow_start.min_weight.value, 0.1);
    assert_eq!(g.region_header.value, "x-infergate-region");
    assert_eq!(
        g.region_latencies.between("us-east", "us-east"),
        Some(std::time::Duration::ZERO)
    );
    assert_eq!(g.region_latencies.between("us-east", "us-west"), None);
    let printed = g.to_string();
    assert!(printed.contains("east-a"), "{printed}");
    assert!(printed.contains("(default)"), "{printed}");
}

#[test]
fn weights_are_all_or_none_and_sum_to_one() {
    let partial = errors_of(&with_spec(
        "  routing: {weights: {kvHeadroom: 0.5, queueDepth: 0.5}}\n",
    ));
    assert_eq!(partial[0].0, "spec.routing.weights");
    assert!(partial[0].1.contains("regionProximity"), "{partial:?}");
    let off = errors_of(&with_spec(
        "  routing: {weights: {kvHeadroom: 0.5, queueDepth: 0.5, regionProximity: 0.1, errorRate: 0.1}}\n",
    ));
    assert!(off[0].1.contains("sum to 1.2"), "{off:?}");
    let ok = load_global_from_str(&with_spec(
        "  routing: {weights: {kvHeadroom: 0.4, queueDepth: 0.3, regionProximity: 0.2995, errorRate: 0.0}}\n",
    ));
    assert!(ok.is_ok(), "within the 0.001 tolerance: {ok:?}");
    let range = errors_of(&with_spec(
        "  routing: {weights: {kvHeadroom: 1.5, queueDepth: -0.5, regionProximity: 0, errorRate: 0}}\n",
    ));
    let fields: Vec<&str> = range.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.routing.weights.kvHeadroom",
            "spec.routing.weights.queueDepth"
        ]
    );
}

#[test]
fn every_broken_member_field_is_named() {
    let yaml = r#"
apiVersion: infergate.dev/v1alpha1
kind: GlobalGatewayConfig
spec:
  members:
    - {name: Bad_Name, url: "https://a:1/v1", adminUrl: "http://a:2/path", region: ""}
    - {name: b, url: "http://b:1", adminUrl: "http://b:2", region: r, cost: {perGpuHour: 2.0}, weight: 0}
    - {name: b, url: "ftp://c", adminUrl: "http://c:2", region: r, cost: {tier: 1}}
    - {name: d, url: "http://d:1", adminUrl: "http://d:2", region: r}
"#;
    let fields: Vec<String> = errors_of(yaml).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        [
            "spec.members[0].name",
            "spec.members[0].url",
            "spec.members[0].adminUrl",
            "spec.members[0].region",
            "spec.members[0].cost",
            "spec.members[1].weight",
            "spec.members[2].url",
            "spec.members[2].cost",
            "spec.members[3].cost",
            "spec.members[2].name",
        ]
    );
}

#[test]
fn status_and_ramp_rules() {
    let e = errors_of(&with_spec(
        "  status: {interval: 1s, timeout: 1s, missesBeforeStale: 0}\n  slowStart: {aggression: 0, minWeightPercent: 0}\n  outlierDetection: {baseEjectionTime: 60s, maxEjectionTime: 30s}\n  routing: {spillAt: 1.5, maxAttempts: 0}\n",
    ));
    let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.status.timeout",
            "spec.status.missesBeforeStale",
            "spec.routing.spillAt",
            "spec.routing.maxAttempts",
            "spec.outlierDetection.maxEjectionTime",
            "spec.slowStart.aggression",
            "spec.slowStart.minWeightPercent",
        ]
    );
}

#[test]
fn region_latencies_name_known_regions_once() {
    let g = load_global_from_str(&with_spec(
        "  regionLatencies: [{from: us-west, to: us-east, latency: 70ms}]\n",
    ))
    .expect("loads");
    assert_eq!(
        g.region_latencies.between("us-east", "us-west"),
        Some(std::time::Duration::from_millis(70))
    );
    let e = errors_of(&with_spec(
        "  regionLatencies: [{from: us-east, to: mars, latency: 70ms}, {from: us-east, to: us-east, latency: 1ms}]\n",
    ));
    let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.regionLatencies[0].to", "spec.regionLatencies[1]"]
    );
}

#[test]
fn unknown_fields_and_kinds_are_refused() {
    let e = load_global_from_str(
        &MINIMAL.replace("region: us-east\n  members", "regoin: us-east\n  members"),
    )
    .expect_err("typo");
    assert!(e.to_string().contains("regoin"), "{e}");
    let wrong =
        errors_of(&MINIMAL.replace("kind: GlobalGatewayConfig", "kind: InferenceGatewayConfig"));
    assert_eq!(wrong[0].0, "kind");
    assert!(is_global_config(MINIMAL));
    assert!(!is_global_config("kind: InferenceGatewayConfig\n"));
}

#[test]
fn callers_sections_follow_the_cluster_tiers_rules() {
    let g = load_global_from_str(&with_spec(
        "  rateLimits:\n    store: redis://127.0.0.1:6379\n    tenants: [{tenant: a, requestsPerSecond: 5}]\n",
    ))
    .expect("loads");
    let limits = g.rate_limits.expect("rate limits resolved");
    assert_eq!(limits.tenants.len(), 1);
    assert!(g.auth.is_none());
    // A claim needs spec.auth, as in InferenceGatewayConfig; the field is named the same.
    let e = errors_of(&with_spec(
        "  tenancy: {tenant: {claim: sub}}\n  rateLimits: {store: \"memcached://x\"}\n",
    ));
    let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.tenancy.tenant.claim", "spec.rateLimits.store"],
        "{e:?}"
    );
}

#[test]
fn https_members_take_443_and_their_tls_settings_are_checked() {
    let g = load_global_from_str(
        r#"
apiVersion: infergate.dev/v1alpha1
kind: GlobalGatewayConfig
spec:
  members:
    - {name: a, url: "https://gw.example", adminUrl: "http://gw.example:9090", region: r, tls: {caFile: /etc/ca.pem, serverName: gw.internal}}
"#,
    )
    .expect("loads");
    let m = &g.members[0];
    assert_eq!(m.data.authority, "gw.example:443");
    assert!(m.data.tls && !m.admin.tls);
    assert_eq!(m.data.host, "gw.example");
    assert_eq!(m.tls.server_name.as_deref(), Some("gw.internal"));
    let e = errors_of(
        r#"
apiVersion: infergate.dev/v1alpha1
kind: GlobalGatewayConfig
spec:
  members:
    - {name: a, url: "http://a", adminUrl: "http://a:2", region: r, tls: {caFile: ""}}
    - {name: b, url: "https://b", adminUrl: "http://b:2", region: r, tls: {serverName: "not a name"}}
"#,
    );
    let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.members[0].tls",
            "spec.members[0].tls.caFile",
            "spec.members[1].tls.serverName"
        ]
    );
}
