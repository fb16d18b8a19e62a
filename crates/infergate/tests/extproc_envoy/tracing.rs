//! Traces through Envoy: `infergate extproc` continues the client's trace, records its steps
//! and the request's way to the model server, and hands the model server a `traceparent`
//! naming that span; the spans arrive at a real Jaeger with the right parents and attributes.

use infergate_test_support::jaeger::{assert_children, named, Jaeger, UNAUTHENTICATED_STEPS};

use crate::client::post;
use crate::envoy::{Pool, Spec};
use crate::setup::{gateway_config, Picker, PoolDef, TempDir};
use crate::upstream::{Replica, SSE_EVENTS};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

#[test]
fn a_streamed_request_through_envoy_is_one_trace_down_to_the_model_server() {
    let dir = TempDir::new("extproc-traces");
    let jaeger = Jaeger::start(dir.path());
    let replica = Replica::start("r1");
    let config = gateway_config(
        &[PoolDef {
            name: "llama",
            model: "llama",
            endpoints: vec![replica.addr],
            extra: "",
        }],
        "",
    );
    let env = [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", jaeger.otlp_http),
        ),
        ("OTEL_SERVICE_NAME", "picker".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    let picker = Picker::start_with_env(&config, &env);
    let envoy = Spec {
        pools: vec![Pool {
            cluster: "llama",
            base_model: None,
            endpoints: vec![replica.addr],
        }],
        ext_proc: picker.port,
        fail_open: false,
        tls: false,
    }
    .start(true);

    let body = serde_json::json!({
        "model": "llama",
        "stream": true,
        "messages": [{"role": "user", "content": "walrus umbrella"}],
    })
    .to_string();
    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let headers = [("traceparent", traceparent.as_str())];
    let r = post(
        envoy.port,
        "/v1/chat/completions",
        &headers,
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // The model server was handed the upstream span: the client's trace, a span of infergate's.
    let seen = replica
        .seen
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("a request");
    let sent = seen.headers["traceparent"].to_str().unwrap().to_owned();
    let parts: Vec<&str> = sent.split('-').collect();
    assert_eq!(
        (parts[0], parts[1], parts[3]),
        ("00", TRACE, "01"),
        "{sent}"
    );
    assert_ne!(parts[2], CLIENT_SPAN);

    let spans = jaeger.spans(&format!("/api/traces/{TRACE}"), 5);
    let root = named(&spans, "POST /v1/chat/completions");
    assert_eq!(root.service, "picker");
    assert_eq!(root.parent.as_deref(), Some(CLIENT_SPAN));
    assert_eq!(root.tags["http.response.status_code"], 200);
    assert_children(&spans, root, &UNAUTHENTICATED_STEPS);
    let upstream = named(&spans, "chat llama");
    assert_eq!(
        upstream.id, parts[2],
        "the model server's parent is the upstream span"
    );
    assert_eq!(upstream.parent.as_ref(), Some(&root.id));
    assert_eq!(upstream.tags["span.kind"], "client");
    assert_eq!(upstream.tags["server.port"], i64::from(replica.addr.port()));
    assert_eq!(upstream.tags["gen_ai.usage.input_tokens"], 7);
    assert_eq!(
        upstream.tags["gen_ai.usage.output_tokens"],
        SSE_EVENTS as i64
    );
    for s in &spans {
        for v in s.tags.values() {
            assert!(
                !v.to_string().contains("walrus"),
                "{}: carries the prompt",
                s.name
            );
        }
    }
}
