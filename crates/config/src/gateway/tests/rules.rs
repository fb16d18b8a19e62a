//! Every validation rule refuses a config with an error naming the field's path.

use super::*;

#[test]
fn every_rule_names_the_field_it_refuses() {
    type Mutation = Box<dyn Fn(&mut InferenceGatewayConfig)>;
    let cases: Vec<(&str, Mutation)> = vec![
        ("spec.bbr.enabled", Box::new(|c| c.spec.bbr.enabled = false)),
        (
            "spec.bbr.maxRequestBodyBytes",
            Box::new(|c| c.spec.bbr.max_request_body_bytes = Some(268_435_457)),
        ),
        (
            "spec.bbr.defaultBackend.port",
            Box::new(|c| {
                c.spec.bbr.default_backend = Some(DefaultBackendSpec {
                    name: "qwen".into(),
                    port: Some(8000),
                })
            }),
        ),
        ("spec.schedulers", Box::new(|c| c.spec.schedulers.clear())),
        (
            "spec.schedulers",
            Box::new(|c| {
                let one = c.spec.schedulers[1].clone();
                c.spec.schedulers = (0..101)
                    .map(|i| SchedulerSpec {
                        name: format!("p{i}"),
                        model_name: format!("m{i}"),
                        ..one.clone()
                    })
                    .collect();
            }),
        ),
        (
            "spec.schedulers[1].name",
            Box::new(|c| sch(c, 1).name = "llama".into()),
        ),
        (
            "spec.schedulers[0].name",
            Box::new(|c| sch(c, 0).name = "x".repeat(64)),
        ),
        (
            "spec.schedulers[0].name",
            Box::new(|c| sch(c, 0).name = "Llama_8B".into()),
        ),
        (
            "spec.schedulers[1].modelName",
            Box::new(|c| sch(c, 1).model_name = "llama-3.1-8b".into()),
        ),
        (
            "spec.schedulers[0].modelName",
            Box::new(|c| sch(c, 0).model_name = "m".repeat(254)),
        ),
        (
            "spec.schedulers[0].modelSelector",
            Box::new(|c| sch(c, 0).model_selector = LabelSelector::default()),
        ),
        (
            "spec.schedulers[0].modelSelector.matchExpressions[0].values",
            Box::new(|c| {
                sch(c, 0)
                    .model_selector
                    .match_expressions
                    .push(LabelRequirement {
                        key: "gpu".into(),
                        operator: SelectorOperator::In,
                        values: vec![],
                    })
            }),
        ),
        (
            "spec.schedulers[0].targetPort",
            Box::new(|c| sch(c, 0).target_port = Some(0)),
        ),
        (
            "spec.schedulers[0].targetPort",
            Box::new(|c| sch(c, 0).target_port = Some(65_536)),
        ),
        (
            "spec.schedulers[0].configMapRef",
            Box::new(|c| {
                sch(c, 0).weights = Some(Weights::default());
                sch(c, 0).config_map_ref = Some(ConfigMapRef {
                    name: "plugins".into(),
                    key: None,
                });
            }),
        ),
        (
            "spec.schedulers[0].pickerConfigFile",
            Box::new(|c| {
                sch(c, 0).weights = Some(Weights::default());
                sch(c, 0).picker_config_file = Some("epp.yaml".into());
            }),
        ),
        (
            "spec.schedulers[0].policy",
            Box::new(|c| {
                sch(c, 0).weights = Some(Weights::default());
                sch(c, 0).policy = Some("infergate".into());
            }),
        ),
        (
            "spec.schedulers[0].policy",
            Box::new(|c| {
                sch(c, 0).weights = None;
                sch(c, 0).picker_config_file = Some("epp.yaml".into());
                sch(c, 0).policy = Some("infergate".into());
            }),
        ),
        (
            "spec.schedulers[0].policy",
            Box::new(|c| {
                sch(c, 0).weights = None;
                sch(c, 0).policy = Some(String::new());
            }),
        ),
        (
            "spec.schedulers[0].configMapRef",
            // A ConfigMap cannot be read with static discovery.
            Box::new(|c| {
                sch(c, 0).config_map_ref = Some(ConfigMapRef {
                    name: "plugins".into(),
                    key: None,
                })
            }),
        ),
        (
            "spec.schedulers[0].weights.lru",
            Box::new(|c| {
                sch(c, 0).scheduler = Some(SchedulerKind::Epp);
                sch(c, 0).weights = Some(Weights {
                    lru: Some(1),
                    ..Weights::default()
                });
            }),
        ),
        (
            "spec.schedulers[0].loraAdapters",
            Box::new(|c| sch(c, 0).lora_adapters = (0..51).map(|i| format!("a{i}")).collect()),
        ),
        (
            "spec.schedulers[0].loraAdapters[1]",
            Box::new(|c| sch(c, 0).lora_adapters.push("sql-lora".into())),
        ),
        (
            "spec.schedulers[1].loraAdapters[0]",
            // An adapter claimed by two schedulers.
            Box::new(|c| sch(c, 1).lora_adapters.push("sql-lora".into())),
        ),
        (
            "spec.schedulers[0].replicas",
            Box::new(|c| sch(c, 0).replicas = Some(0)),
        ),
        (
            "spec.schedulers[0].logLevel",
            Box::new(|c| sch(c, 0).log_level = Some(6)),
        ),
        (
            "spec.tls.keyFile",
            Box::new(|c| {
                c.spec.tls = Some(Tls {
                    cert_file: Some("cert.pem".into()),
                    ..Tls::default()
                })
            }),
        ),
        (
            "spec.tls.acmArn",
            Box::new(|c| {
                c.spec.tls = Some(Tls {
                    acm_arn: Some("my-cert".into()),
                    ..Tls::default()
                })
            }),
        ),
        (
            "spec.auth.jwt.provider.audiences",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.audiences = (0..9).map(|i| format!("aud{i}")).collect();
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.audiences",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.audiences.clear();
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.requiredClaims",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.required_claims = (0..17).map(|i| claim(&format!("c{i}"))).collect();
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.requiredClaims[0].values",
            Box::new(|c| {
                let mut a = auth();
                let mut cl = claim("tier");
                cl.values.clear();
                a.jwt.provider.required_claims.push(cl);
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.requiredClaims[0].values",
            Box::new(|c| {
                let mut a = auth();
                let mut cl = claim("tier");
                cl.values = (0..129).map(|i| format!("v{i}")).collect();
                a.jwt.provider.required_claims.push(cl);
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.requiredClaims[1].name",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.required_claims = vec![claim("tier"), claim("tier")];
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.localJWKS",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.local_jwks = Some(LocalJwks {
                    file: "jwks.json".into(),
                });
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.remoteJWKS",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.remote_jwks = None;
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.auth.jwt.provider.remoteJWKS.uri",
            Box::new(|c| {
                let mut a = auth();
                a.jwt.provider.remote_jwks = Some(RemoteJwks {
                    uri: "idp.example.com/jwks".into(),
                });
                c.spec.auth = Some(a);
            }),
        ),
        (
            "spec.listen.address",
            Box::new(|c| {
                c.spec.listen = Some(Listen {
                    address: Some("localhost:8080".into()),
                    admin_address: None,
                    ..Default::default()
                })
            }),
        ),
        (
            "spec.listen.adminAddress",
            Box::new(|c| {
                c.spec.listen = Some(Listen {
                    address: Some("127.0.0.1:9090".into()),
                    admin_address: None,
                    ..Default::default()
                })
            }),
        ),
        (
            "spec.listen.connections.maxConnections",
            Box::new(|c| {
                c.spec.listen = Some(Listen {
                    connections: Some(ConnectionLimits {
                        max_connections: Some(0),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }),
        ),
        (
            "spec.listen.connections.perSourceShare",
            Box::new(|c| {
                c.spec.listen = Some(Listen {
                    connections: Some(ConnectionLimits {
                        per_source_share: Some(0.0),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }),
        ),
        (
            "spec.listen.connections.perSourceShare",
            Box::new(|c| {
                c.spec.listen = Some(Listen {
                    connections: Some(ConnectionLimits {
                        per_source_share: Some(1.5),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }),
        ),
        (
            "spec.listen.connections.http2KeepAliveTimeout",
            Box::new(|c| {
                c.spec.listen = Some(Listen {
                    connections: Some(ConnectionLimits {
                        http2_keep_alive_interval: Some(GatewayDuration::from_millis(5_000)),
                        http2_keep_alive_timeout: Some(GatewayDuration::from_millis(0)),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }),
        ),
        (
            "spec.bbr.maxBufferedBodyBytes",
            Box::new(|c| c.spec.bbr.max_buffered_body_bytes = Some(0)),
        ),
        (
            "spec.bbr.maxBufferedBodyBytes",
            Box::new(|c| {
                c.spec.bbr.max_request_body_bytes = Some(1_000_000);
                c.spec.bbr.max_buffered_body_bytes = Some(999_999);
            }),
        ),
        (
            "spec.endpoints[1].address",
            Box::new(|c| {
                if let Some(e) = c.spec.endpoints.as_mut() {
                    e[1].address = "http://10.0.0.2:8000".into();
                }
            }),
        ),
        (
            "spec.endpoints[1].address",
            Box::new(|c| {
                if let Some(e) = c.spec.endpoints.as_mut() {
                    e[1].address = "10.0.0.1:8001".into();
                }
            }),
        ),
        (
            "spec.endpoints[0].labels.bad key",
            Box::new(|c| {
                if let Some(e) = c.spec.endpoints.as_mut() {
                    e[0].labels.insert("bad key".into(), "x".into());
                }
            }),
        ),
        (
            "spec.endpoints",
            Box::new(|c| c.spec.endpoints = Some(vec![])),
        ),
        (
            "spec.endpoints",
            Box::new(|c| c.spec.discovery = Some(Discovery::Kubernetes { namespace: None })),
        ),
        (
            "spec.loraAdapterMaps[0].baseModel",
            Box::new(|c| {
                c.spec.lora_adapter_maps.push(LoraAdapterMap {
                    base_model: "mistral-7b".into(),
                    adapters: vec!["x".into()],
                })
            }),
        ),
        (
            "spec.loraAdapterMaps[0].adapters[0]",
            Box::new(|c| {
                c.spec.lora_adapter_maps.push(LoraAdapterMap {
                    base_model: "qwen3-32b".into(),
                    adapters: vec!["sql-lora".into()],
                })
            }),
        ),
        (
            "spec.tenancy.tenant.claim",
            Box::new(|c| {
                c.spec.tenancy = Some(Tenancy {
                    tenant: Some(IdentitySource {
                        claim: Some("sub".into()),
                        header: None,
                    }),
                    ..Tenancy::default()
                })
            }),
        ),
        (
            "spec.tenancy.criticality.header",
            Box::new(|c| {
                c.spec.tenancy = Some(Tenancy {
                    criticality: Some(IdentitySource {
                        claim: None,
                        header: Some("X-Tier".into()),
                    }),
                    ..Tenancy::default()
                })
            }),
        ),
        (
            "spec.flowControl.bands[1].name",
            Box::new(|c| {
                let band = BandSpec {
                    max_queue_requests: Some(10),
                    ..band_ceiling(Band::Sheddable, None)
                };
                c.spec.flow_control = Some(FlowControl {
                    bands: vec![band.clone(), band],
                    ..FlowControl::default()
                });
            }),
        ),
        (
            "spec.flowControl.bands[0].saturationCeiling",
            Box::new(|c| with_bands(c, vec![band_ceiling(Band::Sheddable, Some(0.0))])),
        ),
        (
            "spec.flowControl.bands[0].saturationCeiling",
            Box::new(|c| with_bands(c, vec![band_ceiling(Band::Standard, Some(f64::NAN))])),
        ),
        // Above Standard's default ceiling (1): Sheddable would dispatch where Standard waits.
        (
            "spec.flowControl.bands[0].saturationCeiling",
            Box::new(|c| with_bands(c, vec![band_ceiling(Band::Sheddable, Some(1.5))])),
        ),
        // Standard above a configured Critical: the lower band's entry is named.
        (
            "spec.flowControl.bands[1].saturationCeiling",
            Box::new(|c| {
                with_bands(
                    c,
                    vec![
                        band_ceiling(Band::Critical, Some(1.2)),
                        band_ceiling(Band::Standard, Some(1.5)),
                    ],
                )
            }),
        ),
        // Critical lowered under Standard's default: Critical's entry is named.
        (
            "spec.flowControl.bands[0].saturationCeiling",
            Box::new(|c| with_bands(c, vec![band_ceiling(Band::Critical, Some(0.9))])),
        ),
        (
            "spec.flowControl.saturation.kvCacheThreshold",
            Box::new(|c| {
                c.spec.flow_control = Some(FlowControl {
                    saturation: Some(Saturation {
                        kv_cache_threshold: Some(1.5),
                        ..Saturation::default()
                    }),
                    ..FlowControl::default()
                });
            }),
        ),
        (
            "spec.flowControl.saturation.runningRequestsThreshold",
            Box::new(|c| {
                c.spec.flow_control = Some(FlowControl {
                    saturation: Some(Saturation {
                        running_requests_threshold: Some(0),
                        ..Saturation::default()
                    }),
                    ..FlowControl::default()
                });
            }),
        ),
        (
            "spec.flowControl.tenantWeights",
            Box::new(|c| {
                c.spec.flow_control = Some(FlowControl {
                    tenant_weights: [("a".to_owned(), 2)].into(),
                    ..FlowControl::default()
                });
            }),
        ),
        (
            "spec.rateLimits.store",
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    store: Some("memcached://x".into()),
                    default: Some(RateLimit {
                        requests_per_second: Some(10),
                        tokens_per_minute: None,
                    }),
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.onStoreError",
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    on_store_error: Some(StoreFailure::FailClosed),
                    default: Some(RateLimit {
                        requests_per_second: Some(10),
                        tokens_per_minute: None,
                    }),
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.default.tokensPerMinute",
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    default: Some(RateLimit {
                        requests_per_second: None,
                        tokens_per_minute: Some(0),
                    }),
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.tenants[1].tenant",
            Box::new(|c| {
                let t = TenantRateLimit {
                    tenant: "team-a".into(),
                    requests_per_second: Some(5),
                    tokens_per_minute: None,
                };
                c.spec.rate_limits = Some(RateLimits {
                    tenants: vec![t.clone(), t],
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.storeTimeout",
            // The local store is never waited for.
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    store_timeout: Some(GatewayDuration::parse("100ms").unwrap()),
                    default: Some(RateLimit {
                        requests_per_second: Some(10),
                        tokens_per_minute: None,
                    }),
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.storeTimeout",
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    store: Some("redis://r".into()),
                    store_timeout: Some(GatewayDuration::parse("0s").unwrap()),
                    default: Some(RateLimit {
                        requests_per_second: Some(10),
                        tokens_per_minute: None,
                    }),
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.defaultMaxTokens",
            // No limit counts tokens, so nothing would read it.
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    default_max_tokens: Some(100),
                    default: Some(RateLimit {
                        requests_per_second: Some(10),
                        tokens_per_minute: None,
                    }),
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rateLimits.tenants[0].tokensPerMinute",
            Box::new(|c| {
                c.spec.rate_limits = Some(RateLimits {
                    tenants: vec![TenantRateLimit {
                        tenant: "team-a".into(),
                        requests_per_second: None,
                        tokens_per_minute: Some(10_000_000_001),
                    }],
                    ..RateLimits::default()
                })
            }),
        ),
        (
            "spec.rewrites[0].targets[1].weight",
            Box::new(|c| {
                c.spec.rewrites = vec![rewrite(
                    "llama",
                    &[("llama-3.1-8b", Some(90)), ("qwen3-32b", Some(0))],
                )]
            }),
        ),
        (
            "spec.rewrites[0].targets",
            Box::new(|c| c.spec.rewrites = vec![rewrite("llama", &[])]),
        ),
        (
            "spec.rewrites[1].matches[0].model.value",
            Box::new(|c| {
                c.spec.rewrites = vec![
                    rewrite("llama", &[("llama-3.1-8b", None)]),
                    rewrite("llama", &[("qwen3-32b", None)]),
                ]
            }),
        ),
        (
            "spec.rewrites[0].targets[0].modelRewrite",
            // Rewrites apply once: a target may not be another rule's match.
            Box::new(|c| {
                c.spec.rewrites = vec![
                    rewrite("a", &[("b", None)]),
                    rewrite("b", &[("llama-3.1-8b", None)]),
                ]
            }),
        ),
        (
            "spec.rewrites[0].targets[1].modelRewrite",
            // A target must be a served model or adapter.
            Box::new(|c| {
                c.spec.rewrites = vec![rewrite(
                    "llama",
                    &[("llama-3.1-8b", Some(9)), ("llama-3.2-8b", Some(1))],
                )]
            }),
        ),
    ];
    for (field, mutate) in cases {
        let mut c = base();
        mutate(&mut c);
        let (got, message) = refused(&c);
        assert_eq!(got, field, "{message}");
    }
}

/// A `bands[]` entry setting only `saturationCeiling`.
fn band_ceiling(name: Band, saturation_ceiling: Option<f64>) -> BandSpec {
    BandSpec {
        name,
        max_queue_requests: None,
        max_queue_bytes: None,
        queue_ttl: None,
        saturation_ceiling,
    }
}

fn with_bands(c: &mut InferenceGatewayConfig, bands: Vec<BandSpec>) {
    c.spec.flow_control = Some(FlowControl {
        bands,
        ..FlowControl::default()
    });
}

#[test]
fn ceilings_that_descend_from_critical_are_accepted() {
    let mut c = base();
    with_bands(
        &mut c,
        vec![
            band_ceiling(Band::Sheddable, Some(1.0)),
            band_ceiling(Band::Critical, Some(3.0)),
        ],
    );
    let resolved = resolve(&c).unwrap();
    let ceilings = resolved
        .flow_control
        .bands
        .map(|b| b.saturation_ceiling.value);
    assert_eq!(ceilings, [3.0, 1.0, 1.0]);
}
