//! The files a live run writes: the simulated fleet, the gateway's config, Envoy's (round-robin,
//! or in front of the upstream EPP) and the pods the EPP discovers.

use infergate_bench::scenario::Scenario;
use infergate_bench::workload::BenchRequest;
use std::fmt::Write as _;
use std::net::SocketAddr;

/// The model name every replica serves and every request names.
pub const MODEL: &str = "bench";

/// The label every replica carries and the gateway's pool selects.
const APP_LABEL: &str = "bench";

/// The engine seed of replica `index` in a run seeded `seed`: the virtual runner's, so a live
/// replica draws the same step-time jitter as its virtual twin.
pub fn replica_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(1_000).wrapping_add(index as u64)
}

/// The adapters `requests` name, in order of first appearance: what every replica with LoRA
/// slots serves (as the virtual runner registers them) and what the gateway's pool routes.
pub fn adapters(requests: &[BenchRequest]) -> Vec<String> {
    let mut seen = Vec::new();
    for name in requests.iter().filter_map(|r| r.adapter.as_deref()) {
        if !seen.iter().any(|s: &String| s == name) {
            seen.push(name.to_owned());
        }
    }
    seen
}

/// A `SimulatedFleet` with one replica per replica of `scenario`, in its order, at `addrs`;
/// replicas with LoRA slots serve `adapters`.
pub fn fleet_yaml(
    scenario: &Scenario,
    addrs: &[SocketAddr],
    seed: u64,
    adapters: &[String],
) -> String {
    let mut out = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: SimulatedFleet\nspec:\n  \
         defaults: {{servedModelName: {MODEL}}}\n  endpoints:\n"
    );
    for (i, (kind, addr)) in scenario.replicas().zip(addrs).enumerate() {
        let lora = if kind.max_loras() > 0 {
            format!(
                ", maxLoras: {}, maxCpuLoras: {}, loras: [{}]",
                kind.max_loras(),
                kind.settings
                    .max_cpu_loras
                    .unwrap_or(0)
                    .max(kind.max_loras()),
                adapters.join(", ")
            )
        } else {
            String::new()
        };
        // The engine arguments a scenario from a fleet file may set, so the live replica runs
        // the engine its virtual twin runs.
        let s = &kind.settings;
        let mut args = String::new();
        for (name, value) in [
            ("maxNumSeqs", s.max_num_seqs.map(|v| v.to_string())),
            (
                "maxNumBatchedTokens",
                s.max_num_batched_tokens.map(|v| v.to_string()),
            ),
            ("maxModelLen", s.max_model_len.map(|v| v.to_string())),
            ("prefixCaching", s.prefix_caching.map(|v| v.to_string())),
            ("chunkedPrefill", s.chunked_prefill.map(|v| v.to_string())),
            ("schedulingPolicy", s.scheduling_policy.clone()),
        ] {
            if let Some(value) = value {
                let _ = write!(args, ", {name}: {value}");
            }
        }
        let _ = writeln!(
            out,
            "    - address: {addr}\n      labels: {{app: {APP_LABEL}}}\n      \
             sim: {{model: {}, gpu: {}, tp: {}, seed: {}{lora}{args}}}",
            kind.model(),
            kind.gpu(),
            kind.tp(),
            replica_seed(seed, i)
        );
    }
    out
}

/// An `InferenceGatewayConfig` with one pool over `replicas` that picks with the named
/// `policy` and serves `adapters` behind the model; no route timeout, so a long answer is never
/// cut. Flow control is at its defaults with `flow_control`, else off — as the virtual runner
/// puts it in front of the picker only for scenarios with priority bands.
pub fn gateway_yaml(
    policy: &str,
    replicas: &[SocketAddr],
    adapters: &[String],
    flow_control: bool,
) -> String {
    let mut out = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  \
         bbr: {{enabled: true}}\n  schedulers:\n    - name: {MODEL}\n      modelName: {MODEL}\n      \
         modelSelector: {{matchLabels: {{app: {APP_LABEL}}}}}\n      policy: {policy}\n      \
         loraAdapters: [{}]\n      routeTimeout: 0s\n  discovery: static\n  \
         flowControl: {{enabled: {flow_control}}}\n  endpoints:\n",
        adapters.join(", ")
    );
    for addr in replicas {
        let _ = writeln!(
            out,
            "    - {{address: {addr}, labels: {{app: {APP_LABEL}}}}}"
        );
    }
    out
}

/// Envoy as a Kubernetes Service would balance: a static cluster of `replicas`, `ROUND_ROBIN`,
/// HTTP/1.1 upstream, no retries. The route has no timeout (Envoy's default of 15 s would cut
/// long streams) and the circuit breakers are raised beyond any load a run offers, so Envoy
/// never answers 503 on its own and only its balancing is measured.
pub fn envoy_yaml(listen: SocketAddr, admin: SocketAddr, replicas: &[SocketAddr]) -> String {
    let mut out = format!(
        r#"admin:
  address: {{socket_address: {{address: {}, port_value: {}}}}}
static_resources:
  listeners:
  - name: ingress
    address: {{socket_address: {{address: {}, port_value: {}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          codec_type: HTTP1
          route_config:
            name: local
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route: {{cluster: replicas, timeout: 0s}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: replicas
    type: STATIC
    lb_policy: ROUND_ROBIN
    connect_timeout: 1s
    circuit_breakers:
      thresholds:
      - {{max_connections: 100000, max_pending_requests: 100000, max_requests: 100000}}
    load_assignment:
      cluster_name: replicas
      endpoints:
      - lb_endpoints:
"#,
        admin.ip(),
        admin.port(),
        listen.ip(),
        listen.port()
    );
    for r in replicas {
        let _ = writeln!(
            out,
            "        - endpoint: {{address: {{socket_address: {{address: {}, port_value: {}}}}}}}",
            r.ip(),
            r.port()
        );
    }
    out
}

/// Envoy in front of the upstream endpoint picker as the Gateway API Inference Extension's
/// standalone chart configures its Envoy sidecar (v1.5.0, `config/charts/standalone/values.yaml`):
/// every request through `ext_proc` (headers sent, bodies `FULL_DUPLEX_STREAMED` both ways,
/// trailers sent), then to an `ORIGINAL_DST` cluster that connects wherever the EPP's
/// `x-gateway-destination-endpoint` header says. The EPP speaks TLS with a self-signed
/// certificate, which the chart's Envoy accepts unverified; so does this one. Left out: the
/// chart's access logs and its downstream HTTP/2 tuning, which do not change where a request
/// goes or how fast it streams.
pub fn epp_envoy_yaml(listen: SocketAddr, admin: SocketAddr, ext_proc: SocketAddr) -> String {
    format!(
        r#"admin:
  address: {{socket_address: {{address: {}, port_value: {}}}}}
static_resources:
  listeners:
  - name: inference
    address: {{socket_address: {{address: {}, port_value: {}}}}}
    per_connection_buffer_limit_bytes: 32768
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: inference
          codec_type: HTTP1
          route_config:
            name: inference
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route:
                  cluster: original_destination_cluster
                  timeout: 86400s
                  idle_timeout: 86400s
          http_filters:
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service:
                envoy_grpc: {{cluster_name: ext_proc, authority: localhost:{}}}
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 1000s
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
              suppress_envoy_headers: true
  clusters:
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 1000s
    lb_policy: CLUSTER_PROVIDED
    circuit_breakers:
      thresholds:
      - {{max_connections: 40000, max_pending_requests: 40000, max_requests: 40000}}
    original_dst_lb_config:
      use_http_header: true
      http_header_name: x-gateway-destination-endpoint
  - name: ext_proc
    type: STATIC
    connect_timeout: 86400s
    lb_policy: LEAST_REQUEST
    circuit_breakers:
      thresholds:
      - {{max_connections: 40000, max_pending_requests: 40000, max_requests: 40000, max_retries: 1024}}
    health_checks:
    - timeout: 2s
      interval: 10s
      unhealthy_threshold: 3
      healthy_threshold: 2
      reuse_connection: true
      grpc_health_check: {{service_name: envoy.service.ext_proc.v3.ExternalProcessor}}
      tls_options: {{alpn_protocols: [h2]}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context: {{validation_context: {{}}}}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {{initial_stream_window_size: 65536, initial_connection_window_size: 1048576}}
    load_assignment:
      cluster_name: ext_proc
      endpoints:
      - lb_endpoints:
        - endpoint: {{address: {{socket_address: {{address: {}, port_value: {}}}}}}}
"#,
        admin.ip(),
        admin.port(),
        listen.ip(),
        listen.port(),
        ext_proc.port(),
        ext_proc.ip(),
        ext_proc.port()
    )
}

/// One Pod per replica, named `bench-<index>` and labelled as the gateway's pool selects; the
/// API server has no kubelet, so their addresses are written afterwards through the status
/// subresource ([`pod_status_patch`]).
pub fn pods_yaml(replicas: usize) -> String {
    let mut out = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..replicas {
        let _ = writeln!(
            out,
            "- apiVersion: v1\n  kind: Pod\n  metadata: {{name: bench-{i}, labels: {{app: {APP_LABEL}}}}}\n  \
             spec: {{containers: [{{name: server, image: infergate-sim}}]}}"
        );
    }
    out
}

/// A pod's status as a kubelet would report a ready model server at `ip`.
pub fn pod_status_patch(ip: std::net::IpAddr) -> String {
    format!(
        r#"{{"status":{{"phase":"Running","podIP":"{ip}","podIPs":[{{"ip":"{ip}"}}],"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
    )
}

/// An `InferencePool` (`inference.networking.k8s.io/v1`) named `name` over the replicas' pods:
/// the pool's selector, their one `target_port`, and the picker that serves it (a Service
/// `picker` on `picker_port`: nothing resolves it here, Envoy is configured with the picker's
/// address, but the API requires the reference).
pub fn inference_pool_yaml(name: &str, target_port: u16, picker: &str, picker_port: u16) -> String {
    format!(
        "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {{name: {name}}}\n\
         spec:\n  selector: {{matchLabels: {{app: {APP_LABEL}}}}}\n  targetPorts: [{{number: {target_port}}}]\n  \
         endpointPickerRef: {{name: {picker}, port: {{number: {picker_port}}}}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_bench::scenario::ReplicaKind;
    use infergate_bench::workload::Arrivals;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 9000 + i)))
            .collect()
    }

    #[test]
    fn the_fleet_lists_every_replica_with_its_profile_and_the_virtual_runners_seed() {
        let scenario = Scenario {
            id: "t",
            fleet: vec![
                ReplicaKind::new("llama-3.1-8b", "h100", 1, 2),
                ReplicaKind::new("qwen3-32b", "a10g", 4, 1).with_loras(2, 4),
            ],
            arrivals: Arrivals::Poisson,
            lengths: infergate_bench::scenario::Lengths::AzureConversation,
            load: 0.5,
            seed_row: None,
            adapters: None,
            bands: None,
        };
        let adapters = vec!["ad-2".to_owned(), "ad-1".to_owned()];
        let yaml = fleet_yaml(&scenario, &addrs(3), 2, &adapters);
        assert!(yaml.contains(
            "address: 127.0.0.1:9001\n      labels: {app: bench}\n      \
             sim: {model: llama-3.1-8b, gpu: h100, tp: 1, seed: 2001}"
        ));
        let fleet = infergate_config::fleet::FleetFile::parse(&yaml).unwrap();
        assert_eq!(fleet.len(), 3);
        assert_eq!(fleet[0].settings.served_model_name.as_deref(), Some(MODEL));
        assert_eq!(fleet[0].settings.max_loras, None, "no LoRA slots: LoRA off");
        let lora = &fleet[2].settings;
        assert_eq!(
            (lora.gpu.as_deref(), lora.tp, lora.seed),
            (Some("a10g"), Some(4), Some(2002))
        );
        assert_eq!((lora.max_loras, lora.max_cpu_loras), (Some(2), Some(4)));
        assert_eq!(lora.loras.as_deref(), Some(&adapters[..]));
    }

    #[test]
    fn adapters_are_listed_once_in_order_of_first_use() {
        let req = |adapter: Option<&str>| BenchRequest {
            at: std::time::Duration::ZERO,
            prompt_tokens: 1,
            output_tokens: 1,
            block_hashes: Vec::new(),
            adapter: adapter.map(str::to_owned),
            band: None,
            tenant: None,
        };
        let reqs = [req(Some("b")), req(None), req(Some("a")), req(Some("b"))];
        assert_eq!(adapters(&reqs), vec!["b", "a"]);
    }

    #[test]
    fn every_picker_policy_configures_the_gateways_pool() {
        let served = vec!["ad-1".to_owned()];
        for name in infergate_picker::Policy::NAMES {
            let yaml = gateway_yaml(name, &addrs(2), &served, false);
            let config = infergate_config::gateway::load_from_str(&yaml).unwrap();
            let resolved = config.resolve().unwrap();
            let pool = resolved.pool(MODEL).unwrap();
            assert_eq!(pool.endpoints.len(), 2);
            assert_eq!(pool.adapters, served);
            assert!(!resolved.flow_control.enabled.value, "flow control off");
            let policy = infergate_control::policy::pool_policy(pool, None, None).unwrap();
            assert_eq!(policy.name(), name);
        }
        let on = infergate_config::gateway::load_from_str(&gateway_yaml(
            "infergate",
            &addrs(1),
            &[],
            true,
        ))
        .unwrap()
        .resolve()
        .unwrap();
        assert!(on.flow_control.enabled.value, "flow control on");
        let yaml = gateway_yaml("fastest", &addrs(1), &[], false);
        let resolved = infergate_config::gateway::load_from_str(&yaml)
            .unwrap()
            .resolve()
            .unwrap();
        let err = infergate_control::policy::pool_policy(resolved.pool(MODEL).unwrap(), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fastest") && err.contains("least-request"),
            "{err}"
        );
    }

    #[test]
    fn envoy_balances_round_robin_over_every_replica() {
        let envoy = envoy_yaml(
            SocketAddr::from(([127, 0, 0, 1], 80)),
            SocketAddr::from(([127, 0, 0, 1], 81)),
            &addrs(2),
        );
        assert!(envoy.contains("port_value: 9000") && envoy.contains("port_value: 9001"));
        assert!(envoy.contains("lb_policy: ROUND_ROBIN"));
    }

    #[test]
    fn the_epp_envoy_is_one_envoy_accepts_and_routes_where_the_picker_says() {
        let at = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let yaml = epp_envoy_yaml(at(80), at(81), at(82));
        assert!(yaml.contains("type: ORIGINAL_DST"), "{yaml}");
        assert!(yaml.contains("http_header_name: x-gateway-destination-endpoint"));
        assert!(yaml.contains("request_body_mode: FULL_DUPLEX_STREAMED"));
        assert!(yaml.contains("address: 127.0.0.1, port_value: 82"));
        // The real Envoy the peer runs checks every field and type URL without starting.
        let envoy = crate::router::find_envoy().unwrap();
        let dir = std::env::temp_dir().join(format!("infergate-live-epp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("envoy.yaml");
        std::fs::write(&config, &yaml).unwrap();
        let out = std::process::Command::new(envoy)
            .args(["--mode", "validate", "-c"])
            .arg(&config)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn every_replica_is_a_pod_the_pool_selects_made_ready_at_its_address() {
        let yaml = pods_yaml(3);
        assert_eq!(yaml.matches("kind: Pod").count(), 3);
        assert!(yaml.contains("metadata: {name: bench-2, labels: {app: bench}}"));
        let pool = inference_pool_yaml("bench", 8000, "gie-epp", 9002);
        assert!(
            pool.contains("selector: {matchLabels: {app: bench}}"),
            "{pool}"
        );
        assert!(pool.contains("targetPorts: [{number: 8000}]"), "{pool}");
        assert!(
            pool.contains("endpointPickerRef: {name: gie-epp, port: {number: 9002}}"),
            "{pool}"
        );
        let patch: serde_json::Value =
            serde_json::from_str(&pod_status_patch("127.0.2.7".parse().unwrap())).unwrap();
        assert_eq!(patch["status"]["podIP"], "127.0.2.7");
        assert_eq!(patch["status"]["phase"], "Running");
        assert_eq!(patch["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(patch["status"]["conditions"][0]["status"], "True");
    }
}
