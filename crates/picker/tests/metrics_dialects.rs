//! Engine dialects map real-looking expositions onto `ScrapedMetrics`, and the parser survives
//! anything.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::time::Duration;

use infergate_picker::metrics::{parse, read_metrics, read_metrics_with, Engine, Limits};
use infergate_picker::{LoraInfo, ParseError};
use proptest::prelude::*;

const AT: Duration = Duration::from_millis(1234);

const VLLM_NEW: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 7.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.42
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="old",waiting_lora_adapters=""} 1.7000000e+09
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql, chat",waiting_lora_adapters="math"} 1.7000005e+09
vllm:lora_requests_info{max_lora="4",running_lora_adapters="middle",waiting_lora_adapters=""} 1.7000002e+09
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",num_gpu_blocks="31250"} 1.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="llama"} 12000.0
vllm:prefix_cache_hits_total{engine="0",model_name="llama"} 9000.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="llama"} 10 1700000000000
"#;

#[test]
fn vllm_current_names() {
    let s = read_metrics(Engine::Vllm, VLLM_NEW.as_bytes(), AT).unwrap();
    let m = s.metrics;
    assert_eq!(m.scraped_at, AT);
    assert_eq!((m.waiting, m.running), (Some(3), Some(7)));
    assert_eq!(m.kv_usage, Some(0.42));
    assert_eq!((m.block_size, m.num_gpu_blocks), (Some(16), Some(31_250)));
    assert_eq!(
        (m.prefix_cache_queries, m.prefix_cache_hits),
        (Some(12_000), Some(9_000))
    );
    // lora_requests_info: the series with the largest value (newest timestamp) wins, whatever its
    // position in the exposition.
    assert_eq!(
        m.lora,
        Some(LoraInfo {
            max_lora: 4,
            running: vec!["sql".into(), "chat".into()],
            waiting: vec!["math".into()],
        })
    );
    assert!(s.missing.is_empty(), "{:?}", s.missing);
}

#[test]
fn vllm_before_0_10_uses_gpu_cache_usage_perc() {
    let body = "vllm:num_requests_waiting 0\nvllm:num_requests_running 1\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n";
    let s = read_metrics(Engine::Vllm, body.as_bytes(), AT).unwrap();
    assert_eq!(s.metrics.kv_usage, Some(0.25));
    assert!(!s.missing.contains(&"vllm:kv_cache_usage_perc"));
    // Both present: the current name wins.
    let both = format!("{body}vllm:kv_cache_usage_perc 0.5\n");
    let s = read_metrics(Engine::Vllm, both.as_bytes(), AT).unwrap();
    assert_eq!(s.metrics.kv_usage, Some(0.5));
}

#[test]
fn missing_and_nan_signals_are_none_never_zero() {
    let body = "vllm:num_requests_waiting NaN\nvllm:kv_cache_usage_perc +Inf\n";
    let s = read_metrics(Engine::Vllm, body.as_bytes(), AT).unwrap();
    assert_eq!(s.metrics.waiting, None);
    assert_eq!(s.metrics.running, None);
    assert_eq!(s.metrics.kv_usage, None);
    assert_eq!(s.metrics.lora, None);
    assert_eq!(
        s.missing,
        vec![
            "vllm:num_requests_running",
            "vllm:lora_requests_info",
            "vllm:cache_config_info"
        ]
    );
}

#[test]
fn counts_add_up_over_data_parallel_ranks_and_kv_takes_the_fullest() {
    let body = "vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} 5\n\
                vllm:kv_cache_usage_perc{engine=\"0\"} 0.3\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.7\n";
    let m = read_metrics(Engine::Vllm, body.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(m.waiting, Some(7));
    assert_eq!(m.kv_usage, Some(0.7));
}

#[test]
fn inter_token_latency_totals_add_up_over_ranks_and_prefer_the_current_family() {
    use infergate_picker::LatencyTotals;
    let body = "vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.05\"} 90\n\
                vllm:inter_token_latency_seconds_sum{engine=\"0\"} 4.5\n\
                vllm:inter_token_latency_seconds_count{engine=\"0\"} 100\n\
                vllm:inter_token_latency_seconds_sum{engine=\"1\"} 1.5\n\
                vllm:inter_token_latency_seconds_count{engine=\"1\"} 20\n\
                vllm:time_per_output_token_seconds_sum 99\n\
                vllm:time_per_output_token_seconds_count 1\n";
    let m = read_metrics(Engine::Vllm, body.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(
        m.inter_token_latency,
        Some(LatencyTotals {
            seconds: 6.0,
            count: 120
        })
    );
    // A vLLM before the rename exports only the older family.
    let older =
        "vllm:time_per_output_token_seconds_sum 2.0\nvllm:time_per_output_token_seconds_count 40\n";
    let m = read_metrics(Engine::Vllm, older.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(m.inter_token_latency.map(|t| t.count), Some(40));
    // Half a histogram, or none, is no pace.
    let half = "vllm:inter_token_latency_seconds_sum 2.0\n";
    let m = read_metrics(Engine::Vllm, half.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(m.inter_token_latency, None);
    let sglang = "sglang:inter_token_latency_seconds_sum{model_name=\"q\"} 0.25\n\
                  sglang:inter_token_latency_seconds_count{model_name=\"q\"} 10\n";
    let m = read_metrics(Engine::Sglang, sglang.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(m.inter_token_latency.map(|t| t.count), Some(10));
    // TGI exports no inter-token histogram of the same meaning.
    let m = read_metrics(Engine::Tgi, sglang.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(m.inter_token_latency, None);
}

#[test]
fn sglang_tgi_and_trtllm_dialects() {
    let sglang = "sglang:num_queue_reqs{model_name=\"q\"} 4\nsglang:num_running_reqs 9\nsglang:token_usage 0.61\n\
                  sglang:cache_config_info{page_size=\"1\",num_pages=\"500000\"} 1\nsglang:cache_hit_rate 0.5\n\
                  sglang:cached_tokens_total 777\n";
    let m = read_metrics(Engine::Sglang, sglang.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(
        (m.waiting, m.running, m.kv_usage),
        (Some(4), Some(9), Some(0.61))
    );
    assert_eq!((m.block_size, m.num_gpu_blocks), (Some(1), Some(500_000)));
    assert_eq!(
        (m.prefix_cache_hit_rate, m.prefix_cache_hits),
        (Some(0.5), Some(777))
    );

    let tgi = "tgi_queue_size 2\ntgi_batch_current_size 8\n";
    let s = read_metrics(Engine::Tgi, tgi.as_bytes(), AT).unwrap();
    assert_eq!((s.metrics.waiting, s.metrics.running), (Some(2), Some(8)));
    assert_eq!(s.metrics.kv_usage, None);
    assert!(s.missing.is_empty());

    let trt = "trtllm_num_requests_waiting 1\ntrtllm_num_requests_running 3\ntrtllm_kv_cache_utilization 0.2\n\
               trtllm_kv_cache_tokens_per_block 32\ntrtllm_kv_cache_max_blocks 4096\n";
    let m = read_metrics(Engine::Trtllm, trt.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(
        (m.waiting, m.running, m.kv_usage),
        (Some(1), Some(3), Some(0.2))
    );
    assert_eq!((m.block_size, m.num_gpu_blocks), (Some(32), Some(4096)));
    // Another engine's names are not read.
    let m = read_metrics(Engine::Tgi, VLLM_NEW.as_bytes(), AT)
        .unwrap()
        .metrics;
    assert_eq!(m.waiting, None);
}

#[test]
fn engine_names_parse_and_unknown_ones_are_named_in_the_error() {
    for (s, e) in [
        ("vllm", Engine::Vllm),
        ("sglang", Engine::Sglang),
        ("tgi", Engine::Tgi),
        ("trtllm-serve", Engine::Trtllm),
        ("triton-tensorrt-llm", Engine::Trtllm),
    ] {
        assert_eq!(s.parse::<Engine>().unwrap(), e);
    }
    assert!("ollama"
        .parse::<Engine>()
        .unwrap_err()
        .to_string()
        .contains("ollama"));
}

#[test]
fn a_malformed_body_is_an_error_not_a_partial_scrape() {
    let body = format!("{VLLM_NEW}vllm:num_requests_waiting{{oops 3\n");
    match read_metrics(Engine::Vllm, body.as_bytes(), AT) {
        Err(ParseError::Line { line, .. }) => assert_eq!(line, VLLM_NEW.lines().count() + 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_huge_body_is_refused_before_parsing() {
    let body = "x 1\n".repeat(1000);
    let limits = Limits {
        max_bytes: 1000,
        ..Limits::default()
    };
    assert!(matches!(
        read_metrics_with(Engine::Vllm, body.as_bytes(), AT, &limits),
        Err(ParseError::TooLarge { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&body, &Limits::default());
        let _ = read_metrics(Engine::Vllm, &body, AT);
    }

    #[test]
    fn arbitrary_exposition_like_text_never_panics(
        lines in prop::collection::vec(
            r#"(# (HELP|TYPE) )?[a-z_:]{0,6}(\{([a-z_]{0,3}="([^"\\]|\\.){0,4}"?,?){0,3}\}?)? ?(NaN|[+-]?Inf|-?[0-9.e]{0,5})? ?[0-9]{0,3}\r?"#,
            0..12,
        ),
    ) {
        let body = lines.join("\n");
        let _ = parse(body.as_bytes(), &Limits::default());
        for engine in [Engine::Vllm, Engine::Sglang, Engine::Tgi, Engine::Trtllm] {
            let _ = read_metrics(engine, body.as_bytes(), AT);
        }
    }

    #[test]
    fn well_formed_samples_round_trip(
        name in "[a-zA-Z_:][a-zA-Z0-9_:]{0,10}",
        value in "[a-z ,\"\\\\\n]{0,8}",
        v in -1e9f64..1e9,
    ) {
        let escaped = value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let body = format!("{name}{{l=\"{escaped}\"}} {v}\n");
        let samples = parse(body.as_bytes(), &Limits::default()).unwrap();
        prop_assert_eq!(samples.len(), 1);
        prop_assert_eq!(samples[0].name, name.as_str());
        prop_assert_eq!(samples[0].label("l"), Some(value.as_str()));
        prop_assert_eq!(samples[0].value, v);
    }
}
