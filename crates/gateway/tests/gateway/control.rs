//! The control plane and the admin listener: scrapes feed the picker (stale endpoints leave and
//! come back), readiness, metrics families, reload and drain.

use std::time::Duration;

use hyper::StatusCode;
use infergate_simserver::MetricsFault;
use serde_json::json;

use crate::common::*;

async fn spread(
    gw: &TestGateway,
    n: usize,
    tag: &str,
) -> std::collections::BTreeMap<String, usize> {
    let mut heads = Vec::new();
    for i in 0..n {
        let (s, h, b) = gw
            .post(
                "/v1/chat/completions",
                &chat(LLAMA, &format!("{tag} {i}"), json!({"max_tokens": 2})),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b:?}");
        heads.push(h);
    }
    by_endpoint(&heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_whose_metrics_hang_is_excluded_then_comes_back() {
    let (a, b) = (
        Replica::start(instant()).await,
        Replica::start(instant()).await,
    );
    let gw = TestGateway::ready(&config_yaml(
        &[PoolDef::new("llama", LLAMA, vec![a.addr, b.addr])],
        "",
    ))
    .await;
    let both = spread(&gw, 12, "warm").await;
    assert_eq!(both.len(), 2, "{both:?}");

    a.set_faults(json!({"metrics": "hang"})).await;
    // Past the picker's staleness limit (1 s) with every scrape of A timing out: from now on A
    // is stale. B is fresh as long as its scrapes land; a loaded machine that stalls this whole
    // process for a second leaves B stale for a moment too, and with every endpoint stale the
    // picker rightly keeps them all. So the twelve requests that prove A excluded are those of
    // the first round sent while B is fresh; while A were kept, the two would share every round.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let b_only = vec![b.addr.to_string()];
    eventually("A is excluded while B is fresh", || async {
        let only_b = spread(&gw, 12, "stale").await;
        only_b.keys().cloned().collect::<Vec<_>>() == b_only
    })
    .await;
    let m = gw.metric_text().await;
    assert!(
        m.contains(&format!(
            "infergate_scrape_errors_total{{pool=\"llama\",endpoint=\"{}\"}}",
            a.addr
        )),
        "{m}"
    );

    a.set_faults(json!({})).await;
    eventually("A takes requests again", || async {
        spread(&gw, 4, "healed")
            .await
            .contains_key(&a.addr.to_string())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_every_endpoint_to_be_scraped_once() {
    let mut silent = instant();
    silent.faults.metrics = MetricsFault::Hang;
    let (a, b) = (
        Replica::start(instant()).await,
        Replica::start(silent).await,
    );
    let gw = TestGateway::start(&config_yaml(
        &[PoolDef::new("llama", LLAMA, vec![a.addr, b.addr])],
        "",
    ))
    .await;
    let (s, _) = gw.admin_get("/healthz").await;
    assert_eq!(s, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (s, text) = gw.admin_get("/readyz").await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert!(text.contains(&b.addr.to_string()), "{text}");
    b.set_faults(json!({})).await;
    eventually("readyz says ready", || async {
        gw.admin_get("/readyz").await.0 == StatusCode::OK
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_metrics_carry_every_family() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(r.addr, "")).await;
    let (s, _, _) = gw
        .post(
            "/v1/chat/completions",
            &chat(
                LLAMA,
                "hi",
                json!({"stream": true, "max_tokens": 3, "stream_options": {"include_usage": true}}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let m = gw.metric_text().await;
    for family in [
        "infergate_requests_total{",
        "infergate_time_to_first_token_seconds_bucket{",
        "infergate_e2e_request_latency_seconds_bucket{",
        "infergate_prompt_tokens_total{",
        "infergate_completion_tokens_total{",
        "infergate_cached_tokens_total{",
        "infergate_routing_decisions_total{",
        "infergate_pool_queue_spread{",
        "infergate_pool_saturation{",
        "infergate_scrape_age_seconds{",
        "infergate_picker_latency_seconds_bucket{",
        "infergate_shed_requests_total{pool=\"llama\"} 0",
        "infergate_scrape_errors_total{",
        "infergate_upstream_retries_total{",
    ] {
        assert!(m.contains(family), "{family} missing:\n{m}");
    }
    let line = format!("infergate_requests_total{{model=\"{LLAMA}\",pool=\"llama\",endpoint=\"{}\",status=\"200\"}} 1", r.addr);
    assert!(m.contains(&line), "{line} missing:\n{m}");
    // The scrape age is small: scrapes are landing.
    assert!(metric_sum(&m, "infergate_scrape_age_seconds{") < 1.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_swaps_pools_with_no_failed_request() {
    let (a, b) = (
        Replica::start(instant()).await,
        Replica::start(instant()).await,
    );
    let mut q = instant();
    q.served_model_name = "qwen3-32b".into();
    let qwen = Replica::start(q).await;
    let before = llama_yaml(a.addr, "");
    let gw = TestGateway::ready(&before).await;
    let addr = gw.addr;
    let load = tokio::spawn(async move {
        let mut statuses = Vec::new();
        for i in 0..60 {
            let (s, _) = send(
                addr,
                hyper::Method::POST,
                "/v1/chat/completions",
                Some(chat(LLAMA, &format!("load {i}"), json!({"max_tokens": 2})).to_string()),
                &[],
            )
            .await;
            statuses.push(s);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        statuses
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = config_yaml(
        &[
            PoolDef::new("llama", LLAMA, vec![a.addr, b.addr]),
            PoolDef::new("qwen", "qwen3-32b", vec![qwen.addr]),
        ],
        "",
    );
    gw.handle.reload(resolve(&after)).unwrap();
    let statuses = load.await.unwrap();
    assert!(
        statuses.iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}"
    );
    gw.wait_ready().await;
    let (s, _, _) = gw
        .post(
            "/v1/chat/completions",
            &chat("qwen3-32b", "hi", json!({"max_tokens": 2})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let used = spread(&gw, 10, "after").await;
    assert_eq!(used.len(), 2, "the new endpoint takes traffic: {used:?}");
    // A bad config is refused and the running one stays.
    let bad = after.replace("modelName: qwen3-32b", &format!("modelName: {LLAMA}"));
    assert!(infergate_config::gateway::load_from_str(&bad).is_err());
    let m = gw.metric_text().await;
    assert!(
        m.contains("infergate_config_reloads_total{outcome=\"ok\"} 1"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_streams_in_flight_and_refuses_new_connections() {
    let r = Replica::start(real_time()).await;
    let mut gw = TestGateway::ready(&llama_yaml(r.addr, "")).await;
    let addr = gw.addr;
    let stream = tokio::spawn(async move {
        send(
            addr,
            hyper::Method::POST,
            "/v1/chat/completions",
            Some(
                chat(
                    LLAMA,
                    "a story",
                    json!({"stream": true, "max_tokens": 60, "ignore_eos": true}),
                )
                .to_string(),
            ),
            &[],
        )
        .await
    });
    // Shut down once the stream is under way, however long a loaded machine takes to get there.
    eventually("the stream is in flight", || async {
        metric_sum(&gw.metric_text().await, "infergate_in_flight_responses") >= 1.0
    })
    .await;
    let drained = gw.shutdown();
    let (s, body) = stream.await.unwrap();
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.ends_with("data: [DONE]\n\n"),
        "the stream was cut: {text}"
    );
    tokio::time::timeout(CALL_LIMIT, drained)
        .await
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
