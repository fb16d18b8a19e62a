//! Trace context on the way upstream: a traced request names its attempt's span as the model
//! server's `traceparent` (same trace, new span, the client's `tracestate` kept); untraced,
//! the client's header goes on unchanged. The spans' export to a real collector is tested with
//! the binary (crates/infergate/tests/traces.rs); here the collector is down, so every span is
//! dropped and counted, and the request does not notice.

use serde_json::json;

use super::common::*;
use infergate_gateway::GatewayOptions;
use infergate_trace::{SpanContext, TraceSettings};

const CLIENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn upstream() -> Scripted {
    Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec![r#"{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#],
        gap: std::time::Duration::ZERO,
        held: None,
    })
    .await
}

fn sent_context(up: &Scripted) -> (Option<SpanContext>, Option<String>) {
    let seen = up.seen.lock().unwrap();
    let h = seen.last().expect("the upstream was sent the request");
    (
        SpanContext::from_headers(h),
        h.get("tracestate").map(|v| v.to_str().unwrap().to_owned()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_request_continues_the_trace_to_the_model_server() {
    let up = upstream().await;
    // Nothing listens on the collector's port: export fails, after the answer.
    let dead = free_port_addr();
    let settings = TraceSettings::from_lookup(Some(&format!("http://{dead}")), |k| {
        (k == "OTEL_BSP_SCHEDULE_DELAY").then(|| "50".to_owned())
    })
    .unwrap();
    let options = GatewayOptions {
        tracing: settings,
        ..GatewayOptions::default()
    };
    let mut gw = TestGateway::start_with(&llama_yaml(up.addr, ""), options).await;
    gw.wait_ready().await;
    let body = chat(LLAMA, "hi", json!({})).to_string();
    let headers = [("traceparent", CLIENT), ("tracestate", "vendor=abc")];
    let (status, _, _) = gw.post_with("/v1/chat/completions", body, &headers).await;
    assert_eq!(status, 200);
    let (ctx, state) = sent_context(&up);
    let ctx = ctx.expect("a valid traceparent upstream");
    assert_eq!(ctx.trace_id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_ne!(
        ctx.span_id.to_hex(),
        "00f067aa0ba902b7",
        "the attempt's own span"
    );
    assert!(ctx.sampled);
    assert_eq!(state.as_deref(), Some("vendor=abc"));

    // The request's spans: the server span, route, flow control, pick, the attempt. Each
    // export fails and is counted, none is lost silently.
    eventually("the spans' export failed and was counted", || async {
        let text = gw.metric_text().await;
        metric_of(
            &text,
            "infergate_trace_spans_dropped_total{reason=\"export_failed\"}",
        ) >= 5.0
    })
    .await;
    let text = gw.metric_text().await;
    assert_eq!(
        metric_of(&text, "infergate_trace_spans_exported_total"),
        0.0
    );
    gw.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untraced_the_clients_trace_context_goes_on_unchanged() {
    let up = upstream().await;
    let gw = TestGateway::ready(&llama_yaml(up.addr, "")).await;
    let body = chat(LLAMA, "hi", json!({})).to_string();
    let headers = [("traceparent", CLIENT), ("tracestate", "vendor=abc")];
    let (status, _, _) = gw.post_with("/v1/chat/completions", body, &headers).await;
    assert_eq!(status, 200);
    let (ctx, state) = sent_context(&up);
    assert_eq!(ctx.unwrap().traceparent(), CLIENT);
    assert_eq!(state.as_deref(), Some("vendor=abc"));
    let text = gw.metric_text().await;
    assert_eq!(
        metric_of(&text, "infergate_trace_spans_exported_total"),
        0.0
    );
}

fn free_port_addr() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// The value of the one sample `series` names exactly (0 when absent).
fn metric_of(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}
