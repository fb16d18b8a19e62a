//! Many replicas in one process.

use crate::common::{chat, fast_spec, send};
use hyper::{Method, StatusCode};
use infergate_simserver::{serve_fleet, Dialect, SimError};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_serves_every_replica_on_its_own_port_until_shutdown() {
    let mut fleet = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..3 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(listener.local_addr().unwrap());
        let mut spec = fast_spec(200.0);
        spec.served_model_name = format!("model-{i}");
        spec.dialect = if i == 2 {
            Dialect::Sglang
        } else {
            Dialect::Vllm
        };
        fleet.push((spec, listener));
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let fleet = tokio::spawn(serve_fleet(fleet, async move {
        let _ = stopped.await;
    }));
    for (i, addr) in addrs.iter().enumerate() {
        let mut body = chat("hi", json!({"max_tokens": 2}));
        body["model"] = json!(format!("model-{i}"));
        let (status, bytes) = send(
            *addr,
            Method::POST,
            "/v1/chat/completions",
            Some(body.to_string().into_bytes()),
        )
        .await
        .unwrap();
        assert_eq!(status, StatusCode::OK, "{bytes:?}");
        let (_, metrics) = send(*addr, Method::GET, "/metrics", None).await.unwrap();
        let prefix: &[u8] = if i == 2 {
            b"# HELP sglang:"
        } else {
            b"# HELP vllm:"
        };
        assert!(metrics.starts_with(prefix));
    }
    stop.send(()).unwrap();
    fleet.await.unwrap().unwrap();
    assert!(
        tokio::net::TcpStream::connect(addrs[0]).await.is_err(),
        "ports close at shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_with_a_bad_spec_does_not_start() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut spec = fast_spec(1.0);
    spec.time_scale = -1.0;
    let result = serve_fleet(vec![(spec, listener)], std::future::pending()).await;
    assert!(matches!(result, Err(SimError::InvalidSpec(m)) if m.contains("time_scale")));
}
