//! Traces, end to end, into a real collector: `infergate serve` exporting over OTLP (HTTP and
//! gRPC) to Jaeger (built by tests/traces/jaeger), read back through Jaeger's query API. A
//! request's spans form one tree under the client's span: the request, each pipeline step, the
//! upstream attempt with its GenAI attributes; a refusal is an error span; no span carries
//! the prompt.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::*;
use infergate_test_support::jaeger::{assert_children, named, Jaeger, Span, UNAUTHENTICATED_STEPS};
use serde_json::Value;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// Words of the prompt, which must appear in no span.
const PROMPT: &str = "zebra quartz lighthouse";

/// The gateway on one instant replica, exporting as `env` says.
fn gateway(dir: &TempDir, replica: u16, env: &[(&str, String)]) -> (Running, u16, u16) {
    let config = dir.path().join("gateway.yaml");
    std::fs::write(&config, one_pool_config(MODEL, replica, "", "")).unwrap();
    serve_ready(&config, |c| {
        c.env("OTEL_BSP_SCHEDULE_DELAY", "100");
        for (k, v) in env {
            c.env(k, v);
        }
    })
}

fn chat_body(stream: bool) -> String {
    let mut body = serde_json::json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 4,
        "stream": stream,
    });
    if stream {
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    body.to_string()
}

#[test]
fn a_streamed_request_is_one_tree_under_the_clients_span_exported_over_http() {
    let dir = TempDir::new("traces-http");
    let jaeger = Jaeger::start(dir.path());
    let http = jaeger.otlp_http;
    let (_replica, replica) = instant_replica(MODEL);
    let endpoint = format!("http://127.0.0.1:{http}");
    let (mut gw, port, admin) = gateway(
        &dir,
        replica,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_SERVICE_NAME", "gw-http".to_owned()),
        ],
    );
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let answer = post(
        port,
        "/v1/chat/completions",
        &[("traceparent", &traceparent), ("tracestate", "vendor=1")],
        &chat_body(true),
        Duration::from_secs(10),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);

    let spans = jaeger.spans(&format!("/api/traces/{CLIENT_TRACE}"), 5);
    let root = named(&spans, "POST /v1/chat/completions");
    assert_eq!(root.service, "gw-http");
    assert_eq!(
        root.parent.as_deref(),
        Some(CLIENT_SPAN),
        "continues the client's span"
    );
    assert_eq!(root.tags["span.kind"], "server");
    assert_eq!(root.tags["http.response.status_code"], 200);
    assert_eq!(root.tags["gen_ai.operation.name"], "chat");
    assert_eq!(root.tags["gen_ai.request.model"], MODEL);
    assert_eq!(root.tags["infergate.pool"], "llama");
    assert_children(&spans, root, &UNAUTHENTICATED_STEPS);
    let route = named(&spans, "infergate.route");
    assert_eq!(route.tags["gen_ai.request.stream"], true);
    let pick = named(&spans, "infergate.pick");
    let address = format!("127.0.0.1:{replica}");
    assert_eq!(pick.tags["infergate.endpoint"], address.as_str());
    let explanation: Value =
        serde_json::from_str(pick.tags["infergate.pick.explanation"].as_str().unwrap()).unwrap();
    assert_eq!(explanation["primary"], address.as_str());

    let upstream = named(&spans, &format!("chat {MODEL}"));
    assert_eq!(upstream.parent.as_ref(), Some(&root.id));
    assert_eq!(upstream.tags["span.kind"], "client");
    assert_eq!(upstream.tags["server.port"], i64::from(replica));
    assert_eq!(upstream.tags["http.response.status_code"], 200);
    assert!(upstream.tags["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0);
    assert!(
        upstream.tags["gen_ai.usage.output_tokens"]
            .as_i64()
            .unwrap()
            > 0
    );
    assert!(
        upstream.tags["gen_ai.response.time_to_first_chunk"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    for s in &spans {
        for (k, v) in &s.tags {
            assert!(
                !v.to_string().contains("zebra"),
                "{}: {k} carries the prompt",
                s.name
            );
        }
    }
    assert_eq!(metric(admin, "infergate_trace_spans_dropped_total"), 0.0);
    assert!(metric(admin, "infergate_trace_spans_exported_total") >= 5.0);
    terminate(&mut gw.0, "the gateway");
}

#[test]
fn grpc_export_a_new_trace_and_a_refusal_as_an_error_span() {
    let dir = TempDir::new("traces-grpc");
    let jaeger = Jaeger::start(dir.path());
    let grpc = jaeger.otlp_grpc;
    let (_replica, replica) = instant_replica(MODEL);
    let (mut gw, port, _admin) = gateway(
        &dir,
        replica,
        &[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                format!("http://127.0.0.1:{grpc}"),
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
            ("OTEL_SERVICE_NAME", "gw-grpc".to_owned()),
        ],
    );
    // No traceparent: the trace starts here. Then a model no pool serves.
    let ok = post(
        port,
        "/v1/chat/completions",
        &[],
        &chat_body(false),
        Duration::from_secs(10),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let refused = chat_body(false).replace(MODEL, "no-such-model");
    let refused = post(
        port,
        "/v1/chat/completions",
        &[],
        &refused,
        Duration::from_secs(10),
    );
    assert_eq!(refused.status, 404, "{}", refused.body);

    let spans = jaeger.spans("/api/traces?service=gw-grpc&limit=20", 7);
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "POST /v1/chat/completions")
        .collect();
    assert_eq!(roots.len(), 2, "{spans:#?}");
    assert!(
        roots.iter().all(|r| r.parent.is_none()),
        "each trace starts at the gateway"
    );
    let failed = roots
        .iter()
        .find(|r| r.tags["http.response.status_code"] == 404)
        .expect("the refusal's span");
    assert_eq!(failed.tags["error"], true);
    assert!(failed.tags.contains_key("error.type"));
    let route_failed = spans
        .iter()
        .find(|s| s.name == "infergate.route" && s.parent.as_ref() == Some(&failed.id))
        .expect("the refused request's route step");
    assert_eq!(route_failed.tags["error"], true);
    let answered = roots
        .iter()
        .find(|r| r.tags["http.response.status_code"] == 200)
        .unwrap();
    let upstream = named(&spans, &format!("chat {MODEL}"));
    assert_eq!(upstream.parent.as_ref(), Some(&answered.id));
    assert!(
        upstream.tags["gen_ai.usage.output_tokens"]
            .as_i64()
            .unwrap()
            > 0
    );
    terminate(&mut gw.0, "the gateway");
}
