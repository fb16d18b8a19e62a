//! `/metrics` in Prometheus text format 0.0.4, written the way the Python `prometheus_client`
//! that vLLM and SGLang use writes it: the same family names, HELP texts, types, label names
//! (sorted) and value formatting, so scrapers and dashboards built for them read the simulator.

use crate::replica::Snapshot;
use crate::spec::Dialect;
use infergate_engine::metrics::Histogram;
use infergate_engine::EngineConfig;
use std::fmt::Write as _;

/// The content type of the text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders `snapshot` in `dialect`.
pub(crate) fn render(
    dialect: Dialect,
    model_name: &str,
    config: &EngineConfig,
    snapshot: &Snapshot,
) -> String {
    let mut w = Writer {
        out: String::with_capacity(16 * 1024),
        before: String::new(),
        after: String::new(),
    };
    let model = escape_label(model_name);
    match dialect {
        Dialect::Vllm => {
            w.before = "engine=\"0\",".to_owned();
            w.after = format!("model_name=\"{model}\"");
            vllm(&mut w, config, snapshot);
        }
        Dialect::Sglang => {
            w.after = format!("model_name=\"{model}\"");
            sglang(&mut w, snapshot);
        }
    }
    w.out
}

fn vllm(w: &mut Writer, config: &EngineConfig, s: &Snapshot) {
    let (c, g) = (&s.counters, &s.gauges);
    w.scalar(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        "gauge",
        g.running as f64,
    );
    w.scalar(
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        "gauge",
        g.waiting as f64,
    );
    // The pre-0.10 name, so scrapers written for older servers keep reading KV usage.
    w.scalar(
        "vllm:gpu_cache_usage_perc",
        "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
        "gauge",
        g.kv_usage,
    );
    w.scalar(
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        "gauge",
        g.kv_usage,
    );
    w.scalar(
        "vllm:prefix_cache_queries_total",
        "Prefix cache queries, in terms of number of queried tokens.",
        "counter",
        c.prefix_cache_queries as f64,
    );
    w.scalar(
        "vllm:prefix_cache_hits_total",
        "Prefix cache hits, in terms of number of cached tokens.",
        "counter",
        c.prefix_cache_hits as f64,
    );
    w.scalar(
        "vllm:num_preemptions_total",
        "Cumulative number of preemption from the engine.",
        "counter",
        c.preemptions as f64,
    );
    w.scalar(
        "vllm:prompt_tokens_total",
        "Number of prefill tokens processed.",
        "counter",
        c.prompt_tokens as f64,
    );
    w.scalar(
        "vllm:generation_tokens_total",
        "Number of generation tokens processed.",
        "counter",
        c.generation_tokens as f64,
    );
    w.header(
        "vllm:request_success_total",
        "Count of successfully processed requests.",
        "counter",
    );
    for (reason, n) in [
        ("stop", c.finished_stop),
        ("length", c.finished_length),
        ("abort", c.finished_abort),
    ] {
        w.sample(
            "vllm:request_success_total",
            Some(("finished_reason", reason)),
            n as f64,
        );
    }
    w.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &c.ttft,
    );
    w.histogram(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
        &c.itl,
    );
    w.histogram(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        &c.itl,
    );
    w.histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        &c.e2e,
    );
    w.histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        &c.queue,
    );
    w.histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        &c.prefill,
    );
    w.histogram(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        &c.decode,
    );
    // vLLM registers the LoRA family only when LoRA is enabled; its labels carry no model name.
    if config.max_loras > 0 {
        w.header(
            "vllm:lora_requests_info",
            "Running stats on lora requests.",
            "gauge",
        );
        for series in &s.lora {
            let _ = writeln!(
                w.out,
                "vllm:lora_requests_info{{max_lora=\"{}\",running_lora_adapters=\"{}\",waiting_lora_adapters=\"{}\"}} {}",
                g.max_lora,
                escape_label(&series.running),
                escape_label(&series.waiting),
                go_float(series.at),
            );
        }
    }
    w.header(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        "gauge",
    );
    let _ = writeln!(
        w.out,
        "vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",calculate_kv_scales=\"False\",\
         cpu_offload_gb=\"0\",enable_prefix_caching=\"{}\",engine=\"0\",gpu_memory_utilization=\"0.9\",\
         is_attention_free=\"False\",num_cpu_blocks=\"None\",num_gpu_blocks=\"{}\",\
         num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"builtin\",sliding_window=\"None\",\
         swap_space=\"4\",swap_space_bytes=\"4294967296\"}} 1.0",
        g.block_size,
        if config.enable_prefix_caching { "True" } else { "False" },
        g.num_gpu_blocks,
    );
}

fn sglang(w: &mut Writer, s: &Snapshot) {
    let (c, g) = (&s.counters, &s.gauges);
    let capacity = u64::from(g.num_gpu_blocks) * u64::from(g.block_size);
    let used = (g.kv_usage * capacity as f64).round();
    let hit_rate = if c.prefix_cache_queries == 0 {
        0.0
    } else {
        c.prefix_cache_hits as f64 / c.prefix_cache_queries as f64
    };
    w.scalar(
        "sglang:num_running_reqs",
        "The number of running requests.",
        "gauge",
        g.running as f64,
    );
    w.scalar(
        "sglang:num_used_tokens",
        "The number of used tokens.",
        "gauge",
        used,
    );
    w.scalar(
        "sglang:token_usage",
        "The token usage.",
        "gauge",
        g.kv_usage,
    );
    w.scalar(
        "sglang:num_queue_reqs",
        "The number of requests in the waiting queue.",
        "gauge",
        g.waiting as f64,
    );
    w.scalar(
        "sglang:cache_hit_rate",
        "The prefix cache hit rate.",
        "gauge",
        hit_rate,
    );
    w.scalar(
        "sglang:max_total_num_tokens",
        "Maximum total number of tokens in the KV cache pool.",
        "gauge",
        capacity as f64,
    );
    w.scalar(
        "sglang:prompt_tokens_total",
        "Number of prefill tokens processed.",
        "counter",
        c.prompt_tokens as f64,
    );
    w.scalar(
        "sglang:generation_tokens_total",
        "Number of generation tokens processed.",
        "counter",
        c.generation_tokens as f64,
    );
    w.scalar(
        "sglang:cached_tokens_total",
        "Number of cached prompt tokens.",
        "counter",
        s.cached_tokens as f64,
    );
    let finished = c.finished_stop + c.finished_length + c.finished_abort;
    w.scalar(
        "sglang:num_requests_total",
        "Number of requests processed.",
        "counter",
        finished as f64,
    );
    w.scalar(
        "sglang:num_aborted_requests_total",
        "Number of requests aborted.",
        "counter",
        c.finished_abort as f64,
    );
    if let Some(h) = &s.sglang {
        w.histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &h.ttft,
        );
        w.histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            &h.itl,
        );
        w.histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            &h.e2e,
        );
    }
    w.header(
        "sglang:cache_config_info",
        "Information of the cache config.",
        "gauge",
    );
    let _ = writeln!(
        w.out,
        "sglang:cache_config_info{{{},num_pages=\"{}\",page_size=\"{}\"}} 1.0",
        w.after, g.num_gpu_blocks, g.block_size,
    );
}

/// Accumulates the text; `before` and `after` are the fixed labels that sort before and after
/// a sample's own label.
struct Writer {
    out: String,
    before: String,
    after: String,
}

impl Writer {
    fn header(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(
            self.out,
            "# HELP {name} {}",
            help.replace('\\', "\\\\").replace('\n', "\\n")
        );
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, label: Option<(&str, &str)>, value: f64) {
        let _ = match label {
            Some((k, v)) => writeln!(
                self.out,
                "{name}{{{}{k}=\"{v}\",{}}} {}",
                self.before,
                self.after,
                go_float(value)
            ),
            None => writeln!(
                self.out,
                "{name}{{{}{}}} {}",
                self.before,
                self.after,
                go_float(value)
            ),
        };
    }

    fn scalar(&mut self, name: &str, help: &str, kind: &str, value: f64) {
        self.header(name, help, kind);
        self.sample(name, None, value);
    }

    fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.header(name, help, "histogram");
        let bucket = format!("{name}_bucket");
        let bounds = h
            .bounds()
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY));
        for (bound, count) in bounds.zip(h.cumulative()) {
            self.sample(&bucket, Some(("le", &go_float(bound))), count as f64);
        }
        self.sample(&format!("{name}_count"), None, h.count() as f64);
        self.sample(&format!("{name}_sum"), None, h.sum());
    }
}

/// `prometheus_client`'s `floatToGoString`: Python's `repr`, `+Inf`, and exponent notation
/// from seven integer digits on, as Go prints.
pub(crate) fn go_float(v: f64) -> String {
    if v == f64::INFINITY {
        return "+Inf".to_owned();
    }
    if v == f64::NEG_INFINITY {
        return "-Inf".to_owned();
    }
    if v.is_nan() {
        return "NaN".to_owned();
    }
    let repr = format!("{v:?}");
    if let Some((mantissa, exp)) = repr.split_once('e') {
        // Python writes a signed, two-digit exponent: 1e-07, 1.5e+16.
        let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    match repr.find('.') {
        Some(dot) if v > 0.0 && dot > 6 => {
            let digits = format!("{}{}", &repr[1..dot], &repr[dot + 1..]);
            let mantissa = format!("{}.{}", &repr[..1], digits);
            let mantissa = mantissa.trim_end_matches(['0', '.']);
            format!("{mantissa}e+0{}", dot - 1)
        }
        _ => repr,
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_prometheus_client_prints_them() {
        assert_eq!(go_float(0.0), "0.0");
        assert_eq!(go_float(5.0), "5.0");
        assert_eq!(go_float(0.25), "0.25");
        assert_eq!(go_float(123456.0), "123456.0");
        assert_eq!(go_float(8128902.0), "8.128902e+06");
        assert_eq!(go_float(10000000.0), "1e+07");
        assert_eq!(go_float(f64::INFINITY), "+Inf");
        assert_eq!(go_float(1e-7), "1e-07");
        assert_eq!(go_float(1.5e16), "1.5e+16");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
    }
}
