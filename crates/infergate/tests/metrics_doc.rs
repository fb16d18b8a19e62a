//! `docs/metrics.md` against a running gateway: `infergate demo` with traffic, its `/metrics`
//! read, and every family and every series checked against the page's rows (the name, the type,
//! and exactly the documented labels). With `crates/telemetry/tests/metrics_doc.rs`, which checks
//! the registered families against the rows the other way, the page and `/metrics` agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The documented families: name → (type, labels).
fn documented() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let labels = cells[3]
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_owned())
                .filter(|l| !l.is_empty() && l != "—")
                .collect();
            (
                cells[1].trim_matches('`').to_owned(),
                (cells[2].to_owned(), labels),
            )
        })
        .collect()
}

/// The label names of one exposition line's series (`name{a="x",b="y"} 1`), `le` left out.
fn label_names(series: &str) -> BTreeSet<String> {
    let Some(open) = series.find('{') else {
        return BTreeSet::new();
    };
    let mut names = BTreeSet::new();
    let mut rest = &series[open + 1..];
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].trim_start_matches(',').to_owned();
        // Skip the quoted value, honouring escapes.
        let mut chars = rest[eq + 2..].char_indices();
        let mut end = 0;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = eq + 2 + i + 1;
                    break;
                }
                _ => {}
            }
        }
        if name != "le" {
            names.insert(name);
        }
        rest = &rest[end..];
        if rest.starts_with('}') {
            break;
        }
    }
    names
}

fn post(gateway: u16, path: &str, body: &str) -> String {
    common::http(
        &format!("127.0.0.1:{gateway}"),
        "POST",
        path,
        body,
        Duration::from_secs(30),
    )
    .unwrap()
}

#[test]
fn every_family_and_label_the_demo_exports_is_documented_as_it_is() {
    let (_demo, gateway, admin) = common::demo_ready(50);
    // Streamed and buffered answers, an adapter, the second pool, and two refusals.
    let streamed = r#"{"model": "meta-llama/Llama-3.1-8B-Instruct", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 8, "messages": [{"role": "user", "content": "Hello!"}]}"#;
    for _ in 0..3 {
        assert!(post(gateway, "/v1/chat/completions", streamed).starts_with("HTTP/1.1 200"));
    }
    let adapter = r#"{"model": "sql-lora", "max_tokens": 4, "messages": [{"role": "user", "content": "SELECT"}]}"#;
    assert!(post(gateway, "/v1/chat/completions", adapter).starts_with("HTTP/1.1 200"));
    let qwen = r#"{"model": "Qwen/Qwen3-32B", "max_tokens": 4, "prompt": "Once"}"#;
    assert!(post(gateway, "/v1/completions", qwen).starts_with("HTTP/1.1 200"));
    let unknown = r#"{"model": "no-such-model", "messages": []}"#;
    assert!(post(gateway, "/v1/chat/completions", unknown).starts_with("HTTP/1.1 404"));
    assert!(post(gateway, "/v1/chat/completions", "{not json").starts_with("HTTP/1.1 400"));

    let raw = common::get(admin, "/metrics").unwrap();
    let (status, _, text) = common::split_response(&raw);
    assert_eq!(status, 200, "{raw}");
    let docs = documented();
    let mut problems = Vec::new();
    let mut families = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let queried = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_owned(),
            };
            match docs.get(&queried) {
                None => problems.push(format!("{queried} ({kind}) is exported, not documented")),
                Some((documented, _)) if documented != kind => {
                    problems.push(format!("{queried} is a {kind}, documented as {documented}"))
                }
                Some(_) => {}
            }
            families.insert(name.to_owned(), queried);
        }
    }
    let mut with_series = BTreeSet::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.split([' ', '{']).next().unwrap();
        let family = families
            .keys()
            .filter(|f| series.starts_with(f.as_str()))
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("{line}: no family"));
        let queried = &families[family];
        let Some((_, labels)) = docs.get(queried) else {
            continue;
        };
        let names = label_names(line);
        if &names != labels {
            problems.push(format!("{line}: labels {names:?}, documented {labels:?}"));
        }
        with_series.insert(queried.clone());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // What the picker sees, per endpoint and per pool, and the upstream twins, all have data:
    // a family without a series would pass the checks above vacuously.
    for family in [
        "infergate_endpoint_kv_cache_utilization",
        "infergate_endpoint_waiting_requests",
        "infergate_endpoint_running_requests",
        "infergate_scrape_age_seconds",
        "infergate_endpoint_in_flight_requests",
        "infergate_endpoint_predicted_ttft_seconds",
        "infergate_endpoint_excluded",
        "infergate_pool_ready_endpoints",
        "infergate_pool_mean_kv_cache_utilization",
        "infergate_requests_total",
        "infergate_prompt_tokens_total",
        "infergate_cached_tokens_total",
        "inference_objective_request_total",
        "inference_objective_request_error_total",
        "inference_objective_request_duration_seconds",
        "inference_objective_input_tokens",
        "llm_d_epp_request_ttft_seconds",
        "inference_extension_scheduler_e2e_duration_seconds",
        "inference_pool_average_kv_cache_utilization",
        "inference_pool_ready_pods",
        "inference_pool_per_pod_queue_size",
        "llm_d_epp_per_endpoint_queue_size",
    ] {
        assert!(
            with_series.contains(family),
            "{family} has no series:\n{text}"
        );
    }
    // Every endpoint of the demo fleet (4 Llama, 2 Qwen) is there, and the refusals are
    // counted under upstream's codes.
    let endpoints = text
        .lines()
        .filter(|l| l.starts_with("infergate_endpoint_running_requests{"))
        .count();
    assert_eq!(endpoints, 6, "{text}");
    assert!(
        text.contains(r#"inference_objective_request_error_total{model_name="no-such-model",target_model_name="",error_code="NotFound"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"error_code="BadRequest"} 1"#), "{text}");
}

#[test]
fn an_adapter_in_use_shows_on_the_endpoint_that_runs_it() {
    let (_demo, gateway, admin) = common::demo_ready(5);
    // vLLM reports an adapter among its running ones while a request of it runs, so keep
    // requests of it running until a scrape sees one.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let body = r#"{"model": "sql-lora", "max_tokens": 512, "messages": [{"role": "user", "content": "SELECT"}]}"#;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                post(gateway, "/v1/chat/completions", body);
            }
        })
    };
    let mut line = String::new();
    common::wait_for("an endpoint reporting sql-lora running", || {
        let metrics = common::get(admin, "/metrics").unwrap_or_default();
        let found = metrics.lines().find(|l| {
            l.starts_with("infergate_endpoint_lora_adapter{")
                && l.contains(r#"adapter="sql-lora",state="running"} 1"#)
        });
        found.map(|l| line = l.to_owned()).is_some()
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.join().unwrap();
    assert!(line.contains(r#"pool="llama-8b""#), "{line}");
}

#[test]
fn label_names_reads_quoted_values_with_commas_and_escapes() {
    assert_eq!(
        label_names(r#"x_bucket{a="1,2",b="q\"}",le="0.5"} 3"#),
        ["a", "b"].iter().map(|s| s.to_string()).collect()
    );
    assert!(label_names("x 1").is_empty());
}
