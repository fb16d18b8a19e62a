//! vLLM's dynamic LoRA API, `/v1/models`, and adapters waiting for a slot.

use crate::common::{chat, eventually, fast_spec, stream, Replica};
use hyper::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;

fn lora_spec(scale: f64) -> infergate_simserver::ReplicaSpec {
    let mut spec = fast_spec(scale);
    spec.engine.max_loras = 1;
    spec.engine.max_cpu_loras = 4;
    spec.lora_adapters = vec!["sql".into()];
    spec
}

async fn models(server: &Replica) -> Vec<Value> {
    let (status, body) = server.get("/v1/models").await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["object"], "list");
    v["data"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_load_unload_and_show_in_models() {
    let server = Replica::start(lora_spec(100.0)).await;
    let data = models(&server).await;
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["id"], "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(data[0]["root"], "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(data[0]["parent"], Value::Null);
    assert_eq!(data[0]["max_model_len"], 131_072);
    assert_eq!(data[0]["object"], "model");
    assert_eq!(data[0]["owned_by"], "vllm");
    assert_eq!(data[1]["id"], "sql");
    assert_eq!(data[1]["parent"], "meta-llama/Llama-3.1-8B-Instruct");

    let (status, body) = server
        .post(
            "/v1/load_lora_adapter",
            r#"{"lora_name":"chat","lora_path":"/adapters/chat-v2"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        &body[..],
        b"Success: LoRA adapter 'chat' added successfully."
    );
    let data = models(&server).await;
    assert_eq!(data.len(), 3);
    assert_eq!(data[2]["id"], "chat");
    assert_eq!(data[2]["root"], "/adapters/chat-v2");

    // Loading a name twice is vLLM's 400.
    let (status, v) = server
        .post_json(
            "/v1/load_lora_adapter",
            &json!({"lora_name":"chat","lora_path":"/x"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["error"]["message"],
        "The lora adapter 'chat' has already been loaded."
    );
    let (status, v) = server
        .post_json("/v1/load_lora_adapter", &json!({"lora_name":"x"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        v["error"]["message"],
        "Both 'lora_name' and 'lora_path' must be provided."
    );

    // Requests may name the adapter.
    let mut body = chat("SELECT", json!({"max_tokens": 2, "ignore_eos": true}));
    body["model"] = json!("chat");
    let (status, v) = server.post_json("/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["model"], "chat");

    let (status, body) = server
        .post("/v1/unload_lora_adapter", r#"{"lora_name":"chat"}"#)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        &body[..],
        b"Success: LoRA adapter 'chat' removed successfully."
    );
    assert_eq!(models(&server).await.len(), 2);
    let (status, v) = server
        .post_json("/v1/unload_lora_adapter", &json!({"lora_name":"chat"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["type"], "NotFoundError");
    assert_eq!(
        v["error"]["message"],
        "The lora adapter 'chat' cannot be found."
    );

    // And once unloaded, the adapter is an unknown model.
    let mut body = chat("SELECT", json!({"max_tokens": 2}));
    body["model"] = json!("chat");
    let (status, _) = server.post_json("/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_needs_lora_enabled() {
    let server = Replica::start(fast_spec(100.0)).await;
    let (status, v) = server
        .post_json(
            "/v1/load_lora_adapter",
            &json!({"lora_name":"a","lora_path":"/a"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_loras"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_second_adapter_waits_while_the_only_slot_is_busy() {
    let server = Replica::start(lora_spec(2.0)).await;
    let (status, _) = server
        .post(
            "/v1/load_lora_adapter",
            r#"{"lora_name":"chat","lora_path":"/a/chat"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let addr = server.addr;
    // A long answer on `sql` holds the only GPU slot.
    let mut long = chat(
        "Explain joins",
        json!({"stream": true, "max_tokens": 3000, "ignore_eos": true}),
    );
    long["model"] = json!("sql");
    let first = tokio::spawn(async move { stream(addr, "/v1/chat/completions", &long).await });
    let running = eventually(Duration::from_secs(5), || async {
        server
            .metrics()
            .await
            .contains("running_lora_adapters=\"sql\",waiting_lora_adapters=\"\"")
    })
    .await;
    assert!(running, "{}", server.metrics().await);
    let mut other = chat("Hi", json!({"stream": true, "max_tokens": 2}));
    other["model"] = json!("chat");
    let second = tokio::spawn(async move { stream(addr, "/v1/chat/completions", &other).await });
    let waiting = eventually(Duration::from_secs(5), || async {
        server
            .metrics()
            .await
            .contains("running_lora_adapters=\"sql\",waiting_lora_adapters=\"chat\"")
    })
    .await;
    let text = server.metrics().await;
    assert!(waiting, "{text}");
    assert!(text.contains("# TYPE vllm:lora_requests_info gauge"));
    assert!(text.contains("vllm:lora_requests_info{max_lora=\"1\","));
    // The newest series carries the newest timestamp.
    let stamp = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let newest = stamp("waiting_lora_adapters=\"chat\"").unwrap();
    assert!(newest > 1.6e9);
    assert!(text
        .lines()
        .filter(|l| l.starts_with("vllm:lora_requests_info{"))
        .all(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v <= newest)
        }));
    first.abort();
    second.abort();
}
