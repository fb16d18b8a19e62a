//! Body-based routing: by model, by adapter, by header; and the client errors of parsing.

use crate::common::*;
use hyper::StatusCode;
use serde_json::{json, Value};

fn short() -> Value {
    json!({"max_tokens": 4, "ignore_eos": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_route_by_model_and_by_adapter_to_their_pools() {
    let llama = Replica::start(instant_with_adapters(&["sql-lora"])).await;
    let mut q = instant();
    q.served_model_name = "qwen3-32b".into();
    let qwen = Replica::start(q).await;
    let mut lp = PoolDef::new("llama", LLAMA, vec![llama.addr]);
    lp.adapters = vec!["sql-lora"];
    let yaml = config_yaml(
        &[lp, PoolDef::new("qwen", "qwen3-32b", vec![qwen.addr])],
        "",
    );
    let gw = TestGateway::ready(&yaml).await;

    let (s, h, b) = gw
        .post("/v1/chat/completions", &chat(LLAMA, "hi", short()))
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert_eq!(h["x-gateway-destination-endpoint"], llama.addr.to_string());
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["model"], LLAMA);

    let (s, h, b) = gw
        .post("/v1/chat/completions", &chat("qwen3-32b", "hi", short()))
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert_eq!(h["x-gateway-destination-endpoint"], qwen.addr.to_string());

    // An adapter routes to its base model's pool and reaches the replica under its own name.
    let (s, h, b) = gw
        .post("/v1/chat/completions", &chat("sql-lora", "hi", short()))
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert_eq!(h["x-gateway-destination-endpoint"], llama.addr.to_string());
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["model"], "sql-lora");

    // Completions, routed by the header when the body names no model.
    let (s, h, b) = gw
        .post_with(
            "/v1/completions",
            json!({"prompt": "once upon a time", "max_tokens": 3}).to_string(),
            &[("x-gateway-model-name", "qwen3-32b")],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert_eq!(h["x-gateway-destination-endpoint"], qwen.addr.to_string());

    // /v1/models lists each pool's model and adapters.
    let (s, b) = send(gw.addr, hyper::Method::GET, "/v1/models", None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let v: Value = serde_json::from_slice(&b).unwrap();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![LLAMA, "sql-lora", "qwen3-32b"]);
    assert_eq!(v["data"][1]["parent"], LLAMA);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_gets_routing_headers_and_never_the_clients_destination() {
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec![r#"{"object":"list","data":[],"usage":{"prompt_tokens":3,"total_tokens":3}}"#],
        gap: std::time::Duration::ZERO,
        held: None,
    })
    .await;
    let mut p = PoolDef::new("emb", "bge", vec![up.addr]);
    p.adapters = vec!["bge-legal"];
    let gw = TestGateway::ready(&config_yaml(&[p], "")).await;
    let (s, h, b) = gw
        .post_with(
            "/v1/embeddings",
            json!({"model": "bge-legal", "input": "a contract"}).to_string(),
            &[
                ("x-gateway-destination-endpoint", "10.1.2.3:8000"),
                ("connection", "keep-alive, x-secret"),
                ("x-secret", "hop"),
                ("authorization", "Bearer t"),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert_eq!(h["x-gateway-destination-endpoint"], up.addr.to_string());
    let seen = up.seen.lock().unwrap()[0].clone();
    assert_eq!(seen["x-gateway-model-name"], "bge-legal");
    assert_eq!(seen["x-gateway-base-model-name"], "bge");
    assert_eq!(seen["authorization"], "Bearer t");
    assert!(!seen.contains_key("x-gateway-destination-endpoint"));
    assert!(!seen.contains_key("x-secret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_model_bad_json_no_model_and_big_bodies_are_openai_errors() {
    let r = Replica::start(instant()).await;
    let yaml = llama_yaml(r.addr, "  # small, to test the limit\n").replace(
        "bbr: {enabled: true}",
        "bbr: {enabled: true, maxRequestBodyBytes: 1000}",
    );
    let gw = TestGateway::ready(&yaml).await;

    let (s, _, b) = gw
        .post("/v1/chat/completions", &chat("gpt-7", "hi", json!({})))
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let e = error_of(&b);
    assert_eq!(e["message"], infergate_pipeline::NO_MATCHING_MODEL);
    assert_eq!(e["code"], "model_not_found");
    assert!(e["type"].is_string());

    let (s, _, b) = gw
        .post_with("/v1/chat/completions", "{not json".into(), &[])
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&b)["code"], "invalid_json");

    let (s, _, b) = gw
        .post_with(
            "/v1/chat/completions",
            json!({"messages": []}).to_string(),
            &[],
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&b)["code"], "model_required");

    let big = chat(LLAMA, &"x".repeat(2000), json!({}));
    let (s, _, b) = gw.post("/v1/chat/completions", &big).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_of(&b)["code"], "request_too_large");

    let (s, b) = send(
        gw.addr,
        hyper::Method::GET,
        "/v1/chat/completions",
        None,
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert!(error_of(&b)["message"].is_string());

    // Every one of them was counted with its status.
    let m = gw.metric_text().await;
    for status in ["404", "400", "413"] {
        assert!(
            m.contains(&format!("status=\"{status}\"")),
            "{status} missing:\n{m}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_clients_are_served_on_the_same_port() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(r.addr, "")).await;
    let tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let body = chat(LLAMA, "over h2", json!({"stream": true, "max_tokens": 3}));
    let req = hyper::Request::post(format!("http://{}/v1/chat/completions", gw.addr))
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    let resp = tokio::time::timeout(CALL_LIMIT, sender.send_request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert!(bytes.ends_with(b"data: [DONE]\n\n"), "{bytes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_backend_pool_takes_models_no_pool_serves() {
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec![r#"{"object":"chat.completion","choices":[]}"#],
        gap: std::time::Duration::ZERO,
        held: None,
    })
    .await;
    let yaml = config_yaml(&[PoolDef::new("catchall", "base", vec![up.addr])], "").replace(
        "bbr: {enabled: true}",
        "bbr: {enabled: true, defaultBackend: {name: catchall}}",
    );
    let gw = TestGateway::ready(&yaml).await;
    let (s, h, b) = gw
        .post(
            "/v1/chat/completions",
            &chat("anything-else", "hi", json!({})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert_eq!(h["x-gateway-destination-endpoint"], up.addr.to_string());
    let seen = up.seen.lock().unwrap()[0].clone();
    assert_eq!(seen["x-gateway-model-name"], "anything-else");
    assert_eq!(seen["x-gateway-base-model-name"], "");
}

/// `forwardPriority`: the band reaches the model server as the body's `priority`, replacing the
/// client's; without it the body goes through untouched. An FCFS replica (vLLM's default)
/// answers any priority but 0 with a 400, which makes what reached it visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_forward_priority_sends_the_band_as_the_bodys_priority() {
    let fcfs = Replica::start(instant()).await;
    let mut spec = instant();
    spec.engine.scheduling_policy = infergate_engine::SchedulingPolicy::Priority;
    spec.served_model_name = "qwen3-32b".into();
    let priority = Replica::start(spec).await;
    let mut forwarding_fcfs = PoolDef::new("llama", LLAMA, vec![fcfs.addr]);
    forwarding_fcfs.extra = "      forwardPriority: true\n";
    let mut forwarding = PoolDef::new("qwen", "qwen3-32b", vec![priority.addr]);
    forwarding.extra = "      forwardPriority: true\n";
    let gw = TestGateway::ready(&config_yaml(&[forwarding_fcfs, forwarding], "")).await;
    let ask = |model: &'static str, band: &'static str, extra: Value| {
        let gw = &gw;
        async move {
            let (s, _, b) = gw
                .post_with(
                    "/v1/chat/completions",
                    chat(model, "hi", extra).to_string(),
                    &[("x-gateway-inference-objective", band)],
                )
                .await;
            (s, String::from_utf8_lossy(&b).into_owned())
        }
    };
    // Every band is accepted by a server that schedules by priority.
    for band in ["Critical", "Standard", "Sheddable"] {
        let (s, b) = ask("qwen3-32b", band, short()).await;
        assert_eq!(s, StatusCode::OK, "{band}: {b}");
    }
    // The FCFS server shows what it was sent: Sheddable became 1, Critical -1, and Standard 0
    // even though the client asked for 5.
    let (s, b) = ask(LLAMA, "Sheddable", short()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b.contains("Got priority 1 but"), "{b}");
    let (s, b) = ask(LLAMA, "Critical", short()).await;
    assert!(b.contains("Got priority -1 but"), "{s} {b}");
    let (s, b) = ask(
        LLAMA,
        "Standard",
        json!({"max_tokens": 4, "ignore_eos": true, "priority": 5}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");

    // Off (the default), the client's own priority goes through as it was written.
    let plain = TestGateway::ready(&llama_yaml(fcfs.addr, "")).await;
    let (s, _, b) = plain
        .post_with(
            "/v1/chat/completions",
            chat(LLAMA, "hi", json!({"max_tokens": 4, "priority": 5})).to_string(),
            &[("x-gateway-inference-objective", "Critical")],
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&b).contains("Got priority 5 but"));
    let (s, _, b) = plain
        .post("/v1/chat/completions", &chat(LLAMA, "hi", short()))
        .await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
}
