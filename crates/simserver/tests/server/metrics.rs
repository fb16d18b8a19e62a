//! `/metrics` speaks vLLM V1 (or SGLang) exactly: families, types, labels, buckets.

use crate::common::{chat, fast_spec, sample, Replica};
use infergate_simserver::Dialect;
use serde_json::json;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

fn type_of<'a>(text: &'a str, family: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        l.strip_prefix("# TYPE ")?
            .strip_prefix(family)?
            .strip_prefix(' ')
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_families_have_their_types_labels_and_buckets() {
    let mut spec = fast_spec(200.0);
    spec.engine.max_loras = 2;
    let server = Replica::start(spec).await;
    for _ in 0..2 {
        let body = chat(
            &"Tell me about caches. ".repeat(10),
            json!({"max_tokens": 5, "ignore_eos": true}),
        );
        server.post_json("/v1/chat/completions", &body).await;
    }
    let text = server.metrics().await;
    let families = [
        ("vllm:num_requests_running", "gauge"),
        ("vllm:num_requests_waiting", "gauge"),
        ("vllm:kv_cache_usage_perc", "gauge"),
        ("vllm:gpu_cache_usage_perc", "gauge"),
        ("vllm:lora_requests_info", "gauge"),
        ("vllm:cache_config_info", "gauge"),
        ("vllm:prompt_tokens_total", "counter"),
        ("vllm:generation_tokens_total", "counter"),
        ("vllm:num_preemptions_total", "counter"),
        ("vllm:request_success_total", "counter"),
        ("vllm:prefix_cache_queries_total", "counter"),
        ("vllm:prefix_cache_hits_total", "counter"),
        ("vllm:time_to_first_token_seconds", "histogram"),
        ("vllm:inter_token_latency_seconds", "histogram"),
        ("vllm:time_per_output_token_seconds", "histogram"),
        ("vllm:e2e_request_latency_seconds", "histogram"),
        ("vllm:request_queue_time_seconds", "histogram"),
        ("vllm:request_prefill_time_seconds", "histogram"),
        ("vllm:request_decode_time_seconds", "histogram"),
    ];
    for (family, kind) in families {
        assert_eq!(type_of(&text, family), Some(kind), "{family} in\n{text}");
        assert!(text.contains(&format!("# HELP {family} ")), "{family} help");
        assert!(
            text.lines()
                .any(|l| l.starts_with(family) && !l.starts_with('#')),
            "{family} sample"
        );
    }
    let labels = format!("{{engine=\"0\",model_name=\"{MODEL}\"}}");
    assert_eq!(
        sample(&text, &format!("vllm:generation_tokens_total{labels}")),
        Some(10.0)
    );
    assert_eq!(
        sample(&text, &format!("vllm:num_requests_running{labels}")),
        Some(0.0)
    );
    assert!(sample(&text, &format!("vllm:prefix_cache_hits_total{labels}")).unwrap() > 0.0);
    assert!(text.contains(&format!("vllm:request_success_total{{engine=\"0\",finished_reason=\"length\",model_name=\"{MODEL}\"}} 2.0")));
    // vLLM's bucket bounds, cumulative, closed by +Inf, then _count and _sum.
    assert!(text.contains(&format!("vllm:time_to_first_token_seconds_bucket{{engine=\"0\",le=\"0.001\",model_name=\"{MODEL}\"}} 0.0")));
    assert!(text.contains(&format!("vllm:time_to_first_token_seconds_bucket{{engine=\"0\",le=\"2560.0\",model_name=\"{MODEL}\"}} 2.0")));
    assert!(text.contains(&format!("vllm:time_to_first_token_seconds_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{MODEL}\"}} 2.0")));
    assert!(text.contains(&format!(
        "vllm:time_to_first_token_seconds_count{labels} 2.0"
    )));
    assert!(text.contains(&format!("vllm:inter_token_latency_seconds_bucket{{engine=\"0\",le=\"80.0\",model_name=\"{MODEL}\"}} 8.0")));
    assert!(text.contains(&format!("vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"7680.0\",model_name=\"{MODEL}\"}} 2.0")));
    let ttft_buckets = text
        .lines()
        .filter(|l| l.starts_with("vllm:time_to_first_token_seconds_bucket"))
        .count();
    assert_eq!(ttft_buckets, 23, "22 bounds and +Inf");
    // The cache config, with vLLM's (sorted) labels.
    let config = text
        .lines()
        .find(|l| l.starts_with("vllm:cache_config_info{"))
        .unwrap();
    assert!(
        config.contains("block_size=\"16\"") && config.contains("enable_prefix_caching=\"True\"")
    );
    assert!(config.contains("num_gpu_blocks=\"") && config.ends_with(" 1.0"));
    assert!(text.contains("vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_lora_there_is_no_lora_family() {
    let server = Replica::start(fast_spec(10.0)).await;
    let text = server.metrics().await;
    assert!(!text.contains("vllm:lora_requests_info"));
    assert!(text.contains("# TYPE vllm:kv_cache_usage_perc gauge"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sglang_dialect_uses_sglang_names() {
    let mut spec = fast_spec(200.0);
    spec.dialect = Dialect::Sglang;
    let server = Replica::start(spec).await;
    let body = chat(
        &"Cache me. ".repeat(30),
        json!({"max_tokens": 4, "ignore_eos": true}),
    );
    server.post_json("/v1/chat/completions", &body).await;
    server.post_json("/v1/chat/completions", &body).await;
    let text = server.metrics().await;
    assert!(!text.contains("vllm:"), "{text}");
    let families = [
        ("sglang:num_queue_reqs", "gauge"),
        ("sglang:num_running_reqs", "gauge"),
        ("sglang:token_usage", "gauge"),
        ("sglang:cache_hit_rate", "gauge"),
        ("sglang:cache_config_info", "gauge"),
        ("sglang:prompt_tokens_total", "counter"),
        ("sglang:generation_tokens_total", "counter"),
        ("sglang:cached_tokens_total", "counter"),
        ("sglang:time_to_first_token_seconds", "histogram"),
        ("sglang:inter_token_latency_seconds", "histogram"),
        ("sglang:e2e_request_latency_seconds", "histogram"),
    ];
    for (family, kind) in families {
        assert_eq!(type_of(&text, family), Some(kind), "{family} in\n{text}");
    }
    let labels = format!("{{model_name=\"{MODEL}\"}}");
    assert_eq!(
        sample(&text, &format!("sglang:generation_tokens_total{labels}")),
        Some(8.0)
    );
    assert!(sample(&text, &format!("sglang:cached_tokens_total{labels}")).unwrap() > 0.0);
    assert!(sample(&text, &format!("sglang:cache_hit_rate{labels}")).unwrap() > 0.0);
    assert!(text.contains(&format!(
        "sglang:time_to_first_token_seconds_count{labels} 2.0"
    )));
    assert!(text.contains(&format!(
        "sglang:inter_token_latency_seconds_bucket{{le=\"0.002\",model_name=\"{MODEL}\"}}"
    )));
    let config = text
        .lines()
        .find(|l| l.starts_with("sglang:cache_config_info{"))
        .unwrap();
    assert!(
        config.contains("page_size=\"16\"") && config.contains("num_pages=\""),
        "{config}"
    );
}
