use super::*;
use std::time::Duration;

fn features(tenant: Option<&str>) -> RequestFeatures {
    RequestFeatures {
        target_adapter: Some("sql-lora".into()),
        tenant: tenant.map(str::to_owned),
        priority: 1,
        prompt_block_hashes: vec![7, 8, 9],
        ..RequestFeatures::new("llama", 33)
    }
}

fn request(f: &RequestFeatures, arrived: Instant) -> Request<'_> {
    Request {
        features: f,
        asked_model: "llama",
        routed_model: "sql-lora",
        endpoint: "127.0.0.1:9",
        status: 200,
        arrived,
        pick: None,
    }
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("infergate-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_reach_the_file_with_usage_or_the_gateways_counts_and_close_flushes() {
    let metrics = Metrics::new();
    let path = temp("flush.jsonl");
    let capture = Capture::open(&path, &metrics).unwrap();
    let f = features(Some("team-a"));
    let arrived = Instant::now() + Duration::from_millis(5);
    capture.pending(request(&f, arrived)).complete(
        Some(Usage {
            prompt_tokens: 30,
            completion_tokens: 4,
            cached_tokens: 0,
        }),
        9,
    );
    capture.pending(request(&f, arrived)).complete(None, 6);
    capture.close().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    let (a, b) = (&lines[0], &lines[1]);
    assert_eq!(
        (&a["input_tokens"], &a["output_tokens"], &a["tokens_from"]),
        (&30.into(), &4.into(), &"usage".into())
    );
    assert_eq!(
        (&b["input_tokens"], &b["output_tokens"], &b["tokens_from"]),
        (&33.into(), &6.into(), &"gateway".into())
    );
    assert_eq!(a["adapter"], "sql-lora");
    assert_eq!(a["model"], "llama");
    assert_eq!(a["tenant"], "team-a");
    assert_eq!(a["priority"], "Critical");
    assert_eq!(a["prefix_hashes"][2], "0000000000000009");
    assert_eq!(a["start_unix_ms"], b["start_unix_ms"]);
    let arrival = a["arrival_ms"].as_f64().unwrap();
    assert!((4.0..50.0).contains(&arrival), "{arrival}");
    assert_eq!(metrics.capture_records.get(), 2);
    assert_eq!(metrics.capture_dropped.get(), 0);
    // After close, records are dropped and counted, never blocking.
    capture.pending(request(&f, arrived)).complete(None, 1);
    assert_eq!(metrics.capture_dropped.get(), 1);
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let metrics = Metrics::new();
    // A writer that never reads: the queue holds two records.
    let (tx, _rx) = mpsc::channel(2);
    let capture = Capture::feeding(tx, &temp("never.jsonl"), &metrics);
    let f = features(None);
    for _ in 0..5 {
        capture
            .pending(request(&f, Instant::now()))
            .complete(None, 1);
    }
    assert_eq!(metrics.capture_dropped.get(), 3);
}
