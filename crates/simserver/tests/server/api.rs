//! The OpenAI API: SSE framing, usage, prefix-cache hits, ignore_eos, non-streaming shapes.

use crate::common::{chat, fast_spec, Replica};
use hyper::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chat_has_openai_sse_framing_and_ends_with_done() {
    let server = Replica::start(fast_spec(100.0)).await;
    let body = chat(
        "Hello there",
        json!({"stream": true, "max_tokens": 8, "ignore_eos": true}),
    );
    let s = server.stream("/v1/chat/completions", &body).await;
    assert_eq!(s.status, StatusCode::OK);
    assert_eq!(s.content_type, "text/event-stream; charset=utf-8");
    // Every event is `data: …` followed by a blank line, and the stream ends with [DONE].
    assert!(s.raw.starts_with("data: {"));
    assert!(s.raw.ends_with("data: [DONE]\n\n"));
    assert_eq!(s.raw.matches("\n\n").count(), s.events.len());
    assert!(s
        .raw
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .all(|e| e.starts_with("data: ")));

    let chunks = s.chunks();
    // A role chunk, eight content chunks; no usage chunk unless asked.
    assert_eq!(chunks.len(), 9);
    let id = chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"));
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], id);
        assert_eq!(c["model"], "meta-llama/Llama-3.1-8B-Instruct");
        assert!(c["created"].as_u64().unwrap() > 1_600_000_000);
        assert!(c.get("usage").is_none());
    }
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    let words: Vec<&str> = chunks[1..]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(words.len(), 8);
    assert!(words.iter().all(|w| !w.trim().is_empty()));
    let finishes: Vec<&serde_json::Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .collect();
    assert!(finishes[..8].iter().all(|f| f.is_null()));
    assert_eq!(finishes[8], "length");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_usage_adds_a_final_usage_chunk_with_empty_choices() {
    let server = Replica::start(fast_spec(100.0)).await;
    let body = chat(
        "Count to five",
        json!({"stream": true, "stream_options": {"include_usage": true}, "max_tokens": 5, "ignore_eos": true}),
    );
    let s = server.stream("/v1/chat/completions", &body).await;
    let chunks = s.chunks();
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    let usage = &last["usage"];
    assert_eq!(usage["completion_tokens"], 5);
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    assert!(prompt > 10);
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), prompt + 5);
    assert!(usage["prompt_tokens_details"]["cached_tokens"].is_u64());
    assert_eq!(s.events.last().unwrap().1, "[DONE]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_prompt_is_served_from_the_prefix_cache() {
    let server = Replica::start(fast_spec(100.0)).await;
    let prompt = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    let body = chat(&prompt, json!({"max_tokens": 4, "ignore_eos": true}));
    let (status, first) = server.post_json("/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let (_, second) = server.post_json("/v1/chat/completions", &body).await;
    let prompt_tokens = second["usage"]["prompt_tokens"].as_u64().unwrap();
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    // Every full block but the one holding the last prompt token.
    assert!(
        cached > 0 && cached < prompt_tokens,
        "{cached} of {prompt_tokens}"
    );
    assert_eq!(cached % 16, 0);
    assert!(prompt_tokens - cached <= 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_eos_gives_exactly_max_tokens() {
    let server = Replica::start(fast_spec(200.0)).await;
    for (max_tokens, field) in [
        (1, "max_tokens"),
        (37, "max_tokens"),
        (200, "max_completion_tokens"),
    ] {
        let mut extra = json!({"ignore_eos": true});
        extra[field] = json!(max_tokens);
        let (status, v) = server
            .post_json("/v1/chat/completions", &chat("Go on", extra))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(v["usage"]["completion_tokens"], max_tokens);
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        let text = v["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(
            text.split(' ').count(),
            max_tokens as usize,
            "one word per token"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ignore_eos_lengths_vary_and_respect_max_tokens() {
    let mut spec = fast_spec(500.0);
    spec.mean_output_tokens = 8.0;
    let server = Replica::start(spec).await;
    let mut lengths = Vec::new();
    for i in 0..12 {
        let (_, v) = server
            .post_json(
                "/v1/chat/completions",
                &chat(&format!("q{i}"), json!({"max_tokens": 12})),
            )
            .await;
        let n = v["usage"]["completion_tokens"].as_u64().unwrap();
        let finish = v["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!((1..=12).contains(&n));
        assert!(
            finish == "stop" || (finish == "length" && n == 12),
            "{finish} after {n}"
        );
        lengths.push(n);
    }
    lengths.sort_unstable();
    lengths.dedup();
    assert!(lengths.len() > 2, "{lengths:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_chat_and_completion_have_the_vllm_shape() {
    let server = Replica::start(fast_spec(200.0)).await;
    let (status, v) = server
        .post_json(
            "/v1/chat/completions",
            &chat("Hi", json!({"max_tokens": 3, "ignore_eos": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["model"], "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert!(v["choices"][0]["message"]["content"].is_string());
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 3);

    let body = json!({"model": "meta-llama/Llama-3.1-8B-Instruct", "prompt": "Once upon a time", "max_tokens": 4, "ignore_eos": true});
    let (status, v) = server.post_json("/v1/completions", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["object"], "text_completion");
    assert!(v["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(
        v["choices"][0]["text"].as_str().unwrap().split(' ').count(),
        4
    );
    assert_eq!(v["usage"]["prompt_tokens"], 4, "16 bytes are four tokens");
    assert_eq!(v["usage"]["total_tokens"], 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_completions_use_text_completion_chunks() {
    let server = Replica::start(fast_spec(200.0)).await;
    let body = json!({"prompt": [1, 2, 3, 4, 5], "max_tokens": 3, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true}});
    let s = server.stream("/v1/completions", &body).await;
    let chunks = s.chunks();
    assert_eq!(chunks.len(), 4, "three tokens and the usage chunk");
    for c in &chunks[..3] {
        assert_eq!(c["object"], "text_completion");
        assert!(c["choices"][0]["text"].is_string());
    }
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "length");
    assert_eq!(chunks[3]["usage"]["prompt_tokens"], 5);
    assert!(s.raw.ends_with("data: [DONE]\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_aborts_its_request() {
    let server = Replica::start(fast_spec(1.0)).await;
    let addr = server.addr;
    let body = chat(
        "Write a long story",
        json!({"stream": true, "max_tokens": 5000, "ignore_eos": true}),
    );
    let client =
        tokio::spawn(
            async move { crate::common::stream(addr, "/v1/chat/completions", &body).await },
        );
    let running = crate::common::eventually(std::time::Duration::from_secs(5), || async {
        crate::common::sample(&server.metrics().await, "vllm:num_requests_running") == Some(1.0)
    })
    .await;
    assert!(running);
    client.abort();
    let aborted = crate::common::eventually(std::time::Duration::from_secs(5), || async {
        let m = server.metrics().await;
        crate::common::sample(&m, "vllm:num_requests_running") == Some(0.0)
            && m.contains("vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 1.0")
    })
    .await;
    assert!(aborted, "{}", server.metrics().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_version_answer() {
    let server = Replica::start(fast_spec(1.0)).await;
    let (status, body) = server.get("/health").await;
    assert_eq!((status, body.len()), (StatusCode::OK, 0));
    let (status, _) = server.get("/version").await;
    assert_eq!(status, StatusCode::OK);
    server.stop().await.unwrap();
}
