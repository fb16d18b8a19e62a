//! The Envoy of a test (started by the test-support crate), configured like `deploy/envoy/`
//! (client destinations dropped, ext_proc in FULL_DUPLEX_STREAMED mode, override-host
//! clusters, retries down infergate's list) plus a Lua filter for subset hints. Its health check of infergate is lenient (three
//! failures of five seconds each): no test here proves how fast Envoy notices infergate gone,
//! and on a loaded machine one slow probe would otherwise refuse every request for a second.

use std::net::SocketAddr;

use crate::common::wait_for;
pub use infergate_test_support::envoy::{binary, Envoy};

/// One pool's cluster.
pub struct Pool {
    pub cluster: &'static str,
    /// Routed by `x-gateway-base-model-name`; `None`: the catch-all route.
    pub base_model: Option<&'static str>,
    pub endpoints: Vec<SocketAddr>,
}

/// What the Envoy of a test looks like.
pub struct Spec {
    pub pools: Vec<Pool>,
    /// infergate's ext_proc port.
    pub ext_proc: u16,
    pub fail_open: bool,
    /// Speak TLS to infergate (accepting its self-signed certificate).
    pub tls: bool,
}

/// A Lua filter before ext_proc that turns test headers into the subset hint: `x-test-subset`
/// as a string, `x-test-subset-list` (comma-separated) as a list.
const SUBSET_LUA: &str = r#"
function envoy_on_request(h)
  local s = h:headers():get("x-test-subset")
  if s ~= nil then
    h:streamInfo():dynamicMetadata():set("envoy.lb.subset_hint", "x-gateway-destination-endpoint-subset", s)
  end
  local l = h:headers():get("x-test-subset-list")
  if l ~= nil then
    local t = {}
    for e in string.gmatch(l, "[^,]+") do table.insert(t, e) end
    h:streamInfo():dynamicMetadata():set("envoy.lb.subset_hint", "x-gateway-destination-endpoint-subset", t)
  end
end
"#;

fn config(spec: &Spec, port: u16, admin: u16) -> String {
    let mut routes = String::new();
    for p in &spec.pools {
        let matcher = match p.base_model {
            Some(m) => format!(
                "{{prefix: \"/\", headers: [{{name: x-gateway-base-model-name, string_match: {{exact: \"{m}\"}}}}]}}"
            ),
            None => "{prefix: \"/\"}".to_owned(),
        };
        routes.push_str(&format!(
            "              - match: {matcher}
                route:
                  cluster: {}
                  timeout: 60s
                  retry_policy:
                    retry_on: connect-failure,refused-stream,reset,retriable-status-codes
                    retriable_status_codes: [503]
                    num_retries: 2
",
            p.cluster
        ));
    }
    let lua = SUBSET_LUA
        .lines()
        .map(|l| format!("                  {l}\n"))
        .collect::<String>();
    let mut clusters = String::new();
    for p in &spec.pools {
        let endpoints: String = p
            .endpoints
            .iter()
            .map(|e| {
                format!(
                    "        - endpoint: {{address: {{socket_address: {{address: {}, port_value: {}}}}}}}\n",
                    e.ip(),
                    e.port()
                )
            })
            .collect();
        clusters.push_str(&format!(
            "  - name: {c}
    type: STATIC
    connect_timeout: 1s
    load_balancing_policy:
      policies:
      - typed_extension_config:
          name: envoy.load_balancing_policies.override_host
          typed_config:
            \"@type\": type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost
            override_host_sources:
            - header: x-gateway-destination-endpoint
            - metadata: {{key: envoy.lb, path: [{{key: x-gateway-destination-endpoint}}]}}
            selected_host_key: {{key: envoy.lb, path: [{{key: x-gateway-destination-endpoint-served}}]}}
            fallback_policy:
              policies:
              - typed_extension_config:
                  name: envoy.load_balancing_policies.round_robin
                  typed_config:
                    \"@type\": type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin
    load_assignment:
      cluster_name: {c}
      endpoints:
      - lb_endpoints:
{endpoints}",
            c = p.cluster
        ));
    }
    let tls = if spec.tls {
        "    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context: {alpn_protocols: [h2]}
"
    } else {
        ""
    };
    format!(
        "admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  listeners:
  - name: inference
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: inference
          route_config:
            virtual_hosts:
            - name: inference
              domains: [\"*\"]
              routes:
{routes}          http_filters:
          - name: envoy.filters.http.header_mutation
            typed_config:
              \"@type\": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                request_mutations:
                - remove: x-gateway-destination-endpoint
          - name: envoy.filters.http.lua
            typed_config:
              \"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
              default_source_code:
                inline_string: |
{lua}          - name: envoy.filters.http.ext_proc
            typed_config:
              \"@type\": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service: {{envoy_grpc: {{cluster_name: infergate}}, timeout: 10s}}
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
              message_timeout: 1000s
              failure_mode_allow: {fail_open}
              metadata_options:
                forwarding_namespaces: {{untyped: [envoy.lb, envoy.lb.subset_hint]}}
          - name: envoy.filters.http.router
            typed_config:
              \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
{clusters}  - name: infergate
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    health_checks:
    - timeout: 5s
      interval: 1s
      unhealthy_threshold: 3
      healthy_threshold: 1
      grpc_health_check: {{service_name: envoy.service.ext_proc.v3.ExternalProcessor}}
    common_lb_config: {{healthy_panic_threshold: {{value: 0}}}}
{tls}    load_assignment:
      cluster_name: infergate
      endpoints:
      - lb_endpoints:
        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {ext_proc}}}}}}}
",
        fail_open = spec.fail_open,
        ext_proc = spec.ext_proc,
    )
}

impl Spec {
    /// Starts Envoy on this spec ([`Envoy::start`]) and waits until it is live, with every
    /// pool host and (`picker_up`) the infergate host healthy.
    pub fn start(&self, picker_up: bool) -> Envoy {
        let envoy = Envoy::start(|port, admin| config(self, port, admin));
        if picker_up {
            wait_for("Envoy to see infergate healthy", || {
                envoy
                    .clusters()
                    .lines()
                    .any(|l| l.starts_with("infergate::") && l.ends_with("health_flags::healthy"))
            });
        }
        envoy
    }
}
