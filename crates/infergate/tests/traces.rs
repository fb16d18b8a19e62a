//! Traces, end to end, into a real collector: `infergate serve` exporting over OTLP (HTTP and
//! gRPC) to Jaeger (built by tests/traces/jaeger), read back through Jaeger's query API. A
//! request's spans form one tree under the client's span: the request, each pipeline step, the
//! upstream attempt with its GenAI attributes; a refusal is an error span; no span carries
//! the prompt.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use infergate_test_support::http::body_of;
use serde_json::Value;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// Words of the prompt, which must appear in no span.
const PROMPT: &str = "zebra quartz lighthouse";

/// Jaeger on free loopback ports: (process, OTLP/gRPC port, OTLP/HTTP port, query port).
fn jaeger(dir: &TempDir) -> (Running, u16, u16, u16) {
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/traces/jaeger"
    ))
    .arg("path")
    .stderr(Stdio::inherit())
    .output()
    .expect("tests/traces/jaeger runs");
    assert!(out.status.success(), "building Jaeger failed");
    let bin = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let config = dir.path().join("jaeger.yaml");
    let spawn = |[grpc, http, query, query_grpc]: [u16; 4]| {
        std::fs::write(
            &config,
            format!(
                "service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {{receivers: [otlp], processors: [], exporters: [jaeger_storage_exporter]}}
  telemetry: {{metrics: {{level: none}}, logs: {{level: warn}}}}
extensions:
  jaeger_query:
    storage: {{traces: mem}}
    http: {{endpoint: 127.0.0.1:{query}}}
    grpc: {{endpoint: 127.0.0.1:{query_grpc}}}
  jaeger_storage:
    backends: {{mem: {{memory: {{max_traces: 1000}}}}}}
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: 127.0.0.1:{grpc}}}
      http: {{endpoint: 127.0.0.1:{http}}}
exporters:
  jaeger_storage_exporter: {{trace_storage: mem}}
"
            ),
        )
        .unwrap();
        Command::new(&bin)
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let ready = |[grpc, http, query, _]: [u16; 4]| {
        get(query, "/api/services").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
            && std::net::TcpStream::connect(("127.0.0.1", grpc)).is_ok()
            && std::net::TcpStream::connect(("127.0.0.1", http)).is_ok()
    };
    let (process, [grpc, http, query, _]) = start_on_free_ports("Jaeger", spawn, ready);
    (process, grpc, http, query)
}

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

/// A span as Jaeger's query API gives it.
#[derive(Debug)]
struct Span {
    id: String,
    name: String,
    parent: Option<String>,
    tags: HashMap<String, Value>,
    service: String,
}

/// The spans of every trace `query` (a Jaeger API path) finds, once at least `want` are there.
fn spans(port: u16, query: &str, want: usize) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = read_spans(port, query);
        if found.len() >= want || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn read_spans(port: u16, query: &str) -> Vec<Span> {
    let Some(raw) = get(port, query) else {
        return Vec::new();
    };
    let (status, headers, body) = split_response(&raw);
    if status != 200 {
        return Vec::new();
    }
    let v: Value = serde_json::from_str(&body_of(&headers, body)).unwrap();
    let mut out = Vec::new();
    for trace in v["data"].as_array().into_iter().flatten() {
        for s in trace["spans"].as_array().into_iter().flatten() {
            let process = s["processID"].as_str().unwrap();
            out.push(Span {
                id: s["spanID"].as_str().unwrap().to_owned(),
                name: s["operationName"].as_str().unwrap().to_owned(),
                parent: s["references"]
                    .as_array()
                    .and_then(|r| r.first())
                    .map(|r| r["spanID"].as_str().unwrap().to_owned()),
                tags: s["tags"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| (t["key"].as_str().unwrap().to_owned(), t["value"].clone()))
                    .collect(),
                service: trace["processes"][process]["serviceName"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            });
        }
    }
    out
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
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
    let (_jaeger, _grpc, http, query) = jaeger(&dir);
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

    let spans = spans(query, &format!("/api/traces/{CLIENT_TRACE}"), 5);
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
    for step in [
        "infergate.route",
        "infergate.flow_control",
        "infergate.pick",
    ] {
        assert_eq!(
            named(&spans, step).parent.as_ref(),
            Some(&root.id),
            "{step}"
        );
    }
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
    let (_jaeger, grpc, _http, query) = jaeger(&dir);
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

    let spans = spans(query, "/api/traces?service=gw-grpc&limit=20", 7);
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
