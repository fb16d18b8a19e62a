//! The dashboards and alert rules against the real thing: a real Prometheus (Debian's
//! `prometheus`) scrapes a running `infergate demo` and its simulated model servers, with the
//! shipped alert rules loaded, while traffic runs. Every query of every panel of every shipped
//! dashboard must answer with data, and every metric a panel, a variable or a rule names must
//! have series (so a fallback to 0 cannot hide a misspelt name); every rule must evaluate
//! without error. And the shipped dashboard files must be exactly what `infergate dashboards`
//! generates.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shipped dashboards' files, by name.
fn dashboard_files(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_shipped_dashboards_are_what_the_generator_writes() {
    let out = common::TempDir::new("dashboards");
    let status = common::infergate()
        .args(["dashboards", "--out"])
        .arg(out.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let generated = dashboard_files(out.path());
    assert!(!generated.is_empty());
    for shipped in ["deploy/grafana", "deploy/helm/infergate/files/dashboards"] {
        assert_eq!(
            dashboard_files(&repo().join(shipped)),
            generated,
            "{shipped} differs from `infergate dashboards` (run `cargo run --release -- dashboards --out {shipped}`)"
        );
    }
    // The chart's rule file is the shipped one.
    assert_eq!(
        std::fs::read_to_string(repo().join("deploy/helm/infergate/files/infergate-rules.yaml"))
            .unwrap(),
        std::fs::read_to_string(repo().join("deploy/prometheus/infergate-rules.yaml")).unwrap(),
    );
}

/// Every panel's queries and every variable's metric, from the shipped files.
fn shipped_queries() -> (Vec<(String, String)>, Vec<String>) {
    let mut queries = Vec::new();
    let mut variables = Vec::new();
    for (name, text) in dashboard_files(&repo().join("deploy/grafana")) {
        let d: Value = serde_json::from_str(&text).unwrap();
        for p in d["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().into_iter().flatten() {
                let title = format!("{name}: {}", p["title"].as_str().unwrap());
                queries.push((title, t["expr"].as_str().unwrap().to_owned()));
            }
        }
        for v in d["templating"]["list"].as_array().unwrap() {
            if let Some(q) = v["definition"].as_str() {
                variables.push(q.to_owned());
            }
        }
    }
    // The autoscaling queries docs/observability.md shows, from its `promql` blocks.
    let docs = std::fs::read_to_string(repo().join("docs/observability.md")).unwrap();
    for block in docs.split("```promql\n").skip(1) {
        let q = block.split("```").next().unwrap().trim();
        queries.push(("docs/observability.md".to_owned(), q.to_owned()));
    }
    (queries, variables)
}

/// The metric names an expression uses (the families infergate, upstream and vLLM export).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        let known = ["infergate_", "inference_", "llm_d_", "vllm:"];
        if known.iter().any(|p| word.starts_with(p)) {
            names.insert(std::mem::take(&mut word));
        }
        word.clear();
    }
    names
}

/// `s` percent-encoded for a URL's query.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A GET to Prometheus's HTTP API: the answer's JSON.
fn api(port: u16, path_and_query: &str) -> Value {
    let raw = common::get(port, path_and_query).unwrap_or_default();
    let (_, headers, body) = common::split_response(&raw);
    serde_json::from_str(&infergate_test_support::http::body_of(&headers, body))
        .unwrap_or(Value::Null)
}

/// The instant query's result vector (empty on error).
fn query(port: u16, expr: &str) -> Vec<Value> {
    let v = api(port, &format!("/api/v1/query?query={}", encode(expr)));
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// A query of a dashboard with Grafana's variables substituted: every pool and model, and a
/// rate interval of four scrape intervals and more.
fn substituted(expr: &str) -> String {
    expr.replace("$__rate_interval", "15s")
        .replace("$pool", ".*")
        .replace("$model", ".*")
        .replace("$member", ".*")
}

/// The expression of every rule of the shipped rule file.
fn rule_exprs() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo().join("deploy/prometheus/infergate-rules.yaml")).unwrap();
    let file: Value = serde_norway::from_str(&text).unwrap();
    file["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_dashboard_query_and_rule_answers_from_a_real_prometheus_scraping_the_demo() {
    let (_demo, gateway, admin) = common::demo_ready(20);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();

    // The demo's model servers, by pool, from what the gateway exports of them.
    let metrics = common::get(admin, "/metrics").unwrap();
    let mut servers: Vec<(String, String)> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("infergate_endpoint_running_requests{pool=\""))
        .filter_map(|l| {
            let (pool, rest) = l.split_once('"')?;
            let endpoint = rest.strip_prefix(",endpoint=\"")?.split('"').next()?;
            Some((pool.to_owned(), endpoint.to_owned()))
        })
        .collect();
    servers.sort();
    assert_eq!(servers.len(), 6, "{metrics}");

    // A global tier in front of the demo's gateway, its one member, for the global dashboard.
    let dir = common::TempDir::new("prometheus");
    let global_file = dir.path().join("global.yaml");
    std::fs::write(
        &global_file,
        format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: GlobalGatewayConfig\nspec:\n  members:\n    - {{name: demo, url: \"http://127.0.0.1:{gateway}\", adminUrl: \"http://127.0.0.1:{admin}\", region: local}}\n"
        ),
    )
    .unwrap();
    let (_global, global_port, global_admin) = common::global_ready(&global_file);

    // Prometheus: the gateway's and the global tier's admin ports and each server, labelled
    // with its pool as a Kubernetes scrape's relabelling would; the shipped rules loaded.
    let mut config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [{}]\nscrape_configs:\n  - job_name: infergate\n    static_configs: [{{targets: ['127.0.0.1:{admin}']}}]\n  - job_name: infergate-global\n    static_configs: [{{targets: ['127.0.0.1:{global_admin}']}}]\n  - job_name: vllm\n    static_configs:\n",
        repo().join("deploy/prometheus/infergate-rules.yaml").display()
    );
    for (pool, endpoint) in &servers {
        config.push_str(&format!(
            "      - {{targets: ['{endpoint}'], labels: {{pool: {pool}}}}}\n"
        ));
    }
    std::fs::write(dir.path().join("prometheus.yml"), &config).unwrap();
    let spawn = |[port]: [u16; 1]| {
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian's `prometheus` package) must be installed")
    };
    let ready = |[port]: [u16; 1]| {
        common::get(port, "/-/ready").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    };
    let (_prometheus, [prom]) = common::start_on_free_ports("Prometheus's /-/ready", spawn, ready);

    // Traffic for as long as the checks run: streams of both pools, adapters (their
    // residency shows only while they run), a rewrite by header, a refusal.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let addr = format!("127.0.0.1:{gateway}");
            let global = format!("127.0.0.1:{global_port}");
            let send = |path: &str, headers: &[(&str, &str)], body: &str| {
                common::http_with(&addr, "POST", path, headers, body, Duration::from_secs(30))
            };
            while !stop.load(Ordering::Relaxed) {
                // Through the global tier too, and one it refuses (no member serves it).
                common::http_with(
                    &global,
                    "POST",
                    "/v1/chat/completions",
                    &[],
                    r#"{"model": "meta-llama/Llama-3.1-8B-Instruct", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}"#,
                    Duration::from_secs(30),
                );
                common::http_with(
                    &global,
                    "POST",
                    "/v1/chat/completions",
                    &[],
                    r#"{"model": "no-such-model", "messages": []}"#,
                    Duration::from_secs(30),
                );
                send(
                    "/v1/chat/completions",
                    &[],
                    r#"{"model": "meta-llama/Llama-3.1-8B-Instruct", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 16, "messages": [{"role": "system", "content": "You are a helpful assistant who answers briefly."}, {"role": "user", "content": "Hello!"}]}"#,
                );
                send(
                    "/v1/chat/completions",
                    &[],
                    r#"{"model": "sql-lora", "stream": true, "max_tokens": 64, "messages": [{"role": "user", "content": "SELECT"}]}"#,
                );
                send(
                    "/v1/completions",
                    &[],
                    r#"{"model": "Qwen/Qwen3-32B", "stream": true, "max_tokens": 8, "prompt": "Once upon a time"}"#,
                );
                send(
                    "/v1/chat/completions",
                    &[("x-gateway-model-name-rewrite", "chat-lora")],
                    r#"{"model": "meta-llama/Llama-3.1-8B-Instruct", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}"#,
                );
                send(
                    "/v1/chat/completions",
                    &[],
                    r#"{"model": "no-such-model", "messages": []}"#,
                );
            }
        })
    };

    let (queries, variables) = shipped_queries();
    assert!(queries.len() >= 20, "{queries:?}");
    let mut names = BTreeSet::new();
    for (_, q) in &queries {
        names.extend(metric_names(q));
    }
    for v in &variables {
        names.extend(metric_names(v));
    }
    let rules = rule_exprs();
    assert_eq!(rules.len(), 9, "{rules:?}");
    for r in &rules {
        names.extend(metric_names(r));
    }

    // Every query answers with data within a minute of traffic (rates need two scrapes in
    // their window, quantiles a first token in it).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut empty: Vec<&(String, String)> = queries.iter().collect();
    while !empty.is_empty() && Instant::now() < deadline {
        empty.retain(|(_, q)| query(prom, &substituted(q)).is_empty());
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut missing: Vec<&String> = names
        .iter()
        .filter(|name| {
            let v = api(
                prom,
                &format!(
                    "/api/v1/series?match[]={}&start={started}",
                    encode(&format!("{{__name__=\"{name}\"}}"))
                ),
            );
            v["data"].as_array().is_none_or(Vec::is_empty)
        })
        .collect();
    missing.sort();
    // Each variable lists values.
    let no_values: Vec<&String> = variables
        .iter()
        .filter(|v| {
            let inner = v.trim_start_matches("label_values(").trim_end_matches(')');
            let (metric, label) = inner.split_once(',').unwrap();
            let answer = api(
                prom,
                &format!(
                    "/api/v1/label/{}/values?match[]={}",
                    label.trim(),
                    encode(metric.trim())
                ),
            );
            answer["data"].as_array().is_none_or(Vec::is_empty)
        })
        .collect();
    // The rules evaluate without error.
    let groups = api(prom, "/api/v1/rules");
    let unhealthy: Vec<String> = groups["data"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["health"] != "ok")
        .map(|r| format!("{}: {} {}", r["name"], r["health"], r["lastError"]))
        .collect();
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();

    assert!(
        empty.is_empty(),
        "queries without data after a minute:\n{}",
        empty
            .iter()
            .map(|(t, q)| format!("{t}: {q}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(missing.is_empty(), "metrics nobody exports: {missing:?}");
    assert!(
        no_values.is_empty(),
        "variables without values: {no_values:?}"
    );
    assert!(
        unhealthy.is_empty(),
        "rules that do not evaluate: {unhealthy:?}"
    );
    let evaluated = groups["data"]["groups"][0]["rules"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(evaluated, 6, "{groups}");
}

#[test]
fn metric_names_finds_every_family_an_expression_names() {
    assert_eq!(
        metric_names(
            r#"sum by (pool) (rate(infergate_cached_tokens_total{pool=~"$pool"}[5m])) / (sum(rate(vllm:prefix_cache_queries_total[1m])) > 0)"#
        ),
        [
            "infergate_cached_tokens_total",
            "vllm:prefix_cache_queries_total"
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    );
}
