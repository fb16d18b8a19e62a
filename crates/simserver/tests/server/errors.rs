//! Every refusal is vLLM-shaped JSON with the right status.

use crate::common::{chat, fast_spec, Replica};
use hyper::StatusCode;
use serde_json::{json, Value};

fn assert_error(status: StatusCode, body: &[u8], want: StatusCode, kind: &str) -> String {
    let v: Value =
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("not JSON: {body:?}: {e}"));
    assert_eq!(status, want, "{v}");
    assert_eq!(v["error"]["type"], kind, "{v}");
    assert_eq!(v["error"]["code"], want.as_u16(), "{v}");
    assert!(v["error"]["param"].is_null());
    v["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_mistyped_bodies_get_400() {
    let server = Replica::start(fast_spec(100.0)).await;
    let cases: &[(&str, &str, &str)] = &[
        ("/v1/chat/completions", "{", "malformed JSON"),
        ("/v1/chat/completions", "", "malformed JSON"),
        ("/v1/chat/completions", "null", "JSON object"),
        (
            "/v1/chat/completions",
            r#"{"model":"meta-llama/Llama-3.1-8B-Instruct"}"#,
            "messages",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":"hello"}"#,
            "messages",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-3}"#,
            "max_tokens",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
            "max_tokens",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}"#,
            "max_tokens",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"x"}],"n":3}"#,
            "n:",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"x"}],"stream":1}"#,
            "stream",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":7,"content":"x"}]}"#,
            "role",
        ),
        ("/v1/completions", r#"{"prompt":7}"#, "prompt"),
        ("/v1/completions", r#"{"prompt":["a","b"]}"#, "batched"),
        (
            "/v1/completions",
            r#"{"messages":[{"role":"user","content":"x"}]}"#,
            "prompt",
        ),
    ];
    for (path, body, needle) in cases {
        let (status, bytes) = server.post(path, body).await;
        let message = assert_error(status, &bytes, StatusCode::BAD_REQUEST, "BadRequestError");
        assert!(message.contains(needle), "{body}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_gets_404() {
    let server = Replica::start(fast_spec(100.0)).await;
    let mut body = chat("hi", json!({}));
    body["model"] = json!("gpt-4o");
    let (status, bytes) = server.post("/v1/chat/completions", &body.to_string()).await;
    let message = assert_error(status, &bytes, StatusCode::NOT_FOUND, "NotFoundError");
    assert_eq!(message, "The model `gpt-4o` does not exist.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_over_max_model_len_get_vllms_400() {
    let mut spec = fast_spec(100.0);
    spec.engine.max_model_len = 1024;
    let server = Replica::start(spec).await;
    // 1,000 prompt tokens + 100 asked > 1,024.
    let body = json!({"prompt": "abcd".repeat(1000), "max_tokens": 100});
    let (status, bytes) = server.post("/v1/completions", &body.to_string()).await;
    let message = assert_error(status, &bytes, StatusCode::BAD_REQUEST, "BadRequestError");
    assert_eq!(
        message,
        "This model's maximum context length is 1024 tokens. However, you requested 1100 tokens \
         (1000 in the messages, 100 in the completion). Please reduce the length of the messages or \
         completion."
    );
    // The prompt alone too long, no max_tokens.
    let body = json!({"prompt": "abcd".repeat(1100)});
    let (status, bytes) = server.post("/v1/completions", &body.to_string()).await;
    let message = assert_error(status, &bytes, StatusCode::BAD_REQUEST, "BadRequestError");
    assert!(
        message.contains("maximum context length is 1024"),
        "{message}"
    );
    // Without max_tokens the cap is what is left of the context.
    let body = json!({"prompt": "abcd".repeat(1000), "ignore_eos": true});
    let (status, bytes) = server.post("/v1/completions", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_and_methods_get_fastapi_answers() {
    let server = Replica::start(fast_spec(100.0)).await;
    let (status, body) = server.get("/v2/nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(&body[..], br#"{"detail":"Not Found"}"#);
    let (status, _) = server.get("/v1/chat/completions").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_needs_the_priority_policy_as_in_vllm() {
    let extra = json!({"priority": 2, "max_tokens": 4});
    let fcfs = Replica::start(fast_spec(100.0)).await;
    let (status, body) = fcfs
        .post(
            "/v1/chat/completions",
            &chat("Hi", extra.clone()).to_string(),
        )
        .await;
    let message = assert_error(status, &body, StatusCode::BAD_REQUEST, "BadRequestError");
    assert_eq!(
        message,
        "Got priority 2 but Priority scheduling is not enabled."
    );
    // Priority 0 is everyone's default and always accepted.
    let (status, _) = fcfs
        .post_json(
            "/v1/chat/completions",
            &chat("Hi", json!({"priority": 0, "max_tokens": 4})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = fcfs
        .post(
            "/v1/chat/completions",
            &chat("Hi", json!({"priority": "high"})).to_string(),
        )
        .await;
    let message = assert_error(status, &body, StatusCode::BAD_REQUEST, "BadRequestError");
    assert!(message.contains("priority"), "{message}");

    let mut spec = fast_spec(100.0);
    spec.engine.scheduling_policy = infergate_engine::SchedulingPolicy::Priority;
    let priority = Replica::start(spec).await;
    let (status, v) = priority
        .post_json("/v1/chat/completions", &chat("Hi", extra))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 4);
}
